//! A rolling upgrade from the previous release, under load, on PostgreSQL: two nodes of the
//! previous release serve a database it migrated, while a merchant keeps creating and reading
//! payments through them. Then, as `docs/operations.md` says to upgrade:
//!
//! 1. this build's `payments-server migrate` expands the schema while the old nodes serve;
//! 2. the nodes are replaced one at a time (taken out of the balancer's rotation, SIGTERM,
//!    drained, replaced by a node of this build with `secrets.seal_requisites = false`, since
//!    old nodes still read what the new ones write);
//! 3. the nodes are rolled back to the previous release one at a time, on the migrated schema
//!    and over what this build wrote in clear, and then forward again, the same way;
//! 4. once no old node is left, the nodes are restarted one at a time with sealing on, and
//!    `callback-secret reseal` seals what was written in clear meanwhile.
//!
//! Throughout, every create and read is answered by whichever node the rotation gives it:
//! the documented bound for a drained rolling upgrade is **no** `5xx` and no transport error.
//! Afterwards every created payment reads back, through a node of this build, with the
//! requisite its create answered; the old nodes answered creates and reads after the
//! migration; `/readyz` of an old node on the new schema is ready, and means it.
//!
//! The requisites and rates come from the example upstream over HTTP (`[upstream]` with one
//! `url`, the settings both releases read), answering each requisite only after
//! [`SLOW`]: creates are in flight, waiting for it, when a node leaves the rotation and is
//! stopped, and at least one node is stopped so. Every payment has a callback URL (a receiver
//! here, verifying each signature with the project's callback secret); the upstream reports
//! transfers of created payments to the notification listener of a node in rotation, so the
//! dispatchers of old and new nodes send `completed` callbacks, while their sweepers run every
//! 200 ms. Afterwards: the upstream issued exactly one requisite to each accepted payment,
//! the one its create answered (none to a payment the merchant never saw accepted), every
//! payment reads back through every node, and every completed one reached the receiver.
//!
//! Needs `DATABASE_URL` and the previous release's server binary in
//! `PAYMENTS_PREVIOUS_RELEASE` (`.ci/run` builds it from the commit in
//! `.ci/previous-release`); ignored in a plain `cargo test`, and failing when asked for without
//! them.

use std::collections::{BTreeMap, HashSet};
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use axum::body::Bytes;
use axum::extract::State;
use axum::http::{HeaderMap, StatusCode};
use axum::routing::post;
use axum::Router;
use payments_client::{MerchantClient, SandboxCredentials};
use payments_core::callback::{CallbackSecret, CallbackVerifier};
use payments_core::Timestamp;
use payments_examples::upstream::{self, ExampleUpstream};
use payments_server::testing::free_port;
use payments_store_postgres::testing::{database_url, fresh_schema};
use serde_json::json;

const NODES: usize = 2;
/// Concurrent merchants of the load.
const MERCHANTS: usize = 3;
/// How long the upstream takes to issue a requisite: longer than the balancer's
/// deregistration delay (500 ms), shorter than the provider budget ([`BUDGET`]).
const SLOW: Duration = Duration::from_millis(1200);
const BUDGET: &str = "5s";
const UPSTREAM_SECRET: &str = "whsec_ZXhhbXBsZS11cHN0cmVhbS1zZWNyZXQtZm9yLXRlc3Rz";

fn say(line: &str) {
    eprintln!("upgrade: {line}");
}

fn previous_release() -> PathBuf {
    let path = std::env::var("PAYMENTS_PREVIOUS_RELEASE").unwrap_or_else(|_| {
        panic!(
            "PAYMENTS_PREVIOUS_RELEASE is not set: the upgrade test runs the previous release's \
             payments-server beside this build's (.ci/run builds it from the commit named in \
             .ci/previous-release). Without it, leave out --include-ignored."
        )
    });
    let path = PathBuf::from(path);
    assert!(path.is_file(), "no binary at {}", path.display());
    path
}

/// Which build a node runs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Build {
    Previous,
    /// This build, requisites written in clear (while old nodes may read them).
    CurrentInClear,
    /// This build with its defaults.
    Current,
}

