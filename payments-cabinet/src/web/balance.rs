//! A project's balance tab (`/projects/{id}/balance`): the balance now with its totals by
//! kind, a statement of a period of whole UTC days (opening, each kind's count and sum,
//! closing), the period's entries newest first in pages, and the period's entries as CSV
//! (`/projects/{id}/balance/entries.csv`, [`super::export`]). Whoever may see the project's
//! payments sees its balance ([`visible_project`]); the figures are the core's
//! ([`payments_core::ledger`]).

use crate::accounts::Permission;
use std::collections::HashMap;

use axum::extract::{Path, Query, State};
use axum::http::StatusCode;
use axum::response::Response;
use payments_core::ids::PaymentId;
use payments_core::ledger::{Balance, EntryKind, LedgerEntry, Statement, Usdt};
use payments_core::project::Project;
use payments_core::store::{EntryQuery, StoreError};
use payments_core::Timestamp;
use time::macros::format_description;
use time::{Date, OffsetDateTime};

use super::export::{self, download};
use super::extract::Signed;
use super::i18n::{tr, trf};
use super::page::{error_page, html, OrPage, PageError, PageResult};
use super::projects::{project_view, visible_project};
use super::query::{cursor, PAGE_SIZE};
use super::state::CabinetState;
use super::views::{when, BalancePage, EntryRow, FieldError, KindLine, Link, Money, StatementView};

const DAY: std::time::Duration = std::time::Duration::from_secs(86_400);

/// A period of whole days in the user's time zone ([`super::i18n::zone`]), both ends included
/// (`from` 00:00 to the end of `to`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Period {
    pub(crate) from: Date,
    pub(crate) to: Date,
}

impl Period {
    /// Its first instant.
    pub(crate) fn start(&self) -> Timestamp {
        midnight(self.from)
    }

    /// The instant after it (the next day's midnight): the end of `[start, end)`.
    pub(crate) fn end(&self) -> Timestamp {
        self.to.next_day().map_or(midnight(self.to) + DAY, midnight)
    }
}

/// The start of day `d` in the user's time zone (UTC midnight for a day the zone cannot
/// place, which the bundled database never answers).
fn midnight(d: Date) -> Timestamp {
    let utc = Timestamp::from_unix_secs(d.midnight().assume_utc().unix_timestamp());
    let local = jiff::civil::date(
        i16::try_from(d.year()).unwrap_or(1970),
        i8::try_from(u8::from(d.month())).unwrap_or(1),
        i8::try_from(d.day()).unwrap_or(1),
    );
    local
        .to_zoned_datetime(super::i18n::zone())
        .map_or(utc, |z| {
            Timestamp::from_unix_millis(z.timestamp().as_millisecond())
        })
}

/// The day of `now` in the user's time zone.
pub(crate) fn day_of(now: Timestamp) -> Date {
    let offset = super::i18n::zone_offset_ms(now) / 1000;
    OffsetDateTime::from_unix_timestamp(now.unix_secs() + offset).map_or(Date::MIN, |t| t.date())
}

/// Reads one date of a period (`YYYY-MM-DD`); `None` when empty.
fn date(field: &str, value: &str) -> Result<Option<Date>, FieldError> {
    let value = value.trim();
    if value.is_empty() {
        return Ok(None);
    }
    Date::parse(value, format_description!("[year]-[month]-[day]"))
        .map(Some)
        .map_err(|_| FieldError {
            field: field.to_string(),
            message: trf(
                "{field}: {value} is not a date; write it as YYYY-MM-DD, for example 2026-10-01",
                &[
                    ("field", &field_name(field)),
                    ("value", &format!("{value:?}")),
                ],
            ),
        })
}

/// A period field's name as its label says it.
fn field_name(field: &str) -> &'static str {
    if field == "from" {
        tr("From")
    } else {
        tr("To")
    }
}

/// The period `from` and `to` name (`YYYY-MM-DD`, days in the user's time zone, `to`
/// included). Without `to`, it
/// ends `today`; without `from`, it starts on the first day of `to`'s month (so neither: the
/// current month so far). Every error, one per field.
pub(crate) fn read_period(from: &str, to: &str, today: Date) -> Result<Period, Vec<FieldError>> {
    let (from, to) = match (date("from", from), date("to", to)) {
        (Ok(from), Ok(to)) => (from, to),
        (from, to) => return Err([from.err(), to.err()].into_iter().flatten().collect()),
    };
    let to = to.unwrap_or(today);
    let from = from.unwrap_or_else(|| to.replace_day(1).unwrap_or(to));
    if from > to {
        return Err(vec![FieldError {
            field: "from".into(),
            message: trf(
                "{field}: the period's first day ({from}) is after its last day ({to}); choose a first day on or before the last",
                &[("field", &field_name("from")), ("from", &from), ("to", &to)],
            ),
        }]);
    }
    Ok(Period { from, to })
}

/// The query of the balance tab and of the entries export.
#[derive(Debug, Default, serde::Deserialize)]
pub(crate) struct BalanceQuery {
    #[serde(default)]
    from: String,
    #[serde(default)]
    to: String,
    /// The entries page's cursor: `<unix millis>_<seq>` of the last entry shown.
    #[serde(default)]
    after: String,
}

