//! A decorator over the storage port that forwards every call, for wrappers that measure, log
//! or trace: [`StoreLayer`] is what a wrapper writes (its inner store, and optionally a hook
//! around each call), [`Layered`] is the [`Store`] made of it.
//!
//! A wrapper written by hand must forward the port's provided methods too, or it silently
//! loses the inner store's overrides: the create path decomposes into several round trips,
//! the cabinet disappears, `is_ready` stays `true` after the store is closed and every node
//! takes every turn. [`Layered`] forwards every method of every trait of the port, required
//! and provided, to the same method of the inner store; it uses none of the port's default
//! bodies. A required method added to the port fails to compile here until it is forwarded;
//! a provided one would compile (and run the port's default), so a test compares the methods
//! written out here with those declared in `store.rs`
//! (`every_method_of_the_port_is_forwarded_probed_and_checked`, feature `testing`).
//! `contract::check_wrapper` (feature `testing`) checks any wrapper, hand-written or not.
//!
//! Why a trait and not a macro that writes a wrapper's forwarding: the forwarding is written
//! once, here, next to the port, where the port's author sees it; a wrapper's author writes two
//! plain methods and no macro-generated code to read or debug.

use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use futures_util::future::BoxFuture;

use super::{
    AdmitOutcome, AttemptRecorded, AuditStore, AuthLookup, Backlog, CallbackSecretStore,
    ClaimedEvent, CredentialStore, EntryQuery, EventQuery, InsertOutcome, LeaseToken, LedgerStore,
    MerchantStore, NonceUse, OperatorStore, OutboxStore, PageKey, PayerPageStore, PaymentChange,
    PaymentQuery, PaymentStore, Purged, RequestLogStore, Retained, Store, StoreError, TokenKey,
    TxOutput, TxWork,
};
use crate::clock::Timestamp;
use crate::event::{DeliveryAttempt, EventRecord, FailedEvent, FailedEventFilter};
use crate::ids::{EventId, KeyId, MerchantId, PaymentId, ProjectId, TokenId};
use crate::ledger::{Balance, EntryKind, KindTotal, LedgerEntry};
use crate::payer::PaymentPageRecord;
use crate::payment::{MerchantPaymentId, Payment};
use crate::project::{
    AuditRecord, KeyRecord, Merchant, OperatorTokenRecord, Project, SecretRecord, TokenRecord,
};
use crate::request_log::{RequestLogEntry, RequestLogQuery};
use crate::SecretString;

/// Whether a store operation reads or writes (for a metric's label, a log's level).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum OpKind {
    /// Reads only.
    Read,
    /// Writes (or may write): inserts, changes, claims, purges, turns, the write probe.
    Write,
}

impl OpKind {
    /// `"read"` or `"write"`.
    pub const fn as_str(self) -> &'static str {
        match self {
            OpKind::Read => "read",
            OpKind::Write => "write",
        }
    }
}

/// A store operation, as [`StoreLayer::around`] sees it: the port method's name
/// (`"admit_create"`) and whether it reads or writes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Op {
    /// The name of the port method, as written in the trait.
    pub name: &'static str,
    /// Read or write.
    pub kind: OpKind,
}

impl Op {
    /// A reading operation.
    pub const fn read(name: &'static str) -> Op {
        Op {
            name,
            kind: OpKind::Read,
        }
    }

    /// A writing operation.
    pub const fn write(name: &'static str) -> Op {
        Op {
            name,
            kind: OpKind::Write,
        }
    }
}

