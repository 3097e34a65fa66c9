//! The shipped alert rules under real Prometheus (Debian's `prometheus`): a node on PostgreSQL
//! is scraped every 2 s with `packaging/prometheus/payments.rules.yml` loaded, then its
//! database is stopped for 60 s, and later frozen (every process of the server SIGSTOPped,
//! which answers nothing, not even an error) for 60 s. Both times *PaymentsDatabaseUnreachable*
//! must fire within 2 minutes of the outage's start, and resolve once the database answers
//! again. The promtool tests feed the rules series by hand; this one has them made by a node.
//!
//! Needs `DATABASE_URL`, `PAYMENTS_TEST_PG_CTL` and `PAYMENTS_TEST_PG_DATA` (the test server
//! of `.ci/run`) and `prometheus` on the path. A test binary of its own: stopping the database
//! would cut the PostgreSQL tests beside it.

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use payments_server::testing::{free_addr, TestServer};
use payments_store_postgres::testing::{database_url, fresh_schema};
use serde_json::Value;

#[path = "ops/support.rs"]
mod support;

use crate::support::Database;

/// Starts the stopped database again when dropped, a failing test's included.
struct StartsAgain<'a>(&'a Database);

impl Drop for StartsAgain<'_> {
    fn drop(&mut self) {
        self.0.start();
    }
}

