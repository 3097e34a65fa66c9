//! The PostgreSQL store: implements the `payments-core` store traits on one PostgreSQL
//! database shared by any number of stateless `payments-server` nodes.
//!
//! Everything a node must share lives in the database and is decided there: the unique
//! `merchant_payment_id` and nonce per project (unique keys; `ON CONFLICT`), optimistic
//! concurrency on payment versions, a status change with its outbox row and audit record in
//! one transaction, outbox claims that never hand one event to two dispatchers (`FOR UPDATE
//! SKIP LOCKED` inside a CTE) with a lease fencing token, turns of background work, and the
//! per-project rate limit ([`PgRateLimiter`], one GCRA row per project in an UNLOGGED table).
//!
//! Transactions run at READ COMMITTED (an "insert, conflict, read the existing row" needs the
//! fresh snapshot of each statement) and take their locks in one order (nonce, payment,
//! outbox), so concurrent creates cannot deadlock. Commits are durable
//! (`synchronous_commit = on` on every connection): a `201` is a promise.
//!
//! Connections come from a `deadpool-postgres` pool with bounded waits (a full pool or an
//! unreachable database is [`StoreError::Unavailable`], `503`), TCP keepalives and
//! `tcp_user_timeout` (a dead peer after a failover is noticed in seconds, not at the kernel's
//! default of hours), and a maximum connection age (old connections are retired). Statements
//! are prepared once per connection (`prepare_cached`).
//!
//! Fairness between projects: a list read (the payment list and search, the events list)
//! takes one of the pool's connections only with a permit, and the permits leave
//! [`PgOptions::reserved`] connections to everything else (the token check, the rate limit,
//! creates), so no project's scans make another's requests wait for a connection; and it
//! runs in a read-only transaction whose `statement_timeout` is [`PgOptions::scan_timeout`].
//!
//! Migrations are embedded and applied by [`migrate`] (or [`PgStore::connect`] with
//! [`PgOptions::migrate`], as `payments-server serve` does) under an advisory lock with a
//! bounded wait, so nodes starting together apply them once. A connect without `migrate`
//! refuses an older database ([`SchemaError::NeedsMigration`](payments_store_sql::schema::SchemaError::NeedsMigration)) and changes nothing;
//! [`inspect`] reads the schema version and size of any database.
#![forbid(unsafe_code)]
#![deny(missing_docs)]

use std::fmt;
use std::sync::Arc;
use std::time::Duration;

use deadpool_postgres::{
    Hook, HookError, Manager, ManagerConfig, Pool, PoolError, RecyclingMethod, Runtime,
};
use payments_core::store::{StoreError, UnavailableCause};
use payments_store_sql::sealing::{StoredAuditStates, StoredRequisites, RESEAL_PAGE};
use tokio::sync::{OwnedSemaphorePermit, Semaphore};
use tokio_postgres::NoTls;

mod appeals;
mod cabinet;
mod codec;
mod directory;
mod error;
mod ledger;
mod outbox;
mod payments;
mod ratelimit;
mod relay;
mod runtime;
mod schema;
mod store;
#[cfg(feature = "testing")]
pub mod testing;
mod tls;

pub use error::OpenError;
pub use payments_store_sql::sealing::{
    Last4Backfill, RequisiteReseal, RequisiteSealing, SealWrites,
};
pub use ratelimit::PgRateLimiter;
pub use schema::{inspect, migrate, DatabaseInfo, SCHEMA_VERSION};

/// Options of [`PgStore::connect`].
#[derive(Debug, Clone)]
pub struct PgOptions {
    /// Connections in this node's pool. Keep `nodes x pool_size` well under the server's
    /// `max_connections`. 16 by default.
    pub pool_size: usize,
    /// How long a request waits for a free connection before it fails as unavailable. 2 s by
    /// default.
    pub wait_timeout: Duration,
    /// How long opening a new connection may take. 2 s by default.
    pub connect_timeout: Duration,
    /// Connections older than this are closed when returned and replaced by new ones. 30 min
    /// by default.
    pub max_lifetime: Duration,
    /// TCP keepalive idle time; probes follow every `keepalive_idle / 3`. 10 s by default.
    pub keepalive_idle: Duration,
    /// How long sent data may stay unacknowledged before the connection is dropped
    /// (`TCP_USER_TIMEOUT`). 10 s by default.
    pub tcp_user_timeout: Duration,
    /// Longest a statement may run (`statement_timeout`). 30 s by default.
    pub statement_timeout: Duration,
    /// Longest one list read (the payment list and search, the events list) may run: its
    /// transaction's `statement_timeout` (`SET LOCAL`). A read stopped by it fails as
    /// unavailable with the cause `TimedOut`. 5 s by default.
    pub scan_timeout: Duration,
    /// Connections of the pool that list reads never take: lists run on at most
    /// `pool_size - reserved` connections (at least 1) at once, so the token check, the rate
    /// limit and writes always find one. 4 by default.
    pub reserved: usize,
    /// How long [`PgStore::connect`] waits for another node's migration (the advisory lock)
    /// before giving up. 60 s by default.
    pub migration_lock_timeout: Duration,
    /// Apply the embedded migrations on connect. `true` by default; `false` refuses an older
    /// database with [`SchemaError::NeedsMigration`](payments_store_sql::schema::SchemaError::NeedsMigration) instead of changing its schema (only
    /// `payments-server migrate` and `serve` change the schema). A database a newer build
    /// wrote is refused either way unless that build only expanded the schema.
    pub migrate: bool,
}

