//! `GET /api/v1/payments`: a project's payments, newest first, filtered and paged by an opaque
//! cursor. The query string is read here, so every adapter refuses the same inputs with the
//! same words; the page comes from [`PaymentStore::find_payments`](crate::store::PaymentStore)
//! through an index for each filter.

use std::fmt;

use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use base64::Engine;

use super::PaymentService;
use crate::error::{ApiError, ErrorCode};
use crate::ids::PaymentId;
use crate::payment::{Flow, MerchantPaymentId, Payment, PaymentMethod, PaymentStatus};
use crate::project::Project;
use crate::store::{PaymentQuery, StoreError};
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
        let bad = |what: String| Err(ListQueryError(what));
        let mut q = PaymentListQuery::default();
        let mut seen: Vec<String> = Vec::new();
        for (name, value) in url::form_urlencoded::parse(query.as_bytes()) {
            if seen.iter().any(|s| *s == name) {
                return bad(format!("{name}: given more than once"));
            }
            seen.push(name.to_string());
            let value = value.as_ref();
            if value.is_empty() {
                return bad(format!("{name}: empty"));
            }
            match name.as_ref() {
                "status" => match value.parse() {
                    Ok(s) => q.status = Some(s),
                    Err(_) => {
                        let all: Vec<&str> =
                            PaymentStatus::ALL.iter().map(|s| s.as_str()).collect();
                        return bad(format!("status: expected one of {}", all.join(", ")));
                    }
                },
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
                "created_from" | "created_to" => {
                    let Some(t) = Timestamp::parse_rfc3339(value) else {
                        return bad(format!(
                            "{name}: expected an RFC 3339 time such as 2026-10-01T12:00:00Z"
                        ));
                    };
                    if name == "created_from" {
                        q.created_from = Some(t);
                    } else {
                        q.created_to = Some(t);
                    }
                }
                "merchant_payment_id" => match MerchantPaymentId::parse(value) {
                    Some(m) => q.merchant_payment_id = Some(m),
                    None => {
                        return bad(
                            "merchant_payment_id: 1-64 characters of A-Z a-z 0-9 . _ : -".into(),
                        )
                    }
                },
                "merchant_payment_id_prefix" => {
                    if MerchantPaymentId::parse(value).is_none() {
                        return bad(
                            "merchant_payment_id_prefix: 1-64 characters of A-Z a-z 0-9 . _ : -"
                                .into(),
                        );
                    }
                    q.merchant_payment_id_prefix = Some(value.to_string());
                }
                "limit" => match value.parse::<usize>() {
                    Ok(n) if (1..=MAX_LIST_LIMIT).contains(&n) && !value.starts_with('+') => {
                        q.limit = n
                    }
                    _ => return bad(format!("limit: a whole number from 1 to {MAX_LIST_LIMIT}")),
                },
                "cursor" => match PaymentCursor::parse(value) {
                    Some(c) => q.cursor = Some(c),
                    None => {
                        return bad(
                            "cursor: not a cursor of this list (pass `next_cursor` as it came)"
                                .into(),
                        )
                    }
                },
                _ => {
                    return bad(format!(
                        "{name}: unknown parameter (status, payment_method, flow, created_from, \
                         created_to, merchant_payment_id, merchant_payment_id_prefix, limit, \
                         cursor)"
                    ))
                }
            }
        }
        if let (Some(from), Some(to)) = (q.created_from, q.created_to) {
            if from >= to {
                return bad("created_from: must be before created_to".into());
            }
        }
        Ok(q)
    }
}

/// Where a page of the list starts: after the payment created at `created_at` with id `id`,
/// in the list's order (newest first, ties by id). On the wire it is opaque: base64url of
/// `v1:<unix millis>:<id>`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PaymentCursor {
    /// The creation time of the last payment of the previous page.
    pub created_at: Timestamp,
    /// Its id.
    pub id: PaymentId,
}

impl PaymentCursor {
    /// The cursor after `payment`.
    pub fn after(payment: &Payment) -> PaymentCursor {
        PaymentCursor {
            created_at: payment.created_at,
            id: payment.id,
        }
    }

    /// Reads a cursor as [`Display`](fmt::Display) wrote it.
    pub fn parse(s: &str) -> Option<PaymentCursor> {
        let bytes = URL_SAFE_NO_PAD.decode(s).ok()?;
        let text = std::str::from_utf8(&bytes).ok()?;
        let rest = text.strip_prefix("v1:")?;
        let (millis, id) = rest.split_once(':')?;
        if millis.starts_with('+') {
            return None;
        }
        Some(PaymentCursor {
            created_at: Timestamp::from_unix_millis(millis.parse().ok()?),
            id: id.parse().ok()?,
        })
    }
}

impl fmt::Display for PaymentCursor {
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

impl PaymentService {
    /// A page of `project`'s payments as `query` asks: newest first by creation time (ties by
    /// id), through an index for each filter. A payment created while a client pages through
    /// the list is not on the later pages (they hold older payments); none is skipped or
    /// repeated.
    pub async fn list_payments(
        &self,
        project: &Project,
        query: &PaymentListQuery,
    ) -> Result<PaymentPage, StoreError> {
        let mut found = self
            .ports
            .store
            .find_payments(&PaymentQuery {
                project: project.id,
                status: query.status,
                payment_method: query.payment_method,
                flow: query.flow,
                created_from: query.created_from,
                created_to: query.created_to,
                merchant_payment_id: query.merchant_payment_id.clone(),
                merchant_payment_id_prefix: query.merchant_payment_id_prefix.clone(),
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
        ] {
            let e = PaymentListQuery::parse(bad).expect_err(bad);
            assert!(e.0.contains(word), "{bad}: {e}");
            assert_eq!(ApiError::from(e).code, ErrorCode::BadRequest);
        }
    }
}
