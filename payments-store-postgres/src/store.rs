//! The store traits on [`PgStore`]: each call takes a pooled connection; calls that write more
//! than one row run in one READ COMMITTED transaction, taking locks in one order (nonce,
//! payment, outbox).

use std::time::Duration;

use async_trait::async_trait;
use payments_core::appeal::Appeal;
use payments_core::event::{DeliveryAttempt, EventRecord, FailedEvent, FailedEventFilter};
use payments_core::history::StatusChange;
use payments_core::ids::{EventId, KeyId, PaymentId, ProjectId, TokenId};
use payments_core::ledger::{Balance, LedgerEntry, Posting};
use payments_core::payer::PaymentPageRecord;
use payments_core::payment::{MerchantPaymentId, Payment};
use payments_core::project::{AuditRecord, KeyRecord, TokenRecord};
use payments_core::store::{
    AdmitOutcome, AttemptRecorded, AuthLookup, Backlog, ClaimedEvent, CredentialStore,
    InsertOutcome, LeaseToken, NonceUse, OutboxStore, PageKey, PayerPageStore, PaymentChange,
    PaymentStore, Purged, Retained, Store, StoreError, TokenKey, Transaction, TxOutput, TxWork,
};
use payments_core::store::{EventQuery, PaymentQuery};
use payments_core::totals::PaymentTotals;
use payments_core::Timestamp;

use crate::error::db;
use payments_store_sql::sealing::RequisiteSealing;

use crate::{appeals, cabinet, directory, ledger, outbox, payments, PgStore};

/// Runs `$body` (an async block using `$tx`) in a transaction on a pooled connection and
/// commits it when it returns `Ok`; an error (or a panic) drops the transaction, which rolls
/// it back. Every statement's result is checked before the commit.
/// A transaction of the PostgreSQL store: its steps on one pooled connection's transaction.
struct PgTx<'a, 'c> {
    tx: &'a deadpool_postgres::Transaction<'c>,
    sealing: &'a RequisiteSealing,
}

#[async_trait]
impl Transaction for PgTx<'_, '_> {
    async fn use_nonce(&mut self, n: NonceUse<'_>) -> Result<bool, StoreError> {
        payments::use_nonce(self.tx, n.project, n.nonce, n.now, n.expires_at).await
    }

    async fn nonce_live(&mut self, n: NonceUse<'_>) -> Result<bool, StoreError> {
        payments::nonce_live(self.tx, n.project, n.nonce, n.now).await
    }

    async fn insert_payment(&mut self, payment: &Payment) -> Result<InsertOutcome, StoreError> {
        payments::insert(self.tx, self.sealing, payment).await
    }

    async fn payment_by_merchant_id(
        &mut self,
        project: ProjectId,
        merchant_payment_id: &MerchantPaymentId,
    ) -> Result<Option<Payment>, StoreError> {
        payments::by_merchant_id(self.tx, self.sealing, project, merchant_payment_id).await
    }

    async fn commit_change(&mut self, change: &PaymentChange) -> Result<(), StoreError> {
        payments::commit_change(self.tx, self.sealing, change).await
    }

    /// Locks in the usual order: the payment row first (`FOR UPDATE`), so concurrent resends
    /// of one payment queue on it, then the marks of its unanswered failures (at READ
    /// COMMITTED a waiting resend finds them answered).
    async fn update_resent(
        &mut self,
        payment: PaymentId,
        resend: EventId,
    ) -> Result<Vec<EventId>, StoreError> {
        // Without the payment there are no failures of it to answer.
        if !payments::lock(self.tx, payment).await? {
            return Ok(Vec::new());
        }
        outbox::update_resent(self.tx, payment, resend).await
    }

    async fn lock_balance(&mut self, project: ProjectId) -> Result<Balance, StoreError> {
        ledger::lock_balance(self.tx, project).await
    }

