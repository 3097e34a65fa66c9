//! Errors reach the wire once: handlers return `Result<_, HttpError>` and use `?` on any
//! [`ApiError`]; [`HttpError`] only carries the error in a response extension, and the
//! [`answer_errors`] middleware writes every error body, with the request id, in one place.
//! Answers the framework makes on its own (an unknown route, a method the route does not
//! take, a rejected extractor) get the same JSON body there, and so do the request-line and
//! header limits, checked before any handler of the router runs (an embedder's own routes
//! outside the mounted router are not covered).

use std::sync::{Arc, OnceLock};
use std::time::Instant;

use axum::body::Body;
use axum::extract::{MatchedPath, Request};
use axum::http::{HeaderMap, HeaderValue, StatusCode};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use payments_core::{ApiError, ErrorCode};

/// The request id header, echoed on every response.
pub const REQUEST_ID: &str = "x-request-id";

/// The longest request target (path and query) served: longer is `414 uri_too_long`.
pub const MAX_URI_BYTES: usize = 8 * 1024;
/// The most header bytes (names and values) served: more is `431 headers_too_large`.
pub const MAX_HEADER_BYTES: usize = 16 * 1024;
/// The most header fields served: more is `431 headers_too_large`.
pub const MAX_HEADER_COUNT: usize = 64;

/// The request id of a request: the client's `X-Request-ID` if it is 1-128 visible ASCII
/// characters, else a new UUID.
#[derive(Debug, Clone)]
pub struct RequestId(pub String);

impl RequestId {
    /// Takes the client's id or makes one.
    pub fn from_headers(headers: &HeaderMap) -> RequestId {
        let given = headers
            .get(REQUEST_ID)
            .filter(|v| payments_core::service::is_echoable_request_id(v.as_bytes()))
            .and_then(|v| v.to_str().ok());
        RequestId(match given {
            Some(v) => v.to_string(),
            None => payments_core::random::uuid_v4(&crate::system::OsRandom).to_string(),
        })
    }
}

/// An error answer. Build it with `?` or `From` from an [`ApiError`] or any error of the core
/// that converts to one (`AuthError`, `StoreError`, ...); its body is written by
/// [`answer_errors`], which knows the request id.
#[derive(Debug, Clone)]
pub struct HttpError(pub ApiError);

impl<E: Into<ApiError>> From<E> for HttpError {
    fn from(e: E) -> Self {
        HttpError(e.into())
    }
}

/// The HTTP status that carries each stable code: the one table of it (the OpenAPI agreement
/// tests hold it to `docs/openapi.yaml`). A code added to the core after this table answers
/// `500` until it is given its status here.
pub fn status_of(code: ErrorCode) -> StatusCode {
    let status: u16 = match code {
        ErrorCode::BadRequest | ErrorCode::InvalidGeoCode => 400,
        ErrorCode::TokenInvalid | ErrorCode::SignatureInvalid => 401,
        ErrorCode::IpNotAllowed | ErrorCode::InsufficientScope => 403,
        ErrorCode::PaymentNotFound | ErrorCode::NotFound | ErrorCode::AppealNotFound => 404,
        ErrorCode::AppealIdempotencyConflict | ErrorCode::AppealLimitReached => 409,
        ErrorCode::PaymentIdempotencyConflict
        | ErrorCode::RequestReplayed
        | ErrorCode::InvalidTransition
        | ErrorCode::InsufficientBalance
        | ErrorCode::PayoutReferenceConflict => 409,
        ErrorCode::MethodNotAllowed => 405,
        ErrorCode::RequestTimeout => 408,
        ErrorCode::BodyTooLarge => 413,
        ErrorCode::UriTooLong => 414,
        ErrorCode::UnsupportedMediaType => 415,
        ErrorCode::HeadersTooLarge => 431,
        ErrorCode::PaymentNotCovered
        | ErrorCode::PaymentRateUnavailable
        | ErrorCode::PaymentNotRoutable
        | ErrorCode::BankNotFound
        | ErrorCode::ReceiptInvalid => 422,
        ErrorCode::RateLimited => 429,
        ErrorCode::Internal => 500,
        ErrorCode::ServiceUnavailable => 503,

        _ => 500,
    };
    StatusCode::from_u16(status).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR)
}

