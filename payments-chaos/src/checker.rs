//! The checker: named invariants over the history and the final state. Each verdict says how
//! many things it looked at and lists every violation with the operations (or records) that
//! show it.

use std::collections::{BTreeMap, BTreeSet, HashMap, VecDeque};

use serde::Serialize;
use serde_json::{json, Value};

use crate::history::{Op, Outcome};
use crate::receiver::Delivery;
use crate::state::Final;
use crate::upstream::Issued;

/// One invariant's verdict.
#[derive(Debug, Clone, Serialize)]
pub struct Verdict {
    /// The invariant.
    pub name: &'static str,
    /// What it says.
    pub rule: &'static str,
    /// How many things it checked.
    pub checked: usize,
    /// What breaks it.
    pub violations: Vec<String>,
}

/// Everything the checker reads.
#[derive(Debug)]
pub struct Evidence<'a> {
    /// The history.
    pub ops: &'a [Op],
    /// The final state.
    pub fin: &'a Final,
    /// The upstream's record of issued requisites.
    pub issued: &'a [Issued],
    /// Requests the upstream refused for their signature.
    pub unsigned: &'a [String],
    /// The receiver's record.
    pub deliveries: &'a [Delivery],
    /// Nodes that crashed or did not come back, faults that failed.
    pub trouble: &'a [String],
    /// Creates whose outcome stayed unknown after the repeats.
    pub unresolved: &'a [String],
}

/// Amounts in units of 0.0001 (the ledger's precision).
fn units(v: &Value) -> Option<i128> {
    let s = match v {
        Value::String(s) => s.clone(),
        Value::Number(n) => n.to_string(),
        _ => return None,
    };
    let (neg, s) = s
        .strip_prefix('-')
        .map_or((false, s.as_str()), |r| (true, r));
    let (whole, frac) = s.split_once('.').unwrap_or((s, ""));
    if frac.len() > 4 {
        return None;
    }
    let n = whole.parse::<i128>().ok()? * 10_000 + format!("{frac:0<4}").parse::<i128>().ok()?;
    Some(if neg { -n } else { n })
}

fn status_of(op: &Op) -> Option<&str> {
    op.result
        .get("payment")
        .and_then(|p| p.get("status"))
        .or_else(|| op.result.get("status"))
        .and_then(Value::as_str)
}

fn payment_of(op: &Op) -> Option<&str> {
    op.args
        .get("payment_id")
        .and_then(Value::as_str)
        .or_else(|| op.result.get("id").and_then(Value::as_str))
}

fn is_create(op: &Op) -> bool {
    matches!(
        op.kind,
        "create" | "create_repeat" | "create_conflict" | "create_twice" | "replay"
    )
}

fn project_of(op: &Op) -> &str {
    op.args["project"].as_str().unwrap_or("Live")
}

/// The statuses reachable from each status by the state machine's transitions.
fn reachable(from: &str, to: &str) -> bool {
    let next = |s: &str| -> &'static [&'static str] {
        match s {
            "created" => &["processing", "error"],
            "processing" => &["completed", "canceled"],
            "completed" => &["completed", "canceled", "appeal"],
            "canceled" => &["completed", "appeal"],
            "appeal" => &["completed", "canceled", "error"],
            "error" => &["appeal"],
            _ => &[],
        }
    };
    if from == to {
        return true;
    }
    let mut seen = BTreeSet::new();
    let mut queue = VecDeque::from([from.to_string()]);
    while let Some(s) = queue.pop_front() {
        for n in next(&s) {
            if *n == to {
                return true;
            }
            if seen.insert(*n) {
                queue.push_back((*n).to_string());
            }
        }
    }
    false
}

/// Runs every invariant.
pub fn check(e: &Evidence<'_>) -> Vec<Verdict> {
    vec![
        one_payment_per_merchant_payment_id(e),
        requisite_issued_once(e),
        acknowledged_writes_visible(e),
        status_path_valid(e),
        ledger_balances(e),
        callbacks_delivered(e),
        unknown_creates_resolved(e),
        replays_refused(e),
        notifications_applied_once(e),
        upstream_requests_signed(e),
        nodes_stayed_up(e),
    ]
}

