//! Merchants, projects, credentials, settings and the audit trail as SQL.

use std::time::Duration;

use payments_core::ids::{KeyId, MerchantId, ProjectId, TokenId};
use payments_core::payment::Currency;
use payments_core::project::{
    AuditRecord, Contract, KeyRecord, Merchant, MethodTerms, OperatorTokenRecord, Project,
    RateLimit, SecretRecord, TokenRecord,
};
use payments_core::settlement::FeePercent;
use payments_core::store::{AuthLookup, StoreError};
use payments_core::{SecretString, Timestamp};
use rusqlite::{params, Connection, OptionalExtension, Row};
use rust_decimal::Decimal;
use serde::{Deserialize, Serialize};

use crate::codec::{self, Cols};
use crate::error::{corrupt, db, is_unique_violation};

/// Runs a query and decodes every row.
fn query<T>(
    conn: &Connection,
    sql: &str,
    params: impl rusqlite::Params,
    decode: impl Fn(&Row<'_>) -> Result<T, StoreError>,
) -> Result<Vec<T>, StoreError> {
    let mut stmt = conn.prepare_cached(sql).map_err(db)?;
    let mut rows = stmt.query(params).map_err(db)?;
    let mut out = Vec::new();
    while let Some(row) = rows.next().map_err(db)? {
        out.push(decode(row)?);
    }
    Ok(out)
}

// --- merchants -------------------------------------------------------------------------------

fn merchant_from_row(row: &Row<'_>) -> Result<Merchant, StoreError> {
    let c = Cols::new(row);
    Ok(Merchant {
        id: c.parsed("id")?,
        name: c.text("name")?,
        paused: c.flag("paused")?,
        callback_url: c.opt_url("callback_url")?,
        created_at: c.ts("created_at")?,
    })
}

pub(crate) fn put_merchant(conn: &Connection, m: &Merchant) -> Result<(), StoreError> {
    conn.prepare_cached(
        "INSERT INTO merchants (id, name, paused, callback_url, created_at) \
         VALUES (?1, ?2, ?3, ?4, ?5) ON CONFLICT (id) DO UPDATE SET name = excluded.name, \
         paused = excluded.paused, callback_url = excluded.callback_url, \
         created_at = excluded.created_at",
    )
    .map_err(db)?
    .execute(params![
        m.id.to_string(),
        m.name,
        m.paused,
        m.callback_url.as_ref().map(|u| u.as_str()),
        m.created_at.unix_millis()
    ])
    .map_err(db)?;
    Ok(())
}

pub(crate) fn merchant(conn: &Connection, id: MerchantId) -> Result<Option<Merchant>, StoreError> {
    Ok(query(
        conn,
        "SELECT * FROM merchants WHERE id = ?1",
        [id.to_string()],
        merchant_from_row,
    )?
    .pop())
}

pub(crate) fn merchants(conn: &Connection) -> Result<Vec<Merchant>, StoreError> {
    query(
        conn,
        "SELECT * FROM merchants ORDER BY id",
        [],
        merchant_from_row,
    )
}

// --- projects --------------------------------------------------------------------------------

/// The stored JSON of a contract; decimals as text.
#[derive(Serialize, Deserialize)]
struct ContractDoc {
    currencies: Vec<String>,
    methods: Vec<TermsDoc>,
}

#[derive(Serialize, Deserialize)]
struct TermsDoc {
    method: String,
    min_amount: Option<String>,
    max_amount: Option<String>,
    fee_percent: String,
}

fn contract_json(c: &Contract) -> String {
    let doc = ContractDoc {
        currencies: c
            .currencies
            .iter()
            .map(|x| x.as_str().to_string())
            .collect(),
        methods: c
            .methods
            .iter()
            .map(|t| TermsDoc {
                method: t.method.as_str().to_string(),
                min_amount: t.min_amount.map(|d| d.to_string()),
                max_amount: t.max_amount.map(|d| d.to_string()),
                fee_percent: t.fee_percent.as_decimal().to_string(),
            })
            .collect(),
    };
    serde_json::to_string(&doc).expect("a struct of strings always serialises")
}

fn parse_contract(s: &str) -> Result<Contract, StoreError> {
    let bad = |what: &str| corrupt("contract", format!("{what} in {s}"));
    let doc: ContractDoc = serde_json::from_str(s).map_err(|_| bad("invalid JSON"))?;
    let dec = |d: &str| d.parse::<Decimal>().map_err(|_| bad("a bad decimal"));
    Ok(Contract {
        currencies: doc
            .currencies
            .iter()
            .map(|c| Currency::parse(c).ok_or_else(|| bad("a bad currency")))
            .collect::<Result<_, _>>()?,
        methods: doc
            .methods
            .iter()
            .map(|t| {
                Ok(MethodTerms {
                    method: t.method.parse().map_err(|_| bad("a bad method"))?,
                    min_amount: t.min_amount.as_deref().map(dec).transpose()?,
                    max_amount: t.max_amount.as_deref().map(dec).transpose()?,
                    fee_percent: FeePercent::new(dec(&t.fee_percent)?)
                        .map_err(|_| bad("a bad fee"))?,
                })
            })
            .collect::<Result<_, StoreError>>()?,
    })
}

fn project_from_row(row: &Row<'_>) -> Result<Project, StoreError> {
    let c = Cols::new(row);
    let ip_allow_list = c.text("ip_allow_list")?;
    Ok(Project {
        id: c.parsed("id")?,
        merchant_id: c.parsed("merchant_id")?,
        name: c.text("name")?,
        active: c.flag("active")?,
        test_mode: c.flag("test_mode")?,
        lifetime: Duration::new(c.num("lifetime_secs")?, c.num("lifetime_nanos")?),
        contract: parse_contract(&c.text("contract")?)?,
        callback_url: c.opt_url("callback_url")?,
        ip_allow_list: serde_json::from_str(&ip_allow_list)
            .map_err(|_| corrupt("ip_allow_list", ip_allow_list))?,
        signature_required: c.flag("signature_required")?,
        paused: c.flag("paused")?,
        rate_limit: RateLimit {
            per_second: c.num("rate_per_second")?,
            burst: c.num("rate_burst")?,
        },
        payer_page: c.flag("payer_page")?,
        payer_language: {
            let l = c.text("payer_language")?;
            l.parse().map_err(|_| corrupt("payer_language", l))?
        },
        created_at: c.ts("created_at")?,
    })
}

/// Inserts or replaces a project; its merchant must exist.
pub(crate) fn put_project(conn: &Connection, p: &Project) -> Result<(), StoreError> {
    if merchant(conn, p.merchant_id)?.is_none() {
        return Err(StoreError::NotFound(format!("merchant {}", p.merchant_id)));
    }
    conn.prepare_cached(
        "INSERT INTO projects (id, merchant_id, name, active, test_mode, lifetime_secs, \
         lifetime_nanos, contract, callback_url, ip_allow_list, signature_required, \
         rate_per_second, rate_burst, created_at, paused, payer_page, payer_language) \
         VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, ?13, ?14, ?15, ?16, ?17) \
         ON CONFLICT (id) DO UPDATE SET merchant_id = excluded.merchant_id, \
         name = excluded.name, active = excluded.active, test_mode = excluded.test_mode, \
         lifetime_secs = excluded.lifetime_secs, lifetime_nanos = excluded.lifetime_nanos, \
         contract = excluded.contract, callback_url = excluded.callback_url, \
         ip_allow_list = excluded.ip_allow_list, \
         signature_required = excluded.signature_required, \
         rate_per_second = excluded.rate_per_second, rate_burst = excluded.rate_burst, \
         created_at = excluded.created_at, paused = excluded.paused, \
         payer_page = excluded.payer_page, payer_language = excluded.payer_language",
    )
    .map_err(db)?
    .execute(params![
        p.id.to_string(),
        p.merchant_id.to_string(),
        p.name,
        p.active,
        p.test_mode,
        codec::uint(p.lifetime.as_secs(), "lifetime")?,
        p.lifetime.subsec_nanos(),
        contract_json(&p.contract),
        p.callback_url.as_ref().map(|u| u.as_str()),
        serde_json::to_string(&p.ip_allow_list).expect("a list of strings always serialises"),
        p.signature_required,
        p.rate_limit.per_second,
        p.rate_limit.burst,
        p.created_at.unix_millis(),
        p.paused,
        p.payer_page,
        p.payer_language.as_str()
    ])
    .map_err(db)?;
    Ok(())
}

pub(crate) fn project(conn: &Connection, id: ProjectId) -> Result<Option<Project>, StoreError> {
    Ok(query(
        conn,
        "SELECT * FROM projects WHERE id = ?1",
        [id.to_string()],
        project_from_row,
    )?
    .pop())
}

pub(crate) fn projects(conn: &Connection) -> Result<Vec<Project>, StoreError> {
    query(
        conn,
        "SELECT * FROM projects ORDER BY id",
        [],
        project_from_row,
    )
}

// --- tokens and keys -------------------------------------------------------------------------

fn token_from_row(row: &Row<'_>) -> Result<TokenRecord, StoreError> {
    let c = Cols::new(row);
    Ok(TokenRecord {
        id: c.parsed("id")?,
        project_id: c.parsed("project_id")?,
        hash: c.bytes32("hash")?,
        prefix: c.text("prefix")?,
        scopes: codec::parse_scopes(&c.text("scopes")?)?,
        created_at: c.ts("created_at")?,
        revoked_at: c.opt_ts("revoked_at")?,
    })
}

/// Stores a token; a taken id or hash is `Duplicate`.
pub(crate) fn insert_token(conn: &Connection, t: &TokenRecord) -> Result<(), StoreError> {
    let result = conn
        .prepare_cached(
            "INSERT INTO tokens (id, project_id, hash, prefix, scopes, created_at, revoked_at) \
             VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7)",
        )
        .map_err(db)?
        .execute(params![
            t.id.to_string(),
            t.project_id.to_string(),
            &t.hash[..],
            t.prefix,
            codec::scopes_text(&t.scopes),
            t.created_at.unix_millis(),
            t.revoked_at.map(Timestamp::unix_millis)
        ]);
    match result {
        Ok(_) => Ok(()),
        Err(e) if is_unique_violation(&e) => Err(StoreError::Duplicate("token".into())),
        Err(e) => Err(db(e)),
    }
}

pub(crate) fn token_by_hash(
    conn: &Connection,
    hash: &[u8; 32],
) -> Result<Option<TokenRecord>, StoreError> {
    Ok(query(
        conn,
        "SELECT * FROM tokens WHERE hash = ?1",
        [&hash[..]],
        token_from_row,
    )?
    .pop())
}

pub(crate) fn tokens(
    conn: &Connection,
    project: ProjectId,
) -> Result<Vec<TokenRecord>, StoreError> {
    query(
        conn,
        "SELECT * FROM tokens WHERE project_id = ?1 ORDER BY rowid",
        [project.to_string()],
        token_from_row,
    )
}

/// Revokes a token of `project`, keeping the first revocation time.
pub(crate) fn revoke_token(
    conn: &Connection,
    project: ProjectId,
    id: TokenId,
    at: Timestamp,
) -> Result<bool, StoreError> {
    let n = conn
        .prepare_cached(
            "UPDATE tokens SET revoked_at = coalesce(revoked_at, ?1) \
             WHERE id = ?2 AND project_id = ?3",
        )
        .map_err(db)?
        .execute(params![
            at.unix_millis(),
            id.to_string(),
            project.to_string()
        ])
        .map_err(db)?;
    Ok(n > 0)
}

fn key_from_row(row: &Row<'_>) -> Result<KeyRecord, StoreError> {
    let c = Cols::new(row);
    Ok(KeyRecord {
        keyid: KeyId::new(c.text("keyid")?),
        project_id: c.parsed("project_id")?,
        public_key: c.bytes32("public_key")?,
        created_at: c.ts("created_at")?,
        revoked_at: c.opt_ts("revoked_at")?,
    })
}

/// Registers a key; the primary key (project, keyid) decides duplicates.
pub(crate) fn insert_key(conn: &Connection, k: &KeyRecord) -> Result<(), StoreError> {
    let result = conn
        .prepare_cached(
            "INSERT INTO signing_keys (project_id, keyid, public_key, created_at, revoked_at) \
             VALUES (?1, ?2, ?3, ?4, ?5)",
        )
        .map_err(db)?
        .execute(params![
            k.project_id.to_string(),
            k.keyid.as_str(),
            &k.public_key[..],
            k.created_at.unix_millis(),
            k.revoked_at.map(Timestamp::unix_millis)
        ]);
    match result {
        Ok(_) => Ok(()),
        Err(e) if is_unique_violation(&e) => Err(StoreError::Duplicate(format!("key {}", k.keyid))),
        Err(e) => Err(db(e)),
    }
}

/// The reads of one authentication in one read transaction.
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
    Ok(query(
        conn,
        "SELECT * FROM signing_keys WHERE project_id = ?1 AND keyid = ?2",
        [project.to_string(), keyid.as_str().to_string()],
        key_from_row,
    )?
    .pop())
}

