//! The service over the in-memory store, a manual clock, a seeded random source, a
//! deterministic provider and fixed rates: create (idempotency, business rules, provider
//! outcomes and budget), sandbox test payments, the lifecycle sweep and operator operations.

#[path = "../common/mod.rs"]
mod common;

mod appeals;
mod create;
mod ledger;
mod lifecycle;
mod local_provider;
mod notify;
mod operator;
mod ops;
mod provider;
mod provisioning;
mod routing;
mod scans;
mod support;
mod test_mode;
mod wire;
