//! The service over the in-memory store, a manual clock, a seeded random source, a
//! deterministic provider and fixed rates: create (idempotency, business rules, provider
//! outcomes and budget), sandbox test payments, the lifecycle sweep and operator operations.

mod common;

use std::future::Future;
use std::pin::pin;
use std::task::{Context, Poll, Waker};
use std::time::Duration;

use futures_executor::block_on;
use proptest::prelude::*;

use common::{amount, dec, merchant, project, ts, url, Harness, T_CREATED};
use payments_core::amount::Amount;
use payments_core::callback::address::AddressPolicy;
use payments_core::event::{EventKind, EventRecord};
use payments_core::payment::{Flow, Payment, PaymentErrorCode, PaymentStatus};
use payments_core::project::{Merchant, Project};
use payments_core::request::CreatePayment;
use payments_core::service::{Actor, CreateOutcome, CreateStatus};
use payments_core::store::{AuditStore, DirectoryStore, OutboxStore, PaymentStore};
use payments_core::testing::strategies;
use payments_core::transition::{RecheckOutcome, Trigger};
use payments_core::{ApiError, Clock, ErrorCode, PaymentId};

const LIFETIME: Duration = Duration::from_secs(15 * 60);

struct Setup {
    h: Harness,
    merchant: Merchant,
    project: Project,
}

/// A live project whose merchant has a common callback URL.
fn setup() -> Setup {
    setup_with(false, Some("https://merchant.example.com/all"), None)
}

fn setup_with(test_mode: bool, merchant_url: Option<&str>, project_url: Option<&str>) -> Setup {
    let h = Harness::new(11);
    let m = merchant(1, merchant_url);
    let p = project(1, &m, test_mode, project_url);
    h.add(&m, &p);
    Setup {
        h,
        merchant: m,
        project: p,
    }
}

impl Setup {
    fn create(&self, body: &str) -> Result<CreateOutcome, ApiError> {
        block_on(self.h.create(self.project.id, body.as_bytes()))
    }

    fn created(&self, body: &str) -> Payment {
        let out = self.create(body).expect("create succeeds");
        assert_eq!(out.status, CreateStatus::Created);
        out.payment
    }

    fn stored(&self, id: PaymentId) -> Payment {
        block_on(self.h.store.payment(id)).unwrap().unwrap()
    }

    fn by_mpid(&self, mpid: &str) -> Option<Payment> {
        let mpid = payments_core::payment::MerchantPaymentId::parse(mpid).unwrap();
        block_on(self.h.store.payment_by_merchant_id(self.project.id, &mpid)).unwrap()
    }

    fn events(&self, id: PaymentId) -> Vec<EventRecord> {
        block_on(self.h.store.events_for_payment(id)).unwrap()
    }

    fn operate(&self, id: PaymentId, trigger: Trigger) -> Result<Payment, ApiError> {
        block_on(
            self.h
                .service
                .operate(id, trigger, &Actor("operator:alice".into())),
        )
        .map(|r| r.payment)
    }

    fn sweep(&self) -> payments_core::service::SweepReport {
        block_on(self.h.service.sweep(1_000)).unwrap()
    }
}

