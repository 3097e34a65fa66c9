//! `payments-chaos run`: one seeded run of the history checker (docs/correctness.md). Prints
//! the seed first and the report last; exits 1 when an invariant is violated (or, with
//! `--expect`, when the named one is not), 2 when the run itself could not be made.

use std::path::PathBuf;
use std::time::Duration;

use clap::Parser;
use payments_chaos::{run, Options, StoreKind};

#[derive(Debug, Parser)]
#[command(
    name = "payments-chaos",
    about = "Real payments-server nodes under faults, checked over the whole history"
)]
struct Args {
    /// The seed (default: drawn); the same seed replays the same operations and faults.
    #[arg(long, env = "PAYMENTS_CHAOS_SEED")]
    seed: Option<u64>,
    /// `postgres` (DATABASE_URL; PAYMENTS_TEST_PG_CTL and PAYMENTS_TEST_PG_DATA for its
    /// restarts) or `sqlite`.
    #[arg(long, default_value = "postgres")]
    store: String,
    /// Nodes on PostgreSQL.
    #[arg(long, default_value_t = 3)]
    nodes: usize,
    /// Clients.
    #[arg(long, default_value_t = 6)]
    clients: usize,
    /// How long the clients and the nemesis run ("90s", "30min").
    #[arg(long, default_value = "60s", value_parser = humantime::parse_duration)]
    duration: Duration,
    /// The payments-server binary (default: beside this one).
    #[arg(long)]
    server: Option<PathBuf>,
    /// Where the history (history.jsonl), the report (report.json) and the nodes' logs go.
    #[arg(long, default_value = "target/chaos")]
    out: PathBuf,
    /// Switch on a planted bug in the nodes (a server built with the feature planted-bugs).
    #[arg(long)]
    planted_bug: Option<String>,
    /// Succeed only if this invariant is violated (for a planted bug).
    #[arg(long)]
    expect: Option<String>,
    /// No faults.
    #[arg(long)]
    calm: bool,
    /// Only these kinds of fault (comma-separated: kill, pause, cut_database, cut_upstream,
    /// clock_jump, database_restart, database_kill, upstream_slow, upstream_failing,
    /// upstream_ambiguous, disk_full).
    #[arg(long, value_delimiter = ',')]
    faults: Vec<String>,
    /// Fail when a kind of fault cannot be made here (default under CI=true).
    #[arg(long)]
    strict: bool,
}

fn beside_this_binary() -> PathBuf {
    std::env::current_exe()
        .ok()
        .and_then(|p| p.parent().map(|d| d.join("payments-server")))
        .unwrap_or_else(|| PathBuf::from("payments-server"))
}

#[tokio::main]
async fn main() -> std::process::ExitCode {
    let args = Args::parse();
    let seed = args.seed.unwrap_or_else(|| {
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(1, |d| d.as_nanos() as u64)
    });
    let store = match args.store.as_str() {
        "postgres" => StoreKind::Postgres,
        "sqlite" => StoreKind::Sqlite,
        other => {
            eprintln!("--store {other}: postgres or sqlite");
            return std::process::ExitCode::from(2);
        }
    };
    let opts = Options {
        seed,
        store,
        nodes: if store == StoreKind::Sqlite {
            1
        } else {
            args.nodes
        },
        clients: args.clients,
        duration: args.duration,
        server: args.server.unwrap_or_else(beside_this_binary),
        out: args.out,
        planted_bug: args.planted_bug,
        calm: args.calm,
        faults: args.faults,
        strict: args.strict || std::env::var("CI").is_ok_and(|v| v == "true"),
    };
    println!(
        "payments-chaos: seed {seed} ({:?}; replay: --seed {seed}), history and logs in {}",
        opts.store,
        opts.out.display()
    );
    let report = match run(&opts).await {
        Ok(r) => r,
        Err(e) => {
            eprintln!("payments-chaos: the run could not be made: {e} (seed {seed})");
            return std::process::ExitCode::from(2);
        }
    };
    println!("{}", report.text());
    let ok = match &args.expect {
        Some(name) => report.violated(name),
        None => report.anomalies().is_empty(),
    };
    if ok {
        std::process::ExitCode::SUCCESS
    } else {
        eprintln!("payments-chaos: FAILED, seed {seed} (replay: --seed {seed})");
        std::process::ExitCode::from(1)
    }
}
