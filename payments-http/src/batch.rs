//! Verifying the signatures of concurrent requests in batches ([`auth::batch`]): the
//! merchant API's [`SignatureVerifier`], which the core's gate asks through its port.
//!
//! A request that will verify a signature [announces](SignatureBatcher::announce) it before
//! it reads its credentials; when it has its key it [submits](SignatureBatcher::verify) the
//! signature. The first submission into an empty queue leads a batch: it waits until every
//! request announced before it submitted has submitted or given up (requests announced later
//! join the batch if they submit while it waits, but are not waited for, so a steady stream of
//! requests cannot keep a batch open), or the batch holds `max_batch` signatures, or `max_wait`
//! has passed, whichever comes first; then it verifies the whole
//! batch on its own task ([`verify_each`]: the strict per-signature checks, one batch
//! equation, and each signature alone when the batch fails) and answers the others.
//!
//! Before it checks those conditions the leader yields to the executor (its task goes to the
//! back of its thread's run queue), and again while signatures keep joining, up to
//! [`MAX_YIELDS`] times: the requests that are ready to run on the same thread reach their own
//! verification meanwhile and join the batch. Without that, a request whose credentials are
//! read without a suspension point (the SQLite store reads on the request's thread when a
//! connection is free) would always find itself alone. A request that finds nothing announced
//! and follows a batch of one (no sign of concurrent requests) is verified at once, without
//! yielding: at low load no request waits or is polled again. Under load the batches start
//! from two requests that overlap on two threads, and keep going while they hold more than one
//! signature.
//!
//! Under a steady stream of requests a batch also waits for the signatures expected to arrive
//! in a quarter of `max_wait` at the recent rate ([`FILL_BUDGET_DIVISOR`]): at 17,000 creates a
//! second and the default bound of 1 ms, about four (fewer than [`MIN_RATE_FILL`] are not
//! waited for). Batches then stop being as short as the overlap of two threads makes them
//! (about three signatures on average on two cores), without a wait at moderate load: at 5,000
//! a second and the default bound the expected fill is mostly one, and nothing more is waited
//! for. The rate is counted per millisecond of the
//! service clock. A rate does not say how many clients send it: a few clients that each wait
//! for their answer before sending again cannot fill a batch that already holds all their
//! requests. So when a batch reaches its bound short of its fill, later fills are capped at
//! the size it had, and the cap rises again with the first batch that grows past it.
//!
//! The bound: a request waits for its batch at most `max_wait` (of the service clock) plus the
//! batch's own verification. A follower whose leader went away without answering (a panic)
//! verifies its signature alone; a leader whose task is dropped while it waits verifies and
//! answers its batch in the drop.
//!
//! [`auth::batch`]: payments_core::auth::batch

use std::future::Future;
use std::pin::Pin;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Mutex, MutexGuard};
use std::task::{Context, Poll, Waker};
use std::time::Duration;

use ed25519_dalek::Signature;
use futures_channel::oneshot;

use async_trait::async_trait;
use payments_core::auth::batch::{verify_alone, verify_each, CachedKey, Check, KeyCache};
use payments_core::auth::verifier::{announce, Announcement, BatchStats, SignatureVerifier};
use payments_core::Clock;

/// How many signatures a batch holds at most by default.
pub const DEFAULT_MAX_BATCH: usize = 64;
/// How long a request waits for its batch at most by default.
pub const DEFAULT_MAX_WAIT: Duration = Duration::from_millis(1);
/// How many times a batch's leader yields to the executor at most while signatures join.
pub const MAX_YIELDS: u32 = 8;
/// A batch waits, besides, for the signatures expected in `max_wait / FILL_BUDGET_DIVISOR` at
/// the recent arrival rate (see the module documentation).
pub const FILL_BUDGET_DIVISOR: u32 = 4;
/// ...when at least this many are expected. A batch of two saves little against the wait,
/// which a server short of work (a few clients, each waiting for its answer) pays in
/// throughput: 3 % fewer creates/s at 4 connections when batches waited for two.
pub const MIN_RATE_FILL: usize = 3;

/// The batches of concurrent requests' signatures, and the cache of decompressed keys.
pub struct SignatureBatcher {
    queue: Mutex<Queue>,
    keys: KeyCache,
    max_batch: usize,
    /// Signatures a batch waits for (within `max_wait`) once batches form; 1: none.
    min_fill: usize,
    max_wait: Duration,
    batches: AtomicU64,
    signatures: AtomicU64,
    fallbacks: AtomicU64,
    timeouts: AtomicU64,
}

