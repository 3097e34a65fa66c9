//! An appeal's change on SQLite, a step of the writer's transaction: the shared statement of
//! `payments_store_sql::appeals` (the reads and the insert are in `payments_store_sql::port`).

use payments_core::appeal::Appeal;
use payments_core::store::StoreError;
use payments_store_sql::appeals as ap;
use rusqlite::Connection;

use crate::codec::{execute, params};

/// Writes `appeal` over the stored one at `expected_version` ([`ap::UPDATE`]); another version,
/// an unknown appeal or a change to a column fixed at creation is [`StoreError::Conflict`].
pub(crate) fn update(
    conn: &Connection,
    appeal: &Appeal,
    expected_version: u64,
) -> Result<(), StoreError> {
    let values = ap::update_values(appeal, expected_version)?;
    match execute(conn, &ap::UPDATE, params(values))? {
        0 => Err(StoreError::Conflict),
        _ => Ok(()),
    }
}
