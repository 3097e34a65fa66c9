//! The file's examples validate against their schemas, and the schemas reject real mistakes.

use serde_json::{json, Value};

use crate::support::{deref, operations, spec, validation_errors};

/// `(schema, example)` pairs of a media type object.
fn media_examples<'a>(spec: &'a Value, media: &'a Value) -> Vec<(&'a Value, &'a Value)> {
    let schema = &media["schema"];
    let mut out = Vec::new();
    if let Some(e) = media.get("example") {
        out.push((schema, e));
    }
    if let Some(map) = media.get("examples").and_then(Value::as_object) {
        for e in map.values() {
            out.push((schema, &deref(spec, e)["value"]));
        }
    }
    out
}

#[test]
fn examples_validate_against_their_schemas() {
    let spec = spec();
    let mut checked = 0;
    let mut failures = Vec::new();
    let mut check = |what: String, schema: &Value, example: &Value| {
        checked += 1;
        let errors = validation_errors(&spec, schema, example);
        if !errors.is_empty() {
            failures.push(format!("{what}: {errors:?}"));
        }
    };
    for ((method, path), op) in operations(&spec) {
        if let Some(media) = op.pointer("/requestBody/content/application~1json") {
            for (schema, example) in media_examples(&spec, media) {
                check(format!("{method} {path} request"), schema, example);
            }
        }
        for (status, resp) in op["responses"].as_object().unwrap() {
            if let Some(media) = deref(&spec, resp).pointer("/content/application~1json") {
                for (schema, example) in media_examples(&spec, media) {
                    check(format!("{method} {path} {status}"), schema, example);
                }
            }
        }
    }
    let hook = &spec["webhooks"]["paymentCallback"]["post"];
    let media = &hook["requestBody"]["content"]["application/json"];
    for (schema, example) in media_examples(&spec, media) {
        check("callback body".into(), schema, example);
    }
    assert!(failures.is_empty(), "{failures:#?}");
    assert!(checked >= 15, "only {checked} examples found");
}

/// The schemas are strict enough to catch real mistakes, and their references resolve: a valid
/// example passes, and each single mistake in it fails.
#[test]
fn schemas_reject_real_mistakes() {
    let spec = spec();
    let payment_schema = json!({"$ref": "#/components/schemas/Payment"});
    let good = spec["components"]["examples"]["PaymentProcessing"]["value"].clone();
    assert!(validation_errors(&spec, &payment_schema, &good).is_empty());
    let mut extra = good.clone();
    extra["a_field_added_later"] = json!(1);
    assert!(
        validation_errors(&spec, &payment_schema, &extra).is_empty(),
        "unknown fields are allowed"
    );
    type Mutation = Box<dyn Fn(&mut Value)>;
    let mistakes: Vec<(&str, Mutation)> = vec![
        (
            "amount as a string",
            Box::new(|p| p["amount"] = json!("3400")),
        ),
        (
            "amount_usdt as a number",
            Box::new(|p| p["merchant_information"]["amount_usdt"] = json!(34.0)),
        ),
        (
            "amount_usdt with 2 decimals",
            Box::new(|p| p["merchant_information"]["amount_usdt"] = json!("34.00")),
        ),
        (
            "course as a string",
            Box::new(|p| p["merchant_information"]["course"] = json!("100.00")),
        ),
        (
            "bank_code missing",
            Box::new(|p| {
                p.as_object_mut().unwrap().remove("bank_code");
            }),
        ),
        ("unknown status", Box::new(|p| p["status"] = json!("paid"))),
        ("unknown flow", Box::new(|p| p["flow"] = json!("live"))),
        ("id not a UUID", Box::new(|p| p["id"] = json!("42"))),
        (
            "timestamp without milliseconds",
            Box::new(|p| p["created_at"] = json!("2026-10-01T12:00:00Z")),
        ),
        (
            "processing without requisite",
            Box::new(|p| p["requisite"] = Value::Null),
        ),
        (
            "error_code outside error",
            Box::new(|p| p["error_code"] = json!("provider_no_requisites")),
        ),
        (
            "error without error_code",
            Box::new(|p| {
                p["status"] = json!("error");
                p["merchant_information"] = Value::Null;
                p["requisite"] = Value::Null;
                p["holder_name"] = Value::Null;
            }),
        ),
        (
            "is_test with runtime_live",
            Box::new(|p| p["is_test"] = json!(true)),
        ),
    ];
    for (what, mutate) in mistakes {
        let mut bad = good.clone();
        mutate(&mut bad);
        assert!(
            !validation_errors(&spec, &payment_schema, &bad).is_empty(),
            "a Payment with {what} passed"
        );
    }
    let error_schema = json!({"$ref": "#/components/schemas/Error"});
    let error = json!({"code": "bad_request", "message": "m", "request_id": "r"});
    assert!(validation_errors(&spec, &error_schema, &error).is_empty());
    let mut bad = error.clone();
    bad["code"] = json!("no_such_code");
    assert!(!validation_errors(&spec, &error_schema, &bad).is_empty());
    let unauthorized = deref(&spec, &spec["components"]["responses"]["Unauthorized"]);
    let schema = &unauthorized["content"]["application/json"]["schema"];
    assert!(
        !validation_errors(&spec, schema, &error).is_empty(),
        "401 with bad_request"
    );
    let request = json!({"$ref": "#/components/schemas/CreatePaymentRequest"});
    let body = json!({"merchant_payment_id": "o-1", "amount": "3400", "payment_method": "sbp"});
    assert!(validation_errors(&spec, &request, &body).is_empty());
    let mut unknown = body.clone();
    unknown["deadline"] = json!(1);
    assert!(!validation_errors(&spec, &request, &unknown).is_empty());
}
