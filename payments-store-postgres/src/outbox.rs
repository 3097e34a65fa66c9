//! The callback outbox as SQL: events with their frozen bodies, leases with fencing tokens,
//! and attempts.

use std::time::Duration;

use deadpool_postgres::GenericClient;
use payments_core::event::{
    CallbackEvent, DeliveryAttempt, DeliveryState, EventKind, EventRecord, FailedEvent,
    FailedEventFilter, OutboxEvent,
};
use payments_core::ids::{EventId, PaymentId};
use payments_core::store::{AttemptRecorded, ClaimedEvent, LeaseToken, StoreError};
use payments_core::Timestamp;
use tokio_postgres::Row;

use crate::codec::{self, execute, execute_raw, query, query_opt, Cols};
use crate::error::{corrupt, db, unique_violation};

/// Inserts an outbox row; a reused event id is `Duplicate`.
pub(crate) async fn insert<C: GenericClient>(c: &C, e: &OutboxEvent) -> Result<(), StoreError> {
    let ev = &e.event;
    let attempts = i32::try_from(e.attempts).map_err(|_| corrupt("attempts", e.attempts))?;
    let max_attempts =
        i32::try_from(e.max_attempts).map_err(|_| corrupt("max_attempts", e.max_attempts))?;
    let result = execute_raw(
        c,
        "INSERT INTO outbox_events (event_id, payment_id, project_id, status, kind, body, \
         created_at, destination, state, attempts, max_attempts, next_attempt_at) \
         VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12)",
        &[
            &ev.event_id.to_string(),
            &ev.payment_id.to_string(),
            &ev.project_id.to_string(),
            &ev.status.as_str(),
            &ev.kind.as_str(),
            &ev.body,
            &ev.created_at.unix_millis(),
            &e.destination.as_str(),
            &e.state.as_str(),
            &attempts,
            &max_attempts,
            &e.next_attempt_at.map(Timestamp::unix_millis),
        ],
    )
    .await;
    match result {
        Ok(_) => Ok(()),
        Err(err) if unique_violation(&err).is_some() => {
            Err(StoreError::Duplicate(format!("event {}", ev.event_id)))
        }
        Err(err) => Err(db(err)),
    }
}

fn event_from_row(row: &Row, next_attempt_column: &str) -> Result<OutboxEvent, StoreError> {
    let c = Cols::new(row);
    Ok(OutboxEvent {
        event: CallbackEvent {
            event_id: c.parsed("event_id")?,
            payment_id: c.parsed("payment_id")?,
            project_id: c.parsed("project_id")?,
            status: c.parsed("status")?,
            kind: c.with("kind", EventKind::parse)?,
            body: c.blob("body")?,
            created_at: c.ts("created_at")?,
        },
        destination: codec::parse_url(&c.text("destination")?)?,
        state: c.with("state", DeliveryState::parse)?,
        attempts: c.num4("attempts")?,
        max_attempts: c.num4("max_attempts")?,
        next_attempt_at: c.opt_ts(next_attempt_column)?,
    })
}

/// Claims due pending events, earliest first: the rows are locked inside the CTE with
/// `SKIP LOCKED`, so concurrent claims on any node take disjoint rows, and each claimed row
/// moves to `now + lease` with its lease token incremented, in one statement. (The shape
/// `UPDATE ... WHERE seq IN (SELECT ... LIMIT n)` is wrong here: the sub-select can be run
/// again under concurrency and hand one row to several claimers.)
pub(crate) async fn claim_due<C: GenericClient>(
    c: &C,
    now: Timestamp,
    limit: usize,
    lease: Duration,
) -> Result<Vec<ClaimedEvent>, StoreError> {
    let until = (now + lease).unix_millis();
    let rows = query(
        c,
        "WITH due AS ( \
           SELECT seq, next_attempt_at AS prev_at FROM outbox_events \
            WHERE state = 'pending' AND next_attempt_at <= $1 \
            ORDER BY next_attempt_at, seq LIMIT $2 \
            FOR UPDATE SKIP LOCKED) \
         UPDATE outbox_events o SET next_attempt_at = $3, lease_token = o.lease_token + 1 \
           FROM due WHERE o.seq = due.seq \
         RETURNING o.seq, o.event_id, o.payment_id, o.project_id, o.status, o.kind, o.body, \
           o.created_at, o.destination, o.state, o.attempts, o.max_attempts, o.lease_token, \
           due.prev_at",
        &[&now.unix_millis(), &codec::limit(limit), &until],
    )
    .await?;
    let mut claimed = rows
        .iter()
        .map(|row| {
            let c = Cols::new(row);
            Ok((
                c.opt_int("prev_at")?,
                c.int("seq")?,
                ClaimedEvent {
                    event: event_from_row(row, "prev_at")?,
                    lease: LeaseToken::new(c.num("lease_token")?),
                },
            ))
        })
        .collect::<Result<Vec<_>, StoreError>>()?;
    // RETURNING has no order.
    claimed.sort_by_key(|(due, seq, _)| (*due, *seq));
    Ok(claimed.into_iter().map(|(_, _, e)| e).collect())
}

