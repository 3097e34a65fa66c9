//! The error catalogue: every error the API answers with, by stable code.
//!
//! One enum ([`ErrorCode`]) holds the codes of the spec's Errors table and those that
//! `decisions.md` adds; [`ApiError`] carries a code with a human-readable message, the
//! optional extras of the error body and the typed cause. The core knows no transport: the
//! HTTP adapter (`payments_http::error`) gives each code its status and writes the body, once.

use std::fmt;

use crate::auth::signature::SANDBOX_KEY_HINT;
use crate::auth::token::{MissingScope, TokenRefusal};
use crate::auth::{Environment, SignatureError, SignatureFailure};
use crate::bank::{BankNotFound, InvalidGeoCode};
use crate::callback::destination::CallbackUrlError;
use crate::ids::PaymentId;
use crate::payer::UnknownLanguage;
use crate::project::NotCovered;
use crate::request_log::SignatureDiagnosis;
use crate::store::{StoreError, UnavailableCause, READ_TIMED_OUT};

/// A stable error code and the HTTP status that goes with it.
#[non_exhaustive]
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum ErrorCode {
    /// `400 bad_request`: unknown field in the create body, invalid body or fields.
    BadRequest,
    /// `400 invalid_geo_code`: `geo_code` of the banks query is not two Latin letters.
    InvalidGeoCode,
    /// `401 token_invalid`: token truncated, revoked, unknown, of the other environment, or the
    /// project is not active.
    TokenInvalid,
    /// `401 signature_invalid`: the request signature or digest does not verify.
    SignatureInvalid,
    /// `403 ip_not_allowed`: the source address is not in the project's allow-list.
    IpNotAllowed,
    /// `403 insufficient_scope`: a valid token without the scope the endpoint needs.
    InsufficientScope,
    /// `404 payment_not_found`: unknown or malformed payment id, or a payment of another project.
    PaymentNotFound,
    /// `404 not_found`: no such route or resource (operator API objects).
    NotFound,
    /// `409 payment_idempotency_conflict`: same `merchant_payment_id` with a different request.
    PaymentIdempotencyConflict,
    /// `409 request_replayed`: the nonce was already used.
    RequestReplayed,
    /// `409 invalid_transition`: the operation is not allowed in the payment's current status.
    InvalidTransition,
    /// `409 insufficient_balance`: an operator's payout larger than the project's balance,
    /// without a reason to force it.
    InsufficientBalance,
    /// `409 payout_reference_conflict`: the project has a payout with this transaction hash
    /// and another amount or destination.
    PayoutReferenceConflict,
    /// `404 appeal_not_found`: unknown or malformed appeal id, or an appeal of another project.
    AppealNotFound,
    /// `409 appeal_idempotency_conflict`: the appeal's idempotency key was used for another
    /// appeal of the project.
    AppealIdempotencyConflict,
    /// `409 appeal_limit_reached`: the payment has an appeal under way, or has taken every
    /// appeal its source may open.
    AppealLimitReached,
    /// `422 receipt_invalid`: a receipt that is not a PDF, PNG or JPEG by its content, larger
    /// than 2 MiB, or an image of too many pixels.
    ReceiptInvalid,
    /// `405 method_not_allowed`: the path exists, but not with this method.
    MethodNotAllowed,
    /// `408 request_timeout`: the request body did not arrive within the body timeout.
    RequestTimeout,
    /// `413 body_too_large`: the request body exceeds the limit.
    BodyTooLarge,
    /// `414 uri_too_long`: the request target exceeds the limit.
    UriTooLong,
    /// `415 unsupported_media_type`: a request body not declared as
    /// `Content-Type: application/json` (optionally `; charset=utf-8`).
    UnsupportedMediaType,
    /// `431 headers_too_large`: the request headers exceed the limit (count or size).
    HeadersTooLarge,
    /// `422 payment_not_covered`: method, currency or amount outside the project's contract.
    PaymentNotCovered,
    /// `422 payment_rate_unavailable`: no exchange rate for the currency.
    PaymentRateUnavailable,
    /// `422 payment_not_routable`: the payment cannot be accepted now (paused merchant or
    /// project, no suitable requisites).
    PaymentNotRoutable,
    /// `422 bank_not_found`: unknown bank name, or ambiguous across countries.
    BankNotFound,
    /// `429 rate_limited`: the project's request rate limit is exceeded.
    RateLimited,
    /// `500 internal_error`: an unexpected failure inside the service.
    Internal,
    /// `503 service_unavailable`: overloaded or the store is unavailable.
    ServiceUnavailable,
}

