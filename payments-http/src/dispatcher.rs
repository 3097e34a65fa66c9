//! The callback dispatcher: the loop that carries the core's outbox to merchants' receivers.
//!
//! Events are claimed from the store with a lease (a crash mid-attempt leaves the event to be
//! retried once the lease ends: at-least-once delivery), delivered on their own tasks under a
//! per-project, a per-host and a global concurrency bound, and every attempt is recorded
//! together with the time of the next one, so the retry schedule survives restarts. The core decides what is
//! sent ([`payments_core::event`]), how it is signed ([`CallbackSecrets::sign_attempt`]) and
//! when it is retried ([`Callbacks::next_attempt_at`](payments_core::service::Callbacks::next_attempt_at) over the service's
//! [`RetrySchedule`](payments_core::callback::RetrySchedule)); this module does the I/O.
//!
//! # Invariants
//! - An event is attempted only while this dispatcher holds its lease, and an attempt starts
//!   only if the rest of the lease covers a whole attempt ([`DispatcherConfig::lease`] >
//!   [`DispatcherConfig::attempt_timeout`], checked by [`DispatcherConfig::validate`]); so two
//!   dispatchers (or two runs) never attempt one event at the same time.
//! - Every attempt that sent a request is recorded with the time of the next one in one store
//!   call ([`Callbacks::record_attempt`](payments_core::service::Callbacks::record_attempt)); an attempt that could not be recorded is
//!   repeated after the lease (at least once, never lost).
//! - The record carries the claim's lease token: should a lease run out mid-attempt anyway
//!   (a paused process, clocks of two nodes apart) and another dispatcher claim the event,
//!   the late record adds its attempt but leaves the newer holder's schedule alone.
//! - Nothing is attempted without a signing secret; a failure to get one is not an attempt.
//! - The destination is checked again at every attempt against the service's current
//!   callback policy, and the address connected to is the address checked (the resolver).
//! - At most [`DispatcherConfig::concurrency`] attempts are in flight, at most
//!   [`DispatcherConfig::per_host`] to one host and [`DispatcherConfig::per_project`] for one
//!   project; the host and project tables hold only hosts and projects in use.
//! - No project's receivers hold another project's callbacks: a delivery takes its project's
//!   slot, then its host's, and only then a global one, so a delivery waiting for a busy host
//!   holds no slot another project needs, and one project never holds more than
//!   `per_project` of the global slots (half of them by default).
//! - Claimed events waiting for a slot are bounded in memory: a project holding
//!   `per_project` events is busy and the claims skip its events
//!   ([`claim_due_events_except`]), which stay due in the store, unleased; so a
//!   project holds at most `per_project + concurrency`, and `4 x concurrency` are held in all.
//!   One project's backlog (one busy host's) never keeps other projects' due events from
//!   being claimed.
//! - Shutdown claims nothing more and waits only for attempts already started.
//!
//! One attempt (spec "Events", "Request" and "Delivery and retries"): a fresh timestamp and
//! signature over the frozen body bytes, a `POST` to the stored destination through the
//! address-checking client of [`crate::resolver`], one deadline over connect, headers and body,
//! at most [`RESPONSE_READ_LIMIT`] bytes of the response read, redirects never followed, any
//! `2xx` a success.
//!
//! [`claim_due_events_except`]: payments_core::store::OutboxStore::claim_due_events_except

use std::collections::HashMap;
use std::fmt;
use std::future::Future;
use std::io;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use payments_core::callback::{
    check_ip, CallbackHost, CallbackSecrets, CallbackUrl, CallbackUrlError, ATTEMPT_TIMEOUT,
    RESPONSE_READ_LIMIT,
};
use payments_core::event::{
    response_excerpt, DeliveryAttempt, DeliveryErrorKind as Kind, OutboxEvent, RESPONSE_EXCERPT_MAX,
};
use payments_core::service::PaymentService;
use payments_core::store::{AttemptRecorded, ClaimedEvent, Store};
use payments_core::{Clock, ProjectId, Timestamp};
use rustls::pki_types::pem::PemObject as _;
use rustls::pki_types::CertificateDer;
use tokio::sync::{watch, Notify, Semaphore};
use tokio::task::JoinSet;

use crate::metrics::Metrics;
use crate::resolver::{
    callback_client, ClientBuildError, ClientSettings, HostLookup, ResolveError, SystemLookup,
};

