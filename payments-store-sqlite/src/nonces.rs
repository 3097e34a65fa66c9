//! Used request nonces: an append-only log in the database and an index of it in an
//! in-memory database attached to the writer connection; keys kept long go to a table keyed
//! by them.
//!
//! A nonce is a random string. Kept in a table keyed by it, every nonce landed on a random
//! page of that table's B-tree, so each create dirtied a 4 KiB page of its own that the commit
//! wrote to the WAL (and a checkpoint to the database again) for a row of about 80 bytes:
//! three of the seven or eight `pwrite`s of a create, and a large share of the writer's time.
//! Here the database only appends to `nonce_log` (the nonces of one group commit share a page
//! or two), and the question "is this nonce used?" is answered by `mem.nonce_index`, a B-tree
//! keyed by `(project_id, nonce)` in an in-memory database (`ATTACH ':memory:'`) of the writer
//! connection: no file, no WAL, no fsync, and it takes part in the writer's transactions (a
//! batch or job rolled back takes its nonces back out of the index with it). A temporary
//! database (`CREATE TEMP TABLE`) was measured first: it writes its dirty pages to its file at
//! every commit, about 1.4 `pwrite`s per create.
//!
//! Keys kept longer than [`LOG_MAX_RETENTION`] (the upstream's notification ids, 30 days) are
//! few, and would make the index large and its rebuild on open slow: they stay in the table
//! `nonces`, keyed by them. A use checks both places, whichever it is recorded in.
//!
//! # Invariants
//!
//! - **The index holds every logged nonce** the connection may need: it is filled from the
//!   log when the store opens, and at the start of each writer transaction, if another
//!   connection has committed since the index was last brought up to date (`PRAGMA
//!   data_version` moved), the log rows appended since then are added. Another process on the
//!   same file (a `payments-server` command, a second embedder's store) therefore cannot make
//!   this one accept a nonce it recorded. Within a writer transaction (`BEGIN IMMEDIATE`) no
//!   other connection can commit, so the check and the use are atomic.
//! - **`seq` never goes back**, so "rows after the last one seen" finds every row appended by
//!   another connection: a new row takes `max(seq) + 1` and the purge never deletes the newest
//!   row. (`AUTOINCREMENT` would promise the same at the price of one more write per insert.)
//! - **The log is the record; the index is derived.** A crash loses the index (it is rebuilt
//!   on open); a purge deletes expired rows of both.
//!
//! Memory: about 100 bytes per nonce (92 bytes of pages measured with 32-byte nonces), for
//! the nonces used in the last 420 s (their retention) and up to a minute more until the next
//! purge: about 50 MB at 1,000 signed requests per second, 2.5 MB for one project at the
//! default rate limit of 50 per second. The keys kept long are not in it.

use payments_core::ids::ProjectId;
use payments_core::store::StoreError;
use payments_core::Timestamp;
use rusqlite::{params, Connection, OptionalExtension};

use crate::codec;
use crate::error::db;

/// Keys kept at most this long go to the log and the index; longer ones to `nonces`.
pub(crate) const LOG_MAX_RETENTION: std::time::Duration = std::time::Duration::from_secs(3600);

/// Attaches the in-memory database, creates the index (and its bookkeeping) in it and fills it from
/// the log. For the writer connection, once, after the schema is current.
pub(crate) fn open_index(conn: &Connection) -> rusqlite::Result<()> {
    conn.execute_batch(
        "ATTACH DATABASE ':memory:' AS mem;
         CREATE TABLE mem.nonce_index (
             project_id TEXT    NOT NULL,
             nonce      TEXT    NOT NULL,
             expires_at INTEGER NOT NULL,
             PRIMARY KEY (project_id, nonce)
         ) WITHOUT ROWID;
         -- Where the index stands: the data_version it was brought up to date at (-1: never),
         -- the last log row it has seen, and whether another connection has committed since
         -- the last purge (it may have purged log rows whose entries are still here).
         CREATE TABLE mem.nonce_sync (
             id           INTEGER NOT NULL PRIMARY KEY CHECK (id = 1),
             seen_version INTEGER NOT NULL,
             seen_seq     INTEGER NOT NULL,
             foreign_commit INTEGER NOT NULL
         );
         INSERT INTO mem.nonce_sync (id, seen_version, seen_seq, foreign_commit)
             VALUES (1, -1, 0, 0);",
    )?;
    catch_up_sql(conn)
}

