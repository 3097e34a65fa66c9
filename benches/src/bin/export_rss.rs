//! `export_rss`: the memory of the cabinet's streamed ledger export
//! (`payments_cabinet::web::export::entries_csv`, docs/performance.md "Ledger export memory").
//!
//! Fills a fresh SQLite store with `--entries` ledger entries of one project (a month of a
//! busy project: credits naming their payment, an operator adjustment every 1000th, a payout
//! every 10,000th), through the store's transaction API in batches. Then exports, in one
//! process: `--small` entries (the month's first) and the whole month, each twice: drained
//! straight from the stream, and served over HTTP on loopback (axum, `Body::from_stream`,
//! as the cabinet answers) to a client that reads and drops each chunk. Before each export
//! the process's peak RSS is reset (`/proc/self/clear_refs`, 5); after it, `VmHWM` is the
//! export's own peak. Prints rows, bytes, time, RSS before and the peak after.
//!
//! ```sh
//! cargo run --release -p payments-benches --bin export_rss -- --entries 1000000
//! ```
//!
//! `--format excel-ru` (or `excel-en`) measures the export as the cabinet's Excel buttons ask
//! for it; the default is the plain CSV.

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, Instant};

use clap::Parser;
use futures_util::StreamExt;
use payments_cabinet::web::export::{entries_csv, Format};
use payments_core::ids::{EntryId, PaymentId};
use payments_core::ledger::{EntryKind, Posting, TxReference, Usdt, UsdtAddress};
use payments_core::store::{transact, Store};
use payments_core::{ProjectId, Timestamp};
use payments_store_sqlite::{SqliteOptions, SqliteStore, Synchronous};

#[derive(Debug, Parser)]
#[command(
    name = "export_rss",
    about = "Peak RSS of the streamed ledger export, small and large"
)]
struct Args {
    /// Ledger entries of the project (the large export).
    #[arg(long, default_value_t = 1_000_000)]
    entries: u64,
    /// Entries of the small export (the first of the month).
    #[arg(long, default_value_t = 10_000)]
    small: u64,
    /// Entries appended per transaction while seeding.
    #[arg(long, default_value_t = 5_000)]
    batch: u64,
    /// Where to put the database (a temporary directory by default).
    #[arg(long)]
    dir: Option<PathBuf>,
    /// The file's format, as the exports' `format` parameter names it: `csv`, `excel-ru`,
    /// `excel-en`.
    #[arg(long, default_value = "csv", value_parser = parse_format)]
    format: Format,
}

/// A `--format` that names no export format.
#[derive(Debug, thiserror::Error)]
#[error("no export format {0:?}: csv, excel-ru or excel-en")]
struct UnknownFormat(String);

/// The export format a `--format` names.
fn parse_format(param: &str) -> Result<Format, UnknownFormat> {
    Format::from_param(param).ok_or_else(|| UnknownFormat(param.to_string()))
}

/// `VmRSS` and `VmHWM` of this process, KiB.
fn rss() -> (u64, u64) {
    let status = std::fs::read_to_string("/proc/self/status").unwrap_or_default();
    let field = |name: &str| {
        status
            .lines()
            .find(|l| l.starts_with(name))
            .and_then(|l| l.split_whitespace().nth(1))
            .and_then(|v| v.parse().ok())
            .unwrap_or(0)
    };
    (field("VmRSS:"), field("VmHWM:"))
}

/// Resets `VmHWM` to the current RSS (Linux 4.0 and later); `false` where it cannot.
fn reset_peak() -> bool {
    std::fs::write("/proc/self/clear_refs", "5").is_ok()
}

fn mib(kib: u64) -> f64 {
    kib as f64 / 1024.0
}

/// The `i`th entry of the month starting at `t0`, `step` apart.
fn posting(project: ProjectId, i: u64, t0: Timestamp, step: Duration) -> Posting {
    let at = t0 + step * u32::try_from(i).unwrap_or(u32::MAX);
    let id = EntryId::from_uuid(uuid::Uuid::from_u128(0x1000_0000_0000 + u128::from(i)));
    let base = Posting {
        id,
        project_id: project,
        kind: EntryKind::Credit,
        amount: Usdt::from_units(302_600 + i64::try_from(i % 977).unwrap_or(0) * 100),
        at,
        payment: Some((
            PaymentId::from_uuid(uuid::Uuid::from_u128(0x2000_0000_0000 + u128::from(i))),
            3,
        )),
        destination: None,
        reference: None,
        reason: None,
        actor: None,
    };
    if i % 10_000 == 9_999 {
        Posting {
            kind: EntryKind::Payout,
            amount: Usdt::from_units(-10_000_000),
            payment: None,
            destination: Some(
                UsdtAddress::parse("TR7NHqjeKQxGTCi8q8ZY4pL8otSzgjLj6t").expect("an address"),
            ),
            reference: Some(TxReference::parse(&format!("{i:064x}")).expect("a hash")),
            actor: Some("ops".into()),
            ..base
        }
    } else if i % 1_000 == 999 {
        Posting {
            kind: EntryKind::OperatorAdjustment,
            amount: Usdt::from_units(-12_500),
            payment: None,
            reason: Some("Bank fee of the returned transfer, ticket 4411".into()),
            actor: Some("ops".into()),
            ..base
        }
    } else {
        base
    }
}