fn body(mpid: &str, amount: &str) -> String {
    format!(r#"{{"merchant_payment_id":"{mpid}","amount":{amount},"payment_method":"sbp"}}"#)
}

fn code(r: Result<CreateOutcome, ApiError>) -> ApiError {
    match r {
        Ok(o) => panic!("expected an error, got {:?} {}", o.status, o.payment.status),
        Err(e) => e,
    }
}

#[test]
fn create_returns_a_new_processing_payment_with_settlement() {
    let s = setup();
    let p = s.created(&body("order-1", "3400"));
    assert_eq!(p.status, PaymentStatus::Processing);
    assert_eq!(p.flow, Flow::RuntimeLive);
    assert_eq!(p.amount, amount("3400"));
    assert_eq!(p.initial_amount, amount("3400"));
    assert_eq!(p.created_at, ts(T_CREATED));
    assert_eq!(p.expires_at, ts(T_CREATED) + LIFETIME);
    let req = p.requisites.as_ref().unwrap();
    assert_eq!(req.requisite, "79000000000");
    // The provider said "сбербанк": recognised as the catalog name.
    assert_eq!(req.bank.as_deref(), Some("Сбербанк"));
    assert_eq!(
        serde_json::to_string(&p.merchant_information()).unwrap(),
        r#"{"course":100.00,"rate":11.00,"amount_usdt":"34.0000","amount_rate":"3026.0000","amount_usdt_rate":"30.2600"}"#
    );
    assert_eq!(s.stored(p.id), p);
    assert!(s.events(p.id).is_empty(), "no callback for processing");
}

#[test]
fn the_same_request_again_returns_the_existing_payment() {
    let s = setup();
    let first = s.created(&body("order-1", "100"));
    for again in [
        body("order-1", "100"),
        body("order-1", r#""100.000""#),
        body("order-1", "100.0"),
        r#"{"merchant_payment_id":"order-1","amount":"100","payment_method":"sbp","currency":"RUB","geo_code":"RU","bank_code":"","is_intrabank":false}"#.to_string(),
    ] {
        let out = s.create(&again).unwrap();
        assert_eq!(out.status, CreateStatus::Existing, "{again}");
        assert_eq!(out.payment, first);
    }
    assert_eq!(
        s.h.provider.calls.load(std::sync::atomic::Ordering::SeqCst),
        1
    );
}

#[test]
fn the_same_id_with_another_request_is_an_idempotency_conflict() {
    let s = setup();
    s.created(&body("order-1", "100"));
    for other in [
        body("order-1", "100.01"),
        r#"{"merchant_payment_id":"order-1","amount":"100","payment_method":"card_transfer"}"#
            .to_string(),
        r#"{"merchant_payment_id":"order-1","amount":"100","payment_method":"sbp","bank_code":"Сбербанк"}"#
            .to_string(),
    ] {
        let e = code(s.create(&other));
        assert_eq!(e.code, ErrorCode::PaymentIdempotencyConflict, "{other}");
        assert_eq!(e.http_status(), 409);
        assert_eq!(e.payment_id, None);
    }
}

#[test]
fn a_bank_name_matches_case_insensitively_for_idempotency() {
    let s = setup();
    let first = s.created(
        r#"{"merchant_payment_id":"o","amount":"100","payment_method":"sbp","bank_code":"Сбербанк"}"#,
    );
    assert_eq!(first.bank_code.as_deref(), Some("Сбербанк"));
    let out = s
        .create(r#"{"merchant_payment_id":"o","amount":100,"payment_method":"sbp","bank_code":"сбербанк"}"#)
        .unwrap();
    assert_eq!(out.status, CreateStatus::Existing);
    assert_eq!(out.payment.id, first.id);
}

#[test]
fn unknown_bank_is_bank_not_found_and_the_id_stays_free() {
    let s = setup();
    let e = code(s.create(
        r#"{"merchant_payment_id":"order-7","amount":"100","payment_method":"sbp","bank_code":"No Such Bank"}"#,
    ));
    assert_eq!(e.code, ErrorCode::BankNotFound);
    assert_eq!(e.payment_id, None);
    assert!(s.by_mpid("order-7").is_none());
    let p = s.created(&body("order-7", "100"));
    assert_eq!(p.status, PaymentStatus::Processing);
}

#[test]
fn contract_violations_are_not_covered_and_take_nothing() {
    let s = setup();
    let mut sbp_only = s.project.clone();
    sbp_only
        .contract
        .methods
        .retain(|t| t.method == payments_core::payment::PaymentMethod::Sbp);
    block_on(DirectoryStore::put_project(s.h.store.as_ref(), &sbp_only)).unwrap();
    let create = |b: &str| block_on(s.h.create(sbp_only.id, b.as_bytes()));
    for (b, needle) in [
        (
            r#"{"merchant_payment_id":"c1","amount":"500","payment_method":"card_transfer"}"#,
            "payment_method card_transfer",
        ),
        (
            r#"{"merchant_payment_id":"c1","amount":"500","payment_method":"sbp","currency":"EUR"}"#,
            "currency EUR",
        ),
        (
            r#"{"merchant_payment_id":"c1","amount":"9.999999","payment_method":"sbp"}"#,
            "below",
        ),
        (
            r#"{"merchant_payment_id":"c1","amount":"1000000.000001","payment_method":"sbp"}"#,
            "above",
        ),
    ] {
        let e = code(create(b));
        assert_eq!(e.code, ErrorCode::PaymentNotCovered, "{b}");
        assert_eq!(e.http_status(), 422);
        assert!(e.message.contains(needle), "{}", e.message);
        assert_eq!(e.payment_id, None);
        assert!(s.by_mpid("c1").is_none());
    }
    // The limits are inclusive.
    for (mpid, a) in [("c-min", "10"), ("c-max", "1000000")] {
        let out = create(&body(mpid, a)).unwrap();
        assert_eq!(out.status, CreateStatus::Created);
    }
    assert_eq!(
        create(&body("c1", "500")).unwrap().status,
        CreateStatus::Created
    );
}

#[test]
fn no_rate_is_rate_unavailable_and_takes_nothing() {
    let s = setup();
    let e = code(s.create(
        r#"{"merchant_payment_id":"r1","amount":"500","payment_method":"sbp","currency":"USD"}"#,
    ));
    assert_eq!(e.code, ErrorCode::PaymentRateUnavailable);
    assert_eq!(e.payment_id, None);
    assert!(s.by_mpid("r1").is_none());
    s.h.rates.set(
        payments_core::payment::Currency::parse("USD").unwrap(),
        "0.95",
    );
    let p = s.created(
        r#"{"merchant_payment_id":"r1","amount":"500","payment_method":"sbp","currency":"USD"}"#,
    );
    // 500 / 0.95 = 526.3157... USDT, truncated.
    assert_eq!(
        p.merchant_information().unwrap().amount_usdt,
        dec("526.3157")
    );
}

#[test]
fn a_paused_merchant_is_not_routable_and_takes_nothing() {
    let mut s = setup();
    s.merchant.paused = true;
    block_on(s.h.store.put_merchant(&s.merchant)).unwrap();
    let e = code(s.create(&body("p1", "100")));
    assert_eq!(e.code, ErrorCode::PaymentNotRoutable);
    assert_eq!(e.payment_id, None);
    assert!(s.by_mpid("p1").is_none());
    assert_eq!(
        s.h.provider.calls.load(std::sync::atomic::Ordering::SeqCst),
        0
    );
}

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

fn poll<F: Future>(f: std::pin::Pin<&mut F>) -> Poll<F::Output> {
    f.poll(&mut Context::from_waker(Waker::noop()))
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

#[test]
fn test_mode_payments_are_test_payments_without_automatic_callbacks() {
    let s = setup_with(true, Some("https://merchant.example.com/all"), None);
    let p = s.created(&body("t1", "100"));
    assert!(p.is_test());
    assert_eq!(p.flow, Flow::ProjectTest);
    let json = serde_json::to_value(p.view()).unwrap();
    assert_eq!(json["is_test"], true);
    assert_eq!(json["flow"], "project_test");

    let actor = Actor("tester".into());
    let id = p.id.to_string();
    let done = block_on(s.h.test_complete(s.project.id, &id, Some(amount("99.5")))).unwrap();
    assert_eq!(done.status, PaymentStatus::Completed);
    assert_eq!(done.amount, amount("99.5"));
    assert!(
        s.events(p.id).is_empty(),
        "no automatic callback for a test payment"
    );
    // Only processing test payments.
    for e in [
        block_on(s.h.test_complete(s.project.id, &id, None)).unwrap_err(),
        block_on(s.h.test_cancel(s.project.id, &id)).unwrap_err(),
    ] {
        assert_eq!(e.code, ErrorCode::InvalidTransition);
        assert!(e.message.contains("completed"), "{}", e.message);
    }
    let audit = block_on(s.h.store.audit_records(10)).unwrap();
    assert_eq!(audit[0].action, "test_payment.confirm");
    // The actor is the calling project and its token's prefix, decided by the core.
    assert!(
        audit[0]
            .actor
            .starts_with(&format!("project:{} token:", s.project.id)),
        "{}",
        audit[0].actor
    );

    let q = s.created(&body("t2", "100"));
    let canceled = block_on(s.h.test_cancel(s.project.id, &q.id.to_string())).unwrap();
    assert_eq!(canceled.status, PaymentStatus::Canceled);
    // An operator's confirmation of a test payment: no automatic callback either.
    let later = s.operate(q.id, Trigger::Confirm { amount: None }).unwrap();
    assert_eq!(later.status, PaymentStatus::Completed);
    assert!(s.events(q.id).is_empty());
    // Expiry of a test payment: canceled, no callback.
    let r = s.created(&body("t3", "100"));
    s.h.advance(LIFETIME);
    assert_eq!(s.sweep().expired, 1);
    assert_eq!(s.stored(r.id).status, PaymentStatus::Canceled);
    assert!(s.events(r.id).is_empty());
    // A manual resend is a real event with is_test true.
    let resent = block_on(s.h.service.operate(q.id, Trigger::ResendCallback, &actor)).unwrap();
    let ev = resent.event.expect("resend queues an event");
    assert_eq!(ev.event.kind, EventKind::ManualResend);
    let b: serde_json::Value = serde_json::from_slice(&ev.event.body).unwrap();
    assert_eq!(b["is_test"], true);
}

#[test]
fn test_helpers_refuse_live_payments_and_other_projects() {
    let s = setup();
    let p = s.created(&body("l1", "100"));
    let e = block_on(s.h.test_complete(s.project.id, &p.id.to_string(), None)).unwrap_err();
    assert_eq!(e.code, ErrorCode::InvalidTransition);
    assert_eq!(s.stored(p.id).status, PaymentStatus::Processing);
    let other = project(2, &s.merchant, true, None);
    s.h.add(&s.merchant, &other);
    let e = block_on(s.h.test_complete(other.id, &p.id.to_string(), None)).unwrap_err();
    assert_eq!(e.code, ErrorCode::PaymentNotFound);
}

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

#[test]
fn a_payment_stuck_in_created_becomes_error_after_60_s_without_callback() {
    let s = setup();
    // A crash during the provider call leaves the payment in created.
    let mut stuck = common::fixture();
    stuck.project_id = s.project.id;
    stuck.callback_url = Some(url("https://pay.example.com/x"));
    assert_eq!(
        block_on(s.h.store.insert_payment(&stuck)).unwrap(),
        payments_core::store::InsertOutcome::Inserted
    );
    s.h.advance(Duration::from_millis(59_999));
    assert_eq!(s.sweep().recovered, 0);
    assert_eq!(s.stored(stuck.id).status, PaymentStatus::Created);
    s.h.advance(Duration::from_millis(1));
    let report = s.sweep();
    assert_eq!((report.recovered, report.expired), (1, 0));
    let p = s.stored(stuck.id);
    assert_eq!(p.status, PaymentStatus::Error);
    assert_eq!(
        p.failure.unwrap().code,
        PaymentErrorCode::ProviderResultAmbiguous
    );
    assert_eq!(p.updated_at, ts(T_CREATED + 60_000));
    assert!(s.events(stuck.id).is_empty());
}

#[test]
fn operator_operations_go_through_the_state_machine_with_audit_records() {
    let s = setup();
    let p = s.created(&body("op", "3400"));
    s.h.advance(Duration::from_secs(30));
    let done = s.operate(p.id, Trigger::Confirm { amount: None }).unwrap();
    assert_eq!(done.status, PaymentStatus::Completed);
    s.h.advance(Duration::from_secs(30));
    let changed = s
        .operate(
            p.id,
            Trigger::Confirm {
                amount: Some(amount("3500")),
            },
        )
        .unwrap();
    assert_eq!(
        changed.merchant_information().unwrap().amount_usdt_rate,
        dec("31.15")
    );
    s.h.advance(Duration::from_secs(30));
    s.operate(p.id, Trigger::StartRecheck).unwrap();
    // Illegal while in appeal.
    let e = s.operate(p.id, Trigger::ResendCallback).unwrap_err();
    assert_eq!(e.code, ErrorCode::InvalidTransition);
    assert!(e.message.contains("appeal"), "{}", e.message);
    s.h.advance(Duration::from_secs(30));
    s.operate(p.id, Trigger::ResolveRecheck(RecheckOutcome::Unchanged))
        .unwrap();
    s.h.advance(Duration::from_secs(30));
    s.operate(p.id, Trigger::Cancel).unwrap();
    s.h.advance(Duration::from_secs(30));
    let resend_at = s.h.clock.now();
    s.operate(p.id, Trigger::ResendCallback).unwrap();

    let events = s.events(p.id);
    let seen: Vec<(&str, String, EventKind, u32)> = events
        .iter()
        .map(|e| {
            let b: serde_json::Value = serde_json::from_slice(&e.outbox.event.body).unwrap();
            (
                e.outbox.event.status.as_str(),
                b["amount"].to_string(),
                e.outbox.event.kind,
                e.outbox.max_attempts,
            )
        })
        .collect();
    assert_eq!(
        seen,
        vec![
            ("completed", "3400".to_string(), EventKind::Automatic, 3),
            ("completed", "3500".to_string(), EventKind::Automatic, 3),
            ("completed", "3500".to_string(), EventKind::Automatic, 3),
            ("canceled", "3500".to_string(), EventKind::Automatic, 3),
            ("canceled", "3500".to_string(), EventKind::ManualResend, 1),
        ]
    );
    let ids: std::collections::HashSet<_> =
        events.iter().map(|e| e.outbox.event.event_id).collect();
    assert_eq!(ids.len(), 5);

    let mut audit = block_on(s.h.store.audit_records(100)).unwrap();
    audit.reverse();
    let actions: Vec<&str> = audit.iter().map(|a| a.action.as_str()).collect();
    assert_eq!(
        actions,
        [
            "payment.confirm",
            "payment.confirm",
            "payment.recheck",
            "payment.recheck_resolve",
            "payment.cancel",
            "payment.resend_callback",
        ]
    );
    let status = |json: &Option<String>| -> String {
        let v: serde_json::Value = serde_json::from_str(json.as_deref().unwrap()).unwrap();
        v["status"].as_str().unwrap().to_string()
    };
    for (a, (before, after)) in audit.iter().zip([
        ("processing", "completed"),
        ("completed", "completed"),
        ("completed", "appeal"),
        ("appeal", "completed"),
        ("completed", "canceled"),
        ("canceled", "canceled"),
    ]) {
        assert_eq!(a.actor, "operator:alice");
        assert_eq!(a.target, p.id.to_string());
        assert_eq!(status(&a.before), before);
        assert_eq!(status(&a.after), after);
    }
    for (i, a) in audit.iter().enumerate() {
        // Each action at the time it was taken: 30 s apart, from 30 s after creation.
        assert_eq!(
            a.at,
            ts(T_CREATED + 30_000 * (i as i64 + 1)),
            "{}",
            a.action
        );
    }
    assert_eq!(audit[5].at, resend_at);
}

#[test]
fn operations_on_unknown_payments_are_not_found() {
    let s = setup();
    let e = s
        .operate(common::payment_id(42), Trigger::Cancel)
        .unwrap_err();
    assert_eq!(e.code, ErrorCode::PaymentNotFound);
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

proptest! {
    #![proptest_config(ProptestConfig::with_cases(256))]

    /// Every generated body is valid, and writing its amount as a number or as a string is the
    /// same request.
    #[test]
    fn generated_create_bodies_are_valid(mut v in strategies::create_request_json()) {
        let parse = |v: &serde_json::Value| {
            CreatePayment::parse(&serde_json::to_vec(v).unwrap(), AddressPolicy::default())
        };
        let req = parse(&v).map_err(|e| TestCaseError::fail(format!("{e}: {v}")))?;
        let text = v["amount"].to_string();
        let text = text.trim_matches('"').to_string();
        prop_assert_eq!(req.amount, Amount::parse(&text).unwrap());
        v["amount"] = serde_json::Value::String(text.clone());
        let as_string = parse(&v).unwrap();
        v["amount"] = serde_json::Value::Number(text.parse().unwrap());
        let as_number = parse(&v).unwrap();
        prop_assert_eq!(as_string.fingerprint(None), as_number.fingerprint(None));
        prop_assert_eq!(as_string.fingerprint(None), req.fingerprint(None));
    }
}
