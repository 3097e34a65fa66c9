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

/// A date of a filter (`YYYY-MM-DD`, UTC midnight); `None` when empty or malformed.
pub(crate) fn date(s: &str) -> Option<Timestamp> {
    let s = s.trim();
    if s.len() != 10 {
        return None;
    }
    Timestamp::parse_rfc3339(&format!("{s}T00:00:00Z"))
}

pub(crate) const DAY: std::time::Duration = std::time::Duration::from_secs(86_400);
