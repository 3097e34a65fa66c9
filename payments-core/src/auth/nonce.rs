//! `X-Request-Nonce`: the per-request unique value that makes a signed request single-use, and
//! how long a used nonce must be remembered.

use std::fmt;
use std::time::Duration;

use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use base64::Engine as _;

use crate::{RandomSource, Timestamp};

/// Shortest accepted nonce, in characters.
pub const NONCE_MIN_LEN: usize = 16;
/// Longest accepted nonce, in characters.
pub const NONCE_MAX_LEN: usize = 128;

/// How long a used nonce must be remembered after the request that used it was accepted.
///
/// A signature is accepted while `created <= now + 60 s` (skew), `expires <= created + 300 s`
/// and `now <= expires + 60 s` (skew); see [`crate::auth::SignaturePolicy::strict`]. The
/// earliest instant `t0` a nonce can be first accepted with a given `created` is
/// `created - 60 s`; the latest instant the same signed request is still accepted is
/// `expires + 60 s <= created + 360 s = t0 + 420 s`. Remembering the nonce for 420 s after
/// first use therefore outlives every signature that can carry it.
pub const NONCE_RETENTION: Duration = Duration::from_secs(60 + 300 + 60);

/// Until when a nonce first accepted at `now` must be remembered.
pub fn nonce_expires_at(now: Timestamp) -> Timestamp {
    now + NONCE_RETENTION
}

/// Why an `X-Request-Nonce` value was not accepted.
#[non_exhaustive]
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum NonceError {
    /// Fewer than 16 or more than 128 characters.
    #[error("X-Request-Nonce must be 16 to 128 characters, got {0}")]
    Length(usize),
    /// A character outside `A-Za-z0-9._~+/=-`.
    #[error("X-Request-Nonce may contain only A-Za-z0-9._~+/=-")]
    Character,
}

/// A well-formed `X-Request-Nonce`: 16 to 128 characters of `A-Za-z0-9._~+/=-`.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Nonce(String);

impl Nonce {
    /// Parses a nonce from its header value (no trimming: the value is signed as sent).
    pub fn parse(value: &[u8]) -> Result<Nonce, NonceError> {
        if !(NONCE_MIN_LEN..=NONCE_MAX_LEN).contains(&value.len()) {
            return Err(NonceError::Length(value.len()));
        }
        if !value.iter().all(|&b| is_nonce_byte(b)) {
            return Err(NonceError::Character);
        }
        let value = std::str::from_utf8(value).expect("nonce bytes were checked to be ASCII");
        Ok(Nonce(value.to_owned()))
    }

    /// A fresh nonce: 24 random bytes in base64url, 32 characters.
    pub fn generate(rng: &dyn RandomSource) -> Nonce {
        let bytes: [u8; 24] = crate::random::bytes(rng);
        Nonce(URL_SAFE_NO_PAD.encode(bytes))
    }

    /// The nonce text.
    pub fn as_str(&self) -> &str {
        &self.0
    }
}

impl fmt::Display for Nonce {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

fn is_nonce_byte(b: u8) -> bool {
    b.is_ascii_alphanumeric() || matches!(b, b'.' | b'_' | b'~' | b'+' | b'/' | b'=' | b'-')
}

#[cfg(test)]
mod tests {
    use super::*;

    struct Counter;
    impl RandomSource for Counter {
        fn fill(&self, buf: &mut [u8]) {
            for (i, b) in buf.iter_mut().enumerate() {
                *b = i as u8;
            }
        }
    }

    #[test]
    fn length_bounds() {
        assert_eq!(Nonce::parse(&[b'a'; 15]), Err(NonceError::Length(15)));
        assert_eq!(Nonce::parse(&[b'a'; 16]).unwrap().as_str(), "a".repeat(16));
        assert_eq!(Nonce::parse(&[b'a'; 128]).unwrap().as_str().len(), 128);
        assert_eq!(Nonce::parse(&[b'a'; 129]), Err(NonceError::Length(129)));
        assert_eq!(Nonce::parse(b""), Err(NonceError::Length(0)));
    }

    #[test]
    fn alphabet() {
        let all = b"AZaz09._~+/=-AAAA";
        assert_eq!(Nonce::parse(all).unwrap().as_str(), "AZaz09._~+/=-AAAA");
        for bad in [b' ', b',', b'"', b'%', b':', b'\t', 0x80, b'*'] {
            let mut v = vec![b'a'; 20];
            v[7] = bad;
            assert_eq!(
                Nonce::parse(&v),
                Err(NonceError::Character),
                "byte {bad:#x}"
            );
        }
    }

    #[test]
    fn generated_nonce_is_32_base64url_chars_and_parses() {
        let n = Nonce::generate(&Counter);
        assert_eq!(n.as_str(), "AAECAwQFBgcICQoLDA0ODxAREhMUFRYX");
        assert_eq!(Nonce::parse(n.as_str().as_bytes()), Ok(n));
    }

    #[test]
    fn retention_is_420_seconds() {
        assert_eq!(NONCE_RETENTION, Duration::from_secs(420));
        let now = Timestamp::from_unix_secs(1_000);
        assert_eq!(nonce_expires_at(now), Timestamp::from_unix_secs(1_420));
    }
}
