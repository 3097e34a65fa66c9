//! Routing across several requisite providers: which providers may serve a payment
//! ([`Coverage`]), in which order they are tried ([`RoutingRule`], by default priority, then
//! weight adjusted by each provider's recent health), and when a provider is taken out for a
//! while ([`BreakerConfig`], [`Health`]).
//!
//! The [`Router`] is itself a [`RequisiteProvider`], so the service is given one provider as
//! before; the service asks it for a [`Plan`] and calls the plan's providers one at a time,
//! recording on the payment which one it is about to ask *before* it asks (the first with the
//! payment's insert, a later one with a write of its own). The failover rule is the core's,
//! [`Failover::after`]: a definite refusal (no requisites, not covered, not reached) moves on
//! to the next provider within the create's budget; an answer that may have issued a
//! requisite (a timeout after sending, an ambiguous answer) ends the create there, and the
//! payment's recovery asks that same provider again, never another one.

use std::collections::HashMap;
use std::fmt;
use std::sync::{Arc, Mutex};

use tokio::sync::watch;

use async_trait::async_trait;
use payments_core::clock::{Clock, Timestamp};
use payments_core::provider::{
    AppealInquiry, AppealSubmission, Failover, Plan, ProviderName, ProviderOutcome,
    RequisiteProvider, RequisiteRequest,
};

use crate::coverage::Coverage;
use crate::health::{Admission, BreakerConfig, Health, Verdict};

/// Why a router cannot be built from its routes.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum RouterError {
    /// No route at all.
    #[error("a router needs at least one provider")]
    NoProvider,
    /// Two routes of one name.
    #[error("provider {0} is configured twice")]
    Twice(ProviderName),
}

/// One eligible provider as a [`RoutingRule`] sees it.
#[derive(Debug, Clone, PartialEq)]
pub struct Candidate {
    /// Its name.
    pub name: ProviderName,
    /// Lower is tried first.
    pub priority: u32,
    /// Share among providers of the same priority.
    pub weight: u32,
    /// Its recent health.
    pub health: Health,
}

/// Orders the eligible providers of a request: the first is asked first, the next after a
/// definite refusal, and so on. An embedder may supply its own ([`Router::with_rule`]); it
/// may leave candidates out but never add any: the router keeps only eligible ones.
pub trait RoutingRule: Send + Sync {
    /// The candidates' indexes in the order to try, and a short reason for the record.
    fn order(&self, request: &RequisiteRequest, candidates: &[Candidate]) -> (Vec<usize>, String);
}

/// The bundled rule: by priority; within one priority, by weight times health, drawn
/// per payment (a payment id picks, so the shares follow the weights and a repeat of a
/// payment's plan is the same while nothing changes).
#[derive(Debug, Clone, Copy, Default)]
pub struct PriorityWeightHealth;

impl RoutingRule for PriorityWeightHealth {
    fn order(&self, request: &RequisiteRequest, candidates: &[Candidate]) -> (Vec<usize>, String) {
        let mut left: Vec<usize> = (0..candidates.len()).collect();
        let mut order = Vec::with_capacity(left.len());
        let mut draw = u64::from_le_bytes(
            request.payment_id.as_uuid().as_bytes()[8..16]
                .try_into()
                .expect("8 bytes"),
        );
        while !left.is_empty() {
            let top = left
                .iter()
                .map(|&i| candidates[i].priority)
                .min()
                .expect("not empty");
            let tier: Vec<usize> = left
                .iter()
                .copied()
                .filter(|&i| candidates[i].priority == top)
                .collect();
            let share =
                |i: usize| f64::from(candidates[i].weight.max(1)) * candidates[i].health.score();
            let total: f64 = tier.iter().map(|&i| share(i)).sum();
            // A point in [0, total) from the payment's id, then the candidate it falls on.
            draw = draw.wrapping_mul(0x9e37_79b9_7f4a_7c15).wrapping_add(1);
            let mut point = (draw >> 11) as f64 / (1u64 << 53) as f64 * total;
            let mut pick = *tier.last().expect("not empty");
            for &i in &tier {
                if point < share(i) {
                    pick = i;
                    break;
                }
                point -= share(i);
            }
            order.push(pick);
            left.retain(|&i| i != pick);
        }
        let reason = format!(
            "priority, then weight x health ({})",
            order
                .iter()
                .map(|&i| format!("{}:{:.2}", candidates[i].name, candidates[i].health.score()))
                .collect::<Vec<_>>()
                .join(" ")
        );
        (order, reason)
    }
}

/// One provider of a [`Router`].
pub struct Route {
    /// Its name.
    pub name: ProviderName,
    /// The provider.
    pub provider: Arc<dyn RequisiteProvider>,
    /// What it serves.
    pub coverage: Coverage,
    /// Lower is tried first (default 0).
    pub priority: u32,
    /// Share among the providers of one priority (default 1).
    pub weight: u32,
}

impl fmt::Debug for Route {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Route")
            .field("name", &self.name)
            .field("coverage", &self.coverage)
            .field("priority", &self.priority)
            .field("weight", &self.weight)
            .finish_non_exhaustive()
    }
}

/// A provider's health as a router keeps it, with what operators ask about beside it: since
/// when its breaker is in its state, and its last failure ([`Router::health_details`]).
#[derive(Debug, Clone, PartialEq)]
pub struct ProviderHealth {
    /// The provider.
    pub name: ProviderName,
    /// Its health: the breaker, the failures in a row, the moving averages.
    pub health: Health,
    /// When its breaker came into its state (`closed`, `open`, `half_open`); the router's
    /// start for a breaker that never changed.
    pub since: Timestamp,
    /// Its last failure, if it had one since the router started.
    pub last_failure: Option<Failure>,
}

