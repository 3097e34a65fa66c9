//! The file's `ErrorCode` enum is the catalogue, and each error response lists only codes
//! of its own status.

use std::collections::{BTreeMap, BTreeSet};

use payments_core::ErrorCode;
use serde_json::Value;

use crate::support::{deref, operations, spec};

/// The codes an error response's schema allows: the `code` enum or const of its `allOf`
/// refinement, or the whole catalogue for a plain `Error`.
fn response_codes(spec: &Value, schema: &Value) -> Vec<String> {
    let schema = deref(spec, schema);
    if let Some(parts) = schema.get("allOf").and_then(Value::as_array) {
        for part in parts {
            let part = deref(spec, part);
            let code = &part["properties"]["code"];
            if let Some(c) = code.get("const").and_then(Value::as_str) {
                return vec![c.to_string()];
            }
            if let Some(list) = code.get("enum").and_then(Value::as_array) {
                return list
                    .iter()
                    .map(|c| c.as_str().unwrap().to_string())
                    .collect();
            }
            if part.get("allOf").is_some() {
                let inner = response_codes(spec, part);
                if !inner.is_empty() {
                    return inner;
                }
            }
        }
    }
    Vec::new()
}

#[test]
fn error_codes_match_the_catalogue_and_their_statuses() {
    let spec = spec();
    let file: BTreeSet<String> = spec["components"]["schemas"]["ErrorCode"]["enum"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| c.as_str().unwrap().to_string())
        .collect();
    let code: BTreeSet<String> = ErrorCode::ALL
        .iter()
        .map(|c| c.as_str().to_string())
        .collect();
    assert_eq!(file, code, "ErrorCode enum of docs/openapi.yaml");
    let status_of: BTreeMap<&str, u16> = ErrorCode::ALL
        .iter()
        .map(|c| (c.as_str(), payments_http::error::status_of(*c).as_u16()))
        .collect();

    for ((method, path), op) in operations(&spec) {
        for (status, resp) in op["responses"].as_object().unwrap() {
            let status: u16 = status.parse().unwrap();
            if status < 400 {
                continue;
            }
            let resp = deref(&spec, resp);
            let schema = &resp["content"]["application/json"]["schema"];
            if path == "/readyz" {
                continue;
            }
            let codes = response_codes(&spec, schema);
            assert!(
                !codes.is_empty(),
                "{method} {path} {status}: the schema names no error code"
            );
            for c in codes {
                assert_eq!(
                    status_of.get(c.as_str()),
                    Some(&status),
                    "{method} {path}: code {c} documented under {status}"
                );
            }
        }
    }
}