/// Records an attempt and, under the event's current lease token, the event's next step.
/// The event row is locked first (`FOR UPDATE`), so a claim and a record of one event never
/// interleave.
pub(crate) async fn record_attempt<C: GenericClient>(
    c: &C,
    event_id: EventId,
    lease: LeaseToken,
    a: &DeliveryAttempt,
    next_attempt_at: Option<Timestamp>,
) -> Result<AttemptRecorded, StoreError> {
    let id = event_id.to_string();
    let state = match (a.success, next_attempt_at) {
        (true, _) => DeliveryState::Delivered,
        (false, Some(_)) => DeliveryState::Pending,
        (false, None) => DeliveryState::Failed,
    };
    let next = if state == DeliveryState::Pending {
        next_attempt_at
    } else {
        None
    };
    let Some(row) = query_opt(
        c,
        "SELECT lease_token FROM outbox_events WHERE event_id = $1 FOR UPDATE",
        &[&id],
    )
    .await?
    else {
        return Err(StoreError::NotFound(format!("event {event_id}")));
    };
    let current: i64 = Cols::new(&row).int("lease_token")?;
    let applied = u64::try_from(current).ok() == Some(lease.get());
    let number = i32::try_from(a.attempt).map_err(|_| corrupt("attempt", a.attempt))?;
    if applied {
        execute(
            c,
            "UPDATE outbox_events SET attempts = GREATEST(attempts, $1), state = $2, \
             next_attempt_at = $3 WHERE event_id = $4",
            &[
                &number,
                &state.as_str(),
                &next.map(Timestamp::unix_millis),
                &id,
            ],
        )
        .await?;
    }
    execute(
        c,
        "INSERT INTO delivery_attempts (event_id, attempt, started_at, duration_ms, \
         http_status, error, success, response_excerpt) \
         VALUES ($1, $2, $3, $4, $5, $6, $7, $8)",
        &[
            &id,
            &number,
            &a.started_at.unix_millis(),
            &codec::uint(a.duration_ms, "duration_ms")?,
            &a.http_status.map(i32::from),
            &a.error,
            &a.success,
            &a.response_excerpt,
        ],
    )
    .await?;
    Ok(if applied {
        AttemptRecorded::Applied
    } else {
        AttemptRecorded::Stale
    })
}

/// The columns of an attempt row.
const ATTEMPT_COLUMNS: &str =
    "attempt, started_at, duration_ms, http_status, error, success, response_excerpt";

fn attempt_from_row(row: &Row) -> Result<DeliveryAttempt, StoreError> {
    let c = Cols::new(row);
    Ok(DeliveryAttempt {
        attempt: c.num4("attempt")?,
        started_at: c.ts("started_at")?,
        duration_ms: c.num("duration_ms")?,
        http_status: c
            .opt_int4("http_status")?
            .map(|n| u16::try_from(n).map_err(|_| corrupt("http_status", n)))
            .transpose()?,
        error: c.opt_text("error")?,
        success: c.flag("success")?,
        response_excerpt: c.opt_text("response_excerpt")?,
    })
}

