//! The merchant's events API: `GET /api/v1/events` (with an optional long poll),
//! `GET /api/v1/events/{id}`, `POST /api/v1/events/{id}/resend`, `POST /api/v1/events/recover`
//! and `POST /api/v1/payments/{id}/resend_callback`. Authenticated like every merchant
//! request (token, scope `events:read` or `events:resend`, signature when the project's
//! policy asks, allow-list, the project's rate limit); the core decides everything else.

use std::time::Duration;

use axum::extract::{Path, Request, State};
use axum::http::StatusCode;
use axum::response::Response;
use payments_core::auth::Endpoint;
use payments_core::service::{event_not_found, payment_not_found, token_actor};
use payments_core::{ApiError, EventId, PaymentId, Timestamp};
use serde::Deserialize;
use serde_json::json;

use crate::admission::admitted;
use crate::error::{HttpError, RequestId};
use crate::json::{json_response, page_json};
use crate::state::AppState;

/// How long a waiting long poll goes without reading the store when nothing wakes it: the
/// safety net for an event committed by a process that does not relay its events (an
/// administration command on the same database). The events of this node, and of the other
/// nodes where the store relays them (PostgreSQL), wake the project's polls at once.
const SAFETY_NET: Duration = Duration::from_secs(5);

/// How soon a woken poll that found no free list place looks again.
const NO_PLACE_RETRY: Duration = Duration::from_millis(100);

/// `GET /api/v1/events`: a page of the project's events, newest first. With `wait=N` and no
/// cursor, an empty page is held up to N seconds until an event arrives (a long poll; the
/// request gives its concurrency slot back while it waits, and answers at once when the
/// server begins to shut down). At most [`LongPolls::PER_PROJECT`] of a project's long polls
/// wait at once on this node; another is answered at once, as without `wait`. A waiting poll
/// reads the store again when an event of its project is committed ([`LongPolls`] is an
/// outbox waker of the service), or after [`SAFETY_NET`] without one. Every read runs under
/// the project's list budget (`ScanBudget`): a woken poll that finds no free place looks
/// again shortly.
///
/// [`LongPolls::PER_PROJECT`]: crate::state::LongPolls::PER_PROJECT
/// [`LongPolls`]: crate::state::LongPolls
#[tracing::instrument(name = "list_events", skip_all, fields(request_id = %rid.0))]
pub(crate) async fn list_events(
    State(st): State<AppState>,
    axum::Extension(rid): axum::Extension<RequestId>,
    req: Request,
) -> Result<Response, HttpError> {
    let query = req.uri().query().unwrap_or_default().to_string();
    let a = admitted(&st, Endpoint::ReadEvents, req, None).await?;
    let ctx = st.service.gate().accept(a.auth).await?;
    drop(a._permit);
    let query = crate::query::event_list(&query)?;
    // A place among the project's waiting long polls; without one the page is answered now.
    let place = (query.wait > Duration::ZERO && query.cursor.is_none())
        .then(|| st.long_polls.enter(ctx.project.id))
        .flatten();
    // Listening before the first read: an event committed after it wakes the poll.
    let mut news = place.as_ref().map(|p| Box::pin(p.news()));
    if let Some(n) = news.as_mut() {
        n.as_mut().enable();
    }
    let mut page = st
        .service
        .callbacks()
        .list_events(&ctx.project, &query)
        .await?;
    if let (Some(place), Some(news)) = (&place, news) {
        if page.events.is_empty() {
            page = hold(&st, &ctx.project, &query, place, news)
                .await?
                .unwrap_or(page);
        }
    }
    let data: Vec<_> = page.events.iter().map(|e| e.view()).collect();
    Ok(json_response(
        StatusCode::OK,
        &page_json(data, page.next_cursor),
    ))
}

/// Holds an empty first page until an event of `project` arrives, `query.wait` ends or the
/// server begins to stop: the newer page when one came.
async fn hold(
    st: &AppState,
    project: &payments_core::project::Project,
    query: &payments_core::service::EventListQuery,
    place: &crate::state::LongPollGuard,
    mut news: std::pin::Pin<Box<tokio::sync::futures::OwnedNotified>>,
) -> Result<Option<payments_core::service::EventPage>, HttpError> {
    let deadline = tokio::time::Instant::now() + query.wait;
    let mut stopping = st.stopping.subscribe();
    let mut next_look = SAFETY_NET;
    loop {
        let now = tokio::time::Instant::now();
        if now >= deadline {
            return Ok(None);
        }
        tokio::select! {
            () = news.as_mut() => {}
            () = tokio::time::sleep_until(deadline.min(now + next_look)) => {
                // The wait ended with nothing new: the empty page stands.
                if tokio::time::Instant::now() >= deadline {
                    return Ok(None);
                }
            }
            _ = stopping.wait_for(|stop| *stop) => return Ok(None),
        }
        // Listening again before the read, as before the first.
        news = Box::pin(place.news());
        news.as_mut().enable();
        st.long_polls.reread();
        match st
            .service
            .callbacks()
            .recheck_events(project, query)
            .await?
        {
            Some(page) if !page.events.is_empty() => return Ok(Some(page)),
            Some(_) => next_look = SAFETY_NET,
            // No free list place now: look again shortly.
            None => next_look = NO_PLACE_RETRY,
        }
    }
}

