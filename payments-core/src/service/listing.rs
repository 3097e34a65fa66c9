//! `GET /api/v1/payments`: a project's payments, newest first, filtered and paged by an opaque
//! cursor. The adapters read the query string into a [`PaymentListQuery`] (the HTTP adapter's
//! `query` module, refusing with a [`ListQueryError`]); the page comes from [`PaymentStore::find_payments`](crate::store::PaymentStore)
//! through an index for each filter.

use std::fmt;

use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use base64::Engine;

use super::Payments;
use crate::amount::Amount;
use crate::error::{ApiError, ErrorCode};
use crate::ids::{PaymentId, ProjectId};
use crate::payment::{Flow, MerchantPaymentId, Payment, PaymentMethod, PaymentStatus};
use crate::project::Project;
use crate::store::{PaymentQuery, MAX_QUERY_BRANCHES};
use crate::totals::{Overview, PaymentTotals, TOTALS_SCAN};
use crate::Timestamp;

/// The payments one page holds unless `limit` says otherwise.
pub const DEFAULT_LIST_LIMIT: usize = 20;
/// The most payments one page holds (`limit` above it is refused).
pub const MAX_LIST_LIMIT: usize = 100;

/// The filters and page of `GET /api/v1/payments`, read from its query string with
/// `payments_http::query::payment_list`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PaymentListQuery {
    /// `status`: only payments in this status.
    pub status: Option<PaymentStatus>,
    /// `payment_method`: only payments of this method.
    pub payment_method: Option<PaymentMethod>,
    /// `flow`: only regular (`runtime_live`) or project test (`project_test`) payments.
    pub flow: Option<Flow>,
    /// `created_from` (RFC 3339): created at or after.
    pub created_from: Option<Timestamp>,
    /// `created_to` (RFC 3339): created before.
    pub created_to: Option<Timestamp>,
    /// `merchant_payment_id`: the payment with this id.
    pub merchant_payment_id: Option<MerchantPaymentId>,
    /// `merchant_payment_id_prefix`: payments whose id starts with this (case-sensitive).
    pub merchant_payment_id_prefix: Option<String>,
    /// Payments whose id starts with this whatever the case of its letters (the cabinet's
    /// search; no query parameter of the API).
    pub merchant_payment_id_prefix_any_case: Option<String>,
    /// `metadata[<key>]=<value>`: payments whose metadata has this key with this value (one
    /// key per query).
    pub metadata: Option<(String, String)>,
    /// Payments whose metadata has this value under any key (the cabinet's search; no query
    /// parameter of the API).
    pub metadata_value: Option<String>,
    /// `amount`: payments whose current amount equals this by value (`100.5` finds `100.50`).
    pub amount: Option<Amount>,
    /// `requisite_last4`: payments whose requisite (card number or phone) ends in these four
    /// digits.
    pub requisite_last4: Option<String>,
    /// Payments whose requisite is this full card number (the cabinet's search; no query
    /// parameter of the API).
    pub requisite_number: Option<crate::payment::RequisiteNumber>,
    /// `limit`: 1 to [`MAX_LIST_LIMIT`], default [`DEFAULT_LIST_LIMIT`].
    pub limit: usize,
    /// `cursor`: where the page starts (a previous page's `next_cursor`).
    pub cursor: Option<PaymentCursor>,
}

impl Default for PaymentListQuery {
    fn default() -> Self {
        PaymentListQuery {
            status: None,
            payment_method: None,
            flow: None,
            created_from: None,
            created_to: None,
            merchant_payment_id: None,
            merchant_payment_id_prefix: None,
            merchant_payment_id_prefix_any_case: None,
            metadata: None,
            metadata_value: None,
            amount: None,
            requisite_last4: None,
            requisite_number: None,
            limit: DEFAULT_LIST_LIMIT,
            cursor: None,
        }
    }
}

/// Why a list query is refused: `400 bad_request`, naming the parameter.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub struct ListQueryError(pub String);

impl ListQueryError {
    /// The stable code it is answered with (`bad_request`).
    pub fn code(&self) -> ErrorCode {
        ErrorCode::BadRequest
    }
}

impl From<ListQueryError> for ApiError {
    fn from(e: ListQueryError) -> ApiError {
        ApiError::new(e.code(), e.0)
    }
}

/// Where a page of a list starts: after the item created at `created_at` with id `id`, in the
/// list's order (newest first, ties by id). On the wire it is opaque: base64url of
/// `v1:<unix millis>:<id>`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ListCursor<I> {
    /// The creation time of the last item of the previous page.
    pub created_at: Timestamp,
    /// Its id.
    pub id: I,
}

