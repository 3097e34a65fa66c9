//! The HTTP client for the upstream ([`client`]), the signature of every request
//! ([`UpstreamSigner`]) and the bounded read of an answer.

use std::sync::Arc;

use payments_core::callback::{CallbackSecret, SIGNATURE_HEADER, TIMESTAMP_HEADER};
use payments_core::{Clock, Timestamp};

use crate::upstream::config::{UpstreamConfig, UpstreamError};

/// The largest upstream answer (or notification body) read, in bytes: 64 KiB.
pub const MAX_ANSWER_BYTES: usize = 64 * 1024;

/// The header carrying the payment id on requisite requests (the upstream's idempotency key).
pub const IDEMPOTENCY_KEY_HEADER: &str = "Idempotency-Key";

/// The HTTP client for the upstream: rustls with the public roots (unless
/// `public_roots` is off) and `roots`, no redirects or proxy, the connect and request time
/// limits and the connection pool of `config`. The upstream is the operator's own choice, so
/// no public address policy applies to it.
pub fn client(config: &UpstreamConfig) -> Result<reqwest::Client, UpstreamError> {
    let mut builder = reqwest::Client::builder()
        .use_rustls_tls()
        .tls_built_in_root_certs(config.public_roots)
        .redirect(reqwest::redirect::Policy::none())
        .no_proxy()
        .connect_timeout(config.connect_timeout);
    for root in &config.roots {
        let cert = reqwest::Certificate::from_der(root.as_ref()).map_err(UpstreamError::Roots)?;
        builder = builder.add_root_certificate(cert);
    }
    builder
        .timeout(config.timeout)
        .pool_max_idle_per_host(config.pool_idle)
        .pool_idle_timeout(config.pool_idle_timeout)
        .user_agent(concat!("payments-upstream/", env!("CARGO_PKG_VERSION")))
        .build()
        .map_err(UpstreamError::Client)
}

/// Signs upstream requests with every configured secret (the newest first), as the
/// dispatcher signs callbacks during a rotation.
#[derive(Clone)]
pub struct UpstreamSigner {
    secrets: Vec<CallbackSecret>,
    clock: Arc<dyn Clock>,
}

impl std::fmt::Debug for UpstreamSigner {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("UpstreamSigner")
            .field("secrets", &self.secrets.len())
            .finish_non_exhaustive()
    }
}

impl UpstreamSigner {
    /// A signer with `secrets` (at least one) over `clock`.
    pub fn new(secrets: Vec<CallbackSecret>, clock: Arc<dyn Clock>) -> UpstreamSigner {
        UpstreamSigner { secrets, clock }
    }

    /// `request` with the timestamp and signature headers over `body`, signed now.
    pub fn sign(&self, request: reqwest::RequestBuilder, body: &[u8]) -> reqwest::RequestBuilder {
        let now: Timestamp = self.clock.now();
        let refs: Vec<&CallbackSecret> = self.secrets.iter().collect();
        let timestamp = now.unix_secs();
        let signature = payments_core::callback::signature_header(&refs, timestamp, body);
        request
            .header(TIMESTAMP_HEADER, timestamp.to_string())
            .header(SIGNATURE_HEADER, signature)
    }
}

/// Why an answer's body was not read whole.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ReadError {
    /// More than the limit.
    #[error("the answer exceeds {0} bytes")]
    TooLarge(usize),
    /// The connection broke.
    #[error("reading the answer: {0}")]
    Body(#[source] reqwest::Error),
}

/// Reads at most `limit` bytes of a response body; more is an error (the rest is never read,
/// and dropping the response closes the connection).
pub(crate) async fn read_limited(
    mut response: reqwest::Response,
    limit: usize,
) -> Result<Vec<u8>, ReadError> {
    if response.content_length().is_some_and(|n| n > limit as u64) {
        return Err(ReadError::TooLarge(limit));
    }
    let mut body = Vec::new();
    while let Some(chunk) = response.chunk().await.map_err(ReadError::Body)? {
        if body.len() + chunk.len() > limit {
            return Err(ReadError::TooLarge(limit));
        }
        body.extend_from_slice(&chunk);
    }
    Ok(body)
}
