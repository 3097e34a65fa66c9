//! The merchant API: `POST /api/v1/payments`, `GET /api/v1/payments` (the list),
//! `GET /api/v1/payments/{id}`, `GET /api/v1/project`, `GET /api/v1/banks`, the events API
//! ([`crate::events`]), the sandbox test helpers, `/healthz`, `/readyz`.

use axum::extract::{Path, RawQuery, Request, State};
use axum::http::{HeaderValue, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post, MethodRouter};
use axum::Router;
use payments_core::amount::{Amount, DecimalFormat};
use payments_core::auth::{Endpoint, Environment};
use payments_core::bank::parse_geo_query;
use payments_core::payment::Payment;
use payments_core::project::Project;
use payments_core::service::payment_not_found;
use payments_core::service::{CreateOutcome, CreateStatus};
use payments_core::ProjectId;
use payments_core::{ApiError, PaymentId};
use tracing::Instrument;

pub use crate::admission::{
    admit, authenticate, decimal_format, read_body, DECIMALS_HEADER, MAX_BODY,
};
use crate::admission::{admitted, Admitted};
use crate::error::{HttpError, RequestId};
use crate::json::{json_response, page_json};
use crate::state::AppState;

/// Every route of the merchant API as `(method, path template)`, in every environment.
///
/// [`routes`] is built from this list (and [`SANDBOX_ROUTES`]), so the list cannot drift from
/// the router; `docs/openapi.yaml` is checked against it by `tests/openapi/`.
pub const ROUTES: &[(&str, &str)] = &[
    ("POST", "/api/v1/payments"),
    ("GET", "/api/v1/payments"),
    ("GET", "/api/v1/payments/{id}"),
    ("GET", "/api/v1/payments/{id}/history"),
    ("GET", "/api/v1/project"),
    ("GET", "/api/v1/banks"),
    ("GET", "/api/v1/events"),
    ("GET", "/api/v1/events/{id}"),
    ("POST", "/api/v1/events/{id}/resend"),
    ("POST", "/api/v1/events/recover"),
    ("POST", "/api/v1/payments/{id}/resend_callback"),
    ("GET", "/api/v1/balance"),
    ("GET", "/api/v1/balance/entries"),
    ("GET", "/api/v1/balance/statement"),
    ("POST", "/api/v1/payments/{id}/appeals"),
    ("GET", "/api/v1/payments/{id}/appeals"),
    ("GET", "/api/v1/appeals"),
    ("GET", "/api/v1/appeals/{id}"),
    ("GET", "/api/v1/appeals/{id}/receipts/{index}"),
    ("GET", "/healthz"),
    ("GET", "/readyz"),
];

/// The routes served only in the sandbox: the test helpers.
pub const SANDBOX_ROUTES: &[(&str, &str)] = &[
    ("POST", "/api/v1/test/payments/{id}/complete"),
    ("POST", "/api/v1/test/payments/{id}/cancel"),
];

/// The `(method, path template)` pairs the merchant router serves in `environment`.
pub fn route_list(environment: Environment) -> Vec<(&'static str, &'static str)> {
    let mut list = ROUTES.to_vec();
    if environment == Environment::Sandbox {
        list.extend_from_slice(SANDBOX_ROUTES);
    }
    list
}

/// The handler of one listed route; `None` for a pair that has no handler.
fn handler(method: &str, path: &str) -> Option<MethodRouter<AppState>> {
    Some(match (method, path) {
        ("POST", "/api/v1/payments") => post(create_payment),
        ("GET", "/api/v1/payments") => get(list_payments),
        ("GET", "/api/v1/payments/{id}") => get(get_payment),
        ("GET", "/api/v1/payments/{id}/history") => get(get_history),
        ("GET", "/api/v1/project") => get(get_project),
        ("GET", "/api/v1/banks") => get(list_banks),
        ("GET", "/api/v1/events") => get(crate::events::list_events),
        ("GET", "/api/v1/events/{id}") => get(crate::events::get_event),
        ("POST", "/api/v1/events/{id}/resend") => post(crate::events::resend_event),
        ("POST", "/api/v1/events/recover") => post(crate::events::recover_events),
        ("POST", "/api/v1/payments/{id}/resend_callback") => {
            post(crate::events::resend_payment_callback)
        }
        ("GET", "/api/v1/balance") => get(crate::balance::get_balance),
        ("GET", "/api/v1/balance/entries") => get(crate::balance::list_entries),
        ("GET", "/api/v1/balance/statement") => get(crate::balance::statement),
        ("GET", "/healthz") => get(healthz),
        ("GET", "/readyz") => get(readyz),
        ("POST", "/api/v1/test/payments/{id}/complete") => post(test_complete),
        ("POST", "/api/v1/test/payments/{id}/cancel") => post(test_cancel),
        (method, path) => return crate::appeals::handler(method, path),
    })
}