impl Default for PgOptions {
    fn default() -> Self {
        PgOptions {
            pool_size: 16,
            wait_timeout: Duration::from_secs(2),
            connect_timeout: Duration::from_secs(2),
            max_lifetime: Duration::from_secs(30 * 60),
            keepalive_idle: Duration::from_secs(10),
            tcp_user_timeout: Duration::from_secs(10),
            statement_timeout: Duration::from_secs(30),
            scan_timeout: Duration::from_secs(5),
            reserved: 4,
            migration_lock_timeout: Duration::from_secs(60),
            migrate: true,
        }
    }
}

/// The PostgreSQL store: a connection pool over one database. Cloning shares the pool.
#[derive(Clone)]
pub struct PgStore {
    pool: Pool,
    /// One permit per connection list reads may take ([`PgOptions::reserved`]).
    scan_permits: Arc<Semaphore>,
    /// [`PgOptions::scan_timeout`].
    scan_timeout: Duration,
    /// [`PgOptions::wait_timeout`]: also the longest a list read waits for a permit.
    wait_timeout: Duration,
    /// The keys requisites are sealed with ([`PgStore::requisite_sealing`]); clones share it.
    sealing: RequisiteSealing,
    /// Where the outbox relay's own connection goes ([`relay`]).
    target: Arc<tls::Target>,
    /// The runtime the store was opened on: where the relay runs when joined outside one.
    runtime: tokio::runtime::Handle,
}

impl fmt::Debug for PgStore {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let status = self.pool.status();
        f.debug_struct("PgStore")
            .field("max_size", &status.max_size)
            .field("size", &status.size)
            .field("available", &status.available)
            .finish()
    }
}

/// The connection settings of `url` with the options' timeouts and session settings, and its
/// transport (in clear, or TLS with `sslmode=verify-full`; see [`tls`]).
pub(crate) fn pg_config(url: &str, options: &PgOptions) -> Result<tls::Target, OpenError> {
    let params = tls::split(url)?;
    let transport = tls::transport(params.root.as_deref())?;
    let mut config: tokio_postgres::Config = params
        .url
        .parse()
        .map_err(|e: tokio_postgres::Error| OpenError::Url(e.to_string()))?;
    if config.get_application_name().is_none() {
        config.application_name("payments-server");
    }
    let session = format!(
        "-c synchronous_commit=on -c default_transaction_isolation=read\\ committed \
         -c statement_timeout={} -c idle_in_transaction_session_timeout=60000",
        options.statement_timeout.as_millis()
    );
    let options_text = match config.get_options() {
        Some(existing) => format!("{existing} {session}"),
        None => session,
    };
    config
        .options(options_text)
        .connect_timeout(options.connect_timeout)
        .keepalives(true)
        .keepalives_idle(options.keepalive_idle)
        .keepalives_interval((options.keepalive_idle / 3).max(Duration::from_secs(1)))
        .keepalives_retries(3)
        .tcp_user_timeout(options.tcp_user_timeout);
    if matches!(transport, tls::Transport::Verified(_)) {
        config.ssl_mode(tokio_postgres::config::SslMode::Require);
    }
    Ok(tls::Target { config, transport })
}

impl PgStore {
    /// Connects to the database at `url` (`postgres://user:password@host:port/db`) and
    /// returns the store. With [`PgOptions::migrate`] (the default) it first applies the
    /// embedded migrations (under an advisory lock, waiting at most
    /// [`PgOptions::migration_lock_timeout`] for another node's); without it, an older
    /// database is refused ([`SchemaError::NeedsMigration`](payments_store_sql::schema::SchemaError::NeedsMigration)) and left as it is. A database a
    /// newer build wrote is refused ([`SchemaError::NewerSchema`](payments_store_sql::schema::SchemaError::NewerSchema)) unless that build only
    /// expanded the schema.
    pub async fn connect(url: &str, options: PgOptions) -> Result<PgStore, OpenError> {
        let target = pg_config(url, &options)?;
        if options.migrate {
            schema::migrate_with(&target, options.migration_lock_timeout).await?;
        }
        let store = Self::pool_only(target, &options)?;
        // One connection up front: a wrong password or a missing database fails here.
        let client = store
            .client()
            .await
            .map_err(|e| OpenError::Connect(e.to_string()))?;
        if !options.migrate {
            schema::check_migrated(&client).await?;
        }
        drop(client);
        Ok(store)
    }

