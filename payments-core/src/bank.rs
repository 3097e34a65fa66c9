//! The bank catalog and bank-code resolution.

use std::fmt;

/// A two-letter country code (`geo_code`, a bank's `country`): two ASCII letters, stored in
/// upper case. Parsing accepts either case.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct CountryCode([u8; 2]);

impl CountryCode {
    /// The default `geo_code` of a create request.
    pub const RU: CountryCode = CountryCode(*b"RU");

    /// Parses two ASCII letters in either case; anything else is `None`.
    pub fn parse(s: &str) -> Option<Self> {
        match s.as_bytes() {
            [a, b] if a.is_ascii_alphabetic() && b.is_ascii_alphabetic() => Some(CountryCode([
                a.to_ascii_uppercase(),
                b.to_ascii_uppercase(),
            ])),
            _ => None,
        }
    }

    /// The code in upper case.
    pub fn as_str(&self) -> &str {
        std::str::from_utf8(&self.0).expect("constructed only from ASCII letters")
    }
}

impl fmt::Display for CountryCode {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}
