//! The request log on PostgreSQL: the shared statements of
//! `payments_store_sql::request_log`; a batch is one transaction.

use deadpool_postgres::GenericClient;
use payments_core::request_log::{RequestLogEntry, RequestLogQuery};
use payments_core::store::{Purged, StoreError};
use payments_core::Timestamp;
use payments_store_sql::request_log as rl;

use crate::codec::{self, decode, execute, params, query, refs, sql};

/// Appends `entries` and trims each project among them to its newest `keep`. Call inside a
/// transaction.
pub(crate) async fn append<C: GenericClient>(
    c: &C,
    entries: &[RequestLogEntry],
    keep: usize,
) -> Result<(), StoreError> {
    let mut projects = Vec::new();
    for e in entries {
        let values = params(rl::insert_values(e)?);
        execute(c, sql(&rl::INSERT), &refs(&values)).await?;
        if !projects.contains(&e.project_id) {
            projects.push(e.project_id);
        }
    }
    for p in projects {
        let values = params(rl::trim_values(p, keep));
        execute(c, sql(&rl::TRIM), &refs(&values)).await?;
    }
    Ok(())
}

/// A page of a project's requests.
pub(crate) async fn find<C: GenericClient>(
    c: &C,
    q: &RequestLogQuery,
) -> Result<Vec<RequestLogEntry>, StoreError> {
    let (text, values) = rl::page(q, codec::D);
    query(c, &text, &refs(&params(values)))
        .await?
        .iter()
        .map(decode)
        .collect()
}

/// Deletes at most `limit` requests older than `before`.
pub(crate) async fn purge<C: GenericClient>(
    c: &C,
    before: Timestamp,
    limit: usize,
) -> Result<Purged, StoreError> {
    let n = execute(
        c,
        sql(&rl::PURGE),
        &[&before.unix_millis(), &codec::limit(limit)],
    )
    .await?;
    Ok(Purged::of_batch(n, limit))
}
