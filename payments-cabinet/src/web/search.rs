//! The search box: payments found by id, merchant payment id or requisites across the
//! projects the user sees.

use axum::extract::{Query, State};
use axum::http::StatusCode;
use axum::response::Response;
use payments_core::payment::{Payment, PaymentStatus};
use payments_core::project::Project;

use super::extract::Signed;
use super::i18n::{tr, trf};
use super::page::{html, ok, see_other, OrPage, PageResult};
use super::query::{date, date_end, encode, PAGE_SIZE};
use super::state::CabinetState;
use super::views::{Choice, Chrome, PaymentRow};
use crate::accounts::Current;
use askama::Template;
use payments_core::amount::Amount;
use payments_core::ids::PaymentId;
use payments_core::payment::{is_last4, MerchantPaymentId, Metadata, RequisiteNumber};
use payments_core::service::{ListQueryError, PaymentCursor, PaymentListQuery, PaymentPage};
use payments_core::store::MerchantStoreExt;

/// What one search box holds, as the cabinet's payment search reads it
/// ([`SearchTerm::parse`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum SearchTerm {
    /// A payment id (a UUID): that payment.
    PaymentId(PaymentId),
    /// Exactly four digits: the last four of a requisite, an amount (unless they start with
    /// `0`), or the start of a merchant payment id.
    RequisiteLast4(String),
    /// A card number pasted with spaces between its digits: the payments paid to that card.
    CardNumber(RequisiteNumber),
    /// 13 to 19 digits alone or with dashes between them: a card number, an amount (when the
    /// text is one), the start of a merchant payment id or a metadata value.
    CardOrPrefix(RequisiteNumber, String),
    /// A decimal with a dot: an amount.
    Amount(Amount),
    /// A whole number of other than four digits: an amount (its text), or the start of a
    /// merchant payment id.
    AmountOrPrefix(Amount, String),
    /// Anything else a merchant payment id may hold: a prefix of one, or a metadata value.
    MerchantPaymentIdPrefix(String),
    /// Any other text a metadata value may hold (`Иван Петров`, `ivan@example.com`): a
    /// metadata value under any key.
    MetadataValue(String),
}

impl SearchTerm {
    /// Reads a search box (trimmed): a UUID is a payment id; exactly four digits the last four
    /// of a requisite, an amount (`1000`; not `0042`) or the start of a merchant payment id; a
    /// number with a dot an amount; another whole number an amount or the start of a merchant
    /// payment id; else a merchant payment id prefix (digits that are no amount, `0` or 19
    /// digits, too). What no merchant payment id holds is read as money written with a
    /// decimal comma or grouped digits ([`written_money`]: `1 500,50`) or a card number or
    /// phone pasted whole ([`pasted_card`]: 13 to 19 digits, that card, also read as the id
    /// text it may be; [`pasted_requisite`]: a phone, its last four digits); other text
    /// (`Иван Петров`) as a metadata value, and what no metadata value holds either (a control
    /// character, more than 500 characters) is refused, saying what the box takes.
    pub fn parse(text: &str) -> Result<SearchTerm, ListQueryError> {
        let text = text.trim();
        if let Ok(id) = text.parse::<PaymentId>() {
            return Ok(SearchTerm::PaymentId(id));
        }
        if is_last4(text) {
            return Ok(SearchTerm::RequisiteLast4(text.to_string()));
        }
        if let Some(card) = pasted_card(text) {
            return Ok(match MerchantPaymentId::parse(text) {
                Some(_) => SearchTerm::CardOrPrefix(card, text.to_string()),
                None => SearchTerm::CardNumber(card),
            });
        }
        if text.bytes().any(|b| b.is_ascii_digit()) {
            if let Ok(a) = Amount::parse(text) {
                let digits = text.bytes().all(|b| b.is_ascii_digit());
                return Ok(match MerchantPaymentId::parse(text) {
                    Some(_) if digits => SearchTerm::AmountOrPrefix(a, text.to_string()),
                    _ => SearchTerm::Amount(a),
                });
            }
        }
        if MerchantPaymentId::parse(text).is_some() {
            return Ok(SearchTerm::MerchantPaymentIdPrefix(text.to_string()));
        }
        // What no merchant payment id holds: money written as people write it, or a card
        // number or phone pasted whole.
        if let Some(a) = written_money(text) {
            return Ok(SearchTerm::Amount(a));
        }
        if let Some(last4) = pasted_requisite(text) {
            return Ok(SearchTerm::RequisiteLast4(last4));
        }
        if !text.is_empty() && Metadata::is_valid_value(text) {
            return Ok(SearchTerm::MetadataValue(text.to_string()));
        }
        Err(ListQueryError(
            "search: a payment id, the last 4 digits of a card or phone, an amount \
             (100.50), the start of your payment id or a metadata value (up to 500 characters)"
                .into(),
        ))
    }

