//! The service: orchestration of parsing, bank resolution, contract, rates, the requisite
//! provider, the state machine and the store. It decides; adapters carry out.

mod admin;
mod appeals;
mod auth;
mod callbacks;
mod create;
mod events;
mod ledger;
mod listing;
mod notify;
mod offline;
mod operate;
mod payer;
mod request_log;
mod scans;
mod secrets;

use std::sync::Arc;
use std::time::Duration;

use crate::auth::verifier::SignatureVerifier;
use crate::bank::BankCatalog;
use crate::callback::address::AddressPolicy;
use crate::callback::resolve_destination;
use crate::callback::RetrySchedule;
use crate::clock::Clock;
use crate::clock::Timestamp;
use crate::event::{DeliveryAttempt, DeliveryState, EventKind, OutboxEvent};
use crate::history::{ChangeSource, StatusChange};
use crate::ids::{PaymentId, ProjectId};
use crate::payment::Payment;
use crate::project::{AuditRecord, Merchant, Project};
use crate::provider::{RateSource, RequisiteProvider};
use crate::random::RandomSource;
use crate::store::MerchantStoreExt;
use crate::store::{AttemptRecorded, ClaimedEvent, NonceUse, PaymentChange, Store, StoreError};
use crate::transition::{self, Transition, Trigger};
use crate::{ApiError, ErrorCode};

pub use crate::auth::verifier::BatchStats;
pub use crate::store::OutboxWaker;
pub use admin::AdminError;
pub use appeals::{
    appeal_note, AppealAnswer, AppealAnswerOutcome, AppealError, AppealPage, AppealRequest,
    AppealSweep,
};
pub use auth::{
    check_content_type, check_single_value_headers, is_echoable_request_id, is_json_content_type,
    AuthConfig, AuthContext, AuthError, AuthRequest, Authenticated, Refused, RequestFormError,
    SINGLE_VALUE_HEADERS,
};
pub use callbacks::{
    describe_filter, resend_budget_message, BulkResend, PurgeReport, ResentPayment, Retention,
    SkippedPayment, CALLBACK_HOLD_SETTING, MAX_FAILED_BATCH,
};
pub use create::{
    CreateError, CreateOutcome, CreateStatus, Reconciliation, Recovery, RECOVERY_ACTION,
    RECOVER_AFTER_MARGIN,
};
pub use events::{
    event_not_found, token_actor, EventCursor, EventListQuery, EventPage, Recovered, SentHeaders,
    SentRequest, MAX_EVENT_WAIT,
};
pub use ledger::{
    post_entry, EntryCursor, EntryListQuery, EntryPage, LedgerDifference, LedgerError,
    LedgerReport, PayoutRequest, Posted, MAX_STATEMENT_DAYS,
};
pub use listing::{
    ListCursor, ListQueryError, PaymentCursor, PaymentListQuery, PaymentPage, DEFAULT_LIST_LIMIT,
    MAX_LIST_LIMIT,
};
pub use notify::{
    NotificationError, NotificationOutcome, ProviderNotification, SignedNotification,
    TransferReport, NOTIFICATION_ID_MAX_LEN, NOTIFICATION_ID_RETENTION,
    NOTIFICATION_REASON_MAX_CHARS, UPSTREAM_NONCE_SCOPE,
};
pub use offline::{
    check_request_offline, OfflineCheck, RawRequest, RawRequestError, NOT_CHECKED_OFFLINE,
};
pub use operate::{Actor, OperateError, OperationResult, SweepReport};
pub use payer::{
    appeal_offer, appeal_reasons, newest_payer_appeal, AppealOffer, PayerAppeal, PayerPageDetail,
};
pub use request_log::{RequestLogPage, REQUEST_LOG_PURGE_BATCH};
pub use scans::{scans_refused, ScanBudget, ScanPlace};
pub use secrets::secrets_from_records;

