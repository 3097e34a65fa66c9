//! SQLite's process-wide options (`configure_process`): a statement journal of about 100 KiB
//! stays in memory instead of a temporary file, and a larger one still goes to a file. Its own test binary, because SQLite takes
//! the options only before the process's first connection, and this test must be that first.

use std::path::PathBuf;
use std::sync::Mutex;

use payments_store_sqlite::{configure_process, STATEMENT_JOURNAL_SPILL};
use rusqlite::Connection;

/// Held by each test: [`sqlite_temporary_files`] sees the whole process, so the other test's
/// spilled journal, open at that moment, would count as this test's.
static ONE_AT_A_TIME: Mutex<()> = Mutex::new(());

/// The files this process holds open that SQLite made as temporary files (`etilqs_*`, deleted
/// once open).
fn sqlite_temporary_files() -> Vec<PathBuf> {
    std::fs::read_dir("/proc/self/fd")
        .expect("/proc/self/fd lists this process's files")
        .filter_map(|fd| std::fs::read_link(fd.ok()?.path()).ok())
        .filter(|target| target.to_string_lossy().contains("etilqs_"))
        .collect()
}

/// A WAL database in `dir` with table `t` of `rows` rows of 1.5 KB (two to a page), the
/// options of [`configure_process`] in effect.
fn table_of(dir: &tempfile::TempDir, rows: usize) -> Connection {
    assert!(
        configure_process(),
        "the first SQLite use of this test binary takes the options"
    );
    let conn = Connection::open(dir.path().join("j.db")).expect("open");
    conn.execute_batch(&format!(
        "PRAGMA journal_mode = WAL;
         CREATE TABLE t (k INTEGER PRIMARY KEY, v BLOB NOT NULL);
         WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n WHERE i < {rows})
         INSERT INTO t SELECT i, randomblob(1500) FROM n;"
    ))
    .expect("the rows are written");
    conn
}

#[test]
fn a_statement_that_changes_a_hundred_kib_journals_them_in_memory() {
    let _alone = ONE_AT_A_TIME.lock().unwrap_or_else(|e| e.into_inner());
    let dir = tempfile::tempdir().expect("a temporary directory");
    let conn = table_of(&dir, 50);
    assert!(configure_process(), "a second call answers the same");
    // A statement that writes several rows and may fail halfway (NOT NULL) journals every
    // page it changes that existed before it: about 100 KiB here, over SQLite's default
    // spill and under ours.
    conn.execute_batch("BEGIN IMMEDIATE; UPDATE t SET v = randomblob(1500);")
        .expect("the update");
    let journaled = 25 * 4096;
    assert!(journaled > 64 * 1024 && journaled < STATEMENT_JOURNAL_SPILL);
    // A spilled journal stays open until the transaction ends.
    let files = sqlite_temporary_files();
    conn.execute_batch("COMMIT").expect("commit");
    assert!(
        files.is_empty(),
        "the statement journal went to a temporary file: {files:?}"
    );
}

/// Seen failing with a spill of 1 MiB: SQLite copies its one chunk to the file in one write,
/// which the unix VFS cuts to 128 KiB, and the statement failed with `SQLITE_FULL`.
#[test]
fn a_statement_that_journals_more_than_the_spill_goes_on_in_a_file() {
    let _alone = ONE_AT_A_TIME.lock().unwrap_or_else(|e| e.into_inner());
    let dir = tempfile::tempdir().expect("a temporary directory");
    let conn = table_of(&dir, 2000);
    conn.execute_batch("BEGIN IMMEDIATE; UPDATE t SET v = randomblob(1500); COMMIT;")
        .expect("an update that journals about 4 MiB");
}
