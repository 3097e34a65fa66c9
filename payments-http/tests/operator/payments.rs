//! Operator payment operations and `invalid_transition`, and a project reading only its own
//! payments.

use serde_json::{json, Value};

use crate::common::TestApp;
use crate::support::provision;

#[tokio::test]
async fn payment_operations_and_invalid_transition() {
    let app = TestApp::sandbox().await;
    let (token, signer) = app.demo();
    // A destination, so closing a payment queues a callback event.
    app.op(
        "PATCH",
        &format!("/operator/v1/projects/{}", app.creds().project_id),
        Some(json!({"callback_url": "https://shop.example.com/cb"})),
    )
    .await;
    let pay = |p: &str, op: &str| format!("/operator/v1/payments/{p}/{op}");

    // confirm with another amount -> completed
    let created = app.create_payment(&token, &signer, "1000").await;
    assert_eq!(created.status, 201, "{}", created.text);
    assert_eq!(created.body["status"], "processing");
    let id = created.body["id"].as_str().unwrap().to_string();
    let confirmed = app
        .op("POST", &pay(&id, "confirm"), Some(json!({"amount": "990"})))
        .await;
    assert_eq!(confirmed.status, 200, "{}", confirmed.text);
    assert_eq!(confirmed.body["payment"]["status"], "completed");
    assert!(confirmed.body["payment"]["amount"]
        .to_string()
        .contains("990"));
    assert!(confirmed.body["event_id"].is_string());

    // recheck -> appeal; resolve unchanged -> completed again
    let appeal = app.op("POST", &pay(&id, "recheck"), None).await;
    assert_eq!(appeal.status, 200, "{}", appeal.text);
    assert_eq!(appeal.body["payment"]["status"], "appeal");
    assert_eq!(appeal.body["event_id"], Value::Null);
    let bad_status = app
        .op(
            "POST",
            &pay(&id, "recheck/resolve"),
            Some(json!({"status": "paid"})),
        )
        .await;
    assert_eq!(bad_status.status, 400);
    assert!(bad_status.message().contains("status"));
    let resolved = app
        .op(
            "POST",
            &pay(&id, "recheck/resolve"),
            Some(json!({"status": "canceled"})),
        )
        .await;
    assert_eq!(resolved.status, 200, "{}", resolved.text);
    assert_eq!(resolved.body["payment"]["status"], "canceled");

    // cancel a canceled payment -> 409 naming the status
    let again = app.op("POST", &pay(&id, "cancel"), None).await;
    assert_eq!(again.status, 409, "{}", again.text);
    assert_eq!(again.code(), "invalid_transition");
    assert!(again.message().contains("canceled"), "{}", again.text);

    // resend: one more event
    let resent = app.op("POST", &pay(&id, "callbacks/resend"), None).await;
    assert_eq!(resent.status, 200, "{}", resent.text);
    assert!(resent.body["event_id"].is_string());

    let events = app
        .op("GET", &format!("/operator/v1/payments/{id}/events"), None)
        .await;
    assert_eq!(events.status, 200);
    let list = events.body["events"].as_array().unwrap();
    let kinds: Vec<(&str, &str)> = list
        .iter()
        .map(|e| {
            (
                e["status"].as_str().unwrap(),
                e["destination"].as_str().unwrap(),
            )
        })
        .collect();
    assert_eq!(list.len(), 3, "{}", events.text);
    assert_eq!(kinds[0], ("completed", "https://shop.example.com/cb"));
    assert_eq!(kinds[1].0, "canceled");
    assert_eq!(kinds[2].0, "canceled");
    assert_eq!(list[2]["event_id"], resent.body["event_id"]);
    assert!(list.iter().all(|e| e["attempts"].is_array()));

    // cancel a processing payment; a re-check result without a re-check is refused; a
    // late confirmation (paid after the lifetime) completes it
    let second = app.create_payment(&token, &signer, "1000").await;
    let id2 = second.body["id"].as_str().unwrap().to_string();
    let canceled = app.op("POST", &pay(&id2, "cancel"), None).await;
    assert_eq!(canceled.body["payment"]["status"], "canceled");
    let resolve = app
        .op(
            "POST",
            &pay(&id2, "recheck/resolve"),
            Some(json!({"status": "completed"})),
        )
        .await;
    assert_eq!(resolve.status, 409, "{}", resolve.text);
    assert_eq!(resolve.code(), "invalid_transition");
    assert!(resolve.message().contains("canceled"), "{}", resolve.text);
    let late = app.op("POST", &pay(&id2, "confirm"), None).await;
    assert_eq!(late.status, 200, "{}", late.text);
    let shown = app
        .op("GET", &format!("/operator/v1/payments/{id2}"), None)
        .await;
    assert_eq!(shown.body["status"], "completed");

    let unknown = app
        .op(
            "POST",
            &pay("00000000-0000-4000-8000-000000000000", "cancel"),
            None,
        )
        .await;
    assert_eq!(unknown.status, 404);
    assert_eq!(unknown.code(), "payment_not_found");
    let extra = app
        .op(
            "POST",
            &pay(&id2, "confirm"),
            Some(json!({"amount": "1", "note": "x"})),
        )
        .await;
    assert_eq!(extra.status, 400);
    assert!(extra.message().contains("note"));
}

/// A project reads only its own payments: another project's payment id is `404
/// payment_not_found`, exactly like an unknown one (the payment is read in the same store round
/// trip as the credentials, so the owner check is the only thing between them).
#[tokio::test]
async fn a_project_cannot_read_another_projects_payment() {
    let app = TestApp::sandbox().await;
    let (demo_token, demo_key) = app.demo();
    let created = app.create_payment(&demo_token, &demo_key, "500").await;
    assert_eq!(created.status, 201, "{}", created.text);
    let path = format!("/api/v1/payments/{}", created.body["id"].as_str().unwrap());
    let own = app.merchant("GET", &path, &demo_token, None, b"").await;
    assert_eq!(own.status, 200, "{}", own.text);
    assert_eq!(own.body["id"], created.body["id"]);

    let other = provision(&app).await;
    for key in [None, Some(&other.signer)] {
        let foreign = app.merchant("GET", &path, &other.token, key, b"").await;
        assert_eq!(foreign.status, 404, "{}", foreign.text);
        assert_eq!(foreign.code(), "payment_not_found");
        assert!(!foreign.text.contains(created.body["id"].as_str().unwrap()));
    }
    // An unknown token learns nothing either: 401 before any payment is considered.
    let unknown = app
        .merchant("GET", &path, "sk_sandbox_unknown", None, b"")
        .await;
    assert_eq!(unknown.status, 401, "{}", unknown.text);
}
