//! The state machine: ONE function that encodes every row of the spec's "States and
//! transitions" table and its rules 1-4.
//!
//! | From | Trigger | To | Callback |
//! |---|---|---|---|
//! | `created` | [`Trigger::RequisitesIssued`] | `processing` | no |
//! | `created` | [`Trigger::RequisitesRefused`] | `error` | no |
//! | `processing` | [`Trigger::Confirm`] | `completed` (optionally a new amount) | yes |
//! | `processing` | [`Trigger::Cancel`], [`Trigger::Expire`] (at `expires_at`) | `canceled` | yes |
//! | `canceled` | [`Trigger::Confirm`] (re-check / support) | `completed` | yes |
//! | `completed` | [`Trigger::Confirm`] with another amount | `completed`, new amount | yes |
//! | `completed` | [`Trigger::Cancel`] (re-check) | `canceled` | yes |
//! | `completed`, `canceled`, `error` | [`Trigger::StartRecheck`] | `appeal` | no |
//! | `appeal` | [`Trigger::ResolveRecheck`] | `completed` / `canceled` / previous | yes, except back to `error` |
//! | `completed`, `canceled`, `error` | [`Trigger::ResendCallback`] | unchanged | yes (manual, also for test payments) |
//!
//! Test payments never produce an automatic callback. A payment that never had requisites (it
//! went to `error`) cannot be completed or canceled by a re-check: only returned to `error`.

use crate::amount::Amount;
use crate::clock::Timestamp;
use crate::event::{CallbackEvent, EventKind};
use crate::history::ChangeCause;
use crate::ids::EventId;
use crate::payment::{Payment, PaymentErrorCode, PaymentFailure, PaymentStatus, Requisites};
use crate::random::RandomSource;
use crate::settlement::Pricing;
use crate::{ApiError, ErrorCode};

/// What happened to a payment.
#[non_exhaustive]
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Trigger {
    /// The requisite provider issued requisites; course and fee are fixed now.
    RequisitesIssued {
        /// The requisites.
        requisites: Requisites,
        /// Course and fee to fix on the payment.
        pricing: Pricing,
    },
    /// No requisites were issued.
    RequisitesRefused {
        /// Why.
        code: PaymentErrorCode,
        /// Explanation for the `error_comment`.
        comment: String,
    },
    /// The transfer was confirmed (payment confirmed, paid after lifetime, support decision);
    /// `amount` when a different amount arrived.
    Confirm {
        /// The confirmed amount, if it differs from the payment's amount.
        amount: Option<Amount>,
    },
    /// The payment was canceled or could not be confirmed.
    Cancel,
    /// The lifetime ran out (only at or after `expires_at`).
    Expire,
    /// A re-check of a closed payment started.
    StartRecheck,
    /// The re-check ended.
    ResolveRecheck(RecheckOutcome),
    /// Support resends the callback of a closed payment.
    ResendCallback,
}

impl Trigger {
    /// A short name for messages and audit records.
    pub fn name(&self) -> &'static str {
        match self {
            Trigger::RequisitesIssued { .. } => "requisites_issued",
            Trigger::RequisitesRefused { .. } => "requisites_refused",
            Trigger::Confirm { .. } => "confirm",
            Trigger::Cancel => "cancel",
            Trigger::Expire => "expire",
            Trigger::StartRecheck => "recheck",
            Trigger::ResolveRecheck(_) => "recheck_resolve",
            Trigger::ResendCallback => "resend_callback",
        }
    }

    /// The cause the payment's history records for the change this trigger makes; `None` for
    /// a resend, which changes nothing.
    pub fn cause(&self) -> Option<ChangeCause> {
        Some(match self {
            Trigger::RequisitesIssued { .. } => ChangeCause::RequisitesIssued,
            Trigger::RequisitesRefused { .. } => ChangeCause::RequisitesRefused,
            Trigger::Confirm { .. } => ChangeCause::Confirmed,
            Trigger::Cancel => ChangeCause::Canceled,
            Trigger::Expire => ChangeCause::Expired,
            Trigger::StartRecheck => ChangeCause::RecheckStarted,
            Trigger::ResolveRecheck(_) => ChangeCause::RecheckResolved,
            Trigger::ResendCallback => return None,
        })
    }
}

/// How a re-check ended.
#[non_exhaustive]
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RecheckOutcome {
    /// Confirmed, optionally with another amount.
    Completed {
        /// The confirmed amount, if different.
        amount: Option<Amount>,
    },
    /// Not confirmed.
    Canceled,
    /// The payment returns to the status it had before the re-check.
    Unchanged,
}

/// The result of a legal transition: the new payment and the callback event to queue, if any.
#[must_use]
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Transition {
    /// The payment after the transition (the same as before for a resend).
    pub payment: Payment,
    /// The status before.
    pub from: PaymentStatus,
    /// The event to queue with the change, if the spec says one is sent.
    pub event: Option<CallbackEvent>,
    /// Whether the payment itself changed (a resend changes nothing but queues an event).
    pub changed: bool,
    /// What changed it, for the payment's history; `None` exactly when nothing changed.
    pub cause: Option<ChangeCause>,
}

