//! The agreement between `docs/openapi.yaml` and the server.
//!
//! 1. Routes: every `(method, path)` of the merchant router ([`merchant::route_list`], which
//!    the router is built from) is an operation of the file, and every operation of the file is
//!    routed; the sandbox-only operations are exactly [`merchant::SANDBOX_ROUTES`].
//! 2. Error codes: the file's `ErrorCode` enum is [`ErrorCode::ALL`], and every error response
//!    of every operation lists only codes whose HTTP status is that response's status.
//! 3. Examples in the file validate against their own schemas.
//! 4. Real responses of the real server (127.0.0.1:0, fresh data dir) validate against the
//!    schema the file gives for their `(path, method, status)`, and carry the response headers
//!    the file marks as required.

use std::collections::{BTreeMap, BTreeSet};

use payments_client::{ApiResponse, SignSpec};
use payments_core::auth::{Environment, Scope};
use payments_core::project::RateLimit;
use payments_core::service::{Actor, ProjectPatch};
use payments_core::ErrorCode;
use payments_http::merchant;
use payments_http::testing::TestServer;
use reqwest::{Method, StatusCode};
use serde_json::{json, Value};

const METHODS: [&str; 8] = [
    "get", "put", "post", "delete", "options", "head", "patch", "trace",
];

fn spec() -> Value {
    let path = concat!(env!("CARGO_MANIFEST_DIR"), "/../docs/openapi.yaml");
    let text = std::fs::read_to_string(path).expect("docs/openapi.yaml exists");
    serde_norway::from_str(&text).expect("docs/openapi.yaml is valid YAML")
}

/// Follows a local `$ref` (`#/components/...`) once, if `v` is one.
fn deref<'a>(spec: &'a Value, v: &'a Value) -> &'a Value {
    match v.get("$ref").and_then(Value::as_str) {
        Some(r) => {
            let pointer = r.strip_prefix('#').expect("only local references");
            spec.pointer(pointer)
                .unwrap_or_else(|| panic!("dangling reference {r}"))
        }
        None => v,
    }
}

/// A validator for `schema` whose `#/components/...` references resolve against the file.
fn validator(spec: &Value, schema: &Value) -> jsonschema::Validator {
    let root = json!({ "components": spec["components"], "allOf": [schema] });
    jsonschema::options()
        .with_draft(jsonschema::Draft::Draft202012)
        .build(&root)
        .unwrap_or_else(|e| panic!("schema does not compile: {e}\n{schema}"))
}

fn validation_errors(spec: &Value, schema: &Value, instance: &Value) -> Vec<String> {
    validator(spec, schema)
        .iter_errors(instance)
        .map(|e| format!("{} at {}", e, e.instance_path()))
        .collect()
}

/// Every operation of the file as `(METHOD, path) -> operation`.
fn operations(spec: &Value) -> BTreeMap<(String, String), &Value> {
    let mut ops = BTreeMap::new();
    for (path, item) in spec["paths"].as_object().expect("paths is an object") {
        for method in METHODS {
            if let Some(op) = item.get(method) {
                ops.insert((method.to_uppercase(), path.clone()), op);
            }
        }
    }
    ops
}

#[test]
fn every_route_is_documented_and_every_documented_operation_is_routed() {
    let spec = spec();
    let documented: BTreeSet<(String, String)> = operations(&spec).into_keys().collect();
    let routed: BTreeSet<(String, String)> = merchant::route_list(Environment::Sandbox)
        .into_iter()
        .map(|(m, p)| (m.to_string(), p.to_string()))
        .collect();
    let undocumented: Vec<_> = routed.difference(&documented).collect();
    let unrouted: Vec<_> = documented.difference(&routed).collect();
    assert!(
        undocumented.is_empty(),
        "routed but not in docs/openapi.yaml: {undocumented:?}"
    );
    assert!(
        unrouted.is_empty(),
        "in docs/openapi.yaml but not routed: {unrouted:?}"
    );

    let sandbox_only: BTreeSet<(String, String)> = operations(&spec)
        .into_iter()
        .filter(|(_, op)| op["x-sandbox-only"] == json!(true))
        .map(|(k, _)| k)
        .collect();
    let expected: BTreeSet<(String, String)> = merchant::SANDBOX_ROUTES
        .iter()
        .map(|(m, p)| (m.to_string(), p.to_string()))
        .collect();
    assert_eq!(sandbox_only, expected, "x-sandbox-only marks");
    assert!(merchant::route_list(Environment::Production)
        .iter()
        .all(|r| !merchant::SANDBOX_ROUTES.contains(r)));
}

