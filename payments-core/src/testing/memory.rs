//! An in-memory [`Store`]: the reference implementation of the store contract, for tests,
//! simulations and embedders' own tests.

use crate::testing::matching::{AfterCursor, Matches};
use std::collections::{BTreeMap, HashMap};
use std::sync::Mutex;
use std::time::Duration;

use async_trait::async_trait;
use futures_util::FutureExt;

use crate::appeal::{Appeal, AppealInsert, AppealOrder, AppealQuery, MAX_APPEALS_PER_SOURCE};
use crate::clock::Timestamp;
use crate::event::{DeliveryAttempt, DeliveryState, EventRecord, FailedEvent, FailedEventFilter};
use crate::history::StatusChange;
use crate::ids::{AppealId, EventId, KeyId, MerchantId, PaymentId, ProjectId, TokenId};
use crate::ledger::{Balance, EntryKind, KindTotal, LedgerEntry, Posting};
use crate::payer::PaymentPageRecord;
use crate::payment::{MerchantPaymentId, Payment, PaymentStatus};
use crate::project::{
    AuditRecord, KeyRecord, Merchant, OperatorTokenRecord, Project, SecretRecord, TokenRecord,
};
use crate::receipt::Receipt;
use crate::request_log::{RequestLogEntry, RequestLogQuery};
use crate::store::{AppealStore, RequestLogStore};
use crate::store::{
    AttemptRecorded, AuditStore, Backlog, CallbackSecretStore, ClaimedEvent, CredentialStore,
    InsertOutcome, LeaseToken, MerchantStore, NonceUse, OperatorStore, OutboxStore, PageKey,
    PayerPageStore, PaymentChange, PaymentStore, Purged, Retained, SettingStore, Store, StoreError,
    TokenKey, Transaction, TxOutput, TxWork,
};
use crate::store::{EntryQuery, EventQuery, LedgerStore, PaymentQuery};
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
    /// Every payment's recorded status changes, in the order written.
    history: Vec<StatusChange>,
    /// Failed events answered by a resend: failed event -> the resend.
    resent: HashMap<EventId, EventId>,
    operator_tokens: Vec<OperatorTokenRecord>,
    /// When each token was last used.
    token_use: HashMap<TokenId, Timestamp>,
    /// The payer page links, by payment.
    payment_pages: HashMap<PaymentId, PaymentPageRecord>,
    /// Payment changes committed (each a write of its own in a real store).
    changes: u64,
    /// Each project's balance.
    balances: BTreeMap<ProjectId, Balance>,
    /// Every ledger entry, in the order appended.
    entries: Vec<LedgerEntry>,
    /// The request log, in the order written.
    requests: Vec<RequestLogEntry>,
    /// The last request log id given.
    request_seq: u64,
    /// The appeals, by id.
    appeals: BTreeMap<AppealId, Appeal>,
    /// Each appeal's receipts, in the order sent.
    receipts: HashMap<AppealId, Vec<Receipt>>,
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
        if let Some(p) = &change.ledger {
            self.check_posting(p)?;
            // Refused beyond the bound before anything of the change is written.
            self.balance(p.project_id).post(p)?;
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
        self.changes += 1;
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
        if let Some(h) = &change.history {
            self.history.push(h.clone());
        }
        if let Some(p) = &change.ledger {
            self.insert_posting(p)?;
        }
        Ok(())
    }

    /// A project's balance.
    fn balance(&self, project: ProjectId) -> Balance {
        self.balances
            .get(&project)
            .cloned()
            .unwrap_or_else(|| Balance::empty(project))
    }

    /// The uniqueness of a posting: one entry per payment version, one payout per reference
    /// in a project, one entry per id.
    fn check_posting(&self, p: &Posting) -> Result<(), StoreError> {
        let taken = self.entries.iter().any(|e| {
            let q = &e.posting;
            q.id == p.id
                || (p.payment.is_some() && q.payment == p.payment)
                || (p.reference.is_some()
                    && q.project_id == p.project_id
                    && q.reference == p.reference)
        });
        if taken {
            return Err(StoreError::Duplicate(format!("ledger entry {}", p.id)));
        }
        Ok(())
    }

    /// Appends a posting ([`Balance::post`]).
    fn insert_posting(&mut self, p: &Posting) -> Result<LedgerEntry, StoreError> {
        self.check_posting(p)?;
        let (entry, after) = self.balance(p.project_id).post(p)?;
        self.balances.insert(p.project_id, after);
        self.entries.push(entry.clone());
        Ok(entry)
    }

    /// Stores `payment` unless its merchant payment id is taken.
    fn insert_payment(&mut self, payment: &Payment) -> Result<InsertOutcome, StoreError> {
        let key = (payment.project_id, payment.merchant_payment_id.clone());
        if let Some(id) = self.by_merchant_id.get(&key) {
            return Ok(InsertOutcome::Existing(self.payments[id].clone()));
        }
        if self.payments.contains_key(&payment.id) {
            return Err(StoreError::Duplicate(format!("payment {}", payment.id)));
        }
        self.by_merchant_id.insert(key, payment.id);
        self.payments.insert(payment.id, payment.clone());
        Ok(InsertOutcome::Inserted)
    }

    /// The payment of `project` with `merchant_payment_id`.
    fn payment_by_merchant_id(
        &self,
        project: ProjectId,
        merchant_payment_id: &MerchantPaymentId,
    ) -> Option<Payment> {
        self.by_merchant_id
            .get(&(project, merchant_payment_id.clone()))
            .map(|id| self.payments[id].clone())
    }

    /// Whether `e` is a failed event no resend has answered.
    fn unanswered_failure(&self, e: &EventRecord) -> bool {
        e.outbox.state == DeliveryState::Failed
            && !self.resent.contains_key(&e.outbox.event.event_id)
    }

    /// Whether `nonce` of `project` is recorded and live at `now`.
    fn nonce_live(&self, project: ProjectId, nonce: &str, now: Timestamp) -> bool {
        self.nonces
            .get(&(project, nonce.to_string()))
            .is_some_and(|exp| *exp > now)
    }
}