/// What a store wrapper provides: its inner store and, optionally, a hook around each call.
/// [`Layered`] turns it into a [`Store`] that forwards every method of the port.
///
/// Every `async` method of the port goes through [`around`](Self::around) once, with the
/// method's [`Op`]; [`Store::is_ready`] is not a call to the database and goes to the inner
/// store directly.
///
/// # Example
///
/// A layer that counts writes:
///
/// ```
/// use std::sync::atomic::{AtomicU64, Ordering};
/// use std::sync::Arc;
///
/// use futures_util::future::BoxFuture;
/// use payments_core::store::{
///     CallbackSecretStore, CredentialStore, MerchantStore, OperatorStore, Layered, Op, OpKind, Store, StoreError, StoreLayer,
/// };
///
/// struct CountWrites {
///     inner: Arc<dyn Store>,
///     writes: AtomicU64,
/// }
///
/// impl StoreLayer for CountWrites {
///     fn inner(&self) -> &Arc<dyn Store> {
///         &self.inner
///     }
///
///     fn around<'a, T: Send + 'a>(
///         &'a self,
///         op: Op,
///         call: BoxFuture<'a, Result<T, StoreError>>,
///     ) -> BoxFuture<'a, Result<T, StoreError>> {
///         if op.kind == OpKind::Write {
///             self.writes.fetch_add(1, Ordering::Relaxed);
///         }
///         call
///     }
/// }
///
/// #[cfg(feature = "testing")]
/// futures_executor::block_on(async {
///     use payments_core::testing::{contract, MemoryStore};
///
///
///     let store = Layered::new(CountWrites {
///         inner: Arc::new(MemoryStore::new()),
///         writes: AtomicU64::new(0),
///     });
///     store.put_setting("greeting", "hello").await.unwrap();
///     assert_eq!(store.setting("greeting").await.unwrap().as_deref(), Some("hello"));
///     assert_eq!(store.layer().writes.load(Ordering::Relaxed), 1);
///
///     // The cabinet, readiness and every override of the inner store are still there.
///     contract::check_wrapper(|inner| {
///         Arc::new(Layered::new(CountWrites { inner, writes: AtomicU64::new(0) }))
///     })
///     .await;
/// });
/// ```
pub trait StoreLayer: Send + Sync {
    /// The wrapped store.
    fn inner(&self) -> &Arc<dyn Store>;

    /// Runs `call`, the inner store's answer to `op`, and returns its result: the place to
    /// time it, log it or count its errors. The default returns `call` as it is.
    ///
    /// The result must be `call`'s: a layer that changes answers or skips the call is not a
    /// pass-through wrapper and `contract::check_wrapper` fails it.
    fn around<'a, T: Send + 'a>(
        &'a self,
        op: Op,
        call: BoxFuture<'a, Result<T, StoreError>>,
    ) -> BoxFuture<'a, Result<T, StoreError>> {
        let _ = op;
        call
    }
}

/// The [`Store`] made of a [`StoreLayer`]: every method of every repository of the port
/// ([`PaymentStore`], [`OutboxStore`], [`MerchantStore`], [`CredentialStore`],
/// [`CallbackSecretStore`], [`OperatorStore`], [`AuditStore`], [`PayerPageStore`]) and of
/// [`Store`], required and provided,
/// goes to the same method of the layer's inner store, through [`StoreLayer::around`]
/// (except `is_ready`, which goes straight to it). So the inner store's overrides (one-write
/// `admit_create`, one-query `auth_lookup`, `take_turn` decided in the database, its
/// `check_writable`) stay, and nothing is decomposed into the required calls.
///
/// # Example
///
/// ```
/// use std::sync::Arc;
///
/// use payments_core::store::{Layered, Store, StoreLayer};
///
/// /// Adds nothing: every call goes to `0` as it is.
/// struct Plain(Arc<dyn Store>);
///
/// impl StoreLayer for Plain {
///     fn inner(&self) -> &Arc<dyn Store> {
///         &self.0
///     }
/// }
///
/// #[cfg(feature = "testing")]
/// {
///     use payments_core::testing::MemoryStore;
///
///     let store: Arc<dyn Store> = Arc::new(Layered::new(Plain(Arc::new(MemoryStore::new()))));
///     assert!(store.is_ready());
/// }
/// ```
#[derive(Debug, Clone)]
pub struct Layered<L> {
    layer: L,
}