/// A failed call to a provider, as [`ProviderHealth`] remembers it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Failure {
    /// When the call ended.
    pub at: Timestamp,
    /// What it was: the outcome's name and message (`unavailable: ...`, `ambiguous: ...`), or
    /// `abandoned: ...` for a call its create gave up on; at most [`Failure::MAX_CAUSE`] bytes.
    pub cause: String,
}

impl Failure {
    /// The longest cause kept, in bytes (a longer one is cut at a character boundary).
    pub const MAX_CAUSE: usize = 200;

    fn new(at: Timestamp, cause: String) -> Failure {
        let mut cause = cause;
        if cause.len() > Failure::MAX_CAUSE {
            let mut end = Failure::MAX_CAUSE;
            while !cause.is_char_boundary(end) {
                end -= 1;
            }
            cause.truncate(end);
        }
        Failure { at, cause }
    }

    /// The failure that `outcome` is, if it is one.
    fn of(outcome: &ProviderOutcome, at: Timestamp) -> Option<Failure> {
        if Verdict::of(outcome) != Verdict::Failed {
            return None;
        }
        let detail = match outcome {
            ProviderOutcome::NoRequisites(m)
            | ProviderOutcome::NotRoutable(m)
            | ProviderOutcome::Ambiguous(m)
            | ProviderOutcome::Unavailable(m) => m,
            _ => "",
        };
        Some(Failure::new(at, format!("{}: {detail}", outcome.as_str())))
    }
}

/// What a router keeps of one provider.
#[derive(Debug, Clone)]
struct Kept {
    health: Health,
    since: Timestamp,
    last_failure: Option<Failure>,
}

/// The providers' [`Kept`] records, and the count of breaker changes to tell watchers.
struct Book {
    kept: HashMap<ProviderName, Kept>,
    /// When the router started: the `since` of a breaker that never changed.
    started: Timestamp,
}

impl Book {
    fn get(&self, name: &ProviderName) -> Health {
        self.kept.get(name).map(|k| k.health).unwrap_or_default()
    }

    fn entry(&mut self, name: &ProviderName) -> &mut Kept {
        let started = self.started;
        self.kept.entry(name.clone()).or_insert_with(|| Kept {
            health: Health::default(),
            since: started,
            last_failure: None,
        })
    }
}

/// A provider that composes providers: eligibility by coverage and breaker, order by a
/// [`RoutingRule`], health from every answer. As a [`RequisiteProvider`] on its own (an
/// embedder calling `issue`), it asks the plan's providers in turn with the failover rule.
pub struct Router {
    routes: Vec<Route>,
    rule: Arc<dyn RoutingRule>,
    health: Mutex<Book>,
    /// How many breakers changed state so far ([`Router::breaker_changes`]).
    changes: watch::Sender<u64>,
    breaker: BreakerConfig,
    clock: Arc<dyn Clock>,
}

impl fmt::Debug for Router {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Router")
            .field("routes", &self.routes)
            .finish_non_exhaustive()
    }
}

impl Router {
    /// A router over `routes` (names must differ) with the bundled rule and breaker.
    pub fn new(routes: Vec<Route>, clock: Arc<dyn Clock>) -> Result<Router, RouterError> {
        if routes.is_empty() {
            return Err(RouterError::NoProvider);
        }
        for (i, r) in routes.iter().enumerate() {
            if routes[..i].iter().any(|o| o.name == r.name) {
                return Err(RouterError::Twice(r.name.clone()));
            }
        }
        let started = clock.now();
        Ok(Router {
            routes,
            rule: Arc::new(PriorityWeightHealth),
            health: Mutex::new(Book {
                kept: HashMap::new(),
                started,
            }),
            changes: watch::Sender::new(0),
            breaker: BreakerConfig::default(),
            clock,
        })
    }

    /// The same router with `rule` ordering the candidates.
    pub fn with_rule(mut self, rule: Arc<dyn RoutingRule>) -> Router {
        self.rule = rule;
        self
    }

    /// The same router with another breaker.
    pub fn with_breaker(mut self, breaker: BreakerConfig) -> Router {
        self.breaker = breaker;
        self
    }

