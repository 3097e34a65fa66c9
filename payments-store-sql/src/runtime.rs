//! The seam between the shared implementation of the port ([`crate::port`]) and an engine's
//! runtime. The shared code is written once, as `async` steps over one connection
//! ([`Conn`]: run a statement, read rows through [`Cols`]); an engine says how a job of such
//! steps runs ([`Runtime::run`]) and on what ([`On`]):
//!
//! - SQLite runs a job where its connections are: a read on a pooled reader (a short read on
//!   the calling thread), a write as one job of its writer's group commit. rusqlite is
//!   synchronous, so the steps' futures are ready at once and the job is driven to its end in
//!   place (`now_or_never`); a write job may run again when its batch is retried, so a job is
//!   `FnMut` and owns what it needs;
//! - PostgreSQL runs a job on a pooled connection, in a transaction when asked.
//!
//! Statements that differ between engines come from the [`Dialect`] seam ([`Conn::dialect`]).

use std::future::Future;
use std::pin::Pin;

use payments_core::store::StoreError;

use crate::row::Cols;
use crate::sealing::RequisiteSealing;
use crate::sql::{Dialect, Sql};
use crate::value::SqlValue;
use crate::Record;

/// A boxed future that can move between threads.
pub type BoxFuture<'a, T> = Pin<Box<dyn Future<Output = T> + Send + 'a>>;

/// Where a job of the shared implementation runs. Each port method chooses it, as the engines'
/// own glue did: the choice decides which connections it may wait for.
#[non_exhaustive]
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum On {
    /// A few indexed rows: SQLite's short-read connections, on the calling thread (no list or
    /// scan ever takes them); PostgreSQL a pooled connection.
    ShortRead,
    /// A read: SQLite's reader pool, on a blocking thread; PostgreSQL a pooled connection.
    Read,
    /// One statement that writes: SQLite's writer (one job of a group commit); PostgreSQL a
    /// pooled connection, the statement committed on its own.
    Write,
    /// Several statements that write together: SQLite's writer; PostgreSQL one transaction on
    /// a pooled connection.
    Transaction,
    /// A write that only deletes (a purge): SQLite's writer, admitted on a full disk too;
    /// PostgreSQL a pooled connection, the statement committed on its own.
    Purge,
}

/// One connection, as the shared implementation uses it. Its futures may borrow it and are
/// `Send`, so a connection is `Sync` (SQLite's wraps the rusqlite connection in a mutex that
/// nobody else takes).
pub trait Conn: Sync {
    /// The engine's statement dialect.
    fn dialect(&self) -> Dialect;

    /// Runs a statement that changes rows; how many it changed.
    fn execute<'a>(
        &'a self,
        sql: &'a str,
        values: Vec<SqlValue>,
    ) -> BoxFuture<'a, Result<u64, StoreError>>;

    /// [`Conn::execute`] where a unique key already taken is [`StoreError::Duplicate`] of
    /// `what`.
    fn execute_unique<'a>(
        &'a self,
        sql: &'a str,
        values: Vec<SqlValue>,
        what: &'a str,
    ) -> BoxFuture<'a, Result<u64, StoreError>>;

    /// Runs a query and hands each row to `row`, in order; the first error stops it.
    fn query<'a>(
        &'a self,
        sql: &'a str,
        values: Vec<SqlValue>,
        row: &'a mut (dyn FnMut(&Cols<'_>) -> Result<(), StoreError> + Send),
    ) -> BoxFuture<'a, Result<(), StoreError>>;
}

/// A job of the shared implementation: steps over one connection. An engine may run it more
/// than once (SQLite's writer retries a batch), so it owns what it needs.
pub type Job<R> =
    Box<dyn for<'c> FnMut(&'c dyn Conn) -> BoxFuture<'c, Result<R, StoreError>> + Send>;

/// An engine's runtime: where and how a [`Job`] runs, and how its store seals values at rest.
pub trait Runtime: Send + Sync {
    /// Runs `job` on what `on` names and answers its result (an engine's failure to run it, a
    /// closed store, is its error too).
    fn run<R: Send + 'static>(&self, on: On, job: Job<R>) -> BoxFuture<'_, Result<R, StoreError>>;

    /// The store's sealing at rest (its requisites', and its appeals' receipts'), applied
    /// outside the jobs: a job takes the values as the database keeps them.
    fn sealing(&self) -> &RequisiteSealing;
}

/// `f` as a [`Job`].
pub fn job<R, F>(f: F) -> Job<R>
where
    F: for<'c> FnMut(&'c dyn Conn) -> BoxFuture<'c, Result<R, StoreError>> + Send + 'static,
{
    Box::new(f)
}

/// Runs a shared statement that changes rows; how many.
pub async fn execute(c: &dyn Conn, s: &Sql, values: Vec<SqlValue>) -> Result<u64, StoreError> {
    c.execute(s.text(c.dialect()), values).await
}

/// Runs a query and decodes every row with `decode`.
pub async fn query<T: Send>(
    c: &dyn Conn,
    sql: &str,
    values: Vec<SqlValue>,
    decode: fn(&Cols<'_>) -> Result<T, StoreError>,
) -> Result<Vec<T>, StoreError> {
    let mut out = Vec::new();
    c.query(sql, values, &mut |row| {
        out.push(decode(row)?);
        Ok(())
    })
    .await?;
    Ok(out)
}

/// Runs a shared statement that selects [`Record::COLUMNS`] and decodes every row.
pub async fn records<T: Record + Send>(
    c: &dyn Conn,
    s: &Sql,
    values: Vec<SqlValue>,
) -> Result<Vec<T>, StoreError> {
    query(c, s.text(c.dialect()), values, T::from_row).await
}

/// [`records`] for at most one row.
pub async fn record<T: Record + Send>(
    c: &dyn Conn,
    s: &Sql,
    values: Vec<SqlValue>,
) -> Result<Option<T>, StoreError> {
    Ok(records(c, s, values).await?.pop())
}
