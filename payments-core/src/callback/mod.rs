//! Callbacks: HMAC-SHA256 signing and verification, destination precedence and address policy, the retry schedule.
pub mod address;
pub mod url;
