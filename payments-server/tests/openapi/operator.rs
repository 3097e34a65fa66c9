//! `docs/operator-openapi.yaml` against the operator router, in both directions, and against
//! real operator answers.

use std::collections::BTreeSet;

use payments_http::operator;
use payments_server::testing::TestServer;
use reqwest::Method;
use serde_json::{json, Value};

use crate::support::{deref, operations, operator_spec, validation_errors};

fn pairs(list: &[(&str, &str)]) -> BTreeSet<(String, String)> {
    list.iter()
        .map(|(m, p)| (m.to_string(), p.to_string()))
        .collect()
}

#[test]
fn every_operator_route_is_documented_and_every_documented_operation_is_routed() {
    let spec = operator_spec();
    assert_eq!(spec["openapi"], json!("3.1.0"));
    let documented: BTreeSet<(String, String)> = operations(&spec).into_keys().collect();
    let routed = pairs(&operator::route_list());
    let undocumented: Vec<_> = routed.difference(&documented).collect();
    let unrouted: Vec<_> = documented.difference(&routed).collect();
    assert!(
        undocumented.is_empty(),
        "routed but not in docs/operator-openapi.yaml: {undocumented:?}"
    );
    assert!(
        unrouted.is_empty(),
        "in docs/operator-openapi.yaml but not routed: {unrouted:?}"
    );

    // The operations without the operator token are exactly the public routes.
    assert_eq!(spec["security"], json!([{"operatorToken": []}]));
    let public: BTreeSet<(String, String)> = operations(&spec)
        .into_iter()
        .filter(|(_, op)| op.get("security") == Some(&json!([])))
        .map(|(k, _)| k)
        .collect();
    assert_eq!(public, pairs(operator::PUBLIC_ROUTES));

    // The merchant API's paths are not in the operator file.
    assert!(documented.iter().all(|(_, p)| !p.starts_with("/api/")));
}

/// Every `$ref` in `v`.
fn refs<'a>(v: &'a Value, out: &mut Vec<&'a str>) {
    match v {
        Value::Object(m) => {
            for (k, v) in m {
                match (k.as_str(), v.as_str()) {
                    ("$ref", Some(r)) => out.push(r),
                    _ => refs(v, out),
                }
            }
        }
        Value::Array(a) => a.iter().for_each(|v| refs(v, out)),
        _ => {}
    }
}

#[test]
fn every_reference_resolves_and_every_schema_compiles() {
    let spec = operator_spec();
    let mut found = Vec::new();
    refs(&spec, &mut found);
    assert!(!found.is_empty());
    for r in found {
        let pointer = r.strip_prefix('#').expect("only local references");
        assert!(spec.pointer(pointer).is_some(), "dangling reference {r}");
    }
    for (name, schema) in spec["components"]["schemas"].as_object().expect("schemas") {
        // Compiling is what validation_errors does first; a `null` instance only exercises it.
        let _ = validation_errors(&spec, schema, &Value::Null);
        let _ = name;
    }
}

/// Checks a real operator answer against the file.
fn check(spec: &Value, path: &str, method: &str, status: u16, body: &Value) {
    let op = &spec["paths"][path][method.to_lowercase()];
    assert!(op.is_object(), "{method} {path} is not documented");
    let resp = op["responses"]
        .get(status.to_string())
        .unwrap_or_else(|| panic!("{method} {path}: status {status} is not documented"));
    let resp = deref(spec, resp);
    let schema = &resp["content"]["application/json"]["schema"];
    if schema.is_object() {
        let errors = validation_errors(spec, schema, body);
        assert!(
            errors.is_empty(),
            "{method} {path} {status}: {errors:#?}\n{body}"
        );
    } else {
        assert_eq!(
            body,
            &Value::Null,
            "{method} {path} {status}: an undocumented body"
        );
    }
}

