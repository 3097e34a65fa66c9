//! Payments and nonces as SQL.

use std::sync::LazyLock;

use deadpool_postgres::GenericClient;
use payments_core::ids::{PaymentId, ProjectId};
use payments_core::ledger::Posting;
use payments_core::payment::{MerchantPaymentId, Payment, PaymentStatus};
use payments_core::store::{InsertOutcome, PaymentChange, StoreError};
use payments_core::totals::PaymentTotals;
use payments_core::Timestamp;
use payments_store_sql::listing::{self, PrefixPlan, PrefixRead};
use payments_store_sql::record::{
    payment_from_row, payment_values, PAYMENT_COLUMNS, PAYMENT_NCOLS,
};
use payments_store_sql::sealing::RequisiteSealing;
use payments_store_sql::sql::list;
use payments_store_sql::statements as st;
use tokio_postgres::types::ToSql;

use crate::codec::{
    self, execute, execute_raw, params, query, query_opt, read, refs, sql, Param, SqlValue,
};
use crate::error::{db, unique_violation};
use crate::{directory, outbox};

/// A payment's values as parameters, in [`PAYMENT_COLUMNS`] order.
fn payment_params(p: &Payment, s: &RequisiteSealing) -> Result<Vec<Param>, StoreError> {
    Ok(params(payment_values(p, s)?))
}

async fn query_payments<C: GenericClient>(
    c: &C,
    s: &RequisiteSealing,
    sql: &str,
    params: &[&(dyn ToSql + Sync)],
) -> Result<Vec<Payment>, StoreError> {
    query(c, sql, params)
        .await?
        .iter()
        .map(|row| read(row, |cols| payment_from_row(cols, s)))
        .collect()
}

/// Inserts unless (project, merchant payment id) is taken; the unique key decides. A taken
/// key is read back in a new statement: at READ COMMITTED it sees the row that won.
pub(crate) async fn insert<C: GenericClient>(
    c: &C,
    s: &RequisiteSealing,
    p: &Payment,
) -> Result<InsertOutcome, StoreError> {
    let values = payment_params(p, s)?;
    match execute_raw(c, sql(st::payment_insert()), &refs(&values)).await {
        Ok(1) => Ok(InsertOutcome::Inserted),
        Ok(_) => by_merchant_id(c, s, p.project_id, &p.merchant_payment_id)
            .await?
            .map(InsertOutcome::Existing)
            .ok_or_else(|| StoreError::Corrupt("the conflicting payment vanished".into())),
        // The payment id itself is taken (the primary key).
        Err(e) if unique_violation(&e).is_some() => {
            Err(StoreError::Duplicate(format!("payment {}", p.id)))
        }
        Err(e) => Err(db(e)),
    }
}

/// The SQL type of each column in [`PAYMENT_COLUMNS`] order, for the casts of [`ADMIT_SQL`]'s
/// `INSERT ... SELECT` (whose parameters get no type from the target columns).
fn column_type(name: &str) -> &'static str {
    match name {
        "is_intrabank" => "boolean",
        "created_at" | "updated_at" | "expires_at" | "version" | "due_at" => "bigint",
        _ => "text",
    }
}

/// A create's write in one statement: the nonce is recorded (a live one changes nothing), and
/// only if it was, the payment is inserted unless its merchant payment id is taken. Parameters:
/// the payment's columns (`$1`-`$N`, N = [`PAYMENT_NCOLS`]), then project, nonce, expiry and
/// now (`$N+1`-`$N+4`).
static ADMIT_SQL: LazyLock<String> =
    LazyLock::new(|| admit_sql_text("ON CONFLICT (project_id, merchant_payment_id) DO NOTHING"));

/// [`ADMIT_SQL`], or with the planted bug `duplicate-merchant-payment-id` (feature
/// `planted-bugs`, the unique key dropped at open) the same without the conflict clause.
fn admit_sql() -> &'static str {
    #[cfg(feature = "planted-bugs")]
    if payments_core::planted::active(payments_core::planted::Bug::DuplicateMerchantPaymentId) {
        static PLANTED: LazyLock<String> = LazyLock::new(|| admit_sql_text(""));
        return &PLANTED;
    }
    &ADMIT_SQL
}

