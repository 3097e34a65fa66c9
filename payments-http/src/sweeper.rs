//! Background tasks: the lifecycle sweeper (expiry, stuck creates, nonce purge) and the
//! callback dispatcher's loop.

use std::time::{Duration, Instant};

use payments_core::service::PaymentService;
use tokio::sync::watch;

/// Payments handled per sweep step.
pub const SWEEP_BATCH: usize = 500;
/// How often used nonces past their retention are deleted.
pub const NONCE_PURGE_EVERY: Duration = Duration::from_secs(60);
/// How often finished callback events and audit records past their retention are deleted.
pub const RETENTION_EVERY: Duration = Duration::from_secs(600);
/// How often the appeals sweep runs: expiries at their deadline, open appeals sent again.
pub const APPEALS_EVERY: Duration = Duration::from_secs(60);
/// Appeals handled per appeals sweep, of each kind.
pub const APPEALS_BATCH: usize = 100;
/// Rows of each kind deleted per writer job: small, so a purge of millions never holds the
/// writer for long (docs/performance.md measures it).
pub const RETENTION_BATCH: usize = 500;
/// The pause between two retention batches: the writer commits other requests meanwhile.
pub const RETENTION_PAUSE: Duration = Duration::from_millis(20);

/// Runs the sweeper every `interval` until `stop` turns true: due payments are found through
/// the store's index, so a sweep costs what is due, not what is stored. The callbacks of
/// expired payments wake the dispatcher through the service (see `AppState::new`).
///
/// Every [`RETENTION_EVERY`] (and once shortly after the start) it also applies the service's
/// retention ([`Callbacks::purge_expired_records`](payments_core::service::Callbacks::purge_expired_records)) in batches of [`RETENTION_BATCH`]
/// rows with [`RETENTION_PAUSE`] between them, until nothing more is due.
/// With several nodes on one database, each tick's sweep and each purge run on the node that
/// takes the task's turn ([`Payments::take_turn`](payments_core::service::Payments::take_turn)); the others skip it. (A sweep racing
/// another would still be correct, each change being checked against the payment's version;
/// the turns only spare the duplicate work.)
///
/// It stops when `true` is sent on `stop` or when the sender is dropped, and logs which (a
/// dropped sender is a warning: an embedder that let the handle go stops the sweeper, and
/// expiry with it, perhaps without meaning to). A `false` sent does not stop it.
pub async fn run(service: PaymentService, interval: Duration, stop: watch::Receiver<bool>) {
    run_counted(service, None, interval, stop).await
}

/// [`run`], counting the stuck creates it closes into `metrics`
/// (`payments_stuck_creates_total`) when given.
pub async fn run_counted(
    service: PaymentService,
    metrics: Option<std::sync::Arc<crate::metrics::Metrics>>,
    interval: Duration,
    mut stop: watch::Receiver<bool>,
) {
    match sweep_until_stopped(&service, metrics.as_deref(), interval, &mut stop).await {
        Stopped::Asked => tracing::info!("the lifecycle sweeper stopped: asked to"),
        Stopped::SenderDropped => tracing::warn!(
            "the lifecycle sweeper stopped: its stop sender was dropped (keep the sender while \
             the sweeper should run; send `true` on it to stop the sweeper)"
        ),
    }
}

/// Why a background loop ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Stopped {
    /// `true` was sent on the stop channel.
    Asked,
    /// The stop channel's sender is gone.
    SenderDropped,
}

/// Completes when `stop` says stop: `true` sent (also one sent before the call), or the
/// sender dropped; a `false` sent is waited past.
async fn stop_requested(stop: &mut watch::Receiver<bool>) -> Stopped {
    loop {
        if *stop.borrow_and_update() {
            return Stopped::Asked;
        }
        if stop.changed().await.is_err() {
            return if *stop.borrow() {
                Stopped::Asked
            } else {
                Stopped::SenderDropped
            };
        }
    }
}

async fn sweep_until_stopped(
    service: &PaymentService,
    metrics: Option<&crate::metrics::Metrics>,
    interval: Duration,
    stop: &mut watch::Receiver<bool>,
) -> Stopped {
    let mut last_purge = Instant::now();
    let mut last_retention: Option<Instant> = None;
    // On the service's clock, not the machine's: a test that steps the clock to an appeal's
    // deadline sees the next tick expire it.
    let mut last_appeals: Option<payments_core::Timestamp> = None;
    loop {
        let my_turn = match service.payments().take_turn("sweep", interval).await {
            Ok(turn) => turn,
            Err(e) => {
                tracing::warn!(error = %e, "lifecycle sweep: cannot take a turn");
                false
            }
        };
        if my_turn && sweep_due(service, metrics, stop).await {
            return Stopped::Asked;
        }
        let now = service.ports().clock.now();
        if my_turn && last_appeals.is_none_or(|t| now.duration_since(t) >= APPEALS_EVERY) {
            last_appeals = Some(now);
            sweep_appeals(service, metrics).await;
        }
        if last_purge.elapsed() >= NONCE_PURGE_EVERY {
            last_purge = Instant::now();
            match service
                .payments()
                .take_turn("nonce-purge", NONCE_PURGE_EVERY)
                .await
            {
                Ok(true) => {
                    if let Err(e) = service.payments().purge_nonces().await {
                        tracing::warn!(error = %e, "nonce purge failed");
                    }
                }
                Ok(false) => {}
                Err(e) => tracing::warn!(error = %e, "nonce purge: cannot take a turn"),
            }
        }
        if last_retention.is_none_or(|t| t.elapsed() >= RETENTION_EVERY) {
            last_retention = Some(Instant::now());
            if let Some(stopped) = apply_retention(service, stop).await {
                return stopped;
            }
        }
        tokio::select! {
            _ = tokio::time::sleep(interval) => {}
            stopped = stop_requested(stop) => return stopped,
        }
    }
}

