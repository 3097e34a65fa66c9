//! Operator operations through the state machine, with audit records.

use std::time::Duration;

use futures_executor::block_on;
use payments_core::event::EventKind;
use payments_core::payment::PaymentStatus;
use payments_core::store::AuditStore;
use payments_core::transition::{RecheckOutcome, Trigger};
use payments_core::{Clock, ErrorCode};

use crate::common::{self, amount, dec, ts, T_CREATED};
use crate::support::{body, setup};

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

    let mut audit = block_on(s.h.store.find_audit_records(100)).unwrap();
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