/// Settings of the service.
#[derive(Debug, Clone)]
pub struct ServiceConfig {
    /// Which callback URLs are acceptable (development may allow `http://` and loopback).
    pub callback_policy: AddressPolicy,
    /// The requisite provider's time budget (15 s): no answer in time is
    /// `provider_result_ambiguous`.
    pub provider_budget: Duration,
    /// How long after its create a payment left in `created` is asked about again when its
    /// provider could not say (not reached, no answer in time) before it is closed as
    /// `provider_result_ambiguous` ([`Payments::recover_create`]): the time the provider is
    /// trusted to answer a repeated request with its first answer. 1 hour by default.
    pub recovery_window: Duration,
    /// The rate source's time budget: no answer in time is `422 payment_rate_unavailable`.
    pub rate_budget: Duration,
    /// How long a duplicate create waits for the first one's provider call.
    pub duplicate_wait: Duration,
    /// How often a waiting duplicate re-reads the payment.
    pub duplicate_poll: Duration,
    /// The callback retry schedule: an automatic event gets its `max_attempts()`, a manual
    /// resend one attempt. The dispatcher uses the same schedule for the delays.
    pub retry: RetrySchedule,
    /// The keys that seal callback secrets in the store (default: none, secrets are stored
    /// as they are; the server configures a key file).
    pub sealing: crate::sealing::SealingKeys,
    /// How long finished callback events and audit records are kept
    /// ([`Callbacks::purge_expired_records`]).
    pub retention: Retention,
    /// How much of the merchant API's request log is kept ([`crate::request_log`]).
    pub request_log: crate::request_log::RequestLogPolicy,
    /// Each project's budget of callback resends its merchant asks for (resend of an event,
    /// "send callback" of a payment, recovery): at most `burst` at once, then `per_second`
    /// ([`RESEND_BUDGET`](crate::ratelimit::RESEND_BUDGET)). Kept in this process: each node gives a project its budget.
    pub resend_budget: crate::project::RateLimit,
    /// How many list reads of one project run at once ([`ScanBudget`]).
    pub scans: ScanBudget,
    /// How long an appeal's active states last before it expires ([`crate::appeal`]).
    pub appeal_deadlines: crate::appeal::AppealDeadlines,
}

impl Default for ServiceConfig {
    fn default() -> Self {
        ServiceConfig {
            callback_policy: AddressPolicy::default(),
            provider_budget: Duration::from_secs(15),
            recovery_window: Duration::from_secs(3600),
            rate_budget: Duration::from_secs(3),
            duplicate_wait: Duration::from_secs(16),
            duplicate_poll: Duration::from_millis(20),
            retry: RetrySchedule::default(),
            sealing: crate::sealing::SealingKeys::none(),
            retention: Retention::default(),
            request_log: crate::request_log::RequestLogPolicy::default(),
            resend_budget: crate::ratelimit::RESEND_BUDGET,
            scans: ScanBudget::default(),
            appeal_deadlines: crate::appeal::AppealDeadlines::default(),
        }
    }
}

/// The ports the service runs on: everything it needs from outside, each a trait object the
/// embedder chooses (see [`PaymentService`] for a whole example).
///
/// | port | bundled implementations |
/// |---|---|
/// | [`Store`] | `payments-store-sqlite`; `testing::MemoryStore` (feature `testing`) |
/// | [`RequisiteProvider`] | the sandbox provider of `payments-http` (refused in production) |
/// | [`RateSource`] | fixed rates of `payments-http` (refused in production) |
/// | [`Clock`] | the system clock of `payments-http`; `testing::ManualClock` |
/// | [`RandomSource`] | the OS generator of `payments-http`; `testing::SeededRandom` |
///
/// Built with [`Ports::new`] (the embedded bank catalog) and [`Ports::with_catalog`]; a port
/// added in a later version gets a default or a `with_*` method, so an embedding's code keeps
/// compiling.
#[non_exhaustive]
#[derive(Clone)]
pub struct Ports {
    /// Storage.
    pub store: Arc<dyn Store>,
    /// Requisite provider.
    pub provider: Arc<dyn RequisiteProvider>,
    /// Exchange rates.
    pub rates: Arc<dyn RateSource>,
    /// Time and timers.
    pub clock: Arc<dyn Clock>,
    /// Randomness.
    pub rng: Arc<dyn RandomSource>,
    /// The bank catalog.
    pub catalog: Arc<BankCatalog>,
    /// Verifies requests' signatures ([`AloneVerifier`](crate::auth::verifier::AloneVerifier)
    /// by default; `payments-http`'s batcher verifies concurrent ones together).
    pub verifier: Arc<dyn SignatureVerifier>,
}