impl<L: StoreLayer> Layered<L> {
    /// The store that forwards every call to `layer`'s inner store through `layer`'s hook.
    pub fn new(layer: L) -> Layered<L> {
        Layered { layer }
    }

    /// The layer.
    pub fn layer(&self) -> &L {
        &self.layer
    }

    /// The layer back.
    pub fn into_layer(self) -> L {
        self.layer
    }

    /// `call` (a call of the inner store) through the layer's hook, as `op`.
    fn around<'a, T: Send + 'a>(
        &'a self,
        op: Op,
        call: BoxFuture<'a, Result<T, StoreError>>,
    ) -> BoxFuture<'a, Result<T, StoreError>> {
        self.layer.around(op, call)
    }

    fn inner(&self) -> &dyn Store {
        self.layer.inner().as_ref()
    }
}

// Every method below is written out, provided ones included: no default body of the port runs
// in a `Layered`. Keep the order of the traits in `store.rs`.

#[async_trait]
impl<L: StoreLayer> PaymentStore for Layered<L> {
    async fn payment(&self, id: PaymentId) -> Result<Option<Payment>, StoreError> {
        self.around(Op::read("payment"), self.inner().payment(id))
            .await
    }
    async fn payment_by_merchant_id(
        &self,
        project: ProjectId,
        merchant_payment_id: &MerchantPaymentId,
    ) -> Result<Option<Payment>, StoreError> {
        let op = Op::read("payment_by_merchant_id");
        let call = self
            .inner()
            .payment_by_merchant_id(project, merchant_payment_id);
        self.around(op, call).await
    }
    async fn due_payments(&self, now: Timestamp, limit: usize) -> Result<Vec<Payment>, StoreError> {
        let op = Op::read("due_payments");
        self.around(op, self.inner().due_payments(now, limit)).await
    }
    async fn find_payments(&self, query: &PaymentQuery) -> Result<Vec<Payment>, StoreError> {
        let op = Op::read("find_payments");
        self.around(op, self.inner().find_payments(query)).await
    }
}

#[async_trait]
impl<L: StoreLayer> OutboxStore for Layered<L> {
    async fn claim_due_events(
        &self,
        now: Timestamp,
        limit: usize,
        lease: Duration,
    ) -> Result<Vec<ClaimedEvent>, StoreError> {
        let op = Op::write("claim_due_events");
        let call = self.inner().claim_due_events(now, limit, lease);
        self.around(op, call).await
    }
    async fn claim_due_events_except(
        &self,
        now: Timestamp,
        limit: usize,
        lease: Duration,
        skip: &[ProjectId],
    ) -> Result<Vec<ClaimedEvent>, StoreError> {
        let op = Op::write("claim_due_events_except");
        let call = self
            .inner()
            .claim_due_events_except(now, limit, lease, skip);
        self.around(op, call).await
    }
    async fn record_attempt(
        &self,
        event_id: EventId,
        lease: LeaseToken,
        attempt: &DeliveryAttempt,
        next_attempt_at: Option<Timestamp>,
    ) -> Result<AttemptRecorded, StoreError> {
        let op = Op::write("record_attempt");
        let call = self
            .inner()
            .record_attempt(event_id, lease, attempt, next_attempt_at);
        self.around(op, call).await
    }
    async fn events_for_payment(&self, payment: PaymentId) -> Result<Vec<EventRecord>, StoreError> {
        let op = Op::read("events_for_payment");
        self.around(op, self.inner().events_for_payment(payment))
            .await
    }
    async fn failed_events(
        &self,
        filter: &FailedEventFilter,
        limit: usize,
    ) -> Result<Vec<FailedEvent>, StoreError> {
        let op = Op::read("failed_events");
        self.around(op, self.inner().failed_events(filter, limit))
            .await
    }
    async fn find_events(&self, query: &EventQuery) -> Result<Vec<EventRecord>, StoreError> {
        let op = Op::read("find_events");
        self.around(op, self.inner().find_events(query)).await
    }
}

