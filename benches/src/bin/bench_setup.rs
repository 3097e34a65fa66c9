//! `bench_setup`: preparation steps for load runs, on a stopped or running server's database.
//!
//! - `rate-limit`: raises the demo project's request rate limit (50/s by default) so the load
//!   generator measures the server, not the limiter. Written through the store, like the
//!   operator's own change would be.
//! - `seed`: copies one existing payment row `--count` times with fresh ids (version 7, from a
//!   month ago) straight in SQL (closed payments, plus `--due` payments already due for the
//!   sweeper), to measure the server with millions of payments stored.
//! - `sweep-cost`: times the sweeper's query (`due_payments`, a page of 100) against the store.

use std::path::PathBuf;
use std::sync::Arc;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use clap::{Parser, Subcommand};
use payments_core::project::RateLimit;
use payments_core::store::MerchantStoreExt;
use payments_core::store::{MerchantStore, PaymentStore};
use payments_core::Timestamp;
use payments_store_sqlite::{SqliteOptions, SqliteStore};

#[derive(Debug, Parser)]
#[command(name = "bench_setup", about = "Preparation steps for load runs")]
struct Args {
    /// The server's data directory.
    #[arg(long)]
    data_dir: PathBuf,
    #[command(subcommand)]
    command: Command,
}

#[derive(Debug, Subcommand)]
enum Command {
    /// Sets every project's rate limit.
    RateLimit {
        #[arg(long, default_value_t = 1_000_000)]
        per_second: u32,
        #[arg(long, default_value_t = 1_000_000)]
        burst: u32,
    },
    /// Adds `count` closed payments and `due` due ones, copied from an existing payment.
    Seed {
        #[arg(long)]
        count: u64,
        #[arg(long, default_value_t = 1_000)]
        due: u64,
    },
    /// Times `due_payments(now, 100)`.
    SweepCost {
        #[arg(long, default_value_t = 200)]
        iterations: u32,
    },
}

fn now() -> Timestamp {
    let ms = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_millis());
    Timestamp::from_unix_millis(i64::try_from(ms).unwrap_or(i64::MAX))
}

fn seed(db: &std::path::Path, count: u64, due: u64) -> rusqlite::Result<()> {
    let mut conn = rusqlite::Connection::open(db)?;
    conn.busy_timeout(Duration::from_secs(30))?;
    conn.execute_batch("PRAGMA synchronous = NORMAL; PRAGMA cache_size = -200000;")?;
    let template: String = conn.query_row(
        "SELECT id FROM payments ORDER BY created_at LIMIT 1",
        [],
        |r| r.get(0),
    )?;
    let tag = format!("{:x}", now().unix_millis());
    let tag_bytes = (now().unix_millis() as u16).to_le_bytes();
    let history_start = u64::try_from(now().unix_millis()).unwrap_or(0) - 30 * 86_400_000;
    let started = Instant::now();
    let batch = 100_000u64;
    let mut done = 0u64;
    while done < count + due {
        let tx = conn.transaction()?;
        {
            let mut stmt = tx.prepare_cached(
                "INSERT INTO payments SELECT ?1, project_id, ?2, flow, ?3, amount, initial_amount, \
                 currency, geo_code, payment_method, is_intrabank, bank_code, callback_url, \
                 requisite, holder_name, requisite_bank, qrcode_link, deeplink_url, course, \
                 fee_percent, error_code, error_comment, appeal_from, created_at, updated_at, \
                 expires_at, version, fingerprint, ?4 FROM payments WHERE id = ?5",
            )?;
            let end = (done + batch).min(count + due);
            // The per-status counts the store keeps with each payment it writes.
            tx.prepare_cached(
                "INSERT INTO payment_status_counts (status, n) VALUES ('processing', ?1), \
                 ('completed', ?2) ON CONFLICT (status) DO UPDATE SET n = n + excluded.n",
            )?
            .execute(rusqlite::params![
                due.clamp(done, end) - done,
                end - due.clamp(done, end)
            ])?;
            for n in done..end {
                // Version 7 ids like the server's, from a month ago onwards (one per 0.5 ms),
                // so the stored keys lie before the new ones as in a real history.
                let created = history_start + n / 2;
                let mut random = [0u8; 10];
                random[..8].copy_from_slice(&n.to_le_bytes());
                random[8..].copy_from_slice(&tag_bytes);
                let id = uuid::Builder::from_unix_timestamp_millis(created, &random)
                    .into_uuid()
                    .to_string();
                let mpid = format!("seed-{tag}-{n}");
                // The first `due` rows are processing and overdue; the rest are closed.
                let (status, due_at) = if n < due {
                    ("processing", Some(now().unix_millis() - 60_000))
                } else {
                    ("completed", None)
                };
                stmt.execute(rusqlite::params![id, mpid, status, due_at, template])?;
            }
            done = end;
        }
        tx.commit()?;
        eprintln!("seeded {done} rows in {:.1?}", started.elapsed());
    }
    Ok(())
}

#[tokio::main]
async fn main() {
    let args = Args::parse();
    let db = args.data_dir.join("payments.db");
    match args.command {
        Command::RateLimit { per_second, burst } => {
            let store = SqliteStore::open(&db, SqliteOptions::default()).expect("the store opens");
            for mut p in store.projects().await.expect("projects") {
                p.rate_limit = RateLimit { per_second, burst };
                store.upsert_project(&p).await.expect("upsert_project");
                println!("project {}: {per_second}/s, burst {burst}", p.id);
            }
            store.close();
        }
        Command::Seed { count, due } => seed(&db, count, due).expect("seeding"),
        Command::SweepCost { iterations } => {
            let store = Arc::new(
                SqliteStore::open(&db, SqliteOptions::default()).expect("the store opens"),
            );
            let total: u64 = rusqlite::Connection::open(&db)
                .and_then(|c| c.query_row("SELECT count(*) FROM payments", [], |r| r.get(0)))
                .expect("a count");
            let mut times = Vec::with_capacity(iterations as usize);
            let mut rows = 0;
            for _ in 0..iterations {
                let t = Instant::now();
                rows = store.due_payments(now(), 100).await.expect("due").len();
                times.push(t.elapsed());
            }
            times.sort();
            let pick = |q: f64| times[((times.len() - 1) as f64 * q) as usize];
            println!(
                "stored {total}: due_payments(now, 100) -> {rows} rows; min {:.3?} median {:.3?} p90 {:.3?} max {:.3?}",
                times[0],
                pick(0.5),
                pick(0.9),
                times[times.len() - 1]
            );
            println!(
                "RESULT {}",
                serde_json::json!({"stored": total, "rows": rows,
                    "min_us": times[0].as_micros() as u64, "median_us": pick(0.5).as_micros() as u64,
                    "max_us": times[times.len()-1].as_micros() as u64})
            );
            store.close();
        }
    }
}
