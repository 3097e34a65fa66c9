//! The pages of the cabinet's lists: a `WHERE` clause grown condition by condition, written
//! once for both engines.

use payments_cabinet::store::{AuditQuery, CabinetAuditRecord};
use payments_core::event::OutboxEvent;
use payments_core::payment::{merchant_payment_id_key, RequisiteNumber};
use payments_core::store::{EventQuery, PaymentQuery};
use payments_core::Timestamp;

use crate::codec::limit;
use crate::record::{Record, PAYMENT_COLUMNS};
use crate::sealing::RequisiteSealing;
use crate::sql::{list, Dialect};
use crate::value::SqlValue;

/// A statement grown piece by piece, its values numbered `$1, $2, ...` in the order added.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Conditions {
    sql: String,
    values: Vec<SqlValue>,
}

impl Conditions {
    /// A statement starting with `head` (no placeholders).
    pub fn new(head: impl Into<String>) -> Conditions {
        Conditions {
            sql: head.into(),
            values: Vec::new(),
        }
    }

    /// Appends `piece`, whose one `?` stands for `value`.
    pub fn add(&mut self, piece: &str, value: SqlValue) {
        self.values.push(value);
        self.sql
            .push_str(&piece.replacen('?', &format!("${}", self.values.len()), 1));
    }

    /// Appends `piece`, which holds no placeholder.
    pub fn push(&mut self, piece: &str) {
        self.sql.push_str(piece);
    }

    /// Appends "before `(time, id)`" in `(time_column, id_column)` order, as the engine's
    /// index range scan reads it best: a row-value comparison in PostgreSQL, the spelled-out
    /// comparison in SQLite.
    pub fn before(
        &mut self,
        dialect: Dialect,
        time_column: &str,
        id_column: &str,
        time: Timestamp,
        id: String,
    ) {
        self.beyond(dialect, '<', (time_column, id_column), time, id);
    }

    /// [`Conditions::before`] the other way: "after `(time, id)`", for a page in ascending
    /// order.
    pub fn after(
        &mut self,
        dialect: Dialect,
        time_column: &str,
        id_column: &str,
        time: Timestamp,
        id: String,
    ) {
        self.beyond(dialect, '>', (time_column, id_column), time, id);
    }

    /// "`(time_column, id_column)` `op` `(time, id)`", `op` being `<` or `>`.
    fn beyond(
        &mut self,
        dialect: Dialect,
        op: char,
        (time_column, id_column): (&str, &str),
        time: Timestamp,
        id: String,
    ) {
        match dialect {
            Dialect::Postgres => {
                self.add(
                    &format!(" AND ({time_column}, {id_column}) {op} (?"),
                    SqlValue::ts(time),
                );
                self.add(", ?)", SqlValue::Text(id));
            }
            Dialect::Sqlite => {
                // The first bound alone is what SQLite's planner turns into the index range
                // (it reads no range out of an OR): without it, a page deep in the list
                // scanned every newer row first (41 ms in the middle of 1,000,000 rows;
                // 0.24 ms with it).
                self.add(&format!(" AND {time_column} {op}= ?"), SqlValue::ts(time));
                self.add(&format!(" AND ({time_column} {op} ?"), SqlValue::ts(time));
                self.add(&format!(" OR {id_column} {op} ?)"), SqlValue::Text(id));
            }
        }
    }

    /// The statement for `dialect` and its values.
    pub fn finish(self, dialect: Dialect) -> (String, Vec<SqlValue>) {
        (dialect.translate(&self.sql), self.values)
    }
}

/// A merchant payment id prefix that matches at most this many of a project's payments is
/// read through the `(project_id, merchant_payment_id)` index (its matches sorted by time);
/// a broader one through the time order, skipping what does not match, from its newest match
/// ([`PrefixPlan`]). Neither engine's planner can tell which by itself: PostgreSQL estimates a
/// byte-order range on a column of another collation at 1 % of the rows whatever it is
/// (a prefix matching 1,000 of 1,000,000 payments, all old, took 260-400 ms scanning by
/// time; 0.5 ms through the id index), and SQLite always took the id index (sorting every
/// match of a prefix that matches them all).
pub const NARROW_PREFIX: u64 = 10_000;

