//! Property checks for the fuzz targets of `fuzz/` (cargo-fuzz, libFuzzer).
//!
//! One function per target takes the fuzzer's bytes, runs a parser that sees untrusted input and
//! panics when a property does not hold: not only "no panic", but round trips (what parses
//! re-serialises to something that parses to the same value), agreement between two ways of
//! reaching the same answer, and "what verifies for one input verifies for no other". The
//! functions are ordinary safe code: `tests/replay.rs` runs every committed corpus file through
//! them on the stable toolchain, so `cargo test` replays the corpora.
//!
//! Inputs made of several parts (a header and a body, rules and addresses, ...) are split at the
//! byte `0xFF` ([`SEPARATOR`], never part of UTF-8 text): see [`split`].
#![deny(missing_docs)]

mod allow_list;
mod callback_url;
mod callback_verifier;
mod content_digest;
mod create_body;
mod forwarded_for;
mod ledger_input;
mod operator_body;
mod public_key;
pub mod seeds;
mod signature;

pub use allow_list::check as allow_list;
pub use callback_url::check as callback_url;
pub use callback_verifier::check as callback_verifier;
pub use content_digest::check as content_digest;
pub use create_body::check as create_body;
pub use forwarded_for::check as forwarded_for;
pub use ledger_input::check as ledger_input;
pub use operator_body::check as operator_body;
pub use public_key::check as public_key;
pub use signature::check as signature;

/// A check: panics when a property does not hold for the input.
pub type Check = fn(&[u8]);

/// Every target: its name (the file `fuzz/fuzz_targets/<name>.rs` and the corpus directory
/// `fuzz/corpus/<name>/`) and its check.
pub const TARGETS: &[(&str, Check)] = &[
    ("signature", signature),
    ("content_digest", content_digest),
    ("create_body", create_body),
    ("callback_url", callback_url),
    ("public_key", public_key),
    ("operator_body", operator_body),
    ("allow_list", allow_list),
    ("forwarded_for", forwarded_for),
    ("callback_verifier", callback_verifier),
    ("ledger_input", ledger_input),
];

/// The byte that separates the parts of a multi-part input.
pub const SEPARATOR: u8 = 0xFF;

/// Splits `data` into `N` parts at the first `N - 1` [`SEPARATOR`] bytes; missing parts are
/// empty and the last part keeps any further separators.
pub fn split<const N: usize>(data: &[u8]) -> [&[u8]; N] {
    let mut parts: [&[u8]; N] = [&[]; N];
    let mut rest = data;
    for (i, part) in parts.iter_mut().enumerate() {
        if i + 1 == N {
            *part = rest;
            break;
        }
        match rest.iter().position(|&b| b == SEPARATOR) {
            Some(at) => {
                *part = &rest[..at];
                rest = &rest[at + 1..];
            }
            None => {
                *part = rest;
                break;
            }
        }
    }
    parts
}

/// The inverse of [`split`] for parts without separators (all but the last).
pub fn join(parts: &[&[u8]]) -> Vec<u8> {
    let mut out = Vec::new();
    for (i, part) in parts.iter().enumerate() {
        if i > 0 {
            out.push(SEPARATOR);
        }
        out.extend_from_slice(part);
    }
    out
}

/// A timestamp `secs` seconds after the epoch, saturating instead of overflowing (the checks
/// take times from the input).
pub(crate) fn at_secs(secs: i64) -> payments_core::Timestamp {
    payments_core::Timestamp::from_unix_millis(secs.saturating_mul(1000))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn split_and_join() {
        assert_eq!(
            split::<3>(b"a\xffb\xffc\xffd"),
            [&b"a"[..], b"b", b"c\xffd"]
        );
        assert_eq!(split::<3>(b"a"), [&b"a"[..], b"", b""]);
        assert_eq!(split::<1>(b"a\xffb"), [&b"a\xffb"[..]]);
        assert_eq!(split::<2>(&join(&[b"x", b"y\xff"])), [&b"x"[..], b"y\xff"]);
    }
}
