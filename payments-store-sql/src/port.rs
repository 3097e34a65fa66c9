//! The storage port implemented once for both SQL engines: [`Shared`] over an engine's
//! [`Runtime`]. Each method is one job of statements over a [`Conn`], with the place it runs
//! ([`On`]) chosen here, once. An engine's store type hands the ports to it with
//! `payments_core::delegate_port!(MyStore => sql; SettingStore, ...)`, where `sql()` returns
//! `Shared(self)`; the ports not listed there still have each engine's own glue.
//!
//! Adding a method to a port implemented here touches the port's listing, this file and the
//! memory store.

use payments_core::appeal::{Appeal, AppealInsert, AppealQuery};
use payments_core::history::StatusChange;
use payments_core::ids::{AppealId, MerchantId, PaymentId, ProjectId, TokenId};
use payments_core::ledger::{Balance, EntryKind, KindTotal, LedgerEntry};
use payments_core::project::{AuditRecord, Merchant, OperatorTokenRecord, Project, SecretRecord};
use payments_core::receipt::Receipt;
use payments_core::request_log::{RequestLogEntry, RequestLogQuery};
use payments_core::store::port_types::async_trait;
use payments_core::store::{
    AppealStore, AuditStore, CallbackSecretStore, EntryQuery, LedgerStore, MerchantStore,
    OperatorStore, Purged, RequestLogStore, SettingStore, StoreError,
};
use payments_core::{SecretString, Timestamp};

use crate::appeals as ap;
use crate::codec;
use crate::ledger as lg;
use crate::record::secret_values;
use crate::request_log as rl;
use crate::row::Cols;
use crate::runtime::{execute, job, query, record, records, BoxFuture, Conn, On, Runtime};
use crate::statements as st;
use crate::value::SqlValue;
use crate::{Dialect, Record, Sql};

/// The shared implementation of the ports, over the engine `R`.
#[derive(Debug)]
pub struct Shared<'r, R: ?Sized>(pub &'r R);

impl<'r, R: Runtime + ?Sized> Shared<'r, R> {
    /// Runs `step` with its own copy of `args` (a job may run more than once) on `on`.
    fn run<A, T, F>(&self, on: On, args: A, step: F) -> BoxFuture<'r, Result<T, StoreError>>
    where
        A: Clone + Send + 'static,
        T: Send + 'static,
        F: for<'c> Fn(&'c dyn Conn, A) -> BoxFuture<'c, Result<T, StoreError>> + Send + 'static,
    {
        self.0.run(on, job(move |c| step(c, args.clone())))
    }
}

// --- settings --------------------------------------------------------------------------------

#[async_trait]
impl<R: Runtime + ?Sized> SettingStore for Shared<'_, R> {
    async fn setting(&self, name: &str) -> Result<Option<String>, StoreError> {
        self.run(On::Read, name.to_string(), |c, name| {
            Box::pin(setting(c, name))
        })
        .await
    }

    async fn upsert_setting(&self, name: &str, value: &str) -> Result<(), StoreError> {
        let values = vec![SqlValue::text(name), SqlValue::text(value)];
        self.run(On::Write, values, |c, values| {
            Box::pin(write(c, &st::SETTING_PUT, values))
        })
        .await
    }

    async fn insert_setting(&self, name: &str, value: &str) -> Result<bool, StoreError> {
        let values = vec![SqlValue::text(name), SqlValue::text(value)];
        self.run(On::Write, values, |c, values| {
            Box::pin(async move { Ok(execute(c, &SETTING_INSERT, values).await? > 0) })
        })
        .await
    }

    async fn delete_setting(&self, name: &str) -> Result<bool, StoreError> {
        self.run(On::Write, vec![SqlValue::text(name)], |c, values| {
            Box::pin(async move { Ok(execute(c, &SETTING_DELETE, values).await? > 0) })
        })
        .await
    }

    async fn settings_with_prefix(
        &self,
        prefix: &str,
    ) -> Result<Vec<(String, String)>, StoreError> {
        fn pair(c: &Cols<'_>) -> Result<(String, String), StoreError> {
            Ok((c.text("name")?, c.text("value")?))
        }
        let mut found = self
            .run(On::Read, vec![SqlValue::text(prefix)], |c, values| {
                Box::pin(async move {
                    let text = SETTINGS_WITH_PREFIX.text(c.dialect());
                    query(c, text, values, pair).await
                })
            })
            .await?;
        // The engines order text by their collations; the port's order is bytewise.
        found.sort();
        Ok(found)
    }
}

