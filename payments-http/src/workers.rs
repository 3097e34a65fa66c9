//! The background work an embedding runs beside the routers, behind one handle: the callback
//! dispatcher and the lifecycle sweeper start together and stop together.
//!
//! ```no_run
//! # async fn f(state: payments_http::AppState) -> Result<(), Box<dyn std::error::Error>> {
//! use std::time::Duration;
//!
//! use payments_http::dispatcher::{Dispatcher, DispatcherConfig};
//! use payments_http::workers::Workers;
//!
//! let dispatcher = Dispatcher::for_state(&state, DispatcherConfig::default())?;
//! let workers = Workers::start(&state.service, Some(dispatcher), Duration::from_secs(1));
//! // ... serve payments_http::app(state) ...
//! workers.stop().await; // the attempts in flight finish first
//! # Ok(())
//! # }
//! ```

use std::time::Duration;

use payments_core::service::PaymentService;
use tokio::sync::watch;
use tokio::task::JoinHandle;

use crate::dispatcher::{Dispatcher, DispatcherConfig, DispatcherError};
use crate::AppState;

/// How often [`Workers::for_state`] sweeps: the server's default (`sweep_interval`).
pub const SWEEP_INTERVAL: Duration = Duration::from_secs(1);

/// The running dispatcher and sweeper. [`Workers::stop`] stops both and waits for them.
/// Dropping the handle without `stop` stops them too, without waiting (the sweeper logs a
/// warning that its stop sender was dropped: call `stop` at shutdown).
#[derive(Debug)]
pub struct Workers {
    stop: watch::Sender<bool>,
    dispatcher: Option<JoinHandle<()>>,
    sweeper: JoinHandle<()>,
    /// The store's heartbeat ([`crate::heartbeat`]), with metrics to show it in.
    heartbeat: Option<JoinHandle<()>>,
    /// This node's providers' health report ([`crate::provider_reports`]), when the state has
    /// providers and [`crate::providers::ProviderReports`].
    reports: Option<JoinHandle<()>>,
}

impl Workers {
    /// Starts the lifecycle sweeper over `service` every `sweep_interval`
    /// ([`crate::sweeper::run`]) and, when given, the callback `dispatcher`
    /// ([`Dispatcher::run`]); `None` leaves callback events queued in the outbox (dispatch off).
    /// Call it inside a tokio runtime.
    pub fn start(
        service: &PaymentService,
        dispatcher: Option<Dispatcher>,
        sweep_interval: Duration,
    ) -> Workers {
        Workers::spawn(service, None, dispatcher, sweep_interval)
    }

    /// [`Workers::start`] over `state`'s service, the sweeper counting into `state`'s metrics
    /// (`payments_stuck_creates_total`), the store's heartbeat
    /// ([`crate::heartbeat`], `payments_store_unanswered_seconds`) and, when the state has
    /// providers and [`crate::providers::ProviderReports`], this node's report of their health
    /// ([`crate::provider_reports`]).
    pub fn start_for(
        state: &AppState,
        dispatcher: Option<Dispatcher>,
        sweep_interval: Duration,
    ) -> Workers {
        let mut workers = Workers::spawn(
            &state.service,
            Some(state.metrics.clone()),
            dispatcher,
            sweep_interval,
        );
        if let (Some(source), Some(reports)) = (&state.providers, &state.provider_reports) {
            workers.reports = Some(tokio::spawn(crate::provider_reports::run(
                state.service.store().clone(),
                state.service.ports().clock.clone(),
                source.clone(),
                reports.clone(),
                workers.stop.subscribe(),
            )));
        }
        workers
    }

