//! The web cabinet's records as SQL: users, recovery codes, sessions, invitations, one-time
//! slots, sign-in failures, the cabinet audit log and token use. The sign-in step
//! ([`advance_session`]) runs in one writer job: its conditional update is the first write,
//! so a refused proof writes nothing. Statements and rows are the shared ones
//! ([`payments_store_sql::statements`]).
//!
//! The cabinet's ports on [`SqliteStore`] ([`CabinetUsers`], [`CabinetSessions`], [`CabinetInvites`],
//! [`SignInFailures`], [`CabinetSlots`], [`CabinetAuditLog`]) are at the end: writes go to the writer thread, reads to the pool.

use async_trait::async_trait;
use payments_cabinet::store::{
    AuditPage, AuditQuery, CabinetAuditLog, CabinetAuditRecord, CabinetInvites, CabinetSessions,
    CabinetSlots, CabinetUsers, FailureScope, InviteRecord, SessionKey, SessionProof,
    SessionRecord, SessionScope, SignInFailures, SlotRecord, UserKey, UserRecord,
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
use crate::SqliteStore;

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

pub(crate) fn update_recovery_codes(
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

pub(crate) fn count_recovery_codes(conn: &Connection, user: UserId) -> Result<u32, StoreError> {
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

pub(crate) fn update_session_seen(
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
        update_recovery_codes(conn, new.user_id, recovery_codes)?;
    }
    delete_session(conn, current.id)?;
    insert_session(conn, new)?;
    Ok(true)
}

// --- invitations -----------------------------------------------------------------------------

pub(crate) fn insert_invite(conn: &Connection, i: &InviteRecord) -> Result<(), StoreError> {
    execute(conn, &st::INVITES_DELETE, [i.user_id.to_string()])?;
    execute_raw(conn, &st::INVITE_INSERT, record_params(i)?)
        .map_err(|e| duplicate(e, || "invitation".into()))?;
    Ok(())
}

pub(crate) fn find_invite(
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
pub(crate) fn insert_slot(
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

pub(crate) fn delete_expired_slots(
    conn: &Connection,
    now: Timestamp,
    keep: u64,
) -> Result<u64, StoreError> {
    let expired = execute(conn, &st::SLOTS_PURGE, [now.unix_millis()])? as u64;
    let keep = i64::try_from(keep).unwrap_or(i64::MAX);
    Ok(expired + execute(conn, &st::SLOTS_OVER, [keep])? as u64)
}

// --- failures --------------------------------------------------------------------------------

pub(crate) fn insert_failure(
    conn: &Connection,
    key: &str,
    at: Timestamp,
) -> Result<(), StoreError> {
    execute(conn, &st::FAILURE_INSERT, params![key, at.unix_millis()])?;
    Ok(())
}

pub(crate) fn find_failures(
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

pub(crate) fn insert_audit(conn: &Connection, r: &CabinetAuditRecord) -> Result<(), StoreError> {
    execute(conn, &st::CABINET_AUDIT_INSERT, record_params(r)?)?;
    Ok(())
}

pub(crate) fn find_audit(conn: &Connection, q: &AuditQuery) -> Result<AuditPage, StoreError> {
    let (sql, values) = listing::audit_page(q, codec::D);
    let found = query(conn, &sql, codec::params(values), |c| {
        Ok((c.num::<u64>("seq")?, CabinetAuditRecord::from_row(c)?))
    })?;
    Ok(AuditPage::of(found, q.limit))
}

pub(crate) fn delete_audit(
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

pub(crate) fn update_token_use(
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

pub(crate) fn insert_payment_page_if_none(
    conn: &Connection,
    page: &PaymentPageRecord,
) -> Result<PaymentPageRecord, StoreError> {
    execute_raw(conn, &st::PAGE_INSERT, record_params(page)?)
        .map_err(|e| duplicate(e, || "payment page token".into()))?;
    payment_page(conn, page.payment_id)?
        .ok_or_else(|| StoreError::Corrupt("the payment page just stored is missing".into()))
}

// --- the ports ---------------------------------------------------------------------------

#[async_trait]
impl CabinetUsers for SqliteStore {
    async fn insert_user(&self, user: &UserRecord) -> Result<(), StoreError> {
        let u = user.clone();
        self.write(move |c| insert_user(c, &u)).await
    }

    async fn update_user(&self, user: &UserRecord) -> Result<(), StoreError> {
        let u = user.clone();
        self.write(move |c| update_user(c, &u)).await
    }

    async fn find_users(&self, key: UserKey<'_>) -> Result<Vec<UserRecord>, StoreError> {
        match key {
            UserKey::Id(id) => {
                self.read(move |c| Ok(user(c, id)?.into_iter().collect()))
                    .await
            }
            UserKey::Email(email) => {
                let email = email.to_string();
                self.read(move |c| Ok(user_by_email(c, &email)?.into_iter().collect()))
                    .await
            }
            UserKey::All => self.read(|c| users(c)).await,
        }
    }

    async fn update_recovery_codes(
        &self,
        user: UserId,
        codes: &[[u8; 32]],
    ) -> Result<(), StoreError> {
        let codes = codes.to_vec();
        self.write(move |c| update_recovery_codes(c, user, &codes))
            .await
    }

    async fn count_recovery_codes(&self, user: UserId) -> Result<u32, StoreError> {
        self.read(move |c| count_recovery_codes(c, user)).await
    }
}

#[async_trait]
impl CabinetSessions for SqliteStore {
    async fn insert_session(&self, session: &SessionRecord) -> Result<(), StoreError> {
        let s = session.clone();
        self.write(move |c| insert_session(c, &s)).await
    }

    async fn find_sessions(&self, key: SessionKey<'_>) -> Result<Vec<SessionRecord>, StoreError> {
        match key {
            SessionKey::TokenHash(hash) => {
                let hash = *hash;
                self.read(move |c| Ok(session_by_token(c, &hash)?.into_iter().collect()))
                    .await
            }
            SessionKey::User(user) => self.read(move |c| user_sessions(c, user)).await,
        }
    }

    async fn delete_sessions(&self, which: SessionScope) -> Result<u64, StoreError> {
        self.free(move |c| match which {
            SessionScope::One(id) => Ok(u64::from(delete_session(c, id)?)),
            SessionScope::User { user, keep } => delete_user_sessions(c, user, keep),
            SessionScope::Stale {
                idle_before,
                signed_in_before,
            } => purge_sessions(c, idle_before, signed_in_before),
        })
        .await
    }

    async fn update_session_seen(&self, id: SessionId, at: Timestamp) -> Result<bool, StoreError> {
        self.write(move |c| update_session_seen(c, id, at)).await
    }

    async fn advance_session(
        &self,
        old: &[u8; 32],
        new: &SessionRecord,
        proof: &SessionProof,
    ) -> Result<bool, StoreError> {
        let (old, new, proof) = (*old, new.clone(), proof.clone());
        self.write(move |c| advance_session(c, &old, &new, &proof))
            .await
    }
}

#[async_trait]
impl CabinetInvites for SqliteStore {
    async fn insert_invite(&self, invite: &InviteRecord) -> Result<(), StoreError> {
        let i = invite.clone();
        self.write(move |c| insert_invite(c, &i)).await
    }

    async fn find_invite(
        &self,
        hash: &[u8; 32],
        now: Timestamp,
    ) -> Result<Option<InviteRecord>, StoreError> {
        let hash = *hash;
        self.read(move |c| find_invite(c, &hash, now)).await
    }

    async fn take_invite(
        &self,
        hash: &[u8; 32],
        now: Timestamp,
    ) -> Result<Option<InviteRecord>, StoreError> {
        let hash = *hash;
        self.write(move |c| take_invite(c, &hash, now)).await
    }
}

#[async_trait]
impl CabinetSlots for SqliteStore {
    async fn insert_slot(&self, slot: &SlotRecord, keep: usize) -> Result<(), StoreError> {
        let slot = slot.clone();
        self.write(move |c| insert_slot(c, &slot, keep)).await
    }

    async fn take_slot(
        &self,
        hash: &[u8; 32],
        owner: Option<SessionId>,
        now: Timestamp,
    ) -> Result<Option<SlotRecord>, StoreError> {
        let hash = *hash;
        self.write(move |c| take_slot(c, &hash, owner, now)).await
    }

    async fn delete_expired_slots(&self, now: Timestamp, keep: u64) -> Result<u64, StoreError> {
        self.free(move |c| delete_expired_slots(c, now, keep)).await
    }
}

#[async_trait]
impl SignInFailures for SqliteStore {
    async fn insert_failure(&self, key: &str, at: Timestamp) -> Result<(), StoreError> {
        let key = key.to_string();
        self.write(move |c| insert_failure(c, &key, at)).await
    }

    async fn find_failures(
        &self,
        key: &str,
        since: Timestamp,
        limit: usize,
    ) -> Result<Vec<Timestamp>, StoreError> {
        let key = key.to_string();
        self.read(move |c| find_failures(c, &key, since, limit))
            .await
    }

    async fn delete_failures(&self, which: FailureScope<'_>) -> Result<u64, StoreError> {
        match which {
            FailureScope::Key(key) => {
                let key = key.to_string();
                self.write(move |c| clear_failures(c, &key)).await
            }
            FailureScope::Before(before) => self.free(move |c| purge_failures(c, before)).await,
            FailureScope::One { key, at } => {
                let key = key.to_string();
                self.write(move |c| forget_one_failure(c, &key, at)).await
            }
        }
    }
}

#[async_trait]
impl CabinetAuditLog for SqliteStore {
    async fn insert_cabinet_audit(&self, record: &CabinetAuditRecord) -> Result<(), StoreError> {
        let r = record.clone();
        self.write(move |c| insert_audit(c, &r)).await
    }

    async fn find_cabinet_audit(&self, query: &AuditQuery) -> Result<AuditPage, StoreError> {
        let q = query.clone();
        self.read(move |c| find_audit(c, &q)).await
    }

    async fn delete_cabinet_audit(
        &self,
        before: Timestamp,
        keep: Option<u64>,
        limit: usize,
    ) -> Result<u64, StoreError> {
        self.free(move |c| delete_audit(c, before, keep, limit))
            .await
    }
}
