//! One attempt against an HTTPS receiver: the request as sent, how each kind of answer or
//! connection failure is recorded, the receiver's certificate and the per-host bound.

use std::net::{IpAddr, Ipv4Addr};
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::Duration;

use payments_core::callback::{ATTEMPT_TIMEOUT, RESPONSE_READ_LIMIT};
use payments_core::event::{DeliveryErrorKind, DeliveryState, EventKind, EventRecord};
use payments_http::dispatcher::DispatcherConfig;
use payments_http::resolver::StaticLookup;
use tokio::net::TcpListener;

use crate::support::{advance, local_config, pki, receiver, world, Reply, HOST, T0};

#[tokio::test]
async fn first_attempt_succeeds_with_the_spec_headers_and_a_verifiable_signature() {
    let pki = pki();
    let w = world().await;
    let mut rx = receiver(&pki, |_| Reply::Status(200)).await;
    let (payment, event_id) = w.event(&rx.url(HOST), EventKind::Automatic, 3).await;
    let d = w.dispatcher(local_config(&pki));

    assert_eq!(d.deliver_due_once().await, 1);

    let got = rx.drain();
    assert_eq!(got.len(), 1);
    let r = &got[0];
    let record = w.record(payment).await;
    assert_eq!(
        r.body, record.outbox.event.body,
        "the frozen body bytes are sent"
    );
    assert_eq!(r.header("content-type"), "application/json");
    assert_eq!(r.header("x-callback-event-id"), event_id.to_string());
    assert_eq!(r.header("x-callback-timestamp"), T0.to_string());
    assert!(r.header("x-callback-signature").starts_with("v1="));
    assert_eq!(
        w.verifier().verify(
            r.header("x-callback-timestamp"),
            r.header("x-callback-signature"),
            &r.body,
            w.now()
        ),
        Ok(())
    );
    let body: serde_json::Value = serde_json::from_slice(&r.body).expect("JSON body");
    assert_eq!(body["event_id"], event_id.to_string());

    assert_eq!(record.outbox.state, DeliveryState::Delivered);
    assert_eq!(record.outbox.next_attempt_at, None);
    assert_eq!(record.attempts.len(), 1);
    let a = &record.attempts[0];
    assert_eq!(
        (
            a.attempt,
            a.started_at,
            a.http_status,
            a.success,
            a.error.as_deref()
        ),
        (1, w.now(), Some(200), true, None)
    );
    // Nothing more is due.
    advance(&w, 3600);
    assert_eq!(d.deliver_due_once().await, 0);
    assert!(rx.drain().is_empty());
}

#[tokio::test]
async fn a_redirect_is_a_failure_and_is_not_followed() {
    let pki = pki();
    let w = world().await;
    let mut target = receiver(&pki, |_| Reply::Status(200)).await;
    let location = target.url("other.test");
    let mut rx = receiver(&pki, move |_| Reply::Redirect(location.clone())).await;
    let (payment, _) = w.event(&rx.url(HOST), EventKind::Automatic, 3).await;
    let d = w.dispatcher(local_config(&pki));

    assert_eq!(d.deliver_due_once().await, 1);
    assert_eq!(rx.drain().len(), 1);
    let rec = w.record(payment).await;
    let a = &rec.attempts[0];
    assert_eq!(a.http_status, Some(302));
    assert!(!a.success);
    assert_eq!(a.error.as_deref(), Some("redirect (302) not followed"));
    assert_eq!(rec.outbox.state, DeliveryState::Pending);
    tokio::time::sleep(Duration::from_millis(200)).await;
    assert!(target.drain().is_empty());
    assert_eq!(target.connections.load(Ordering::SeqCst), 0);
}

