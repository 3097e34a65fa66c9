//! An in-memory [`Store`]: the reference implementation of the store contract, for tests,
//! simulations and embedders' own tests.

use std::collections::{BTreeMap, HashMap};
use std::sync::Mutex;
use std::time::Duration;

use async_trait::async_trait;

use crate::clock::Timestamp;
use crate::event::{DeliveryAttempt, DeliveryState, EventRecord};
use crate::ids::{EventId, KeyId, MerchantId, PaymentId, ProjectId, TokenId};
use crate::payment::{MerchantPaymentId, Payment, PaymentStatus};
use crate::project::{AuditRecord, KeyRecord, Merchant, Project, SecretRecord, TokenRecord};
use crate::store::{
    AttemptRecorded, AuditStore, ClaimedEvent, DirectoryStore, InsertOutcome, LeaseToken,
    NonceStore, NonceUse, OutboxStore, PaymentChange, PaymentStore, Store, StoreError,
};
use crate::SecretString;

/// Everything in one mutex: each trait call is one atomic step, like a transaction.
#[derive(Debug, Default)]
pub struct MemoryStore {
    state: Mutex<State>,
}

#[derive(Debug, Default)]
struct State {
    payments: HashMap<PaymentId, Payment>,
    by_merchant_id: HashMap<(ProjectId, MerchantPaymentId), PaymentId>,
    nonces: HashMap<(ProjectId, String), Timestamp>,
    events: Vec<EventRecord>,
    /// The current lease token of each event in `events` (same index).
    leases: Vec<u64>,
    merchants: BTreeMap<MerchantId, Merchant>,
    projects: BTreeMap<ProjectId, Project>,
    tokens: Vec<TokenRecord>,
    keys: Vec<KeyRecord>,
    secrets: HashMap<ProjectId, Vec<SecretRecord>>,
    settings: HashMap<String, String>,
    audit: Vec<AuditRecord>,
}

impl State {
    /// The checks and writes of one change; nothing is written when a check fails.
    fn commit_change(&mut self, change: &PaymentChange) -> Result<(), StoreError> {
        let current = self
            .payments
            .get(&change.payment.id)
            .ok_or_else(|| StoreError::NotFound(format!("payment {}", change.payment.id)))?;
        if current.version != change.expected_version {
            return Err(StoreError::Conflict);
        }
        if let Some(ev) = &change.event {
            if self
                .events
                .iter()
                .any(|e| e.outbox.event.event_id == ev.event.event_id)
            {
                return Err(StoreError::Duplicate(format!(
                    "event {}",
                    ev.event.event_id
                )));
            }
        }
        self.payments
            .insert(change.payment.id, change.payment.clone());
        if let Some(ev) = &change.event {
            self.events.push(EventRecord {
                outbox: ev.clone(),
                attempts: Vec::new(),
            });
            self.leases.push(0);
        }
        if let Some(a) = &change.audit {
            self.audit.push(a.clone());
        }
        Ok(())
    }

    /// Whether `nonce` of `project` is recorded and live at `now`.
    fn nonce_live(&self, project: ProjectId, nonce: &str, now: Timestamp) -> bool {
        self.nonces
            .get(&(project, nonce.to_string()))
            .is_some_and(|exp| *exp > now)
    }
}

impl MemoryStore {
    /// An empty store.
    pub fn new() -> Self {
        Self::default()
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, State> {
        self.state
            .lock()
            .expect("memory store lock is never held across a panic")
    }
}

#[async_trait]
impl PaymentStore for MemoryStore {
    async fn insert_payment(&self, payment: &Payment) -> Result<InsertOutcome, StoreError> {
        let mut st = self.lock();
        let key = (payment.project_id, payment.merchant_payment_id.clone());
        if let Some(id) = st.by_merchant_id.get(&key) {
            return Ok(InsertOutcome::Existing(st.payments[id].clone()));
        }
        if st.payments.contains_key(&payment.id) {
            return Err(StoreError::Duplicate(format!("payment {}", payment.id)));
        }
        st.by_merchant_id.insert(key, payment.id);
        st.payments.insert(payment.id, payment.clone());
        Ok(InsertOutcome::Inserted)
    }

