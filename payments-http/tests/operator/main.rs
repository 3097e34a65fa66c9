//! The operator API over real sockets (`payments_http::testing::TestServer`): each
//! provisioning function and payment operation, immediate revocation of tokens and keys, the
//! allow-list on the next request, a token shown once, `invalid_transition`, operator
//! authentication. The `payments-server` commands have their tests in that crate
//! (`payments-server/tests/operator_cli.rs`).

#[path = "../common/mod.rs"]
mod common;

mod access;
mod credentials;
mod ledger;
mod payments;
mod provisioning;
mod support;
