//! What the operator API shows of the requisite providers (`GET /operator/v1/providers`): each
//! one's place in the routing, its coverage, its breaker and its recent health, as plain values
//! read from a [`ProviderStatusSource`] at each request. The router that keeps them is the
//! embedder's (the one of `payments-providers` for the server).

use std::sync::Arc;

use payments_core::Timestamp;

/// One requisite provider as its router sees it now.
#[derive(Debug, Clone, PartialEq)]
pub struct ProviderStatus {
    /// Its name.
    pub name: String,
    /// Lower is asked first.
    pub priority: u32,
    /// Share among the providers of one priority.
    pub weight: u32,
    /// What it serves (an empty list serves everything).
    pub coverage: CoverageStatus,
    /// `closed`, `open` or `half_open`.
    pub breaker: &'static str,
    /// Until when an open breaker keeps it out.
    pub open_until: Option<Timestamp>,
    /// Failures in a row so far.
    pub failures_in_a_row: u32,
    /// Moving average of the share of calls that issued requisites.
    pub issue_rate: f64,
    /// Moving average of a call's latency, in milliseconds.
    pub latency_ms: f64,
}

/// What a provider serves, as the operator API writes it.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct CoverageStatus {
    /// Payment methods (`sbp`, `card_transfer`).
    pub methods: Vec<String>,
    /// Currencies (`RUB`, ...).
    pub currencies: Vec<String>,
    /// Payers' countries.
    pub geo_codes: Vec<String>,
    /// The payers' banks served.
    pub banks: Vec<String>,
    /// The payers' banks not served.
    pub not_banks: Vec<String>,
    /// `Some(false)`: no intrabank payments; `Some(true)`: only intrabank ones.
    pub intrabank: Option<bool>,
    /// Smallest amount served, as a decimal string.
    pub min_amount: Option<String>,
    /// Largest amount served, as a decimal string.
    pub max_amount: Option<String>,
    /// The hours served, `HH:MM-HH:MM` UTC.
    pub hours: Option<String>,
}

/// Where the operator API reads the providers' status from, at each request.
pub type ProviderStatusSource = Arc<dyn Fn() -> Vec<ProviderStatus> + Send + Sync>;
