//! The property test: random trigger sequences against an independent model of the table
//! and the Events section.

use std::collections::HashSet;
use std::time::Duration;

use payments_core::amount::Amount;
use payments_core::event::{CallbackEvent, EventKind};
use payments_core::payment::{Payment, PaymentStatus};
use payments_core::settlement::{Pricing, Settlement};
use payments_core::testing::{strategies, SeededRandom};
use payments_core::transition::{apply, RecheckOutcome, Trigger};
use payments_core::Decimal;
use payments_core::{ApiError, ErrorCode, Timestamp};
use proptest::prelude::*;
use proptest::test_runner::FileFailurePersistence;
use serde_json::Value;

use crate::common::ts;
use crate::support::body;

use PaymentStatus::*;

/// The driver's own view of a payment, kept from the spec's table, not from the code.
#[derive(Debug, Clone)]
struct Model {
    status: PaymentStatus,
    amount: Amount,
    has_requisites: bool,
    appeal_from: Option<PaymentStatus>,
    /// The course and fee fixed at issue.
    pricing: Option<Pricing>,
    /// A test payment.
    is_test: bool,
}

/// The spec's table: the status after `trigger`, or `None` when it is illegal; and the amount.
fn expected(m: &Model, trigger: &Trigger, now: Timestamp, expires_at: Timestamp) -> Option<Model> {
    let mut next = m.clone();
    let to = match (m.status, trigger) {
        (Created, Trigger::RequisitesIssued { pricing, .. }) => {
            next.has_requisites = true;
            next.pricing = Some(*pricing);
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
    // The project balance's range: a live completion whose USDT credit (amount_usdt_rate)
    // is beyond 10^12 USDT is refused.
    if to == Completed && !next.is_test {
        let pricing = next.pricing.as_ref().expect("completed with a pricing");
        let credit = Settlement::compute(&next.amount, pricing).amount_usdt_rate;
        if credit > Decimal::from(1_000_000_000_000i64) - Decimal::new(1, 4) {
            return None;
        }
    }
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
    // The spec's fields, and `metadata` exactly when the payment has some.
    let mut expected: HashSet<&str> = BODY_FIELDS.into_iter().collect();
    if !p.metadata.is_empty() {
        expected.insert("metadata");
        prop_assert_eq!(&b["metadata"], &serde_json::to_value(&p.metadata).unwrap());
    }
    prop_assert_eq!(keys, expected);
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
            let course: Decimal = b["course"].to_string().parse().unwrap();
            prop_assert!(course <= pricing.course.as_decimal());
            let rate: Decimal = b["rate"].to_string().parse().unwrap();
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
    // Regressions next to this file (`property.proptest-regressions`): the default would stop
    // at this directory's `main.rs` and use `tests/proptest-regressions/property.txt`.
    #![proptest_config(ProptestConfig {
        failure_persistence: Some(Box::new(FileFailurePersistence::WithSource(
            "proptest-regressions"
        ))),
        ..ProptestConfig::with_cases(512)
    })]

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
            pricing: None,
            is_test: start.is_test(),
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