/// The cursor of the payment list.
pub type PaymentCursor = ListCursor<PaymentId>;

impl PaymentCursor {
    /// The cursor after `payment`.
    pub fn after(payment: &Payment) -> PaymentCursor {
        PaymentCursor {
            created_at: payment.created_at,
            id: payment.id,
        }
    }
}

impl<I: std::str::FromStr> ListCursor<I> {
    /// Reads a cursor as [`Display`](fmt::Display) wrote it.
    pub fn parse(s: &str) -> Option<ListCursor<I>> {
        let bytes = URL_SAFE_NO_PAD.decode(s).ok()?;
        let text = std::str::from_utf8(&bytes).ok()?;
        let rest = text.strip_prefix("v1:")?;
        let (millis, id) = rest.split_once(':')?;
        if millis.starts_with('+') {
            return None;
        }
        Some(ListCursor {
            created_at: Timestamp::from_unix_millis(millis.parse().ok()?),
            id: id.parse().ok()?,
        })
    }
}

impl<I: fmt::Display> fmt::Display for ListCursor<I> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let text = format!("v1:{}:{}", self.created_at.unix_millis(), self.id);
        f.write_str(&URL_SAFE_NO_PAD.encode(text))
    }
}

/// A page of a project's payments.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PaymentPage {
    /// The payments, newest first.
    pub payments: Vec<Payment>,
    /// The cursor of the next page; `None` on the last page.
    pub next_cursor: Option<PaymentCursor>,
}

impl PaymentListQuery {
    /// The store query of these filters over `project`, one payment past the page (whether
    /// there is a next one) from the cursor.
    fn store_query(&self, project: ProjectId) -> PaymentQuery {
        PaymentQuery {
            project,
            status: self.status,
            payment_method: self.payment_method,
            flow: self.flow,
            created_from: self.created_from,
            created_to: self.created_to,
            merchant_payment_id: self.merchant_payment_id.clone(),
            merchant_payment_id_prefix: self.merchant_payment_id_prefix.clone(),
            merchant_payment_id_prefix_any_case: self.merchant_payment_id_prefix_any_case.clone(),
            metadata: self.metadata.clone(),
            metadata_value: self.metadata_value.clone(),
            amount: self.amount,
            requisite_last4: self.requisite_last4.clone(),
            requisite_number: self.requisite_number.clone(),
            before: self.cursor.map(|c| (c.created_at, c.id)),
            limit: self.limit + 1,
            union: Vec::new(),
        }
    }
}

impl PaymentPage {
    /// The page of `limit` out of `found` (newest first, at most one past the page): the
    /// next cursor after its last payment when `found` held more.
    fn of(mut found: Vec<Payment>, limit: usize) -> PaymentPage {
        let more = found.len() > limit;
        found.truncate(limit);
        let next_cursor = if more {
            found.last().map(PaymentCursor::after)
        } else {
            None
        };
        PaymentPage {
            payments: found,
            next_cursor,
        }
    }
}

