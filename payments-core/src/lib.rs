//! The payment-acceptance domain as a library: payments and their state machine, settlement in
//! USDT, create-request parsing, the bank catalog, request authentication (RFC 9421 Ed25519
//! signatures, tokens, nonces, IP allow-lists) and signed callbacks.
//!
//! This crate performs no I/O. Time, randomness, storage, requisite providers and exchange rates
//! come in through the traits of [`clock`], [`random`], [`store`] and [`provider`]; the adapters (`payments-store-sqlite`,
//! `payments-http`) carry out what the core decides.
//!
//! # Where things are
//!
//! - [`request::CreatePayment::parse`] turns a `POST /api/v1/payments` body into a valid
//!   request (defaults applied) or a `400 bad_request` naming the field.
//! - [`settlement::Settlement::compute`] is `merchant_information`: exact, truncating, never
//!   rounded up.
//! - [`transition::apply`] is the one function that changes a payment's status; it returns the
//!   callback event to queue with the change.
//! - [`auth`] verifies signed requests; [`callback`] signs, verifies and addresses callbacks.
//! - [`service::PaymentService`] orchestrates all of it over the [`store::Store`] port; every
//!   [`ApiError`] maps to exactly one HTTP status and stable code ([`ErrorCode`]).
//! - The `testing` feature adds an in-memory store, a manual clock, proptest strategies,
//!   fixtures and the store contract suite (`testing::contract`) every store adapter runs.
//!
//! # Example
//!
//! A create body parsed, its settlement at course 100 and fee 11 % (the worked example of
//! `docs/api.md`), and the payment taken through `created -> processing -> completed`, which
//! queues a callback event:
//!
//! ```
//! # fn main() -> Result<(), Box<dyn std::error::Error>> {
//! use std::time::Duration;
//!
//! use payments_core::callback::address::AddressPolicy;
//! use payments_core::payment::{Flow, Payment, PaymentStatus, Requisites};
//! use payments_core::request::CreatePayment;
//! use payments_core::settlement::{Course, FeePercent, Pricing, Settlement};
//! use payments_core::transition::{self, Trigger};
//! use payments_core::{PaymentId, RandomSource, Timestamp};
//! use rust_decimal::Decimal;
//!
//! // The adapter injects randomness (the OS generator in production).
//! struct Counter(std::sync::atomic::AtomicU8);
//! impl RandomSource for Counter {
//!     fn fill(&self, buf: &mut [u8]) {
//!         let n = self.0.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
//!         buf.fill(n);
//!     }
//! }
//! let rng = Counter(Default::default());
//!
//! // 1. Parse: defaults applied, the amount read exactly.
//! let body = br#"{"merchant_payment_id":"order-1001","amount":"3400","payment_method":"sbp"}"#;
//! let request = CreatePayment::parse(body, AddressPolicy::STRICT)?;
//! assert_eq!((request.currency.as_str(), request.geo_code.as_str()), ("RUB", "RU"));
//! let refused = CreatePayment::parse(br#"{"amount":"1"}"#, AddressPolicy::STRICT).unwrap_err();
//! assert_eq!(refused.to_string(), "merchant_payment_id: is required"); // 400 bad_request
//!
//! // 2. Settle: course and fee are fixed when the requisites are issued.
//! let pricing = Pricing {
//!     course: Course::new(Decimal::from(100))?,
//!     fee_percent: FeePercent::new(Decimal::from(11))?,
//! };
//! let settlement = Settlement::compute(&request.amount, &pricing);
//! assert_eq!(settlement.amount_usdt.to_string(), "34.0000");
//! assert_eq!(settlement.amount_usdt_rate.to_string(), "30.2600");
//!
//! // 3. The payment the request makes (the service builds it the same way) ...
//! let created_at = Timestamp::from_unix_secs(1_790_856_000); // 2026-10-01T12:00:00Z
//! let payment = Payment {
//!     id: PaymentId::generate_ordered(created_at, &rng),
//!     project_id: "7a1e2b3c-4d5e-4f60-8a9b-0c1d2e3f4a5b".parse()?,
//!     merchant_payment_id: request.merchant_payment_id.clone(),
//!     flow: Flow::RuntimeLive,
//!     status: PaymentStatus::Created,
//!     amount: request.amount,
//!     initial_amount: request.amount,
//!     currency: request.currency,
//!     geo_code: request.geo_code,
//!     payment_method: request.payment_method,
//!     is_intrabank: request.is_intrabank,
//!     bank_code: None,
//!     callback_url: request.callback_url.clone(),
//!     requisites: None,
//!     pricing: None,
//!     failure: None,
//!     appeal_from: None,
//!     created_at,
//!     updated_at: created_at,
//!     expires_at: created_at + Duration::from_secs(15 * 60),
//!     version: 1,
//!     fingerprint: request.fingerprint(None),
//!     metadata: request.metadata.clone(),
//!     route: None,
//! };
//!
//! // ... and two transitions. `apply` never mutates: it returns the next payment.
//! let issued = transition::apply(
//!     &payment,
//!     Trigger::RequisitesIssued {
//!         requisites: Requisites {
//!             requisite: "+79000000001".into(),
//!             holder_name: "Мария Алексеевна К.".into(),
//!             bank: Some("Т-Банк".into()),
//!             qrcode_link: None,
//!             deeplink_url: None,
//!         },
//!         pricing,
//!     },
//!     created_at + Duration::from_secs(2),
//!     &rng,
//! )?;
//! assert_eq!(issued.payment.status, PaymentStatus::Processing);
//! assert!(issued.event.is_none(), "no callback for processing");
//! assert_eq!(issued.payment.merchant_information(), Some(settlement));
//!
//! let paid = transition::apply(
//!     &issued.payment,
//!     Trigger::Confirm { amount: None },
//!     created_at + Duration::from_secs(60),
//!     &rng,
//! )?;
//! assert_eq!(paid.payment.status, PaymentStatus::Completed);
//! let event = paid.event.expect("a live payment that completes gets a callback");
//! let callback: serde_json::Value = serde_json::from_slice(&event.body)?;
//! assert_eq!(callback["status"], "completed");
//! assert_eq!(callback["merchant_payment_id"], "order-1001");
//!
//! // An illegal trigger is an error, never a panic.
//! assert!(transition::apply(&paid.payment, Trigger::Expire, created_at, &rng).is_err());
//! # Ok(())
//! # }
//! ```
#![forbid(unsafe_code)]
#![cfg_attr(docsrs, feature(doc_cfg))]
#![deny(missing_docs)]