/// Settings of the dispatcher's I/O. What is sent, to which destinations, and when it is
/// retried are the service's settings ([`ServiceConfig::callback_policy`] and
/// [`ServiceConfig::retry`]), given once there.
///
/// [`ServiceConfig::callback_policy`]: payments_core::service::ServiceConfig::callback_policy
/// [`ServiceConfig::retry`]: payments_core::service::ServiceConfig::retry
#[derive(Debug, Clone)]
pub struct DispatcherConfig {
    /// Attempts in flight at once, in all.
    pub concurrency: usize,
    /// Attempts in flight at once to one destination host.
    pub per_host: usize,
    /// Attempts in flight at once for one project, whatever its hosts: keep it below
    /// `concurrency`, so that the rest of the slots stay free for other projects' callbacks
    /// however slow one project's receivers are.
    pub per_project: usize,
    /// The one deadline of an attempt: connect, TLS, request, response headers and body read.
    pub attempt_timeout: Duration,
    /// The most response body bytes read.
    pub read_limit: usize,
    /// How often the store is asked for due events when nobody signals a new one.
    pub poll_interval: Duration,
    /// How long a claimed event stays invisible to other claims; must exceed
    /// `attempt_timeout`, as an attempt still running when it ends may be made twice.
    pub lease: Duration,
    /// CA certificates trusted besides the public web roots (`callback_ca_file`).
    pub extra_roots: Vec<CertificateDer<'static>>,
    /// How destination names are looked up before their addresses are checked.
    pub lookup: Arc<dyn HostLookup>,
}

impl Default for DispatcherConfig {
    /// The spec's values: attempts at once, after 30 s and 60 s more, 10 s each, 4 KiB read;
    /// public destinations only.
    fn default() -> Self {
        DispatcherConfig {
            concurrency: 256,
            per_host: 64,
            per_project: 128,
            attempt_timeout: ATTEMPT_TIMEOUT,
            read_limit: RESPONSE_READ_LIMIT,
            poll_interval: Duration::from_secs(1),
            lease: Duration::from_secs(60),
            extra_roots: Vec::new(),
            lookup: Arc::new(SystemLookup),
        }
    }
}

impl DispatcherConfig {
    /// The same settings, trusting also the CA certificates in `pem` (a private CA that
    /// merchants' callback endpoints use, for example).
    ///
    /// # Errors
    /// [`DispatcherError::Certificates`] when `pem` holds no certificate or a broken one.
    pub fn trusting_pem(mut self, pem: &[u8]) -> Result<DispatcherConfig, DispatcherError> {
        let roots = pem_roots(pem).map_err(|e| DispatcherError::Certificates(e.to_string()))?;
        self.extra_roots.extend(roots);
        Ok(self)
    }
}

impl DispatcherConfig {
    /// Refuses settings the dispatcher cannot work with: no concurrency at all, or a lease
    /// that does not outlast an attempt.
    pub fn validate(&self) -> Result<(), DispatcherError> {
        if self.concurrency == 0 || self.per_host == 0 || self.per_project == 0 {
            return Err(DispatcherError::Config(
                "concurrency, per_host and per_project must be at least 1".into(),
            ));
        }
        if self.lease <= self.attempt_timeout {
            return Err(DispatcherError::Config(format!(
                "the lease ({:?}) must be longer than the attempt timeout ({:?})",
                self.lease, self.attempt_timeout
            )));
        }
        Ok(())
    }
}

/// The certificates in PEM text; at least one is required.
pub fn pem_roots(pem: &[u8]) -> io::Result<Vec<CertificateDer<'static>>> {
    let roots = CertificateDer::pem_slice_iter(pem)
        .collect::<Result<Vec<_>, _>>()
        .map_err(|e| io::Error::new(io::ErrorKind::InvalidData, e.to_string()))?;
    if roots.is_empty() {
        return Err(io::Error::new(
            io::ErrorKind::InvalidData,
            "no CERTIFICATE block found",
        ));
    }
    Ok(roots)
}

