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
    /// one atomic step ([`Gcra::decide_many`]), so that a [`CoalescingRateLimiter`] pays one
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
        BoundedRateLimiter {
            rule: Gcra::new(limit),
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

/// A [`RateLimiter`] in front of another whose state is a round trip away (a database):
/// while one request of a project is being decided, the project's next requests on this node
/// queue, and the next round trip decides all of them at once with
/// [`RateLimiter::acquire_many`]. So a project's requests cost one statement per batch instead
/// of one each, and they no longer queue one by one on the project's row lock; at low load a
/// request finds nothing in flight and is decided alone, without waiting.
///
/// The decisions are those of the inner limiter applied to the requests in arrival order at
/// the latest `now` of the batch, with the latest rule (a changed limit counts from the next
/// batch). Each batch is decided by one of its own requests (the first); when it is done it
/// answers the others and hands the requests queued meanwhile to the first of them. Requests
/// that went away before their batch was decided are left out of it. A leader dropped before
/// its answer (its request was cancelled) hands its batch, unanswered, back to the front of
/// the queue; when its statement had already run, that batch counts twice against the limit,
/// never less than once. A queue holds at most the server's requests in flight (the
/// in-flight limit); a request waits for the batch in flight, then for its own.
pub struct CoalescingRateLimiter {
    inner: Arc<dyn RateLimiter>,
    lanes: std::sync::Mutex<HashMap<ProjectId, Vec<Waiter>>>,
}

/// A request queued behind the batch in flight.
struct Waiter {
    rule: Gcra,
    now: Timestamp,
    answer: futures_channel::oneshot::Sender<Answer>,
}

enum Answer {
    /// The request's decision.
    Decided(Result<RateDecision, StoreError>),
    /// Lead the next batch: these requests queued after the receiver.
    Lead(Vec<Waiter>),
}

impl std::fmt::Debug for CoalescingRateLimiter {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("CoalescingRateLimiter")
            .finish_non_exhaustive()
    }
}

impl CoalescingRateLimiter {
    /// Coalesces the requests of each project in front of `inner`.
    pub fn new(inner: Arc<dyn RateLimiter>) -> Self {
        CoalescingRateLimiter {
            inner,
            lanes: std::sync::Mutex::new(HashMap::new()),
        }
    }

    fn lanes(&self) -> std::sync::MutexGuard<'_, HashMap<ProjectId, Vec<Waiter>>> {
        self.lanes.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Puts `batch` back at the front of the project's queue, ahead of the requests that
    /// queued meanwhile (it came first).
    fn requeue(&self, project: ProjectId, batch: Vec<Waiter>) {
        if batch.is_empty() {
            return;
        }
        let mut lanes = self.lanes();
        let queued = lanes.entry(project).or_default();
        let later = std::mem::replace(queued, batch);
        queued.extend(later);
    }

    /// Ends a batch: hands the requests queued meanwhile to the first of them that is still
    /// waiting, or marks the project idle. Requests that went away are dropped from the queue
    /// first (one pass), and the lead is sent outside the lock (sending wakes its task).
    fn hand_on(&self, project: ProjectId) {
        loop {
            let (first, batch) = {
                let mut lanes = self.lanes();
                let Some(queued) = lanes.get_mut(&project) else {
                    return;
                };
                queued.retain(|w| !w.answer.is_canceled());
                if queued.is_empty() {
                    lanes.remove(&project);
                    return;
                }
                let mut batch = std::mem::take(queued);
                let first = batch.remove(0);
                (first, batch)
            };
            match first.answer.send(Answer::Lead(batch)) {
                Ok(()) => return,
                // That request went away in between: the batch goes back, try the next one.
                Err(Answer::Lead(batch)) => self.requeue(project, batch),
                Err(Answer::Decided(_)) => unreachable!("sent a Lead"),
            }
        }
    }

    /// Decides the leader's own request and `others` in one round trip and answers them.
    async fn lead(
        &self,
        project: ProjectId,
        rule: Gcra,
        now: Timestamp,
        mut others: Vec<Waiter>,
    ) -> Result<RateDecision, StoreError> {
        // Requests that went away are not counted against the limit.
        others.retain(|w| !w.answer.is_canceled());
        let mut guard = HandOn {
            limiter: self,
            project,
            others,
        };
        let rule = guard.others.last().map_or(rule, |w| w.rule);
        let now = guard.others.iter().map(|w| w.now).fold(now, Ord::max);
        let n = u32::try_from(guard.others.len() + 1).unwrap_or(u32::MAX);
        let grant = self.inner.acquire_many(project, rule, now, n).await;
        let others = std::mem::take(&mut guard.others);
        for (i, waiter) in (1..).zip(others) {
            let answer = grant.clone().map(|g| g.decision(i));
            // A request that went away needs no answer.
            let _ = waiter.answer.send(Answer::Decided(answer));
        }
        drop(guard);
        grant.map(|g| g.decision(0))
    }
}

