//! The web cabinet's records as SQL: users, recovery codes, sessions, invitations, sign-in
//! failures, the cabinet audit log, token use, and the cabinet's listings of payments and
//! events. The sign-in step ([`advance_session`]) is one transaction: the old session's row is
//! locked first, the proof's conditional write decides, and a refused proof rolls back.

use deadpool_postgres::GenericClient;
use payments_core::cabinet::{
    CabinetAuditRecord, EventQuery, InviteRecord, PaymentQuery, Role, SessionProof, SessionRecord,
    SessionStage, UserRecord,
};
use payments_core::ids::{MerchantId, PaymentId, SessionId, TokenId, UserId};
use payments_core::payer::PaymentPageRecord;
use payments_core::store::StoreError;
use payments_core::Timestamp;
use tokio_postgres::types::ToSql;
use tokio_postgres::Row;

use crate::codec::{self, execute, execute_raw, query, query_opt, Cols};
use crate::error::{corrupt, db, unique_violation};

fn step_value(step: u64) -> Result<i64, StoreError> {
    codec::uint(step, "totp step")
}

/// A unique violation as `Duplicate(what)`, anything else as a database failure.
fn duplicate(e: tokio_postgres::Error, what: impl FnOnce() -> String) -> StoreError {
    if unique_violation(&e).is_some() {
        StoreError::Duplicate(what())
    } else {
        db(e)
    }
}

// --- users -----------------------------------------------------------------------------------

const USER_COLUMNS: &str = "id, email, role, merchant_id, password_hash, totp_secret, \
    totp_confirmed_at, disabled, created_at";

fn user_from_row(row: &Row) -> Result<UserRecord, StoreError> {
    let c = Cols::new(row);
    let role = match c.text("role")?.as_str() {
        "support" => Role::Support,
        "merchant" => Role::Merchant(
            c.opt_parsed::<MerchantId>("merchant_id")?
                .ok_or_else(|| corrupt("merchant_id", "missing"))?,
        ),
        other => return Err(corrupt("role", other)),
    };
    Ok(UserRecord {
        id: c.parsed("id")?,
        email: c.text("email")?,
        role,
        password_hash: c.opt_text("password_hash")?,
        totp_secret: c.opt_text("totp_secret")?.map(Into::into),
        totp_confirmed_at: c.opt_ts("totp_confirmed_at")?,
        disabled: c.flag("disabled")?,
        created_at: c.ts("created_at")?,
    })
}

/// A user's columns in [`USER_COLUMNS`] order, as owned values.
struct UserValues {
    id: String,
    email: String,
    role: &'static str,
    merchant_id: Option<String>,
    password_hash: Option<String>,
    totp_secret: Option<String>,
    totp_confirmed_at: Option<i64>,
    disabled: bool,
    created_at: i64,
}

impl UserValues {
    fn of(u: &UserRecord) -> UserValues {
        UserValues {
            id: u.id.to_string(),
            email: u.email.clone(),
            role: u.role.kind(),
            merchant_id: u.role.merchant().map(|m| m.to_string()),
            password_hash: u.password_hash.clone(),
            totp_secret: u.totp_secret.as_ref().map(|s| s.expose().to_string()),
            totp_confirmed_at: u.totp_confirmed_at.map(Timestamp::unix_millis),
            disabled: u.disabled,
            created_at: u.created_at.unix_millis(),
        }
    }

    fn params(&self) -> [&(dyn ToSql + Sync); 9] {
        [
            &self.id,
            &self.email,
            &self.role,
            &self.merchant_id,
            &self.password_hash,
            &self.totp_secret,
            &self.totp_confirmed_at,
            &self.disabled,
            &self.created_at,
        ]
    }
}

pub(crate) async fn insert_user<C: GenericClient>(c: &C, u: &UserRecord) -> Result<(), StoreError> {
    let v = UserValues::of(u);
    execute_raw(
        c,
        &format!(
            "INSERT INTO cabinet_users ({USER_COLUMNS}) \
             VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9)"
        ),
        &v.params(),
    )
    .await
    .map_err(|e| duplicate(e, || format!("user {}", u.email)))?;
    Ok(())
}

