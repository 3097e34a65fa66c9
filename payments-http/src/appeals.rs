//! Appeals on the merchant API (`POST /api/v1/payments/{id}/appeals`, the lists, one appeal,
//! its receipts): the core's [`Appeals`](payments_core::service::Appeals) carried out over
//! HTTP (the support queue is [`crate::operator::appeals`]).
//!
//! An appeal's body may carry two receipts of up to 2 MiB each (base64), far above the
//! merchant API's usual body limit: it is read only with one of [`UPLOAD_SLOTS`] slots of the
//! process, so that uploads never hold more than `UPLOAD_SLOTS` x [`MAX_APPEAL_BODY`] bytes at
//! once, and a client that opens more waits in no queue: it is answered `503` at once.

use axum::extract::{Path, RawQuery, Request, State};
use axum::http::{HeaderValue, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post, MethodRouter};
use payments_core::appeal::{self, Appeal, AppealOrder, AppealQuery};
use payments_core::auth::Endpoint;
use payments_core::receipt::Receipt;
use payments_core::service::{AppealError, AppealPage, AppealRequest, AuthContext};
use payments_core::service::{ListCursor, ListQueryError};
use payments_core::{ApiError, ErrorCode};
use tokio::sync::Semaphore;

use crate::admission::{admit, authenticate, decimal_format, read_body_up_to, MAX_BODY};
use crate::error::{HttpError, RequestId};
use crate::json::{json_response, page_json, Json};
use crate::state::AppState;

/// The largest body of `POST /api/v1/payments/{id}/appeals`: two receipts of 2 MiB in base64
/// and the fields around them.
pub const MAX_APPEAL_BODY: usize = 6 * 1024 * 1024;

/// How many appeal bodies one process reads at once.
pub const UPLOAD_SLOTS: usize = 8;

static UPLOADS: Semaphore = Semaphore::const_new(UPLOAD_SLOTS);

/// The handler of one appeal route of the merchant API's
/// [`ROUTES`](crate::merchant::ROUTES).
pub(crate) fn handler(method: &str, path: &str) -> Option<MethodRouter<AppState>> {
    Some(match (method, path) {
        ("POST", "/api/v1/payments/{id}/appeals") => post(open),
        ("GET", "/api/v1/payments/{id}/appeals") => get(of_payment),
        ("GET", "/api/v1/appeals") => get(list),
        ("GET", "/api/v1/appeals/{id}") => get(one),
        ("GET", "/api/v1/appeals/{id}/receipts/{index}") => get(receipt),
        _ => return None,
    })
}

/// `POST /api/v1/payments/{id}/appeals`: opens an appeal (signed like a create, scope
/// `payments:create`); `201` with the appeal, or `200` with the one stored before under the
/// same key and request.
#[tracing::instrument(name = "open_appeal", skip_all, fields(request_id = %rid.0))]
async fn open(
    State(st): State<AppState>,
    axum::Extension(rid): axum::Extension<RequestId>,
    Path(id): Path<String>,
    req: Request,
) -> Result<Response, HttpError> {
    let _slot = UPLOADS.try_acquire().map_err(|_| {
        ApiError::new(
            ErrorCode::ServiceUnavailable,
            "too many appeals are being uploaded at once; try again",
        )
        .with_retry_after(1)
    })?;
    let (parts, body) = req.into_parts();
    decimal_format(&parts.headers)?;
    let declared = parts.headers.get("content-length");
    let body = read_body_up_to(body, declared, st.body_timeout, MAX_APPEAL_BODY).await?;
    let _permit = admit(&st)?;
    let auth = authenticate(&st, Endpoint::OpenAppeal, &parts, &body, None).await?;
    let request = AppealRequest::parse(&body)?;
    let (appeal, created) = st.service.appeals().open_appeal(auth, &id, request).await?;
    let status = if created {
        StatusCode::CREATED
    } else {
        StatusCode::OK
    };
    Ok(json_response(status, &appeal::view(&appeal)))
}