fn verdict(
    name: &'static str,
    rule: &'static str,
    checked: usize,
    violations: Vec<String>,
) -> Verdict {
    Verdict {
        name,
        rule,
        checked,
        violations,
    }
}

fn one_payment_per_merchant_payment_id(e: &Evidence<'_>) -> Verdict {
    let mut v = Vec::new();
    let mut by_key: BTreeMap<(bool, String), Vec<&Value>> = BTreeMap::new();
    for p in e.fin.listed.values() {
        let key = (
            p["is_test"] == json!(true),
            p["merchant_payment_id"]
                .as_str()
                .unwrap_or_default()
                .to_string(),
        );
        by_key.entry(key).or_default().push(p);
    }
    for ((test, mpid), ps) in &by_key {
        if ps.len() > 1 {
            let ids: Vec<&str> = ps.iter().filter_map(|p| p["id"].as_str()).collect();
            v.push(format!(
                "merchant_payment_id {mpid} (test {test}) has {} payments: {ids:?}",
                ps.len()
            ));
        }
    }
    let mut answered: HashMap<(String, String), BTreeMap<String, Vec<u64>>> = HashMap::new();
    for op in e
        .ops
        .iter()
        .filter(|o| is_create(o) && o.outcome == Outcome::Ok)
    {
        let mpid = op.args["merchant_payment_id"]
            .as_str()
            .unwrap_or_default()
            .to_string();
        let id = op.result["id"].as_str().unwrap_or_default().to_string();
        answered
            .entry((project_of(op).to_string(), mpid.clone()))
            .or_default()
            .entry(id)
            .or_default()
            .push(op.id);
        // The payment answered was created with this body: its initial amount is the body's.
        let initial = op
            .result
            .get("initial_amount")
            .filter(|a| !a.is_null())
            .or_else(|| op.result.get("amount"));
        let asked = &op.args["body"]["amount"];
        if let (Some(a), Some(b)) = (initial.and_then(units), units(asked)) {
            if a != b {
                v.push(format!(
                    "op {} ({}) of {mpid} with amount {asked} was answered {} with a payment of \
                     initial amount {}: another request's payment",
                    op.id,
                    op.kind,
                    op.status.unwrap_or(0),
                    initial.cloned().unwrap_or(Value::Null)
                ));
            }
        }
    }
    for ((project, mpid), ids) in &answered {
        if ids.len() > 1 {
            v.push(format!(
                "the creates of {mpid} ({project}) were answered with different payments: {ids:?} (ops by payment)"
            ));
        }
    }
    verdict(
        "one_payment_per_merchant_payment_id",
        "one payment per (project, merchant_payment_id); every ok create of one id answered the \
         same payment, created from its own body (another body is 409, never a payment)",
        by_key.len(),
        v,
    )
}

