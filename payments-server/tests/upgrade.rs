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
//! Needs `DATABASE_URL` and the previous release's server binary in
//! `PAYMENTS_PREVIOUS_RELEASE` (`.ci/run` builds it from the commit in
//! `.ci/previous-release`); ignored in a plain `cargo test`, and failing when asked for without
//! them.

use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use payments_client::{MerchantClient, SandboxCredentials};
use payments_server::testing::free_port;
use payments_store_postgres::testing::{database_url, fresh_schema};
use serde_json::json;

const NODES: usize = 2;

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
    build: Build,
    child: Option<Child>,
}

struct Cluster {
    previous: PathBuf,
    data_dir: PathBuf,
    database_url: String,
    nodes: Vec<Node>,
    starts: usize,
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
}

/// The balancer's rotation: the nodes a request may go to, and each one's build and client.
type Rotation = Arc<Mutex<Vec<(usize, Build, MerchantClient)>>>;

/// Creates and reads, round robin over the rotation, until `stop`.
async fn load(rotation: Rotation, seen: Arc<Mutex<Seen>>, stop: Arc<AtomicBool>) {
    let mut n = 0usize;
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
        let body = json!({"merchant_payment_id": format!("roll-{n}"), "amount": "2500.00",
                          "payment_method": method});
        match client.create_payment(&body).await {
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

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs PostgreSQL (DATABASE_URL) and the previous release (PAYMENTS_PREVIOUS_RELEASE)"]
async fn a_rolling_upgrade_from_the_previous_release_under_load() {
    let previous = previous_release();
    let base = database_url();
    let dir = tempfile::tempdir().expect("a temporary directory");
    let mut cluster = Cluster {
        previous,
        data_dir: dir.path().to_path_buf(),
        database_url: fresh_schema(&base).await,
        nodes: (0..NODES)
            .map(|_| Node {
                listen: SocketAddr::from(([127, 0, 0, 1], free_port())),
                operator: SocketAddr::from(([127, 0, 0, 1], free_port())),
                cabinet: SocketAddr::from(([127, 0, 0, 1], free_port())),
                build: Build::Previous,
                child: None,
            })
            .collect(),
        starts: 0,
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
    let seen = Arc::new(Mutex::new(Seen::default()));
    let stop = Arc::new(AtomicBool::new(false));
    let load = tokio::spawn(load(rotation.clone(), seen.clone(), stop.clone()));
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
    load.await.expect("the load ran to its end");
    let out = cluster.run(Build::Current, &["callback-secret", "reseal", "--json"]);
    let reseal: serde_json::Value = serde_json::from_str(&out).expect("JSON");
    say(&format!("reseal: {reseal}"));

    let seen = std::mem::take(&mut *seen.lock().unwrap());
    let by = |b: Build| seen.created.iter().filter(|c| c.build == b).count();
    say(&format!(
        "{} creates ({} by the previous release, {} after the migration), {} reads, {} failures",
        seen.created.len(),
        by(Build::Previous),
        seen.created.len() - migrated_at,
        seen.reads.len(),
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

    // Every payment reads back, through this build, with the requisite its create answered.
    let client = client_of(&cluster.nodes[0]);
    for c in &seen.created {
        let r = loop {
            let r = client.get_payment(&c.payment_id).await.expect("a read");
            if r.status.as_u16() != 429 {
                break r;
            }
            tokio::time::sleep(Duration::from_millis(200)).await;
        };
        assert_eq!(r.status.as_u16(), 200, "{}", r.json);
        assert_eq!(
            r.json["requisite"],
            c.requisite.as_str(),
            "{}",
            c.payment_id
        );
    }
}
