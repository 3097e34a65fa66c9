//! Measuring decorators over the core's ports, for `/metrics`: [`MeasuredStore`] times every
//! store call (by kind, read or write) and counts its errors by cause; [`MeasuredProvider`]
//! times every requisite provider call by outcome. They add no behaviour: every call goes to
//! the wrapped port unchanged (including the overridden defaults, so a store's one-query
//! `auth_lookup` stays one query).

use std::future::Future;
use std::sync::Arc;
use std::time::{Duration, Instant};

use async_trait::async_trait;
use payments_core::event::{DeliveryAttempt, EventRecord, FailedEvent, FailedEventFilter};
use payments_core::ids::{EventId, KeyId, MerchantId, PaymentId, ProjectId, TokenId};
use payments_core::payment::{MerchantPaymentId, Payment, PaymentStatus};
use payments_core::project::{
    AuditRecord, KeyRecord, Merchant, OperatorTokenRecord, Project, SecretRecord, TokenRecord,
};
use payments_core::provider::{ProviderOutcome, RequisiteProvider, RequisiteRequest};
use payments_core::store::{
    AdmitOutcome, AttemptRecorded, AuditStore, AuthLookup, ClaimedEvent, DirectoryStore,
    InsertOutcome, LeaseToken, NonceStore, NonceUse, OutboxStore, PaymentChange, PaymentStore,
    Store, StoreError,
};
use payments_core::{SecretString, Timestamp};

use crate::metrics::Metrics;

/// A [`Store`] that records each call's latency and failures in [`Metrics`].
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
    pub fn new(inner: Arc<dyn Store>, metrics: Arc<Metrics>) -> MeasuredStore {
        MeasuredStore { inner, metrics }
    }

    async fn timed<R>(
        &self,
        kind: &'static str,
        call: impl Future<Output = Result<R, StoreError>>,
    ) -> Result<R, StoreError> {
        let start = Instant::now();
        let result = call.await;
        // A conflict or a duplicate is an answer the service expects, not a failure of the
        // store; it is counted all the same, by its own cause.
        self.metrics.observe_store(
            kind,
            start.elapsed(),
            result.as_ref().err().map(StoreError::cause),
        );
        result
    }

    async fn read<R>(
        &self,
        call: impl Future<Output = Result<R, StoreError>>,
    ) -> Result<R, StoreError> {
        self.timed("read", call).await
    }

    async fn write<R>(
        &self,
        call: impl Future<Output = Result<R, StoreError>>,
    ) -> Result<R, StoreError> {
        self.timed("write", call).await
    }
}

#[async_trait]
impl PaymentStore for MeasuredStore {
    async fn insert_payment(&self, payment: &Payment) -> Result<InsertOutcome, StoreError> {
        self.write(self.inner.insert_payment(payment)).await
    }
    async fn payment(&self, id: PaymentId) -> Result<Option<Payment>, StoreError> {
        self.read(self.inner.payment(id)).await
    }
    async fn payment_by_merchant_id(
        &self,
        project: ProjectId,
        merchant_payment_id: &MerchantPaymentId,
    ) -> Result<Option<Payment>, StoreError> {
        self.read(
            self.inner
                .payment_by_merchant_id(project, merchant_payment_id),
        )
        .await
    }
    async fn commit_change(&self, change: &PaymentChange) -> Result<(), StoreError> {
        self.write(self.inner.commit_change(change)).await
    }
    async fn due_payments(&self, now: Timestamp, limit: usize) -> Result<Vec<Payment>, StoreError> {
        self.read(self.inner.due_payments(now, limit)).await
    }
    async fn count_by_status(&self) -> Result<Vec<(PaymentStatus, u64)>, StoreError> {
        self.read(self.inner.count_by_status()).await
    }
    async fn oldest_due_payment(&self) -> Result<Option<Timestamp>, StoreError> {
        self.read(self.inner.oldest_due_payment()).await
    }
}

#[async_trait]
impl NonceStore for MeasuredStore {
    async fn use_nonce(
        &self,
        project: ProjectId,
        nonce: &str,
        now: Timestamp,
        expires_at: Timestamp,
    ) -> Result<bool, StoreError> {
        self.write(self.inner.use_nonce(project, nonce, now, expires_at))
            .await
    }
    async fn purge_nonces(&self, now: Timestamp) -> Result<u64, StoreError> {
        self.write(self.inner.purge_nonces(now)).await
    }
}

