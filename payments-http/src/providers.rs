//! What the operator API shows of the requisite providers (`GET /operator/v1/providers`): each
//! one's place in the routing, its coverage, its breaker and its recent health, as plain values
//! read from a [`ProviderStatusSource`] at each request. The router that keeps them is the
//! embedder's (the one of `payments-providers` for the server).
//!
//! Health is kept by each node, in memory, and its breakers decide from that alone. So that
//! every node (and the CLI) can show every node's, each node writes a [`NodeReport`] of its
//! providers into the store, one setting per node ([`REPORTS`], `providers.health.<node>`),
//! every [`ProviderReports::interval`] and at once after a breaker changes state
//! ([`crate::provider_reports`]); [`node_entries`] is what the operator API and the CLI show of
//! them for one provider.

use std::fmt;
use std::str::FromStr;
use std::sync::Arc;
use std::time::Duration;

use payments_core::settings::SettingFamily;
use payments_core::Timestamp;
use serde::{Deserialize, Serialize};

/// One requisite provider as its router sees it now.
#[derive(Debug, Clone, PartialEq)]
pub struct ProviderStatus {
    /// Its name.
    pub name: String,
    /// Lower is asked first.
    pub priority: u32,
    /// Share among the providers of one priority.
    pub weight: u32,
    /// What it serves (an empty list serves everything).
    pub coverage: CoverageStatus,
    /// `closed`, `open` or `half_open`.
    pub breaker: &'static str,
    /// Until when an open breaker keeps it out.
    pub open_until: Option<Timestamp>,
    /// Failures in a row so far.
    pub failures_in_a_row: u32,
    /// Moving average of the share of calls that issued requisites.
    pub issue_rate: f64,
    /// Moving average of a call's latency, in milliseconds.
    pub latency_ms: f64,
    /// When the breaker came into its state (the router's start if it never changed).
    pub since: Timestamp,
    /// The provider's last failure, if any since the router started.
    pub last_failure: Option<FailureStatus>,
}

/// A provider's last failure: when, and what it was (`unavailable: ...`, `ambiguous: ...`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct FailureStatus {
    /// When the failed call ended.
    pub at: Timestamp,
    /// The outcome and its message.
    pub cause: String,
}

/// What a provider serves, as the operator API writes it.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct CoverageStatus {
    /// Payment methods (`sbp`, `card_transfer`).
    pub methods: Vec<String>,
    /// Currencies (`RUB`, ...).
    pub currencies: Vec<String>,
    /// Payers' countries.
    pub geo_codes: Vec<String>,
    /// The payers' banks served.
    pub banks: Vec<String>,
    /// The payers' banks not served.
    pub not_banks: Vec<String>,
    /// `Some(false)`: no intrabank payments; `Some(true)`: only intrabank ones.
    pub intrabank: Option<bool>,
    /// Smallest amount served, as a decimal string.
    pub min_amount: Option<String>,
    /// Largest amount served, as a decimal string.
    pub max_amount: Option<String>,
    /// The hours served, `HH:MM-HH:MM` UTC.
    pub hours: Option<String>,
}

/// Where the operator API reads the providers' status from, at each request.
pub type ProviderStatusSource = Arc<dyn Fn() -> Vec<ProviderStatus> + Send + Sync>;

/// How a node shares its providers' health with the other nodes of its database
/// ([`crate::state::AppState::with_provider_reports`]).
#[derive(Debug, Clone)]
pub struct ProviderReports {
    /// This node's name in the reports: unique among the nodes of one database (two nodes of
    /// one name overwrite each other's report).
    pub node: Arc<str>,
    /// How often this node writes its report (and at once after a breaker changes state).
    pub interval: Duration,
    /// A report older than this is not shown, and is deleted by the next node that writes.
    pub retention: Duration,
    /// The router's count of breaker changes: a change wakes the writer at once. `None`: the
    /// report is written every `interval` only.
    pub changes: Option<tokio::sync::watch::Receiver<u64>>,
}

impl ProviderReports {
    /// How old a report may be before it is shown `stale` ([`stale_after`]; a write may take
    /// [`REPORT_TIMEOUT`] before it counts as failed).
    pub fn stale_after(&self) -> Duration {
        stale_after(self.interval)
    }
}

