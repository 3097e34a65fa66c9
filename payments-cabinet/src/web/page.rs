//! A page's answer: a rendered template, a redirect, or an error page with its status; and
//! the one conversion from a failure of the rules or the service to its error page
//! ([`OrPage`]).

use crate::accounts::{Current, Permission};
use askama::Template;
use axum::http::header;
use axum::http::StatusCode;
use axum::response::{IntoResponse, Redirect, Response};
use payments_core::{ApiError, ErrorCode};

use super::i18n::tr;
use super::state::CabinetState;
use super::views::{self, Message};

/// A page's failure, rendered as a page with its status.
#[derive(Debug)]
pub(crate) enum PageError {
    /// 404: also for what exists but the user may not see.
    NotFound,
    /// 403: a cross-site state change.
    CrossSite,
    /// 403: the user's team role does not allow the page or form.
    Forbidden,
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
            ErrorCode::NotFound | ErrorCode::PaymentNotFound | ErrorCode::AppealNotFound => {
                PageError::NotFound
            }
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
            PageError::Forbidden => (
                StatusCode::FORBIDDEN,
                tr("Not allowed"),
                tr("Your role in the team does not allow this. An owner or admin of your team can change your role.")
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

/// Nothing, if the user holds `need`; else the "not allowed" page ([`PageError::Forbidden`]).
// The error is the page itself, as every handler's (`PageResult`), so that `?` answers it.
#[allow(clippy::result_large_err)]
pub(crate) fn allowed(
    st: &CabinetState,
    current: &Current,
    need: Permission,
) -> Result<(), Response> {
    if current.may(need) {
        Ok(())
    } else {
        Err(PageError::Forbidden.render(st))
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

/// A failure of the cabinet's rules or of the service, answered as its error page: the one
/// conversion every handler uses (`.or_page(&st)?`).
pub(crate) trait OrPage<T> {
    /// The value, or the error page of the failure.
    // The error is the answer itself, like every handler's `PageResult`: built once, on the
    // way out.
    #[allow(clippy::result_large_err)]
    fn or_page(self, st: &CabinetState) -> Result<T, Response>;
}

impl<T, E: Into<ApiError>> OrPage<T> for Result<T, E> {
    fn or_page(self, st: &CabinetState) -> Result<T, Response> {
        self.map_err(|e| error_page(e, st))
    }
}

/// The error page of a failure of the rules or the service.
pub(crate) fn error_page(e: impl Into<ApiError>, st: &CabinetState) -> Response {
    PageError::from(e).render(st)
}