    /// The routes.
    pub fn routes(&self) -> &[Route] {
        &self.routes
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Book> {
        self.health
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// Changes the health of `kept` with `change` at `now`; a breaker that changes state
    /// records when, and tells the watchers of [`Router::breaker_changes`].
    fn change<T>(
        &self,
        kept: &mut Kept,
        now: Timestamp,
        change: impl FnOnce(&mut Health) -> T,
    ) -> T {
        let before = kept.health.breaker.as_str();
        let answer = change(&mut kept.health);
        if kept.health.breaker.as_str() != before {
            kept.since = now;
            self.changes.send_modify(|n| *n += 1);
        }
        answer
    }

    /// Each provider's health now.
    pub fn health(&self) -> Vec<(ProviderName, Health)> {
        let book = self.lock();
        self.routes
            .iter()
            .map(|r| (r.name.clone(), book.get(&r.name)))
            .collect()
    }

    /// Each provider's health now, with since when its breaker is in its state and its last
    /// failure, in the routes' order: what an operator is shown.
    pub fn health_details(&self) -> Vec<ProviderHealth> {
        let book = self.lock();
        self.routes
            .iter()
            .map(|r| match book.kept.get(&r.name) {
                Some(k) => ProviderHealth {
                    name: r.name.clone(),
                    health: k.health,
                    since: k.since,
                    last_failure: k.last_failure.clone(),
                },
                None => ProviderHealth {
                    name: r.name.clone(),
                    health: Health::default(),
                    since: book.started,
                    last_failure: None,
                },
            })
            .collect()
    }

    /// Watches the breakers: the value is how many breaker changes of state there were so far,
    /// and it changes with each one (an open, a close, a probe taken or given back). A task
    /// that reports the providers' health waits on it to report a change at once; the routing
    /// never waits on anything it does.
    pub fn breaker_changes(&self) -> watch::Receiver<u64> {
        self.changes.subscribe()
    }

    /// The plan for `request`: its eligible providers (covering it, breaker closed or due a
    /// probe) in the rule's order. An empty plan means no provider may serve it now.
    ///
    /// A breaker admits one probe at a time: the plan that names a provider due one reserves
    /// the probe for the request's payment ([`Health::reserve_probe`]), and every other plan
    /// leaves the provider out, as if its breaker were still open, until the probe answers.
    /// The reservation is freed when the payment's create ends at another provider, and
    /// lapses after the cool-down when its create asks nothing at all.
    pub fn plan(&self, request: &RequisiteRequest) -> Plan {
        let now = self.clock.now();
        let (candidates, mut skipped) = self.candidates(request, now);
        let (order, why) = if candidates.is_empty() {
            (Vec::new(), "no eligible provider".to_string())
        } else {
            self.rule.order(request, &candidates)
        };
        let mut providers = Vec::new();
        for i in order {
            let Some(c) = candidates.get(i) else {
                continue;
            };
            if providers.contains(&c.name) {
                continue;
            }
            // The rule ran without the lock: the reservation checks the breaker again.
            let probe_taken = c.health.admits(request.payment_id, now) == Admission::Probe
                && !self.change(self.lock().entry(&c.name), now, |h| {
                    h.reserve_probe(request.payment_id, now, self.breaker)
                });
            if probe_taken {
                skipped.push(format!("{}: breaker half_open", c.name));
            } else {
                providers.push(c.name.clone());
            }
        }
        let mut reason = why;
        if !skipped.is_empty() {
            reason.push_str(&format!("; not eligible: {}", skipped.join(", ")));
        }
        Plan { providers, reason }
    }

    /// The providers that cover `request` and whose breaker admits its payment at `now`, and
    /// why each other provider is not eligible.
    fn candidates(
        &self,
        request: &RequisiteRequest,
        now: Timestamp,
    ) -> (Vec<Candidate>, Vec<String>) {
        let book = self.lock();
        let mut skipped = Vec::new();
        let mut candidates = Vec::new();
        for r in &self.routes {
            let h = book.get(&r.name);
            if let Err(why) = r.coverage.covers(request, now) {
                skipped.push(format!("{}: {why}", r.name));
            } else if h.admits(request.payment_id, now) == Admission::Out {
                skipped.push(format!("{}: breaker {}", r.name, h.breaker.as_str()));
            } else {
                candidates.push(Candidate {
                    name: r.name.clone(),
                    priority: r.priority,
                    weight: r.weight,
                    health: h,
                });
            }
        }
        (candidates, skipped)
    }

    /// Asks the provider `name` and records its health: the breaker's probe when this
    /// payment's plan reserved it ([`Health::take_probe`]). A call is never refused for its
    /// breaker: a plan that left the provider out never names it, and a recovery must ask
    /// the provider that may have issued, whatever its breaker says.
    /// A name that is not configured is answered as not reached.
    pub async fn issue_with(
        &self,
        name: &ProviderName,
        request: &RequisiteRequest,
    ) -> ProviderOutcome {
        let Some(route) = self.routes.iter().find(|r| &r.name == name) else {
            return ProviderOutcome::Unavailable(format!("provider {name} is not configured"));
        };
        let started = self.clock.now();
        // The probe if this payment's plan reserved it (or the breaker is due one); any other
        // call, a recovery's included, is made whatever the breaker says.
        self.change(self.lock().entry(name), started, |h| {
            h.take_probe(request.payment_id, started)
        });
        // A call the service abandons (its budget ended first) is a failure: without this a
        // probe cut off that way would leave the breaker half open, the provider out for good.
        let mut pending = Pending {
            router: self,
            name,
            request,
            started,
            armed: true,
        };
        let outcome = route.provider.issue(request).await;
        pending.armed = false;
        let ends = Failover::after(&outcome) == Failover::Decide;
        let verdict = Verdict::of(&outcome);
        self.settle(name, request, verdict, started, ends, |at| {
            Failure::of(&outcome, at)
        });
        outcome
    }

    /// Sends an appeal to the provider `name` (the one on record for its payment). The
    /// breakers and health are left alone: they judge requisite requests, and an appeal goes
    /// to the provider on record whatever its breaker says (no other provider knows the
    /// payment). A name that is not configured is answered
    /// [`AppealSubmission::Failed`]: the appeal stays open for support.
    pub async fn submit_appeal(
        &self,
        name: &ProviderName,
        inquiry: &AppealInquiry,
    ) -> AppealSubmission {
        match self.routes.iter().find(|r| &r.name == name) {
            Some(route) => route.provider.submit_appeal(name, inquiry).await,
            None => AppealSubmission::Failed(format!("provider {name} is not configured")),
        }
    }

    /// Records the verdict of a call to `name` for `request`, started at `started` (and its
    /// `failure`, made with the time it ended, when it is one). When the payment's create
    /// `ends` with it, the probes its plan reserved on other providers are freed (it will not
    /// ask them).
    fn settle(
        &self,
        name: &ProviderName,
        request: &RequisiteRequest,
        verdict: Verdict,
        started: Timestamp,
        ends: bool,
        failure: impl FnOnce(Timestamp) -> Option<Failure>,
    ) {
        let now = self.clock.now();
        let mut book = self.lock();
        let kept = book.entry(name);
        self.change(kept, now, |h| {
            h.observe(verdict, now.duration_since(started), now, self.breaker);
        });
        if let Some(failure) = failure(now) {
            kept.last_failure = Some(failure);
        }
        if ends {
            for (other, kept) in book.kept.iter_mut() {
                if other != name {
                    self.change(kept, now, |h| h.release_probe(request.payment_id, now));
                }
            }
        }
    }
}

/// Records a failure for a call dropped before it answered (its create ended: its budget
/// ran out first).
struct Pending<'a> {
    router: &'a Router,
    name: &'a ProviderName,
    request: &'a RequisiteRequest,
    started: Timestamp,
    armed: bool,
}

impl Drop for Pending<'_> {
    fn drop(&mut self) {
        if self.armed {
            self.router.settle(
                self.name,
                self.request,
                Verdict::Failed,
                self.started,
                true,
                |at| {
                    Some(Failure::new(
                        at,
                        "abandoned: the create's budget ended before the answer".to_string(),
                    ))
                },
            );
        }
    }
}