/// A payment's events in queueing order, each with its attempts in order.
pub(crate) async fn for_payment<C: GenericClient>(
    c: &C,
    payment: PaymentId,
) -> Result<Vec<EventRecord>, StoreError> {
    let pid = payment.to_string();
    let mut records: Vec<EventRecord> = query(
        c,
        "SELECT seq, event_id, payment_id, project_id, status, kind, body, created_at, \
         destination, state, attempts, max_attempts, next_attempt_at \
         FROM outbox_events WHERE payment_id = $1 ORDER BY seq",
        &[&pid],
    )
    .await?
    .iter()
    .map(|row| {
        Ok(EventRecord {
            outbox: event_from_row(row, "next_attempt_at")?,
            attempts: Vec::new(),
        })
    })
    .collect::<Result<_, StoreError>>()?;
    let rows = query(
        c,
        "SELECT a.event_id, a.attempt, a.started_at, a.duration_ms, a.http_status, a.error, \
         a.success, a.response_excerpt FROM delivery_attempts a JOIN outbox_events e ON e.event_id = a.event_id \
         WHERE e.payment_id = $1 ORDER BY a.seq",
        &[&pid],
    )
    .await?;
    for row in &rows {
        let event_id: EventId = Cols::new(row).parsed("event_id")?;
        let attempt = attempt_from_row(row)?;
        let record = records
            .iter_mut()
            .find(|r| r.outbox.event.event_id == event_id)
            .ok_or_else(|| corrupt("attempt of an unknown event", event_id))?;
        record.attempts.push(attempt);
    }
    Ok(records)
}

/// The number of pending events (through the partial index).
pub(crate) async fn pending<C: GenericClient>(c: &C) -> Result<u64, StoreError> {
    let row = query_opt(
        c,
        "SELECT count(*) AS n FROM outbox_events WHERE state = 'pending'",
        &[],
    )
    .await?;
    match row {
        Some(row) => Cols::new(&row).num("n"),
        None => Ok(0),
    }
}

/// When the oldest pending event was queued, through the partial `created_at` index.
pub(crate) async fn oldest_pending<C: GenericClient>(
    c: &C,
) -> Result<Option<Timestamp>, StoreError> {
    let row = query_opt(
        c,
        "SELECT created_at FROM outbox_events WHERE state = 'pending' \
         ORDER BY created_at LIMIT 1",
        &[],
    )
    .await?;
    row.map(|r| Cols::new(&r).ts("created_at")).transpose()
}

/// The columns of an event row.
const EVENT_COLUMNS: &str = "seq, event_id, payment_id, project_id, status, kind, body, \
    created_at, destination, state, attempts, max_attempts, next_attempt_at";

/// Unanswered failed events read per statement while a host filter (compared here, on the
/// parsed URL: exact, not a text prefix) leaves some out.
const FAILED_PAGE: usize = 500;

/// The unanswered failed events matching `filter`, in queueing order, through the partial
/// index of unanswered failures, each with its last attempt.
pub(crate) async fn failed<C: GenericClient>(
    c: &C,
    filter: &FailedEventFilter,
    limit: usize,
) -> Result<Vec<FailedEvent>, StoreError> {
    let sql = format!(
        "SELECT {EVENT_COLUMNS} FROM outbox_events \
         WHERE state = 'failed' AND resent_by IS NULL AND seq > $1 \
         AND ($2::TEXT IS NULL OR project_id = $2) \
         AND ($3::BIGINT IS NULL OR created_at >= $3) \
         AND ($4::BIGINT IS NULL OR created_at < $4) \
         ORDER BY seq LIMIT $5"
    );
    let project = filter.project.map(|p| p.to_string());
    let since = filter.since.map(Timestamp::unix_millis);
    let until = filter.until.map(Timestamp::unix_millis);
    let page = if filter.host.is_some() {
        FAILED_PAGE
    } else {
        limit
    };
    let mut found = Vec::new();
    let mut after: i64 = 0;
    while found.len() < limit {
        let rows = query(
            c,
            &sql,
            &[&after, &project, &since, &until, &codec::limit(page)],
        )
        .await?;
        for row in &rows {
            after = Cols::new(row).int("seq")?;
            let event = event_from_row(row, "next_attempt_at")?;
            if found.len() < limit && filter.matches(&event) {
                found.push(FailedEvent {
                    outbox: event,
                    last_attempt: None,
                });
            }
        }
        if rows.len() < page || page == 0 {
            break;
        }
    }
    let last_sql = format!(
        "SELECT {ATTEMPT_COLUMNS} FROM delivery_attempts WHERE event_id = $1 \
         ORDER BY seq DESC LIMIT 1"
    );
    for f in &mut found {
        let id = f.outbox.event.event_id.to_string();
        if let Some(row) = query_opt(c, &last_sql, &[&id]).await? {
            f.last_attempt = Some(attempt_from_row(&row)?);
        }
    }
    Ok(found)
}

