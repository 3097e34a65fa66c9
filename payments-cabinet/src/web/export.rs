//! The cabinet's CSV exports, streamed: a project's ledger entries of a period
//! (`GET /projects/{id}/balance/entries.csv`) and its payments as the payments list filters
//! them (`GET /projects/{id}/payments.csv`).
//!
//! **Bounded memory.** An export is read from the store in pages of [`EXPORT_PAGE`] rows
//! through a keyset cursor (the entries' `(created_at, seq)`, the payments'
//! `(created_at, id)`), and each page is written as one chunk of the response body
//! (`axum::body::Body::from_stream`): the next page is read only when the body asks for more,
//! that is when the client has taken the previous one. A month of a busy project costs one
//! page of memory, whatever the export's size (docs/performance.md, "Ledger export memory").
//!
//! **Errors.** A store error before the first page is an error page (`503`). One in the
//! middle ends the stream with an `Err`: the server cuts the response off before its end (a
//! chunked body without its last chunk), so the client sees a broken transfer, never a file
//! that is silently short.
//!
//! **Formats** ([`Format`], the `format` query parameter). Without one (or `format=csv`) an
//! export is the machine-readable file it has always been: no byte-order mark, `,`, decimal
//! points, RFC 3339 times, the metadata as one JSON cell. `excel-ru` and `excel-en` are CSV
//! for a double-click in Excel: the UTF-8 byte-order mark, the locale's separator (`;` with
//! Russian regional settings, whose decimal mark is `,`) and decimal mark, times to the
//! second as Excel reads a date and time, and the payments' metadata one column per key
//! ([`MetadataColumns`], decided by the first page so that memory stays one page).
//!
//! **Formula injection.** A spreadsheet runs a cell that starts with `=`, `+`, `-` or `@` (and
//! some a cell that starts with a tab or a carriage return) as a formula. Every text cell that
//! starts so gets a leading `'` ([`guard`]), in every format; numeric columns are written as
//! they are, so that an amount such as `-12.3400` stays a number. The numeric columns are our
//! own figures (`Usdt`, `Amount` and the settlement's decimals), never the merchant's text.
//! The `'` is in the file, and a spreadsheet may keep it in the cell's value (docs/cabinet.md
//! says what a lookup must account for); the ids the service makes (payment and entry ids,
//! hexadecimal UUIDs) never start so and are never changed.

use std::borrow::Cow;
use std::sync::Arc;
use std::time::Duration;

use axum::body::{Body, Bytes};
use axum::http::header;
use axum::response::{IntoResponse, Response};
use futures_util::stream::{self, Stream, StreamExt, TryStreamExt};
use payments_core::ledger::{LedgerEntry, Usdt};
use payments_core::payment::{Metadata, Payment};
use payments_core::settlement::Settlement;
use payments_core::store::{EntryQuery, PaymentQuery, Store, StoreError};
use payments_core::{PaymentId, ProjectId, Timestamp};

use super::i18n::tr;
use super::views::ExportLink;

/// Rows read from the store per page of an export (and written per chunk of the body).
pub const EXPORT_PAGE: usize = 1_000;

/// The columns of the entries export, in order.
pub const ENTRY_COLUMNS: [&str; 12] = [
    "seq",
    "id",
    "created_at",
    "kind",
    "amount",
    "balance_after",
    "currency",
    "payment_id",
    "payment_version",
    "destination",
    "reference",
    "reason",
];

/// The columns of the payments export, in order. `metadata` holds the payment's metadata as
/// a JSON object text (empty when it has none); the settlement's columns (`course` to
/// `amount_usdt_rate`) are empty until requisites are issued.
pub const PAYMENT_COLUMNS: [&str; 15] = [
    "id",
    "merchant_payment_id",
    "status",
    "flow",
    "amount",
    "initial_amount",
    "currency",
    "payment_method",
    "course",
    "rate",
    "amount_usdt",
    "amount_usdt_rate",
    "created_at",
    "updated_at",
    "metadata",
];