    async fn payment(&self, id: PaymentId) -> Result<Option<Payment>, StoreError> {
        Ok(self.lock().payments.get(&id).cloned())
    }

    async fn payment_by_merchant_id(
        &self,
        project: ProjectId,
        merchant_payment_id: &MerchantPaymentId,
    ) -> Result<Option<Payment>, StoreError> {
        let st = self.lock();
        Ok(st
            .by_merchant_id
            .get(&(project, merchant_payment_id.clone()))
            .map(|id| st.payments[id].clone()))
    }

    async fn commit_change(&self, change: &PaymentChange) -> Result<(), StoreError> {
        self.lock().commit_change(change)
    }

    async fn due_payments(&self, now: Timestamp, limit: usize) -> Result<Vec<Payment>, StoreError> {
        let st = self.lock();
        let mut due: Vec<Payment> = st
            .payments
            .values()
            .filter(|p| p.due_at().is_some_and(|d| d <= now))
            .cloned()
            .collect();
        due.sort_by_key(|p| (p.due_at(), p.id));
        due.truncate(limit);
        Ok(due)
    }

    async fn count_by_status(&self) -> Result<Vec<(PaymentStatus, u64)>, StoreError> {
        let st = self.lock();
        Ok(PaymentStatus::ALL
            .into_iter()
            .map(|s| {
                (
                    s,
                    st.payments.values().filter(|p| p.status == s).count() as u64,
                )
            })
            .filter(|(_, n)| *n > 0)
            .collect())
    }
}

#[async_trait]
impl NonceStore for MemoryStore {
    async fn use_nonce(
        &self,
        project: ProjectId,
        nonce: &str,
        now: Timestamp,
        expires_at: Timestamp,
    ) -> Result<bool, StoreError> {
        let mut st = self.lock();
        if st.nonce_live(project, nonce, now) {
            return Ok(false);
        }
        st.nonces.insert((project, nonce.to_string()), expires_at);
        Ok(true)
    }

    async fn purge_nonces(&self, now: Timestamp) -> Result<u64, StoreError> {
        let mut st = self.lock();
        let before = st.nonces.len();
        st.nonces.retain(|_, exp| *exp > now);
        Ok((before - st.nonces.len()) as u64)
    }
}

#[async_trait]
impl OutboxStore for MemoryStore {
    async fn claim_due_events(
        &self,
        now: Timestamp,
        limit: usize,
        lease: Duration,
    ) -> Result<Vec<ClaimedEvent>, StoreError> {
        let mut st = self.lock();
        let mut due: Vec<usize> = st
            .events
            .iter()
            .enumerate()
            .filter(|(_, e)| {
                e.outbox.state == DeliveryState::Pending
                    && e.outbox.next_attempt_at.is_some_and(|t| t <= now)
            })
            .map(|(i, _)| i)
            .collect();
        due.sort_by_key(|&i| (st.events[i].outbox.next_attempt_at, i));
        due.truncate(limit);
        let mut claimed = Vec::with_capacity(due.len());
        for i in due {
            st.leases[i] += 1;
            let token = LeaseToken::new(st.leases[i]);
            let ev = &mut st.events[i].outbox;
            claimed.push(ClaimedEvent {
                event: ev.clone(),
                lease: token,
            });
            ev.next_attempt_at = Some(now + lease);
        }
        Ok(claimed)
    }

