//! The shared row conversions without a database: a record's values, read back through its
//! columns, give the record again, and a damaged row is refused, not half-read.

use std::collections::HashMap;

use payments_core::payment::Payment;
use payments_core::store::StoreError;
use payments_core::testing::strategies;
use payments_core::RandomSource;
use payments_store_sql::record::{payment_from_row, payment_values, PAYMENT_COLUMNS};
use payments_store_sql::sealing::{RequisiteSealing, SealWrites};
use payments_store_sql::{Cols, Dialect, SqlRow, SqlValue};
use proptest::prelude::*;

/// A row made of named values, read as the bundled stores read theirs: a value of another kind
/// than asked for is an error, as it is for a driver.
struct ValuesRow(HashMap<String, SqlValue>);

impl ValuesRow {
    fn of(columns: &[&str], values: Vec<SqlValue>) -> ValuesRow {
        assert_eq!(columns.len(), values.len(), "one value per column");
        ValuesRow(columns.iter().map(|c| c.to_string()).zip(values).collect())
    }

    fn get(&self, name: &str) -> Result<&SqlValue, StoreError> {
        self.0
            .get(name)
            .ok_or_else(|| StoreError::Corrupt(format!("no column {name}")))
    }
}

fn wrong(name: &str, v: &SqlValue) -> StoreError {
    StoreError::Corrupt(format!("{name}: {v:?} is of another type"))
}

impl SqlRow for ValuesRow {
    fn opt_text(&self, name: &str) -> Result<Option<String>, StoreError> {
        match self.get(name)? {
            SqlValue::Null => Ok(None),
            SqlValue::Text(s) => Ok(Some(s.clone())),
            v => Err(wrong(name, v)),
        }
    }

    fn opt_int(&self, name: &str) -> Result<Option<i64>, StoreError> {
        match self.get(name)? {
            SqlValue::Null => Ok(None),
            SqlValue::Int(n) => Ok(Some(*n)),
            v => Err(wrong(name, v)),
        }
    }

    fn opt_blob(&self, name: &str) -> Result<Option<Vec<u8>>, StoreError> {
        match self.get(name)? {
            SqlValue::Null => Ok(None),
            SqlValue::Blob(b) => Ok(Some(b.clone())),
            v => Err(wrong(name, v)),
        }
    }

    fn opt_flag(&self, name: &str) -> Result<Option<bool>, StoreError> {
        match self.get(name)? {
            SqlValue::Null => Ok(None),
            SqlValue::Flag(b) => Ok(Some(*b)),
            v => Err(wrong(name, v)),
        }
    }
}

fn read_payment(row: &ValuesRow) -> Result<Payment, StoreError> {
    payment_from_row(&Cols::new(row), &RequisiteSealing::new())
}

fn row_of(p: &Payment) -> ValuesRow {
    sealed_row_of(p, &RequisiteSealing::new())
}

fn sealed_row_of(p: &Payment, sealing: &RequisiteSealing) -> ValuesRow {
    ValuesRow::of(
        &PAYMENT_COLUMNS,
        payment_values(p, sealing)
            .expect("a payment encodes")
            .into(),
    )
}

/// Nonces from a counter: every seal differs.
#[derive(Default)]
struct Counter(std::sync::atomic::AtomicU64);

impl RandomSource for Counter {
    fn fill(&self, buf: &mut [u8]) {
        let n = self.0.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        for (i, b) in buf.iter_mut().enumerate() {
            *b = n.to_le_bytes()[i % 8];
        }
    }
}

fn sealing(key: u8) -> RequisiteSealing {
    let s = RequisiteSealing::new();
    let keys = payments_core::testing::sealing_keys(key, &[]);
    s.install(
        keys,
        std::sync::Arc::new(Counter::default()),
        SealWrites::Sealed,
    )
    .expect("installed once");
    s
}