#[tokio::test]
async fn real_operator_answers_validate_against_the_file() {
    let server = TestServer::sandbox().await;
    let spec = operator_spec();
    let client = reqwest::Client::new();
    let call = |method: Method, path: String, body: Option<Value>| {
        let mut req = client
            .request(method, format!("{}{path}", server.operator_url))
            .bearer_auth(server.operator_token.expose());
        if let Some(b) = body {
            req = req.json(&b);
        }
        async move {
            let resp = req.send().await.expect("the operator API answers");
            let status = resp.status().as_u16();
            let bytes = resp.bytes().await.expect("body");
            let body = if bytes.is_empty() {
                Value::Null
            } else {
                serde_json::from_slice(&bytes).expect("JSON")
            };
            (status, body)
        }
    };

    let (s, merchant) = call(
        Method::POST,
        "/operator/v1/merchants".into(),
        Some(json!({"name": "Spec Shop"})),
    )
    .await;
    check(&spec, "/operator/v1/merchants", "POST", s, &merchant);
    assert_eq!(s, 201, "{merchant}");
    let merchant_id = merchant["id"].as_str().expect("id").to_owned();
    let (s, b) = call(Method::GET, "/operator/v1/merchants".into(), None).await;
    check(&spec, "/operator/v1/merchants", "GET", s, &b);
    let (s, b) = call(
        Method::PATCH,
        format!("/operator/v1/merchants/{merchant_id}"),
        Some(json!({"paused": false})),
    )
    .await;
    check(&spec, "/operator/v1/merchants/{id}", "PATCH", s, &b);

    let (s, project) = call(
        Method::POST,
        "/operator/v1/projects".into(),
        Some(json!({"merchant_id": merchant_id, "name": "Spec site"})),
    )
    .await;
    check(&spec, "/operator/v1/projects", "POST", s, &project);
    assert_eq!(s, 201, "{project}");
    let project_id = project["id"].as_str().expect("id").to_owned();
    let (s, b) = call(
        Method::GET,
        format!("/operator/v1/projects/{project_id}"),
        None,
    )
    .await;
    check(&spec, "/operator/v1/projects/{id}", "GET", s, &b);

    let (s, token) = call(
        Method::POST,
        format!("/operator/v1/projects/{project_id}/tokens"),
        Some(json!({"scopes": ["payments:read"], "name": " shop backend ", "expires_in_days": 90})),
    )
    .await;
    check(
        &spec,
        "/operator/v1/projects/{id}/tokens",
        "POST",
        s,
        &token,
    );
    assert_eq!(s, 201, "{token}");
    assert_eq!(token["name"], "shop backend", "trimmed: {token}");
    assert!(token["expires_at"].is_string(), "{token}");
    let (s, b) = call(
        Method::GET,
        format!("/operator/v1/projects/{project_id}/tokens"),
        None,
    )
    .await;
    check(&spec, "/operator/v1/projects/{id}/tokens", "GET", s, &b);
    let (s, b) = call(
        Method::DELETE,
        format!(
            "/operator/v1/projects/{project_id}/tokens/{}",
            token["id"].as_str().expect("id")
        ),
        None,
    )
    .await;
    check(
        &spec,
        "/operator/v1/projects/{id}/tokens/{token_id}",
        "DELETE",
        s,
        &b,
    );
    assert_eq!(s, 204);

    let (s, b) = call(
        Method::POST,
        format!("/operator/v1/projects/{project_id}/callback-secret"),
        None,
    )
    .await;
    check(
        &spec,
        "/operator/v1/projects/{id}/callback-secret",
        "POST",
        s,
        &b,
    );
    assert_eq!(s, 201, "{b}");

    let (s, user) = call(
        Method::POST,
        "/operator/v1/users".into(),
        Some(json!({"email": "Spec.User@Shop.example", "role": "merchant", "merchant_id": merchant_id})),
    )
    .await;
    check(&spec, "/operator/v1/users", "POST", s, &user);
    assert_eq!(s, 201, "{user}");
    assert_eq!(user["user"]["email"], "spec.user@shop.example");
    assert!(
        user["invite_url"]
            .as_str()
            .is_some_and(|u| u.starts_with(server.cabinet_url.as_deref().expect("a cabinet"))),
        "{user}"
    );
    let user_id = user["user"]["id"].as_str().expect("id").to_owned();
    let (s, b) = call(
        Method::POST,
        "/operator/v1/users".into(),
        Some(json!({"email": "x@shop.example", "role": "support", "merchant_id": merchant_id})),
    )
    .await;
    check(&spec, "/operator/v1/users", "POST", s, &b);
    assert_eq!(s, 400, "{b}");
    let (s, b) = call(Method::GET, "/operator/v1/users".into(), None).await;
    check(&spec, "/operator/v1/users", "GET", s, &b);
    let (s, b) = call(
        Method::POST,
        format!("/operator/v1/users/{user_id}/invite"),
        None,
    )
    .await;
    check(&spec, "/operator/v1/users/{id}/invite", "POST", s, &b);
    assert_eq!(s, 201, "{b}");
    let (s, b) = call(
        Method::PATCH,
        format!("/operator/v1/users/{user_id}"),
        Some(json!({"disabled": true})),
    )
    .await;
    check(&spec, "/operator/v1/users/{id}", "PATCH", s, &b);
    assert_eq!(b["disabled"], true, "{b}");

    // The ledger: a payout refused beyond the (empty) balance, an adjustment, the payout, its
    // retry, a conflicting one, refusals, the entries and the reconciliation.
    let ledger = |tail: &str| format!("/operator/v1/projects/{project_id}/{tail}");
    let payouts = "/operator/v1/projects/{id}/payouts";
    let (s, b) = call(Method::GET, ledger("balance"), None).await;
    check(&spec, "/operator/v1/projects/{id}/balance", "GET", s, &b);
    assert_eq!((s, &b["balance"]), (200, &json!("0.0000")), "{b}");
    let payout = json!({
        "amount": "125.5",
        "destination": "TANZBbGv9EdRS3PpbVWg2DVUoM4HVm57Bk",
        "reference": "0xEACF83AC6BCFCF7A0D626662D31480DCC38CF899993B4E94527AF81FE8F36C86",
    });
    let (s, b) = call(Method::POST, ledger("payouts"), Some(payout.clone())).await;
    check(&spec, payouts, "POST", s, &b);
    assert_eq!(
        (s, &b["code"]),
        (409, &json!("insufficient_balance")),
        "{b}"
    );
    let (s, b) = call(
        Method::POST,
        ledger("adjustments"),
        Some(json!({"amount": "200", "reason": "opening balance"})),
    )
    .await;
    check(
        &spec,
        "/operator/v1/projects/{id}/adjustments",
        "POST",
        s,
        &b,
    );
    assert_eq!((s, &b["balance_after"]), (201, &json!("200.0000")), "{b}");
    let (s, first) = call(Method::POST, ledger("payouts"), Some(payout.clone())).await;
    check(&spec, payouts, "POST", s, &first);
    assert_eq!(s, 201, "{first}");
    assert_eq!(
        (
            &first["amount"],
            &first["balance_after"],
            &first["reference"]
        ),
        (
            &json!("-125.5000"),
            &json!("74.5000"),
            &json!("eacf83ac6bcfcf7a0d626662d31480dcc38cf899993b4e94527af81fe8f36c86")
        ),
        "{first}"
    );
    let (s, b) = call(Method::POST, ledger("payouts"), Some(payout.clone())).await;
    check(&spec, payouts, "POST", s, &b);
    assert_eq!((s, &b["id"]), (200, &first["id"]), "{b}");
    let mut other = payout.clone();
    other["amount"] = json!("1");
    let (s, b) = call(Method::POST, ledger("payouts"), Some(other)).await;
    check(&spec, payouts, "POST", s, &b);
    assert_eq!(
        (s, &b["code"]),
        (409, &json!("payout_reference_conflict")),
        "{b}"
    );
    let mut typo = payout.clone();
    typo["destination"] = json!("TANZBbGv9EdRS3PpbVWg2DVUoM4HVm57Bj");
    let (s, b) = call(Method::POST, ledger("payouts"), Some(typo)).await;
    check(&spec, payouts, "POST", s, &b);
    assert_eq!(s, 400, "{b}");
    let (s, b) = call(
        Method::POST,
        "/operator/v1/projects/00000000-0000-4000-8000-000000000000/payouts".into(),
        Some(payout),
    )
    .await;
    check(&spec, payouts, "POST", s, &b);
    assert_eq!(s, 404, "{b}");
    let (s, b) = call(Method::GET, ledger("balance/entries?kind=payout"), None).await;
    check(
        &spec,
        "/operator/v1/projects/{id}/balance/entries",
        "GET",
        s,
        &b,
    );
    assert_eq!(b["data"].as_array().map(Vec::len), Some(1), "{b}");
    let (s, b) = call(Method::GET, ledger("balance/entries?kind=refund"), None).await;
    check(
        &spec,
        "/operator/v1/projects/{id}/balance/entries",
        "GET",
        s,
        &b,
    );
    assert_eq!(s, 400, "{b}");
    let (s, b) = call(
        Method::POST,
        "/operator/v1/ledger/reconcile".into(),
        Some(json!({"repair": false})),
    )
    .await;
    check(&spec, "/operator/v1/ledger/reconcile", "POST", s, &b);
    assert_eq!((s, &b["differences"]), (200, &json!([])), "{b}");

    let (s, b) = call(Method::GET, "/operator/v1/audit?limit=5".into(), None).await;
    check(&spec, "/operator/v1/audit", "GET", s, &b);
    assert_eq!(s, 200);

    // A payment as the operator sees it: the Payment resource and its route.
    let created = server
        .client()
        .create_payment(&json!({"merchant_payment_id": "spec-1", "amount": "1500",
                                "payment_method": "sbp"}))
        .await
        .expect("answered");
    assert_eq!(created.status.as_u16(), 201, "{}", created.json);
    let id = created.json["id"].as_str().expect("id");
    let (s, b) = call(Method::GET, format!("/operator/v1/payments/{id}"), None).await;
    check(&spec, "/operator/v1/payments/{id}", "GET", s, &b);
    assert_eq!((s, &b["id"]), (200, &created.json["id"]), "{b}");
    assert!(b.get("route").is_some(), "the route, null or not: {b}");

    // Errors: an unknown payment, a missing token.
    let unknown = "/operator/v1/payments/00000000-0000-4000-8000-000000000000";
    let (s, b) = call(Method::GET, unknown.into(), None).await;
    check(&spec, "/operator/v1/payments/{id}", "GET", s, &b);
    assert_eq!(s, 404);
    let resp = client
        .get(format!("{}/operator/v1/audit", server.operator_url))
        .send()
        .await
        .expect("answer");
    let s = resp.status().as_u16();
    let b: Value = resp.json().await.expect("JSON");
    check(&spec, "/operator/v1/audit", "GET", s, &b);
    assert_eq!(s, 401);
}

