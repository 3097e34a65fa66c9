//! The lifecycle sweep: expiry with its callback and destination, a payment stuck in
//! `created`, and a restarted service over the same store.

use std::pin::pin;
use std::task::Poll;
use std::time::Duration;

use futures_executor::block_on;
use payments_core::event::EventKind;
use payments_core::payment::{PaymentErrorCode, PaymentStatus};
use payments_core::service::CreateStatus;
use payments_core::store::Store;

use crate::common::{self, ts, url, T_CREATED};
use crate::support::{body, poll, setup, setup_with, LIFETIME};

#[test]
fn sweep_expires_exactly_at_the_lifetime_with_a_callback() {
    let s = setup();
    s.h.advance(Duration::from_millis(1_234));
    let p = s.created(&body("e1", "100"));
    assert_eq!(p.expires_at, ts(T_CREATED + 1_234) + LIFETIME);
    s.h.advance(LIFETIME - Duration::from_millis(1));
    assert_eq!(s.sweep().expired, 0);
    assert_eq!(s.stored(p.id).status, PaymentStatus::Processing);
    s.h.advance(Duration::from_millis(1));
    let report = s.sweep();
    assert_eq!(report.expired, 1);
    assert_eq!(report.recovered, 0);
    let after = s.stored(p.id);
    assert_eq!(after.status, PaymentStatus::Canceled);
    assert_eq!(after.updated_at, p.expires_at);
    let events = s.events(p.id);
    assert_eq!(events.len(), 1);
    let ev = &events[0].outbox;
    assert_eq!(ev.event.status, PaymentStatus::Canceled);
    assert_eq!(ev.event.kind, EventKind::Automatic);
    assert_eq!(ev.max_attempts, 3);
    assert_eq!(ev.next_attempt_at, Some(p.expires_at));
    assert_eq!(ev.destination.as_str(), "https://merchant.example.com/all");
    // Nothing more to do.
    s.h.advance(Duration::from_secs(60));
    assert_eq!(s.sweep().expired, 0);
    assert_eq!(s.events(p.id).len(), 1);
}

#[test]
fn callback_destination_precedence_payment_then_project_then_merchant() {
    let cases = [
        (
            Some("https://merchant.example.com/m"),
            Some("https://project.example.com/p"),
            Some("https://pay.example.com/x"),
            Some("https://pay.example.com/x"),
        ),
        (
            Some("https://merchant.example.com/m"),
            Some("https://project.example.com/p"),
            None,
            Some("https://project.example.com/p"),
        ),
        (
            Some("https://merchant.example.com/m"),
            None,
            None,
            Some("https://merchant.example.com/m"),
        ),
        (None, None, None, None),
    ];
    for (m, pr, pay, want) in cases {
        let s = setup_with(false, m, pr);
        let b = match pay {
            Some(u) => format!(
                r#"{{"merchant_payment_id":"d","amount":"100","payment_method":"sbp","callback_url":"{u}"}}"#
            ),
            None => body("d", "100"),
        };
        let p = s.created(&b);
        s.h.advance(LIFETIME);
        assert_eq!(s.sweep().expired, 1);
        assert_eq!(s.stored(p.id).status, PaymentStatus::Canceled);
        let events = s.events(p.id);
        match want {
            Some(u) => {
                assert_eq!(events.len(), 1);
                assert_eq!(events[0].outbox.destination, url(u));
            }
            None => assert!(events.is_empty(), "no URL at any level: no event"),
        }
    }
}

/// A crash during the provider call leaves the payment in `created`; 60 s later the sweep asks
/// the provider again for the same payment id, and the payment gets what it answers:
/// requisites (here), or `error` with `provider_result_ambiguous` when it cannot say (below).
/// No callback either way.
#[test]
fn a_payment_stuck_in_created_is_resolved_by_asking_the_provider_again_after_60_s() {
    let s = setup();
    let mut stuck = common::fixture();
    stuck.project_id = s.project.id;
    stuck.callback_url = Some(url("https://pay.example.com/x"));
    assert_eq!(
        block_on(s.h.store.insert_payment(&stuck)).unwrap(),
        payments_core::store::InsertOutcome::Inserted
    );
    s.h.advance(Duration::from_millis(59_999));
    assert_eq!(s.sweep().changed(), 0);
    assert_eq!(s.stored(stuck.id).status, PaymentStatus::Created);
    s.h.advance(Duration::from_millis(1));
    let report = s.sweep();
    assert_eq!(
        (report.recovered, report.ambiguous, report.expired),
        (1, 0, 0)
    );
    let p = s.stored(stuck.id);
    assert_eq!(p.status, PaymentStatus::Processing);
    assert!(p.requisites.is_some() && p.pricing.is_some(), "{p:?}");
    assert_eq!(p.updated_at, ts(T_CREATED + 60_000));
    assert!(s.events(stuck.id).is_empty());
}

