//! The log of a real `payments-server serve` (JSON lines): the startup line, and one access
//! line per request, refusals included, found by the client's `X-Request-ID`, with plain
//! values (no `Some(...)`).

use serde_json::Value;

use crate::support::{serve_with, stop_and_read_log, wait_ready};

#[tokio::test]
async fn every_request_has_an_access_line_found_by_its_request_id() {
    let dir = tempfile::tempdir().unwrap();
    // Loopback is a trusted proxy here: a request that says it was forwarded for another
    // address is logged with that address; one without the header with its peer.
    let (mut server, base, operator) = serve_with(
        dir.path(),
        "127.0.0.1",
        &["--log-format", "json"],
        &[("PAYMENTS_LISTEN__TRUSTED_PROXIES", "127.0.0.1/32")],
    );
    wait_ready(&mut server, &base).await;
    let client = reqwest::Client::new();
    let answer = client
        .get(format!(
            "{base}/api/v1/payments/3f1c2d4e-0000-4000-8000-000000000001"
        ))
        .header("x-request-id", "trace-me-401")
        .send()
        .await
        .unwrap();
    assert_eq!(answer.status().as_u16(), 401);
    let answer = client
        .get(format!("{base}/no/such/route"))
        .header("x-request-id", "trace-me-404")
        .send()
        .await
        .unwrap();
    assert_eq!(answer.status().as_u16(), 404);
    let answer = client
        .get(format!("{base}/no/such/route"))
        .header("x-request-id", "trace-me-forwarded")
        .header("x-forwarded-for", "203.0.113.9, 127.0.0.1")
        .send()
        .await
        .unwrap();
    assert_eq!(answer.status().as_u16(), 404);
    let creds: Value = serde_json::from_str(
        &std::fs::read_to_string(dir.path().join("sandbox-credentials.json")).unwrap(),
    )
    .unwrap();
    let answer = client
        .get(format!("{operator}/operator/v1/audit?limit=1"))
        .bearer_auth(creds["operator_token"].as_str().unwrap())
        .header("x-request-id", "trace-me-op")
        .send()
        .await
        .unwrap();
    assert_eq!(answer.status().as_u16(), 200);
    // A signed create: its support line carries the request id at the top level too.
    let merchant = payments_client::MerchantClient::from_credentials(
        &payments_client::SandboxCredentials::from_file(
            dir.path().join("sandbox-credentials.json"),
        )
        .unwrap(),
    )
    .unwrap();
    let created = merchant
        .create_payment(&serde_json::json!({
            "merchant_payment_id": "log-1", "amount": "100", "payment_method": "sbp"
        }))
        .await
        .unwrap();
    assert_eq!(created.status.as_u16(), 201, "{}", created.json);
    let create_rid = created.headers["x-request-id"]
        .to_str()
        .unwrap()
        .to_string();
    let (log, lines) = stop_and_read_log(server).await;
    assert!(
        !log.contains("Some("),
        "values, not Option debug forms: {log}"
    );

    let started = lines
        .iter()
        .find(|l| l["message"] == "payments-server started")
        .unwrap_or_else(|| panic!("a startup line: {log}"));
    assert_eq!(started["version"], env!("CARGO_PKG_VERSION"));
    assert_eq!(
        started["schema_version"],
        payments_store_sqlite::SCHEMA_VERSION.to_string()
    );
    assert_eq!(started["environment"], "sandbox");
    assert_eq!(started["data_dir"], dir.path().display().to_string());
    assert_eq!(
        format!("http://{}", started["merchant_listen"].as_str().unwrap()),
        base
    );
    assert_eq!(
        format!("http://{}", started["operator_listen"].as_str().unwrap()),
        operator
    );
    assert_eq!(started["callback_dispatch"], "on");
    assert!(
        !log.contains("non-loopback"),
        "no transport warning for a loopback operator listener: {log}"
    );

    let access = |rid: &str| {
        lines
            .iter()
            .find(|l| l["target"] == "payments_http::access" && l["request_id"] == rid)
            .unwrap_or_else(|| panic!("an access line for {rid}: {log}"))
            .clone()
    };
    let refused = access("trace-me-401");
    assert_eq!(refused["level"], "INFO");
    assert_eq!(refused["method"], "GET");
    assert_eq!(refused["route"], "/api/v1/payments/{id}");
    assert_eq!(refused["status"], 401);
    assert_eq!(refused["code"], "token_invalid");
    assert_eq!(refused["project"], "-");
    assert!(refused["latency_ms"].as_f64().is_some());
    assert_eq!(refused["client"], "127.0.0.1", "the peer");
    assert_eq!(
        access("trace-me-forwarded")["client"],
        "203.0.113.9",
        "the address the trusted proxy forwarded"
    );
    let unknown = access("trace-me-404");
    assert_eq!(unknown["route"], "unmatched");
    assert_eq!(unknown["code"], "not_found");
    let op = access("trace-me-op");
    assert_eq!(op["status"], 200);
    assert_eq!(op["code"], "-");
    assert_eq!(op["operator"], "operator:default");
    assert_eq!(op["client"], "127.0.0.1");
    let answered = lines
        .iter()
        .find(|l| l["message"] == "payment create answered")
        .unwrap_or_else(|| panic!("the create's support line: {log}"));
    assert_eq!(answered["request_id"], create_rid.as_str(), "{answered}");
    assert_eq!(answered["payment_id"], created.json["id"], "{answered}");
    assert!(answered["project_id"].is_string(), "{answered}");
    assert_eq!(op["route"], "/operator/v1/audit");
}
