//! Provider notifications: signature, replay, body, payment, once per notification id, the
//! state machine's answer, the audit record and the merchant callback.

use std::time::Duration;

use futures_executor::block_on;
use payments_core::callback::{signature_header, CallbackSecret, CallbackVerifier};
use payments_core::payment::PaymentStatus;
use payments_core::service::{NotificationOutcome, SignedNotification, TransferReport};
use payments_core::store::AuditStore;
use payments_core::{ApiError, Clock, ErrorCode, PaymentId};

use crate::common::amount;
use crate::support::{body, setup, Setup};

const SECRET: &str = "whsec_dXBzdHJlYW0tbm90aWZpY2F0aW9uLXRlc3Qtc2VjcmV0";

fn secret() -> CallbackSecret {
    CallbackSecret::parse(SECRET).unwrap()
}

fn verifier() -> CallbackVerifier {
    CallbackVerifier::new(vec![secret()])
}

/// Sends `body` signed at `at` (Unix seconds).
fn send_at(s: &Setup, body: &str, at: i64) -> Result<NotificationOutcome, ApiError> {
    let signature = signature_header(&[&secret()], at, body.as_bytes());
    let timestamp = at.to_string();
    block_on(s.h.service.payments().apply_provider_notification(
        &verifier(),
        SignedNotification {
            timestamp: &timestamp,
            signature: &signature,
            body: body.as_bytes(),
        },
    ))
    .map_err(ApiError::from)
}

/// Sends `body` signed now.
fn send(s: &Setup, body: &str) -> Result<NotificationOutcome, ApiError> {
    send_at(s, body, s.h.clock.now().unix_secs())
}

fn confirmed(id: &str, payment: PaymentId) -> String {
    format!(r#"{{"notification_id":"{id}","payment_id":"{payment}","status":"confirmed"}}"#)
}

fn err(r: Result<NotificationOutcome, ApiError>) -> ErrorCode {
    match r {
        Ok(o) => panic!("expected an error, got applied={}", o.applied),
        Err(e) => e.code,
    }
}

#[test]
fn a_confirmation_completes_the_payment_once_with_its_callback_and_audit() {
    let s = setup();
    let p = s.created(&body("n1", "100"));
    let out = send(&s, &confirmed("up-1", p.id)).unwrap();
    assert!(out.applied);
    assert_eq!(out.payment.status, PaymentStatus::Completed);
    assert!(out.event.is_some(), "the merchant callback is queued");
    assert_eq!(s.events(p.id).len(), 1);
    let audit = block_on(s.h.store.find_audit_records(1)).unwrap();
    assert_eq!(audit[0].actor, "upstream notification:up-1");
    assert_eq!(audit[0].action, "payment.confirm");
    assert_eq!(audit[0].target, p.id.to_string());

    // The upstream's retry, signed anew a second later: 200, nothing changes.
    s.h.advance(Duration::from_secs(1));
    let again = send(&s, &confirmed("up-1", p.id)).unwrap();
    assert!(!again.applied);
    assert_eq!(again.payment, s.stored(p.id));
    assert_eq!(s.events(p.id).len(), 1);
    assert_eq!(block_on(s.h.store.find_audit_records(10)).unwrap().len(), 1);

    // After the operator re-opened the case, the old notification still changes nothing.
    s.operate(p.id, payments_core::transition::Trigger::Cancel)
        .unwrap();
    s.h.advance(Duration::from_secs(1));
    let late = send(&s, &confirmed("up-1", p.id)).unwrap();
    assert!(!late.applied);
    assert_eq!(s.stored(p.id).status, PaymentStatus::Canceled);
}

#[test]
fn another_amount_and_a_failure_map_to_confirm_and_cancel() {
    let s = setup();
    let p = s.created(&body("n1", "100"));
    let with_amount = format!(
        r#"{{"notification_id":"up-2","payment_id":"{}","status":"confirmed","amount":"95.50"}}"#,
        p.id
    );
    let out = send(&s, &with_amount).unwrap();
    assert_eq!(out.payment.amount, amount("95.50"));
    assert_eq!(
        out.notification.report,
        TransferReport::Confirmed {
            amount: Some(amount("95.50"))
        }
    );

    let q = s.created(&body("n2", "100"));
    let failed = format!(
        r#"{{"notification_id":"up-3","payment_id":"{}","status":"failed","reason":"payer canceled"}}"#,
        q.id
    );
    let out = send(&s, &failed).unwrap();
    assert!(out.applied);
    assert_eq!(out.payment.status, PaymentStatus::Canceled);
    // A repeat of the failure: the refusal of cancel-after-cancel is the applied change seen
    // again, so 200.
    s.h.advance(Duration::from_secs(1));
    assert!(!send(&s, &failed).unwrap().applied);
}

#[test]
fn refusals_change_nothing() {
    let s = setup();
    let p = s.created(&body("n1", "100"));
    let now = s.h.clock.now().unix_secs();
    let good = confirmed("up-4", p.id);

    // Tampered: the body changed after signing.
    let signature = signature_header(&[&secret()], now, good.as_bytes());
    let tampered = good.replace("confirmed", "failed");
    let r = block_on(s.h.service.payments().apply_provider_notification(
        &verifier(),
        SignedNotification {
            timestamp: &now.to_string(),
            signature: &signature,
            body: tampered.as_bytes(),
        },
    ))
    .map_err(ApiError::from);
    assert_eq!(err(r), ErrorCode::SignatureInvalid);
    // Stale: signed 301 s ago.
    assert_eq!(
        err(send_at(&s, &good, now - 301)),
        ErrorCode::SignatureInvalid
    );
    // Unknown payment.
    let ghost = confirmed(
        "up-5",
        PaymentId::generate(&payments_core::testing::SeededRandom::new(9)),
    );
    assert_eq!(err(send(&s, &ghost)), ErrorCode::PaymentNotFound);
    // Malformed.
    assert_eq!(
        err(send(&s, r#"{"notification_id":"x"}"#)),
        ErrorCode::BadRequest
    );
    assert_eq!(
        err(send(&s, &good.replace("confirmed", "paid"))),
        ErrorCode::BadRequest
    );
    assert_eq!(s.stored(p.id).status, PaymentStatus::Processing);
    assert!(s.events(p.id).is_empty());
    // A refused request records nothing: the same signed request again is refused the same
    // way, never as a replay.
    assert_eq!(err(send_at(&s, &ghost, now)), ErrorCode::PaymentNotFound);
    assert_eq!(
        err(send_at(&s, r#"{"notification_id":"x"}"#, now)),
        ErrorCode::BadRequest
    );

    // Replayed: the same signed request twice, once accepted.
    assert!(send_at(&s, &good, now).unwrap().applied);
    assert_eq!(err(send_at(&s, &good, now)), ErrorCode::RequestReplayed);

    // A refused change with a new id: 409, and it stays refused (not remembered as applied).
    let e = s.created(&body("n2", "100.13"));
    assert_eq!(e.status, PaymentStatus::Error);
    s.h.advance(Duration::from_secs(1));
    assert_eq!(
        err(send(&s, &confirmed("up-6", e.id))),
        ErrorCode::InvalidTransition
    );
    s.h.advance(Duration::from_secs(1));
    assert_eq!(
        err(send(&s, &confirmed("up-6", e.id))),
        ErrorCode::InvalidTransition
    );
    assert_eq!(
        err(send(&s, &confirmed("up-6", e.id))),
        ErrorCode::InvalidTransition,
        "the same signed request again: refused, not a replay"
    );
    assert_eq!(s.stored(e.id).status, PaymentStatus::Error);
}