/// Sets the setting named `$1` to `$2` unless it is set.
static SETTING_INSERT: Sql = Sql::new(|_| {
    "INSERT INTO settings (name, value) VALUES ($1, $2) ON CONFLICT (name) DO NOTHING".to_string()
});

/// Deletes the setting named `$1`.
static SETTING_DELETE: Sql = Sql::new(|_| "DELETE FROM settings WHERE name = $1".to_string());

/// The settings whose names start with `$1` (`substr`, not `LIKE`: SQLite's `LIKE` ignores
/// ASCII case, and a prefix may hold `%` or `_`).
static SETTINGS_WITH_PREFIX: Sql = Sql::new(|_| {
    "SELECT name, value FROM settings WHERE substr(name, 1, length($1)) = $1".to_string()
});

async fn setting(c: &dyn Conn, name: String) -> Result<Option<String>, StoreError> {
    fn value(c: &Cols<'_>) -> Result<String, StoreError> {
        c.text("value")
    }
    let text = st::SETTING.text(c.dialect());
    Ok(query(c, text, vec![SqlValue::text(name)], value)
        .await?
        .pop())
}

/// Runs a statement that writes and answers nothing.
async fn write(c: &dyn Conn, s: &Sql, values: Vec<SqlValue>) -> Result<(), StoreError> {
    execute(c, s, values).await.map(drop)
}

// --- operator tokens -------------------------------------------------------------------------

#[async_trait]
impl<R: Runtime + ?Sized> OperatorStore for Shared<'_, R> {
    async fn insert_operator_token(&self, token: &OperatorTokenRecord) -> Result<(), StoreError> {
        self.run(On::Write, token.values()?, |c, values| {
            Box::pin(async move {
                let text = st::OPERATOR_TOKEN_INSERT.text(c.dialect());
                c.execute_unique(text, values, "operator token")
                    .await
                    .map(drop)
            })
        })
        .await
    }

    async fn find_operator_tokens(
        &self,
        hash: Option<&[u8; 32]>,
    ) -> Result<Vec<OperatorTokenRecord>, StoreError> {
        self.run(On::Read, hash.copied(), |c, hash| {
            Box::pin(async move {
                match hash {
                    Some(h) => {
                        let values = vec![SqlValue::blob(h.to_vec())];
                        let found = record(c, &st::OPERATOR_TOKEN_BY_HASH, values).await?;
                        Ok(found.into_iter().collect())
                    }
                    None => records(c, &st::OPERATOR_TOKENS, Vec::new()).await,
                }
            })
        })
        .await
    }

    async fn expire_operator_token(&self, id: TokenId, at: Timestamp) -> Result<bool, StoreError> {
        let values = vec![SqlValue::ts(at), SqlValue::display(id)];
        self.run(On::Write, values, |c, values| {
            Box::pin(async move { Ok(execute(c, &st::OPERATOR_TOKEN_EXPIRE, values).await? > 0) })
        })
        .await
    }
}

// --- the audit trail -------------------------------------------------------------------------

