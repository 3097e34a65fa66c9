//! The payment service embedded in an application of its own: its own requisite provider and
//! exchange rate, SQLite in a directory, the merchant API under `/payments` beside the
//! application's own page, the callback dispatcher and the lifecycle sweeper, and the first
//! merchant provisioned on the first start (its credentials printed that once).
//!
//! ```sh
//! cargo run -p payments-examples --example embed -- path/to/data/dir
//! ```
//!
//! It needs `payments-core`, `payments-http`, `payments-store-sqlite`, axum and tokio. What
//! proves that it works (a signed create through `/payments`, a verified callback) is its test,
//! `examples/tests/embed.rs`; docs/embedding.md walks through it.

use std::{error::Error, path::Path, sync::Arc};

use axum::{routing::get, Router};
use payments_http::prelude::*;
use payments_store_sqlite::SqliteStore;

/// The application's own requisites (a card of its pool; a real one asks a bank) and rate.
struct Own;

#[async_trait]
impl RequisiteProvider for Own {
    async fn issue(&self, _: &RequisiteRequest) -> ProviderOutcome {
        ProviderOutcome::Issued(IssuedRequisites::new("2200700000000017", "EMBEDDER LLC"))
    }
}

#[async_trait]
impl RateSource for Own {
    async fn course(&self, currency: Currency) -> Option<Decimal> {
        (currency == Currency::RUB).then(|| Decimal::new(9550, 2)) // 95.50 RUB per USDT
    }
}

/// The application, its database in `dir`: its router, the running dispatcher and sweeper,
/// the service's state and the first merchant (credentials on the first start only).
pub async fn application(dir: &Path, config: ServiceConfig) -> Result<App, Box<dyn Error>> {
    let store = SqliteStore::open(dir.join("payments.db"), Default::default())?;
    let ports = system_ports(Arc::new(store), Arc::new(Own), Arc::new(Own));
    let service = PaymentService::new(ports, config, Environment::Production.into());
    // The first merchant, on the first start; the database is production's from now on.
    let (merchant, system) = (Provision::new("My shop", "Web"), Actor::system());
    let first = service.directory().provision(&merchant, &system).await?;
    let state = AppState::new(service, "http"); // the scheme clients sign: "https" behind TLS
    let shop = Router::new().route("/", get(|| async { "my shop" }));
    let router = shop.nest("/payments", app(state.clone()));
    Ok((router, Workers::for_state(&state)?, state, first))
}

/// What [`application`] answers.
pub type App = (Router, Workers, AppState, Provisioned);

#[tokio::main]
async fn main() -> Result<(), Box<dyn Error>> {
    let dir = std::env::args().nth(1).unwrap_or_else(|| ".".into());
    let (router, workers, _, first) = application(Path::new(&dir), Default::default()).await?;
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await?;
    let credentials = first.credentials.map(|c| c.to_json()).unwrap_or_default();
    println!("http://{}/payments {credentials:#}", listener.local_addr()?);
    serve(listener, router, tokio::signal::ctrl_c()).await?;
    workers.stop().await;
    Ok(())
}