#[async_trait]
impl<L: StoreLayer> MerchantStore for Layered<L> {
    async fn put_merchant(&self, merchant: &Merchant) -> Result<(), StoreError> {
        let op = Op::write("put_merchant");
        self.around(op, self.inner().put_merchant(merchant)).await
    }

    async fn find_merchants(&self, only: Option<MerchantId>) -> Result<Vec<Merchant>, StoreError> {
        let op = Op::read("find_merchants");
        self.around(op, self.inner().find_merchants(only)).await
    }

    async fn find_projects(&self, only: Option<ProjectId>) -> Result<Vec<Project>, StoreError> {
        let op = Op::read("find_projects");
        self.around(op, self.inner().find_projects(only)).await
    }

    async fn put_project(&self, project: &Project) -> Result<(), StoreError> {
        let op = Op::write("put_project");
        self.around(op, self.inner().put_project(project)).await
    }
}

#[async_trait]
impl<L: StoreLayer> CredentialStore for Layered<L> {
    async fn insert_token(&self, token: &TokenRecord) -> Result<(), StoreError> {
        let op = Op::write("insert_token");
        self.around(op, self.inner().insert_token(token)).await
    }

    async fn find_tokens(&self, key: TokenKey<'_>) -> Result<Vec<TokenRecord>, StoreError> {
        let op = Op::read("find_tokens");
        self.around(op, self.inner().find_tokens(key)).await
    }

    async fn find_keys(
        &self,
        project: ProjectId,
        only: Option<&KeyId>,
    ) -> Result<Vec<KeyRecord>, StoreError> {
        let op = Op::read("find_keys");
        self.around(op, self.inner().find_keys(project, only)).await
    }

    async fn revoke_token(
        &self,
        project: ProjectId,
        id: TokenId,
        at: Timestamp,
    ) -> Result<bool, StoreError> {
        let op = Op::write("revoke_token");
        self.around(op, self.inner().revoke_token(project, id, at))
            .await
    }

    async fn record_token_use(&self, token: TokenId, at: Timestamp) -> Result<(), StoreError> {
        let op = Op::write("record_token_use");
        self.around(op, self.inner().record_token_use(token, at))
            .await
    }

    async fn token_last_used(
        &self,
        tokens: &[TokenId],
    ) -> Result<Vec<(TokenId, Timestamp)>, StoreError> {
        let op = Op::read("token_last_used");
        self.around(op, self.inner().token_last_used(tokens)).await
    }

    async fn insert_key(&self, key: &KeyRecord) -> Result<(), StoreError> {
        self.around(Op::write("insert_key"), self.inner().insert_key(key))
            .await
    }

    async fn active_key_projects(&self, keyid: &KeyId) -> Result<Vec<ProjectId>, StoreError> {
        let op = Op::read("active_key_projects");
        self.around(op, self.inner().active_key_projects(keyid))
            .await
    }

    async fn auth_lookup(
        &self,
        hash: &[u8; 32],
        keyid: Option<&KeyId>,
    ) -> Result<AuthLookup, StoreError> {
        let op = Op::read("auth_lookup");
        self.around(op, self.inner().auth_lookup(hash, keyid)).await
    }

    async fn revoke_key(
        &self,
        project: ProjectId,
        keyid: &KeyId,
        at: Timestamp,
    ) -> Result<bool, StoreError> {
        let op = Op::write("revoke_key");
        self.around(op, self.inner().revoke_key(project, keyid, at))
            .await
    }
}

#[async_trait]
impl<L: StoreLayer> CallbackSecretStore for Layered<L> {
    async fn callback_secrets(&self, project: ProjectId) -> Result<Vec<SecretRecord>, StoreError> {
        let op = Op::read("callback_secrets");
        self.around(op, self.inner().callback_secrets(project))
            .await
    }

    async fn add_callback_secret(
        &self,
        project: ProjectId,
        secret: &SecretRecord,
    ) -> Result<(), StoreError> {
        let op = Op::write("add_callback_secret");
        let call = self.inner().add_callback_secret(project, secret);
        self.around(op, call).await
    }

