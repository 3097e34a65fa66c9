//! [`MemoryCabinetStore`]: the cabinet's ports in memory, the reference implementation of their
//! contract, for tests and embedders' own tests.

use std::collections::{BTreeMap, HashMap};
use std::sync::Mutex;

use async_trait::async_trait;
use payments_core::ids::{SessionId, UserId};
use payments_core::store::StoreError;
use payments_core::Timestamp;

use crate::store::{
    AuditPage, AuditQuery, CabinetAuditLog, CabinetAuditRecord, CabinetInvites, CabinetSessions,
    CabinetSlots, CabinetUsers, FailureScope, InviteRecord, SessionKey, SessionProof,
    SessionRecord, SessionScope, SignInFailures, SlotRecord, UserKey, UserRecord,
};

/// The cabinet's records in one mutex: each call is one atomic step, like a transaction.
#[derive(Debug, Default)]
pub struct MemoryCabinetStore {
    state: Mutex<CabinetState>,
}

impl MemoryCabinetStore {
    /// An empty store.
    pub fn new() -> MemoryCabinetStore {
        MemoryCabinetStore::default()
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, CabinetState> {
        self.state
            .lock()
            .expect("the memory cabinet store's lock is never held across a panic")
    }
}

/// The web cabinet's records.
#[derive(Debug, Default)]
struct CabinetState {
    users: BTreeMap<UserId, UserRecord>,
    totp_last_step: HashMap<UserId, u64>,
    recovery_codes: HashMap<UserId, Vec<[u8; 32]>>,
    sessions: Vec<SessionRecord>,
    invites: Vec<InviteRecord>,
    slots: Vec<SlotRecord>,
    failures: Vec<(String, Timestamp)>,
    /// The audit log with each record's sequence number (the next is the last's plus one).
    audit: Vec<(u64, CabinetAuditRecord)>,
    audit_seq: u64,
}

#[async_trait]
impl CabinetUsers for MemoryCabinetStore {
    async fn insert_user(&self, user: &UserRecord) -> Result<(), StoreError> {
        let mut st = self.lock();
        let c = &mut *st;
        if c.users.contains_key(&user.id) || c.users.values().any(|u| u.email == user.email) {
            return Err(StoreError::Duplicate(format!("user {}", user.email)));
        }
        c.users.insert(user.id, user.clone());
        Ok(())
    }

    async fn update_user(&self, user: &UserRecord) -> Result<(), StoreError> {
        let mut st = self.lock();
        let c = &mut *st;
        if !c.users.contains_key(&user.id) {
            return Err(StoreError::NotFound(format!("user {}", user.id)));
        }
        if c.users
            .values()
            .any(|u| u.email == user.email && u.id != user.id)
        {
            return Err(StoreError::Duplicate(format!("user {}", user.email)));
        }
        c.users.insert(user.id, user.clone());
        Ok(())
    }

    async fn find_users(&self, key: UserKey<'_>) -> Result<Vec<UserRecord>, StoreError> {
        let st = self.lock();
        let mut users: Vec<UserRecord> = st
            .users
            .values()
            .filter(|u| match key {
                UserKey::Id(id) => u.id == id,
                UserKey::Email(email) => u.email == email,
                UserKey::All => true,
            })
            .cloned()
            .collect();
        users.sort_by(|a, b| a.email.cmp(&b.email));
        Ok(users)
    }

    async fn update_recovery_codes(
        &self,
        user: UserId,
        codes: &[[u8; 32]],
    ) -> Result<(), StoreError> {
        self.lock().recovery_codes.insert(user, codes.to_vec());
        Ok(())
    }

    async fn count_recovery_codes(&self, user: UserId) -> Result<u32, StoreError> {
        Ok(self
            .lock()
            .recovery_codes
            .get(&user)
            .map_or(0, |c| c.len() as u32))
    }
}

#[async_trait]
impl CabinetSessions for MemoryCabinetStore {
    async fn insert_session(&self, session: &SessionRecord) -> Result<(), StoreError> {
        let mut st = self.lock();
        let c = &mut *st;
        if c.sessions
            .iter()
            .any(|s| s.id == session.id || s.token_hash == session.token_hash)
        {
            return Err(StoreError::Duplicate("session".into()));
        }
        c.sessions.push(session.clone());
        Ok(())
    }

