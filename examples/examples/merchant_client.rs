//! A merchant's integration, end to end: create a payment (signed), retry safely after a
//! timeout or a dropped connection with the SAME `merchant_payment_id` (fresh nonce and
//! signature each time, exponential backoff with jitter, bounded), act on every error code,
//! show the payer the requisite, then poll politely until the payment closes.
//!
//! ```sh
//! cargo run -p payments-examples --example merchant_client -- --amount 3400 --method card_transfer
//! ```
//!
//! Credentials come from `./data/sandbox-credentials.json` unless `--base-url`, `--token` and
//! `--private-key` are given. A server whose certificate a private CA signed needs
//! `--ca-file <pem>`.

use std::process::ExitCode;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use clap::Parser;
use payments_client::MerchantClient;
use payments_examples::advice::{describe, jitter, retry_after};
use payments_examples::cli::{ApiArgs, ApiArgsError};
use payments_examples::create::{create_with_retries, CreateError, RetryPolicy};
use payments_examples::display::{exact, payer_instructions, settlement};
use reqwest::StatusCode;
use serde_json::json;

/// The least client timeout for a create: requisites are picked during the request, which
/// usually takes up to 15 s.
const MIN_TIMEOUT: Duration = Duration::from_secs(15);

/// Creates one payment and follows it to its end.
#[derive(Debug, Parser)]
struct Args {
    #[command(flatten)]
    api: ApiArgs,
    /// The order id; also the idempotency key (default: order-<unix ms>).
    #[arg(long)]
    merchant_payment_id: Option<String>,
    /// The amount in major units, as a decimal string.
    #[arg(long, default_value = "3400")]
    amount: String,
    /// `sbp` or `card_transfer`.
    #[arg(long, default_value = "sbp")]
    method: String,
    /// The payer's bank, a name from GET /api/v1/banks.
    #[arg(long)]
    bank_code: Option<String>,
    /// Where this payment's callbacks go (https, public host).
    #[arg(long)]
    callback_url: Option<String>,
    /// The HTTP client's timeout per request, seconds (at least 15).
    #[arg(long, default_value_t = 30)]
    timeout_secs: u64,
    /// How many times to send the create at most (first try included).
    #[arg(long, default_value_t = 6)]
    max_attempts: u32,
    /// Stop polling after this many minutes (the default lifetime is 15).
    #[arg(long, default_value_t = 20)]
    poll_minutes: u64,
}

#[tokio::main]
async fn main() -> ExitCode {
    let args = Args::parse();
    match run(&args).await {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("merchant_client: {e}");
            ExitCode::FAILURE
        }
    }
}

/// Why the payment did not reach an end the client can act on.
#[derive(Debug, thiserror::Error)]
enum RunError {
    #[error(transparent)]
    Api(#[from] ApiArgsError),
    #[error(transparent)]
    Create(#[from] CreateError),
    #[error("no requisites ({code}: {comment}); offer the payer another attempt under a NEW merchant_payment_id")]
    NoRequisites { code: String, comment: String },
    #[error("poll: {0}")]
    Poll(String),
    #[error(
        "still {status} after {minutes} min; reconcile it later with GET /api/v1/payments/{id}"
    )]
    StillOpen {
        status: String,
        minutes: u64,
        id: String,
    },
}

async fn run(args: &Args) -> Result<(), RunError> {
    let timeout = Duration::from_secs(args.timeout_secs).max(MIN_TIMEOUT);
    let http = args.api.http_client(
        reqwest::Client::builder()
            .timeout(timeout)
            .connect_timeout(Duration::from_secs(5)),
    )?;
    let client = args.api.client()?.with_http_client(http);

    let merchant_payment_id = args.merchant_payment_id.clone().unwrap_or_else(|| {
        let ms = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map_or(0, |d| d.as_millis());
        format!("order-{ms}")
    });
    let mut body = json!({
        "merchant_payment_id": merchant_payment_id,
        "amount": args.amount,
        "payment_method": args.method,
    });
    if let Some(bank) = &args.bank_code {
        body["bank_code"] = json!(bank);
    }
    if let Some(url) = &args.callback_url {
        body["callback_url"] = json!(url);
    }

    let policy = RetryPolicy {
        max_attempts: args.max_attempts,
        ..RetryPolicy::default()
    };
    let payment = create_with_retries(&client, &body, &policy, |line| println!("{line}")).await?;
    let id = exact(&payment["id"]);
    println!(
        "payment {id} for order {merchant_payment_id}: {}",
        exact(&payment["status"])
    );
    if payment["status"] == "error" {
        // Saved without requisites; no callback follows, and the id is taken.
        return Err(RunError::NoRequisites {
            code: exact(&payment["error_code"]),
            comment: exact(&payment["error_comment"]),
        });
    }
    match payer_instructions(&payment) {
        Some(text) => println!("\n{text}\n"),
        None => println!("(nothing to show the payer yet)"),
    }
    poll(&client, &id, Duration::from_secs(args.poll_minutes * 60)).await
}

/// Reads the payment every 5-10 s (with jitter; the project shares one rate limit) until it
/// closes or `limit` passes. Callbacks tell the same sooner; polling is the fallback.
async fn poll(client: &MerchantClient, id: &str, limit: Duration) -> Result<(), RunError> {
    println!(
        "waiting for payment {id} to close (the payer pays; in the sandbox: POST \
         /api/v1/test/payments/{id}/complete of a test payment, or the cabinet's Paid button): \
         reading it every 5-10 s for up to {} min",
        limit.as_secs() / 60
    );
    let started = Instant::now();
    let mut last_status = String::new();
    while started.elapsed() < limit {
        let mut wait = Duration::from_secs(5) + jitter(Duration::from_secs(5));
        match client.get_payment(id).await {
            Ok(resp) if resp.status == StatusCode::OK => {
                let status = exact(&resp.json["status"]);
                if status != last_status {
                    println!("status: {status}");
                    last_status.clone_from(&status);
                }
                match status.as_str() {
                    "completed" => {
                        println!(
                            "paid: {} {} (fulfil the order by this amount)",
                            exact(&resp.json["amount"]),
                            exact(&resp.json["currency"])
                        );
                        if let Some(s) = settlement(&resp.json) {
                            println!("settlement: {s}");
                        }
                        return Ok(());
                    }
                    "canceled" | "error" => {
                        println!(
                            "closed without payment; a new attempt needs a new merchant_payment_id"
                        );
                        return Ok(());
                    }
                    // processing, created, appeal: keep waiting.
                    _ => {}
                }
            }
            Ok(resp)
                if resp.status == StatusCode::TOO_MANY_REQUESTS
                    || resp.status.is_server_error() =>
            {
                if let Some(after) = retry_after(&resp) {
                    wait = wait.max(after);
                }
                println!("poll: {}; waiting {wait:.1?}", describe(&resp));
            }
            Ok(resp) => return Err(RunError::Poll(describe(&resp))),
            Err(e) => println!("poll: {e}; trying again"),
        }
        tokio::time::sleep(wait).await;
    }
    Err(RunError::StillOpen {
        status: last_status,
        minutes: limit.as_secs() / 60,
        id: id.to_owned(),
    })
}