/// How long each outage lasts.
const OUTAGE: Duration = Duration::from_secs(60);
/// The alert's window from the outage's start (issue: a page within 2 minutes).
const FIRE_WITHIN: Duration = Duration::from_secs(120);
/// The rule keeps its sample for 90 s; the rest is Prometheus's scrape and evaluation.
const RESOLVE_WITHIN: Duration = Duration::from_secs(120);
const ALERT: &str = "PaymentsDatabaseUnreachable";

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs PostgreSQL (DATABASE_URL, PAYMENTS_TEST_PG_CTL, PAYMENTS_TEST_PG_DATA) and prometheus"]
async fn a_stopped_and_a_frozen_database_page_within_two_minutes_then_resolve() {
    let database = Database::from_env();
    let url = fresh_schema(&database_url()).await;
    let node = TestServer::start(|s| {
        s.store.database_url = Some(url.clone().into());
        s.metrics.listen = Some("127.0.0.1:0".parse().unwrap());
    })
    .await;
    let metrics = node.metrics_url.clone().expect("metrics_listen is bound");
    let dir = tempfile::tempdir().unwrap();
    let prometheus = Prometheus::start(dir.path(), &metrics);
    prometheus.wait_for_series().await;
    assert!(
        prometheus.firing().await.is_empty(),
        "alerts fire while the database answers"
    );

    database.stop();
    let stopped = StartsAgain(&database);
    let fired = prometheus
        .wait_firing(FIRE_WITHIN, "the database stopped")
        .await;
    let refused = prometheus
        .query(r#"payments_store_errors_total{cause="unreachable"}"#)
        .await;
    assert!(
        refused > 0.0,
        "refused connections are counted as unreachable"
    );
    tokio::time::sleep(OUTAGE.saturating_sub(fired)).await;
    drop(stopped);
    let resolved = prometheus.wait_resolved("the database stopped").await;
    println!(
        "stopped for {OUTAGE:?}: fired after {fired:?}, resolved {resolved:?} after it answered again"
    );

    let frozen = database.freeze();
    let start = Instant::now();
    let ready = reqwest::get(format!("{}/readyz", node.merchant_url))
        .await
        .unwrap();
    assert_eq!(
        ready.status(),
        503,
        "a frozen database makes the node not ready"
    );
    assert!(
        start.elapsed() < Duration::from_secs(5),
        "/readyz answered within its 3 s"
    );
    let fired = prometheus
        .wait_firing(FIRE_WITHIN, "the database frozen")
        .await;
    // Seen failing before the scrape bounded its store reads: the scrape hung with the
    // database, the node looked down (`up == 0`), and the heartbeat never reached Prometheus.
    let scraped = prometheus
        .query(r#"min_over_time(up{job="payments"}[30s])"#)
        .await;
    assert_eq!(
        scraped, 1.0,
        "the node's /metrics answers while its database hangs"
    );
    tokio::time::sleep(OUTAGE.saturating_sub(fired)).await;
    drop(frozen);
    let resolved = prometheus.wait_resolved("the database frozen").await;
    println!("frozen for {OUTAGE:?}: fired after {fired:?}, resolved {resolved:?} after the thaw");
    node.stop().await;
}

/// Prometheus scraping one node every 2 s (a scrape waits 2 s, longer than the node's 1 s for
/// its store gauges), evaluating the shipped rules every second.
struct Prometheus {
    child: Child,
    api: String,
    client: reqwest::Client,
}

impl Drop for Prometheus {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl Prometheus {
    fn start(dir: &Path, metrics_url: &str) -> Prometheus {
        let rules: PathBuf = [env!("CARGO_MANIFEST_DIR"), "..", "packaging", "prometheus"]
            .iter()
            .collect::<PathBuf>()
            .join("payments.rules.yml");
        let target = metrics_url.trim_start_matches("http://");
        let config = format!(
            "global:\n  scrape_interval: 2s\n  scrape_timeout: 2s\n  evaluation_interval: 1s\n\
             rule_files: [{rules:?}]\n\
             scrape_configs:\n  - job_name: payments\n    static_configs:\n      - targets: [{target:?}]\n"
        );
        let config_file = dir.join("prometheus.yml");
        std::fs::write(&config_file, config).unwrap();
        let listen = free_addr();
        let child = Command::new("prometheus")
            .arg(format!("--config.file={}", config_file.display()))
            .arg(format!(
                "--storage.tsdb.path={}",
                dir.join("data").display()
            ))
            .arg(format!("--web.listen-address={listen}"))
            .arg("--log.level=warn")
            .stdout(Stdio::null())
            .stderr(Stdio::inherit())
            .spawn()
            .expect("prometheus runs (Debian's prometheus; .ci/run installs it)");
        Prometheus {
            child,
            api: format!("http://{listen}/api/v1"),
            client: reqwest::Client::new(),
        }
    }

    async fn get(&self, path: &str) -> Option<Value> {
        let resp = self
            .client
            .get(format!("{}/{path}", self.api))
            .send()
            .await
            .ok()?;
        resp.json::<Value>().await.ok()
    }

    /// The value of an instant query's first series (0 without one).
    async fn query(&self, expr: &str) -> f64 {
        let q = format!("query?query={}", urlencode(expr));
        let answer = self.get(&q).await.expect("Prometheus answers a query");
        answer["data"]["result"][0]["value"][1]
            .as_str()
            .map_or(0.0, |v| v.parse().expect("a number"))
    }

    /// The alerts firing now.
    async fn firing(&self) -> Vec<String> {
        let Some(answer) = self.get("alerts").await else {
            return Vec::new();
        };
        answer["data"]["alerts"]
            .as_array()
            .into_iter()
            .flatten()
            .filter(|a| a["state"] == "firing")
            .map(|a| a["labels"]["alertname"].as_str().unwrap_or("").to_string())
            .collect()
    }

    /// Waits until Prometheus has the node's heartbeat (it started, scraped, and the node
    /// answers).
    async fn wait_for_series(&self) {
        let deadline = Instant::now() + Duration::from_secs(60);
        loop {
            let q = format!(
                "query?query={}",
                urlencode("payments_store_unanswered_seconds")
            );
            let has = self.get(&q).await.is_some_and(|a| {
                a["data"]["result"]
                    .as_array()
                    .is_some_and(|r| !r.is_empty())
            });
            if has {
                return;
            }
            assert!(
                Instant::now() < deadline,
                "Prometheus never scraped the node"
            );
            tokio::time::sleep(Duration::from_millis(500)).await;
        }
    }

    /// Waits for [`ALERT`] to fire, at most `within`; how long it took.
    async fn wait_firing(&self, within: Duration, what: &str) -> Duration {
        let start = Instant::now();
        loop {
            if self.firing().await.iter().any(|a| a == ALERT) {
                return start.elapsed();
            }
            assert!(
                start.elapsed() < within,
                "{what}: {ALERT} did not fire within {within:?}"
            );
            tokio::time::sleep(Duration::from_secs(1)).await;
        }
    }

    /// Waits for [`ALERT`] to stop firing, at most [`RESOLVE_WITHIN`]; how long it took.
    async fn wait_resolved(&self, what: &str) -> Duration {
        let start = Instant::now();
        loop {
            if !self.firing().await.iter().any(|a| a == ALERT) {
                return start.elapsed();
            }
            assert!(
                start.elapsed() < RESOLVE_WITHIN,
                "{what}: {ALERT} still fires {RESOLVE_WITHIN:?} after the database answers again"
            );
            tokio::time::sleep(Duration::from_secs(1)).await;
        }
    }
}

/// `expr` for a query string.
fn urlencode(expr: &str) -> String {
    expr.bytes()
        .map(|b| match b {
            b'a'..=b'z' | b'A'..=b'Z' | b'0'..=b'9' | b'_' | b'.' => (b as char).to_string(),
            _ => format!("%{b:02X}"),
        })
        .collect()
}
