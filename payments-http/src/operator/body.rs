//! Operator inputs: request bodies read strictly (an unknown or duplicate member is
//! `400 bad_request` naming it) and the settings both the operator API and the CLI parse
//! (contract, rate limit, scopes, amounts, re-check outcome).

use std::collections::HashSet;
use std::fmt;
use std::str::FromStr;
use std::time::Duration;

use payments_core::amount::Amount;
use payments_core::auth::Scope;
use payments_core::project::{Contract, RateLimit};
use payments_core::transition::{RecheckOutcome, Trigger};
use payments_core::ApiError;
use payments_directory::{contract_from_json, ProjectPatch};
use serde::de::{Deserialize, Deserializer, MapAccess, SeqAccess, Visitor};
use serde_json::{Map, Value};

/// A JSON object body whose members were checked against the allowed names.
#[derive(Debug)]
pub struct Body(Map<String, Value>);

fn bad(field: &str, why: impl fmt::Display) -> ApiError {
    ApiError::bad_request(format!("{field}: {why}"))
}

/// Refuses members of `object` not in `allowed`, naming the first one (`context` prefixes it,
/// e.g. `contract.`).
fn only(object: &Map<String, Value>, allowed: &[&str], context: &str) -> Result<(), ApiError> {
    match object.keys().find(|k| !allowed.contains(&k.as_str())) {
        Some(k) => Err(bad(&format!("{context}{k}"), "unknown field")),
        None => Ok(()),
    }
}

impl Body {
    /// Reads `bytes` as a JSON object (an empty body is `{}`) with members from `allowed` only.
    pub fn parse(bytes: &[u8], allowed: &[&str]) -> Result<Body, ApiError> {
        if bytes.iter().all(u8::is_ascii_whitespace) {
            return Ok(Body(Map::new()));
        }
        let v: Value = serde_json::from_slice(bytes)
            .map_err(|e| ApiError::bad_request(format!("body must be JSON: {e}")))?;
        let Value::Object(map) = v else {
            return Err(ApiError::bad_request("body must be a JSON object"));
        };
        // `Value` keeps the last of duplicate members silently; refuse them, as the create
        // body does, at any depth (a contract's method twice the same member).
        if let Ok(FirstDuplicate(Some(path))) = serde_json::from_slice(bytes) {
            return Err(bad(&path, "duplicate field"));
        }
        only(&map, allowed, "")?;
        Ok(Body(map))
    }

    /// A member, `null` counting as absent.
    pub fn get(&self, name: &str) -> Option<&Value> {
        self.0.get(name).filter(|v| !v.is_null())
    }

    /// Whether the member is present (also as `null`).
    pub fn has(&self, name: &str) -> bool {
        self.0.contains_key(name)
    }

    /// An optional string.
    pub fn string(&self, name: &str) -> Result<Option<String>, ApiError> {
        self.get(name)
            .map(|v| {
                v.as_str()
                    .map(str::to_owned)
                    .ok_or_else(|| bad(name, "must be a string"))
            })
            .transpose()
    }

    /// A required string.
    pub fn required_string(&self, name: &str) -> Result<String, ApiError> {
        self.string(name)?.ok_or_else(|| bad(name, "is required"))
    }

    /// A string that `null` clears: absent is `None`, `null` is `Some(None)`.
    pub fn nullable_string(&self, name: &str) -> Result<Option<Option<String>>, ApiError> {
        if !self.has(name) {
            return Ok(None);
        }
        Ok(Some(self.string(name)?))
    }

    /// An optional boolean.
    pub fn bool(&self, name: &str) -> Result<Option<bool>, ApiError> {
        self.get(name)
            .map(|v| {
                v.as_bool()
                    .ok_or_else(|| bad(name, "must be true or false"))
            })
            .transpose()
    }

    /// An optional non-negative integer.
    pub fn u64(&self, name: &str) -> Result<Option<u64>, ApiError> {
        self.get(name)
            .map(|v| {
                v.as_u64()
                    .ok_or_else(|| bad(name, "must be a non-negative integer"))
            })
            .transpose()
    }

    /// An optional array of strings.
    pub fn strings(&self, name: &str) -> Result<Option<Vec<String>>, ApiError> {
        self.get(name)
            .map(|v| {
                v.as_array()
                    .and_then(|a| {
                        a.iter()
                            .map(|s| s.as_str().map(str::to_owned))
                            .collect::<Option<Vec<_>>>()
                    })
                    .ok_or_else(|| bad(name, "must be an array of strings"))
            })
            .transpose()
    }