fn requisite_issued_once(e: &Evidence<'_>) -> Verdict {
    let mut v = Vec::new();
    let mut providers: BTreeMap<&str, BTreeSet<&str>> = BTreeMap::new();
    let mut payments_of: BTreeMap<&str, BTreeSet<&str>> = BTreeMap::new();
    let mut upstream_requisite: BTreeMap<&str, &str> = BTreeMap::new();
    for i in e.issued {
        providers
            .entry(&i.payment_id)
            .or_default()
            .insert(i.provider);
        payments_of
            .entry(&i.requisite)
            .or_default()
            .insert(&i.payment_id);
        upstream_requisite
            .entry(&i.payment_id)
            .or_insert(&i.requisite);
    }
    for (p, ps) in &providers {
        if ps.len() > 1 {
            v.push(format!(
                "payment {p} got requisites from {ps:?}: issued twice"
            ));
        }
    }
    for (r, ps) in &payments_of {
        if ps.len() > 1 {
            v.push(format!("requisite {r} was issued for {ps:?}"));
        }
    }
    // Every requisite a payment was seen with, in answers and at the end.
    let mut seen: BTreeMap<String, BTreeMap<String, Vec<String>>> = BTreeMap::new();
    let mut note = |id: &str, r: &Value, by: String| {
        if let Some(r) = r.as_str() {
            seen.entry(id.to_string())
                .or_default()
                .entry(r.to_string())
                .or_default()
                .push(by);
        }
    };
    for op in e.ops.iter().filter(|o| o.outcome == Outcome::Ok) {
        let p = op.result.get("payment").unwrap_or(&op.result);
        if let Some(id) = p["id"].as_str() {
            note(id, &p["requisite"], format!("op {}", op.id));
        }
    }
    for (id, views) in &e.fin.per_node {
        for (n, view) in views.iter().enumerate() {
            if let Some(p) = view {
                note(id, &p["requisite"], format!("node {n} at the end"));
            }
        }
    }
    for (id, requisites) in &seen {
        if requisites.len() > 1 {
            v.push(format!(
                "payment {id} changed its requisite: {requisites:?}"
            ));
        }
        if let (Some(first), Some(issued)) = (
            requisites.keys().next(),
            upstream_requisite.get(id.as_str()),
        ) {
            if requisites.len() == 1 && first != issued {
                v.push(format!(
                    "payment {id} shows requisite {first}; its provider issued {issued}"
                ));
            }
        }
    }
    verdict(
        "requisite_issued_once",
        "no payment is asked of two providers, no requisite goes to two payments, and a \
         payment's requisite is the one its provider issued, never changed",
        providers.len(),
        v,
    )
}

/// Each acknowledged payment write: the payment on every node at the end, the event it
/// queued among the payment's events, and a completion seen in the ledger.
fn payment_writes_visible(e: &Evidence<'_>, v: &mut Vec<String>) -> usize {
    let mut checked = 0;
    let writes = [
        "confirm",
        "cancel",
        "resolve",
        "recheck",
        "notify",
        "callback_resend",
    ];
    for op in e.ops.iter().filter(|o| o.outcome == Outcome::Ok) {
        if !is_create(op) && !writes.contains(&op.kind) {
            continue;
        }
        let Some(id) = payment_of(op) else { continue };
        checked += 1;
        let what = format!("op {} ({}) acknowledged payment {id}", op.id, op.kind);
        let Some(views) = e.fin.per_node.get(id) else {
            v.push(format!("{what}; it is not there at the end"));
            continue;
        };
        for (n, view) in views.iter().enumerate() {
            if view.is_none() {
                v.push(format!("{what}; node {n} does not have it at the end"));
            }
        }
        if let Some(event) = op.result["event_id"].as_str() {
            let listed = e
                .fin
                .events
                .get(id)
                .is_some_and(|evs| evs.iter().any(|ev| ev["event_id"].as_str() == Some(event)));
            if !listed {
                v.push(format!(
                    "{what} with event {event}; the payment's events lack it"
                ));
            }
        }
        let live = views
            .iter()
            .flatten()
            .next()
            .is_some_and(|p| p["is_test"] != json!(true));
        let credited = e
            .fin
            .entries
            .iter()
            .any(|en| en["payment_id"].as_str() == Some(id));
        if live && status_of(op) == Some("completed") && !credited {
            v.push(format!("{what} completed; the ledger has no entry for it"));
        }
    }
    checked
}

/// Every view of a payment at the end agrees across the nodes.
fn nodes_agree(e: &Evidence<'_>, v: &mut Vec<String>) {
    for (id, views) in &e.fin.per_node {
        let shapes: BTreeSet<String> = views
            .iter()
            .flatten()
            .map(|p| {
                format!(
                    "{} {} {} {}",
                    p["status"], p["amount"], p["requisite"], p["updated_at"]
                )
            })
            .collect();
        if shapes.len() > 1 {
            v.push(format!("the nodes disagree about payment {id}: {shapes:?}"));
        }
    }
}