/// A signed read of the appeals (scope `payments:read`), its nonce recorded.
async fn read_request(st: &AppState, req: Request) -> Result<AuthContext, HttpError> {
    let (parts, body) = req.into_parts();
    let body = read_body_up_to(
        body,
        parts.headers.get("content-length"),
        st.body_timeout,
        MAX_BODY,
    )
    .await?;
    let _permit = admit(st)?;
    let auth = authenticate(st, Endpoint::ReadAppeals, &parts, &body, None).await?;
    Ok(st.service.gate().accept(auth).await?)
}

/// `GET /api/v1/payments/{id}/appeals`: the payment's appeals, newest first (at most a few).
async fn of_payment(
    State(st): State<AppState>,
    Path(id): Path<String>,
    req: Request,
) -> Result<Response, HttpError> {
    let ctx = read_request(&st, req).await?;
    let payments = st.service.payments();
    let payment = payments
        .payment_of_project(&ctx.project, &id)
        .await
        .map_err(AppealError::from)?;
    let query = AppealQuery {
        project: Some(ctx.project.id),
        payment: Some(payment.id),
        ..AppealQuery::newest(appeal::MAX_APPEALS_PER_SOURCE as usize * 2)
    };
    let page = st.service.appeals().find_appeals(&query).await?;
    Ok(page_response(page))
}

/// `GET /api/v1/appeals?state=&limit=&cursor=`: the project's appeals, newest first.
async fn list(
    State(st): State<AppState>,
    RawQuery(raw): RawQuery,
    req: Request,
) -> Result<Response, HttpError> {
    let ctx = read_request(&st, req).await?;
    let mut query = list_query(raw, AppealOrder::NewestFirst, false)?;
    query.project = Some(ctx.project.id);
    Ok(page_response(
        st.service.appeals().find_appeals(&query).await?,
    ))
}

/// `GET /api/v1/appeals/{id}`.
async fn one(
    State(st): State<AppState>,
    Path(id): Path<String>,
    req: Request,
) -> Result<Response, HttpError> {
    let ctx = read_request(&st, req).await?;
    let a = st
        .service
        .appeals()
        .appeal_of_project(&ctx.project, &id)
        .await?;
    Ok(Json(appeal::view(&a)).into_response())
}

/// `GET /api/v1/appeals/{id}/receipts/{index}`: the receipt's bytes, as an attachment.
async fn receipt(
    State(st): State<AppState>,
    Path((id, index)): Path<(String, String)>,
    req: Request,
) -> Result<Response, HttpError> {
    let ctx = read_request(&st, req).await?;
    let appeals = st.service.appeals();
    let a = appeals.appeal_of_project(&ctx.project, &id).await?;
    let r = appeals.appeal_receipt(&a, receipt_index(&index)?).await?;
    Ok(receipt_response(&a, r))
}

pub(crate) fn receipt_index(index: &str) -> Result<u8, AppealError> {
    index
        .parse::<u8>()
        .ok()
        .filter(|i| usize::from(*i) < payments_core::receipt::MAX_RECEIPTS)
        .ok_or(AppealError::NotFound)
}

/// A receipt's bytes with the headers of every receipt download
/// ([`appeal::receipt_download_headers`]): an attachment, not sniffed, sandboxed, not cached.
pub fn receipt_response(a: &Appeal, r: Receipt) -> Response {
    let headers = appeal::receipt_download_headers(a.id, r.kind());
    let mut response = (StatusCode::OK, r.into_bytes()).into_response();
    for (name, value) in headers {
        if let Ok(v) = HeaderValue::from_str(&value) {
            response.headers_mut().insert(name, v);
        }
    }
    response
}

pub(crate) fn list_query(
    raw: Option<String>,
    order: AppealOrder,
    with_project: bool,
) -> Result<AppealQuery, ListQueryError> {
    crate::query::appeal_list(raw.as_deref().unwrap_or(""), order, with_project)
}

pub(crate) fn page_response(page: AppealPage) -> Response {
    let data: Vec<serde_json::Value> = page.appeals.iter().map(appeal::view).collect();
    let next = page
        .next
        .map(|(created_at, id)| ListCursor { created_at, id });
    json_response(StatusCode::OK, &page_json(data, next))
}
