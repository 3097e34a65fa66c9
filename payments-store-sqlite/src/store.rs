//! The store traits on [`SqliteStore`]: writes go to the writer thread, reads to the pool.

use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use futures_util::FutureExt;
use payments_core::appeal::Appeal;
use payments_core::event::{DeliveryAttempt, EventRecord, FailedEvent, FailedEventFilter};
use payments_core::history::StatusChange;
use payments_core::ids::{EventId, KeyId, PaymentId, ProjectId, TokenId};
use payments_core::ledger::{Balance, LedgerEntry, Posting};
use payments_core::payer::PaymentPageRecord;
use payments_core::payment::{MerchantPaymentId, Payment};
use payments_core::project::{AuditRecord, KeyRecord, TokenRecord};
use payments_core::store::{generic, AdmitOutcome, EventQuery, PaymentQuery};
use payments_core::store::{
    AttemptRecorded, AuthLookup, Backlog, ClaimedEvent, CredentialStore, InsertOutcome, LeaseToken,
    NonceUse, OutboxStore, PageKey, PayerPageStore, PaymentChange, PaymentStore, Purged, Retained,
    Store, StoreError, TokenKey, Transaction, TxOutput, TxWork, UnavailableCause,
};
use payments_core::totals::PaymentTotals;
use payments_core::Timestamp;
use rusqlite::Connection;

use payments_store_sql::sealing::RequisiteSealing;

use crate::{appeals, cabinet, directory, ledger, nonces, outbox, payments, SqliteStore};

/// A transaction of the SQLite store: its steps on the writer connection, inside the writer's
/// transaction (one job of a group commit).
struct SqliteTx<'a> {
    conn: &'a mut Connection,
    sealing: &'a RequisiteSealing,
}

#[async_trait]
impl Transaction for SqliteTx<'_> {
    async fn use_nonce(&mut self, n: NonceUse<'_>) -> Result<bool, StoreError> {
        nonces::use_nonce(self.conn, n.project, n.nonce, n.now, n.expires_at)
    }

    async fn nonce_live(&mut self, n: NonceUse<'_>) -> Result<bool, StoreError> {
        nonces::nonce_live(self.conn, n.project, n.nonce, n.now)
    }

    async fn insert_payment(&mut self, payment: &Payment) -> Result<InsertOutcome, StoreError> {
        payments::insert(self.conn, self.sealing, payment)
    }

    async fn payment_by_merchant_id(
        &mut self,
        project: ProjectId,
        merchant_payment_id: &MerchantPaymentId,
    ) -> Result<Option<Payment>, StoreError> {
        payments::by_merchant_id(self.conn, self.sealing, project, merchant_payment_id)
    }

    async fn commit_change(&mut self, change: &PaymentChange) -> Result<(), StoreError> {
        payments::commit_change(self.conn, self.sealing, change)
    }

    async fn update_resent(
        &mut self,
        payment: PaymentId,
        resend: EventId,
    ) -> Result<Vec<EventId>, StoreError> {
        outbox::update_resent(self.conn, payment, resend)
    }

    async fn lock_balance(&mut self, project: ProjectId) -> Result<Balance, StoreError> {
        ledger::lock_balance(self.conn, project)
    }

    async fn insert_posting(&mut self, posting: &Posting) -> Result<LedgerEntry, StoreError> {
        ledger::append(self.conn, posting)
    }

    async fn insert_audit(&mut self, record: &AuditRecord) -> Result<(), StoreError> {
        directory::insert_audit(self.conn, record)
    }

    async fn insert_status_change(&mut self, entry: &StatusChange) -> Result<(), StoreError> {
        directory::insert_status_change(self.conn, entry)
    }

    async fn update_appeal(
        &mut self,
        appeal: &Appeal,
        expected_version: u64,
    ) -> Result<(), StoreError> {
        appeals::update(self.conn, appeal, expected_version)
    }
}

#[async_trait]
impl PaymentStore for SqliteStore {
    async fn payment(&self, id: PaymentId) -> Result<Option<Payment>, StoreError> {
        let s = self.sealing.clone();
        self.read_short(move |c| payments::by_id(c, &s, id)).await
    }

