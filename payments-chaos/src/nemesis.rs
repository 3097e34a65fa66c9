//! The nemesis: faults drawn from the seed, several at once. Each node has a lane of its own
//! (SIGKILL and restart, SIGSTOP longer than a lease then SIGCONT, cut from PostgreSQL, cut
//! from the upstream, its clock jumped forward or back and then returned), and one lane takes
//! the faults of what the nodes share (PostgreSQL restarted or killed, the upstream slow,
//! failing before acceptance or answering ambiguously, the SQLite disk filled). A lane's
//! faults, their targets, lengths and the pauses between them come from its own seeded
//! stream, so a seed replays the same schedule. Every fault is healed before its lane ends.

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use crate::cluster::{wait_ready, Database, Launch, Node, SmallDisk, LEASE};
use crate::history::History;
use crate::rng::Rng;
use crate::upstream::{Mode, Upstream};

/// The largest step of a `clock_jump`, either way. A fault steps the clock back by as much
/// when it heals (or forward, after a jump back).
pub const MAX_CLOCK_JUMP: Duration = Duration::from_secs(120);

/// The kinds of fault, as named in the report.
pub const KINDS: [&str; 11] = [
    "kill",
    "pause",
    "cut_database",
    "cut_upstream",
    "clock_jump",
    "database_restart",
    "database_kill",
    "upstream_slow",
    "upstream_failing",
    "upstream_ambiguous",
    "disk_full",
];

/// What the faults act on.
#[derive(Debug)]
pub struct Cluster {
    /// How the nodes start.
    pub launch: Launch,
    /// The nodes.
    pub nodes: Vec<Mutex<Node>>,
    /// PostgreSQL's server, when the nodes share one.
    pub database: Option<Database>,
    /// The SQLite node's small disk.
    pub disk: Option<SmallDisk>,
    /// The upstream.
    pub upstream: Upstream,
    /// Faults injected, by kind.
    pub injected: Mutex<BTreeMap<&'static str, u64>>,
    /// Nodes that did not come back after a restart, and nodes that exited by themselves.
    pub trouble: Mutex<Vec<String>>,
    /// Only these kinds of fault (empty: all).
    pub only: Vec<String>,
    /// Where the faults are recorded.
    pub history: History,
    http: reqwest::Client,
}

impl Cluster {
    /// A cluster of `nodes` (not started).
    pub fn new(
        launch: Launch,
        nodes: Vec<Node>,
        database: Option<Database>,
        disk: Option<SmallDisk>,
        upstream: Upstream,
        history: History,
    ) -> Cluster {
        Cluster {
            launch,
            nodes: nodes.into_iter().map(Mutex::new).collect(),
            database,
            disk,
            upstream,
            injected: Mutex::default(),
            trouble: Mutex::default(),
            only: Vec::new(),
            history,
            http: reqwest::Client::new(),
        }
    }

