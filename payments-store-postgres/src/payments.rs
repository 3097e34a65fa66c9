//! Payments and nonces as SQL.

use std::sync::LazyLock;

use deadpool_postgres::GenericClient;
use payments_core::bank::CountryCode;
use payments_core::ids::{PaymentId, ProjectId};
use payments_core::payment::{
    Currency, MerchantPaymentId, Payment, PaymentErrorCode, PaymentFailure, PaymentStatus,
    Requisites,
};
use payments_core::settlement::{Course, FeePercent, Pricing};
use payments_core::store::{InsertOutcome, PaymentChange, StoreError};
use payments_core::Timestamp;
use tokio_postgres::types::ToSql;
use tokio_postgres::Row;

use crate::codec::{self, execute, execute_raw, query, query_opt, Cols};
use crate::error::{corrupt, db, unique_violation};
use crate::{directory, outbox};

/// Every payment column, in the order of [`PaymentRow::params`].
const COLUMNS: &str = "id, project_id, merchant_payment_id, flow, status, amount, \
    initial_amount, currency, geo_code, payment_method, is_intrabank, bank_code, callback_url, \
    requisite, holder_name, requisite_bank, qrcode_link, deeplink_url, course, fee_percent, \
    error_code, error_comment, appeal_from, created_at, updated_at, expires_at, version, \
    fingerprint, due_at";

/// The number of columns in [`COLUMNS`].
const NCOLS: usize = 29;

static COLUMN_NAMES: LazyLock<[&'static str; NCOLS]> = LazyLock::new(|| {
    let names: Vec<&'static str> = COLUMNS.split(", ").collect();
    names.try_into().expect("NCOLS counts COLUMNS")
});

/// A payment's column values, owned, in [`COLUMNS`] order.
struct PaymentRow {
    text: [Option<String>; 23],
    is_intrabank: bool,
    created_at: i64,
    updated_at: i64,
    expires_at: i64,
    version: i64,
    due_at: Option<i64>,
}

impl PaymentRow {
    fn of(p: &Payment) -> Result<PaymentRow, StoreError> {
        let req = p.requisites.as_ref();
        let pricing = p.pricing.as_ref();
        let failure = p.failure.as_ref();
        let s = |x: &str| Some(x.to_string());
        Ok(PaymentRow {
            text: [
                s(&p.id.to_string()),
                s(&p.project_id.to_string()),
                s(p.merchant_payment_id.as_str()),
                s(p.flow.as_str()),
                s(p.status.as_str()),
                // Decimal text keeps the scale as received (`100.50`).
                s(&p.amount.to_string()),
                s(&p.initial_amount.to_string()),
                s(p.currency.as_str()),
                s(p.geo_code.as_str()),
                s(p.payment_method.as_str()),
                p.bank_code.clone(),
                p.callback_url.as_ref().map(|u| u.as_str().to_string()),
                req.map(|r| r.requisite.clone()),
                req.map(|r| r.holder_name.clone()),
                req.and_then(|r| r.bank.clone()),
                req.and_then(|r| r.qrcode_link.clone()),
                req.and_then(|r| r.deeplink_url.clone()),
                pricing.map(|x| x.course.as_decimal().to_string()),
                pricing.map(|x| x.fee_percent.as_decimal().to_string()),
                failure.map(|f| f.code.as_str().to_string()),
                failure.map(|f| f.comment.clone()),
                p.appeal_from.map(|st| st.as_str().to_string()),
                s(&p.fingerprint),
            ],
            is_intrabank: p.is_intrabank,
            created_at: p.created_at.unix_millis(),
            updated_at: p.updated_at.unix_millis(),
            expires_at: p.expires_at.unix_millis(),
            version: codec::uint(p.version, "version")?,
            due_at: p.due_at().map(Timestamp::unix_millis),
        })
    }

    /// The values as statement parameters, in [`COLUMNS`] order.
    fn params(&self) -> Vec<&(dyn ToSql + Sync)> {
        let t = &self.text;
        vec![
            &t[0],
            &t[1],
            &t[2],
            &t[3],
            &t[4],
            &t[5],
            &t[6],
            &t[7],
            &t[8],
            &t[9],
            &self.is_intrabank,
            &t[10],
            &t[11],
            &t[12],
            &t[13],
            &t[14],
            &t[15],
            &t[16],
            &t[17],
            &t[18],
            &t[19],
            &t[20],
            &t[21],
            &self.created_at,
            &self.updated_at,
            &self.expires_at,
            &self.version,
            &t[22],
            &self.due_at,
        ]
    }
}

