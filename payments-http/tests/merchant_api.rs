//! The merchant API over real sockets: the real server on 127.0.0.1:0 with a fresh SQLite data
//! dir per test, requests signed by the core's signer.

use std::time::Duration;

use payments_client::{MerchantClient, SandboxCredentials, SignSpec};
use payments_core::auth::keys::generate_signing_key;
use payments_core::auth::Scope;
use payments_core::project::RateLimit;
use payments_core::service::{Actor, ProjectPatch};
use payments_http::bootstrap::CREDENTIALS_FILE;
use payments_http::system::OsRandom;
use payments_http::testing::TestServer;
use reqwest::{Method, StatusCode};
use serde_json::json;

fn body(mpid: &str, amount: &str) -> serde_json::Value {
    json!({"merchant_payment_id": mpid, "amount": amount, "payment_method": "sbp"})
}

#[tokio::test]
async fn debug_of_the_test_server_shows_no_secret() {
    let s = TestServer::sandbox().await;
    let debug = format!("{s:?}");
    let c = s.creds();
    for secret in [
        &s.operator_token,
        &c.token,
        &c.callback_secret,
        &c.private_key_pem,
    ] {
        assert!(!debug.contains(secret.expose().as_str()), "{debug}");
    }
    s.stop().await;
}

#[tokio::test]
async fn sandbox_test_cases_of_the_spec() {
    let s = TestServer::sandbox().await;
    let c = &s.client();
    // Same request twice -> 201 then 200 with the same payment.
    let first = c.create_payment(&body("order-1", "3400")).await.unwrap();
    assert_eq!(first.status, StatusCode::CREATED, "{}", first.json);
    assert_eq!(first.json["status"], "processing");
    assert_eq!(
        first.json["merchant_information"]["course"].to_string(),
        "100.00"
    );
    assert_eq!(
        first.json["merchant_information"]["rate"].to_string(),
        "11.00"
    );
    assert_eq!(first.json["merchant_information"]["amount_usdt"], "34.0000");
    assert_eq!(
        first.json["merchant_information"]["amount_usdt_rate"],
        "30.2600"
    );
    assert!(first.json["requisite"].as_str().unwrap().starts_with("+79"));
    let again = c.create_payment(&json!({"merchant_payment_id": "order-1", "amount": 3400.00, "payment_method": "sbp", "currency": "RUB", "geo_code": "RU"})).await.unwrap();
    assert_eq!(again.status, StatusCode::OK);
    assert_eq!(again.json["id"], first.json["id"]);
    // Same merchant_payment_id with another amount -> 409 payment_idempotency_conflict.
    let conflict = c.create_payment(&body("order-1", "3401")).await.unwrap();
    assert_eq!(conflict.status, StatusCode::CONFLICT);
    assert_eq!(conflict.code(), Some("payment_idempotency_conflict"));
    // One signed request sent twice -> 409 request_replayed.
    let req = c
        .prepare(
            Method::POST,
            "/api/v1/payments",
            &serde_json::to_vec(&body("order-2", "100")).unwrap(),
            Some(&SignSpec::default()),
        )
        .unwrap();
    assert_eq!(c.send(&req).await.unwrap().status, StatusCode::CREATED);
    let replay = c.send(&req).await.unwrap();
    assert_eq!(replay.status, StatusCode::CONFLICT);
    assert_eq!(replay.code(), Some("request_replayed"));
    // Body changed after signing -> 401 signature_invalid, with the base in the sandbox.
    let mut tampered = c
        .prepare(
            Method::POST,
            "/api/v1/payments",
            &serde_json::to_vec(&body("order-3", "100")).unwrap(),
            Some(&SignSpec::default()),
        )
        .unwrap();
    tampered.body = serde_json::to_vec(&body("order-3", "999")).unwrap();
    let r = c.send(&tampered).await.unwrap();
    assert_eq!(r.status, StatusCode::UNAUTHORIZED);
    assert_eq!(r.code(), Some("signature_invalid"));
    assert_eq!(r.json["message"], "content-digest does not match body");
    // The id was not taken: the honest request succeeds.
    assert_eq!(
        c.create_payment(&body("order-3", "100"))
            .await
            .unwrap()
            .status,
        StatusCode::CREATED
    );
    // GET returns the same payment, with requisite_bank.
    let id = first.json["id"].as_str().unwrap();
    let got = c.get_payment(id).await.unwrap();
    assert_eq!(got.status, StatusCode::OK);
    assert_eq!(got.json["id"], first.json["id"]);
    assert!(got.json["requisite_bank"].is_string());
    s.stop().await;
}

