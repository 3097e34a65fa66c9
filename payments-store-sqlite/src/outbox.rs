//! The callback outbox as SQL: events with their frozen bodies, leases and attempts.

use std::time::Duration;

use payments_core::event::{
    DeliveryAttempt, EventRecord, FailedEvent, FailedEventFilter, OutboxEvent,
};
use payments_core::ids::{EventId, PaymentId, ProjectId};
use payments_core::store::EventQuery;
use payments_core::store::{AttemptRecorded, ClaimedEvent, LeaseToken, StoreError};
use payments_core::Timestamp;
use payments_store_sql::listing;
use payments_store_sql::record::attempt_values;
use payments_store_sql::sql::list;
use payments_store_sql::statements as st;
use rusqlite::{params, Connection, OptionalExtension, Row};

use crate::codec::{self, execute, execute_raw, params, record_params, records, sql, Cols};
use crate::codec::{Record, SqliteRow};
use crate::error::{db, is_unique_violation};

/// Queues an event; a reused event id is `Duplicate`.
pub(crate) fn insert(conn: &Connection, e: &OutboxEvent) -> Result<(), StoreError> {
    match execute_raw(conn, &st::EVENT_INSERT, record_params(e)?) {
        Ok(_) => Ok(()),
        Err(err) if is_unique_violation(&err) => {
            Err(StoreError::Duplicate(format!("event {}", e.event.event_id)))
        }
        Err(err) => Err(db(err)),
    }
}

/// An event from a row holding its columns.
fn event_from_row(row: &Row<'_>) -> Result<OutboxEvent, StoreError> {
    OutboxEvent::from_row(&Cols::new(&SqliteRow::new(row)))
}

/// Claims due pending events, earliest first, except those of the projects in `skip`, moves
/// them to `now + lease` and increments their lease tokens. Runs on the one writer connection,
/// inside its transaction, so no other claim can interleave.
pub(crate) fn claim_due(
    conn: &Connection,
    now: Timestamp,
    limit: usize,
    lease: Duration,
    skip: &[ProjectId],
) -> Result<Vec<ClaimedEvent>, StoreError> {
    let mut claimed = Vec::new();
    let mut seqs = Vec::new();
    {
        // The skipped projects as a JSON array of their ids (UUIDs: nothing to escape), so
        // that one cached statement serves any number of them.
        let ids: Vec<String> = skip.iter().map(|p| format!("\"{p}\"")).collect();
        let skipped = format!("[{}]", ids.join(","));
        let mut stmt = conn
            .prepare_cached(&format!(
                "SELECT seq, lease_token, {} FROM outbox_events \
                 WHERE state = 'pending' AND next_attempt_at <= ?1 \
                 AND project_id NOT IN (SELECT value FROM json_each(?3)) \
                 ORDER BY next_attempt_at, seq LIMIT ?2",
                list(OutboxEvent::COLUMNS)
            ))
            .map_err(db)?;
        let mut rows = stmt
            .query(params![now.unix_millis(), codec::limit(limit), skipped])
            .map_err(db)?;
        while let Some(row) = rows.next().map_err(db)? {
            seqs.push(row.get::<_, i64>("seq").map_err(db)?);
            let token = Cols::new(&SqliteRow::new(row)).num::<u64>("lease_token")?;
            claimed.push(ClaimedEvent {
                event: event_from_row(row)?,
                lease: LeaseToken::new(token.saturating_add(1)),
            });
        }
    }
    let until = (now + lease).unix_millis();
    let mut lease_stmt = conn
        .prepare_cached(
            "UPDATE outbox_events SET next_attempt_at = ?1, lease_token = lease_token + 1 \
             WHERE seq = ?2",
        )
        .map_err(db)?;
    for seq in seqs {
        lease_stmt.execute(params![until, seq]).map_err(db)?;
    }
    Ok(claimed)
}

