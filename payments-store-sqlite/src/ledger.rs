//! The project ledger's appends on SQLite, steps of the writer's transaction: the shared
//! statements of `payments_store_sql::ledger` (the reads are in `payments_store_sql::port`).

use payments_core::ids::ProjectId;
use payments_core::ledger::{Balance, LedgerEntry, Posting};
use payments_core::store::StoreError;
use payments_store_sql::ledger as lg;
use rusqlite::Connection;

use crate::codec::{execute, params, record, record_params, sql, SqlValue};
use crate::error::{db, is_unique_violation};

/// The project's balance row, created when missing; the writer's transaction holds it.
pub(crate) fn lock_balance(conn: &Connection, project: ProjectId) -> Result<Balance, StoreError> {
    record(
        conn,
        &lg::BALANCE_LOCK,
        params([SqlValue::display(project)]),
    )?
    .ok_or_else(|| StoreError::Corrupt("the balance upsert returned no row".into()))
}

/// Appends a posting and writes the balance after it, in the writer's transaction.
pub(crate) fn append(conn: &Connection, posting: &Posting) -> Result<LedgerEntry, StoreError> {
    let (entry, after) = lock_balance(conn, posting.project_id)?.post(posting)?;
    match conn
        .prepare_cached(sql(&lg::ENTRY_INSERT))
        .map_err(db)?
        .execute(record_params(&entry)?)
    {
        Ok(_) => {}
        Err(e) if is_unique_violation(&e) => return Err(lg::duplicate_entry(posting)),
        Err(e) => return Err(db(e)),
    }
    execute(conn, &lg::BALANCE_UPDATE, record_params(&after)?)?;
    Ok(entry)
}
