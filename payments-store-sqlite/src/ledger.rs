//! The project ledger on SQLite: the shared statements of `payments_store_sql::ledger`, run on
//! the writer (appends) or a reader (balance, pages, totals).

use payments_core::ids::ProjectId;
use payments_core::ledger::{Balance, EntryKind, KindTotal, LedgerEntry, Posting};
use payments_core::store::{EntryQuery, StoreError};
use payments_core::Timestamp;
use payments_store_sql::ledger as lg;
use rusqlite::Connection;

use crate::codec::{self, execute, params, query, record, record_params, sql, Record, SqlValue};
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
        Err(e) if is_unique_violation(&e) => {
            return Err(StoreError::Duplicate(format!(
                "a ledger entry for {}",
                posting
                    .payment
                    .map(|(id, v)| format!("payment {id} version {v}"))
                    .or_else(|| posting.reference.as_ref().map(|r| format!("payout {r}")))
                    .unwrap_or_else(|| format!("entry {}", posting.id))
            )))
        }
        Err(e) => return Err(db(e)),
    }
    execute(conn, &lg::BALANCE_UPDATE, record_params(&after)?)?;
    Ok(entry)
}

/// A project's balance.
pub(crate) fn balance(conn: &Connection, project: ProjectId) -> Result<Balance, StoreError> {
    Ok(
        record(conn, &lg::BALANCE, params([SqlValue::display(project)]))?
            .unwrap_or_else(|| Balance::empty(project)),
    )
}

/// A page of entries.
pub(crate) fn find(conn: &Connection, q: &EntryQuery) -> Result<Vec<LedgerEntry>, StoreError> {
    let (text, values) = lg::entry_page(q, codec::D);
    query(conn, &text, params(values), LedgerEntry::from_row)
}

/// The count and sum of each kind in `[from, to)`.
pub(crate) fn totals(
    conn: &Connection,
    project: ProjectId,
    from: Timestamp,
    to: Timestamp,
) -> Result<Vec<(EntryKind, KindTotal)>, StoreError> {
    let lines = query(
        conn,
        sql(&lg::ENTRY_TOTALS),
        params([
            SqlValue::display(project),
            SqlValue::ts(from),
            SqlValue::ts(to),
        ]),
        lg::totals_line,
    )?;
    Ok(lg::in_kind_order(lines))
}
