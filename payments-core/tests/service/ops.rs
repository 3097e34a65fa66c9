//! Operations over the service: failed callbacks resent in bulk, the dispatch hold, retention
//! and named operator tokens (issue, rotation with an overlap, revocation, the audit's actor).

use payments_directory::DirectoryAccess;
use std::time::Duration;

use futures_executor::block_on;
use payments_core::event::{DeliveryAttempt, EventKind, FailedEventFilter};
use payments_core::payment::PaymentStatus;
use payments_core::service::Actor;
use payments_core::store::{AttemptRecorded, AuditStore, OutboxStore};
use payments_core::transition::Trigger;
use payments_core::{Clock, ErrorCode};

use crate::support::{body, setup};

fn alice() -> Actor {
    Actor("operator:alice".into())
}

/// Runs the automatic event of `id` to failure: three failed attempts, each recorded through
/// the service's retry decision.
fn fail_three_times(s: &crate::support::Setup, id: payments_core::PaymentId) {
    for n in 1..=3 {
        let now = s.h.clock.now();
        let claimed =
            block_on(s.h.store.claim_due_events(now, 10, Duration::from_secs(60))).unwrap();
        let event = claimed
            .into_iter()
            .find(|c| c.event.event.payment_id == id)
            .expect("the event is due");
        let attempt = DeliveryAttempt {
            attempt: n,
            started_at: now,
            duration_ms: 10,
            http_status: Some(503),
            error: Some("http status 503".into()),
            success: false,
            response_excerpt: None,
        };
        let next =
            s.h.service
                .callbacks()
                .next_attempt_at(&event.event, &attempt);
        assert_eq!(next.is_none(), n == 3, "attempt {n}");
        let recorded = block_on(s.h.service.callbacks().record_attempt(&event, &attempt)).unwrap();
        assert_eq!(
            recorded,
            AttemptRecorded::Applied,
            "attempt {n} under its lease"
        );
        s.h.advance(Duration::from_secs(61));
    }
}

#[test]
fn failed_callbacks_are_listed_and_resent_in_bulk_once() {
    let s = setup();
    let a = s.created(&body("fa", "3400"));
    let b = s.created(&body("fb", "3500"));
    s.operate(a.id, Trigger::Confirm { amount: None }).unwrap();
    s.operate(b.id, Trigger::Cancel).unwrap();
    fail_three_times(&s, a.id);
    fail_three_times(&s, b.id);
    // Payment b is re-checked meanwhile: it cannot be resent while in appeal.
    s.operate(b.id, Trigger::StartRecheck).unwrap();

    let all = FailedEventFilter::default();
    let failed = block_on(s.h.service.callbacks().failed_callbacks(&all, 100)).unwrap();
    assert_eq!(failed.len(), 2);
    assert_eq!(
        failed[0].last_attempt.as_ref().map(|a| a.attempt),
        Some(3),
        "with its last attempt"
    );

    let report = block_on(
        s.h.service
            .callbacks()
            .resend_failed_callbacks(&all, 100, &alice()),
    )
    .unwrap();
    assert_eq!(report.resent.len(), 1);
    assert_eq!(report.resent[0].payment_id, a.id);
    assert_eq!(report.skipped.len(), 1);
    assert!(
        report.skipped[0].reason.contains("appeal"),
        "{:?}",
        report.skipped
    );

    let events = s.events(a.id);
    let resend = events.last().unwrap();
    assert_eq!(resend.outbox.event.event_id, report.resent[0].event_id);
    assert_eq!(resend.outbox.event.kind, EventKind::ManualResend);
    assert_eq!(
        resend.outbox.max_attempts, 1,
        "the spec's resend: one attempt"
    );
    assert_eq!(resend.outbox.event.status, PaymentStatus::Completed);
    assert_ne!(
        resend.outbox.event.event_id, events[0].outbox.event.event_id,
        "a new event id"
    );
    // Only b's failure is left; a second bulk resend does not resend a again.
    let left = block_on(s.h.service.callbacks().failed_callbacks(&all, 100)).unwrap();
    assert_eq!(left.len(), 1);
    assert_eq!(left[0].outbox.event.payment_id, b.id);
    let again = block_on(
        s.h.service
            .callbacks()
            .resend_failed_callbacks(&all, 100, &alice()),
    )
    .unwrap();
    assert!(again.resent.is_empty());
    assert_eq!(s.events(a.id).len(), 2);

    let audit = block_on(s.h.store.find_audit_records(100)).unwrap();
    let bulk = audit
        .iter()
        .find(|r| r.action == "callbacks.resend_failed")
        .expect("the bulk resend is audited");
    assert_eq!(bulk.actor, "operator:alice");
    assert_eq!(bulk.target, "all failed callbacks");
    assert!(audit
        .iter()
        .any(|r| r.action == "payment.resend_callback" && r.target == a.id.to_string()));
}

