//! The request-body deadline every router of this crate has ([`crate::app::with_middleware`]):
//! a body still incomplete [`body_timeout`](crate::state::AppState::with_body_timeout) after
//! the request arrived is cut off and the request answered `408 request_timeout`, whichever
//! extractor was reading it (`Bytes`, `Json`, the merchant API's own reader). A client that
//! announces a length and trickles it, or sends less than it announced, holds its connection
//! (one of the listener's capped slots) for that long and no longer.

use std::future::Future;
use std::pin::Pin;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::Duration;

use axum::body::{Body, Bytes};
use axum::extract::{Request, State};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use http_body::{Frame, SizeHint};
use payments_core::{ApiError, ErrorCode};

use crate::error::HttpError;
use crate::state::AppState;

/// The error a body past its deadline yields to whoever reads it.
#[derive(Debug, thiserror::Error)]
#[error("the request body did not arrive within {} ms", .0.as_millis())]
pub struct BodyDeadline(pub Duration);

impl From<BodyDeadline> for ApiError {
    fn from(e: BodyDeadline) -> Self {
        ApiError::new(ErrorCode::RequestTimeout, e.to_string())
    }
}

/// A body that fails with [`BodyDeadline`] once its deadline passes, and marks `expired`.
struct DeadlineBody {
    inner: Body,
    sleep: Pin<Box<tokio::time::Sleep>>,
    timeout: Duration,
    expired: Arc<AtomicBool>,
    done: bool,
}

impl http_body::Body for DeadlineBody {
    type Data = Bytes;
    type Error = axum::Error;

    fn poll_frame(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, axum::Error>>> {
        let this = self.get_mut();
        if this.done {
            return Poll::Ready(None);
        }
        if let Poll::Ready(frame) = Pin::new(&mut this.inner).poll_frame(cx) {
            return Poll::Ready(frame);
        }
        if this.sleep.as_mut().poll(cx).is_ready() {
            this.done = true;
            this.expired.store(true, Ordering::Relaxed);
            return Poll::Ready(Some(Err(axum::Error::new(BodyDeadline(this.timeout)))));
        }
        Poll::Pending
    }

    fn is_end_stream(&self) -> bool {
        self.done || self.inner.is_end_stream()
    }

    fn size_hint(&self) -> SizeHint {
        self.inner.size_hint()
    }
}

/// The middleware: gives the request's body the deadline and answers `408` when a handler's
/// read ran into it (whatever the handler made of the read error).
pub(crate) async fn body_deadline(
    State(st): State<AppState>,
    request: Request,
    next: Next,
) -> Response {
    let (parts, body) = request.into_parts();
    // A request without a body (most GETs) has nothing to wait for: no timer for it.
    if http_body::Body::is_end_stream(&body) {
        return next.run(Request::from_parts(parts, body)).await;
    }
    let timeout = st.body_timeout;
    let expired = Arc::new(AtomicBool::new(false));
    let body = Body::new(DeadlineBody {
        inner: body,
        sleep: Box::pin(tokio::time::sleep(timeout)),
        timeout,
        expired: expired.clone(),
        done: false,
    });
    let response = next.run(Request::from_parts(parts, body)).await;
    if expired.load(Ordering::Relaxed) {
        return HttpError::from(BodyDeadline(timeout)).into_response();
    }
    response
}
