//! The state shared by the handlers.

use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use payments_core::ratelimit::{LocalRateLimiter, RateLimiter};
use payments_core::service::{OutboxWaker, PaymentService};
use payments_core::SecretString;
use tokio::sync::{Notify, Semaphore};

use crate::metrics::Metrics;

/// Requests the merchant API serves at once before answering `503`.
pub const MAX_IN_FLIGHT: usize = 4096;

/// Everything a handler needs: a handle to [`SharedState`], which it dereferences to (the fields
/// read as `state.service`, `state.metrics`, ...). Cloning it, as every axum `State`
/// extractor does per request, copies one pointer. It is built with [`AppState::new`] and the
/// `with_*` methods; its fields cannot be assigned afterwards (a service swapped in would not
/// wake the dispatcher: [`AppState::new`] ties the two together).
///
/// ```compile_fail,E0594
/// fn swap(mut state: payments_http::state::AppState, other: payments_core::service::PaymentService) {
///     state.service = other; // refused: the dispatcher's wake-up is tied to the first service
/// }
/// ```
#[derive(Clone)]
pub struct AppState(Arc<SharedState>);

impl std::ops::Deref for AppState {
    type Target = SharedState;

    fn deref(&self) -> &SharedState {
        &self.0
    }
}

/// The state behind an [`AppState`]. The environment and every other decision come from the
/// service's settings; this holds only what the HTTP layer adds.
#[derive(Clone)]
pub struct SharedState {
    /// The core service (it wakes [`SharedState::outbox_notify`] after committing an event).
    pub service: PaymentService,
    /// The scheme merchants sign for (`@scheme`, `@target-uri`).
    pub public_scheme: Arc<str>,
    /// Per-project rate limits: the core's rule over this port ([`LocalRateLimiter`] in this
    /// process by default; one shared through the database when several nodes serve).
    pub rate_limiter: Arc<dyn RateLimiter>,
    /// Metrics.
    pub metrics: Arc<Metrics>,
    /// The callback dispatcher's wake-up call, woken by the service whenever a committed
    /// change queued an event, whoever made the change (API, operator, sweeper, embedder).
    pub outbox_notify: Arc<Notify>,
    /// Bounds concurrent merchant requests (overload -> `503`).
    pub in_flight: Arc<Semaphore>,
    /// How long a request body may take to arrive (`408` after it); default 10 s.
    pub body_timeout: Duration,
    /// The token `/metrics` requires (`Authorization: Bearer ...`); `None`: open, as on a
    /// private listener.
    pub metrics_token: Option<Arc<SecretString>>,
    /// The SQLite database file, whose size (and its WAL's) `/metrics` reports; `None` for
    /// another store.
    pub database_file: Option<Arc<Path>>,
    /// The last answer of the store's write probe (`/readyz`) and when it was had.
    pub(crate) write_probe: Arc<tokio::sync::Mutex<Option<(std::time::Instant, bool)>>>,
    /// The web cabinet's URL, for the invitation links the operator API answers.
    pub cabinet_url: Option<Arc<str>>,
    /// When each token was last used (shown in the cabinet's token list).
    pub token_use: Arc<TokenUse>,
    /// The store of the web cabinet's records, given explicitly beside the service's store
    /// (the same database for the bundled stores); `None`: no cabinet, and the operator's user
    /// routes answer `503`.
    pub cabinet_store: Option<Arc<dyn payments_cabinet::store::CabinetStore>>,
    /// Set to `true` when the server begins to shut down: a request that waits on purpose (the
    /// events list's long poll) answers at once instead of holding the drain up.
    pub stopping: Arc<tokio::sync::watch::Sender<bool>>,
    /// The long polls of the events list waiting now, per project (at most
    /// [`LongPolls::PER_PROJECT`] wait at once; more answer at once).
    pub long_polls: Arc<LongPolls>,
    /// The requisite providers' routing and live health, which the operator API shows
    /// (`GET /operator/v1/providers`); `None` with one provider.
    pub providers: Option<crate::providers::ProviderStatusSource>,
    /// How this node shares its providers' health with the other nodes of its database (its
    /// name, how often it reports): the operator API shows every node's report beside this
    /// node's live values, and [`crate::workers::Workers::start_for`] writes this node's.
    /// `None`: this node's own values only.
    pub provider_reports: Option<crate::providers::ProviderReports>,
    /// The merchant API's request log ([`crate::request_log`]); `None`: off, nothing noted.
    pub request_log: Option<Arc<crate::request_log::RequestLog>>,
}

