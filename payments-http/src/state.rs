//! The state shared by the handlers.

use std::sync::Arc;

use payments_core::auth::Environment;
use payments_core::service::PaymentService;
use tokio::sync::{Notify, Semaphore};

use crate::metrics::Metrics;
use crate::ratelimit::ProjectLimiters;

/// Requests the merchant API serves at once before answering `503`.
pub const MAX_IN_FLIGHT: usize = 4096;

/// Everything a handler needs.
#[derive(Debug, Clone)]
pub struct AppState {
    /// The core service.
    pub service: PaymentService,
    /// Sandbox or production.
    pub environment: Environment,
    /// The scheme merchants sign for (`@scheme`, `@target-uri`).
    pub public_scheme: Arc<str>,
    /// Per-project rate limits.
    pub limiters: Arc<ProjectLimiters>,
    /// Metrics.
    pub metrics: Arc<Metrics>,
    /// Wakes the callback dispatcher after an event was queued.
    pub outbox_notify: Arc<Notify>,
    /// Bounds concurrent merchant requests (overload -> `503`).
    pub in_flight: Arc<Semaphore>,
}

impl AppState {
    /// State over a service.
    pub fn new(service: PaymentService, environment: Environment, public_scheme: &str) -> Self {
        AppState {
            service,
            environment,
            public_scheme: public_scheme.into(),
            limiters: Arc::default(),
            metrics: Arc::default(),
            outbox_notify: Arc::default(),
            in_flight: Arc::new(Semaphore::new(MAX_IN_FLIGHT)),
        }
    }
}