pub(crate) async fn update_user<C: GenericClient>(c: &C, u: &UserRecord) -> Result<(), StoreError> {
    let v = UserValues::of(u);
    let n = execute_raw(
        c,
        "UPDATE cabinet_users SET email = $2, role = $3, merchant_id = $4, \
         password_hash = $5, totp_secret = $6, totp_confirmed_at = $7, disabled = $8, \
         created_at = $9 WHERE id = $1",
        &v.params(),
    )
    .await
    .map_err(|e| duplicate(e, || format!("user {}", u.email)))?;
    if n == 0 {
        return Err(StoreError::NotFound(format!("user {}", u.id)));
    }
    Ok(())
}

pub(crate) async fn user<C: GenericClient>(
    c: &C,
    id: UserId,
) -> Result<Option<UserRecord>, StoreError> {
    query_opt(
        c,
        &format!("SELECT {USER_COLUMNS} FROM cabinet_users WHERE id = $1"),
        &[&id.to_string()],
    )
    .await?
    .as_ref()
    .map(user_from_row)
    .transpose()
}

pub(crate) async fn user_by_email<C: GenericClient>(
    c: &C,
    email: &str,
) -> Result<Option<UserRecord>, StoreError> {
    query_opt(
        c,
        &format!("SELECT {USER_COLUMNS} FROM cabinet_users WHERE email = $1"),
        &[&email],
    )
    .await?
    .as_ref()
    .map(user_from_row)
    .transpose()
}

pub(crate) async fn users<C: GenericClient>(c: &C) -> Result<Vec<UserRecord>, StoreError> {
    query(
        c,
        &format!("SELECT {USER_COLUMNS} FROM cabinet_users ORDER BY email"),
        &[],
    )
    .await?
    .iter()
    .map(user_from_row)
    .collect()
}

pub(crate) async fn totp_last_step<C: GenericClient>(
    c: &C,
    user: UserId,
) -> Result<Option<u64>, StoreError> {
    let Some(row) = query_opt(
        c,
        "SELECT totp_last_step FROM cabinet_users WHERE id = $1",
        &[&user.to_string()],
    )
    .await?
    else {
        return Ok(None);
    };
    Cols::new(&row)
        .opt_int("totp_last_step")?
        .map(|s| u64::try_from(s).map_err(|_| corrupt("totp_last_step", s)))
        .transpose()
}

// --- recovery codes --------------------------------------------------------------------------

/// Replaces the user's codes; the caller runs it in a transaction.
pub(crate) async fn replace_recovery_codes<C: GenericClient>(
    c: &C,
    user: UserId,
    codes: &[[u8; 32]],
) -> Result<(), StoreError> {
    let id = user.to_string();
    execute(
        c,
        "DELETE FROM cabinet_recovery_codes WHERE user_id = $1",
        &[&id],
    )
    .await?;
    let hashes: Vec<&[u8]> = codes.iter().map(|h| h.as_slice()).collect();
    execute(
        c,
        "INSERT INTO cabinet_recovery_codes (user_id, code_hash) \
         SELECT $1, h FROM unnest($2::BYTEA[]) AS h ON CONFLICT DO NOTHING",
        &[&id, &hashes],
    )
    .await?;
    Ok(())
}

pub(crate) async fn recovery_codes_left<C: GenericClient>(
    c: &C,
    user: UserId,
) -> Result<u32, StoreError> {
    let row = query_opt(
        c,
        "SELECT count(*) AS n FROM cabinet_recovery_codes WHERE user_id = $1",
        &[&user.to_string()],
    )
    .await?;
    match row {
        Some(row) => Cols::new(&row).num("n"),
        None => Ok(0),
    }
}

// --- sessions --------------------------------------------------------------------------------

const SESSION_COLUMNS: &str = "id, token_hash, user_id, stage, created_at, signed_in_at, \
    last_seen_at, address, user_agent";

