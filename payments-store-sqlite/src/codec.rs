//! SQLite's side of the shared SQL layer ([`payments_store_sql`]): its rows read through
//! [`SqlRow`], [`SqlValue`]s bound as rusqlite values, and queries that decode [`Record`]s.

use payments_core::store::StoreError;
pub(crate) use payments_store_sql::codec::limit;
use payments_store_sql::Dialect;
pub(crate) use payments_store_sql::{Cols, Record, Sql, SqlRow, SqlValue};
use rusqlite::types::{FromSql, Value};
use rusqlite::{Connection, Row};

use crate::error::{corrupt, db};

/// The statements' dialect.
pub(crate) const D: Dialect = Dialect::Sqlite;

/// The text of a shared statement for SQLite.
pub(crate) fn sql(s: &Sql) -> &str {
    s.text(D)
}

/// A rusqlite row as [`SqlRow`].
///
/// By default a name is looked up in the statement (rusqlite compares it with every column
/// name, case-insensitively, on every access); [`SqliteRow::ordered`] takes the query's column
/// list so that a name becomes its position with a plain comparison (payments have 29 columns
/// and are read on every request).
pub(crate) struct SqliteRow<'a, 'r> {
    row: &'a Row<'r>,
    names: &'static [&'static str],
}

impl<'a, 'r> SqliteRow<'a, 'r> {
    /// Access by name through the statement.
    pub(crate) fn new(row: &'a Row<'r>) -> Self {
        SqliteRow { row, names: &[] }
    }

    /// Access to a row of a query that selected exactly `names`, in that order.
    pub(crate) fn ordered(row: &'a Row<'r>, names: &'static [&'static str]) -> Self {
        SqliteRow { row, names }
    }

    fn get<T: FromSql>(&self, name: &str) -> Result<T, StoreError> {
        match self.names.iter().position(|n| *n == name) {
            Some(i) => self.row.get(i),
            None => self.row.get(name),
        }
        .map_err(db)
    }
}

impl SqlRow for SqliteRow<'_, '_> {
    fn opt_text(&self, name: &str) -> Result<Option<String>, StoreError> {
        self.get(name)
    }

    fn opt_int(&self, name: &str) -> Result<Option<i64>, StoreError> {
        self.get(name)
    }

    fn opt_blob(&self, name: &str) -> Result<Option<Vec<u8>>, StoreError> {
        self.get(name)
    }

    fn opt_flag(&self, name: &str) -> Result<Option<bool>, StoreError> {
        match self.get::<Option<i64>>(name)? {
            None => Ok(None),
            Some(0) => Ok(Some(false)),
            Some(1) => Ok(Some(true)),
            Some(n) => Err(corrupt(name, n)),
        }
    }
}

/// One value for rusqlite (a flag as `0`/`1`).
pub(crate) fn value(v: SqlValue) -> Value {
    match v {
        SqlValue::Null => Value::Null,
        SqlValue::Int(n) => Value::Integer(n),
        SqlValue::Text(s) => Value::Text(s),
        SqlValue::Blob(b) => Value::Blob(b),
        SqlValue::Flag(b) => Value::Integer(i64::from(b)),
    }
}

/// Values as statement parameters.
pub(crate) fn params(
    values: impl IntoIterator<Item = SqlValue>,
) -> rusqlite::ParamsFromIter<Vec<Value>> {
    rusqlite::params_from_iter(values.into_iter().map(value).collect::<Vec<_>>())
}

/// A record's values as statement parameters.
pub(crate) fn record_params<T: Record>(
    r: &T,
) -> Result<rusqlite::ParamsFromIter<Vec<Value>>, StoreError> {
    Ok(params(r.values()?))
}

/// Runs a query and decodes every row.
pub(crate) fn query<T>(
    conn: &Connection,
    sql: &str,
    params: impl rusqlite::Params,
    decode: impl Fn(&Cols<'_>) -> Result<T, StoreError>,
) -> Result<Vec<T>, StoreError> {
    let mut stmt = conn.prepare_cached(sql).map_err(db)?;
    let mut rows = stmt.query(params).map_err(db)?;
    let mut out = Vec::new();
    while let Some(row) = rows.next().map_err(db)? {
        let row = SqliteRow::new(row);
        out.push(decode(&Cols::new(&row))?);
    }
    Ok(out)
}

/// Runs a shared statement that selects [`Record::COLUMNS`] and decodes every row.
pub(crate) fn records<T: Record>(
    conn: &Connection,
    s: &Sql,
    params: impl rusqlite::Params,
) -> Result<Vec<T>, StoreError> {
    query(conn, sql(s), params, T::from_row)
}

/// [`records`] for at most one row.
pub(crate) fn record<T: Record>(
    conn: &Connection,
    s: &Sql,
    params: impl rusqlite::Params,
) -> Result<Option<T>, StoreError> {
    Ok(records(conn, s, params)?.pop())
}

/// Runs a shared statement that changes rows; how many it changed.
pub(crate) fn execute(
    conn: &Connection,
    s: &Sql,
    params: impl rusqlite::Params,
) -> Result<usize, StoreError> {
    conn.prepare_cached(sql(s))
        .map_err(db)?
        .execute(params)
        .map_err(db)
}

/// [`execute`] keeping the driver's error, for callers that look at it (unique violations).
pub(crate) fn execute_raw(
    conn: &Connection,
    s: &Sql,
    params: impl rusqlite::Params,
) -> rusqlite::Result<usize> {
    conn.prepare_cached(sql(s))?.execute(params)
}