#[async_trait]
impl RequisiteProvider for Router {
    fn plan(&self, request: &RequisiteRequest) -> Plan {
        Router::plan(self, request)
    }

    async fn issue_with(&self, name: &ProviderName, request: &RequisiteRequest) -> ProviderOutcome {
        Router::issue_with(self, name, request).await
    }

    async fn submit_appeal(
        &self,
        name: &ProviderName,
        inquiry: &AppealInquiry,
    ) -> AppealSubmission {
        Router::submit_appeal(self, name, inquiry).await
    }

    async fn issue(&self, request: &RequisiteRequest) -> ProviderOutcome {
        let plan = self.plan(request);
        let mut last = ProviderOutcome::NotRoutable(plan.reason.clone());
        for name in &plan.providers {
            last = self.issue_with(name, request).await;
            if Failover::after(&last) == Failover::Decide {
                break;
            }
        }
        last
    }

    fn issues_locally(&self) -> bool {
        self.routes.iter().all(|r| r.provider.issues_locally())
    }
}

#[cfg(test)]
mod tests {
    use std::sync::atomic::{AtomicUsize, Ordering};

    use proptest::prelude::*;

    use std::time::Duration;

    use payments_core::amount::Amount;
    use payments_core::bank::CountryCode;
    use payments_core::ids::PaymentId;
    use payments_core::payment::{Currency, PaymentMethod};
    use payments_core::provider::IssuedRequisites;
    use payments_core::testing::ManualClock;
    use rust_decimal::Decimal;

    use super::*;
    use crate::coverage::Hours;

    const T0: Timestamp = Timestamp::from_unix_millis(1_790_812_800_000);

    /// A provider answering from a script (the last answer repeats), counting its calls.
    struct Scripted {
        answers: Vec<ProviderOutcome>,
        calls: AtomicUsize,
        log: Arc<Mutex<Vec<String>>>,
        name: String,
    }

    #[async_trait]
    impl RequisiteProvider for Scripted {
        async fn issue(&self, _: &RequisiteRequest) -> ProviderOutcome {
            let n = self.calls.fetch_add(1, Ordering::SeqCst);
            self.log.lock().unwrap().push(self.name.clone());
            self.answers[n.min(self.answers.len() - 1)].clone()
        }
    }

    fn request(
        amount: &str,
        method: PaymentMethod,
        bank: Option<&str>,
        seed: u128,
    ) -> RequisiteRequest {
        RequisiteRequest {
            payment_id: PaymentId::from_uuid(uuid::Uuid::from_u128(seed)),
            amount: Amount::parse(amount).unwrap(),
            currency: Currency::RUB,
            payment_method: method,
            geo_code: CountryCode::RU,
            bank_code: bank.map(str::to_string),
            is_intrabank: false,
            is_test: false,
        }
    }

    fn outcome(kind: u8) -> ProviderOutcome {
        match kind % 5 {
            0 => ProviderOutcome::Issued(IssuedRequisites::new("79001234567", "I. I.")),
            1 => ProviderOutcome::NoRequisites("none".into()),
            2 => ProviderOutcome::NotRoutable("no".into()),
            3 => ProviderOutcome::Unavailable("down".into()),
            _ => ProviderOutcome::Ambiguous("timeout".into()),
        }
    }

    fn router(
        specs: &[(Coverage, u32, u32, Vec<u8>)],
        clock: Arc<ManualClock>,
    ) -> (Router, Arc<Mutex<Vec<String>>>) {
        let log = Arc::new(Mutex::new(Vec::new()));
        let routes = specs
            .iter()
            .enumerate()
            .map(|(i, (coverage, priority, weight, answers))| Route {
                name: ProviderName::parse(&format!("p{i}")).unwrap(),
                provider: Arc::new(Scripted {
                    answers: answers.iter().map(|&k| outcome(k)).collect(),
                    calls: AtomicUsize::new(0),
                    log: log.clone(),
                    name: format!("p{i}"),
                }),
                coverage: coverage.clone(),
                priority: *priority,
                weight: *weight,
            })
            .collect();
        (Router::new(routes, clock).unwrap(), log)
    }

    fn coverage() -> impl Strategy<Value = Coverage> {
        (
            proptest::sample::subsequence(
                vec![PaymentMethod::Sbp, PaymentMethod::CardTransfer],
                0..=2,
            ),
            proptest::sample::subsequence(
                vec!["Сбербанк".to_string(), "Т-Банк".to_string()],
                0..=2,
            ),
            proptest::option::of(100u32..5_000),
            proptest::option::of(1_000u32..100_000),
        )
            .prop_map(|(methods, not_banks, min, max)| Coverage {
                methods,
                not_banks,
                min_amount: min.map(Decimal::from),
                max_amount: max.map(Decimal::from),
                ..Coverage::default()
            })
    }

    fn block_on<F: std::future::Future>(f: F) -> F::Output {
        futures_util::FutureExt::now_or_never(f).expect("the scripted providers answer at once")
    }

