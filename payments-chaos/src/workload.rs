//! The clients: each draws a seeded mix of operations over the public and operator APIs and
//! the providers' notifications, sends each to a node drawn from the same stream, and records
//! it in the history. Creates use fresh and repeated `merchant_payment_id`s (the same body and
//! another one, one body to two nodes at once, one signed request to two nodes), with and
//! without metadata; reads come from any node; the providers confirm (some with another
//! amount) and fail transfers, sometimes twice with one `notification_id`; the operator
//! confirms, cancels, re-checks and resolves, records payouts (some repeated) and adjustments,
//! resends callbacks; the merchant resends and recovers events; test payments are closed by
//! the sandbox's helpers.

#[cfg(test)]
use std::collections::BTreeSet;
use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use payments_client::{ApiResponse, ClientError, MerchantClient, SignSpec};
use reqwest::Method;
use serde_json::{json, Value};

use crate::history::{History, Op, Outcome};
use crate::rng::Rng;
use crate::upstream::{Notification, Upstream};

/// How long a client waits for an answer: longer than a node's provider budget, shorter than
/// a SIGSTOP.
pub const TIMEOUT: Duration = Duration::from_secs(12);

/// The project a request is for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Project {
    /// The demo project (live flow: callbacks, ledger).
    Live,
    /// The sandbox's test-mode project (test payments: no automatic callbacks, no ledger).
    Test,
}

/// One node's addresses as the clients see them.
#[derive(Debug, Clone)]
pub struct Endpoint {
    /// Signed merchant requests for the live project.
    pub live: MerchantClient,
    /// Signed merchant requests for the test project.
    pub test: MerchantClient,
    /// `http://` of the operator API.
    pub operator: String,
    /// `http://` of the notification listener.
    pub notifications: String,
}

/// What every client shares.
#[derive(Debug)]
pub struct World {
    /// The history.
    pub history: History,
    /// The nodes.
    pub nodes: Vec<Endpoint>,
    /// Plain HTTP for the operator API.
    pub http: reqwest::Client,
    /// The operator token.
    pub operator_token: String,
    /// The live project's id.
    pub project_id: String,
    /// The upstream.
    pub upstream: Upstream,
    /// Payments some create answered, by id: (project, merchant payment id).
    pub known: Mutex<Vec<(String, Project)>>,
    /// Creates sent, by merchant payment id: the body, and whether the last outcome was
    /// unknown.
    pub creates: Mutex<HashMap<String, (Value, Project, bool)>>,
    /// Payout references recorded, with their bodies.
    pub payouts: Mutex<Vec<Value>>,
    /// Notifications sent: (provider, id, payment id, body parts).
    pub notifications: Mutex<Vec<Notification>>,
    /// Event ids seen in answers or deliveries, for resends.
    pub events: Mutex<Vec<String>>,
    /// Payments a re-check was started on, for the resolutions.
    pub appeals: Mutex<Vec<String>>,
}

/// The kinds of operation and their weights in the mix.
const MIX: [(&str, u64); 18] = [
    ("create", 24),
    ("create_repeat", 6),
    ("create_conflict", 3),
    ("create_twice", 3),
    ("replay", 2),
    ("read", 20),
    ("notify", 10),
    ("confirm", 3),
    ("cancel", 2),
    ("recheck", 2),
    ("resolve", 3),
    ("race", 3),
    ("payout", 2),
    ("adjustment", 2),
    ("event_resend", 1),
    ("events_recover", 1),
    ("test_payment", 2),
    ("callback_resend", 1),
];

/// A transport failure before the request left (nothing can have happened) or after.
fn transport(e: &reqwest::Error) -> (Outcome, Value) {
    let outcome = if e.is_connect() {
        Outcome::Fail
    } else {
        Outcome::Info
    };
    (outcome, json!({"transport": e.to_string()}))
}

/// An answer's outcome: `2xx` happened, `5xx` unknown, others did not.
fn answered(status: u16) -> Outcome {
    match status {
        200..=299 => Outcome::Ok,
        500..=599 => Outcome::Info,
        _ => Outcome::Fail,
    }
}

