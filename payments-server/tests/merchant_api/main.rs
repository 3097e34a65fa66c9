//! The merchant API over real sockets: the real server on 127.0.0.1:0 with a fresh SQLite data
//! dir per test, requests signed by the core's signer.

mod creates;
mod events;
mod list;
mod metadata;
mod reads;
mod refusals;
mod request_log;
mod server;
mod support;