/// How to undo one step of a transaction.
type Undo = Box<dyn FnOnce(&mut State) + Send>;

impl MemoryTx<'_> {
    /// How to undo an append to `project`'s ledger (nothing without one).
    fn ledger_undo(&self, project: Option<ProjectId>) -> Option<Undo> {
        let project = project?;
        let before = self.st.balances.get(&project).cloned();
        let entries = self.st.entries.len();
        Some(Box::new(move |st: &mut State| {
            st.entries.truncate(entries);
            match before {
                Some(b) => st.balances.insert(project, b),
                None => st.balances.remove(&project),
            };
        }))
    }
}

/// One transaction of the memory store: its steps, each with how to undo it.
struct MemoryTx<'a> {
    st: &'a mut State,
    undo: Vec<Undo>,
}

#[async_trait]
impl Transaction for MemoryTx<'_> {
    async fn use_nonce(&mut self, n: NonceUse<'_>) -> Result<bool, StoreError> {
        if self.st.nonce_live(n.project, n.nonce, n.now) {
            return Ok(false);
        }
        let key = (n.project, n.nonce.to_string());
        let before = self.st.nonces.insert(key.clone(), n.expires_at);
        self.undo.push(Box::new(move |st| match before {
            Some(at) => {
                st.nonces.insert(key, at);
            }
            None => {
                st.nonces.remove(&key);
            }
        }));
        Ok(true)
    }

    async fn nonce_live(&mut self, n: NonceUse<'_>) -> Result<bool, StoreError> {
        Ok(self.st.nonce_live(n.project, n.nonce, n.now))
    }

    async fn insert_payment(&mut self, payment: &Payment) -> Result<InsertOutcome, StoreError> {
        let outcome = self.st.insert_payment(payment)?;
        if outcome == InsertOutcome::Inserted {
            let (id, key) = (
                payment.id,
                (payment.project_id, payment.merchant_payment_id.clone()),
            );
            self.undo.push(Box::new(move |st| {
                st.payments.remove(&id);
                st.by_merchant_id.remove(&key);
            }));
        }
        Ok(outcome)
    }

    async fn payment_by_merchant_id(
        &mut self,
        project: ProjectId,
        merchant_payment_id: &MerchantPaymentId,
    ) -> Result<Option<Payment>, StoreError> {
        Ok(self.st.payment_by_merchant_id(project, merchant_payment_id))
    }

    async fn commit_change(&mut self, change: &PaymentChange) -> Result<(), StoreError> {
        let before = self.st.payments.get(&change.payment.id).cloned();
        let (events, leases, audit, history) = (
            self.st.events.len(),
            self.st.leases.len(),
            self.st.audit.len(),
            self.st.history.len(),
        );
        let ledger = self.ledger_undo(change.ledger.as_ref().map(|p| p.project_id));
        self.st.commit_change(change)?;
        let id = change.payment.id;
        self.undo.push(Box::new(move |st| {
            if let Some(p) = before {
                st.payments.insert(id, p);
            }
            st.events.truncate(events);
            st.leases.truncate(leases);
            st.audit.truncate(audit);
            st.history.truncate(history);
            st.changes -= 1;
        }));
        self.undo.extend(ledger);
        Ok(())
    }

    async fn lock_balance(&mut self, project: ProjectId) -> Result<Balance, StoreError> {
        Ok(self.st.balance(project))
    }

    async fn update_appeal(
        &mut self,
        appeal: &Appeal,
        expected_version: u64,
    ) -> Result<(), StoreError> {
        let stored = self.st.appeals.get(&appeal.id).cloned();
        if stored.as_ref().map(|a| a.version) != Some(expected_version) {
            return Err(StoreError::Conflict);
        }
        self.st.appeals.insert(appeal.id, appeal.clone());
        self.undo.push(Box::new(move |st| {
            if let Some(a) = stored {
                st.appeals.insert(a.id, a);
            }
        }));
        Ok(())
    }

    async fn insert_posting(&mut self, posting: &Posting) -> Result<LedgerEntry, StoreError> {
        let undo = self.ledger_undo(Some(posting.project_id));
        let entry = self.st.insert_posting(posting)?;
        self.undo.extend(undo);
        Ok(entry)
    }

    async fn insert_status_change(&mut self, entry: &StatusChange) -> Result<(), StoreError> {
        self.st.history.push(entry.clone());
        let n = self.st.history.len() - 1;
        self.undo.push(Box::new(move |st| st.history.truncate(n)));
        Ok(())
    }

    async fn insert_audit(&mut self, record: &AuditRecord) -> Result<(), StoreError> {
        self.st.audit.push(record.clone());
        let n = self.st.audit.len() - 1;
        self.undo.push(Box::new(move |st| st.audit.truncate(n)));
        Ok(())
    }

    async fn update_resent(
        &mut self,
        payment: PaymentId,
        resend: EventId,
    ) -> Result<Vec<EventId>, StoreError> {
        let answered: Vec<EventId> = self
            .st
            .events
            .iter()
            .filter(|e| e.outbox.event.payment_id == payment && self.st.unanswered_failure(e))
            .map(|e| e.outbox.event.event_id)
            .collect();
        for id in &answered {
            self.st.resent.insert(*id, resend);
        }
        let marked = answered.clone();
        self.undo.push(Box::new(move |st| {
            for id in &marked {
                st.resent.remove(id);
            }
        }));
        Ok(answered)
    }
}

