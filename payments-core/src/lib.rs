//! The payment-acceptance domain as a library: payments and their state machine, settlement in
//! USDT, create-request parsing, the bank catalog, request authentication (RFC 9421 Ed25519
//! signatures, tokens, nonces, IP allow-lists) and signed callbacks.
//!
//! This crate performs no I/O. Time, randomness, storage, requisite providers and exchange rates
//! come in through the traits of [`clock`], [`random`], [`store`] and [`provider`]; the adapters (`payments-store-sqlite`,
//! `payments-http`) carry out what the core decides.
#![forbid(unsafe_code)]
#![deny(missing_docs)]

pub mod auth;
pub mod bank;
pub mod callback;
pub mod clock;
pub mod error;
pub mod ids;
pub mod random;
pub mod secret;

pub use clock::{Clock, Timestamp};
pub use error::{ApiError, ErrorCode};
pub use ids::{EventId, KeyId, MerchantId, PaymentId, ProjectId, TokenId};
pub use random::RandomSource;
pub use secret::{Secret, SecretString};
pub mod amount;
pub mod event;
pub mod payment;
pub mod project;
pub mod provider;
pub mod request;
pub mod service;
pub mod settlement;
pub mod store;
#[cfg(any(test, feature = "testing"))]
pub mod testing;
pub mod transition;
