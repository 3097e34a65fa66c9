//! Per-project request rate limits: the rule (GCRA, the generic cell rate algorithm) and the
//! port that keeps its one number of state per project.
//!
//! A project's [`RateLimit`] (`per_second`, `burst`) becomes a [`Gcra`]: requests are spaced
//! one *emission interval* (`1 s / per_second`) apart, and up to `burst` of them may come at
//! once. The only state is the *theoretical arrival time* (TAT) of the project's next request;
//! a request at `now` is allowed when `max(tat, now) - now <= tolerance` (the tolerance is
//! `(burst - 1)` emission intervals) and then moves the TAT one interval on; otherwise it is
//! refused until `max(tat, now) - tolerance`. Times are microseconds since the Unix epoch, so
//! rates above 1000/s keep their spacing.
//!
//! Where the TAT lives is the [`RateLimiter`] port's business: [`LocalRateLimiter`] keeps it
//! in this process (exact for one process: the embedded SQLite deployment), a database-backed
//! limiter keeps it in one row per project so that N nodes share one limit (the PostgreSQL
//! adapter). Either applies [`Gcra::decide`] atomically per project.

use std::collections::HashMap;
use std::sync::atomic::{AtomicI64, Ordering};
use std::sync::{Arc, PoisonError, RwLock};
use std::time::Duration;

use async_trait::async_trait;

use crate::clock::Timestamp;
use crate::ids::ProjectId;
use crate::project::RateLimit;
use crate::store::StoreError;

/// The default budget of a project's merchant-triggered callback resends
/// ([`ServiceConfig::resend_budget`](crate::service::ServiceConfig::resend_budget)): 1,000 at
/// once (one whole `POST /api/v1/events/recover`), then 5 a second (18,000 an hour).
///
/// Why: every resend is a request the dispatcher makes to the merchant's receiver, and a
/// resend costs the merchant one API request, so without a budget of its own one project
/// could queue callbacks 50 times a second for as long as it likes. At 5 a second a project's
/// resends are drained even by receivers that never answer (its share of the dispatcher, half
/// of the global slots, each held for the 10 s attempt timeout, makes 12.8 attempts a
/// second), so what it has queued stays about one burst. A merchant recovering from an
/// outage resends its failed callbacks in one call; clicking "send callback" by hand never
/// meets the limit.
pub const RESEND_BUDGET: RateLimit = RateLimit {
    per_second: 5,
    burst: 1_000,
};

/// A wait as a `Retry-After` value: whole seconds, rounded up, at least 1 (a client that
/// waits what it is told must not come back a moment early, nor be told 0).
pub fn retry_after_secs(wait: Duration) -> u64 {
    let secs = wait.as_secs() + u64::from(wait.subsec_nanos() > 0);
    secs.max(1)
}

/// The GCRA parameters of a rate limit, in microseconds.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Gcra {
    /// The spacing of requests at the sustained rate: `1 s / per_second`.
    pub emission_us: i64,
    /// How far ahead of `now` the TAT may be for a request to pass: `(burst - 1)` intervals.
    pub tolerance_us: i64,
}

/// What [`Gcra::decide`] or a [`RateLimiter`] decided about one request.
#[non_exhaustive]
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RateDecision {
    /// The request passes (and counted against the limit).
    Allowed,
    /// Over the limit: the next request passes after this long.
    Limited {
        /// The wait until a request would pass.
        retry_after: Duration,
    },
}

impl Gcra {
    /// The rule of a project's limit. A zero rate or burst counts as 1 (the operator API
    /// refuses them; a stored zero must not divide by zero).
    pub fn new(limit: RateLimit) -> Gcra {
        let per_second = i64::from(limit.per_second.max(1));
        let burst = i64::from(limit.burst.max(1));
        let emission_us = (1_000_000 / per_second).max(1);
        Gcra {
            emission_us,
            tolerance_us: emission_us.saturating_mul(burst - 1),
        }
    }

    /// `now` in the rule's unit.
    pub fn micros(now: Timestamp) -> i64 {
        now.unix_millis().saturating_mul(1000)
    }

    /// The decision for a request at `now_us` given the stored TAT (`None`: the project has no
    /// state yet), with the TAT to store when it passes.
    pub fn decide(&self, tat_us: Option<i64>, now_us: i64) -> (RateDecision, Option<i64>) {
        let tat = tat_us.map_or(now_us, |t| t.max(now_us));
        let ahead = tat - now_us;
        if ahead <= self.tolerance_us {
            (RateDecision::Allowed, Some(tat + self.emission_us))
        } else {
            let wait = u64::try_from(ahead - self.tolerance_us).unwrap_or(0);
            (
                RateDecision::Limited {
                    retry_after: Duration::from_micros(wait),
                },
                None,
            )
        }
    }

