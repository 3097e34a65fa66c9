//! `--mode callbacks`: the verifying receiver, confirming through the operator API, and the
//! three phases (`all`, `queue`, `deliver`).

use std::collections::{BTreeMap, HashSet};
use std::net::SocketAddr;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, OnceLock};
use std::time::{Duration, Instant};

use bytes::Bytes;
use http_body_util::Full;
use hyper::Request;
use payments_benches::{socket_addr_of, Connection};
use payments_client::{MerchantClient, SandboxCredentials};
use payments_core::callback::{
    CallbackSecret, CallbackVerifier, EVENT_ID_HEADER, SIGNATURE_HEADER, TIMESTAMP_HEADER,
};
use payments_core::Timestamp;
use serde_json::json;

use crate::drive::{create_payments, drive, report, Ready, Run};
use crate::{unix_nanos, Args};

/// The callback receiver's counters.
#[derive(Debug, Default)]
struct Received {
    verified: AtomicU64,
    rejected: AtomicU64,
    /// Verified requests whose event id had already been verified (at-least-once delivery).
    duplicates: AtomicU64,
    events: Mutex<HashSet<String>>,
    first: OnceLock<Instant>,
    last: Mutex<Option<Instant>>,
}

/// A receiver on `bind` verifying every callback with the credentials' secret.
async fn receiver(secret: &str, bind: SocketAddr) -> (SocketAddr, Arc<Received>) {
    let verifier = Arc::new(CallbackVerifier::new(vec![
        CallbackSecret::parse(secret).expect("the credentials' callback secret parses")
    ]));
    let received = Arc::new(Received::default());
    let listener = tokio::net::TcpListener::bind(bind)
        .await
        .unwrap_or_else(|e| panic!("cannot listen on {bind}: {e}"));
    let addr = listener.local_addr().expect("a bound address");
    let r = Arc::clone(&received);
    let app = axum::Router::new().route(
        "/callback",
        axum::routing::post(move |headers: axum::http::HeaderMap, body: Bytes| {
            let verifier = Arc::clone(&verifier);
            let r = Arc::clone(&r);
            async move {
                let h = |n: &str| {
                    headers
                        .get(n)
                        .and_then(|v| v.to_str().ok())
                        .unwrap_or("")
                        .to_string()
                };
                let now = Timestamp::from_unix_millis(
                    i64::try_from(unix_nanos() / 1_000_000).unwrap_or(i64::MAX),
                );
                match verifier.verify(&h(TIMESTAMP_HEADER), &h(SIGNATURE_HEADER), &body, now) {
                    Ok(()) => {
                        let t = Instant::now();
                        let _ = r.first.set(t);
                        *r.last.lock().expect("a lock") = Some(t);
                        let new = r.events.lock().expect("a lock").insert(h(EVENT_ID_HEADER));
                        if !new {
                            r.duplicates.fetch_add(1, Ordering::Relaxed);
                        }
                        r.verified.fetch_add(1, Ordering::Relaxed);
                        axum::http::StatusCode::OK
                    }
                    Err(_) => {
                        r.rejected.fetch_add(1, Ordering::Relaxed);
                        axum::http::StatusCode::UNAUTHORIZED
                    }
                }
            }
        }),
    );
    tokio::spawn(async move {
        let _ = axum::serve(listener, app).await;
    });
    (addr, received)
}

/// Confirms every payment through the operator API; returns the run, when the first confirm
/// was sent and the wall time in seconds.
async fn confirm_all(
    args: &Args,
    creds: &SandboxCredentials,
    ids: &[String],
) -> (Run, Instant, f64) {
    let operator = socket_addr_of(&creds.operator_url).expect("operator_url is http://IP:PORT");
    let op_authority = payments_benches::authority_of(&creds.operator_url).to_string();
    let reqs: Vec<Ready> = ids
        .iter()
        .map(|id| {
            Request::post(format!("/operator/v1/payments/{id}/confirm"))
                .header("host", op_authority.as_str())
                .header(
                    "authorization",
                    format!("Bearer {}", creds.operator_token.expose()),
                )
                .header("content-type", "application/json")
                .header("content-length", 2)
                .body(Full::new(Bytes::from_static(b"{}")))
                .expect("a valid request")
        })
        .collect();
    let confirm_start = Instant::now();
    let confirmed = drive(operator, reqs, 0, args.connections, None, false).await;
    let secs = confirm_start.elapsed().as_secs_f64();
    (confirmed, confirm_start, secs)
}