/// The error response body, borrowed from an [`ApiError`].
#[derive(Debug, serde::Serialize)]
pub struct ErrorBody<'a> {
    /// Stable code.
    pub code: &'static str,
    /// Human-readable message.
    pub message: &'a str,
    /// The request id (echoed `X-Request-ID` or generated).
    pub request_id: &'a str,
    /// The saved payment on a `422`, when one was saved.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub payment_id: Option<payments_core::PaymentId>,
    /// Sandbox only: the exact signature base the server verified against.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub signature_base: Option<&'a str>,
}

impl<'a> ErrorBody<'a> {
    /// The JSON error body of `error` (`{"code", "message", "request_id"}` plus `payment_id`
    /// and `signature_base` when present), for the request `request_id`.
    pub fn of(error: &'a ApiError, request_id: &'a str) -> ErrorBody<'a> {
        ErrorBody {
            code: error.code.as_str(),
            message: &error.message,
            request_id,
            payment_id: error.payment_id,
            signature_base: error.signature_base.as_deref(),
        }
    }
}

/// The error a response answers, waiting in its extensions for [`answer_errors`].
#[derive(Debug, Clone)]
struct PendingError(Arc<ApiError>);

impl IntoResponse for HttpError {
    fn into_response(self) -> Response {
        let status = status_of(self.0.code);
        let mut resp = status.into_response();
        resp.extensions_mut().insert(PendingError(Arc::new(self.0)));
        resp
    }
}

/// What a request's access line says beyond what the middleware sees itself: set by the
/// handlers once they know it (the project of an authenticated or rate-limited merchant
/// request, the operator token's name). Each is set at most once.
#[derive(Debug, Default)]
pub struct AccessNote {
    project: OnceLock<String>,
    operator: OnceLock<String>,
    merchant_payment_id: OnceLock<String>,
    payment: OnceLock<payments_core::PaymentId>,
    signature_created: OnceLock<i64>,
}

impl AccessNote {
    /// The request's project.
    pub fn set_project(&self, project: impl std::fmt::Display) {
        let _ = self.project.set(project.to_string());
    }

    /// The operator who made the request (`operator:<name>`).
    pub fn set_operator(&self, actor: &str) {
        let _ = self.operator.set(actor.to_string());
    }

    /// A create's `merchant_payment_id` (for the request log's retries).
    pub fn set_merchant_payment_id(&self, id: &str) {
        let _ = self.merchant_payment_id.set(id.to_string());
    }

    /// The payment a read asked for (for the request log's polling).
    pub fn set_payment(&self, id: payments_core::PaymentId) {
        let _ = self.payment.set(id);
    }

    /// The verified signature's `created` (for the request log's clock skew).
    pub fn set_signature_created(&self, created: i64) {
        let _ = self.signature_created.set(created);
    }
}

