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
//! verified deliveries per second; the server needs `PAYMENTS_CALLBACKS__ALLOW_LOCAL=1`).
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

mod callbacks;
mod drive;

use std::net::SocketAddr;
use std::path::PathBuf;
use std::time::{Instant, SystemTime, UNIX_EPOCH};

use clap::{CommandFactory, Parser, ValueEnum};
use hyper::Method;
use payments_benches::socket_addr_of;
use payments_client::{MerchantClient, SandboxCredentials};
use serde_json::json;

use crate::callbacks::{callbacks, callbacks_deliver, callbacks_queue};
use crate::drive::{create_body, create_payments, drive, presign, report};

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
    /// Unsigned `GET /healthz`: the HTTP floor (hyper, axum's router, no store, no crypto).
    Healthz,
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

fn unix_nanos() -> u128 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_nanos())
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
        Mode::Healthz => {
            let reqs = presign(&client, &authority, total, args.sign_threads, |_| {
                (Method::GET, "/healthz".into(), Vec::new(), false)
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
            report(&args, "healthz", &run, json!({}));
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
