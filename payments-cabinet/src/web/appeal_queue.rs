//! Support's queue of appeals (`GET /appeals`, support users only: anyone else gets "not
//! found"): the active appeals (`open`, `under_review`), oldest first, 50 a page, each with its
//! project, payment, deadline, reason, amounts and receipts, and its three outcomes: accept
//! with an amount, reject with an optional note, take for review. Each outcome opens a
//! confirmation page (`GET /appeals/{id}/accept` ...) whose form carries it out (`POST`, the
//! cabinet's same-origin check, a redirect back to the queue with the result). The core
//! decides ([`Appeals::decide_appeal`](payments_core::service::Appeals::decide_appeal) with
//! the support user as the actor and [`ChangeSource::Support`]) and audits every decision; the
//! cabinet's audit log records it too (`appeal.accept`, `appeal.reject`, `appeal.review`).

use std::collections::hash_map::{Entry, HashMap};

use askama::Template;
use axum::extract::{Path, Query, State};
use axum::http::StatusCode;
use axum::response::Response;
use payments_core::amount::Amount;
use payments_core::appeal::{Appeal, AppealOrder, AppealQuery, AppealState, AppealTrigger};
use payments_core::history::ChangeSource;
use payments_core::ids::{AppealId, ProjectId};
use payments_core::payment::Payment;
use payments_core::project::Project;
use payments_core::service::{appeal_note, AppealError};
use payments_core::store::MerchantStoreExt;
use payments_core::Timestamp;

use super::appeal_view::{self, row, state_text};
use super::extract::{FormData, Signed};
use super::i18n::{tr, trf};
use super::once::{self, Flash};
use super::page::{error_page, ok, see_other, OrPage, PageError, PageResult};
use super::query::{cursor, PAGE_SIZE};
use super::state::CabinetState;
use super::views::{status_text, when, AppealRow, Chrome, Link};
use crate::accounts::{Client, Current};

/// The name of the queue's page in a refused decision's slot.
const QUEUE: &str = "appeals";

/// An appeal in the queue, with its payment and project.
#[derive(Debug, Clone)]
pub(crate) struct QueueItem {
    pub(crate) appeal: AppealRow,
    pub(crate) project: String,
    pub(crate) project_href: String,
    pub(crate) payment_href: String,
    pub(crate) payment_id: String,
    pub(crate) merchant_payment_id: String,
    /// The payment's amount and currency now.
    pub(crate) payment_amount: String,
    /// The payment's status code.
    pub(crate) payment_status: String,
    /// The amount "Accept" offers: the claimed one, else the payment's.
    pub(crate) accept_amount: String,
    pub(crate) currency: String,
}

/// `GET /appeals`.
#[derive(Template)]
#[template(path = "appeals.html")]
pub(crate) struct QueuePage {
    pub(crate) chrome: Chrome,
    pub(crate) items: Vec<QueueItem>,
    /// The next (newer) page.
    pub(crate) next: Option<String>,
    /// Whether this is a later page (a link back to the first).
    pub(crate) later: bool,
}

/// `GET /appeals/{id}/accept|reject|review`: what the decision does, and its form.
#[derive(Template)]
#[template(path = "appeal_decide.html")]
pub(crate) struct DecidePage {
    pub(crate) chrome: Chrome,
    pub(crate) item: QueueItem,
    /// `accept`, `reject` or `review`.
    pub(crate) decision: &'static str,
    pub(crate) paragraphs: Vec<String>,
    /// The amount the form carries (accept).
    pub(crate) amount: String,
    pub(crate) button: String,
}

/// A decision support may take on an appeal.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Decision {
    /// Take it: the appeal is under review, with a longer deadline.
    Review,
    /// The transfer was found, with an amount: the payment is completed with it.
    Accept,
    /// Not found: nothing moves.
    Reject,
}

impl Decision {
    /// Its name in paths, audit actions and redirects.
    pub(crate) fn name(self) -> &'static str {
        match self {
            Decision::Review => "review",
            Decision::Accept => "accept",
            Decision::Reject => "reject",
        }
    }

    fn parse(s: &str) -> Option<Decision> {
        [Decision::Review, Decision::Accept, Decision::Reject]
            .into_iter()
            .find(|d| d.name() == s)
    }
}

