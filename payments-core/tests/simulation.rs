//! A deterministic simulation: a seeded driver lives thousands of payments through the real
//! service over the in-memory store with a manual clock - create, pay, cancel, expire (clock
//! advance + sweep), re-check, resolve, resend, duplicate creates, rate changes and restarts -
//! and checks every life against the spec, from the store and the outbox, with its own model.
//!
//! A failure names the seed and the step; rerun with the same seed list to reproduce it.

mod common;

use std::collections::HashSet;
use std::future::Future;
use std::pin::pin;
use std::task::{Context, Poll, Waker};
use std::time::Duration;

use futures_executor::block_on;
use rust_decimal::Decimal;

use common::{amount, merchant, project, Harness};
use payments_core::amount::Amount;
use payments_core::event::EventKind;
use payments_core::payment::{Currency, Payment, PaymentErrorCode, PaymentStatus};
use payments_core::project::{Merchant, Project};
use payments_core::service::{Actor, CreateOutcome, CreateStatus};
use payments_core::settlement::Course;
use payments_core::store::{OutboxStore, PaymentStore};
use payments_core::transition::{RecheckOutcome, Trigger};
use payments_core::{ApiError, Clock, ErrorCode, EventId, PaymentId, Timestamp};

use PaymentStatus::*;

/// Fixed seeds: 3 x 1000 payment lives.
const SEEDS: [u64; 3] = [0x5EED_0001, 0x5EED_0002, 0x5EED_0003];
const LIVES_PER_SEED: usize = 1_000;
/// Lives in flight at once.
const IN_FLIGHT: usize = 40;

const AMOUNTS: [&str; 6] = ["100", "250.50", "3400", "1000.000", "77700", "123.456789"];
const COURSES: [&str; 4] = ["100", "95.5", "101.25", "92.87654321"];

/// splitmix64: the driver's own deterministic generator.
struct Dice(u64);

impl Dice {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }

    fn below(&mut self, n: u64) -> u64 {
        self.next() % n
    }

    fn chance(&mut self, percent: u64) -> bool {
        self.below(100) < percent
    }

    fn pick<T: Copy>(&mut self, items: &[T]) -> T {
        items[self.below(items.len() as u64) as usize]
    }
}

/// An expected callback: status, amount, kind and queue time.
type Expected = (PaymentStatus, Amount, EventKind, Timestamp);

/// The driver's model of one payment life, kept from the spec, not from the code.
struct Life {
    id: PaymentId,
    body: String,
    mpid: String,
    method_fee: Decimal,
    project: usize,
    is_test: bool,
    has_destination: bool,
    status: PaymentStatus,
    amount: Amount,
    initial: Amount,
    has_requisites: bool,
    appeal_from: Option<PaymentStatus>,
    course: Option<Decimal>,
    created_at: Timestamp,
    updated_at: Timestamp,
    expires_at: Timestamp,
    events: Vec<Expected>,
    ops: u32,
}

enum Op {
    Confirm(Option<Amount>),
    Cancel,
    Recheck,
    Resolve(RecheckOutcome),
    Resend,
}

impl Op {
    fn trigger(&self) -> Trigger {
        match self {
            Op::Confirm(amount) => Trigger::Confirm { amount: *amount },
            Op::Cancel => Trigger::Cancel,
            Op::Recheck => Trigger::StartRecheck,
            Op::Resolve(o) => Trigger::ResolveRecheck(*o),
            Op::Resend => Trigger::ResendCallback,
        }
    }
}

/// The spec's table for operator operations: the status, amount and `appeal_from` after `op`,
/// or `None` when it is illegal.
fn expected(l: &Life, op: &Op) -> Option<(PaymentStatus, Amount, Option<PaymentStatus>)> {
    let keep = l.amount;
    Some(match (l.status, op) {
        (Processing | Canceled, Op::Confirm(a)) => (Completed, a.unwrap_or(keep), None),
        (Completed, Op::Confirm(Some(a))) if *a != keep => (Completed, *a, None),
        (Processing | Completed, Op::Cancel) => (Canceled, keep, None),
        (Completed | Canceled | Error, Op::Recheck) => (Appeal, keep, Some(l.status)),
        (Appeal, Op::Resolve(RecheckOutcome::Completed { amount })) if l.has_requisites => {
            (Completed, amount.unwrap_or(keep), None)
        }
        (Appeal, Op::Resolve(RecheckOutcome::Canceled)) if l.has_requisites => {
            (Canceled, keep, None)
        }
        (Appeal, Op::Resolve(RecheckOutcome::Unchanged)) => (l.appeal_from?, keep, None),
        (Completed | Canceled | Error, Op::Resend) => (l.status, keep, None),
        _ => return None,
    })
}

