//! Background tasks: the lifecycle sweeper (expiry, stuck creates, nonce purge) and the
//! callback dispatcher's loop.

use std::time::{Duration, Instant};

use payments_core::service::PaymentService;
use tokio::sync::watch;

/// Payments handled per sweep step.
pub const SWEEP_BATCH: usize = 500;
/// How often used nonces past their retention are deleted.
pub const NONCE_PURGE_EVERY: Duration = Duration::from_secs(60);

/// Runs the sweeper every `interval` until `stop` turns true: due payments are found through
/// the store's index, so a sweep costs what is due, not what is stored. The callbacks of
/// expired payments wake the dispatcher through the service (see `AppState::new`).
pub async fn run(service: PaymentService, interval: Duration, mut stop: watch::Receiver<bool>) {
    let mut last_purge = Instant::now();
    loop {
        loop {
            // Checked between batches too: after a mass expiry (millions of payments due at
            // once) the batches can go on for many minutes, and shutdown must not wait for them.
            if *stop.borrow() {
                return;
            }
            match service.sweep(SWEEP_BATCH).await {
                Ok(report) => {
                    if report.expired + report.recovered > 0 {
                        tracing::info!(
                            expired = report.expired,
                            recovered = report.recovered,
                            "lifecycle sweep"
                        );
                    }
                    if report.expired + report.recovered < SWEEP_BATCH {
                        break;
                    }
                }
                Err(e) => {
                    tracing::warn!(error = %e, "lifecycle sweep failed");
                    break;
                }
            }
        }
        if last_purge.elapsed() >= NONCE_PURGE_EVERY {
            last_purge = Instant::now();
            if let Err(e) = service.purge_nonces().await {
                tracing::warn!(error = %e, "nonce purge failed");
            }
        }
        tokio::select! {
            _ = tokio::time::sleep(interval) => {}
            _ = stop.changed() => return,
        }
    }
}
