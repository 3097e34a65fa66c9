//! The embedded SQLite store: implements the `payments-core` store traits on one database file.
//!
//! One writer thread owns the read-write connection and commits the writes of many concurrent
//! requests in one transaction (group commit; a failed request is rolled back alone); reads run on a
//! small pool of read-only connections, which in WAL mode never wait for the writer. Uniqueness
//! (merchant payment id, nonce), optimistic concurrency and the atomic state change plus outbox
//! row are decided by the database.
//!
//! Fairness between projects on the read path: the short reads (the token check of every
//! request, a payment by its id, a balance) have connections of their own that a list never
//! takes, so no project's scans make another's creates wait; and a list read is stopped once
//! it has run for [`SqliteOptions::scan_timeout`] (a progress handler interrupts it).
// One exception, `configure_process`: SQLite's process-wide options have no safe wrapper.
#![deny(unsafe_code)]
#![deny(missing_docs)]

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, Instant};

use payments_core::store::{StoreError, UnavailableCause};
use payments_store_sql::sealing::{StoredAuditStates, StoredRequisites, RESEAL_PAGE};
use rusqlite::{Connection, OpenFlags};
use tokio::sync::Semaphore;

mod appeals;
mod auth_cache;
mod backup;
mod cabinet;
mod codec;
mod directory;
mod error;
mod files;
mod ledger;
mod nonces;
mod outbox;
mod payments;
mod readers;
mod reserve;
mod runtime;
mod schema;
mod store;
#[cfg(feature = "testing")]
pub mod testing;
mod writer;

pub use backup::{backup, BackupError, BackupReport};
pub use error::OpenError;
pub use payments_store_sql::sealing::{
    Last4Backfill, RequisiteReseal, RequisiteSealing, SealWrites,
};
pub use schema::SCHEMA_VERSION;

use readers::Readers;
use reserve::{Reserve, Writes};
use writer::Writer;

/// How hard SQLite works to make a commit durable (`PRAGMA synchronous`).
#[non_exhaustive]
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum Synchronous {
    /// Every commit is on disk before it is acknowledged (`FULL`), also after a power loss.
    #[default]
    Full,
    /// WAL commits are not synced one by one (`NORMAL`): the database stays consistent, but
    /// the last commits before a power loss or OS crash may be lost. A process crash loses
    /// nothing. Faster; only for deployments that accept that.
    Normal,
}

impl Synchronous {
    fn pragma(self) -> &'static str {
        match self {
            Synchronous::Full => "FULL",
            Synchronous::Normal => "NORMAL",
        }
    }
}

/// Options of [`SqliteStore::open`].
#[derive(Debug, Clone)]
pub struct SqliteOptions {
    /// Durability of commits; [`Synchronous::Full`] by default.
    pub synchronous: Synchronous,
    /// How long a connection waits for a lock held by another process before the operation
    /// fails as unavailable. 5 s by default.
    pub busy_timeout: Duration,
    /// Read-only connections in the reader pool (at least 1), which lists, counts and the
    /// background work's reads share. 4 by default.
    pub readers: usize,
    /// Read-only connections kept for the short reads: the token check of every request, a
    /// payment by its id, a balance (at least 1). A list never takes one, so a project's
    /// scans cannot make another project's requests wait for a connection. By default
    /// [`default_short_readers`]: one per core the process may run on, at least 2.
    pub short_readers: usize,
    /// The longest one list read (the payment list and search, the events list, the
    /// cabinet's list pages) may run before it is stopped and fails as unavailable (cause
    /// [`UnavailableCause::TimedOut`]): what bounds the work a filter without an index makes.
    /// 5 s by default.
    pub scan_timeout: Duration,
    /// Most write requests committed in one transaction. 256 by default.
    pub max_batch: usize,
    /// Write requests that may wait for the writer before callers wait to enqueue. 4096 by
    /// default.
    pub queue_capacity: usize,
    /// Open the database read-only: nothing is migrated (a schema version other than
    /// [`SCHEMA_VERSION`] is refused with [`OpenError::SchemaMismatch`]) and every write fails
    /// as unavailable (cause `io`). For inspecting a database without changing it (a backup,
    /// a copy). `false` by default.
    pub read_only: bool,
    /// Apply the embedded migrations on open. `true` by default; `false` refuses an older
    /// database with [`SchemaError::NeedsMigration`](payments_store_sql::schema::SchemaError::NeedsMigration) instead of changing its schema (only
    /// `payments-server migrate` and `serve` change the schema).
    pub migrate: bool,
    /// Bytes kept free for a full disk in a reserve file beside the database
    /// (`<database>-reserve`), released when a write finds the disk full so that the purges
    /// can still run there; meanwhile only they are admitted (module `reserve`). 0 (none) by
    /// default, so that a full disk stays full until space is freed by hand; the server keeps
    /// 32 MiB (`[store] reserve_mib`).
    pub reserve_bytes: u64,
}

