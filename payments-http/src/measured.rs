//! Measuring decorators over the core's ports, for `/metrics`: [`MeasuredStore`] times every
//! store call (by kind, read or write) and counts its errors by cause; [`MeasuredProvider`]
//! times every requisite provider call by outcome (and forwards appeals unmeasured). They add
//! no behaviour: every call goes to the wrapped port unchanged. The store's is a [`StoreLayer`], so [`Layered`] forwards every
//! method of the port, the provided ones included (a store's one-query `auth_lookup` stays one
//! query, its `take_turn`, readiness and cabinet stay its own), and a method added to the port
//! needs nothing here.

use std::sync::Arc;
use std::time::Instant;

use async_trait::async_trait;
use futures_util::future::BoxFuture;
use payments_core::provider::{
    AppealInquiry, AppealSubmission, ProviderName, ProviderOutcome, RequisiteProvider,
    RequisiteRequest,
};
use payments_core::store::{Layered, Op, Store, StoreError, StoreLayer};

use crate::metrics::Metrics;

/// The layer that records each store call's latency and failures in [`Metrics`]:
/// [`MeasuredStore::new`] gives the measured [`Store`], a [`Layered`] of it. A call's kind
/// (`read` or `write`, the label of `payments_store_operation_duration_seconds`) is its
/// [`Op`]'s. The cabinet's store is given to the cabinet apart, unmeasured.
pub struct MeasuredStore {
    inner: Arc<dyn Store>,
    metrics: Arc<Metrics>,
}

impl std::fmt::Debug for MeasuredStore {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("MeasuredStore").finish_non_exhaustive()
    }
}

impl MeasuredStore {
    /// `inner`, measured into `metrics`.
    pub fn new(inner: Arc<dyn Store>, metrics: Arc<Metrics>) -> Layered<MeasuredStore> {
        Layered::new(MeasuredStore { inner, metrics })
    }
}

impl StoreLayer for MeasuredStore {
    fn inner(&self) -> &Arc<dyn Store> {
        &self.inner
    }

    fn around<'a, T: Send + 'a>(
        &'a self,
        op: Op,
        call: BoxFuture<'a, Result<T, StoreError>>,
    ) -> BoxFuture<'a, Result<T, StoreError>> {
        let span = crate::trace::store_span(op.name, op.kind.as_str());
        Box::pin(tracing::Instrument::instrument(
            async move {
                let start = Instant::now();
                let result = call.await;
                // A conflict or a duplicate is an answer the service expects, not a failure of the
                // store; it is counted all the same, by its own cause.
                self.metrics.observe_store(
                    op.kind.as_str(),
                    start.elapsed(),
                    result.as_ref().err().map(StoreError::cause),
                );
                result
            },
            span,
        ))
    }
}

/// A [`RequisiteProvider`] that records each call's outcome and latency. A call the service
/// abandons (its 15 s budget ended first) is recorded as `abandoned` when it is dropped.
pub struct MeasuredProvider {
    inner: Arc<dyn RequisiteProvider>,
    metrics: Arc<Metrics>,
}

impl std::fmt::Debug for MeasuredProvider {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("MeasuredProvider").finish_non_exhaustive()
    }
}

impl MeasuredProvider {
    /// `inner`, measured into `metrics`.
    pub fn new(inner: Arc<dyn RequisiteProvider>, metrics: Arc<Metrics>) -> MeasuredProvider {
        MeasuredProvider { inner, metrics }
    }
}

/// The service's store and requisite provider, both measured into `metrics`: what a server
/// gives [`Ports::new`](payments_core::service::Ports::new) for `/metrics` to show the store's
/// and the provider's latency and errors.
pub fn measure(
    store: Arc<dyn Store>,
    provider: Arc<dyn RequisiteProvider>,
    metrics: &Arc<Metrics>,
) -> (Arc<dyn Store>, Arc<dyn RequisiteProvider>) {
    (
        Arc::new(MeasuredStore::new(store, metrics.clone())),
        Arc::new(MeasuredProvider::new(provider, metrics.clone())),
    )
}

/// The metrics label of a provider's answer.
pub fn provider_outcome(o: &ProviderOutcome) -> &'static str {
    match o {
        ProviderOutcome::Issued(_) => "issued",
        ProviderOutcome::NoRequisites(_) => "no_requisites",
        ProviderOutcome::NotRoutable(_) => "not_routable",
        ProviderOutcome::Ambiguous(_) => "ambiguous",
        ProviderOutcome::Unavailable(_) => "unavailable",
        #[allow(unreachable_patterns)]
        _ => "other",
    }
}

/// Records `abandoned` unless disarmed: dropped with the call's future.
struct CallGuard<'a> {
    metrics: &'a Metrics,
    start: Instant,
    armed: bool,
}

impl Drop for CallGuard<'_> {
    fn drop(&mut self) {
        if self.armed {
            self.metrics
                .observe_provider("abandoned", self.start.elapsed());
        }
    }
}

#[async_trait]
impl RequisiteProvider for MeasuredProvider {
    fn plan(&self, request: &RequisiteRequest) -> payments_core::provider::Plan {
        self.inner.plan(request)
    }