/// A merchant API result as (outcome, status, body).
fn merchant_result(r: Result<ApiResponse, ClientError>) -> (Outcome, Option<u16>, Value) {
    match r {
        Ok(a) => (answered(a.status.as_u16()), Some(a.status.as_u16()), a.json),
        Err(ClientError::Http(e)) => {
            let (o, v) = transport(&e);
            (o, None, v)
        }
        Err(e) => (Outcome::Fail, None, json!({"client": e.to_string()})),
    }
}

/// One step of a client's schedule: the operation, the nodes it goes to (the second for an
/// operation on two nodes), and the pause after it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Step {
    /// The kind of operation.
    pub kind: &'static str,
    /// Its node, and the other one when it uses two.
    pub nodes: [usize; 2],
    /// Milliseconds to wait after it.
    pub pause_ms: u64,
}

/// Draws a client's next step from its schedule stream: three draws each, whatever the
/// operations answered, so one seed gives every client the same steps on every run (which
/// payment a step acts on depends on what earlier steps were answered: that comes from the
/// client's other stream).
pub fn next_step(plan: &mut Rng, nodes: usize) -> Step {
    let weights: Vec<u64> = MIX.iter().map(|(_, w)| *w).collect();
    let kind = MIX[plan.weighted(&weights)].0;
    let n = nodes as u64;
    let nodes = [plan.below(n) as usize, plan.below(n) as usize];
    Step {
        kind,
        nodes,
        pause_ms: plan.below(60),
    }
}

/// A notification's answer as (outcome, status, body).
fn notification_result(r: Result<(u16, Value), reqwest::Error>) -> (Outcome, Option<u16>, Value) {
    match r {
        Ok((status, body)) => (answered(status), Some(status), body),
        Err(e) => {
            let (o, v) = transport(&e);
            (o, None, v)
        }
    }
}

/// One client of the run.
#[derive(Debug)]
pub struct Client {
    world: Arc<World>,
    index: usize,
    /// The schedule: steps ([`next_step`]).
    plan: Rng,
    /// The choices that depend on the answers (which payment, which amount).
    rng: Rng,
    step: Step,
    nodes_used: usize,
    fresh: u64,
}

impl Client {
    /// Client `index`, its schedule drawn from `plan` and its other choices from `rng`.
    pub fn new(world: Arc<World>, index: usize, plan: Rng, rng: Rng) -> Client {
        Client {
            world,
            index,
            plan,
            rng,
            step: Step {
                kind: "read",
                nodes: [0, 0],
                pause_ms: 0,
            },
            nodes_used: 0,
            fresh: 0,
        }
    }

    /// Runs its schedule until `until`.
    pub async fn run(mut self, until: Instant) {
        while Instant::now() < until {
            self.step = next_step(&mut self.plan, self.world.nodes.len());
            self.nodes_used = 0;
            self.perform(self.step.kind).await;
            tokio::time::sleep(Duration::from_millis(self.step.pause_ms)).await;
        }
    }

    /// The step's next node (its first, then its second).
    fn node(&mut self) -> usize {
        let node = self.step.nodes[self.nodes_used % 2];
        self.nodes_used += 1;
        node
    }