impl MemoryStore {
    /// An empty store.
    pub fn new() -> Self {
        Self::default()
    }

    /// How many payment changes were committed so far (`commit_change` and the calls that
    /// include one), for tests that count a service's writes.
    pub fn changes_committed(&self) -> u64 {
        self.lock().changes
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, State> {
        self.state
            .lock()
            .expect("memory store lock is never held across a panic")
    }
}

#[async_trait]
impl PaymentStore for MemoryStore {
    async fn payment(&self, id: PaymentId) -> Result<Option<Payment>, StoreError> {
        Ok(self.lock().payments.get(&id).cloned())
    }

    async fn payment_by_merchant_id(
        &self,
        project: ProjectId,
        merchant_payment_id: &MerchantPaymentId,
    ) -> Result<Option<Payment>, StoreError> {
        Ok(self
            .lock()
            .payment_by_merchant_id(project, merchant_payment_id))
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

    async fn find_payments(&self, q: &PaymentQuery) -> Result<Vec<Payment>, StoreError> {
        let st = self.lock();
        let mut found: Vec<Payment> = st
            .payments
            .values()
            .filter(|p| q.matches(p) && q.before.is_none_or(|b| (p.created_at, p.id) < b))
            .cloned()
            .collect();
        found.sort_by_key(|p| std::cmp::Reverse((p.created_at, p.id)));
        found.truncate(q.limit);
        Ok(found)
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
        self.claim_due_events_except(now, limit, lease, &[]).await
    }

    async fn claim_due_events_except(
        &self,
        now: Timestamp,
        limit: usize,
        lease: Duration,
        skip: &[ProjectId],
    ) -> Result<Vec<ClaimedEvent>, StoreError> {
        let mut st = self.lock();
        let mut due: Vec<usize> = st
            .events
            .iter()
            .enumerate()
            .filter(|(_, e)| {
                e.outbox.state == DeliveryState::Pending
                    && e.outbox.next_attempt_at.is_some_and(|t| t <= now)
                    && !skip.contains(&e.outbox.event.project_id)
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
        (rec.outbox.state, rec.outbox.next_attempt_at) = attempt.next_step(next_attempt_at);
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

    async fn failed_events(
        &self,
        filter: &FailedEventFilter,
        limit: usize,
    ) -> Result<Vec<FailedEvent>, StoreError> {
        let st = self.lock();
        Ok(st
            .events
            .iter()
            .filter(|e| st.unanswered_failure(e) && filter.matches(&e.outbox))
            .take(limit)
            .map(|e| FailedEvent {
                outbox: e.outbox.clone(),
                last_attempt: e.attempts.last().cloned(),
            })
            .collect())
    }

    async fn find_events(&self, q: &EventQuery) -> Result<Vec<EventRecord>, StoreError> {
        let st = self.lock();
        let mut found: Vec<EventRecord> = st
            .events
            .iter()
            .filter(|r| {
                let e = &r.outbox.event;
                q.matches(&r.outbox) && q.before.is_none_or(|b| (e.created_at, e.event_id) < b)
            })
            .cloned()
            .collect();
        found.sort_by_key(|r| {
            std::cmp::Reverse((r.outbox.event.created_at, r.outbox.event.event_id))
        });
        found.truncate(q.limit);
        Ok(found)
    }
}

#[async_trait]
impl MerchantStore for MemoryStore {
    async fn upsert_merchant(&self, merchant: &Merchant) -> Result<(), StoreError> {
        self.lock().merchants.insert(merchant.id, merchant.clone());
        Ok(())
    }

    async fn find_merchants(&self, only: Option<MerchantId>) -> Result<Vec<Merchant>, StoreError> {
        let st = self.lock();
        Ok(match only {
            Some(id) => st.merchants.get(&id).cloned().into_iter().collect(),
            None => st.merchants.values().cloned().collect(),
        })
    }

    async fn upsert_project(&self, project: &Project) -> Result<(), StoreError> {
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

    async fn find_projects(&self, only: Option<ProjectId>) -> Result<Vec<Project>, StoreError> {
        let st = self.lock();
        Ok(match only {
            Some(id) => st.projects.get(&id).cloned().into_iter().collect(),
            None => st.projects.values().cloned().collect(),
        })
    }
}

#[async_trait]
impl CredentialStore for MemoryStore {
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

    async fn find_tokens(&self, key: TokenKey<'_>) -> Result<Vec<TokenRecord>, StoreError> {
        let st = self.lock();
        let found = st.tokens.iter().filter(|t| match key {
            TokenKey::Hash(hash) => &t.hash == hash,
            TokenKey::Project(project) => t.project_id == project,
        });
        Ok(found.cloned().collect())
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

    async fn update_token_use(&self, token: TokenId, at: Timestamp) -> Result<(), StoreError> {
        let mut st = self.lock();
        let last = st.token_use.entry(token).or_insert(at);
        *last = (*last).max(at);
        Ok(())
    }

    async fn token_last_used(
        &self,
        tokens: &[TokenId],
    ) -> Result<Vec<(TokenId, Timestamp)>, StoreError> {
        let st = self.lock();
        Ok(tokens
            .iter()
            .filter_map(|t| st.token_use.get(t).map(|at| (*t, *at)))
            .collect())
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

    async fn find_keys(
        &self,
        project: ProjectId,
        only: Option<&KeyId>,
    ) -> Result<Vec<KeyRecord>, StoreError> {
        let st = self.lock();
        let found = st
            .keys
            .iter()
            .filter(|k| k.project_id == project && only.is_none_or(|keyid| &k.keyid == keyid));
        Ok(found.cloned().collect())
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
}

#[async_trait]
impl CallbackSecretStore for MemoryStore {
    async fn callback_secrets(&self, project: ProjectId) -> Result<Vec<SecretRecord>, StoreError> {
        Ok(self
            .lock()
            .secrets
            .get(&project)
            .cloned()
            .unwrap_or_default())
    }

    async fn insert_callback_secret(
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

    async fn insert_callback_secret_if_none(
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
}

#[async_trait]
impl OperatorStore for MemoryStore {
    async fn insert_operator_token(&self, token: &OperatorTokenRecord) -> Result<(), StoreError> {
        let mut st = self.lock();
        if st
            .operator_tokens
            .iter()
            .any(|t| t.hash == token.hash || t.id == token.id)
        {
            return Err(StoreError::Duplicate("operator token".into()));
        }
        st.operator_tokens.push(token.clone());
        Ok(())
    }

    async fn find_operator_tokens(
        &self,
        hash: Option<&[u8; 32]>,
    ) -> Result<Vec<OperatorTokenRecord>, StoreError> {
        let st = self.lock();
        let found = st
            .operator_tokens
            .iter()
            .filter(|t| hash.is_none_or(|h| &t.hash == h));
        Ok(found.cloned().collect())
    }

    async fn expire_operator_token(&self, id: TokenId, at: Timestamp) -> Result<bool, StoreError> {
        let mut st = self.lock();
        match st.operator_tokens.iter_mut().find(|t| t.id == id) {
            Some(t) => {
                t.expires_at = Some(t.expires_at.map_or(at, |end| end.min(at)));
                Ok(true)
            }
            None => Ok(false),
        }
    }
}

#[async_trait]
impl SettingStore for MemoryStore {
    async fn setting(&self, name: &str) -> Result<Option<String>, StoreError> {
        Ok(self.lock().settings.get(name).cloned())
    }

    async fn upsert_setting(&self, name: &str, value: &str) -> Result<(), StoreError> {
        self.lock()
            .settings
            .insert(name.to_string(), value.to_string());
        Ok(())
    }

    async fn insert_setting(&self, name: &str, value: &str) -> Result<bool, StoreError> {
        let mut state = self.lock();
        if state.settings.contains_key(name) {
            return Ok(false);
        }
        state.settings.insert(name.to_string(), value.to_string());
        Ok(true)
    }

    async fn delete_setting(&self, name: &str) -> Result<bool, StoreError> {
        Ok(self.lock().settings.remove(name).is_some())
    }

    async fn settings_with_prefix(
        &self,
        prefix: &str,
    ) -> Result<Vec<(String, String)>, StoreError> {
        let mut found: Vec<(String, String)> = self
            .lock()
            .settings
            .iter()
            .filter(|(name, _)| name.starts_with(prefix))
            .map(|(name, value)| (name.clone(), value.clone()))
            .collect();
        found.sort();
        Ok(found)
    }
}

#[async_trait]
impl AuditStore for MemoryStore {
    async fn insert_audit(&self, record: &AuditRecord) -> Result<(), StoreError> {
        self.lock().audit.push(record.clone());
        Ok(())
    }

    async fn find_audit_records(&self, limit: usize) -> Result<Vec<AuditRecord>, StoreError> {
        Ok(self
            .lock()
            .audit
            .iter()
            .rev()
            .take(limit)
            .cloned()
            .collect())
    }

    async fn status_changes(&self, payment: PaymentId) -> Result<Vec<StatusChange>, StoreError> {
        let mut changes: Vec<_> = (self.lock().history.iter())
            .filter(|c| c.payment_id == payment)
            .cloned()
            .collect();
        changes.sort_by_key(|c| c.version);
        Ok(changes)
    }
}

#[async_trait]
impl PayerPageStore for MemoryStore {
    async fn insert_payment_page_if_none(
        &self,
        page: &PaymentPageRecord,
    ) -> Result<PaymentPageRecord, StoreError> {
        let mut st = self.lock();
        let pages = &mut st.payment_pages;
        if let Some(existing) = pages.get(&page.payment_id) {
            return Ok(existing.clone());
        }
        if pages.values().any(|p| p.token_hash == page.token_hash) {
            return Err(StoreError::Duplicate("payment page token".into()));
        }
        pages.insert(page.payment_id, page.clone());
        Ok(page.clone())
    }

    async fn find_payment_page(
        &self,
        key: PageKey<'_>,
    ) -> Result<Option<PaymentPageRecord>, StoreError> {
        let st = self.lock();
        let pages = &st.payment_pages;
        Ok(match key {
            PageKey::Payment(payment) => pages.get(&payment).cloned(),
            PageKey::TokenHash(hash) => pages.values().find(|p| &p.token_hash == hash).cloned(),
        })
    }
}

#[async_trait]
impl RequestLogStore for MemoryStore {
    async fn insert_requests(
        &self,
        entries: &[RequestLogEntry],
        keep: usize,
    ) -> Result<(), StoreError> {
        let mut st = self.lock();
        let mut touched = Vec::new();
        for e in entries {
            st.request_seq += 1;
            let id = st.request_seq;
            st.requests.push(RequestLogEntry { id, ..e.clone() });
            if !touched.contains(&e.project_id) {
                touched.push(e.project_id);
            }
        }
        for project in touched {
            let mut mine: Vec<(Timestamp, u64)> = st
                .requests
                .iter()
                .filter(|r| r.project_id == project)
                .map(|r| (r.at, r.id))
                .collect();
            if mine.len() > keep {
                mine.sort_unstable_by(|a, b| b.cmp(a));
                let cut = mine[keep];
                st.requests
                    .retain(|r| r.project_id != project || (r.at, r.id) > cut);
            }
        }
        Ok(())
    }

    async fn find_requests(&self, q: &RequestLogQuery) -> Result<Vec<RequestLogEntry>, StoreError> {
        let st = self.lock();
        let mut found: Vec<RequestLogEntry> = st
            .requests
            .iter()
            .filter(|e| q.matches(e))
            .cloned()
            .collect();
        found.sort_unstable_by_key(|e| std::cmp::Reverse((e.at, e.id)));
        found.truncate(q.limit);
        Ok(found)
    }

    async fn purge_requests(&self, before: Timestamp, limit: usize) -> Result<Purged, StoreError> {
        let mut st = self.lock();
        let mut old: Vec<(Timestamp, u64)> = st
            .requests
            .iter()
            .filter(|r| r.at < before)
            .map(|r| (r.at, r.id))
            .collect();
        old.sort_unstable();
        old.truncate(limit);
        st.requests.retain(|r| !old.contains(&(r.at, r.id)));
        Ok(Purged::of_batch(old.len() as u64, limit))
    }
}

#[async_trait]
impl LedgerStore for MemoryStore {
    async fn balance(&self, project: ProjectId) -> Result<Balance, StoreError> {
        Ok(self.lock().balance(project))
    }

    async fn find_entries(&self, q: &EntryQuery) -> Result<Vec<LedgerEntry>, StoreError> {
        let st = self.lock();
        let found = st
            .entries
            .iter()
            .filter(|e| q.matches(e) && q.is_after_cursor(e));
        let mut found: Vec<LedgerEntry> = if q.oldest_first {
            found.take(q.limit).cloned().collect()
        } else {
            let mut all: Vec<&LedgerEntry> = found.collect();
            all.reverse();
            all.into_iter().take(q.limit).cloned().collect()
        };
        found.truncate(q.limit);
        Ok(found)
    }

    async fn entry_totals(
        &self,
        project: ProjectId,
        from: Timestamp,
        to: Timestamp,
    ) -> Result<Vec<(EntryKind, KindTotal)>, StoreError> {
        let st = self.lock();
        let mut lines: BTreeMap<EntryKind, KindTotal> = BTreeMap::new();
        for e in st.entries.iter().filter(|e| {
            e.posting.project_id == project && e.posting.at >= from && e.posting.at < to
        }) {
            let line = lines.entry(e.posting.kind).or_default();
            line.count += 1;
            line.sum = line
                .sum
                .checked_add(e.posting.amount)
                .ok_or_else(|| StoreError::Corrupt("a sum out of range".into()))?;
        }
        Ok(lines.into_iter().collect())
    }
}

#[async_trait]
impl Store for MemoryStore {
    /// Under the store's lock: the work's steps run at once (they are synchronous), and a work
    /// that fails has its steps undone in reverse order.
    async fn backlog(&self) -> Result<Backlog, StoreError> {
        let st = self.lock();
        let pending = || {
            st.events
                .iter()
                .filter(|e| e.outbox.state == DeliveryState::Pending)
        };
        Ok(Backlog {
            by_status: PaymentStatus::ALL
                .into_iter()
                .map(|s| {
                    (
                        s,
                        st.payments.values().filter(|p| p.status == s).count() as u64,
                    )
                })
                .filter(|(_, n)| *n > 0)
                .collect(),
            oldest_due_payment: st.payments.values().filter_map(Payment::due_at).min(),
            pending_events: pending().count() as u64,
            oldest_pending_event: pending().map(|e| e.outbox.event.created_at).min(),
            failed_events: st
                .events
                .iter()
                .filter(|e| st.unanswered_failure(e))
                .count() as u64,
        })
    }

    async fn purge(
        &self,
        what: Retained,
        before: Timestamp,
        limit: usize,
    ) -> Result<Purged, StoreError> {
        let mut st = self.lock();
        let mut deleted = 0usize;
        let mut take = |old: bool| {
            let go = old && deleted < limit;
            deleted += usize::from(go);
            !go
        };
        match what {
            Retained::Nonces => {
                let mut expired: Vec<_> = st
                    .nonces
                    .iter()
                    .filter(|(_, exp)| **exp <= before)
                    .map(|(k, exp)| (*exp, k.clone()))
                    .collect();
                expired.sort();
                for (_, key) in expired.into_iter().take(limit) {
                    st.nonces.remove(&key);
                    deleted += 1;
                }
            }
            Retained::FinishedEvents => {
                let mut gone = Vec::new();
                st.events.retain(|e| {
                    let old = e.outbox.state != DeliveryState::Pending
                        && e.outbox.event.created_at < before;
                    let keep = take(old);
                    if !keep {
                        gone.push(e.outbox.event.event_id);
                    }
                    keep
                });
                for id in gone {
                    st.resent.remove(&id);
                }
            }
            Retained::Audit => st.audit.retain(|r| take(r.at < before)),
        }
        Ok(Purged::of_batch(deleted as u64, limit))
    }

    async fn transact(&self, work: TxWork) -> Result<TxOutput, StoreError> {
        let mut st = self.lock();
        let mut tx = MemoryTx {
            st: &mut st,
            undo: Vec::new(),
        };
        let answer = work(&mut tx).now_or_never().unwrap_or_else(|| {
            Err(StoreError::Corrupt(
                "a transaction's work waited for something outside the store".into(),
            ))
        });
        if answer.is_err() {
            let MemoryTx { st, undo } = tx;
            for step in undo.into_iter().rev() {
                step(st);
            }
        }
        answer
    }
}

#[async_trait]
impl AppealStore for MemoryStore {
    async fn appeal(&self, id: AppealId) -> Result<Option<Appeal>, StoreError> {
        Ok(self.lock().appeals.get(&id).cloned())
    }

    async fn find_appeals(&self, q: &AppealQuery) -> Result<Vec<Appeal>, StoreError> {
        let st = self.lock();
        let mut found: Vec<Appeal> = st
            .appeals
            .values()
            .filter(|a| q.matches(a))
            .cloned()
            .collect();
        found.sort_unstable_by_key(|a| (a.created_at, a.id));
        if q.order == AppealOrder::NewestFirst {
            found.reverse();
        }
        found.truncate(q.limit);
        Ok(found)
    }

    async fn appeal_receipt(
        &self,
        appeal: AppealId,
        index: u8,
    ) -> Result<Option<Receipt>, StoreError> {
        let st = self.lock();
        Ok(st
            .receipts
            .get(&appeal)
            .and_then(|r| r.get(usize::from(index)))
            .cloned())
    }

    async fn insert_appeal(
        &self,
        appeal: &Appeal,
        receipts: &[Receipt],
    ) -> Result<AppealInsert, StoreError> {
        let mut st = self.lock();
        let same = |a: &&Appeal| {
            a.project_id == appeal.project_id
                && a.idempotency_key.is_some()
                && a.idempotency_key == appeal.idempotency_key
        };
        if let Some(existing) = st.appeals.values().find(same) {
            return Ok(AppealInsert::Existing(existing.clone()));
        }
        let of_payment = || {
            st.appeals
                .values()
                .filter(|a| a.payment_id == appeal.payment_id)
        };
        if let Some(active) = of_payment().find(|a| a.state.is_active()) {
            return Ok(AppealInsert::Active(active.clone()));
        }
        let from_source = of_payment().filter(|a| a.source == appeal.source).count();
        if from_source >= MAX_APPEALS_PER_SOURCE as usize {
            return Ok(AppealInsert::Full);
        }
        st.appeals.insert(appeal.id, appeal.clone());
        st.receipts.insert(appeal.id, receipts.to_vec());
        Ok(AppealInsert::Inserted)
    }
}
