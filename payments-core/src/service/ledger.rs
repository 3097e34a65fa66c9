//! The project balance as a service ([`crate::ledger`] decides the figures): reading the
//! balance, its entries and statements; the operator's payouts and adjustments; and the
//! reconciliation that recomputes every balance from the payments and the operator's entries.

use std::collections::HashMap;
use std::sync::Arc;

use super::listing::ListCursor;
use super::{Actor, Balances};
use crate::error::{ApiError, ErrorCode};
use crate::ids::{EntryId, PaymentId, ProjectId};
use crate::ledger::{
    self, Balance, EntryKind, LedgerEntry, Posting, Statement, TxReference, Usdt, UsdtAddress,
};
use crate::payment::Payment;
use crate::project::{AuditRecord, Project};
use crate::store::{transact, EntryQuery, PaymentQuery, Store, StoreError};
use crate::Timestamp;

/// The cursor of the entry list: `(created_at, seq)` of the last entry of a page.
pub type EntryCursor = ListCursor<u64>;

/// The filters and page of `GET /api/v1/balance/entries`, read with
/// `payments_http::query::entry_list`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct EntryListQuery {
    /// `kind`: only this kind of entry.
    pub kind: Option<EntryKind>,
    /// `created_from` (RFC 3339): recorded at or after.
    pub created_from: Option<Timestamp>,
    /// `created_to` (RFC 3339): recorded before.
    pub created_to: Option<Timestamp>,
    /// `limit`: 1 to [`MAX_LIST_LIMIT`](super::MAX_LIST_LIMIT), default
    /// [`DEFAULT_LIST_LIMIT`](super::DEFAULT_LIST_LIMIT).
    pub limit: usize,
    /// `cursor`: where the page starts (a previous page's `next_cursor`).
    pub cursor: Option<EntryCursor>,
}

impl Default for EntryListQuery {
    fn default() -> Self {
        EntryListQuery {
            kind: None,
            created_from: None,
            created_to: None,
            limit: super::DEFAULT_LIST_LIMIT,
            cursor: None,
        }
    }
}

impl EntryListQuery {
    /// The store query of this page for `project`, one past the limit, newest first.
    fn store_query(&self, project: ProjectId) -> EntryQuery {
        EntryQuery {
            kind: self.kind,
            created_from: self.created_from,
            created_to: self.created_to,
            after: self.cursor.map(|c| (c.created_at, c.id)),
            ..EntryQuery::new(project, self.limit + 1)
        }
    }
}

/// The longest period a statement covers (a year and a day: a calendar year in any zone).
pub const MAX_STATEMENT_DAYS: u64 = 367;

/// A page of a project's ledger entries.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct EntryPage {
    /// The entries, newest first.
    pub entries: Vec<LedgerEntry>,
    /// The cursor of the next page; `None` on the last page.
    pub next_cursor: Option<EntryCursor>,
}

/// A payout the operator records: USDT sent to the project's owner outside this service.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PayoutRequest {
    /// How much, positive.
    pub amount: Usdt,
    /// Where it was sent.
    pub destination: UsdtAddress,
    /// The transfer's transaction hash.
    pub reference: TxReference,
    /// A reason to record it beyond the balance; without one such a payout is refused.
    pub force_reason: Option<String>,
}

/// Why an operator's ledger entry was refused; each maps to one API error
/// ([`From<LedgerError> for ApiError`]).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum LedgerError {
    /// No such project (`404 not_found`).
    #[error("no such project")]
    NoProject,
    /// A field is invalid (`400 bad_request`).
    #[error("{0}")]
    Invalid(String),
    /// The payout is larger than the balance and was not forced
    /// (`409 insufficient_balance`).
    #[error("the payout of {amount} USDT is larger than the balance of {balance} USDT; record it with a reason (force) if it really was paid")]
    BeyondBalance {
        /// The payout.
        amount: Usdt,
        /// The balance when it was refused.
        balance: Usdt,
    },
    /// The project has a payout with this reference and other details
    /// (`409 payout_reference_conflict`).
    #[error(
        "the project already has payout {0} with this reference and another amount or destination"
    )]
    ReferenceConflict(EntryId),
    /// The store failed.
    #[error(transparent)]
    Store(#[from] StoreError),
}

impl From<LedgerError> for ApiError {
    fn from(e: LedgerError) -> ApiError {
        match e {
            LedgerError::NoProject => ApiError::new(ErrorCode::NotFound, "no such project"),
            LedgerError::Invalid(m) => ApiError::bad_request(m),
            LedgerError::BeyondBalance { .. } => {
                ApiError::new(ErrorCode::InsufficientBalance, e.to_string())
            }
            LedgerError::ReferenceConflict(_) => {
                ApiError::new(ErrorCode::PayoutReferenceConflict, e.to_string())
            }
            LedgerError::Store(s) => s.into(),
        }
    }
}

