//! Merchants, projects, credentials and the audit trail's writes inside transactions as SQL. The statements and
//! row conversions are the shared ones ([`payments_store_sql::statements`]); this file runs
//! them on a rusqlite connection.

use payments_core::history::StatusChange;
use payments_core::ids::{KeyId, MerchantId, ProjectId, TokenId};
use payments_core::project::{AuditRecord, KeyRecord, Merchant, Project, TokenRecord};
use payments_core::store::{AuthLookup, StoreError};
use payments_core::Timestamp;
use payments_store_sql::statements as st;
use rusqlite::{params, Connection};

use crate::codec::{self, execute, execute_raw, query, record, record_params, records};
use crate::error::{db, duplicate};

// --- merchants and projects, as the authentication lookup reads them (the port's methods are
// in payments_store_sql::port) ----------------------------------------------------------------

pub(crate) fn merchant(conn: &Connection, id: MerchantId) -> Result<Option<Merchant>, StoreError> {
    record(conn, &st::MERCHANT, [id.to_string()])
}

pub(crate) fn project(conn: &Connection, id: ProjectId) -> Result<Option<Project>, StoreError> {
    record(conn, &st::PROJECT, [id.to_string()])
}

// --- tokens and keys -------------------------------------------------------------------------

/// Stores a token; a taken id or hash is `Duplicate`.
pub(crate) fn insert_token(conn: &Connection, t: &TokenRecord) -> Result<(), StoreError> {
    execute_raw(conn, &st::TOKEN_INSERT, record_params(t)?)
        .map_err(|e| duplicate(e, || "token".into()))?;
    Ok(())
}

pub(crate) fn token_by_hash(
    conn: &Connection,
    hash: &[u8; 32],
) -> Result<Option<TokenRecord>, StoreError> {
    record(conn, &st::TOKEN_BY_HASH, [&hash[..]])
}

pub(crate) fn tokens(
    conn: &Connection,
    project: ProjectId,
) -> Result<Vec<TokenRecord>, StoreError> {
    records(conn, &st::TOKENS, [project.to_string()])
}

/// Revokes a token of `project`, keeping the first revocation time.
pub(crate) fn revoke_token(
    conn: &Connection,
    project: ProjectId,
    id: TokenId,
    at: Timestamp,
) -> Result<bool, StoreError> {
    let n = execute(
        conn,
        &st::TOKEN_REVOKE,
        params![at.unix_millis(), id.to_string(), project.to_string()],
    )?;
    Ok(n > 0)
}

/// Registers a key; the primary key (project, keyid) decides duplicates.
pub(crate) fn insert_key(conn: &Connection, k: &KeyRecord) -> Result<(), StoreError> {
    execute_raw(conn, &st::KEY_INSERT, record_params(k)?)
        .map_err(|e| duplicate(e, || format!("key {}", k.keyid)))?;
    Ok(())
}

/// Runs `reads` in one read transaction: on a read-only connection it only pins one snapshot
/// of the database for all of them.
pub(crate) fn snapshot<R>(
    conn: &Connection,
    reads: impl FnOnce() -> Result<R, StoreError>,
) -> Result<R, StoreError> {
    conn.prepare_cached("BEGIN")
        .and_then(|mut s| s.execute([]))
        .map_err(db)?;
    let result = reads();
    conn.prepare_cached("COMMIT")
        .and_then(|mut s| s.execute([]))
        .map_err(db)?;
    result
}

/// The directory's version (migration 7): moved by triggers with every change to merchants,
/// projects, tokens or signing keys.
pub(crate) fn directory_version(conn: &Connection) -> Result<i64, StoreError> {
    conn.prepare_cached("SELECT version FROM directory_version WHERE id = 1")
        .map_err(db)?
        .query_row([], |r| r.get(0))
        .map_err(db)
}

/// The token, its project and merchant, and the key: call inside [`snapshot`].
pub(crate) fn auth_lookup(
    conn: &Connection,
    hash: &[u8; 32],
    keyid: Option<&KeyId>,
) -> Result<AuthLookup, StoreError> {
    let Some(token) = token_by_hash(conn, hash)? else {
        return Ok(AuthLookup::default());
    };
    let project = project(conn, token.project_id)?;
    let merchant = match &project {
        Some(p) => merchant(conn, p.merchant_id)?,
        None => None,
    };
    let key = match keyid {
        Some(k) => key(conn, token.project_id, k)?,
        None => None,
    };
    Ok(AuthLookup {
        token: Some(token),
        project,
        merchant,
        key,
    })
}

pub(crate) fn key(
    conn: &Connection,
    project: ProjectId,
    keyid: &KeyId,
) -> Result<Option<KeyRecord>, StoreError> {
    record(
        conn,
        &st::KEY,
        [project.to_string(), keyid.as_str().to_string()],
    )
}

pub(crate) fn keys(conn: &Connection, project: ProjectId) -> Result<Vec<KeyRecord>, StoreError> {
    records(conn, &st::KEYS, [project.to_string()])
}

/// The projects holding an unrevoked key with this id.
pub(crate) fn find_active_key_projects(
    conn: &Connection,
    keyid: &KeyId,
) -> Result<Vec<ProjectId>, StoreError> {
    query(
        conn,
        codec::sql(&st::ACTIVE_KEY_PROJECTS),
        [keyid.as_str()],
        |c| c.parsed("project_id"),
    )
}

pub(crate) fn revoke_key(
    conn: &Connection,
    project: ProjectId,
    keyid: &KeyId,
    at: Timestamp,
) -> Result<bool, StoreError> {
    let n = execute(
        conn,
        &st::KEY_REVOKE,
        params![at.unix_millis(), project.to_string(), keyid.as_str()],
    )?;
    Ok(n > 0)
}

// --- audit (the rest of the audit trail, the settings and the operator tokens are in
// payments_store_sql::port) -------------------------------------------------------------------

/// Appends an audit record (also inside [`crate::payments::commit_change`]).
pub(crate) fn insert_audit(conn: &Connection, a: &AuditRecord) -> Result<(), StoreError> {
    execute(conn, &st::AUDIT_INSERT, record_params(a)?)?;
    Ok(())
}

/// Appends an entry of a payment's status history (inside [`crate::payments::commit_change`]).
pub(crate) fn insert_status_change(conn: &Connection, c: &StatusChange) -> Result<(), StoreError> {
    execute(conn, st::history_insert(), record_params(c)?)?;
    Ok(())
}

/// Deletes at most `limit` of the oldest audit records written before `before`.
pub(crate) fn purge_audit(
    conn: &Connection,
    before: Timestamp,
    limit: usize,
) -> Result<u64, StoreError> {
    let n = execute(
        conn,
        &st::AUDIT_PURGE,
        params![before.unix_millis(), codec::limit(limit)],
    )?;
    Ok(n as u64)
}
