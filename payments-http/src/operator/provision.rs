//! The cabinet's functions on the operator API: merchants, projects, tokens, keys, callback
//! secrets and the audit trail. Each handler reads its input strictly and calls the core's
//! provisioning function, which checks the values and writes the audit record.

use payments_directory::DirectoryAccess;
use std::collections::HashMap;

use axum::body::Bytes;
use axum::extract::{Path, RawQuery, State};
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use axum::routing::{delete, get, patch, post, MethodRouter};
use axum::Router;

use crate::json::Json;
use payments_core::auth::keys::KeyConfirmation;
use payments_core::ApiError;
use payments_directory::{project_value, TokenRequest};
use serde_json::{json, Value};
use std::time::Duration;

use super::body::{self, Body};
use super::{lookup, view, Op, OpResult};
use crate::state::AppState;

/// Audit records answered when `limit` is not given.
pub const DEFAULT_AUDIT_LIMIT: usize = 50;

/// The provisioning routes as `(method, path template)` (mounted behind the operator-token
/// check); [`routes`] is built from this list.
pub const ROUTES: &[(&str, &str)] = &[
    ("POST", "/operator/v1/merchants"),
    ("GET", "/operator/v1/merchants"),
    ("GET", "/operator/v1/merchants/{id}"),
    ("PATCH", "/operator/v1/merchants/{id}"),
    ("POST", "/operator/v1/projects"),
    ("GET", "/operator/v1/projects"),
    ("GET", "/operator/v1/projects/{id}"),
    ("PATCH", "/operator/v1/projects/{id}"),
    ("POST", "/operator/v1/projects/{id}/tokens"),
    ("GET", "/operator/v1/projects/{id}/tokens"),
    ("DELETE", "/operator/v1/projects/{id}/tokens/{token_id}"),
    ("POST", "/operator/v1/projects/{id}/keys"),
    ("GET", "/operator/v1/projects/{id}/keys"),
    ("DELETE", "/operator/v1/projects/{id}/keys/{keyid}"),
    ("POST", "/operator/v1/projects/{id}/callback-secret"),
    ("GET", "/operator/v1/audit"),
];

/// The handler of one route of [`ROUTES`]; `None` for a pair that has none.
pub(crate) fn handler(method: &str, path: &str) -> Option<MethodRouter<AppState>> {
    Some(match (method, path) {
        ("POST", "/operator/v1/merchants") => post(create_merchant),
        ("GET", "/operator/v1/merchants") => get(list_merchants),
        ("GET", "/operator/v1/merchants/{id}") => get(show_merchant),
        ("PATCH", "/operator/v1/merchants/{id}") => patch(update_merchant),
        ("POST", "/operator/v1/projects") => post(create_project),
        ("GET", "/operator/v1/projects") => get(list_projects),
        ("GET", "/operator/v1/projects/{id}") => get(show_project),
        ("PATCH", "/operator/v1/projects/{id}") => patch(update_project),
        ("POST", "/operator/v1/projects/{id}/tokens") => post(issue_token),
        ("GET", "/operator/v1/projects/{id}/tokens") => get(list_tokens),
        ("DELETE", "/operator/v1/projects/{id}/tokens/{token_id}") => delete(revoke_token),
        ("POST", "/operator/v1/projects/{id}/keys") => post(register_key),
        ("GET", "/operator/v1/projects/{id}/keys") => get(list_keys),
        ("DELETE", "/operator/v1/projects/{id}/keys/{keyid}") => delete(revoke_key),
        ("POST", "/operator/v1/projects/{id}/callback-secret") => post(rotate_callback_secret),
        ("GET", "/operator/v1/audit") => get(audit),
        _ => return None,
    })
}

/// The provisioning routes: exactly [`ROUTES`].
pub fn routes() -> Router<AppState> {
    super::add_routes(Router::new(), ROUTES, handler)
}

fn ok(v: Value) -> Response {
    Json(v).into_response()
}

fn created(v: Value) -> Response {
    (StatusCode::CREATED, Json(v)).into_response()
}

/// Refuses query parameters other than `allowed`.
fn query_only(q: &HashMap<String, String>, allowed: &[&str]) -> Result<(), ApiError> {
    match q.keys().find(|k| !allowed.contains(&k.as_str())) {
        Some(k) => Err(ApiError::bad_request(format!(
            "{k}: unknown query parameter"
        ))),
        None => Ok(()),
    }
}

