//! A provider's recent health ([`Health`]): its circuit breaker ([`BreakerConfig`],
//! [`BreakerState`]) and moving averages of its issue rate and latency, updated from each
//! call's [`Verdict`].
//!
//! An open breaker past its cool-down lets exactly one call through, its probe: the first
//! plan that names the provider reserves the probe for its payment ([`Probe::Reserved`]),
//! that payment's call makes it in flight ([`Probe::InFlight`]), and its answer closes or
//! opens the breaker again. Until then every other plan leaves the provider out, as if the
//! breaker were still open. A reservation whose payment is served elsewhere is freed at once
//! ([`Health::release_probe`]); one whose create never asks anything lapses.

use std::time::Duration;

use payments_core::clock::Timestamp;
use payments_core::ids::PaymentId;
use payments_core::provider::ProviderOutcome;

/// When a provider is taken out of routing, and how it comes back.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct BreakerConfig {
    /// Consecutive failures (ambiguous answers, providers not reached) that open the breaker.
    pub failures: u32,
    /// How long an open breaker keeps the provider out before one probe is let through; also
    /// how long a probe reserved by a plan waits for its call before another plan may take it.
    pub open_for: Duration,
}

impl Default for BreakerConfig {
    fn default() -> BreakerConfig {
        BreakerConfig {
            failures: 5,
            open_for: Duration::from_secs(30),
        }
    }
}

/// A breaker's state.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum BreakerState {
    /// The provider is routed to.
    Closed,
    /// The provider is out until the time given.
    Open {
        /// When one probe may go through.
        until: Timestamp,
    },
    /// Past its cool-down: one probe, and only one, may go to the provider; its answer
    /// closes or opens the breaker again.
    HalfOpen {
        /// Whose probe it is.
        probe: Probe,
    },
}

/// The one probe of a half-open breaker.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Probe {
    /// A plan gave it to `payment`, whose create asks the provider next. If no call for it has
    /// started by `lapses` (the create ended before asking: a repeated request, a failed
    /// write), another plan may take the probe.
    Reserved {
        /// The payment the probe is for.
        payment: PaymentId,
        /// When an unstarted reservation is given up.
        lapses: Timestamp,
    },
    /// The probe's call is in flight: its answer, or its abandonment, settles the breaker.
    InFlight,
}

/// What a provider's breaker lets one payment's plan do with it ([`Health::admits`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Admission {
    /// Closed: the provider is routed to.
    Routed,
    /// The payment may take the breaker's probe ([`Health::reserve_probe`]).
    Probe,
    /// Out of routing: open, or its probe belongs to another payment.
    Out,
}

impl BreakerState {
    /// `closed`, `open` or `half_open`.
    pub fn as_str(&self) -> &'static str {
        match self {
            BreakerState::Closed => "closed",
            BreakerState::Open { .. } => "open",
            BreakerState::HalfOpen { .. } => "half_open",
        }
    }
}

/// A provider's recent health: its breaker and moving averages of its issue rate and latency.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Health {
    /// The breaker.
    pub breaker: BreakerState,
    /// Consecutive failures so far.
    pub failures_in_a_row: u32,
    /// Moving average of the share of calls that issued requisites (starts at 1).
    pub issue_rate: f64,
    /// Moving average of a call's latency, in milliseconds (starts at 0).
    pub latency_ms: f64,
}

impl Default for Health {
    fn default() -> Health {
        Health {
            breaker: BreakerState::Closed,
            failures_in_a_row: 0,
            issue_rate: 1.0,
            latency_ms: 0.0,
        }
    }
}

/// The weight of the newest observation in the moving averages.
const EWMA: f64 = 0.1;

/// What a call's outcome says about the provider.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Verdict {
    /// It issued.
    Issued,
    /// It answered, without requisites (a refusal is a healthy answer).
    Refused,
    /// It failed: not reached, or an answer nobody can read.
    Failed,
}

impl Verdict {
    /// The verdict of `outcome`.
    pub fn of(outcome: &ProviderOutcome) -> Verdict {
        match outcome {
            ProviderOutcome::Issued(_) => Verdict::Issued,
            ProviderOutcome::NoRequisites(_) | ProviderOutcome::NotRoutable(_) => Verdict::Refused,
            _ => Verdict::Failed,
        }
    }
}