/// Why an export stopped before its end.
#[derive(Debug, thiserror::Error)]
pub enum ExportError {
    /// The store failed reading a page.
    #[error(transparent)]
    Store(#[from] StoreError),
    /// Writing CSV failed (into memory: not expected).
    #[error("writing CSV")]
    Csv(#[from] csv::Error),
    /// Taking the written CSV out of its writer failed (into memory: not expected).
    #[error("flushing CSV")]
    Flush(#[source] std::io::Error),
}

impl<W> From<csv::IntoInnerError<W>> for ExportError {
    fn from(e: csv::IntoInnerError<W>) -> Self {
        ExportError::Flush(e.into_error())
    }
}

/// How an export's file is written: the `format` query parameter of both exports.
///
/// [`Format::Csv`] is the machine-readable file (the default, and the file the exports wrote
/// before there was a choice); the two Excel formats are CSV that a spreadsheet opens with a
/// double-click: a UTF-8 byte-order mark, the separator and decimal mark of the locale,
/// times as the spreadsheet reads them, and the payments' metadata one column per key
/// ([`MetadataColumns`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Format {
    /// `csv` (or no parameter): no byte-order mark, `,`, decimal point, RFC 3339 times with
    /// milliseconds, the metadata as one JSON cell.
    #[default]
    Csv,
    /// `excel-en`: a byte-order mark, `,`, decimal point, times `YYYY-MM-DD HH:MM:SS` (UTC).
    ExcelEn,
    /// `excel-ru`: a byte-order mark, `;`, decimal comma (`1,12`), times
    /// `DD.MM.YYYY HH:MM:SS` (UTC), as Excel with Russian regional settings reads them.
    ExcelRu,
}

/// The UTF-8 byte-order mark, by which Excel on Windows knows a CSV file is UTF-8.
pub const BOM: &[u8] = b"\xEF\xBB\xBF";

/// How many metadata keys the Excel formats give a column of their own at most.
pub const METADATA_KEY_COLUMNS: usize = 20;

impl Format {
    /// The format a `format` parameter names: `csv` (or empty), `excel-en`, `excel-ru`.
    pub fn from_param(param: &str) -> Option<Format> {
        match param.trim() {
            "" | "csv" => Some(Format::Csv),
            "excel-en" => Some(Format::ExcelEn),
            "excel-ru" => Some(Format::ExcelRu),
            _ => None,
        }
    }

    /// The `format` parameter that names this format.
    pub fn param(self) -> &'static str {
        match self {
            Format::Csv => "csv",
            Format::ExcelEn => "excel-en",
            Format::ExcelRu => "excel-ru",
        }
    }

    /// Whether this is one of the Excel formats.
    fn excel(self) -> bool {
        self != Format::Csv
    }

    /// The field separator.
    fn delimiter(self) -> u8 {
        match self {
            Format::ExcelRu => b';',
            Format::Csv | Format::ExcelEn => b',',
        }
    }

    /// A cell's text in this format ([`guard`]ed when it is text).
    fn render(self, cell: Cell) -> String {
        match (cell, self) {
            (Cell::Empty, _) => String::new(),
            (Cell::Text(t), _) => guard(&t).into_owned(),
            (Cell::Number(n), Format::ExcelRu) => n.replace('.', ","),
            (Cell::Number(n), _) => n,
            (Cell::Time(t), Format::Csv) => guard(&t.to_rfc3339()).into_owned(),
            (Cell::Time(t), excel) => excel_time(t, excel == Format::ExcelRu),
        }
    }
}

/// `t` to the second, UTC, as Excel reads a date and time: `YYYY-MM-DD HH:MM:SS`, or with
/// `russian` `DD.MM.YYYY HH:MM:SS`.
fn excel_time(t: Timestamp, russian: bool) -> String {
    // `2026-10-01T12:00:00.000Z`: fixed places.
    let s = t.to_rfc3339();
    let (date, time) = (&s[..10], &s[11..19]);
    if russian {
        format!("{}.{}.{} {time}", &date[8..10], &date[5..7], &date[..4])
    } else {
        format!("{date} {time}")
    }
}

/// One cell of an export, before a [`Format`] writes it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Cell {
    /// Nothing.
    Empty,
    /// Text that may come from a person (guarded against formulas).
    Text(String),
    /// One of the service's own decimal figures (`-12.3400`), never guarded.
    Number(String),
    /// A moment.
    Time(Timestamp),
}

/// A text cell made harmless for a spreadsheet: one that starts with `=`, `+`, `-`, `@`, a
/// tab or a carriage return gets a leading `'` (shown as text, never run as a formula); any
/// other is kept as it is.
pub fn guard(cell: &str) -> Cow<'_, str> {
    match cell.as_bytes().first() {
        Some(b'=' | b'+' | b'-' | b'@' | b'\t' | b'\r') => Cow::Owned(format!("'{cell}")),
        _ => Cow::Borrowed(cell),
    }
}

/// A text cell.
fn text(cell: impl Into<String>) -> Cell {
    Cell::Text(cell.into())
}

/// A number cell.
fn number(n: impl ToString) -> Cell {
    Cell::Number(n.to_string())
}

/// The cells of an entry, in [`ENTRY_COLUMNS`] order: `seq`, `amount`, `balance_after` and
/// `payment_version` are numbers, `created_at` a time, every other cell text.
pub fn entry_cells(e: &LedgerEntry) -> [Cell; 12] {
    let p = &e.posting;
    let or_empty = |c: Option<Cell>| c.unwrap_or(Cell::Empty);
    [
        number(e.seq),
        text(p.id.to_string()),
        Cell::Time(p.at),
        text(p.kind.as_str()),
        number(p.amount),
        number(e.balance_after),
        text("USDT"),
        or_empty(p.payment.map(|(id, _)| text(id.to_string()))),
        or_empty(p.payment.map(|(_, v)| number(v))),
        or_empty(p.destination.as_ref().map(|d| text(d.as_str()))),
        or_empty(p.reference.as_ref().map(|r| text(r.as_str()))),
        or_empty(p.reason.as_deref().map(text)),
    ]
}

