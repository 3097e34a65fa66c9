//! Operator authentication, and the audit trail of operator actions.

use serde_json::{json, Value};

use crate::common::TestApp;
use crate::support::provision;

#[tokio::test]
async fn operator_api_needs_the_operator_token() {
    let app = TestApp::sandbox().await;
    for token in [
        None,
        Some("op_wrong"),
        Some(app.creds().token.expose().as_str()),
    ] {
        let a = app
            .op_as(token, "GET", "/operator/v1/merchants", None)
            .await;
        assert_eq!(a.status, 401, "{token:?}: {}", a.text);
        assert_eq!(a.code(), "token_invalid");
        let a = app
            .op_as(
                token,
                "POST",
                "/operator/v1/merchants",
                Some(json!({"name": "x"})),
            )
            .await;
        assert_eq!(a.status, 401);
    }
    // Nothing was created by the refused requests.
    let list = app.op("GET", "/operator/v1/merchants", None).await;
    assert_eq!(list.status, 200);
    assert_eq!(list.body["merchants"].as_array().unwrap().len(), 1);
}

#[tokio::test]
async fn audit_records_every_operator_action_newest_first() {
    let app = TestApp::sandbox().await;
    let p = provision(&app).await;
    app.op(
        "DELETE",
        &format!(
            "/operator/v1/projects/{}/tokens/{}",
            p.project_id, p.token_id
        ),
        None,
    )
    .await;
    let a = app.op("GET", "/operator/v1/audit?limit=5", None).await;
    assert_eq!(a.status, 200, "{}", a.text);
    let records = a.body["records"].as_array().unwrap();
    let actions: Vec<&str> = records
        .iter()
        .map(|r| r["action"].as_str().unwrap())
        .collect();
    assert_eq!(
        actions,
        [
            "token.revoke",
            "key.register",
            "token.issue",
            "project.create",
            "merchant.create"
        ]
    );
    // The actor names the operator role; no part of the operator token is recorded.
    assert!(records.iter().all(|r| r["actor"] == "operator:default"));
    let secret_part: String = app.operator_token.chars().skip(3).take(6).collect();
    assert!(!records.iter().any(|r| r.to_string().contains(&secret_part)));
    assert_eq!(records[0]["target"], p.token_id.as_str());
    assert_eq!(records[0]["before"]["revoked_at"], Value::Null);
    assert!(records[0]["after"]["revoked_at"].is_string());
    assert_eq!(records[3]["target"], p.project_id.as_str());
    assert_eq!(records[3]["after"]["name"], "Shop site");
    let bad = app.op("GET", "/operator/v1/audit?limit=0", None).await;
    assert_eq!(bad.status, 400);
    let unknown = app.op("GET", "/operator/v1/audit?since=1", None).await;
    assert_eq!(unknown.status, 400);
}

#[tokio::test]
async fn operator_requests_have_the_merchant_api_form() {
    let app = TestApp::sandbox().await;
    let url = format!("{}/operator/v1/merchants", app.operator_url);
    let post = |content_type: Option<&str>, authorization: &[String]| {
        let mut req = app.client.post(&url).body(r#"{"name": "Form"}"#);
        if let Some(ct) = content_type {
            req = req.header("content-type", ct);
        }
        for a in authorization {
            req = req.header("authorization", a);
        }
        async move {
            let resp = req.send().await.expect("the operator API answers");
            let status = resp.status().as_u16();
            let body: Value = resp.json().await.unwrap_or(Value::Null);
            (status, body["code"].as_str().unwrap_or("").to_string())
        }
    };
    let bearer = format!("Bearer {}", app.operator_token);
    let one = [bearer.clone()];
    for ct in [
        None,
        Some("text/plain"),
        Some("application/json; charset=latin1"),
    ] {
        assert_eq!(
            post(ct, &one).await,
            (415, "unsupported_media_type".into()),
            "{ct:?}"
        );
    }
    assert_eq!(
        post(
            Some("application/json"),
            &[bearer.clone(), "Bearer op_other".into()]
        )
        .await,
        (400, "bad_request".into()),
        "two Authorization headers"
    );
    // The scheme in any case, a JSON body with its charset.
    let upper = [format!("BEARER {}", app.operator_token)];
    assert_eq!(
        post(Some("Application/JSON; charset=UTF-8"), &upper)
            .await
            .0,
        201
    );
    // A request without a body needs no Content-Type.
    let list = app.op("GET", "/operator/v1/merchants", None).await;
    assert_eq!(list.status, 200);
}
