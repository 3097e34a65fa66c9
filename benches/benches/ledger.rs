//! What the ledger costs a payment's writes, measured in one run: the completion the service
//! commits (`processing -> completed` with its callback event and audit record) without and
//! with its ledger credit, at 1 and 16 concurrent callers, all of one project, and with the
//! credit at 16 callers spread over 16 projects (what one project's balance row costs: the
//! same figure as one project's when the row serialises nothing), on SQLite and (with
//! `DATABASE_URL`) PostgreSQL; and a create's writes (`admit_create` and the change to `processing`), which
//! carry no ledger entry, before and after a run of completions (the create path is the same
//! code with and without the ledger: this shows the tables it no longer touches do not slow
//! it). Each measured completion completes a payment inserted before the clock starts.
//!
//!   cargo bench -p payments-benches --bench ledger
//!   DATABASE_URL=postgres://... cargo bench -p payments-benches --bench ledger

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use criterion::{criterion_group, criterion_main, BenchmarkId, Criterion, Throughput};
use payments_core::ledger::{self, Balance};
use payments_core::payment::{Payment, PaymentStatus};
use payments_core::store::{AdmitOutcome, NonceUse, PaymentChange, Store};
use payments_core::testing::contract::{
    changed, entry_id, event_id, payment_id, priced_payment, project_id, sample_audit,
    sample_event, T0,
};
use payments_store_sqlite::{SqliteOptions, SqliteStore};

/// Payment numbers, unique across the whole run (every store, every group).
static NEXT: AtomicU64 = AtomicU64::new(1);

fn fresh(n: usize) -> Vec<u64> {
    let first = NEXT.fetch_add(n as u64, Ordering::Relaxed);
    (first..first + n as u64).collect()
}

/// A `processing` payment of project 1, ready to complete.
fn processing(n: u64) -> Payment {
    processing_of(n, 1)
}

/// A `processing` payment of one of `projects` projects (by its number), ready to complete.
fn processing_of(n: u64, projects: u64) -> Payment {
    priced_payment(
        payment_id(u128::from(n)),
        project_id(u128::from(1 + n % projects)),
        &format!("order-{n}"),
    )
}

/// The change the service commits for an operator's confirm: the completed payment, its
/// callback event, its audit record and, `with_ledger`, its credit.
fn completion(p: &Payment, n: u64, with_ledger: bool) -> PaymentChange {
    let done = changed(p, PaymentStatus::Completed, T0 + Duration::from_secs(1));
    let ledger = if with_ledger {
        ledger::payment_posting(p, &done, || entry_id(u128::from(n)))
    } else {
        None
    };
    PaymentChange {
        event: Some(sample_event(
            &done,
            event_id(u128::from(n)),
            done.updated_at,
        )),
        audit: Some(sample_audit(done.updated_at, "payment.confirm", "bench")),
        payment: done,
        expected_version: p.version,
        ledger,
        history: None,
    }
}

/// A create's writes: the nonce and the insert in one write, then the change to processing.
async fn create<S: Store + ?Sized>(store: &S, n: u64) {
    let mut p = processing(n);
    p.status = PaymentStatus::Created;
    p.version = 1;
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
    assert_eq!(admitted, AdmitOutcome::Inserted);
    let mut issued = processing(n);
    issued.version = 2;
    store
        .commit_change(&PaymentChange {
            payment: issued,
            expected_version: 1,
            event: None,
            audit: None,
            ledger: None,
            history: None,
        })
        .await
        .expect("processing");
}

