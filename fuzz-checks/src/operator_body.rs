//! The operator API's request bodies through `payments_http::operator::body`, read as the
//! handlers read them.
//!
//! Input: one byte choosing the endpoint ([`ENDPOINTS`], modulo their number), then the body.
//!
//! Properties:
//! - `Body::parse` accepts exactly a blank body or a JSON object whose members are all allowed
//!   for the endpoint, without a duplicate member at any depth (members are counted as written
//!   and after a `serde_json::Value` round trip, which keeps one of each);
//! - a blank body is read as `{}`;
//! - an accepted body re-serialised (`serde_json`) is read to the same outcome, value or error;
//! - what the readers return round-trips: a contract through its operator JSON form (the one
//!   `GET /operator/v1/projects/{id}` shows), a rate limit, scopes through their names, an
//!   amount through its text;
//! - the outcome is deterministic.

use std::fmt;

use payments_core::amount::Amount;
use payments_core::auth::keys::parse_public_key;
use payments_core::project::{Contract, RateLimit};
use payments_core::ApiError;
use payments_http::operator::body::{self, Body};
use payments_http::operator::provision::{PROJECT_CREATE_FIELDS, PROJECT_PATCH_FIELDS};
use serde::de::{Deserialize, Deserializer, MapAccess, SeqAccess, Visitor};
use serde_json::{json, Value};

type Reader = fn(&Body) -> Result<String, ApiError>;

/// Each endpoint with a body: its name, allowed members, and how its handler reads the body
/// (the result as text, to compare outcomes).
pub(crate) const ENDPOINTS: [(&str, &[&str], Reader); 9] = [
    ("create_merchant", &["name", "callback_url"], |b| {
        Ok(format!(
            "{:?}",
            (b.required_string("name")?, b.string("callback_url")?)
        ))
    }),
    ("update_merchant", &["paused", "callback_url"], |b| {
        Ok(format!(
            "{:?}",
            (b.bool("paused")?, b.nullable_string("callback_url")?)
        ))
    }),
    ("create_project", &PROJECT_CREATE_FIELDS, |b| {
        let ids = (
            b.required_string("merchant_id")?,
            b.required_string("name")?,
        );
        let patch = body::project_patch(b)?;
        round_trip_patch(&patch.contract, patch.rate_limit);
        Ok(format!("{ids:?} {patch:?}"))
    }),
    ("update_project", &PROJECT_PATCH_FIELDS, |b| {
        let patch = body::project_patch(b)?;
        round_trip_patch(&patch.contract, patch.rate_limit);
        Ok(format!("{patch:?}"))
    }),
    ("issue_token", &["scopes"], |b| {
        let names = b
            .strings("scopes")?
            .ok_or_else(|| ApiError::bad_request("scopes: is required"))?;
        let scopes = body::scopes(&names)?;
        assert_eq!(scopes.len(), names.len());
        for (scope, name) in scopes.iter().zip(&names) {
            assert_eq!(scope.as_str(), name.trim(), "scope read from another name");
        }
        Ok(format!("{scopes:?}"))
    }),
    ("register_key", &["public_key"], |b| {
        let key = b.required_string("public_key")?;
        Ok(format!("{:?}", parse_public_key(&key)))
    }),
    ("confirm", &["amount"], |b| {
        let amount = b.amount("amount")?;
        if let Some(a) = amount {
            round_trip_amount(a);
        }
        Ok(format!("{amount:?}"))
    }),
    ("resolve", &["status", "amount"], |b| {
        let status = b.required_string("status")?;
        let amount = b.amount("amount")?;
        if let Some(a) = amount {
            round_trip_amount(a);
        }
        Ok(format!("{:?}", body::resolve_trigger(&status, amount)?))
    }),
    ("empty", &[], |_| Ok(String::new())),
];

