//! The callback outbox as SQL: events with their frozen bodies, leases with fencing tokens,
//! and attempts.

use std::time::Duration;

use deadpool_postgres::GenericClient;
use payments_core::event::{
    DeliveryAttempt, EventRecord, FailedEvent, FailedEventFilter, OutboxEvent,
};
use payments_core::ids::{EventId, PaymentId, ProjectId};
use payments_core::store::{AttemptRecorded, ClaimedEvent, LeaseToken, StoreError};
use payments_core::Timestamp;
use payments_store_sql::listing;
use payments_store_sql::record::{attempt_values, event_from};
use payments_store_sql::sql::list;
use payments_store_sql::statements as st;
use tokio_postgres::Row;

use crate::codec::{
    self, decode, execute, params, query, query_opt, read, refs, sql, write_record, Cols, PgRow,
    Record,
};
use crate::error::{corrupt, db, unique_violation};

/// Inserts an outbox row; a reused event id is `Duplicate`.
pub(crate) async fn insert<C: GenericClient>(c: &C, e: &OutboxEvent) -> Result<(), StoreError> {
    match write_record(c, &st::EVENT_INSERT, e).await? {
        Ok(_) => Ok(()),
        Err(err) if unique_violation(&err).is_some() => {
            Err(StoreError::Duplicate(format!("event {}", e.event.event_id)))
        }
        Err(err) => Err(db(err)),
    }
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
    skip: &[ProjectId],
) -> Result<Vec<ClaimedEvent>, StoreError> {
    let until = (now + lease).unix_millis();
    let skipped: Vec<String> = skip.iter().map(ToString::to_string).collect();
    let rows = query(
        c,
        "WITH due AS ( \
           SELECT seq, next_attempt_at AS prev_at FROM outbox_events \
            WHERE state = 'pending' AND next_attempt_at <= $1 \
              AND NOT (project_id = ANY($4::text[])) \
            ORDER BY next_attempt_at, seq LIMIT $2 \
            FOR UPDATE SKIP LOCKED) \
         UPDATE outbox_events o SET next_attempt_at = $3, lease_token = o.lease_token + 1 \
           FROM due WHERE o.seq = due.seq \
         RETURNING o.seq, o.event_id, o.payment_id, o.project_id, o.status, o.kind, o.body, \
           o.created_at, o.destination, o.state, o.attempts, o.max_attempts, o.lease_token, \
           due.prev_at",
        &[&now.unix_millis(), &codec::limit(limit), &until, &skipped],
    )
    .await?;
    let mut claimed = rows
        .iter()
        .map(|row| {
            read(row, |c| {
                Ok((
                    c.opt_int("prev_at")?,
                    c.int("seq")?,
                    ClaimedEvent {
                        event: event_from(c, "prev_at")?,
                        lease: LeaseToken::new(c.num("lease_token")?),
                    },
                ))
            })
        })
        .collect::<Result<Vec<_>, StoreError>>()?;
    // RETURNING has no order.
    claimed.sort_by_key(|(due, seq, _)| (*due, *seq));
    Ok(claimed.into_iter().map(|(_, _, e)| e).collect())
}

/// Records an attempt and, under the event's current lease token, the event's next step
/// ([`st::attempt_step`]). The event row is locked first (`FOR UPDATE`), so a claim and a record
/// of one event never interleave.
pub(crate) async fn record_attempt<C: GenericClient>(
    c: &C,
    event_id: EventId,
    lease: LeaseToken,
    a: &DeliveryAttempt,
    next_attempt_at: Option<Timestamp>,
) -> Result<AttemptRecorded, StoreError> {
    let id = event_id.to_string();
    let Some(row) = query_opt(c, sql(&st::EVENT_LEASE), &[&id]).await? else {
        return Err(StoreError::NotFound(format!("event {event_id}")));
    };
    let current: i64 = read(&row, |c| c.int("lease_token"))?;
    let (recorded, step) = st::attempt_step(event_id, lease, current, a, next_attempt_at);
    if let Some(values) = step {
        let values = params(values);
        execute(c, sql(&st::EVENT_STEP), &refs(&values)).await?;
    }
    let values = params(attempt_values(event_id, a)?);
    execute(c, sql(&st::ATTEMPT_INSERT), &refs(&values)).await?;
    Ok(recorded)
}