fn payment_from_row(row: &Row) -> Result<Payment, StoreError> {
    let c = Cols::new(row);
    let requisites = match c.opt_text("requisite")? {
        None => None,
        Some(requisite) => Some(Requisites {
            requisite,
            holder_name: c
                .opt_text("holder_name")?
                .ok_or_else(|| corrupt("holder_name", "missing"))?,
            bank: c.opt_text("requisite_bank")?,
            qrcode_link: c.opt_text("qrcode_link")?,
            deeplink_url: c.opt_text("deeplink_url")?,
        }),
    };
    let pricing = match (c.opt_text("course")?, c.opt_text("fee_percent")?) {
        (None, None) => None,
        (Some(_), Some(_)) => Some(Pricing {
            course: Course::new(c.decimal("course")?).map_err(|e| corrupt("course", e))?,
            fee_percent: FeePercent::new(c.decimal("fee_percent")?)
                .map_err(|e| corrupt("fee_percent", e))?,
        }),
        other => return Err(corrupt("pricing", other)),
    };
    let failure = match c.opt_parsed::<PaymentErrorCode>("error_code")? {
        None => None,
        Some(code) => Some(PaymentFailure {
            code,
            comment: c
                .opt_text("error_comment")?
                .ok_or_else(|| corrupt("error_comment", "missing"))?,
        }),
    };
    Ok(Payment {
        id: c.parsed("id")?,
        project_id: c.parsed("project_id")?,
        merchant_payment_id: c.with("merchant_payment_id", MerchantPaymentId::parse)?,
        flow: c.parsed("flow")?,
        status: c.parsed("status")?,
        amount: c.amount("amount")?,
        initial_amount: c.amount("initial_amount")?,
        currency: c.with("currency", Currency::parse)?,
        geo_code: c.with("geo_code", CountryCode::parse)?,
        payment_method: c.parsed("payment_method")?,
        is_intrabank: c.flag("is_intrabank")?,
        bank_code: c.opt_text("bank_code")?,
        callback_url: c.opt_url("callback_url")?,
        requisites,
        pricing,
        failure,
        appeal_from: c.opt_parsed("appeal_from")?,
        created_at: c.ts("created_at")?,
        updated_at: c.ts("updated_at")?,
        expires_at: c.ts("expires_at")?,
        version: c.num("version")?,
        fingerprint: c.text("fingerprint")?,
    })
}

async fn query_payments<C: GenericClient>(
    c: &C,
    sql: &str,
    params: &[&(dyn ToSql + Sync)],
) -> Result<Vec<Payment>, StoreError> {
    query(c, sql, params)
        .await?
        .iter()
        .map(payment_from_row)
        .collect()
}

static INSERT_SQL: LazyLock<String> = LazyLock::new(|| {
    let placeholders = (1..=NCOLS).map(|i| format!("${i}")).collect::<Vec<_>>();
    format!(
        "INSERT INTO payments ({COLUMNS}) VALUES ({}) \
         ON CONFLICT (project_id, merchant_payment_id) DO NOTHING",
        placeholders.join(", ")
    )
});

