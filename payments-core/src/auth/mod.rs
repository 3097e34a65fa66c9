//! Request authentication: project tokens and scopes, RFC 9421 Ed25519 request signatures with
//! RFC 9530 `Content-Digest`, nonces and the IP allow-list.
//!
//! Everything here is pure: the caller passes `now`, randomness and the stored key or token hash;
//! nothing reads a clock, the OS generator or a file.

pub mod allowlist;
pub mod batch;
pub mod digest;
pub mod keys;
pub mod nonce;
mod sf;
pub mod signature;
pub mod token;
pub mod verifier;

pub use allowlist::{
    canonical_network, client_ip, AllowListError, IpAllowList, IpRefusal, UnknownClient,
};
pub use digest::{content_digest_header, verify_content_digest, DigestError};
pub use keys::{keyid, parse_public_key, parse_signing_key_pem, KeyError};
pub use nonce::{Nonce, NonceError, NONCE_RETENTION};
pub use signature::{
    HttpRequestParts, PreparedSignature, SignatureError, SignatureFailure, SignaturePolicy,
    VerifiedSignature,
};
pub use token::{Endpoint, Environment, MissingScope, Scope, TokenHash, TokenRefusal};
