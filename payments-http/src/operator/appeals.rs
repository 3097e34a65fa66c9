//! The operator API's support queue of appeals (`/operator/v1/appeals...`): the waiting
//! appeals oldest first, one appeal and its receipts, and support's decisions, carried out by
//! the core's [`Appeals`](payments_core::service::Appeals).

use axum::body::Bytes;
use axum::extract::{Path, RawQuery, State};
use axum::response::IntoResponse;
use axum::routing::{get, post, MethodRouter};
use payments_core::appeal::{self, AppealOrder, AppealTrigger};
use payments_core::history::ChangeSource;
use payments_core::service::{appeal_note, AppealError};
use payments_core::ApiError;

use super::body::Body;
use super::{Op, OpResult};
use crate::appeals::{list_query, page_response, receipt_index, receipt_response};
use crate::json::Json;
use crate::state::AppState;

/// The operator API's support queue, behind the operator token.
pub const ROUTES: &[(&str, &str)] = &[
    ("GET", "/operator/v1/appeals"),
    ("GET", "/operator/v1/appeals/{id}"),
    ("GET", "/operator/v1/appeals/{id}/receipts/{index}"),
    ("POST", "/operator/v1/appeals/{id}/review"),
    ("POST", "/operator/v1/appeals/{id}/accept"),
    ("POST", "/operator/v1/appeals/{id}/reject"),
];

/// The handler of one route of [`ROUTES`].
pub(crate) fn handler(method: &str, path: &str) -> Option<MethodRouter<AppState>> {
    Some(match (method, path) {
        ("GET", "/operator/v1/appeals") => get(queue),
        ("GET", "/operator/v1/appeals/{id}") => get(support_one),
        ("GET", "/operator/v1/appeals/{id}/receipts/{index}") => get(support_receipt),
        ("POST", "/operator/v1/appeals/{id}/review") => post(review),
        ("POST", "/operator/v1/appeals/{id}/accept") => post(accept),
        ("POST", "/operator/v1/appeals/{id}/reject") => post(reject),
        _ => return None,
    })
}

/// `GET /operator/v1/appeals?state=&project_id=&limit=&cursor=`: the support queue, oldest
/// first; by default the active appeals (`open` and `under_review`).
async fn queue(State(st): State<AppState>, op: Op, RawQuery(raw): RawQuery) -> OpResult {
    op.answer(async {
        let mut query = list_query(raw, AppealOrder::OldestFirst, true)?;
        if query.states.is_empty() {
            query.states = vec![appeal::AppealState::Open, appeal::AppealState::UnderReview];
        }
        Ok(page_response(
            st.service.appeals().find_appeals(&query).await?,
        ))
    })
    .await
}

fn appeal_id(id: &str) -> Result<payments_core::ids::AppealId, AppealError> {
    id.parse().map_err(|_| AppealError::NotFound)
}

async fn support_one(State(st): State<AppState>, op: Op, Path(id): Path<String>) -> OpResult {
    op.answer(async {
        let a = st.service.appeals().appeal_any(appeal_id(&id)?).await?;
        Ok(Json(appeal::view(&a)).into_response())
    })
    .await
}

async fn support_receipt(
    State(st): State<AppState>,
    op: Op,
    Path((id, index)): Path<(String, String)>,
) -> OpResult {
    op.answer(async {
        let appeals = st.service.appeals();
        let a = appeals.appeal_any(appeal_id(&id)?).await?;
        let r = appeals.appeal_receipt(&a, receipt_index(&index)?).await?;
        Ok(receipt_response(&a, r))
    })
    .await
}

/// Runs a support decision and answers the appeal and the payment after it.
async fn decide(
    st: &AppState,
    op: &Op,
    id: &str,
    trigger: Result<AppealTrigger, ApiError>,
) -> OpResult {
    op.answer(async {
        let id = appeal_id(id)?;
        let (a, p) = st
            .service
            .appeals()
            .decide_appeal(id, trigger?, &op.actor().0, ChangeSource::Support)
            .await?;
        Ok(Json(serde_json::json!({
            "appeal": appeal::view(&a),
            "payment": crate::operator::view::payment(&p),
        }))
        .into_response())
    })
    .await
}

/// `POST /operator/v1/appeals/{id}/review`: support takes an open appeal.
async fn review(
    State(st): State<AppState>,
    op: Op,
    Path(id): Path<String>,
    body: Bytes,
) -> OpResult {
    let trigger = Body::parse(&body, &[]).map(|_| AppealTrigger::Review { provider: None });
    decide(&st, &op, &id, trigger).await
}

/// `POST /operator/v1/appeals/{id}/accept` with `{"amount", "note"?}`: the transfer was
/// found with `amount`; the payment is re-checked to `completed` with it.
async fn accept(
    State(st): State<AppState>,
    op: Op,
    Path(id): Path<String>,
    body: Bytes,
) -> OpResult {
    let by = op.actor().0.clone();
    let trigger = Body::parse(&body, &["amount", "note"]).and_then(|b| {
        let amount = b
            .amount("amount")?
            .ok_or_else(|| ApiError::bad_request("amount: required"))?;
        let note = appeal_note(b.string("note")?.as_deref())?;
        Ok(AppealTrigger::Accept { amount, by, note })
    });
    decide(&st, &op, &id, trigger).await
}

/// `POST /operator/v1/appeals/{id}/reject` with `{"note"?}`: not found; nothing moves.
async fn reject(
    State(st): State<AppState>,
    op: Op,
    Path(id): Path<String>,
    body: Bytes,
) -> OpResult {
    let by = op.actor().0.clone();
    let trigger = Body::parse(&body, &["note"]).and_then(|b| {
        let note = appeal_note(b.string("note")?.as_deref())?;
        Ok(AppealTrigger::Reject { by, note })
    });
    decide(&st, &op, &id, trigger).await
}