    async fn record_attempt(
        &self,
        event_id: EventId,
        lease: LeaseToken,
        attempt: &DeliveryAttempt,
        next_attempt_at: Option<Timestamp>,
    ) -> Result<AttemptRecorded, StoreError> {
        let mut st = self.lock();
        let i = st
            .events
            .iter()
            .position(|e| e.outbox.event.event_id == event_id)
            .ok_or_else(|| StoreError::NotFound(format!("event {event_id}")))?;
        let current = st.leases[i] == lease.get();
        let rec = &mut st.events[i];
        rec.attempts.push(attempt.clone());
        if !current {
            return Ok(AttemptRecorded::Stale);
        }
        rec.outbox.attempts = rec.outbox.attempts.max(attempt.attempt);
        rec.outbox.next_attempt_at = next_attempt_at;
        rec.outbox.state = match (attempt.success, next_attempt_at) {
            (true, _) => DeliveryState::Delivered,
            (false, Some(_)) => DeliveryState::Pending,
            (false, None) => DeliveryState::Failed,
        };
        if rec.outbox.state != DeliveryState::Pending {
            rec.outbox.next_attempt_at = None;
        }
        Ok(AttemptRecorded::Applied)
    }

    async fn events_for_payment(&self, payment: PaymentId) -> Result<Vec<EventRecord>, StoreError> {
        Ok(self
            .lock()
            .events
            .iter()
            .filter(|e| e.outbox.event.payment_id == payment)
            .cloned()
            .collect())
    }

    async fn pending_events(&self) -> Result<u64, StoreError> {
        Ok(self
            .lock()
            .events
            .iter()
            .filter(|e| e.outbox.state == DeliveryState::Pending)
            .count() as u64)
    }
}

#[async_trait]
impl DirectoryStore for MemoryStore {
    async fn put_merchant(&self, merchant: &Merchant) -> Result<(), StoreError> {
        self.lock().merchants.insert(merchant.id, merchant.clone());
        Ok(())
    }

    async fn merchant(&self, id: MerchantId) -> Result<Option<Merchant>, StoreError> {
        Ok(self.lock().merchants.get(&id).cloned())
    }

    async fn merchants(&self) -> Result<Vec<Merchant>, StoreError> {
        Ok(self.lock().merchants.values().cloned().collect())
    }

    async fn put_project(&self, project: &Project) -> Result<(), StoreError> {
        let mut st = self.lock();
        if !st.merchants.contains_key(&project.merchant_id) {
            return Err(StoreError::NotFound(format!(
                "merchant {}",
                project.merchant_id
            )));
        }
        st.projects.insert(project.id, project.clone());
        Ok(())
    }

    async fn project(&self, id: ProjectId) -> Result<Option<Project>, StoreError> {
        Ok(self.lock().projects.get(&id).cloned())
    }

    async fn projects(&self) -> Result<Vec<Project>, StoreError> {
        Ok(self.lock().projects.values().cloned().collect())
    }

    async fn insert_token(&self, token: &TokenRecord) -> Result<(), StoreError> {
        let mut st = self.lock();
        if st
            .tokens
            .iter()
            .any(|t| t.hash == token.hash || t.id == token.id)
        {
            return Err(StoreError::Duplicate("token".into()));
        }
        st.tokens.push(token.clone());
        Ok(())
    }

    async fn token_by_hash(&self, hash: &[u8; 32]) -> Result<Option<TokenRecord>, StoreError> {
        Ok(self.lock().tokens.iter().find(|t| &t.hash == hash).cloned())
    }

    async fn tokens(&self, project: ProjectId) -> Result<Vec<TokenRecord>, StoreError> {
        Ok(self
            .lock()
            .tokens
            .iter()
            .filter(|t| t.project_id == project)
            .cloned()
            .collect())
    }

    async fn revoke_token(
        &self,
        project: ProjectId,
        id: TokenId,
        at: Timestamp,
    ) -> Result<bool, StoreError> {
        let mut st = self.lock();
        match st
            .tokens
            .iter_mut()
            .find(|t| t.id == id && t.project_id == project)
        {
            Some(t) => {
                t.revoked_at.get_or_insert(at);
                Ok(true)
            }
            None => Ok(false),
        }
    }

