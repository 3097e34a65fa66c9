//! The storage port: what the service needs from a database. Adapters implement these traits;
//! uniqueness, atomic state-change-plus-outbox writes and optimistic concurrency are the store's
//! duty, so races are resolved by the database.

use std::time::Duration;

use async_trait::async_trait;

use crate::amount::Amount;
use crate::clock::Timestamp;
use crate::event::{
    DeliveryAttempt, DeliveryState, EventRecord, FailedEvent, FailedEventFilter, OutboxEvent,
};
use crate::ids::{EventId, KeyId, MerchantId, PaymentId, ProjectId, TokenId};
use crate::ledger::{Balance, EntryKind, KindTotal, LedgerEntry, Posting, TxReference};
use crate::payer::PaymentPageRecord;
use crate::payment::{Flow, MerchantPaymentId, Payment, PaymentMethod, PaymentStatus};
use crate::project::{
    AuditRecord, KeyRecord, Merchant, OperatorTokenRecord, Project, SecretRecord, TokenRecord,
};
use crate::request_log::{RequestLogEntry, RequestLogQuery};
use crate::SecretString;

mod layer;
mod tx;

/// Every trait of the port, for code that calls the store's methods:
/// `use payments_core::store::prelude::*;`.
pub mod prelude {
    pub use super::{
        AuditStore, CallbackSecretStore, CredentialStore, CredentialStoreExt, LedgerStore,
        MerchantStore, MerchantStoreExt, OperatorStore, OperatorStoreExt, OutboxStore,
        PayerPageStore, PayerPageStoreExt, PaymentStore, RequestLogStore, Store,
    };
}

pub use layer::{Layered, Op, OpKind, StoreLayer};
pub use tx::{transact, Transaction, TxOutput, TxWork};

/// The writes written once over [`Store::transact`]: the default bodies of
/// [`Store::insert_payment`], [`Store::commit_change`], [`Store::use_nonce`],
/// [`Store::admit_create`], [`Store::commit_change_once`] and [`Store::commit_resend`], for a
/// backend's tests that compare an override with them.
pub mod generic {
    pub use super::tx::{
        admit_create, commit_change, commit_change_once, commit_resend, insert_payment, use_nonce,
    };
}

/// A store failure.
#[non_exhaustive]
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum StoreError {
    /// The store cannot serve now (busy, overloaded, disk, closed): `503`. Made with
    /// [`UnavailableCause::error`].
    #[error("store unavailable: {}: {detail}", cause.as_str())]
    Unavailable {
        /// Why, typed: what metrics count and an embedder may branch on.
        cause: UnavailableCause,
        /// What happened, for people (the database's own message).
        detail: String,
    },
    /// Optimistic concurrency: the payment changed since it was read.
    #[error("the payment was changed concurrently")]
    Conflict,
    /// A unique key already exists (e.g. a key id registered twice).
    #[error("already exists: {0}")]
    Duplicate(String),
    /// The referenced object does not exist.
    #[error("not found: {0}")]
    NotFound(String),
    /// Stored data could not be read back (a bug or a damaged database).
    #[error("corrupt stored data: {0}")]
    Corrupt(String),
}

/// Why a store is unavailable, for logs, metrics and embedders: the typed cause of
/// [`StoreError::Unavailable`] (an adapter makes one with [`UnavailableCause::error`]); what
/// fits none of the others is [`UnavailableCause::Other`].
#[non_exhaustive]
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum UnavailableCause {
    /// No space left for the database or its journal.
    DiskFull,
    /// Another connection or process holds the lock for longer than the store waits.
    Locked,
    /// The storage refused a read or write (I/O error, read-only file system or database).
    Io,
    /// The store is closed or its writer stopped.
    Closed,
    /// Too much work queued, or a connection could not be had in time.
    Overloaded,
    /// A read ran past the store's time limit for one read and was stopped (SQLite's
    /// progress handler, PostgreSQL's `statement_timeout`): a filter that reads too much of a
    /// project. Answered `503 service_unavailable` telling the caller to narrow the filters.
    TimedOut,
    /// Anything else.
    Other,
}

impl UnavailableCause {
    /// Every cause, in a stable order.
    pub const ALL: [UnavailableCause; 7] = [
        UnavailableCause::DiskFull,
        UnavailableCause::Locked,
        UnavailableCause::Io,
        UnavailableCause::Closed,
        UnavailableCause::Overloaded,
        UnavailableCause::TimedOut,
        UnavailableCause::Other,
    ];

    /// The word a [`StoreError::Unavailable`] message shows after `store unavailable: `, and the
    /// metrics label.
    pub const fn as_str(self) -> &'static str {
        match self {
            UnavailableCause::DiskFull => "disk full",
            UnavailableCause::Locked => "locked",
            UnavailableCause::Io => "io",
            UnavailableCause::Closed => "closed",
            UnavailableCause::Overloaded => "overloaded",
            UnavailableCause::TimedOut => "timed out",
            UnavailableCause::Other => "other",
        }
    }

    /// A [`StoreError::Unavailable`] of this cause; it displays as
    /// `"store unavailable: <cause>: <detail>"`.
    pub fn error(self, detail: impl std::fmt::Display) -> StoreError {
        StoreError::Unavailable {
            cause: self,
            detail: detail.to_string(),
        }
    }
}

impl StoreError {
    /// The cause, for logs and metrics: an unavailable store's [`UnavailableCause`], else
    /// `conflict`, `duplicate`, `not found` or `corrupt`.
    pub fn cause(&self) -> &'static str {
        match self {
            StoreError::Unavailable { cause, .. } => cause.as_str(),
            StoreError::Conflict => "conflict",
            StoreError::Duplicate(_) => "duplicate",
            StoreError::NotFound(_) => "not found",
            StoreError::Corrupt(_) => "corrupt",
        }
    }
}

impl From<crate::ledger::PostError> for StoreError {
    fn from(e: crate::ledger::PostError) -> Self {
        StoreError::Corrupt(e.to_string())
    }
}

/// The message of a read stopped by the store's time limit ([`UnavailableCause::TimedOut`]).
pub const READ_TIMED_OUT: &str = "the read took longer than this service allows for one read: \
narrow the filters (a created_from/created_to window, a status) and ask again";

