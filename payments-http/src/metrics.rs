//! Prometheus metrics with `prometheus-client`: request counts and latency histograms by route
//! template, method and status, callback delivery counts, and gauges read from the store at
//! scrape time (payments by status, outbox depth). Rendered in the text format on the operator
//! listener's `/metrics`.
//!
//! Every label takes values from a bounded set: the route is a template of the router (or
//! `unmatched`), the method one of the nine standard methods or `other`, the status a status
//! code. A request takes no lock of its own: `prometheus-client` finds the series under the
//! read side of an `RwLock` (written once per new label set) and counts with atomics; the
//! histogram's lock is per series.

use std::fmt::Write as _;
use std::time::{Duration, Instant};

use axum::extract::{MatchedPath, Request, State};
use axum::http::Method;
use axum::middleware::Next;
use axum::response::Response;
use prometheus_client::encoding::text::{encode_eof, encode_registry};
use prometheus_client::encoding::{EncodeLabelSet, EncodeLabelValue, LabelValueEncoder};
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::metrics::histogram::Histogram;
use prometheus_client::registry::Registry;

use crate::error::RequestId;
use crate::state::AppState;

/// The content type of [`Metrics::render`]'s text (OpenMetrics; Prometheus also reads it as
/// its classic text format).
pub const CONTENT_TYPE: &str = "application/openmetrics-text; version=1.0.0; charset=utf-8";

/// Latency bucket upper bounds, seconds.
const BUCKETS: [f64; 12] = [
    0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 5.0,
];

/// The route label: the matched route template (a `MatchedPath`, shared, not copied) or
/// `unmatched`.
#[derive(Debug, Clone)]
pub enum Route {
    /// A route of the router.
    Matched(MatchedPath),
    /// A route template known to the code (e.g. in tests).
    Template(&'static str),
    /// No route matched (the fallback's 404).
    Unmatched,
}

impl Route {
    /// The label value.
    pub fn as_str(&self) -> &str {
        match self {
            Route::Matched(p) => p.as_str(),
            Route::Template(t) => t,
            Route::Unmatched => "unmatched",
        }
    }
}

impl PartialEq for Route {
    fn eq(&self, other: &Route) -> bool {
        self.as_str() == other.as_str()
    }
}

impl Eq for Route {}

impl std::hash::Hash for Route {
    fn hash<H: std::hash::Hasher>(&self, state: &mut H) {
        self.as_str().hash(state);
    }
}

impl EncodeLabelValue for Route {
    fn encode(&self, encoder: &mut LabelValueEncoder) -> Result<(), std::fmt::Error> {
        encoder.write_str(self.as_str())
    }
}

/// The method label: the standard methods by name, any other token as `other`, so a client
/// cannot add series by inventing methods.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct MethodLabel(&'static str);

impl MethodLabel {
    /// The label of `method`.
    pub fn of(method: &Method) -> MethodLabel {
        const STANDARD: [Method; 9] = [
            Method::GET,
            Method::HEAD,
            Method::POST,
            Method::PUT,
            Method::DELETE,
            Method::CONNECT,
            Method::OPTIONS,
            Method::TRACE,
            Method::PATCH,
        ];
        match STANDARD.iter().find(|m| *m == method) {
            Some(m) => MethodLabel(m.as_str()),
            None => MethodLabel("other"),
        }
    }

    /// The label value.
    pub fn as_str(self) -> &'static str {
        self.0
    }
}

impl EncodeLabelValue for MethodLabel {
    fn encode(&self, encoder: &mut LabelValueEncoder) -> Result<(), std::fmt::Error> {
        encoder.write_str(self.0)
    }
}

#[derive(Debug, Clone, PartialEq, Eq, Hash, EncodeLabelSet)]
struct RequestLabels {
    route: Route,
    method: MethodLabel,
    status: u16,
}

#[derive(Debug, Clone, PartialEq, Eq, Hash, EncodeLabelSet)]
struct OutcomeLabels {
    outcome: &'static str,
}

#[derive(Debug, Clone, PartialEq, Eq, Hash, EncodeLabelSet)]
struct StatusLabels {
    status: String,
}

fn latency_histogram() -> Histogram {
    Histogram::new(BUCKETS)
}

/// The process's metrics.
#[derive(Debug)]
pub struct Metrics {
    registry: Registry,
    requests: Family<RequestLabels, Counter>,
    latency: Family<RequestLabels, Histogram, fn() -> Histogram>,
    deliveries: Family<OutcomeLabels, Counter>,
}

impl Default for Metrics {
    fn default() -> Metrics {
        let requests = Family::<RequestLabels, Counter>::default();
        let latency = Family::new_with_constructor(latency_histogram as fn() -> Histogram);
        let deliveries = Family::<OutcomeLabels, Counter>::default();
        let mut registry = Registry::default();
        // Counters are exposed with `_total` appended: payments_http_requests_total.
        registry.register(
            "payments_http_requests",
            "Requests by route, method and status",
            requests.clone(),
        );
        registry.register(
            "payments_http_request_duration_seconds",
            "Request latency",
            latency.clone(),
        );
        registry.register(
            "payments_callback_attempts",
            "Callback delivery attempts by outcome",
            deliveries.clone(),
        );
        Metrics {
            registry,
            requests,
            latency,
            deliveries,
        }
    }
}

