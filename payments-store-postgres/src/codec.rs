//! Domain values to SQL values and back. Decoding never trusts the database: anything that does
//! not parse is [`StoreError::Corrupt`].

use std::str::FromStr;

use deadpool_postgres::GenericClient;
use payments_core::amount::Amount;
use payments_core::auth::Scope;
use payments_core::callback::address::AddressPolicy;
use payments_core::callback::destination::CallbackUrl;
use payments_core::clock::Timestamp;
use payments_core::store::StoreError;
use rust_decimal::Decimal;
use tokio_postgres::types::{FromSql, ToSql};
use tokio_postgres::Row;

use crate::error::{corrupt, db};

/// Scopes as space-separated wire names.
pub(crate) fn scopes_text(scopes: &[Scope]) -> String {
    scopes
        .iter()
        .map(|s| s.as_str())
        .collect::<Vec<_>>()
        .join(" ")
}

/// Scopes from [`scopes_text`].
pub(crate) fn parse_scopes(text: &str) -> Result<Vec<Scope>, StoreError> {
    text.split(' ')
        .filter(|s| !s.is_empty())
        .map(|name| name.parse().map_err(|_| corrupt("scope", name)))
        .collect()
}

/// Stored URLs were validated on the way in; reading back only restores the type.
pub(crate) fn parse_url(s: &str) -> Result<CallbackUrl, StoreError> {
    CallbackUrl::parse(s, AddressPolicy { allow_local: true }).map_err(|e| corrupt("url", e))
}

/// An unsigned count as an SQL BIGINT.
pub(crate) fn uint(n: u64, what: &str) -> Result<i64, StoreError> {
    i64::try_from(n).map_err(|_| corrupt(what, n))
}

/// A `LIMIT` value (saturating: a larger limit means "all").
pub(crate) fn limit(n: usize) -> i64 {
    i64::try_from(n).unwrap_or(i64::MAX)
}

/// Typed column access by name with decoding errors as [`StoreError::Corrupt`]. With a prefix
/// (a query joining several tables, its columns aliased `<prefix><name>`), every name is looked
/// up with the prefix.
pub(crate) struct Cols<'a> {
    row: &'a Row,
    prefix: &'static str,
}

impl<'a> Cols<'a> {
    /// Columns by their own names.
    pub(crate) fn new(row: &'a Row) -> Self {
        Cols { row, prefix: "" }
    }

    /// Columns aliased `<prefix><name>`.
    pub(crate) fn prefixed(row: &'a Row, prefix: &'static str) -> Self {
        Cols { row, prefix }
    }

    fn get<T: FromSql<'a>>(&self, name: &str) -> Result<T, StoreError> {
        let result = if self.prefix.is_empty() {
            self.row.try_get(name)
        } else {
            self.row.try_get(format!("{}{name}", self.prefix).as_str())
        };
        result.map_err(|e| corrupt(name, e.to_string()))
    }

    pub(crate) fn text(&self, name: &str) -> Result<String, StoreError> {
        self.get(name)
    }

    pub(crate) fn opt_text(&self, name: &str) -> Result<Option<String>, StoreError> {
        self.get(name)
    }

    pub(crate) fn int(&self, name: &str) -> Result<i64, StoreError> {
        self.get(name)
    }

    pub(crate) fn opt_int(&self, name: &str) -> Result<Option<i64>, StoreError> {
        self.get(name)
    }

    /// An INTEGER (int4) column.
    pub(crate) fn int4(&self, name: &str) -> Result<i32, StoreError> {
        self.get(name)
    }

    pub(crate) fn opt_int4(&self, name: &str) -> Result<Option<i32>, StoreError> {
        self.get(name)
    }

    pub(crate) fn blob(&self, name: &str) -> Result<Vec<u8>, StoreError> {
        self.get(name)
    }

    pub(crate) fn flag(&self, name: &str) -> Result<bool, StoreError> {
        self.get(name)
    }

    pub(crate) fn ts(&self, name: &str) -> Result<Timestamp, StoreError> {
        self.int(name).map(Timestamp::from_unix_millis)
    }

    pub(crate) fn opt_ts(&self, name: &str) -> Result<Option<Timestamp>, StoreError> {
        Ok(self.opt_int(name)?.map(Timestamp::from_unix_millis))
    }

    /// A BIGINT column converted to a narrower or unsigned type.
    pub(crate) fn num<T: TryFrom<i64>>(&self, name: &str) -> Result<T, StoreError> {
        let n = self.int(name)?;
        T::try_from(n).map_err(|_| corrupt(name, n))
    }

    /// An INTEGER column converted to an unsigned type.
    pub(crate) fn num4<T: TryFrom<i32>>(&self, name: &str) -> Result<T, StoreError> {
        let n = self.int4(name)?;
        T::try_from(n).map_err(|_| corrupt(name, n))
    }

    /// A text column parsed with `FromStr`.
    pub(crate) fn parsed<T: FromStr>(&self, name: &str) -> Result<T, StoreError> {
        let s = self.text(name)?;
        s.parse().map_err(|_| corrupt(name, s))
    }

    /// An optional text column parsed with `FromStr`.
    pub(crate) fn opt_parsed<T: FromStr>(&self, name: &str) -> Result<Option<T>, StoreError> {
        match self.opt_text(name)? {
            None => Ok(None),
            Some(s) => s.parse().map(Some).map_err(|_| corrupt(name, s)),
        }
    }

    /// A text column through a parse function returning `Option`.
    pub(crate) fn with<T>(
        &self,
        name: &str,
        parse: impl FnOnce(&str) -> Option<T>,
    ) -> Result<T, StoreError> {
        let s = self.text(name)?;
        parse(&s).ok_or_else(|| corrupt(name, s))
    }

    pub(crate) fn amount(&self, name: &str) -> Result<Amount, StoreError> {
        self.with(name, |s| Amount::parse(s).ok())
    }

    pub(crate) fn decimal(&self, name: &str) -> Result<Decimal, StoreError> {
        self.parsed(name)
    }

    pub(crate) fn opt_url(&self, name: &str) -> Result<Option<CallbackUrl>, StoreError> {
        self.opt_text(name)?.as_deref().map(parse_url).transpose()
    }

    /// A fixed-size blob (hashes, public keys).
    pub(crate) fn bytes32(&self, name: &str) -> Result<[u8; 32], StoreError> {
        let b = self.blob(name)?;
        <[u8; 32]>::try_from(b.as_slice()).map_err(|_| corrupt(name, b.len()))
    }
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