    fn spawn(
        service: &PaymentService,
        metrics: Option<std::sync::Arc<crate::metrics::Metrics>>,
        dispatcher: Option<Dispatcher>,
        sweep_interval: Duration,
    ) -> Workers {
        let (stop, stopped) = watch::channel(false);
        let heartbeat = metrics.as_ref().map(|m| {
            tokio::spawn(crate::heartbeat::run(
                service.store().clone(),
                m.store_heartbeat(),
                stopped.clone(),
            ))
        });
        let sweeper = tokio::spawn(crate::sweeper::run_counted(
            service.clone(),
            metrics,
            sweep_interval,
            stopped.clone(),
        ));
        let dispatcher = dispatcher.map(|dispatcher| {
            let mut stopped = stopped;
            tokio::spawn(dispatcher.run(async move {
                // A dropped sender (the handle dropped) stops it as well.
                let _ = stopped.wait_for(|stop| *stop).await;
            }))
        });
        Workers {
            stop,
            dispatcher,
            sweeper,
            heartbeat,
            reports: None,
        }
    }

    /// The workers an embedding usually runs: the dispatcher of `state` with the spec's
    /// settings ([`DispatcherConfig::default`]: public destinations only, 10 s per attempt)
    /// and the sweeper every [`SWEEP_INTERVAL`]. Call it inside a tokio runtime.
    ///
    /// # Errors
    /// [`DispatcherError`] when the dispatcher's HTTP client cannot be built.
    pub fn for_state(state: &AppState) -> Result<Workers, DispatcherError> {
        let dispatcher = Dispatcher::for_state(state, DispatcherConfig::default())?;
        Ok(Workers::start_for(state, Some(dispatcher), SWEEP_INTERVAL))
    }

    /// Whether the dispatcher runs (it was given to [`Workers::start`]).
    pub fn dispatches(&self) -> bool {
        self.dispatcher.is_some()
    }

    /// Stops the sweeper (between its batches) and the dispatcher (it claims nothing more and
    /// lets the attempts in flight finish), and waits for both.
    pub async fn stop(self) {
        let _ = self.stop.send(true);
        if let Err(e) = self.sweeper.await {
            tracing::error!(error = %e, "the lifecycle sweeper ended abnormally");
        }
        if let Some(heartbeat) = self.heartbeat {
            let _ = heartbeat.await;
        }
        if let Some(reports) = self.reports {
            let _ = reports.await;
        }
        if let Some(dispatcher) = self.dispatcher {
            if let Err(e) = dispatcher.await {
                tracing::error!(error = %e, "the callback dispatcher ended abnormally");
            }
        }
        tracing::info!("background workers stopped");
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use payments_core::auth::Environment;
    use payments_core::service::{AuthConfig, Ports, ServiceConfig};
    use payments_core::testing::{ManualClock, MemoryStore, SeededRandom};
    use payments_core::Timestamp;
    use payments_providers::sandbox::{FixedRates, SandboxProvider};

    use super::*;
    use crate::dispatcher::DispatcherConfig;
    use crate::AppState;

    fn state() -> AppState {
        let store: Arc<dyn payments_core::store::Store> = Arc::new(MemoryStore::new());
        let service = PaymentService::new(
            Ports::new(
                store.clone(),
                Arc::new(SandboxProvider::new(store)),
                Arc::new(FixedRates::sandbox_defaults()),
                Arc::new(ManualClock::new(Timestamp::from_unix_secs(1_790_856_000))),
                Arc::new(SeededRandom::new(5)),
            ),
            ServiceConfig::default(),
            AuthConfig::for_environment(Environment::Sandbox),
        );
        AppState::new(service, "http")
    }

    #[tokio::test]
    async fn stop_stops_both_and_waits_for_them() {
        let state = state();
        let dispatcher =
            Dispatcher::for_state(&state, DispatcherConfig::default()).expect("valid settings");
        let workers = Workers::start(&state.service, Some(dispatcher), Duration::from_secs(3600));
        assert!(workers.dispatches());
        tokio::time::timeout(Duration::from_secs(10), workers.stop())
            .await
            .expect("both stop, though the sweep interval is an hour");
    }

    #[tokio::test]
    async fn without_a_dispatcher_only_the_sweeper_runs() {
        let state = state();
        let workers = Workers::start(&state.service, None, Duration::from_secs(3600));
        assert!(!workers.dispatches());
        let sweeper_done = workers.sweeper.is_finished();
        assert!(!sweeper_done, "the sweeper runs until stopped");
        tokio::time::timeout(Duration::from_secs(10), workers.stop())
            .await
            .expect("the sweeper stops");
    }
}
