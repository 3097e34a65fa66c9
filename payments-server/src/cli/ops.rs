//! Operations from a terminal: failed callbacks (list, bulk resend), the dispatch hold, named
//! operator tokens. The same core functions and JSON forms as the operator API.

use payments_directory::DirectoryAccess;
use std::time::Duration;

use clap::Subcommand;
use payments_core::project::OperatorTokenRecord;
use payments_core::service::{Actor, PaymentService};
use payments_core::ApiError;
use payments_directory::NewOperatorToken;
use serde_json::{json, Value};

use super::output::{fields, table, Output};
use payments_http::operator::callbacks::{
    bulk_json, failed_filter, failed_json, failed_limit, hold_json,
};

/// Filters of the failed-callback commands.
#[derive(Debug, Clone, clap::Args)]
pub struct FailedFilterArgs {
    /// Only this project's events.
    #[arg(long)]
    pub project: Option<String>,
    /// Only events for this destination host (name or address).
    #[arg(long)]
    pub host: Option<String>,
    /// Only events queued at or after this time (RFC 3339, e.g. 2026-10-01T12:00:00Z).
    #[arg(long)]
    pub since: Option<String>,
    /// Only events queued before this time (RFC 3339).
    #[arg(long)]
    pub until: Option<String>,
    /// At most this many events (1 to 1000; default 100).
    #[arg(long)]
    pub limit: Option<u64>,
}

/// Callback commands.
#[derive(Debug, Subcommand)]
pub enum CallbacksCommand {
    /// List failed callback events nobody has resent yet (oldest first), with the last error.
    Failed(FailedFilterArgs),
    /// Resend the failed events matching the filters: one manual resend per payment (a new
    /// event, one attempt, the payment's current status), audited.
    ResendFailed(FailedFilterArgs),
    /// Hold callback dispatch: running servers stop sending (events keep being queued).
    Hold {
        /// Why (shown in the log, `/metrics` and `callbacks status`).
        #[arg(long)]
        reason: String,
    },
    /// Release the hold: queued events are sent at once.
    Release,
    /// Whether dispatch is held, and the counts of pending and failed events.
    Status,
}

/// Operator token commands. Without a subcommand, `operator-token` issues the `default` token
/// and ends the previous one at once (the behaviour of earlier versions).
#[derive(Debug, Subcommand)]
pub enum OperatorTokenCommand {
    /// Issue a token for a person or system; printed once. The audit names it.
    Issue {
        /// Who holds it: 1 to 64 characters from A-Za-z0-9._@:- (alice, prometheus, cabinet).
        #[arg(long)]
        name: String,
        /// Days it is valid (default: until revoked).
        #[arg(long)]
        expires_in_days: Option<u64>,
    },
    /// List the tokens: name, prefix, issue time, end of validity. Never the tokens.
    List,
    /// Revoke the valid tokens of a name (or one token by id), at once.
    Revoke {
        /// The name, or a token id from `list`.
        which: String,
    },
    /// Issue a new token for a name; the old one keeps working during the overlap.
    Rotate {
        /// The name.
        name: String,
        /// Hours the old token keeps working (default 24; 0 ends it at once; at most 720).
        #[arg(long, default_value_t = 24)]
        overlap_hours: u64,
    },
}

async fn filter(
    svc: &PaymentService,
    a: &FailedFilterArgs,
) -> Result<(payments_core::event::FailedEventFilter, usize), ApiError> {
    let f = failed_filter(
        svc,
        a.project.as_deref(),
        a.host.as_deref(),
        a.since.as_deref(),
        a.until.as_deref(),
    )
    .await?;
    Ok((f, failed_limit(a.limit)?))
}

pub(super) async fn callbacks(
    svc: &PaymentService,
    command: CallbacksCommand,
    actor: &Actor,
) -> Result<Output, ApiError> {
    match command {
        CallbacksCommand::Failed(a) => failed(svc, &a).await,
        CallbacksCommand::ResendFailed(a) => {
            let (f, limit) = filter(svc, &a).await?;
            let report = svc
                .callbacks()
                .resend_failed_callbacks(&f, limit, actor)
                .await?;
            let mut text = format!(
                "Resent {} payment(s); skipped {}.\n",
                report.resent.len(),
                report.skipped.len()
            );
            for r in &report.resent {
                text.push_str(&format!(
                    "  resent   {} as event {}\n",
                    r.payment_id, r.event_id
                ));
            }
            for sk in &report.skipped {
                text.push_str(&format!("  skipped  {}: {}\n", sk.payment_id, sk.reason));
            }
            if !report.resent.is_empty() {
                text.push_str("A running server sends them at once (dispatch on, not held).\n");
            }
            Ok(Output::new(bulk_json(&report), text))
        }
        CallbacksCommand::Hold { reason } => {
            let held = svc.callbacks().hold_callbacks(&reason, actor).await?;
            Ok(Output::new(
                hold_json(Some(held.clone())),
                format!("Callback dispatch held: {held}\n"),
            ))
        }
        CallbacksCommand::Release => {
            svc.callbacks().release_callbacks(actor).await?;
            Ok(Output::new(
                hold_json(None),
                "Callback dispatch released: queued events are sent now.\n".into(),
            ))
        }
        CallbacksCommand::Status => {
            let hold = svc.callbacks().callback_hold().await?;
            let store = svc.store();
            let backlog = store.backlog().await?;
            let mut v = hold_json(hold);
            v["pending_events"] = json!(backlog.pending_events);
            v["failed_events"] = json!(backlog.failed_events);
            Ok(Output::object(v))
        }
    }
}