struct World {
    seed: u64,
    step: usize,
    dice: Dice,
    h: Harness,
    merchants: Vec<Merchant>,
    projects: Vec<Project>,
    course: Decimal,
    lives: Vec<Life>,
    event_ids: HashSet<EventId>,
    restarts: u64,
    exact_expiries: usize,
    late_expiries: usize,
    checked: usize,
}

impl World {
    fn new(seed: u64) -> World {
        let h = Harness::new(seed);
        let m1 = merchant(1, Some("https://merchant-one.example.com/all"));
        let m2 = merchant(2, None);
        // (merchant, test mode, project URL): live with the merchant's URL, live with a project
        // URL, live without any URL, test mode with a project URL.
        let specs = [
            (0, false, None),
            (1, false, Some("https://project-two.example.com/cb")),
            (1, false, None),
            (1, true, Some("https://project-four.example.com/cb")),
        ];
        let merchants = vec![m1, m2];
        let mut projects = Vec::new();
        for (i, (m, test, url)) in specs.into_iter().enumerate() {
            let p = project(10 + i as u128, &merchants[m], test, url);
            h.add(&merchants[m], &p);
            projects.push(p);
        }
        World {
            seed,
            step: 0,
            dice: Dice(seed),
            h,
            merchants,
            projects,
            course: common::dec("100"),
            lives: Vec::new(),
            event_ids: HashSet::new(),
            restarts: 0,
            exact_expiries: 0,
            late_expiries: 0,
            checked: 0,
        }
    }

    fn ctx(&self) -> String {
        format!("seed {:#x} step {}", self.seed, self.step)
    }

    fn now(&self) -> Timestamp {
        self.h.clock.now()
    }

    fn stored(&self, id: PaymentId) -> Payment {
        block_on(self.h.store.payment(id))
            .unwrap()
            .unwrap_or_else(|| panic!("{}: payment {id} missing", self.ctx()))
    }

    fn create_raw(&self, project: usize, body: &str) -> Result<CreateOutcome, ApiError> {
        block_on(self.h.create(self.projects[project].id, body.as_bytes()))
    }