/// Why a dispatcher could not be built.
#[non_exhaustive]
#[derive(Debug, thiserror::Error)]
pub enum DispatcherError {
    /// A setting is out of range.
    #[error("callback dispatcher: {0}")]
    Config(String),
    /// The extra CA certificates ([`DispatcherConfig::trusting_pem`]) could not be read.
    #[error("callback CA certificates: {0}")]
    Certificates(String),
    /// The extra CA file could not be used.
    #[error("callback_ca_file {path}: {reason}")]
    CaFile {
        /// The file.
        path: String,
        /// What is wrong with it.
        reason: String,
    },
    /// The HTTP client could not be built.
    #[error(transparent)]
    Client(#[from] ClientBuildError),
}

/// The callback dispatcher. Build it once; [`Dispatcher::run`] it as a background task, or step
/// it with [`Dispatcher::deliver_due_once`].
pub struct Dispatcher {
    inner: Arc<Inner>,
    notify: Arc<Notify>,
}

struct Inner {
    service: PaymentService,
    store: Arc<dyn Store>,
    clock: Arc<dyn Clock>,
    client: reqwest::Client,
    config: DispatcherConfig,
    metrics: Arc<Metrics>,
    global: Arc<Semaphore>,
    hosts: Bounds<String>,
    projects: Bounds<ProjectId>,
    /// The claimed events this dispatcher holds, waiting or in flight.
    held: Arc<Mutex<Held>>,
    stopping: watch::Sender<bool>,
    /// The last reading of the dispatch hold: when, and the reason if held.
    hold: Mutex<Option<(Instant, Option<String>)>>,
}

/// How long a reading of the dispatch hold is trusted before the store is asked again.
const HOLD_RECHECK: Duration = Duration::from_secs(1);

impl fmt::Debug for Dispatcher {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Dispatcher")
            .field("config", &self.inner.config)
            .finish_non_exhaustive()
    }
}

impl Dispatcher {
    /// A dispatcher over the service's store and clock; secrets come from
    /// [`Callbacks::signing_secrets`](payments_core::service::Callbacks::signing_secrets) (which creates an unrevealed one at the first
    /// delivery of a project without any).
    pub fn new(
        service: PaymentService,
        config: DispatcherConfig,
        metrics: Arc<Metrics>,
    ) -> Result<Dispatcher, DispatcherError> {
        config.validate()?;
        let client = callback_client(&ClientSettings {
            policy: service.config().callback_policy,
            lookup: config.lookup.clone(),
            extra_roots: config.extra_roots.clone(),
            connect_timeout: config.attempt_timeout,
        })?;
        let ports = service.ports();
        let (store, clock) = (ports.store.clone(), ports.clock.clone());
        let (stopping, _) = watch::channel(false);
        Ok(Dispatcher {
            inner: Arc::new(Inner {
                global: Arc::new(Semaphore::new(config.concurrency)),
                hosts: Bounds::new(config.per_host),
                projects: Bounds::new(config.per_project),
                held: Arc::new(Mutex::new(Held::new(&config))),
                service,
                store,
                clock,
                client,
                config,
                metrics,
                stopping,
                hold: Mutex::new(None),
            }),
            notify: Arc::new(Notify::new()),
        })
    }

    /// The dispatcher of a server's state: over its service, woken whenever the service
    /// commits an event (see [`AppState::new`](crate::AppState::new)), counting into its
    /// metrics.
    pub fn for_state(
        state: &crate::AppState,
        config: DispatcherConfig,
    ) -> Result<Dispatcher, DispatcherError> {
        Ok(
            Dispatcher::new(state.service.clone(), config, state.metrics.clone())?
                .with_notifier(state.outbox_notify.clone()),
        )
    }

    /// Uses `notify` as the wake-up call (shared with the API layer's state).
    pub fn with_notifier(mut self, notify: Arc<Notify>) -> Self {
        self.notify = notify;
        self
    }

    /// The dispatcher's wake-up call: the API layer calls `notify_one()` after committing an
    /// event, so it is attempted at once instead of at the next poll.
    pub fn notifier(&self) -> Arc<Notify> {
        self.notify.clone()
    }

    /// Delivers until `shutdown` completes. Then it claims nothing more, lets the attempts in
    /// flight finish (each is bounded by the attempt timeout) and returns; claimed events that
    /// had not started stay leased and are attempted after the lease by the next run.
    pub async fn run(self, shutdown: impl Future<Output = ()>) {
        tokio::pin!(shutdown);
        let inner = &self.inner;
        let freed = inner.held_table().freed.clone();
        let mut tasks = JoinSet::new();
        loop {
            // Claims never wait for a slot: the claimed events wait on their own tasks, and
            // the claims skip the projects that hold as many as they may have in flight
            // (`Held`), so one project's backlog stays in the store and the claims reach the
            // events due behind it.
            let room = inner.held_limit().saturating_sub(tasks.len());
            let limit = room.min(inner.config.concurrency);
            let mut full_batch = false;
            if limit > 0 {
                match inner.claim_and_spawn(limit, &mut tasks).await {
                    Ok(claimed) => full_batch = claimed == limit,
                    Err(e) => tracing::warn!(error = %e, "callback outbox: claim failed"),
                }
            }
            tokio::select! {
                biased;
                () = &mut shutdown => break,
                // More may be due: claim again at once (each claim leases what it took, so
                // this ends with the due events).
                () = std::future::ready(()), if full_batch => {}
                // Holding all it may: look again as soon as a delivery ends.
                Some(done) = tasks.join_next(), if limit == 0 && !tasks.is_empty() => {
                    log_task_end(done);
                }
                // A busy project's delivery ended: its events may be claimed again.
                () = freed.notified() => {}
                () = self.notify.notified() => {}
                () = tokio::time::sleep(inner.config.poll_interval) => {}
            }
            while let Some(done) = tasks.try_join_next() {
                log_task_end(done);
            }
        }
        inner.stopping.send_replace(true);
        while let Some(done) = tasks.join_next().await {
            log_task_end(done);
        }
    }

