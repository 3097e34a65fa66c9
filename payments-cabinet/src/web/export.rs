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
//! **Formula injection.** A spreadsheet runs a cell that starts with `=`, `+`, `-` or `@` (and
//! some a cell that starts with a tab or a carriage return) as a formula. Every text cell that
//! starts so gets a leading `'` ([`guard`]); numeric columns are written as they are, so that
//! an amount such as `-12.3400` stays a number. The numeric columns are our own figures
//! (`Usdt`, `Amount` and the settlement's decimals), never the merchant's text.

use std::borrow::Cow;
use std::sync::Arc;
use std::time::Duration;

use axum::body::{Body, Bytes};
use axum::http::header;
use axum::response::{IntoResponse, Response};
use futures_util::stream::{self, Stream, StreamExt, TryStreamExt};
use payments_core::ledger::{LedgerEntry, Usdt};
use payments_core::payment::Payment;
use payments_core::store::{EntryQuery, PaymentQuery, Store, StoreError};
use payments_core::{PaymentId, ProjectId, Timestamp};

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
    #[error("writing CSV: {0}")]
    Csv(String),
}

impl From<csv::Error> for ExportError {
    fn from(e: csv::Error) -> Self {
        ExportError::Csv(e.to_string())
    }
}

impl<W> From<csv::IntoInnerError<W>> for ExportError {
    fn from(e: csv::IntoInnerError<W>) -> Self {
        ExportError::Csv(e.error().to_string())
    }
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

/// A text cell ([`guard`]ed).
fn text(cell: impl AsRef<str>) -> String {
    guard(cell.as_ref()).into_owned()
}

/// The cells of an entry, in [`ENTRY_COLUMNS`] order: `seq`, `amount`, `balance_after` and
/// `payment_version` are numbers, every other cell is guarded text.
pub fn entry_row(e: &LedgerEntry) -> [String; 12] {
    let p = &e.posting;
    [
        e.seq.to_string(),
        text(p.id.to_string()),
        text(p.at.to_rfc3339()),
        text(p.kind.as_str()),
        p.amount.to_string(),
        e.balance_after.to_string(),
        "USDT".to_string(),
        p.payment
            .map(|(id, _)| text(id.to_string()))
            .unwrap_or_default(),
        p.payment.map(|(_, v)| v.to_string()).unwrap_or_default(),
        p.destination
            .as_ref()
            .map(|d| text(d.as_str()))
            .unwrap_or_default(),
        p.reference
            .as_ref()
            .map(|r| text(r.as_str()))
            .unwrap_or_default(),
        p.reason.as_deref().map(text).unwrap_or_default(),
    ]
}

/// The cells of a payment, in [`PAYMENT_COLUMNS`] order: `amount`, `initial_amount`,
/// `course`, `rate`, `amount_usdt` and `amount_usdt_rate` are numbers, every other cell is
/// guarded text (`metadata`, a JSON object, starts with `{`).
pub fn payment_row(p: &Payment) -> [String; 15] {
    let s = p.merchant_information();
    // The settlement's USDT figures with exactly 4 decimals, as the API writes them.
    let usdt = |d: payments_core::Decimal| {
        Usdt::from_decimal(d).map_or_else(|| d.to_string(), |u| u.to_string())
    };
    [
        text(p.id.to_string()),
        text(p.merchant_payment_id.as_str()),
        text(p.status.as_str()),
        text(p.flow.as_str()),
        p.amount.to_string(),
        p.initial_amount.to_string(),
        text(p.currency.as_str()),
        text(p.payment_method.as_str()),
        s.map(|s| s.course.to_string()).unwrap_or_default(),
        s.map(|s| s.rate.to_string()).unwrap_or_default(),
        s.map(|s| usdt(s.amount_usdt)).unwrap_or_default(),
        s.map(|s| usdt(s.amount_usdt_rate)).unwrap_or_default(),
        text(p.created_at.to_rfc3339()),
        text(p.updated_at.to_rfc3339()),
        p.metadata.to_json_text().map(text).unwrap_or_default(),
    ]
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

/// Writes `rows` as CSV lines (after `header`, when given) into one chunk.
fn chunk<const N: usize>(
    header: Option<&[&str; N]>,
    rows: impl Iterator<Item = [String; N]>,
) -> Result<Bytes, ExportError> {
    let mut w = csv::WriterBuilder::new()
        .has_headers(false)
        .from_writer(Vec::with_capacity(256 * EXPORT_PAGE));
    if let Some(h) = header {
        w.write_record(h)?;
    }
    for row in rows {
        w.write_record(&row)?;
    }
    Ok(Bytes::from(w.into_inner()?))
}

/// A project's ledger entries recorded in `[from, to)`, oldest first, as CSV: the header
/// ([`ENTRY_COLUMNS`]), then one chunk per page of [`EXPORT_PAGE`] entries read from `store`
/// through the `(created_at, seq)` cursor. A failed read ends the stream with its `Err`.
pub fn entries_csv(
    store: Arc<dyn Store>,
    project: ProjectId,
    from: Timestamp,
    to: Timestamp,
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
            let bytes = chunk(first.then_some(&ENTRY_COLUMNS), page.iter().map(entry_row))?;
            Ok(Some((bytes, next)))
        }
    })
}

