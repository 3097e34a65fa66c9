//! Appeals ([`crate::appeal`]): opened by the merchant (`POST /api/v1/payments/{id}/appeals`)
//! or the payer (the payer page's "I paid"), sent to the provider on record, decided by its
//! signed answer or by support, expired by the sweep at their deadline. A decision and the
//! payment changes it makes are one store write ([`Store::commit_appeal`]).

use futures_util::future::{select, Either};
use serde::Deserialize;
use sha2::{Digest, Sha256};

use super::{Appeals, AuthError, Authenticated, NotificationError, SignedNotification};
use crate::amount::Amount;
use crate::appeal::{
    self, Appeal, AppealInsert, AppealQuery, AppealReason, AppealSource, AppealState,
    AppealTransitionError, AppealTrigger, ReceiptInfo, IDEMPOTENCY_KEY_MAX_LEN, NOTE_MAX_CHARS,
    PAYER_BANK_MAX_CHARS,
};
use crate::callback::CallbackVerifier;
use crate::clock::Timestamp;
use crate::history::ChangeSource;
use crate::ids::{AppealId, ProviderName};
use crate::payment::{Payment, PaymentStatus};
use crate::project::{AuditRecord, Project};
use crate::provider::{AppealInquiry, AppealSubmission};
use crate::receipt::{Receipt, ReceiptError, ReceiptKind, MAX_RECEIPTS};
use crate::store::{AppealChange, StoreError};
use crate::transition::{self, RecheckOutcome, TransitionError, Trigger};
use crate::{ApiError, ErrorCode};