    #[test]
    fn coverage_by_every_field() {
        let r = request("1500.00", PaymentMethod::Sbp, Some("Сбербанк"), 1);
        let all = Coverage::default();
        assert_eq!(all.covers(&r, T0), Ok(()));
        let c = |f: fn(&mut Coverage)| {
            let mut c = Coverage::default();
            f(&mut c);
            c.covers(&r, T0)
        };
        assert_eq!(
            c(|c| c.methods = vec![PaymentMethod::CardTransfer]),
            Err("method")
        );
        assert_eq!(c(|c| c.banks = vec!["Т-Банк".into()]), Err("bank"));
        assert_eq!(c(|c| c.not_banks = vec!["Сбербанк".into()]), Err("bank"));
        assert_eq!(
            c(|c| c.min_amount = Some(Decimal::from(2000))),
            Err("amount")
        );
        assert_eq!(
            c(|c| c.max_amount = Some(Decimal::from(1000))),
            Err("amount")
        );
        assert_eq!(c(|c| c.intrabank = Some(true)), Err("intrabank"));
        assert_eq!(
            c(|c| c.geo_codes = vec![CountryCode::parse("kz").unwrap()]),
            Err("geo_code")
        );
        // T0 is 00:00 UTC.
        assert_eq!(
            c(|c| c.hours = Some(Hours::parse("22:00-06:00").unwrap())),
            Ok(())
        );
        assert_eq!(
            c(|c| c.hours = Some(Hours::parse("09:00-18:00").unwrap())),
            Err("hours")
        );
        assert!(Hours::parse("9-18").is_err() && Hours::parse("10:00-10:00").is_err());
    }

    #[test]
    fn the_breaker_opens_after_failures_and_a_probe_closes_it() {
        let clock = Arc::new(ManualClock::new(T0));
        let spec = (Coverage::default(), 0, 1, vec![3, 3, 3, 3, 3, 3, 0]);
        let (router, log) = router(&[spec], clock.clone());
        let router = router.with_breaker(BreakerConfig {
            failures: 3,
            open_for: Duration::from_secs(30),
        });
        let r = request("1500.00", PaymentMethod::Sbp, None, 7);
        for _ in 0..3 {
            assert!(matches!(
                block_on(router.issue(&r)),
                ProviderOutcome::Unavailable(_)
            ));
        }
        assert_eq!(router.health()[0].1.breaker.as_str(), "open");
        let plan = router.plan(&r);
        assert!(plan.providers.is_empty(), "{plan:?}");
        assert!(plan.reason.contains("p0: breaker open"), "{}", plan.reason);
        assert!(matches!(
            block_on(router.issue(&r)),
            ProviderOutcome::NotRoutable(_)
        ));
        assert_eq!(log.lock().unwrap().len(), 3, "not asked while open");
        // After the cool-down one probe goes through; it fails: open again.
        clock.advance(Duration::from_secs(30));
        assert_eq!(router.plan(&r).providers.len(), 1);
        assert!(matches!(
            block_on(router.issue(&r)),
            ProviderOutcome::Unavailable(_)
        ));
        assert_eq!(router.health()[0].1.breaker.as_str(), "open");
        clock.advance(Duration::from_secs(30));
        // Two more failures are scripted, then it issues: the probe closes the breaker.
        let _ = block_on(router.issue(&r));
        clock.advance(Duration::from_secs(30));
        let _ = block_on(router.issue(&r));
        clock.advance(Duration::from_secs(30));
        assert!(matches!(
            block_on(router.issue(&r)),
            ProviderOutcome::Issued(_)
        ));
        assert_eq!(router.health()[0].1.breaker.as_str(), "closed");
    }

    #[test]
    fn a_probe_abandoned_by_the_caller_opens_the_breaker_again() {
        struct Hangs;
        #[async_trait]
        impl RequisiteProvider for Hangs {
            async fn issue(&self, _: &RequisiteRequest) -> ProviderOutcome {
                std::future::pending().await
            }
        }
        let clock = Arc::new(ManualClock::new(T0));
        let router = Router::new(
            vec![Route {
                name: ProviderName::parse("slow").unwrap(),
                provider: Arc::new(Hangs),
                coverage: Coverage::default(),
                priority: 0,
                weight: 1,
            }],
            clock.clone(),
        )
        .unwrap()
        .with_breaker(BreakerConfig {
            failures: 1,
            open_for: Duration::from_secs(30),
        });
        let r = request("1500.00", PaymentMethod::Sbp, None, 3);
        let name = ProviderName::parse("slow").unwrap();
        let poll_once_and_drop = || {
            let mut call = Box::pin(router.issue_with(&name, &r));
            let waker = std::task::Waker::noop();
            let mut cx = std::task::Context::from_waker(waker);
            assert!(std::future::Future::poll(call.as_mut(), &mut cx).is_pending());
        };
        poll_once_and_drop();
        assert_eq!(
            router.health()[0].1.breaker.as_str(),
            "open",
            "an abandoned call failed"
        );
        clock.advance(Duration::from_secs(30));
        poll_once_and_drop();
        assert_eq!(
            router.health()[0].1.breaker.as_str(),
            "open",
            "the abandoned probe opened it again instead of leaving it half open"
        );
        clock.advance(Duration::from_secs(30));
        assert_eq!(
            router.plan(&r).providers.len(),
            1,
            "and it is probed again later"
        );
    }