impl Default for SqliteOptions {
    fn default() -> Self {
        SqliteOptions {
            synchronous: Synchronous::Full,
            busy_timeout: Duration::from_secs(5),
            readers: 4,
            short_readers: default_short_readers(),
            scan_timeout: Duration::from_secs(5),
            max_batch: 256,
            queue_capacity: 4096,
            read_only: false,
            migrate: true,
            reserve_bytes: 0,
        }
    }
}

/// The SQLite store. Dropping it (or [`SqliteStore::close`]) commits the queued writes and
/// stops the writer thread.
#[derive(Debug)]
pub struct SqliteStore {
    writer: Writer,
    readers: Arc<Readers>,
    /// One permit per reader connection.
    read_permits: Arc<Semaphore>,
    /// The connections of the short reads ([`SqliteOptions::short_readers`]).
    short: Arc<Readers>,
    /// One permit per short-read connection.
    short_permits: Arc<Semaphore>,
    /// [`SqliteOptions::scan_timeout`].
    scan_timeout: Duration,
    /// Authentication lookups, kept while the directory does not change.
    auth_cache: Arc<auth_cache::AuthCache>,
    /// The keys requisites are sealed with ([`SqliteStore::requisite_sealing`]).
    sealing: RequisiteSealing,
    /// Room kept for a full disk.
    reserve: Arc<Reserve>,
    /// The database file, whose file system readiness probes for new space (`None`:
    /// read-only).
    database: Option<PathBuf>,
}

/// The default of [`SqliteOptions::short_readers`]: the cores this process may run on (its
/// CPU affinity and quota, [`std::thread::available_parallelism`]), at least 2. A short read
/// runs on the tokio worker that asks for it, and a runtime has a worker per core by default:
/// with fewer connections than workers the workers queue for them, and a node's reads by id
/// stopped growing at two cores (docs/performance.md, "Cores").
pub fn default_short_readers() -> usize {
    std::thread::available_parallelism().map_or(2, |n| n.get().max(2))
}

/// The bytes of a statement journal SQLite keeps in memory before it moves it to a temporary
/// file ([`configure_process`]). SQLite's default is 64 KiB. 128 KiB is also the most that
/// works: SQLite keeps the journal in one chunk of this size and, when it spills, writes the
/// chunk in one call, which its unix VFS limits to 128 KiB (a larger chunk failed every
/// spill with `SQLITE_FULL`, "database or disk is full"; tests/statement_journal.rs).
pub const STATEMENT_JOURNAL_SPILL: usize = 1 << 17;

