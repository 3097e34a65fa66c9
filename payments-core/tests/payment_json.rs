//! The Payment resource and the callback body as literal JSON, written by hand from the spec's
//! "Payment", "merchant_information" and "Callback event body" tables: always-present fields are
//! null when empty, `qrcode_link`/`deeplink_url` only when the requisites have them,
//! `error_code`/`error_comment` only in `error`, `course`/`rate` numbers with two decimals,
//! settlement amounts strings with four.
//!
//! `expires_at` is not in the spec's table; the implementation adds it (the spec allows new
//! fields, and the payer display rules need the deadline), so the literals carry it.

mod common;

use common::{amount, dec, fixture, pricing_100_11, requisites, ts, url, T_CREATED};
use payments_core::event::{CallbackEvent, EventKind};
use payments_core::payment::{
    Flow, Payment, PaymentErrorCode, PaymentMethod, PaymentStatus, Requisites,
};
use payments_core::settlement::{Course, FeePercent, Pricing};
use payments_core::testing::SeededRandom;
use payments_core::transition::{apply, Trigger};
use payments_core::EventId;

fn json(p: &Payment) -> String {
    serde_json::to_string(&p.view()).unwrap()
}

fn after(p: &Payment, trigger: Trigger, ms: i64) -> Payment {
    apply(p, trigger, ts(T_CREATED + ms), &SeededRandom::new(3))
        .unwrap()
        .payment
}

fn processing() -> Payment {
    after(
        &fixture(),
        Trigger::RequisitesIssued {
            requisites: requisites(),
            pricing: pricing_100_11(),
        },
        2_000,
    )
}

const PROCESSING_INFO: &str = r#""merchant_information":{"course":100.00,"rate":11.00,"amount_usdt":"34.0000","amount_rate":"3026.0000","amount_usdt_rate":"30.2600"}"#;

#[test]
fn created() {
    assert_eq!(
        json(&fixture()),
        concat!(
            r#"{"id":"5f0c6a4e-2b1d-4c3a-9e8f-7a6b5c4d3e2f","merchant_payment_id":"order-1001","#,
            r#""flow":"runtime_live","status":"created","amount":3400,"initial_amount":3400,"#,
            r#""currency":"RUB","geo_code":"RU","payment_method":"sbp","is_intrabank":false,"#,
            r#""bank_code":null,"requisite_bank":null,"callback_url":null,"is_test":false,"#,
            r#""merchant_information":null,"requisite":null,"holder_name":null,"#,
            r#""created_at":"2026-10-01T12:00:00.000Z","updated_at":"2026-10-01T12:00:00.000Z","#,
            r#""expires_at":"2026-10-01T12:15:00.000Z"}"#
        )
    );
}