/// [`ADMIT_SQL`]'s text with `on_conflict` after the payment's insert.
fn admit_sql_text(on_conflict: &str) -> String {
    let values = PAYMENT_COLUMNS
        .iter()
        .enumerate()
        .map(|(i, name)| format!("${}::{}", i + 1, column_type(name)))
        .collect::<Vec<_>>();
    let n = PAYMENT_NCOLS;
    format!(
        "WITH n AS ( \
           INSERT INTO nonces (project_id, nonce, expires_at) VALUES (${}, ${}, ${}) \
           ON CONFLICT (project_id, nonce) DO UPDATE SET expires_at = EXCLUDED.expires_at \
           WHERE nonces.expires_at <= ${} \
           RETURNING 1), \
         p AS ( \
           INSERT INTO payments ({}) SELECT {} FROM n \
           {on_conflict} \
           RETURNING 1) \
         SELECT (SELECT count(*) FROM n) AS recorded, (SELECT count(*) FROM p) AS inserted",
        n + 1,
        n + 2,
        n + 3,
        n + 4,
        list(&PAYMENT_COLUMNS),
        values.join(", ")
    )
}

/// [`ADMIT_SQL`]: `None` when the nonce was live (nothing written), else the insert's outcome.
pub(crate) async fn admit<C: GenericClient>(
    c: &C,
    s: &RequisiteSealing,
    nonce: payments_core::store::NonceUse<'_>,
    p: &Payment,
) -> Result<Option<InsertOutcome>, StoreError> {
    let values = payment_params(p, s)?;
    let project = nonce.project.to_string();
    let (expires, now) = (nonce.expires_at.unix_millis(), nonce.now.unix_millis());
    let mut params = refs(&values);
    params.extend([
        &project as &(dyn ToSql + Sync),
        &nonce.nonce,
        &expires,
        &now,
    ]);
    let stmt = c.prepare_cached(admit_sql()).await.map_err(db)?;
    let result = c.query_one(&stmt, &params).await;
    let row = match result {
        Ok(row) => row,
        // The payment id itself is taken (the primary key): nothing was written.
        Err(e) if unique_violation(&e).is_some() => {
            return Err(StoreError::Duplicate(format!("payment {}", p.id)))
        }
        Err(e) => return Err(db(e)),
    };
    let (recorded, inserted) = read(&row, |c| Ok((c.int("recorded")?, c.int("inserted")?)))?;
    if recorded == 0 {
        return Ok(None);
    }
    if inserted == 1 {
        return Ok(Some(InsertOutcome::Inserted));
    }
    by_merchant_id(c, s, p.project_id, &p.merchant_payment_id)
        .await?
        .map(|existing| Some(InsertOutcome::Existing(existing)))
        .ok_or_else(|| StoreError::Corrupt("the conflicting payment vanished".into()))
}

/// A payment by id.
pub(crate) async fn by_id<C: GenericClient>(
    c: &C,
    s: &RequisiteSealing,
    id: PaymentId,
) -> Result<Option<Payment>, StoreError> {
    Ok(query_payments(c, s, sql(&st::PAYMENT), &[&id.to_string()])
        .await?
        .pop())
}

/// A payment by (project, merchant payment id).
pub(crate) async fn by_merchant_id<C: GenericClient>(
    c: &C,
    s: &RequisiteSealing,
    project: ProjectId,
    mpid: &MerchantPaymentId,
) -> Result<Option<Payment>, StoreError> {
    Ok(query_payments(
        c,
        s,
        sql(&st::PAYMENT_BY_MERCHANT_ID),
        &[&project.to_string(), &mpid.as_str()],
    )
    .await?
    .pop())
}

/// The version check, payment update, outbox row, audit row and ledger entry of one change.
/// Call inside a transaction: an error leaves it to be rolled back.
pub(crate) async fn commit_change<C: GenericClient>(
    c: &C,
    s: &RequisiteSealing,
    change: &PaymentChange,
) -> Result<(), StoreError> {
    write_change(c, s, change).await?;
    if let Some(posting) = &change.ledger {
        crate::ledger::append(c, posting).await?;
    }
    Ok(())
}

/// A change with a ledger entry in a transaction of its own, on `client`: every write but the
/// entry's, then the entry's statement and the `COMMIT` sent together, so that the project's
/// balance row is locked for one round trip. If the append fails, the server answers the
/// `COMMIT` with a rollback; if the commit fails, nothing was written.
pub(crate) async fn commit_with_posting(
    client: deadpool_postgres::Client,
    s: &RequisiteSealing,
    change: &PaymentChange,
    posting: &Posting,
) -> Result<(), StoreError> {
    let mut open = OpenTransaction::begin(client).await?;
    let written = async {
        write_change(open.client(), s, change).await?;
        let statement = crate::ledger::prepare_append(open.client()).await?;
        crate::ledger::append_params(posting).map(|values| (statement, values))
    }
    .await;
    let (statement, values) = match written {
        Ok(ready) => ready,
        Err(e) => {
            open.roll_back().await;
            return Err(e);
        }
    };
    let c: &tokio_postgres::Client = open.client();
    let values = refs(&values);
    // The append's Bind/Execute and then the COMMIT are queued on the connection, in this
    // order, the first time `join!` polls them (each sends before it first waits), and the
    // server runs them in that order.
    let (answer, committed) =
        tokio::join!(c.query_opt(&statement, &values), c.batch_execute("COMMIT"));
    // Answered either way: committed, or rolled back by the server.
    open.finished();
    let entry = crate::ledger::appended(posting, answer)?;
    committed.map_err(db)?;
    debug_assert_eq!(entry.posting.payment, posting.payment);
    Ok(())
}