    #[test]
    fn health_details_say_since_when_a_breaker_is_in_its_state_and_the_last_failure() {
        let clock = Arc::new(ManualClock::new(T0));
        // Fails (not reached) three times, then issues.
        let (router, _) = router(
            &[(Coverage::default(), 0, 1, vec![3, 3, 3, 0])],
            clock.clone(),
        );
        let router = router.with_breaker(BreakerConfig {
            failures: 2,
            open_for: Duration::from_secs(30),
        });
        let mut changes = router.breaker_changes();
        let details = || router.health_details().remove(0);
        let state = |d: &ProviderHealth| (d.health.breaker.as_str(), d.since);
        let d = details();
        assert_eq!((state(&d), d.last_failure), (("closed", T0), None));
        let r = request("1500.00", PaymentMethod::Sbp, None, 1);
        let s = Duration::from_secs(1);

        clock.advance(s);
        let _ = block_on(router.issue(&r));
        let d = details();
        assert_eq!(
            state(&d),
            ("closed", T0),
            "one failure of two changes no state"
        );
        assert_eq!(
            d.last_failure,
            Some(Failure {
                at: T0 + s,
                cause: "unavailable: down".into()
            })
        );
        assert!(!changes.has_changed().unwrap(), "no change to tell");

        clock.advance(s);
        let _ = block_on(router.issue(&r));
        assert_eq!(state(&details()), ("open", T0 + s * 2));
        assert!(changes.has_changed().unwrap(), "the open is told");
        assert_eq!(*changes.borrow_and_update(), 1);

        // After the cool-down a plan takes the probe: half open from then.
        clock.advance(s * 30);
        assert_eq!(router.plan(&r).providers.len(), 1);
        assert_eq!(state(&details()), ("half_open", T0 + s * 32));
        assert_eq!(*changes.borrow_and_update(), 2);
        // The probe fails (open again), and after another cool-down the next one issues.
        let _ = block_on(router.issue(&r));
        assert_eq!(state(&details()), ("open", T0 + s * 32));
        clock.advance(s * 30);
        assert!(matches!(
            block_on(router.issue(&r)),
            ProviderOutcome::Issued(_)
        ));
        let d = details();
        assert_eq!(state(&d), ("closed", T0 + s * 62));
        assert_eq!(
            d.last_failure.map(|f| f.at),
            Some(T0 + s * 32),
            "the last failure stays"
        );
        assert_eq!(*changes.borrow_and_update(), 5, "open, half open, closed");
    }

    /// A provider that takes appeals, remembering which it was sent and under which name.
    struct TakesAppeals {
        sent: Arc<Mutex<Vec<(String, String)>>>,
    }

    #[async_trait]
    impl RequisiteProvider for TakesAppeals {
        async fn issue(&self, _: &RequisiteRequest) -> ProviderOutcome {
            outcome(0)
        }

        async fn submit_appeal(
            &self,
            name: &ProviderName,
            inquiry: &AppealInquiry,
        ) -> AppealSubmission {
            let sent = (name.to_string(), inquiry.appeal_id.to_string());
            self.sent.lock().unwrap().push(sent);
            AppealSubmission::Taken
        }
    }

    fn inquiry(seed: u128) -> AppealInquiry {
        let r = request("1500.00", PaymentMethod::Sbp, None, seed);
        AppealInquiry {
            appeal_id: payments_core::ids::AppealId::from_uuid(uuid::Uuid::from_u128(seed + 1)),
            payment_id: r.payment_id,
            amount: r.amount,
            currency: r.currency,
            requisite: "79001234567".into(),
            reason: payments_core::appeal::AppealReason::PaidButCanceled,
            claimed_amount: None,
            paid_at: None,
            payer_bank: None,
            receipts: Vec::new(),
        }
    }

    #[test]
    fn an_appeal_goes_to_the_named_route_only_and_leaves_health_alone() {
        let clock = Arc::new(ManualClock::new(T0));
        let sent = Arc::new(Mutex::new(Vec::new()));
        let (plain, _) = router(&[(Coverage::default(), 0, 1, vec![0])], clock.clone());
        let mut routes = plain.routes;
        routes.push(Route {
            name: ProviderName::parse("appeals").unwrap(),
            provider: Arc::new(TakesAppeals { sent: sent.clone() }),
            coverage: Coverage::default(),
            priority: 1,
            weight: 1,
        });
        let router = Router::new(routes, clock).unwrap();
        let as_port: &dyn RequisiteProvider = &router;
        let name = |n: &str| ProviderName::parse(n).unwrap();
        // Through the port, as the service calls it: the named route's answer.
        assert_eq!(
            block_on(as_port.submit_appeal(&name("appeals"), &inquiry(7))),
            AppealSubmission::Taken
        );
        assert_eq!(
            *sent.lock().unwrap(),
            [("appeals".to_string(), inquiry(7).appeal_id.to_string())]
        );
        // p0 takes no appeals (the port's default), and nobody else is asked instead.
        assert_eq!(
            block_on(as_port.submit_appeal(&name("p0"), &inquiry(8))),
            AppealSubmission::NotSupported
        );
        assert_eq!(
            block_on(router.submit_appeal(&name("gone"), &inquiry(9))),
            AppealSubmission::Failed("provider gone is not configured".into())
        );
        assert_eq!(sent.lock().unwrap().len(), 1);
        for d in router.health_details() {
            assert_eq!((d.health, d.last_failure), (Health::default(), None));
        }
    }

    #[test]
    fn a_long_cause_is_cut_at_a_character_boundary() {
        let long = ProviderOutcome::Ambiguous("ж".repeat(300));
        let f = Failure::of(&long, T0).expect("a failure");
        assert!(f.cause.len() <= Failure::MAX_CAUSE && f.cause.len() >= Failure::MAX_CAUSE - 1);
        assert!(f.cause.starts_with("ambiguous: жж"), "{}", f.cause);
        assert_eq!(
            Failure::of(&outcome(1), T0),
            None,
            "a refusal is no failure"
        );
    }

    /// A provider that takes each request and answers (issued) only once its gate is open.
    struct Gated {
        open: Arc<std::sync::atomic::AtomicBool>,
        calls: Arc<AtomicUsize>,
    }

    #[async_trait]
    impl RequisiteProvider for Gated {
        async fn issue(&self, _: &RequisiteRequest) -> ProviderOutcome {
            self.calls.fetch_add(1, Ordering::SeqCst);
            let open = self.open.clone();
            std::future::poll_fn(move |_| {
                if open.load(Ordering::SeqCst) {
                    std::task::Poll::Ready(())
                } else {
                    std::task::Poll::Pending
                }
            })
            .await;
            outcome(0)
        }
    }