/// The merchant API routes: exactly [`route_list`] for `environment`.
pub fn routes(environment: Environment) -> Router<AppState> {
    route_list(environment)
        .into_iter()
        .fold(Router::new(), |router, (method, path)| {
            let handler = handler(method, path)
                .expect("every entry of ROUTES and SANDBOX_ROUTES has a handler (unit-tested)");
            router.route(path, handler)
        })
}

#[tracing::instrument(name = "create_payment", skip_all, fields(request_id = %rid.0, project_id))]
async fn create_payment(
    State(st): State<AppState>,
    axum::Extension(rid): axum::Extension<RequestId>,
    req: Request,
) -> Result<Response, HttpError> {
    let note = req
        .extensions()
        .get::<std::sync::Arc<crate::error::AccessNote>>()
        .cloned();
    let a = admitted(&st, Endpoint::CreatePayment, req, None).await?;
    let project = a.auth.context().project.clone();
    tracing::Span::current().record("project_id", tracing::field::display(project.id));
    // The create runs to its end on a task of its own, even if the client goes away: once
    // the payment is inserted its provider call must be recorded, or the payment would sit in
    // `created` (and a retry of the create would wait for it) until the stuck-create sweep,
    // while the upstream may have issued a requisite for it. The slot goes with the task.
    let Admitted {
        _permit: permit,
        auth,
        body,
        decimals,
    } = a;
    // The task holds the state too (a pointer's copy: the handler still makes the page link).
    let task_state = st.clone();
    let (request_id, project_id) = (rid.0.clone(), project.id);
    // Boxed: the create's future is several KiB, and tokio would otherwise copy it into the
    // task and copy the task's stage again when it finishes. Boxed before it is instrumented:
    // `instrument` moves its future into the wrapper, a copy of every KiB (a box is a pointer).
    let create = tokio::spawn(
        Box::pin(async move {
            let _permit = permit;
            let outcome = task_state
                .service
                .payments()
                .create_payment(auth, &body)
                .await;
            // Logged by the task: a create committed after its client went away has its line.
            if let Ok(o) = &outcome {
                log_create(&request_id, project_id, o);
            }
            outcome
        })
        .instrument(tracing::Span::current()),
    );
    let outcome = create
        .await
        .map_err(|e| ApiError::internal(format!("the create task ended abnormally: {e}")))??;
    let status = match outcome.status {
        CreateStatus::Created => StatusCode::CREATED,
        _ => StatusCode::OK,
    };
    let p = &outcome.payment;
    if let Some(note) = &note {
        note.set_merchant_payment_id(p.merchant_payment_id.as_str());
    }
    let page_url = page_url(&st, &project, p).await?;
    Ok(json_response(
        status,
        &p.view_with(decimals).with_page_url(page_url.as_deref()),
    ))
}

/// The create's line for support (whatever the client did meanwhile): to match a payer's
/// report to a payment, with the requisite masked. The request id and project are at the
/// event's top level too: a JSON line carries the span's fields only nested under `span`, and
/// support searches by `request_id`.
fn log_create(request_id: &str, project_id: ProjectId, outcome: &CreateOutcome) {
    let p = &outcome.payment;
    let requisite = p.requisites.as_ref().map(|r| mask_requisite(&r.requisite));
    tracing::info!(
        request_id,
        project_id = %project_id,
        payment_id = %p.id,
        status = p.status.as_str(),
        created = outcome.status == CreateStatus::Created,
        requisite = requisite.as_deref().unwrap_or("-"),
        provider = p.route.as_ref().map_or("-", |r| r.provider.as_str()),
        route = p.route.as_ref().map_or("-", |r| r.reason.as_str()),
        "payment create answered"
    );
}

/// The payment's `payment_page_url` when its project has the payer page and the cabinet's
/// listener (which serves the page) has a URL: the core makes and keeps the token.
async fn page_url(
    st: &AppState,
    project: &Project,
    payment: &Payment,
) -> Result<Option<String>, ApiError> {
    let Some(base) = st.cabinet_url.as_deref() else {
        return Ok(None);
    };
    Ok(st
        .service
        .payments()
        .payment_page_token(project, payment)
        .await?
        .map(|token| payments_cabinet::payer_page_url(base, &token)))
}

