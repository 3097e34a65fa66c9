//! The cabinet's pages as an axum router: server-rendered HTML that works without JavaScript,
//! one embedded stylesheet, plain forms, and post/redirect/get for every form: a `POST` is
//! answered `303 See Other` to a `GET` page, so that a reload never sends a form again. A
//! value shown once (a new token, a rotated callback secret, recovery codes) and a refused
//! form's errors reach that page through a one-time slot in the store (module `once`).
//!
//! Every request passes [`guard`]: security headers on every answer, and for every state
//! change (any method but GET and HEAD) the Fetch Metadata / `Origin` check, so a cross-site
//! request changes nothing even before the `SameSite=Strict` session cookie is considered.

mod auth;
mod balance;
pub mod export;
pub(crate) mod i18n;
mod once;
pub mod payer;
mod payments;
pub mod poll_limits;
mod projects;
mod requests;
mod security;
pub(crate) mod views;

use std::net::SocketAddr;
use std::sync::Arc;

use crate::store::SessionStage;
use askama::Template;
use axum::body::Bytes;
use axum::extract::{ConnectInfo, FromRequest, FromRequestParts, Request, State};
use axum::http::header::{self, HeaderMap, HeaderValue};
use axum::http::request::Parts;
use axum::http::{Method, StatusCode};
use axum::middleware::{self, Next};
use axum::response::{IntoResponse, Redirect, Response};
use axum::routing::get;
use axum::Router;
use payments_core::{ApiError, ErrorCode};

use crate::accounts::{Cabinet, Client, Current};
use i18n::tr;
use views::{Chrome, Message};

/// The stylesheet, embedded.
pub const STYLESHEET: &str = include_str!("../../assets/cabinet.css");

