//! Errors: opening the store, and the mapping of SQLite failures to [`StoreError`].

use payments_core::store::{StoreError, UnavailableCause};
use rusqlite::ErrorCode;

/// Why [`SqliteStore::open`](crate::SqliteStore::open) failed.
#[non_exhaustive]
#[derive(Debug, thiserror::Error)]
pub enum OpenError {
    /// The database's schema does not suit this build: a newer build wrote it, or it needs
    /// `payments-server migrate` (an open told not to migrate).
    #[error(transparent)]
    Schema(#[from] payments_store_sql::schema::SchemaError),
    /// A read-only open found another schema version than this build's, and cannot migrate.
    #[error(
        "the database has schema version {found} and this build {supported}; a read-only \
         open does not migrate"
    )]
    SchemaMismatch {
        /// The version recorded in the database.
        found: u32,
        /// This build's version.
        supported: u32,
    },
    /// The WAL journal mode could not be enabled (e.g. an in-memory database).
    #[error("cannot enable the WAL journal mode: SQLite answered {0:?}")]
    NoWal(String),
    /// SQLite refused to open or migrate the database.
    #[error("sqlite: {0}")]
    Sqlite(#[from] rusqlite::Error),
    /// The database file could not be created owner-only (mode 0600), or an existing one (or
    /// its `-wal` or `-shm`) that others could read could not be made so.
    #[error("{}: {source}", path.display())]
    Files {
        /// The file.
        path: std::path::PathBuf,
        /// Why.
        #[source]
        source: std::io::Error,
    },
    /// The writer thread could not be started.
    #[error("cannot start the writer thread: {0}")]
    Thread(#[from] std::io::Error),
}

/// Maps a database failure: damaged data is `Corrupt`, everything else (busy, locked, I/O, full
/// disk, out of memory) is `Unavailable`, its message starting with its
/// [`UnavailableCause`] (`disk full: ...`, `locked: ...`, `io: ...`).
pub(crate) fn db(e: rusqlite::Error) -> StoreError {
    use rusqlite::Error as E;
    match &e {
        E::SqliteFailure(f, _)
            if matches!(f.code, ErrorCode::DatabaseCorrupt | ErrorCode::NotADatabase) =>
        {
            StoreError::Corrupt(e.to_string())
        }
        E::FromSqlConversionFailure(..)
        | E::IntegralValueOutOfRange(..)
        | E::Utf8Error(..)
        | E::InvalidColumnType(..) => StoreError::Corrupt(e.to_string()),
        E::SqliteFailure(f, _) => {
            let cause = match f.code {
                ErrorCode::DiskFull => UnavailableCause::DiskFull,
                ErrorCode::DatabaseBusy | ErrorCode::DatabaseLocked => UnavailableCause::Locked,
                ErrorCode::SystemIoFailure
                | ErrorCode::ReadOnly
                | ErrorCode::CannotOpen
                | ErrorCode::PermissionDenied => UnavailableCause::Io,
                // Only the read time limit's progress handler interrupts a statement.
                ErrorCode::OperationInterrupted => UnavailableCause::TimedOut,
                _ => UnavailableCause::Other,
            };
            cause.error(&e)
        }
        _ => UnavailableCause::Other.error(&e),
    }
}

/// `true` for a UNIQUE / PRIMARY KEY violation.
pub(crate) fn is_unique_violation(e: &rusqlite::Error) -> bool {
    matches!(e, rusqlite::Error::SqliteFailure(f, _) if f.code == ErrorCode::ConstraintViolation)
}

pub(crate) use payments_store_sql::codec::corrupt;

/// A unique violation as `Duplicate(what())`, anything else as a database failure.
pub(crate) fn duplicate(e: rusqlite::Error, what: impl FnOnce() -> String) -> StoreError {
    if is_unique_violation(&e) {
        StoreError::Duplicate(what())
    } else {
        db(e)
    }
}
