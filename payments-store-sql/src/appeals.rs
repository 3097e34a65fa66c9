//! Payment appeals and their receipts (migration 22, tables `appeals` and `appeal_receipts`),
//! written once for both engines ([`payments_core::appeal`] decides what an appeal may do; the
//! stores only keep it).
//!
//! An appeal is a row of `appeals`; its receipt infos (kind, size, SHA-256) are a JSON list in
//! its `receipts` column, and each receipt's bytes a row of `appeal_receipts`, sealed like
//! requisites ([`RequisiteSealing::seal_receipt`]: bound to the appeal and the receipt's index).
//!
//! Uniqueness is the database's: the project's idempotency key (`appeals_project_key`; NULL
//! keys never meet) and one active appeal per payment (`appeals_active_payment`, a partial
//! unique index on the payment of appeals in an active state). [`insert`] reads first and
//! answers what it finds; two inserts that both passed the reads (PostgreSQL: concurrent
//! transactions on any nodes) meet on those indexes, where the second one's `ON CONFLICT DO
//! NOTHING` waits for the first and writes nothing, and it reads again and answers the first.
//! A change is [`UPDATE`], at the expected version (a step of a transaction, each engine's
//! `Transaction::update_appeal`).

use payments_core::appeal::{
    Appeal, AppealInsert, AppealOrder, AppealQuery, AppealReason, AppealSource, AppealState,
    ReceiptInfo, MAX_APPEALS_PER_SOURCE,
};
use payments_core::ids::{AppealId, PaymentId, ProjectId};
use payments_core::provider::ProviderName;
use payments_core::receipt::{Receipt, ReceiptKind};
use payments_core::store::{StoreError, UnavailableCause};
use serde::{Deserialize, Serialize};

use crate::codec::{self, corrupt};
use crate::listing::Conditions;
use crate::record::Record;
use crate::row::Cols;
use crate::runtime::{execute, query, record, Conn};
use crate::sealing::RequisiteSealing;
use crate::sql::{insert as insert_sql, list, select, Dialect, Sql};
use crate::value::SqlValue;

impl Record for Appeal {
    const COLUMNS: &'static [&'static str] = &[
        "id",
        "project_id",
        "payment_id",
        "source",
        "idempotency_key",
        "fingerprint",
        "reason",
        "claimed_amount",
        "paid_at",
        "payer_bank",
        "receipts",
        "state",
        "deadline",
        "provider",
        "resolved_amount",
        "decided_by",
        "note",
        "created_at",
        "updated_at",
        "version",
    ];

    fn from_row(c: &Cols<'_>) -> Result<Self, StoreError> {
        let opt_amount = |name: &str| {
            c.opt_text(name)?
                .map(|s| payments_core::amount::Amount::parse(&s).map_err(|_| corrupt(name, s)))
                .transpose()
        };
        Ok(Appeal {
            id: c.parsed("id")?,
            project_id: c.parsed("project_id")?,
            payment_id: c.parsed("payment_id")?,
            source: c.with("source", AppealSource::parse)?,
            idempotency_key: c.opt_text("idempotency_key")?,
            fingerprint: c.text("fingerprint")?,
            reason: c.with("reason", AppealReason::parse)?,
            claimed_amount: opt_amount("claimed_amount")?,
            paid_at: c.opt_ts("paid_at")?,
            payer_bank: c.opt_text("payer_bank")?,
            receipts: parse_receipts(&c.text("receipts")?)?,
            state: c.with("state", AppealState::parse)?,
            deadline: c.ts("deadline")?,
            provider: c
                .opt_text("provider")?
                .map(|p| ProviderName::parse(&p).map_err(|e| corrupt("provider", e)))
                .transpose()?,
            resolved_amount: opt_amount("resolved_amount")?,
            decided_by: c.opt_text("decided_by")?,
            note: c.opt_text("note")?,
            created_at: c.ts("created_at")?,
            updated_at: c.ts("updated_at")?,
            version: c.num("version")?,
        })
    }

    fn values(&self) -> Result<Vec<SqlValue>, StoreError> {
        Ok(vec![
            SqlValue::display(self.id),
            SqlValue::display(self.project_id),
            SqlValue::display(self.payment_id),
            SqlValue::text(self.source.as_str()),
            SqlValue::opt_text(self.idempotency_key.as_deref()),
            SqlValue::text(self.fingerprint.as_str()),
            SqlValue::text(self.reason.as_str()),
            // Decimal text keeps the scale as received, as the payments' amounts.
            SqlValue::opt_display(self.claimed_amount),
            SqlValue::opt_ts(self.paid_at),
            SqlValue::opt_text(self.payer_bank.as_deref()),
            SqlValue::Text(receipts_json(&self.receipts)),
            SqlValue::text(self.state.as_str()),
            SqlValue::ts(self.deadline),
            SqlValue::opt_text(self.provider.as_ref().map(|p| p.as_str())),
            SqlValue::opt_display(self.resolved_amount),
            SqlValue::opt_text(self.decided_by.as_deref()),
            SqlValue::opt_text(self.note.as_deref()),
            SqlValue::ts(self.created_at),
            SqlValue::ts(self.updated_at),
            SqlValue::uint(self.version, "appeal version")?,
        ])
    }
}

