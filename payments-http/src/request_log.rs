//! The merchant API's request log, written off the request's path: the error middleware
//! ([`crate::error::answer_errors`]) notes each merchant request it can attribute to a project
//! into a bounded queue with [`RequestLog::note`], which never waits (a full queue drops the
//! entry and counts it in `payments_request_log_dropped_total`); one writer task takes the
//! queue in batches and hands each to the core
//! ([`RequestLog::record_requests`](payments_core::service::RequestLog::record_requests)),
//! which keeps each project's newest entries. After a batch that emptied the queue, the writer
//! waits [`RequestLogConfig::flush_every`] before it takes the next: under load the log is one
//! write of everything that arrived meanwhile, a few times a second, instead of one small
//! write in nearly every commit the creates wait on (on SQLite, its single writer's).

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

use payments_core::request_log::RequestLogEntry;
use payments_core::service::PaymentService;
use tokio::sync::mpsc;

use crate::metrics::Metrics;

/// How the request log is written.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RequestLogConfig {
    /// The entries waiting for the writer at most; more are dropped (and counted).
    pub queue: usize,
    /// The entries one write takes at most.
    pub batch: usize,
    /// How long the writer waits after a write that emptied the queue (a full batch is
    /// followed by the next at once): how long an entry may wait to be written, at most.
    pub flush_every: Duration,
}

impl Default for RequestLogConfig {
    /// A queue of 4,096 entries, written 1,024 at a time, at most every 200 ms unless
    /// batches are full.
    fn default() -> Self {
        RequestLogConfig {
            queue: 4_096,
            batch: 1_024,
            flush_every: Duration::from_millis(200),
        }
    }
}

/// The sending side of the request log: cheap to note into, never waits.
#[derive(Debug)]
pub struct RequestLog {
    queue: mpsc::Sender<RequestLogEntry>,
    dropped: AtomicU64,
    metrics: Arc<Metrics>,
}

impl RequestLog {
    /// A request log whose entries wait in a queue of `config.queue` (at least 1), and the
    /// receiving end for [`RequestLog::write`].
    pub fn new(
        config: RequestLogConfig,
        metrics: Arc<Metrics>,
    ) -> (RequestLog, mpsc::Receiver<RequestLogEntry>) {
        let (queue, rx) = mpsc::channel(config.queue.max(1));
        (
            RequestLog {
                queue,
                dropped: AtomicU64::new(0),
                metrics,
            },
            rx,
        )
    }

    /// A request log with its writer running on the current tokio runtime: entries go to
    /// `service` in batches of `config.batch`. The writer ends when the log is dropped and its
    /// queue is written.
    pub fn start(
        service: PaymentService,
        config: RequestLogConfig,
        metrics: Arc<Metrics>,
    ) -> (Arc<RequestLog>, tokio::task::JoinHandle<()>) {
        let (log, rx) = RequestLog::new(config, metrics);
        let writer = tokio::spawn(RequestLog::write(service, rx, config));
        (Arc::new(log), writer)
    }

    /// Queues `entry` for the writer without waiting; `false` when the queue was full (or the
    /// writer gone) and the entry was dropped and counted.
    pub fn note(&self, entry: RequestLogEntry) -> bool {
        match self.queue.try_send(entry) {
            Ok(()) => true,
            Err(_) => {
                self.dropped.fetch_add(1, Ordering::Relaxed);
                self.metrics.count_request_log_dropped();
                false
            }
        }
    }

    /// The entries dropped so far.
    pub fn dropped(&self) -> u64 {
        self.dropped.load(Ordering::Relaxed)
    }