#[async_trait]
impl OutboxStore for MeasuredStore {
    async fn claim_due_events(
        &self,
        now: Timestamp,
        limit: usize,
        lease: Duration,
    ) -> Result<Vec<ClaimedEvent>, StoreError> {
        self.write(self.inner.claim_due_events(now, limit, lease))
            .await
    }
    async fn record_attempt(
        &self,
        event_id: EventId,
        lease: LeaseToken,
        attempt: &DeliveryAttempt,
        next_attempt_at: Option<Timestamp>,
    ) -> Result<AttemptRecorded, StoreError> {
        self.write(
            self.inner
                .record_attempt(event_id, lease, attempt, next_attempt_at),
        )
        .await
    }
    async fn events_for_payment(&self, payment: PaymentId) -> Result<Vec<EventRecord>, StoreError> {
        self.read(self.inner.events_for_payment(payment)).await
    }
    async fn pending_events(&self) -> Result<u64, StoreError> {
        self.read(self.inner.pending_events()).await
    }
    async fn oldest_pending_event(&self) -> Result<Option<Timestamp>, StoreError> {
        self.read(self.inner.oldest_pending_event()).await
    }
    async fn failed_events(
        &self,
        filter: &FailedEventFilter,
        limit: usize,
    ) -> Result<Vec<FailedEvent>, StoreError> {
        self.read(self.inner.failed_events(filter, limit)).await
    }
    async fn failed_event_count(&self) -> Result<u64, StoreError> {
        self.read(self.inner.failed_event_count()).await
    }
    async fn purge_finished_events(
        &self,
        before: Timestamp,
        limit: usize,
    ) -> Result<u64, StoreError> {
        self.write(self.inner.purge_finished_events(before, limit))
            .await
    }
}

#[async_trait]
impl DirectoryStore for MeasuredStore {
    async fn put_merchant(&self, merchant: &Merchant) -> Result<(), StoreError> {
        self.write(self.inner.put_merchant(merchant)).await
    }
    async fn merchant(&self, id: MerchantId) -> Result<Option<Merchant>, StoreError> {
        self.read(self.inner.merchant(id)).await
    }
    async fn merchants(&self) -> Result<Vec<Merchant>, StoreError> {
        self.read(self.inner.merchants()).await
    }
    async fn put_project(&self, project: &Project) -> Result<(), StoreError> {
        self.write(self.inner.put_project(project)).await
    }
    async fn project(&self, id: ProjectId) -> Result<Option<Project>, StoreError> {
        self.read(self.inner.project(id)).await
    }
    async fn projects(&self) -> Result<Vec<Project>, StoreError> {
        self.read(self.inner.projects()).await
    }
    async fn insert_token(&self, token: &TokenRecord) -> Result<(), StoreError> {
        self.write(self.inner.insert_token(token)).await
    }
    async fn token_by_hash(&self, hash: &[u8; 32]) -> Result<Option<TokenRecord>, StoreError> {
        self.read(self.inner.token_by_hash(hash)).await
    }
    async fn tokens(&self, project: ProjectId) -> Result<Vec<TokenRecord>, StoreError> {
        self.read(self.inner.tokens(project)).await
    }
    async fn revoke_token(
        &self,
        project: ProjectId,
        id: TokenId,
        at: Timestamp,
    ) -> Result<bool, StoreError> {
        self.write(self.inner.revoke_token(project, id, at)).await
    }
    async fn insert_key(&self, key: &KeyRecord) -> Result<(), StoreError> {
        self.write(self.inner.insert_key(key)).await
    }
    async fn key(
        &self,
        project: ProjectId,
        keyid: &KeyId,
    ) -> Result<Option<KeyRecord>, StoreError> {
        self.read(self.inner.key(project, keyid)).await
    }
    async fn keys(&self, project: ProjectId) -> Result<Vec<KeyRecord>, StoreError> {
        self.read(self.inner.keys(project)).await
    }
    async fn active_key_projects(&self, keyid: &KeyId) -> Result<Vec<ProjectId>, StoreError> {
        self.read(self.inner.active_key_projects(keyid)).await
    }
    async fn auth_lookup(
        &self,
        hash: &[u8; 32],
        keyid: Option<&KeyId>,
    ) -> Result<AuthLookup, StoreError> {
        self.read(self.inner.auth_lookup(hash, keyid)).await
    }
    async fn revoke_key(
        &self,
        project: ProjectId,
        keyid: &KeyId,
        at: Timestamp,
    ) -> Result<bool, StoreError> {
        self.write(self.inner.revoke_key(project, keyid, at)).await
    }
    async fn callback_secrets(&self, project: ProjectId) -> Result<Vec<SecretRecord>, StoreError> {
        self.read(self.inner.callback_secrets(project)).await
    }
    async fn add_callback_secret(
        &self,
        project: ProjectId,
        secret: &SecretRecord,
    ) -> Result<(), StoreError> {
        self.write(self.inner.add_callback_secret(project, secret))
            .await
    }
    async fn add_callback_secret_if_none(
        &self,
        project: ProjectId,
        secret: &SecretRecord,
    ) -> Result<Vec<SecretRecord>, StoreError> {
        self.write(self.inner.add_callback_secret_if_none(project, secret))
            .await
    }
    async fn replace_callback_secret(
        &self,
        project: ProjectId,
        old: &SecretString,
        new: &SecretString,
    ) -> Result<bool, StoreError> {
        self.write(self.inner.replace_callback_secret(project, old, new))
            .await
    }
    async fn insert_operator_token(&self, token: &OperatorTokenRecord) -> Result<(), StoreError> {
        self.write(self.inner.insert_operator_token(token)).await
    }
    async fn operator_token_by_hash(
        &self,
        hash: &[u8; 32],
    ) -> Result<Option<OperatorTokenRecord>, StoreError> {
        self.read(self.inner.operator_token_by_hash(hash)).await
    }
    async fn operator_tokens(&self) -> Result<Vec<OperatorTokenRecord>, StoreError> {
        self.read(self.inner.operator_tokens()).await
    }
    async fn expire_operator_token(&self, id: TokenId, at: Timestamp) -> Result<bool, StoreError> {
        self.write(self.inner.expire_operator_token(id, at)).await
    }
    async fn setting(&self, name: &str) -> Result<Option<String>, StoreError> {
        self.read(self.inner.setting(name)).await
    }
    async fn put_setting(&self, name: &str, value: &str) -> Result<(), StoreError> {
        self.write(self.inner.put_setting(name, value)).await
    }
}