/// A difference the reconciliation found.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LedgerDifference {
    /// The project.
    pub project_id: ProjectId,
    /// The payment involved; `None` for a difference of the project's balance row.
    pub payment_id: Option<PaymentId>,
    /// What the payments and the operator's entries say the figure is.
    pub expected: Usdt,
    /// What the ledger holds.
    pub recorded: Usdt,
    /// What differs, in words.
    pub what: String,
}

/// What the reconciliation did.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct LedgerReport {
    /// Projects looked at.
    pub projects: u64,
    /// Payments looked at.
    pub payments: u64,
    /// Entries read.
    pub entries: u64,
    /// Every difference found.
    pub differences: Vec<LedgerDifference>,
    /// Entries appended to repair payment differences (with `repair`).
    pub repaired: u64,
}

/// How many payments or entries the reconciliation reads per page.
const RECONCILE_PAGE: usize = 1_000;

/// A difference the reconciliation found in `project`'s ledger.
fn difference(
    project: ProjectId,
    payment_id: Option<PaymentId>,
    expected: Usdt,
    recorded: Usdt,
    what: String,
) -> LedgerDifference {
    LedgerDifference {
        project_id: project,
        payment_id,
        expected,
        recorded,
        what,
    }
}

impl Balances<'_> {
    /// A project's balance.
    pub async fn balance(self, project: ProjectId) -> Result<Balance, StoreError> {
        self.ports.store.balance(project).await
    }

    /// A page of `project`'s ledger entries as `query` asks, newest first.
    pub async fn list_entries(
        self,
        project: &Project,
        query: &EntryListQuery,
    ) -> Result<EntryPage, StoreError> {
        let mut found = self
            .ports
            .store
            .find_entries(&query.store_query(project.id))
            .await?;
        let more = found.len() > query.limit;
        found.truncate(query.limit);
        let next_cursor = if more {
            found.last().map(|e| EntryCursor {
                created_at: e.posting.at,
                id: e.seq,
            })
        } else {
            None
        };
        Ok(EntryPage {
            entries: found,
            next_cursor,
        })
    }

    /// `project`'s statement for `[from, to)`: the opening balance (after the last entry
    /// before `from`), each kind's count and sum in the period (summed by the store), and the
    /// closing balance.
    pub async fn statement(
        self,
        project: ProjectId,
        from: Timestamp,
        to: Timestamp,
    ) -> Result<Statement, StoreError> {
        let store = &self.ports.store;
        let before = store
            .find_entries(&EntryQuery {
                created_to: Some(from),
                ..EntryQuery::new(project, 1)
            })
            .await?;
        let opening = before.first().map_or(Usdt::ZERO, |e| e.balance_after);
        let totals = store.entry_totals(project, from, to).await?;
        let mut closing = opening;
        let lines = EntryKind::ALL
            .into_iter()
            .map(|k| {
                let t = totals
                    .iter()
                    .find(|(kind, _)| *kind == k)
                    .map(|(_, t)| *t)
                    .unwrap_or_default();
                closing = closing.checked_add(t.sum).unwrap_or(closing);
                (k, t)
            })
            .collect();
        Ok(Statement {
            project_id: project,
            from,
            to,
            opening,
            lines,
            closing,
        })
    }

    /// Records a payout of `project`, audited as `actor`: refused beyond the balance unless
    /// forced with a reason; a repeat with the same reference, amount and destination answers
    /// the payout recorded first (a retry: `false`), another one with the same reference is a
    /// conflict. `true` with a payout recorded now.
    pub async fn record_payout(
        self,
        project: ProjectId,
        payout: &PayoutRequest,
        actor: &Actor,
    ) -> Result<(LedgerEntry, bool), LedgerError> {
        if let Some(r) = &payout.force_reason {
            ledger::check_reason(r).map_err(|e| LedgerError::Invalid(format!("reason: {e}")))?;
        }
        if payout.amount.units() <= 0 {
            return Err(LedgerError::Invalid("amount: must be positive".into()));
        }
        if let Some(existing) = self.payout_by_reference(project, &payout.reference).await? {
            return same_payout(existing, payout).map(|e| (e, false));
        }
        let now = self.ports.clock.now();
        let posting = Posting {
            id: EntryId::generate_ordered(now, self.ports.rng.as_ref()),
            project_id: project,
            kind: EntryKind::Payout,
            amount: payout.amount.neg(),
            at: now,
            payment: None,
            destination: Some(payout.destination.clone()),
            reference: Some(payout.reference.clone()),
            reason: payout.force_reason.clone(),
            actor: Some(actor.0.clone()),
        };
        let audit = self.ledger_audit(&posting, "ledger.payout", actor);
        match self
            .post_checked(project, posting, payout.force_reason.is_some(), audit)
            .await
        {
            Err(LedgerError::Store(StoreError::Duplicate(_))) => {
                // Another call recorded this reference meanwhile.
                match self.payout_by_reference(project, &payout.reference).await? {
                    Some(existing) => same_payout(existing, payout).map(|e| (e, false)),
                    None => Err(StoreError::Conflict.into()),
                }
            }
            Err(LedgerError::BeyondBalance { balance, .. }) => Err(LedgerError::BeyondBalance {
                amount: payout.amount,
                balance,
            }),
            other => other.map(|e| (e, true)),
        }
    }

    /// Records an operator adjustment of `project`'s balance (either sign, not zero) with a
    /// reason, audited as `actor`.
    pub async fn record_adjustment(
        self,
        project: ProjectId,
        amount: Usdt,
        reason: &str,
        actor: &Actor,
    ) -> Result<LedgerEntry, LedgerError> {
        ledger::check_reason(reason).map_err(|e| LedgerError::Invalid(format!("reason: {e}")))?;
        if amount.is_zero() {
            return Err(LedgerError::Invalid("amount: must not be zero".into()));
        }
        let now = self.ports.clock.now();
        let posting = Posting {
            id: EntryId::generate_ordered(now, self.ports.rng.as_ref()),
            project_id: project,
            kind: EntryKind::OperatorAdjustment,
            amount,
            at: now,
            payment: None,
            destination: None,
            reference: None,
            reason: Some(reason.to_string()),
            actor: Some(actor.0.clone()),
        };
        let audit = self.ledger_audit(&posting, "ledger.adjust", actor);
        self.post_checked(project, posting, true, audit).await
    }

    /// The project must exist; then [`post_entry`].
    async fn post_checked(
        self,
        project: ProjectId,
        posting: Posting,
        forced: bool,
        audit: AuditRecord,
    ) -> Result<LedgerEntry, LedgerError> {
        use crate::store::MerchantStoreExt;
        if self.ports.store.project(project).await?.is_none() {
            return Err(LedgerError::NoProject);
        }
        let amount = posting.amount;
        match post_entry(&*self.ports.store, posting, forced, audit).await? {
            Posted::Appended(entry) => Ok(entry),
            Posted::BeyondBalance(balance) => Err(LedgerError::BeyondBalance {
                amount: amount.neg(),
                balance,
            }),
        }
    }

    async fn payout_by_reference(
        self,
        project: ProjectId,
        reference: &TxReference,
    ) -> Result<Option<LedgerEntry>, StoreError> {
        Ok(self
            .ports
            .store
            .find_entries(&EntryQuery {
                reference: Some(reference.clone()),
                ..EntryQuery::new(project, 1)
            })
            .await?
            .pop())
    }

    fn ledger_audit(self, posting: &Posting, action: &str, actor: &Actor) -> AuditRecord {
        let after = serde_json::json!({
            "entry_id": posting.id,
            "kind": posting.kind,
            "amount": posting.amount,
            "destination": posting.destination.as_ref().map(|d| d.as_str()),
            "reference": posting.reference.as_ref().map(|r| r.as_str()),
            "reason": posting.reason,
        });
        AuditRecord {
            at: posting.at,
            actor: actor.0.clone(),
            action: action.into(),
            target: posting.project_id.to_string(),
            before: None,
            after: Some(after.to_string()),
        }
    }

    /// Recomputes every project's balance from its payments ([`ledger::credited`]) and the
    /// operator's entries, and compares it with the ledger: each payment's entries must sum
    /// to what it contributes now, the entries must be numbered without gaps with each
    /// `balance_after` the running sum, and the balance row must equal the entries' sum.
    /// With `repair`, a payment whose entries differ from what it contributes gets the entry
    /// that makes up the difference, named after its current version (a payment completed by
    /// a build without the ledger, or before it); its difference is still reported. Reads
    /// every payment and entry in pages; holds one sum per payment with entries of the project
    /// being read.
    pub async fn reconcile_ledger(
        self,
        repair: bool,
        actor: &Actor,
    ) -> Result<LedgerReport, StoreError> {
        use crate::store::MerchantStoreExt;
        let mut report = LedgerReport::default();
        for project in self.ports.store.projects().await? {
            report.projects += 1;
            self.reconcile_project(project.id, repair, actor, &mut report)
                .await?;
        }
        Ok(report)
    }

    async fn reconcile_project(
        self,
        project: ProjectId,
        repair: bool,
        actor: &Actor,
        report: &mut LedgerReport,
    ) -> Result<(), StoreError> {
        let by_payment = self.check_entries(project, report).await?;
        self.check_payments(project, by_payment, repair, actor, report)
            .await
    }

    /// The entries, oldest first: their running sum and numbering against each entry's and the
    /// balance row's; answers each payment's part of them.
    async fn check_entries(
        self,
        project: ProjectId,
        report: &mut LedgerReport,
    ) -> Result<HashMap<PaymentId, Usdt>, StoreError> {
        let store = &self.ports.store;
        let balance = store.balance(project).await?;
        let mut by_payment: HashMap<PaymentId, Usdt> = HashMap::new();
        let mut sum = Usdt::ZERO;
        let mut seq = 0u64;
        let mut pages = EntryPages::new(EntryQuery::new(project, RECONCILE_PAGE));
        loop {
            let page = pages.next(&**store).await?;
            if page.is_empty() {
                break;
            }
            for e in &page {
                report.entries += 1;
                seq += 1;
                sum = sum
                    .checked_add(e.posting.amount)
                    .ok_or_else(|| StoreError::Corrupt("a ledger sum out of range".into()))?;
                if e.seq != seq || e.balance_after != sum {
                    report.differences.push(difference(
                        project,
                        e.posting.payment.map(|(id, _)| id),
                        sum,
                        e.balance_after,
                        format!(
                            "entry {} (seq {}, expected seq {seq}): balance_after is not the running sum",
                            e.posting.id, e.seq
                        ),
                    ));
                    seq = e.seq;
                    sum = e.balance_after;
                }
                if let Some((id, _)) = e.posting.payment {
                    let part = by_payment.entry(id).or_default();
                    *part = part.checked_add(e.posting.amount).unwrap_or(*part);
                }
            }
        }
        if balance.balance != sum || balance.entries != seq {
            report.differences.push(difference(
                project,
                None,
                sum,
                balance.balance,
                format!(
                    "the balance row says {} over {} entries; the entries sum to {sum} over {seq}",
                    balance.balance, balance.entries
                ),
            ));
        }
        Ok(by_payment)
    }

    /// The payments, newest first: what each contributes now against its entries
    /// (`by_payment`, emptied as they are matched; repaired when asked), then the entries of
    /// payments that are not the project's.
    async fn check_payments(
        self,
        project: ProjectId,
        mut by_payment: HashMap<PaymentId, Usdt>,
        repair: bool,
        actor: &Actor,
        report: &mut LedgerReport,
    ) -> Result<(), StoreError> {
        let mut before = None;
        loop {
            let page = self
                .ports
                .store
                .find_payments(&PaymentQuery {
                    before,
                    ..PaymentQuery::new(project, RECONCILE_PAGE)
                })
                .await?;
            for p in &page {
                report.payments += 1;
                let expected = ledger::credited(p);
                let recorded = by_payment.remove(&p.id).unwrap_or_default();
                if expected != recorded {
                    report.differences.push(difference(
                        project,
                        Some(p.id),
                        expected,
                        recorded,
                        format!(
                            "payment {} ({}, version {}) contributes {expected}; its entries sum to {recorded}",
                            p.id,
                            p.status.as_str(),
                            p.version
                        ),
                    ));
                    if repair {
                        report.repaired += u64::from(self.repair_payment(p, actor).await?);
                    }
                }
            }
            if page.len() < RECONCILE_PAGE {
                break;
            }
            before = page.last().map(|p| (p.created_at, p.id));
        }
        for (id, recorded) in by_payment {
            if !recorded.is_zero() {
                report.differences.push(difference(
                    project,
                    Some(id),
                    Usdt::ZERO,
                    recorded,
                    format!("entries of payment {id}, which is not a payment of this project"),
                ));
            }
        }
        Ok(())
    }

    /// Appends the entry that brings payment `p`'s entries to what it contributes now, as a
    /// change of its own: the payment's next version (nothing else of it changes), committed
    /// only if the payment is still at the version read, so a change that lands meanwhile
    /// (and its own entry) is never counted twice: the payment and its entries are read
    /// again, up to a few times. `false` when nothing was needed any more.
    async fn repair_payment(self, p: &Payment, actor: &Actor) -> Result<bool, StoreError> {
        let store = &self.ports.store;
        for _ in 0..4 {
            let Some(current) = store.payment(p.id).await? else {
                return Ok(false);
            };
            let mut recorded = Usdt::ZERO;
            let mut pages = EntryPages::new(EntryQuery {
                payment: Some(p.id),
                ..EntryQuery::new(p.project_id, RECONCILE_PAGE)
            });
            loop {
                let page = pages.next(&**store).await?;
                if page.is_empty() {
                    break;
                }
                for e in &page {
                    recorded = recorded
                        .checked_add(e.posting.amount)
                        .ok_or_else(|| StoreError::Corrupt("a ledger sum out of range".into()))?;
                }
            }
            let expected = ledger::credited(&current);
            let Some(amount) = expected.checked_sub(recorded) else {
                return Ok(false);
            };
            if amount.is_zero() {
                return Ok(false);
            }
            let kind = EntryKind::of_change(recorded, expected);
            let now = self.ports.clock.now();
            let mut next = current.clone();
            next.version += 1;
            let posting = Posting {
                id: EntryId::generate_ordered(now, self.ports.rng.as_ref()),
                project_id: p.project_id,
                kind,
                amount,
                at: now,
                payment: Some((next.id, next.version)),
                destination: None,
                reference: None,
                reason: Some("reconciliation: the payment's entries did not match it".into()),
                actor: Some(actor.0.clone()),
            };
            let audit = self.ledger_audit(&posting, "ledger.repair", actor);
            let change = crate::store::PaymentChange {
                payment: next,
                expected_version: current.version,
                event: None,
                audit: Some(audit),
                ledger: Some(posting),
                history: None,
            };
            match store.commit_change(&change).await {
                Ok(()) => return Ok(true),
                Err(StoreError::Conflict) => continue,
                Err(e) => return Err(e),
            }
        }
        Ok(false)
    }
}