/// The cells of a payment before its metadata, in [`PAYMENT_COLUMNS`] order: `amount`,
/// `initial_amount`, `course`, `rate`, `amount_usdt` and `amount_usdt_rate` are numbers,
/// `created_at` and `updated_at` times, every other cell text.
pub fn payment_cells(p: &Payment) -> [Cell; 14] {
    let s = p.merchant_information();
    // The settlement's USDT figures with exactly 4 decimals, as the API writes them.
    let usdt = |d: payments_core::Decimal| {
        Usdt::from_decimal(d).map_or_else(|| d.to_string(), |u| u.to_string())
    };
    let settled =
        |f: &dyn Fn(&Settlement) -> String| s.as_ref().map_or(Cell::Empty, |s| number(f(s)));
    [
        text(p.id.to_string()),
        text(p.merchant_payment_id.as_str()),
        text(p.status.as_str()),
        text(p.flow.as_str()),
        number(p.amount),
        number(p.initial_amount),
        text(p.currency.as_str()),
        text(p.payment_method.as_str()),
        settled(&|s| s.course.to_string()),
        settled(&|s| s.rate.to_string()),
        settled(&|s| usdt(s.amount_usdt)),
        settled(&|s| usdt(s.amount_usdt_rate)),
        Cell::Time(p.created_at),
        Cell::Time(p.updated_at),
    ]
}

/// The metadata columns of a payments export in an Excel format: one `metadata.<key>` column
/// for each of the (at most [`METADATA_KEY_COLUMNS`]) keys that the most payments of the
/// export's first page have (the more frequent first, then by name, the columns in key
/// order), then `metadata`: a JSON object of the row's other keys (empty when it has none),
/// so that no key is lost. The first page decides, so that the export stays one page in
/// memory; a key first seen later goes to `metadata`.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct MetadataColumns {
    keys: Vec<String>,
}

impl MetadataColumns {
    /// The columns the payments of `page` call for.
    pub fn of_page(page: &[Payment]) -> MetadataColumns {
        let mut counts: std::collections::BTreeMap<&str, usize> = Default::default();
        for p in page {
            for (k, _) in p.metadata.iter() {
                *counts.entry(k).or_default() += 1;
            }
        }
        let mut ranked: Vec<(&str, usize)> = counts.into_iter().collect();
        ranked.sort_by_key(|(k, n)| (std::cmp::Reverse(*n), *k));
        let mut keys: Vec<String> = ranked
            .into_iter()
            .take(METADATA_KEY_COLUMNS)
            .map(|(k, _)| k.to_string())
            .collect();
        keys.sort();
        debug_assert!(keys.len() <= METADATA_KEY_COLUMNS);
        MetadataColumns { keys }
    }

    /// The column names: `metadata.<key>` for each key, then `metadata`.
    pub fn header(&self) -> Vec<String> {
        self.keys
            .iter()
            .map(|k| format!("metadata.{k}"))
            .chain(["metadata".to_string()])
            .collect()
    }

    /// A payment's metadata cells, in [`MetadataColumns::header`] order.
    pub fn cells(&self, metadata: &Metadata) -> Vec<Cell> {
        let mut cells: Vec<Cell> = self
            .keys
            .iter()
            .map(|k| metadata.get(k).map_or(Cell::Empty, text))
            .collect();
        let rest: serde_json::Map<String, serde_json::Value> = metadata
            .iter()
            .filter(|(k, _)| self.keys.binary_search_by(|c| c.as_str().cmp(k)).is_err())
            .map(|(k, v)| (k.to_string(), serde_json::Value::String(v.to_string())))
            .collect();
        cells.push(if rest.is_empty() {
            Cell::Empty
        } else {
            text(serde_json::Value::Object(rest).to_string())
        });
        cells
    }
}

/// Where a paged export stands.
enum Cursor<C> {
    /// Nothing written yet: the header, then the first page.
    Start,
    /// The next page starts after this row.
    After(C),
    /// The last page was written.
    Done,
}

/// Writes `rows` as CSV lines in `format` (after the byte-order mark of an Excel format and
/// `header`, when `header` is given: the first chunk) into one chunk.
fn chunk<H: AsRef<[u8]>>(
    format: Format,
    header: Option<&[H]>,
    rows: impl Iterator<Item = impl IntoIterator<Item = Cell>>,
) -> Result<Bytes, ExportError> {
    let mut out = Vec::with_capacity(256 * EXPORT_PAGE);
    if header.is_some() && format.excel() {
        out.extend_from_slice(BOM);
    }
    let mut w = csv::WriterBuilder::new()
        .has_headers(false)
        .delimiter(format.delimiter())
        .from_writer(out);
    if let Some(h) = header {
        w.write_record(h)?;
    }
    let mut line: Vec<String> = Vec::new();
    for row in rows {
        line.clear();
        line.extend(row.into_iter().map(|c| format.render(c)));
        w.write_record(&line)?;
    }
    Ok(Bytes::from(w.into_inner()?))
}

