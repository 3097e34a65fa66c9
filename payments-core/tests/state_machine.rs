//! The state machine against the spec's "States and transitions" table, rules 1-4 and the
//! Events section: one test per table row, every illegal trigger, and a property test over
//! random trigger sequences with an independent model of the table.

mod common;

use std::collections::HashSet;
use std::time::Duration;

use proptest::prelude::*;
use serde_json::Value;

use common::{amount, fixture, pricing_100_11, requisites, ts, T_CREATED};
use payments_core::amount::Amount;
use payments_core::event::{CallbackEvent, EventKind};
use payments_core::payment::{Flow, Payment, PaymentErrorCode, PaymentStatus};
use payments_core::testing::{strategies, SeededRandom};
use payments_core::transition::{apply, RecheckOutcome, Transition, TransitionError, Trigger};
use payments_core::{ApiError, ErrorCode, Timestamp};

use PaymentStatus::*;

fn rng() -> SeededRandom {
    SeededRandom::new(7)
}

fn at(p: &Payment, ms_after_created: i64) -> Timestamp {
    ts(p.created_at.unix_millis() + ms_after_created)
}

fn step(p: &Payment, trigger: Trigger, now: Timestamp, rng: &SeededRandom) -> Transition {
    apply(p, trigger, now, rng).unwrap_or_else(|e| panic!("expected a legal transition: {e}"))
}

fn refused(p: &Payment, trigger: Trigger, now: Timestamp) -> TransitionError {
    match apply(p, trigger.clone(), now, &rng()) {
        Ok(t) => panic!(
            "{} from {} must be refused, got {}",
            trigger.name(),
            p.status,
            t.payment.status
        ),
        Err(e) => e,
    }
}

fn issued() -> Trigger {
    Trigger::RequisitesIssued {
        requisites: requisites(),
        pricing: pricing_100_11(),
    }
}

fn confirm(a: Option<&str>) -> Trigger {
    Trigger::Confirm {
        amount: a.map(amount),
    }
}

/// The fixture in `processing` (requisites issued 2 s after creation).
fn processing() -> Payment {
    let p = fixture();
    step(&p, issued(), at(&p, 2_000), &rng()).payment
}

fn completed() -> Payment {
    let p = processing();
    step(&p, confirm(None), at(&p, 60_000), &rng()).payment
}

fn canceled() -> Payment {
    let p = processing();
    step(&p, Trigger::Cancel, at(&p, 60_000), &rng()).payment
}

fn errored() -> Payment {
    let p = fixture();
    step(
        &p,
        Trigger::RequisitesRefused {
            code: PaymentErrorCode::ProviderNoRequisites,
            comment: "none".into(),
        },
        at(&p, 2_000),
        &rng(),
    )
    .payment
}

fn appeal_from(p: Payment) -> Payment {
    step(&p, Trigger::StartRecheck, at(&p, 120_000), &rng()).payment
}

fn test_payment(p: Payment) -> Payment {
    Payment {
        flow: Flow::ProjectTest,
        ..p
    }
}

fn body(ev: &CallbackEvent) -> Value {
    serde_json::from_slice(&ev.body).expect("the callback body is JSON")
}

/// An automatic callback carrying the payment's status and amount.
fn assert_callback(t: &Transition, status: &str, amount_text: &str) {
    let ev = t.event.as_ref().expect("a callback event");
    assert_eq!(ev.kind, EventKind::Automatic);
    assert_eq!(ev.status.as_str(), status);
    let b = body(ev);
    assert_eq!(b["status"], status);
    assert_eq!(b["amount"].to_string(), amount_text);
    assert_eq!(b["event_id"], ev.event_id.to_string());
}

#[test]
fn created_to_processing_fills_requisites_and_pricing_without_callback() {
    let p = fixture();
    let t = step(&p, issued(), at(&p, 2_000), &rng());
    assert_eq!(t.from, Created);
    assert_eq!(t.payment.status, Processing);
    assert_eq!(t.payment.requisites, Some(requisites()));
    assert_eq!(t.payment.pricing, Some(pricing_100_11()));
    let info = t.payment.merchant_information().unwrap();
    assert_eq!(info.amount_usdt, common::dec("34"));
    assert_eq!(info.amount_usdt_rate, common::dec("30.26"));
    assert!(t.event.is_none());
    assert!(t.changed);
    assert_eq!(t.payment.version, 2);
    assert_eq!(t.payment.updated_at, at(&p, 2_000));
}

