//! The server's upstream: the settings' `[upstream]` turned into the plain configuration of
//! the adapters of `payments-providers` ([`config`], then [`provider`], [`router`], [`rates`]),
//! and the listener on which the upstream reports confirmed and failed transfers ([`notify`];
//! the core decides what they do, [`Payments::apply_provider_notification`]).
//!
//! Notifications are signed with the scheme of the merchant callbacks, with the secrets of
//! `upstream_secrets` (or of each `[[upstream.providers]]` entry), and verified with
//! [`CallbackVerifier`].
//!
//! [`Payments::apply_provider_notification`]: payments_core::service::Payments::apply_provider_notification
//! [`CallbackVerifier`]: payments_core::callback::CallbackVerifier

pub mod notify;

use std::sync::Arc;

use payments_core::Clock;
use payments_http::dispatcher::DispatcherError;
use payments_http::providers::{
    CoverageStatus, FailureStatus, ProviderReports, ProviderStatus, ProviderStatusSource,
};
use payments_providers::upstream::UpstreamError;
use payments_providers::upstream::{HttpProvider, HttpRates, ProviderConfig, UpstreamConfig};
use payments_providers::{BreakerConfig, BreakerState, Router};

use crate::config::Settings;
use crate::files::read_pem_roots;

pub use notify::NOTIFICATIONS_PATH;
pub use payments_providers::upstream::MAX_ANSWER_BYTES;

/// The provider-notification API as a router, verifying with `verifier` (the upstream's
/// secrets), with the middleware of the merchant API; bind it to its own listener
/// (`upstream_listen`).
pub fn upstream_app(state: payments_http::AppState, verifiers: notify::Verifiers) -> axum::Router {
    payments_http::app::with_middleware(notify::routes(verifiers), state)
}

/// Why the settings' upstream adapters could not be set up.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum SetupError {
    /// `upstream.ca_file` could not be read.
    #[error("upstream: {0}")]
    CaFile(#[source] DispatcherError),
    /// An `[[upstream.providers]]` entry the settings refuse.
    #[error("upstream: {0}")]
    Provider(#[source] crate::config::ProviderSettingError),
    /// The adapter refused its configuration.
    #[error(transparent)]
    Adapter(#[from] UpstreamError),
}

/// The adapters' configuration of `settings`: its `[upstream]` values, the CA file read,
/// the trace headers of the telemetry.
pub fn config(settings: &Settings) -> Result<UpstreamConfig, SetupError> {
    let u = &settings.upstream;
    let roots = match &u.ca_file {
        Some(path) => read_pem_roots(path).map_err(SetupError::CaFile)?,
        None => Vec::new(),
    };
    let mut providers = Vec::new();
    for p in &u.providers {
        providers.push(ProviderConfig {
            name: p.provider_name().map_err(SetupError::Provider)?,
            url: p.url.clone(),
            secrets: p.secrets.clone(),
            timeout: p.timeout,
            coverage: p.coverage().map_err(SetupError::Provider)?,
            priority: p.priority,
            weight: p.weight,
        });
    }
    Ok(UpstreamConfig {
        url: u.url.clone(),
        rates_url: u.rates_url.clone(),
        secrets: u.secrets.clone(),
        roots,
        public_roots: !u.ca_only,
        timeout: u.timeout,
        provider_budget: u.provider_budget,
        connect_timeout: u.connect_timeout,
        pool_idle: u.pool_idle,
        pool_idle_timeout: u.pool_idle_timeout,
        rates_refresh: u.rates_refresh,
        rates_max_age: u.rates_max_age,
        breaker: BreakerConfig {
            failures: u.breaker_failures,
            open_for: u.breaker_open,
        },
        providers,
        trace_headers: crate::telemetry::traces::current_context_headers,
    })
}

/// The one requisite provider of `provider = "http"` (`upstream_url`, `upstream_secrets`).
pub fn provider(settings: &Settings, clock: Arc<dyn Clock>) -> Result<HttpProvider, SetupError> {
    Ok(HttpProvider::new(&config(settings)?, clock)?)
}

/// The router over `[[upstream.providers]]`, each an HTTP provider.
pub fn router(settings: &Settings, clock: Arc<dyn Clock>) -> Result<Router, SetupError> {
    Ok(payments_providers::upstream::router(
        &config(settings)?,
        clock,
    )?)
}

/// The live rates of `rate_source = "http"`, fetched once and then refreshed.
pub async fn rates(settings: &Settings, clock: Arc<dyn Clock>) -> Result<HttpRates, SetupError> {
    Ok(HttpRates::start(&config(settings)?, clock).await?)
}

/// What the operator API shows of `router`'s providers, read at each request (and written
/// into this node's health report).
pub fn provider_status(router: Arc<Router>) -> ProviderStatusSource {
    Arc::new(move || {
        let details = router.health_details();
        router
            .routes()
            .iter()
            .zip(details)
            .map(|(r, d)| {
                let h = d.health;
                let c = &r.coverage;
                ProviderStatus {
                    name: r.name.to_string(),
                    priority: r.priority,
                    weight: r.weight,
                    coverage: CoverageStatus {
                        methods: c.methods.iter().map(|m| m.as_str().to_string()).collect(),
                        currencies: c
                            .currencies
                            .iter()
                            .map(|x| x.as_str().to_string())
                            .collect(),
                        geo_codes: c.geo_codes.iter().map(|g| g.as_str().to_string()).collect(),
                        banks: c.banks.clone(),
                        not_banks: c.not_banks.clone(),
                        intrabank: c.intrabank,
                        min_amount: c.min_amount.map(|d| d.to_string()),
                        max_amount: c.max_amount.map(|d| d.to_string()),
                        hours: c.hours.map(|h| h.to_string()),
                    },
                    breaker: h.breaker.as_str(),
                    open_until: match h.breaker {
                        BreakerState::Open { until } => Some(until),
                        _ => None,
                    },
                    failures_in_a_row: h.failures_in_a_row,
                    issue_rate: h.issue_rate,
                    latency_ms: h.latency_ms,
                    since: d.since,
                    last_failure: d.last_failure.map(|f| FailureStatus {
                        at: f.at,
                        cause: f.cause,
                    }),
                }
            })
            .collect()
    })
}

/// How this node reports `router`'s health to the other nodes: as `node` (its name,
/// [`Settings::node_name`]), at `upstream.health_report_interval` and after each breaker
/// change, kept `upstream.health_report_retention`.
pub fn provider_reports(settings: &Settings, router: &Router, node: String) -> ProviderReports {
    ProviderReports {
        node: Arc::from(node),
        interval: settings.upstream.health_report_interval,
        retention: settings.upstream.health_report_retention,
        changes: Some(router.breaker_changes()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The server's `[upstream]` defaults and the adapters' own defaults are the same values,
    /// so an embedder with `UpstreamConfig::default()` gets what the server gets.
    #[test]
    fn the_default_settings_give_the_adapters_defaults() {
        let server = config(&Settings::default()).expect("the defaults name no CA file");
        let own = UpstreamConfig::default();
        let values = |c: &UpstreamConfig| {
            (
                c.public_roots,
                c.timeout,
                c.connect_timeout,
                c.pool_idle,
                c.pool_idle_timeout,
                c.rates_refresh,
                c.rates_max_age,
                c.breaker,
            )
        };
        assert_eq!(values(&server), values(&own));
        assert!(server.url.is_none() && server.providers.is_empty() && server.roots.is_empty());
    }
}
