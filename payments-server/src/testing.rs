//! A real server for tests (feature `testing`): the whole `Application` on 127.0.0.1:0 over a
//! fresh SQLite data dir, for this crate's integration tests, the examples' tests and embedders'
//! own tests; and the place where the tests of the workspace get their listening addresses
//! ([`test_settings`], [`free_port`]; `payments_http::testing::TestServer` binds 127.0.0.1:0
//! itself), so that no test binds a fixed port and a test run passes beside a sandbox on its
//! default ports. Its [`Endpoints`] and [`ShiftedClock`] are payments-http's test server's.

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

#[cfg(feature = "cabinet")]
use payments_cabinet::Cabinet;
use payments_client::SandboxCredentials;
use payments_core::store::Store;
use payments_core::Clock;
use payments_providers::sandbox::{FixedRates, SandboxProvider};
use payments_store_sqlite::SqliteStore;
use tempfile::TempDir;
use tokio::sync::oneshot;

use crate::bootstrap::CREDENTIALS_FILE;
use crate::config::{ProviderKind, RateSourceKind, Settings};
use crate::server::{open_store, Application, ApplicationBuilder};
pub use payments_http::testing::{Endpoints, ShiftedClock};

/// The defaults over `data_dir` with every listener on 127.0.0.1:0 (the merchant, operator and
/// cabinet listeners; the upstream and metrics listeners stay off): what a test builds its
/// [`Settings`] from instead of [`Settings::default`], whose listeners are the sandbox's fixed
/// ports 8080-8082.
pub fn test_settings(data_dir: &std::path::Path) -> Settings {
    let any_port = SocketAddr::from(([127, 0, 0, 1], 0));
    let mut settings = Settings {
        data_dir: data_dir.to_path_buf(),
        ..Settings::default()
    };
    settings.listen.merchant = any_port;
    settings.listen.operator = any_port;
    settings.cabinet.listen = any_port;
    settings.upstream.listen = None;
    settings.metrics.listen = None;
    // A small disk reserve: the tests start hundreds of servers.
    settings.store.reserve_mib = 1;
    settings
}

/// A TCP port on 127.0.0.1 that no listener held a moment ago, for a listener that cannot be
/// given port 0 and report back (a `payments-server` child told its ports on its command line,
/// a guide's receiver in another language).
///
/// The port comes from below the kernel's ephemeral range
/// (`/proc/sys/net/ipv4/ip_local_port_range`), where neither another test's `bind(0)` nor an
/// outgoing connection's source port can take it between this call and the child's own bind;
/// this process never hands out the same port twice; the walk starts at a place drawn per
/// process, so that test processes running at once rarely try the same ports; and the
/// sandbox's defaults (8080-8082) are never chosen.
pub fn free_port() -> u16 {
    use std::sync::atomic::{AtomicU32, Ordering};
    use std::sync::OnceLock;
    static START: OnceLock<u32> = OnceLock::new();
    static NEXT: AtomicU32 = AtomicU32::new(0);
    let (low, high) = below_ephemeral_range();
    let span = u32::from(high - low);
    let start = *START.get_or_init(|| {
        let mut seed = [0u8; 4];
        getrandom::getrandom(&mut seed).expect("the OS gives random bytes");
        u32::from_le_bytes(seed) % span
    });
    for _ in 0..span {
        let n = NEXT.fetch_add(1, Ordering::Relaxed);
        let port = low + u16::try_from((start + n) % span).expect("below the span");
        if (8080..=8082).contains(&port) {
            continue;
        }
        if std::net::TcpListener::bind(("127.0.0.1", port)).is_ok() {
            return port;
        }
    }
    // Every port below the ephemeral range is taken: the kernel's choice, racy as it is.
    std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .expect("a free port on 127.0.0.1")
        .port()
}

/// [`free_port`] as `127.0.0.1:<port>`.
pub fn free_addr() -> SocketAddr {
    SocketAddr::from(([127, 0, 0, 1], free_port()))
}

/// The ports [`free_port`] chooses from: 10000 up to the start of the ephemeral range (Linux's
/// default 32768 when it cannot be read), or 10000-32767 if that range starts too low.
fn below_ephemeral_range() -> (u16, u16) {
    const LOW: u16 = 10_000;
    let ephemeral_start = std::fs::read_to_string("/proc/sys/net/ipv4/ip_local_port_range")
        .ok()
        .and_then(|s| s.split_whitespace().next()?.parse::<u16>().ok())
        .unwrap_or(32_768);
    if ephemeral_start > LOW + 1_000 {
        (LOW, ephemeral_start)
    } else {
        (LOW, 32_768)
    }
}