/// Completes `iters` payments inserted first (not timed), `callers` at a time; the time of
/// the completions alone.
async fn complete_many(
    store: &Arc<dyn Store>,
    iters: u64,
    callers: u64,
    (with_ledger, projects): (bool, u64),
) -> Duration {
    let numbers = fresh(usize::try_from(iters * callers).expect("fits"));
    for n in &numbers {
        store
            .insert_payment(&processing_of(*n, projects))
            .await
            .expect("insert");
    }
    let started = Instant::now();
    for chunk in numbers.chunks(usize::try_from(callers).expect("fits")) {
        let tasks: Vec<_> = chunk
            .iter()
            .map(|&n| {
                let store = Arc::clone(store);
                tokio::spawn(async move {
                    store
                        .commit_change(&completion(&processing_of(n, projects), n, with_ledger))
                        .await
                        .expect("completion");
                })
            })
            .collect();
        for t in tasks {
            t.await.expect("a completion");
        }
    }
    started.elapsed()
}

fn measure(
    c: &mut Criterion,
    engine: &str,
    runtime: &tokio::runtime::Runtime,
    store: Arc<dyn Store>,
) {
    let mut group = c.benchmark_group(format!("ledger_{engine}"));
    group.sample_size(10);
    group.warm_up_time(Duration::from_secs(1));
    group.measurement_time(Duration::from_secs(6));
    let creates = |group: &mut criterion::BenchmarkGroup<'_, _>, when: &str| {
        group.throughput(Throughput::Elements(1));
        group.bench_function(format!("create_{when}"), |b| {
            b.to_async(runtime).iter(|| {
                let store = Arc::clone(&store);
                let n = fresh(1)[0];
                async move { create(&*store, n).await }
            })
        });
    };
    creates(&mut group, "before_completions");
    for with_ledger in [false, true] {
        for callers in [1u64, 16] {
            group.throughput(Throughput::Elements(callers));
            let name = if with_ledger {
                "with_credit"
            } else {
                "without_credit"
            };
            group.bench_with_input(
                BenchmarkId::new(format!("completion_{callers}_callers"), name),
                &with_ledger,
                |b, &with_ledger| {
                    b.to_async(runtime).iter_custom(|iters| {
                        let store = Arc::clone(&store);
                        async move { complete_many(&store, iters, callers, (with_ledger, 1)).await }
                    })
                },
            );
        }
        if with_ledger {
            group.throughput(Throughput::Elements(16));
            group.bench_function("completion_16_callers/with_credit_16_projects", |b| {
                b.to_async(runtime).iter_custom(|iters| {
                    let store = Arc::clone(&store);
                    async move { complete_many(&store, iters, 16, (true, 16)).await }
                })
            });
        }
        // The creates after the completions without credits, then after those with them: a
        // create slower after completions with credits than after those without would be
        // the ledger's; slower after both, the database's growth.
        creates(
            &mut group,
            if with_ledger {
                "after_completions_with_credits"
            } else {
                "after_completions_without_credits"
            },
        );
    }
    group.finish();
    // The credits are there, one per completion with its credit; the creates wrote none.
    let balance = runtime
        .block_on(store.balance(project_id(1)))
        .expect("balance");
    assert_ne!(balance, Balance::empty(project_id(1)));
    eprintln!(
        "{engine}: {} ledger entries, balance {} USDT",
        balance.entries, balance.balance
    );
}

fn ledger_costs(c: &mut Criterion) {
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .expect("a runtime");
    let dir = tempfile::tempdir().expect("a temporary directory");
    let sqlite =
        SqliteStore::open(dir.path().join("bench.db"), SqliteOptions::default()).expect("open");
    let sqlite: Arc<dyn Store> = Arc::new(sqlite);
    measure(c, "sqlite", &runtime, Arc::clone(&sqlite));
    if let Ok(url) = std::env::var("DATABASE_URL") {
        let store = runtime.block_on(async {
            let url = payments_store_postgres::testing::fresh_schema(&url).await;
            payments_store_postgres::PgStore::connect(
                &url,
                payments_store_postgres::PgOptions::default(),
            )
            .await
            .expect("connect")
        });
        measure(c, "postgres", &runtime, Arc::new(store));
    } else {
        eprintln!("DATABASE_URL not set: PostgreSQL left out");
    }
}

criterion_group!(benches, ledger_costs);
criterion_main!(benches);
