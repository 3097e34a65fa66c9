//! Three `payments-server serve` processes on 127.0.0.1 over one PostgreSQL database, with a
//! short retry schedule and lease, a recording callback receiver that answers 200, 500 or
//! hangs, creates fanned across the nodes (the same merchant payment id with fresh nonces, one
//! signed request sent to two nodes), nodes SIGKILLed and restarted at seeded points, and one
//! restart of the database. Afterwards:
//!
//! - one payment per merchant payment id, and every 200/201 answered it;
//! - no callback event left pending;
//! - per event, the receiver's receipts equal the recorded attempts, except for attempts in
//!   flight at a kill or at the database restart (sent, never recorded);
//! - nothing received after an event's first 2xx except around those disruptions;
//! - every payment whose create answered `processing` ended `completed` (more than half of
//!   them did), and its callback event was delivered or, without any 2xx, failed;
//! - every `500`, `503` or transport error that a merchant or operator request met (and tried
//!   again on another node) was sent around a kill or the database restart;
//! - a nonce accepted by one node is refused by another (`409 request_replayed`);
//! - a project's rate limit holds across the three nodes (within one burst), and lets the
//!   burst through.
//!
//! Needs `DATABASE_URL` (ignored in a plain `cargo test`; run with `-- --include-ignored`,
//! where a missing database fails it) and, for the database restart, `PAYMENTS_TEST_PG_CTL`
//! and `PAYMENTS_TEST_PG_DATA` (exported by `.ci/run`; without them the restart is left out,
//! saying so, except under `CI=true`, where that fails). Seed: `PAYMENTS_TEST_SEED` (printed).

use std::collections::{HashMap, HashSet};
use std::io::Write as _;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use axum::extract::State;
use axum::http::{HeaderMap, StatusCode};
use axum::routing::post;
use axum::Router;
use payments_client::{MerchantClient, SandboxCredentials, SignSpec};
use payments_server::testing::free_port;
use payments_store_postgres::testing::{database_url, fresh_schema};
use reqwest::Method;
use serde_json::{json, Value};

const NODES: usize = 3;
const LEASE_MS: u64 = 12_000;
const ATTEMPT_TIMEOUT: Duration = Duration::from_secs(10);

fn say(line: &str) {
    let _ = writeln!(std::io::stderr(), "multinode: {line}");
}

/// A small deterministic generator (xorshift64*), seeded per run.
#[derive(Debug, Clone)]
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_f491_4f6c_dd1d)
    }
    fn below(&mut self, n: u64) -> u64 {
        self.next() % n
    }
}

// --- the receiver ----------------------------------------------------------------------------

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Answer {
    Ok,
    Error,
    Hang,
}

#[derive(Debug, Clone)]
struct Receipt {
    at: Instant,
    answer: Answer,
}

#[derive(Clone)]
struct Receiver {
    receipts: Arc<Mutex<HashMap<String, Vec<Receipt>>>>,
    seed: u64,
}

async fn receive(State(r): State<Receiver>, headers: HeaderMap) -> StatusCode {
    let event = headers
        .get("x-callback-event-id")
        .and_then(|v| v.to_str().ok())
        .unwrap_or("")
        .to_string();
    let answer = {
        let mut all = r.receipts.lock().expect("receipts lock");
        let list = all.entry(event.clone()).or_default();
        let mut h = Rng(r.seed ^ fxhash(&event) ^ (list.len() as u64 + 1).wrapping_mul(0x9e37));
        let answer = match h.below(100) {
            0..=54 => Answer::Ok,
            55..=84 => Answer::Error,
            _ => Answer::Hang,
        };
        list.push(Receipt {
            at: Instant::now(),
            answer,
        });
        answer
    };
    match answer {
        Answer::Ok => StatusCode::OK,
        Answer::Error => StatusCode::INTERNAL_SERVER_ERROR,
        Answer::Hang => {
            tokio::time::sleep(ATTEMPT_TIMEOUT + Duration::from_secs(2)).await;
            StatusCode::OK
        }
    }
}

fn fxhash(s: &str) -> u64 {
    s.bytes().fold(0xcbf2_9ce4_8422_2325, |h, b| {
        (h ^ u64::from(b)).wrapping_mul(0x100_0000_01b3)
    }) | 1
}

// --- the nodes -------------------------------------------------------------------------------