/// Records when project tokens authenticate requests, for the cabinet's "last used": at most
/// one store write per token per [`TokenUse::RESOLUTION`], made off the request's path.
pub struct TokenUse {
    store: Arc<dyn payments_core::store::Store>,
    written: std::sync::Mutex<
        std::collections::HashMap<payments_core::TokenId, payments_core::Timestamp>,
    >,
}

impl std::fmt::Debug for TokenUse {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("TokenUse").finish_non_exhaustive()
    }
}

impl TokenUse {
    /// How precise "last used" is: a use within this time of the last recorded one is not
    /// written again.
    pub const RESOLUTION: Duration = Duration::from_secs(60);

    fn new(service: &PaymentService) -> TokenUse {
        TokenUse {
            store: service.store().clone(),
            written: std::sync::Mutex::default(),
        }
    }

    /// Notes that `token` authenticated a request at `at`.
    pub fn note(&self, token: payments_core::TokenId, at: payments_core::Timestamp) {
        {
            let mut written = self
                .written
                .lock()
                .unwrap_or_else(std::sync::PoisonError::into_inner);
            if written
                .get(&token)
                .is_some_and(|last| at < *last + Self::RESOLUTION)
            {
                return;
            }
            if written.len() > 100_000 {
                written.clear();
            }
            written.insert(token, at);
        }
        let store = self.store.clone();
        tokio::spawn(async move {
            if let Err(e) = store.update_token_use(token, at).await {
                tracing::warn!(error = %e, "token use not recorded");
            }
        });
    }
}

impl std::fmt::Debug for AppState {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        self.0.fmt(f)
    }
}

impl std::fmt::Debug for SharedState {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("AppState")
            .field("service", &self.service)
            .field("public_scheme", &self.public_scheme)
            .field("metrics", &self.metrics)
            .field("body_timeout", &self.body_timeout)
            .finish_non_exhaustive()
    }
}

/// Wakes a tokio [`Notify`] for the core's [`OutboxWaker`].
#[derive(Debug)]
struct NotifyWaker(Arc<Notify>);

impl OutboxWaker for NotifyWaker {
    fn wake(&self) {
        self.0.notify_one();
    }
}

/// The events list's long polls waiting now, by project: a project's client that opens many
/// gets immediate answers past [`LongPolls::PER_PROJECT`], so it costs no more than polling
/// and cannot crowd others out. It is also an [`OutboxWaker`] of the service: an event
/// committed for a project (by this node, or by another that the store relays) wakes that
/// project's waiting polls, which then read the store once; nothing re-reads on a timer but
/// the safety net (`events::SAFETY_NET`).
#[derive(Debug, Default)]
pub struct LongPolls {
    waiting: std::sync::Mutex<std::collections::HashMap<payments_core::ProjectId, Waiting>>,
    rereads: std::sync::atomic::AtomicU64,
}

/// One project's waiting long polls: how many, and what wakes them.
#[derive(Debug)]
struct Waiting {
    count: usize,
    news: Arc<Notify>,
}

impl LongPolls {
    /// The most long polls of one project that wait at once.
    pub const PER_PROJECT: usize = 4;

    /// A place for one more waiting long poll of `project`, or `None` when it has
    /// [`Self::PER_PROJECT`] already; the place is given back when the guard is dropped.
    pub fn enter(self: &Arc<Self>, project: payments_core::ProjectId) -> Option<LongPollGuard> {
        let mut waiting = self.lock();
        let w = waiting.entry(project).or_insert_with(|| Waiting {
            count: 0,
            news: Arc::new(Notify::new()),
        });
        if w.count >= Self::PER_PROJECT {
            return None;
        }
        w.count += 1;
        Some(LongPollGuard {
            polls: self.clone(),
            project,
            news: w.news.clone(),
        })
    }

    /// How many long polls of `project` wait now.
    pub fn waiting(&self, project: payments_core::ProjectId) -> usize {
        self.lock().get(&project).map_or(0, |w| w.count)
    }

    /// How many times a waiting long poll has read the store again since the start (each
    /// poll's first read not counted).
    pub fn rereads(&self) -> u64 {
        self.rereads.load(std::sync::atomic::Ordering::Relaxed)
    }

    /// Counts one read of the store again.
    pub(crate) fn reread(&self) {
        self.rereads
            .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    }

    fn lock(
        &self,
    ) -> std::sync::MutexGuard<'_, std::collections::HashMap<payments_core::ProjectId, Waiting>>
    {
        self.waiting
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }
}

impl OutboxWaker for LongPolls {
    fn wake(&self) {
        for w in self.lock().values() {
            w.news.notify_waiters();
        }
    }

    fn queued(&self, project: payments_core::ProjectId) {
        if let Some(w) = self.lock().get(&project) {
            w.news.notify_waiters();
        }
    }
}

