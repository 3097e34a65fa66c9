//! The database the PostgreSQL tests run against (`DATABASE_URL`, from the crate's `testing`
//! feature), with a fresh schema per store so that tests (and checks) run in parallel without
//! seeing each other's rows.

#![allow(dead_code)]

use payments_store_postgres::{PgOptions, PgStore};

pub use payments_store_postgres::testing::{database_url, fresh_schema};

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
