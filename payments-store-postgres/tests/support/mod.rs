//! The database the PostgreSQL tests run against: `DATABASE_URL`, with a fresh schema per
//! store so that tests (and checks) run in parallel without seeing each other's rows.
//!
//! Without `DATABASE_URL` the tests fail under CI (`CI=true`: a run that silently tested
//! nothing would pass) and skip locally, saying why.

#![allow(dead_code)]

use std::sync::atomic::{AtomicU64, Ordering};

use payments_store_postgres::{PgOptions, PgStore};

/// The base URL, or `None` (after printing why) when the tests must skip.
pub fn database_url() -> Option<String> {
    match std::env::var("DATABASE_URL") {
        Ok(url) if !url.is_empty() => Some(url),
        _ => {
            if std::env::var("CI").is_ok_and(|v| v == "true" || v == "1") {
                panic!(
                    "DATABASE_URL is not set: the PostgreSQL tests need a database \
                     (.ci/run starts one)"
                );
            }
            // Straight to the process's stderr: the test harness captures `eprintln!` of
            // passing tests, and a skip must be seen.
            use std::io::Write as _;
            let _ = writeln!(
                std::io::stderr(),
                "SKIPPED: DATABASE_URL is not set, so this PostgreSQL test did not run \
                 (set it to a database the tests may create schemas in, or run .ci/run)"
            );
            None
        }
    }
}

/// A URL whose connections use a new, empty schema (through the `search_path` option).
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

/// Small pools: many stores exist at once in these tests.
pub fn options() -> PgOptions {
    PgOptions {
        pool_size: 4,
        ..PgOptions::default()
    }
}

/// A store on a fresh schema.
pub async fn fresh_store(base: &str) -> PgStore {
    let url = fresh_schema(base).await;
    PgStore::connect(&url, options())
        .await
        .expect("connect and migrate")
}

/// `n` stores with separate pools on one fresh schema (N nodes on one database).
pub async fn fresh_nodes(base: &str, n: usize) -> Vec<PgStore> {
    let url = fresh_schema(base).await;
    let mut stores = Vec::with_capacity(n);
    for _ in 0..n {
        stores.push(
            PgStore::connect(&url, options())
                .await
                .expect("connect and migrate"),
        );
    }
    stores
}
