//! Payments as SQL.

use std::sync::LazyLock;

use payments_core::bank::CountryCode;
use payments_core::cabinet::PaymentQuery;
use payments_core::ids::{PaymentId, ProjectId};
use payments_core::payment::{
    Currency, MerchantPaymentId, Payment, PaymentErrorCode, PaymentFailure, PaymentStatus,
    Requisites,
};
use payments_core::settlement::{Course, FeePercent, Pricing};
use payments_core::store::{InsertOutcome, PaymentChange, StoreError};
use payments_core::Timestamp;
use rusqlite::types::Value;
use rusqlite::{params, params_from_iter, Connection, OptionalExtension, Row};

use crate::codec::{self, flag, opt_text, opt_ts, text, ts, Cols};
use crate::error::{corrupt, db, is_unique_violation};
use crate::{directory, outbox};

/// Every payment column, in the order of [`payment_values`].
const COLUMNS: &str = "id, project_id, merchant_payment_id, flow, status, amount, \
    initial_amount, currency, geo_code, payment_method, is_intrabank, bank_code, callback_url, \
    requisite, holder_name, requisite_bank, qrcode_link, deeplink_url, course, fee_percent, \
    error_code, error_comment, appeal_from, created_at, updated_at, expires_at, version, \
    fingerprint, due_at";

/// The number of columns in [`COLUMNS`].
const NCOLS: usize = 29;

/// [`COLUMNS`] one by one: every payment query selects exactly these, in this order.
static COLUMN_NAMES: LazyLock<[&'static str; NCOLS]> = LazyLock::new(|| {
    let names: Vec<&'static str> = COLUMNS.split(", ").collect();
    names.try_into().expect("NCOLS counts COLUMNS")
});

fn payment_values(p: &Payment) -> Result<[Value; NCOLS], StoreError> {
    let req = p.requisites.as_ref();
    let pricing = p.pricing.as_ref();
    let failure = p.failure.as_ref();
    Ok([
        text(p.id.to_string()),
        text(p.project_id.to_string()),
        text(p.merchant_payment_id.as_str()),
        text(p.flow.as_str()),
        text(p.status.as_str()),
        // Decimal text keeps the scale as received (`100.50`).
        text(p.amount.to_string()),
        text(p.initial_amount.to_string()),
        text(p.currency.as_str()),
        text(p.geo_code.as_str()),
        text(p.payment_method.as_str()),
        flag(p.is_intrabank),
        opt_text(p.bank_code.as_deref()),
        opt_text(p.callback_url.as_ref().map(|u| u.as_str())),
        opt_text(req.map(|r| r.requisite.as_str())),
        opt_text(req.map(|r| r.holder_name.as_str())),
        opt_text(req.and_then(|r| r.bank.as_deref())),
        opt_text(req.and_then(|r| r.qrcode_link.as_deref())),
        opt_text(req.and_then(|r| r.deeplink_url.as_deref())),
        opt_text(
            pricing
                .map(|x| x.course.as_decimal().to_string())
                .as_deref(),
        ),
        opt_text(
            pricing
                .map(|x| x.fee_percent.as_decimal().to_string())
                .as_deref(),
        ),
        opt_text(failure.map(|f| f.code.as_str())),
        opt_text(failure.map(|f| f.comment.as_str())),
        opt_text(p.appeal_from.map(|s| s.as_str())),
        ts(p.created_at),
        ts(p.updated_at),
        ts(p.expires_at),
        Value::Integer(codec::uint(p.version, "version")?),
        text(p.fingerprint.as_str()),
        opt_ts(p.due_at()),
    ])
}

