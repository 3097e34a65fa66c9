//! Reading `docs/openapi.yaml` and `docs/operator-openapi.yaml`: the file, local references, schema validators and its
//! operations.

use std::collections::BTreeMap;

use serde_json::{json, Value};

const METHODS: [&str; 8] = [
    "get", "put", "post", "delete", "options", "head", "patch", "trace",
];

pub(crate) fn spec() -> Value {
    spec_file("openapi.yaml")
}

/// `docs/operator-openapi.yaml`.
pub(crate) fn operator_spec() -> Value {
    spec_file("operator-openapi.yaml")
}

fn spec_file(name: &str) -> Value {
    let path = format!("{}/../docs/{name}", env!("CARGO_MANIFEST_DIR"));
    let text = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("docs/{name}: {e}"));
    serde_norway::from_str(&text).unwrap_or_else(|e| panic!("docs/{name} is not valid YAML: {e}"))
}

/// Follows a local `$ref` (`#/components/...`) once, if `v` is one.
pub(crate) fn deref<'a>(spec: &'a Value, v: &'a Value) -> &'a Value {
    match v.get("$ref").and_then(Value::as_str) {
        Some(r) => {
            let pointer = r.strip_prefix('#').expect("only local references");
            spec.pointer(pointer)
                .unwrap_or_else(|| panic!("dangling reference {r}"))
        }
        None => v,
    }
}

/// A validator for `schema` whose `#/components/...` references resolve against the file.
fn validator(spec: &Value, schema: &Value) -> jsonschema::Validator {
    let root = json!({ "components": spec["components"], "allOf": [schema] });
    jsonschema::options()
        .with_draft(jsonschema::Draft::Draft202012)
        .build(&root)
        .unwrap_or_else(|e| panic!("schema does not compile: {e}\n{schema}"))
}

pub(crate) fn validation_errors(spec: &Value, schema: &Value, instance: &Value) -> Vec<String> {
    validator(spec, schema)
        .iter_errors(instance)
        .map(|e| format!("{} at {}", e, e.instance_path()))
        .collect()
}

/// Every operation of the file as `(METHOD, path) -> operation`.
pub(crate) fn operations(spec: &Value) -> BTreeMap<(String, String), &Value> {
    let mut ops = BTreeMap::new();
    for (path, item) in spec["paths"].as_object().expect("paths is an object") {
        for method in METHODS {
            if let Some(op) = item.get(method) {
                ops.insert((method.to_uppercase(), path.clone()), op);
            }
        }
    }
    ops
}
