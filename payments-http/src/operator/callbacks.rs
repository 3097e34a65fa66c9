//! Callbacks as a whole on the operator API: the failed events (listed with filters, resent
//! in bulk as the spec's manual resends) and the dispatch hold. The CLI's `callbacks`
//! commands use the same functions and JSON forms.

use crate::json::Json;
use axum::body::Bytes;
use axum::extract::{RawQuery, State};
use axum::response::{IntoResponse, Response};
use axum::routing::{delete, get, post, put, MethodRouter};
use payments_core::event::{destination_host, FailedEvent, FailedEventFilter};
use payments_core::service::{BulkResend, PaymentService, MAX_FAILED_BATCH};
use payments_core::{ApiError, Timestamp};
use serde_json::{json, Value};

use super::body::Body;
use super::{lookup, Op, OpResult};
use crate::state::AppState;

/// The callback routes of the operator API, behind the operator token.
pub const ROUTES: &[(&str, &str)] = &[
    ("GET", "/operator/v1/callbacks/failed"),
    ("POST", "/operator/v1/callbacks/failed/resend"),
    ("GET", "/operator/v1/callbacks/hold"),
    ("PUT", "/operator/v1/callbacks/hold"),
    ("DELETE", "/operator/v1/callbacks/hold"),
];

/// The handler of one route of [`ROUTES`].
pub(crate) fn handler(method: &str, path: &str) -> Option<MethodRouter<AppState>> {
    Some(match (method, path) {
        ("GET", "/operator/v1/callbacks/failed") => get(list_failed),
        ("POST", "/operator/v1/callbacks/failed/resend") => post(resend_failed),
        ("GET", "/operator/v1/callbacks/hold") => get(show_hold),
        ("PUT", "/operator/v1/callbacks/hold") => put(hold),
        ("DELETE", "/operator/v1/callbacks/hold") => delete(release),
        _ => return None,
    })
}

/// The default number of failed events listed or resent at once.
pub const DEFAULT_FAILED_LIMIT: usize = 100;

fn time(name: &str, v: Option<&str>) -> Result<Option<Timestamp>, ApiError> {
    v.map(|s| {
        Timestamp::parse_rfc3339(s.trim()).ok_or_else(|| {
            ApiError::bad_request(format!(
                "{name}: {s:?} is not an RFC 3339 time like 2026-10-01T12:00:00Z"
            ))
        })
    })
    .transpose()
}

/// The failed-event filter from its parts as given (query, body or command line): a known
/// project id, a host name or address, RFC 3339 times (`since` inclusive, `until` exclusive).
pub async fn failed_filter(
    service: &PaymentService,
    project: Option<&str>,
    host: Option<&str>,
    since: Option<&str>,
    until: Option<&str>,
) -> Result<FailedEventFilter, ApiError> {
    let project = match project {
        Some(p) => Some(lookup::project(service, p).await?.id),
        None => None,
    };
    let host = host
        .map(|h| {
            let h = h.trim().trim_start_matches('[').trim_end_matches(']');
            if h.is_empty() || h.len() > 253 || h.chars().any(|c| c.is_whitespace() || c == '/') {
                Err(ApiError::bad_request(format!(
                    "host: {h:?} is not a host name or address"
                )))
            } else {
                Ok(h.to_ascii_lowercase())
            }
        })
        .transpose()?;
    let filter = FailedEventFilter {
        project,
        host,
        since: time("since", since)?,
        until: time("until", until)?,
    };
    if let (Some(s), Some(u)) = (filter.since, filter.until) {
        if s >= u {
            return Err(ApiError::bad_request("since: must be before until"));
        }
    }
    Ok(filter)
}

/// A limit as given: 1 to [`MAX_FAILED_BATCH`].
pub fn failed_limit(v: Option<u64>) -> Result<usize, ApiError> {
    match v {
        None => Ok(DEFAULT_FAILED_LIMIT),
        Some(n) => usize::try_from(n)
            .ok()
            .filter(|n| (1..=MAX_FAILED_BATCH).contains(n))
            .ok_or_else(|| {
                ApiError::bad_request(format!("limit: must be from 1 to {MAX_FAILED_BATCH}"))
            }),
    }
}

