//! Payment operations and the audit trail.

use clap::{Args, Subcommand};
use payments_core::amount::Amount;
use payments_core::service::{Actor, PaymentService};
use payments_core::transition::Trigger;
use payments_core::ApiError;
use serde_json::{json, Value};

use super::output::{fields, table, Output};
use super::CommonArgs;
use payments_http::operator::{body, event_json, lookup, view};

/// Payment operations.
#[derive(Debug, Subcommand)]
pub enum PaymentCommand {
    /// Money received: complete the payment (optionally with the amount actually paid).
    Confirm {
        /// Payment id.
        id: String,
        /// The amount received, if different.
        #[arg(long)]
        amount: Option<String>,
    },
    /// Cancel the payment.
    Cancel {
        /// Payment id.
        id: String,
    },
    /// Start a re-check (status appeal).
    Recheck {
        /// Payment id.
        id: String,
    },
    /// Record the re-check result.
    Resolve {
        /// Payment id.
        id: String,
        /// completed, canceled or unchanged.
        #[arg(long)]
        status: String,
        /// With completed: the amount received, if different.
        #[arg(long)]
        amount: Option<String>,
    },
    /// Send the payment's callback again (one attempt).
    Resend {
        /// Payment id.
        id: String,
    },
    /// The payment's callback events with every delivery attempt.
    Events {
        /// Payment id.
        id: String,
    },
    /// Show the payment.
    Show {
        /// Payment id.
        id: String,
    },
    /// Give payments written before schema 16 the last four digits of their requisite, so
    /// that the cabinet's search and the list API's `requisite_last4` find them, and those
    /// written before schema 25 its keyed digest, so that a card number pasted in the
    /// cabinet's search finds them exactly (run once after `migrate`; idempotent, safe while
    /// serving).
    BackfillLast4,
    /// What to reconcile with the requisite providers: creates still unresolved (no answer
    /// recorded past the provider budget), payments error / provider_result_ambiguous (a
    /// provider may have issued), and the recoveries of interrupted creates.
    Reconcile {
        /// Ambiguous payments created since (RFC 3339; default: 7 days ago).
        #[arg(long)]
        since: Option<String>,
        /// At most this many of each kind per project (recoveries: in all).
        #[arg(long, default_value_t = 100)]
        limit: usize,
    },
}

/// `audit` arguments.
#[derive(Debug, Args)]
pub struct AuditArgs {
    #[command(flatten)]
    pub(super) common: CommonArgs,
    /// Print JSON instead of text.
    #[arg(long)]
    pub(super) json: bool,
    /// How many records (newest first).
    #[arg(long, default_value_t = 20)]
    pub(super) limit: usize,
}

fn amount(a: Option<String>) -> Result<Option<Amount>, ApiError> {
    a.map(|a| {
        Amount::from_json(&Value::String(a))
            .map_err(|e| ApiError::bad_request(format!("amount: {e}")))
    })
    .transpose()
}

/// `payment backfill-last4`: the store's backfill of `requisite_last4` and
/// `requisite_digest`.
pub(super) async fn backfill_last4(store: &crate::server::OpenedStore) -> Result<Output, ApiError> {
    let r = store.backfill_requisite_last4().await?;
    Ok(Output::new(
        json!({
            "filled": r.filled,
            "too_short": r.too_short,
            "changed_meanwhile": r.changed_meanwhile,
        }),
        format!(
            "Last four digits or requisite digests written for {} payments; {} have a \
             requisite of fewer than four digits; {} were written meanwhile (they have their \
             own).",
            r.filled, r.too_short, r.changed_meanwhile
        ),
    ))
}

