//! The single writer: one thread owns the read-write connection, takes write requests from a
//! channel and commits every request queued at that moment in one transaction (group commit).
//! Each request runs in its own SAVEPOINT, so a failing request is rolled back alone.
//!
//! # Invariants
//!
//! - **One writer.** The store's only read-write connection lives on the `sqlite-writer`
//!   thread; every write of the store is a job queued to it. Readers use their own read-only
//!   connections and see committed state only. (Another process on the same file, such as a
//!   `payments-server` subcommand, writes through its own connection; SQLite's lock and
//!   `BEGIN IMMEDIATE` serialise the two.)
//! - **Group commit.** A batch is the first queued job plus whatever else is queued at that
//!   moment, plus whatever was queued while those ran (read again before the `COMMIT`, until
//!   the queue is empty), up to `max_batch`, run in queue order inside one
//!   `BEGIN IMMEDIATE ... COMMIT`. The commit never waits for a job that is not queued yet.
//!   A job sees the writes of the kept jobs before it in its batch.
//! - **No answer before the commit.** A caller gets `Ok` only when its job succeeded and the
//!   batch's `COMMIT` did. If the batch fails (a statement of the batch itself, the `COMMIT`, or
//!   SQLite rolling the transaction back on its own), nothing of it is written and every job
//!   that did not fail by itself gets that error; the connection is rolled back out of the
//!   transaction before the next batch.
//! - **A failed job leaves nothing.** A job that returns an error or panics is rolled back to
//!   its savepoint; the other jobs of the batch are unaffected and the writer goes on. Its
//!   caller gets the job's own error whatever the batch did (after a panic: `Unavailable`, or
//!   the batch's error if the batch failed too).
//! - **A dropped caller does not cancel.** Once queued, a job runs and commits even if the
//!   caller's future was dropped; a cancelled write may have happened.
//! - **Closing drains.** [`Writer::close`] stops new writes (`the store is closed`) and commits
//!   everything already queued before the thread ends. If the thread ends otherwise, the
//!   writer reports itself dead ([`Writer::is_alive`]) and waiting callers get
//!   [`StoreError::Unavailable`].

use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, RwLock};
use std::thread::JoinHandle;

use payments_core::store::{StoreError, UnavailableCause};
use rusqlite::Connection;
use tokio::sync::{mpsc, oneshot};

use crate::error::db;

/// A queued write: run inside the batch's transaction, answered after the COMMIT.
trait Pending: Send {
    /// Runs the write; `true` to keep its savepoint, `false` to roll it back.
    fn run(&mut self, conn: &Connection) -> bool;
    /// Answers the caller once the batch's fate is known.
    fn answer(self: Box<Self>, committed: &Result<(), StoreError>);
}

struct Job<R, F> {
    work: Option<F>,
    outcome: Option<Result<R, StoreError>>,
    reply: oneshot::Sender<Result<R, StoreError>>,
}

impl<R, F> Pending for Job<R, F>
where
    R: Send,
    F: FnOnce(&Connection) -> Result<R, StoreError> + Send,
{
    fn run(&mut self, conn: &Connection) -> bool {
        let work = self.work.take().expect("the writer runs each job once");
        let outcome = work(conn);
        let keep = outcome.is_ok();
        self.outcome = Some(outcome);
        keep
    }

    fn answer(self: Box<Self>, committed: &Result<(), StoreError>) {
        let result = match (self.outcome, committed) {
            // The request's own failure was rolled back; it stands whatever the batch did.
            (Some(Err(e)), _) => Err(e),
            (Some(Ok(r)), Ok(())) => Ok(r),
            (_, Err(e)) => Err(e.clone()),
            (None, Ok(())) => Err(StoreError::Unavailable(
                "the write failed inside the writer".into(),
            )),
        };
        // The caller may have gone away (its future was dropped); the write stands anyway.
        let _ = self.reply.send(result);
    }
}

type Queue = mpsc::Sender<Box<dyn Pending>>;

/// The handle to the writer thread.
#[derive(Debug)]
pub(crate) struct Writer {
    queue: RwLock<Option<Queue>>,
    thread: Mutex<Option<JoinHandle<()>>>,
    alive: Arc<AtomicBool>,
}

/// Marks the writer dead when its thread ends, also by a panic.
struct AliveGuard(Arc<AtomicBool>);

impl Drop for AliveGuard {
    fn drop(&mut self) {
        self.0.store(false, Ordering::SeqCst);
    }
}

impl Writer {
    /// Starts the writer thread on `conn`.
    pub(crate) fn start(
        conn: Connection,
        max_batch: usize,
        queue_capacity: usize,
    ) -> std::io::Result<Writer> {
        let (tx, rx) = mpsc::channel(queue_capacity.max(1));
        let alive = Arc::new(AtomicBool::new(true));
        let guard = AliveGuard(Arc::clone(&alive));
        let thread = std::thread::Builder::new()
            .name("sqlite-writer".into())
            .spawn(move || {
                let _guard = guard;
                run(conn, rx, max_batch.max(1));
            })?;
        Ok(Writer {
            queue: RwLock::new(Some(tx)),
            thread: Mutex::new(Some(thread)),
            alive,
        })
    }

