//! Prometheus metrics with `prometheus-client`: request counts and latency histograms by route
//! template, method and status; callback delivery outcomes and failed events; requisite
//! provider calls; store operations (latency by kind, errors by cause); build information;
//! and gauges read from the store at scrape time ([`StoreGauges`]: payments by status, outbox
//! depth and age, failed events, sweeper lag, database size), each read through an index or a
//! counter, never a scan. Rendered in the text format on `/metrics` (docs/operations.md lists
//! every metric and the alerts to set).
//!
//! Every label takes values from a bounded set: the route is a template of the router (or
//! `unmatched`), the method one of the nine standard methods or `other`, the status a status
//! code. A request takes no lock of its own: `prometheus-client` finds the series under the
//! read side of an `RwLock` (written once per new label set) and counts with atomics; the
//! histogram's lock is per series.

use std::fmt::Write as _;
use std::sync::Arc;
use std::time::Duration;

use axum::extract::MatchedPath;
use axum::http::Method;
use payments_core::service::BatchStats;
use payments_core::store::UnavailableCause;
use prometheus_client::encoding::text::{encode_eof, encode_registry};
use prometheus_client::encoding::{EncodeLabelSet, EncodeLabelValue, LabelValueEncoder};
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::metrics::histogram::Histogram;
use prometheus_client::registry::Registry;

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
struct ProviderOutcomeLabels {
    provider: String,
    outcome: &'static str,
}

#[derive(Debug, Clone, PartialEq, Eq, Hash, EncodeLabelSet)]
struct ProviderLabels {
    provider: String,
}

#[derive(Debug, Clone, PartialEq, Eq, Hash, EncodeLabelSet)]
struct ProviderStateLabels {
    provider: String,
    state: &'static str,
}

#[derive(Debug, Clone, PartialEq, Eq, Hash, EncodeLabelSet)]
struct StatusLabels {
    status: String,
}

#[derive(Debug, Clone, PartialEq, Eq, Hash, EncodeLabelSet)]
struct ReasonLabels {
    reason: &'static str,
}

#[derive(Debug, Clone, PartialEq, Eq, Hash, EncodeLabelSet)]
struct KindLabels {
    kind: &'static str,
}

#[derive(Debug, Clone, PartialEq, Eq, Hash, EncodeLabelSet)]
struct CauseLabels {
    cause: &'static str,
}

#[derive(Debug, Clone, PartialEq, Eq, Hash, EncodeLabelSet)]
struct FileLabels {
    file: &'static str,
}

#[derive(Debug, Clone, PartialEq, Eq, Hash, EncodeLabelSet)]
struct BuildLabels {
    version: &'static str,
    schema_version: String,
}

fn latency_histogram() -> Histogram {
    Histogram::new(BUCKETS)
}

/// Provider latency buckets, seconds: up to the 15 s budget.
const PROVIDER_BUCKETS: [f64; 10] = [0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 15.0];

fn provider_histogram() -> Histogram {
    Histogram::new(PROVIDER_BUCKETS)
}