pub(crate) fn keys(conn: &Connection, project: ProjectId) -> Result<Vec<KeyRecord>, StoreError> {
    query(
        conn,
        "SELECT * FROM signing_keys WHERE project_id = ?1 ORDER BY rowid",
        [project.to_string()],
        key_from_row,
    )
}

/// The projects holding an unrevoked key with this id.
pub(crate) fn active_key_projects(
    conn: &Connection,
    keyid: &KeyId,
) -> Result<Vec<ProjectId>, StoreError> {
    query(
        conn,
        "SELECT project_id FROM signing_keys WHERE keyid = ?1 AND revoked_at IS NULL",
        [keyid.as_str()],
        |row| Cols::new(row).parsed("project_id"),
    )
}

pub(crate) fn revoke_key(
    conn: &Connection,
    project: ProjectId,
    keyid: &KeyId,
    at: Timestamp,
) -> Result<bool, StoreError> {
    let n = conn
        .prepare_cached(
            "UPDATE signing_keys SET revoked_at = coalesce(revoked_at, ?1) \
             WHERE project_id = ?2 AND keyid = ?3",
        )
        .map_err(db)?
        .execute(params![
            at.unix_millis(),
            project.to_string(),
            keyid.as_str()
        ])
        .map_err(db)?;
    Ok(n > 0)
}

