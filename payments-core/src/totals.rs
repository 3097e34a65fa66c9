//! Totals of payments: how many a project's payments are and how much they come to, by the
//! day they were created, their status and their currency — what the cabinet's home page
//! shows for today, 7 and 30 days and what a filtered list shows under its page.
//!
//! A store sums the payments a [`PaymentQuery`](crate::store::PaymentQuery) finds
//! ([`PaymentStore::payment_totals`](crate::store::PaymentStore::payment_totals)), the newest
//! `limit` of them at most: the sum of a filter that finds more is marked incomplete
//! ([`PaymentTotals::complete`]) instead of reading without end. Amounts are summed exactly,
//! in millionths ([`Volume`]), whatever their count: no float ever holds money here.

use std::collections::BTreeMap;
use std::fmt;

use crate::amount::{Amount, MAX_SCALE};
use crate::payment::{Currency, Payment, PaymentStatus};
use crate::Timestamp;

/// Milliseconds in a day.
pub const DAY_MS: i64 = 86_400_000;

/// The payments a totals read sums at most: the newest of a filter (about 0.3 s of a
/// database's reading at the most; docs/performance.md).
pub const TOTALS_SCAN: usize = 200_000;

/// An exact sum of amounts, in millionths of the currency unit (an [`Amount`]'s smallest
/// step). Written with two decimals at least, more only where the sum has them
/// (`1990.00`, `0.125`).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, PartialOrd, Ord)]
pub struct Volume(i128);

impl Volume {
    /// No money.
    pub const ZERO: Volume = Volume(0);

    /// A sum of `micros` millionths.
    pub const fn from_micros(micros: i128) -> Volume {
        Volume(micros)
    }

    /// One amount.
    pub fn of(amount: &Amount) -> Volume {
        Volume(amount.micros())
    }

    /// Its millionths.
    pub const fn micros(self) -> i128 {
        self.0
    }

    /// The whole units and the millionths beyond them (`1990.5` is `(1990, 500_000)`).
    pub fn parts(self) -> (i128, u32) {
        let unit = 10i128.pow(MAX_SCALE);
        let frac = u32::try_from(self.0.rem_euclid(unit)).expect("below 10^6");
        (self.0.div_euclid(unit), frac)
    }

    /// The fraction's digits: two at least, up to six where the sum has them (`"50"`,
    /// `"125"`).
    pub fn fraction_digits(self) -> String {
        let (_, frac) = self.parts();
        let mut digits = format!("{frac:06}");
        while digits.len() > 2 && digits.ends_with('0') {
            digits.pop();
        }
        digits
    }
}

impl std::ops::Add for Volume {
    type Output = Volume;

    fn add(self, other: Volume) -> Volume {
        Volume(self.0 + other.0)
    }
}

impl std::ops::AddAssign for Volume {
    fn add_assign(&mut self, other: Volume) {
        self.0 += other.0;
    }
}

impl fmt::Display for Volume {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}.{}", self.parts().0, self.fraction_digits())
    }
}

/// The day a moment falls on, counted from 1970-01-01, in a time zone `offset_ms` east of
/// UTC.
pub fn day_of(at: Timestamp, offset_ms: i64) -> i64 {
    (at.unix_millis() + offset_ms).div_euclid(DAY_MS)
}

/// The moment a day starts, in a time zone `offset_ms` east of UTC ([`day_of`]'s inverse).
pub fn day_start(day: i64, offset_ms: i64) -> Timestamp {
    Timestamp::from_unix_millis(day * DAY_MS - offset_ms)
}

/// The days an [`Overview`] covers: today and the 29 before it.
pub const OVERVIEW_DAYS: i64 = 30;

/// A business's recent days at a glance: today, the last 7 and the last 30 days (each
/// counting today), and each of the 30 days.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Overview {
    /// Today (the day of `now` in the overview's time zone).
    pub today: i64,
    /// Today's payments.
    pub day: Summary,
    /// The last 7 days'.
    pub week: Summary,
    /// The last [`OVERVIEW_DAYS`] days'.
    pub month: Summary,
    /// Each of the last [`OVERVIEW_DAYS`] days, oldest first.
    pub daily: Vec<(i64, Summary)>,
    /// Whether every payment of the 30 days was summed (see [`PaymentTotals::complete`]).
    pub complete: bool,
}

