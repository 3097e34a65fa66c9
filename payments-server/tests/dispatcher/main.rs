//! Callback delivery against in-process HTTPS receivers on 127.0.0.1, with a certificate made
//! here by a test CA and trusted through `extra_roots`. Receivers push what they got into a
//! channel; the schedule runs on a manual clock and is shortened through configuration.
//!
//! The tests of `server` run the whole server (`TestServer`) with a plain-HTTP receiver: the
//! `callback_dispatch` setting, over real sockets and a restart on the same data dir.

mod addresses;
mod delivery;
mod fairness;
mod schedule;
mod secrets;
mod server;
mod support;
