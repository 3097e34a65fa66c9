//! The store contract suite: the documented semantics of every [`Store`] method, as async
//! checks any adapter runs against itself. [`MemoryStore`](super::MemoryStore) is the reference;
//! `payments-store-sqlite` runs the same suite.
//!
//! Each check takes a fresh, empty store and panics (with a message) on a violation. The checks
//! are executor-agnostic: they only await the store, so `futures_executor::block_on` drives the
//! memory store and a tokio runtime drives adapters that need one. [`run_all`] takes a function
//! that makes a store; [`run_all_async`] one that returns a future of it, for stores whose
//! setup awaits. [`checks`] lists the checks for adapters that run them one by one.
//!
//! A store that also implements the web cabinet's port (`payments_cabinet::store::CabinetStore`)
//! runs that crate's contract too (`payments_cabinet::testing::contract`, feature `testing`).
//! The [`shared_checks`] race several handles on one database (concurrent claims, a stale lease
//! token, concurrent identical creates); [`run_all`] runs them with one store as every handle,
//! and an adapter with separate handles (connection pools, nodes) runs them with
//! [`run_shared_async`] too.
//!
//! An adapter's upgrade test runs [`every_statement`] before and after a later build's
//! migration changes the schema under a running store.
//!
//! A store wrapper (a decorator that measures, logs or traces) runs [`check_wrapper`]: it must
//! forward every method, provided ones included, and keep the wrapped store's readiness. [`Layered`](crate::store::Layered) is a wrapper that does.

use std::future::Future;
use std::pin::Pin;
use std::str::FromStr;
use std::time::Duration;

use futures_util::future::join_all;
use rust_decimal::Decimal;
use uuid::Uuid;

use crate::amount::Amount;
use crate::auth::Scope;
use crate::bank::CountryCode;
use crate::callback::address::AddressPolicy;
use crate::callback::destination::CallbackUrl;
use crate::clock::Timestamp;
use crate::event::{
    CallbackEvent, DeliveryAttempt, DeliveryState, EventKind, EventRecord, OutboxEvent,
};
use crate::ids::{EventId, KeyId, MerchantId, PaymentId, ProjectId, TokenId};
use crate::payment::{
    Currency, Flow, MerchantPaymentId, Payment, PaymentErrorCode, PaymentFailure, PaymentMethod,
    PaymentStatus, Requisites,
};
use crate::project::{
    AuditRecord, Contract, KeyRecord, Merchant, MethodTerms, Project, RateLimit, SecretRecord,
    TokenRecord,
};
use crate::settlement::{Course, FeePercent, Pricing};
use crate::store::{
    purge_all, AdmitOutcome, AttemptRecorded, AuthLookup, ClaimedEvent, InsertOutcome, NonceUse,
    PaymentChange, Retained, Store, StoreError, NONCE_PURGE_BATCH,
};

/// 2026-10-01T00:00:00Z: the fixed "now" of the suite.
pub const T0: Timestamp = Timestamp::from_unix_millis(1_790_812_800_000);

/// A boxed check future borrowing the store.
pub type CheckFuture<'a> = Pin<Box<dyn Future<Output = ()> + 'a>>;

