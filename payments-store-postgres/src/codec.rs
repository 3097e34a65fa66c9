//! PostgreSQL's side of the shared SQL layer ([`payments_store_sql`]): its rows read through
//! [`SqlRow`], [`SqlValue`]s bound as parameters, and prepared-statement helpers.

use std::error::Error;

use bytes::BytesMut;
use deadpool_postgres::GenericClient;
use payments_core::store::StoreError;
pub(crate) use payments_store_sql::codec::limit;
use payments_store_sql::Dialect;
pub(crate) use payments_store_sql::{Cols, Record, Sql, SqlRow, SqlValue};
use tokio_postgres::types::{to_sql_checked, FromSql, IsNull, ToSql, Type};
use tokio_postgres::Row;

use crate::error::{corrupt, db};

/// The statements' dialect.
pub(crate) const D: Dialect = Dialect::Postgres;

/// The text of a shared statement for PostgreSQL.
pub(crate) fn sql(s: &Sql) -> &str {
    s.text(D)
}

fn get<'a, T: FromSql<'a>>(row: &'a Row, name: &str) -> Result<T, StoreError> {
    row.try_get(name).map_err(|e| corrupt(name, e.to_string()))
}

/// A tokio-postgres row as [`SqlRow`].
pub(crate) struct PgRow<'a>(pub(crate) &'a Row);

impl SqlRow for PgRow<'_> {
    fn opt_text(&self, name: &str) -> Result<Option<String>, StoreError> {
        get(self.0, name)
    }

    /// An `INTEGER` or `SMALLINT` column widened; a `BIGINT` as it is.
    fn opt_int(&self, name: &str) -> Result<Option<i64>, StoreError> {
        let row = self.0;
        let Some(i) = row.columns().iter().position(|c| c.name() == name) else {
            return Err(corrupt(name, "no such column"));
        };
        let bad = |e: tokio_postgres::Error| corrupt(name, e.to_string());
        match *row.columns()[i].type_() {
            Type::INT4 => Ok(row
                .try_get::<_, Option<i32>>(i)
                .map_err(bad)?
                .map(i64::from)),
            Type::INT2 => Ok(row
                .try_get::<_, Option<i16>>(i)
                .map_err(bad)?
                .map(i64::from)),
            _ => row.try_get(i).map_err(bad),
        }
    }

    fn opt_blob(&self, name: &str) -> Result<Option<Vec<u8>>, StoreError> {
        get(self.0, name)
    }

    fn opt_flag(&self, name: &str) -> Result<Option<bool>, StoreError> {
        get(self.0, name)
    }
}

/// A [`SqlValue`] as a statement parameter: an integer is bound at the width of its column
/// (out of range is an error, never a truncation), and a value of the wrong kind for its
/// column is refused before anything is sent.
#[derive(Debug)]
pub(crate) struct Param(pub(crate) SqlValue);

fn bind<T: ToSql>(
    v: &T,
    ty: &Type,
    out: &mut BytesMut,
) -> Result<IsNull, Box<dyn Error + Sync + Send>> {
    if !T::accepts(ty) {
        return Err(format!(
            "a {} value for a {ty} parameter",
            std::any::type_name::<T>()
        )
        .into());
    }
    v.to_sql(ty, out)
}

impl ToSql for Param {
    fn to_sql(
        &self,
        ty: &Type,
        out: &mut BytesMut,
    ) -> Result<IsNull, Box<dyn Error + Sync + Send>> {
        match &self.0 {
            SqlValue::Null => Ok(IsNull::Yes),
            SqlValue::Int(n) => match *ty {
                Type::INT2 => bind(&i16::try_from(*n)?, ty, out),
                Type::INT4 => bind(&i32::try_from(*n)?, ty, out),
                _ => bind(n, ty, out),
            },
            SqlValue::Text(s) => bind(s, ty, out),
            SqlValue::Blob(b) => bind(b, ty, out),
            SqlValue::Flag(b) => bind(b, ty, out),
        }
    }

