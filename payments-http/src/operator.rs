//! The operator API (`/operator/v1/...`, `Authorization: Bearer <operator_token>`) and
//! `/metrics`, served on the operator listener (loopback by default).

use axum::extract::{Path, Request, State};
use axum::http::StatusCode;
use axum::middleware::{self, Next};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use axum::{Json, Router};
use payments_core::amount::Amount;
use payments_core::event::EventRecord;
use payments_core::service::Actor;
use payments_core::transition::{RecheckOutcome, Trigger};
use payments_core::{ApiError, ErrorCode, PaymentId};
use sha2_hex::token_sha256_hex;
use subtle_eq::ct_eq_str;

use crate::error::{HttpError, RequestId};
use crate::state::AppState;

/// The setting holding the operator token's SHA-256 (hex).
pub const OPERATOR_TOKEN_SETTING: &str = "operator.token_sha256";

/// The operator routes.
pub fn routes(state: AppState) -> Router<AppState> {
    let api = Router::new()
        .route("/operator/v1/payments/{id}", get(payment))
        .route("/operator/v1/payments/{id}/confirm", post(confirm))
        .route("/operator/v1/payments/{id}/cancel", post(cancel))
        .route("/operator/v1/payments/{id}/recheck", post(recheck))
        .route("/operator/v1/payments/{id}/recheck/resolve", post(resolve))
        .route("/operator/v1/payments/{id}/callbacks/resend", post(resend))
        .route("/operator/v1/payments/{id}/events", get(events))
        .route_layer(middleware::from_fn_with_state(state, require_operator));
    Router::new().merge(api).route("/metrics", get(metrics))
}

mod sha2_hex {
    /// Hex SHA-256 of an operator token.
    pub fn token_sha256_hex(token: &str) -> String {
        use sha2::Digest;
        hex::encode(sha2::Sha256::digest(token.as_bytes()))
    }
}

mod subtle_eq {
    /// Constant-time string equality.
    pub fn ct_eq_str(a: &str, b: &str) -> bool {
        use subtle::ConstantTimeEq;
        a.len() == b.len() && bool::from(a.as_bytes().ct_eq(b.as_bytes()))
    }
}

pub use sha2_hex::token_sha256_hex as operator_token_hash;

/// Who is calling: the operator token holder.
#[derive(Debug, Clone)]
struct OperatorIdentity(String);

async fn require_operator(State(st): State<AppState>, mut req: Request, next: Next) -> Response {
    let rid = req
        .extensions()
        .get::<RequestId>()
        .cloned()
        .unwrap_or(RequestId(String::new()));
    let presented = req
        .headers()
        .get("authorization")
        .and_then(|v| v.to_str().ok())
        .and_then(|v| {
            v.strip_prefix("Bearer ")
                .or_else(|| v.strip_prefix("bearer "))
        })
        .map(str::trim);
    let expected = match st.service.store().setting(OPERATOR_TOKEN_SETTING).await {
        Ok(v) => v,
        Err(e) => return HttpError::new(e, &rid).into_response(),
    };
    match (presented, expected) {
        (Some(token), Some(hash)) if ct_eq_str(&token_sha256_hex(token), &hash) => {
            let who = format!("operator:{}", &token.chars().take(9).collect::<String>());
            req.extensions_mut().insert(OperatorIdentity(who));
            next.run(req).await
        }
        _ => HttpError::new(
            ApiError::new(ErrorCode::TokenInvalid, "missing or invalid operator token"),
            &rid,
        )
        .into_response(),
    }
}

fn parse_id(id: &str) -> Result<PaymentId, ApiError> {
    id.parse()
        .map_err(|_| ApiError::new(ErrorCode::PaymentNotFound, "payment not found"))
}

/// An optional JSON body (empty allowed).
fn body_json(body: &[u8]) -> Result<serde_json::Value, ApiError> {
    if body.iter().all(u8::is_ascii_whitespace) {
        return Ok(serde_json::json!({}));
    }
    let v: serde_json::Value = serde_json::from_slice(body)
        .map_err(|e| ApiError::bad_request(format!("body must be JSON: {e}")))?;
    if !v.is_object() {
        return Err(ApiError::bad_request("body must be a JSON object"));
    }
    Ok(v)
}

fn optional_amount(v: &serde_json::Value) -> Result<Option<Amount>, ApiError> {
    match v.get("amount") {
        None | Some(serde_json::Value::Null) => Ok(None),
        Some(a) => Amount::from_json(a)
            .map(Some)
            .map_err(|e| ApiError::bad_request(format!("amount: {e}"))),
    }
}

type OpResult = Result<Response, HttpError>;

async fn operate(
    st: &AppState,
    rid: &RequestId,
    who: &OperatorIdentity,
    id: &str,
    trigger: Result<Trigger, ApiError>,
) -> OpResult {
    let err = |e: ApiError| HttpError::new(e, rid);
    let id = parse_id(id).map_err(err)?;
    let trigger = trigger.map_err(err)?;
    let result = st
        .service
        .operate(id, trigger, &Actor(who.0.clone()))
        .await
        .map_err(err)?;
    if result.event.is_some() {
        st.outbox_notify.notify_one();
    }
    Ok(Json(serde_json::json!({
        "payment": result.payment.view(),
        "event_id": result.event.as_ref().map(|e| e.event.event_id),
    }))
    .into_response())
}

