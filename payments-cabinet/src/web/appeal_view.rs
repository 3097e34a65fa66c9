//! Appeals ([`payments_core::appeal`]) as the pages show them: an appeal's row (its state,
//! reason, amounts, deadline, outcome and receipts in words), and the payment card's appeals
//! section with its "Open an appeal" form. The handlers are in `appeals` (the card's form,
//! the receipts) and `appeal_queue` (support's queue); what an appeal may do is the core's.

use crate::accounts::Permission;
use axum::response::Response;
use payments_core::appeal::{
    self, Appeal, AppealQuery, AppealReason, AppealSource, AppealState, ReceiptInfo,
    MAX_APPEALS_PER_SOURCE,
};
use payments_core::payment::Payment;
use payments_core::project::Project;
use payments_core::Timestamp;

use super::i18n::{tr, trf};
use super::once::Flash;
use super::page::OrPage;
use super::state::CabinetState;
use super::views::{when, AppealForm, AppealRow, CardAppeals, ReceiptLink};
use crate::accounts::{Change, Client, Current};

/// An appeal's reason in words.
pub(crate) fn reason_text(reason: AppealReason) -> &'static str {
    match reason {
        AppealReason::PaidButCanceled => tr("Paid, but the payment says canceled"),
        AppealReason::PaidOtherAmount => tr("Paid another amount"),
        AppealReason::PaidTwice => tr("Paid twice"),
    }
}

/// An appeal's state in words (English: the API's word, `under_review` as two words).
pub(crate) fn state_text(state: AppealState) -> &'static str {
    match state {
        AppealState::Open => tr("appeal|open"),
        AppealState::UnderReview => tr("appeal|under review"),
        AppealState::Accepted => tr("appeal|accepted"),
        AppealState::Rejected => tr("appeal|rejected"),
        AppealState::Expired => tr("appeal|expired"),
    }
}

/// Who opened an appeal, in words.
fn source_text(source: AppealSource) -> &'static str {
    match source {
        AppealSource::Merchant => tr("the merchant"),
        AppealSource::Payer => tr("the payer (payer page)"),
    }
}

/// A receipt's link text: its number, kind and size in KiB (rounded up).
fn receipt_label(number: usize, r: &ReceiptInfo) -> String {
    let kib = u64::from(r.size).div_ceil(1024);
    trf(
        "Receipt {number}: {kind}, {size} KiB",
        &[
            ("number", &number),
            ("kind", &r.kind.as_str().to_ascii_uppercase()),
            ("size", &kib),
        ],
    )
}

/// What a decided appeal came to, in words; `None` while it waits.
fn outcome(a: &Appeal, currency: &str) -> Option<String> {
    match a.state {
        AppealState::Open | AppealState::UnderReview => None,
        AppealState::Accepted => Some(trf(
            "Accepted: the payment was completed with {amount} {currency}.",
            &[
                (
                    "amount",
                    &a.resolved_amount.map(|x| x.to_string()).unwrap_or_default(),
                ),
                ("currency", &currency),
            ],
        )),
        AppealState::Rejected => {
            Some(tr("Rejected: the transfer was not found; nothing moved.").into())
        }
        AppealState::Expired => {
            Some(tr("Expired: nobody decided before the deadline; nothing moved.").into())
        }
    }
}

/// An appeal as a row of the card or the queue; amounts in `currency` (the payment's),
/// overdue when active past its deadline at `now`.
pub(crate) fn row(a: &Appeal, currency: &str, now: Timestamp) -> AppealRow {
    AppealRow {
        id: a.id.to_string(),
        state: a.state.as_str(),
        state_text: state_text(a.state),
        reason: reason_text(a.reason),
        source: source_text(a.source),
        claimed: a.claimed_amount.map(|x| format!("{x} {currency}")),
        paid_at: a.paid_at.map(when),
        payer_bank: a.payer_bank.clone(),
        receipts: a
            .receipts
            .iter()
            .enumerate()
            .map(|(i, r)| ReceiptLink {
                href: format!("/appeals/{}/receipts/{i}", a.id),
                label: receipt_label(i + 1, r),
            })
            .collect(),
        created: when(a.created_at),
        deadline: when(a.deadline),
        overdue: a.state.is_active() && a.deadline <= now,
        active: a.state.is_active(),
        outcome: outcome(a, currency),
        note: a.note.clone(),
    }
}

/// The payment card's appeals section: the payment's appeals, newest first, and for a
/// merchant's user the "Open an appeal" form when the core says the payment can be appealed
/// ([`appeal::appealable`]), filled again with what a refused form carried. `None` when
/// there is nothing to show.
pub(crate) async fn card_appeals(
    st: &CabinetState,
    current: &Current,
    payment: &Payment,
    flash: Option<&Flash>,
) -> Result<Option<CardAppeals>, Response> {
    let query = AppealQuery {
        project: Some(payment.project_id),
        payment: Some(payment.id),
        ..AppealQuery::newest(MAX_APPEALS_PER_SOURCE as usize * 2)
    };
    let service = st.cabinet.service();
    let found = service.appeals().find_appeals(&query).await.or_page(st)?;
    let now = service.ports().clock.now();
    let rows: Vec<AppealRow> = found
        .appeals
        .iter()
        .map(|a| row(a, payment.currency.as_str(), now))
        .collect();
    let form = (!current.is_support()
        && current.may(Permission::Appeals)
        && appeal::appealable(payment).is_ok())
    .then(|| appeal_form(st, flash));
    if rows.is_empty() && form.is_none() {
        return Ok(None);
    }
    Ok(Some(CardAppeals {
        rows,
        form,
        queue: current.is_support(),
    }))
}

/// The form with a new idempotency key, and what a refused form carried.
fn appeal_form(st: &CabinetState, flash: Option<&Flash>) -> AppealForm {
    let typed = |field: &str| flash.and_then(|f| f.typed(field)).unwrap_or_default();
    let reason = typed("reason");
    AppealForm {
        key: crate::secrets::random_token(st.cabinet.service().ports().rng.as_ref()),
        reasons: AppealReason::ALL
            .iter()
            .map(|r| (r.as_str(), reason_text(*r), r.as_str() == reason))
            .collect(),
        claimed: typed("claimed_amount"),
        paid_at: typed("paid_at"),
        payer_bank: typed("payer_bank"),
    }
}

/// The cabinet's audit record of an appeal change (`appeal.open`, `appeal.accept` ...) by
/// `current`, in the audit log of the project's merchant (the core's audit trail has its own).
pub(crate) async fn audit(
    st: &CabinetState,
    current: &Current,
    client: &Client,
    project: &Project,
    action: &str,
    appeal: &Appeal,
) -> Result<(), Response> {
    let detail = match appeal.resolved_amount {
        Some(amount) => format!("payment {}, amount {amount}", appeal.payment_id),
        None => format!("payment {}, {}", appeal.payment_id, appeal.reason.as_str()),
    };
    let change = Change {
        merchant: project.merchant_id,
        project: Some(project.id),
        action,
        target: &appeal.id.to_string(),
        detail: Some(detail),
    };
    st.cabinet
        .audit_log()
        .change(current, client, change)
        .await
        .or_page(st)
}