/// The create path records the nonce in the same store write as the payment; every answer
/// after the signature check must still have used it, so the same signed request again is
/// `409 request_replayed` whatever the first answer was, and takes nothing.
#[tokio::test]
async fn every_create_answer_uses_the_nonce() {
    let s = TestServer::sandbox().await;
    let c = s.client();
    assert_eq!(
        c.create_payment(&body("taken", "100"))
            .await
            .unwrap()
            .status,
        StatusCode::CREATED
    );
    let cases = [
        // (body, first answer's status, its code)
        (
            json!({"merchant_payment_id": "n1", "amount": "-5", "payment_method": "sbp"}),
            StatusCode::BAD_REQUEST,
            Some("bad_request"),
        ),
        (
            json!({"merchant_payment_id": "n2", "amount": "100", "payment_method": "sbp", "bank_code": "No Such Bank"}),
            StatusCode::UNPROCESSABLE_ENTITY,
            Some("bank_not_found"),
        ),
        (body("taken", "100"), StatusCode::OK, None),
        (
            body("taken", "101"),
            StatusCode::CONFLICT,
            Some("payment_idempotency_conflict"),
        ),
        (body("n3", "100"), StatusCode::CREATED, None),
    ];
    for (b, status, code) in cases {
        let req = c
            .prepare(
                Method::POST,
                "/api/v1/payments",
                &serde_json::to_vec(&b).unwrap(),
                Some(&SignSpec::default()),
            )
            .unwrap();
        let first = c.send(&req).await.unwrap();
        assert_eq!(first.status, status, "{b}: {:?}", first.json);
        if let Some(code) = code {
            assert_eq!(first.code(), Some(code));
        }
        let replay = c.send(&req).await.unwrap();
        assert_eq!(replay.status, StatusCode::CONFLICT, "{b}");
        assert_eq!(replay.code(), Some("request_replayed"), "{b}");
    }
    // The refused requests took no merchant_payment_id.
    for mpid in ["n1", "n2"] {
        assert_eq!(
            c.create_payment(&body(mpid, "100")).await.unwrap().status,
            StatusCode::CREATED,
            "{mpid}"
        );
    }
    s.stop().await;
}

#[tokio::test]
async fn unpaid_past_lifetime_is_canceled_by_the_sweeper() {
    let s = TestServer::sandbox().await;
    // The operator API refuses lifetimes under a minute; the store takes any, which lets the
    // test run in a second.
    let mut p = s
        .state
        .service
        .store()
        .project(s.project())
        .await
        .unwrap()
        .unwrap();
    p.lifetime = Duration::from_millis(300);
    s.state.service.store().put_project(&p).await.unwrap();
    let r = s
        .client()
        .create_payment(&body("exp-1", "100"))
        .await
        .unwrap();
    assert_eq!(r.json["status"], "processing");
    let id = r.json["id"].as_str().unwrap().to_string();
    let mut status = String::new();
    for _ in 0..60 {
        tokio::time::sleep(Duration::from_millis(50)).await;
        status = s.client().get_payment(&id).await.unwrap().json["status"]
            .as_str()
            .unwrap()
            .to_string();
        if status == "canceled" {
            break;
        }
    }
    assert_eq!(status, "canceled");
    s.stop().await;
}