/// A failed event as listed.
pub fn failed_json(f: &FailedEvent) -> Value {
    let o = &f.outbox;
    json!({
        "event_id": o.event.event_id,
        "payment_id": o.event.payment_id,
        "project_id": o.event.project_id,
        "status": o.event.status.as_str(),
        "kind": o.event.kind.as_str(),
        "destination": o.destination.as_str(),
        "host": destination_host(&o.destination),
        "created_at": o.event.created_at,
        "attempts_made": o.attempts,
        "last_attempt": f.last_attempt.as_ref().map(|a| json!({
            "attempt": a.attempt,
            "started_at": a.started_at,
            "duration_ms": a.duration_ms,
            "http_status": a.http_status,
            "error": a.error,
        })),
    })
}

/// The answer of a bulk resend.
pub fn bulk_json(r: &BulkResend) -> Value {
    json!({
        "resent": r.resent.iter().map(|p| json!({
            "payment_id": p.payment_id,
            "failed_event_ids": p.failed,
            "event_id": p.event_id,
        })).collect::<Vec<_>>(),
        "skipped": r.skipped.iter().map(|p| json!({
            "payment_id": p.payment_id,
            "failed_event_ids": p.failed,
            "reason": p.reason,
        })).collect::<Vec<_>>(),
    })
}

/// The hold as JSON: `{"held": bool, "reason": string|null}`.
pub fn hold_json(reason: Option<String>) -> Value {
    json!({ "held": reason.is_some(), "reason": reason })
}

async fn list_failed(State(st): State<AppState>, op: Op, RawQuery(raw): RawQuery) -> OpResult {
    let q = crate::json::query_map(raw.as_deref());
    op.answer(async {
        if let Some(k) = q
            .keys()
            .find(|k| !["project_id", "host", "since", "until", "limit"].contains(&k.as_str()))
        {
            return Err(ApiError::bad_request(format!(
                "{k}: unknown query parameter"
            )));
        }
        let get = |k: &str| q.get(k).map(String::as_str);
        let filter = failed_filter(
            &st.service,
            get("project_id"),
            get("host"),
            get("since"),
            get("until"),
        )
        .await?;
        let limit = match get("limit") {
            None => None,
            Some(l) => Some(l.trim().parse::<u64>().map_err(|_| {
                ApiError::bad_request(format!("limit: must be from 1 to {MAX_FAILED_BATCH}"))
            })?),
        };
        let events = st
            .service
            .callbacks()
            .failed_callbacks(&filter, failed_limit(limit)?)
            .await?;
        let list: Vec<Value> = events.iter().map(failed_json).collect();
        Ok(Json(json!({ "events": list })).into_response())
    })
    .await
}

async fn resend_failed(State(st): State<AppState>, op: Op, body: Bytes) -> OpResult {
    op.answer(async {
        let b = Body::parse(&body, &["project_id", "host", "since", "until", "limit"])?;
        let filter = failed_filter(
            &st.service,
            b.string("project_id")?.as_deref(),
            b.string("host")?.as_deref(),
            b.string("since")?.as_deref(),
            b.string("until")?.as_deref(),
        )
        .await?;
        let limit = failed_limit(b.u64("limit")?)?;
        let report = st
            .service
            .callbacks()
            .resend_failed_callbacks(&filter, limit, &op.actor)
            .await?;
        Ok(Json(bulk_json(&report)).into_response())
    })
    .await
}

async fn show_hold(State(st): State<AppState>, op: Op) -> OpResult {
    op.answer(async {
        Ok(Json(hold_json(st.service.callbacks().callback_hold().await?)).into_response())
    })
    .await
}

async fn hold(State(st): State<AppState>, op: Op, body: Bytes) -> OpResult {
    op.answer(async {
        let b = Body::parse(&body, &["reason"])?;
        let reason = st
            .service
            .callbacks()
            .hold_callbacks(&b.required_string("reason")?, &op.actor)
            .await?;
        Ok(Json(hold_json(Some(reason))).into_response())
    })
    .await
}

async fn release(State(st): State<AppState>, op: Op) -> Result<Response, crate::error::HttpError> {
    op.answer(async {
        st.service.callbacks().release_callbacks(&op.actor).await?;
        Ok(Json(hold_json(None)).into_response())
    })
    .await
}
