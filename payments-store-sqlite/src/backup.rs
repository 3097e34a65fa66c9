//! Online backups: a consistent copy of a live database, taken with SQLite's online backup API
//! while the server keeps writing.
//!
//! The copy is made in one step, inside one read transaction of the source: it is the
//! database exactly as of one commit, the commits still in the WAL included, and in WAL mode it
//! never blocks the writer (a checkpoint only waits for it). It is written to `<file>.partial`
//! (created owner-only, 0600), checked with `PRAGMA quick_check`, switched to a self-contained
//! rollback journal, synced and renamed to `<file>`; an existing file is never overwritten.

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use rusqlite::backup::{Backup, StepResult};
use rusqlite::{Connection, OpenFlags};

/// What [`backup`] made.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BackupReport {
    /// The backup file.
    pub file: PathBuf,
    /// Its size in bytes.
    pub bytes: u64,
    /// Its schema version (`PRAGMA user_version`).
    pub schema_version: u32,
    /// How long the copy took.
    pub elapsed: Duration,
}

/// Why a backup failed; nothing is left at the destination.
#[derive(Debug, thiserror::Error)]
#[error("{0}")]
pub struct BackupError(pub String);

fn err(what: &str, e: impl std::fmt::Display) -> BackupError {
    BackupError(format!("{what}: {e}"))
}

/// Copies the database at `source` to `dest` (a new file, 0600). `settings` are written into
/// the copy afterwards (name, value), e.g. a callback-dispatch hold so that a server started on
/// a restored copy sends nothing until an operator releases it.
pub fn backup(
    source: &Path,
    dest: &Path,
    settings: &[(&str, &str)],
) -> Result<BackupReport, BackupError> {
    let started = Instant::now();
    if dest.exists() {
        return Err(BackupError(format!(
            "{} exists; a backup never overwrites a file",
            dest.display()
        )));
    }
    if !source.exists() {
        return Err(BackupError(format!("no database at {}", source.display())));
    }
    let mut partial = dest.as_os_str().to_owned();
    partial.push(".partial");
    let partial = PathBuf::from(partial);
    create_owner_only(&partial)?;
    let result = copy(source, &partial, settings);
    let schema_version = match result {
        Ok(v) => v,
        Err(e) => {
            let _ = std::fs::remove_file(&partial);
            return Err(e);
        }
    };
    std::fs::rename(&partial, dest).map_err(|e| {
        let _ = std::fs::remove_file(&partial);
        err(&format!("cannot move the copy to {}", dest.display()), e)
    })?;
    let bytes = std::fs::metadata(dest).map(|m| m.len()).unwrap_or(0);
    Ok(BackupReport {
        file: dest.to_path_buf(),
        bytes,
        schema_version,
        elapsed: started.elapsed(),
    })
}

/// Creates `path` empty with mode 0600; an existing one is an error.
fn create_owner_only(path: &Path) -> Result<(), BackupError> {
    let mut options = std::fs::OpenOptions::new();
    options.write(true).create_new(true);
    #[cfg(unix)]
    {
        use std::os::unix::fs::OpenOptionsExt;
        options.mode(0o600);
    }
    options
        .open(path)
        .map(drop)
        .map_err(|e| err(&format!("cannot create {}", path.display()), e))
}

fn copy(source: &Path, partial: &Path, settings: &[(&str, &str)]) -> Result<u32, BackupError> {
    let src = Connection::open_with_flags(
        source,
        OpenFlags::SQLITE_OPEN_READ_ONLY | OpenFlags::SQLITE_OPEN_NO_MUTEX,
    )
    .map_err(|e| err("cannot open the database", e))?;
    src.busy_timeout(Duration::from_secs(10))
        .map_err(|e| err("busy_timeout", e))?;
    let mut dst = Connection::open(partial).map_err(|e| err("cannot open the copy", e))?;
    {
        let b = Backup::new(&src, &mut dst).map_err(|e| err("backup", e))?;
        // All pages in one step: one read transaction, one consistent snapshot. Busy or
        // locked (a writer switching the journal, a checkpoint) is retried for a while.
        let deadline = Instant::now() + Duration::from_secs(30);
        loop {
            match b.step(-1).map_err(|e| err("backup", e))? {
                StepResult::Done => break,
                StepResult::More | StepResult::Busy | StepResult::Locked
                    if Instant::now() < deadline =>
                {
                    std::thread::sleep(Duration::from_millis(50));
                }
                other => return Err(BackupError(format!("backup did not finish: {other:?}"))),
            }
        }
    }
    for (name, value) in settings {
        dst.execute(
            "INSERT INTO settings (name, value) VALUES (?1, ?2) \
             ON CONFLICT (name) DO UPDATE SET value = excluded.value",
            [name, value],
        )
        .map_err(|e| err("cannot write a setting into the copy", e))?;
    }
    let check: String = dst
        .query_row("PRAGMA quick_check", [], |r| r.get(0))
        .map_err(|e| err("quick_check", e))?;
    if check != "ok" {
        return Err(BackupError(format!("the copy fails quick_check: {check}")));
    }
    // One self-contained file: no -wal beside it to forget.
    let mode: String = dst
        .query_row("PRAGMA journal_mode = DELETE", [], |r| r.get(0))
        .map_err(|e| err("journal_mode", e))?;
    if !mode.eq_ignore_ascii_case("delete") {
        return Err(BackupError(format!("the copy kept journal mode {mode}")));
    }
    let version: u32 = dst
        .query_row("PRAGMA user_version", [], |r| r.get(0))
        .map_err(|e| err("user_version", e))?;
    dst.close().map_err(|(_, e)| err("closing the copy", e))?;
    std::fs::File::open(partial)
        .and_then(|f| f.sync_all())
        .map_err(|e| err("sync", e))?;
    Ok(version)
}