/// Runs the target on the fuzzer's bytes `data`; panics when a property of this module's
/// parser does not hold (see the module's documentation for the input format and the
/// properties).
pub fn check(data: &[u8]) {
    let Some((&selector, bytes)) = data.split_first() else {
        return;
    };
    let (_, allowed, read) = ENDPOINTS[usize::from(selector) % ENDPOINTS.len()];
    let outcome = |bytes: &[u8]| Body::parse(bytes, allowed).and_then(|b| read(&b));
    let result = outcome(bytes);
    assert_eq!(result, outcome(bytes), "deterministic");

    let blank = bytes.iter().all(u8::is_ascii_whitespace);
    let parsed: Option<Value> = serde_json::from_slice(bytes).ok();
    let acceptable = blank
        || matches!(&parsed, Some(value @ Value::Object(map))
            if map.keys().all(|k| allowed.contains(&k.as_str()))
                && members(bytes) == members(&serde_json::to_vec(value).expect("serialises")));
    assert_eq!(
        Body::parse(bytes, allowed).is_ok(),
        acceptable,
        "Body::parse accepts {:?} wrongly",
        String::from_utf8_lossy(bytes)
    );
    if blank {
        assert_eq!(result, outcome(b"{}"), "a blank body is not read as {{}}");
    } else if let (true, Some(value)) = (acceptable, parsed) {
        let again = serde_json::to_vec(&value).expect("a JSON value serialises");
        assert_eq!(
            outcome(&again),
            result,
            "re-serialised body read differently: {}",
            String::from_utf8_lossy(&again)
        );
    }
}

/// The number of object members in a JSON document as written, duplicates included.
fn members(json: &[u8]) -> Option<usize> {
    serde_json::from_slice::<MemberCount>(json)
        .ok()
        .map(|c| c.0)
}

struct MemberCount(usize);

impl<'de> Deserialize<'de> for MemberCount {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        d.deserialize_any(MemberCountVisitor)
    }
}

struct MemberCountVisitor;

impl<'de> Visitor<'de> for MemberCountVisitor {
    type Value = MemberCount;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("a JSON value")
    }

    fn visit_bool<E>(self, _: bool) -> Result<MemberCount, E> {
        Ok(MemberCount(0))
    }

    fn visit_i64<E>(self, _: i64) -> Result<MemberCount, E> {
        Ok(MemberCount(0))
    }

    fn visit_u64<E>(self, _: u64) -> Result<MemberCount, E> {
        Ok(MemberCount(0))
    }

    fn visit_f64<E>(self, _: f64) -> Result<MemberCount, E> {
        Ok(MemberCount(0))
    }

    fn visit_str<E>(self, _: &str) -> Result<MemberCount, E> {
        Ok(MemberCount(0))
    }

    fn visit_unit<E>(self) -> Result<MemberCount, E> {
        Ok(MemberCount(0))
    }

    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<MemberCount, A::Error> {
        let mut n = 0;
        while let Some(MemberCount(inner)) = seq.next_element()? {
            n += inner;
        }
        Ok(MemberCount(n))
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<MemberCount, A::Error> {
        let mut n = 0;
        while map.next_key::<serde::de::IgnoredAny>()?.is_some() {
            let MemberCount(inner) = map.next_value()?;
            n += 1 + inner;
        }
        Ok(MemberCount(n))
    }
}

fn round_trip_amount(a: Amount) {
    let again = Amount::parse(&a.to_string()).expect("an amount's text parses");
    assert_eq!(again, a);
    assert_eq!(again.as_decimal().scale(), a.as_decimal().scale());
}

fn round_trip_patch(contract: &Option<Contract>, rate_limit: Option<RateLimit>) {
    if let Some(c) = contract {
        let methods: Vec<Value> = c
            .methods
            .iter()
            .map(|t| {
                json!({
                    "method": t.method.as_str(),
                    "min_amount": t.min_amount.map(|d| d.to_string()),
                    "max_amount": t.max_amount.map(|d| d.to_string()),
                    "fee_percent": t.fee_percent.display().to_string(),
                })
            })
            .collect();
        let shown = json!({
            "currencies": c.currencies.iter().map(|c| c.as_str()).collect::<Vec<_>>(),
            "methods": methods,
        });
        match body::contract(&shown) {
            Ok(again) => assert_eq!(&again, c, "contract read back differently: {shown}"),
            Err(e) => panic!("a contract as shown is refused ({e}): {shown}"),
        }
    }
    if let Some(r) = rate_limit {
        let shown = json!({"per_second": r.per_second, "burst": r.burst});
        assert_eq!(body::rate_limit(&shown), Ok(r));
    }
}