/// The middleware every router of this crate runs first: takes or makes the request id,
/// refuses request targets and header sections over the limits, writes the JSON error body
/// (with the request id and `X-Request-ID`) of every error answer, and writes the request's
/// access line (target `payments_http::access`, at info): method, route template, status,
/// error code, latency, project, operator, the client address (the peer, or the address a
/// trusted proxy forwarded: [`client_address`]) and request id, for every answer including
/// the refusals (`401`, `403`, `429`, `503`, `414`, `431`).
pub async fn answer_errors(
    axum::extract::State(st): axum::extract::State<crate::AppState>,
    mut req: Request,
    next: Next,
) -> Response {
    let start = Instant::now();
    let client = client_address(&req, st.service.auth_config());
    let rid = RequestId::from_headers(req.headers());
    let method = crate::metrics::MethodLabel::of(req.method());
    let route = req
        .extensions()
        .get::<MatchedPath>()
        .map_or_else(|| "unmatched".to_string(), |p| p.as_str().to_string());
    let note = Arc::new(AccessNote::default());
    let span = crate::trace::request_span(method.as_str(), &route, &rid.0, req.headers());
    let logged = st.request_log.as_ref().map(|_| Arrival::of(&req, &st));
    let (mut resp, code, error) = match over_limits(&req) {
        Some(e) => (render(&e, &rid), Some(e.code.as_str()), Some(Arc::new(e))),
        None => {
            req.extensions_mut().insert(rid.clone());
            req.extensions_mut().insert(note.clone());
            let resp = tracing::Instrument::instrument(next.run(req), span.clone()).await;
            finish(resp, &rid).await
        }
    };
    crate::trace::record_status(&span, resp.status().as_u16());
    if let Ok(v) = HeaderValue::from_str(&rid.0) {
        resp.headers_mut().insert(REQUEST_ID, v);
    }
    tracing::info!(
        target: "payments_http::access",
        method = method.as_str(),
        route = route.as_str(),
        status = resp.status().as_u16(),
        code = code.unwrap_or("-"),
        latency_ms = (start.elapsed().as_secs_f64() * 1000.0 * 1000.0).round() / 1000.0,
        project = note.project.get().map_or("-", String::as_str),
        operator = note.operator.get().map_or("-", String::as_str),
        client = client.as_deref().unwrap_or("-"),
        request_id = rid.0.as_str(),
        "request"
    );
    if let (Some(log), Some(arrival)) = (&st.request_log, logged) {
        if let Some(entry) = arrival.entry(
            &note,
            resp.status().as_u16(),
            code,
            error.as_deref(),
            &rid,
            start.elapsed(),
            client.as_deref(),
        ) {
            log.note(entry);
        }
    }
    resp
}

/// What the request log needs of a request as it arrives (read only while the log is on).
struct Arrival {
    at: payments_core::Timestamp,
    method: String,
    path: String,
    /// The `Signature-Input` lines (shared, not copied): the clock skew of a request whose
    /// signature did not verify is read from them.
    signature_input: Vec<HeaderValue>,
}

impl Arrival {
    fn of(req: &Request, st: &crate::AppState) -> Arrival {
        let uri = req
            .extensions()
            .get::<axum::extract::OriginalUri>()
            .map_or(req.uri(), |o| &o.0);
        Arrival {
            at: st.service.ports().clock.now(),
            method: req.method().as_str().to_string(),
            path: payments_core::request_log::bounded_path(uri.path()),
            signature_input: req
                .headers()
                .get_all("signature-input")
                .iter()
                .cloned()
                .collect(),
        }
    }

    /// The signature's `created` (Unix seconds): the verified signature's, noted by the
    /// admission, or else read from the request's `Signature-Input` as the verifier would.
    fn signature_created(&self, note: &AccessNote) -> Option<i64> {
        if let Some(created) = note.signature_created.get() {
            return Some(*created);
        }
        let headers: Vec<(&str, &[u8])> = self
            .signature_input
            .iter()
            .map(|v| ("signature-input", v.as_bytes()))
            .collect();
        payments_core::auth::signature::signature_created(&headers)
    }