    async fn update_session_seen(&self, id: SessionId, at: Timestamp) -> Result<bool, StoreError> {
        let mut st = self.lock();
        match st.sessions.iter_mut().find(|s| s.id == id) {
            Some(s) => {
                s.last_seen_at = s.last_seen_at.max(at);
                Ok(true)
            }
            None => Ok(false),
        }
    }

    async fn find_sessions(&self, key: SessionKey<'_>) -> Result<Vec<SessionRecord>, StoreError> {
        let st = self.lock();
        let mut list: Vec<SessionRecord> = st
            .sessions
            .iter()
            .filter(|s| match key {
                SessionKey::TokenHash(hash) => &s.token_hash == hash,
                SessionKey::User(user) => s.user_id == user,
            })
            .cloned()
            .collect();
        list.sort_by_key(|s| (s.created_at, s.id));
        Ok(list)
    }

    async fn delete_sessions(&self, which: SessionScope) -> Result<u64, StoreError> {
        let mut st = self.lock();
        let before = st.sessions.len();
        st.sessions.retain(|s| match which {
            SessionScope::One(id) => s.id != id,
            SessionScope::User { user, keep } => s.user_id != user || Some(s.id) == keep,
            SessionScope::Stale {
                idle_before,
                signed_in_before,
            } => s.last_seen_at >= idle_before && s.signed_in_at >= signed_in_before,
        });
        Ok((before - st.sessions.len()) as u64)
    }

    async fn advance_session(
        &self,
        old: &[u8; 32],
        new: &SessionRecord,
        proof: &SessionProof,
    ) -> Result<bool, StoreError> {
        let mut st = self.lock();
        let c = &mut *st;
        let Some(index) = c.sessions.iter().position(|s| &s.token_hash == old) else {
            return Ok(false);
        };
        if c.sessions[index].user_id != new.user_id {
            return Ok(false);
        }
        if c.sessions
            .iter()
            .any(|s| s.id == new.id || s.token_hash == new.token_hash)
        {
            return Err(StoreError::Duplicate("session".into()));
        }
        let user = new.user_id;
        match proof {
            SessionProof::None => {}
            SessionProof::TotpStep(step) => {
                if c.totp_last_step.get(&user).is_some_and(|last| last >= step) {
                    return Ok(false);
                }
                c.totp_last_step.insert(user, *step);
            }
            SessionProof::RecoveryCode(hash) => {
                let codes = c.recovery_codes.entry(user).or_default();
                let Some(at) = codes.iter().position(|h| h == hash) else {
                    return Ok(false);
                };
                codes.remove(at);
            }
            SessionProof::Enrolment {
                step,
                recovery_codes,
                at,
            } => {
                let Some(u) = c.users.get_mut(&user) else {
                    return Ok(false);
                };
                if u.totp_confirmed_at.is_some() || u.totp_secret.is_none() {
                    return Ok(false);
                }
                u.totp_confirmed_at = Some(*at);
                c.totp_last_step.insert(user, *step);
                c.recovery_codes.insert(user, recovery_codes.clone());
            }
        }
        c.sessions.remove(index);
        c.sessions.push(new.clone());
        Ok(true)
    }
}

#[async_trait]
impl CabinetInvites for MemoryCabinetStore {
    async fn insert_invite(&self, invite: &InviteRecord) -> Result<(), StoreError> {
        let mut st = self.lock();
        st.invites.retain(|i| i.user_id != invite.user_id);
        st.invites.push(invite.clone());
        Ok(())
    }

    async fn find_invite(
        &self,
        hash: &[u8; 32],
        now: Timestamp,
    ) -> Result<Option<InviteRecord>, StoreError> {
        let st = self.lock();
        let found = st.invites.iter().find(|i| &i.token_hash == hash);
        Ok(found.filter(|i| i.expires_at > now).cloned())
    }

    async fn take_invite(
        &self,
        hash: &[u8; 32],
        now: Timestamp,
    ) -> Result<Option<InviteRecord>, StoreError> {
        let mut st = self.lock();
        let invites = &mut st.invites;
        let Some(index) = invites.iter().position(|i| &i.token_hash == hash) else {
            return Ok(None);
        };
        let invite = invites.remove(index);
        Ok((invite.expires_at > now).then_some(invite))
    }
}

#[async_trait]
impl SignInFailures for MemoryCabinetStore {
    async fn insert_failure(&self, key: &str, at: Timestamp) -> Result<(), StoreError> {
        self.lock().failures.push((key.to_string(), at));
        Ok(())
    }