/// How many of the newest payments before a page's start [`PrefixPlan`] reads to tell
/// whether a broad prefix's matches are among them.
pub const PREFIX_PROBE: u64 = 1_000;

/// How one branch of a [`PaymentQuery`] reads its merchant payment id prefix, as a
/// [`PrefixPlan`] decided.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PrefixRead {
    /// Through the time order from the page's start (a branch without a prefix; a broad
    /// prefix with matches among the newest [`PREFIX_PROBE`] payments).
    Time,
    /// Its matches first, through the id's index, then sorted (at most [`NARROW_PREFIX`]).
    Matches,
    /// Through the time order from its newest match before the page's start, created then.
    From(Timestamp),
    /// None: no payment before the page's start matches.
    Nothing,
}

/// What a [`PrefixPlan`] asks next.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Stage {
    /// How many payments each branch's prefix matches, up to [`NARROW_PREFIX`] + 1.
    Count,
    /// How many of the newest [`PREFIX_PROBE`] payments before the page's start each broad
    /// prefix matches.
    Probe,
    /// Each broad prefix's newest match before the page's start, where the probe found none.
    Newest,
    /// Nothing: decided.
    Done,
}

/// How each branch of a [`PaymentQuery`] ([`PaymentQuery::branches`]) reads its merchant
/// payment id prefix, decided by up to three questions to the database, each answered by one
/// row of integers (`NULL` for none): [`PrefixPlan::question`], then
/// [`PrefixPlan::answer`] until there is no question.
///
/// - A prefix matching at most [`NARROW_PREFIX`] payments is read through its matches
///   ([`PrefixRead::Matches`]).
/// - A broader one that matches some of the newest [`PREFIX_PROBE`] payments before the
///   page's start is read through the time order ([`PrefixRead::Time`]): its matches are
///   near.
/// - A broader one that matches none of them starts where its newest match is
///   ([`PrefixRead::From`]), found through the `(project_id, merchant_payment_id_key,
///   created_at)` index alone (schema 27): its cost is the prefix's matches read in that
///   index, never the newer payments that do not match (reading those took 2.2 s for a
///   prefix matching the oldest 100,000 of 5,000,000 payments).
///
/// A branch read through `payment_metadata` reads its prefix on the rows it reads
/// ([`PrefixRead::Time`]).
#[derive(Debug, Clone)]
pub struct PrefixPlan {
    branches: Vec<PaymentQuery>,
    reads: Vec<PrefixRead>,
    /// The branches the next question is about, in its columns' order.
    asked: Vec<usize>,
    stage: Stage,
}

impl PrefixPlan {
    /// The plan of `q`: every branch read through the time order until answers say otherwise.
    pub fn new(q: &PaymentQuery) -> PrefixPlan {
        let branches = q.branches();
        let asked: Vec<usize> = (0..branches.len())
            .filter(|&i| !through_metadata(&branches[i]) && Prefix::of(&branches[i]).is_some())
            .collect();
        PrefixPlan {
            reads: vec![PrefixRead::Time; branches.len()],
            stage: if asked.is_empty() {
                Stage::Done
            } else {
                Stage::Count
            },
            branches,
            asked,
        }
    }

    /// The next question for `dialect`: a statement answering one row, one integer column per
    /// branch asked about; `None` once the plan is decided.
    pub fn question(&self, dialect: Dialect) -> Option<(String, Vec<SqlValue>)> {
        if self.stage == Stage::Done {
            return None;
        }
        let mut w = Conditions::new("SELECT ");
        for (n, &i) in self.asked.iter().enumerate() {
            if n > 0 {
                w.push(", ");
            }
            let (b, prefix) = (&self.branches[i], Prefix::key_of(&self.branches[i]));
            match self.stage {
                Stage::Count => count_question(&mut w, b, dialect),
                Stage::Probe => probe_question(&mut w, b, dialect),
                Stage::Newest | Stage::Done => newest_question(&mut w, b, &prefix, dialect),
            }
        }
        Some(w.finish(dialect))
    }

