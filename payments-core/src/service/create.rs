//! `POST /api/v1/payments`: from a verified body to a stored payment with requisites.

use futures_util::future::{select, Either};

use super::auth::{replayed, Authenticated, PendingNonce};
use super::PaymentService;
use crate::bank::Bank;
use crate::clock::Timestamp;
use crate::error::{ErrorCause, RateFailure};
use crate::ids::PaymentId;
use crate::payment::{Currency, Flow, Payment, PaymentErrorCode, PaymentStatus, Requisites};
use crate::project::{Merchant, Project};
use crate::provider::{ProviderOutcome, RequisiteRequest};
use crate::request::CreatePayment;
use crate::settlement::{Course, Pricing};
use crate::store::{AdmitOutcome, StoreError};
use crate::transition::{self, Transition, Trigger};
use crate::{ApiError, ErrorCode};

/// Whether a create made a new payment or found the existing one.
#[non_exhaustive]
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CreateStatus {
    /// A new payment: `201 Created`.
    Created,
    /// The same request again: `200 OK` with the existing payment.
    Existing,
}

/// The answer to a create.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CreateOutcome {
    /// New or existing.
    pub status: CreateStatus,
    /// The payment.
    pub payment: Payment,
}

impl PaymentService {
    /// `POST /api/v1/payments`: creates a payment from the body of an authenticated request.
    ///
    /// The request's nonce is recorded in the same store write as the payment
    /// ([`Store::admit_create`]), before anything else counts, so a replay is
    /// `409 request_replayed` whatever its body. Then, in order: body validation, idempotency
    /// (the same `merchant_payment_id` answers the existing payment, or `409` for a different
    /// request), and the business rules (paused merchant or project, bank, contract, rate
    /// within its budget, the requisite provider within its budget). Everything before the
    /// insert takes nothing; after it, the `merchant_payment_id` is taken.
    ///
    /// The provider is asked after the insert, and its answer is a second write, unless it
    /// [answers locally](crate::provider::RequisiteProvider::issues_locally): then it is asked
    /// before, and a payment that gets requisites is inserted with them (one write).
    ///
    /// [`Store::admit_create`]: crate::store::Store::admit_create
    pub async fn create_payment(
        &self,
        auth: Authenticated,
        body: &[u8],
    ) -> Result<CreateOutcome, ApiError> {
        let (ctx, nonce) = auth.into_parts();
        let (project, merchant) = (&ctx.project, &ctx.merchant);
        let req = match CreatePayment::parse(body, self.config.callback_policy) {
            Ok(req) => req,
            Err(e) => {
                if let Some(nonce) = &nonce {
                    self.record_nonce(nonce).await?;
                }
                return Err(e);
            }
        };
        let catalog = &self.ports.catalog;
        let resolved = req
            .bank_code
            .as_deref()
            .map(|b| catalog.resolve(b, req.geo_code));
        let fingerprint = req.fingerprint(
            resolved
                .as_ref()
                .and_then(|r| r.as_ref().ok())
                .map(|b| b.name()),
        );

        // The business rules are evaluated now but count only if the id is free: a repeat of
        // an accepted request gets its payment even if the rules changed since.
        let candidate = self
            .candidate(project, merchant, &req, resolved, &fingerprint)
            .await;
        // A provider that answers locally is asked before the admission: a payment it issues
        // requisites to is stored with them by the admission's write, the create's only one.
        let mut asked = None;
        let mut decided = None;
        if let (Ok((payment, pricing)), true) = (&candidate, self.ports.provider.issues_locally()) {
            match self.call_provider(payment).await {
                outcome @ ProviderOutcome::Issued(_) => {
                    decided = Some(self.decide(payment, *pricing, outcome)?);
                }
                outcome => asked = Some(outcome),
            }
        }
        // (Requisites issued make no event and answer 201: nothing is left to write.)
        let one_write = decided
            .as_ref()
            .is_some_and(|(t, not_routable)| t.event.is_none() && not_routable.is_none());
        let admitted = self
            .ports
            .store
            .admit_create(
                nonce.as_ref().map(PendingNonce::to_use),
                project.id,
                &req.merchant_payment_id,
                match (&decided, &candidate) {
                    (Some((t, _)), _) if one_write => Some(&t.payment),
                    (_, Ok((p, _))) => Some(p),
                    (_, Err(_)) => None,
                },
            )
            .await?;
        let (payment, pricing) = match (admitted, candidate) {
            (AdmitOutcome::Replayed, _) => return Err(replayed()),
            // An earlier request, or a concurrent one that won the unique index.
            (AdmitOutcome::Existing(existing), _) => {
                return self.repeat(existing, &fingerprint).await
            }
            (AdmitOutcome::Inserted, Ok(candidate)) => candidate,
            (AdmitOutcome::Free, Err(e)) => return Err(e),
            (outcome, _) => {
                return Err(ApiError::internal(format!(
                    "the store answered {outcome:?} to a create"
                )))
            }
        };
        let (t, not_routable) = match decided {
            Some((t, _)) if one_write => {
                return Ok(CreateOutcome {
                    status: CreateStatus::Created,
                    payment: t.payment,
                })
            }
            Some(decided) => decided,
            None => {
                let outcome = match asked {
                    Some(outcome) => outcome,
                    None => self.call_provider(&payment).await,
                };
                self.decide(&payment, pricing, outcome)?
            }
        };
        let stored = match self.commit(&payment, &t, None).await {
            Ok(_) => t.payment,
            // The stuck-create sweeper got there first (only after 60 s): report what is stored.
            Err(StoreError::Conflict) => self
                .ports
                .store
                .payment(payment.id)
                .await?
                .ok_or_else(|| ApiError::internal("payment vanished after a conflict"))?,
            Err(e) => return Err(e.into()),
        };
        if let Some(comment) = not_routable {
            return Err(
                ApiError::new(ErrorCode::PaymentNotRoutable, comment).with_payment_id(stored.id)
            );
        }
        Ok(CreateOutcome {
            status: CreateStatus::Created,
            payment: stored,
        })
    }