/// What the store says at scrape time, each value read cheaply (an index probe or a counter
/// row); `None` leaves the metric out (the store could not say).
#[derive(Debug, Clone, Default)]
pub struct StoreGauges {
    /// Payments per status (the store's counters).
    pub payments_by_status: Vec<(String, u64)>,
    /// Events waiting for delivery.
    pub outbox_pending: Option<u64>,
    /// Failed events no resend answered yet.
    pub outbox_failed: Option<u64>,
    /// Seconds since the oldest pending event was queued (0 without pending events).
    pub oldest_pending_age: Option<f64>,
    /// Seconds the oldest due payment is overdue for the sweeper (0 when none is overdue).
    pub sweeper_lag: Option<f64>,
    /// Whether callback dispatch is held.
    pub dispatch_held: Option<bool>,
    /// Sizes of the database files (`database`, `wal`), bytes.
    pub database_bytes: Vec<(&'static str, u64)>,
}

/// The process's metrics.
#[derive(Debug)]
pub struct Metrics {
    registry: Registry,
    requests: Family<RequestLabels, Counter>,
    latency: Family<RequestLabels, Histogram, fn() -> Histogram>,
    deliveries: Family<OutcomeLabels, Counter>,
    delivery_failures: Family<ReasonLabels, Counter>,
    events_failed: Counter,
    provider_calls: Family<OutcomeLabels, Counter>,
    provider_latency: Family<OutcomeLabels, Histogram, fn() -> Histogram>,
    provider_attempts: Family<ProviderOutcomeLabels, Counter>,
    provider_attempt_latency: Family<ProviderLabels, Histogram, fn() -> Histogram>,
    provider_completed: Family<ProviderLabels, Counter>,
    store_latency: Family<KindLabels, Histogram, fn() -> Histogram>,
    store_errors: Family<CauseLabels, Counter>,
    build_info: Family<BuildLabels, Gauge>,
    stuck_creates: Family<OutcomeLabels, Counter>,
    ledger_differences: Gauge,
    ledger_reconciliations: Counter,
    appeals_active: Gauge,
    appeals_overdue: Gauge,
    appeals_oldest: Gauge,
    appeals_expired: Counter,
    request_log_dropped: Counter,
    dropped_log_lines: std::sync::OnceLock<fn() -> u64>,
    trace_export_failures: std::sync::OnceLock<fn() -> u64>,
    rate_ages: std::sync::OnceLock<RateAgesSource>,
    provider_health: std::sync::OnceLock<ProviderHealthSource>,
    store_heartbeat: std::sync::OnceLock<Arc<crate::heartbeat::StoreHeartbeat>>,
}

/// Each provider's breaker state (`closed`, `open`, `half_open`) and issue rate, read at each
/// scrape ([`Metrics::report_provider_health`]).
pub type ProviderHealth = Arc<dyn Fn() -> Vec<(String, &'static str, f64)> + Send + Sync>;

/// A registered [`ProviderHealth`].
struct ProviderHealthSource(ProviderHealth);

impl std::fmt::Debug for ProviderHealthSource {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("ProviderHealth(..)")
    }
}

/// A registered [`RateAges`] (a closure has no `Debug`).
struct RateAgesSource(RateAges);

impl std::fmt::Debug for RateAgesSource {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("RateAges(..)")
    }
}

/// The age of each currency's last good rate, in seconds, read at each scrape
/// ([`Metrics::report_rate_ages`]).
pub type RateAges = Arc<dyn Fn() -> Vec<(String, f64)> + Send + Sync>;

#[derive(Debug, Clone, PartialEq, Eq, Hash, EncodeLabelSet)]
struct CurrencyLabels {
    currency: String,
}

impl Default for Metrics {
    fn default() -> Metrics {
        let stuck_creates = Family::<OutcomeLabels, Counter>::default();
        // Both outcomes from the start: an alert on `ambiguous` needs a series before the
        // first one.
        for outcome in ["recovered", "ambiguous", "deferred"] {
            drop(stuck_creates.get_or_create(&OutcomeLabels { outcome }));
        }
        // Every failure cause from the start too: a series born with its first error reads as
        // no increase to `rate()`, and the store-errors alert would miss an outage's first
        // minutes (or a short outage entirely).
        let store_errors = Family::<CauseLabels, Counter>::default();
        let causes = UnavailableCause::ALL.iter().map(|c| c.as_str());
        for cause in causes.chain(["corrupt"]) {
            drop(store_errors.get_or_create(&CauseLabels { cause }));
        }
        let mut metrics = Metrics {
            registry: Registry::default(),
            requests: Family::default(),
            latency: Family::new_with_constructor(latency_histogram as fn() -> Histogram),
            deliveries: Family::default(),
            delivery_failures: Family::default(),
            events_failed: Counter::default(),
            provider_calls: Family::default(),
            provider_latency: Family::new_with_constructor(provider_histogram as fn() -> Histogram),
            provider_attempts: Family::default(),
            provider_attempt_latency: Family::new_with_constructor(
                provider_histogram as fn() -> Histogram,
            ),
            provider_completed: Family::default(),
            store_latency: Family::new_with_constructor(latency_histogram as fn() -> Histogram),
            store_errors,
            build_info: Family::default(),
            stuck_creates,
            ledger_differences: Gauge::default(),
            ledger_reconciliations: Counter::default(),
            appeals_active: Gauge::default(),
            appeals_overdue: Gauge::default(),
            appeals_oldest: Gauge::default(),
            appeals_expired: Counter::default(),
            request_log_dropped: Counter::default(),
            dropped_log_lines: std::sync::OnceLock::new(),
            trace_export_failures: std::sync::OnceLock::new(),
            rate_ages: std::sync::OnceLock::new(),
            provider_health: std::sync::OnceLock::new(),
            store_heartbeat: std::sync::OnceLock::new(),
        };
        // The registration order is the exposition's order.
        metrics.register_requests();
        metrics.register_callbacks();
        metrics.register_providers();
        metrics.register_store();
        metrics.register_operations();
        metrics
    }
}