    /// Whether the writer thread is running and accepting writes.
    pub(crate) fn is_alive(&self) -> bool {
        self.alive.load(Ordering::SeqCst)
            && self
                .queue
                .read()
                .map(|q| q.as_ref().is_some_and(|q| !q.is_closed()))
                .unwrap_or(false)
    }

    /// Queues `work` and waits for the commit of its batch. Never blocks the calling thread.
    pub(crate) async fn write<R, F>(&self, work: F) -> Result<R, StoreError>
    where
        R: Send + 'static,
        F: FnOnce(&Connection) -> Result<R, StoreError> + Send + 'static,
    {
        let closed = || UnavailableCause::Closed.error("the store is closed");
        let queue = self
            .queue
            .read()
            .expect("the queue lock is never held across a panic")
            .clone()
            .ok_or_else(closed)?;
        let (reply, answer) = oneshot::channel();
        let job = Job {
            work: Some(work),
            outcome: None,
            reply,
        };
        queue.send(Box::new(job)).await.map_err(|_| closed())?;
        answer
            .await
            .map_err(|_| UnavailableCause::Closed.error("the writer stopped before answering"))?
    }

    /// Stops accepting writes, lets the writer commit everything already queued, and waits for
    /// its thread to end. Blocks the calling thread for that long.
    pub(crate) fn close(&self) {
        // Dropping the last sender ends the writer's loop once the queue is drained (senders
        // cloned by writes in flight finish their send first).
        drop(
            self.queue
                .write()
                .expect("the queue lock is never held across a panic")
                .take(),
        );
        let thread = self
            .thread
            .lock()
            .expect("the thread lock is never held across a panic")
            .take();
        if let Some(thread) = thread {
            // A panic in the writer already answered its callers with Unavailable.
            let _ = thread.join();
        }
    }
}

fn run(conn: Connection, mut rx: mpsc::Receiver<Box<dyn Pending>>, max_batch: usize) {
    let mut batch: Vec<Box<dyn Pending>> = Vec::with_capacity(max_batch);
    while let Some(first) = rx.blocking_recv() {
        batch.push(first);
        let committed = run_batch(&conn, &mut rx, &mut batch, max_batch);
        if committed.is_err() && !conn.is_autocommit() {
            // Best effort: the connection must not stay inside a failed transaction.
            let _ = conn.execute_batch("ROLLBACK");
        }
        for job in batch.drain(..) {
            job.answer(&committed);
        }
    }
    // Closed: move the WAL into the database file and empty it (best effort; a reader in a
    // transaction makes it partial). SQLite checkpoints when the last connection closes, but
    // that is a read-only reader here, which cannot; without this the file keeps the old
    // pages (a re-sealed secret's plaintext, say) until the next start.
    let _ = conn.query_row("PRAGMA wal_checkpoint(TRUNCATE)", [], |_| Ok(()));
}

/// Runs the jobs of one batch, starting with those in `batch`, inside one transaction and
/// commits it. Jobs queued while the batch's jobs run join it before the `COMMIT` (the queue is
/// read again once the jobs taken so far have run), until the queue is empty or the batch holds
/// `max_batch` jobs: the commit waits for no job that is not already queued, so a write alone
/// is committed at once, and under load a batch takes in everything that arrived during its
/// own statements instead of leaving it to the next fsync.
fn run_batch(
    conn: &Connection,
    rx: &mut mpsc::Receiver<Box<dyn Pending>>,
    batch: &mut Vec<Box<dyn Pending>>,
    max_batch: usize,
) -> Result<(), StoreError> {
    conn.execute_batch("BEGIN IMMEDIATE").map_err(db)?;
    let mut done = 0;
    loop {
        while batch.len() < max_batch {
            match rx.try_recv() {
                Ok(job) => batch.push(job),
                Err(_) => break,
            }
        }
        if done == batch.len() {
            break;
        }
        for job in &mut batch[done..] {
            run_job(conn, job)?;
        }
        done = batch.len();
    }
    conn.execute_batch("COMMIT").map_err(db)
}

/// Runs one job in its own savepoint: kept when it succeeded, rolled back when it failed or
/// panicked. An error here is the batch's (the transaction is lost).
fn run_job(conn: &Connection, job: &mut Box<dyn Pending>) -> Result<(), StoreError> {
    // Prepared once, like the requests' own statements (not parsed per request).
    conn.prepare_cached("SAVEPOINT request")
        .and_then(|mut s| s.execute([]))
        .map_err(db)?;
    let keep = catch_unwind(AssertUnwindSafe(|| job.run(conn))).unwrap_or(false);
    if conn.is_autocommit() {
        // SQLite rolled the whole transaction back itself (full disk, I/O error): the
        // requests before this one are lost too.
        return Err(UnavailableCause::Io.error("the transaction was rolled back by SQLite"));
    }
    if keep {
        conn.prepare_cached("RELEASE request")
            .and_then(|mut s| s.execute([]))
            .map_err(db)?;
    } else {
        conn.execute_batch("ROLLBACK TO request; RELEASE request")
            .map_err(db)?;
    }
    Ok(())
}
