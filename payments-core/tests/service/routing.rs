//! Several providers behind the router of `payments-providers`: routing by coverage, failover after a definite
//! refusal (the switch recorded on the payment before the next provider is asked), no
//! failover after an answer that may have issued, and a recovery that asks the provider the
//! payment names, never another.

use std::future::Future;
use std::pin::pin;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll, Waker};
use std::time::Duration;

use async_trait::async_trait;
use futures_executor::block_on;
use payments_core::auth::Environment;
use payments_core::payment::{PaymentErrorCode, PaymentMethod, PaymentStatus};
use payments_core::provider::{ProviderName, ProviderOutcome, RequisiteProvider, RequisiteRequest};
use payments_core::service::{AuthConfig, Recovery};
use payments_core::store::PaymentStore;
use payments_core::testing::ManualClock;
use payments_core::Clock;
use payments_providers::{Coverage, Route, Router};

use crate::common::{merchant, project, Harness};
use crate::support::{body, poll};

/// Answers what it is told (or never, while `hang`; after a pause on a clock's timers, when
/// told one), counting its calls.
#[derive(Default)]
struct Told {
    answer: Mutex<Option<ProviderOutcome>>,
    hang: std::sync::atomic::AtomicBool,
    later: Mutex<Option<(ManualClock, Duration)>>,
    calls: AtomicUsize,
}

#[async_trait]
impl RequisiteProvider for Told {
    async fn issue(&self, _: &RequisiteRequest) -> ProviderOutcome {
        self.calls.fetch_add(1, Ordering::SeqCst);
        if self.hang.load(Ordering::SeqCst) {
            std::future::pending::<()>().await;
        }
        let later = self.later.lock().unwrap().clone();
        if let Some((clock, pause)) = later {
            clock.sleep(pause).await;
        }
        self.answer
            .lock()
            .unwrap()
            .clone()
            .unwrap_or(ProviderOutcome::NoRequisites("told nothing".into()))
    }
}

struct Three {
    h: Harness,
    project: payments_core::ids::ProjectId,
    /// Refuses (no requisites) unless told otherwise; priority 0.
    first: Arc<Told>,
    /// Priority 1.
    second: Arc<Told>,
}

/// `first` (priority 0, `first_covers`) and `second` (priority 1, a told provider) before the
/// harness's test provider (`healthy`, priority 2).
fn three(first_covers: Coverage) -> Three {
    let first = Arc::new(Told::default());
    let second = Arc::new(Told::default());
    let (f, s2) = (first.clone(), second.clone());
    let h = Harness::with_ports(
        11,
        AuthConfig::for_environment(Environment::Sandbox),
        move |clock, healthy| {
            let route =
                |name: &str, provider: Arc<dyn RequisiteProvider>, priority, coverage| Route {
                    name: ProviderName::parse(name).unwrap(),
                    provider,
                    coverage,
                    priority,
                    weight: 1,
                };
            Arc::new(
                Router::new(
                    vec![
                        route("first", f, 0, first_covers),
                        route("second", s2, 1, Coverage::default()),
                        route("healthy", healthy, 2, Coverage::default()),
                    ],
                    Arc::new(clock.clone()),
                )
                .unwrap(),
            )
        },
    );
    let m = merchant(1, Some("https://merchant.example.com/all"));
    let p = project(1, &m, false, None);
    h.add(&m, &p);
    Three {
        h,
        project: p.id,
        first,
        second,
    }
}

fn issued(requisite: &str) -> ProviderOutcome {
    ProviderOutcome::Issued(payments_core::provider::IssuedRequisites::new(
        requisite, "I. I.",
    ))
}

#[test]
fn a_definite_refusal_moves_on_and_the_payment_records_who_issued() {
    let t = three(Coverage::default());
    *t.second.answer.lock().unwrap() = Some(ProviderOutcome::Unavailable("down".into()));
    let out = block_on(t.h.create(t.project, body("f1", "1500.00").as_bytes())).unwrap();
    let p = out.payment;
    assert_eq!(p.status, PaymentStatus::Processing);
    assert_eq!(p.requisites.as_ref().unwrap().holder_name, "TEST HOLDER");
    let route = p.route.as_ref().unwrap();
    assert_eq!(route.provider.as_str(), "healthy");
    assert!(
        route.reason.contains("failover after second: not reached"),
        "{}",
        route.reason
    );
    assert_eq!(t.first.calls.load(Ordering::SeqCst), 1);
    assert_eq!(t.second.calls.load(Ordering::SeqCst), 1);
    // Created (1), routed to second (2), to healthy (3), issued (4).
    assert_eq!(p.version, 4);
    assert_eq!(block_on(t.h.store.payment(p.id)).unwrap().unwrap(), p);
    // The merchant's view never names the provider.
    let json = serde_json::to_string(&p.view()).unwrap();
    assert!(
        !json.contains("healthy") && !json.contains("route"),
        "{json}"
    );
}