    async fn payment_by_merchant_id(
        &self,
        project: ProjectId,
        merchant_payment_id: &MerchantPaymentId,
    ) -> Result<Option<Payment>, StoreError> {
        let mpid = merchant_payment_id.clone();
        let s = self.sealing.clone();
        self.read(move |c| payments::by_merchant_id(c, &s, project, &mpid))
            .await
    }

    async fn due_payments(&self, now: Timestamp, limit: usize) -> Result<Vec<Payment>, StoreError> {
        let s = self.sealing.clone();
        self.read(move |c| payments::due(c, &s, now, limit)).await
    }

    async fn find_payments(&self, query: &PaymentQuery) -> Result<Vec<Payment>, StoreError> {
        let q = query.clone();
        let s = self.sealing.clone();
        self.read_limited(move |c| payments::find(c, &s, &q)).await
    }

    async fn payment_totals(
        &self,
        query: &PaymentQuery,
        offset_ms: i64,
    ) -> Result<PaymentTotals, StoreError> {
        let q = query.clone();
        let s = self.sealing.clone();
        self.read_limited(move |c| payments::totals(c, &s, &q, offset_ms))
            .await
    }
}

#[async_trait]
impl OutboxStore for SqliteStore {
    async fn claim_due_events(
        &self,
        now: Timestamp,
        limit: usize,
        lease: Duration,
    ) -> Result<Vec<ClaimedEvent>, StoreError> {
        self.write(move |c| outbox::claim_due(c, now, limit, lease, &[]))
            .await
    }

    async fn claim_due_events_except(
        &self,
        now: Timestamp,
        limit: usize,
        lease: Duration,
        skip: &[ProjectId],
    ) -> Result<Vec<ClaimedEvent>, StoreError> {
        let skip = skip.to_vec();
        self.write(move |c| outbox::claim_due(c, now, limit, lease, &skip))
            .await
    }

    async fn record_attempt(
        &self,
        event_id: EventId,
        lease: LeaseToken,
        attempt: &DeliveryAttempt,
        next_attempt_at: Option<Timestamp>,
    ) -> Result<AttemptRecorded, StoreError> {
        let attempt = attempt.clone();
        self.write(move |c| outbox::record_attempt(c, event_id, lease, &attempt, next_attempt_at))
            .await
    }

    async fn events_for_payment(&self, payment: PaymentId) -> Result<Vec<EventRecord>, StoreError> {
        self.read(move |c| outbox::for_payment(c, payment)).await
    }

    async fn failed_events(
        &self,
        filter: &FailedEventFilter,
        limit: usize,
    ) -> Result<Vec<FailedEvent>, StoreError> {
        let filter = filter.clone();
        self.read(move |c| outbox::failed(c, &filter, limit)).await
    }

    /// The events and their attempts in one read transaction (one snapshot).
    async fn find_events(&self, query: &EventQuery) -> Result<Vec<EventRecord>, StoreError> {
        let q = query.clone();
        self.read_limited(move |c| directory::snapshot(c, || outbox::find(c, &q)))
            .await
    }
}

#[async_trait]
impl CredentialStore for SqliteStore {
    async fn insert_token(&self, token: &TokenRecord) -> Result<(), StoreError> {
        let t = token.clone();
        self.write(move |c| directory::insert_token(c, &t)).await
    }

    async fn find_tokens(&self, key: TokenKey<'_>) -> Result<Vec<TokenRecord>, StoreError> {
        match key {
            TokenKey::Hash(hash) => {
                let hash = *hash;
                self.read(move |c| Ok(directory::token_by_hash(c, &hash)?.into_iter().collect()))
                    .await
            }
            TokenKey::Project(project) => self.read(move |c| directory::tokens(c, project)).await,
        }
    }

    async fn find_keys(
        &self,
        project: ProjectId,
        only: Option<&KeyId>,
    ) -> Result<Vec<KeyRecord>, StoreError> {
        let only = only.cloned();
        self.read(move |c| match &only {
            Some(keyid) => Ok(directory::key(c, project, keyid)?.into_iter().collect()),
            None => directory::keys(c, project),
        })
        .await
    }