/// The registration of the process's metric families, one group per step of
/// [`Metrics::default`].
impl Metrics {
    /// The HTTP requests: counts and latency.
    fn register_requests(&mut self) {
        // Counters are exposed with `_total` appended: payments_http_requests_total.
        self.registry.register(
            "payments_http_requests",
            "Requests by route, method and status",
            self.requests.clone(),
        );
        self.registry.register(
            "payments_http_request_duration_seconds",
            "Request latency",
            self.latency.clone(),
        );
    }

    /// The callback deliveries: attempts, failures by reason, events that failed.
    fn register_callbacks(&mut self) {
        self.registry.register(
            "payments_callback_attempts",
            "Callback delivery attempts by outcome",
            self.deliveries.clone(),
        );
        self.registry.register(
            "payments_callback_attempt_failures",
            "Failed callback attempts by reason (timeout, connect, http_4xx, http_5xx, \
             redirect, forbidden_address, destination_refused, response, request)",
            self.delivery_failures.clone(),
        );
        self.registry.register(
            "payments_callback_events_failed",
            "Callback events that used every attempt without a 2xx",
            self.events_failed.clone(),
        );
    }

    /// The requisite providers: the service's calls, each provider's attempts, completions.
    fn register_providers(&mut self) {
        self.registry.register(
            "payments_provider_requests",
            "Requisite provider calls by outcome (issued, no_requisites, not_routable, \
             ambiguous, abandoned: the service's budget ended first)",
            self.provider_calls.clone(),
        );
        self.registry.register(
            "payments_provider_request_duration_seconds",
            "Requisite provider call latency by outcome",
            self.provider_latency.clone(),
        );
        self.registry.register(
            "payments_provider_attempts",
            "Calls of each requisite provider by outcome (issued, no_requisites, not_routable, \
             unavailable: not reached, ambiguous, abandoned): with several providers, one create \
             may call more than one",
            self.provider_attempts.clone(),
        );
        self.registry.register(
            "payments_provider_attempt_duration_seconds",
            "Latency of each requisite provider's calls",
            self.provider_attempt_latency.clone(),
        );
        self.registry.register(
            "payments_provider_completed",
            "Payments a provider reported paid (completed by its notification): with the \
             issued attempts, each provider's conversion",
            self.provider_completed.clone(),
        );
    }

    /// The store calls: latency by kind, errors by cause.
    fn register_store(&mut self) {
        self.registry.register(
            "payments_store_operation_duration_seconds",
            "Store call latency by kind (read, write)",
            self.store_latency.clone(),
        );
        self.registry.register(
            "payments_store_errors",
            "Store errors by cause (disk full, locked, io, unreachable, closed, overloaded, \
             timed out, other, corrupt, conflict, duplicate, not found)",
            self.store_errors.clone(),
        );
    }

