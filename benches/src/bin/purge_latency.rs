//! `purge_latency`: what retention costs the writer. Seeds a fresh SQLite store with finished
//! callback events (each with one delivery attempt) and audit records, all past their retention,
//! then measures the latency of small writes (`use_nonce`, the first write of every signed
//! request) from concurrent callers, first alone and then while the events are purged the way
//! the sweeper does it (`Store::purge` batches of finished events, of `RETENTION_BATCH` rows with
//! `RETENTION_PAUSE` between them). Prints the figures of docs/performance.md ("Retention"),
//! and the bytes per event and per audit record for the sizing guide (docs/operations.md).
//!
//! ```sh
//! cargo run --release -p payments-benches --bin purge_latency -- --events 1000000
//! ```

use std::path::Path;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use clap::Parser;
use hdrhistogram::Histogram;
use payments_core::store::{Retained, Store};
use payments_core::{ProjectId, Timestamp};
use payments_http::sweeper::{RETENTION_BATCH, RETENTION_PAUSE};
use payments_store_sqlite::{SqliteOptions, SqliteStore};

#[derive(Debug, Parser)]
#[command(
    name = "purge_latency",
    about = "Writer latency during a retention purge"
)]
struct Args {
    /// Finished events to seed (each with one attempt) and purge.
    #[arg(long, default_value_t = 1_000_000)]
    events: u64,
    /// Audit records to seed (measured for size only).
    #[arg(long, default_value_t = 100_000)]
    audit: u64,
    /// Concurrent writers measured.
    #[arg(long, default_value_t = 8)]
    writers: usize,
    /// Pause of each writer between two writes, milliseconds.
    #[arg(long, default_value_t = 5)]
    pause_ms: u64,
    /// Seconds of the baseline (writes alone).
    #[arg(long, default_value_t = 20)]
    baseline_secs: u64,
    /// Where to put the database (a temporary directory by default).
    #[arg(long)]
    dir: Option<std::path::PathBuf>,
}

fn size(path: &Path) -> u64 {
    let wal = path.with_extension("db-wal");
    std::fs::metadata(path).map_or(0, |m| m.len()) + std::fs::metadata(wal).map_or(0, |m| m.len())
}

/// A callback body of the usual size.
const BODY: &str = r#"{"id":"0190f3c2-7a1b-7c3d-9e4f-5a6b7c8d9e0f","event_id":"0190f3c2-7a1b-7c3d-9e4f-5a6b7c8d9e10","status":"completed","amount":3400,"initial_amount":3400,"currency":"RUB","payment_method":"sbp","bank_code":null,"is_intrabank":false,"merchant_payment_id":"order-000001","rate":11.00,"course":100.00,"is_test":false,"project_id":"0190f3c2-0000-7000-8000-000000000001"}"#;

fn seed(db: &Path, events: u64, audit: u64, old: i64) -> rusqlite::Result<(u64, u64)> {
    let mut conn = rusqlite::Connection::open(db)?;
    conn.execute_batch("PRAGMA synchronous = NORMAL")?;
    let before = size(db);
    let tx = conn.transaction()?;
    {
        let mut ev = tx.prepare(
            "INSERT INTO outbox_events (event_id, payment_id, project_id, status, kind, body, \
             created_at, destination, state, attempts, max_attempts, next_attempt_at) \
             VALUES (?1, ?2, ?3, 'completed', 'automatic', ?4, ?5, \
             'https://merchant.example/callbacks', 'delivered', 1, 3, NULL)",
        )?;
        let mut at = tx.prepare(
            "INSERT INTO delivery_attempts (event_id, attempt, started_at, duration_ms, \
             http_status, error, success) VALUES (?1, 1, ?2, 42, 200, NULL, 1)",
        )?;
        for i in 0..events {
            let id = uuid::Uuid::from_u128(0x3000_0000_0000 + u128::from(i)).to_string();
            let pid = uuid::Uuid::from_u128(0x2000_0000_0000 + u128::from(i)).to_string();
            let t = old + i64::try_from(i).unwrap_or(0);
            ev.execute(rusqlite::params![
                id,
                pid,
                "0190f3c2-0000-7000-8000-000000000001",
                BODY.as_bytes(),
                t
            ])?;
            at.execute(rusqlite::params![id, t])?;
        }
    }
    tx.commit()?;
    conn.execute_batch("PRAGMA wal_checkpoint(TRUNCATE)")?;
    let after_events = size(db);
    let tx = conn.transaction()?;
    {
        let payment_json = format!(
            "{{\"id\":\"x\",\"status\":\"processing\",\"requisite\":\"2200001234567895\",\"body\":{BODY}}}"
        );
        let mut a = tx.prepare(
            "INSERT INTO audit (at, actor, action, target, before_state, after_state) \
             VALUES (?1, 'operator:alice', 'payment.confirm', ?2, ?3, ?3)",
        )?;
        for i in 0..audit {
            a.execute(rusqlite::params![
                old + i64::try_from(i).unwrap_or(0),
                format!("payment-{i}"),
                payment_json
            ])?;
        }
    }
    tx.commit()?;
    conn.execute_batch("PRAGMA wal_checkpoint(TRUNCATE)")?;
    let after_audit = size(db);
    Ok((
        (after_events - before) / events.max(1),
        (after_audit - after_events) / audit.max(1),
    ))
}