#[tokio::test]
async fn invalid_bodies_and_business_rules() {
    let s = TestServer::sandbox().await;
    let c = &s.client();
    let cases: Vec<(serde_json::Value, StatusCode, &str, &str)> = vec![
        (
            json!({"merchant_payment_id": "a1", "amount": "1", "payment_method": "sbp", "deadline": 5}),
            StatusCode::BAD_REQUEST,
            "bad_request",
            "deadline: unknown field",
        ),
        (
            json!({"merchant_payment_id": "a2", "amount": "1.1234567", "payment_method": "sbp"}),
            StatusCode::BAD_REQUEST,
            "bad_request",
            "amount: must have at most 6 decimal places",
        ),
        (
            json!({"merchant_payment_id": "a3", "amount": "100", "payment_method": "sbp", "bank_code": "No Such Bank"}),
            StatusCode::UNPROCESSABLE_ENTITY,
            "bank_not_found",
            "",
        ),
        (
            json!({"merchant_payment_id": "a4", "amount": "5", "payment_method": "sbp"}),
            StatusCode::UNPROCESSABLE_ENTITY,
            "payment_not_covered",
            "amount 5 is below",
        ),
        (
            json!({"merchant_payment_id": "a5", "amount": "100", "payment_method": "sbp", "currency": "EUR"}),
            StatusCode::UNPROCESSABLE_ENTITY,
            "payment_not_covered",
            "currency EUR",
        ),
    ];
    for (b, status, code, msg) in cases {
        let r = c.create_payment(&b).await.unwrap();
        assert_eq!(r.status, status, "{b} -> {}", r.json);
        assert_eq!(r.code(), Some(code), "{b}");
        assert!(
            r.json["message"].as_str().unwrap().starts_with(msg),
            "{}",
            r.json
        );
        assert!(r.json.get("payment_id").is_none());
        assert!(r.json["request_id"].is_string());
    }
    // A currency in the contract without a rate.
    let mut contract = payments_core::project::Contract::standard();
    contract
        .currencies
        .push(payments_core::payment::Currency::parse("USD").unwrap());
    s.patch_project(ProjectPatch {
        contract: Some(contract),
        ..Default::default()
    })
    .await;
    let r = c.create_payment(&json!({"merchant_payment_id": "a6", "amount": "100", "payment_method": "sbp", "currency": "USD"})).await.unwrap();
    assert_eq!(r.code(), Some("payment_rate_unavailable"), "{}", r.json);
    // Bank resolution: a Cyrillic name in another case resolves to the catalog name.
    let r = c.create_payment(&json!({"merchant_payment_id": "a7", "amount": "100", "payment_method": "sbp", "bank_code": "сбербанк"})).await.unwrap();
    assert_eq!(r.status, StatusCode::CREATED, "{}", r.json);
    assert_eq!(r.json["bank_code"], "Сбербанк");
    // A paused merchant -> 422 payment_not_routable, nothing saved.
    let merchant = s
        .state
        .service
        .store()
        .project(s.project())
        .await
        .unwrap()
        .unwrap()
        .merchant_id;
    s.state
        .service
        .update_merchant(merchant, Some(true), None, &Actor("t".into()))
        .await
        .unwrap();
    let r = c.create_payment(&body("a8", "100")).await.unwrap();
    assert_eq!(r.code(), Some("payment_not_routable"));
    assert!(r.json.get("payment_id").is_none());
    s.state
        .service
        .update_merchant(merchant, Some(false), None, &Actor("t".into()))
        .await
        .unwrap();
    assert_eq!(
        c.create_payment(&body("a8", "100")).await.unwrap().status,
        StatusCode::CREATED
    );
    // A paused project authenticates but routes nothing; resumed, the same id is accepted.
    s.patch_project(ProjectPatch {
        paused: Some(true),
        ..Default::default()
    })
    .await;
    let r = c.create_payment(&body("a9", "100")).await.unwrap();
    assert_eq!(r.code(), Some("payment_not_routable"));
    assert_eq!(r.json["message"], "the project is paused");
    assert_eq!(c.project().await.unwrap().status, StatusCode::OK);
    s.patch_project(ProjectPatch {
        paused: Some(false),
        ..Default::default()
    })
    .await;
    assert_eq!(
        c.create_payment(&body("a9", "100")).await.unwrap().status,
        StatusCode::CREATED
    );
    s.stop().await;
}

