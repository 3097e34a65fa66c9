//! The provider-notification endpoint, `POST /upstream/v1/notifications`, served on its own
//! listener (`upstream_listen`) that the merchant API does not share: the upstream reports a
//! confirmed or failed transfer, signed like our callbacks. The handler hands the headers and
//! the raw body to [`Payments::apply_provider_notification`](payments_core::service::Payments::apply_provider_notification), which verifies, decides
//! and records; errors are the JSON error body of the other APIs (docs/providers.md,
//! "Notifications").
//!
//! [`Payments::apply_provider_notification`]: payments_core::service::Payments::apply_provider_notification

use std::collections::HashMap;
use std::sync::Arc;

use axum::body::Bytes;
use axum::extract::{DefaultBodyLimit, Path, State};
use axum::http::HeaderMap;
use axum::response::{IntoResponse, Response};
use axum::routing::post;
use axum::{Extension, Json, Router};
use payments_core::callback::{CallbackVerifier, SIGNATURE_HEADER, TIMESTAMP_HEADER};
use payments_core::provider::ProviderName;
use payments_core::service::{SignedNotification, TransferReport};
use payments_core::ApiError;

use super::MAX_ANSWER_BYTES;
use payments_http::error::HttpError;
use payments_http::state::AppState;

/// The path of the notification endpoint.
pub const NOTIFICATIONS_PATH: &str = "/upstream/v1/notifications";

/// The verifiers of the notification routes: `[upstream] secrets` for the unnamed path, and
/// each `[[upstream.providers]]` entry's own secrets for its path.
#[derive(Debug, Clone, Default)]
pub struct Verifiers {
    /// `POST /upstream/v1/notifications` (none: the path answers 404).
    pub unnamed: Option<CallbackVerifier>,
    /// `POST /upstream/v1/notifications/{provider}`.
    pub by_provider: HashMap<String, (ProviderName, CallbackVerifier)>,
}

impl Verifiers {
    /// The verifiers the settings give.
    pub fn of(settings: &crate::config::Settings) -> Verifiers {
        let u = &settings.upstream;
        Verifiers {
            unnamed: (!u.secrets.is_empty()).then(|| CallbackVerifier::new(u.secrets.clone())),
            by_provider: u
                .providers
                .iter()
                .filter_map(|p| {
                    let name = p.provider_name().ok()?;
                    Some((
                        p.name.clone(),
                        (name, CallbackVerifier::new(p.secrets.clone())),
                    ))
                })
                .collect(),
        }
    }
}

/// The notification routes: the unnamed path verified with the upstream's secrets, and one
/// path per named provider, verified with that provider's secrets only.
pub fn routes(verifiers: Verifiers) -> Router<AppState> {
    Router::new()
        .route(NOTIFICATIONS_PATH, post(notification))
        .route(
            &format!("{NOTIFICATIONS_PATH}/{{provider}}"),
            post(provider_notification),
        )
        .layer(DefaultBodyLimit::max(MAX_ANSWER_BYTES))
        .layer(Extension(Arc::new(verifiers)))
}

async fn notification(
    State(st): State<AppState>,
    Extension(verifiers): Extension<Arc<Verifiers>>,
    headers: HeaderMap,
    body: Bytes,
) -> Result<Response, HttpError> {
    let Some(verifier) = &verifiers.unnamed else {
        return Err(HttpError::from(ApiError::new(
            payments_core::ErrorCode::NotFound,
            "no upstream secrets are configured: notifications go to \
             /upstream/v1/notifications/<provider>",
        )));
    };
    apply(&st, verifier, None, &headers, &body).await
}

async fn provider_notification(
    State(st): State<AppState>,
    Extension(verifiers): Extension<Arc<Verifiers>>,
    Path(provider): Path<String>,
    headers: HeaderMap,
    body: Bytes,
) -> Result<Response, HttpError> {
    let Some((name, verifier)) = verifiers.by_provider.get(&provider) else {
        return Err(HttpError::from(ApiError::new(
            payments_core::ErrorCode::NotFound,
            format!("no provider {provider:?} is configured"),
        )));
    };
    apply(&st, verifier, Some(name), &headers, &body).await
}

async fn apply(
    st: &AppState,
    verifier: &CallbackVerifier,
    from: Option<&ProviderName>,
    headers: &HeaderMap,
    body: &Bytes,
) -> Result<Response, HttpError> {
    let header = |name: &str| {
        headers
            .get(name)
            .and_then(|v| v.to_str().ok())
            .unwrap_or("")
    };
    let out = st
        .service
        .payments()
        .apply_provider_notification_from(
            verifier,
            SignedNotification {
                timestamp: header(TIMESTAMP_HEADER),
                signature: header(SIGNATURE_HEADER),
                body,
            },
            from,
        )
        .await?;
    if out.applied && out.payment.status == payments_core::payment::PaymentStatus::Completed {
        if let Some(route) = &out.payment.route {
            st.metrics
                .observe_provider_completed(route.provider.as_str());
        }
    }
    let n = &out.notification;
    let reason = match &n.report {
        TransferReport::Failed { reason } => reason.as_deref().unwrap_or(""),
        _ => "",
    };
    tracing::info!(
        provider = from.map_or("-", |p| p.as_str()),
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
