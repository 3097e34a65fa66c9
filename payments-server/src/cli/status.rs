//! `payments-server status`: what an operator checks first. The store (the data dir's SQLite
//! file or PostgreSQL), the schema version of the database beside the build's, the data dir,
//! the database size (and SQLite's WAL), payments by status, pending and failed callback
//! events, the oldest pending event, the oldest overdue payment and the dispatch hold. Reads
//! the schema version without opening a store and opens the store without migrating it: an
//! older database is reported as needing `payments-server migrate`, and left as it is.

use std::collections::BTreeMap;
use std::path::Path;

use serde::Serialize;

use super::{settings, CliError, CommonArgs};
use crate::config::Settings;
use crate::server::{open_service, Setup};

/// What `status` prints.
#[derive(Debug, Serialize)]
pub struct StatusReport {
    /// `sqlite` or `postgresql`.
    pub store: &'static str,
    /// The data dir.
    pub data_dir: String,
    /// The database: SQLite's file, or PostgreSQL's URL without its password.
    pub database: String,
    /// The database's size in bytes: SQLite's file, PostgreSQL's `pg_database_size`.
    pub database_bytes: Option<u64>,
    /// The size of SQLite's WAL in bytes (`None` on PostgreSQL).
    pub wal_bytes: Option<u64>,
    /// The database's schema version (`None` when it could not be read).
    pub schema_version: Option<u32>,
    /// The schema version this build writes.
    pub build_schema_version: u32,
    /// `true` when the database is older than the build: run `payments-server migrate`.
    pub needs_migration: bool,
    /// Payments by status, statuses without payments left out (empty when the database could
    /// not be opened).
    pub payments: BTreeMap<String, u64>,
    /// Callback events waiting to be sent.
    pub pending_events: Option<u64>,
    /// Failed callback events nobody has resent.
    pub failed_events: Option<u64>,
    /// Seconds since the oldest pending event was due.
    pub oldest_pending_event_age_s: Option<i64>,
    /// Seconds since the oldest overdue payment should have been swept.
    pub oldest_overdue_payment_age_s: Option<i64>,
    /// Whether callback dispatch is held (`None` when it could not be read).
    pub callback_held: Option<bool>,
    /// The dispatch hold's reason, when callbacks are held.
    pub callback_hold: Option<String>,
    /// Why the database could not be read, when it could not.
    pub error: Option<String>,
}

fn size(path: &Path) -> Option<u64> {
    std::fs::metadata(path).ok().map(|m| m.len())
}

/// `url` without its password (and query), for display.
fn without_password(url: &str) -> String {
    match url::Url::parse(url) {
        Ok(mut u) => {
            let _ = u.set_password(None);
            u.set_query(None);
            u.to_string()
        }
        Err(_) => "(database_url)".to_string(),
    }
}

/// The report's database part for `settings`, read without opening a store (nothing is
/// changed, whatever the schema version): which store, the database, its size and schema
/// version. `error` is set when PostgreSQL cannot be reached.
async fn database_part(settings: &Settings) -> StatusReport {
    let blank = |store, database, build_schema_version| StatusReport {
        store,
        data_dir: settings.data_dir.display().to_string(),
        database,
        database_bytes: None,
        wal_bytes: None,
        schema_version: None,
        build_schema_version,
        needs_migration: false,
        payments: BTreeMap::new(),
        pending_events: None,
        failed_events: None,
        oldest_pending_event_age_s: None,
        oldest_overdue_payment_age_s: None,
        callback_held: None,
        callback_hold: None,
        error: None,
    };
    let mut report = match &settings.store.database_url {
        #[cfg(feature = "postgres")]
        Some(url) => {
            let mut report = blank(
                "postgresql",
                without_password(url.expose()),
                payments_store_postgres::SCHEMA_VERSION,
            );
            match payments_store_postgres::inspect(url.expose()).await {
                Ok(info) => {
                    report.schema_version = Some(info.schema_version);
                    report.database_bytes = Some(info.bytes);
                }
                Err(e) => report.error = Some(format!("database_url: {e}")),
            }
            report
        }
        #[cfg(not(feature = "postgres"))]
        Some(url) => {
            let mut report = blank("postgresql", without_password(url.expose()), 0);
            report.error = Some(crate::server::NO_POSTGRES.to_string());
            report
        }
        None => {
            let db = settings.data_dir.join(crate::data_dir::DATABASE_FILE);
            let mut wal = db.clone().into_os_string();
            wal.push("-wal");
            let mut report = blank(
                "sqlite",
                db.display().to_string(),
                payments_store_sqlite::SCHEMA_VERSION,
            );
            report.database_bytes = size(&db);
            report.wal_bytes = size(Path::new(&wal));
            if db.exists() {
                report.schema_version = payments_store_sqlite::schema_version(&db).ok();
            }
            report
        }
    };
    report.needs_migration = report
        .schema_version
        .is_some_and(|v| v < report.build_schema_version);
    report
}