/// A running server.
#[derive(Debug)]
pub struct TestServer {
    /// The state (its service), the merchant, operator and cabinet URLs, the operator token
    /// and the sandbox credentials (`None` in production, which never bootstraps), with the
    /// requests a test makes through them ([`Endpoints::client`], [`Endpoints::metric`]):
    /// also the test server's own by dereference (`server.state`, `server.client()`).
    pub endpoints: Endpoints,
    /// The provider-notification URL, when `upstream_listen` is set.
    pub notifications_url: Option<String>,
    /// `http://127.0.0.1:<port>` of the `/metrics` listener, when `metrics_listen` is set.
    pub metrics_url: Option<String>,
    /// The web cabinet (users, sign-in), when it runs.
    #[cfg(feature = "cabinet")]
    pub cabinet: Option<Cabinet>,
    /// The data dir, deleted on drop.
    pub dir: TempDir,
    stop: Option<oneshot::Sender<()>>,
    task: Option<tokio::task::JoinHandle<()>>,
}

/// Runs `app` on a task of its own until the sender is used (or dropped), then closes
/// `store`.
fn run_in_background(
    app: Application,
    store: Option<Arc<SqliteStore>>,
) -> (oneshot::Sender<()>, tokio::task::JoinHandle<()>) {
    let (tx, rx) = oneshot::channel::<()>();
    let task = tokio::spawn(async move {
        app.run_until_stopped(async {
            let _ = rx.await;
        })
        .await
        .expect("the server stops cleanly");
        if let Some(store) = store {
            store.close();
        }
    });
    (tx, task)
}

/// The test server's application: the sandbox provider over `store` and the fixed rates,
/// unless the settings name the upstream's (see [`TestServer::start_in`]).
fn builder(
    settings: &Settings,
    store: Option<&Arc<SqliteStore>>,
    clock: Option<Arc<dyn Clock>>,
    lookup: Option<Arc<dyn payments_http::resolver::HostLookup>>,
) -> ApplicationBuilder {
    let mut builder = Application::builder(settings.clone());
    if let Some(store) = store {
        let dyn_store: Arc<dyn Store> = store.clone();
        builder = builder
            .store(dyn_store.clone())
            .cabinet_store(store.clone());
        if settings.upstream.provider == ProviderKind::Sandbox {
            builder = builder.provider(Arc::new(SandboxProvider::new(dyn_store)));
        }
    }
    if settings.upstream.rate_source == RateSourceKind::Fixed {
        builder = builder.rates(Arc::new(FixedRates(settings.rates.clone())));
    }
    if let Some(clock) = clock {
        builder = builder.clock(clock);
    }
    if let Some(lookup) = lookup {
        builder = builder.callback_lookup(lookup);
    }
    builder
}

impl TestServer {
    /// A bootstrapped sandbox with the defaults and a 50 ms sweep interval.
    pub async fn sandbox() -> TestServer {
        TestServer::start(|_| {}).await
    }

    /// A server whose settings are the test defaults changed by `configure` (e.g.
    /// `|s| s.environment = Environment::Production`), over a fresh SQLite data dir, or over
    /// PostgreSQL when `configure` sets `store.database_url`. `TEST_LOG=1` prints the server's
    /// log.
    pub async fn start(configure: impl FnOnce(&mut Settings)) -> TestServer {
        let dir = tempfile::tempdir().expect("a temporary directory");
        TestServer::start_in(dir, configure, None, None).await
    }

    /// [`TestServer::start`] with callback destinations looked up by `lookup` (e.g. a
    /// `payments_http::resolver::StaticLookup` making test names resolve to 127.0.0.1, with
    /// `callbacks.allow_local` set).
    pub async fn start_resolving(
        lookup: Arc<dyn payments_http::resolver::HostLookup>,
        configure: impl FnOnce(&mut Settings),
    ) -> TestServer {
        let dir = tempfile::tempdir().expect("a temporary directory");
        TestServer::start_in(dir, configure, None, Some(lookup)).await
    }