    fn node(&self, i: usize) -> std::sync::MutexGuard<'_, Node> {
        self.nodes[i].lock().expect("node lock")
    }

    fn note_trouble(&self, what: String) {
        self.trouble.lock().expect("trouble lock").push(what);
    }

    fn count(&self, kind: &'static str) {
        *self
            .injected
            .lock()
            .expect("injected lock")
            .entry(kind)
            .or_default() += 1;
    }

    /// Starts node `i` and waits until it is ready (at most a minute).
    pub async fn start(&self, i: usize) -> Result<(), crate::Error> {
        self.node(i).start(&self.launch)?;
        self.ready(i).await;
        Ok(())
    }

    /// Waits until node `i` is ready (at most a minute), starting it again, as its service
    /// manager would (systemd's `Restart=on-failure`, `RestartSec=2`), when it exits because
    /// its database cannot be reached at start or goes away while it starts: that is how a
    /// node refuses to start without its database. Any other exit is trouble.
    async fn ready(&self, i: usize) {
        // The readiness wait holds no lock: a node's addresses never change.
        let url = self.node(i).merchant_url();
        let deadline = Instant::now() + Duration::from_secs(60);
        while Instant::now() < deadline {
            if wait_ready(&self.http, &url, Duration::from_millis(200)).await {
                return;
            }
            let exited = self.node(i).exited();
            if let Some(status) = exited {
                let why = self.node(i).last_log_line(&self.launch);
                // `payments-server: database_url: ...`: it could not connect, or the connection
                // closed while it read the schema version (the database restarting).
                if !why.contains("database_url:") {
                    self.note_trouble(format!("node {i} exited ({status}) at its start: {why}"));
                }
                self.count("restarted_by_supervisor");
                tokio::time::sleep(Duration::from_secs(2)).await;
                if let Err(e) = self.node(i).start(&self.launch) {
                    self.note_trouble(format!("node {i} did not start again: {e}"));
                    return;
                }
            }
        }
        self.note_trouble(format!("node {i} was not ready a minute after its start"));
    }

    /// The faults that make sense here.
    fn node_kinds(&self) -> Vec<&'static str> {
        let mut kinds = vec!["kill", "pause", "cut_upstream", "clock_jump"];
        if self.node(0).database.is_some() {
            kinds.push("cut_database");
        }
        self.chosen(kinds)
    }

    fn chosen(&self, kinds: Vec<&'static str>) -> Vec<&'static str> {
        kinds
            .into_iter()
            .filter(|k| self.only.is_empty() || self.only.iter().any(|o| o == k))
            .collect()
    }

    fn shared_kinds(&self) -> Vec<&'static str> {
        let mut kinds = vec!["upstream_slow", "upstream_failing", "upstream_ambiguous"];
        if self.database.is_some() {
            kinds.extend(["database_restart", "database_kill"]);
        }
        if self.disk.is_some() {
            kinds.push("disk_full");
        }
        self.chosen(kinds)
    }

    /// Node `i`'s lane until `until`.
    pub async fn node_lane(self: Arc<Self>, i: usize, mut rng: Rng, until: Instant) {
        let kinds = self.node_kinds();
        if kinds.is_empty() {
            return;
        }
        loop {
            let gap = Duration::from_millis(rng.between(1_500, 5_000));
            let kind = kinds[rng.below(kinds.len() as u64) as usize];
            let hold = Duration::from_millis(rng.between(500, 5_000));
            let most = u64::try_from(MAX_CLOCK_JUMP.as_millis()).unwrap_or(120_000);
            let jump = i64::try_from(rng.between(5_000, most)).unwrap_or(5_000)
                * if rng.chance(50) { 1 } else { -1 };
            tokio::time::sleep(gap).await;
            if Instant::now() + hold >= until {
                return;
            }
            self.count(kind);
            let from = self.history.now_ms();
            match kind {
                "kill" => {
                    self.node(i).kill();
                    tokio::time::sleep(hold).await;
                    if let Err(e) = self.start(i).await {
                        self.note_trouble(format!("node {i} did not start again: {e}"));
                    }
                }
                "pause" => {
                    self.node(i).pause(true);
                    // Longer than any lease: its callback attempts go to the others.
                    tokio::time::sleep(LEASE + hold / 2).await;
                    self.node(i).pause(false);
                }
                "cut_database" | "cut_upstream" => {
                    let proxy = {
                        let node = self.node(i);
                        if kind == "cut_database" {
                            node.database.clone()
                        } else {
                            Some(node.upstream.clone())
                        }
                    };
                    if let Some(p) = proxy {
                        p.cut();
                        tokio::time::sleep(hold).await;
                        p.heal();
                    }
                }
                "clock_jump" => {
                    let _ = self.node(i).set_clock(jump);
                    tokio::time::sleep(hold).await;
                    let _ = self.node(i).set_clock(0);
                }
                _ => unreachable!("a node fault: {kind}"),
            }
            let target = if kind == "clock_jump" {
                format!("node {i} ({jump:+} ms)")
            } else {
                format!("node {i}")
            };
            self.history.fault(kind, target, from);
            self.note_exits();
        }
    }

    /// The shared lane until `until`.
    pub async fn shared_lane(self: Arc<Self>, mut rng: Rng, until: Instant) {
        let kinds = self.shared_kinds();
        if kinds.is_empty() {
            return;
        }
        loop {
            let gap = Duration::from_millis(rng.between(2_000, 6_000));
            let kind = kinds[rng.below(kinds.len() as u64) as usize];
            let hold = Duration::from_millis(rng.between(500, 4_000));
            let provider = rng.below(2) as usize;
            tokio::time::sleep(gap).await;
            if Instant::now() + hold >= until {
                return;
            }
            self.count(kind);
            let from = self.history.now_ms();
            match kind {
                "upstream_slow" | "upstream_failing" | "upstream_ambiguous" => {
                    let mode = match kind {
                        "upstream_slow" => Mode::Slow,
                        "upstream_failing" => Mode::Failing,
                        _ => Mode::Ambiguous,
                    };
                    self.upstream.set_mode(provider, mode);
                    tokio::time::sleep(hold).await;
                    self.upstream.set_mode(provider, Mode::Normal);
                }
                "database_restart" => self.database_fault(None).await,
                "database_kill" => self.database_fault(Some(hold)).await,
                "disk_full" => {
                    if let Some(disk) = &self.disk {
                        let _ = disk.fill();
                        tokio::time::sleep(hold).await;
                        disk.free();
                    }
                }
                _ => unreachable!("a shared fault: {kind}"),
            }
            let target = match kind {
                "database_restart" | "database_kill" => "postgresql".to_string(),
                "disk_full" => "disk".to_string(),
                _ => crate::upstream::PROVIDERS[provider].to_string(),
            };
            self.history.fault(kind, target, from);
            self.note_exits();
        }
    }

    /// Restarts PostgreSQL (fast), or kills it (immediate) and starts it after `down`.
    async fn database_fault(&self, down: Option<Duration>) {
        let Some(db) = self.database.clone() else {
            return;
        };
        let result = tokio::task::spawn_blocking(move || match down {
            None => db.restart(),
            Some(down) => {
                let options = db.kill()?;
                std::thread::sleep(down);
                db.start(&options)
            }
        })
        .await;
        if let Ok(Err(e)) = result {
            self.note_trouble(format!("the database fault failed: {e}"));
        }
    }

    /// Records nodes that exited by themselves (a crash is an anomaly) and starts them again.
    /// A start refused without the database (another lane's restart, seen here first) is the
    /// supervisor's to restart, as in [`Cluster::ready`]; any other exit is trouble.
    fn note_exits(&self) {
        for i in 0..self.nodes.len() {
            let mut node = self.node(i);
            if let Some(status) = node.exited() {
                let why = node.last_log_line(&self.launch);
                if why.contains("database_url:") {
                    self.count("restarted_by_supervisor");
                } else {
                    self.note_trouble(format!("node {i} exited by itself ({status}): {why}"));
                }
                let _ = node.start(&self.launch);
            }
        }
    }

    /// Heals what a lane may have left (it heals its own before it ends: this is for an
    /// interrupted run) and waits until every node is ready.
    pub async fn heal_all(&self) {
        for i in 0..self.nodes.len() {
            let up = {
                let mut node = self.node(i);
                node.pause(false);
                let _ = node.set_clock(0);
                if let Some(p) = &node.database {
                    p.heal();
                }
                node.upstream.heal();
                node.is_up()
            };
            if !up {
                let _ = self.start(i).await;
            }
        }
        for p in 0..2 {
            self.upstream.set_mode(p, Mode::Normal);
        }
        if let Some(d) = &self.disk {
            d.free();
        }
        self.note_exits();
        for i in 0..self.nodes.len() {
            self.ready(i).await;
        }
    }

    /// Faults injected, by kind.
    pub fn injected(&self) -> BTreeMap<&'static str, u64> {
        self.injected.lock().expect("injected lock").clone()
    }
}
