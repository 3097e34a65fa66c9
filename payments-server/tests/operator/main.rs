//! The operator API and CLI over real sockets: each provisioning function and payment
//! operation, immediate revocation of tokens and keys, the allow-list on the next request, a
//! token shown once, `invalid_transition`, operator authentication, and a second project
//! provisioned from scratch with the `payments-server` commands.

#[path = "../common/mod.rs"]
mod common;

mod access;
mod cli;
mod credentials;
mod ledger;
mod payments;
mod provisioning;
mod support;
