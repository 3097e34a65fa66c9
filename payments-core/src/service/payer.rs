//! The hosted payer page: which payments have one, their links, what a link shows, and the
//! payer's "I paid" from it.

use super::{AppealError, AppealRequest, Appeals, Payments, ReadError};
use crate::appeal::{
    self, Appeal, AppealQuery, AppealReason, AppealSource, AppealState, MAX_APPEALS_PER_SOURCE,
};
use crate::clock::Timestamp;
use crate::ids::AppealId;
use crate::payer::{PageToken, PayerState, PayerView, PaymentPageRecord, PAYER_MIN_RECEIPTS};
use crate::payment::{Payment, PaymentStatus};
use crate::project::Project;
use crate::store::MerchantStoreExt;
use crate::store::PayerPageStoreExt;

/// What the payer sees of their own appeal: its state, why, and when it was received; never
/// its receipts, the amount found or who decided.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PayerAppeal {
    /// Where it is.
    pub state: AppealState,
    /// The reason the payer gave.
    pub reason: AppealReason,
    /// When it was received.
    pub received_at: Timestamp,
}

/// Whether a payer page offers "I paid", and if not, why.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AppealOffer {
    /// The form, with the reasons that fit what the page says ([`appeal_reasons`]).
    Form(&'static [AppealReason]),
    /// The payment is still open (`created`, `processing`, past its deadline too until the
    /// sweeper closes it): an appeal waits until it is closed.
    StillOpen,
    /// The payment never had requisites (`error`): there was nothing to pay to.
    NeverPayable,
    /// The payment is being re-checked already (`appeal`).
    BeingChecked,
    /// The payer's appeal is waiting for its decision.
    Waiting(AppealId),
    /// The payer has sent every appeal the payment takes from them
    /// ([`MAX_APPEALS_PER_SOURCE`]).
    Full,
}

impl AppealOffer {
    /// The reasons offered: empty unless [`AppealOffer::Form`].
    pub fn reasons(&self) -> &'static [AppealReason] {
        match self {
            AppealOffer::Form(reasons) => reasons,
            _ => &[],
        }
    }
}

/// The reasons "I paid" offers on a page in `state`: a canceled or expired page, "paid but it
/// says canceled" and "paid another amount" (a transfer of another amount is not matched, so
/// the payment ran out); a completed page, "paid another amount" and "paid twice" (one transfer
/// was counted). Any other state offers none.
pub fn appeal_reasons(state: &PayerState) -> &'static [AppealReason] {
    match state {
        PayerState::Canceled | PayerState::Expired => {
            &[AppealReason::PaidButCanceled, AppealReason::PaidOtherAmount]
        }
        PayerState::Completed => &[AppealReason::PaidOtherAmount, AppealReason::PaidTwice],
        _ => &[],
    }
}

/// Whether the page of `payment`, showing `state`, offers "I paid", given the payment's
/// `appeals` (any source; only the payer's count): a payment that may be appealed
/// ([`appeal::appealable`]) and whose state has reasons, unless the payer's appeal is waiting
/// for its decision or the payer has sent [`MAX_APPEALS_PER_SOURCE`]. A merchant's appeal
/// under way is not shown: the store refuses a second active appeal when one is sent.
pub fn appeal_offer(payment: &Payment, state: &PayerState, appeals: &[Appeal]) -> AppealOffer {
    match payment.status {
        PaymentStatus::Created | PaymentStatus::Processing => return AppealOffer::StillOpen,
        PaymentStatus::Appeal => return AppealOffer::BeingChecked,
        _ => {}
    }
    let reasons = appeal_reasons(state);
    if appeal::appealable(payment).is_err() || reasons.is_empty() {
        return AppealOffer::NeverPayable;
    }
    let mut payer = appeals
        .iter()
        .filter(|a| a.payment_id == payment.id && a.source == AppealSource::Payer);
    if let Some(active) = payer.clone().find(|a| a.state.is_active()) {
        return AppealOffer::Waiting(active.id);
    }
    if payer.nth(MAX_APPEALS_PER_SOURCE as usize - 1).is_some() {
        return AppealOffer::Full;
    }
    AppealOffer::Form(reasons)
}

/// The payer's newest appeal of `payment` among `appeals`, as the payer sees it.
pub fn newest_payer_appeal(payment: &Payment, appeals: &[Appeal]) -> Option<PayerAppeal> {
    appeals
        .iter()
        .filter(|a| a.payment_id == payment.id && a.source == AppealSource::Payer)
        .max_by_key(|a| (a.created_at, a.id))
        .map(|a| PayerAppeal {
            state: a.state,
            reason: a.reason,
            received_at: a.created_at,
        })
}

/// A live payer page with its "I paid" part ([`Payments::payer_page_detail`]): what it shows,
/// whether it takes the form, and the payer's newest appeal.
#[derive(Debug, Clone)]
pub struct PayerPageDetail {
    payment: Payment,
    view: PayerView,
    offer: AppealOffer,
    appeal: Option<PayerAppeal>,
}

impl PayerPageDetail {
    /// What the page shows of the payment.
    pub fn view(&self) -> &PayerView {
        &self.view
    }

    /// Whether the page offers "I paid" ([`appeal_offer`]).
    pub fn offer(&self) -> AppealOffer {
        self.offer
    }

    /// The payer's newest appeal about the payment.
    pub fn appeal(&self) -> Option<&PayerAppeal> {
        self.appeal.as_ref()
    }

