//! The HTTP adapter of `payments-core`: the merchant API and the operator API on axum, the
//! callback dispatcher, the lifecycle sweeper, configuration, telemetry and the
//! `payments-server` binary. It maps HTTP to core calls and core errors to HTTP; the decisions
//! are the core's.
//!
//! Three ways to use it, from the most to the least of your own code:
//! - **Routers**: [`app()`] (merchant API) and [`operator_app`] over an [`AppState`], mounted
//!   in your own axum application, at the root or under a prefix; run
//!   the dispatcher ([`dispatcher::Dispatcher::for_state`]) and the sweeper beside them, both
//!   behind one [`workers::Workers`] handle.
//! - **The whole server with your ports**: [`server::Application::builder`] takes your
//!   store, requisite provider, rate source, clock and random source, and runs both
//!   listeners, TLS, the background tasks and graceful shutdown.
//! - **The binary**: `payments-server serve` over SQLite with the sandbox ports (production
//!   refuses the sandbox ports: it needs real ones, i.e. an embedding).
//!
//! Every error answer, the framework's own included, is the JSON error body with the request
//! id, written once by [`error::answer_errors`].
//!
//! The merchant API mounted under `/pay` in an application of its own, answering a health
//! check and, in its JSON error body, an unknown route:
//!
//! ```
//! # #[tokio::main(flavor = "current_thread")]
//! # async fn main() {
//! use std::sync::Arc;
//!
//! use axum::body::Body;
//! use axum::http::Request;
//! use axum::Router;
//! use payments_core::auth::Environment;
//! use payments_core::service::{AuthConfig, PaymentService, Ports, ServiceConfig};
//! use payments_http::sandbox::{FixedRates, SandboxProvider};
//! use payments_http::system::{OsRandom, SystemClock};
//! use payments_http::AppState;
//! use tower::ServiceExt;
//! # let store: Arc<dyn payments_core::store::Store> =
//! #     Arc::new(payments_core::testing::MemoryStore::new());
//! // `store`: any `payments_core::store::Store` (SQLite, PostgreSQL, your own).
//!
//! let service = PaymentService::new(
//!     Ports::new(
//!         store.clone(),
//!         Arc::new(SandboxProvider::new(store)),
//!         Arc::new(FixedRates::sandbox_defaults()),
//!         Arc::new(SystemClock),
//!         Arc::new(OsRandom),
//!     ),
//!     ServiceConfig::default(),
//!     AuthConfig::for_environment(Environment::Sandbox),
//! );
//! let state = AppState::new(service, "https");
//! let shop = Router::new().nest("/pay", payments_http::app(state));
//!
//! let health = Request::get("/pay/healthz").body(Body::empty()).unwrap();
//! assert_eq!(shop.clone().oneshot(health).await.unwrap().status(), 200);
//!
//! let unknown = Request::get("/pay/api/v1/nothing").body(Body::empty()).unwrap();
//! let answer = shop.oneshot(unknown).await.unwrap();
//! assert_eq!(answer.status(), 404);
//! assert_eq!(answer.headers()["content-type"], "application/json");
//! # }
//! ```
#![deny(missing_docs)]
#![forbid(unsafe_code)]

pub mod app;
pub mod cli;
pub mod config;
pub mod data_dir;
pub mod dispatcher;
pub mod error;
pub mod files;
pub mod listener;
pub mod measured;
pub mod merchant;
pub mod metrics;
pub mod operator;
pub mod receiver_check;
pub mod resolver;
pub mod sandbox;
pub mod state;
pub mod system;
pub mod upstream;

pub use app::{app, operator_app, upstream_app};
pub use state::{AppState, SharedState};
pub mod bootstrap;
pub mod server;
pub mod sweeper;
pub mod telemetry;
#[cfg(feature = "testing")]
pub mod testing;
pub mod tls;
pub mod workers;