    /// The background work and the build: stuck creates, ledger reconciliations, the request
    /// log's drops, the build information.
    fn register_operations(&mut self) {
        self.registry.register(
            "payments_stuck_creates",
            "Recoveries of payments the sweeper found still in created past 60 s (their \
             create never recorded the provider's answer), by outcome: recovered (the provider \
             asked again answered), deferred (it could not say yet: asked again later) or \
             ambiguous (it still could not say at the recovery window's end: error / \
             provider_result_ambiguous)",
            self.stuck_creates.clone(),
        );
        self.registry.register(
            "payments_appeals_active",
            "Appeals waiting for a decision (open or under review), as the last appeals sweep \
             counted them (at most 1,000)",
            self.appeals_active.clone(),
        );
        self.registry.register(
            "payments_appeals_overdue",
            "Appeals waiting for a decision past their deadline after the last appeals sweep \
             (0 unless the sweep cannot expire them)",
            self.appeals_overdue.clone(),
        );
        self.registry.register(
            "payments_appeals_oldest_waiting_seconds",
            "How long the oldest appeal still waiting for a decision has waited, at the last \
             appeals sweep (0: none waits)",
            self.appeals_oldest.clone(),
        );
        self.registry.register(
            "payments_appeals_expired",
            "Appeals the sweep expired at their deadline, nobody having decided them",
            self.appeals_expired.clone(),
        );
        self.registry.register(
            "payments_ledger_differences",
            "Differences between the project balances and their payments and payouts that the \
             last ledger reconciliation found (0: every balance reconciles)",
            self.ledger_differences.clone(),
        );
        self.registry.register(
            "payments_ledger_reconciliations",
            "Ledger reconciliations run (by the server's schedule or the operator)",
            self.ledger_reconciliations.clone(),
        );
        self.registry.register(
            "payments_request_log_dropped",
            "Merchant requests left out of the request log because its queue was full (the \
             request itself was answered as usual)",
            self.request_log_dropped.clone(),
        );
        self.registry.register(
            "payments_build_info",
            "The running build: version and database schema version (always 1)",
            self.build_info.clone(),
        );
    }
}

impl Metrics {
    /// Exposes `payments_log_lines_dropped_total`, read from `source` at each scrape: the lines
    /// the process's log writer dropped because standard error did not take them. The server
    /// gives its log writer's count; an embedding with a writer of its own may give its count,
    /// and without one the metric is left out. A second source is ignored.
    pub fn count_dropped_log_lines(&self, source: fn() -> u64) {
        let _ = self.dropped_log_lines.set(source);
    }

    /// Exposes `payments_trace_export_failures_total`, read from `source` at each scrape: the
    /// batches of spans the OpenTelemetry exporter could not deliver (the collector refused
    /// them, did not answer in time, or could not be reached). The server gives its exporter's
    /// count when traces are on; without a source the metric is left out. A second source is
    /// ignored.
    pub fn count_trace_export_failures(&self, source: fn() -> u64) {
        let _ = self.trace_export_failures.set(source);
    }

    /// Counts a merchant request the request log's full queue dropped
    /// (`payments_request_log_dropped_total`).
    pub fn count_request_log_dropped(&self) {
        self.request_log_dropped.inc();
    }

    /// Records one call of the provider `provider`: its outcome and latency.
    pub fn observe_provider_attempt(
        &self,
        provider: &str,
        outcome: &'static str,
        latency: Duration,
    ) {
        self.provider_attempts
            .get_or_create(&ProviderOutcomeLabels {
                provider: provider.to_string(),
                outcome,
            })
            .inc();
        self.provider_attempt_latency
            .get_or_create(&ProviderLabels {
                provider: provider.to_string(),
            })
            .observe(latency.as_secs_f64());
    }

    /// Counts a payment the provider `provider` reported paid.
    pub fn observe_provider_completed(&self, provider: &str) {
        self.provider_completed
            .get_or_create(&ProviderLabels {
                provider: provider.to_string(),
            })
            .inc();
    }