/// An amount as the pages show it.
fn money(u: Usdt) -> Money {
    Money {
        text: u.to_string(),
        negative: u.units() < 0,
    }
}

/// A kind's name on the pages, plural (a statement's line) and singular (an entry).
fn label(kind: EntryKind) -> (&'static str, &'static str) {
    match kind {
        EntryKind::Credit => (tr("Credits"), tr("Credit")),
        EntryKind::Reversal => (tr("Reversals"), tr("Reversal")),
        EntryKind::RecheckAdjustment => (tr("Re-check adjustments"), tr("Re-check adjustment")),
        EntryKind::Payout => (tr("Payouts"), tr("Payout")),
        EntryKind::OperatorAdjustment => (tr("Operator adjustments"), tr("Operator adjustment")),
    }
}

fn totals(b: &Balance) -> Vec<KindLine> {
    EntryKind::ALL
        .into_iter()
        .map(|k| KindLine {
            kind: k.as_str(),
            label: label(k).0,
            count: None,
            sum: money(b.totals.of(k)),
        })
        .collect()
}

fn statement_view(s: &Statement, period: Period) -> StatementView {
    StatementView {
        from: period.from.to_string(),
        to: period.to.to_string(),
        opening: money(s.opening),
        lines: s
            .lines
            .iter()
            .map(|(k, t)| KindLine {
                kind: k.as_str(),
                label: label(*k).0,
                count: Some(t.count),
                sum: money(t.sum),
            })
            .collect(),
        count: s.lines.iter().map(|(_, t)| t.count).sum(),
        closing: money(s.closing),
    }
}

/// The order numbers (`merchant_payment_id`) of the payments a page of entries names: one read
/// by id for each payment, at most a page's worth.
async fn order_numbers(
    st: &CabinetState,
    entries: &[LedgerEntry],
) -> Result<HashMap<PaymentId, String>, Response> {
    let mut orders = HashMap::new();
    for (id, _) in entries.iter().filter_map(|e| e.posting.payment) {
        if orders.contains_key(&id) {
            continue;
        }
        let payment = st.cabinet.service().store().payment(id).await.or_page(st)?;
        if let Some(p) = payment {
            orders.insert(id, p.merchant_payment_id.as_str().to_string());
        }
    }
    Ok(orders)
}

fn entry_row(e: &LedgerEntry, orders: &HashMap<PaymentId, String>) -> EntryRow {
    let p = &e.posting;
    let (at, at_text) = when(p.at);
    EntryRow {
        seq: e.seq,
        at,
        at_text,
        kind: p.kind.as_str(),
        label: label(p.kind).1,
        amount: money(p.amount),
        balance_after: money(e.balance_after),
        payment: p.payment.map(|(id, _)| id.to_string()),
        order: p.payment.and_then(|(id, _)| orders.get(&id).cloned()),
        payment_version: p.payment.map(|(_, v)| v).unwrap_or_default(),
        destination: p.destination.as_ref().map(|d| d.as_str().to_string()),
        reference: p.reference.as_ref().map(|r| r.as_str().to_string()),
        reason: p.reason.clone(),
    }
}

/// `GET /projects/{id}/balance`.
pub(crate) async fn page(
    State(st): State<CabinetState>,
    signed: Signed,
    Path(id): Path<String>,
    Query(q): Query<BalanceQuery>,
) -> PageResult {
    let (project, merchant) = visible_project(&st, &signed.current, &id, Permission::Money).await?;
    let service = st.cabinet.service();
    let failed = |e: StoreError| error_page(e, &st);
    let balance = service
        .balances()
        .balance(project.id)
        .await
        .map_err(failed)?;
    let today = day_of(service.ports().clock.now());
    let mut chrome = st
        .chrome(
            trf("{project}: balance", &[("project", &project.name)]),
            Some(&signed.current),
        )
        .section("projects")
        .crumbs(vec![Link::new("/projects", tr("Projects and API"))]);
    let mut page = BalancePage {
        chrome: chrome.clone(),
        tab: "balance",
        project: project_view(&project, &merchant),
        balance: money(balance.balance),
        entries_total: balance.entries,
        updated: balance.updated_at.map(when),
        totals: totals(&balance),
        from: q.from.clone(),
        to: q.to.clone(),
        csv: None,
        excel: Vec::new(),
        statement: None,
        entries: Vec::new(),
        next: None,
    };
    let period = match read_period(&q.from, &q.to, today) {
        Ok(period) => period,
        Err(errors) => {
            for e in errors {
                chrome = chrome.error(&e.field, e.message);
            }
            page.chrome = chrome;
            return Ok(html(StatusCode::BAD_REQUEST, &page));
        }
    };
    let (from, to) = (period.from.to_string(), period.to.to_string());
    let statement = service
        .balances()
        .statement(project.id, period.start(), period.end())
        .await
        .map_err(failed)?;
    let (found, more) = page_entries(&st, &project, period, &q.after)
        .await
        .map_err(failed)?;
    page.next = more.then(|| {
        let last = found.last().expect("a full page has a last row");
        format!(
            "/projects/{}/balance?from={from}&to={to}&after={}_{}",
            project.id,
            last.posting.at.unix_millis(),
            last.seq
        )
    });
    let csv = format!(
        "/projects/{}/balance/entries.csv?from={from}&to={to}",
        project.id
    );
    page.excel = export::excel_links("entries", &csv);
    page.csv = Some(csv);
    page.statement = Some(statement_view(&statement, period));
    let orders = order_numbers(&st, &found).await?;
    page.entries = found.iter().map(|e| entry_row(e, &orders)).collect();
    page.from = from;
    page.to = to;
    Ok(html(StatusCode::OK, &page))
}