/// A project's ledger entries recorded in `[from, to)`, oldest first, as CSV in `format`: the
/// header ([`ENTRY_COLUMNS`]), then one chunk per page of [`EXPORT_PAGE`] entries read from
/// `store` through the `(created_at, seq)` cursor. A failed read ends the stream with its
/// `Err`.
pub fn entries_csv(
    store: Arc<dyn Store>,
    project: ProjectId,
    from: Timestamp,
    to: Timestamp,
    format: Format,
) -> impl Stream<Item = Result<Bytes, ExportError>> + Send + 'static {
    let base = EntryQuery {
        created_from: Some(from),
        created_to: Some(to),
        oldest_first: true,
        ..EntryQuery::new(project, EXPORT_PAGE)
    };
    stream::try_unfold(Cursor::Start, move |at: Cursor<(Timestamp, u64)>| {
        let store = Arc::clone(&store);
        let base = base.clone();
        async move {
            let (after, first) = match at {
                Cursor::Done => return Ok(None),
                Cursor::Start => (None, true),
                Cursor::After(c) => (Some(c), false),
            };
            // The cursor's time is also the period's start from here on: the same rows, and
            // the database reads its index from the cursor rather than from the period's
            // start again (with two lower bounds SQLite ranges over the first, which made
            // every page read all the rows before it: 54 s instead of 8 for a million).
            let created_from = match (after, base.created_from) {
                (Some((t, _)), Some(from)) => Some(t.max(from)),
                (_, from) => from,
            };
            let page = store
                .find_entries(&EntryQuery {
                    after,
                    created_from,
                    ..base
                })
                .await?;
            let next = match page.last() {
                Some(last) if page.len() >= EXPORT_PAGE => {
                    Cursor::After((last.posting.at, last.seq))
                }
                _ => Cursor::Done,
            };
            if page.is_empty() && !first {
                return Ok(None);
            }
            let header = first.then_some(&ENTRY_COLUMNS[..]);
            let bytes = chunk(format, header, page.iter().map(entry_cells))?;
            Ok(Some((bytes, next)))
        }
    })
}

/// The payments export's header in `format` ([`PAYMENT_COLUMNS`], or in an Excel format its
/// first 14 and then `columns`' header).
fn payments_header(format: Format, columns: &MetadataColumns) -> Vec<String> {
    let fixed = PAYMENT_COLUMNS.iter().map(|c| c.to_string());
    if format.excel() {
        fixed.take(14).chain(columns.header()).collect()
    } else {
        fixed.collect()
    }
}

/// A payment's cells in `format`: [`payment_cells`], then its metadata as one JSON cell, or in
/// an Excel format as `columns` lay it out.
fn payment_row(format: Format, columns: &MetadataColumns, p: &Payment) -> Vec<Cell> {
    let mut cells = Vec::from(payment_cells(p));
    if format.excel() {
        cells.extend(columns.cells(&p.metadata));
    } else {
        cells.push(p.metadata.to_json_text().map_or(Cell::Empty, text));
    }
    cells
}

/// Where a payments export stands: its cursor and (from the first page) its metadata columns.
type PaymentsAt = (Cursor<(Timestamp, PaymentId)>, MetadataColumns);

/// Every payment `query` matches (its `before` and `limit` aside), newest first, as CSV in
/// `format`: the header ([`PAYMENT_COLUMNS`]; in an Excel format with the metadata columns
/// of the first page, [`MetadataColumns`]), then one chunk per page of [`EXPORT_PAGE`]
/// payments read from `store` through the `(created_at, id)` cursor. A failed read ends the
/// stream with its `Err`.
pub fn payments_csv(
    store: Arc<dyn Store>,
    query: PaymentQuery,
    format: Format,
) -> impl Stream<Item = Result<Bytes, ExportError>> + Send + 'static {
    let base = PaymentQuery {
        before: None,
        limit: EXPORT_PAGE,
        ..query
    };
    let start = (Cursor::Start, MetadataColumns::default());
    stream::try_unfold(start, move |(at, columns): PaymentsAt| {
        let store = Arc::clone(&store);
        let base = base.clone();
        async move {
            let (before, first) = match at {
                Cursor::Done => return Ok(None),
                Cursor::Start => (None, true),
                Cursor::After(c) => (Some(c), false),
            };
            // As for the entries: with a `to` filter, the cursor's time bounds the range too.
            let created_to = match (before, base.created_to) {
                (Some((t, _)), Some(to)) => Some(to.min(t + Duration::from_millis(1))),
                (_, to) => to,
            };
            let page = store
                .find_payments(&PaymentQuery {
                    before,
                    created_to,
                    ..base
                })
                .await?;
            let next = match page.last() {
                Some(last) if page.len() >= EXPORT_PAGE => {
                    Cursor::After((last.created_at, last.id))
                }
                _ => Cursor::Done,
            };
            if page.is_empty() && !first {
                return Ok(None);
            }
            // The first page decides the metadata columns of the whole export.
            let columns = if first && format.excel() {
                MetadataColumns::of_page(&page)
            } else {
                columns
            };
            let header = first.then(|| payments_header(format, &columns));
            let rows = page.iter().map(|p| payment_row(format, &columns, p));
            let bytes = chunk(format, header.as_deref(), rows)?;
            Ok(Some((bytes, (next, columns))))
        }
    })
}

/// A streamed CSV download named `filename`: the first chunk is read before the answer, so
/// that a store failing at once is an error page (`Err`); an error later cuts the body off
/// (and is logged).
pub(crate) async fn download(
    filename: &str,
    export: impl Stream<Item = Result<Bytes, ExportError>> + Send + 'static,
) -> Result<Response, ExportError> {
    let mut export = Box::pin(export);
    let first = match export.next().await {
        Some(first) => first?,
        None => Bytes::new(),
    };
    let rest = export.inspect_err(|e| {
        tracing::error!(error = %e, "cabinet: an export stopped before its end");
    });
    let body = Body::from_stream(stream::once(async move { Ok(first) }).chain(rest));
    Ok((
        [
            (header::CONTENT_TYPE, "text/csv; charset=utf-8".to_string()),
            (
                header::CONTENT_DISPOSITION,
                format!("attachment; filename=\"{filename}\""),
            ),
        ],
        body,
    )
        .into_response())
}

