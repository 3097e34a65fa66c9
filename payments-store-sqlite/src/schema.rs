//! Schema migrations, embedded in the binary and applied on open, in the shared numbering of
//! [`payments_store_sql::schema`].

use payments_store_sql::schema::{self, BASELINE};
use rusqlite::{Connection, TransactionBehavior};

use crate::OpenError;

/// This engine's early migrations, before the numbering was shared: step `i` brought the
/// schema from version `i` to `i + 1`, and the last one leaves the schema of
/// [`BASELINE`](schema::BASELINE). Released: never changed.
const EARLY: &[&str] = &[
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

/// The schema version this build writes (shared by both engines).
pub const SCHEMA_VERSION: u32 = schema::SCHEMA_VERSION;

/// Brings the database to [`SCHEMA_VERSION`] in one transaction; refuses a newer database.
/// The version is `PRAGMA user_version`: this engine's early steps, then the baseline, then the
/// shared migrations. An upgrade of an existing database is logged (only `payments-server
/// serve` and `migrate` open with migrations on).
pub(crate) fn migrate(conn: &mut Connection) -> Result<(), OpenError> {
    let tx = conn.transaction_with_behavior(TransactionBehavior::Immediate)?;
    let found: u32 = tx.query_row("PRAGMA user_version", [], |r| r.get(0))?;
    if !schema::behind(found, None)? {
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
    if found < BASELINE {
        let start = usize::try_from(found).expect("a u32 fits usize on supported targets");
        for sql in EARLY.iter().skip(start) {
            tx.execute_batch(sql)?;
        }
    }
    for (_, m) in schema::after(found) {
        tx.execute_batch(m.sqlite)?;
    }
    // PRAGMA takes no bound parameters; the value is our own constant.
    tx.execute_batch(&format!("PRAGMA user_version = {SCHEMA_VERSION}"))?;
    tx.commit()?;
    Ok(())
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

/// Refuses a database that is older than [`SCHEMA_VERSION`] (it needs `migrate`) or newer
/// (another build wrote it), without changing anything: for an open that must not migrate.
pub(crate) fn check_migrated(conn: &Connection) -> Result<(), OpenError> {
    let found: u32 = conn.query_row("PRAGMA user_version", [], |r| r.get(0))?;
    Ok(schema::require_migrated(found, None)?)
}

// The early steps end below the baseline.
const _: () = assert!(EARLY.len() < BASELINE as usize);
