//! The merchant web cabinet: sign-in with a password and a TOTP code (forced enrolment, replay
//! protection, recovery codes, throttling, store-backed sessions), Projects and API ->
//! project -> External API access (tokens, keys, IP allow-list, callback URL and secret),
//! payments with the sandbox's Paid / Canceled buttons and support's operations, the project's
//! balance with statements and streamed CSV exports (`web::export`), callback deliveries, the
//! security page and the audit log.
//!
//! It is one more adapter over `payments-core`: every payment, project and credential change
//! is a [`PaymentService`](payments_core::service::PaymentService) operation, the same the
//! operator API calls. The cabinet's own rules (users, sign-in, sessions, throttling) are in
//! `accounts`, over ports only: the cabinet's own store ([`store::CabinetStore`], the port
//! this crate defines and a store implements), the core's store, the clock and the random
//! source.
//!
//! `web::router` serves the pages: server-rendered HTML that works without JavaScript,
//! templates checked at compile time (askama), the stylesheet embedded; and the hosted payer
//! page of a payment (`/pay/{token}`, `web::payer`).
//!
//! Features: `web` (on by default) is the cabinet itself (accounts, pages, password hashing,
//! TOTP). Without it the crate is [`store`] alone, the port and its records, which is all a
//! store needs: the bundled SQLite and PostgreSQL stores depend on it so, and compile no web
//! framework. `testing` adds `testing`: the port's contract suite and a store in memory.
#![forbid(unsafe_code)]
#![deny(missing_docs)]

#[cfg(feature = "web")]
pub mod accounts;
mod links;
#[cfg(feature = "web")]
pub mod secrets;
pub mod store;
#[cfg(feature = "testing")]
pub mod testing;
#[cfg(feature = "web")]
pub mod web;

#[cfg(feature = "web")]
pub use accounts::{Cabinet, CabinetConfig, Client, Purged};
pub use links::payer_page_url;
#[cfg(feature = "web")]
pub use web::{router, CabinetState};