/// Payouts and adjustments: in the ledger once when acknowledged, at most once when unknown,
/// never when refused (an adjustment; a refused payout may repeat an earlier one's reference).
fn ledger_writes_visible(e: &Evidence<'_>, v: &mut Vec<String>) -> usize {
    let mut checked = 0;
    for op in e
        .ops
        .iter()
        .filter(|o| matches!(o.kind, "payout" | "adjustment"))
    {
        let count = e
            .fin
            .entries
            .iter()
            .filter(|en| match op.kind {
                "payout" => en["reference"] == op.args["body"]["reference"],
                _ => en["reason"] == op.args["body"]["reason"],
            })
            .count();
        checked += 1;
        let wrong = match (op.kind, op.outcome) {
            (_, Outcome::Ok) => count != 1,
            ("adjustment", Outcome::Fail) => count != 0,
            (_, _) => count > 1,
        };
        if wrong {
            v.push(format!(
                "op {} ({}, {:?}, {:?}) has {count} ledger entries",
                op.id, op.kind, op.outcome, op.args["body"]
            ));
        }
    }
    checked
}

fn acknowledged_writes_visible(e: &Evidence<'_>) -> Verdict {
    let mut v = Vec::new();
    let checked = payment_writes_visible(e, &mut v) + ledger_writes_visible(e, &mut v);
    nodes_agree(e, &mut v);
    verdict(
        "acknowledged_writes_visible",
        "every acknowledged create and payment change is there at the end on every node (its \
         event among the payment's events, a completion in the ledger), the nodes agree, and \
         every acknowledged payout and adjustment is in the ledger once (an unknown one at \
         most once, a refused adjustment never)",
        checked,
        v,
    )
}

fn status_path_valid(e: &Evidence<'_>) -> Verdict {
    let mut v = Vec::new();
    // (invoked, completed, status, what) per payment.
    let mut seen: BTreeMap<String, Vec<(u64, u64, String, String)>> = BTreeMap::new();
    for op in e.ops.iter().filter(|o| o.outcome == Outcome::Ok) {
        let applied = op.kind != "notify" || op.result["applied"] == json!(true);
        let (Some(id), Some(status)) = (payment_of(op), status_of(op)) else {
            continue;
        };
        if applied {
            seen.entry(id.to_string()).or_default().push((
                op.invoked_ms,
                op.completed_ms,
                status.to_string(),
                format!("op {} ({} on node {})", op.id, op.kind, op.node),
            ));
        }
    }
    for (id, views) in &e.fin.per_node {
        for (n, view) in views.iter().enumerate() {
            if let Some(s) = view.as_ref().and_then(|p| p["status"].as_str()) {
                seen.entry(id.clone()).or_default().push((
                    u64::MAX - 1,
                    u64::MAX - 1,
                    s.to_string(),
                    format!("node {n} at the end"),
                ));
            }
        }
    }
    let mut checked = 0;
    for (id, obs) in &seen {
        // `error` happens only before requisites: a payment seen with them never shows it.
        let had = obs
            .iter()
            .find(|o| matches!(o.2.as_str(), "processing" | "completed" | "canceled"));
        let error = obs.iter().find(|o| o.2 == "error");
        if let (Some(a), Some(b)) = (had, error) {
            v.push(format!(
                "payment {id}: {} saw {} and {} saw error: error only happens before requisites",
                a.3, a.2, b.3
            ));
        }
        for a in obs {
            for b in obs {
                if a.1 < b.0 {
                    checked += 1;
                    if !reachable(&a.2, &b.2) {
                        v.push(format!(
                            "payment {id}: {} saw {} and later {} saw {}: not a path of the state machine",
                            a.3, a.2, b.3, b.2
                        ));
                    }
                }
            }
        }
    }
    verdict(
        "status_path_valid",
        "for each payment, the statuses seen (answers of reads and writes from any node, and the \
         end), in real-time order, follow transitions the state machine allows",
        checked,
        v,
    )
}