    /// An optional amount (JSON number or string).
    pub fn amount(&self, name: &str) -> Result<Option<Amount>, ApiError> {
        self.get(name)
            .map(|v| Amount::from_json(v).map_err(|e| bad(name, e)))
            .transpose()
    }
}

/// The path of the first member that appears twice in one object of a JSON document, e.g.
/// `contract.methods[0].fee_percent`, if any.
struct FirstDuplicate(Option<String>);

impl<'de> Deserialize<'de> for FirstDuplicate {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        d.deserialize_any(FirstDuplicateVisitor)
    }
}

struct FirstDuplicateVisitor;

/// `rest` (a member path, possibly empty) under `prefix`.
fn under(prefix: String, rest: Option<String>) -> String {
    match rest {
        None => prefix,
        Some(rest) if rest.starts_with('[') => prefix + &rest,
        Some(rest) => format!("{prefix}.{rest}"),
    }
}

impl<'de> Visitor<'de> for FirstDuplicateVisitor {
    type Value = FirstDuplicate;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("a JSON value")
    }

    fn visit_bool<E>(self, _: bool) -> Result<FirstDuplicate, E> {
        Ok(FirstDuplicate(None))
    }

    fn visit_i64<E>(self, _: i64) -> Result<FirstDuplicate, E> {
        Ok(FirstDuplicate(None))
    }

    fn visit_u64<E>(self, _: u64) -> Result<FirstDuplicate, E> {
        Ok(FirstDuplicate(None))
    }

    fn visit_f64<E>(self, _: f64) -> Result<FirstDuplicate, E> {
        Ok(FirstDuplicate(None))
    }

    fn visit_str<E>(self, _: &str) -> Result<FirstDuplicate, E> {
        Ok(FirstDuplicate(None))
    }

    fn visit_unit<E>(self) -> Result<FirstDuplicate, E> {
        Ok(FirstDuplicate(None))
    }

    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<FirstDuplicate, A::Error> {
        let mut found = None;
        let mut i = 0usize;
        while let Some(FirstDuplicate(inner)) = seq.next_element()? {
            if found.is_none() && inner.is_some() {
                found = Some(under(format!("[{i}]"), inner));
            }
            i += 1;
        }
        Ok(FirstDuplicate(found))
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<FirstDuplicate, A::Error> {
        // With `arbitrary_precision` a number is a map with one private member: never a
        // duplicate.
        let mut seen = HashSet::new();
        let mut found = None;
        while let Some(key) = map.next_key::<String>()? {
            let FirstDuplicate(inner) = map.next_value()?;
            if found.is_none() {
                if seen.contains(&key) {
                    found = Some(key.clone());
                } else if inner.is_some() {
                    found = Some(under(key.clone(), inner));
                }
            }
            seen.insert(key);
        }
        Ok(FirstDuplicate(found))
    }
}

/// The project settings of a create or patch body: `name`, `active`, `test_mode`,
/// `lifetime_seconds`, `contract`, `callback_url` (`null` clears), `ip_allow_list`,
/// `signature_required`, `rate_limit`, `paused`, `payer_page`, `payer_language` (`ru`, `en`),
/// `return_url` (https only; `null` clears).
pub fn project_patch(body: &Body) -> Result<ProjectPatch, ApiError> {
    Ok(ProjectPatch {
        name: body.string("name")?,
        active: body.bool("active")?,
        test_mode: body.bool("test_mode")?,
        lifetime: body.u64("lifetime_seconds")?.map(Duration::from_secs),
        contract: body.get("contract").map(contract).transpose()?,
        callback_url: body.nullable_string("callback_url")?,
        ip_allow_list: if body.has("ip_allow_list") {
            // `null` clears like `[]`.
            Some(body.strings("ip_allow_list")?.unwrap_or_default())
        } else {
            None
        },
        signature_required: body.bool("signature_required")?,
        paused: body.bool("paused")?,
        rate_limit: body.get("rate_limit").map(rate_limit).transpose()?,
        payer_page: body.bool("payer_page")?,
        return_url: body.nullable_string("return_url")?,
        payer_language: body
            .string("payer_language")?
            .map(|l| l.parse())
            .transpose()?,
    })
}

