//! Shared code of the runnable examples: what a merchant does with each API answer
//! ([`advice`]), how a create is repeated safely ([`create`]), how a payer is shown the
//! requisite ([`display`]), callbacks forwarded to a laptop ([`listen`]), the quickstart's steps ([`mod@quickstart`]), the callback receiver
//! ([`receiver`]) and an upstream for the server's HTTP provider, rates and notifications
//! ([`upstream`]). The binaries in `examples/` are thin command-line wrappers, so the tests
//! (in `payments-server/tests/`, against the real server) run the same code as the binaries.
//! The `embed` example stands alone: it uses no module of this crate.
#![deny(missing_docs)]
#![forbid(unsafe_code)]

use std::path::Path;

use payments_client::{CredentialsError, SandboxCredentials};

pub mod advice;
pub mod cli;
pub mod create;
pub mod display;
pub mod listen;
pub mod quickstart;
pub mod receiver;
pub mod upstream;

pub use quickstart::{quickstart, quickstart_with_callback, QuickstartReport};
pub use receiver::{receiver_router, Receiver, ReceiverDb};

/// A sandbox credentials file that could not be read.
#[derive(Debug, thiserror::Error)]
pub enum LoadCredentialsError {
    /// The file is not there or not readable: the sandbox has not started yet.
    #[error(
        "{0} (start the sandbox first: cargo run -p payments-server --bin payments-server -- serve)"
    )]
    NotStarted(#[source] CredentialsError),
    /// The file is there but not valid credentials.
    #[error(transparent)]
    Invalid(CredentialsError),
}

/// The examples' log lines on standard output, `RUST_LOG` or `info`: coloured only on a
/// terminal, so a log file or a pipe gets plain text.
pub fn init_logging() {
    use std::io::IsTerminal as _;
    tracing_subscriber::fmt()
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_default_env().unwrap_or_else(|_| "info".into()),
        )
        .with_ansi(std::io::stdout().is_terminal())
        .init();
}

/// Reads a sandbox credentials file (`<data-dir>/sandbox-credentials.json`).
pub fn load_credentials(path: &Path) -> Result<SandboxCredentials, LoadCredentialsError> {
    SandboxCredentials::from_file(path).map_err(|e| match e {
        e @ CredentialsError::Read { .. } => LoadCredentialsError::NotStarted(e),
        e => LoadCredentialsError::Invalid(e),
    })
}