    async fn add_callback_secret_if_none(
        &self,
        project: ProjectId,
        secret: &SecretRecord,
    ) -> Result<Vec<SecretRecord>, StoreError> {
        let op = Op::write("add_callback_secret_if_none");
        let call = self.inner().add_callback_secret_if_none(project, secret);
        self.around(op, call).await
    }

    async fn replace_callback_secret(
        &self,
        project: ProjectId,
        old: &SecretString,
        new: &SecretString,
    ) -> Result<bool, StoreError> {
        let op = Op::write("replace_callback_secret");
        let call = self.inner().replace_callback_secret(project, old, new);
        self.around(op, call).await
    }
}

#[async_trait]
impl<L: StoreLayer> OperatorStore for Layered<L> {
    async fn insert_operator_token(&self, token: &OperatorTokenRecord) -> Result<(), StoreError> {
        let op = Op::write("insert_operator_token");
        self.around(op, self.inner().insert_operator_token(token))
            .await
    }

    async fn find_operator_tokens(
        &self,
        hash: Option<&[u8; 32]>,
    ) -> Result<Vec<OperatorTokenRecord>, StoreError> {
        let op = Op::read("find_operator_tokens");
        self.around(op, self.inner().find_operator_tokens(hash))
            .await
    }

    async fn expire_operator_token(&self, id: TokenId, at: Timestamp) -> Result<bool, StoreError> {
        let op = Op::write("expire_operator_token");
        self.around(op, self.inner().expire_operator_token(id, at))
            .await
    }

    async fn setting(&self, name: &str) -> Result<Option<String>, StoreError> {
        self.around(Op::read("setting"), self.inner().setting(name))
            .await
    }

    async fn put_setting(&self, name: &str, value: &str) -> Result<(), StoreError> {
        let op = Op::write("put_setting");
        self.around(op, self.inner().put_setting(name, value)).await
    }
}

#[async_trait]
impl<L: StoreLayer> AuditStore for Layered<L> {
    async fn append_audit(&self, record: &AuditRecord) -> Result<(), StoreError> {
        let op = Op::write("append_audit");
        self.around(op, self.inner().append_audit(record)).await
    }
    async fn audit_records(&self, limit: usize) -> Result<Vec<AuditRecord>, StoreError> {
        let op = Op::read("audit_records");
        self.around(op, self.inner().audit_records(limit)).await
    }
}

#[async_trait]
impl<L: StoreLayer> PayerPageStore for Layered<L> {
    async fn ensure_payment_page(
        &self,
        page: &PaymentPageRecord,
    ) -> Result<PaymentPageRecord, StoreError> {
        let op = Op::write("ensure_payment_page");
        self.around(op, self.inner().ensure_payment_page(page))
            .await
    }
    async fn find_payment_page(
        &self,
        key: PageKey<'_>,
    ) -> Result<Option<PaymentPageRecord>, StoreError> {
        let op = Op::read("find_payment_page");
        self.around(op, self.inner().find_payment_page(key)).await
    }
}

#[async_trait]
impl<L: StoreLayer> LedgerStore for Layered<L> {
    async fn balance(&self, project: ProjectId) -> Result<Balance, StoreError> {
        let op = Op::read("balance");
        self.around(op, self.inner().balance(project)).await
    }
    async fn find_entries(&self, query: &EntryQuery) -> Result<Vec<LedgerEntry>, StoreError> {
        let op = Op::read("find_entries");
        self.around(op, self.inner().find_entries(query)).await
    }
    async fn entry_totals(
        &self,
        project: ProjectId,
        from: Timestamp,
        to: Timestamp,
    ) -> Result<Vec<(EntryKind, KindTotal)>, StoreError> {
        let op = Op::read("entry_totals");
        self.around(op, self.inner().entry_totals(project, from, to))
            .await
    }
}