pub mod auth;
pub mod bank;
pub mod callback;
pub mod clock;
pub mod error;
pub mod ids;
pub mod ledger;
pub mod random;
pub mod ratelimit;
pub mod secret;

pub use clock::{Clock, Timestamp};
pub use error::{ApiError, ErrorCode};
pub use ids::{
    EntryId, EventId, KeyId, MerchantId, PaymentId, ProjectId, SessionId, TokenId, UserId,
};
pub use random::RandomSource;
pub use secret::{Secret, SecretString};

/// The attribute the port traits are written with (`#[async_trait]` on an `impl` of
/// [`store::Store`], [`provider::RequisiteProvider`], ...): re-exported so that an embedder
/// implements them without adding `async-trait` to its own dependencies.
pub use async_trait::async_trait;
/// The decimal type of amounts, courses and fees ([`provider::RateSource`] answers one):
/// re-exported so that an embedder needs no `rust_decimal` dependency of its own.
pub use rust_decimal::Decimal;
pub mod amount;
pub mod appeal;
pub mod event;
pub mod history;
pub mod payer;
pub mod payment;
#[cfg(feature = "planted-bugs")]
pub mod planted;
pub mod project;
pub mod provider;
pub mod receipt;
pub mod request;
pub mod request_log;
pub mod sealing;
pub mod service;
pub mod settings;
pub mod settlement;
pub mod store;
#[cfg(any(test, feature = "testing"))]
#[cfg_attr(docsrs, doc(cfg(feature = "testing")))]
pub mod testing;
pub mod text;
pub mod totals;
pub mod transition;
