//! The merchant API's request log (table `request_log_writes`, migration 28), written once for
//! both engines ([`payments_core::request_log`] decides what is logged and what the summary
//! says; the stores only keep it).
//!
//! A write of the log keeps each project's requests in it as one row: a JSON array of the
//! requests (`Stored`, in the order given), with the oldest and newest `at` among them. A
//! logged request so costs the single writer no row and no index entry of its own: one write
//! of 1,000 requests is one row, where it was 1,000 rows, 2,000 index entries and the 1,000
//! deletes that kept the project at its bound. A request's id is its row's id times
//! [`ROW_ENTRIES`] plus its place in the row, so ids grow in the order written.
//!
//! The bound is kept a write at a time: a write keeps a project's newest `keep` requests of
//! its own, and [`TRIM`] then deletes the project's rows that hold only requests beyond its
//! newest `keep` (rows ordered by their newest request). [`PURGE`] deletes the rows whose
//! newest request is older than its time. A page ([`page`], [`Page`]) reads the project's
//! rows newest first through `(project_id, newest_at, id)` and stops once no further row can
//! hold a request of the page.

use payments_core::request_log::{RequestLogEntry, RequestLogQuery, SignatureDiagnosis};
use payments_core::store::StoreError;
use payments_core::{ProjectId, Timestamp};

use crate::codec::{self, corrupt};
use crate::listing::Conditions;
use crate::sql::{Dialect, Sql};
use crate::value::SqlValue;

/// The requests one row holds at most: a larger write of a project takes several rows.
pub const ROW_ENTRIES: usize = 4_096;

/// A request as its row's array keeps it: `[at, method, path, status, error_code, request_id,
/// latency_us, source, merchant_payment_id, payment_id, clock_skew_ms, diagnosis, message]`
/// (migration 28 writes the old rows in this order too). The project and the id are the row's.
type Stored = (
    i64,
    String,
    String,
    u16,
    Option<String>,
    String,
    u64,
    String,
    Option<String>,
    Option<String>,
    Option<i64>,
    Option<String>,
    Option<String>,
);

/// [`Stored`], borrowed from an entry to encode it.
type Encoded<'e> = (
    i64,
    &'e str,
    &'e str,
    u16,
    Option<&'e str>,
    &'e str,
    u64,
    &'e str,
    Option<&'e str>,
    Option<String>,
    Option<i64>,
    Option<String>,
    Option<&'e str>,
);

fn encoded(e: &RequestLogEntry) -> Encoded<'_> {
    (
        e.at.unix_millis(),
        &e.method,
        &e.path,
        e.status,
        e.error_code.as_deref(),
        &e.request_id,
        e.latency_us,
        &e.source,
        e.merchant_payment_id.as_deref(),
        e.payment_id.map(|p| p.to_string()),
        e.clock_skew_ms,
        e.diagnosis.as_ref().map(SignatureDiagnosis::to_json),
        e.message.as_deref(),
    )
}

fn decoded(project_id: ProjectId, id: u64, s: Stored) -> Result<RequestLogEntry, StoreError> {
    let (at, method, path, status, error_code, request_id, latency_us, source) =
        (s.0, s.1, s.2, s.3, s.4, s.5, s.6, s.7);
    let payment_id =
        s.9.map(|p| p.parse().map_err(|_| corrupt("request log payment id", p)))
            .transpose()?;
    let diagnosis =
        s.11.map(|d| SignatureDiagnosis::from_json(&d).ok_or_else(|| corrupt("diagnosis", d)))
            .transpose()?;
    Ok(RequestLogEntry {
        id,
        project_id,
        at: Timestamp::from_unix_millis(at),
        method,
        path,
        status,
        error_code,
        request_id,
        latency_us,
        source,
        merchant_payment_id: s.8,
        payment_id,
        clock_skew_ms: s.10,
        diagnosis,
        message: s.12,
    })
}

/// One write of the log: [`INSERT`]'s values for each row and [`TRIM`]'s for each project.
#[derive(Debug, Clone)]
pub struct Write {
    /// For each project in the entries (in the order they first appear), its newest `keep` by
    /// `(at, place)` in the order given, [`ROW_ENTRIES`] a row.
    pub rows: Vec<Vec<SqlValue>>,
    /// Each project's trim.
    pub trims: Vec<Vec<SqlValue>>,
}