impl std::fmt::Debug for SignatureBatcher {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SignatureBatcher")
            .field("max_batch", &self.max_batch)
            .field("max_wait", &self.max_wait)
            .field("stats", &self.stats())
            .finish_non_exhaustive()
    }
}

impl Default for SignatureBatcher {
    fn default() -> Self {
        SignatureBatcher::new(DEFAULT_MAX_BATCH, DEFAULT_MAX_WAIT)
    }
}

#[derive(Default)]
struct Queue {
    pending: Vec<Entry>,
    /// Requests announced and neither submitted nor given up.
    announced: usize,
    /// The number the next announcement gets.
    next_seq: u64,
    /// The current batch waits for the announcements numbered below this...
    horizon: u64,
    /// ...of which this many have neither submitted nor given up.
    waiting_for: usize,
    /// The waiting leader of the current batch.
    leader: Option<Waker>,
    /// The size of the last batch (1 for a request verified alone).
    last_batch: usize,
    /// Signatures the current batch waits for once every request announced before it has
    /// submitted (at least the batcher's `min_fill`).
    fill: usize,
    /// The recent rate of submissions.
    rate: Rate,
    /// The most signatures the rate may make a batch wait for: the size of the last batch
    /// that reached its bound short of its fill, raised by any larger batch since; `None`
    /// before any such batch.
    ceiling: Option<usize>,
}

/// Submissions per millisecond of the service clock, smoothed over the last few milliseconds.
#[derive(Debug, Default, Clone, Copy)]
struct Rate {
    /// The millisecond being counted...
    ms: i64,
    /// ...and the submissions in it so far.
    count: u32,
    /// The smoothed rate up to that millisecond.
    per_ms: f64,
}

impl Rate {
    /// Counts a submission at `now` (unix milliseconds). When the millisecond has moved on,
    /// the count of the last one, spread over the milliseconds since, is averaged into the
    /// rate, and the rate so far keeps half its weight per millisecond passed. A time a little
    /// before the millisecond being counted (the clock is read before the lock, so threads
    /// can tick out of order) counts in it; a jump of a second or more either way starts the
    /// rate again.
    fn tick(&mut self, now: i64) {
        let elapsed = now.saturating_sub(self.ms);
        if (-999..=0).contains(&elapsed) {
            self.count = self.count.saturating_add(1);
            return;
        }
        self.per_ms = if (1..1000).contains(&elapsed) {
            let keep = 0.5f64.powi(elapsed as i32);
            self.per_ms * keep + f64::from(self.count) / elapsed as f64 * (1.0 - keep)
        } else {
            0.0
        };
        self.ms = now;
        self.count = 1;
    }

    /// The signatures expected in `budget` at this rate, rounded down (a hair above, so that
    /// a product that should be whole is not one short).
    fn expected_in(&self, budget: Duration) -> usize {
        (self.per_ms * budget.as_secs_f64() * 1000.0 + 1e-9) as usize
    }
}

impl Queue {
    /// The announcement `seq` is resolved (submitted or given up).
    fn resolve(&mut self, seq: u64) {
        self.announced = self.announced.saturating_sub(1);
        if !self.pending.is_empty() && seq < self.horizon {
            self.waiting_for = self.waiting_for.saturating_sub(1);
        }
    }
}

struct Entry {
    key: CachedKey,
    message: Vec<u8>,
    signature: Signature,
    /// `None` for the leader's own entry (it reads its answer from the batch).
    reply: Option<oneshot::Sender<bool>>,
}

impl SignatureBatcher {
    /// Batches of at most `max_batch` signatures, for which a request waits at most
    /// `max_wait`.
    pub fn new(max_batch: usize, max_wait: Duration) -> SignatureBatcher {
        SignatureBatcher {
            queue: Mutex::default(),
            keys: KeyCache::new(4096),
            max_batch: max_batch.max(1),
            min_fill: 1,
            max_wait,
            batches: AtomicU64::new(0),
            signatures: AtomicU64::new(0),
            fallbacks: AtomicU64::new(0),
            timeouts: AtomicU64::new(0),
        }
    }