/// Inserts unless (project, merchant payment id) is taken; the unique key decides. A taken
/// key is read back in a new statement: at READ COMMITTED it sees the row that won.
pub(crate) async fn insert<C: GenericClient>(
    c: &C,
    p: &Payment,
) -> Result<InsertOutcome, StoreError> {
    let row = PaymentRow::of(p)?;
    match execute_raw(c, &INSERT_SQL, &row.params()).await {
        Ok(1) => Ok(InsertOutcome::Inserted),
        Ok(_) => by_merchant_id(c, p.project_id, &p.merchant_payment_id)
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

/// The SQL type of each column in [`COLUMNS`] order, for the casts of [`ADMIT_SQL`]'s
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
/// the payment's columns (`$1`-`$29`), then project, nonce, expiry and now (`$30`-`$33`).
static ADMIT_SQL: LazyLock<String> = LazyLock::new(|| {
    let values = COLUMN_NAMES
        .iter()
        .enumerate()
        .map(|(i, name)| format!("${}::{}", i + 1, column_type(name)))
        .collect::<Vec<_>>();
    format!(
        "WITH n AS ( \
           INSERT INTO nonces (project_id, nonce, expires_at) VALUES ($30, $31, $32) \
           ON CONFLICT (project_id, nonce) DO UPDATE SET expires_at = EXCLUDED.expires_at \
           WHERE nonces.expires_at <= $33 \
           RETURNING 1), \
         p AS ( \
           INSERT INTO payments ({COLUMNS}) SELECT {} FROM n \
           ON CONFLICT (project_id, merchant_payment_id) DO NOTHING \
           RETURNING 1) \
         SELECT (SELECT count(*) FROM n) AS recorded, (SELECT count(*) FROM p) AS inserted",
        values.join(", ")
    )
});

/// [`ADMIT_SQL`]: `None` when the nonce was live (nothing written), else the insert's outcome.
pub(crate) async fn admit<C: GenericClient>(
    c: &C,
    nonce: payments_core::store::NonceUse<'_>,
    p: &Payment,
) -> Result<Option<InsertOutcome>, StoreError> {
    let row = PaymentRow::of(p)?;
    let project = nonce.project.to_string();
    let (expires, now) = (nonce.expires_at.unix_millis(), nonce.now.unix_millis());
    let mut params = row.params();
    params.extend([
        &project as &(dyn ToSql + Sync),
        &nonce.nonce,
        &expires,
        &now,
    ]);
    let stmt = c.prepare_cached(&ADMIT_SQL).await.map_err(db)?;
    let result = c.query_one(&stmt, &params).await;
    let row = match result {
        Ok(row) => row,
        // The payment id itself is taken (the primary key): nothing was written.
        Err(e) if unique_violation(&e).is_some() => {
            return Err(StoreError::Duplicate(format!("payment {}", p.id)))
        }
        Err(e) => return Err(db(e)),
    };
    let cols = Cols::new(&row);
    if cols.int("recorded")? == 0 {
        return Ok(None);
    }
    if cols.int("inserted")? == 1 {
        return Ok(Some(InsertOutcome::Inserted));
    }
    by_merchant_id(c, p.project_id, &p.merchant_payment_id)
        .await?
        .map(|existing| Some(InsertOutcome::Existing(existing)))
        .ok_or_else(|| StoreError::Corrupt("the conflicting payment vanished".into()))
}

/// Columns no transition or operation changes after the insert: the update matches them
/// (`IS NOT DISTINCT FROM`) instead of setting them, so a change to one of them is refused.
const IMMUTABLE: [&str; 12] = [
    "project_id",
    "merchant_payment_id",
    "flow",
    "initial_amount",
    "currency",
    "geo_code",
    "payment_method",
    "is_intrabank",
    "bank_code",
    "callback_url",
    "created_at",
    "fingerprint",
];

/// Updates the mutable columns, only at the expected version (`$30`) and only if the
/// immutable ones are unchanged.
static UPDATE_SQL: LazyLock<String> = LazyLock::new(|| {
    let (mut sets, mut same) = (Vec::new(), Vec::new());
    for (i, col) in COLUMN_NAMES.iter().enumerate().skip(1) {
        if IMMUTABLE.contains(col) {
            same.push(format!(" AND {col} IS NOT DISTINCT FROM ${}", i + 1));
        } else {
            sets.push(format!("{col} = ${}", i + 1));
        }
    }
    format!(
        "UPDATE payments SET {} WHERE id = $1 AND version = ${}{}",
        sets.join(", "),
        NCOLS + 1,
        same.concat()
    )
});

/// A payment by id.
pub(crate) async fn by_id<C: GenericClient>(
    c: &C,
    id: PaymentId,
) -> Result<Option<Payment>, StoreError> {
    let sql = format!("SELECT {COLUMNS} FROM payments WHERE id = $1");
    Ok(query_payments(c, &sql, &[&id.to_string()]).await?.pop())
}

/// A payment by (project, merchant payment id).
pub(crate) async fn by_merchant_id<C: GenericClient>(
    c: &C,
    project: ProjectId,
    mpid: &MerchantPaymentId,
) -> Result<Option<Payment>, StoreError> {
    let sql = format!(
        "SELECT {COLUMNS} FROM payments WHERE project_id = $1 AND merchant_payment_id = $2"
    );
    Ok(
        query_payments(c, &sql, &[&project.to_string(), &mpid.as_str()])
            .await?
            .pop(),
    )
}

/// The version check, payment update, outbox row and audit row of one change. Call inside a
/// transaction: an error leaves it to be rolled back.
pub(crate) async fn commit_change<C: GenericClient>(
    c: &C,
    change: &PaymentChange,
) -> Result<(), StoreError> {
    let row = PaymentRow::of(&change.payment)?;
    let expected = codec::uint(change.expected_version, "version")?;
    let mut params = row.params();
    params.push(&expected);
    let updated = execute(c, &UPDATE_SQL, &params).await?;
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
        directory::append_audit(c, audit).await?;
    }
    Ok(())
}

/// Due payments, earliest first, through the partial `due_at` index.
pub(crate) async fn due<C: GenericClient>(
    c: &C,
    now: Timestamp,
    limit: usize,
) -> Result<Vec<Payment>, StoreError> {
    let sql = format!(
        "SELECT {COLUMNS} FROM payments WHERE due_at IS NOT NULL AND due_at <= $1 \
         ORDER BY due_at, id LIMIT $2"
    );
    query_payments(c, &sql, &[&now.unix_millis(), &codec::limit(limit)]).await
}

/// A page of a project's payments, newest first by `(created_at, id)` (the cabinet's list).
pub(crate) async fn find<C: GenericClient>(
    c: &C,
    q: &payments_core::cabinet::PaymentQuery,
) -> Result<Vec<Payment>, StoreError> {
    let w = crate::cabinet::payment_conditions(q);
    let sql = format!("SELECT {COLUMNS} FROM payments WHERE {}", w.sql);
    query_payments(c, &sql, &w.params()).await
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
    row.map(|r| Cols::new(&r).ts("due_at")).transpose()
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
        let c = Cols::new(row);
        counts.push((c.parsed::<PaymentStatus>("status")?, c.num::<u64>("n")?));
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