#[test]
fn coverage_routes_around_a_provider() {
    let cards_only = Coverage {
        methods: vec![PaymentMethod::CardTransfer],
        ..Coverage::default()
    };
    let t = three(cards_only);
    *t.first.answer.lock().unwrap() = Some(issued("2200000000000001"));
    *t.second.answer.lock().unwrap() = Some(issued("79000000001"));
    let sbp = block_on(t.h.create(t.project, body("c1", "1500.00").as_bytes())).unwrap();
    assert_eq!(sbp.payment.route.unwrap().provider.as_str(), "second");
    let card = serde_json::json!({"merchant_payment_id": "c2", "amount": "1500.00",
                                  "payment_method": "card_transfer"})
    .to_string();
    let card = block_on(t.h.create(t.project, card.as_bytes())).unwrap();
    let route = card.payment.route.unwrap();
    assert_eq!(route.provider.as_str(), "first");
    assert_eq!(
        t.first.calls.load(Ordering::SeqCst),
        1,
        "asked for the card only"
    );
}

#[test]
fn an_ambiguous_answer_ends_the_create_and_the_recovery_asks_that_provider_only() {
    let t = three(Coverage::default());
    *t.first.answer.lock().unwrap() = Some(ProviderOutcome::Ambiguous("timed out".into()));
    let out = block_on(t.h.create(t.project, body("a1", "1500.00").as_bytes())).unwrap();
    let p = out.payment;
    assert_eq!(p.status, PaymentStatus::Error);
    assert_eq!(
        p.failure.as_ref().unwrap().code,
        PaymentErrorCode::ProviderResultAmbiguous
    );
    assert_eq!(p.route.as_ref().unwrap().provider.as_str(), "first");
    assert_eq!(
        t.second.calls.load(Ordering::SeqCst),
        0,
        "never a second provider"
    );
    assert_eq!(t.h.provider.calls.load(Ordering::SeqCst), 0);
    // On the operator's reconciliation list, naming the provider that may have issued.
    let since = payments_core::Timestamp::from_unix_millis(0);
    let r = block_on(t.h.service.payments().reconciliation(since, 10)).unwrap();
    assert_eq!(r.ambiguous.len(), 1);
    assert_eq!(
        r.ambiguous[0].route.as_ref().unwrap().provider.as_str(),
        "first"
    );
}

/// [`three`] where first refuses after 1 s on the harness's clock and second takes the request
/// and never answers; and that clock.
fn first_refuses_after_1_s_second_hangs() -> (Three, ManualClock) {
    let t = three(Coverage::default());
    let clock = t.h.clock.clone();
    *t.first.later.lock().unwrap() = Some((clock.clone(), Duration::from_secs(1)));
    *t.first.answer.lock().unwrap() = Some(ProviderOutcome::Unavailable("busy".into()));
    t.second.hang.store(true, Ordering::SeqCst);
    (t, clock)
}

/// A wall clock stepped back during a create's failover neither lengthens the create past its
/// provider budget nor lets a repeat recover it while it still runs: the budget is one timer on
/// the monotonic clock, so the create ends 15 s after it began, before a repeat (which counts
/// the budget from its own start when the payment's creation time is ahead of the clock)
/// takes it as lost and asks the provider a second time.
#[test]
fn a_wall_clock_stepped_back_during_the_failover_keeps_the_create_in_its_budget() {
    let (t, clock) = first_refuses_after_1_s_second_hangs();
    let b = body("step1", "1500.00");
    let mut create = pin!(t.h.create(t.project, b.as_bytes()));
    assert!(poll(create.as_mut()).is_pending());
    clock.step_wall_back(Duration::from_secs(110));
    let mut repeat = pin!(t.h.create(t.project, b.as_bytes()));
    assert!(poll(repeat.as_mut()).is_pending());
    let step = Duration::from_millis(250);
    let (mut created, mut waited) = (None, Duration::ZERO);
    let repeated = loop {
        assert!(waited < Duration::from_secs(60), "still waiting");
        clock.advance(step);
        waited += step;
        if created.is_none() {
            if let Poll::Ready(r) = poll(create.as_mut()) {
                created = Some((r.unwrap().payment, waited));
            }
        }
        if let Poll::Ready(r) = poll(repeat.as_mut()) {
            break r.unwrap().payment;
        }
    };
    let (created, ended) = created.expect("the create ended before its repeat");
    assert_eq!(
        ended,
        Duration::from_secs(15),
        "the budget, on the timers' clock"
    );
    assert_eq!(
        created.failure.as_ref().unwrap().code,
        PaymentErrorCode::ProviderResultAmbiguous
    );
    assert_eq!(created.route.as_ref().unwrap().provider.as_str(), "second");
    assert_eq!(
        repeated, created,
        "the repeat answers what the create stored"
    );
    assert_eq!(
        t.second.calls.load(Ordering::SeqCst),
        1,
        "second asked by the create only"
    );
}

