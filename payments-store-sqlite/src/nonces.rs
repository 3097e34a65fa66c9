//! Used request nonces: an append-only log in the database and an index of it in the writer
//! connection's temporary database; keys kept long go to a table keyed by them.
//!
//! A nonce is a random string. Kept in a table keyed by it, every nonce landed on a random
//! page of that table's B-tree, so each create dirtied a 4 KiB page of its own that the commit
//! wrote to the WAL (and a checkpoint to the database again) for a row of about 80 bytes:
//! three of the seven or eight `pwrite`s of a create, and a large share of the writer's time.
//! Here the database only appends to `nonce_log` (the nonces of one group commit share a page
//! or two), and the question "is this nonce used?" is answered by `temp.nonce_index`, a
//! B-tree keyed by `(project_id, nonce)` in the writer connection's temporary database: no WAL,
//! no fsync, no checkpoint, and it takes part in the writer's transactions (a batch or job
//! rolled back takes its nonces back out of the index with it). Its pages go to the temporary
//! file (never synced) when they no longer fit its cache. An in-memory database (`ATTACH
//! ':memory:'`) was measured too: the same `pwrite`s per create, but memory that grows with
//! the request rate (about 100 bytes per nonce kept 420 s: 700 MB at 15,000 creates per
//! second), where the temporary database keeps at most [`TEMP_CACHE_KIB`] in memory.
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
//!   After a failed batch the index catches up with every row after its mark, including this
//!   connection's own: a `COMMIT` that fails after the main database committed rolls back the
//!   temporary database alone.
//! - **`seq` never goes back**, so "rows after the last one seen" finds every row appended by
//!   another connection: a new row takes `max(seq) + 1` and the purge never deletes the newest
//!   row. (`AUTOINCREMENT` would promise the same at the price of one more write per insert.)
//! - **The log is the record; the index is derived.** A crash loses the index (it is rebuilt
//!   on open); a purge deletes expired rows of both.
//!
//! Memory: the temporary database's page cache, at most [`TEMP_CACHE_KIB`]. Its file (in
//! `SQLITE_TMPDIR`, `TMPDIR` or `/var/tmp`, deleted when the store closes) holds about 190
//! bytes per nonce used in the last 420 s: about 80 MB at 1,000 signed requests per second.

use payments_core::ids::ProjectId;
use payments_core::store::{Purged, StoreError};
use payments_core::Timestamp;
use rusqlite::{params, Connection, OptionalExtension};

use crate::codec;
use crate::error::db;

/// Page cache of the writer connection's temporary database, in KiB.
pub(crate) const TEMP_CACHE_KIB: u32 = 16 * 1024;

/// Keys kept at most this long go to the log and the index; longer ones to `nonces`.
pub(crate) const LOG_MAX_RETENTION: std::time::Duration = std::time::Duration::from_secs(3600);

/// Creates the index (and its bookkeeping) in the connection's temporary database and fills
/// it from the log. For the writer connection, once, after the schema is current.
pub(crate) fn open_index(conn: &Connection) -> rusqlite::Result<()> {
    conn.execute_batch(&format!(
        "CREATE TEMP TABLE nonce_index (
             project_id TEXT    NOT NULL,
             nonce      TEXT    NOT NULL,
             expires_at INTEGER NOT NULL,
             PRIMARY KEY (project_id, nonce)
         ) WITHOUT ROWID;
         -- Where the index stands: the data_version it was brought up to date at (-1: never)
         -- and the last log row it has seen.
         CREATE TEMP TABLE nonce_sync (
             id           INTEGER NOT NULL PRIMARY KEY CHECK (id = 1),
             seen_version INTEGER NOT NULL,
             seen_seq     INTEGER NOT NULL
         );
         -- The temporary database dies with the connection: its rollback journal need not
         -- survive a crash, only serve ROLLBACK and savepoints (in a file, each commit wrote
         -- it too).
         PRAGMA temp.journal_mode = MEMORY;
         PRAGMA temp.cache_size = -{TEMP_CACHE_KIB};"
    ))?;
    // The first fill in key order, and the expiry index built after it: one pass over sorted
    // rows instead of a random insert per row (3.5 million rows: 18 s one by one).
    let version: i64 =
        conn.query_row("SELECT data_version FROM pragma_data_version()", [], |r| {
            r.get(0)
        })?;
    conn.execute_batch(
        "BEGIN;
         INSERT INTO temp.nonce_index (project_id, nonce, expires_at)
             SELECT project_id, nonce, max(expires_at) FROM main.nonce_log
             GROUP BY project_id, nonce ORDER BY project_id, nonce;
         CREATE INDEX temp.nonce_index_expiry ON nonce_index (expires_at);",
    )?;
    // A commit by another connection after the version was read is caught up with by the
    // first writer transaction (the version will have moved).
    conn.execute(
        "INSERT INTO temp.nonce_sync (id, seen_version, seen_seq) \
         VALUES (1, ?1, coalesce((SELECT max(seq) FROM main.nonce_log), 0))",
        params![version],
    )?;
    conn.execute_batch("COMMIT")
}