fn session_from_row(row: &Row) -> Result<SessionRecord, StoreError> {
    let c = Cols::new(row);
    Ok(SessionRecord {
        id: c.parsed("id")?,
        token_hash: c.bytes32("token_hash")?,
        user_id: c.parsed("user_id")?,
        stage: c.with("stage", SessionStage::parse)?,
        created_at: c.ts("created_at")?,
        signed_in_at: c.ts("signed_in_at")?,
        last_seen_at: c.ts("last_seen_at")?,
        address: c.opt_text("address")?,
        user_agent: c.opt_text("user_agent")?,
    })
}

pub(crate) async fn insert_session<C: GenericClient>(
    c: &C,
    s: &SessionRecord,
) -> Result<(), StoreError> {
    execute_raw(
        c,
        &format!(
            "INSERT INTO cabinet_sessions ({SESSION_COLUMNS}) \
             VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9)"
        ),
        &[
            &s.id.to_string(),
            &s.token_hash.as_slice(),
            &s.user_id.to_string(),
            &s.stage.as_str(),
            &s.created_at.unix_millis(),
            &s.signed_in_at.unix_millis(),
            &s.last_seen_at.unix_millis(),
            &s.address,
            &s.user_agent,
        ],
    )
    .await
    .map_err(|e| duplicate(e, || "session".into()))?;
    Ok(())
}

pub(crate) async fn session_by_token<C: GenericClient>(
    c: &C,
    hash: &[u8; 32],
) -> Result<Option<SessionRecord>, StoreError> {
    query_opt(
        c,
        &format!("SELECT {SESSION_COLUMNS} FROM cabinet_sessions WHERE token_hash = $1"),
        &[&hash.as_slice()],
    )
    .await?
    .as_ref()
    .map(session_from_row)
    .transpose()
}

pub(crate) async fn touch_session<C: GenericClient>(
    c: &C,
    id: SessionId,
    at: Timestamp,
) -> Result<bool, StoreError> {
    let n = execute(
        c,
        "UPDATE cabinet_sessions SET last_seen_at = GREATEST(last_seen_at, $2) WHERE id = $1",
        &[&id.to_string(), &at.unix_millis()],
    )
    .await?;
    Ok(n > 0)
}

pub(crate) async fn delete_session<C: GenericClient>(
    c: &C,
    id: SessionId,
) -> Result<bool, StoreError> {
    let n = execute(
        c,
        "DELETE FROM cabinet_sessions WHERE id = $1",
        &[&id.to_string()],
    )
    .await?;
    Ok(n > 0)
}

pub(crate) async fn user_sessions<C: GenericClient>(
    c: &C,
    user: UserId,
) -> Result<Vec<SessionRecord>, StoreError> {
    query(
        c,
        &format!(
            "SELECT {SESSION_COLUMNS} FROM cabinet_sessions WHERE user_id = $1 \
             ORDER BY created_at, id"
        ),
        &[&user.to_string()],
    )
    .await?
    .iter()
    .map(session_from_row)
    .collect()
}

pub(crate) async fn delete_user_sessions<C: GenericClient>(
    c: &C,
    user: UserId,
    keep: Option<SessionId>,
) -> Result<u64, StoreError> {
    execute(
        c,
        "DELETE FROM cabinet_sessions WHERE user_id = $1 AND id IS DISTINCT FROM $2",
        &[&user.to_string(), &keep.map(|k| k.to_string())],
    )
    .await
}

pub(crate) async fn purge_sessions<C: GenericClient>(
    c: &C,
    idle_before: Timestamp,
    signed_in_before: Timestamp,
) -> Result<u64, StoreError> {
    execute(
        c,
        "DELETE FROM cabinet_sessions WHERE last_seen_at < $1 OR signed_in_at < $2",
        &[&idle_before.unix_millis(), &signed_in_before.unix_millis()],
    )
    .await
}

