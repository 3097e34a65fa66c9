//! An appeal's change on PostgreSQL, a step of the caller's transaction: the shared statement
//! of `payments_store_sql::appeals` (the reads and the insert are in `payments_store_sql::port`).

use deadpool_postgres::GenericClient;
use payments_core::appeal::Appeal;
use payments_core::store::StoreError;
use payments_store_sql::appeals as ap;

use crate::codec::{execute, params, refs, sql};

/// Writes `appeal` over the stored one at `expected_version` ([`ap::UPDATE`]); another version,
/// an unknown appeal or a change to a column fixed at creation is [`StoreError::Conflict`].
pub(crate) async fn update<C: GenericClient>(
    c: &C,
    appeal: &Appeal,
    expected_version: u64,
) -> Result<(), StoreError> {
    let values = params(ap::update_values(appeal, expected_version)?);
    match execute(c, sql(&ap::UPDATE), &refs(&values)).await? {
        0 => Err(StoreError::Conflict),
        _ => Ok(()),
    }
}