    async fn insert_posting(&mut self, posting: &Posting) -> Result<LedgerEntry, StoreError> {
        ledger::append(self.tx, posting).await
    }

    async fn insert_audit(&mut self, record: &AuditRecord) -> Result<(), StoreError> {
        directory::insert_audit(self.tx, record).await
    }

    async fn insert_status_change(&mut self, entry: &StatusChange) -> Result<(), StoreError> {
        directory::insert_status_change(self.tx, entry).await
    }

    async fn update_appeal(
        &mut self,
        appeal: &Appeal,
        expected_version: u64,
    ) -> Result<(), StoreError> {
        appeals::update(self.tx, appeal, expected_version).await
    }
}

/// A read-only `REPEATABLE READ` transaction on `client`: every statement of it reads the same
/// snapshot.
async fn snapshot(
    client: &mut deadpool_postgres::Client,
) -> Result<deadpool_postgres::Transaction<'_>, StoreError> {
    client
        .build_transaction()
        .isolation_level(tokio_postgres::IsolationLevel::RepeatableRead)
        .read_only(true)
        .start()
        .await
        .map_err(db)
}

/// Runs `$body` (an async block using `$tx`) in a [`snapshot`] on a pooled connection.
macro_rules! in_snapshot {
    ($store:expr, |$tx:ident| $body:expr) => {{
        let mut client = $store.client().await?;
        let $tx = snapshot(&mut client).await?;
        let value = $body?;
        $tx.commit().await.map_err(db)?;
        Ok(value)
    }};
}

/// [`in_snapshot!`] for a list read: it first takes a list permit (so the reserved
/// connections stay free for the short reads and writes) and limits its transaction to the
/// store's `scan_timeout`.
macro_rules! in_scan {
    ($store:expr, |$tx:ident| $body:expr) => {{
        let _permit = $store.scan_permit().await?;
        let mut client = $store.client().await?;
        let $tx = snapshot(&mut client).await?;
        $tx.batch_execute(&$store.scan_limit()).await.map_err(db)?;
        let value = $body?;
        $tx.commit().await.map_err(db)?;
        Ok(value)
    }};
}

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
impl PaymentStore for PgStore {
    async fn payment(&self, id: PaymentId) -> Result<Option<Payment>, StoreError> {
        let client = self.client().await?;
        payments::by_id(&client, &self.sealing, id).await
    }

    async fn payment_by_merchant_id(
        &self,
        project: ProjectId,
        merchant_payment_id: &MerchantPaymentId,
    ) -> Result<Option<Payment>, StoreError> {
        let client = self.client().await?;
        payments::by_merchant_id(&client, &self.sealing, project, merchant_payment_id).await
    }

    async fn due_payments(&self, now: Timestamp, limit: usize) -> Result<Vec<Payment>, StoreError> {
        let client = self.client().await?;
        payments::due(&client, &self.sealing, now, limit).await
    }

    async fn find_payments(&self, query: &PaymentQuery) -> Result<Vec<Payment>, StoreError> {
        in_scan!(self, |tx| payments::find(&tx, &self.sealing, query).await)
    }

    async fn payment_totals(
        &self,
        query: &PaymentQuery,
        offset_ms: i64,
    ) -> Result<PaymentTotals, StoreError> {
        in_scan!(self, |tx| payments::totals(
            &tx,
            &self.sealing,
            query,
            offset_ms
        )
        .await)
    }
}

#[async_trait]
impl OutboxStore for PgStore {
    async fn claim_due_events(
        &self,
        now: Timestamp,
        limit: usize,
        lease: Duration,
    ) -> Result<Vec<ClaimedEvent>, StoreError> {
        let client = self.client().await?;
        outbox::claim_due(&client, now, limit, lease, &[]).await
    }