    /// Claims the events due now (at most `concurrency`), attempts each once, waits for all
    /// and returns how many were claimed. A deterministic step for tests and tools.
    pub async fn deliver_due_once(&self) -> usize {
        let mut tasks = JoinSet::new();
        let claimed = match self
            .inner
            .claim_and_spawn(self.inner.config.concurrency, &mut tasks)
            .await
        {
            Ok(n) => n,
            Err(e) => {
                tracing::warn!(error = %e, "callback outbox: claim failed");
                0
            }
        };
        while let Some(done) = tasks.join_next().await {
            log_task_end(done);
        }
        claimed
    }
}

/// The host an event's deliveries are bounded by: the destination's name (lower-case) or
/// address.
fn host_key(event: &OutboxEvent) -> String {
    match event.destination.host() {
        CallbackHost::Domain(name) => name.to_ascii_lowercase(),
        CallbackHost::Ip(ip) => ip.to_string(),
        _ => event.destination.as_str().to_owned(),
    }
}

/// A concurrency bound per key (host, project), made when a delivery first needs it and
/// forgotten when the last one lets it go, so the table holds only the keys in use.
struct Bounds<K> {
    per_key: usize,
    table: Mutex<HashMap<K, Arc<Semaphore>>>,
}

impl<K: std::hash::Hash + Eq + Clone> Bounds<K> {
    fn new(per_key: usize) -> Self {
        Bounds {
            per_key,
            table: Mutex::new(HashMap::new()),
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<K, Arc<Semaphore>>> {
        self.table
            .lock()
            .expect("a bound table lock is never held across a panic")
    }

    /// The bound of `key`, shared by its deliveries.
    fn get(&self, key: &K) -> Arc<Semaphore> {
        self.lock()
            .entry(key.clone())
            .or_insert_with(|| Arc::new(Semaphore::new(self.per_key)))
            .clone()
    }

    /// Forgets `key`'s bound once no delivery holds it, so the table does not grow forever.
    fn release(&self, key: &K, semaphore: Arc<Semaphore>) {
        let mut table = self.lock();
        // Clones are only taken under this lock: two references are the table's and ours.
        if Arc::strong_count(&semaphore) == 2 {
            table.remove(key);
        }
    }
}

/// The claimed events a dispatcher holds (waiting for a slot or in flight), counted per
/// project. A project holding `per_project` (as many as it may have in flight) is *busy*: the
/// claims skip its events ([`OutboxStore::claim_due_events_except`]), which stay due in the
/// store, unleased, so one project's backlog never hides the events due behind it. A claim
/// made while a project was not busy adds at most `concurrency` of its events, so a project
/// holds at most `per_project + concurrency`; with a store that cannot skip, an event beyond
/// that is left to its lease. The run loop claims no more once `4 x concurrency` are held in
/// all. So the events waiting in memory stay bounded whatever the store has due.
///
/// [`OutboxStore::claim_due_events_except`]: payments_core::store::OutboxStore::claim_due_events_except
#[derive(Debug)]
struct Held {
    projects: HashMap<ProjectId, usize>,
    /// `per_project`: from this many a project is busy.
    busy_at: usize,
    /// `per_project + concurrency`: the most one project holds.
    cap: usize,
    /// Told when a busy project stops being busy: its events may be claimed again.
    freed: Arc<Notify>,
}

impl Held {
    fn new(config: &DispatcherConfig) -> Held {
        Held {
            projects: HashMap::new(),
            busy_at: config.per_project.max(1),
            cap: config.per_project.saturating_add(config.concurrency),
            freed: Arc::new(Notify::new()),
        }
    }

    /// The busy projects, whose events the next claim skips.
    fn busy(&self) -> Vec<ProjectId> {
        self.projects
            .iter()
            .filter(|(_, n)| **n >= self.busy_at)
            .map(|(p, _)| *p)
            .collect()
    }

    /// A place for one more event of `project`, or `None` when it holds all it may.
    fn admit(held: &Arc<Mutex<Held>>, project: ProjectId) -> Option<Place> {
        let mut table = held
            .lock()
            .expect("the held table is never locked across a panic");
        let cap = table.cap;
        let n = table.projects.entry(project).or_insert(0);
        if *n >= cap {
            return None;
        }
        *n += 1;
        Some(Place {
            held: held.clone(),
            project,
        })
    }
}

/// One event's place in [`Held`], given back when its delivery task ends (also by a panic).
struct Place {
    held: Arc<Mutex<Held>>,
    project: ProjectId,
}

impl Drop for Place {
    fn drop(&mut self) {
        let mut table = self
            .held
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        let busy_at = table.busy_at;
        let Some(n) = table.projects.get_mut(&self.project) else {
            return;
        };
        *n -= 1;
        let left = *n;
        if left == 0 {
            table.projects.remove(&self.project);
        }
        if left + 1 == busy_at {
            table.freed.notify_one();
        }
    }
}

fn log_task_end(done: Result<(), tokio::task::JoinError>) {
    if let Err(e) = done {
        // The event stays leased and is attempted again once the lease ends.
        tracing::error!(error = %e, "callback delivery task ended abnormally");
    }
}

/// What one exchange with the receiver came to.
#[derive(Debug, Default)]
struct Outcome {
    http_status: Option<u16>,
    error: Option<String>,
    /// The start of the response body, when a response arrived.
    excerpt: Option<String>,
}

impl Outcome {
    fn failed(error: String) -> Outcome {
        Outcome {
            http_status: None,
            error: Some(error),
            excerpt: None,
        }
    }
}

impl Inner {
    /// Whether dispatch is held ([`Callbacks::callback_hold`](payments_core::service::Callbacks::callback_hold)), read at most once per
    /// [`HOLD_RECHECK`]; a change is logged once. A store that cannot say is taken as not
    /// held (claims would fail the same way and are logged).
    async fn held(&self) -> bool {
        {
            let last = self
                .hold
                .lock()
                .expect("the hold lock is never held across a panic");
            if let Some((at, reason)) = last.as_ref() {
                if at.elapsed() < HOLD_RECHECK {
                    return reason.is_some();
                }
            }
        }
        let reason = match self.service.callbacks().callback_hold().await {
            Ok(reason) => reason,
            Err(e) => {
                tracing::warn!(error = %e, "callback dispatch: cannot read the hold");
                None
            }
        };
        let mut last = self
            .hold
            .lock()
            .expect("the hold lock is never held across a panic");
        let before = last.as_ref().map(|(_, r)| r.clone());
        match (&before, &reason) {
            (Some(Some(_)), Some(_)) | (Some(None) | None, None) => {}
            (_, Some(why)) => tracing::warn!(
                reason = why.as_str(),
                "callback dispatch is held: events are queued, not sent, until \
                 `payments-server callbacks release` (docs/operations.md)"
            ),
            (Some(Some(_)), None) => tracing::info!("callback dispatch released"),
        }
        let held = reason.is_some();
        *last = Some((Instant::now(), reason));
        held
    }

    /// The most claimed events held at once, waiting or in flight ([`Held`]).
    fn held_limit(&self) -> usize {
        self.config.concurrency.saturating_mul(4)
    }

    fn held_table(&self) -> std::sync::MutexGuard<'_, Held> {
        self.held
            .lock()
            .expect("the held table is never locked across a panic")
    }

    /// Claims up to `limit` due events of the projects that are not busy ([`Held`]) and
    /// spawns one delivery task for each; returns how many were claimed. An event [`Held`]
    /// does not admit (only with a store that cannot skip busy projects) stays leased and is
    /// claimed again after its lease. Claims nothing while dispatch is held.
    async fn claim_and_spawn(
        self: &Arc<Self>,
        limit: usize,
        tasks: &mut JoinSet<()>,
    ) -> Result<usize, payments_core::store::StoreError> {
        if self.held().await {
            return Ok(0);
        }
        let now = self.clock.now();
        let busy = self.held_table().busy();
        let events = self
            .store
            .claim_due_events_except(now, limit, self.config.lease, &busy)
            .await?;
        let claimed = events.len();
        let mut passed_over = 0usize;
        for event in events {
            let host = host_key(&event.event);
            let Some(place) = Held::admit(&self.held, event.event.event.project_id) else {
                passed_over += 1;
                continue;
            };
            let inner = self.clone();
            tasks.spawn(async move { inner.deliver(event, host, place).await });
        }
        if passed_over > 0 {
            tracing::info!(
                passed_over,
                lease_secs = self.config.lease.as_secs(),
                "callback: claimed events left to their lease: their project holds as many \
                 deliveries as allowed (a store that cannot skip busy projects)"
            );
        }
        debug_assert!(tasks.len() <= self.held_limit() + limit);
        Ok(claimed)
    }

    /// One attempt of a claimed event, within its project's, its host's and the global bound,
    /// and its record.
    async fn deliver(self: Arc<Self>, claimed: ClaimedEvent, host: String, _place: Place) {
        let event = &claimed.event;
        let project = event.event.project_id;
        let project_bound = self.projects.get(&project);
        let host_bound = self.hosts.get(&host);
        let mut stopping = self.stopping.subscribe();
        // An attempt starts only while its lease still covers a whole attempt; otherwise the
        // event could be claimed again while this one runs. Giving up leaves it to the next
        // claim after the lease.
        let wait_limit = self
            .config
            .lease
            .saturating_sub(self.config.attempt_timeout);
        // The project's slot first (only its own deliveries want it), then the host's, and a
        // global slot last: waiting for a busy host holds nothing another project needs.
        let slots = async {
            let p = project_bound.clone().acquire_owned().await;
            let h = host_bound.clone().acquire_owned().await;
            let g = self.global.clone().acquire_owned().await;
            (p, h, g)
        };
        let permits = tokio::select! {
            permits = tokio::time::timeout(wait_limit, slots) => {
                if permits.is_err() {
                    tracing::warn!(
                        event_id = %event.event.event_id,
                        %host,
                        "callback: no slot for the project or host for the whole lease; \
                         retried later"
                    );
                }
                permits.ok()
            }
            // Shutting down before the attempt started: the lease brings it back later.
            _ = stopping.wait_for(|stop| *stop) => None,
        };
        if let Some((p, h, g)) = permits {
            let _slots = (
                p.expect("project semaphores are never closed"),
                h.expect("host semaphores are never closed"),
                g.expect("the global semaphore is never closed"),
            );
            self.attempt_and_record(&claimed).await;
        }
        self.projects.release(&project, project_bound);
        self.hosts.release(&host, host_bound);
    }

    /// One attempt of a claimed event: its signing secrets, the attempt, its metrics and log
    /// lines, and its record (which schedules the next attempt).
    async fn attempt_and_record(&self, claimed: &ClaimedEvent) {
        let event = &claimed.event;
        let event_id = event.event.event_id;
        let secrets = match self
            .service
            .callbacks()
            .signing_secrets(event.event.project_id)
            .await
        {
            Ok(secrets) => secrets,
            Err(e) => {
                // Nothing was sent: not an attempt. The lease brings the event back later.
                tracing::error!(%event_id, error = %e, "callback: no signing secret");
                return;
            }
        };
        let (attempt, span) = self.timed_attempt(event, &secrets).await;
        self.metrics.observe_delivery(if attempt.success {
            "success"
        } else {
            "failure"
        });
        let reason = failure_reason(&attempt);
        if let Some(reason) = reason {
            self.metrics.observe_delivery_failure(reason);
        }
        crate::trace::record_result(&span, reason.unwrap_or("delivered"));
        let next_attempt_at = self.service.callbacks().next_attempt_at(event, &attempt);
        self.log_attempt(event, &attempt, reason, next_attempt_at);
        self.record(claimed, &attempt).await;
    }

    /// Sends attempt number `attempts + 1` of `event` in its trace span and times it.
    async fn timed_attempt(
        &self,
        event: &OutboxEvent,
        secrets: &CallbackSecrets,
    ) -> (DeliveryAttempt, tracing::Span) {
        let number = event.attempts.saturating_add(1);
        let started_at = self.clock.now();
        let began = Instant::now();
        let span = crate::trace::callback_span(
            &event.event.event_id.to_string(),
            &event.event.payment_id.to_string(),
            number,
        );
        let outcome =
            tracing::Instrument::instrument(self.attempt(event, secrets, started_at), span.clone())
                .await;
        let duration_ms = u64::try_from(began.elapsed().as_millis()).unwrap_or(u64::MAX);
        let success = outcome.error.is_none();
        let attempt = DeliveryAttempt {
            attempt: number,
            started_at,
            duration_ms,
            http_status: outcome.http_status,
            error: outcome.error,
            success,
            response_excerpt: outcome.excerpt,
        };
        (attempt, span)
    }

    /// The attempt's log line, and when it was the last one, the event's failure (a metric
    /// and a warning).
    fn log_attempt(
        &self,
        event: &OutboxEvent,
        attempt: &DeliveryAttempt,
        reason: Option<&'static str>,
        next_attempt_at: Option<Timestamp>,
    ) {
        let event_id = event.event.event_id;
        let host = payments_core::event::destination_host(&event.destination);
        tracing::info!(
            %event_id,
            payment_id = %event.event.payment_id,
            host = host.as_str(),
            attempt = attempt.attempt,
            http_status = attempt.http_status.map_or(0, u64::from),
            reason = reason.unwrap_or("delivered"),
            error = attempt.error.as_deref().unwrap_or(""),
            duration_ms = attempt.duration_ms,
            next_attempt_at = next_attempt_at.map(|t| t.to_rfc3339()).as_deref().unwrap_or("-"),
            "callback attempt"
        );
        if !attempt.success && next_attempt_at.is_none() {
            // The event is failed: nothing more is sent unless an operator resends it.
            self.metrics.observe_event_failed();
            tracing::warn!(
                %event_id,
                payment_id = %event.event.payment_id,
                project_id = %event.event.project_id,
                host = host.as_str(),
                attempts = attempt.attempt,
                http_status = attempt.http_status.map_or(0, u64::from),
                last_error = attempt.error.as_deref().unwrap_or(""),
                "callback failed: every attempt used; listed by `payments-server callbacks failed`"
            );
        }
    }

    /// Records the attempt; a record that fails leaves the event to come back with its lease.
    async fn record(&self, claimed: &ClaimedEvent, attempt: &DeliveryAttempt) {
        let event_id = claimed.event.event.event_id;
        match self
            .service
            .callbacks()
            .record_attempt(claimed, attempt)
            .await
        {
            Ok(AttemptRecorded::Stale) => {
                // The lease ran out during the attempt and another dispatcher holds the event
                // now: its schedule stands, this attempt is only on record.
                tracing::warn!(
                    %event_id,
                    lease = claimed.lease.get(),
                    "callback attempt outlived its lease; recorded without changing the schedule"
                );
            }
            Ok(_) => {}
            Err(e) => {
                // The lease brings the event back and it is attempted again: at least once.
                tracing::error!(%event_id, error = %e, "callback attempt could not be recorded");
            }
        }
    }

    /// Sends one attempt and judges the answer.
    async fn attempt(
        &self,
        event: &OutboxEvent,
        secrets: &CallbackSecrets,
        now: Timestamp,
    ) -> Outcome {
        let policy = self.service.config().callback_policy;
        // A URL stored under the development setting is refused once the setting is off.
        let url = match CallbackUrl::parse(event.destination.as_str(), policy) {
            Ok(url) => url,
            Err(CallbackUrlError::ForbiddenAddress(f)) => {
                return Outcome::failed(Kind::RefusedAddress.record(&f.to_string()))
            }
            Err(e) => return Outcome::failed(Kind::RefusedDestination.record(&e.to_string())),
        };
        // The connector does not resolve IP literals, so they are checked here.
        if let CallbackHost::Ip(ip) = url.host() {
            if let Err(f) = check_ip(ip.to_canonical(), policy) {
                return Outcome::failed(Kind::RefusedAddress.record(&f.to_string()));
            }
        }
        let body = &event.event.body;
        let signature = secrets.sign_attempt(now, body);
        let mut request = self.client.post(url.as_str());
        for (name, value) in signature.headers(&event.event.event_id.to_string()) {
            request = request.header(name, value);
        }
        let request = request.body(body.clone());
        let mut http_status = None;
        let mut excerpt = None;
        let result = tokio::time::timeout(
            self.config.attempt_timeout,
            exchange(
                request,
                self.config.read_limit,
                &mut http_status,
                &mut excerpt,
            ),
        )
        .await;
        let error = match result {
            Ok(Ok(())) => None,
            Ok(Err(e)) => Some(e.to_string()),
            Err(_) => Some(format!(
                "{} after {:?}",
                Kind::Timeout.prefix(),
                self.config.attempt_timeout
            )),
        };
        Outcome {
            http_status,
            error,
            excerpt,
        }
    }
}

/// Why an attempt failed, as a metrics label from a small fixed set; `None` for a success
/// ([`DeliveryAttempt::failure_reason`], which reads the texts this module records).
pub fn failure_reason(attempt: &DeliveryAttempt) -> Option<&'static str> {
    attempt.failure_reason()
}