/// Hands the project's queue on when a batch ends, also when its leader is dropped mid-way or
/// its limiter panics: then the batch's other requests, unanswered, go back to the front of the
/// queue and the first of them leads them.
struct HandOn<'a> {
    limiter: &'a CoalescingRateLimiter,
    project: ProjectId,
    others: Vec<Waiter>,
}

impl Drop for HandOn<'_> {
    fn drop(&mut self) {
        self.limiter
            .requeue(self.project, std::mem::take(&mut self.others));
        self.limiter.hand_on(self.project);
    }
}

/// A request waiting in a project's queue. Dropped (its request cancelled) after the lead of
/// the next batch was sent to it but before it read it, it hands that batch on.
struct Queued<'a> {
    limiter: &'a CoalescingRateLimiter,
    project: ProjectId,
    receiver: futures_channel::oneshot::Receiver<Answer>,
}

impl Drop for Queued<'_> {
    fn drop(&mut self) {
        // After close() a send fails, so the lead is either refused to its sender (which
        // tries the next request) or already here.
        self.receiver.close();
        if let Ok(Some(Answer::Lead(batch))) = self.receiver.try_recv() {
            self.limiter.requeue(self.project, batch);
            self.limiter.hand_on(self.project);
        }
    }
}

#[async_trait]
impl RateLimiter for CoalescingRateLimiter {
    async fn acquire(
        &self,
        project: ProjectId,
        rule: Gcra,
        now: Timestamp,
    ) -> Result<RateDecision, StoreError> {
        loop {
            let receiver = {
                let mut lanes = self.lanes();
                match lanes.get_mut(&project) {
                    // Nothing in flight for the project: decide now, alone.
                    None => {
                        lanes.insert(project, Vec::new());
                        None
                    }
                    Some(queued) => {
                        let (answer, receiver) = futures_channel::oneshot::channel();
                        queued.push(Waiter { rule, now, answer });
                        Some(receiver)
                    }
                }
            };
            let Some(receiver) = receiver else {
                return self.lead(project, rule, now, Vec::new()).await;
            };
            let mut queued = Queued {
                limiter: self,
                project,
                receiver,
            };
            match (&mut queued.receiver).await {
                Ok(Answer::Decided(decision)) => return decision,
                Ok(Answer::Lead(others)) => return self.lead(project, rule, now, others).await,
                // The batch's leader went away before deciding it: ask again.
                Err(futures_channel::oneshot::Canceled) => continue,
            }
        }
    }