/// `GET /api/v1/events/{id}`: one event of the project with its attempts; `404 not_found`
/// for an unknown id or another project's event (after every authentication check).
#[tracing::instrument(name = "get_event", skip_all, fields(request_id = %rid.0))]
pub(crate) async fn get_event(
    State(st): State<AppState>,
    axum::Extension(rid): axum::Extension<RequestId>,
    Path(id): Path<String>,
    req: Request,
) -> Result<Response, HttpError> {
    let a = admitted(&st, Endpoint::ReadEvents, req, None).await?;
    let ctx = st.service.gate().accept(a.auth).await?;
    let id: EventId = id.parse().map_err(|_| event_not_found())?;
    let event = st
        .service
        .callbacks()
        .project_event(&ctx.project, id)
        .await?
        .ok_or_else(event_not_found)?;
    Ok(json_response(StatusCode::OK, &event.view()))
}

/// `POST /api/v1/events/{id}/resend` (empty body): the spec's manual resend of the event's
/// payment, `202` with the new event.
#[tracing::instrument(name = "resend_event", skip_all, fields(request_id = %rid.0))]
pub(crate) async fn resend_event(
    State(st): State<AppState>,
    axum::Extension(rid): axum::Extension<RequestId>,
    Path(id): Path<String>,
    req: Request,
) -> Result<Response, HttpError> {
    let ctx = resend_request(&st, req).await?;
    let id: EventId = id.parse().map_err(|_| event_not_found())?;
    let event = st
        .service
        .callbacks()
        .resend_event(&ctx.project, id, &token_actor(&ctx.token))
        .await?;
    Ok(json_response(StatusCode::ACCEPTED, &event.view()))
}

/// `POST /api/v1/payments/{id}/resend_callback` (empty body): the merchant's "send callback"
/// for a closed payment, test payments included; `202` with the new event.
#[tracing::instrument(name = "resend_payment_callback", skip_all, fields(request_id = %rid.0))]
pub(crate) async fn resend_payment_callback(
    State(st): State<AppState>,
    axum::Extension(rid): axum::Extension<RequestId>,
    Path(id): Path<String>,
    req: Request,
) -> Result<Response, HttpError> {
    let ctx = resend_request(&st, req).await?;
    let id: PaymentId = id.parse().map_err(|_| payment_not_found())?;
    let event = st
        .service
        .callbacks()
        .resend_payment_callback(&ctx.project, id, &token_actor(&ctx.token))
        .await?;
    Ok(json_response(StatusCode::ACCEPTED, &event.view()))
}

/// The body of `POST /api/v1/events/recover`.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct RecoverBody {
    since: String,
    #[serde(default)]
    until: Option<String>,
}

/// `POST /api/v1/events/recover` with `{"since": "<RFC 3339>", "until": "<RFC 3339>"?}`:
/// resends every undelivered event of the project queued in the range (one manual resend per
/// payment), `200` with what was resent and what was left alone, and why.
#[tracing::instrument(name = "recover_events", skip_all, fields(request_id = %rid.0))]
pub(crate) async fn recover_events(
    State(st): State<AppState>,
    axum::Extension(rid): axum::Extension<RequestId>,
    req: Request,
) -> Result<Response, HttpError> {
    let a = admitted(&st, Endpoint::ResendEvents, req, None).await?;
    let body: RecoverBody = serde_json::from_slice(&a.body).map_err(|e| {
        ApiError::bad_request(format!(
            "expected {{\"since\": \"<RFC 3339 time>\", \"until\": \"<RFC 3339 time>\" (optional)}}: {e}"
        ))
    })?;
    let time = |name: &str, v: &str| {
        Timestamp::parse_rfc3339(v).ok_or_else(|| {
            ApiError::bad_request(format!(
                "{name}: expected an RFC 3339 time such as 2026-10-01T12:00:00Z"
            ))
        })
    };
    let since = time("since", &body.since)?;
    let until = body
        .until
        .as_deref()
        .map(|u| time("until", u))
        .transpose()?;
    if until.is_some_and(|u| u <= since) {
        return Err(ApiError::bad_request("since: must be before until").into());
    }
    let ctx = st.service.gate().accept(a.auth).await?;
    let report = st
        .service
        .callbacks()
        .recover_events(&ctx.project, since, until, &token_actor(&ctx.token))
        .await?;
    let resent: Vec<_> = report
        .resent
        .iter()
        .map(|r| json!({"payment_id": r.payment_id, "event_id": r.event_id, "answers": r.failed}))
        .collect();
    let skipped: Vec<_> = report
        .skipped
        .iter()
        .map(|s| json!({"payment_id": s.payment_id, "failed": s.failed, "reason": s.reason}))
        .collect();
    Ok(json_response(
        StatusCode::OK,
        &json!({"resent": resent, "skipped": skipped, "has_more": report.more}),
    ))
}

/// A resend request authenticated (scope `events:resend`, always signed) with its empty body
/// checked and its nonce recorded: the caller.
async fn resend_request(
    st: &AppState,
    req: Request,
) -> Result<payments_core::service::AuthContext, HttpError> {
    let a = admitted(st, Endpoint::ResendEvents, req, None).await?;
    no_body(&a.body)?;
    Ok(st.service.gate().accept(a.auth).await?)
}

/// A resend takes no body: anything in it is a client's mistake worth naming.
fn no_body(body: &[u8]) -> Result<(), ApiError> {
    if body.iter().all(u8::is_ascii_whitespace) || body == b"{}" {
        Ok(())
    } else {
        Err(ApiError::bad_request(
            "this request takes no body (send it empty)",
        ))
    }
}
