//! The provider-notification endpoints, served on their own listener (`upstream_listen`) that
//! the merchant API does not share, signed like our callbacks:
//!
//! - `POST /upstream/v1/notifications`: the upstream reports a confirmed or failed transfer;
//!   [`Payments::apply_provider_notification`] verifies, decides and records.
//! - `POST /upstream/v1/appeals`: the upstream answers an appeal sent to it (found, with the
//!   amount that arrived, or not found); [`Appeals::apply_appeal_answer`] verifies, decides
//!   and records.
//!
//! Each also at `.../{provider}` for a named provider, verified with its own secrets. The
//! handlers hand the headers and the raw body to the core; errors are the JSON error body of
//! the other APIs (docs/providers.md, "Notifications" and "Appeals").
//!
//! [`Payments::apply_provider_notification`]: payments_core::service::Payments::apply_provider_notification
//! [`Appeals::apply_appeal_answer`]: payments_core::service::Appeals::apply_appeal_answer

use std::collections::HashMap;
use std::sync::Arc;

use axum::body::Bytes;
use axum::extract::{DefaultBodyLimit, Path, State};
use axum::http::HeaderMap;
use axum::response::{IntoResponse, Response};
use axum::routing::post;
use axum::{Extension, Json, Router};
use payments_core::callback::{CallbackVerifier, SIGNATURE_HEADER, TIMESTAMP_HEADER};
use payments_core::payment::{Payment, PaymentStatus};
use payments_core::provider::ProviderName;
use payments_core::service::{
    AppealAnswerOutcome, NotificationOutcome, SignedNotification, TransferReport,
};
use payments_core::ApiError;

use super::MAX_ANSWER_BYTES;
use payments_http::error::HttpError;
use payments_http::state::AppState;

/// The path of the notification endpoint.
pub const NOTIFICATIONS_PATH: &str = "/upstream/v1/notifications";

/// The path of the appeal-answer endpoint.
pub const APPEALS_PATH: &str = "/upstream/v1/appeals";

/// The verifiers of the notification routes: `[upstream] secrets` for the unnamed paths, and
/// each `[[upstream.providers]]` entry's own secrets for its paths.
#[derive(Debug, Clone, Default)]
pub struct Verifiers {
    /// `POST /upstream/v1/notifications` and `/upstream/v1/appeals` (none: they answer 404).
    pub unnamed: Option<CallbackVerifier>,
    /// `POST /upstream/v1/notifications/{provider}` and `/upstream/v1/appeals/{provider}`.
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

    /// The verifier of the unnamed `path`, or `404` when no upstream secrets are configured.
    fn unnamed(&self, path: &str) -> Result<&CallbackVerifier, HttpError> {
        self.unnamed.as_ref().ok_or_else(|| {
            HttpError::from(ApiError::new(
                payments_core::ErrorCode::NotFound,
                format!("no upstream secrets are configured: send to {path}/<provider>"),
            ))
        })
    }

    /// The name and verifier of the provider `provider`, or `404` when none is configured.
    fn named(&self, provider: &str) -> Result<(&ProviderName, &CallbackVerifier), HttpError> {
        match self.by_provider.get(provider) {
            Some((name, verifier)) => Ok((name, verifier)),
            None => Err(HttpError::from(ApiError::new(
                payments_core::ErrorCode::NotFound,
                format!("no provider {provider:?} is configured"),
            ))),
        }
    }
}

/// What the signed requests of a route report.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Kind {
    /// A confirmed or failed transfer ([`NOTIFICATIONS_PATH`]).
    Transfer,
    /// The answer to an appeal ([`APPEALS_PATH`]).
    Appeal,
}

impl Kind {
    /// The unnamed path; a named provider's is below it.
    fn path(self) -> &'static str {
        match self {
            Kind::Transfer => NOTIFICATIONS_PATH,
            Kind::Appeal => APPEALS_PATH,
        }
    }

    /// Applies a request verified with `verifier`, sent by the provider `from` if named
    /// (the core verifies, decides and records), and answers what it did.
    async fn apply(
        self,
        st: &AppState,
        verifier: &CallbackVerifier,
        from: Option<&ProviderName>,
        signed: SignedNotification<'_>,
    ) -> Result<Response, HttpError> {
        Ok(match self {
            Kind::Transfer => {
                let payments = st.service.payments();
                let out = payments.apply_provider_notification_from(verifier, signed, from);
                transfer_answer(st, from, &out.await?)
            }
            Kind::Appeal => {
                let out = st
                    .service
                    .appeals()
                    .apply_appeal_answer(verifier, signed, from);
                appeal_answer(st, from, &out.await?)
            }
        })
    }
}

