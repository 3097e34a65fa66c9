//! The merchant's balance API: `GET /api/v1/balance` (the balance and its totals by kind),
//! `GET /api/v1/balance/entries` (the ledger, newest first, with a cursor and a time range)
//! and `GET /api/v1/balance/statement?from=...&to=...` (a period's opening, lines and
//! closing). Authenticated like every merchant request, scope `balance:read`; the figures are
//! the core's ([`payments_core::ledger`]).

use axum::extract::{Request, State};
use axum::http::StatusCode;
use axum::response::Response;
use payments_core::auth::Endpoint;

use payments_core::ApiError;

use crate::admission::admitted;
use crate::error::{HttpError, RequestId};
use crate::json::{json_response, page_json};
use crate::state::AppState;

/// `GET /api/v1/balance`: the project's balance (USDT, 4 decimals, decimal strings) and the
/// sums of its entries by kind.
#[tracing::instrument(name = "get_balance", skip_all, fields(request_id = %rid.0))]
pub(crate) async fn get_balance(
    State(st): State<AppState>,
    axum::Extension(rid): axum::Extension<RequestId>,
    req: Request,
) -> Result<Response, HttpError> {
    let query = req.uri().query().map(str::to_string);
    let a = admitted(&st, Endpoint::ReadBalance, req, None).await?;
    let ctx = st.service.gate().accept(a.auth).await?;
    no_query(query.as_deref())?;
    let balance = st.service.balances().balance(ctx.project.id).await?;
    Ok(json_response(StatusCode::OK, &balance.view()))
}

/// `GET /api/v1/balance/entries`: a page of the project's ledger entries, newest first, with
/// `kind`, `created_from`, `created_to`, `limit` and `cursor` as the other lists read them.
#[tracing::instrument(name = "list_balance_entries", skip_all, fields(request_id = %rid.0))]
pub(crate) async fn list_entries(
    State(st): State<AppState>,
    axum::Extension(rid): axum::Extension<RequestId>,
    req: Request,
) -> Result<Response, HttpError> {
    let query = req.uri().query().unwrap_or_default().to_string();
    let a = admitted(&st, Endpoint::ReadBalance, req, None).await?;
    let ctx = st.service.gate().accept(a.auth).await?;
    let query = crate::query::entry_list(&query)?;
    let page = st
        .service
        .balances()
        .list_entries(&ctx.project, &query)
        .await?;
    let data: Vec<_> = page.entries.iter().map(|e| e.view()).collect();
    Ok(json_response(
        StatusCode::OK,
        &page_json(data, page.next_cursor),
    ))
}

/// `GET /api/v1/balance/statement?from=<RFC 3339>&to=<RFC 3339>`: the balance at `from`,
/// what each kind of entry added until `to` (excluded), and the balance at `to`.
#[tracing::instrument(name = "balance_statement", skip_all, fields(request_id = %rid.0))]
pub(crate) async fn statement(
    State(st): State<AppState>,
    axum::Extension(rid): axum::Extension<RequestId>,
    req: Request,
) -> Result<Response, HttpError> {
    let query = req.uri().query().unwrap_or_default().to_string();
    let a = admitted(&st, Endpoint::ReadBalance, req, None).await?;
    let ctx = st.service.gate().accept(a.auth).await?;
    let (from, to) = crate::query::period(&query)?;
    let statement = st
        .service
        .balances()
        .statement(ctx.project.id, from, to)
        .await?;
    Ok(json_response(StatusCode::OK, &statement.view()))
}

/// A resource without parameters: a query is a client's mistake worth naming.
fn no_query(query: Option<&str>) -> Result<(), ApiError> {
    match query {
        Some(q) if !q.is_empty() => Err(ApiError::bad_request(
            "this resource takes no query parameters",
        )),
        _ => Ok(()),
    }
}
