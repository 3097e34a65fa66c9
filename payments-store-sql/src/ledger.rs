//! The project ledger's rows and statements, written once for both engines
//! ([`payments_core::ledger`] decides every figure; the stores only keep them).
//!
//! Two tables (migration 14): `ledger_entries`, append-only, one row per entry, its key
//! `(project_id, seq)`; and `ledger_balances`, one row per project with the figures after its
//! last entry, written in the transaction of every entry. Amounts are integers of 0.0001 USDT,
//! so the databases sum them exactly. Uniqueness is the database's: one entry per payment
//! version (`ledger_entries_payment_version`), one payout per reference in a project
//! (`ledger_entries_reference`).
//!
//! SQLite's append, in the writer's transaction: [`BALANCE_LOCK`] (creates the project's row if
//! it has none), [`Balance::post`] in the core, [`ENTRY_INSERT`], [`BALANCE_UPDATE`].
//! PostgreSQL's is one statement of its own (`payments_store_postgres`'s `ledger` module), which
//! adds the core's figures to the row and numbers the entry from it, so that the row's lock is
//! held for as short a time as the server can; a payout's check reads the row through
//! [`BALANCE_LOCK`] first on both engines.

use payments_core::ledger::{
    Balance, EntryKind, KindTotal, LedgerEntry, Posting, Totals, TxReference, Usdt, UsdtAddress,
};
use payments_core::store::{EntryQuery, StoreError};

use crate::codec::{self, corrupt};
use crate::listing::Conditions;
use crate::record::Record;
use crate::row::Cols;
use crate::sql::{insert, list, select, Dialect, Sql};
use crate::value::SqlValue;

impl Record for LedgerEntry {
    const COLUMNS: &'static [&'static str] = &[
        "project_id",
        "seq",
        "id",
        "kind",
        "amount",
        "balance_after",
        "created_at",
        "payment_id",
        "payment_version",
        "destination",
        "reference",
        "reason",
        "actor",
    ];

    fn from_row(c: &Cols<'_>) -> Result<Self, StoreError> {
        let payment = match (
            c.opt_parsed("payment_id")?,
            c.opt_num::<u64>("payment_version")?,
        ) {
            (Some(id), Some(v)) => Some((id, v)),
            (None, None) => None,
            other => return Err(corrupt("ledger entry payment and version", other)),
        };
        let destination = c
            .opt_text("destination")?
            .map(|d| UsdtAddress::parse(&d).map_err(|_| corrupt("payout destination", d)))
            .transpose()?;
        let reference = c
            .opt_text("reference")?
            .map(|r| TxReference::parse(&r).map_err(|_| corrupt("payout reference", r)))
            .transpose()?;
        Ok(LedgerEntry {
            seq: c.num("seq")?,
            balance_after: Usdt::from_units(c.int("balance_after")?),
            posting: Posting {
                id: c.parsed("id")?,
                project_id: c.parsed("project_id")?,
                kind: c.parsed("kind")?,
                amount: Usdt::from_units(c.int("amount")?),
                at: c.ts("created_at")?,
                payment,
                destination,
                reference,
                reason: c.opt_text("reason")?,
                actor: c.opt_text("actor")?,
            },
        })
    }

    fn values(&self) -> Result<Vec<SqlValue>, StoreError> {
        let p = &self.posting;
        Ok(vec![
            SqlValue::display(p.project_id),
            SqlValue::uint(self.seq, "ledger seq")?,
            SqlValue::display(p.id),
            SqlValue::text(p.kind.as_str()),
            SqlValue::Int(p.amount.units()),
            SqlValue::Int(self.balance_after.units()),
            SqlValue::ts(p.at),
            SqlValue::opt_display(p.payment.map(|(id, _)| id)),
            match p.payment {
                Some((_, v)) => SqlValue::uint(v, "payment version")?,
                None => SqlValue::Null,
            },
            SqlValue::opt_text(p.destination.as_ref().map(|d| d.as_str().to_string())),
            SqlValue::opt_text(p.reference.as_ref().map(|r| r.as_str().to_string())),
            SqlValue::opt_text(p.reason.clone()),
            SqlValue::opt_text(p.actor.clone()),
        ])
    }
}

