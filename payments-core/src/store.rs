//! The storage port: what the service needs from a database. Adapters implement these traits;
//! uniqueness, atomic state-change-plus-outbox writes and optimistic concurrency are the store's
//! duty, so races are resolved by the database.

use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;

use crate::amount::Amount;
use crate::appeal::{Appeal, AppealInsert, AppealQuery};
use crate::clock::Timestamp;
use crate::event::{
    DeliveryAttempt, DeliveryState, EventRecord, FailedEvent, FailedEventFilter, OutboxEvent,
};
use crate::history::StatusChange;
use crate::ids::{AppealId, EventId, KeyId, MerchantId, PaymentId, ProjectId, TokenId};
use crate::ledger::{Balance, EntryKind, KindTotal, LedgerEntry, Posting, TxReference};
use crate::payer::PaymentPageRecord;
use crate::payment::{Flow, MerchantPaymentId, Payment, PaymentMethod, PaymentStatus};
use crate::project::{
    AuditRecord, KeyRecord, Merchant, OperatorTokenRecord, Project, SecretRecord, TokenRecord,
};
use crate::receipt::Receipt;
use crate::request_log::{RequestLogEntry, RequestLogQuery};
use crate::totals::PaymentTotals;
use crate::SecretString;

mod layer;
mod port;
mod tx;

use port::declare_port;

/// Every trait of the port, for code that calls the store's methods:
/// `use payments_core::store::prelude::*;`.
pub mod prelude {
    pub use super::{
        AppealStore, AuditStore, CallbackSecretStore, CredentialStore, CredentialStoreExt,
        LedgerStore, MerchantStore, MerchantStoreExt, OperatorStore, OperatorStoreExt, OutboxStore,
        PayerPageStore, PayerPageStoreExt, PaymentStore, RequestLogStore, SettingStore, Store,
    };
}

/// The types named in the port's signatures, for the code generated from its listing outside
/// this module (`use payments_core::store::port_types::*`; see the module `store::port`).
#[doc(hidden)]
pub mod port_types {
    pub use std::sync::Arc;
    pub use std::time::Duration;

    pub use async_trait::async_trait;

    pub use super::prelude::*;
    pub use super::{
        AdmitOutcome, AppealChange, AttemptRecorded, AuthLookup, Backlog, ClaimedEvent, EntryQuery,
        EventQuery, InsertOutcome, LeaseToken, NonceUse, OutboxRelay, PageKey, PaymentChange,
        PaymentQuery, Purged, Retained, StoreError, TokenKey, TxOutput, TxWork,
    };
    pub use crate::appeal::{Appeal, AppealInsert, AppealQuery};
    pub use crate::clock::Timestamp;
    pub use crate::event::{DeliveryAttempt, EventRecord, FailedEvent, FailedEventFilter};
    pub use crate::history::StatusChange;
    pub use crate::ids::{AppealId, EventId, KeyId, MerchantId, PaymentId, ProjectId, TokenId};
    pub use crate::ledger::{Balance, EntryKind, KindTotal, LedgerEntry};
    pub use crate::payer::PaymentPageRecord;
    pub use crate::payment::{MerchantPaymentId, Payment};
    pub use crate::project::{
        AuditRecord, KeyRecord, Merchant, OperatorTokenRecord, Project, SecretRecord, TokenRecord,
    };
    pub use crate::receipt::Receipt;
    pub use crate::request_log::{RequestLogEntry, RequestLogQuery};
    pub use crate::totals::PaymentTotals;
    pub use crate::SecretString;
}

pub use layer::{Layered, Op, OpKind, StoreLayer};
pub use tx::{transact, Transaction, TxOutput, TxWork};

/// The writes written once over [`Store::transact`]: the default bodies of
/// [`Store::insert_payment`], [`Store::commit_change`], [`Store::use_nonce`],
/// [`Store::admit_create`], [`Store::commit_change_once`] and [`Store::commit_resend`], for a
/// backend's tests that compare an override with them.
pub mod generic {
    pub use super::tx::{
        admit_create, commit_appeal, commit_change, commit_change_once, commit_resend,
        insert_payment, use_nonce,
    };
}

/// Told after a change that queued a callback event has committed, so that whoever waits for
/// one (a dispatcher waiting for work, a long poll of the events list) looks at once instead
/// of at its next poll. The HTTP adapter's `AppState` adds its wakers to the service
/// (`service.callbacks().add_outbox_waker`); without one, events wait for the poll. Wakers
/// are shared by every clone of a service, so a clone taken before a waker was added wakes
/// it too; where the store relays wakes between processes ([`OutboxStore::outbox_relay`]),
/// they hear of the other processes' events as well.
pub trait OutboxWaker: Send + Sync {
    /// Events may be due now: a hold on callbacks was released, or a relay lost what it was
    /// told for a while. Whoever waits for any event looks again.
    fn wake(&self);

    /// An event of `project` was committed. By default [`wake`](Self::wake).
    fn queued(&self, project: ProjectId) {
        let _ = project;
        self.wake();
    }
}