    /// The transition a provider's answer makes of the stored `created` payment, and the
    /// comment of a `422 payment_not_routable` answer.
    fn decide(
        &self,
        payment: &Payment,
        pricing: Pricing,
        outcome: ProviderOutcome,
    ) -> Result<(Transition, Option<String>), ApiError> {
        let (trigger, not_routable) = match outcome {
            ProviderOutcome::Issued(r) => {
                let bank = r.bank_name.map(|name| {
                    self.ports
                        .catalog
                        .recognise(&name, payment.geo_code)
                        .map(|b| b.name().to_string())
                        .unwrap_or(name)
                });
                let requisites = Requisites {
                    requisite: r.requisite,
                    holder_name: r.holder_name,
                    bank,
                    qrcode_link: r.qrcode_link,
                    deeplink_url: r.deeplink_url,
                };
                (
                    Trigger::RequisitesIssued {
                        requisites,
                        pricing,
                    },
                    None,
                )
            }
            ProviderOutcome::NoRequisites(comment) => (
                Trigger::RequisitesRefused {
                    code: PaymentErrorCode::ProviderNoRequisites,
                    comment,
                },
                None,
            ),
            ProviderOutcome::NotRoutable(comment) => (
                Trigger::RequisitesRefused {
                    code: PaymentErrorCode::ProviderNoRequisites,
                    comment: comment.clone(),
                },
                Some(comment),
            ),
            ProviderOutcome::Ambiguous(comment) => (
                Trigger::RequisitesRefused {
                    code: PaymentErrorCode::ProviderResultAmbiguous,
                    comment,
                },
                None,
            ),
        };
        let now = self.ports.clock.now();
        let t = transition::apply(payment, trigger, now, self.ports.rng.as_ref())?;
        Ok((t, not_routable))
    }