#[async_trait]
impl<R: Runtime + ?Sized> AuditStore for Shared<'_, R> {
    async fn insert_audit(&self, record: &AuditRecord) -> Result<(), StoreError> {
        self.run(On::Write, record.values()?, |c, values| {
            Box::pin(write(c, &st::AUDIT_INSERT, values))
        })
        .await
    }

    async fn find_audit_records(&self, limit: usize) -> Result<Vec<AuditRecord>, StoreError> {
        let values = vec![SqlValue::Int(codec::limit(limit))];
        self.run(On::Read, values, |c, values| {
            Box::pin(records(c, &st::AUDIT_NEWEST, values))
        })
        .await
    }

    async fn status_changes(&self, payment: PaymentId) -> Result<Vec<StatusChange>, StoreError> {
        let values = vec![SqlValue::text(payment.to_string())];
        self.run(On::Read, values, |c, values| {
            Box::pin(records(c, &st::HISTORY_OF_PAYMENT, values))
        })
        .await
    }
}

// --- the request log -------------------------------------------------------------------------

#[async_trait]
impl<R: Runtime + ?Sized> RequestLogStore for Shared<'_, R> {
    /// One transaction: a row per project of the write ([`rl::write`]), then each project's
    /// trim.
    async fn insert_requests(
        &self,
        entries: &[RequestLogEntry],
        keep: usize,
    ) -> Result<(), StoreError> {
        if entries.is_empty() {
            return Ok(());
        }
        let rl::Write { rows, trims } = rl::write(entries, keep)?;
        self.run(On::Transaction, (rows, trims), |c, (rows, trims)| {
            Box::pin(async move {
                for values in rows {
                    execute(c, &rl::INSERT, values).await?;
                }
                for values in trims {
                    execute(c, &rl::TRIM, values).await?;
                }
                Ok(())
            })
        })
        .await
    }

    async fn find_requests(
        &self,
        query: &RequestLogQuery,
    ) -> Result<Vec<RequestLogEntry>, StoreError> {
        self.run(On::Read, query.clone(), |c, q| {
            Box::pin(async move {
                let (text, values) = rl::page(&q, c.dialect());
                let mut page = rl::Page::new(&q);
                c.query(&text, values, &mut |row| {
                    page.read(row.num("id")?, row.ts("newest_at")?, &row.text("body")?)
                })
                .await?;
                Ok(page.finish())
            })
        })
        .await
    }

    /// Whole rows: a write's requests of a project go once the newest of them is older than
    /// `before`; `limit` counts rows, `deleted` their requests.
    async fn purge_requests(&self, before: Timestamp, limit: usize) -> Result<Purged, StoreError> {
        fn entries(c: &Cols<'_>) -> Result<u64, StoreError> {
            c.num("entries")
        }
        let values = vec![SqlValue::ts(before), SqlValue::Int(codec::limit(limit))];
        self.run(On::Purge, values, move |c, values| {
            Box::pin(async move {
                let rows = query(c, rl::PURGE.text(c.dialect()), values, entries).await?;
                Ok(Purged {
                    deleted: rows.iter().sum(),
                    more: rows.len() >= limit,
                })
            })
        })
        .await
    }
}

// --- merchants and projects ------------------------------------------------------------------

#[async_trait]
impl<R: Runtime + ?Sized> MerchantStore for Shared<'_, R> {
    async fn upsert_merchant(&self, merchant: &Merchant) -> Result<(), StoreError> {
        self.run(On::Write, merchant.values()?, |c, values| {
            Box::pin(write(c, &st::MERCHANT_PUT, values))
        })
        .await
    }

    async fn find_merchants(&self, only: Option<MerchantId>) -> Result<Vec<Merchant>, StoreError> {
        self.run(On::Read, only, |c, only| {
            Box::pin(async move {
                match only {
                    Some(id) => merchant(c, id).await.map(|m| m.into_iter().collect()),
                    None => records(c, &st::MERCHANTS, Vec::new()).await,
                }
            })
        })
        .await
    }

    /// Its merchant must exist: read and written in one transaction.
    async fn upsert_project(&self, project: &Project) -> Result<(), StoreError> {
        let args = (project.merchant_id, project.values()?);
        self.run(On::Transaction, args, |c, (merchant_id, values)| {
            Box::pin(async move {
                if merchant(c, merchant_id).await?.is_none() {
                    return Err(StoreError::NotFound(format!("merchant {merchant_id}")));
                }
                write(c, &st::PROJECT_PUT, values).await
            })
        })
        .await
    }

    async fn find_projects(&self, only: Option<ProjectId>) -> Result<Vec<Project>, StoreError> {
        self.run(On::Read, only, |c, only| {
            Box::pin(async move {
                match only {
                    Some(id) => {
                        let found = record(c, &st::PROJECT, vec![SqlValue::display(id)]).await?;
                        Ok(found.into_iter().collect())
                    }
                    None => records(c, &st::PROJECTS, Vec::new()).await,
                }
            })
        })
        .await
    }
}