/// A query's entries oldest first, [`RECONCILE_PAGE`] at a time, through the
/// `(created_at, seq)` cursor.
struct EntryPages {
    query: EntryQuery,
    done: bool,
}

impl EntryPages {
    fn new(query: EntryQuery) -> EntryPages {
        EntryPages {
            query: EntryQuery {
                oldest_first: true,
                limit: RECONCILE_PAGE,
                ..query
            },
            done: false,
        }
    }

    /// The next page; empty once every entry was read.
    async fn next(&mut self, store: &dyn Store) -> Result<Vec<LedgerEntry>, StoreError> {
        if self.done {
            return Ok(Vec::new());
        }
        let page = store.find_entries(&self.query).await?;
        self.done = page.len() < self.query.limit;
        self.query.after = page.last().map(|e| (e.posting.at, e.seq));
        Ok(page)
    }
}

/// A payout recorded under the same reference: the same payout (a retry) or a conflict.
fn same_payout(existing: LedgerEntry, payout: &PayoutRequest) -> Result<LedgerEntry, LedgerError> {
    let p = &existing.posting;
    if p.kind == EntryKind::Payout
        && p.amount == payout.amount.neg()
        && p.destination.as_ref() == Some(&payout.destination)
    {
        Ok(existing)
    } else {
        Err(LedgerError::ReferenceConflict(p.id))
    }
}

