//! Time as a port: the core takes `now` from a [`Clock`] and never reads the system clock.

use std::fmt;
use std::future::Future;
use std::ops::{Add, Sub};
use std::pin::Pin;
use std::time::Duration;

use serde::{Deserialize, Deserializer, Serialize, Serializer};
use time::format_description::well_known::Rfc3339;
use time::OffsetDateTime;

/// An instant in UTC with millisecond precision (milliseconds since the Unix epoch).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Timestamp(i64);

impl Timestamp {
    /// The instant `millis` milliseconds after the Unix epoch.
    pub const fn from_unix_millis(millis: i64) -> Self {
        Timestamp(millis)
    }

    /// The instant `secs` seconds after the Unix epoch.
    pub const fn from_unix_secs(secs: i64) -> Self {
        Timestamp(secs * 1000)
    }

    /// Milliseconds since the Unix epoch.
    pub const fn unix_millis(self) -> i64 {
        self.0
    }

    /// Whole seconds since the Unix epoch (rounded towards negative infinity).
    pub const fn unix_secs(self) -> i64 {
        self.0.div_euclid(1000)
    }

    /// ISO 8601 / RFC 3339 in UTC with milliseconds, e.g. `2026-10-01T12:00:00.000Z`.
    pub fn to_rfc3339(self) -> String {
        let dt = OffsetDateTime::from_unix_timestamp_nanos(i128::from(self.0) * 1_000_000)
            .expect("an i64 millisecond count is within time's range");
        let fmt = time::macros::format_description!(
            "[year]-[month]-[day]T[hour]:[minute]:[second].[subsecond digits:3]Z"
        );
        dt.format(&fmt)
            .expect("the format has no component that can fail")
    }

    /// Parses an RFC 3339 timestamp with any offset.
    pub fn parse_rfc3339(s: &str) -> Option<Self> {
        let dt = OffsetDateTime::parse(s, &Rfc3339).ok()?;
        let millis = dt.unix_timestamp_nanos() / 1_000_000;
        i64::try_from(millis).ok().map(Timestamp)
    }

    /// `self + d`, saturating.
    pub fn saturating_add(self, d: Duration) -> Self {
        let ms = i64::try_from(d.as_millis()).unwrap_or(i64::MAX);
        Timestamp(self.0.saturating_add(ms))
    }

    /// `self - d`, saturating.
    pub fn saturating_sub(self, d: Duration) -> Self {
        let ms = i64::try_from(d.as_millis()).unwrap_or(i64::MAX);
        Timestamp(self.0.saturating_sub(ms))
    }

    /// The time from `earlier` to `self`, zero if `earlier` is later.
    pub fn duration_since(self, earlier: Timestamp) -> Duration {
        Duration::from_millis(u64::try_from(self.0.saturating_sub(earlier.0)).unwrap_or(0))
    }
}

impl Add<Duration> for Timestamp {
    type Output = Timestamp;
    fn add(self, rhs: Duration) -> Timestamp {
        self.saturating_add(rhs)
    }
}

impl Sub<Duration> for Timestamp {
    type Output = Timestamp;
    fn sub(self, rhs: Duration) -> Timestamp {
        self.saturating_sub(rhs)
    }
}

impl fmt::Display for Timestamp {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.to_rfc3339())
    }
}

impl Serialize for Timestamp {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(&self.to_rfc3339())
    }
}

impl<'de> Deserialize<'de> for Timestamp {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let s = String::deserialize(d)?;
        Timestamp::parse_rfc3339(&s)
            .ok_or_else(|| serde::de::Error::custom("expected an RFC 3339 timestamp"))
    }
}

/// A boxed future returned by [`Clock::sleep`].
pub type Sleep = Pin<Box<dyn Future<Output = ()> + Send + 'static>>;

/// The current time and timers, injected by the adapter.
pub trait Clock: Send + Sync {
    /// The current instant.
    fn now(&self) -> Timestamp;

    /// A future that completes after `duration` of this clock's time. The core uses it for the
    /// provider budget and for bounded waits; a simulated clock completes it when its time is
    /// advanced.
    fn sleep(&self, duration: Duration) -> Sleep;
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn formats_utc_with_millis() {
        assert_eq!(
            Timestamp::from_unix_millis(0).to_rfc3339(),
            "1970-01-01T00:00:00.000Z"
        );
        // 2026-09-29T00:00:00Z, the v1 release date of the spec.
        let t = Timestamp::from_unix_secs(1_790_640_000);
        assert_eq!(t.to_rfc3339(), "2026-09-29T00:00:00.000Z");
        let t = Timestamp::from_unix_millis(1_790_640_000_123);
        assert_eq!(Timestamp::parse_rfc3339(&t.to_rfc3339()), Some(t));
        assert_eq!(
            Timestamp::parse_rfc3339("2026-09-29T03:00:00.123+03:00"),
            Some(t)
        );
    }
}