/// The sign-in step, inside the caller's transaction. The old session's row is locked first
/// (`FOR UPDATE`): of concurrent steps from one session, one goes on and the others, once it
/// commits, find the session gone. Then the proof's conditional write (a TOTP step only if
/// later than the last, a recovery code deleted only if held, an enrolment only while the key
/// is unconfirmed); `Ok(false)` when it is refused, and the caller rolls back.
pub(crate) async fn advance_session<C: GenericClient>(
    c: &C,
    old: &[u8; 32],
    new: &SessionRecord,
    proof: &SessionProof,
) -> Result<bool, StoreError> {
    let Some(row) = query_opt(
        c,
        "SELECT id, user_id FROM cabinet_sessions WHERE token_hash = $1 FOR UPDATE",
        &[&old.as_slice()],
    )
    .await?
    else {
        return Ok(false);
    };
    let cols = Cols::new(&row);
    let current: SessionId = cols.parsed("id")?;
    let owner: UserId = cols.parsed("user_id")?;
    if owner != new.user_id {
        return Ok(false);
    }
    let user = new.user_id.to_string();
    let proved = match proof {
        SessionProof::None => true,
        SessionProof::TotpStep(step) => {
            execute(
                c,
                "UPDATE cabinet_users SET totp_last_step = $2 \
                 WHERE id = $1 AND (totp_last_step IS NULL OR totp_last_step < $2)",
                &[&user, &step_value(*step)?],
            )
            .await?
                == 1
        }
        SessionProof::RecoveryCode(hash) => {
            execute(
                c,
                "DELETE FROM cabinet_recovery_codes WHERE user_id = $1 AND code_hash = $2",
                &[&user, &hash.as_slice()],
            )
            .await?
                == 1
        }
        SessionProof::Enrolment {
            step,
            recovery_codes,
            at,
        } => {
            let confirmed = execute(
                c,
                "UPDATE cabinet_users SET totp_confirmed_at = $2, totp_last_step = $3 \
                 WHERE id = $1 AND totp_confirmed_at IS NULL AND totp_secret IS NOT NULL",
                &[&user, &at.unix_millis(), &step_value(*step)?],
            )
            .await?
                == 1;
            if confirmed {
                replace_recovery_codes(c, new.user_id, recovery_codes).await?;
            }
            confirmed
        }
    };
    if !proved {
        return Ok(false);
    }
    delete_session(c, current).await?;
    insert_session(c, new).await?;
    Ok(true)
}

// --- invitations -----------------------------------------------------------------------------

/// Stores an invitation and deletes the user's earlier ones; the caller runs it in a
/// transaction.
pub(crate) async fn put_invite<C: GenericClient>(
    c: &C,
    i: &InviteRecord,
) -> Result<(), StoreError> {
    execute(
        c,
        "DELETE FROM cabinet_invites WHERE user_id = $1",
        &[&i.user_id.to_string()],
    )
    .await?;
    execute_raw(
        c,
        "INSERT INTO cabinet_invites (token_hash, user_id, created_at, expires_at) \
         VALUES ($1, $2, $3, $4)",
        &[
            &i.token_hash.as_slice(),
            &i.user_id.to_string(),
            &i.created_at.unix_millis(),
            &i.expires_at.unix_millis(),
        ],
    )
    .await
    .map_err(|e| duplicate(e, || "invitation".into()))?;
    Ok(())
}

fn invite_from_row(row: &Row) -> Result<InviteRecord, StoreError> {
    let c = Cols::new(row);
    Ok(InviteRecord {
        token_hash: c.bytes32("token_hash")?,
        user_id: c.parsed("user_id")?,
        created_at: c.ts("created_at")?,
        expires_at: c.ts("expires_at")?,
    })
}

pub(crate) async fn invite<C: GenericClient>(
    c: &C,
    hash: &[u8; 32],
    now: Timestamp,
) -> Result<Option<InviteRecord>, StoreError> {
    query_opt(
        c,
        "SELECT token_hash, user_id, created_at, expires_at FROM cabinet_invites \
         WHERE token_hash = $1 AND expires_at > $2",
        &[&hash.as_slice(), &now.unix_millis()],
    )
    .await?
    .as_ref()
    .map(invite_from_row)
    .transpose()
}