struct Node {
    listen: SocketAddr,
    operator: SocketAddr,
    // Each node serves the cabinet too (the store has it): on one machine, each its own port.
    cabinet: SocketAddr,
    child: Option<Child>,
}

struct Cluster {
    binary: PathBuf,
    data_dir: PathBuf,
    database_url: String,
    nodes: Vec<Node>,
    restarts: usize,
}

impl Cluster {
    /// `n` nodes over `database_url` sharing `data_dir`, ready: the first bootstraps the
    /// sandbox, then the others join.
    async fn start(
        data_dir: &std::path::Path,
        database_url: &str,
        n: usize,
        http: &reqwest::Client,
    ) -> Cluster {
        let mut cluster = Cluster {
            binary: PathBuf::from(env!("CARGO_BIN_EXE_payments-server")),
            data_dir: data_dir.to_path_buf(),
            database_url: database_url.to_string(),
            nodes: (0..n)
                .map(|_| Node {
                    listen: SocketAddr::from(([127, 0, 0, 1], free_port())),
                    operator: SocketAddr::from(([127, 0, 0, 1], free_port())),
                    cabinet: SocketAddr::from(([127, 0, 0, 1], free_port())),
                    child: None,
                })
                .collect(),
            restarts: 0,
        };
        cluster.spawn(0);
        cluster.wait_ready(0, http).await;
        for i in 1..n {
            cluster.spawn(i);
        }
        for i in 1..n {
            cluster.wait_ready(i, http).await;
        }
        cluster
    }

    /// A merchant client of each node, signing as `c`.
    fn clients(&self, c: &SandboxCredentials, http: &reqwest::Client) -> Vec<MerchantClient> {
        self.nodes
            .iter()
            .map(|n| {
                MerchantClient::new(
                    &format!("http://{}", n.listen),
                    c.token.expose(),
                    c.private_key_pem.expose(),
                )
                .expect("a client")
                .with_http_client(http.clone())
            })
            .collect()
    }

    fn spawn(&mut self, i: usize) {
        let node = &self.nodes[i];
        let log =
            std::fs::File::create(self.data_dir.join(format!("node{i}-{}.log", self.restarts)))
                .expect("a log file");
        self.restarts += 1;
        let child = Command::new(&self.binary)
            .arg("serve")
            .env_clear()
            .env("PATH", std::env::var("PATH").unwrap_or_default())
            .env("PAYMENTS_STORE__DATABASE_URL", &self.database_url)
            .env("PAYMENTS_STORE__POOL_SIZE", "8")
            .env("PAYMENTS_DATA_DIR", &self.data_dir)
            .env("PAYMENTS_LISTEN__MERCHANT", node.listen.to_string())
            .env("PAYMENTS_LISTEN__OPERATOR", node.operator.to_string())
            .env("PAYMENTS_CABINET__LISTEN", node.cabinet.to_string())
            .env("PAYMENTS_CALLBACKS__ALLOW_LOCAL", "1")
            .env("PAYMENTS_CALLBACKS__RETRY_DELAYS", "1,2")
            .env("PAYMENTS_CALLBACKS__LEASE", format!("{LEASE_MS}ms"))
            .env("PAYMENTS_TUNING__SWEEP_INTERVAL", "200ms")
            .env("PAYMENTS_TUNING__SHUTDOWN_GRACE", "1s")
            .env("PAYMENTS_LOG", "warn")
            .stdin(Stdio::null())
            .stdout(log.try_clone().expect("clone the log"))
            .stderr(log)
            .spawn()
            .expect("payments-server starts");
        self.nodes[i].child = Some(child);
    }

    /// SIGKILL: no shutdown, nothing flushed, attempts in flight cut.
    fn kill(&mut self, i: usize) {
        if let Some(mut child) = self.nodes[i].child.take() {
            let _ = child.kill();
            let _ = child.wait();
        }
    }

