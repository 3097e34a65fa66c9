//! Payments as SQL.

use payments_core::ids::{PaymentId, ProjectId};
use payments_core::payment::{MerchantPaymentId, Payment, PaymentStatus};
use payments_core::store::PaymentQuery;
use payments_core::store::{InsertOutcome, PaymentChange, StoreError};
use payments_core::totals::PaymentTotals;
use payments_core::Timestamp;
use payments_store_sql::listing::{self, PrefixPlan, PrefixRead};
use payments_store_sql::record::{payment_from_row, payment_values, PAYMENT_COLUMNS};
use payments_store_sql::sealing::RequisiteSealing;
use payments_store_sql::statements as st;
use rusqlite::{params, Connection, OptionalExtension};

use crate::codec::{self, params, sql, Cols, SqlValue, SqliteRow};
use crate::error::{db, is_unique_violation};
use crate::{directory, outbox};

fn query_payments(
    conn: &Connection,
    sealing: &RequisiteSealing,
    sql: &str,
    params: impl rusqlite::Params,
) -> Result<Vec<Payment>, StoreError> {
    let mut stmt = conn.prepare_cached(sql).map_err(db)?;
    let mut rows = stmt.query(params).map_err(db)?;
    let mut out = Vec::new();
    while let Some(row) = rows.next().map_err(db)? {
        // Every payment statement selects exactly the payment columns, in order.
        let row = SqliteRow::ordered(row, &PAYMENT_COLUMNS);
        out.push(payment_from_row(&Cols::new(&row), sealing)?);
    }
    Ok(out)
}

/// Inserts unless (project, merchant payment id) is taken; the unique index decides.
pub(crate) fn insert(
    conn: &Connection,
    sealing: &RequisiteSealing,
    p: &Payment,
) -> Result<InsertOutcome, StoreError> {
    insert_encoded(conn, sealing, &EncodedPayment::new(p, sealing)?)
}

/// A payment and its row's values, requisites sealed: what [`insert_encoded`] writes. Made
/// before a write job is queued, so that the single writer runs the statements only and not
/// the sealing (an AEAD and a random nonce from the OS per requisite value).
pub(crate) struct EncodedPayment {
    payment: Payment,
    /// The row's values, as SQLite binds them (by reference, on every run of the job).
    values: Vec<rusqlite::types::Value>,
}

impl EncodedPayment {
    /// `p`'s row as [`insert`] writes it, its requisites sealed by `sealing`.
    pub(crate) fn new(p: &Payment, sealing: &RequisiteSealing) -> Result<Self, StoreError> {
        Ok(EncodedPayment {
            payment: p.clone(),
            values: payment_values(p, sealing)?
                .into_iter()
                .map(codec::value)
                .collect(),
        })
    }
}

/// [`insert`] of a payment encoded beforehand; may run more than once (a writer's job that is
/// run again in a savepoint).
pub(crate) fn insert_encoded(
    conn: &Connection,
    sealing: &RequisiteSealing,
    row: &EncodedPayment,
) -> Result<InsertOutcome, StoreError> {
    let p = &row.payment;
    let mut stmt = conn.prepare_cached(sql(st::payment_insert())).map_err(db)?;
    match stmt.execute(rusqlite::params_from_iter(&row.values)) {
        Ok(1) => {
            count_status(conn, p.status.as_str(), 1)?;
            Ok(InsertOutcome::Inserted)
        }
        Ok(_) => by_merchant_id(conn, sealing, p.project_id, &p.merchant_payment_id)?
            .map(InsertOutcome::Existing)
            .ok_or_else(|| StoreError::Corrupt("the conflicting payment vanished".into())),
        // The id itself is taken (the payment id is the table's primary key).
        Err(e) if is_unique_violation(&e) => {
            Err(StoreError::Duplicate(format!("payment {}", p.id)))
        }
        Err(e) => Err(db(e)),
    }
}

/// A payment by id.
pub(crate) fn by_id(
    conn: &Connection,
    sealing: &RequisiteSealing,
    id: PaymentId,
) -> Result<Option<Payment>, StoreError> {
    Ok(query_payments(conn, sealing, sql(&st::PAYMENT), [id.to_string()])?.pop())
}

