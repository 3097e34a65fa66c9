//! An example upstream for `provider = "http"`, `rate_source = "http"` and provider
//! notifications (docs/providers.md): issues requisites idempotently by payment id, serves
//! rates, reports transfers to the server, and takes and answers appeals (see
//! `payments_examples::upstream`).
//!
//! ```sh
//! cargo run -p payments-examples --example upstream -- --listen 127.0.0.1:9300 \
//!     --notify-url http://127.0.0.1:8083/upstream/v1/notifications
//! # then, with the settings it prints, in production:
//! payments-server serve --environment production --config payments.toml
//! # the bank saw the transfer of a payment:
//! curl -X POST http://127.0.0.1:9300/demo/transfers/<payment_id>/confirm
//! # the bank found the transfer an appeal (sent to /appeals) is about:
//! curl -X POST http://127.0.0.1:9300/demo/appeals/<appeal_id>/found
//! ```
//!
//! The shared secret: `--secret` or `UPSTREAM_SECRET` (`whsec_...`, the same value as the
//! server's `upstream.secrets`).
//!
//! Routing on a laptop: `--provider bank-a=not_routable --provider bank-b` plays two
//! providers, the first refusing every payment, and prints `[[upstream.providers]]` for both:
//! every payment fails over to `bank-b` (its route in `GET /operator/v1/payments/{id}`).

use std::net::SocketAddr;
use std::process::ExitCode;

use clap::Parser;
use payments_core::callback::CallbackSecret;
use payments_core::SecretString;
use payments_examples::upstream::{providers_settings, server_settings, ExampleUpstream, Mode};

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
    /// Play a named provider too (repeatable): `NAME` or `NAME=MODE`, MODE one of `issue`
    /// (the default), `no_requisites`, `not_routable`, `slow` (answers after a minute). The
    /// settings printed then list them as `[[upstream.providers]]`, in the order given.
    #[arg(long = "provider", value_name = "NAME[=MODE]")]
    providers: Vec<String>,
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
    let mut names = Vec::new();
    for p in &args.providers {
        let (name, mode) = p.split_once('=').unwrap_or((p, "issue"));
        match mode.parse::<Mode>() {
            Ok(mode) => upstream.play(name, mode),
            Err(e) => {
                eprintln!("upstream: --provider {p}: {e}");
                return ExitCode::FAILURE;
            }
        }
        names.push(name);
    }
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
    // The address bound (a port of 0 chose one).
    let base = format!("http://{}", listener.local_addr().unwrap_or(args.listen));
    let settings = if names.is_empty() {
        server_settings(&base, "<the same secret>", &notify_listen)
    } else {
        providers_settings(&base, "<the same secret>", &notify_listen, &names)
    };
    println!(
        "example upstream on {base}; payments-server settings (after the file's top-level \
         keys):\n\n{settings}"
    );
    match upstream.serve(listener).await {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("upstream: {e}");
            ExitCode::FAILURE
        }
    }
}