/// The answer of [`Store::insert_payment`].
// The payment is returned by value once per create; boxing it would buy nothing.
#[allow(clippy::large_enum_variant)]
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum InsertOutcome {
    /// The payment was stored.
    Inserted,
    /// A payment with the same (project, merchant_payment_id) exists; here it is.
    Existing(Payment),
}

/// A payment change to commit atomically: the new payment version, the callback event it
/// produces, and the audit record of the operator action that caused it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PaymentChange {
    /// The payment after the change.
    pub payment: Payment,
    /// The version the change was computed from; a different stored version is
    /// [`StoreError::Conflict`]. Equal to `payment.version` when only an event is added.
    pub expected_version: u64,
    /// The outbox event to insert in the same transaction.
    pub event: Option<OutboxEvent>,
    /// The audit record to insert in the same transaction.
    pub audit: Option<AuditRecord>,
    /// The ledger entry the change makes ([`crate::ledger::payment_posting`]), appended in the
    /// same transaction ([`Balance::post`](crate::ledger::Balance::post)); a second entry for
    /// the same payment version is refused ([`StoreError::Duplicate`]).
    pub ledger: Option<Posting>,
}

/// A page of a project's payments, newest first.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PaymentQuery {
    /// The project.
    pub project: ProjectId,
    /// Only this status.
    pub status: Option<PaymentStatus>,
    /// Created at or after.
    pub created_from: Option<Timestamp>,
    /// Created before.
    pub created_to: Option<Timestamp>,
    /// Only this merchant payment id.
    pub merchant_payment_id: Option<MerchantPaymentId>,
    /// Only merchant payment ids that start with this (case-sensitive, byte for byte).
    pub merchant_payment_id_prefix: Option<String>,
    /// Only payments whose metadata has this key with this value.
    pub metadata: Option<(String, String)>,
    /// Only this payment method.
    pub payment_method: Option<PaymentMethod>,
    /// Only this flow (regular or project test payments).
    pub flow: Option<Flow>,
    /// Only payments whose current amount equals this by value (`100.5` finds `100.50`).
    pub amount: Option<Amount>,
    /// Only payments whose requisite ends in these four digits
    /// ([`Requisites::last4`](crate::payment::Requisites::last4)).
    pub requisite_last4: Option<String>,
    /// Only payments before this `(created_at, id)` in the order (the next page).
    pub before: Option<(Timestamp, PaymentId)>,
    /// At most this many.
    pub limit: usize,
}

impl PaymentQuery {
    /// The newest `limit` payments of `project`, no filter.
    pub fn new(project: ProjectId, limit: usize) -> PaymentQuery {
        PaymentQuery {
            project,
            status: None,
            created_from: None,
            created_to: None,
            merchant_payment_id: None,
            merchant_payment_id_prefix: None,
            metadata: None,
            payment_method: None,
            flow: None,
            amount: None,
            requisite_last4: None,
            before: None,
            limit,
        }
    }

    /// Whether `payment` passes the filters (the page aside).
    pub fn matches(&self, payment: &Payment) -> bool {
        payment.project_id == self.project
            && self.status.is_none_or(|s| payment.status == s)
            && self
                .payment_method
                .is_none_or(|m| payment.payment_method == m)
            && self.flow.is_none_or(|f| payment.flow == f)
            && self.created_from.is_none_or(|t| payment.created_at >= t)
            && self.created_to.is_none_or(|t| payment.created_at < t)
            && self
                .merchant_payment_id
                .as_ref()
                .is_none_or(|m| &payment.merchant_payment_id == m)
            && self
                .merchant_payment_id_prefix
                .as_deref()
                .is_none_or(|p| payment.merchant_payment_id.as_str().starts_with(p))
            && self
                .metadata
                .as_ref()
                .is_none_or(|(k, v)| payment.metadata.get(k) == Some(v.as_str()))
            && self.amount.is_none_or(|a| payment.amount == a)
            && self
                .requisite_last4
                .as_deref()
                .is_none_or(|l| payment.requisite_last4().as_deref() == Some(l))
    }
}

/// A page of a project's ledger entries ([`LedgerStore::find_entries`]), in the ledger's
/// order (by `(created_at, seq)`, which is the order of `seq`) or the reverse.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct EntryQuery {
    /// The project.
    pub project: ProjectId,
    /// Only this kind.
    pub kind: Option<EntryKind>,
    /// Recorded at or after.
    pub created_from: Option<Timestamp>,
    /// Recorded before.
    pub created_to: Option<Timestamp>,
    /// Only the payout with this reference (at most one).
    pub reference: Option<TxReference>,
    /// Only this payment's entries.
    pub payment: Option<PaymentId>,
    /// Only entries after this `(created_at, seq)` in the order asked (the next page).
    pub after: Option<(Timestamp, u64)>,
    /// Oldest first (an export, a reconciliation) instead of newest first (a list).
    pub oldest_first: bool,
    /// At most this many.
    pub limit: usize,
}

impl EntryQuery {
    /// The newest `limit` entries of `project`, no filter.
    pub fn new(project: ProjectId, limit: usize) -> EntryQuery {
        EntryQuery {
            project,
            kind: None,
            created_from: None,
            created_to: None,
            reference: None,
            payment: None,
            after: None,
            oldest_first: false,
            limit,
        }
    }

    /// Whether `entry` passes the filters (the page aside).
    pub fn matches(&self, entry: &LedgerEntry) -> bool {
        let p = &entry.posting;
        p.project_id == self.project
            && self.kind.is_none_or(|k| p.kind == k)
            && self.created_from.is_none_or(|t| p.at >= t)
            && self.created_to.is_none_or(|t| p.at < t)
            && self
                .reference
                .as_ref()
                .is_none_or(|r| p.reference.as_ref() == Some(r))
            && self
                .payment
                .is_none_or(|id| p.payment.is_some_and(|(pid, _)| pid == id))
    }

    /// Whether `entry` comes after the cursor in the order asked.
    pub fn is_after_cursor(&self, entry: &LedgerEntry) -> bool {
        self.after.is_none_or(|c| {
            let key = (entry.posting.at, entry.seq);
            if self.oldest_first {
                key > c
            } else {
                key < c
            }
        })
    }
}

