//! The web cabinet's records as SQL: users, recovery codes, sessions, invitations, one-time
//! slots, sign-in failures, the cabinet audit log and token use. The sign-in step
//! ([`advance_session`]) runs in one writer job: its conditional update is the first write,
//! so a refused proof writes nothing. Statements and rows are the shared ones
//! ([`payments_store_sql::statements`]).

use payments_cabinet::store::{
    AuditPage, AuditQuery, CabinetAuditRecord, InviteRecord, SessionProof, SessionRecord,
    SlotRecord, UserRecord,
};
use payments_core::ids::{PaymentId, SessionId, TokenId, UserId};
use payments_core::payer::PaymentPageRecord;
use payments_core::store::StoreError;
use payments_core::Timestamp;
use payments_store_sql::listing;
use payments_store_sql::record::{slot_owner, Record};
use payments_store_sql::statements as st;
use rusqlite::{params, Connection, OptionalExtension};

use crate::codec::{
    self, execute, execute_raw, query, record, record_params, records, sql, SqlValue,
};
use crate::error::{corrupt, db, duplicate};

// --- users -----------------------------------------------------------------------------------

pub(crate) fn insert_user(conn: &Connection, u: &UserRecord) -> Result<(), StoreError> {
    execute_raw(conn, &st::USER_INSERT, record_params(u)?)
        .map_err(|e| duplicate(e, || format!("user {}", u.email)))?;
    Ok(())
}

pub(crate) fn update_user(conn: &Connection, u: &UserRecord) -> Result<(), StoreError> {
    let n = execute_raw(conn, &st::USER_UPDATE, record_params(u)?)
        .map_err(|e| duplicate(e, || format!("user {}", u.email)))?;
    if n == 0 {
        return Err(StoreError::NotFound(format!("user {}", u.id)));
    }
    Ok(())
}

pub(crate) fn user(conn: &Connection, id: UserId) -> Result<Option<UserRecord>, StoreError> {
    record(conn, &st::USER, [id.to_string()])
}

pub(crate) fn user_by_email(
    conn: &Connection,
    email: &str,
) -> Result<Option<UserRecord>, StoreError> {
    record(conn, &st::USER_BY_EMAIL, [email])
}

pub(crate) fn users(conn: &Connection) -> Result<Vec<UserRecord>, StoreError> {
    records(conn, &st::USERS, [])
}

// --- recovery codes --------------------------------------------------------------------------

pub(crate) fn replace_recovery_codes(
    conn: &Connection,
    user: UserId,
    codes: &[[u8; 32]],
) -> Result<(), StoreError> {
    let id = user.to_string();
    execute(conn, &st::RECOVERY_CODES_DELETE, [&id])?;
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
        .prepare_cached(sql(&st::RECOVERY_CODES_LEFT))
        .map_err(db)?
        .query_row([user.to_string()], |r| r.get(0))
        .map_err(db)?;
    u32::try_from(n).map_err(|_| corrupt("recovery code count", n))
}

// --- sessions --------------------------------------------------------------------------------

pub(crate) fn insert_session(conn: &Connection, s: &SessionRecord) -> Result<(), StoreError> {
    execute_raw(conn, &st::SESSION_INSERT, record_params(s)?)
        .map_err(|e| duplicate(e, || "session".into()))?;
    Ok(())
}

pub(crate) fn session_by_token(
    conn: &Connection,
    hash: &[u8; 32],
) -> Result<Option<SessionRecord>, StoreError> {
    record(conn, &st::SESSION_BY_TOKEN, [hash.as_slice()])
}

pub(crate) fn touch_session(
    conn: &Connection,
    id: SessionId,
    at: Timestamp,
) -> Result<bool, StoreError> {
    let n = execute(
        conn,
        &st::SESSION_TOUCH,
        params![id.to_string(), at.unix_millis()],
    )?;
    Ok(n > 0)
}

pub(crate) fn delete_session(conn: &Connection, id: SessionId) -> Result<bool, StoreError> {
    Ok(execute(conn, &st::SESSION_DELETE, [id.to_string()])? > 0)
}

