//! The store writes of one create (nonce + idempotent insert in one write, then the change to
//! `processing`) through the SQLite store at 1 and 16 concurrent callers, beside a raw rusqlite
//! autocommit insert loop (WAL, `synchronous=FULL`) as the reference for what one fsync'd
//! commit costs here.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

use criterion::{criterion_group, criterion_main, Criterion, Throughput};
use payments_core::payment::PaymentStatus;
use payments_core::store::{AdmitOutcome, NonceUse, PaymentChange, Store};
use payments_core::testing::contract::{changed, payment_id, project_id, sample_payment, T0};
use payments_store_sqlite::{SqliteOptions, SqliteStore};

/// The writes one create makes: the nonce, idempotency check and insert in one write
/// (`admit_create`), then the change to `processing`.
async fn create(store: &SqliteStore, n: u64) {
    let n128 = u128::from(n);
    let p = sample_payment(payment_id(n128), project_id(1), &format!("order-{n}"));
    let nonce = format!("nonce-{n}");
    let admitted = store
        .admit_create(
            Some(NonceUse {
                project: project_id(1),
                nonce: &nonce,
                now: T0,
                expires_at: T0 + Duration::from_secs(300),
            }),
            p.project_id,
            &p.merchant_payment_id,
            Some(&p),
            None,
        )
        .await
        .expect("admit_create");
    assert_eq!(admitted, AdmitOutcome::Inserted, "every create is new");
    store
        .commit_change(&PaymentChange {
            history: None,
            ledger: None,
            payment: changed(&p, PaymentStatus::Processing, T0),
            expected_version: 1,
            event: None,
            audit: None,
        })
        .await
        .expect("commit_change");
}

fn store_writes(c: &mut Criterion) {
    let dir = tempfile::tempdir().expect("a temporary directory");
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .expect("a runtime");
    let store = Arc::new(
        SqliteStore::open(dir.path().join("bench.db"), SqliteOptions::default()).expect("open"),
    );
    let next = Arc::new(AtomicU64::new(0));

    let mut group = c.benchmark_group("store_writes");
    group.sample_size(10);
    group.warm_up_time(Duration::from_secs(1));
    group.measurement_time(Duration::from_secs(8));

    group.throughput(Throughput::Elements(1));
    group.bench_function("create_1_caller", |b| {
        b.to_async(&runtime).iter(|| {
            let store = Arc::clone(&store);
            let n = next.fetch_add(1, Ordering::Relaxed);
            async move { create(&store, n).await }
        })
    });

    const CALLERS: u64 = 16;
    group.throughput(Throughput::Elements(CALLERS));
    group.bench_function("create_16_callers", |b| {
        b.to_async(&runtime).iter(|| {
            let store = Arc::clone(&store);
            let first = next.fetch_add(CALLERS, Ordering::Relaxed);
            async move {
                let tasks: Vec<_> = (first..first + CALLERS)
                    .map(|n| {
                        let store = Arc::clone(&store);
                        tokio::spawn(async move { create(&store, n).await })
                    })
                    .collect();
                for t in tasks {
                    t.await.expect("a create task");
                }
            }
        })
    });

    // The reference: one fsync'd autocommit transaction per row.
    let conn = rusqlite::Connection::open(dir.path().join("raw.db")).expect("open");
    let mode: String = conn
        .query_row("PRAGMA journal_mode = WAL", [], |r| r.get(0))
        .expect("journal_mode");
    assert_eq!(mode, "wal");
    conn.execute_batch(
        "PRAGMA synchronous = FULL; \
         CREATE TABLE t (id INTEGER PRIMARY KEY, body TEXT NOT NULL);",
    )
    .expect("setup");
    let mut stmt = conn
        .prepare("INSERT INTO t (body) VALUES (?1)")
        .expect("prepare");
    group.throughput(Throughput::Elements(1));
    group.bench_function("raw_autocommit_insert", |b| {
        b.iter(|| {
            stmt.execute(["a row of about the size of a small payment"])
                .expect("insert")
        })
    });
    group.finish();
    drop(stmt);
    store.close();
}

criterion_group!(benches, store_writes);
criterion_main!(benches);
