//! `loadgen`: the end-to-end load generator.
//!
//! It reads a sandbox credentials file, pre-signs every request of the run before the clock
//! starts (unique `merchant_payment_id` and nonce each; signatures live 300 s, so each run
//! signs its own), and drives them over keep-alive HTTP/1.1 connections, one per worker:
//! closed loop (`--connections` workers back to back) or open loop (`--rate` per second,
//! latency measured from each request's scheduled send time, so a slow server cannot hide its
//! queueing: no coordinated omission). It prints throughput, latency percentiles and counts by
//! status, then one machine-readable line starting with `RESULT `.
//!
//! Modes: `create` (POST /api/v1/payments), `verify` (the same requests to the verify-only
//! reference server given by `--url`), `get` (GET /api/v1/payments/{id} of payments created
//! first) and `callbacks` (a local receiver verifying every callback; creates payments with
//! the receiver as their callback URL, confirms them through the operator API and counts
//! verified deliveries per second; the server needs `PAYMENTS_ALLOW_LOCAL_CALLBACKS=1`).
//!
//! `callbacks` has three phases (`--phase`):
//!
//! - `all` (default): create, confirm and receive in one run. Deliveries per second are counted
//!   from the first confirm to the last verified delivery, so they cannot exceed the confirm
//!   rate.
//! - `queue`: create and confirm `--requests` payments whose callback URL is
//!   `http://<--receiver>/callback`, with nothing listening there; prints the confirm rate
//!   and the server's `payments_outbox_pending`. Run the server with callback dispatch off
//!   (`--callback-dispatch off`), so the events wait in its outbox.
//! - `deliver`: listen on `--receiver` and wait for `--requests` verified deliveries (up to
//!   `--callback-timeout` seconds from the receiver's start). Stop the queue phase's server,
//!   start this phase, then start the server again over the same data dir with dispatch on
//!   (in that order: a delivery attempted before the receiver listens fails and waits for its
//!   retry). Reports verified deliveries per second from the first delivery received to the
//!   last (delivery alone), and also from the receiver's start (which includes the server's
//!   start). Exits non-zero if not all arrived in time.

use std::collections::{BTreeMap, HashSet};
use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, OnceLock};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use bytes::Bytes;
use clap::{CommandFactory, Parser, ValueEnum};
use hdrhistogram::Histogram;
use http_body_util::Full;
use hyper::header::{HeaderName, HeaderValue};
use hyper::{Method, Request};
use payments_benches::{histogram, record, socket_addr_of, Connection, Latency, StatusCounts};
use payments_client::{MerchantClient, SandboxCredentials, SignSpec};
use payments_core::callback::{
    CallbackSecret, CallbackVerifier, EVENT_ID_HEADER, SIGNATURE_HEADER, TIMESTAMP_HEADER,
};
use payments_core::Timestamp;
use serde_json::json;

#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
enum Mode {
    /// Signed creates against the server.
    Create,
    /// The same signed creates against the verify-only reference (`--url`).
    Verify,
    /// GET of existing payments.
    Get,
    /// Verified callback deliveries per second to a local receiver.
    Callbacks,
}

/// The part of a `callbacks` run to do.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
enum Phase {
    /// Create, confirm and receive in one run (deliveries/s from the first confirm).
    All,
    /// Create and confirm only, with no receiver: the events wait in the server's outbox
    /// (run the server with callback dispatch off).
    Queue,
    /// Receive only, on `--receiver`: the queued events, once a server with dispatch on runs.
    Deliver,
}

