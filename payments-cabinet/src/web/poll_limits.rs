//! The payer page status poll's limits in this process (the rule's figures are the core's,
//! `payments_core::payer::STATUS_*`).

use payments_core::payer::{STATUS_LIMIT_KEYS, STATUS_PER_LINK, STATUS_PER_SOURCE};
use payments_core::project::RateLimit;
use payments_core::ratelimit::{BoundedRateLimiter, RateDecision};
use payments_core::Timestamp;

/// The payer page status poll's limits: per source, then per link
/// ([`STATUS_PER_SOURCE`], [`STATUS_PER_LINK`] of the core's payer page rules), each in a [`BoundedRateLimiter`] of
/// [`STATUS_LIMIT_KEYS`] keys (about 2 MiB each at most), in this process. The source is
/// asked first: a source over its limit spends nothing of the links', so a flood of made-up
/// links from one address fills no table; from many addresses it fills at most the bound.
/// The links are counted before they are looked up, known or not: the lookup is what costs.
#[derive(Debug)]
pub struct StatusPollLimits {
    by_source: BoundedRateLimiter,
    by_link: BoundedRateLimiter,
}

impl Default for StatusPollLimits {
    fn default() -> Self {
        StatusPollLimits::new(STATUS_PER_SOURCE, STATUS_PER_LINK, STATUS_LIMIT_KEYS)
    }
}

impl StatusPollLimits {
    /// Limits of `per_source` and `per_link`, each holding at most `keys` keys.
    pub fn new(per_source: RateLimit, per_link: RateLimit, keys: usize) -> Self {
        StatusPollLimits {
            by_source: BoundedRateLimiter::new(per_source, keys),
            by_link: BoundedRateLimiter::new(per_link, keys),
        }
    }

    /// Whether a status request for `token` from `source` (as the cabinet groups addresses;
    /// `None` when the address is unknown: only the link's limit applies) passes at `now`.
    pub fn acquire(&self, source: Option<&str>, token: &str, now: Timestamp) -> RateDecision {
        if let Some(source) = source {
            let decision = self.by_source.acquire(source, now);
            if decision != RateDecision::Allowed {
                return decision;
            }
        }
        self.by_link.acquire(token, now)
    }

    /// How many sources and links the limits hold.
    pub fn held(&self) -> (usize, usize) {
        (self.by_source.len(), self.by_link.len())
    }
}
