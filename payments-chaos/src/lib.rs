//! The history checker: real `payments-server` nodes (three on one PostgreSQL, or one on
//! SQLite) under faults, a seeded mix of client operations recorded as a history, and named
//! invariants checked over the history and the final state (docs/correctness.md).
//!
//! [`run`] does one run: it starts the harness's upstream (two providers that record every
//! requisite they issue) and callback receiver, the nodes behind fault proxies, the clients
//! ([`workload`]) and the nemesis ([`nemesis`]) for the run's length; then heals every fault,
//! repeats the creates whose outcome is unknown, waits for the service to settle, reads the
//! final state ([`state`]) and checks it ([`checker`]). The seed decides the operations, their
//! nodes and the faults: the same seed replays the same schedule.

pub mod checker;
pub mod cluster;
pub mod history;
pub mod nemesis;
pub mod proxy;
pub mod receiver;
pub mod rng;
pub mod state;
pub mod upstream;
pub mod workload;

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use payments_client::{MerchantClient, SandboxCredentials};
use payments_core::callback::CallbackSecret;
use serde::Serialize;
use serde_json::json;

use crate::checker::{Evidence, Verdict};
use crate::cluster::{Database, Launch, Node, SmallDisk};
use crate::history::{History, Outcome};
use crate::nemesis::Cluster;
use crate::receiver::Receiver;
use crate::rng::Rng;
use crate::upstream::Upstream;
use crate::workload::{Client, Endpoint, World};

