//! Named operator tokens from the CLI: issued, listed, rotated with an overlap, revoked; the
//! audit names the token that acted.

use payments_server::testing::TestServer;
use serde_json::json;

use crate::support::{cli, cli_json, op_with};

#[tokio::test]
async fn named_tokens_are_issued_listed_rotated_and_revoked() {
    let s = TestServer::sandbox().await;
    let dir = s.dir.path().to_path_buf();
    let alice = cli_json(&dir, &["operator-token", "issue", "--name", "alice"]);
    let token = alice["token"].as_str().unwrap().to_string();
    assert!(token.starts_with("op_"));
    assert_eq!(alice["name"], "alice");
    assert_eq!(alice["valid"], true);

    // Alice acts; the audit says so.
    let (status, _) = op_with(
        &s,
        &token,
        "PUT",
        "/operator/v1/callbacks/hold",
        Some(json!({"reason": "receiver maintenance"})),
    )
    .await;
    assert_eq!(status, 200);
    let (_, audit) = op_with(&s, &token, "GET", "/operator/v1/audit?limit=1", None).await;
    assert_eq!(audit["records"][0]["actor"], "operator:alice");
    assert_eq!(audit["records"][0]["action"], "callbacks.hold");

    // A second token for alice is refused; a rotation keeps the old one for the overlap.
    let (ok, _, err) = cli(&dir, &["operator-token", "issue", "--name", "alice"]);
    assert!(!ok);
    assert!(err.contains("rotate"), "{err}");
    let rotated = cli_json(
        &dir,
        &["operator-token", "rotate", "alice", "--overlap-hours", "1"],
    );
    let new_token = rotated["token"].as_str().unwrap().to_string();
    for t in [&token, &new_token] {
        let (status, _) = op_with(&s, t, "GET", "/operator/v1/callbacks/hold", None).await;
        assert_eq!(status, 200, "both work during the overlap");
    }
    let listed = cli_json(&dir, &["operator-token", "list"]);
    let names: Vec<&str> = listed["tokens"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t["name"].as_str().unwrap())
        .collect();
    assert_eq!(names, vec!["default", "alice", "alice"]);
    assert!(
        !listed.to_string().contains(&token[3..]),
        "a listing never shows a token"
    );

    let revoked = cli_json(&dir, &["operator-token", "revoke", "alice"]);
    assert_eq!(revoked["revoked"].as_array().unwrap().len(), 2);
    for t in [&token, &new_token] {
        let (status, body) = op_with(&s, t, "GET", "/operator/v1/callbacks/hold", None).await;
        assert_eq!(status, 401);
        assert_eq!(body["code"], "token_invalid");
    }
    let (_, audit) = op_with(
        &s,
        s.operator_token.expose(),
        "GET",
        "/operator/v1/audit?limit=10",
        None,
    )
    .await;
    let actions: Vec<(String, String)> = audit["records"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| {
            (
                r["action"].as_str().unwrap().to_string(),
                r["actor"].as_str().unwrap().to_string(),
            )
        })
        .collect();
    assert!(actions.contains(&("operator_token.revoke".into(), "cli:oncall".into())));
    assert!(actions.contains(&("operator_token.rotate".into(), "cli:oncall".into())));
    s.stop().await;
}