/// The codes an error response's schema allows: the `code` enum or const of its `allOf`
/// refinement, or the whole catalogue for a plain `Error`.
fn response_codes(spec: &Value, schema: &Value) -> Vec<String> {
    let schema = deref(spec, schema);
    if let Some(parts) = schema.get("allOf").and_then(Value::as_array) {
        for part in parts {
            let part = deref(spec, part);
            let code = &part["properties"]["code"];
            if let Some(c) = code.get("const").and_then(Value::as_str) {
                return vec![c.to_string()];
            }
            if let Some(list) = code.get("enum").and_then(Value::as_array) {
                return list
                    .iter()
                    .map(|c| c.as_str().unwrap().to_string())
                    .collect();
            }
            if part.get("allOf").is_some() {
                let inner = response_codes(spec, part);
                if !inner.is_empty() {
                    return inner;
                }
            }
        }
    }
    Vec::new()
}

#[test]
fn error_codes_match_the_catalogue_and_their_statuses() {
    let spec = spec();
    let file: BTreeSet<String> = spec["components"]["schemas"]["ErrorCode"]["enum"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| c.as_str().unwrap().to_string())
        .collect();
    let code: BTreeSet<String> = ErrorCode::ALL
        .iter()
        .map(|c| c.as_str().to_string())
        .collect();
    assert_eq!(file, code, "ErrorCode enum of docs/openapi.yaml");
    let status_of: BTreeMap<&str, u16> = ErrorCode::ALL
        .iter()
        .map(|c| (c.as_str(), c.http_status()))
        .collect();

    for ((method, path), op) in operations(&spec) {
        for (status, resp) in op["responses"].as_object().unwrap() {
            let status: u16 = status.parse().unwrap();
            if status < 400 {
                continue;
            }
            let resp = deref(&spec, resp);
            let schema = &resp["content"]["application/json"]["schema"];
            if path == "/readyz" {
                continue;
            }
            let codes = response_codes(&spec, schema);
            assert!(
                !codes.is_empty(),
                "{method} {path} {status}: the schema names no error code"
            );
            for c in codes {
                assert_eq!(
                    status_of.get(c.as_str()),
                    Some(&status),
                    "{method} {path}: code {c} documented under {status}"
                );
            }
        }
    }
}

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

/// The documented response of an operation for a status.
fn documented_response<'a>(spec: &'a Value, path: &str, method: &str, status: u16) -> &'a Value {
    let op = &spec["paths"][path][method.to_lowercase()];
    assert!(
        op.is_object(),
        "{method} {path} is not in docs/openapi.yaml"
    );
    let resp = op["responses"]
        .get(status.to_string())
        .unwrap_or_else(|| panic!("{method} {path}: status {status} is not documented"));
    deref(spec, resp)
}

/// Checks one real response against the file: body schema and required headers.
fn check(
    spec: &Value,
    seen: &mut BTreeSet<(String, String, u16)>,
    path: &str,
    method: &str,
    resp: &ApiResponse,
) {
    let status = resp.status.as_u16();
    let doc = documented_response(spec, path, method, status);
    let schema = &doc["content"]["application/json"]["schema"];
    assert!(
        schema.is_object(),
        "{method} {path} {status}: no JSON schema"
    );
    assert_eq!(
        resp.headers
            .get("content-type")
            .and_then(|v| v.to_str().ok()),
        Some("application/json"),
        "{method} {path} {status}"
    );
    let body: Value = serde_json::from_slice(&resp.body)
        .unwrap_or_else(|e| panic!("{method} {path} {status}: body is not JSON: {e}"));
    let errors = validation_errors(spec, schema, &body);
    assert!(
        errors.is_empty(),
        "{method} {path} {status}: {errors:#?}\n{body}"
    );
    if let Some(headers) = doc.get("headers").and_then(Value::as_object) {
        for (name, h) in headers {
            let h = deref(spec, h);
            let value = resp
                .headers
                .get(name.as_str())
                .and_then(|v| v.to_str().ok());
            match value {
                Some(v) => {
                    let errors = validation_errors(spec, &h["schema"], &json!(v));
                    assert!(
                        errors.is_empty(),
                        "{method} {path} {status}: header {name}: {errors:?}"
                    );
                }
                None => assert!(
                    h["required"] != json!(true),
                    "{method} {path} {status}: required header {name} missing"
                ),
            }
        }
    }
    // Numbers written from decimals: course and rate carry exactly two decimals on the wire.
    let text = String::from_utf8_lossy(&resp.body);
    for field in ["\"course\":", "\"rate\":"] {
        for (i, _) in text.match_indices(field) {
            let rest = &text[i + field.len()..];
            let number: String = rest
                .chars()
                .take_while(|c| c.is_ascii_digit() || *c == '.')
                .collect();
            let decimals = number.split_once('.').map(|(_, d)| d.len());
            assert_eq!(decimals, Some(2), "{field} {number} in {text}");
        }
    }
    seen.insert((method.to_string(), path.to_string(), status));
}