#[tokio::test]
async fn magic_amounts() {
    let s = TestServer::sandbox().await;
    let c = &s.client();
    let r = c.create_payment(&body("m13", "100.13")).await.unwrap();
    assert_eq!(r.status, StatusCode::CREATED);
    assert_eq!(r.json["status"], "error");
    assert_eq!(r.json["error_code"], "provider_no_requisites");
    assert!(r.json["requisite"].is_null());
    assert!(r.json["merchant_information"].is_null());
    let r = c.create_payment(&body("m14", "100.14")).await.unwrap();
    assert_eq!(r.status, StatusCode::CREATED);
    assert_eq!(r.json["error_code"], "provider_result_ambiguous");
    let r = c.create_payment(&body("m15", "100.15")).await.unwrap();
    assert_eq!(r.status, StatusCode::UNPROCESSABLE_ENTITY);
    assert_eq!(r.code(), Some("payment_not_routable"));
    let saved = r.json["payment_id"].as_str().unwrap().to_string();
    let again = c.create_payment(&body("m15", "100.15")).await.unwrap();
    assert_eq!(again.status, StatusCode::OK);
    assert_eq!(again.json["id"], saved.as_str());
    assert_eq!(again.json["status"], "error");
    // Card transfers get Luhn-valid 16-digit numbers, never the same twice.
    let a = c.create_payment(&json!({"merchant_payment_id": "card-1", "amount": "500", "payment_method": "card_transfer"})).await.unwrap();
    let b = c.create_payment(&json!({"merchant_payment_id": "card-2", "amount": "500", "payment_method": "card_transfer"})).await.unwrap();
    let (ra, rb) = (
        a.json["requisite"].as_str().unwrap(),
        b.json["requisite"].as_str().unwrap(),
    );
    assert_eq!(ra.len(), 16);
    assert_ne!(ra, rb);
    assert_eq!(
        payments_http::sandbox::luhn_check_digit(&ra[..15]).to_string(),
        &ra[15..]
    );
    s.stop().await;
}