/// The entries' running sum (checked against each `balance_after` and their numbering),
/// and the entries by payment.
fn ledger_entries<'a>(
    entries: &'a [Value],
    v: &mut Vec<String>,
) -> (i128, BTreeMap<&'a str, Vec<&'a Value>>) {
    let mut running: i128 = 0;
    let mut last_seq: Option<i64> = None;
    let mut by_payment: BTreeMap<&str, Vec<&Value>> = BTreeMap::new();
    for en in entries {
        running += units(&en["amount"]).unwrap_or(0);
        if units(&en["balance_after"]) != Some(running) {
            v.push(format!(
                "entry {} ({}): balance_after {} but the entries sum to {}",
                en["seq"],
                en["kind"],
                en["balance_after"],
                fmt_units(running)
            ));
        }
        let seq = en["seq"].as_i64().unwrap_or(-1);
        if let Some(last) = last_seq.filter(|last| seq != last + 1) {
            v.push(format!("entries jump from seq {last} to {seq}"));
        }
        last_seq = Some(seq);
        if let Some(p) = en["payment_id"].as_str() {
            by_payment.entry(p).or_default().push(en);
        }
    }
    (running, by_payment)
}

fn ledger_balances(e: &Evidence<'_>) -> Verdict {
    let mut v = Vec::new();
    let entries = &e.fin.entries;
    let (running, by_payment) = ledger_entries(entries, &mut v);
    for (n, b) in e.fin.balances.iter().enumerate() {
        match b.as_ref().and_then(|b| units(&b["balance"])) {
            Some(balance) if balance == running => {}
            Some(balance) => v.push(format!(
                "node {n} answers the balance {}; the entries sum to {}",
                fmt_units(balance),
                fmt_units(running)
            )),
            None => v.push(format!("node {n} did not answer the balance")),
        }
    }
    let mut checked = entries.len();
    for (id, views) in &e.fin.per_node {
        let Some(p) = views.iter().flatten().next() else {
            continue;
        };
        if p["is_test"] == json!(true) || p["status"] == json!("appeal") {
            continue;
        }
        checked += 1;
        let expected = if p["status"] == json!("completed") {
            units(&p["merchant_information"]["amount_usdt_rate"]).unwrap_or(0)
        } else {
            0
        };
        let mine = by_payment.get(id.as_str()).cloned().unwrap_or_default();
        let got: i128 = mine
            .iter()
            .map(|en| units(&en["amount"]).unwrap_or(0))
            .sum();
        if got != expected {
            v.push(format!(
                "payment {id} ({}) contributes {}; its entries sum to {}",
                p["status"],
                fmt_units(expected),
                fmt_units(got)
            ));
        }
        let versions: BTreeSet<String> = mine
            .iter()
            .map(|en| en["payment_version"].to_string())
            .collect();
        if versions.len() != mine.len() {
            v.push(format!(
                "payment {id} has two entries for one version: {versions:?}"
            ));
        }
    }
    match &e.fin.reconcile {
        Some(r) => {
            for d in r["differences"].as_array().cloned().unwrap_or_default() {
                v.push(format!(
                    "ledger reconcile: {}",
                    d["what"].as_str().unwrap_or(&d.to_string())
                ));
            }
        }
        None => v.push("the ledger's reconciliation did not answer".into()),
    }
    verdict(
        "ledger_balances",
        "the balance (on every node) is the sum of the entries, numbered without gaps; each \
         payment's entries sum to what it contributes (its amount_usdt_rate while completed), \
         one entry per payment version; ledger reconcile reports nothing",
        checked,
        v,
    )
}

fn fmt_units(u: i128) -> String {
    let sign = if u < 0 { "-" } else { "" };
    let a = u.abs();
    format!("{sign}{}.{:04}", a / 10_000, a % 10_000)
}

