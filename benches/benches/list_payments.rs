//! `GET /api/v1/payments` at scale: the store's page query (`find_payments`, what the list
//! endpoint runs) over one project of N payments, on SQLite and, with `DATABASE_URL`, on
//! PostgreSQL. One payment is inserted through the store; the other N - 1 are copied from it
//! in SQL with their own id, merchant payment id, creation time (10 ms apart), status (1 %
//! `completed`), method (half `card_transfer`), flow (0.1 % `project_test`) and amount (one of
//! 100, `100.50` to `199.50`). Then each kind
//! of page (limit 50) is read `LIST_ROUNDS` times by one caller: p50, p99 and pages a second.
//! On PostgreSQL the copies are inserted with triggers off (`session_replication_role =
//! replica`, which needs a superuser): the status counters' trigger, row by row, made a
//! million-row seed take over ten minutes, and the list does not read the counters. The
//! metadata index (`payment_metadata`, written by its own trigger) is then filled in one
//! statement, as migration 20 fills it for the payments it finds, and both tables are
//! vacuumed, as autovacuum leaves a table of old payments (its visibility map lets an
//! index-only scan skip the table).
//!
//! ```sh
//! LIST_PAYMENTS=5000000 cargo bench -p payments-benches --bench list_payments -- --bench
//! ```
//!
//! Without `--bench` (as `cargo test --benches` runs it) it seeds 2,000 payments and reads each
//! page once: a smoke run that checks the answers, not the speed.

use std::time::{Duration, Instant};

use payments_core::totals::TOTALS_SCAN;

use hdrhistogram::Histogram;
use payments_core::amount::Amount;
use payments_core::payment::{Flow, PaymentMethod, PaymentStatus};
use payments_core::store::{PaymentQuery, Store};
use payments_core::testing::contract::{payment_id, project_id, sample_payment, T0};
use payments_core::testing::Matches;
use payments_core::{PaymentId, Timestamp};
use payments_store_sqlite::{SqliteOptions, SqliteStore};

const LIMIT: usize = 50;

/// The payments' creation times: `T0 + i * 10 ms`.
fn created(i: u64) -> Timestamp {
    T0 + Duration::from_millis(i * 10)
}

/// The column expressions that make payment `n.i` from the template row `t`, for `dialect`
/// (`sqlite` or `postgres`).
fn expression(column: &str, postgres: bool) -> String {
    let base = T0.unix_millis();
    match column {
        "id" if postgres => {
            "lpad(to_hex(n.i), 8, '0') || '-0000-7000-8000-' || lpad(to_hex(n.i), 12, '0')".into()
        }
        "id" => "printf('%08x-0000-7000-8000-%012x', n.i, n.i)".into(),
        // The id and its key (schema 25, lower case: the same text here).
        "merchant_payment_id" | "merchant_payment_id_key" if postgres => {
            "'order-' || lpad(n.i::text, 8, '0')".into()
        }
        "merchant_payment_id" | "merchant_payment_id_key" => "printf('order-%08d', n.i)".into(),
        "created_at" | "updated_at" => format!("{base} + n.i * 10"),
        "status" => "CASE WHEN n.i % 100 = 0 THEN 'completed' ELSE 'processing' END".into(),
        "payment_method" => "CASE WHEN n.i % 2 = 0 THEN 'sbp' ELSE 'card_transfer' END".into(),
        "flow" => "CASE WHEN n.i % 1000 = 0 THEN 'project_test' ELSE 'runtime_live' END".into(),
        // One of 100 amounts, written with two decimals (`100.50` to `199.50`), keyed by
        // their shortest text as the store keys them (schema 23).
        "amount" if postgres => "(100 + n.i % 100)::text || '.50'".into(),
        "amount" => "(100 + n.i % 100) || '.50'".into(),
        "amount_key" if postgres => "(100 + n.i % 100)::text || '.5'".into(),
        "amount_key" => "(100 + n.i % 100) || '.5'".into(),
        // A shop of 100 in each payment's metadata: `{"shop":"s<i % 100>"}`.
        "metadata" if postgres => "'{\"shop\":\"s' || (n.i % 100)::text || '\"}'".into(),
        "metadata" => "'{\"shop\":\"s' || (n.i % 100) || '\"}'".into(),
        other => format!("t.{other}"),
    }
}

fn insert_copies(columns: &[String], n: u64, template: PaymentId, postgres: bool) -> String {
    let list = columns.join(", ");
    let exprs: Vec<String> = columns.iter().map(|c| expression(c, postgres)).collect();
    let exprs = exprs.join(", ");
    if postgres {
        format!(
            "INSERT INTO payments ({list}) SELECT {exprs} \
             FROM generate_series(1, {n}) AS n(i), payments t WHERE t.id = '{template}'"
        )
    } else {
        format!(
            "WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n WHERE i < {n}) \
             INSERT INTO payments ({list}) SELECT {exprs} FROM n, payments t \
             WHERE t.id = '{template}'"
        )
    }
}