    /// Whether the page takes "I paid" now: its offer is the form; otherwise the refusal the
    /// payer is shown ([`AppealError::NotAppealable`] for an open, failed or re-checked
    /// payment, [`AppealError::Active`] while the payer's appeal waits, [`AppealError::Full`]
    /// once the payer has sent every appeal the payment takes).
    pub fn accepts(&self) -> Result<(), AppealError> {
        let refusal = match self.offer {
            AppealOffer::Form(_) => return Ok(()),
            AppealOffer::StillOpen => {
                AppealError::NotAppealable("the payment is still open; appeal once it is closed")
            }
            AppealOffer::NeverPayable => {
                AppealError::NotAppealable("the payment never had requisites")
            }
            AppealOffer::BeingChecked => {
                AppealError::NotAppealable("the payment is being checked already")
            }
            AppealOffer::Waiting(id) => AppealError::Active(id),
            AppealOffer::Full => AppealError::Full(MAX_APPEALS_PER_SOURCE),
        };
        Err(refusal)
    }
}

impl Payments<'_> {
    /// The payer page token of `payment`, when its project (`project`) has the page on and
    /// the store keeps payer page links (the cabinet's part of the store); `None` otherwise.
    /// The first call for a payment makes its token (128 random bits from the
    /// [`RandomSource`](crate::RandomSource) port) and stores it; every later call answers
    /// the same one. A payment created before the project turned the page on gets its link
    /// at its next read.
    pub async fn payment_page_token(
        self,
        project: &Project,
        payment: &Payment,
    ) -> Result<Option<PageToken>, ReadError> {
        if !project.payer_page || payment.project_id != project.id {
            return Ok(None);
        }
        let pages = &self.ports.store;
        let stored = match pages.payment_page(payment.id).await? {
            Some(page) => page,
            None => {
                let token = PageToken::generate(self.ports.rng.as_ref());
                let candidate = PaymentPageRecord::new(payment.id, &token, self.ports.clock.now());
                pages.insert_payment_page_if_none(&candidate).await?
            }
        };
        match stored.page_token() {
            Some(token) => Ok(Some(token)),
            None => Err(ReadError::Damaged(format!(
                "the payer page link of payment {} is damaged",
                payment.id
            ))),
        }
    }

    /// What the payer page at `token` shows now. A token that is malformed or unknown, or of a
    /// payment whose project has the page off, is `404 payment_not_found`, the same answer for
    /// each, so a wrong link learns nothing.
    pub async fn payer_page(self, token: &str) -> Result<PayerView, ReadError> {
        let (payment, project) = self.page_of(token).await?;
        Ok(PayerView::of(&payment, &project, self.ports.clock.now()))
    }

    /// The payer page at `token` with its "I paid" part: what [`Self::payer_page`] shows, and,
    /// for a payment that may have appeals (a closed one), the payment's appeals read for the
    /// offer and the payer's newest. The form's handler reads it before the form's body (its
    /// receipts), so that a link of no payment stores nothing: the same `404` as
    /// [`Self::payer_page`] for every link that is not a live page. The status poll
    /// ([`Self::payer_page`]) reads no appeals.
    pub async fn payer_page_detail(self, token: &str) -> Result<PayerPageDetail, ReadError> {
        let (payment, project) = self.page_of(token).await?;
        let view = PayerView::of(&payment, &project, self.ports.clock.now());
        let appeals = if appeal::appealable(&payment).is_ok() {
            // At most MAX_APPEALS_PER_SOURCE from each source: one page holds them all.
            let query = AppealQuery {
                payment: Some(payment.id),
                ..AppealQuery::newest(2 * MAX_APPEALS_PER_SOURCE as usize)
            };
            self.ports.store.find_appeals(&query).await?
        } else {
            Vec::new()
        };
        Ok(PayerPageDetail {
            offer: appeal_offer(&payment, &view.state, &appeals),
            appeal: newest_payer_appeal(&payment, &appeals),
            payment,
            view,
        })
    }

    /// The payment and project of a live payer page.
    async fn page_of(self, token: &str) -> Result<(Payment, Project), ReadError> {
        let token = PageToken::parse(token).ok_or(ReadError::NotFound)?;
        let page = self
            .ports
            .store
            .payment_page_by_hash(&token.hash())
            .await?
            .ok_or(ReadError::NotFound)?;
        let payment = self
            .ports
            .store
            .payment(page.payment_id)
            .await?
            .ok_or(ReadError::NotFound)?;
        let project = self
            .ports
            .store
            .project(payment.project_id)
            .await?
            .filter(|p| p.payer_page)
            .ok_or(ReadError::NotFound)?;
        Ok((payment, project))
    }
}

impl Appeals<'_> {
    /// Opens the payer's appeal ([`AppealSource::Payer`]) about the payment of `target`: the
    /// page must take it ([`PayerPageDetail::accepts`]), the reason must be one the page
    /// offers, and it carries at least [`PAYER_MIN_RECEIPTS`] receipt; then as
    /// [`Self::open_appeal_for`], whose store bounds the payment's appeals (one active, at
    /// most [`MAX_APPEALS_PER_SOURCE`] from the payer). The page reads `target` with
    /// [`Payments::payer_page_detail`].
    pub async fn open_payer_appeal(
        self,
        target: &PayerPageDetail,
        request: AppealRequest,
    ) -> Result<Appeal, AppealError> {
        target.accepts()?;
        if !target.offer.reasons().contains(&request.reason) {
            return Err(AppealError::Invalid {
                field: "reason",
                why: format!("{} is not offered for this payment", request.reason),
            });
        }
        if request.receipts.len() < PAYER_MIN_RECEIPTS {
            return Err(AppealError::Invalid {
                field: "receipts",
                why: format!("at least {PAYER_MIN_RECEIPTS} receipt"),
            });
        }
        let (appeal, _) = self
            .open_appeal_for(&target.payment, AppealSource::Payer, request)
            .await?;
        Ok(appeal)
    }
}