    /// Takes the answer to [`PrefixPlan::question`]: one value per branch asked about.
    pub fn answer(&mut self, row: &[Option<i64>]) {
        debug_assert_eq!(row.len(), self.asked.len(), "one answer per branch asked");
        let answers = self.asked.iter().zip(row.iter().copied());
        let mut next = Vec::new();
        for (&i, value) in answers {
            match (self.stage, value) {
                (Stage::Count, Some(n)) if u64::try_from(n).is_ok_and(|n| n <= NARROW_PREFIX) => {
                    self.reads[i] = PrefixRead::Matches;
                }
                (Stage::Count, _) | (Stage::Probe, Some(0) | None) => next.push(i),
                (Stage::Probe, Some(_)) => self.reads[i] = PrefixRead::Time,
                (Stage::Newest, Some(t)) => {
                    self.reads[i] = PrefixRead::From(Timestamp::from_unix_millis(t));
                }
                (Stage::Newest, None) => self.reads[i] = PrefixRead::Nothing,
                (Stage::Done, _) => {}
            }
        }
        self.stage = match self.stage {
            _ if next.is_empty() => Stage::Done,
            Stage::Count => Stage::Probe,
            Stage::Probe => Stage::Newest,
            Stage::Newest | Stage::Done => Stage::Done,
        };
        self.asked = next;
    }

    /// How each branch reads its prefix: [`PrefixRead::Time`] for one without.
    pub fn reads(&self) -> &[PrefixRead] {
        &self.reads
    }
}

/// [`PrefixPlan`]'s first question about branch `b`: how many payments its prefix matches,
/// counted through its index up to [`NARROW_PREFIX`] + 1.
fn count_question(w: &mut Conditions, b: &PaymentQuery, dialect: Dialect) {
    w.push("(SELECT count(*) FROM (SELECT 1 FROM payments WHERE ");
    w.add("project_id = ?", SqlValue::display(b.project));
    if let Some(prefix) = Prefix::of(b) {
        prefix.add(w, dialect, true);
    }
    w.add(
        " LIMIT ?) matches)",
        SqlValue::Int(i64::try_from(NARROW_PREFIX + 1).unwrap_or(i64::MAX)),
    );
}

/// [`PrefixPlan`]'s second question about branch `b`: how many of the newest
/// [`PREFIX_PROBE`] payments before its page's start its prefix matches.
fn probe_question(w: &mut Conditions, b: &PaymentQuery, dialect: Dialect) {
    w.push(
        "(SELECT count(*) FROM (SELECT merchant_payment_id, merchant_payment_id_key \
         FROM payments WHERE ",
    );
    w.add("project_id = ?", SqlValue::display(b.project));
    page_window(w, b, dialect, ("created_at", "id"));
    w.add(
        " ORDER BY created_at DESC, id DESC LIMIT ?) probe WHERE 1 = 1",
        SqlValue::Int(i64::try_from(PREFIX_PROBE).unwrap_or(i64::MAX)),
    );
    if let Some(prefix) = Prefix::of(b) {
        prefix.add(w, dialect, true);
    }
    w.push(")");
}

/// [`PrefixPlan`]'s third question about branch `b`: the creation time of the newest payment
/// before its page's start whose id key starts with `prefix`, read from
/// `(project_id, merchant_payment_id_key, created_at)` alone (the time compared as `+ 0`, so
/// that neither engine reads it through the time's index instead). A payment whose id
/// matches the key's prefix but not a prefix as written is at least as new as the newest that
/// does: the time order from it finds every match.
fn newest_question(w: &mut Conditions, b: &PaymentQuery, prefix: &Prefix, dialect: Dialect) {
    w.push("(SELECT max(created_at + 0) FROM payments WHERE ");
    w.add("project_id = ?", SqlValue::display(b.project));
    prefix.add(w, dialect, true);
    if let Some(t) = b.created_from {
        w.add(" AND created_at + 0 >= ?", SqlValue::ts(t));
    }
    if let Some(t) = b.created_to {
        w.add(" AND created_at + 0 < ?", SqlValue::ts(t));
    }
    if let Some((t, _)) = b.before {
        w.add(" AND created_at + 0 <= ?", SqlValue::ts(t));
    }
    w.push(")");
}