impl Ports {
    /// The service's ports, with the embedded bank catalog ([`BankCatalog::embedded`]).
    pub fn new(
        store: Arc<dyn Store>,
        provider: Arc<dyn RequisiteProvider>,
        rates: Arc<dyn RateSource>,
        clock: Arc<dyn Clock>,
        rng: Arc<dyn RandomSource>,
    ) -> Ports {
        Ports {
            store,
            provider,
            rates,
            clock,
            rng,
            catalog: Arc::new(BankCatalog::embedded()),
            verifier: Arc::new(crate::auth::verifier::AloneVerifier::default()),
        }
    }

    /// The same ports with another signature verifier.
    pub fn with_verifier(mut self, verifier: Arc<dyn SignatureVerifier>) -> Ports {
        self.verifier = verifier;
        self
    }

    /// The same ports with another bank catalog (a file of your own, `bank_catalog`).
    pub fn with_catalog(mut self, catalog: Arc<BankCatalog>) -> Ports {
        self.catalog = catalog;
        self
    }
}

impl std::fmt::Debug for Ports {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Ports").finish_non_exhaustive()
    }
}

/// The payment service: every operation of the API over the [`Ports`], deciding everything
/// and doing no I/O of its own. Clones share the ports and the outbox wakers.
///
/// Its operations are grouped in services by bounded context, each borrowed for a call:
/// [`payments`](ServiceState::payments) ([`Payments`]), [`callbacks`](ServiceState::callbacks)
/// ([`Callbacks`]), [`balances`](ServiceState::balances) ([`Balances`]),
/// [`gate`](ServiceState::gate) ([`Gate`]) and [`requests`](ServiceState::requests)
/// ([`RequestLog`]). The directory (merchants, projects, credentials, provisioning) is a
/// bounded context of its own over the same state, in the `payments-directory` crate
/// (`service.directory()` with its `DirectoryAccess` in scope).
///
/// A merchant's request goes through [`Gate::authenticate`], which returns an
/// [`Authenticated`] value; the operation consumes it ([`Payments::create_payment`],
/// [`Payments::test_complete`], [`Gate::accept`] for reads), so the request's one-time nonce
/// is always recorded. Operator actions go through [`Payments::operate`], the lifecycle
/// through [`Payments::sweep`].
///
/// The service over an in-memory store and a manual clock (feature `testing`), one signed
/// create and the operator's confirmation:
///
/// ```
/// # #[cfg(feature = "testing")]
/// # futures_executor::block_on(async {
/// use std::sync::Arc;
///
/// use async_trait::async_trait;
/// use payments_core::auth::Environment;
/// use payments_core::bank::BankCatalog;
/// use payments_core::payment::{Currency, PaymentStatus};
/// use payments_core::provider::*;
/// use payments_core::service::{Actor, AuthConfig, PaymentService, Ports, ServiceConfig};
/// use payments_core::testing::{ManualClock, MemoryStore, SeededRandom, TestCaller};
/// use payments_core::transition::Trigger;
/// use payments_core::Timestamp;
/// use payments_directory::{DirectoryAccess, ProjectPatch};
/// use rust_decimal::Decimal;
///
/// struct Pool;
/// #[async_trait]
/// impl RequisiteProvider for Pool {
///     async fn issue(&self, _: &RequisiteRequest) -> ProviderOutcome {
///         ProviderOutcome::Issued(IssuedRequisites::new("79001234567", "IVAN I."))
///     }
/// }
/// struct Rates;
/// #[async_trait]
/// impl RateSource for Rates {
///     async fn course(&self, _: Currency) -> Option<Decimal> {
///         Some(Decimal::new(100, 0))
///     }
/// }
///
/// let service = PaymentService::new(
///     Ports::new(
///         Arc::new(MemoryStore::new()),
///         Arc::new(Pool),
///         Arc::new(Rates),
///         Arc::new(ManualClock::new(Timestamp::from_unix_secs(1_790_856_000))),
///         Arc::new(SeededRandom::new(1)),
///     ),
///     ServiceConfig::default(),
///     AuthConfig::for_environment(Environment::Sandbox),
/// );
/// let actor = Actor("setup".into());
/// let merchant = service.directory().create_merchant("Shop", None, &actor).await.unwrap();
/// let project = service
///     .directory()
///     .create_project(merchant.id, "Web", ProjectPatch::default(), &actor)
///     .await
///     .unwrap();
///
/// // A merchant's signed request, authenticated and consumed by the create.
/// let caller = TestCaller::provision(&service, project.id, 1).await;
/// let body = br#"{"merchant_payment_id":"o-1","amount":3400,"payment_method":"sbp"}"#;
/// let created = caller.create(&service, body).await.unwrap().payment;
/// assert_eq!(created.status, PaymentStatus::Processing);
/// assert_eq!(created.requisites.as_ref().unwrap().requisite, "79001234567");
///
/// // The transfer arrived: the operator confirms; the callback event is queued with it.
/// let done = service
///     .payments()
///     .operate(created.id, Trigger::Confirm { amount: None }, &actor)
///     .await
///     .unwrap();
/// assert_eq!(done.payment.status, PaymentStatus::Completed);
/// # });
/// ```
#[derive(Clone)]
pub struct PaymentService {
    shared: Arc<ServiceState>,
}