/// Adds to the index the log rows another connection committed since it was last brought up
/// to date; nothing (one read of the in-memory database) when no other connection committed.
/// The writer runs it at the start of each transaction ([`crate::writer::Begin`]): no other
/// connection can commit before that transaction ends.
pub(crate) fn catch_up(conn: &Connection) -> Result<(), StoreError> {
    catch_up_sql(conn).map_err(db)
}

fn catch_up_sql(conn: &Connection) -> rusqlite::Result<()> {
    let (current, version): (bool, i64) = conn
        .prepare_cached(
            "SELECT s.seen_version = v.data_version, v.data_version \
             FROM mem.nonce_sync AS s, pragma_data_version() AS v",
        )?
        .query_row([], |r| Ok((r.get(0)?, r.get(1)?)))?;
    if current {
        return Ok(());
    }
    // The version is read first: a commit after it moves it again, and the next transaction
    // catches up once more (rows already added are added again harmlessly).
    conn.prepare_cached(
        "INSERT INTO mem.nonce_index (project_id, nonce, expires_at) \
         SELECT project_id, nonce, expires_at FROM main.nonce_log \
         WHERE seq > (SELECT seen_seq FROM mem.nonce_sync) \
         ON CONFLICT (project_id, nonce) \
         DO UPDATE SET expires_at = max(nonce_index.expires_at, excluded.expires_at)",
    )?
    .execute([])?;
    conn.prepare_cached(
        "UPDATE mem.nonce_sync SET foreign_commit = seen_version <> -1, seen_version = ?1, \
         seen_seq = max(seen_seq, coalesce((SELECT max(seq) FROM main.nonce_log), 0))",
    )?
    .execute(params![version])?;
    Ok(())
}

/// Records a key kept at most [`LOG_MAX_RETENTION`]: in the index unless it or the table of
/// keys kept long holds it live (one statement; an expired record is taken over with the new
/// expiry).
const USE_SHORT: &str = "INSERT INTO mem.nonce_index AS n (project_id, nonce, expires_at) \
     SELECT ?1, ?2, ?3 WHERE NOT EXISTS (SELECT 1 FROM main.nonces \
         WHERE project_id = ?1 AND nonce = ?2 AND expires_at > ?4) \
     ON CONFLICT (project_id, nonce) DO UPDATE SET expires_at = excluded.expires_at \
     WHERE n.expires_at <= ?4";

/// Records a key kept longer: in the table of keys kept long unless it or the index holds it
/// live.
const USE_LONG: &str = "INSERT INTO main.nonces AS n (project_id, nonce, expires_at) \
     SELECT ?1, ?2, ?3 WHERE NOT EXISTS (SELECT 1 FROM mem.nonce_index \
         WHERE project_id = ?1 AND nonce = ?2 AND expires_at > ?4) \
     ON CONFLICT (project_id, nonce) DO UPDATE SET expires_at = excluded.expires_at \
     WHERE n.expires_at <= ?4";

/// Records a nonce unless a live one exists: `false` for a replay. An expired record is taken
/// over (the new expiry is kept). Runs on the writer, inside its transaction (which brought
/// the index up to date when it began).
pub(crate) fn use_nonce(
    conn: &Connection,
    project: ProjectId,
    nonce: &str,
    now: Timestamp,
    expires_at: Timestamp,
) -> Result<bool, StoreError> {
    let project = project.to_string();
    let (at, until) = (now.unix_millis(), expires_at.unix_millis());
    let short = expires_at <= now + LOG_MAX_RETENTION;
    let changed = conn
        .prepare_cached(if short { USE_SHORT } else { USE_LONG })
        .map_err(db)?
        .execute(params![project, nonce, until, at])
        .map_err(db)?;
    if changed == 0 {
        return Ok(false);
    }
    if short {
        conn.prepare_cached(
            "INSERT INTO main.nonce_log (project_id, nonce, expires_at) VALUES (?1, ?2, ?3)",
        )
        .map_err(db)?
        .execute(params![project, nonce, until])
        .map_err(db)?;
    }
    Ok(true)
}