    async fn acquire_many(
        &self,
        project: ProjectId,
        rule: Gcra,
        now: Timestamp,
        n: u32,
    ) -> Result<Grant, StoreError> {
        self.inner.acquire_many(project, rule, now, n).await
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

    /// A limiter that suspends once in every call (a round trip), counting its calls.
    struct RoundTrip {
        inner: LocalRateLimiter,
        calls: std::sync::atomic::AtomicU32,
    }

    struct YieldOnce(bool);

    impl std::future::Future for YieldOnce {
        type Output = ();
        fn poll(
            mut self: std::pin::Pin<&mut Self>,
            cx: &mut std::task::Context<'_>,
        ) -> std::task::Poll<()> {
            if self.0 {
                std::task::Poll::Ready(())
            } else {
                self.0 = true;
                cx.waker().wake_by_ref();
                std::task::Poll::Pending
            }
        }
    }

    #[async_trait]
    impl RateLimiter for RoundTrip {
        async fn acquire(
            &self,
            project: ProjectId,
            rule: Gcra,
            now: Timestamp,
        ) -> Result<RateDecision, StoreError> {
            self.acquire_many(project, rule, now, 1)
                .await
                .map(|g| g.decision(0))
        }

        async fn acquire_many(
            &self,
            project: ProjectId,
            rule: Gcra,
            now: Timestamp,
            n: u32,
        ) -> Result<Grant, StoreError> {
            self.calls.fetch_add(1, Ordering::Relaxed);
            YieldOnce(false).await;
            self.inner.acquire_many(project, rule, now, n).await
        }
    }

    fn round_trip() -> Arc<RoundTrip> {
        Arc::new(RoundTrip {
            inner: LocalRateLimiter::new(),
            calls: std::sync::atomic::AtomicU32::new(0),
        })
    }

    const T: Timestamp = Timestamp::from_unix_millis(1_700_000_000_000);

    #[test]
    fn concurrent_requests_share_round_trips_and_get_exactly_the_burst() {
        let inner = round_trip();
        let limiter = CoalescingRateLimiter::new(inner.clone());
        let rule = Gcra::new(RateLimit {
            per_second: 1,
            burst: 5,
        });
        let p = crate::testing::contract::project_id(7);
        let results = futures_executor::block_on(futures_util::future::join_all(
            (0..24).map(|_| limiter.acquire(p, rule, T)),
        ));
        let allowed = results
            .iter()
            .filter(|r| **r == Ok(RateDecision::Allowed))
            .count();
        assert_eq!(allowed, 5, "{results:?}");
        assert!(results.iter().all(|r| r.is_ok()));
        // The first request alone, then the 23 that queued behind it in one batch.
        assert_eq!(inner.calls.load(Ordering::Relaxed), 2);
        // Another project is not held up by this one, and the lanes are empty again.
        assert!(limiter.lanes().is_empty());
        let q = crate::testing::contract::project_id(8);
        assert_eq!(
            futures_executor::block_on(limiter.acquire(q, rule, T)),
            Ok(RateDecision::Allowed)
        );
    }

    #[test]
    fn the_coalescing_limiter_meets_the_contract() {
        let limiter = CoalescingRateLimiter::new(round_trip());
        futures_executor::block_on(crate::testing::contract::rate_limiter(&[
            &limiter, &limiter, &limiter,
        ]));
    }

    /// Requests polled in a random order, a random share of them dropped at random points
    /// (cancelled while leading, queued, or holding a lead they have not read): every request
    /// that stays is answered, and the project's lane is gone at the end.
    #[test]
    fn random_cancellations_strand_no_request() {
        use std::future::Future;
        use std::task::{Context, Poll};
        for seed in 1..=300u64 {
            let mut rng = seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1;
            let mut next = move |bound: u64| {
                rng ^= rng << 13;
                rng ^= rng >> 7;
                rng ^= rng << 17;
                rng % bound
            };
            let limiter = CoalescingRateLimiter::new(round_trip());
            let rule = Gcra::new(RateLimit {
                per_second: 1,
                burst: 1_000,
            });
            let p = crate::testing::contract::project_id(11);
            let mut live: Vec<_> = (0..24)
                .map(|_| Box::pin(limiter.acquire(p, rule, T)))
                .collect();
            let waker = futures_util::task::noop_waker();
            let mut cx = Context::from_waker(&waker);
            let mut polls = 0;
            while !live.is_empty() {
                polls += 1;
                assert!(polls < 100_000, "seed {seed}: requests stranded");
                let i = usize::try_from(next(live.len() as u64)).expect("index");
                if next(10) == 0 {
                    drop(live.swap_remove(i));
                    continue;
                }
                if let Poll::Ready(result) = live[i].as_mut().poll(&mut cx) {
                    assert_eq!(result, Ok(RateDecision::Allowed), "seed {seed}");
                    drop(live.swap_remove(i));
                }
            }
            assert!(limiter.lanes().is_empty(), "seed {seed}: a lane is left");
        }
    }

    #[test]
    fn a_request_that_went_away_is_not_counted() {
        use futures_util::FutureExt;
        let inner = round_trip();
        let limiter = CoalescingRateLimiter::new(inner.clone());
        let rule = Gcra::new(RateLimit {
            per_second: 1,
            burst: 3,
        });
        let p = crate::testing::contract::project_id(10);
        let mut leader = Box::pin(limiter.acquire(p, rule, T));
        assert!((&mut leader).now_or_never().is_none());
        let mut queued: Vec<_> = (0..3)
            .map(|_| Box::pin(limiter.acquire(p, rule, T)))
            .collect();
        for q in &mut queued {
            assert!(q.now_or_never().is_none());
        }
        // The second one's client hangs up; the burst of 3 covers the three that remain.
        drop(queued.remove(1));
        let mut all = vec![leader];
        all.extend(queued);
        let results = futures_executor::block_on(futures_util::future::join_all(all));
        assert_eq!(results, vec![Ok(RateDecision::Allowed); 3]);
        assert_eq!(inner.calls.load(Ordering::Relaxed), 2);
        assert!(limiter.lanes().is_empty());
    }

    #[test]
    fn a_cancelled_leader_or_follower_holds_up_no_one() {
        use futures_util::FutureExt;
        let limiter = CoalescingRateLimiter::new(round_trip());
        let rule = Gcra::new(RateLimit {
            per_second: 1,
            burst: 100,
        });
        let p = crate::testing::contract::project_id(9);
        // The leader starts its round trip, two requests queue behind it, then the leader and
        // the first of them are dropped: the other one is still decided.
        let mut leader = Box::pin(limiter.acquire(p, rule, T));
        assert!((&mut leader).now_or_never().is_none());
        let mut first = Box::pin(limiter.acquire(p, rule, T));
        assert!((&mut first).now_or_never().is_none());
        let second = limiter.acquire(p, rule, T);
        drop(leader);
        drop(first);
        assert_eq!(
            futures_executor::block_on(second),
            Ok(RateDecision::Allowed)
        );
        assert!(limiter.lanes().is_empty());
    }
}