#[tokio::test]
async fn token_and_signature_rejections_take_nothing() {
    let s = TestServer::sandbox().await;
    let c = &s.client();
    let b = serde_json::to_vec(&body("auth-1", "100")).unwrap();
    // Token of the other environment.
    let live = c.with_token("nl_live_AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA");
    let r = live.create_payment(&body("auth-1", "100")).await.unwrap();
    assert_eq!(
        (r.status, r.code()),
        (StatusCode::UNAUTHORIZED, Some("token_invalid"))
    );
    // Truncated token.
    let r = c
        .with_token(&s.creds().token.expose()[..20])
        .create_payment(&body("auth-1", "100"))
        .await
        .unwrap();
    assert_eq!(r.code(), Some("token_invalid"));
    // Missing scope.
    let actor = Actor("t".into());
    let read_only = s
        .state
        .service
        .issue_token(s.project(), vec![Scope::PaymentsRead], &actor)
        .await
        .unwrap();
    let r = c
        .with_token(read_only.token.expose())
        .create_payment(&body("auth-1", "100"))
        .await
        .unwrap();
    assert_eq!(
        (r.status, r.code()),
        (StatusCode::FORBIDDEN, Some("insufficient_scope"))
    );
    // Revoked token.
    let extra = s
        .state
        .service
        .issue_token(s.project(), vec![Scope::PaymentsCreate], &actor)
        .await
        .unwrap();
    assert_eq!(
        c.with_token(extra.token.expose())
            .create_payment(&body("auth-0", "100"))
            .await
            .unwrap()
            .status,
        StatusCode::CREATED
    );
    s.state
        .service
        .revoke_token(s.project(), extra.record.id, &actor)
        .await
        .unwrap();
    let r = c
        .with_token(extra.token.expose())
        .create_payment(&body("auth-1", "100"))
        .await
        .unwrap();
    assert_eq!(r.code(), Some("token_invalid"));
    // Wrong key.
    let stranger = c.with_key(generate_signing_key(&OsRandom));
    let r = stranger
        .create_payment(&body("auth-1", "100"))
        .await
        .unwrap();
    assert_eq!(
        (r.status, r.json["message"].as_str()),
        (StatusCode::UNAUTHORIZED, Some("unknown keyid"))
    );
    // Expired signature.
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_secs() as i64;
    let old = SignSpec {
        created: Some(now - 400),
        expires: Some(now - 200),
        ..Default::default()
    };
    let r = c
        .send(
            &c.prepare(Method::POST, "/api/v1/payments", &b, Some(&old))
                .unwrap(),
        )
        .await
        .unwrap();
    assert_eq!(r.code(), Some("signature_invalid"));
    assert!(
        r.json["message"].as_str().unwrap().contains("expired")
            || r.json["message"].as_str().unwrap().contains("too old"),
        "{}",
        r.json
    );
    // Created in the future.
    let future = SignSpec {
        created: Some(now + 120),
        expires: Some(now + 300),
        ..Default::default()
    };
    let r = c
        .send(
            &c.prepare(Method::POST, "/api/v1/payments", &b, Some(&future))
                .unwrap(),
        )
        .await
        .unwrap();
    assert_eq!(r.json["message"], "created in the future");
    // Missing covered component.
    let partial = SignSpec {
        components: Some(vec![
            "@method".into(),
            "@path".into(),
            "content-digest".into(),
            "x-request-id".into(),
        ]),
        ..Default::default()
    };
    let r = c
        .send(
            &c.prepare(Method::POST, "/api/v1/payments", &b, Some(&partial))
                .unwrap(),
        )
        .await
        .unwrap();
    assert_eq!(
        r.json["message"],
        "missing covered component \"x-request-nonce\""
    );
    assert!(
        r.json["signature_base"].is_string(),
        "sandbox returns the base: {}",
        r.json
    );
    // Unsigned create.
    let r = c
        .send(
            &c.prepare(Method::POST, "/api/v1/payments", &b, None)
                .unwrap(),
        )
        .await
        .unwrap();
    assert_eq!(r.code(), Some("signature_invalid"));
    // Nothing above took the merchant_payment_id.
    assert_eq!(
        c.create_payment(&body("auth-1", "100"))
            .await
            .unwrap()
            .status,
        StatusCode::CREATED
    );
    s.stop().await;
}

#[tokio::test]
async fn size_rate_and_address_limits() {
    let s = TestServer::sandbox().await;
    let c = &s.client();
    // 17 KiB body -> 413 body_too_large; the id stays free.
    let mut big = body("lim-1", "100");
    big["callback_url"] = json!(format!("https://example.com/{}", "x".repeat(17 * 1024)));
    let r = c.create_payment(&big).await.unwrap();
    assert_eq!(
        (r.status, r.code()),
        (StatusCode::PAYLOAD_TOO_LARGE, Some("body_too_large"))
    );
    // IP allow-list: 127.0.0.1 is not in 10.0.0.0/8.
    s.patch_project(ProjectPatch {
        ip_allow_list: Some(vec!["10.0.0.0/8".into()]),
        ..Default::default()
    })
    .await;
    let r = c.create_payment(&body("lim-1", "100")).await.unwrap();
    assert_eq!(
        (r.status, r.code()),
        (StatusCode::FORBIDDEN, Some("ip_not_allowed"))
    );
    // X-Forwarded-For from an untrusted peer is ignored.
    let mut req = c
        .prepare(
            Method::POST,
            "/api/v1/payments",
            &serde_json::to_vec(&body("lim-1", "100")).unwrap(),
            Some(&SignSpec::default()),
        )
        .unwrap();
    req.headers
        .push(("X-Forwarded-For".into(), "10.1.2.3".into()));
    assert_eq!(c.send(&req).await.unwrap().code(), Some("ip_not_allowed"));
    s.patch_project(ProjectPatch {
        ip_allow_list: Some(vec!["127.0.0.1".into(), "::1".into()]),
        ..Default::default()
    })
    .await;
    // Rate limit: 1/s with a burst of 2 -> the third request at once is 429 with Retry-After.
    s.patch_project(ProjectPatch {
        rate_limit: Some(RateLimit {
            per_second: 1,
            burst: 2,
        }),
        ..Default::default()
    })
    .await;
    let mut statuses = Vec::new();
    let mut retry_after = None;
    for i in 0..3 {
        let r = c
            .create_payment(&body(&format!("rl-{i}"), "100"))
            .await
            .unwrap();
        if r.status == StatusCode::TOO_MANY_REQUESTS {
            assert_eq!(r.code(), Some("rate_limited"));
            retry_after = r
                .headers
                .get("retry-after")
                .map(|v| v.to_str().unwrap().to_string());
        }
        statuses.push(r.status);
    }
    assert_eq!(
        statuses,
        vec![
            StatusCode::CREATED,
            StatusCode::CREATED,
            StatusCode::TOO_MANY_REQUESTS
        ]
    );
    assert_eq!(retry_after.as_deref(), Some("1"));
    // The limited id is free once the bucket refills; so is the one refused for size.
    tokio::time::sleep(Duration::from_millis(1100)).await;
    assert_eq!(
        c.create_payment(&body("rl-2", "100")).await.unwrap().status,
        StatusCode::CREATED
    );
    tokio::time::sleep(Duration::from_millis(1100)).await;
    assert_eq!(
        c.create_payment(&body("lim-1", "100"))
            .await
            .unwrap()
            .status,
        StatusCode::CREATED
    );
    s.stop().await;
}