/// How old a report of nodes that report every `interval` may be before it is shown `stale`:
/// three intervals, and at least an interval plus [`REPORT_TIMEOUT`].
pub fn stale_after(interval: Duration) -> Duration {
    (interval * 3).max(interval + REPORT_TIMEOUT)
}

/// How long one write or read of the reports may take before it is given up (the writer tries
/// again at its next round; the operator API answers without the other nodes' reports).
pub const REPORT_TIMEOUT: Duration = Duration::from_secs(2);

/// Where the reports are kept: the setting `providers.health.<node>` of each node.
pub const REPORTS: SettingFamily<NodeReport> = SettingFamily::new("providers.health");

/// One node's report of its providers' health, as kept in the store (JSON). Fields a newer
/// node adds are ignored by an older one, so nodes of two versions can read each other's.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct NodeReport {
    /// The node that wrote it.
    pub node: String,
    /// When, by the writer's clock.
    pub written_at: Timestamp,
    /// Its providers, in its configuration's order.
    pub providers: Vec<ProviderReport>,
}

/// One provider in a [`NodeReport`]: its breaker and recent health on that node.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ProviderReport {
    /// The provider's name.
    pub name: String,
    /// `closed`, `open` or `half_open`.
    pub breaker: String,
    /// Until when an open breaker keeps it out.
    #[serde(default)]
    pub open_until: Option<Timestamp>,
    /// When the breaker came into its state.
    pub since: Timestamp,
    /// Failures in a row so far.
    #[serde(default)]
    pub failures_in_a_row: u32,
    /// Moving average of the share of calls that issued requisites.
    #[serde(default)]
    pub issue_rate: f64,
    /// Moving average of a call's latency, in milliseconds.
    #[serde(default)]
    pub latency_ms: f64,
    /// The last failure.
    #[serde(default)]
    pub last_failure: Option<FailureStatus>,
}

impl NodeReport {
    /// The report of `node` at `at` of its providers' status `providers`.
    pub fn of(node: &str, at: Timestamp, providers: &[ProviderStatus]) -> NodeReport {
        NodeReport {
            node: node.to_string(),
            written_at: at,
            providers: providers
                .iter()
                .map(|p| ProviderReport {
                    name: p.name.clone(),
                    breaker: p.breaker.to_string(),
                    open_until: p.open_until,
                    since: p.since,
                    failures_in_a_row: p.failures_in_a_row,
                    issue_rate: p.issue_rate,
                    latency_ms: p.latency_ms,
                    last_failure: p.last_failure.clone(),
                })
                .collect(),
        }
    }
}

impl fmt::Display for NodeReport {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let json = serde_json::to_string(self).map_err(|_| fmt::Error)?;
        f.write_str(&json)
    }
}

impl FromStr for NodeReport {
    type Err = serde_json::Error;

    fn from_str(s: &str) -> Result<NodeReport, serde_json::Error> {
        serde_json::from_str(s)
    }
}

