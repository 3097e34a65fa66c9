//! `POST /api/v1/payments`: the spec's sandbox cases, the nonce used by every answer,
//! invalid bodies and business rules, magic amounts, and concurrent identical creates.

use payments_client::SignSpec;
use payments_core::service::Actor;
use payments_directory::DirectoryAccess;
use payments_directory::ProjectPatch;
use payments_http::testing::TestServer;
use reqwest::{Method, StatusCode};
use serde_json::json;

use crate::support::body;
use payments_core::store::MerchantStoreExt;

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
        .directory()
        .update_merchant(merchant, Some(true), None, &Actor("t".into()))
        .await
        .unwrap();
    let r = c.create_payment(&body("a8", "100")).await.unwrap();
    assert_eq!(r.code(), Some("payment_not_routable"));
    assert!(r.json.get("payment_id").is_none());
    s.state
        .service
        .directory()
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
        payments_providers::sandbox::luhn_check_digit(&ra[..15]).to_string(),
        &ra[15..]
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

/// Store writes so far, from `/metrics` (every store call is timed by kind).
async fn store_writes(s: &TestServer) -> u64 {
    s.metric("payments_store_operation_duration_seconds_count{kind=\"write\"}")
        .await as u64
}

/// The store writes of `n` sandbox creates of `amount`, each answered with `status`.
async fn writes_of_creates(
    s: &TestServer,
    prefix: &str,
    n: u64,
    amount: &str,
    status: &str,
) -> u64 {
    let c = &s.client();
    let before = store_writes(s).await;
    for i in 1..=n {
        let r = c
            .create_payment(&body(&format!("{prefix}-{i}"), amount))
            .await
            .unwrap();
        assert_eq!(r.status, StatusCode::CREATED);
        assert_eq!(r.json["status"], status);
    }
    store_writes(s).await - before
}

/// Waits until the server's own start-up writes are over: two readings of [`store_writes`]
/// 100 ms apart that agree.
async fn wait_for_settled_writes(s: &TestServer) {
    let mut last = store_writes(s).await;
    for _ in 0..100 {
        tokio::time::sleep(std::time::Duration::from_millis(100)).await;
        let now = store_writes(s).await;
        if now == last {
            return;
        }
        last = now;
    }
    panic!("the server kept writing: {last} writes")
}

#[tokio::test]
async fn the_sandbox_stores_a_payment_with_its_requisites_in_one_write() {
    // Nothing else writes during the test: the sweeper runs once at start (its turn is a
    // write), the callback dispatcher, which claims due events every second, is off, and so
    // is the request log (its batches are writes of their own, off the request path).
    let s = TestServer::start(|s| {
        s.sweep_interval = std::time::Duration::from_secs(3600);
        s.dispatch = false;
        s.request_log = false;
    })
    .await;
    let c = &s.client();
    // The first create also reserves a block of the sandbox's requisite numbers.
    let first = c.create_payment(&body("w-0", "100")).await.unwrap();
    assert_eq!(first.status, StatusCode::CREATED);
    const N: u64 = 40;
    wait_for_settled_writes(&s).await;
    // One write each: the sandbox answers locally, so the payment is inserted with its
    // requisites (a provider asked after the insert makes it two).
    let issued = writes_of_creates(&s, "w", N, "100", "processing").await;
    assert_eq!(issued, N, "store writes for {N} creates");
    // A refusal is stored as before: the payment, then its error.
    let refused = writes_of_creates(&s, "r", N, "100.13", "error").await;
    assert_eq!(refused, 2 * N, "store writes for {N} refused creates");
    s.stop().await;
}
