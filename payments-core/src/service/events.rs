//! The merchant's events API: `GET /api/v1/events` (a project's callback events with their
//! attempts, newest first, paged like the payment list), `GET /api/v1/events/{id}`, and the
//! merchant's own recovery: resending one event, every undelivered event since a time, or a
//! closed payment's callback. Every resend is the spec's manual resend (a new event with a new
//! `event_id`, the payment's current closed status, one attempt) and is audited with the token
//! that asked for it. Every resend a merchant asks for comes out of the project's resend budget
//! ([`ServiceConfig::resend_budget`](super::ServiceConfig::resend_budget)): over it, a single
//! resend is `429 rate_limited` with `Retry-After`, and a recovery resends what the budget
//! allows and lists the rest as skipped, with the reason.

use std::time::Duration;

use super::callbacks::resend_budget_message;
use super::listing::ListCursor;
use super::{Actor, Callbacks};
use crate::error::{ApiError, ErrorCode};
use crate::event::{DeliveryState, EventRecord, FailedEventFilter};
use crate::ids::{EventId, PaymentId, ProjectId};
use crate::project::{Project, TokenRecord};
use crate::ratelimit::{retry_after_secs, Gcra, Grant, RateLimiter as _};
use crate::store::{EventQuery, StoreError};
use crate::Timestamp;

/// The longest a list of events may wait for a new event (`wait`, seconds).
pub const MAX_EVENT_WAIT: Duration = Duration::from_secs(30);

/// The cursor of the event list.
pub type EventCursor = ListCursor<EventId>;

/// The filters and page of `GET /api/v1/events`, read with `payments_http::query::event_list`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct EventListQuery {
    /// `delivery_state`: only events that are `pending`, `delivered` or `failed` (every
    /// attempt failed: "not delivered").
    pub delivery_state: Option<DeliveryState>,
    /// `payment_id`: only this payment's events.
    pub payment_id: Option<PaymentId>,
    /// `created_from` (RFC 3339): queued at or after.
    pub created_from: Option<Timestamp>,
    /// `created_to` (RFC 3339): queued before.
    pub created_to: Option<Timestamp>,
    /// `limit`: 1 to [`MAX_LIST_LIMIT`](super::MAX_LIST_LIMIT), default
    /// [`DEFAULT_LIST_LIMIT`](super::DEFAULT_LIST_LIMIT).
    pub limit: usize,
    /// `cursor`: where the page starts (a previous page's `next_cursor`).
    pub cursor: Option<EventCursor>,
    /// `wait` (whole seconds, at most [`MAX_EVENT_WAIT`]): when the first page is empty, how
    /// long the adapter may hold the request for an event to arrive (a long poll); zero by
    /// default. Only the first page waits.
    pub wait: Duration,
}

impl Default for EventListQuery {
    fn default() -> Self {
        EventListQuery {
            delivery_state: None,
            payment_id: None,
            created_from: None,
            created_to: None,
            limit: super::DEFAULT_LIST_LIMIT,
            cursor: None,
            wait: Duration::ZERO,
        }
    }
}

impl EventListQuery {
    /// The page of what the store found for [`EventListQuery::store_query`] (one past the
    /// limit): cut to the limit, with the next page's cursor when there is more.
    fn page(&self, mut found: Vec<EventRecord>) -> EventPage {
        let more = found.len() > self.limit;
        found.truncate(self.limit);
        let next_cursor = if more {
            found.last().map(|r| EventCursor {
                created_at: r.outbox.event.created_at,
                id: r.outbox.event.event_id,
            })
        } else {
            None
        };
        EventPage {
            events: found,
            next_cursor,
        }
    }

    /// The store query of this page for `project`, one past the limit.
    fn store_query(&self, project: &Project) -> EventQuery {
        EventQuery {
            state: self.delivery_state,
            payment: self.payment_id,
            created_from: self.created_from,
            created_to: self.created_to,
            before: self.cursor.map(|c| (c.created_at, c.id)),
            ..EventQuery::new(project.id, self.limit + 1)
        }
    }
}

/// A page of a project's events.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct EventPage {
    /// The events with their attempts, newest first.
    pub events: Vec<EventRecord>,
    /// The cursor of the next page; `None` on the last page.
    pub next_cursor: Option<EventCursor>,
}

