//! Sandbox test payments and the test helpers.

use futures_executor::block_on;
use payments_core::event::EventKind;
use payments_core::payment::{Flow, PaymentStatus};
use payments_core::service::Actor;
use payments_core::store::AuditStore;
use payments_core::transition::Trigger;
use payments_core::ErrorCode;

use crate::common::{amount, project};
use crate::support::{body, setup, setup_with, LIFETIME};

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
    let audit = block_on(s.h.store.find_audit_records(10)).unwrap();
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
    let resent = block_on(
        s.h.service
            .payments()
            .operate(q.id, Trigger::ResendCallback, &actor),
    )
    .unwrap();
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
