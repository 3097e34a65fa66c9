//! The HTTP adapter of `payments-core`: the merchant API and the operator API on axum, the
//! callback dispatcher, the lifecycle sweeper, configuration, telemetry and the
//! `payments-server` binary. It maps HTTP to core calls and core errors to HTTP; the decisions
//! are the core's.
#![forbid(unsafe_code)]

pub mod app;
pub mod cli;
pub mod config;
pub mod dispatcher;
pub mod error;
pub mod merchant;
pub mod metrics;
pub mod operator;
pub mod ratelimit;
pub mod resolver;
pub mod sandbox;
pub mod state;
pub mod system;

pub use app::{app, operator_app};
pub use state::AppState;
pub mod bootstrap;
pub mod server;
pub mod sweeper;
pub mod telemetry;
#[cfg(feature = "testing")]
pub mod testing;
