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
use super::query::{date, encode, DAY, PAGE_SIZE};
use super::state::CabinetState;
use super::views::{when, Choice, Chrome, PaymentRow};
use crate::accounts::Current;
use crate::store::Role;
use askama::Template;
use payments_core::amount::Amount;
use payments_core::ids::PaymentId;
use payments_core::payment::{is_last4, MerchantPaymentId};
use payments_core::service::{
    ListQueryError, PaymentCursor, PaymentListQuery, PaymentPage, PaymentService,
};
use payments_core::store::MerchantStoreExt;
use payments_core::ApiError;

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
        Err(ListQueryError(
            "search: a payment id, the last 4 digits of a card or phone, an amount \
             (100.50) or the start of your payment id (A-Z a-z 0-9 . _ : -)"
                .into(),
        ))
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
            match date(value) {
                Some(t) if field == "from" => q.created_from = Some(t),
                Some(t) => q.created_to = Some(t + DAY),
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

/// The projects a user may search: a merchant's user its merchant's, support every one.
async fn searchable_projects(
    st: &CabinetState,
    current: &Current,
) -> Result<Vec<Project>, Response> {
    let projects = st.cabinet.service().store().projects().await.or_page(st)?;
    Ok(match current.user.role {
        Role::Merchant(m) => projects
            .into_iter()
            .filter(|p| p.merchant_id == m)
            .collect(),
        Role::Support => projects,
    })
}

/// `GET /payments/search`: the box is read by [`SearchTerm::parse`]: a payment id
/// opens that payment's card, anything else lists the matching payments of every project the
/// user may see, newest first, through the list API's operation
/// ([`list_payments_across`]).
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
            let query = match term {
                Some(t) => t.narrow(query),
                None => query,
            };
            let found = list_payments_across(st.cabinet.service(), &projects, &query)
                .await
                .or_page(&st)?;
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
        SearchTerm::RequisiteLast4(l) => trf(
            "the last 4 digits of a card or phone: {digits}",
            &[("digits", l)],
        ),
        SearchTerm::Amount(a) => trf("an amount: {amount}", &[("amount", a)]),
        SearchTerm::MerchantPaymentIdPrefix(p) => trf(
            "the start of merchant_payment_id: {prefix}",
            &[("prefix", p)],
        ),
    }
}

/// One payment found, with the name of its project.
fn search_row(p: &Payment, projects: &[Project]) -> SearchRow {
    let (created, created_text) = when(p.created_at);
    SearchRow {
        row: PaymentRow {
            id: p.id.to_string(),
            created,
            created_text,
            merchant_payment_id: p.merchant_payment_id.as_str().to_string(),
            amount: p.amount.to_string(),
            currency: p.currency.as_str().to_string(),
            method: p.payment_method.as_str().to_string(),
            status: p.status.as_str().to_string(),
            test: p.is_test(),
        },
        project_id: p.project_id.to_string(),
        project_name: projects
            .iter()
            .find(|x| x.id == p.project_id)
            .map(|x| x.name.clone())
            .unwrap_or_default(),
    }
}

/// A page of the payments of every project in `projects` as `query` asks (a merchant's
/// projects, for the cabinet's search): each project's page through
/// [`Payments::list_payments`](payments_core::service::Payments::list_payments) from the same cursor, merged newest first by
/// `(created_at, id)` and cut to the limit. The order is one order across projects, so
/// the next page starts after the last payment shown and none is skipped or repeated.
async fn list_payments_across(
    service: &PaymentService,
    projects: &[Project],
    query: &PaymentListQuery,
) -> Result<PaymentPage, ApiError> {
    let mut merged = Vec::new();
    let mut more = false;
    for project in projects {
        let page = service.payments().list_payments(project, query).await?;
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
