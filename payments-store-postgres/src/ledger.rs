//! The project ledger's appends on PostgreSQL: the shared statements of
//! `payments_store_sql::ledger` (the reads are in `payments_store_sql::port`).
//! An append runs in the caller's transaction; the balance row's lock (taken by the upsert of
//! [`lock_balance`]) queues concurrent appends to one project, on any node, until the commit.

use deadpool_postgres::GenericClient;
use payments_core::ids::ProjectId;
use payments_core::ledger::{Balance, LedgerEntry, Posting};
use payments_core::store::StoreError;
use payments_store_sql::ledger as lg;

use crate::codec::{record, write_record};
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
