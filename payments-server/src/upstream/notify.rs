//! The provider-notification endpoint, `POST /upstream/v1/notifications`, served on its own
//! listener (`upstream_listen`) that the merchant API does not share: the upstream reports a
//! confirmed or failed transfer, signed like our callbacks. The handler hands the headers and
//! the raw body to [`PaymentService::apply_provider_notification`], which verifies, decides
//! and records; errors are the JSON error body of the other APIs (docs/providers.md,
//! "Notifications").
//!
//! [`PaymentService::apply_provider_notification`]: payments_core::service::PaymentService::apply_provider_notification

use std::sync::Arc;

use axum::body::Bytes;
use axum::extract::{DefaultBodyLimit, State};
use axum::http::HeaderMap;
use axum::response::{IntoResponse, Response};
use axum::routing::post;
use axum::{Extension, Json, Router};
use payments_core::callback::{CallbackVerifier, SIGNATURE_HEADER, TIMESTAMP_HEADER};
use payments_core::service::{SignedNotification, TransferReport};

use super::MAX_ANSWER_BYTES;
use payments_http::error::HttpError;
use payments_http::state::AppState;

/// The path of the notification endpoint.
pub const NOTIFICATIONS_PATH: &str = "/upstream/v1/notifications";

/// The notification routes, verifying with `verifier` (the upstream's secrets).
pub fn routes(verifier: CallbackVerifier) -> Router<AppState> {
    Router::new()
        .route(NOTIFICATIONS_PATH, post(notification))
        .layer(DefaultBodyLimit::max(MAX_ANSWER_BYTES))
        .layer(Extension(Arc::new(verifier)))
}

async fn notification(
    State(st): State<AppState>,
    Extension(verifier): Extension<Arc<CallbackVerifier>>,
    headers: HeaderMap,
    body: Bytes,
) -> Result<Response, HttpError> {
    let header = |name: &str| {
        headers
            .get(name)
            .and_then(|v| v.to_str().ok())
            .unwrap_or("")
    };
    let out = st
        .service
        .apply_provider_notification(
            &verifier,
            SignedNotification {
                timestamp: header(TIMESTAMP_HEADER),
                signature: header(SIGNATURE_HEADER),
                body: &body,
            },
        )
        .await?;
    let n = &out.notification;
    let reason = match &n.report {
        TransferReport::Failed { reason } => reason.as_deref().unwrap_or(""),
        _ => "",
    };
    tracing::info!(
        notification_id = %n.notification_id,
        payment_id = %out.payment.id,
        applied = out.applied,
        status = %out.payment.status,
        reason,
        "provider notification"
    );
    Ok(Json(serde_json::json!({
        "notification_id": n.notification_id,
        "applied": out.applied,
        "payment_id": out.payment.id.to_string(),
        "status": out.payment.status.to_string(),
        "amount": out.payment.amount,
    }))
    .into_response())
}