    /// One provider's call, measured in total and per provider.
    async fn issue_with(&self, name: &ProviderName, request: &RequisiteRequest) -> ProviderOutcome {
        let mut guard = CallGuard {
            metrics: &self.metrics,
            start: Instant::now(),
            armed: true,
        };
        let span = crate::trace::provider_span(&request.payment_id.to_string(), name.as_str());
        let outcome =
            tracing::Instrument::instrument(self.inner.issue_with(name, request), span.clone())
                .await;
        guard.armed = false;
        let label = provider_outcome(&outcome);
        crate::trace::record_outcome(&span, label);
        let latency = guard.start.elapsed();
        self.metrics.observe_provider(label, latency);
        self.metrics
            .observe_provider_attempt(name.as_str(), label, latency);
        outcome
    }

    async fn issue(&self, request: &RequisiteRequest) -> ProviderOutcome {
        let mut guard = CallGuard {
            metrics: &self.metrics,
            start: Instant::now(),
            armed: true,
        };
        let span = crate::trace::provider_span(&request.payment_id.to_string(), "-");
        let outcome =
            tracing::Instrument::instrument(self.inner.issue(request), span.clone()).await;
        guard.armed = false;
        let label = provider_outcome(&outcome);
        crate::trace::record_outcome(&span, label);
        self.metrics.observe_provider(label, guard.start.elapsed());
        outcome
    }

    fn issues_locally(&self) -> bool {
        self.inner.issues_locally()
    }

    /// An appeal, to the wrapped provider unchanged and unmeasured (the provider metrics are
    /// those of requisite requests).
    async fn submit_appeal(
        &self,
        name: &ProviderName,
        inquiry: &AppealInquiry,
    ) -> AppealSubmission {
        self.inner.submit_appeal(name, inquiry).await
    }
}

#[cfg(test)]
mod tests {
    use payments_core::service::BatchStats;
    use payments_core::store::{PaymentChange, PaymentStore, SettingStore};
    use payments_core::testing::{contract, MemoryStore};

    use super::*;
    use crate::metrics::StoreGauges;

    #[tokio::test]
    async fn the_measured_store_keeps_every_behaviour_of_the_store() {
        let metrics = Arc::new(Metrics::default());
        contract::check_wrapper(|inner| Arc::new(MeasuredStore::new(inner, metrics))).await;
    }

    /// Takes every appeal; issues nothing.
    struct TakesAppeals;

    #[async_trait]
    impl RequisiteProvider for TakesAppeals {
        async fn issue(&self, _: &RequisiteRequest) -> ProviderOutcome {
            ProviderOutcome::NoRequisites("none".into())
        }

        async fn submit_appeal(&self, _: &ProviderName, _: &AppealInquiry) -> AppealSubmission {
            AppealSubmission::Taken
        }
    }

    #[tokio::test]
    async fn the_measured_provider_forwards_appeals() {
        let measured = MeasuredProvider::new(Arc::new(TakesAppeals), Arc::default());
        let p = contract::sample_payment(contract::payment_id(1), contract::project_id(1), "o1");
        let inquiry = AppealInquiry {
            appeal_id: payments_core::ids::AppealId::from_uuid(*p.id.as_uuid()),
            payment_id: p.id,
            amount: p.amount,
            currency: p.currency,
            requisite: "79001234567".into(),
            reason: payments_core::appeal::AppealReason::PaidButCanceled,
            claimed_amount: None,
            paid_at: None,
            payer_bank: None,
            receipts: Vec::new(),
        };
        let name = ProviderName::parse(ProviderName::DEFAULT).expect("valid");
        let answer = measured.submit_appeal(&name, &inquiry).await;
        assert_eq!(answer, AppealSubmission::Taken, "not the port's default");
    }

    #[tokio::test]
    async fn the_measured_store_times_reads_and_writes_and_counts_errors() {
        let metrics = Arc::new(Metrics::default());
        let store = MeasuredStore::new(Arc::new(MemoryStore::new()), metrics.clone());
        let p = contract::sample_payment(contract::payment_id(1), contract::project_id(1), "o1");
        store.insert_payment(&p).await.expect("insert");
        store.payment(p.id).await.expect("read");
        store.setting("a").await.expect("read");
        let unknown = contract::sample_payment(contract::payment_id(2), p.project_id, "o2");
        let change = PaymentChange {
            history: None,
            ledger: None,
            payment: unknown.clone(),
            expected_version: unknown.version,
            event: None,
            audit: None,
        };
        let missing = store.commit_change(&change).await;
        assert!(
            matches!(missing, Err(StoreError::NotFound(_))),
            "{missing:?}"
        );
        let text = metrics.render(&StoreGauges::default(), BatchStats::default());
        for line in [
            "payments_store_operation_duration_seconds_count{kind=\"read\"} 2\n",
            "payments_store_operation_duration_seconds_count{kind=\"write\"} 2\n",
            "payments_store_errors_total{cause=\"not found\"} 1\n",
        ] {
            assert!(text.contains(line), "{line:?} in:\n{text}");
        }
    }
}
