//! `GET /api/v1/payments`: a project's payments, newest first, filtered and paged by an opaque
//! cursor. The query string is read here, so every adapter refuses the same inputs with the
//! same words; the page comes from [`PaymentStore::find_payments`](crate::store::PaymentStore)
//! through an index for each filter.

use std::fmt;

use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use base64::Engine;

use super::Payments;
use crate::amount::Amount;
use crate::error::{ApiError, ErrorCode};
use crate::ids::PaymentId;
use crate::payment::{
    is_last4, Flow, MerchantPaymentId, Metadata, Payment, PaymentMethod, PaymentStatus,
};
use crate::project::Project;
use crate::store::PaymentQuery;
use crate::Timestamp;

/// The payments one page holds unless `limit` says otherwise.
pub const DEFAULT_LIST_LIMIT: usize = 20;
/// The most payments one page holds (`limit` above it is refused).
pub const MAX_LIST_LIMIT: usize = 100;

/// The filters and page of `GET /api/v1/payments`, read from its query string with
/// [`PaymentListQuery::parse`].
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
    /// `metadata[<key>]=<value>`: payments whose metadata has this key with this value (one
    /// key per query).
    pub metadata: Option<(String, String)>,
    /// `amount`: payments whose current amount equals this by value (`100.5` finds `100.50`).
    pub amount: Option<Amount>,
    /// `requisite_last4`: payments whose requisite (card number or phone) ends in these four
    /// digits.
    pub requisite_last4: Option<String>,
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
            metadata: None,
            amount: None,
            requisite_last4: None,
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

impl PaymentListQuery {
    /// Reads a query string (without the `?`; `application/x-www-form-urlencoded`). Every
    /// parameter at most once; an unknown parameter, an empty value or one that does not
    /// parse is refused (a misspelt filter must not list every payment).
    pub fn parse(query: &str) -> Result<PaymentListQuery, ListQueryError> {
        let mut q = PaymentListQuery::default();
        let mut window = ListWindow::new(&mut q.created_from, &mut q.created_to, &mut q.limit);
        let mut cursor = None;
        read_query(
            query,
            "status, payment_method, flow, created_from, created_to, merchant_payment_id, \
             merchant_payment_id_prefix, metadata[<key>], amount, requisite_last4, limit, cursor",
            |name, value| {
                match name {
                    "status" => q.status = Some(parse_status(value)?),
                    "payment_method" => match value.parse() {
                        Ok(m) => q.payment_method = Some(m),
                        Err(_) => {
                            let all: Vec<&str> =
                                PaymentMethod::ALL.iter().map(|m| m.as_str()).collect();
                            return bad(format!(
                                "payment_method: expected one of {}",
                                all.join(", ")
                            ));
                        }
                    },
                    "flow" => match value.parse() {
                        Ok(f) => q.flow = Some(f),
                        Err(_) => return bad("flow: expected runtime_live or project_test".into()),
                    },
                    "merchant_payment_id" => match MerchantPaymentId::parse(value) {
                        Some(m) => q.merchant_payment_id = Some(m),
                        None => {
                            return bad(
                                "merchant_payment_id: 1-64 characters of A-Z a-z 0-9 . _ : -"
                                    .into(),
                            )
                        }
                    },
                    "merchant_payment_id_prefix" => {
                        if MerchantPaymentId::parse(value).is_none() {
                            return bad("merchant_payment_id_prefix: 1-64 characters of A-Z a-z 0-9 . _ : -"
                                .into());
                        }
                        q.merchant_payment_id_prefix = Some(value.to_string());
                    }
                    "amount" => q.amount = Some(parse_amount(value)?),
                    "requisite_last4" => q.requisite_last4 = Some(parse_last4(value)?),
                    "cursor" => cursor = Some(parse_cursor(value)?),
                    _ => {
                        if let Some(key) = name
                            .strip_prefix("metadata[")
                            .and_then(|k| k.strip_suffix(']'))
                        {
                            if q.metadata.is_some() {
                                return bad("metadata: one key per query".into());
                            }
                            if !Metadata::is_valid_key(key) {
                                return bad(format!(
                                    "{name}: a key is 1-40 characters from A-Za-z0-9._:-"
                                ));
                            }
                            if let Err(e) = Metadata::check_value(value) {
                                return bad(format!("{name}: {e}"));
                            }
                            q.metadata = Some((key.to_string(), value.to_string()));
                        } else {
                            return window.read(name, value);
                        }
                    }
                }
                Ok(true)
            },
        )?;
        window.check()?;
        q.cursor = cursor;
        Ok(q)
    }
}