#[test]
fn created_to_error_records_the_error_code_without_callback() {
    for code in [
        PaymentErrorCode::ProviderNoRequisites,
        PaymentErrorCode::ProviderResultAmbiguous,
    ] {
        let p = fixture();
        let t = step(
            &p,
            Trigger::RequisitesRefused {
                code,
                comment: "why".into(),
            },
            at(&p, 2_000),
            &rng(),
        );
        assert_eq!(t.payment.status, Error);
        let failure = t.payment.failure.as_ref().unwrap();
        assert_eq!(failure.code, code);
        assert_eq!(failure.comment, "why");
        assert!(t.payment.requisites.is_none() && t.payment.pricing.is_none());
        assert!(t.event.is_none());
        assert_eq!(t.payment.version, 2);
    }
}

#[test]
fn processing_to_completed_sends_a_callback() {
    let p = processing();
    let t = step(&p, confirm(None), at(&p, 60_000), &rng());
    assert_eq!(t.from, Processing);
    assert_eq!(t.payment.status, Completed);
    assert_callback(&t, "completed", "3400");
    assert_eq!(t.payment.updated_at, at(&p, 60_000));
}

#[test]
fn processing_confirmed_with_another_amount_keeps_initial_amount() {
    let p = processing();
    let t = step(&p, confirm(Some("3399.5")), at(&p, 60_000), &rng());
    assert_eq!(t.payment.status, Completed);
    assert_eq!(t.payment.amount, amount("3399.5"));
    assert_eq!(t.payment.initial_amount, amount("3400"));
    assert_callback(&t, "completed", "3399.5");
}

#[test]
fn processing_to_canceled_by_cancel_sends_a_callback() {
    let p = processing();
    let t = step(&p, Trigger::Cancel, at(&p, 60_000), &rng());
    assert_eq!(t.payment.status, Canceled);
    assert_callback(&t, "canceled", "3400");
}

#[test]
fn processing_expires_exactly_at_expires_at_and_not_one_ms_before() {
    let p = processing();
    let deadline = p.created_at + Duration::from_secs(15 * 60);
    assert_eq!(p.expires_at, deadline);
    let e = refused(&p, Trigger::Expire, ts(deadline.unix_millis() - 1));
    assert_eq!(e.status, Processing);
    assert!(e.to_string().contains("processing"), "{e}");
    let t = step(&p, Trigger::Expire, deadline, &rng());
    assert_eq!(t.payment.status, Canceled);
    assert_eq!(t.payment.updated_at, deadline);
    assert_callback(&t, "canceled", "3400");
    // Later than the deadline is fine too (the first sweep after it).
    let t = step(
        &p,
        Trigger::Expire,
        deadline + Duration::from_secs(3),
        &rng(),
    );
    assert_eq!(t.payment.status, Canceled);
}

#[test]
fn canceled_to_completed_is_a_new_event_with_a_new_event_id() {
    let r = rng();
    let p = processing();
    let first = step(&p, Trigger::Cancel, at(&p, 60_000), &r);
    let second = step(&first.payment, confirm(None), at(&p, 3_600_000), &r);
    assert_eq!(second.from, Canceled);
    assert_eq!(second.payment.status, Completed);
    assert_callback(&second, "completed", "3400");
    assert_ne!(
        first.event.unwrap().event_id,
        second.event.unwrap().event_id
    );
}

#[test]
fn completed_with_a_new_amount_recomputes_settlement_at_the_fixed_course_and_fee() {
    let p = completed();
    let t = step(&p, confirm(Some("3500")), at(&p, 3_600_000), &rng());
    assert_eq!(t.from, Completed);
    assert_eq!(t.payment.status, Completed);
    assert_eq!(t.payment.amount, amount("3500"));
    assert_eq!(t.payment.initial_amount, amount("3400"));
    assert_eq!(t.payment.pricing, Some(pricing_100_11()));
    assert_callback(&t, "completed", "3500");
    // 3500 at course 100 and fee 11 %: 35 USDT, fee 385, 3115 after fee, 31.15 USDT credited.
    assert_eq!(
        serde_json::to_string(&t.payment.merchant_information()).unwrap(),
        r#"{"course":100.00,"rate":11.00,"amount_usdt":"35.0000","amount_rate":"3115.0000","amount_usdt_rate":"31.1500"}"#
    );
}