/// The `format` query parameter of both exports ([`Format::from_param`]).
#[derive(Debug, Default, serde::Deserialize)]
pub(crate) struct FormatQuery {
    #[serde(default)]
    format: String,
}

impl FormatQuery {
    /// The format asked for, or the `400` page of a name no format has.
    pub(crate) fn format(&self) -> Result<Format, super::page::PageError> {
        Format::from_param(&self.format).ok_or_else(|| {
            super::page::PageError::BadRequest(
                tr("There is no such export format: the choices are csv, excel-en and excel-ru.")
                    .into(),
            )
        })
    }
}

/// The two Excel buttons of an export at `href` (with its query, `?…`), the one of the current
/// request's language first and highlighted: Russian Excel for the Russian cabinet.
pub(crate) fn excel_links(prefix: &str, href: &str) -> Vec<ExportLink> {
    let link = |format: Format, label: &'static str, primary: bool| ExportLink {
        id: format!("{prefix}-{}", format.param()),
        href: format!("{href}&format={}", format.param()),
        label,
        primary,
    };
    let ru = |primary| link(Format::ExcelRu, tr("Download for Excel (Russian)"), primary);
    let en = |primary| link(Format::ExcelEn, tr("Download for Excel (English)"), primary);
    match super::i18n::current() {
        super::i18n::Lang::Ru => vec![ru(true), en(false)],
        super::i18n::Lang::En => vec![en(true), ru(false)],
    }
}

#[cfg(test)]
mod tests {
    use std::sync::atomic::{AtomicUsize, Ordering};

    use futures_util::future::BoxFuture;
    use payments_core::ids::EntryId;
    use payments_core::ledger::{EntryKind, Posting};
    use payments_core::store::{transact, Layered, Op, StoreLayer};
    use payments_core::testing::MemoryStore;

    use super::*;

    fn project() -> ProjectId {
        "00000000-0000-4000-8000-0000000000aa"
            .parse()
            .expect("an id")
    }

    /// `n` operator adjustments of project [`project`], three a second from `t0`, each of
    /// `-(i + 1)` ten-thousandths with a reason that looks like a formula.
    async fn seeded(n: usize, t0: i64) -> Arc<dyn Store> {
        seeded_with(
            t0,
            (0..n).map(|i| format!("=HYPERLINK(\"https://evil.example/{i}\")")),
        )
        .await
    }

    /// An operator adjustment of project [`project`] for each of `reasons`, three a second
    /// from `t0`, the `i`th of `-(i + 1)` ten-thousandths.
    async fn seeded_with(t0: i64, reasons: impl Iterator<Item = String>) -> Arc<dyn Store> {
        let store: Arc<dyn Store> = Arc::new(MemoryStore::new());
        for (i, reason) in reasons.enumerate() {
            let posting = Posting {
                id: format!("00000000-0000-4000-8000-{:012}", i + 1)
                    .parse::<EntryId>()
                    .expect("an id"),
                project_id: project(),
                kind: EntryKind::OperatorAdjustment,
                amount: Usdt::from_units(-(i as i64 + 1)),
                at: Timestamp::from_unix_secs(t0 + (i / 3) as i64),
                payment: None,
                destination: None,
                reference: None,
                reason: Some(reason),
                actor: Some("ops".into()),
            };
            let posting = Arc::new(posting);
            transact(&*store, move |tx| {
                let posting = Arc::clone(&posting);
                Box::pin(async move { tx.insert_posting(&posting).await.map(|_| ()) })
            })
            .await
            .expect("appended");
        }
        store
    }

    /// The `i`th payment of [`project`]: `-order-<i>` of `amount` RUB created `at`, with
    /// `metadata` (a JSON object, or `null` for none).
    fn payment(i: usize, amount: &str, metadata: serde_json::Value, at: Timestamp) -> Payment {
        use payments_core::payment::{Flow, PaymentMethod};
        use payments_core::testing::fixtures;
        let mut request = fixtures::request(&format!("-order-{i}"), amount, PaymentMethod::Sbp);
        if !metadata.is_null() {
            request.metadata = Metadata::from_json(&metadata).expect("metadata");
        }
        fixtures::payment(
            format!("00000000-0000-4000-8000-{:012}", i + 1)
                .parse()
                .expect("an id"),
            project(),
            &request,
            Flow::RuntimeLive,
            at,
            Duration::from_secs(900),
        )
    }

    async fn drain(
        s: impl Stream<Item = Result<Bytes, ExportError>>,
    ) -> (Vec<u8>, usize, Option<ExportError>) {
        let mut s = Box::pin(s);
        let (mut bytes, mut chunks) = (Vec::new(), 0);
        while let Some(item) = s.next().await {
            match item {
                Ok(b) => {
                    bytes.extend_from_slice(&b);
                    chunks += 1;
                }
                Err(e) => return (bytes, chunks, Some(e)),
            }
        }
        (bytes, chunks, None)
    }

    #[test]
    fn formula_like_cells_get_a_quote_and_others_stay() {
        for (cell, shown) in [
            ("=1+2", "'=1+2"),
            ("+1", "'+1"),
            ("-A1", "'-A1"),
            ("@SUM(A1)", "'@SUM(A1)"),
            ("\tx", "'\tx"),
            ("\rx", "'\rx"),
            ("order-1", "order-1"),
            ("{\"a\":\"=1\"}", "{\"a\":\"=1\"}"),
            ("", ""),
        ] {
            assert_eq!(guard(cell), shown, "{cell:?}");
        }
    }