/// A payment's events in queueing order, each with its attempts in order.
pub(crate) async fn for_payment<C: GenericClient>(
    c: &C,
    payment: PaymentId,
) -> Result<Vec<EventRecord>, StoreError> {
    let pid = payment.to_string();
    let mut records: Vec<EventRecord> = query(c, sql(&st::EVENTS_OF_PAYMENT), &[&pid])
        .await?
        .iter()
        .map(event_record)
        .collect::<Result<_, StoreError>>()?;
    let rows = query(
        c,
        &format!(
            "SELECT a.event_id, {} FROM delivery_attempts a \
             JOIN outbox_events e ON e.event_id = a.event_id \
             WHERE e.payment_id = $1 ORDER BY a.seq",
            payments_store_sql::sql::aliased("a", DeliveryAttempt::COLUMNS)
        ),
        &[&pid],
    )
    .await?;
    attach_attempts(&mut records, &rows, "a_")?;
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
        Some(row) => read(&row, |c| c.num("n")),
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
    row.map(|r| read(&r, |c| c.ts("created_at"))).transpose()
}

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
        "SELECT seq, {} FROM outbox_events \
         WHERE state = 'failed' AND resent_by IS NULL AND seq > $1 \
         AND ($2::TEXT IS NULL OR project_id = $2) \
         AND ($3::BIGINT IS NULL OR created_at >= $3) \
         AND ($4::BIGINT IS NULL OR created_at < $4) \
         ORDER BY seq LIMIT $5",
        list(OutboxEvent::COLUMNS)
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
            after = read(row, |c| c.int("seq"))?;
            let event: OutboxEvent = decode(row)?;
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
    for f in &mut found {
        let id = f.outbox.event.event_id.to_string();
        f.last_attempt = codec::record(c, &st::LAST_ATTEMPT, &[&id]).await?;
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
        Some(row) => read(&row, |c| c.num("n")),
        None => Ok(0),
    }
}

/// Marks the unanswered failed events of `payment` as answered by `resend`; their ids. At
/// READ COMMITTED a concurrent resend of the same failures waits on their row locks and then
/// finds them answered (the condition is checked again on the committed row), so each
/// failure is answered once.
pub(crate) async fn update_resent<C: GenericClient>(
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
            read(row, |c| {
                Ok((c.int("seq")?, c.parsed::<EventId>("event_id")?))
            })
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
        Some(row) => read(&row, |c| c.num("n")),
        None => Ok(0),
    }
}

/// A page of a project's events, newest first by `(created_at, event_id)`, with their
/// attempts (the cabinet's list).
pub(crate) async fn find<C: GenericClient>(
    c: &C,
    q: &payments_core::store::EventQuery,
) -> Result<Vec<EventRecord>, StoreError> {
    let (sql, values) = listing::event_page(q, codec::D);
    let values = params(values);
    let mut records: Vec<EventRecord> = query(c, &sql, &refs(&values))
        .await?
        .iter()
        .map(event_record)
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
            "SELECT event_id, {} FROM delivery_attempts WHERE event_id = ANY($1) ORDER BY seq",
            list(DeliveryAttempt::COLUMNS)
        ),
        &[&ids],
    )
    .await?;
    attach_attempts(&mut records, &rows, "")?;
    Ok(records)
}

/// An event row as a record without its attempts.
fn event_record(row: &Row) -> Result<EventRecord, StoreError> {
    Ok(EventRecord {
        outbox: decode(row)?,
        attempts: Vec::new(),
    })
}

/// Adds attempt rows (their `event_id`, then the attempt's columns prefixed `prefix`) to their
/// events, in row order.
fn attach_attempts(
    records: &mut [EventRecord],
    rows: &[Row],
    prefix: &'static str,
) -> Result<(), StoreError> {
    for row in rows {
        let event_id: EventId = read(row, |c| c.parsed("event_id"))?;
        let pg = PgRow(row);
        let attempt = DeliveryAttempt::from_row(&Cols::prefixed(&pg, prefix))?;
        let record = records
            .iter_mut()
            .find(|r| r.outbox.event.event_id == event_id)
            .ok_or_else(|| corrupt("attempt of an unknown event", event_id))?;
        record.attempts.push(attempt);
    }
    Ok(())
}