#[test]
fn completed_confirmed_again_with_the_same_amount_is_refused() {
    let p = completed();
    for same in [None, Some("3400"), Some("3400.00")] {
        let e = refused(&p, confirm(same), at(&p, 3_600_000));
        assert_eq!(e.status, Completed);
        assert!(e.to_string().contains("completed"), "{e}");
    }
}

#[test]
fn completed_to_canceled_sends_a_callback() {
    let p = completed();
    let t = step(&p, Trigger::Cancel, at(&p, 3_600_000), &rng());
    assert_eq!(t.payment.status, Canceled);
    assert_callback(&t, "canceled", "3400");
}

#[test]
fn closed_payments_enter_appeal_without_callback() {
    for p in [completed(), canceled(), errored()] {
        let from = p.status;
        let t = step(&p, Trigger::StartRecheck, at(&p, 120_000), &rng());
        assert_eq!(t.payment.status, Appeal);
        assert_eq!(t.payment.appeal_from, Some(from));
        assert!(t.event.is_none(), "no callback entering appeal from {from}");
        assert_eq!(t.payment.version, p.version + 1);
    }
}

#[test]
fn appeal_resolved_as_completed_sends_a_callback() {
    for from in [completed(), canceled()] {
        let p = appeal_from(from);
        let t = step(
            &p,
            Trigger::ResolveRecheck(RecheckOutcome::Completed { amount: None }),
            at(&p, 300_000),
            &rng(),
        );
        assert_eq!(t.payment.status, Completed);
        assert_eq!(t.payment.appeal_from, None);
        // Completed -> appeal -> completed: the same status is sent again.
        assert_callback(&t, "completed", "3400");
    }
    let p = appeal_from(completed());
    let t = step(
        &p,
        Trigger::ResolveRecheck(RecheckOutcome::Completed {
            amount: Some(amount("3300")),
        }),
        at(&p, 300_000),
        &rng(),
    );
    assert_callback(&t, "completed", "3300");
    assert_eq!(t.payment.initial_amount, amount("3400"));
    assert_eq!(
        t.payment.merchant_information().unwrap().amount_usdt,
        common::dec("33")
    );
}

#[test]
fn appeal_resolved_as_canceled_sends_a_callback() {
    for from in [completed(), canceled()] {
        let p = appeal_from(from);
        let t = step(
            &p,
            Trigger::ResolveRecheck(RecheckOutcome::Canceled),
            at(&p, 300_000),
            &rng(),
        );
        assert_eq!(t.payment.status, Canceled);
        assert_callback(&t, "canceled", "3400");
    }
}

#[test]
fn appeal_resolved_unchanged_returns_to_the_previous_status_with_a_callback() {
    for (from, name) in [(completed(), "completed"), (canceled(), "canceled")] {
        let p = appeal_from(from);
        let t = step(
            &p,
            Trigger::ResolveRecheck(RecheckOutcome::Unchanged),
            at(&p, 300_000),
            &rng(),
        );
        assert_eq!(t.payment.status.as_str(), name);
        assert_callback(&t, name, "3400");
    }
}

#[test]
fn appeal_from_error_returns_to_error_without_callback_and_cannot_complete() {
    let p = appeal_from(errored());
    let t = step(
        &p,
        Trigger::ResolveRecheck(RecheckOutcome::Unchanged),
        at(&p, 300_000),
        &rng(),
    );
    assert_eq!(t.payment.status, Error);
    assert!(t.event.is_none());
    assert_eq!(
        t.payment.failure.as_ref().unwrap().code,
        PaymentErrorCode::ProviderNoRequisites
    );
    for outcome in [
        RecheckOutcome::Completed { amount: None },
        RecheckOutcome::Completed {
            amount: Some(amount("3400")),
        },
        RecheckOutcome::Canceled,
    ] {
        let e = refused(&p, Trigger::ResolveRecheck(outcome), at(&p, 300_000));
        assert_eq!(e.status, Appeal);
        assert!(e.to_string().contains("appeal"), "{e}");
    }
}