    /// The list queries this term reads, each `query` narrowed by one reading of the box
    /// (digits: by the amount or last four, by the merchant payment id prefix in any case
    /// and as a metadata value); the search lists the payments any of them finds. A payment id
    /// is looked up by id, not listed: `query` is returned as it is.
    pub fn narrowed(&self, query: PaymentListQuery) -> Vec<PaymentListQuery> {
        let prefix = |p: &str| PaymentListQuery {
            merchant_payment_id_prefix_any_case: Some(p.to_string()),
            ..query.clone()
        };
        let value = |v: &str| PaymentListQuery {
            metadata_value: Some(v.to_string()),
            ..query.clone()
        };
        let card = |n: &RequisiteNumber| PaymentListQuery {
            requisite_number: Some(n.clone()),
            ..query.clone()
        };
        let amount = |a: Amount| PaymentListQuery {
            amount: Some(a),
            ..query.clone()
        };
        match self {
            SearchTerm::PaymentId(_) => vec![query.clone()],
            SearchTerm::RequisiteLast4(l) => {
                let mut readings = vec![
                    PaymentListQuery {
                        requisite_last4: Some(l.clone()),
                        ..query.clone()
                    },
                    prefix(l),
                    value(l),
                ];
                readings.extend(four_digit_amount(l).map(amount));
                readings
            }
            SearchTerm::CardNumber(n) => vec![card(n)],
            SearchTerm::CardOrPrefix(n, p) => {
                let mut readings = vec![card(n), prefix(p), value(p)];
                readings.extend(Amount::parse(p).ok().map(amount));
                readings
            }
            SearchTerm::Amount(a) => vec![amount(*a)],
            SearchTerm::AmountOrPrefix(a, p) => vec![amount(*a), prefix(p), value(p)],
            SearchTerm::MerchantPaymentIdPrefix(p) => vec![prefix(p), value(p)],
            SearchTerm::MetadataValue(v) => vec![value(v)],
        }
    }
}

/// An amount written as people write money (a decimal comma, digits grouped by spaces or
/// commas): `1500,50`, `1 500,50`, `1 500.50`, `1,500.50`, `1 500`. A comma followed by
/// exactly three digits groups thousands (`1,500` is one thousand five hundred); any other
/// comma is the decimal mark. Groups after the first have three digits. `None` for anything
/// else, the plain `1500.50` included (the caller reads it first).
fn written_money(text: &str) -> Option<Amount> {
    let spaced = |c: char| matches!(c, ' ' | '\u{a0}' | '\u{202f}');
    let (whole, fraction) = match text.rfind(['.', ',']) {
        Some(i) if text[i..].starts_with('.') || text.len() - i - 1 != 3 => {
            (&text[..i], Some(&text[i + 1..]))
        }
        _ => (text, None),
    };
    let groups: Vec<&str> = whole.split(|c: char| spaced(c) || c == ',').collect();
    let grouped = groups.len() > 1 || fraction.is_some();
    let digits = |g: &str| !g.is_empty() && g.bytes().all(|b| b.is_ascii_digit());
    let well_grouped = groups.iter().all(|g| digits(g))
        && groups.iter().skip(1).all(|g| g.len() == 3)
        && groups[0].len() <= if groups.len() > 1 { 3 } else { 18 };
    if !grouped || !well_grouped || fraction.is_some_and(|f| !digits(f)) {
        return None;
    }
    let plain = match fraction {
        Some(f) => format!("{}.{f}", groups.concat()),
        None => groups.concat(),
    };
    Amount::parse(&plain).ok()
}

