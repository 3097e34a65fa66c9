//! A callback receiver: verifies each callback's HMAC signature, deduplicates `event_id` in
//! SQLite, and applies the status and amount of a signed `GET /api/v1/payments/{id}` to the
//! order (see `payments_examples::receiver`).
//!
//! ```sh
//! cargo run -p payments-examples --example callback_receiver -- --listen 127.0.0.1:9090
//! ```
//!
//! Secrets: `--secret` (repeat it to accept the old and the new one during a rotation), or
//! `CALLBACK_SECRETS` (comma separated), or the credentials file's secret of the project
//! `--project` picks: `callback_secret` (demo) or `test_project.callback_secret` (test).

use std::net::SocketAddr;
use std::process::ExitCode;
use std::sync::Arc;

use clap::Parser;
use payments_examples::cli::ApiArgsError;
use payments_examples::receiver::{
    ReceiverArgs, ReceiverArgsError, ReceiverDbError, CALLBACK_PATH,
};
use payments_examples::{receiver_router, Receiver, ReceiverDb};
use payments_http::system::SystemClock;

#[tokio::main]
async fn main() -> ExitCode {
    payments_examples::init_logging();
    let args = ReceiverArgs::parse();
    match run(args).await {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("callback_receiver: {e}");
            ExitCode::FAILURE
        }
    }
}

/// Why the receiver stopped.
#[derive(Debug, thiserror::Error)]
enum RunError {
    #[error(transparent)]
    Args(#[from] ReceiverArgsError),
    #[error(transparent)]
    Db(#[from] ReceiverDbError),
    #[error(transparent)]
    Api(#[from] ApiArgsError),
    #[error("cannot listen on {addr}: {source}")]
    Listen {
        addr: SocketAddr,
        source: std::io::Error,
    },
    #[error(transparent)]
    Serve(std::io::Error),
}

async fn run(args: ReceiverArgs) -> Result<(), RunError> {
    let receiver = Receiver::new(
        args.verifier()?,
        ReceiverDb::open(&args.db)?,
        args.api.client()?,
        Arc::new(SystemClock),
    );
    let listener = tokio::net::TcpListener::bind(args.listen)
        .await
        .map_err(|source| RunError::Listen {
            addr: args.listen,
            source,
        })?;
    tracing::info!(
        "receiving callbacks at http://{}{CALLBACK_PATH} for {}; database {}",
        args.listen,
        args.api.project_line()?,
        args.db.display()
    );
    axum::serve(listener, receiver_router(Arc::new(receiver)))
        .with_graceful_shutdown(async {
            let _ = tokio::signal::ctrl_c().await;
        })
        .await
        .map_err(RunError::Serve)
}