// --- callback secrets ------------------------------------------------------------------------

fn secret_from_row(row: &Row<'_>) -> Result<SecretRecord, StoreError> {
    let c = Cols::new(row);
    Ok(SecretRecord {
        secret: c.text("secret")?.into(),
        created_at: c.ts("created_at")?,
        revealed: c.flag("revealed")?,
    })
}

/// Newest first (the most recently added has the largest `seq`).
pub(crate) fn secrets(
    conn: &Connection,
    project: ProjectId,
) -> Result<Vec<SecretRecord>, StoreError> {
    query(
        conn,
        "SELECT secret, created_at, revealed FROM callback_secrets WHERE project_id = ?1 \
         ORDER BY seq DESC",
        [project.to_string()],
        secret_from_row,
    )
}

/// Adds a secret and deletes all but the two newest.
pub(crate) fn add_secret(
    conn: &Connection,
    project: ProjectId,
    s: &SecretRecord,
) -> Result<(), StoreError> {
    let pid = project.to_string();
    conn.prepare_cached(
        "INSERT INTO callback_secrets (project_id, secret, created_at, revealed) \
         VALUES (?1, ?2, ?3, ?4)",
    )
    .map_err(db)?
    .execute(params![
        pid,
        s.secret.expose(),
        s.created_at.unix_millis(),
        s.revealed
    ])
    .map_err(db)?;
    conn.prepare_cached(
        "DELETE FROM callback_secrets WHERE project_id = ?1 AND seq NOT IN \
         (SELECT seq FROM callback_secrets WHERE project_id = ?1 ORDER BY seq DESC LIMIT 2)",
    )
    .map_err(db)?
    .execute([pid])
    .map_err(db)?;
    Ok(())
}