/// A payment by (project, merchant payment id).
pub(crate) fn by_merchant_id(
    conn: &Connection,
    sealing: &RequisiteSealing,
    project: ProjectId,
    mpid: &MerchantPaymentId,
) -> Result<Option<Payment>, StoreError> {
    Ok(query_payments(
        conn,
        sealing,
        sql(&st::PAYMENT_BY_MERCHANT_ID),
        [project.to_string(), mpid.as_str().to_string()],
    )?
    .pop())
}

/// The version check, payment update, status counts, outbox row and audit row of one change.
/// One writer job: any error rolls all of it back.
pub(crate) fn commit_change(
    conn: &Connection,
    sealing: &RequisiteSealing,
    change: &PaymentChange,
) -> Result<(), StoreError> {
    let id = change.payment.id.to_string();
    // The status before the change, for the counts (the writer's transaction holds the row).
    let before: Option<String> = conn
        .prepare_cached("SELECT status FROM payments WHERE id = ?1")
        .map_err(db)?
        .query_row([&id], |r| r.get(0))
        .optional()
        .map_err(db)?;
    let Some(before) = before else {
        return Err(StoreError::NotFound(format!("payment {id}")));
    };
    let values = payment_values(&change.payment, sealing)?;
    let expected = SqlValue::uint(change.expected_version, "version")?;
    let updated = conn
        .prepare_cached(sql(st::payment_update()))
        .map_err(db)?
        .execute(params(values.into_iter().chain([expected])))
        .map_err(db)?;
    if updated == 0 {
        return Err(StoreError::Conflict);
    }
    let after = change.payment.status.as_str();
    if before != after {
        count_status(conn, &before, -1)?;
        count_status(conn, after, 1)?;
    }
    if let Some(event) = &change.event {
        outbox::insert(conn, event)?;
    }
    if let Some(audit) = &change.audit {
        directory::insert_audit(conn, audit)?;
    }
    if let Some(entry) = &change.history {
        directory::insert_status_change(conn, entry)?;
    }
    if let Some(posting) = &change.ledger {
        crate::ledger::append(conn, posting)?;
    }
    Ok(())
}

/// A page of a project's payments, newest first by `(created_at, id)`, through the
/// `(project_id, created_at, id)` index.
pub(crate) fn find(
    conn: &Connection,
    sealing: &RequisiteSealing,
    q: &PaymentQuery,
) -> Result<Vec<Payment>, StoreError> {
    let reads = prefix_reads(conn, q)?;
    let (sql, values) = listing::payment_page(q, codec::D, &reads, sealing);
    query_payments(conn, sealing, &sql, params(values))
}

/// The totals of what [`find`] would find (`listing::payment_totals`).
pub(crate) fn totals(
    conn: &Connection,
    sealing: &RequisiteSealing,
    q: &PaymentQuery,
    offset_ms: i64,
) -> Result<PaymentTotals, StoreError> {
    let reads = prefix_reads(conn, q)?;
    let (sql, values) = listing::payment_totals(q, (codec::D, sealing), &reads, offset_ms);
    let mut stmt = conn.prepare_cached(&sql).map_err(db)?;
    let rows: Vec<(i64, String, String, i64, [i64; 3])> = stmt
        .query_map(params(values), |r| {
            Ok((
                r.get(0)?,
                r.get(1)?,
                r.get(2)?,
                r.get(3)?,
                [r.get(4)?, r.get(5)?, r.get(6)?],
            ))
        })
        .map_err(db)?
        .collect::<Result<_, _>>()
        .map_err(db)?;
    let rows = rows
        .into_iter()
        .map(|(day, status, currency, count, parts)| {
            listing::totals_row(day, &status, &currency, count, parts)
        })
        .collect::<Result<Vec<_>, _>>()?;
    Ok(PaymentTotals::from_rows(rows, offset_ms, q.limit))
}