/// Sets SQLite's process-wide options that this store's writer relies on, once per process:
/// a statement journal stays in memory up to [`STATEMENT_JOURNAL_SPILL`] bytes. Answers
/// whether they are in effect.
///
/// Inside a writer transaction, every statement that may write several rows and may fail
/// halfway (the payment insert, which its metadata trigger makes such a statement) copies the
/// pages it changes that already existed into a statement journal, to undo itself alone. A
/// create's insert changes about 16 pages: just over SQLite's default of 64 KiB, so each batch
/// opened a temporary file and wrote two `pwrite`s per page into it (33 of a create's 39
/// write calls, 72 KB a create, about 30 % of the writer's CPU; docs/performance.md). 128
/// KiB holds a create's insert twice over; a larger statement (a migration's fill) still
/// spills to a file rather than growing in memory.
///
/// SQLite takes these options only before the process opens its first connection: [`SqliteStore::open`]
/// calls this first, and an embedder whose process opens SQLite elsewhere too calls it before
/// that (`false` here means it came too late; the store works the same, with the default).
/// Call it before starting threads that use SQLite: `sqlite3_config` is not thread-safe.
#[allow(unsafe_code)]
pub fn configure_process() -> bool {
    static CONFIGURED: std::sync::OnceLock<bool> = std::sync::OnceLock::new();
    *CONFIGURED.get_or_init(|| {
        let spill = std::ffi::c_int::try_from(STATEMENT_JOURNAL_SPILL)
            .expect("the spill threshold fits a C int");
        // SAFETY: SQLITE_CONFIG_STMTJRNL_SPILL takes one int, passed here; once SQLite has
        // been initialised it changes nothing and answers SQLITE_MISUSE.
        let rc = unsafe {
            rusqlite::ffi::sqlite3_config(rusqlite::ffi::SQLITE_CONFIG_STMTJRNL_SPILL, spill)
        };
        rc == rusqlite::ffi::SQLITE_OK
    })
}

impl SqliteStore {
    /// Opens (creating if needed) the database at `path`, makes its files owner-only (a new
    /// database is created with mode 0600, an existing one others could read is set to 0600
    /// with a warning; not for a read-only open), enables WAL, applies the embedded
    /// migrations in one transaction (with [`SqliteOptions::migrate`], the default; without
    /// it an older database is refused with [`SchemaError::NeedsMigration`](payments_store_sql::schema::SchemaError::NeedsMigration) and left as it is)
    /// and starts the writer thread. A database written by a newer build is refused with
    /// [`SchemaError::NewerSchema`](payments_store_sql::schema::SchemaError::NewerSchema). Blocking: call it at startup or from a blocking thread.
    pub fn open(path: impl AsRef<Path>, options: SqliteOptions) -> Result<SqliteStore, OpenError> {
        configure_process();
        let path = path.as_ref();
        let mut conn = if options.read_only {
            Connection::open_with_flags(path, OpenFlags::SQLITE_OPEN_READ_ONLY)?
        } else {
            files::owner_only(path)?;
            Connection::open(path)?
        };
        conn.busy_timeout(options.busy_timeout)?;
        let mode: String = conn.query_row("PRAGMA journal_mode = WAL", [], |r| r.get(0))?;
        if !mode.eq_ignore_ascii_case("wal") {
            return Err(OpenError::NoWal(mode));
        }
        // temp_store stays the default: a statement's or savepoint's sub-journal lives in memory
        // up to STATEMENT_JOURNAL_SPILL and spills to a temporary file beyond (all in memory,
        // one large job held hundreds of MB). The writer opens savepoints only after a job
        // failed, so a batch's sub-journal is that of one statement at a time (see the
        // writer's module).
        // secure_delete = FAST: the bytes of a row that is changed or deleted are zeroed where
        // that costs no extra I/O (inside the page being written anyway), so a requisite that
        // was once in clear (before sealing, or written by a rolling upgrade's node) does not
        // stay behind in free space after `reseal` seals it.
        conn.execute_batch(&format!(
            "PRAGMA synchronous = {}; PRAGMA secure_delete = FAST;",
            options.synchronous.pragma()
        ))?;
        conn.set_prepared_statement_cache_capacity(64);
        if options.read_only {
            schema::check_current(&conn)?;
        } else if options.migrate {
            schema::migrate(&mut conn)?;
            if let Some(planted) = payments_store_sql::statements::planted_schema(
                payments_store_sql::sql::Dialect::Sqlite,
            ) {
                conn.execute_batch(planted)?;
            }
        } else {
            schema::check_migrated(&conn)?;
        }

        if !options.read_only {
            nonces::open_index(&conn)?;
        }

        let readers = open_readers(path, options.readers, options.busy_timeout)?;
        let short = open_readers(path, options.short_readers, options.busy_timeout)?;
        let begin: writer::Begin = if options.read_only {
            |_, _| Ok(())
        } else {
            nonces::catch_up
        };
        let writer = Writer::start(conn, options.max_batch, options.queue_capacity, begin)?;
        let reserve = if options.read_only {
            Reserve::none()
        } else {
            Reserve::hold(path, options.reserve_bytes)
        };
        Ok(SqliteStore {
            reserve: Arc::new(reserve),
            database: (!options.read_only).then(|| path.to_path_buf()),
            writer,
            read_permits: Arc::new(Semaphore::new(readers.len())),
            auth_cache: Arc::default(),
            readers: Arc::new(Readers::new(readers)),
            short_permits: Arc::new(Semaphore::new(short.len())),
            short: Arc::new(Readers::new(short)),
            scan_timeout: options.scan_timeout,
            sealing: RequisiteSealing::new(),
        })
    }