    async fn claim_due_events_except(
        &self,
        now: Timestamp,
        limit: usize,
        lease: Duration,
        skip: &[ProjectId],
    ) -> Result<Vec<ClaimedEvent>, StoreError> {
        let client = self.client().await?;
        outbox::claim_due(&client, now, limit, lease, skip).await
    }

    async fn record_attempt(
        &self,
        event_id: EventId,
        lease: LeaseToken,
        attempt: &DeliveryAttempt,
        next_attempt_at: Option<Timestamp>,
    ) -> Result<AttemptRecorded, StoreError> {
        in_transaction!(self, |tx| outbox::record_attempt(
            &tx,
            event_id,
            lease,
            attempt,
            next_attempt_at
        )
        .await)
    }

    async fn events_for_payment(&self, payment: PaymentId) -> Result<Vec<EventRecord>, StoreError> {
        // Events and their attempts from one snapshot.
        in_snapshot!(self, |tx| outbox::for_payment(&tx, payment).await)
    }

    async fn failed_events(
        &self,
        filter: &FailedEventFilter,
        limit: usize,
    ) -> Result<Vec<FailedEvent>, StoreError> {
        let client = self.client().await?;
        outbox::failed(&client, filter, limit).await
    }

    /// The events and their attempts from one snapshot.
    async fn find_events(&self, query: &EventQuery) -> Result<Vec<EventRecord>, StoreError> {
        in_scan!(self, |tx| outbox::find(&tx, query).await)
    }

    /// Nodes over one database tell each other of their events through `LISTEN`/`NOTIFY` on
    /// a connection of each node's own (`relay`).
    fn outbox_relay(&self) -> Option<std::sync::Arc<dyn payments_core::store::OutboxRelay>> {
        Some(std::sync::Arc::new(self.relay()))
    }
}

#[async_trait]
impl CredentialStore for PgStore {
    async fn insert_token(&self, token: &TokenRecord) -> Result<(), StoreError> {
        let client = self.client().await?;
        directory::insert_token(&client, token).await
    }

    async fn find_tokens(&self, key: TokenKey<'_>) -> Result<Vec<TokenRecord>, StoreError> {
        let client = self.client().await?;
        match key {
            TokenKey::Hash(hash) => Ok(directory::token_by_hash(&client, hash)
                .await?
                .into_iter()
                .collect()),
            TokenKey::Project(project) => directory::tokens(&client, project).await,
        }
    }

    async fn find_keys(
        &self,
        project: ProjectId,
        only: Option<&KeyId>,
    ) -> Result<Vec<KeyRecord>, StoreError> {
        let client = self.client().await?;
        match only {
            Some(keyid) => Ok(directory::key(&client, project, keyid)
                .await?
                .into_iter()
                .collect()),
            None => directory::keys(&client, project).await,
        }
    }

    async fn revoke_token(
        &self,
        project: ProjectId,
        id: TokenId,
        at: Timestamp,
    ) -> Result<bool, StoreError> {
        let client = self.client().await?;
        directory::revoke_token(&client, project, id, at).await
    }

    async fn update_token_use(&self, token: TokenId, at: Timestamp) -> Result<(), StoreError> {
        let client = self.client().await?;
        cabinet::update_token_use(&client, token, at).await
    }

    async fn token_last_used(
        &self,
        tokens: &[TokenId],
    ) -> Result<Vec<(TokenId, Timestamp)>, StoreError> {
        let client = self.client().await?;
        cabinet::token_last_used(&client, tokens).await
    }

    async fn insert_key(&self, key: &KeyRecord) -> Result<(), StoreError> {
        let client = self.client().await?;
        directory::insert_key(&client, key).await
    }

    /// One query over the keys table instead of one read per project.
    async fn find_active_key_projects(&self, keyid: &KeyId) -> Result<Vec<ProjectId>, StoreError> {
        let client = self.client().await?;
        directory::find_active_key_projects(&client, keyid).await
    }

