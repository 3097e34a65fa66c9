//! The query strings of the lists (`GET /api/v1/payments`, `/api/v1/events`,
//! `/api/v1/balance/entries`, a statement's period), read into the core's list queries: every
//! parameter at most once, never empty, none unknown (a misspelt filter must not list every
//! payment), each refusal a [`ListQueryError`] naming the parameter. The merchant API, the
//! operator API and the CLI read them here, so they refuse the same inputs with the same words.

use std::time::Duration;

use payments_core::amount::Amount;
use payments_core::event::DeliveryState;
use payments_core::ledger::EntryKind;
use payments_core::payment::{is_last4, MerchantPaymentId, Metadata, PaymentMethod, PaymentStatus};
use payments_core::service::{
    EntryListQuery, EventListQuery, ListCursor, ListQueryError, PaymentListQuery, MAX_EVENT_WAIT,
    MAX_LIST_LIMIT, MAX_STATEMENT_DAYS,
};
use payments_core::Timestamp;

/// Reads a query string (without the `?`; `application/x-www-form-urlencoded`). Every
/// parameter at most once; an unknown parameter, an empty value or one that does not
/// parse is refused (a misspelt filter must not list every payment).
pub fn payment_list(query: &str) -> Result<PaymentListQuery, ListQueryError> {
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

/// Reads a query string (without the `?`) as strictly as the payment list: every parameter
/// at most once, never empty, none unknown.
pub fn event_list(query: &str) -> Result<EventListQuery, ListQueryError> {
    let mut q = EventListQuery::default();
    let mut window = ListWindow::new(&mut q.created_from, &mut q.created_to, &mut q.limit);
    let mut cursor = None;
    read_query(
        query,
        "delivery_state, payment_id, created_from, created_to, limit, cursor, wait",
        |name, value| {
            match name {
                "delivery_state" => match DeliveryState::parse(value) {
                    Some(s) => q.delivery_state = Some(s),
                    None => {
                        return Err(ListQueryError(
                            "delivery_state: expected pending, delivered or failed".into(),
                        ))
                    }
                },
                "payment_id" => match value.parse() {
                    Ok(id) => q.payment_id = Some(id),
                    Err(_) => {
                        return Err(ListQueryError(
                            "payment_id: expected a payment id (a UUID)".into(),
                        ))
                    }
                },
                "wait" => match value.parse::<u64>() {
                    Ok(n) if n <= MAX_EVENT_WAIT.as_secs() && !value.starts_with('+') => {
                        q.wait = Duration::from_secs(n)
                    }
                    _ => {
                        return Err(ListQueryError(format!(
                            "wait: whole seconds from 0 to {}",
                            MAX_EVENT_WAIT.as_secs()
                        )))
                    }
                },
                "cursor" => cursor = Some(parse_cursor(value)?),
                _ => return window.read(name, value),
            }
            Ok(true)
        },
    )?;
    window.check()?;
    q.cursor = cursor;
    Ok(q)
}

/// Reads a query string (without the `?`) as strictly as the other lists: every parameter
/// at most once, never empty, none unknown.
pub fn entry_list(query: &str) -> Result<EntryListQuery, ListQueryError> {
    let mut q = EntryListQuery::default();
    let mut window = ListWindow::new(&mut q.created_from, &mut q.created_to, &mut q.limit);
    let mut cursor = None;
    let mut kind = None;
    read_query(
        query,
        "kind, created_from, created_to, limit, cursor",
        |name, value| {
            match name {
                "kind" => match value.parse() {
                    Ok(k) => kind = Some(k),
                    Err(_) => {
                        let all: Vec<&str> = EntryKind::ALL.iter().map(|k| k.as_str()).collect();
                        return Err(ListQueryError(format!(
                            "kind: expected one of {}",
                            all.join(", ")
                        )));
                    }
                },
                "cursor" => cursor = Some(parse_cursor(value)?),
                _ => return window.read(name, value),
            }
            Ok(true)
        },
    )?;
    window.check()?;
    q.kind = kind;
    q.cursor = cursor;
    Ok(q)
}

/// Reads a statement's period from a query string: `from` and `to`, both required, RFC 3339,
/// `from` before `to` (the period is `[from, to)`), at most [`MAX_STATEMENT_DAYS`] apart;
/// any other parameter is refused by name.
pub fn period(query: &str) -> Result<(Timestamp, Timestamp), ListQueryError> {
    let (mut from, mut to) = (None, None);
    read_query(query, "from, to", |name, value| {
        let slot = match name {
            "from" => &mut from,
            "to" => &mut to,
            _ => return Ok(false),
        };
        *slot = Some(Timestamp::parse_rfc3339(value).ok_or_else(|| {
            ListQueryError(format!(
                "{name}: expected an RFC 3339 time such as 2026-10-01T00:00:00Z"
            ))
        })?);
        Ok(true)
    })?;
    let (Some(from), Some(to)) = (from, to) else {
        return Err(ListQueryError(
            "from and to are required (RFC 3339 times; the period is [from, to))".into(),
        ));
    };
    if from >= to {
        return Err(ListQueryError("from: must be before to".into()));
    }
    if to.duration_since(from).as_secs() > MAX_STATEMENT_DAYS * 86_400 {
        return Err(ListQueryError(format!(
            "to: a statement covers at most {MAX_STATEMENT_DAYS} days"
        )));
    }
    Ok((from, to))
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

fn parse_cursor<I: std::str::FromStr>(value: &str) -> Result<ListCursor<I>, ListQueryError> {
    ListCursor::parse(value).ok_or_else(|| {
        ListQueryError("cursor: not a cursor of this list (pass `next_cursor` as it came)".into())
    })
}

/// Reads a list's query string: each parameter at most once and never empty; `each` takes a
/// parameter and answers `Ok(false)` for a name it does not know, which is refused naming
/// the `known` ones.
fn read_query(
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
struct ListWindow<'a> {
    created_from: &'a mut Option<Timestamp>,
    created_to: &'a mut Option<Timestamp>,
    limit: &'a mut usize,
}

impl<'a> ListWindow<'a> {
    fn new(
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
    fn read(&mut self, name: &str, value: &str) -> Result<bool, ListQueryError> {
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
    fn check(&self) -> Result<(), ListQueryError> {
        match (*self.created_from, *self.created_to) {
            (Some(from), Some(to)) if from >= to => {
                bad("created_from: must be before created_to".into())
            }
            _ => Ok(()),
        }
    }
}

/// Reads a list of appeals' query string: `state` (one of the appeal states), `limit` (1 to
/// [`MAX_LIST_LIMIT`], 20 by default), `cursor` and, where `with_project` (the operator's
/// queue), `project_id`. The query comes in `order`.
pub fn appeal_list(
    query: &str,
    order: payments_core::appeal::AppealOrder,
    with_project: bool,
) -> Result<payments_core::appeal::AppealQuery, ListQueryError> {
    use payments_core::appeal::{AppealQuery, AppealState};
    let mut q = AppealQuery {
        order,
        ..AppealQuery::newest(20)
    };
    let known = if with_project {
        "state, project_id, limit, cursor"
    } else {
        "state, limit, cursor"
    };
    read_query(query, known, |name, value| {
        match name {
            "state" => match AppealState::parse(value) {
                Some(s) => q.states = vec![s],
                None => {
                    let all: Vec<&str> = AppealState::ALL.iter().map(|s| s.as_str()).collect();
                    return bad(format!("state: expected one of {}", all.join(", ")));
                }
            },
            "project_id" if with_project => match value.parse() {
                Ok(p) => q.project = Some(p),
                Err(_) => return bad("project_id: not a project id".into()),
            },
            "limit" => match value.parse::<usize>() {
                Ok(n) if (1..=MAX_LIST_LIMIT).contains(&n) => q.limit = n,
                _ => return bad(format!("limit: a whole number from 1 to {MAX_LIST_LIMIT}")),
            },
            "cursor" => {
                let c: ListCursor<payments_core::ids::AppealId> = parse_cursor(value)?;
                q.after = Some((c.created_at, c.id));
            }
            _ => return Ok(false),
        }
        Ok(true)
    })?;
    Ok(q)
}

#[cfg(test)]
mod tests {
    use payments_core::payment::Flow;
    use payments_core::service::{EntryCursor, EventCursor};
    use payments_core::{ApiError, ErrorCode};

    use super::*;

    #[test]
    fn the_query_string_is_read_strictly() {
        assert_eq!(payment_list(""), Ok(PaymentListQuery::default()));
        let q = payment_list(
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
            payment_list("metadata%5Border%5D=A-17").map(|q| q.metadata),
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
            let e = payment_list(bad).expect_err(bad);
            assert!(e.0.contains(word), "{bad}: {e}");
            assert_eq!(ApiError::from(e).code, ErrorCode::BadRequest);
        }
    }

    #[test]
    fn amount_and_last4_read_by_value_and_exactly() {
        let q = payment_list("amount=100.5&requisite_last4=0042").expect("valid");
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
    fn the_event_query_is_read_strictly() {
        assert_eq!(event_list(""), Ok(EventListQuery::default()));
        let q = event_list(
            "delivery_state=failed&created_from=2026-10-01T00:00:00Z&limit=100&wait=30\
             &payment_id=0192f3a4-5b6c-7d8e-9f00-112233445566",
        )
        .expect("valid");
        assert_eq!(q.delivery_state, Some(DeliveryState::Failed));
        assert_eq!(q.limit, 100);
        assert_eq!(q.wait, Duration::from_secs(30));
        assert!(q.payment_id.is_some());
        let c = EventCursor {
            created_at: Timestamp::from_unix_millis(1_790_000_000_123),
            id: "0192f3a4-5b6c-7d8e-9f00-112233445566"
                .parse()
                .expect("an id"),
        };
        assert_eq!(
            event_list(&format!("cursor={c}")).expect("valid").cursor,
            Some(c)
        );
        for (bad, word) in [
            ("delivery_state=lost", "delivery_state:"),
            ("status=completed", "unknown parameter"),
            ("wait=31", "wait:"),
            ("wait=-1", "wait:"),
            ("wait=+1", "wait:"),
            ("payment_id=42", "payment_id:"),
            ("limit=0", "limit:"),
            ("limit=1&limit=2", "more than once"),
            ("cursor=abc", "cursor:"),
            (
                "created_from=2026-10-02T00:00:00Z&created_to=2026-10-01T00:00:00Z",
                "before",
            ),
        ] {
            let e = event_list(bad).expect_err(bad);
            assert!(e.0.contains(word), "{bad}: {e}");
            assert_eq!(ApiError::from(e).code, ErrorCode::BadRequest);
        }
    }
    #[test]
    fn a_period_is_two_ordered_times_and_nothing_else() {
        let (from, to) = period("from=2026-10-01T00:00:00Z&to=2026-11-01T00:00:00Z").unwrap();
        assert_eq!(to.duration_since(from).as_secs(), 31 * 86_400);
        for (q, says) in [
            ("from=2026-10-01T00:00:00Z", "required"),
            (
                "from=2026-10-02T00:00:00Z&to=2026-10-01T00:00:00Z",
                "before",
            ),
            ("from=2026-10-01&to=2026-11-01T00:00:00Z", "RFC 3339"),
            (
                "from=2025-01-01T00:00:00Z&to=2026-11-01T00:00:00Z",
                "at most",
            ),
            (
                "from=2026-10-01T00:00:00Z&from=2026-10-01T00:00:00Z",
                "more than once",
            ),
            ("since=2026-10-01T00:00:00Z", "unknown"),
            ("from=", "empty"),
        ] {
            let e = period(q).unwrap_err();
            assert!(e.0.contains(says), "{q}: {}", e.0);
        }
    }

    #[test]
    fn the_entry_list_reads_its_kind_strictly() {
        let q = entry_list("kind=payout&limit=5").unwrap();
        assert_eq!((q.kind, q.limit), (Some(EntryKind::Payout), 5));
        assert!(entry_list("kind=refund").unwrap_err().0.contains("credit"));
        assert!(entry_list("status=completed").is_err());
        let cursor = EntryCursor {
            created_at: Timestamp::from_unix_millis(1_790_856_000_000),
            id: 42,
        };
        let q = entry_list(&format!("cursor={cursor}")).unwrap();
        assert_eq!(q.cursor, Some(cursor));
    }
}