impl Payments<'_> {
    /// A page of `project`'s payments as `query` asks: newest first by creation time (ties by
    /// id), through an index for each filter but a broad merchant payment id prefix (see
    /// [`Payments::payments_page`] for the budget it runs under). A payment created while a client pages through the list
    /// is not on the later pages (they hold older payments); none is skipped or repeated.
    pub async fn list_payments(
        self,
        project: &Project,
        query: &PaymentListQuery,
    ) -> Result<PaymentPage, ApiError> {
        let found = self.payments_page(&query.store_query(project.id)).await?;
        Ok(PaymentPage::of(found, query.limit))
    }

    /// A page of the payments of every project in `projects` (the cabinet's search over the
    /// projects a user sees) that `query`'s filters find or the filters of any of `or` find
    /// (`query`'s limit and cursor apply to all), each payment once. The order is one order
    /// across projects, newest first by `(created_at, id)`, so the next page starts after the
    /// last payment shown and none is skipped or repeated. Each project and filter is one
    /// branch of a [`PaymentQuery::union`], read in one store statement per
    /// [`MAX_QUERY_BRANCHES`] branches (each under the budget of its first branch's
    /// project, [`Payments::payments_page`]), the statements' pages merged.
    pub async fn list_payments_across(
        self,
        projects: &[Project],
        query: &PaymentListQuery,
        or: &[PaymentListQuery],
    ) -> Result<PaymentPage, ApiError> {
        let mut found = Vec::new();
        for union in unions(projects, query, or) {
            found.extend(self.payments_page(&union).await?);
        }
        found.sort_by_key(|p| std::cmp::Reverse((p.created_at, p.id)));
        found.dedup_by_key(|p| p.id);
        Ok(PaymentPage::of(found, query.limit))
    }

    /// The totals of what [`Payments::list_payments_across`] would list for the same
    /// arguments, every page of it (`query`'s cursor and limit aside), by day of creation in a
    /// time zone `offset_ms` east of UTC, status and currency: the newest [`TOTALS_SCAN`]
    /// payments of each store statement at most ([`MAX_QUERY_BRANCHES`] branches of projects
    /// and filters each), read under the first branch's project's list budget; incomplete
    /// when one statement found more.
    pub async fn payment_totals(
        self,
        projects: &[Project],
        query: &PaymentListQuery,
        or: &[PaymentListQuery],
        offset_ms: i64,
    ) -> Result<PaymentTotals, ApiError> {
        let mut totals = PaymentTotals::empty(offset_ms);
        for union in unions(projects, query, or) {
            totals = totals.merge(self.totals(&union, offset_ms).await?);
        }
        Ok(totals)
    }

    /// The overview of `projects`' payments (the cabinet's home page): today, 7 and 30
    /// days in a time zone `offset_ms` east of UTC, from [`Payments::payment_totals`] of the
    /// payments created since the 30 days began.
    pub async fn overview(
        self,
        projects: &[Project],
        offset_ms: i64,
    ) -> Result<Overview, ApiError> {
        let now = self.ports.clock.now();
        let query = PaymentListQuery {
            created_from: Some(Overview::since(now, offset_ms)),
            ..PaymentListQuery::default()
        };
        let totals = self
            .payment_totals(projects, &query, &[], offset_ms)
            .await?;
        Ok(Overview::of(&totals, now))
    }

    /// The totals of every payment a store query finds, every page of it (its `before` and
    /// `limit` aside): the newest [`TOTALS_SCAN`] at most, by day of creation in a time zone
    /// `offset_ms` east of UTC, status and currency, read under the project's list budget
    /// as [`Payments::payments_page`] reads.
    pub async fn totals(
        self,
        query: &PaymentQuery,
        offset_ms: i64,
    ) -> Result<PaymentTotals, ApiError> {
        let whole = PaymentQuery {
            before: None,
            limit: TOTALS_SCAN,
            ..query.clone()
        };
        let _place = self.scan_place(whole.project).await?;
        Ok(self.ports.store.payment_totals(&whole, offset_ms).await?)
    }

    /// The payments a store query finds, read under the project's list budget
    /// ([`ScanBudget`](super::ScanBudget): `429 rate_limited` when the project already runs
    /// as many list reads as it may) and the store's time limit for one read (`503
    /// service_unavailable`, "narrow the filters"). Every list of payments reads through
    /// here: the API's list, the cabinet's list, search and export.
    pub async fn payments_page(self, query: &PaymentQuery) -> Result<Vec<Payment>, ApiError> {
        let _place = self.scan_place(query.project).await?;
        Ok(self.ports.store.find_payments(query).await?)
    }
}

/// The store queries of a list across `projects`: one branch per project and filter
/// (`query`, then each of `or` with `query`'s limit and cursor), in unions of
/// [`MAX_QUERY_BRANCHES`] branches at most.
fn unions(
    projects: &[Project],
    query: &PaymentListQuery,
    or: &[PaymentListQuery],
) -> Vec<PaymentQuery> {
    let filters: Vec<PaymentListQuery> = std::iter::once(query.clone())
        .chain(or.iter().map(|f| PaymentListQuery {
            limit: query.limit,
            cursor: query.cursor,
            ..f.clone()
        }))
        .collect();
    let branches: Vec<PaymentQuery> = projects
        .iter()
        .flat_map(|p| filters.iter().map(|f| f.store_query(p.id)))
        .collect();
    branches
        .chunks(MAX_QUERY_BRANCHES)
        .filter_map(|chunk| match chunk {
            [first, rest @ ..] => Some(PaymentQuery {
                union: rest.to_vec(),
                ..first.clone()
            }),
            [] => None,
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_cursor_reads_back_and_junk_is_no_cursor() {
        let c = PaymentCursor {
            created_at: Timestamp::from_unix_millis(1_790_000_000_123),
            id: "0192f3a4-5b6c-7d8e-9f00-112233445566"
                .parse()
                .expect("an id"),
        };
        assert_eq!(PaymentCursor::parse(&c.to_string()), Some(c));
        assert!(c
            .to_string()
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_'));
        for junk in [
            "",
            "x",
            "djE6",
            "v1:1:2",
            &URL_SAFE_NO_PAD.encode("v2:1:0192f3a4-5b6c-7d8e-9f00-112233445566"),
        ] {
            assert_eq!(PaymentCursor::parse(junk), None, "{junk}");
        }
    }
}