/// A wall clock stepped forward during a create makes its payment look lost by its age: a
/// repeat and the sweep arriving then leave it to the create still running in this process
/// (they asked the first provider again while the create failed over to the second: a
/// second ask of each, and two providers possibly issuing for one payment).
#[test]
fn a_wall_clock_stepped_forward_during_the_create_leaves_the_payment_to_its_create() {
    let (t, clock) = first_refuses_after_1_s_second_hangs();
    let b = body("jump1", "1500.00");
    let mut create = pin!(t.h.create(t.project, b.as_bytes()));
    assert!(poll(create.as_mut()).is_pending());
    clock.step_wall_forward(Duration::from_secs(110));
    let payments = t.h.service.payments();
    let mut repeat = pin!(t.h.create(t.project, b.as_bytes()));
    let mut sweep = pin!(payments.sweep(1_000));
    let Poll::Ready(report) = poll(sweep.as_mut()) else {
        panic!("the sweep asked a provider about a payment whose create is running");
    };
    assert_eq!(report.unwrap().changed(), 0);
    let step = Duration::from_millis(250);
    let (mut created, mut waited) = (None, Duration::ZERO);
    let repeated = loop {
        assert!(waited < Duration::from_secs(60), "still waiting");
        if let Poll::Ready(r) = poll(repeat.as_mut()) {
            break r.unwrap().payment;
        }
        clock.advance(step);
        waited += step;
        if created.is_none() {
            if let Poll::Ready(r) = poll(create.as_mut()) {
                created = Some(r.unwrap().payment);
            }
        }
    };
    let created = created.expect("the create ended before its repeat");
    assert_eq!(created.route.as_ref().unwrap().provider.as_str(), "second");
    assert_eq!(
        created.failure.as_ref().unwrap().code,
        PaymentErrorCode::ProviderResultAmbiguous
    );
    assert_eq!(
        repeated, created,
        "the repeat answers what the create stored"
    );
    assert_eq!(
        (
            t.first.calls.load(Ordering::SeqCst),
            t.second.calls.load(Ordering::SeqCst)
        ),
        (1, 1),
        "each provider asked by the create only"
    );
}

/// A recovery given a copy of the payment read while its create still ran (as the sweep reads
/// its batch before it recovers) asks nobody once the create has answered: it reads the
/// payment again (it asked the provider the old copy named, here the one the create had
/// failed over from).
#[test]
fn a_recovery_of_a_stale_copy_asks_nobody_once_the_create_answered() {
    let (t, clock) = first_refuses_after_1_s_second_hangs();
    t.second.hang.store(false, Ordering::SeqCst);
    *t.second.answer.lock().unwrap() = Some(issued("79000000042"));
    let b = body("stale1", "1500.00");
    let mut create = pin!(t.h.create(t.project, b.as_bytes()));
    assert!(poll(create.as_mut()).is_pending());
    let mpid = payments_core::payment::MerchantPaymentId::parse("stale1").unwrap();
    let stale = block_on(t.h.store.payment_by_merchant_id(t.project, &mpid))
        .unwrap()
        .unwrap();
    assert_eq!(stale.route.as_ref().unwrap().provider.as_str(), "first");
    clock.advance(Duration::from_secs(1));
    let Poll::Ready(created) = poll(create.as_mut()) else {
        panic!("the create did not answer after the failover");
    };
    assert_eq!(created.unwrap().payment.status, PaymentStatus::Processing);
    let payments = t.h.service.payments();
    let mut recovery = pin!(payments.recover_create(&stale));
    let Poll::Ready(recovery) = poll(recovery.as_mut()) else {
        panic!("the recovery asked a provider about a payment its create has answered");
    };
    assert_eq!(recovery.unwrap(), Recovery::Raced);
    assert_eq!(
        t.first.calls.load(Ordering::SeqCst),
        1,
        "first asked by the create only"
    );
}

