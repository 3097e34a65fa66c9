//! The values a statement binds.

use payments_core::store::StoreError;
use payments_core::Timestamp;

use crate::codec::uint;

/// A value bound to a statement parameter, independent of the engine: each backend converts
/// it for its driver (SQLite stores a [`SqlValue::Flag`] as `0`/`1`; PostgreSQL binds it as a
/// `BOOLEAN` and an [`SqlValue::Int`] as whatever integer width the column has).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum SqlValue {
    /// `NULL`.
    Null,
    /// A 64-bit integer (timestamps are unix milliseconds).
    Int(i64),
    /// Text.
    Text(String),
    /// Bytes.
    Blob(Vec<u8>),
    /// A boolean.
    Flag(bool),
}

impl SqlValue {
    /// A text value.
    pub fn text(s: impl Into<String>) -> SqlValue {
        SqlValue::Text(s.into())
    }

    /// A text value or `NULL`.
    pub fn opt_text<S: Into<String>>(s: Option<S>) -> SqlValue {
        s.map_or(SqlValue::Null, SqlValue::text)
    }

    /// A text value of anything `Display` (ids, decimals).
    pub fn display(v: impl std::fmt::Display) -> SqlValue {
        SqlValue::Text(v.to_string())
    }

    /// `Display` text or `NULL`.
    pub fn opt_display<T: std::fmt::Display>(v: Option<T>) -> SqlValue {
        v.map_or(SqlValue::Null, SqlValue::display)
    }

    /// A timestamp as unix milliseconds.
    pub fn ts(t: Timestamp) -> SqlValue {
        SqlValue::Int(t.unix_millis())
    }

    /// An optional timestamp.
    pub fn opt_ts(t: Option<Timestamp>) -> SqlValue {
        t.map_or(SqlValue::Null, SqlValue::ts)
    }

    /// An unsigned number; one beyond `i64` is refused as [`StoreError::Corrupt`] naming
    /// `what`.
    pub fn uint(n: u64, what: &str) -> Result<SqlValue, StoreError> {
        uint(n, what).map(SqlValue::Int)
    }

    /// Bytes.
    pub fn blob(b: impl Into<Vec<u8>>) -> SqlValue {
        SqlValue::Blob(b.into())
    }

    /// A boolean.
    pub fn flag(b: bool) -> SqlValue {
        SqlValue::Flag(b)
    }
}

impl From<u32> for SqlValue {
    fn from(n: u32) -> SqlValue {
        SqlValue::Int(i64::from(n))
    }
}