/// `GET /operator/v1/providers` with a provider, over SQLite: this node's report reaches the
/// store (written at start), and the answer shows under `nodes` this node's live values beside
/// another node's report planted in the store (stale), names a report that does not read, and
/// validates against the file.
#[tokio::test]
async fn the_providers_view_with_every_nodes_report_validates_against_the_file() {
    use payments_http::providers::{NodeReport, ProviderReport, REPORTS};
    use std::time::{Duration, Instant};

    let server = TestServer::start(|s| {
        s.node_name = Some("node-a".into());
        s.upstream.provider = payments_server::config::ProviderKind::Http;
        s.upstream.health_report_interval = Duration::from_millis(100);
        s.upstream.providers = vec![serde_json::from_value(json!({
            "name": "x",
            "url": "http://127.0.0.1:9/requisites",
            "secrets": ["whsec_cHJvdmlkZXItYS1zZWNyZXQtMDEyMzQ1Njc4OWFiY2Q"],
        }))
        .expect("a provider's settings")];
    })
    .await;
    let store = server.state.service.store().clone();
    let now = server.state.service.ports().clock.now();
    let deadline = Instant::now() + Duration::from_secs(10);
    let own = loop {
        if let Some(own) = REPORTS.get(&*store, &"node-a").await.expect("reads") {
            break own;
        }
        assert!(Instant::now() < deadline, "node-a never wrote its report");
        tokio::time::sleep(Duration::from_millis(20)).await;
    };
    assert_eq!(own.providers[0].name, "x");
    assert_eq!(own.providers[0].breaker, "closed");
    let other = NodeReport {
        node: "node-b".into(),
        written_at: now - Duration::from_secs(60),
        providers: vec![ProviderReport {
            name: "x".into(),
            breaker: "open".into(),
            open_until: Some(now + Duration::from_secs(30)),
            since: now - Duration::from_secs(61),
            failures_in_a_row: 5,
            issue_rate: 0.5,
            latency_ms: 40.0,
            last_failure: Some(payments_http::providers::FailureStatus {
                at: now - Duration::from_secs(61),
                cause: "unavailable: connection refused".into(),
            }),
        }],
    };
    REPORTS
        .set(&*store, &"node-b", &other)
        .await
        .expect("planted");
    payments_core::store::SettingStore::upsert_setting(&*store, "providers.health.node-c", "{")
        .await
        .expect("planted");

    let resp = reqwest::Client::new()
        .get(format!("{}/operator/v1/providers", server.operator_url))
        .bearer_auth(server.operator_token.expose())
        .send()
        .await
        .expect("answers");
    let status = resp.status().as_u16();
    let body: Value = resp.json().await.expect("JSON");
    check(
        &operator_spec(),
        "/operator/v1/providers",
        "GET",
        status,
        &body,
    );
    assert_eq!(status, 200, "{body}");
    assert_eq!(body["node"], "node-a", "{body}");
    let nodes = body["providers"][0]["nodes"].as_array().expect("nodes");
    let names: Vec<&str> = nodes.iter().map(|n| n["node"].as_str().unwrap()).collect();
    assert_eq!(names, ["node-a", "node-b"], "{body}");
    assert_eq!(
        (&nodes[0]["breaker"], &nodes[0]["stale"]),
        (&json!("closed"), &json!(false))
    );
    assert_eq!(
        (&nodes[1]["breaker"], &nodes[1]["stale"], &nodes[1]["age_s"]),
        (&json!("open"), &json!(true), &json!(60)),
        "{body}"
    );
    assert_eq!(
        nodes[1]["last_failure"]["cause"],
        "unavailable: connection refused"
    );
    assert!(
        body["reports_error"]
            .as_str()
            .is_some_and(|e| e.contains("node-c")),
        "{body}"
    );
    server.stop().await;
}
