//! Why an administrative operation was refused: one error for the directory's operations
//! (the `payments-directory` crate), the environment record and the callback hold.

use crate::auth::keys::KeyConfirmationError;
use crate::callback::destination::CallbackUrlError;
use crate::store::StoreError;
use crate::{ApiError, ErrorCode};

/// Why an administrative operation was refused: the directory (merchants, projects, their
/// tokens, keys and callback secrets), operator tokens, the callback hold and the
/// environment record. Each cause has the stable code of its answer ([`AdminError::code`]);
/// the message of that answer is the error's text.
#[non_exhaustive]
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum AdminError {
    /// Input refused before anything was written (`400 bad_request`): a name, a setting, a
    /// key, a scope list, a reason.
    #[error("{0}")]
    Invalid(String),
    /// A key whose keyid was not confirmed (`400 bad_request`): a raw 32-byte key given
    /// without the keyid a person must confirm it with, or a keyid that is not the key's.
    #[error("expected_keyid: {0}")]
    KeyUnconfirmed(#[source] KeyConfirmationError),
    /// A callback URL the callback policy refuses (`400 bad_request`).
    #[error(transparent)]
    CallbackUrl(#[from] CallbackUrlError),
    /// No such merchant, project, token, key or operator token (`404 not_found`).
    #[error("{0}")]
    NotFound(String),
    /// A missing, malformed, expired or unknown operator token (`401 token_invalid`).
    #[error("missing or invalid operator token")]
    OperatorTokenInvalid,
    /// A callback secret that cannot be sealed, opened or read back (`500 internal_error`):
    /// a sealing key that does not match the stored data, or a damaged row.
    #[error("{0}")]
    Secret(String),
    /// The store failed (`503`, or `500` for corrupt data).
    #[error(transparent)]
    Store(#[from] StoreError),
}

impl AdminError {
    /// Input refused (`400 bad_request`) with this message.
    pub fn invalid(message: impl Into<String>) -> AdminError {
        AdminError::Invalid(message.into())
    }

    /// The stable code it is answered with.
    pub fn code(&self) -> ErrorCode {
        match self {
            AdminError::Invalid(_) | AdminError::CallbackUrl(_) | AdminError::KeyUnconfirmed(_) => {
                ErrorCode::BadRequest
            }
            AdminError::NotFound(_) => ErrorCode::NotFound,
            AdminError::OperatorTokenInvalid => ErrorCode::TokenInvalid,
            AdminError::Secret(_) => ErrorCode::Internal,
            AdminError::Store(e) => ApiError::from(e.clone()).code,
        }
    }
}

impl From<AdminError> for ApiError {
    fn from(e: AdminError) -> ApiError {
        match e {
            AdminError::Store(e) => e.into(),
            AdminError::CallbackUrl(e) => e.into(),
            e => ApiError::new(e.code(), e.to_string()),
        }
    }
}