    /// Makes a batch wait, within `max_wait`, until it holds `min_fill` signatures (at most the
    /// batch's size), also when every request announced before it has submitted. Only batches
    /// wait: a request that finds no sign of concurrent requests is still verified at once. 1
    /// (the default) waits for no more than the announced requests and the signatures the
    /// recent rate brings in a quarter of `max_wait` (the module documentation); a larger
    /// minimum waits for more when the rate would not. Larger batches cost less
    /// per signature (about 14 us at 64 against 34 us alone) but each waits longer: when
    /// requests arrive slower than `min_fill` per `max_wait`, every batch waits the whole
    /// `max_wait`.
    pub fn with_min_fill(mut self, min_fill: usize) -> SignatureBatcher {
        self.min_fill = min_fill.clamp(1, self.max_batch);
        self
    }

    /// Announces a signature that this request is about to verify, so that a batch started
    /// meanwhile waits for it (within its bound).
    pub fn announce(&self) -> Announcement<'_> {
        announce(self)
    }

    /// [`SignatureVerifier::verify`] of an announcement.
    pub async fn verify(
        &self,
        announced: Announcement<'_>,
        key: CachedKey,
        message: &[u8],
        signature: &Signature,
        clock: &dyn Clock,
    ) -> bool {
        SignatureVerifier::verify(self, announced.redeem(), key, message, signature, clock).await
    }

    /// Waits for the batch to fill (within the bound), verifies it and answers the others;
    /// returns the leader's own answer (the batch's first entry).
    async fn lead(&self, clock: &dyn Clock) -> bool {
        let mut guard = LeaderGuard {
            batcher: self,
            done: false,
        };
        let filled = Filled {
            batcher: self,
            yields: 0,
            seen: 0,
        };
        let timer = clock.sleep(self.max_wait);
        if let futures_util::future::Either::Right(_) =
            futures_util::future::select(filled, timer).await
        {
            self.timeouts.fetch_add(1, Ordering::Relaxed);
            let mut q = self.lock();
            if q.pending.len() < q.fill {
                // The fill did not come: no more requests than these may be in flight.
                q.ceiling = Some(q.pending.len().max(1));
            }
        }
        guard.done = true;
        self.run_batch()
    }

    /// Takes the queued batch, verifies it, answers every follower and returns the first
    /// entry's (the leader's) answer.
    fn run_batch(&self) -> bool {
        let batch = {
            let mut q = self.lock();
            q.leader = None;
            q.waiting_for = 0;
            q.last_batch = q.pending.len();
            if q.ceiling.is_some_and(|c| q.last_batch > c) {
                q.ceiling = Some(q.last_batch);
            }
            std::mem::take(&mut q.pending)
        };
        let checks: Vec<Check<'_>> = batch
            .iter()
            .map(|e| Check {
                key: &e.key,
                message: &e.message,
                signature: &e.signature,
            })
            .collect();
        let valid = verify_each(&checks);
        let all = valid.iter().all(|v| *v);
        self.count(batch.len() as u64, batch.len() > 1 && !all);
        let mut leader = false;
        for (i, (entry, ok)) in batch.into_iter().zip(valid).enumerate() {
            match entry.reply {
                Some(reply) => {
                    // The follower may have gone away; its answer is then not needed.
                    let _ = reply.send(ok);
                }
                None if i == 0 => leader = ok,
                None => {}
            }
        }
        leader
    }

    fn count(&self, signatures: u64, fallback: bool) {
        self.batches.fetch_add(1, Ordering::Relaxed);
        self.signatures.fetch_add(signatures, Ordering::Relaxed);
        if fallback {
            self.fallbacks.fetch_add(1, Ordering::Relaxed);
        }
    }

    fn ready(&self, q: &Queue) -> bool {
        (q.waiting_for == 0 && q.pending.len() >= q.fill) || q.pending.len() >= self.max_batch
    }

    fn wake_leader_if_ready(&self, q: &mut MutexGuard<'_, Queue>) {
        if !q.pending.is_empty() && self.ready(q) {
            if let Some(leader) = q.leader.take() {
                leader.wake();
            }
        }
    }

    fn lock(&self) -> MutexGuard<'_, Queue> {
        self.queue
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }
}

/// Completes when the leader's batch is ready: full, or (after at least one yield, and once
/// a yield brought no new signature or [`MAX_YIELDS`] were made) every request announced
/// before the batch started has submitted or given up.
struct Filled<'a> {
    batcher: &'a SignatureBatcher,
    /// Yields made so far.
    yields: u32,
    /// The batch's size at the last yield.
    seen: usize,
}

