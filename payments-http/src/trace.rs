//! The spans made for traces only: one per request, per store call, per provider call and per
//! callback delivery, with the target [`TARGET`], which the server's log never shows. Without a
//! subscriber that wants them (the server exports them over OTLP when `[telemetry]
//! otlp_endpoint` is set) a span here costs one check of a cached flag: the field values are
//! not even computed.
//!
//! A request's span takes its parent from the request's W3C trace context (`traceparent`)
//! through a hook the server installs ([`set_remote_parent`]): this crate knows spans only as
//! `tracing` spans and depends on no OpenTelemetry crate.

use std::sync::OnceLock;

use axum::http::HeaderMap;
use tracing::Span;

/// The target of every span made here.
pub const TARGET: &str = "payments_trace";

static REMOTE_PARENT: OnceLock<fn(&HeaderMap, &Span)> = OnceLock::new();

/// Installs the function that makes a request's span a child of the trace its headers name
/// (once; later calls are ignored).
pub fn set_remote_parent(hook: fn(&HeaderMap, &Span)) {
    let _ = REMOTE_PARENT.set(hook);
}

/// The span of one request (`otel.kind = server`), named `METHOD route`, with the request id;
/// [`record_status`] adds the answer's status.
pub fn request_span(method: &str, route: &str, request_id: &str, headers: &HeaderMap) -> Span {
    let span = tracing::info_span!(
        target: TARGET,
        "request",
        otel.name = %format_args!("{method} {route}"),
        otel.kind = "server",
        http.request.method = %method,
        http.route = %route,
        http.response.status_code = tracing::field::Empty,
        request_id = %request_id,
    );
    if !span.is_disabled() {
        if let Some(hook) = REMOTE_PARENT.get() {
            hook(headers, &span);
        }
    }
    span
}

/// Records the answer's status on a request's span.
pub fn record_status(span: &Span, status: u16) {
    span.record("http.response.status_code", status);
}

/// The span of one store call (`otel.kind = client`), named after the port's method.
pub fn store_span(op: &'static str, kind: &'static str) -> Span {
    tracing::info_span!(
        target: TARGET,
        "store",
        otel.name = %format_args!("store {op}"),
        otel.kind = "client",
        db.operation.name = op,
        payments.store.kind = kind,
    )
}

/// The span of one requisite provider call (`otel.kind = client`); the outcome is recorded
/// with [`record_outcome`].
pub fn provider_span(payment_id: &str, provider: &str) -> Span {
    tracing::info_span!(
        target: TARGET,
        "provider",
        otel.name = "provider issue",
        otel.kind = "client",
        payment_id = %payment_id,
        payments.provider = %provider,
        payments.provider.outcome = tracing::field::Empty,
    )
}

/// Records a provider call's outcome (`issued`, `no_requisites`, ...).
pub fn record_outcome(span: &Span, outcome: &'static str) {
    span.record("payments.provider.outcome", outcome);
}

/// The span of one callback delivery attempt (`otel.kind = client`).
pub fn callback_span(event_id: &str, payment_id: &str, attempt: u32) -> Span {
    tracing::info_span!(
        target: TARGET,
        "callback",
        otel.name = "callback deliver",
        otel.kind = "client",
        event_id = %event_id,
        payment_id = %payment_id,
        payments.callback.attempt = attempt,
        payments.callback.result = tracing::field::Empty,
    )
}

/// Records a delivery attempt's result.
pub fn record_result(span: &Span, result: &str) {
    span.record("payments.callback.result", result);
}
