//! The web cabinet's records as SQL: users, recovery codes, sessions, invitations, one-time
//! slots, sign-in failures, the cabinet audit log and token use. The sign-in step ([`advance_session`]) is
//! one transaction: the old session's row is locked first, the proof's conditional write
//! decides, and a refused proof rolls back. Statements and rows are the shared ones
//! ([`payments_store_sql::statements`]).
//!
//! The cabinet's ports on [`PgStore`] ([`CabinetUsers`], [`CabinetSessions`], [`CabinetInvites`],
//! [`SignInFailures`], [`CabinetSlots`], [`CabinetAuditLog`]) are at the end: each call takes a pooled connection.

use async_trait::async_trait;
use deadpool_postgres::GenericClient;
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
use payments_store_sql::SqlValue;

use crate::codec::{self, execute, query, query_opt, read, record, records, sql, write_record};
use crate::error::{db, duplicate};
use crate::PgStore;

// --- users -----------------------------------------------------------------------------------

pub(crate) async fn insert_user<C: GenericClient>(c: &C, u: &UserRecord) -> Result<(), StoreError> {
    duplicate(write_record(c, &st::USER_INSERT, u).await?, || {
        format!("user {}", u.email)
    })?;
    Ok(())
}

pub(crate) async fn update_user<C: GenericClient>(c: &C, u: &UserRecord) -> Result<(), StoreError> {
    let n = duplicate(write_record(c, &st::USER_UPDATE, u).await?, || {
        format!("user {}", u.email)
    })?;
    if n == 0 {
        return Err(StoreError::NotFound(format!("user {}", u.id)));
    }
    Ok(())
}

pub(crate) async fn user<C: GenericClient>(
    c: &C,
    id: UserId,
) -> Result<Option<UserRecord>, StoreError> {
    record(c, &st::USER, &[&id.to_string()]).await
}

pub(crate) async fn user_by_email<C: GenericClient>(
    c: &C,
    email: &str,
) -> Result<Option<UserRecord>, StoreError> {
    record(c, &st::USER_BY_EMAIL, &[&email]).await
}

pub(crate) async fn users<C: GenericClient>(c: &C) -> Result<Vec<UserRecord>, StoreError> {
    records(c, &st::USERS, &[]).await
}

// --- recovery codes --------------------------------------------------------------------------