    /// Exposes `payments_provider_breaker{provider,state}` (1 for the provider's state, 0 for
    /// the others) and `payments_provider_issue_rate{provider}`, read from `source` at each
    /// scrape (the router's health). A second source is ignored.
    pub fn report_provider_health(&self, source: ProviderHealth) {
        let _ = self.provider_health.set(ProviderHealthSource(source));
    }

    /// The heartbeat whose last answer `payments_store_unanswered_seconds` shows (exposed once
    /// this is called: [`crate::workers::Workers::start_for`] calls it and runs the heartbeat).
    pub fn store_heartbeat(&self) -> Arc<crate::heartbeat::StoreHeartbeat> {
        self.store_heartbeat.get_or_init(Default::default).clone()
    }

    /// Exposes `payments_rate_age_seconds{currency}`, read from `source` at each scrape: how
    /// old each currency's last good rate is (the server's live rate source gives it; a rate
    /// source that never ages gives none). A second source is ignored.
    pub fn report_rate_ages(&self, source: RateAges) {
        let _ = self.rate_ages.set(RateAgesSource(source));
    }

    /// Counts payments the sweeper found left in `created` by a create that never finished
    /// (`payments_stuck_creates_total{outcome}`): `recovered` by asking the provider again,
    /// `deferred` when it could not say yet (asked again later, within the recovery window),
    /// `ambiguous` when it still could not say at the window's end.
    pub fn count_stuck_creates(&self, report: &payments_core::service::SweepReport) {
        let counts = [
            ("recovered", report.recovered),
            ("ambiguous", report.ambiguous),
            ("deferred", report.deferred),
        ];
        for (outcome, n) in counts {
            if n > 0 {
                self.stuck_creates
                    .get_or_create(&OutcomeLabels { outcome })
                    .inc_by(n as u64);
            }
        }
    }

    /// Records an appeals sweep: how many it expired, the appeals still waiting and past their
    /// deadline after it, and how long the oldest of them has waited.
    pub fn appeals_swept(&self, expired: usize, active: usize, overdue: usize, oldest_secs: u64) {
        self.appeals_expired.inc_by(expired as u64);
        self.appeals_oldest
            .set(i64::try_from(oldest_secs).unwrap_or(i64::MAX));
        self.appeals_active
            .set(i64::try_from(active).unwrap_or(i64::MAX));
        self.appeals_overdue
            .set(i64::try_from(overdue).unwrap_or(i64::MAX));
    }

    /// Records a ledger reconciliation: `payments_ledger_differences` becomes the number of
    /// differences it found, `payments_ledger_reconciliations_total` counts it.
    pub fn ledger_reconciled(&self, report: &payments_core::service::LedgerReport) {
        self.ledger_differences
            .set(i64::try_from(report.differences.len()).unwrap_or(i64::MAX));
        self.ledger_reconciliations.inc();
    }

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

    /// Records that a callback attempt failed, by reason
    /// ([`crate::dispatcher::failure_reason`]).
    pub fn observe_delivery_failure(&self, reason: &'static str) {
        self.delivery_failures
            .get_or_create(&ReasonLabels { reason })
            .inc();
    }

    /// Records that a callback event used its last attempt without a `2xx`.
    pub fn observe_event_failed(&self) {
        self.events_failed.inc();
    }

    /// Records one requisite provider call by outcome and latency.
    pub fn observe_provider(&self, outcome: &'static str, latency: Duration) {
        let labels = OutcomeLabels { outcome };
        self.provider_calls.get_or_create(&labels).inc();
        self.provider_latency
            .get_or_create(&labels)
            .observe(latency.as_secs_f64());
    }

    /// Records one store call: its latency by kind (`read`, `write`) and, if it failed, its
    /// cause ([`StoreError::cause`](payments_core::store::StoreError::cause)).
    pub fn observe_store(
        &self,
        kind: &'static str,
        latency: Duration,
        error: Option<&'static str>,
    ) {
        self.store_latency
            .get_or_create(&KindLabels { kind })
            .observe(latency.as_secs_f64());
        if let Some(cause) = error {
            self.store_errors
                .get_or_create(&CauseLabels { cause })
                .inc();
        }
    }