/// Appends branch `b`'s page window on the `(time, id)` columns: its `created_from`,
/// `created_to` and cursor.
fn page_window(w: &mut Conditions, b: &PaymentQuery, dialect: Dialect, (time, id): (&str, &str)) {
    if let Some(t) = b.created_from {
        w.add(&format!(" AND {time} >= ?"), SqlValue::ts(t));
    }
    if let Some(t) = b.created_to {
        w.add(&format!(" AND {time} < ?"), SqlValue::ts(t));
    }
    if let Some((t, before)) = b.before {
        w.before(dialect, time, id, t, before.to_string());
    }
}

/// A branch's merchant payment id prefix, the one read through an index: its id key's
/// ([`PaymentQuery::merchant_payment_id_prefix_any_case`], through
/// `(project_id, merchant_payment_id_key)`) or else the id's as written (through
/// `(project_id, merchant_payment_id)`).
#[derive(Debug, Clone, PartialEq, Eq)]
struct Prefix {
    /// The column compared.
    column: &'static str,
    /// What it starts with.
    text: String,
}

impl Prefix {
    /// The prefix of `q` read through an index, if it has one.
    fn of(q: &PaymentQuery) -> Option<Prefix> {
        match (
            q.merchant_payment_id_prefix_any_case.as_deref(),
            q.merchant_payment_id_prefix.as_deref(),
        ) {
            (Some(p), _) => Some(Prefix {
                column: "merchant_payment_id_key",
                text: merchant_payment_id_key(p),
            }),
            (None, Some(p)) => Some(Prefix::as_written(p)),
            (None, None) => None,
        }
    }

    /// The prefix of `q`'s id key: its prefix in any case, or its key of a prefix as written
    /// (every id with that prefix has a key with this one).
    fn key_of(q: &PaymentQuery) -> Prefix {
        let p = q.merchant_payment_id_prefix_any_case.as_deref();
        let p = p.or(q.merchant_payment_id_prefix.as_deref()).unwrap_or("");
        Prefix {
            column: "merchant_payment_id_key",
            text: merchant_payment_id_key(p),
        }
    }

    /// The prefix of the id as written, `p`.
    fn as_written(p: &str) -> Prefix {
        Prefix {
            column: "merchant_payment_id",
            text: p.to_string(),
        }
    }

    /// Appends "the column starts with the text": a range in byte order, since every value
    /// with the prefix is at least the prefix and below the prefix followed by `~` (above
    /// every character an id may hold), and no other value is. SQLite compares text bytewise;
    /// PostgreSQL is told to (`COLLATE "C"`, the collation of the `payments_project_mpid` and
    /// `payments_project_mpid_key` indexes), whatever the database's collation. With `indexed`
    /// false, SQLite is kept off the column's index (`+`).
    fn add(&self, w: &mut Conditions, dialect: Dialect, indexed: bool) {
        let column = match (dialect, indexed) {
            (Dialect::Postgres, _) => format!("{} COLLATE \"C\"", self.column),
            (Dialect::Sqlite, true) => self.column.to_string(),
            (Dialect::Sqlite, false) => format!("+{}", self.column),
        };
        w.add(&format!(" AND {column} >= ?"), SqlValue::text(&self.text));
        w.add(
            &format!(" AND {column} < ?"),
            SqlValue::Text(format!("{}~", self.text)),
        );
    }
}

