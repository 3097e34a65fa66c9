//! Shared code of the runnable examples: what a merchant does with each API answer
//! ([`advice`]), how a create is repeated safely ([`create`]), how a payer is shown the
//! requisite ([`display`]), the quickstart's steps ([`quickstart`]) and the callback receiver
//! ([`receiver`]). The binaries in `examples/` are thin command-line wrappers, so the tests
//! run the same code as the binaries.
#![forbid(unsafe_code)]

use std::path::Path;

use payments_http::bootstrap::SandboxCredentials;

pub mod advice;
pub mod cli;
pub mod create;
pub mod display;
pub mod quickstart;
pub mod receiver;

pub use quickstart::{quickstart, QuickstartReport};
pub use receiver::{receiver_router, Receiver, ReceiverDb};

/// Reads a sandbox credentials file (`<data-dir>/sandbox-credentials.json`).
pub fn load_credentials(path: &Path) -> Result<SandboxCredentials, String> {
    let text = std::fs::read_to_string(path).map_err(|e| {
        format!(
            "cannot read {}: {e} (start the sandbox first: cargo run -p payments-http --bin payments-server -- serve)",
            path.display()
        )
    })?;
    serde_json::from_str(&text)
        .map_err(|e| format!("{} is not a credentials file: {e}", path.display()))
}