#[tokio::test]
async fn a_slow_answer_and_a_stalled_body_time_out() {
    assert_eq!(DispatcherConfig::default().attempt_timeout, ATTEMPT_TIMEOUT);
    assert_eq!(ATTEMPT_TIMEOUT, Duration::from_secs(10));
    let pki = pki();
    let w = world().await;
    let slow = receiver(&pki, |_| Reply::Delay(Duration::from_secs(11))).await;
    let stalled = receiver(&pki, |_| Reply::StallBody).await;
    let (slow_payment, _) = w.event(&slow.url(HOST), EventKind::Automatic, 3).await;
    let (stalled_payment, _) = w.event(&stalled.url(HOST), EventKind::Automatic, 3).await;
    let d = w.dispatcher(DispatcherConfig {
        attempt_timeout: Duration::from_secs(1),
        lease: Duration::from_secs(5),
        ..local_config(&pki)
    });

    let started = std::time::Instant::now();
    assert_eq!(d.deliver_due_once().await, 2);
    assert!(
        started.elapsed() < Duration::from_secs(3),
        "both ran at once"
    );

    let slow = w.record(slow_payment).await.attempts.remove(0);
    assert_eq!(slow.http_status, None);
    assert!(!slow.success);
    assert_eq!(slow.error.as_deref(), Some("timeout after 1s"));
    assert_eq!(slow.error_kind(), Some(DeliveryErrorKind::Timeout));
    assert_eq!(slow.result_for_merchant(), "timeout: no answer in time");
    assert!(
        (1000..3000).contains(&slow.duration_ms),
        "{}",
        slow.duration_ms
    );

    let stalled = w.record(stalled_payment).await.attempts.remove(0);
    assert_eq!(
        stalled.http_status,
        Some(200),
        "headers came, the body did not"
    );
    assert!(!stalled.success);
    assert_eq!(stalled.error.as_deref(), Some("timeout after 1s"));
}

#[tokio::test]
async fn a_huge_answer_is_a_success_after_reading_at_most_4_kib() {
    assert_eq!(DispatcherConfig::default().read_limit, RESPONSE_READ_LIMIT);
    assert_eq!(RESPONSE_READ_LIMIT, 4096);
    const TEN_MB: usize = 10 * 1024 * 1024;
    let pki = pki();
    let w = world().await;
    let mut rx = receiver(&pki, |_| Reply::Stream(TEN_MB)).await;
    let (payment, _) = w.event(&rx.url(HOST), EventKind::Automatic, 3).await;
    let d = w.dispatcher(local_config(&pki));

    assert_eq!(d.deliver_due_once().await, 1);
    let a = w.record(payment).await.attempts.remove(0);
    assert_eq!((a.http_status, a.success, a.error), (Some(200), true, None));

    let streamed = rx.streamed.take().expect("one stream report");
    let (written, failed) = tokio::time::timeout(Duration::from_secs(5), streamed)
        .await
        .expect("the receiver notices the client went away")
        .expect("the receiver reports");
    assert!(
        failed,
        "the client closed the connection before the body ended"
    );
    // The client read 4 KiB; the rest is what the two kernels' socket buffers absorbed.
    assert!(
        written < TEN_MB / 10,
        "{written} bytes were written before the client went away"
    );
}

#[tokio::test]
async fn a_closed_port_is_a_connect_failure() {
    let pki = pki();
    let w = world().await;
    let port = {
        let l = TcpListener::bind((Ipv4Addr::LOCALHOST, 0))
            .await
            .expect("bind 127.0.0.1:0");
        l.local_addr().expect("bound").port()
    };
    let (payment, _) = w
        .event(
            &format!("https://{HOST}:{port}/cb"),
            EventKind::Automatic,
            3,
        )
        .await;
    let d = w.dispatcher(local_config(&pki));
    assert_eq!(d.deliver_due_once().await, 1);
    let a = w.record(payment).await.attempts.remove(0);
    let error = a.error.clone().unwrap_or_default();
    assert!(error.starts_with("connection refused: "), "{error}");
    assert_eq!(a.error_kind(), Some(DeliveryErrorKind::ConnectionRefused));
    assert_eq!(a.result_for_merchant(), "connection refused");
    assert_eq!(a.http_status, None);
}

/// An `https` URL whose receiver speaks plain HTTP: a TLS failure, told by rustls' error (not
/// by its message), shown as such; the library's words stay in the detail.
#[tokio::test]
async fn a_receiver_without_tls_is_a_tls_failure() {
    let pki = pki();
    let w = world().await;
    let listener = TcpListener::bind((Ipv4Addr::LOCALHOST, 0))
        .await
        .expect("bind 127.0.0.1:0");
    let port = listener.local_addr().expect("bound").port();
    let server = tokio::spawn(async move {
        use tokio::io::{AsyncReadExt as _, AsyncWriteExt as _};
        while let Ok((mut socket, _)) = listener.accept().await {
            let mut buf = [0u8; 1024];
            let _ = socket.read(&mut buf).await;
            let _ = socket
                .write_all(b"HTTP/1.1 400 Bad Request\r\ncontent-length: 0\r\n\r\n")
                .await;
        }
    });
    let (payment, _) = w
        .event(
            &format!("https://{HOST}:{port}/cb"),
            EventKind::Automatic,
            3,
        )
        .await;
    let d = w.dispatcher(local_config(&pki));
    assert_eq!(d.deliver_due_once().await, 1);
    let a = w.record(payment).await.attempts.remove(0);
    assert_eq!(
        a.error_kind(),
        Some(DeliveryErrorKind::TlsError),
        "{:?}",
        a.error
    );
    assert!(
        a.error
            .as_deref()
            .unwrap_or_default()
            .starts_with("tls error: "),
        "{:?}",
        a.error
    );
    assert_eq!(
        a.result_for_merchant(),
        "TLS failure: the receiver's certificate or TLS handshake was not accepted"
    );
    assert!(a.error_detail().is_some_and(|d| !d.is_empty()));
    server.abort();
}

