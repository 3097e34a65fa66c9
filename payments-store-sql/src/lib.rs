//! The SQL layer that the SQLite and PostgreSQL stores share.
//!
//! Everything about a row that does not depend on the database engine is written here once:
//!
//! - [`record`]: for each stored aggregate, its column list (named in every statement, never
//!   `*`), its decoding from a row ([`Record::from_row`], where the invariants between columns
//!   live: both-or-none pairs, required partners) and its encoding into statement values
//!   ([`Record::values`]);
//! - [`row`]: the small interface a backend's row type implements ([`SqlRow`]: four typed
//!   getters) and the typed access built on it once ([`Cols`]);
//! - [`value`]: the values a statement binds ([`SqlValue`]), which each backend hands to its
//!   driver;
//! - [`ledger`]: the project ledger's rows and statements;
//! - [`appeals`]: payment appeals and their sealed receipts;
//! - [`request_log`]: the merchant API's request log;
//! - [`codec`]: the text forms of values that are not a column type (scopes, contracts, URLs);
//! - [`schema`]: one schema numbering for both engines and the rule that compares versions;
//! - [`sql`]: statement text shared by both engines, written once with PostgreSQL's `$n`
//!   placeholders and turned into SQLite's `?n` by the [`Dialect`] seam;
//! - [`port`]: the port methods implemented once for both engines, over the runtime seam of
//!   [`runtime`] ("run this job on the writer", "on a pooled connection").
//!
//! Each backend keeps only its runtime: connections, transactions, locking, the SQLite
//! writer's group commit, PostgreSQL's pool and advisory locks, and the few statements whose
//! SQL really differs.
//!
//! Why no `SELECT *`: a node of the previous build keeps running beside a database that a newer
//! build migrated. PostgreSQL caches each prepared statement's result type and refuses to run a
//! `SELECT *` whose table gained a column (`0A000: cached plan must not change result type`),
//! so every statement names its columns, from the lists here.
#![deny(missing_docs)]

pub mod appeals;
pub mod codec;
pub mod ledger;
pub mod listing;
pub mod port;
pub mod record;
pub mod request_log;
pub mod row;
pub mod runtime;
pub mod schema;
pub mod sealing;
pub mod sql;
pub mod statements;
pub mod value;

pub use record::Record;
pub use row::{Cols, SqlRow};
pub use sql::{Dialect, Sql};
pub use value::SqlValue;