    fn accepts(ty: &Type) -> bool {
        <i64 as ToSql>::accepts(ty)
            || <i32 as ToSql>::accepts(ty)
            || <i16 as ToSql>::accepts(ty)
            || <String as ToSql>::accepts(ty)
            || <Vec<u8> as ToSql>::accepts(ty)
            || <bool as ToSql>::accepts(ty)
    }

    to_sql_checked!();
}

/// Values as parameters; [`refs`] lends them to a statement.
pub(crate) fn params(values: impl IntoIterator<Item = SqlValue>) -> Vec<Param> {
    values.into_iter().map(Param).collect()
}

/// Parameters as the driver takes them.
pub(crate) fn refs(params: &[Param]) -> Vec<&(dyn ToSql + Sync)> {
    params.iter().map(|p| p as &(dyn ToSql + Sync)).collect()
}

/// Decodes a row as a record.
pub(crate) fn decode<T: Record>(row: &Row) -> Result<T, StoreError> {
    T::from_row(&Cols::new(&PgRow(row)))
}

/// Reads one value of a row through [`Cols`].
pub(crate) fn read<T>(
    row: &Row,
    f: impl FnOnce(&Cols<'_>) -> Result<T, StoreError>,
) -> Result<T, StoreError> {
    f(&Cols::new(&PgRow(row)))
}

/// Runs a shared statement that selects [`Record::COLUMNS`] and decodes every row.
pub(crate) async fn records<T: Record, C: GenericClient>(
    c: &C,
    s: &Sql,
    params: &[&(dyn ToSql + Sync)],
) -> Result<Vec<T>, StoreError> {
    query(c, sql(s), params).await?.iter().map(decode).collect()
}

/// [`records`] for at most one row.
pub(crate) async fn record<T: Record, C: GenericClient>(
    c: &C,
    s: &Sql,
    params: &[&(dyn ToSql + Sync)],
) -> Result<Option<T>, StoreError> {
    query_opt(c, sql(s), params)
        .await?
        .as_ref()
        .map(decode)
        .transpose()
}

/// Prepares `sql` once per connection (the statement cache) and runs it.
pub(crate) async fn query<C: GenericClient>(
    c: &C,
    sql: &str,
    params: &[&(dyn ToSql + Sync)],
) -> Result<Vec<Row>, StoreError> {
    let stmt = c.prepare_cached(sql).await.map_err(db)?;
    c.query(&stmt, params).await.map_err(db)
}

/// [`query`] for at most one row.
pub(crate) async fn query_opt<C: GenericClient>(
    c: &C,
    sql: &str,
    params: &[&(dyn ToSql + Sync)],
) -> Result<Option<Row>, StoreError> {
    let stmt = c.prepare_cached(sql).await.map_err(db)?;
    c.query_opt(&stmt, params).await.map_err(db)
}

/// Prepares `sql` once per connection and executes it; the number of rows changed.
pub(crate) async fn execute<C: GenericClient>(
    c: &C,
    sql: &str,
    params: &[&(dyn ToSql + Sync)],
) -> Result<u64, StoreError> {
    let stmt = c.prepare_cached(sql).await.map_err(db)?;
    c.execute(&stmt, params).await.map_err(db)
}

/// [`execute`] keeping the database error, for callers that look at its code.
pub(crate) async fn execute_raw<C: GenericClient>(
    c: &C,
    sql: &str,
    params: &[&(dyn ToSql + Sync)],
) -> Result<u64, tokio_postgres::Error> {
    let stmt = c.prepare_cached(sql).await?;
    c.execute(&stmt, params).await
}

/// Executes a shared statement with a record's values, keeping the database error.
pub(crate) async fn write_record<T: Record, C: GenericClient>(
    c: &C,
    s: &Sql,
    r: &T,
) -> Result<Result<u64, tokio_postgres::Error>, StoreError> {
    let values = params(r.values()?);
    Ok(execute_raw(c, sql(s), &refs(&values)).await)
}
