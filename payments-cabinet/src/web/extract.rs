//! What a handler takes from its request: the client, the session (a signed-in user or a half
//! one), the form; and the session cookie set on or cleared from its answer.

use std::net::SocketAddr;

use axum::body::Bytes;
use axum::extract::{ConnectInfo, FromRequest, FromRequestParts, Request};
use axum::http::header::{self, HeaderMap, HeaderValue};
use axum::http::request::Parts;
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};

use super::i18n::tr;
use super::page::{error_page, see_other};
use super::state::CabinetState;
use crate::accounts::{Client, Current};
use crate::store::SessionStage;

/// The client of a request: its address (through the service's trusted proxies) and browser.
impl<S: Send + Sync> FromRequestParts<S> for Client
where
    CabinetState: axum::extract::FromRef<S>,
{
    type Rejection = std::convert::Infallible;

    async fn from_request_parts(parts: &mut Parts, state: &S) -> Result<Self, Self::Rejection> {
        let st = <CabinetState as axum::extract::FromRef<S>>::from_ref(state);
        let peer = parts
            .extensions
            .get::<ConnectInfo<SocketAddr>>()
            .map(|c| c.0.ip());
        let xff: Vec<&str> = parts
            .headers
            .get_all("x-forwarded-for")
            .iter()
            .filter_map(|v| v.to_str().ok())
            .collect();
        let proxies = &st.cabinet.service().auth_config().trusted_proxies;
        let address = peer.and_then(|p| payments_core::auth::client_ip(p, &xff, proxies).ok());
        let user_agent = parts
            .headers
            .get(header::USER_AGENT)
            .and_then(|v| v.to_str().ok())
            .map(|ua| ua.chars().take(160).collect());
        Ok(Client {
            address,
            user_agent,
        })
    }
}

/// The session cookie's value, if the request has one.
pub(crate) fn session_cookie(st: &CabinetState, headers: &HeaderMap) -> Option<String> {
    cookie(headers, st.cookie_name()).filter(|v| v.len() <= 128)
}

/// The value of the request's cookie `name`, when it has one that is not empty.
pub(crate) fn cookie(headers: &HeaderMap, name: &str) -> Option<String> {
    headers
        .get_all(header::COOKIE)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .flat_map(|v| v.split(';'))
        .filter_map(|pair| pair.trim().split_once('='))
        .find(|(n, _)| *n == name)
        .map(|(_, v)| v.to_string())
        .filter(|v| !v.is_empty())
}

/// A fully signed-in user (password and second factor). Without one, pages redirect to
/// sign-in (or to the second step of a half session).
#[derive(Debug, Clone)]
pub(crate) struct Signed {
    pub(crate) current: Current,
    pub(crate) cookie: String,
}

/// A user past the password step only (the code and enrolment pages).
#[derive(Debug, Clone)]
pub(crate) struct Half {
    pub(crate) current: Current,
    pub(crate) cookie: String,
}

/// The request's session and user, if any; the request's pages then show times in the user's
/// time zone.
async fn session_of(
    parts: &Parts,
    st: &CabinetState,
) -> Result<Option<(Current, String)>, Response> {
    let Some(cookie) = session_cookie(st, &parts.headers) else {
        return Ok(None);
    };
    match st.cabinet.sessions().current(&cookie).await {
        Ok(found) => {
            if let Some(c) = &found {
                super::i18n::set_zone(c.user.time_zone.as_deref());
            }
            Ok(found.map(|c| (c, cookie)))
        }
        Err(e) => Err(error_page(e, st)),
    }
}

impl FromRequestParts<CabinetState> for Signed {
    type Rejection = Response;

    async fn from_request_parts(
        parts: &mut Parts,
        st: &CabinetState,
    ) -> Result<Self, Self::Rejection> {
        match session_of(parts, st).await? {
            Some((current, cookie)) if current.session.stage == SessionStage::Full => {
                Ok(Signed { current, cookie })
            }
            Some((current, _)) => Err(see_other(second_step_path(&current))),
            None => Err(see_other("/sign-in")),
        }
    }
}

impl axum::extract::OptionalFromRequestParts<CabinetState> for Signed {
    type Rejection = Response;

    async fn from_request_parts(
        parts: &mut Parts,
        st: &CabinetState,
    ) -> Result<Option<Self>, Self::Rejection> {
        Ok(match session_of(parts, st).await? {
            Some((current, cookie)) if current.session.stage == SessionStage::Full => {
                Some(Signed { current, cookie })
            }
            _ => None,
        })
    }
}

impl FromRequestParts<CabinetState> for Half {
    type Rejection = Response;

    async fn from_request_parts(
        parts: &mut Parts,
        st: &CabinetState,
    ) -> Result<Self, Self::Rejection> {
        match session_of(parts, st).await? {
            Some((current, cookie)) if current.session.stage == SessionStage::Password => {
                Ok(Half { current, cookie })
            }
            Some(_) => Err(see_other("/")),
            None => Err(see_other("/sign-in")),
        }
    }
}

/// Where a half-signed-in user goes next: enrolment without a confirmed key, else the code.
pub(crate) fn second_step_path(current: &Current) -> &'static str {
    if current.user.totp_confirmed_at.is_some() {
        "/sign-in/code"
    } else {
        "/sign-in/enrol"
    }
}

/// A submitted form (`application/x-www-form-urlencoded`), every field in order; repeated
/// fields (checkboxes) are kept.
#[derive(Debug, Clone, Default)]
pub(crate) struct FormData(Vec<(String, String)>);

impl FormData {
    /// The first value of `name`, or empty.
    pub(crate) fn get(&self, name: &str) -> &str {
        self.0
            .iter()
            .find(|(n, _)| n == name)
            .map_or("", |(_, v)| v.as_str())
    }

    /// Every value of `name`.
    pub(crate) fn all(&self, name: &str) -> Vec<&str> {
        self.0
            .iter()
            .filter(|(n, _)| n == name)
            .map(|(_, v)| v.as_str())
            .collect()
    }
}

impl FromRequest<CabinetState> for FormData {
    type Rejection = Response;

    async fn from_request(req: Request, state: &CabinetState) -> Result<Self, Self::Rejection> {
        let read = Bytes::from_request(req, state);
        let bytes = match tokio::time::timeout(state.body_timeout, read).await {
            Ok(read) => read.map_err(IntoResponse::into_response)?,
            Err(_) => {
                let mut slow = (
                    StatusCode::REQUEST_TIMEOUT,
                    [(header::CONNECTION, "close")],
                    tr("The form did not arrive in time."),
                )
                    .into_response();
                slow.headers_mut().insert(
                    header::CONTENT_TYPE,
                    HeaderValue::from_static("text/plain; charset=utf-8"),
                );
                return Err(slow);
            }
        };
        Ok(FormData(
            url::form_urlencoded::parse(&bytes)
                .map(|(k, v)| (k.into_owned(), v.into_owned()))
                .collect(),
        ))
    }
}

/// Adds a session cookie to a response.
pub(crate) fn with_cookie(st: &CabinetState, mut response: Response, cookie: &str) -> Response {
    response
        .headers_mut()
        .append(header::SET_COOKIE, st.set_cookie(cookie));
    response
}

/// Adds the deletion of the session cookie to a response.
pub(crate) fn without_cookie(st: &CabinetState, mut response: Response) -> Response {
    response
        .headers_mut()
        .append(header::SET_COOKIE, st.clear_cookie());
    response
}
