//! The cabinet's settings: timeouts, throttling limits, the password pool, retention.

use std::time::Duration;

/// A throttling limit: at most `attempts` failures within `window`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Limit {
    /// Failures allowed in the window.
    pub attempts: usize,
    /// The window.
    pub window: Duration,
}

/// The cabinet's settings.
#[derive(Debug, Clone)]
pub struct CabinetConfig {
    /// The issuer shown by authenticator apps (`otpauth://` URI).
    pub issuer: String,
    /// A signed-in session ends after this long without a request (30 min).
    pub idle_timeout: Duration,
    /// A session ends this long after sign-in whatever happens (12 h).
    pub absolute_timeout: Duration,
    /// A session that passed the password step has this long for the second factor (10 min).
    pub second_factor_timeout: Duration,
    /// How long an invitation link works (72 h).
    pub invite_ttl: Duration,
    /// Failed passwords per account (e-mail): 5 per 15 min.
    pub account_limit: Limit,
    /// Failed codes (TOTP or recovery) per user: 5 per 15 min.
    pub code_limit: Limit,
    /// Failed attempts of any kind per client address: 20 per 15 min.
    pub address_limit: Limit,
    /// `last_seen_at` is written at most this often per session (1 min).
    pub touch_interval: Duration,
    /// Password checks and hashes (argon2id, about 19 MiB and tens of milliseconds of one
    /// core each) that run at once: half the cores, at least one. The rest of the cores
    /// stay the APIs', and the memory they take is bounded by this number.
    pub password_checks: usize,
    /// How long a sign-in waits for a free password check before it is answered
    /// `503` with `Retry-After` ([`SignInError::Busy`](super::SignInError::Busy)) (2 s).
    pub password_wait: Duration,
    /// Cabinet audit records older than this are deleted (400 days, like the core's audit
    /// records); `None` keeps them however old.
    pub audit_retention: Option<Duration>,
    /// At most this many cabinet audit records are kept, the oldest deleted first (one
    /// million: with inputs cut to 254 characters, a few hundred MiB at most); `None` sets no
    /// bound. Whatever fills the log, its size stays bounded.
    pub audit_max_records: Option<u64>,
    /// How long a one-time slot waits for the page it was made for (5 min): a value shown
    /// once, or a refused form carried through the redirect to the page that shows it again
    /// ([`Slots::insert`](super::Slots::insert)).
    pub slot_ttl: Duration,
    /// The most one-time slots one session holds (16); a new one deletes the session's
    /// oldest beyond it, so reloading a refused form in a loop keeps a bounded number.
    pub slots_per_session: usize,
    /// The most one-time slots kept in all (100,000, a few hundred bytes each); the purge
    /// deletes those that expire first beyond it.
    pub slots_max: u64,
}

impl Default for CabinetConfig {
    fn default() -> Self {
        let fifteen = Duration::from_secs(15 * 60);
        CabinetConfig {
            issuer: "Payments".to_string(),
            idle_timeout: Duration::from_secs(30 * 60),
            absolute_timeout: Duration::from_secs(12 * 3600),
            second_factor_timeout: Duration::from_secs(10 * 60),
            invite_ttl: Duration::from_secs(72 * 3600),
            account_limit: Limit {
                attempts: 5,
                window: fifteen,
            },
            code_limit: Limit {
                attempts: 5,
                window: fifteen,
            },
            address_limit: Limit {
                attempts: 20,
                window: fifteen,
            },
            touch_interval: Duration::from_secs(60),
            password_checks: std::thread::available_parallelism()
                .map_or(1, |n| n.get() / 2)
                .max(1),
            password_wait: Duration::from_secs(2),
            audit_retention: Some(Duration::from_secs(400 * 86_400)),
            audit_max_records: Some(1_000_000),
            slot_ttl: Duration::from_secs(5 * 60),
            slots_per_session: 16,
            slots_max: 100_000,
        }
    }
}

/// The audit records one retention batch deletes at most ([`Cabinet::purge`](super::Cabinet::purge)).
pub const AUDIT_PURGE_BATCH: usize = 1000;
/// The batches one [`Cabinet::purge`](super::Cabinet::purge) runs at most: 100,000 records a call, so a log that
/// grew far past its bound shrinks back within minutes without holding the writer long.
pub const AUDIT_PURGE_BATCHES: usize = 100;