/// The write of `entries` keeping `keep` per project.
pub fn write(entries: &[RequestLogEntry], keep: usize) -> Result<Write, StoreError> {
    let mut projects: Vec<(ProjectId, Vec<&RequestLogEntry>)> = Vec::new();
    let mut place = std::collections::HashMap::new();
    for e in entries {
        let i = *place.entry(e.project_id).or_insert_with(|| {
            projects.push((e.project_id, Vec::new()));
            projects.len() - 1
        });
        projects[i].1.push(e);
    }
    let mut w = Write {
        rows: Vec::new(),
        trims: Vec::with_capacity(projects.len()),
    };
    for (project, mut mine) in projects {
        newest(&mut mine, keep);
        for chunk in mine.chunks(ROW_ENTRIES) {
            w.rows.push(row(project, chunk)?);
        }
        w.trims.push(trim_values(project, keep));
    }
    Ok(w)
}

/// Keeps the newest `keep` of `mine` by `(at, place)`, in their order.
fn newest(mine: &mut Vec<&RequestLogEntry>, keep: usize) {
    if mine.len() <= keep {
        return;
    }
    let mut order: Vec<(Timestamp, usize)> =
        mine.iter().enumerate().map(|(i, e)| (e.at, i)).collect();
    order.sort_unstable_by(|a, b| b.cmp(a));
    let cut = order.get(keep).copied();
    let mut place = 0;
    mine.retain(|e| {
        place += 1;
        cut.is_none_or(|c| (e.at, place - 1) > c)
    });
    debug_assert_eq!(mine.len(), keep, "the newest keep are kept");
}

/// One row's values: the project, the newest and oldest `at`, the count and the array.
fn row(project: ProjectId, chunk: &[&RequestLogEntry]) -> Result<Vec<SqlValue>, StoreError> {
    debug_assert!(chunk.len() <= ROW_ENTRIES);
    let (Some(newest), Some(oldest)) = (
        chunk.iter().map(|e| e.at).max(),
        chunk.iter().map(|e| e.at).min(),
    ) else {
        return Err(corrupt("request log write", "no requests"));
    };
    let stored: Vec<Encoded<'_>> = chunk.iter().map(|e| encoded(e)).collect();
    let body = serde_json::to_string(&stored).map_err(|e| corrupt("request log write", e))?;
    Ok(vec![
        SqlValue::display(project),
        SqlValue::ts(newest),
        SqlValue::ts(oldest),
        SqlValue::uint(chunk.len() as u64, "request log write size")?,
        SqlValue::text(body),
    ])
}

/// Appends one row of a write: [`Write::rows`].
pub static INSERT: Sql = Sql::new(|_| {
    "INSERT INTO request_log_writes (project_id, newest_at, oldest_at, entries, body) \
     VALUES ($1, $2, $3, $4, $5)"
        .to_string()
});

/// Deletes project `$1`'s rows behind at least `$2` of its requests: its rows, newest first by
/// their newest request, after the one that reaches `$2`. On PostgreSQL it skips the rows
/// another transaction holds (a trim or [`PURGE`] on another node deleting them): two writes
/// that trim the same projects in different orders would otherwise each wait for the other's
/// row locks (a deadlock, and the write aborted with its requests). A row skipped stays, should
/// that transaction roll back, until the project's next write trims it or [`PURGE`] takes
/// it by age.
pub static TRIM: Sql = Sql::new(|d| {
    format!(
        "DELETE FROM request_log_writes WHERE id IN (SELECT id FROM request_log_writes \
         WHERE id IN (SELECT id FROM (SELECT id, \
         sum(entries) OVER (ORDER BY newest_at DESC, id DESC) - entries AS newer \
         FROM request_log_writes WHERE project_id = $1) AS w WHERE newer >= $2){})",
        d.skip_locked()
    )
});

/// The values of [`TRIM`] for `project` keeping `keep`.
pub fn trim_values(project: ProjectId, keep: usize) -> Vec<SqlValue> {
    vec![
        SqlValue::display(project),
        SqlValue::Int(codec::limit(keep)),
    ]
}

