//! Credentials and the steps inside transactions (an audit record, purges, turns of background
//! work) as SQL. The statements and row conversions are the shared ones
//! ([`payments_store_sql::statements`]); this file runs them on a PostgreSQL connection and
//! adds what only PostgreSQL does: the one-statement authentication join and turns between
//! nodes. The settings, operator tokens, audit pages, merchants, projects and callback secrets
//! are in `payments_store_sql::port`.

use std::sync::LazyLock;

use deadpool_postgres::GenericClient;
use payments_core::history::StatusChange;
use payments_core::ids::{KeyId, ProjectId, TokenId};
use payments_core::project::{AuditRecord, KeyRecord, Merchant, Project, TokenRecord};
use payments_core::store::{AuthLookup, StoreError};
use payments_core::Timestamp;
use payments_store_sql::sql::aliased;
use payments_store_sql::statements as st;

use crate::codec::{
    self, execute, query, query_opt, read, record, records, sql, write_record, Cols, PgRow, Record,
};
use crate::error::{db, duplicate};

// --- tokens and keys -------------------------------------------------------------------------

/// Stores a token; a taken id or hash is `Duplicate`.
pub(crate) async fn insert_token<C: GenericClient>(
    c: &C,
    t: &TokenRecord,
) -> Result<(), StoreError> {
    duplicate(write_record(c, &st::TOKEN_INSERT, t).await?, || {
        "token".into()
    })?;
    Ok(())
}

pub(crate) async fn token_by_hash<C: GenericClient>(
    c: &C,
    hash: &[u8; 32],
) -> Result<Option<TokenRecord>, StoreError> {
    record(c, &st::TOKEN_BY_HASH, &[&&hash[..]]).await
}

pub(crate) async fn tokens<C: GenericClient>(
    c: &C,
    project: ProjectId,
) -> Result<Vec<TokenRecord>, StoreError> {
    records(c, &st::TOKENS, &[&project.to_string()]).await
}

/// Revokes a token of `project`, keeping the first revocation time.
pub(crate) async fn revoke_token<C: GenericClient>(
    c: &C,
    project: ProjectId,
    id: TokenId,
    at: Timestamp,
) -> Result<bool, StoreError> {
    let n = execute(
        c,
        sql(&st::TOKEN_REVOKE),
        &[&at.unix_millis(), &id.to_string(), &project.to_string()],
    )
    .await?;
    Ok(n > 0)
}

/// Registers a key; the primary key (project, keyid) decides duplicates.
pub(crate) async fn insert_key<C: GenericClient>(c: &C, k: &KeyRecord) -> Result<(), StoreError> {
    duplicate(write_record(c, &st::KEY_INSERT, k).await?, || {
        format!("key {}", k.keyid)
    })?;
    Ok(())
}

/// The one query of [`auth_lookup`]: the token by hash, joined with its project, the project's
/// merchant and the project's key with the given id, each table's columns aliased with a
/// prefix (one statement, one snapshot, one round trip).
static AUTH_SQL: LazyLock<String> = LazyLock::new(|| {
    format!(
        "SELECT {}, {}, {}, {} FROM tokens t \
         LEFT JOIN projects p ON p.id = t.project_id \
         LEFT JOIN merchants m ON m.id = p.merchant_id \
         LEFT JOIN signing_keys k ON k.project_id = t.project_id AND k.keyid = $2 \
         WHERE t.hash = $1",
        aliased("t", TokenRecord::COLUMNS),
        aliased("p", Project::COLUMNS),
        aliased("m", Merchant::COLUMNS),
        aliased("k", KeyRecord::COLUMNS),
    )
});