    async fn revoke_token(
        &self,
        project: ProjectId,
        id: TokenId,
        at: Timestamp,
    ) -> Result<bool, StoreError> {
        self.write(move |c| directory::revoke_token(c, project, id, at))
            .await
    }

    async fn update_token_use(&self, token: TokenId, at: Timestamp) -> Result<(), StoreError> {
        self.write(move |c| cabinet::update_token_use(c, token, at))
            .await
    }

    async fn token_last_used(
        &self,
        tokens: &[TokenId],
    ) -> Result<Vec<(TokenId, Timestamp)>, StoreError> {
        let tokens = tokens.to_vec();
        self.read(move |c| cabinet::token_last_used(c, &tokens))
            .await
    }

    async fn insert_key(&self, key: &KeyRecord) -> Result<(), StoreError> {
        let k = key.clone();
        self.write(move |c| directory::insert_key(c, &k)).await
    }

    /// One query over the keys table instead of one read per project.
    async fn find_active_key_projects(&self, keyid: &KeyId) -> Result<Vec<ProjectId>, StoreError> {
        let keyid = keyid.clone();
        self.read(move |c| directory::find_active_key_projects(c, &keyid))
            .await
    }

    /// One trip to the reader pool instead of four, the reads in one read transaction (one
    /// snapshot of the database).
    async fn auth_lookup(
        &self,
        hash: &[u8; 32],
        keyid: Option<&KeyId>,
    ) -> Result<AuthLookup, StoreError> {
        let hash = *hash;
        let keyid = keyid.cloned();
        let cache = Arc::clone(&self.auth_cache);
        self.read_short(move |c| directory::snapshot(c, || cache.lookup(c, &hash, keyid.as_ref())))
            .await
    }

    async fn revoke_key(
        &self,
        project: ProjectId,
        keyid: &KeyId,
        at: Timestamp,
    ) -> Result<bool, StoreError> {
        let keyid = keyid.clone();
        self.write(move |c| directory::revoke_key(c, project, &keyid, at))
            .await
    }
}

#[async_trait]
impl PayerPageStore for SqliteStore {
    async fn insert_payment_page_if_none(
        &self,
        page: &PaymentPageRecord,
    ) -> Result<PaymentPageRecord, StoreError> {
        let p = page.clone();
        self.write(move |c| cabinet::insert_payment_page_if_none(c, &p))
            .await
    }

    async fn find_payment_page(
        &self,
        key: PageKey<'_>,
    ) -> Result<Option<PaymentPageRecord>, StoreError> {
        match key {
            PageKey::Payment(payment) => {
                self.read(move |c| cabinet::payment_page(c, payment)).await
            }
            PageKey::TokenHash(hash) => {
                let h = *hash;
                self.read(move |c| cabinet::payment_page_by_hash(c, &h))
                    .await
            }
        }
    }
}

#[async_trait]
impl Store for SqliteStore {
    /// Ready while the writer thread runs and accepts writes.
    fn is_ready(&self) -> bool {
        self.writer.is_alive()
    }

    /// New space on the file system first (the module `reserve`'s `probe_room`: a full disk
    /// shows whatever the WAL still holds), then the port's small write.
    async fn check_writable(&self) -> Result<(), StoreError> {
        if let Some(path) = self.probe_path() {
            tokio::task::spawn_blocking(move || crate::reserve::probe_room(&path))
                .await
                .map_err(|e| UnavailableCause::Other.error(format_args!("the probe: {e}")))??;
        }
        payments_core::store::SettingStore::upsert_setting(
            self,
            payments_core::store::WRITE_PROBE_SETTING,
            "ok",
        )
        .await
    }

    /// One trip to the reader pool, one snapshot.
    async fn backlog(&self) -> Result<Backlog, StoreError> {
        self.read(|c| {
            directory::snapshot(c, || {
                Ok(Backlog {
                    by_status: payments::count_by_status(c)?,
                    oldest_due_payment: payments::oldest_due(c)?,
                    pending_events: outbox::pending(c)?,
                    oldest_pending_event: outbox::oldest_pending(c)?,
                    failed_events: outbox::failed_count(c)?,
                })
            })
        })
        .await
    }

