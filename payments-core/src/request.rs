//! `POST /api/v1/payments` request parsing: a [`CreatePayment`] that exists is valid.
//!
//! Rules (spec "Request body fields" and decisions.md "Amounts and currencies"): unknown fields
//! and duplicate keys are `400 bad_request` naming the field; `amount` is read exactly from a
//! JSON number or string; defaults `currency = RUB`, `geo_code = RU`, `is_intrabank = false`;
//! an empty `bank_code` means any bank; `null` for an optional field means absent.

use std::fmt;

use serde::de::{Deserializer, MapAccess, Visitor};
use serde::Deserialize;
use serde_json::Value;

use crate::amount::Amount;
use crate::bank::CountryCode;
use crate::callback::address::AddressPolicy;
use crate::callback::destination::{CallbackUrl, CallbackUrlError};
use crate::payment::{Currency, MerchantPaymentId, Metadata, PaymentMethod};
use crate::ApiError;

/// The fields a create request may carry.
pub const FIELDS: [&str; 9] = [
    "merchant_payment_id",
    "amount",
    "payment_method",
    "currency",
    "geo_code",
    "bank_code",
    "is_intrabank",
    "callback_url",
    "metadata",
];

/// A valid create request with defaults applied.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CreatePayment {
    /// The merchant's order id (idempotency key).
    pub merchant_payment_id: MerchantPaymentId,
    /// Amount to pay.
    pub amount: Amount,
    /// Method.
    pub payment_method: PaymentMethod,
    /// Currency (default `RUB`).
    pub currency: Currency,
    /// Country for the bank lookup (default `RU`).
    pub geo_code: CountryCode,
    /// The payer's bank name as sent (trimmed), not yet resolved; `None` for any bank.
    pub bank_code: Option<String>,
    /// Transfer within the payer's bank (default `false`).
    pub is_intrabank: bool,
    /// Per-payment callback URL.
    pub callback_url: Option<CallbackUrl>,
    /// The merchant's keys (empty without `metadata`).
    pub metadata: Metadata,
}

/// An object's members in order, duplicates kept so they can be refused.
struct Members<T = Value>(Vec<(String, T)>);

impl<'de, T: Deserialize<'de>> Deserialize<'de> for Members<T> {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V<T>(std::marker::PhantomData<T>);
        impl<'de, T: Deserialize<'de>> Visitor<'de> for V<T> {
            type Value = Members<T>;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("a JSON object")
            }
            fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Members<T>, A::Error> {
                let mut out = Vec::new();
                while let Some((k, v)) = map.next_entry::<String, T>()? {
                    out.push((k, v));
                }
                Ok(Members(out))
            }
        }
        d.deserialize_map(V(std::marker::PhantomData))
    }
}

/// A key the body's `metadata` object gives twice (the parsed value keeps only the last):
/// read again from the raw bytes, only for a body that has a metadata object.
fn duplicate_metadata_key(body: &[u8]) -> Option<String> {
    let Members(members) =
        serde_json::from_slice::<Members<Box<serde_json::value::RawValue>>>(body).ok()?;
    let (_, raw) = members.into_iter().find(|(k, _)| k == "metadata")?;
    let Members(keys) = serde_json::from_str::<Members>(raw.get()).ok()?;
    let mut seen = std::collections::HashSet::new();
    keys.into_iter()
        .map(|(k, _)| k)
        .find(|k| !seen.insert(k.clone()))
}

/// Why a create request's body was refused: `400 bad_request` with the error's text.
#[non_exhaustive]
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum RequestError {
    /// Not a JSON object (or not JSON).
    #[error("body must be a JSON object: {0}")]
    NotAnObject(String),
    /// A field that is unknown, repeated, missing or out of its form.
    #[error("{field}: {reason}")]
    Field {
        /// The field, as the body names it.
        field: String,
        /// What is wrong with it.
        reason: String,
    },
    /// A callback URL the service's policy refuses.
    #[error(transparent)]
    CallbackUrl(#[from] CallbackUrlError),
}

impl From<RequestError> for ApiError {
    fn from(e: RequestError) -> ApiError {
        ApiError::bad_request(e.to_string())
    }
}

fn bad(field: &str, why: impl fmt::Display) -> RequestError {
    RequestError::Field {
        field: field.to_string(),
        reason: why.to_string(),
    }
}

fn string<'v>(field: &str, v: &'v Value) -> Result<&'v str, RequestError> {
    v.as_str().ok_or_else(|| bad(field, "must be a string"))
}