/// Sends the request, notes the status and reads at most `read_limit` bytes of the body, whose
/// start is kept as `excerpt`; the rest is never read (dropping the response closes the
/// connection).
async fn exchange(
    request: reqwest::RequestBuilder,
    read_limit: usize,
    http_status: &mut Option<u16>,
    excerpt: &mut Option<String>,
) -> Result<(), ExchangeError> {
    let mut response = request.send().await.map_err(ExchangeError::Send)?;
    let status = response.status();
    *http_status = Some(status.as_u16());
    let mut read = 0usize;
    let mut start: Vec<u8> = Vec::new();
    while read < read_limit {
        match response.chunk().await {
            Ok(Some(chunk)) => {
                read = read.saturating_add(chunk.len());
                let room = RESPONSE_EXCERPT_MAX.saturating_sub(start.len());
                start.extend_from_slice(&chunk[..chunk.len().min(room)]);
                *excerpt = Some(response_excerpt(&start));
            }
            Ok(None) => break,
            Err(e) => return Err(ExchangeError::ResponseBroken(e)),
        }
    }
    *excerpt = Some(response_excerpt(&start));
    drop(response);
    if status.is_success() {
        Ok(())
    } else if status.is_redirection() {
        Err(ExchangeError::Redirect(status))
    } else {
        Err(ExchangeError::Status(status))
    }
}

