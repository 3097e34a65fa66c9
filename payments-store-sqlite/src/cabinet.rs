//! The web cabinet's records as SQL: users, recovery codes, sessions, invitations, sign-in
//! failures, the cabinet audit log and token use. The sign-in step
//! ([`advance_session`]) runs in one writer job: its conditional update is the first write,
//! so a refused proof writes nothing.

use payments_core::cabinet::{
    CabinetAuditRecord, InviteRecord, Role, SessionProof, SessionRecord, SessionStage, UserRecord,
};
use payments_core::ids::{MerchantId, PaymentId, SessionId, TokenId, UserId};
use payments_core::payer::PaymentPageRecord;
use payments_core::store::StoreError;
use payments_core::Timestamp;
use rusqlite::{params, Connection, OptionalExtension, Row};

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

fn step_value(step: u64) -> Result<i64, StoreError> {
    codec::uint(step, "totp step")
}

// --- users -----------------------------------------------------------------------------------

const USER_COLUMNS: &str = "id, email, role, merchant_id, password_hash, totp_secret, \
    totp_confirmed_at, disabled, created_at";

fn user_from_row(row: &Row<'_>) -> Result<UserRecord, StoreError> {
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

fn duplicate_user(e: rusqlite::Error, u: &UserRecord) -> StoreError {
    if is_unique_violation(&e) {
        StoreError::Duplicate(format!("user {}", u.email))
    } else {
        db(e)
    }
}

pub(crate) fn insert_user(conn: &Connection, u: &UserRecord) -> Result<(), StoreError> {
    conn.prepare_cached(&format!(
        "INSERT INTO cabinet_users ({USER_COLUMNS}) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9)"
    ))
    .map_err(db)?
    .execute(params![
        u.id.to_string(),
        u.email,
        u.role.kind(),
        u.role.merchant().map(|m| m.to_string()),
        u.password_hash,
        u.totp_secret.as_ref().map(|s| s.expose().to_string()),
        u.totp_confirmed_at.map(Timestamp::unix_millis),
        u.disabled,
        u.created_at.unix_millis(),
    ])
    .map_err(|e| duplicate_user(e, u))?;
    Ok(())
}

pub(crate) fn update_user(conn: &Connection, u: &UserRecord) -> Result<(), StoreError> {
    let n = conn
        .prepare_cached(
            "UPDATE cabinet_users SET email = ?2, role = ?3, merchant_id = ?4, \
             password_hash = ?5, totp_secret = ?6, totp_confirmed_at = ?7, disabled = ?8, \
             created_at = ?9 WHERE id = ?1",
        )
        .map_err(db)?
        .execute(params![
            u.id.to_string(),
            u.email,
            u.role.kind(),
            u.role.merchant().map(|m| m.to_string()),
            u.password_hash,
            u.totp_secret.as_ref().map(|s| s.expose().to_string()),
            u.totp_confirmed_at.map(Timestamp::unix_millis),
            u.disabled,
            u.created_at.unix_millis(),
        ])
        .map_err(|e| duplicate_user(e, u))?;
    if n == 0 {
        return Err(StoreError::NotFound(format!("user {}", u.id)));
    }
    Ok(())
}

pub(crate) fn user(conn: &Connection, id: UserId) -> Result<Option<UserRecord>, StoreError> {
    Ok(query(
        conn,
        &format!("SELECT {USER_COLUMNS} FROM cabinet_users WHERE id = ?1"),
        [id.to_string()],
        user_from_row,
    )?
    .pop())
}

pub(crate) fn user_by_email(
    conn: &Connection,
    email: &str,
) -> Result<Option<UserRecord>, StoreError> {
    Ok(query(
        conn,
        &format!("SELECT {USER_COLUMNS} FROM cabinet_users WHERE email = ?1"),
        [email],
        user_from_row,
    )?
    .pop())
}

pub(crate) fn users(conn: &Connection) -> Result<Vec<UserRecord>, StoreError> {
    query(
        conn,
        &format!("SELECT {USER_COLUMNS} FROM cabinet_users ORDER BY email"),
        [],
        user_from_row,
    )
}

pub(crate) fn totp_last_step(conn: &Connection, user: UserId) -> Result<Option<u64>, StoreError> {
    let step: Option<Option<i64>> = conn
        .prepare_cached("SELECT totp_last_step FROM cabinet_users WHERE id = ?1")
        .map_err(db)?
        .query_row([user.to_string()], |r| r.get(0))
        .optional()
        .map_err(db)?;
    step.flatten()
        .map(|s| u64::try_from(s).map_err(|_| corrupt("totp_last_step", s)))
        .transpose()
}

// --- recovery codes --------------------------------------------------------------------------

pub(crate) fn replace_recovery_codes(
    conn: &Connection,
    user: UserId,
    codes: &[[u8; 32]],
) -> Result<(), StoreError> {
    let id = user.to_string();
    conn.prepare_cached("DELETE FROM cabinet_recovery_codes WHERE user_id = ?1")
        .map_err(db)?
        .execute([&id])
        .map_err(db)?;
    let mut insert = conn
        .prepare_cached(
            "INSERT OR IGNORE INTO cabinet_recovery_codes (user_id, code_hash) VALUES (?1, ?2)",
        )
        .map_err(db)?;
    for code in codes {
        insert.execute(params![id, code.as_slice()]).map_err(db)?;
    }
    Ok(())
}

pub(crate) fn recovery_codes_left(conn: &Connection, user: UserId) -> Result<u32, StoreError> {
    let n: i64 = conn
        .prepare_cached("SELECT count(*) FROM cabinet_recovery_codes WHERE user_id = ?1")
        .map_err(db)?
        .query_row([user.to_string()], |r| r.get(0))
        .map_err(db)?;
    u32::try_from(n).map_err(|_| corrupt("recovery code count", n))
}

// --- sessions --------------------------------------------------------------------------------

const SESSION_COLUMNS: &str = "id, token_hash, user_id, stage, created_at, signed_in_at, \
    last_seen_at, address, user_agent";

fn session_from_row(row: &Row<'_>) -> Result<SessionRecord, StoreError> {
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

pub(crate) fn insert_session(conn: &Connection, s: &SessionRecord) -> Result<(), StoreError> {
    conn.prepare_cached(&format!(
        "INSERT INTO cabinet_sessions ({SESSION_COLUMNS}) \
         VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9)"
    ))
    .map_err(db)?
    .execute(params![
        s.id.to_string(),
        s.token_hash.as_slice(),
        s.user_id.to_string(),
        s.stage.as_str(),
        s.created_at.unix_millis(),
        s.signed_in_at.unix_millis(),
        s.last_seen_at.unix_millis(),
        s.address,
        s.user_agent,
    ])
    .map_err(|e| {
        if is_unique_violation(&e) {
            StoreError::Duplicate("session".into())
        } else {
            db(e)
        }
    })?;
    Ok(())
}

pub(crate) fn session_by_token(
    conn: &Connection,
    hash: &[u8; 32],
) -> Result<Option<SessionRecord>, StoreError> {
    Ok(query(
        conn,
        &format!("SELECT {SESSION_COLUMNS} FROM cabinet_sessions WHERE token_hash = ?1"),
        [hash.as_slice()],
        session_from_row,
    )?
    .pop())
}

pub(crate) fn touch_session(
    conn: &Connection,
    id: SessionId,
    at: Timestamp,
) -> Result<bool, StoreError> {
    let n = conn
        .prepare_cached(
            "UPDATE cabinet_sessions SET last_seen_at = max(last_seen_at, ?2) WHERE id = ?1",
        )
        .map_err(db)?
        .execute(params![id.to_string(), at.unix_millis()])
        .map_err(db)?;
    Ok(n > 0)
}

pub(crate) fn delete_session(conn: &Connection, id: SessionId) -> Result<bool, StoreError> {
    let n = conn
        .prepare_cached("DELETE FROM cabinet_sessions WHERE id = ?1")
        .map_err(db)?
        .execute([id.to_string()])
        .map_err(db)?;
    Ok(n > 0)
}

pub(crate) fn user_sessions(
    conn: &Connection,
    user: UserId,
) -> Result<Vec<SessionRecord>, StoreError> {
    query(
        conn,
        &format!(
            "SELECT {SESSION_COLUMNS} FROM cabinet_sessions WHERE user_id = ?1 \
             ORDER BY created_at, id"
        ),
        [user.to_string()],
        session_from_row,
    )
}

pub(crate) fn delete_user_sessions(
    conn: &Connection,
    user: UserId,
    keep: Option<SessionId>,
) -> Result<u64, StoreError> {
    let n = conn
        .prepare_cached("DELETE FROM cabinet_sessions WHERE user_id = ?1 AND id IS NOT ?2")
        .map_err(db)?
        .execute(params![user.to_string(), keep.map(|k| k.to_string())])
        .map_err(db)?;
    Ok(n as u64)
}

pub(crate) fn purge_sessions(
    conn: &Connection,
    idle_before: Timestamp,
    signed_in_before: Timestamp,
) -> Result<u64, StoreError> {
    let n = conn
        .prepare_cached("DELETE FROM cabinet_sessions WHERE last_seen_at < ?1 OR signed_in_at < ?2")
        .map_err(db)?
        .execute(params![
            idle_before.unix_millis(),
            signed_in_before.unix_millis()
        ])
        .map_err(db)?;
    Ok(n as u64)
}

/// The sign-in step. The reads come first; the proof's conditional write is the first write,
/// so `false` leaves nothing written; a later error rolls the job's writes back (the writer's
/// second pass, with savepoints).
pub(crate) fn advance_session(
    conn: &Connection,
    old: &[u8; 32],
    new: &SessionRecord,
    proof: &SessionProof,
) -> Result<bool, StoreError> {
    let Some(current) = session_by_token(conn, old)? else {
        return Ok(false);
    };
    if current.user_id != new.user_id {
        return Ok(false);
    }
    let user = new.user_id.to_string();
    let proved = match proof {
        SessionProof::None => true,
        SessionProof::TotpStep(step) => {
            conn.prepare_cached(
                "UPDATE cabinet_users SET totp_last_step = ?2 \
                 WHERE id = ?1 AND (totp_last_step IS NULL OR totp_last_step < ?2)",
            )
            .map_err(db)?
            .execute(params![user, step_value(*step)?])
            .map_err(db)?
                == 1
        }
        SessionProof::RecoveryCode(hash) => {
            conn.prepare_cached(
                "DELETE FROM cabinet_recovery_codes WHERE user_id = ?1 AND code_hash = ?2",
            )
            .map_err(db)?
            .execute(params![user, hash.as_slice()])
            .map_err(db)?
                == 1
        }
        SessionProof::Enrolment {
            step,
            recovery_codes,
            at,
        } => {
            let confirmed = conn
                .prepare_cached(
                    "UPDATE cabinet_users SET totp_confirmed_at = ?2, totp_last_step = ?3 \
                     WHERE id = ?1 AND totp_confirmed_at IS NULL AND totp_secret IS NOT NULL",
                )
                .map_err(db)?
                .execute(params![user, at.unix_millis(), step_value(*step)?])
                .map_err(db)?
                == 1;
            if confirmed {
                replace_recovery_codes(conn, new.user_id, recovery_codes)?;
            }
            confirmed
        }
    };
    if !proved {
        return Ok(false);
    }
    delete_session(conn, current.id)?;
    insert_session(conn, new)?;
    Ok(true)
}

// --- invitations -----------------------------------------------------------------------------

pub(crate) fn put_invite(conn: &Connection, i: &InviteRecord) -> Result<(), StoreError> {
    conn.prepare_cached("DELETE FROM cabinet_invites WHERE user_id = ?1")
        .map_err(db)?
        .execute([i.user_id.to_string()])
        .map_err(db)?;
    conn.prepare_cached(
        "INSERT INTO cabinet_invites (token_hash, user_id, created_at, expires_at) \
         VALUES (?1, ?2, ?3, ?4)",
    )
    .map_err(db)?
    .execute(params![
        i.token_hash.as_slice(),
        i.user_id.to_string(),
        i.created_at.unix_millis(),
        i.expires_at.unix_millis()
    ])
    .map_err(|e| {
        if is_unique_violation(&e) {
            StoreError::Duplicate("invitation".into())
        } else {
            db(e)
        }
    })?;
    Ok(())
}

fn invite_from_row(row: &Row<'_>) -> Result<InviteRecord, StoreError> {
    let c = Cols::new(row);
    Ok(InviteRecord {
        token_hash: c.bytes32("token_hash")?,
        user_id: c.parsed("user_id")?,
        created_at: c.ts("created_at")?,
        expires_at: c.ts("expires_at")?,
    })
}

pub(crate) fn invite(
    conn: &Connection,
    hash: &[u8; 32],
    now: Timestamp,
) -> Result<Option<InviteRecord>, StoreError> {
    Ok(query(
        conn,
        "SELECT token_hash, user_id, created_at, expires_at FROM cabinet_invites \
         WHERE token_hash = ?1 AND expires_at > ?2",
        params![hash.as_slice(), now.unix_millis()],
        invite_from_row,
    )?
    .pop())
}

pub(crate) fn take_invite(
    conn: &Connection,
    hash: &[u8; 32],
    now: Timestamp,
) -> Result<Option<InviteRecord>, StoreError> {
    let found = query(
        conn,
        "DELETE FROM cabinet_invites WHERE token_hash = ?1 \
         RETURNING token_hash, user_id, created_at, expires_at",
        [hash.as_slice()],
        invite_from_row,
    )?
    .pop();
    Ok(found.filter(|i| i.expires_at > now))
}

// --- failures --------------------------------------------------------------------------------

pub(crate) fn record_failure(
    conn: &Connection,
    key: &str,
    at: Timestamp,
) -> Result<(), StoreError> {
    conn.prepare_cached("INSERT INTO cabinet_failures (key, at) VALUES (?1, ?2)")
        .map_err(db)?
        .execute(params![key, at.unix_millis()])
        .map_err(db)?;
    Ok(())
}

pub(crate) fn failures_since(
    conn: &Connection,
    key: &str,
    since: Timestamp,
    limit: usize,
) -> Result<Vec<Timestamp>, StoreError> {
    query(
        conn,
        "SELECT at FROM cabinet_failures WHERE key = ?1 AND at >= ?2 ORDER BY at LIMIT ?3",
        params![key, since.unix_millis(), codec::limit(limit)],
        |row| Cols::new(row).ts("at"),
    )
}

pub(crate) fn clear_failures(conn: &Connection, key: &str) -> Result<(), StoreError> {
    conn.prepare_cached("DELETE FROM cabinet_failures WHERE key = ?1")
        .map_err(db)?
        .execute([key])
        .map_err(db)?;
    Ok(())
}

pub(crate) fn purge_failures(conn: &Connection, before: Timestamp) -> Result<u64, StoreError> {
    let n = conn
        .prepare_cached("DELETE FROM cabinet_failures WHERE at < ?1")
        .map_err(db)?
        .execute([before.unix_millis()])
        .map_err(db)?;
    Ok(n as u64)
}

// --- audit -----------------------------------------------------------------------------------

pub(crate) fn append_audit(conn: &Connection, r: &CabinetAuditRecord) -> Result<(), StoreError> {
    conn.prepare_cached(
        "INSERT INTO cabinet_audit (at, user_id, email, address, merchant_id, project_id, \
         action, target, success, detail) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10)",
    )
    .map_err(db)?
    .execute(params![
        r.at.unix_millis(),
        r.user_id.map(|u| u.to_string()),
        r.email,
        r.address,
        r.merchant_id.map(|m| m.to_string()),
        r.project_id.map(|p| p.to_string()),
        r.action,
        r.target,
        r.success,
        r.detail,
    ])
    .map_err(db)?;
    Ok(())
}

fn audit_from_row(row: &Row<'_>) -> Result<CabinetAuditRecord, StoreError> {
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

pub(crate) fn audit(
    conn: &Connection,
    merchant: Option<MerchantId>,
    limit: usize,
) -> Result<Vec<CabinetAuditRecord>, StoreError> {
    match merchant {
        Some(m) => query(
            conn,
            "SELECT * FROM cabinet_audit WHERE merchant_id = ?1 ORDER BY seq DESC LIMIT ?2",
            params![m.to_string(), codec::limit(limit)],
            audit_from_row,
        ),
        None => query(
            conn,
            "SELECT * FROM cabinet_audit ORDER BY seq DESC LIMIT ?1",
            [codec::limit(limit)],
            audit_from_row,
        ),
    }
}

// --- token use -------------------------------------------------------------------------------

pub(crate) fn record_token_use(
    conn: &Connection,
    token: TokenId,
    at: Timestamp,
) -> Result<(), StoreError> {
    conn.prepare_cached(
        "INSERT INTO token_use (token_id, last_used_at) VALUES (?1, ?2) \
         ON CONFLICT (token_id) DO UPDATE SET \
         last_used_at = max(last_used_at, excluded.last_used_at)",
    )
    .map_err(db)?
    .execute(params![token.to_string(), at.unix_millis()])
    .map_err(db)?;
    Ok(())
}

pub(crate) fn token_last_used(
    conn: &Connection,
    tokens: &[TokenId],
) -> Result<Vec<(TokenId, Timestamp)>, StoreError> {
    let mut out = Vec::new();
    let mut stmt = conn
        .prepare_cached("SELECT last_used_at FROM token_use WHERE token_id = ?1")
        .map_err(db)?;
    for t in tokens {
        let at: Option<i64> = stmt
            .query_row([t.to_string()], |r| r.get(0))
            .optional()
            .map_err(db)?;
        if let Some(at) = at {
            out.push((*t, Timestamp::from_unix_millis(at)));
        }
    }
    Ok(out)
}

// --- payer page links ------------------------------------------------------------------------

fn page_from_row(row: &Row<'_>) -> Result<PaymentPageRecord, StoreError> {
    let c = Cols::new(row);
    Ok(PaymentPageRecord {
        payment_id: c.parsed("payment_id")?,
        token_hash: c.bytes32("token_hash")?,
        token: c.text("token")?.into(),
        created_at: c.ts("created_at")?,
    })
}

pub(crate) fn payment_page(
    conn: &Connection,
    payment: PaymentId,
) -> Result<Option<PaymentPageRecord>, StoreError> {
    Ok(query(
        conn,
        "SELECT * FROM payment_pages WHERE payment_id = ?1",
        [payment.to_string()],
        page_from_row,
    )?
    .pop())
}

pub(crate) fn payment_page_by_hash(
    conn: &Connection,
    hash: &[u8; 32],
) -> Result<Option<PaymentPageRecord>, StoreError> {
    Ok(query(
        conn,
        "SELECT * FROM payment_pages WHERE token_hash = ?1",
        [&hash[..]],
        page_from_row,
    )?
    .pop())
}

/// Inserts the link unless the payment has one (the payment id is the key), then answers the
/// stored one; one writer job, so concurrent calls see one record.
pub(crate) fn ensure_payment_page(
    conn: &Connection,
    page: &PaymentPageRecord,
) -> Result<PaymentPageRecord, StoreError> {
    conn.prepare_cached(
        "INSERT INTO payment_pages (payment_id, token_hash, token, created_at) \
         VALUES (?1, ?2, ?3, ?4) ON CONFLICT (payment_id) DO NOTHING",
    )
    .map_err(db)?
    .execute(params![
        page.payment_id.to_string(),
        &page.token_hash[..],
        page.token.expose(),
        page.created_at.unix_millis()
    ])
    .map_err(|e| {
        if is_unique_violation(&e) {
            StoreError::Duplicate("payment page token".into())
        } else {
            db(e)
        }
    })?;
    payment_page(conn, page.payment_id)?
        .ok_or_else(|| StoreError::Corrupt("the payment page just stored is missing".into()))
}