/// Why a run could not be made (not an anomaly: the harness itself failed).
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// A file, a socket or a process.
    #[error(transparent)]
    Io(#[from] std::io::Error),
    /// The database.
    #[error("the database: {0}")]
    Database(#[from] tokio_postgres::Error),
    /// The sandbox's credentials file.
    #[error("the sandbox's credentials: {0}")]
    Credentials(#[from] payments_client::CredentialsError),
    /// A merchant client.
    #[error("a merchant client: {0}")]
    Client(#[from] payments_client::ClientError),
    /// An HTTP request of the setup.
    #[error("the setup's request: {0}")]
    Http(#[from] reqwest::Error),
    /// Something the run needs is missing or refused (the reason).
    #[error("{0}")]
    Setup(String),
}

/// Where the nodes keep their data.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum StoreKind {
    /// Several nodes on one PostgreSQL database (`DATABASE_URL`).
    Postgres,
    /// One node on SQLite in its data dir.
    Sqlite,
}

/// What a run does.
#[derive(Debug, Clone)]
pub struct Options {
    /// The seed of the operations and faults.
    pub seed: u64,
    /// The store.
    pub store: StoreKind,
    /// Nodes (1 on SQLite).
    pub nodes: usize,
    /// Clients.
    pub clients: usize,
    /// How long the clients and the nemesis run.
    pub duration: Duration,
    /// The `payments-server` binary.
    pub server: PathBuf,
    /// Where the history, the report and the nodes' logs go.
    pub out: PathBuf,
    /// A planted bug to switch on in the nodes.
    pub planted_bug: Option<String>,
    /// Without faults.
    pub calm: bool,
    /// Only these kinds of fault ([`nemesis::KINDS`]); empty: every kind that can be made.
    pub faults: Vec<String>,
    /// Every kind of fault must be possible (in CI: a missing `pg_ctl` or a failed mount is
    /// an error, not a fault left out).
    pub strict: bool,
}

/// What a run found.
#[derive(Debug, Clone, Serialize)]
pub struct Report {
    /// The seed (replays the schedule).
    pub seed: u64,
    /// The store.
    pub store: StoreKind,
    /// Nodes.
    pub nodes: usize,
    /// How long the clients and the nemesis ran, seconds.
    pub seconds: u64,
    /// Operations by kind and outcome.
    pub operations: BTreeMap<String, BTreeMap<String, u64>>,
    /// All operations.
    pub total_operations: usize,
    /// Operations that ended unknown.
    pub unknown: usize,
    /// Faults injected, by kind.
    pub faults: BTreeMap<&'static str, u64>,
    /// Faults that could not be made here (and why).
    pub left_out: Vec<String>,
    /// Payments at the end.
    pub payments: usize,
    /// Callback deliveries the receiver got.
    pub deliveries: usize,
    /// Whether the service settled (nothing created, no callback pending) before the check.
    pub settled: bool,
    /// The invariants.
    pub verdicts: Vec<Verdict>,
}

impl Report {
    /// The invariants with violations.
    pub fn anomalies(&self) -> Vec<&Verdict> {
        self.verdicts
            .iter()
            .filter(|v| !v.violations.is_empty())
            .collect()
    }

    /// Whether invariant `name` was violated.
    pub fn violated(&self, name: &str) -> bool {
        self.anomalies().iter().any(|v| v.name == name)
    }

    /// The report as text: the figures, then each invariant with its first violations.
    pub fn text(&self) -> String {
        let mut s = format!(
            "seed {} ({:?}, {} node(s), {} s): {} operations ({} unknown), {} payments, {} \
             callback deliveries, settled: {}\nfaults: {:?}\n",
            self.seed,
            self.store,
            self.nodes,
            self.seconds,
            self.total_operations,
            self.unknown,
            self.payments,
            self.deliveries,
            self.settled,
            self.faults
        );
        for l in &self.left_out {
            s.push_str(&format!("left out: {l}\n"));
        }
        for v in &self.verdicts {
            let mark = if v.violations.is_empty() {
                "ok  "
            } else {
                "FAIL"
            };
            s.push_str(&format!("{mark} {} ({} checked)\n", v.name, v.checked));
            for line in v.violations.iter().take(10) {
                s.push_str(&format!("       {line}\n"));
            }
            if v.violations.len() > 10 {
                s.push_str(&format!("       ... {} more\n", v.violations.len() - 10));
            }
        }
        s
    }
}

/// Binds 127.0.0.1:0.
async fn listener() -> Result<tokio::net::TcpListener, Error> {
    Ok(tokio::net::TcpListener::bind("127.0.0.1:0").await?)
}

/// Where the nodes keep their data: the database (URL and server) or the small disk.
struct Storage {
    database_url: Option<url::Url>,
    database: Option<Database>,
    disk: Option<SmallDisk>,
    nodes: usize,
    left_out: Vec<String>,
}

async fn storage(opts: &Options) -> Result<Storage, Error> {
    let mut left_out = Vec::new();
    match opts.store {
        StoreKind::Postgres => {
            let base = std::env::var("DATABASE_URL")
                .map_err(|_| Error::Setup("DATABASE_URL is not set (PostgreSQL runs)".into()))?;
            let url = cluster::fresh_schema(&base, opts.seed).await?;
            let database = Database::from_env();
            if database.is_none() {
                let why = "database_restart, database_kill: PAYMENTS_TEST_PG_CTL and \
                           PAYMENTS_TEST_PG_DATA are not set";
                if opts.strict {
                    return Err(Error::Setup(why.into()));
                }
                left_out.push(why.to_string());
            }
            Ok(Storage {
                database_url: Some(url),
                database,
                disk: None,
                nodes: opts.nodes,
                left_out,
            })
        }
        StoreKind::Sqlite => {
            let disk = match SmallDisk::mount(256) {
                Ok(d) => Some(d),
                Err(e) if opts.strict => return Err(e),
                Err(e) => {
                    left_out.push(format!("disk_full: {e}"));
                    None
                }
            };
            Ok(Storage {
                database_url: None,
                database: None,
                disk,
                nodes: 1,
                left_out,
            })
        }
    }
}

/// The nodes over `storage`, started (the first bootstraps the sandbox, then the others join).
async fn start_cluster(
    opts: &Options,
    storage: Storage,
    work: &std::path::Path,
    upstream: &Upstream,
    upstream_addr: std::net::SocketAddr,
    history: &History,
) -> Result<Arc<Cluster>, Error> {
    let data_dir = storage
        .disk
        .as_ref()
        .map_or_else(|| work.join("data"), |d| d.path().join("data"));
    std::fs::create_dir_all(&data_dir)?;
    let launch = Launch {
        binary: opts.server.clone(),
        data_dir,
        logs: opts.out.clone(),
        database_url: storage.database_url.clone(),
        planted_bug: opts.planted_bug.clone(),
    };
    let database_addr = storage
        .database_url
        .as_ref()
        .map(cluster::database_addr)
        .transpose()?;
    let mut built = Vec::new();
    for i in 0..storage.nodes {
        built.push(Node::new(i, &launch, database_addr, upstream_addr).await?);
    }
    let mut cluster = Cluster::new(
        launch,
        built,
        storage.database,
        storage.disk,
        upstream.clone(),
        history.clone(),
    );
    cluster.only = opts.faults.clone();
    let cluster = Arc::new(cluster);
    for i in 0..storage.nodes {
        cluster.start(i).await?;
    }
    if let Some(t) = cluster.trouble.lock().expect("trouble lock").first() {
        return Err(Error::Setup(format!("the nodes did not start: {t}")));
    }
    Ok(cluster)
}

/// The clients and the nemesis, at once, for the run's length.
async fn drive(opts: &Options, world: &Arc<World>, cluster: &Arc<Cluster>) {
    let until = Instant::now() + opts.duration;
    let mut tasks = Vec::new();
    for c in 0..opts.clients {
        let plan = Rng::new(opts.seed, 100 + c as u64);
        let client = Client::new(world.clone(), c, plan, Rng::new(opts.seed, 200 + c as u64));
        tasks.push(tokio::spawn(client.run(until)));
    }
    if !opts.calm {
        for i in 0..cluster.nodes.len() {
            let rng = Rng::new(opts.seed, 10 + i as u64);
            tasks.push(tokio::spawn(cluster.clone().node_lane(i, rng, until)));
        }
        let rng = Rng::new(opts.seed, 1);
        tasks.push(tokio::spawn(cluster.clone().shared_lane(rng, until)));
    }
    for t in tasks {
        let _ = t.await;
    }
}

/// One run.
pub async fn run(opts: &Options) -> Result<Report, Error> {
    std::fs::create_dir_all(&opts.out)?;
    let started = Instant::now();
    let upstream = Upstream::new(opts.seed);
    let upstream_listener = listener().await?;
    let upstream_addr = upstream_listener.local_addr()?;
    upstream.serve(upstream_listener);
    let receiver = Receiver::new(opts.seed);
    let receiver_listener = listener().await?;
    let receiver_url = format!("http://{}/cb", receiver_listener.local_addr()?);
    receiver.serve(receiver_listener);

    let work = tempfile::tempdir()?;
    let storage = storage(opts).await?;
    let left_out = storage.left_out.clone();
    let history = History::new(started);
    let cluster = start_cluster(
        opts,
        storage,
        work.path(),
        &upstream,
        upstream_addr,
        &history,
    )
    .await?;
    let world = setup(&cluster, &receiver, &receiver_url, upstream, history).await?;
    let world = Arc::new(world);
    drive(opts, &world, &cluster).await;

    // Healed, settled, read, checked.
    cluster.heal_all().await;
    workload::resolve_unknown_creates(&world, Duration::from_secs(90)).await;
    let settled = state::settle(&world, Duration::from_secs(150)).await;
    let fin = state::read(&world).await;
    let report = judge(opts, &world, &cluster, &receiver, &fin, settled, left_out);
    world.history.write_jsonl(&opts.out.join("history.jsonl"))?;
    write_evidence(opts, &receiver, &fin)?;
    std::fs::write(
        opts.out.join("report.json"),
        serde_json::to_vec_pretty(&report).unwrap_or_default(),
    )?;
    drop(cluster);
    Ok(report)
}

/// What the checker read besides the history, for whoever looks into a failure: the
/// receiver's deliveries and the final state.
fn write_evidence(opts: &Options, receiver: &Receiver, fin: &state::Final) -> Result<(), Error> {
    use std::io::Write as _;
    let mut out =
        std::io::BufWriter::new(std::fs::File::create(opts.out.join("deliveries.jsonl"))?);
    for d in receiver.deliveries() {
        let line = json!({"event_id": d.event_id, "signed": d.signed, "answered": d.answered,
            "body": String::from_utf8_lossy(&d.body)});
        writeln!(out, "{line}")?;
    }
    out.flush()?;
    let snapshot = json!({"payments": fin.per_node, "events": fin.events,
        "entries": fin.entries, "balances": fin.balances, "reconcile": fin.reconcile,
        "unreadable": fin.unreadable});
    std::fs::write(
        opts.out.join("final.json"),
        serde_json::to_vec(&snapshot).unwrap_or_default(),
    )?;
    Ok(())
}

/// The invariants checked over the history and the final state, with the run's figures.
fn judge(
    opts: &Options,
    world: &World,
    cluster: &Cluster,
    receiver: &Receiver,
    fin: &state::Final,
    settled: bool,
    left_out: Vec<String>,
) -> Report {
    let ops = world.history.ops();
    let unresolved: Vec<String> = world
        .creates
        .lock()
        .expect("creates lock")
        .iter()
        .filter(|(_, v)| v.2)
        .map(|(k, _)| k.clone())
        .collect();
    let deliveries = receiver.deliveries();
    let mut trouble = cluster.trouble.lock().expect("trouble lock").clone();
    if !settled {
        trouble.push(
            "the service did not settle in 150 s after the faults were healed (a payment \
             still created or processing, or a callback still pending)"
                .into(),
        );
    }
    trouble.extend(
        fin.unreadable
            .iter()
            .map(|u| format!("could not read {u} at the end")),
    );
    let verdicts = checker::check(&Evidence {
        ops: &ops,
        fin,
        issued: &cluster.upstream.issued(),
        unsigned: &cluster.upstream.unsigned(),
        deliveries: &deliveries,
        trouble: &trouble,
        unresolved: &unresolved,
    });
    let mut operations: BTreeMap<String, BTreeMap<String, u64>> = BTreeMap::new();
    for op in &ops {
        let outcome = match op.outcome {
            Outcome::Ok => "ok",
            Outcome::Fail => "fail",
            Outcome::Info => "info",
        };
        *operations
            .entry(op.kind.to_string())
            .or_default()
            .entry(outcome.to_string())
            .or_default() += 1;
    }
    Report {
        seed: opts.seed,
        store: opts.store,
        nodes: cluster.nodes.len(),
        seconds: opts.duration.as_secs(),
        total_operations: ops.len(),
        unknown: ops.iter().filter(|o| o.outcome == Outcome::Info).count(),
        operations,
        faults: cluster.injected(),
        left_out,
        payments: fin.listed.len(),
        deliveries: deliveries.len(),
        settled,
        verdicts,
    }
}

/// The projects' callback URL and rate limit, the merchant clients of every node.
async fn setup(
    cluster: &Cluster,
    receiver: &Receiver,
    receiver_url: &str,
    upstream: Upstream,
    history: History,
) -> Result<World, Error> {
    let creds =
        SandboxCredentials::from_file(cluster.launch.data_dir.join("sandbox-credentials.json"))?;
    let test = creds
        .for_test_project()
        .ok_or_else(|| Error::Setup("the sandbox has no test project".into()))?;
    receiver.add_secret(
        CallbackSecret::parse(creds.callback_secret.expose())
            .map_err(|e| Error::Setup(format!("the callback secret: {e}")))?,
    );
    let http = reqwest::Client::builder()
        .timeout(workload::TIMEOUT)
        .build()?;
    let operator = cluster.nodes[0].lock().expect("node lock").operator_url();
    for project in [&creds.project_id, &test.project_id] {
        let r = http
            .patch(format!("{operator}/operator/v1/projects/{project}"))
            .bearer_auth(creds.operator_token.expose())
            // A minute's lifetime: expiries race the confirmations during the run, and after it
            // every payment closes before the final state is read.
            .json(
                &json!({"callback_url": receiver_url, "lifetime_seconds": 60,
                "rate_limit": {"per_second": 5000, "burst": 5000}}),
            )
            .send()
            .await?;
        if !r.status().is_success() {
            return Err(Error::Setup(format!(
                "patching project {project}: {} {}",
                r.status(),
                r.text().await.unwrap_or_default()
            )));
        }
    }
    let mut nodes = Vec::new();
    for n in &cluster.nodes {
        let n = n.lock().expect("node lock");
        let client = |c: &SandboxCredentials| {
            MerchantClient::new(
                &n.merchant_url(),
                c.token.expose(),
                c.private_key_pem.expose(),
            )
            .map(|m| m.with_http_client(http.clone()))
        };
        nodes.push(Endpoint {
            live: client(&creds)?,
            test: client(&test)?,
            operator: n.operator_url(),
            notifications: n.notifications_url(),
        });
    }
    Ok(World {
        history,
        nodes,
        http,
        operator_token: creds.operator_token.expose().to_string(),
        project_id: creds.project_id.clone(),
        upstream,
        known: Mutex::default(),
        creates: Mutex::default(),
        payouts: Mutex::default(),
        notifications: Mutex::default(),
        events: Mutex::default(),
        appeals: Mutex::default(),
    })
}