impl Future for Filled<'_> {
    type Output = ();

    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<()> {
        let batcher = self.batcher;
        let mut q = batcher.lock();
        let len = q.pending.len();
        if len >= batcher.max_batch {
            return Poll::Ready(());
        }
        if self.yields < MAX_YIELDS && (self.yields == 0 || len > self.seen) {
            // Let the tasks ready on this thread run up to their own verification.
            self.yields += 1;
            self.seen = len;
            drop(q);
            cx.waker().wake_by_ref();
            return Poll::Pending;
        }
        if batcher.ready(&q) {
            Poll::Ready(())
        } else {
            q.leader = Some(cx.waker().clone());
            Poll::Pending
        }
    }
}

/// Verifies and answers the batch when its leader is dropped while waiting (its request was
/// cancelled), so that the followers are not left without an answer.
struct LeaderGuard<'a> {
    batcher: &'a SignatureBatcher,
    done: bool,
}

impl Drop for LeaderGuard<'_> {
    fn drop(&mut self) {
        if !self.done {
            self.batcher.run_batch();
        }
    }
}

#[async_trait]
impl SignatureVerifier for SignatureBatcher {
    fn open_ticket(&self) -> u64 {
        let mut q = self.lock();
        q.announced += 1;
        let seq = q.next_seq;
        q.next_seq += 1;
        seq
    }

    fn withdraw(&self, ticket: u64) {
        let mut q = self.lock();
        q.resolve(ticket);
        self.wake_leader_if_ready(&mut q);
    }

    fn key(&self, bytes: &[u8; 32]) -> Option<CachedKey> {
        self.keys.get(bytes)
    }

    /// Verifies `signature` of `message` by `key` with `verify_strict`'s answer, in a batch
    /// with the signatures of concurrent requests. `clock` bounds the wait.
    async fn verify(
        &self,
        ticket: u64,
        key: CachedKey,
        message: &[u8],
        signature: &Signature,
        clock: &dyn Clock,
    ) -> bool {
        let now = clock.now().unix_millis();
        let receiver = {
            let mut q = self.lock();
            q.rate.tick(now);
            q.resolve(ticket);
            let leads = q.pending.is_empty();
            if self.max_batch == 1 || (leads && q.announced == 0 && q.last_batch <= 1) {
                // Alone, with no sign of concurrent requests: nothing to wait for.
                q.last_batch = 1;
                drop(q);
                self.count(1, false);
                return verify_alone(&Check {
                    key: &key,
                    message,
                    signature,
                });
            }
            let (reply, receiver) = if leads {
                (None, None)
            } else {
                let (tx, rx) = oneshot::channel();
                (Some(tx), Some(rx))
            };
            if leads {
                // Wait for the requests announced so far, not for later ones, and for the
                // signatures expected soon at the recent rate.
                q.horizon = q.next_seq;
                q.waiting_for = q.announced;
                let expected = Some(q.rate.expected_in(self.max_wait / FILL_BUDGET_DIVISOR))
                    .filter(|n| *n >= MIN_RATE_FILL)
                    .unwrap_or(1);
                q.fill = q
                    .ceiling
                    .map_or(expected, |c| expected.min(c))
                    .clamp(self.min_fill, self.max_batch);
            }
            q.pending.push(Entry {
                key,
                message: message.to_vec(),
                signature: *signature,
                reply,
            });
            if !leads {
                self.wake_leader_if_ready(&mut q);
            }
            receiver
        };
        match receiver {
            Some(rx) => match rx.await {
                Ok(valid) => valid,
                // The leader went away without answering: verify alone.
                Err(_) => verify_alone(&Check {
                    key: &key,
                    message,
                    signature,
                }),
            },
            None => self.lead(clock).await,
        }
    }

    /// The counters so far.
    fn stats(&self) -> BatchStats {
        BatchStats {
            batches: self.batches.load(Ordering::Relaxed),
            signatures: self.signatures.load(Ordering::Relaxed),
            fallbacks: self.fallbacks.load(Ordering::Relaxed),
            timeouts: self.timeouts.load(Ordering::Relaxed),
        }
    }
}

#[cfg(test)]
mod tests {
    use ed25519_dalek::{Signer, SigningKey};
    use futures_util::future::join_all;

    use super::*;
    use payments_core::clock::Sleep;