#[derive(Debug, Parser)]
#[command(name = "loadgen", about = "Load generator for payments-server")]
struct Args {
    /// The sandbox credentials file (`<data-dir>/sandbox-credentials.json`).
    #[arg(long)]
    credentials: PathBuf,
    /// Target base URL (default: the credentials' base_url). Requests are signed for it.
    #[arg(long)]
    url: Option<String>,
    #[arg(long, value_enum, default_value = "create")]
    mode: Mode,
    /// Connections (= workers), one request in flight on each.
    #[arg(long, default_value_t = 64)]
    connections: usize,
    /// Requests measured.
    #[arg(long, default_value_t = 20_000)]
    requests: usize,
    /// Requests sent first and not measured (warm-up).
    #[arg(long, default_value_t = 2_000)]
    warmup: usize,
    /// Open loop: requests per second (default: closed loop).
    #[arg(long)]
    rate: Option<f64>,
    /// Threads that pre-sign the requests.
    #[arg(long, default_value_t = 2)]
    sign_threads: usize,
    /// `get`: payments created first and then read round robin.
    #[arg(long, default_value_t = 1_000)]
    get_ids: usize,
    /// `get`: sign GET requests too (each with its own nonce), as if the project required it.
    #[arg(long)]
    sign_get: bool,
    /// `callbacks`: give up waiting for deliveries after this many seconds.
    #[arg(long, default_value_t = 120)]
    callback_timeout: u64,
    /// `callbacks`: all (create, confirm, receive), queue (create and confirm only; the
    /// server runs with --callback-dispatch off) or deliver (receive only; start it before the
    /// server that runs with dispatch on).
    #[arg(long, value_enum, default_value = "all")]
    phase: Phase,
    /// `callbacks`: the receiver's listen address, e.g. 127.0.0.1:28099 (`all`: default
    /// 127.0.0.1:0). `queue` puts it in the callback URLs without listening; `deliver` listens
    /// on it. Required by both.
    #[arg(long, required_if_eq_any([("phase", "queue"), ("phase", "deliver")]))]
    receiver: Option<SocketAddr>,
    /// A label copied into the RESULT line.
    #[arg(long, default_value = "")]
    label: String,
}

/// A request ready to send; built (and signed) before the run starts.
type Ready = Request<Full<Bytes>>;

/// The outcome of one phase of load.
#[derive(Debug)]
struct Run {
    measured: u64,
    elapsed: Duration,
    latency: Histogram<u64>,
    /// Open loop: how late each request left against its schedule.
    lag: Histogram<u64>,
    statuses: StatusCounts,
    /// `id` of each 2xx response body, when asked for.
    ids: Vec<String>,
}

fn unix_nanos() -> u128 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_nanos())
}

/// Signs `count` requests from `make(i)` on `threads` threads, in order.
fn presign(
    client: &MerchantClient,
    authority: &str,
    count: usize,
    threads: usize,
    make: impl Fn(usize) -> (Method, String, Vec<u8>, bool) + Sync,
) -> Vec<Ready> {
    let threads = threads.max(1);
    let chunk = count.div_ceil(threads).max(1);
    let make = &make;
    let mut out: Vec<Vec<Ready>> = Vec::new();
    std::thread::scope(|s| {
        let handles: Vec<_> = (0..threads)
            .map(|t| {
                let client = client.clone();
                s.spawn(move || {
                    let range = (t * chunk)..((t + 1) * chunk).min(count);
                    range
                        .map(|i| {
                            let (method, path, body, sign) = make(i);
                            let spec = SignSpec::default();
                            let p = client
                                .prepare(method, &path, &body, sign.then_some(&spec))
                                .expect("the request signs");
                            let mut req = Request::builder()
                                .method(p.method.as_str())
                                .uri(p.path_and_query.as_str())
                                .header("host", authority);
                            for (n, v) in &p.headers {
                                req = req.header(
                                    HeaderName::from_bytes(n.as_bytes()).expect("a header name"),
                                    HeaderValue::from_str(v).expect("a header value"),
                                );
                            }
                            if !p.body.is_empty() {
                                req = req.header("content-length", p.body.len());
                            }
                            req.body(Full::new(Bytes::from(p.body)))
                                .expect("a valid request")
                        })
                        .collect::<Vec<_>>()
                })
            })
            .collect();
        for h in handles {
            out.push(h.join().expect("a signing thread"));
        }
    });
    out.into_iter().flatten().collect()
}