/// A page of a project's callback events with their attempts, newest first.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct EventQuery {
    /// The project.
    pub project: ProjectId,
    /// Only events in this delivery state.
    pub state: Option<DeliveryState>,
    /// Only this payment's events.
    pub payment: Option<PaymentId>,
    /// Only the event with this id (at most one).
    pub event: Option<EventId>,
    /// Queued at or after.
    pub created_from: Option<Timestamp>,
    /// Queued before.
    pub created_to: Option<Timestamp>,
    /// Only events before this `(created_at, event_id)` in the order (the next page).
    pub before: Option<(Timestamp, EventId)>,
    /// At most this many.
    pub limit: usize,
}

impl EventQuery {
    /// The newest `limit` events of `project`, no filter.
    pub fn new(project: ProjectId, limit: usize) -> EventQuery {
        EventQuery {
            project,
            state: None,
            payment: None,
            event: None,
            created_from: None,
            created_to: None,
            before: None,
            limit,
        }
    }

    /// Whether `event` passes the filters (the page aside).
    pub fn matches(&self, event: &OutboxEvent) -> bool {
        let e = &event.event;
        e.project_id == self.project
            && self.state.is_none_or(|s| event.state == s)
            && self.payment.is_none_or(|p| e.payment_id == p)
            && self.event.is_none_or(|id| e.event_id == id)
            && self.created_from.is_none_or(|t| e.created_at >= t)
            && self.created_to.is_none_or(|t| e.created_at < t)
    }
}

/// What waits in a store ([`Store::backlog`]): for metrics, readiness and the operator's
/// `status`. Scraped often, so a store reads each part through an index or a counter.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Backlog {
    /// The number of payments in each status, in [`PaymentStatus::ALL`] order, statuses
    /// without payments left out. A store keeps the counts as it writes (SQLite: triggers into
    /// a table of counters) rather than counting the payments per call.
    pub by_status: Vec<(PaymentStatus, u64)>,
    /// The earliest [`Payment::due_at`] of all payments, through the due-time index: how far
    /// the sweeper is behind. `None` when no payment is due ever.
    pub oldest_due_payment: Option<Timestamp>,
    /// The number of pending callback events.
    pub pending_events: u64,
    /// When the oldest pending event was queued (its `created_at`), through an index; `None`
    /// without pending events: the age of the oldest undelivered callback.
    pub oldest_pending_event: Option<Timestamp>,
    /// The number of failed events that no resend has answered yet
    /// ([`Store::commit_resend`]).
    pub failed_events: u64,
}

/// Records whose retention can end: what [`Store::purge`] deletes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Retained {
    /// Request nonces (and the keys of [`Store::commit_change_once`]) expired at or before
    /// `before`, earliest expiry first.
    Nonces,
    /// Finished callback events (delivered or failed) queued before `before`, with their
    /// attempts, oldest first. Pending events are never deleted.
    FinishedEvents,
    /// Audit records written before `before`, oldest first.
    Audit,
}

/// What one batch of [`Store::purge`] did.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Purged {
    /// How many records it deleted.
    pub deleted: u64,
    /// Whether the batch reached its limit somewhere: there may be more to delete.
    pub more: bool,
}

impl Purged {
    /// A batch that deleted `deleted` records with a limit of `limit`: there may be more when
    /// it reached the limit.
    pub fn of_batch(deleted: u64, limit: usize) -> Purged {
        Purged {
            deleted,
            more: deleted >= limit as u64,
        }
    }
}

/// The batch the service purges expired nonces in ([`purge_all`]): one writer job or one
/// statement each.
pub const NONCE_PURGE_BATCH: usize = 5_000;

/// Deletes every record of `what` whose retention ended before `before`, in batches of
/// `chunk` ([`Store::purge`] until a batch says there is no more), so that a large purge never
/// holds a writer or a lock for long; returns how many.
pub async fn purge_all<S: Store + ?Sized>(
    store: &S,
    what: Retained,
    before: Timestamp,
    chunk: usize,
) -> Result<u64, StoreError> {
    let mut total = 0;
    loop {
        let batch = store.purge(what, before, chunk.max(1)).await?;
        total += batch.deleted;
        if !batch.more {
            return Ok(total);
        }
    }
}

/// The links of the hosted payer page ([`crate::payer`]): one per payment, found by the hash
/// of its token.
#[async_trait]
pub trait PayerPageStore: Send + Sync {
    /// The payer page link of `page.payment_id`: stores `page` if the payment has none, and
    /// answers the payment's stored link either way (a payment's link never changes; of
    /// concurrent calls for one payment exactly one stores its record, every call answers
    /// that one). [`StoreError::Duplicate`] if another payment's link has the same token hash.
    async fn ensure_payment_page(
        &self,
        page: &PaymentPageRecord,
    ) -> Result<PaymentPageRecord, StoreError>;
    /// The payer page link that `key` names, if there is one (a token hash is found through
    /// an index).
    async fn find_payment_page(
        &self,
        key: PageKey<'_>,
    ) -> Result<Option<PaymentPageRecord>, StoreError>;
}

/// Which payer page link [`PayerPageStore::find_payment_page`] looks up.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PageKey<'a> {
    /// The link of this payment.
    Payment(PaymentId),
    /// The link whose token has this SHA-256.
    TokenHash(&'a [u8; 32]),
}

/// The lookups by name over [`PayerPageStore::find_payment_page`], for every payer page store
/// (they are not part of the port: a backend writes the one lookup, a wrapper forwards it).
#[async_trait]
pub trait PayerPageStoreExt: PayerPageStore {
    /// A payment's payer page link, if it has one.
    async fn payment_page(
        &self,
        payment: PaymentId,
    ) -> Result<Option<PaymentPageRecord>, StoreError> {
        self.find_payment_page(PageKey::Payment(payment)).await
    }
    /// The payer page link whose token has this SHA-256.
    async fn payment_page_by_hash(
        &self,
        hash: &[u8; 32],
    ) -> Result<Option<PaymentPageRecord>, StoreError> {
        self.find_payment_page(PageKey::TokenHash(hash)).await
    }
}

impl<S: PayerPageStore + ?Sized> PayerPageStoreExt for S {}