async fn seed(
    store: &Arc<dyn Store>,
    project: ProjectId,
    args: &Args,
    t0: Timestamp,
    step: Duration,
) {
    let started = Instant::now();
    let mut i = 0;
    while i < args.entries {
        let end = (i + args.batch).min(args.entries);
        let batch: Arc<Vec<Posting>> =
            Arc::new((i..end).map(|n| posting(project, n, t0, step)).collect());
        transact(&**store, move |tx| {
            let batch = Arc::clone(&batch);
            Box::pin(async move {
                for p in batch.iter() {
                    tx.insert_posting(p).await?;
                }
                Ok(())
            })
        })
        .await
        .expect("a batch appended");
        i = end;
    }
    println!(
        "seeded {} entries in {:.1} s",
        args.entries,
        started.elapsed().as_secs_f64()
    );
}

/// What one export did.
struct Run {
    rows: u64,
    bytes: u64,
    secs: f64,
    rss_before: u64,
    peak: u64,
}

/// Drains the export straight from its stream; with `keep`, keeps every chunk until the end
/// (the control: what an export built in memory before it is sent would hold).
async fn direct(
    store: &Arc<dyn Store>,
    project: ProjectId,
    from: Timestamp,
    to: Timestamp,
    format: Format,
    keep: bool,
) -> Run {
    let reset = reset_peak();
    assert!(reset, "cannot reset the peak RSS (/proc/self/clear_refs)");
    let (rss_before, _) = rss();
    let started = Instant::now();
    let mut s = Box::pin(entries_csv(Arc::clone(store), project, from, to, format));
    let (mut rows, mut bytes) = (0u64, 0u64);
    let mut kept = Vec::new();
    while let Some(chunk) = s.next().await {
        let chunk = chunk.expect("a chunk");
        bytes += chunk.len() as u64;
        rows += chunk.iter().filter(|b| **b == b'\n').count() as u64;
        if keep {
            kept.push(chunk);
        }
    }
    let secs = started.elapsed().as_secs_f64();
    let (_, peak) = rss();
    drop(kept);
    Run {
        rows: rows - 1,
        bytes,
        secs,
        rss_before,
        peak,
    }
}

/// Serves the export over HTTP on loopback as the cabinet does and reads it with a client that
/// drops each chunk.
async fn over_http(
    store: &Arc<dyn Store>,
    project: ProjectId,
    from: Timestamp,
    to: Timestamp,
    format: Format,
) -> Run {
    use axum::body::Body;
    use axum::response::IntoResponse;
    let store = Arc::clone(store);
    let app = axum::Router::new().route(
        "/export",
        axum::routing::get(move || {
            let store = Arc::clone(&store);
            async move {
                let stream = entries_csv(store, project, from, to, format);
                (
                    [(axum::http::header::CONTENT_TYPE, "text/csv; charset=utf-8")],
                    Body::from_stream(stream),
                )
                    .into_response()
            }
        }),
    );
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
        .await
        .expect("a port");
    let addr = listener.local_addr().expect("an address");
    let server = tokio::spawn(async move {
        axum::serve(listener, app).await.expect("served");
    });
    let reset = reset_peak();
    assert!(reset, "cannot reset the peak RSS (/proc/self/clear_refs)");
    let (rss_before, _) = rss();
    let started = Instant::now();
    let mut response = reqwest::get(format!("http://{addr}/export"))
        .await
        .expect("an answer");
    assert!(response.status().is_success());
    let (mut rows, mut bytes) = (0u64, 0u64);
    while let Some(chunk) = response.chunk().await.expect("a chunk") {
        bytes += chunk.len() as u64;
        rows += chunk.iter().filter(|b| **b == b'\n').count() as u64;
    }
    let secs = started.elapsed().as_secs_f64();
    let (_, peak) = rss();
    server.abort();
    Run {
        rows: rows - 1,
        bytes,
        secs,
        rss_before,
        peak,
    }
}

fn report(what: &str, r: &Run) {
    println!(
        "{what:<28} rows {:>9}  bytes {:>11} ({:>7.1} MiB)  {:>6.2} s  RSS before {:>6.1} MiB  peak during {:>6.1} MiB  growth {:>5.1} MiB",
        r.rows,
        r.bytes,
        r.bytes as f64 / 1_048_576.0,
        r.secs,
        mib(r.rss_before),
        mib(r.peak),
        mib(r.peak.saturating_sub(r.rss_before)),
    );
}

