//! Real responses of the real server validate against the file and carry its required
//! headers.

use payments_directory::DirectoryAccess;
use std::collections::BTreeSet;

use payments_client::{ApiResponse, SignSpec};
use payments_core::auth::Scope;
use payments_core::project::RateLimit;
use payments_core::service::Actor;
use payments_directory::ProjectPatch;
use payments_server::testing::TestServer;
use reqwest::{Method, StatusCode};
use serde_json::{json, Value};

use crate::support::{deref, spec, validation_errors};

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
            // With `X-Decimals: string` the same text is quoted.
            let rest = text[i + field.len()..].trim_start_matches('"');
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
    assert!(r.json.get("payment_page_url").is_none(), "the page is off");
    check(&spec, &mut seen, create, "POST", &r);
    // The list: a page with a cursor, the last page, a refused filter, a missing scope.
    let list = "/api/v1/payments";
    let r = c.list_payments("limit=1").await.unwrap();
    assert_eq!(r.status, StatusCode::OK, "{}", r.json);
    assert!(r.json["next_cursor"].is_string());
    check(&spec, &mut seen, list, "GET", &r);
    let r = c
        .list_payments("merchant_payment_id_prefix=oa-1&limit=100")
        .await
        .unwrap();
    assert_eq!(r.json["next_cursor"], Value::Null, "{}", r.json);
    check(&spec, &mut seen, list, "GET", &r);
    let listed = c
        .prepare(Method::GET, "/api/v1/payments?limit=1", b"", None)
        .unwrap();
    let r = send_with_decimals(c, &listed, "string").await;
    assert!(r.json["data"][0]["amount"].is_string(), "{}", r.json);
    check(&spec, &mut seen, list, "GET", &r);
    let r = c.list_payments("limit=1000").await.unwrap();
    assert_eq!(r.status, StatusCode::BAD_REQUEST);
    check(&spec, &mut seen, list, "GET", &r);
    let create_only = s
        .state
        .service
        .directory()
        .issue_token(s.project(), vec![Scope::PaymentsCreate], &Actor("t".into()))
        .await
        .unwrap();
    let r = c
        .with_token(create_only.token.expose())
        .list_payments("")
        .await
        .unwrap();
    assert_eq!(r.code(), Some("insufficient_scope"));
    check(&spec, &mut seen, list, "GET", &r);

    // With the payer page on: payment_page_url in the create response and GET, the same link.
    s.patch_project(ProjectPatch {
        payer_page: Some(true),
        ..ProjectPatch::default()
    })
    .await;
    let r = c
        .create_payment(&create_body("oa-page", "700"))
        .await
        .unwrap();
    assert_eq!(r.status, StatusCode::CREATED);
    let link = r.json["payment_page_url"]
        .as_str()
        .expect("a link")
        .to_string();
    assert!(
        link.starts_with(s.cabinet_url.as_deref().expect("the cabinet runs")),
        "{link}"
    );
    check(&spec, &mut seen, create, "POST", &r);
    let r = c.get_payment(r.json["id"].as_str().unwrap()).await.unwrap();
    assert_eq!(r.json["payment_page_url"], link.as_str());
    check(&spec, &mut seen, get, "GET", &r);
    // Payments made before the page was on get their link at their next read.
    let r = c.get_payment(&id).await.unwrap();
    assert!(r.json["payment_page_url"].is_string(), "{}", r.json);
    s.patch_project(ProjectPatch {
        payer_page: Some(false),
        ..ProjectPatch::default()
    })
    .await;

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
        .directory()
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
    history_of_a_test_payment(c, &spec, &mut seen, &t1).await;
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
        ("GET", "/api/v1/payments", 200),
        ("GET", "/api/v1/payments", 400),
        ("GET", "/api/v1/payments", 403),
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
        ("GET", "/api/v1/payments/{id}/history", 200),
        ("GET", "/api/v1/payments/{id}/history", 404),
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