/// What every service of a [`PaymentService`] shares: the ports, the settings and the
/// process-wide state (outbox wakers, the signature batcher, the provisioning turns, the resend
/// budgets, the list reads under way). Reached only through the services, which read it as
/// their own ([`Deref`](std::ops::Deref)); nothing of it is public.
pub struct ServiceState {
    // Behind `Arc`s: a clone (one per request that moves the service into a task) copies
    // pointers, not the settings' lists and strings.
    ports: Arc<Ports>,
    config: Arc<ServiceConfig>,
    auth: Arc<AuthConfig>,
    /// This process's outbox wakers (shared with the store's relay, which tells them of the
    /// events other processes commit).
    wakers: Arc<LocalWakers>,
    /// The store's relay to the other processes on it ([`OutboxStore::outbox_relay`]),
    /// joined when the first waker is added; `None` inside where the store has none.
    ///
    /// [`OutboxStore::outbox_relay`]: crate::store::OutboxStore::outbox_relay
    relay: std::sync::OnceLock<Option<Arc<dyn OutboxWaker>>>,
    /// The merchants this process is provisioning now (shared by every clone): a second call
    /// for one of them is busy, as one on another node is through the store's turn.
    provisioning: std::sync::Mutex<std::collections::HashSet<String>>,
    /// What each project has left of its resend budget (shared by every clone).
    resends: crate::ratelimit::LocalRateLimiter,
    /// The list reads under way, by project ([`ScanBudget`]; shared by every clone).
    scan_places: Arc<scans::ScanPlaces>,
    /// The creates running in this process (shared by every clone): a recovery leaves their
    /// payments to them ([`create::CreatesInFlight`]).
    creating: create::CreatesInFlight,
}

impl std::fmt::Debug for ServiceState {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ServiceState")
            .field("config", &self.config)
            .field("auth", &self.auth)
            .finish_non_exhaustive()
    }
}

impl std::ops::Deref for PaymentService {
    type Target = ServiceState;
    fn deref(&self) -> &ServiceState {
        &self.shared
    }
}

impl std::fmt::Debug for PaymentService {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PaymentService")
            .field("config", &self.shared.config)
            .field("auth", &self.shared.auth)
            .finish_non_exhaustive()
    }
}

/// Declares the services by bounded context: each a view of the [`ServiceState`] a
/// [`PaymentService`] holds, borrowed for one call (`service.payments().create_payment(..)`),
/// reading the shared state as its own.
macro_rules! services {
    ($($(#[$doc:meta])* $name:ident => $accessor:ident;)*) => {$(
        $(#[$doc])*
        #[derive(Clone, Copy)]
        pub struct $name<'a> {
            state: &'a ServiceState,
        }

        impl std::ops::Deref for $name<'_> {
            type Target = ServiceState;
            fn deref(&self) -> &ServiceState {
                self.state
            }
        }

        impl std::fmt::Debug for $name<'_> {
            fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                f.debug_struct(stringify!($name)).finish_non_exhaustive()
            }
        }

        impl ServiceState {
            #[doc = concat!("The [`", stringify!($name), "`] service.")]
            pub fn $accessor(&self) -> $name<'_> {
                $name { state: self }
            }
        }
    )*};
}

