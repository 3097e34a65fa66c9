//! The store's heartbeat: one small read every [`HEARTBEAT_INTERVAL`], allowed
//! [`HEARTBEAT_TIMEOUT`], whose last answer `/metrics` shows as
//! `payments_store_unanswered_seconds`. A database that refuses connections, drops them or
//! hangs (a frozen server answers nothing, not even an error) makes the value grow on every
//! node at once, busy or idle, and the shipped alert *Database unreachable* pages on it; the
//! errors of requests alone cannot show a hung database, and an idle node makes none.
//! [`crate::workers::Workers::start_for`] runs it beside the sweeper.

use std::sync::Arc;
use std::time::Duration;

use payments_core::store::Store;
use tokio::sync::watch;
use tokio::time::Instant;

/// How often the heartbeat reads.
pub const HEARTBEAT_INTERVAL: Duration = Duration::from_secs(1);
/// How long one heartbeat read may take before it counts as unanswered.
pub const HEARTBEAT_TIMEOUT: Duration = Duration::from_secs(2);

/// When the store last answered its heartbeat.
#[derive(Debug)]
pub struct StoreHeartbeat {
    last_answer: std::sync::Mutex<Instant>,
}

impl Default for StoreHeartbeat {
    /// Counted from its creation: a store that never answers is unanswered since then.
    fn default() -> StoreHeartbeat {
        StoreHeartbeat {
            last_answer: std::sync::Mutex::new(Instant::now()),
        }
    }
}

impl StoreHeartbeat {
    /// How long the store has gone without answering: under [`HEARTBEAT_INTERVAL`] (plus the
    /// read's time) while it answers.
    pub fn unanswered(&self) -> Duration {
        self.last_answer
            .lock()
            .expect("the heartbeat's lock is never poisoned")
            .elapsed()
    }

    fn answered(&self) {
        *self
            .last_answer
            .lock()
            .expect("the heartbeat's lock is never poisoned") = Instant::now();
    }
}

/// Reads [`payments_core::settings::READ_PROBE`] from `store` every [`HEARTBEAT_INTERVAL`]
/// until `stop` says stop, recording each answer in `beat`. Logs a warning when the store
/// stops answering (with the error, or the time it did not answer in) and a line when it
/// answers again.
pub async fn run(
    store: Arc<dyn Store>,
    beat: Arc<StoreHeartbeat>,
    mut stop: watch::Receiver<bool>,
) {
    let mut failing = false;
    loop {
        let read = tokio::time::timeout(
            HEARTBEAT_TIMEOUT,
            payments_core::settings::READ_PROBE.get(&*store),
        );
        let outcome = tokio::select! {
            // `true` sent, or the sender dropped: stop either way.
            _ = stop.wait_for(|stop| *stop) => return,
            outcome = read => outcome,
        };
        match outcome {
            Ok(Ok(_)) => {
                if failing {
                    tracing::info!("the store answers its heartbeat again");
                }
                failing = false;
                beat.answered();
            }
            Ok(Err(e)) if !failing => {
                failing = true;
                tracing::warn!(store_cause = e.cause(), error = %e, "the store does not answer its heartbeat");
            }
            Err(_) if !failing => {
                failing = true;
                tracing::warn!(
                    timeout_ms = HEARTBEAT_TIMEOUT.as_millis() as u64,
                    "the store does not answer its heartbeat: a read did not finish in time"
                );
            }
            _ => {}
        }
        tokio::select! {
            _ = stop.wait_for(|stop| *stop) => return,
            () = tokio::time::sleep(HEARTBEAT_INTERVAL) => {}
        }
    }
}

#[cfg(test)]
mod tests {
    use std::sync::atomic::Ordering;

    use payments_core::testing::MemoryStore;

    use super::*;
    use crate::hanging::Hanging;

    /// Seen failing with the heartbeat's read left without its timeout: the loop waits on the
    /// hung read forever and never sees the store answer again.
    #[tokio::test(start_paused = true)]
    async fn a_hung_store_goes_unanswered_and_the_heartbeat_sees_it_answer_again() {
        let (store, hung) = Hanging::wrap(Arc::new(MemoryStore::new()));
        let beat = Arc::new(StoreHeartbeat::default());
        let (stop, stopped) = watch::channel(false);
        let task = tokio::spawn(run(store, beat.clone(), stopped));
        tokio::time::sleep(Duration::from_secs(5)).await;
        assert!(
            beat.unanswered() <= HEARTBEAT_INTERVAL,
            "{:?}",
            beat.unanswered()
        );

        hung.store(true, Ordering::SeqCst);
        tokio::time::sleep(Duration::from_secs(40)).await;
        assert!(
            beat.unanswered() >= Duration::from_secs(38),
            "{:?}",
            beat.unanswered()
        );

        hung.store(false, Ordering::SeqCst);
        tokio::time::sleep(HEARTBEAT_TIMEOUT + HEARTBEAT_INTERVAL * 2).await;
        assert!(
            beat.unanswered() <= HEARTBEAT_INTERVAL,
            "{:?}",
            beat.unanswered()
        );
        stop.send(true).unwrap();
        task.await.unwrap();
    }
}