/// Each delivery signed, none for a status or a payment that sends none, one body per event
/// id; the deliveries by event id.
fn deliveries_by_event<'a>(
    deliveries: &'a [Delivery],
    v: &mut Vec<String>,
) -> BTreeMap<&'a str, Vec<&'a Delivery>> {
    let mut received: BTreeMap<&str, Vec<&Delivery>> = BTreeMap::new();
    for d in deliveries {
        received.entry(&d.event_id).or_default().push(d);
        if !d.signed {
            v.push(format!("a delivery of event {} did not verify", d.event_id));
        }
        let body: Value = serde_json::from_slice(&d.body).unwrap_or(Value::Null);
        if matches!(
            body["status"].as_str(),
            Some("created" | "processing" | "appeal")
        ) {
            v.push(format!(
                "event {} was sent for status {}",
                d.event_id, body["status"]
            ));
        }
        if body["is_test"] == json!(true) {
            v.push(format!(
                "event {} of test payment {} was sent",
                d.event_id, body["id"]
            ));
        }
    }
    for (event, ds) in &received {
        let bodies: BTreeSet<&[u8]> = ds.iter().map(|d| d.body.as_slice()).collect();
        if bodies.len() > 1 {
            v.push(format!(
                "event {event} was delivered with {} different bodies",
                bodies.len()
            ));
        }
    }
    received
}

fn callbacks_delivered(e: &Evidence<'_>) -> Verdict {
    let mut v = Vec::new();
    let received = deliveries_by_event(e.deliveries, &mut v);
    let mut listed_ids = BTreeSet::new();
    let mut checked = 0;
    for (id, events) in &e.fin.events {
        let Some(p) = e
            .fin
            .per_node
            .get(id)
            .and_then(|vs| vs.iter().flatten().next())
        else {
            continue;
        };
        for ev in events {
            let event_id = ev["event_id"].as_str().unwrap_or_default();
            if !listed_ids.insert(event_id.to_string()) {
                v.push(format!("event id {event_id} is listed twice"));
            }
        }
        let closed = matches!(p["status"].as_str(), Some("completed" | "canceled"));
        if p["is_test"] == json!(true) || !closed {
            continue;
        }
        for ev in events {
            checked += 1;
            let event_id = ev["event_id"].as_str().unwrap_or_default();
            // An event whose every attempt failed (the schedule ran out) is answered by a
            // later one (the settling's resend) that reached.
            let answered_later = ev["state"] == json!("failed")
                && events
                    .iter()
                    .skip_while(|later| later["event_id"] != ev["event_id"])
                    .skip(1)
                    .any(|later| {
                        later["event_id"]
                            .as_str()
                            .is_some_and(|l| received.contains_key(l))
                    });
            match received.get(event_id) {
                None if answered_later => {}
                None => v.push(format!(
                    "event {event_id} of payment {id} ({}, state {}) never reached the receiver",
                    ev["status"], ev["state"]
                )),
                Some(ds) => {
                    let frozen = ev["body"].as_str().unwrap_or_default().as_bytes();
                    if !ds.iter().any(|d| d.body == frozen) {
                        v.push(format!("event {event_id} reached the receiver with another body than its frozen one"));
                    }
                }
            }
        }
        let last = events.last().and_then(|ev| ev["status"].as_str());
        if last != p["status"].as_str() {
            v.push(format!(
                "payment {id} ended {} but its last event says {last:?}",
                p["status"]
            ));
        }
    }
    for event in received.keys() {
        if !listed_ids.contains(*event) {
            v.push(format!(
                "event {event} reached the receiver; no payment lists it"
            ));
        }
    }
    verdict(
        "callbacks_delivered",
        "every event of a closed live payment reached the receiver at least once with its frozen \
         body and a valid signature, the last one saying the payment's status; event ids \
         unique; none for test payments or for created, processing, appeal",
        checked,
        v,
    )
}

fn unknown_creates_resolved(e: &Evidence<'_>) -> Verdict {
    let mut v: Vec<String> = e
        .unresolved
        .iter()
        .map(|m| format!("the create of {m} is still unknown after the repeats"))
        .collect();
    for (id, p) in &e.fin.listed {
        if p["status"] == json!("created") {
            v.push(format!(
                "payment {id} ({}) is still created",
                p["merchant_payment_id"]
            ));
        }
    }
    let unknown = e
        .ops
        .iter()
        .filter(|o| is_create(o) && o.outcome == Outcome::Info)
        .count();
    verdict(
        "unknown_creates_resolved",
        "every create that ended unknown was answered by a repeat, and no payment stays created",
        unknown + e.fin.listed.len(),
        v,
    )
}