async fn merchant(c: &dyn Conn, id: MerchantId) -> Result<Option<Merchant>, StoreError> {
    record(c, &st::MERCHANT, vec![SqlValue::display(id)]).await
}

// --- the project ledger's reads (its appends are steps of a transaction) ---------------------

#[async_trait]
impl<R: Runtime + ?Sized> LedgerStore for Shared<'_, R> {
    async fn balance(&self, project: ProjectId) -> Result<Balance, StoreError> {
        self.run(On::ShortRead, project, |c, project| {
            Box::pin(async move {
                let found = record(c, &lg::BALANCE, vec![SqlValue::display(project)]).await?;
                Ok(found.unwrap_or_else(|| Balance::empty(project)))
            })
        })
        .await
    }

    async fn find_entries(&self, query: &EntryQuery) -> Result<Vec<LedgerEntry>, StoreError> {
        self.run(On::Read, query.clone(), |c, q| {
            Box::pin(async move {
                let (text, values) = lg::entry_page(&q, c.dialect());
                self::query(c, &text, values, LedgerEntry::from_row).await
            })
        })
        .await
    }

    async fn entry_totals(
        &self,
        project: ProjectId,
        from: Timestamp,
        to: Timestamp,
    ) -> Result<Vec<(EntryKind, KindTotal)>, StoreError> {
        let values = vec![
            SqlValue::display(project),
            SqlValue::ts(from),
            SqlValue::ts(to),
        ];
        self.run(On::Read, values, |c, values| {
            Box::pin(async move {
                let text = lg::ENTRY_TOTALS.text(c.dialect());
                let lines = query(c, text, values, lg::totals_line).await?;
                Ok(lg::in_kind_order(lines))
            })
        })
        .await
    }
}

// --- payment appeals -------------------------------------------------------------------------

#[async_trait]
impl<R: Runtime + ?Sized> AppealStore for Shared<'_, R> {
    async fn appeal(&self, id: AppealId) -> Result<Option<Appeal>, StoreError> {
        self.run(On::ShortRead, vec![SqlValue::display(id)], |c, values| {
            Box::pin(record(c, &ap::APPEAL, values))
        })
        .await
    }

    async fn find_appeals(&self, query: &AppealQuery) -> Result<Vec<Appeal>, StoreError> {
        self.run(On::Read, query.clone(), |c, q| {
            Box::pin(async move {
                let (text, values) = ap::page(&q, c.dialect());
                self::query(c, &text, values, Appeal::from_row).await
            })
        })
        .await
    }

    /// A receipt may be a few MiB: read on the reader pool, opened after.
    async fn appeal_receipt(
        &self,
        appeal: AppealId,
        index: u8,
    ) -> Result<Option<Receipt>, StoreError> {
        let values = vec![SqlValue::display(appeal), SqlValue::Int(i64::from(index))];
        let stored = self
            .run(On::Read, values, |c, values| {
                Box::pin(async move {
                    let text = ap::RECEIPT.text(c.dialect());
                    Ok(query(c, text, values, ap::stored_receipt).await?.pop())
                })
            })
            .await?;
        stored
            .map(|(kind, bytes)| {
                let bytes = self.0.sealing().open_receipt(appeal, index, bytes)?;
                Ok(Receipt::from_stored(kind, bytes))
            })
            .transpose()
    }

    /// One transaction: the reads that may refuse it, the insert, its receipts (sealed before
    /// the job runs; [`ap::insert`]).
    async fn insert_appeal(
        &self,
        appeal: &Appeal,
        receipts: &[Receipt],
    ) -> Result<AppealInsert, StoreError> {
        let rows = ap::receipt_rows(appeal.id, receipts, self.0.sealing())?;
        let args = (appeal.clone(), appeal.values()?, rows);
        self.run(On::Transaction, args, |c, (appeal, values, rows)| {
            Box::pin(async move { ap::insert(c, &appeal, values, rows).await })
        })
        .await
    }
}