    /// Sets the build information: this build's version and the database schema version.
    pub fn set_build_info(&self, version: &'static str, schema_version: Option<u32>) {
        self.build_info
            .get_or_create(&BuildLabels {
                version,
                schema_version: schema_version.map_or_else(|| "-".into(), |v| v.to_string()),
            })
            .set(1);
    }

    /// The text exposition, with the store gauges and the signature batcher's counters read by
    /// the caller.
    pub fn render(&self, store: &StoreGauges, signatures: BatchStats) -> String {
        // The store gauges are read per scrape: a registry of their own, rendered after the
        // counters, so a status that has no payments left disappears instead of going stale.
        let mut scrape = Registry::default();
        register_store_counts(&mut scrape, store);
        register_store_ages(&mut scrape, store);
        if let Some(beat) = self.store_heartbeat.get() {
            register_float(
                &mut scrape,
                "payments_store_unanswered_seconds",
                "Seconds since the store last answered this node's heartbeat (a one-row read \
                 every second, allowed 2 s): under about 1 while it answers; it grows while the \
                 database is unreachable, refuses connections or hangs",
                Some(beat.unanswered().as_secs_f64()),
            );
        }
        self.register_provider_health(&mut scrape);
        self.register_rate_ages(&mut scrape);
        register_signatures(&mut scrape, signatures);
        if let Some(source) = self.dropped_log_lines.get() {
            register_counter(
                &mut scrape,
                "payments_log_lines_dropped",
                "Log lines dropped because standard error did not take them (log.queue_kib queued)",
                source(),
            );
        }
        if let Some(source) = self.trace_export_failures.get() {
            register_counter(
                &mut scrape,
                "payments_trace_export_failures",
                "Batches of spans the OpenTelemetry exporter could not deliver to \
                 telemetry.otlp_endpoint (refused, timed out or unreachable): those traces are lost",
                source(),
            );
        }
        let mut out = String::new();
        encode_registry(&mut out, &self.registry)
            .and_then(|()| encode_registry(&mut out, &scrape))
            .and_then(|()| encode_eof(&mut out))
            .expect("writing to a String does not fail");
        out
    }

    /// `payments_provider_breaker` and `payments_provider_issue_rate`, when a source of the
    /// providers' health is registered.
    fn register_provider_health(&self, scrape: &mut Registry) {
        let Some(source) = self.provider_health.get() else {
            return;
        };
        let states = Family::<ProviderStateLabels, Gauge>::default();
        let rates = Family::<ProviderLabels, Gauge<f64, std::sync::atomic::AtomicU64>>::default();
        for (provider, state, rate) in (source.0)() {
            for s in ["closed", "open", "half_open"] {
                states
                    .get_or_create(&ProviderStateLabels {
                        provider: provider.clone(),
                        state: s,
                    })
                    .set(i64::from(s == state));
            }
            rates.get_or_create(&ProviderLabels { provider }).set(rate);
        }
        scrape.register(
            "payments_provider_breaker",
            "Each requisite provider's circuit breaker: 1 for its state (closed: routed to; \
             open: taken out after failures; half_open: one probe in flight)",
            states,
        );
        scrape.register(
            "payments_provider_issue_rate",
            "Each requisite provider's recent share of calls that issued requisites (moving \
             average)",
            rates,
        );
    }

    /// `payments_rate_age_seconds`, when a source of the rates' ages is registered.
    fn register_rate_ages(&self, scrape: &mut Registry) {
        let Some(source) = self.rate_ages.get() else {
            return;
        };
        let ages = Family::<CurrencyLabels, Gauge<f64, std::sync::atomic::AtomicU64>>::default();
        for (currency, age) in (source.0)() {
            ages.get_or_create(&CurrencyLabels { currency }).set(age);
        }
        scrape.register(
            "payments_rate_age_seconds",
            "Age of each currency's last good rate from the rate source (currency * until \
             the first good answer: the time since the start)",
            ages,
        );
    }
}