async fn measure(
    store: Arc<SqliteStore>,
    writers: usize,
    pause: Duration,
    stop: Arc<AtomicBool>,
) -> Histogram<u64> {
    let mut tasks = Vec::new();
    for w in 0..writers {
        let store = store.clone();
        let stop = stop.clone();
        tasks.push(tokio::spawn(async move {
            let mut h = Histogram::<u64>::new(3).expect("a histogram");
            let project = ProjectId::from_uuid(uuid::Uuid::from_u128(7));
            let mut n = 0u64;
            while !stop.load(Ordering::Relaxed) {
                let nonce = format!("w{w}-{n}");
                n += 1;
                let now = Timestamp::from_unix_millis(2_000_000_000_000);
                let start = Instant::now();
                store
                    .use_nonce(project, &nonce, now, now + Duration::from_secs(420))
                    .await
                    .expect("the write succeeds");
                h.record(u64::try_from(start.elapsed().as_micros()).unwrap_or(u64::MAX))
                    .expect("in range");
                tokio::time::sleep(pause).await;
            }
            h
        }));
    }
    let mut all = Histogram::<u64>::new(3).expect("a histogram");
    for t in tasks {
        all.add(t.await.expect("the writer ends"))
            .expect("same bounds");
    }
    all
}

fn line(name: &str, h: &Histogram<u64>) {
    println!(
        "{name}: {} writes, p50 {:.2} ms, p99 {:.2} ms, p99.9 {:.2} ms, max {:.2} ms",
        h.len(),
        h.value_at_quantile(0.5) as f64 / 1000.0,
        h.value_at_quantile(0.99) as f64 / 1000.0,
        h.value_at_quantile(0.999) as f64 / 1000.0,
        h.max() as f64 / 1000.0
    );
}

#[tokio::main(flavor = "multi_thread", worker_threads = 2)]
async fn main() {
    let args = Args::parse();
    let tmp = tempfile_dir(args.dir.clone());
    let db = tmp.join("payments.db");
    drop(SqliteStore::open(&db, SqliteOptions::default()).expect("the schema"));
    // Queued 100 days ago: past the default 90-day retention.
    let old = 1_790_000_000_000i64;
    let t0 = Instant::now();
    let (per_event, per_audit) = seed(&db, args.events, args.audit, old).expect("seeding");
    println!(
        "seeded {} events (+1 attempt each) and {} audit records in {:.1} s; {} bytes per event \
         with its attempt, {} bytes per audit record; database {} MB",
        args.events,
        args.audit,
        t0.elapsed().as_secs_f64(),
        per_event,
        per_audit,
        size(&db) / 1_000_000
    );
    let store = Arc::new(SqliteStore::open(&db, SqliteOptions::default()).expect("open"));
    let pause = Duration::from_millis(args.pause_ms);

    let stop = Arc::new(AtomicBool::new(false));
    let run = tokio::spawn(measure(store.clone(), args.writers, pause, stop.clone()));
    tokio::time::sleep(Duration::from_secs(args.baseline_secs)).await;
    stop.store(true, Ordering::Relaxed);
    let baseline = run.await.expect("baseline");

    let stop = Arc::new(AtomicBool::new(false));
    let run = tokio::spawn(measure(store.clone(), args.writers, pause, stop.clone()));
    let before = Timestamp::from_unix_millis(old + 1_000_000_000_000);
    let started = Instant::now();
    let mut batches = Histogram::<u64>::new(3).expect("a histogram");
    let mut purged = 0u64;
    loop {
        let b = Instant::now();
        let n = store
            .purge(Retained::FinishedEvents, before, RETENTION_BATCH)
            .await
            .expect("purge")
            .deleted;
        batches
            .record(u64::try_from(b.elapsed().as_micros()).unwrap_or(u64::MAX))
            .expect("in range");
        purged += n;
        if n < RETENTION_BATCH as u64 {
            break;
        }
        tokio::time::sleep(RETENTION_PAUSE).await;
    }
    let took = started.elapsed();
    stop.store(true, Ordering::Relaxed);
    let during = run.await.expect("during");
    println!(
        "purged {purged} events with their attempts in {:.1} s ({:.0} events/s), {} batches of \
         {RETENTION_BATCH} with {RETENTION_PAUSE:?} pauses; one batch: p50 {:.1} ms, p99 {:.1} \
         ms, max {:.1} ms",
        took.as_secs_f64(),
        purged as f64 / took.as_secs_f64(),
        batches.len(),
        batches.value_at_quantile(0.5) as f64 / 1000.0,
        batches.value_at_quantile(0.99) as f64 / 1000.0,
        batches.max() as f64 / 1000.0
    );
    line("writes alone       ", &baseline);
    line("writes during purge", &during);
    store.close();
    if args.dir.is_none() {
        let _ = std::fs::remove_dir_all(&tmp);
    }
}

fn tempfile_dir(given: Option<std::path::PathBuf>) -> std::path::PathBuf {
    let dir = given.unwrap_or_else(|| {
        std::env::temp_dir().join(format!("purge-latency-{}", std::process::id()))
    });
    std::fs::create_dir_all(&dir).expect("a directory");
    dir
}
