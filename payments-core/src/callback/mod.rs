//! Callbacks: HMAC-SHA256 signing and verification, destination precedence and address policy, the retry schedule.
//!
//! - [`address`]: which IP addresses a callback may be delivered to ([`check_ip`]).
//! - [`destination`]: the validated [`CallbackUrl`] and the destination precedence.
//! - [`signing`]: callback secrets, their rotation and the `X-Callback-Signature` header.
//! - [`verifier`]: the receiver's check, as a merchant's code would run it.
//! - [`schedule`]: delivery attempts and their delays, as pure data.

pub mod address;
pub mod destination;
pub mod schedule;
pub mod signing;
pub mod verifier;

pub use address::{check_ip, AddressPolicy, Embedding, ForbiddenAddress, RangeKind};
pub use destination::{
    resolve_destination, CallbackHost, CallbackUrl, CallbackUrlError, MAX_URL_LENGTH,
};
pub use schedule::{
    RetryDelaysError, RetrySchedule, ATTEMPT_TIMEOUT, MAX_DELAY, MAX_DELAYS, RESPONSE_READ_LIMIT,
};
pub use signing::{
    sign_payload, signature_header, AttemptSignature, CallbackSecret, CallbackSecretError,
    CallbackSecrets, DatedSecret, EVENT_ID_HEADER, MIN_SECRET_CHARS, ROTATION_OVERLAP,
    SECRET_PREFIX, SIGNATURE_HEADER, TIMESTAMP_HEADER,
};
pub use verifier::{
    CallbackVerifier, CallbackVerifyError, MemoryProcessedEvents, ProcessedEvents,
    EVENT_ID_RETENTION, TIMESTAMP_TOLERANCE,
};
