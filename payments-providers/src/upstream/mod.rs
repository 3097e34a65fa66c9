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

pub mod client;
pub mod config;
pub mod provider;
pub mod rates;

use std::sync::Arc;

use payments_core::Clock;

pub use client::{client, ReadError, UpstreamSigner, IDEMPOTENCY_KEY_HEADER, MAX_ANSWER_BYTES};
pub use config::{check_url, ProviderConfig, UpstreamConfig, UpstreamError, UrlError};
pub use provider::HttpProvider;
pub use rates::HttpRates;

use crate::health::BreakerConfig;
use crate::router::{Route, Router};

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

#[cfg(test)]
mod tests {
    use payments_core::provider::ProviderName;
    use payments_core::Timestamp;

    use super::*;
    use crate::coverage::Coverage;
    use crate::router::RouterError;

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