/// An illegal trigger for the payment's current status.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("cannot {trigger} a payment in status {status}: {reason}")]
pub struct TransitionError {
    /// The payment's current status.
    pub status: PaymentStatus,
    /// The trigger's name.
    pub trigger: &'static str,
    /// Why it is not allowed.
    pub reason: &'static str,
}

impl From<TransitionError> for ApiError {
    fn from(e: TransitionError) -> Self {
        ApiError::new(ErrorCode::InvalidTransition, e.to_string())
    }
}

/// Applies `trigger` to `payment` at `now`. Returns the new payment and, where the spec says so,
/// a callback event with a fresh `event_id` from `rng`; an illegal trigger is an error, never a
/// panic. The caller decides the destination (and drops the event if there is none).
///
/// `payment` is not changed: the caller stores [`Transition::payment`] and the event together
/// (one store transaction, [`PaymentChange`](crate::store::PaymentChange)), expecting the
/// version it read.
///
/// # Example
///
/// A `processing` payment whose lifetime runs out: expiring it early is refused, at
/// `expires_at` it is `canceled` with a callback; a test payment gets none; a manual resend
/// queues an event without changing the payment.
///
/// ```
/// # fn main() -> Result<(), Box<dyn std::error::Error>> {
/// # use payments_core::callback::address::AddressPolicy;
/// # use payments_core::request::CreatePayment;
/// # use payments_core::{PaymentId, ProjectId, RandomSource, Timestamp};
/// # struct Zeros;
/// # impl RandomSource for Zeros {
/// #     fn fill(&self, buf: &mut [u8]) { buf.fill(0) }
/// # }
/// # let rng = Zeros;
/// # let body = br#"{"merchant_payment_id":"order-1001","amount":"3400","payment_method":"sbp"}"#;
/// # let request = CreatePayment::parse(body, AddressPolicy::STRICT)?;
/// # let created_at = Timestamp::from_unix_secs(1_790_856_000);
/// # let created = Payment {
/// #     id: PaymentId::from_uuid(uuid::Uuid::from_u128(1)),
/// #     project_id: ProjectId::from_uuid(uuid::Uuid::from_u128(2)),
/// #     merchant_payment_id: request.merchant_payment_id.clone(),
/// #     flow: Flow::RuntimeLive,
/// #     status: PaymentStatus::Created,
/// #     amount: request.amount,
/// #     initial_amount: request.amount,
/// #     currency: request.currency,
/// #     geo_code: request.geo_code,
/// #     payment_method: request.payment_method,
/// #     is_intrabank: false,
/// #     bank_code: None,
/// #     callback_url: None,
/// #     requisites: None,
/// #     pricing: None,
/// #     failure: None,
/// #     appeal_from: None,
/// #     created_at,
/// #     updated_at: created_at,
/// #     expires_at: created_at + Duration::from_secs(15 * 60),
/// #     version: 1,
/// #     fingerprint: request.fingerprint(None),
/// #     metadata: request.metadata.clone(),
/// #     route: None,
/// # };
/// use std::time::Duration;
///
/// use payments_core::event::EventKind;
/// use payments_core::payment::{Flow, Payment, PaymentStatus, Requisites};
/// use payments_core::settlement::{Course, FeePercent, Pricing};
/// use payments_core::transition::{apply, Trigger};
/// use rust_decimal::Decimal;
///
/// // `created` is a payment just accepted at `created_at` with a 15-minute lifetime.
/// let issued = Trigger::RequisitesIssued {
///     requisites: Requisites {
///         requisite: "+79000000001".into(),
///         holder_name: "Мария Алексеевна К.".into(),
///         bank: None,
///         qrcode_link: None,
///         deeplink_url: None,
///     },
///     pricing: Pricing {
///         course: Course::new(Decimal::from(100))?,
///         fee_percent: FeePercent::new(Decimal::from(11))?,
///     },
/// };
/// let processing = apply(&created, issued, created_at + Duration::from_secs(2), &rng)?.payment;
/// assert_eq!((processing.status, processing.version), (PaymentStatus::Processing, 2));
///
/// let early = apply(&processing, Trigger::Expire, processing.expires_at - Duration::from_secs(1), &rng);
/// assert_eq!(
///     early.unwrap_err().to_string(),
///     "cannot expire a payment in status processing: the payment's lifetime has not run out"
/// );
///
/// let expired = apply(&processing, Trigger::Expire, processing.expires_at, &rng)?;
/// assert_eq!((expired.from, expired.payment.status), (PaymentStatus::Processing, PaymentStatus::Canceled));
/// assert_eq!(expired.event.as_ref().map(|e| e.kind), Some(EventKind::Automatic));
///
/// // A project test payment: the same change, no automatic callback.
/// let test = Payment { flow: Flow::ProjectTest, ..processing.clone() };
/// assert!(apply(&test, Trigger::Expire, test.expires_at, &rng)?.event.is_none());
///
/// // Support resends the callback of the closed payment: an event, no change.
/// let resend = apply(&expired.payment, Trigger::ResendCallback, expired.payment.expires_at, &rng)?;
/// assert!(!resend.changed);
/// assert_eq!(resend.payment, expired.payment);
/// assert_eq!(resend.event.map(|e| e.kind), Some(EventKind::ManualResend));
/// # Ok(())
/// # }
/// ```
pub fn apply(
    payment: &Payment,
    trigger: Trigger,
    now: Timestamp,
    rng: &dyn RandomSource,
) -> Result<Transition, TransitionError> {
    use PaymentStatus::*;

    let from = payment.status;
    let name = trigger.name();
    let cause = trigger.cause();
    let illegal = |reason: &'static str| TransitionError {
        status: from,
        trigger: name,
        reason,
    };
    let mut next = payment.clone();
    // (event kind) when a callback follows; test payments get no automatic one.
    let mut notify: Option<EventKind> = None;

    match trigger {
        Trigger::RequisitesIssued {
            requisites,
            pricing,
        } => {
            if from != Created {
                return Err(illegal("requisites are issued only to a created payment"));
            }
            next.status = Processing;
            next.requisites = Some(requisites);
            next.pricing = Some(pricing);
        }
        Trigger::RequisitesRefused { code, comment } => {
            if from != Created {
                return Err(illegal("error occurs only before requisites are issued"));
            }
            next.status = Error;
            next.failure = Some(PaymentFailure { code, comment });
        }
        Trigger::Confirm { amount } => {
            match from {
                Processing | Canceled => {}
                Completed => {
                    match amount {
                        Some(a) if a != payment.amount => {}
                        _ => return Err(illegal(
                            "a completed payment is confirmed again only with a different amount",
                        )),
                    }
                }
                _ => {
                    return Err(illegal(
                        "only a processing, canceled or completed payment can be confirmed",
                    ))
                }
            }
            next.status = Completed;
            if let Some(a) = amount {
                next.amount = a;
            }
            notify = Some(EventKind::Automatic);
        }
        Trigger::Cancel => {
            if !matches!(from, Processing | Completed) {
                return Err(illegal(
                    "only a processing or completed payment can be canceled",
                ));
            }
            next.status = Canceled;
            notify = Some(EventKind::Automatic);
        }
        Trigger::Expire => {
            if from != Processing {
                return Err(illegal("only a processing payment expires"));
            }
            if now < payment.expires_at {
                return Err(illegal("the payment's lifetime has not run out"));
            }
            next.status = Canceled;
            notify = Some(EventKind::Automatic);
        }
        Trigger::StartRecheck => {
            if !from.is_closed() {
                return Err(illegal(
                    "only a completed, canceled or error payment can be re-checked",
                ));
            }
            next.status = Appeal;
            next.appeal_from = Some(from);
        }
        Trigger::ResolveRecheck(outcome) => {
            if from != Appeal {
                return Err(illegal(
                    "only a payment in appeal has a re-check to resolve",
                ));
            }
            let previous = payment
                .appeal_from
                .ok_or_else(|| illegal("the payment has no status to return to"))?;
            match outcome {
                RecheckOutcome::Completed { amount } => {
                    if payment.pricing.is_none() {
                        return Err(illegal("a payment without requisites cannot be completed"));
                    }
                    next.status = Completed;
                    if let Some(a) = amount {
                        next.amount = a;
                    }
                }
                RecheckOutcome::Canceled => {
                    if payment.pricing.is_none() {
                        return Err(illegal("a payment without requisites cannot be canceled"));
                    }
                    next.status = Canceled;
                }
                RecheckOutcome::Unchanged => next.status = previous,
            }
            next.appeal_from = None;
            // "callback with the result; the same status may be sent again" - but never for
            // `error` (rule 3).
            if next.status != Error {
                notify = Some(EventKind::Automatic);
            }
        }
        Trigger::ResendCallback => {
            if !from.is_closed() {
                return Err(illegal("only a closed payment's callback can be resent"));
            }
            let event = CallbackEvent::new(
                payment,
                EventId::generate(rng),
                EventKind::ManualResend,
                now,
            );
            return Ok(Transition {
                payment: next,
                from,
                event: Some(event),
                changed: false,
                cause: None,
            });
        }
    }

    // The project balance holds every live payment's credit: a completion whose USDT credit
    // would be beyond its range is refused, never left out of the balance.
    if next.status == Completed && !crate::ledger::credit_fits(&next) {
        return Err(illegal(
            "the amount's USDT credit is beyond what a project balance holds (10^12 USDT)",
        ));
    }
    next.updated_at = now;
    next.version = payment.version + 1;
    let event = match notify {
        Some(EventKind::Automatic) if next.is_test() => None,
        Some(kind) => Some(CallbackEvent::new(&next, EventId::generate(rng), kind, now)),
        None => None,
    };
    Ok(Transition {
        payment: next,
        from,
        event,
        changed: true,
        cause,
    })
}