/// A transaction begun with `BEGIN` on a pooled connection, for [`commit_with_posting`]'s
/// `COMMIT` sent beside a statement (a `tokio_postgres::Transaction` commits only on its own).
/// If it is dropped unfinished (its future cancelled), the connection leaves the pool and
/// closes, which rolls the transaction back.
struct OpenTransaction {
    client: Option<deadpool_postgres::Client>,
}

impl OpenTransaction {
    async fn begin(client: deadpool_postgres::Client) -> Result<Self, StoreError> {
        let open = OpenTransaction {
            client: Some(client),
        };
        open.client().batch_execute("BEGIN").await.map_err(db)?;
        Ok(open)
    }

    fn client(&self) -> &deadpool_postgres::Client {
        self.client.as_ref().expect("open until finished")
    }

    /// Rolls back; a connection that cannot leaves the pool.
    async fn roll_back(mut self) {
        if self.client().batch_execute("ROLLBACK").await.is_ok() {
            self.finished();
        }
    }

    /// No transaction is open on the connection any more: it goes back to the pool.
    fn finished(&mut self) {
        self.client = None;
    }
}

impl Drop for OpenTransaction {
    fn drop(&mut self) {
        if let Some(client) = self.client.take() {
            drop(deadpool_postgres::Object::take(client));
        }
    }
}

/// Every write of one change but its ledger entry. Call inside a transaction.
async fn write_change<C: GenericClient>(
    c: &C,
    s: &RequisiteSealing,
    change: &PaymentChange,
) -> Result<(), StoreError> {
    let mut values = payment_params(&change.payment, s)?;
    values.push(Param(SqlValue::uint(change.expected_version, "version")?));
    let updated = execute(c, sql(st::payment_update()), &refs(&values)).await?;
    if updated == 0 {
        let exists = query_opt(
            c,
            "SELECT 1 FROM payments WHERE id = $1",
            &[&change.payment.id.to_string()],
        )
        .await?
        .is_some();
        return Err(if exists {
            StoreError::Conflict
        } else {
            StoreError::NotFound(format!("payment {}", change.payment.id))
        });
    }
    if let Some(event) = &change.event {
        outbox::insert(c, event).await?;
    }
    if let Some(audit) = &change.audit {
        directory::insert_audit(c, audit).await?;
    }
    if let Some(entry) = &change.history {
        directory::insert_status_change(c, entry).await?;
    }
    Ok(())
}

/// Due payments, earliest first, through the partial `due_at` index.
pub(crate) async fn due<C: GenericClient>(
    c: &C,
    s: &RequisiteSealing,
    now: Timestamp,
    limit: usize,
) -> Result<Vec<Payment>, StoreError> {
    query_payments(
        c,
        s,
        sql(&st::PAYMENTS_DUE),
        &[&now.unix_millis(), &codec::limit(limit)],
    )
    .await
}

/// A page of a project's payments, newest first by `(created_at, id)` (the cabinet's list).
pub(crate) async fn find<C: GenericClient>(
    c: &C,
    s: &RequisiteSealing,
    q: &payments_core::store::PaymentQuery,
) -> Result<Vec<Payment>, StoreError> {
    let reads = prefix_reads(c, q).await?;
    let (sql, values) = listing::payment_page(q, codec::D, &reads, s);
    query_payments(c, s, &sql, &refs(&params(values))).await
}

/// The totals of what [`find`] would find (`listing::payment_totals`).
pub(crate) async fn totals<C: GenericClient>(
    c: &C,
    s: &RequisiteSealing,
    q: &payments_core::store::PaymentQuery,
    offset_ms: i64,
) -> Result<PaymentTotals, StoreError> {
    let reads = prefix_reads(c, q).await?;
    let (sql, values) = listing::payment_totals(q, (codec::D, s), &reads, offset_ms);
    let rows = query(c, &sql, &refs(&params(values)))
        .await?
        .iter()
        .map(|r| {
            let day: i64 = r.try_get(0).map_err(db)?;
            let status: String = r.try_get(1).map_err(db)?;
            let currency: String = r.try_get(2).map_err(db)?;
            let count: i64 = r.try_get(3).map_err(db)?;
            let parts: [i64; 3] = [
                r.try_get(4).map_err(db)?,
                r.try_get(5).map_err(db)?,
                r.try_get(6).map_err(db)?,
            ];
            listing::totals_row(day, &status, &currency, count, parts)
        })
        .collect::<Result<Vec<_>, _>>()?;
    Ok(PaymentTotals::from_rows(rows, offset_ms, q.limit))
}

