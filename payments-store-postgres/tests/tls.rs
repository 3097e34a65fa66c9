//! TLS to PostgreSQL (`sslmode=verify-full`, `sslrootcert`), against the test database's
//! server with a certificate for 127.0.0.1 signed by a test CA (`testing::tls_database`): the
//! store, `migrate` and `inspect` connect over TLS only to a server the CA vouches for, under
//! the name the URL uses; another CA, another name and the modes that identify no one are
//! refused.

mod support;

use payments_core::store::{PaymentStore, Store};
use payments_core::testing::contract::{full_payment, payment_id, project_id};
use payments_store_postgres::testing::tls_database;
use payments_store_postgres::{inspect, migrate, PgStore, SCHEMA_VERSION};

/// `url` with the TLS parameters, and an application name to find its sessions by.
fn with_tls(url: &str, ca: &std::path::Path, name: &str) -> String {
    format!(
        "{url}&sslmode=verify-full&sslrootcert={}&application_name={name}",
        ca.display()
    )
}

/// `(sessions over TLS, sessions in clear)` of the application `name`, as the server sees them.
async fn sessions(base: &str, name: &str) -> (i64, i64) {
    let (client, connection) = tokio_postgres::connect(base, tokio_postgres::NoTls)
        .await
        .expect("connect");
    tokio::spawn(connection);
    let row = client
        .query_one(
            "SELECT count(*) FILTER (WHERE s.ssl), count(*) FILTER (WHERE NOT s.ssl) \
             FROM pg_stat_ssl s JOIN pg_stat_activity a USING (pid) \
             WHERE a.application_name = $1",
            &[&name],
        )
        .await
        .expect("the sessions");
    (row.get(0), row.get(1))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs PostgreSQL: DATABASE_URL"]
async fn the_store_connects_over_verified_tls_only() {
    let base = support::database_url();
    let tls = tls_database(&base).await;
    let url = support::fresh_schema(&base).await;

    let good = with_tls(&url, &tls.ca, "payments-tls-good");
    assert_eq!(
        migrate(&good, std::time::Duration::from_secs(10))
            .await
            .unwrap()
            .1,
        SCHEMA_VERSION
    );
    assert_eq!(inspect(&good).await.unwrap().schema_version, SCHEMA_VERSION);
    let store = PgStore::connect(&good, support::options()).await.unwrap();
    let p = full_payment(payment_id(1), project_id(1), "over-tls");
    store.insert_payment(&p).await.unwrap();
    assert_eq!(store.payment(payment_id(1)).await.unwrap(), Some(p));
    let (tls_sessions, clear) = sessions(&base, "payments-tls-good").await;
    assert!(tls_sessions >= 1, "the pool's connections use TLS");
    assert_eq!(clear, 0, "and none is in clear");
    store.close();

    // A CA that did not sign the server's certificate.
    let other = with_tls(&url, &tls.other_ca, "payments-tls-other");
    let e = PgStore::connect(&other, support::options())
        .await
        .expect_err("an unknown issuer is refused")
        .to_string();
    assert!(e.contains("certificate"), "{e}");
    assert!(inspect(&other).await.is_err());

    // The right CA, but a name the certificate does not carry (it names 127.0.0.1 only).
    let by_name = with_tls(
        &url.replacen("127.0.0.1", "localhost", 1),
        &tls.ca,
        "payments-tls-name",
    );
    assert!(by_name.contains("@localhost"), "{by_name}");
    let e = PgStore::connect(&by_name, support::options())
        .await
        .expect_err("another name is refused")
        .to_string();
    assert!(e.contains("certificate"), "{e}");
    assert_eq!(sessions(&base, "payments-tls-other").await, (0, 0));
    assert_eq!(sessions(&base, "payments-tls-name").await, (0, 0));

    // Modes that would accept an unidentified server are refused before any connection.
    for mode in ["require", "verify-ca"] {
        let url = format!("{url}&sslmode={mode}&sslrootcert={}", tls.ca.display());
        let e = PgStore::connect(&url, support::options())
            .await
            .expect_err("refused")
            .to_string();
        assert!(e.contains("verify-full"), "{mode}: {e}");
    }
}