    /// The log's entry, when a merchant request was attributed to a project (an operator's
    /// request, or one whose token is unknown, is nobody's).
    #[allow(clippy::too_many_arguments)]
    fn entry(
        self,
        note: &AccessNote,
        status: u16,
        code: Option<&str>,
        error: Option<&ApiError>,
        rid: &RequestId,
        latency: std::time::Duration,
        client: Option<&str>,
    ) -> Option<payments_core::request_log::RequestLogEntry> {
        if note.operator.get().is_some() {
            return None;
        }
        let project_id = note.project.get()?.parse().ok()?;
        let clock_skew_ms = self
            .signature_created(note)
            .map(|c| c.saturating_mul(1000).saturating_sub(self.at.unix_millis()));
        Some(payments_core::request_log::RequestLogEntry {
            id: 0,
            project_id,
            at: self.at,
            method: self.method,
            path: self.path,
            status,
            error_code: code.map(str::to_string),
            request_id: rid.0.clone(),
            latency_us: u64::try_from(latency.as_micros()).unwrap_or(u64::MAX),
            source: client.unwrap_or("-").to_string(),
            merchant_payment_id: note.merchant_payment_id.get().cloned(),
            payment_id: note.payment.get().copied(),
            clock_skew_ms,
            diagnosis: error.and_then(ApiError::signature_diagnosis),
            message: error.map(|e| payments_core::request_log::bounded_message(public_message(e))),
        })
    }
}

/// The client's address as the allow-list sees it: the connection's peer, or, from a trusted
/// proxy, the nearest untrusted `X-Forwarded-For` entry; `None` when the router is served
/// without `ConnectInfo` or a trusted proxy forwarded something that is not an address.
pub fn client_address(req: &Request, auth: &payments_core::service::AuthConfig) -> Option<String> {
    let peer = req
        .extensions()
        .get::<axum::extract::ConnectInfo<std::net::SocketAddr>>()?
        .0
        .ip();
    let forwarded: Vec<&str> = req
        .headers()
        .get_all("x-forwarded-for")
        .iter()
        .filter_map(|v| v.to_str().ok())
        .collect();
    payments_core::auth::allowlist::client_ip(peer, &forwarded, &auth.trusted_proxies)
        .ok()
        .map(|ip| ip.to_string())
}

fn over_limits(req: &Request) -> Option<ApiError> {
    let target = req.uri().path_and_query().map_or(0, |pq| pq.as_str().len());
    if target > MAX_URI_BYTES {
        return Some(ApiError::new(
            ErrorCode::UriTooLong,
            format!("the request target exceeds {MAX_URI_BYTES} bytes"),
        ));
    }
    let headers = req.headers();
    let bytes: usize = headers
        .iter()
        .map(|(n, v)| n.as_str().len() + v.len())
        .sum();
    if headers.len() > MAX_HEADER_COUNT || bytes > MAX_HEADER_BYTES {
        return Some(ApiError::new(
            ErrorCode::HeadersTooLarge,
            format!(
                "the request headers exceed {MAX_HEADER_COUNT} fields or {MAX_HEADER_BYTES} bytes"
            ),
        ));
    }
    None
}

/// Writes the body of an error answer: ours from its extension; one the framework made (plain
/// text or empty) from its status. Other answers pass unchanged. With the error code, if any,
/// and the error answered (for the request log's message and diagnosis).
async fn finish(
    resp: Response,
    rid: &RequestId,
) -> (Response, Option<&'static str>, Option<Arc<ApiError>>) {
    if let Some(PendingError(e)) = resp.extensions().get::<PendingError>().cloned() {
        let mut answer = render(&e, rid);
        carry_headers(resp.headers(), &mut answer);
        return (answer, Some(e.code.as_str()), Some(e));
    }
    let status = resp.status();
    let is_json = resp
        .headers()
        .get("content-type")
        .is_some_and(|v| v.as_bytes().starts_with(b"application/json"));
    if !(status.is_client_error() || status.is_server_error()) || is_json {
        return (resp, None, None);
    }
    let (parts, body) = resp.into_parts();
    // The framework's own text is short (a rejection reason); read at most 1 KiB of it.
    let text = axum::body::to_bytes(body, 1024).await.unwrap_or_default();
    let text = String::from_utf8_lossy(&text).trim().to_string();
    let (code, default) = match status.as_u16() {
        404 => (ErrorCode::NotFound, "no such endpoint"),
        405 => (
            ErrorCode::MethodNotAllowed,
            "this endpoint does not take this method",
        ),
        413 => (ErrorCode::BodyTooLarge, "request body too large"),
        415 => (
            ErrorCode::UnsupportedMediaType,
            "the request body must be application/json",
        ),
        414 => (ErrorCode::UriTooLong, "request target too long"),
        431 => (ErrorCode::HeadersTooLarge, "request headers too large"),
        503 => (ErrorCode::ServiceUnavailable, "service unavailable"),
        s if s >= 500 => (ErrorCode::Internal, "internal error"),
        _ => (ErrorCode::BadRequest, "bad request"),
    };
    let message = if text.is_empty() || code != ErrorCode::BadRequest {
        default.to_string()
    } else {
        text
    };
    let error = ApiError::new(code, message);
    let mut answer = render(&error, rid);
    carry_headers(&parts.headers, &mut answer);
    (answer, Some(code.as_str()), Some(Arc::new(error)))
}

