//! Payment operations (operator actions, sandbox test helpers) and the lifecycle sweep
//! (expiry, stuck creates). Every one goes through the one transition function.

use std::time::Duration;

use super::{AuthError, Authenticated, Payments};
use crate::amount::Amount;
use crate::event::OutboxEvent;
use crate::history::ChangeSource;
use crate::ids::PaymentId;
use crate::payment::{Payment, PaymentStatus};
use crate::project::{AuditRecord, Project};
use crate::store::{purge_all, Retained, StoreError, NONCE_PURGE_BATCH};
use crate::transition::{self, TransitionError, Trigger};
use crate::{ApiError, ErrorCode};

/// Who performs an operation, for the audit trail.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Actor(pub String);

impl Actor {
    /// The service itself (expiry, recovery).
    pub fn system() -> Actor {
        Actor("system".to_string())
    }
}

/// The result of an operation.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct OperationResult {
    /// The payment after the operation.
    pub payment: Payment,
    /// The callback event queued, if any.
    pub event: Option<OutboxEvent>,
}

/// What one sweep did.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct SweepReport {
    /// `processing` payments canceled at the end of their lifetime.
    pub expired: usize,
    /// `created` payments past their create resolved by asking the provider again
    /// ([`Payments::recover_create`]): now `processing`, or `error` with the
    /// provider's refusal.
    pub recovered: usize,
    /// `created` payments past their create that the provider could not resolve: `error` /
    /// `provider_result_ambiguous`.
    pub ambiguous: usize,
    /// Those payments (at most one sweep batch), for the warning an operator reconciles from.
    pub ambiguous_ids: Vec<PaymentId>,
    /// `created` payments whose provider could not say yet, left for a later recovery within
    /// the recovery window ([`super::Recovery::Deferred`]).
    pub deferred: usize,
}

impl SweepReport {
    /// The payments the sweep changed.
    pub fn changed(&self) -> usize {
        self.expired + self.recovered + self.ambiguous + self.deferred
    }
}

/// A payment as an audit record's state keeps it: requisites masked
/// ([`Payment::audit_view`]).
pub(super) fn payment_json(p: &Payment) -> Option<String> {
    serde_json::to_string(&p.audit_view()).ok()
}

