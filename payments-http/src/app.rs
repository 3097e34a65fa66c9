//! Router assembly: the merchant API ([`app`]) and the operator API ([`operator_app`]), each
//! with the error-answer and metrics middleware.
//!
//! Both routers can be served as they are or mounted under a prefix
//! (`Router::new().nest("/pay", app(state))`): signatures are verified against the path the
//! client sent, prefix included. Serve them with
//! `into_make_service_with_connect_info::<SocketAddr>()` so that IP allow-lists see the
//! client address; under a plain `axum::serve(listener, router)` the address is unknown, and
//! projects with an allow-list are refused (`403 ip_not_allowed`) rather than let through.

use axum::middleware;
use axum::Router;
use payments_core::{ApiError, ErrorCode};

use crate::error::HttpError;
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

/// Serves `router` on `listener` until `shutdown` resolves, then lets the requests in flight
/// finish. Each request knows its client's address (`ConnectInfo`), which the projects' IP
/// allow-lists need: served without it, a project with an allow-list is refused
/// (`403 ip_not_allowed`) rather than let through.
///
/// # Errors
/// The listener's I/O error.
pub async fn serve<T>(
    listener: tokio::net::TcpListener,
    router: Router,
    shutdown: impl std::future::Future<Output = T> + Send + 'static,
) -> std::io::Result<()> {
    let service = router.into_make_service_with_connect_info::<std::net::SocketAddr>();
    axum::serve(listener, service)
        .with_graceful_shutdown(async move {
            let _ = shutdown.await;
        })
        .await
}

/// `GET /metrics` alone, for a listener of its own (`metrics_listen`); behind
/// `metrics_token` when one is set.
pub fn metrics_app(state: AppState) -> Router {
    let routes = Router::new().route(
        "/metrics",
        axum::routing::get(
            |axum::extract::State(st): axum::extract::State<AppState>,
             headers: axum::http::HeaderMap| async move {
                crate::scrape::serve(&st, &headers).await
            },
        ),
    );
    with_middleware(routes, state)
}

/// `routes` with the middleware every router of this crate has: the JSON error body with the
/// request id for every error answer ([`crate::error::answer_errors`]), request metrics, the
/// body deadline (`408` for a body slower than `body_timeout`, [`crate::deadline`]), and the
/// JSON `404` for an unknown path. For routes of an embedding's own that should answer the
/// way the merchant API does.
pub fn with_middleware(routes: Router<AppState>, state: AppState) -> Router {
    routes
        .fallback(not_found)
        .layer(middleware::from_fn_with_state(
            state.clone(),
            crate::deadline::body_deadline,
        ))
        .layer(middleware::from_fn_with_state(
            state.clone(),
            crate::scrape::observe,
        ))
        .layer(middleware::from_fn_with_state(
            state.clone(),
            crate::error::answer_errors,
        ))
        .with_state(state)
}

async fn not_found() -> HttpError {
    ApiError::new(ErrorCode::NotFound, "no such endpoint").into()
}
