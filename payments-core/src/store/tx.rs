//! One transaction, and the compound writes written once over it.
//!
//! A compound write (a create's admission, a change applied once per key, a resend that
//! answers failed events) must be all or nothing. Each used to be written by every backend;
//! now a backend writes only the small steps of a [`Transaction`] and [`Store::transact`],
//! which runs a piece of work in one transaction and commits it only when the work succeeds,
//! and the compound writes are written here, once:
//! [`admit_create`], [`commit_change_once`], [`commit_resend`], and the single writes
//! [`insert_payment`], [`commit_change`] and [`use_nonce`]. They are the default bodies of
//! the port's methods of the same names; a backend may still override one for speed (the
//! PostgreSQL store answers a create's admission in one statement), and the contract suite
//! then compares its answers with these (`contract::admit_create_matches_the_generic_path`,
//! feature `testing`).
//!
//! How the backends run the work: SQLite on its writer thread, inside the group-commit
//! transaction (its steps are synchronous, so the work's future is complete when first
//! polled; a work that waits for anything else is refused); PostgreSQL in a pooled transaction;
//! the memory store under its lock, undoing the steps of a work that fails.

use std::any::Any;
use std::sync::Arc;

use async_trait::async_trait;
use futures_util::future::BoxFuture;

use super::{
    AdmitOutcome, AppealChange, InsertOutcome, NonceUse, PaymentChange, Store, StoreError,
};
use crate::appeal::Appeal;
use crate::clock::Timestamp;
use crate::history::StatusChange;
use crate::ids::{EventId, PaymentId, ProjectId};
use crate::ledger::{Balance, LedgerEntry, Posting};
use crate::payment::{MerchantPaymentId, Payment};
use crate::project::AuditRecord;

/// The steps of one transaction. Every step sees the transaction's earlier steps; none is
/// visible to anyone else before the transaction commits, and none stays when it rolls back.
#[async_trait]
pub trait Transaction: Send {
    /// Records `nonce` unless it is recorded and live at its `now` (then `false`, nothing
    /// written), as [`Store::use_nonce`].
    async fn use_nonce(&mut self, nonce: NonceUse<'_>) -> Result<bool, StoreError>;
    /// Whether `nonce` is recorded and live at its `now`; writes nothing.
    async fn nonce_live(&mut self, nonce: NonceUse<'_>) -> Result<bool, StoreError>;
    /// Stores `payment` unless its `(project, merchant_payment_id)` is taken, as
    /// [`Store::insert_payment`].
    async fn insert_payment(&mut self, payment: &Payment) -> Result<InsertOutcome, StoreError>;
    /// Appends an entry of a payment's status history ([`PaymentChange::history`]).
    async fn insert_status_change(&mut self, entry: &StatusChange) -> Result<(), StoreError>;
    /// The payment of `project` with `merchant_payment_id`.
    async fn payment_by_merchant_id(
        &mut self,
        project: ProjectId,
        merchant_payment_id: &MerchantPaymentId,
    ) -> Result<Option<Payment>, StoreError>;
    /// A change with its event and audit record, as
    /// [`Store::commit_change`].
    async fn commit_change(&mut self, change: &PaymentChange) -> Result<(), StoreError>;
    /// Marks the failed events of `payment` that no resend has answered yet as answered by the
    /// event `resend`; their ids, in queueing order.
    async fn update_resent(
        &mut self,
        payment: PaymentId,
        resend: EventId,
    ) -> Result<Vec<EventId>, StoreError>;
    /// The project's balance, locked until the transaction ends (another transaction that
    /// appends to the project's ledger waits), so what the work decides on it still holds at
    /// its commit.
    async fn lock_balance(&mut self, project: ProjectId) -> Result<Balance, StoreError>;
    /// Appends `posting` to its project's ledger ([`Balance::post`]) and keeps the balance; a
    /// second entry for one payment version, or a second payout with one reference in a
    /// project, is [`StoreError::Duplicate`].
    async fn insert_posting(&mut self, posting: &Posting) -> Result<LedgerEntry, StoreError>;
    /// Appends an audit record.
    async fn insert_audit(&mut self, record: &AuditRecord) -> Result<(), StoreError>;
    /// Writes `appeal` over the stored appeal of its id if that one's version is
    /// `expected_version`; else [`StoreError::Conflict`] (an unknown appeal too).
    async fn update_appeal(
        &mut self,
        appeal: &Appeal,
        expected_version: u64,
    ) -> Result<(), StoreError>;
}

/// What a [`TxWork`] answers, boxed (the port is used as `dyn Store`, so
/// [`Store::transact`] cannot be generic); [`transact`] hands back the typed answer.
pub type TxOutput = Box<dyn Any + Send>;

/// A piece of work run in one transaction by [`Store::transact`]. It may be run more than once
/// (the SQLite writer runs a batch again, each job in a savepoint, when one of its jobs fails),
/// so it is a `Fn` over data it owns. It reaches storage only through its [`Transaction`]:
/// calling the store itself from inside the work fails (SQLite: the work would wait, and is
/// refused) or blocks (the memory store holds its lock for the work).
pub type TxWork = Arc<
    dyn for<'t> Fn(&'t mut dyn Transaction) -> BoxFuture<'t, Result<TxOutput, StoreError>>
        + Send
        + Sync,
>;

/// Runs `work` in one transaction of `store` and answers what it answered: committed when it
/// answers `Ok`, rolled back (nothing written) when it answers `Err`.
pub async fn transact<S, R, F>(store: &S, work: F) -> Result<R, StoreError>
where
    S: Store + ?Sized,
    R: Send + 'static,
    F: for<'t> Fn(&'t mut dyn Transaction) -> BoxFuture<'t, Result<R, StoreError>>
        + Send
        + Sync
        + 'static,
{
    let work: TxWork = Arc::new(move |tx| {
        let answer = work(tx);
        Box::pin(async move { answer.await.map(|r| Box::new(r) as TxOutput) })
    });
    store
        .transact(work)
        .await?
        .downcast::<R>()
        .map(|r| *r)
        .map_err(|_| StoreError::Corrupt("a transaction answered another type".into()))
}