/// Adds `s` if the project has no secret; the project's secrets after.
pub(crate) fn add_secret_if_none(
    conn: &Connection,
    project: ProjectId,
    s: &SecretRecord,
) -> Result<Vec<SecretRecord>, StoreError> {
    if secrets(conn, project)?.is_empty() {
        add_secret(conn, project, s)?;
    }
    secrets(conn, project)
}

/// Replaces the stored value `old` of a project's secret with `new`; `false` if none has it.
pub(crate) fn replace_secret(
    conn: &Connection,
    project: ProjectId,
    old: &SecretString,
    new: &SecretString,
) -> Result<bool, StoreError> {
    let n = conn
        .prepare_cached(
            "UPDATE callback_secrets SET secret = ?3 WHERE project_id = ?1 AND secret = ?2",
        )
        .map_err(db)?
        .execute(params![project.to_string(), old.expose(), new.expose()])
        .map_err(db)?;
    Ok(n > 0)
}

// --- settings and audit ----------------------------------------------------------------------

// --- operator tokens -------------------------------------------------------------------------

fn operator_token_from_row(row: &Row<'_>) -> Result<OperatorTokenRecord, StoreError> {
    let c = Cols::new(row);
    Ok(OperatorTokenRecord {
        id: c.parsed("id")?,
        name: c.text("name")?,
        hash: c.bytes32("hash")?,
        prefix: c.text("prefix")?,
        created_at: c.ts("created_at")?,
        expires_at: c.opt_ts("expires_at")?,
    })
}

