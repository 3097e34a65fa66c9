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
        let cell = self.cell(project);
        let now_us = Gcra::micros(now);
        let mut current = cell.load(Ordering::Acquire);
        loop {
            let stored = (current != i64::MIN).then_some(current);
            let (decision, next) = rule.decide(stored, now_us);
            let Some(next) = next else {
                return Ok(decision);
            };
            match cell.compare_exchange_weak(current, next, Ordering::AcqRel, Ordering::Acquire) {
                Ok(_) => return Ok(decision),
                Err(seen) => current = seen,
            }
        }
    }
}

/// No limit at all: every request passes. For tests and embedders that limit elsewhere.
#[derive(Debug, Default, Clone, Copy)]
pub struct Unlimited;

#[async_trait]
impl RateLimiter for Unlimited {
    async fn acquire(
        &self,
        _project: ProjectId,
        _rule: Gcra,
        _now: Timestamp,
    ) -> Result<RateDecision, StoreError> {
        Ok(RateDecision::Allowed)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

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
}
