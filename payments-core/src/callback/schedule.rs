//! The delivery schedule as pure data: when each attempt of an event is due.
//!
//! An event is attempted at once, then after each delay of its [`RetrySchedule`] (by default
//! 30 s and 60 s more: three attempts over about 90 s); after the last failure delivery stops.
//! A manual resend by support has a single attempt ([`RetrySchedule::single`]). The adapter
//! stores the time of each attempt, so the timers survive restarts.

use std::fmt;
use std::time::Duration;

use crate::Timestamp;

/// The time limit of one attempt (connect, send and response).
pub const ATTEMPT_TIMEOUT: Duration = Duration::from_secs(10);

/// How many bytes of a receiver's response body are read, at most.
pub const RESPONSE_READ_LIMIT: usize = 4096;

/// The most delays [`RetrySchedule::parse_delays`] accepts.
pub const MAX_DELAYS: usize = 10;

/// The longest single delay [`RetrySchedule::parse_delays`] accepts.
pub const MAX_DELAY: Duration = Duration::from_secs(24 * 60 * 60);

/// Why a `PAYMENTS_CALLBACK_RETRY_DELAYS` value was refused.
#[non_exhaustive]
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum RetryDelaysError {
    /// Nothing given.
    #[error("PAYMENTS_CALLBACK_RETRY_DELAYS is empty; give comma-separated seconds such as 30,60")]
    Empty,
    /// An item is not a whole number of seconds.
    #[error(
        "PAYMENTS_CALLBACK_RETRY_DELAYS item {position} ({item:?}) is not a whole number of seconds"
    )]
    NotSeconds {
        /// 1-based position of the item.
        position: usize,
        /// The item as given.
        item: String,
    },
    /// An item longer than [`MAX_DELAY`].
    #[error(
        "PAYMENTS_CALLBACK_RETRY_DELAYS item {position} ({seconds} s) is longer than {max} s",
        max = MAX_DELAY.as_secs()
    )]
    TooLong {
        /// 1-based position of the item.
        position: usize,
        /// The delay given, seconds.
        seconds: u64,
    },
    /// More than [`MAX_DELAYS`] items.
    #[error("PAYMENTS_CALLBACK_RETRY_DELAYS has {count} delays; at most {MAX_DELAYS} are allowed")]
    TooMany {
        /// How many were given.
        count: usize,
    },
}

/// The delays between the attempts of one event: attempt 1 at once, attempt `n + 1` after
/// `delays[n - 1]` from attempt `n`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RetrySchedule {
    /// The delay before each retry, counted from the previous attempt.
    pub delays: Vec<Duration>,
}

impl Default for RetrySchedule {
    /// The spec's schedule: at once, after 30 s, after 60 s more.
    fn default() -> Self {
        RetrySchedule {
            delays: vec![Duration::from_secs(30), Duration::from_secs(60)],
        }
    }
}

impl RetrySchedule {
    /// One attempt and no retry: a manual resend by support.
    pub fn single() -> RetrySchedule {
        RetrySchedule { delays: Vec::new() }
    }

    /// Parses the `PAYMENTS_CALLBACK_RETRY_DELAYS` setting: comma-separated whole seconds,
    /// spaces allowed around each, e.g. `30,60` (the default) or `1, 2` for tests. Each delay is
    /// at most [`MAX_DELAY`], at most [`MAX_DELAYS`] are given, and an empty value is refused
    /// rather than taken as "no retries".
    pub fn parse_delays(s: &str) -> Result<RetrySchedule, RetryDelaysError> {
        if s.trim().is_empty() {
            return Err(RetryDelaysError::Empty);
        }
        let items: Vec<&str> = s.split(',').map(str::trim).collect();
        if items.len() > MAX_DELAYS {
            return Err(RetryDelaysError::TooMany { count: items.len() });
        }
        let mut delays = Vec::with_capacity(items.len());
        for (index, item) in items.into_iter().enumerate() {
            let position = index + 1;
            let not_seconds = || RetryDelaysError::NotSeconds {
                position,
                item: item.to_owned(),
            };
            if item.is_empty() || !item.bytes().all(|b| b.is_ascii_digit()) {
                return Err(not_seconds());
            }
            let seconds: u64 = item.parse().map_err(|_| not_seconds())?;
            let delay = Duration::from_secs(seconds);
            if delay > MAX_DELAY {
                return Err(RetryDelaysError::TooLong { position, seconds });
            }
            delays.push(delay);
        }
        Ok(RetrySchedule { delays })
    }

    /// How many attempts an event gets: one plus one per delay.
    pub fn max_attempts(&self) -> u32 {
        u32::try_from(self.delays.len()).map_or(u32::MAX, |retries| retries.saturating_add(1))
    }

