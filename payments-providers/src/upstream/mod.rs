//! The HTTP upstream adapters: the ports for a payment company's own systems, specified on the
//! wire in `docs/providers.md`, configured by a plain [`UpstreamConfig`] (no command line, no
//! configuration files, no telemetry exporter needed).
//!
//! - [`HttpProvider`]: a signed `POST` per payment to the upstream's requisite endpoint;
//!   [`router`] routes across several of them (`[[upstream.providers]]` for the server).
//! - [`HttpRates`]: the upstream's rates endpoint, cached and refreshed in the background,
//!   unused once older than the staleness limit.
//!
//! Requests are signed with the scheme of the merchant callbacks (`X-Callback-Timestamp`,
//! `X-Callback-Signature: v1=<hex HMAC-SHA256 of "{timestamp}.{body}">`) with the upstream's
//! secrets, so the upstream verifies them with the same code as a merchant's callback receiver.
//! Answers are read up to [`MAX_ANSWER_BYTES`]; more is refused.

pub mod provider;
pub mod rates;

use std::sync::Arc;
use std::time::Duration;

use payments_core::callback::{CallbackSecret, SIGNATURE_HEADER, TIMESTAMP_HEADER};
use payments_core::provider::ProviderName;
use payments_core::{Clock, Timestamp};
use rustls::pki_types::CertificateDer;

pub use provider::HttpProvider;
pub use rates::HttpRates;

use crate::coverage::Coverage;
use crate::health::BreakerConfig;
use crate::router::{Route, Router, RouterError};

/// The largest upstream answer (or notification body) read, in bytes: 64 KiB.
pub const MAX_ANSWER_BYTES: usize = 64 * 1024;

/// The header carrying the payment id on requisite requests (the upstream's idempotency key).
pub const IDEMPOTENCY_KEY_HEADER: &str = "Idempotency-Key";

/// Everything the upstream adapters need, as plain values: the endpoints and secrets, the
/// client's trust roots and time limits, the live rates' refresh, and the routed providers.
/// [`UpstreamConfig::default`] holds the server's defaults.
#[derive(Debug, Clone)]
pub struct UpstreamConfig {
    /// The requisite endpoint of the one provider ([`HttpProvider::new`]): `https://`, or
    /// `http://` to a loopback host ([`check_url`]).
    pub url: Option<String>,
    /// The rates endpoint ([`HttpRates::start`]), same rule.
    pub rates_url: Option<String>,
    /// The HMAC secrets shared with the upstream, the newest first: requests are signed with
    /// each.
    pub secrets: Vec<CallbackSecret>,
    /// Extra trust roots for the upstream's TLS certificate (DER).
    pub roots: Vec<CertificateDer<'static>>,
    /// Whether the bundled public web roots are trusted too.
    pub public_roots: bool,
    /// One request's time limit (connect, send, answer); default 15 s.
    pub timeout: Duration,
    /// Connect (TCP and TLS) time limit; default 5 s.
    pub connect_timeout: Duration,
    /// Idle connections kept open for reuse per host; default 32.
    pub pool_idle: usize,
    /// How long an idle connection is kept; default 90 s.
    pub pool_idle_timeout: Duration,
    /// How often the live rates are fetched; default 30 s.
    pub rates_refresh: Duration,
    /// Rates fetched longer ago are not used; default 5 min.
    pub rates_max_age: Duration,
    /// The routed providers' breaker ([`router`]).
    pub breaker: BreakerConfig,
    /// Several named providers, routed ([`router`]); empty: the one of `url` and `secrets`.
    pub providers: Vec<ProviderConfig>,
    /// Headers that carry the current trace to the upstream (`traceparent`), asked for on
    /// every request; by default none.
    pub trace_headers: fn() -> Vec<(String, String)>,
}

impl Default for UpstreamConfig {
    fn default() -> UpstreamConfig {
        UpstreamConfig {
            url: None,
            rates_url: None,
            secrets: Vec::new(),
            roots: Vec::new(),
            public_roots: true,
            timeout: Duration::from_secs(15),
            connect_timeout: Duration::from_secs(5),
            pool_idle: 32,
            pool_idle_timeout: Duration::from_secs(90),
            rates_refresh: Duration::from_secs(30),
            rates_max_age: Duration::from_secs(300),
            breaker: BreakerConfig::default(),
            providers: Vec::new(),
            trace_headers: Vec::new,
        }
    }
}

/// One routed provider: its endpoint, secrets and time limit, what it covers and its place
/// in the routing.
#[derive(Debug, Clone)]
pub struct ProviderConfig {
    /// Its name (on payments, in metrics, in its notification path).
    pub name: ProviderName,
    /// Its requisite endpoint ([`check_url`]).
    pub url: String,
    /// Its HMAC secrets, the newest first.
    pub secrets: Vec<CallbackSecret>,
    /// One request's time limit; `None`: [`UpstreamConfig::timeout`].
    pub timeout: Option<Duration>,
    /// What it serves.
    pub coverage: Coverage,
    /// Lower is asked first.
    pub priority: u32,
    /// Share among the providers of one priority.
    pub weight: u32,
}