services! {
    /// Payments: create, read and list, operate (support's triggers, the sandbox's test
    /// outcomes), the lifecycle sweep, provider notifications and the payer page.
    Payments => payments;
    /// Appeals ([`crate::appeal`]): opened by the merchant or the payer, sent to the provider
    /// on record, decided by its answer or by support, expired by the sweep.
    Appeals => appeals;
    /// Callbacks and events: the outbox's schedule, the events API, resends, recovery, holds,
    /// retention.
    Callbacks => callbacks;
    /// The project balance ledger: balance, entries, statements, payouts, adjustments,
    /// reconciliation.
    Balances => balances;
    /// The merchant API's gate: authentication of signed requests and their one-time nonces.
    Gate => gate;
    /// The merchant API's request log: recording, reading, the integration's health, purging.
    RequestLog => requests;
}

/// `404 payment_not_found`: no such payment in the caller's project (also for an id that
/// does not parse and another project's payment, which the caller must not learn exists).
pub fn payment_not_found() -> ApiError {
    ReadError::NotFound.into()
}

/// Why a read of one payment (by its id for its project, or by its payer page link) has
/// nothing to show, each with the stable code of its answer ([`ReadError::code`]).
#[non_exhaustive]
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ReadError {
    /// Unknown, malformed, of another project, or of a payer page that is off: one answer
    /// for each, so that a guess learns nothing (`404 payment_not_found`).
    #[error("payment not found")]
    NotFound,
    /// A stored payer page link that cannot be read back (`500 internal_error`).
    #[error("{0}")]
    Damaged(String),
    /// The store failed (`503`, or `500` for corrupt data).
    #[error(transparent)]
    Store(#[from] StoreError),
}

impl ReadError {
    /// The stable code it is answered with.
    pub fn code(&self) -> ErrorCode {
        match self {
            ReadError::NotFound => ErrorCode::PaymentNotFound,
            ReadError::Damaged(_) => ErrorCode::Internal,
            ReadError::Store(e) => ApiError::from(e.clone()).code,
        }
    }
}

impl From<ReadError> for ApiError {
    fn from(e: ReadError) -> ApiError {
        match e {
            ReadError::Store(e) => e.into(),
            e => ApiError::new(e.code(), e.to_string()),
        }
    }
}

impl PaymentService {
    /// A service over `ports`.
    pub fn new(ports: Ports, config: ServiceConfig, auth: AuthConfig) -> Self {
        let state = ServiceState {
            ports: Arc::new(ports),
            config: Arc::new(config),
            auth: Arc::new(auth),
            wakers: Default::default(),
            relay: Default::default(),
            provisioning: Default::default(),
            resends: Default::default(),
            scan_places: Default::default(),
            creating: Default::default(),
        };
        PaymentService {
            shared: Arc::new(state),
        }
    }
}

impl Callbacks<'_> {
    /// Tells `waker` about every callback event this service, and every clone of it, commits
    /// from now on, and (where the store relays them, see [`OutboxStore::outbox_relay`]) every
    /// event the other processes on the store commit (see [`OutboxWaker`]). The first waker
    /// added joins the relay.
    ///
    /// [`OutboxStore::outbox_relay`]: crate::store::OutboxStore::outbox_relay
    pub fn add_outbox_waker(self, waker: Arc<dyn OutboxWaker>) {
        self.wakers.add(waker);
        self.relay.get_or_init(|| {
            let local: Arc<dyn OutboxWaker> = self.wakers.clone();
            self.ports.store.outbox_relay().map(|r| r.join(local))
        });
    }
}

/// The outbox wakers of one process, told together.
#[derive(Default)]
struct LocalWakers(std::sync::RwLock<Vec<Arc<dyn OutboxWaker>>>);

impl LocalWakers {
    fn add(&self, waker: Arc<dyn OutboxWaker>) {
        self.0
            .write()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .push(waker);
    }

    fn each(&self, tell: impl Fn(&dyn OutboxWaker)) {
        let wakers = self
            .0
            .read()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        for waker in wakers.iter() {
            tell(waker.as_ref());
        }
    }
}

impl OutboxWaker for LocalWakers {
    fn wake(&self) {
        self.each(|w| w.wake());
    }

    fn queued(&self, project: ProjectId) {
        self.each(|w| w.queued(project));
    }
}

impl ServiceState {
    /// Tells this process's outbox wakers and the relay that an event of `project` was
    /// committed (`None`: that events may be due, as when held callbacks are released).
    fn tell_wakers(&self, project: Option<ProjectId>) {
        let relay = self.relay.get().and_then(Option::as_ref);
        let wakers: [Option<&dyn OutboxWaker>; 2] =
            [Some(self.wakers.as_ref()), relay.map(|r| r.as_ref())];
        for waker in wakers.into_iter().flatten() {
            match project {
                Some(p) => waker.queued(p),
                None => waker.wake(),
            }
        }
    }
}

