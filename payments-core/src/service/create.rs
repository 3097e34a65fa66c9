//! `POST /api/v1/payments`: from a verified body to a stored payment with requisites.

use futures_util::future::{select, Either};
use futures_util::FutureExt;

use super::auth::{Authenticated, PendingNonce, REPLAYED};
use super::Payments;
use crate::bank::{Bank, BankNotFound};
use crate::clock::Timestamp;
use crate::error::{ErrorCause, RateFailure};
use crate::history::ChangeSource;
use crate::ids::PaymentId;
use crate::payment::{
    Currency, Flow, MerchantPaymentId, Payment, PaymentErrorCode, PaymentStatus, ProviderRoute,
    Requisites,
};
use crate::project::{AuditRecord, Merchant, NotCovered, Project};
use crate::provider::{Failover, ProviderName};
use crate::provider::{ProviderOutcome, RequisiteRequest};
use crate::request::{CreatePayment, RequestError};
use crate::settlement::{Course, Pricing};
use crate::store::{AdmitOutcome, PaymentChange, StoreError};
use crate::transition::{self, Transition, TransitionError, Trigger};
use crate::{ApiError, ErrorCode};

/// A provider's answer decided: the payment's transition, and the comment of a
/// `422 payment_not_routable` answer.
type Decision = (Transition, Option<String>);

