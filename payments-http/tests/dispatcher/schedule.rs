//! The retry schedule and its end, manual resends, a restart over the same store, and the
//! `run` loop.

use std::time::Duration;

use payments_core::callback::RetrySchedule;
use payments_core::event::{DeliveryState, EventKind};
use payments_core::service::ServiceConfig;
use payments_core::Timestamp;
use payments_http::dispatcher::DispatcherConfig;
use tokio::sync::oneshot;

use crate::support::{advance, local_config, pki, receiver, world, Reply, HOST, T0};

#[tokio::test]
async fn failures_are_retried_on_the_configured_schedule_with_new_signatures() {
    let pki = pki();
    let w = world().await;
    let mut rx = receiver(&pki, |n| Reply::Status(if n < 2 { 500 } else { 200 })).await;
    let (payment, event_id) = w.event(&rx.url(HOST), EventKind::Automatic, 3).await;
    let d = w.dispatcher_with(
        |c| c.retry = RetrySchedule::parse_delays("1,2").expect("valid delays"),
        local_config(&pki),
    );

    assert_eq!(d.deliver_due_once().await, 1);
    let rec = w.record(payment).await;
    assert_eq!(rec.outbox.state, DeliveryState::Pending);
    assert_eq!(
        rec.outbox.next_attempt_at,
        Some(Timestamp::from_unix_secs(T0 + 1))
    );
    // Not due yet.
    assert_eq!(d.deliver_due_once().await, 0);
    advance(&w, 1);
    assert_eq!(d.deliver_due_once().await, 1);
    assert_eq!(
        w.record(payment).await.outbox.next_attempt_at,
        Some(Timestamp::from_unix_secs(T0 + 3))
    );
    advance(&w, 1);
    assert_eq!(d.deliver_due_once().await, 0, "the second delay is 2 s");
    advance(&w, 1);
    assert_eq!(d.deliver_due_once().await, 1);

    let got = rx.drain();
    assert_eq!(got.len(), 3);
    let stamps: Vec<&str> = got
        .iter()
        .map(|r| r.header("x-callback-timestamp"))
        .collect();
    assert_eq!(
        stamps,
        [T0, T0 + 1, T0 + 3].map(|t| t.to_string()),
        "a new timestamp for every attempt"
    );
    let signatures: Vec<&str> = got
        .iter()
        .map(|r| r.header("x-callback-signature"))
        .collect();
    assert_ne!(signatures[0], signatures[1]);
    assert_ne!(signatures[1], signatures[2]);
    for r in &got {
        assert_eq!(r.header("x-callback-event-id"), event_id.to_string());
        assert_eq!(r.body, got[0].body, "the same body bytes in every retry");
        assert_eq!(
            w.verifier().verify(
                r.header("x-callback-timestamp"),
                r.header("x-callback-signature"),
                &r.body,
                w.now()
            ),
            Ok(())
        );
    }
    let rec = w.record(payment).await;
    assert_eq!(rec.outbox.state, DeliveryState::Delivered);
    let summary: Vec<_> = rec
        .attempts
        .iter()
        .map(|a| (a.attempt, a.http_status, a.success, a.error.clone()))
        .collect();
    assert_eq!(
        summary,
        vec![
            (1, Some(500), false, Some("http status 500".to_string())),
            (2, Some(500), false, Some("http status 500".to_string())),
            (3, Some(200), true, None),
        ]
    );
}

#[tokio::test]
async fn three_failures_end_the_event_as_failed() {
    let pki = pki();
    let w = world().await;
    let mut rx = receiver(&pki, |_| Reply::Status(503)).await;
    let (payment, _) = w.event(&rx.url(HOST), EventKind::Automatic, 3).await;
    let d = w.dispatcher(local_config(&pki));
    for _ in 0..3 {
        assert_eq!(d.deliver_due_once().await, 1);
    }
    let rec = w.record(payment).await;
    assert_eq!(rec.outbox.state, DeliveryState::Failed);
    assert_eq!(rec.outbox.next_attempt_at, None);
    assert_eq!(rec.attempts.len(), 3);
    advance(&w, 24 * 3600);
    assert_eq!(d.deliver_due_once().await, 0, "no fourth attempt");
    assert_eq!(rx.drain().len(), 3);
    assert!(w
        .metrics
        .render(
            &payments_http::metrics::StoreGauges::default(),
            payments_core::service::BatchStats::default(),
        )
        .contains("payments_callback_attempts_total{outcome=\"failure\"} 3"));
}