/// How each of `q`'s branches reads its merchant payment id prefix: `listing::PrefixPlan`'s
/// questions, asked in turn.
fn prefix_reads(conn: &Connection, q: &PaymentQuery) -> Result<Vec<PrefixRead>, StoreError> {
    let mut plan = PrefixPlan::new(q);
    while let Some((sql, values)) = plan.question(codec::D) {
        let row: Vec<Option<i64>> = conn
            .prepare_cached(&sql)
            .and_then(|mut s| {
                s.query_row(params(values), |r| {
                    (0..r.as_ref().column_count()).map(|i| r.get(i)).collect()
                })
            })
            .map_err(db)?;
        plan.answer(&row);
    }
    Ok(plan.reads().to_vec())
}

/// Due payments, earliest first, through the partial `due_at` index.
pub(crate) fn due(
    conn: &Connection,
    sealing: &RequisiteSealing,
    now: Timestamp,
    limit: usize,
) -> Result<Vec<Payment>, StoreError> {
    query_payments(
        conn,
        sealing,
        sql(&st::PAYMENTS_DUE),
        params![now.unix_millis(), codec::limit(limit)],
    )
}

/// The earliest due time, through the partial `due_at` index (one index probe).
pub(crate) fn oldest_due(conn: &Connection) -> Result<Option<Timestamp>, StoreError> {
    let millis: Option<i64> = conn
        .prepare_cached("SELECT min(due_at) FROM payments WHERE due_at IS NOT NULL")
        .map_err(db)?
        .query_row([], |r| r.get(0))
        .map_err(db)?;
    Ok(millis.map(Timestamp::from_unix_millis))
}

/// Adds `delta` to the count of payments in `status`, the counter [`count_by_status`] reads.
/// [`insert`] and [`commit_change`] call it in the transaction of their write. Not a trigger:
/// a trigger makes the payment's statement write two tables, and SQLite then copies every page
/// that statement touches into a statement journal (migration 9). A single-row upsert needs
/// none.
fn count_status(conn: &Connection, status: &str, delta: i64) -> Result<(), StoreError> {
    // A decrement only changes a row that is there (as the trigger of migration 3 did).
    let sql = if delta < 0 {
        "UPDATE payment_status_counts SET n = n + ?2 WHERE status = ?1"
    } else {
        "INSERT INTO payment_status_counts (status, n) VALUES (?1, ?2) \
         ON CONFLICT (status) DO UPDATE SET n = n + excluded.n"
    };
    conn.prepare_cached(sql)
        .map_err(db)?
        .execute(params![status, delta])
        .map_err(db)?;
    Ok(())
}

/// Payments per status, in [`PaymentStatus::ALL`] order, zero counts left out: the counters
/// kept with every write of a payment ([`count_status`]), not a count of the payments.
pub(crate) fn count_by_status(conn: &Connection) -> Result<Vec<(PaymentStatus, u64)>, StoreError> {
    let mut stmt = conn
        .prepare_cached("SELECT status, n FROM payment_status_counts WHERE n > 0")
        .map_err(db)?;
    let mut rows = stmt.query([]).map_err(db)?;
    let mut counts = Vec::new();
    while let Some(row) = rows.next().map_err(db)? {
        let row = SqliteRow::new(row);
        let c = Cols::new(&row);
        counts.push((c.parsed::<PaymentStatus>("status")?, c.num::<u64>("n")?));
    }
    Ok(PaymentStatus::ALL
        .into_iter()
        .filter_map(|s| counts.iter().find(|(st, _)| *st == s).copied())
        .collect())
}

#[cfg(test)]
mod tests {
    use payments_core::payment::PaymentMethod;
    use payments_core::testing::contract::{payment_id, project_id, sample_payment, T0};

    use super::*;