/// Replaces the user's codes; the caller runs it in a transaction.
pub(crate) async fn update_recovery_codes<C: GenericClient>(
    c: &C,
    user: UserId,
    codes: &[[u8; 32]],
) -> Result<(), StoreError> {
    let id = user.to_string();
    execute(c, sql(&st::RECOVERY_CODES_DELETE), &[&id]).await?;
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

pub(crate) async fn count_recovery_codes<C: GenericClient>(
    c: &C,
    user: UserId,
) -> Result<u32, StoreError> {
    match query_opt(c, sql(&st::RECOVERY_CODES_LEFT), &[&user.to_string()]).await? {
        Some(row) => read(&row, |c| c.num("n")),
        None => Ok(0),
    }
}

// --- sessions --------------------------------------------------------------------------------

pub(crate) async fn insert_session<C: GenericClient>(
    c: &C,
    s: &SessionRecord,
) -> Result<(), StoreError> {
    duplicate(write_record(c, &st::SESSION_INSERT, s).await?, || {
        "session".into()
    })?;
    Ok(())
}

pub(crate) async fn session_by_token<C: GenericClient>(
    c: &C,
    hash: &[u8; 32],
) -> Result<Option<SessionRecord>, StoreError> {
    record(c, &st::SESSION_BY_TOKEN, &[&hash.as_slice()]).await
}

pub(crate) async fn update_session_seen<C: GenericClient>(
    c: &C,
    id: SessionId,
    at: Timestamp,
) -> Result<bool, StoreError> {
    let n = execute(
        c,
        sql(&st::SESSION_TOUCH),
        &[&id.to_string(), &at.unix_millis()],
    )
    .await?;
    Ok(n > 0)
}

pub(crate) async fn delete_session<C: GenericClient>(
    c: &C,
    id: SessionId,
) -> Result<bool, StoreError> {
    Ok(execute(c, sql(&st::SESSION_DELETE), &[&id.to_string()]).await? > 0)
}

pub(crate) async fn user_sessions<C: GenericClient>(
    c: &C,
    user: UserId,
) -> Result<Vec<SessionRecord>, StoreError> {
    records(c, &st::USER_SESSIONS, &[&user.to_string()]).await
}

pub(crate) async fn delete_user_sessions<C: GenericClient>(
    c: &C,
    user: UserId,
    keep: Option<SessionId>,
) -> Result<u64, StoreError> {
    execute(
        c,
        sql(&st::USER_SESSIONS_DELETE),
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
        sql(&st::SESSIONS_PURGE),
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
    let (current, owner): (SessionId, UserId) =
        read(&row, |c| Ok((c.parsed("id")?, c.parsed("user_id")?)))?;
    if owner != new.user_id {
        return Ok(false);
    }
    let proved = match st::session_proof(new.user_id, proof)? {
        None => true,
        Some((statement, values)) => {
            let values = codec::params(values);
            execute(c, sql(statement), &codec::refs(&values)).await? == 1
        }
    };
    if proved {
        if let SessionProof::Enrolment { recovery_codes, .. } = proof {
            update_recovery_codes(c, new.user_id, recovery_codes).await?;
        }
    }
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
pub(crate) async fn insert_invite<C: GenericClient>(
    c: &C,
    i: &InviteRecord,
) -> Result<(), StoreError> {
    execute(c, sql(&st::INVITES_DELETE), &[&i.user_id.to_string()]).await?;
    duplicate(write_record(c, &st::INVITE_INSERT, i).await?, || {
        "invitation".into()
    })?;
    Ok(())
}

pub(crate) async fn find_invite<C: GenericClient>(
    c: &C,
    hash: &[u8; 32],
    now: Timestamp,
) -> Result<Option<InviteRecord>, StoreError> {
    record(c, &st::INVITE, &[&hash.as_slice(), &now.unix_millis()]).await
}

/// Deletes the invitation and answers it if it was live: one statement, so of concurrent
/// takes exactly one deletes the row (the others wait on its lock and then find it gone).
pub(crate) async fn take_invite<C: GenericClient>(
    c: &C,
    hash: &[u8; 32],
    now: Timestamp,
) -> Result<Option<InviteRecord>, StoreError> {
    let found: Option<InviteRecord> = record(c, &st::INVITE_TAKE, &[&hash.as_slice()]).await?;
    Ok(found.filter(|i| i.expires_at > now))
}

// --- one-time slots --------------------------------------------------------------------------

/// Two statements without a transaction: the trim deletes only slots outside the owner's
/// newest `keep` at its own moment, so a concurrent put of the same owner never loses its
/// new slot to it.
pub(crate) async fn insert_slot<C: GenericClient>(
    c: &C,
    slot: &SlotRecord,
    keep: usize,
) -> Result<(), StoreError> {
    duplicate(write_record(c, &st::SLOT_INSERT, slot).await?, || {
        "slot".into()
    })?;
    let keep = i64::try_from(keep).unwrap_or(i64::MAX);
    let values = codec::params([slot_owner(slot.owner), SqlValue::Int(keep)]);
    execute(c, sql(&st::SLOT_TRIM), &codec::refs(&values)).await?;
    Ok(())
}

/// One `DELETE ... RETURNING`: of concurrent takes exactly one deletes the row (the others
/// wait on its lock and then find it gone).
pub(crate) async fn take_slot<C: GenericClient>(
    c: &C,
    hash: &[u8; 32],
    owner: Option<SessionId>,
    now: Timestamp,
) -> Result<Option<SlotRecord>, StoreError> {
    let values = codec::params([SqlValue::blob(*hash), slot_owner(owner), SqlValue::ts(now)]);
    record(c, &st::SLOT_TAKE, &codec::refs(&values)).await
}

pub(crate) async fn delete_expired_slots<C: GenericClient>(
    c: &C,
    now: Timestamp,
    keep: u64,
) -> Result<u64, StoreError> {
    let expired = execute(c, sql(&st::SLOTS_PURGE), &[&now.unix_millis()]).await?;
    let keep = i64::try_from(keep).unwrap_or(i64::MAX);
    Ok(expired + execute(c, sql(&st::SLOTS_OVER), &[&keep]).await?)
}

// --- failures --------------------------------------------------------------------------------

pub(crate) async fn insert_failure<C: GenericClient>(
    c: &C,
    key: &str,
    at: Timestamp,
) -> Result<(), StoreError> {
    execute(c, sql(&st::FAILURE_INSERT), &[&key, &at.unix_millis()]).await?;
    Ok(())
}

pub(crate) async fn find_failures<C: GenericClient>(
    c: &C,
    key: &str,
    since: Timestamp,
    limit: usize,
) -> Result<Vec<Timestamp>, StoreError> {
    query(
        c,
        sql(&st::FAILURES_SINCE),
        &[&key, &since.unix_millis(), &codec::limit(limit)],
    )
    .await?
    .iter()
    .map(|row| read(row, |c| c.ts("at")))
    .collect()
}

pub(crate) async fn clear_failures<C: GenericClient>(c: &C, key: &str) -> Result<u64, StoreError> {
    execute(c, sql(&st::FAILURES_CLEAR), &[&key]).await
}

pub(crate) async fn forget_one_failure<C: GenericClient>(
    c: &C,
    key: &str,
    at: Timestamp,
) -> Result<u64, StoreError> {
    execute(c, sql(&st::FAILURE_FORGET_ONE), &[&key, &at.unix_millis()]).await
}

pub(crate) async fn purge_failures<C: GenericClient>(
    c: &C,
    before: Timestamp,
) -> Result<u64, StoreError> {
    execute(c, sql(&st::FAILURES_PURGE), &[&before.unix_millis()]).await
}

// --- audit -----------------------------------------------------------------------------------

pub(crate) async fn insert_audit<C: GenericClient>(
    c: &C,
    r: &CabinetAuditRecord,
) -> Result<(), StoreError> {
    write_record(c, &st::CABINET_AUDIT_INSERT, r)
        .await?
        .map_err(db)?;
    Ok(())
}

pub(crate) async fn find_audit<C: GenericClient>(
    c: &C,
    q: &AuditQuery,
) -> Result<AuditPage, StoreError> {
    let (sql, values) = listing::audit_page(q, codec::D);
    let found = query(c, &sql, &codec::refs(&codec::params(values)))
        .await?
        .iter()
        .map(|row| {
            read(row, |c| {
                Ok((c.num::<u64>("seq")?, CabinetAuditRecord::from_row(c)?))
            })
        })
        .collect::<Result<Vec<_>, StoreError>>()?;
    Ok(AuditPage::of(found, q.limit))
}

pub(crate) async fn delete_audit<C: GenericClient>(
    c: &C,
    before: Timestamp,
    keep: Option<u64>,
    limit: usize,
) -> Result<u64, StoreError> {
    let keep = keep.map_or(i64::MAX, |k| i64::try_from(k).unwrap_or(i64::MAX));
    execute(
        c,
        sql(&st::CABINET_AUDIT_PURGE),
        &[&before.unix_millis(), &keep, &codec::limit(limit)],
    )
    .await
}

// --- token use -------------------------------------------------------------------------------

pub(crate) async fn update_token_use<C: GenericClient>(
    c: &C,
    token: TokenId,
    at: Timestamp,
) -> Result<(), StoreError> {
    execute(
        c,
        sql(&st::TOKEN_USE),
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
        found.push(read(row, |c| {
            Ok((c.parsed::<TokenId>("token_id")?, c.ts("last_used_at")?))
        })?);
    }
    // In the order asked.
    Ok(tokens
        .iter()
        .filter_map(|t| found.iter().find(|(id, _)| id == t).copied())
        .collect())
}

// --- payer page links ------------------------------------------------------------------------

pub(crate) async fn payment_page<C: GenericClient>(
    c: &C,
    payment: PaymentId,
) -> Result<Option<PaymentPageRecord>, StoreError> {
    record(c, &st::PAGE, &[&payment.to_string()]).await
}

pub(crate) async fn payment_page_by_hash<C: GenericClient>(
    c: &C,
    hash: &[u8; 32],
) -> Result<Option<PaymentPageRecord>, StoreError> {
    record(c, &st::PAGE_BY_HASH, &[&&hash[..]]).await
}

/// Inserts the link unless the payment has one, then answers the stored one. Of concurrent
/// inserts for one payment the later ones wait on the key and do nothing once the first
/// commits; the `SELECT`, a new statement, sees the winner. A token hash another payment
/// holds violates its unique index: `Duplicate`.
pub(crate) async fn insert_payment_page_if_none<C: GenericClient>(
    c: &C,
    page: &PaymentPageRecord,
) -> Result<PaymentPageRecord, StoreError> {
    duplicate(write_record(c, &st::PAGE_INSERT, page).await?, || {
        "payment page token".into()
    })?;
    payment_page(c, page.payment_id)
        .await?
        .ok_or_else(|| StoreError::Corrupt("the payment page just stored is missing".into()))
}

// --- the ports ---------------------------------------------------------------------------

/// Runs `$body` on one pooled connection's transaction: committed when it answers `Ok`, rolled
/// back (dropped) otherwise.
macro_rules! in_transaction {
    ($store:expr, |$tx:ident| $body:expr) => {{
        let mut client = $store.client().await?;
        let $tx = client.transaction().await.map_err(db)?;
        let result = $body;
        match result {
            Ok(value) => {
                $tx.commit().await.map_err(db)?;
                Ok(value)
            }
            Err(e) => Err(e),
        }
    }};
}

#[async_trait]
impl CabinetUsers for PgStore {
    async fn insert_user(&self, user: &UserRecord) -> Result<(), StoreError> {
        let client = self.client().await?;
        insert_user(&client, user).await
    }

    async fn update_user(&self, user: &UserRecord) -> Result<(), StoreError> {
        let client = self.client().await?;
        update_user(&client, user).await
    }

    async fn find_users(&self, key: UserKey<'_>) -> Result<Vec<UserRecord>, StoreError> {
        let client = self.client().await?;
        let one = match key {
            UserKey::Id(id) => user(&client, id).await?,
            UserKey::Email(email) => user_by_email(&client, email).await?,
            UserKey::All => return users(&client).await,
        };
        Ok(one.into_iter().collect())
    }

    async fn update_recovery_codes(
        &self,
        user: UserId,
        codes: &[[u8; 32]],
    ) -> Result<(), StoreError> {
        in_transaction!(self, |tx| update_recovery_codes(&tx, user, codes).await)
    }

    async fn count_recovery_codes(&self, user: UserId) -> Result<u32, StoreError> {
        let client = self.client().await?;
        count_recovery_codes(&client, user).await
    }
}

#[async_trait]
impl CabinetSessions for PgStore {
    async fn insert_session(&self, session: &SessionRecord) -> Result<(), StoreError> {
        let client = self.client().await?;
        insert_session(&client, session).await
    }

    async fn find_sessions(&self, key: SessionKey<'_>) -> Result<Vec<SessionRecord>, StoreError> {
        let client = self.client().await?;
        match key {
            SessionKey::TokenHash(hash) => {
                Ok(session_by_token(&client, hash).await?.into_iter().collect())
            }
            SessionKey::User(user) => user_sessions(&client, user).await,
        }
    }

    async fn delete_sessions(&self, which: SessionScope) -> Result<u64, StoreError> {
        let client = self.client().await?;
        match which {
            SessionScope::One(id) => Ok(u64::from(delete_session(&client, id).await?)),
            SessionScope::User { user, keep } => delete_user_sessions(&client, user, keep).await,
            SessionScope::Stale {
                idle_before,
                signed_in_before,
            } => purge_sessions(&client, idle_before, signed_in_before).await,
        }
    }

    async fn update_session_seen(&self, id: SessionId, at: Timestamp) -> Result<bool, StoreError> {
        let client = self.client().await?;
        update_session_seen(&client, id, at).await
    }

    /// One transaction: a refused proof rolls back, so it writes nothing.
    async fn advance_session(
        &self,
        old: &[u8; 32],
        new: &SessionRecord,
        proof: &SessionProof,
    ) -> Result<bool, StoreError> {
        let mut client = self.client().await?;
        let tx = client.transaction().await.map_err(db)?;
        if !advance_session(&tx, old, new, proof).await? {
            tx.rollback().await.map_err(db)?;
            return Ok(false);
        }
        tx.commit().await.map_err(db)?;
        Ok(true)
    }
}

#[async_trait]
impl CabinetInvites for PgStore {
    async fn insert_invite(&self, invite: &InviteRecord) -> Result<(), StoreError> {
        in_transaction!(self, |tx| insert_invite(&tx, invite).await)
    }

    async fn find_invite(
        &self,
        hash: &[u8; 32],
        now: Timestamp,
    ) -> Result<Option<InviteRecord>, StoreError> {
        let client = self.client().await?;
        find_invite(&client, hash, now).await
    }

    async fn take_invite(
        &self,
        hash: &[u8; 32],
        now: Timestamp,
    ) -> Result<Option<InviteRecord>, StoreError> {
        let client = self.client().await?;
        take_invite(&client, hash, now).await
    }
}

#[async_trait]
impl CabinetSlots for PgStore {
    async fn insert_slot(&self, slot: &SlotRecord, keep: usize) -> Result<(), StoreError> {
        let client = self.client().await?;
        insert_slot(&client, slot, keep).await
    }

    async fn take_slot(
        &self,
        hash: &[u8; 32],
        owner: Option<SessionId>,
        now: Timestamp,
    ) -> Result<Option<SlotRecord>, StoreError> {
        let client = self.client().await?;
        take_slot(&client, hash, owner, now).await
    }

    async fn delete_expired_slots(&self, now: Timestamp, keep: u64) -> Result<u64, StoreError> {
        let client = self.client().await?;
        delete_expired_slots(&client, now, keep).await
    }
}

#[async_trait]
impl SignInFailures for PgStore {
    async fn insert_failure(&self, key: &str, at: Timestamp) -> Result<(), StoreError> {
        let client = self.client().await?;
        insert_failure(&client, key, at).await
    }

    async fn find_failures(
        &self,
        key: &str,
        since: Timestamp,
        limit: usize,
    ) -> Result<Vec<Timestamp>, StoreError> {
        let client = self.client().await?;
        find_failures(&client, key, since, limit).await
    }

    async fn delete_failures(&self, which: FailureScope<'_>) -> Result<u64, StoreError> {
        let client = self.client().await?;
        match which {
            FailureScope::Key(key) => clear_failures(&client, key).await,
            FailureScope::Before(before) => purge_failures(&client, before).await,
            FailureScope::One { key, at } => forget_one_failure(&client, key, at).await,
        }
    }
}

#[async_trait]
impl CabinetAuditLog for PgStore {
    async fn insert_cabinet_audit(&self, record: &CabinetAuditRecord) -> Result<(), StoreError> {
        let client = self.client().await?;
        insert_audit(&client, record).await
    }

    async fn find_cabinet_audit(&self, query: &AuditQuery) -> Result<AuditPage, StoreError> {
        let client = self.client().await?;
        find_audit(&client, query).await
    }

    async fn delete_cabinet_audit(
        &self,
        before: Timestamp,
        keep: Option<u64>,
        limit: usize,
    ) -> Result<u64, StoreError> {
        let client = self.client().await?;
        delete_audit(&client, before, keep, limit).await
    }
}