impl Metrics {
    /// Records one request: route, method, status and latency.
    pub fn observe_request(
        &self,
        route: Route,
        method: MethodLabel,
        status: u16,
        latency: Duration,
    ) {
        let labels = RequestLabels {
            route,
            method,
            status,
        };
        self.requests.get_or_create(&labels).inc();
        self.latency
            .get_or_create(&labels)
            .observe(latency.as_secs_f64());
    }

    /// Records one callback delivery attempt by outcome (`success`, `failure`).
    pub fn observe_delivery(&self, outcome: &'static str) {
        self.deliveries
            .get_or_create(&OutcomeLabels { outcome })
            .inc();
    }

    /// The text exposition, with the store gauges given by the caller.
    pub fn render(&self, payments_by_status: &[(String, u64)], outbox_pending: u64) -> String {
        let gauge = |n: u64| i64::try_from(n).unwrap_or(i64::MAX);
        let payments = Family::<StatusLabels, Gauge>::default();
        for (status, n) in payments_by_status {
            payments
                .get_or_create(&StatusLabels {
                    status: status.clone(),
                })
                .set(gauge(*n));
        }
        let pending = Gauge::<i64>::default();
        pending.set(gauge(outbox_pending));
        // The store gauges are read per scrape: a registry of their own, rendered after the
        // counters, so a status that has no payments left disappears instead of going stale.
        let mut scrape = Registry::default();
        scrape.register("payments_payments", "Payments stored, by status", payments);
        scrape.register(
            "payments_outbox_pending",
            "Callback events waiting for delivery",
            pending,
        );
        let mut out = String::new();
        encode_registry(&mut out, &self.registry)
            .and_then(|()| encode_registry(&mut out, &scrape))
            .and_then(|()| encode_eof(&mut out))
            .expect("writing to a String does not fail");
        out
    }
}

/// Request metrics and the access log line at debug (no headers, no bodies: no secrets).
pub async fn observe(State(st): State<AppState>, req: Request, next: Next) -> Response {
    let start = Instant::now();
    let route = match req.extensions().get::<MatchedPath>() {
        Some(p) => Route::Matched(p.clone()),
        None => Route::Unmatched,
    };
    let method = MethodLabel::of(req.method());
    let rid = req
        .extensions()
        .get::<RequestId>()
        .map(|r| r.0.clone())
        .unwrap_or_default();
    let resp = next.run(req).await;
    let latency = start.elapsed();
    let status = resp.status().as_u16();
    // At debug: one formatted line and one write to stderr per request cost a few percent of
    // a create at full load (docs/performance.md); the metrics count every request.
    tracing::debug!(
        target: "payments_http::access",
        method = method.as_str(),
        route = route.as_str(),
        status,
        latency_ms = latency.as_secs_f64() * 1000.0,
        request_id = %rid,
        "request"
    );
    st.metrics.observe_request(route, method, status, latency);
    resp
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn renders_counters_and_histograms() {
        let m = Metrics::default();
        let post = MethodLabel::of(&Method::POST);
        let route = || Route::Template("/api/v1/payments");
        m.observe_request(route(), post, 201, Duration::from_millis(3));
        m.observe_request(route(), post, 201, Duration::from_millis(30));
        m.observe_delivery("success");
        let text = m.render(&[("processing".into(), 2)], 5);
        assert!(text.contains("payments_http_requests_total{route=\"/api/v1/payments\",method=\"POST\",status=\"201\"} 2"), "{text}");
        let bucket = |le: &str, n: u32| {
            format!("payments_http_request_duration_seconds_bucket{{le=\"{le}\",route=\"/api/v1/payments\",method=\"POST\",status=\"201\"}} {n}")
        };
        assert!(text.contains(&bucket("0.005", 1)), "{text}");
        assert!(text.contains(&bucket("0.05", 2)), "{text}");
        assert!(text.contains(&bucket("+Inf", 2)), "{text}");
        assert!(text.contains("payments_callback_attempts_total{outcome=\"success\"} 1"));
        assert!(text.contains("payments_payments{status=\"processing\"} 2"));
        assert!(text.contains("payments_outbox_pending 5"));
        assert!(text.ends_with("# EOF\n"));
    }

    #[test]
    fn invented_methods_share_one_label() {
        let m = Metrics::default();
        for name in ["FOO", "BAR1", "X-Y", "get"] {
            let method = Method::from_bytes(name.as_bytes()).unwrap();
            assert_eq!(MethodLabel::of(&method).as_str(), "other");
            m.observe_request(
                Route::Unmatched,
                MethodLabel::of(&method),
                405,
                Duration::ZERO,
            );
        }
        let text = m.render(&[], 0);
        assert!(text.contains(
            "payments_http_requests_total{route=\"unmatched\",method=\"other\",status=\"405\"} 4"
        ), "{text}");
        assert_eq!(MethodLabel::of(&Method::DELETE).as_str(), "DELETE");
    }
}