/// Payments.
#[async_trait]
pub trait PaymentStore: Send + Sync {
    /// A payment by id.
    async fn payment(&self, id: PaymentId) -> Result<Option<Payment>, StoreError>;
    /// A payment by its project and merchant payment id.
    async fn payment_by_merchant_id(
        &self,
        project: ProjectId,
        merchant_payment_id: &MerchantPaymentId,
    ) -> Result<Option<Payment>, StoreError>;
    /// Payments whose [`Payment::due_at`] is at or before `now`, earliest first, through an
    /// index (cost follows the number due, not the number stored).
    async fn due_payments(&self, now: Timestamp, limit: usize) -> Result<Vec<Payment>, StoreError>;
    /// A page of a project's payments (see [`PaymentQuery`]), newest first by
    /// `(created_at, id)`.
    async fn find_payments(&self, query: &PaymentQuery) -> Result<Vec<Payment>, StoreError>;
}

/// A lease fencing token: every claim of an outbox event gives it a new, larger token, so the
/// holder of an older lease (whose lease ran out while its attempt was still in flight, and the
/// event was claimed again) can be told apart from the current holder.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct LeaseToken(u64);

impl LeaseToken {
    /// The token with this number (as stored).
    pub const fn new(n: u64) -> LeaseToken {
        LeaseToken(n)
    }

    /// The token's number.
    pub const fn get(self) -> u64 {
        self.0
    }
}

/// An event handed to one dispatcher by [`OutboxStore::claim_due_events`], with the token of
/// its lease.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ClaimedEvent {
    /// The event as it was when claimed (`next_attempt_at` the time it was due).
    pub event: OutboxEvent,
    /// The token of this claim; [`OutboxStore::record_attempt`] takes it back.
    pub lease: LeaseToken,
}

/// What [`OutboxStore::record_attempt`] did.
#[non_exhaustive]
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AttemptRecorded {
    /// The lease was current: the attempt is recorded and the event's state, schedule and
    /// attempt count changed.
    Applied,
    /// The event was claimed again since this lease was taken: the attempt row is recorded (the
    /// request really happened) but the event's state and schedule are left to the newer
    /// holder.
    Stale,
}

/// The callback outbox.
///
/// Claims are safe across processes: two concurrent claims (from two handles on one database,
/// or two nodes) never receive the same event while its lease runs, and every claim carries a
/// new [`LeaseToken`] that fences the attempt's record.
#[async_trait]
pub trait OutboxStore: Send + Sync {
    /// Claims up to `limit` pending events due at `now`, earliest first (equal times in queueing
    /// order), and leases them: their `next_attempt_at` moves to `now + lease`, so another
    /// dispatcher (or a restart after a crash mid-attempt) picks them up only after the lease
    /// ends, and each gets a new lease token, larger than any it had.
    async fn claim_due_events(
        &self,
        now: Timestamp,
        limit: usize,
        lease: Duration,
    ) -> Result<Vec<ClaimedEvent>, StoreError>;
    /// [`claim_due_events`](Self::claim_due_events) leaving the events of the projects in
    /// `skip` unclaimed (neither returned nor leased): a dispatcher that already holds as many
    /// of a project's events as it keeps asks for everyone else's, so that the project's
    /// backlog stays due in the store instead of hiding the events due behind it. The default
    /// ignores `skip`; the bundled stores implement it (a dispatcher over a store that does not
    /// leaves the events it cannot keep to their lease).
    async fn claim_due_events_except(
        &self,
        now: Timestamp,
        limit: usize,
        lease: Duration,
        skip: &[ProjectId],
    ) -> Result<Vec<ClaimedEvent>, StoreError> {
        let _ = skip;
        self.claim_due_events(now, limit, lease).await
    }
    /// Records an attempt made under the lease `lease` and, when that lease is still the
    /// event's current one, the event's next step, in one transaction:
    /// `next_attempt_at = Some(t)` keeps it pending, `None` ends it as delivered (on success)
    /// or failed. With an older lease only the attempt row is added
    /// ([`AttemptRecorded::Stale`]). An unknown event is [`StoreError::NotFound`].
    async fn record_attempt(
        &self,
        event_id: EventId,
        lease: LeaseToken,
        attempt: &DeliveryAttempt,
        next_attempt_at: Option<Timestamp>,
    ) -> Result<AttemptRecorded, StoreError>;
    /// Every event of a payment with its attempts, oldest first.
    async fn events_for_payment(&self, payment: PaymentId) -> Result<Vec<EventRecord>, StoreError>;
    /// Failed events that no resend has answered yet ([`Store::commit_resend`]) and that
    /// match `filter`, in queueing order, at most `limit`, each with its last attempt.
    async fn failed_events(
        &self,
        filter: &FailedEventFilter,
        limit: usize,
    ) -> Result<Vec<FailedEvent>, StoreError>;
    /// A page of a project's callback events with their attempts (see [`EventQuery`]),
    /// newest first by `(created_at, event_id)`.
    async fn find_events(&self, query: &EventQuery) -> Result<Vec<EventRecord>, StoreError>;
}

/// The project balances ([`crate::ledger`]): each project's append-only ledger of entries
/// and the balance kept beside it. Entries are appended in the transactions that cause them
/// ([`PaymentChange::ledger`], [`Transaction::append_posting`]); this trait reads them.
#[async_trait]
pub trait LedgerStore: Send + Sync {
    /// A project's balance (one row); [`Balance::empty`] for a project without entries.
    async fn balance(&self, project: ProjectId) -> Result<Balance, StoreError>;
    /// A page of a project's entries (see [`EntryQuery`]), through the index on
    /// `(project, created_at, seq)`.
    async fn find_entries(&self, query: &EntryQuery) -> Result<Vec<LedgerEntry>, StoreError>;
    /// The count and sum of each kind of a project's entries recorded in `[from, to)`, kinds
    /// without entries left out: a statement's lines, summed by the database.
    async fn entry_totals(
        &self,
        project: ProjectId,
        from: Timestamp,
        to: Timestamp,
    ) -> Result<Vec<(EntryKind, KindTotal)>, StoreError>;
}

