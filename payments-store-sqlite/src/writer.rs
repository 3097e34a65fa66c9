//! The single writer: one thread owns the read-write connection, takes write requests from a
//! channel and commits every request queued at that moment in one transaction (group commit).
//! A failing request is rolled back alone: the batch first runs without savepoints, and when
//! one of its requests fails, it is rolled back and run again with each request in its own
//! SAVEPOINT.
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
//!   transaction before the next batch. When SQLite rolled back on its own because a job's
//!   statement found the disk full, that error is `disk full` for every caller of the batch.
//! - **A failed job leaves nothing.** A job that returns an error or panics is rolled back;
//!   the other jobs of the batch are unaffected and the writer goes on. Its caller gets the
//!   job's own error whatever the batch did (after a panic: `Unavailable`, or the batch's error
//!   if the batch failed too).
//! - **Savepoints only when a job fails.** A batch first runs its jobs one after the other
//!   without savepoints (a savepoint copies every page a job touches into a sub-journal, and a
//!   job's statements together often passed the 64 KiB at which SQLite moves that journal to a
//!   temporary file: two more `pwrite`s per page). When a job fails, the writer stops the
//!   pass, rolls the whole transaction back and runs the batch again from its first job with
//!   each job in its own savepoint, the failed one rolled back alone. A batch's work is at
//!   most doubled, and only when one of its jobs fails.
//! - **A job may run more than once** (the second pass above). Jobs are `FnMut` and act only
//!   through the connection: a run that was rolled back leaves no trace, and each caller gets
//!   the answer of the run that was committed (the second pass may see what another process
//!   committed between the passes; its answers are about that state).
//! - **A hook opens every transaction** ([`Begin`]): after `BEGIN IMMEDIATE`, before the first
//!   job, it brings what the connection keeps beside the database (the nonce index) up to date,
//!   and after a failed batch rebuilds it from the database.
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
    /// Runs the write (again, after a rolled-back pass); `true` when it succeeded, `false` when
    /// its writes must be rolled back.
    fn run(&mut self, conn: &mut Connection) -> bool;
    /// Answers the caller once the batch's fate is known.
    fn answer(self: Box<Self>, committed: &Result<(), StoreError>);
    /// The error of the last run, if it failed with one.
    fn error(&self) -> Option<&StoreError>;
}

struct Job<R, F> {
    work: F,
    outcome: Option<Result<R, StoreError>>,
    reply: oneshot::Sender<Result<R, StoreError>>,
}