impl Record for Balance {
    const COLUMNS: &'static [&'static str] = &[
        "project_id",
        "entries",
        "balance",
        "credits",
        "reversals",
        "recheck_adjustments",
        "operator_adjustments",
        "payouts",
        "updated_at",
    ];

    fn from_row(c: &Cols<'_>) -> Result<Self, StoreError> {
        let usdt = |name: &str| c.int(name).map(Usdt::from_units);
        Ok(Balance {
            project_id: c.parsed("project_id")?,
            entries: c.num("entries")?,
            balance: usdt("balance")?,
            totals: Totals {
                credits: usdt("credits")?,
                reversals: usdt("reversals")?,
                recheck_adjustments: usdt("recheck_adjustments")?,
                operator_adjustments: usdt("operator_adjustments")?,
                payouts: usdt("payouts")?,
            },
            updated_at: c.opt_ts("updated_at")?,
        })
    }

    fn values(&self) -> Result<Vec<SqlValue>, StoreError> {
        let t = &self.totals;
        Ok(vec![
            SqlValue::display(self.project_id),
            SqlValue::uint(self.entries, "ledger entries")?,
            SqlValue::Int(self.balance.units()),
            SqlValue::Int(t.credits.units()),
            SqlValue::Int(t.reversals.units()),
            SqlValue::Int(t.recheck_adjustments.units()),
            SqlValue::Int(t.operator_adjustments.units()),
            SqlValue::Int(t.payouts.units()),
            SqlValue::opt_ts(self.updated_at),
        ])
    }
}

/// The error of an append refused by a unique key: a second entry for one payment version, or
/// a payout reference used twice in a project.
pub fn duplicate_entry(posting: &Posting) -> StoreError {
    StoreError::Duplicate(format!(
        "a ledger entry for {}",
        posting
            .payment
            .map(|(id, v)| format!("payment {id} version {v}"))
            .or_else(|| posting.reference.as_ref().map(|r| format!("payout {r}")))
            .unwrap_or_else(|| format!("entry {}", posting.id))
    ))
}

/// A project's (`$1`) balance row.
pub static BALANCE: Sql =
    Sql::new(|_| select(Balance::COLUMNS, "ledger_balances", "WHERE project_id = $1"));

/// Project `$1`'s balance row, created empty when missing, and locked until the transaction
/// ends (PostgreSQL: the upsert's row lock; SQLite: the writer's transaction). One statement.
pub static BALANCE_LOCK: Sql = Sql::new(|_| {
    format!(
        "INSERT INTO ledger_balances ({}) VALUES ($1, 0, 0, 0, 0, 0, 0, 0, NULL) \
         ON CONFLICT (project_id) DO UPDATE SET entries = ledger_balances.entries \
         RETURNING {}",
        list(Balance::COLUMNS),
        list(Balance::COLUMNS)
    )
});

/// Writes a balance row after an append: [`Balance::values`](Record::values), keyed by its
/// first value.
pub static BALANCE_UPDATE: Sql = Sql::new(|_| {
    let set = Balance::COLUMNS[1..]
        .iter()
        .enumerate()
        .map(|(i, c)| format!("{c} = ${}", i + 2))
        .collect::<Vec<_>>()
        .join(", ");
    format!("UPDATE ledger_balances SET {set} WHERE project_id = $1")
});

/// Appends an entry: [`LedgerEntry::values`](Record::values).
pub static ENTRY_INSERT: Sql = Sql::new(|_| insert("ledger_entries", LedgerEntry::COLUMNS));

/// The count and sum of each kind of project `$1`'s entries recorded in `[$2, $3)`: `kind`,
/// `n`, `total` (integers on both engines: PostgreSQL's `sum` of a `bigint` is a `numeric`).
pub static ENTRY_TOTALS: Sql = Sql::new(|_| {
    "SELECT kind, count(*) AS n, CAST(sum(amount) AS BIGINT) AS total FROM ledger_entries \
     WHERE project_id = $1 AND created_at >= $2 AND created_at < $3 GROUP BY kind"
        .to_string()
});

/// A page of entries (see [`EntryQuery`]), in `(created_at, seq)` order or its reverse,
/// through the `(project_id, created_at, seq)` index.
pub fn entry_page(q: &EntryQuery, dialect: Dialect) -> (String, Vec<SqlValue>) {
    let mut w = Conditions::new(format!(
        "SELECT {} FROM ledger_entries WHERE ",
        list(LedgerEntry::COLUMNS)
    ));
    w.add("project_id = ?", SqlValue::display(q.project));
    if let Some(kind) = q.kind {
        w.add(" AND kind = ?", SqlValue::text(kind.as_str()));
    }
    // One bound on each side of `created_at`, the tighter one: an index range is read from
    // the first bound SQLite finds, and a looser one before it (the period's start under a
    // cursor deep in it) would make every page re-read the rows before it.
    let mut lower = q.created_from.map(|t| (">=", t));
    let mut upper = q.created_to.map(|t| ("<", t));
    if let Some((t, _)) = q.after {
        if q.oldest_first {
            lower = Some((">=", lower.map_or(t, |(_, from)| from.max(t))));
        } else if upper.is_none_or(|(_, to)| t < to) {
            upper = Some(("<=", t));
        }
    }
    for (op, t) in [lower, upper].into_iter().flatten() {
        w.add(&format!(" AND created_at {op} ?"), SqlValue::ts(t));
    }
    if let Some(r) = &q.reference {
        w.add(" AND reference = ?", SqlValue::text(r.as_str()));
    }
    if let Some(id) = q.payment {
        w.add(" AND payment_id = ?", SqlValue::display(id));
    }
    let (cmp, order) = if q.oldest_first {
        (">", "ASC")
    } else {
        ("<", "DESC")
    };
    if let Some((t, seq)) = q.after {
        // The pair decides ties at the cursor's time.
        w.add(&format!(" AND (created_at {cmp} ?"), SqlValue::ts(t));
        w.add(
            &format!(" OR seq {cmp} ?)"),
            SqlValue::Int(i64::try_from(seq).unwrap_or(i64::MAX)),
        );
    }
    w.add(
        &format!(" ORDER BY created_at {order}, seq {order} LIMIT ?"),
        SqlValue::Int(codec::limit(q.limit)),
    );
    w.finish(dialect)
}