/// The body's members in the order of [`FIELDS`]: an unknown or repeated field is refused,
/// and `null` for an optional field is the same as leaving it out.
fn fields_of(body: &[u8]) -> Result<[Option<Value>; 9], RequestError> {
    let Members(members) =
        serde_json::from_slice(body).map_err(|e| RequestError::NotAnObject(e.to_string()))?;
    let mut slots: [Option<Value>; 9] = Default::default();
    for (k, v) in members {
        let i = FIELDS
            .iter()
            .position(|f| *f == k)
            .ok_or_else(|| bad(&k, "unknown field"))?;
        if slots[i].is_some() {
            return Err(bad(&k, "duplicate field"));
        }
        slots[i] = Some(v);
    }
    Ok(slots.map(|s| s.filter(|v| !v.is_null())))
}

/// `bank_code`: a string of at most 200 characters, trimmed; blank is none.
fn bank_code(v: &Value) -> Result<Option<String>, RequestError> {
    let s = string("bank_code", v)?.trim();
    if s.chars().count() > 200 {
        return Err(bad("bank_code", "must be at most 200 characters"));
    }
    Ok((!s.is_empty()).then(|| s.to_string()))
}

/// `metadata`: an object without a repeated key (read from the raw `body`, which the parsed
/// value no longer shows) whose entries [`Metadata::from_json`] accepts.
fn metadata_of(v: &Value, body: &[u8]) -> Result<Metadata, RequestError> {
    if v.is_object() {
        if let Some(key) = duplicate_metadata_key(body) {
            return Err(bad("metadata", format!("duplicate key {key:?}")));
        }
    }
    Metadata::from_json(v).map_err(|e| bad("metadata", e))
}

impl CreatePayment {
    /// Parses and validates a raw body. `policy` decides which callback URLs are acceptable.
    pub fn parse(body: &[u8], policy: AddressPolicy) -> Result<CreatePayment, RequestError> {
        let [mpid, amount, method, currency, geo, bank, intrabank, callback, metadata] =
            fields_of(body)?;

        let mpid = mpid.ok_or_else(|| bad("merchant_payment_id", "is required"))?;
        let merchant_payment_id = MerchantPaymentId::parse(string("merchant_payment_id", &mpid)?)
            .ok_or_else(|| {
            bad(
                "merchant_payment_id",
                "must be 1-64 characters from A-Za-z0-9._:-",
            )
        })?;

        let amount = amount.ok_or_else(|| bad("amount", "is required"))?;
        let amount = Amount::from_json(&amount).map_err(|e| bad("amount", e))?;

        let method = method.ok_or_else(|| bad("payment_method", "is required"))?;
        let payment_method = string("payment_method", &method)?
            .parse()
            .map_err(|_| bad("payment_method", "must be \"sbp\" or \"card_transfer\""))?;

        let currency = match currency {
            None => Currency::RUB,
            Some(v) => Currency::parse(string("currency", &v)?)
                .ok_or_else(|| bad("currency", "must be three upper-case letters (ISO 4217)"))?,
        };
        let geo_code = match geo {
            None => CountryCode::RU,
            Some(v) => CountryCode::parse(string("geo_code", &v)?)
                .ok_or_else(|| bad("geo_code", "must be two Latin letters"))?,
        };
        let bank_code = bank.map(|v| bank_code(&v)).transpose()?.flatten();
        let is_intrabank = match intrabank {
            None => false,
            Some(v) => v
                .as_bool()
                .ok_or_else(|| bad("is_intrabank", "must be a boolean"))?,
        };
        let callback_url = match callback {
            None => None,
            Some(v) => Some(CallbackUrl::parse(string("callback_url", &v)?, policy)?),
        };
        let metadata = match metadata {
            None => Metadata::default(),
            Some(v) => metadata_of(&v, body)?,
        };
        Ok(CreatePayment {
            metadata,
            merchant_payment_id,
            amount,
            payment_method,
            currency,
            geo_code,
            bank_code,
            is_intrabank,
            callback_url,
        })
    }