    async fn find_failures(
        &self,
        key: &str,
        since: Timestamp,
        limit: usize,
    ) -> Result<Vec<Timestamp>, StoreError> {
        let mut times: Vec<Timestamp> = self
            .lock()
            .failures
            .iter()
            .filter(|(k, t)| k == key && *t >= since)
            .map(|(_, t)| *t)
            .collect();
        times.sort();
        times.truncate(limit);
        Ok(times)
    }

    async fn delete_failures(&self, which: FailureScope<'_>) -> Result<u64, StoreError> {
        let mut st = self.lock();
        let n = st.failures.len();
        if let FailureScope::One { key, at } = which {
            if let Some(i) = st.failures.iter().rposition(|(k, t)| k == key && *t == at) {
                st.failures.remove(i);
            }
            return Ok((n - st.failures.len()) as u64);
        }
        st.failures.retain(|(k, t)| match which {
            FailureScope::Key(key) => k != key,
            FailureScope::Before(before) => *t >= before,
            FailureScope::One { .. } => true,
        });
        Ok((n - st.failures.len()) as u64)
    }
}

#[async_trait]
impl CabinetSlots for MemoryCabinetStore {
    async fn insert_slot(&self, slot: &SlotRecord, keep: usize) -> Result<(), StoreError> {
        let mut st = self.lock();
        if st.slots.iter().any(|s| s.id_hash == slot.id_hash) {
            return Err(StoreError::Duplicate("slot".into()));
        }
        st.slots.push(slot.clone());
        let mut owners: Vec<(Timestamp, [u8; 32])> = st
            .slots
            .iter()
            .filter(|s| s.owner == slot.owner)
            .map(|s| (s.created_at, s.id_hash))
            .collect();
        owners.sort_unstable_by(|a, b| b.cmp(a));
        let kept: Vec<[u8; 32]> = owners.iter().take(keep).map(|(_, id)| *id).collect();
        st.slots
            .retain(|s| s.owner != slot.owner || kept.contains(&s.id_hash));
        Ok(())
    }

    async fn take_slot(
        &self,
        hash: &[u8; 32],
        owner: Option<SessionId>,
        now: Timestamp,
    ) -> Result<Option<SlotRecord>, StoreError> {
        let mut st = self.lock();
        let Some(index) = st
            .slots
            .iter()
            .position(|s| &s.id_hash == hash && s.owner == owner && s.expires_at > now)
        else {
            return Ok(None);
        };
        Ok(Some(st.slots.remove(index)))
    }

    async fn delete_expired_slots(&self, now: Timestamp, keep: u64) -> Result<u64, StoreError> {
        let mut st = self.lock();
        let n = st.slots.len();
        st.slots.retain(|s| s.expires_at > now);
        st.slots
            .sort_unstable_by_key(|s| std::cmp::Reverse((s.expires_at, s.id_hash)));
        st.slots
            .truncate(usize::try_from(keep).unwrap_or(usize::MAX));
        Ok((n - st.slots.len()) as u64)
    }
}

#[async_trait]
impl CabinetAuditLog for MemoryCabinetStore {
    async fn insert_cabinet_audit(&self, record: &CabinetAuditRecord) -> Result<(), StoreError> {
        let mut st = self.lock();
        st.audit_seq += 1;
        let seq = st.audit_seq;
        st.audit.push((seq, record.clone()));
        Ok(())
    }

    async fn find_cabinet_audit(&self, query: &AuditQuery) -> Result<AuditPage, StoreError> {
        let st = self.lock();
        let found: Vec<(u64, &CabinetAuditRecord)> = st
            .audit
            .iter()
            .rev()
            .filter(|(seq, r)| query.before.is_none_or(|b| *seq < b.0) && query.matches(r))
            .take(query.limit.saturating_add(1))
            .map(|(seq, r)| (*seq, r))
            .collect();
        Ok(AuditPage::of(found, query.limit))
    }

    async fn delete_cabinet_audit(
        &self,
        before: Timestamp,
        keep: Option<u64>,
        limit: usize,
    ) -> Result<u64, StoreError> {
        let mut st = self.lock();
        let newest = st.audit_seq;
        let oldest: Vec<u64> = st.audit.iter().take(limit).map(|(seq, _)| *seq).collect();
        let n = st.audit.len();
        st.audit.retain(|(seq, r)| {
            let out = r.at < before || keep.is_some_and(|k| *seq <= newest.saturating_sub(k));
            !(out && oldest.contains(seq))
        });
        Ok((n - st.audit.len()) as u64)
    }
}
