//! Domain values to SQL values and back. Decoding never trusts the database: anything that does
//! not parse is [`StoreError::Corrupt`].

use std::str::FromStr;

use payments_core::amount::Amount;
use payments_core::auth::Scope;
use payments_core::callback::address::AddressPolicy;
use payments_core::callback::destination::CallbackUrl;
use payments_core::clock::Timestamp;
use payments_core::store::StoreError;
use rusqlite::types::{FromSql, Value};
use rusqlite::Row;
use rust_decimal::Decimal;

use crate::error::{corrupt, db};

/// The scope of a stored name.
pub(crate) fn parse_scope(name: &str) -> Result<Scope, StoreError> {
    name.parse().map_err(|_| corrupt("scope", name))
}

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
        .map(parse_scope)
        .collect()
}

/// Stored URLs were validated on the way in; reading back only restores the type.
pub(crate) fn parse_url(s: &str) -> Result<CallbackUrl, StoreError> {
    CallbackUrl::parse(s, AddressPolicy { allow_local: true }).map_err(|e| corrupt("url", e))
}

/// A text value or NULL.
pub(crate) fn opt_text(s: Option<&str>) -> Value {
    s.map_or(Value::Null, |s| Value::Text(s.to_string()))
}

/// A text value.
pub(crate) fn text(s: impl Into<String>) -> Value {
    Value::Text(s.into())
}

/// A timestamp as unix milliseconds.
pub(crate) fn ts(t: Timestamp) -> Value {
    Value::Integer(t.unix_millis())
}

/// An optional timestamp.
pub(crate) fn opt_ts(t: Option<Timestamp>) -> Value {
    t.map_or(Value::Null, ts)
}

/// A boolean as 0 / 1.
pub(crate) fn flag(b: bool) -> Value {
    Value::Integer(i64::from(b))
}

/// An unsigned count as an SQL integer.
pub(crate) fn uint(n: u64, what: &str) -> Result<i64, StoreError> {
    i64::try_from(n).map_err(|_| corrupt(what, n))
}

/// A `LIMIT` value (saturating: a larger limit means "all").
pub(crate) fn limit(n: usize) -> i64 {
    i64::try_from(n).unwrap_or(i64::MAX)
}

/// Typed column access by name with decoding errors as [`StoreError::Corrupt`].
///
/// By default a name is looked up in the statement (rusqlite compares it with every column
/// name, case-insensitively, on every access); [`Cols::ordered`] takes the query's column list
/// so that a name becomes its position with a plain comparison (payments have 29 columns and
/// are read on every request).
pub(crate) struct Cols<'a, 'r> {
    row: &'a Row<'r>,
    names: &'static [&'static str],
}

impl<'a, 'r> Cols<'a, 'r> {
    /// Access by name through the statement.
    pub(crate) fn new(row: &'a Row<'r>) -> Self {
        Cols { row, names: &[] }
    }

    /// Access to a row of a query that selected exactly `names`, in that order.
    pub(crate) fn ordered(row: &'a Row<'r>, names: &'static [&'static str]) -> Self {
        Cols { row, names }
    }

    fn get<T: FromSql>(&self, name: &str) -> Result<T, StoreError> {
        match self.names.iter().position(|n| *n == name) {
            Some(i) => self.row.get(i),
            None => self.row.get(name),
        }
        .map_err(db)
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

    pub(crate) fn blob(&self, name: &str) -> Result<Vec<u8>, StoreError> {
        self.get(name)
    }

    pub(crate) fn flag(&self, name: &str) -> Result<bool, StoreError> {
        match self.int(name)? {
            0 => Ok(false),
            1 => Ok(true),
            n => Err(corrupt(name, n)),
        }
    }

    pub(crate) fn ts(&self, name: &str) -> Result<Timestamp, StoreError> {
        self.int(name).map(Timestamp::from_unix_millis)
    }

    pub(crate) fn opt_ts(&self, name: &str) -> Result<Option<Timestamp>, StoreError> {
        Ok(self.opt_int(name)?.map(Timestamp::from_unix_millis))
    }

    /// An integer column converted to a narrower or unsigned type.
    pub(crate) fn num<T: TryFrom<i64>>(&self, name: &str) -> Result<T, StoreError> {
        let n = self.int(name)?;
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
