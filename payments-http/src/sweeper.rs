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
///
/// With several nodes on one database, each tick's sweep and each purge run on the node that
/// takes the task's turn ([`PaymentService::take_turn`]); the others skip it. (A sweep racing
/// another would still be correct, each change being checked against the payment's version;
/// the turns only spare the duplicate work.)
pub async fn run(service: PaymentService, interval: Duration, mut stop: watch::Receiver<bool>) {
    let mut last_purge = Instant::now();
    loop {
        let my_turn = match service.take_turn("sweep", interval).await {
            Ok(turn) => turn,
            Err(e) => {
                tracing::warn!(error = %e.message, "lifecycle sweep: cannot take a turn");
                false
            }
        };
        if my_turn && sweep_due(&service, &stop).await {
            return;
        }
        if last_purge.elapsed() >= NONCE_PURGE_EVERY {
            last_purge = Instant::now();
            match service.take_turn("nonce-purge", NONCE_PURGE_EVERY).await {
                Ok(true) => {
                    if let Err(e) = service.purge_nonces().await {
                        tracing::warn!(error = %e, "nonce purge failed");
                    }
                }
                Ok(false) => {}
                Err(e) => tracing::warn!(error = %e.message, "nonce purge: cannot take a turn"),
            }
        }
        tokio::select! {
            _ = tokio::time::sleep(interval) => {}
            _ = stop.changed() => return,
        }
    }
}

/// Sweeps in batches until fewer than a batch are due; `true` when `stop` turned true
/// meanwhile.
async fn sweep_due(service: &PaymentService, stop: &watch::Receiver<bool>) -> bool {
    loop {
        // Checked between batches too: after a mass expiry (millions of payments due at
        // once) the batches can go on for many minutes, and shutdown must not wait for them.
        if *stop.borrow() {
            return true;
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
                    return false;
                }
            }
            Err(e) => {
                tracing::warn!(error = %e, "lifecycle sweep failed");
                return false;
            }
        }
    }
}