#[test]
fn resend_from_closed_statuses_queues_a_manual_event_and_changes_nothing() {
    let r = rng();
    let mut ids = HashSet::new();
    for p in [completed(), canceled(), errored()] {
        for _ in 0..2 {
            let t = step(&p, Trigger::ResendCallback, at(&p, 600_000), &r);
            assert_eq!(t.payment, p, "a resend does not change the payment");
            assert!(!t.changed);
            let ev = t.event.expect("a resend always has an event");
            assert_eq!(ev.kind, EventKind::ManualResend);
            assert_eq!(ev.status, p.status);
            assert!(ids.insert(ev.event_id), "a new event_id every time");
            let b = body(&ev);
            assert_eq!(b["status"], p.status.as_str());
            if p.status == Error {
                assert_eq!(b["rate"], Value::Null);
                assert_eq!(b["course"], Value::Null);
            } else {
                assert_eq!(b["rate"].to_string(), "11.00");
                assert_eq!(b["course"].to_string(), "100.00");
            }
        }
    }
    assert_eq!(ids.len(), 6);
}

#[test]
fn resend_is_refused_for_open_payments() {
    for p in [fixture(), processing(), appeal_from(completed())] {
        let e = refused(&p, Trigger::ResendCallback, at(&p, 600_000));
        assert_eq!(e.status, p.status);
    }
}

#[test]
fn every_illegal_trigger_is_a_409_invalid_transition_naming_the_status() {
    let refuse = |status: PaymentStatus| -> Vec<Trigger> {
        let refused = || Trigger::RequisitesRefused {
            code: PaymentErrorCode::ProviderNoRequisites,
            comment: String::new(),
        };
        let resolve = || Trigger::ResolveRecheck(RecheckOutcome::Unchanged);
        match status {
            Created => vec![
                confirm(None),
                confirm(Some("1")),
                Trigger::Cancel,
                Trigger::Expire,
                Trigger::StartRecheck,
                resolve(),
                Trigger::ResendCallback,
            ],
            Processing => vec![
                issued(),
                refused(),
                Trigger::StartRecheck,
                resolve(),
                Trigger::ResendCallback,
            ],
            Completed => vec![
                issued(),
                refused(),
                confirm(None),
                Trigger::Expire,
                resolve(),
            ],
            Canceled => vec![
                issued(),
                refused(),
                Trigger::Cancel,
                Trigger::Expire,
                resolve(),
            ],
            Error => vec![
                issued(),
                refused(),
                confirm(None),
                confirm(Some("1")),
                Trigger::Cancel,
                Trigger::Expire,
                resolve(),
            ],
            Appeal => vec![
                issued(),
                refused(),
                confirm(None),
                Trigger::Cancel,
                Trigger::Expire,
                Trigger::StartRecheck,
                Trigger::ResendCallback,
            ],
            other => panic!("unexpected status {other}"),
        }
    };
    let payments = [
        fixture(),
        processing(),
        completed(),
        canceled(),
        errored(),
        appeal_from(completed()),
    ];
    for p in payments {
        // Expire is tried well after the lifetime: refused for the status, not the time.
        let late = p.expires_at + Duration::from_secs(3_600);
        for trigger in refuse(p.status) {
            let name = trigger.name();
            let e = refused(&p, trigger, late);
            assert_eq!(e.status, p.status);
            assert_eq!(e.trigger, name);
            let api = ApiError::from(e);
            assert_eq!(api.code, ErrorCode::InvalidTransition);
            assert_eq!(api.http_status(), 409);
            assert!(
                api.message
                    .contains(&format!("in status {}", p.status.as_str())),
                "{}",
                api.message
            );
        }
    }
}