/// A count as a gauge's value (saturating).
fn saturating_gauge(n: u64) -> i64 {
    i64::try_from(n).unwrap_or(i64::MAX)
}

/// An integer gauge `name`, left out when the store could not say.
fn register_int(scrape: &mut Registry, name: &str, help: &str, v: Option<u64>) {
    if let Some(v) = v {
        let g = Gauge::<i64>::default();
        g.set(saturating_gauge(v));
        scrape.register(name, help, g);
    }
}

/// A float gauge `name`, left out when the store could not say.
fn register_float(scrape: &mut Registry, name: &str, help: &str, v: Option<f64>) {
    if let Some(v) = v {
        let g = Gauge::<f64, std::sync::atomic::AtomicU64>::default();
        g.set(v);
        scrape.register(name, help, g);
    }
}

/// A counter `name` at `v`.
fn register_counter(scrape: &mut Registry, name: &str, help: &str, v: u64) {
    let c = Counter::<u64>::default();
    c.inc_by(v);
    scrape.register(name, help, c);
}

/// The store's counts: payments by status, the outbox's pending and failed events, whether
/// dispatch is held.
fn register_store_counts(scrape: &mut Registry, store: &StoreGauges) {
    let payments = Family::<StatusLabels, Gauge>::default();
    for (status, n) in &store.payments_by_status {
        payments
            .get_or_create(&StatusLabels {
                status: status.clone(),
            })
            .set(saturating_gauge(*n));
    }
    scrape.register("payments_payments", "Payments stored, by status", payments);
    register_int(
        scrape,
        "payments_outbox_pending",
        "Callback events waiting for delivery",
        store.outbox_pending,
    );
    register_int(
        scrape,
        "payments_outbox_failed",
        "Failed callback events no resend has answered (payments-server callbacks failed)",
        store.outbox_failed,
    );
    register_int(
        scrape,
        "payments_callback_dispatch_held",
        "1 while callback dispatch is held (payments-server callbacks release)",
        store.dispatch_held.map(u64::from),
    );
}

/// The store's ages and sizes: the oldest pending event, the sweeper's lag, the database files.
fn register_store_ages(scrape: &mut Registry, store: &StoreGauges) {
    register_float(
        scrape,
        "payments_outbox_oldest_pending_age_seconds",
        "Age of the oldest callback event waiting for delivery (0 when none waits)",
        store.oldest_pending_age,
    );
    register_float(
        scrape,
        "payments_sweeper_lag_seconds",
        "How long the most overdue payment has been due for the sweeper (0 when none is)",
        store.sweeper_lag,
    );
    if !store.database_bytes.is_empty() {
        let files = Family::<FileLabels, Gauge>::default();
        for (file, n) in &store.database_bytes {
            files
                .get_or_create(&FileLabels { file })
                .set(saturating_gauge(*n));
        }
        scrape.register(
            "payments_database_size_bytes",
            "Size of the database files (database, wal)",
            files,
        );
    }
}