#[async_trait]
impl AuditStore for MeasuredStore {
    async fn append_audit(&self, record: &AuditRecord) -> Result<(), StoreError> {
        self.write(self.inner.append_audit(record)).await
    }
    async fn audit_records(&self, limit: usize) -> Result<Vec<AuditRecord>, StoreError> {
        self.read(self.inner.audit_records(limit)).await
    }
    async fn purge_audit(&self, before: Timestamp, limit: usize) -> Result<u64, StoreError> {
        self.write(self.inner.purge_audit(before, limit)).await
    }
}

#[async_trait]
impl Store for MeasuredStore {
    fn is_ready(&self) -> bool {
        self.inner.is_ready()
    }
    /// The inner store's cabinet part, unmeasured: without this the measured store (the
    /// server's always) would hide it and the cabinet and payer pages would be off.
    fn cabinet_store(self: Arc<Self>) -> Option<Arc<dyn payments_core::cabinet::CabinetStore>> {
        self.inner.clone().cabinet_store()
    }
    async fn check_writable(&self) -> Result<(), StoreError> {
        self.write(self.inner.check_writable()).await
    }
    async fn commit_resend(&self, change: &PaymentChange) -> Result<Vec<EventId>, StoreError> {
        self.write(self.inner.commit_resend(change)).await
    }
    // Without it, the default (always `true`) would run the sweeper and the nonce purge on
    // every node of a shared store at once.
    async fn take_turn(
        &self,
        task: &str,
        now: Timestamp,
        until: Timestamp,
    ) -> Result<bool, StoreError> {
        self.write(self.inner.take_turn(task, now, until)).await
    }
    async fn auth_lookup_with_payment(
        &self,
        hash: &[u8; 32],
        keyid: Option<&KeyId>,
        id: PaymentId,
    ) -> Result<(AuthLookup, Option<Payment>), StoreError> {
        self.read(self.inner.auth_lookup_with_payment(hash, keyid, id))
            .await
    }
    async fn commit_change_once(
        &self,
        key: NonceUse<'_>,
        change: Option<&PaymentChange>,
    ) -> Result<bool, StoreError> {
        self.write(self.inner.commit_change_once(key, change)).await
    }
    async fn admit_create(
        &self,
        nonce: Option<NonceUse<'_>>,
        project: ProjectId,
        merchant_payment_id: &MerchantPaymentId,
        candidate: Option<&Payment>,
    ) -> Result<AdmitOutcome, StoreError> {
        self.write(
            self.inner
                .admit_create(nonce, project, merchant_payment_id, candidate),
        )
        .await
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

/// The metrics label of a provider's answer.
pub fn provider_outcome(o: &ProviderOutcome) -> &'static str {
    match o {
        ProviderOutcome::Issued(_) => "issued",
        ProviderOutcome::NoRequisites(_) => "no_requisites",
        ProviderOutcome::NotRoutable(_) => "not_routable",
        ProviderOutcome::Ambiguous(_) => "ambiguous",
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
    async fn issue(&self, request: &RequisiteRequest) -> ProviderOutcome {
        let mut guard = CallGuard {
            metrics: &self.metrics,
            start: Instant::now(),
            armed: true,
        };
        let outcome = self.inner.issue(request).await;
        guard.armed = false;
        self.metrics
            .observe_provider(provider_outcome(&outcome), guard.start.elapsed());
        outcome
    }

    fn issues_locally(&self) -> bool {
        self.inner.issues_locally()
    }
}