fn bad<T>(what: String) -> Result<T, ListQueryError> {
    Err(ListQueryError(what))
}

/// Reads `amount`: a positive decimal as the payment's `amount` takes it (at most 6 decimals);
/// it matches by value, whatever the scale.
pub fn parse_amount(value: &str) -> Result<Amount, ListQueryError> {
    Amount::parse(value).map_err(|e| ListQueryError(format!("amount: {e}")))
}

/// Reads `requisite_last4`: exactly four digits.
pub fn parse_last4(value: &str) -> Result<String, ListQueryError> {
    if is_last4(value) {
        Ok(value.to_string())
    } else {
        bad("requisite_last4: exactly four digits 0-9".into())
    }
}

fn parse_status(value: &str) -> Result<PaymentStatus, ListQueryError> {
    value.parse().or_else(|_| {
        let all: Vec<&str> = PaymentStatus::ALL.iter().map(|s| s.as_str()).collect();
        bad(format!("status: expected one of {}", all.join(", ")))
    })
}

pub(super) fn parse_cursor<I: std::str::FromStr>(
    value: &str,
) -> Result<ListCursor<I>, ListQueryError> {
    ListCursor::parse(value).ok_or_else(|| {
        ListQueryError("cursor: not a cursor of this list (pass `next_cursor` as it came)".into())
    })
}

/// Reads a list's query string: each parameter at most once and never empty; `each` takes a
/// parameter and answers `Ok(false)` for a name it does not know, which is refused naming
/// the `known` ones.
pub(super) fn read_query(
    query: &str,
    known: &str,
    mut each: impl FnMut(&str, &str) -> Result<bool, ListQueryError>,
) -> Result<(), ListQueryError> {
    let mut seen: Vec<String> = Vec::new();
    for (name, value) in url::form_urlencoded::parse(query.as_bytes()) {
        if seen.iter().any(|s| *s == name) {
            return bad(format!("{name}: given more than once"));
        }
        seen.push(name.to_string());
        if value.is_empty() {
            return bad(format!("{name}: empty"));
        }
        if !each(&name, &value)? {
            return bad(format!("{name}: unknown parameter ({known})"));
        }
    }
    Ok(())
}

/// The parameters every list reads the same way: `created_from`, `created_to` and `limit`.
pub(super) struct ListWindow<'a> {
    created_from: &'a mut Option<Timestamp>,
    created_to: &'a mut Option<Timestamp>,
    limit: &'a mut usize,
}

impl<'a> ListWindow<'a> {
    pub(super) fn new(
        created_from: &'a mut Option<Timestamp>,
        created_to: &'a mut Option<Timestamp>,
        limit: &'a mut usize,
    ) -> Self {
        ListWindow {
            created_from,
            created_to,
            limit,
        }
    }

    /// Reads one of the shared parameters: `Ok(false)` for another name.
    pub(super) fn read(&mut self, name: &str, value: &str) -> Result<bool, ListQueryError> {
        match name {
            "created_from" | "created_to" => {
                let Some(t) = Timestamp::parse_rfc3339(value) else {
                    return bad(format!(
                        "{name}: expected an RFC 3339 time such as 2026-10-01T12:00:00Z"
                    ));
                };
                if name == "created_from" {
                    *self.created_from = Some(t);
                } else {
                    *self.created_to = Some(t);
                }
            }
            "limit" => match value.parse::<usize>() {
                Ok(n) if (1..=MAX_LIST_LIMIT).contains(&n) && !value.starts_with('+') => {
                    *self.limit = n
                }
                _ => return bad(format!("limit: a whole number from 1 to {MAX_LIST_LIMIT}")),
            },
            _ => return Ok(false),
        }
        Ok(true)
    }

