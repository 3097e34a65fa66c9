//! A test server of this crate (feature `testing`): the merchant API ([`app()`](crate::app())),
//! the operator API ([`operator_app`](crate::operator_app)), with feature `cabinet` the web
//! cabinet, and the [`Workers`] (callback dispatcher, lifecycle sweeper) over one
//! [`AppState`], each router on its own listener on 127.0.0.1:0, over a fresh SQLite database
//! in a temporary directory, with the sandbox provider and fixed rates. A sandbox is
//! bootstrapped ([`crate::sandbox::bootstrap`]) and its credentials kept in memory.
//!
//! It is what this crate's integration tests (and an embedder's) run the HTTP adapter on; the
//! whole `payments-server` (settings, data dir, TLS, connection limits) has a test server of
//! its own (`payments_server::testing`).
//!
//! ```no_run
//! # async fn f() {
//! use payments_http::testing::TestServer;
//!
//! let s = TestServer::start(|c| c.service.callback_policy.allow_local = true).await;
//! let created = s
//!     .client()
//!     .create_payment(&serde_json::json!({
//!         "merchant_payment_id": "order-1",
//!         "amount": "1500",
//!         "payment_method": "sbp",
//!     }))
//!     .await
//!     .expect("an answer");
//! assert_eq!(created.status.as_u16(), 201);
//! s.stop().await;
//! # }
//! ```

use std::sync::Arc;
use std::time::Duration;

use payments_cabinet::store::CabinetStore;
use payments_client::{MerchantClient, SandboxCredentials};
use payments_core::auth::Environment;
use payments_core::clock::Sleep;
use payments_core::sealing::{SealingKey, SealingKeys};
use payments_core::service::{Actor, AuthConfig, PaymentService, Ports, ServiceConfig};
use payments_core::store::Store;
use payments_core::{Clock, ProjectId, SecretString, Timestamp};
use payments_directory::{DirectoryAccess, ProjectPatch};
use payments_providers::sandbox::{FixedRates, SandboxProvider};
use payments_store_sqlite::{SqliteOptions, SqliteStore, Synchronous};
use tempfile::TempDir;
use tokio::net::TcpListener;
use tokio::sync::watch;
use tokio::task::JoinHandle;

use crate::batch::SignatureBatcher;
use crate::dispatcher::{Dispatcher, DispatcherConfig};
use crate::request_log::{RequestLog, RequestLogConfig};
use crate::system::{OsRandom, SystemClock};
use crate::workers::Workers;
use crate::AppState;

/// The database file in the test server's directory.
pub const DATABASE_FILE: &str = "payments.db";

/// What a test chooses of its server: the service's settings, the dispatcher and the
/// workers. [`TestConfig::default`] is a sandbox with the spec's settings, the callback
/// dispatcher on, the request log on and a 50 ms sweep interval.
#[non_exhaustive]
pub struct TestConfig {
    /// The environment (`auth.environment`: a production server is not bootstrapped and
    /// gets an operator token of its own) and the trusted proxies.
    pub auth: AuthConfig,
    /// The service's settings: callback policy (`callback_policy.allow_local`), retry
    /// schedule, resend budget. Its sealing keys, when none are configured, are a key made
    /// for the server (kept over [`TestServer::restart`]).
    pub service: ServiceConfig,
    /// Whether the callback dispatcher runs (off: events wait in the outbox).
    pub dispatch: bool,
    /// The dispatcher's settings (concurrency, per host and per project, how destination
    /// names are looked up).
    pub dispatcher: DispatcherConfig,
    /// Whether the merchant API's request log is kept.
    pub request_log: bool,
    /// How often the lifecycle sweeper runs.
    pub sweep_interval: Duration,
    /// The service's clock (default: the system clock), e.g. a [`ShiftedClock`].
    pub clock: Option<Arc<dyn Clock>>,
}

impl Default for TestConfig {
    fn default() -> TestConfig {
        TestConfig {
            auth: AuthConfig::for_environment(Environment::Sandbox),
            service: ServiceConfig::default(),
            dispatch: true,
            dispatcher: DispatcherConfig::default(),
            request_log: true,
            sweep_interval: Duration::from_millis(50),
            clock: None,
        }
    }
}

impl std::fmt::Debug for TestConfig {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("TestConfig")
            .field("auth", &self.auth)
            .field("service", &self.service)
            .field("dispatch", &self.dispatch)
            .field("dispatcher", &self.dispatcher)
            .field("request_log", &self.request_log)
            .field("sweep_interval", &self.sweep_interval)
            .field("clock", &self.clock.is_some())
            .finish()
    }
}

