//! The pages of the cabinet's lists: a `WHERE` clause grown condition by condition, written
//! once for both engines.

use payments_cabinet::store::{AuditQuery, CabinetAuditRecord};
use payments_core::event::OutboxEvent;
use payments_core::store::{EventQuery, PaymentQuery};
use payments_core::Timestamp;

use crate::codec::limit;
use crate::record::{Record, PAYMENT_COLUMNS};
use crate::sql::{list, Dialect};
use crate::value::SqlValue;

/// A statement grown piece by piece, its values numbered `$1, $2, ...` in the order added.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Conditions {
    sql: String,
    values: Vec<SqlValue>,
}

impl Conditions {
    /// A statement starting with `head` (no placeholders).
    pub fn new(head: impl Into<String>) -> Conditions {
        Conditions {
            sql: head.into(),
            values: Vec::new(),
        }
    }

    /// Appends `piece`, whose one `?` stands for `value`.
    pub fn add(&mut self, piece: &str, value: SqlValue) {
        self.values.push(value);
        self.sql
            .push_str(&piece.replacen('?', &format!("${}", self.values.len()), 1));
    }

    /// Appends "before `(time, id)`" in `(time_column, id_column)` order, as the engine's
    /// index range scan reads it best: a row-value comparison in PostgreSQL, the spelled-out
    /// comparison in SQLite.
    pub fn before(
        &mut self,
        dialect: Dialect,
        time_column: &str,
        id_column: &str,
        time: Timestamp,
        id: String,
    ) {
        match dialect {
            Dialect::Postgres => {
                self.add(
                    &format!(" AND ({time_column}, {id_column}) < (?"),
                    SqlValue::ts(time),
                );
                self.add(", ?)", SqlValue::Text(id));
            }
            Dialect::Sqlite => {
                self.add(&format!(" AND ({time_column} < ?"), SqlValue::ts(time));
                self.add(&format!(" OR ({time_column} = ?"), SqlValue::ts(time));
                self.add(&format!(" AND {id_column} < ?))"), SqlValue::Text(id));
            }
        }
    }

    /// The statement for `dialect` and its values.
    pub fn finish(self, dialect: Dialect) -> (String, Vec<SqlValue>) {
        (dialect.translate(&self.sql), self.values)
    }
}

/// A page of a project's payments (see [`PaymentQuery`]), newest first by `(created_at, id)`
/// through the `(project_id, created_at, id)` index; every payment column selected.
pub fn payment_page(q: &PaymentQuery, dialect: Dialect) -> (String, Vec<SqlValue>) {
    let mut w = Conditions::new(format!(
        "SELECT {} FROM payments WHERE ",
        list(&PAYMENT_COLUMNS)
    ));
    w.add("project_id = ?", SqlValue::display(q.project));
    if let Some(status) = q.status {
        w.add(" AND status = ?", SqlValue::text(status.as_str()));
    }
    if let Some(t) = q.created_from {
        w.add(" AND created_at >= ?", SqlValue::ts(t));
    }
    if let Some(t) = q.created_to {
        w.add(" AND created_at < ?", SqlValue::ts(t));
    }
    if let Some(m) = &q.merchant_payment_id {
        w.add(" AND merchant_payment_id = ?", SqlValue::text(m.as_str()));
    }
    if let Some((t, id)) = q.before {
        w.before(dialect, "created_at", "id", t, id.to_string());
    }
    w.add(
        " ORDER BY created_at DESC, id DESC LIMIT ?",
        SqlValue::Int(limit(q.limit)),
    );
    w.finish(dialect)
}

/// A page of a project's events (see [`EventQuery`]), newest first by
/// `(created_at, event_id)` through the `(project_id, created_at, event_id)` index; the
/// columns of [`OutboxEvent`] selected.
pub fn event_page(q: &EventQuery, dialect: Dialect) -> (String, Vec<SqlValue>) {
    let mut w = Conditions::new(format!(
        "SELECT {} FROM outbox_events WHERE ",
        list(OutboxEvent::COLUMNS)
    ));
    w.add("project_id = ?", SqlValue::display(q.project));
    if let Some(state) = q.state {
        w.add(" AND state = ?", SqlValue::text(state.as_str()));
    }
    if let Some(p) = q.payment {
        w.add(" AND payment_id = ?", SqlValue::display(p));
    }
    if let Some(t) = q.created_from {
        w.add(" AND created_at >= ?", SqlValue::ts(t));
    }
    if let Some(t) = q.created_to {
        w.add(" AND created_at < ?", SqlValue::ts(t));
    }
    if let Some((t, id)) = q.before {
        w.before(dialect, "created_at", "event_id", t, id.to_string());
    }
    w.add(
        " ORDER BY created_at DESC, event_id DESC LIMIT ?",
        SqlValue::Int(limit(q.limit)),
    );
    w.finish(dialect)
}

/// A page of the cabinet audit log (see [`AuditQuery`]), newest first by `seq`: through the
/// `(merchant_id, seq)` index for a merchant's page, the primary key otherwise. Selects `seq`
/// and the columns of [`CabinetAuditRecord`], one row past the limit (whether there is a
/// next page: [`AuditPage::of`](payments_cabinet::store::AuditPage::of)).
pub fn audit_page(q: &AuditQuery, dialect: Dialect) -> (String, Vec<SqlValue>) {
    let mut w = Conditions::new(format!(
        "SELECT seq, {} FROM cabinet_audit WHERE ",
        list(CabinetAuditRecord::COLUMNS)
    ));
    w.add(
        "seq < ?",
        SqlValue::Int(
            q.before
                .map_or(i64::MAX, |c| i64::try_from(c.0).unwrap_or(i64::MAX)),
        ),
    );
    if let Some(m) = q.merchant {
        w.add(" AND merchant_id = ?", SqlValue::display(m));
    }
    if let Some(success) = q.success {
        w.add(" AND success = ?", SqlValue::flag(success));
    }
    if let Some(email) = &q.email {
        w.add(" AND email = ?", SqlValue::text(email.as_str()));
    }
    if let Some(action) = &q.action {
        w.add(" AND (action = ?", SqlValue::text(action.as_str()));
        let escaped = action
            .replace('\\', "\\\\")
            .replace('%', "\\%")
            .replace('_', "\\_");
        w.add(
            " OR action LIKE ? ESCAPE '\\')",
            SqlValue::Text(format!("{escaped}.%")),
        );
    }
    w.add(
        " ORDER BY seq DESC LIMIT ?",
        SqlValue::Int(limit(q.limit.saturating_add(1))),
    );
    w.finish(dialect)
}