async fn payment(
    State(st): State<AppState>,
    axum::Extension(rid): axum::Extension<RequestId>,
    Path(id): Path<String>,
) -> OpResult {
    let err = |e: ApiError| HttpError::new(e, &rid);
    let id = parse_id(&id).map_err(err)?;
    let p = st
        .service
        .store()
        .payment(id)
        .await
        .map_err(|e| err(e.into()))?
        .ok_or_else(|| {
            err(ApiError::new(
                ErrorCode::PaymentNotFound,
                "payment not found",
            ))
        })?;
    Ok(Json(p.view()).into_response())
}

async fn confirm(
    State(st): State<AppState>,
    axum::Extension(rid): axum::Extension<RequestId>,
    axum::Extension(who): axum::Extension<OperatorIdentity>,
    Path(id): Path<String>,
    body: axum::body::Bytes,
) -> OpResult {
    let trigger = body_json(&body)
        .and_then(|v| optional_amount(&v))
        .map(|amount| Trigger::Confirm { amount });
    operate(&st, &rid, &who, &id, trigger).await
}

async fn cancel(
    State(st): State<AppState>,
    axum::Extension(rid): axum::Extension<RequestId>,
    axum::Extension(who): axum::Extension<OperatorIdentity>,
    Path(id): Path<String>,
) -> OpResult {
    operate(&st, &rid, &who, &id, Ok(Trigger::Cancel)).await
}

async fn recheck(
    State(st): State<AppState>,
    axum::Extension(rid): axum::Extension<RequestId>,
    axum::Extension(who): axum::Extension<OperatorIdentity>,
    Path(id): Path<String>,
) -> OpResult {
    operate(&st, &rid, &who, &id, Ok(Trigger::StartRecheck)).await
}

async fn resolve(
    State(st): State<AppState>,
    axum::Extension(rid): axum::Extension<RequestId>,
    axum::Extension(who): axum::Extension<OperatorIdentity>,
    Path(id): Path<String>,
    body: axum::body::Bytes,
) -> OpResult {
    let trigger = body_json(&body).and_then(|v| {
        let outcome = match v.get("status").and_then(|s| s.as_str()) {
            Some("completed") => RecheckOutcome::Completed {
                amount: optional_amount(&v)?,
            },
            Some("canceled") => RecheckOutcome::Canceled,
            Some("unchanged") => RecheckOutcome::Unchanged,
            _ => {
                return Err(ApiError::bad_request(
                    "status must be \"completed\", \"canceled\" or \"unchanged\"",
                ))
            }
        };
        Ok(Trigger::ResolveRecheck(outcome))
    });
    operate(&st, &rid, &who, &id, trigger).await
}

async fn resend(
    State(st): State<AppState>,
    axum::Extension(rid): axum::Extension<RequestId>,
    axum::Extension(who): axum::Extension<OperatorIdentity>,
    Path(id): Path<String>,
) -> OpResult {
    operate(&st, &rid, &who, &id, Ok(Trigger::ResendCallback)).await
}

/// An event with its attempts as JSON.
pub fn event_json(r: &EventRecord) -> serde_json::Value {
    let attempts: Vec<serde_json::Value> = r
        .attempts
        .iter()
        .map(|a| {
            serde_json::json!({
                "attempt": a.attempt,
                "started_at": a.started_at,
                "duration_ms": a.duration_ms,
                "http_status": a.http_status,
                "error": a.error,
                "success": a.success,
            })
        })
        .collect();
    let o = &r.outbox;
    serde_json::json!({
        "event_id": o.event.event_id,
        "status": o.event.status.as_str(),
        "kind": o.event.kind.as_str(),
        "destination": o.destination.as_str(),
        "state": o.state.as_str(),
        "attempts_made": o.attempts,
        "max_attempts": o.max_attempts,
        "next_attempt_at": o.next_attempt_at,
        "created_at": o.event.created_at,
        "body": String::from_utf8_lossy(&o.event.body),
        "attempts": attempts,
    })
}

async fn events(
    State(st): State<AppState>,
    axum::Extension(rid): axum::Extension<RequestId>,
    Path(id): Path<String>,
) -> OpResult {
    let err = |e: ApiError| HttpError::new(e, &rid);
    let id = parse_id(&id).map_err(err)?;
    let records = st
        .service
        .store()
        .events_for_payment(id)
        .await
        .map_err(|e| err(e.into()))?;
    let list: Vec<serde_json::Value> = records.iter().map(event_json).collect();
    Ok(Json(serde_json::json!({ "events": list })).into_response())
}

async fn metrics(State(st): State<AppState>) -> Response {
    let store = st.service.store();
    let by_status = store
        .count_by_status()
        .await
        .unwrap_or_default()
        .into_iter()
        .map(|(s, n)| (s.as_str().to_string(), n))
        .collect::<Vec<_>>();
    let pending = store.pending_events().await.unwrap_or(0);
    (
        StatusCode::OK,
        [("content-type", "text/plain; version=0.0.4")],
        st.metrics.render(&by_status, pending),
    )
        .into_response()
}