/// Deletes at most `$2` rows (of any project) whose newest request arrived before `$1`,
/// oldest first, answering each one's count of requests; on PostgreSQL it skips the rows a
/// [`TRIM`] or another node's purge holds, as [`TRIM`] does.
pub static PURGE: Sql = Sql::new(|d| {
    format!(
        "DELETE FROM request_log_writes WHERE id IN (SELECT id FROM request_log_writes \
         WHERE newest_at < $1 ORDER BY newest_at, id LIMIT $2{}) RETURNING entries",
        d.skip_locked()
    )
});

/// The rows that may hold requests of a page of `q`, newest first by their newest request,
/// through the `(project_id, newest_at, id)` index: [`Page`] reads them.
pub fn page(q: &RequestLogQuery, dialect: Dialect) -> (String, Vec<SqlValue>) {
    let mut w = Conditions::new("SELECT id, newest_at, body FROM request_log_writes WHERE ");
    w.add("project_id = ?", SqlValue::display(q.project));
    if let Some(since) = q.since {
        w.add(" AND newest_at >= ?", SqlValue::ts(since));
    }
    if let Some((at, _)) = q.before {
        w.add(" AND oldest_at <= ?", SqlValue::ts(at));
    }
    w.push(" ORDER BY newest_at DESC, id DESC");
    w.finish(dialect)
}

/// A page of a project's requests read from its rows newest first ([`page`]): each row's
/// requests that the query admits, until the page is full and the next row's newest request
/// is older than the page's last (no row after it can hold one of the page).
#[derive(Debug)]
pub struct Page<'q> {
    query: &'q RequestLogQuery,
    found: Vec<RequestLogEntry>,
    done: bool,
}

