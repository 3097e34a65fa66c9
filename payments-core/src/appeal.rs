//! Payment appeals: a merchant or a payer says "I paid" about a closed payment, with the amount
//! sent and up to two receipts, and the provider on record or support decides.
//!
//! An appeal has its own small state machine ([`apply`]), separate from the payment's:
//!
//! | From | Trigger | To |
//! |---|---|---|
//! | `open` | [`AppealTrigger::Review`] (the provider took it, or support did) | `under_review` |
//! | `open`, `under_review` | [`AppealTrigger::Accept`] (the transfer was found, with its amount) | `accepted` |
//! | `open`, `under_review` | [`AppealTrigger::Reject`] (not found) | `rejected` |
//! | `open`, `under_review` | [`AppealTrigger::Expire`] (at its deadline) | `expired` |
//!
//! Each active state has a deadline ([`AppealDeadlines`]): an appeal nobody decides expires
//! at it, and nothing moves. Only an accepted appeal moves the payment, through the
//! payment's own state machine (`service::Appeals`): the spec's re-check, `appeal` and then
//! `completed` with the amount found, with its callback and its ledger entry.

use std::time::Duration;

use serde::Serialize;

use crate::amount::Amount;
use crate::clock::Timestamp;
use crate::ids::{AppealId, PaymentId, ProjectId, ProviderName};
use crate::payment::{Payment, PaymentStatus};
use crate::receipt::ReceiptKind;

/// Why the payer appeals.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum AppealReason {
    /// The payer paid, and the payment says canceled (or expired).
    PaidButCanceled,
    /// The payer sent another amount than the payment's.
    PaidOtherAmount,
    /// The payer paid twice.
    PaidTwice,
}

/// Where an appeal is in its life.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum AppealState {
    /// Received; nobody has taken it yet.
    Open,
    /// The provider or support is looking at it.
    UnderReview,
    /// The transfer was found: the payment was completed with the amount found.
    Accepted,
    /// The transfer was not found: nothing moved.
    Rejected,
    /// Nobody decided before its deadline: nothing moved.
    Expired,
}

/// Who opened an appeal.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum AppealSource {
    /// The merchant, over the API or the cabinet.
    Merchant,
    /// The payer, from the payer page.
    Payer,
}

macro_rules! names {
    ($ty:ident { $($variant:ident = $name:literal),+ $(,)? }) => {
        impl $ty {
            /// Every value, in declaration order.
            pub const ALL: &'static [$ty] = &[$($ty::$variant),+];

            /// The name on the wire and in storage.
            pub fn as_str(self) -> &'static str {
                match self {
                    $($ty::$variant => $name),+
                }
            }

            /// The value of a name written by [`as_str`](Self::as_str).
            pub fn parse(s: &str) -> Option<$ty> {
                Self::ALL.iter().copied().find(|v| v.as_str() == s)
            }
        }

        impl std::fmt::Display for $ty {
            fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                f.write_str(self.as_str())
            }
        }
    };
}

names!(AppealReason {
    PaidButCanceled = "paid_but_canceled",
    PaidOtherAmount = "paid_other_amount",
    PaidTwice = "paid_twice",
});
names!(AppealState {
    Open = "open",
    UnderReview = "under_review",
    Accepted = "accepted",
    Rejected = "rejected",
    Expired = "expired",
});
names!(AppealSource {
    Merchant = "merchant",
    Payer = "payer",
});

impl AppealState {
    /// Whether the appeal still waits for a decision (`open`, `under_review`).
    pub fn is_active(self) -> bool {
        matches!(self, AppealState::Open | AppealState::UnderReview)
    }
}

/// What is kept of a receipt beside its sealed bytes: its kind, size and SHA-256.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct ReceiptInfo {
    /// The kind found in its content.
    pub kind: ReceiptKind,
    /// Its size in bytes.
    pub size: u32,
    /// The SHA-256 of its bytes, hexadecimal.
    pub sha256: String,
}

/// The most appeals one payment takes from one source (merchant, payer) in all.
pub const MAX_APPEALS_PER_SOURCE: u32 = 3;

/// The longest idempotency key, in bytes (visible ASCII).
pub const IDEMPOTENCY_KEY_MAX_LEN: usize = 64;

/// The longest `payer_bank`, in characters.
pub const PAYER_BANK_MAX_CHARS: usize = 100;

/// The longest note of a decision, in characters.
pub const NOTE_MAX_CHARS: usize = 500;

