//! Versioned schema migrations, embedded in the binary and applied on open.

use rusqlite::{Connection, TransactionBehavior};

use crate::OpenError;

/// Migration `i` brings the schema from version `i` to `i + 1`. Append only: a released
/// migration never changes.
const MIGRATIONS: &[&str] = &[
    include_str!("migrations/0001_initial.sql"),
    include_str!("migrations/0002_project_paused.sql"),
    include_str!("migrations/0003_operations.sql"),
    include_str!("migrations/0004_cabinet.sql"),
    include_str!("migrations/0005_lease_token.sql"),
    include_str!("migrations/0006_payer_page.sql"),
    include_str!("migrations/0007_directory_version.sql"),
    include_str!("migrations/0008_nonce_log.sql"),
    include_str!("migrations/0009_status_counts_in_store.sql"),
];

/// The schema version this build writes.
pub const SCHEMA_VERSION: u32 = MIGRATIONS.len() as u32;

/// Brings the database to [`SCHEMA_VERSION`] in one transaction; refuses a newer database.
/// The version is `PRAGMA user_version`. An upgrade of an existing database is logged (only
/// `payments-server serve` and `migrate` open with migrations on).
pub(crate) fn migrate(conn: &mut Connection) -> Result<(), OpenError> {
    let tx = conn.transaction_with_behavior(TransactionBehavior::Immediate)?;
    let found: u32 = tx.query_row("PRAGMA user_version", [], |r| r.get(0))?;
    if !behind(found)? {
        return Ok(());
    }
    if found > 0 {
        tracing::info!(
            from = found,
            to = SCHEMA_VERSION,
            database = tx.path().unwrap_or_default(),
            "applying schema migrations"
        );
    }
    let start = usize::try_from(found).expect("a u32 fits usize on supported targets");
    for sql in &MIGRATIONS[start..] {
        tx.execute_batch(sql)?;
    }
    // PRAGMA takes no bound parameters; the value is our own constant.
    tx.execute_batch(&format!("PRAGMA user_version = {SCHEMA_VERSION}"))?;
    tx.commit()?;
    Ok(())
}

/// Whether a database at `found` needs this build's migrations: `true` when it is older,
/// `false` when it is current, [`OpenError::NewerSchema`] when a newer build wrote it. The one
/// rule of [`migrate`] and [`check_migrated`].
fn behind(found: u32) -> Result<bool, OpenError> {
    if found > SCHEMA_VERSION {
        return Err(OpenError::NewerSchema {
            found,
            supported: SCHEMA_VERSION,
        });
    }
    Ok(found < SCHEMA_VERSION)
}

/// Refuses a database whose schema is not [`SCHEMA_VERSION`] (for a read-only open, which
/// cannot migrate).
pub(crate) fn check_current(conn: &Connection) -> Result<(), OpenError> {
    let found: u32 = conn.query_row("PRAGMA user_version", [], |r| r.get(0))?;
    if found != SCHEMA_VERSION {
        return Err(OpenError::SchemaMismatch {
            found,
            supported: SCHEMA_VERSION,
        });
    }
    Ok(())
}

/// Refuses a database that is older than [`SCHEMA_VERSION`] (it needs `migrate`:
/// [`OpenError::NeedsMigration`]) or newer (another build wrote it), without changing
/// anything: for an open that must not migrate.
pub(crate) fn check_migrated(conn: &Connection) -> Result<(), OpenError> {
    let found: u32 = conn.query_row("PRAGMA user_version", [], |r| r.get(0))?;
    if behind(found)? {
        return Err(OpenError::NeedsMigration {
            found,
            supported: SCHEMA_VERSION,
        });
    }
    Ok(())
}