/// `payments_outbox_pending` from the operator listener's `/metrics`, if it answers.
async fn outbox_pending(operator_url: &str) -> Option<u64> {
    let mut c = Connection::open(socket_addr_of(operator_url).ok()?)
        .await
        .ok()?;
    let req = Request::get("/metrics")
        .header("host", payments_benches::authority_of(operator_url))
        .body(Full::new(Bytes::new()))
        .ok()?;
    let (status, body) = c.send(req).await.ok()?;
    if !status.is_success() {
        return None;
    }
    std::str::from_utf8(&body)
        .ok()?
        .lines()
        .find_map(|l| l.strip_prefix("payments_outbox_pending "))?
        .trim()
        .parse()
        .ok()
}

/// `--phase all`: create, confirm and receive; deliveries/s from the first confirm.
pub(crate) async fn callbacks(
    args: &Args,
    creds: &SandboxCredentials,
    client: &MerchantClient,
    authority: &str,
    target: SocketAddr,
    run_id: &str,
) {
    let bind = args
        .receiver
        .unwrap_or_else(|| SocketAddr::from(([127, 0, 0, 1], 0)));
    let (addr, received) = receiver(creds.callback_secret.expose(), bind).await;
    let url = format!("http://{addr}/callback");
    let n = args.requests;
    let (created, ids) =
        create_payments(args, client, authority, target, run_id, n, Some(&url)).await;
    println!(
        "created {} payments with callback_url {url} ({:?})",
        ids.len(),
        created.statuses
    );
    let before = received.verified.load(Ordering::Relaxed);
    let expected = before + ids.len() as u64;
    let (confirmed, confirm_start, confirm_secs) = confirm_all(args, creds, &ids).await;
    let deadline = Instant::now() + Duration::from_secs(args.callback_timeout);
    while received.verified.load(Ordering::Relaxed) < expected && Instant::now() < deadline {
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let verified = received.verified.load(Ordering::Relaxed) - before;
    let last = received
        .last
        .lock()
        .expect("a lock")
        .unwrap_or(confirm_start);
    let window = last.saturating_duration_since(confirm_start).as_secs_f64();
    let rate = verified as f64 / window.max(f64::EPSILON);
    println!(
        "confirmed {} in {confirm_secs:.2} s ({:.0}/s, {:?})",
        confirmed.measured,
        confirmed.measured as f64 / confirm_secs,
        confirmed.statuses
    );
    println!(
        "callbacks: {verified} verified ({} rejected) in {window:.2} s from the first confirm = {rate:.0} verified deliveries/s",
        received.rejected.load(Ordering::Relaxed)
    );
    report(
        args,
        "callbacks",
        &confirmed,
        json!({
            "verified": verified,
            "rejected": received.rejected.load(Ordering::Relaxed),
            "delivery_window_s": window,
            "deliveries_per_s": rate,
            "confirm_s": confirm_secs,
        }),
    );
}

/// `--phase queue`: create and confirm with callback URLs to `receiver`, nothing listening.
pub(crate) async fn callbacks_queue(
    args: &Args,
    creds: &SandboxCredentials,
    client: &MerchantClient,
    authority: &str,
    target: SocketAddr,
    run_id: &str,
    receiver: SocketAddr,
) {
    let url = format!("http://{receiver}/callback");
    let pending_before = outbox_pending(&creds.operator_url).await;
    let (created, ids) = create_payments(
        args,
        client,
        authority,
        target,
        run_id,
        args.requests,
        Some(&url),
    )
    .await;
    println!(
        "created {} payments with callback_url {url} ({:?})",
        ids.len(),
        created.statuses
    );
    let (confirmed, _, confirm_secs) = confirm_all(args, creds, &ids).await;
    let confirm_rate = confirmed.measured as f64 / confirm_secs.max(f64::EPSILON);
    let pending = outbox_pending(&creds.operator_url).await;
    println!(
        "confirmed {} in {confirm_secs:.2} s ({confirm_rate:.0}/s, {:?}); outbox pending: {} (before: {})",
        confirmed.measured,
        confirmed.statuses,
        pending.map_or("unknown".into(), |p| p.to_string()),
        pending_before.map_or("unknown".into(), |p| p.to_string()),
    );
    report(
        args,
        "callbacks",
        &confirmed,
        json!({
            "phase": "queue",
            "receiver": receiver.to_string(),
            "created": ids.len(),
            "create_statuses": created.statuses.iter().map(|(k, v)| (k.to_string(), *v)).collect::<BTreeMap<_, _>>(),
            "confirm_s": confirm_secs,
            "confirm_per_s": confirm_rate,
            "outbox_pending_before": pending_before,
            "outbox_pending": pending,
        }),
    );
}

/// `--phase deliver`: listen on `bind` and count verified deliveries of queued events;
/// deliveries/s from the first delivery received to the last, and from the receiver's start.
/// Returns whether all `--requests` arrived in time.
pub(crate) async fn callbacks_deliver(
    args: &Args,
    creds: &SandboxCredentials,
    bind: SocketAddr,
) -> bool {
    let (addr, received) = receiver(creds.callback_secret.expose(), bind).await;
    let started = Instant::now();
    let expected = args.requests as u64;
    println!(
        "receiver listening on http://{addr}/callback: waiting up to {} s for {expected} verified deliveries (start the server with callback dispatch on now)",
        args.callback_timeout
    );
    let deadline = started + Duration::from_secs(args.callback_timeout);
    while received.verified.load(Ordering::Relaxed) < expected && Instant::now() < deadline {
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let verified = received.verified.load(Ordering::Relaxed);
    let rejected = received.rejected.load(Ordering::Relaxed);
    let duplicates = received.duplicates.load(Ordering::Relaxed);
    let complete = verified >= expected;
    let first = received.first.get().copied();
    let last = *received.last.lock().expect("a lock");
    let secs = |from: Option<Instant>, to: Option<Instant>| match (from, to) {
        (Some(f), Some(t)) => Some(t.saturating_duration_since(f).as_secs_f64()),
        _ => None,
    };
    let first_to_last = secs(first, last);
    let start_to_last = secs(Some(started), last);
    let start_to_first = secs(Some(started), first);
    let per_s = |window: Option<f64>| window.map(|w| verified as f64 / w.max(f64::EPSILON));
    let rate = per_s(first_to_last);
    let rate_from_start = per_s(start_to_last);
    // The last attempts are recorded just after their answers.
    let mut pending = None;
    for _ in 0..20 {
        pending = outbox_pending(&creds.operator_url).await;
        if pending.is_none_or(|p| p == 0) {
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let f = |v: Option<f64>, digits: usize| v.map_or("-".into(), |v| format!("{v:.digits$}"));
    if !complete {
        println!(
            "timed out after {} s: {verified} of {expected} verified deliveries",
            args.callback_timeout
        );
    }
    println!(
        "callbacks (deliver): {verified} verified ({rejected} rejected, {duplicates} duplicates) in {} s from the first delivery = {} verified deliveries/s; {} s from the receiver's start = {}/s (first delivery {} s after the start); outbox pending after: {}",
        f(first_to_last, 2),
        f(rate, 0),
        f(start_to_last, 2),
        f(rate_from_start, 0),
        f(start_to_first, 2),
        pending.map_or("unknown".into(), |p| p.to_string()),
    );
    let result = json!({
        "mode": "callbacks",
        "phase": "deliver",
        "label": args.label,
        "receiver": addr.to_string(),
        "expected": expected,
        "complete": complete,
        "verified": verified,
        "rejected": rejected,
        "duplicates": duplicates,
        "first_to_last_s": first_to_last,
        "deliveries_per_s": rate,
        "start_to_first_s": start_to_first,
        "start_to_last_s": start_to_last,
        "deliveries_per_s_from_receiver_start": rate_from_start,
        "outbox_pending_after": pending,
    });
    println!("RESULT {result}");
    complete
}
