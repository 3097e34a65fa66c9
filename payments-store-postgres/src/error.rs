//! Errors: connecting and migrating, and the mapping of PostgreSQL failures to [`StoreError`].

use payments_core::store::{StoreError, UnavailableCause};
use tokio_postgres::error::SqlState;

/// Why [`PgStore::connect`](crate::PgStore::connect), [`migrate`](crate::migrate) or
/// [`inspect`](crate::inspect) failed.
#[non_exhaustive]
#[derive(Debug, thiserror::Error)]
pub enum OpenError {
    /// The database URL does not parse.
    #[error("database URL: {0}")]
    Url(String),
    /// The database could not be reached or refused the connection.
    #[error("cannot connect to the database: {0}")]
    Connect(String),
    /// Another node held the migration lock for longer than the wait allowed.
    #[error("another node is migrating the database and did not finish within {0:?}; try again")]
    LockTimeout(std::time::Duration),
    /// The database's schema does not suit this build: a newer build's migration needs that
    /// build, or it needs `payments-server migrate` (a connect told not to migrate,
    /// [`PgOptions::migrate`](crate::PgOptions::migrate) off).
    #[error(transparent)]
    Schema(#[from] payments_store_sql::schema::SchemaError),
    /// A migration failed (it was rolled back).
    #[error("migration: {0}")]
    Migration(String),
    /// Reading the schema version (or the database's size) failed.
    #[error("reading the schema version: {0}")]
    Query(String),
}

/// What went wrong, in full: the server's SQLSTATE and message (with its detail and hint)
/// when it sent one, otherwise the client's error with every cause under it. The client's own
/// text for a server error is only "db error", which says nothing (a wrong password, a
/// missing database and a shutdown all print it).
pub(crate) fn describe(e: &tokio_postgres::Error) -> String {
    if let Some(d) = e.as_db_error() {
        let mut text = format!("{}: {}", d.code().code(), d.message());
        if let Some(detail) = d.detail() {
            text.push_str(&format!(" ({detail})"));
        }
        if let Some(hint) = d.hint() {
            text.push_str(&format!("; hint: {hint}"));
        }
        return text;
    }
    let mut text = e.to_string();
    let mut source = std::error::Error::source(e);
    while let Some(s) = source {
        let more = s.to_string();
        if !text.contains(&more) {
            text.push_str(&format!(": {more}"));
        }
        source = s.source();
    }
    text
}

/// Maps a database failure. Lost connections, timeouts, cancellations, overload, a database
/// shutting down and serialization or deadlock aborts are "not now" (`Unavailable`, `503`),
/// with their [`UnavailableCause`]: a database that cannot be reached (refused, lost, TLS or
/// sign-in failed, shutting down) is [`UnavailableCause::Unreachable`]; data that does not
/// convert is `Corrupt`.
pub(crate) fn db(e: tokio_postgres::Error) -> StoreError {
    if let Some(code) = e.code() {
        if *code == SqlState::DATA_CORRUPTED || *code == SqlState::INDEX_CORRUPTED {
            return StoreError::Corrupt(e.to_string());
        }
        return cause_of(code).error(format_args!("database: {}", describe(&e)));
    }
    if e.is_closed() {
        return UnavailableCause::Unreachable.error("the database connection was closed");
    }
    let text = describe(&e);
    if text.contains("error deserializing") || text.contains("invalid column") {
        return StoreError::Corrupt(text);
    }
    if is_unreachable(&e) {
        return UnavailableCause::Unreachable.error(format_args!("database: {text}"));
    }
    UnavailableCause::Other.error(format_args!("database: {text}"))
}

/// Whether a client error (one without a SQLSTATE) says the database could not be reached: the
/// connection failed, broke, timed out, or its TLS handshake or sign-in failed. tokio-postgres
/// shows an error's kind only as its text (the error's own `Display`, its causes apart).
fn is_unreachable(e: &tokio_postgres::Error) -> bool {
    const KINDS: [&str; 6] = [
        "error connecting to server",
        "error communicating with the server",
        "error performing TLS handshake",
        "timeout waiting for server",
        "authentication error",
        "connection closed",
    ];
    KINDS.contains(&e.to_string().as_str())
}

/// The cause of a failure by its SQLSTATE.
fn cause_of(code: &SqlState) -> UnavailableCause {
    let class = &code.code()[..2];
    if *code == SqlState::DISK_FULL || *code == SqlState::OUT_OF_MEMORY {
        UnavailableCause::DiskFull
    } else if *code == SqlState::LOCK_NOT_AVAILABLE
        || *code == SqlState::T_R_DEADLOCK_DETECTED
        || *code == SqlState::T_R_SERIALIZATION_FAILURE
    {
        UnavailableCause::Locked
    } else if *code == SqlState::IO_ERROR
        || *code == SqlState::READ_ONLY_SQL_TRANSACTION
        || *code == SqlState::INSUFFICIENT_PRIVILEGE
        || class == "58"
    {
        UnavailableCause::Io
    } else if class == "08"
        || class == "28"
        || *code == SqlState::ADMIN_SHUTDOWN
        || *code == SqlState::CRASH_SHUTDOWN
        || *code == SqlState::CANNOT_CONNECT_NOW
    {
        // A connection exception, a refused sign-in, a database shutting down or starting.
        UnavailableCause::Unreachable
    } else if *code == SqlState::QUERY_CANCELED {
        // `statement_timeout` (this store cancels nothing else): a read that ran too long.
        UnavailableCause::TimedOut
    } else if *code == SqlState::TOO_MANY_CONNECTIONS
        || *code == SqlState::CONFIGURATION_LIMIT_EXCEEDED
        || class == "53"
    {
        UnavailableCause::Overloaded
    } else {
        UnavailableCause::Other
    }
}

/// The name of the unique constraint `e` violated, if it is a unique violation.
pub(crate) fn unique_violation(e: &tokio_postgres::Error) -> Option<&str> {
    let d = e.as_db_error()?;
    (*d.code() == SqlState::UNIQUE_VIOLATION).then(|| d.constraint().unwrap_or(""))
}

pub(crate) use payments_store_sql::codec::corrupt;

/// A statement's result with a unique violation as `Duplicate(what())` and any other failure
/// as a database failure.
pub(crate) fn duplicate(
    result: Result<u64, tokio_postgres::Error>,
    what: impl FnOnce() -> String,
) -> Result<u64, StoreError> {
    match result {
        Ok(n) => Ok(n),
        Err(e) if unique_violation(&e).is_some() => Err(StoreError::Duplicate(what())),
        Err(e) => Err(db(e)),
    }
}