    /// [`TestServer::start`] with the service on `clock` (e.g. a [`ShiftedClock`], to move
    /// past a TOTP time step without sleeping).
    pub async fn start_with_clock(
        clock: Arc<dyn Clock>,
        configure: impl FnOnce(&mut Settings),
    ) -> TestServer {
        let dir = tempfile::tempdir().expect("a temporary directory");
        TestServer::start_in(dir, configure, Some(clock), None).await
    }

    /// A server over the data dir `dir` (one a stopped server left, [`TestServer::stop_keeping_dir`]),
    /// with the test defaults changed by `configure`: for a test that changes the database
    /// between two runs (seeds rows, takes a migration back).
    pub async fn start_over(dir: TempDir, configure: impl FnOnce(&mut Settings)) -> TestServer {
        TestServer::start_in(dir, configure, None, None).await
    }

    /// Stops this server gracefully and starts another over the same data dir (same database
    /// and credentials file, so no new bootstrap) with the test defaults changed by `configure`;
    /// the settings of this run are not carried over. The new server listens on new ports;
    /// [`Endpoints::credentials`] carry its URLs.
    pub async fn restart(mut self, configure: impl FnOnce(&mut Settings)) -> TestServer {
        self.shut_down().await;
        TestServer::start_in(self.dir, configure, None, None).await
    }

    async fn start_in(
        dir: TempDir,
        configure: impl FnOnce(&mut Settings),
        clock: Option<Arc<dyn Clock>>,
        lookup: Option<Arc<dyn payments_http::resolver::HostLookup>>,
    ) -> TestServer {
        if std::env::var_os("TEST_LOG").is_some() {
            crate::telemetry::init(Default::default(), "info");
        }
        let mut settings = test_settings(dir.path());
        settings.tuning.sweep_interval = Duration::from_millis(50);
        configure(&mut settings);
        let settings = settings.checked().expect("valid test settings");
        // `configure` may have chosen another data dir than the temporary one.
        let credentials_file = settings.data_dir.join(CREDENTIALS_FILE);
        // The test server is an embedding that chooses the sandbox provider and the fixed
        // rates itself, in production too, so that production behaviour (tokens, test
        // helpers, TLS) can be tested without an upstream; `provider = "http"` and
        // `rate_source = "http"` get the settings' upstream ports, as `serve` does. With
        // `store.database_url` the application opens that PostgreSQL database itself, as
        // `serve` does, with its own sandbox provider.
        let store = settings
            .store
            .database_url
            .is_none()
            .then(|| open_store(&settings, true).expect("the test database opens"));
        let app = builder(&settings, store.as_ref(), clock, lookup)
            .build()
            .await
            .expect("the server starts");
        let state = app.state().clone();
        let merchant_url = app.base_url();
        let operator_url = app.operator_url();
        let notifications_url = app.notifications_url();
        let metrics_url = app.metrics_addr().map(|a| format!("http://{a}"));
        let cabinet_url = app.cabinet_url();
        #[cfg(feature = "cabinet")]
        let cabinet = app.cabinet().cloned();
        let credentials = credentials_file.exists().then(|| {
            SandboxCredentials::from_file(&credentials_file)
                .expect("the credentials file reads")
                // The file keeps the URLs of the server that bootstrapped the data dir.
                .at(&merchant_url, &operator_url, cabinet_url.as_deref())
        });
        let endpoints =
            Endpoints::new(state, merchant_url, operator_url, cabinet_url, credentials).await;
        let (tx, task) = run_in_background(app, store);
        TestServer {
            endpoints,
            notifications_url,
            metrics_url,
            #[cfg(feature = "cabinet")]
            cabinet,
            dir,
            stop: Some(tx),
            task: Some(task),
        }
    }

    /// Stops the server gracefully and waits for it.
    pub async fn stop(mut self) {
        self.shut_down().await;
    }

    /// Stops the server gracefully and hands over its data dir (deleted when the returned
    /// value is dropped): for tests that start something else over it.
    pub async fn stop_keeping_dir(mut self) -> TempDir {
        self.shut_down().await;
        self.dir
    }

    async fn shut_down(&mut self) {
        if let Some(tx) = self.stop.take() {
            let _ = tx.send(());
        }
        if let Some(task) = self.task.take() {
            task.await.expect("the server task ends");
        }
    }
}

impl std::ops::Deref for TestServer {
    type Target = Endpoints;

    fn deref(&self) -> &Endpoints {
        &self.endpoints
    }
}