/// A page of a project's payments (see [`PaymentQuery`]), newest first by `(created_at, id)`,
/// every payment column selected. Read through the `(project_id, created_at, id)` index, or
/// `(project_id, status, created_at, id)`, `(project_id, payment_method, created_at, id)`,
/// `(project_id, flow, created_at, id)`, `(project_id, amount_key, created_at, id)` or
/// `(project_id, requisite_last4, created_at, id)` for a filter on those; with a metadata
/// filter, through `payment_metadata`'s key (the project's payments with that key and value,
/// newest first) or its value index (with that value under any key), each joined to its
/// payment; with a merchant payment id prefix, as `reads` says (one [`PrefixRead`] per branch,
/// from a [`PrefixPlan`]): its matches read first through `(project_id, merchant_payment_id)`
/// (or `(project_id, merchant_payment_id_key, created_at)` for a prefix in any case) and then
/// sorted, or the time order from the page's start or from the prefix's newest match.
///
/// With a [`union`](PaymentQuery::union), each branch is such a page of its own (its own
/// `ORDER BY ... LIMIT` on its own index), and the statement is their `UNION` (each payment
/// once) under the same order and limit: a few rows per branch are sorted, never all the
/// matches of a branch.
pub fn payment_page(
    q: &PaymentQuery,
    dialect: Dialect,
    reads: &[PrefixRead],
    sealing: &RequisiteSealing,
) -> (String, Vec<SqlValue>) {
    let read_at = |i: usize| reads.get(i).copied().unwrap_or(PrefixRead::Time);
    if q.union.is_empty() {
        let mut w = Conditions::new("");
        add_branch(&mut w, q, (dialect, sealing), read_at(0));
        return w.finish(dialect);
    }
    let columns = list(&PAYMENT_COLUMNS);
    let mut w = Conditions::new("");
    for (i, b) in q.branches().iter().enumerate() {
        if i > 0 {
            w.push(" UNION ");
        }
        w.push(&format!("SELECT {columns} FROM ("));
        add_branch(&mut w, b, (dialect, sealing), read_at(i));
        w.push(&format!(") b{i}"));
    }
    w.add(
        " ORDER BY created_at DESC, id DESC LIMIT ?",
        SqlValue::Int(limit(q.limit)),
    );
    w.finish(dialect)
}

/// The totals of the payments a [`payment_page`] of `q` finds (its every filter and its
/// `limit`: the newest `limit` at most), one row per day of creation (in a time zone
/// `offset_ms` east of UTC), status and currency, read as [`TOTALS_COLUMNS`]: the day, the
/// status, the currency, the count and the amounts' exact sum in three integer parts (the
/// whole units' billions and the rest, and the millionths: each part's sum stays far within
/// 64 bits for any page a totals read is allowed, where one sum of whole units might not).
/// The page is the statement's subquery, so the database reads the payments through the
/// page's index and only the groups leave it.
pub fn payment_totals(
    q: &PaymentQuery,
    (dialect, sealing): (Dialect, &RequisiteSealing),
    reads: &[PrefixRead],
    offset_ms: i64,
) -> (String, Vec<SqlValue>) {
    let (page, values) = payment_page(q, dialect, reads, sealing);
    // The amount's text as written (`100.50`): its whole units and its digits after the
    // point, padded to six.
    let (units, micros) = match dialect {
        Dialect::Sqlite => (
            "CAST(amount AS INTEGER)",
            "CAST(substr(substr(amount, instr(amount || '.', '.') + 1) || '000000', 1, 6) \
             AS INTEGER)",
        ),
        Dialect::Postgres => (
            "split_part(amount, '.', 1)::bigint",
            "rpad(split_part(amount, '.', 2), 6, '0')::bigint",
        ),
    };
    let sum = |e: &str| match dialect {
        Dialect::Sqlite => format!("SUM({e})"),
        Dialect::Postgres => format!("SUM({e})::bigint"),
    };
    let sql = format!(
        "SELECT (created_at + {offset_ms}) / {day} AS day, status, currency, \
         COUNT(*) AS count, {} AS billions, {} AS units, {} AS micros \
         FROM ({page}) page GROUP BY 1, 2, 3 ORDER BY 1, 2, 3",
        sum(&format!("{units} / 1000000000")),
        sum(&format!("{units} % 1000000000")),
        sum(micros),
        day = payments_core::totals::DAY_MS,
    );
    (sql, values)
}