    /// A clock whose timers never fire: a batch ends only when filled.
    struct NeverClock;

    impl Clock for NeverClock {
        fn now(&self) -> payments_core::Timestamp {
            payments_core::Timestamp::from_unix_secs(0)
        }
        fn sleep(&self, _: Duration) -> Sleep {
            Box::pin(futures_util::future::pending())
        }
    }

    /// A clock whose timers fire at once.
    struct ImmediateClock;

    impl Clock for ImmediateClock {
        fn now(&self) -> payments_core::Timestamp {
            payments_core::Timestamp::from_unix_secs(0)
        }
        fn sleep(&self, _: Duration) -> Sleep {
            Box::pin(futures_util::future::ready(()))
        }
    }

    fn requests(n: usize, forged: Option<usize>) -> Vec<(CachedKey, Vec<u8>, Signature)> {
        (0..n)
            .map(|i| {
                let sk = SigningKey::from_bytes(&[i as u8 + 1; 32]);
                let key = CachedKey::from_bytes(sk.verifying_key().as_bytes()).expect("a key");
                let msg = format!("request {i}").into_bytes();
                let sig = if forged == Some(i) {
                    SigningKey::from_bytes(&[200; 32]).sign(&msg)
                } else {
                    sk.sign(&msg)
                };
                (key, msg, sig)
            })
            .collect()
    }

    #[test]
    fn one_forged_signature_in_a_batch_rejects_only_its_request() {
        let batcher = SignatureBatcher::new(64, Duration::from_secs(3600));
        let reqs = requests(12, Some(7));
        // Every request announces before any submits, as concurrent requests do while their
        // credentials are read: the first submission leads a batch that waits for the rest.
        let announced: Vec<_> = reqs.iter().map(|_| batcher.announce()).collect();
        let answers = futures_executor::block_on(join_all(
            announced
                .into_iter()
                .zip(&reqs)
                .map(|(a, (key, msg, sig))| batcher.verify(a, *key, msg, sig, &NeverClock)),
        ));
        for (i, ok) in answers.iter().enumerate() {
            assert_eq!(*ok, i != 7, "request {i}");
        }
        let stats = batcher.stats();
        assert_eq!(stats.batches, 1, "{stats:?}");
        assert_eq!(stats.signatures, 12);
        assert_eq!(stats.fallbacks, 1);
        assert_eq!(stats.timeouts, 0);
    }

    #[test]
    fn valid_signatures_pass_in_one_batch_without_fallback() {
        let batcher = SignatureBatcher::new(64, Duration::from_secs(3600));
        let reqs = requests(8, None);
        let announced: Vec<_> = reqs.iter().map(|_| batcher.announce()).collect();
        let answers = futures_executor::block_on(join_all(
            announced
                .into_iter()
                .zip(&reqs)
                .map(|(a, (key, msg, sig))| batcher.verify(a, *key, msg, sig, &NeverClock)),
        ));
        assert!(answers.iter().all(|a| *a));
        assert_eq!(
            batcher.stats(),
            BatchStats {
                batches: 1,
                signatures: 8,
                fallbacks: 0,
                timeouts: 0
            }
        );
    }

    /// Two requests overlap (the second announced before the first submits): a batch of
    /// two, the sign of concurrency that makes the next leaders yield.
    fn after_a_batch_of_two(batcher: &SignatureBatcher) {
        let reqs = requests(2, None);
        let a: Vec<_> = reqs.iter().map(|_| batcher.announce()).collect();
        let answers = futures_executor::block_on(join_all(
            a.into_iter()
                .zip(&reqs)
                .map(|(a, (key, msg, sig))| batcher.verify(a, *key, msg, sig, &NeverClock)),
        ));
        assert_eq!(answers, vec![true, true]);
    }

    #[test]
    fn requests_that_reach_verification_while_the_leader_yields_join_its_batch() {
        let batcher = SignatureBatcher::new(64, Duration::from_secs(3600));
        after_a_batch_of_two(&batcher);
        let start = batcher.stats();
        let reqs = requests(5, Some(2));
        // None announced ahead: the others run up to their verification while the first
        // (the leader) yields, as tasks on the same thread do.
        let answers =
            futures_executor::block_on(join_all(reqs.iter().map(|(key, msg, sig)| async {
                // Announced only when the request's task first runs.
                let announced = batcher.announce();
                batcher.verify(announced, *key, msg, sig, &NeverClock).await
            })));
        assert_eq!(answers, vec![true, true, false, true, true]);
        let stats = batcher.stats();
        assert_eq!(
            (
                stats.batches - start.batches,
                stats.signatures - start.signatures,
                stats.fallbacks - start.fallbacks
            ),
            (1, 5, 1)
        );
    }