impl<R, F> Pending for Job<R, F>
where
    R: Send,
    F: FnMut(&mut Connection) -> Result<R, StoreError> + Send,
{
    fn run(&mut self, conn: &mut Connection) -> bool {
        // A run that panics leaves no outcome, not that of an earlier, rolled-back run.
        self.outcome = None;
        let outcome = (self.work)(conn);
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
            (None, Ok(())) => {
                Err(UnavailableCause::Other.error("the write failed inside the writer"))
            }
        };
        // The caller may have gone away (its future was dropped); the write stands anyway.
        let _ = self.reply.send(result);
    }

    fn error(&self) -> Option<&StoreError> {
        self.outcome.as_ref()?.as_ref().err()
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

/// Run at the start of every writer transaction, right after `BEGIN IMMEDIATE` and before the
/// first job (both passes of a batch): brings state the connection keeps beside the database
/// (the nonce index) up to date with what other connections committed. Nothing else can commit
/// until the transaction ends, so once per transaction is enough. `true` when the last batch
/// failed: that state may then disagree with the database (a `COMMIT` can fail after the main
/// database committed and before the temporary one did), and must be rebuilt from it. An error
/// fails the batch.
pub(crate) type Begin = fn(&Connection, bool) -> Result<(), StoreError>;

impl Writer {
    /// Starts the writer thread on `conn`; `begin` runs at the start of every transaction.
    pub(crate) fn start(
        conn: Connection,
        max_batch: usize,
        queue_capacity: usize,
        begin: Begin,
    ) -> std::io::Result<Writer> {
        let (tx, rx) = mpsc::channel(queue_capacity.max(1));
        let alive = Arc::new(AtomicBool::new(true));
        let guard = AliveGuard(Arc::clone(&alive));
        let thread = std::thread::Builder::new()
            .name("sqlite-writer".into())
            .spawn(move || {
                let _guard = guard;
                run(conn, rx, max_batch.max(1), begin);
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
    /// `work` may run more than once (see the module's invariants): it must act only through
    /// the connection.
    pub(crate) async fn write<R, F>(&self, work: F) -> Result<R, StoreError>
    where
        R: Send + 'static,
        F: FnMut(&mut Connection) -> Result<R, StoreError> + Send + 'static,
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
            work,
            outcome: None,
            reply,
        };
        queue.send(Box::new(job)).await.map_err(|_| closed())?;
        // The clone of the sender goes now, not when the answer has been awaited: `close`
        // ends the writer once every sender is gone, and a write whose answer has arrived
        // but whose task is not polled again (a current-thread runtime blocked in `close`)
        // would otherwise keep the writer waiting for more jobs forever.
        drop(queue);
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

fn run(
    mut conn: Connection,
    mut rx: mpsc::Receiver<Box<dyn Pending>>,
    max_batch: usize,
    begin: Begin,
) {
    let mut batch: Vec<Box<dyn Pending>> = Vec::with_capacity(max_batch);
    // Whether the last batch failed (see `Begin`).
    let mut failed = false;
    while let Some(first) = rx.blocking_recv() {
        batch.push(first);
        let committed = match run_batch(&mut conn, &mut rx, &mut batch, max_batch, begin, failed) {
            Pass::Done(committed) => committed,
            Pass::JobFailed => run_again_with_savepoints(&mut conn, &mut batch, begin, failed),
        };
        failed = committed.is_err();
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

/// How the first, savepoint-free pass over a batch ended.
enum Pass {
    /// Committed, or failed as a whole (the batch's own statements, the `COMMIT`, SQLite's own
    /// rollback).
    Done(Result<(), StoreError>),
    /// A job failed: its writes cannot be undone alone, the batch runs again with savepoints.
    JobFailed,
}

/// Runs the jobs of one batch, starting with those in `batch`, inside one transaction without
/// savepoints and commits it. Jobs queued while the batch's jobs run join it before the
/// `COMMIT` (the queue is read again once the jobs taken so far have run), until the queue is
/// empty or the batch holds `max_batch` jobs: the commit waits for no job that is not already
/// queued, so a write alone is committed at once, and under load a batch takes in everything
/// that arrived during its own statements instead of leaving it to the next fsync. Stops at
/// the first job that fails.
fn run_batch(
    conn: &mut Connection,
    rx: &mut mpsc::Receiver<Box<dyn Pending>>,
    batch: &mut Vec<Box<dyn Pending>>,
    max_batch: usize,
    begin: Begin,
    failed: bool,
) -> Pass {
    if let Err(e) = conn.execute_batch("BEGIN IMMEDIATE") {
        return Pass::Done(Err(db(e)));
    }
    if let Err(e) = begin(conn, failed) {
        return Pass::Done(Err(e));
    }
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
            match run_plain(conn, job) {
                Ok(true) => {}
                Ok(false) => return Pass::JobFailed,
                Err(e) => return Pass::Done(Err(e)),
            }
        }
        done = batch.len();
    }
    Pass::Done(conn.execute_batch("COMMIT").map_err(db))
}

/// Runs one job without a savepoint: `Ok(false)` when it failed or panicked (its writes are
/// in the transaction, which must be rolled back). An error here is the batch's.
fn run_plain(conn: &mut Connection, job: &mut Box<dyn Pending>) -> Result<bool, StoreError> {
    let ok = catch_unwind(AssertUnwindSafe(|| job.run(conn))).unwrap_or(false);
    if conn.is_autocommit() {
        return Err(rolled_back_by_sqlite(job.as_ref()));
    }
    Ok(ok)
}

/// The batch's error when SQLite rolled the whole transaction back itself while `job` ran (a
/// full disk or an I/O error inside a statement that keeps no statement journal): `disk full`
/// when the job failed so, so that every caller of the batch learns it (the store's disk
/// reserve acts on it), an I/O error otherwise.
fn rolled_back_by_sqlite(job: &dyn Pending) -> StoreError {
    let cause = match job.error() {
        Some(StoreError::Unavailable {
            cause: UnavailableCause::DiskFull,
            ..
        }) => UnavailableCause::DiskFull,
        _ => UnavailableCause::Io,
    };
    cause.error("the transaction was rolled back by SQLite")
}

/// The second pass after a job failed: rolls the first pass back and runs every job of the
/// batch again, from the first, each in its own savepoint, and commits. No job joins the batch
/// now; those queued meanwhile wait for the next one.
fn run_again_with_savepoints(
    conn: &mut Connection,
    batch: &mut [Box<dyn Pending>],
    begin: Begin,
    failed: bool,
) -> Result<(), StoreError> {
    conn.execute_batch("ROLLBACK; BEGIN IMMEDIATE")
        .map_err(db)?;
    begin(conn, failed)?;
    for job in batch.iter_mut() {
        run_job(conn, job)?;
    }
    conn.execute_batch("COMMIT").map_err(db)
}

/// Runs one job in its own savepoint: kept when it succeeded, rolled back when it failed or
/// panicked. An error here is the batch's (the transaction is lost).
fn run_job(conn: &mut Connection, job: &mut Box<dyn Pending>) -> Result<(), StoreError> {
    // Prepared once, like the requests' own statements (not parsed per request).
    conn.prepare_cached("SAVEPOINT request")
        .and_then(|mut s| s.execute([]))
        .map_err(db)?;
    let keep = catch_unwind(AssertUnwindSafe(|| job.run(conn))).unwrap_or(false);
    if conn.is_autocommit() {
        // The requests before this one are lost too.
        return Err(rolled_back_by_sqlite(job.as_ref()));
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

#[cfg(test)]
mod tests {
    use std::sync::atomic::AtomicUsize;
    use std::time::{Duration, Instant};

    use super::*;

    const CAPACITY: usize = 64;

    fn writer() -> (tempfile::TempDir, Arc<Writer>) {
        let dir = tempfile::tempdir().expect("a temporary directory");
        let conn = Connection::open(dir.path().join("w.db")).expect("open");
        conn.execute_batch(
            "PRAGMA journal_mode = WAL;
             CREATE TABLE t (k INTEGER PRIMARY KEY, v TEXT NOT NULL);",
        )
        .expect("schema");
        let writer = Writer::start(conn, 64, CAPACITY, |_, _| Ok(())).expect("start the writer");
        (dir, Arc::new(writer))
    }

    fn keys(dir: &tempfile::TempDir) -> Vec<i64> {
        let conn = Connection::open(dir.path().join("w.db")).expect("open");
        let mut stmt = conn.prepare("SELECT k FROM t ORDER BY k").expect("prepare");
        let keys = stmt
            .query_map([], |r| r.get(0))
            .expect("query")
            .collect::<Result<Vec<i64>, _>>()
            .expect("rows");
        keys
    }

    fn insert(conn: &Connection, k: usize) -> Result<(), StoreError> {
        conn.execute("INSERT INTO t (k, v) VALUES (?1, 'x')", [k as i64])
            .map_err(db)?;
        Ok(())
    }

    fn queued(writer: &Writer) -> usize {
        let queue = writer.queue.read().expect("lock");
        CAPACITY - queue.as_ref().expect("open").capacity()
    }

    /// How a job of [`one_batch`] ends after writing its row.
    #[derive(Clone, Copy, PartialEq)]
    enum End {
        Ok,
        Fail,
        Panic,
    }

    /// A job that writes row 0 once `released` is set, started: it holds the writer inside
    /// its batch, so that the jobs queued meanwhile join that batch.
    async fn hold(
        writer: &Arc<Writer>,
    ) -> (
        tokio::task::JoinHandle<Result<(), StoreError>>,
        Arc<AtomicBool>,
    ) {
        let released = Arc::new(AtomicBool::new(false));
        let started = Arc::new(AtomicBool::new(false));
        let first = {
            let (writer, released, started) = (
                Arc::clone(writer),
                Arc::clone(&released),
                Arc::clone(&started),
            );
            tokio::spawn(async move {
                writer
                    .write(move |c| {
                        started.store(true, Ordering::SeqCst);
                        let deadline = Instant::now() + Duration::from_secs(10);
                        while !released.load(Ordering::SeqCst) && Instant::now() < deadline {
                            std::thread::sleep(Duration::from_millis(1));
                        }
                        insert(c, 0)
                    })
                    .await
            })
        };
        while !started.load(Ordering::SeqCst) {
            tokio::time::sleep(Duration::from_millis(1)).await;
        }
        (first, released)
    }

    /// Row 0's job holds the writer inside its batch until the jobs of `ends` (rows 1..) are
    /// all queued, so that they join its batch; returns each job's answer and how many times
    /// it ran.
    async fn one_batch(writer: &Arc<Writer>, ends: &[End]) -> Vec<(Result<(), StoreError>, usize)> {
        let (first, released) = hold(writer).await;
        let runs: Vec<Arc<AtomicUsize>> = ends.iter().map(|_| Arc::default()).collect();
        let mut jobs = Vec::new();
        for (i, end) in ends.iter().copied().enumerate() {
            let (job_writer, runs) = (Arc::clone(writer), Arc::clone(&runs[i]));
            jobs.push(tokio::spawn(async move {
                job_writer
                    .write(move |c| {
                        runs.fetch_add(1, Ordering::SeqCst);
                        insert(c, i + 1)?;
                        match end {
                            End::Ok => Ok(()),
                            End::Fail => Err(StoreError::Conflict),
                            End::Panic => panic!("job {} panics after its insert", i + 1),
                        }
                    })
                    .await
            }));
            // Queued in this order: the batch runs them in it.
            while queued(writer) < i + 1 {
                tokio::time::sleep(Duration::from_millis(1)).await;
            }
        }
        released.store(true, Ordering::SeqCst);
        first
            .await
            .expect("the first job's task")
            .expect("the first job commits");
        let mut out = Vec::new();
        for (job, runs) in jobs.into_iter().zip(runs) {
            let answer = job.await.expect("the job's task");
            out.push((answer, runs.load(Ordering::SeqCst)));
        }
        out
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_batch_without_failures_runs_each_job_once() {
        let (dir, writer) = writer();
        let answers = one_batch(&writer, &[End::Ok; 8]).await;
        assert!(answers.iter().all(|(a, runs)| a.is_ok() && *runs == 1));
        assert_eq!(keys(&dir), (0..=8).collect::<Vec<_>>());
    }

    /// A job that writes and then fails, in the middle of a batch: the batch runs again with
    /// savepoints, the failed job's row is rolled back alone and every other job commits.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_failed_job_is_rolled_back_alone_and_its_batch_commits() {
        let (dir, writer) = writer();
        let mut ends = [End::Ok; 8];
        ends[3] = End::Fail;
        let answers = one_batch(&writer, &ends).await;
        for (i, (answer, runs)) in answers.iter().enumerate() {
            let k = i + 1;
            if k == 4 {
                assert_eq!(answer, &Err(StoreError::Conflict));
            } else {
                assert_eq!(answer, &Ok(()), "job {k}");
            }
            // Jobs up to the failed one ran in both passes, the later ones in the second only.
            assert_eq!(*runs, if k <= 4 { 2 } else { 1 }, "runs of job {k}");
        }
        assert_eq!(keys(&dir), vec![0, 1, 2, 3, 5, 6, 7, 8]);
        // The writer goes on.
        assert_eq!(writer.write(|c| insert(c, 9)).await, Ok(()));
        assert_eq!(keys(&dir).last(), Some(&9));
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_panicking_job_is_rolled_back_alone() {
        let (dir, writer) = writer();
        let mut ends = [End::Ok; 6];
        ends[0] = End::Panic;
        ends[5] = End::Fail;
        let answers = one_batch(&writer, &ends).await;
        assert!(
            matches!(answers[0].0, Err(StoreError::Unavailable { .. })),
            "{:?}",
            answers[0].0
        );
        assert_eq!(answers[5].0, Err(StoreError::Conflict));
        assert!(answers[1..5].iter().all(|(a, _)| a.is_ok()));
        // The panic stopped the first pass at once: only the panicking job ran in both.
        let runs: Vec<usize> = answers.iter().map(|(_, runs)| *runs).collect();
        assert_eq!(runs, vec![2, 1, 1, 1, 1, 1]);
        assert_eq!(keys(&dir), vec![0, 2, 3, 4, 5]);
    }

    /// A job whose statement finds the database full (`max_page_count` stands in for the
    /// disk) in a statement without a statement journal: SQLite rolls the whole transaction
    /// back, and every caller of the batch hears `disk full`, not only the job that hit it
    /// (the store's disk reserve acts on that answer). Nothing of the batch is written.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_full_database_inside_a_statement_answers_the_whole_batch_disk_full() {
        let (dir, writer) = writer();
        let (first, released) = hold(&writer).await;
        let full = {
            let writer = Arc::clone(&writer);
            tokio::spawn(async move {
                writer
                    .write(|c| {
                        // Clamped to the pages the database has: no new page can be added.
                        c.execute_batch("PRAGMA max_page_count = 1").map_err(db)?;
                        c.execute("INSERT INTO t (k, v) VALUES (1, ?1)", ["x".repeat(100_000)])
                            .map_err(db)?;
                        Ok(())
                    })
                    .await
            })
        };
        while queued(&writer) < 1 {
            tokio::time::sleep(Duration::from_millis(1)).await;
        }
        let after = {
            let writer = Arc::clone(&writer);
            tokio::spawn(async move { writer.write(|c| insert(c, 2)).await })
        };
        while queued(&writer) < 2 {
            tokio::time::sleep(Duration::from_millis(1)).await;
        }
        released.store(true, Ordering::SeqCst);
        for (name, answer) in [
            ("the job before", first.await.expect("a task")),
            ("the job that filled it", full.await.expect("a task")),
            ("the job after", after.await.expect("a task")),
        ] {
            assert!(
                matches!(
                    answer,
                    Err(StoreError::Unavailable {
                        cause: UnavailableCause::DiskFull,
                        ..
                    })
                ),
                "{name}: {answer:?}"
            );
        }
        assert_eq!(keys(&dir), Vec::<i64>::new());
        // The writer goes on once there is room.
        let room = writer.write(|c| {
            c.execute_batch("PRAGMA max_page_count = 1073741823")
                .map_err(db)?;
            insert(c, 3)
        });
        assert_eq!(room.await, Ok(()));
        assert_eq!(keys(&dir), vec![3]);
    }
}