/// Every payment `query` matches (its `before` and `limit` aside), newest first, as CSV: the
/// header ([`PAYMENT_COLUMNS`]), then one chunk per page of [`EXPORT_PAGE`] payments read
/// from `store` through the `(created_at, id)` cursor. A failed read ends the stream with its
/// `Err`.
pub fn payments_csv(
    store: Arc<dyn Store>,
    query: PaymentQuery,
) -> impl Stream<Item = Result<Bytes, ExportError>> + Send + 'static {
    let base = PaymentQuery {
        before: None,
        limit: EXPORT_PAGE,
        ..query
    };
    stream::try_unfold(Cursor::Start, move |at: Cursor<(Timestamp, PaymentId)>| {
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
            let bytes = chunk(
                first.then_some(&PAYMENT_COLUMNS),
                page.iter().map(payment_row),
            )?;
            Ok(Some((bytes, next)))
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
        let store: Arc<dyn Store> = Arc::new(MemoryStore::new());
        for i in 0..n {
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
                reason: Some(format!("=HYPERLINK(\"https://evil.example/{i}\")")),
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
        let (bytes, chunks, error) = drain(entries_csv(store, project(), from, to)).await;
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
        use payments_core::payment::{Flow, Metadata, PaymentMethod};
        use payments_core::testing::fixtures;
        let store: Arc<dyn Store> = Arc::new(MemoryStore::new());
        let t0 = 1_790_000_000_000;
        let n = EXPORT_PAGE * 2 + 30;
        for i in 0..n {
            let mut request = fixtures::request(&format!("-order-{i}"), "1500", PaymentMethod::Sbp);
            if i % 2 == 0 {
                request.metadata =
                    Metadata::from_json(&serde_json::json!({"n": i.to_string(), "f": "=1+2"}))
                        .expect("metadata");
            }
            let p = fixtures::payment(
                format!("00000000-0000-4000-8000-{:012}", i + 1)
                    .parse()
                    .expect("an id"),
                project(),
                &request,
                Flow::RuntimeLive,
                // Three payments a millisecond.
                Timestamp::from_unix_millis(t0 + (i / 3) as i64),
                Duration::from_secs(900),
            );
            store.insert_payment(&p).await.expect("inserted");
        }
        // Created from the 7th payment to before the last 8.
        let query = PaymentQuery {
            created_from: Some(Timestamp::from_unix_millis(t0 + 2)),
            created_to: Some(Timestamp::from_unix_millis(t0 + (n / 3) as i64 - 2)),
            ..PaymentQuery::new(project(), 50)
        };
        let (bytes, chunks, error) = drain(payments_csv(store, query)).await;
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
        let (bytes, chunks, error) = drain(entries_csv(failing(1), project(), from, to)).await;
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
        let response = download("x.csv", entries_csv(failing(1), project(), from, to))
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
        assert!(
            download("x.csv", entries_csv(failing(0), project(), from, to))
                .await
                .is_err()
        );
        // Without failures, the same export ends cleanly.
        let response = download("x.csv", entries_csv(failing(9), project(), from, to))
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