impl TestConfig {
    /// The default settings in `environment`.
    pub fn in_environment(environment: Environment) -> TestConfig {
        TestConfig {
            auth: AuthConfig::for_environment(environment),
            ..TestConfig::default()
        }
    }
}

/// What a test reaches a running server by: its state, its URLs, the operator token and the
/// sandbox credentials, with the requests a test makes through them. [`TestServer`] (and
/// `payments_server::testing::TestServer`) dereference to it.
#[derive(Debug)]
pub struct Endpoints {
    /// The server's state (its service), for looking behind the API.
    pub state: AppState,
    /// `http://127.0.0.1:<port>` of the merchant API.
    pub merchant_url: String,
    /// `http://127.0.0.1:<port>` of the operator API.
    pub operator_url: String,
    /// The operator token.
    pub operator_token: SecretString,
    /// The web cabinet's URL, when it runs.
    pub cabinet_url: Option<String>,
    /// The sandbox credentials (`None` in production, which is not bootstrapped).
    pub credentials: Option<SandboxCredentials>,
}

/// A running test server (see the [module](self)); its [`Endpoints`] by dereference.
#[derive(Debug)]
pub struct TestServer {
    /// The state, the URLs and the credentials.
    pub endpoints: Endpoints,
    /// The web cabinet (users, sign-in) (feature `cabinet`).
    #[cfg(feature = "cabinet")]
    pub cabinet: Option<payments_cabinet::Cabinet>,
    /// The directory of the database, deleted on drop.
    pub dir: TempDir,
    store: Arc<SqliteStore>,
    sealing_key: [u8; 32],
    stop: watch::Sender<bool>,
    serving: Vec<JoinHandle<std::io::Result<()>>>,
    workers: Option<Workers>,
}

impl TestServer {
    /// A bootstrapped sandbox with the defaults ([`TestConfig::default`]).
    pub async fn sandbox() -> TestServer {
        TestServer::start(|_| {}).await
    }

    /// A server with the defaults changed by `configure` (e.g.
    /// `|c| c.dispatch = false`), over a fresh database.
    pub async fn start(configure: impl FnOnce(&mut TestConfig)) -> TestServer {
        let dir = tempfile::tempdir().expect("a temporary directory");
        let key = SealingKey::generate_bytes(&OsRandom);
        TestServer::start_in(dir, key, None, configure).await
    }

    /// [`TestServer::start`] with the service on `clock` (e.g. a [`ShiftedClock`], to move
    /// past a TOTP time step without sleeping).
    pub async fn start_with_clock(
        clock: Arc<dyn Clock>,
        configure: impl FnOnce(&mut TestConfig),
    ) -> TestServer {
        TestServer::start(|c| {
            c.clock = Some(clock);
            configure(c);
        })
        .await
    }

    /// Stops this server gracefully and starts another over the same database (and sealing
    /// key, and sandbox credentials: no new bootstrap) with the defaults changed by
    /// `configure`; the settings of this run are not carried over. The new server listens on
    /// new ports; [`Endpoints::credentials`] carry its URLs.
    pub async fn restart(mut self, configure: impl FnOnce(&mut TestConfig)) -> TestServer {
        self.shut_down().await;
        let credentials = self.endpoints.credentials;
        TestServer::start_in(self.dir, self.sealing_key, credentials, configure).await
    }