/// [`Store::insert_payment`] written once: the insert in a transaction of its own.
pub async fn insert_payment<S: Store + ?Sized>(
    store: &S,
    payment: &Payment,
) -> Result<InsertOutcome, StoreError> {
    let payment = Arc::new(payment.clone());
    transact(store, move |tx| {
        let payment = Arc::clone(&payment);
        Box::pin(async move { tx.insert_payment(&payment).await })
    })
    .await
}

/// [`Store::commit_change`] written once: the change in a transaction of its own.
pub async fn commit_change<S: Store + ?Sized>(
    store: &S,
    change: &PaymentChange,
) -> Result<(), StoreError> {
    let change = Arc::new(change.clone());
    transact(store, move |tx| {
        let change = Arc::clone(&change);
        Box::pin(async move { tx.commit_change(&change).await })
    })
    .await
}

/// [`Store::use_nonce`] written once: the nonce in a transaction of its own.
pub async fn use_nonce<S: Store + ?Sized>(
    store: &S,
    nonce: NonceUse<'_>,
) -> Result<bool, StoreError> {
    let nonce = Arc::new(OwnedNonce::of(&nonce));
    transact(store, move |tx| {
        let nonce = Arc::clone(&nonce);
        Box::pin(async move { tx.use_nonce(nonce.borrow()).await })
    })
    .await
}

/// An owned [`NonceUse`], for work that outlives the caller's borrow.
#[derive(Debug, Clone, PartialEq, Eq)]
struct OwnedNonce {
    project: ProjectId,
    nonce: String,
    now: Timestamp,
    expires_at: Timestamp,
}

impl OwnedNonce {
    fn of(n: &NonceUse<'_>) -> OwnedNonce {
        OwnedNonce {
            project: n.project,
            nonce: n.nonce.to_string(),
            now: n.now,
            expires_at: n.expires_at,
        }
    }

    fn borrow(&self) -> NonceUse<'_> {
        NonceUse {
            project: self.project,
            nonce: &self.nonce,
            now: self.now,
            expires_at: self.expires_at,
        }
    }
}