/// The payment a read by `id` asks for (`GET /api/v1/payments/{id}` and its history), with
/// its project and the request's decimal format, noted for the access log. The payment is
/// read with the credentials (one store round trip); an id that does not parse is, like an
/// unknown one, `404` after every authentication check.
async fn read_payment(
    st: &AppState,
    req: Request,
    id: &str,
) -> Result<(Project, Payment, DecimalFormat), HttpError> {
    let wanted: Option<PaymentId> = id.parse().ok();
    if let (Some(note), Some(id)) = (
        req.extensions()
            .get::<std::sync::Arc<crate::error::AccessNote>>(),
        wanted,
    ) {
        note.set_payment(id);
    }
    let a = admitted(st, Endpoint::GetPayment, req, wanted).await?;
    let decimals = a.decimals;
    let ctx = st.service.gate().accept(a.auth).await?;
    let payment = ctx.payment.ok_or_else(payment_not_found)?;
    Ok((ctx.project, payment, decimals))
}

#[tracing::instrument(name = "get_payment", skip_all, fields(request_id = %rid.0))]
async fn get_payment(
    State(st): State<AppState>,
    axum::Extension(rid): axum::Extension<RequestId>,
    Path(id): Path<String>,
    req: Request,
) -> Result<Response, HttpError> {
    let (project, payment, decimals) = read_payment(&st, req, &id).await?;
    let page_url = page_url(&st, &project, &payment).await?;
    Ok(json_response(
        StatusCode::OK,
        &payment
            .view_with(decimals)
            .with_page_url(page_url.as_deref()),
    ))
}

/// `GET /api/v1/payments/{id}/history`: the payment's status history, authenticated and
/// found exactly as `GET /api/v1/payments/{id}` (the same scope, the same `404`).
#[tracing::instrument(name = "get_history", skip_all, fields(request_id = %rid.0))]
async fn get_history(
    State(st): State<AppState>,
    axum::Extension(rid): axum::Extension<RequestId>,
    Path(id): Path<String>,
    req: Request,
) -> Result<Response, HttpError> {
    let (_, payment, decimals) = read_payment(&st, req, &id).await?;
    let entries = st.service.payments().history(&payment).await?;
    let body = payments_core::history::history_json(&payment, &entries, decimals);
    Ok(json_response(StatusCode::OK, &body))
}

/// `GET /api/v1/payments`: a page of the project's payments, newest first. The query string
/// is read once the request is authenticated ([`query::payment_list`](crate::query::payment_list): `400` naming the
/// parameter); the items are the Payment resource without `payment_page_url` (a read of the
/// payment gives it).
#[tracing::instrument(name = "list_payments", skip_all, fields(request_id = %rid.0))]
async fn list_payments(
    State(st): State<AppState>,
    axum::Extension(rid): axum::Extension<RequestId>,
    req: Request,
) -> Result<Response, HttpError> {
    let query = req.uri().query().unwrap_or_default().to_string();
    let a = admitted(&st, Endpoint::ListPayments, req, None).await?;
    let decimals = a.decimals;
    let ctx = st.service.gate().accept(a.auth).await?;
    let query = crate::query::payment_list(&query)?;
    let page = st
        .service
        .payments()
        .list_payments(&ctx.project, &query)
        .await?;
    let data: Vec<_> = page
        .payments
        .iter()
        .map(|p| p.view_with(decimals))
        .collect();
    Ok(json_response(
        StatusCode::OK,
        &page_json(data, page.next_cursor),
    ))
}

#[tracing::instrument(name = "get_project", skip_all, fields(request_id = %rid.0))]
async fn get_project(
    State(st): State<AppState>,
    axum::Extension(rid): axum::Extension<RequestId>,
    req: Request,
) -> Result<Response, HttpError> {
    let a = admitted(&st, Endpoint::GetProject, req, None).await?;
    let ctx = st.service.gate().accept(a.auth).await?;
    let scopes: Vec<&str> = ctx.token.scopes.iter().map(|s| s.as_str()).collect();
    Ok(json_response(
        StatusCode::OK,
        &serde_json::json!({
            "project_id": ctx.project.id,
            "project_name": ctx.project.name,
            "merchant_id": ctx.merchant.id,
            "merchant_name": ctx.merchant.name,
            "token_prefix": ctx.token.prefix,
            "scopes": scopes,
        }),
    ))
}