/// An appeal about a payment.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Appeal {
    /// Its id.
    pub id: AppealId,
    /// The payment's project.
    pub project_id: ProjectId,
    /// The payment appealed.
    pub payment_id: PaymentId,
    /// Who opened it.
    pub source: AppealSource,
    /// The merchant's idempotency key (a payer's appeal has none).
    pub idempotency_key: Option<String>,
    /// The SHA-256 of what was asked (hexadecimal), to tell a repeat from another appeal under
    /// the same key.
    pub fingerprint: String,
    /// Why.
    pub reason: AppealReason,
    /// The amount the payer says was sent, if given.
    pub claimed_amount: Option<Amount>,
    /// When the payer says they paid, if given.
    pub paid_at: Option<Timestamp>,
    /// The bank the payer paid from, as they name it, if given.
    pub payer_bank: Option<String>,
    /// The receipts (at most [`crate::receipt::MAX_RECEIPTS`]), in the order sent.
    pub receipts: Vec<ReceiptInfo>,
    /// Where it is.
    pub state: AppealState,
    /// When its current state ends: an active appeal expires at it.
    pub deadline: Timestamp,
    /// The provider on record that was asked, once it was.
    pub provider: Option<ProviderName>,
    /// The amount found, once accepted.
    pub resolved_amount: Option<Amount>,
    /// Who decided (`provider:<name>`, an operator, `system` for an expiry).
    pub decided_by: Option<String>,
    /// Why, in the decider's words.
    pub note: Option<String>,
    /// Created.
    pub created_at: Timestamp,
    /// Last changed.
    pub updated_at: Timestamp,
    /// Incremented by every change (optimistic concurrency).
    pub version: u64,
}

/// How long each active state lasts before the appeal expires.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct AppealDeadlines {
    /// From opening to being taken (by the provider or support): 24 hours.
    pub open: Duration,
    /// From being taken to a decision: 72 hours.
    pub under_review: Duration,
}

impl Default for AppealDeadlines {
    fn default() -> Self {
        AppealDeadlines {
            open: Duration::from_secs(24 * 3600),
            under_review: Duration::from_secs(72 * 3600),
        }
    }
}

/// What happens to an appeal.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum AppealTrigger {
    /// The provider or support took it.
    Review {
        /// The provider asked, if it was a provider.
        provider: Option<ProviderName>,
    },
    /// The transfer was found, with this amount.
    Accept {
        /// The amount that arrived.
        amount: Amount,
        /// Who decided.
        by: String,
        /// Why.
        note: Option<String>,
    },
    /// The transfer was not found.
    Reject {
        /// Who decided.
        by: String,
        /// Why.
        note: Option<String>,
    },
    /// Its deadline passed.
    Expire,
}

impl AppealTrigger {
    /// The trigger's name, for errors and audit records.
    pub fn name(&self) -> &'static str {
        match self {
            AppealTrigger::Review { .. } => "review",
            AppealTrigger::Accept { .. } => "accept",
            AppealTrigger::Reject { .. } => "reject",
            AppealTrigger::Expire => "expire",
        }
    }
}

/// A trigger the appeal's state refuses.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("cannot {trigger} an appeal in state {state}: {reason}")]
pub struct AppealTransitionError {
    /// The trigger.
    pub trigger: &'static str,
    /// The appeal's state.
    pub state: AppealState,
    /// Why.
    pub reason: &'static str,
}

/// The appeal after `trigger` at `now`, version and time moved on; the appeal's rules decide.
pub fn apply(
    appeal: &Appeal,
    trigger: AppealTrigger,
    now: Timestamp,
    deadlines: AppealDeadlines,
) -> Result<Appeal, AppealTransitionError> {
    let refuse = |reason| AppealTransitionError {
        trigger: trigger.name(),
        state: appeal.state,
        reason,
    };
    if !appeal.state.is_active() {
        return Err(refuse("the appeal is decided"));
    }
    let mut next = appeal.clone();
    match trigger.clone() {
        AppealTrigger::Review { provider } => {
            if appeal.state != AppealState::Open {
                return Err(refuse("the appeal is already under review"));
            }
            next.state = AppealState::UnderReview;
            next.deadline = now.saturating_add(deadlines.under_review);
            next.provider = provider.or(next.provider);
        }
        AppealTrigger::Accept { amount, by, note } => {
            next.state = AppealState::Accepted;
            next.resolved_amount = Some(amount);
            next.decided_by = Some(by);
            next.note = note;
        }
        AppealTrigger::Reject { by, note } => {
            next.state = AppealState::Rejected;
            next.decided_by = Some(by);
            next.note = note;
        }
        AppealTrigger::Expire => {
            if now < appeal.deadline {
                return Err(refuse("its deadline has not passed"));
            }
            next.state = AppealState::Expired;
            next.decided_by = Some("system".into());
        }
    }
    next.updated_at = now.max(appeal.updated_at);
    next.version = appeal.version + 1;
    debug_assert!(next.state != appeal.state);
    debug_assert_eq!(
        next.resolved_amount.is_some(),
        next.state == AppealState::Accepted
    );
    Ok(next)
}

/// Whether `payment` may be appealed at all: a closed payment that had requisites (a payer
/// could have paid it). `Err` names why not.
pub fn appealable(payment: &Payment) -> Result<(), &'static str> {
    match payment.status {
        PaymentStatus::Completed | PaymentStatus::Canceled | PaymentStatus::Appeal => {}
        PaymentStatus::Error => return Err("the payment never had requisites"),
        _ => return Err("the payment is still open; appeal once it is closed"),
    }
    if payment.pricing.is_none() {
        return Err("the payment never had requisites");
    }
    Ok(())
}