impl Health {
    /// What the breaker lets the plan of `payment` do with the provider at `now`: route to it
    /// (closed); take its probe (open past its time, a reservation of this payment's, or one
    /// that lapsed); or nothing (open, or the probe is another payment's).
    pub fn admits(&self, payment: PaymentId, now: Timestamp) -> Admission {
        match self.breaker {
            BreakerState::Closed => Admission::Routed,
            BreakerState::Open { until } if now >= until => Admission::Probe,
            BreakerState::Open { .. } => Admission::Out,
            BreakerState::HalfOpen {
                probe: Probe::Reserved { payment: p, lapses },
            } if p == payment || now >= lapses => Admission::Probe,
            BreakerState::HalfOpen { .. } => Admission::Out,
        }
    }

    /// Reserves the probe for `payment` (its plan puts the provider first), when the breaker
    /// [admits](Self::admits) it; `false`, and nothing changed, otherwise.
    pub fn reserve_probe(
        &mut self,
        payment: PaymentId,
        now: Timestamp,
        cfg: BreakerConfig,
    ) -> bool {
        if self.admits(payment, now) != Admission::Probe {
            return false;
        }
        self.breaker = BreakerState::HalfOpen {
            probe: Probe::Reserved {
                payment,
                lapses: now + cfg.open_for,
            },
        };
        debug_assert_eq!(self.admits(payment, now), Admission::Probe);
        true
    }

    /// Frees the probe `payment` reserved and has not started (its create ended at another
    /// provider): the breaker is due a probe again, for the next plan. Nothing otherwise.
    pub fn release_probe(&mut self, payment: PaymentId, now: Timestamp) {
        let reserved = matches!(
            self.breaker,
            BreakerState::HalfOpen { probe: Probe::Reserved { payment: p, .. } } if p == payment
        );
        if reserved {
            self.breaker = BreakerState::Open { until: now };
            debug_assert_eq!(self.admits(payment, now), Admission::Probe);
        }
    }

    /// A call for `payment` starts at `now`: when the breaker admits it as the probe (its
    /// reservation, or a breaker due one), the probe is in flight from now on. Any other call
    /// (a recovery asking the provider that may have issued, a plan made before the breaker
    /// opened) goes ahead without changing the breaker. Answers whether the call is the probe.
    pub fn take_probe(&mut self, payment: PaymentId, now: Timestamp) -> bool {
        if self.admits(payment, now) != Admission::Probe {
            return false;
        }
        self.breaker = BreakerState::HalfOpen {
            probe: Probe::InFlight,
        };
        debug_assert_eq!(
            self.admits(payment, now),
            Admission::Out,
            "a probe in flight is the only one"
        );
        true
    }

    /// Records a call's verdict and latency at `now`.
    pub fn observe(
        &mut self,
        verdict: Verdict,
        latency: Duration,
        now: Timestamp,
        cfg: BreakerConfig,
    ) {
        let issued = if verdict == Verdict::Issued { 1.0 } else { 0.0 };
        self.issue_rate += EWMA * (issued - self.issue_rate);
        let ms = latency.as_secs_f64() * 1000.0;
        self.latency_ms = if self.latency_ms == 0.0 {
            ms
        } else {
            self.latency_ms + EWMA * (ms - self.latency_ms)
        };
        if verdict == Verdict::Failed {
            self.failures_in_a_row = self.failures_in_a_row.saturating_add(1);
            let open = matches!(self.breaker, BreakerState::HalfOpen { .. })
                || self.failures_in_a_row >= cfg.failures.max(1);
            if open {
                self.breaker = BreakerState::Open {
                    until: now + cfg.open_for,
                };
            }
        } else {
            self.failures_in_a_row = 0;
            self.breaker = BreakerState::Closed;
        }
        debug_assert!(
            !matches!(self.breaker, BreakerState::HalfOpen { .. }),
            "an answer settles a half-open breaker"
        );
    }

    /// The health factor a rule may scale a provider's weight by: its issue rate, halved
    /// for each second of average latency, never below 1 % (an unhealthy provider keeps a
    /// trickle, so it can show that it recovered).
    pub fn score(&self) -> f64 {
        let slow = 1.0 + self.latency_ms / 1000.0;
        (self.issue_rate / slow).clamp(0.01, 1.0)
    }
}
