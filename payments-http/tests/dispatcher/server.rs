//! The routers and workers (`TestServer`) with a plain-HTTP receiver: holding callbacks with
//! the dispatcher off, over real sockets and a restart on the same database.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

use payments_core::callback::{CallbackSecret, CallbackVerifier};
use payments_core::event::{DeliveryState, EventRecord};
use payments_core::{PaymentId, Timestamp};
use payments_http::testing::{TestConfig, TestServer};
use tokio::io::AsyncWriteExt;
use tokio::net::TcpListener;
use tokio::sync::mpsc;

use crate::support::{read_request, Receiver};

/// A plain-HTTP receiver on 127.0.0.1:0 (allowed by `allow_local_callbacks`) answering `200`
/// and closing; it counts connections and forwards every request it read.
async fn plain_receiver() -> Receiver {
    let listener = TcpListener::bind("127.0.0.1:0")
        .await
        .expect("bind 127.0.0.1:0");
    let port = listener.local_addr().expect("bound").port();
    let (tx, got) = mpsc::unbounded_channel();
    let connections = Arc::new(AtomicUsize::new(0));
    let counted = connections.clone();
    tokio::spawn(async move {
        loop {
            let Ok((mut tcp, _)) = listener.accept().await else {
                return;
            };
            counted.fetch_add(1, Ordering::SeqCst);
            let tx = tx.clone();
            tokio::spawn(async move {
                let Some(received) = read_request(&mut tcp).await else {
                    return;
                };
                let _ = tx.send(received);
                let _ = tcp
                    .write_all(
                        b"HTTP/1.1 200 OK\r\ncontent-length: 2\r\nconnection: close\r\n\r\nok",
                    )
                    .await;
                let _ = tcp.shutdown().await;
            });
        }
    });
    Receiver {
        port,
        got,
        connections,
        streamed: None,
    }
}

/// Test settings with local callbacks allowed and dispatch on or off.
fn dispatch(on: bool) -> impl FnOnce(&mut TestConfig) {
    move |s| {
        s.service.callback_policy.allow_local = true;
        s.dispatch = on;
    }
}

/// The operator API's `/metrics` value of `payments_outbox_pending`.
async fn outbox_pending(s: &TestServer) -> u64 {
    s.metric("payments_outbox_pending ").await as u64
}

async fn the_event(s: &TestServer, payment: PaymentId) -> EventRecord {
    let mut events = s
        .state
        .service
        .store()
        .events_for_payment(payment)
        .await
        .expect("store answers");
    assert_eq!(events.len(), 1, "one event for the payment");
    events.remove(0)
}

#[tokio::test]
async fn with_dispatch_off_the_event_waits_in_the_outbox_until_a_server_with_dispatch_on() {
    let mut rx = plain_receiver().await;
    let url = format!("http://127.0.0.1:{}/callbacks", rx.port);
    let s = TestServer::start(dispatch(false)).await;

    // A payment with the receiver as its callback URL, closed by the operator: the event is
    // committed with the status change.
    let created = s
        .client()
        .create_payment(&serde_json::json!({
            "merchant_payment_id": "held-1",
            "amount": "3400",
            "payment_method": "sbp",
            "callback_url": url,
        }))
        .await
        .expect("the create is answered");
    assert_eq!(created.status.as_u16(), 201, "{}", created.json);
    let id = created.json["id"].as_str().expect("an id").to_string();
    let payment: PaymentId = id.parse().expect("a payment id");
    let confirmed = reqwest::Client::new()
        .post(format!(
            "{}/operator/v1/payments/{id}/confirm",
            s.operator_url
        ))
        .bearer_auth(s.operator_token.expose())
        .json(&serde_json::json!({}))
        .send()
        .await
        .expect("the confirm is answered");
    assert_eq!(confirmed.status().as_u16(), 200);
    let confirmed: serde_json::Value = confirmed.json().await.expect("JSON");
    assert_eq!(confirmed["payment"]["status"], "completed");
    let event_id = confirmed["event_id"]
        .as_str()
        .expect("the confirm made an event")
        .to_string();

    // Well past the wake-up a running dispatcher gets at once, its 1 s poll and many 50 ms
    // sweeps: the receiver, listening all along, gets nothing.
    tokio::time::sleep(Duration::from_millis(1500)).await;
    assert_eq!(rx.connections.load(Ordering::SeqCst), 0, "no connection");
    assert!(rx.drain().is_empty(), "no request");
    let held = the_event(&s, payment).await;
    assert_eq!(held.outbox.event.event_id.to_string(), event_id);
    assert_eq!(held.outbox.state, DeliveryState::Pending);
    assert!(held.attempts.is_empty(), "{:?}", held.attempts);
    assert_eq!(outbox_pending(&s).await, 1);
    let ready = reqwest::get(format!("{}/readyz", s.merchant_url))
        .await
        .expect("readyz answers");
    assert_eq!(ready.status().as_u16(), 200, "ready with dispatch off");

    // A server with dispatch on over the same database sends it, signed with the secret.
    let s = s.restart(dispatch(true)).await;
    let got = tokio::time::timeout(Duration::from_secs(10), rx.got.recv())
        .await
        .expect("delivered after the restart")
        .expect("the receiver is alive");
    assert_eq!(got.header("x-callback-event-id"), event_id);
    let verifier = CallbackVerifier::new(vec![CallbackSecret::parse(
        s.creds().callback_secret.expose(),
    )
    .expect("the secret parses")]);
    let now_ms = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .expect("after 1970")
        .as_millis();
    verifier
        .verify(
            got.header("x-callback-timestamp"),
            got.header("x-callback-signature"),
            &got.body,
            Timestamp::from_unix_millis(i64::try_from(now_ms).expect("fits")),
        )
        .expect("the callback verifies");
    let body: serde_json::Value = serde_json::from_slice(&got.body).expect("a JSON body");
    assert_eq!(body["event_id"], event_id.as_str());
    assert_eq!(body["status"], "completed");

    // The attempt is recorded just after the answer.
    let deadline = std::time::Instant::now() + Duration::from_secs(5);
    let delivered = loop {
        let rec = the_event(&s, payment).await;
        if rec.outbox.state != DeliveryState::Pending || std::time::Instant::now() > deadline {
            break rec;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    };
    assert_eq!(delivered.outbox.state, DeliveryState::Delivered);
    assert_eq!(delivered.attempts.len(), 1);
    assert_eq!(delivered.attempts[0].http_status, Some(200));
    assert_eq!(outbox_pending(&s).await, 0);
    assert_eq!(rx.drain().len(), 0, "delivered once");
    s.stop().await;
}