/// In which order a list of appeals comes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AppealOrder {
    /// Newest first by `(created_at, id)` (the merchant's lists).
    NewestFirst,
    /// Oldest first by `(created_at, id)` (the support queue).
    OldestFirst,
}

/// A page of appeals.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AppealQuery {
    /// Only this project's (the operator's queue: any).
    pub project: Option<ProjectId>,
    /// Only this payment's.
    pub payment: Option<PaymentId>,
    /// Only in these states (empty: any).
    pub states: Vec<AppealState>,
    /// Only active appeals whose deadline is at or before this (the expiry sweep).
    pub deadline_by: Option<Timestamp>,
    /// The order.
    pub order: AppealOrder,
    /// Only appeals after this `(created_at, id)` in the order (the cursor).
    pub after: Option<(Timestamp, AppealId)>,
    /// The most to answer.
    pub limit: usize,
}

impl AppealQuery {
    /// Any appeal, newest first, `limit` of them.
    pub fn newest(limit: usize) -> AppealQuery {
        AppealQuery {
            project: None,
            payment: None,
            states: Vec::new(),
            deadline_by: None,
            order: AppealOrder::NewestFirst,
            after: None,
            limit,
        }
    }

    /// Whether `appeal` is in the page's set (the order and limit aside): the reference
    /// semantics every store follows.
    pub fn matches(&self, appeal: &Appeal) -> bool {
        let key = (appeal.created_at, appeal.id);
        self.project.is_none_or(|p| p == appeal.project_id)
            && self.payment.is_none_or(|p| p == appeal.payment_id)
            && (self.states.is_empty() || self.states.contains(&appeal.state))
            && self
                .deadline_by
                .is_none_or(|d| appeal.state.is_active() && appeal.deadline <= d)
            && self.after.is_none_or(|after| match self.order {
                AppealOrder::NewestFirst => key < after,
                AppealOrder::OldestFirst => key > after,
            })
    }
}

/// What [`crate::store::AppealStore::insert_appeal`] did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum AppealInsert {
    /// Stored, with its receipts.
    Inserted,
    /// The project has an appeal under this idempotency key: that one, nothing written.
    Existing(Appeal),
    /// The payment has an active appeal: that one, nothing written.
    Active(Appeal),
    /// The payment has [`MAX_APPEALS_PER_SOURCE`] appeals from this source: nothing written.
    Full,
}

/// An appeal as the APIs show it (`GET /api/v1/appeals/{id}`, the operator's queue): every
/// field but the idempotency fingerprint; receipts by index, kind, size and SHA-256 (their
/// bytes are read from their own path).
pub fn view(appeal: &Appeal) -> serde_json::Value {
    let receipts: Vec<serde_json::Value> = appeal
        .receipts
        .iter()
        .enumerate()
        .map(|(i, r)| {
            serde_json::json!({
                "index": i,
                "content_type": r.kind.content_type(),
                "size": r.size,
                "sha256": r.sha256,
            })
        })
        .collect();
    serde_json::json!({
        "id": appeal.id.to_string(),
        "payment_id": appeal.payment_id.to_string(),
        "source": appeal.source,
        "idempotency_key": appeal.idempotency_key,
        "reason": appeal.reason,
        "claimed_amount": appeal.claimed_amount,
        "paid_at": appeal.paid_at.map(Timestamp::to_rfc3339),
        "payer_bank": appeal.payer_bank,
        "receipts": receipts,
        "state": appeal.state,
        "deadline": appeal.deadline.to_rfc3339(),
        "provider": appeal.provider.as_ref().map(ProviderName::as_str),
        "resolved_amount": appeal.resolved_amount,
        "decided_by": appeal.decided_by,
        "note": appeal.note,
        "created_at": appeal.created_at.to_rfc3339(),
        "updated_at": appeal.updated_at.to_rfc3339(),
    })
}

/// The headers every download of a receipt is answered with (the merchant API, the operator
/// API, the cabinet), name and value: never shown inline but saved as an attachment named
/// after the appeal, of the kind found in its content, not sniffed, sandboxed should a
/// browser render it anyway, not cached.
pub fn receipt_download_headers(
    appeal: AppealId,
    kind: ReceiptKind,
) -> [(&'static str, String); 5] {
    [
        ("content-type", kind.content_type().to_string()),
        (
            "content-disposition",
            format!("attachment; filename=\"appeal-{appeal}.{}\"", kind.as_str()),
        ),
        ("x-content-type-options", "nosniff".to_string()),
        ("content-security-policy", "sandbox".to_string()),
        ("cache-control", "no-store".to_string()),
    ]
}

#[cfg(test)]
mod tests;