impl ServiceState {
    /// The authentication settings.
    pub fn auth_config(&self) -> &AuthConfig {
        &self.auth
    }

    /// The environment recorded in the store ([`settings::ENVIRONMENT`](crate::settings::ENVIRONMENT)),
    /// if any.
    pub async fn recorded_environment(
        &self,
    ) -> Result<Option<crate::auth::Environment>, StoreError> {
        crate::settings::ENVIRONMENT.get(&*self.ports.store).await
    }

    /// Checks the store against this service's environment without writing: `Ok(true)` when
    /// it is recorded and the same, `Ok(false)` when none is recorded yet, an error naming both
    /// when the store belongs to the other one (tokens issued there carry the other prefix and
    /// would all fail). Operator commands use it: a command never ties a database to an
    /// environment.
    pub async fn check_environment(&self) -> Result<bool, AdminError> {
        let env = self.auth.environment;
        match self.recorded_environment().await? {
            None => Ok(false),
            Some(recorded) if recorded == env => Ok(true),
            Some(recorded) => Err(AdminError::Invalid(format!(
                "this database belongs to the {recorded} environment, not {env}"
            ))),
        }
    }

    /// Checks this service's sealing keys against the key the database's values are sealed
    /// with ([`crate::settings::SEALING_KEY`]): with `record` (a node that serves), a database
    /// that records none records this service's current key first (of several nodes starting
    /// at once, one wins and the others are checked against it). The current key or any
    /// previous key (a rotation under way) passes; another key is the inner
    /// [`KeyMismatch`](crate::sealing::KeyMismatch). Without a key configured there is nothing
    /// to check.
    pub async fn check_sealing_key(
        &self,
        record: bool,
    ) -> Result<Result<(), crate::sealing::KeyMismatch>, StoreError> {
        let keys = &self.config.sealing;
        let Some(current) = keys.current_id() else {
            return Ok(Ok(()));
        };
        let (setting, store) = (crate::settings::SEALING_KEY, &*self.ports.store);
        let mut recorded = setting.get(store).await?;
        if recorded.is_none() && record {
            // Of several nodes at once one inserts; each reads back what was recorded.
            setting.insert(store, &current.to_string()).await?;
            recorded = setting.get(store).await?;
        }
        Ok(match recorded {
            Some(recorded) if !keys.opens_with(&recorded) => Err(crate::sealing::KeyMismatch {
                recorded,
                current: current.to_string(),
            }),
            _ => Ok(()),
        })
    }

    /// Records this service's current sealing key as the database's
    /// ([`crate::settings::SEALING_KEY`]): what a re-seal that left nothing under another key
    /// does, so that a node with only the old key is refused from then on.
    pub async fn adopt_sealing_key(&self) -> Result<(), AdminError> {
        if let Some(current) = self.config.sealing.current_id() {
            crate::settings::SEALING_KEY
                .set(&*self.ports.store, &current.to_string())
                .await?;
        }
        Ok(())
    }

    /// [`check_environment`](Self::check_environment), then records this service's
    /// environment in a store that has none. An embedding calls it once at start (the server
    /// does, at `serve`).
    pub async fn record_environment(&self) -> Result<(), AdminError> {
        if !self.check_environment().await? {
            crate::settings::ENVIRONMENT
                .set(&*self.ports.store, &self.auth.environment)
                .await?;
        }
        Ok(())
    }
}

impl Gate<'_> {
    /// The signature batcher's counters (batches, signatures, fallbacks, timeouts).
    pub fn signature_batches(self) -> BatchStats {
        self.ports.verifier.stats()
    }
}

impl ServiceState {
    /// The ports.
    pub fn ports(&self) -> &Ports {
        &self.ports
    }

    /// The store.
    pub fn store(&self) -> &Arc<dyn Store> {
        &self.ports.store
    }

    /// The settings.
    pub fn config(&self) -> &ServiceConfig {
        &self.config
    }

    /// The bank catalog.
    pub fn catalog(&self) -> &BankCatalog {
        &self.ports.catalog
    }