#[test]
fn test_payments_get_no_automatic_callback_but_a_manual_resend() {
    let r = rng();
    let p = test_payment(processing());
    let done = step(&p, confirm(None), at(&p, 60_000), &r);
    assert!(done.event.is_none());
    let again = step(&done.payment, confirm(Some("10")), at(&p, 61_000), &r);
    assert!(again.event.is_none());
    let canceled = step(&again.payment, Trigger::Cancel, at(&p, 62_000), &r);
    assert!(canceled.event.is_none());
    let expired = step(&p, Trigger::Expire, p.expires_at, &r);
    assert!(expired.event.is_none());
    let appeal = step(&canceled.payment, Trigger::StartRecheck, at(&p, 63_000), &r);
    let resolved = step(
        &appeal.payment,
        Trigger::ResolveRecheck(RecheckOutcome::Completed { amount: None }),
        at(&p, 64_000),
        &r,
    );
    assert!(resolved.event.is_none());
    let resend = step(
        &resolved.payment,
        Trigger::ResendCallback,
        at(&p, 65_000),
        &r,
    );
    let ev = resend
        .event
        .expect("support can resend a test payment's callback");
    assert_eq!(ev.kind, EventKind::ManualResend);
    assert_eq!(body(&ev)["is_test"], true);
}

#[test]
fn version_increments_by_one_per_change() {
    let r = rng();
    let mut p = fixture();
    assert_eq!(p.version, 1);
    for trigger in [
        issued(),
        confirm(None),
        confirm(Some("10")),
        Trigger::StartRecheck,
        Trigger::ResolveRecheck(RecheckOutcome::Canceled),
    ] {
        let t = step(&p, trigger, at(&p, 1_000), &r);
        assert_eq!(t.payment.version, p.version + 1);
        p = t.payment;
    }
    assert_eq!(p.version, 6);
    let t = step(&p, Trigger::ResendCallback, at(&p, 1_000), &r);
    assert_eq!(t.payment.version, 6);
}

// ---- the property test -------------------------------------------------------------------

/// The driver's own view of a payment, kept from the spec's table, not from the code.
#[derive(Debug, Clone)]
struct Model {
    status: PaymentStatus,
    amount: Amount,
    has_requisites: bool,
    appeal_from: Option<PaymentStatus>,
}

/// The spec's table: the status after `trigger`, or `None` when it is illegal; and the amount.
fn expected(m: &Model, trigger: &Trigger, now: Timestamp, expires_at: Timestamp) -> Option<Model> {
    let mut next = m.clone();
    let to = match (m.status, trigger) {
        (Created, Trigger::RequisitesIssued { .. }) => {
            next.has_requisites = true;
            Processing
        }
        (Created, Trigger::RequisitesRefused { .. }) => Error,
        (Processing | Canceled, Trigger::Confirm { amount }) => {
            next.amount = amount.unwrap_or(m.amount);
            Completed
        }
        (Completed, Trigger::Confirm { amount: Some(a) }) if *a != m.amount => {
            next.amount = *a;
            Completed
        }
        (Processing | Completed, Trigger::Cancel) => Canceled,
        (Processing, Trigger::Expire) if now >= expires_at => Canceled,
        (Completed | Canceled | Error, Trigger::StartRecheck) => {
            next.appeal_from = Some(m.status);
            Appeal
        }
        (Appeal, Trigger::ResolveRecheck(outcome)) => {
            next.appeal_from = None;
            match outcome {
                RecheckOutcome::Completed { amount } if m.has_requisites => {
                    next.amount = amount.unwrap_or(m.amount);
                    Completed
                }
                RecheckOutcome::Canceled if m.has_requisites => Canceled,
                RecheckOutcome::Unchanged => m.appeal_from.expect("appeal has a previous status"),
                _ => return None,
            }
        }
        (Completed | Canceled | Error, Trigger::ResendCallback) => m.status,
        _ => return None,
    };
    next.status = to;
    Some(next)
}

/// The Events section: whether a callback follows, from (trigger, to, is_test) alone.
fn should_notify(trigger: &Trigger, to: PaymentStatus, is_test: bool) -> bool {
    if matches!(trigger, Trigger::ResendCallback) {
        return true; // manual resend by support: any closed payment, test payments included
    }
    !is_test && matches!(to, Completed | Canceled)
}

const BODY_FIELDS: [&str; 14] = [
    "id",
    "event_id",
    "status",
    "amount",
    "initial_amount",
    "currency",
    "payment_method",
    "bank_code",
    "is_intrabank",
    "merchant_payment_id",
    "rate",
    "course",
    "is_test",
    "project_id",
];