fn replays_refused(e: &Evidence<'_>) -> Verdict {
    let mut v = Vec::new();
    let mut by_nonce: BTreeMap<&str, Vec<&Op>> = BTreeMap::new();
    for op in e.ops.iter().filter(|o| o.kind == "replay") {
        by_nonce
            .entry(op.args["nonce"].as_str().unwrap_or_default())
            .or_default()
            .push(op);
    }
    for (nonce, ops) in &by_nonce {
        let accepted: Vec<u64> = ops
            .iter()
            .filter(|o| o.outcome == Outcome::Ok)
            .map(|o| o.id)
            .collect();
        if accepted.len() > 1 {
            v.push(format!(
                "nonce {nonce} was accepted {} times: ops {accepted:?}",
                accepted.len()
            ));
        }
    }
    verdict(
        "replays_refused",
        "one signed request sent to two nodes is accepted at most once (409 request_replayed)",
        by_nonce.len(),
        v,
    )
}

fn notifications_applied_once(e: &Evidence<'_>) -> Verdict {
    let mut v = Vec::new();
    let mut applied: BTreeMap<&str, Vec<u64>> = BTreeMap::new();
    for op in e
        .ops
        .iter()
        .filter(|o| o.kind == "notify" && o.outcome == Outcome::Ok)
    {
        if op.result["applied"] == json!(true) {
            applied
                .entry(op.args["notification_id"].as_str().unwrap_or_default())
                .or_default()
                .push(op.id);
        }
    }
    for (id, ops) in &applied {
        if ops.len() > 1 {
            v.push(format!(
                "notification {id} was applied {} times: ops {ops:?}",
                ops.len()
            ));
        }
    }
    verdict(
        "notifications_applied_once",
        "a provider's notification_id is applied at most once, on any node",
        applied.len(),
        v,
    )
}

fn upstream_requests_signed(e: &Evidence<'_>) -> Verdict {
    verdict(
        "upstream_requests_signed",
        "every request the upstream got carried a valid signature",
        e.issued.len(),
        e.unsigned
            .iter()
            .map(|u| format!("unsigned: {u}"))
            .collect(),
    )
}