    /// Every entry of the period, oldest first, exactly once across page boundaries; amounts
    /// stay numbers, the formula-like reasons are quoted; entries outside the period are not
    /// there.
    #[tokio::test]
    async fn the_entries_export_pages_through_the_period_oldest_first() {
        // Three entries a second, the first row at a second's start: a second straddles each
        // page boundary (1000 = 3 * 333 + 1).
        let n = EXPORT_PAGE * 2 + 10;
        let t0 = 1_790_000_000;
        let store = seeded(n + 9, t0).await;
        // The period leaves out the first 3 entries (one second) and the last 6 (two).
        let from = Timestamp::from_unix_secs(t0 + 1);
        let to = Timestamp::from_unix_secs(t0 + 1 + (n / 3) as i64);
        let (bytes, chunks, error) =
            drain(entries_csv(store, project(), from, to, Format::Csv)).await;
        assert!(error.is_none(), "{error:?}");
        assert_eq!(chunks, 3, "one chunk per page");
        let mut r = csv::Reader::from_reader(bytes.as_slice());
        assert_eq!(
            r.headers().expect("a header").iter().collect::<Vec<_>>(),
            ENTRY_COLUMNS
        );
        let rows: Vec<csv::StringRecord> = r.records().map(|r| r.expect("a row")).collect();
        assert_eq!(rows.len(), n);
        for (i, row) in rows.iter().enumerate() {
            let seq = i + 4;
            assert_eq!(row[0], seq.to_string(), "oldest first, none twice");
            assert_eq!(row[4], Usdt::from_units(-(seq as i64)).to_string());
            assert!(
                row[4].starts_with('-') && row[4].parse::<f64>().is_ok(),
                "a negative number, unquoted: {}",
                &row[4]
            );
            let after: i64 = -((1..=seq as i64).sum::<i64>());
            assert_eq!(row[5], Usdt::from_units(after).to_string());
            assert_eq!(row[3], *"operator_adjustment");
            assert_eq!(row[6], *"USDT");
            assert_eq!(
                row[11],
                format!("'=HYPERLINK(\"https://evil.example/{}\")", seq - 1)
            );
        }
    }

    /// Every payment of a filtered period, newest first, once across page boundaries (three
    /// payments a millisecond, so that one millisecond straddles each boundary), with the
    /// metadata as a JSON object.
    #[tokio::test]
    async fn the_payments_export_pages_newest_first_with_the_filters() {
        let store: Arc<dyn Store> = Arc::new(MemoryStore::new());
        let t0 = 1_790_000_000_000;
        let n = EXPORT_PAGE * 2 + 30;
        for i in 0..n {
            let metadata = match i % 2 {
                0 => serde_json::json!({"n": i.to_string(), "f": "=1+2"}),
                _ => serde_json::Value::Null,
            };
            // Three payments a millisecond.
            let at = Timestamp::from_unix_millis(t0 + (i / 3) as i64);
            let p = payment(i, "1500", metadata, at);
            store.insert_payment(&p).await.expect("inserted");
        }
        // Created from the 7th payment to before the last 8.
        let query = PaymentQuery {
            created_from: Some(Timestamp::from_unix_millis(t0 + 2)),
            created_to: Some(Timestamp::from_unix_millis(t0 + (n / 3) as i64 - 2)),
            ..PaymentQuery::new(project(), 50)
        };
        let (bytes, chunks, error) = drain(payments_csv(store, query, Format::Csv)).await;
        assert!(error.is_none(), "{error:?}");
        assert_eq!(chunks, 3);
        let mut r = csv::Reader::from_reader(bytes.as_slice());
        assert_eq!(
            r.headers().expect("a header").iter().collect::<Vec<_>>(),
            PAYMENT_COLUMNS
        );
        let rows: Vec<csv::StringRecord> = r.records().map(|r| r.expect("a row")).collect();
        let orders: Vec<usize> = rows
            .iter()
            .map(|r| {
                r[1].trim_start_matches("'-order-")
                    .parse()
                    .expect("quoted order")
            })
            .collect();
        let mut expected: Vec<usize> = (6..n - 8).collect();
        expected.sort_by_key(|i| std::cmp::Reverse((i / 3, *i)));
        assert_eq!(
            expected[EXPORT_PAGE - 1] / 3,
            expected[EXPORT_PAGE] / 3,
            "a tie straddles"
        );
        assert_eq!(orders, expected, "newest first, each once");
        for (row, i) in rows.iter().zip(&orders) {
            if i % 2 == 0 {
                let m: serde_json::Value = serde_json::from_str(&row[14]).expect("JSON");
                assert_eq!(m, serde_json::json!({"n": i.to_string(), "f": "=1+2"}));
            } else {
                assert_eq!(&row[14], "");
            }
            assert_eq!(
                (&row[4], &row[8]),
                ("1500", ""),
                "a number; no settlement yet"
            );
        }
    }