#[test]
fn created_test_payment() {
    let p = Payment {
        flow: Flow::ProjectTest,
        ..fixture()
    };
    let text = json(&p);
    assert!(text.contains(r#""flow":"project_test","#), "{text}");
    assert!(text.contains(r#""is_test":true,"#), "{text}");
}

#[test]
fn processing_with_qrcode_link_only() {
    assert_eq!(
        json(&processing()),
        [
            r#"{"id":"5f0c6a4e-2b1d-4c3a-9e8f-7a6b5c4d3e2f","merchant_payment_id":"order-1001","#,
            r#""flow":"runtime_live","status":"processing","amount":3400,"initial_amount":3400,"#,
            r#""currency":"RUB","geo_code":"RU","payment_method":"sbp","is_intrabank":false,"#,
            r#""bank_code":null,"requisite_bank":"Сбербанк","callback_url":null,"is_test":false,"#,
            PROCESSING_INFO,
            r#","requisite":"79001234567","holder_name":"IVAN I.","#,
            r#""qrcode_link":"https://qr.example.com/q/1","#,
            r#""created_at":"2026-10-01T12:00:00.000Z","updated_at":"2026-10-01T12:00:02.000Z","#,
            r#""expires_at":"2026-10-01T12:15:00.000Z"}"#
        ]
        .concat()
    );
}

#[test]
fn completed_with_a_changed_amount() {
    // A payer's bank, a per-payment callback URL and an intrabank transfer, confirmed with
    // 3399.5 instead of 3400: 3399.5 / 100 = 33.995 USDT; fee 11 % = 373.945;
    // 3025.555 after fee; 30.25555 USDT truncated to 30.2555.
    let p = Payment {
        bank_code: Some("Т-Банк".into()),
        is_intrabank: true,
        callback_url: Some(url("https://merchant.example.com/cb")),
        ..processing()
    };
    let p = after(
        &p,
        Trigger::Confirm {
            amount: Some(amount("3399.5")),
        },
        60_000,
    );
    assert_eq!(
        json(&p),
        concat!(
            r#"{"id":"5f0c6a4e-2b1d-4c3a-9e8f-7a6b5c4d3e2f","merchant_payment_id":"order-1001","#,
            r#""flow":"runtime_live","status":"completed","amount":3399.5,"initial_amount":3400,"#,
            r#""currency":"RUB","geo_code":"RU","payment_method":"sbp","is_intrabank":true,"#,
            r#""bank_code":"Т-Банк","requisite_bank":"Сбербанк","#,
            r#""callback_url":"https://merchant.example.com/cb","is_test":false,"#,
            r#""merchant_information":{"course":100.00,"rate":11.00,"amount_usdt":"33.9950","#,
            r#""amount_rate":"3025.5550","amount_usdt_rate":"30.2555"},"#,
            r#""requisite":"79001234567","holder_name":"IVAN I.","#,
            r#""qrcode_link":"https://qr.example.com/q/1","#,
            r#""created_at":"2026-10-01T12:00:00.000Z","updated_at":"2026-10-01T12:01:00.000Z","#,
            r#""expires_at":"2026-10-01T12:15:00.000Z"}"#
        )
    );
}

#[test]
fn canceled_card_transfer_with_deeplink_only_and_a_truncated_course() {
    // Course 92.876543219 is fixed as 92.87654321 and shown truncated as 92.87; 1000 RUB at
    // 2.5 %: 10.7669 USDT, 975 after fee, 10.4978 USDT credited (never rounded up).
    let p = Payment {
        amount: amount("1000"),
        initial_amount: amount("1000"),
        payment_method: PaymentMethod::CardTransfer,
        ..fixture()
    };
    let p = after(
        &p,
        Trigger::RequisitesIssued {
            requisites: Requisites {
                requisite: "2200123412341234".into(),
                holder_name: "MARIA P.".into(),
                bank: None,
                qrcode_link: None,
                deeplink_url: Some("https://bank.example.com/open/1".into()),
            },
            pricing: Pricing {
                course: Course::new(dec("92.876543219")).unwrap(),
                fee_percent: FeePercent::new(dec("2.5")).unwrap(),
            },
        },
        2_000,
    );
    let p = after(&p, Trigger::Expire, 15 * 60 * 1000);
    assert_eq!(
        json(&p),
        concat!(
            r#"{"id":"5f0c6a4e-2b1d-4c3a-9e8f-7a6b5c4d3e2f","merchant_payment_id":"order-1001","#,
            r#""flow":"runtime_live","status":"canceled","amount":1000,"initial_amount":1000,"#,
            r#""currency":"RUB","geo_code":"RU","payment_method":"card_transfer","is_intrabank":false,"#,
            r#""bank_code":null,"requisite_bank":null,"callback_url":null,"is_test":false,"#,
            r#""merchant_information":{"course":92.87,"rate":2.50,"amount_usdt":"10.7669","#,
            r#""amount_rate":"975.0000","amount_usdt_rate":"10.4978"},"#,
            r#""requisite":"2200123412341234","holder_name":"MARIA P.","#,
            r#""deeplink_url":"https://bank.example.com/open/1","#,
            r#""created_at":"2026-10-01T12:00:00.000Z","updated_at":"2026-10-01T12:15:00.000Z","#,
            r#""expires_at":"2026-10-01T12:15:00.000Z"}"#
        )
    );
}

fn errored() -> Payment {
    after(
        &fixture(),
        Trigger::RequisitesRefused {
            code: PaymentErrorCode::ProviderNoRequisites,
            comment: "no requisites for this amount".into(),
        },
        2_000,
    )
}

#[test]
fn error_with_error_code_and_comment() {
    assert_eq!(
        json(&errored()),
        concat!(
            r#"{"id":"5f0c6a4e-2b1d-4c3a-9e8f-7a6b5c4d3e2f","merchant_payment_id":"order-1001","#,
            r#""flow":"runtime_live","status":"error","amount":3400,"initial_amount":3400,"#,
            r#""currency":"RUB","geo_code":"RU","payment_method":"sbp","is_intrabank":false,"#,
            r#""bank_code":null,"requisite_bank":null,"callback_url":null,"is_test":false,"#,
            r#""merchant_information":null,"requisite":null,"holder_name":null,"#,
            r#""error_code":"provider_no_requisites","error_comment":"no requisites for this amount","#,
            r#""created_at":"2026-10-01T12:00:00.000Z","updated_at":"2026-10-01T12:00:02.000Z","#,
            r#""expires_at":"2026-10-01T12:15:00.000Z"}"#
        )
    );
}

#[test]
fn appeal_from_completed() {
    let p = after(&processing(), Trigger::Confirm { amount: None }, 60_000);
    let p = after(&p, Trigger::StartRecheck, 120_000);
    assert_eq!(
        json(&p),
        [
            r#"{"id":"5f0c6a4e-2b1d-4c3a-9e8f-7a6b5c4d3e2f","merchant_payment_id":"order-1001","#,
            r#""flow":"runtime_live","status":"appeal","amount":3400,"initial_amount":3400,"#,
            r#""currency":"RUB","geo_code":"RU","payment_method":"sbp","is_intrabank":false,"#,
            r#""bank_code":null,"requisite_bank":"Сбербанк","callback_url":null,"is_test":false,"#,
            PROCESSING_INFO,
            r#","requisite":"79001234567","holder_name":"IVAN I.","#,
            r#""qrcode_link":"https://qr.example.com/q/1","#,
            r#""created_at":"2026-10-01T12:00:00.000Z","updated_at":"2026-10-01T12:02:00.000Z","#,
            r#""expires_at":"2026-10-01T12:15:00.000Z"}"#
        ]
        .concat()
    );
}

#[test]
fn appeal_from_error_has_no_error_fields() {
    // error_code and error_comment are "only for a payment in error".
    let p = after(&errored(), Trigger::StartRecheck, 120_000);
    assert_eq!(p.status, PaymentStatus::Appeal);
    assert_eq!(
        json(&p),
        concat!(
            r#"{"id":"5f0c6a4e-2b1d-4c3a-9e8f-7a6b5c4d3e2f","merchant_payment_id":"order-1001","#,
            r#""flow":"runtime_live","status":"appeal","amount":3400,"initial_amount":3400,"#,
            r#""currency":"RUB","geo_code":"RU","payment_method":"sbp","is_intrabank":false,"#,
            r#""bank_code":null,"requisite_bank":null,"callback_url":null,"is_test":false,"#,
            r#""merchant_information":null,"requisite":null,"holder_name":null,"#,
            r#""created_at":"2026-10-01T12:00:00.000Z","updated_at":"2026-10-01T12:02:00.000Z","#,
            r#""expires_at":"2026-10-01T12:15:00.000Z"}"#
        )
    );
}

fn event_id() -> EventId {
    "9b2f4c1e-7d3a-4e5b-8c6d-0a1b2c3d4e5f".parse().unwrap()
}

#[test]
fn callback_body_of_a_completed_payment() {
    let p = after(
        &processing(),
        Trigger::Confirm {
            amount: Some(amount("3399.5")),
        },
        60_000,
    );
    let ev = CallbackEvent::new(&p, event_id(), EventKind::Automatic, ts(T_CREATED + 60_000));
    assert_eq!(
        std::str::from_utf8(&ev.body).unwrap(),
        concat!(
            r#"{"id":"5f0c6a4e-2b1d-4c3a-9e8f-7a6b5c4d3e2f","#,
            r#""event_id":"9b2f4c1e-7d3a-4e5b-8c6d-0a1b2c3d4e5f","status":"completed","#,
            r#""amount":3399.5,"initial_amount":3400,"currency":"RUB","payment_method":"sbp","#,
            r#""bank_code":null,"is_intrabank":false,"merchant_payment_id":"order-1001","#,
            r#""rate":11.00,"course":100.00,"is_test":false,"#,
            r#""project_id":"0e1d2c3b-4a59-4687-9a1b-2c3d4e5f6a7b"}"#
        )
    );
    assert_eq!(ev.event_id, event_id());
    assert_eq!(ev.status, PaymentStatus::Completed);
    assert_eq!(ev.payment_id, p.id);
    assert_eq!(ev.created_at, ts(T_CREATED + 60_000));
}

#[test]
fn callback_body_of_a_manual_resend_for_an_error_payment() {
    // No requisites were issued: rate and course are null; no error code in the body.
    let p = errored();
    let ev = CallbackEvent::new(&p, event_id(), EventKind::ManualResend, ts(T_CREATED));
    assert_eq!(
        std::str::from_utf8(&ev.body).unwrap(),
        concat!(
            r#"{"id":"5f0c6a4e-2b1d-4c3a-9e8f-7a6b5c4d3e2f","#,
            r#""event_id":"9b2f4c1e-7d3a-4e5b-8c6d-0a1b2c3d4e5f","status":"error","#,
            r#""amount":3400,"initial_amount":3400,"currency":"RUB","payment_method":"sbp","#,
            r#""bank_code":null,"is_intrabank":false,"merchant_payment_id":"order-1001","#,
            r#""rate":null,"course":null,"is_test":false,"#,
            r#""project_id":"0e1d2c3b-4a59-4687-9a1b-2c3d4e5f6a7b"}"#
        )
    );
}
