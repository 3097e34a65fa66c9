//! The project balances on the operator API: a project's balance and entries, the payouts
//! and adjustments the operator records, and the reconciliation. The CLI's `ledger` commands
//! use the same functions and JSON forms.

use crate::json::Json;
use axum::body::Bytes;
use axum::extract::{Path, RawQuery, State};
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post, MethodRouter};
use payments_core::ledger::{TxReference, Usdt, UsdtAddress};
use payments_core::service::{LedgerReport, PayoutRequest};
use payments_core::ApiError;
use serde_json::{json, Value};

use super::body::Body;
use super::{lookup, Op, OpResult};
use crate::state::AppState;

/// The ledger routes of the operator API, behind the operator token.
pub const ROUTES: &[(&str, &str)] = &[
    ("GET", "/operator/v1/projects/{id}/balance"),
    ("GET", "/operator/v1/projects/{id}/balance/entries"),
    ("POST", "/operator/v1/projects/{id}/payouts"),
    ("POST", "/operator/v1/projects/{id}/adjustments"),
    ("POST", "/operator/v1/ledger/reconcile"),
];

/// The handler of one route of [`ROUTES`].
pub(crate) fn handler(method: &str, path: &str) -> Option<MethodRouter<AppState>> {
    Some(match (method, path) {
        ("GET", "/operator/v1/projects/{id}/balance") => get(balance),
        ("GET", "/operator/v1/projects/{id}/balance/entries") => get(entries),
        ("POST", "/operator/v1/projects/{id}/payouts") => post(payout),
        ("POST", "/operator/v1/projects/{id}/adjustments") => post(adjustment),
        ("POST", "/operator/v1/ledger/reconcile") => post(reconcile),
        _ => return None,
    })
}

fn field<T>(name: &str, r: Result<T, impl std::fmt::Display>) -> Result<T, ApiError> {
    r.map_err(|e| ApiError::bad_request(format!("{name}: {e}")))
}

/// A payout as given (API body or command line): `amount` (positive, at most 4 decimals),
/// `destination` (a TRON or Ethereum USDT address), `reference` (the transaction hash) and,
/// to record it beyond the balance, `force_reason`.
pub fn payout_request(
    amount: &str,
    destination: &str,
    reference: &str,
    force_reason: Option<String>,
) -> Result<PayoutRequest, ApiError> {
    Ok(PayoutRequest {
        amount: field("amount", Usdt::parse_positive(amount.trim()))?,
        destination: field("destination", UsdtAddress::parse(destination.trim()))?,
        reference: field("reference", TxReference::parse(reference.trim()))?,
        force_reason,
    })
}

/// An adjustment's amount as given: either sign, not zero, at most 4 decimals.
pub fn adjustment_amount(amount: &str) -> Result<Usdt, ApiError> {
    field("amount", Usdt::parse_nonzero(amount.trim()))
}

/// The reconciliation's answer.
pub fn report_json(r: &LedgerReport) -> Value {
    json!({
        "projects": r.projects,
        "payments": r.payments,
        "entries": r.entries,
        "repaired": r.repaired,
        "differences": r.differences.iter().map(|d| json!({
            "project_id": d.project_id,
            "payment_id": d.payment_id,
            "expected": d.expected,
            "recorded": d.recorded,
            "what": d.what,
        })).collect::<Vec<_>>(),
    })
}

/// An amount member: a JSON string (or number) read exactly.
fn amount_text(b: &Body, name: &str) -> Result<String, ApiError> {
    match b.get(name) {
        Some(Value::String(s)) => Ok(s.clone()),
        Some(Value::Number(n)) => Ok(n.to_string()),
        Some(_) => Err(ApiError::bad_request(format!(
            "{name}: must be a decimal string such as \"125.50\""
        ))),
        None => Err(ApiError::bad_request(format!("{name}: is required"))),
    }
}

async fn balance(State(st): State<AppState>, op: Op, Path(id): Path<String>) -> OpResult {
    op.answer(async {
        let project = lookup::project(&st.service, &id).await?;
        let b = st.service.balances().balance(project.id).await?;
        Ok(Json(b.view()).into_response())
    })
    .await
}

async fn entries(
    State(st): State<AppState>,
    op: Op,
    Path(id): Path<String>,
    RawQuery(query): RawQuery,
) -> OpResult {
    op.answer(async {
        let project = lookup::project(&st.service, &id).await?;
        let query = crate::query::entry_list(query.as_deref().unwrap_or_default())?;
        let page = st.service.balances().list_entries(&project, &query).await?;
        let data: Vec<Value> = page.entries.iter().map(|e| e.view()).collect();
        Ok(Json(crate::json::page_json(data, page.next_cursor)).into_response())
    })
    .await
}

async fn payout(
    State(st): State<AppState>,
    op: Op,
    Path(id): Path<String>,
    body: Bytes,
) -> OpResult {
    op.answer(async {
        let b = Body::parse(
            &body,
            &["amount", "destination", "reference", "force_reason"],
        )?;
        let project = lookup::project(&st.service, &id).await?;
        let request = payout_request(
            &amount_text(&b, "amount")?,
            &b.required_string("destination")?,
            &b.required_string("reference")?,
            b.string("force_reason")?,
        )?;
        let (entry, new) = st
            .service
            .balances()
            .record_payout(project.id, &request, &op.actor)
            .await?;
        let status = if new {
            StatusCode::CREATED
        } else {
            StatusCode::OK
        };
        Ok((status, Json(entry.view())).into_response())
    })
    .await
}

async fn adjustment(
    State(st): State<AppState>,
    op: Op,
    Path(id): Path<String>,
    body: Bytes,
) -> OpResult {
    op.answer(async {
        let b = Body::parse(&body, &["amount", "reason"])?;
        let project = lookup::project(&st.service, &id).await?;
        let amount = adjustment_amount(&amount_text(&b, "amount")?)?;
        let entry = st
            .service
            .balances()
            .record_adjustment(project.id, amount, &b.required_string("reason")?, &op.actor)
            .await?;
        Ok((StatusCode::CREATED, Json(entry.view())).into_response())
    })
    .await
}

async fn reconcile(
    State(st): State<AppState>,
    op: Op,
    body: Bytes,
) -> Result<Response, crate::error::HttpError> {
    op.answer(async {
        let b = Body::parse(&body, &["repair"])?;
        let report = st
            .service
            .balances()
            .reconcile_ledger(b.bool("repair")?.unwrap_or(false), &op.actor)
            .await?;
        st.metrics.ledger_reconciled(&report);
        Ok(Json(report_json(&report)).into_response())
    })
    .await
}