/// The history of test payment `id`, paid with another amount and without a callback URL (no
/// callback ever): its creation, its requisites and the paid action, each with its cause and
/// source; with `X-Decimals: string` too; an unknown payment is `404`.
async fn history_of_a_test_payment(
    c: &payments_client::MerchantClient,
    spec: &Value,
    seen: &mut BTreeSet<(String, String, u16)>,
    id: &str,
) {
    let path = "/api/v1/payments/{id}/history";
    let r = c.payment_history(id).await.unwrap();
    assert_eq!(r.status, StatusCode::OK, "{}", r.json);
    let entries: Vec<_> = r.json["history"].as_array().unwrap().iter().collect();
    let seen_causes: Vec<_> = entries
        .iter()
        .map(|e| {
            (
                &e["status"],
                &e["previous_status"],
                &e["cause"],
                &e["source"],
            )
        })
        .map(|(a, b, c, d)| json!([a, b, c, d]))
        .collect();
    assert_eq!(
        seen_causes,
        [
            json!(["created", null, "created", "merchant"]),
            json!(["processing", "created", "requisites_issued", "provider"]),
            json!(["completed", "processing", "confirmed", "merchant"]),
        ],
        "{}",
        r.json
    );
    assert_eq!(
        (&entries[0]["amount"], &entries[2]["amount"]),
        (&json!(500), &json!(490))
    );
    assert!(entries
        .windows(2)
        .all(|w| w[0]["at"].as_str() <= w[1]["at"].as_str()));
    check(spec, seen, path, "GET", &r);
    let asked = c
        .prepare(
            Method::GET,
            &format!("/api/v1/payments/{id}/history"),
            b"",
            None,
        )
        .unwrap();
    let r = send_with_decimals(c, &asked, "string").await;
    assert_eq!(r.json["history"][2]["amount"], json!("490"), "{}", r.json);
    check(spec, seen, path, "GET", &r);
    let r = c
        .payment_history("00000000-0000-4000-8000-000000000000")
        .await
        .unwrap();
    assert_eq!(r.code(), Some("payment_not_found"));
    check(spec, seen, path, "GET", &r);
}

/// Sends `req` with `X-Decimals: <value>` added (the header is not a signed component).
async fn send_with_decimals(
    c: &payments_client::MerchantClient,
    req: &payments_client::PreparedRequest,
    value: &str,
) -> ApiResponse {
    let mut req = req.clone();
    req.headers.push(("X-Decimals".into(), value.into()));
    c.send(&req).await.unwrap()
}

