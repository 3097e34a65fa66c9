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

use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, OnceLock};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use bytes::Bytes;
use clap::{Parser, ValueEnum};
use hdrhistogram::Histogram;
use http_body_util::Full;
use hyper::header::{HeaderName, HeaderValue};
use hyper::{Method, Request};
use payments_benches::{histogram, record, socket_addr_of, Connection, Latency, StatusCounts};
use payments_core::callback::{
    CallbackSecret, CallbackVerifier, SIGNATURE_HEADER, TIMESTAMP_HEADER,
};
use payments_core::Timestamp;
use payments_http::bootstrap::SandboxCredentials;
use payments_http::client::{MerchantClient, SignSpec};
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
    first: OnceLock<Instant>,
    last: Mutex<Option<Instant>>,
}

async fn receiver(secret: &str) -> (SocketAddr, Arc<Received>) {
    let verifier = Arc::new(CallbackVerifier::new(vec![
        CallbackSecret::parse(secret).expect("the credentials' callback secret parses")
    ]));
    let received = Arc::new(Received::default());
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
        .await
        .expect("a local port");
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

async fn callbacks(
    args: &Args,
    creds: &SandboxCredentials,
    client: &MerchantClient,
    authority: &str,
    target: SocketAddr,
    run_id: &str,
) {
    let (addr, received) = receiver(&creds.callback_secret).await;
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

    // Confirm every payment through the operator API.
    let operator = socket_addr_of(&creds.operator_url).expect("operator_url is http://IP:PORT");
    let op_authority = payments_benches::authority_of(&creds.operator_url).to_string();
    let reqs: Vec<Ready> = ids
        .iter()
        .map(|id| {
            Request::post(format!("/operator/v1/payments/{id}/confirm"))
                .header("host", op_authority.as_str())
                .header("authorization", format!("Bearer {}", creds.operator_token))
                .header("content-type", "application/json")
                .header("content-length", 2)
                .body(Full::new(Bytes::from_static(b"{}")))
                .expect("a valid request")
        })
        .collect();
    let expected = before + reqs.len() as u64;
    let confirm_start = Instant::now();
    let confirmed = drive(operator, reqs, 0, args.connections, None, false).await;
    let confirm_secs = confirm_start.elapsed().as_secs_f64();
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

#[tokio::main]
async fn main() {
    let args = Args::parse();
    let creds: SandboxCredentials = serde_json::from_slice(
        &std::fs::read(&args.credentials).expect("the credentials file is readable"),
    )
    .expect("the credentials file is sandbox-credentials.json");
    let base_url = args.url.clone().unwrap_or_else(|| creds.base_url.clone());
    let client = MerchantClient::new(&base_url, &creds.token, &creds.private_key_pem)
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
        Mode::Callbacks => callbacks(&args, &creds, &client, &authority, target, &run_id).await,
    }
}