/// The merchant API's request log ([`crate::request_log`]): each project's recent requests,
/// written in batches off the requests' path, read newest first, kept under a
/// [`RequestLogPolicy`](crate::request_log::RequestLogPolicy).
#[async_trait]
pub trait RequestLogStore: Send + Sync {
    /// Appends `entries` (their `id` is ignored: the store numbers them in the order given,
    /// after every stored one) in one transaction, then deletes, for each project among them,
    /// its requests beyond the newest `keep` by `(at, id)`: a project's log never holds more
    /// than `keep` once a write returned.
    async fn append_requests(
        &self,
        entries: &[RequestLogEntry],
        keep: usize,
    ) -> Result<(), StoreError>;
    /// A page of a project's requests (see [`RequestLogQuery`]), newest first by `(at, id)`,
    /// through the index on `(project_id, at, id)`.
    async fn find_requests(
        &self,
        query: &RequestLogQuery,
    ) -> Result<Vec<RequestLogEntry>, StoreError>;
    /// Retention by age: deletes at most `limit` requests (of any project) that arrived before
    /// `before`, oldest first, in one transaction.
    async fn purge_requests(&self, before: Timestamp, limit: usize) -> Result<Purged, StoreError>;
}

/// What [`CredentialStore::auth_lookup`] found; each part `None` when absent.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct AuthLookup {
    /// The token with the presented hash.
    pub token: Option<TokenRecord>,
    /// The token's project.
    pub project: Option<Project>,
    /// The project's merchant.
    pub merchant: Option<Merchant>,
    /// The project's key with the requested id.
    pub key: Option<KeyRecord>,
}

/// Merchants and their projects.
#[async_trait]
pub trait MerchantStore: Send + Sync {
    /// Inserts or replaces a merchant.
    async fn put_merchant(&self, merchant: &Merchant) -> Result<(), StoreError>;

    /// The merchant with id `only` (none or one), or every merchant by id when `only` is
    /// `None`.
    async fn find_merchants(&self, only: Option<MerchantId>) -> Result<Vec<Merchant>, StoreError>;

    /// Inserts or replaces a project.
    async fn put_project(&self, project: &Project) -> Result<(), StoreError>;

    /// The project with id `only` (none or one), or every project by id when `only` is `None`.
    async fn find_projects(&self, only: Option<ProjectId>) -> Result<Vec<Project>, StoreError>;
}

/// The lookups by name over [`MerchantStore`]'s two finds, for every merchant store (not part
/// of the port: a backend writes the finds, a wrapper forwards them).
#[async_trait]
pub trait MerchantStoreExt: MerchantStore {
    /// A merchant by id.
    async fn merchant(&self, id: MerchantId) -> Result<Option<Merchant>, StoreError> {
        Ok(self.find_merchants(Some(id)).await?.pop())
    }

    /// Every merchant, by id.
    async fn merchants(&self) -> Result<Vec<Merchant>, StoreError> {
        self.find_merchants(None).await
    }

    /// A project by id.
    async fn project(&self, id: ProjectId) -> Result<Option<Project>, StoreError> {
        Ok(self.find_projects(Some(id)).await?.pop())
    }

    /// Every project, by id.
    async fn projects(&self) -> Result<Vec<Project>, StoreError> {
        self.find_projects(None).await
    }
}

impl<S: MerchantStore + ?Sized> MerchantStoreExt for S {}

/// A project's credentials: API tokens (with when each was last used) and signature keys, and
/// the lookup that authenticates a request (made of the merchant and project it names).
#[async_trait]
pub trait CredentialStore: MerchantStore {
    /// Stores an issued token.
    async fn insert_token(&self, token: &TokenRecord) -> Result<(), StoreError>;

    /// The tokens `key` names, revoked or not: the one with the SHA-256 of a presented token
    /// (none or one), or a project's (in issue order).
    async fn find_tokens(&self, key: TokenKey<'_>) -> Result<Vec<TokenRecord>, StoreError>;

    /// Revokes a token; `false` if there is no such token of that project.
    async fn revoke_token(
        &self,
        project: ProjectId,
        id: TokenId,
        at: Timestamp,
    ) -> Result<bool, StoreError>;

    /// Records that `token` authenticated a request at `at` (the latest time is kept).
    async fn record_token_use(&self, token: TokenId, at: Timestamp) -> Result<(), StoreError>;

    /// When each of `tokens` was last used, for those used at all.
    async fn token_last_used(
        &self,
        tokens: &[TokenId],
    ) -> Result<Vec<(TokenId, Timestamp)>, StoreError>;

    /// Registers a key; [`StoreError::Duplicate`] if the project already has that key id.
    async fn insert_key(&self, key: &KeyRecord) -> Result<(), StoreError>;

    /// A project's key with id `only` (none or one), or all its keys when `only` is `None`;
    /// revoked or not.
    async fn find_keys(
        &self,
        project: ProjectId,
        only: Option<&KeyId>,
    ) -> Result<Vec<KeyRecord>, StoreError>;

    /// The projects on which a key with this id is registered and not revoked, in any order
    /// (registration refuses a key active on another project, so normally at most one). The
    /// default asks [`MerchantStore::find_projects`], then [`Self::find_keys`] of each: one read per project, for a
    /// rare operator action; a store that can should answer it in one query.
    async fn active_key_projects(&self, keyid: &KeyId) -> Result<Vec<ProjectId>, StoreError> {
        let mut found = Vec::new();
        for project in self.projects().await? {
            if let Some(key) = self.key(project.id, keyid).await? {
                if key.revoked_at.is_none() {
                    found.push(project.id);
                }
            }
        }
        Ok(found)
    }

    /// Everything authentication reads, in one round trip where the store can: the token with
    /// this hash (revoked or not), its project, the project's merchant and, when `keyid` is
    /// given, the project's key with that id (revoked or not). The answer is the stored state
    /// at the time of the call, so a revocation counts for the next request: a store may keep
    /// earlier answers only if it can tell, at each call, that nothing they hold has changed
    /// since, whoever changed it (the SQLite store checks a version that triggers move with
    /// every change, in the lookup's snapshot). The default asks [`Self::find_tokens`],
    /// [`MerchantStore::find_projects`], [`MerchantStore::find_merchants`] and [`Self::find_keys`] in turn.
    async fn auth_lookup(
        &self,
        hash: &[u8; 32],
        keyid: Option<&KeyId>,
    ) -> Result<AuthLookup, StoreError> {
        let Some(token) = self.token_by_hash(hash).await? else {
            return Ok(AuthLookup::default());
        };
        let project = self.project(token.project_id).await?;
        let merchant = match &project {
            Some(p) => self.merchant(p.merchant_id).await?,
            None => None,
        };
        let key = match keyid {
            Some(k) => self.key(token.project_id, k).await?,
            None => None,
        };
        Ok(AuthLookup {
            token: Some(token),
            project,
            merchant,
            key,
        })
    }

    /// Revokes a key; `false` if there is no such key of that project.
    async fn revoke_key(
        &self,
        project: ProjectId,
        keyid: &KeyId,
        at: Timestamp,
    ) -> Result<bool, StoreError>;
}

/// Which tokens [`CredentialStore::find_tokens`] looks up.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TokenKey<'a> {
    /// The token whose SHA-256 this is.
    Hash(&'a [u8; 32]),
    /// A project's tokens.
    Project(ProjectId),
}

/// The lookups by name over [`CredentialStore`]'s finds, for every credential store (not part
/// of the port: a backend writes the finds, a wrapper forwards them).
#[async_trait]
pub trait CredentialStoreExt: CredentialStore {
    /// A token by the SHA-256 of the presented token, revoked or not.
    async fn token_by_hash(&self, hash: &[u8; 32]) -> Result<Option<TokenRecord>, StoreError> {
        Ok(self.find_tokens(TokenKey::Hash(hash)).await?.pop())
    }