    /// The decision for `n` requests at `now_us` given the stored TAT, in one step: exactly
    /// what `n` calls of [`Gcra::decide`] in a row would decide (the first ones pass while the
    /// tolerance allows, every later one is refused with the same wait), and the TAT to store
    /// when any passed. One database statement can so decide a whole batch.
    pub fn decide_many(&self, tat_us: Option<i64>, now_us: i64, n: u32) -> (Grant, Option<i64>) {
        let tat = tat_us.map_or(now_us, |t| t.max(now_us));
        let ahead = tat - now_us;
        let room = if ahead > self.tolerance_us {
            0
        } else {
            (self.tolerance_us - ahead) / self.emission_us + 1
        };
        let allowed = u32::try_from(room.min(i64::from(n))).unwrap_or(n);
        let moved = tat.saturating_add(self.emission_us.saturating_mul(i64::from(allowed)));
        let retry_after = (allowed < n).then(|| {
            Duration::from_micros(u64::try_from(moved - now_us - self.tolerance_us).unwrap_or(0))
        });
        (
            Grant {
                allowed,
                retry_after,
            },
            (allowed > 0).then_some(moved),
        )
    }
}

/// What [`Gcra::decide_many`] or [`RateLimiter::acquire_many`] decided about several requests
/// of one project at one moment, in their order: the first `allowed` pass, the rest are
/// refused.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Grant {
    /// How many of the requests pass (the first ones).
    pub allowed: u32,
    /// The wait until a request would pass, when some were refused (`None`: all passed).
    pub retry_after: Option<Duration>,
}

impl Grant {
    /// The decision about the `i`-th request (from 0) of the batch.
    pub fn decision(&self, i: u32) -> RateDecision {
        match self.retry_after {
            Some(retry_after) if i >= self.allowed => RateDecision::Limited { retry_after },
            _ => RateDecision::Allowed,
        }
    }
}

/// The rate-limit port: takes one request from a project's allowance, atomically for everyone
/// who shares the limiter (one process, or every node on one database). A store failure is
/// the caller's to answer (the service answers `503`, never an unlimited pass).
#[async_trait]
pub trait RateLimiter: Send + Sync {
    /// Applies `rule` to one request of `project` at `now`.
    async fn acquire(
        &self,
        project: ProjectId,
        rule: Gcra,
        now: Timestamp,
    ) -> Result<RateDecision, StoreError>;

    /// Applies `rule` to `n` requests of `project` at `now`, in their order: what `n` calls
    /// of [`RateLimiter::acquire`] in a row would decide. The limiters here override it with
    /// one atomic step ([`Gcra::decide_many`]), so that a coalescing limiter (`payments_http::coalescing`) pays one
    /// round trip for a whole batch. The default asks [`RateLimiter::acquire`] until it
    /// refuses (a refusal changes no state, so the rest of the batch is refused with the same
    /// wait); it is not atomic as a whole: another caller's requests may pass in between.
    async fn acquire_many(
        &self,
        project: ProjectId,
        rule: Gcra,
        now: Timestamp,
        n: u32,
    ) -> Result<Grant, StoreError> {
        let mut allowed = 0;
        while allowed < n {
            match self.acquire(project, rule, now).await? {
                RateDecision::Allowed => allowed += 1,
                RateDecision::Limited { retry_after } => {
                    return Ok(Grant {
                        allowed,
                        retry_after: Some(retry_after),
                    })
                }
            }
        }
        Ok(Grant {
            allowed,
            retry_after: None,
        })
    }
}

/// The in-process limiter: one TAT per project in an atomic, updated with compare-and-swap (the
/// table is read-locked on the hot path; only a project seen for the first time writes). Exact
/// for one process; N processes each give a project its whole limit.
#[derive(Debug, Default)]
pub struct LocalRateLimiter {
    tats: RwLock<HashMap<ProjectId, Arc<AtomicI64>>>,
}

impl LocalRateLimiter {
    /// An empty limiter.
    pub fn new() -> Self {
        Self::default()
    }

    fn cell(&self, project: ProjectId) -> Arc<AtomicI64> {
        if let Some(cell) = self
            .tats
            .read()
            .unwrap_or_else(PoisonError::into_inner)
            .get(&project)
        {
            return cell.clone();
        }
        self.tats
            .write()
            .unwrap_or_else(PoisonError::into_inner)
            .entry(project)
            .or_insert_with(|| Arc::new(AtomicI64::new(i64::MIN)))
            .clone()
    }
}