    /// The range is not empty.
    pub(super) fn check(&self) -> Result<(), ListQueryError> {
        match (*self.created_from, *self.created_to) {
            (Some(from), Some(to)) if from >= to => {
                bad("created_from: must be before created_to".into())
            }
            _ => Ok(()),
        }
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

/// What one search box holds, as the cabinet's payment search reads it
/// ([`SearchTerm::parse`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum SearchTerm {
    /// A payment id (a UUID): that payment.
    PaymentId(PaymentId),
    /// Exactly four digits: the last four of a requisite.
    RequisiteLast4(String),
    /// A decimal with a dot, or a whole number of other than four digits: an amount.
    Amount(Amount),
    /// Anything else a merchant payment id may hold: a prefix of one.
    MerchantPaymentIdPrefix(String),
}

impl SearchTerm {
    /// Reads a search box (trimmed): a UUID is a payment id; exactly four digits the last four
    /// of a requisite (an amount of four whole digits is written with decimals, `1000.00`);
    /// another number an amount; else a merchant payment id prefix. Text none of these takes
    /// (spaces inside, characters no merchant payment id holds) is refused, saying what the
    /// box takes.
    pub fn parse(text: &str) -> Result<SearchTerm, ListQueryError> {
        let text = text.trim();
        if let Ok(id) = text.parse::<PaymentId>() {
            return Ok(SearchTerm::PaymentId(id));
        }
        if is_last4(text) {
            return Ok(SearchTerm::RequisiteLast4(text.to_string()));
        }
        if text.bytes().any(|b| b.is_ascii_digit()) {
            if let Ok(a) = Amount::parse(text) {
                return Ok(SearchTerm::Amount(a));
            }
        }
        if MerchantPaymentId::parse(text).is_some() {
            return Ok(SearchTerm::MerchantPaymentIdPrefix(text.to_string()));
        }
        bad(
            "search: a payment id, the last 4 digits of a card or phone, an amount \
             (100.50) or the start of your payment id (A-Z a-z 0-9 . _ : -)"
                .into(),
        )
    }