/// A host name that does not resolve: a DNS failure, from the resolver's own error.
#[tokio::test]
async fn a_name_that_does_not_resolve_is_a_dns_failure() {
    let pki = pki();
    let w = world().await;
    let (payment, _) = w
        .event("https://nowhere.test/cb", EventKind::Automatic, 3)
        .await;
    let d = w.dispatcher(local_config(&pki));
    assert_eq!(d.deliver_due_once().await, 1);
    let a = w.record(payment).await.attempts.remove(0);
    assert_eq!(
        a.error_kind(),
        Some(DeliveryErrorKind::DnsFailure),
        "{:?}",
        a.error
    );
    assert_eq!(
        a.result_for_merchant(),
        "DNS failure: the callback URL's host name did not resolve"
    );
}

#[tokio::test]
async fn deliveries_to_one_host_are_bounded() {
    let pki = pki();
    let delay = Duration::from_millis(300);
    for (per_host, at_least, below) in [(2, 2 * delay, None), (4, delay, Some(2 * delay))] {
        let w = world().await;
        let mut rx = receiver(&pki, move |_| Reply::Delay(delay)).await;
        for _ in 0..4 {
            w.event(&rx.url(HOST), EventKind::Automatic, 3).await;
        }
        let d = w.dispatcher(DispatcherConfig {
            per_host,
            ..local_config(&pki)
        });
        let started = std::time::Instant::now();
        assert_eq!(d.deliver_due_once().await, 4);
        let took = started.elapsed();
        assert_eq!(rx.drain().len(), 4);
        assert!(took >= at_least, "per_host {per_host}: {took:?}");
        if let Some(below) = below {
            assert!(took < below, "per_host {per_host}: {took:?}");
        }
    }
}

#[tokio::test]
async fn the_receiver_certificate_is_verified() {
    let pki = pki();
    let w = world().await;
    let mut rx = receiver(&pki, |_| Reply::Status(200)).await;
    let (untrusted, _) = w.event(&rx.url(HOST), EventKind::Automatic, 3).await;
    let (wrong_name, _) = w
        .event(&rx.url("third.test"), EventKind::Automatic, 3)
        .await;
    let localhost = IpAddr::V4(Ipv4Addr::LOCALHOST);
    let lookup = Arc::new(
        StaticLookup::new()
            .with(HOST, [localhost])
            .with("third.test", [localhost]),
    );
    // Without the test CA only the public roots are trusted.
    let public_roots_only = w.dispatcher(DispatcherConfig {
        extra_roots: Vec::new(),
        lookup: lookup.clone(),
        ..local_config(&pki)
    });
    assert_eq!(public_roots_only.deliver_due_once().await, 2);
    // With the test CA, a name the certificate does not carry still fails.
    let with_ca = w.dispatcher(DispatcherConfig {
        lookup,
        ..local_config(&pki)
    });
    assert_eq!(with_ca.deliver_due_once().await, 2);

    let errors = |rec: EventRecord| -> Vec<String> {
        rec.attempts
            .into_iter()
            .map(|a| a.error.unwrap_or_else(|| "success".into()))
            .collect()
    };
    let untrusted = errors(w.record(untrusted).await);
    assert!(untrusted[0].contains("UnknownIssuer"), "{untrusted:?}");
    assert_eq!(untrusted[1], "success");
    let wrong_name = errors(w.record(wrong_name).await);
    assert!(
        wrong_name.iter().all(|e| e.starts_with("tls error: ")),
        "{wrong_name:?}"
    );
    assert!(untrusted[0].starts_with("tls error: "), "{untrusted:?}");
    assert!(
        wrong_name[1].contains("not valid for name"),
        "{wrong_name:?}"
    );
    assert_eq!(
        rx.drain().len(),
        1,
        "only the verified connection sent the callback"
    );
}