/// The appeal columns fixed at creation: [`UPDATE`] matches them instead of setting them, so a
/// change that would alter one is refused ([`StoreError::Conflict`]) rather than dropped.
pub const APPEAL_FIXED: [&str; 11] = [
    "project_id",
    "payment_id",
    "source",
    "idempotency_key",
    "fingerprint",
    "reason",
    "claimed_amount",
    "paid_at",
    "payer_bank",
    "receipts",
    "created_at",
];

/// One receipt info as the `receipts` column keeps it.
#[derive(Serialize, Deserialize)]
struct ReceiptDoc {
    kind: String,
    size: u32,
    sha256: String,
}

/// The receipt infos as stored JSON: `[{"kind": "png", "size": 70000, "sha256": "…"}]`.
pub fn receipts_json(receipts: &[ReceiptInfo]) -> String {
    let docs: Vec<ReceiptDoc> = receipts
        .iter()
        .map(|r| ReceiptDoc {
            kind: r.kind.as_str().to_string(),
            size: r.size,
            sha256: r.sha256.clone(),
        })
        .collect();
    serde_json::to_string(&docs).expect("a list of plain structs always serialises")
}

/// The receipt infos of [`receipts_json`].
pub fn parse_receipts(text: &str) -> Result<Vec<ReceiptInfo>, StoreError> {
    let docs: Vec<ReceiptDoc> =
        serde_json::from_str(text).map_err(|_| corrupt("receipts", text))?;
    docs.into_iter()
        .map(|d| {
            Ok(ReceiptInfo {
                kind: ReceiptKind::parse(&d.kind)
                    .ok_or_else(|| corrupt("receipt kind", &d.kind))?,
                size: d.size,
                sha256: d.sha256,
            })
        })
        .collect()
}

/// The active states as an SQL list: `'open', 'under_review'` (what the partial indexes of
/// migration 22 spell out).
fn active_states() -> String {
    AppealState::ALL
        .iter()
        .filter(|s| s.is_active())
        .map(|s| format!("'{}'", s.as_str()))
        .collect::<Vec<_>>()
        .join(", ")
}

/// An appeal by id (`$1`).
pub static APPEAL: Sql = Sql::new(|_| select(Appeal::COLUMNS, "appeals", "WHERE id = $1"));

/// Project `$1`'s appeal under idempotency key `$2`.
pub static APPEAL_BY_KEY: Sql = Sql::new(|_| {
    select(
        Appeal::COLUMNS,
        "appeals",
        "WHERE project_id = $1 AND idempotency_key = $2",
    )
});

/// Payment `$1`'s active appeal, through the partial unique index `appeals_active_payment`.
pub static ACTIVE_APPEAL: Sql = Sql::new(|_| {
    select(
        Appeal::COLUMNS,
        "appeals",
        &format!("WHERE payment_id = $1 AND state IN ({})", active_states()),
    )
});

