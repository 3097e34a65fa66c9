//! One test per row of the spec's "States and transitions" table, on fixtures whose start
//! the last test pins.

use std::collections::HashSet;
use std::time::Duration;

use payments_core::event::EventKind;
use payments_core::payment::{PaymentErrorCode, PaymentStatus};
use payments_core::transition::{RecheckOutcome, Trigger};
use serde_json::Value;

use crate::common::{self, amount, fixture, pricing_100_11, requisites, ts, T_CREATED};
use crate::support::{
    appeal_from, assert_callback, at, body, canceled, completed, confirm, errored, issued,
    processing, refused, rng, step,
};

use PaymentStatus::*;

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
fn the_fixture_starts_where_the_literal_tests_expect() {
    let p = fixture();
    assert_eq!(p.created_at.to_rfc3339(), "2026-10-01T12:00:00.000Z");
    assert_eq!(T_CREATED, p.created_at.unix_millis());
}
