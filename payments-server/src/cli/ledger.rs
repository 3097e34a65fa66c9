//! The project balances from a terminal: a project's balance and entries, a statement, the
//! payouts and adjustments the operator records, and the reconciliation. The same core
//! functions and JSON forms as the operator API.

use clap::Subcommand;
use payments_core::ledger::LedgerEntry;
use payments_core::service::{Actor, PaymentService};
use payments_core::ApiError;
use serde_json::{json, Value};

use super::output::{fields, table, Output};
use payments_http::operator::ledger::{adjustment_amount, payout_request, report_json};
use payments_http::operator::lookup;

/// Ledger commands.
#[derive(Debug, Subcommand)]
pub enum LedgerCommand {
    /// A project's balance and its totals by kind.
    Balance {
        /// Project id.
        project: String,
    },
    /// A project's newest entries.
    Entries {
        /// Project id.
        project: String,
        /// Only this kind: credit, reversal, recheck_adjustment, payout, operator_adjustment.
        #[arg(long)]
        kind: Option<String>,
        /// How many (1 to 100; default 20).
        #[arg(long)]
        limit: Option<usize>,
    },
    /// A project's statement for [from, to): opening, each kind's count and sum, closing.
    Statement {
        /// Project id.
        project: String,
        /// Start (RFC 3339, included).
        #[arg(long)]
        from: String,
        /// End (RFC 3339, excluded).
        #[arg(long)]
        to: String,
    },
    /// Record a payout sent to the project's owner (refused beyond the balance without
    /// --force-reason); recording the same transaction again answers the first record.
    Payout {
        /// Project id.
        project: String,
        /// USDT, at most 4 decimals.
        #[arg(long)]
        amount: String,
        /// The USDT address it was sent to (TRON T... or Ethereum 0x...).
        #[arg(long)]
        destination: String,
        /// The transfer's transaction hash.
        #[arg(long)]
        reference: String,
        /// Record it although it is larger than the balance, and why.
        #[arg(long)]
        force_reason: Option<String>,
    },
    /// Correct a project's balance (either sign), with a reason.
    Adjust {
        /// Project id.
        project: String,
        /// USDT, signed, at most 4 decimals (e.g. -12.5).
        #[arg(long, allow_hyphen_values = true)]
        amount: String,
        /// Why (kept with the entry and in the audit trail).
        #[arg(long)]
        reason: String,
    },
    /// Recompute every project's balance from its payments and the operator's entries and
    /// report each difference (exit status 1 when there is one).
    Reconcile {
        /// Append the entries that make each payment's entries match it (for payments
        /// completed before the ledger existed, or by a node of an older build during a
        /// rolling upgrade). Differences are still reported.
        #[arg(long)]
        repair: bool,
    },
}

fn entry_row(e: &LedgerEntry) -> Vec<String> {
    let p = &e.posting;
    vec![
        e.seq.to_string(),
        p.at.to_string(),
        p.kind.to_string(),
        p.amount.to_string(),
        e.balance_after.to_string(),
        p.payment
            .map(|(id, v)| format!("{id} v{v}"))
            .or_else(|| p.reference.as_ref().map(|r| r.to_string()))
            .or_else(|| p.reason.clone())
            .unwrap_or_default(),
    ]
}

const ENTRY_HEADER: [&str; 6] = [
    "seq",
    "at",
    "kind",
    "amount",
    "balance",
    "payment / reference / reason",
];

pub(super) async fn ledger(
    svc: &PaymentService,
    command: LedgerCommand,
    actor: &Actor,
) -> Result<Output, ApiError> {
    match command {
        LedgerCommand::Balance { project } => {
            let p = lookup::project(svc, &project).await?;
            Ok(Output::object(svc.balances().balance(p.id).await?.view()))
        }
        LedgerCommand::Entries {
            project,
            kind,
            limit,
        } => entries(svc, &project, kind, limit).await,
        LedgerCommand::Statement { project, from, to } => {
            let p = lookup::project(svc, &project).await?;
            let query = url_query(&[("from", &from), ("to", &to)]);
            let (from, to) = payments_http::query::period(&query)?;
            Ok(Output::object(
                svc.balances().statement(p.id, from, to).await?.view(),
            ))
        }
        LedgerCommand::Payout {
            project,
            amount,
            destination,
            reference,
            force_reason,
        } => {
            let p = lookup::project(svc, &project).await?;
            let request = payout_request(&amount, &destination, &reference, force_reason)?;
            let (entry, new) = svc.balances().record_payout(p.id, &request, actor).await?;
            let mut out = Output::object(entry.view());
            if !new {
                out.text = format!("already recorded (the same transaction):\n{}", out.text);
            }
            Ok(out)
        }
        LedgerCommand::Adjust {
            project,
            amount,
            reason,
        } => {
            let p = lookup::project(svc, &project).await?;
            let amount = adjustment_amount(&amount)?;
            let entry = svc
                .balances()
                .record_adjustment(p.id, amount, &reason, actor)
                .await?;
            Ok(Output::object(entry.view()))
        }
        LedgerCommand::Reconcile { repair } => reconcile(svc, repair, actor).await,
    }
}

/// `ledger entries`: the project's entries, newest first, through the API's query.
async fn entries(
    svc: &PaymentService,
    project: &str,
    kind: Option<String>,
    limit: Option<usize>,
) -> Result<Output, ApiError> {
    let p = lookup::project(svc, project).await?;
    let mut q = Vec::new();
    if let Some(k) = kind {
        q.push(format!("kind={k}"));
    }
    if let Some(l) = limit {
        q.push(format!("limit={l}"));
    }
    let query = payments_http::query::entry_list(&q.join("&"))?;
    let page = svc.balances().list_entries(&p, &query).await?;
    let rows = page.entries.iter().map(entry_row).collect();
    let data: Vec<Value> = page.entries.iter().map(|e| e.view()).collect();
    Ok(Output::new(
        json!({"data": data, "has_more": page.next_cursor.is_some()}),
        table(&ENTRY_HEADER, rows),
    ))
}

/// `ledger reconcile [--repair]`: the report, each difference listed; `failed` when there
/// is one.
async fn reconcile(svc: &PaymentService, repair: bool, actor: &Actor) -> Result<Output, ApiError> {
    let report = svc.balances().reconcile_ledger(repair, actor).await?;
    let json = report_json(&report);
    let mut text = format!(
        "{} projects, {} payments, {} entries read; {} differences{}\n",
        report.projects,
        report.payments,
        report.entries,
        report.differences.len(),
        if repair {
            format!(", {} repaired", report.repaired)
        } else {
            String::new()
        }
    );
    for d in &report.differences {
        text.push_str(&fields(
            &json!({"project_id": d.project_id, "payment_id": d.payment_id,
                    "expected": d.expected, "recorded": d.recorded, "what": d.what}),
            2,
        ));
        text.push('\n');
    }
    let mut out = Output::new(json, text);
    out.failed = !report.differences.is_empty();
    Ok(out)
}

/// A query string of `pairs`, each value percent-encoded.
fn url_query(pairs: &[(&str, &str)]) -> String {
    pairs
        .iter()
        .map(|(k, v)| {
            let v: String = url::form_urlencoded::byte_serialize(v.as_bytes()).collect();
            format!("{k}={v}")
        })
        .collect::<Vec<_>>()
        .join("&")
}
