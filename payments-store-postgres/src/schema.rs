//! Schema migrations, embedded in the binary, applied under an advisory lock, in the shared
//! numbering of [`payments_store_sql::schema`].
//!
//! Each migration records its version in `schema_migrations` together with the oldest schema
//! version a build must know to keep working on the database afterwards (`min_reader`; see
//! the shared module for expand and contract migrations): nodes of the previous build keep
//! running beside the new ones during a rolling upgrade as long as it allows them.

use std::time::{Duration, Instant};

use tokio::task::JoinHandle;
use tokio_postgres::{Client, NoTls};

use crate::tls::{Target, Transport};

use payments_store_sql::schema::{self, BASELINE, BASELINE_MIN_READER};

use crate::OpenError;

/// One early migration: its SQL and the `min_reader` it leaves.
struct Early {
    sql: &'static str,
    min_reader: u32,
}

/// This engine's early migrations, before the numbering was shared: step `i` brought the
/// schema from version `i` to `i + 1`, and the last one leaves the schema of
/// [`BASELINE`](schema::BASELINE). Released: never changed.
const EARLY: &[Early] = &[
    Early {
        sql: include_str!("migrations/0001_initial.sql"),
        min_reader: 1,
    },
    Early {
        sql: include_str!("migrations/0002_operations.sql"),
        min_reader: 1,
    },
    Early {
        sql: include_str!("migrations/0003_cabinet.sql"),
        min_reader: 1,
    },
    Early {
        sql: include_str!("migrations/0004_payer_page.sql"),
        min_reader: 1,
    },
    Early {
        sql: include_str!("migrations/0005_status_count_trigger.sql"),
        min_reader: 1,
    },
];

/// The schema version this build writes (shared by both engines).
pub const SCHEMA_VERSION: u32 = schema::SCHEMA_VERSION;

/// The advisory lock key of migrations (the bytes of "payments" as a big-endian i64).
const MIGRATION_LOCK: i64 = 0x7061_796d_656e_7473;

/// Connects to `url` and brings its schema to [`SCHEMA_VERSION`] (the `payments-server
/// migrate` subcommand); returns the version before and after. Waits at most `lock_wait` for
/// a migration another node is running.
pub async fn migrate(url: &str, lock_wait: Duration) -> Result<(u32, u32), OpenError> {
    let target = crate::pg_config(url, &crate::PgOptions::default())?;
    migrate_with(&target, lock_wait).await
}

/// What [`inspect`] reads of a database without changing it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct DatabaseInfo {
    /// The newest migration applied (0: none, an empty database).
    pub schema_version: u32,
    /// The oldest schema version a build must know to work on the database (see the module
    /// documentation); 0 for an empty database.
    pub min_reader: u32,
    /// The database's size (`pg_database_size`), every schema in it included.
    pub bytes: u64,
}

/// Connects to `url` and reads its schema version and size, changing nothing (for
/// `payments-server status`, which must work on a database that needs `migrate`).
pub async fn inspect(url: &str) -> Result<DatabaseInfo, OpenError> {
    let target = crate::pg_config(url, &crate::PgOptions::default())?;
    let (client, task) = connect_one(&target).await?;
    let result = async {
        let (schema_version, min_reader) = read_version(&client).await?;
        let row = client
            .query_one("SELECT pg_database_size(current_database())", &[])
            .await
            .map_err(query_error)?;
        Ok(DatabaseInfo {
            schema_version,
            min_reader,
            bytes: u64::try_from(row.get::<_, i64>(0)).unwrap_or(0),
        })
    }
    .await;
    drop(client);
    let _ = task.await;
    result
}

/// One connection outside the pool, and the task driving it (it ends when the client is
/// dropped).
async fn connect_one(target: &Target) -> Result<(Client, JoinHandle<()>), OpenError> {
    let refused = |e: tokio_postgres::Error| OpenError::Connect(crate::error::describe(&e));
    let task = match &target.transport {
        Transport::Plain => {
            let (client, connection) = target.config.connect(NoTls).await.map_err(refused)?;
            let task = tokio::spawn(async move {
                let _ = connection.await;
            });
            (client, task)
        }
        Transport::Verified(tls) => {
            let (client, connection) = target.config.connect(tls.clone()).await.map_err(refused)?;
            let task = tokio::spawn(async move {
                let _ = connection.await;
            });
            (client, task)
        }
    };
    Ok(task)
}