pub(super) async fn payment(
    svc: &PaymentService,
    command: PaymentCommand,
    actor: &Actor,
) -> Result<Output, ApiError> {
    if let PaymentCommand::Reconcile { since, limit } = &command {
        return reconcile(svc, since.as_deref(), *limit).await;
    }
    let (id, trigger) = match command {
        PaymentCommand::Confirm { id, amount: a } => (id, Trigger::Confirm { amount: amount(a)? }),
        PaymentCommand::Cancel { id } => (id, Trigger::Cancel),
        PaymentCommand::Recheck { id } => (id, Trigger::StartRecheck),
        PaymentCommand::Resolve {
            id,
            status,
            amount: a,
        } => (id, body::resolve_trigger(&status, amount(a)?)?),
        PaymentCommand::Resend { id } => (id, Trigger::ResendCallback),
        PaymentCommand::Events { id } => {
            let pid = lookup::payment_id(&id)?;
            svc.store().payment(pid).await?.ok_or_else(|| {
                ApiError::new(
                    payments_core::ErrorCode::PaymentNotFound,
                    "payment not found",
                )
            })?;
            let records = svc.store().events_for_payment(pid).await?;
            let list: Vec<Value> = records.iter().map(event_json).collect();
            let mut text = String::new();
            if list.is_empty() {
                text.push_str("No callback events.\n");
            }
            for e in &list {
                text.push_str(&fields(e, 0));
                text.push('\n');
            }
            return Ok(Output::new(json!({ "events": list }), text));
        }
        PaymentCommand::Reconcile { .. } => unreachable!("answered above"),
        PaymentCommand::BackfillLast4 => {
            return Err(ApiError::bad_request(
                "backfill-last4 runs on the store (payments-server payment backfill-last4)",
            ))
        }
        PaymentCommand::Show { id } => {
            let pid = lookup::payment_id(&id)?;
            let p = svc.store().payment(pid).await?.ok_or_else(|| {
                ApiError::new(
                    payments_core::ErrorCode::PaymentNotFound,
                    "payment not found",
                )
            })?;
            return Ok(Output::object(view::payment(&p)));
        }
    };
    let id = lookup::payment_id(&id)?;
    let result = svc.payments().operate(id, trigger, actor).await?;
    let json = view::operation(&result);
    let mut text = fields(&json["payment"], 0);
    if let Some(e) = &result.event {
        // Without a running server the event waits in the outbox until one starts.
        text.push_str(&format!(
            "\nCallback event {} queued for {}.\n",
            e.event.event_id,
            e.destination.as_str()
        ));
    }
    Ok(Output::new(json, text))
}

/// The audit trail, newest first.
pub(super) async fn audit(svc: &PaymentService, limit: usize) -> Result<Output, ApiError> {
    let records = lookup::audit(svc, limit).await?;
    let list: Vec<Value> = records.iter().map(view::audit).collect();
    let rows = records
        .iter()
        .map(|r| {
            vec![
                r.at.to_string(),
                r.actor.clone(),
                r.action.clone(),
                r.target.clone(),
            ]
        })
        .collect();
    Ok(Output::new(
        json!({ "records": list }),
        table(&["AT", "ACTOR", "ACTION", "TARGET"], rows),
    ))
}

/// `payment reconcile`: the three lists, as JSON and as a table.
async fn reconcile(
    svc: &PaymentService,
    since: Option<&str>,
    limit: usize,
) -> Result<Output, ApiError> {
    let since = match since {
        Some(s) => payments_core::Timestamp::parse_rfc3339(s.trim()).ok_or_else(|| {
            ApiError::bad_request(format!(
                "--since: {s:?} is not an RFC 3339 time like 2026-10-01T12:00:00Z"
            ))
        })?,
        None => svc
            .ports()
            .clock
            .now()
            .saturating_sub(std::time::Duration::from_secs(7 * 86_400)),
    };
    let r = svc.payments().reconciliation(since, limit.max(1)).await?;
    let provider = |p: &payments_core::payment::Payment| {
        p.route
            .as_ref()
            .map_or("-".to_string(), |r| r.provider.to_string())
    };
    let row = |kind: &str, p: &payments_core::payment::Payment| {
        json!({
            "kind": kind,
            "payment_id": p.id.to_string(),
            "project_id": p.project_id.to_string(),
            "merchant_payment_id": p.merchant_payment_id.as_str(),
            "provider": provider(p),
            "created_at": p.created_at.to_rfc3339(),
            "status": p.status.as_str(),
        })
    };
    let mut rows: Vec<Value> = r.unresolved.iter().map(|p| row("unresolved", p)).collect();
    rows.extend(r.ambiguous.iter().map(|p| row("ambiguous", p)));
    for a in &r.recovered {
        let after: Value = a
            .after
            .as_deref()
            .and_then(|t| serde_json::from_str(t).ok())
            .unwrap_or(Value::Null);
        rows.push(json!({
            "kind": format!("recovered ({})", after["outcome"].as_str().unwrap_or("-")),
            "payment_id": a.target,
            "project_id": Value::Null,
            "merchant_payment_id": Value::Null,
            "provider": after["provider"].as_str().unwrap_or("-"),
            "created_at": a.at.to_rfc3339(),
            "status": after["status"].as_str().unwrap_or("-"),
        }));
    }
    let table_rows = rows
        .iter()
        .map(|r| {
            ["kind", "payment_id", "provider", "status", "created_at"]
                .iter()
                .map(|k| r[k].as_str().unwrap_or("-").to_string())
                .collect()
        })
        .collect();
    let mut text = table(&["KIND", "PAYMENT", "PROVIDER", "STATUS", "AT"], table_rows);
    if r.cut {
        text.push_str(&format!(
            "(cut at --limit {limit} per kind and project: more may exist; ask again with a \
             larger --limit or a later --since)\n"
        ));
    }
    Ok(Output::new(
        json!({
            "unresolved": r.unresolved.len(),
            "ambiguous": r.ambiguous.len(),
            "recovered": r.recovered.len(),
            "cut": r.cut,
            "payments": rows,
        }),
        text,
    ))
}