impl Overview {
    /// The moment the overview's first day starts: what a totals read for it reads from.
    pub fn since(now: Timestamp, offset_ms: i64) -> Timestamp {
        day_start(day_of(now, offset_ms) - (OVERVIEW_DAYS - 1), offset_ms)
    }

    /// The overview of `totals` (read from [`Overview::since`]) on the day of `now`.
    pub fn of(totals: &PaymentTotals, now: Timestamp) -> Overview {
        let today = day_of(now, totals.offset_ms);
        let month = totals.summary(today - (OVERVIEW_DAYS - 1), today);
        debug_assert!(month.created >= totals.summary(today - 6, today).created);
        Overview {
            today,
            day: totals.summary(today, today),
            week: totals.summary(today - 6, today),
            month,
            daily: totals.daily(today - (OVERVIEW_DAYS - 1), today),
            complete: totals.complete,
        }
    }
}

/// One group of a totals read: the payments created on one day with one status and currency.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TotalsRow {
    /// The day they were created on ([`day_of`] in the read's time zone).
    pub day: i64,
    /// Their status now.
    pub status: PaymentStatus,
    /// Their currency.
    pub currency: Currency,
    /// How many.
    pub count: u64,
    /// Their amounts, summed.
    pub amount: Volume,
}

/// What a window of days holds: counts by outcome and the completed volume by currency.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Summary {
    /// Every payment created.
    pub created: u64,
    /// Those completed (paid and confirmed).
    pub completed: u64,
    /// Those that ended without payment: canceled (expired, canceled, not confirmed).
    pub canceled: u64,
    /// Those that failed to get requisites (`error`).
    pub failed: u64,
    /// Those still open: created, processing or under appeal.
    pub open: u64,
    /// The completed payments' amounts, by currency.
    pub volume: BTreeMap<Currency, Volume>,
}

impl Summary {
    /// Completed over created, in thousandths rounded down (`None` when nothing was
    /// created).
    pub fn conversion_permille(&self) -> Option<u64> {
        (self.created > 0).then(|| self.completed * 1000 / self.created)
    }

    fn add(&mut self, row: &TotalsRow) {
        self.created += row.count;
        match row.status {
            PaymentStatus::Completed => {
                self.completed += row.count;
                *self.volume.entry(row.currency).or_default() += row.amount;
            }
            PaymentStatus::Canceled => self.canceled += row.count,
            PaymentStatus::Error => self.failed += row.count,
            PaymentStatus::Created | PaymentStatus::Processing | PaymentStatus::Appeal => {
                self.open += row.count
            }
        }
        debug_assert_eq!(
            self.created,
            self.completed + self.canceled + self.failed + self.open
        );
    }
}

/// A totals read's answer: its groups, in the time zone they were read in.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PaymentTotals {
    /// The groups, by day, status and currency.
    pub rows: Vec<TotalsRow>,
    /// The read's time zone, milliseconds east of UTC.
    pub offset_ms: i64,
    /// Whether every payment the filter finds was summed; `false` when it found more than
    /// the read's limit and the oldest were left out.
    pub complete: bool,
}