async fn create_merchant(State(st): State<AppState>, op: Op, body: Bytes) -> OpResult {
    op.answer(async {
        let b = Body::parse(&body, &["name", "callback_url"])?;
        let m = st
            .service
            .directory()
            .create_merchant(
                &b.required_string("name")?,
                b.string("callback_url")?,
                &op.actor,
            )
            .await?;
        Ok(created(view::merchant(&m)))
    })
    .await
}

async fn list_merchants(State(st): State<AppState>, op: Op) -> OpResult {
    op.answer(async {
        let list: Vec<Value> = lookup::merchants(&st.service)
            .await?
            .iter()
            .map(view::merchant)
            .collect();
        Ok(ok(json!({ "merchants": list })))
    })
    .await
}

async fn show_merchant(State(st): State<AppState>, op: Op, Path(id): Path<String>) -> OpResult {
    op.answer(async {
        Ok(ok(view::merchant(
            &lookup::merchant(&st.service, &id).await?,
        )))
    })
    .await
}

async fn update_merchant(
    State(st): State<AppState>,
    op: Op,
    Path(id): Path<String>,
    body: Bytes,
) -> OpResult {
    op.answer(async {
        let b = Body::parse(&body, &["paused", "callback_url"])?;
        let id = lookup::merchant(&st.service, &id).await?.id;
        let m = st
            .service
            .directory()
            .update_merchant(
                id,
                b.bool("paused")?,
                b.nullable_string("callback_url")?,
                &op.actor,
            )
            .await?;
        Ok(ok(view::merchant(&m)))
    })
    .await
}

/// Settings a new project may carry (`POST /operator/v1/projects`).
pub const PROJECT_CREATE_FIELDS: [&str; 13] = [
    "paused",
    "merchant_id",
    "name",
    "test_mode",
    "lifetime_seconds",
    "contract",
    "callback_url",
    "ip_allow_list",
    "signature_required",
    "rate_limit",
    "active",
    "payer_page",
    "payer_language",
];

/// Settings a project patch may carry (`PATCH /operator/v1/projects/{id}`).
pub const PROJECT_PATCH_FIELDS: [&str; 12] = [
    "paused",
    "name",
    "active",
    "test_mode",
    "lifetime_seconds",
    "contract",
    "callback_url",
    "ip_allow_list",
    "signature_required",
    "rate_limit",
    "payer_page",
    "payer_language",
];

async fn create_project(State(st): State<AppState>, op: Op, body: Bytes) -> OpResult {
    op.answer(async {
        let b = Body::parse(&body, &PROJECT_CREATE_FIELDS)?;
        let merchant_id = b.required_string("merchant_id")?;
        let name = b.required_string("name")?;
        let patch = body::project_patch(&b)?;
        let merchant = lookup::merchant(&st.service, &merchant_id).await?;
        let p = st
            .service
            .directory()
            .create_project(merchant.id, &name, patch, &op.actor)
            .await?;
        Ok(created(project_value(&p)))
    })
    .await
}

async fn list_projects(State(st): State<AppState>, op: Op, RawQuery(raw): RawQuery) -> OpResult {
    let q = crate::json::query_map(raw.as_deref());
    op.answer(async {
        query_only(&q, &["merchant_id"])?;
        let list: Vec<Value> =
            lookup::projects(&st.service, q.get("merchant_id").map(String::as_str))
                .await?
                .iter()
                .map(project_value)
                .collect();
        Ok(ok(json!({ "projects": list })))
    })
    .await
}

async fn show_project(State(st): State<AppState>, op: Op, Path(id): Path<String>) -> OpResult {
    op.answer(async { Ok(ok(project_value(&lookup::project(&st.service, &id).await?))) })
        .await
}

async fn update_project(
    State(st): State<AppState>,
    op: Op,
    Path(id): Path<String>,
    body: Bytes,
) -> OpResult {
    op.answer(async {
        let b = Body::parse(&body, &PROJECT_PATCH_FIELDS)?;
        let patch = body::project_patch(&b)?;
        let id = lookup::project(&st.service, &id).await?.id;
        let p = st
            .service
            .directory()
            .update_project(id, patch, &op.actor)
            .await?;
        Ok(ok(project_value(&p)))
    })
    .await
}