struct Node {
    listen: SocketAddr,
    operator: SocketAddr,
    cabinet: SocketAddr,
    /// Its `upstream.listen`: where the upstream reports transfers.
    notify: SocketAddr,
    build: Build,
    child: Option<Child>,
}

struct Cluster {
    previous: PathBuf,
    data_dir: PathBuf,
    database_url: String,
    nodes: Vec<Node>,
    starts: usize,
    /// The example upstream's base URL.
    upstream: String,
}

impl Cluster {
    fn binary(&self, build: Build) -> &Path {
        match build {
            Build::Previous => &self.previous,
            _ => Path::new(env!("CARGO_BIN_EXE_payments-server")),
        }
    }

    /// A command of `build` over the cluster's database and data dir.
    fn command(&self, build: Build) -> Command {
        let mut c = Command::new(self.binary(build));
        c.env_clear()
            .env("PATH", std::env::var("PATH").unwrap_or_default())
            .env("PAYMENTS_STORE__DATABASE_URL", &self.database_url)
            .env("PAYMENTS_DATA_DIR", &self.data_dir)
            .env("PAYMENTS_LOG", "warn")
            .stdin(Stdio::null());
        if build == Build::CurrentInClear {
            c.env("PAYMENTS_SECRETS__SEAL_REQUISITES", "false");
        }
        c
    }