/// Deletes the invitation and answers it if it was live: one statement, so of concurrent
/// takes exactly one deletes the row (the others wait on its lock and then find it gone).
pub(crate) async fn take_invite<C: GenericClient>(
    c: &C,
    hash: &[u8; 32],
    now: Timestamp,
) -> Result<Option<InviteRecord>, StoreError> {
    let found = query_opt(
        c,
        "DELETE FROM cabinet_invites WHERE token_hash = $1 \
         RETURNING token_hash, user_id, created_at, expires_at",
        &[&hash.as_slice()],
    )
    .await?
    .as_ref()
    .map(invite_from_row)
    .transpose()?;
    Ok(found.filter(|i| i.expires_at > now))
}

// --- failures --------------------------------------------------------------------------------

pub(crate) async fn record_failure<C: GenericClient>(
    c: &C,
    key: &str,
    at: Timestamp,
) -> Result<(), StoreError> {
    execute(
        c,
        "INSERT INTO cabinet_failures (key, at) VALUES ($1, $2)",
        &[&key, &at.unix_millis()],
    )
    .await?;
    Ok(())
}

pub(crate) async fn failures_since<C: GenericClient>(
    c: &C,
    key: &str,
    since: Timestamp,
    limit: usize,
) -> Result<Vec<Timestamp>, StoreError> {
    query(
        c,
        "SELECT at FROM cabinet_failures WHERE key = $1 AND at >= $2 ORDER BY at, seq LIMIT $3",
        &[&key, &since.unix_millis(), &codec::limit(limit)],
    )
    .await?
    .iter()
    .map(|row| Cols::new(row).ts("at"))
    .collect()
}

pub(crate) async fn clear_failures<C: GenericClient>(c: &C, key: &str) -> Result<(), StoreError> {
    execute(c, "DELETE FROM cabinet_failures WHERE key = $1", &[&key]).await?;
    Ok(())
}

pub(crate) async fn purge_failures<C: GenericClient>(
    c: &C,
    before: Timestamp,
) -> Result<u64, StoreError> {
    execute(
        c,
        "DELETE FROM cabinet_failures WHERE at < $1",
        &[&before.unix_millis()],
    )
    .await
}

// --- audit -----------------------------------------------------------------------------------

pub(crate) async fn append_audit<C: GenericClient>(
    c: &C,
    r: &CabinetAuditRecord,
) -> Result<(), StoreError> {
    execute(
        c,
        "INSERT INTO cabinet_audit (at, user_id, email, address, merchant_id, project_id, \
         action, target, success, detail) VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10)",
        &[
            &r.at.unix_millis(),
            &r.user_id.map(|u| u.to_string()),
            &r.email,
            &r.address,
            &r.merchant_id.map(|m| m.to_string()),
            &r.project_id.map(|p| p.to_string()),
            &r.action,
            &r.target,
            &r.success,
            &r.detail,
        ],
    )
    .await?;
    Ok(())
}

fn audit_from_row(row: &Row) -> Result<CabinetAuditRecord, StoreError> {
    let c = Cols::new(row);
    Ok(CabinetAuditRecord {
        at: c.ts("at")?,
        user_id: c.opt_parsed("user_id")?,
        email: c.text("email")?,
        address: c.opt_text("address")?,
        merchant_id: c.opt_parsed("merchant_id")?,
        project_id: c.opt_parsed("project_id")?,
        action: c.text("action")?,
        target: c.text("target")?,
        success: c.flag("success")?,
        detail: c.opt_text("detail")?,
    })
}

const AUDIT_COLUMNS: &str =
    "at, user_id, email, address, merchant_id, project_id, action, target, success, detail";