/// What `POST /api/v1/events/recover` did: the spec's manual resend for each payment with
/// undelivered events in the range.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Recovered {
    /// The new events, each answering the failed events of its payment.
    pub resent: Vec<super::ResentPayment>,
    /// The payments left alone, and why.
    pub skipped: Vec<super::SkippedPayment>,
    /// Whether more failed events than one call takes ([`MAX_FAILED_BATCH`]) matched: call
    /// again.
    ///
    /// [`MAX_FAILED_BATCH`]: super::MAX_FAILED_BATCH
    pub more: bool,
}

/// The request one delivery attempt sent, as the merchant may see it: the exact body and the
/// headers (the signature included, never the secret) ([`Callbacks::sent_request`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SentRequest {
    /// The body, byte for byte (JSON, UTF-8).
    pub body: String,
    /// Each attempt's headers, in attempt order.
    pub attempts: Vec<SentHeaders>,
}

/// The headers one attempt sent.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SentHeaders {
    /// The attempt's number (1 for the first).
    pub attempt: u32,
    /// `(name, value)` in the order sent. A signature the secrets held now cannot reproduce
    /// (a secret since dropped by a rotation) is `None`.
    pub headers: Vec<(&'static str, Option<String>)>,
}

/// The actor a merchant's token is audited as: `api-token:<prefix>`.
pub fn token_actor(token: &TokenRecord) -> Actor {
    Actor(format!("api-token:{}", token.prefix))
}

/// `404 not_found` for an event that does not exist or is another project's.
pub fn event_not_found() -> ApiError {
    ApiError::new(ErrorCode::NotFound, "no such event in this project")
}