async fn start() -> TestServer {
    TestServer::sandbox().await
}

/// An unsigned GET with a plain client.
async fn plain_get(s: &TestServer, path_and_query: &str) -> ApiResponse {
    let client = s.client();
    let req = client
        .prepare(Method::GET, path_and_query, b"", None)
        .unwrap();
    client.send(&req).await.unwrap()
}

fn create_body(mpid: &str, amount: &str) -> Value {
    json!({"merchant_payment_id": mpid, "amount": amount, "payment_method": "sbp"})
}

#[tokio::test]
async fn real_responses_validate_against_the_file() {
    let spec = spec();
    let s = start().await;
    let c = &s.client();
    let mut seen = BTreeSet::new();
    let create = "/api/v1/payments";
    let get = "/api/v1/payments/{id}";
    let complete = "/api/v1/test/payments/{id}/complete";
    let cancel = "/api/v1/test/payments/{id}/cancel";

    // 201 processing, 200 repeat, GET.
    let r = c
        .create_payment(&create_body("oa-1", "3400"))
        .await
        .unwrap();
    assert_eq!(r.status, StatusCode::CREATED);
    assert_eq!(r.json["status"], "processing");
    check(&spec, &mut seen, create, "POST", &r);
    let id = r.json["id"].as_str().unwrap().to_string();
    let r = c
        .create_payment(&create_body("oa-1", "3400.0"))
        .await
        .unwrap();
    assert_eq!(r.status, StatusCode::OK);
    check(&spec, &mut seen, create, "POST", &r);
    let r = c.get_payment(&id).await.unwrap();
    assert_eq!(r.status, StatusCode::OK);
    check(&spec, &mut seen, get, "GET", &r);
    let mut card = create_body("oa-card", "1500.50");
    card["payment_method"] = json!("card_transfer");
    card["callback_url"] = json!("https://shop.example.com/callbacks");
    let r = c.create_payment(&card).await.unwrap();
    assert_eq!(r.status, StatusCode::CREATED);
    check(&spec, &mut seen, create, "POST", &r);

    // 201 error (.13, .14), 422 with payment_id (.15) and its 200 repeat.
    for (mpid, amount, code) in [
        ("oa-13", "100.13", "provider_no_requisites"),
        ("oa-14", "100.14", "provider_result_ambiguous"),
    ] {
        let r = c.create_payment(&create_body(mpid, amount)).await.unwrap();
        assert_eq!(r.status, StatusCode::CREATED);
        assert_eq!(r.json["error_code"], code);
        check(&spec, &mut seen, create, "POST", &r);
    }
    let r = c
        .create_payment(&create_body("oa-15", "100.15"))
        .await
        .unwrap();
    assert_eq!(
        (r.status, r.code()),
        (
            StatusCode::UNPROCESSABLE_ENTITY,
            Some("payment_not_routable")
        )
    );
    assert!(r.json["payment_id"].is_string(), "{}", r.json);
    check(&spec, &mut seen, create, "POST", &r);
    let r = c
        .create_payment(&create_body("oa-15", "100.15"))
        .await
        .unwrap();
    assert_eq!(r.status, StatusCode::OK);
    assert_eq!(r.json["status"], "error");
    check(&spec, &mut seen, create, "POST", &r);
    let mut bank = create_body("oa-bank", "100");
    bank["bank_code"] = json!("No Such Bank");
    let r = c.create_payment(&bank).await.unwrap();
    assert_eq!(r.code(), Some("bank_not_found"));
    check(&spec, &mut seen, create, "POST", &r);

    // 400, 401 (token, signature with the sandbox base), 403 scope, 409 both, 413.
    let mut unknown = create_body("oa-400", "100");
    unknown["deadline"] = json!(60);
    let r = c.create_payment(&unknown).await.unwrap();
    assert_eq!(r.code(), Some("bad_request"));
    check(&spec, &mut seen, create, "POST", &r);
    let r = c
        .with_token(&s.creds().token.expose()[..20])
        .create_payment(&create_body("oa-401", "100"))
        .await
        .unwrap();
    assert_eq!(r.code(), Some("token_invalid"));
    check(&spec, &mut seen, create, "POST", &r);
    let b = serde_json::to_vec(&create_body("oa-401", "100")).unwrap();
    let mut tampered = c
        .prepare(Method::POST, create, &b, Some(&SignSpec::default()))
        .unwrap();
    tampered.body = serde_json::to_vec(&create_body("oa-401", "999")).unwrap();
    let r = c.send(&tampered).await.unwrap();
    assert_eq!(r.code(), Some("signature_invalid"));
    assert!(r.json["signature_base"].is_string());
    check(&spec, &mut seen, create, "POST", &r);
    let read_only = s
        .state
        .service
        .issue_token(s.project(), vec![Scope::PaymentsRead], &Actor("t".into()))
        .await
        .unwrap();
    let r = c
        .with_token(read_only.token.expose())
        .create_payment(&create_body("oa-403", "100"))
        .await
        .unwrap();
    assert_eq!(r.code(), Some("insufficient_scope"));
    check(&spec, &mut seen, create, "POST", &r);
    let r = c
        .create_payment(&create_body("oa-1", "3401"))
        .await
        .unwrap();
    assert_eq!(r.code(), Some("payment_idempotency_conflict"));
    check(&spec, &mut seen, create, "POST", &r);
    let once = c
        .prepare(
            Method::POST,
            create,
            &serde_json::to_vec(&create_body("oa-409", "100")).unwrap(),
            Some(&SignSpec::default()),
        )
        .unwrap();
    assert_eq!(c.send(&once).await.unwrap().status, StatusCode::CREATED);
    let r = c.send(&once).await.unwrap();
    assert_eq!(r.code(), Some("request_replayed"));
    check(&spec, &mut seen, create, "POST", &r);
    let mut big = create_body("oa-413", "100");
    big["callback_url"] = json!(format!("https://example.com/{}", "x".repeat(17 * 1024)));
    let r = c.create_payment(&big).await.unwrap();
    assert_eq!(r.status, StatusCode::PAYLOAD_TOO_LARGE);
    check(&spec, &mut seen, create, "POST", &r);
    // 415: a signed body declared as something else than JSON.
    let mut plain = c
        .prepare(
            Method::POST,
            create,
            &serde_json::to_vec(&create_body("oa-415", "100")).unwrap(),
            Some(&SignSpec::default()),
        )
        .unwrap();
    for (name, value) in &mut plain.headers {
        if name.eq_ignore_ascii_case("content-type") {
            *value = "text/plain".into();
        }
    }
    let r = c.send(&plain).await.unwrap();
    assert_eq!(r.code(), Some("unsupported_media_type"));
    check(&spec, &mut seen, create, "POST", &r);

    // GET errors: 404 unknown and malformed.
    for bad in ["00000000-0000-4000-8000-000000000000", "not-a-uuid"] {
        let r = c.get_payment(bad).await.unwrap();
        assert_eq!(r.code(), Some("payment_not_found"));
        check(&spec, &mut seen, get, "GET", &r);
    }

    // Project, banks, health.
    let r = c.project().await.unwrap();
    assert_eq!(r.status, StatusCode::OK);
    check(&spec, &mut seen, "/api/v1/project", "GET", &r);
    for q in [
        "",
        "?geo_code=kz",
        "?geo_code=KAZ",
        "?geo_code=RU&geo_code=KZ",
    ] {
        let r = plain_get(&s, &format!("/api/v1/banks{q}")).await;
        check(&spec, &mut seen, "/api/v1/banks", "GET", &r);
    }
    for path in ["/healthz", "/readyz"] {
        let r = plain_get(&s, path).await;
        assert_eq!(r.status, StatusCode::OK);
        check(&spec, &mut seen, path, "GET", &r);
    }
    // A path the file does not list: 404 not_found with the error body.
    let r = plain_get(&s, "/api/v1/nowhere").await;
    assert_eq!(r.code(), Some("not_found"));
    assert!(validation_errors(
        &spec,
        &json!({"$ref": "#/components/schemas/Error"}),
        &r.json
    )
    .is_empty());

    // Test helpers: 409 on a live payment, then complete and cancel test payments.
    let helper = |id: &str, action: &str| format!("/api/v1/test/payments/{id}/{action}");
    let r = c.post(&helper(&id, "complete"), b"").await.unwrap();
    assert_eq!(r.code(), Some("invalid_transition"));
    check(&spec, &mut seen, complete, "POST", &r);
    let r = c
        .post(
            &helper("00000000-0000-4000-8000-000000000000", "cancel"),
            b"",
        )
        .await
        .unwrap();
    assert_eq!(r.code(), Some("payment_not_found"));
    check(&spec, &mut seen, cancel, "POST", &r);
    s.patch_project(ProjectPatch {
        test_mode: Some(true),
        ..Default::default()
    })
    .await;
    let t1 = c
        .create_payment(&create_body("oa-t1", "500"))
        .await
        .unwrap();
    check(&spec, &mut seen, create, "POST", &t1);
    let t1 = t1.json["id"].as_str().unwrap().to_string();
    let r = c
        .post(&helper(&t1, "complete"), br#"{"unknown": 1}"#)
        .await
        .unwrap();
    assert_eq!(r.code(), Some("bad_request"));
    check(&spec, &mut seen, complete, "POST", &r);
    let r = c
        .post(&helper(&t1, "complete"), br#"{"amount": "490"}"#)
        .await
        .unwrap();
    assert_eq!(r.status, StatusCode::OK, "{}", r.json);
    assert_eq!(r.json["amount"], json!(490));
    check(&spec, &mut seen, complete, "POST", &r);
    let t2 = c
        .create_payment(&create_body("oa-t2", "500"))
        .await
        .unwrap();
    let t2 = t2.json["id"].as_str().unwrap().to_string();
    let r = c.post(&helper(&t2, "cancel"), b"{}").await.unwrap();
    assert_eq!(r.status, StatusCode::OK, "{}", r.json);
    check(&spec, &mut seen, cancel, "POST", &r);
    let r = c.get_payment(&t2).await.unwrap();
    check(&spec, &mut seen, get, "GET", &r);

    // 403 ip_not_allowed, then 429 with Retry-After.
    s.patch_project(ProjectPatch {
        ip_allow_list: Some(vec!["10.0.0.0/8".into()]),
        ..Default::default()
    })
    .await;
    let r = c.project().await.unwrap();
    assert_eq!(r.code(), Some("ip_not_allowed"));
    check(&spec, &mut seen, "/api/v1/project", "GET", &r);
    s.patch_project(ProjectPatch {
        ip_allow_list: Some(Vec::new()),
        rate_limit: Some(RateLimit {
            per_second: 1,
            burst: 1,
        }),
        ..Default::default()
    })
    .await;
    let mut limited = None;
    for _ in 0..3 {
        let r = c.get_payment(&id).await.unwrap();
        if r.status == StatusCode::TOO_MANY_REQUESTS {
            limited = Some(r);
            break;
        }
    }
    let r = limited.expect("a burst of 1 is exceeded by the second request");
    check(&spec, &mut seen, get, "GET", &r);

    s.stop().await;

    // The statuses this test must have exercised (a guard against silently skipping cases).
    for (method, path, status) in [
        ("POST", create, 200),
        ("POST", create, 201),
        ("POST", create, 400),
        ("POST", create, 401),
        ("POST", create, 403),
        ("POST", create, 409),
        ("POST", create, 413),
        ("POST", create, 415),
        ("POST", create, 422),
        ("GET", get, 200),
        ("GET", get, 404),
        ("GET", get, 429),
        ("GET", "/api/v1/project", 200),
        ("GET", "/api/v1/project", 403),
        ("GET", "/api/v1/banks", 200),
        ("GET", "/api/v1/banks", 400),
        ("POST", complete, 200),
        ("POST", complete, 400),
        ("POST", complete, 409),
        ("POST", cancel, 200),
        ("POST", cancel, 404),
        ("GET", "/healthz", 200),
        ("GET", "/readyz", 200),
    ] {
        assert!(
            seen.contains(&(method.to_string(), path.to_string(), status)),
            "not exercised: {method} {path} {status}"
        );
    }
}
