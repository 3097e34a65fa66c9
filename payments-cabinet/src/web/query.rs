//! What the lists' links carry in their query strings: the page size, a page's cursor, a
//! value URL-encoded.

use payments_core::Timestamp;

/// Rows per page of the lists.
pub const PAGE_SIZE: usize = 50;

/// A page cursor: `<unix millis>_<id>`.
pub(crate) fn cursor<T: std::str::FromStr>(s: &str) -> Option<(Timestamp, T)> {
    let (t, id) = s.split_once('_')?;
    Some((
        Timestamp::from_unix_millis(t.parse().ok()?),
        id.parse().ok()?,
    ))
}

pub(crate) fn encode(s: &str) -> String {
    url::form_urlencoded::byte_serialize(s.as_bytes()).collect()
}

/// The start of a filter's day (`YYYY-MM-DD`) in the request's time zone
/// ([`i18n::zone`](super::i18n::zone): the user's, UTC without one); `None` when empty or
/// malformed.
pub(crate) fn date(s: &str) -> Option<Timestamp> {
    day_start(s, false)
}

/// The end of a filter's day (`YYYY-MM-DD`, the day included): the next day's start in the
/// request's time zone, 23 or 25 hours later on a day the clocks change.
pub(crate) fn date_end(s: &str) -> Option<Timestamp> {
    day_start(s, true)
}

fn day_start(s: &str, next: bool) -> Option<Timestamp> {
    let s = s.trim();
    if s.len() != 10 {
        return None;
    }
    let day: jiff::civil::Date = s.parse().ok()?;
    let day = if next { day.tomorrow().ok()? } else { day };
    let start = day.to_zoned_datetime(super::i18n::zone()).ok()?;
    Some(Timestamp::from_unix_millis(
        start.timestamp().as_millisecond(),
    ))
}

pub(crate) const DAY: std::time::Duration = std::time::Duration::from_secs(86_400);