impl ErrorCode {
    /// Every code, for documentation and agreement tests.
    pub const ALL: [ErrorCode; 30] = [
        ErrorCode::BadRequest,
        ErrorCode::InvalidGeoCode,
        ErrorCode::TokenInvalid,
        ErrorCode::SignatureInvalid,
        ErrorCode::IpNotAllowed,
        ErrorCode::InsufficientScope,
        ErrorCode::PaymentNotFound,
        ErrorCode::NotFound,
        ErrorCode::PaymentIdempotencyConflict,
        ErrorCode::RequestReplayed,
        ErrorCode::InvalidTransition,
        ErrorCode::InsufficientBalance,
        ErrorCode::PayoutReferenceConflict,
        ErrorCode::AppealNotFound,
        ErrorCode::AppealIdempotencyConflict,
        ErrorCode::AppealLimitReached,
        ErrorCode::ReceiptInvalid,
        ErrorCode::MethodNotAllowed,
        ErrorCode::RequestTimeout,
        ErrorCode::BodyTooLarge,
        ErrorCode::UriTooLong,
        ErrorCode::UnsupportedMediaType,
        ErrorCode::HeadersTooLarge,
        ErrorCode::PaymentNotCovered,
        ErrorCode::PaymentRateUnavailable,
        ErrorCode::PaymentNotRoutable,
        ErrorCode::BankNotFound,
        ErrorCode::RateLimited,
        ErrorCode::Internal,
        ErrorCode::ServiceUnavailable,
    ];

    /// The stable code string of the error body.
    pub const fn as_str(self) -> &'static str {
        match self {
            ErrorCode::BadRequest => "bad_request",
            ErrorCode::InvalidGeoCode => "invalid_geo_code",
            ErrorCode::TokenInvalid => "token_invalid",
            ErrorCode::SignatureInvalid => "signature_invalid",
            ErrorCode::IpNotAllowed => "ip_not_allowed",
            ErrorCode::InsufficientScope => "insufficient_scope",
            ErrorCode::PaymentNotFound => "payment_not_found",
            ErrorCode::NotFound => "not_found",
            ErrorCode::PaymentIdempotencyConflict => "payment_idempotency_conflict",
            ErrorCode::RequestReplayed => "request_replayed",
            ErrorCode::InvalidTransition => "invalid_transition",
            ErrorCode::InsufficientBalance => "insufficient_balance",
            ErrorCode::PayoutReferenceConflict => "payout_reference_conflict",
            ErrorCode::AppealNotFound => "appeal_not_found",
            ErrorCode::AppealIdempotencyConflict => "appeal_idempotency_conflict",
            ErrorCode::AppealLimitReached => "appeal_limit_reached",
            ErrorCode::ReceiptInvalid => "receipt_invalid",
            ErrorCode::MethodNotAllowed => "method_not_allowed",
            ErrorCode::RequestTimeout => "request_timeout",
            ErrorCode::BodyTooLarge => "body_too_large",
            ErrorCode::UriTooLong => "uri_too_long",
            ErrorCode::UnsupportedMediaType => "unsupported_media_type",
            ErrorCode::HeadersTooLarge => "headers_too_large",
            ErrorCode::PaymentNotCovered => "payment_not_covered",
            ErrorCode::PaymentRateUnavailable => "payment_rate_unavailable",
            ErrorCode::PaymentNotRoutable => "payment_not_routable",
            ErrorCode::BankNotFound => "bank_not_found",
            ErrorCode::RateLimited => "rate_limited",
            ErrorCode::Internal => "internal_error",
            ErrorCode::ServiceUnavailable => "service_unavailable",
        }
    }
}

