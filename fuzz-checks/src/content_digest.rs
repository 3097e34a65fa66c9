//! `Content-Digest` (RFC 9530) through [`verify_content_digest`].
//!
//! Input: `header 0xFF body` (a header that is not UTF-8 is skipped: the signature path
//! refuses non-ASCII fields before this parser).
//!
//! Properties:
//! - the header computed for a body verifies that body, and no other one;
//! - a header that verifies one body verifies no other (the body with a byte appended, the
//!   body with its last byte changed, the header's own bytes);
//! - a structural refusal (malformed, no `sha-256`, not a 32-byte byte sequence) does not
//!   depend on the body; a well-formed header only ever matches or mismatches;
//! - members beside `sha-256` do not matter: another member put in front does not change an
//!   acceptance;
//! - the answer is deterministic.

use payments_core::auth::{content_digest_header, verify_content_digest, DigestError};

/// Runs the target on the fuzzer's bytes `data`; panics when a property of this module's
/// parser does not hold (see the module's documentation for the input format and the
/// properties).
pub fn check(data: &[u8]) {
    let [header, body] = crate::split::<2>(data);

    let computed = content_digest_header(body);
    assert_eq!(
        verify_content_digest(&computed, body),
        Ok(()),
        "the computed header verifies its body"
    );

    let mut others: Vec<Vec<u8>> = vec![[body, b"x"].concat()];
    if let Some((last, rest)) = body.split_last() {
        others.push([rest, &[last ^ 1]].concat());
    }
    if header != body {
        others.push(header.to_vec());
    }
    for other in &others {
        assert_eq!(
            verify_content_digest(&computed, other),
            Err(DigestError::Mismatch),
            "the computed header verifies another body"
        );
    }

    let Ok(header) = std::str::from_utf8(header) else {
        return;
    };
    let result = verify_content_digest(header, body);
    assert_eq!(result, verify_content_digest(header, body), "deterministic");
    for other in &others {
        let other_result = verify_content_digest(header, other);
        match &result {
            Ok(()) => assert_eq!(
                other_result,
                Err(DigestError::Mismatch),
                "a digest that verifies one body verifies another: {header:?}"
            ),
            Err(DigestError::Mismatch) => assert!(
                matches!(other_result, Ok(()) | Err(DigestError::Mismatch)),
                "a well-formed header became malformed with another body: {header:?}"
            ),
            Err(structural) => assert_eq!(
                other_result.as_ref(),
                Err(structural),
                "a structural refusal depends on the body: {header:?}"
            ),
        }
    }
    if result.is_ok() {
        assert_eq!(
            verify_content_digest(&format!("fuzz-extra=?1, {header}"), body),
            Ok(()),
            "another member in front changes an acceptance: {header:?}"
        );
    }
}