/// The card number in a text of 13 to 19 digits, alone or with the spaces or dashes people
/// write between them (`2200 1234 5678 4242`, `2200-1234-5678-4242`).
fn pasted_card(text: &str) -> Option<RequisiteNumber> {
    let card_like = text
        .bytes()
        .all(|b| b.is_ascii_digit() || b == b' ' || b == b'-');
    card_like.then(|| RequisiteNumber::of(text)).flatten()
}

/// The last four digits of a card number or phone pasted whole: 10 to 19 digits with the
/// spaces, dashes, parentheses and leading `+` people write them with (`2200 1234 5678 4242`,
/// `+7 (900) 111-77-77`), at least one of which no merchant payment id holds.
fn pasted_requisite(text: &str) -> Option<String> {
    let digits: String = text.chars().filter(char::is_ascii_digit).collect();
    let allowed = text.char_indices().all(|(i, c)| {
        c.is_ascii_digit() || matches!(c, ' ' | '-' | '(' | ')') || (c == '+' && i == 0)
    });
    (allowed && (10..=19).contains(&digits.len())).then(|| digits[digits.len() - 4..].to_string())
}

/// Four digits read also as an amount (`1000` is one thousand); none with a leading zero
/// (`0042` is the end of a card number, never an amount written so).
fn four_digit_amount(digits: &str) -> Option<Amount> {
    if digits.starts_with('0') {
        return None;
    }
    Amount::parse(digits).ok()
}

/// One payment found by the search, with its project.
#[derive(Debug, Clone)]
pub(crate) struct SearchRow {
    pub(crate) row: PaymentRow,
    pub(crate) project_id: String,
    pub(crate) project_name: String,
}

/// `GET /payments/search`: one box over every project the user may see.
#[derive(Template)]
#[template(path = "search.html")]
pub(crate) struct SearchPage {
    pub(crate) chrome: Chrome,
    pub(crate) q: String,
    pub(crate) statuses: Vec<Choice>,
    pub(crate) from: String,
    pub(crate) to: String,
    /// What the box was read as ("an amount: 100.50"); `None` without a search.
    pub(crate) read_as: Option<String>,
    /// How many projects were searched.
    pub(crate) projects: usize,
    pub(crate) payments: Vec<SearchRow>,
    pub(crate) next: Option<String>,
}