fn check_body(ev: &CallbackEvent, p: &Payment) -> Result<(), TestCaseError> {
    let b = body(ev);
    let obj = b.as_object().expect("the body is a JSON object");
    let keys: HashSet<&str> = obj.keys().map(String::as_str).collect();
    prop_assert_eq!(keys, BODY_FIELDS.into_iter().collect::<HashSet<_>>());
    prop_assert_eq!(&b["id"], &Value::from(p.id.to_string()));
    prop_assert_eq!(&b["event_id"], &Value::from(ev.event_id.to_string()));
    prop_assert_eq!(&b["status"], &Value::from(p.status.as_str()));
    prop_assert_eq!(b["amount"].to_string(), p.amount.to_string());
    prop_assert_eq!(
        b["initial_amount"].to_string(),
        p.initial_amount.to_string()
    );
    prop_assert_eq!(&b["currency"], &Value::from("RUB"));
    prop_assert_eq!(
        &b["payment_method"],
        &Value::from(p.payment_method.as_str())
    );
    prop_assert_eq!(
        &b["bank_code"],
        &serde_json::to_value(&p.bank_code).unwrap()
    );
    prop_assert_eq!(&b["is_intrabank"], &Value::from(p.is_intrabank));
    prop_assert_eq!(
        &b["merchant_payment_id"],
        &Value::from(p.merchant_payment_id.as_str())
    );
    prop_assert_eq!(&b["is_test"], &Value::from(p.is_test()));
    prop_assert_eq!(&b["project_id"], &Value::from(p.project_id.to_string()));
    match &p.pricing {
        None => {
            prop_assert_eq!(&b["rate"], &Value::Null);
            prop_assert_eq!(&b["course"], &Value::Null);
        }
        Some(pricing) => {
            let two = |t: String| {
                let (_, frac) = t.split_once('.').expect("two decimals");
                frac.len() == 2
            };
            prop_assert!(two(b["rate"].to_string()), "{}", b["rate"]);
            prop_assert!(two(b["course"].to_string()), "{}", b["course"]);
            let course: rust_decimal::Decimal = b["course"].to_string().parse().unwrap();
            prop_assert!(course <= pricing.course.as_decimal());
            let rate: rust_decimal::Decimal = b["rate"].to_string().parse().unwrap();
            prop_assert_eq!(rate, pricing.fee_percent.as_decimal());
        }
    }
    Ok(())
}

/// How time moves before a trigger: stay, jump to the deadline, to 1 ms before it, or forward.
#[derive(Debug, Clone)]
enum Pause {
    None,
    ToDeadline,
    JustBeforeDeadline,
    Forward(u64),
}