    /// The Russian Excel file byte for byte: the byte-order mark, `;` between cells, decimal
    /// commas, `DD.MM.YYYY HH:MM:SS` times, a cell with `;`, quotes and a line break quoted,
    /// a formula guarded; the English one with `,`, decimal points and ISO times; the plain
    /// file as it always was.
    #[tokio::test]
    async fn the_excel_entries_files_are_what_excel_reads() {
        let t0 = 1_790_000_000; // 2026-09-21 14:13:20 UTC
        let reasons = ["a;b \"c\"\nd", "=1+2"].map(String::from);
        let store = seeded_with(t0, reasons.into_iter()).await;
        let (from, to) = (
            Timestamp::from_unix_secs(t0),
            Timestamp::from_unix_secs(t0 + 9),
        );
        let file = |format| {
            let store = Arc::clone(&store);
            async move {
                let (bytes, _, error) =
                    drain(entries_csv(store, project(), from, to, format)).await;
                assert!(error.is_none(), "{error:?}");
                String::from_utf8(bytes).expect("UTF-8")
            }
        };
        let id = |i| format!("00000000-0000-4000-8000-00000000000{i}");
        let ru = file(Format::ExcelRu).await;
        assert!(
            ru.as_bytes().starts_with(b"\xEF\xBB\xBF"),
            "the BOM: {ru:?}"
        );
        assert_eq!(
            ru,
            format!(
                "\u{FEFF}seq;id;created_at;kind;amount;balance_after;currency;payment_id;\
                 payment_version;destination;reference;reason\n\
                 1;{};21.09.2026 14:13:20;operator_adjustment;-0,0001;-0,0001;USDT;;;;;\
                 \"a;b \"\"c\"\"\nd\"\n\
                 2;{};21.09.2026 14:13:20;operator_adjustment;-0,0002;-0,0003;USDT;;;;;'=1+2\n",
                id(1),
                id(2)
            )
        );
        let en = file(Format::ExcelEn).await;
        assert_eq!(
            en.lines().nth(1),
            Some(
                format!(
                    "1,{},2026-09-21 14:13:20,operator_adjustment,-0.0001,-0.0001,USDT,,,,,\"a;b \
                     \"\"c\"\"",
                    id(1)
                )
                .as_str()
            )
        );
        assert!(en.starts_with("\u{FEFF}seq,id,created_at,"), "{en:?}");
        let plain = file(Format::Csv).await;
        assert!(plain.starts_with("seq,id,created_at,"), "no BOM: {plain:?}");
        assert!(plain.contains(",2026-09-21T14:13:20.000Z,operator_adjustment,-0.0001,"));
    }
    /// The Russian Excel payments file: the metadata keys as columns, Cyrillic values with `;`
    /// and quotes round-tripped, a decimal comma in the amount, a guarded formula.
    #[tokio::test]
    async fn the_russian_payments_file_has_a_column_per_metadata_key() {
        let store: Arc<dyn Store> = Arc::new(MemoryStore::new());
        let t0 = 1_790_000_000_000;
        let older =
            serde_json::json!({"city": "Москва; центр", "note": "=1+2", "q": "«ёлка» \"x\""});
        for (i, amount, metadata) in [
            (0, "1.12", older),
            (1, "1500", serde_json::json!({"city": "Казань"})),
            (2, "7", serde_json::Value::Null),
        ] {
            let at = Timestamp::from_unix_millis(t0 + i as i64 * 1000);
            let p = payment(i, amount, metadata, at);
            store.insert_payment(&p).await.expect("inserted");
        }
        let query = PaymentQuery::new(project(), 50);
        let (bytes, _, error) = drain(payments_csv(store, query, Format::ExcelRu)).await;
        assert!(error.is_none(), "{error:?}");
        let text = std::str::from_utf8(&bytes).expect("UTF-8");
        let header = "\u{FEFF}id;merchant_payment_id;status;flow;amount;initial_amount;currency;\
                      payment_method;course;rate;amount_usdt;amount_usdt_rate;created_at;\
                      updated_at;metadata.city;metadata.note;metadata.q;metadata\n";
        assert!(text.starts_with(header), "{text}");
        assert!(
            text.contains(";\"Москва; центр\";'=1+2;\"«ёлка» \"\"x\"\"\";\n"),
            "{text}"
        );
        let rows: Vec<csv::StringRecord> = csv::ReaderBuilder::new()
            .delimiter(b';')
            .from_reader(&bytes[3..])
            .records()
            .map(|r| r.expect("a row"))
            .collect();
        let cells: Vec<Vec<&str>> = rows
            .iter()
            .map(|r| vec![&r[1], &r[4], &r[12], &r[14], &r[15], &r[16], &r[17]])
            .collect();
        assert_eq!(
            cells,
            [
                vec!["'-order-2", "7", "21.09.2026 14:13:22", "", "", "", ""],
                vec![
                    "'-order-1",
                    "1500",
                    "21.09.2026 14:13:21",
                    "Казань",
                    "",
                    "",
                    ""
                ],
                vec![
                    "'-order-0",
                    "1,12",
                    "21.09.2026 14:13:20",
                    "Москва; центр",
                    "'=1+2",
                    "«ёлка» \"x\"",
                    ""
                ],
            ]
        );
    }