    /// When the next attempt is due after `attempts_made` attempts, the last of them at
    /// `last_attempt_at`; `None` once every attempt was made. With no attempt made yet the
    /// first is due at once, i.e. at `last_attempt_at` (pass the time the event was queued).
    #[must_use]
    pub fn next_attempt_at(
        &self,
        attempts_made: u32,
        last_attempt_at: Timestamp,
    ) -> Option<Timestamp> {
        let Some(retry) = attempts_made.checked_sub(1) else {
            return Some(last_attempt_at);
        };
        let index = usize::try_from(retry).ok()?;
        self.delays.get(index).map(|delay| last_attempt_at + *delay)
    }
}

impl fmt::Display for RetrySchedule {
    /// The setting's own form, e.g. `30,60`.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let secs: Vec<String> = self
            .delays
            .iter()
            .map(|d| d.as_secs().to_string())
            .collect();
        f.write_str(&secs.join(","))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn default_attempts_at_once_then_after_30_and_60_more_seconds() {
        let schedule = RetrySchedule::default();
        assert_eq!(schedule.max_attempts(), 3);
        let t = Timestamp::from_unix_secs(1_700_000_000);
        assert_eq!(schedule.next_attempt_at(0, t), Some(t));
        let second = schedule.next_attempt_at(1, t).expect("a second attempt");
        assert_eq!(second, Timestamp::from_unix_secs(1_700_000_030));
        // The third is counted from when the second actually ran (here 2.5 s late).
        let second_ran = second + Duration::from_millis(2500);
        let third = schedule
            .next_attempt_at(2, second_ran)
            .expect("a third attempt");
        assert_eq!(third, Timestamp::from_unix_millis(1_700_000_092_500));
        assert_eq!(schedule.next_attempt_at(3, third), None);
        assert_eq!(schedule.next_attempt_at(u32::MAX, third), None);
        assert_eq!(schedule.to_string(), "30,60");
    }

    #[test]
    fn manual_resend_has_exactly_one_attempt() {
        let schedule = RetrySchedule::single();
        let t = Timestamp::from_unix_secs(1_700_000_000);
        assert_eq!(schedule.max_attempts(), 1);
        assert_eq!(schedule.next_attempt_at(0, t), Some(t));
        assert_eq!(schedule.next_attempt_at(1, t), None);
    }

    #[test]
    fn parses_the_setting() {
        assert_eq!(
            RetrySchedule::parse_delays("30,60"),
            Ok(RetrySchedule::default())
        );
        assert_eq!(
            RetrySchedule::parse_delays(" 1, 2 ,0"),
            Ok(RetrySchedule {
                delays: vec![
                    Duration::from_secs(1),
                    Duration::from_secs(2),
                    Duration::from_secs(0)
                ]
            })
        );
        assert_eq!(
            RetrySchedule::parse_delays("86400").map(|s| s.max_attempts()),
            Ok(2)
        );
    }

    #[test]
    fn refuses_bad_settings_with_clear_errors() {
        let not = |position, item: &str| {
            Err(RetryDelaysError::NotSeconds {
                position,
                item: item.to_owned(),
            })
        };
        assert_eq!(
            RetrySchedule::parse_delays(""),
            Err(RetryDelaysError::Empty)
        );
        assert_eq!(
            RetrySchedule::parse_delays("  "),
            Err(RetryDelaysError::Empty)
        );
        assert_eq!(RetrySchedule::parse_delays("30,abc"), not(2, "abc"));
        assert_eq!(RetrySchedule::parse_delays("30,,60"), not(2, ""));
        assert_eq!(RetrySchedule::parse_delays("30,"), not(2, ""));
        assert_eq!(RetrySchedule::parse_delays("-5"), not(1, "-5"));
        assert_eq!(RetrySchedule::parse_delays("1.5"), not(1, "1.5"));
        assert_eq!(RetrySchedule::parse_delays("30s"), not(1, "30s"));
        assert_eq!(RetrySchedule::parse_delays("30;60"), not(1, "30;60"));
        assert_eq!(
            RetrySchedule::parse_delays("99999999999999999999999"),
            not(1, "99999999999999999999999")
        );
        assert_eq!(
            RetrySchedule::parse_delays("30,86401"),
            Err(RetryDelaysError::TooLong {
                position: 2,
                seconds: 86401
            })
        );
        assert_eq!(
            RetrySchedule::parse_delays("1,1,1,1,1,1,1,1,1,1,1"),
            Err(RetryDelaysError::TooMany { count: 11 })
        );
        assert_eq!(
            RetrySchedule::parse_delays("30,abc")
                .map_err(|e| e.to_string())
                .unwrap_err(),
            "PAYMENTS_CALLBACK_RETRY_DELAYS item 2 (\"abc\") is not a whole number of seconds"
        );
    }

    #[test]
    fn limits_match_the_spec() {
        assert_eq!(ATTEMPT_TIMEOUT, Duration::from_secs(10));
        assert_eq!(RESPONSE_READ_LIMIT, 4 * 1024);
    }
}
