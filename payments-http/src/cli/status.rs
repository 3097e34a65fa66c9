//! `payments-server status`: what an operator checks first. The store (SQLite file or
//! PostgreSQL), the schema version of the database beside the build's, the data dir, the
//! database and WAL sizes, payments by status, pending and failed callback events, the oldest
//! pending event, the oldest overdue payment and the dispatch hold. Opens the database without
//! migrating it: an older database is reported as needing `payments-server migrate`.

use std::path::Path;

use payments_core::Clock;
use serde::Serialize;

use super::{settings, CommonArgs};
use crate::config::Settings;
use crate::server::open_service;

/// What `status` prints.
#[derive(Debug, Serialize)]
pub struct StatusReport {
    /// `sqlite` or `postgresql`.
    pub store: &'static str,
    /// The data dir.
    pub data_dir: String,
    /// The SQLite database file (`None` on PostgreSQL).
    pub database_file: Option<String>,
    /// Its size in bytes, and its WAL's.
    pub database_bytes: Option<u64>,
    /// The WAL's size in bytes.
    pub wal_bytes: Option<u64>,
    /// The database's schema version (SQLite; `None` when unreadable or on PostgreSQL).
    pub schema_version: Option<u32>,
    /// The schema version this build writes.
    pub build_schema_version: u32,
    /// `true` when the database is older than the build: run `payments-server migrate`.
    pub needs_migration: bool,
    /// Payments by status (empty when the database could not be opened).
    pub payments: Vec<(String, u64)>,
    /// Callback events waiting to be sent.
    pub pending_events: Option<u64>,
    /// Failed callback events nobody has resent.
    pub failed_events: Option<u64>,
    /// Seconds since the oldest pending event was due.
    pub oldest_pending_event_age_s: Option<i64>,
    /// Seconds since the oldest overdue payment should have been swept.
    pub oldest_overdue_payment_age_s: Option<i64>,
    /// The dispatch hold's reason, when callbacks are held.
    pub callback_hold: Option<String>,
    /// Why the database could not be read, when it could not.
    pub error: Option<String>,
}

fn size(path: &Path) -> Option<u64> {
    std::fs::metadata(path).ok().map(|m| m.len())
}

/// Builds the report for `settings`.
pub async fn status(settings: &Settings) -> StatusReport {
    let postgres = settings.database_url.is_some();
    let db = settings.data_dir.join(crate::data_dir::DATABASE_FILE);
    let mut wal = db.clone().into_os_string();
    wal.push("-wal");
    let schema_version = (!postgres)
        .then(|| payments_store_sqlite::schema_version(&db).ok())
        .flatten();
    let build_schema_version = if postgres {
        payments_store_postgres::SCHEMA_VERSION
    } else {
        payments_store_sqlite::SCHEMA_VERSION
    };
    let mut report = StatusReport {
        store: if postgres { "postgresql" } else { "sqlite" },
        data_dir: settings.data_dir.display().to_string(),
        database_file: (!postgres).then(|| db.display().to_string()),
        database_bytes: (!postgres).then(|| size(&db)).flatten(),
        wal_bytes: (!postgres).then(|| size(Path::new(&wal))).flatten(),
        schema_version,
        build_schema_version,
        needs_migration: schema_version.is_some_and(|v| v < build_schema_version),
        payments: Vec::new(),
        pending_events: None,
        failed_events: None,
        oldest_pending_event_age_s: None,
        oldest_overdue_payment_age_s: None,
        callback_hold: None,
        error: None,
    };
    let opened = match open_service(settings, false).await {
        Ok(opened) => opened,
        Err(e) => {
            report.needs_migration |= e.0.contains("payments-server migrate");
            report.error = Some(e.0);
            return report;
        }
    };
    let store = opened.service.store().clone();
    let now = opened.service.ports().clock.now();
    let age = |t: payments_core::Timestamp| (now.unix_millis() - t.unix_millis()).max(0) / 1000;
    let result: Result<(), String> = async {
        let e = |e: payments_core::store::StoreError| e.to_string();
        report.payments = store
            .count_by_status()
            .await
            .map_err(e)?
            .into_iter()
            .map(|(s, n)| (s.as_str().to_string(), n))
            .collect();
        report.pending_events = Some(store.pending_events().await.map_err(e)?);
        report.failed_events = Some(store.failed_event_count().await.map_err(e)?);
        report.oldest_pending_event_age_s = store.oldest_pending_event().await.map_err(e)?.map(age);
        report.oldest_overdue_payment_age_s = store
            .oldest_due_payment()
            .await
            .map_err(e)?
            .filter(|t| *t <= now)
            .map(age);
        report.callback_hold = opened
            .service
            .callback_hold()
            .await
            .map_err(|e| e.message)?;
        Ok(())
    }
    .await;
    if let Err(e) = result {
        report.error = Some(e);
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
        if let Some(file) = &self.database_file {
            writeln!(
                f,
                "database               {file} ({} bytes, WAL {} bytes)",
                or_dash(self.database_bytes),
                or_dash(self.wal_bytes)
            )?;
        }
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
            self.callback_hold
                .as_ref()
                .map_or_else(|| "on".to_string(), |r| format!("HELD: {r}"))
        )?;
        if let Some(e) = &self.error {
            write!(f, "\nerror                  {e}")?;
        }
        Ok(())
    }
}

/// `payments-server status [--json]`: prints the report; exits non-zero when the database
/// could not be read (missing, older than the build, unreachable).
pub async fn status_command(common: &CommonArgs, json: bool) -> Result<(), String> {
    let settings = settings(common, common)?;
    crate::telemetry::init(settings.log_format, "warn");
    let report = status(&settings).await;
    if json {
        println!(
            "{}",
            serde_json::to_string_pretty(&report).map_err(|e| e.to_string())?
        );
    } else {
        println!("{report}");
    }
    match &report.error {
        Some(e) => Err(format!("status incomplete: {e}")),
        None => Ok(()),
    }
}
