//! The server around the HTTP adapter ([`payments_http`]): what turns its routers and workers
//! into the `payments-server` binary.
//!
//! - [`config`]: the settings (TOML file, `PAYMENTS_*` environment, flags), checked once.
//! - [`server`]: the store chosen by the settings (SQLite in the data dir or PostgreSQL), the
//!   listeners with their connection limits ([`listener`]), TLS ([`tls`]), the background
//!   workers, graceful shutdown; [`server::Application::builder`] runs the whole server with
//!   ports of your own.
//! - [`cli`]: the operator commands, which act on the database directly.
//! - [`telemetry`], [`data_dir`], [`bootstrap`] (the sandbox's first merchant),
//!   [`receiver_check`] (`check-receiver`) and [`upstream`] (the real provider and rate source
//!   over HTTP, and the provider-notification listener).
//! - `testing` (feature `testing`): the real server on `127.0.0.1:0` over a temporary data
//!   dir, for integration tests.
//! - [`testing_clock`]: the clock of `testing.clock_offset_file` (test harnesses; refused in
//!   production), and with the `planted-bugs` feature `testing.planted_bug`, the switch of
//!   one of payments-core's planted bugs.
//!
//! An embedding that mounts the routers in its own service needs only `payments-http` and a
//! store crate; this crate is for running the service as it ships.
#![deny(missing_docs)]
#![forbid(unsafe_code)]

pub mod bootstrap;
pub mod cli;
pub mod config;
pub mod data_dir;
pub mod files;
pub mod listener;
pub mod receiver_check;
pub mod server;
pub mod telemetry;
#[cfg(feature = "testing")]
pub mod testing;
pub mod testing_clock;
pub mod tls;
pub mod upstream;

pub use upstream::upstream_app;