    async fn perform(&mut self, kind: &'static str) {
        match kind {
            "create" => {
                let (mpid, body) = self.fresh_body(Project::Live);
                let node = self.node();
                self.create(node, kind, &mpid, body, Project::Live).await;
            }
            "create_repeat" => self.create_repeat().await,
            "create_conflict" => self.create_conflict().await,
            "create_twice" => {
                let (mpid, body) = self.fresh_body(Project::Live);
                let (a, b) = (self.node(), self.node());
                let one = self.create(a, kind, &mpid, body.clone(), Project::Live);
                let two = self.create(b, kind, &mpid, body, Project::Live);
                let _ = futures_join(one, two).await;
            }
            "replay" => self.replay().await,
            "read" => {
                if let Some((id, project)) = self.some_payment() {
                    let node = self.node();
                    self.read(node, &id, project).await;
                }
            }
            "notify" => {
                let failed = self.rng.chance(15);
                let other = !failed && self.rng.chance(25);
                if let Some((id, _)) = self.some_payment_of(Project::Live) {
                    let node = self.node();
                    self.notify(node, &id, !failed, other).await;
                }
            }
            "confirm" | "cancel" | "recheck" => {
                if let Some((id, _)) = self.some_payment_of(Project::Live) {
                    let node = self.node();
                    let body = if kind == "confirm" && self.rng.chance(20) {
                        json!({"amount": self.amount()})
                    } else {
                        json!({})
                    };
                    self.operate(node, kind, &id, body).await;
                }
            }
            "resolve" => {
                let appealed = {
                    let appeals = self.world.appeals.lock().expect("appeals lock");
                    (!appeals.is_empty())
                        .then(|| appeals[self.rng.below(appeals.len() as u64) as usize].clone())
                };
                if let Some(id) =
                    appealed.or_else(|| self.some_payment_of(Project::Live).map(|p| p.0))
                {
                    let node = self.node();
                    let status = ["completed", "canceled", "unchanged"][self.rng.below(3) as usize];
                    self.operate(node, kind, &id, json!({"status": status}))
                        .await;
                }
            }
            "race" => self.race().await,
            "payout" => self.payout().await,
            "adjustment" => self.adjustment().await,
            "event_resend" => self.event_resend().await,
            "events_recover" => self.events_recover().await,
            "test_payment" => self.test_payment().await,
            "callback_resend" => {
                if let Some((id, _)) = self.some_payment_of(Project::Live) {
                    let node = self.node();
                    self.operate(node, kind, &id, json!({})).await;
                }
            }
            _ => unreachable!("an operation of the mix: {kind}"),
        }
    }

    fn amount(&mut self) -> String {
        format!("{}", self.rng.between(100, 50_000))
    }

    fn fresh_body(&mut self, project: Project) -> (String, Value) {
        self.fresh += 1;
        let mpid = format!("c{}-{}", self.index, self.fresh);
        let method = if self.rng.chance(50) {
            "sbp"
        } else {
            "card_transfer"
        };
        let mut body = json!({
            "merchant_payment_id": mpid,
            "amount": self.amount(),
            "currency": "RUB",
            "payment_method": method,
        });
        if self.rng.chance(40) {
            body["metadata"] = json!({"order": format!("o-{}", self.rng.hex(4)), "client": self.index.to_string()});
        }
        self.world
            .creates
            .lock()
            .expect("creates lock")
            .insert(mpid.clone(), (body.clone(), project, false));
        (mpid, body)
    }

    fn some_payment(&mut self) -> Option<(String, Project)> {
        let known = self.world.known.lock().expect("known lock");
        if known.is_empty() {
            return None;
        }
        // Mostly recent payments, where the action is.
        let n = known.len() as u64;
        let i = if self.rng.chance(70) {
            n - 1 - self.rng.below(n.min(20))
        } else {
            self.rng.below(n)
        };
        Some(known[i as usize].clone())
    }

    fn some_payment_of(&mut self, project: Project) -> Option<(String, Project)> {
        for _ in 0..4 {
            match self.some_payment() {
                Some(p) if p.1 == project => return Some(p),
                Some(_) => {}
                None => return None,
            }
        }
        None
    }

    fn record(
        &self,
        (id, invoked): (u64, u64),
        node: usize,
        kind: &'static str,
        args: Value,
        (outcome, status, result): (Outcome, Option<u16>, Value),
    ) -> Op {
        let op = Op {
            id,
            client: self.index,
            node,
            kind,
            args,
            invoked_ms: invoked,
            completed_ms: self.world.history.now_ms(),
            outcome,
            status,
            result,
        };
        self.world.history.record(op.clone());
        op
    }

    fn merchant(&self, node: usize, project: Project) -> &MerchantClient {
        match project {
            Project::Live => &self.world.nodes[node].live,
            Project::Test => &self.world.nodes[node].test,
        }
    }

    /// A create of `body` on `node`; remembers the payment it answered.
    async fn create(
        &self,
        node: usize,
        kind: &'static str,
        mpid: &str,
        body: Value,
        project: Project,
    ) -> Op {
        let started = self.world.history.invoke();
        let r = self.merchant(node, project).create_payment(&body).await;
        let op = self.record(
            started,
            node,
            kind,
            json!({"merchant_payment_id": mpid, "body": body,
                "project": format!("{project:?}")}),
            merchant_result(r),
        );
        self.remember_create(mpid, &op, project);
        op
    }