/// `callbacks failed`: the failed callbacks that match, oldest first, as a table.
async fn failed(svc: &PaymentService, a: &FailedFilterArgs) -> Result<Output, ApiError> {
    let (f, limit) = filter(svc, a).await?;
    let events = svc.callbacks().failed_callbacks(&f, limit).await?;
    let list: Vec<Value> = events.iter().map(failed_json).collect();
    let rows = events
        .iter()
        .map(|e| {
            let last = e.last_attempt.as_ref();
            vec![
                e.outbox.event.created_at.to_string(),
                e.outbox.event.payment_id.to_string(),
                payments_core::event::destination_host(&e.outbox.destination),
                e.outbox.attempts.to_string(),
                last.and_then(|a| a.error.clone()).unwrap_or_default(),
            ]
        })
        .collect();
    let text = if events.is_empty() {
        "No failed callbacks.\n".to_string()
    } else {
        table(
            &["QUEUED", "PAYMENT", "HOST", "ATTEMPTS", "LAST ERROR"],
            rows,
        )
    };
    Ok(Output::new(json!({ "events": list }), text))
}

/// An operator token as listed (never the token).
pub fn operator_token_json(t: &OperatorTokenRecord, now: payments_core::Timestamp) -> Value {
    json!({
        "id": t.id,
        "name": t.name,
        "token_prefix": t.prefix,
        "created_at": t.created_at,
        "expires_at": t.expires_at,
        "valid": t.is_valid_at(now),
    })
}

fn issued(t: &NewOperatorToken, now: payments_core::Timestamp) -> Output {
    let mut v = operator_token_json(&t.record, now);
    v["token"] = Value::String(t.token.expose().clone());
    let text = format!(
        "{}\nOperator token for {} (shown once; store it now):\n{}\n",
        fields(&operator_token_json(&t.record, now), 0),
        t.record.name,
        t.token.expose()
    );
    Output::new(v, text)
}

pub(super) async fn operator_token(
    svc: &PaymentService,
    command: OperatorTokenCommand,
    actor: &Actor,
) -> Result<Output, ApiError> {
    let now = svc.ports().clock.now();
    match command {
        OperatorTokenCommand::Issue {
            name,
            expires_in_days,
        } => {
            let lifetime = expires_in_days.map(|d| Duration::from_secs(d.saturating_mul(86_400)));
            let t = svc
                .directory()
                .issue_named_operator_token(&name, lifetime, actor)
                .await?;
            Ok(issued(&t, now))
        }
        OperatorTokenCommand::List => {
            let tokens = svc.directory().operator_tokens().await?;
            let list: Vec<Value> = tokens.iter().map(|t| operator_token_json(t, now)).collect();
            let rows = tokens
                .iter()
                .map(|t| {
                    vec![
                        t.name.clone(),
                        t.prefix.clone(),
                        t.created_at.to_string(),
                        t.expires_at.map_or_else(|| "-".into(), |e| e.to_string()),
                        if t.is_valid_at(now) { "valid" } else { "ended" }.to_string(),
                        t.id.to_string(),
                    ]
                })
                .collect();
            Ok(Output::new(
                json!({ "tokens": list }),
                table(&["NAME", "PREFIX", "ISSUED", "ENDS", "STATE", "ID"], rows),
            ))
        }
        OperatorTokenCommand::Revoke { which } => {
            let revoked = svc.directory().revoke_operator_token(&which, actor).await?;
            let list: Vec<Value> = revoked
                .iter()
                .map(|t| operator_token_json(t, now))
                .collect();
            Ok(Output::new(
                json!({ "revoked": list }),
                format!("Revoked {} operator token(s) of {which}.\n", revoked.len()),
            ))
        }
        OperatorTokenCommand::Rotate {
            name,
            overlap_hours,
        } => {
            let overlap = Duration::from_secs(overlap_hours.saturating_mul(3600));
            let t = svc
                .directory()
                .rotate_operator_token(&name, overlap, actor)
                .await?;
            let mut out = issued(&t, now);
            out.text.push_str(&format!(
                "The previous token of {name} keeps working for {overlap_hours} h.\n"
            ));
            Ok(out)
        }
    }
}
