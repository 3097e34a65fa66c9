//! The project ledger's appends on PostgreSQL (the reads are in `payments_store_sql::port`).
//!
//! An append is one statement, [`APPEND`], in the caller's transaction: the upsert of the
//! project's balance row adds the posting to it and takes the row's lock, and the entry is
//! inserted with the number and balance the row returns. Concurrent appends to one project,
//! on any node, queue on that lock from the statement until their commit: the shorter that
//! time, the more completions one project makes a second. A payment change's append is sent
//! together with its `COMMIT` ([`crate::payments::commit_with_posting`]), so the lock is held
//! for about one round trip.
//!
//! The figures are the core's: the row adds [`Balance::post`]'s figures for the posting on an
//! empty balance, which is what `post` adds to any balance (its numbers and sums add up, and
//! its time is the later of the two; `ledger::tests` in the core holds it to that).

use std::sync::LazyLock;

use deadpool_postgres::GenericClient;
use payments_core::ids::ProjectId;
use payments_core::ledger::{Balance, LedgerEntry, PostError, Posting, MAX_BALANCE_UNITS};
use payments_core::store::StoreError;
use payments_store_sql::ledger as lg;
use payments_store_sql::record::Record;
use payments_store_sql::sql::list;
use tokio_postgres::error::SqlState;
use tokio_postgres::Statement;

use crate::codec::{decode, params, record, refs, Param};
use crate::error::{db, unique_violation};

/// The project's balance row, created when missing, locked until the transaction ends.
pub(crate) async fn lock_balance<C: GenericClient>(
    c: &C,
    project: ProjectId,
) -> Result<Balance, StoreError> {
    record(c, &lg::BALANCE_LOCK, &[&project.to_string()])
        .await?
        .ok_or_else(|| StoreError::Corrupt("the balance upsert returned no row".into()))
}

/// The entry columns whose values the balance row gives: the number, the balance after and the
/// time. A balance or total beyond the core's bound ([`MAX_BALANCE_UNITS`], which
/// [`Balance::post`] refuses to pass) leaves the number NULL, which the table refuses: the
/// statement fails and nothing of it is written.
const FROM_BALANCE: [(&str, &str); 3] = [
    ("seq", "CASE WHEN {within} THEN b.entries END"),
    ("balance_after", "b.balance"),
    ("created_at", "b.updated_at"),
];

/// The append in one statement. Parameters: the posting's figures on an empty balance
/// ([`Balance::COLUMNS`], `$1`-`$9`), then the entry's own values ([`LedgerEntry::COLUMNS`]
/// but those of [`FROM_BALANCE`]). Returns the entry as written.
static APPEND: LazyLock<String> = LazyLock::new(|| {
    let adds = Balance::COLUMNS[1..]
        .iter()
        .map(|c| match *c {
            "updated_at" => format!("{c} = GREATEST(ledger_balances.{c}, EXCLUDED.{c})"),
            _ => format!("{c} = ledger_balances.{c} + EXCLUDED.{c}"),
        })
        .collect::<Vec<_>>()
        .join(", ");
    let placeholders = (1..=Balance::COLUMNS.len())
        .map(|i| format!("${i}"))
        .collect::<Vec<_>>()
        .join(", ");
    let sums = &Balance::COLUMNS[2..Balance::COLUMNS.len() - 1];
    let within = sums
        .iter()
        .map(|c| format!("abs(b.{c}) <= {MAX_BALANCE_UNITS}"))
        .collect::<Vec<_>>()
        .join(" AND ");
    let mut next = Balance::COLUMNS.len();
    let selected = LedgerEntry::COLUMNS
        .iter()
        .map(|c| match FROM_BALANCE.iter().find(|(name, _)| name == c) {
            Some((_, from)) => from.replace("{within}", &within),
            None => {
                next += 1;
                // INSERT ... SELECT gives its parameters no type from the target columns.
                let ty = match *c {
                    "amount" | "payment_version" => "bigint",
                    _ => "text",
                };
                format!("${next}::{ty}")
            }
        })
        .collect::<Vec<_>>()
        .join(", ");
    format!(
        "WITH b AS (INSERT INTO ledger_balances ({balance}) VALUES ({placeholders}) \
         ON CONFLICT (project_id) DO UPDATE SET {adds} \
         RETURNING {balance}) \
         INSERT INTO ledger_entries ({entry}) SELECT {selected} FROM b RETURNING {entry}",
        balance = list(Balance::COLUMNS),
        entry = list(LedgerEntry::COLUMNS),
    )
});

/// [`APPEND`] prepared on the connection (from its statement cache after the first time).
pub(crate) async fn prepare_append<C: GenericClient>(c: &C) -> Result<Statement, StoreError> {
    c.prepare_cached(&APPEND).await.map_err(db)
}

/// [`APPEND`]'s parameters for `posting`: the core's figures for it on an empty balance, then
/// the entry's own values.
pub(crate) fn append_params(posting: &Posting) -> Result<Vec<Param>, StoreError> {
    let (entry, figures) = Balance::empty(posting.project_id).post(posting)?;
    let mut values = figures.values()?;
    let own = LedgerEntry::COLUMNS
        .iter()
        .zip(entry.values()?)
        .filter(|(c, _)| FROM_BALANCE.iter().all(|(name, _)| name != *c))
        .map(|(_, v)| v);
    values.extend(own);
    Ok(params(values))
}

/// The entry [`APPEND`] answered with, or the error it failed with (a second entry for one
/// payment version, or a payout reference used twice: [`StoreError::Duplicate`]).
pub(crate) fn appended(
    posting: &Posting,
    answer: Result<Option<tokio_postgres::Row>, tokio_postgres::Error>,
) -> Result<LedgerEntry, StoreError> {
    let row = match answer {
        Ok(row) => row.ok_or_else(|| StoreError::Corrupt("the append returned no row".into()))?,
        Err(e) if unique_violation(&e).is_some() => return Err(lg::duplicate_entry(posting)),
        Err(e) if e.code() == Some(&SqlState::NOT_NULL_VIOLATION) => {
            return Err(PostError::Overflow.into())
        }
        Err(e) => return Err(db(e)),
    };
    let entry: LedgerEntry = decode(&row)?;
    // What `post` keeps of the posting, and a time never before the posting's.
    debug_assert!(entry.seq >= 1);
    debug_assert!(entry.posting.at >= posting.at);
    debug_assert_eq!(
        entry.posting,
        Posting {
            at: entry.posting.at,
            ..posting.clone()
        }
    );
    Ok(entry)
}

/// Appends a posting and writes the balance after it ([`APPEND`]). Call inside a transaction.
pub(crate) async fn append<C: GenericClient>(
    c: &C,
    posting: &Posting,
) -> Result<LedgerEntry, StoreError> {
    let statement = prepare_append(c).await?;
    let values = append_params(posting)?;
    appended(posting, c.query_opt(&statement, &refs(&values)).await)
}