#[async_trait]
impl RateLimiter for LocalRateLimiter {
    async fn acquire(
        &self,
        project: ProjectId,
        rule: Gcra,
        now: Timestamp,
    ) -> Result<RateDecision, StoreError> {
        self.acquire_many(project, rule, now, 1)
            .await
            .map(|grant| grant.decision(0))
    }

    async fn acquire_many(
        &self,
        project: ProjectId,
        rule: Gcra,
        now: Timestamp,
        n: u32,
    ) -> Result<Grant, StoreError> {
        let cell = self.cell(project);
        let now_us = Gcra::micros(now);
        let mut current = cell.load(Ordering::Acquire);
        loop {
            let stored = (current != i64::MIN).then_some(current);
            let (grant, next) = rule.decide_many(stored, now_us, n);
            let Some(next) = next else {
                return Ok(grant);
            };
            match cell.compare_exchange_weak(current, next, Ordering::AcqRel, Ordering::Acquire) {
                Ok(_) => return Ok(grant),
                Err(seen) => current = seen,
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_retry_after_is_whole_seconds_rounded_up_and_never_zero() {
        assert_eq!(retry_after_secs(Duration::ZERO), 1);
        assert_eq!(retry_after_secs(Duration::from_millis(200)), 1);
        assert_eq!(retry_after_secs(Duration::from_secs(1)), 1);
        assert_eq!(retry_after_secs(Duration::from_millis(1_001)), 2);
    }

    /// Each key has its own allowance, and a flood of made-up keys holds at most the
    /// capacity; keys at rest go first, and a key dropped for room starts afresh.
    #[test]
    fn burst_then_the_sustained_rate() {
        let rule = Gcra::new(RateLimit {
            per_second: 4,
            burst: 3,
        });
        assert_eq!(rule.emission_us, 250_000);
        assert_eq!(rule.tolerance_us, 500_000);
        let mut tat = None;
        let now = 1_000_000_000;
        for _ in 0..3 {
            let (d, next) = rule.decide(tat, now);
            assert_eq!(d, RateDecision::Allowed);
            tat = next;
        }
        let (d, next) = rule.decide(tat, now);
        assert_eq!(
            d,
            RateDecision::Limited {
                retry_after: Duration::from_millis(250)
            }
        );
        assert_eq!(next, None, "a refused request changes nothing");
        assert_eq!(
            rule.decide(tat, now + 249_999).0,
            RateDecision::Limited {
                retry_after: Duration::from_micros(1)
            }
        );
        let (d, _) = rule.decide(tat, now + 250_000);
        assert_eq!(d, RateDecision::Allowed);
        // After a long idle time the whole burst is available again, not more.
        let later = now + 60_000_000;
        for _ in 0..3 {
            let (d, next) = rule.decide(tat, later);
            assert_eq!(d, RateDecision::Allowed);
            tat = next;
        }
        assert!(matches!(
            rule.decide(tat, later).0,
            RateDecision::Limited { .. }
        ));
    }

    #[test]
    fn zero_settings_do_not_divide_by_zero() {
        let rule = Gcra::new(RateLimit {
            per_second: 0,
            burst: 0,
        });
        assert_eq!(rule.emission_us, 1_000_000);
        assert_eq!(rule.tolerance_us, 0);
        let fast = Gcra::new(RateLimit {
            per_second: 5_000_000,
            burst: 1,
        });
        assert_eq!(fast.emission_us, 1);
    }

    proptest::proptest! {
        /// One step for `n` requests decides what `n` single steps in a row decide.
        #[test]
        fn decide_many_is_n_decides(
            per_second in 1u32..5_000,
            burst in 1u32..200,
            tat_ahead in proptest::option::of(-5_000_000i64..5_000_000),
            n in 0u32..300,
        ) {
            let rule = Gcra::new(RateLimit { per_second, burst });
            let now = 1_700_000_000_000_000i64;
            let start = tat_ahead.map(|a| now + a);
            let (grant, stored) = rule.decide_many(start, now, n);
            let mut tat = start;
            let mut moved = None;
            for i in 0..n {
                let (d, next) = rule.decide(tat, now);
                proptest::prop_assert_eq!(grant.decision(i), d, "request {}", i);
                if let Some(next) = next {
                    tat = Some(next);
                    moved = Some(next);
                }
            }
            proptest::prop_assert_eq!(stored, moved);
            proptest::prop_assert_eq!(grant.retry_after.is_some(), grant.allowed < n);
        }
    }
}