    /// The database file whose file system readiness probes for new space; `None` when
    /// read-only.
    pub(crate) fn probe_path(&self) -> Option<PathBuf> {
        self.database.clone()
    }

    /// The sealing of this store's requisites at rest: empty (requisites written in clear)
    /// until the keys are installed on it, which a server does right after opening, once it
    /// knows its key ([`RequisiteSealing::install`]).
    pub fn requisite_sealing(&self) -> &RequisiteSealing {
        &self.sealing
    }

    /// How many payments hold requisites sealed under each key id (a full scan; what a
    /// server checks before creating a missing key).
    pub async fn sealed_requisite_keys(&self) -> Result<Vec<(String, u64)>, StoreError> {
        self.read(|conn| {
            let mut stmt = conn
                .prepare_cached(codec::sql(&payments_store_sql::statements::REQUISITE_KEYS))
                .map_err(error::db)?;
            let mut rows = stmt.query([]).map_err(error::db)?;
            let mut out = Vec::new();
            while let Some(row) = rows.next().map_err(error::db)? {
                let row = codec::SqliteRow::new(row);
                let c = codec::Cols::new(&row);
                out.push((c.text("key_id")?, c.num::<u64>("n")?));
            }
            Ok(out)
        })
        .await
    }

    /// Seals, under the current key, the requisites of every payment that holds them in clear
    /// or under a previous key, a page of [`RESEAL_PAGE`] payments per write transaction (the
    /// step of a key rotation after callback secrets, and of turning sealing on for payments
    /// written before it). A value that does not open under the installed keys stops it with
    /// [`StoreError::Corrupt`].
    pub async fn reseal_requisites(&self) -> Result<RequisiteReseal, StoreError> {
        let mut report = RequisiteReseal::default();
        let mut after = String::new();
        loop {
            let s = self.sealing.clone();
            let from = after.clone();
            let (page, last, done) = self.write(move |c| reseal_page(c, &s, &from)).await?;
            report.resealed += page.resealed;
            report.current += page.current;
            report.changed_meanwhile += page.changed_meanwhile;
            match last {
                Some(id) if !done => after = id,
                _ => break,
            }
        }
        report.audit_records_masked = self.mask_audit_states().await?;
        Ok(report)
    }

    /// Masks the requisites that audit records written by earlier builds copied in clear
    /// ([`StoredAuditStates`]), a page of [`RESEAL_PAGE`] records per write transaction;
    /// returns how many records changed. Idempotent.
    async fn mask_audit_states(&self) -> Result<usize, StoreError> {
        let mut masked = 0;
        let mut after = 0i64;
        loop {
            let (n, last) = self.write(move |c| mask_audit_page(c, after)).await?;
            masked += n;
            match last {
                Some(seq) => after = seq,
                None => return Ok(masked),
            }
        }
    }