/// What [`post_entry`] did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Posted {
    /// The entry was appended (with its audit record).
    Appended(LedgerEntry),
    /// A payout beyond the balance without a reason to force it: nothing was written. The
    /// balance at the time.
    BeyondBalance(Usdt),
}

/// Appends an operator's `posting` (a payout or an adjustment) with its `audit` record in one
/// transaction. A payout larger than the balance is refused ([`Posted::BeyondBalance`]) unless
/// `forced`; the check and the append see the same balance (the store locks it). A payout
/// whose reference the project already has is [`StoreError::Duplicate`].
pub async fn post_entry<S: Store + ?Sized>(
    store: &S,
    posting: Posting,
    forced: bool,
    audit: AuditRecord,
) -> Result<Posted, StoreError> {
    let owned = Arc::new((posting, audit));
    transact(store, move |tx| {
        let owned = Arc::clone(&owned);
        Box::pin(async move {
            let (posting, audit) = &*owned;
            let balance = tx.lock_balance(posting.project_id).await?;
            if posting.kind == EntryKind::Payout
                && !forced
                && balance
                    .balance
                    .checked_add(posting.amount)
                    .is_none_or(|b| b.units() < 0)
            {
                return Ok(Posted::BeyondBalance(balance.balance));
            }
            let entry = tx.insert_posting(posting).await?;
            tx.insert_audit(audit).await?;
            Ok(Posted::Appended(entry))
        })
    })
    .await
}
