//! The upstream adapters over real sockets against a real local upstream (axum on
//! 127.0.0.1:0): the HTTP requisite provider, the live rate source, provider notifications,
//! appeals (sent to the upstream and answered by it), and `payments-server serve
//! --environment production` with all three.

mod appeal;
mod appeal_api;
mod notify;
mod production;
mod provider;
mod rates;
mod support;