/// Why an exchange got no successful answer; its text is what the attempt records.
#[derive(Debug, thiserror::Error)]
enum ExchangeError {
    /// No response: the kind told from the error's causes.
    #[error("{}", describe_send_error(.0))]
    Send(#[source] reqwest::Error),
    /// The body broke off.
    #[error("{}", Kind::ResponseBroken.record(&error_chain(.0)))]
    ResponseBroken(#[source] reqwest::Error),
    /// A redirect, which is never followed.
    #[error("{} ({}) not followed", Kind::Redirect.prefix(), .0.as_u16())]
    Redirect(reqwest::StatusCode),
    /// Any other status but a success.
    #[error("{} {}", Kind::HttpStatus.prefix(), .0.as_u16())]
    Status(reqwest::StatusCode),
}

/// The recorded text of a request that got no response: its kind, told from the error's
/// causes by their types (the resolver's, the socket's, rustls'), then the causes' messages.
fn describe_send_error(e: &reqwest::Error) -> String {
    match send_error_kind(e) {
        // The policy's own sentence names the address and the name it was resolved from.
        (Kind::RefusedAddress, Some(policy)) => Kind::RefusedAddress.record(&policy),
        (kind, _) => kind.record(&error_chain(e)),
    }
}

/// The kind of a request's failure before any answer (with the address policy's refusal,
/// when that was it).
fn send_error_kind(e: &reqwest::Error) -> (Kind, Option<String>) {
    let mut source: Option<&(dyn std::error::Error + 'static)> = Some(e);
    while let Some(err) = source {
        if let Some(r) = err.downcast_ref::<ResolveError>() {
            return match r {
                ResolveError::Forbidden(f) => (Kind::RefusedAddress, Some(f.to_string())),
                ResolveError::Lookup(_) | ResolveError::NoAddress(_) => (Kind::DnsFailure, None),
            };
        }
        if err.is::<rustls::Error>() {
            return (Kind::TlsError, None);
        }
        if let Some(kind) = err.downcast_ref::<io::Error>().and_then(io_error_kind) {
            return (kind, None);
        }
        source = err.source();
    }
    let kind = if e.is_timeout() {
        Kind::Timeout
    } else if e.is_connect() {
        Kind::ConnectFailed
    } else {
        Kind::RequestFailed
    };
    (kind, None)
}

/// The kind an I/O error (the connector's) stands for, looking into the errors it wraps
/// (`io::Error::source` skips the wrapped error itself): a refused connection, or rustls'
/// error of a failed handshake.
fn io_error_kind(mut io: &io::Error) -> Option<Kind> {
    loop {
        if io.kind() == io::ErrorKind::ConnectionRefused {
            return Some(Kind::ConnectionRefused);
        }
        let inner = io.get_ref()?;
        if inner.is::<rustls::Error>() {
            return Some(Kind::TlsError);
        }
        io = inner.downcast_ref::<io::Error>()?;
    }
}

/// The causes of `e`, innermost last, without the outer "error sending request" line (which
/// repeats the URL); repeated messages are dropped.
fn error_chain(e: &(dyn std::error::Error + 'static)) -> String {
    let mut parts: Vec<String> = Vec::new();
    let mut source = e.source();
    while let Some(err) = source {
        let text = err.to_string();
        if !parts.iter().any(|p| p == &text) {
            parts.push(text);
        }
        source = err.source();
    }
    if parts.is_empty() {
        e.to_string()
    } else {
        parts.join(": ")
    }
}

#[cfg(test)]
mod tests;
