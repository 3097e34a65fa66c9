//! Sign-in failures, by throttle key (an account, a user's codes, a client address): what the
//! cabinet's throttling counts.

use async_trait::async_trait;
use payments_core::store::StoreError;
use payments_core::Timestamp;

/// Which sign-in failures [`SignInFailures::delete_failures`] deletes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FailureScope<'a> {
    /// Every failure under this key (after a successful sign-in).
    Key(&'a str),
    /// Every failure before this time (retention).
    Before(Timestamp),
    /// One failure under `key` recorded at `at` (the newest such, if several): an attempt that
    /// was counted before it was checked and turned out not to be a failure (it was refused
    /// by the throttle unchecked, or it succeeded).
    One {
        /// The key.
        key: &'a str,
        /// The time it was recorded at.
        at: Timestamp,
    },
}

/// The sign-in failures the throttle counts.
#[async_trait]
pub trait SignInFailures: Send + Sync {
    /// Records a failed sign-in attempt under `key` (an account or an address).
    async fn insert_failure(&self, key: &str, at: Timestamp) -> Result<(), StoreError>;
    /// The times of `key`'s failures at or after `since`, oldest first, at most `limit`
    /// (the oldest ones when there are more).
    async fn find_failures(
        &self,
        key: &str,
        since: Timestamp,
        limit: usize,
    ) -> Result<Vec<Timestamp>, StoreError>;
    /// Deletes the failures `which` names; returns how many.
    async fn delete_failures(&self, which: FailureScope<'_>) -> Result<u64, StoreError>;
}
