//! The SQLite side of the shared implementation's seam ([`payments_store_sql::runtime`]): a
//! job runs where the store's own glue runs its closures (a short read on the calling thread,
//! a read on a pooled reader, a write as one job of the writer's group commit), on a
//! [`Conn`] over the rusqlite connection. rusqlite is synchronous, so every step's future is
//! ready when it is made and the job is driven to its end in place.

use std::sync::Mutex;

use futures_util::FutureExt;
use payments_core::store::{StoreError, UnavailableCause};
use payments_store_sql::port::Shared;
use payments_store_sql::runtime::{BoxFuture, Conn, Job, On, Runtime};
use payments_store_sql::sealing::RequisiteSealing;
use payments_store_sql::{Cols, Dialect, SqlValue};
use rusqlite::Connection;

use crate::codec::{self, params, SqliteRow};
use crate::error::{db, duplicate};
use crate::SqliteStore;

/// A rusqlite connection as a [`Conn`]: behind a mutex that only the job running on it takes,
/// so that a step's future may hold it and still be `Send`.
struct SqliteConn<'a>(Mutex<&'a mut Connection>);

impl SqliteConn<'_> {
    fn with<T>(&self, f: impl FnOnce(&Connection) -> T) -> T {
        f(&self
            .0
            .lock()
            .expect("the connection's lock is never held across a panic"))
    }
}

impl Conn for SqliteConn<'_> {
    fn dialect(&self) -> Dialect {
        codec::D
    }

    fn execute<'a>(
        &'a self,
        sql: &'a str,
        values: Vec<SqlValue>,
    ) -> BoxFuture<'a, Result<u64, StoreError>> {
        let n = self.with(|c| {
            c.prepare_cached(sql)
                .map_err(db)?
                .execute(params(values))
                .map_err(db)
        });
        Box::pin(std::future::ready(n.map(|n| n as u64)))
    }

    fn execute_unique<'a>(
        &'a self,
        sql: &'a str,
        values: Vec<SqlValue>,
        what: &'a str,
    ) -> BoxFuture<'a, Result<u64, StoreError>> {
        let n = self.with(|c| {
            c.prepare_cached(sql)
                .and_then(|mut s| s.execute(params(values)))
                .map_err(|e| duplicate(e, || what.to_string()))
        });
        Box::pin(std::future::ready(n.map(|n| n as u64)))
    }

    fn query<'a>(
        &'a self,
        sql: &'a str,
        values: Vec<SqlValue>,
        each: &'a mut (dyn FnMut(&Cols<'_>) -> Result<(), StoreError> + Send),
    ) -> BoxFuture<'a, Result<(), StoreError>> {
        let done = self.with(|c| {
            let mut stmt = c.prepare_cached(sql).map_err(db)?;
            let mut rows = stmt.query(params(values)).map_err(db)?;
            while let Some(row) = rows.next().map_err(db)? {
                each(&Cols::new(&SqliteRow::new(row)))?;
            }
            Ok(())
        });
        Box::pin(std::future::ready(done))
    }
}

/// Runs `job` on `conn` to its end: its steps are synchronous, so it never waits.
fn run_now<R>(job: &mut Job<R>, conn: &mut Connection) -> Result<R, StoreError> {
    let conn = SqliteConn(Mutex::new(conn));
    job(&conn).now_or_never().unwrap_or_else(|| {
        Err(UnavailableCause::Other.error("a job of the SQLite store waited on something"))
    })
}

impl Runtime for SqliteStore {
    fn run<R: Send + 'static>(
        &self,
        on: On,
        mut job: Job<R>,
    ) -> BoxFuture<'_, Result<R, StoreError>> {
        Box::pin(async move {
            match on {
                On::ShortRead => self.read_short(move |c| run_now(&mut job, c)).await,
                On::Write | On::Transaction => self.write(move |c| run_now(&mut job, c)).await,
                On::Purge => self.free(move |c| run_now(&mut job, c)).await,
                _ => self.read(move |c| run_now(&mut job, c)).await,
            }
        })
    }

    fn sealing(&self) -> &RequisiteSealing {
        &self.sealing
    }
}

impl SqliteStore {
    /// The shared implementation of the ports over this store's runtime.
    pub(crate) fn sql(&self) -> Shared<'_, SqliteStore> {
        Shared(self)
    }
}

payments_core::delegate_port!(
    SqliteStore => sql;
    SettingStore, OperatorStore, AuditStore, RequestLogStore, MerchantStore, LedgerStore,
    CallbackSecretStore, AppealStore
);