/// Whether a nonce is recorded and live at `now`. Runs on the writer (the index is its
/// connection's).
pub(crate) fn nonce_live(
    conn: &Connection,
    project: ProjectId,
    nonce: &str,
    now: Timestamp,
) -> Result<bool, StoreError> {
    Ok(conn
        .prepare_cached(
            "SELECT 1 WHERE EXISTS (SELECT 1 FROM mem.nonce_index \
                 WHERE project_id = ?1 AND nonce = ?2 AND expires_at > ?3) \
             OR EXISTS (SELECT 1 FROM main.nonces \
                 WHERE project_id = ?1 AND nonce = ?2 AND expires_at > ?3)",
        )
        .map_err(db)?
        .query_row(
            params![project.to_string(), nonce, now.unix_millis()],
            |_| Ok(()),
        )
        .optional()
        .map_err(db)?
        .is_some())
}

/// What one chunk of a purge did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Purged {
    /// Nonces that became free to use again (left the index).
    pub freed: u64,
    /// Whether a chunk limit was reached: there may be more to delete.
    pub more: bool,
}

/// Deletes expired nonces in chunks of at most `limit` rows per place, oldest first: the
/// expired rows among the `limit` oldest rows of the log with their entries in the index (the
/// log keeps its newest row), and up to `limit` expired keys kept long, through their expiry
/// index. The store calls it in chunks, each its own writer job, so that a purge of hundreds of
/// thousands of nonces neither holds the writer (and every create behind it) for seconds nor
/// journals all of those pages at once.
///
/// Neither the log nor the index has an expiry index (each would cost one more B-tree insert
/// per create): the log is deleted from its oldest end, where rows expire first, and an
/// entry of the index leaves with the log row it came from (unless a later use renewed it).
/// A row kept up to an hour ahead of shorter-lived ones is passed over and deleted when it
/// expires. The newest row is kept so that `seq` (`max(seq) + 1`) never goes back (see the
/// module's invariants). When another connection has committed since the last purge, it may
/// have purged log rows whose entries are still in this index: the first chunk then also
/// scans the whole index for expired entries.
pub(crate) fn purge_nonces(
    conn: &Connection,
    now: Timestamp,
    limit: usize,
) -> Result<Purged, StoreError> {
    let delete = |sql: &str| -> Result<usize, StoreError> {
        conn.prepare_cached(sql)
            .map_err(db)?
            .execute(params![now.unix_millis(), codec::limit(limit)])
            .map_err(db)
    };
    let foreign: bool = conn
        .prepare_cached("SELECT foreign_commit FROM mem.nonce_sync")
        .map_err(db)?
        .query_row([], |r| r.get(0))
        .map_err(db)?;
    let swept = if foreign {
        conn.execute_batch("UPDATE mem.nonce_sync SET foreign_commit = 0")
            .map_err(db)?;
        conn.execute(
            "DELETE FROM mem.nonce_index WHERE expires_at <= ?1",
            params![now.unix_millis()],
        )
        .map_err(db)?
    } else {
        0
    };
    // The chunk of the log: the expired rows among the oldest; their entries leave the index,
    // the rows leave the log except the newest one.
    let freed = delete(
        "DELETE FROM mem.nonce_index WHERE expires_at <= ?1 AND (project_id, nonce) IN \
         (SELECT project_id, nonce FROM \
             (SELECT project_id, nonce, expires_at FROM main.nonce_log ORDER BY seq LIMIT ?2) \
          WHERE expires_at <= ?1)",
    )?;
    let logged = delete(
        "DELETE FROM main.nonce_log WHERE seq IN \
         (SELECT seq FROM (SELECT seq, expires_at FROM main.nonce_log ORDER BY seq LIMIT ?2) \
          WHERE expires_at <= ?1 AND seq < (SELECT max(seq) FROM main.nonce_log))",
    )?;
    let keyed = delete(
        "DELETE FROM main.nonces WHERE (project_id, nonce) IN \
         (SELECT project_id, nonce FROM main.nonces WHERE expires_at <= ?1 \
          ORDER BY expires_at LIMIT ?2)",
    )?;
    Ok(Purged {
        freed: (swept + freed + keyed) as u64,
        // The log's window moves on as long as it finds expired rows.
        more: keyed >= limit || logged > 0,
    })
}