/// One line of [`ENTRY_TOTALS`].
pub fn totals_line(c: &Cols<'_>) -> Result<(EntryKind, KindTotal), StoreError> {
    Ok((
        c.parsed("kind")?,
        KindTotal {
            count: c.num("n")?,
            sum: Usdt::from_units(c.int("total")?),
        },
    ))
}

/// The lines of [`ENTRY_TOTALS`] in [`EntryKind::ALL`] order.
pub fn in_kind_order(mut lines: Vec<(EntryKind, KindTotal)>) -> Vec<(EntryKind, KindTotal)> {
    lines.sort_by_key(|(k, _)| *k);
    lines
}

#[cfg(test)]
mod tests {
    use super::*;
    use payments_core::ids::ProjectId;
    use payments_core::Timestamp;

    #[test]
    fn a_page_reads_in_the_index_order_from_its_cursor() {
        let q = EntryQuery {
            after: Some((Timestamp::from_unix_millis(5), 7)),
            ..EntryQuery::new(
                "00000000-0000-4000-8000-000000000000"
                    .parse::<ProjectId>()
                    .unwrap(),
                10,
            )
        };
        let (sql, values) = entry_page(&q, Dialect::Postgres);
        assert!(sql.ends_with(
            "AND created_at <= $2 AND (created_at < $3 OR seq < $4) \
             ORDER BY created_at DESC, seq DESC LIMIT $5"
        ));
        assert_eq!(values.len(), 5);
        let (sql, _) = entry_page(
            &EntryQuery {
                oldest_first: true,
                ..q.clone()
            },
            Dialect::Sqlite,
        );
        assert!(sql.contains("created_at >= ?2 AND (created_at > ?3 OR seq > ?4)"));
        assert!(sql.ends_with("ORDER BY created_at ASC, seq ASC LIMIT ?5"));
        // With a period too: one bound on each side, the tighter one (a cursor deep in a
        // period must not re-read the period's start).
        let ts = Timestamp::from_unix_millis;
        let bounds = |q: EntryQuery| {
            let (sql, values) = entry_page(&q, Dialect::Postgres);
            let n = sql.matches("created_at >").count() + sql.matches("created_at <").count();
            (n, values)
        };
        let period = EntryQuery {
            created_from: Some(ts(1)),
            created_to: Some(ts(9)),
            ..q.clone()
        };
        let (n, values) = bounds(EntryQuery {
            oldest_first: true,
            ..period.clone()
        });
        // project, lower (the cursor's 5 > 1), upper 9, the tie pair, the limit: three
        // comparisons of created_at.
        assert_eq!((n, values.len()), (3, 6));
        assert_eq!(values[1], SqlValue::ts(ts(5)));
        let (_, values) = bounds(period.clone());
        // Newest first: lower 1, upper the cursor's 5 (below 9).
        assert_eq!(values[1..3], [SqlValue::ts(ts(1)), SqlValue::ts(ts(5))]);
        let (_, values) = bounds(EntryQuery {
            after: Some((ts(20), 7)),
            ..period
        });
        assert_eq!(values[1..3], [SqlValue::ts(ts(1)), SqlValue::ts(ts(9))]);
    }

    #[test]
    fn the_balance_update_sets_every_column_but_the_key() {
        assert_eq!(
            BALANCE_UPDATE.text(Dialect::Postgres),
            "UPDATE ledger_balances SET entries = $2, balance = $3, credits = $4, \
             reversals = $5, recheck_adjustments = $6, operator_adjustments = $7, \
             payouts = $8, updated_at = $9 WHERE project_id = $1"
        );
    }
}