    /// A project's tokens.
    async fn tokens(&self, project: ProjectId) -> Result<Vec<TokenRecord>, StoreError> {
        self.find_tokens(TokenKey::Project(project)).await
    }

    /// A project's key by id, revoked or not.
    async fn key(
        &self,
        project: ProjectId,
        keyid: &KeyId,
    ) -> Result<Option<KeyRecord>, StoreError> {
        Ok(self.find_keys(project, Some(keyid)).await?.pop())
    }

    /// A project's keys.
    async fn keys(&self, project: ProjectId) -> Result<Vec<KeyRecord>, StoreError> {
        self.find_keys(project, None).await
    }
}

impl<S: CredentialStore + ?Sized> CredentialStoreExt for S {}

/// A project's callback secrets (at most two: the current one and the previous one while it
/// still signs).
#[async_trait]
pub trait CallbackSecretStore: Send + Sync {
    /// A project's callback secrets, newest first (at most two).
    async fn callback_secrets(&self, project: ProjectId) -> Result<Vec<SecretRecord>, StoreError>;

    /// Adds a secret and keeps only the two newest, atomically.
    async fn add_callback_secret(
        &self,
        project: ProjectId,
        secret: &SecretRecord,
    ) -> Result<(), StoreError>;

    /// Adds `secret` only if the project has none; returns the project's secrets after.
    async fn add_callback_secret_if_none(
        &self,
        project: ProjectId,
        secret: &SecretRecord,
    ) -> Result<Vec<SecretRecord>, StoreError>;

    /// Replaces the stored value of the project's secret whose stored value is `old` with
    /// `new`, keeping its time and flags (a re-seal under another key); `false` if the
    /// project has no secret stored as `old` (it was rotated away meanwhile).
    async fn replace_callback_secret(
        &self,
        project: ProjectId,
        old: &SecretString,
        new: &SecretString,
    ) -> Result<bool, StoreError>;
}

/// The operator's named tokens and the service's settings.
#[async_trait]
pub trait OperatorStore: Send + Sync {
    /// Stores an issued operator token; [`StoreError::Duplicate`] if its id or hash exists.
    async fn insert_operator_token(&self, token: &OperatorTokenRecord) -> Result<(), StoreError>;

    /// The operator token with this SHA-256 of the presented token (none or one), or every
    /// operator token in issue order when `hash` is `None`; expired ones included.
    async fn find_operator_tokens(
        &self,
        hash: Option<&[u8; 32]>,
    ) -> Result<Vec<OperatorTokenRecord>, StoreError>;

    /// Ends an operator token's validity at `at` (now for a revocation, later for a rotation's
    /// overlap), unless it already ends earlier; `false` if there is no such token.
    async fn expire_operator_token(&self, id: TokenId, at: Timestamp) -> Result<bool, StoreError>;

    /// A named setting (e.g. the operator token hash).
    async fn setting(&self, name: &str) -> Result<Option<String>, StoreError>;

    /// Sets a named setting.
    async fn put_setting(&self, name: &str, value: &str) -> Result<(), StoreError>;
}

/// The lookups by name over [`OperatorStore::find_operator_tokens`] (not part of the port).
#[async_trait]
pub trait OperatorStoreExt: OperatorStore {
    /// An operator token by the SHA-256 of the presented token, expired or not.
    async fn operator_token_by_hash(
        &self,
        hash: &[u8; 32],
    ) -> Result<Option<OperatorTokenRecord>, StoreError> {
        Ok(self.find_operator_tokens(Some(hash)).await?.pop())
    }

    /// Every operator token, expired ones included, in issue order.
    async fn operator_tokens(&self) -> Result<Vec<OperatorTokenRecord>, StoreError> {
        self.find_operator_tokens(None).await
    }
}

impl<S: OperatorStore + ?Sized> OperatorStoreExt for S {}

/// The audit trail.
#[async_trait]
pub trait AuditStore: Send + Sync {
    /// Appends a record.
    async fn append_audit(&self, record: &AuditRecord) -> Result<(), StoreError>;
    /// The newest `limit` records, newest first.
    async fn audit_records(&self, limit: usize) -> Result<Vec<AuditRecord>, StoreError>;
}

/// The setting [`Store::check_writable`] writes by default.
pub const WRITE_PROBE_SETTING: &str = "store.write_probe";

/// A request nonce to record (see [`Store::use_nonce`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct NonceUse<'a> {
    /// The project whose nonce it is.
    pub project: ProjectId,
    /// The nonce as sent.
    pub nonce: &'a str,
    /// The time of the request.
    pub now: Timestamp,
    /// Until when it is kept.
    pub expires_at: Timestamp,
}