#[tokio::test]
async fn a_restart_continues_the_schedule_from_the_store() {
    let pki = pki();
    let w = world().await;
    let mut rx = receiver(&pki, |n| Reply::Status(if n == 0 { 500 } else { 204 })).await;
    let (payment, event_id) = w.event(&rx.url(HOST), EventKind::Automatic, 3).await;
    let spec_delays = |c: &mut ServiceConfig| {
        c.retry = RetrySchedule::parse_delays("30,60").expect("valid delays")
    };
    let config = || local_config(&pki);

    let first = w.dispatcher_with(spec_delays, config());
    assert_eq!(first.deliver_due_once().await, 1);
    drop(first);
    assert_eq!(
        w.record(payment).await.outbox.next_attempt_at,
        Some(Timestamp::from_unix_secs(T0 + 30))
    );

    let second = w.dispatcher_with(spec_delays, config());
    advance(&w, 29);
    assert_eq!(
        second.deliver_due_once().await,
        0,
        "not due before the stored time"
    );
    advance(&w, 1);
    assert_eq!(second.deliver_due_once().await, 1);

    let rec = w.record(payment).await;
    assert_eq!(rec.outbox.state, DeliveryState::Delivered);
    let a = &rec.attempts[1];
    assert_eq!(
        (a.attempt, a.started_at, a.http_status, a.success),
        (2, Timestamp::from_unix_secs(T0 + 30), Some(204), true)
    );
    let got = rx.drain();
    assert_eq!(got.len(), 2);
    assert_eq!(got[1].header("x-callback-event-id"), event_id.to_string());
}

#[tokio::test]
async fn a_manual_resend_gets_exactly_one_attempt() {
    let pki = pki();
    let w = world().await;
    let mut rx = receiver(&pki, |_| Reply::Status(500)).await;
    let (resend, _) = w.event(&rx.url(HOST), EventKind::ManualResend, 1).await;
    // Even a row that claims more attempts is sent once when it is a manual resend.
    let (odd, _) = w.event(&rx.url(HOST), EventKind::ManualResend, 3).await;
    let d = w.dispatcher(local_config(&pki));
    assert_eq!(d.deliver_due_once().await, 2);
    advance(&w, 3600);
    assert_eq!(d.deliver_due_once().await, 0);
    assert_eq!(rx.drain().len(), 2);
    for payment in [resend, odd] {
        let rec = w.record(payment).await;
        assert_eq!(rec.outbox.state, DeliveryState::Failed);
        assert_eq!(rec.attempts.len(), 1);
        assert_eq!(rec.attempts[0].http_status, Some(500));
    }
}

#[tokio::test]
async fn run_wakes_on_notify_and_stops_on_shutdown() {
    let pki = pki();
    let w = world().await;
    let mut rx = receiver(&pki, |_| Reply::Status(200)).await;
    let d = w.dispatcher(DispatcherConfig {
        // Only the notifier can make it look before the test ends.
        poll_interval: Duration::from_secs(600),
        ..local_config(&pki)
    });
    let notify = d.notifier();
    let (stop, stopped) = oneshot::channel::<()>();
    let running = tokio::spawn(d.run(async move {
        let _ = stopped.await;
    }));
    // Let the loop make its first (empty) claim and go to sleep.
    tokio::time::sleep(Duration::from_millis(100)).await;
    let (payment, event_id) = w.event(&rx.url(HOST), EventKind::Automatic, 3).await;
    notify.notify_one();
    let got = tokio::time::timeout(Duration::from_secs(5), rx.got.recv())
        .await
        .expect("delivered after the notification")
        .expect("receiver alive");
    assert_eq!(got.header("x-callback-event-id"), event_id.to_string());

    let _ = stop.send(());
    tokio::time::timeout(Duration::from_secs(5), running)
        .await
        .expect("run returns after shutdown")
        .expect("run does not panic");
    assert_eq!(
        w.record(payment).await.outbox.state,
        DeliveryState::Delivered
    );
}