    /// `g`, gated, at `g_priority`, and `ok` (issues at once) at priority 1; `g`'s breaker
    /// opens on one failure for 30 s. Also `g`'s gate and call count.
    fn gated_router(
        g_priority: u32,
        clock: Arc<ManualClock>,
    ) -> (Router, Arc<std::sync::atomic::AtomicBool>, Arc<AtomicUsize>) {
        let open = Arc::new(std::sync::atomic::AtomicBool::new(false));
        let calls = Arc::new(AtomicUsize::new(0));
        let route = |name: &str, provider: Arc<dyn RequisiteProvider>, priority| Route {
            name: ProviderName::parse(name).unwrap(),
            provider,
            coverage: Coverage::default(),
            priority,
            weight: 1,
        };
        let ok = Scripted {
            answers: vec![outcome(0)],
            calls: AtomicUsize::new(0),
            log: Arc::new(Mutex::new(Vec::new())),
            name: "ok".into(),
        };
        let gated = Gated {
            open: open.clone(),
            calls: calls.clone(),
        };
        let routes = vec![
            route("g", Arc::new(gated), g_priority),
            route("ok", Arc::new(ok), 1),
        ];
        let router = Router::new(routes, clock)
            .unwrap()
            .with_breaker(BreakerConfig {
                failures: 1,
                open_for: Duration::from_secs(30),
            });
        (router, open, calls)
    }

    /// Polls `call` once with a waker that does nothing; whether it answered.
    fn poll_once<F: std::future::Future>(call: std::pin::Pin<&mut F>) -> bool {
        let mut cx = std::task::Context::from_waker(std::task::Waker::noop());
        call.poll(&mut cx).is_ready()
    }

    fn names(plan: &Plan) -> Vec<&str> {
        plan.providers.iter().map(|p| p.as_str()).collect()
    }

    #[test]
    fn a_half_open_breaker_admits_one_probe_at_a_time() {
        let clock = Arc::new(ManualClock::new(T0));
        let (router, gate, calls) = gated_router(0, clock.clone());
        let g = ProviderName::parse("g").unwrap();
        let r = |seed: u128| request("1500.00", PaymentMethod::Sbp, None, seed);
        // An abandoned call opens g's breaker.
        assert!(!poll_once(std::pin::pin!(router.issue_with(&g, &r(100)))));
        assert_eq!(router.health()[0].1.breaker.as_str(), "open");
        clock.advance(Duration::from_secs(30));
        // Twenty plans after the cool-down: the first takes the probe, the others go to ok.
        let plans: Vec<Plan> = (1..=20).map(|seed| router.plan(&r(seed))).collect();
        assert_eq!(names(&plans[0]), ["g", "ok"]);
        for plan in &plans[1..] {
            assert_eq!(names(plan), ["ok"], "{plan:?}");
            assert!(
                plan.reason.contains("g: breaker half_open"),
                "{}",
                plan.reason
            );
        }
        // Its own plan again (a failover's) still holds the probe.
        assert_eq!(names(&router.plan(&r(1))), ["g", "ok"]);
        // The probe in flight: nobody else, and not its own payment again.
        let r1 = r(1);
        let mut probe = std::pin::pin!(router.issue_with(&g, &r1));
        assert!(!poll_once(probe.as_mut()));
        assert_eq!(calls.load(Ordering::SeqCst), 2);
        for seed in [1, 2, 21] {
            assert_eq!(names(&router.plan(&r(seed))), ["ok"]);
        }
        assert_eq!(router.health()[0].1.breaker.as_str(), "half_open");
        // It answers: closed, and g is routed to again.
        gate.store(true, Ordering::SeqCst);
        assert!(poll_once(probe.as_mut()));
        assert_eq!(router.health()[0].1.breaker.as_str(), "closed");
        assert_eq!(names(&router.plan(&r(22))), ["g", "ok"]);
        assert_eq!(calls.load(Ordering::SeqCst), 2, "exactly one probe");
    }

    #[test]
    fn a_reserved_probe_is_freed_when_its_payment_is_served_elsewhere_or_lapses() {
        let clock = Arc::new(ManualClock::new(T0));
        // g after ok: a plan names it second.
        let (router, _, calls) = gated_router(2, clock.clone());
        let g = ProviderName::parse("g").unwrap();
        let r = |seed: u128| request("1500.00", PaymentMethod::Sbp, None, seed);
        assert!(!poll_once(std::pin::pin!(router.issue_with(&g, &r(100)))));
        clock.advance(Duration::from_secs(30));
        assert_eq!(names(&router.plan(&r(1))), ["ok", "g"]);
        assert_eq!(names(&router.plan(&r(2))), ["ok"]);
        // Payment 1 is issued by ok: its create ends there, and the probe is free again.
        assert!(matches!(
            block_on(router.issue(&r(1))),
            ProviderOutcome::Issued(_)
        ));
        assert_eq!(names(&router.plan(&r(2))), ["ok", "g"]);
        assert_eq!(names(&router.plan(&r(3))), ["ok"]);
        // Payment 2's create never asks anything: after a cool-down another plan takes it.
        clock.advance(Duration::from_secs(29));
        assert_eq!(names(&router.plan(&r(3))), ["ok"]);
        clock.advance(Duration::from_secs(1));
        assert_eq!(names(&router.plan(&r(3))), ["ok", "g"]);
        assert_eq!(names(&router.plan(&r(2))), ["ok"]);
        assert_eq!(calls.load(Ordering::SeqCst), 1, "no probe was sent");
    }