#[tokio::test]
async fn forwarded_for_is_used_only_from_trusted_proxies() {
    let s = TestServer::start(|s| {
        s.trusted_proxies = vec!["127.0.0.0/8".parse().expect("a network")];
    })
    .await;
    s.patch_project(ProjectPatch {
        ip_allow_list: Some(vec!["203.0.113.7".into()]),
        ..Default::default()
    })
    .await;
    let c = &s.client();
    let mut req = c
        .prepare(
            Method::POST,
            "/api/v1/payments",
            &serde_json::to_vec(&body("xff-1", "100")).unwrap(),
            Some(&SignSpec::default()),
        )
        .unwrap();
    req.headers
        .push(("X-Forwarded-For".into(), "198.51.100.1, 203.0.113.7".into()));
    let r = c.send(&req).await.unwrap();
    assert_eq!(r.status, StatusCode::CREATED, "{}", r.json);
    let mut req = c
        .prepare(
            Method::POST,
            "/api/v1/payments",
            &serde_json::to_vec(&body("xff-2", "100")).unwrap(),
            Some(&SignSpec::default()),
        )
        .unwrap();
    req.headers
        .push(("X-Forwarded-For".into(), "203.0.113.7, 198.51.100.1".into()));
    assert_eq!(c.send(&req).await.unwrap().code(), Some("ip_not_allowed"));
    s.stop().await;
}