    fn create(&mut self, n: usize) {
        let ctx = self.ctx();
        let project = self.dice.below(self.projects.len() as u64) as usize;
        let roll = self.dice.below(1000);
        let amount_text = match roll {
            0..=29 => "100.13",  // provider: no requisites
            30..=49 => "100.15", // provider: not routable
            50..=59 => "100.14", // provider: ambiguous answer
            60..=64 => "100.16", // provider: never answers
            _ => self.dice.pick(&AMOUNTS),
        };
        let card = self.dice.chance(40);
        let payment_url = self.dice.chance(25);
        let mpid = format!("sim-{n}");
        let quoted = self.dice.chance(50);
        let amount_json = if quoted {
            format!("\"{amount_text}\"")
        } else {
            amount_text.to_string()
        };
        let mut body = format!(
            r#"{{"merchant_payment_id":"{mpid}","amount":{amount_json},"payment_method":"{}""#,
            if card { "card_transfer" } else { "sbp" }
        );
        if payment_url {
            body.push_str(r#","callback_url":"https://pay.example.net/cb""#);
        }
        body.push('}');
        let p = &self.projects[project];
        let m = self
            .merchants
            .iter()
            .find(|m| m.id == p.merchant_id)
            .unwrap();
        let has_destination = payment_url || p.callback_url.is_some() || m.callback_url.is_some();
        let started = self.now();

        let result = if amount_text == "100.16" {
            // Drive the create by hand: it waits for the provider until the 15 s budget ends.
            let mut fut = pin!(self.h.create(p.id, body.as_bytes()));
            let mut cx = Context::from_waker(Waker::noop());
            assert!(fut.as_mut().poll(&mut cx).is_pending(), "{ctx}");
            self.h.clock.advance(Duration::from_millis(14_999));
            assert!(fut.as_mut().poll(&mut cx).is_pending(), "{ctx}");
            self.h.clock.advance(Duration::from_millis(1));
            match fut.as_mut().poll(&mut cx) {
                Poll::Ready(r) => r,
                Poll::Pending => panic!("{ctx}: the provider budget ran out"),
            }
        } else {
            self.create_raw(project, &body)
        };

        let (payment, status) = match (amount_text, result) {
            ("100.15", Err(e)) => {
                assert_eq!(e.code, ErrorCode::PaymentNotRoutable, "{ctx}");
                let id = e
                    .payment_id
                    .unwrap_or_else(|| panic!("{ctx}: no payment_id"));
                (self.stored(id), Error)
            }
            (_, Ok(out)) => {
                assert_eq!(out.status, CreateStatus::Created, "{ctx}");
                let want = match amount_text {
                    "100.13" | "100.14" | "100.16" => Error,
                    _ => Processing,
                };
                (out.payment, want)
            }
            (a, Err(e)) => panic!("{ctx}: create {a} failed: {e}"),
        };
        assert_eq!(payment.status, status, "{ctx}: {body}");
        if status == Error {
            let want = match amount_text {
                "100.13" | "100.15" => PaymentErrorCode::ProviderNoRequisites,
                _ => PaymentErrorCode::ProviderResultAmbiguous,
            };
            assert_eq!(payment.failure.as_ref().unwrap().code, want, "{ctx}");
        }
        assert_eq!(payment.created_at, started, "{ctx}");
        assert_eq!(payment.expires_at, started + p.lifetime, "{ctx}");
        assert_eq!(payment.is_test(), p.test_mode, "{ctx}");
        let initial = amount(amount_text);
        self.lives.push(Life {
            id: payment.id,
            body,
            mpid,
            method_fee: common::dec(if card { "2.5" } else { "11" }),
            project,
            is_test: p.test_mode,
            has_destination,
            status,
            amount: initial,
            initial,
            has_requisites: status == Processing,
            appeal_from: None,
            course: (status == Processing).then(|| Course::new(self.course).unwrap().as_decimal()),
            created_at: started,
            updated_at: payment.updated_at,
            expires_at: started + p.lifetime,
            events: Vec::new(),
            ops: 0,
        });
        let i = self.lives.len() - 1;
        self.check_payment(i);
    }

    fn operate(&mut self, i: usize) {
        let ctx = self.ctx();
        let l = &self.lives[i];
        let some_amount = |d: &mut Dice| {
            if d.chance(30) {
                Some(l.amount)
            } else {
                Some(amount(d.pick(&AMOUNTS)))
            }
        };
        let op = match self.dice.below(10) {
            0..=2 => Op::Confirm(if self.dice.chance(50) {
                None
            } else {
                some_amount(&mut self.dice)
            }),
            3 | 4 => Op::Cancel,
            5 | 6 => Op::Recheck,
            7 | 8 => Op::Resolve(match self.dice.below(3) {
                0 => RecheckOutcome::Completed {
                    amount: if self.dice.chance(50) {
                        None
                    } else {
                        some_amount(&mut self.dice)
                    },
                },
                1 => RecheckOutcome::Canceled,
                _ => RecheckOutcome::Unchanged,
            }),
            _ => Op::Resend,
        };
        let want = expected(l, &op);
        let id = l.id;
        let result = block_on(self.h.service.payments().operate(
            id,
            op.trigger(),
            &Actor("operator:sim".into()),
        ));
        let now = self.now();
        let l = &mut self.lives[i];
        l.ops += 1;
        match (want, result) {
            (None, Err(e)) => {
                assert_eq!(e.code(), ErrorCode::InvalidTransition, "{ctx}: {e}");
                assert!(e.to_string().contains(l.status.as_str()), "{ctx}: {e}");
            }
            (None, Ok(r)) => panic!(
                "{ctx}: {} from {} must be refused, went to {}",
                op.trigger().name(),
                l.status,
                r.payment.status
            ),
            (Some(_), Err(e)) => panic!(
                "{ctx}: {} from {} refused: {e}",
                op.trigger().name(),
                l.status
            ),
            (Some((status, amount, appeal_from)), Ok(r)) => {
                let resend = matches!(op, Op::Resend);
                let notify = resend || (!l.is_test && matches!(status, Completed | Canceled));
                let kind = if resend {
                    EventKind::ManualResend
                } else {
                    EventKind::Automatic
                };
                if notify && l.has_destination {
                    l.events.push((status, amount, kind, now));
                }
                assert_eq!(r.event.is_some(), notify && l.has_destination, "{ctx}");
                l.status = status;
                l.amount = amount;
                l.appeal_from = appeal_from;
                if !resend {
                    l.updated_at = now;
                }
            }
        }
        self.check_payment(i);
    }

    /// The same request again (200, same payment) or another amount (409).
    fn duplicate(&mut self, i: usize) {
        let ctx = self.ctx();
        let l = &self.lives[i];
        let (project, body, mpid, id) = (l.project, l.body.clone(), l.mpid.clone(), l.id);
        if self.dice.chance(50) {
            let out = self
                .create_raw(project, &body)
                .unwrap_or_else(|e| panic!("{ctx}: repeat failed: {e}"));
            assert_eq!(out.status, CreateStatus::Existing, "{ctx}");
            assert_eq!(out.payment, self.stored(id), "{ctx}");
        } else {
            let other = format!(
                r#"{{"merchant_payment_id":"{mpid}","amount":"1.5","payment_method":"sbp"}}"#
            );
            let e = self.create_raw(project, &other).unwrap_err();
            assert_eq!(e.code, ErrorCode::PaymentIdempotencyConflict, "{ctx}");
        }
    }

    /// Moves the clock (sometimes exactly to the next deadline) and runs the sweep.
    fn advance_and_sweep(&mut self) {
        let ctx = self.ctx();
        let next_deadline = self
            .lives
            .iter()
            .filter(|l| l.status == Processing)
            .map(|l| l.expires_at)
            .min();
        match (self.dice.below(3), next_deadline) {
            (0, Some(d)) if d > self.now() => self.h.clock.set(d),
            (1, Some(d)) if d > self.now() + Duration::from_millis(1) => self
                .h
                .clock
                .set(Timestamp::from_unix_millis(d.unix_millis() - 1)),
            _ => self
                .h
                .clock
                .advance(Duration::from_millis(1 + self.dice.below(240_000))),
        }
        let now = self.now();
        let report = block_on(self.h.service.payments().sweep(100_000)).unwrap();
        let mut expired = 0;
        for i in 0..self.lives.len() {
            let l = &mut self.lives[i];
            if l.status == Processing && l.expires_at <= now {
                expired += 1;
                l.status = Canceled;
                l.updated_at = now;
                if !l.is_test && l.has_destination {
                    l.events
                        .push((Canceled, l.amount, EventKind::Automatic, now));
                }
                if now == l.expires_at {
                    self.exact_expiries += 1;
                } else {
                    self.late_expiries += 1;
                }
                self.check_payment(i);
            } else if l.status == Processing {
                let id = l.id;
                let p = self.stored(id);
                assert_eq!(p.status, Processing, "{ctx}: expired before its lifetime");
            }
        }
        assert_eq!(report.expired, expired, "{ctx}");
        assert_eq!(report.recovered, 0, "{ctx}");
    }

    /// The stored payment against the model.
    fn check_payment(&mut self, i: usize) {
        let ctx = self.ctx();
        let l = &self.lives[i];
        let p = self.stored(l.id);
        assert_eq!(p.status, l.status, "{ctx}: payment {}", l.id);
        assert_eq!(p.amount, l.amount, "{ctx}");
        assert_eq!(
            p.initial_amount, l.initial,
            "{ctx}: initial_amount never changes"
        );
        assert_eq!(p.appeal_from, l.appeal_from, "{ctx}");
        assert_eq!(p.updated_at, l.updated_at, "{ctx}");
        assert_eq!(p.created_at, l.created_at, "{ctx}");
        assert_eq!(p.requisites.is_some(), l.has_requisites, "{ctx}");
        if p.status == Error {
            assert!(
                p.requisites.is_none(),
                "{ctx}: error only before requisites"
            );
        }
        match (&p.pricing, l.course) {
            (None, None) => assert!(p.merchant_information().is_none(), "{ctx}"),
            (Some(pricing), Some(course)) => {
                // Course and fee fixed at issue, settlement from the current amount.
                assert_eq!(pricing.course.as_decimal(), course, "{ctx}");
                assert_eq!(pricing.fee_percent.as_decimal(), l.method_fee, "{ctx}");
                let s = p.merchant_information().unwrap();
                let a = p.amount.as_decimal();
                let fee = (a * l.method_fee / Decimal::ONE_HUNDRED).trunc_with_scale(4);
                assert_eq!(s.amount_usdt, (a / course).trunc_with_scale(4), "{ctx}");
                assert_eq!(s.fee, fee, "{ctx}");
                assert_eq!(s.amount_rate, a - fee, "{ctx}");
                assert_eq!(
                    s.amount_usdt_rate,
                    ((a - fee) / course).trunc_with_scale(4),
                    "{ctx}"
                );
            }
            (x, y) => panic!("{ctx}: pricing {x:?} but model course {y:?}"),
        }
        self.checked += 1;
    }

    /// The outbox of one life against its expected callback sequence.
    fn check_events(&mut self, i: usize) {
        let ctx = self.ctx();
        let l = &self.lives[i];
        let records = block_on(self.h.store.events_for_payment(l.id)).unwrap();
        let mut seen = Vec::new();
        for r in &records {
            let ev = &r.outbox.event;
            let body: serde_json::Value = serde_json::from_slice(&ev.body).unwrap();
            assert!(
                self.event_ids.insert(ev.event_id),
                "{ctx}: event_id {} reused",
                ev.event_id
            );
            assert_eq!(body["event_id"], ev.event_id.to_string(), "{ctx}");
            assert_eq!(body["status"], ev.status.as_str(), "{ctx}");
            assert_eq!(body["is_test"], l.is_test, "{ctx}");
            assert_eq!(
                body["initial_amount"].to_string(),
                l.initial.to_string(),
                "{ctx}"
            );
            assert!(ev.status != Appeal, "{ctx}: no callback in appeal");
            if l.is_test {
                assert_eq!(ev.kind, EventKind::ManualResend, "{ctx}: test payments");
            }
            if ev.kind == EventKind::Automatic {
                assert!(matches!(ev.status, Completed | Canceled), "{ctx}");
            }
            assert_eq!(
                r.outbox.max_attempts,
                if ev.kind == EventKind::ManualResend {
                    1
                } else {
                    3
                },
                "{ctx}"
            );
            let amount = Amount::parse(&body["amount"].to_string()).unwrap();
            seen.push((ev.status, amount, ev.kind, ev.created_at));
        }
        assert_eq!(seen, l.events, "{ctx}: callbacks of payment {}", l.id);
    }

    fn run(&mut self) {
        let mut created = 0;
        let mut active: Vec<usize> = Vec::new();
        while created < LIVES_PER_SEED || !active.is_empty() {
            self.step += 1;
            let roll = self.dice.below(100);
            if (roll < 25 || active.is_empty())
                && created < LIVES_PER_SEED
                && active.len() < IN_FLIGHT
            {
                self.create(created);
                active.push(self.lives.len() - 1);
                created += 1;
            } else if roll < 80 && !active.is_empty() {
                let k = self.dice.below(active.len() as u64) as usize;
                let i = active[k];
                if self.dice.chance(5) {
                    self.duplicate(i);
                } else {
                    self.operate(i);
                }
                let l = &self.lives[i];
                // Retire a life once it closed after a few operations.
                if l.status.is_closed() && (l.ops >= 6 || self.dice.chance(20)) {
                    self.check_events(i);
                    active.swap_remove(k);
                }
            } else if roll < 98 || active.is_empty() {
                self.advance_and_sweep();
            } else if roll == 98 {
                self.restarts += 1;
                self.h
                    .restart(self.seed.wrapping_mul(1_000).wrapping_add(self.restarts));
            } else {
                self.course = common::dec(self.dice.pick(&COURSES));
                self.h.rates.set(Currency::RUB, &self.course.to_string());
            }
            if self.step > 200_000 {
                panic!("{}: the simulation does not terminate", self.ctx());
            }
        }
    }
}

#[test]
fn thousands_of_payment_lives_follow_the_spec() {
    let mut totals = (0, 0, 0, 0);
    for seed in SEEDS {
        let mut w = World::new(seed);
        w.run();
        assert_eq!(w.lives.len(), LIVES_PER_SEED);
        // Every life's callbacks were checked when it retired; all lives retired.
        let closed = w.lives.iter().filter(|l| l.status.is_closed()).count();
        assert_eq!(closed, LIVES_PER_SEED, "seed {seed:#x}");
        totals.0 += w.exact_expiries;
        totals.1 += w.late_expiries;
        totals.2 += w.restarts;
        totals.3 += w.event_ids.len();
        eprintln!(
            "seed {seed:#x}: {} steps, {} checks, {} events, {} expiries at the deadline, {} later, {} restarts",
            w.step,
            w.checked,
            w.event_ids.len(),
            w.exact_expiries,
            w.late_expiries,
            w.restarts
        );
    }
    // The runs exercised what they claim to.
    assert!(totals.0 > 0, "no expiry exactly at the deadline");
    assert!(totals.1 > 0, "no expiry found by a later sweep");
    assert!(totals.2 > 0, "no restart");
    assert!(totals.3 > 1_000, "too few callbacks");
}
