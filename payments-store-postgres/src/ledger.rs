//! The project ledger on PostgreSQL: the shared statements of `payments_store_sql::ledger`.
//! An append runs in the caller's transaction; the balance row's lock (taken by the upsert of
//! [`lock_balance`]) queues concurrent appends to one project, on any node, until the commit.

use deadpool_postgres::GenericClient;
use payments_core::ids::ProjectId;
use payments_core::ledger::{Balance, EntryKind, KindTotal, LedgerEntry, Posting};
use payments_core::store::{EntryQuery, StoreError};
use payments_core::Timestamp;
use payments_store_sql::ledger as lg;

use crate::codec::{self, decode, params, query, read, record, refs, write_record, SqlValue};
use crate::error::duplicate;

/// The project's balance row, created when missing, locked until the transaction ends.
pub(crate) async fn lock_balance<C: GenericClient>(
    c: &C,
    project: ProjectId,
) -> Result<Balance, StoreError> {
    record(c, &lg::BALANCE_LOCK, &[&project.to_string()])
        .await?
        .ok_or_else(|| StoreError::Corrupt("the balance upsert returned no row".into()))
}

/// Appends a posting and writes the balance after it. Call inside a transaction.
pub(crate) async fn append<C: GenericClient>(
    c: &C,
    posting: &Posting,
) -> Result<LedgerEntry, StoreError> {
    let (entry, after) = lock_balance(c, posting.project_id).await?.post(posting)?;
    // The two writes sent together (pipelined on the connection): the balance row's lock is
    // held one round trip less. An error in either fails the transaction.
    let (inserted, updated) = tokio::join!(
        write_record(c, &lg::ENTRY_INSERT, &entry),
        write_record(c, &lg::BALANCE_UPDATE, &after)
    );
    duplicate(inserted?, || {
        format!(
            "a ledger entry for {}",
            posting
                .payment
                .map(|(id, v)| format!("payment {id} version {v}"))
                .or_else(|| posting.reference.as_ref().map(|r| format!("payout {r}")))
                .unwrap_or_else(|| format!("entry {}", posting.id))
        )
    })?;
    duplicate(updated?, || "the balance row".into())?;
    Ok(entry)
}

/// A project's balance.
pub(crate) async fn balance<C: GenericClient>(
    c: &C,
    project: ProjectId,
) -> Result<Balance, StoreError> {
    Ok(record(c, &lg::BALANCE, &[&project.to_string()])
        .await?
        .unwrap_or_else(|| Balance::empty(project)))
}

/// A page of entries.
pub(crate) async fn find<C: GenericClient>(
    c: &C,
    q: &EntryQuery,
) -> Result<Vec<LedgerEntry>, StoreError> {
    let (text, values) = lg::entry_page(q, codec::D);
    query(c, &text, &refs(&params(values)))
        .await?
        .iter()
        .map(decode)
        .collect()
}

/// The count and sum of each kind in `[from, to)`.
pub(crate) async fn totals<C: GenericClient>(
    c: &C,
    project: ProjectId,
    from: Timestamp,
    to: Timestamp,
) -> Result<Vec<(EntryKind, KindTotal)>, StoreError> {
    let values = params([
        SqlValue::display(project),
        SqlValue::ts(from),
        SqlValue::ts(to),
    ]);
    let lines = query(c, codec::sql(&lg::ENTRY_TOTALS), &refs(&values))
        .await?
        .iter()
        .map(|row| read(row, lg::totals_line))
        .collect::<Result<Vec<_>, _>>()?;
    Ok(lg::in_kind_order(lines))
}
