//! The hosted payer page: which payments have one, their links, and what a link shows.

use super::{Payments, ReadError};
use crate::payer::{PageToken, PayerView, PaymentPageRecord};
use crate::payment::Payment;
use crate::project::Project;
use crate::store::MerchantStoreExt;
use crate::store::PayerPageStoreExt;

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
        Ok(PayerView::of(&payment, &project, self.ports.clock.now()))
    }
}
