//! The cabinet's pages as an axum router: server-rendered HTML that works without JavaScript,
//! one embedded stylesheet, plain forms, and post/redirect/get for every form: a `POST` is
//! answered `303 See Other` to a `GET` page, so that a reload never sends a form again. A
//! value shown once (a new token, a rotated callback secret, recovery codes) and a refused
//! form's errors reach that page through a one-time slot in the store (module `once`).
//!
//! Every request passes [`guard`]: security headers on every answer, and for every state
//! change (any method but GET and HEAD) the Fetch Metadata / `Origin` check, so a cross-site
//! request changes nothing even before the `SameSite=Strict` session cookie is considered.

mod appeal_queue;
mod appeal_view;
pub mod appeals;
mod auth;
mod balance;
mod card;
mod credentials;
mod deliveries;
pub mod export;
mod extract;
pub mod health;
mod home;
pub(crate) mod i18n;
mod once;
mod operations;
mod page;
pub mod payer;
mod payments;
pub mod poll_limits;
mod projects;
mod qr;
mod query;
mod refusals;
mod requests;
mod search;
mod security;
mod settings;
mod state;
mod team;
pub(crate) mod views;

use axum::extract::{Request, State};
use axum::http::header::{self, HeaderMap, HeaderValue};
use axum::http::Method;
use axum::middleware::{self, Next};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use axum::Router;

use extract::FormData;
use page::{see_other, PageError};
pub use state::{CabinetState, PLAIN_COOKIE, SECURE_COOKIE};

/// The stylesheet, embedded.
pub const STYLESHEET: &str = include_str!("../../assets/cabinet.css");

/// The one script of the cabinet's own pages, embedded: the browser's time zone for the
/// sign-in's last step ([`crate::accounts::Users::adopt_time_zone`]).
pub const ZONE_SCRIPT: &str = include_str!("../../assets/zone.js");

/// The longest form body accepted (64 KiB; a PEM key or an allow-list is far less).
pub const MAX_FORM_BYTES: usize = 64 * 1024;

/// Every `(method, path)` the cabinet serves.
pub const ROUTES: &[(&str, &str)] = &[
    ("GET", "/"),
    ("GET", "/healthz"),
    ("GET", "/assets/cabinet.css"),
    ("GET", "/assets/zone.js"),
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
    ("POST", "/payments/{id}/appeals"),
    ("GET", "/appeals"),
    ("GET", "/appeals/{id}/receipts/{index}"),
    ("GET", "/appeals/{id}/{decision}"),
    ("POST", "/appeals/{id}/{decision}"),
    ("GET", "/security"),
    ("POST", "/security/password"),
    ("POST", "/security/recovery-codes"),
    ("POST", "/security/time-zone"),
    ("POST", "/security/authenticator"),
    ("GET", "/security/authenticator/confirm"),
    ("POST", "/security/authenticator/confirm"),
    ("POST", "/security/sessions/{id}/revoke"),
    ("GET", "/audit"),
    ("GET", "/team"),
    ("POST", "/team"),
    ("GET", "/team/{id}"),
    ("POST", "/team/{id}"),
    ("POST", "/team/{id}/invite"),
    ("GET", "/team/{id}/remove"),
    ("POST", "/team/{id}/remove"),
    ("POST", "/team/{id}/restore"),
    ("GET", "/shown/{slot}"),
    ("GET", "/pay/{token}"),
    ("GET", "/pay/{token}/status"),
    ("POST", "/pay/{token}/appeal"),
    ("GET", "/pay/assets/payer.css"),
    ("GET", "/pay/assets/payer.js"),
];

/// The cabinet as a router. Serve it with `into_make_service_with_connect_info::<SocketAddr>()`
/// so that sessions, throttling and the audit log see the client address.
pub fn router(state: CabinetState) -> Router {
    Router::new()
        .merge(sign_in_routes())
        .merge(project_routes())
        .merge(payment_routes())
        .merge(appeal_routes())
        .merge(security_routes())
        .fallback(not_found)
        .layer(middleware::from_fn_with_state(state.clone(), guard))
        .layer(axum::extract::DefaultBodyLimit::max(MAX_FORM_BYTES))
        .with_state(state)
}

/// The home page, health, assets, language and the sign-in pages.
fn sign_in_routes() -> Router<CabinetState> {
    Router::new()
        .route("/", get(home::home))
        .route("/healthz", get(|| async { "ok" }))
        .route("/assets/cabinet.css", get(stylesheet))
        .route("/assets/zone.js", get(zone_script))
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
}

