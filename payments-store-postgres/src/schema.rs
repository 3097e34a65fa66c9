//! Versioned schema migrations, embedded in the binary, applied under an advisory lock.
//!
//! Each migration records its version in `schema_migrations` together with the oldest schema
//! version a build must know to keep working on the database afterwards (`min_reader`). An
//! *expand* migration (new tables, new nullable or defaulted columns, new indexes) keeps
//! `min_reader`: nodes of the previous build keep running beside the new ones during a
//! rolling upgrade. A *contract* migration (dropping or renaming what older builds use) raises
//! it, and is shipped one release after the code stopped using what it removes.

use std::time::{Duration, Instant};

use tokio_postgres::{Client, Config, NoTls};

use crate::OpenError;

/// One migration: its SQL and the `min_reader` it leaves (see the module documentation).
struct Migration {
    sql: &'static str,
    min_reader: u32,
}

/// Migration `i` brings the schema from version `i` to `i + 1`. Append only: a released
/// migration never changes.
const MIGRATIONS: &[Migration] = &[
    Migration {
        sql: include_str!("migrations/0001_initial.sql"),
        min_reader: 1,
    },
    Migration {
        sql: include_str!("migrations/0002_operations.sql"),
        min_reader: 1,
    },
    Migration {
        sql: include_str!("migrations/0003_cabinet.sql"),
        min_reader: 1,
    },
    Migration {
        sql: include_str!("migrations/0004_payer_page.sql"),
        min_reader: 1,
    },
];

/// The schema version this build writes.
pub const SCHEMA_VERSION: u32 = MIGRATIONS.len() as u32;

/// The advisory lock key of migrations (the bytes of "payments" as a big-endian i64).
const MIGRATION_LOCK: i64 = 0x7061_796d_656e_7473;

/// Connects to `url` and brings its schema to [`SCHEMA_VERSION`] (the `payments-server
/// migrate` subcommand); returns the version before and after. Waits at most `lock_wait` for
/// a migration another node is running.
pub async fn migrate(url: &str, lock_wait: Duration) -> Result<(u32, u32), OpenError> {
    let config = crate::pg_config(url, &crate::PgOptions::default())?;
    migrate_with(&config, lock_wait).await
}

pub(crate) async fn migrate_with(
    config: &Config,
    lock_wait: Duration,
) -> Result<(u32, u32), OpenError> {
    let (client, connection) = config
        .connect(NoTls)
        .await
        .map_err(|e| OpenError::Connect(e.to_string()))?;
    let task = tokio::spawn(async move {
        // The connection ends when `client` is dropped below.
        let _ = connection.await;
    });
    let result = locked_migrate(&client, lock_wait).await;
    drop(client);
    let _ = task.await;
    result
}

fn migration_error(e: tokio_postgres::Error) -> OpenError {
    OpenError::Migration(match e.as_db_error() {
        Some(d) => format!("{}: {}", d.code().code(), d.message()),
        None => e.to_string(),
    })
}

async fn locked_migrate(client: &Client, lock_wait: Duration) -> Result<(u32, u32), OpenError> {
    let deadline = Instant::now() + lock_wait;
    loop {
        let row = client
            .query_one("SELECT pg_try_advisory_lock($1)", &[&MIGRATION_LOCK])
            .await
            .map_err(migration_error)?;
        if row.get::<_, bool>(0) {
            break;
        }
        if Instant::now() >= deadline {
            return Err(OpenError::LockTimeout(lock_wait));
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let result = apply(client).await;
    // The lock also ends with the session; an unlock failure is not the migration's.
    let _ = client
        .execute("SELECT pg_advisory_unlock($1)", &[&MIGRATION_LOCK])
        .await;
    result
}

async fn apply(client: &Client) -> Result<(u32, u32), OpenError> {
    client
        .batch_execute(
            "CREATE TABLE IF NOT EXISTS schema_migrations (\
                version    INTEGER NOT NULL PRIMARY KEY, \
                min_reader INTEGER NOT NULL, \
                applied_at TIMESTAMPTZ NOT NULL DEFAULT now())",
        )
        .await
        .map_err(migration_error)?;
    let row = client
        .query_one(
            "SELECT coalesce(max(version), 0), coalesce(max(min_reader), 0) \
             FROM schema_migrations",
            &[],
        )
        .await
        .map_err(migration_error)?;
    let found = u32::try_from(row.get::<_, i32>(0)).unwrap_or(0);
    let min_reader = u32::try_from(row.get::<_, i32>(1)).unwrap_or(0);
    if found > SCHEMA_VERSION {
        if min_reader > SCHEMA_VERSION {
            return Err(OpenError::NewerSchema {
                found,
                supported: SCHEMA_VERSION,
            });
        }
        // A newer build expanded the schema; this one still works on it.
        return Ok((found, found));
    }
    let start = usize::try_from(found).expect("a u32 fits usize on supported targets");
    for (i, m) in MIGRATIONS.iter().enumerate().skip(start) {
        let version = i32::try_from(i + 1).expect("few migrations");
        let min_reader = i32::try_from(m.min_reader).expect("few migrations");
        // One transaction per migration: DDL is transactional in PostgreSQL.
        client
            .batch_execute("BEGIN")
            .await
            .map_err(migration_error)?;
        let step = async {
            client.batch_execute(m.sql).await?;
            client
                .execute(
                    "INSERT INTO schema_migrations (version, min_reader) VALUES ($1, $2)",
                    &[&version, &min_reader],
                )
                .await?;
            client.batch_execute("COMMIT").await
        }
        .await;
        if let Err(e) = step {
            let _ = client.batch_execute("ROLLBACK").await;
            return Err(migration_error(e));
        }
        tracing::info!(version, "database migration applied");
    }
    Ok((found, SCHEMA_VERSION))
}
