//! Typed access to a row, written once over a four-getter interface each backend implements.

use std::borrow::Cow;
use std::str::FromStr;

use payments_core::amount::Amount;
use payments_core::callback::destination::CallbackUrl;
use payments_core::store::StoreError;
use payments_core::Timestamp;
use rust_decimal::Decimal;

use crate::codec::{corrupt, parse_url};

/// A result row as a backend's driver returns it, read by column name. A column that is not
/// in the row, or whose stored type is not the one asked for, is an error (the backend's
/// choice of [`StoreError`]); a SQL `NULL` is `Ok(None)`.
pub trait SqlRow {
    /// A text column.
    fn opt_text(&self, name: &str) -> Result<Option<String>, StoreError>;
    /// An integer column, of whatever width the engine stores.
    fn opt_int(&self, name: &str) -> Result<Option<i64>, StoreError>;
    /// A bytes column.
    fn opt_blob(&self, name: &str) -> Result<Option<Vec<u8>>, StoreError>;
    /// A boolean column (SQLite: an integer that must be `0` or `1`).
    fn opt_flag(&self, name: &str) -> Result<Option<bool>, StoreError>;
}

/// Typed column access by name with decoding errors as [`StoreError::Corrupt`]. With a prefix
/// (a query joining several tables, each table's columns aliased `<prefix><name>`), every name
/// is looked up with the prefix.
pub struct Cols<'a> {
    row: &'a dyn SqlRow,
    prefix: &'static str,
}

impl std::fmt::Debug for Cols<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Cols")
            .field("prefix", &self.prefix)
            .finish_non_exhaustive()
    }
}

fn required<T>(name: &str, v: Option<T>) -> Result<T, StoreError> {
    v.ok_or_else(|| corrupt(name, "NULL"))
}

impl<'a> Cols<'a> {
    /// Columns by their own names.
    pub fn new(row: &'a dyn SqlRow) -> Self {
        Cols { row, prefix: "" }
    }

    /// Columns aliased `<prefix><name>`.
    pub fn prefixed(row: &'a dyn SqlRow, prefix: &'static str) -> Self {
        Cols { row, prefix }
    }

    fn name<'n>(&self, name: &'n str) -> Cow<'n, str> {
        if self.prefix.is_empty() {
            Cow::Borrowed(name)
        } else {
            Cow::Owned(format!("{}{name}", self.prefix))
        }
    }

    /// A text column that may be `NULL`.
    pub fn opt_text(&self, name: &str) -> Result<Option<String>, StoreError> {
        self.row.opt_text(&self.name(name))
    }

    /// A text column.
    pub fn text(&self, name: &str) -> Result<String, StoreError> {
        required(name, self.opt_text(name)?)
    }

    /// An integer column that may be `NULL`.
    pub fn opt_int(&self, name: &str) -> Result<Option<i64>, StoreError> {
        self.row.opt_int(&self.name(name))
    }

    /// An integer column.
    pub fn int(&self, name: &str) -> Result<i64, StoreError> {
        required(name, self.opt_int(name)?)
    }

    /// A bytes column.
    pub fn blob(&self, name: &str) -> Result<Vec<u8>, StoreError> {
        required(name, self.row.opt_blob(&self.name(name))?)
    }

    /// A boolean column.
    pub fn flag(&self, name: &str) -> Result<bool, StoreError> {
        required(name, self.row.opt_flag(&self.name(name))?)
    }

    /// A timestamp stored as unix milliseconds.
    pub fn ts(&self, name: &str) -> Result<Timestamp, StoreError> {
        self.int(name).map(Timestamp::from_unix_millis)
    }

    /// An optional timestamp.
    pub fn opt_ts(&self, name: &str) -> Result<Option<Timestamp>, StoreError> {
        Ok(self.opt_int(name)?.map(Timestamp::from_unix_millis))
    }

    /// An integer column converted to a narrower or unsigned type.
    pub fn num<T: TryFrom<i64>>(&self, name: &str) -> Result<T, StoreError> {
        let n = self.int(name)?;
        T::try_from(n).map_err(|_| corrupt(name, n))
    }

    /// An optional integer column converted to a narrower or unsigned type.
    pub fn opt_num<T: TryFrom<i64>>(&self, name: &str) -> Result<Option<T>, StoreError> {
        self.opt_int(name)?
            .map(|n| T::try_from(n).map_err(|_| corrupt(name, n)))
            .transpose()
    }

    /// A text column parsed with `FromStr`.
    pub fn parsed<T: FromStr>(&self, name: &str) -> Result<T, StoreError> {
        let s = self.text(name)?;
        s.parse().map_err(|_| corrupt(name, s))
    }

    /// An optional text column parsed with `FromStr`.
    pub fn opt_parsed<T: FromStr>(&self, name: &str) -> Result<Option<T>, StoreError> {
        match self.opt_text(name)? {
            None => Ok(None),
            Some(s) => s.parse().map(Some).map_err(|_| corrupt(name, s)),
        }
    }

    /// A text column through a parse function returning `Option`.
    pub fn with<T>(
        &self,
        name: &str,
        parse: impl FnOnce(&str) -> Option<T>,
    ) -> Result<T, StoreError> {
        let s = self.text(name)?;
        parse(&s).ok_or_else(|| corrupt(name, s))
    }

    /// An amount stored as decimal text (the scale as received: `100.50`).
    pub fn amount(&self, name: &str) -> Result<Amount, StoreError> {
        self.with(name, |s| Amount::parse(s).ok())
    }

    /// A decimal stored as text.
    pub fn decimal(&self, name: &str) -> Result<Decimal, StoreError> {
        self.parsed(name)
    }

    /// An optional callback URL.
    pub fn opt_url(&self, name: &str) -> Result<Option<CallbackUrl>, StoreError> {
        self.opt_text(name)?.as_deref().map(parse_url).transpose()
    }

    /// A fixed-size blob (hashes, public keys).
    pub fn bytes32(&self, name: &str) -> Result<[u8; 32], StoreError> {
        let b = self.blob(name)?;
        <[u8; 32]>::try_from(b.as_slice()).map_err(|_| corrupt(name, b.len()))
    }
}
