//! Every illegal trigger, test payments' callbacks, and the version.

use std::time::Duration;

use payments_core::event::EventKind;
use payments_core::payment::{PaymentErrorCode, PaymentStatus};
use payments_core::transition::{RecheckOutcome, Trigger};
use payments_core::{ApiError, ErrorCode};

use crate::common::fixture;
use crate::support::{
    appeal_from, at, body, canceled, completed, confirm, errored, issued, processing, refused, rng,
    step, test_payment,
};

use PaymentStatus::*;

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
