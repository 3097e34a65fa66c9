//! The CPU-bound steps of a create and of a callback delivery, one at a time: verifying a
//! signed create request (Content-Digest + signature base + Ed25519) beside a bare Ed25519
//! verification of the same base, parsing the create body, settlement maths, and signing a
//! callback with one and with two secrets.

use std::str::FromStr;
use std::time::Duration;

use criterion::{criterion_group, criterion_main, Criterion};
use ed25519_dalek::Signature;
use payments_core::amount::Amount;
use payments_core::auth::keys::{generate_signing_key, keyid};
use payments_core::auth::signature::{sign_request, SignOptions};
use payments_core::auth::{HttpRequestParts, PreparedSignature, SignaturePolicy};
use payments_core::callback::{signature_header, AddressPolicy, CallbackSecret};
use payments_core::request::CreatePayment;
use payments_core::settlement::{Course, FeePercent, Pricing, Settlement};
use payments_core::testing::SeededRandom;
use payments_core::Timestamp;
use rust_decimal::Decimal;

/// A create body of the usual size: what the load generator sends.
const BODY: &[u8] = br#"{"merchant_payment_id":"order-000000000042","amount":"3400.00","payment_method":"sbp","currency":"RUB","geo_code":"RU","bank_code":"sberbank"}"#;

/// `created` of the signed request; the verifier's clock is one second later.
const CREATED: i64 = 1_790_000_000;

fn verification(c: &mut Criterion) {
    let rng = SeededRandom::new(7);
    let key = generate_signing_key(&rng);
    let verifying = key.verifying_key();
    let base_headers: Vec<(String, String)> = vec![
        (
            "Authorization".into(),
            "Bearer sk_test_0123456789abcdef0123456789abcdef".into(),
        ),
        (
            "X-Request-ID".into(),
            "0b7a52f6-43d3-4a4e-9d2c-7f3d1f0c9a11".into(),
        ),
        ("Content-Type".into(), "application/json".into()),
    ];
    let raw: Vec<(&str, &[u8])> = base_headers
        .iter()
        .map(|(n, v)| (n.as_str(), v.as_bytes()))
        .collect();
    let unsigned = HttpRequestParts {
        method: "POST",
        scheme: "https",
        authority: "api.example.com",
        path_and_query: "/api/v1/payments",
        headers: &raw,
        body: BODY,
    };
    let options = SignOptions::new(keyid(&verifying), CREATED, CREATED + 300);
    let signed = sign_request(&unsigned, &key, &options, &rng).expect("the request signs");
    let mut all: Vec<(String, String)> = base_headers.clone();
    for (n, v) in signed.headers() {
        all.push((n.to_string(), v.to_string()));
    }
    let raw: Vec<(&str, &[u8])> = all
        .iter()
        .map(|(n, v)| (n.as_str(), v.as_bytes()))
        .collect();
    let parts = HttpRequestParts {
        headers: &raw,
        ..unsigned
    };
    let policy = SignaturePolicy::strict();
    let now = Timestamp::from_unix_secs(CREATED + 1);

    // The whole check a create gets: parse the headers, check the policy and the digest,
    // build the base, verify Ed25519.
    let prepared = PreparedSignature::prepare(&parts, &policy, now).expect("the request prepares");
    prepared.verify(&verifying).expect("the signature verifies");
    let base = prepared.signature_base().to_owned();
    let signature = {
        let b64 = signed
            .signature
            .split_once(":")
            .and_then(|(_, rest)| rest.strip_suffix(':'))
            .expect("Signature is label=:base64:");
        use base64::Engine;
        let bytes = base64::engine::general_purpose::STANDARD
            .decode(b64)
            .expect("the signature is base64");
        Signature::from_slice(&bytes).expect("64 bytes")
    };
    verifying
        .verify_strict(base.as_bytes(), &signature)
        .expect("the bare signature verifies");

    let mut group = c.benchmark_group("request_verification");
    group.measurement_time(Duration::from_secs(4));
    group.bench_function("create_request_digest_base_ed25519", |b| {
        b.iter(|| {
            let prepared = PreparedSignature::prepare(&parts, &policy, now).expect("prepares");
            prepared.verify(&verifying).expect("verifies")
        })
    });
    group.bench_function("bare_ed25519_verify_of_same_base", |b| {
        b.iter(|| {
            verifying
                .verify_strict(base.as_bytes(), &signature)
                .expect("verifies")
        })
    });
    group.finish();
}

fn create_parse(c: &mut Criterion) {
    let mut group = c.benchmark_group("create_parse");
    group.measurement_time(Duration::from_secs(3));
    group.bench_function("CreatePayment::parse", |b| {
        b.iter(|| CreatePayment::parse(BODY, AddressPolicy::STRICT).expect("a valid body"))
    });
    group.finish();
}

fn settlement(c: &mut Criterion) {
    let pricing = Pricing {
        course: Course::new(Decimal::from_str("92.56789012").expect("a decimal")).expect("course"),
        fee_percent: FeePercent::new(Decimal::from_str("3.5").expect("a decimal")).expect("fee"),
    };
    let amount = Amount::parse("3400.00").expect("an amount");
    let mut group = c.benchmark_group("settlement");
    group.measurement_time(Duration::from_secs(3));
    group.bench_function("Settlement::compute", |b| {
        b.iter(|| Settlement::compute(&amount, &pricing))
    });
    group.finish();
}

fn callback_signing(c: &mut Criterion) {
    let rng = SeededRandom::new(11);
    let current = CallbackSecret::generate(&rng);
    let previous = CallbackSecret::generate(&rng);
    // A typical event body (about 700 bytes).
    let body = format!(
        r#"{{"event_id":"evt_01","event_type":"payment.status_changed","payment":{}}}"#,
        serde_json::json!({
            "payment_id": "5c1f3e8a-2b7d-4f0e-9a61-3d2c8b7e4f10",
            "merchant_payment_id": "order-000000000042",
            "status": "success",
            "amount": "3400.00",
            "initial_amount": "3400.00",
            "currency": "RUB",
            "payment_method": "sbp",
            "requisites": {"requisite": "+79001234567", "holder_name": "Иван Петрович С.", "bank": "Сбербанк"},
            "merchant_information": {"course": "92.56", "rate": "3.50", "amount_usdt": "36.7294", "fee": "119.0000", "amount_rate": "3281", "amount_usdt_rate": "35.4439"},
            "created_at": "2026-11-22T03:00:00.000Z",
            "updated_at": "2026-11-22T03:01:00.000Z",
        })
    );
    let mut group = c.benchmark_group("callback_signing");
    group.measurement_time(Duration::from_secs(3));
    group.bench_function("signature_header_1_secret", |b| {
        b.iter(|| signature_header(&[&current], CREATED, body.as_bytes()))
    });
    group.bench_function("signature_header_2_secrets", |b| {
        b.iter(|| signature_header(&[&current, &previous], CREATED, body.as_bytes()))
    });
    group.finish();
}

criterion_group!(
    benches,
    verification,
    create_parse,
    settlement,
    callback_signing
);
criterion_main!(benches);
