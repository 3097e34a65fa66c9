//! The running server: builds the service over SQLite, binds its listeners (merchant,
//! operator, the web cabinet and, with `upstream_listen`, provider notifications; port 0
//! works), runs the APIs, the cabinet, the callback dispatcher (unless `callback_dispatch` is
//! off) and the lifecycle sweeper, and shuts down gracefully.

use payments_http::batch::SignatureBatcher;
use std::future::Future;
use std::net::{SocketAddr, TcpListener};
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use axum_server::accept::DefaultAcceptor;
use axum_server::tls_rustls::RustlsConfig;
use axum_server::Handle;
use payments_cabinet::store::CabinetStore;
#[cfg(feature = "cabinet")]
use payments_cabinet::{Cabinet, CabinetConfig, CabinetState};
use payments_core::auth::Environment;
use payments_core::bank::BankCatalog;
use payments_core::callback::AddressPolicy;
use payments_core::provider::{RateSource, RequisiteProvider};
use payments_core::ratelimit::RateLimiter;
use payments_core::sealing::SealingKeys;
use payments_core::service::{AuthConfig, PaymentService, Ports, ScanBudget, ServiceConfig};
use payments_core::settings::Setting;
use payments_core::store::Store;
use payments_core::{Clock, RandomSource};
use payments_providers::sandbox::{FixedRates, SandboxProvider};
use payments_providers::upstream::HttpRates;
#[cfg(feature = "postgres")]
use payments_store_postgres::{PgOptions, PgStore};
use payments_store_sqlite::{SqliteOptions, SqliteStore, Synchronous};
use tokio::sync::watch;

use crate::config::{Durability, ProviderKind, RateSourceKind, Settings};
use crate::listener::{CappedAcceptor, ConnectionLimits};
use payments_http::dispatcher::{Dispatcher, DispatcherConfig};
use payments_http::resolver::HostLookup;
use payments_http::state::AppState;
use payments_http::system::{OsRandom, SystemClock};