pub(crate) fn user_sessions(
    conn: &Connection,
    user: UserId,
) -> Result<Vec<SessionRecord>, StoreError> {
    records(conn, &st::USER_SESSIONS, [user.to_string()])
}

pub(crate) fn delete_user_sessions(
    conn: &Connection,
    user: UserId,
    keep: Option<SessionId>,
) -> Result<u64, StoreError> {
    let n = execute(
        conn,
        &st::USER_SESSIONS_DELETE,
        params![user.to_string(), keep.map(|k| k.to_string())],
    )?;
    Ok(n as u64)
}

pub(crate) fn purge_sessions(
    conn: &Connection,
    idle_before: Timestamp,
    signed_in_before: Timestamp,
) -> Result<u64, StoreError> {
    let n = execute(
        conn,
        &st::SESSIONS_PURGE,
        params![idle_before.unix_millis(), signed_in_before.unix_millis()],
    )?;
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
    let proved = match st::session_proof(new.user_id, proof)? {
        None => true,
        Some((statement, values)) => execute(conn, statement, codec::params(values))? == 1,
    };
    if !proved {
        return Ok(false);
    }
    if let SessionProof::Enrolment { recovery_codes, .. } = proof {
        replace_recovery_codes(conn, new.user_id, recovery_codes)?;
    }
    delete_session(conn, current.id)?;
    insert_session(conn, new)?;
    Ok(true)
}

// --- invitations -----------------------------------------------------------------------------

pub(crate) fn put_invite(conn: &Connection, i: &InviteRecord) -> Result<(), StoreError> {
    execute(conn, &st::INVITES_DELETE, [i.user_id.to_string()])?;
    execute_raw(conn, &st::INVITE_INSERT, record_params(i)?)
        .map_err(|e| duplicate(e, || "invitation".into()))?;
    Ok(())
}

pub(crate) fn invite(
    conn: &Connection,
    hash: &[u8; 32],
    now: Timestamp,
) -> Result<Option<InviteRecord>, StoreError> {
    record(
        conn,
        &st::INVITE,
        params![hash.as_slice(), now.unix_millis()],
    )
}

pub(crate) fn take_invite(
    conn: &Connection,
    hash: &[u8; 32],
    now: Timestamp,
) -> Result<Option<InviteRecord>, StoreError> {
    let found: Option<InviteRecord> = record(conn, &st::INVITE_TAKE, [hash.as_slice()])?;
    Ok(found.filter(|i| i.expires_at > now))
}

// --- one-time slots --------------------------------------------------------------------------

/// The insert and the owner's trim are one job of the writer: one transaction.
pub(crate) fn put_slot(
    conn: &Connection,
    slot: &SlotRecord,
    keep: usize,
) -> Result<(), StoreError> {
    execute_raw(conn, &st::SLOT_INSERT, record_params(slot)?)
        .map_err(|e| duplicate(e, || "slot".into()))?;
    let keep = i64::try_from(keep).unwrap_or(i64::MAX);
    execute(
        conn,
        &st::SLOT_TRIM,
        codec::params([slot_owner(slot.owner), SqlValue::Int(keep)]),
    )?;
    Ok(())
}

/// One `DELETE ... RETURNING`: of concurrent takes (the writer runs them one after another
/// anyway) the first deletes the row and the others find none.
pub(crate) fn take_slot(
    conn: &Connection,
    hash: &[u8; 32],
    owner: Option<SessionId>,
    now: Timestamp,
) -> Result<Option<SlotRecord>, StoreError> {
    record(
        conn,
        &st::SLOT_TAKE,
        codec::params([SqlValue::blob(*hash), slot_owner(owner), SqlValue::ts(now)]),
    )
}

pub(crate) fn purge_slots(conn: &Connection, now: Timestamp, keep: u64) -> Result<u64, StoreError> {
    let expired = execute(conn, &st::SLOTS_PURGE, [now.unix_millis()])? as u64;
    let keep = i64::try_from(keep).unwrap_or(i64::MAX);
    Ok(expired + execute(conn, &st::SLOTS_OVER, [keep])? as u64)
}