/// The text of every value of a row.
fn texts(row: &ValuesRow) -> Vec<String> {
    row.0
        .values()
        .filter_map(|v| match v {
            SqlValue::Text(t) => Some(t.clone()),
            _ => None,
        })
        .collect()
}

proptest! {
    #[test]
    fn every_payment_reads_back_as_written(p in strategies::payment()) {
        prop_assert_eq!(read_payment(&row_of(&p)).expect("it decodes"), p.clone());
    }

    /// Sealed, a payment reads back the same through the same keys, and no stored text holds
    /// its requisite or holder name; through other keys (or none) it is refused as corrupt,
    /// never shown sealed.
    #[test]
    fn sealed_requisites_read_back_and_are_stored_in_no_text(p in strategies::payment()) {
        let keys = sealing(1);
        let row = sealed_row_of(&p, &keys);
        prop_assert_eq!(
            payment_from_row(&Cols::new(&row), &keys).expect("it decodes"),
            p.clone()
        );
        if let Some(r) = &p.requisites {
            for text in texts(&row) {
                prop_assert!(!text.contains(&r.requisite), "{} in {}", r.requisite, text);
                prop_assert!(!text.contains(&r.holder_name), "{} in {}", r.holder_name, text);
            }
            for other in [sealing(2), RequisiteSealing::new()] {
                prop_assert!(matches!(
                    payment_from_row(&Cols::new(&row), &other),
                    Err(StoreError::Corrupt(_))
                ));
            }
        }
    }

    #[test]
    fn a_pricing_half_stored_is_refused(p in strategies::payment(), drop_course in any::<bool>()) {
        let mut row = row_of(&p);
        let has_pricing = !matches!(row.0["course"], SqlValue::Null);
        let column = if drop_course { "course" } else { "fee_percent" };
        row.0.insert(column.to_string(), SqlValue::Null);
        let read = read_payment(&row);
        if has_pricing {
            prop_assert!(matches!(read, Err(StoreError::Corrupt(_))), "{column} alone: {read:?}");
        } else {
            prop_assert_eq!(read.expect("no pricing either way"), p);
        }
    }

    #[test]
    fn sqlite_placeholders_keep_everything_else(sql in "[ -~]{0,80}") {
        let pg = Dialect::Postgres.translate(&sql);
        prop_assert_eq!(&pg, &sql);
        let lite = Dialect::Sqlite.translate(&sql);
        prop_assert_eq!(lite.len(), sql.len());
        for (a, b) in sql.chars().zip(lite.chars()) {
            prop_assert!(a == b || (a == '$' && b == '?'));
        }
        // A `$` is changed exactly when a digit follows it.
        let dollars_before_digits = sql.as_bytes().windows(2)
            .filter(|w| w[0] == b'$' && w[1].is_ascii_digit()).count();
        let changed = sql.chars().zip(lite.chars()).filter(|(a, b)| a != b).count();
        prop_assert_eq!(changed, dollars_before_digits);
    }
}

#[test]
fn requisites_without_a_holder_and_a_failure_without_its_comment_are_refused() {
    let p = payments_core::testing::contract::full_payment(
        payments_core::testing::contract::payment_id(1),
        payments_core::testing::contract::project_id(1),
        "order-1",
    );
    let mut row = row_of(&p);
    row.0.insert("holder_name".into(), SqlValue::Null);
    assert!(matches!(read_payment(&row), Err(StoreError::Corrupt(m)) if m.contains("holder_name")));
    let mut row = row_of(&p);
    row.0.insert("error_comment".into(), SqlValue::Null);
    assert!(
        matches!(read_payment(&row), Err(StoreError::Corrupt(m)) if m.contains("error_comment"))
    );
    let mut row = row_of(&p);
    row.0.insert("status".into(), SqlValue::text("teleported"));
    assert!(matches!(read_payment(&row), Err(StoreError::Corrupt(m)) if m.contains("status")));
    assert_eq!(
        read_payment(&row_of(&p)).expect("the full payment decodes"),
        p
    );
}