/// The columns of a [`payment_totals`] row, in order.
pub const TOTALS_COLUMNS: [&str; 7] = [
    "day", "status", "currency", "count", "billions", "units", "micros",
];

/// One row of [`payment_totals`] from its columns' values (`count`, the three parts of the
/// sum), checked.
pub fn totals_row(
    day: i64,
    status: &str,
    currency: &str,
    count: i64,
    parts: [i64; 3],
) -> Result<payments_core::totals::TotalsRow, payments_core::store::StoreError> {
    use payments_core::store::StoreError;
    let corrupt = |what: &str| StoreError::Corrupt(format!("a payments total's {what}"));
    let status: payments_core::payment::PaymentStatus =
        status.parse().map_err(|_| corrupt("status"))?;
    let currency =
        payments_core::payment::Currency::parse(currency).ok_or_else(|| corrupt("currency"))?;
    let count = u64::try_from(count).map_err(|_| corrupt("count"))?;
    let [billions, units, micros] = parts.map(i128::from);
    let amount = payments_core::totals::Volume::from_micros(
        (billions * 1_000_000_000 + units) * 1_000_000 + micros,
    );
    Ok(payments_core::totals::TotalsRow {
        day,
        status,
        currency,
        count,
        amount,
    })
}

/// Appends one branch of [`payment_page`]: the page of `q`'s own filters (its union aside).
fn add_branch(
    w: &mut Conditions,
    q: &PaymentQuery,
    (dialect, sealing): (Dialect, &RequisiteSealing),
    read: PrefixRead,
) {
    payment_source(w, q, dialect, read);
    // Through the metadata table, the time and id it orders by are its copies of the
    // payment's, so that its key serves the order and the time bounds.
    let (time, id) = if through_metadata(q) {
        ("m.payment_created_at", "m.payment_id")
    } else {
        ("created_at", "id")
    };
    if let Some(status) = q.status {
        w.add(" AND status = ?", SqlValue::text(status.as_str()));
    }
    if let Some(m) = &q.merchant_payment_id {
        w.add(" AND merchant_payment_id = ?", SqlValue::text(m.as_str()));
    }
    if let (Some(_), Some(p)) = (
        &q.merchant_payment_id_prefix_any_case,
        &q.merchant_payment_id_prefix,
    ) {
        // Both prefixes: the source reads the key's; this one is checked on what it reads.
        Prefix::as_written(p).add(w, dialect, false);
    }
    if let Some(m) = q.payment_method {
        w.add(" AND payment_method = ?", SqlValue::text(m.as_str()));
    }
    if let Some(f) = q.flow {
        w.add(" AND flow = ?", SqlValue::text(f.as_str()));
    }
    if let Some(a) = q.amount {
        // One value of `(project_id, amount_key, created_at, id)`: its matches in the order
        // of the page (schema 23; the key is the amount's shortest text, whatever the scale
        // it was written with).
        w.add(" AND amount_key = ?", SqlValue::Text(a.normalized()));
    }
    if let Some(l) = &q.requisite_last4 {
        // Through `(project_id, requisite_last4, created_at, id)`; a payment written before
        // schema 16 has none until `payments-server payment backfill-last4` fills it in.
        w.add(" AND requisite_last4 = ?", SqlValue::text(l));
    }
    if let Some(n) = &q.requisite_number {
        add_requisite_number(w, n, sealing);
    }
    page_window(w, q, dialect, (time, id));
    w.add(
        &format!(" ORDER BY {time} DESC, {id} DESC LIMIT ?"),
        SqlValue::Int(limit(q.limit)),
    );
}

