//! A provider's recent health ([`Health`]): its circuit breaker ([`BreakerConfig`],
//! [`BreakerState`]) and moving averages of its issue rate and latency, updated from each
//! call's [`Verdict`].

use std::time::Duration;

use payments_core::clock::Timestamp;
use payments_core::provider::ProviderOutcome;

/// When a provider is taken out of routing, and how it comes back.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct BreakerConfig {
    /// Consecutive failures (ambiguous answers, providers not reached) that open the breaker.
    pub failures: u32,
    /// How long an open breaker keeps the provider out before one probe is let through.
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
    /// One probe is in flight: its answer closes or opens the breaker again.
    HalfOpen,
}

impl BreakerState {
    /// `closed`, `open` or `half_open`.
    pub fn as_str(&self) -> &'static str {
        match self {
            BreakerState::Closed => "closed",
            BreakerState::Open { .. } => "open",
            BreakerState::HalfOpen => "half_open",
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
    /// Whether the provider may be asked at `now`: closed, or open past its time (the caller
    /// then takes the probe: [`Health::take_probe`]).
    pub fn routable(&self, now: Timestamp) -> bool {
        match self.breaker {
            BreakerState::Closed => true,
            BreakerState::Open { until } => now >= until,
            BreakerState::HalfOpen => false,
        }
    }

    /// An open breaker past its time lets one probe through (half-open).
    pub fn take_probe(&mut self, now: Timestamp) {
        if matches!(self.breaker, BreakerState::Open { until } if now >= until) {
            self.breaker = BreakerState::HalfOpen;
        }
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
            let open = self.breaker == BreakerState::HalfOpen
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
    }

    /// The health factor a rule may scale a provider's weight by: its issue rate, halved
    /// for each second of average latency, never below 1 % (an unhealthy provider keeps a
    /// trickle, so it can show that it recovered).
    pub fn score(&self) -> f64 {
        let slow = 1.0 + self.latency_ms / 1000.0;
        (self.issue_rate / slow).clamp(0.01, 1.0)
    }
}