#[tokio::main(flavor = "multi_thread", worker_threads = 2)]
async fn main() {
    let args = Args::parse();
    let dir = args.dir.clone().unwrap_or_else(tempfile_dir);
    std::fs::create_dir_all(&dir).expect("the directory");
    let path = dir.join("export-rss.db");
    let _ = std::fs::remove_file(&path);
    let store = open_store(&path);
    let project = ProjectId::from_uuid(uuid::Uuid::from_u128(0x0aa));
    // A month (31 days) of entries, evenly spaced.
    let t0 = Timestamp::parse_rfc3339("2026-10-01T00:00:00Z").expect("a time");
    let month = Duration::from_secs(31 * 86_400);
    let step = month / u32::try_from(args.entries.max(1)).unwrap_or(u32::MAX);
    let (rss0, hwm0) = rss();
    println!("start: RSS {:.1} MiB, peak {:.1} MiB", mib(rss0), mib(hwm0));
    seed(&store, project, &args, t0, step).await;
    report_seeded(&path);
    let small_to = t0 + step * u32::try_from(args.small).unwrap_or(u32::MAX);
    let all_to = t0 + month;
    // A first small export warms the reader connections and their caches.
    let _ = direct(&store, project, t0, small_to, args.format, false).await;
    let runs = export_runs(&store, project, t0, small_to, all_to, args.format).await;
    for (what, r) in &runs {
        report(what, r);
    }
    compare(&runs);
    let (_, hwm) = rss();
    println!("process peak since the last reset: {:.1} MiB", mib(hwm));
    drop(store);
    if args.dir.is_none() {
        let _ = std::fs::remove_dir_all(&dir);
    }
}

/// A fresh SQLite store at `path` (synchronous = NORMAL).
fn open_store(path: &Path) -> Arc<dyn Store> {
    Arc::new(
        SqliteStore::open(
            path,
            SqliteOptions {
                synchronous: Synchronous::Normal,
                ..SqliteOptions::default()
            },
        )
        .expect("a store"),
    )
}

/// Prints the database's size (with its WAL) and the RSS after seeding.
fn report_seeded(path: &Path) {
    let size = std::fs::metadata(path).map_or(0, |m| m.len())
        + std::fs::metadata(path.with_extension("db-wal")).map_or(0, |m| m.len());
    let (rss1, hwm1) = rss();
    println!(
        "after seeding: database {:.1} MiB, RSS {:.1} MiB, peak so far {:.1} MiB",
        size as f64 / 1_048_576.0,
        mib(rss1),
        mib(hwm1)
    );
}

/// The six exports, in order: direct, over HTTP and kept (the control), each small then the
/// whole month.
async fn export_runs(
    store: &Arc<dyn Store>,
    project: ProjectId,
    t0: Timestamp,
    small_to: Timestamp,
    all_to: Timestamp,
    format: Format,
) -> [(&'static str, Run); 6] {
    [
        (
            "direct, small",
            direct(store, project, t0, small_to, format, false).await,
        ),
        (
            "direct, whole month",
            direct(store, project, t0, all_to, format, false).await,
        ),
        (
            "over HTTP, small",
            over_http(store, project, t0, small_to, format).await,
        ),
        (
            "over HTTP, whole month",
            over_http(store, project, t0, all_to, format).await,
        ),
        (
            "control: kept, small",
            direct(store, project, t0, small_to, format, true).await,
        ),
        (
            "control: kept, whole month",
            direct(store, project, t0, all_to, format, true).await,
        ),
    ]
}

/// Prints, for each way of exporting, the whole month against the small export.
fn compare(runs: &[(&str, Run); 6]) {
    for (small, large, how) in [
        (0, 1, "direct"),
        (2, 3, "over HTTP"),
        (4, 5, "control (kept)"),
    ] {
        let (s, l) = (&runs[small].1, &runs[large].1);
        println!(
            "{how}: {}x the rows, {:.2}x the peak RSS ({:.1} -> {:.1} MiB; growth during the export {:.1} -> {:.1} MiB)",
            l.rows / s.rows.max(1),
            l.peak as f64 / s.peak.max(1) as f64,
            mib(s.peak),
            mib(l.peak),
            mib(s.peak.saturating_sub(s.rss_before)),
            mib(l.peak.saturating_sub(l.rss_before)),
        );
    }
}

/// A fresh directory under the system's temporary directory.
fn tempfile_dir() -> PathBuf {
    let d = std::env::temp_dir().join(format!("export-rss-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&d);
    d
}