    async fn start_in(
        dir: TempDir,
        sealing_key: [u8; 32],
        credentials: Option<SandboxCredentials>,
        configure: impl FnOnce(&mut TestConfig),
    ) -> TestServer {
        // The dispatcher's TLS client.
        let _ = rustls::crypto::ring::default_provider().install_default();
        let mut config = TestConfig::default();
        configure(&mut config);
        let options = SqliteOptions {
            synchronous: Synchronous::Normal,
            ..SqliteOptions::default()
        };
        let store = Arc::new(
            SqliteStore::open(dir.path().join(DATABASE_FILE), options)
                .expect("the test database opens"),
        );
        let metrics = Arc::new(crate::metrics::Metrics::default());
        let service = service(&store, &config, sealing_key, &metrics);
        service
            .record_environment()
            .await
            .expect("the environment is recorded");
        let cabinet_store: Arc<dyn CabinetStore> = store.clone();
        let mut state = AppState::new(service, "http")
            .with_metrics(metrics)
            .with_cabinet_store(Some(cabinet_store));
        if config.request_log {
            let (log, _writer) = RequestLog::start(
                state.service.clone(),
                RequestLogConfig::default(),
                state.metrics.clone(),
            );
            state = state.with_request_log(Some(log));
        }
        let merchant = bind().await;
        let operator = bind().await;
        let merchant_url = url(&merchant);
        let operator_url = url(&operator);
        #[cfg(feature = "cabinet")]
        let (cabinet, cabinet_listener) = (
            payments_cabinet::Cabinet::new(
                state.service.clone(),
                store.clone(),
                payments_cabinet::CabinetConfig::default(),
            ),
            bind().await,
        );
        #[cfg(feature = "cabinet")]
        let cabinet_url = Some(url(&cabinet_listener));
        #[cfg(not(feature = "cabinet"))]
        let cabinet_url: Option<String> = None;
        state = state.with_cabinet_url(cabinet_url.as_deref().map(Arc::from));
        let credentials = match credentials {
            Some(c) => Some(c.at(&merchant_url, &operator_url, cabinet_url.as_deref())),
            None if state.service.auth_config().environment == Environment::Sandbox => {
                #[cfg(feature = "cabinet")]
                let demo = cabinet_url.as_deref().map(|u| (&cabinet, u));
                #[cfg(not(feature = "cabinet"))]
                let demo = None;
                crate::sandbox::bootstrap(&state.service, &merchant_url, &operator_url, demo)
                    .await
                    .expect("the sandbox is bootstrapped")
            }
            None => None,
        };
        let endpoints = Endpoints::new(
            state.clone(),
            merchant_url,
            operator_url,
            cabinet_url,
            credentials,
        )
        .await;
        let (stop, stopped) = watch::channel(false);
        let until = |mut stopped: watch::Receiver<bool>| async move {
            let _ = stopped.wait_for(|stop| *stop).await;
        };
        #[cfg_attr(not(feature = "cabinet"), allow(unused_mut))]
        let mut serving = vec![
            tokio::spawn(crate::serve(
                merchant,
                crate::app(state.clone()),
                until(stopped.clone()),
            )),
            tokio::spawn(crate::serve(
                operator,
                crate::operator_app(state.clone()),
                until(stopped.clone()),
            )),
        ];
        #[cfg(feature = "cabinet")]
        serving.push(tokio::spawn(crate::serve(
            cabinet_listener,
            payments_cabinet::router(payments_cabinet::CabinetState::new(cabinet.clone(), false)),
            until(stopped.clone()),
        )));
        let dispatcher = config.dispatch.then(|| {
            Dispatcher::for_state(&state, config.dispatcher.clone())
                .expect("the dispatcher's settings are valid")
        });
        let workers = Workers::start_for(&state, dispatcher, config.sweep_interval);
        TestServer {
            endpoints,
            #[cfg(feature = "cabinet")]
            cabinet: Some(cabinet),
            dir,
            store,
            sealing_key,
            stop,
            serving,
            workers: Some(workers),
        }
    }

    /// Stops the server gracefully and waits for it.
    pub async fn stop(mut self) {
        self.shut_down().await;
    }

    /// Ends the long polls, stops accepting and lets the requests in flight finish, stops the
    /// workers (the attempts in flight finish) and closes the store.
    async fn shut_down(&mut self) {
        self.endpoints.state.stopping.send_replace(true);
        let _ = self.stop.send(true);
        for task in self.serving.drain(..) {
            task.await
                .expect("a listener's task ends")
                .expect("a listener serves");
        }
        if let Some(workers) = self.workers.take() {
            workers.stop().await;
        }
        self.store.close();
    }
}

impl std::ops::Deref for TestServer {
    type Target = Endpoints;

    fn deref(&self) -> &Endpoints {
        &self.endpoints
    }
}

impl Endpoints {
    /// The endpoints of a server serving `state` at these URLs. The operator token is the
    /// sandbox credentials', else one issued now (a production server has no credentials).
    pub async fn new(
        state: AppState,
        merchant_url: String,
        operator_url: String,
        cabinet_url: Option<String>,
        credentials: Option<SandboxCredentials>,
    ) -> Endpoints {
        let operator_token = match &credentials {
            Some(c) => c.operator_token.clone(),
            None => state
                .service
                .directory()
                .issue_operator_token()
                .await
                .expect("an operator token")
                .into(),
        };
        Endpoints {
            state,
            merchant_url,
            operator_url,
            operator_token,
            cabinet_url,
            credentials,
        }
    }

    /// The sandbox credentials.
    pub fn creds(&self) -> &SandboxCredentials {
        self.credentials.as_ref().expect("a sandbox server")
    }

