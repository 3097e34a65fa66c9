//! Merchants, projects, credentials, settings, the audit trail and turns of background work
//! as SQL.

use std::time::Duration;

use deadpool_postgres::GenericClient;
use payments_core::ids::{KeyId, MerchantId, ProjectId, TokenId};
use payments_core::payment::Currency;
use payments_core::project::{
    AuditRecord, Contract, KeyRecord, Merchant, MethodTerms, OperatorTokenRecord, Project,
    RateLimit, SecretRecord, TokenRecord,
};
use payments_core::settlement::FeePercent;
use payments_core::store::{AuthLookup, StoreError};
use payments_core::{SecretString, Timestamp};
use rust_decimal::Decimal;
use serde::{Deserialize, Serialize};
use tokio_postgres::Row;

use crate::codec::{self, execute, execute_raw, query, query_opt, Cols};
use crate::error::{corrupt, db, unique_violation};

// --- merchants -------------------------------------------------------------------------------

fn merchant_from_row(row: &Row) -> Result<Merchant, StoreError> {
    merchant_from(&Cols::new(row))
}

fn merchant_from(c: &Cols<'_>) -> Result<Merchant, StoreError> {
    Ok(Merchant {
        id: c.parsed("id")?,
        name: c.text("name")?,
        paused: c.flag("paused")?,
        callback_url: c.opt_url("callback_url")?,
        created_at: c.ts("created_at")?,
    })
}

pub(crate) async fn put_merchant<C: GenericClient>(c: &C, m: &Merchant) -> Result<(), StoreError> {
    execute(
        c,
        "INSERT INTO merchants (id, name, paused, callback_url, created_at) \
         VALUES ($1, $2, $3, $4, $5) ON CONFLICT (id) DO UPDATE SET name = EXCLUDED.name, \
         paused = EXCLUDED.paused, callback_url = EXCLUDED.callback_url, \
         created_at = EXCLUDED.created_at",
        &[
            &m.id.to_string(),
            &m.name,
            &m.paused,
            &m.callback_url.as_ref().map(|u| u.as_str()),
            &m.created_at.unix_millis(),
        ],
    )
    .await?;
    Ok(())
}

pub(crate) async fn merchant<C: GenericClient>(
    c: &C,
    id: MerchantId,
) -> Result<Option<Merchant>, StoreError> {
    query_opt(
        c,
        &format!(
            "SELECT {} FROM merchants WHERE id = $1",
            MERCHANT_COLUMNS.join(", ")
        ),
        &[&id.to_string()],
    )
    .await?
    .as_ref()
    .map(merchant_from_row)
    .transpose()
}

