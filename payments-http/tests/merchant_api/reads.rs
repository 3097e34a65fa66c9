//! Reads: the project, banks and request ids, and a payment the sweeper cancels once its
//! lifetime has passed.

use std::time::Duration;

use payments_directory::ProjectPatch;
use payments_http::testing::TestServer;
use reqwest::{Method, StatusCode};
use serde_json::json;

use crate::support::body;
use payments_core::store::MerchantStoreExt;

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
    s.state.service.store().upsert_project(&p).await.unwrap();
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
        json!([
            "payments:create",
            "payments:read",
            "payments:test",
            "events:read",
            "events:resend",
            "balance:read"
        ])
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