pub(crate) async fn audit<C: GenericClient>(
    c: &C,
    merchant: Option<MerchantId>,
    limit: usize,
) -> Result<Vec<CabinetAuditRecord>, StoreError> {
    let rows = match merchant {
        Some(m) => {
            query(
                c,
                &format!(
                    "SELECT {AUDIT_COLUMNS} FROM cabinet_audit WHERE merchant_id = $1 \
                     ORDER BY seq DESC LIMIT $2"
                ),
                &[&m.to_string(), &codec::limit(limit)],
            )
            .await?
        }
        None => {
            query(
                c,
                &format!("SELECT {AUDIT_COLUMNS} FROM cabinet_audit ORDER BY seq DESC LIMIT $1"),
                &[&codec::limit(limit)],
            )
            .await?
        }
    };
    rows.iter().map(audit_from_row).collect()
}

// --- token use -------------------------------------------------------------------------------

pub(crate) async fn record_token_use<C: GenericClient>(
    c: &C,
    token: TokenId,
    at: Timestamp,
) -> Result<(), StoreError> {
    execute(
        c,
        "INSERT INTO token_use (token_id, last_used_at) VALUES ($1, $2) \
         ON CONFLICT (token_id) DO UPDATE SET \
         last_used_at = GREATEST(token_use.last_used_at, EXCLUDED.last_used_at)",
        &[&token.to_string(), &at.unix_millis()],
    )
    .await?;
    Ok(())
}

pub(crate) async fn token_last_used<C: GenericClient>(
    c: &C,
    tokens: &[TokenId],
) -> Result<Vec<(TokenId, Timestamp)>, StoreError> {
    let ids: Vec<String> = tokens.iter().map(ToString::to_string).collect();
    let rows = query(
        c,
        "SELECT token_id, last_used_at FROM token_use WHERE token_id = ANY($1)",
        &[&ids],
    )
    .await?;
    let mut found = Vec::new();
    for row in &rows {
        let c = Cols::new(row);
        found.push((c.parsed::<TokenId>("token_id")?, c.ts("last_used_at")?));
    }
    // In the order asked.
    Ok(tokens
        .iter()
        .filter_map(|t| found.iter().find(|(id, _)| id == t).copied())
        .collect())
}

// --- payer page links ------------------------------------------------------------------------

/// The columns [`page_from_row`] reads.
const PAGE_COLUMNS: &str = "payment_id, token_hash, token, created_at";

fn page_from_row(row: &Row) -> Result<PaymentPageRecord, StoreError> {
    let c = Cols::new(row);
    Ok(PaymentPageRecord {
        payment_id: c.parsed("payment_id")?,
        token_hash: c.bytes32("token_hash")?,
        token: c.text("token")?.into(),
        created_at: c.ts("created_at")?,
    })
}

pub(crate) async fn payment_page<C: GenericClient>(
    c: &C,
    payment: PaymentId,
) -> Result<Option<PaymentPageRecord>, StoreError> {
    query_opt(
        c,
        &format!("SELECT {PAGE_COLUMNS} FROM payment_pages WHERE payment_id = $1"),
        &[&payment.to_string()],
    )
    .await?
    .as_ref()
    .map(page_from_row)
    .transpose()
}

pub(crate) async fn payment_page_by_hash<C: GenericClient>(
    c: &C,
    hash: &[u8; 32],
) -> Result<Option<PaymentPageRecord>, StoreError> {
    query_opt(
        c,
        &format!("SELECT {PAGE_COLUMNS} FROM payment_pages WHERE token_hash = $1"),
        &[&&hash[..]],
    )
    .await?
    .as_ref()
    .map(page_from_row)
    .transpose()
}

