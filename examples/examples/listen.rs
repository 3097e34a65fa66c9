//! Callbacks to a laptop: follows the project's callback events and forwards each new one to
//! a local receiver, signed with a secret of your own, printing each delivery and its answer.
//!
//! ```sh
//! cargo run -p payments-examples --example callback_receiver -- --secret whsec_local_secret_at_least_32_characters &
//! cargo run -p payments-examples --example listen -- \
//!     --forward-to http://127.0.0.1:9090/callbacks --secret whsec_local_secret_at_least_32_characters
//! ```
//!
//! The token needs the scope `events:read`. Credentials come from
//! `./data/sandbox-credentials.json` unless `--base-url`, `--token` and `--private-key` are
//! given. Events that exist for the project are forwarded whatever became of their own
//! delivery: a test payment's callback (sent with "Send callback" on the payment card or
//! `POST /api/v1/payments/{id}/resend_callback`) reaches the laptop although the sandbox never
//! sends to a private address.

use std::process::ExitCode;
use std::time::Duration;

use clap::Parser;
use payments_core::callback::signing::CallbackSecret;
use payments_core::Timestamp;
use payments_examples::cli::ApiArgs;
use payments_examples::listen::{now, ListenConfig, Listener};

/// Forwards the project's callback events to a local receiver.
#[derive(Debug, Parser)]
struct Args {
    #[command(flatten)]
    api: ApiArgs,
    /// The local receiver's URL.
    #[arg(long)]
    forward_to: String,
    /// The secret the forwarded callbacks are signed with (`whsec_` and at least 32
    /// characters); the local receiver verifies with it.
    #[arg(long, env = "PAYMENTS_LISTEN_SECRET", hide_env_values = true)]
    secret: String,
    /// Also forward the events queued since this RFC 3339 time (default: from now on).
    #[arg(long)]
    since: Option<String>,
}

#[tokio::main]
async fn main() -> ExitCode {
    let args = Args::parse();
    let secret = match CallbackSecret::parse(&args.secret) {
        Ok(s) => s,
        Err(e) => {
            eprintln!("listen: --secret: {e}");
            return ExitCode::FAILURE;
        }
    };
    let since = match args.since.as_deref().map(Timestamp::parse_rfc3339) {
        None => now(),
        Some(Some(t)) => t,
        Some(None) => {
            eprintln!("listen: --since: expected an RFC 3339 time such as 2026-10-01T12:00:00Z");
            return ExitCode::FAILURE;
        }
    };
    let client = match args.api.http_client(
        // Longer than the server's long poll.
        reqwest::Client::builder().timeout(Duration::from_secs(40)),
    ) {
        Ok(http) => match args.api.client() {
            Ok(c) => c.with_http_client(http),
            Err(e) => {
                eprintln!("listen: {e}");
                return ExitCode::FAILURE;
            }
        },
        Err(e) => {
            eprintln!("listen: {e}");
            return ExitCode::FAILURE;
        }
    };
    let config = ListenConfig {
        forward_to: args.forward_to.clone(),
        secret,
        since,
        forward_timeout: Duration::from_secs(10),
    };
    let mut listener = match Listener::new(client, config) {
        Ok(l) => l,
        Err(e) => {
            eprintln!("listen: {e}");
            return ExitCode::FAILURE;
        }
    };
    println!(
        "listening for events since {}; forwarding to {} (Ctrl-C stops)",
        since.to_rfc3339(),
        args.forward_to
    );
    listener
        .run(|line| println!("{line}"), async {
            let _ = tokio::signal::ctrl_c().await;
        })
        .await;
    ExitCode::SUCCESS
}