    fn remember_create(&self, mpid: &str, op: &Op, project: Project) {
        let same_body = op.kind != "create_conflict";
        if op.outcome == Outcome::Ok && same_body {
            if let Some(id) = op.result["id"].as_str() {
                let mut known = self.world.known.lock().expect("known lock");
                if !known.iter().any(|(k, _)| k == id) {
                    known.push((id.to_string(), project));
                }
            }
        }
        if same_body {
            if let Some(entry) = self
                .world
                .creates
                .lock()
                .expect("creates lock")
                .get_mut(mpid)
            {
                // Unknown until some create of it is answered.
                // A refusal is an answer too (another body came first: 409), except a replay's:
                // that one says nothing about the create.
                entry.2 = match op.outcome {
                    Outcome::Info => true,
                    Outcome::Ok => false,
                    Outcome::Fail => {
                        entry.2 && (op.status.is_none() || op.code() == Some("request_replayed"))
                    }
                };
            }
        }
    }

    async fn create_repeat(&mut self) {
        let picked = {
            let creates = self.world.creates.lock().expect("creates lock");
            let mine: Vec<(&String, &(Value, Project, bool))> = creates
                .iter()
                .filter(|(k, v)| {
                    k.starts_with(&format!("c{}-", self.index)) && v.1 == Project::Live
                })
                .collect();
            let unknown: Vec<_> = mine.iter().filter(|(_, v)| v.2).collect();
            let pool: Vec<_> = if unknown.is_empty() {
                mine.iter().collect()
            } else {
                unknown.into_iter().collect()
            };
            if pool.is_empty() {
                None
            } else {
                let mut keys: Vec<_> = pool
                    .iter()
                    .map(|(k, v)| ((*k).clone(), v.0.clone()))
                    .collect();
                keys.sort_by(|a, b| a.0.cmp(&b.0));
                Some(keys[self.rng.below(keys.len() as u64) as usize].clone())
            }
        };
        if let Some((mpid, body)) = picked {
            let node = self.node();
            self.create(node, "create_repeat", &mpid, body, Project::Live)
                .await;
        }
    }

    async fn create_conflict(&mut self) {
        let picked = {
            let creates = self.world.creates.lock().expect("creates lock");
            let mut keys: Vec<_> = creates
                .iter()
                .filter(|(_, v)| v.1 == Project::Live)
                .map(|(k, v)| (k.clone(), v.0.clone()))
                .collect();
            keys.sort_by(|a, b| a.0.cmp(&b.0));
            (!keys.is_empty()).then(|| keys[self.rng.below(keys.len() as u64) as usize].clone())
        };
        if let Some((mpid, mut body)) = picked {
            let other = body["amount"]
                .as_str()
                .unwrap_or("100")
                .parse::<u64>()
                .unwrap_or(100)
                + 1;
            body["amount"] = json!(other.to_string());
            let node = self.node();
            self.create(node, "create_conflict", &mpid, body, Project::Live)
                .await;
        }
    }

    /// One signed create sent to two nodes at once: one nonce, at most one acceptance.
    async fn replay(&mut self) {
        let (mpid, body) = self.fresh_body(Project::Live);
        let bytes = serde_json::to_vec(&body).expect("JSON encodes");
        let (a, b) = (self.node(), self.node());
        let Ok(req) = self.world.nodes[a].live.prepare(
            Method::POST,
            "/api/v1/payments",
            &bytes,
            Some(&SignSpec::default()),
        ) else {
            return;
        };
        let nonce = req
            .headers
            .iter()
            .find(|(n, _)| n.eq_ignore_ascii_case("x-request-nonce"))
            .map(|(_, v)| v.clone())
            .unwrap_or_default();
        let send = |node: usize| {
            let req = req.clone();
            let world = self.world.clone();
            async move {
                let started = world.history.invoke();
                let r = world.nodes[node].live.send(&req).await;
                (started, node, merchant_result(r))
            }
        };
        let (one, two) = futures_join(send(a), send(b)).await;
        for (started, node, result) in [one, two] {
            let op = self.record(
                started,
                node,
                "replay",
                json!({"merchant_payment_id": mpid, "body": body, "nonce": nonce,
                    "project": "Live"}),
                result,
            );
            self.remember_create(&mpid, &op, Project::Live);
        }
    }

