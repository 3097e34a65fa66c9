//! The admission of a merchant request, shared by every handler of the merchant API
//! ([`crate::merchant`], [`crate::events`], [`crate::balance`]): the body read up to its size
//! limit within the body timeout, a slot in the in-flight limit, then authentication, in
//! decisions.md's order.

use std::net::SocketAddr;

use axum::body::{Body, Bytes};
use axum::extract::{ConnectInfo, OriginalUri, Request};
use axum::http::HeaderValue;
use payments_core::amount::DecimalFormat;
use payments_core::auth::{Endpoint, HttpRequestParts};
use payments_core::service::{AuthRequest, Authenticated};
use payments_core::{ApiError, ErrorCode, PaymentId};

use crate::state::AppState;

/// Largest accepted request body (16 KiB); larger is `413 body_too_large`, read no further.
pub const MAX_BODY: usize = 16 * 1024;

/// Reads the body up to [`MAX_BODY`] within `timeout`: a larger declared length is refused
/// before reading, a stream that grows past the limit is cut off (`413 body_too_large`), and
/// a body still incomplete after `timeout` (a slow or lying client) is `408 request_timeout`.
pub async fn read_body(
    body: Body,
    declared: Option<&HeaderValue>,
    timeout: std::time::Duration,
) -> Result<Bytes, ApiError> {
    read_body_up_to(body, declared, timeout, MAX_BODY).await
}

/// [`read_body`] with another limit than [`MAX_BODY`] (an appeal's receipts).
pub async fn read_body_up_to(
    body: Body,
    declared: Option<&HeaderValue>,
    timeout: std::time::Duration,
    limit: usize,
) -> Result<Bytes, ApiError> {
    let too_large = || {
        ApiError::new(
            ErrorCode::BodyTooLarge,
            format!("request body exceeds {limit} bytes"),
        )
    };
    if let Some(len) = declared
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.parse::<u64>().ok())
    {
        if len > limit as u64 {
            return Err(too_large());
        }
    }
    match tokio::time::timeout(timeout, axum::body::to_bytes(body, limit)).await {
        Ok(Ok(bytes)) => Ok(bytes),
        Ok(Err(e)) => {
            let over_limit = std::error::Error::source(&e)
                .is_some_and(|s| s.is::<http_body_util::LengthLimitError>());
            Err(if over_limit {
                too_large()
            } else {
                ApiError::bad_request("the request body could not be read to its end")
            })
        }
        Err(_) => Err(ApiError::new(
            ErrorCode::RequestTimeout,
            format!(
                "the request body did not arrive within {} ms",
                timeout.as_millis()
            ),
        )),
    }
}

/// Authenticates the raw request for `endpoint` (see [`Gate::authenticate`](payments_core::service::Gate::authenticate)),
/// reading `payment` with the credentials (see [`AuthRequest::payment`]). The signature is
/// verified against the path the client sent: under a prefix (`Router::nest`) that is the
/// original URI, prefix included. The client address comes from `ConnectInfo` when the router
/// is served with it; otherwise it is unknown (see [`crate::app()`]).
///
/// [`Gate::authenticate`]: payments_core::service::Gate::authenticate
pub async fn authenticate(
    st: &AppState,
    endpoint: Endpoint,
    parts: &axum::http::request::Parts,
    body: &[u8],
    payment: Option<PaymentId>,
) -> Result<Authenticated, ApiError> {
    let headers: Vec<(&str, &[u8])> = parts
        .headers
        .iter()
        .map(|(n, v)| (n.as_str(), v.as_bytes()))
        .collect();
    let authority = parts
        .headers
        .get("host")
        .and_then(|h| h.to_str().ok())
        .or_else(|| parts.uri.authority().map(|a| a.as_str()))
        .unwrap_or("");
    let uri = parts
        .extensions
        .get::<OriginalUri>()
        .map_or(&parts.uri, |o| &o.0);
    let peer = parts
        .extensions
        .get::<ConnectInfo<SocketAddr>>()
        .map(|c| c.0.ip());
    let request = AuthRequest {
        endpoint,
        parts: HttpRequestParts {
            method: parts.method.as_str(),
            scheme: &st.public_scheme,
            authority,
            path_and_query: uri.path_and_query().map_or("/", |pq| pq.as_str()),
            headers: &headers,
            body,
        },
        peer,
        payment,
    };
    let outcome = st
        .service
        .gate()
        .authenticate(&request, st.rate_limiter.as_ref())
        .await;
    // The access line and the request log name the project the core attributed the request
    // to: the authenticated caller's, or a refusal's once its token was found.
    let project = match &outcome {
        Ok(auth) => Some(auth.context().project.id),
        Err(refused) => refused.project,
    };
    let note = parts
        .extensions
        .get::<std::sync::Arc<crate::error::AccessNote>>();
    if let (Some(note), Some(project)) = (note, project) {
        note.set_project(project);
    }
    let auth = outcome?;
    if let (Some(note), Some(created)) = (note, auth.signature_created()) {
        note.set_signature_created(created);
    }
    st.token_use
        .note(auth.context().token.id, st.service.ports().clock.now());
    Ok(auth)
}