    /// One connection and one snapshot for the token, project, merchant and key.
    async fn auth_lookup(
        &self,
        hash: &[u8; 32],
        keyid: Option<&KeyId>,
    ) -> Result<AuthLookup, StoreError> {
        let client = self.client().await?;
        directory::auth_lookup(&client, hash, keyid).await
    }

    async fn revoke_key(
        &self,
        project: ProjectId,
        keyid: &KeyId,
        at: Timestamp,
    ) -> Result<bool, StoreError> {
        let client = self.client().await?;
        directory::revoke_key(&client, project, keyid, at).await
    }
}

#[async_trait]
impl PayerPageStore for PgStore {
    async fn insert_payment_page_if_none(
        &self,
        page: &PaymentPageRecord,
    ) -> Result<PaymentPageRecord, StoreError> {
        let client = self.client().await?;
        cabinet::insert_payment_page_if_none(&client, page).await
    }

    async fn find_payment_page(
        &self,
        key: PageKey<'_>,
    ) -> Result<Option<PaymentPageRecord>, StoreError> {
        let client = self.client().await?;
        match key {
            PageKey::Payment(payment) => cabinet::payment_page(&client, payment).await,
            PageKey::TokenHash(hash) => cabinet::payment_page_by_hash(&client, hash).await,
        }
    }
}

#[async_trait]
impl Store for PgStore {
    async fn insert_payment(&self, payment: &Payment) -> Result<InsertOutcome, StoreError> {
        let client = self.client().await?;
        payments::insert(&client, &self.sealing, payment).await
    }
    /// A change without an event, audit record or ledger entry is one statement (autocommit,
    /// durable); with them, one transaction, whose ledger entry is sent with the `COMMIT`.
    async fn commit_change(&self, change: &PaymentChange) -> Result<(), StoreError> {
        if change.event.is_none() && change.audit.is_none() && change.ledger.is_none() {
            let client = self.client().await?;
            return payments::commit_change(&client, &self.sealing, change).await;
        }
        if let Some(posting) = &change.ledger {
            let client = self.client().await?;
            return payments::commit_with_posting(client, &self.sealing, change, posting).await;
        }
        in_transaction!(self, |tx| payments::commit_change(
            &tx,
            &self.sealing,
            change
        )
        .await)
    }
    async fn use_nonce(
        &self,
        project: ProjectId,
        nonce: &str,
        now: Timestamp,
        expires_at: Timestamp,
    ) -> Result<bool, StoreError> {
        let client = self.client().await?;
        payments::use_nonce(&client, project, nonce, now, expires_at).await
    }

    /// Ready while the pool is open (whether the database answers shows in the next call).
    fn is_ready(&self) -> bool {
        !self.pool.is_closed()
    }

    /// The five reads sent together on one connection (pipelined: one round trip).
    async fn backlog(&self) -> Result<Backlog, StoreError> {
        let client = self.client().await?;
        let (by_status, oldest_due_payment, pending_events, oldest_pending_event, failed_events) =
            tokio::try_join!(
                payments::count_by_status(&client),
                payments::oldest_due(&client),
                outbox::pending(&client),
                outbox::oldest_pending(&client),
                outbox::failed_count(&client),
            )?;
        Ok(Backlog {
            by_status,
            oldest_due_payment,
            pending_events,
            oldest_pending_event,
            failed_events,
        })
    }

    /// One statement per batch (short locks); concurrent purges on other nodes skip the rows
    /// this one holds.
    async fn purge(
        &self,
        what: Retained,
        before: Timestamp,
        limit: usize,
    ) -> Result<Purged, StoreError> {
        let client = self.client().await?;
        let deleted = match what {
            Retained::Nonces => payments::purge_nonces(&client, before, limit).await?,
            Retained::FinishedEvents => outbox::purge_finished(&client, before, limit).await?,
            Retained::Audit => directory::purge_audit(&client, before, limit).await?,
        };
        Ok(Purged::of_batch(deleted, limit))
    }