/// Records an attempt and, under the event's current lease token, the event's next step
/// ([`st::attempt_step`]).
pub(crate) fn record_attempt(
    conn: &Connection,
    event_id: EventId,
    lease: LeaseToken,
    a: &DeliveryAttempt,
    next_attempt_at: Option<Timestamp>,
) -> Result<AttemptRecorded, StoreError> {
    let current: Option<i64> = conn
        .prepare_cached(sql(&st::EVENT_LEASE))
        .map_err(db)?
        .query_row([event_id.to_string()], |r| r.get(0))
        .optional()
        .map_err(db)?;
    let Some(current) = current else {
        return Err(StoreError::NotFound(format!("event {event_id}")));
    };
    let (recorded, step) = st::attempt_step(event_id, lease, current, a, next_attempt_at);
    if let Some(values) = step {
        execute(conn, &st::EVENT_STEP, params(values))?;
    }
    execute(
        conn,
        &st::ATTEMPT_INSERT,
        params(attempt_values(event_id, a)?),
    )?;
    Ok(recorded)
}

/// A payment's events in queueing order, each with its attempts in order.
pub(crate) fn for_payment(
    conn: &Connection,
    payment: PaymentId,
) -> Result<Vec<EventRecord>, StoreError> {
    let pid = payment.to_string();
    let mut records = Vec::new();
    {
        let mut stmt = conn
            .prepare_cached(sql(&st::EVENTS_OF_PAYMENT))
            .map_err(db)?;
        let mut rows = stmt.query([&pid]).map_err(db)?;
        while let Some(row) = rows.next().map_err(db)? {
            records.push(EventRecord {
                outbox: event_from_row(row)?,
                attempts: Vec::new(),
            });
        }
    }
    with_attempts(conn, &mut records)?;
    Ok(records)
}

/// A page of a project's events, newest first by `(created_at, event_id)`, with their
/// attempts (through the `(project_id, created_at, event_id)` index).
pub(crate) fn find(conn: &Connection, q: &EventQuery) -> Result<Vec<EventRecord>, StoreError> {
    let (sql, values) = listing::event_page(q, codec::D);
    let mut records = Vec::new();
    {
        let mut stmt = conn.prepare_cached(&sql).map_err(db)?;
        let mut rows = stmt.query(params(values)).map_err(db)?;
        while let Some(row) = rows.next().map_err(db)? {
            records.push(EventRecord {
                outbox: event_from_row(row)?,
                attempts: Vec::new(),
            });
        }
    }
    with_attempts(conn, &mut records)?;
    Ok(records)
}

/// An event's attempts, in order.
fn records_of(conn: &Connection, event: EventId) -> Result<Vec<DeliveryAttempt>, StoreError> {
    records(conn, &st::ATTEMPTS, [event.to_string()])
}

/// Fills in each record's attempts, in order.
fn with_attempts(conn: &Connection, records: &mut [EventRecord]) -> Result<(), StoreError> {
    for record in records.iter_mut() {
        record.attempts = records_of(conn, record.outbox.event.event_id)?;
    }
    Ok(())
}

/// The number of pending events (through the partial index).
pub(crate) fn pending(conn: &Connection) -> Result<u64, StoreError> {
    conn.prepare_cached("SELECT count(*) FROM outbox_events WHERE state = 'pending'")
        .map_err(db)?
        .query_row([], |r| r.get::<_, i64>(0))
        .optional()
        .map_err(db)
        .map(|n| n.unwrap_or(0) as u64)
}

/// When the oldest pending event was queued, through the partial `created_at` index.
pub(crate) fn oldest_pending(conn: &Connection) -> Result<Option<Timestamp>, StoreError> {
    let millis: Option<i64> = conn
        .prepare_cached("SELECT min(created_at) FROM outbox_events WHERE state = 'pending'")
        .map_err(db)?
        .query_row([], |r| r.get(0))
        .map_err(db)?;
    Ok(millis.map(Timestamp::from_unix_millis))
}