#[tokio::test]
async fn reads_project_banks_and_request_ids() {
    let s = TestServer::sandbox().await;
    let c = &s.client();
    // GET /api/v1/project.
    let r = c.project().await.unwrap();
    assert_eq!(r.status, StatusCode::OK);
    assert_eq!(r.json["project_id"], s.creds().project_id.as_str());
    assert_eq!(
        r.json["token_prefix"].as_str().unwrap(),
        &s.creds().token.expose()[..14]
    );
    assert_eq!(
        r.json["scopes"],
        json!(["payments:create", "payments:read", "payments:test"])
    );
    // Unknown and malformed ids -> 404 payment_not_found.
    for id in ["00000000-0000-4000-8000-000000000000", "not-a-uuid"] {
        let r = c.get_payment(id).await.unwrap();
        assert_eq!(
            (r.status, r.code()),
            (StatusCode::NOT_FOUND, Some("payment_not_found"))
        );
    }
    // An unsigned GET is fine until the project requires signatures.
    let created = c.create_payment(&body("r-1", "100")).await.unwrap();
    let path = format!("/api/v1/payments/{}", created.json["id"].as_str().unwrap());
    let unsigned = c.prepare(Method::GET, &path, b"", None).unwrap();
    assert_eq!(c.send(&unsigned).await.unwrap().status, StatusCode::OK);
    s.patch_project(ProjectPatch {
        signature_required: Some(true),
        ..Default::default()
    })
    .await;
    let unsigned = c.prepare(Method::GET, &path, b"", None).unwrap();
    assert_eq!(
        c.send(&unsigned).await.unwrap().code(),
        Some("signature_invalid")
    );
    assert_eq!(
        c.get_payment(created.json["id"].as_str().unwrap())
            .await
            .unwrap()
            .status,
        StatusCode::OK
    );
    // Banks: public, cached, filtered, validated.
    let http = reqwest::Client::new();
    let r = http
        .get(format!("{}/api/v1/banks?geo_code=kz", s.creds().base_url))
        .header("X-Request-ID", "req-42")
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), StatusCode::OK);
    assert_eq!(r.headers()["cache-control"], "public, max-age=300");
    assert_eq!(r.headers()["x-request-id"], "req-42");
    let banks: serde_json::Value = r.json().await.unwrap();
    let list = banks["banks"].as_array().unwrap();
    assert!(list.len() >= 8);
    assert!(list.iter().all(|b| b["country"] == "KZ"));
    let r = http
        .get(format!("{}/api/v1/banks?geo_code=KAZ", s.creds().base_url))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), StatusCode::BAD_REQUEST);
    let generated = r.headers()["x-request-id"].to_str().unwrap().to_string();
    let err: serde_json::Value = r.json().await.unwrap();
    assert_eq!(err["code"], "invalid_geo_code");
    assert_eq!(err["request_id"], generated.as_str());
    assert_eq!(generated.len(), 36);
    // Health.
    assert_eq!(
        http.get(format!("{}/healthz", s.creds().base_url))
            .send()
            .await
            .unwrap()
            .status(),
        StatusCode::OK
    );
    assert_eq!(
        http.get(format!("{}/readyz", s.creds().base_url))
            .send()
            .await
            .unwrap()
            .status(),
        StatusCode::OK
    );
    s.stop().await;
}

#[tokio::test]
async fn concurrent_identical_creates_make_one_payment() {
    let s = TestServer::sandbox().await;
    let mut tasks = Vec::new();
    for _ in 0..16 {
        let c = s.client().clone();
        tasks.push(tokio::spawn(async move {
            c.create_payment(&body("race-1", "250")).await.unwrap()
        }));
    }
    let mut ids = std::collections::HashSet::new();
    let mut created = 0;
    for t in tasks {
        let r = t.await.unwrap();
        assert!(
            r.status == StatusCode::CREATED || r.status == StatusCode::OK,
            "{}",
            r.json
        );
        created += usize::from(r.status == StatusCode::CREATED);
        assert_eq!(r.json["status"], "processing");
        ids.insert(r.json["id"].as_str().unwrap().to_string());
    }
    assert_eq!((created, ids.len()), (1, 1));
    s.stop().await;
}

/// Kills the child on drop, so a failing assertion leaves no server behind.
struct ChildGuard(std::process::Child);

