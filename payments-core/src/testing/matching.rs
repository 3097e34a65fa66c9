//! What a store query finds, item by item: the reference semantics of the storage port's
//! queries, which the memory store filters with and the contract suite holds every store to.

use async_trait::async_trait;

use crate::ids::ProjectId;
use crate::ledger::LedgerEntry;
use crate::payment::{merchant_payment_id_key, Payment};
use crate::ratelimit::{Gcra, RateDecision, RateLimiter};
use crate::request_log::{RequestLogEntry, RequestLogQuery};
use crate::store::{EntryQuery, PaymentQuery, StoreError};
use crate::Timestamp;

/// Whether an item passes a query's filters (the page aside).
pub trait Matches<T> {
    /// Whether `item` passes the filters.
    fn matches(&self, item: &T) -> bool;
}

impl Matches<Payment> for PaymentQuery {
    /// Whether `payment` passes the filters of this query or of one of its
    /// [`union`](PaymentQuery::union) (the page aside).
    fn matches(&self, payment: &Payment) -> bool {
        self.branches()
            .iter()
            .any(|b| own_filters_match(b, payment))
    }
}

/// Whether `payment` passes `q`'s own filters (its union and the page aside).
fn own_filters_match(q: &PaymentQuery, payment: &Payment) -> bool {
    payment.project_id == q.project
        && q.status.is_none_or(|s| payment.status == s)
        && q.payment_method.is_none_or(|m| payment.payment_method == m)
        && q.flow.is_none_or(|f| payment.flow == f)
        && q.created_from.is_none_or(|t| payment.created_at >= t)
        && q.created_to.is_none_or(|t| payment.created_at < t)
        && q.merchant_payment_id
            .as_ref()
            .is_none_or(|m| &payment.merchant_payment_id == m)
        && q.merchant_payment_id_prefix
            .as_deref()
            .is_none_or(|p| payment.merchant_payment_id.as_str().starts_with(p))
        && q.merchant_payment_id_prefix_any_case
            .as_deref()
            .is_none_or(|p| {
                payment
                    .merchant_payment_id
                    .key()
                    .starts_with(&merchant_payment_id_key(p))
            })
        && q.metadata
            .as_ref()
            .is_none_or(|(k, v)| payment.metadata.get(k) == Some(v.as_str()))
        && q.metadata_value
            .as_deref()
            .is_none_or(|v| payment.metadata.iter().any(|(_, value)| value == v))
        && q.amount.is_none_or(|a| payment.amount == a)
        && q.requisite_last4
            .as_deref()
            .is_none_or(|l| payment.requisite_last4().as_deref() == Some(l))
        && q.requisite_number.as_ref().is_none_or(|n| {
            payment
                .requisites
                .as_ref()
                .is_some_and(|r| n.is(&r.requisite))
        })
}

impl Matches<LedgerEntry> for EntryQuery {
    /// Whether `entry` passes the filters (the page aside).
    fn matches(&self, entry: &LedgerEntry) -> bool {
        let p = &entry.posting;
        p.project_id == self.project
            && self.kind.is_none_or(|k| p.kind == k)
            && self.created_from.is_none_or(|t| p.at >= t)
            && self.created_to.is_none_or(|t| p.at < t)
            && self
                .reference
                .as_ref()
                .is_none_or(|r| p.reference.as_ref() == Some(r))
            && self
                .payment
                .is_none_or(|id| p.payment.is_some_and(|(pid, _)| pid == id))
    }
}

impl Matches<RequestLogEntry> for RequestLogQuery {
    /// Whether `entry` passes the filters and comes after the cursor
    /// ([`RequestLogQuery::admits`], which the SQL stores filter their stored writes with too).
    fn matches(&self, entry: &RequestLogEntry) -> bool {
        self.admits(entry)
    }
}

/// Where a page of ledger entries starts.
pub trait AfterCursor {
    /// Whether `entry` comes after the cursor in the order asked.
    fn is_after_cursor(&self, entry: &LedgerEntry) -> bool;
}

impl AfterCursor for EntryQuery {
    fn is_after_cursor(&self, entry: &LedgerEntry) -> bool {
        self.after.is_none_or(|c| {
            let key = (entry.posting.at, entry.seq);
            if self.oldest_first {
                key > c
            } else {
                key < c
            }
        })
    }
}

/// No limit at all: every request passes. For tests and embedders that limit elsewhere.
#[derive(Debug, Default, Clone, Copy)]
pub struct Unlimited;

#[async_trait]
impl RateLimiter for Unlimited {
    async fn acquire(
        &self,
        _project: ProjectId,
        _rule: Gcra,
        _now: Timestamp,
    ) -> Result<RateDecision, StoreError> {
        Ok(RateDecision::Allowed)
    }
}