/// Appends "the requisite is card number `n`": its last four digits, through
/// `(project_id, requisite_last4, created_at, id)`, and, while keys are installed, its keyed
/// digest under one of them (schema 25, [`RequisiteSealing::digests`]). A payment whose
/// digest none of the installed keys made (none stored: written before schema 25 or while no
/// key was installed; or a key since dropped) cannot be checked and is matched by its last
/// four digits alone, as before; without keys every payment is.
fn add_requisite_number(w: &mut Conditions, n: &RequisiteNumber, sealing: &RequisiteSealing) {
    w.add(" AND requisite_last4 = ?", SqlValue::Text(n.last4()));
    let digests = sealing.digests(n);
    if digests.is_empty() {
        return;
    }
    let mut list = |head: &str, values: Vec<String>| {
        for (i, v) in values.into_iter().enumerate() {
            w.add(if i == 0 { head } else { ", ?" }, SqlValue::Text(v));
        }
        w.push(")");
    };
    let (ids, digests): (Vec<String>, Vec<String>) = digests.into_iter().unzip();
    list(
        " AND (requisite_digest IS NULL OR requisite_digest IN (?",
        digests,
    );
    list(
        " OR substr(requisite_digest, 1, 9) NOT IN (?",
        ids.into_iter().map(|id| format!("{id}.")).collect(),
    );
    w.push(")");
}

/// Whether a branch reads through `payment_metadata` (`m`): with a metadata filter, by key
/// and value or by value alone.
fn through_metadata(q: &PaymentQuery) -> bool {
    q.metadata.is_some() || q.metadata_value.is_some()
}

/// The head of a branch of [`payment_page`]: the project's payments; with a metadata filter,
/// [`metadata_source`]; or, with a merchant payment id prefix, as `read` says: its matches
/// read first through its index ([`Prefix`]), or the time order from its newest match.
fn payment_source(w: &mut Conditions, q: &PaymentQuery, dialect: Dialect, read: PrefixRead) {
    let columns = list(&PAYMENT_COLUMNS);
    let project = || SqlValue::display(q.project);
    let prefix = Prefix::of(q);
    if through_metadata(q) {
        metadata_source(w, q);
        if let Some(prefix) = prefix {
            prefix.add(w, dialect, false);
        }
        return;
    }
    match prefix {
        Some(prefix) if read == PrefixRead::Matches => {
            w.push(&format!(
                "WITH matches AS MATERIALIZED (SELECT {columns} FROM payments WHERE "
            ));
            w.add("project_id = ?", project());
            prefix.add(w, dialect, true);
            w.add(
                &format!(") SELECT {columns} FROM matches WHERE project_id = ?"),
                project(),
            );
        }
        prefix => {
            w.push(&format!("SELECT {columns} FROM payments WHERE "));
            w.add("project_id = ?", project());
            if let Some(prefix) = prefix {
                prefix.add(w, dialect, false);
            }
            match read {
                PrefixRead::From(t) => w.add(" AND created_at <= ?", SqlValue::ts(t)),
                PrefixRead::Nothing => w.push(" AND 1 = 0"),
                PrefixRead::Time | PrefixRead::Matches => {}
            }
        }
    }
}

/// The head of a branch with a metadata filter: the rows of `payment_metadata` of the
/// project with the key and value (its primary key), or with the value under any key
/// (`payment_metadata_value`, schema 25: only the row of the smallest such key of each
/// payment, so each payment once), each joined to its payment (`m` read first: SQLite keeps
/// a `CROSS JOIN`'s order). With both, the value under any key is checked on each row read.
fn metadata_source(w: &mut Conditions, q: &PaymentQuery) {
    let columns: Vec<String> = PAYMENT_COLUMNS.iter().map(|c| format!("p.{c}")).collect();
    w.push(&format!(
        "SELECT {} FROM payment_metadata m CROSS JOIN payments p WHERE ",
        columns.join(", ")
    ));
    w.add("m.project_id = ?", SqlValue::display(q.project));
    let same_payment = "v.project_id = m.project_id AND v.payment_created_at = \
                        m.payment_created_at AND v.payment_id = m.payment_id";
    match (&q.metadata, &q.metadata_value) {
        (Some((key, value)), any_key) => {
            w.add(" AND m.meta_key = ?", SqlValue::text(key));
            w.add(" AND m.meta_value = ?", SqlValue::text(value));
            if let Some(v) = any_key {
                w.add(
                    &format!(
                        " AND EXISTS (SELECT 1 FROM payment_metadata v WHERE {same_payment} \
                         AND v.meta_value = ?)"
                    ),
                    SqlValue::text(v),
                );
            }
        }
        (None, Some(v)) => {
            w.add(" AND m.meta_value = ?", SqlValue::text(v));
            w.push(&format!(
                " AND NOT EXISTS (SELECT 1 FROM payment_metadata v WHERE {same_payment} \
                 AND v.meta_value = m.meta_value AND v.meta_key < m.meta_key)"
            ));
        }
        (None, None) => {}
    }
    w.push(" AND p.id = m.payment_id");
}