    /// One pooled transaction: committed when the work answers `Ok`, rolled back otherwise.
    async fn transact(&self, work: TxWork) -> Result<TxOutput, StoreError> {
        let mut client = self.client().await?;
        let tx = client.transaction().await.map_err(db)?;
        let answer = work(&mut PgTx {
            tx: &tx,
            sealing: &self.sealing,
        })
        .await;
        match answer {
            Ok(value) => {
                tx.commit().await.map_err(db)?;
                Ok(value)
            }
            Err(e) => {
                tx.rollback().await.map_err(db)?;
                Err(e)
            }
        }
    }

    /// The credentials' query and the payment's, sent together on one connection (pipelined:
    /// one round trip).
    async fn auth_lookup_with_payment(
        &self,
        hash: &[u8; 32],
        keyid: Option<&KeyId>,
        id: PaymentId,
    ) -> Result<(AuthLookup, Option<Payment>), StoreError> {
        let client = self.client().await?;
        let (found, payment) = tokio::join!(
            directory::auth_lookup(&client, hash, keyid),
            payments::by_id(&client, &self.sealing, id)
        );
        let found = found?;
        let payment = match found.token {
            Some(_) => payment?,
            None => None,
        };
        Ok((found, payment))
    }

    async fn take_turn(
        &self,
        task: &str,
        now: Timestamp,
        until: Timestamp,
    ) -> Result<bool, StoreError> {
        let client = self.client().await?;
        directory::take_turn(&client, task, now, until).await
    }

    /// One statement (atomic, durable at its autocommit): the nonce, then, only if it was
    /// free, the insert whose unique key answers idempotency; a taken key is read in the next
    /// statement (at READ COMMITTED it sees the winner). A replay writes nothing. A candidate
    /// with its history entry (requisites issued by a provider that answers locally, which
    /// production nodes with an HTTP upstream never have) takes the generic transaction.
    async fn admit_create(
        &self,
        nonce: Option<NonceUse<'_>>,
        project: ProjectId,
        merchant_payment_id: &MerchantPaymentId,
        candidate: Option<&Payment>,
        issued: Option<&StatusChange>,
    ) -> Result<AdmitOutcome, StoreError> {
        if issued.is_some() {
            return payments_core::store::generic::admit_create(
                self,
                nonce,
                project,
                merchant_payment_id,
                candidate,
                issued,
            )
            .await;
        }
        let client = self.client().await?;
        match (nonce, candidate) {
            (None, None) => Ok(
                match payments::by_merchant_id(&client, &self.sealing, project, merchant_payment_id)
                    .await?
                {
                    Some(existing) => AdmitOutcome::Existing(existing),
                    None => AdmitOutcome::Free,
                },
            ),
            (None, Some(p)) => Ok(match payments::insert(&client, &self.sealing, p).await? {
                InsertOutcome::Inserted => AdmitOutcome::Inserted,
                InsertOutcome::Existing(existing) => AdmitOutcome::Existing(existing),
            }),
            (Some(n), None) => {
                if !payments::use_nonce(&client, n.project, n.nonce, n.now, n.expires_at).await? {
                    return Ok(AdmitOutcome::Replayed);
                }
                Ok(
                    match payments::by_merchant_id(
                        &client,
                        &self.sealing,
                        project,
                        merchant_payment_id,
                    )
                    .await?
                    {
                        Some(existing) => AdmitOutcome::Existing(existing),
                        None => AdmitOutcome::Free,
                    },
                )
            }
            (Some(n), Some(p)) => match payments::admit(&client, &self.sealing, n, p).await? {
                None => Ok(AdmitOutcome::Replayed),
                Some(InsertOutcome::Inserted) => Ok(AdmitOutcome::Inserted),
                Some(InsertOutcome::Existing(existing)) => Ok(AdmitOutcome::Existing(existing)),
            },
        }
    }
}