    /// Gives every payment written before schema 16 (a requisite, no `requisite_last4`) the
    /// last four digits of its requisite, and every one written before schema 25 the keyed
    /// digest of its requisite under the current key (`requisite_digest`, while a key is
    /// installed), a page of [`RESEAL_PAGE`] payments per write transaction, each row only
    /// while it still lacks them and has the same requisite (`payments-server payment
    /// backfill-last4`). Idempotent: a second run finds nothing but requisites too short.
    pub async fn backfill_requisite_last4(&self) -> Result<Last4Backfill, StoreError> {
        let mut report = Last4Backfill::default();
        let mut after = String::new();
        loop {
            let s = self.sealing.clone();
            let from = after.clone();
            let (page, last, done) = self.write(move |c| last4_page(c, &s, &from)).await?;
            report.filled += page.filled;
            report.too_short += page.too_short;
            report.changed_meanwhile += page.changed_meanwhile;
            match last {
                Some(id) if !done => after = id,
                _ => return Ok(report),
            }
        }
    }

    /// Stops accepting writes, commits the writes already queued and stops the writer thread;
    /// later writes are [`StoreError::Unavailable`], reads keep working. Blocks until the
    /// writer has finished. Idempotent; also done on drop.
    pub fn close(&self) {
        self.writer.close();
    }

    /// Runs `write` on the writer thread inside the next group-commit transaction. `write` may
    /// run more than once (a batch is run again when one of its jobs fails): it acts only
    /// through the connection.
    async fn write<R, F>(&self, write: F) -> Result<R, StoreError>
    where
        R: Send + 'static,
        F: FnMut(&mut Connection) -> Result<R, StoreError> + Send + 'static,
    {
        self.reserve.admit(Writes::Grows)?;
        let result = self.writer.write(write).await;
        self.after_write(&result);
        result
    }

    /// [`SqliteStore::write`] for a write that only deletes (a purge): admitted on a full
    /// disk too, in the room of the released reserve. While only such writes run, each one
    /// looks whether the database has room again (its free pages).
    async fn free<R, F>(&self, write: F) -> Result<R, StoreError>
    where
        R: Send + 'static,
        F: FnMut(&mut Connection) -> Result<R, StoreError> + Send + 'static,
    {
        self.reserve.admit(Writes::Frees)?;
        let result = self.writer.write(write).await;
        self.after_write(&result);
        if result.is_ok() && self.reserve.freeing_only() {
            // The purge is done whatever this look finds; a failed look waits for the next.
            if let Ok(free) = self.read_short(|c| free_bytes(c)).await {
                self.reserve.database_has_room(free);
            }
        }
        result
    }

    fn after_write<R>(&self, result: &Result<R, StoreError>) {
        if self.reserve.after(result) {
            let reserve = Arc::clone(&self.reserve);
            tokio::task::spawn_blocking(move || reserve.make());
        }
    }

    /// Runs `read` on a pooled read-only connection on tokio's blocking threads. A read first
    /// waits (asynchronously) for one of the pool's connections to be free, so a blocking
    /// thread is taken only when it can run at once: without that, many concurrent reads
    /// parked one blocking thread each on the pool (tens of threads for 4 connections).
    async fn read<R, F>(&self, read: F) -> Result<R, StoreError>
    where
        R: Send + 'static,
        F: FnOnce(&mut Connection) -> Result<R, StoreError> + Send + 'static,
    {
        let permit = Arc::clone(&self.read_permits)
            .acquire_owned()
            .await
            .map_err(|_| UnavailableCause::Closed.error("the store is closed"))?;
        let readers = Arc::clone(&self.readers);
        tokio::task::spawn_blocking(move || {
            let _permit = permit;
            readers.with(read)
        })
        .await
        .map_err(|e| UnavailableCause::Other.error(format_args!("the read did not finish: {e}")))?
    }

