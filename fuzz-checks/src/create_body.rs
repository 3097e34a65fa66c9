//! The `POST /api/v1/payments` body through [`CreatePayment::parse`], under the production
//! address policy and the local-development one.
//!
//! Properties:
//! - a body that parses re-serialises (every field written out, the amount as a string and as
//!   a JSON number, the callback URL normalised; and again with the defaults left out) to a
//!   body that parses to the same request, with the same amount scale and the same fingerprint;
//! - the fingerprint is a JSON array of the eight fields;
//! - the parsed values keep their rules: a positive amount with at most 6 decimals, a trimmed
//!   non-empty `bank_code` of at most 200 characters, an `https` callback URL in production;
//! - what production accepts, local development accepts identically; what only local
//!   development accepts differs by the callback URL alone;
//! - the answer is deterministic.

use payments_core::amount::MAX_SCALE;
use payments_core::bank::CountryCode;
use payments_core::callback::AddressPolicy;
use payments_core::payment::Currency;
use payments_core::request::{CreatePayment, RequestError};
use serde_json::{json, Map, Value};

/// Runs the target on the fuzzer's bytes `data`; panics when a property of this module's
/// parser does not hold (see the module's documentation for the input format and the
/// properties).
pub fn check(data: &[u8]) {
    let strict = CreatePayment::parse(data, AddressPolicy::STRICT);
    let local = CreatePayment::parse(data, AddressPolicy::LOCAL_DEVELOPMENT);
    assert_eq!(
        strict,
        CreatePayment::parse(data, AddressPolicy::STRICT),
        "deterministic"
    );
    match (&strict, &local) {
        (Ok(s), Ok(l)) => assert_eq!(s, l, "the policies disagree on an accepted body"),
        (Ok(_), Err(e)) => panic!("production accepts what local development refuses: {e}"),
        (Err(e), Ok(l)) => {
            assert!(
                matches!(e, RequestError::CallbackUrl(_)) && l.callback_url.is_some(),
                "only local development accepts, for another reason than the callback URL: {e}"
            );
        }
        (Err(_), Err(_)) => {}
    }
    if let Ok(p) = &strict {
        if let Some(url) = &p.callback_url {
            assert!(url.is_https(), "production accepted {url}");
        }
    }
    for (policy, result) in [
        (AddressPolicy::STRICT, strict),
        (AddressPolicy::LOCAL_DEVELOPMENT, local),
    ] {
        if let Ok(p) = result {
            invariants(&p);
            round_trip(&p, policy);
        }
    }
}

fn invariants(p: &CreatePayment) {
    let amount = p.amount.as_decimal();
    assert!(
        amount.is_sign_positive() && !amount.is_zero(),
        "amount {amount}"
    );
    assert!(amount.scale() <= MAX_SCALE, "amount {amount}");
    if let Some(bank) = &p.bank_code {
        assert!(
            !bank.is_empty() && bank.trim() == bank && bank.chars().count() <= 200,
            "bank_code {bank:?}"
        );
    }
    assert_eq!(Currency::parse(p.currency.as_str()), Some(p.currency));
    assert_eq!(CountryCode::parse(p.geo_code.as_str()), Some(p.geo_code));
    let fingerprint: Value =
        serde_json::from_str(&p.fingerprint(None)).expect("the fingerprint is JSON");
    // Eight members, and the metadata as a ninth when there is some.
    assert_eq!(
        fingerprint.as_array().map(Vec::len),
        Some(if p.metadata.is_empty() { 8 } else { 9 }),
        "{fingerprint}"
    );
}

/// The body with every field written out.
fn full_body(p: &CreatePayment, amount: Value) -> Map<String, Value> {
    let Value::Object(map) = json!({
        "merchant_payment_id": p.merchant_payment_id.as_str(),
        "amount": amount,
        "payment_method": p.payment_method.as_str(),
        "currency": p.currency.as_str(),
        "geo_code": p.geo_code.as_str(),
        "bank_code": p.bank_code,
        "is_intrabank": p.is_intrabank,
        "callback_url": p.callback_url.as_ref().map(|u| u.as_str()),
        "metadata": p.metadata,
    }) else {
        unreachable!("json!({{...}}) is an object")
    };
    map
}

fn round_trip(p: &CreatePayment, policy: AddressPolicy) {
    let as_string = full_body(p, Value::String(p.amount.to_string()));
    let as_number = full_body(
        p,
        serde_json::to_value(p.amount).expect("an amount serialises"),
    );
    let mut minimal = as_string.clone();
    let default = |k: &str, v: &Value| match k {
        "currency" => v == "RUB",
        "geo_code" => v == "RU",
        "is_intrabank" => v == &Value::Bool(false),
        _ => v.is_null(),
    };
    minimal.retain(|k, v| !default(k, v));
    for body in [as_string, as_number, minimal] {
        let bytes = serde_json::to_vec(&body).expect("a JSON object serialises");
        let again = match CreatePayment::parse(&bytes, policy) {
            Ok(again) => again,
            Err(e) => panic!(
                "re-serialised body refused ({e}): {}",
                String::from_utf8_lossy(&bytes)
            ),
        };
        assert_eq!(&again, p, "re-serialised body parses to another request");
        assert_eq!(
            again.amount.as_decimal().scale(),
            p.amount.as_decimal().scale(),
            "the amount's scale is kept"
        );
        assert_eq!(again.fingerprint(None), p.fingerprint(None));
        assert_eq!(again.fingerprint(Some("Bank")), p.fingerprint(Some("Bank")));
    }
}