    /// A signing client for the sandbox's demo project.
    pub fn client(&self) -> MerchantClient {
        MerchantClient::from_credentials(self.creds()).expect("the bootstrapped key parses")
    }

    /// The demo project's id.
    pub fn project(&self) -> ProjectId {
        self.creds().project_id.parse().expect("a UUID")
    }

    /// Changes the demo project's settings through the core.
    pub async fn patch_project(&self, patch: ProjectPatch) {
        self.state
            .service
            .directory()
            .update_project(self.project(), patch, &Actor("test".into()))
            .await
            .expect("the patch applies");
    }

    /// The value of the first `/metrics` sample (operator API) whose line starts with
    /// `prefix` (a name, or a name and the start of its labels).
    pub async fn metric(&self, prefix: &str) -> f64 {
        let text = reqwest::get(format!("{}/metrics", self.operator_url))
            .await
            .expect("the operator listener answers")
            .text()
            .await
            .expect("metrics text");
        let line = text
            .lines()
            .find(|l| l.starts_with(prefix))
            .unwrap_or_else(|| panic!("no {prefix} in:\n{text}"));
        line.rsplit_once(' ')
            .and_then(|(_, v)| v.parse().ok())
            .unwrap_or_else(|| panic!("a value: {line}"))
    }
}

/// The service over `store` with the sandbox provider, the fixed rates and `config`'s
/// settings, verifying signatures in batches and measuring the store and the provider into
/// `metrics` as `payments-server` does.
fn service(
    store: &Arc<SqliteStore>,
    config: &TestConfig,
    sealing_key: [u8; 32],
    metrics: &Arc<crate::metrics::Metrics>,
) -> PaymentService {
    let sqlite = store;
    let store: Arc<dyn Store> = store.clone();
    let provider = Arc::new(SandboxProvider::new(store.clone()));
    let (store, provider) = crate::measured::measure(store, provider, metrics);
    let clock = config
        .clock
        .clone()
        .unwrap_or_else(|| Arc::new(SystemClock));
    let verifier = SignatureBatcher::new(crate::batch::DEFAULT_MAX_BATCH, Duration::from_millis(1));
    let ports = Ports::new(
        store,
        provider,
        Arc::new(FixedRates::sandbox_defaults()),
        clock,
        Arc::new(OsRandom),
    )
    .with_verifier(Arc::new(verifier));
    let mut settings = config.service.clone();
    if !settings.sealing.is_configured() {
        settings.sealing = SealingKeys::new(SealingKey::from_bytes(sealing_key), Vec::new());
    }
    // The store seals requisites and keeps their keyed digests under the same keys, as
    // `payments-server` installs them.
    sqlite
        .requisite_sealing()
        .install(
            settings.sealing.clone(),
            Arc::new(OsRandom),
            payments_store_sqlite::SealWrites::Sealed,
        )
        .expect("a store opened for this server has no requisite keys yet");
    PaymentService::new(ports, settings, config.auth.clone())
}

/// A listener on 127.0.0.1, on a port the system chooses.
async fn bind() -> TcpListener {
    TcpListener::bind("127.0.0.1:0")
        .await
        .expect("a listener on 127.0.0.1")
}

/// `http://<address>` of `listener`.
fn url(listener: &TcpListener) -> String {
    format!(
        "http://{}",
        listener
            .local_addr()
            .expect("a bound listener has an address")
    )
}

/// The system clock moved forward by an offset that a test can grow: the server runs on real
/// time (timers sleep for real), but a test can step past a TOTP time step or a session
/// timeout at once instead of sleeping.
#[derive(Debug, Clone, Default)]
pub struct ShiftedClock {
    offset_ms: Arc<std::sync::atomic::AtomicI64>,
}

impl ShiftedClock {
    /// The system clock, not shifted yet.
    pub fn new() -> ShiftedClock {
        ShiftedClock::default()
    }

    /// Moves this clock `d` further ahead of the system clock.
    pub fn advance(&self, d: Duration) {
        let ms = i64::try_from(d.as_millis()).unwrap_or(i64::MAX);
        self.offset_ms
            .fetch_add(ms, std::sync::atomic::Ordering::SeqCst);
    }
}

impl Clock for ShiftedClock {
    fn now(&self) -> Timestamp {
        let offset = self.offset_ms.load(std::sync::atomic::Ordering::SeqCst);
        Timestamp::from_unix_millis(SystemClock.now().unix_millis().saturating_add(offset))
    }

    fn sleep(&self, duration: Duration) -> Sleep {
        SystemClock.sleep(duration)
    }
}