    /// Runs a list `read` ([`SqliteOptions::scan_timeout`]) on a pooled connection: SQLite
    /// checks the time every [`PROGRESS_STEPS`] virtual machine steps and interrupts the read
    /// once it has run that long, which fails as [`UnavailableCause::TimedOut`]. The time
    /// counts from when the read has its connection, not while it waits for one.
    async fn read_limited<R, F>(&self, read: F) -> Result<R, StoreError>
    where
        R: Send + 'static,
        F: FnOnce(&Connection) -> Result<R, StoreError> + Send + 'static,
    {
        let limit = self.scan_timeout;
        self.read(move |conn| {
            let conn = &*conn;
            let _limit = TimeLimit::set(conn, limit);
            read(conn)
        })
        .await
    }

    /// Runs a short `read` (a few indexed lookups of rows in the page cache, tens of
    /// microseconds) on one of the short-read connections, which no list or scan ever takes:
    /// the token check of every request and a payment by id never wait behind a project's
    /// scans. It runs where the caller already runs, on the tokio worker (no hand-off to a
    /// blocking thread and back: two thread switches, about a tenth of a create's CPU); when
    /// every short connection is busy it waits (asynchronously) for one, which is a wait of
    /// microseconds. For reads whose cost is bounded by a handful of rows only: a scan, an
    /// unbounded list or a count stays on the blocking pool, which protects the runtime from
    /// them.
    async fn read_short<R, F>(&self, read: F) -> Result<R, StoreError>
    where
        R: Send + 'static,
        F: FnOnce(&mut Connection) -> Result<R, StoreError> + Send + 'static,
    {
        let closed = |_| UnavailableCause::Closed.error("the store is closed");
        let permit = match Arc::clone(&self.short_permits).try_acquire_owned() {
            Ok(permit) => permit,
            Err(tokio::sync::TryAcquireError::NoPermits) => Arc::clone(&self.short_permits)
                .acquire_owned()
                .await
                .map_err(closed)?,
            Err(tokio::sync::TryAcquireError::Closed) => {
                return Err(UnavailableCause::Closed.error("the store is closed"))
            }
        };
        // A permit guarantees an idle connection: `with` does not wait.
        let result = self.short.with(read);
        drop(permit);
        result
    }
}

/// The bytes of the database's free pages: room inside the file that new rows take without
/// growing it.
fn free_bytes(conn: &Connection) -> Result<u64, StoreError> {
    let pages: u64 = conn
        .query_row("PRAGMA freelist_count", [], |r| r.get(0))
        .map_err(error::db)?;
    let size: u64 = conn
        .query_row("PRAGMA page_size", [], |r| r.get(0))
        .map_err(error::db)?;
    Ok(pages.saturating_mul(size))
}

/// How many SQLite virtual machine steps a limited read runs between two looks at the clock,
/// where it also yields its CPU (a few hundred microseconds of work at most).
const PROGRESS_STEPS: std::ffi::c_int = 10_000;

/// A time limit on the reads of one connection while it lives ([`SqliteStore::read_limited`]);
/// removed on drop, also when the read panics, so the connection goes back to the pool
/// without it.
struct TimeLimit<'c>(&'c Connection);

impl<'c> TimeLimit<'c> {
    fn set(conn: &'c Connection, limit: Duration) -> TimeLimit<'c> {
        let deadline = Instant::now() + limit;
        conn.progress_handler(
            PROGRESS_STEPS,
            Some(move || {
                // A long read gives way at each look: a request that just woke (a create's
                // token check, its commit) runs now instead of after the scan's time slice.
                std::thread::yield_now();
                Instant::now() >= deadline
            }),
        );
        TimeLimit(conn)
    }
}

impl Drop for TimeLimit<'_> {
    fn drop(&mut self) {
        self.0.progress_handler(0, None::<fn() -> bool>);
    }
}

/// `n` (at least 1) read-only connections to the database at `path`.
fn open_readers(
    path: &Path,
    n: usize,
    busy_timeout: Duration,
) -> Result<Vec<Connection>, OpenError> {
    (0..n.max(1))
        .map(|_| {
            let reader = Connection::open_with_flags(
                path,
                OpenFlags::SQLITE_OPEN_READ_ONLY | OpenFlags::SQLITE_OPEN_NO_MUTEX,
            )?;
            reader.busy_timeout(busy_timeout)?;
            reader.set_prepared_statement_cache_capacity(64);
            Ok(reader)
        })
        .collect()
}