/// Adds to the index the log rows another connection committed since it was last brought up
/// to date; when none did, only moves the index's mark past this connection's own rows now
/// and then (at most once per [`MARK_LAG`] rows), so that a later catch-up reads few rows
/// twice. The writer runs it at the start of each transaction ([`crate::writer::Begin`]): no
/// other connection can commit before that transaction ends. After a failed batch
/// (`after_failure`), the index may lack what the log has (a `COMMIT` that failed after the
/// main database had committed rolls back the temporary database alone): it catches up with
/// every row after its mark.
pub(crate) fn catch_up(conn: &Connection, after_failure: bool) -> Result<(), StoreError> {
    if after_failure {
        conn.prepare_cached("UPDATE temp.nonce_sync SET seen_version = -1")
            .and_then(|mut s| s.execute([]))
            .map_err(db)?;
    }
    catch_up_sql(conn).map_err(db)
}

/// How far the index's mark may lag behind this connection's own log rows.
const MARK_LAG: i64 = 4096;

fn catch_up_sql(conn: &Connection) -> rusqlite::Result<()> {
    let (current, version): (bool, i64) = conn
        .prepare_cached(
            "SELECT s.seen_version = v.data_version, v.data_version \
             FROM temp.nonce_sync AS s, pragma_data_version() AS v",
        )?
        .query_row([], |r| Ok((r.get(0)?, r.get(1)?)))?;
    if current {
        // Every row up to the newest is this connection's own (in the index) or was caught up
        // with: the mark may move past them.
        conn.prepare_cached(
            "UPDATE temp.nonce_sync SET seen_seq = (SELECT max(seq) FROM main.nonce_log) \
             WHERE seen_seq < (SELECT max(seq) FROM main.nonce_log) - ?1",
        )?
        .execute(params![MARK_LAG])?;
        return Ok(());
    }
    // The version is read first: a commit after it moves it again, and the next transaction
    // catches up once more (rows already added are added again harmlessly).
    conn.prepare_cached(
        "INSERT INTO temp.nonce_index (project_id, nonce, expires_at) \
         SELECT project_id, nonce, expires_at FROM main.nonce_log \
         WHERE seq > (SELECT seen_seq FROM temp.nonce_sync) \
         ON CONFLICT (project_id, nonce) \
         DO UPDATE SET expires_at = max(nonce_index.expires_at, excluded.expires_at)",
    )?
    .execute([])?;
    conn.prepare_cached(
        "UPDATE temp.nonce_sync SET seen_version = ?1, \
         seen_seq = max(seen_seq, coalesce((SELECT max(seq) FROM main.nonce_log), 0))",
    )?
    .execute(params![version])?;
    Ok(())
}

/// Records a key kept at most [`LOG_MAX_RETENTION`]: in the index unless it or the table of
/// keys kept long holds it live (one statement; an expired record is taken over with the new
/// expiry).
const USE_SHORT: &str = "INSERT INTO temp.nonce_index AS n (project_id, nonce, expires_at) \
     SELECT ?1, ?2, ?3 WHERE NOT EXISTS (SELECT 1 FROM main.nonces \
         WHERE project_id = ?1 AND nonce = ?2 AND expires_at > ?4) \
     ON CONFLICT (project_id, nonce) DO UPDATE SET expires_at = excluded.expires_at \
     WHERE n.expires_at <= ?4";

/// Records a key kept longer: in the table of keys kept long unless it or the index holds it
/// live.
const USE_LONG: &str = "INSERT INTO main.nonces AS n (project_id, nonce, expires_at) \
     SELECT ?1, ?2, ?3 WHERE NOT EXISTS (SELECT 1 FROM temp.nonce_index \
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
            "SELECT 1 WHERE EXISTS (SELECT 1 FROM temp.nonce_index \
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

