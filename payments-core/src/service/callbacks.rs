//! What an operator does about callbacks as a whole: the failed ones (listed, resent in bulk
//! as the spec's manual resends), holding and releasing dispatch, and retention of finished
//! events and audit records.

use std::time::Duration;

use serde_json::json;

use super::{Actor, Callbacks};
use crate::event::{FailedEvent, FailedEventFilter};
use crate::history::ChangeSource;
use crate::ids::{EventId, PaymentId, ProjectId};
use crate::project::{AuditRecord, RateLimit};
use crate::ratelimit::retry_after_secs;
use crate::store::{Retained, StoreError};
use crate::transition::{self, Trigger};
use crate::{ApiError, ErrorCode};

/// The setting that holds callback dispatch: empty or absent means dispatch runs; any other
/// value is the reason it is held (who, when, why). A dispatcher checks it before claiming.
pub const CALLBACK_HOLD_SETTING: &str = crate::settings::CALLBACK_HOLD.name();

/// The most failed events one listing or one bulk resend takes.
pub const MAX_FAILED_BATCH: usize = 1000;

/// How long finished records are kept ([`ServiceConfig::retention`](super::ServiceConfig)).
/// `None` keeps them forever.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Retention {
    /// Delivered and failed callback events, with their attempts, by the time they were
    /// queued (90 days by default).
    pub events: Option<Duration>,
    /// Audit records (400 days by default: the longest, so a year's actions can be reviewed).
    pub audit: Option<Duration>,
}

impl Default for Retention {
    fn default() -> Self {
        Retention {
            events: Some(Duration::from_secs(90 * 86_400)),
            audit: Some(Duration::from_secs(400 * 86_400)),
        }
    }
}

/// What one retention batch deleted.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct PurgeReport {
    /// Finished events deleted (with their attempts).
    pub events: u64,
    /// Audit records deleted.
    pub audit: u64,
    /// Logged merchant requests deleted (older than
    /// [`RequestLogPolicy::max_age`](crate::request_log::RequestLogPolicy::max_age)).
    pub requests: u64,
}

/// A payment whose failed events a bulk resend answered.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ResentPayment {
    /// The payment.
    pub payment_id: PaymentId,
    /// Its failed events the resend answers.
    pub failed: Vec<EventId>,
    /// The new event (a manual resend: one attempt, the payment's current closed status).
    pub event_id: EventId,
}

/// A payment a bulk resend left alone, and why.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SkippedPayment {
    /// The payment.
    pub payment_id: PaymentId,
    /// Its failed events, still unanswered (except when another resend answered them).
    pub failed: Vec<EventId>,
    /// Why (not closed any more, no callback URL at any level, resent meanwhile, ...).
    pub reason: String,
}

/// The result of [`Callbacks::resend_failed_callbacks`].
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct BulkResend {
    /// The payments resent, in the order of their oldest failed event.
    pub resent: Vec<ResentPayment>,
    /// The payments left alone.
    pub skipped: Vec<SkippedPayment>,
}

/// Why a resend was refused for the project's resend budget: the sentence of the `429
/// rate_limited` answer and of a recovery's skipped payment.
pub fn resend_budget_message(budget: RateLimit, retry_after: Duration) -> String {
    format!(
        "rate_limited: the project's callback resends are used up ({} at once, then {} a \
         second); retry after {} s",
        budget.burst,
        budget.per_second,
        retry_after_secs(retry_after)
    )
}