impl PaymentTotals {
    /// The totals of `payments` (what a store without a summing statement of its own reads),
    /// `complete` as the caller knows.
    pub fn of<'a>(
        payments: impl IntoIterator<Item = &'a Payment>,
        offset_ms: i64,
        complete: bool,
    ) -> PaymentTotals {
        let mut groups: BTreeMap<(i64, &'static str, Currency), (PaymentStatus, u64, Volume)> =
            BTreeMap::new();
        for p in payments {
            let key = (
                day_of(p.created_at, offset_ms),
                p.status.as_str(),
                p.currency,
            );
            let group = groups.entry(key).or_insert((p.status, 0, Volume::ZERO));
            group.1 += 1;
            group.2 += Volume::of(&p.amount);
        }
        let rows = groups
            .into_iter()
            .map(|((day, _, currency), (status, count, amount))| TotalsRow {
                day,
                status,
                currency,
                count,
                amount,
            })
            .collect();
        PaymentTotals {
            rows,
            offset_ms,
            complete,
        }
    }

    /// No payments: complete, and nothing in it.
    pub fn empty(offset_ms: i64) -> PaymentTotals {
        PaymentTotals {
            rows: Vec::new(),
            offset_ms,
            complete: true,
        }
    }

    /// The totals of groups a store summed (in any order) from the newest `limit` payments
    /// of a filter: sorted as [`PaymentTotals::of`] sorts them, and complete when they
    /// count fewer than `limit`.
    pub fn from_rows(mut rows: Vec<TotalsRow>, offset_ms: i64, limit: usize) -> PaymentTotals {
        rows.sort_by(|a, b| {
            (a.day, a.status.as_str(), a.currency).cmp(&(b.day, b.status.as_str(), b.currency))
        });
        let counted: u64 = rows.iter().map(|r| r.count).sum();
        PaymentTotals {
            rows,
            offset_ms,
            complete: usize::try_from(counted).is_ok_and(|n| n < limit),
        }
    }

    /// These totals and `other`'s (read in the same time zone) as one: the groups of both,
    /// those of the same day, status and currency added; complete when both are.
    pub fn merge(self, other: PaymentTotals) -> PaymentTotals {
        debug_assert_eq!(self.offset_ms, other.offset_ms, "one time zone");
        let mut groups: BTreeMap<(i64, &'static str, Currency), TotalsRow> = BTreeMap::new();
        for row in self.rows.into_iter().chain(other.rows) {
            let key = (row.day, row.status.as_str(), row.currency);
            match groups.get_mut(&key) {
                Some(group) => {
                    group.count += row.count;
                    group.amount += row.amount;
                }
                None => {
                    groups.insert(key, row);
                }
            }
        }
        PaymentTotals {
            rows: groups.into_values().collect(),
            offset_ms: self.offset_ms,
            complete: self.complete && other.complete,
        }
    }

    /// The payments counted.
    pub fn count(&self) -> u64 {
        self.rows.iter().map(|r| r.count).sum()
    }

    /// The summary of the days `from..=to`.
    pub fn summary(&self, from: i64, to: i64) -> Summary {
        let mut s = Summary::default();
        for row in self.rows.iter().filter(|r| (from..=to).contains(&r.day)) {
            s.add(row);
        }
        s
    }

    /// The summary of every day.
    pub fn all(&self) -> Summary {
        self.summary(i64::MIN, i64::MAX)
    }

    /// One summary per day of `from..=to`, oldest first (a day without payments is empty).
    pub fn daily(&self, from: i64, to: i64) -> Vec<(i64, Summary)> {
        (from..=to).map(|d| (d, self.summary(d, d))).collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_volume_is_written_exactly_with_two_decimals_at_least() {
        let v = |s: &str| Volume::of(&Amount::parse(s).expect("an amount"));
        assert_eq!(v("1990").to_string(), "1990.00");
        assert_eq!((v("0.1") + v("0.2")).to_string(), "0.30");
        assert_eq!((v("0.125") + v("1")).to_string(), "1.125");
        assert_eq!(v("0.000001").to_string(), "0.000001");
        let big = v("999999999999999999.999999");
        let mut sum = Volume::ZERO;
        for _ in 0..1_000 {
            sum += big;
        }
        assert_eq!(sum.to_string(), "999999999999999999999.999");
    }

    #[test]
    fn days_follow_the_time_zone() {
        // 2026-12-03T22:30Z is the 4th in Moscow (UTC+3) and the 3rd in UTC.
        let at = Timestamp::from_unix_millis(1_796_337_000_000);
        let utc = day_of(at, 0);
        assert_eq!(day_of(at, 3 * 3_600_000), utc + 1);
        assert_eq!(day_start(utc, 0).unix_millis() % DAY_MS, 0);
        assert!(day_start(utc, 0) <= at && at < day_start(utc + 1, 0));
        let msk = 3 * 3_600_000;
        assert!(day_start(utc + 1, msk) <= at && at < day_start(utc + 2, msk));
    }
}
