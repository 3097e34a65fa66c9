//! The running server: builds the service over SQLite, binds both listeners (port 0 works),
//! runs the APIs, the callback dispatcher (unless `callback_dispatch` is off) and the lifecycle
//! sweeper, and shuts down gracefully.

use std::future::Future;
use std::net::{SocketAddr, TcpListener};
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use axum_server::tls_rustls::RustlsConfig;
use axum_server::Handle;
use payments_core::auth::Environment;
use payments_core::bank::BankCatalog;
use payments_core::callback::AddressPolicy;
use payments_core::service::{AuthConfig, PaymentService, Ports, ServiceConfig};
use payments_core::store::Store;
use payments_store_sqlite::{SqliteOptions, SqliteStore, Synchronous};
use tokio::sync::watch;

use crate::config::{Durability, Settings};
use crate::dispatcher::{Dispatcher, DispatcherConfig};
use crate::sandbox::{FixedRates, SandboxProvider};
use crate::state::AppState;
use crate::system::{OsRandom, SystemClock};

/// Why the server could not start.
#[derive(Debug, thiserror::Error)]
#[error("{0}")]
pub struct StartError(pub String);

fn start_err(m: impl std::fmt::Display) -> StartError {
    StartError(m.to_string())
}

/// A built, bound server, not yet serving.
#[derive(Debug)]
pub struct Application {
    settings: Settings,
    state: AppState,
    store: Arc<SqliteStore>,
    merchant: TcpListener,
    operator: TcpListener,
    tls: Option<RustlsConfig>,
    dispatcher: DispatcherConfig,
    credentials: Option<PathBuf>,
}

impl Application {
    /// Opens the store, builds the service, bootstraps an empty sandbox and binds the
    /// listeners.
    pub async fn build(settings: Settings) -> Result<Application, StartError> {
        if settings.environment == Environment::Production {
            tracing::warn!("production mode uses the bundled sandbox requisite provider: embed payments-core with a real RequisiteProvider to issue real requisites");
        }
        if settings.allow_local_callbacks {
            tracing::warn!("PAYMENTS_ALLOW_LOCAL_CALLBACKS is on: http:// and loopback callback URLs are accepted (development only)");
        }
        if settings.callback_retry_delays != payments_core::callback::RetrySchedule::default() {
            tracing::warn!(delays = %settings.callback_retry_delays, "callback retry delays differ from the spec's 30,60 (development setting)");
        }
        if !settings.callback_dispatch {
            tracing::warn!("callback dispatch is off (callback_dispatch = false): callback events are stored in the outbox but not sent until a server with dispatch on runs over this data dir");
        }
        let OpenedService { service, store } = open_service(&settings, true).await?;
        let state = AppState::new(service, settings.environment, settings.public_scheme());

        let bind = |addr: SocketAddr| -> Result<TcpListener, StartError> {
            let l = TcpListener::bind(addr)
                .map_err(|e| start_err(format!("cannot listen on {addr}: {e}")))?;
            l.set_nonblocking(true).map_err(start_err)?;
            Ok(l)
        };
        let merchant = bind(settings.listen)?;
        let operator = bind(settings.operator_listen)?;
        let tls = match (&settings.tls_cert, &settings.tls_key) {
            (Some(cert), Some(key)) => Some(
                RustlsConfig::from_pem_file(cert, key)
                    .await
                    .map_err(|e| start_err(format!("TLS certificate or key: {e}")))?,
            ),
            _ => None,
        };
        let dispatcher = DispatcherConfig::from_settings(&settings)
            .map_err(|e| start_err(format!("callback dispatcher: {e}")))?;
        let mut app = Application {
            dispatcher,
            settings,
            state,
            store,
            merchant,
            operator,
            tls,
            credentials: None,
        };
        if app.settings.environment == Environment::Sandbox {
            app.credentials = crate::bootstrap::bootstrap_sandbox(
                &app.state.service,
                &app.settings.data_dir,
                &app.base_url(),
                &app.operator_url(),
            )
            .await
            .map_err(|e| start_err(format!("sandbox bootstrap: {}", e.message)))?;
        }
        Ok(app)
    }

    /// The merchant listener's address.
    pub fn merchant_addr(&self) -> SocketAddr {
        self.merchant
            .local_addr()
            .expect("a bound listener has an address")
    }

    /// The operator listener's address.
    pub fn operator_addr(&self) -> SocketAddr {
        self.operator
            .local_addr()
            .expect("a bound listener has an address")
    }

    /// The merchant API's base URL: the configured public URL, else the listener's.
    pub fn base_url(&self) -> String {
        match &self.settings.public_url {
            Some(u) => u.clone(),
            None => format!(
                "{}://{}",
                self.settings.public_scheme(),
                self.merchant_addr()
            ),
        }
    }