    /// The merchants this process is provisioning now, shared by every clone: the directory's
    /// turn within one process (`payments-directory`'s provisioning; the store's turn covers
    /// other nodes).
    pub fn provisioning_turns(&self) -> &std::sync::Mutex<std::collections::HashSet<String>> {
        &self.provisioning
    }
}

impl Payments<'_> {
    /// A payment of `project` by its id as given in a path: unknown, malformed and other
    /// projects' ids are all `404 payment_not_found`.
    pub async fn payment_of_project(
        self,
        project: &Project,
        id: &str,
    ) -> Result<Payment, ReadError> {
        let id: PaymentId = id.parse().map_err(|_| ReadError::NotFound)?;
        match self.ports.store.payment(id).await? {
            Some(p) if p.project_id == project.id => Ok(p),
            _ => Err(ReadError::NotFound),
        }
    }

    /// `payment`'s status history ([`crate::history::history`]): its creation, then every
    /// recorded change of its status or amount, oldest first.
    pub async fn history(self, payment: &Payment) -> Result<Vec<StatusChange>, StoreError> {
        let recorded = self.ports.store.status_changes(payment.id).await?;
        Ok(crate::history::history(payment, recorded))
    }
}

impl ServiceState {
    /// Commits a transition: the new payment version, its callback event (when a destination
    /// exists at any level) and the audit record, in one store transaction.
    async fn commit(
        &self,
        before: &Payment,
        t: &Transition,
        audit: Option<AuditRecord>,
        source: ChangeSource,
    ) -> Result<Option<OutboxEvent>, StoreError> {
        let change = self.change_of(before, t, audit, source).await?;
        self.ports.store.commit_change(&change).await?;
        self.woken(change.event)
    }

    /// [`commit`](Self::commit) once per `key` ([`Store::commit_change_once`]): `None` when the
    /// key was recorded before and nothing was written.
    async fn commit_once(
        &self,
        key: NonceUse<'_>,
        before: &Payment,
        t: &Transition,
        audit: AuditRecord,
        source: ChangeSource,
    ) -> Result<Option<Option<OutboxEvent>>, StoreError> {
        let change = self.change_of(before, t, Some(audit), source).await?;
        if !self
            .ports
            .store
            .commit_change_once(key, Some(&change))
            .await?
        {
            return Ok(None);
        }
        self.woken(change.event).map(Some)
    }

    /// The store change of a transition: the payment, its outbox row (if a destination exists
    /// at any level), the audit record, the ledger entry, when the change moves the project's
    /// balance ([`crate::ledger::payment_posting`]), and the entry of the payment's history
    /// caused by `source`, when the payment changed.
    async fn change_of(
        &self,
        before: &Payment,
        t: &Transition,
        audit: Option<AuditRecord>,
        source: ChangeSource,
    ) -> Result<PaymentChange, StoreError> {
        let outbox = match &t.event {
            Some(ev) => {
                let (project, merchant) = self.owner_of(&t.payment).await?;
                self.outbox_for(ev, &t.payment, &project, &merchant)
            }
            None => None,
        };
        let ledger = crate::ledger::payment_posting(before, &t.payment, || {
            crate::ids::EntryId::generate_ordered(t.payment.updated_at, self.ports.rng.as_ref())
        });
        #[cfg(feature = "planted-bugs")]
        let ledger = ledger.filter(|posting| !crate::planted::skips_posting(posting));
        Ok(PaymentChange {
            payment: t.payment.clone(),
            expected_version: before.version,
            event: outbox,
            audit,
            ledger,
            history: status_change(before, t, source),
        })
    }

    /// After a committed change: wakes the outbox wakers when it queued an event.
    fn woken(&self, event: Option<OutboxEvent>) -> Result<Option<OutboxEvent>, StoreError> {
        if let Some(e) = &event {
            self.tell_wakers(Some(e.event.project_id));
        }
        Ok(event)
    }

    async fn owner_of(&self, p: &Payment) -> Result<(Project, Merchant), StoreError> {
        let project = self
            .ports
            .store
            .project(p.project_id)
            .await?
            .ok_or_else(|| StoreError::Corrupt(format!("payment {} has no project", p.id)))?;
        let merchant = self
            .ports
            .store
            .merchant(project.merchant_id)
            .await?
            .ok_or_else(|| {
                StoreError::Corrupt(format!("project {} has no merchant", project.id))
            })?;
        Ok((project, merchant))
    }