/// How many appeals payment `$1` has from source `$2` (`n`).
pub static APPEALS_FROM_SOURCE: Sql = Sql::new(|_| {
    "SELECT count(*) AS n FROM appeals WHERE payment_id = $1 AND source = $2".to_string()
});

/// Inserts an appeal ([`Appeal::values`](Record::values)) unless a unique key of `appeals`
/// is taken (its id, its project's key, its payment's active place): then nothing, and no row
/// changed. On PostgreSQL a conflicting insert not yet committed is waited for.
pub static APPEAL_INSERT: Sql = Sql::new(|_| {
    format!(
        "{} ON CONFLICT DO NOTHING",
        insert_sql("appeals", Appeal::COLUMNS)
    )
});

/// The columns of `appeal_receipts`, in [`receipt_rows`] order.
pub const RECEIPT_COLUMNS: [&str; 4] = ["appeal_id", "idx", "kind", "content"];

/// Inserts a receipt: a row of [`receipt_rows`].
pub static RECEIPT_INSERT: Sql = Sql::new(|_| insert_sql("appeal_receipts", &RECEIPT_COLUMNS));

/// Appeal `$1`'s receipt number `$2`: `kind`, `content` (as stored).
pub static RECEIPT: Sql = Sql::new(|_| {
    select(
        &RECEIPT_COLUMNS[2..],
        "appeal_receipts",
        "WHERE appeal_id = $1 AND idx = $2",
    )
});

/// Writes an appeal's changing columns, only at the expected version (the last parameter) and
/// only if the columns fixed at creation ([`APPEAL_FIXED`]) are unchanged; no row changed is
/// [`StoreError::Conflict`]. Parameters: [`update_values`].
pub static UPDATE: Sql = Sql::new(|d| {
    let (mut sets, mut same) = (Vec::new(), Vec::new());
    for (i, col) in Appeal::COLUMNS.iter().enumerate().skip(1) {
        if APPEAL_FIXED.contains(col) {
            same.push(format!(" AND {col} {} ${}", d.is_same(), i + 1));
        } else {
            sets.push(format!("{col} = ${}", i + 1));
        }
    }
    format!(
        "UPDATE appeals SET {} WHERE id = $1 AND version = ${}{}",
        sets.join(", "),
        Appeal::COLUMNS.len() + 1,
        same.concat()
    )
});

/// The parameters of [`UPDATE`]: the appeal's values, then the expected version.
pub fn update_values(appeal: &Appeal, expected_version: u64) -> Result<Vec<SqlValue>, StoreError> {
    let mut values = appeal.values()?;
    values.push(SqlValue::uint(expected_version, "appeal version")?);
    Ok(values)
}

/// The rows of [`RECEIPT_INSERT`] for `receipts` of `appeal`, in order, each one's content as
/// `sealing` keeps it.
pub fn receipt_rows(
    appeal: AppealId,
    receipts: &[Receipt],
    sealing: &RequisiteSealing,
) -> Result<Vec<Vec<SqlValue>>, StoreError> {
    receipts
        .iter()
        .enumerate()
        .map(|(i, r)| {
            let index = u8::try_from(i).map_err(|_| corrupt("receipt index", i))?;
            Ok(vec![
                SqlValue::display(appeal),
                SqlValue::Int(i64::from(index)),
                SqlValue::text(r.kind().as_str()),
                SqlValue::Blob(sealing.seal_receipt(appeal, index, r.bytes())?),
            ])
        })
        .collect()
}

/// A row of [`RECEIPT`], its content as stored (sealed or not).
pub fn stored_receipt(c: &Cols<'_>) -> Result<(ReceiptKind, Vec<u8>), StoreError> {
    Ok((c.with("kind", ReceiptKind::parse)?, c.blob("content")?))
}