/// How each of `q`'s branches reads its merchant payment id prefix: `listing::PrefixPlan`'s
/// questions, asked in turn.
async fn prefix_reads<C: GenericClient>(
    c: &C,
    q: &payments_core::store::PaymentQuery,
) -> Result<Vec<PrefixRead>, StoreError> {
    let mut plan = PrefixPlan::new(q);
    while let Some((sql, values)) = plan.question(codec::D) {
        let rows = query(c, &sql, &refs(&params(values))).await?;
        let row: Vec<Option<i64>> = match rows.first() {
            Some(r) => (0..r.len())
                .map(|i| r.try_get(i))
                .collect::<Result<_, _>>()
                .map_err(db)?,
            None => Vec::new(),
        };
        plan.answer(&row);
    }
    Ok(plan.reads().to_vec())
}

/// Locks the payment's row until the transaction ends; `false` if there is no such payment.
pub(crate) async fn lock<C: GenericClient>(c: &C, id: PaymentId) -> Result<bool, StoreError> {
    Ok(query_opt(
        c,
        "SELECT 1 FROM payments WHERE id = $1 FOR UPDATE",
        &[&id.to_string()],
    )
    .await?
    .is_some())
}

/// The earliest due time, through the partial `due_at` index.
pub(crate) async fn oldest_due<C: GenericClient>(c: &C) -> Result<Option<Timestamp>, StoreError> {
    let row = query_opt(
        c,
        "SELECT due_at FROM payments WHERE due_at IS NOT NULL ORDER BY due_at LIMIT 1",
        &[],
    )
    .await?;
    row.map(|r| read(&r, |c| c.ts("due_at"))).transpose()
}

/// Payments per status, in [`PaymentStatus::ALL`] order, zero counts left out: the sums of
/// the counter rows the `payments_count` trigger keeps (a few rows per status, never a scan
/// of the payments).
pub(crate) async fn count_by_status<C: GenericClient>(
    c: &C,
) -> Result<Vec<(PaymentStatus, u64)>, StoreError> {
    let rows = query(
        c,
        "SELECT status, sum(n)::BIGINT AS n FROM payment_status_counts \
         GROUP BY status HAVING sum(n) > 0",
        &[],
    )
    .await?;
    let mut counts = Vec::new();
    for row in &rows {
        counts.push(read(row, |c| {
            Ok((c.parsed::<PaymentStatus>("status")?, c.num::<u64>("n")?))
        })?);
    }
    Ok(PaymentStatus::ALL
        .into_iter()
        .filter_map(|s| counts.iter().find(|(st, _)| *st == s).copied())
        .collect())
}

/// Records a nonce unless a live one exists: an expired record is taken over in place, a live
/// one makes the statement change nothing. Racing uses wait on the primary key and exactly one
/// changes a row.
pub(crate) async fn use_nonce<C: GenericClient>(
    c: &C,
    project: ProjectId,
    nonce: &str,
    now: Timestamp,
    expires_at: Timestamp,
) -> Result<bool, StoreError> {
    let changed = execute(
        c,
        "INSERT INTO nonces (project_id, nonce, expires_at) VALUES ($1, $2, $3) \
         ON CONFLICT (project_id, nonce) DO UPDATE SET expires_at = EXCLUDED.expires_at \
         WHERE nonces.expires_at <= $4",
        &[
            &project.to_string(),
            &nonce,
            &expires_at.unix_millis(),
            &now.unix_millis(),
        ],
    )
    .await?;
    Ok(changed == 1)
}

/// Whether a nonce is recorded and live at `now`.
pub(crate) async fn nonce_live<C: GenericClient>(
    c: &C,
    project: ProjectId,
    nonce: &str,
    now: Timestamp,
) -> Result<bool, StoreError> {
    Ok(query_opt(
        c,
        "SELECT 1 FROM nonces WHERE project_id = $1 AND nonce = $2 AND expires_at > $3",
        &[&project.to_string(), &nonce, &now.unix_millis()],
    )
    .await?
    .is_some())
}

/// Deletes up to `limit` expired nonces that no other node is deleting (`SKIP LOCKED`, so
/// purges on several nodes take disjoint batches); returns how many.
pub(crate) async fn purge_nonces<C: GenericClient>(
    c: &C,
    now: Timestamp,
    limit: usize,
) -> Result<u64, StoreError> {
    execute(
        c,
        "DELETE FROM nonces WHERE ctid IN \
         (SELECT ctid FROM nonces WHERE expires_at <= $1 LIMIT $2 FOR UPDATE SKIP LOCKED)",
        &[&now.unix_millis(), &codec::limit(limit)],
    )
    .await
}
