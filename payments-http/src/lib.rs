//! The HTTP adapter of `payments-core`: the merchant API and the operator API on axum, the
//! callback dispatcher, the lifecycle sweeper, configuration, telemetry and the
//! `payments-server` binary. It maps HTTP to core calls and core errors to HTTP; the decisions
//! are the core's.
#![forbid(unsafe_code)]

pub mod config;
pub mod dispatcher;
pub mod metrics;
pub mod resolver;
pub mod sandbox;
pub mod system;