/// The template payment: number 0, the newest-but-oldest (created at `T0`).
fn template() -> payments_core::payment::Payment {
    let mut p = sample_payment(payment_id(u128::MAX >> 8), project_id(1), "template");
    p.created_at = T0;
    p.updated_at = T0;
    p
}

/// One of the 100 amounts the seed writes (`1xx.50`), asked in its shortest form.
fn one_of_the_amounts(r: u64) -> Amount {
    Amount::parse(&format!("{}.5", 100 + r % 100)).expect("an amount")
}

/// A kind of page: its name, and its query in round `r`.
type Page = (&'static str, Box<dyn Fn(u64) -> PaymentQuery>);

/// The kinds of page measured.
fn pages(n: u64) -> Vec<Page> {
    let q = || PaymentQuery::new(project_id(1), LIMIT);
    vec![
        ("first page, no filter", Box::new(move |_| q())),
        (
            "deep page (cursor in the middle)",
            Box::new(move |r| PaymentQuery {
                before: Some((created(n / 2 + r), payment_id(0))),
                ..q()
            }),
        ),
        (
            "status=completed (1 %)",
            Box::new(move |_| PaymentQuery {
                status: Some(PaymentStatus::Completed),
                ..q()
            }),
        ),
        (
            "payment_method=card_transfer (50 %)",
            Box::new(move |_| PaymentQuery {
                payment_method: Some(PaymentMethod::CardTransfer),
                ..q()
            }),
        ),
        (
            "flow=project_test (0.1 %)",
            Box::new(move |_| PaymentQuery {
                flow: Some(Flow::ProjectTest),
                ..q()
            }),
        ),
        (
            "merchant_payment_id (exact)",
            Box::new(move |r| PaymentQuery {
                merchant_payment_id: payments_core::payment::MerchantPaymentId::parse(&format!(
                    "order-{:08}",
                    1 + (r * 7919) % n
                )),
                ..q()
            }),
        ),
        (
            "merchant_payment_id_prefix (1,000 ids)",
            Box::new(move |r| PaymentQuery {
                merchant_payment_id_prefix: Some(format!(
                    "order-{:05}",
                    (r * 31) % (n / 1000).max(1)
                )),
                ..q()
            }),
        ),
        (
            "prefix, 100,000 ids, the newest",
            Box::new(move |_| PaymentQuery {
                merchant_payment_id_prefix: Some(format!("order-{:08}", n - 1)[..9].to_string()),
                ..q()
            }),
        ),
        (
            "prefix, 100,000 ids, the oldest",
            Box::new(move |_| PaymentQuery {
                merchant_payment_id_prefix: Some("order-000".to_string()),
                ..q()
            }),
        ),
        (
            "prefix in any case, 100,000, the oldest",
            Box::new(move |_| PaymentQuery {
                merchant_payment_id_prefix_any_case: Some("ORDER-000".to_lowercase()),
                ..q()
            }),
        ),
        (
            "prefix, 100,000, the oldest, deep page",
            Box::new(move |r| PaymentQuery {
                merchant_payment_id_prefix: Some("order-000".to_string()),
                before: Some((created(50_000 + r), payment_id(0))),
                ..q()
            }),
        ),
        (
            "amount (1 %), asked as 1xx.5",
            Box::new(move |r| PaymentQuery {
                amount: Some(one_of_the_amounts(r)),
                ..q()
            }),
        ),
        (
            "amount, a value no payment has",
            Box::new(move |_| PaymentQuery {
                amount: Some(Amount::parse("99.99").expect("an amount")),
                ..q()
            }),
        ),
        (
            "search: amount or prefix, 4 projects",
            Box::new(move |r| {
                // The cabinet's search box with digits in it over a merchant's 4 projects:
                // each project by the amount and by the prefix, in one statement.
                let prefix = format!("order-{:05}", (r * 31) % (n / 1000).max(1));
                let branch = |project, by_amount: bool| PaymentQuery {
                    amount: by_amount.then(|| one_of_the_amounts(r)),
                    merchant_payment_id_prefix: (!by_amount).then(|| prefix.clone()),
                    ..PaymentQuery::new(project_id(project), LIMIT)
                };
                let mut union: Vec<_> = (1..=4).map(|p| branch(p, false)).collect();
                union.extend((2..=4).map(|p| branch(p, true)));
                PaymentQuery {
                    union,
                    ..branch(1, true)
                }
            }),
        ),
        (
            "metadata[shop] (1 %)",
            Box::new(move |r| PaymentQuery {
                metadata: Some(("shop".into(), format!("s{}", r % 100))),
                ..q()
            }),
        ),
        (
            "metadata[shop], a value no payment has",
            Box::new(move |_| PaymentQuery {
                metadata: Some(("shop".into(), "nowhere".into())),
                ..q()
            }),
        ),
        (
            "metadata[shop] in a 1 h window (1 %)",
            Box::new(move |r| {
                let from = created((r * 104_729) % n);
                PaymentQuery {
                    metadata: Some(("shop".into(), format!("s{}", r % 100))),
                    created_from: Some(from),
                    created_to: Some(from + Duration::from_secs(3600)),
                    ..q()
                }
            }),
        ),
        (
            "created_from/created_to (1 min window)",
            Box::new(move |r| {
                let from = created((r * 104_729) % n);
                PaymentQuery {
                    created_from: Some(from),
                    created_to: Some(from + Duration::from_secs(60)),
                    ..q()
                }
            }),
        ),
    ]
}

/// Reads every kind of page `rounds` times; prints one line each.
async fn measure(engine: &str, store: &dyn Store, n: u64, rounds: u64) {
    for (name, query) in pages(n) {
        let mut hist = Histogram::<u64>::new(3).expect("a histogram");
        let started = Instant::now();
        let mut rows = 0;
        for r in 0..rounds {
            let q = query(r);
            let t = Instant::now();
            let page = store.find_payments(&q).await.expect("a page");
            hist.record(u64::try_from(t.elapsed().as_micros()).unwrap_or(u64::MAX))
                .expect("recorded");
            assert!(page.len() <= LIMIT);
            assert!(
                page.iter().all(|p| q.matches(p)),
                "{name}: a page matches its query"
            );
            assert!(
                page.windows(2)
                    .all(|w| (w[0].created_at, w[0].id) > (w[1].created_at, w[1].id)),
                "{name}: newest first"
            );
            rows += page.len();
        }
        // Every kind of page finds payments, but the one that asks for what nobody has.
        let none_expected = name.contains("no payment has");
        assert_eq!(rows == 0, none_expected, "{name}: {rows} found");
        let secs = started.elapsed().as_secs_f64();
        println!(
            "{engine:<10} {n:>9} payments  {name:<40} p50 {:>7} us  p99 {:>7} us  {:>7.0} pages/s",
            hist.value_at_quantile(0.5),
            hist.value_at_quantile(0.99),
            rounds as f64 / secs
        );
    }
}

/// The cabinet's totals (`payment_totals`, what the home page and a list's totals read):
/// the newest [`TOTALS_SCAN`] payments of the project (the home page of a merchant with more
/// in 30 days), and 10,000 payments of a 100-second window (a filtered list's). Each is read
/// `rounds` times (at most 10) and checked against what the seed wrote: one payment in a
/// hundred `completed`, each of the 100 amounts summed exactly.
async fn measure_totals(engine: &str, store: &dyn Store, n: u64, rounds: u64) {
    let cases: [(&str, PaymentQuery, u64); 2] = [
        (
            "totals, the newest 200,000 at most",
            PaymentQuery::new(project_id(1), TOTALS_SCAN),
            n.min(TOTALS_SCAN as u64),
        ),
        (
            "totals, a 100 s window (10,000)",
            PaymentQuery {
                created_from: Some(created(n / 2)),
                created_to: Some(created(n / 2) + Duration::from_secs(100)),
                ..PaymentQuery::new(project_id(1), TOTALS_SCAN)
            },
            (n - n / 2).min(10_000),
        ),
    ];
    for (name, q, expected) in cases {
        let mut hist = Histogram::<u64>::new(3).expect("a histogram");
        for _ in 0..rounds.clamp(1, 10) {
            let t = Instant::now();
            let totals = store.payment_totals(&q, 0).await.expect("totals");
            hist.record(u64::try_from(t.elapsed().as_micros()).unwrap_or(u64::MAX))
                .expect("recorded");
            assert_eq!(
                totals.count(),
                expected,
                "{name}: every payment counted once"
            );
            let all = totals.all();
            assert_eq!(all.created, expected);
            assert!(
                all.completed * 100 <= expected + 100,
                "{name}: 1 % completed"
            );
        }
        println!(
            "{engine:<10} {n:>9} payments  {name:<40} p50 {:>7} us  p99 {:>7} us",
            hist.value_at_quantile(0.5),
            hist.value_at_quantile(0.99),
        );
    }
}

async fn sqlite(n: u64, rounds: u64) {
    let dir = tempfile::tempdir().expect("a temporary directory");
    let path = dir.path().join("list.db");
    let template = template();
    {
        let store = SqliteStore::open(&path, SqliteOptions::default()).expect("open");
        store.insert_payment(&template).await.expect("insert");
    }
    let started = Instant::now();
    {
        let conn = rusqlite::Connection::open(&path).expect("open");
        let columns: Vec<String> = conn
            .prepare("SELECT name FROM pragma_table_info('payments')")
            .expect("prepare")
            .query_map([], |r| r.get(0))
            .expect("columns")
            .collect::<Result<_, _>>()
            .expect("columns");
        conn.execute_batch(&insert_copies(&columns, n - 1, template.id, false))
            .expect("seed");
        conn.execute_batch("ANALYZE; PRAGMA wal_checkpoint(TRUNCATE);")
            .expect("analyze");
    }
    eprintln!(
        "sqlite: {n} payments seeded in {:.0} s, {} MB",
        started.elapsed().as_secs_f64(),
        std::fs::metadata(&path).map_or(0, |m| m.len()) / 1_000_000
    );
    let store = SqliteStore::open(&path, SqliteOptions::default()).expect("open");
    measure("sqlite", &store, n, rounds).await;
    measure_totals("sqlite", &store, n, rounds).await;
}

async fn postgres(url: &str, n: u64, rounds: u64) {
    use payments_store_postgres::{PgOptions, PgStore};
    let schema = format!("bench_list_{}", std::process::id());
    let (client, connection) = tokio_postgres::connect(url, tokio_postgres::NoTls)
        .await
        .expect("connect");
    let task = tokio::spawn(connection);
    client
        .batch_execute(&format!("CREATE SCHEMA {schema}"))
        .await
        .expect("a schema");
    let sep = if url.contains('?') { '&' } else { '?' };
    let scoped = format!("{url}{sep}options=-c%20search_path%3D{schema}");
    let template = template();
    let store = PgStore::connect(&scoped, PgOptions::default())
        .await
        .expect("connect");
    store.insert_payment(&template).await.expect("insert");
    let started = Instant::now();
    let columns: Vec<String> = client
        .query(
            "SELECT column_name::text FROM information_schema.columns \
             WHERE table_schema = $1 AND table_name = 'payments' ORDER BY ordinal_position",
            &[&schema],
        )
        .await
        .expect("columns")
        .iter()
        .map(|r| r.get(0))
        .collect();
    client
        .batch_execute(&format!(
            "SET search_path = {schema}; SET session_replication_role = replica; {}; \
             SET session_replication_role = DEFAULT; ANALYZE payments;",
            insert_copies(&columns, n - 1, template.id, true),
        ))
        .await
        .expect("seed");
    let seeded = started.elapsed();
    client
        .batch_execute(&format!(
            "{} ANALYZE payment_metadata;",
            payments_store_postgres::testing::METADATA_FILL
        ))
        .await
        .expect("the metadata index");
    let filled = started.elapsed();
    // What autovacuum does to a table whose rows are older than its last run: without the
    // visibility map it sets, an index-only scan (a prefix's matches, the amount key) reads
    // each row's table page too. Not inside the seed's statements: VACUUM runs alone.
    client
        .batch_execute("VACUUM (ANALYZE) payments, payment_metadata")
        .await
        .expect("vacuum");
    eprintln!(
        "postgres: {n} payments seeded in {:.0} s, their metadata index filled (as migration \
         20 fills it) in {:.0} s, vacuumed in {:.0} s",
        seeded.as_secs_f64(),
        (filled - seeded).as_secs_f64(),
        (started.elapsed() - filled).as_secs_f64()
    );
    measure("postgres", &store, n, rounds).await;
    measure_totals("postgres", &store, n, rounds).await;
    store.close();
    client
        .batch_execute(&format!("DROP SCHEMA {schema} CASCADE"))
        .await
        .expect("drop the schema");
    drop(client);
    let _ = task.await;
}

#[tokio::main]
async fn main() {
    let bench = std::env::args().any(|a| a == "--bench");
    let (n, rounds) = if bench {
        let n = std::env::var("LIST_PAYMENTS")
            .ok()
            .and_then(|v| v.parse().ok())
            .unwrap_or(1_000_000u64);
        let rounds = std::env::var("LIST_ROUNDS")
            .ok()
            .and_then(|v| v.parse().ok())
            .unwrap_or(500u64);
        (n, rounds)
    } else {
        (2_000, 1)
    };
    sqlite(n, rounds).await;
    if let Ok(url) = std::env::var("DATABASE_URL") {
        postgres(&url, n, rounds).await;
    }
}