/// The unanswered failed events matching `filter`, in queueing order, through the partial
/// index of unanswered failures. The host is compared here, on the parsed URL (exact, not a
/// text prefix); the other conditions in SQL.
pub(crate) fn failed(
    conn: &Connection,
    filter: &FailedEventFilter,
    limit: usize,
) -> Result<Vec<FailedEvent>, StoreError> {
    let mut found = Vec::new();
    {
        let mut stmt = conn
            .prepare_cached(&format!(
                "SELECT {} FROM outbox_events \
                 WHERE state = 'failed' AND resent_by IS NULL \
                 AND (?1 IS NULL OR project_id = ?1) \
                 AND (?2 IS NULL OR created_at >= ?2) AND (?3 IS NULL OR created_at < ?3) \
                 ORDER BY seq",
                list(OutboxEvent::COLUMNS)
            ))
            .map_err(db)?;
        let mut rows = stmt
            .query(params![
                filter.project.map(|p| p.to_string()),
                filter.since.map(Timestamp::unix_millis),
                filter.until.map(Timestamp::unix_millis),
            ])
            .map_err(db)?;
        while found.len() < limit {
            let Some(row) = rows.next().map_err(db)? else {
                break;
            };
            let event = event_from_row(row)?;
            if filter.matches(&event) {
                found.push(FailedEvent {
                    outbox: event,
                    last_attempt: None,
                });
            }
        }
    }
    for f in &mut found {
        f.last_attempt = records(
            conn,
            &st::LAST_ATTEMPT,
            [f.outbox.event.event_id.to_string()],
        )?
        .pop();
    }
    Ok(found)
}

/// The number of unanswered failed events (through their partial index).
pub(crate) fn failed_count(conn: &Connection) -> Result<u64, StoreError> {
    conn.prepare_cached(
        "SELECT count(*) FROM outbox_events WHERE state = 'failed' AND resent_by IS NULL",
    )
    .map_err(db)?
    .query_row([], |r| r.get::<_, i64>(0))
    .map_err(db)
    .map(|n| n.max(0) as u64)
}

/// Marks the unanswered failed events of `payment` as answered by `resend`; their ids.
pub(crate) fn update_resent(
    conn: &Connection,
    payment: PaymentId,
    resend: EventId,
) -> Result<Vec<EventId>, StoreError> {
    let mut stmt = conn
        .prepare_cached(
            "UPDATE outbox_events SET resent_by = ?1 \
             WHERE payment_id = ?2 AND state = 'failed' AND resent_by IS NULL \
             RETURNING event_id",
        )
        .map_err(db)?;
    let mut rows = stmt
        .query([resend.to_string(), payment.to_string()])
        .map_err(db)?;
    let mut ids = Vec::new();
    while let Some(row) = rows.next().map_err(db)? {
        ids.push(Cols::new(&SqliteRow::new(row)).parsed("event_id")?);
    }
    Ok(ids)
}

/// Deletes at most `limit` finished events queued before `before` and their attempts: the
/// oldest first, through the partial index of finished events. Both deletes select the same
/// events (same query, same transaction, a total order).
pub(crate) fn purge_finished(
    conn: &Connection,
    before: Timestamp,
    limit: usize,
) -> Result<u64, StoreError> {
    const BATCH: &str = "SELECT seq FROM outbox_events \
        WHERE state <> 'pending' AND created_at < ?1 ORDER BY created_at, seq LIMIT ?2";
    let args = params![before.unix_millis(), codec::limit(limit)];
    conn.prepare_cached(&format!(
        "DELETE FROM delivery_attempts WHERE event_id IN \
         (SELECT event_id FROM outbox_events WHERE seq IN ({BATCH}))"
    ))
    .map_err(db)?
    .execute(args)
    .map_err(db)?;
    let n = conn
        .prepare_cached(&format!("DELETE FROM outbox_events WHERE seq IN ({BATCH})"))
        .map_err(db)?
        .execute(args)
        .map_err(db)?;
    Ok(n as u64)
}
