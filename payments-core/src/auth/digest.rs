//! RFC 9530 `Content-Digest`: computing the `sha-256` member for a body and checking a received
//! header against the body.
//!
//! <https://www.rfc-editor.org/rfc/rfc9530#section-2>

use base64::engine::general_purpose::STANDARD;
use base64::Engine as _;
use sha2::{Digest as _, Sha256};
use subtle::ConstantTimeEq as _;

/// Why a `Content-Digest` header was not accepted.
#[non_exhaustive]
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum DigestError {
    /// The header is not a valid structured-field Dictionary (RFC 8941 / RFC 9651).
    #[error("malformed Content-Digest: {0}")]
    Malformed(String),
    /// A member or a parameter is named twice (`sha-256=:...:, sha-256=:...:`): the parser
    /// would keep the last silently, so the header is refused as ambiguous.
    #[error("Content-Digest: {0}")]
    Duplicate(String),
    /// The Dictionary has no `sha-256` member.
    #[error("Content-Digest has no sha-256 member")]
    MissingSha256,
    /// The `sha-256` member is not a 32-byte Byte Sequence.
    #[error("Content-Digest sha-256 member must be a 32-byte byte sequence")]
    InvalidSha256,
    /// The `sha-256` member does not equal the SHA-256 of the body.
    #[error("content-digest does not match body")]
    Mismatch,
}

/// The `Content-Digest` header value for `body`: `sha-256=:<standard base64>:`.
///
/// <https://www.rfc-editor.org/rfc/rfc9530#section-2>
pub fn content_digest_header(body: &[u8]) -> String {
    format!("sha-256=:{}:", STANDARD.encode(Sha256::digest(body)))
}

/// Checks the `Content-Digest` field value (all header lines joined with `", "`) against `body`.
///
/// Only the `sha-256` member is checked; other algorithms listed beside it are ignored, as
/// `decisions.md` says. A missing or wrong `sha-256` member is an error, and so is a member or
/// a parameter named twice (the header lines are joined, so also across lines).
///
/// <https://www.rfc-editor.org/rfc/rfc9530#section-2>
pub fn verify_content_digest(field_value: &str, body: &[u8]) -> Result<(), DigestError> {
    if let Some(duplicate) = super::sf::find_duplicate(field_value)
        .map_err(|e: sfv::Error| DigestError::Malformed(e.to_string()))?
    {
        return Err(DigestError::Duplicate(duplicate.to_string()));
    }
    let dict: sfv::Dictionary = sfv::Parser::new(field_value)
        .parse()
        .map_err(|e: sfv::Error| DigestError::Malformed(e.to_string()))?;
    let member = dict.get("sha-256").ok_or(DigestError::MissingSha256)?;
    let sfv::ListEntry::Item(item) = member else {
        return Err(DigestError::InvalidSha256);
    };
    let received = item
        .bare_item
        .as_byte_sequence()
        .filter(|b| b.len() == 32)
        .ok_or(DigestError::InvalidSha256)?;
    let computed = Sha256::digest(body);
    if bool::from(received.ct_eq(computed.as_slice())) {
        Ok(())
    } else {
        Err(DigestError::Mismatch)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn wrong_types_are_rejected_with_their_own_reason() {
        assert_eq!(
            verify_content_digest("sha-256=abc", b""),
            Err(DigestError::InvalidSha256)
        );
        assert_eq!(
            verify_content_digest("sha-256=:AAAA:", b""),
            Err(DigestError::InvalidSha256)
        );
        assert_eq!(
            verify_content_digest("sha-256=(:AAAA:)", b""),
            Err(DigestError::InvalidSha256)
        );
        assert!(matches!(
            verify_content_digest("sha-256=:not base64", b""),
            Err(DigestError::Malformed(_))
        ));
        assert_eq!(
            verify_content_digest("sha-512=:AAAA:", b""),
            Err(DigestError::MissingSha256)
        );
    }

    #[test]
    fn duplicate_members_and_parameters_are_refused() {
        let right = content_digest_header(b"{}");
        let wrong = content_digest_header(b"[]");
        assert_eq!(verify_content_digest(&right, b"{}"), Ok(()));
        // The parser keeps the last member: the right one, after a wrong one.
        for value in [
            format!("{wrong}, {right}"),
            format!("{right}, {right}"),
            format!("{right}, sha-512=:AAAA:, {right}"),
            format!("{right};p=1;p=2"),
        ] {
            assert!(
                matches!(
                    verify_content_digest(&value, b"{}"),
                    Err(DigestError::Duplicate(_))
                ),
                "{value}"
            );
        }
        assert_eq!(
            verify_content_digest(&format!("{wrong}, {right}"), b"{}")
                .unwrap_err()
                .to_string(),
            "Content-Digest: member \"sha-256\" appears twice"
        );
    }
}