#[async_trait]
impl<L: StoreLayer> RequestLogStore for Layered<L> {
    async fn append_requests(
        &self,
        entries: &[RequestLogEntry],
        keep: usize,
    ) -> Result<(), StoreError> {
        let op = Op::write("append_requests");
        self.around(op, self.inner().append_requests(entries, keep))
            .await
    }
    async fn find_requests(
        &self,
        query: &RequestLogQuery,
    ) -> Result<Vec<RequestLogEntry>, StoreError> {
        let op = Op::read("find_requests");
        self.around(op, self.inner().find_requests(query)).await
    }
    async fn purge_requests(&self, before: Timestamp, limit: usize) -> Result<Purged, StoreError> {
        let op = Op::write("purge_requests");
        self.around(op, self.inner().purge_requests(before, limit))
            .await
    }
}

#[async_trait]
impl<L: StoreLayer> Store for Layered<L> {
    async fn insert_payment(&self, payment: &Payment) -> Result<InsertOutcome, StoreError> {
        let op = Op::write("insert_payment");
        self.around(op, self.inner().insert_payment(payment)).await
    }
    async fn commit_change(&self, change: &PaymentChange) -> Result<(), StoreError> {
        let op = Op::write("commit_change");
        self.around(op, self.inner().commit_change(change)).await
    }
    async fn use_nonce(
        &self,
        project: ProjectId,
        nonce: &str,
        now: Timestamp,
        expires_at: Timestamp,
    ) -> Result<bool, StoreError> {
        let op = Op::write("use_nonce");
        let call = self.inner().use_nonce(project, nonce, now, expires_at);
        self.around(op, call).await
    }
    fn is_ready(&self) -> bool {
        self.inner().is_ready()
    }
    async fn check_writable(&self) -> Result<(), StoreError> {
        let op = Op::write("check_writable");
        self.around(op, self.inner().check_writable()).await
    }
    async fn commit_resend(&self, change: &PaymentChange) -> Result<Vec<EventId>, StoreError> {
        let op = Op::write("commit_resend");
        self.around(op, self.inner().commit_resend(change)).await
    }
    async fn transact(&self, work: TxWork) -> Result<TxOutput, StoreError> {
        let op = Op::write("transact");
        self.around(op, self.inner().transact(work)).await
    }
    async fn backlog(&self) -> Result<Backlog, StoreError> {
        self.around(Op::read("backlog"), self.inner().backlog())
            .await
    }
    async fn purge(
        &self,
        what: Retained,
        before: Timestamp,
        limit: usize,
    ) -> Result<Purged, StoreError> {
        let op = Op::write("purge");
        self.around(op, self.inner().purge(what, before, limit))
            .await
    }
    async fn take_turn(
        &self,
        task: &str,
        now: Timestamp,
        until: Timestamp,
    ) -> Result<bool, StoreError> {
        let op = Op::write("take_turn");
        self.around(op, self.inner().take_turn(task, now, until))
            .await
    }
    async fn auth_lookup_with_payment(
        &self,
        hash: &[u8; 32],
        keyid: Option<&KeyId>,
        id: PaymentId,
    ) -> Result<(AuthLookup, Option<Payment>), StoreError> {
        let op = Op::read("auth_lookup_with_payment");
        let call = self.inner().auth_lookup_with_payment(hash, keyid, id);
        self.around(op, call).await
    }
    async fn commit_change_once(
        &self,
        key: NonceUse<'_>,
        change: Option<&PaymentChange>,
    ) -> Result<bool, StoreError> {
        let op = Op::write("commit_change_once");
        self.around(op, self.inner().commit_change_once(key, change))
            .await
    }
    async fn admit_create(
        &self,
        nonce: Option<NonceUse<'_>>,
        project: ProjectId,
        merchant_payment_id: &MerchantPaymentId,
        candidate: Option<&Payment>,
    ) -> Result<AdmitOutcome, StoreError> {
        let op = Op::write("admit_create");
        let call = self
            .inner()
            .admit_create(nonce, project, merchant_payment_id, candidate);
        self.around(op, call).await
    }
}
