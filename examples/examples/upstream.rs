//! An example upstream for `provider = "http"`, `rate_source = "http"` and provider
//! notifications (docs/providers.md): issues requisites idempotently by payment id, serves
//! rates, and reports transfers to the server (see `payments_examples::upstream`).
//!
//! ```sh
//! cargo run -p payments-examples --example upstream -- --listen 127.0.0.1:9300 \
//!     --notify-url http://127.0.0.1:8083/upstream/v1/notifications
//! # then, with the settings it prints, in production:
//! payments-server serve --environment production --config payments.toml
//! # the bank saw the transfer of a payment:
//! curl -X POST http://127.0.0.1:9300/demo/transfers/<payment_id>/confirm
//! ```
//!
//! The shared secret: `--secret` or `UPSTREAM_SECRET` (`whsec_...`, the same value as the
//! server's `upstream_secrets`).

use std::net::SocketAddr;
use std::process::ExitCode;

use clap::Parser;
use payments_core::callback::CallbackSecret;
use payments_core::SecretString;
use payments_examples::upstream::{server_settings, ExampleUpstream};

/// Plays the payment company's upstream.
#[derive(Debug, Parser)]
struct Args {
    /// The address to listen on.
    #[arg(long, default_value = "127.0.0.1:9300")]
    listen: SocketAddr,
    /// The secret shared with the server (`whsec_...`).
    #[arg(long, env = "UPSTREAM_SECRET", hide_env_values = true)]
    secret: SecretString,
    /// The server's notification URL (its `upstream.listen`; 8083 here, beside the merchant
    /// API on 8080, the operator API on 8081 and the cabinet on 8082).
    #[arg(
        long,
        default_value = "http://127.0.0.1:8083/upstream/v1/notifications"
    )]
    notify_url: String,
}

#[tokio::main]
async fn main() -> ExitCode {
    payments_examples::init_logging();
    let args = Args::parse();
    let secret = match CallbackSecret::parse(args.secret.expose()) {
        Ok(s) => s,
        Err(e) => {
            eprintln!("upstream: --secret: {e}");
            return ExitCode::FAILURE;
        }
    };
    let upstream = ExampleUpstream::new(secret);
    upstream.set_notify_url(&args.notify_url);
    let listener = match tokio::net::TcpListener::bind(args.listen).await {
        Ok(l) => l,
        Err(e) => {
            eprintln!("upstream: cannot listen on {}: {e}", args.listen);
            return ExitCode::FAILURE;
        }
    };
    let notify_listen = args
        .notify_url
        .split('/')
        .nth(2)
        .unwrap_or("127.0.0.1:8083")
        .to_string();
    println!(
        "example upstream on http://{}; payments-server settings:\n\n{}",
        args.listen,
        server_settings(
            &format!("http://{}", args.listen),
            "<the same secret>",
            &notify_listen
        )
    );
    match upstream.serve(listener).await {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("upstream: {e}");
            ExitCode::FAILURE
        }
    }
}