#[test]
fn the_hold_is_set_released_and_audited() {
    let s = setup();
    assert_eq!(
        block_on(s.h.service.callbacks().callback_hold()).unwrap(),
        None
    );
    let e = block_on(s.h.service.callbacks().hold_callbacks("  ", &alice())).unwrap_err();
    assert_eq!(e.code(), ErrorCode::BadRequest);
    let held = block_on(
        s.h.service
            .callbacks()
            .hold_callbacks("receiver maintenance", &alice()),
    )
    .unwrap();
    assert!(held.starts_with("receiver maintenance (held by operator:alice at "));
    assert_eq!(
        block_on(s.h.service.callbacks().callback_hold()).unwrap(),
        Some(held)
    );
    block_on(s.h.service.callbacks().release_callbacks(&alice())).unwrap();
    assert_eq!(
        block_on(s.h.service.callbacks().callback_hold()).unwrap(),
        None
    );
    let actions: Vec<String> = block_on(s.h.store.find_audit_records(10))
        .unwrap()
        .into_iter()
        .map(|r| r.action)
        .collect();
    assert_eq!(actions, vec!["callbacks.release", "callbacks.hold"]);
}

#[test]
fn retention_keeps_what_is_younger_than_its_period() {
    let s = setup();
    let p = s.created(&body("r1", "3400"));
    s.operate(p.id, Trigger::Confirm { amount: None }).unwrap();
    fail_three_times(&s, p.id);
    // 89 days later: the event stays (90 days by default), the audit too (400 days).
    s.h.advance(Duration::from_secs(89 * 86_400));
    let r = block_on(s.h.service.callbacks().purge_expired_records(100)).unwrap();
    assert_eq!((r.events, r.audit), (0, 0));
    s.h.advance(Duration::from_secs(2 * 86_400));
    let r = block_on(s.h.service.callbacks().purge_expired_records(100)).unwrap();
    assert_eq!((r.events, r.audit), (1, 0));
    assert!(s.events(p.id).is_empty());
    s.h.advance(Duration::from_secs(310 * 86_400));
    let r = block_on(s.h.service.callbacks().purge_expired_records(100)).unwrap();
    assert_eq!(
        r.audit, 1,
        "the confirmation's audit record, after 400 days"
    );
}