impl Drop for ChildGuard {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

#[tokio::test]
async fn the_built_binary_as_a_new_user_runs_it() {
    let dir = tempfile::tempdir().unwrap();
    let child = std::process::Command::new(env!("CARGO_BIN_EXE_payments-server"))
        .args([
            "serve",
            "--listen",
            "127.0.0.1:0",
            "--operator-listen",
            "127.0.0.1:0",
            "--data-dir",
        ])
        .arg(dir.path())
        .env_remove("PAYMENTS_ENVIRONMENT")
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let mut guard = ChildGuard(child);
    let file = dir.path().join(CREDENTIALS_FILE);
    let mut text = String::new();
    for _ in 0..200 {
        if let Ok(t) = std::fs::read_to_string(&file) {
            if t.ends_with('}') {
                text = t;
                break;
            }
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let creds: SandboxCredentials = serde_json::from_str(&text).expect("credentials file written");
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        assert_eq!(
            std::fs::metadata(&file).unwrap().permissions().mode() & 0o777,
            0o600
        );
    }
    assert!(creds.token.expose().starts_with("nl_test_"));
    assert!(creds.keyid.starts_with("ed25519-"));
    assert!(creds.callback_secret.expose().starts_with("whsec_"));
    // The file holds the secrets; `Debug` of what was read from it shows none of them.
    let debug = format!("{creds:?}");
    for secret in [
        &creds.token,
        &creds.callback_secret,
        &creds.operator_token,
        &creds.private_key_pem,
    ] {
        assert!(!debug.contains(secret.expose().as_str()), "{debug}");
    }
    assert!(!debug.contains("PRIVATE KEY"), "{debug}");
    let client = MerchantClient::from_credentials(&creds).unwrap();
    let mut created = None;
    for _ in 0..100 {
        match client.create_payment(&body("first-order", "1500.50")).await {
            Ok(r) => {
                created = Some(r);
                break;
            }
            Err(_) => tokio::time::sleep(Duration::from_millis(50)).await,
        }
    }
    let created = created.expect("server answers");
    assert_eq!(created.status, StatusCode::CREATED, "{}", created.json);
    let id = created.json["id"].as_str().unwrap();
    let read = client.get_payment(id).await.unwrap();
    assert_eq!(read.json["amount"].to_string(), "1500.50");
    assert_eq!(read.json["status"], "processing");
    // SIGTERM: graceful shutdown, exit status 0, and the secrets never reached the log.
    let pid = guard.0.id().to_string();
    assert!(std::process::Command::new("kill")
        .args(["-TERM", &pid])
        .status()
        .unwrap()
        .success());
    let out = std::mem::replace(
        &mut guard.0,
        std::process::Command::new("true").spawn().unwrap(),
    )
    .wait_with_output()
    .unwrap();
    assert!(out.status.success(), "exit {:?}", out.status);
    let log = String::from_utf8_lossy(&out.stderr);
    assert!(log.contains("sandbox-credentials.json"), "{log}");
    for secret in [
        creds.token.expose(),
        creds.callback_secret.expose(),
        creds.operator_token.expose(),
    ] {
        assert!(!log.contains(secret.as_str()), "a secret reached the log");
    }
    assert!(!log.contains("PRIVATE KEY"));
    let requisite = created.json["requisite"].as_str().unwrap();
    assert!(!log.contains(requisite), "the requisite is masked in logs");
    assert!(
        log.contains(&payments_http::telemetry::mask_requisite(requisite)),
        "{log}"
    );
}

#[tokio::test]
async fn tls_on_the_merchant_listener() {
    let dir = tempfile::tempdir().unwrap();
    let cert = rcgen::generate_simple_self_signed(vec!["localhost".to_string()]).unwrap();
    let cert_path = dir.path().join("cert.pem");
    let key_path = dir.path().join("key.pem");
    std::fs::write(&cert_path, cert.cert.pem()).unwrap();
    std::fs::write(&key_path, cert.key_pair.serialize_pem()).unwrap();
    let s = TestServer::start(|s| {
        s.tls_cert = Some(cert_path);
        s.tls_key = Some(key_path);
    })
    .await;
    assert!(s.creds().base_url.starts_with("https://127.0.0.1:"));
    let port = s.creds().base_url.rsplit(':').next().unwrap().to_string();
    let http = reqwest::Client::builder()
        .add_root_certificate(reqwest::Certificate::from_pem(cert.cert.pem().as_bytes()).unwrap())
        .resolve("localhost", format!("127.0.0.1:{port}").parse().unwrap())
        .build()
        .unwrap();
    let client = MerchantClient::new(
        &format!("https://localhost:{port}"),
        s.creds().token.expose(),
        s.creds().private_key_pem.expose(),
    )
    .unwrap()
    .with_http_client(http);
    let r = client.create_payment(&body("tls-1", "100")).await.unwrap();
    assert_eq!(r.status, StatusCode::CREATED, "{}", r.json);
    s.stop().await;
}