/// [`Store::admit_create`] written once: the nonce (a replay writes nothing), then the
/// candidate's insert or, without a candidate, the lookup of the merchant payment id, in one
/// transaction. Without a nonce and a candidate there is nothing to write: a plain read.
pub async fn admit_create<S: Store + ?Sized>(
    store: &S,
    nonce: Option<NonceUse<'_>>,
    project: ProjectId,
    merchant_payment_id: &MerchantPaymentId,
    candidate: Option<&Payment>,
    issued: Option<&StatusChange>,
) -> Result<AdmitOutcome, StoreError> {
    debug_assert!(
        issued.is_none_or(|h| candidate.is_some_and(|p| h.payment_id == p.id)),
        "the entry is the candidate's"
    );
    if nonce.is_none() && candidate.is_none() {
        return Ok(
            match store
                .payment_by_merchant_id(project, merchant_payment_id)
                .await?
            {
                Some(existing) => AdmitOutcome::Existing(existing),
                None => AdmitOutcome::Free,
            },
        );
    }
    // Copied once and shared by every run of the work (a run takes a reference count).
    let owned = Arc::new((
        nonce.as_ref().map(OwnedNonce::of),
        merchant_payment_id.clone(),
        candidate.cloned(),
        issued.cloned(),
    ));
    transact(store, move |tx| {
        let owned = Arc::clone(&owned);
        Box::pin(async move {
            let (nonce, mpid, candidate, issued) = &*owned;
            if let Some(n) = &nonce {
                if !tx.use_nonce(n.borrow()).await? {
                    return Ok(AdmitOutcome::Replayed);
                }
            }
            Ok(match &candidate {
                Some(p) => match tx.insert_payment(p).await? {
                    InsertOutcome::Inserted => {
                        if let Some(entry) = issued {
                            tx.insert_status_change(entry).await?;
                        }
                        AdmitOutcome::Inserted
                    }
                    InsertOutcome::Existing(existing) => AdmitOutcome::Existing(existing),
                },
                None => match tx.payment_by_merchant_id(project, mpid).await? {
                    Some(existing) => AdmitOutcome::Existing(existing),
                    None => AdmitOutcome::Free,
                },
            })
        })
    })
    .await
}

/// [`Store::commit_change_once`] written once: with a change, the key is recorded and the
/// change committed in one transaction unless the key is live (`false`, nothing written); an
/// error (a conflict included) writes neither. Without a change, whether the key is free.
pub async fn commit_change_once<S: Store + ?Sized>(
    store: &S,
    key: NonceUse<'_>,
    change: Option<&PaymentChange>,
) -> Result<bool, StoreError> {
    let owned = Arc::new((OwnedNonce::of(&key), change.cloned()));
    transact(store, move |tx| {
        let owned = Arc::clone(&owned);
        Box::pin(async move {
            let (key, change) = &*owned;
            let Some(change) = change else {
                return Ok(!tx.nonce_live(key.borrow()).await?);
            };
            if !tx.use_nonce(key.borrow()).await? {
                return Ok(false);
            }
            tx.commit_change(change).await?;
            Ok(true)
        })
    })
    .await
}

/// [`Store::commit_resend`] written once: the payment's unanswered failed events are marked
/// as answered by the change's event, and the change is committed only when there were some,
/// in one transaction.
pub async fn commit_resend<S: Store + ?Sized>(
    store: &S,
    change: &PaymentChange,
) -> Result<Vec<EventId>, StoreError> {
    let resend = change
        .event
        .as_ref()
        .ok_or_else(|| StoreError::Corrupt("a resend without its event".into()))?
        .event
        .event_id;
    let change = Arc::new(change.clone());
    transact(store, move |tx| {
        let change = Arc::clone(&change);
        Box::pin(async move {
            let answered = tx.update_resent(change.payment.id, resend).await?;
            if !answered.is_empty() {
                tx.commit_change(&change).await?;
            }
            Ok(answered)
        })
    })
    .await
}

/// [`Store::commit_appeal`] written once: the appeal, its payment changes in order and its
/// audit record in one transaction.
pub async fn commit_appeal<S: Store + ?Sized>(
    store: &S,
    change: &AppealChange,
) -> Result<(), StoreError> {
    debug_assert!(change
        .payments
        .iter()
        .all(|p| p.payment.id == change.appeal.payment_id));
    let change = Arc::new(change.clone());
    transact(store, move |tx| {
        let change = Arc::clone(&change);
        Box::pin(async move {
            tx.update_appeal(&change.appeal, change.expected_version)
                .await?;
            for payment in &change.payments {
                tx.commit_change(payment).await?;
            }
            if let Some(audit) = &change.audit {
                tx.insert_audit(audit).await?;
            }
            Ok(())
        })
    })
    .await
}