/// What the operator API and the CLI show of provider `name` in `reports`, one entry per node
/// that reports it, by node name: the report's values, when it was written and its age at
/// `now` (`age_s`), `stale` past `stale_after`. Reports older than `retention` are left out.
pub fn node_entries(
    name: &str,
    reports: &[NodeReport],
    now: Timestamp,
    stale_after: Duration,
    retention: Duration,
) -> Vec<serde_json::Value> {
    let mut entries: Vec<(&str, serde_json::Value)> = reports
        .iter()
        .filter(|r| now.duration_since(r.written_at) <= retention)
        .filter_map(|r| {
            let p = r.providers.iter().find(|p| p.name == name)?;
            let age = now.duration_since(r.written_at);
            Some((
                r.node.as_str(),
                serde_json::json!({
                    "node": r.node,
                    "reported_at": r.written_at.to_rfc3339(),
                    "age_s": age.as_secs(),
                    "stale": age > stale_after,
                    "breaker": p.breaker,
                    "open_until": p.open_until.map(|t| t.to_rfc3339()),
                    "since": p.since.to_rfc3339(),
                    "failures_in_a_row": p.failures_in_a_row,
                    "issue_rate": p.issue_rate,
                    "latency_ms": p.latency_ms,
                    "last_failure": p.last_failure.as_ref().map(|f| serde_json::json!({
                        "at": f.at.to_rfc3339(),
                        "cause": f.cause,
                    })),
                }),
            ))
        })
        .collect();
    entries.sort_by(|a, b| a.0.cmp(b.0));
    entries.into_iter().map(|(_, v)| v).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    const T0: Timestamp = Timestamp::from_unix_millis(1_790_812_800_000);

    fn status(name: &str, breaker: &'static str, failure: Option<&str>) -> ProviderStatus {
        ProviderStatus {
            name: name.into(),
            priority: 0,
            weight: 1,
            coverage: CoverageStatus::default(),
            breaker,
            open_until: (breaker == "open").then_some(T0 + Duration::from_secs(30)),
            failures_in_a_row: 3,
            issue_rate: 0.25,
            latency_ms: 12.5,
            since: T0 - Duration::from_secs(5),
            last_failure: failure.map(|c| FailureStatus {
                at: T0 - Duration::from_secs(1),
                cause: c.into(),
            }),
        }
    }

    #[test]
    fn a_report_round_trips_through_its_stored_text_and_tolerates_newer_fields() {
        let report = NodeReport::of(
            "node-1:8080",
            T0,
            &[
                status("a", "closed", None),
                status("b", "open", Some("unavailable: connection refused \"x\" ж")),
            ],
        );
        let text = report.to_string();
        assert_eq!(text.parse::<NodeReport>().expect("parses"), report);
        assert!(
            text.contains("\"written_at\":\"2026-10-01T00:00:00.000Z\""),
            "{text}"
        );
        // A newer node's report with a field this one does not know, and an older one without
        // the optional values, both read.
        let newer = text.replacen("{\"node\"", "{\"zone\":\"eu-1\",\"node\"", 1);
        assert_eq!(newer.parse::<NodeReport>().expect("parses"), report);
        let bare = r#"{"node":"n","written_at":"2026-09-20T00:00:00.000Z",
            "providers":[{"name":"a","breaker":"closed","since":"2026-09-20T00:00:00.000Z"}]}"#;
        let bare: NodeReport = bare.parse().expect("parses");
        assert_eq!(bare.providers[0].last_failure, None);
        assert!("not json".parse::<NodeReport>().is_err());
        assert!(
            r#"{"node":"n"}"#.parse::<NodeReport>().is_err(),
            "no time, no providers"
        );
    }

    #[test]
    fn node_entries_show_each_node_by_name_with_its_age_stale_past_the_limit_and_leave_the_expired_out(
    ) {
        let s = Duration::from_secs(1);
        let reports = vec![
            NodeReport::of(
                "node-b",
                T0 - s * 20,
                &[status("x", "open", Some("ambiguous: late"))],
            ),
            NodeReport::of("node-a", T0 - s * 2, &[status("x", "closed", None)]),
            NodeReport::of("node-c", T0, &[status("y", "closed", None)]),
            NodeReport::of("node-gone", T0 - s * 4000, &[status("x", "open", None)]),
        ];
        let entries = node_entries("x", &reports, T0, s * 15, s * 3600);
        let nodes: Vec<&str> = entries
            .iter()
            .map(|e| e["node"].as_str().unwrap())
            .collect();
        assert_eq!(
            nodes,
            ["node-a", "node-b"],
            "by name; node-c has no x; node-gone expired"
        );
        assert_eq!(entries[0]["age_s"], 2);
        assert_eq!(entries[0]["stale"], false);
        assert_eq!(entries[0]["last_failure"], serde_json::Value::Null);
        let b = &entries[1];
        assert_eq!(
            (
                b["breaker"].as_str(),
                b["age_s"].as_u64(),
                b["stale"].as_bool()
            ),
            (Some("open"), Some(20), Some(true))
        );
        assert_eq!(b["reported_at"], (T0 - s * 20).to_rfc3339());
        assert_eq!(b["open_until"], (T0 + s * 30).to_rfc3339());
        assert_eq!(b["since"], (T0 - s * 5).to_rfc3339());
        assert_eq!(b["failures_in_a_row"], 3);
        assert_eq!(b["last_failure"]["cause"], "ambiguous: late");
        assert!(node_entries("nobody", &reports, T0, s * 15, s * 3600).is_empty());
    }
}