    fn pool_only(target: tls::Target, options: &PgOptions) -> Result<PgStore, OpenError> {
        let shared_target = Arc::new(tls::Target {
            config: target.config.clone(),
            transport: target.transport.clone(),
        });
        let manager_config = ManagerConfig {
            recycling_method: RecyclingMethod::Fast,
        };
        let manager = match target.transport {
            tls::Transport::Plain => Manager::from_config(target.config, NoTls, manager_config),
            tls::Transport::Verified(tls) => {
                Manager::from_config(target.config, tls, manager_config)
            }
        };
        let max_lifetime = options.max_lifetime;
        let pool = Pool::builder(manager)
            .max_size(options.pool_size.max(1))
            .wait_timeout(Some(options.wait_timeout))
            .create_timeout(Some(options.connect_timeout))
            .recycle_timeout(Some(options.connect_timeout))
            .runtime(Runtime::Tokio1)
            .pre_recycle(Hook::sync_fn(move |_, metrics| {
                if metrics.age() > max_lifetime {
                    Err(HookError::message("the connection reached its maximum age"))
                } else {
                    Ok(())
                }
            }))
            .build()
            .map_err(|e| OpenError::Connect(e.to_string()))?;
        let pool_size = options.pool_size.max(1);
        Ok(PgStore {
            pool,
            scan_permits: Arc::new(Semaphore::new(
                pool_size.saturating_sub(options.reserved).max(1),
            )),
            scan_timeout: options.scan_timeout,
            wait_timeout: options.wait_timeout,
            sealing: RequisiteSealing::new(),
            target: shared_target,
            runtime: tokio::runtime::Handle::current(),
        })
    }

    /// The outbox relay over this store's database ([`relay`]).
    pub(crate) fn relay(&self) -> relay::PgRelay {
        relay::PgRelay::new(self.target.clone(), self.runtime.clone())
    }

    /// A permit to take a pool connection for a list read ([`PgOptions::reserved`]), or
    /// [`StoreError::Unavailable`] (overloaded) when none comes within the pool's wait.
    pub(crate) async fn scan_permit(&self) -> Result<OwnedSemaphorePermit, StoreError> {
        match tokio::time::timeout(
            self.wait_timeout,
            Arc::clone(&self.scan_permits).acquire_owned(),
        )
        .await
        {
            Ok(Ok(permit)) => Ok(permit),
            Ok(Err(_)) => Err(UnavailableCause::Closed.error("the store is closed")),
            Err(_) => Err(UnavailableCause::Overloaded
                .error("no connection for a list read came in time (every list connection busy)")),
        }
    }

    /// The statement that limits a list read's transaction ([`PgOptions::scan_timeout`]).
    pub(crate) fn scan_limit(&self) -> String {
        format!(
            "SET LOCAL statement_timeout = {}",
            self.scan_timeout.as_millis().max(1)
        )
    }

    /// A pooled connection, or [`StoreError::Unavailable`] when none comes in time.
    pub(crate) async fn client(&self) -> Result<deadpool_postgres::Client, StoreError> {
        self.pool.get().await.map_err(pool_error)
    }

    /// The sealing of this store's requisites at rest: empty (requisites written in clear)
    /// until the keys are installed on it, which a server does right after connecting, once
    /// it knows its key ([`RequisiteSealing::install`]).
    pub fn requisite_sealing(&self) -> &RequisiteSealing {
        &self.sealing
    }

    /// How many payments hold requisites sealed under each key id (a full scan; what a
    /// server checks before creating a missing key).
    pub async fn sealed_requisite_keys(&self) -> Result<Vec<(String, u64)>, StoreError> {
        let client = self.client().await?;
        codec::query(
            &client,
            codec::sql(&payments_store_sql::statements::REQUISITE_KEYS),
            &[],
        )
        .await?
        .iter()
        .map(|row| codec::read(row, |c| Ok((c.text("key_id")?, c.num::<u64>("n")?))))
        .collect()
    }