    #[test]
    fn without_a_sign_of_concurrency_each_request_is_verified_at_once() {
        let batcher = SignatureBatcher::new(64, Duration::from_secs(3600));
        let reqs = requests(3, None);
        // Each request announces when its task first runs and finds nothing announced and no
        // earlier batch: it verifies at once, in its first poll.
        for (key, msg, sig) in &reqs {
            let mut fut =
                std::pin::pin!(batcher.verify(batcher.announce(), *key, msg, sig, &NeverClock));
            let poll = fut.as_mut().poll(&mut Context::from_waker(Waker::noop()));
            assert_eq!(poll, Poll::Ready(true));
        }
        assert_eq!(batcher.stats().batches, 3);
    }

    #[test]
    fn a_request_alone_does_not_wait() {
        let batcher = SignatureBatcher::default();
        after_a_batch_of_two(&batcher);
        let reqs = requests(1, None);
        let (key, msg, sig) = &reqs[0];
        // NeverClock: a wait would never end.
        let ok = futures_executor::block_on(batcher.verify(
            batcher.announce(),
            *key,
            msg,
            sig,
            &NeverClock,
        ));
        assert!(ok);
        assert_eq!(batcher.stats().batches, 2);
    }

    #[test]
    fn a_request_that_gives_up_does_not_hold_the_batch() {
        let batcher = SignatureBatcher::new(64, Duration::from_secs(3600));
        let reqs = requests(3, Some(0));
        let a: Vec<_> = (0..4).map(|_| batcher.announce()).collect();
        let mut a = a.into_iter();
        let gone = a.next().expect("four announced");
        let answers = futures_executor::block_on(async {
            let verify = join_all(
                a.zip(&reqs)
                    .map(|(a, (key, msg, sig))| batcher.verify(a, *key, msg, sig, &NeverClock)),
            );
            // The fourth request ends (say, an unknown token) while the batch waits for it.
            let give_up = async move { drop(gone) };
            futures_util::future::join(verify, give_up).await.0
        });
        assert_eq!(answers, vec![false, true, true]);
        assert_eq!(batcher.stats().batches, 1);
    }

    /// With a minimum fill, once batches form a batch waits for its minimum: two signatures
    /// wait (the clock never fires here) until two more join, then all four go in one batch.
    #[test]
    fn a_batch_waits_for_its_minimum_fill_once_batches_form() {
        let clock = ManualClock::at(0);
        let batcher = SignatureBatcher::new(64, Duration::from_secs(3600)).with_min_fill(4);
        // Four overlapping requests: a batch of four, the sign that batches form.
        let first = requests(4, None);
        assert!(
            futures_executor::block_on(verify_all_at(&batcher, &first, &clock))
                .iter()
                .all(|a| *a)
        );
        two_wait_until_two_more_join(&batcher, &clock, "two of a minimum of four wait");
        let stats = batcher.stats();
        assert_eq!((stats.batches, stats.signatures), (2, 8), "{stats:?}");
    }

    /// A clock at a settable millisecond whose timers fire at once when `fire` is set, and
    /// never otherwise.
    struct ManualClock {
        ms: std::sync::atomic::AtomicI64,
        fire: std::sync::atomic::AtomicBool,
    }

    impl ManualClock {
        fn at(ms: i64) -> ManualClock {
            ManualClock {
                ms: std::sync::atomic::AtomicI64::new(ms),
                fire: std::sync::atomic::AtomicBool::new(false),
            }
        }
    }

    impl Clock for ManualClock {
        fn now(&self) -> payments_core::Timestamp {
            payments_core::Timestamp::from_unix_millis(self.ms.load(Ordering::Relaxed))
        }
        fn sleep(&self, _: Duration) -> Sleep {
            if self.fire.load(Ordering::Relaxed) {
                Box::pin(futures_util::future::ready(()))
            } else {
                Box::pin(futures_util::future::pending())
            }
        }
    }