/// The signature batcher's counters.
fn register_signatures(scrape: &mut Registry, signatures: BatchStats) {
    register_counter(
        scrape,
        "payments_signature_batches",
        "Signature verifications run, a signature verified alone counting as a batch of one",
        signatures.batches,
    );
    register_counter(
        scrape,
        "payments_signatures_verified",
        "Request signatures verified, alone or in batches",
        signatures.signatures,
    );
    register_counter(
        scrape,
        "payments_signature_batch_fallbacks",
        "Batches of more than one signature that held a refused one",
        signatures.fallbacks,
    );
    register_counter(
        scrape,
        "payments_signature_batch_timeouts",
        "Batches that stopped waiting for announced signatures at the batch wait bound",
        signatures.timeouts,
    );
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every failure cause is exposed at 0 before its first error (an alert's `rate()` needs
    /// the series before the outage), and the gauge is left out until a heartbeat runs.
    #[test]
    fn every_cause_is_exposed_from_the_start() {
        let metrics = Metrics::default();
        let text = metrics.render(&Default::default(), Default::default());
        for cause in UnavailableCause::ALL {
            let line = format!(
                "payments_store_errors_total{{cause=\"{}\"}} 0",
                cause.as_str()
            );
            assert!(text.contains(&line), "{line} missing:\n{text}");
        }
        assert!(!text.contains("payments_store_unanswered_seconds"));
        // Once a heartbeat is kept, its gauge is exposed.
        let _beat = metrics.store_heartbeat();
        let text = metrics.render(&Default::default(), Default::default());
        let shown: f64 = text
            .lines()
            .find_map(|l| l.strip_prefix("payments_store_unanswered_seconds "))
            .expect("the gauge is exposed")
            .parse()
            .unwrap();
        assert!((0.0..1.0).contains(&shown), "{shown}");
    }

    #[test]
    fn renders_counters_and_histograms() {
        let m = Metrics::default();
        let post = MethodLabel::of(&Method::POST);
        let route = || Route::Template("/api/v1/payments");
        m.observe_request(route(), post, 201, Duration::from_millis(3));
        m.observe_request(route(), post, 201, Duration::from_millis(30));
        m.observe_delivery("success");
        let text = m.render(
            &StoreGauges {
                payments_by_status: vec![("processing".into(), 2)],
                outbox_pending: Some(5),
                outbox_failed: Some(1),
                oldest_pending_age: Some(12.5),
                sweeper_lag: Some(0.0),
                dispatch_held: Some(false),
                database_bytes: vec![("database", 4096), ("wal", 0)],
            },
            BatchStats {
                batches: 3,
                signatures: 40,
                fallbacks: 1,
                timeouts: 2,
            },
        );
        assert!(text.contains("payments_http_requests_total{route=\"/api/v1/payments\",method=\"POST\",status=\"201\"} 2"), "{text}");
        let bucket = |le: &str, n: u32| {
            format!("payments_http_request_duration_seconds_bucket{{le=\"{le}\",route=\"/api/v1/payments\",method=\"POST\",status=\"201\"}} {n}")
        };
        assert!(text.contains(&bucket("0.005", 1)), "{text}");
        assert!(text.contains(&bucket("0.05", 2)), "{text}");
        assert!(text.contains(&bucket("+Inf", 2)), "{text}");
        assert!(text.contains("payments_callback_attempts_total{outcome=\"success\"} 1"));
        assert!(text.contains("payments_payments{status=\"processing\"} 2"));
        assert!(
            text.contains("payments_signature_batches_total 3\n"),
            "{text}"
        );
        assert!(
            text.contains("payments_signatures_verified_total 40\n"),
            "{text}"
        );
        assert!(
            text.contains("payments_signature_batch_fallbacks_total 1\n"),
            "{text}"
        );
        assert!(
            text.contains("payments_signature_batch_timeouts_total 2\n"),
            "{text}"
        );
        assert!(text.contains("payments_outbox_pending 5"));
        assert!(text.contains("payments_outbox_failed 1"));
        assert!(
            text.contains("payments_outbox_oldest_pending_age_seconds 12.5"),
            "{text}"
        );
        assert!(text.contains("payments_sweeper_lag_seconds 0.0"), "{text}");
        assert!(text.contains("payments_callback_dispatch_held 0"));
        assert!(text.contains("payments_database_size_bytes{file=\"database\"} 4096"));
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
        let text = m.render(&StoreGauges::default(), BatchStats::default());
        assert!(text.contains(
            "payments_http_requests_total{route=\"unmatched\",method=\"other\",status=\"405\"} 4"
        ), "{text}");
        assert_eq!(MethodLabel::of(&Method::DELETE).as_str(), "DELETE");
    }
}