impl Callbacks<'_> {
    /// The failed callback events nobody has resent yet that match `filter`, oldest first, at
    /// most `limit` (capped at [`MAX_FAILED_BATCH`]), each with its last attempt.
    pub async fn failed_callbacks(
        self,
        filter: &FailedEventFilter,
        limit: usize,
    ) -> Result<Vec<FailedEvent>, StoreError> {
        let limit = limit.clamp(1, MAX_FAILED_BATCH);
        self.ports.store.failed_events(filter, limit).await
    }

    /// Resends the callbacks of the failed events matching `filter` (at most `limit` events,
    /// capped at [`MAX_FAILED_BATCH`]): one manual resend per payment, as the spec's resend by
    /// support (a new event with a new `event_id`, one attempt, the payment's current closed
    /// status), answering every failed event of that payment. Each resend is audited as
    /// `payment.resend_callback` by `actor`, and the whole as `callbacks.resend_failed` with
    /// the filter and the counts. A payment that cannot be resent (not closed any more, no
    /// callback URL left) is skipped with the reason and stays in the failed list.
    pub async fn resend_failed_callbacks(
        self,
        filter: &FailedEventFilter,
        limit: usize,
        actor: &Actor,
    ) -> Result<BulkResend, StoreError> {
        self.bulk_resend(filter, limit, actor, None).await
    }

    /// [`resend_failed_callbacks`](Self::resend_failed_callbacks), taking the resends from
    /// `budget`'s resend budget when given (a merchant's recovery): the payments beyond what
    /// it has left are skipped with the reason.
    pub(super) async fn bulk_resend(
        self,
        filter: &FailedEventFilter,
        limit: usize,
        actor: &Actor,
        budget: Option<ProjectId>,
    ) -> Result<BulkResend, StoreError> {
        let failed = self.failed_callbacks(filter, limit).await?;
        // One resend per payment, in the order of its oldest failure.
        let mut payments: Vec<(PaymentId, Vec<EventId>)> = Vec::new();
        for f in &failed {
            let (pid, eid) = (f.outbox.event.payment_id, f.outbox.event.event_id);
            match payments.iter_mut().find(|(p, _)| *p == pid) {
                Some((_, ids)) => ids.push(eid),
                None => payments.push((pid, vec![eid])),
            }
        }
        let mut report = BulkResend::default();
        if let Some(project) = budget {
            let grant = self.take_resends(project, payments.len()).await?;
            let allowed = usize::try_from(grant.allowed).unwrap_or(usize::MAX);
            if let Some(retry_after) = grant.retry_after {
                let reason = resend_budget_message(self.config.resend_budget, retry_after);
                let over = payments.split_off(allowed.min(payments.len()));
                report.skipped = over
                    .into_iter()
                    .map(|(payment_id, failed)| SkippedPayment {
                        payment_id,
                        failed,
                        reason: reason.clone(),
                    })
                    .collect();
            }
        }
        for (payment_id, failed) in payments {
            match self.resend_one(payment_id, actor, false).await? {
                Ok((event_id, answered)) => report.resent.push(ResentPayment {
                    payment_id,
                    failed: answered,
                    event_id,
                }),
                Err(e) => report.skipped.push(SkippedPayment {
                    payment_id,
                    failed,
                    reason: e.message,
                }),
            }
        }
        let now = self.ports.clock.now();
        self.ports
            .store
            .insert_audit(&AuditRecord {
                at: now,
                actor: actor.0.clone(),
                action: "callbacks.resend_failed".into(),
                target: describe_filter(filter),
                before: None,
                after: Some(
                    json!({
                        "failed_events": failed_count(&report),
                        "resent_payments": report.resent.len(),
                        "skipped_payments": report.skipped.len(),
                    })
                    .to_string(),
                ),
            })
            .await?;
        Ok(report)
    }

    /// One payment's manual resend answering its failed events: the new event and the failed
    /// events it answered, or `Ok(Err(why))` when it is not sent (`409 invalid_transition`,
    /// or `404 payment_not_found`). Without failed events to answer, nothing is sent (another
    /// resend answered them meanwhile) unless `even_without_failures`: then the resend is
    /// committed on its own (the merchant's resend of any closed payment).
    pub(super) async fn resend_one(
        self,
        id: PaymentId,
        actor: &Actor,
        even_without_failures: bool,
    ) -> Result<Result<(EventId, Vec<EventId>), ApiError>, StoreError> {
        let refused = |why: &str| Ok(Err(ApiError::new(ErrorCode::InvalidTransition, why)));
        for _ in 0..8 {
            let Some(before) = self.ports.store.payment(id).await? else {
                return Ok(Err(super::payment_not_found()));
            };
            let now = self.ports.clock.now();
            let t = match transition::apply(
                &before,
                Trigger::ResendCallback,
                now,
                self.ports.rng.as_ref(),
            ) {
                Ok(t) => t,
                Err(e) => return Ok(Err(ApiError::from(e))),
            };
            let audit = AuditRecord {
                at: now,
                actor: actor.0.clone(),
                action: "payment.resend_callback".into(),
                target: id.to_string(),
                before: super::operate::payment_json(&before),
                after: super::operate::payment_json(&t.payment),
            };
            let change = (self.change_of(&before, &t, Some(audit), ChangeSource::Support)).await?;
            let Some(event) = change.event.as_ref() else {
                return refused("no callback URL at any level (payment, project, merchant)");
            };
            let event_id = event.event.event_id;
            match self.ports.store.commit_resend(&change).await {
                Ok(answered) if answered.is_empty() && even_without_failures => {
                    match self.ports.store.commit_change(&change).await {
                        Ok(()) => {
                            self.woken(change.event)?;
                            return Ok(Ok((event_id, answered)));
                        }
                        Err(StoreError::Conflict) => continue,
                        Err(e) => return Err(e),
                    }
                }
                Ok(answered) if answered.is_empty() => {
                    return refused("already resent by another operator")
                }
                Ok(answered) => {
                    self.woken(change.event)?;
                    return Ok(Ok((event_id, answered)));
                }
                Err(StoreError::Conflict) => continue,
                Err(e) => return Err(e),
            }
        }
        refused("the payment is changing too often; try again")
    }

    /// Why callback dispatch is held, or `None` when it runs.
    pub async fn callback_hold(self) -> Result<Option<String>, StoreError> {
        Ok(crate::settings::CALLBACK_HOLD
            .get(&*self.ports.store)
            .await?
            .filter(|v| !v.trim().is_empty()))
    }

    /// Holds callback dispatch: every dispatcher over this store stops claiming events (those
    /// in flight finish) until [`release_callbacks`](Self::release_callbacks). Events keep
    /// being queued. Audited as `callbacks.hold`.
    pub async fn hold_callbacks(
        self,
        reason: &str,
        actor: &Actor,
    ) -> Result<String, super::AdminError> {
        let reason = reason.trim();
        if reason.is_empty() || reason.chars().count() > 500 || reason.chars().any(char::is_control)
        {
            return Err(super::AdminError::invalid(
                "reason: 1 to 500 characters without control characters",
            ));
        }
        let now = self.ports.clock.now();
        let value = format!("{reason} (held by {} at {})", actor.0, now.to_rfc3339());
        self.set_hold(&value, "callbacks.hold", actor).await?;
        Ok(value)
    }

    /// Releases a hold of callback dispatch; held events are sent at once. Audited as
    /// `callbacks.release` (also when nothing was held).
    pub async fn release_callbacks(self, actor: &Actor) -> Result<(), StoreError> {
        self.set_hold("", "callbacks.release", actor).await
    }

    async fn set_hold(self, value: &str, action: &str, actor: &Actor) -> Result<(), StoreError> {
        let before = self.callback_hold().await?;
        crate::settings::CALLBACK_HOLD
            .set(&*self.ports.store, &value.to_string())
            .await?;
        self.ports
            .store
            .insert_audit(&AuditRecord {
                at: self.ports.clock.now(),
                actor: actor.0.clone(),
                action: action.into(),
                target: "callback dispatch".into(),
                before: Some(json!({ "held": before }).to_string()),
                after: Some(json!({ "held": (!value.is_empty()).then_some(value) }).to_string()),
            })
            .await?;
        if value.is_empty() {
            // Wake the dispatchers: what was held is due.
            self.tell_wakers(None);
        }
        Ok(())
    }

    /// One retention batch: deletes at most `batch` finished events (with their attempts)
    /// and `batch` audit records older than [`ServiceConfig::retention`](super::ServiceConfig)
    /// allows, and `batch` logged requests older than its `request_log` policy. The sweeper
    /// repeats it, pausing between batches, until each comes back short.
    pub async fn purge_expired_records(self, batch: usize) -> Result<PurgeReport, StoreError> {
        let now = self.ports.clock.now();
        let retention = self.config.retention;
        let mut report = PurgeReport::default();
        if let Some(keep) = retention.events {
            let before = now.saturating_sub(keep);
            let store = &self.ports.store;
            report.events = store
                .purge(Retained::FinishedEvents, before, batch)
                .await?
                .deleted;
        }
        if let Some(keep) = retention.audit {
            let before = now.saturating_sub(keep);
            let store = &self.ports.store;
            report.audit = store.purge(Retained::Audit, before, batch).await?.deleted;
        }
        let before = self.config.request_log.since(now);
        report.requests = self
            .ports
            .store
            .purge_requests(before, batch)
            .await?
            .deleted;
        Ok(report)
    }
}

fn failed_count(report: &BulkResend) -> usize {
    report.resent.iter().map(|r| r.failed.len()).sum::<usize>()
        + report.skipped.iter().map(|s| s.failed.len()).sum::<usize>()
}

/// The filter as the audit record's target: `project=... host=... since=... until=...`, or
/// `all`.
pub fn describe_filter(f: &FailedEventFilter) -> String {
    let mut parts = Vec::new();
    if let Some(p) = f.project {
        parts.push(format!("project={p}"));
    }
    if let Some(h) = &f.host {
        parts.push(format!("host={h}"));
    }
    if let Some(t) = f.since {
        parts.push(format!("since={}", t.to_rfc3339()));
    }
    if let Some(t) = f.until {
        parts.push(format!("until={}", t.to_rfc3339()));
    }
    if parts.is_empty() {
        "all failed callbacks".into()
    } else {
        parts.join(" ")
    }
}
