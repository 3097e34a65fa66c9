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