/// A page of the period's entries, newest first, after the cursor `after`, and whether more
/// follow.
async fn page_entries(
    st: &CabinetState,
    project: &Project,
    period: Period,
    after: &str,
) -> Result<(Vec<LedgerEntry>, bool), StoreError> {
    let after = cursor::<u64>(after);
    // Newest first, the cursor's time bounds the range too (see `export::entries_csv`).
    let created_to = match after {
        Some((t, _)) => period.end().min(t + std::time::Duration::from_millis(1)),
        None => period.end(),
    };
    let mut found = st
        .cabinet
        .service()
        .store()
        .find_entries(&EntryQuery {
            created_from: Some(period.start()),
            created_to: Some(created_to),
            after,
            ..EntryQuery::new(project.id, PAGE_SIZE + 1)
        })
        .await?;
    let more = found.len() > PAGE_SIZE;
    found.truncate(PAGE_SIZE);
    Ok((found, more))
}

/// `GET /projects/{id}/balance/entries.csv?from=YYYY-MM-DD&to=YYYY-MM-DD&format=…`: the
/// period's entries oldest first, streamed ([`export::entries_csv`]) in the file's `format`
/// ([`export::Format`]); the period is read as the tab reads it, a bad one (or an unknown
/// format) is a `400` page.
pub(crate) async fn entries_csv(
    State(st): State<CabinetState>,
    signed: Signed,
    Path(id): Path<String>,
    Query(q): Query<BalanceQuery>,
    Query(fq): Query<export::FormatQuery>,
) -> PageResult {
    let (project, _) = visible_project(&st, &signed.current, &id, Permission::Money).await?;
    let format = fq.format().map_err(|e| e.render(&st))?;
    let service = st.cabinet.service();
    let today = day_of(service.ports().clock.now());
    let period = read_period(&q.from, &q.to, today).map_err(|errors| {
        let text: Vec<String> = errors.into_iter().map(|e| e.message).collect();
        PageError::BadRequest(text.join(" ")).render(&st)
    })?;
    let stream = export::entries_csv(
        service.store().clone(),
        project.id,
        period.start(),
        period.end(),
        format,
    );
    let name = format!("balance-{}-{}-{}.csv", project.id, period.from, period.to);
    download(&name, stream).await.map_err(|e| {
        tracing::error!(error = %e, "cabinet: the entries export failed");
        PageError::Unavailable(tr("The service cannot answer now. Try again in a moment.").into())
            .render(&st)
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use time::macros::date;

    #[test]
    fn a_period_is_whole_utc_days_with_the_current_month_by_default() {
        let today = date!(2026 - 10 - 17);
        let p = read_period("", "", today).expect("the default");
        assert_eq!((p.from, p.to), (date!(2026 - 10 - 01), today));
        let at = |s: &str| Timestamp::parse_rfc3339(s).expect("a time");
        assert_eq!(p.start(), at("2026-10-01T00:00:00Z"));
        assert_eq!(p.end(), at("2026-10-18T00:00:00Z"), "to is included");
        let p = read_period("", "2026-02-28", today).expect("to only");
        assert_eq!(p.from, date!(2026 - 02 - 01));
        let p = read_period(" 2026-09-30 ", "2026-09-30", today).expect("one day");
        assert_eq!(p.end().unix_secs() - p.start().unix_secs(), 86_400);
    }

    #[test]
    fn bad_dates_and_a_reversed_period_say_what_is_wrong() {
        let today = date!(2026 - 10 - 17);
        for (from, to, fields) in [
            ("2026-02-30", "", vec!["from"]),
            ("yesterday", "2026-13-01", vec!["from", "to"]),
            ("", "17.10.2026", vec!["to"]),
            ("2026-10-02", "2026-10-01", vec!["from"]),
            ("2026-11-01", "", vec!["from"]),
        ] {
            let errors = read_period(from, to, today).expect_err(from);
            let named: Vec<&str> = errors.iter().map(|e| e.field.as_str()).collect();
            assert_eq!(named, fields, "{from} {to}");
        }
        let reversed = read_period("2026-10-02", "2026-10-01", today).unwrap_err();
        assert!(reversed[0].message.contains("after its last day"));
        let bad = read_period("2026-02-30", "", today).unwrap_err();
        assert!(bad[0].message.contains("YYYY-MM-DD"), "{}", bad[0].message);
    }
}