    /// The outbox row for an event: destination by precedence payment -> project -> merchant;
    /// no URL at any level means no event.
    fn outbox_for(
        &self,
        ev: &crate::event::CallbackEvent,
        payment: &Payment,
        project: &Project,
        merchant: &Merchant,
    ) -> Option<OutboxEvent> {
        let destination = resolve_destination(
            payment.callback_url.as_ref(),
            project.callback_url.as_ref(),
            merchant.callback_url.as_ref(),
        )?
        .clone();
        let max_attempts = self.attempts_for(ev.kind);
        Some(OutboxEvent {
            event: ev.clone(),
            destination,
            state: DeliveryState::Pending,
            attempts: 0,
            max_attempts,
            next_attempt_at: Some(ev.created_at),
        })
    }

    /// How many attempts an event of `kind` gets: a manual resend one, an automatic event one
    /// plus one per delay of the retry schedule. Frozen on the event when it is queued.
    fn attempts_for(&self, kind: EventKind) -> u32 {
        match kind {
            EventKind::ManualResend => 1,
            _ => self.config.retry.max_attempts(),
        }
    }
}

impl Callbacks<'_> {
    /// When the attempt after `attempt` is due: `None` ends the event (delivered on success,
    /// failed once its attempts are used up, and a manual resend after its one attempt
    /// whatever its row says); otherwise the retry schedule's next delay after the start of
    /// this attempt.
    pub fn next_attempt_at(
        self,
        event: &OutboxEvent,
        attempt: &DeliveryAttempt,
    ) -> Option<Timestamp> {
        let allowed = event.max_attempts.min(self.attempts_for(event.event.kind));
        if attempt.success || attempt.attempt >= allowed {
            return None;
        }
        self.config
            .retry
            .next_attempt_at(attempt.attempt, attempt.started_at)
    }

    /// Records a delivery attempt of a claimed event with the time of the next one
    /// ([`next_attempt_at`](Self::next_attempt_at)) under the claim's lease token: when the
    /// event was claimed again meanwhile (the lease ran out during the attempt), only the
    /// attempt is recorded and the newer holder's schedule stands
    /// ([`AttemptRecorded::Stale`]).
    pub async fn record_attempt(
        self,
        claimed: &ClaimedEvent,
        attempt: &DeliveryAttempt,
    ) -> Result<AttemptRecorded, StoreError> {
        let next = self.next_attempt_at(&claimed.event, attempt);
        self.ports
            .store
            .record_attempt(claimed.event.event.event_id, claimed.lease, attempt, next)
            .await
    }
}

impl ServiceState {
    /// Applies a trigger with the state machine and commits it, re-reading and retrying when
    /// another writer changed the payment in between (optimistic concurrency).
    async fn apply(
        &self,
        id: PaymentId,
        make: impl Fn(&Payment) -> Result<Trigger, OperateError>,
        audit: impl Fn(&Payment, &Payment) -> Option<AuditRecord>,
        source: ChangeSource,
    ) -> Result<(Payment, Option<OutboxEvent>), OperateError> {
        for _ in 0..8 {
            let before = self
                .ports
                .store
                .payment(id)
                .await?
                .ok_or(OperateError::NotFound)?;
            let trigger = make(&before)?;
            let now = self.ports.clock.now();
            let t = transition::apply(&before, trigger, now, self.ports.rng.as_ref())?;
            let record = audit(&before, &t.payment);
            match self.commit(&before, &t, record, source).await {
                Ok(outbox) => return Ok((t.payment, outbox)),
                Err(StoreError::Conflict) => continue,
                Err(e) => return Err(e.into()),
            }
        }
        Err(OperateError::Contended)
    }
}

/// The entry of the payment's history that transition `t` of `before` makes, caused by
/// `source`: none when nothing changed (a resend).
fn status_change(before: &Payment, t: &Transition, source: ChangeSource) -> Option<StatusChange> {
    let cause = t.cause?;
    debug_assert!(t.changed, "only a change has a cause");
    debug_assert!(
        (before.status, before.amount) != (t.payment.status, t.payment.amount),
        "every change moves the status or the amount"
    );
    Some(StatusChange {
        payment_id: t.payment.id,
        version: t.payment.version,
        from: Some(before.status),
        to: t.payment.status,
        amount: t.payment.amount,
        at: t.payment.updated_at,
        cause,
        source: Some(source),
    })
}
