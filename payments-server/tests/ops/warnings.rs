//! The WARN lines an on-call engineer alerts on, read from a real `payments-server serve`'s
//! JSON log: an operator listener reachable from the network without TLS, and a callback event
//! that used every attempt (one line with what is needed to act on it).

use payments_client::{MerchantClient, SandboxCredentials};
use serde_json::{json, Value};

use crate::support::{
    eventually, serve_with, stop_and_read_log, wait_ready, Receiver, ServerProcess,
};

fn credentials(dir: &std::path::Path) -> SandboxCredentials {
    SandboxCredentials::from_file(dir.join("sandbox-credentials.json"))
        .expect("the bootstrap wrote the credentials")
}

fn warnings<'a>(lines: &'a [Value], starting: &str) -> Vec<&'a Value> {
    lines
        .iter()
        .filter(|l| {
            l["level"] == "WARN"
                && l["message"]
                    .as_str()
                    .is_some_and(|m| m.starts_with(starting))
        })
        .collect()
}

#[tokio::test]
async fn an_operator_listener_on_the_network_without_tls_is_warned_about() {
    let dir = tempfile::tempdir().unwrap();
    let (mut server, base, operator) =
        serve_with(dir.path(), "0.0.0.0", &["--log-format", "json"], &[]);
    wait_ready(&mut server, &base).await;
    // It serves (the operator decides), reachable through loopback too.
    let creds = credentials(dir.path());
    let answer = reqwest::Client::new()
        .get(format!("{operator}/operator/v1/audit?limit=1"))
        .bearer_auth(creds.operator_token.expose())
        .send()
        .await
        .unwrap();
    assert_eq!(answer.status().as_u16(), 200);
    let (log, lines) = stop_and_read_log(server).await;
    let warned = warnings(
        &lines,
        "the operator listener is bound to a non-loopback address without TLS",
    );
    assert_eq!(warned.len(), 1, "one warning at startup: {log}");
    let port = operator.rsplit(':').next().unwrap();
    assert_eq!(warned[0]["operator_listen"], format!("0.0.0.0:{port}"));
    assert!(
        warned[0]["message"]
            .as_str()
            .unwrap()
            .contains("operator_tls"),
        "it says what to set: {log}"
    );
}

#[tokio::test]
async fn a_callback_that_used_every_attempt_logs_one_warn_line_to_act_on() {
    let receiver = Receiver::start(500).await;
    let dir = tempfile::tempdir().unwrap();
    let (mut server, base, operator): (ServerProcess, String, String) = serve_with(
        dir.path(),
        "127.0.0.1",
        &["--log-format", "json"],
        &[("PAYMENTS_CALLBACKS__RETRY_DELAYS", "0,0")],
    );
    wait_ready(&mut server, &base).await;
    let creds = credentials(dir.path());
    let client = MerchantClient::new(&base, creds.token.expose(), creds.private_key_pem.expose())
        .expect("a client");
    let created = client
        .create_payment(&json!({
            "merchant_payment_id": "warn-1",
            "amount": "3400",
            "payment_method": "sbp",
            "callback_url": receiver.url,
        }))
        .await
        .expect("the create is answered");
    assert_eq!(created.status.as_u16(), 201, "{}", created.json);
    let id = created.json["id"].as_str().unwrap().to_string();
    let http = reqwest::Client::new();
    let confirmed = http
        .post(format!("{operator}/operator/v1/payments/{id}/confirm"))
        .bearer_auth(creds.operator_token.expose())
        .json(&json!({}))
        .send()
        .await
        .unwrap();
    assert_eq!(confirmed.status().as_u16(), 200);
    let event_id = confirmed.json::<Value>().await.unwrap()["event_id"]
        .as_str()
        .unwrap()
        .to_string();
    eventually(30, "the event to fail", || {
        let r = http
            .get(format!("{operator}/operator/v1/callbacks/failed"))
            .bearer_auth(creds.operator_token.expose())
            .send();
        async move {
            let list: Value = r.await.unwrap().json().await.unwrap();
            list["events"].as_array().is_some_and(|e| e.len() == 1)
        }
    })
    .await;
    assert_eq!(
        receiver.received().len(),
        3,
        "three attempts, all answered 500"
    );
    let (log, lines) = stop_and_read_log(server).await;
    let warned = warnings(&lines, "callback failed");
    assert_eq!(warned.len(), 1, "one line per failed event: {log}");
    let line = warned[0];
    assert_eq!(line["event_id"], event_id.as_str());
    assert_eq!(line["payment_id"], id.as_str());
    assert_eq!(line["project_id"], creds.project_id.as_str());
    assert_eq!(line["host"], "127.0.0.1");
    assert_eq!(line["attempts"], 3);
    assert_eq!(line["http_status"], 500);
    assert_eq!(line["last_error"], "http status 500");
}
