//! Create: a new payment, idempotency, business rules that take nothing, and generated
//! request bodies.

use futures_executor::block_on;
use payments_core::amount::Amount;
use payments_core::callback::address::AddressPolicy;
use payments_core::payment::{Flow, PaymentStatus};
use payments_core::request::CreatePayment;
use payments_core::service::CreateStatus;
use payments_core::store::MerchantStore;
use payments_core::testing::strategies;
use payments_core::ErrorCode;
use proptest::prelude::*;
use proptest::test_runner::FileFailurePersistence;

use crate::common::{amount, dec, ts, T_CREATED};
use crate::support::{body, code, setup, LIFETIME};

#[test]
fn create_returns_a_new_processing_payment_with_settlement() {
    let s = setup();
    let p = s.created(&body("order-1", "3400"));
    assert_eq!(p.status, PaymentStatus::Processing);
    assert_eq!(p.flow, Flow::RuntimeLive);
    assert_eq!(p.amount, amount("3400"));
    assert_eq!(p.initial_amount, amount("3400"));
    assert_eq!(p.created_at, ts(T_CREATED));
    assert_eq!(p.expires_at, ts(T_CREATED) + LIFETIME);
    let req = p.requisites.as_ref().unwrap();
    assert_eq!(req.requisite, "79000000000");
    // The provider said "сбербанк": recognised as the catalog name.
    assert_eq!(req.bank.as_deref(), Some("Сбербанк"));
    assert_eq!(
        serde_json::to_string(&p.merchant_information()).unwrap(),
        r#"{"course":100.00,"rate":11.00,"amount_usdt":"34.0000","amount_rate":"3026.0000","amount_usdt_rate":"30.2600"}"#
    );
    assert_eq!(s.stored(p.id), p);
    assert!(s.events(p.id).is_empty(), "no callback for processing");
}

