//! `payments-server providers`: what every node of the database reports of its requisite
//! providers' health (breakers, failures, the last failure), read from the store: the reports
//! that `GET /operator/v1/providers` shows under `nodes`. The command has no router of its own,
//! so every node is shown by its last report, with its age (`stale` past three report
//! intervals; reports past `upstream.health_report_retention` are left out).

use clap::Args;
use payments_core::service::PaymentService;
use payments_core::ApiError;
use payments_http::providers::{node_entries, stale_after, NodeReport, REPORTS};
use serde_json::{json, Value};

use super::output::{table, Output};
use super::CommonArgs;
use crate::config::Settings;

/// `providers` arguments.
#[derive(Debug, Args)]
pub struct ProvidersArgs {
    #[command(flatten)]
    pub(super) common: CommonArgs,
    /// Print JSON instead of text.
    #[arg(long)]
    pub(super) json: bool,
}

/// Every node's report of every provider: the providers of `[[upstream.providers]]` first, in
/// their order, then any other a node reports, by name.
pub(super) async fn providers(
    svc: &PaymentService,
    settings: &Settings,
) -> Result<Output, ApiError> {
    let now = svc.ports().clock.now();
    let mut reports: Vec<NodeReport> = Vec::new();
    let mut unread = Vec::new();
    for (node, report) in REPORTS.list(&**svc.store()).await? {
        match report {
            Ok(r) => reports.push(r),
            Err(_) => unread.push(node),
        }
    }
    let mut names: Vec<String> = settings
        .upstream
        .providers
        .iter()
        .map(|p| p.name.clone())
        .collect();
    let mut others: Vec<String> = reports
        .iter()
        .flat_map(|r| r.providers.iter().map(|p| p.name.clone()))
        .filter(|n| !names.contains(n))
        .collect();
    others.sort();
    others.dedup();
    names.extend(others);
    let u = &settings.upstream;
    let (stale, retention) = (
        stale_after(u.health_report_interval),
        u.health_report_retention,
    );
    let list: Vec<Value> = names
        .iter()
        .map(|name| {
            let nodes = node_entries(name, &reports, now, stale, retention);
            json!({ "name": name, "nodes": nodes })
        })
        .collect();
    let reports_error =
        (!unread.is_empty()).then(|| format!("the reports of {} do not read", unread.join(", ")));
    let text = text(&list, reports_error.as_deref());
    Ok(Output::new(
        json!({ "providers": list, "reports_error": reports_error }),
        text,
    ))
}

/// One line per provider and node.
fn text(list: &[Value], error: Option<&str>) -> String {
    let s = |v: &Value| match v {
        Value::Null => "-".to_string(),
        Value::String(s) => s.clone(),
        other => other.to_string(),
    };
    let mut rows = Vec::new();
    for p in list {
        let nodes = p["nodes"].as_array().map(Vec::as_slice).unwrap_or_default();
        if nodes.is_empty() {
            rows.push(vec![s(&p["name"]), "(no report)".to_string()]);
        }
        for n in nodes {
            let failure = match &n["last_failure"] {
                Value::Null => "-".to_string(),
                f => format!("{} {}", s(&f["at"]), s(&f["cause"])),
            };
            let stale = if n["stale"] == true { " (stale)" } else { "" };
            rows.push(vec![
                s(&p["name"]),
                s(&n["node"]),
                s(&n["breaker"]),
                s(&n["since"]),
                s(&n["failures_in_a_row"]),
                format!("{:.2}", n["issue_rate"].as_f64().unwrap_or_default()),
                format!("{} s ago{stale}", s(&n["age_s"])),
                failure,
            ]);
        }
    }
    let mut out = table(
        &[
            "PROVIDER",
            "NODE",
            "BREAKER",
            "SINCE",
            "FAILURES",
            "ISSUE RATE",
            "REPORTED",
            "LAST FAILURE",
        ],
        rows,
    );
    if let Some(e) = error {
        out.push_str(&format!("note: {e}\n"));
    }
    out
}
