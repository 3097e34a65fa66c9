//! Fixture payments in each status, and stepping them through the state machine.

use payments_core::event::{CallbackEvent, EventKind};
use payments_core::payment::{Flow, Payment, PaymentErrorCode};
use payments_core::testing::SeededRandom;
use payments_core::transition::{apply, Transition, TransitionError, Trigger};
use payments_core::Timestamp;
use serde_json::Value;

use crate::common::{amount, fixture, pricing_100_11, requisites, ts};

pub(crate) fn rng() -> SeededRandom {
    SeededRandom::new(7)
}

pub(crate) fn at(p: &Payment, ms_after_created: i64) -> Timestamp {
    ts(p.created_at.unix_millis() + ms_after_created)
}

pub(crate) fn step(
    p: &Payment,
    trigger: Trigger,
    now: Timestamp,
    rng: &SeededRandom,
) -> Transition {
    apply(p, trigger, now, rng).unwrap_or_else(|e| panic!("expected a legal transition: {e}"))
}

pub(crate) fn refused(p: &Payment, trigger: Trigger, now: Timestamp) -> TransitionError {
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

pub(crate) fn issued() -> Trigger {
    Trigger::RequisitesIssued {
        requisites: requisites(),
        pricing: pricing_100_11(),
    }
}

pub(crate) fn confirm(a: Option<&str>) -> Trigger {
    Trigger::Confirm {
        amount: a.map(amount),
    }
}

/// The fixture in `processing` (requisites issued 2 s after creation).
pub(crate) fn processing() -> Payment {
    let p = fixture();
    step(&p, issued(), at(&p, 2_000), &rng()).payment
}

pub(crate) fn completed() -> Payment {
    let p = processing();
    step(&p, confirm(None), at(&p, 60_000), &rng()).payment
}

pub(crate) fn canceled() -> Payment {
    let p = processing();
    step(&p, Trigger::Cancel, at(&p, 60_000), &rng()).payment
}

pub(crate) fn errored() -> Payment {
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

pub(crate) fn appeal_from(p: Payment) -> Payment {
    step(&p, Trigger::StartRecheck, at(&p, 120_000), &rng()).payment
}

pub(crate) fn test_payment(p: Payment) -> Payment {
    Payment {
        flow: Flow::ProjectTest,
        ..p
    }
}

pub(crate) fn body(ev: &CallbackEvent) -> Value {
    serde_json::from_slice(&ev.body).expect("the callback body is JSON")
}

/// An automatic callback carrying the payment's status and amount.
pub(crate) fn assert_callback(t: &Transition, status: &str, amount_text: &str) {
    let ev = t.event.as_ref().expect("a callback event");
    assert_eq!(ev.kind, EventKind::Automatic);
    assert_eq!(ev.status.as_str(), status);
    let b = body(ev);
    assert_eq!(b["status"], status);
    assert_eq!(b["amount"].to_string(), amount_text);
    assert_eq!(b["event_id"], ev.event_id.to_string());
}