    async fn wait_ready(&self, i: usize, http: &reqwest::Client) {
        let url = format!("http://{}/readyz", self.nodes[i].listen);
        let deadline = Instant::now() + Duration::from_secs(30);
        loop {
            if let Ok(r) = http.get(&url).send().await {
                if r.status().is_success() {
                    return;
                }
            }
            assert!(Instant::now() < deadline, "node {i} did not become ready");
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }
}

impl Drop for Cluster {
    fn drop(&mut self) {
        for i in 0..self.nodes.len() {
            self.kill(i);
        }
    }
}

// --- the database ----------------------------------------------------------------------------

async fn sql(url: &str) -> tokio_postgres::Client {
    let (client, connection) = tokio_postgres::connect(url, tokio_postgres::NoTls)
        .await
        .expect("connect to the database");
    tokio::spawn(connection);
    client
}

/// Restarts the database server (fast shutdown: sessions cut) when the test knows how.
fn restart_database() -> bool {
    let (Ok(pg_ctl), Ok(data)) = (
        std::env::var("PAYMENTS_TEST_PG_CTL"),
        std::env::var("PAYMENTS_TEST_PG_DATA"),
    ) else {
        return false;
    };
    let status = Command::new("runuser")
        .args([
            "-u", "postgres", "--", &pg_ctl, "-D", &data, "-m", "fast", "-w", "-t", "60",
        ])
        .arg("restart")
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .expect("runuser pg_ctl restart");
    assert!(status.success(), "pg_ctl restart failed");
    true
}

// --- the merchant side -----------------------------------------------------------------------

/// What a create was answered, for the final check.
#[derive(Debug)]
struct Created {
    merchant_payment_id: String,
    payment_id: String,
}

/// The `500`s, `503`s and transport errors that the merchant and operator requests met and
/// tried again: when each request was sent, when it failed, and what it got. Each request must
/// have been in flight during a disruption.
type Tolerated = Arc<Mutex<Vec<(Instant, Instant, String)>>>;

fn tolerate(tolerated: &Tolerated, sent: Instant, what: String) {
    tolerated
        .lock()
        .expect("tolerated lock")
        .push((sent, Instant::now(), what));
}

/// Sends `body` as a create to the nodes in turn from `first`, each time freshly signed, until
/// one answers 200/201 or a final refusal; a dead node or a 503 is tried on the next one.
async fn create_somewhere(
    clients: &[MerchantClient],
    first: usize,
    body: &Value,
    tolerated: &Tolerated,
) -> Option<(u16, Value)> {
    let deadline = Instant::now() + Duration::from_secs(40);
    let mut i = first;
    while Instant::now() < deadline {
        let node = i % clients.len();
        let sent = Instant::now();
        match clients[node].create_payment(body).await {
            Ok(r) if r.status.as_u16() == 503 || r.status.as_u16() == 500 => tolerate(
                tolerated,
                sent,
                format!("create on node {node}: {} {}", r.status, r.json),
            ),
            Ok(r) => return Some((r.status.as_u16(), r.json)),
            Err(e) => tolerate(tolerated, sent, format!("create on node {node}: {e}")),
        }
        i += 1;
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    None
}

/// Sends an operator API request to the nodes in turn from `first` until one answers other
/// than 500/503 (those, and transport errors, are recorded as tolerated); that node, its
/// status and its JSON body, or `None` when no node answered in 40 s.
async fn operator_somewhere(
    http: &reqwest::Client,
    operators: &[String],
    token: &str,
    first: usize,
    (method, path): (Method, &str),
    tolerated: &Tolerated,
) -> Option<(usize, u16, Value)> {
    let deadline = Instant::now() + Duration::from_secs(40);
    let mut i = first;
    while Instant::now() < deadline {
        let node = i % operators.len();
        let url = format!("{}{path}", operators[node]);
        let sent = Instant::now();
        match http
            .request(method.clone(), &url)
            .bearer_auth(token)
            .send()
            .await
        {
            Ok(r) => {
                let status = r.status().as_u16();
                let body: Value = r.json().await.unwrap_or(Value::Null);
                if status != 503 && status != 500 {
                    return Some((node, status, body));
                }
                tolerate(
                    tolerated,
                    sent,
                    format!("{method} {path} on node {node}: {status} {body}"),
                );
            }
            Err(e) => tolerate(
                tolerated,
                sent,
                format!("{method} {path} on node {node}: {e}"),
            ),
        }
        i += 1;
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    None
}

/// Confirms payment `id` through the operator API of the nodes in turn from `first` (the
/// payment goes `completed` and queues its callback event); the payment's status afterwards,
/// `None` when no node answered in time. A `409 invalid_transition` reads the payment: it
/// was confirmed by an earlier try whose answer was lost (`completed`), or never became
/// `processing` (its create was cut off by a kill before the provider answered).
async fn confirm_somewhere(
    http: &reqwest::Client,
    operators: &[String],
    token: &str,
    first: usize,
    id: &str,
    tolerated: &Tolerated,
) -> Option<String> {
    let path = format!("/operator/v1/payments/{id}/confirm");
    let (node, status, body) = operator_somewhere(
        http,
        operators,
        token,
        first,
        (Method::POST, &path),
        tolerated,
    )
    .await?;
    match status {
        200 => Some("completed".to_string()),
        409 if body["code"] == "invalid_transition" => {
            status_somewhere(http, operators, token, node + 1, id, tolerated).await
        }
        other => panic!("confirm {id}: {other} {body}"),
    }
}

/// The status of payment `id` read through the operator API of the nodes in turn from `first`.
async fn status_somewhere(
    http: &reqwest::Client,
    operators: &[String],
    token: &str,
    first: usize,
    id: &str,
    tolerated: &Tolerated,
) -> Option<String> {
    let path = format!("/operator/v1/payments/{id}");
    let (_, status, body) = operator_somewhere(
        http,
        operators,
        token,
        first,
        (Method::GET, &path),
        tolerated,
    )
    .await?;
    match (status, body["status"].as_str()) {
        (200, Some(got)) => Some(got.to_string()),
        _ => panic!("read {id}: {status} {body}"),
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs PostgreSQL: DATABASE_URL"]
async fn three_nodes_one_database_kills_and_a_database_restart() {
    let base = database_url();
    let seed: u64 = std::env::var("PAYMENTS_TEST_SEED")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or_else(|| {
            std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .expect("after 1970")
                .as_nanos() as u64
        })
        | 1;
    say(&format!(
        "seed {seed} (PAYMENTS_TEST_SEED={seed} repeats this run)"
    ));
    let mut rng = Rng(seed);
    let started = Instant::now();

    // The receiver.
    let receiver = Receiver {
        receipts: Arc::default(),
        seed,
    };
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
        .await
        .expect("bind the receiver");
    let receiver_url = format!("http://{}/cb", listener.local_addr().expect("address"));
    let app = Router::new()
        .route("/cb", post(receive))
        .with_state(receiver.clone());
    tokio::spawn(async move { axum::serve(listener, app).await });

    // The nodes: one bootstraps the sandbox, then the others join.
    let dir = tempfile::tempdir().expect("a temporary directory");
    let database_url = fresh_schema(&base).await;
    let http = reqwest::Client::builder()
        .timeout(Duration::from_secs(20))
        .build()
        .expect("a client");
    let mut cluster = Cluster::start(dir.path(), &database_url, NODES, &http).await;
    let creds = SandboxCredentials::from_file(dir.path().join("sandbox-credentials.json"))
        .expect("the bootstrap wrote the credentials");
    let test = creds.for_test_project().expect("a test project");
    let clients_for = |c: &SandboxCredentials| cluster.clients(c, &http);
    // The load on the demo project (live flow: its payments send callbacks); the rate limit
    // and the replays on the test project.
    let clients = clients_for(&creds);
    let limited = clients_for(&test);
    let operators: Vec<String> = cluster
        .nodes
        .iter()
        .map(|n| format!("http://{}", n.operator))
        .collect();
    let operator_token = creds.operator_token.expose().to_string();

    // 1. One signed request sent to two nodes: one accepts it, the other refuses the nonce.
    let mut replays = 0;
    for k in 0..6 {
        let body = serde_json::to_vec(&json!({
            "merchant_payment_id": format!("replay-{k}"),
            "amount": "1000",
            "payment_method": "sbp",
        }))
        .expect("JSON");
        let req = limited[0]
            .prepare(
                Method::POST,
                "/api/v1/payments",
                &body,
                Some(&SignSpec::default()),
            )
            .expect("sign");
        let (a, b) = (k % NODES, (k + 1) % NODES);
        let (ra, rb) = tokio::join!(limited[a].send(&req), limited[b].send(&req));
        let (ra, rb) = (ra.expect("node answers"), rb.expect("node answers"));
        let statuses = [ra.status.as_u16(), rb.status.as_u16()];
        let refused = [&ra, &rb]
            .iter()
            .filter(|r| r.status.as_u16() == 409 && r.code() == Some("request_replayed"))
            .count();
        assert_eq!(refused, 1, "one nonce through two nodes: {statuses:?}");
        assert!(statuses.contains(&201), "{statuses:?}");
        replays += 1;
    }

    // 2. A project's rate limit across the nodes: 1/s, burst 5.
    let operator = format!("http://{}", cluster.nodes[1].operator);
    let patched = http
        .patch(format!(
            "{operator}/operator/v1/projects/{}",
            test.project_id
        ))
        .bearer_auth(creds.operator_token.expose())
        .json(&json!({"rate_limit": {"per_second": 1, "burst": 5}}))
        .send()
        .await
        .expect("patch the project");
    assert!(patched.status().is_success(), "{:?}", patched.text().await);
    // The requests of step 1 (12 at the default 50/s) left the project's theoretical arrival
    // time at most 240 ms ahead: once it is behind, the first 5 requests of a burst pass.
    tokio::time::sleep(Duration::from_secs(1)).await;
    let burst_started = Instant::now();
    let mut passed = 0;
    for i in 0..15 {
        let r = limited[i % NODES]
            .project()
            .await
            .expect("GET /api/v1/project");
        match r.status.as_u16() {
            200 => passed += 1,
            429 => assert_eq!(r.code(), Some("rate_limited")),
            other => panic!("GET /api/v1/project: {other}"),
        }
    }
    let allowed = 5 + burst_started.elapsed().as_secs() + 1;
    say(&format!(
        "rate limit: {passed} of 15 passed across {NODES} nodes (limit {allowed})"
    ));
    assert!(
        passed as u64 <= allowed,
        "{passed} requests passed a 1/s, burst-5 limit across nodes (at most {allowed})"
    );
    assert!(
        passed >= 5,
        "only {passed} requests passed a 1/s, burst-5 limit (a fresh burst lets 5 through)"
    );

    // 3. The load: creates of each id through two nodes (fresh nonces), then its completion,
    // while nodes are killed and restarted and the database restarts once.
    let ids = 45usize;
    let chaos_rng_seed = rng.next();
    let results: Arc<Mutex<Vec<Created>>> = Arc::default();
    let tolerated: Tolerated = Arc::default();
    // The merchant payment ids whose create was answered `processing`.
    let processing: Arc<Mutex<HashSet<String>>> = Arc::default();
    let mut load = tokio::task::JoinSet::new();
    for n in 0..ids {
        let clients = clients.clone();
        let http = http.clone();
        let operators = operators.clone();
        let operator_token = operator_token.clone();
        let results = results.clone();
        let tolerated = tolerated.clone();
        let processing = processing.clone();
        let receiver_url = receiver_url.clone();
        let first = rng.below(NODES as u64) as usize;
        let delay = Duration::from_millis(rng.below(16_000));
        load.spawn(async move {
            tokio::time::sleep(delay).await;
            let mpid = format!("order-{n}");
            let body = json!({
                "merchant_payment_id": mpid,
                "amount": "1500",
                "payment_method": "sbp",
                "callback_url": receiver_url,
            });
            let (one, two) = tokio::join!(
                create_somewhere(&clients, first, &body, &tolerated),
                create_somewhere(&clients, first + 1, &body, &tolerated)
            );
            let mut id = None;
            let mut answered_processing = false;
            for answer in [one, two].into_iter().flatten() {
                let (status, json) = answer;
                assert!(
                    matches!(status, 200 | 201),
                    "create {mpid}: {status} {json}"
                );
                let pid = json["id"].as_str().expect("a payment id").to_string();
                answered_processing |= json["status"] == "processing";
                results.lock().expect("lock").push(Created {
                    merchant_payment_id: mpid.clone(),
                    payment_id: pid.clone(),
                });
                id = Some(pid);
            }
            let id = id.expect("some create answered");
            let status = confirm_somewhere(
                &http,
                &operators,
                &operator_token,
                first + 2,
                &id,
                &tolerated,
            )
            .await
            .unwrap_or_else(|| panic!("payment {id}: no node answered its confirmation"));
            if answered_processing {
                assert_eq!(
                    status, "completed",
                    "payment {id} was answered processing: its confirmation completes it"
                );
                processing.lock().expect("lock").insert(mpid);
            }
        });
    }

    // Chaos: three kills at seeded times, each followed by a restart, and one database restart.
    let mut chaos = Rng(chaos_rng_seed);
    let mut disruptions: Vec<(Instant, Instant)> = Vec::new();
    let mut times: Vec<u64> = (0..3).map(|_| 1_000 + chaos.below(14_000)).collect();
    times.sort_unstable();
    let db_restart_at = 3_000 + chaos.below(10_000);
    let mut db_restarted = false;
    let load_started = Instant::now();
    for t in times {
        let at = load_started + Duration::from_millis(t);
        if !db_restarted && t > db_restart_at {
            tokio::time::sleep_until((load_started + Duration::from_millis(db_restart_at)).into())
                .await;
            let from = Instant::now();
            if tokio::task::spawn_blocking(restart_database)
                .await
                .expect("restart")
            {
                say(&format!("database restarted at +{db_restart_at} ms"));
                disruptions.push((from, Instant::now()));
            } else {
                assert!(
                    std::env::var("CI").as_deref() != Ok("true"),
                    "CI=true: the database restart needs PAYMENTS_TEST_PG_CTL and \
                     PAYMENTS_TEST_PG_DATA (.ci/run exports them)"
                );
                say("database restart LEFT OUT: PAYMENTS_TEST_PG_CTL / PAYMENTS_TEST_PG_DATA not set");
            }
            db_restarted = true;
        }
        tokio::time::sleep_until(at.into()).await;
        let victim = chaos.below(NODES as u64) as usize;
        let from = Instant::now();
        cluster.kill(victim);
        say(&format!("node {victim} SIGKILLed at +{t} ms"));
        tokio::time::sleep(Duration::from_millis(500 + chaos.below(1_000))).await;
        cluster.spawn(victim);
        cluster.wait_ready(victim, &http).await;
        disruptions.push((from, Instant::now()));
    }
    if !db_restarted {
        let from = Instant::now();
        if tokio::task::spawn_blocking(restart_database)
            .await
            .expect("restart")
        {
            say("database restarted after the kills");
            disruptions.push((from, Instant::now()));
        }
    }
    while let Some(done) = load.join_next().await {
        done.expect("a merchant task");
    }
    let in_disruption = |t: Instant| {
        disruptions.iter().any(|(from, to)| {
            t + ATTEMPT_TIMEOUT + Duration::from_secs(3) >= *from
                && t <= *to + Duration::from_secs(1)
        })
    };
    // A 500, a 503 or a transport error is tried again on another node, and only a kill or
    // the database restart excuses it: the request was in flight during one (with the same
    // second of slack after it as the receipts below).
    let overlaps_disruption = |sent: Instant, failed: Instant| {
        disruptions.iter().any(|(from, to)| {
            sent <= *to + Duration::from_secs(1) && failed + Duration::from_secs(1) >= *from
        })
    };
    let since_load = |t: &Instant| t.saturating_duration_since(load_started).as_millis();
    let tolerated = std::mem::take(&mut *tolerated.lock().expect("lock"));
    let unexcused: Vec<String> = tolerated
        .iter()
        .filter(|(sent, failed, _)| !overlaps_disruption(*sent, *failed))
        .map(|(sent, failed, what)| {
            format!("+{}..+{} ms: {what}", since_load(sent), since_load(failed))
        })
        .collect();
    let windows: Vec<(u128, u128)> = disruptions
        .iter()
        .map(|(from, to)| (since_load(from), since_load(to)))
        .collect();
    assert!(
        unexcused.is_empty(),
        "requests failed with 500/503/a transport error outside the disruptions {windows:?} \
         (ms after the load started): {unexcused:#?}"
    );

    // 4. Everything settles: no event pending.
    let db = sql(&database_url).await;
    let deadline = Instant::now() + Duration::from_secs(90);
    loop {
        let pending: i64 = db
            .query_one(
                "SELECT count(*) FROM outbox_events WHERE state = 'pending'",
                &[],
            )
            .await
            .expect("count pending")
            .get(0);
        if pending == 0 {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "{pending} callback events still pending long after the load"
        );
        tokio::time::sleep(Duration::from_millis(250)).await;
    }
    // Let the last receipts (answers in flight) land.
    tokio::time::sleep(Duration::from_millis(300)).await;

    // 5. One payment per merchant payment id, the one every 200/201 answered.
    let rows = db
        .query(
            "SELECT merchant_payment_id, id, status FROM payments \
             WHERE merchant_payment_id LIKE 'order-%'",
            &[],
        )
        .await
        .expect("payments");
    let mut stored: HashMap<String, String> = HashMap::new();
    let mut stored_status: HashMap<String, String> = HashMap::new();
    let mut statuses: HashMap<String, usize> = HashMap::new();
    for row in &rows {
        let mpid: String = row.get(0);
        let id: String = row.get(1);
        let status: String = row.get(2);
        // A create cut off by a kill before its provider answered stays `created` (the
        // sweeper turns it to `error` after 60 s); every other one completed.
        assert!(
            matches!(status.as_str(), "completed" | "created" | "error"),
            "payment {mpid}: {status}"
        );
        *statuses.entry(status.clone()).or_default() += 1;
        stored_status.insert(mpid.clone(), status);
        assert!(
            stored.insert(mpid.clone(), id).is_none(),
            "two payments for {mpid}"
        );
    }
    assert_eq!(
        stored.len(),
        ids,
        "every merchant payment id has its payment"
    );
    // Every payment answered `processing` completed, and most did.
    let processing = std::mem::take(&mut *processing.lock().expect("lock"));
    for mpid in &processing {
        assert_eq!(
            stored_status.get(mpid).map(String::as_str),
            Some("completed"),
            "payment {mpid} was answered processing and confirmed"
        );
    }
    let completed = statuses.get("completed").copied().unwrap_or(0);
    assert!(
        completed * 2 > ids && processing.len() * 2 > ids,
        "only {completed} of {ids} payments completed ({} answered processing): {statuses:?}",
        processing.len()
    );
    let answered: Vec<Created> = std::mem::take(&mut *results.lock().expect("lock"));
    for c in &answered {
        assert_eq!(
            stored.get(&c.merchant_payment_id),
            Some(&c.payment_id),
            "a 200/201 for {} named another payment",
            c.merchant_payment_id
        );
    }

    // 6. The ledger: one credit per completed payment, written with its completion whatever
    // node, kill or restart; the reconciliation (on node 0's operator API) finds nothing.
    let credits: i64 = db
        .query_one(
            "SELECT count(*) FROM ledger_entries l JOIN payments p ON p.id = l.payment_id \
             WHERE p.merchant_payment_id LIKE 'order-%' AND l.kind = 'credit'",
            &[],
        )
        .await
        .expect("credits")
        .get(0);
    assert_eq!(
        usize::try_from(credits).expect("a count"),
        completed,
        "one credit per completed payment"
    );
    let report: Value = http
        .post(format!(
            "http://{}/operator/v1/ledger/reconcile",
            cluster.nodes[0].operator
        ))
        .bearer_auth(creds.operator_token.expose())
        .json(&json!({}))
        .send()
        .await
        .expect("the reconciliation answers")
        .json()
        .await
        .expect("its report");
    assert_eq!(
        report["differences"],
        json!([]),
        "the ledger reconciles: {report}"
    );
    // 7. Receipts against recorded attempts, per event.
    let events = db
        .query(
            "SELECT e.event_id, e.state, \
               (SELECT count(*) FROM delivery_attempts a WHERE a.event_id = e.event_id) \
             FROM outbox_events e JOIN payments p ON p.id = e.payment_id \
             WHERE p.merchant_payment_id LIKE 'order-%'",
            &[],
        )
        .await
        .expect("events");
    assert_eq!(
        events.len(),
        completed,
        "one completion event per completed payment"
    );
    assert!(!events.is_empty(), "the completed payments queued events");
    let receipts = receiver.receipts.lock().expect("lock");
    let mut extras = 0;
    let mut states: HashMap<String, usize> = HashMap::new();
    for row in &events {
        let event_id: String = row.get(0);
        let state: String = row.get(1);
        let attempts = usize::try_from(row.get::<_, i64>(2)).expect("a count");
        *states.entry(state.clone()).or_default() += 1;
        let got = receipts.get(&event_id).cloned().unwrap_or_default();
        assert!(
            got.len() >= attempts,
            "event {event_id}: {attempts} attempts recorded, {} received",
            got.len()
        );
        let unrecorded = got.len() - attempts;
        if unrecorded > 0 {
            let near = got.iter().filter(|r| in_disruption(r.at)).count();
            assert!(
                near >= unrecorded,
                "event {event_id}: {unrecorded} receipt(s) without a recorded attempt, \
                 only {near} near a kill or the database restart"
            );
            extras += unrecorded;
        }
        // Nothing after the first 2xx, unless that 2xx was cut off by a disruption.
        if let Some(first_ok) = got.iter().position(|r| r.answer == Answer::Ok) {
            if first_ok + 1 < got.len() {
                assert!(
                    in_disruption(got[first_ok].at),
                    "event {event_id} was received again after a 2xx outside any disruption"
                );
            }
            if !in_disruption(got[first_ok].at) {
                assert_eq!(state, "delivered", "event {event_id} got a 2xx");
            }
        } else {
            // No 2xx (an answer that hangs past the attempt timeout is none): never delivered,
            // so its attempts ran out.
            assert_eq!(
                state, "failed",
                "event {event_id} was never answered 2xx: {got:?}"
            );
        }
    }
    assert!(
        states.get("delivered").copied().unwrap_or(0) > 0,
        "some events were delivered: {states:?}"
    );
    let total_receipts: usize = receipts.values().map(Vec::len).sum();
    say(&format!(
        "{ids} ids {statuses:?}, {} answers, {replays} replay pairs, {} events {:?}, \
         {total_receipts} receipts, {extras} unrecorded (in flight at a disruption), \
         {} disruptions, {} requests tried again after a 500/503/transport error, {:.1} s",
        answered.len(),
        events.len(),
        states,
        disruptions.len(),
        tolerated.len(),
        started.elapsed().as_secs_f64()
    ));
    let seen: HashSet<&String> = receipts.keys().collect();
    assert!(
        seen.len() >= events.len(),
        "every event reached the receiver"
    );
    drop(receipts);
    drop(cluster);
}

/// A long poll of the events list waiting on one node is answered when another node commits
/// the project's event: the nodes relay their outbox wakes through the database
/// (`LISTEN`/`NOTIFY`), so the poll wakes at once, well before its 5 s safety net.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs PostgreSQL: DATABASE_URL"]
async fn a_long_poll_on_one_node_wakes_for_an_event_committed_on_another() {
    let base = database_url();
    let dir = tempfile::tempdir().expect("a temporary directory");
    let database_url = fresh_schema(&base).await;
    let http = reqwest::Client::builder()
        .timeout(Duration::from_secs(40))
        .build()
        .expect("a client");
    let cluster = Cluster::start(dir.path(), &database_url, 2, &http).await;
    let creds = SandboxCredentials::from_file(dir.path().join("sandbox-credentials.json"))
        .expect("the bootstrap wrote the credentials");
    let clients = cluster.clients(&creds, &http);
    let created = clients[1]
        .create_payment(&json!({
            "merchant_payment_id": "relayed-1",
            "amount": "1500",
            "payment_method": "sbp",
            "callback_url": "http://127.0.0.1:9/cb",
        }))
        .await
        .expect("a create");
    assert_eq!(created.status.as_u16(), 201, "{}", created.json);
    let id = created.json["id"].as_str().expect("an id").to_string();
    // Events from the payment's creation on: none yet.
    let since = created.json["created_at"]
        .as_str()
        .expect("a creation time")
        .replace('+', "%2B");
    let poll = {
        let c = clients[0].clone();
        tokio::spawn(async move {
            c.list_events(&format!("created_from={since}&wait=30"))
                .await
                .expect("a page")
        })
    };
    // The poll is held on node 0 (its first read found nothing) before node 1 commits.
    tokio::time::sleep(Duration::from_millis(500)).await;
    let operator = format!("http://{}", cluster.nodes[1].operator);
    let confirmed = Instant::now();
    let r = http
        .post(format!("{operator}/operator/v1/payments/{id}/confirm"))
        .bearer_auth(creds.operator_token.expose())
        .json(&json!({}))
        .send()
        .await
        .expect("the confirm is answered");
    assert_eq!(r.status(), StatusCode::OK);
    let page = poll.await.expect("the poll");
    let took = confirmed.elapsed();
    assert_eq!(
        page.json["data"][0]["payment_id"],
        id.as_str(),
        "{}",
        page.json
    );
    assert!(
        took < Duration::from_secs(4),
        "woken by node 1's event, not by the safety net: {took:?}"
    );
}
