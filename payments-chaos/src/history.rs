//! The history: every operation a client made, with when it was invoked and when (and how) it
//! completed, in Jepsen's terms: `ok` (the service said it happened), `fail` (the service said
//! it did not, or the request never left: a refused connection) or `info` (unknown: a timeout,
//! a cut connection, a `5xx`).

use std::path::Path;
use std::sync::{Arc, Mutex};
use std::time::Instant;

use serde::Serialize;
use serde_json::Value;

/// How an operation ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Outcome {
    /// The service answered that it happened (`2xx`).
    Ok,
    /// The service answered that it did not (`4xx`), or the request was never sent.
    Fail,
    /// Unknown: no answer, a cut connection, a `5xx`.
    Info,
}

/// One operation of the history.
#[derive(Debug, Clone, Serialize)]
pub struct Op {
    /// Its number in the run, in order of invocation.
    pub id: u64,
    /// The client that made it (`nemesis` operations are not in the history).
    pub client: usize,
    /// The node it was sent to.
    pub node: usize,
    /// What it was (`create`, `read`, `confirm`, ...).
    pub kind: &'static str,
    /// Its arguments (the payment, the body's parts that matter).
    pub args: Value,
    /// Milliseconds since the run started, when it was sent.
    pub invoked_ms: u64,
    /// Milliseconds since the run started, when it completed.
    pub completed_ms: u64,
    /// How it ended.
    pub outcome: Outcome,
    /// The HTTP status, when there was an answer.
    pub status: Option<u16>,
    /// The answer's body (JSON), or the transport error's text.
    pub result: Value,
}

impl Op {
    /// The answer's error `code`, when it is an error answer.
    pub fn code(&self) -> Option<&str> {
        self.result.get("code").and_then(Value::as_str)
    }

    /// Whether this operation completed before `other` was invoked (real-time order).
    pub fn precedes(&self, other: &Op) -> bool {
        self.completed_ms < other.invoked_ms
    }
}

/// One fault of the nemesis: what, on what, from when until when.
#[derive(Debug, Clone, Serialize)]
pub struct Fault {
    /// Its kind (`nemesis::KINDS`).
    pub kind: &'static str,
    /// What it hit (`node 1`, `bank-a`, `postgresql`, `disk`).
    pub target: String,
    /// Milliseconds since the run started, when it began.
    pub from_ms: u64,
    /// When it was healed.
    pub until_ms: u64,
}

/// The history of a run, shared by its clients and its nemesis.
#[derive(Debug, Clone)]
pub struct History {
    started: Instant,
    started_unix_ms: u64,
    ops: Arc<Mutex<Vec<Op>>>,
    faults: Arc<Mutex<Vec<Fault>>>,
    next: Arc<std::sync::atomic::AtomicU64>,
}

impl History {
    /// An empty history whose times count from `started`.
    pub fn new(started: Instant) -> History {
        let started_unix_ms = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| u64::try_from(d.as_millis()).unwrap_or(0))
            .saturating_sub(u64::try_from(started.elapsed().as_millis()).unwrap_or(0));
        History {
            started,
            started_unix_ms,
            ops: Arc::default(),
            faults: Arc::default(),
            next: Arc::default(),
        }
    }

    /// Records a fault that began at `from_ms` and is healed now.
    pub fn fault(&self, kind: &'static str, target: String, from_ms: u64) {
        let until_ms = self.now_ms();
        self.faults.lock().expect("faults lock").push(Fault {
            kind,
            target,
            from_ms,
            until_ms,
        });
    }

    /// Every fault so far.
    pub fn faults(&self) -> Vec<Fault> {
        self.faults.lock().expect("faults lock").clone()
    }

    /// Milliseconds since the run started.
    pub fn now_ms(&self) -> u64 {
        u64::try_from(self.started.elapsed().as_millis()).unwrap_or(u64::MAX)
    }

    /// A new operation's number and its invocation time.
    pub fn invoke(&self) -> (u64, u64) {
        let id = self.next.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        (id, self.now_ms())
    }

    /// Records a completed operation.
    pub fn record(&self, op: Op) {
        debug_assert!(op.invoked_ms <= op.completed_ms);
        self.ops.lock().expect("history lock").push(op);
    }

    /// Every operation so far, in order of invocation.
    pub fn ops(&self) -> Vec<Op> {
        let mut ops = self.ops.lock().expect("history lock").clone();
        ops.sort_by_key(|o| o.id);
        ops
    }

    /// Writes the history as JSON lines: a `run` line (its wall-clock start), then an
    /// `invoke` line and a completion line per operation and a `nemesis` line at the start and
    /// at the end of each fault, in the order they happened (`at_ms` since the start).
    pub fn write_jsonl(&self, path: &Path) -> std::io::Result<()> {
        use std::io::Write as _;
        let ops = self.ops();
        let mut lines: Vec<(u64, u8, Value)> = Vec::with_capacity(ops.len() * 2);
        lines.push((
            0,
            0,
            serde_json::json!({"type": "run", "started_unix_ms": self.started_unix_ms, "at_ms": 0}),
        ));
        for f in self.faults() {
            lines.push((
                f.from_ms,
                0,
                serde_json::json!({"type": "nemesis", "phase": "start", "kind": f.kind,
                    "target": f.target, "at_ms": f.from_ms}),
            ));
            lines.push((
                f.until_ms,
                1,
                serde_json::json!({"type": "nemesis", "phase": "healed", "kind": f.kind,
                    "target": f.target, "at_ms": f.until_ms}),
            ));
        }
        for op in &ops {
            lines.push((
                op.invoked_ms,
                0,
                serde_json::json!({"type": "invoke", "id": op.id, "client": op.client,
                    "node": op.node, "kind": op.kind, "args": op.args, "at_ms": op.invoked_ms}),
            ));
            lines.push((
                op.completed_ms,
                1,
                serde_json::json!({"type": op.outcome, "id": op.id, "client": op.client,
                    "node": op.node, "kind": op.kind, "status": op.status,
                    "result": op.result, "at_ms": op.completed_ms}),
            ));
        }
        lines.sort_by_key(|(at, order, _)| (*at, *order));
        let mut out = std::io::BufWriter::new(std::fs::File::create(path)?);
        for (_, _, line) in lines {
            writeln!(out, "{line}")?;
        }
        out.flush()
    }
}