/// `geo_code` of `GET /api/v1/banks` (other parameters are ignored; the name given twice is
/// refused, in the words this answer has always had).
fn geo_code_of(query: Option<&str>) -> Result<Option<String>, ApiError> {
    let mut geo_code = None;
    for (name, value) in url::form_urlencoded::parse(query.unwrap_or_default().as_bytes()) {
        if name == "geo_code" && geo_code.replace(value.into_owned()).is_some() {
            return Err(ApiError::bad_request(
                "query string: Failed to deserialize query string: duplicate field `geo_code`",
            ));
        }
    }
    Ok(geo_code)
}

async fn list_banks(
    State(st): State<AppState>,
    RawQuery(query): RawQuery,
) -> Result<Response, HttpError> {
    let geo = geo_code_of(query.as_deref())?
        .map(|g| parse_geo_query(&g))
        .transpose()?;
    let banks = st.service.catalog().list(geo);
    let mut resp = json_response(StatusCode::OK, &serde_json::json!({ "banks": banks }));
    resp.headers_mut().insert(
        "cache-control",
        HeaderValue::from_static("public, max-age=300"),
    );
    Ok(resp)
}

async fn test_complete(
    st: State<AppState>,
    rid: axum::Extension<RequestId>,
    id: Path<String>,
    req: Request,
) -> Result<Response, HttpError> {
    test_helper(st, rid, id, req, true).await
}

async fn test_cancel(
    st: State<AppState>,
    rid: axum::Extension<RequestId>,
    id: Path<String>,
    req: Request,
) -> Result<Response, HttpError> {
    test_helper(st, rid, id, req, false).await
}

/// The body of the complete helper: `{}` or `{"amount": ...}` (empty body allowed).
fn helper_amount(body: &[u8], complete: bool) -> Result<Option<Amount>, ApiError> {
    if body.iter().all(u8::is_ascii_whitespace) {
        return Ok(None);
    }
    let v: serde_json::Map<String, serde_json::Value> = serde_json::from_slice(body)
        .map_err(|e| ApiError::bad_request(format!("body must be a JSON object: {e}")))?;
    let mut amount = None;
    for (k, val) in v {
        match k.as_str() {
            "amount" if complete => {
                amount = Some(
                    Amount::from_json(&val)
                        .map_err(|e| ApiError::bad_request(format!("amount: {e}")))?,
                )
            }
            other => return Err(ApiError::bad_request(format!("{other}: unknown field"))),
        }
    }
    Ok(amount)
}

#[tracing::instrument(name = "test_helper", skip_all, fields(request_id = %rid.0, complete))]
async fn test_helper(
    State(st): State<AppState>,
    axum::Extension(rid): axum::Extension<RequestId>,
    Path(id): Path<String>,
    req: Request,
    complete: bool,
) -> Result<Response, HttpError> {
    let a = admitted(&st, Endpoint::TestHelper, req, None).await?;
    let decimals = a.decimals;
    let payment = match helper_amount(&a.body, complete) {
        Ok(amount) if complete => {
            st.service
                .payments()
                .test_complete(a.auth, &id, amount)
                .await?
        }
        Ok(_) => st.service.payments().test_cancel(a.auth, &id).await?,
        Err(e) => {
            // A bad body still spends the nonce: the request was signed and verified.
            st.service.gate().accept(a.auth).await?;
            return Err(e.into());
        }
    };
    Ok(json_response(StatusCode::OK, &payment.view_with(decimals)))
}

async fn healthz() -> impl IntoResponse {
    (
        StatusCode::OK,
        [("content-type", "application/json")],
        r#"{"status":"ok"}"#,
    )
}

/// How long a write probe's answer is reused: a load balancer polling `/readyz` many times
/// a second causes one small write per second, not one per poll.
const WRITE_PROBE_REUSE: std::time::Duration = std::time::Duration::from_secs(1);
/// How long `/readyz` waits for the write probe: a store whose writes queue longer is not
/// ready for more.
const WRITE_PROBE_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(2);

/// How long `/readyz` waits for the store's reads and write all together: a hung database
/// (one that answers nothing) makes the node not ready in this time, not at the balancer's
/// timeout.
const READY_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(3);

