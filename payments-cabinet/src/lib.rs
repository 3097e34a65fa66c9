//! The merchant web cabinet: sign-in with a password and a TOTP code (forced enrolment, replay
//! protection, recovery codes, throttling, store-backed sessions), Projects and API ->
//! project -> External API access (tokens, keys, IP allow-list, callback URL and secret),
//! payments with the sandbox's Paid / Canceled buttons and support's operations, callback
//! deliveries, the security page and the audit log.
//!
//! It is one more adapter over `payments-core`: every payment, project and credential change
//! is a [`PaymentService`](payments_core::service::PaymentService) operation, the same the
//! operator API calls. The cabinet's own rules (users, sign-in, sessions, throttling) are in
//! [`accounts`], over the core's ports only: the store's
//! [`CabinetStore`](payments_core::cabinet::CabinetStore), the clock and the random source.
//!
//! [`web::router`] serves the pages: server-rendered HTML that works without JavaScript,
//! templates checked at compile time (askama), the stylesheet embedded; and the hosted payer
//! page of a payment (`/pay/{token}`, [`web::payer`]).
#![forbid(unsafe_code)]
#![deny(missing_docs)]

pub mod accounts;
pub mod secrets;
pub mod web;

pub use accounts::{Cabinet, CabinetConfig, Client};
pub use web::payer::payer_page_url;
pub use web::{router, CabinetState};