fn payment_from_row(row: &Row<'_>) -> Result<Payment, StoreError> {
    let c = Cols::ordered(row, &*COLUMN_NAMES);
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

fn query_payments(
    conn: &Connection,
    sql: &str,
    params: impl rusqlite::Params,
) -> Result<Vec<Payment>, StoreError> {
    let mut stmt = conn.prepare_cached(sql).map_err(db)?;
    let mut rows = stmt.query(params).map_err(db)?;
    let mut out = Vec::new();
    while let Some(row) = rows.next().map_err(db)? {
        out.push(payment_from_row(row)?);
    }
    Ok(out)
}

/// Inserts unless (project, merchant payment id) is taken; the unique index decides.
pub(crate) fn insert(conn: &Connection, p: &Payment) -> Result<InsertOutcome, StoreError> {
    let values = payment_values(p)?;
    let mut stmt = conn.prepare_cached(&INSERT_SQL).map_err(db)?;
    match stmt.execute(params_from_iter(values.iter())) {
        Ok(1) => {
            count_status(conn, p.status.as_str(), 1)?;
            Ok(InsertOutcome::Inserted)
        }
        Ok(_) => by_merchant_id(conn, p.project_id, &p.merchant_payment_id)?
            .map(InsertOutcome::Existing)
            .ok_or_else(|| StoreError::Corrupt("the conflicting payment vanished".into())),
        // The id itself is taken (the payment id is the table's primary key).
        Err(e) if is_unique_violation(&e) => {
            Err(StoreError::Duplicate(format!("payment {}", p.id)))
        }
        Err(e) => Err(db(e)),
    }
}

static INSERT_SQL: LazyLock<String> = LazyLock::new(|| {
    let placeholders = (1..=NCOLS).map(|i| format!("?{i}")).collect::<Vec<_>>();
    format!(
        "INSERT INTO payments ({COLUMNS}) VALUES ({}) \
         ON CONFLICT (project_id, merchant_payment_id) DO NOTHING",
        placeholders.join(", ")
    )
});

/// Columns no transition or operation changes after the insert. The update does not SET them,
/// so SQLite leaves the `(project_id, merchant_payment_id)` unique index alone, and it matches
/// them with `IS` instead, so a change to one of them is refused (no row matches) rather than
/// dropped silently.
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

/// Updates the mutable columns, only at the expected version (`?30`) and only if the immutable
/// ones are unchanged. Parameters are [`payment_values`], then the expected version.
static UPDATE_SQL: LazyLock<String> = LazyLock::new(|| {
    let (mut sets, mut same) = (Vec::new(), Vec::new());
    for (i, col) in COLUMN_NAMES.iter().enumerate().skip(1) {
        if IMMUTABLE.contains(col) {
            same.push(format!(" AND {col} IS ?{}", i + 1));
        } else {
            sets.push(format!("{col} = ?{}", i + 1));
        }
    }
    format!(
        "UPDATE payments SET {} WHERE id = ?1 AND version = ?{}{}",
        sets.join(", "),
        NCOLS + 1,
        same.concat()
    )
});
/// A payment by id.
pub(crate) fn by_id(conn: &Connection, id: PaymentId) -> Result<Option<Payment>, StoreError> {
    let sql = format!("SELECT {COLUMNS} FROM payments WHERE id = ?1");
    Ok(query_payments(conn, &sql, [id.to_string()])?.pop())
}

/// A payment by (project, merchant payment id).
pub(crate) fn by_merchant_id(
    conn: &Connection,
    project: ProjectId,
    mpid: &MerchantPaymentId,
) -> Result<Option<Payment>, StoreError> {
    let sql = format!(
        "SELECT {COLUMNS} FROM payments WHERE project_id = ?1 AND merchant_payment_id = ?2"
    );
    Ok(query_payments(conn, &sql, [project.to_string(), mpid.as_str().to_string()])?.pop())
}

/// The version check, payment update, status counts, outbox row and audit row of one change.
/// One writer job: any error rolls all of it back.
pub(crate) fn commit_change(conn: &Connection, change: &PaymentChange) -> Result<(), StoreError> {
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
    let values = payment_values(&change.payment)?;
    let expected = Value::Integer(codec::uint(change.expected_version, "version")?);
    let updated = conn
        .prepare_cached(&UPDATE_SQL)
        .map_err(db)?
        .execute(params_from_iter(values.iter().chain([&expected])))
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
        directory::append_audit(conn, audit)?;
    }
    Ok(())
}

/// A page of a project's payments, newest first by `(created_at, id)`, through the
/// `(project_id, created_at, id)` index.
pub(crate) fn find(conn: &Connection, q: &PaymentQuery) -> Result<Vec<Payment>, StoreError> {
    let mut sql = format!("SELECT {COLUMNS} FROM payments WHERE project_id = ?1");
    let mut values: Vec<Value> = vec![text(q.project.to_string())];
    let mut add = |cond: &str, v: Value| {
        values.push(v);
        sql.push_str(&cond.replace('?', &format!("?{}", values.len())));
    };
    if let Some(status) = q.status {
        add(" AND status = ?", text(status.as_str()));
    }
    if let Some(t) = q.created_from {
        add(" AND created_at >= ?", ts(t));
    }
    if let Some(t) = q.created_to {
        add(" AND created_at < ?", ts(t));
    }
    if let Some(m) = &q.merchant_payment_id {
        add(" AND merchant_payment_id = ?", text(m.as_str()));
    }
    if let Some((t, id)) = q.before {
        add(" AND (created_at < ?", ts(t));
        add(" OR (created_at = ?", ts(t));
        add(" AND id < ?))", text(id.to_string()));
    }
    values.push(Value::Integer(codec::limit(q.limit)));
    sql.push_str(&format!(
        " ORDER BY created_at DESC, id DESC LIMIT ?{}",
        values.len()
    ));
    query_payments(conn, &sql, params_from_iter(values.iter()))
}

/// Due payments, earliest first, through the partial `due_at` index.
pub(crate) fn due(
    conn: &Connection,
    now: Timestamp,
    limit: usize,
) -> Result<Vec<Payment>, StoreError> {
    let sql = format!(
        "SELECT {COLUMNS} FROM payments WHERE due_at IS NOT NULL AND due_at <= ?1 \
         ORDER BY due_at, id LIMIT ?2"
    );
    query_payments(conn, &sql, params![now.unix_millis(), codec::limit(limit)])
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
        let c = Cols::new(row);
        counts.push((c.parsed::<PaymentStatus>("status")?, c.num::<u64>("n")?));
    }
    Ok(PaymentStatus::ALL
        .into_iter()
        .filter_map(|s| counts.iter().find(|(st, _)| *st == s).copied())
        .collect())
}
