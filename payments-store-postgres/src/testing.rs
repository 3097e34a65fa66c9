//! Test support (feature `testing`): the database the PostgreSQL tests of every crate run
//! against, a fresh schema per test, and the way back to the first schema for upgrade tests.
//! Not for production code.

use std::sync::atomic::{AtomicU64, Ordering};

/// Why a PostgreSQL test is ignored in a plain `cargo test`: the text of its `#[ignore]`.
/// `cargo test -- --include-ignored` (what `.ci/run` runs) runs it, with `DATABASE_URL` set.
pub const NEEDS_DATABASE: &str = "needs PostgreSQL: DATABASE_URL";

/// `DATABASE_URL`: the database a PostgreSQL test creates its schemas in. Such a test is
/// `#[ignore = "needs PostgreSQL: DATABASE_URL"]`, so it runs only when asked for (`cargo test
/// -- --include-ignored`, or `--ignored`); asked for without a database, it fails here, saying
/// what is missing, instead of passing without having run.
///
/// # Panics
/// When `DATABASE_URL` is not set or empty.
pub fn database_url() -> String {
    match std::env::var("DATABASE_URL") {
        Ok(url) if !url.is_empty() => url,
        _ => panic!(
            "DATABASE_URL is not set: this PostgreSQL test needs a database it may create \
             schemas in (DATABASE_URL=postgres://user@host:port/db; .ci/run starts one). \
             Without one, leave out --include-ignored and the test is reported as ignored."
        ),
    }
}

/// A URL whose connections use a new, empty schema of the database at `base` (through the
/// `search_path` option), so that tests run in parallel without seeing each other's rows.
pub async fn fresh_schema(base: &str) -> String {
    static N: AtomicU64 = AtomicU64::new(0);
    let name = format!(
        "t_{}_{}_{}",
        std::process::id(),
        N.fetch_add(1, Ordering::Relaxed),
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .expect("after 1970")
            .subsec_nanos()
    );
    let (client, connection) = tokio_postgres::connect(base, tokio_postgres::NoTls)
        .await
        .expect("connect to DATABASE_URL");
    let task = tokio::spawn(connection);
    client
        .batch_execute(&format!("CREATE SCHEMA {name}"))
        .await
        .expect("create a schema");
    drop(client);
    let _ = task.await;
    let sep = if base.contains('?') { '&' } else { '?' };
    format!("{base}{sep}options=-c%20search_path%3D{name}")
}

/// Takes a migrated schema back to version 1, the first release's: what every later
/// migration adds is dropped. Every new migration extends it (the upgrade tests of this crate
/// and of the server run it, then open the store or run `payments-server migrate`).
pub const DOWNGRADE_TO_VERSION_1: &str = "
    ALTER TABLE payments DROP COLUMN metadata;
    DROP INDEX payments_project_status, payments_project_method, payments_project_flow,
        payments_project_mpid;
    DROP TABLE payment_pages;
    ALTER TABLE projects DROP COLUMN payer_page, DROP COLUMN payer_language;
    DROP TABLE cabinet_users, cabinet_recovery_codes, cabinet_sessions, cabinet_invites,
        cabinet_failures, cabinet_audit, token_use;
    DROP INDEX payments_project_created, outbox_events_project_created;
    DROP TRIGGER payments_count_insert ON payments;
    DROP TRIGGER payments_count_update ON payments;
    DROP TRIGGER payments_count_delete ON payments;
    DROP FUNCTION payments_count(), payment_status_count_add(TEXT, BIGINT);
    DROP TABLE payment_status_counts, operator_tokens;
    DROP INDEX outbox_events_failed, outbox_events_failed_payment,
        outbox_events_pending_age, outbox_events_finished, audit_at;
    ALTER TABLE outbox_events DROP COLUMN resent_by;
    ALTER TABLE delivery_attempts DROP COLUMN response_excerpt;
    DELETE FROM schema_migrations WHERE version > 1;";