    /// The writer: takes what waits (up to `config.batch`) and writes it as one batch, and
    /// after a batch that was not full waits `config.flush_every`, until every sender is gone
    /// and the queue is written. A failed write is logged and its entries are lost (the log is
    /// a debugging aid; the requests themselves were answered).
    pub async fn write(
        service: PaymentService,
        mut rx: mpsc::Receiver<RequestLogEntry>,
        config: RequestLogConfig,
    ) {
        let batch = config.batch.max(1);
        let mut entries = Vec::with_capacity(batch);
        while rx.recv_many(&mut entries, batch).await > 0 {
            if let Err(e) = service.requests().record_requests(&entries).await {
                tracing::warn!(
                    error = %e,
                    entries = entries.len(),
                    "request log: a batch was not written"
                );
            }
            let full = entries.len() == batch;
            entries.clear();
            if !full {
                tokio::time::sleep(config.flush_every).await;
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn entry() -> RequestLogEntry {
        RequestLogEntry {
            id: 0,
            project_id: "00000000-0000-4000-8000-000000000001".parse().unwrap(),
            at: payments_core::Timestamp::from_unix_millis(1),
            method: "POST".into(),
            path: "/api/v1/payments".into(),
            status: 201,
            error_code: None,
            message: None,
            request_id: "r".into(),
            latency_us: 1,
            source: "-".into(),
            merchant_payment_id: None,
            payment_id: None,
            clock_skew_ms: None,
            diagnosis: None,
        }
    }

    /// Counts the request log's writes that reach the store.
    struct CountWrites {
        inner: Arc<dyn payments_core::store::Store>,
        writes: AtomicU64,
    }

    impl payments_core::store::StoreLayer for CountWrites {
        fn inner(&self) -> &Arc<dyn payments_core::store::Store> {
            &self.inner
        }

        fn around<'a, T: Send + 'a>(
            &'a self,
            op: payments_core::store::Op,
            call: futures_util::future::BoxFuture<'a, Result<T, payments_core::store::StoreError>>,
        ) -> futures_util::future::BoxFuture<'a, Result<T, payments_core::store::StoreError>>
        {
            if op.name == "insert_requests" {
                self.writes.fetch_add(1, Ordering::SeqCst);
            }
            call
        }
    }

    /// The first entry after a quiet spell is written at once; what arrives in the next
    /// `flush_every` waits and goes in one write, however the notes and the writer's turns
    /// interleave (without the wait: one write per note here).
    #[tokio::test(start_paused = true)]
    async fn entries_arriving_together_are_written_in_one_write() {
        use payments_core::service::{AuthConfig, Ports, ServiceConfig};
        use payments_core::store::Layered;
        use payments_providers::sandbox::{FixedRates, SandboxProvider};

        let memory: Arc<dyn payments_core::store::Store> =
            Arc::new(payments_core::testing::MemoryStore::new());
        let store = Arc::new(Layered::new(CountWrites {
            inner: memory,
            writes: AtomicU64::new(0),
        }));
        let service = PaymentService::new(
            Ports::new(
                store.clone(),
                Arc::new(SandboxProvider::new(store.clone())),
                Arc::new(FixedRates::sandbox_defaults()),
                Arc::new(crate::system::SystemClock),
                Arc::new(crate::system::OsRandom),
            ),
            ServiceConfig::default(),
            AuthConfig::for_environment(payments_core::auth::Environment::Sandbox),
        );
        let (log, writer) = RequestLog::start(
            service,
            RequestLogConfig::default(),
            Arc::new(Metrics::default()),
        );
        let writes = || store.layer().writes.load(Ordering::SeqCst);
        assert!(log.note(entry()));
        while writes() == 0 {
            tokio::task::yield_now().await;
        }
        for _ in 0..5 {
            assert!(log.note(entry()));
            for _ in 0..10 {
                tokio::task::yield_now().await;
            }
        }
        assert_eq!(writes(), 1, "the next ones wait for the interval");
        tokio::time::sleep(RequestLogConfig::default().flush_every).await;
        while writes() == 1 {
            tokio::task::yield_now().await;
        }
        drop(log);
        writer.await.expect("the writer ends once the log is gone");
        assert_eq!(writes(), 2, "five entries, one write");
    }

    /// With nobody taking the queue, the note past its size is dropped and counted, and the
    /// caller goes on: `note` is not async, it cannot wait for room.
    #[test]
    fn a_full_queue_drops_and_counts_without_waiting() {
        let metrics = Arc::new(Metrics::default());
        let (log, rx) = RequestLog::new(
            RequestLogConfig {
                queue: 2,
                batch: 10,
                ..RequestLogConfig::default()
            },
            metrics.clone(),
        );
        assert!(log.note(entry()));
        assert!(log.note(entry()));
        assert!(!log.note(entry()), "the third does not fit");
        assert!(!log.note(entry()));
        assert_eq!(log.dropped(), 2);
        let scrape = metrics.render(&Default::default(), Default::default());
        assert!(
            scrape.contains("payments_request_log_dropped_total 2"),
            "{scrape}"
        );
        // A writer gone drops too.
        drop(rx);
        assert!(!log.note(entry()));
        assert_eq!(log.dropped(), 3);
    }
}