    async fn read(&self, node: usize, id: &str, project: Project) -> Op {
        let started = self.world.history.invoke();
        let r = self.merchant(node, project).get_payment(id).await;
        self.record(
            started,
            node,
            "read",
            json!({"payment_id": id}),
            merchant_result(r),
        )
    }

    async fn notify(&mut self, node: usize, payment_id: &str, confirmed: bool, other: bool) {
        let Some(provider) = self.world.upstream.provider_of(payment_id) else {
            return;
        };
        // Sometimes the same report again (the upstream's retry): applied at most once.
        let again = self.rng.chance(20);
        let previous = again
            .then(|| {
                let sent = self.world.notifications.lock().expect("notifications lock");
                sent.iter()
                    .rev()
                    .find(|n| n.payment_id == payment_id)
                    .cloned()
            })
            .flatten();
        let n = match previous {
            Some(n) => n,
            None => {
                let n = Notification {
                    provider,
                    id: format!("n-{}", self.rng.hex(8)),
                    payment_id: payment_id.to_string(),
                    confirmed,
                    amount: other.then(|| self.amount()),
                };
                self.world
                    .notifications
                    .lock()
                    .expect("notifications lock")
                    .push(n.clone());
                n
            }
        };
        let started = self.world.history.invoke();
        let r = self
            .world
            .upstream
            .notify(&self.world.nodes[node].notifications, &n, TIMEOUT)
            .await;
        let result = notification_result(r);
        self.record(
            started,
            node,
            "notify",
            json!({"payment_id": payment_id, "notification_id": n.id,
                "status": if n.confirmed { "confirmed" } else { "failed" }, "amount": n.amount}),
            result,
        );
    }

    async fn operator(
        &self,
        node: usize,
        method: Method,
        path: &str,
        body: Option<&Value>,
    ) -> (Outcome, Option<u16>, Value) {
        let mut req = self
            .world
            .http
            .request(method, format!("{}{path}", self.world.nodes[node].operator))
            .bearer_auth(&self.world.operator_token)
            .timeout(TIMEOUT);
        if let Some(b) = body {
            req = req.json(b);
        }
        match req.send().await {
            Ok(r) => {
                let status = r.status().as_u16();
                let body = match r.bytes().await {
                    Ok(b) => serde_json::from_slice(&b).unwrap_or(Value::Null),
                    Err(e) => {
                        return (
                            Outcome::Info,
                            Some(status),
                            json!({"transport": e.to_string()}),
                        )
                    }
                };
                (answered(status), Some(status), body)
            }
            Err(e) => {
                let (o, v) = transport(&e);
                (o, None, v)
            }
        }
    }

    /// An operator action on payment `id`: `confirm`, `cancel`, `recheck`, `resolve`,
    /// `callback_resend`.
    async fn operate(&self, node: usize, kind: &'static str, id: &str, body: Value) -> Op {
        let path = match kind {
            "resolve" => format!("/operator/v1/payments/{id}/recheck/resolve"),
            "callback_resend" => format!("/operator/v1/payments/{id}/callbacks/resend"),
            other => format!("/operator/v1/payments/{id}/{other}"),
        };
        let started = self.world.history.invoke();
        let result = self.operator(node, Method::POST, &path, Some(&body)).await;
        if let Some(e) = result.2["event_id"].as_str() {
            self.world
                .events
                .lock()
                .expect("events lock")
                .push(e.to_string());
        }
        if kind == "recheck" && result.0 == Outcome::Ok {
            self.world
                .appeals
                .lock()
                .expect("appeals lock")
                .push(id.to_string());
        }
        self.record(
            started,
            node,
            kind,
            json!({"payment_id": id, "body": body}),
            result,
        )
    }

