//! What fills and serves the registry of [`crate::metrics`] from the application's state: the
//! request-metrics middleware ([`observe`]), the store gauges read at scrape time
//! ([`store_gauges`]) and `GET /metrics` ([`serve`]).

use std::time::Instant;

use axum::extract::{MatchedPath, Request, State};
use axum::middleware::Next;
use axum::response::Response;

use crate::metrics::{MethodLabel, Route, StoreGauges, CONTENT_TYPE};
use crate::state::AppState;

/// Request metrics (no headers, no bodies: no secrets). The access log line is written by
/// [`crate::error::answer_errors`], which sees every answer, refusals included.
pub async fn observe(State(st): State<AppState>, req: Request, next: Next) -> Response {
    let start = Instant::now();
    let route = match req.extensions().get::<MatchedPath>() {
        Some(p) => Route::Matched(p.clone()),
        None => Route::Unmatched,
    };
    let method = MethodLabel::of(req.method());
    let resp = next.run(req).await;
    let latency = start.elapsed();
    let status = resp.status().as_u16();
    st.metrics.observe_request(route, method, status, latency);
    resp
}

/// How long a scrape waits for the store gauges: a hung database leaves them out instead of
/// failing the whole scrape (Prometheus's `scrape_timeout` is 10 s by default), so the
/// heartbeat's `payments_store_unanswered_seconds` still reaches the alert.
pub const STORE_GAUGES_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(1);

/// Reads the store gauges, cheaply and all at once ([`payments_core::store::Store::backlog`]);
/// when the store cannot give them within [`STORE_GAUGES_TIMEOUT`], they are left out of the
/// exposition.
pub async fn store_gauges(st: &AppState) -> StoreGauges {
    let service = &st.service;
    let store = service.store();
    let now = service.ports().clock.now();
    let reads = async { tokio::join!(store.backlog(), service.callbacks().callback_hold()) };
    let (backlog, hold) = match tokio::time::timeout(STORE_GAUGES_TIMEOUT, reads).await {
        Ok((backlog, hold)) => (backlog.ok(), hold.ok()),
        Err(_) => (None, None),
    };
    let age = |t: Option<payments_core::Timestamp>| {
        t.map_or(0.0, |t| {
            if t < now {
                now.duration_since(t).as_secs_f64()
            } else {
                0.0
            }
        })
    };
    let mut database_bytes = Vec::new();
    if let Some(db) = &st.database_file {
        let mut wal = db.as_os_str().to_owned();
        wal.push("-wal");
        for (file, path) in [("database", db.to_path_buf()), ("wal", wal.into())] {
            // A missing WAL (after a checkpoint with truncate) is an empty one.
            let len = std::fs::metadata(&path).map_or(0, |m| m.len());
            database_bytes.push((file, len));
        }
    }
    StoreGauges {
        payments_by_status: backlog
            .as_ref()
            .map(|b| {
                b.by_status
                    .iter()
                    .map(|(s, n)| (s.as_str().to_string(), *n))
                    .collect()
            })
            .unwrap_or_default(),
        outbox_pending: backlog.as_ref().map(|b| b.pending_events),
        outbox_failed: backlog.as_ref().map(|b| b.failed_events),
        oldest_pending_age: backlog.as_ref().map(|b| age(b.oldest_pending_event)),
        sweeper_lag: backlog.as_ref().map(|b| age(b.oldest_due_payment)),
        dispatch_held: hold.map(|h| h.is_some()),
        database_bytes,
    }
}

/// `GET /metrics`: behind `metrics_token` when one is set (`401 token_invalid` otherwise,
/// compared in constant time), then the exposition.
pub async fn serve(
    st: &AppState,
    headers: &axum::http::HeaderMap,
) -> Result<Response, crate::error::HttpError> {
    use axum::response::IntoResponse;
    use subtle::ConstantTimeEq;
    if let Some(expected) = &st.metrics_token {
        let presented = headers
            .get("authorization")
            .and_then(|v| v.to_str().ok())
            .and_then(|v| v.split_once(' '))
            .filter(|(scheme, _)| scheme.eq_ignore_ascii_case("bearer"))
            .map(|(_, t)| t.trim_matches(' ').as_bytes())
            .unwrap_or_default();
        let want = expected.expose().as_bytes();
        if !(presented.len() == want.len() && bool::from(presented.ct_eq(want))) {
            return Err(payments_core::ApiError::new(
                payments_core::ErrorCode::TokenInvalid,
                "missing or invalid metrics token",
            )
            .into());
        }
    }
    let gauges = store_gauges(st).await;
    Ok((
        axum::http::StatusCode::OK,
        [("content-type", CONTENT_TYPE)],
        st.metrics
            .render(&gauges, st.service.gate().signature_batches()),
    )
        .into_response())
}
