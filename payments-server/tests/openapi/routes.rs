//! Every route of the merchant router is an operation of the file and the reverse; the
//! sandbox-only operations are exactly `merchant::SANDBOX_ROUTES`.

use std::collections::BTreeSet;

use payments_core::auth::Environment;
use payments_http::merchant;
use serde_json::json;

use crate::support::{operations, spec};

#[test]
fn every_route_is_documented_and_every_documented_operation_is_routed() {
    let spec = spec();
    let documented: BTreeSet<(String, String)> = operations(&spec).into_keys().collect();
    let routed: BTreeSet<(String, String)> = merchant::route_list(Environment::Sandbox)
        .into_iter()
        .map(|(m, p)| (m.to_string(), p.to_string()))
        .collect();
    let undocumented: Vec<_> = routed.difference(&documented).collect();
    let unrouted: Vec<_> = documented.difference(&routed).collect();
    assert!(
        undocumented.is_empty(),
        "routed but not in docs/openapi.yaml: {undocumented:?}"
    );
    assert!(
        unrouted.is_empty(),
        "in docs/openapi.yaml but not routed: {unrouted:?}"
    );

    let sandbox_only: BTreeSet<(String, String)> = operations(&spec)
        .into_iter()
        .filter(|(_, op)| op["x-sandbox-only"] == json!(true))
        .map(|(k, _)| k)
        .collect();
    let expected: BTreeSet<(String, String)> = merchant::SANDBOX_ROUTES
        .iter()
        .map(|(m, p)| (m.to_string(), p.to_string()))
        .collect();
    assert_eq!(sandbox_only, expected, "x-sandbox-only marks");
    assert!(merchant::route_list(Environment::Production)
        .iter()
        .all(|r| !merchant::SANDBOX_ROUTES.contains(r)));
}