impl fmt::Display for ErrorCode {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// An error answered by the API: a code, a message for people, and the optional extras of the
/// error body.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{code}: {message}")]
pub struct ApiError {
    /// The stable code.
    pub code: ErrorCode,
    /// What went wrong, for people; never contains a secret.
    pub message: String,
    /// The saved payment, on a `422` whose payment was stored in `error`.
    pub payment_id: Option<PaymentId>,
    /// Sandbox only: the signature base the server verified against (debugging aid).
    pub signature_base: Option<String>,
    /// Seconds after which a retry makes sense (`429`, `503`).
    pub retry_after: Option<u64>,
    /// The typed failure behind this answer, when it came from a narrower error: kept for
    /// logs and for embedders that branch on it; never part of the wire body.
    pub cause: Option<Box<ErrorCause>>,
}

/// The narrower error an [`ApiError`] was made from.
#[non_exhaustive]
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ErrorCause {
    /// A signature or digest that did not verify, with its exact reason.
    Signature(SignatureError),
    /// A store failure (unavailable, corrupt, conflict ...).
    Store(StoreError),
    /// Why there was no exchange rate (`422 payment_rate_unavailable` either way).
    Rate(RateFailure),
}

/// Why a create found no exchange rate: the rate source had none, answered one that is not a
/// usable course, or did not answer within `ServiceConfig::rate_budget`. The answer on the
/// wire is `422 payment_rate_unavailable` for all three; the cause tells an operator whether
/// the rate source is slow or has no rate.
#[non_exhaustive]
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RateFailure {
    /// The rate source answered that it has no rate for the currency.
    NoRate,
    /// It answered a rate that is not a usable course (zero, negative, too many places).
    Unusable,
    /// It did not answer within this budget.
    TimedOut(std::time::Duration),
}

impl fmt::Display for RateFailure {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            RateFailure::NoRate => f.write_str("the rate source has no rate"),
            RateFailure::Unusable => f.write_str("the rate source answered an unusable rate"),
            RateFailure::TimedOut(budget) => {
                write!(f, "the rate source did not answer within {budget:?}")
            }
        }
    }
}

impl fmt::Display for ErrorCause {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ErrorCause::Signature(e) => write!(f, "signature: {e}"),
            ErrorCause::Store(e) => write!(f, "store: {e}"),
            ErrorCause::Rate(e) => write!(f, "rate: {e}"),
        }
    }
}

impl ApiError {
    /// An error with a code and a message.
    pub fn new(code: ErrorCode, message: impl Into<String>) -> Self {
        ApiError {
            code,
            message: message.into(),
            payment_id: None,
            signature_base: None,
            retry_after: None,
            cause: None,
        }
    }

    /// Keeps the typed failure this answer was made from (see [`ApiError::cause`]).
    pub fn with_cause(mut self, cause: ErrorCause) -> Self {
        self.cause = Some(Box::new(cause));
        self
    }

    /// `400 bad_request` with a message.
    pub fn bad_request(message: impl Into<String>) -> Self {
        Self::new(ErrorCode::BadRequest, message)
    }

    /// `500 internal_error`; the message is logged, not shown to clients in detail.
    pub fn internal(message: impl Into<String>) -> Self {
        Self::new(ErrorCode::Internal, message)
    }

    /// Attaches the saved payment's id (a `422` whose payment was stored).
    pub fn with_payment_id(mut self, id: PaymentId) -> Self {
        self.payment_id = Some(id);
        self
    }

    /// Attaches a `Retry-After` value in seconds.
    pub fn with_retry_after(mut self, seconds: u64) -> Self {
        self.retry_after = Some(seconds);
        self
    }
}

impl ApiError {
    /// The diagnosis of an answer refused for its signature (the verifier put the
    /// [`SignatureError`] in its cause), else `None`. The base is
    /// [`logged_base`](crate::request_log::logged_base) of the one the error carries, in every
    /// environment: the cabinet shows it only to the project's own users and support.
    pub fn signature_diagnosis(&self) -> Option<SignatureDiagnosis> {
        match self.cause.as_deref() {
            Some(ErrorCause::Signature(e)) => Some(SignatureDiagnosis::of_signature(e)),
            _ => None,
        }
    }
}