/// A page of a project's events (see [`EventQuery`]), newest first by
/// `(created_at, event_id)` through the `(project_id, created_at, event_id)` index; the
/// columns of [`OutboxEvent`] selected.
pub fn event_page(q: &EventQuery, dialect: Dialect) -> (String, Vec<SqlValue>) {
    let mut w = Conditions::new(format!(
        "SELECT {} FROM outbox_events WHERE ",
        list(OutboxEvent::COLUMNS)
    ));
    w.add("project_id = ?", SqlValue::display(q.project));
    if let Some(state) = q.state {
        w.add(" AND state = ?", SqlValue::text(state.as_str()));
    }
    if let Some(p) = q.payment {
        w.add(" AND payment_id = ?", SqlValue::display(p));
    }
    if let Some(e) = q.event {
        w.add(" AND event_id = ?", SqlValue::display(e));
    }
    if let Some(t) = q.created_from {
        w.add(" AND created_at >= ?", SqlValue::ts(t));
    }
    if let Some(t) = q.created_to {
        w.add(" AND created_at < ?", SqlValue::ts(t));
    }
    if let Some((t, id)) = q.before {
        w.before(dialect, "created_at", "event_id", t, id.to_string());
    }
    w.add(
        " ORDER BY created_at DESC, event_id DESC LIMIT ?",
        SqlValue::Int(limit(q.limit)),
    );
    w.finish(dialect)
}

/// A page of the cabinet audit log (see [`AuditQuery`]), newest first by `seq`: through the
/// `(merchant_id, seq)` index for a merchant's page, the primary key otherwise. Selects `seq`
/// and the columns of [`CabinetAuditRecord`], one row past the limit (whether there is a
/// next page: [`AuditPage::of`](payments_cabinet::store::AuditPage::of)).
pub fn audit_page(q: &AuditQuery, dialect: Dialect) -> (String, Vec<SqlValue>) {
    let mut w = Conditions::new(format!(
        "SELECT seq, {} FROM cabinet_audit WHERE ",
        list(CabinetAuditRecord::COLUMNS)
    ));
    w.add(
        "seq < ?",
        SqlValue::Int(
            q.before
                .map_or(i64::MAX, |c| i64::try_from(c.0).unwrap_or(i64::MAX)),
        ),
    );
    if let Some(m) = q.merchant {
        w.add(" AND merchant_id = ?", SqlValue::display(m));
    }
    if let Some(success) = q.success {
        w.add(" AND success = ?", SqlValue::flag(success));
    }
    if let Some(email) = &q.email {
        w.add(" AND email = ?", SqlValue::text(email.as_str()));
    }
    if let Some(action) = &q.action {
        w.add(" AND (action = ?", SqlValue::text(action.as_str()));
        let escaped = action
            .replace('\\', "\\\\")
            .replace('%', "\\%")
            .replace('_', "\\_");
        w.add(
            " OR action LIKE ? ESCAPE '\\')",
            SqlValue::Text(format!("{escaped}.%")),
        );
    }
    w.add(
        " ORDER BY seq DESC LIMIT ?",
        SqlValue::Int(limit(q.limit.saturating_add(1))),
    );
    w.finish(dialect)
}
