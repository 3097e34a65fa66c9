//! The merchant API's request log (migration 17, table `request_log`; its `message` column
//! migration 24's), written once for both
//! engines ([`payments_core::request_log`] decides what is logged and what the summary says;
//! the stores only keep the rows).
//!
//! A write ([`INSERT`], one per request, in one transaction) is followed, for each project in
//! it, by [`TRIM`]: the project's rows beyond its newest `keep` by `(at, id)` go, so a log
//! never outgrows its bound. [`PURGE`] deletes by age. Pages read the `(project_id, at, id)`
//! index newest first ([`page`]).

use payments_core::request_log::{RequestLogEntry, RequestLogQuery, SignatureDiagnosis};
use payments_core::store::StoreError;

use crate::codec::{self, corrupt};
use crate::listing::Conditions;
use crate::record::Record;
use crate::row::Cols;
use crate::sql::{insert, list, Dialect, Sql};
use crate::value::SqlValue;

impl Record for RequestLogEntry {
    const COLUMNS: &'static [&'static str] = &[
        "id",
        "project_id",
        "at",
        "method",
        "path",
        "status",
        "error_code",
        "request_id",
        "latency_us",
        "source",
        "merchant_payment_id",
        "payment_id",
        "clock_skew_ms",
        "diagnosis",
        "message",
    ];

    fn from_row(c: &Cols<'_>) -> Result<Self, StoreError> {
        let diagnosis = c
            .opt_text("diagnosis")?
            .map(|d| SignatureDiagnosis::from_json(&d).ok_or_else(|| corrupt("diagnosis", d)))
            .transpose()?;
        Ok(RequestLogEntry {
            id: c.num("id")?,
            project_id: c.parsed("project_id")?,
            at: c.ts("at")?,
            method: c.text("method")?,
            path: c.text("path")?,
            status: c.num("status")?,
            error_code: c.opt_text("error_code")?,
            request_id: c.text("request_id")?,
            latency_us: c.num("latency_us")?,
            source: c.text("source")?,
            merchant_payment_id: c.opt_text("merchant_payment_id")?,
            payment_id: c.opt_parsed("payment_id")?,
            clock_skew_ms: c.opt_int("clock_skew_ms")?,
            diagnosis,
            message: c.opt_text("message")?,
        })
    }

    fn values(&self) -> Result<Vec<SqlValue>, StoreError> {
        let mut v = vec![SqlValue::uint(self.id, "request log id")?];
        v.extend(insert_values(self)?);
        Ok(v)
    }
}

/// The values of [`INSERT`]: every column but the id, which the database gives.
pub fn insert_values(e: &RequestLogEntry) -> Result<Vec<SqlValue>, StoreError> {
    Ok(vec![
        SqlValue::display(e.project_id),
        SqlValue::ts(e.at),
        SqlValue::text(e.method.as_str()),
        SqlValue::text(e.path.as_str()),
        SqlValue::Int(i64::from(e.status)),
        SqlValue::opt_text(e.error_code.clone()),
        SqlValue::text(e.request_id.as_str()),
        SqlValue::uint(e.latency_us, "request latency")?,
        SqlValue::text(e.source.as_str()),
        SqlValue::opt_text(e.merchant_payment_id.clone()),
        SqlValue::opt_display(e.payment_id),
        e.clock_skew_ms.map_or(SqlValue::Null, SqlValue::Int),
        SqlValue::opt_text(e.diagnosis.as_ref().map(SignatureDiagnosis::to_json)),
        SqlValue::opt_text(e.message.clone()),
    ])
}

/// Appends a request: [`insert_values`].
pub static INSERT: Sql = Sql::new(|_| insert("request_log", &RequestLogEntry::COLUMNS[1..]));

/// Deletes project `$1`'s requests beyond its newest `$2` by `(at, id)` (at most `$3`).
pub static TRIM: Sql = Sql::new(|_| {
    "DELETE FROM request_log WHERE id IN (SELECT id FROM request_log WHERE project_id = $1 \
     ORDER BY at DESC, id DESC LIMIT $3 OFFSET $2)"
        .to_string()
});

/// The values of [`TRIM`] for `project` keeping `keep`.
pub fn trim_values(project: payments_core::ProjectId, keep: usize) -> Vec<SqlValue> {
    vec![
        SqlValue::display(project),
        SqlValue::Int(codec::limit(keep)),
        SqlValue::Int(i64::MAX),
    ]
}

/// Deletes at most `$2` requests that arrived before `$1`, oldest first.
pub static PURGE: Sql = Sql::new(|_| {
    "DELETE FROM request_log WHERE id IN (SELECT id FROM request_log WHERE at < $1 \
     ORDER BY at, id LIMIT $2)"
        .to_string()
});

/// A page of a project's requests (see [`RequestLogQuery`]), newest first by `(at, id)`
/// through the `(project_id, at, id)` index.
pub fn page(q: &RequestLogQuery, dialect: Dialect) -> (String, Vec<SqlValue>) {
    let mut w = Conditions::new(format!(
        "SELECT {} FROM request_log WHERE ",
        list(RequestLogEntry::COLUMNS)
    ));
    w.add("project_id = ?", SqlValue::display(q.project));
    if let Some(since) = q.since {
        w.add(" AND at >= ?", SqlValue::ts(since));
    }
    if let Some((at, id)) = q.before {
        let id = SqlValue::Int(i64::try_from(id).unwrap_or(i64::MAX));
        // The upper bound alone first: the index range both engines read.
        w.add(" AND at <= ?", SqlValue::ts(at));
        w.add(" AND (at < ?", SqlValue::ts(at));
        w.add(" OR id < ?)", id);
    }
    if let Some(status) = q.status {
        let (low, high) = status.range();
        w.add(" AND status >= ?", SqlValue::Int(i64::from(low)));
        w.add(" AND status <= ?", SqlValue::Int(i64::from(high)));
    }
    if let Some(code) = &q.error_code {
        w.add(" AND error_code = ?", SqlValue::text(code.as_str()));
    }
    w.add(
        " ORDER BY at DESC, id DESC LIMIT ?",
        SqlValue::Int(codec::limit(q.limit)),
    );
    w.finish(dialect)
}

#[cfg(test)]
mod tests {
    use super::*;
    use payments_core::request_log::StatusFilter;
    use payments_core::Timestamp;

    #[test]
    fn a_page_reads_the_index_newest_first_from_its_cursor() {
        let q = RequestLogQuery {
            status: Some(StatusFilter::Class(4)),
            before: Some((Timestamp::from_unix_millis(5), 7)),
            ..RequestLogQuery::new("00000000-0000-4000-8000-000000000000".parse().unwrap(), 10)
        };
        let (sql, values) = page(&q, Dialect::Postgres);
        assert!(
            sql.ends_with(
                "WHERE project_id = $1 AND at <= $2 AND (at < $3 OR id < $4) \
                 AND status >= $5 AND status <= $6 ORDER BY at DESC, id DESC LIMIT $7"
            ),
            "{sql}"
        );
        assert_eq!(values.len(), 7);
        assert_eq!(values[4], SqlValue::Int(400));
        assert_eq!(
            INSERT.text(Dialect::Sqlite).matches('?').count(),
            RequestLogEntry::COLUMNS.len() - 1
        );
    }
}