/// `X-Decimals: string` writes the same decimal text as JSON strings, on every operation that
/// answers with a payment, and the answers validate against the file's `PaymentDecimalStrings`;
/// without it the numbers are unchanged; a bad value is `400 bad_request` and spends nothing.
#[tokio::test]
async fn decimal_strings_on_request() {
    let spec = spec();
    let s = start().await;
    let c = &s.client();
    let mut seen = BTreeSet::new();
    let signed = |path: &str, body: &Value| {
        c.prepare(
            Method::POST,
            path,
            &serde_json::to_vec(body).unwrap(),
            Some(&SignSpec::default()),
        )
        .unwrap()
    };
    let strings = json!({"$ref": "#/components/schemas/PaymentDecimalStrings"});
    let numbers = json!({"$ref": "#/components/schemas/Payment"});

    // A bad value: 400, and the same signed request (same nonce) then succeeds.
    let create = signed("/api/v1/payments", &create_body("ds-1", "1500.50"));
    for bad in ["float", "", "strings"] {
        let r = send_with_decimals(c, &create, bad).await;
        assert_eq!(r.code(), Some("bad_request"), "{bad:?}: {}", r.json);
        assert!(r.json["message"].as_str().unwrap().contains("X-Decimals"));
        check(&spec, &mut seen, "/api/v1/payments", "POST", &r);
    }
    let mut twice = create.clone();
    twice.headers.push(("X-Decimals".into(), "string".into()));
    twice.headers.push(("X-Decimals".into(), "string".into()));
    let r = c.send(&twice).await.unwrap();
    assert_eq!(r.code(), Some("bad_request"), "{}", r.json);

    let r = send_with_decimals(c, &create, "String").await;
    assert_eq!(r.status, StatusCode::CREATED, "{}", r.json);
    check(&spec, &mut seen, "/api/v1/payments", "POST", &r);
    assert_eq!(r.json["amount"], json!("1500.50"));
    assert_eq!(r.json["initial_amount"], json!("1500.50"));
    let info = &r.json["merchant_information"];
    for field in ["course", "rate"] {
        let text = info[field]
            .as_str()
            .unwrap_or_else(|| panic!("{field}: {info}"));
        assert_eq!(
            text.split_once('.').map(|(_, d)| d.len()),
            Some(2),
            "{text}"
        );
    }
    assert!(validation_errors(&spec, &strings, &r.json).is_empty());
    assert!(!validation_errors(&spec, &numbers, &r.json).is_empty());
    let id = r.json["id"].as_str().unwrap().to_string();

    // GET: strings on request, the default numbers (same text) without the header.
    let get = c
        .prepare(Method::GET, &format!("/api/v1/payments/{id}"), b"", None)
        .unwrap();
    let r = send_with_decimals(c, &get, "string").await;
    assert_eq!(r.status, StatusCode::OK);
    assert_eq!(r.json["amount"], json!("1500.50"));
    check(&spec, &mut seen, "/api/v1/payments/{id}", "GET", &r);
    let with_strings = r.json.clone();
    let r = send_with_decimals(c, &get, "number").await;
    let text = String::from_utf8(r.body.clone()).unwrap();
    assert!(text.contains(r#""amount":1500.50,"#), "{text}");
    assert!(validation_errors(&spec, &numbers, &r.json).is_empty());
    assert!(!validation_errors(&spec, &strings, &r.json).is_empty());
    let plain = c.get_payment(&id).await.unwrap();
    assert_eq!(
        plain.body, r.body,
        "absent and `number` write the same bytes"
    );
    // Only the four decimals change type: course and rate keep their text.
    for field in ["course", "rate"] {
        let n = &r.json["merchant_information"][field];
        assert_eq!(
            with_strings["merchant_information"][field]
                .as_str()
                .unwrap(),
            n.to_string()
        );
    }

    // The project resource has no decimals; the header is ignored there.
    let project = c
        .prepare(Method::GET, "/api/v1/project", b"", None)
        .unwrap();
    let r = send_with_decimals(c, &project, "float").await;
    assert_eq!(r.status, StatusCode::OK, "{}", r.json);

    // A test helper answers in strings too.
    s.patch_project(ProjectPatch {
        test_mode: Some(true),
        ..Default::default()
    })
    .await;
    let t = c
        .create_payment(&create_body("ds-t", "999999.990000"))
        .await
        .unwrap();
    assert_eq!(t.status, StatusCode::CREATED, "{}", t.json);
    let t = t.json["id"].as_str().unwrap().to_string();
    let complete = signed(&format!("/api/v1/test/payments/{t}/complete"), &json!({}));
    let r = send_with_decimals(c, &complete, "string").await;
    assert_eq!(r.status, StatusCode::OK, "{}", r.json);
    assert_eq!(r.json["amount"], json!("999999.990000"));
    check(
        &spec,
        &mut seen,
        "/api/v1/test/payments/{id}/complete",
        "POST",
        &r,
    );
}

/// The events API's answers validate against the file: every operation, success and refusal.
#[tokio::test]
async fn event_responses_validate_against_the_file() {
    let spec = spec();
    // Dispatch off: the events stay pending, with no attempt to a host that does not exist.
    let s = TestServer::start(|s| s.callbacks.dispatch = false).await;
    let c = &s.client();
    let mut seen = BTreeSet::new();
    let mut b = create_body("oa-ev-1", "100");
    b["callback_url"] = json!("https://shop.example.com/callbacks");
    b["metadata"] = json!({"order": "A-1001", "shop": "north"});
    let r = c.create_payment(&b).await.unwrap();
    assert_eq!(r.status, StatusCode::CREATED);
    assert_eq!(r.json["metadata"]["order"], "A-1001");
    check(&spec, &mut seen, "/api/v1/payments", "POST", &r);
    let r = c.list_payments("metadata[shop]=north").await.unwrap();
    assert_eq!(r.json["data"][0]["metadata"]["shop"], "north", "{}", r.json);
    check(&spec, &mut seen, "/api/v1/payments", "GET", &r);
    let id = r.json["data"][0]["id"].as_str().unwrap().to_string();
    let confirmed = reqwest::Client::new()
        .post(format!(
            "{}/operator/v1/payments/{id}/confirm",
            s.operator_url
        ))
        .bearer_auth(s.operator_token.expose())
        .json(&json!({}))
        .send()
        .await
        .unwrap();
    assert_eq!(confirmed.status(), StatusCode::OK);

    let list = "/api/v1/events";
    let r = c.list_events("").await.unwrap();
    assert_eq!(
        (r.status, r.json["data"].as_array().map(Vec::len)),
        (StatusCode::OK, Some(1))
    );
    check(&spec, &mut seen, list, "GET", &r);
    let event = r.json["data"][0]["id"].as_str().unwrap().to_string();
    let r = c.list_events("wait=31").await.unwrap();
    check(&spec, &mut seen, list, "GET", &r);
    let read_only = s
        .state
        .service
        .directory()
        .issue_token(s.project(), vec![Scope::PaymentsRead], &Actor("t".into()))
        .await
        .unwrap();
    let r = c
        .with_token(read_only.token.expose())
        .list_events("")
        .await
        .unwrap();
    check(&spec, &mut seen, list, "GET", &r);

    let one = "/api/v1/events/{id}";
    let r = c.get_event(&event).await.unwrap();
    check(&spec, &mut seen, one, "GET", &r);
    let r = c.get_event("not-an-id").await.unwrap();
    check(&spec, &mut seen, one, "GET", &r);

    let resend = "/api/v1/events/{id}/resend";
    let r = c.resend_event(&event).await.unwrap();
    check(&spec, &mut seen, resend, "POST", &r);
    let r = c
        .resend_event("0192f3a4-5b6c-7d8e-9f00-112233445566")
        .await
        .unwrap();
    check(&spec, &mut seen, resend, "POST", &r);

    let send = "/api/v1/payments/{id}/resend_callback";
    let r = c.resend_payment_callback(&id).await.unwrap();
    check(&spec, &mut seen, send, "POST", &r);
    let open = c
        .create_payment(&create_body("oa-ev-open", "100"))
        .await
        .unwrap();
    let r = c
        .resend_payment_callback(open.json["id"].as_str().unwrap())
        .await
        .unwrap();
    check(&spec, &mut seen, send, "POST", &r);

    let recover = "/api/v1/events/recover";
    let r = c
        .recover_events("2026-01-01T00:00:00Z", None)
        .await
        .unwrap();
    check(&spec, &mut seen, recover, "POST", &r);
    let r = c.recover_events("soon", None).await.unwrap();
    check(&spec, &mut seen, recover, "POST", &r);
    s.stop().await;

    for (method, path, status) in [
        ("GET", list, 200),
        ("GET", list, 400),
        ("GET", list, 403),
        ("GET", one, 200),
        ("GET", one, 404),
        ("POST", resend, 202),
        ("POST", resend, 404),
        ("POST", send, 202),
        ("POST", send, 409),
        ("POST", recover, 200),
        ("POST", recover, 400),
    ] {
        assert!(
            seen.contains(&(method.to_string(), path.to_string(), status)),
            "not exercised: {method} {path} {status}"
        );
    }
}

/// The balance API's answers validate against the file: every operation, success and refusal.
#[tokio::test]
async fn balance_responses_validate_against_the_file() {
    let spec = spec();
    let s = start().await;
    let c = &s.client();
    let mut seen = BTreeSet::new();
    let balance = "/api/v1/balance";
    let entries = "/api/v1/balance/entries";
    let statement = "/api/v1/balance/statement";

    let r = c.get(balance).await.unwrap();
    assert_eq!(r.status, StatusCode::OK, "{}", r.json);
    assert_eq!(
        (&r.json["balance"], &r.json["updated_at"]),
        (&json!("0.0000"), &Value::Null)
    );
    check(&spec, &mut seen, balance, "GET", &r);

    // Two live payments completed by the operator: two credits of 30.2600 (3400 at course
    // 100, fee 11 %).
    let operator = reqwest::Client::new();
    for mpid in ["oa-bal-1", "oa-bal-2"] {
        let r = c.create_payment(&create_body(mpid, "3400")).await.unwrap();
        assert_eq!(r.status, StatusCode::CREATED);
        let id = r.json["id"].as_str().unwrap();
        let confirmed = operator
            .post(format!(
                "{}/operator/v1/payments/{id}/confirm",
                s.operator_url
            ))
            .bearer_auth(s.operator_token.expose())
            .json(&json!({}))
            .send()
            .await
            .unwrap();
        assert_eq!(confirmed.status(), StatusCode::OK);
    }
    let r = c.get(balance).await.unwrap();
    assert_eq!(
        (&r.json["balance"], &r.json["credits"], &r.json["entries"]),
        (&json!("60.5200"), &json!("60.5200"), &json!(2)),
        "{}",
        r.json
    );
    check(&spec, &mut seen, balance, "GET", &r);
    let r = c.get("/api/v1/balance?limit=1").await.unwrap();
    assert_eq!(r.code(), Some("bad_request"));
    check(&spec, &mut seen, balance, "GET", &r);

    // Entries: a page with a cursor, the last page, a refused kind.
    let r = c.get("/api/v1/balance/entries?limit=1").await.unwrap();
    assert_eq!(r.status, StatusCode::OK, "{}", r.json);
    assert_eq!(r.json["data"][0]["seq"], 2, "{}", r.json);
    check(&spec, &mut seen, entries, "GET", &r);
    let newest = r.json["data"][0]["created_at"]
        .as_str()
        .unwrap()
        .to_string();
    let cursor = r.json["next_cursor"]
        .as_str()
        .expect("a cursor")
        .to_string();
    let r = c
        .get(&format!(
            "/api/v1/balance/entries?kind=credit&cursor={cursor}"
        ))
        .await
        .unwrap();
    assert_eq!(
        (&r.json["data"][0]["seq"], &r.json["has_more"]),
        (&json!(1), &json!(false)),
        "{}",
        r.json
    );
    assert_eq!(r.json["data"][0]["amount"], "30.2600");
    check(&spec, &mut seen, entries, "GET", &r);
    let r = c.get("/api/v1/balance/entries?kind=refund").await.unwrap();
    assert_eq!(r.code(), Some("bad_request"));
    check(&spec, &mut seen, entries, "GET", &r);

    // A statement around the entries; a period without its end.
    let at = payments_core::Timestamp::parse_rfc3339(&newest).unwrap();
    let day = std::time::Duration::from_secs(86_400);
    let (from, to) = (
        at.saturating_sub(day).to_rfc3339(),
        at.saturating_add(day).to_rfc3339(),
    );
    let r = c
        .get(&format!("{statement}?from={from}&to={to}"))
        .await
        .unwrap();
    assert_eq!(r.status, StatusCode::OK, "{}", r.json);
    assert_eq!(
        (&r.json["opening"], &r.json["closing"]),
        (&json!("0.0000"), &json!("60.5200")),
        "{}",
        r.json
    );
    assert_eq!(r.json["lines"]["credit"]["count"], 2, "{}", r.json);
    check(&spec, &mut seen, statement, "GET", &r);
    let r = c.get(&format!("{statement}?from={from}")).await.unwrap();
    assert_eq!(r.code(), Some("bad_request"));
    check(&spec, &mut seen, statement, "GET", &r);

    // A token without balance:read.
    let read_only = s
        .state
        .service
        .directory()
        .issue_token(s.project(), vec![Scope::PaymentsRead], &Actor("t".into()))
        .await
        .unwrap();
    let r = c
        .with_token(read_only.token.expose())
        .get(balance)
        .await
        .unwrap();
    assert_eq!(r.code(), Some("insufficient_scope"));
    check(&spec, &mut seen, balance, "GET", &r);
    s.stop().await;

    for (method, path, status) in [
        ("GET", balance, 200),
        ("GET", balance, 400),
        ("GET", balance, 403),
        ("GET", entries, 200),
        ("GET", entries, 400),
        ("GET", statement, 200),
        ("GET", statement, 400),
    ] {
        assert!(
            seen.contains(&(method.to_string(), path.to_string(), status)),
            "not exercised: {method} {path} {status}"
        );
    }
}

/// The appeal operations' answers against the file: opened (`201`), repeated (`200`), read,
/// listed by payment and by project, and refused (`409`, `422`, `404`).
#[tokio::test]
async fn appeal_responses_validate_against_the_file() {
    use base64::Engine as _;
    let spec = spec();
    let s = start().await;
    let c = &s.client();
    let mut seen = BTreeSet::new();
    let r = c
        .create_payment(&create_body("oa-appeal-1", "3400"))
        .await
        .unwrap();
    let id = r.json["id"].as_str().unwrap().to_string();
    let canceled = reqwest::Client::new()
        .post(format!(
            "{}/operator/v1/payments/{id}/cancel",
            s.operator_url
        ))
        .bearer_auth(s.operator_token.expose())
        .json(&json!({}))
        .send()
        .await
        .unwrap();
    assert_eq!(canceled.status(), StatusCode::OK);
    let pdf = b"%PDF-1.4\n1 0 obj\n<<>>\nendobj\ntrailer\n<<>>\n%%EOF\n";
    let receipt = |data: &[u8]| {
        json!([{"content_type": "application/pdf",
            "data": base64::engine::general_purpose::STANDARD.encode(data)}])
    };
    let body = json!({"idempotency_key": "oa-1", "reason": "paid_other_amount",
        "claimed_amount": "3390.50", "paid_at": "2026-12-03T10:04:00Z", "payer_bank": "T-Bank",
        "receipts": receipt(pdf)});
    let open = "/api/v1/payments/{id}/appeals";
    let r = c.open_appeal(&id, &body).await.unwrap();
    assert_eq!(r.status, StatusCode::CREATED, "{}", r.json);
    check(&spec, &mut seen, open, "POST", &r);
    let appeal = r.json["id"].as_str().unwrap().to_string();
    let r = c.open_appeal(&id, &body).await.unwrap();
    assert_eq!(r.status, StatusCode::OK, "{}", r.json);
    check(&spec, &mut seen, open, "POST", &r);
    let mut other = body.clone();
    other["claimed_amount"] = json!("1");
    let r = c.open_appeal(&id, &other).await.unwrap();
    assert_eq!(r.code(), Some("appeal_idempotency_conflict"), "{}", r.json);
    check(&spec, &mut seen, open, "POST", &r);
    other["idempotency_key"] = json!("oa-2");
    other["receipts"] = receipt(b"%PDF-1.4 cut short");
    let r = c.open_appeal(&id, &other).await.unwrap();
    assert_eq!(r.code(), Some("receipt_invalid"), "{}", r.json);
    check(&spec, &mut seen, open, "POST", &r);

    let r = c
        .get(&format!("/api/v1/payments/{id}/appeals"))
        .await
        .unwrap();
    assert_eq!(r.json["data"][0]["id"], appeal.as_str(), "{}", r.json);
    check(&spec, &mut seen, open, "GET", &r);
    let r = c.get("/api/v1/appeals?state=open&limit=1").await.unwrap();
    assert_eq!(
        r.json["data"].as_array().map(Vec::len),
        Some(1),
        "{}",
        r.json
    );
    check(&spec, &mut seen, "/api/v1/appeals", "GET", &r);
    let r = c.get_appeal(&appeal).await.unwrap();
    check(&spec, &mut seen, "/api/v1/appeals/{id}", "GET", &r);
    let r = c
        .get_appeal(&payments_core::PaymentId::from_uuid(uuid::Uuid::nil()).to_string())
        .await
        .unwrap();
    assert_eq!(r.code(), Some("appeal_not_found"), "{}", r.json);
    check(&spec, &mut seen, "/api/v1/appeals/{id}", "GET", &r);
    assert_eq!(seen.len(), 8, "{seen:?}");
}