// How each narrower error of the model is answered on the wire: written here, once, so
// that the model's modules import no wire type.

impl From<BankNotFound> for ApiError {
    fn from(e: BankNotFound) -> ApiError {
        ApiError::new(ErrorCode::BankNotFound, e.to_string())
    }
}

impl From<InvalidGeoCode> for ApiError {
    fn from(e: InvalidGeoCode) -> ApiError {
        ApiError::new(ErrorCode::InvalidGeoCode, e.to_string())
    }
}

impl From<TokenRefusal> for ApiError {
    fn from(e: TokenRefusal) -> ApiError {
        ApiError::new(ErrorCode::TokenInvalid, e.to_string())
    }
}

impl From<MissingScope> for ApiError {
    fn from(e: MissingScope) -> ApiError {
        ApiError::new(ErrorCode::InsufficientScope, e.to_string())
    }
}

impl From<CallbackUrlError> for ApiError {
    /// Every refused callback URL is a `400 bad_request` carrying the error's message.
    fn from(e: CallbackUrlError) -> ApiError {
        ApiError::bad_request(e.to_string())
    }
}

impl From<NotCovered> for ApiError {
    fn from(e: NotCovered) -> ApiError {
        ApiError::new(ErrorCode::PaymentNotCovered, e.to_string())
    }
}

impl From<UnknownLanguage> for ApiError {
    fn from(e: UnknownLanguage) -> ApiError {
        ApiError::bad_request(e.to_string())
    }
}

impl From<StoreError> for ApiError {
    fn from(e: StoreError) -> Self {
        let api = match &e {
            // Retrying the same read would read as much again: no `Retry-After`.
            StoreError::Unavailable {
                cause: UnavailableCause::TimedOut,
                ..
            } => ApiError::new(ErrorCode::ServiceUnavailable, READ_TIMED_OUT),
            StoreError::Unavailable { .. } => ApiError::new(
                ErrorCode::ServiceUnavailable,
                "the service is temporarily unavailable",
            )
            .with_retry_after(1),
            StoreError::NotFound(m) => ApiError::new(ErrorCode::NotFound, m.clone()),
            other => ApiError::internal(other.to_string()),
        };
        api.with_cause(ErrorCause::Store(e))
    }
}

impl SignatureError {
    /// `401 signature_invalid` with the reason as message, plus the signature base in the
    /// sandbox only (`decisions.md`: a debugging aid, never in production). The value of a
    /// covered `authorization` component (the bearer token) is redacted from the base, here
    /// and in the error kept as the cause (which logs may print).
    ///
    /// In the sandbox a signature that does not verify says where to look next: with the
    /// server's base beside it, a base equal to the client's leaves only the key (another
    /// project's private key under this project's `keyid` showed nothing in a diff).
    pub fn into_api_error(mut self, env: Environment) -> ApiError {
        self.redact_base();
        let mut message = self.failure.to_string();
        if env == Environment::Sandbox
            && self.failure == SignatureFailure::VerificationFailed
            && self.signature_base.is_some()
        {
            message.push_str(SANDBOX_KEY_HINT);
        }
        let mut api = ApiError::new(ErrorCode::SignatureInvalid, message);
        if env == Environment::Sandbox {
            api.signature_base = self.signature_base.clone();
        }
        api.with_cause(ErrorCause::Signature(self))
    }
}

impl From<SignatureError> for ApiError {
    /// `401 signature_invalid` with the reason as message and without the signature base
    /// (the safe default); use [`SignatureError::into_api_error`] to include it in the sandbox.
    fn from(e: SignatureError) -> Self {
        e.into_api_error(Environment::Production)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn codes_are_unique() {
        let mut seen = std::collections::HashSet::new();
        for code in ErrorCode::ALL {
            assert!(seen.insert(code.as_str()), "duplicate {}", code.as_str());
        }
    }
}