pub(crate) async fn migrate_with(
    target: &Target,
    lock_wait: Duration,
) -> Result<(u32, u32), OpenError> {
    let (client, task) = connect_one(target).await?;
    let result = locked_migrate(&client, lock_wait).await;
    drop(client);
    let _ = task.await;
    result
}

/// A failure's SQLSTATE and message (or the client's text when the server sent none).
fn detail(e: &tokio_postgres::Error) -> String {
    crate::error::describe(e)
}

fn query_error(e: tokio_postgres::Error) -> OpenError {
    OpenError::Query(detail(&e))
}

fn migration_error(e: tokio_postgres::Error) -> OpenError {
    OpenError::Migration(detail(&e))
}

/// The schema version and `min_reader` recorded in `schema_migrations`; `(0, 0)` when the
/// table does not exist (an empty database). Changes nothing.
async fn read_version(client: &Client) -> Result<(u32, u32), OpenError> {
    let exists = client
        .query_one("SELECT to_regclass('schema_migrations') IS NOT NULL", &[])
        .await
        .map_err(query_error)?;
    if !exists.get::<_, bool>(0) {
        return Ok((0, 0));
    }
    let row = client
        .query_one(
            "SELECT coalesce(max(version), 0), coalesce(max(min_reader), 0) \
             FROM schema_migrations",
            &[],
        )
        .await
        .map_err(query_error)?;
    Ok((
        u32::try_from(row.get::<_, i32>(0)).unwrap_or(0),
        u32::try_from(row.get::<_, i32>(1)).unwrap_or(0),
    ))
}

/// Refuses a database this build would have to migrate (naming `payments-server migrate`)
/// or cannot work on, changing nothing: for a connect that must not migrate
/// ([`PgOptions::migrate`](crate::PgOptions::migrate) off).
pub(crate) async fn check_migrated(client: &Client) -> Result<(), OpenError> {
    let (found, min_reader) = read_version(client).await?;
    Ok(schema::require_migrated(found, Some(min_reader))?)
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
    let mut result = apply(client).await;
    if let (Ok(_), Some(planted)) = (
        &result,
        payments_store_sql::statements::planted_schema(payments_store_sql::sql::Dialect::Postgres),
    ) {
        if let Err(e) = client.batch_execute(planted).await {
            result = Err(migration_error(e));
        }
    }
    // The lock also ends with the session; an unlock failure is not the migration's.
    let _ = client
        .execute("SELECT pg_advisory_unlock($1)", &[&MIGRATION_LOCK])
        .await;
    result
}

async fn apply(client: &Client) -> Result<(u32, u32), OpenError> {
    let (found, min_reader) = read_version(client).await?;
    if !schema::behind(found, Some(min_reader))? {
        // Current, or a newer build expanded the schema and this one still works on it.
        return Ok((found, found));
    }
    client
        .batch_execute(
            "CREATE TABLE IF NOT EXISTS schema_migrations (\
                version    INTEGER NOT NULL PRIMARY KEY, \
                min_reader INTEGER NOT NULL, \
                applied_at TIMESTAMPTZ NOT NULL DEFAULT now())",
        )
        .await
        .map_err(migration_error)?;
    if found > 0 {
        // Only `serve` and `migrate` get here, and they say so (as the SQLite store does).
        tracing::info!(
            from = found,
            to = SCHEMA_VERSION,
            "applying schema migrations"
        );
    }
    let mut steps: Vec<(u32, &str, u32)> = Vec::new();
    if found < BASELINE {
        let start = usize::try_from(found).expect("a u32 fits usize on supported targets");
        for (i, m) in EARLY.iter().enumerate().skip(start) {
            let version = u32::try_from(i + 1).expect("few migrations");
            steps.push((version, m.sql, m.min_reader));
        }
        // The baseline changes no table: it records that the early steps are done.
        steps.push((BASELINE, "", BASELINE_MIN_READER));
    }
    for (version, m) in schema::after(found) {
        steps.push((version, m.postgres, m.min_reader));
    }
    for (version, sql, min_reader) in steps {
        let version = i32::try_from(version).expect("a small version");
        let min_reader = i32::try_from(min_reader).expect("a small version");
        // One transaction per migration: DDL is transactional in PostgreSQL.
        client
            .batch_execute("BEGIN")
            .await
            .map_err(migration_error)?;
        let step = async {
            client.batch_execute(sql).await?;
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

// The early steps end below the baseline.
const _: () = assert!(EARLY.len() < BASELINE as usize);