async fn readyz(State(st): State<AppState>) -> Response {
    let answer = tokio::time::timeout(READY_TIMEOUT, not_ready(&st))
        .await
        .unwrap_or_else(|_| Some(format!("the store did not answer within {READY_TIMEOUT:?}")));
    let why = match answer {
        Some(reason) => Some(("store unavailable", reason)),
        // No usable exchange rate: every create would answer 422.
        None if !st.service.ports().rates.has_rates() => Some((
            "rates unavailable",
            "no usable exchange rate: the rates endpoint has not answered well within \
             upstream.rates_max_age"
                .to_string(),
        )),
        None => None,
    };
    match why {
        None => (
            StatusCode::OK,
            [("content-type", "application/json")],
            r#"{"status":"ready"}"#,
        )
            .into_response(),
        Some((status, reason)) => {
            tracing::warn!(reason = reason.as_str(), "not ready");
            let body = serde_json::json!({ "status": status, "reason": reason });
            (
                StatusCode::SERVICE_UNAVAILABLE,
                [("content-type", "application/json"), ("retry-after", "1")],
                body.to_string(),
            )
                .into_response()
        }
    }
}

/// Why the server is not ready, or `None`: the store must answer a read and take a real write
/// ([`Store::check_writable`](payments_core::store::Store::check_writable)) within
/// [`WRITE_PROBE_TIMEOUT`], so a full disk, a read-only database or a lock held by another
/// process takes the server out of the balancer's rotation.
async fn not_ready(st: &AppState) -> Option<String> {
    let store = st.service.store();
    if !store.is_ready() {
        return Some("the store is closed".into());
    }
    if let Err(e) = payments_core::settings::READ_PROBE.get(&**store).await {
        return Some(format!("the store cannot read: {e}"));
    }
    // The read every authenticated request starts with (token, project and merchant in one
    // lookup), for a token that does not exist: a node whose statements the database no
    // longer accepts (a schema changed under a build that cannot read it) is not ready, as
    // it could not serve a merchant.
    if let Err(e) = store.auth_lookup(&[0u8; 32], None).await {
        return Some(format!("the store cannot authenticate requests: {e}"));
    }
    let mut probe = st.write_probe.lock().await;
    if let Some((at, ok)) = *probe {
        if ok && at.elapsed() < WRITE_PROBE_REUSE {
            return None;
        }
    }
    let answer = match tokio::time::timeout(WRITE_PROBE_TIMEOUT, store.check_writable()).await {
        Ok(Ok(())) => None,
        Ok(Err(e)) => Some(format!("the store cannot write ({}): {e}", e.cause())),
        Err(_) => Some(format!(
            "the store did not take a write within {WRITE_PROBE_TIMEOUT:?}"
        )),
    };
    *probe = Some((std::time::Instant::now(), answer.is_none()));
    answer
}

/// Masks a requisite for logs: the last four characters only.
pub fn mask_requisite(requisite: &str) -> String {
    let n = requisite.chars().count();
    let tail: String = requisite.chars().skip(n.saturating_sub(4)).collect();
    format!("{}{tail}", "*".repeat(n.saturating_sub(4)))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn masks_all_but_the_last_four() {
        assert_eq!(mask_requisite("2200001234567895"), "************7895");
        assert_eq!(mask_requisite("+79001234567"), "********4567");
        assert_eq!(mask_requisite("12"), "12");
    }

    #[test]
    fn every_listed_route_has_a_handler_and_builds() {
        for (method, path) in route_list(Environment::Sandbox) {
            assert!(handler(method, path).is_some(), "{method} {path}");
        }
        let _ = routes(Environment::Sandbox);
        let _ = routes(Environment::Production);
    }

    #[test]
    fn test_helpers_exist_only_in_the_sandbox() {
        let production = route_list(Environment::Production);
        assert_eq!(production, ROUTES.to_vec());
        for r in SANDBOX_ROUTES {
            assert!(!production.contains(r));
            assert!(route_list(Environment::Sandbox).contains(r));
        }
    }

    /// `geo_code` read by hand answers what axum's `Query` extractor answered: the value, other
    /// names ignored, the name twice refused with the extractor's words.
    #[test]
    fn the_banks_query_reads_geo_code_as_the_extractor_did() {
        assert_eq!(geo_code_of(None).unwrap(), None);
        assert_eq!(
            geo_code_of(Some("x=1&geo_code=K%5A")).unwrap(),
            Some("KZ".to_string())
        );
        let twice = geo_code_of(Some("geo_code=RU&geo_code=KZ")).unwrap_err();
        assert_eq!(twice.code, payments_core::ErrorCode::BadRequest);
        assert_eq!(
            twice.message,
            "query string: Failed to deserialize query string: duplicate field `geo_code`"
        );
    }
}
