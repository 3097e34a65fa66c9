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

/// The metadata index's fill (schema 20): a test or benchmark that copies payments in SQL
/// with the triggers off (`session_replication_role = replica`, to skip the status counts')
/// runs it after, so that the metadata filter finds the copies.
pub const METADATA_FILL: &str = payments_store_sql::schema::METADATA_FILL_POSTGRES;

/// Takes a migrated schema back to version 1, the first release's: what every later
/// migration adds is dropped. Every new migration extends it (the upgrade tests of this crate
/// and of the server run it, then open the store or run `payments-server migrate`).
pub const DOWNGRADE_TO_VERSION_1: &str = "
    DROP TRIGGER payments_merchant_payment_id_key ON payments;
    DROP FUNCTION payments_merchant_payment_id_key();
    DROP INDEX payments_project_mpid_key;
    ALTER TABLE payments DROP COLUMN merchant_payment_id_key, DROP COLUMN requisite_digest;
    DROP TRIGGER payments_amount_key_insert ON payments;
    DROP TRIGGER payments_amount_key_update ON payments;
    DROP FUNCTION payments_amount_key();
    DROP INDEX payments_project_amount_key; ALTER TABLE payments DROP COLUMN amount_key;
    DROP TABLE appeal_receipts, appeals;
    DROP TABLE payment_history;
    DROP TRIGGER payments_metadata_insert ON payments;
    DROP FUNCTION payments_metadata_insert(); DROP TABLE payment_metadata;
    DROP INDEX outbox_events_project_state;
    ALTER TABLE tokens DROP COLUMN expires_at, DROP COLUMN name;
    DROP TABLE request_log_writes; DROP TABLE request_log;
    DROP INDEX payments_project_last4;
    ALTER TABLE payments DROP COLUMN requisite_last4;
    ALTER TABLE projects DROP COLUMN return_url;
    DROP TABLE cabinet_slots;
    DROP TABLE ledger_entries, ledger_balances;
    ALTER TABLE payments DROP COLUMN route_reason; ALTER TABLE payments DROP COLUMN provider;
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

/// The certificates of the test database's TLS ([`tls_database`]).
#[derive(Debug, Clone)]
pub struct TestTls {
    /// The CA that signed the server's certificate (for `sslrootcert`).
    pub ca: std::path::PathBuf,
    /// A CA that signed nothing the server has: trusting it alone, a connection must fail.
    pub other_ca: std::path::PathBuf,
}

/// Turns TLS on in the test database's server, with a certificate for `127.0.0.1` (its IP
/// address only: a connection to `localhost` does not match it) signed by a test CA, and
/// answers the CA files. The server's data dir must be writable by the test (`.ci/run` sets
/// `PAYMENTS_TEST_PG_DATA` to it): the files are written there, owned by the server's user,
/// and `ssl` is turned on with `ALTER SYSTEM` and a reload, so a later restart of that server
/// keeps it. Connections without TLS keep working. Files from an earlier run are reused.
///
/// # Panics
/// Without `PAYMENTS_TEST_PG_DATA`, or when the server does not turn TLS on.
pub async fn tls_database(base: &str) -> TestTls {
    use std::os::unix::fs::{MetadataExt, PermissionsExt};
    static ONCE: tokio::sync::OnceCell<TestTls> = tokio::sync::OnceCell::const_new();
    ONCE.get_or_init(|| async {
        let data = std::path::PathBuf::from(std::env::var("PAYMENTS_TEST_PG_DATA").expect(
            "PAYMENTS_TEST_PG_DATA is not set: the TLS test writes the server's certificate \
             into the test database's data dir (.ci/run sets it)",
        ));
        let owner = std::fs::metadata(&data).expect("the database's data dir");
        let file = |name: &str| data.join(format!("payments-test-{name}"));
        let tls = TestTls {
            ca: file("ca.pem"),
            other_ca: file("other-ca.pem"),
        };
        let (cert, key) = (file("server.crt"), file("server.key"));
        if ![&tls.ca, &tls.other_ca, &cert, &key]
            .iter()
            .all(|p| p.exists())
        {
            let ca_key = rcgen::KeyPair::generate().expect("a CA key");
            let mut ca = rcgen::CertificateParams::new(Vec::<String>::new()).expect("CA params");
            ca.is_ca = rcgen::IsCa::Ca(rcgen::BasicConstraints::Unconstrained);
            ca.distinguished_name
                .push(rcgen::DnType::CommonName, "payments test CA");
            let ca_cert = ca.self_signed(&ca_key).expect("the CA certificate");
            let other_key = rcgen::KeyPair::generate().expect("a CA key");
            let mut other = rcgen::CertificateParams::new(Vec::<String>::new()).expect("params");
            other.is_ca = rcgen::IsCa::Ca(rcgen::BasicConstraints::Unconstrained);
            let other_cert = other.self_signed(&other_key).expect("another CA");
            let server_key = rcgen::KeyPair::generate().expect("a server key");
            let server = rcgen::CertificateParams::new(vec!["127.0.0.1".to_string()])
                .expect("server params")
                .signed_by(&server_key, &ca_cert, &ca_key)
                .expect("the server certificate");
            for (path, text, mode) in [
                (&tls.ca, ca_cert.pem(), 0o644),
                (&tls.other_ca, other_cert.pem(), 0o644),
                (&cert, server.pem(), 0o644),
                (&key, server_key.serialize_pem(), 0o600),
            ] {
                std::fs::write(path, text).expect("write into the database's data dir");
                std::os::unix::fs::chown(path, Some(owner.uid()), Some(owner.gid()))
                    .expect("give the file to the database server's user");
                std::fs::set_permissions(path, std::fs::Permissions::from_mode(mode))
                    .expect("set the file's mode");
            }
        }
        let (client, connection) = tokio_postgres::connect(base, tokio_postgres::NoTls)
            .await
            .expect("connect to DATABASE_URL");
        tokio::spawn(connection);
        // One statement each: ALTER SYSTEM refuses to run in a transaction block.
        for statement in [
            format!("ALTER SYSTEM SET ssl_cert_file = '{}'", cert.display()),
            format!("ALTER SYSTEM SET ssl_key_file = '{}'", key.display()),
            "ALTER SYSTEM SET ssl = on".to_string(),
            "SELECT pg_reload_conf()".to_string(),
        ] {
            client.batch_execute(&statement).await.expect("turn TLS on");
        }
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
        loop {
            let (c, connection) = tokio_postgres::connect(base, tokio_postgres::NoTls)
                .await
                .expect("connect to DATABASE_URL");
            tokio::spawn(connection);
            let on: String = c.query_one("SHOW ssl", &[]).await.expect("SHOW ssl").get(0);
            if on == "on" {
                break;
            }
            assert!(
                std::time::Instant::now() < deadline,
                "the database server did not turn TLS on (its log says why)"
            );
            tokio::time::sleep(std::time::Duration::from_millis(100)).await;
        }
        tls
    })
    .await
    .clone()
}