/// Why an upstream adapter cannot be built from its configuration.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum UpstreamError {
    /// A value the adapter needs is not configured.
    #[error("upstream: {adapter} needs {needs}")]
    Missing {
        /// The adapter (`provider = "http"`, `rate_source = "http"`).
        adapter: &'static str,
        /// What it needs (`upstream_url`, ...).
        needs: &'static str,
    },
    /// An endpoint that is not an upstream URL.
    #[error("upstream: {0}")]
    Url(#[from] UrlError),
    /// A routed provider's endpoint that is not an upstream URL.
    #[error("upstream: upstream.providers {name}: {source}")]
    ProviderUrl {
        /// The provider.
        name: ProviderName,
        /// What is wrong with its URL.
        #[source]
        source: UrlError,
    },
    /// A trust root the client refuses.
    #[error("upstream: CA certificates: {0}")]
    Roots(#[source] reqwest::Error),
    /// The HTTP client could not be built.
    #[error("upstream: HTTP client: {0}")]
    Client(#[source] reqwest::Error),
    /// The routed providers do not make a router.
    #[error("upstream: {0}")]
    Router(#[from] RouterError),
}

/// An endpoint that is not an upstream URL ([`check_url`]).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum UrlError {
    /// Not a URL at all.
    #[error("{url:?} is not a URL: {source}")]
    Parse {
        /// The text.
        url: String,
        /// Why it does not parse.
        #[source]
        source: url::ParseError,
    },
    /// A URL without a host.
    #[error("{0:?} has no host")]
    NoHost(String),
    /// `http://` to a host that is not loopback.
    #[error("{0:?}: http:// only to a loopback address; use https://")]
    Cleartext(String),
    /// Neither `https` nor `http`.
    #[error("{url:?}: scheme {scheme} is not http(s)")]
    Scheme {
        /// The URL.
        url: String,
        /// Its scheme.
        scheme: String,
    },
}

/// An upstream URL: `https://`, or `http://` to a loopback host (`localhost`, 127.0.0.0/8,
/// `[::1]`): the request and the shared secret's signatures never cross a network in clear.
pub fn check_url(url: &str) -> Result<reqwest::Url, UrlError> {
    let parsed = reqwest::Url::parse(url).map_err(|source| UrlError::Parse {
        url: url.to_string(),
        source,
    })?;
    let loopback = match parsed.host() {
        Some(url::Host::Domain(d)) => d.eq_ignore_ascii_case("localhost"),
        Some(url::Host::Ipv4(ip)) => ip.is_loopback(),
        Some(url::Host::Ipv6(ip)) => ip.is_loopback(),
        None => return Err(UrlError::NoHost(url.to_string())),
    };
    match parsed.scheme() {
        "https" => Ok(parsed),
        "http" if loopback => Ok(parsed),
        "http" => Err(UrlError::Cleartext(url.to_string())),
        other => Err(UrlError::Scheme {
            url: url.to_string(),
            scheme: other.to_string(),
        }),
    }
}

/// The router over `config.providers`, each an [`HttpProvider`], with `config.breaker`.
pub fn router(config: &UpstreamConfig, clock: Arc<dyn Clock>) -> Result<Router, UpstreamError> {
    let mut routes = Vec::new();
    for p in &config.providers {
        routes.push(Route {
            name: p.name.clone(),
            provider: Arc::new(HttpProvider::for_provider(config, p, clock.clone())?),
            coverage: p.coverage.clone(),
            priority: p.priority,
            weight: p.weight,
        });
    }
    let breaker = BreakerConfig {
        failures: config.breaker.failures.max(1),
        ..config.breaker
    };
    Ok(Router::new(routes, clock)?.with_breaker(breaker))
}

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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn upstream_urls_are_https_or_loopback_http() {
        for ok in [
            "https://bank.example/requisites",
            "http://localhost:8080/r",
            "http://127.0.0.2/r",
            "http://[::1]:9/r",
        ] {
            assert!(check_url(ok).is_ok(), "{ok}");
        }
        let refused = |url: &str| check_url(url).expect_err(url).to_string();
        assert_eq!(
            refused("http://bank.example/r"),
            "\"http://bank.example/r\": http:// only to a loopback address; use https://"
        );
        assert_eq!(
            refused("ftp://bank.example/r"),
            "\"ftp://bank.example/r\": scheme ftp is not http(s)"
        );
        assert!(matches!(
            check_url("bank.example"),
            Err(UrlError::Parse { .. })
        ));
        assert!(std::error::Error::source(&check_url("::").unwrap_err()).is_some());
    }

    #[test]
    fn a_router_needs_distinct_providers() {
        let clock: Arc<dyn Clock> = Arc::new(payments_core::testing::ManualClock::new(
            Timestamp::from_unix_secs(1_790_856_000),
        ));
        let provider = |name: &str| ProviderConfig {
            name: ProviderName::parse(name).expect("a valid name"),
            url: "http://127.0.0.1:9/r".into(),
            secrets: Vec::new(),
            timeout: None,
            coverage: Coverage::default(),
            priority: 0,
            weight: 1,
        };
        let mut config = UpstreamConfig::default();
        assert!(matches!(
            router(&config, clock.clone()),
            Err(UpstreamError::Router(RouterError::NoProvider))
        ));
        config.providers = vec![provider("a"), provider("a")];
        assert_eq!(
            router(&config, clock.clone()).unwrap_err().to_string(),
            "upstream: provider a is configured twice"
        );
        config.providers = vec![provider("a"), provider("b")];
        assert_eq!(router(&config, clock).unwrap().routes().len(), 2);
    }
}