/// Deletes expired nonces in chunks of at most `limit` rows per place, oldest first: from the
/// index and from the table of keys kept long through their expiry indexes, and the expired
/// rows among the `limit` oldest rows of the log. The store calls it in chunks, each its own
/// writer job, so that a purge of hundreds of thousands of nonces neither holds the writer
/// (and every create behind it) for seconds nor journals all of those pages at once.
///
/// The log has no expiry index (it would cost one more B-tree insert in the database per
/// create): it is deleted from its oldest end, where rows expire first; a row kept up to an
/// hour ahead of shorter-lived ones is passed over and deleted when it expires. Its newest row
/// is kept so that `seq` (`max(seq) + 1`) never goes back (see the module's invariants).
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
    let freed = delete(
        "DELETE FROM temp.nonce_index WHERE (project_id, nonce) IN \
         (SELECT project_id, nonce FROM temp.nonce_index WHERE expires_at <= ?1 \
          ORDER BY expires_at LIMIT ?2)",
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
        // Nonces that became free to use again (left the index).
        deleted: (freed + keyed) as u64,
        // The log's window moves on as long as it finds expired rows.
        more: freed >= limit || keyed >= limit || logged > 0,
    })
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use payments_core::testing::contract::{project_id, T0};

    use super::*;

    /// A connection to a fresh, migrated database file, with its nonce index.
    fn migrated_with_index() -> (tempfile::TempDir, Connection) {
        let dir = tempfile::tempdir().expect("a temporary directory");
        let mut conn = Connection::open(dir.path().join("n.db")).expect("open");
        crate::schema::migrate(&mut conn).expect("migrate");
        open_index(&conn).expect("the index");
        (dir, conn)
    }

    /// A log row the index never saw (what a `COMMIT` that failed after the main database had
    /// committed leaves: the temporary database rolled back alone, and this connection's own
    /// commit does not move `data_version`) is found by the catch-up after a failed batch.
    #[test]
    fn after_a_failed_batch_the_index_catches_up_with_its_own_rows() {
        let (_dir, conn) = migrated_with_index();
        let a = project_id(1);
        let until = (T0 + Duration::from_secs(300)).unix_millis();
        conn.execute(
            "INSERT INTO main.nonce_log (project_id, nonce, expires_at) VALUES (?1, 'lost', ?2)",
            params![a.to_string(), until],
        )
        .expect("a row behind the index's back");
        let use_lost =
            |conn: &Connection| use_nonce(conn, a, "lost", T0, T0 + Duration::from_secs(300));
        catch_up(&conn, false).expect("catch up");
        conn.execute_batch("SAVEPOINT probe").expect("savepoint");
        assert!(
            use_lost(&conn).expect("use"),
            "without the failure, nothing tells the index about its own connection's row"
        );
        conn.execute_batch("ROLLBACK TO probe; RELEASE probe")
            .expect("rollback");
        catch_up(&conn, true).expect("catch up after a failure");
        assert!(
            !use_lost(&conn).expect("use"),
            "found again after a failed batch"
        );
    }

    /// Without other connections the mark follows this connection's own rows (within
    /// [`MARK_LAG`]), so that the first catch-up after another connection's commit reads only
    /// the rows since, not the whole log.
    #[test]
    fn the_mark_follows_the_connections_own_rows() {
        let (_dir, conn) = migrated_with_index();
        let mark = |conn: &Connection| -> i64 {
            conn.query_row("SELECT seen_seq FROM temp.nonce_sync", [], |r| r.get(0))
                .expect("the mark")
        };
        let until = T0 + Duration::from_secs(300);
        conn.execute_batch("BEGIN").expect("begin");
        for i in 0..5_000 {
            assert!(use_nonce(&conn, project_id(1), &format!("n-{i}"), T0, until).expect("use"));
        }
        conn.execute_batch("COMMIT").expect("commit");
        assert_eq!(mark(&conn), 0);
        catch_up(&conn, false).expect("catch up");
        assert_eq!(mark(&conn), 5_000);
        catch_up(&conn, false).expect("catch up");
        assert_eq!(mark(&conn), 5_000, "within the lag: not moved");
    }
}
