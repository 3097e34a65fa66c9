//! The PostgreSQL side of the shared implementation's seam ([`payments_store_sql::runtime`]):
//! a job runs on a pooled connection, in one transaction when it writes several statements
//! together, each statement prepared once per connection as the store's own glue does.

use deadpool_postgres::GenericClient;
use payments_core::store::StoreError;
use payments_store_sql::port::Shared;
use payments_store_sql::runtime::{BoxFuture, Conn, Job, On, Runtime};
use payments_store_sql::sealing::RequisiteSealing;
use payments_store_sql::{Cols, Dialect, SqlValue};

use crate::codec::{self, execute, execute_raw, params, query, refs, PgRow};
use crate::error::{db, duplicate};
use crate::PgStore;

/// A pooled connection or a transaction on one as a [`Conn`].
struct PgConn<'a, C>(&'a C);

impl<C: GenericClient> Conn for PgConn<'_, C> {
    fn dialect(&self) -> Dialect {
        codec::D
    }

    fn execute<'a>(
        &'a self,
        sql: &'a str,
        values: Vec<SqlValue>,
    ) -> BoxFuture<'a, Result<u64, StoreError>> {
        Box::pin(async move {
            let values = params(values);
            execute(self.0, sql, &refs(&values)).await
        })
    }

    fn execute_unique<'a>(
        &'a self,
        sql: &'a str,
        values: Vec<SqlValue>,
        what: &'a str,
    ) -> BoxFuture<'a, Result<u64, StoreError>> {
        Box::pin(async move {
            let values = params(values);
            duplicate(execute_raw(self.0, sql, &refs(&values)).await, || {
                what.to_string()
            })
        })
    }

    fn query<'a>(
        &'a self,
        sql: &'a str,
        values: Vec<SqlValue>,
        each: &'a mut (dyn FnMut(&Cols<'_>) -> Result<(), StoreError> + Send),
    ) -> BoxFuture<'a, Result<(), StoreError>> {
        Box::pin(async move {
            let values = params(values);
            for row in query(self.0, sql, &refs(&values)).await? {
                each(&Cols::new(&PgRow(&row)))?;
            }
            Ok(())
        })
    }
}

impl Runtime for PgStore {
    fn run<R: Send + 'static>(
        &self,
        on: On,
        mut job: Job<R>,
    ) -> BoxFuture<'_, Result<R, StoreError>> {
        Box::pin(async move {
            let mut client = self.client().await?;
            if on == On::Transaction {
                let tx = client.transaction().await.map_err(db)?;
                let value = job(&PgConn(&tx)).await?;
                tx.commit().await.map_err(db)?;
                Ok(value)
            } else {
                job(&PgConn(&client)).await
            }
        })
    }

    fn sealing(&self) -> &RequisiteSealing {
        &self.sealing
    }
}

impl PgStore {
    /// The shared implementation of the ports over this store's runtime.
    pub(crate) fn sql(&self) -> Shared<'_, PgStore> {
        Shared(self)
    }
}

payments_core::delegate_port!(
    PgStore => sql;
    SettingStore, OperatorStore, AuditStore, RequestLogStore, MerchantStore, LedgerStore,
    CallbackSecretStore, AppealStore
);