/// One waiting long poll's place ([`LongPolls::enter`]).
#[derive(Debug)]
pub struct LongPollGuard {
    polls: Arc<LongPolls>,
    project: payments_core::ProjectId,
    news: Arc<Notify>,
}

impl LongPollGuard {
    /// A future that ends at the next event of the project (or [`OutboxWaker::wake`]) after
    /// it is [enabled](tokio::sync::futures::OwnedNotified::enable): enable it before
    /// reading the store, so that nothing committed after the read is missed.
    pub fn news(&self) -> tokio::sync::futures::OwnedNotified {
        self.news.clone().notified_owned()
    }
}

impl Drop for LongPollGuard {
    fn drop(&mut self) {
        let mut waiting = self.polls.lock();
        if let Some(w) = waiting.get_mut(&self.project) {
            w.count -= 1;
            if w.count == 0 {
                waiting.remove(&self.project);
            }
        }
    }
}

impl AppState {
    /// State over a service; adds the dispatcher's wake-up call to the service (and so to
    /// every clone of it, including the caller's).
    /// `public_scheme` is `http` or `https`: the scheme the merchants' signatures cover.
    pub fn new(service: PaymentService, public_scheme: &str) -> Self {
        let outbox_notify = Arc::new(Notify::new());
        service
            .callbacks()
            .add_outbox_waker(Arc::new(NotifyWaker(outbox_notify.clone())));
        let long_polls = Arc::new(LongPolls::default());
        service.callbacks().add_outbox_waker(long_polls.clone());
        AppState(Arc::new(SharedState {
            public_scheme: public_scheme.into(),
            rate_limiter: Arc::new(LocalRateLimiter::new()),
            metrics: Arc::default(),
            outbox_notify,
            in_flight: Arc::new(Semaphore::new(MAX_IN_FLIGHT)),
            body_timeout: Duration::from_secs(10),
            metrics_token: None,
            database_file: None,
            write_probe: Arc::default(),
            cabinet_url: None,
            token_use: Arc::new(TokenUse::new(&service)),
            cabinet_store: None,
            stopping: Arc::new(tokio::sync::watch::Sender::new(false)),
            long_polls,
            providers: None,
            provider_reports: None,
            request_log: None,
            service,
        }))
    }

    /// The shared part, for a `with_*` method (copied first if another handle holds it).
    fn shared(&mut self) -> &mut SharedState {
        Arc::make_mut(&mut self.0)
    }

    /// Uses `limiter` for the per-project rate limits instead of the in-process one (a limiter
    /// shared by every node on one database).
    pub fn with_rate_limiter(mut self, limiter: Arc<dyn RateLimiter>) -> Self {
        self.shared().rate_limiter = limiter;
        self
    }

    /// The store of the web cabinet's records (for the operator's user routes).
    pub fn with_cabinet_store(
        mut self,
        store: Option<Arc<dyn payments_cabinet::store::CabinetStore>>,
    ) -> Self {
        self.shared().cabinet_store = store;
        self
    }

    /// How long a request body may take to arrive (`408` after it).
    pub fn with_body_timeout(mut self, timeout: Duration) -> Self {
        self.shared().body_timeout = timeout;
        self
    }

    /// The metrics the handlers record into.
    pub fn with_metrics(mut self, metrics: Arc<Metrics>) -> Self {
        self.shared().metrics = metrics;
        self
    }

    /// The token `/metrics` requires; `None`: open.
    pub fn with_metrics_token(mut self, token: Option<Arc<SecretString>>) -> Self {
        self.shared().metrics_token = token;
        self
    }

    /// The source of the requisite providers' status (routing and health, on the operator API).
    pub fn with_providers(
        mut self,
        source: Option<crate::providers::ProviderStatusSource>,
    ) -> Self {
        self.shared().providers = source;
        self
    }

    /// How this node shares its providers' health through the store
    /// ([`crate::provider_reports`]); with [`with_providers`](Self::with_providers).
    pub fn with_provider_reports(
        mut self,
        reports: Option<crate::providers::ProviderReports>,
    ) -> Self {
        self.shared().provider_reports = reports;
        self
    }

    /// The SQLite database file whose size `/metrics` reports.
    pub fn with_database_file(mut self, file: Option<Arc<Path>>) -> Self {
        self.shared().database_file = file;
        self
    }

    /// Notes every merchant request attributed to a project into `log` (`None`: off).
    pub fn with_request_log(mut self, log: Option<Arc<crate::request_log::RequestLog>>) -> Self {
        self.shared().request_log = log;
        self
    }

    /// The web cabinet's URL, for the invitation links the operator API answers.
    pub fn with_cabinet_url(mut self, url: Option<Arc<str>>) -> Self {
        self.shared().cabinet_url = url;
        self
    }
}