/// Drives `reqs` (the first `warmup` of them unmeasured) at `target` over `connections`
/// connections, closed loop or at `rate` per second.
async fn drive(
    target: SocketAddr,
    reqs: Vec<Ready>,
    warmup: usize,
    connections: usize,
    rate: Option<f64>,
    keep_ids: bool,
) -> Run {
    let total = reqs.len();
    let slots: Arc<Vec<Mutex<Option<Ready>>>> =
        Arc::new(reqs.into_iter().map(|r| Mutex::new(Some(r))).collect());
    let next = Arc::new(AtomicUsize::new(0));
    let measure_from: Arc<OnceLock<Instant>> = Arc::new(OnceLock::new());
    let last_done = Arc::new(Mutex::new(None::<Instant>));
    let start = Instant::now();
    // Open loop: the measured requests are scheduled from the moment warm-up is over.
    let period = rate.map(|r| Duration::from_secs_f64(1.0 / r));

    let mut workers = Vec::with_capacity(connections);
    for _ in 0..connections {
        let slots = Arc::clone(&slots);
        let next = Arc::clone(&next);
        let measure_from = Arc::clone(&measure_from);
        let last_done = Arc::clone(&last_done);
        workers.push(tokio::spawn(async move {
            let mut latency = histogram();
            let mut lag = histogram();
            let mut statuses = StatusCounts::new();
            let mut ids = Vec::new();
            let mut conn = Connection::open(target).await.ok();
            loop {
                let i = next.fetch_add(1, Ordering::Relaxed);
                if i >= total {
                    break;
                }
                let req = slots[i]
                    .lock()
                    .expect("a slot lock")
                    .take()
                    .expect("each request is sent once");
                let measured = i >= warmup;
                let scheduled = match period {
                    Some(p) => {
                        let at = start + p.mul_f64(i as f64);
                        tokio::time::sleep_until(at.into()).await;
                        at
                    }
                    None => Instant::now(),
                };
                if measured && i == warmup {
                    let _ = measure_from.set(scheduled);
                }
                let sent = Instant::now();
                let c = match conn.as_mut() {
                    Some(c) => c,
                    None => match Connection::open(target).await {
                        Ok(c) => conn.insert(c),
                        Err(_) => {
                            *statuses.entry(0).or_default() += u64::from(measured);
                            continue;
                        }
                    },
                };
                let outcome = c.send(req).await;
                let done = Instant::now();
                match outcome {
                    Ok((status, body)) => {
                        if measured {
                            *statuses.entry(status.as_u16()).or_default() += 1;
                            record(&mut latency, done - scheduled);
                            record(&mut lag, sent - scheduled);
                        }
                        if keep_ids && status.is_success() {
                            if let Some(id) = serde_json::from_slice::<serde_json::Value>(&body)
                                .ok()
                                .and_then(|v| v.get("id")?.as_str().map(String::from))
                            {
                                ids.push(id);
                            }
                        }
                    }
                    Err(_) => {
                        conn = None;
                        if measured {
                            *statuses.entry(0).or_default() += 1;
                        }
                    }
                }
                if measured {
                    let mut l = last_done.lock().expect("a lock");
                    if l.is_none_or(|t| t < done) {
                        *l = Some(done);
                    }
                }
            }
            (latency, lag, statuses, ids)
        }));
    }
    let mut latency = histogram();
    let mut lag = histogram();
    let mut statuses = StatusCounts::new();
    let mut ids = Vec::new();
    for w in workers {
        let (l, g, s, i) = w.await.expect("a worker");
        latency.add(&l).expect("same bounds");
        lag.add(&g).expect("same bounds");
        for (k, v) in s {
            *statuses.entry(k).or_default() += v;
        }
        ids.extend(i);
    }
    let from = measure_from.get().copied().unwrap_or(start);
    let to = last_done
        .lock()
        .expect("a lock")
        .unwrap_or_else(Instant::now);
    Run {
        measured: statuses.values().sum(),
        elapsed: to.saturating_duration_since(from),
        latency,
        lag,
        statuses,
        ids,
    }
}

fn report(args: &Args, name: &str, run: &Run, extra: serde_json::Value) {
    let secs = run.elapsed.as_secs_f64();
    let ok: u64 = run
        .statuses
        .iter()
        .filter(|(s, _)| (200..300).contains(*s))
        .map(|(_, n)| n)
        .sum();
    let throughput = run.measured as f64 / secs.max(f64::EPSILON);
    let ok_throughput = ok as f64 / secs.max(f64::EPSILON);
    let latency = Latency::of(&run.latency);
    let lag = Latency::of(&run.lag);
    println!(
        "{name}: {} requests in {secs:.2} s = {throughput:.0}/s ({ok_throughput:.0}/s 2xx), {} connections{}",
        run.measured,
        args.connections,
        args.rate
            .map(|r| format!(", open loop at {r}/s"))
            .unwrap_or_else(|| ", closed loop".into())
    );
    println!("  latency: {latency}");
    if args.rate.is_some() {
        println!("  send lag behind schedule: {lag}");
    }
    println!("  statuses (0 = transport error): {:?}", run.statuses);
    let mut result = json!({
        "mode": name,
        "label": args.label,
        "connections": args.connections,
        "rate": args.rate,
        "requests": run.measured,
        "ok": ok,
        "elapsed_s": secs,
        "throughput": throughput,
        "ok_throughput": ok_throughput,
        "latency": latency,
        "send_lag": args.rate.map(|_| lag),
        "statuses": run.statuses.iter().map(|(k, v)| (k.to_string(), *v)).collect::<BTreeMap<_, _>>(),
    });
    if let (Some(r), Some(e)) = (result.as_object_mut(), extra.as_object()) {
        r.extend(e.clone());
    }
    println!("RESULT {result}");
}