/// Why [`Payments::create_payment`] refused a create, each with the stable code of its
/// answer ([`CreateError::code`]); the message of that answer is the error's text.
#[non_exhaustive]
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum CreateError {
    /// The body (`400 bad_request`).
    #[error(transparent)]
    Request(#[from] RequestError),
    /// The merchant is paused (`422 payment_not_routable`).
    #[error("the merchant is paused")]
    MerchantPaused,
    /// The project is paused (`422 payment_not_routable`).
    #[error("the project is paused")]
    ProjectPaused,
    /// The `bank_code` names no bank (`422 bank_not_found`).
    #[error(transparent)]
    Bank(#[from] BankNotFound),
    /// Outside the project's contract (`422 payment_not_covered`).
    #[error(transparent)]
    NotCovered(#[from] NotCovered),
    /// No usable exchange rate for the currency within its budget
    /// (`422 payment_rate_unavailable`, the failure kept as the cause).
    #[error("no exchange rate for {currency}{}", if matches!(why, RateFailure::TimedOut(_)) { " in time" } else { "" })]
    RateUnavailable {
        /// The payment's currency.
        currency: Currency,
        /// Why there was none.
        why: RateFailure,
    },
    /// The provider cannot route it; the payment was saved in `error`
    /// (`422 payment_not_routable` with its `payment_id`).
    #[error("{comment}")]
    NotRoutable {
        /// The provider's comment.
        comment: String,
        /// The saved payment.
        payment_id: PaymentId,
    },
    /// The `merchant_payment_id` was used with a different request
    /// (`409 payment_idempotency_conflict`).
    #[error("merchant_payment_id {0} was already used with a different request")]
    Conflict(MerchantPaymentId),
    /// The request's nonce was used already (`409 request_replayed`).
    #[error("{REPLAYED}")]
    Replayed,
    /// The state machine refused the provider's answer (a defect: `409 invalid_transition`).
    #[error(transparent)]
    Transition(#[from] TransitionError),
    /// The store failed (`503`, or `500` for corrupt data).
    #[error(transparent)]
    Store(#[from] StoreError),
    /// The store answered what it cannot (`500`).
    #[error("{0}")]
    Defect(String),
}

impl CreateError {
    /// The stable code it is answered with.
    pub fn code(&self) -> ErrorCode {
        match self {
            CreateError::Request(_) => ErrorCode::BadRequest,
            CreateError::MerchantPaused
            | CreateError::ProjectPaused
            | CreateError::NotRoutable { .. } => ErrorCode::PaymentNotRoutable,
            CreateError::Bank(_) => ErrorCode::BankNotFound,
            CreateError::NotCovered(_) => ErrorCode::PaymentNotCovered,
            CreateError::RateUnavailable { .. } => ErrorCode::PaymentRateUnavailable,
            CreateError::Conflict(_) => ErrorCode::PaymentIdempotencyConflict,
            CreateError::Replayed => ErrorCode::RequestReplayed,
            CreateError::Transition(_) => ErrorCode::InvalidTransition,
            CreateError::Store(e) => ApiError::from(e.clone()).code,
            CreateError::Defect(_) => ErrorCode::Internal,
        }
    }
}

impl From<CreateError> for ApiError {
    fn from(e: CreateError) -> ApiError {
        match e {
            CreateError::Request(e) => e.into(),
            CreateError::Bank(e) => e.into(),
            CreateError::NotCovered(e) => e.into(),
            CreateError::Transition(e) => e.into(),
            CreateError::Store(e) => e.into(),
            CreateError::Defect(m) => ApiError::internal(m),
            CreateError::RateUnavailable { why, .. } => {
                ApiError::new(e.code(), e.to_string()).with_cause(ErrorCause::Rate(why))
            }
            CreateError::NotRoutable { payment_id, .. } => {
                ApiError::new(e.code(), e.to_string()).with_payment_id(payment_id)
            }
            e => ApiError::new(e.code(), e.to_string()),
        }
    }
}

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

impl Payments<'_> {
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
        self,
        auth: Authenticated,
        body: &[u8],
    ) -> Result<CreateOutcome, CreateError> {
        let (ctx, nonce) = auth.into_parts();
        let (project, merchant) = (&ctx.project, &ctx.merchant);
        let req = self.parse_spending_nonce(body, nonce.as_ref()).await?;
        let resolved = req
            .bank_code
            .as_deref()
            .map(|b| self.ports.catalog.resolve(b, req.geo_code));
        let fingerprint = req.fingerprint(
            resolved
                .as_ref()
                .and_then(|r| r.as_ref().ok())
                .map(|b| b.name()),
        );
        // The business rules are evaluated now but count only if the id is free: a repeat of
        // an accepted request gets its payment even if the rules changed since.
        let mut candidate = self
            .candidate(project, merchant, &req, resolved, &fingerprint)
            .await;
        let (asked, decided) = self.ask_locally(&mut candidate).await?;
        // (Requisites issued make no event and answer 201: nothing is left to write.)
        let one_write = decided
            .as_ref()
            .is_some_and(|(t, not_routable)| t.event.is_none() && not_routable.is_none());
        // The one write stores the issue's entry of the payment's history with the payment.
        let issued = match (&decided, &candidate) {
            (Some((t, _)), Ok((before, _))) if one_write => {
                super::status_change(before, t, ChangeSource::Provider)
            }
            _ => None,
        };
        // Running here from before its insert to the answer: recoveries here leave it alone.
        let _running = self.creating.enter(&candidate);
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
                issued.as_ref(),
            )
            .await?;
        let (mut payment, pricing) = match (admitted, candidate) {
            (AdmitOutcome::Replayed, _) => return Err(CreateError::Replayed),
            // An earlier request, or a concurrent one that won the unique index.
            // Boxed: its wait is the largest state of this future, which every create would
            // otherwise carry (and copy into the task's box) for the repeats' sake.
            (AdmitOutcome::Existing(existing), _) => {
                return Box::pin(self.repeat(existing, &fingerprint)).await
            }
            (AdmitOutcome::Inserted, Ok(candidate)) => candidate,
            (AdmitOutcome::Free, Err(e)) => return Err(e),
            (outcome, _) => {
                return Err(CreateError::Defect(format!(
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
            None => self.ask_recorded(&mut payment, pricing, asked).await?,
        };
        self.store_answer(&payment, t, not_routable).await
    }

    /// The body parsed; a body that does not parse still spends the request's nonce (a replay
    /// of it is `409 request_replayed`, not a second `400`).
    async fn parse_spending_nonce(
        self,
        body: &[u8],
        nonce: Option<&PendingNonce>,
    ) -> Result<CreatePayment, CreateError> {
        match CreatePayment::parse(body, self.config.callback_policy) {
            Ok(req) => Ok(req),
            Err(e) => {
                if let Some(nonce) = nonce {
                    if !self.gate().use_nonce(nonce).await? {
                        return Err(CreateError::Replayed);
                    }
                }
                Err(e.into())
            }
        }
    }

    /// A provider that answers locally is asked before the admission: a payment it issues
    /// requisites to is stored with them by the admission's write, the create's only one.
    /// Answers the provider's other outcome (to apply after the admission) or the decision of
    /// issued requisites; nothing when the provider is not asked now.
    async fn ask_locally(
        self,
        candidate: &mut Result<(Payment, Pricing), CreateError>,
    ) -> Result<(Option<ProviderOutcome>, Option<Decision>), CreateError> {
        let Ok((payment, pricing)) = candidate else {
            return Ok((None, None));
        };
        if !self.ports.provider.issues_locally() {
            return Ok((None, None));
        }
        // Nothing is stored yet: a failover only changes the candidate's route.
        let deadline = self.ports.clock.now() + self.config.provider_budget;
        match self
            .call_provider(payment, Ask::Unrecorded, deadline)
            .await?
        {
            outcome @ ProviderOutcome::Issued(_) => {
                Ok((None, Some(self.decide(payment, Some(*pricing), outcome)?)))
            }
            outcome => Ok((Some(outcome), None)),
        }
    }

    /// After the admission: the provider's answer (`asked` before, or asked now within the
    /// budget from the payment's creation) turned into the payment's transition.
    async fn ask_recorded(
        self,
        payment: &mut Payment,
        pricing: Pricing,
        asked: Option<ProviderOutcome>,
    ) -> Result<Decision, CreateError> {
        let outcome = match asked {
            Some(outcome) => outcome,
            None => {
                let deadline = payment.created_at + self.config.provider_budget;
                self.call_provider(payment, Ask::Recorded, deadline).await?
            }
        };
        self.decide(payment, Some(pricing), outcome)
    }

    /// Commits the provider's answer to the stored payment and answers the create: the payment
    /// as stored, or `422 payment_not_routable` with its id.
    async fn store_answer(
        self,
        payment: &Payment,
        t: Transition,
        not_routable: Option<String>,
    ) -> Result<CreateOutcome, CreateError> {
        let stored = match self.commit(payment, &t, None, ChangeSource::Provider).await {
            Ok(_) => t.payment,
            // The stuck-create sweeper got there first (only after 60 s): report what is stored.
            Err(StoreError::Conflict) => {
                self.ports.store.payment(payment.id).await?.ok_or_else(|| {
                    CreateError::Defect("payment vanished after a conflict".into())
                })?
            }
            Err(e) => return Err(e.into()),
        };
        if let Some(comment) = not_routable {
            return Err(CreateError::NotRoutable {
                comment,
                payment_id: stored.id,
            });
        }
        Ok(CreateOutcome {
            status: CreateStatus::Created,
            payment: stored,
        })
    }

    /// The transition a provider's answer makes of the stored `created` payment, and the
    /// comment of a `422 payment_not_routable` answer.
    fn decide(
        self,
        payment: &Payment,
        pricing: Option<Pricing>,
        outcome: ProviderOutcome,
    ) -> Result<(Transition, Option<String>), CreateError> {
        let (trigger, not_routable) = match outcome {
            ProviderOutcome::Issued(r) => {
                let pricing = pricing.ok_or_else(|| {
                    CreateError::Defect(
                        "requisites were issued to a payment without a price".into(),
                    )
                })?;
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
            // Not reached (the last provider of the plan): nothing was issued, but the wire
            // has no other code for it than before routing existed; the comment says which.
            ProviderOutcome::Ambiguous(_) | ProviderOutcome::Unavailable(_) => (
                Trigger::RequisitesRefused {
                    code: PaymentErrorCode::ProviderResultAmbiguous,
                    comment: ambiguous_comment(&outcome),
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
        self,
        project: &Project,
        merchant: &Merchant,
        req: &CreatePayment,
        resolved: Option<Result<&Bank, BankNotFound>>,
        fingerprint: &str,
    ) -> Result<(Payment, Pricing), CreateError> {
        if merchant.paused {
            return Err(CreateError::MerchantPaused);
        }
        if project.paused {
            return Err(CreateError::ProjectPaused);
        }
        let bank_code = match resolved {
            None => None,
            Some(Ok(bank)) => Some(bank.name().to_string()),
            Some(Err(e)) => return Err(e.into()),
        };
        let fee_percent = project
            .contract
            .cover(req.payment_method, req.currency, &req.amount)?;
        let no_rate = |why: RateFailure| CreateError::RateUnavailable {
            currency: req.currency,
            why,
        };
        let course = self.course(req.currency).await.map_err(no_rate)?;
        let course = Course::new(course).map_err(|_| no_rate(RateFailure::Unusable))?;
        let pricing = Pricing {
            course,
            fee_percent,
        };

        let now = self.ports.clock.now();
        let mut payment = Payment {
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
            metadata: req.metadata.clone(),
            route: None,
        };
        // The first provider of the plan, recorded with the insert, before it is asked.
        let plan = self.ports.provider.plan(&requisite_request(&payment));
        payment.route = plan.providers.first().map(|provider| ProviderRoute {
            provider: provider.clone(),
            reason: plan.reason.clone(),
        });
        Ok((payment, pricing))
    }

    /// Resolves a payment left in `created` by a create that never recorded its provider's
    /// answer (the process died, the store went away mid-create): asks the provider again for
    /// the same payment id (a provider answers a repeated request for a payment id with its
    /// first answer, docs/providers.md) and applies the answer as the create would have: the
    /// requisites, priced at the course of now and the fee of the project's contract, or
    /// `error` with the provider's refusal. `provider_result_ambiguous` only when the provider
    /// cannot say (no answer within its budget, an ambiguous answer) or requisites it issued
    /// cannot be priced any more (no rate, the contract no longer covers the payment).
    /// Nothing when the payment is not in `created` any more as stored (another node, the
    /// sweeper or the create itself got there first), or while its create runs in this
    /// process. `payment` names the payment; what is asked is read from the store.
    pub async fn recover_create(self, payment: &Payment) -> Result<Recovery, StoreError> {
        let payment = &mut match self.recoverable(payment).await? {
            Ok(stored) => stored,
            Err(nothing) => return Ok(nothing),
        };
        // The provider the payment was routed to, and no other: it may have issued.
        #[cfg(feature = "planted-bugs")]
        if crate::planted::active(crate::planted::Bug::RecoveryAsksNextProvider) {
            let plan = self.ports.provider.plan(&requisite_request(payment));
            let recorded = payment.route.as_ref().map(|r| r.provider.clone());
            if let Some(other) = plan
                .providers
                .into_iter()
                .find(|p| Some(p) != recorded.as_ref())
            {
                payment.route = Some(ProviderRoute {
                    provider: other,
                    reason: plan.reason,
                });
            }
        }
        let deadline = self.ports.clock.now() + self.config.provider_budget;
        let asked = match self.call_provider(payment, Ask::Again, deadline).await {
            Ok(outcome) => outcome,
            Err(StoreError::Conflict) => return Ok(Recovery::Raced),
            Err(e) => return Err(e),
        };
        let asked = match asked {
            ProviderOutcome::Unavailable(why) | ProviderOutcome::Ambiguous(why) => {
                let now = self.ports.clock.now();
                if now < payment.created_at + self.config.recovery_window {
                    return self.defer_recovery(payment, &why).await;
                }
                ProviderOutcome::Ambiguous(undecided(payment, now, &why))
            }
            other => other,
        };
        let outcome = match asked {
            ProviderOutcome::Issued(r) => match self.price_now(payment).await? {
                Ok(pricing) => (ProviderOutcome::Issued(r), Some(pricing)),
                Err(why) => (
                    ProviderOutcome::Ambiguous(format!(
                        "the provider issued requisites on recovery, but the payment cannot be \
                         priced now: {why}"
                    )),
                    None,
                ),
            },
            other => (other, None),
        };
        let ambiguous = matches!(
            outcome.0,
            ProviderOutcome::Ambiguous(_) | ProviderOutcome::Unavailable(_)
        );
        let (t, _) = match self.decide(payment, outcome.1, outcome.0) {
            Ok(decided) => decided,
            Err(_) => return Ok(Recovery::Raced),
        };
        // On the audit log, for reconciliation (`payments-server payment reconcile`).
        let audit = recovery_record(
            payment,
            t.payment.updated_at,
            serde_json::json!({
                "outcome": if ambiguous { "ambiguous" } else { "resolved" },
                "status": t.payment.status.as_str(),
            }),
        );
        match self
            .commit(payment, &t, Some(audit), ChangeSource::Provider)
            .await
        {
            Ok(_) if ambiguous => Ok(Recovery::Ambiguous),
            Ok(_) => Ok(Recovery::Resolved),
            Err(StoreError::Conflict) => Ok(Recovery::Raced),
            Err(e) => Err(e),
        }
    }

    /// The payment as stored now, if a recovery may ask its provider about it: still
    /// `created`, and its create not running in this process ([`Recovery::InFlight`]).
    /// Read again after that check: the caller's copy may predate the create's failover or
    /// answer (a sweep reads its batch, then commits expiries before it recovers), and a
    /// create leaves [`CreatesInFlight`] only after its last write, so this read sees it.
    async fn recoverable(self, payment: &Payment) -> Result<Result<Payment, Recovery>, StoreError> {
        if payment.status != PaymentStatus::Created {
            return Ok(Err(Recovery::Raced));
        }
        if self.creating.running(payment.id) {
            return Ok(Err(Recovery::InFlight));
        }
        match self.ports.store.payment(payment.id).await? {
            Some(stored) if stored.status == PaymentStatus::Created => Ok(Ok(stored)),
            _ => Ok(Err(Recovery::Raced)),
        }
    }

    /// Leaves a payment whose provider could not say in `created` for a later recovery: its
    /// `updated_at` becomes now, which moves its next recovery out
    /// ([`Payment::due_at`]: at the ages of 60 s, 3 min, 9 min, ... every 15 minutes), with an
    /// audit record (outcome `deferred`, the provider's words).
    async fn defer_recovery(self, payment: &Payment, why: &str) -> Result<Recovery, StoreError> {
        let mut later = payment.clone();
        // Never at or before the last update, even on a clock stepped back behind it (the
        // payment written while the clock ran ahead): the deferral must move the next
        // recovery out.
        later.updated_at = self
            .ports
            .clock
            .now()
            .max(payment.updated_at + std::time::Duration::from_millis(1));
        later.version += 1;
        debug_assert_eq!(later.status, PaymentStatus::Created);
        let next = later.due_at();
        debug_assert!(
            next > payment.due_at(),
            "a deferral moves the next recovery out"
        );
        let audit = recovery_record(
            payment,
            later.updated_at,
            serde_json::json!({
                "outcome": "deferred",
                "status": PaymentStatus::Created.as_str(),
                "reason": why,
                "next_at": next.map(Timestamp::to_rfc3339),
            }),
        );
        let change = PaymentChange {
            payment: later,
            expected_version: payment.version,
            event: None,
            audit: Some(audit),
            // The payment's money does not change.
            ledger: None,
            history: None,
        };
        match self.ports.store.commit_change(&change).await {
            Ok(_) => Ok(Recovery::Deferred),
            Err(StoreError::Conflict) => Ok(Recovery::Raced),
            Err(e) => Err(e),
        }
    }

    /// The payments to reconcile with the providers, across every project: unresolved
    /// creates (still `created` past the provider budget and a second), ambiguous payments
    /// created since `since`, and the last `limit` recoveries on the audit log. At most
    /// `limit` of each kind per project, newest first.
    pub async fn reconciliation(
        self,
        since: Timestamp,
        limit: usize,
    ) -> Result<Reconciliation, StoreError> {
        use crate::store::{MerchantStoreExt, PaymentQuery};
        let store = &self.ports.store;
        let lost_before = self
            .ports
            .clock
            .now()
            .saturating_sub(self.config.provider_budget + RECOVER_AFTER_MARGIN);
        let mut out = Reconciliation::default();
        for project in store.projects().await? {
            let mut q = PaymentQuery::new(project.id, limit);
            q.status = Some(PaymentStatus::Created);
            q.created_to = Some(lost_before);
            let unresolved = store.find_payments(&q).await?;
            out.cut |= unresolved.len() >= limit;
            out.unresolved.extend(unresolved);
            let mut q = PaymentQuery::new(project.id, limit);
            q.status = Some(PaymentStatus::Error);
            q.created_from = Some(since);
            let errors = store.find_payments(&q).await?;
            out.cut |= errors.len() >= limit;
            out.ambiguous.extend(errors.into_iter().filter(|p| {
                p.failure
                    .as_ref()
                    .is_some_and(|f| f.code == PaymentErrorCode::ProviderResultAmbiguous)
            }));
        }
        // The audit log is read newest first; recoveries are a small share of it.
        out.recovered = store
            .find_audit_records(limit.saturating_mul(50).max(1_000))
            .await?
            .into_iter()
            .filter(|r| r.action == RECOVERY_ACTION)
            .take(limit)
            .collect();
        out.cut |= out.recovered.len() >= limit;
        Ok(out)
    }

    /// The price a payment's requisites are fixed at now: the course of now and the fee of
    /// its project's contract; why not, as text.
    async fn price_now(self, payment: &Payment) -> Result<Result<Pricing, NoPrice>, StoreError> {
        let (project, _) = self.owner_of(payment).await?;
        let fee_percent =
            match project
                .contract
                .cover(payment.payment_method, payment.currency, &payment.amount)
            {
                Ok(fee) => fee,
                Err(e) => return Ok(Err(NoPrice::NotCovered(e))),
            };
        let course = match self.course(payment.currency).await {
            Ok(course) => course,
            Err(why) => return Ok(Err(NoPrice::Rate(why))),
        };
        Ok(Course::new(course)
            .map(|course| Pricing {
                course,
                fee_percent,
            })
            .map_err(|_| NoPrice::Rate(RateFailure::Unusable)))
    }

    /// The rate source's answer within its budget; no answer in time is no rate
    /// (`422 payment_rate_unavailable`, with [`RateFailure::TimedOut`] as its cause), so a slow
    /// rate API cannot hold creates without limit.
    async fn course(self, currency: Currency) -> Result<rust_decimal::Decimal, RateFailure> {
        let call = self.ports.rates.course(currency);
        let budget = self.ports.clock.sleep(self.config.rate_budget);
        match select(call, budget).await {
            Either::Left((course, _)) => course.ok_or(RateFailure::NoRate),
            Either::Right(((), _)) => Err(RateFailure::TimedOut(self.config.rate_budget)),
        }
    }

    /// Asks the payment's provider (its route's; the plan's first for a payment from before
    /// routing) within `deadline`; no answer in time is ambiguous. With [`Ask::Recorded`] or
    /// [`Ask::Unrecorded`], a definite refusal ([`Failover::Next`]) moves on to the next
    /// provider of the plan not asked yet, while the deadline allows, recording the switch on
    /// the payment first ([`Ask::Recorded`]: a write, so that a crash during the next call
    /// leaves the payment naming the provider that may have issued). An answer that may have
    /// issued ends it: never a second provider after it.
    async fn call_provider(
        self,
        payment: &mut Payment,
        ask: Ask,
        deadline: Timestamp,
    ) -> Result<ProviderOutcome, StoreError> {
        let request = requisite_request(payment);
        let provider = &self.ports.provider;
        let mut asked: Vec<ProviderName> = Vec::new();
        // One timer for the whole call, failovers included, never longer than the budget: it
        // runs on the monotonic clock, so a wall clock stepped back meanwhile cannot lengthen
        // the call past the budget (a repeat takes a create as lost the budget and a second
        // after it began, `repeat`).
        let left = deadline
            .duration_since(self.ports.clock.now())
            .min(self.config.provider_budget);
        let mut budget = self.ports.clock.sleep(left);
        loop {
            let name = match &payment.route {
                Some(route) => route.provider.clone(),
                None => {
                    let plan = provider.plan(&request);
                    match plan.providers.into_iter().next() {
                        Some(first) => first,
                        None => return Ok(ProviderOutcome::NotRoutable(plan.reason)),
                    }
                }
            };
            let call = provider.issue_with(&name, &request);
            let outcome = match select(call, budget.as_mut()).await {
                Either::Left((outcome, _)) => outcome,
                Either::Right(((), _)) => ProviderOutcome::Ambiguous(format!(
                    "the requisite provider {name} did not answer within {} s",
                    self.config.provider_budget.as_secs()
                )),
            };
            asked.push(name.clone());
            if ask == Ask::Again || Failover::after(&outcome) == Failover::Decide {
                return Ok(outcome);
            }
            let plan = provider.plan(&request);
            let next = plan.providers.into_iter().find(|p| !asked.contains(p));
            // Polled only while pending: a budget that ended returned above.
            let ended = budget.as_mut().now_or_never().is_some();
            let (Some(next), false) = (next, ended) else {
                return Ok(outcome);
            };
            let mut switched = payment.clone();
            switched.route = Some(ProviderRoute {
                provider: next,
                reason: format!(
                    "failover after {name}: {}; {}",
                    refusal_text(&outcome),
                    plan.reason
                ),
            });
            if ask == Ask::Recorded {
                switched.version += 1;
                self.ports
                    .store
                    .commit_change(&PaymentChange {
                        payment: switched.clone(),
                        expected_version: payment.version,
                        event: None,
                        audit: None,
                        // A route changes no money.
                        ledger: None,
                        history: None,
                    })
                    .await?;
            }
            *payment = switched;
        }
    }

    /// A repeat of an accepted `merchant_payment_id`: the same request gets the existing
    /// payment (waiting, bounded, while the first request's provider call runs); a different
    /// one is `409 payment_idempotency_conflict`.
    async fn repeat(
        self,
        existing: Payment,
        fingerprint: &str,
    ) -> Result<CreateOutcome, CreateError> {
        if existing.fingerprint != fingerprint {
            return Err(CreateError::Conflict(existing.merchant_payment_id));
        }
        let mut payment = existing;
        let started = self.ports.clock.now();
        let deadline: Timestamp = started + self.config.duplicate_wait;
        // A payment still in `created` once its create's provider budget (and a second) has
        // passed lost its create (the process died, the store went away): the repeat asks the
        // provider again, once, instead of waiting for the sweeper, and answers the outcome
        // (so a repeat may take its wait and then the provider's budget). The budget counts
        // from the payment's creation, or from this repeat's start when that time is still
        // ahead on this node's clock (the clock was stepped back since, or another node's runs
        // ahead): the create was stored before the repeat began, so by then its budget has
        // run out on any clock, and waiting for the creation time's age would hang every
        // repeat for as long as the step.
        let lost_after =
            payment.created_at.min(started) + self.config.provider_budget + RECOVER_AFTER_MARGIN;
        let mut asked = false;
        while payment.status == PaymentStatus::Created {
            let now = self.ports.clock.now();
            // A create running in this process is its own judge, whatever the clock says
            // (a wall clock stepped forward makes it look lost).
            if !asked && now >= lost_after && !self.creating.running(payment.id) {
                asked = true;
                self.recover_create(&payment).await?;
            } else if now >= deadline {
                break;
            } else {
                self.ports.clock.sleep(self.config.duplicate_poll).await;
            }
            payment = self
                .ports
                .store
                .payment(payment.id)
                .await?
                .ok_or_else(|| CreateError::Defect("payment vanished while waiting".into()))?;
        }
        Ok(CreateOutcome {
            status: CreateStatus::Existing,
            payment,
        })
    }
}

/// How long after its create's provider budget a payment still in `created` is taken as lost:
/// a repeat of its create then asks the provider again ([`Payments::recover_create`]).
/// With the 15 s budget that is 16 s after the create, which is when the wait of a repeat that
/// arrived with the create ends (`duplicate_wait`, 16 s): every repeat that waits sees the
/// payment resolved, by its create or by itself.
pub const RECOVER_AFTER_MARGIN: std::time::Duration = std::time::Duration::from_secs(1);

/// The payments whose create is running in this process, from before its insert to its
/// answer ([`Payments::create_payment`]). A payment still in `created` past its create's
/// budget looks lost by its age on the wall clock, and a clock stepped forward during a create
/// makes a running create look so: asking its provider then would be a second ask, and during
/// a failover possibly another provider than the create's. [`Payments::recover_create`] and a
/// repeat leave such a payment to its create. A create running on another node is not known
/// here: there the clocks' difference still counts.
#[derive(Debug, Default)]
pub(super) struct CreatesInFlight(std::sync::Mutex<std::collections::HashSet<PaymentId>>);

impl CreatesInFlight {
    /// Marks the create of `candidate`'s payment as running until the guard is dropped (the
    /// create answered, failed, or was dropped: a create cut off is lost, and recovered as
    /// one). From before the insert, so that no recovery here sees the payment stored and not
    /// yet known as running; nothing for a create refused before it has a payment.
    fn enter(&self, candidate: &Result<(Payment, Pricing), CreateError>) -> Option<Running<'_>> {
        let id = candidate.as_ref().ok()?.0.id;
        let fresh = self.lock().insert(id);
        debug_assert!(fresh, "one create per payment id");
        Some(Running { set: self, id })
    }

    /// Whether `id`'s create is running in this process.
    fn running(&self, id: PaymentId) -> bool {
        self.lock().contains(&id)
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, std::collections::HashSet<PaymentId>> {
        self.0
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }
}

/// A create marked as running ([`CreatesInFlight::enter`]).
struct Running<'a> {
    set: &'a CreatesInFlight,
    id: PaymentId,
}

impl Drop for Running<'_> {
    fn drop(&mut self) {
        let removed = self.set.lock().remove(&self.id);
        debug_assert!(removed, "entered once, left once");
    }
}

/// The audit action of a recovered create ([`Payments::recover_create`]); its `after`
/// holds `outcome` (`resolved` or `ambiguous`), `status` and `provider`.
pub const RECOVERY_ACTION: &str = "payment.recover";

/// What an operator reconciles with the providers: payments still in `created` past their
/// create's budget (no answer recorded yet), payments `error` / `provider_result_ambiguous`
/// (a provider may have issued), and the recoveries on record
/// ([`Payments::reconciliation`]).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Reconciliation {
    /// Still in `created` past the create's budget and a margin: not resolved yet.
    pub unresolved: Vec<Payment>,
    /// `error` / `provider_result_ambiguous`, created in the window asked for.
    pub ambiguous: Vec<Payment>,
    /// The recoveries on the audit log, newest first (the audit records).
    pub recovered: Vec<AuditRecord>,
    /// A list was cut at the limit asked for (a project's unresolved or `error` payments, or
    /// the recoveries in all): more may exist.
    pub cut: bool,
}

/// What [`Payments::recover_create`] did.
#[non_exhaustive]
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Recovery {
    /// The provider answered (requisites, or none): the payment is `processing` or `error`
    /// (`provider_no_requisites`) as that answer says.
    Resolved,
    /// The provider could not say, or issued requisites could not be priced: `error` /
    /// `provider_result_ambiguous`.
    Ambiguous,
    /// Nothing: the payment had left `created` (someone else resolved it first).
    Raced,
    /// Nothing: the payment's create is still running in this process (asking its provider,
    /// or storing the answer) and decides it: the wall clock alone cannot tell it from a
    /// lost create once the clock was stepped forward.
    InFlight,
    /// The provider could not say (not reached, or no answer in time) within
    /// [`ServiceConfig::recovery_window`](super::ServiceConfig::recovery_window) of the
    /// create: the payment stays `created` and is asked about again later (its
    /// [`Payment::due_at`] moved out).
    Deferred,
}

/// The audit record of one recovery of `payment` at `at`: `after` with the provider asked
/// (the payment's route) added.
fn recovery_record(payment: &Payment, at: Timestamp, mut after: serde_json::Value) -> AuditRecord {
    after["provider"] = payment.route.as_ref().map(|r| r.provider.as_str()).into();
    AuditRecord {
        at,
        actor: "recovery".into(),
        action: RECOVERY_ACTION.into(),
        target: payment.id.to_string(),
        before: None,
        after: Some(after.to_string()),
    }
}

/// The comment of a payment whose provider could not say until its recovery window ended.
fn undecided(payment: &Payment, now: Timestamp, why: &str) -> String {
    let minutes = now.duration_since(payment.created_at).as_secs() / 60;
    format!("the requisite provider could not say what it issued for this payment over {minutes} min of asking; the last ask: {why}")
}

/// Why a recovered payment's requisites cannot be priced now: its project's contract no longer
/// covers it, or there is no usable rate.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
enum NoPrice {
    /// The contract does not cover the payment.
    #[error(transparent)]
    NotCovered(#[from] NotCovered),
    /// No usable rate.
    #[error("{0}")]
    Rate(RateFailure),
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;
    use crate::bank::CountryCode;
    use crate::payment::PaymentMethod;

    #[test]
    fn each_refusal_answers_its_code_and_the_wire_of_before() {
        let id = PaymentId::from_uuid(uuid::Uuid::nil());
        let mpid = MerchantPaymentId::parse("order-1").expect("an id");
        let cases: Vec<(CreateError, &str, &str)> = vec![
            (
                RequestError::Field {
                    field: "amount".into(),
                    reason: "is required".into(),
                }
                .into(),
                "bad_request",
                "amount: is required",
            ),
            (
                CreateError::MerchantPaused,
                "payment_not_routable",
                "the merchant is paused",
            ),
            (
                CreateError::ProjectPaused,
                "payment_not_routable",
                "the project is paused",
            ),
            (
                BankNotFound::Empty.into(),
                "bank_not_found",
                "bank_code is empty; omit it to accept any bank",
            ),
            (
                BankNotFound::Ambiguous {
                    name: "\"Bank\"".into(),
                    countries: vec!["KZ".into(), "UZ".into()],
                    geo_code: CountryCode::RU,
                }
                .into(),
                "bank_not_found",
                "bank_code \"Bank\" is ambiguous: present in KZ, UZ; none is geo_code RU",
            ),
            (
                NotCovered::Method(PaymentMethod::Sbp).into(),
                "payment_not_covered",
                "payment_method sbp is not in the project's contract",
            ),
            (
                CreateError::RateUnavailable {
                    currency: Currency::RUB,
                    why: RateFailure::TimedOut(Duration::from_secs(3)),
                },
                "payment_rate_unavailable",
                "no exchange rate for RUB in time",
            ),
            (
                CreateError::RateUnavailable {
                    currency: Currency::RUB,
                    why: RateFailure::NoRate,
                },
                "payment_rate_unavailable",
                "no exchange rate for RUB",
            ),
            (
                CreateError::NotRoutable {
                    comment: "no card for this bank".into(),
                    payment_id: id,
                },
                "payment_not_routable",
                "no card for this bank",
            ),
            (
                CreateError::Conflict(mpid),
                "payment_idempotency_conflict",
                "merchant_payment_id order-1 was already used with a different request",
            ),
            (
                CreateError::Replayed,
                "request_replayed",
                "this X-Request-Nonce was already used; sign every request with a new nonce",
            ),
        ];
        for (e, code, message) in cases {
            let api = ApiError::from(e.clone());
            assert_eq!((api.code, api.code.as_str()), (e.code(), code), "{e:?}");
            assert_eq!(api.message, message, "{e:?}");
            assert_eq!(
                api.payment_id.is_some(),
                matches!(e, CreateError::NotRoutable { .. }),
                "only a saved payment's refusal names it: {e:?}"
            );
            if let CreateError::RateUnavailable { why, .. } = e {
                assert_eq!(api.cause.as_deref(), Some(&ErrorCause::Rate(why)));
            }
        }
    }
}

/// How [`PaymentService::call_provider`] may ask.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Ask {
    /// A create whose payment is stored: failover, each switch written first.
    Recorded,
    /// A create whose payment is not stored yet (a local provider): failover in memory.
    Unrecorded,
    /// A recovery: the payment's own provider only.
    Again,
}

/// What a provider is asked for a payment.
fn requisite_request(payment: &Payment) -> RequisiteRequest {
    RequisiteRequest {
        payment_id: payment.id,
        amount: payment.amount,
        currency: payment.currency,
        payment_method: payment.payment_method,
        geo_code: payment.geo_code,
        bank_code: payment.bank_code.clone(),
        is_intrabank: payment.is_intrabank,
        is_test: payment.is_test(),
    }
}

/// The `error_comment` of a payment the provider could not decide, saying whether the
/// provider was reached: a support agent reconciling it with the provider knows at once
/// whether requisites may exist.
fn ambiguous_comment(outcome: &ProviderOutcome) -> String {
    match outcome {
        ProviderOutcome::Unavailable(c) => {
            format!("the requisite provider was not reached, nothing was issued: {c}")
        }
        ProviderOutcome::Ambiguous(c) => {
            format!("the requisite provider may have issued requisites, its answer is unknown: {c}")
        }
        other => other.as_str().to_string(),
    }
}

/// A refusal's text, for the route's record.
fn refusal_text(outcome: &ProviderOutcome) -> String {
    match outcome {
        ProviderOutcome::NoRequisites(c) => format!("no requisites ({c})"),
        ProviderOutcome::NotRoutable(c) => format!("not routable ({c})"),
        ProviderOutcome::Unavailable(c) => format!("not reached ({c})"),
        _ => "refused".to_string(),
    }
}
