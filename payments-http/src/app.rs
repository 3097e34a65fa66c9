//! Router assembly: the merchant API ([`app`]) and the operator API ([`operator_app`]), each
//! with the request-id and metrics middleware.

use axum::extract::Request;
use axum::http::HeaderValue;
use axum::middleware::{self, Next};
use axum::response::{IntoResponse, Response};
use axum::Router;
use payments_core::{ApiError, ErrorCode};

use crate::error::{HttpError, RequestId, REQUEST_ID};
use crate::state::AppState;

/// The merchant API as a router, for `payments-server` or for another service to mount.
pub fn app(state: AppState) -> Router {
    let env = state.environment;
    with_middleware(crate::merchant::routes(env), state)
}

/// The operator API as a router (bind it to a private listener).
pub fn operator_app(state: AppState) -> Router {
    with_middleware(crate::operator::routes(state.clone()), state)
}

fn with_middleware(routes: Router<AppState>, state: AppState) -> Router {
    routes
        .fallback(not_found)
        .layer(middleware::from_fn_with_state(
            state.clone(),
            crate::metrics::observe,
        ))
        .layer(middleware::from_fn(request_id))
        .with_state(state)
}

async fn not_found(axum::Extension(rid): axum::Extension<RequestId>) -> Response {
    HttpError::new(ApiError::new(ErrorCode::NotFound, "no such endpoint"), &rid).into_response()
}

/// Takes or makes the request id, makes it available to handlers, echoes it on the response.
async fn request_id(mut req: Request, next: Next) -> Response {
    let rid = RequestId::from_headers(req.headers());
    req.extensions_mut().insert(rid.clone());
    let mut resp = next.run(req).await;
    if let Ok(v) = HeaderValue::from_str(&rid.0) {
        resp.headers_mut().insert(REQUEST_ID, v);
    }
    resp
}
