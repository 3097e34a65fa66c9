//! Pre-signing requests, driving them over keep-alive connections (closed or open loop),
//! and the report; creating payments at full speed.

use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, OnceLock};
use std::time::{Duration, Instant};

use bytes::Bytes;
use hdrhistogram::Histogram;
use http_body_util::Full;
use hyper::header::{HeaderName, HeaderValue};
use hyper::{Method, Request};
use payments_benches::{histogram, record, Connection, Latency, StatusCounts};
use payments_client::{MerchantClient, SignSpec};
use serde_json::json;

use crate::Args;

/// A request ready to send; built (and signed) before the run starts.
pub(crate) type Ready = Request<Full<Bytes>>;

/// The outcome of one phase of load.
#[derive(Debug)]
pub(crate) struct Run {
    pub(crate) measured: u64,
    elapsed: Duration,
    latency: Histogram<u64>,
    /// Open loop: how late each request left against its schedule.
    lag: Histogram<u64>,
    pub(crate) statuses: StatusCounts,
    /// `id` of each 2xx response body, when asked for.
    ids: Vec<String>,
}

/// Signs `count` requests from `make(i)` on `threads` threads, in order.
pub(crate) fn presign(
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
pub(crate) async fn drive(
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

pub(crate) fn report(args: &Args, name: &str, run: &Run, extra: serde_json::Value) {
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

pub(crate) fn create_body(run_id: &str, i: usize, callback_url: Option<&str>) -> Vec<u8> {
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
pub(crate) async fn create_payments(
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