/// The schema version of the database at `path` (0 for an empty one), read without changing
/// anything.
pub fn schema_version(path: impl AsRef<Path>) -> Result<u32, OpenError> {
    let conn = Connection::open_with_flags(path, OpenFlags::SQLITE_OPEN_READ_ONLY)?;
    Ok(conn.query_row("PRAGMA user_version", [], |r| r.get(0))?)
}

impl Drop for SqliteStore {
    fn drop(&mut self) {
        self.writer.close();
    }
}

/// One page of [`SqliteStore::backfill_requisite_last4`] after the id `after`: what it did,
/// the last id read, and whether it was the last page.
fn last4_page(
    conn: &mut Connection,
    sealing: &RequisiteSealing,
    after: &str,
) -> Result<(Last4Backfill, Option<String>, bool), StoreError> {
    use payments_store_sql::statements as st;
    let mut report = Last4Backfill::default();
    let mut updates = Vec::new();
    let mut last = None;
    let mut n = 0;
    {
        let mut stmt = conn
            .prepare_cached(codec::sql(&st::LAST4_MISSING_PAGE))
            .map_err(error::db)?;
        let mut rows = stmt
            .query(rusqlite::params![after, codec::limit(RESEAL_PAGE)])
            .map_err(error::db)?;
        while let Some(row) = rows.next().map_err(error::db)? {
            let row = codec::SqliteRow::new(row);
            let c = codec::Cols::new(&row);
            n += 1;
            last = Some(c.text("id")?);
            if let Some(values) = report.values(&c, sealing)? {
                updates.push(values);
            }
        }
    }
    for values in updates {
        let changed = conn
            .prepare_cached(codec::sql(&st::LAST4_SET))
            .map_err(error::db)?
            .execute(codec::params(values))
            .map_err(error::db)?;
        report.count(changed as u64);
    }
    Ok((report, last, n < RESEAL_PAGE))
}

/// One page of [`SqliteStore::reseal_requisites`] after the id `after`: what it did, the last
/// id read, and whether it was the last page.
fn reseal_page(
    conn: &mut Connection,
    sealing: &RequisiteSealing,
    after: &str,
) -> Result<(RequisiteReseal, Option<String>, bool), StoreError> {
    use payments_store_sql::statements as st;
    let rows = page(
        conn,
        &st::REQUISITES_PAGE,
        rusqlite::params![after, codec::limit(RESEAL_PAGE)],
        StoredRequisites::from_row,
    )?;
    let mut report = RequisiteReseal::default();
    for row in &rows {
        if !row.needs_reseal(sealing) {
            report.current += 1;
            continue;
        }
        let values = row.reseal_values(row.resealed(sealing)?);
        let changed = conn
            .prepare_cached(codec::sql(&st::REQUISITES_RESEAL))
            .map_err(error::db)?
            .execute(codec::params(values))
            .map_err(error::db)?;
        if changed == 1 {
            report.resealed += 1;
        } else {
            report.changed_meanwhile += 1;
        }
    }
    let last = rows.last().map(|r| r.id.to_string());
    Ok((report, last, rows.len() < RESEAL_PAGE))
}