fn create_body(run_id: &str, i: usize, callback_url: Option<&str>) -> Vec<u8> {
    let mut body = json!({
        "merchant_payment_id": format!("lg-{run_id}-{i}"),
        "amount": "3400.00",
        "payment_method": "sbp",
    });
    if let Some(url) = callback_url {
        body["callback_url"] = json!(url);
    }
    serde_json::to_vec(&body).expect("JSON serialises")
}

/// Creates `count` payments at full speed and returns their ids.
async fn create_payments(
    args: &Args,
    client: &MerchantClient,
    authority: &str,
    target: SocketAddr,
    run_id: &str,
    count: usize,
    callback_url: Option<&str>,
) -> (Run, Vec<String>) {
    let reqs = presign(client, authority, count, args.sign_threads, |i| {
        (
            Method::POST,
            "/api/v1/payments".into(),
            create_body(run_id, i, callback_url),
            true,
        )
    });
    let mut run = drive(target, reqs, 0, args.connections, None, true).await;
    let ids = std::mem::take(&mut run.ids);
    (run, ids)
}

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
async fn callbacks(
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
async fn callbacks_queue(
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
async fn callbacks_deliver(args: &Args, creds: &SandboxCredentials, bind: SocketAddr) -> bool {
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

#[tokio::main]
async fn main() {
    let args = Args::parse();
    if args.phase != Phase::All && args.mode != Mode::Callbacks {
        Args::command()
            .error(
                clap::error::ErrorKind::ArgumentConflict,
                "--phase queue|deliver needs --mode callbacks",
            )
            .exit();
    }
    let creds = SandboxCredentials::from_file(&args.credentials)
        .unwrap_or_else(|e| panic!("the credentials file: {e}"));
    let base_url = args.url.clone().unwrap_or_else(|| creds.base_url.clone());
    let client = MerchantClient::new(
        &base_url,
        creds.token.expose(),
        creds.private_key_pem.expose(),
    )
    .expect("the credentials' key parses");
    let authority = payments_benches::authority_of(&base_url).to_string();
    let target = socket_addr_of(&base_url).expect("the target is http://IP:PORT");
    let run_id = format!("{:x}", unix_nanos());
    let total = args.warmup + args.requests;

    match args.mode {
        Mode::Create | Mode::Verify => {
            let t = Instant::now();
            let reqs = presign(&client, &authority, total, args.sign_threads, |i| {
                (
                    Method::POST,
                    "/api/v1/payments".into(),
                    create_body(&run_id, i, None),
                    true,
                )
            });
            eprintln!("pre-signed {total} requests in {:.2?}", t.elapsed());
            let run = drive(
                target,
                reqs,
                args.warmup,
                args.connections,
                args.rate,
                false,
            )
            .await;
            let name = if args.mode == Mode::Create {
                "create"
            } else {
                "verify"
            };
            report(&args, name, &run, json!({}));
        }
        Mode::Get => {
            let (_, ids) = create_payments(
                &args,
                &client,
                &authority,
                target,
                &run_id,
                args.get_ids,
                None,
            )
            .await;
            assert!(!ids.is_empty(), "no payment was created to read");
            let reqs = presign(&client, &authority, total, args.sign_threads, |i| {
                (
                    Method::GET,
                    format!("/api/v1/payments/{}", ids[i % ids.len()]),
                    Vec::new(),
                    args.sign_get,
                )
            });
            let run = drive(
                target,
                reqs,
                args.warmup,
                args.connections,
                args.rate,
                false,
            )
            .await;
            report(&args, "get", &run, json!({ "signed": args.sign_get }));
        }
        Mode::Callbacks => match (args.phase, args.receiver) {
            (Phase::Queue, Some(receiver)) => {
                callbacks_queue(
                    &args, &creds, &client, &authority, target, &run_id, receiver,
                )
                .await
            }
            (Phase::Deliver, Some(receiver)) => {
                if !callbacks_deliver(&args, &creds, receiver).await {
                    std::process::exit(1);
                }
            }
            _ => callbacks(&args, &creds, &client, &authority, target, &run_id).await,
        },
    }
}