/// The fields in error, each with its message.
type FieldErrors = Vec<(&'static str, String)>;

/// The search's query string.
#[derive(Debug, Default, serde::Deserialize)]
pub(crate) struct SearchForm {
    #[serde(default)]
    q: String,
    #[serde(default)]
    status: String,
    #[serde(default)]
    from: String,
    #[serde(default)]
    to: String,
    #[serde(default)]
    cursor: String,
}

impl SearchForm {
    /// The query string of the search (the cursor aside).
    fn query_string(&self) -> String {
        format!(
            "q={}&status={}&from={}&to={}",
            encode(self.q.trim()),
            encode(&self.status),
            encode(&self.from),
            encode(&self.to),
        )
    }

    /// The list query of the filters besides the box, or the fields in error.
    fn list_query(&self) -> Result<PaymentListQuery, FieldErrors> {
        let mut errors = Vec::new();
        let mut q = PaymentListQuery {
            limit: PAGE_SIZE,
            ..PaymentListQuery::default()
        };
        if !self.status.is_empty() {
            match self.status.parse() {
                Ok(s) => q.status = Some(s),
                Err(_) => errors.push(("status", tr("Status: choose one from the list.").into())),
            }
        }
        for (field, value) in [("from", &self.from), ("to", &self.to)] {
            if value.trim().is_empty() {
                continue;
            }
            let read = if field == "from" { date } else { date_end };
            match read(value) {
                Some(t) if field == "from" => q.created_from = Some(t),
                Some(t) => q.created_to = Some(t),
                None => errors.push((
                    field,
                    trf("{value}: a date as YYYY-MM-DD", &[("value", value)]),
                )),
            }
        }
        if let (Some(from), Some(to)) = (q.created_from, q.created_to) {
            if from >= to {
                errors.push(("to", tr("Created to: on or after Created from.").into()));
            }
        }
        if !self.cursor.is_empty() {
            match PaymentCursor::parse(&self.cursor) {
                Some(c) => q.cursor = Some(c),
                None => errors.push(("q", tr("The page link is broken: search again.").into())),
            }
        }
        if errors.is_empty() {
            Ok(q)
        } else {
            Err(errors)
        }
    }
}

/// The projects a user may search: those it works on ([`Current::works_on`]).
pub(crate) async fn searchable_projects(
    st: &CabinetState,
    current: &Current,
) -> Result<Vec<Project>, Response> {
    let projects = st.cabinet.service().store().projects().await.or_page(st)?;
    Ok(projects
        .into_iter()
        .filter(|p| current.works_on(p))
        .collect())
}

/// `GET /payments/search`: the box is read by [`SearchTerm::parse`]: a payment id
/// opens that payment's card, anything else lists the payments of every project the user may
/// see that any reading of the box finds ([`SearchTerm::narrowed`]), newest first, through
/// the core's [`list_payments_across`](payments_core::service::Payments::list_payments_across).
pub(crate) async fn search(
    State(st): State<CabinetState>,
    signed: Signed,
    Query(f): Query<SearchForm>,
) -> PageResult {
    let projects = searchable_projects(&st, &signed.current).await?;
    let mut chrome = st
        .chrome(tr("Search payments"), Some(&signed.current))
        .section("search");
    let mut page = search_page(chrome.clone(), &f, projects.len());
    let searched =
        !(f.q.trim().is_empty() && f.status.is_empty() && f.from.is_empty() && f.to.is_empty());
    if !searched {
        return Ok(ok(&page));
    }
    let (term, query) = match read_form(&f) {
        Ok(read) => read,
        Err(errors) => {
            for (field, message) in errors {
                chrome = chrome.error(field, message);
            }
            page.chrome = chrome;
            return Ok(html(StatusCode::BAD_REQUEST, &page));
        }
    };
    page.read_as = term.as_ref().map(read_as);
    let found = match &term {
        Some(SearchTerm::PaymentId(id)) => {
            let payment = st
                .cabinet
                .service()
                .store()
                .payment(*id)
                .await
                .or_page(&st)?
                .filter(|p| projects.iter().any(|x| x.id == p.project_id));
            if let Some(p) = payment {
                return Ok(see_other(&format!("/payments/{}", p.id)));
            }
            Vec::new()
        }
        term => {
            let queries = match term {
                Some(t) => t.narrowed(query),
                None => vec![query],
            };
            let found = match queries.split_first() {
                Some((first, or)) => st
                    .cabinet
                    .service()
                    .payments()
                    .list_payments_across(&projects, first, or)
                    .await
                    .or_page(&st)?,
                None => PaymentPage {
                    payments: Vec::new(),
                    next_cursor: None,
                },
            };
            page.next = found
                .next_cursor
                .map(|c| format!("/payments/search?{}&cursor={}", f.query_string(), c));
            found.payments
        }
    };
    page.payments = found.iter().map(|p| search_row(p, &projects)).collect();
    Ok(ok(&page))
}

/// The search page as the form was filled, nothing found yet.
fn search_page(chrome: Chrome, f: &SearchForm, projects: usize) -> SearchPage {
    let status: Option<PaymentStatus> = f.status.parse().ok();
    SearchPage {
        chrome,
        q: f.q.clone(),
        statuses: PaymentStatus::ALL
            .iter()
            .map(|s| Choice {
                value: s.as_str(),
                selected: Some(*s) == status,
            })
            .collect(),
        from: f.from.clone(),
        to: f.to.clone(),
        read_as: None,
        projects,
        payments: Vec::new(),
        next: None,
    }
}

/// The box's term (none when it is empty) and the list query of the other filters, or the
/// fields in error: the box's alone when it is refused, else the other filters'.
fn read_form(f: &SearchForm) -> Result<(Option<SearchTerm>, PaymentListQuery), FieldErrors> {
    let term = if f.q.trim().is_empty() {
        None
    } else {
        Some(SearchTerm::parse(&f.q).map_err(|e| vec![("q", e.0)])?)
    };
    Ok((term, f.list_query()?))
}

/// What the box was read as, shown above the payments found.
fn read_as(term: &SearchTerm) -> String {
    match term {
        SearchTerm::PaymentId(id) => trf("a payment id: {id}", &[("id", id)]),
        SearchTerm::RequisiteLast4(l) if four_digit_amount(l).is_some() => trf(
            "the last 4 digits of a card or phone, an amount, the start of merchant_payment_id or a metadata value: {digits}",
            &[("digits", l)],
        ),
        SearchTerm::RequisiteLast4(l) => trf(
            "the last 4 digits of a card or phone, the start of merchant_payment_id or a metadata value: {digits}",
            &[("digits", l)],
        ),
        SearchTerm::CardNumber(n) => trf(
            "the card number ending in {digits}",
            &[("digits", &n.last4())],
        ),
        SearchTerm::CardOrPrefix(n, p) => trf(
            "the card number ending in {digits}, an amount, the start of merchant_payment_id or a metadata value: {text}",
            &[("digits", &n.last4()), ("text", p)],
        ),
        SearchTerm::Amount(a) => trf("an amount: {amount}", &[("amount", a)]),
        SearchTerm::AmountOrPrefix(a, p) => trf(
            "an amount: {amount}, the start of merchant_payment_id or a metadata value: {prefix}",
            &[("amount", a), ("prefix", p)],
        ),
        SearchTerm::MerchantPaymentIdPrefix(p) => trf(
            "the start of merchant_payment_id in any case, or a metadata value: {prefix}",
            &[("prefix", p)],
        ),
        SearchTerm::MetadataValue(v) => trf("a metadata value: {value}", &[("value", v)]),
    }
}

/// One payment found, with the name of its project.
fn search_row(p: &Payment, projects: &[Project]) -> SearchRow {
    SearchRow {
        row: super::views::payment_row(p),
        project_id: p.project_id.to_string(),
        project_name: projects
            .iter()
            .find(|x| x.id == p.project_id)
            .map(|x| x.name.clone())
            .unwrap_or_default(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

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
                SearchTerm::AmountOrPrefix(Amount::parse("15").expect("amount"), "15".into()),
            ),
            (
                "12345",
                SearchTerm::AmountOrPrefix(Amount::parse("12345").expect("amount"), "12345".into()),
            ),
            (
                "1234567890123456789",
                SearchTerm::CardOrPrefix(
                    RequisiteNumber::of("1234567890123456789").expect("19 digits"),
                    "1234567890123456789".into(),
                ),
            ),
            (
                "123456789012",
                SearchTerm::AmountOrPrefix(
                    Amount::parse("123456789012").expect("amount"),
                    "123456789012".into(),
                ),
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
        // Money as people write it, and card numbers and phones pasted whole.
        for (text, amount) in [
            ("1500,50", "1500.50"),
            ("1 500,50", "1500.50"),
            ("1\u{a0}500,5", "1500.5"),
            ("1 500.50", "1500.50"),
            ("1,500.50", "1500.50"),
            ("1,500", "1500"),
            ("1 000 000", "1000000"),
            ("150,5", "150.5"),
        ] {
            assert_eq!(
                SearchTerm::parse(text),
                Ok(SearchTerm::Amount(Amount::parse(amount).expect("amount"))),
                "{text}"
            );
        }
        for text in ["2200 1234 5678 4242", " 2200 1234 5678 4242 "] {
            assert_eq!(
                SearchTerm::parse(text),
                Ok(SearchTerm::CardNumber(
                    RequisiteNumber::of("2200123456784242").expect("a card")
                )),
                "{text}"
            );
        }
        for (text, last4) in [("+7 (900) 111-77-77", "7777"), ("+79001117777", "7777")] {
            assert_eq!(
                SearchTerm::parse(text),
                Ok(SearchTerm::RequisiteLast4(last4.into())),
                "{text}"
            );
        }
        // Other text is a metadata value, exact; what no value holds is refused.
        for text in ["order 1", "заказ", "a%b", "1 50,5", "12 3456", "1,5,0"] {
            assert_eq!(
                SearchTerm::parse(text),
                Ok(SearchTerm::MetadataValue(text.into())),
                "{text}"
            );
        }
        let long = "я".repeat(501);
        for junk in ["", "  ", "a\u{7}b", "a\u{202e}b", long.as_str()] {
            let e = SearchTerm::parse(junk).expect_err(junk);
            assert!(e.0.starts_with("search:"), "{junk}: {e}");
        }
        let q = SearchTerm::RequisiteLast4("4242".into()).narrowed(PaymentListQuery::default());
        assert_eq!(q.len(), 4, "{q:?}");
        assert_eq!(q[0].requisite_last4.as_deref(), Some("4242"));
        assert_eq!(
            q[1].merchant_payment_id_prefix_any_case.as_deref(),
            Some("4242")
        );
        assert_eq!(q[2].metadata_value.as_deref(), Some("4242"));
        assert_eq!(
            q[3].amount,
            Amount::parse("4242").ok(),
            "1000 finds one thousand"
        );
        let q = SearchTerm::RequisiteLast4("0042".into()).narrowed(PaymentListQuery::default());
        assert_eq!(q.len(), 3, "a leading zero is no amount: {q:?}");
        let q = SearchTerm::AmountOrPrefix(Amount::parse("15").expect("amount"), "15".into())
            .narrowed(PaymentListQuery::default());
        assert_eq!(q[0].amount, Amount::parse("15").ok());
        assert_eq!(
            q[1].merchant_payment_id_prefix_any_case.as_deref(),
            Some("15")
        );
        assert_eq!(q[1].amount, None, "{q:?}");
        assert_eq!(q[2].metadata_value.as_deref(), Some("15"));
        let card = RequisiteNumber::of("2200123456784242").expect("a card");
        let q = SearchTerm::CardOrPrefix(card.clone(), "2200123456784242".into())
            .narrowed(PaymentListQuery::default());
        assert_eq!(q.len(), 4, "{q:?}");
        assert_eq!(q[0].requisite_number.as_ref(), Some(&card));
        assert_eq!(q[3].amount, Amount::parse("2200123456784242").ok());
        assert_eq!(
            SearchTerm::parse("2200-1234-5678-4242"),
            Ok(SearchTerm::CardOrPrefix(
                card.clone(),
                "2200-1234-5678-4242".into()
            ))
        );
        let q = SearchTerm::CardNumber(card.clone()).narrowed(PaymentListQuery::default());
        assert_eq!(q.len(), 1, "{q:?}");
        assert_eq!(q[0].requisite_number.as_ref(), Some(&card));
        assert_eq!(q[0].requisite_last4, None);
        let q = SearchTerm::MerchantPaymentIdPrefix("ord-1001".into())
            .narrowed(PaymentListQuery::default());
        assert_eq!(q.len(), 2, "{q:?}");
        assert_eq!(q[0].merchant_payment_id_prefix, None, "not case-sensitive");
    }
}