// --- failures --------------------------------------------------------------------------------

pub(crate) fn record_failure(
    conn: &Connection,
    key: &str,
    at: Timestamp,
) -> Result<(), StoreError> {
    execute(conn, &st::FAILURE_INSERT, params![key, at.unix_millis()])?;
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
        sql(&st::FAILURES_SINCE),
        params![key, since.unix_millis(), codec::limit(limit)],
        |c| c.ts("at"),
    )
}

pub(crate) fn clear_failures(conn: &Connection, key: &str) -> Result<u64, StoreError> {
    Ok(execute(conn, &st::FAILURES_CLEAR, [key])? as u64)
}

pub(crate) fn forget_one_failure(
    conn: &Connection,
    key: &str,
    at: Timestamp,
) -> Result<u64, StoreError> {
    Ok(execute(
        conn,
        &st::FAILURE_FORGET_ONE,
        params![key, at.unix_millis()],
    )? as u64)
}

pub(crate) fn purge_failures(conn: &Connection, before: Timestamp) -> Result<u64, StoreError> {
    Ok(execute(conn, &st::FAILURES_PURGE, [before.unix_millis()])? as u64)
}

// --- audit -----------------------------------------------------------------------------------

pub(crate) fn append_audit(conn: &Connection, r: &CabinetAuditRecord) -> Result<(), StoreError> {
    execute(conn, &st::CABINET_AUDIT_INSERT, record_params(r)?)?;
    Ok(())
}

pub(crate) fn audit(conn: &Connection, q: &AuditQuery) -> Result<AuditPage, StoreError> {
    let (sql, values) = listing::audit_page(q, codec::D);
    let found = query(conn, &sql, codec::params(values), |c| {
        Ok((c.num::<u64>("seq")?, CabinetAuditRecord::from_row(c)?))
    })?;
    Ok(AuditPage::of(found, q.limit))
}

pub(crate) fn purge_audit(
    conn: &Connection,
    before: Timestamp,
    keep: Option<u64>,
    limit: usize,
) -> Result<u64, StoreError> {
    let keep = keep.map_or(i64::MAX, |k| i64::try_from(k).unwrap_or(i64::MAX));
    Ok(execute(
        conn,
        &st::CABINET_AUDIT_PURGE,
        params![before.unix_millis(), keep, codec::limit(limit)],
    )? as u64)
}

// --- token use -------------------------------------------------------------------------------

pub(crate) fn record_token_use(
    conn: &Connection,
    token: TokenId,
    at: Timestamp,
) -> Result<(), StoreError> {
    execute(
        conn,
        &st::TOKEN_USE,
        params![token.to_string(), at.unix_millis()],
    )?;
    Ok(())
}

pub(crate) fn token_last_used(
    conn: &Connection,
    tokens: &[TokenId],
) -> Result<Vec<(TokenId, Timestamp)>, StoreError> {
    let mut out = Vec::new();
    let mut stmt = conn.prepare_cached(sql(&st::TOKEN_LAST_USED)).map_err(db)?;
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

pub(crate) fn payment_page(
    conn: &Connection,
    payment: PaymentId,
) -> Result<Option<PaymentPageRecord>, StoreError> {
    record(conn, &st::PAGE, [payment.to_string()])
}

pub(crate) fn payment_page_by_hash(
    conn: &Connection,
    hash: &[u8; 32],
) -> Result<Option<PaymentPageRecord>, StoreError> {
    record(conn, &st::PAGE_BY_HASH, [&hash[..]])
}

pub(crate) fn ensure_payment_page(
    conn: &Connection,
    page: &PaymentPageRecord,
) -> Result<PaymentPageRecord, StoreError> {
    execute_raw(conn, &st::PAGE_INSERT, record_params(page)?)
        .map_err(|e| duplicate(e, || "payment page token".into()))?;
    payment_page(conn, page.payment_id)?
        .ok_or_else(|| StoreError::Corrupt("the payment page just stored is missing".into()))
}
