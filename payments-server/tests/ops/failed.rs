//! An event that fails three times is listed, counted and resent in bulk.

use payments_core::callback::RetrySchedule;
use payments_server::testing::TestServer;
use serde_json::json;

use crate::support::{create_with_callback, eventually, op, sample, scrape, Receiver};

#[tokio::test]
async fn an_event_failing_three_times_is_listed_counted_and_resent_in_bulk() {
    let receiver = Receiver::start(500).await;
    let s = TestServer::start(|s| {
        s.callbacks.allow_local = true;
        s.callbacks.retry_delays = RetrySchedule::parse_delays("0,0").unwrap();
    })
    .await;
    let id = create_with_callback(&s, "fail-1", &receiver.url).await;
    let (status, confirmed) = op(
        &s,
        "POST",
        &format!("/operator/v1/payments/{id}/confirm"),
        Some(json!({})),
    )
    .await;
    assert_eq!(status, 200, "{confirmed}");
    let first_event = confirmed["event_id"].as_str().unwrap().to_string();

    // Three attempts, all answered 500: the event fails and is listed.
    eventually(30, "the failed event to be listed", || async {
        let (_, list) = op(&s, "GET", "/operator/v1/callbacks/failed", None).await;
        list["events"].as_array().is_some_and(|e| e.len() == 1)
    })
    .await;
    let got = receiver.received();
    assert_eq!(got.len(), 3, "three attempts");
    assert!(got.iter().all(|g| g.event_id == first_event));
    let (_, list) = op(
        &s,
        "GET",
        &format!(
            "/operator/v1/callbacks/failed?host=127.0.0.1&project_id={}",
            s.project()
        ),
        None,
    )
    .await;
    let failed = &list["events"][0];
    assert_eq!(failed["event_id"], first_event.as_str());
    assert_eq!(failed["payment_id"], id.as_str());
    assert_eq!(failed["host"], "127.0.0.1");
    assert_eq!(failed["attempts_made"], 3);
    assert_eq!(failed["last_attempt"]["http_status"], 500);
    assert_eq!(failed["last_attempt"]["error"], "http status 500");
    for query in [
        "host=merchant.example",
        "since=2999-01-01T00:00:00Z",
        "until=2000-01-01T00:00:00Z",
    ] {
        let (status, other) = op(
            &s,
            "GET",
            &format!("/operator/v1/callbacks/failed?{query}"),
            None,
        )
        .await;
        assert_eq!(status, 200);
        assert_eq!(other["events"], json!([]), "{query}");
    }
    let (status, bad) = op(
        &s,
        "GET",
        "/operator/v1/callbacks/failed?since=yesterday",
        None,
    )
    .await;
    assert_eq!(status, 400);
    assert_eq!(bad["code"], "bad_request");

    let text = scrape(&s).await;
    assert_eq!(sample(&text, "payments_outbox_failed"), Some(1.0), "{text}");
    assert_eq!(
        sample(&text, "payments_callback_events_failed_total"),
        Some(1.0)
    );
    assert_eq!(
        sample(
            &text,
            "payments_callback_attempt_failures_total{reason=\"http_5xx\"}"
        ),
        Some(3.0)
    );
    assert_eq!(sample(&text, "payments_outbox_pending"), Some(0.0));

    // The receiver is fixed; the operator resends every failure for that host.
    receiver
        .status
        .store(200, std::sync::atomic::Ordering::SeqCst);
    let (status, report) = op(
        &s,
        "POST",
        "/operator/v1/callbacks/failed/resend",
        Some(json!({"host": "127.0.0.1"})),
    )
    .await;
    assert_eq!(status, 200, "{report}");
    assert_eq!(report["skipped"], json!([]));
    let resent = &report["resent"][0];
    assert_eq!(resent["payment_id"], id.as_str());
    assert_eq!(resent["failed_event_ids"], json!([first_event]));
    let new_event = resent["event_id"].as_str().unwrap().to_string();
    assert_ne!(new_event, first_event, "a resend is a new event");
    eventually(30, "the resend to arrive", || async {
        receiver.received().len() == 4
    })
    .await;
    let last = receiver.received().pop().unwrap();
    assert_eq!(last.event_id, new_event);
    assert_eq!(last.body["status"], "completed");
    assert_eq!(last.body["event_id"], new_event.as_str());

    let (_, list) = op(&s, "GET", "/operator/v1/callbacks/failed", None).await;
    assert_eq!(list["events"], json!([]));
    let text = scrape(&s).await;
    assert_eq!(sample(&text, "payments_outbox_failed"), Some(0.0));
    // A second bulk resend finds nothing to do.
    let (_, again) = op(
        &s,
        "POST",
        "/operator/v1/callbacks/failed/resend",
        Some(json!({})),
    )
    .await;
    assert_eq!(again, json!({"resent": [], "skipped": []}));

    let (_, audit) = op(&s, "GET", "/operator/v1/audit?limit=10", None).await;
    let records = audit["records"].as_array().unwrap();
    let bulk = records
        .iter()
        .find(|r| r["action"] == "callbacks.resend_failed" && r["target"] == "host=127.0.0.1")
        .expect("the bulk resend is audited");
    assert_eq!(bulk["actor"], "operator:default");
    assert_eq!(bulk["after"]["resent_payments"], 1);
    assert!(records
        .iter()
        .any(|r| r["action"] == "payment.resend_callback" && r["target"] == id.as_str()));
    s.stop().await;
}