/// Headers the original answer set (e.g. `Allow` on a `405`) stay on the rendered one, except
/// those that describe the body, which is new.
fn carry_headers(from: &HeaderMap, to: &mut Response) {
    for (name, value) in from {
        if name != "content-type" && name != "content-length" {
            to.headers_mut()
                .entry(name)
                .or_insert_with(|| value.clone());
        }
    }
}

/// What a `500`'s body says in place of its message.
const INTERNAL_MESSAGE: &str = "internal error; quote the request_id to support";

/// The `message` the error body of `error` shows: its own, or for a `500` only "internal
/// error; quote the request_id to support" (the details go to the server's log, never to the
/// client).
pub fn public_message(error: &ApiError) -> &str {
    if status_of(error.code) == StatusCode::INTERNAL_SERVER_ERROR {
        INTERNAL_MESSAGE
    } else {
        &error.message
    }
}

/// The one conversion of an [`ApiError`] to an HTTP answer: status, JSON body with the
/// request id, `Retry-After` when given. A `500` shows the client only the request id to
/// quote; its details (and the typed cause) go to the log.
pub fn render(error: &ApiError, rid: &RequestId) -> Response {
    let status = status_of(error.code);
    let cause = error.cause.as_ref().map(|c| c.to_string());
    let cause = cause.as_deref().unwrap_or("-");
    // The store's cause as a short word (disk full, locked, io, ...), for searching the log.
    let store_cause = match error.cause.as_deref() {
        Some(payments_core::error::ErrorCause::Store(e)) => e.cause(),
        _ => "-",
    };
    let (code, message, request_id) = (error.code.as_str(), error.message.as_str(), rid.0.as_str());
    match status.as_u16() {
        // A defect: always worth a line.
        500 => tracing::error!(
            code,
            message,
            cause,
            store_cause,
            request_id,
            "request failed"
        ),
        // The store is unavailable: the operator must know, but not once per request at
        // ERROR while it lasts.
        _ if status.is_server_error() && error.cause.is_some() => {
            tracing::warn!(
                code,
                message,
                cause,
                store_cause,
                request_id,
                "request refused"
            )
        }
        // Overload (in-flight slots, connection cap) is counted by the metrics; a log line
        // per refused request would flood the log exactly when the server is under pressure.
        _ if status.is_server_error() => {
            tracing::debug!(code, message, request_id, "request refused")
        }
        _ => {}
    }
    let masked;
    let error = if status == StatusCode::INTERNAL_SERVER_ERROR {
        masked = ApiError::internal(public_message(error));
        &masked
    } else {
        error
    };
    let body =
        serde_json::to_vec(&ErrorBody::of(error, &rid.0)).expect("the error body is plain strings");
    let mut resp = Response::new(Body::from(body));
    *resp.status_mut() = status;
    let h = resp.headers_mut();
    h.insert("content-type", HeaderValue::from_static("application/json"));
    if let Some(secs) = error.retry_after {
        h.insert("retry-after", HeaderValue::from(secs));
    }
    resp
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The skew of a verified request comes from the created its admission noted (the fields
    /// are not parsed again); without one, from the request's `Signature-Input`.
    #[test]
    fn the_skew_reads_the_noted_created_before_the_header() {
        let at = payments_core::Timestamp::from_unix_millis(100_000);
        let arrival = |input: &str| Arrival {
            at,
            method: "POST".into(),
            path: "/api/v1/payments".into(),
            signature_input: vec![HeaderValue::from_str(input).unwrap()],
        };
        let note = AccessNote::default();
        note.set_project("00000000-0000-4000-8000-000000000001");
        let skew = |a: Arrival, note: &AccessNote| {
            a.entry(
                note,
                201,
                None,
                None,
                &RequestId("r".into()),
                Default::default(),
                None,
            )
            .expect("an entry of the project")
            .clock_skew_ms
        };
        let input = "sig1=(\"@method\");created=70;keyid=\"k\"";
        assert_eq!(
            skew(arrival(input), &note),
            Some(-30_000),
            "from the header"
        );
        note.set_signature_created(90);
        assert_eq!(skew(arrival("not a dictionary ("), &note), Some(-10_000));
    }

    #[test]
    fn statuses_match_the_spec() {
        assert_eq!(status_of(ErrorCode::BadRequest).as_u16(), 400);
        assert_eq!(status_of(ErrorCode::InvalidGeoCode).as_u16(), 400);
        assert_eq!(status_of(ErrorCode::TokenInvalid).as_u16(), 401);
        assert_eq!(status_of(ErrorCode::SignatureInvalid).as_u16(), 401);
        assert_eq!(status_of(ErrorCode::IpNotAllowed).as_u16(), 403);
        assert_eq!(
            status_of(ErrorCode::PaymentIdempotencyConflict).as_u16(),
            409
        );
        assert_eq!(status_of(ErrorCode::RequestReplayed).as_u16(), 409);
        assert_eq!(status_of(ErrorCode::PaymentNotCovered).as_u16(), 422);
        assert_eq!(status_of(ErrorCode::BankNotFound).as_u16(), 422);
        assert_eq!(status_of(ErrorCode::BodyTooLarge).as_u16(), 413);
        assert_eq!(status_of(ErrorCode::MethodNotAllowed).as_u16(), 405);
        assert_eq!(status_of(ErrorCode::RequestTimeout).as_u16(), 408);
        assert_eq!(status_of(ErrorCode::UriTooLong).as_u16(), 414);
        assert_eq!(status_of(ErrorCode::UnsupportedMediaType).as_u16(), 415);
        assert_eq!(status_of(ErrorCode::HeadersTooLarge).as_u16(), 431);
        assert_eq!(status_of(ErrorCode::RateLimited).as_u16(), 429);
        assert_eq!(status_of(ErrorCode::ServiceUnavailable).as_u16(), 503);
    }

    #[test]
    fn body_carries_payment_id_only_when_saved() {
        let e = ApiError::new(ErrorCode::PaymentNotRoutable, "no route");
        let json = serde_json::to_string(&ErrorBody::of(&e, "r1")).unwrap();
        assert_eq!(
            json,
            r#"{"code":"payment_not_routable","message":"no route","request_id":"r1"}"#
        );
        let id: payments_core::PaymentId = "00000000-0000-0000-0000-000000000000".parse().unwrap();
        let e = e.with_payment_id(id);
        let json = serde_json::to_string(&ErrorBody::of(&e, "r1")).unwrap();
        assert_eq!(
            json,
            r#"{"code":"payment_not_routable","message":"no route","request_id":"r1","payment_id":"00000000-0000-0000-0000-000000000000"}"#
        );
    }
}