#[test]
fn a_create_cut_off_during_the_failover_is_recovered_from_the_provider_it_names() {
    let t = three(Coverage::default());
    // First refuses; second takes the request and never answers (the node dies there).
    t.second.hang.store(true, Ordering::SeqCst);
    {
        let b = body("cut1", "1500.00");
        let mut create = pin!(t.h.create(t.project, b.as_bytes()));
        let poll = create
            .as_mut()
            .poll(&mut Context::from_waker(Waker::noop()));
        assert!(matches!(poll, Poll::Pending));
        // Dropped here: the process died while second was being asked.
    }
    let mpid = payments_core::payment::MerchantPaymentId::parse("cut1").unwrap();
    let stuck = block_on(t.h.store.payment_by_merchant_id(t.project, &mpid))
        .unwrap()
        .unwrap();
    assert_eq!(stuck.status, PaymentStatus::Created);
    assert_eq!(
        stuck.route.as_ref().unwrap().provider.as_str(),
        "second",
        "the switch was recorded before second was asked"
    );
    // Past its budget it is on the operator's reconciliation list, unresolved.
    t.h.advance(Duration::from_secs(17));
    let since = payments_core::Timestamp::from_unix_millis(0);
    let r = block_on(t.h.service.payments().reconciliation(since, 10)).unwrap();
    assert_eq!(
        r.unresolved.iter().map(|p| p.id).collect::<Vec<_>>(),
        [stuck.id]
    );
    assert!(r.recovered.is_empty());
    assert!(!r.cut, "one unresolved payment under a limit of 10");
    // A limit of one: the list is full, and says more may exist.
    let r = block_on(t.h.service.payments().reconciliation(since, 1)).unwrap();
    assert!(r.cut, "{r:?}");
    // Second cannot be reached yet: the payment stays `created`, asked about again later
    // (twice its age then), and nobody else is asked.
    t.second.hang.store(false, Ordering::SeqCst);
    *t.second.answer.lock().unwrap() = Some(ProviderOutcome::Unavailable("refused".into()));
    let calls_before = t.first.calls.load(Ordering::SeqCst);
    let recovery = block_on(t.h.service.payments().recover_create(&stuck)).unwrap();
    assert_eq!(recovery, Recovery::Deferred);
    let deferred = block_on(t.h.store.payment(stuck.id)).unwrap().unwrap();
    assert_eq!(deferred.status, PaymentStatus::Created);
    let age = deferred.updated_at.duration_since(deferred.created_at);
    assert!(age >= Duration::from_secs(17), "{age:?}");
    assert_eq!(
        deferred.due_at(),
        Some(deferred.updated_at + payments_core::payment::STUCK_CREATE_AFTER),
        "twice an age under 30 s is below the 60 s floor"
    );
    // Second answers now, with what it issued then.
    *t.second.answer.lock().unwrap() = Some(issued("79000000042"));
    let recovery = block_on(t.h.service.payments().recover_create(&deferred)).unwrap();
    assert_eq!(recovery, Recovery::Resolved);
    let p = block_on(t.h.store.payment(stuck.id)).unwrap().unwrap();
    assert_eq!(p.status, PaymentStatus::Processing);
    assert_eq!(p.requisites.unwrap().requisite, "79000000042");
    assert_eq!(
        t.first.calls.load(Ordering::SeqCst),
        calls_before,
        "first not asked again"
    );
    assert_eq!(t.h.provider.calls.load(Ordering::SeqCst), 0, "nor healthy");
    // Resolved now, and its recovery is on record with the provider it asked.
    let r = block_on(t.h.service.payments().reconciliation(since, 10)).unwrap();
    assert!(r.unresolved.is_empty());
    assert_eq!(r.recovered.len(), 2, "the deferral and the resolution");
    let outcomes: Vec<(String, String)> = r
        .recovered
        .iter()
        .map(|a| {
            assert_eq!(a.target, stuck.id.to_string());
            let after: serde_json::Value =
                serde_json::from_str(a.after.as_deref().unwrap()).unwrap();
            assert_eq!(after["provider"], "second");
            (
                after["outcome"].as_str().unwrap().to_string(),
                after["reason"].as_str().unwrap_or("-").to_string(),
            )
        })
        .collect();
    assert_eq!(
        outcomes,
        [
            ("resolved".to_string(), "-".to_string()),
            ("deferred".to_string(), "refused".to_string())
        ]
    );
}