impl<'q> Page<'q> {
    /// An empty page of `query`.
    pub fn new(query: &'q RequestLogQuery) -> Page<'q> {
        Page {
            query,
            found: Vec::new(),
            done: query.limit == 0,
        }
    }

    /// Reads the next row: its id, its newest request's time and its array.
    pub fn read(&mut self, id: u64, newest: Timestamp, body: &str) -> Result<(), StoreError> {
        if self.done || self.full_before(newest) {
            self.done = true;
            return Ok(());
        }
        let stored: Vec<Stored> =
            serde_json::from_str(body).map_err(|e| corrupt("request log write", e))?;
        let first = id
            .checked_mul(ROW_ENTRIES as u64)
            .ok_or_else(|| corrupt("request log write id", id))?;
        for (place, s) in stored.into_iter().enumerate() {
            let entry = decoded(self.query.project, first + place as u64, s)?;
            if self.query.admits(&entry) {
                self.found.push(entry);
            }
        }
        // Ordered only once the page could be full: rows of one request each are read as
        // they come, then ordered once.
        if self.found.len() >= self.query.limit {
            self.order();
        }
        Ok(())
    }

    /// Newest first by `(at, id)`, at most the page's size.
    fn order(&mut self) {
        self.found
            .sort_unstable_by_key(|e| std::cmp::Reverse((e.at, e.id)));
        self.found.truncate(self.query.limit);
    }

    /// Whether the page is full (and so ordered) with requests all at or after `newest` (a
    /// row whose newest request is older holds none of the page; one as old may hold a later
    /// id).
    fn full_before(&self, newest: Timestamp) -> bool {
        self.found.len() >= self.query.limit && self.found.last().is_some_and(|e| newest < e.at)
    }

    /// The page, newest first by `(at, id)`.
    pub fn finish(mut self) -> Vec<RequestLogEntry> {
        self.order();
        self.found
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use payments_core::request_log::StatusFilter;

    fn project() -> ProjectId {
        "00000000-0000-4000-8000-000000000001".parse().unwrap()
    }

    fn entry(at: i64, status: u16) -> RequestLogEntry {
        RequestLogEntry {
            id: 0,
            project_id: project(),
            at: Timestamp::from_unix_millis(at),
            method: "POST".into(),
            path: "/api/v1/payments".into(),
            status,
            error_code: (status >= 400).then(|| "bad_request".into()),
            request_id: format!("r{at}"),
            latency_us: 7,
            source: "203.0.113.7".into(),
            merchant_payment_id: None,
            payment_id: None,
            clock_skew_ms: Some(-3),
            diagnosis: None,
            message: None,
        }
    }

    fn body(values: &[SqlValue]) -> &str {
        match &values[4] {
            SqlValue::Text(t) => t,
            v => panic!("{v:?}"),
        }
    }

    #[test]
    fn a_page_reads_the_index_newest_first_from_its_cursor() {
        let q = RequestLogQuery {
            status: Some(StatusFilter::Class(4)),
            before: Some((Timestamp::from_unix_millis(5), 7)),
            since: Some(Timestamp::from_unix_millis(1)),
            ..RequestLogQuery::new(project(), 10)
        };
        let (sql, values) = page(&q, Dialect::Postgres);
        assert!(
            sql.ends_with(
                "FROM request_log_writes WHERE project_id = $1 AND newest_at >= $2 \
                 AND oldest_at <= $3 ORDER BY newest_at DESC, id DESC"
            ),
            "{sql}"
        );
        assert_eq!(values.len(), 3);
    }

    /// A write keeps a project's newest `keep` in the order given, one row per project, and
    /// reads back as written with ids in that order.
    #[test]
    fn a_write_is_a_row_per_project_that_reads_back_as_written() {
        let mut other = entry(9, 200);
        other.project_id = "00000000-0000-4000-8000-000000000002".parse().unwrap();
        let log = [
            entry(5, 201),
            other,
            entry(1, 401),
            entry(4, 500),
            entry(3, 200),
        ];
        let rows = write(&log, 3).unwrap().rows;
        assert_eq!(rows.len(), 2, "one row per project");
        assert_eq!(rows[0][1], SqlValue::ts(Timestamp::from_unix_millis(5)));
        assert_eq!(rows[0][2], SqlValue::ts(Timestamp::from_unix_millis(3)));
        assert_eq!(
            rows[0][3],
            SqlValue::Int(3),
            "the oldest (at 1) is not kept"
        );
        let q = RequestLogQuery::new(project(), 10);
        let mut page = Page::new(&q);
        page.read(2, Timestamp::from_unix_millis(5), body(&rows[0]))
            .unwrap();
        let found = page.finish();
        let want = [&log[0], &log[3], &log[4]];
        assert_eq!(found.len(), 3);
        for (f, w) in found.iter().zip(want) {
            assert_eq!(RequestLogEntry { id: 0, ..f.clone() }, *w);
        }
        assert_eq!(
            found.iter().map(|e| e.id).collect::<Vec<_>>(),
            [2 * 4_096, 2 * 4_096 + 1, 2 * 4_096 + 2],
            "ids by place in the row"
        );
    }

    /// A slow request noted in a later write interleaves with an earlier one's: the page reads
    /// on while a row may hold one of its requests, and stops at the first that cannot.
    #[test]
    fn a_page_reads_rows_until_none_can_hold_its_requests() {
        let late = write(&[entry(10, 200), entry(4, 200)], 10).unwrap().rows;
        let early = write(&[entry(6, 200), entry(5, 200)], 10).unwrap().rows;
        let q = RequestLogQuery::new(project(), 2);
        let mut page = Page::new(&q);
        page.read(3, Timestamp::from_unix_millis(10), body(&late[0]))
            .unwrap();
        // Full with 10 and 4, but the next row's newest (6) is newer than 4: read on.
        page.read(2, Timestamp::from_unix_millis(6), body(&early[0]))
            .unwrap();
        // Full with 10 and 6: a row whose newest is 2 cannot hold one of them.
        page.read(1, Timestamp::from_unix_millis(2), "not even JSON")
            .expect("a row past the page is not read");
        let at: Vec<_> = page.finish().iter().map(|e| e.at.unix_millis()).collect();
        assert_eq!(at, [10, 6]);
        // A corrupt row the page needs is an error, not a silent gap.
        let mut page = Page::new(&q);
        assert!(matches!(
            page.read(1, Timestamp::from_unix_millis(2), "[[1]]"),
            Err(StoreError::Corrupt(_))
        ));
    }

    #[test]
    fn a_large_write_takes_several_rows() {
        let log: Vec<_> = (0..ROW_ENTRIES as i64 + 1).map(|t| entry(t, 200)).collect();
        let rows = write(&log, usize::MAX).unwrap().rows;
        assert_eq!(rows.len(), 2);
        assert_eq!(rows[1][3], SqlValue::Int(1));
    }
}