    /// Seals, under the current key, the requisites of every payment that holds them in clear
    /// or under a previous key, a page of [`RESEAL_PAGE`] payments at a time, each row only
    /// if it is unchanged since it was read (the step of a key rotation after callback
    /// secrets, and of turning sealing on for payments written before it). A value that does
    /// not open under the installed keys stops it with [`StoreError::Corrupt`].
    pub async fn reseal_requisites(&self) -> Result<RequisiteReseal, StoreError> {
        use payments_store_sql::statements as st;
        let client = self.client().await?;
        let mut report = RequisiteReseal::default();
        let mut after = String::new();
        loop {
            let rows = codec::query(
                &client,
                codec::sql(&st::REQUISITES_PAGE),
                &[&after, &codec::limit(RESEAL_PAGE)],
            )
            .await?;
            for row in &rows {
                let stored = codec::read(row, StoredRequisites::from_row)?;
                if !stored.needs_reseal(&self.sealing) {
                    report.current += 1;
                    continue;
                }
                let values = codec::params(stored.reseal_values(stored.resealed(&self.sealing)?));
                let changed = codec::execute(
                    &client,
                    codec::sql(&st::REQUISITES_RESEAL),
                    &codec::refs(&values),
                )
                .await?;
                if changed == 1 {
                    report.resealed += 1;
                } else {
                    report.changed_meanwhile += 1;
                }
            }
            match rows.last() {
                Some(row) if rows.len() == RESEAL_PAGE => {
                    after = codec::read(row, |c| c.text("id"))?;
                }
                _ => break,
            }
        }
        report.audit_records_masked = mask_audit_states(&client).await?;
        Ok(report)
    }

    /// Gives every payment written before schema 16 (a requisite, no `requisite_last4`) the
    /// last four digits of its requisite, and every one written before schema 25 the keyed
    /// digest of its requisite under the current key (`requisite_digest`, while a key is
    /// installed), a page of [`RESEAL_PAGE`] payments at a time, each row only while it still
    /// lacks them and has the same requisite (`payments-server payment backfill-last4`).
    /// Idempotent: a second run finds nothing but requisites too short.
    pub async fn backfill_requisite_last4(&self) -> Result<Last4Backfill, StoreError> {
        use payments_store_sql::statements as st;
        let client = self.client().await?;
        let mut report = Last4Backfill::default();
        let mut after = String::new();
        loop {
            let rows = codec::query(
                &client,
                codec::sql(&st::LAST4_MISSING_PAGE),
                &[&after, &codec::limit(RESEAL_PAGE)],
            )
            .await?;
            for row in &rows {
                let Some(values) = codec::read(row, |c| report.values(c, &self.sealing))? else {
                    continue;
                };
                let values = codec::params(values);
                let changed =
                    codec::execute(&client, codec::sql(&st::LAST4_SET), &codec::refs(&values))
                        .await?;
                report.count(changed);
            }
            match rows.last() {
                Some(row) if rows.len() == RESEAL_PAGE => {
                    after = codec::read(row, |c| c.text("id"))?;
                }
                _ => return Ok(report),
            }
        }
    }

    /// The global rate limiter over this store's pool.
    pub fn rate_limiter(&self) -> PgRateLimiter {
        PgRateLimiter::new(self.clone())
    }

    /// Closes the pool: connections are closed as they are returned; later calls fail as
    /// unavailable.
    pub fn close(&self) {
        self.pool.close();
    }
}

/// A pool failure: every kind of it means "not now" to the caller. A connection that could
/// not be opened or checked in time is a database that does not answer
/// ([`UnavailableCause::Unreachable`]); only the wait for a busy pool's free connection is
/// overload.
fn pool_error(e: PoolError) -> StoreError {
    match e {
        PoolError::Timeout(deadpool_postgres::TimeoutType::Wait) => UnavailableCause::Overloaded
            .error("no database connection came free within the pool's wait (every one busy)"),
        PoolError::Timeout(kind) => UnavailableCause::Unreachable.error(format_args!(
            "the database did not answer a new connection in time ({kind:?})"
        )),
        PoolError::Closed => UnavailableCause::Closed.error("the store is closed"),
        PoolError::Backend(e) => error::db(e),
        other => UnavailableCause::Other.error(format_args!("database connection: {other}")),
    }
}

/// Masks the requisites that audit records written by earlier builds copied in clear
/// ([`StoredAuditStates`]), reading [`RESEAL_PAGE`] records at a time; returns how many
/// records changed. Idempotent.
async fn mask_audit_states(client: &deadpool_postgres::Client) -> Result<usize, StoreError> {
    use payments_store_sql::statements as st;
    let mut masked = 0;
    let mut after = 0i64;
    loop {
        let rows = codec::query(
            client,
            codec::sql(&st::AUDIT_STATES_PAGE),
            &[&after, &codec::limit(RESEAL_PAGE)],
        )
        .await?;
        for row in &rows {
            let stored = codec::read(row, StoredAuditStates::from_row)?;
            if let Some(values) = stored.masked_values() {
                let values = codec::params(values);
                let sql = codec::sql(&st::AUDIT_STATES_MASK);
                masked += codec::execute(client, sql, &codec::refs(&values)).await? as usize;
            }
            after = stored.seq;
        }
        if rows.len() < RESEAL_PAGE {
            return Ok(masked);
        }
    }
}