/// Why an operation on a payment ([`Payments::operate`], the test helpers) was
/// refused, each with the stable code of its answer ([`OperateError::code`]); the message of
/// that answer is the error's text.
#[non_exhaustive]
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum OperateError {
    /// No such payment (`404 payment_not_found`).
    #[error("payment not found")]
    NotFound,
    /// The state machine refuses the action in the payment's status (`409 invalid_transition`).
    #[error(transparent)]
    Transition(#[from] TransitionError),
    /// A test helper on a payment that is not a test payment (`409 invalid_transition`).
    #[error("cannot {action} payment {payment}: it is not a test payment")]
    NotATestPayment {
        /// The action (`confirm`, `cancel`).
        action: &'static str,
        /// The payment.
        payment: PaymentId,
    },
    /// A test helper on a test payment that is not `processing` (`409 invalid_transition`).
    #[error(
        "cannot {action} a payment in status {status}: test helpers act only on processing \
         test payments"
    )]
    NotProcessing {
        /// The action.
        action: &'static str,
        /// The payment's status.
        status: PaymentStatus,
    },
    /// A trigger the test helpers do not take (`409 invalid_transition`).
    #[error("{0} is not a test outcome")]
    NotATestOutcome(&'static str),
    /// The signed request of a test helper was refused (its own code).
    #[error(transparent)]
    Auth(#[from] AuthError),
    /// Other writers changed the payment every time it was read (`503`, `Retry-After: 1`).
    #[error("the payment is changing too often; try again")]
    Contended,
    /// The store failed (`503`, or `500` for corrupt data).
    #[error(transparent)]
    Store(#[from] StoreError),
}

impl OperateError {
    /// The stable code it is answered with.
    pub fn code(&self) -> ErrorCode {
        match self {
            OperateError::NotFound => ErrorCode::PaymentNotFound,
            OperateError::Transition(_)
            | OperateError::NotATestPayment { .. }
            | OperateError::NotProcessing { .. }
            | OperateError::NotATestOutcome(_) => ErrorCode::InvalidTransition,
            OperateError::Auth(e) => e.code(),
            OperateError::Contended => ErrorCode::ServiceUnavailable,
            OperateError::Store(e) => ApiError::from(e.clone()).code,
        }
    }
}

impl From<OperateError> for ApiError {
    fn from(e: OperateError) -> ApiError {
        match e {
            OperateError::Transition(e) => e.into(),
            OperateError::Store(e) => e.into(),
            OperateError::Auth(e) => e.into(),
            OperateError::Contended => ApiError::new(e.code(), e.to_string()).with_retry_after(1),
            e => ApiError::new(e.code(), e.to_string()),
        }
    }
}

impl From<super::ReadError> for OperateError {
    fn from(e: super::ReadError) -> OperateError {
        match e {
            super::ReadError::NotFound => OperateError::NotFound,
            super::ReadError::Damaged(m) => OperateError::Store(StoreError::Corrupt(m)),
            super::ReadError::Store(e) => OperateError::Store(e),
        }
    }
}

impl Payments<'_> {
    /// Applies an operator action (confirm, cancel, re-check, resolve, resend) to a payment.
    /// An illegal one is `409 invalid_transition` naming the current status.
    pub async fn operate(
        self,
        id: PaymentId,
        trigger: Trigger,
        actor: &Actor,
    ) -> Result<OperationResult, OperateError> {
        let action = format!("payment.{}", trigger.name());
        let (payment, event) = self
            .apply(
                id,
                |_| Ok(trigger.clone()),
                |before, after| {
                    // A resend changes nothing, so the payment carries no time of it.
                    let at = if after.version == before.version {
                        self.ports.clock.now()
                    } else {
                        after.updated_at
                    };
                    Some(AuditRecord {
                        at,
                        actor: actor.0.clone(),
                        action: action.clone(),
                        target: id.to_string(),
                        before: payment_json(before),
                        after: payment_json(after),
                    })
                },
                ChangeSource::Support,
            )
            .await?;
        Ok(OperationResult { payment, event })
    }

    /// Sandbox test helper (`POST /api/v1/test/payments/{id}/complete`): completes a test
    /// payment of the caller's project that is `processing` (optionally with another amount).
    /// Anything else is `409 invalid_transition`. Records the request's nonce first.
    pub async fn test_complete(
        self,
        auth: Authenticated,
        id: &str,
        amount: Option<Amount>,
    ) -> Result<Payment, OperateError> {
        self.test_action(auth, id, Trigger::Confirm { amount })
            .await
    }

    /// Sandbox test helper (`POST /api/v1/test/payments/{id}/cancel`): cancels a test payment
    /// of the caller's project that is `processing`. Records the request's nonce first.
    pub async fn test_cancel(self, auth: Authenticated, id: &str) -> Result<Payment, OperateError> {
        self.test_action(auth, id, Trigger::Cancel).await
    }

    /// The test helpers' operation for a person instead of a signed request: the web
    /// cabinet's **Paid** (`Trigger::Confirm`, optionally with another amount) and **Canceled**
    /// (`Trigger::Cancel`) buttons on a test payment of `project`. The same checks as
    /// [`test_complete`](Self::test_complete) and [`test_cancel`](Self::test_cancel): only a
    /// `processing` test payment of that project (any other id is `404 payment_not_found`);
    /// any other trigger is `409 invalid_transition`.
    pub async fn test_outcome(
        self,
        project: &Project,
        id: &str,
        trigger: Trigger,
        actor: &Actor,
    ) -> Result<Payment, OperateError> {
        if !matches!(trigger, Trigger::Confirm { .. } | Trigger::Cancel) {
            return Err(OperateError::NotATestOutcome(trigger.name()));
        }
        self.test_transition(project, id, trigger, actor).await
    }

    async fn test_action(
        self,
        auth: Authenticated,
        id: &str,
        trigger: Trigger,
    ) -> Result<Payment, OperateError> {
        let ctx = self.gate().accept(auth).await?;
        let actor = Actor(format!(
            "project:{} token:{}",
            ctx.project.id, ctx.token.prefix
        ));
        self.test_transition(&ctx.project, id, trigger, &actor)
            .await
    }

    async fn test_transition(
        self,
        project: &Project,
        id: &str,
        trigger: Trigger,
        actor: &Actor,
    ) -> Result<Payment, OperateError> {
        let payment = self.payment_of_project(project, id).await?;
        let name = trigger.name();
        let check = |p: &Payment| {
            if !p.is_test() {
                return Err(OperateError::NotATestPayment {
                    action: name,
                    payment: p.id,
                });
            }
            if p.status != PaymentStatus::Processing {
                return Err(OperateError::NotProcessing {
                    action: name,
                    status: p.status,
                });
            }
            Ok(trigger.clone())
        };
        check(&payment)?;
        let audit = |before: &Payment, after: &Payment| {
            Some(AuditRecord {
                at: after.updated_at,
                actor: actor.0.clone(),
                action: format!("test_payment.{name}"),
                target: before.id.to_string(),
                before: payment_json(before),
                after: payment_json(after),
            })
        };
        let (payment, _) = (self.apply(payment.id, check, audit, ChangeSource::Merchant)).await?;
        Ok(payment)
    }

    /// Deletes the used nonces whose retention ended (a replay of them fails on its expired
    /// signature anyway); returns how many. The sweeper calls it about once a minute.
    pub async fn purge_nonces(self) -> Result<u64, StoreError> {
        let now = self.ports.clock.now();
        let store = &*self.ports.store;
        purge_all(store, Retained::Nonces, now, NONCE_PURGE_BATCH).await
    }

    /// Whether this process takes the turn of the periodic background `task` for the next
    /// `period` ([`Store::take_turn`](crate::store::Store::take_turn)): with several nodes on
    /// one database, one of them sweeps (or purges) per period, and if it stops, another takes
    /// over after the period.
    pub async fn take_turn(self, task: &str, period: Duration) -> Result<bool, StoreError> {
        let now = self.ports.clock.now();
        self.ports.store.take_turn(task, now, now + period).await
    }

    /// One pass of the lifecycle sweeper: cancels `processing` payments whose lifetime ran out
    /// (with their callback) and resolves payments stuck in `created` for 60 s by asking the
    /// provider again ([`Payments::recover_create`], no callback), all of the batch at
    /// once after the expiries. Looks at most `limit` due payments, found through the store's
    /// due-time index.
    pub async fn sweep(self, limit: usize) -> Result<SweepReport, StoreError> {
        let now = self.ports.clock.now();
        let due = self.ports.store.due_payments(now, limit).await?;
        let mut report = SweepReport::default();
        let mut stuck = Vec::new();
        for p in due {
            match p.status {
                PaymentStatus::Processing => {}
                PaymentStatus::Created => {
                    stuck.push(p);
                    continue;
                }
                _ => continue,
            }
            let t = match transition::apply(&p, Trigger::Expire, now, self.ports.rng.as_ref()) {
                Ok(t) => t,
                Err(_) => continue,
            };
            match self.commit(&p, &t, None, ChangeSource::Lifetime).await {
                Ok(_) => report.expired += 1,
                // Someone else changed it first (a confirmation racing the expiry): theirs wins.
                Err(StoreError::Conflict) => {}
                Err(e) => return Err(e),
            }
        }
        // Creates that never recorded their provider's answer: the provider is asked again
        // about every one of the batch at once, after the expiries, so the sweep takes at most
        // one provider budget, and every stuck payment of the batch leaves `created` (with a
        // cap, thousands of stuck payments after a crash under load, due before the expiries,
        // would hold the expiries back for one provider budget per capful).
        let recoveries = stuck.iter().map(|p| self.recover_create(p));
        let results = futures_util::future::join_all(recoveries).await;
        for (p, result) in stuck.iter().zip(results) {
            match result? {
                super::Recovery::Resolved => report.recovered += 1,
                super::Recovery::Ambiguous => {
                    report.ambiguous += 1;
                    report.ambiguous_ids.push(p.id);
                }
                super::Recovery::Deferred => report.deferred += 1,
                super::Recovery::Raced | super::Recovery::InFlight => {}
            }
        }
        debug_assert_eq!(report.ambiguous, report.ambiguous_ids.len());
        Ok(report)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_refusal_answers_its_code_and_the_wire_of_before() {
        let id = PaymentId::from_uuid(uuid::Uuid::nil());
        let cases = [
            (
                OperateError::NotFound,
                "payment_not_found",
                "payment not found",
                None,
            ),
            (
                OperateError::NotATestPayment {
                    action: "confirm",
                    payment: id,
                },
                "invalid_transition",
                "cannot confirm payment 00000000-0000-0000-0000-000000000000: it is not a test \
                 payment",
                None,
            ),
            (
                OperateError::NotProcessing {
                    action: "cancel",
                    status: PaymentStatus::Completed,
                },
                "invalid_transition",
                "cannot cancel a payment in status completed: test helpers act only on \
                 processing test payments",
                None,
            ),
            (
                OperateError::Contended,
                "service_unavailable",
                "the payment is changing too often; try again",
                Some(1),
            ),
        ];
        for (e, code, message, retry_after) in cases {
            let api = ApiError::from(e.clone());
            assert_eq!((api.code, api.code.as_str()), (e.code(), code), "{e:?}");
            assert_eq!(
                (api.message.as_str(), api.retry_after),
                (message, retry_after)
            );
        }
    }
}