/// Why a decision was refused.
#[derive(Debug, thiserror::Error)]
pub(crate) enum DecisionError {
    /// The amount does not read as an amount.
    #[error("amount: not an amount")]
    Amount,
    /// The core refused it.
    #[error(transparent)]
    Appeal(#[from] AppealError),
}

/// Support only: anyone else is answered "not found", as for a page that does not exist.
// The error is the answer itself, as every handler's.
#[allow(clippy::result_large_err)]
fn support_only(st: &CabinetState, current: &Current) -> Result<(), Response> {
    if current.is_support() {
        Ok(())
    } else {
        Err(PageError::NotFound.render(st))
    }
}

/// What the queue's links carry: the page's cursor, a decision's result, a refusal.
#[derive(Debug, Default, serde::Deserialize)]
pub(crate) struct QueueQuery {
    #[serde(default)]
    after: String,
    #[serde(default)]
    done: Option<String>,
    #[serde(default)]
    appeal: Option<String>,
    #[serde(default)]
    flash: Option<String>,
}

/// `GET /appeals`: the active appeals, oldest first.
pub(crate) async fn queue(
    State(st): State<CabinetState>,
    signed: Signed,
    Query(q): Query<QueueQuery>,
) -> PageResult {
    support_only(&st, &signed.current)?;
    let flash = once::flash(&st, signed.current.session.id, q.flash.as_deref(), QUEUE).await?;
    let query = AppealQuery {
        states: vec![AppealState::Open, AppealState::UnderReview],
        order: AppealOrder::OldestFirst,
        after: cursor::<AppealId>(&q.after),
        ..AppealQuery::newest(PAGE_SIZE)
    };
    let appeals = st.cabinet.service().appeals();
    let page = appeals.find_appeals(&query).await.or_page(&st)?;
    let mut projects = HashMap::new();
    let mut items = Vec::with_capacity(page.appeals.len());
    for a in &page.appeals {
        items.push(queue_item(&st, a, &mut projects).await?);
    }
    let next = page
        .next
        .map(|(t, id)| format!("/appeals?after={}_{id}", t.unix_millis()));
    let notice = match (q.done.as_deref().and_then(Decision::parse), &q.appeal) {
        (Some(d), Some(id)) => result_notice(&st, d, id).await?,
        _ => None,
    };
    let chrome = st
        .chrome(tr("Appeals"), Some(&signed.current))
        .section("appeals")
        .notice(notice);
    let page = ok(&QueuePage {
        chrome: once::with_errors(chrome, flash.as_ref()),
        items,
        next,
        later: !q.after.is_empty(),
    });
    Ok(once::answer(flash.as_ref(), page))
}

/// An appeal with its payment and project (projects read once per page).
async fn queue_item(
    st: &CabinetState,
    a: &Appeal,
    projects: &mut HashMap<ProjectId, Project>,
) -> Result<QueueItem, Response> {
    let store = st.cabinet.service().store();
    let payment = store
        .payment(a.payment_id)
        .await
        .or_page(st)?
        .ok_or_else(|| PageError::NotFound.render(st))?;
    let project = match projects.entry(a.project_id) {
        Entry::Occupied(known) => known.into_mut(),
        Entry::Vacant(slot) => slot.insert(
            store
                .project(a.project_id)
                .await
                .or_page(st)?
                .ok_or_else(|| PageError::NotFound.render(st))?,
        ),
    };
    let now = st.cabinet.service().ports().clock.now();
    Ok(item(a, &payment, project, now))
}

/// An appeal as the queue and its confirmation pages show it.
fn item(a: &Appeal, payment: &Payment, project: &Project, now: Timestamp) -> QueueItem {
    let currency = payment.currency.as_str().to_string();
    QueueItem {
        appeal: row(a, &currency, now),
        project: project.name.clone(),
        project_href: format!("/projects/{}/payments", project.id),
        payment_href: format!("/payments/{}", payment.id),
        payment_id: payment.id.to_string(),
        merchant_payment_id: payment.merchant_payment_id.as_str().to_string(),
        payment_amount: format!("{} {currency}", payment.amount),
        payment_status: payment.status.as_str().to_string(),
        accept_amount: a.claimed_amount.unwrap_or(payment.amount).to_string(),
        currency,
    }
}

/// The appeal `id` with its payment and project, or "not found".
async fn appeal_item(
    st: &CabinetState,
    id: &str,
) -> Result<(Appeal, Payment, Project, QueueItem), Response> {
    let id: AppealId = id.parse().map_err(|_| PageError::NotFound.render(st))?;
    let appeal = st
        .cabinet
        .service()
        .appeals()
        .appeal_any(id)
        .await
        .map_err(|e| error_page(e, st))?;
    let store = st.cabinet.service().store();
    let not_found = || PageError::NotFound.render(st);
    let payment = store
        .payment(appeal.payment_id)
        .await
        .or_page(st)?
        .ok_or_else(not_found)?;
    let project = store
        .project(appeal.project_id)
        .await
        .or_page(st)?
        .ok_or_else(not_found)?;
    let now = st.cabinet.service().ports().clock.now();
    let item = item(&appeal, &payment, &project, now);
    Ok((appeal, payment, project, item))
}

/// What a decision did, read back from the store: the payment completed with its amount, or
/// nothing moved, or the appeal's new deadline.
async fn result_notice(
    st: &CabinetState,
    decision: Decision,
    id: &str,
) -> Result<Option<String>, Response> {
    let Ok((appeal, payment, _, _)) = appeal_item(st, id).await else {
        return Ok(None);
    };
    let mpid = payment.merchant_payment_id.as_str();
    let status = status_text(payment.status.as_str());
    Ok(Some(match (decision, appeal.state) {
        (Decision::Accept, AppealState::Accepted) => trf(
            "Appeal accepted: payment {payment} is {status} with {amount} {currency}.",
            &[
                ("payment", &mpid),
                ("status", &status),
                ("amount", &payment.amount),
                ("currency", &payment.currency.as_str()),
            ],
        ),
        (Decision::Reject, AppealState::Rejected) => trf(
            "Appeal rejected: nothing moved; payment {payment} stays {status}.",
            &[("payment", &mpid), ("status", &status)],
        ),
        (Decision::Review, AppealState::UnderReview) => trf(
            "Appeal taken for review: decide it by {deadline}.",
            &[("deadline", &when(appeal.deadline).1)],
        ),
        (_, state) => trf("The appeal is {state}.", &[("state", &state_text(state))]),
    }))
}

/// `GET /appeals/{id}/{decision}`: the confirmation page of a decision.
pub(crate) async fn decide_page(
    State(st): State<CabinetState>,
    signed: Signed,
    Path((id, decision)): Path<(String, String)>,
    Query(q): Query<AmountQuery>,
) -> PageResult {
    support_only(&st, &signed.current)?;
    let decision = Decision::parse(&decision).ok_or_else(|| PageError::NotFound.render(&st))?;
    let (appeal, _, _, item) = appeal_item(&st, &id).await?;
    if !appeal.state.is_active() {
        return Err(PageError::Conflict(trf(
            "This appeal was already decided ({state}); nothing was changed.",
            &[("state", &state_text(appeal.state))],
        ))
        .render(&st));
    }
    let amount = q.amount.unwrap_or_else(|| item.accept_amount.clone());
    let (title, paragraphs, button) = texts(decision, &item, amount.trim());
    let chrome = st
        .chrome(title, Some(&signed.current))
        .section("appeals")
        .crumbs(vec![Link::new("/appeals", tr("Appeals"))]);
    Ok(ok(&DecidePage {
        chrome,
        item,
        decision: decision.name(),
        paragraphs,
        amount,
        button,
    }))
}

/// The amount the queue's Accept form sends to the confirmation page.
#[derive(Debug, Default, serde::Deserialize)]
pub(crate) struct AmountQuery {
    #[serde(default)]
    amount: Option<String>,
}

/// A decision's title, what it does in words, and its button.
fn texts(decision: Decision, item: &QueueItem, amount: &str) -> (String, Vec<String>, String) {
    let mpid = item.merchant_payment_id.as_str();
    match decision {
        Decision::Accept => (
            trf("Accept the appeal about {payment}?", &[("payment", &mpid)]),
            vec![
                trf(
                    "The transfer was found: payment {payment} is re-checked and completed with the amount below ({amount} {currency}), with its callback and its balance entry.",
                    &[("payment", &mpid), ("amount", &amount), ("currency", &item.currency)],
                ),
                tr("Check the amount against the receipts: it is what the merchant is credited.")
                    .into(),
            ],
            tr("Accept and complete the payment").into(),
        ),
        Decision::Reject => (
            trf("Reject the appeal about {payment}?", &[("payment", &mpid)]),
            vec![tr(
                "The transfer was not found: the appeal is closed as rejected and the payment stays as it is. Nothing moves.",
            )
            .into()],
            tr("Reject the appeal").into(),
        ),
        Decision::Review => (
            trf("Take the appeal about {payment} for review?", &[("payment", &mpid)]),
            vec![tr(
                "The appeal is marked under review and gets the longer deadline of a review; nothing moves yet.",
            )
            .into()],
            tr("Take for review").into(),
        ),
    }
}

/// The trigger of a decision's form, decided by the support user `by`.
fn trigger(
    decision: Decision,
    form: &FormData,
    by: String,
) -> Result<AppealTrigger, DecisionError> {
    let note = || appeal_note(Some(form.get("note")));
    Ok(match decision {
        Decision::Review => AppealTrigger::Review { provider: None },
        Decision::Reject => AppealTrigger::Reject { by, note: note()? },
        Decision::Accept => AppealTrigger::Accept {
            amount: Amount::parse(form.get("amount").trim()).map_err(|_| DecisionError::Amount)?,
            by,
            note: note()?,
        },
    })
}

/// `POST /appeals/{id}/{decision}`: carries the decision out, then back to the queue with
/// its result; a refusal is shown on the queue once, with its reason.
pub(crate) async fn decide(
    State(st): State<CabinetState>,
    signed: Signed,
    client: Client,
    Path((id, decision)): Path<(String, String)>,
    form: FormData,
) -> PageResult {
    support_only(&st, &signed.current)?;
    let decision = Decision::parse(&decision).ok_or_else(|| PageError::NotFound.render(&st))?;
    let (appeal, _, project, _) = appeal_item(&st, &id).await?;
    let actor = signed.current.actor().0;
    let decided = match trigger(decision, &form, actor.clone()) {
        Ok(t) => st
            .cabinet
            .service()
            .appeals()
            .decide_appeal(appeal.id, t, &actor, ChangeSource::Support)
            .await
            .map_err(DecisionError::from),
        Err(e) => Err(e),
    };
    match decided {
        Ok((after, _)) => {
            let action = format!("appeal.{}", decision.name());
            appeal_view::audit(&st, &signed.current, &client, &project, &action, &after).await?;
            Ok(see_other(&format!(
                "/appeals?done={}&appeal={}",
                decision.name(),
                after.id
            )))
        }
        Err(e) => {
            let (status, message) = refusal(&e);
            let flash = Flash::new(QUEUE, status).error("appeals-queue", message);
            Ok(once::refuse(&st, signed.current.session.id, "/appeals", "", flash).await)
        }
    }
}

/// A refused decision: its status and reason.
fn refusal(e: &DecisionError) -> (StatusCode, String) {
    match e {
        DecisionError::Amount => (
            StatusCode::BAD_REQUEST,
            tr("Write the amount as a number, such as 1500 or 1500.50. Nothing was changed.")
                .into(),
        ),
        DecisionError::Appeal(AppealError::Transition(t)) if !t.state.is_active() => (
            StatusCode::CONFLICT,
            trf(
                "This appeal was already decided ({state}); nothing was changed.",
                &[("state", &state_text(t.state))],
            ),
        ),
        DecisionError::Appeal(AppealError::Transition(_)) => (
            StatusCode::CONFLICT,
            tr("This appeal is already under review; nothing was changed.").into(),
        ),
        DecisionError::Appeal(AppealError::Invalid { why, .. }) => (
            StatusCode::BAD_REQUEST,
            trf("Note: {why}. Nothing was changed.", &[("why", why)]),
        ),
        DecisionError::Appeal(AppealError::Contended | AppealError::Store(_)) => (
            StatusCode::SERVICE_UNAVAILABLE,
            tr("The service cannot answer now. Try again in a moment.").into(),
        ),
        DecisionError::Appeal(other) => (
            StatusCode::CONFLICT,
            trf(
                "Not possible: {why}. Nothing was changed.",
                &[("why", &other.to_string())],
            ),
        ),
    }
}
