//! [`CabinetState`]: what the router's handlers share (the cabinet, how it is served), and the
//! session cookie it sets.

use std::sync::Arc;

use axum::http::header::HeaderValue;

use super::views::Chrome;
use crate::accounts::{Cabinet, Current};

/// The session cookie's name over TLS: `__Host-` pins it to this host, path `/`, `Secure`.
pub const SECURE_COOKIE: &str = "__Host-cabinet";
/// The session cookie's name over plain HTTP (local development): browsers refuse a
/// `__Host-` cookie without `Secure`, and `Secure` cookies need TLS.
pub const PLAIN_COOKIE: &str = "cabinet";

/// What the router needs: the cabinet and how it is served.
#[derive(Debug, Clone)]
pub struct CabinetState {
    /// The cabinet over the payment service.
    pub cabinet: Cabinet,
    /// Served over TLS: the cookie is `__Host-` and `Secure`.
    pub tls: bool,
    /// The cabinet's public origin (`https://cabinet.example`), when it is behind a proxy
    /// that changes `Host`; state changes must come from it. Default: the request's own
    /// origin (scheme and `Host`).
    pub public_origin: Option<String>,
    /// The product name in titles.
    pub product: Arc<str>,
    /// How long a form's body may take to arrive after its headers (10 s): a slower one is
    /// answered `408` and its connection closed, so that trickled bodies cannot hold the
    /// cabinet's (and the payer pages') connections.
    pub body_timeout: std::time::Duration,
    /// The payer page status poll's limits per source and per link (the core's rule), shared
    /// by every clone of the state.
    pub payer_status_limits: Arc<super::poll_limits::StatusPollLimits>,
    /// The payer page's "I paid" forms per source (the core's rule), shared by every clone of
    /// the state.
    pub payer_appeal_limits: Arc<super::poll_limits::BoundedRateLimiter>,
}

impl CabinetState {
    /// State serving `cabinet`; `tls` as the listener is.
    pub fn new(cabinet: Cabinet, tls: bool) -> Self {
        CabinetState {
            cabinet,
            tls,
            public_origin: None,
            product: Arc::from("Payments"),
            body_timeout: std::time::Duration::from_secs(10),
            payer_status_limits: Arc::default(),
            payer_appeal_limits: Arc::new(super::poll_limits::BoundedRateLimiter::appeal_forms()),
        }
    }

    pub(crate) fn cookie_name(&self) -> &'static str {
        if self.tls {
            SECURE_COOKIE
        } else {
            PLAIN_COOKIE
        }
    }

    /// A `Set-Cookie` value carrying a session.
    pub(crate) fn set_cookie(&self, value: &str) -> HeaderValue {
        let secure = if self.tls { "; Secure" } else { "" };
        HeaderValue::from_str(&format!(
            "{}={value}; Path=/; HttpOnly; SameSite=Strict{secure}",
            self.cookie_name()
        ))
        .expect("the cookie value is base64url")
    }

    /// A `Set-Cookie` value deleting the session cookie.
    pub(crate) fn clear_cookie(&self) -> HeaderValue {
        let secure = if self.tls { "; Secure" } else { "" };
        HeaderValue::from_str(&format!(
            "{}=; Path=/; HttpOnly; SameSite=Strict; Max-Age=0{secure}",
            self.cookie_name()
        ))
        .expect("a constant cookie")
    }

    pub(crate) fn chrome(&self, title: impl Into<String>, current: Option<&Current>) -> Chrome {
        Chrome::new(
            title.into(),
            &self.product,
            self.cabinet.service().auth_config().environment
                == payments_core::auth::Environment::Sandbox,
            current,
        )
    }
}