    fn verify_all_at<'a>(
        batcher: &'a SignatureBatcher,
        reqs: &'a [(CachedKey, Vec<u8>, Signature)],
        clock: &'a ManualClock,
    ) -> impl Future<Output = Vec<bool>> + 'a {
        let announced: Vec<_> = reqs.iter().map(|_| batcher.announce()).collect();
        join_all(
            announced
                .into_iter()
                .zip(reqs)
                .map(|(a, (key, msg, sig))| batcher.verify(a, *key, msg, sig, clock)),
        )
    }

    /// Two overlapping requests are still waiting after the leader's yields (`why`: the fill
    /// they wait for); two more join them and all four are answered, valid.
    fn two_wait_until_two_more_join(batcher: &SignatureBatcher, clock: &ManualClock, why: &str) {
        let (two, more) = (requests(2, None), requests(2, None));
        let mut waiting = Box::pin(verify_all_at(batcher, &two, clock));
        assert!(within_the_yields(&mut waiting).is_none(), "{why}");
        let (a, b) = futures_executor::block_on(futures_util::future::join(
            waiting,
            verify_all_at(batcher, &more, clock),
        ));
        assert!(a.iter().chain(&b).all(|ok| *ok));
    }

    /// Polls `fut` through the leaders' yields; `None` when it is still waiting after them.
    fn within_the_yields<F: Future + Unpin>(fut: &mut F) -> Option<F::Output> {
        use futures_util::FutureExt;
        (0..=2 * MAX_YIELDS).find_map(|_| fut.now_or_never())
    }

    #[test]
    fn the_rate_averages_each_millisecond_into_the_last_ones() {
        let mut rate = Rate::default();
        rate.tick(1_000_000);
        assert_eq!(rate.per_ms, 0.0, "the first tick starts the count");
        for _ in 1..16 {
            rate.tick(1_000_000);
        }
        rate.tick(1_000_001);
        assert_eq!(rate.per_ms, 8.0, "16 in a millisecond, averaged with 0");
        for _ in 1..16 {
            rate.tick(1_000_001);
        }
        // Then 16 in the next millisecond, and a millisecond without any.
        rate.tick(1_000_003);
        assert_eq!(rate.per_ms, 8.0, "8 / 4 + 16 / 2 * 3 / 4");
        assert_eq!(rate.expected_in(Duration::from_micros(500)), 4);
        assert_eq!(rate.expected_in(Duration::from_micros(100)), 0);
        // A tick read a millisecond early (another thread ticked first) counts in this one.
        rate.tick(1_000_002);
        assert_eq!((rate.per_ms, rate.count), (8.0, 2));
        // 2 in the millisecond, then 10 ms without any: the rate decays to about the sample.
        rate.tick(1_000_013);
        assert!((rate.per_ms - 0.2).abs() < 0.01, "{}", rate.per_ms);
        rate.tick(1_000_013 - 5_000);
        assert_eq!(
            rate.per_ms, 0.0,
            "a clock that went back by seconds starts again"
        );
        rate.tick(1_000_013 + 5_000);
        assert_eq!(rate.per_ms, 0.0, "so does a pause of seconds");
    }

    /// Under a steady stream a batch waits, besides the announced requests, for the signatures
    /// expected in a quarter of its bound: at 8 a millisecond and a bound of 2 ms, four. After
    /// a pause it waits for none.
    #[test]
    fn under_a_steady_stream_a_batch_waits_for_the_signatures_expected_soon() {
        let clock = ManualClock::at(1_000_000);
        let batcher = SignatureBatcher::new(64, Duration::from_millis(2));
        // 16 signatures in one millisecond (one batch: the sign that batches form); the next
        // submission, a millisecond later, makes the rate 8 a millisecond.
        let sixteen = requests(16, None);
        let all = futures_executor::block_on(verify_all_at(&batcher, &sixteen, &clock));
        assert!(all.iter().all(|ok| *ok));
        clock.ms.fetch_add(1, Ordering::Relaxed);
        two_wait_until_two_more_join(&batcher, &clock, "two of the four expected in 0.5 ms wait");
        let stats = batcher.stats();
        assert_eq!((stats.batches, stats.signatures), (2, 20), "{stats:?}");
        // Two seconds later the rate starts again: a batch of two runs at once.
        clock.ms.fetch_add(2_000, Ordering::Relaxed);
        let later = requests(2, None);
        let mut two_more = Box::pin(verify_all_at(&batcher, &later, &clock));
        // The clock's timers never fire: only a batch that waits for nothing more completes.
        let ran = within_the_yields(&mut two_more);
        assert_eq!(ran, Some(vec![true, true]), "nothing more is waited for");
    }

    /// A fill that cannot come (few clients, each waiting for its answer) holds up one batch
    /// until its bound; after it the fill is capped at that batch's size, and the cap rises
    /// again with a larger batch.
    #[test]
    fn a_fill_that_did_not_come_caps_the_next_ones() {
        let clock = ManualClock::at(1_000_000);
        let batcher = SignatureBatcher::new(64, Duration::from_millis(2));
        let sixteen = requests(16, None);
        assert!(
            futures_executor::block_on(verify_all_at(&batcher, &sixteen, &clock))
                .iter()
                .all(|ok| *ok)
        );
        // 8 a millisecond: a batch now waits for four. Two clients only: the timer ends it.
        clock.ms.fetch_add(1, Ordering::Relaxed);
        clock.fire.store(true, Ordering::Relaxed);
        let two = requests(2, None);
        let answers = futures_executor::block_on(verify_all_at(&batcher, &two, &clock));
        assert_eq!(answers, vec![true, true]);
        assert!(batcher.stats().timeouts >= 1);
        let ceiling = batcher.lock().ceiling.expect("a ceiling after the timeout");
        assert!(ceiling <= 2, "{ceiling}");
        // With timers that never fire, the same two clients' next batch completes.
        clock.fire.store(false, Ordering::Relaxed);
        let again = requests(2, None);
        let mut next = Box::pin(verify_all_at(&batcher, &again, &clock));
        assert_eq!(within_the_yields(&mut next), Some(vec![true, true]));
        // A larger batch (six announced ahead) raises the cap to its size.
        let six = requests(6, None);
        let mut larger = Box::pin(verify_all_at(&batcher, &six, &clock));
        assert_eq!(within_the_yields(&mut larger), Some(vec![true; 6]));
        assert_eq!(batcher.lock().ceiling, Some(6));
    }

    #[test]
    fn the_wait_is_bounded_by_the_clock() {
        let batcher = SignatureBatcher::new(64, Duration::from_millis(1));
        let reqs = requests(2, None);
        // A third request announced and never submits nor ends: the timer ends the wait.
        let stuck = batcher.announce();
        let a: Vec<_> = reqs.iter().map(|_| batcher.announce()).collect();
        let answers = futures_executor::block_on(join_all(
            a.into_iter()
                .zip(&reqs)
                .map(|(a, (key, msg, sig))| batcher.verify(a, *key, msg, sig, &ImmediateClock)),
        ));
        assert_eq!(answers, vec![true, true]);
        assert!(batcher.stats().timeouts >= 1);
        drop(stuck);
    }

    #[test]
    fn a_batch_does_not_wait_for_requests_announced_after_it_started() {
        let batcher = SignatureBatcher::new(64, Duration::from_secs(3600));
        let reqs = requests(3, None);
        let first = batcher.announce();
        let second = batcher.announce();
        let answers = futures_executor::block_on(async {
            let (k0, m0, s0) = &reqs[0];
            let (k1, m1, s1) = &reqs[1];
            // The first submits and leads, waiting for the second (announced before).
            let lead = batcher.verify(first, *k0, m0, s0, &NeverClock);
            let follow = async {
                // A third request announces only now: the batch must not wait for it.
                let late = batcher.announce();
                let ok = batcher.verify(second, *k1, m1, s1, &NeverClock).await;
                (ok, late)
            };
            let (a, (b, late)) = futures_util::future::join(lead, follow).await;
            drop(late);
            (a, b)
        });
        assert_eq!(answers, (true, true));
        assert_eq!(batcher.stats().batches, 1);
    }

    #[test]
    fn a_full_batch_does_not_wait_for_more() {
        let batcher = SignatureBatcher::new(4, Duration::from_secs(3600));
        let reqs = requests(4, None);
        let a: Vec<_> = reqs.iter().map(|_| batcher.announce()).collect();
        let more = batcher.announce();
        let answers = futures_executor::block_on(join_all(
            a.into_iter()
                .zip(&reqs)
                .map(|(a, (key, msg, sig))| batcher.verify(a, *key, msg, sig, &NeverClock)),
        ));
        assert_eq!(answers, vec![true; 4]);
        assert_eq!(batcher.stats().batches, 1);
        drop(more);
    }
}
