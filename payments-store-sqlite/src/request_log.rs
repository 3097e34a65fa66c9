//! The request log on SQLite: the shared statements of `payments_store_sql::request_log`, a
//! batch written as one job of the writer (one transaction), pages read on a reader.

use payments_core::request_log::{RequestLogEntry, RequestLogQuery};
use payments_core::store::{Purged, StoreError};
use payments_core::Timestamp;
use payments_store_sql::request_log as rl;
use rusqlite::Connection;

use crate::codec::{self, execute, params, query, Record, SqlValue};

/// Appends `entries` and trims each project among them to its newest `keep`.
pub(crate) fn append(
    conn: &Connection,
    entries: &[RequestLogEntry],
    keep: usize,
) -> Result<(), StoreError> {
    let mut projects = Vec::new();
    for e in entries {
        execute(conn, &rl::INSERT, params(rl::insert_values(e)?))?;
        if !projects.contains(&e.project_id) {
            projects.push(e.project_id);
        }
    }
    for p in projects {
        execute(conn, &rl::TRIM, params(rl::trim_values(p, keep)))?;
    }
    Ok(())
}

/// A page of a project's requests.
pub(crate) fn find(
    conn: &Connection,
    q: &RequestLogQuery,
) -> Result<Vec<RequestLogEntry>, StoreError> {
    let (text, values) = rl::page(q, codec::D);
    query(conn, &text, params(values), RequestLogEntry::from_row)
}

/// Deletes at most `limit` requests older than `before`.
pub(crate) fn purge(
    conn: &Connection,
    before: Timestamp,
    limit: usize,
) -> Result<Purged, StoreError> {
    let n = execute(
        conn,
        &rl::PURGE,
        params([SqlValue::ts(before), SqlValue::Int(codec::limit(limit))]),
    )?;
    Ok(Purged::of_batch(n as u64, limit))
}
