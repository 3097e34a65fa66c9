//! A provider that answers locally ([`RequisiteProvider::issues_locally`]) is asked before the
//! payment is stored, and a payment that gets requisites is stored with them in the admission's
//! write. The outcome of every request, and what is stored, must be those of the two-write path.
//!
//! [`RequisiteProvider::issues_locally`]: payments_core::provider::RequisiteProvider::issues_locally

use std::sync::atomic::Ordering;
use std::time::Duration;

use payments_core::payment::{Payment, PaymentStatus};
use payments_core::service::CreateStatus;
use payments_core::{ApiError, ErrorCode};
use proptest::prelude::*;
use proptest::test_runner::FileFailurePersistence;

use crate::support::{setup, Setup};

/// Amounts: requisites issued, the provider's three refusals (`.13`, `.14`, `.15`), and one
/// below both methods' minimum (nothing taken, the provider not asked).
const AMOUNTS: [&str; 5] = ["100", "250.13", "250.14", "250.15", "5"];

fn request(mpid: usize, amount: usize, card: bool) -> String {
    let method = if card { "card_transfer" } else { "sbp" };
    format!(
        r#"{{"merchant_payment_id":"order-{mpid}","amount":{},"payment_method":"{method}"}}"#,
        AMOUNTS[amount]
    )
}

/// What a create answered, comparable across the two services.
#[derive(Debug, PartialEq)]
enum Answer {
    Done(CreateStatus, Box<Payment>),
    Refused(ErrorCode, Option<payments_core::PaymentId>),
}

fn answer(r: Result<payments_core::service::CreateOutcome, ApiError>) -> Answer {
    match r {
        Ok(o) => Answer::Done(o.status, Box::new(o.payment)),
        Err(e) => Answer::Refused(e.code, e.payment_id),
    }
}

/// A service whose provider numbers requisites by payment id, upstream or local.
fn service(local: bool) -> Setup {
    let s = setup();
    s.h.provider.keyed.store(true, Ordering::SeqCst);
    s.h.provider.local.store(local, Ordering::SeqCst);
    s
}

#[test]
fn a_local_provider_is_asked_before_the_payment_is_stored() {
    let s = service(true);
    let out = s.create(&request(1, 0, false)).unwrap();
    assert_eq!(out.status, CreateStatus::Created);
    assert_eq!(out.payment.status, PaymentStatus::Processing);
    assert!(out.payment.requisites.is_some() && out.payment.pricing.is_some());
    // Stored as answered, by the admission alone: no change was committed after it.
    assert_eq!(s.stored(out.payment.id), out.payment);
    assert_eq!(s.h.store.changes_committed(), 0);
    assert_eq!(s.h.provider.calls.load(Ordering::SeqCst), 1);
    // A repeat asks the provider again (its answer is thrown away) and gets the stored payment.
    let again = s.create(&request(1, 0, false)).unwrap();
    assert_eq!(again.status, CreateStatus::Existing);
    assert_eq!(again.payment, out.payment);
    assert_eq!(s.h.provider.calls.load(Ordering::SeqCst), 2);
    // A business rule that fails asks nothing.
    let below = s.create(&request(2, 4, false)).unwrap_err();
    assert_eq!(below.code, ErrorCode::PaymentNotCovered);
    assert_eq!(s.h.provider.calls.load(Ordering::SeqCst), 2);
    // A refusal is stored as before: the payment, then its `error`.
    let refused = s.create(&request(3, 1, false)).unwrap();
    assert_eq!(refused.payment.status, PaymentStatus::Error);
    assert_eq!(s.h.store.changes_committed(), 1);
}

#[test]
fn an_upstream_provider_is_asked_after_the_payment_is_stored() {
    let s = service(false);
    let out = s.create(&request(1, 0, false)).unwrap();
    assert_eq!(out.payment.status, PaymentStatus::Processing);
    // Stored in `created` first, then changed to `processing`.
    assert_eq!(s.h.store.changes_committed(), 1);
    let again = s.create(&request(1, 0, false)).unwrap();
    assert_eq!(again.status, CreateStatus::Existing);
    // The repeat found the payment before any provider call.
    assert_eq!(s.h.provider.calls.load(Ordering::SeqCst), 1);
}

#[test]
fn a_local_provider_numbering_by_counter_still_answers_with_its_requisites() {
    // The sandbox numbers from a counter: a repeat draws a number that is never used.
    let s = setup();
    s.h.provider.local.store(true, Ordering::SeqCst);
    let first = s.create(&request(1, 0, false)).unwrap().payment;
    let again = s.create(&request(1, 0, false)).unwrap();
    assert_eq!(again.status, CreateStatus::Existing);
    assert_eq!(again.payment, first);
    let second = s.create(&request(2, 0, false)).unwrap().payment;
    let (a, b) = (first.requisites.unwrap(), second.requisites.unwrap());
    assert_eq!(a.requisite, "79000000000");
    // Number 1 went to the repeat's answer, thrown away.
    assert_eq!(b.requisite, "79000000002");
}

proptest! {
    #![proptest_config(ProptestConfig {
        cases: 64,
        failure_persistence: Some(Box::new(FileFailurePersistence::WithSource(
            "proptest-regressions"
        ))),
        ..ProptestConfig::default()
    })]

    /// Any sequence of creates (fresh ids, repeats of the same request, the same id with
    /// another request, each provider outcome, a broken business rule) answers the same and
    /// leaves the same payments and events with a local provider as with an upstream one.
    #[test]
    fn a_local_provider_answers_and_stores_what_the_two_writes_do(
        ops in prop::collection::vec((0usize..4, 0usize..AMOUNTS.len(), any::<bool>(), 0u64..3_000), 1..24)
    ) {
        let upstream = service(false);
        let local = service(true);
        for (i, (mpid, amount, card, wait)) in ops.iter().enumerate() {
            let body = request(*mpid, *amount, *card);
            let a = answer(upstream.create(&body));
            let b = answer(local.create(&body));
            prop_assert_eq!(&a, &b, "request {} ({})", i, body);
            for s in [&upstream, &local] {
                s.h.clock.advance(Duration::from_millis(*wait));
            }
        }
        for mpid in 0..4 {
            let id = format!("order-{mpid}");
            let a = upstream.by_mpid(&id);
            prop_assert_eq!(&a, &local.by_mpid(&id), "{}", id);
            if let Some(p) = a {
                prop_assert_eq!(upstream.events(p.id), local.events(p.id));
            }
        }
    }
}
