//! Operations as an on-call engineer meets them: failed callbacks listed, counted and resent in
//! bulk; one server per data dir; `/readyz` when the store cannot write; backups that restore
//! with callbacks held; named operator tokens; the access log and the WARN lines to alert on;
//! `/metrics` behind a token.

mod access_log;
mod at_rest;
mod backup;
mod failed;
mod lock;
mod metrics;
mod migrations;
mod project_cli;
mod readyz;
mod support;
mod tls;
mod tokens;
mod warnings;