/// A contract in the operator form
/// `{"currencies": ["RUB"], "methods": [{"method", "min_amount", "max_amount", "fee_percent"}]}`,
/// with unknown members refused and `fee_percent` required (a forgotten fee must not mean 0 %).
pub fn contract(v: &Value) -> Result<Contract, ApiError> {
    let object = v
        .as_object()
        .ok_or_else(|| bad("contract", "must be an object"))?;
    only(object, &["currencies", "methods"], "contract.")?;
    if let Some(methods) = object.get("methods").and_then(Value::as_array) {
        for (i, m) in methods.iter().enumerate() {
            let at = format!("contract.methods[{i}]");
            let m = m.as_object().ok_or_else(|| bad(&at, "must be an object"))?;
            only(
                m,
                &["method", "min_amount", "max_amount", "fee_percent"],
                &format!("{at}."),
            )?;
            if m.get("fee_percent").is_none_or(Value::is_null) {
                return Err(bad(&format!("{at}.fee_percent"), "is required"));
            }
        }
    }
    contract_from_json(v).map_err(ApiError::from)
}

/// A rate limit `{"per_second": N, "burst": M}`.
pub fn rate_limit(v: &Value) -> Result<RateLimit, ApiError> {
    let object = v
        .as_object()
        .ok_or_else(|| bad("rate_limit", "must be an object"))?;
    only(object, &["per_second", "burst"], "rate_limit.")?;
    let field = |name: &str| -> Result<u32, ApiError> {
        object
            .get(name)
            .and_then(Value::as_u64)
            .and_then(|n| u32::try_from(n).ok())
            .ok_or_else(|| bad(&format!("rate_limit.{name}"), "must be a positive integer"))
    };
    Ok(RateLimit {
        per_second: field("per_second")?,
        burst: field("burst")?,
    })
}

/// Scopes by name (`payments:create`, `payments:read`, `payments:test`).
pub fn scopes<S: AsRef<str>>(names: &[S]) -> Result<Vec<Scope>, ApiError> {
    names
        .iter()
        .map(|s| Scope::from_str(s.as_ref().trim()).map_err(|e| bad("scopes", e)))
        .collect()
}

/// The re-check result trigger: `completed` (optionally with an amount), `canceled` or
/// `unchanged`.
pub fn resolve_trigger(status: &str, amount: Option<Amount>) -> Result<Trigger, ApiError> {
    let outcome = match status {
        "completed" => RecheckOutcome::Completed { amount },
        "canceled" | "unchanged" if amount.is_some() => {
            return Err(bad("amount", "only with status completed"))
        }
        "canceled" => RecheckOutcome::Canceled,
        "unchanged" => RecheckOutcome::Unchanged,
        _ => {
            return Err(bad(
                "status",
                "must be \"completed\", \"canceled\" or \"unchanged\"",
            ))
        }
    };
    Ok(Trigger::ResolveRecheck(outcome))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn refusal(body: &str, allowed: &[&str]) -> String {
        match Body::parse(body.as_bytes(), allowed) {
            Ok(b) => panic!("{body} accepted as {b:?}"),
            Err(e) => e.message,
        }
    }

    #[test]
    fn duplicate_members_are_refused_at_any_depth() {
        let fields = ["amount", "contract"];
        assert_eq!(
            refusal(r#"{"amount": "1", "amount": "1000"}"#, &fields),
            "amount: duplicate field"
        );
        assert_eq!(
            refusal(
                r#"{"contract": {"methods": [{"method": "sbp"}, {"fee_percent": 1, "fee_percent": 0}]}}"#,
                &fields
            ),
            "contract.methods[1].fee_percent: duplicate field"
        );
        assert_eq!(
            refusal(r#"{"contract": [[{"a": 1, "a": 1}]]}"#, &fields),
            "contract[0][0].a: duplicate field"
        );
        // Numbers (kept exactly with `arbitrary_precision`), equal values and equal names in
        // different objects are fine.
        let ok = r#"{"amount": 1.50, "contract": {"methods": [{"a": 1}, {"a": 1e400}], "x": {"a": null}}}"#;
        let body = Body::parse(ok.as_bytes(), &fields).expect("no duplicate");
        assert_eq!(
            body.get("amount").map(ToString::to_string).as_deref(),
            Some("1.50")
        );
    }
}
