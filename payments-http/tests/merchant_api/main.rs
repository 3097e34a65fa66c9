//! The merchant API over real sockets: `payments_http::testing::TestServer` (the routers and
//! workers on 127.0.0.1:0) with a fresh SQLite database per test, requests signed by the core's
//! signer. The server as run (its binary, TLS) is tested in `payments-server/tests/server.rs`.

mod creates;
mod events;
mod list;
mod metadata;
mod reads;
mod refusals;
mod request_log;
mod support;
