//! Router assembly: the merchant API ([`app`]) and the operator API ([`operator_app`]), each
//! with the error-answer and metrics middleware.
//!
//! Both routers can be served as they are or mounted under a prefix
//! (`Router::new().nest("/pay", app(state))`): signatures are verified against the path the
//! client sent, prefix included. Serve them with
//! `into_make_service_with_connect_info::<SocketAddr>()` so that IP allow-lists see the
//! client address; under a plain `axum::serve(listener, router)` the address is unknown, and
//! projects with an allow-list are refused (`403 ip_not_allowed`) rather than let through.

use std::time::Instant;

use axum::extract::{MatchedPath, Request, State};
use axum::middleware::{self, Next};
use axum::response::Response;
use axum::Router;
use payments_core::{ApiError, ErrorCode};

use crate::error::{HttpError, RequestId};
use crate::state::AppState;

/// The merchant API as a router, for `payments-server` or for another service to mount.
pub fn app(state: AppState) -> Router {
    let env = state.service.auth_config().environment;
    with_middleware(crate::merchant::routes(env), state)
}

/// The operator API as a router (bind it to a private listener).
pub fn operator_app(state: AppState) -> Router {
    with_middleware(crate::operator::routes(state.clone()), state)
}

fn with_middleware(routes: Router<AppState>, state: AppState) -> Router {
    routes
        .fallback(not_found)
        .layer(middleware::from_fn_with_state(state.clone(), observe))
        .layer(middleware::from_fn(crate::error::answer_errors))
        .with_state(state)
}

async fn not_found() -> HttpError {
    ApiError::new(ErrorCode::NotFound, "no such endpoint").into()
}

/// Request metrics and the access log line at debug (no headers, no bodies: no secrets).
async fn observe(State(st): State<AppState>, req: Request, next: Next) -> Response {
    let start = Instant::now();
    let route: &'static str = match req.extensions().get::<MatchedPath>().map(|p| p.as_str()) {
        Some(p) => intern(p),
        None => "unmatched",
    };
    let method: &'static str = intern(req.method().as_str());
    let rid = req
        .extensions()
        .get::<RequestId>()
        .map(|r| r.0.clone())
        .unwrap_or_default();
    let resp = next.run(req).await;
    let latency = start.elapsed();
    let status = resp.status().as_u16();
    st.metrics.observe_request(route, method, status, latency);
    // At debug: one formatted line and one write to stderr per request cost a few percent of
    // a create at full load (docs/performance.md); the metrics above count every request.
    tracing::debug!(
        target: "payments_http::access",
        method,
        route,
        status,
        latency_ms = latency.as_secs_f64() * 1000.0,
        request_id = %rid,
        "request"
    );
    resp
}

/// Route templates and methods form a small fixed set; keep one static copy of each.
fn intern(s: &str) -> &'static str {
    use std::collections::HashSet;
    use std::sync::{Mutex, OnceLock};
    static SET: OnceLock<Mutex<HashSet<&'static str>>> = OnceLock::new();
    let mut set = SET
        .get_or_init(Default::default)
        .lock()
        .expect("intern lock is never held across a panic");
    if let Some(v) = set.get(s) {
        return v;
    }
    // Bounded: only matched route templates and HTTP methods reach here.
    if set.len() > 1024 {
        return "other";
    }
    let leaked: &'static str = Box::leak(s.to_string().into_boxed_str());
    set.insert(leaked);
    leaked
}