/// Stores an operator token; a taken id or hash is `Duplicate`.
pub(crate) fn insert_operator_token(
    conn: &Connection,
    t: &OperatorTokenRecord,
) -> Result<(), StoreError> {
    let result = conn
        .prepare_cached(
            "INSERT INTO operator_tokens (id, name, hash, prefix, created_at, expires_at) \
             VALUES (?1, ?2, ?3, ?4, ?5, ?6)",
        )
        .map_err(db)?
        .execute(params![
            t.id.to_string(),
            t.name,
            &t.hash[..],
            t.prefix,
            t.created_at.unix_millis(),
            t.expires_at.map(Timestamp::unix_millis)
        ]);
    match result {
        Ok(_) => Ok(()),
        Err(e) if is_unique_violation(&e) => Err(StoreError::Duplicate("operator token".into())),
        Err(e) => Err(db(e)),
    }
}

pub(crate) fn operator_token_by_hash(
    conn: &Connection,
    hash: &[u8; 32],
) -> Result<Option<OperatorTokenRecord>, StoreError> {
    Ok(query(
        conn,
        "SELECT * FROM operator_tokens WHERE hash = ?1",
        [&hash[..]],
        operator_token_from_row,
    )?
    .pop())
}

pub(crate) fn operator_tokens(conn: &Connection) -> Result<Vec<OperatorTokenRecord>, StoreError> {
    query(
        conn,
        "SELECT * FROM operator_tokens ORDER BY rowid",
        [],
        operator_token_from_row,
    )
}

/// Ends a token's validity at `at` unless it ends earlier already.
pub(crate) fn expire_operator_token(
    conn: &Connection,
    id: TokenId,
    at: Timestamp,
) -> Result<bool, StoreError> {
    let n = conn
        .prepare_cached(
            "UPDATE operator_tokens SET expires_at = min(coalesce(expires_at, ?1), ?1) \
             WHERE id = ?2",
        )
        .map_err(db)?
        .execute(params![at.unix_millis(), id.to_string()])
        .map_err(db)?;
    Ok(n > 0)
}

pub(crate) fn setting(conn: &Connection, name: &str) -> Result<Option<String>, StoreError> {
    conn.prepare_cached("SELECT value FROM settings WHERE name = ?1")
        .map_err(db)?
        .query_row([name], |r| r.get(0))
        .optional()
        .map_err(db)
}

pub(crate) fn put_setting(conn: &Connection, name: &str, value: &str) -> Result<(), StoreError> {
    conn.prepare_cached(
        "INSERT INTO settings (name, value) VALUES (?1, ?2) \
         ON CONFLICT (name) DO UPDATE SET value = excluded.value",
    )
    .map_err(db)?
    .execute([name, value])
    .map_err(db)?;
    Ok(())
}

/// Appends an audit record (also inside [`crate::payments::commit_change`]).
pub(crate) fn append_audit(conn: &Connection, a: &AuditRecord) -> Result<(), StoreError> {
    conn.prepare_cached(
        "INSERT INTO audit (at, actor, action, target, before_state, after_state) \
         VALUES (?1, ?2, ?3, ?4, ?5, ?6)",
    )
    .map_err(db)?
    .execute(params![
        a.at.unix_millis(),
        a.actor,
        a.action,
        a.target,
        a.before,
        a.after
    ])
    .map_err(db)?;
    Ok(())
}

/// The newest `limit` records, newest first.
pub(crate) fn audit_records(
    conn: &Connection,
    limit: usize,
) -> Result<Vec<AuditRecord>, StoreError> {
    query(
        conn,
        "SELECT * FROM audit ORDER BY seq DESC LIMIT ?1",
        [codec::limit(limit)],
        |row| {
            let c = Cols::new(row);
            Ok(AuditRecord {
                at: c.ts("at")?,
                actor: c.text("actor")?,
                action: c.text("action")?,
                target: c.text("target")?,
                before: c.opt_text("before_state")?,
                after: c.opt_text("after_state")?,
            })
        },
    )
}

/// Deletes at most `limit` of the oldest audit records written before `before`.
pub(crate) fn purge_audit(
    conn: &Connection,
    before: Timestamp,
    limit: usize,
) -> Result<u64, StoreError> {
    let n = conn
        .prepare_cached(
            "DELETE FROM audit WHERE seq IN \
             (SELECT seq FROM audit WHERE at < ?1 ORDER BY at LIMIT ?2)",
        )
        .map_err(db)?
        .execute(params![before.unix_millis(), codec::limit(limit)])
        .map_err(db)?;
    Ok(n as u64)
}