async fn issue_token(
    State(st): State<AppState>,
    op: Op,
    Path(id): Path<String>,
    body: Bytes,
) -> OpResult {
    op.answer(async {
        let b = Body::parse(&body, &["scopes", "name", "expires_in_days"])?;
        let names = b
            .strings("scopes")?
            .ok_or_else(|| ApiError::bad_request("scopes: is required"))?;
        let request = TokenRequest {
            scopes: body::scopes(&names)?,
            name: b.string("name")?,
            lifetime: b
                .u64("expires_in_days")?
                .map(|d| Duration::from_secs(d.saturating_mul(86_400))),
        };
        let id = lookup::project(&st.service, &id).await?.id;
        let issued = st
            .service
            .directory()
            .issue_token_as(id, request, &op.actor)
            .await?;
        Ok(created(view::issued_token(&issued)))
    })
    .await
}

async fn list_tokens(State(st): State<AppState>, op: Op, Path(id): Path<String>) -> OpResult {
    op.answer(async {
        let list: Vec<Value> = lookup::tokens(&st.service, &id)
            .await?
            .iter()
            .map(view::token)
            .collect();
        Ok(ok(json!({ "tokens": list })))
    })
    .await
}

async fn revoke_token(
    State(st): State<AppState>,
    op: Op,
    Path((id, token_id)): Path<(String, String)>,
) -> OpResult {
    op.answer(async {
        let project = lookup::project(&st.service, &id).await?.id;
        let token = lookup::token_id(&token_id)?;
        st.service
            .directory()
            .revoke_token(project, token, &op.actor)
            .await?;
        Ok(StatusCode::NO_CONTENT.into_response())
    })
    .await
}

async fn register_key(
    State(st): State<AppState>,
    op: Op,
    Path(id): Path<String>,
    body: Bytes,
) -> OpResult {
    op.answer(async {
        let b = Body::parse(&body, &["public_key", "expected_keyid"])?;
        let public_key = b.required_string("public_key")?;
        let expected = b.string("expected_keyid")?;
        let id = lookup::project(&st.service, &id).await?.id;
        let confirmation = KeyConfirmation::given(expected.as_deref());
        let record = st
            .service
            .directory()
            .register_key_confirmed(id, &public_key, confirmation, &op.actor)
            .await?;
        Ok(created(view::key(&record)))
    })
    .await
}

async fn list_keys(State(st): State<AppState>, op: Op, Path(id): Path<String>) -> OpResult {
    op.answer(async {
        let list: Vec<Value> = lookup::keys(&st.service, &id)
            .await?
            .iter()
            .map(view::key)
            .collect();
        Ok(ok(json!({ "keys": list })))
    })
    .await
}

async fn revoke_key(
    State(st): State<AppState>,
    op: Op,
    Path((id, keyid)): Path<(String, String)>,
) -> OpResult {
    op.answer(async {
        let project = lookup::project(&st.service, &id).await?.id;
        st.service
            .directory()
            .revoke_key(project, &lookup::key_id(&keyid), &op.actor)
            .await?;
        Ok(StatusCode::NO_CONTENT.into_response())
    })
    .await
}

async fn rotate_callback_secret(
    State(st): State<AppState>,
    op: Op,
    Path(id): Path<String>,
    body: Bytes,
) -> OpResult {
    op.answer(async {
        Body::parse(&body, &[])?;
        let id = lookup::project(&st.service, &id).await?.id;
        let secret = st
            .service
            .directory()
            .rotate_callback_secret(id, &op.actor)
            .await?;
        Ok(created(
            json!({ "project_id": id, "callback_secret": secret }),
        ))
    })
    .await
}

async fn audit(State(st): State<AppState>, op: Op, RawQuery(raw): RawQuery) -> OpResult {
    let q = crate::json::query_map(raw.as_deref());
    op.answer(async {
        query_only(&q, &["limit"])?;
        let limit = match q.get("limit") {
            None => DEFAULT_AUDIT_LIMIT,
            Some(l) => l
                .parse::<usize>()
                .ok()
                .filter(|n| (1..=lookup::MAX_AUDIT).contains(n))
                .ok_or_else(|| {
                    ApiError::bad_request(format!(
                        "limit: must be a number from 1 to {}",
                        lookup::MAX_AUDIT
                    ))
                })?,
        };
        let list: Vec<Value> = lookup::audit(&st.service, limit)
            .await?
            .iter()
            .map(view::audit)
            .collect();
        Ok(ok(json!({ "records": list })))
    })
    .await
}
