//! Coalescing a project's rate-limit decisions in front of a limiter whose state is a round trip
//! away (PostgreSQL's shared limiter, `payments_store_postgres::PgStore::rate_limiter`): the
//! machinery of the HTTP adapter's admission, over the core's [`RateLimiter`] port.

use std::collections::HashMap;
use std::sync::{Arc, PoisonError};

use async_trait::async_trait;
use payments_core::ids::ProjectId;
use payments_core::ratelimit::{Gcra, Grant, RateDecision, RateLimiter};
use payments_core::store::StoreError;
use payments_core::Timestamp;

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
    use std::sync::atomic::Ordering;

    use payments_core::project::RateLimit;
    use payments_core::ratelimit::LocalRateLimiter;

    use super::*;

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
        let p = payments_core::testing::contract::project_id(7);
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
        let q = payments_core::testing::contract::project_id(8);
        assert_eq!(
            futures_executor::block_on(limiter.acquire(q, rule, T)),
            Ok(RateDecision::Allowed)
        );
    }

    #[test]
    fn the_coalescing_limiter_meets_the_contract() {
        let limiter = CoalescingRateLimiter::new(round_trip());
        futures_executor::block_on(payments_core::testing::contract::rate_limiter(&[
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
            let p = payments_core::testing::contract::project_id(11);
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
        let p = payments_core::testing::contract::project_id(10);
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
        let p = payments_core::testing::contract::project_id(9);
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