    /// One writer job per batch: creates queued meanwhile are not held behind a whole purge.
    async fn purge(
        &self,
        what: Retained,
        before: Timestamp,
        limit: usize,
    ) -> Result<Purged, StoreError> {
        match what {
            Retained::Nonces => {
                self.free(move |c| nonces::purge_nonces(c, before, limit))
                    .await
            }
            Retained::FinishedEvents => self
                .free(move |c| outbox::purge_finished(c, before, limit))
                .await
                .map(|n| Purged::of_batch(n, limit)),
            Retained::Audit => self
                .free(move |c| directory::purge_audit(c, before, limit))
                .await
                .map(|n| Purged::of_batch(n, limit)),
        }
    }

    /// The work on the writer thread, as one job of a group commit: the steps run on the
    /// writer connection at once (they are synchronous), so the work's future is complete when
    /// first polled; a work that would wait for anything else is refused. The job may run again
    /// in a savepoint when another job of its batch fails.
    async fn transact(&self, work: TxWork) -> Result<TxOutput, StoreError> {
        let sealing = self.sealing.clone();
        self.write(move |conn| {
            let mut tx = SqliteTx {
                conn,
                sealing: &sealing,
            };
            work(&mut tx).now_or_never().unwrap_or_else(|| {
                Err(StoreError::Corrupt(
                    "a transaction's work waited for something outside the store".into(),
                ))
            })
        })
        .await
    }

    /// The generic steps ([`generic::admit_create`]: the nonce, the insert, its history entry)
    /// in one group-commit job, the candidate's row encoded and its requisites sealed here, on
    /// the caller's thread, before the job is queued: the single writer, which every write of
    /// the node waits behind, runs only the statements.
    async fn admit_create(
        &self,
        nonce: Option<NonceUse<'_>>,
        project: ProjectId,
        merchant_payment_id: &MerchantPaymentId,
        candidate: Option<&Payment>,
        issued: Option<&StatusChange>,
    ) -> Result<AdmitOutcome, StoreError> {
        let Some(candidate) = candidate else {
            return generic::admit_create(self, nonce, project, merchant_payment_id, None, issued)
                .await;
        };
        debug_assert!(
            candidate.project_id == project
                && &candidate.merchant_payment_id == merchant_payment_id,
            "the candidate carries the project and the merchant payment id"
        );
        debug_assert!(
            issued.is_none_or(|h| h.payment_id == candidate.id),
            "the entry is the candidate's"
        );
        let row = payments::EncodedPayment::new(candidate, &self.sealing)?;
        let nonce = nonce.map(|n| (n.project, n.nonce.to_string(), n.now, n.expires_at));
        let issued = issued.cloned();
        let sealing = self.sealing.clone();
        self.write(move |conn| {
            if let Some((project, nonce, now, expires_at)) = &nonce {
                if !nonces::use_nonce(conn, *project, nonce, *now, *expires_at)? {
                    return Ok(AdmitOutcome::Replayed);
                }
            }
            Ok(match payments::insert_encoded(conn, &sealing, &row)? {
                InsertOutcome::Inserted => {
                    if let Some(entry) = &issued {
                        directory::insert_status_change(conn, entry)?;
                    }
                    AdmitOutcome::Inserted
                }
                InsertOutcome::Existing(existing) => AdmitOutcome::Existing(existing),
            })
        })
        .await
    }

    /// One trip to the reader pool and one snapshot for the credentials and the payment.
    async fn auth_lookup_with_payment(
        &self,
        hash: &[u8; 32],
        keyid: Option<&KeyId>,
        id: PaymentId,
    ) -> Result<(AuthLookup, Option<Payment>), StoreError> {
        let hash = *hash;
        let keyid = keyid.cloned();
        let cache = Arc::clone(&self.auth_cache);
        let s = self.sealing.clone();
        self.read_short(move |c| {
            directory::snapshot(c, || {
                let found = cache.lookup(c, &hash, keyid.as_ref())?;
                let payment = match found.token {
                    Some(_) => payments::by_id(c, &s, id)?,
                    None => None,
                };
                Ok((found, payment))
            })
        })
        .await
    }
}