impl Callbacks<'_> {
    /// Takes `n` resends from `project`'s resend budget: the first `allowed` may be sent.
    pub(super) async fn take_resends(
        self,
        project: ProjectId,
        n: usize,
    ) -> Result<Grant, StoreError> {
        let n = u32::try_from(n).unwrap_or(u32::MAX);
        let rule = Gcra::new(self.config.resend_budget);
        let now = self.ports.clock.now();
        self.resends.acquire_many(project, rule, now, n).await
    }

    /// A page of `project`'s callback events as `query` asks, newest first by queueing time
    /// (ties by event id), each with its attempts, read under the project's list budget
    /// ([`Callbacks::events_page`]). Events are kept for the events' retention period
    /// ([`Retention::events`](super::Retention)).
    pub async fn list_events(
        self,
        project: &Project,
        query: &EventListQuery,
    ) -> Result<EventPage, ApiError> {
        let found = self.events_page(&query.store_query(project)).await?;
        Ok(query.page(found))
    }

    /// A long poll's re-read of [`Callbacks::list_events`]: the page when one of the
    /// project's list places is free now, `None` when not (the poll looks again at its next
    /// turn instead of waiting: a project's long polls never hold more places than its
    /// budget, and never fail for want of one).
    pub async fn recheck_events(
        self,
        project: &Project,
        query: &EventListQuery,
    ) -> Result<Option<EventPage>, ApiError> {
        let Some(_place) = self.scan_place_now(project.id) else {
            return Ok(None);
        };
        let found = self
            .ports
            .store
            .find_events(&query.store_query(project))
            .await?;
        Ok(Some(query.page(found)))
    }

    /// The events a store query finds, read under the project's list budget
    /// ([`ScanBudget`](super::ScanBudget): `429 rate_limited` when the project already runs
    /// as many list reads as it may) and the store's time limit for one read. The API's
    /// events list and the cabinet's deliveries page read through here.
    pub async fn events_page(self, query: &EventQuery) -> Result<Vec<EventRecord>, ApiError> {
        let _place = self.scan_place(query.project).await?;
        Ok(self.ports.store.find_events(query).await?)
    }

    /// One event of `project` with its attempts; `None` when it does not exist or belongs to
    /// another project.
    pub async fn project_event(
        self,
        project: &Project,
        id: EventId,
    ) -> Result<Option<EventRecord>, StoreError> {
        let found = self
            .ports
            .store
            .find_events(&EventQuery {
                event: Some(id),
                ..EventQuery::new(project.id, 1)
            })
            .await?;
        Ok(found.into_iter().next())
    }

    /// The request each attempt of `event` (an event of `project`) sent: its body and its
    /// headers, the signature recomputed from the project's callback secrets for the attempt's
    /// time ([`CallbackSecrets::signature_at`](crate::callback::CallbackSecrets::signature_at)).
    pub async fn sent_request(
        self,
        project: &Project,
        event: &EventRecord,
    ) -> Result<SentRequest, ApiError> {
        use crate::callback::{EVENT_ID_HEADER, SIGNATURE_HEADER, TIMESTAMP_HEADER};
        if event.outbox.event.project_id != project.id {
            return Err(event_not_found());
        }
        let secrets = self.callbacks().signing_secrets(project.id).await?;
        let body = &event.outbox.event.body;
        let attempts = event
            .attempts
            .iter()
            .map(|a| {
                let signed = secrets.signature_at(a.started_at, body);
                SentHeaders {
                    attempt: a.attempt,
                    headers: vec![
                        ("Content-Type", Some("application/json".to_string())),
                        (
                            EVENT_ID_HEADER,
                            Some(event.outbox.event.event_id.to_string()),
                        ),
                        (TIMESTAMP_HEADER, Some(a.started_at.unix_secs().to_string())),
                        (SIGNATURE_HEADER, signed.map(|s| s.signature)),
                    ],
                }
            })
            .collect();
        Ok(SentRequest {
            body: String::from_utf8_lossy(body).into_owned(),
            attempts,
        })
    }

    /// Resends the callback of the payment of `project`'s event `id` (which may be
    /// delivered, failed or pending): a manual resend of the payment's current closed status,
    /// answering its failed events. `404 not_found` for an unknown event, `409
    /// invalid_transition` when the payment is not closed (any more) or has no callback URL.
    /// Returns the new event.
    pub async fn resend_event(
        self,
        project: &Project,
        id: EventId,
        actor: &Actor,
    ) -> Result<EventRecord, ApiError> {
        let event = self
            .project_event(project, id)
            .await?
            .ok_or_else(event_not_found)?;
        self.resend_payment_callback(project, event.outbox.event.payment_id, actor)
            .await
    }

    /// The merchant's "send callback" for a closed payment of `project`, test payments
    /// included (the spec's support resend: a real signed request, `is_test: true` for a test
    /// payment): a new event with a new `event_id`, one attempt. `404 payment_not_found` for
    /// a payment of another project. Returns the new event.
    pub async fn resend_payment_callback(
        self,
        project: &Project,
        payment: PaymentId,
        actor: &Actor,
    ) -> Result<EventRecord, ApiError> {
        match self.ports.store.payment(payment).await? {
            Some(p) if p.project_id == project.id => {}
            _ => return Err(super::payment_not_found()),
        }
        if let Some(retry_after) = self.take_resends(project.id, 1).await?.retry_after {
            let budget = self.config.resend_budget;
            return Err(ApiError::new(
                ErrorCode::RateLimited,
                resend_budget_message(budget, retry_after),
            )
            .with_retry_after(retry_after_secs(retry_after)));
        }
        let (event_id, _) = self.resend_one(payment, actor, true).await??;
        self.project_event(project, event_id)
            .await?
            .ok_or_else(|| ApiError::internal("the resent event is not in the store"))
    }

    /// Resends every undelivered (failed, not yet answered) event of `project` queued at or
    /// after `since` (and before `until`, when given): one manual resend per payment, at most
    /// [`MAX_FAILED_BATCH`](super::MAX_FAILED_BATCH) failed events a call, and no more
    /// payments than the project's resend budget has left: the others are skipped with the
    /// reason ([`resend_budget_message`]) and stay failed for a later call. Audited as a bulk
    /// resend by `actor`, and each payment's resend on its own.
    pub async fn recover_events(
        self,
        project: &Project,
        since: Timestamp,
        until: Option<Timestamp>,
        actor: &Actor,
    ) -> Result<Recovered, StoreError> {
        let filter = FailedEventFilter {
            project: Some(project.id),
            host: None,
            since: Some(since),
            until,
        };
        let report = self
            .bulk_resend(&filter, super::MAX_FAILED_BATCH, actor, Some(project.id))
            .await?;
        let taken: usize = report.resent.iter().map(|r| r.failed.len()).sum::<usize>()
            + report.skipped.iter().map(|s| s.failed.len()).sum::<usize>();
        let more = taken >= super::MAX_FAILED_BATCH;
        Ok(Recovered {
            resent: report.resent,
            skipped: report.skipped,
            more,
        })
    }
}
