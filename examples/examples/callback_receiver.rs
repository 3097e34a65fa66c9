//! A callback receiver: verifies each callback's HMAC signature, deduplicates `event_id` in
//! SQLite, and applies the status and amount of a signed `GET /api/v1/payments/{id}` to the
//! order (see `payments_examples::receiver`).
//!
//! ```sh
//! cargo run -p payments-examples --example callback_receiver -- --listen 127.0.0.1:9090
//! ```
//!
//! Secrets: `--secret` (repeat it to accept the old and the new one during a rotation), or
//! `CALLBACK_SECRETS` (comma separated), or `callback_secret` of the credentials file.

use std::net::SocketAddr;
use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::Arc;

use clap::Parser;
use payments_core::callback::{CallbackSecret, CallbackVerifier};
use payments_core::SecretString;
use payments_examples::cli::{ApiArgs, ApiArgsError};
use payments_examples::receiver::ReceiverDbError;
use payments_examples::receiver::CALLBACK_PATH;
use payments_examples::{receiver_router, LoadCredentialsError, Receiver, ReceiverDb};
use payments_http::system::SystemClock;

/// Receives payment callbacks.
#[derive(Debug, Parser)]
struct Args {
    #[command(flatten)]
    api: ApiArgs,
    /// The address to listen on.
    #[arg(long, default_value = "127.0.0.1:9090")]
    listen: SocketAddr,
    /// The SQLite file for processed event ids and order states.
    #[arg(long, default_value = "./receiver.db")]
    db: PathBuf,
    /// A callback secret (`whsec_...`); repeat for rotation.
    #[arg(
        long = "secret",
        env = "CALLBACK_SECRETS",
        value_delimiter = ',',
        hide_env_values = true
    )]
    secrets: Vec<SecretString>,
}

#[tokio::main]
async fn main() -> ExitCode {
    tracing_subscriber::fmt()
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_default_env().unwrap_or_else(|_| "info".into()),
        )
        .init();
    let args = Args::parse();
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
    Credentials(#[from] LoadCredentialsError),
    #[error("--secret: {0}")]
    Secret(#[source] payments_core::callback::CallbackSecretError),
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

async fn run(args: Args) -> Result<(), RunError> {
    let secrets = if args.secrets.is_empty() {
        vec![payments_examples::load_credentials(&args.api.credentials)?.callback_secret]
    } else {
        args.secrets
    };
    let secrets = secrets
        .iter()
        .map(|s| CallbackSecret::parse(s.expose().trim()).map_err(RunError::Secret))
        .collect::<Result<Vec<_>, _>>()?;
    let receiver = Receiver::new(
        CallbackVerifier::new(secrets),
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
        "receiving callbacks at http://{}{CALLBACK_PATH}; database {}",
        args.listen,
        args.db.display()
    );
    axum::serve(listener, receiver_router(Arc::new(receiver)))
        .with_graceful_shutdown(async {
            let _ = tokio::signal::ctrl_c().await;
        })
        .await
        .map_err(RunError::Serve)
}