#[test]
fn named_tokens_rotate_with_an_overlap_and_name_the_actor() {
    let s = setup();
    let svc = &s.h.service;
    let bearer = |t: &str| format!("Bearer {t}");
    let a1 = block_on(
        svc.directory()
            .issue_named_operator_token("alice", None, &alice()),
    )
    .unwrap();
    let actor = block_on(
        svc.directory()
            .check_operator_token(Some(&bearer(a1.token.expose()))),
    )
    .unwrap();
    assert_eq!(actor.0, "operator:alice");
    // A second token with the name is refused: that is what rotation is for.
    let e = block_on(
        svc.directory()
            .issue_named_operator_token("alice", None, &alice()),
    )
    .unwrap_err();
    assert_eq!(e.code(), ErrorCode::BadRequest);

    let a2 = block_on(svc.directory().rotate_operator_token(
        "alice",
        Duration::from_secs(3600),
        &alice(),
    ))
    .unwrap();
    s.h.advance(Duration::from_secs(3599));
    for t in [&a1.token, &a2.token] {
        assert!(block_on(
            svc.directory()
                .check_operator_token(Some(&bearer(t.expose())))
        )
        .is_ok());
    }
    s.h.advance(Duration::from_secs(1));
    let old = block_on(
        svc.directory()
            .check_operator_token(Some(&bearer(a1.token.expose()))),
    )
    .unwrap_err();
    assert_eq!(old.code(), ErrorCode::TokenInvalid, "the overlap ended");
    assert!(block_on(
        svc.directory()
            .check_operator_token(Some(&bearer(a2.token.expose())))
    )
    .is_ok());

    let revoked = block_on(svc.directory().revoke_operator_token("alice", &alice())).unwrap();
    assert_eq!(revoked.len(), 1);
    let e = block_on(
        svc.directory()
            .check_operator_token(Some(&bearer(a2.token.expose()))),
    )
    .unwrap_err();
    assert_eq!(e.code(), ErrorCode::TokenInvalid);
    let e = block_on(svc.directory().revoke_operator_token("alice", &alice())).unwrap_err();
    assert_eq!(e.code(), ErrorCode::NotFound);

    let listed = block_on(svc.directory().operator_tokens()).unwrap();
    assert_eq!(listed.len(), 2);
    assert!(listed
        .iter()
        .all(|t| t.name == "alice" && t.prefix.starts_with("op_")));
    let actions: Vec<String> = block_on(s.h.store.find_audit_records(10))
        .unwrap()
        .into_iter()
        .rev()
        .map(|r| r.action)
        .collect();
    assert_eq!(
        actions,
        vec![
            "operator_token.issue",
            "operator_token.issue",
            "operator_token.rotate",
            "operator_token.revoke"
        ]
    );

    // The default token replaces the one before it at once.
    let d1 = block_on(svc.directory().issue_operator_token()).unwrap();
    let d2 = block_on(svc.directory().issue_operator_token()).unwrap();
    assert!(block_on(svc.directory().check_operator_token(Some(&bearer(&d1)))).is_err());
    let actor = block_on(svc.directory().check_operator_token(Some(&bearer(&d2)))).unwrap();
    assert_eq!(actor.0, "operator:default");
}

/// A database belongs to one environment: the first service to record it wins, the same one
/// records again harmlessly, a service of the other environment is refused (its tokens would
/// carry the other prefix).
#[test]
fn the_environment_is_recorded_once_and_the_other_one_is_refused() {
    use payments_core::auth::Environment;
    use payments_core::service::{AuthConfig, PaymentService, ServiceConfig};
    let s = setup();
    let sandbox = &s.h.service;
    assert_eq!(block_on(sandbox.recorded_environment()).unwrap(), None);
    block_on(sandbox.record_environment()).unwrap();
    assert_eq!(
        block_on(sandbox.recorded_environment()).unwrap(),
        Some(Environment::Sandbox)
    );
    block_on(sandbox.record_environment()).unwrap();

    let production = PaymentService::new(
        sandbox.ports().clone(),
        ServiceConfig::default(),
        AuthConfig::for_environment(Environment::Production),
    );
    let refused = block_on(production.record_environment()).unwrap_err();
    assert!(
        refused
            .to_string()
            .contains("belongs to the sandbox environment, not production"),
        "{refused}"
    );
    assert_eq!(
        block_on(production.recorded_environment()).unwrap(),
        Some(Environment::Sandbox),
        "the refused service wrote nothing"
    );
}