/// The notification routes: for transfers and for appeals' answers, the unnamed path
/// verified with the upstream's secrets, and one path per named provider, verified with that
/// provider's secrets only.
pub fn routes(verifiers: Verifiers) -> Router<AppState> {
    let mut router = Router::new();
    for kind in [Kind::Transfer, Kind::Appeal] {
        router = router
            .route(kind.path(), post(unnamed).layer(Extension(kind)))
            .route(
                &format!("{}/{{provider}}", kind.path()),
                post(named).layer(Extension(kind)),
            );
    }
    router
        .layer(DefaultBodyLimit::max(MAX_ANSWER_BYTES))
        .layer(Extension(Arc::new(verifiers)))
}

/// `POST /upstream/v1/notifications` and `POST /upstream/v1/appeals`.
async fn unnamed(
    State(st): State<AppState>,
    Extension(verifiers): Extension<Arc<Verifiers>>,
    Extension(kind): Extension<Kind>,
    headers: HeaderMap,
    body: Bytes,
) -> Result<Response, HttpError> {
    let verifier = verifiers.unnamed(kind.path())?;
    kind.apply(&st, verifier, None, signed(&headers, &body))
        .await
}

/// `POST /upstream/v1/notifications/{provider}` and `POST /upstream/v1/appeals/{provider}`.
async fn named(
    State(st): State<AppState>,
    Extension(verifiers): Extension<Arc<Verifiers>>,
    Extension(kind): Extension<Kind>,
    Path(provider): Path<String>,
    headers: HeaderMap,
    body: Bytes,
) -> Result<Response, HttpError> {
    let (name, verifier) = verifiers.named(&provider)?;
    kind.apply(&st, verifier, Some(name), signed(&headers, &body))
        .await
}

/// The request as the core verifies it: the signature headers' values (empty when missing)
/// and the raw body.
fn signed<'a>(headers: &'a HeaderMap, body: &'a Bytes) -> SignedNotification<'a> {
    let header = |name: &str| {
        headers
            .get(name)
            .and_then(|v| v.to_str().ok())
            .unwrap_or("")
    };
    SignedNotification {
        timestamp: header(TIMESTAMP_HEADER),
        signature: header(SIGNATURE_HEADER),
        body,
    }
}

/// Counts a payment that a provider's request `applied` now made `completed`, for its route's
/// provider.
fn observe_completed(st: &AppState, applied: bool, payment: &Payment) {
    if applied && payment.status == PaymentStatus::Completed {
        if let Some(route) = &payment.route {
            st.metrics
                .observe_provider_completed(route.provider.as_str());
        }
    }
}

/// Logs an applied (or repeated) transfer notification and answers it.
fn transfer_answer(
    st: &AppState,
    from: Option<&ProviderName>,
    out: &NotificationOutcome,
) -> Response {
    observe_completed(st, out.applied, &out.payment);
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
    Json(serde_json::json!({
        "notification_id": n.notification_id,
        "applied": out.applied,
        "payment_id": out.payment.id.to_string(),
        "status": out.payment.status.to_string(),
        "amount": out.payment.amount,
    }))
    .into_response()
}

/// Logs an applied (or repeated) answer to an appeal and answers it.
fn appeal_answer(
    st: &AppState,
    from: Option<&ProviderName>,
    out: &AppealAnswerOutcome,
) -> Response {
    observe_completed(st, out.applied, &out.payment);
    let a = &out.answer;
    tracing::info!(
        provider = from.map_or("-", |p| p.as_str()),
        notification_id = %a.notification_id,
        appeal_id = %a.appeal_id,
        payment_id = %out.payment.id,
        found = a.found.is_some(),
        applied = out.applied,
        state = %out.appeal.state,
        status = %out.payment.status,
        reason = a.reason.as_deref().unwrap_or(""),
        "provider appeal answer"
    );
    Json(serde_json::json!({
        "notification_id": a.notification_id,
        "applied": out.applied,
        "appeal_id": a.appeal_id.to_string(),
        "state": out.appeal.state.as_str(),
        "payment_id": out.payment.id.to_string(),
        "status": out.payment.status.to_string(),
        "amount": out.payment.amount,
    }))
    .into_response()
}