    /// A provider's confirmation on one node and the operator's cancel on another, at once.
    async fn race(&mut self) {
        let Some((id, _)) = self.some_payment_of(Project::Live) else {
            return;
        };
        let (a, b) = (self.node(), self.node());
        let Some(provider) = self.world.upstream.provider_of(&id) else {
            return;
        };
        let n = Notification {
            provider,
            id: format!("n-{}", self.rng.hex(8)),
            payment_id: id.clone(),
            confirmed: true,
            amount: None,
        };
        self.world
            .notifications
            .lock()
            .expect("notifications lock")
            .push(n.clone());
        let world = self.world.clone();
        let confirm = async {
            let started = world.history.invoke();
            let r = world
                .upstream
                .notify(&world.nodes[a].notifications, &n, TIMEOUT)
                .await;
            (started, notification_result(r))
        };
        let cancel = self.operate(b, "cancel", &id, json!({}));
        let ((started, result), _) = futures_join(confirm, cancel).await;
        self.record(
            started,
            a,
            "notify",
            json!({"payment_id": id, "notification_id": n.id, "status": "confirmed",
                "amount": null}),
            result,
        );
    }

    async fn payout(&mut self) {
        let repeat = self.rng.chance(30);
        let previous = repeat
            .then(|| {
                let payouts = self.world.payouts.lock().expect("payouts lock");
                (!payouts.is_empty())
                    .then(|| payouts[self.rng.below(payouts.len() as u64) as usize].clone())
            })
            .flatten();
        let body = match previous {
            Some(b) => b,
            None => {
                let mut b = json!({
                    "amount": format!("{}.{:04}", self.rng.below(3), self.rng.between(1, 9999)),
                    "destination": "TANZBbGv9EdRS3PpbVWg2DVUoM4HVm57Bk",
                    "reference": self.rng.hex(32),
                });
                if self.rng.chance(30) {
                    b["force_reason"] = json!("paid ahead of the balance");
                }
                self.world
                    .payouts
                    .lock()
                    .expect("payouts lock")
                    .push(b.clone());
                b
            }
        };
        let node = self.node();
        let path = format!("/operator/v1/projects/{}/payouts", self.world.project_id);
        let started = self.world.history.invoke();
        let result = self.operator(node, Method::POST, &path, Some(&body)).await;
        self.record(started, node, "payout", json!({"body": body}), result);
    }

    async fn adjustment(&mut self) {
        let sign = if self.rng.chance(40) { "-" } else { "" };
        let started = self.world.history.invoke();
        let body = json!({
            "amount": format!("{sign}{}.{:04}", self.rng.below(5), self.rng.between(1, 9999)),
            "reason": format!("chaos adjustment {}", started.0),
        });
        let node = self.node();
        let path = format!(
            "/operator/v1/projects/{}/adjustments",
            self.world.project_id
        );
        let result = self.operator(node, Method::POST, &path, Some(&body)).await;
        self.record(started, node, "adjustment", json!({"body": body}), result);
    }

    async fn event_resend(&mut self) {
        let event = {
            let events = self.world.events.lock().expect("events lock");
            (!events.is_empty())
                .then(|| events[self.rng.below(events.len() as u64) as usize].clone())
        };
        let Some(event) = event else {
            return;
        };
        let node = self.node();
        let started = self.world.history.invoke();
        let r = self.world.nodes[node].live.resend_event(&event).await;
        let op = self.record(
            started,
            node,
            "event_resend",
            json!({"event_id": event}),
            merchant_result(r),
        );
        if let Some(e) = op.result["event_id"].as_str() {
            self.world
                .events
                .lock()
                .expect("events lock")
                .push(e.to_string());
        }
    }

    async fn events_recover(&mut self) {
        let node = self.node();
        let started = self.world.history.invoke();
        let body = json!({"since": "2020-01-01T00:00:00Z"});
        let bytes = serde_json::to_vec(&body).expect("JSON encodes");
        let r = self.world.nodes[node]
            .live
            .post("/api/v1/events/recover", &bytes)
            .await;
        self.record(
            started,
            node,
            "events_recover",
            json!({"body": body}),
            merchant_result(r),
        );
    }

