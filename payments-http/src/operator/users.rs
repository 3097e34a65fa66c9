//! The web cabinet's users on the operator API: create (with a one-time invitation link to
//! set the password), list, a new invitation link (also a password reset), disable and enable.
//! The rules are the cabinet's ([`payments_cabinet::Cabinet`]); the CLI's `user` commands call
//! the same functions.

use axum::body::Bytes;
use axum::extract::{Path, State};
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use axum::routing::{get, patch, post, MethodRouter};
use axum::Router;

use crate::json::Json;
use payments_cabinet::accounts::{user_value, Invite};
use payments_cabinet::{Cabinet, CabinetConfig};
use std::sync::Arc;

use payments_cabinet::store::{CabinetStore, Role};
use payments_core::service::Actor;
use payments_core::service::PaymentService;
use payments_core::{ApiError, ErrorCode, UserId};
use serde_json::{json, Value};

use super::body::Body;
use super::{lookup, Op, OpResult};
use crate::state::AppState;

/// The user routes as `(method, path template)`, behind the operator token.
pub const ROUTES: &[(&str, &str)] = &[
    ("POST", "/operator/v1/users"),
    ("GET", "/operator/v1/users"),
    ("PATCH", "/operator/v1/users/{id}"),
    ("POST", "/operator/v1/users/{id}/invite"),
];

/// The handler of one route of [`ROUTES`].
pub(crate) fn handler(method: &str, path: &str) -> Option<MethodRouter<AppState>> {
    Some(match (method, path) {
        ("POST", "/operator/v1/users") => post(create),
        ("GET", "/operator/v1/users") => get(list),
        ("PATCH", "/operator/v1/users/{id}") => patch(update),
        ("POST", "/operator/v1/users/{id}/invite") => post(invite),
        _ => return None,
    })
}

/// The user routes: exactly [`ROUTES`].
pub fn routes() -> Router<AppState> {
    super::add_routes(Router::new(), ROUTES, handler)
}

/// The cabinet over `service` and the cabinet's store, or `503` when the server was given no
/// cabinet store (an embedding whose store keeps no cabinet records).
pub fn cabinet(
    service: &PaymentService,
    store: Option<&Arc<dyn CabinetStore>>,
) -> Result<Cabinet, ApiError> {
    let store = store.ok_or_else(|| {
        ApiError::new(
            ErrorCode::ServiceUnavailable,
            "web cabinet: this server has no store for the cabinet's records",
        )
    })?;
    Ok(Cabinet::new(
        service.clone(),
        store.clone(),
        CabinetConfig::default(),
    ))
}

/// An invitation as JSON: the user, the one-time link (shown once) and its expiry.
pub fn invite_json(invite: &Invite, cabinet_url: Option<&str>) -> Value {
    let path = format!("/invite/{}", invite.token.expose());
    json!({
        "user": user_value(&invite.user),
        "invite_url": cabinet_url.map(|base| format!("{base}{path}")),
        "invite_path": path,
        "invite_expires_at": invite.expires_at,
    })
}

/// A user id as given; unknown or malformed `404 not_found`.
pub fn user_id(id: &str) -> Result<UserId, ApiError> {
    id.trim()
        .parse()
        .map_err(|_| ApiError::new(ErrorCode::NotFound, "user not found"))
}

/// Creates a user: `role` `merchant` (with `merchant_id`) or `support`.
pub async fn create_user(
    cabinet: &Cabinet,
    email: &str,
    role: &str,
    merchant_id: Option<&str>,
    actor: &Actor,
    cabinet_url: Option<&str>,
) -> Result<Value, ApiError> {
    let role = match (role, merchant_id) {
        ("merchant", Some(m)) => Role::Merchant(lookup::merchant(cabinet.service(), m).await?.id),
        ("merchant", None) => {
            return Err(ApiError::bad_request(
                "merchant_id: is required for a merchant user",
            ))
        }
        ("support", None) => Role::Support,
        ("support", Some(_)) => {
            return Err(ApiError::bad_request(
                "merchant_id: a support user belongs to no merchant",
            ))
        }
        _ => return Err(ApiError::bad_request("role: must be merchant or support")),
    };
    let invite = cabinet.users().create(email, role, actor).await?;
    Ok(invite_json(&invite, cabinet_url))
}

/// Every user.
pub async fn list_users(cabinet: &Cabinet) -> Result<Value, ApiError> {
    let users: Vec<Value> = cabinet
        .users()
        .list()
        .await?
        .iter()
        .map(user_value)
        .collect();
    Ok(json!({ "users": users }))
}

/// A new invitation link for a user.
pub async fn invite_user(
    cabinet: &Cabinet,
    id: &str,
    actor: &Actor,
    cabinet_url: Option<&str>,
) -> Result<Value, ApiError> {
    let invite = cabinet.users().invite(user_id(id)?, actor).await?;
    Ok(invite_json(&invite, cabinet_url))
}

/// Disables or enables a user.
pub async fn set_disabled(
    cabinet: &Cabinet,
    id: &str,
    disabled: bool,
    actor: &Actor,
) -> Result<Value, ApiError> {
    let user = cabinet
        .users()
        .set_disabled(user_id(id)?, disabled, actor)
        .await?;
    Ok(user_value(&user))
}

fn created(v: Value) -> Response {
    (StatusCode::CREATED, Json(v)).into_response()
}

async fn create(State(st): State<AppState>, op: Op, body: Bytes) -> OpResult {
    op.answer(async {
        let b = Body::parse(&body, &["email", "role", "merchant_id"])?;
        let v = create_user(
            &cabinet(&st.service, st.cabinet_store.as_ref())?,
            &b.required_string("email")?,
            &b.required_string("role")?,
            b.string("merchant_id")?.as_deref(),
            &op.actor,
            st.cabinet_url.as_deref(),
        )
        .await?;
        Ok(created(v))
    })
    .await
}

async fn list(State(st): State<AppState>, op: Op) -> OpResult {
    op.answer(async {
        let cabinet = cabinet(&st.service, st.cabinet_store.as_ref())?;
        Ok(Json(list_users(&cabinet).await?).into_response())
    })
    .await
}

async fn update(
    State(st): State<AppState>,
    op: Op,
    Path(id): Path<String>,
    body: Bytes,
) -> OpResult {
    op.answer(async {
        let b = Body::parse(&body, &["disabled"])?;
        let disabled = b
            .bool("disabled")?
            .ok_or_else(|| ApiError::bad_request("disabled: is required"))?;
        let cabinet = cabinet(&st.service, st.cabinet_store.as_ref())?;
        Ok(Json(set_disabled(&cabinet, &id, disabled, &op.actor).await?).into_response())
    })
    .await
}

async fn invite(
    State(st): State<AppState>,
    op: Op,
    Path(id): Path<String>,
    body: Bytes,
) -> OpResult {
    op.answer(async {
        Body::parse(&body, &[])?;
        let cabinet = cabinet(&st.service, st.cabinet_store.as_ref())?;
        let v = invite_user(&cabinet, &id, &op.actor, st.cabinet_url.as_deref()).await?;
        Ok(created(v))
    })
    .await
}