/// A page of appeals as [`AppealQuery::matches`] says, in the query's order by
/// `(created_at, id)`: through `(project_id, created_at, id)` for a project's,
/// `appeals_payment` for a payment's, `(state, created_at, id)` or the partial deadline index
/// for the rest.
pub fn page(q: &AppealQuery, dialect: Dialect) -> (String, Vec<SqlValue>) {
    let mut w = Conditions::new(format!(
        "SELECT {} FROM appeals WHERE TRUE",
        list(Appeal::COLUMNS)
    ));
    if let Some(p) = q.project {
        w.add(" AND project_id = ?", SqlValue::display(p));
    }
    if let Some(p) = q.payment {
        w.add(" AND payment_id = ?", SqlValue::display(p));
    }
    for (i, state) in q.states.iter().enumerate() {
        let piece = if i == 0 { " AND state IN (?" } else { ", ?" };
        w.add(piece, SqlValue::text(state.as_str()));
    }
    if !q.states.is_empty() {
        w.push(")");
    }
    if let Some(by) = q.deadline_by {
        w.push(&format!(" AND state IN ({})", active_states()));
        w.add(" AND deadline <= ?", SqlValue::ts(by));
    }
    let order = match (q.order, q.after) {
        (AppealOrder::NewestFirst, after) => {
            if let Some((t, id)) = after {
                w.before(dialect, "created_at", "id", t, id.to_string());
            }
            "DESC"
        }
        (AppealOrder::OldestFirst, after) => {
            if let Some((t, id)) = after {
                w.after(dialect, "created_at", "id", t, id.to_string());
            }
            "ASC"
        }
    };
    w.add(
        &format!(" ORDER BY created_at {order}, id {order} LIMIT ?"),
        SqlValue::Int(codec::limit(q.limit)),
    );
    w.finish(dialect)
}

/// How many times [`insert`] reads again after its insert met another appeal's key, before it
/// gives up ([`UnavailableCause::Locked`]): each round follows a concurrent insert that
/// committed and was then decided, so a second is already rare.
const INSERT_ROUNDS: usize = 3;

/// [`AppealStore::insert_appeal`](payments_core::store::AppealStore::insert_appeal) as steps of
/// one transaction: the project's appeal under the key ([`AppealInsert::Existing`]), the
/// payment's active appeal ([`AppealInsert::Active`]), the bound per source
/// ([`AppealInsert::Full`]), then the insert ([`APPEAL_INSERT`], `values`) and its receipts
/// (`receipts`: [`receipt_rows`]). An insert that meets a concurrent one on a unique index
/// writes nothing, and the reads run again: they find the winner.
pub async fn insert(
    c: &dyn Conn,
    appeal: &Appeal,
    values: Vec<SqlValue>,
    receipts: Vec<Vec<SqlValue>>,
) -> Result<AppealInsert, StoreError> {
    for _ in 0..INSERT_ROUNDS {
        if let Some(found) = taken(c, appeal).await? {
            return Ok(found);
        }
        if execute(c, &APPEAL_INSERT, values.clone()).await? == 1 {
            for row in receipts {
                execute(c, &RECEIPT_INSERT, row).await?;
            }
            return Ok(AppealInsert::Inserted);
        }
        if record::<Appeal>(c, &APPEAL, vec![SqlValue::display(appeal.id)])
            .await?
            .is_some()
        {
            return Err(StoreError::Duplicate(format!("appeal {}", appeal.id)));
        }
    }
    Err(UnavailableCause::Locked.error(format_args!(
        "concurrent appeals of payment {} kept taking its place",
        appeal.payment_id
    )))
}

/// What stops `appeal` from being inserted now, if anything: an appeal under its key, the
/// payment's active appeal, or the bound of its source.
async fn taken(c: &dyn Conn, appeal: &Appeal) -> Result<Option<AppealInsert>, StoreError> {
    if let Some(key) = &appeal.idempotency_key {
        if let Some(existing) = by_key(c, appeal.project_id, key).await? {
            return Ok(Some(AppealInsert::Existing(existing)));
        }
    }
    let payment = vec![SqlValue::display(appeal.payment_id)];
    if let Some(active) = record(c, &ACTIVE_APPEAL, payment).await? {
        return Ok(Some(AppealInsert::Active(active)));
    }
    if from_source(c, appeal.payment_id, appeal.source).await? >= MAX_APPEALS_PER_SOURCE {
        return Ok(Some(AppealInsert::Full));
    }
    Ok(None)
}

