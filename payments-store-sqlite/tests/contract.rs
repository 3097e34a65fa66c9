//! The core's store contract suite against SQLite: the same suite the memory store passes.

use std::path::PathBuf;
use std::sync::atomic::{AtomicUsize, Ordering};

use std::sync::Arc;

use payments_core::testing::{contract, SeededRandom};
use payments_store_sqlite::{SealWrites, SqliteOptions, SqliteStore};

/// Opens (creating and migrating) the database at `file`: blocking work, handed to the
/// blocking pool as an async caller does.
/// Requisites are sealed (as a server runs it), so every check also round-trips them through
/// the sealing.
async fn open(file: PathBuf) -> SqliteStore {
    let store =
        tokio::task::spawn_blocking(move || SqliteStore::open(file, SqliteOptions::default()))
            .await
            .expect("opening does not panic")
            .expect("open the database");
    let keys = payments_core::testing::sealing_keys(3, &[]);
    store
        .requisite_sealing()
        .install(keys, Arc::new(SeededRandom::new(3)), SealWrites::Sealed)
        .expect("installed once");
    store
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sqlite_meets_the_store_contract() {
    let dir = tempfile::tempdir().expect("a temporary directory");
    let n = AtomicUsize::new(0);
    // A fresh database file for every check.
    contract::run_all_async(|| {
        let file = dir
            .path()
            .join(format!("check-{}.db", n.fetch_add(1, Ordering::Relaxed)));
        open(file)
    })
    .await;
    assert_eq!(
        n.load(Ordering::Relaxed),
        contract::checks::<SqliteStore>().len() + contract::shared_checks::<SqliteStore>().len()
    );
}

/// The checks of several handles with two stores on one file: the server's and, say, a
/// `payments-server` command's, each with its own writer and readers.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_stores_on_one_file_meet_the_shared_checks() {
    let dir = tempfile::tempdir().expect("a temporary directory");
    let n = AtomicUsize::new(0);
    contract::run_shared_async(|| {
        let file = dir
            .path()
            .join(format!("shared-{}.db", n.fetch_add(1, Ordering::Relaxed)));
        async move { vec![open(file.clone()).await, open(file).await] }
    })
    .await;
    assert_eq!(
        n.load(Ordering::Relaxed),
        contract::shared_checks::<SqliteStore>().len()
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sqlite_meets_the_cabinet_store_contract() {
    let dir = tempfile::tempdir().expect("a temporary directory");
    let n = AtomicUsize::new(0);
    payments_cabinet::testing::contract::run_cabinet_async(|| {
        let file = dir
            .path()
            .join(format!("cabinet-{}.db", n.fetch_add(1, Ordering::Relaxed)));
        open(file)
    })
    .await;
    // One store per check.
    assert_eq!(
        n.load(Ordering::Relaxed),
        payments_cabinet::testing::contract::cabinet_checks::<SqliteStore>().len()
    );
}