/// The number of unanswered failed events (through their partial index).
pub(crate) async fn failed_count<C: GenericClient>(c: &C) -> Result<u64, StoreError> {
    let row = query_opt(
        c,
        "SELECT count(*) AS n FROM outbox_events WHERE state = 'failed' AND resent_by IS NULL",
        &[],
    )
    .await?;
    match row {
        Some(row) => Cols::new(&row).num("n"),
        None => Ok(0),
    }
}

/// Marks the unanswered failed events of `payment` as answered by `resend`; their ids. At
/// READ COMMITTED a concurrent resend of the same failures waits on their row locks and then
/// finds them answered (the condition is checked again on the committed row), so each
/// failure is answered once.
pub(crate) async fn mark_resent<C: GenericClient>(
    c: &C,
    payment: PaymentId,
    resend: EventId,
) -> Result<Vec<EventId>, StoreError> {
    let rows = query(
        c,
        "UPDATE outbox_events SET resent_by = $1 \
         WHERE payment_id = $2 AND state = 'failed' AND resent_by IS NULL \
         RETURNING seq, event_id",
        &[&resend.to_string(), &payment.to_string()],
    )
    .await?;
    let mut marked = rows
        .iter()
        .map(|row| {
            let c = Cols::new(row);
            Ok((c.int("seq")?, c.parsed::<EventId>("event_id")?))
        })
        .collect::<Result<Vec<_>, StoreError>>()?;
    // RETURNING has no order.
    marked.sort_by_key(|(seq, _)| *seq);
    Ok(marked.into_iter().map(|(_, id)| id).collect())
}

/// Deletes at most `limit` finished events queued before `before` and their attempts, the
/// oldest first, through the partial index of finished events, in one statement. Rows another
/// purge holds are skipped (`SKIP LOCKED`): purges on several nodes delete disjoint batches.
pub(crate) async fn purge_finished<C: GenericClient>(
    c: &C,
    before: Timestamp,
    limit: usize,
) -> Result<u64, StoreError> {
    let row = query_opt(
        c,
        "WITH batch AS ( \
           SELECT seq, event_id FROM outbox_events \
            WHERE state <> 'pending' AND created_at < $1 \
            ORDER BY created_at, seq LIMIT $2 \
            FOR UPDATE SKIP LOCKED), \
         attempts AS ( \
           DELETE FROM delivery_attempts a USING batch WHERE a.event_id = batch.event_id), \
         events AS ( \
           DELETE FROM outbox_events o USING batch WHERE o.seq = batch.seq RETURNING 1) \
         SELECT count(*) AS n FROM events",
        &[&before.unix_millis(), &codec::limit(limit)],
    )
    .await?;
    match row {
        Some(row) => Cols::new(&row).num("n"),
        None => Ok(0),
    }
}

/// A page of a project's events, newest first by `(created_at, event_id)`, with their
/// attempts (the cabinet's list).
pub(crate) async fn find<C: GenericClient>(
    c: &C,
    q: &payments_core::cabinet::EventQuery,
) -> Result<Vec<EventRecord>, StoreError> {
    let w = crate::cabinet::event_conditions(q);
    let sql = format!("SELECT {EVENT_COLUMNS} FROM outbox_events WHERE {}", w.sql);
    let mut records: Vec<EventRecord> = query(c, &sql, &w.params())
        .await?
        .iter()
        .map(|row| {
            Ok(EventRecord {
                outbox: event_from_row(row, "next_attempt_at")?,
                attempts: Vec::new(),
            })
        })
        .collect::<Result<_, StoreError>>()?;
    if records.is_empty() {
        return Ok(records);
    }
    let ids: Vec<String> = records
        .iter()
        .map(|r| r.outbox.event.event_id.to_string())
        .collect();
    let rows = query(
        c,
        &format!(
            "SELECT event_id, {ATTEMPT_COLUMNS} FROM delivery_attempts \
             WHERE event_id = ANY($1) ORDER BY seq"
        ),
        &[&ids],
    )
    .await?;
    for row in &rows {
        let event_id: EventId = Cols::new(row).parsed("event_id")?;
        let attempt = attempt_from_row(row)?;
        let record = records
            .iter_mut()
            .find(|r| r.outbox.event.event_id == event_id)
            .ok_or_else(|| corrupt("attempt of an unknown event", event_id))?;
        record.attempts.push(attempt);
    }
    Ok(records)
}
