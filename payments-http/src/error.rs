//! The single conversion from a core [`ApiError`] to an HTTP response, and the request id.

use axum::http::{HeaderMap, HeaderValue, StatusCode};
use axum::response::{IntoResponse, Response};
use payments_core::ApiError;

/// The request id header, echoed on every response.
pub const REQUEST_ID: &str = "x-request-id";

/// The request id of a request: the client's `X-Request-ID` if it is 1-128 visible ASCII
/// characters, else a new UUID.
#[derive(Debug, Clone)]
pub struct RequestId(pub String);

impl RequestId {
    /// Takes the client's id or makes one.
    pub fn from_headers(headers: &HeaderMap) -> RequestId {
        let given = headers
            .get(REQUEST_ID)
            .and_then(|v| v.to_str().ok())
            .filter(|v| !v.is_empty() && v.len() <= 128 && v.bytes().all(|b| b.is_ascii_graphic()));
        RequestId(match given {
            Some(v) => v.to_string(),
            None => payments_core::random::uuid_v4(&crate::system::OsRandom).to_string(),
        })
    }
}

/// An error answered to a request.
#[derive(Debug)]
pub struct HttpError {
    /// The error.
    pub error: ApiError,
    /// The request it answers.
    pub request_id: String,
}

impl HttpError {
    /// Pairs an error with its request id.
    pub fn new(error: impl Into<ApiError>, request_id: &RequestId) -> Self {
        HttpError {
            error: error.into(),
            request_id: request_id.0.clone(),
        }
    }
}

impl IntoResponse for HttpError {
    fn into_response(self) -> Response {
        let status = StatusCode::from_u16(self.error.http_status())
            .unwrap_or(StatusCode::INTERNAL_SERVER_ERROR);
        if status.is_server_error() {
            tracing::error!(code = self.error.code.as_str(), message = %self.error.message, request_id = %self.request_id, "request failed");
        }
        let mut error = self.error;
        if status == StatusCode::INTERNAL_SERVER_ERROR {
            // Details are in the log; the client gets the request id to quote.
            error.message = "internal error; quote the request_id to support".to_string();
        }
        let body = serde_json::to_vec(&error.body(&self.request_id))
            .expect("the error body is plain strings");
        let mut resp = (status, body).into_response();
        let h = resp.headers_mut();
        h.insert("content-type", HeaderValue::from_static("application/json"));
        if let Some(secs) = error.retry_after {
            h.insert("retry-after", HeaderValue::from(secs));
        }
        resp
    }
}
