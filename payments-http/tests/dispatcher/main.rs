//! Callback delivery against in-process HTTPS receivers on 127.0.0.1, with a certificate made
//! here by a test CA and trusted through `extra_roots`. Receivers push what they got into a
//! channel; the schedule runs on a manual clock and is shortened through configuration.
//!
//! The tests of `server` run the routers and workers (`payments_http::testing::TestServer`)
//! with a plain-HTTP receiver: dispatch off (events wait in the outbox) and on, over real
//! sockets and a restart on the same database.

mod addresses;
mod delivery;
mod fairness;
mod schedule;
mod secrets;
mod server;
mod support;