/// Deletes what the retention periods no longer keep, batch by batch; why it stopped when
/// `stop` said stop meanwhile.
async fn apply_retention(
    service: &PaymentService,
    stop: &mut watch::Receiver<bool>,
) -> Option<Stopped> {
    let (mut events, mut audit, mut requests) = (0u64, 0u64, 0u64);
    loop {
        if *stop.borrow() {
            return Some(Stopped::Asked);
        }
        match service
            .callbacks()
            .purge_expired_records(RETENTION_BATCH)
            .await
        {
            Ok(r) => {
                events += r.events;
                audit += r.audit;
                requests += r.requests;
                let full = RETENTION_BATCH as u64;
                if r.events < full && r.audit < full && r.requests < full {
                    break;
                }
            }
            Err(e) => {
                tracing::warn!(error = %e, "retention purge failed");
                break;
            }
        }
        tokio::select! {
            _ = tokio::time::sleep(RETENTION_PAUSE) => {}
            stopped = stop_requested(stop) => return Some(stopped),
        }
    }
    if events + audit + requests > 0 {
        tracing::info!(
            events,
            audit,
            requests,
            "retention: finished callback events, audit records and logged requests deleted"
        );
    }
    None
}

/// One appeals sweep ([`Appeals::sweep_appeals`](payments_core::service::Appeals::sweep_appeals)),
/// then the count of appeals still waiting, and of those past their deadline, for the metrics.
async fn sweep_appeals(service: &PaymentService, metrics: Option<&crate::metrics::Metrics>) {
    use payments_core::appeal::{AppealQuery, AppealState};
    let appeals = service.appeals();
    let report = match appeals.sweep_appeals(APPEALS_BATCH).await {
        Ok(r) => r,
        Err(e) => {
            tracing::warn!(error = %e, "appeals sweep failed");
            return;
        }
    };
    if report.expired + report.submitted > 0 {
        tracing::info!(
            expired = report.expired,
            submitted = report.submitted,
            "appeals sweep"
        );
    }
    let now = service.ports().clock.now();
    let waiting = AppealQuery {
        states: vec![AppealState::Open, AppealState::UnderReview],
        ..AppealQuery::newest(1_000)
    };
    let Ok(page) = appeals.find_appeals(&waiting).await else {
        return;
    };
    let overdue = page.appeals.iter().filter(|a| a.deadline <= now).count();
    let oldest = page.appeals.iter().map(|a| a.created_at).min();
    let waited = oldest.map_or(0, |t| now.duration_since(t).as_secs());
    if let Some(m) = metrics {
        m.appeals_swept(report.expired, page.appeals.len(), overdue, waited);
    }
}

/// Sweeps in batches until fewer than a batch are due; `true` when `stop` turned true
/// meanwhile.
async fn sweep_due(
    service: &PaymentService,
    metrics: Option<&crate::metrics::Metrics>,
    stop: &watch::Receiver<bool>,
) -> bool {
    loop {
        // Checked between batches too: after a mass expiry (millions of payments due at
        // once) the batches can go on for many minutes, and shutdown must not wait for them.
        if *stop.borrow() {
            return true;
        }
        match service.payments().sweep(SWEEP_BATCH).await {
            Ok(report) => {
                if let Some(m) = metrics {
                    m.count_stuck_creates(&report);
                }
                if report.ambiguous > 0 {
                    let ids: Vec<String> = report
                        .ambiguous_ids
                        .iter()
                        .map(|id| id.to_string())
                        .collect();
                    tracing::warn!(
                        ambiguous = report.ambiguous,
                        payment_ids = ids.join(",").as_str(),
                        "lifecycle sweep: creates that never recorded their provider's answer, \
                         and the provider could not say either, closed as \
                         provider_result_ambiguous: reconcile them with the provider"
                    );
                }
                if report.changed() > 0 {
                    tracing::info!(
                        expired = report.expired,
                        recovered = report.recovered,
                        deferred = report.deferred,
                        ambiguous = report.ambiguous,
                        "lifecycle sweep"
                    );
                }
                if report.changed() < SWEEP_BATCH {
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

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn a_dropped_sender_stops_with_its_own_reason() {
        let (tx, mut rx) = watch::channel(false);
        drop(tx);
        assert_eq!(stop_requested(&mut rx).await, Stopped::SenderDropped);
    }

    #[tokio::test]
    async fn a_false_is_waited_past_and_a_true_stops() {
        let (tx, mut rx) = watch::channel(false);
        let waiter = tokio::spawn(async move { stop_requested(&mut rx).await });
        tx.send(false).expect("the waiter listens");
        tokio::task::yield_now().await;
        assert!(!waiter.is_finished(), "a false does not stop");
        tx.send(true).expect("the waiter listens");
        assert_eq!(waiter.await.expect("no panic"), Stopped::Asked);
    }

    #[tokio::test]
    async fn a_true_sent_before_the_wait_or_before_the_drop_is_a_request() {
        let (tx, mut rx) = watch::channel(true);
        assert_eq!(stop_requested(&mut rx).await, Stopped::Asked);
        let (tx2, mut rx2) = watch::channel(false);
        tx2.send(true).expect("listening");
        drop(tx2);
        assert_eq!(stop_requested(&mut rx2).await, Stopped::Asked);
        drop(tx);
    }
}