    #[test]
    fn a_recovery_asks_its_provider_whatever_the_breaker_says() {
        let clock = Arc::new(ManualClock::new(T0));
        let (router, gate, calls) = gated_router(0, clock.clone());
        let g = ProviderName::parse("g").unwrap();
        let r = |seed: u128| request("1500.00", PaymentMethod::Sbp, None, seed);
        assert!(!poll_once(std::pin::pin!(router.issue_with(&g, &r(100)))));
        gate.store(true, Ordering::SeqCst);
        // Open: payment 100's recovery asks g again, and its answer closes the breaker.
        assert!(matches!(
            block_on(router.issue_with(&g, &r(100))),
            ProviderOutcome::Issued(_)
        ));
        assert_eq!(router.health()[0].1.breaker.as_str(), "closed");
        // Half open, its probe reserved by payment 1: payment 9's recovery is still asked.
        gate.store(false, Ordering::SeqCst);
        assert!(!poll_once(std::pin::pin!(router.issue_with(&g, &r(9)))));
        clock.advance(Duration::from_secs(30));
        assert_eq!(names(&router.plan(&r(1))), ["g", "ok"]);
        gate.store(true, Ordering::SeqCst);
        assert!(matches!(
            block_on(router.issue_with(&g, &r(9))),
            ProviderOutcome::Issued(_)
        ));
        assert_eq!(calls.load(Ordering::SeqCst), 4);
        assert_eq!(router.health()[0].1.breaker.as_str(), "closed");
    }

    #[test]
    fn weights_share_one_priority_and_priorities_go_first() {
        let clock = Arc::new(ManualClock::new(T0));
        let specs = [
            (Coverage::default(), 1, 1, vec![0]),
            (Coverage::default(), 0, 3, vec![0]),
            (Coverage::default(), 0, 1, vec![0]),
        ];
        let (router, _) = router(&specs, clock);
        let mut first = [0usize; 3];
        for seed in 0..4000u128 {
            let plan = router.plan(&request("1500.00", PaymentMethod::Sbp, None, seed * 7919));
            assert_eq!(plan.providers.len(), 3);
            assert_eq!(
                plan.providers[2].as_str(),
                "p0",
                "the lower priority is last"
            );
            first[plan.providers[0].as_str()[1..].parse::<usize>().unwrap()] += 1;
        }
        assert_eq!(first[0], 0);
        let share = first[1] as f64 / 4000.0;
        assert!(
            (0.70..0.80).contains(&share),
            "weight 3 of 4: {share} ({first:?})"
        );
    }

    proptest! {
        /// Whatever the providers cover and however healthy they are, a plan holds only
        /// providers that cover the request and whose breaker lets them be asked, each once,
        /// and every such provider.
        #[test]
        fn a_plan_holds_exactly_the_eligible_providers(
            specs in proptest::collection::vec((coverage(), 0u32..3, 1u32..5), 1..6),
            open in proptest::collection::vec(any::<bool>(), 6),
            amount in 1u32..200_000,
            card in any::<bool>(),
            bank in proptest::option::of(proptest::sample::select(vec!["Сбербанк", "Т-Банк", "Альфа"])),
            seed in any::<u128>(),
        ) {
            let clock = Arc::new(ManualClock::new(T0));
            let specs: Vec<_> = specs.into_iter().map(|(c, p, w)| (c, p, w, vec![4])).collect();
            let (router, _) = router(&specs, clock);
            let method = if card { PaymentMethod::CardTransfer } else { PaymentMethod::Sbp };
            let r = request(&format!("{amount}.00"), method, bank, seed);
            // Open the breakers of some providers (five ambiguous answers each).
            for (i, o) in open.iter().enumerate().take(specs.len()) {
                if *o {
                    let name = ProviderName::parse(&format!("p{i}")).unwrap();
                    for _ in 0..5 {
                        block_on(router.issue_with(&name, &r));
                    }
                }
            }
            let plan = router.plan(&r);
            let mut seen = std::collections::HashSet::new();
            for name in &plan.providers {
                prop_assert!(seen.insert(name.clone()), "{} twice", name);
                let i: usize = name.as_str()[1..].parse().unwrap();
                prop_assert!(specs[i].0.covers(&r, T0).is_ok(), "{} does not cover", name);
                prop_assert!(!open[i], "{} has its breaker open", name);
            }
            let eligible = (0..specs.len())
                .filter(|&i| specs[i].0.covers(&r, T0).is_ok() && !open[i])
                .count();
            prop_assert_eq!(plan.providers.len(), eligible);
        }

        /// Asked through the router, providers are tried in the plan's order until one
        /// issues or answers what may have issued: never another one after an ambiguous
        /// answer, and after a definite refusal the next one.
        #[test]
        fn never_a_second_provider_after_an_ambiguous_answer(
            scripts in proptest::collection::vec(0u8..5, 1..6),
            seed in any::<u128>(),
        ) {
            let clock = Arc::new(ManualClock::new(T0));
            let specs: Vec<_> = scripts
                .iter()
                .map(|&k| (Coverage::default(), 0, 1, vec![k]))
                .collect();
            let (router, log) = router(&specs, clock);
            let r = request("1500.00", PaymentMethod::Sbp, None, seed);
            let plan = router.plan(&r);
            let answer = block_on(router.issue(&r));
            let asked = log.lock().unwrap().clone();
            let planned: Vec<String> = plan.providers.iter().map(|p| p.to_string()).collect();
            prop_assert_eq!(&asked[..], &planned[..asked.len()], "asked in the plan's order");
            for (n, name) in asked.iter().enumerate() {
                let i: usize = name[1..].parse().unwrap();
                let last = n + 1 == asked.len();
                // Issued (0) or ambiguous (4) may have issued: the end. The others refuse.
                if matches!(scripts[i], 0 | 4) {
                    prop_assert!(last, "{} may have issued, yet more were asked", name);
                } else {
                    prop_assert!(!last || asked.len() == planned.len(), "stopped after a refusal of {}", name);
                }
            }
            let last: usize = asked.last().unwrap()[1..].parse().unwrap();
            prop_assert_eq!(answer, outcome(scripts[last]));
        }
    }
}