/// The token, its project and merchant, and the key, in one statement.
pub(crate) async fn auth_lookup<C: GenericClient>(
    c: &C,
    hash: &[u8; 32],
    keyid: Option<&KeyId>,
) -> Result<AuthLookup, StoreError> {
    let Some(row) = query_opt(c, &AUTH_SQL, &[&&hash[..], &keyid.map(KeyId::as_str)]).await? else {
        return Ok(AuthLookup::default());
    };
    // A joined table's part, if its row was found (its first column is never NULL).
    fn part<T: Record>(
        row: &tokio_postgres::Row,
        prefix: &'static str,
    ) -> Result<Option<T>, StoreError> {
        let row = PgRow(row);
        let c = Cols::prefixed(&row, prefix);
        if c.opt_text(T::COLUMNS[0])?.is_none() {
            return Ok(None);
        }
        T::from_row(&c).map(Some)
    }
    Ok(AuthLookup {
        token: part(&row, "t_")?,
        project: part(&row, "p_")?,
        merchant: part(&row, "m_")?,
        key: part(&row, "k_")?,
    })
}

pub(crate) async fn key<C: GenericClient>(
    c: &C,
    project: ProjectId,
    keyid: &KeyId,
) -> Result<Option<KeyRecord>, StoreError> {
    record(c, &st::KEY, &[&project.to_string(), &keyid.as_str()]).await
}

pub(crate) async fn keys<C: GenericClient>(
    c: &C,
    project: ProjectId,
) -> Result<Vec<KeyRecord>, StoreError> {
    records(c, &st::KEYS, &[&project.to_string()]).await
}

/// The projects holding an unrevoked key with this id.
pub(crate) async fn find_active_key_projects<C: GenericClient>(
    c: &C,
    keyid: &KeyId,
) -> Result<Vec<ProjectId>, StoreError> {
    query(c, sql(&st::ACTIVE_KEY_PROJECTS), &[&keyid.as_str()])
        .await?
        .iter()
        .map(|row| read(row, |c| c.parsed("project_id")))
        .collect()
}

pub(crate) async fn revoke_key<C: GenericClient>(
    c: &C,
    project: ProjectId,
    keyid: &KeyId,
    at: Timestamp,
) -> Result<bool, StoreError> {
    let n = execute(
        c,
        sql(&st::KEY_REVOKE),
        &[&at.unix_millis(), &project.to_string(), &keyid.as_str()],
    )
    .await?;
    Ok(n > 0)
}

// --- audit inside transactions, purges and turns (the rest of the audit trail, the settings
// and the operator tokens are in payments_store_sql::port) ----------------------------------

/// Appends an audit record (also inside [`crate::payments::commit_change`]).
pub(crate) async fn insert_audit<C: GenericClient>(
    c: &C,
    a: &AuditRecord,
) -> Result<(), StoreError> {
    write_record(c, &st::AUDIT_INSERT, a).await?.map_err(db)?;
    Ok(())
}

/// Appends an entry of a payment's status history (inside [`crate::payments::commit_change`]).
pub(crate) async fn insert_status_change<C: GenericClient>(
    c: &C,
    entry: &StatusChange,
) -> Result<(), StoreError> {
    write_record(c, st::history_insert(), entry)
        .await?
        .map_err(db)?;
    Ok(())
}

/// Takes `task`'s turn until `until` if the current turn ended at `now`: the primary key and
/// the conditional update decide between nodes racing for it.
pub(crate) async fn take_turn<C: GenericClient>(
    c: &C,
    task: &str,
    now: Timestamp,
    until: Timestamp,
) -> Result<bool, StoreError> {
    let n = execute(
        c,
        "INSERT INTO task_turns (task, until) VALUES ($1, $2) \
         ON CONFLICT (task) DO UPDATE SET until = EXCLUDED.until \
         WHERE task_turns.until <= $3",
        &[&task, &until.unix_millis(), &now.unix_millis()],
    )
    .await?;
    Ok(n == 1)
}

/// Deletes at most `limit` of the oldest audit records written before `before`, in one
/// statement (rows another purge holds are skipped).
pub(crate) async fn purge_audit<C: GenericClient>(
    c: &C,
    before: Timestamp,
    limit: usize,
) -> Result<u64, StoreError> {
    execute(
        c,
        sql(&st::AUDIT_PURGE),
        &[&before.unix_millis(), &codec::limit(limit)],
    )
    .await
}