    /// A test payment created and closed by the sandbox's helper.
    async fn test_payment(&mut self) {
        let (mpid, body) = self.fresh_body(Project::Test);
        let node = self.node();
        let op = self
            .create(node, "create", &mpid, body, Project::Test)
            .await;
        let Some(id) = op.result["id"].as_str().map(str::to_string) else {
            return;
        };
        let action = if self.rng.chance(70) {
            "complete"
        } else {
            "cancel"
        };
        let node = self.node();
        let started = self.world.history.invoke();
        let r = self.world.nodes[node]
            .test
            .post(&format!("/api/v1/test/payments/{id}/{action}"), b"")
            .await;
        self.record(
            started,
            node,
            if action == "complete" {
                "test_complete"
            } else {
                "test_cancel"
            },
            json!({"payment_id": id}),
            merchant_result(r),
        );
    }
}

/// Both futures, run at once.
async fn futures_join<A: std::future::Future, B: std::future::Future>(
    a: A,
    b: B,
) -> (A::Output, B::Output) {
    tokio::join!(a, b)
}

/// After the run: every create whose outcome is still unknown is repeated (as a merchant must)
/// on the nodes in turn until one answers; the payments it finds are known.
pub async fn resolve_unknown_creates(world: &Arc<World>, within: Duration) {
    let unknown: Vec<(String, Value, Project)> = {
        let creates = world.creates.lock().expect("creates lock");
        let mut u: Vec<_> = creates
            .iter()
            .filter(|(_, v)| v.2)
            .map(|(k, v)| (k.clone(), v.0.clone(), v.1))
            .collect();
        u.sort_by(|a, b| a.0.cmp(&b.0));
        u
    };
    let client = Client::new(
        world.clone(),
        usize::MAX,
        Rng::new(0, u64::MAX),
        Rng::new(0, u64::MAX),
    );
    let deadline = Instant::now() + within;
    for (i, (mpid, body, project)) in unknown.into_iter().enumerate() {
        let mut node = i % world.nodes.len();
        while Instant::now() < deadline {
            let op = client
                .create(node, "create_repeat", &mpid, body.clone(), project)
                .await;
            if op.outcome != Outcome::Info {
                break;
            }
            node = (node + 1) % world.nodes.len();
            tokio::time::sleep(Duration::from_millis(500)).await;
        }
    }
}

/// After the run: the operator cancels every live payment still `processing`, and the sandbox's
/// helper every test one, recorded in the history like any operation (one pass; what a cancel
/// could not close, the lifetime closes). So nothing changes while the final state is read,
/// without waiting out the payments' lifetime.
pub async fn close_open_payments(world: &Arc<World>) {
    let client = Client::new(
        world.clone(),
        usize::MAX,
        Rng::new(0, u64::MAX - 1),
        Rng::new(0, u64::MAX - 1),
    );
    for (project, merchant) in [
        (Project::Live, &world.nodes[0].live),
        (Project::Test, &world.nodes[0].test),
    ] {
        let Ok(page) = merchant.list_payments("limit=100&status=processing").await else {
            continue;
        };
        let ids: Vec<String> = page.json["data"]
            .as_array()
            .map(|a| {
                a.iter()
                    .filter_map(|p| p["id"].as_str().map(str::to_string))
                    .collect()
            })
            .unwrap_or_default();
        for id in ids {
            match project {
                Project::Live => {
                    client.operate(0, "cancel", &id, json!({})).await;
                }
                Project::Test => {
                    let started = world.history.invoke();
                    let r = world.nodes[0]
                        .test
                        .post(&format!("/api/v1/test/payments/{id}/cancel"), b"")
                        .await;
                    client.record(
                        started,
                        0,
                        "test_cancel",
                        json!({"payment_id": id}),
                        merchant_result(r),
                    );
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn one_seed_gives_a_client_the_same_steps_and_another_seed_others() {
        let steps = |seed: u64| {
            let mut plan = Rng::new(seed, 100);
            (0..200)
                .map(|_| next_step(&mut plan, 3))
                .collect::<Vec<_>>()
        };
        assert_eq!(steps(7), steps(7));
        assert_ne!(steps(7), steps(8));
        let kinds: BTreeSet<&str> = steps(7).iter().map(|s| s.kind).collect();
        assert!(kinds.len() > 12, "the mix is drawn: {kinds:?}");
        assert!(steps(7).iter().all(|s| s.nodes.iter().all(|n| *n < 3)));
    }
}