/// Shares outbox wakes between the processes of one store (nodes over one PostgreSQL
/// database), answered by [`OutboxStore::outbox_relay`].
pub trait OutboxRelay: Send + Sync {
    /// Joins the relay: from now on `local` is told of the events the other processes
    /// commit (and [`OutboxWaker::wake`] when some may have been missed), and the waker
    /// answered tells them of the events this process commits.
    fn join(&self, local: Arc<dyn OutboxWaker>) -> Arc<dyn OutboxWaker>;
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
    /// The database cannot be reached: the connection is refused, lost, not opened in time, its
    /// TLS handshake or sign-in fails, or the database is shutting down or starting. What an
    /// operator pages on (with a node's heartbeat going unanswered: a hung database).
    Unreachable,
    /// This store was closed (the node is stopping) or its writer stopped.
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
    pub const ALL: [UnavailableCause; 8] = [
        UnavailableCause::DiskFull,
        UnavailableCause::Locked,
        UnavailableCause::Io,
        UnavailableCause::Unreachable,
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
            UnavailableCause::Unreachable => "unreachable",
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

/// An appeal's change to commit atomically ([`Store::commit_appeal`]): the appeal's new version,
/// the payment changes its decision makes (an accepted appeal's re-check, in order) and the
/// audit record of who decided.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AppealChange {
    /// The appeal after the change.
    pub appeal: Appeal,
    /// The version the change was computed from.
    pub expected_version: u64,
    /// The payment changes, in order (each at the version the one before left).
    pub payments: Vec<PaymentChange>,
    /// The audit record.
    pub audit: Option<AuditRecord>,
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
    /// The entry of the payment's status history ([`crate::history`]) when the change moves
    /// its status or amount, written in the same transaction.
    pub history: Option<StatusChange>,
}

/// The most branches one [`PaymentQuery`] reads in one statement: the query itself and at most
/// `MAX_QUERY_BRANCHES - 1` in [`PaymentQuery::union`]. A read of more (the cabinet's search
/// over many projects) is split by the core into queries of at most this many, their pages
/// merged.
pub const MAX_QUERY_BRANCHES: usize = 32;

/// A page of a project's payments, newest first; with [`union`](PaymentQuery::union), of the
/// payments any of several queries finds (several projects, several filters) in one read.
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
    /// Only merchant payment ids that start with this in any case of their letters: their
    /// [key](crate::payment::merchant_payment_id_key) starts with this text's key.
    pub merchant_payment_id_prefix_any_case: Option<String>,
    /// Only payments whose metadata has this key with this value.
    pub metadata: Option<(String, String)>,
    /// Only payments whose metadata has this value under any key (each payment once).
    pub metadata_value: Option<String>,
    /// Only this payment method.
    pub payment_method: Option<PaymentMethod>,
    /// Only this flow (regular or project test payments).
    pub flow: Option<Flow>,
    /// Only payments whose current amount equals this by value (`100.5` finds `100.50`).
    pub amount: Option<Amount>,
    /// Only payments whose requisite ends in these four digits
    /// ([`Requisites::last4`](crate::payment::Requisites::last4)).
    pub requisite_last4: Option<String>,
    /// Only payments whose requisite is this full card number, digit for digit. A store that
    /// keeps requisites sealed compares the number's last four digits and its keyed digest
    /// ([`SealingKeys::digests`](crate::sealing::SealingKeys::digests)); a payment whose
    /// digest it cannot check (none stored, or one of a key it no longer has) by the last
    /// four digits alone.
    pub requisite_number: Option<crate::payment::RequisiteNumber>,
    /// Only payments before this `(created_at, id)` in the order (the next page).
    pub before: Option<(Timestamp, PaymentId)>,
    /// At most this many.
    pub limit: usize,
    /// Other branches of the same page: the payments this query's filters find and those each
    /// of these finds (its own project and filters; its `before`, `limit` and `union` are
    /// ignored, this query's apply to every branch), each payment once, newest first by
    /// `(created_at, id)`, at most `limit`. A store reads them in one statement, each branch
    /// through its own index. At most [`MAX_QUERY_BRANCHES`]` - 1`; empty for one query.
    pub union: Vec<PaymentQuery>,
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
            merchant_payment_id_prefix_any_case: None,
            metadata: None,
            metadata_value: None,
            payment_method: None,
            flow: None,
            amount: None,
            requisite_last4: None,
            requisite_number: None,
            before: None,
            limit,
            union: Vec::new(),
        }
    }

    /// The branches of the page: this query without its [`union`](PaymentQuery::union), then
    /// each query of it, every one with this query's `before` and `limit`.
    pub fn branches(&self) -> Vec<PaymentQuery> {
        let own = PaymentQuery {
            union: Vec::new(),
            ..self.clone()
        };
        std::iter::once(own)
            .chain(self.union.iter().map(|b| PaymentQuery {
                before: self.before,
                limit: self.limit,
                union: Vec::new(),
                ..b.clone()
            }))
            .collect()
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

crate::__storage_port!(PayerPageStore declare_port! {});

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

crate::__storage_port!(PaymentStore declare_port! {});

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

crate::__storage_port!(OutboxStore declare_port! {});

crate::__storage_port!(LedgerStore declare_port! {});

crate::__storage_port!(RequestLogStore declare_port! {});

crate::__storage_port!(AppealStore declare_port! {});

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

crate::__storage_port!(MerchantStore declare_port! {});

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

crate::__storage_port!(CredentialStore declare_port! {});

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

crate::__storage_port!(CallbackSecretStore declare_port! {});

crate::__storage_port!(OperatorStore declare_port! {});

crate::__storage_port!(SettingStore declare_port! {});

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

crate::__storage_port!(AuditStore declare_port! {});

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

crate::__storage_port!(Store declare_port! {});

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