/// A project's pages: the access page and its forms, payments, balance, deliveries, requests.
fn project_routes() -> Router<CabinetState> {
    Router::new()
        .route("/projects", get(projects::list))
        .route("/projects/{id}", get(projects::access))
        .route("/projects/{id}/tokens", post(credentials::create_token))
        .route(
            "/projects/{id}/tokens/{token}/revoke",
            get(credentials::revoke_token_page).post(credentials::revoke_token),
        )
        .route("/projects/{id}/keys", post(credentials::register_key))
        .route(
            "/projects/{id}/keys/{keyid}/revoke",
            get(credentials::revoke_key_page).post(credentials::revoke_key),
        )
        .route("/projects/{id}/allow-list", post(settings::allow_list))
        .route("/projects/{id}/callback-url", post(settings::callback_url))
        .route(
            "/projects/{id}/payer-page",
            get(payer::settings_page).post(payer::save_settings),
        )
        .route(
            "/projects/{id}/callback-secret",
            get(settings::roll_secret_page).post(settings::roll_secret),
        )
        .route("/projects/{id}/payments", get(payments::list))
        .route("/projects/{id}/payments.csv", get(payments::payments_csv))
        .route("/projects/{id}/balance", get(balance::page))
        .route(
            "/projects/{id}/balance/entries.csv",
            get(balance::entries_csv),
        )
        .route("/projects/{id}/deliveries", get(deliveries::deliveries))
        .route(
            "/projects/{id}/deliveries/recover",
            get(deliveries::recover_page).post(deliveries::recover),
        )
        .route("/projects/{id}/events/{event}", get(deliveries::event_page))
        .route(
            "/projects/{id}/events/{event}/resend",
            get(deliveries::event_resend_page).post(deliveries::event_resend),
        )
        .route("/projects/{id}/requests", get(requests::page))
}

/// The search, the payment card and its operations, and the payer's page.
fn payment_routes() -> Router<CabinetState> {
    Router::new()
        .route("/payments/search", get(search::search))
        .route("/payments/{id}", get(payments::card))
        .route("/payments/{id}/test/paid", post(operations::test_paid))
        .route(
            "/payments/{id}/test/canceled",
            post(operations::test_canceled),
        )
        .route("/payments/{id}/confirm", post(operations::confirm))
        .route("/payments/{id}/cancel", post(operations::cancel))
        .route("/payments/{id}/recheck", post(operations::recheck))
        .route("/payments/{id}/resolve", post(operations::resolve))
        .route(
            "/payments/{id}/resend",
            get(operations::resend_page).post(operations::resend),
        )
        .route("/pay/{token}", get(payer::show))
        .route("/pay/{token}/status", get(payer::status))
        .route(
            "/pay/{token}/appeal",
            post(payer::appeal::appeal).layer(axum::extract::DefaultBodyLimit::max(
                payer::appeal::APPEAL_BODY_MAX,
            )),
        )
        .route("/pay/assets/payer.css", get(payer::stylesheet))
        .route("/pay/assets/payer.js", get(payer::script))
}

/// Appeals: the card's "Open an appeal" form (a multipart body of up to
/// [`appeals::MAX_APPEAL_FORM_BYTES`], the one route above [`MAX_FORM_BYTES`]), receipts, and
/// support's queue with its decisions.
fn appeal_routes() -> Router<CabinetState> {
    Router::new()
        .route(
            "/payments/{id}/appeals",
            post(appeals::open).layer(axum::extract::DefaultBodyLimit::max(
                appeals::MAX_APPEAL_FORM_BYTES,
            )),
        )
        .route("/appeals", get(appeal_queue::queue))
        .route("/appeals/{id}/receipts/{index}", get(appeals::receipt))
        .route(
            "/appeals/{id}/{decision}",
            get(appeal_queue::decide_page).post(appeal_queue::decide),
        )
}

/// The security page and its forms, the audit log and the once-shown values.
fn security_routes() -> Router<CabinetState> {
    Router::new()
        .route("/security", get(security::page))
        .route("/security/password", post(security::change_password))
        .route("/security/recovery-codes", post(security::regenerate_codes))
        .route("/security/time-zone", post(security::set_time_zone))
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
        .route("/team", get(team::team).post(team::invite))
        .route("/team/{id}", get(team::member).post(team::change))
        .route("/team/{id}/invite", post(team::reinvite))
        .route(
            "/team/{id}/remove",
            get(team::remove_page).post(team::remove),
        )
        .route("/team/{id}/restore", post(team::restore))
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

async fn zone_script() -> Response {
    (
        [
            (header::CONTENT_TYPE, "text/javascript; charset=utf-8"),
            (header::CACHE_CONTROL, "public, max-age=3600"),
        ],
        ZONE_SCRIPT,
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
const CSP: &str = "default-src 'none'; style-src 'self'; script-src 'self'; \
    img-src 'self' data:; \
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
    let here = if safe {
        i18n::page_of(req.uri().path_and_query().map_or("/", |p| p.as_str()))
    } else {
        "/".to_string()
    };
    let scope = i18n::Scope::new(i18n::of_request(req.headers()), here);
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn routes_are_listed_once() {
        let unique: std::collections::BTreeSet<_> = ROUTES.iter().collect();
        assert_eq!(unique.len(), ROUTES.len());
    }
}