pub(crate) async fn merchants<C: GenericClient>(c: &C) -> Result<Vec<Merchant>, StoreError> {
    query(
        c,
        &format!(
            "SELECT {} FROM merchants ORDER BY id",
            MERCHANT_COLUMNS.join(", ")
        ),
        &[],
    )
    .await?
    .iter()
    .map(merchant_from_row)
    .collect()
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

fn project_from_row(row: &Row) -> Result<Project, StoreError> {
    project_from(&Cols::new(row))
}

fn project_from(c: &Cols<'_>) -> Result<Project, StoreError> {
    let ip_allow_list = c.text("ip_allow_list")?;
    Ok(Project {
        id: c.parsed("id")?,
        merchant_id: c.parsed("merchant_id")?,
        name: c.text("name")?,
        active: c.flag("active")?,
        test_mode: c.flag("test_mode")?,
        lifetime: Duration::new(c.num("lifetime_secs")?, c.num4("lifetime_nanos")?),
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
pub(crate) async fn put_project<C: GenericClient>(c: &C, p: &Project) -> Result<(), StoreError> {
    if merchant(c, p.merchant_id).await?.is_none() {
        return Err(StoreError::NotFound(format!("merchant {}", p.merchant_id)));
    }
    let nanos =
        i32::try_from(p.lifetime.subsec_nanos()).map_err(|_| corrupt("lifetime", p.lifetime))?;
    execute(
        c,
        "INSERT INTO projects (id, merchant_id, name, active, test_mode, lifetime_secs, \
         lifetime_nanos, contract, callback_url, ip_allow_list, signature_required, \
         rate_per_second, rate_burst, created_at, paused, payer_page, payer_language) \
         VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14, $15, $16, $17) \
         ON CONFLICT (id) DO UPDATE SET merchant_id = EXCLUDED.merchant_id, \
         name = EXCLUDED.name, active = EXCLUDED.active, test_mode = EXCLUDED.test_mode, \
         lifetime_secs = EXCLUDED.lifetime_secs, lifetime_nanos = EXCLUDED.lifetime_nanos, \
         contract = EXCLUDED.contract, callback_url = EXCLUDED.callback_url, \
         ip_allow_list = EXCLUDED.ip_allow_list, \
         signature_required = EXCLUDED.signature_required, \
         rate_per_second = EXCLUDED.rate_per_second, rate_burst = EXCLUDED.rate_burst, \
         created_at = EXCLUDED.created_at, paused = EXCLUDED.paused, \
         payer_page = EXCLUDED.payer_page, payer_language = EXCLUDED.payer_language",
        &[
            &p.id.to_string(),
            &p.merchant_id.to_string(),
            &p.name,
            &p.active,
            &p.test_mode,
            &codec::uint(p.lifetime.as_secs(), "lifetime")?,
            &nanos,
            &contract_json(&p.contract),
            &p.callback_url.as_ref().map(|u| u.as_str()),
            &serde_json::to_string(&p.ip_allow_list).expect("a list of strings always serialises"),
            &p.signature_required,
            &i64::from(p.rate_limit.per_second),
            &i64::from(p.rate_limit.burst),
            &p.created_at.unix_millis(),
            &p.paused,
            &p.payer_page,
            &p.payer_language.as_str(),
        ],
    )
    .await?;
    Ok(())
}

pub(crate) async fn project<C: GenericClient>(
    c: &C,
    id: ProjectId,
) -> Result<Option<Project>, StoreError> {
    query_opt(
        c,
        &format!(
            "SELECT {} FROM projects WHERE id = $1",
            PROJECT_COLUMNS.join(", ")
        ),
        &[&id.to_string()],
    )
    .await?
    .as_ref()
    .map(project_from_row)
    .transpose()
}

pub(crate) async fn projects<C: GenericClient>(c: &C) -> Result<Vec<Project>, StoreError> {
    query(
        c,
        &format!(
            "SELECT {} FROM projects ORDER BY id",
            PROJECT_COLUMNS.join(", ")
        ),
        &[],
    )
    .await?
    .iter()
    .map(project_from_row)
    .collect()
}

// --- tokens and keys -------------------------------------------------------------------------

fn token_from_row(row: &Row) -> Result<TokenRecord, StoreError> {
    token_from(&Cols::new(row))
}

fn token_from(c: &Cols<'_>) -> Result<TokenRecord, StoreError> {
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
pub(crate) async fn insert_token<C: GenericClient>(
    c: &C,
    t: &TokenRecord,
) -> Result<(), StoreError> {
    let result = execute_raw(
        c,
        "INSERT INTO tokens (id, project_id, hash, prefix, scopes, created_at, revoked_at) \
         VALUES ($1, $2, $3, $4, $5, $6, $7)",
        &[
            &t.id.to_string(),
            &t.project_id.to_string(),
            &&t.hash[..],
            &t.prefix,
            &codec::scopes_text(&t.scopes),
            &t.created_at.unix_millis(),
            &t.revoked_at.map(Timestamp::unix_millis),
        ],
    )
    .await;
    match result {
        Ok(_) => Ok(()),
        Err(e) if unique_violation(&e).is_some() => Err(StoreError::Duplicate("token".into())),
        Err(e) => Err(db(e)),
    }
}

const TOKEN_COLUMNS: &str = "id, project_id, hash, prefix, scopes, created_at, revoked_at";

pub(crate) async fn token_by_hash<C: GenericClient>(
    c: &C,
    hash: &[u8; 32],
) -> Result<Option<TokenRecord>, StoreError> {
    query_opt(
        c,
        &format!("SELECT {TOKEN_COLUMNS} FROM tokens WHERE hash = $1"),
        &[&&hash[..]],
    )
    .await?
    .as_ref()
    .map(token_from_row)
    .transpose()
}

pub(crate) async fn tokens<C: GenericClient>(
    c: &C,
    project: ProjectId,
) -> Result<Vec<TokenRecord>, StoreError> {
    query(
        c,
        &format!("SELECT {TOKEN_COLUMNS} FROM tokens WHERE project_id = $1 ORDER BY seq"),
        &[&project.to_string()],
    )
    .await?
    .iter()
    .map(token_from_row)
    .collect()
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
        "UPDATE tokens SET revoked_at = coalesce(revoked_at, $1) \
         WHERE id = $2 AND project_id = $3",
        &[&at.unix_millis(), &id.to_string(), &project.to_string()],
    )
    .await?;
    Ok(n > 0)
}

fn key_from_row(row: &Row) -> Result<KeyRecord, StoreError> {
    key_from(&Cols::new(row))
}

fn key_from(c: &Cols<'_>) -> Result<KeyRecord, StoreError> {
    Ok(KeyRecord {
        keyid: KeyId::new(c.text("keyid")?),
        project_id: c.parsed("project_id")?,
        public_key: c.bytes32("public_key")?,
        created_at: c.ts("created_at")?,
        revoked_at: c.opt_ts("revoked_at")?,
    })
}

const KEY_COLUMNS: &str = "project_id, keyid, public_key, created_at, revoked_at";

/// Registers a key; the primary key (project, keyid) decides duplicates.
pub(crate) async fn insert_key<C: GenericClient>(c: &C, k: &KeyRecord) -> Result<(), StoreError> {
    let result = execute_raw(
        c,
        "INSERT INTO signing_keys (project_id, keyid, public_key, created_at, revoked_at) \
         VALUES ($1, $2, $3, $4, $5)",
        &[
            &k.project_id.to_string(),
            &k.keyid.as_str(),
            &&k.public_key[..],
            &k.created_at.unix_millis(),
            &k.revoked_at.map(Timestamp::unix_millis),
        ],
    )
    .await;
    match result {
        Ok(_) => Ok(()),
        Err(e) if unique_violation(&e).is_some() => {
            Err(StoreError::Duplicate(format!("key {}", k.keyid)))
        }
        Err(e) => Err(db(e)),
    }
}

/// The columns [`project_from`] reads, named in every query of projects (never `*`: a node of
/// an older build keeps its prepared statements' result types when a migration adds a column).
const PROJECT_COLUMNS: &[&str] = &[
    "id",
    "merchant_id",
    "name",
    "active",
    "test_mode",
    "lifetime_secs",
    "lifetime_nanos",
    "contract",
    "callback_url",
    "ip_allow_list",
    "signature_required",
    "rate_per_second",
    "rate_burst",
    "created_at",
    "paused",
    "payer_page",
    "payer_language",
];
/// The columns [`merchant_from`] reads, likewise.
const MERCHANT_COLUMNS: &[&str] = &["id", "name", "paused", "callback_url", "created_at"];

/// The one query of [`auth_lookup`]: the token by hash, joined with its project, the project's
/// merchant and the project's key with the given id, each table's columns aliased with a
/// prefix (one statement, one snapshot, one round trip).
static AUTH_SQL: std::sync::LazyLock<String> = std::sync::LazyLock::new(|| {
    let cols = |alias: &str, names: &[&str]| {
        names
            .iter()
            .map(|n| format!("{alias}.{n} AS {alias}_{n}"))
            .collect::<Vec<_>>()
            .join(", ")
    };
    format!(
        "SELECT {}, {}, {}, {} FROM tokens t \
         LEFT JOIN projects p ON p.id = t.project_id \
         LEFT JOIN merchants m ON m.id = p.merchant_id \
         LEFT JOIN signing_keys k ON k.project_id = t.project_id AND k.keyid = $2 \
         WHERE t.hash = $1",
        cols("t", &TOKEN_COLUMNS.split(", ").collect::<Vec<_>>()),
        cols("p", PROJECT_COLUMNS),
        cols("m", MERCHANT_COLUMNS),
        cols("k", &KEY_COLUMNS.split(", ").collect::<Vec<_>>()),
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
    let present = |prefix: &'static str| -> Result<bool, StoreError> {
        Ok(Cols::prefixed(&row, prefix).opt_text("id")?.is_some())
    };
    let project = if present("p_")? {
        Some(project_from(&Cols::prefixed(&row, "p_"))?)
    } else {
        None
    };
    let merchant = if present("m_")? {
        Some(merchant_from(&Cols::prefixed(&row, "m_"))?)
    } else {
        None
    };
    let key = if Cols::prefixed(&row, "k_").opt_text("keyid")?.is_some() {
        Some(key_from(&Cols::prefixed(&row, "k_"))?)
    } else {
        None
    };
    Ok(AuthLookup {
        token: Some(token_from(&Cols::prefixed(&row, "t_"))?),
        project,
        merchant,
        key,
    })
}

pub(crate) async fn key<C: GenericClient>(
    c: &C,
    project: ProjectId,
    keyid: &KeyId,
) -> Result<Option<KeyRecord>, StoreError> {
    query_opt(
        c,
        &format!("SELECT {KEY_COLUMNS} FROM signing_keys WHERE project_id = $1 AND keyid = $2"),
        &[&project.to_string(), &keyid.as_str()],
    )
    .await?
    .as_ref()
    .map(key_from_row)
    .transpose()
}

pub(crate) async fn keys<C: GenericClient>(
    c: &C,
    project: ProjectId,
) -> Result<Vec<KeyRecord>, StoreError> {
    query(
        c,
        &format!("SELECT {KEY_COLUMNS} FROM signing_keys WHERE project_id = $1 ORDER BY seq"),
        &[&project.to_string()],
    )
    .await?
    .iter()
    .map(key_from_row)
    .collect()
}

/// The projects holding an unrevoked key with this id.
pub(crate) async fn active_key_projects<C: GenericClient>(
    c: &C,
    keyid: &KeyId,
) -> Result<Vec<ProjectId>, StoreError> {
    query(
        c,
        "SELECT project_id FROM signing_keys WHERE keyid = $1 AND revoked_at IS NULL",
        &[&keyid.as_str()],
    )
    .await?
    .iter()
    .map(|row| Cols::new(row).parsed("project_id"))
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
        "UPDATE signing_keys SET revoked_at = coalesce(revoked_at, $1) \
         WHERE project_id = $2 AND keyid = $3",
        &[&at.unix_millis(), &project.to_string(), &keyid.as_str()],
    )
    .await?;
    Ok(n > 0)
}

// --- callback secrets ------------------------------------------------------------------------

fn secret_from_row(row: &Row) -> Result<SecretRecord, StoreError> {
    let c = Cols::new(row);
    Ok(SecretRecord {
        secret: c.text("secret")?.into(),
        created_at: c.ts("created_at")?,
        revealed: c.flag("revealed")?,
    })
}

/// Newest first (the most recently added has the largest `seq`).
pub(crate) async fn secrets<C: GenericClient>(
    c: &C,
    project: ProjectId,
) -> Result<Vec<SecretRecord>, StoreError> {
    query(
        c,
        "SELECT secret, created_at, revealed FROM callback_secrets WHERE project_id = $1 \
         ORDER BY seq DESC",
        &[&project.to_string()],
    )
    .await?
    .iter()
    .map(secret_from_row)
    .collect()
}

/// Locks the project's secrets (its merchant row stands for it: secrets change rarely) so that
/// concurrent additions on two nodes apply one after the other.
async fn lock_project_secrets<C: GenericClient>(
    c: &C,
    project: ProjectId,
) -> Result<(), StoreError> {
    query(
        c,
        "SELECT pg_advisory_xact_lock(hashtextextended('callback_secrets:' || $1, 0))",
        &[&project.to_string()],
    )
    .await?;
    Ok(())
}

/// Adds a secret and deletes all but the two newest. Call inside a transaction.
pub(crate) async fn add_secret<C: GenericClient>(
    c: &C,
    project: ProjectId,
    s: &SecretRecord,
) -> Result<(), StoreError> {
    let pid = project.to_string();
    lock_project_secrets(c, project).await?;
    execute(
        c,
        "INSERT INTO callback_secrets (project_id, secret, created_at, revealed) \
         VALUES ($1, $2, $3, $4)",
        &[
            &pid,
            &s.secret.expose(),
            &s.created_at.unix_millis(),
            &s.revealed,
        ],
    )
    .await?;
    execute(
        c,
        "DELETE FROM callback_secrets WHERE project_id = $1 AND seq NOT IN \
         (SELECT seq FROM callback_secrets WHERE project_id = $1 ORDER BY seq DESC LIMIT 2)",
        &[&pid],
    )
    .await?;
    Ok(())
}

/// Adds `s` if the project has no secret; the project's secrets after. Call inside a
/// transaction.
pub(crate) async fn add_secret_if_none<C: GenericClient>(
    c: &C,
    project: ProjectId,
    s: &SecretRecord,
) -> Result<Vec<SecretRecord>, StoreError> {
    lock_project_secrets(c, project).await?;
    if secrets(c, project).await?.is_empty() {
        add_secret(c, project, s).await?;
    }
    secrets(c, project).await
}

/// Replaces the stored value `old` of a project's secret with `new`; `false` if none has it.
pub(crate) async fn replace_secret<C: GenericClient>(
    c: &C,
    project: ProjectId,
    old: &SecretString,
    new: &SecretString,
) -> Result<bool, StoreError> {
    let n = execute(
        c,
        "UPDATE callback_secrets SET secret = $3 WHERE project_id = $1 AND secret = $2",
        &[&project.to_string(), &old.expose(), &new.expose()],
    )
    .await?;
    Ok(n > 0)
}

// --- settings, audit and turns ---------------------------------------------------------------

pub(crate) async fn setting<C: GenericClient>(
    c: &C,
    name: &str,
) -> Result<Option<String>, StoreError> {
    query_opt(c, "SELECT value FROM settings WHERE name = $1", &[&name])
        .await?
        .as_ref()
        .map(|row| Cols::new(row).text("value"))
        .transpose()
}

pub(crate) async fn put_setting<C: GenericClient>(
    c: &C,
    name: &str,
    value: &str,
) -> Result<(), StoreError> {
    execute(
        c,
        "INSERT INTO settings (name, value) VALUES ($1, $2) \
         ON CONFLICT (name) DO UPDATE SET value = EXCLUDED.value",
        &[&name, &value],
    )
    .await?;
    Ok(())
}

/// Appends an audit record (also inside [`crate::payments::commit_change`]).
pub(crate) async fn append_audit<C: GenericClient>(
    c: &C,
    a: &AuditRecord,
) -> Result<(), StoreError> {
    execute(
        c,
        "INSERT INTO audit (at, actor, action, target, before_state, after_state) \
         VALUES ($1, $2, $3, $4, $5, $6)",
        &[
            &a.at.unix_millis(),
            &a.actor,
            &a.action,
            &a.target,
            &a.before,
            &a.after,
        ],
    )
    .await?;
    Ok(())
}

/// The newest `limit` records, newest first.
pub(crate) async fn audit_records<C: GenericClient>(
    c: &C,
    limit: usize,
) -> Result<Vec<AuditRecord>, StoreError> {
    query(
        c,
        "SELECT at, actor, action, target, before_state, after_state FROM audit \
         ORDER BY seq DESC LIMIT $1",
        &[&codec::limit(limit)],
    )
    .await?
    .iter()
    .map(|row| {
        let c = Cols::new(row);
        Ok(AuditRecord {
            at: c.ts("at")?,
            actor: c.text("actor")?,
            action: c.text("action")?,
            target: c.text("target")?,
            before: c.opt_text("before_state")?,
            after: c.opt_text("after_state")?,
        })
    })
    .collect()
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
        "DELETE FROM audit WHERE seq IN ( \
           SELECT seq FROM audit WHERE at < $1 ORDER BY at, seq LIMIT $2 \
           FOR UPDATE SKIP LOCKED)",
        &[&before.unix_millis(), &codec::limit(limit)],
    )
    .await
}

// --- operator tokens -------------------------------------------------------------------------

fn operator_token_from_row(row: &Row) -> Result<OperatorTokenRecord, StoreError> {
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

const OPERATOR_TOKEN_COLUMNS: &str = "id, name, hash, prefix, created_at, expires_at";

/// Stores an operator token; a taken id or hash is `Duplicate`.
pub(crate) async fn insert_operator_token<C: GenericClient>(
    c: &C,
    t: &OperatorTokenRecord,
) -> Result<(), StoreError> {
    let result = execute_raw(
        c,
        "INSERT INTO operator_tokens (id, name, hash, prefix, created_at, expires_at) \
         VALUES ($1, $2, $3, $4, $5, $6)",
        &[
            &t.id.to_string(),
            &t.name,
            &&t.hash[..],
            &t.prefix,
            &t.created_at.unix_millis(),
            &t.expires_at.map(Timestamp::unix_millis),
        ],
    )
    .await;
    match result {
        Ok(_) => Ok(()),
        Err(e) if unique_violation(&e).is_some() => {
            Err(StoreError::Duplicate("operator token".into()))
        }
        Err(e) => Err(db(e)),
    }
}

/// An operator token by the hash of the presented token, expired or not.
pub(crate) async fn operator_token_by_hash<C: GenericClient>(
    c: &C,
    hash: &[u8; 32],
) -> Result<Option<OperatorTokenRecord>, StoreError> {
    query_opt(
        c,
        &format!("SELECT {OPERATOR_TOKEN_COLUMNS} FROM operator_tokens WHERE hash = $1"),
        &[&&hash[..]],
    )
    .await?
    .as_ref()
    .map(operator_token_from_row)
    .transpose()
}

/// Every operator token in issue order.
pub(crate) async fn operator_tokens<C: GenericClient>(
    c: &C,
) -> Result<Vec<OperatorTokenRecord>, StoreError> {
    query(
        c,
        &format!("SELECT {OPERATOR_TOKEN_COLUMNS} FROM operator_tokens ORDER BY seq"),
        &[],
    )
    .await?
    .iter()
    .map(operator_token_from_row)
    .collect()
}

/// Ends a token's validity at `at` unless it ends earlier already.
pub(crate) async fn expire_operator_token<C: GenericClient>(
    c: &C,
    id: TokenId,
    at: Timestamp,
) -> Result<bool, StoreError> {
    let n = execute(
        c,
        "UPDATE operator_tokens SET expires_at = LEAST(coalesce(expires_at, $1), $1) \
         WHERE id = $2",
        &[&at.unix_millis(), &id.to_string()],
    )
    .await?;
    Ok(n > 0)
}