/// Builds the report for `settings`.
pub async fn status(settings: &Settings) -> StatusReport {
    let mut report = database_part(settings).await;
    if report.error.is_some() {
        return report;
    }
    let opened = match open_service(settings, Setup::Command).await {
        Ok(opened) => opened,
        Err(e) => {
            report.error = Some(e.to_string());
            return report;
        }
    };
    let store = opened.service.store().clone();
    let now = opened.service.ports().clock.now();
    let age = |t: payments_core::Timestamp| (now.unix_millis() - t.unix_millis()).max(0) / 1000;
    let result: Result<(), payments_core::store::StoreError> = async {
        let backlog = store.backlog().await?;
        report.payments = backlog
            .by_status
            .into_iter()
            .filter(|(_, n)| *n > 0)
            .map(|(s, n)| (s.as_str().to_string(), n))
            .collect();
        report.pending_events = Some(backlog.pending_events);
        report.failed_events = Some(backlog.failed_events);
        report.oldest_pending_event_age_s = backlog.oldest_pending_event.map(age);
        report.oldest_overdue_payment_age_s =
            backlog.oldest_due_payment.filter(|t| *t <= now).map(age);
        report.callback_hold = opened.service.callbacks().callback_hold().await?;
        report.callback_held = Some(report.callback_hold.is_some());
        Ok(())
    }
    .await;
    if let Err(e) = result {
        report.error = Some(e.to_string());
    }
    opened.store.close();
    report
}

fn or_dash<T: std::fmt::Display>(v: Option<T>) -> String {
    v.map_or_else(|| "-".to_string(), |v| v.to_string())
}

impl std::fmt::Display for StatusReport {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        writeln!(f, "store                  {}", self.store)?;
        writeln!(f, "data dir               {}", self.data_dir)?;
        write!(
            f,
            "database               {} ({} bytes",
            self.database,
            or_dash(self.database_bytes)
        )?;
        if self.store == "sqlite" {
            write!(f, ", WAL {} bytes", or_dash(self.wal_bytes))?;
        }
        writeln!(f, ")")?;
        writeln!(
            f,
            "schema version         {} (this build: {}){}",
            or_dash(self.schema_version),
            self.build_schema_version,
            if self.needs_migration {
                "; run `payments-server migrate`"
            } else {
                ""
            }
        )?;
        let payments: Vec<String> = self
            .payments
            .iter()
            .map(|(s, n)| format!("{s} {n}"))
            .collect();
        writeln!(
            f,
            "payments               {}",
            if payments.is_empty() {
                "-".to_string()
            } else {
                payments.join(", ")
            }
        )?;
        writeln!(f, "callbacks pending      {}", or_dash(self.pending_events))?;
        writeln!(f, "callbacks failed       {}", or_dash(self.failed_events))?;
        writeln!(
            f,
            "oldest pending event   {}",
            self.oldest_pending_event_age_s
                .map_or_else(|| "-".to_string(), |s| format!("{s} s ago"))
        )?;
        writeln!(
            f,
            "oldest overdue payment {}",
            self.oldest_overdue_payment_age_s
                .map_or_else(|| "-".to_string(), |s| format!("{s} s overdue"))
        )?;
        write!(
            f,
            "callback dispatch      {}",
            match (self.callback_held, &self.callback_hold) {
                (None, _) => "-".to_string(),
                (Some(true), Some(reason)) => format!("HELD: {reason}"),
                (Some(_), _) => "on".to_string(),
            }
        )?;
        if let Some(e) = &self.error {
            write!(f, "\nerror                  {e}")?;
        }
        Ok(())
    }
}

/// `payments-server status [--json]`: prints the report; exits non-zero when the database
/// could not be read (missing, older than the build, unreachable).
pub async fn status_command(common: &CommonArgs, json: bool) -> Result<(), CliError> {
    let settings = settings(common, common)?;
    crate::telemetry::init(settings.log.format, "warn");
    settings.warn_deprecated();
    let report = status(&settings).await;
    if json {
        println!(
            "{}",
            serde_json::to_string_pretty(&report)
                .expect("a report of strings and numbers serialises")
        );
    } else {
        println!("{report}");
    }
    match &report.error {
        Some(e) => Err(CliError::StatusIncomplete(e.clone())),
        None => Ok(()),
    }
}