    /// Every way of reading a prefix (a [`PrefixPlan`] picks one by the number of matches and
    /// where the newest is; only a project of more than `NARROW_PREFIX` matching payments
    /// takes the broad ones, so the plan here is told it has) finds the same payments in the
    /// same order, filters, cursors and ids in any case included.
    #[test]
    fn a_prefix_read_by_id_or_by_time_finds_the_same_page() {
        let dir = tempfile::tempdir().expect("a temporary directory");
        let mut conn = Connection::open(dir.path().join("p.db")).expect("open");
        crate::schema::migrate(&mut conn).expect("migrate");
        for (n, mpid) in [
            "a-1", "a-2", "a_3", "A-4", "a-10", "b-1", "a-11", "b-2", "b-3",
        ]
        .into_iter()
        .enumerate()
        {
            let n = u128::try_from(n).expect("small");
            let mut p = sample_payment(payment_id(n), project_id(1), mpid);
            p.created_at =
                T0 + std::time::Duration::from_secs(u64::try_from(n).expect("small") / 2);
            if n % 2 == 0 {
                p.payment_method = PaymentMethod::CardTransfer;
            }
            insert(&conn, &RequisiteSealing::new(), &p).expect("insert");
        }
        let ids = |q: &PaymentQuery, read: PrefixRead| {
            let (sql, values) =
                listing::payment_page(q, codec::D, &[read], &RequisiteSealing::new());
            query_payments(&conn, &RequisiteSealing::new(), &sql, params(values))
                .expect("a page")
                .into_iter()
                .map(|p| p.merchant_payment_id.as_str().to_string())
                .collect::<Vec<_>>()
        };
        let ways = |q: &PaymentQuery| {
            let by_id = ids(q, PrefixRead::Matches);
            assert_eq!(by_id, ids(q, PrefixRead::Time), "{q:?}");
            assert_eq!(by_id, ids(q, broad_far(&conn, q)), "{q:?}");
            by_id
        };
        for prefix in ["a-", "a", "a-1", "A", "a_", "b-1", "b", "c"] {
            let mut q = PaymentQuery::new(project_id(1), 10);
            q.merchant_payment_id_prefix = Some(prefix.to_string());
            let by_id = ways(&q);
            assert!(
                by_id.iter().all(|m| m.starts_with(prefix)),
                "{prefix}: {by_id:?}"
            );
            q.merchant_payment_id_prefix_any_case = Some(prefix.to_lowercase());
            ways(&q);
            q.merchant_payment_id_prefix = None;
            ways(&q);
            q.payment_method = Some(PaymentMethod::CardTransfer);
            q.limit = 2;
            let first = find(&conn, &RequisiteSealing::new(), &q).expect("a page");
            ways(&q);
            if let Some(last) = first.last() {
                q.before = Some((last.created_at, last.id));
                ways(&q);
            }
            q.created_to = Some(T0 + std::time::Duration::from_secs(2));
            ways(&q);
            // Page by page, one payment a page: a cursor between two matches of one time.
            let mut q = PaymentQuery::new(project_id(1), 1);
            q.merchant_payment_id_prefix_any_case = Some(prefix.to_lowercase());
            while let Some(last) = find(&conn, &RequisiteSealing::new(), &q)
                .expect("a page")
                .pop()
            {
                q.before = Some((last.created_at, last.id));
                ways(&q);
            }
        }
        let mut q = PaymentQuery::new(project_id(1), 10);
        q.merchant_payment_id_prefix = Some("a-".into());
        assert_eq!(ways(&q), ["a-11", "a-10", "a-2", "a-1"]);
        q.merchant_payment_id_prefix = Some("b-".into());
        q.created_to = Some(T0 + std::time::Duration::from_secs(2));
        assert_eq!(
            broad_far(&conn, &q),
            PrefixRead::Nothing,
            "no b- before the window's end"
        );
    }

    /// How `q`'s plan reads its prefix when told the prefix is broad and that none of the
    /// newest payments before the page's start matches it: from its newest match (the third
    /// question asked of the database).
    fn broad_far(conn: &Connection, q: &PaymentQuery) -> PrefixRead {
        let mut plan = PrefixPlan::new(q);
        let mut told = [listing::NARROW_PREFIX + 1, 0].into_iter();
        while let Some((sql, values)) = plan.question(codec::D) {
            let mut stmt = conn
                .prepare(&sql)
                .unwrap_or_else(|e| panic!("{sql}: {e} {plan:?}"));
            let row: Vec<Option<i64>> = stmt
                .query_row(params(values), |r| {
                    (0..r.as_ref().column_count()).map(|i| r.get(i)).collect()
                })
                .expect("an answer");
            match told.next() {
                Some(n) => plan.answer(&vec![Some(i64::try_from(n).expect("small")); row.len()]),
                None => plan.answer(&row),
            }
        }
        let read = plan.reads()[0];
        assert!(
            matches!(read, PrefixRead::From(_) | PrefixRead::Nothing),
            "{read:?}"
        );
        read
    }
}
