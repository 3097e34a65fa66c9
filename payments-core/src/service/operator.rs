//! Operator access: one operator token at a time, stored as its SHA-256 only, checked in
//! constant time. The HTTP adapter asks here; it decides nothing about tokens itself.

use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use base64::Engine;
use sha2::{Digest, Sha256};
use subtle::ConstantTimeEq;

use super::{Actor, PaymentService};
use crate::{ApiError, ErrorCode};

/// The setting holding the operator token's SHA-256 (hex).
pub const OPERATOR_TOKEN_SETTING: &str = "operator.token_sha256";

fn token_sha256_hex(token: &str) -> String {
    hex::encode(Sha256::digest(token.as_bytes()))
}

fn invalid() -> ApiError {
    ApiError::new(ErrorCode::TokenInvalid, "missing or invalid operator token")
}

impl PaymentService {
    /// Issues a new operator token (`op_` and 32 random bytes, base64url): stores its
    /// SHA-256 in place of the previous one, which stops working, and returns the token,
    /// which is shown once and kept nowhere.
    pub async fn issue_operator_token(&self) -> Result<String, ApiError> {
        let mut bytes = [0u8; 32];
        self.ports.rng.fill(&mut bytes);
        let token = format!("op_{}", URL_SAFE_NO_PAD.encode(bytes));
        self.ports
            .store
            .put_setting(OPERATOR_TOKEN_SETTING, &token_sha256_hex(&token))
            .await?;
        Ok(token)
    }

    /// Checks the value of an operator request's `Authorization` header (`Bearer <token>`, the
    /// scheme in any case as RFC 9110 says and as the merchant API reads it) against the
    /// stored hash, in constant time. The answer is the actor for the audit trail
    /// (no part of the token goes there); a missing, malformed or wrong token, or no token
    /// issued at all, is `401 token_invalid`.
    pub async fn check_operator_token(
        &self,
        authorization: Option<&str>,
    ) -> Result<Actor, ApiError> {
        let presented = authorization
            .and_then(|v| v.split_once(' '))
            .filter(|(scheme, _)| scheme.eq_ignore_ascii_case("bearer"))
            .map(|(_, token)| token.trim_matches(' '))
            .ok_or_else(invalid)?;
        let expected = self
            .ports
            .store
            .setting(OPERATOR_TOKEN_SETTING)
            .await?
            .ok_or_else(invalid)?;
        let presented = token_sha256_hex(presented);
        let same = presented.len() == expected.len()
            && bool::from(presented.as_bytes().ct_eq(expected.as_bytes()));
        if same {
            Ok(Actor("operator".to_string()))
        } else {
            Err(invalid())
        }
    }
}

#[cfg(test)]
mod tests {
    use super::token_sha256_hex;

    #[test]
    fn the_stored_form_is_the_hex_sha256() {
        // SHA-256("abc"), FIPS 180-2 appendix B.1.
        assert_eq!(
            token_sha256_hex("abc"),
            "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad"
        );
    }
}
