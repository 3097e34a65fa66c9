//! Provider outcomes, and the 15 s budget of a provider that never answers.

use std::future::Future;
use std::pin::pin;
use std::task::{Context, Poll};
use std::time::Duration;

use futures_executor::block_on;
use payments_core::payment::{PaymentErrorCode, PaymentStatus};
use payments_core::service::CreateStatus;
use payments_core::{Clock, ErrorCode};

use crate::common::{ts, T_CREATED};
use crate::support::{body, code, poll, setup};

#[test]
fn provider_without_requisites_gives_a_created_payment_in_error() {
    let s = setup();
    let p = s.created(&body("n1", "100.13"));
    assert_eq!(p.status, PaymentStatus::Error);
    let f = p.failure.as_ref().unwrap();
    assert_eq!(f.code, PaymentErrorCode::ProviderNoRequisites);
    assert!(p.requisites.is_none() && p.merchant_information().is_none());
    let json = serde_json::to_value(p.view()).unwrap();
    assert_eq!(json["error_code"], "provider_no_requisites");
    assert!(s.events(p.id).is_empty(), "no callback for error");
    // The id stays taken: the same request returns it.
    let again = s.create(&body("n1", "100.13")).unwrap();
    assert_eq!(again.status, CreateStatus::Existing);
    assert_eq!(again.payment.id, p.id);
}

#[test]
fn provider_not_routable_is_422_with_payment_id_then_200_with_that_payment() {
    let s = setup();
    let e = code(s.create(&body("nr", "100.15")));
    assert_eq!(e.code, ErrorCode::PaymentNotRoutable);
    let id = e.payment_id.expect("the payment was saved");
    let stored = s.stored(id);
    assert_eq!(stored.status, PaymentStatus::Error);
    assert_eq!(
        stored.failure.as_ref().unwrap().code,
        PaymentErrorCode::ProviderNoRequisites
    );
    let again = s.create(&body("nr", "100.15")).unwrap();
    assert_eq!(again.status, CreateStatus::Existing);
    assert_eq!(again.payment, stored);
    assert!(s.events(id).is_empty());
}

#[test]
fn provider_ambiguous_answer_gives_error_provider_result_ambiguous() {
    let s = setup();
    let p = s.created(&body("a1", "100.14"));
    assert_eq!(p.status, PaymentStatus::Error);
    assert_eq!(
        p.failure.unwrap().code,
        PaymentErrorCode::ProviderResultAmbiguous
    );
}

#[test]
fn a_provider_that_never_answers_ends_ambiguous_after_exactly_15_s() {
    let s = setup();
    let b = body("slow", "100.16");
    let mut fut = pin!(s.h.create(s.project.id, b.as_bytes()));
    assert!(poll(fut.as_mut()).is_pending());
    // The payment is taken while the provider is asked.
    let pending = s
        .by_mpid("slow")
        .expect("inserted before the provider call");
    assert_eq!(pending.status, PaymentStatus::Created);
    s.h.advance(Duration::from_millis(14_999));
    assert!(poll(fut.as_mut()).is_pending(), "the budget is 15 s");
    s.h.advance(Duration::from_millis(1));
    let out = match poll(fut.as_mut()) {
        Poll::Ready(r) => r.unwrap(),
        Poll::Pending => panic!("the 15 s budget ran out"),
    };
    assert_eq!(out.status, CreateStatus::Created);
    assert_eq!(out.payment.status, PaymentStatus::Error);
    assert_eq!(
        out.payment.failure.as_ref().unwrap().code,
        PaymentErrorCode::ProviderResultAmbiguous
    );
    assert_eq!(out.payment.updated_at, ts(T_CREATED + 15_000));
    assert_eq!(s.stored(out.payment.id), out.payment);
}

#[test]
fn a_rate_source_that_never_answers_is_no_rate_after_exactly_its_budget() {
    let s = setup();
    s.h.rates
        .hang
        .store(true, std::sync::atomic::Ordering::SeqCst);
    let b = body("no-rate", "100");
    let mut fut = pin!(s.h.create(s.project.id, b.as_bytes()));
    assert!(poll(fut.as_mut()).is_pending());
    s.h.advance(Duration::from_millis(2_999));
    assert!(poll(fut.as_mut()).is_pending(), "the budget is 3 s");
    s.h.advance(Duration::from_millis(1));
    let e = match poll(fut.as_mut()) {
        Poll::Ready(r) => code(r),
        Poll::Pending => panic!("the 3 s rate budget ran out"),
    };
    assert_eq!(e.code, ErrorCode::PaymentRateUnavailable);
    // The same answer as no rate, but the cause (and the message) say the source was slow.
    assert_eq!(
        e.cause.as_deref(),
        Some(&payments_core::error::ErrorCause::Rate(
            payments_core::error::RateFailure::TimedOut(Duration::from_secs(3))
        ))
    );
    assert!(e.message.ends_with("in time"), "{}", e.message);
    // A business-rule refusal takes nothing: the id is free and the provider was not asked.
    assert!(s.by_mpid("no-rate").is_none());
    assert_eq!(
        s.h.provider.calls.load(std::sync::atomic::Ordering::SeqCst),
        0
    );
    s.h.rates
        .hang
        .store(false, std::sync::atomic::Ordering::SeqCst);
    assert_eq!(
        s.created(&body("no-rate", "100")).status,
        PaymentStatus::Processing
    );
}

#[test]
fn a_provider_that_never_answers_with_the_clock_driven_from_another_task() {
    let s = setup();
    let b = body("slow2", "100.16");
    let create = s.h.create(s.project.id, b.as_bytes());
    let clock = s.h.clock.clone();
    // Advances the clock by 1 s whenever the create is waiting on a timer.
    let driver = async move {
        loop {
            if clock.next_deadline().is_some() {
                clock.advance(Duration::from_secs(1));
            }
            if clock.next_deadline().is_none() && clock.now() > ts(T_CREATED) {
                return;
            }
            YieldOnce(false).await;
        }
    };
    let (out, ()) = block_on(futures_util::future::join(create, driver));
    let p = out.unwrap().payment;
    assert_eq!(p.status, PaymentStatus::Error);
    assert_eq!(
        p.failure.unwrap().code,
        PaymentErrorCode::ProviderResultAmbiguous
    );
    assert_eq!(p.updated_at, ts(T_CREATED + 15_000));
}

/// Returns `Pending` once (waking itself), then `Ready`.
struct YieldOnce(bool);

impl Future for YieldOnce {
    type Output = ();
    fn poll(mut self: std::pin::Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<()> {
        if self.0 {
            Poll::Ready(())
        } else {
            self.0 = true;
            cx.waker().wake_by_ref();
            Poll::Pending
        }
    }
}
