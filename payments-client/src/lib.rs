//! A merchant's client for the payments API, without the server.
//!
//! [`MerchantClient`] signs every request the way the service verifies it: RFC 9421 HTTP
//! Message Signatures with Ed25519 over `@method`, `@path` (`@query` when there is one), a
//! `Content-Digest` of the body, `X-Request-ID` and a fresh `X-Request-Nonce`, using the
//! signer of `payments_core::auth::signature`. It sends with `reqwest` (rustls). The crate does
//! not depend on the server's stack (axum, SQLite, clap, governor): a Rust merchant adds only
//! this crate and `payments-core`.
//!
//! [`SandboxCredentials`] is the file a sandbox writes on its first start,
//! `<data-dir>/sandbox-credentials.json`: base URLs, project id, token, key, callback secret.
//!
//! The base URL may carry a path prefix (`https://host/pay` for a server behind a reverse
//! proxy); requests go to the prefix followed by the API path, and the signature covers that
//! full path.
//!
//! ```no_run
//! use payments_client::{MerchantClient, SandboxCredentials};
//! use serde_json::json;
//!
//! # async fn run() -> Result<(), Box<dyn std::error::Error>> {
//! let creds = SandboxCredentials::from_file("data/sandbox-credentials.json")?;
//! let client = MerchantClient::from_credentials(&creds)?;
//! let response = client
//!     .create_payment(&json!({
//!         "merchant_payment_id": "order-1",
//!         "amount": "100.00",
//!         "payment_method": "sbp",
//!     }))
//!     .await?;
//! println!("{} {}", response.status, response.json);
//! # Ok(())
//! # }
//! ```
#![forbid(unsafe_code)]
#![deny(missing_docs)]

mod client;
mod credentials;
pub mod files;
mod random;

pub use client::{ApiResponse, ClientError, MerchantClient, PreparedRequest, SignSpec};
pub use credentials::{CredentialsError, SandboxCredentials, TestProjectCredentials};
/// The `ed25519-dalek` of [`MerchantClient::from_key`] and [`MerchantClient::with_key`].
pub use ed25519_dalek;
/// The `reqwest` of this crate's API (`Method`, `StatusCode`, `Client`).
pub use reqwest;