/// The rows of one page statement (`sql` with `params`), each read by `read`.
fn page<T>(
    conn: &Connection,
    sql: &payments_store_sql::sql::Sql,
    params: impl rusqlite::Params,
    read: impl Fn(&codec::Cols<'_>) -> Result<T, StoreError>,
) -> Result<Vec<T>, StoreError> {
    let mut stmt = conn.prepare_cached(codec::sql(sql)).map_err(error::db)?;
    let mut rows = stmt.query(params).map_err(error::db)?;
    let mut out = Vec::new();
    while let Some(row) = rows.next().map_err(error::db)? {
        out.push(read(&codec::Cols::new(&codec::SqliteRow::new(row)))?);
    }
    Ok(out)
}

/// One page of [`SqliteStore::mask_audit_states`] after sequence number `after`: how many
/// records it masked, and the last one read (`None` at the end).
fn mask_audit_page(conn: &mut Connection, after: i64) -> Result<(usize, Option<i64>), StoreError> {
    use payments_store_sql::statements as st;
    let rows = page(
        conn,
        &st::AUDIT_STATES_PAGE,
        rusqlite::params![after, codec::limit(RESEAL_PAGE)],
        StoredAuditStates::from_row,
    )?;
    let mut masked = 0;
    for values in rows.iter().filter_map(StoredAuditStates::masked_values) {
        masked += conn
            .prepare_cached(codec::sql(&st::AUDIT_STATES_MASK))
            .map_err(error::db)?
            .execute(codec::params(values))
            .map_err(error::db)?;
    }
    let last = rows.last().map(|r| r.seq);
    Ok((masked, last.filter(|_| rows.len() == RESEAL_PAGE)))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A read that never ends on its own.
    const ENDLESS: &str = "WITH RECURSIVE c(x) AS (SELECT 1 UNION ALL SELECT x + 1 FROM c) \
                           SELECT count(*) FROM c";

    fn store(readers: usize, scan_timeout: Duration) -> (tempfile::TempDir, SqliteStore) {
        let dir = tempfile::tempdir().expect("a temporary directory");
        let options = SqliteOptions {
            readers,
            scan_timeout,
            synchronous: Synchronous::Normal,
            ..SqliteOptions::default()
        };
        let store = SqliteStore::open(dir.path().join("t.db"), options).expect("open");
        (dir, store)
    }

    #[tokio::test]
    async fn a_list_read_is_stopped_at_its_time_limit_and_the_connection_serves_on() {
        let (_dir, store) = store(1, Duration::from_millis(200));
        let started = Instant::now();
        let stopped = store
            .read_limited(|c| {
                c.query_row(ENDLESS, [], |r| r.get::<_, i64>(0))
                    .map_err(error::db)
            })
            .await;
        assert!(
            matches!(
                &stopped,
                Err(StoreError::Unavailable {
                    cause: UnavailableCause::TimedOut,
                    ..
                })
            ),
            "{stopped:?}"
        );
        assert!(
            started.elapsed() < Duration::from_secs(5),
            "{:?}",
            started.elapsed()
        );
        // The one connection went back without its limit: an unlimited read of a second
        // is not stopped.
        let counted = store
            .read(|c| {
                c.query_row(
                    "WITH RECURSIVE c(x) AS (SELECT 1 UNION ALL SELECT x + 1 FROM c \
                     WHERE x < 300000) SELECT count(*) FROM c",
                    [],
                    |r| r.get::<_, i64>(0),
                )
                .map_err(error::db)
            })
            .await;
        assert_eq!(counted, Ok(300_000));
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn short_reads_do_not_wait_for_a_pool_busy_with_scans() {
        let (_dir, store) = store(1, Duration::from_secs(3));
        let store = Arc::new(store);
        let scanning = {
            let store = Arc::clone(&store);
            tokio::spawn(async move {
                store
                    .read_limited(|c| {
                        c.query_row(ENDLESS, [], |r| r.get::<_, i64>(0))
                            .map_err(error::db)
                    })
                    .await
            })
        };
        // The pool's one connection is taken by the scan.
        for _ in 0..200 {
            if store.read_permits.available_permits() == 0 {
                break;
            }
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
        assert_eq!(store.read_permits.available_permits(), 0, "the scan runs");
        let started = Instant::now();
        let one = store
            .read_short(|c| {
                c.query_row("SELECT 1", [], |r| r.get::<_, i64>(0))
                    .map_err(error::db)
            })
            .await;
        assert_eq!(one, Ok(1));
        assert!(
            started.elapsed() < Duration::from_secs(1),
            "a short read waited {:?} behind the scan",
            started.elapsed()
        );
        assert!(scanning.await.expect("the scan ends").is_err());
    }
}