    /// At most [`METADATA_KEY_COLUMNS`] keys get a column, the most frequent of the first
    /// page; every other key of a row is kept in its `metadata` cell.
    #[test]
    fn metadata_keys_beyond_the_columns_stay_in_the_metadata_cell() {
        let at = Timestamp::from_unix_secs(1_790_000_000);
        let twenty: serde_json::Map<String, serde_json::Value> = (0..20)
            .map(|k| (format!("k{k:02}"), serde_json::json!(format!("v{k}"))))
            .collect();
        let page = [
            payment(0, "1", serde_json::Value::Object(twenty), at),
            payment(1, "1", serde_json::json!({"k00": "a", "k20": "b"}), at),
            payment(2, "1", serde_json::json!({"k20": "c", "zz": "=d"}), at),
        ];
        // k00 and k20 twice, then k01..k19 once: k19 is the 21st.
        let columns = MetadataColumns::of_page(&page);
        let header = columns.header();
        assert_eq!(header.len(), METADATA_KEY_COLUMNS + 1);
        assert_eq!(header[..2], ["metadata.k00", "metadata.k01"]);
        assert_eq!(header[18..], ["metadata.k18", "metadata.k20", "metadata"]);
        let cells = columns.cells(&page[0].metadata);
        assert_eq!(cells[0], Cell::Text("v0".into()));
        assert_eq!(cells[20], Cell::Text("{\"k19\":\"v19\"}".into()));
        let cells = columns.cells(&page[2].metadata);
        assert_eq!(cells[19], Cell::Text("c".into()));
        assert_eq!(cells[20], Cell::Text("{\"zz\":\"=d\"}".into()));
        assert!(cells[..19].iter().all(|c| *c == Cell::Empty));
        assert_eq!(Format::ExcelRu.render(cells[20].clone()), "{\"zz\":\"=d\"}");
        assert_eq!(
            columns.cells(&Metadata::default()).last(),
            Some(&Cell::Empty)
        );
    }

    #[test]
    fn formats_are_named_by_the_parameter() {
        for f in [Format::Csv, Format::ExcelEn, Format::ExcelRu] {
            assert_eq!(Format::from_param(f.param()), Some(f));
        }
        assert_eq!(Format::from_param(""), Some(Format::Csv));
        assert_eq!(Format::from_param("xlsx"), None);
    }

    /// Fails every `find_entries` after the first `ok` (the store going away mid-export).
    struct FailAfter {
        inner: Arc<dyn Store>,
        ok: usize,
        calls: AtomicUsize,
    }

    impl StoreLayer for FailAfter {
        fn inner(&self) -> &Arc<dyn Store> {
            &self.inner
        }

        fn around<'a, T: Send + 'a>(
            &'a self,
            op: Op,
            call: BoxFuture<'a, Result<T, StoreError>>,
        ) -> BoxFuture<'a, Result<T, StoreError>> {
            if op.name == "find_entries" && self.calls.fetch_add(1, Ordering::SeqCst) >= self.ok {
                return Box::pin(async {
                    Err(StoreError::Unavailable {
                        cause: payments_core::store::UnavailableCause::Other,
                        detail: "the database went away".into(),
                    })
                });
            }
            call
        }
    }

    /// A store error after the first page ends the stream with that error (not a short file
    /// that looks complete), and a body made of the stream fails for its reader.
    #[tokio::test]
    async fn a_store_error_mid_export_ends_the_stream_with_an_error() {
        let t0 = 1_790_000_000;
        let inner = seeded(EXPORT_PAGE + 10, t0).await;
        let failing = |ok| -> Arc<dyn Store> {
            Arc::new(Layered::new(FailAfter {
                inner: Arc::clone(&inner),
                ok,
                calls: AtomicUsize::new(0),
            }))
        };
        let (from, to) = (
            Timestamp::from_unix_secs(t0),
            Timestamp::from_unix_secs(t0 + 1_000_000),
        );
        let (bytes, chunks, error) =
            drain(entries_csv(failing(1), project(), from, to, Format::Csv)).await;
        assert_eq!(chunks, 1, "the first page was written");
        assert_eq!(
            bytes.iter().filter(|b| **b == b'\n').count(),
            EXPORT_PAGE + 1
        );
        assert!(
            matches!(
                error,
                Some(ExportError::Store(StoreError::Unavailable { .. }))
            ),
            "{error:?}"
        );

        // Through an HTTP body: the reader gets an error, not an end.
        use http_body_util::BodyExt;
        let response = download(
            "x.csv",
            entries_csv(failing(1), project(), from, to, Format::Csv),
        )
        .await
        .expect("the first page is there");
        assert_eq!(
            response.headers()[header::CONTENT_TYPE],
            "text/csv; charset=utf-8"
        );
        assert_eq!(
            response.headers()[header::CONTENT_DISPOSITION],
            "attachment; filename=\"x.csv\""
        );
        assert!(response.into_body().collect().await.is_err());
        // Failing at once: no answer is started (the caller shows an error page).
        assert!(download(
            "x.csv",
            entries_csv(failing(0), project(), from, to, Format::Csv)
        )
        .await
        .is_err());
        // Without failures, the same export ends cleanly.
        let response = download(
            "x.csv",
            entries_csv(failing(9), project(), from, to, Format::Csv),
        )
        .await
        .expect("an answer");
        let body = response
            .into_body()
            .collect()
            .await
            .expect("the whole body");
        assert_eq!(
            body.to_bytes().iter().filter(|b| **b == b'\n').count(),
            EXPORT_PAGE + 11
        );
    }
}