    /// The normalised form compared for idempotency: amounts by value, `bank_code` as the
    /// resolved catalog name (or, if it does not resolve, its case-folded text), defaults
    /// applied. Two requests are "the same" exactly when their fingerprints are equal.
    /// Metadata counts when there is some (keys in order); without it the fingerprint is the
    /// one payments created before metadata existed have, so their repeats still match.
    pub fn fingerprint(&self, resolved_bank: Option<&str>) -> String {
        let bank = match (resolved_bank, &self.bank_code) {
            (Some(name), _) => format!("={name}"),
            (None, Some(raw)) => format!("?{}", raw.to_lowercase()),
            (None, None) => String::new(),
        };
        let mut fingerprint = serde_json::json!([
            self.merchant_payment_id.as_str(),
            self.amount.normalized(),
            self.payment_method.as_str(),
            self.currency.as_str(),
            self.geo_code.as_str(),
            bank,
            self.is_intrabank,
            self.callback_url.as_ref().map(|u| u.as_str()),
        ]);
        if !self.metadata.is_empty() {
            if let Value::Array(items) = &mut fingerprint {
                items.push(serde_json::json!(self.metadata));
            }
        }
        fingerprint.to_string()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ErrorCode;

    fn parse(body: &str) -> Result<CreatePayment, ApiError> {
        CreatePayment::parse(body.as_bytes(), AddressPolicy::default()).map_err(ApiError::from)
    }

    fn msg(body: &str) -> String {
        let e = parse(body).unwrap_err();
        assert_eq!(e.code, ErrorCode::BadRequest);
        e.message
    }

    #[test]
    fn defaults_are_applied() {
        let p =
            parse(r#"{"merchant_payment_id":"order-1","amount":"3400","payment_method":"sbp"}"#)
                .unwrap();
        assert_eq!(p.currency, Currency::RUB);
        assert_eq!(p.geo_code, CountryCode::RU);
        assert!(!p.is_intrabank);
        assert_eq!(p.bank_code, None);
        let q = parse(r#"{"merchant_payment_id":"order-1","amount":3400.0,"payment_method":"sbp","currency":"RUB","geo_code":"RU","bank_code":"  ","is_intrabank":false}"#).unwrap();
        // Rule 2: omitting currency and geo_code equals giving the defaults; amounts by value.
        assert_eq!(p.fingerprint(None), q.fingerprint(None));
    }

    #[test]
    fn every_field_is_checked_and_named() {
        let base = r#""merchant_payment_id":"o.1_a:b-c","amount":"1","payment_method":"sbp""#;
        assert!(msg(&format!("{{{base},\"deadline\":1}}")).starts_with("deadline: unknown field"));
        assert!(msg(&format!("{{{base},\"amount\":\"2\"}}")).starts_with("amount: duplicate field"));
        assert!(msg(r#"{"amount":"1","payment_method":"sbp"}"#)
            .starts_with("merchant_payment_id: is required"));
        assert!(
            msg(r#"{"merchant_payment_id":"a b","amount":"1","payment_method":"sbp"}"#)
                .starts_with("merchant_payment_id:")
        );
        assert!(msg(&format!(
            r#"{{"merchant_payment_id":"{}","amount":"1","payment_method":"sbp"}}"#,
            "x".repeat(65)
        ))
        .starts_with("merchant_payment_id:"));
        assert!(msg(r#"{"merchant_payment_id":"a","payment_method":"sbp"}"#)
            .starts_with("amount: is required"));
        assert!(
            msg(r#"{"merchant_payment_id":"a","amount":1e3,"payment_method":"sbp"}"#)
                .starts_with("amount:")
        );
        assert!(
            msg(r#"{"merchant_payment_id":"a","amount":"1.1234567","payment_method":"sbp"}"#)
                .starts_with("amount: must have at most 6")
        );
        assert!(
            msg(r#"{"merchant_payment_id":"a","amount":-1,"payment_method":"sbp"}"#)
                .starts_with("amount:")
        );
        assert!(
            msg(r#"{"merchant_payment_id":"a","amount":"1","payment_method":"cash"}"#)
                .starts_with("payment_method:")
        );
        assert!(msg(&format!("{{{base},\"currency\":\"rub\"}}")).starts_with("currency:"));
        assert!(msg(&format!("{{{base},\"geo_code\":\"RUS\"}}")).starts_with("geo_code:"));
        assert!(msg(&format!("{{{base},\"is_intrabank\":\"yes\"}}")).starts_with("is_intrabank:"));
        assert!(msg(&format!("{{{base},\"bank_code\":7}}")).starts_with("bank_code:"));
        assert!(msg(&format!(
            "{{{base},\"callback_url\":\"http://example.com/cb\"}}"
        ))
        .starts_with("callback_url must use https"));
        assert!(msg("[1,2]").starts_with("body must be a JSON object"));
        assert!(msg("{").starts_with("body must be a JSON object"));
        assert!(msg("").starts_with("body must be a JSON object"));
    }

    #[test]
    fn metadata_counts_in_the_fingerprint_only_when_given() {
        let base = r#""merchant_payment_id":"a","amount":"1","payment_method":"sbp""#;
        let p = |extra: &str| parse(&format!("{{{base}{extra}}}")).unwrap();
        let plain = p("");
        assert_eq!(
            plain.fingerprint(None),
            p(r#","metadata":{}"#).fingerprint(None)
        );
        assert_eq!(
            plain.fingerprint(None),
            p(r#","metadata":null"#).fingerprint(None)
        );
        let ab = p(r#","metadata":{"a":"1","b":"2"}"#);
        assert_eq!(
            ab.fingerprint(None),
            p(r#","metadata":{"b":"2","a":"1"}"#).fingerprint(None),
            "key order does not count"
        );
        assert_ne!(ab.fingerprint(None), plain.fingerprint(None));
        assert_ne!(
            ab.fingerprint(None),
            p(r#","metadata":{"a":"1","b":"3"}"#).fingerprint(None)
        );
        assert_eq!(ab.metadata.get("b"), Some("2"));
        assert!(msg(&format!(r#"{{{base},"metadata":"a=1"}}"#)).starts_with("metadata:"));
        assert_eq!(
            msg(&format!(
                r#"{{{base},"metadata":{{"a":"1","b":"2","a":"3"}}}}"#
            )),
            r#"metadata: duplicate key "a""#,
            "a key given twice is refused, not the last one kept"
        );
    }

    #[test]
    fn fingerprint_tells_requests_apart() {
        let a = parse(r#"{"merchant_payment_id":"a","amount":"100","payment_method":"sbp","bank_code":"Sber"}"#).unwrap();
        let b = parse(r#"{"merchant_payment_id":"a","amount":"100.000","payment_method":"sbp","bank_code":"sber"}"#).unwrap();
        let c = parse(r#"{"merchant_payment_id":"a","amount":"100.01","payment_method":"sbp","bank_code":"Sber"}"#).unwrap();
        assert_eq!(
            a.fingerprint(Some("Сбербанк")),
            b.fingerprint(Some("Сбербанк"))
        );
        assert_eq!(a.fingerprint(None), b.fingerprint(None));
        assert_ne!(a.fingerprint(None), c.fingerprint(None));
        assert_ne!(a.fingerprint(Some("X")), a.fingerprint(None));
    }
}