/// Why an appeal operation was refused, each with the stable code of its answer
/// ([`AppealError::code`]).
#[non_exhaustive]
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum AppealError {
    /// The body is not an appeal (`400 bad_request`).
    #[error("{field}: {why}")]
    Invalid {
        /// The field.
        field: &'static str,
        /// What is wrong with it.
        why: String,
    },
    /// A receipt is refused (`422 receipt_invalid`); nothing is stored.
    #[error("receipts[{index}]: {source}")]
    Receipt {
        /// Its place in the request.
        index: usize,
        /// Why.
        source: ReceiptError,
    },
    /// No such payment in the caller's project (`404 payment_not_found`).
    #[error("payment not found")]
    PaymentNotFound,
    /// No such appeal in the caller's project (`404 appeal_not_found`).
    #[error("appeal not found")]
    NotFound,
    /// The payment cannot be appealed (`409 invalid_transition`).
    #[error("cannot appeal this payment: {0}")]
    NotAppealable(&'static str),
    /// The idempotency key names another appeal (`409 appeal_idempotency_conflict`).
    #[error("idempotency_key {key:?} was used for another appeal ({existing})")]
    IdempotencyConflict {
        /// The key.
        key: String,
        /// The appeal stored under it.
        existing: AppealId,
    },
    /// The payment has an active appeal (`409 appeal_limit_reached`).
    #[error("the payment has an appeal under way ({0}); wait for its decision")]
    Active(AppealId),
    /// The payment has taken every appeal this source may open (`409 appeal_limit_reached`).
    #[error("the payment has taken {0} appeals from this source; no more are accepted")]
    Full(u32),
    /// The appeal's state refuses the decision (`409 invalid_transition`).
    #[error(transparent)]
    Transition(#[from] AppealTransitionError),
    /// The payment's state machine refuses the decision's change (`409 invalid_transition`).
    #[error(transparent)]
    PaymentTransition(#[from] TransitionError),
    /// The signed request was refused (its own code).
    #[error(transparent)]
    Auth(#[from] AuthError),
    /// Other writers changed the appeal or its payment every time it was read (`503`).
    #[error("the appeal is changing too often; try again")]
    Contended,
    /// The store failed (`503`, or `500` for corrupt data).
    #[error(transparent)]
    Store(#[from] StoreError),
}

impl AppealError {
    /// The stable code it is answered with.
    pub fn code(&self) -> ErrorCode {
        match self {
            AppealError::Invalid { .. } => ErrorCode::BadRequest,
            AppealError::Receipt { .. } => ErrorCode::ReceiptInvalid,
            AppealError::PaymentNotFound => ErrorCode::PaymentNotFound,
            AppealError::NotFound => ErrorCode::AppealNotFound,
            AppealError::NotAppealable(_)
            | AppealError::Transition(_)
            | AppealError::PaymentTransition(_) => ErrorCode::InvalidTransition,
            AppealError::IdempotencyConflict { .. } => ErrorCode::AppealIdempotencyConflict,
            AppealError::Active(_) | AppealError::Full(_) => ErrorCode::AppealLimitReached,
            AppealError::Auth(e) => e.code(),
            AppealError::Contended => ErrorCode::ServiceUnavailable,
            AppealError::Store(e) => ApiError::from(e.clone()).code,
        }
    }
}

impl From<AppealError> for ApiError {
    fn from(e: AppealError) -> ApiError {
        match e {
            AppealError::Store(e) => e.into(),
            AppealError::Auth(e) => e.into(),
            AppealError::Contended => ApiError::new(e.code(), e.to_string()).with_retry_after(1),
            e => ApiError::new(e.code(), e.to_string()),
        }
    }
}

impl From<super::ReadError> for AppealError {
    fn from(e: super::ReadError) -> AppealError {
        match e {
            super::ReadError::NotFound => AppealError::PaymentNotFound,
            super::ReadError::Damaged(m) => AppealError::Store(StoreError::Corrupt(m)),
            super::ReadError::Store(e) => AppealError::Store(e),
        }
    }
}

fn invalid(field: &'static str, why: impl Into<String>) -> AppealError {
    AppealError::Invalid {
        field,
        why: why.into(),
    }
}

/// What the payer says, as the merchant API's body or the payer page's form gives it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AppealRequest {
    /// The merchant's idempotency key (none from the payer page).
    pub idempotency_key: Option<String>,
    /// Why.
    pub reason: AppealReason,
    /// The amount sent, if given.
    pub claimed_amount: Option<Amount>,
    /// When the payer paid, if given.
    pub paid_at: Option<Timestamp>,
    /// The payer's bank, if given.
    pub payer_bank: Option<String>,
    /// The receipts, checked.
    pub receipts: Vec<Receipt>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct Wire {
    idempotency_key: String,
    reason: String,
    #[serde(default)]
    claimed_amount: Option<serde_json::Value>,
    #[serde(default)]
    paid_at: Option<String>,
    #[serde(default)]
    payer_bank: Option<String>,
    #[serde(default)]
    receipts: Vec<WireReceipt>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct WireReceipt {
    content_type: String,
    /// Standard base64 (RFC 4648, padded).
    data: String,
}

impl AppealRequest {
    /// Parses the merchant API's body: `idempotency_key` (1-64 visible ASCII), `reason`
    /// (`paid_but_canceled`, `paid_other_amount`, `paid_twice`), optional `claimed_amount`,
    /// `paid_at` (RFC 3339), `payer_bank` and up to two `receipts` (`content_type` and base64
    /// `data`, each checked by its content, [`Receipt::check`]). Unknown fields are refused.
    pub fn parse(body: &[u8]) -> Result<AppealRequest, AppealError> {
        let wire: Wire = serde_json::from_slice(body)
            .map_err(|e| invalid("body", format!("not an appeal: {e}")))?;
        let key = wire.idempotency_key;
        if key.is_empty()
            || key.len() > IDEMPOTENCY_KEY_MAX_LEN
            || !key.bytes().all(|b| b.is_ascii_graphic())
        {
            return Err(invalid(
                "idempotency_key",
                format!("1 to {IDEMPOTENCY_KEY_MAX_LEN} visible ASCII characters"),
            ));
        }
        if wire.receipts.len() > MAX_RECEIPTS {
            return Err(invalid("receipts", format!("at most {MAX_RECEIPTS}")));
        }
        let mut receipts = Vec::with_capacity(wire.receipts.len());
        for (index, r) in wire.receipts.into_iter().enumerate() {
            receipts.push(wire_receipt(index, r)?);
        }
        let claimed_amount = match wire.claimed_amount {
            None | Some(serde_json::Value::Null) => None,
            Some(v) => {
                Some(Amount::from_json(&v).map_err(|e| invalid("claimed_amount", e.to_string()))?)
            }
        };
        AppealRequest::new(
            Some(key),
            &wire.reason,
            claimed_amount,
            wire.paid_at.as_deref(),
            wire.payer_bank,
            receipts,
        )
    }

    /// An appeal request from its parts (the payer page's form): checks the reason, the time
    /// and the bank's name.
    pub fn new(
        idempotency_key: Option<String>,
        reason: &str,
        claimed_amount: Option<Amount>,
        paid_at: Option<&str>,
        payer_bank: Option<String>,
        receipts: Vec<Receipt>,
    ) -> Result<AppealRequest, AppealError> {
        let reason = AppealReason::parse(reason).ok_or_else(|| {
            invalid(
                "reason",
                "expected paid_but_canceled, paid_other_amount or paid_twice",
            )
        })?;
        let paid_at = match paid_at {
            None => None,
            Some(s) => Some(
                Timestamp::parse_rfc3339(s)
                    .ok_or_else(|| invalid("paid_at", "an RFC 3339 time"))?,
            ),
        };
        let payer_bank = payer_bank.filter(|b| !b.trim().is_empty());
        if let Some(b) = &payer_bank {
            if b.chars().count() > PAYER_BANK_MAX_CHARS
                || b.chars()
                    .any(|c| c.is_control() || crate::text::misleading(c).is_some())
            {
                return Err(invalid(
                    "payer_bank",
                    format!("at most {PAYER_BANK_MAX_CHARS} printable characters"),
                ));
            }
        }
        if reason == AppealReason::PaidOtherAmount && claimed_amount.is_none() {
            return Err(invalid("claimed_amount", "required with paid_other_amount"));
        }
        Ok(AppealRequest {
            idempotency_key,
            reason,
            claimed_amount,
            paid_at,
            payer_bank,
            receipts,
        })
    }

    /// The SHA-256 of what is asked, for telling a repeat from another appeal under one key.
    fn fingerprint(&self, payment: &Payment) -> String {
        let mut d = Sha256::new();
        d.update(payment.id.to_string());
        d.update([0]);
        d.update(self.reason.as_str());
        d.update([0]);
        d.update(
            self.claimed_amount
                .map(|a| a.normalized())
                .unwrap_or_default(),
        );
        d.update([0]);
        d.update(
            self.paid_at
                .map(|t| t.unix_millis().to_string())
                .unwrap_or_default(),
        );
        d.update([0]);
        d.update(self.payer_bank.as_deref().unwrap_or(""));
        for r in &self.receipts {
            d.update([0]);
            d.update(r.sha256());
        }
        hex::encode(d.finalize())
    }
}

fn wire_receipt(index: usize, r: WireReceipt) -> Result<Receipt, AppealError> {
    use base64::Engine as _;
    let declared = ReceiptKind::from_content_type(&r.content_type).ok_or(AppealError::Receipt {
        index,
        source: ReceiptError::UnknownContent,
    })?;
    // Refused before decoding: the decoded size is 3/4 of the text's.
    if r.data.len() / 4 * 3 > crate::receipt::MAX_RECEIPT_BYTES + 3 {
        let size = r.data.len() / 4 * 3;
        return Err(AppealError::Receipt {
            index,
            source: ReceiptError::TooLarge { size },
        });
    }
    let bytes = base64::engine::general_purpose::STANDARD
        .decode(r.data.as_bytes())
        .map_err(|_| invalid("receipts", format!("[{index}].data: not standard base64")))?;
    Receipt::check(Some(declared), bytes).map_err(|source| AppealError::Receipt { index, source })
}

/// A page of appeals and the cursor of the next one.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AppealPage {
    /// The appeals.
    pub appeals: Vec<Appeal>,
    /// `(created_at, id)` of the last, when the page is full (there may be more).
    pub next: Option<(Timestamp, AppealId)>,
}

/// What one pass of the appeals sweep did.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct AppealSweep {
    /// Appeals expired at their deadline.
    pub expired: usize,
    /// Open appeals sent to their provider, which took them.
    pub submitted: usize,
}

impl Appeals<'_> {
    /// Opens a merchant's appeal about a payment of the caller's project (signed like a
    /// create; records the nonce first). Answers the appeal and whether it was stored now
    /// (`false`: the same idempotency key and request were seen before, and that appeal is
    /// answered). The provider on record is asked at once ([`Self::submit_appeal`]).
    pub async fn open_appeal(
        self,
        auth: Authenticated,
        payment: &str,
        request: AppealRequest,
    ) -> Result<(Appeal, bool), AppealError> {
        let ctx = self.gate().accept(auth).await?;
        let payment = self
            .payments()
            .payment_of_project(&ctx.project, payment)
            .await?;
        self.open_appeal_for(&payment, AppealSource::Merchant, request)
            .await
    }

    /// Opens an appeal about `payment` from `source` (the payer page calls it with
    /// [`AppealSource::Payer`] for the payment its link names).
    pub async fn open_appeal_for(
        self,
        payment: &Payment,
        source: AppealSource,
        request: AppealRequest,
    ) -> Result<(Appeal, bool), AppealError> {
        appeal::appealable(payment).map_err(AppealError::NotAppealable)?;
        let now = self.ports.clock.now();
        let fingerprint = request.fingerprint(payment);
        let new = Appeal {
            id: AppealId::generate_ordered(now, self.ports.rng.as_ref()),
            project_id: payment.project_id,
            payment_id: payment.id,
            source,
            idempotency_key: request.idempotency_key.clone(),
            fingerprint,
            reason: request.reason,
            claimed_amount: request.claimed_amount,
            paid_at: request.paid_at,
            payer_bank: request.payer_bank.clone(),
            receipts: request.receipts.iter().map(receipt_info).collect(),
            state: AppealState::Open,
            deadline: now.saturating_add(self.config.appeal_deadlines.open),
            provider: None,
            resolved_amount: None,
            decided_by: None,
            note: None,
            created_at: now,
            updated_at: now,
            version: 1,
        };
        let store = &self.ports.store;
        match store.insert_appeal(&new, &request.receipts).await? {
            AppealInsert::Inserted => {}
            AppealInsert::Existing(first) if first.fingerprint == new.fingerprint => {
                return Ok((first, false))
            }
            AppealInsert::Existing(first) => {
                return Err(AppealError::IdempotencyConflict {
                    key: request.idempotency_key.unwrap_or_default(),
                    existing: first.id,
                })
            }
            AppealInsert::Active(a) => return Err(AppealError::Active(a.id)),
            AppealInsert::Full => return Err(AppealError::Full(appeal::MAX_APPEALS_PER_SOURCE)),
        }
        let appeal = self.submit_appeal(new, payment, request.receipts).await?;
        Ok((appeal, true))
    }

    /// Sends an open appeal to the provider on record (the one the payment was routed to,
    /// else the default provider). Taken: the appeal is `under_review` with that provider.
    /// Not supported or failed: it stays `open` (support decides; a failed send is tried
    /// again by [`Self::sweep_appeals`]).
    pub async fn submit_appeal(
        self,
        appeal: Appeal,
        payment: &Payment,
        receipts: Vec<Receipt>,
    ) -> Result<Appeal, AppealError> {
        debug_assert_eq!(appeal.payment_id, payment.id);
        let Some(requisites) = &payment.requisites else {
            return Ok(appeal);
        };
        let provider = match &payment.route {
            Some(r) => r.provider.clone(),
            None => ProviderName::parse(ProviderName::DEFAULT).expect("the default name is valid"),
        };
        let inquiry = AppealInquiry {
            appeal_id: appeal.id,
            payment_id: payment.id,
            amount: payment.amount,
            currency: payment.currency,
            requisite: requisites.requisite.clone(),
            reason: appeal.reason,
            claimed_amount: appeal.claimed_amount,
            paid_at: appeal.paid_at,
            payer_bank: appeal.payer_bank.clone(),
            receipts,
        };
        let asked = self.ports.provider.submit_appeal(&provider, &inquiry);
        let budget = self.ports.clock.sleep(self.config.provider_budget);
        let answer = match select(asked, budget).await {
            Either::Left((answer, _)) => answer,
            Either::Right(((), _)) => {
                AppealSubmission::Failed("no answer within the provider budget".into())
            }
        };
        if answer != AppealSubmission::Taken {
            return Ok(appeal);
        }
        let actor = format!("provider:{provider}");
        let review = AppealTrigger::Review {
            provider: Some(provider),
        };
        let decided = self.decide_appeal(appeal.id, review, &actor, ChangeSource::Provider);
        match decided.await {
            Ok((a, _)) => Ok(a),
            // Decided meanwhile (support was quicker): theirs stands.
            Err(AppealError::Transition(_)) => self.appeal_any(appeal.id).await,
            Err(e) => Err(e),
        }
    }

    /// Applies `trigger` to an appeal and, for an accepted one, runs the payment's re-check
    /// (`payment_triggers`) in the same store write, with its callback and ledger
    /// entry. Answers the appeal and the payment after it.
    pub async fn decide_appeal(
        self,
        id: AppealId,
        trigger: AppealTrigger,
        actor: &str,
        source: ChangeSource,
    ) -> Result<(Appeal, Payment), AppealError> {
        for _ in 0..8 {
            let before = self.appeal_any(id).await?;
            let payment = self
                .ports
                .store
                .payment(before.payment_id)
                .await?
                .ok_or_else(|| StoreError::Corrupt(format!("appeal {id} has no payment")))?;
            let now = self.ports.clock.now();
            let after = appeal::apply(&before, trigger.clone(), now, self.config.appeal_deadlines)?;
            let (payments, payment) = self.recheck(&after, payment, now, source).await?;
            let change = AppealChange {
                audit: Some(appeal_audit(&before, &after, trigger.name(), actor, now)),
                appeal: after.clone(),
                expected_version: before.version,
                payments,
            };
            match self.ports.store.commit_appeal(&change).await {
                Ok(()) => {
                    for p in &change.payments {
                        self.payments().woken(p.event.clone())?;
                    }
                    return Ok((after, payment));
                }
                Err(StoreError::Conflict) => continue,
                Err(e) => return Err(e.into()),
            }
        }
        Err(AppealError::Contended)
    }

    /// The payment changes of an appeal's decision: for an accepted appeal, the re-check to
    /// `completed` with the amount found; otherwise none. Answers them and the payment after.
    async fn recheck(
        self,
        appeal: &Appeal,
        mut payment: Payment,
        now: Timestamp,
        source: ChangeSource,
    ) -> Result<(Vec<crate::store::PaymentChange>, Payment), AppealError> {
        let (AppealState::Accepted, Some(amount)) = (appeal.state, appeal.resolved_amount) else {
            return Ok((Vec::new(), payment));
        };
        let mut changes = Vec::new();
        for trigger in payment_triggers(&payment, amount) {
            let t = transition::apply(&payment, trigger, now, self.ports.rng.as_ref())?;
            changes.push(
                self.payments()
                    .change_of(&payment, &t, None, source)
                    .await?,
            );
            payment = t.payment;
        }
        debug_assert_eq!(payment.status, PaymentStatus::Completed);
        debug_assert_eq!(payment.amount, amount);
        Ok((changes, payment))
    }

    /// An appeal by id, of any project (support, the provider's answer).
    pub async fn appeal_any(self, id: AppealId) -> Result<Appeal, AppealError> {
        self.ports
            .store
            .appeal(id)
            .await?
            .ok_or(AppealError::NotFound)
    }

    /// An appeal of `project` by its id as written (any other is `404 appeal_not_found`).
    pub async fn appeal_of_project(
        self,
        project: &Project,
        id: &str,
    ) -> Result<Appeal, AppealError> {
        let id: AppealId = id.parse().map_err(|_| AppealError::NotFound)?;
        match self.appeal_any(id).await {
            Ok(a) if a.project_id == project.id => Ok(a),
            Ok(_) | Err(AppealError::NotFound) => Err(AppealError::NotFound),
            Err(e) => Err(e),
        }
    }

    /// Receipt `index` of an appeal already read (its project checked by the caller).
    pub async fn appeal_receipt(self, appeal: &Appeal, index: u8) -> Result<Receipt, AppealError> {
        self.ports
            .store
            .appeal_receipt(appeal.id, index)
            .await?
            .ok_or(AppealError::NotFound)
    }

    /// A page of appeals; `next` is set when the page is full.
    pub async fn find_appeals(self, query: &AppealQuery) -> Result<AppealPage, AppealError> {
        let appeals = self.ports.store.find_appeals(query).await?;
        let next = (appeals.len() == query.limit && query.limit > 0)
            .then(|| appeals.last().map(|a| (a.created_at, a.id)))
            .flatten();
        Ok(AppealPage { appeals, next })
    }

    /// One pass of the appeals sweep: expires active appeals whose deadline passed (nothing
    /// moves for their payments), then sends open appeals that no provider took yet again,
    /// at most `limit` of each.
    pub async fn sweep_appeals(self, limit: usize) -> Result<AppealSweep, AppealError> {
        let now = self.ports.clock.now();
        let mut report = AppealSweep::default();
        let due = AppealQuery {
            deadline_by: Some(now),
            order: appeal::AppealOrder::OldestFirst,
            ..AppealQuery::newest(limit)
        };
        for a in self.ports.store.find_appeals(&due).await? {
            let expire = self.decide_appeal(
                a.id,
                AppealTrigger::Expire,
                "system",
                ChangeSource::Lifetime,
            );
            match expire.await {
                Ok(_) => report.expired += 1,
                // Decided meanwhile.
                Err(AppealError::Transition(_)) => {}
                Err(e) => return Err(e),
            }
        }
        let open = AppealQuery {
            states: vec![AppealState::Open],
            order: appeal::AppealOrder::OldestFirst,
            ..AppealQuery::newest(limit)
        };
        for a in self.ports.store.find_appeals(&open).await? {
            let Some(payment) = self.ports.store.payment(a.payment_id).await? else {
                continue;
            };
            let receipts = self.receipts_of(&a).await?;
            if self.submit_appeal(a, &payment, receipts).await?.state == AppealState::UnderReview {
                report.submitted += 1;
            }
        }
        Ok(report)
    }

    async fn receipts_of(self, appeal: &Appeal) -> Result<Vec<Receipt>, AppealError> {
        let mut out = Vec::with_capacity(appeal.receipts.len());
        for i in 0..appeal.receipts.len() {
            let index = u8::try_from(i).map_err(|_| StoreError::Corrupt("receipt index".into()))?;
            out.push(self.appeal_receipt(appeal, index).await?);
        }
        Ok(out)
    }
}

/// The payment triggers an accepted appeal runs, in order: the spec's re-check (`appeal`,
/// unless the payment is already there), then `completed` with `amount` (given only when it
/// differs from the payment's).
fn payment_triggers(payment: &Payment, amount: Amount) -> Vec<Trigger> {
    let mut triggers = Vec::with_capacity(2);
    if payment.status != PaymentStatus::Appeal {
        triggers.push(Trigger::StartRecheck);
    }
    let amount = (amount != payment.amount).then_some(amount);
    triggers.push(Trigger::ResolveRecheck(RecheckOutcome::Completed {
        amount,
    }));
    triggers
}

/// A decision's note as support writes it: trimmed, bounded.
pub fn appeal_note(note: Option<&str>) -> Result<Option<String>, AppealError> {
    let note = note.map(str::trim).filter(|n| !n.is_empty());
    match note {
        Some(n) if n.chars().count() > NOTE_MAX_CHARS => Err(invalid(
            "note",
            format!("at most {NOTE_MAX_CHARS} characters"),
        )),
        n => Ok(n.map(str::to_string)),
    }
}

fn receipt_info(r: &Receipt) -> ReceiptInfo {
    ReceiptInfo {
        kind: r.kind(),
        size: u32::try_from(r.len()).unwrap_or(u32::MAX),
        sha256: hex::encode(r.sha256()),
    }
}

fn appeal_audit(
    before: &Appeal,
    after: &Appeal,
    action: &str,
    actor: &str,
    now: Timestamp,
) -> AuditRecord {
    let state = |a: &Appeal| {
        serde_json::json!({
            "state": a.state,
            "payment_id": a.payment_id.to_string(),
            "resolved_amount": a.resolved_amount,
            "deadline": a.deadline.to_rfc3339(),
        })
        .to_string()
    };
    AuditRecord {
        at: now,
        actor: actor.to_string(),
        action: format!("appeal.{action}"),
        target: before.id.to_string(),
        before: Some(state(before)),
        after: Some(state(after)),
    }
}

/// The provider's answer to an appeal sent to it, parsed from its body.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AppealAnswer {
    /// The upstream's id of this notification (for the log).
    pub notification_id: String,
    /// The appeal it answers.
    pub appeal_id: AppealId,
    /// `Some(amount)`: the transfer was found, with the amount that arrived; `None`: not found.
    pub found: Option<Amount>,
    /// Why, in the provider's words.
    pub reason: Option<String>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct AnswerWire {
    notification_id: String,
    appeal_id: String,
    status: String,
    #[serde(default)]
    amount: Option<serde_json::Value>,
    #[serde(default)]
    reason: Option<String>,
}

impl AppealAnswer {
    /// Parses an answer: `notification_id`, `appeal_id`, `status` (`found`, with the `amount`
    /// that arrived, or `not_found`) and an optional `reason`; unknown fields are refused.
    pub fn parse(body: &[u8]) -> Result<AppealAnswer, NotificationError> {
        let bad = |m: String| NotificationError::Invalid(m);
        let wire: AnswerWire =
            serde_json::from_slice(body).map_err(|e| bad(format!("invalid appeal answer: {e}")))?;
        let id = &wire.notification_id;
        if id.is_empty()
            || id.len() > super::NOTIFICATION_ID_MAX_LEN
            || !id.bytes().all(|b| b.is_ascii_graphic())
        {
            return Err(bad(
                "notification_id: 1 to 128 visible ASCII characters".into()
            ));
        }
        let appeal_id = wire
            .appeal_id
            .parse()
            .map_err(|_| bad("appeal_id: not an appeal id".into()))?;
        let reason = appeal_note(wire.reason.as_deref()).map_err(|e| bad(e.to_string()))?;
        let amount = match &wire.amount {
            None | Some(serde_json::Value::Null) => None,
            Some(v) => Some(Amount::from_json(v).map_err(|e| bad(format!("amount: {e}")))?),
        };
        let found = match (wire.status.as_str(), amount) {
            ("found", Some(a)) => Some(a),
            ("found", None) => return Err(bad("amount: required with found".into())),
            ("not_found", None) => None,
            ("not_found", Some(_)) => {
                return Err(bad("amount: only a found transfer has one".into()))
            }
            (other, _) => {
                return Err(bad(format!(
                    "status: expected found or not_found, got {other:?}"
                )))
            }
        };
        Ok(AppealAnswer {
            notification_id: wire.notification_id,
            appeal_id,
            found,
            reason,
        })
    }
}

/// What a provider's answer did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AppealAnswerOutcome {
    /// The answer.
    pub answer: AppealAnswer,
    /// `true`: it decided the appeal now; `false`: the appeal was decided before (by this
    /// answer's earlier delivery, or by support), and nothing changed.
    pub applied: bool,
    /// The appeal after it.
    pub appeal: Appeal,
    /// The payment after it.
    pub payment: Payment,
}

impl Appeals<'_> {
    /// Applies a provider's signed answer to an appeal (`POST /upstream/v1/appeals`): verified
    /// and refused as a replay like a transfer notification ([`super::Payments::apply_provider_notification`]);
    /// an appeal that was not sent to `from` is `404 appeal_not_found`. `found` accepts the
    /// appeal with the amount (the payment's re-check to `completed`), `not_found` rejects it.
    /// An appeal decided before answers `applied: false`: an appeal is decided once.
    pub async fn apply_appeal_answer(
        self,
        verifier: &CallbackVerifier,
        signed: SignedNotification<'_>,
        from: Option<&ProviderName>,
    ) -> Result<AppealAnswerOutcome, NotificationError> {
        let replay = self.payments().check_signed(verifier, signed, from).await?;
        let answer = AppealAnswer::parse(signed.body)?;
        let appeal = match self.appeal_any(answer.appeal_id).await {
            Ok(a) => a,
            Err(AppealError::NotFound) => return Err(NotificationError::AppealNotFound),
            Err(e) => return Err(appeal_to_notification(e)),
        };
        if from.is_some_and(|f| appeal.provider.as_ref() != Some(f)) {
            return Err(NotificationError::AppealNotFound);
        }
        let actor = match &appeal.provider {
            Some(p) => format!("provider:{p}"),
            None => "provider".to_string(),
        };
        let trigger = match answer.found {
            Some(amount) => AppealTrigger::Accept {
                amount,
                by: actor.clone(),
                note: answer.reason.clone(),
            },
            None => AppealTrigger::Reject {
                by: actor.clone(),
                note: answer.reason.clone(),
            },
        };
        let decided = self.decide_appeal(appeal.id, trigger, &actor, ChangeSource::Provider);
        let (appeal, payment, applied) = match decided.await {
            Ok((a, p)) => (a, p, true),
            Err(AppealError::Transition(_)) => {
                let a = self
                    .appeal_any(appeal.id)
                    .await
                    .map_err(appeal_to_notification)?;
                let p = self.ports.store.payment(a.payment_id).await?;
                let p = p.ok_or(NotificationError::PaymentNotFound)?;
                (a, p, false)
            }
            Err(e) => return Err(appeal_to_notification(e)),
        };
        self.payments().remember_signed(replay).await?;
        Ok(AppealAnswerOutcome {
            answer,
            applied,
            appeal,
            payment,
        })
    }
}

fn appeal_to_notification(e: AppealError) -> NotificationError {
    match e {
        AppealError::NotFound => NotificationError::AppealNotFound,
        AppealError::PaymentTransition(t) => NotificationError::Transition(t),
        AppealError::Contended => NotificationError::Contended,
        AppealError::Store(s) => NotificationError::Store(s),
        other => NotificationError::Store(StoreError::Corrupt(other.to_string())),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testing::contract::{payment_id, project_id, sample_payment};

    #[test]
    fn an_accepted_appeal_runs_the_recheck_from_a_closed_payment() {
        let mut p = sample_payment(payment_id(1), project_id(1), "o-1");
        p.status = PaymentStatus::Canceled;
        let same = payment_triggers(&p, p.amount);
        assert_eq!(
            same,
            vec![
                Trigger::StartRecheck,
                Trigger::ResolveRecheck(RecheckOutcome::Completed { amount: None })
            ]
        );
        p.status = PaymentStatus::Appeal;
        let other = Amount::parse("1000").expect("valid");
        assert_eq!(
            payment_triggers(&p, other),
            vec![Trigger::ResolveRecheck(RecheckOutcome::Completed {
                amount: Some(other)
            })]
        );
    }
}
