//! The upstream adapters: the server's real ports for a payment company's own systems, chosen
//! in the settings and specified on the wire in `docs/providers.md`.
//!
//! - [`provider::HttpProvider`] (`provider = "http"`): a signed `POST` per payment to the
//!   upstream's requisite endpoint.
//! - [`rates::HttpRates`] (`rate_source = "http"`): the upstream's rates endpoint, cached and
//!   refreshed in the background, unused once older than the staleness limit.
//! - [`notify`]: the listener on which the upstream reports confirmed and failed transfers;
//!   the core decides what they do ([`Payments::apply_provider_notification`](payments_core::service::Payments::apply_provider_notification)).
//!
//! Both directions are signed with the scheme of the merchant callbacks
//! (`X-Callback-Timestamp`, `X-Callback-Signature: v1=<hex HMAC-SHA256 of "{timestamp}.{body}">`)
//! with the secrets of `upstream_secrets`, so the upstream verifies our requests with the same
//! code as a merchant's callback receiver, and we verify its notifications with
//! [`CallbackVerifier`]. Answers are read up to [`MAX_ANSWER_BYTES`]; more is refused.
//!
//! [`Payments::apply_provider_notification`]: payments_core::service::Payments::apply_provider_notification
//! [`CallbackVerifier`]: payments_core::callback::CallbackVerifier

pub mod notify;
pub mod provider;
pub mod rates;

use std::sync::Arc;

use payments_core::callback::{CallbackSecret, SIGNATURE_HEADER, TIMESTAMP_HEADER};
use payments_core::{Clock, Timestamp};

use crate::config::Settings;
use crate::files::read_pem_roots;
use payments_http::resolver::rustls_client_builder;

pub use notify::NOTIFICATIONS_PATH;
pub use provider::HttpProvider;
pub use rates::HttpRates;

/// The provider-notification API as a router, verifying with `verifier` (the upstream's
/// secrets), with the middleware of the merchant API; bind it to its own listener
/// (`upstream_listen`).
pub fn upstream_app(state: payments_http::AppState, verifiers: notify::Verifiers) -> axum::Router {
    payments_http::app::with_middleware(notify::routes(verifiers), state)
}

/// The largest upstream answer (or notification body) read, in bytes: 64 KiB.
pub const MAX_ANSWER_BYTES: usize = 64 * 1024;

/// The header carrying the payment id on requisite requests (the upstream's idempotency key).
pub const IDEMPOTENCY_KEY_HEADER: &str = "Idempotency-Key";

/// Why the upstream client could not be built.
#[derive(Debug, thiserror::Error)]
#[error("upstream: {0}")]
pub struct UpstreamError(pub String);

/// The HTTP client for the upstream: rustls with the public roots (unless `upstream_ca_only`)
/// and `upstream_ca_file`, no redirects or proxy, the connect and request time limits and the
/// connection pool of the settings. The upstream is the operator's own choice, so the public
/// address policy of callbacks does not apply to it.
pub fn upstream_client(settings: &Settings) -> Result<reqwest::Client, UpstreamError> {
    let roots = match &settings.upstream.ca_file {
        Some(path) => read_pem_roots(path).map_err(|e| UpstreamError(e.to_string()))?,
        None => Vec::new(),
    };
    let builder = rustls_client_builder(
        &roots,
        !settings.upstream.ca_only,
        settings.upstream.connect_timeout,
    )
    .map_err(|e| UpstreamError(format!("CA certificates: {e}")))?;
    builder
        .timeout(settings.upstream.timeout)
        .pool_max_idle_per_host(settings.upstream.pool_idle)
        .pool_idle_timeout(settings.upstream.pool_idle_timeout)
        .user_agent(concat!("payments-upstream/", env!("CARGO_PKG_VERSION")))
        .build()
        .map_err(|e| UpstreamError(format!("HTTP client: {e}")))
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

/// Reads at most `limit` bytes of a response body; more is an error (the rest is never read,
/// and dropping the response closes the connection).
pub(crate) async fn read_limited(
    mut response: reqwest::Response,
    limit: usize,
) -> Result<Vec<u8>, String> {
    if response.content_length().is_some_and(|n| n > limit as u64) {
        return Err(format!("the answer exceeds {limit} bytes"));
    }
    let mut body = Vec::new();
    while let Some(chunk) = response
        .chunk()
        .await
        .map_err(|e| format!("reading the answer: {e}"))?
    {
        if body.len() + chunk.len() > limit {
            return Err(format!("the answer exceeds {limit} bytes"));
        }
        body.extend_from_slice(&chunk);
    }
    Ok(body)
}