/// A named check of the suite.
pub type Check<S> = (&'static str, for<'a> fn(&'a S) -> CheckFuture<'a>);

/// Every check of the suite with its name, in a stable order.
pub fn checks<S: Store>() -> Vec<Check<S>> {
    vec![
        ("insert_and_duplicate", |s| {
            Box::pin(insert_and_duplicate(s))
        }),
        ("payment_round_trip", |s| Box::pin(payment_round_trip(s))),
        ("concurrent_inserts", |s| Box::pin(concurrent_inserts(s))),
        ("commit_change", |s| Box::pin(commit_change(s))),
        ("conflict_writes_nothing", |s| {
            Box::pin(conflict_writes_nothing(s))
        }),
        ("status_history", |s| Box::pin(status_history(s))),
        ("due_payments", |s| Box::pin(due_payments(s))),
        ("backlog_by_status", |s| Box::pin(backlog_by_status(s))),
        ("nonces", |s| Box::pin(nonces(s))),
        ("admit_create", |s| Box::pin(admit_create(s))),
        ("admit_create_matches_the_generic_path", |s| {
            Box::pin(admit_create_matches_the_generic_path(s))
        }),
        ("single_writes_match_the_generic_path", |s| {
            Box::pin(single_writes_match_the_generic_path(s))
        }),
        ("transact_is_all_or_nothing", |s| {
            Box::pin(transact_is_all_or_nothing(s))
        }),
        ("concurrent_nonces", |s| Box::pin(concurrent_nonces(s))),
        ("commit_change_once", |s| Box::pin(commit_change_once(s))),
        ("outbox_claim_and_lease", |s| {
            Box::pin(outbox_claim_and_lease(s))
        }),
        ("outbox_attempts", |s| Box::pin(outbox_attempts(s))),
        ("outbox_claim_skipping_projects", |s| {
            Box::pin(outbox_claim_skipping_projects(s))
        }),
        ("merchants_and_projects", |s| {
            Box::pin(merchants_and_projects(s))
        }),
        ("tokens", |s| Box::pin(tokens(s))),
        ("token_names_and_expiry", |s| {
            Box::pin(token_names_and_expiry(s))
        }),
        ("keys", |s| Box::pin(keys(s))),
        ("key_owners", |s| Box::pin(key_owners(s))),
        ("auth_lookups", |s| Box::pin(auth_lookups(s))),
        ("callback_secrets", |s| Box::pin(callback_secrets(s))),
        ("settings", |s| Box::pin(settings(s))),
        ("settings_with_prefix", |s| {
            Box::pin(settings_with_prefix(s))
        }),
        ("audit", |s| Box::pin(audit(s))),
        ("status_counts_follow_changes", |s| {
            Box::pin(status_counts_follow_changes(s))
        }),
        ("oldest_due_and_pending", |s| {
            Box::pin(oldest_due_and_pending(s))
        }),
        ("failed_events_and_resend", |s| {
            Box::pin(failed_events_and_resend(s))
        }),
        ("retention_purges", |s| Box::pin(retention_purges(s))),
        ("operator_tokens", |s| Box::pin(operator_tokens(s))),
        ("writable", |s| Box::pin(writable(s))),
        ("token_use", |s| Box::pin(token_use(s))),
        ("payment_listing", |s| Box::pin(payment_listing(s))),
        ("event_listing", |s| Box::pin(event_listing(s))),
        ("payment_pages", |s| Box::pin(payment_pages(s))),
        ("amount_pages", |s| Box::pin(amount_pages(s))),
        ("payment_union", |s| Box::pin(payment_union(s))),
        ("search_keys", |s| Box::pin(search_keys(s))),
        ("card_numbers", |s| Box::pin(card_numbers(s))),
        ("payment_totals", |s| Box::pin(payment_totals(s))),
        ("concurrent_payment_pages", |s| {
            Box::pin(concurrent_payment_pages(s))
        }),
        ("ledger_follows_payment_changes", |s| {
            Box::pin(ledger_follows_payment_changes(s))
        }),
        ("payouts_and_adjustments", |s| {
            Box::pin(payouts_and_adjustments(s))
        }),
        ("entry_pages_and_totals", |s| {
            Box::pin(entry_pages_and_totals(s))
        }),
        ("a_credit_beyond_the_bound_is_refused", |s| {
            Box::pin(a_credit_beyond_the_bound_is_refused(s))
        }),
        ("ledger_append_is_all_or_nothing", |s| {
            Box::pin(ledger_append_is_all_or_nothing(s))
        }),
        ("request_log_round_trip_and_order", |s| {
            Box::pin(request_log_round_trip_and_order(s))
        }),
        ("request_log_filters", |s| Box::pin(request_log_filters(s))),
        ("request_log_keeps_the_newest", |s| {
            Box::pin(request_log_keeps_the_newest(s))
        }),
        ("request_log_purge_by_age", |s| {
            Box::pin(request_log_purge_by_age(s))
        }),
        ("appeals_insert_and_bounds", |s| {
            Box::pin(appeals_insert_and_bounds(s))
        }),
        ("appeal_pages", |s| Box::pin(appeal_pages(s))),
        ("commit_appeal_is_all_or_nothing", |s| {
            Box::pin(commit_appeal_is_all_or_nothing(s))
        }),
    ]
}

/// A boxed check future borrowing several handles on one database.
pub type SharedCheckFuture<'a> = Pin<Box<dyn Future<Output = ()> + 'a>>;

/// A named check over several handles on one fresh database (separate connection pools, or
/// the same store several times for a store with one handle): the checks of races between
/// nodes.
pub type SharedCheck<S> = (
    &'static str,
    for<'a> fn(&'a [&'a S]) -> SharedCheckFuture<'a>,
);

/// The checks over several handles, in a stable order. [`run_all`] runs them with one store
/// as every handle; an adapter whose handles are separate (pools, processes) also runs them
/// with [`run_shared_async`].
pub fn shared_checks<S: Store>() -> Vec<SharedCheck<S>> {
    vec![
        ("concurrent_claims", |h| Box::pin(concurrent_claims(h))),
        ("stale_lease_token", |h| Box::pin(stale_lease_token(h))),
        ("concurrent_identical_creates", |h| {
            Box::pin(concurrent_identical_creates(h))
        }),
        ("concurrent_resends", |h| Box::pin(concurrent_resends(h))),
        ("directory_changes_reach_every_handle", |h| {
            Box::pin(directory_changes_reach_every_handle(h))
        }),
        ("concurrent_payouts", |h| Box::pin(concurrent_payouts(h))),
        ("concurrent_credits", |h| Box::pin(concurrent_credits(h))),
        ("settings_reach_every_handle", |h| {
            Box::pin(settings_reach_every_handle(h))
        }),
        ("concurrent_appeals", |h| Box::pin(concurrent_appeals(h))),
    ]
}

/// Runs every shared check against the handles `make` returns, all on one fresh, empty
/// database per check (at least one handle).
pub async fn run_shared_async<S, F, Fut>(make: F)
where
    S: Store,
    F: Fn() -> Fut,
    Fut: Future<Output = Vec<S>>,
{
    for (name, check) in shared_checks::<S>() {
        let handles = make().await;
        assert!(!handles.is_empty(), "run_shared_async needs a handle");
        let refs: Vec<&S> = handles.iter().collect();
        println!("store contract (shared, {} handles): {name}", refs.len());
        check(&refs).await;
    }
}

/// Runs every check, each against a fresh store from `make`.
///
/// For a store whose setup awaits (a connection pool, migrations), use [`run_all_async`].
pub async fn run_all<S: Store>(make: impl Fn() -> S) {
    run_all_async(|| std::future::ready(make())).await;
}

/// Runs every check, each against a fresh store that the future from `make` sets up: for
/// stores that connect, migrate or open files asynchronously (or on a blocking pool).
///
/// ```
/// use payments_core::testing::{contract, MemoryStore};
///
/// futures_executor::block_on(contract::run_all_async(|| async {
///     // A real adapter would connect and migrate here.
///     MemoryStore::new()
/// }));
/// ```
pub async fn run_all_async<S, F, Fut>(make: F)
where
    S: Store,
    F: Fn() -> Fut,
    Fut: Future<Output = S>,
{
    for (name, check) in checks::<S>() {
        let store = make().await;
        // A failing check panics; the name printed first says which one.
        println!("store contract: {name}");
        check(&store).await;
    }
    for (name, check) in shared_checks::<S>() {
        let store = make().await;
        println!("store contract: {name} (one handle three times)");
        check(&[&store, &store, &store]).await;
    }
}

mod appeals;
mod data;
mod directory;
mod ledger;
mod listing;
mod operations;
mod outbox;
mod payments;
mod ratelimit;
mod request_log;
mod upgrade;
mod wrapper;

pub use appeals::*;
pub use data::*;
pub use directory::*;
pub use ledger::*;
pub use listing::*;
pub use operations::*;
pub use outbox::*;
pub use payments::*;
pub use ratelimit::*;
pub use request_log::*;
pub use upgrade::*;
pub use wrapper::*;

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testing::MemoryStore;

    #[test]
    fn the_memory_store_meets_the_contract() {
        futures_executor::block_on(run_all(MemoryStore::new));
    }

    #[test]
    fn the_local_rate_limiter_meets_the_contract() {
        let limiter = crate::ratelimit::LocalRateLimiter::new();
        futures_executor::block_on(rate_limiter(&[&limiter, &limiter, &limiter]));
    }
}
