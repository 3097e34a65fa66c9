//! The final state, read after the faults are healed and the service has settled: every
//! payment from every node, the payments' lists, each payment's callback events, the ledger's
//! entries, each node's balance, and the ledger's reconciliation.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::{Duration, Instant};

use futures_util::StreamExt as _;
use payments_client::MerchantClient;
use reqwest::Method;
use serde_json::{json, Value};

use crate::workload::{Project, World};

/// What the service holds at the end.
#[derive(Debug, Default)]
pub struct Final {
    /// Every payment listed (both projects), by id.
    pub listed: BTreeMap<String, Value>,
    /// Each payment as each node answers it (`None`: not found or no answer), by id.
    pub per_node: BTreeMap<String, Vec<Option<Value>>>,
    /// Each payment's callback events (operator API), by payment id.
    pub events: BTreeMap<String, Vec<Value>>,
    /// The live project's ledger entries, oldest first.
    pub entries: Vec<Value>,
    /// The live project's balance as each node answers it.
    pub balances: Vec<Option<Value>>,
    /// The ledger's reconciliation report.
    pub reconcile: Option<Value>,
    /// What could not be read.
    pub unreadable: Vec<String>,
}

async fn get_json(client: &MerchantClient, path: &str) -> Option<Value> {
    for _ in 0..5 {
        match client.get(path).await {
            Ok(r) if r.status.is_success() => return Some(r.json),
            Ok(r) if r.status.as_u16() == 404 => return None,
            _ => tokio::time::sleep(Duration::from_millis(300)).await,
        }
    }
    None
}

async fn operator_json(world: &World, node: usize, method: Method, path: &str) -> Option<Value> {
    for _ in 0..5 {
        let r = world
            .http
            .request(
                method.clone(),
                format!("{}{path}", world.nodes[node].operator),
            )
            .bearer_auth(&world.operator_token)
            .timeout(Duration::from_secs(60))
            .json(&json!({}))
            .send()
            .await;
        if let Ok(r) = r {
            if r.status().is_success() {
                return r.json().await.ok();
            }
        }
        tokio::time::sleep(Duration::from_millis(300)).await;
    }
    None
}

/// Every page of a list (`data`, `next_cursor`).
async fn all_pages(client: &MerchantClient, path: &str, query: &str) -> Option<Vec<Value>> {
    let mut out = Vec::new();
    let mut cursor: Option<String> = None;
    loop {
        let q = match &cursor {
            Some(c) => format!("{path}?{query}&cursor={c}"),
            None => format!("{path}?{query}"),
        };
        let page = get_json(client, &q).await?;
        out.extend(page["data"].as_array().cloned().unwrap_or_default());
        match page["next_cursor"].as_str() {
            Some(c) if page["has_more"] == json!(true) => cursor = Some(c.to_string()),
            _ => return Some(out),
        }
    }
}

/// Waits (at most `within`) until no payment is in `created` or `processing` and no callback
/// event is pending; resends failed events once on the way. Returns whether it settled.
pub async fn settle(world: &Arc<World>, within: Duration) -> bool {
    let deadline = Instant::now() + within;
    let mut resent = false;
    while Instant::now() < deadline {
        // Nothing open: no create unanswered, no payment left to expire (a minute's lifetime),
        // so that nothing changes while the final state is read.
        let mut open = 0;
        for client in [&world.nodes[0].live, &world.nodes[0].test] {
            for status in ["created", "processing"] {
                open += all_pages(
                    client,
                    "/api/v1/payments",
                    &format!("limit=100&status={status}"),
                )
                .await
                .map_or(1, |v| v.len());
            }
        }
        let failed = operator_json(world, 0, Method::GET, "/operator/v1/callbacks/failed")
            .await
            .map_or(1, |v| v["events"].as_array().map_or(0, Vec::len));
        if failed > 0 && !resent {
            let _ = operator_json(
                world,
                0,
                Method::POST,
                "/operator/v1/callbacks/failed/resend",
            )
            .await;
            resent = true;
        }
        if open > 0 {
            crate::workload::close_open_payments(world).await;
        }
        let pending = count_pending(world).await;
        if open == 0 && pending == 0 {
            return true;
        }
        tokio::time::sleep(Duration::from_secs(1)).await;
    }
    false
}

/// Callback events not yet delivered or failed (the live project's events list).
async fn count_pending(world: &World) -> usize {
    all_pages(
        &world.nodes[0].live,
        "/api/v1/events",
        "limit=100&delivery_state=pending",
    )
    .await
    .map_or(1, |events| events.len())
}

/// One payment as each node answers it, and its events.
async fn read_payment(
    world: &World,
    id: &str,
    project: Project,
) -> (String, Vec<Option<Value>>, Option<Vec<Value>>) {
    let mut views = Vec::new();
    for node in &world.nodes {
        let client = match project {
            Project::Live => &node.live,
            Project::Test => &node.test,
        };
        views.push(get_json(client, &format!("/api/v1/payments/{id}")).await);
    }
    let path = format!("/operator/v1/payments/{id}/events");
    let events = operator_json(world, 0, Method::GET, &path)
        .await
        .map(|e| e["events"].as_array().cloned().unwrap_or_default());
    (id.to_string(), views, events)
}

/// Reads the final state.
pub async fn read(world: &Arc<World>) -> Final {
    let mut f = Final::default();
    for (project, client) in [
        (Project::Live, &world.nodes[0].live),
        (Project::Test, &world.nodes[0].test),
    ] {
        match all_pages(client, "/api/v1/payments", "limit=100").await {
            Some(list) => {
                for p in list {
                    if let Some(id) = p["id"].as_str() {
                        f.listed.insert(id.to_string(), p.clone());
                    }
                }
            }
            None => f
                .unreadable
                .push(format!("the {project:?} project's payment list")),
        }
    }
    let mut ids: Vec<(String, Project)> = world.known.lock().expect("known lock").clone();
    for (id, p) in &f.listed {
        if !ids.iter().any(|(k, _)| k == id) {
            let project = if p["is_test"] == json!(true) {
                Project::Test
            } else {
                Project::Live
            };
            ids.push((id.clone(), project));
        }
    }
    // Sixteen payments at a time: thousands of payments, one request per node and one for
    // the events each.
    let reads = ids
        .iter()
        .map(|(id, project)| read_payment(world, id, *project));
    let mut reads = futures_util::stream::iter(reads).buffer_unordered(16);
    while let Some((id, views, events)) = reads.next().await {
        f.per_node.insert(id.clone(), views);
        match events {
            Some(e) => {
                f.events.insert(id, e);
            }
            None => f.unreadable.push(format!("the events of {id}")),
        }
    }
    match all_pages(&world.nodes[0].live, "/api/v1/balance/entries", "limit=100").await {
        Some(mut entries) => {
            entries.reverse();
            f.entries = entries;
        }
        None => f.unreadable.push("the ledger entries".into()),
    }
    for node in &world.nodes {
        f.balances
            .push(get_json(&node.live, "/api/v1/balance").await);
    }
    f.reconcile = operator_json(world, 0, Method::POST, "/operator/v1/ledger/reconcile").await;
    if f.reconcile.is_none() {
        f.unreadable.push("the ledger's reconciliation".into());
    }
    f
}
