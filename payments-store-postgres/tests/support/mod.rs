//! The database the PostgreSQL tests run against (`DATABASE_URL`, from the crate's `testing`
//! feature), with a fresh schema per store so that tests (and checks) run in parallel without
//! seeing each other's rows.

#![allow(dead_code)]

use std::sync::Arc;

use payments_core::testing::SeededRandom;
use payments_store_postgres::{PgOptions, PgStore, SealWrites};

pub use payments_store_postgres::testing::{database_url, fresh_schema};

/// Small pools: many stores exist at once in these tests.
pub fn options() -> PgOptions {
    PgOptions {
        pool_size: 4,
        ..PgOptions::default()
    }
}

/// A store on a fresh schema, its requisites sealed as a server runs it.
pub async fn fresh_store(base: &str) -> PgStore {
    let url = fresh_schema(base).await;
    sealed(
        PgStore::connect(&url, options())
            .await
            .expect("connect and migrate"),
    )
}

/// `store` with the test key installed (the same for every node of a test).
pub fn sealed(store: PgStore) -> PgStore {
    let keys = payments_core::testing::sealing_keys(3, &[]);
    store
        .requisite_sealing()
        .install(keys, Arc::new(SeededRandom::new(3)), SealWrites::Sealed)
        .expect("installed once");
    store
}

/// `n` stores with separate pools on one fresh schema (N nodes on one database).
pub async fn fresh_nodes(base: &str, n: usize) -> Vec<PgStore> {
    let url = fresh_schema(base).await;
    let mut stores = Vec::with_capacity(n);
    for _ in 0..n {
        stores.push(sealed(
            PgStore::connect(&url, options())
                .await
                .expect("connect and migrate"),
        ));
    }
    stores
}