/// What [`Store::admit_create`] did.
// The payment is returned by value once per create; boxing it would buy nothing.
#[allow(clippy::large_enum_variant)]
#[non_exhaustive]
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum AdmitOutcome {
    /// The nonce was already used: nothing was written.
    Replayed,
    /// The merchant payment id is taken; here is its payment (the nonce is recorded).
    Existing(Payment),
    /// The candidate payment was stored (with the nonce).
    Inserted,
    /// The merchant payment id is free and there was no candidate: only the nonce is recorded.
    Free,
}

/// Everything the service needs from storage.
///
/// The service holds an `Arc<dyn Store>` and relies on the store for uniqueness
/// (`(project, merchant_payment_id)`, nonces), for writing a payment change together with its
/// outbox event and audit record in one transaction, and for optimistic concurrency
/// ([`StoreError::Conflict`] when the stored version is not the expected one).
///
/// # Implementing a store
///
/// The documented semantics of every method are checked by the store contract suite,
/// `payments_core::testing::contract` (feature `testing`). An adapter runs it from its own
/// tests against a fresh store per check: `contract::run_all(|| MyStore::new())`, or, when
/// making a store awaits (connecting, migrating), `contract::run_all_async(|| async { ... })`.
/// `payments_core::testing::MemoryStore` is the reference implementation and
/// `payments-store-sqlite` passes the same suite (`payments-store-sqlite/tests/contract.rs`).
///
/// # Wrapping a store
///
/// A wrapper (metrics, logs) that forwards only the required methods loses the wrapped store's
/// overrides of the provided ones, its readiness and its cabinet, without an error. Implement
/// [`StoreLayer`] instead and use [`Layered`], which forwards every method; check a wrapper
/// with `contract::check_wrapper`.
///
/// # Example
///
/// Code over the port works with any store; with the `testing` feature it runs here against
/// the in-memory store, which then runs the contract suite.
///
/// ```
/// use payments_core::payment::Payment;
/// use payments_core::store::{InsertOutcome, Store, StoreError};
///
/// /// The payment stored under `payment`'s merchant payment id: `payment` itself when the id
/// /// was free, else the payment that took it first.
/// async fn insert_or_existing(store: &dyn Store, payment: &Payment) -> Result<Payment, StoreError> {
///     Ok(match store.insert_payment(payment).await? {
///         InsertOutcome::Inserted => payment.clone(),
///         InsertOutcome::Existing(first) => first,
///     })
/// }
///
/// #[cfg(feature = "testing")]
/// futures_executor::block_on(async {
///     use std::time::Duration;
///
///     use payments_core::payment::{Flow, PaymentMethod};
///     use payments_core::testing::{contract, fixtures, MemoryStore};
///     use payments_core::Timestamp;
///
///     let store = MemoryStore::new();
///     let at = Timestamp::from_unix_secs(1_790_856_000);
///     let payment = |n: u128, amount: &str| {
///         fixtures::payment(
///             contract::payment_id(n),
///             contract::project_id(1),
///             &fixtures::request("order-1001", amount, PaymentMethod::Sbp),
///             Flow::RuntimeLive,
///             at,
///             Duration::from_secs(15 * 60),
///         )
///     };
///     let first = insert_or_existing(&store, &payment(1, "3400")).await.unwrap();
///     // Another payment with the same merchant payment id gets the first one back.
///     let again = insert_or_existing(&store, &payment(2, "3400")).await.unwrap();
///     assert_eq!(again, first);
///
///     // Every adapter passes the same suite.
///     contract::run_all(MemoryStore::new).await
/// });
/// ```
#[async_trait]
pub trait Store:
    PaymentStore
    + OutboxStore
    + MerchantStore
    + CredentialStore
    + CallbackSecretStore
    + OperatorStore
    + AuditStore
    + PayerPageStore
    + LedgerStore
    + RequestLogStore
{
    /// A cheap check that the store answers (for `/readyz`).
    fn is_ready(&self) -> bool {
        true
    }

    /// Whether the store can write now (for `/readyz`): a real, tiny write, so that a full
    /// disk, a read-only database or a lock held elsewhere shows. The default writes the
    /// setting [`WRITE_PROBE_SETTING`].
    async fn check_writable(&self) -> Result<(), StoreError> {
        self.put_setting(WRITE_PROBE_SETTING, "ok").await
    }

    /// A manual resend that answers failed events, in one transaction: if the payment of
    /// `change` has failed events that no resend has answered yet, commits `change` (its
    /// event is the resend: a new event of kind manual resend) as
    /// [`Store::commit_change`] does, marks those failed events as answered by it and
    /// returns their ids; otherwise writes nothing and returns an empty list (another
    /// operator resent them meanwhile). So a failed event is resent by at most one bulk
    /// resend, however many run at once. Written once over [`Store::transact`]
    /// ([`generic::commit_resend`]).
    async fn commit_resend(&self, change: &PaymentChange) -> Result<Vec<EventId>, StoreError> {
        generic::commit_resend(self, change).await
    }

    /// Runs `work` in one transaction: its [`Transaction`] steps see each other, and they are
    /// committed together when it answers `Ok`, or none of them when it answers `Err` (or the
    /// store fails). The compound writes of the port are written once over it ([`transact`] is
    /// the typed way to call it).
    async fn transact(&self, work: TxWork) -> Result<TxOutput, StoreError>;

    /// Stores a new payment unless (project, merchant_payment_id) is taken, atomically.
    /// Written once over [`Store::transact`] ([`generic::insert_payment`]); a store may
    /// override it for speed (the contract compares the two).
    async fn insert_payment(&self, payment: &Payment) -> Result<InsertOutcome, StoreError> {
        generic::insert_payment(self, payment).await
    }

    /// Commits a change (payment version + event + audit) in one transaction; a stored version
    /// other than `change.expected_version` is [`StoreError::Conflict`] and writes nothing. The
    /// fields fixed at creation (project, merchant payment id, flow, initial amount, currency,
    /// geo code, method, intrabank flag, bank code, callback URL, creation time, fingerprint)
    /// never change; a store may refuse a change that alters them as
    /// [`StoreError::Conflict`]. Written once over [`Store::transact`]
    /// ([`generic::commit_change`]); a store may override it for speed.
    async fn commit_change(&self, change: &PaymentChange) -> Result<(), StoreError> {
        generic::commit_change(self, change).await
    }

    /// Records `nonce` for `project` until `expires_at`; `false` if it is already recorded and
    /// not expired (a replay), and nothing is written. Exactly one of many concurrent calls with
    /// one nonce gets `true`. Written once over [`Store::transact`] ([`generic::use_nonce`]); a
    /// store may override it for speed.
    async fn use_nonce(
        &self,
        project: ProjectId,
        nonce: &str,
        now: Timestamp,
        expires_at: Timestamp,
    ) -> Result<bool, StoreError> {
        let nonce = NonceUse {
            project,
            nonce,
            now,
            expires_at,
        };
        generic::use_nonce(self, nonce).await
    }

    /// What waits in the store ([`Backlog`]), read together: one snapshot where the store can.
    async fn backlog(&self) -> Result<Backlog, StoreError>;

    /// Retention: deletes at most `limit` records of `what` whose retention ended before
    /// `before` (see [`Retained`] for each), oldest first, in one transaction (a store that
    /// keeps one kind in several tables may take `limit` from each). Callers repeat it in
    /// small batches ([`purge_all`]), so that a large purge never holds the writer for long; a
    /// batch on one node skips what a batch on another holds.
    async fn purge(
        &self,
        what: Retained,
        before: Timestamp,
        limit: usize,
    ) -> Result<Purged, StoreError>;

    /// Takes the turn of a periodic background `task` (`"sweep"`, `"nonce-purge"`) until
    /// `until`, for every process sharing the store: `true` for the one caller whose turn it
    /// now is, `false` while another caller's turn has not ended at `now`. A turn is never
    /// released early, so a node that stops mid-turn only delays the task to `until`.
    ///
    /// The default, for a store that one process uses (SQLite, memory), always answers `true`:
    /// there is nobody to take turns with. A store shared by several nodes (PostgreSQL)
    /// decides it in the database.
    async fn take_turn(
        &self,
        task: &str,
        now: Timestamp,
        until: Timestamp,
    ) -> Result<bool, StoreError> {
        let _ = (task, now, until);
        Ok(true)
    }

    /// [`CredentialStore::auth_lookup`] and the payment `id` in one round trip (for an
    /// authenticated read of a payment; one snapshot where the store can). The default makes the
    /// two calls.
    async fn auth_lookup_with_payment(
        &self,
        hash: &[u8; 32],
        keyid: Option<&KeyId>,
        id: PaymentId,
    ) -> Result<(AuthLookup, Option<Payment>), StoreError> {
        let found = self.auth_lookup(hash, keyid).await?;
        let payment = match found.token {
            Some(_) => self.payment(id).await?,
            None => None,
        };
        Ok((found, payment))
    }

    /// [`Store::commit_change`] at most once per `key`: a [`NonceUse`] whose project is a
    /// scope of the caller's choice and whose expiry is how long the key is remembered (a key
    /// recorded with an expiry at or before `key.now` is free, as for
    /// [`Store::use_nonce`]).
    ///
    /// With a `change`, in one write: if `key` is free, records it and commits the change
    /// (`Ok(true)`); if it is recorded and live, writes nothing (`Ok(false)`). An error, a
    /// [`StoreError::Conflict`] included, writes neither the key nor the change, so the caller
    /// can re-read and try again. Without a change, only tells whether `key` is free and
    /// records nothing.
    ///
    /// The service uses it for the upstream's notification ids: a notification is applied
    /// together with the record of its id, or not at all. Written once over
    /// [`Store::transact`] ([`generic::commit_change_once`]).
    async fn commit_change_once(
        &self,
        key: NonceUse<'_>,
        change: Option<&PaymentChange>,
    ) -> Result<bool, StoreError> {
        generic::commit_change_once(self, key, change).await
    }

    /// The write of a create request, in its order: record the request's `nonce` (a replay
    /// writes nothing and answers [`AdmitOutcome::Replayed`]); then, if `(project,
    /// merchant_payment_id)` is taken, [`AdmitOutcome::Existing`]; else store `candidate`
    /// ([`AdmitOutcome::Inserted`]) or, without one (the request broke a business rule),
    /// [`AdmitOutcome::Free`]. `candidate` carries `project` and `merchant_payment_id`. A store
    /// error leaves nothing of it written.
    ///
    /// Written once over [`Store::transact`] ([`generic::admit_create`]): one transaction (the
    /// SQLite store: one group-commit job). A store may override it for speed (the PostgreSQL
    /// store: one statement); the contract suite compares the override with the generic path.
    async fn admit_create(
        &self,
        nonce: Option<NonceUse<'_>>,
        project: ProjectId,
        merchant_payment_id: &MerchantPaymentId,
        candidate: Option<&Payment>,
    ) -> Result<AdmitOutcome, StoreError> {
        generic::admit_create(self, nonce, project, merchant_payment_id, candidate).await
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{ApiError, ErrorCode};

    /// The cause is a value, not a word read back from the text: a detail that reads like
    /// another cause changes nothing, and the answer on the wire is the fixed `503`.
    #[test]
    fn an_unavailable_store_carries_its_cause_typed() {
        for cause in UnavailableCause::ALL {
            let e = cause.error("locked: disk full: io (the database's own words)");
            assert!(
                matches!(&e, StoreError::Unavailable { cause: c, .. } if *c == cause),
                "{e:?}"
            );
            assert_eq!(e.cause(), cause.as_str());
            assert_eq!(
                e.to_string(),
                format!(
                    "store unavailable: {}: locked: disk full: io (the database's own words)",
                    cause.as_str()
                )
            );
            let api = ApiError::from(e);
            assert_eq!(api.code, ErrorCode::ServiceUnavailable);
            if cause == UnavailableCause::TimedOut {
                assert_eq!(api.message, READ_TIMED_OUT);
                assert_eq!(api.retry_after, None, "the same read would time out again");
            } else {
                assert_eq!(api.message, "the service is temporarily unavailable");
                assert_eq!(api.retry_after, Some(1));
            }
        }
    }
}