/// The longest form body accepted (64 KiB; a PEM key or an allow-list is far less).
pub const MAX_FORM_BYTES: usize = 64 * 1024;

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
    pub payer_status_limits: Arc<poll_limits::StatusPollLimits>,
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
        }
    }

    fn cookie_name(&self) -> &'static str {
        if self.tls {
            SECURE_COOKIE
        } else {
            PLAIN_COOKIE
        }
    }

    /// A `Set-Cookie` value carrying a session.
    fn set_cookie(&self, value: &str) -> HeaderValue {
        let secure = if self.tls { "; Secure" } else { "" };
        HeaderValue::from_str(&format!(
            "{}={value}; Path=/; HttpOnly; SameSite=Strict{secure}",
            self.cookie_name()
        ))
        .expect("the cookie value is base64url")
    }

    /// A `Set-Cookie` value deleting the session cookie.
    fn clear_cookie(&self) -> HeaderValue {
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

/// Every `(method, path)` the cabinet serves.
pub const ROUTES: &[(&str, &str)] = &[
    ("GET", "/"),
    ("GET", "/healthz"),
    ("GET", "/assets/cabinet.css"),
    ("POST", "/language"),
    ("GET", "/sign-in"),
    ("POST", "/sign-in"),
    ("GET", "/sign-in/code"),
    ("POST", "/sign-in/code"),
    ("GET", "/sign-in/recovery"),
    ("POST", "/sign-in/recovery"),
    ("GET", "/sign-in/enrol"),
    ("POST", "/sign-in/enrol"),
    ("POST", "/sign-out"),
    ("GET", "/invite/{token}"),
    ("POST", "/invite/{token}"),
    ("GET", "/projects"),
    ("GET", "/projects/{id}"),
    ("POST", "/projects/{id}/tokens"),
    ("GET", "/projects/{id}/tokens/{token}/revoke"),
    ("POST", "/projects/{id}/tokens/{token}/revoke"),
    ("POST", "/projects/{id}/keys"),
    ("GET", "/projects/{id}/keys/{keyid}/revoke"),
    ("POST", "/projects/{id}/keys/{keyid}/revoke"),
    ("POST", "/projects/{id}/allow-list"),
    ("POST", "/projects/{id}/callback-url"),
    ("GET", "/projects/{id}/payer-page"),
    ("POST", "/projects/{id}/payer-page"),
    ("GET", "/projects/{id}/callback-secret"),
    ("POST", "/projects/{id}/callback-secret"),
    ("GET", "/projects/{id}/payments"),
    ("GET", "/projects/{id}/payments.csv"),
    ("GET", "/projects/{id}/balance"),
    ("GET", "/projects/{id}/balance/entries.csv"),
    ("GET", "/projects/{id}/deliveries"),
    ("GET", "/projects/{id}/deliveries/recover"),
    ("POST", "/projects/{id}/deliveries/recover"),
    ("GET", "/projects/{id}/events/{event}"),
    ("GET", "/projects/{id}/events/{event}/resend"),
    ("POST", "/projects/{id}/events/{event}/resend"),
    ("GET", "/projects/{id}/requests"),
    ("GET", "/payments/search"),
    ("GET", "/payments/{id}"),
    ("POST", "/payments/{id}/test/paid"),
    ("POST", "/payments/{id}/test/canceled"),
    ("POST", "/payments/{id}/confirm"),
    ("POST", "/payments/{id}/cancel"),
    ("POST", "/payments/{id}/recheck"),
    ("POST", "/payments/{id}/resolve"),
    ("GET", "/payments/{id}/resend"),
    ("POST", "/payments/{id}/resend"),
    ("GET", "/security"),
    ("POST", "/security/password"),
    ("POST", "/security/recovery-codes"),
    ("POST", "/security/authenticator"),
    ("GET", "/security/authenticator/confirm"),
    ("POST", "/security/authenticator/confirm"),
    ("POST", "/security/sessions/{id}/revoke"),
    ("GET", "/audit"),
    ("GET", "/shown/{slot}"),
    ("GET", "/pay/{token}"),
    ("GET", "/pay/{token}/status"),
    ("GET", "/pay/assets/payer.css"),
    ("GET", "/pay/assets/payer.js"),
];

/// The cabinet as a router. Serve it with `into_make_service_with_connect_info::<SocketAddr>()`
/// so that sessions, throttling and the audit log see the client address.
pub fn router(state: CabinetState) -> Router {
    use axum::routing::post;
    Router::new()
        .route("/", get(home))
        .route("/healthz", get(|| async { "ok" }))
        .route("/assets/cabinet.css", get(stylesheet))
        .route("/language", post(language))
        .route("/sign-in", get(auth::sign_in_page).post(auth::sign_in))
        .route("/sign-in/code", get(auth::code_page).post(auth::code))
        .route(
            "/sign-in/recovery",
            get(auth::recovery_page).post(auth::recovery),
        )
        .route("/sign-in/enrol", get(auth::enrol_page).post(auth::enrol))
        .route("/sign-out", post(auth::sign_out))
        .route("/invite/{token}", get(auth::invite_page).post(auth::invite))
        .route("/projects", get(projects::list))
        .route("/projects/{id}", get(projects::access))
        .route("/projects/{id}/tokens", post(projects::create_token))
        .route(
            "/projects/{id}/tokens/{token}/revoke",
            get(projects::revoke_token_page).post(projects::revoke_token),
        )
        .route("/projects/{id}/keys", post(projects::register_key))
        .route(
            "/projects/{id}/keys/{keyid}/revoke",
            get(projects::revoke_key_page).post(projects::revoke_key),
        )
        .route("/projects/{id}/allow-list", post(projects::allow_list))
        .route("/projects/{id}/callback-url", post(projects::callback_url))
        .route(
            "/projects/{id}/payer-page",
            get(payer::settings_page).post(payer::save_settings),
        )
        .route(
            "/projects/{id}/callback-secret",
            get(projects::roll_secret_page).post(projects::roll_secret),
        )
        .route("/projects/{id}/payments", get(payments::list))
        .route("/projects/{id}/payments.csv", get(payments::payments_csv))
        .route("/projects/{id}/balance", get(balance::page))
        .route(
            "/projects/{id}/balance/entries.csv",
            get(balance::entries_csv),
        )
        .route("/projects/{id}/deliveries", get(payments::deliveries))
        .route(
            "/projects/{id}/deliveries/recover",
            get(payments::recover_page).post(payments::recover),
        )
        .route("/projects/{id}/events/{event}", get(payments::event_page))
        .route(
            "/projects/{id}/events/{event}/resend",
            get(payments::event_resend_page).post(payments::event_resend),
        )
        .route("/projects/{id}/requests", get(requests::page))
        .route("/payments/search", get(payments::search))
        .route("/payments/{id}", get(payments::card))
        .route("/payments/{id}/test/paid", post(payments::test_paid))
        .route(
            "/payments/{id}/test/canceled",
            post(payments::test_canceled),
        )
        .route("/payments/{id}/confirm", post(payments::confirm))
        .route("/payments/{id}/cancel", post(payments::cancel))
        .route("/payments/{id}/recheck", post(payments::recheck))
        .route("/payments/{id}/resolve", post(payments::resolve))
        .route(
            "/payments/{id}/resend",
            get(payments::resend_page).post(payments::resend),
        )
        .route("/security", get(security::page))
        .route("/security/password", post(security::change_password))
        .route("/security/recovery-codes", post(security::regenerate_codes))
        .route("/security/authenticator", post(security::begin_reenrolment))
        .route(
            "/security/authenticator/confirm",
            get(security::reenrolment_page).post(security::confirm_reenrolment),
        )
        .route(
            "/security/sessions/{id}/revoke",
            post(security::revoke_session),
        )
        .route("/audit", get(security::audit))
        .route("/shown/{slot}", get(once::shown))
        .route("/pay/{token}", get(payer::show))
        .route("/pay/{token}/status", get(payer::status))
        .route("/pay/assets/payer.css", get(payer::stylesheet))
        .route("/pay/assets/payer.js", get(payer::script))
        .fallback(not_found)
        .layer(middleware::from_fn_with_state(state.clone(), guard))
        .layer(axum::extract::DefaultBodyLimit::max(MAX_FORM_BYTES))
        .with_state(state)
}

async fn home(current: Option<Signed>) -> Redirect {
    match current {
        Some(_) => Redirect::to("/projects"),
        None => Redirect::to("/sign-in"),
    }
}

async fn stylesheet() -> Response {
    (
        [
            (header::CONTENT_TYPE, "text/css; charset=utf-8"),
            (header::CACHE_CONTROL, "public, max-age=3600"),
        ],
        STYLESHEET,
    )
        .into_response()
}

/// `POST /language`: the language switch. Keeps the chosen language in the `cabinet-lang`
/// cookie (a year) and answers `303` back to the page it was sent from (`back`, a path on
/// this site only; anything else goes to `/`). An unknown language changes nothing.
async fn language(State(st): State<CabinetState>, form: FormData) -> Response {
    let back = i18n::safe_back(form.get("back"));
    let Some(lang) = i18n::Lang::from_code(form.get("lang")) else {
        return see_other(back);
    };
    let secure = if st.tls { "; Secure" } else { "" };
    let cookie = format!(
        "{}={}; Path=/; HttpOnly; SameSite=Strict; Max-Age=31536000{secure}",
        i18n::LANG_COOKIE,
        lang.code()
    );
    let mut response = see_other(back);
    response.headers_mut().append(
        header::SET_COOKIE,
        HeaderValue::from_str(&cookie).expect("a constant cookie"),
    );
    response
}

async fn not_found(State(st): State<CabinetState>) -> Response {
    PageError::NotFound.render(&st)
}

/// The security headers of every answer.
const CSP: &str = "default-src 'none'; style-src 'self'; img-src 'self' data:; \
    form-action 'self'; frame-ancestors 'none'; base-uri 'none'";

/// Security headers on every answer, and the cross-site check of every state change: a request
/// with any method but GET and HEAD is refused (`403`, nothing runs) unless its
/// `Sec-Fetch-Site` is `same-origin`, or, without that header, its `Origin` is the cabinet's
/// own. A request with neither is refused too: every browser sends one of them with a POST.
///
/// The request runs in its language (the `cabinet-lang` cookie's, else the one
/// `Accept-Language` prefers): whatever it renders, an error page included, reads it.
pub async fn guard(State(st): State<CabinetState>, req: Request, next: Next) -> Response {
    let safe = matches!(*req.method(), Method::GET | Method::HEAD);
    let scope = i18n::Scope {
        lang: i18n::of_request(req.headers()),
        here: if safe {
            i18n::page_of(req.uri().path_and_query().map_or("/", |p| p.as_str()))
        } else {
            "/".to_string()
        },
    };
    let mut response = i18n::scope(scope, async {
        if safe || same_origin(&st, req.headers()) {
            next.run(req).await
        } else {
            PageError::CrossSite.render(&st)
        }
    })
    .await;
    let h = response.headers_mut();
    // A page with a policy of its own (the payer page) keeps it.
    if !h.contains_key("content-security-policy") {
        h.insert("content-security-policy", HeaderValue::from_static(CSP));
    }
    h.insert(
        "x-content-type-options",
        HeaderValue::from_static("nosniff"),
    );
    h.insert("x-frame-options", HeaderValue::from_static("DENY"));
    h.insert("referrer-policy", HeaderValue::from_static("no-referrer"));
    h.insert(
        "cross-origin-opener-policy",
        HeaderValue::from_static("same-origin"),
    );
    h.insert(
        "cross-origin-resource-policy",
        HeaderValue::from_static("same-origin"),
    );
    if st.tls {
        h.insert(
            "strict-transport-security",
            HeaderValue::from_static("max-age=31536000"),
        );
    }
    if !h.contains_key(header::CACHE_CONTROL) {
        h.insert(header::CACHE_CONTROL, HeaderValue::from_static("no-store"));
    }
    response
}

/// Whether a state change comes from the cabinet's own pages (Fetch Metadata first, then
/// `Origin`).
pub fn same_origin(st: &CabinetState, headers: &HeaderMap) -> bool {
    if let Some(site) = headers.get("sec-fetch-site") {
        return site.as_bytes() == b"same-origin";
    }
    let Some(origin) = headers.get(header::ORIGIN).and_then(|v| v.to_str().ok()) else {
        return false;
    };
    let expected = match &st.public_origin {
        Some(o) => o.trim_end_matches('/').to_string(),
        None => match headers.get(header::HOST).and_then(|v| v.to_str().ok()) {
            Some(host) => format!("{}://{host}", if st.tls { "https" } else { "http" }),
            None => return false,
        },
    };
    origin.eq_ignore_ascii_case(&expected)
}

/// A page's failure, rendered as a page with its status.
#[derive(Debug)]
pub(crate) enum PageError {
    /// 404: also for what exists but the user may not see.
    NotFound,
    /// 403: a cross-site state change.
    CrossSite,
    /// 400 with a message.
    BadRequest(String),
    /// 409 with a message.
    Conflict(String),
    /// 503/500 with a message.
    Unavailable(String),
    /// 429: the project's list budget is spent for now.
    TooMany(String),
}

impl<E: Into<ApiError>> From<E> for PageError {
    fn from(e: E) -> Self {
        let e: ApiError = e.into();
        match e.code {
            ErrorCode::NotFound | ErrorCode::PaymentNotFound => PageError::NotFound,
            ErrorCode::BadRequest => PageError::BadRequest(e.message),
            ErrorCode::InvalidTransition => PageError::Conflict(e.message),
            ErrorCode::RateLimited => PageError::TooMany(
                tr("This project's lists are being read too often at once. Try again in a moment.")
                    .into(),
            ),
            ErrorCode::ServiceUnavailable if read_timed_out(&e) => PageError::Unavailable(
                tr("The list took too long to read. Narrow the filters (a shorter period) and try again.")
                    .into(),
            ),
            _ => {
                tracing::error!(code = %e.code, message = %e.message, "cabinet: request failed");
                PageError::Unavailable(
                    tr("The service cannot answer now. Try again in a moment.").into(),
                )
            }
        }
    }
}

/// Whether `e` is a list read the store stopped at its time limit.
fn read_timed_out(e: &ApiError) -> bool {
    use payments_core::error::ErrorCause;
    use payments_core::store::{StoreError, UnavailableCause};
    matches!(
        e.cause.as_deref(),
        Some(ErrorCause::Store(StoreError::Unavailable {
            cause: UnavailableCause::TimedOut,
            ..
        }))
    )
}

impl PageError {
    pub(crate) fn render(self, st: &CabinetState) -> Response {
        let (status, title, text) = match self {
            PageError::NotFound => (
                StatusCode::NOT_FOUND,
                tr("Not found"),
                tr("There is no such page, or it is not yours to see.").to_string(),
            ),
            PageError::CrossSite => (
                StatusCode::FORBIDDEN,
                tr("Refused"),
                tr("The request did not come from the cabinet's own pages, so nothing was changed.")
                    .to_string(),
            ),
            PageError::BadRequest(m) => (StatusCode::BAD_REQUEST, tr("Not accepted"), m),
            PageError::Conflict(m) => (StatusCode::CONFLICT, tr("Not possible now"), m),
            PageError::Unavailable(m) => (StatusCode::SERVICE_UNAVAILABLE, tr("Unavailable"), m),
            PageError::TooMany(m) => (StatusCode::TOO_MANY_REQUESTS, tr("Too many requests"), m),
        };
        // The language switch of an error page leads to the cabinet's start, so that every
        // refusal reads the same whatever was asked for.
        let mut chrome = st.chrome(title, None);
        chrome.here = "/".into();
        let page = Message {
            chrome,
            text,
            link: Some(views::Link::new("/", tr("Back to the cabinet"))),
        };
        html(status, &page)
    }
}

/// A page's answer: a page or an error page.
pub(crate) type PageResult = Result<Response, Response>;

/// Renders a template with a status.
pub(crate) fn html(status: StatusCode, page: &impl Template) -> Response {
    match page.render() {
        Ok(body) => (
            status,
            [(header::CONTENT_TYPE, "text/html; charset=utf-8")],
            body,
        )
            .into_response(),
        Err(e) => {
            tracing::error!(error = %e, "cabinet: a template did not render");
            (
                StatusCode::INTERNAL_SERVER_ERROR,
                "the page could not be rendered",
            )
                .into_response()
        }
    }
}

/// Renders a template with `200`.
pub(crate) fn ok(page: &impl Template) -> Response {
    html(StatusCode::OK, page)
}

/// A `303 See Other` to `to` (after a POST).
pub(crate) fn see_other(to: &str) -> Response {
    Redirect::to(to).into_response()
}

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

async fn session_of(
    parts: &Parts,
    st: &CabinetState,
) -> Result<Option<(Current, String)>, Response> {
    let Some(cookie) = session_cookie(st, &parts.headers) else {
        return Ok(None);
    };
    match st.cabinet.session(&cookie).await {
        Ok(found) => Ok(found.map(|c| (c, cookie))),
        Err(e) => Err(PageError::from(e).render(st)),
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
            Some(_) => Err(see_other("/projects")),
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn routes_are_listed_once() {
        let unique: std::collections::BTreeSet<_> = ROUTES.iter().collect();
        assert_eq!(unique.len(), ROUTES.len());
    }
}