// --- callback secrets ------------------------------------------------------------------------

#[async_trait]
impl<R: Runtime + ?Sized> CallbackSecretStore for Shared<'_, R> {
    async fn callback_secrets(&self, project: ProjectId) -> Result<Vec<SecretRecord>, StoreError> {
        self.run(On::Read, project, |c, project| {
            Box::pin(secrets(c, project))
        })
        .await
    }

    /// One transaction: the insert and the trim to the two newest.
    async fn insert_callback_secret(
        &self,
        project: ProjectId,
        secret: &SecretRecord,
    ) -> Result<(), StoreError> {
        let values = secret_values(project, secret)?;
        self.run(
            On::Transaction,
            (project, values),
            |c, (project, values)| {
                Box::pin(async move {
                    lock_secrets(c, project).await?;
                    add_secret(c, project, values).await
                })
            },
        )
        .await
    }

    async fn insert_callback_secret_if_none(
        &self,
        project: ProjectId,
        secret: &SecretRecord,
    ) -> Result<Vec<SecretRecord>, StoreError> {
        let values = secret_values(project, secret)?;
        self.run(
            On::Transaction,
            (project, values),
            |c, (project, values)| {
                Box::pin(async move {
                    lock_secrets(c, project).await?;
                    if secrets(c, project).await?.is_empty() {
                        add_secret(c, project, values).await?;
                    }
                    secrets(c, project).await
                })
            },
        )
        .await
    }

    async fn replace_callback_secret(
        &self,
        project: ProjectId,
        old: &SecretString,
        new: &SecretString,
    ) -> Result<bool, StoreError> {
        let values = vec![
            SqlValue::display(project),
            SqlValue::text(old.expose()),
            SqlValue::text(new.expose()),
        ];
        self.run(On::Write, values, |c, values| {
            Box::pin(async move { Ok(execute(c, &st::SECRET_REPLACE, values).await? > 0) })
        })
        .await
    }
}

async fn secrets(c: &dyn Conn, project: ProjectId) -> Result<Vec<SecretRecord>, StoreError> {
    records(c, &st::SECRETS, vec![SqlValue::display(project)]).await
}

/// Inserts a secret (its [`secret_values`]) and deletes all but the project's two newest.
async fn add_secret(
    c: &dyn Conn,
    project: ProjectId,
    values: Vec<SqlValue>,
) -> Result<(), StoreError> {
    execute(c, &st::SECRET_INSERT, values).await?;
    execute(c, &st::SECRET_TRIM, vec![SqlValue::display(project)]).await?;
    Ok(())
}

/// Queues the transactions that change one project's secrets one after the other, whichever
/// node runs them: PostgreSQL's transaction-scoped advisory lock; nothing in SQLite, whose one
/// writer runs them in turn already.
async fn lock_secrets(c: &dyn Conn, project: ProjectId) -> Result<(), StoreError> {
    match c.dialect() {
        Dialect::Postgres => {
            let lock =
                "SELECT pg_advisory_xact_lock(hashtextextended('callback_secrets:' || $1, 0))";
            c.query(lock, vec![SqlValue::display(project)], &mut |_| Ok(()))
                .await
        }
        Dialect::Sqlite => Ok(()),
    }
}