    /// The payment a create would store, or the business rule it breaks (paused merchant or
    /// project, bank, contract, rate).
    async fn candidate(
        &self,
        project: &Project,
        merchant: &Merchant,
        req: &CreatePayment,
        resolved: Option<Result<&Bank, ApiError>>,
        fingerprint: &str,
    ) -> Result<(Payment, Pricing), ApiError> {
        if merchant.paused {
            return Err(ApiError::new(
                ErrorCode::PaymentNotRoutable,
                "the merchant is paused",
            ));
        }
        if project.paused {
            return Err(ApiError::new(
                ErrorCode::PaymentNotRoutable,
                "the project is paused",
            ));
        }
        let bank_code = match resolved {
            None => None,
            Some(Ok(bank)) => Some(bank.name().to_string()),
            Some(Err(e)) => return Err(e),
        };
        let fee_percent = project
            .contract
            .cover(req.payment_method, req.currency, &req.amount)?;
        let no_rate = |why: RateFailure| {
            let message = match why {
                RateFailure::TimedOut(_) => {
                    format!("no exchange rate for {} in time", req.currency)
                }
                _ => format!("no exchange rate for {}", req.currency),
            };
            ApiError::new(ErrorCode::PaymentRateUnavailable, message)
                .with_cause(ErrorCause::Rate(why))
        };
        let course = self.course(req.currency).await.map_err(no_rate)?;
        let course = Course::new(course).map_err(|_| no_rate(RateFailure::Unusable))?;
        let pricing = Pricing {
            course,
            fee_percent,
        };

        let now = self.ports.clock.now();
        let payment = Payment {
            id: PaymentId::generate_ordered(now, self.ports.rng.as_ref()),
            project_id: project.id,
            merchant_payment_id: req.merchant_payment_id.clone(),
            flow: if project.test_mode {
                Flow::ProjectTest
            } else {
                Flow::RuntimeLive
            },
            status: PaymentStatus::Created,
            amount: req.amount,
            initial_amount: req.amount,
            currency: req.currency,
            geo_code: req.geo_code,
            payment_method: req.payment_method,
            is_intrabank: req.is_intrabank,
            bank_code,
            callback_url: req.callback_url.clone(),
            requisites: None,
            pricing: None,
            failure: None,
            appeal_from: None,
            created_at: now,
            updated_at: now,
            expires_at: now + project.lifetime,
            version: 1,
            fingerprint: fingerprint.to_string(),
        };
        Ok((payment, pricing))
    }

    /// The rate source's answer within its budget; no answer in time is no rate
    /// (`422 payment_rate_unavailable`, with [`RateFailure::TimedOut`] as its cause), so a slow
    /// rate API cannot hold creates without limit.
    async fn course(&self, currency: Currency) -> Result<rust_decimal::Decimal, RateFailure> {
        let call = self.ports.rates.course(currency);
        let budget = self.ports.clock.sleep(self.config.rate_budget);
        match select(call, budget).await {
            Either::Left((course, _)) => course.ok_or(RateFailure::NoRate),
            Either::Right(((), _)) => Err(RateFailure::TimedOut(self.config.rate_budget)),
        }
    }

    /// The provider call within its budget; no answer in time is ambiguous.
    async fn call_provider(&self, payment: &Payment) -> ProviderOutcome {
        let request = RequisiteRequest {
            payment_id: payment.id,
            amount: payment.amount,
            currency: payment.currency,
            payment_method: payment.payment_method,
            geo_code: payment.geo_code,
            bank_code: payment.bank_code.clone(),
            is_intrabank: payment.is_intrabank,
            is_test: payment.is_test(),
        };
        let call = self.ports.provider.issue(&request);
        let budget = self.ports.clock.sleep(self.config.provider_budget);
        let outcome = match select(call, budget).await {
            Either::Left((outcome, _)) => outcome,
            Either::Right(((), _)) => ProviderOutcome::Ambiguous(format!(
                "the requisite provider did not answer within {} s",
                self.config.provider_budget.as_secs()
            )),
        };
        outcome
    }

    /// A repeat of an accepted `merchant_payment_id`: the same request gets the existing
    /// payment (waiting, bounded, while the first request's provider call runs); a different
    /// one is `409 payment_idempotency_conflict`.
    async fn repeat(
        &self,
        existing: Payment,
        fingerprint: &str,
    ) -> Result<CreateOutcome, ApiError> {
        if existing.fingerprint != fingerprint {
            return Err(ApiError::new(
                ErrorCode::PaymentIdempotencyConflict,
                format!(
                    "merchant_payment_id {} was already used with a different request",
                    existing.merchant_payment_id
                ),
            ));
        }
        let mut payment = existing;
        let deadline: Timestamp = self.ports.clock.now() + self.config.duplicate_wait;
        while payment.status == PaymentStatus::Created && self.ports.clock.now() < deadline {
            self.ports.clock.sleep(self.config.duplicate_poll).await;
            payment = self
                .ports
                .store
                .payment(payment.id)
                .await?
                .ok_or_else(|| ApiError::internal("payment vanished while waiting"))?;
        }
        Ok(CreateOutcome {
            status: CreateStatus::Existing,
            payment,
        })
    }
}
