//! The payer page status poll's limits in this process (the rule's figures are the core's,
//! `payments_core::payer::STATUS_*`), the "I paid" forms' per source
//! ([`BoundedRateLimiter::appeal_forms`]), and the bounded limiter that keeps them.

use std::collections::HashMap;
use std::sync::PoisonError;

use payments_core::payer::{APPEAL_FORMS_BURST, APPEAL_FORMS_INTERVAL, APPEAL_LIMIT_KEYS};
use payments_core::payer::{STATUS_LIMIT_KEYS, STATUS_PER_LINK, STATUS_PER_SOURCE};
use payments_core::project::RateLimit;
use payments_core::ratelimit::{Gcra, RateDecision};
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

/// An in-process limiter of many keys under one rule (a source address, a link), in bounded
/// memory: at most `capacity` keys are held, each as a 64-bit hash of the key (SipHash with
/// this limiter's random keys, so a client cannot choose keys that collide) and its TAT,
/// whatever the keys' length. When a new key finds the table full, the keys at rest (a TAT
/// not after `now`, which is the same as no state) are dropped; if more than three quarters
/// are still held, arbitrary keys are dropped down to three quarters, and each starts afresh
/// (a dropped key passes sooner, never later). So a flood of made-up keys costs at most
/// `capacity` entries, and the table is swept at most once every `capacity / 4` new keys.
/// Exact for one process; N processes each allow a key its whole limit.
#[derive(Debug)]
pub struct BoundedRateLimiter {
    rule: Gcra,
    capacity: usize,
    hasher: std::collections::hash_map::RandomState,
    tats: std::sync::Mutex<HashMap<u64, i64>>,
}

impl BoundedRateLimiter {
    /// `limit` for each key, at most `capacity` keys (at least 4) held.
    pub fn new(limit: RateLimit, capacity: usize) -> Self {
        BoundedRateLimiter::with_rule(Gcra::new(limit), capacity)
    }

    /// `rule` for each key (a rate below one a second, which a [`RateLimit`] cannot say), at
    /// most `capacity` keys (at least 4) held.
    pub fn with_rule(rule: Gcra, capacity: usize) -> Self {
        BoundedRateLimiter {
            rule,
            capacity: capacity.max(4),
            hasher: std::collections::hash_map::RandomState::new(),
            tats: std::sync::Mutex::new(HashMap::new()),
        }
    }

    /// Applies the rule to one request of `key` at `now`.
    pub fn acquire(&self, key: &str, now: Timestamp) -> RateDecision {
        use std::hash::BuildHasher as _;
        let hash = self.hasher.hash_one(key);
        let now_us = Gcra::micros(now);
        let mut tats = self.tats.lock().unwrap_or_else(PoisonError::into_inner);
        if !tats.contains_key(&hash) && tats.len() >= self.capacity {
            self.make_room(&mut tats, now_us);
        }
        let (decision, next) = self.rule.decide(tats.get(&hash).copied(), now_us);
        if let Some(next) = next {
            tats.insert(hash, next);
        }
        debug_assert!(tats.len() <= self.capacity);
        decision
    }

    /// The payer page's "I paid" forms per source: the core's figures
    /// ([`APPEAL_FORMS_BURST`] at once, one every [`APPEAL_FORMS_INTERVAL`]), at most
    /// [`APPEAL_LIMIT_KEYS`] sources held, in this process.
    pub fn appeal_forms() -> Self {
        let emission_us = i64::try_from(APPEAL_FORMS_INTERVAL.as_micros()).unwrap_or(i64::MAX);
        let rule = Gcra {
            emission_us,
            tolerance_us: emission_us.saturating_mul(i64::from(APPEAL_FORMS_BURST) - 1),
        };
        BoundedRateLimiter::with_rule(rule, APPEAL_LIMIT_KEYS)
    }

    /// How many keys are held.
    pub fn len(&self) -> usize {
        self.tats
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .len()
    }

    /// Whether no key is held.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Drops the keys at rest, then arbitrary keys down to three quarters of the capacity.
    fn make_room(&self, tats: &mut HashMap<u64, i64>, now_us: i64) {
        tats.retain(|_, tat| *tat > now_us);
        let keep = self.capacity / 4 * 3;
        if tats.len() > keep {
            let drop: Vec<u64> = tats.keys().take(tats.len() - keep).copied().collect();
            for key in drop {
                tats.remove(&key);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;

    #[test]
    fn a_bounded_limiter_limits_each_key_and_holds_at_most_its_capacity() {
        let at = |ms: i64| Timestamp::from_unix_millis(1_700_000_000_000 + ms);
        let l = BoundedRateLimiter::new(
            RateLimit {
                per_second: 1,
                burst: 3,
            },
            100,
        );
        for _ in 0..3 {
            assert_eq!(l.acquire("a", at(0)), RateDecision::Allowed);
        }
        assert_eq!(
            l.acquire("a", at(0)),
            RateDecision::Limited {
                retry_after: Duration::from_secs(1)
            }
        );
        assert_eq!(l.acquire("b", at(0)), RateDecision::Allowed, "its own");
        assert_eq!(l.acquire("a", at(1_000)), RateDecision::Allowed);
        for i in 0..10_000 {
            l.acquire(&format!("made-up-{i}"), at(1_000));
            assert!(l.len() <= 100);
        }
        // Long after, every key is at rest: a new key that finds the table full sweeps them.
        let full = BoundedRateLimiter::new(RateLimit::default(), 4);
        for key in ["1", "2", "3", "4"] {
            full.acquire(key, at(0));
        }
        assert_eq!(full.len(), 4);
        assert_eq!(full.acquire("5", at(60_000)), RateDecision::Allowed);
        assert_eq!(full.len(), 1);
    }
}