fn nodes_stayed_up(e: &Evidence<'_>) -> Verdict {
    verdict(
        "nodes_stayed_up",
        "no node exits by itself, every node restarted becomes ready, every fault could be \
         injected and healed",
        e.trouble.len(),
        e.trouble.to_vec(),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    fn op(id: u64, kind: &'static str, outcome: Outcome, args: Value, result: Value) -> Op {
        Op {
            id,
            client: 0,
            node: 0,
            kind,
            args,
            invoked_ms: id * 10,
            completed_ms: id * 10 + 5,
            outcome,
            status: Some(if outcome == Outcome::Ok { 200 } else { 409 }),
            result,
        }
    }

    fn payment(id: &str, mpid: &str, status: &str) -> Value {
        json!({"id": id, "merchant_payment_id": mpid, "status": status, "is_test": false,
            "amount": 100, "requisite": "79000001",
            "merchant_information": {"amount_usdt_rate": "1.0000"}})
    }

    /// The verdicts over `ops` and a final state of `payments` (each on one node) and `entries`.
    fn verdicts(
        ops: &[Op],
        payments: &[Value],
        entries: Vec<Value>,
        deliveries: &[Delivery],
    ) -> Vec<Verdict> {
        let mut fin = Final::default();
        for p in payments {
            let id = p["id"].as_str().unwrap().to_string();
            fin.listed.insert(id.clone(), p.clone());
            fin.per_node.insert(id.clone(), vec![Some(p.clone())]);
            fin.events.insert(id, Vec::new());
        }
        let balance: i128 = entries.iter().map(|e| units(&e["amount"]).unwrap()).sum();
        fin.entries = entries;
        fin.balances = vec![Some(json!({"balance": fmt_units(balance)}))];
        fin.reconcile = Some(json!({"differences": []}));
        check(&Evidence {
            ops,
            fin: &fin,
            issued: &[],
            unsigned: &[],
            deliveries,
            trouble: &[],
            unresolved: &[],
        })
    }

    fn broken(verdicts: &[Verdict]) -> Vec<&'static str> {
        verdicts
            .iter()
            .filter(|v| !v.violations.is_empty())
            .map(|v| v.name)
            .collect()
    }

    #[test]
    fn a_consistent_history_breaks_nothing() {
        let p = payment("p1", "m1", "processing");
        let ops = [op(
            1,
            "create",
            Outcome::Ok,
            json!({"merchant_payment_id": "m1", "body": {"amount": "100"}}),
            p.clone(),
        )];
        assert_eq!(
            broken(&verdicts(&ops, &[p], vec![], &[])),
            Vec::<&str>::new()
        );
    }

    #[test]
    fn two_payments_for_one_merchant_payment_id_are_named() {
        let ps = [
            payment("p1", "m1", "processing"),
            payment("p2", "m1", "processing"),
        ];
        assert_eq!(
            broken(&verdicts(&[], &ps, vec![], &[])),
            ["one_payment_per_merchant_payment_id"]
        );
    }

    #[test]
    fn a_status_going_back_is_named() {
        let p = payment("p1", "m1", "processing");
        let ops = [op(
            1,
            "confirm",
            Outcome::Ok,
            json!({"payment_id": "p1"}),
            json!({"payment": payment("p1", "m1", "completed")}),
        )];
        assert!(broken(&verdicts(&ops, &[p], vec![], &[])).contains(&"status_path_valid"));
    }

    #[test]
    fn a_completion_without_its_credit_is_named() {
        let p = payment("p1", "m1", "completed");
        assert!(broken(&verdicts(&[], &[p], vec![], &[])).contains(&"ledger_balances"));
    }

    #[test]
    fn a_replay_accepted_twice_and_a_notification_applied_twice_are_named() {
        let args = json!({"merchant_payment_id": "m1", "nonce": "n1", "body": {"amount": "100"}});
        let p = payment("p1", "m1", "processing");
        let n = json!({"payment_id": "p1", "notification_id": "x"});
        let applied = json!({"applied": true, "status": "processing"});
        let ops = [
            op(1, "replay", Outcome::Ok, args.clone(), p.clone()),
            op(2, "replay", Outcome::Ok, args, p.clone()),
            op(3, "notify", Outcome::Ok, n.clone(), applied.clone()),
            op(4, "notify", Outcome::Ok, n, applied),
        ];
        assert_eq!(
            broken(&verdicts(&ops, &[p], vec![], &[])),
            ["replays_refused", "notifications_applied_once"]
        );
    }

    #[test]
    fn a_callback_for_processing_is_named() {
        let p = payment("p1", "m1", "canceled");
        let d = Delivery {
            event_id: "e1".into(),
            body: br#"{"status":"processing"}"#.to_vec(),
            signed: true,
            answered: 200,
        };
        assert_eq!(
            broken(&verdicts(&[], &[p], vec![], &[d])),
            ["callbacks_delivered"]
        );
    }

    #[test]
    fn amounts_read_in_ten_thousandths() {
        assert_eq!(units(&json!("30.26")), Some(302_600));
        assert_eq!(units(&json!("-0.0001")), Some(-1));
        assert_eq!(units(&json!(12)), Some(120_000));
        assert_eq!(units(&json!("1.00001")), None);
        assert_eq!(fmt_units(-302_600), "-30.2600");
    }

    #[test]
    fn the_state_machine_paths() {
        assert!(reachable("created", "completed"));
        assert!(reachable("completed", "appeal"));
        assert!(reachable("canceled", "completed"));
        assert!(!reachable("completed", "processing"));
        assert!(!reachable("processing", "created"));
    }
}
