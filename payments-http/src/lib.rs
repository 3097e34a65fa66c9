//! The HTTP adapter of `payments-core`: the merchant API and the operator API on axum, the
//! callback dispatcher, the lifecycle sweeper, configuration, telemetry and the
//! `payments-server` binary. It maps HTTP to core calls and core errors to HTTP; the decisions
//! are the core's.
#![forbid(unsafe_code)]

pub mod config;
pub mod metrics;
pub mod sandbox;
pub mod system;
pub mod app;
pub mod error;
pub mod merchant;
pub mod operator;
pub mod ratelimit;
pub mod state;

pub use app::{app, operator_app};
pub use state::AppState;