fn pause() -> impl Strategy<Value = Pause> {
    prop_oneof![
        Just(Pause::None),
        Just(Pause::ToDeadline),
        Just(Pause::JustBeforeDeadline),
        (1u64..=600_000).prop_map(Pause::Forward),
    ]
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(512))]

    #[test]
    fn random_trigger_sequences_follow_the_spec(
        start in strategies::created_payment(),
        steps in proptest::collection::vec((pause(), strategies::trigger()), 1..40),
        seed in any::<u64>(),
    ) {
        let rng = SeededRandom::new(seed);
        let is_test = start.is_test();
        let mut p = start.clone();
        let mut model = Model {
            status: Created,
            amount: p.amount,
            has_requisites: false,
            appeal_from: None,
        };
        let mut now = p.created_at;
        let mut event_ids = HashSet::new();
        for (i, (pause, trigger)) in steps.into_iter().enumerate() {
            now = match pause {
                Pause::None => now,
                Pause::ToDeadline => now.max(p.expires_at),
                Pause::JustBeforeDeadline => now.max(ts(p.expires_at.unix_millis() - 1)),
                Pause::Forward(ms) => now + Duration::from_millis(ms),
            };
            let want = expected(&model, &trigger, now, p.expires_at);
            match apply(&p, trigger.clone(), now, &rng) {
                Err(e) => {
                    prop_assert!(want.is_none(), "step {}: {} from {} refused: {}", i, trigger.name(), p.status, e);
                    prop_assert_eq!(e.status, p.status);
                    let api = ApiError::from(e);
                    prop_assert_eq!(api.code, ErrorCode::InvalidTransition);
                    let needle = format!("in status {}", p.status.as_str());
                    prop_assert!(api.message.contains(&needle), "{}", api.message);
                }
                Ok(t) => {
                    let want = want.ok_or_else(|| TestCaseError::fail(format!(
                        "step {i}: {} from {} must be refused, went to {}",
                        trigger.name(), p.status, t.payment.status
                    )))?;
                    let next = &t.payment;
                    prop_assert_eq!(t.from, p.status);
                    prop_assert_eq!(next.status, want.status, "step {}: {}", i, trigger.name());
                    prop_assert_eq!(next.amount, want.amount);
                    // Rule 1: error only before requisites; from processing only to completed
                    // or canceled.
                    if p.requisites.is_some() {
                        prop_assert_ne!(next.status, Error);
                    }
                    if next.status == Error {
                        prop_assert!(next.requisites.is_none() && next.pricing.is_none());
                        prop_assert!(next.failure.is_some());
                    }
                    if p.status == Processing {
                        prop_assert!(matches!(next.status, Completed | Canceled));
                    }
                    prop_assert_eq!(next.initial_amount, start.initial_amount);
                    prop_assert_eq!(next.requisites.is_some(), want.has_requisites);
                    prop_assert_eq!(next.pricing.is_some(), want.has_requisites);
                    // Pricing is fixed once, at issue.
                    if p.pricing.is_some() {
                        prop_assert_eq!(&next.pricing, &p.pricing);
                    }
                    prop_assert_eq!(next.appeal_from, want.appeal_from);
                    prop_assert_eq!(next.flow, start.flow);
                    let resend = matches!(trigger, Trigger::ResendCallback);
                    if resend {
                        prop_assert_eq!(next, &p);
                        prop_assert!(!t.changed);
                    } else {
                        prop_assert!(t.changed);
                        prop_assert_eq!(next.version, p.version + 1);
                        prop_assert_eq!(next.updated_at, now);
                    }
                    let notify = should_notify(&trigger, next.status, is_test);
                    prop_assert_eq!(t.event.is_some(), notify, "step {}: {} {} -> {}", i, trigger.name(), p.status, next.status);
                    if let Some(ev) = &t.event {
                        prop_assert!(next.status != Appeal);
                        prop_assert!(resend || next.status != Error);
                        prop_assert_eq!(ev.kind, if resend { EventKind::ManualResend } else { EventKind::Automatic });
                        prop_assert_eq!(ev.status, next.status);
                        prop_assert_eq!(ev.payment_id, next.id);
                        prop_assert_eq!(ev.created_at, now);
                        prop_assert!(event_ids.insert(ev.event_id), "event_id reused");
                        check_body(ev, next)?;
                    }
                    model = want;
                    p = t.payment;
                }
            }
        }
    }

    #[test]
    fn generated_payments_are_consistent_in_every_status(p in strategies::payment()) {
        match p.status {
            Processing | Completed | Canceled => {
                prop_assert!(p.requisites.is_some() && p.pricing.is_some());
                prop_assert!(p.failure.is_none() && p.appeal_from.is_none());
            }
            Error => prop_assert!(p.requisites.is_none() && p.failure.is_some()),
            Appeal => {
                let from = p.appeal_from.expect("appeal has appeal_from");
                prop_assert!(from.is_closed());
                prop_assert_eq!(p.requisites.is_some(), from != Error);
            }
            Created => prop_assert!(p.requisites.is_none() && p.version == 1),
            _ => {}
        }
        prop_assert!(p.updated_at >= p.created_at && p.expires_at > p.created_at);
        if p.status != Completed && !(p.status == Appeal && p.appeal_from == Some(Completed)) {
            prop_assert_eq!(p.amount, p.initial_amount);
        }
        // Every consistent closed payment can at least be resent.
        if p.status.is_closed() {
            prop_assert!(apply(&p, Trigger::ResendCallback, p.updated_at, &SeededRandom::new(1)).is_ok());
        }
    }
}

#[test]
fn the_fixture_starts_where_the_literal_tests_expect() {
    let p = fixture();
    assert_eq!(p.created_at.to_rfc3339(), "2026-10-01T12:00:00.000Z");
    assert_eq!(T_CREATED, p.created_at.unix_millis());
}
