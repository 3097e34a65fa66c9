//! Provider notifications over the notification listener: applied once, every refusal with
//! its own status and nothing changed, audited.

use payments_core::PaymentId;
use payments_directory::ProjectPatch;
use payments_server::testing::TestServer;
use reqwest::StatusCode;
use serde_json::json;

use crate::support::{
    body, notification, notify, notify_at, notify_signed, unix_now, Mode, Upstream,
};

/// A server over the upstream with a processing payment whose project has a callback URL
/// (dispatch off: events stay in the outbox for the test to see).
pub(crate) async fn with_payment() -> (Upstream, TestServer, String, String) {
    let u = Upstream::start(Mode::Issue).await;
    let s = {
        let u = u.clone();
        TestServer::start(move |s| {
            u.configure(s);
            s.callbacks.dispatch = false;
        })
        .await
    };
    s.patch_project(ProjectPatch {
        callback_url: Some(Some("https://merchant.example.com/callbacks".into())),
        ..ProjectPatch::default()
    })
    .await;
    let r = s
        .client()
        .create_payment(&body("n-1", "3400"))
        .await
        .unwrap();
    assert_eq!(r.json["status"], "processing", "{}", r.json);
    let id = r.json["id"].as_str().unwrap().to_string();
    let url = s.notifications_url.clone().expect("the listener is on");
    (u, s, id, url)
}

async fn state(s: &TestServer, id: &str) -> (String, usize, usize) {
    let pid: PaymentId = id.parse().unwrap();
    let store = s.state.service.store();
    let p = store.payment(pid).await.unwrap().unwrap();
    let events = store.events_for_payment(pid).await.unwrap().len();
    let audit = store.find_audit_records(1000).await.unwrap().len();
    (p.status.to_string(), events, audit)
}

#[tokio::test]
async fn a_valid_notification_completes_the_payment_and_queues_the_callback_once() {
    let (_u, s, id, url) = with_payment().await;
    let (status, events, audit) = state(&s, &id).await;
    assert_eq!((status.as_str(), events), ("processing", 0));

    let n = json!({"notification_id": "up-1", "payment_id": id, "status": "confirmed", "amount": "3390.00"});
    let (code, answer) = notify(&url, &n).await;
    assert_eq!(code, StatusCode::OK, "{answer}");
    assert_eq!(answer["applied"], true);
    assert_eq!(answer["status"], "completed");
    let (status, events, audit_after) = state(&s, &id).await;
    assert_eq!((status.as_str(), events), ("completed", 1));
    assert_eq!(audit_after, audit + 1, "audited");
    let record = &s.state.service.store().find_audit_records(1).await.unwrap()[0];
    assert_eq!(record.actor, "upstream notification:up-1");
    assert_eq!(record.action, "payment.confirm");
    let got = s.client().get_payment(&id).await.unwrap();
    assert_eq!(got.json["amount"].to_string(), "3390.00");

    // The upstream's repeat (signed anew, a second later): 200, nothing changes.
    let (code, answer) = notify_at(&url, &n, unix_now() + 1).await;
    assert_eq!(code, StatusCode::OK, "{answer}");
    assert_eq!(answer["applied"], false);
    assert_eq!(state(&s, &id).await, ("completed".into(), 1, audit + 1));
    s.stop().await;
}

#[tokio::test]
async fn replayed_tampered_stale_and_unknown_notifications_change_nothing() {
    let (_u, s, id, url) = with_payment().await;
    let before = state(&s, &id).await;
    let good = serde_json::to_vec(&notification("up-2", &id, "confirmed")).unwrap();
    let now = unix_now();

    // Tampered: another body under the signature of this one.
    let tampered = serde_json::to_vec(&notification("up-2", &id, "failed")).unwrap();
    let (code, answer) = notify_signed(&url, &tampered, now, &good).await;
    assert_eq!(code, StatusCode::UNAUTHORIZED);
    assert_eq!(answer["code"], "signature_invalid");
    // Stale: signed more than 300 s ago.
    let (code, answer) = notify_at(&url, &notification("up-2", &id, "confirmed"), now - 301).await;
    assert_eq!(code, StatusCode::UNAUTHORIZED);
    assert_eq!(answer["code"], "signature_invalid");
    assert!(
        answer["message"].as_str().unwrap().contains("300 s"),
        "{answer}"
    );
    // Unsigned.
    let r = reqwest::Client::new()
        .post(&url)
        .body(good.clone())
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), StatusCode::UNAUTHORIZED);
    // Unknown payment.
    let ghost = "0191f2a4-1c1f-7a3e-9b1e-3c2d1e0f9a8b";
    let (code, answer) = notify(&url, &notification("up-3", ghost, "confirmed")).await;
    assert_eq!(code, StatusCode::NOT_FOUND);
    assert_eq!(answer["code"], "payment_not_found");
    // Malformed.
    let (code, answer) = notify(
        &url,
        &json!({"notification_id": "up-4", "payment_id": id, "status": "paid"}),
    )
    .await;
    assert_eq!(code, StatusCode::BAD_REQUEST);
    assert_eq!(answer["code"], "bad_request");
    // Oversized.
    let big = json!({"notification_id": "up-5", "payment_id": id, "status": "failed", "reason": "x".repeat(70 * 1024)});
    let (code, _) = notify(&url, &big).await;
    assert_eq!(code, StatusCode::PAYLOAD_TOO_LARGE);
    assert_eq!(state(&s, &id).await, before);

    // Replayed: the same signed request again after it was applied.
    let (code, _) = notify_signed(&url, &good, now, &good).await;
    assert_eq!(code, StatusCode::OK);
    let applied = state(&s, &id).await;
    let (code, answer) = notify_signed(&url, &good, now, &good).await;
    assert_eq!(code, StatusCode::CONFLICT);
    assert_eq!(answer["code"], "request_replayed");
    assert_eq!(state(&s, &id).await, applied);

    // A failure for an already completed payment by a new id is the operator's cancel.
    let (code, answer) = notify(&url, &notification("up-6", &id, "failed")).await;
    assert_eq!(
        (code, answer["status"].as_str()),
        (StatusCode::OK, Some("canceled"))
    );
    // A confirmation of a payment that never had requisites is refused.
    _u.set_mode(Mode::NoRequisites);
    let e = s
        .client()
        .create_payment(&body("n-2", "100"))
        .await
        .unwrap();
    let eid = e.json["id"].as_str().unwrap().to_string();
    let (code, answer) = notify(&url, &notification("up-7", &eid, "confirmed")).await;
    assert_eq!(code, StatusCode::CONFLICT);
    assert_eq!(answer["code"], "invalid_transition");
    s.stop().await;
}

#[tokio::test]
async fn the_merchant_api_does_not_serve_notifications() {
    let (_u, s, id, _url) = with_payment().await;
    let body = serde_json::to_vec(&notification("up-8", &id, "confirmed")).unwrap();
    let r = reqwest::Client::new()
        .post(format!("{}/upstream/v1/notifications", s.merchant_url))
        .body(body)
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), StatusCode::NOT_FOUND);
    assert_eq!(state(&s, &id).await.0, "processing");
    s.stop().await;
}