    /// The operator API's base URL.
    pub fn operator_url(&self) -> String {
        format!("http://{}", self.operator_addr())
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
        let Application {
            settings,
            state,
            store,
            merchant,
            operator,
            tls,
            dispatcher,
            ..
        } = self;
        let dispatcher = Dispatcher::new(state.service.clone(), dispatcher, state.metrics.clone())
            .map_err(|e| start_err(format!("callback dispatcher: {e}")))?
            .with_notifier(state.outbox_notify.clone());
        let merchant_handle = Handle::new();
        let operator_handle = Handle::new();
        let merchant_app =
            crate::app(state.clone()).into_make_service_with_connect_info::<SocketAddr>();
        let operator_app =
            crate::operator_app(state.clone()).into_make_service_with_connect_info::<SocketAddr>();
        let merchant_task = match tls {
            Some(cfg) => tokio::spawn(
                axum_server::from_tcp_rustls(merchant, cfg)
                    .handle(merchant_handle.clone())
                    .serve(merchant_app),
            ),
            None => tokio::spawn(
                axum_server::from_tcp(merchant)
                    .handle(merchant_handle.clone())
                    .serve(merchant_app),
            ),
        };
        let operator_task = tokio::spawn(
            axum_server::from_tcp(operator)
                .handle(operator_handle.clone())
                .serve(operator_app),
        );
        let (stop_tx, stop_rx) = watch::channel(false);
        let sweeper = tokio::spawn(crate::sweeper::run(
            state.service.clone(),
            settings.sweep_interval,
            state.outbox_notify.clone(),
            stop_rx.clone(),
        ));
        // With dispatch off the dispatcher is built (so its settings are still checked) but
        // never run: events stay pending in the outbox for a later server.
        let dispatcher = settings.callback_dispatch.then(|| {
            let mut dispatcher_stop = stop_rx;
            tokio::spawn(dispatcher.run(async move {
                let _ = dispatcher_stop.wait_for(|stop| *stop).await;
            }))
        });

        shutdown.await;
        tracing::info!("shutting down: no new connections, finishing in-flight requests");
        merchant_handle.graceful_shutdown(Some(settings.shutdown_grace));
        operator_handle.graceful_shutdown(Some(settings.shutdown_grace));
        let _ = merchant_task.await;
        let _ = operator_task.await;
        let _ = stop_tx.send(true);
        let _ = sweeper.await;
        if let Some(dispatcher) = dispatcher {
            let _ = dispatcher.await;
        }
        store.close();
        tracing::info!("stopped");
        Ok(())
    }
}

/// The service over the data dir's SQLite store, without listeners or background tasks: what
/// [`Application::build`] serves and what the operator CLI commands act on.
#[derive(Debug)]
pub struct OpenedService {
    /// The service.
    pub service: PaymentService,
    /// The store under it (close it when done).
    pub store: Arc<SqliteStore>,
}

/// The setting recording which environment a data dir belongs to.
pub const ENVIRONMENT_SETTING: &str = "server.environment";

/// Opens the data dir's store and builds the service over it. `create` allows a new data dir
/// and database; without it a missing database is an error (an operator command with a
/// mistyped `--data-dir` must not create an empty database elsewhere).
///
/// The environment is recorded in the store at first open; a later open with the other
/// environment is refused, because tokens it issued would carry the other prefix and fail.
pub async fn open_service(settings: &Settings, create: bool) -> Result<OpenedService, StartError> {
    let _ = rustls::crypto::ring::default_provider().install_default();
    let db = settings.data_dir.join("payments.db");
    if create {
        std::fs::create_dir_all(&settings.data_dir).map_err(|e| {
            start_err(format!(
                "cannot create {}: {e}",
                settings.data_dir.display()
            ))
        })?;
    } else if !db.exists() {
        return Err(start_err(format!(
            "no database at {} (is --data-dir right? `payments-server serve` creates it)",
            db.display()
        )));
    }
    let options = SqliteOptions {
        synchronous: match settings.durability {
            Durability::Full => Synchronous::Full,
            Durability::Normal => Synchronous::Normal,
        },
        ..SqliteOptions::default()
    };
    let store = Arc::new(
        SqliteStore::open(&db, options).map_err(|e| start_err(format!("{}: {e}", db.display())))?,
    );
    let catalog = match &settings.bank_catalog {
        None => BankCatalog::embedded(),
        Some(path) => {
            let text = std::fs::read_to_string(path)
                .map_err(|e| start_err(format!("bank catalog {}: {e}", path.display())))?;
            BankCatalog::from_json(&text)
                .map_err(|e| start_err(format!("bank catalog {}: {e}", path.display())))?
        }
    };
    let dyn_store: Arc<dyn Store> = store.clone();
    check_environment(dyn_store.as_ref(), settings.environment).await?;
    let ports = Ports {
        store: dyn_store.clone(),
        provider: Arc::new(SandboxProvider::new(dyn_store)),
        rates: Arc::new(FixedRates(settings.rates.clone())),
        clock: Arc::new(SystemClock),
        rng: Arc::new(OsRandom),
        catalog: Arc::new(catalog),
    };
    let config = ServiceConfig {
        callback_policy: AddressPolicy {
            allow_local: settings.allow_local_callbacks,
        },
        retry: settings.callback_retry_delays.clone(),
        ..ServiceConfig::default()
    };
    let mut auth = AuthConfig::for_environment(settings.environment);
    auth.trusted_proxies = settings.trusted_proxies.clone();
    let service = PaymentService::new(ports, config, auth);
    Ok(OpenedService { service, store })
}

async fn check_environment(store: &dyn Store, env: Environment) -> Result<(), StartError> {
    let recorded = store
        .setting(ENVIRONMENT_SETTING)
        .await
        .map_err(start_err)?;
    match recorded {
        None => store
            .put_setting(ENVIRONMENT_SETTING, &env.to_string())
            .await
            .map_err(start_err),
        Some(r) if r == env.to_string() => Ok(()),
        Some(r) => Err(start_err(format!(
            "this data dir belongs to the {r} environment, not {env} (pass --environment {r})"
        ))),
    }
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

/// How long to wait between sweeps when the last one was a full batch.
pub const BUSY_SWEEP: Duration = Duration::from_millis(10);