    async fn insert_key(&self, key: &KeyRecord) -> Result<(), StoreError> {
        let mut st = self.lock();
        if st
            .keys
            .iter()
            .any(|k| k.project_id == key.project_id && k.keyid == key.keyid)
        {
            return Err(StoreError::Duplicate(format!("key {}", key.keyid)));
        }
        st.keys.push(key.clone());
        Ok(())
    }

    async fn key(
        &self,
        project: ProjectId,
        keyid: &KeyId,
    ) -> Result<Option<KeyRecord>, StoreError> {
        Ok(self
            .lock()
            .keys
            .iter()
            .find(|k| k.project_id == project && &k.keyid == keyid)
            .cloned())
    }

    async fn keys(&self, project: ProjectId) -> Result<Vec<KeyRecord>, StoreError> {
        Ok(self
            .lock()
            .keys
            .iter()
            .filter(|k| k.project_id == project)
            .cloned()
            .collect())
    }

    async fn revoke_key(
        &self,
        project: ProjectId,
        keyid: &KeyId,
        at: Timestamp,
    ) -> Result<bool, StoreError> {
        let mut st = self.lock();
        match st
            .keys
            .iter_mut()
            .find(|k| k.project_id == project && &k.keyid == keyid)
        {
            Some(k) => {
                k.revoked_at.get_or_insert(at);
                Ok(true)
            }
            None => Ok(false),
        }
    }

    async fn callback_secrets(&self, project: ProjectId) -> Result<Vec<SecretRecord>, StoreError> {
        Ok(self
            .lock()
            .secrets
            .get(&project)
            .cloned()
            .unwrap_or_default())
    }

    async fn add_callback_secret(
        &self,
        project: ProjectId,
        secret: &SecretRecord,
    ) -> Result<(), StoreError> {
        let mut st = self.lock();
        let list = st.secrets.entry(project).or_default();
        list.insert(0, secret.clone());
        list.truncate(2);
        Ok(())
    }

    async fn add_callback_secret_if_none(
        &self,
        project: ProjectId,
        secret: &SecretRecord,
    ) -> Result<Vec<SecretRecord>, StoreError> {
        let mut st = self.lock();
        let list = st.secrets.entry(project).or_default();
        if list.is_empty() {
            list.push(secret.clone());
        }
        Ok(list.clone())
    }

    async fn replace_callback_secret(
        &self,
        project: ProjectId,
        old: &SecretString,
        new: &SecretString,
    ) -> Result<bool, StoreError> {
        let mut st = self.lock();
        let found = st
            .secrets
            .get_mut(&project)
            .and_then(|list| list.iter_mut().find(|s| &s.secret == old));
        match found {
            Some(s) => {
                s.secret = new.clone();
                Ok(true)
            }
            None => Ok(false),
        }
    }

    async fn setting(&self, name: &str) -> Result<Option<String>, StoreError> {
        Ok(self.lock().settings.get(name).cloned())
    }

    async fn put_setting(&self, name: &str, value: &str) -> Result<(), StoreError> {
        self.lock()
            .settings
            .insert(name.to_string(), value.to_string());
        Ok(())
    }
}

#[async_trait]
impl AuditStore for MemoryStore {
    async fn append_audit(&self, record: &AuditRecord) -> Result<(), StoreError> {
        self.lock().audit.push(record.clone());
        Ok(())
    }

    async fn audit_records(&self, limit: usize) -> Result<Vec<AuditRecord>, StoreError> {
        Ok(self
            .lock()
            .audit
            .iter()
            .rev()
            .take(limit)
            .cloned()
            .collect())
    }
}

#[async_trait]
impl Store for MemoryStore {
    async fn commit_change_once(
        &self,
        key: NonceUse<'_>,
        change: Option<&PaymentChange>,
    ) -> Result<bool, StoreError> {
        let mut st = self.lock();
        if st.nonce_live(key.project, key.nonce, key.now) {
            return Ok(false);
        }
        let Some(change) = change else {
            return Ok(true);
        };
        st.commit_change(change)?;
        st.nonces
            .insert((key.project, key.nonce.to_string()), key.expires_at);
        Ok(true)
    }
}
