//! The adapters' configuration as plain values ([`UpstreamConfig`], [`ProviderConfig`]), the
//! rule for an upstream URL ([`check_url`]) and why a configuration is refused
//! ([`UpstreamError`]).

use std::time::Duration;

use payments_core::callback::CallbackSecret;
use payments_core::provider::ProviderName;
use rustls::pki_types::CertificateDer;

use crate::coverage::Coverage;
use crate::health::BreakerConfig;
use crate::router::RouterError;

/// Everything the upstream adapters need, as plain values: the endpoints and secrets, the
/// client's trust roots and time limits, the live rates' refresh, and the routed providers.
/// [`UpstreamConfig::default`] holds the server's defaults.
#[derive(Debug, Clone)]
pub struct UpstreamConfig {
    /// The requisite endpoint of the one provider ([`HttpProvider::new`](crate::upstream::HttpProvider::new)): `https://`, or
    /// `http://` to a loopback host ([`check_url`]).
    pub url: Option<String>,
    /// The rates endpoint ([`HttpRates::start`](crate::upstream::HttpRates::start)), same rule.
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
    /// The service's budget per create (`upstream.provider_budget`, default 15 s): a request
    /// that got no answer within its time limit is sent again to the same provider, with the
    /// same payment id, while this lasts (the provider contract answers the same payment id
    /// the same way).
    pub provider_budget: Duration,
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
    /// The routed providers' breaker ([`router`](crate::upstream::router)).
    pub breaker: BreakerConfig,
    /// Several named providers, routed ([`router`](crate::upstream::router)); empty: the one of `url` and `secrets`.
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
            provider_budget: Duration::from_secs(15),
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
}
