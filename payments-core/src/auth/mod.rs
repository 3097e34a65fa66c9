//! Request authentication: project tokens and scopes, RFC 9421 Ed25519 request signatures with RFC 9530 `Content-Digest`, nonces and the IP allow-list.
pub mod scope;
pub use scope::Scope;