/// A permit from the in-flight limit, or `503` when the server is saturated.
pub fn admit(st: &AppState) -> Result<tokio::sync::OwnedSemaphorePermit, ApiError> {
    st.in_flight.clone().try_acquire_owned().map_err(|_| {
        ApiError::new(
            ErrorCode::ServiceUnavailable,
            "the service is overloaded; retry shortly",
        )
        .with_retry_after(1)
    })
}

/// An authenticated merchant request, in decisions.md's order: the body read up to the size
/// limit (`413`) within the body timeout (`408`), a slot in the in-flight limit (`503` when
/// saturated), then authentication. The slot is taken only once the body is in: a client that
/// trickles its body holds a connection (bounded by the connection cap and the timeout), never
/// a slot other clients need.
pub(crate) struct Admitted {
    pub(crate) _permit: tokio::sync::OwnedSemaphorePermit,
    pub(crate) auth: Authenticated,
    pub(crate) body: Bytes,
    /// How the answer writes its decimals (`X-Decimals`).
    pub(crate) decimals: DecimalFormat,
}

/// The request header that opts in to decimals as JSON strings.
pub const DECIMALS_HEADER: &str = "x-decimals";

/// The `X-Decimals` request header: absent or `number` keeps API v1's JSON numbers; `string`
/// writes the Payment resource's decimals as JSON strings with the same text, for clients whose
/// JSON parser cannot keep decimals. Anything else, or the header twice, is `400 bad_request`,
/// decided before the body is read or a nonce is spent.
pub fn decimal_format(headers: &axum::http::HeaderMap) -> Result<DecimalFormat, ApiError> {
    let mut values = headers.get_all(DECIMALS_HEADER).iter();
    let Some(value) = values.next() else {
        return Ok(DecimalFormat::Number);
    };
    if values.next().is_some() {
        return Err(ApiError::new(
            ErrorCode::BadRequest,
            "X-Decimals: the header is sent more than once",
        ));
    }
    value
        .to_str()
        .ok()
        .and_then(|v| DecimalFormat::parse(v.trim()))
        .ok_or_else(|| {
            ApiError::new(
                ErrorCode::BadRequest,
                "X-Decimals: expected `number` (the default) or `string`",
            )
        })
}

pub(crate) async fn admitted(
    st: &AppState,
    endpoint: Endpoint,
    req: Request,
    payment: Option<PaymentId>,
) -> Result<Admitted, ApiError> {
    let (parts, body) = req.into_parts();
    // The project resource has no decimals: the header means nothing there.
    let decimals = match endpoint {
        Endpoint::GetProject
        | Endpoint::ReadEvents
        | Endpoint::ResendEvents
        | Endpoint::ReadBalance => DecimalFormat::Number,
        _ => decimal_format(&parts.headers)?,
    };
    // The deadline middleware of `app()` bounds this read too; `read_body`'s own timeout is
    // for `routes()` mounted without it, and costs one timer per create.
    let body = read_body(body, parts.headers.get("content-length"), st.body_timeout).await?;
    let permit = admit(st)?;
    // Boxed: authenticating is the largest state of every merchant handler's future (about
    // 5 KiB), which the router's and tracing's wrappers would otherwise move whole, several
    // times a request; a box moves as a pointer.
    let auth = Box::pin(authenticate(st, endpoint, &parts, &body, payment)).await?;
    Ok(Admitted {
        _permit: permit,
        auth,
        body,
        decimals,
    })
}