async fn by_key(c: &dyn Conn, project: ProjectId, key: &str) -> Result<Option<Appeal>, StoreError> {
    let values = vec![SqlValue::display(project), SqlValue::text(key)];
    record(c, &APPEAL_BY_KEY, values).await
}

async fn from_source(
    c: &dyn Conn,
    payment: PaymentId,
    source: AppealSource,
) -> Result<u32, StoreError> {
    fn count(c: &Cols<'_>) -> Result<u32, StoreError> {
        c.num("n")
    }
    let values = vec![SqlValue::display(payment), SqlValue::text(source.as_str())];
    let text = APPEALS_FROM_SOURCE.text(c.dialect());
    Ok(query(c, text, values, count).await?.pop().unwrap_or(0))
}

#[cfg(test)]
mod tests {
    use super::*;
    use payments_core::Timestamp;

    #[test]
    fn the_update_sets_what_changes_and_matches_what_is_fixed() {
        let text = UPDATE.text(Dialect::Postgres);
        assert!(
            text.starts_with(
                "UPDATE appeals SET state = $12, deadline = $13, provider = $14, \
                 resolved_amount = $15, decided_by = $16, note = $17, updated_at = $19, \
                 version = $20 WHERE id = $1 AND version = $21 AND project_id IS NOT DISTINCT \
                 FROM $2"
            ),
            "{text}"
        );
        for col in APPEAL_FIXED {
            assert!(
                text.contains(&format!(" AND {col} IS NOT DISTINCT FROM $")),
                "{col}"
            );
            assert!(!text.contains(&format!("{col} = $")), "{col} is never set");
        }
        assert!(UPDATE.text(Dialect::Sqlite).contains("AND receipts IS ?11"));
    }

    #[test]
    fn a_page_reads_its_filters_then_the_cursor_in_its_order() {
        let appeal = AppealId::from_uuid(uuid::Uuid::from_u128(7));
        let q = AppealQuery {
            states: vec![AppealState::Open, AppealState::Accepted],
            deadline_by: Some(Timestamp::from_unix_millis(9)),
            after: Some((Timestamp::from_unix_millis(5), appeal)),
            order: AppealOrder::OldestFirst,
            ..AppealQuery::newest(10)
        };
        let (sql, values) = page(&q, Dialect::Postgres);
        assert!(
            sql.ends_with(
                "WHERE TRUE AND state IN ($1, $2) AND state IN ('open', 'under_review') \
                 AND deadline <= $3 AND (created_at, id) > ($4, $5) \
                 ORDER BY created_at ASC, id ASC LIMIT $6"
            ),
            "{sql}"
        );
        assert_eq!(values.len(), 6);
        let (sql, _) = page(
            &AppealQuery {
                order: AppealOrder::NewestFirst,
                ..q
            },
            Dialect::Sqlite,
        );
        assert!(
            sql.ends_with(
                "AND created_at <= ?4 AND (created_at < ?5 OR id < ?6) \
                 ORDER BY created_at DESC, id DESC LIMIT ?7"
            ),
            "{sql}"
        );
    }

    #[test]
    fn receipt_infos_round_trip_and_damage_is_corrupt() {
        let infos = vec![
            ReceiptInfo {
                kind: ReceiptKind::Png,
                size: 70_000,
                sha256: "ab".repeat(32),
            },
            ReceiptInfo {
                kind: ReceiptKind::Pdf,
                size: 3,
                sha256: "cd".repeat(32),
            },
        ];
        let text = receipts_json(&infos);
        assert_eq!(parse_receipts(&text).unwrap(), infos);
        assert_eq!(parse_receipts("[]").unwrap(), Vec::new());
        assert!(matches!(
            parse_receipts(r#"[{"kind":"gif","size":1,"sha256":""}]"#),
            Err(StoreError::Corrupt(_))
        ));
        assert!(matches!(parse_receipts("{"), Err(StoreError::Corrupt(_))));
    }
}