    /// Runs a command of `build` to its end: its stdout, or a failure with its stderr.
    fn run(&self, build: Build, args: &[&str]) -> String {
        let out = self
            .command(build)
            .args(args)
            .output()
            .expect("the command runs");
        assert!(
            out.status.success(),
            "{build:?} {args:?}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        String::from_utf8_lossy(&out.stdout).into_owned()
    }

    fn spawn(&mut self, i: usize, build: Build) {
        let log = std::fs::File::create(self.data_dir.join(format!("node{i}-{}.log", self.starts)))
            .expect("a log file");
        self.starts += 1;
        let node = &self.nodes[i];
        let child = self
            .command(build)
            .arg("serve")
            .env("PAYMENTS_STORE__POOL_SIZE", "8")
            .env("PAYMENTS_LISTEN__MERCHANT", node.listen.to_string())
            .env("PAYMENTS_LISTEN__OPERATOR", node.operator.to_string())
            .env("PAYMENTS_CABINET__LISTEN", node.cabinet.to_string())
            .env("PAYMENTS_TUNING__SHUTDOWN_GRACE", "10s")
            .env("PAYMENTS_TUNING__SWEEP_INTERVAL", "200ms")
            .env("PAYMENTS_CALLBACKS__ALLOW_LOCAL", "1")
            .env("PAYMENTS_CALLBACKS__RETRY_DELAYS", "1,2")
            // The `[upstream]` keys the previous release reads too (one `url`, no
            // `[[upstream.providers]]`, no `recovery_window`).
            .env("PAYMENTS_UPSTREAM__PROVIDER", "http")
            .env("PAYMENTS_UPSTREAM__RATE_SOURCE", "http")
            .env(
                "PAYMENTS_UPSTREAM__URL",
                format!("{}/requisites", self.upstream),
            )
            .env(
                "PAYMENTS_UPSTREAM__RATES_URL",
                format!("{}/rates", self.upstream),
            )
            .env("PAYMENTS_UPSTREAM__SECRETS", UPSTREAM_SECRET)
            .env("PAYMENTS_UPSTREAM__LISTEN", node.notify.to_string())
            .env("PAYMENTS_UPSTREAM__PROVIDER_BUDGET", BUDGET)
            .stdout(log.try_clone().expect("clone the log"))
            .stderr(log)
            .spawn()
            .expect("payments-server starts");
        self.nodes[i].child = Some(child);
        self.nodes[i].build = build;
    }

    /// SIGTERM, then waits for the node to finish its requests and exit.
    fn stop(&mut self, i: usize) {
        let Some(mut child) = self.nodes[i].child.take() else {
            return;
        };
        // The shell's own `kill`: no procps needed.
        let status = Command::new("sh")
            .args(["-c", &format!("kill -TERM {}", child.id())])
            .status()
            .expect("kill -TERM");
        assert!(status.success());
        let deadline = Instant::now() + Duration::from_secs(30);
        loop {
            if let Some(status) = child.try_wait().expect("wait") {
                assert!(status.success(), "node {i} exited with {status} on SIGTERM");
                return;
            }
            assert!(
                Instant::now() < deadline,
                "node {i} did not stop on SIGTERM"
            );
            std::thread::sleep(Duration::from_millis(50));
        }
    }

    async fn wait_ready(&mut self, i: usize, http: &reqwest::Client) {
        let url = format!("http://{}/readyz", self.nodes[i].listen);
        let deadline = Instant::now() + Duration::from_secs(60);
        loop {
            if let Ok(r) = http.get(&url).send().await {
                if r.status().is_success() {
                    return;
                }
            }
            if let Some(status) = self.nodes[i]
                .child
                .as_mut()
                .and_then(|c| c.try_wait().ok()?)
            {
                panic!("node {i} exited ({status}): see node{i}-*.log in the data dir");
            }
            assert!(Instant::now() < deadline, "node {i} did not become ready");
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }
}

impl Drop for Cluster {
    fn drop(&mut self) {
        for node in &mut self.nodes {
            if let Some(mut child) = node.child.take() {
                let _ = child.kill();
                let _ = child.wait();
            }
        }
    }
}

/// One answered create: which build answered it, the payment and its requisite.
#[derive(Debug, Clone)]
struct Created {
    node: usize,
    build: Build,
    payment_id: String,
    requisite: String,
}

/// What the load saw.
#[derive(Debug, Default)]
struct Seen {
    created: Vec<Created>,
    /// Reads answered, by the build that answered.
    reads: Vec<Build>,
    /// Every 5xx and transport error: the request, the node's build, what it got.
    failures: Vec<String>,
    /// Payments the upstream reported paid, and the build of the node it reported to.
    completed: Vec<(String, Build)>,
}

/// What the load needs besides the rotation.
#[derive(Clone)]
struct Load {
    seen: Arc<Mutex<Seen>>,
    stop: Arc<AtomicBool>,
    /// Creates waiting for an answer, by node.
    in_flight: Arc<Vec<AtomicUsize>>,
    callback_url: String,
}

/// The merchant's callback receiver: each callback's signature verified with the project's
/// callback secret; the verified ones' `id` and `status`, and how many did not verify.
#[derive(Clone)]
struct Receiver {
    verifier: Arc<CallbackVerifier>,
    received: Arc<Mutex<Vec<(String, String)>>>,
    unverified: Arc<AtomicUsize>,
}

async fn receive(State(r): State<Receiver>, headers: HeaderMap, body: Bytes) -> StatusCode {
    let header = |n: &str| {
        headers
            .get(n)
            .and_then(|v| v.to_str().ok())
            .unwrap_or("")
            .to_string()
    };
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .expect("after 1970")
        .as_secs() as i64;
    let verified = r.verifier.verify(
        &header("x-callback-timestamp"),
        &header("x-callback-signature"),
        &body,
        Timestamp::from_unix_secs(now),
    );
    let event: serde_json::Value = serde_json::from_slice(&body).unwrap_or_default();
    if verified.is_err() {
        r.unverified.fetch_add(1, Ordering::SeqCst);
        return StatusCode::UNAUTHORIZED;
    }
    let field = |f: &str| event[f].as_str().unwrap_or_default().to_string();
    r.received
        .lock()
        .unwrap()
        .push((field("id"), field("status")));
    StatusCode::OK
}

/// Starts the receiver; its URL.
async fn start_receiver(r: Receiver) -> String {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
        .await
        .expect("bind the receiver");
    let url = format!("http://{}/cb", listener.local_addr().expect("an address"));
    let app = Router::new().route("/cb", post(receive)).with_state(r);
    tokio::spawn(async move { axum::serve(listener, app).await });
    url
}

/// The bank sees the transfers of created payments, oldest first, one every 300 ms: the
/// upstream reports each to the notification listener of a node in rotation, until `stop`.
async fn pay(up: ExampleUpstream, rotation: Rotation, notify: Vec<SocketAddr>, load: Load) {
    let mut next = 0usize;
    while !load.stop.load(Ordering::SeqCst) {
        tokio::time::sleep(Duration::from_millis(300)).await;
        let Some(payment_id) = ({
            let s = load.seen.lock().unwrap();
            s.created.get(next).map(|c| c.payment_id.clone())
        }) else {
            continue;
        };
        let Some((i, build)) = ({
            let r = rotation.lock().unwrap();
            (!r.is_empty()).then(|| (r[next % r.len()].0, r[next % r.len()].1))
        }) else {
            continue;
        };
        next += 1;
        up.set_notify_url(&format!("http://{}/upstream/v1/notifications", notify[i]));
        let tx = format!("tx-{payment_id}");
        let answer = up.report(&tx, &payment_id, true, None).await;
        let mut seen = load.seen.lock().unwrap();
        match answer {
            Ok(a) if a["applied"] == true => seen.completed.push((payment_id, build)),
            other => seen.failures.push(format!(
                "report of {payment_id} to node {i} ({build:?}): {other:?}"
            )),
        }
    }
}

/// The balancer's rotation: the nodes a request may go to, and each one's build and client.
type Rotation = Arc<Mutex<Vec<(usize, Build, MerchantClient)>>>;

/// Creates and reads, round robin over the rotation, until `stop`.
async fn load(merchant: usize, rotation: Rotation, load: Load) {
    let Load {
        seen,
        stop,
        in_flight,
        callback_url,
    } = load;
    let mut n = merchant;
    while !stop.load(Ordering::SeqCst) {
        let Some((i, build, client)) = ({
            let r = rotation.lock().unwrap();
            (!r.is_empty()).then(|| r[n % r.len()].clone())
        }) else {
            tokio::time::sleep(Duration::from_millis(20)).await;
            continue;
        };
        n += 1;
        let method = if n.is_multiple_of(2) {
            "sbp"
        } else {
            "card_transfer"
        };
        let body = json!({"merchant_payment_id": format!("roll-{merchant}-{n}"),
                          "amount": "2500.00", "payment_method": method,
                          "callback_url": callback_url});
        in_flight[i].fetch_add(1, Ordering::SeqCst);
        let created = client.create_payment(&body).await;
        in_flight[i].fetch_sub(1, Ordering::SeqCst);
        match created {
            Ok(r) if r.status.as_u16() == 201 => {
                assert_eq!(r.json["status"], "processing", "{}", r.json);
                seen.lock().unwrap().created.push(Created {
                    node: i,
                    build,
                    payment_id: r.json["id"].as_str().unwrap().to_string(),
                    requisite: r.json["requisite"].as_str().unwrap().to_string(),
                });
            }
            // The project's rate limit: a merchant waits and goes on.
            Ok(r) if r.status.as_u16() == 429 => {
                tokio::time::sleep(Duration::from_millis(200)).await;
                continue;
            }
            Ok(r) => seen.lock().unwrap().failures.push(format!(
                "create on node {i} ({build:?}): {} {}",
                r.status, r.json
            )),
            Err(e) => seen
                .lock()
                .unwrap()
                .failures
                .push(format!("create on node {i} ({build:?}): {e}")),
        }
        // A read of an earlier payment: every other time the newest one another node created
        // (a moment ago, so maybe by the other build), else any.
        let earlier = {
            let s = seen.lock().unwrap();
            let len = s.created.len();
            let newest_elsewhere = s.created.iter().rev().find(|c| c.node != i).cloned();
            // (n / 2: round robin over two nodes gives each node one parity of n.)
            match (n / 2) % 2 {
                0 if newest_elsewhere.is_some() => newest_elsewhere,
                _ => (len > 0).then(|| s.created[n * 7 % len].clone()),
            }
        };
        // Routed again, as a balancer routes each request: the node may be out of rotation.
        let still_routed = rotation.lock().unwrap().iter().any(|(n, _, _)| *n == i);
        if let Some(earlier) = earlier.filter(|_| still_routed) {
            match client.get_payment(&earlier.payment_id).await {
                Ok(r) if r.status.as_u16() == 200 => {
                    assert_eq!(
                        r.json["requisite"],
                        earlier.requisite.as_str(),
                        "node {i} ({build:?}) reads {}'s requisite",
                        earlier.payment_id
                    );
                    seen.lock().unwrap().reads.push(build);
                }
                Ok(r) if r.status.as_u16() == 429 => {
                    tokio::time::sleep(Duration::from_millis(200)).await;
                }
                Ok(r) => seen.lock().unwrap().failures.push(format!(
                    "read on node {i} ({build:?}): {} {}",
                    r.status, r.json
                )),
                Err(e) => seen
                    .lock()
                    .unwrap()
                    .failures
                    .push(format!("read on node {i} ({build:?}): {e}")),
            }
        }
    }
}

/// Reads a payment through `client`, waiting out the rate limit.
async fn read(client: &MerchantClient, payment_id: &str) -> serde_json::Value {
    loop {
        let r = client.get_payment(payment_id).await.expect("a read");
        if r.status.as_u16() != 429 {
            assert_eq!(r.status.as_u16(), 200, "{payment_id}: {}", r.json);
            return r.json;
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}

/// Exactly once: the upstream issued one requisite to each accepted payment, the one its
/// create answered, none to a payment no create was answered for, and no two alike.
fn assert_issued_once(seen: &Seen, issued: &BTreeMap<String, String>) {
    for c in &seen.created {
        assert_eq!(
            issued.get(&c.payment_id),
            Some(&c.requisite),
            "the upstream issued {}'s requisite, the one its create answered",
            c.payment_id
        );
    }
    let accepted: HashSet<&String> = seen.created.iter().map(|c| &c.payment_id).collect();
    let unseen: Vec<&String> = issued.keys().filter(|id| !accepted.contains(id)).collect();
    assert!(
        unseen.is_empty(),
        "requisites issued to payments no create was answered for: {unseen:?}"
    );
    let distinct: HashSet<&String> = issued.values().collect();
    assert_eq!(distinct.len(), issued.len(), "no requisite issued twice");
}

/// Every payment reads back through every node with the requisite its create answered, the
/// completed ones `completed`; every completed one reached the receiver, signed.
async fn assert_read_and_called_back(clients: &[MerchantClient], seen: &Seen, r: &Receiver) {
    let completed: HashSet<&String> = seen.completed.iter().map(|(id, _)| id).collect();
    for (i, client) in clients.iter().enumerate() {
        for c in &seen.created {
            let json = read(client, &c.payment_id).await;
            assert_eq!(json["requisite"], c.requisite.as_str(), "node {i}: {json}");
            if completed.contains(&c.payment_id) {
                assert_eq!(json["status"], "completed", "node {i}: {json}");
            }
        }
    }
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let missing: Vec<&String> = {
            let received = r.received.lock().unwrap();
            let called: HashSet<&String> = received
                .iter()
                .filter(|(_, status)| status == "completed")
                .map(|(id, _)| id)
                .collect();
            completed
                .iter()
                .filter(|id| !called.contains(**id))
                .copied()
                .collect()
        };
        if missing.is_empty() {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "no `completed` callback for {missing:?}"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    assert_eq!(r.unverified.load(Ordering::SeqCst), 0, "callbacks signed");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs PostgreSQL (DATABASE_URL) and the previous release (PAYMENTS_PREVIOUS_RELEASE)"]
async fn a_rolling_upgrade_from_the_previous_release_under_load() {
    let previous = previous_release();
    let base = database_url();
    let dir = tempfile::tempdir().expect("a temporary directory");
    let up = ExampleUpstream::new(CallbackSecret::parse(UPSTREAM_SECRET).expect("a secret"));
    up.answer_after(SLOW);
    let upstream = upstream::start(up.clone(), SocketAddr::from(([127, 0, 0, 1], 0)))
        .await
        .expect("the example upstream starts");
    let mut cluster = Cluster {
        previous,
        data_dir: dir.path().to_path_buf(),
        database_url: fresh_schema(&base).await,
        nodes: (0..NODES)
            .map(|_| Node {
                listen: SocketAddr::from(([127, 0, 0, 1], free_port())),
                operator: SocketAddr::from(([127, 0, 0, 1], free_port())),
                cabinet: SocketAddr::from(([127, 0, 0, 1], free_port())),
                notify: SocketAddr::from(([127, 0, 0, 1], free_port())),
                build: Build::Previous,
                child: None,
            })
            .collect(),
        starts: 0,
        upstream,
    };
    let http = reqwest::Client::builder()
        .timeout(Duration::from_secs(30))
        .build()
        .expect("a client");

    // The previous release: its schema, its nodes (the first bootstraps the sandbox).
    let out = cluster.run(Build::Previous, &["migrate"]);
    say(&format!("the previous release migrated: {}", out.trim()));
    let old_version: u32 = out
        .trim()
        .rsplit(' ')
        .next()
        .and_then(|v| v.parse().ok())
        .expect("`migrate` prints `schema version A -> B`");
    assert!(
        old_version < payments_store_postgres::SCHEMA_VERSION,
        "the previous release's schema ({old_version}) is older than this build's"
    );
    cluster.spawn(0, Build::Previous);
    cluster.wait_ready(0, &http).await;
    cluster.spawn(1, Build::Previous);
    cluster.wait_ready(1, &http).await;
    let creds = SandboxCredentials::from_file(dir.path().join("sandbox-credentials.json"))
        .expect("the bootstrap wrote the credentials");
    let client_of = |node: &Node| {
        MerchantClient::new(
            &format!("http://{}", node.listen),
            creds.token.expose(),
            creds.private_key_pem.expose(),
        )
        .expect("a client")
        .with_http_client(http.clone())
    };
    let rotation: Rotation = Arc::new(Mutex::new(
        cluster
            .nodes
            .iter()
            .enumerate()
            .map(|(i, n)| (i, n.build, client_of(n)))
            .collect(),
    ));
    let callback_secret = CallbackSecret::parse(creds.callback_secret.expose())
        .expect("the sandbox project's callback secret");
    let receiver = Receiver {
        verifier: Arc::new(CallbackVerifier::new(vec![callback_secret])),
        received: Arc::default(),
        unverified: Arc::default(),
    };
    let seen = Arc::new(Mutex::new(Seen::default()));
    let stop = Arc::new(AtomicBool::new(false));
    let load_of = Load {
        seen: seen.clone(),
        stop: stop.clone(),
        in_flight: Arc::new((0..NODES).map(|_| AtomicUsize::new(0)).collect()),
        callback_url: start_receiver(receiver.clone()).await,
    };
    let mut loads = tokio::task::JoinSet::new();
    for merchant in 0..MERCHANTS {
        loads.spawn(load(merchant, rotation.clone(), load_of.clone()));
    }
    let notify = cluster.nodes.iter().map(|n| n.notify).collect();
    loads.spawn(pay(up.clone(), rotation.clone(), notify, load_of.clone()));
    let settle = || tokio::time::sleep(Duration::from_secs(2));
    settle().await;

    // 1. This build migrates while the old nodes serve.
    let out = cluster.run(Build::Current, &["migrate"]);
    say(&format!("this build migrated under load: {}", out.trim()));
    let migrated_at = seen.lock().unwrap().created.len();
    settle().await;
    for i in 0..NODES {
        let r = http
            .get(format!("http://{}/readyz", cluster.nodes[i].listen))
            .send()
            .await
            .expect("readyz");
        assert_eq!(r.status(), 200, "old node {i} on the new schema is ready");
    }

    // 2. and 3. Replace the nodes one at a time: first with requisites in clear; then back
    // to the previous release (a rollback, on the migrated schema, of what this build wrote
    // in clear) and forward again; then sealed.
    let mut rolled_back_at = None;
    let mut stopped_mid_call = 0;
    let phases = [
        Build::CurrentInClear,
        Build::Previous,
        Build::CurrentInClear,
        Build::Current,
    ];
    for (phase, build) in phases.into_iter().enumerate() {
        if phase == 2 {
            rolled_back_at = Some(seen.lock().unwrap().created.len());
        }
        for i in 0..NODES {
            // Out of rotation, then a moment for requests already routed to it to arrive
            // (a balancer's deregistration delay), then SIGTERM: it drains what it has.
            rotation.lock().unwrap().retain(|(n, _, _)| *n != i);
            tokio::time::sleep(Duration::from_millis(500)).await;
            stopped_mid_call += load_of.in_flight[i].load(Ordering::SeqCst);
            cluster.stop(i);
            cluster.spawn(i, build);
            cluster.wait_ready(i, &http).await;
            let client = client_of(&cluster.nodes[i]);
            rotation.lock().unwrap().push((i, build, client));
            say(&format!("node {i} now runs {build:?}"));
            settle().await;
        }
    }
    stop.store(true, Ordering::SeqCst);
    while let Some(done) = loads.join_next().await {
        done.expect("the load ran to its end");
    }
    let out = cluster.run(Build::Current, &["callback-secret", "reseal", "--json"]);
    let reseal: serde_json::Value = serde_json::from_str(&out).expect("JSON");
    say(&format!("reseal: {reseal}"));

    let seen = std::mem::take(&mut *seen.lock().unwrap());
    let by = |b: Build| seen.created.iter().filter(|c| c.build == b).count();
    say(&format!(
        "{} creates ({} by the previous release, {} after the migration), {} reads, {} paid, \
         {stopped_mid_call} creates in flight at a SIGTERM, {} failures",
        seen.created.len(),
        by(Build::Previous),
        seen.created.len() - migrated_at,
        seen.reads.len(),
        seen.completed.len(),
        seen.failures.len()
    ));
    assert!(
        seen.failures.is_empty(),
        "a drained rolling upgrade answers every request: {:#?}",
        seen.failures
    );
    let old_after_migration = seen.created[migrated_at..]
        .iter()
        .filter(|c| c.build == Build::Previous)
        .count();
    assert!(
        stopped_mid_call > 0,
        "a node was stopped while creates it took waited for the upstream"
    );
    assert!(
        [Build::Previous, Build::CurrentInClear, Build::Current]
            .iter()
            .all(|b| seen.completed.iter().any(|(_, by)| by == b)),
        "the upstream reported transfers to nodes of every build"
    );
    assert!(
        old_after_migration > 0,
        "the old nodes answered creates on the migrated schema"
    );
    // The rollback's nodes served the payments this build had written, and created more.
    let rolled_back_at = rolled_back_at.expect("the rollback ran");
    let current_before_rollback = seen.created[..rolled_back_at]
        .iter()
        .any(|c| c.build == Build::CurrentInClear);
    let previous_after_rollback = seen.created[..rolled_back_at]
        .iter()
        .rev()
        .take_while(|c| c.build != Build::CurrentInClear)
        .any(|c| c.build == Build::Previous);
    assert!(
        current_before_rollback && previous_after_rollback,
        "this build created payments, then the rolled-back nodes did"
    );
    assert!(
        seen.reads.contains(&Build::Previous)
            && by(Build::CurrentInClear) > 0
            && by(Build::Current) > 0,
        "every build served"
    );
    assert!(
        reseal["requisites_resealed"].as_u64().unwrap()
            + reseal["requisites_already_current"].as_u64().unwrap()
            >= seen.created.len() as u64,
        "every payment has its requisites sealed now: {reseal}"
    );
    assert_eq!(reseal["requisites_changed_meanwhile"], 0, "{reseal}");
    assert!(
        reseal["requisites_resealed"].as_u64().unwrap() > 0,
        "{reseal}"
    );

    assert_issued_once(&seen, &up.issued_requisites());
    let clients: Vec<MerchantClient> = cluster.nodes.iter().map(client_of).collect();
    assert_read_and_called_back(&clients, &seen, &receiver).await;
}
