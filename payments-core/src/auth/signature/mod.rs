//! RFC 9421 HTTP Message Signatures with Ed25519, and the service's signature policy.
//!
//! The verifier is general: it builds the signature base for the derived components
//! `@method`, `@target-uri`, `@authority`, `@scheme`, `@request-target`, `@path`, `@query` and for
//! any header field, and verifies the RFC's own Ed25519 examples. The policy of `decisions.md`
//! (required components, `created`/`expires` window, `Content-Digest`, nonce) sits on top, in
//! [`SignaturePolicy`].
//!
//! Key lookup is asynchronous in the caller, so verification is split in two:
//!
//! 1. [`PreparedSignature::prepare`] parses `Signature-Input` and `Signature`, picks the label,
//!    checks the parameters, the time window, the covered components, the nonce parameter and the
//!    `Content-Digest`, and builds the signature base;
//! 2. the caller looks up [`PreparedSignature::keyid`] and calls [`PreparedSignature::verify`]
//!    (or answers [`PreparedSignature::unknown_keyid`]).
//!
//! <https://www.rfc-editor.org/rfc/rfc9421>

mod base;
mod error;
mod parse;
mod policy;
mod request;
mod signer;
mod verify;

#[cfg(test)]
mod tests;

pub use self::error::{SignatureError, SignatureFailure, SANDBOX_KEY_HINT};
pub use self::policy::SignaturePolicy;
pub use self::request::HttpRequestParts;
pub use self::signer::{sign_request, SigParam, SignError, SignOptions, SignedHeaders};
pub use self::verify::{signature_created, PreparedSignature, VerifiedSignature};

/// A signature base with the value of every credential component (a covered `authorization`)
/// replaced by `[redacted]`.
pub fn redacted_base(base: &str) -> String {
    error::redact_signature_base(base)
}

/// The label the service prefers when a request carries several signatures.
pub const PREFERRED_LABEL: &str = "sig1";
