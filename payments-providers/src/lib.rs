//! Requisite providers and rate sources for `payments-core`'s ports: a [`Router`] that routes
//! across several providers by coverage, priority, weight and health, with a circuit breaker
//! per provider; the sandbox provider and fixed rates ([`sandbox`]); and, with the feature
//! `http` (default), the HTTP upstream adapters ([`upstream`]) configured by a plain
//! [`upstream::UpstreamConfig`].
//!
//! What a provider's answer does to a payment, and when the next provider of a plan may be
//! asked ([`Failover`](payments_core::provider::Failover)), are the core's rules; this crate
//! holds the machinery around them: mutable health, clocks read on every call, HTTP clients.
#![deny(missing_docs)]
#![forbid(unsafe_code)]

pub mod coverage;
pub mod health;
pub mod router;
pub mod sandbox;
#[cfg(feature = "http")]
pub mod upstream;

pub use coverage::{Coverage, Hours, HoursError};
pub use health::{Admission, BreakerConfig, BreakerState, Health, Probe, Verdict};
pub use router::{
    Candidate, Failure, PriorityWeightHealth, ProviderHealth, Route, Router, RouterError,
    RoutingRule,
};
