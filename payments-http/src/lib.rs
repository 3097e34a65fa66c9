//! The HTTP adapter of `payments-core`: the merchant API and the operator API as axum routers,
//! the mapping of core errors to the wire (status, stable code, JSON body), and the background
//! workers an embedding runs beside them: the callback dispatcher and the lifecycle sweeper,
//! behind one [`workers::Workers`] handle that owns them and stops them. It maps HTTP to core
//! calls and core errors to HTTP; the decisions are the core's.
//!
//! Mount [`app()`] (merchant API) and [`operator_app`] over an [`AppState`] in your own axum
//! application, at the root or under a prefix, and start [`workers::Workers`]. The
//! `payments-server` crate is the server around this one: settings, command line, listeners
//! with their connection limits, TLS, telemetry, the data directory and the choice of store.
//!
//! Features: `cabinet` adds the web cabinet's users to the operator API
//! (`/operator/v1/users`, [`operator::users`]); without it no part of the web cabinet is
//! compiled. `sandbox` adds `sandbox::bootstrap`, the sandbox's demo merchant and its
//! credentials. `testing` adds `testing::TestServer`: the routers (and with `cabinet` the web
//! cabinet) and the workers on 127.0.0.1:0 over a temporary SQLite database, what this crate's
//! integration tests run on.
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
//! use payments_providers::sandbox::{FixedRates, SandboxProvider};
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

pub mod admission;
pub mod app;
pub mod appeals;
pub mod balance;
pub mod batch;
pub mod coalescing;
pub mod deadline;
pub mod dispatcher;
pub mod error;
pub mod events;
#[cfg(test)]
mod hanging;
pub mod heartbeat;
mod json;
pub mod measured;
pub mod merchant;
pub mod metrics;
pub mod operator;
pub mod provider_reports;
pub mod providers;
pub mod query;
pub mod request_log;
pub mod resolver;
#[cfg(feature = "sandbox")]
pub mod sandbox;
pub mod scrape;
pub mod state;
pub mod sweeper;
pub mod system;
#[cfg(feature = "testing")]
pub mod testing;
pub mod trace;
pub mod workers;

pub use app::{app, operator_app, serve};

/// What an embedding that mounts the routers names, in one import
/// (`use payments_http::prelude::*;`): the service and its ports from `payments-core`, the
/// state, the workers and the system clock and randomness from here.
pub mod prelude {
    pub use crate::dispatcher::{Dispatcher, DispatcherConfig};
    pub use crate::system::{system_ports, OsRandom, SystemClock};
    pub use crate::workers::Workers;
    pub use crate::{app, operator_app, serve, AppState};
    pub use payments_core::auth::Environment;
    pub use payments_core::payment::{Currency, PaymentMethod};
    pub use payments_core::provider::{
        IssuedRequisites, ProviderOutcome, RateSource, RequisiteProvider, RequisiteRequest,
    };
    pub use payments_core::service::{Actor, AuthConfig, PaymentService, Ports, ServiceConfig};
    pub use payments_core::{async_trait, Decimal};
    pub use payments_directory::{
        Credentials, DirectoryAccess, Provision, ProvisionError, Provisioned,
    };
}
pub use state::{AppState, SharedState};
