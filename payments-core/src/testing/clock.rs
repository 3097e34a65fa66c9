//! A manual clock whose timers fire when time is advanced, and a deterministic random source.

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::task::Waker;
use std::time::Duration;

use sha2::{Digest, Sha256};

use crate::clock::{Clock, Sleep, Timestamp};
use crate::random::RandomSource;

/// A clock that stands still until [`ManualClock::advance`] or [`ManualClock::set`] moves it.
/// Sleeping futures complete when the clock reaches their deadline.
#[derive(Debug, Clone)]
pub struct ManualClock {
    inner: Arc<Mutex<ClockState>>,
}

#[derive(Debug)]
struct ClockState {
    /// The timers' time (monotonic but for [`ManualClock::set`]).
    now: Timestamp,
    /// How far [`Clock::now`] is behind the timers' time ([`ManualClock::step_wall_back`]).
    wall_behind: Duration,
    /// How far [`Clock::now`] is ahead of it ([`ManualClock::step_wall_forward`]).
    wall_ahead: Duration,
    next_id: u64,
    sleepers: BTreeMap<u64, (Timestamp, Option<Waker>)>,
}

impl ManualClock {
    /// A clock at `start`.
    pub fn new(start: Timestamp) -> Self {
        ManualClock {
            inner: Arc::new(Mutex::new(ClockState {
                now: start,
                wall_behind: Duration::ZERO,
                wall_ahead: Duration::ZERO,
                next_id: 0,
                sleepers: BTreeMap::new(),
            })),
        }
    }

    /// Moves time forward by `d`, waking timers that became due.
    pub fn advance(&self, d: Duration) {
        let mut st = self.state();
        st.now = st.now + d;
        Self::wake_due(&mut st);
    }

    /// Sets the timers' time (it may move backwards, as a real clock can be corrected);
    /// [`Clock::now`] answers it less any [`ManualClock::step_wall_back`] and plus any
    /// [`ManualClock::step_wall_forward`].
    pub fn set(&self, t: Timestamp) {
        let mut st = self.state();
        st.now = t;
        Self::wake_due(&mut st);
    }

    /// Steps the time that [`Clock::now`] answers back by `d`, as an NTP step corrects a
    /// wall clock, leaving the timers' time alone: a timer set before fires when it would
    /// have, as the production clock's timers (on the monotonic clock) do.
    pub fn step_wall_back(&self, d: Duration) {
        let mut st = self.state();
        st.wall_behind += d;
    }

    /// Steps the time that [`Clock::now`] answers forward by `d`, leaving the timers' time
    /// alone, as [`ManualClock::step_wall_back`] steps it back: no timer fires early.
    pub fn step_wall_forward(&self, d: Duration) {
        let mut st = self.state();
        st.wall_ahead += d;
    }

    /// The clock's state, locked.
    fn state(&self) -> std::sync::MutexGuard<'_, ClockState> {
        self.inner
            .lock()
            .expect("clock lock is never held across a panic")
    }

    /// The earliest pending timer deadline, if any (in the timers' time).
    pub fn next_deadline(&self) -> Option<Timestamp> {
        let st = self.state();
        st.sleepers.values().map(|(t, _)| *t).min()
    }

    fn wake_due(st: &mut ClockState) {
        let now = st.now;
        for (deadline, waker) in st.sleepers.values_mut() {
            if *deadline <= now {
                if let Some(w) = waker.take() {
                    w.wake();
                }
            }
        }
    }
}

impl Clock for ManualClock {
    fn now(&self) -> Timestamp {
        let st = self.state();
        st.now - st.wall_behind + st.wall_ahead
    }

    fn sleep(&self, duration: Duration) -> Sleep {
        let inner = self.inner.clone();
        let (id, deadline) = {
            let mut st = inner
                .lock()
                .expect("clock lock is never held across a panic");
            let id = st.next_id;
            st.next_id += 1;
            let deadline = st.now + duration;
            st.sleepers.insert(id, (deadline, None));
            (id, deadline)
        };
        Box::pin(ManualSleep {
            inner,
            id,
            deadline,
        })
    }
}

/// A timer of [`ManualClock`]; dropping it before it fires forgets its deadline, so
/// [`ManualClock::next_deadline`] names only timers someone still waits for.
struct ManualSleep {
    inner: Arc<Mutex<ClockState>>,
    id: u64,
    deadline: Timestamp,
}

impl std::future::Future for ManualSleep {
    type Output = ();

    fn poll(
        self: std::pin::Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
    ) -> std::task::Poll<()> {
        let mut st = self
            .inner
            .lock()
            .expect("clock lock is never held across a panic");
        if st.now >= self.deadline {
            st.sleepers.remove(&self.id);
            std::task::Poll::Ready(())
        } else {
            st.sleepers
                .insert(self.id, (self.deadline, Some(cx.waker().clone())));
            std::task::Poll::Pending
        }
    }
}

impl Drop for ManualSleep {
    fn drop(&mut self) {
        if let Ok(mut st) = self.inner.lock() {
            st.sleepers.remove(&self.id);
        }
    }
}

/// A deterministic random source: SHA-256 in counter mode over a seed. For tests and
/// simulations only; never for production secrets.
#[derive(Debug)]
pub struct SeededRandom {
    seed: u64,
    counter: AtomicU64,
}

impl SeededRandom {
    /// A generator for `seed`.
    pub fn new(seed: u64) -> Self {
        SeededRandom {
            seed,
            counter: AtomicU64::new(0),
        }
    }
}

impl RandomSource for SeededRandom {
    fn fill(&self, buf: &mut [u8]) {
        for chunk in buf.chunks_mut(32) {
            let n = self.counter.fetch_add(1, Ordering::Relaxed);
            let mut h = Sha256::new();
            h.update(self.seed.to_le_bytes());
            h.update(n.to_le_bytes());
            let block = h.finalize();
            chunk.copy_from_slice(&block[..chunk.len()]);
        }
    }
}