/// A repeat of the create of a payment stuck in `created`, once the provider budget and 1 s
/// have passed since the create, asks the provider itself and answers the resolved payment
/// (before that it waits, as for a create still running).
#[test]
fn a_repeat_of_a_lost_create_resolves_it_after_the_provider_budget() {
    let s = setup();
    let mut stuck = common::fixture();
    stuck.project_id = s.project.id;
    block_on(s.h.store.insert_payment(&stuck)).unwrap();
    // 15 s of provider budget and 1 s of margin after the create (here 20 s): taken as lost.
    s.h.advance(Duration::from_secs(20));
    let again = s.create(&body("order-1001", "3400")).unwrap();
    assert_eq!(again.status, CreateStatus::Existing);
    assert_eq!(again.payment.id, stuck.id);
    assert_eq!(again.payment.status, PaymentStatus::Processing);
    assert!(again.payment.requisites.is_some());
    // The sweeper finds nothing left to do.
    s.h.advance(Duration::from_secs(60));
    assert_eq!(s.sweep().changed(), 0);
}

/// A payment of `amount` stuck in `created` whose creation time is 110 s ahead of the clock
/// (its create stored it while the node's clock ran ahead, then died; the clock was stepped
/// back since), and a repeat of its create driven to its answer: the answer and how long the
/// repeat took.
fn repeat_of_a_create_stored_ahead(
    s: &crate::support::Setup,
    amount: &str,
) -> (payments_core::service::CreateOutcome, Duration) {
    let fixture = common::fixture();
    let mut stuck = payments_core::testing::fixtures::payment(
        fixture.id,
        s.project.id,
        &payments_core::testing::fixtures::request(
            "order-1001",
            amount,
            payments_core::payment::PaymentMethod::Sbp,
        ),
        fixture.flow,
        fixture.created_at,
        fixture.expires_at.duration_since(fixture.created_at),
    );
    let step = Duration::from_secs(110);
    (stuck.created_at, stuck.updated_at) = (stuck.created_at + step, stuck.updated_at + step);
    stuck.expires_at = stuck.expires_at + step;
    block_on(s.h.store.insert_payment(&stuck)).unwrap();
    let b = body("order-1001", amount);
    let mut repeat = pin!(s.h.create(s.project.id, b.as_bytes()));
    let mut waited = Duration::ZERO;
    loop {
        if let Poll::Ready(r) = poll(repeat.as_mut()) {
            let again = r.unwrap();
            assert_eq!(again.status, CreateStatus::Existing);
            assert_eq!(again.payment.id, stuck.id);
            return (again, waited);
        }
        assert!(waited < Duration::from_secs(60), "the repeat still waits");
        s.h.advance(Duration::from_millis(250));
        waited += Duration::from_millis(250);
    }
}

/// A repeat of a lost create whose creation time is ahead of the clock counts the provider
/// budget from its own start, and resolves the payment 16 s later, as it would any lost
/// create, instead of answering it still `created` (and every later repeat the same, for as
/// long as the step).
#[test]
fn a_repeat_resolves_a_lost_create_whose_creation_time_is_ahead_of_the_clock() {
    let s = setup();
    let (again, waited) = repeat_of_a_create_stored_ahead(&s, "3400");
    assert_eq!(again.payment.status, PaymentStatus::Processing);
    assert!(again.payment.requisites.is_some());
    assert_eq!(
        waited,
        Duration::from_secs(16),
        "the budget and 1 s from the repeat's start"
    );
}

/// The same, the provider unable to say: the recovery is deferred, and the deferral moves the
/// payment's next recovery out although the clock is behind the payment's times (its
/// `updated_at` becomes the last one's and a millisecond, not the clock's earlier time).
#[test]
fn a_deferred_recovery_of_a_create_stored_ahead_moves_its_next_recovery_out() {
    let s = setup();
    let (again, _) = repeat_of_a_create_stored_ahead(&s, "3400.14");
    let p = again.payment;
    assert_eq!(p.status, PaymentStatus::Created);
    assert_eq!(p.updated_at, p.created_at + Duration::from_millis(1));
    assert!(p.due_at().unwrap() > p.created_at + payments_core::payment::STUCK_CREATE_AFTER);
}

/// After a crash under load, every stuck payment of a sweep's batch is resolved by that sweep
/// (asked about at once), so the expiries behind them wait one sweep, not one per few.
#[test]
fn one_sweep_resolves_every_stuck_payment_of_its_batch() {
    let s = setup();
    for n in 0..40u128 {
        let mut stuck = common::fixture();
        stuck.project_id = s.project.id;
        stuck.id = payments_core::PaymentId::from_uuid(uuid::Uuid::from_u128(0x0192_0000 + n));
        stuck.merchant_payment_id =
            payments_core::payment::MerchantPaymentId::parse(&format!("stuck-{n}")).unwrap();
        block_on(s.h.store.insert_payment(&stuck)).unwrap();
    }
    s.h.advance(Duration::from_millis(60_000));
    let report = block_on(s.h.service.payments().sweep(40)).unwrap();
    assert_eq!((report.recovered, report.ambiguous), (40, 0));
    assert_eq!(s.sweep().changed(), 0, "nothing left");
}