/// Inserts the link unless the payment has one, then answers the stored one. Of concurrent
/// inserts for one payment the later ones wait on the key and do nothing once the first
/// commits; the `SELECT`, a new statement, sees the winner. A token hash another payment
/// holds violates its unique index: `Duplicate`.
pub(crate) async fn ensure_payment_page<C: GenericClient>(
    c: &C,
    page: &PaymentPageRecord,
) -> Result<PaymentPageRecord, StoreError> {
    execute_raw(
        c,
        "INSERT INTO payment_pages (payment_id, token_hash, token, created_at) \
         VALUES ($1, $2, $3, $4) ON CONFLICT (payment_id) DO NOTHING",
        &[
            &page.payment_id.to_string(),
            &&page.token_hash[..],
            &page.token.expose(),
            &page.created_at.unix_millis(),
        ],
    )
    .await
    .map_err(|e| duplicate(e, || "payment page token".into()))?;
    payment_page(c, page.payment_id)
        .await?
        .ok_or_else(|| StoreError::Corrupt("the payment page just stored is missing".into()))
}

// --- listings --------------------------------------------------------------------------------

/// A `WHERE` clause grown condition by condition, its values numbered `$1, $2, ...`.
pub(crate) struct Conditions {
    pub(crate) sql: String,
    pub(crate) values: Vec<Box<dyn ToSql + Sync + Send>>,
}

impl Conditions {
    pub(crate) fn new(first: &str, value: Box<dyn ToSql + Sync + Send>) -> Conditions {
        let mut c = Conditions {
            sql: String::new(),
            values: Vec::new(),
        };
        c.add(first, value);
        c
    }

    /// Appends `cond`, each `?` in it standing for `value`.
    pub(crate) fn add(&mut self, cond: &str, value: Box<dyn ToSql + Sync + Send>) {
        self.values.push(value);
        self.sql
            .push_str(&cond.replace('?', &format!("${}", self.values.len())));
    }

    pub(crate) fn params(&self) -> Vec<&(dyn ToSql + Sync)> {
        self.values
            .iter()
            .map(|v| v.as_ref() as &(dyn ToSql + Sync))
            .collect()
    }
}

/// The conditions of a payment page (see [`PaymentQuery`]), newest first by
/// `(created_at, id)` through the `(project_id, created_at, id)` index.
pub(crate) fn payment_conditions(q: &PaymentQuery) -> Conditions {
    let mut w = Conditions::new("project_id = ?", Box::new(q.project.to_string()));
    if let Some(status) = q.status {
        w.add(" AND status = ?", Box::new(status.as_str()));
    }
    if let Some(t) = q.created_from {
        w.add(" AND created_at >= ?", Box::new(t.unix_millis()));
    }
    if let Some(t) = q.created_to {
        w.add(" AND created_at < ?", Box::new(t.unix_millis()));
    }
    if let Some(m) = &q.merchant_payment_id {
        w.add(
            " AND merchant_payment_id = ?",
            Box::new(m.as_str().to_string()),
        );
    }
    if let Some((t, id)) = q.before {
        w.add(" AND (created_at, id) < (?", Box::new(t.unix_millis()));
        w.add(", ?)", Box::new(id.to_string()));
    }
    w.add(
        " ORDER BY created_at DESC, id DESC LIMIT ?",
        Box::new(codec::limit(q.limit)),
    );
    w
}

/// The conditions of an event page (see [`EventQuery`]), newest first by
/// `(created_at, event_id)` through the `(project_id, created_at, event_id)` index.
pub(crate) fn event_conditions(q: &EventQuery) -> Conditions {
    let mut w = Conditions::new("project_id = ?", Box::new(q.project.to_string()));
    if let Some(state) = q.state {
        w.add(" AND state = ?", Box::new(state.as_str()));
    }
    if let Some(p) = q.payment {
        w.add(" AND payment_id = ?", Box::new(p.to_string()));
    }
    if let Some(t) = q.created_from {
        w.add(" AND created_at >= ?", Box::new(t.unix_millis()));
    }
    if let Some(t) = q.created_to {
        w.add(" AND created_at < ?", Box::new(t.unix_millis()));
    }
    if let Some((t, id)) = q.before {
        w.add(
            " AND (created_at, event_id) < (?",
            Box::new(t.unix_millis()),
        );
        w.add(", ?)", Box::new(id.to_string()));
    }
    w.add(
        " ORDER BY created_at DESC, event_id DESC LIMIT ?",
        Box::new(codec::limit(q.limit)),
    );
    w
}