/// Why the server (or an operator command's service) could not start. The text is what the
/// operator reads; the cause is the [source](std::error::Error::source).
#[non_exhaustive]
#[derive(Debug, thiserror::Error)]
pub enum StartError {
    /// The settings' upstream adapters could not be built.
    #[error(transparent)]
    Upstream(#[from] crate::upstream::SetupError),
    /// `environment = production` with a bundled port (sandbox provider, fixed rates).
    #[error(
        "environment = production needs {} of its own: the bundled sandbox provider issues \
         fake requisites and the fixed rates are not market rates. Connect the upstream \
         (provider = \"http\", rate_source = \"http\"; docs/providers.md), set environment to \
         sandbox (--environment sandbox, PAYMENTS_ENVIRONMENT=sandbox) to try the service, or \
         embed it with real ports (Application::builder(settings).provider(..).rates(..))",
        missing.join(" and ")
    )]
    BundledPortsInProduction {
        /// What is missing: "a requisite provider", "an exchange-rate source".
        missing: Vec<&'static str>,
    },
    /// The data dir, its lock or a secrets key file.
    #[error(transparent)]
    DataDir(#[from] crate::data_dir::DataDirError),
    /// `store.database_url` in a build without PostgreSQL.
    #[error("{NO_POSTGRES}")]
    NoPostgres,
    /// The PostgreSQL database could not be opened or migrated.
    #[cfg(feature = "postgres")]
    #[error("database_url: {0}")]
    Postgres(#[source] payments_store_postgres::OpenError),
    /// A command found no SQLite database in the data dir (only `serve` creates one).
    #[error(
        "no database at {} (is --data-dir right? `payments-server serve` creates it)",
        .0.display()
    )]
    NoDatabase(PathBuf),
    /// The SQLite database could not be opened, read or migrated.
    #[error("{}: {source}", path.display())]
    Sqlite {
        /// The database file.
        path: PathBuf,
        /// Why.
        #[source]
        source: payments_store_sqlite::OpenError,
    },
    /// The bank catalog file could not be read.
    #[error("bank catalog: {0}")]
    BankCatalogFile(#[source] crate::files::FileError),
    /// The bank catalog file is not a catalog.
    #[error("bank catalog {}: {source}", path.display())]
    BankCatalog {
        /// The file.
        path: PathBuf,
        /// What is wrong with it.
        #[source]
        source: payments_core::bank::CatalogError,
    },
    /// The store failed while the start read it.
    #[error(transparent)]
    Store(#[from] payments_core::store::StoreError),
    /// The secrets key is missing while the database holds secrets only it opens.
    #[error(
        "no secrets key at {}, but the database holds {sealed} sealed secret(s) (callback \
         secrets, TOTP keys, payment requisites) that only the key that sealed them opens: \
         restore that key file from its backup, or point secrets.key_file at it \
         (docs/operations.md, callback secrets at rest)",
        key.display()
    )]
    SealedWithoutKey {
        /// The configured key file.
        key: PathBuf,
        /// How many sealed secrets the database holds.
        sealed: usize,
    },
    /// The secrets key is missing and this command may not create it.
    #[error(
        "no secrets key at {}: `payments-server serve` creates it at its first start; pass \
         --create-key to create it now, or point secrets.key_file at the existing key",
        .0.display()
    )]
    NoKey(PathBuf),
    /// The key file is not the database's: another node sealed the database's values with its
    /// own key (each node created one), or the file was replaced.
    #[error(
        "{mismatch}: the secrets key file {} is not this database's. Copy the key file of a node \
         that serves this database to {} on this node (every node needs the same file; during a \
         key rotation the old key goes in secrets.previous_key_files) and start again \
         (docs/operations.md, several nodes)",
        key.display(),
        key.display()
    )]
    KeyMismatch {
        /// The configured key file.
        key: PathBuf,
        /// The ids of the two keys.
        mismatch: payments_core::sealing::KeyMismatch,
    },
    /// The database belongs to the other environment.
    #[error("{0} (pass --environment to choose)")]
    Environment(#[source] payments_core::service::AdminError),
    /// A listener could not be bound.
    #[error("cannot listen on {addr}: {source}")]
    Listen {
        /// The address.
        addr: SocketAddr,
        /// Why.
        #[source]
        source: std::io::Error,
    },
    /// A bound listener could not be made non-blocking.
    #[error("{0}")]
    Nonblocking(#[source] std::io::Error),
    /// The TLS certificate or key file could not be read.
    #[error("TLS: {0}")]
    TlsFile(#[source] crate::files::FileError),
    /// The TLS certificate and key do not make a configuration.
    #[error("TLS certificate or key: {0}")]
    Tls(#[source] std::io::Error),
    /// The callback dispatcher's settings.
    #[error("callback dispatcher: {0}")]
    Dispatcher(#[source] payments_http::dispatcher::DispatcherError),
    /// `testing.planted_bug` names no planted bug.
    #[cfg(feature = "planted-bugs")]
    #[error("testing.planted_bug: {0}")]
    PlantedBug(#[source] payments_core::planted::UnknownBug),
    /// Another planted bug is on in this process already.
    #[cfg(feature = "planted-bugs")]
    #[error("testing.planted_bug: {0}")]
    PlantedBugTwice(#[source] payments_core::planted::AlreadyActive),
    /// The sandbox's first-start bootstrap failed.
    #[error("sandbox bootstrap: {}", .0.message)]
    Bootstrap(#[source] payments_core::ApiError),
}

/// A built, bound server, not yet serving: both listeners, the callback dispatcher, the
/// lifecycle sweeper, TLS, graceful shutdown and (in the sandbox) the first-start bootstrap.
///
/// [`Application::build`] runs it over the bundled ports (SQLite in the data dir, the
/// sandbox requisite provider, the fixed rates of the settings); [`Application::builder`]
/// takes any of them from the caller:
///
/// ```no_run
/// # use std::sync::Arc;
/// # use payments_core::provider::{RequisiteProvider, RateSource};
/// # async fn run(
/// #     provider: Arc<dyn RequisiteProvider>,
/// #     rates: Arc<dyn RateSource>,
/// # ) -> Result<(), Box<dyn std::error::Error>> {
/// use payments_server::config::Settings;
/// use payments_server::server::{shutdown_signal, Application};
///
/// let app = Application::builder(Settings::defaults())
///     .provider(provider)
///     .rates(rates)
///     .build()
///     .await?;
/// app.run_until_stopped(shutdown_signal()).await?;
/// # Ok(()) }
/// ```
#[derive(Debug)]
pub struct Application {
    settings: Settings,
    state: AppState,
    owned_store: Option<OpenedStore>,
    listeners: Listeners,
    tls: Option<RustlsConfig>,
    dispatcher: DispatcherConfig,
    credentials: Option<PathBuf>,
    /// The data dir's lock, held until the server stops.
    lock: Option<crate::data_dir::DataDirLock>,
}

/// The ports of an [`Application`] that the caller gives; each one left out is the bundled
/// default. Made by [`Application::builder`].
#[must_use = "a builder does nothing until `build` is called"]
pub struct ApplicationBuilder {
    settings: Settings,
    store: Option<Arc<dyn Store>>,
    cabinet_store: Option<Arc<dyn CabinetStore>>,
    rate_limiter: Option<Arc<dyn RateLimiter>>,
    provider: Option<Arc<dyn RequisiteProvider>>,
    rates: Option<Arc<dyn RateSource>>,
    clock: Option<Arc<dyn Clock>>,
    rng: Option<Arc<dyn RandomSource>>,
    callback_lookup: Option<Arc<dyn HostLookup>>,
}

impl std::fmt::Debug for ApplicationBuilder {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ApplicationBuilder")
            .field("settings", &self.settings)
            .field("store", &self.store.is_some())
            .field("cabinet_store", &self.cabinet_store.is_some())
            .field("rate_limiter", &self.rate_limiter.is_some())
            .field("provider", &self.provider.is_some())
            .field("rates", &self.rates.is_some())
            .field("clock", &self.clock.is_some())
            .field("rng", &self.rng.is_some())
            .field("callback_lookup", &self.callback_lookup.is_some())
            .finish()
    }
}

impl ApplicationBuilder {
    /// The store (default: SQLite in the settings' data dir, closed at shutdown). A store
    /// given here is the caller's to close; the web cabinet then runs only when its store is
    /// given too ([`cabinet_store`](Self::cabinet_store)).
    pub fn store(mut self, store: Arc<dyn Store>) -> Self {
        self.store = Some(store);
        self
    }

    /// The store of the web cabinet's records (users, sessions, invitations, its audit log),
    /// usually the same database as [`store`](Self::store): both bundled stores implement
    /// [`CabinetStore`]. Without it, a caller-given store runs without the cabinet (the server
    /// logs that the cabinet is off); the default store brings its own.
    pub fn cabinet_store(mut self, store: Arc<dyn CabinetStore>) -> Self {
        self.cabinet_store = Some(store);
        self
    }

    /// The per-project rate limiter (default: in this process, or the database's when the
    /// server opens PostgreSQL itself). Give a shared one with a shared store of your own.
    pub fn rate_limiter(mut self, limiter: Arc<dyn RateLimiter>) -> Self {
        self.rate_limiter = Some(limiter);
        self
    }

    /// The requisite provider (default: the sandbox provider, which issues fake requisites
    /// and is refused in production).
    pub fn provider(mut self, provider: Arc<dyn RequisiteProvider>) -> Self {
        self.provider = Some(provider);
        self
    }

    /// The exchange-rate source (default: the settings' fixed rates, refused in production).
    pub fn rates(mut self, rates: Arc<dyn RateSource>) -> Self {
        self.rates = Some(rates);
        self
    }

    /// The clock (default: the system clock with tokio timers).
    pub fn clock(mut self, clock: Arc<dyn Clock>) -> Self {
        self.clock = Some(clock);
        self
    }

    /// The random source (default: the operating system's CSPRNG).
    pub fn rng(mut self, rng: Arc<dyn RandomSource>) -> Self {
        self.rng = Some(rng);
        self
    }

    /// How the callback client looks up destination names before checking their addresses
    /// (default: the system resolver).
    pub fn callback_lookup(mut self, lookup: Arc<dyn HostLookup>) -> Self {
        self.callback_lookup = Some(lookup);
        self
    }

    /// Opens the store (unless given), builds the service, bootstraps an empty sandbox and
    /// binds the listeners. In production the bundled sandbox provider and fixed rates are
    /// refused: a production server issues real requisites at real rates or does not start.
    ///
    /// The steps, in order: the upstream ports (checked for production), the store with the
    /// data dir's lock, the service over them (which records the environment and checks the
    /// sealing key), the handlers' state, the listeners, TLS, the dispatcher's settings, and
    /// in the sandbox the credentials file.
    pub async fn build(self) -> Result<Application, StartError> {
        let ApplicationBuilder {
            settings,
            store,
            cabinet_store,
            rate_limiter,
            provider,
            rates,
            clock,
            rng,
            callback_lookup,
        } = self;
        #[cfg(feature = "planted-bugs")]
        activate_planted_bug(&settings)?;
        let clock = clock.or_else(|| crate::testing_clock::from_settings(&settings));
        let upstream = UpstreamPorts::connect(&settings, provider, rates, clock.clone()).await?;
        upstream.check_production(&settings)?;
        warn_development_settings(&settings);
        let stores = StoreChoice::open(&settings, store, cabinet_store, rate_limiter).await?;
        let metrics = upstream.metrics(stores.owned.as_ref());
        #[cfg(feature = "otlp")]
        if settings.telemetry.otlp_endpoint.is_some() {
            metrics.count_trace_export_failures(crate::telemetry::traces::export_failures);
        }
        let ports = PortChoices {
            store: stores.store.clone(),
            provider: upstream.provider,
            rates: upstream.rates,
            clock,
            rng,
        };
        let service = service_over(
            &settings,
            ports,
            stores.cabinet.as_deref(),
            stores.owned.as_ref(),
            Setup::Serve,
            Some(metrics.clone()),
        )
        .await?;
        let router = upstream.router;
        let state = app_state(&settings, service, metrics, &stores, router.clone());
        let listeners = Listeners::bind(&settings, &state)?;
        // Named after the bound merchant port (port 0 binds another).
        let node = settings.node_name(
            listeners
                .merchant
                .local_addr()
                .map_or(settings.listen.merchant.port(), |a| a.port()),
        );
        let state = state.with_provider_reports(
            router.map(|r| crate::upstream::provider_reports(&settings, &r, node)),
        );
        let tls = load_tls(&settings).await?;
        let mut dispatcher = settings.dispatcher().map_err(StartError::Dispatcher)?;
        if let Some(lookup) = callback_lookup {
            dispatcher.lookup = lookup;
        }
        let mut app = Application {
            dispatcher,
            settings,
            state,
            owned_store: stores.owned,
            listeners,
            tls,
            credentials: None,
            lock: stores.lock,
        };
        app.state = app
            .state
            .clone()
            .with_cabinet_url(app.cabinet_url().map(Arc::from));
        if app.settings.environment == Environment::Sandbox {
            app.bootstrap_sandbox().await?;
        }
        Ok(app)
    }
}

/// Switches on the planted bug of `testing.planted_bug`, if any, for the rest of the process.
#[cfg(feature = "planted-bugs")]
fn activate_planted_bug(settings: &Settings) -> Result<(), StartError> {
    use payments_core::planted::{activate, Bug};
    let Some(name) = &settings.testing.planted_bug else {
        return Ok(());
    };
    let bug = name.parse::<Bug>().map_err(StartError::PlantedBug)?;
    activate(bug).map_err(StartError::PlantedBugTwice)?;
    tracing::warn!(
        bug = %bug,
        "testing.planted_bug: a planted bug is on (tests only)"
    );
    Ok(())
}

/// The requisite provider and rate source: the caller's, else the settings' upstream
/// adapters (`provider = "http"`, `rate_source = "http"`), else none (the bundled sandbox
/// ones, given later by [`service_over`]).
struct UpstreamPorts {
    provider: Option<Arc<dyn RequisiteProvider>>,
    rates: Option<Arc<dyn RateSource>>,
    /// With `[[upstream.providers]]`, the core's router over them; its health is a metric.
    router: Option<Arc<payments_providers::Router>>,
    /// The live rate source as itself too: its rates' ages are a metric.
    live_rates: Option<Arc<HttpRates>>,
}

impl UpstreamPorts {
    /// Completes the caller's ports with the settings' upstream adapters: real ports, so
    /// production starts with them.
    async fn connect(
        settings: &Settings,
        provider: Option<Arc<dyn RequisiteProvider>>,
        rates: Option<Arc<dyn RateSource>>,
        clock: Option<Arc<dyn Clock>>,
    ) -> Result<UpstreamPorts, StartError> {
        let clock: Arc<dyn Clock> = clock.unwrap_or_else(|| Arc::new(SystemClock));
        let mut router = None;
        let provider = match (provider, settings.upstream.provider) {
            (Some(p), _) => Some(p),
            (None, ProviderKind::Http) if !settings.upstream.providers.is_empty() => {
                let routed = Arc::new(crate::upstream::router(settings, clock.clone())?);
                router = Some(routed.clone());
                Some(routed as Arc<dyn RequisiteProvider>)
            }
            (None, ProviderKind::Http) => Some(Arc::new(crate::upstream::provider(
                settings,
                clock.clone(),
            )?) as Arc<dyn RequisiteProvider>),
            (None, _) => None,
        };
        let mut live_rates = None;
        let rates = match (rates, settings.upstream.rate_source) {
            (Some(r), _) => Some(r),
            (None, RateSourceKind::Http) => {
                let live = Arc::new(crate::upstream::rates(settings, clock).await?);
                live_rates = Some(live.clone());
                Some(live as Arc<dyn RateSource>)
            }
            (None, _) => None,
        };
        Ok(UpstreamPorts {
            provider,
            rates,
            router,
            live_rates,
        })
    }

    /// In production the bundled sandbox provider and fixed rates are refused.
    fn check_production(&self, settings: &Settings) -> Result<(), StartError> {
        if settings.environment != Environment::Production {
            return Ok(());
        }
        let missing: Vec<&'static str> = [
            self.provider.is_none().then_some("a requisite provider"),
            self.rates.is_none().then_some("an exchange-rate source"),
        ]
        .into_iter()
        .flatten()
        .collect();
        if missing.is_empty() {
            Ok(())
        } else {
            Err(StartError::BundledPortsInProduction { missing })
        }
    }

    /// The server's metrics, reporting the live rates' ages and the router's health.
    fn metrics(&self, owned: Option<&OpenedStore>) -> Arc<payments_http::metrics::Metrics> {
        let metrics = Arc::new(payments_http::metrics::Metrics::default());
        metrics.count_dropped_log_lines(crate::telemetry::dropped_log_lines);
        if let Some(live) = self.live_rates.clone() {
            metrics.report_rate_ages(Arc::new(move || live.ages()));
        }
        if let Some(router) = self.router.clone() {
            metrics.report_provider_health(Arc::new(move || {
                router
                    .health()
                    .into_iter()
                    .map(|(name, h)| (name.to_string(), h.breaker.as_str(), h.issue_rate))
                    .collect()
            }));
        }
        metrics.set_build_info(
            env!("CARGO_PKG_VERSION"),
            owned.map(OpenedStore::schema_version),
        );
        metrics
    }
}

/// Warns about the settings meant for development only.
fn warn_development_settings(settings: &Settings) {
    if settings.callbacks.allow_local {
        tracing::warn!("PAYMENTS_CALLBACKS__ALLOW_LOCAL is on: http:// and loopback callback URLs are accepted (development only)");
    }
    if settings.callbacks.retry_delays != payments_core::callback::RetrySchedule::default() {
        tracing::warn!(delays = %settings.callbacks.retry_delays, "callback retry delays differ from the spec's 30,60 (development setting)");
    }
    if !settings.callbacks.dispatch {
        tracing::warn!("callback dispatch is off (callback_dispatch = false): callback events are stored in the outbox but not sent until a server with dispatch on runs over this data dir");
    }
}

/// The store an application runs on: the caller's, or the one the settings name (opened
/// here, closed at shutdown), with the cabinet's store, the rate limiter and the data dir's
/// lock that go with it.
struct StoreChoice {
    store: Arc<dyn Store>,
    cabinet: Option<Arc<dyn CabinetStore>>,
    /// The store opened here (closed at shutdown); `None` for the caller's.
    owned: Option<OpenedStore>,
    rate_limiter: Option<Arc<dyn RateLimiter>>,
    lock: Option<crate::data_dir::DataDirLock>,
}

impl StoreChoice {
    /// Takes the data dir's lock and opens the settings' store, unless the caller gave one.
    async fn open(
        settings: &Settings,
        store: Option<Arc<dyn Store>>,
        cabinet: Option<Arc<dyn CabinetStore>>,
        rate_limiter: Option<Arc<dyn RateLimiter>>,
    ) -> Result<StoreChoice, StartError> {
        // One server per data dir: the lock is taken before the database is opened. Nodes on
        // a shared PostgreSQL database take turns in the database instead (take_turn, SKIP
        // LOCKED claims), so they take no lock and may share a data dir (its secrets key).
        crate::data_dir::create_dir(&settings.data_dir)?;
        let lock = if settings.store.database_url.is_some() && store.is_none() {
            None
        } else {
            Some(crate::data_dir::lock(&settings.data_dir)?)
        };
        if let Some(store) = store {
            return Ok(StoreChoice {
                store,
                cabinet,
                owned: None,
                rate_limiter,
                lock,
            });
        }
        let opened = open_database(settings, true).await?;
        Ok(StoreChoice {
            store: opened.store(),
            cabinet: Some(cabinet.unwrap_or_else(|| opened.cabinet_store())),
            rate_limiter: rate_limiter.or_else(|| opened.rate_limiter()),
            owned: Some(opened),
            lock,
        })
    }
}

/// The handlers' shared state over `service`: the settings' HTTP tuning, the metrics, the
/// store's companions and, with `tuning.request_log`, the request log's writer.
fn app_state(
    settings: &Settings,
    service: PaymentService,
    metrics: Arc<payments_http::metrics::Metrics>,
    stores: &StoreChoice,
    router: Option<Arc<payments_providers::Router>>,
) -> AppState {
    let database_file = match &stores.owned {
        Some(OpenedStore::Sqlite(_)) => Some(
            settings
                .data_dir
                .join(crate::data_dir::DATABASE_FILE)
                .into(),
        ),
        _ => None,
    };
    let mut state = AppState::new(service, settings.public_scheme())
        .with_cabinet_store(stores.cabinet.clone())
        .with_body_timeout(settings.tuning.body_timeout)
        .with_metrics(metrics)
        .with_metrics_token(settings.metrics.token.clone().map(Arc::new))
        .with_database_file(database_file)
        .with_providers(router.map(crate::upstream::provider_status));
    if let Some(limiter) = stores.rate_limiter.clone() {
        state = state.with_rate_limiter(limiter);
    }
    if settings.tuning.request_log {
        let config = payments_http::request_log::RequestLogConfig {
            queue: settings.tuning.request_log_queue,
            ..Default::default()
        };
        let (log, _writer) = payments_http::request_log::RequestLog::start(
            state.service.clone(),
            config,
            state.metrics.clone(),
        );
        state = state.with_request_log(Some(log));
    }
    state
}

/// The bound listeners of an [`Application`], not yet serving.
#[derive(Debug)]
struct Listeners {
    merchant: TcpListener,
    operator: TcpListener,
    /// `GET /metrics` on a listener of its own (`metrics_listen`).
    metrics: Option<TcpListener>,
    /// The provider-notification listener and its verifiers (`upstream_listen`).
    upstream: Option<(TcpListener, crate::upstream::notify::Verifiers)>,
    /// The web cabinet's listener and state; `None` when the store keeps no cabinet records
    /// (and always without feature `cabinet`).
    cabinet: Option<(TcpListener, CabinetPart)>,
}

impl Listeners {
    /// Binds every listener the settings name (port 0 works), non-blocking.
    fn bind(settings: &Settings, state: &AppState) -> Result<Listeners, StartError> {
        let merchant = bind(settings.listen.merchant)?;
        let operator = bind(settings.listen.operator)?;
        let metrics = settings.metrics.listen.map(bind).transpose()?;
        if !settings.listen.operator.ip().is_loopback() && !settings.tls.operator {
            tracing::warn!(
                operator_listen = %settings.listen.operator,
                "the operator listener is bound to a non-loopback address without TLS: operator \
                 tokens cross the network in clear; set operator_tls (with tls_cert and tls_key), \
                 or bind it to loopback and reach it through an SSH tunnel or a TLS proxy"
            );
        }
        let upstream = match settings.upstream.listen {
            Some(addr) => Some((
                bind(addr)?,
                crate::upstream::notify::Verifiers::of(settings),
            )),
            None => None,
        };
        let cabinet = match cabinet_state(state, settings) {
            Some(cabinet) => Some((bind(settings.cabinet.listen)?, cabinet)),
            None => None,
        };
        Ok(Listeners {
            merchant,
            operator,
            metrics,
            upstream,
            cabinet,
        })
    }
}

/// A non-blocking listener on `addr`.
fn bind(addr: SocketAddr) -> Result<TcpListener, StartError> {
    let listener = TcpListener::bind(addr).map_err(|source| StartError::Listen { addr, source })?;
    listener
        .set_nonblocking(true)
        .map_err(StartError::Nonblocking)?;
    Ok(listener)
}

/// The TLS configuration of `tls_cert` and `tls_key`, when both are set.
async fn load_tls(settings: &Settings) -> Result<Option<RustlsConfig>, StartError> {
    let (Some(cert), Some(key)) = (&settings.tls.cert, &settings.tls.key) else {
        return Ok(None);
    };
    let read = |path| crate::files::read_limited(path, crate::files::PEM);
    let cert = read(cert).map_err(StartError::TlsFile)?;
    let key = read(key).map_err(StartError::TlsFile)?;
    let config = RustlsConfig::from_pem(cert, key)
        .await
        .map_err(StartError::Tls)?;
    Ok(Some(config))
}

impl Application {
    /// The sandbox's first start writes its credentials file; a later start brings the
    /// file's URLs to this start's listeners.
    async fn bootstrap_sandbox(&mut self) -> Result<(), StartError> {
        let cabinet_url = self.cabinet_url();
        #[cfg(feature = "cabinet")]
        let cabinet = self.cabinet().zip(cabinet_url.as_deref());
        #[cfg(not(feature = "cabinet"))]
        let cabinet = cabinet_url.as_ref().and(None);
        self.credentials = crate::bootstrap::bootstrap_sandbox(
            &self.state.service,
            &self.settings.data_dir,
            &self.base_url(),
            &self.operator_url(),
            cabinet,
        )
        .await
        .map_err(StartError::Bootstrap)?;
        if self.credentials.is_some() {
            return Ok(());
        }
        match crate::bootstrap::refresh_credentials(
            &self.settings.data_dir,
            &self.base_url(),
            &self.operator_url(),
            cabinet_url.as_deref(),
        ) {
            Ok(Some(path)) => tracing::info!(
                file = %path.display(),
                base_url = %self.base_url(),
                operator_url = %self.operator_url(),
                "sandbox credentials: URLs brought to this start's listeners"
            ),
            Ok(None) => {}
            Err(e) => tracing::warn!(
                error = %e,
                "sandbox credentials: the file keeps its old URLs; delete it with the \
                 data dir for a fresh sandbox"
            ),
        }
        Ok(())
    }
}

impl Application {
    /// Builds the server over the bundled ports (see [`ApplicationBuilder::build`]).
    pub async fn build(settings: Settings) -> Result<Application, StartError> {
        Application::builder(settings).build().await
    }

    /// A builder taking the ports from the caller; unset ones are the bundled defaults.
    pub fn builder(settings: Settings) -> ApplicationBuilder {
        ApplicationBuilder {
            settings,
            store: None,
            cabinet_store: None,
            rate_limiter: None,
            provider: None,
            rates: None,
            clock: None,
            rng: None,
            callback_lookup: None,
        }
    }

    /// The merchant listener's address.
    pub fn merchant_addr(&self) -> SocketAddr {
        self.listeners
            .merchant
            .local_addr()
            .expect("a bound listener has an address")
    }

    /// The operator listener's address.
    pub fn operator_addr(&self) -> SocketAddr {
        self.listeners
            .operator
            .local_addr()
            .expect("a bound listener has an address")
    }

    /// The provider-notification listener's address, when `upstream_listen` is set.
    pub fn upstream_addr(&self) -> Option<SocketAddr> {
        self.listeners
            .upstream
            .as_ref()
            .map(|(l, _)| l.local_addr().expect("a bound listener has an address"))
    }

    /// The provider-notification URL (`.../upstream/v1/notifications`), when
    /// `upstream_listen` is set.
    pub fn notifications_url(&self) -> Option<String> {
        self.upstream_addr()
            .map(|a| format!("http://{a}{}", crate::upstream::NOTIFICATIONS_PATH))
    }

    /// The merchant API's base URL: the configured public URL, else the listener's.
    pub fn base_url(&self) -> String {
        match &self.settings.listen.public_url {
            Some(u) => u.clone(),
            None => format!(
                "{}://{}",
                self.settings.public_scheme(),
                self.merchant_addr()
            ),
        }
    }

    /// The operator API's base URL (`https` with `operator_tls`).
    pub fn operator_url(&self) -> String {
        let scheme = if self.tls.is_some() && self.settings.tls.operator {
            "https"
        } else {
            "http"
        };
        format!("{scheme}://{}", self.operator_addr())
    }

    /// The web cabinet listener's address, when the cabinet runs.
    pub fn cabinet_addr(&self) -> Option<SocketAddr> {
        self.listeners
            .cabinet
            .as_ref()
            .map(|(l, _)| l.local_addr().expect("a bound listener has an address"))
    }

    /// The web cabinet's URL: the configured public URL, else the listener's (`https` with
    /// TLS); `None` when the cabinet does not run.
    pub fn cabinet_url(&self) -> Option<String> {
        let addr = self.cabinet_addr()?;
        Some(match &self.settings.cabinet.public_url {
            Some(u) => u.clone(),
            None => format!(
                "{}://{addr}",
                if self.tls.is_some() { "https" } else { "http" }
            ),
        })
    }

    /// The web cabinet (users, sign-in), when it runs.
    #[cfg(feature = "cabinet")]
    pub fn cabinet(&self) -> Option<&Cabinet> {
        self.listeners.cabinet.as_ref().map(|(_, st)| &st.cabinet)
    }

    /// The credentials file written at this start, if the sandbox was bootstrapped now.
    pub fn bootstrapped_credentials(&self) -> Option<&PathBuf> {
        self.credentials.as_ref()
    }

    /// The shared state (for embedding and tests).
    pub fn state(&self) -> &AppState {
        &self.state
    }

    /// Serves until `shutdown` completes, then stops accepting, finishes in-flight requests
    /// (up to the grace period), stops the background tasks and closes the store.
    pub async fn run_until_stopped(
        self,
        shutdown: impl Future<Output = ()> + Send + 'static,
    ) -> Result<(), StartError> {
        self.log_start().await;
        // The startup line on stderr before the node answers (a node killed once it answers
        // still shows it); a stalled stderr delays the start by a second at most.
        let _ = tokio::task::spawn_blocking(|| {
            crate::telemetry::wait_written(Duration::from_secs(1));
        })
        .await;
        let Application {
            settings,
            state,
            owned_store,
            listeners,
            tls,
            dispatcher,
            lock,
            ..
        } = self;
        let dispatcher =
            Dispatcher::for_state(&state, dispatcher).map_err(StartError::Dispatcher)?;
        let (draining_tx, draining_rx) = watch::channel(false);
        let limits = ConnectionLimits {
            max_connections: settings.tuning.max_connections,
            header_timeout: settings.tuning.header_timeout,
            tls: false,
            idle_timeout: settings.tuning.idle_timeout,
            draining: Some(draining_rx),
        };
        let serving = Serving::start(listeners, &state, &settings, tls.as_ref(), &limits);
        let background = Background::start(&state, &settings, dispatcher, tls);

        shutdown.await;
        tracing::info!("shutting down: no new connections, finishing in-flight requests");
        background.stop_reconciler();
        // Connections that have not sent a byte yet are closed now, not at their header
        // timeout: the drain below waits for every accepted connection.
        let _ = draining_tx.send(true);
        state.stopping.send_replace(true);
        serving.drain(settings.tuning.shutdown_grace).await;
        background.stop().await;
        if let Some(store) = owned_store {
            store.close();
        }
        // The lock goes last: a server started after this line finds the database closed.
        drop(lock);
        tracing::info!("stopped");
        Ok(())
    }

    /// The startup line: version, schema version, environment, data dir, every bound address,
    /// TLS, and whether callbacks are sent (a hold read from the store is named).
    async fn log_start(&self) {
        let s = &self.settings;
        let hold = self
            .state
            .service
            .callbacks()
            .callback_hold()
            .await
            .ok()
            .flatten();
        let dispatch = match (s.callbacks.dispatch, &hold) {
            (false, _) => "off".to_string(),
            (true, Some(reason)) => format!("held: {reason}"),
            (true, None) => "on".to_string(),
        };
        let schema = self
            .owned_store
            .as_ref()
            .map_or_else(|| "-".to_string(), |s| s.schema_version().to_string());
        tracing::info!(
            version = env!("CARGO_PKG_VERSION"),
            schema_version = schema.as_str(),
            environment = %s.environment,
            data_dir = %s.data_dir.display(),
            merchant_api = self.base_url().as_str(),
            merchant_listen = %self.merchant_addr(),
            operator_listen = %self.operator_addr(),
            upstream_listen = self.upstream_addr().map(|a| a.to_string()).as_deref().unwrap_or("-"),
            cabinet = self.cabinet_url().as_deref().unwrap_or("off"),
            metrics_listen = self
                .listeners
                .metrics
                .as_ref()
                .and_then(|l| l.local_addr().ok())
                .map(|a| a.to_string())
                .as_deref()
                .unwrap_or("-"),
            tls = self.tls.is_some(),
            operator_tls = self.tls.is_some() && s.tls.operator,
            callback_dispatch = dispatch.as_str(),
            "payments-server started"
        );
        if hold.is_some() && s.callbacks.dispatch {
            tracing::warn!(
                "callback dispatch is held (a restored backup starts so): events are queued, \
                 not sent; `payments-server callbacks release` sends them (docs/runbooks/restore.md)"
            );
        }
    }

    /// The `/metrics` listener's address, when `metrics_listen` is set.
    pub fn metrics_addr(&self) -> Option<SocketAddr> {
        self.listeners
            .metrics
            .as_ref()
            .map(|l| l.local_addr().expect("a bound listener has an address"))
    }
}

/// The listeners being served: each one's handle and task, in the order they are drained
/// (merchant, cabinet, operator, provider notifications, metrics), and the cabinet's purge.
struct Serving {
    tasks: Vec<(Handle, tokio::task::JoinHandle<std::io::Result<()>>)>,
    purge: Option<tokio::task::JoinHandle<()>>,
}

impl Serving {
    /// Serves each listener with its router: TLS on the merchant and cabinet listeners when
    /// configured, on the operator listener with `operator_tls` too.
    fn start(
        listeners: Listeners,
        state: &AppState,
        settings: &Settings,
        tls: Option<&RustlsConfig>,
        limits: &ConnectionLimits,
    ) -> Serving {
        let Listeners {
            merchant,
            operator,
            metrics,
            upstream,
            cabinet,
        } = listeners;
        let mut tasks = vec![serve(
            merchant,
            payments_http::app(state.clone()),
            tls,
            limits,
        )];
        let mut purge = None;
        if let Some((listener, cabinet_state)) = cabinet {
            let (router, purging) = cabinet_router(cabinet_state);
            purge = Some(purging);
            tasks.push(serve(listener, router, tls, limits));
        }
        let operator_tls = tls.filter(|_| settings.tls.operator);
        let operator_app = payments_http::operator_app(state.clone());
        tasks.push(serve(operator, operator_app, operator_tls, limits));
        if let Some((listener, verifiers)) = upstream {
            let app = crate::upstream_app(state.clone(), verifiers);
            tasks.push(serve(listener, app, None, limits));
        }
        if let Some(listener) = metrics {
            let app = payments_http::app::metrics_app(state.clone());
            tasks.push(serve(listener, app, None, limits));
        }
        Serving { tasks, purge }
    }

    /// Stops accepting on every listener and waits for the requests in flight, each
    /// listener for up to `grace`.
    async fn drain(self, grace: Duration) {
        for (handle, _) in &self.tasks {
            handle.graceful_shutdown(Some(grace));
        }
        for (_, task) in self.tasks {
            let _ = task.await;
        }
        if let Some(purge) = self.purge {
            purge.abort();
        }
    }
}

/// The tasks beside the listeners: the workers (callback dispatcher, lifecycle sweeper), the
/// ledger reconciler and the TLS certificate's reloader.
struct Background {
    workers: payments_http::workers::Workers,
    reconciler: Option<tokio::task::JoinHandle<()>>,
    reloader: Option<tokio::task::JoinHandle<()>>,
    stop_reloader: watch::Sender<bool>,
}

impl Background {
    fn start(
        state: &AppState,
        settings: &Settings,
        dispatcher: Dispatcher,
        tls: Option<RustlsConfig>,
    ) -> Background {
        let (stop_reloader, stop_rx) = watch::channel(false);
        let reloader = tls.map(|config| spawn_tls_watch(config, settings, stop_rx));
        // With dispatch off the dispatcher is built (so its settings are still checked) but
        // never run: events stay pending in the outbox for a later server.
        let workers = payments_http::workers::Workers::start_for(
            state,
            settings.callbacks.dispatch.then_some(dispatcher),
            settings.tuning.sweep_interval,
        );
        let interval = settings.tuning.ledger_reconcile_interval;
        let reconciler =
            (!interval.is_zero()).then(|| tokio::spawn(reconcile_ledger(state.clone(), interval)));
        Background {
            workers,
            reconciler,
            reloader,
            stop_reloader,
        }
    }

    /// Stops the reconciler at once: it repairs nothing, and a later start reconciles again.
    fn stop_reconciler(&self) {
        if let Some(r) = &self.reconciler {
            r.abort();
        }
    }

    /// Stops the workers (each finishes what it holds), then the reloader.
    async fn stop(self) {
        self.workers.stop().await;
        let _ = self.stop_reloader.send(true);
        if let Some(reloader) = self.reloader {
            let _ = reloader.await;
        }
    }
}

/// Serves `app` on `listener` (with TLS when given) under the connection `limits`.
fn serve(
    listener: TcpListener,
    app: axum::Router,
    tls: Option<&RustlsConfig>,
    limits: &ConnectionLimits,
) -> (Handle, tokio::task::JoinHandle<std::io::Result<()>>) {
    let handle = Handle::new();
    let app = app.into_make_service_with_connect_info::<SocketAddr>();
    let limits = ConnectionLimits {
        tls: tls.is_some(),
        ..limits.clone()
    };
    let task = match tls {
        Some(config) => {
            let mut server = axum_server::from_tcp_rustls(listener, config.clone())
                .map(|tls| CappedAcceptor::new(tls, &limits));
            limits.configure(server.http_builder());
            tokio::spawn(server.handle(handle.clone()).serve(app))
        }
        None => {
            let mut server = axum_server::from_tcp(listener)
                .acceptor(CappedAcceptor::new(DefaultAcceptor, &limits));
            limits.configure(server.http_builder());
            tokio::spawn(server.handle(handle.clone()).serve(app))
        }
    };
    (handle, task)
}

/// Reloads the TLS certificate on SIGHUP and when its files change, until `stop`.
fn spawn_tls_watch(
    config: RustlsConfig,
    settings: &Settings,
    stop: watch::Receiver<bool>,
) -> tokio::task::JoinHandle<()> {
    tokio::spawn(crate::tls::watch(
        config,
        settings.tls.cert.clone().unwrap_or_default(),
        settings.tls.key.clone().unwrap_or_default(),
        settings.tls.watch_interval,
        stop,
    ))
}

/// The service over the settings' store (the data dir's SQLite, or PostgreSQL with
/// `database_url`), without listeners or background tasks: what [`Application::build`]
/// serves and what the operator CLI commands act on.
#[derive(Debug)]
pub struct OpenedService {
    /// The service.
    pub service: PaymentService,
    /// The store under it (close it when done).
    pub store: OpenedStore,
}

/// What a build without the feature `postgres` answers to `store.database_url`.
pub const NO_POSTGRES: &str =
    "store.database_url is set, but this build of payments-server has no \
     PostgreSQL store (build it with the feature postgres, on by default)";

/// A store the server or a command opened from the settings (and closes when done).
#[non_exhaustive]
#[derive(Debug, Clone)]
pub enum OpenedStore {
    /// The data dir's SQLite database (one machine).
    Sqlite(Arc<SqliteStore>),
    /// A PostgreSQL database (`database_url`), possibly shared by several nodes (feature
    /// `postgres`).
    #[cfg(feature = "postgres")]
    Postgres(PgStore),
}

impl OpenedStore {
    /// The store as the service's port.
    pub fn store(&self) -> Arc<dyn Store> {
        match self {
            OpenedStore::Sqlite(s) => s.clone(),
            #[cfg(feature = "postgres")]
            OpenedStore::Postgres(s) => Arc::new(s.clone()),
        }
    }

    /// The same database as the store of the web cabinet's records.
    pub fn cabinet_store(&self) -> Arc<dyn CabinetStore> {
        match self {
            OpenedStore::Sqlite(s) => s.clone(),
            #[cfg(feature = "postgres")]
            OpenedStore::Postgres(s) => Arc::new(s.clone()),
        }
    }

    /// The rate limiter that goes with it: the database's for PostgreSQL (one limit across the
    /// nodes), none for SQLite (the in-process limiter is exact for one process).
    pub fn rate_limiter(&self) -> Option<Arc<dyn RateLimiter>> {
        match self {
            OpenedStore::Sqlite(_) => None,
            // A node's concurrent requests of one project share a round trip.
            #[cfg(feature = "postgres")]
            OpenedStore::Postgres(s) => Some(Arc::new(
                payments_http::coalescing::CoalescingRateLimiter::new(Arc::new(s.rate_limiter())),
            )),
        }
    }

    /// The sealing of the store's requisites at rest, which [`open_service`] and
    /// [`Application::build`] install the secrets key on.
    pub fn requisite_sealing(&self) -> &payments_store_sqlite::RequisiteSealing {
        match self {
            OpenedStore::Sqlite(s) => s.requisite_sealing(),
            #[cfg(feature = "postgres")]
            OpenedStore::Postgres(s) => s.requisite_sealing(),
        }
    }

    /// Seals every payment's requisites under the current key (`callback-secret reseal`).
    pub async fn reseal_requisites(
        &self,
    ) -> Result<payments_store_sqlite::RequisiteReseal, payments_core::store::StoreError> {
        match self {
            OpenedStore::Sqlite(s) => s.reseal_requisites().await,
            #[cfg(feature = "postgres")]
            OpenedStore::Postgres(s) => s.reseal_requisites().await,
        }
    }

    /// Gives payments written before schema 16 the last four digits of their requisite, and
    /// those written before schema 25 its keyed digest (`payment backfill-last4`).
    pub async fn backfill_requisite_last4(
        &self,
    ) -> Result<payments_store_sqlite::Last4Backfill, payments_core::store::StoreError> {
        match self {
            OpenedStore::Sqlite(s) => s.backfill_requisite_last4().await,
            #[cfg(feature = "postgres")]
            OpenedStore::Postgres(s) => s.backfill_requisite_last4().await,
        }
    }

    /// How many payments hold requisites sealed under each key id.
    pub async fn sealed_requisite_keys(
        &self,
    ) -> Result<Vec<(String, u64)>, payments_core::store::StoreError> {
        match self {
            OpenedStore::Sqlite(s) => s.sealed_requisite_keys().await,
            #[cfg(feature = "postgres")]
            OpenedStore::Postgres(s) => s.sealed_requisite_keys().await,
        }
    }

    /// The schema version this build writes (one numbering for both engines).
    pub fn schema_version(&self) -> u32 {
        match self {
            OpenedStore::Sqlite(_) => payments_store_sqlite::SCHEMA_VERSION,
            #[cfg(feature = "postgres")]
            OpenedStore::Postgres(_) => payments_store_postgres::SCHEMA_VERSION,
        }
    }

    /// Closes it: SQLite commits its queued writes and stops its writer; PostgreSQL closes the
    /// pool.
    pub fn close(&self) {
        match self {
            OpenedStore::Sqlite(s) => s.close(),
            #[cfg(feature = "postgres")]
            OpenedStore::Postgres(s) => s.close(),
        }
    }
}

/// Applies the settings' store's migrations (the `migrate` subcommand): PostgreSQL at
/// `database_url` under its advisory lock (waiting up to a minute for another node's), or the
/// data dir's existing SQLite database. Returns the schema version before and after.
pub async fn migrate(settings: &Settings) -> Result<(u32, u32), StartError> {
    match &settings.store.database_url {
        #[cfg(feature = "postgres")]
        Some(url) => payments_store_postgres::migrate(url.expose(), Duration::from_secs(60))
            .await
            .map_err(StartError::Postgres),
        #[cfg(not(feature = "postgres"))]
        Some(_) => Err(StartError::NoPostgres),
        None => {
            let db = settings.data_dir.join(crate::data_dir::DATABASE_FILE);
            if !db.exists() {
                return Err(StartError::NoDatabase(db));
            }
            let before = payments_store_sqlite::schema_version(&db).map_err(|source| {
                StartError::Sqlite {
                    path: db.clone(),
                    source,
                }
            })?;
            open_sqlite(settings, false, true)?.close();
            Ok((before, payments_store_sqlite::SCHEMA_VERSION))
        }
    }
}

/// Opens the settings' store: PostgreSQL at `database_url`, else the data dir's SQLite
/// database ([`open_store`]). `create` is `serve`'s open: it creates the data dir and database
/// and applies the migrations the database lacks (each store logs an upgrade). Without it
/// (every other command) the schema is not changed: a database older than this build is
/// refused with a message naming `payments-server migrate`.
pub async fn open_database(settings: &Settings, create: bool) -> Result<OpenedStore, StartError> {
    match &settings.store.database_url {
        #[cfg(not(feature = "postgres"))]
        Some(_) => Err(StartError::NoPostgres),
        #[cfg(feature = "postgres")]
        Some(url) => {
            let options = PgOptions {
                pool_size: settings.store.pool_size,
                scan_timeout: settings.tuning.scan_timeout,
                migrate: create,
                ..PgOptions::default()
            };
            let store = PgStore::connect(url.expose(), options)
                .await
                .map_err(StartError::Postgres)?;
            Ok(OpenedStore::Postgres(store))
        }
        None => open_store(settings, create).map(OpenedStore::Sqlite),
    }
}

/// The setting recording which environment a database belongs to (the core's).
pub const ENVIRONMENT: Setting<Environment> = payments_core::settings::ENVIRONMENT;

/// What opening a data dir or database may set up there.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Setup {
    /// `serve` (and [`Application::build`]): creates the data dir and the database and applies
    /// the migrations, records the environment in a database that has none, and creates the
    /// sealing key when it is missing and nothing in the database is sealed yet.
    Serve,
    /// An operator command: sets nothing up. A missing database, one older than this build
    /// (naming `payments-server migrate`) and a missing sealing key are errors; a database with
    /// no environment recorded is used with the settings' environment and stays so (a warning
    /// says it).
    Command,
    /// An operator command given `--create-key`: as [`Setup::Command`], but a missing sealing
    /// key is created when nothing in the database is sealed yet.
    CommandCreatingKey,
}

impl Setup {
    fn creates_database(self) -> bool {
        self == Setup::Serve
    }

    fn may_create_key(self) -> bool {
        self != Setup::Command
    }
}

/// Opens the settings' store and builds the service over it with the bundled ports, setting
/// up what `setup` allows: only [`Setup::Serve`] creates and migrates a database (an operator
/// command with a mistyped `--data-dir` must not create an empty database elsewhere) or
/// records the environment; a command that only reads writes nothing.
pub async fn open_service(settings: &Settings, setup: Setup) -> Result<OpenedService, StartError> {
    let store = open_database(settings, setup.creates_database()).await?;
    let cabinet = store.cabinet_store();
    let service = service_over(
        settings,
        PortChoices {
            store: store.store(),
            provider: None,
            rates: None,
            clock: crate::testing_clock::from_settings(settings),
            rng: None,
        },
        Some(cabinet.as_ref()),
        Some(&store),
        setup,
        None,
    )
    .await;
    match service {
        Ok(service) => Ok(OpenedService { service, store }),
        Err(e) => {
            store.close();
            Err(e)
        }
    }
}

/// Opens (with `create`, creates) the SQLite store of the settings' data dir, as
/// [`Application::build`] does when no store is given. Only a `create` open (`serve`, and
/// `migrate` through [`migrate`]) changes the schema: without it, a database older than this
/// build is refused with a message naming `payments-server migrate`, and left as it is.
pub fn open_store(settings: &Settings, create: bool) -> Result<Arc<SqliteStore>, StartError> {
    open_sqlite(settings, create, create)
}

fn open_sqlite(
    settings: &Settings,
    create: bool,
    migrate: bool,
) -> Result<Arc<SqliteStore>, StartError> {
    let _ = rustls::crypto::ring::default_provider().install_default();
    let db = settings.data_dir.join(crate::data_dir::DATABASE_FILE);
    if create {
        crate::data_dir::create_dir(&settings.data_dir)?;
    } else if !db.exists() {
        return Err(StartError::NoDatabase(db));
    }
    let options = SqliteOptions {
        synchronous: match settings.store.synchronous {
            Durability::Full => Synchronous::Full,
            Durability::Normal => Synchronous::Normal,
        },
        migrate,
        reserve_bytes: settings.store.reserve_mib.saturating_mul(1 << 20),
        scan_timeout: settings.tuning.scan_timeout,
        readers: settings.store.readers,
        short_readers: settings.store.short_readers,
        ..SqliteOptions::default()
    };
    let store = SqliteStore::open(&db, options)
        .map_err(|source| StartError::Sqlite { path: db, source })?;
    Ok(Arc::new(store))
}

/// The ports a caller chose; `None` is the bundled default.
struct PortChoices {
    store: Arc<dyn Store>,
    provider: Option<Arc<dyn RequisiteProvider>>,
    rates: Option<Arc<dyn RateSource>>,
    clock: Option<Arc<dyn Clock>>,
    rng: Option<Arc<dyn RandomSource>>,
}

/// The service over `ports` with the settings' service and authentication settings: each
/// setting (environment, callback policy, retry schedule) is given to the core once, here.
///
/// The environment is recorded in the store at the first serve; a later open with the other
/// environment is refused, because tokens it issued would carry the other prefix and fail.
/// The sealing key is read from its file; a missing one is created only where `setup` allows
/// and only while nothing in the database (`ports.store`, and `cabinet` when given) is sealed:
/// a new key could not open what an old one sealed.
async fn service_over(
    settings: &Settings,
    ports: PortChoices,
    cabinet: Option<&dyn CabinetStore>,
    opened: Option<&OpenedStore>,
    setup: Setup,
    metrics: Option<Arc<payments_http::metrics::Metrics>>,
) -> Result<PaymentService, StartError> {
    let catalog = bank_catalog(settings)?;
    let store = ports.store;
    let rng = ports.rng.unwrap_or_else(|| Arc::new(OsRandom));
    let key = crate::data_dir::key_file(settings);
    if !key.exists() {
        check_key_may_be_created(settings, &key, store.as_ref(), cabinet, opened, setup).await?;
    }
    let sealing = crate::data_dir::sealing_keys(settings, rng.as_ref())?;
    if let Some(opened) = opened {
        let writes = if settings.secrets.seal_requisites {
            payments_store_sqlite::SealWrites::Sealed
        } else {
            payments_store_sqlite::SealWrites::Plain
        };
        opened
            .requisite_sealing()
            .install(sealing.clone(), rng.clone(), writes)
            .expect("a store opened for this service has no requisite keys installed yet");
    }
    let provider: Arc<dyn RequisiteProvider> = ports
        .provider
        .unwrap_or_else(|| Arc::new(SandboxProvider::new(store.clone())));
    // Measured for /metrics: latency and outcome of every call, the store's errors by cause.
    let (store, provider) = match metrics {
        Some(m) => payments_http::measured::measure(store, provider, &m),
        None => (store, provider),
    };
    let ports = Ports::new(
        store,
        provider,
        ports
            .rates
            .unwrap_or_else(|| Arc::new(FixedRates(settings.rates.clone()))),
        ports.clock.unwrap_or_else(|| Arc::new(SystemClock)),
        rng,
    )
    .with_catalog(Arc::new(catalog))
    .with_verifier(signature_batcher(settings));
    let service = PaymentService::new(
        ports,
        service_config(settings, sealing),
        auth_config(settings),
    );
    check_environment(&service, setup == Setup::Serve).await?;
    service
        .check_sealing_key(setup == Setup::Serve)
        .await?
        .map_err(|mismatch| StartError::KeyMismatch { key, mismatch })?;
    Ok(service)
}

/// The settings' bank catalog (`bank_catalog`), else the embedded one.
fn bank_catalog(settings: &Settings) -> Result<BankCatalog, StartError> {
    let Some(path) = &settings.bank_catalog else {
        return Ok(BankCatalog::embedded());
    };
    let text = crate::files::read_limited_string(path, crate::files::BANK_CATALOG)
        .map_err(StartError::BankCatalogFile)?;
    BankCatalog::from_json(&text).map_err(|source| StartError::BankCatalog {
        path: path.clone(),
        source,
    })
}

/// The core's service settings of the server's settings, sealing with `sealing`.
fn service_config(settings: &Settings, sealing: SealingKeys) -> ServiceConfig {
    ServiceConfig {
        callback_policy: AddressPolicy {
            allow_local: settings.callbacks.allow_local,
        },
        retry: settings.callbacks.retry_delays.clone(),
        resend_budget: settings.callbacks.resend_budget(),
        sealing,
        provider_budget: settings.upstream.provider_budget,
        recovery_window: settings.upstream.recovery_window,
        retention: settings.retention(),
        request_log: payments_core::request_log::RequestLogPolicy {
            keep: settings.tuning.request_log_keep,
            ..Default::default()
        },
        scans: ScanBudget {
            per_project: settings.tuning.scans_per_project,
            ..ScanBudget::default()
        },
        ..ServiceConfig::default()
    }
}

/// The core's authentication settings: the environment's, with the trusted proxies of the
/// settings.
fn auth_config(settings: &Settings) -> AuthConfig {
    let mut auth = AuthConfig::for_environment(settings.environment);
    auth.trusted_proxies = settings.listen.trusted_proxies.clone();
    auth
}

/// The merchant API's signature verifier: concurrent requests' signatures verified in
/// batches of the settings' size and wait.
fn signature_batcher(settings: &Settings) -> Arc<SignatureBatcher> {
    let t = &settings.tuning;
    Arc::new(
        SignatureBatcher::new(t.signature_batch.max(1), t.signature_batch_wait)
            .with_min_fill(t.signature_batch_min),
    )
}

/// The environment rule of the core ([`PaymentService::record_environment`]) as a start
/// needs it: `serve` records it; a command only checks it (and warns when none is recorded).
async fn check_environment(service: &PaymentService, record: bool) -> Result<(), StartError> {
    let env = service.auth_config().environment;
    let refused = StartError::Environment;
    if record {
        return service.record_environment().await.map_err(refused);
    }
    if !service.check_environment().await.map_err(refused)? {
        tracing::warn!(
            environment = %env,
            "no environment is recorded in this database yet (no server has started on it): \
             the command runs as {env} and records nothing; `payments-server serve` records it"
        );
    }
    Ok(())
}

/// Refuses a missing sealing key that may not be created now: a command not given
/// `--create-key`, or a database that holds callback secrets or TOTP keys sealed with a key
/// that is not among `secrets_previous_key_files` (a new key could not open them: the old one
/// must be restored; with it among the previous keys, a new key is a rotation).
async fn check_key_may_be_created(
    settings: &Settings,
    key: &std::path::Path,
    store: &dyn Store,
    cabinet: Option<&dyn CabinetStore>,
    opened: Option<&OpenedStore>,
    setup: Setup,
) -> Result<(), StartError> {
    let previous = settings
        .secrets
        .previous_key_files
        .iter()
        .map(|path| crate::data_dir::read_key_file(path).map(|k| k.id().to_string()))
        .collect::<Result<Vec<_>, _>>()?;
    let mut sealed = sealed_records(store, cabinet, &previous).await?;
    if let Some(opened) = opened {
        let keys = opened.sealed_requisite_keys().await?;
        sealed += keys
            .iter()
            .filter(|(id, _)| !previous.contains(id))
            .map(|(_, n)| usize::try_from(*n).unwrap_or(usize::MAX))
            .sum::<usize>();
    }
    if sealed > 0 {
        return Err(StartError::SealedWithoutKey {
            key: key.to_path_buf(),
            sealed,
        });
    }
    if !setup.may_create_key() {
        return Err(StartError::NoKey(key.to_path_buf()));
    }
    Ok(())
}

/// How many records the database holds sealed with a key other than those with the ids
/// `known`: callback secrets, and the cabinet users' TOTP keys when the cabinet's store is
/// given (plaintext ones from before sealing do not count: any key reads them).
async fn sealed_records(
    store: &dyn Store,
    cabinet: Option<&dyn CabinetStore>,
    known: &[String],
) -> Result<usize, payments_core::store::StoreError> {
    use payments_cabinet::store::CabinetStoreExt;
    use payments_core::sealing::SealingKeys;
    use payments_core::store::MerchantStoreExt;
    let is_sealed = |s: &payments_core::SecretString| {
        SealingKeys::sealed_with(s.expose()).is_some_and(|id| !known.iter().any(|k| k == id))
    };
    let mut sealed = 0;
    for project in store.projects().await? {
        let secrets = store.callback_secrets(project.id).await?;
        sealed += secrets.iter().filter(|r| is_sealed(&r.secret)).count();
    }
    if let Some(cabinet) = cabinet {
        let users = cabinet.users().await?;
        sealed += users
            .iter()
            .filter(|u| u.totp_secret.as_ref().is_some_and(is_sealed))
            .count();
    }
    Ok(sealed)
}

/// Completes on SIGTERM or SIGINT (Ctrl-C).
pub async fn shutdown_signal() {
    let ctrl_c = async {
        let _ = tokio::signal::ctrl_c().await;
    };
    #[cfg(unix)]
    let term = async {
        match tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()) {
            Ok(mut s) => {
                s.recv().await;
            }
            Err(_) => std::future::pending::<()>().await,
        }
    };
    #[cfg(not(unix))]
    let term = std::future::pending::<()>();
    tokio::select! {
        () = ctrl_c => {},
        () = term => {},
    }
}

/// What the server holds of the web cabinet: its state (feature `cabinet`), else nothing
/// (no value of this type exists).
#[cfg(feature = "cabinet")]
type CabinetPart = CabinetState;
#[cfg(not(feature = "cabinet"))]
type CabinetPart = std::convert::Infallible;

/// The web cabinet's state over the application's cabinet store; `None` (logged) without one.
#[cfg(feature = "cabinet")]
fn cabinet_state(state: &AppState, settings: &Settings) -> Option<CabinetPart> {
    let Some(store) = &state.cabinet_store else {
        tracing::warn!(
            "the web cabinet is off: the application was given a store without a cabinet store \
             (ApplicationBuilder::cabinet_store)"
        );
        return None;
    };
    let retention = settings.retention();
    let keep = settings.retention.cabinet_audit_records;
    let cabinet = Cabinet::new(
        state.service.clone(),
        store.clone(),
        CabinetConfig {
            audit_retention: retention.audit,
            audit_max_records: (keep > 0).then_some(keep),
            ..CabinetConfig::default()
        },
    );
    let mut cabinet_state = CabinetState::new(cabinet, settings.tls.cert.is_some());
    cabinet_state.public_origin = settings.cabinet.public_url.clone();
    cabinet_state.body_timeout = settings.tuning.body_timeout;
    Some(cabinet_state)
}

/// Without feature `cabinet` the server has no web cabinet.
#[cfg(not(feature = "cabinet"))]
fn cabinet_state(_: &AppState, _: &Settings) -> Option<CabinetPart> {
    tracing::info!("this build has no web cabinet (feature `cabinet`): its listener stays off");
    None
}

/// The web cabinet's router, and its purge task started.
#[cfg(feature = "cabinet")]
fn cabinet_router(cabinet_state: CabinetPart) -> (axum::Router, tokio::task::JoinHandle<()>) {
    let purge = tokio::spawn(purge_cabinet(
        cabinet_state.cabinet.clone(),
        CABINET_PURGE_INTERVAL,
    ));
    (payments_cabinet::router(cabinet_state), purge)
}

#[cfg(not(feature = "cabinet"))]
fn cabinet_router(cabinet_state: CabinetPart) -> (axum::Router, tokio::task::JoinHandle<()>) {
    match cabinet_state {}
}

/// How often the cabinet's expired sessions, old sign-in failures and audit records past
/// their retention are deleted.
pub const CABINET_PURGE_INTERVAL: Duration = Duration::from_secs(60);

/// Deletes the cabinet's expired sessions, old failures, expired one-time slots and audit
/// records past retention every `interval`, until aborted.
#[cfg(feature = "cabinet")]
async fn purge_cabinet(cabinet: Cabinet, interval: Duration) {
    loop {
        tokio::time::sleep(interval).await;
        match cabinet.purge().await {
            Ok(p) if p.audit > 0 => {
                tracing::info!(
                    sessions = p.sessions,
                    failures = p.failures,
                    slots = p.slots,
                    audit = p.audit,
                    "cabinet: expired records deleted, audit records past retention among them"
                );
            }
            Ok(p) if p.sessions + p.failures + p.slots > 0 => {
                tracing::debug!(
                    sessions = p.sessions,
                    failures = p.failures,
                    slots = p.slots,
                    "cabinet: expired records deleted"
                );
            }
            Ok(_) => {}
            Err(e) => tracing::warn!(error = %e.message, "cabinet: purge failed"),
        }
    }
}

/// How long to wait between sweeps when the last one was a full batch.
pub const BUSY_SWEEP: Duration = Duration::from_millis(10);

/// Reconciles the project balances every `interval` (the first time a minute after start, or
/// after `interval` when shorter), on one node of a deployment at a time (the store's turn
/// `ledger-reconcile`), and sets `payments_ledger_differences`; a difference is logged as a
/// warning naming the project and payment. Runs until aborted.
async fn reconcile_ledger(state: AppState, interval: Duration) {
    use payments_core::Clock as _;
    let mut wait = interval.min(Duration::from_secs(60));
    loop {
        tokio::time::sleep(wait).await;
        wait = interval;
        let now = SystemClock.now();
        let turn = state
            .service
            .store()
            .take_turn("ledger-reconcile", now, now.saturating_add(interval))
            .await;
        match turn {
            Ok(true) => {}
            Ok(false) => continue,
            Err(e) => {
                tracing::warn!(error = %e, "ledger reconciliation: no turn (the store failed)");
                continue;
            }
        }
        match state
            .service
            .balances()
            .reconcile_ledger(false, &payments_core::service::Actor::system())
            .await
        {
            Ok(report) => {
                state.metrics.ledger_reconciled(&report);
                for d in &report.differences {
                    tracing::warn!(
                        project_id = %d.project_id,
                        payment_id = ?d.payment_id.map(|p| p.to_string()),
                        expected = %d.expected,
                        recorded = %d.recorded,
                        "ledger difference: {}",
                        d.what
                    );
                }
                tracing::info!(
                    projects = report.projects,
                    payments = report.payments,
                    entries = report.entries,
                    differences = report.differences.len(),
                    "ledger reconciled"
                );
            }
            Err(e) => tracing::warn!(error = %e, "ledger reconciliation failed"),
        }
    }
}