#[test]
fn a_stuck_payment_the_provider_cannot_resolve_becomes_error_ambiguous_without_callback() {
    let s = setup();
    let mut stuck = common::fixture();
    stuck.project_id = s.project.id;
    stuck.callback_url = Some(url("https://pay.example.com/x"));
    // The test provider answers `.14` as ambiguous.
    let amount = payments_core::amount::Amount::parse("100.14").unwrap();
    (stuck.amount, stuck.initial_amount) = (amount, amount);
    block_on(s.h.store.insert_payment(&stuck)).unwrap();
    // Asked about again while the provider cannot say, later each time, until the recovery
    // window (1 hour) ends: at the ages of 60 s, 3 min, 9 min, 24 min, then every 15 minutes.
    let mut deferred_at = Vec::new();
    let mut age = 0;
    let report = loop {
        let due = s
            .stored(stuck.id)
            .due_at()
            .expect("a created payment is due");
        let next = due.duration_since(stuck.created_at).as_secs();
        // Not a millisecond earlier.
        s.h.advance(Duration::from_secs(next - age) - Duration::from_millis(1));
        assert_eq!(s.sweep().changed(), 0, "not due before {next} s");
        s.h.advance(Duration::from_millis(1));
        age = next;
        let report = s.sweep();
        if report.deferred == 0 {
            break report;
        }
        assert_eq!(s.stored(stuck.id).status, PaymentStatus::Created);
        deferred_at.push(age);
    };
    assert_eq!(deferred_at, [60, 180, 540, 1440, 2340, 3240]);
    assert_eq!(age, 4140, "the first ask past the hour");
    assert_eq!(
        (report.recovered, report.ambiguous, report.expired),
        (0, 1, 0)
    );
    // The sweeper's warning names it, for the operator who reconciles it.
    assert_eq!(report.ambiguous_ids, [stuck.id]);
    let p = s.stored(stuck.id);
    assert_eq!(p.status, PaymentStatus::Error);
    let failure = p.failure.unwrap();
    assert_eq!(failure.code, PaymentErrorCode::ProviderResultAmbiguous);
    assert!(
        failure.comment.contains("over 69 min of asking"),
        "{}",
        failure.comment
    );
    assert!(s.events(stuck.id).is_empty());
}

#[test]
fn a_restarted_service_continues_over_the_same_store() {
    let mut s = setup();
    let p = s.created(&body("rs", "100"));
    s.h.restart(99);
    let again = s.create(&body("rs", "100")).unwrap();
    assert_eq!(again.status, CreateStatus::Existing);
    assert_eq!(again.payment.id, p.id);
    s.h.advance(LIFETIME);
    assert_eq!(s.sweep().expired, 1);
}

/// The history of a live payment without any callback URL (no callback is ever queued): its
/// creation, the provider's requisites, the expiry by its lifetime, then support's re-check
/// resolved as completed with another amount, each at its time, with its cause and source.
#[test]
fn the_history_of_a_payment_without_a_callback_url_shows_every_change() {
    use payments_core::history::{ChangeCause as C, ChangeSource as S};
    use payments_core::transition::{RecheckOutcome, Trigger};
    let s = setup_with(false, None, None);
    let p = s.created(&body("h1", "100"));
    s.h.advance(LIFETIME);
    assert_eq!(s.sweep().expired, 1);
    s.h.advance(Duration::from_secs(60));
    s.operate(p.id, Trigger::StartRecheck).expect("re-check");
    s.h.advance(Duration::from_secs(60));
    let amount = Some(payments_core::amount::Amount::parse("99.5").expect("an amount"));
    let resolve = Trigger::ResolveRecheck(RecheckOutcome::Completed { amount });
    let done = s.operate(p.id, resolve).expect("resolved");
    assert!(s.events(p.id).is_empty(), "no callback without a URL");

    let history = block_on(s.h.service.payments().history(&done)).expect("history");
    let seen: Vec<_> = (history.iter())
        .map(|e| (e.from, e.to, e.cause, e.source, e.amount.to_string()))
        .collect();
    use PaymentStatus::*;
    let want = [
        (None, Created, C::Created, Some(S::Merchant), "100"),
        (
            Some(Created),
            Processing,
            C::RequisitesIssued,
            Some(S::Provider),
            "100",
        ),
        (
            Some(Processing),
            Canceled,
            C::Expired,
            Some(S::Lifetime),
            "100",
        ),
        (
            Some(Canceled),
            Appeal,
            C::RecheckStarted,
            Some(S::Support),
            "100",
        ),
        (
            Some(Appeal),
            Completed,
            C::RecheckResolved,
            Some(S::Support),
            "99.5",
        ),
    ];
    let want: Vec<_> = (want.into_iter())
        .map(|(f, t, c, so, a)| (f, t, c, so, a.to_string()))
        .collect();
    assert_eq!(seen, want);
    let times: Vec<_> = history.iter().map(|e| e.at).collect();
    let expired = p.expires_at;
    let minute = Duration::from_secs(60);
    assert_eq!(times[0], p.created_at);
    assert_eq!(
        times[2..],
        [expired, expired + minute, expired + minute * 2]
    );
}