    /// `query` narrowed by this term (a payment id is looked up by id, not listed: `query`
    /// is returned as it is).
    pub fn narrow(&self, mut query: PaymentListQuery) -> PaymentListQuery {
        match self {
            SearchTerm::PaymentId(_) => {}
            SearchTerm::RequisiteLast4(l) => query.requisite_last4 = Some(l.clone()),
            SearchTerm::Amount(a) => query.amount = Some(*a),
            SearchTerm::MerchantPaymentIdPrefix(p) => {
                query.merchant_payment_id_prefix = Some(p.clone())
            }
        }
        query
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

impl Payments<'_> {
    /// A page of `project`'s payments as `query` asks: newest first by creation time (ties by
    /// id), through an index for each filter but metadata (see [`Payments::payments_page`]
    /// for the budget it runs under). A payment created while a client pages through the list
    /// is not on the later pages (they hold older payments); none is skipped or repeated.
    pub async fn list_payments(
        self,
        project: &Project,
        query: &PaymentListQuery,
    ) -> Result<PaymentPage, ApiError> {
        let mut found = self
            .payments_page(&PaymentQuery {
                project: project.id,
                status: query.status,
                payment_method: query.payment_method,
                flow: query.flow,
                created_from: query.created_from,
                created_to: query.created_to,
                merchant_payment_id: query.merchant_payment_id.clone(),
                merchant_payment_id_prefix: query.merchant_payment_id_prefix.clone(),
                metadata: query.metadata.clone(),
                amount: query.amount,
                requisite_last4: query.requisite_last4.clone(),
                before: query.cursor.map(|c| (c.created_at, c.id)),
                limit: query.limit + 1,
            })
            .await?;
        let more = found.len() > query.limit;
        found.truncate(query.limit);
        let next_cursor = if more {
            found.last().map(PaymentCursor::after)
        } else {
            None
        };
        Ok(PaymentPage {
            payments: found,
            next_cursor,
        })
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

impl Payments<'_> {
    /// A page of the payments of every project in `projects` as `query` asks (a merchant's
    /// projects, for the cabinet's search): each project's page through
    /// [`Payments::list_payments`] from the same cursor, merged newest first by
    /// `(created_at, id)` and cut to the limit. The order is one order across projects, so
    /// the next page starts after the last payment shown and none is skipped or repeated.
    pub async fn list_payments_across(
        self,
        projects: &[Project],
        query: &PaymentListQuery,
    ) -> Result<PaymentPage, ApiError> {
        let mut merged = Vec::new();
        let mut more = false;
        for project in projects {
            let page = self.list_payments(project, query).await?;
            more |= page.next_cursor.is_some();
            merged.extend(page.payments);
        }
        merged.sort_by_key(|p| std::cmp::Reverse((p.created_at, p.id)));
        more |= merged.len() > query.limit;
        merged.truncate(query.limit);
        let next_cursor = if more {
            merged.last().map(PaymentCursor::after)
        } else {
            None
        };
        Ok(PaymentPage {
            payments: merged,
            next_cursor,
        })
    }
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

    #[test]
    fn the_query_string_is_read_strictly() {
        assert_eq!(PaymentListQuery::parse(""), Ok(PaymentListQuery::default()));
        let q = PaymentListQuery::parse(
            "status=completed&payment_method=card_transfer&created_from=2026-10-01T00:00:00Z\
             &created_to=2026-10-02T00:00:00%2B03:00&merchant_payment_id_prefix=order-&limit=50\
             &flow=project_test",
        )
        .expect("valid");
        assert_eq!(q.status, Some(PaymentStatus::Completed));
        assert_eq!(q.payment_method, Some(PaymentMethod::CardTransfer));
        assert_eq!(
            q.created_to,
            Timestamp::parse_rfc3339("2026-10-01T21:00:00Z"),
            "an offset is honoured"
        );
        assert_eq!(q.merchant_payment_id_prefix.as_deref(), Some("order-"));
        assert_eq!(q.limit, 50);
        assert_eq!(q.flow, Some(Flow::ProjectTest));
        assert_eq!(
            PaymentListQuery::parse("metadata%5Border%5D=A-17").map(|q| q.metadata),
            Ok(Some(("order".to_string(), "A-17".to_string()))),
            "metadata[key]=value, brackets encoded or not"
        );
        for (bad, word) in [
            ("status=done", "status:"),
            ("flow=test", "flow:"),
            ("stauts=completed", "unknown parameter"),
            ("limit=0", "limit:"),
            ("limit=101", "limit:"),
            ("limit=+5", "limit:"),
            ("limit=5&limit=6", "more than once"),
            ("status=", "empty"),
            ("created_from=yesterday", "created_from:"),
            (
                "created_from=2026-10-02T00:00:00Z&created_to=2026-10-01T00:00:00Z",
                "before",
            ),
            ("merchant_payment_id=a%20b", "merchant_payment_id:"),
            (
                "merchant_payment_id_prefix=%25",
                "merchant_payment_id_prefix:",
            ),
            ("cursor=abc", "cursor:"),
            ("metadata%5Ba+b%5D=1", "metadata[a b]:"),
            ("metadata[order]=1&metadata[shop]=2", "one key"),
            ("metadata[order]=%0A", "metadata[order]:"),
            ("metadata[note]=ab%E2%80%AEc", "metadata[note]: U+202E"),
            ("metadata[note]=a%E2%80%8Bb", "metadata[note]: U+200B"),
            ("amount=0", "amount: must be positive"),
            ("amount=1e3", "amount: must be a plain decimal"),
            ("amount=-5", "amount:"),
            ("amount=1.0000001", "amount: must have at most 6"),
            ("amount=100,50", "amount:"),
            ("requisite_last4=123", "requisite_last4:"),
            ("requisite_last4=12345", "requisite_last4:"),
            ("requisite_last4=12a4", "requisite_last4:"),
            (
                "requisite_last4=%D9%A1%D9%A2%D9%A3%D9%A4",
                "requisite_last4:",
            ),
            ("requisite_last4=+123", "requisite_last4:"),
        ] {
            let e = PaymentListQuery::parse(bad).expect_err(bad);
            assert!(e.0.contains(word), "{bad}: {e}");
            assert_eq!(ApiError::from(e).code, ErrorCode::BadRequest);
        }
    }

    #[test]
    fn amount_and_last4_read_by_value_and_exactly() {
        let q = PaymentListQuery::parse("amount=100.5&requisite_last4=0042").expect("valid");
        assert_eq!(q.amount, Amount::parse("100.50").ok(), "by value");
        assert_eq!(
            q.requisite_last4.as_deref(),
            Some("0042"),
            "leading zeros kept"
        );
        // Every amount the payment API accepts reads back equal, at any scale it is written.
        for text in [
            "1",
            "0.000001",
            "100.50",
            "999999999999999999.999999",
            "007.10",
        ] {
            let a = parse_amount(text).expect(text);
            for spelling in a.spellings() {
                assert_eq!(parse_amount(&spelling), Ok(a), "{text} as {spelling}");
            }
        }
        // Four digits and only four ASCII digits.
        for n in 0..10_000u32 {
            assert!(parse_last4(&format!("{n:04}")).is_ok());
        }
        for bad in [
            "", "1", "123", "12345", " 123", "123 ", "12.3", "١٢٣٤", "+123", "-123",
        ] {
            assert!(parse_last4(bad).is_err(), "{bad:?}");
        }
    }

    #[test]
    fn a_search_box_reads_each_kind_of_key() {
        let id = "0192f3a4-5b6c-7d8e-9f00-112233445566";
        assert_eq!(
            SearchTerm::parse(&format!(" {id} ")),
            Ok(SearchTerm::PaymentId(id.parse().expect("an id")))
        );
        for (text, expected) in [
            ("4242", SearchTerm::RequisiteLast4("4242".into())),
            ("0042", SearchTerm::RequisiteLast4("0042".into())),
            (
                "100.50",
                SearchTerm::Amount(Amount::parse("100.5").expect("amount")),
            ),
            (
                "1000.00",
                SearchTerm::Amount(Amount::parse("1000").expect("amount")),
            ),
            (
                "15",
                SearchTerm::Amount(Amount::parse("15").expect("amount")),
            ),
            (
                "12345",
                SearchTerm::Amount(Amount::parse("12345").expect("amount")),
            ),
            (
                "order-1",
                SearchTerm::MerchantPaymentIdPrefix("order-1".into()),
            ),
            ("A", SearchTerm::MerchantPaymentIdPrefix("A".into())),
            ("1.2.3", SearchTerm::MerchantPaymentIdPrefix("1.2.3".into())),
            ("0", SearchTerm::MerchantPaymentIdPrefix("0".into())),
        ] {
            assert_eq!(SearchTerm::parse(text), Ok(expected), "{text}");
        }
        for junk in ["", "  ", "order 1", "заказ", "a%b"] {
            let e = SearchTerm::parse(junk).expect_err(junk);
            assert!(e.0.starts_with("search:"), "{junk}: {e}");
        }
        let q = SearchTerm::RequisiteLast4("4242".into()).narrow(PaymentListQuery::default());
        assert_eq!(q.requisite_last4.as_deref(), Some("4242"));
    }
}