#[test]
fn the_same_request_again_returns_the_existing_payment() {
    let s = setup();
    let first = s.created(&body("order-1", "100"));
    for again in [
        body("order-1", "100"),
        body("order-1", r#""100.000""#),
        body("order-1", "100.0"),
        r#"{"merchant_payment_id":"order-1","amount":"100","payment_method":"sbp","currency":"RUB","geo_code":"RU","bank_code":"","is_intrabank":false}"#.to_string(),
    ] {
        let out = s.create(&again).unwrap();
        assert_eq!(out.status, CreateStatus::Existing, "{again}");
        assert_eq!(out.payment, first);
    }
    assert_eq!(
        s.h.provider.calls.load(std::sync::atomic::Ordering::SeqCst),
        1
    );
}

#[test]
fn the_same_id_with_another_request_is_an_idempotency_conflict() {
    let s = setup();
    s.created(&body("order-1", "100"));
    for other in [
        body("order-1", "100.01"),
        r#"{"merchant_payment_id":"order-1","amount":"100","payment_method":"card_transfer"}"#
            .to_string(),
        r#"{"merchant_payment_id":"order-1","amount":"100","payment_method":"sbp","bank_code":"Сбербанк"}"#
            .to_string(),
    ] {
        let e = code(s.create(&other));
        assert_eq!(e.code, ErrorCode::PaymentIdempotencyConflict, "{other}");
        assert_eq!(e.payment_id, None);
    }
}

#[test]
fn a_bank_name_matches_case_insensitively_for_idempotency() {
    let s = setup();
    let first = s.created(
        r#"{"merchant_payment_id":"o","amount":"100","payment_method":"sbp","bank_code":"Сбербанк"}"#,
    );
    assert_eq!(first.bank_code.as_deref(), Some("Сбербанк"));
    let out = s
        .create(r#"{"merchant_payment_id":"o","amount":100,"payment_method":"sbp","bank_code":"сбербанк"}"#)
        .unwrap();
    assert_eq!(out.status, CreateStatus::Existing);
    assert_eq!(out.payment.id, first.id);
}

#[test]
fn unknown_bank_is_bank_not_found_and_the_id_stays_free() {
    let s = setup();
    let e = code(s.create(
        r#"{"merchant_payment_id":"order-7","amount":"100","payment_method":"sbp","bank_code":"No Such Bank"}"#,
    ));
    assert_eq!(e.code, ErrorCode::BankNotFound);
    assert_eq!(e.payment_id, None);
    assert!(s.by_mpid("order-7").is_none());
    let p = s.created(&body("order-7", "100"));
    assert_eq!(p.status, PaymentStatus::Processing);
}

#[test]
fn contract_violations_are_not_covered_and_take_nothing() {
    let s = setup();
    let mut sbp_only = s.project.clone();
    sbp_only
        .contract
        .methods
        .retain(|t| t.method == payments_core::payment::PaymentMethod::Sbp);
    block_on(MerchantStore::upsert_project(s.h.store.as_ref(), &sbp_only)).unwrap();
    let create = |b: &str| block_on(s.h.create(sbp_only.id, b.as_bytes()));
    for (b, needle) in [
        (
            r#"{"merchant_payment_id":"c1","amount":"500","payment_method":"card_transfer"}"#,
            "payment_method card_transfer",
        ),
        (
            r#"{"merchant_payment_id":"c1","amount":"500","payment_method":"sbp","currency":"EUR"}"#,
            "currency EUR",
        ),
        (
            r#"{"merchant_payment_id":"c1","amount":"9.999999","payment_method":"sbp"}"#,
            "below",
        ),
        (
            r#"{"merchant_payment_id":"c1","amount":"1000000.000001","payment_method":"sbp"}"#,
            "above",
        ),
    ] {
        let e = code(create(b));
        assert_eq!(e.code, ErrorCode::PaymentNotCovered, "{b}");
        assert!(e.message.contains(needle), "{}", e.message);
        assert_eq!(e.payment_id, None);
        assert!(s.by_mpid("c1").is_none());
    }
    // The limits are inclusive.
    for (mpid, a) in [("c-min", "10"), ("c-max", "1000000")] {
        let out = create(&body(mpid, a)).unwrap();
        assert_eq!(out.status, CreateStatus::Created);
    }
    assert_eq!(
        create(&body("c1", "500")).unwrap().status,
        CreateStatus::Created
    );
}

#[test]
fn no_rate_is_rate_unavailable_and_takes_nothing() {
    let s = setup();
    let e = code(s.create(
        r#"{"merchant_payment_id":"r1","amount":"500","payment_method":"sbp","currency":"USD"}"#,
    ));
    assert_eq!(e.code, ErrorCode::PaymentRateUnavailable);
    assert_eq!(e.message, "no exchange rate for USD");
    assert_eq!(
        e.cause.as_deref(),
        Some(&payments_core::error::ErrorCause::Rate(
            payments_core::error::RateFailure::NoRate
        ))
    );
    assert_eq!(e.payment_id, None);
    assert!(s.by_mpid("r1").is_none());
    s.h.rates.set(
        payments_core::payment::Currency::parse("USD").unwrap(),
        "0.95",
    );
    let p = s.created(
        r#"{"merchant_payment_id":"r1","amount":"500","payment_method":"sbp","currency":"USD"}"#,
    );
    // 500 / 0.95 = 526.3157... USDT, truncated.
    assert_eq!(
        p.merchant_information().unwrap().amount_usdt,
        dec("526.3157")
    );
}

#[test]
fn a_paused_merchant_is_not_routable_and_takes_nothing() {
    let mut s = setup();
    s.merchant.paused = true;
    block_on(s.h.store.upsert_merchant(&s.merchant)).unwrap();
    let e = code(s.create(&body("p1", "100")));
    assert_eq!(e.code, ErrorCode::PaymentNotRoutable);
    assert_eq!(e.payment_id, None);
    assert!(s.by_mpid("p1").is_none());
    assert_eq!(
        s.h.provider.calls.load(std::sync::atomic::Ordering::SeqCst),
        0
    );
}

proptest! {
    // Regressions next to this file (`create.proptest-regressions`): the default would stop at
    // this directory's `main.rs` and use `tests/proptest-regressions/create.txt`.
    #![proptest_config(ProptestConfig {
        failure_persistence: Some(Box::new(FileFailurePersistence::WithSource(
            "proptest-regressions"
        ))),
        ..ProptestConfig::with_cases(256)
    })]

    /// Every generated body is valid, and writing its amount as a number or as a string is the
    /// same request.
    #[test]
    fn generated_create_bodies_are_valid(mut v in strategies::create_request_json()) {
        let parse = |v: &serde_json::Value| {
            CreatePayment::parse(&serde_json::to_vec(v).unwrap(), AddressPolicy::default())
        };
        let req = parse(&v).map_err(|e| TestCaseError::fail(format!("{e}: {v}")))?;
        let text = v["amount"].to_string();
        let text = text.trim_matches('"').to_string();
        prop_assert_eq!(req.amount, Amount::parse(&text).unwrap());
        v["amount"] = serde_json::Value::String(text.clone());
        let as_string = parse(&v).unwrap();
        v["amount"] = serde_json::Value::Number(text.parse().unwrap());
        let as_number = parse(&v).unwrap();
        prop_assert_eq!(as_string.fingerprint(None), as_number.fingerprint(None));
        prop_assert_eq!(as_string.fingerprint(None), req.fingerprint(None));
    }
}
