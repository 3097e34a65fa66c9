//! Tokens, keys, the allow-list and callback secrets: each shown once where it is secret,
//! and each change effective on the next request.

use base64::engine::general_purpose::STANDARD;
use base64::Engine as _;
use serde_json::{json, Value};

use crate::common::{Signer, TestApp};
use crate::support::provision;

#[tokio::test]
async fn token_issue_list_revoke_shown_once_and_revocation_is_immediate() {
    let app = TestApp::sandbox().await;
    let p = provision(&app).await;
    let tokens = format!("/operator/v1/projects/{}/tokens", p.project_id);
    assert!(p.token.starts_with("nl_test_"));

    let listed = app.op("GET", &tokens, None).await;
    assert_eq!(listed.status, 200);
    let list = listed.body["tokens"].as_array().unwrap();
    assert_eq!(list.len(), 1);
    assert_eq!(list[0]["id"], p.token_id.as_str());
    assert_eq!(
        list[0]["scopes"],
        json!(["payments:create", "payments:read"])
    );
    assert_eq!(list[0]["revoked_at"], Value::Null);
    assert!(p
        .token
        .starts_with(list[0]["token_prefix"].as_str().unwrap()));
    assert!(list[0].get("token").is_none());
    // Shown once: no answer of the operator API carries the token again.
    for path in [
        tokens.clone(),
        format!("/operator/v1/projects/{}", p.project_id),
        "/operator/v1/audit?limit=100".to_string(),
    ] {
        let a = app.op("GET", &path, None).await;
        assert_eq!(a.status, 200);
        assert!(!a.text.contains(&p.token), "{path} shows the token");
    }
    let single = app
        .op("GET", &format!("{tokens}/{}", p.token_id), None)
        .await;
    assert!(!single.text.contains(&p.token));
    assert!(single.status == 404 || single.status == 405);

    let before = app
        .merchant("GET", "/api/v1/project", &p.token, None, b"")
        .await;
    assert_eq!(before.status, 200, "{}", before.text);
    let revoked = app
        .op("DELETE", &format!("{tokens}/{}", p.token_id), None)
        .await;
    assert_eq!(revoked.status, 204, "{}", revoked.text);
    let after = app
        .merchant("GET", "/api/v1/project", &p.token, None, b"")
        .await;
    assert_eq!(after.status, 401);
    assert_eq!(after.code(), "token_invalid");
    let create = app.create_payment(&p.token, &p.signer, "500").await;
    assert_eq!(create.status, 401);
    assert_eq!(create.code(), "token_invalid");
    let listed = app.op("GET", &tokens, None).await;
    assert!(listed.body["tokens"][0]["revoked_at"].is_string());

    let unknown = app
        .op(
            "DELETE",
            &format!("{tokens}/00000000-0000-4000-8000-000000000000"),
            None,
        )
        .await;
    assert_eq!(unknown.status, 404);
    assert_eq!(unknown.code(), "not_found");
    let bad_scope = app
        .op(
            "POST",
            &tokens,
            Some(json!({"scopes": ["payments:delete"]})),
        )
        .await;
    assert_eq!(bad_scope.status, 400);
    assert!(bad_scope.message().contains("scopes"));
    let no_scope = app.op("POST", &tokens, Some(json!({"scopes": []}))).await;
    assert_eq!(no_scope.status, 400);
}

#[tokio::test]
async fn key_register_list_revoke_and_revocation_is_immediate() {
    let app = TestApp::sandbox().await;
    let p = provision(&app).await;
    let keys = format!("/operator/v1/projects/{}/keys", p.project_id);

    // A second key as raw base64: with an expected_keyid that is not its own, refused and
    // not stored; without one (API v1) or with its own, registered.
    let second = Signer::generate();
    let raw = STANDARD.encode(second.key.verifying_key().to_bytes());
    let wrong = json!({"public_key": raw, "expected_keyid": "ed25519-not-this-one"});
    let refused = app.op("POST", &keys, Some(wrong)).await;
    assert_eq!(refused.status, 400, "{}", refused.text);
    assert!(
        refused.message().starts_with("expected_keyid: ")
            && refused.message().contains(second.keyid.as_str()),
        "{}",
        refused.text
    );
    let confirmed = json!({"public_key": raw, "expected_keyid": second.keyid.as_str()});
    let reg = app.op("POST", &keys, Some(confirmed)).await;
    assert_eq!(reg.status, 201, "{}", reg.text);
    assert_eq!(reg.body["keyid"], second.keyid.as_str());
    assert_eq!(reg.body["public_key"], raw.as_str());
    let again = app
        .op("POST", &keys, Some(json!({"public_key": raw})))
        .await;
    assert_eq!(again.status, 400, "{}", again.text);
    let garbage = app
        .op("POST", &keys, Some(json!({"public_key": "bm90IGEga2V5"})))
        .await;
    assert_eq!(garbage.status, 400);
    assert!(garbage.message().contains("public_key"));

    let listed = app.op("GET", &keys, None).await;
    let ids: Vec<&str> = listed.body["keys"]
        .as_array()
        .unwrap()
        .iter()
        .map(|k| k["keyid"].as_str().unwrap())
        .collect();
    assert_eq!(ids, [p.signer.keyid.as_str(), second.keyid.as_str()]);

    assert_eq!(
        app.create_payment(&p.token, &p.signer, "500").await.status,
        201
    );
    let revoked = app
        .op("DELETE", &format!("{keys}/{}", p.signer.keyid), None)
        .await;
    assert_eq!(revoked.status, 204, "{}", revoked.text);
    let refused = app.create_payment(&p.token, &p.signer, "500").await;
    assert_eq!(refused.status, 401, "{}", refused.text);
    assert_eq!(refused.code(), "signature_invalid");
    assert!(
        refused.message().contains("unknown keyid"),
        "{}",
        refused.text
    );
    // The other key still signs.
    assert_eq!(
        app.create_payment(&p.token, &second, "500").await.status,
        201
    );
    let unknown = app
        .op("DELETE", &format!("{keys}/ed25519-nothing"), None)
        .await;
    assert_eq!(unknown.status, 404);
}

#[tokio::test]
async fn allow_list_applies_to_the_next_request() {
    let app = TestApp::sandbox().await;
    let (token, signer) = app.demo();
    let path = format!("/operator/v1/projects/{}", app.creds().project_id);

    let set = app
        .op(
            "PATCH",
            &path,
            Some(json!({"ip_allow_list": ["10.0.0.0/8"]})),
        )
        .await;
    assert_eq!(set.status, 200, "{}", set.text);
    let refused = app.create_payment(&token, &signer, "500").await;
    assert_eq!(refused.status, 403, "{}", refused.text);
    assert_eq!(refused.code(), "ip_not_allowed");
    let read = app
        .merchant("GET", "/api/v1/project", &token, None, b"")
        .await;
    assert_eq!(read.status, 403);

    app.op(
        "PATCH",
        &path,
        Some(json!({"ip_allow_list": ["127.0.0.1"]})),
    )
    .await;
    assert_eq!(app.create_payment(&token, &signer, "500").await.status, 201);

    app.op(
        "PATCH",
        &path,
        Some(json!({"ip_allow_list": ["192.0.2.1"]})),
    )
    .await;
    assert_eq!(app.create_payment(&token, &signer, "500").await.status, 403);
    app.op("PATCH", &path, Some(json!({"ip_allow_list": null})))
        .await;
    assert_eq!(app.create_payment(&token, &signer, "500").await.status, 201);
}

#[tokio::test]
async fn callback_secret_rotation_shows_the_secret_once_and_keeps_two() {
    let app = TestApp::sandbox().await;
    let project = app.creds().project_id.clone();
    let path = format!("/operator/v1/projects/{project}/callback-secret");
    let first = app.op("POST", &path, None).await;
    assert_eq!(first.status, 201, "{}", first.text);
    let s1 = first.body["callback_secret"].as_str().unwrap().to_string();
    assert!(s1.starts_with("whsec_"));
    assert_ne!(&s1, app.creds().callback_secret.expose());
    let second = app.op("POST", &path, Some(json!({}))).await;
    let s2 = second.body["callback_secret"].as_str().unwrap().to_string();
    assert_ne!(s1, s2);
    let audit = app.op("GET", "/operator/v1/audit?limit=1", None).await;
    let record = &audit.body["records"][0];
    assert_eq!(record["action"], "callback_secret.rotate");
    assert_eq!(record["before"], json!({"stored_secrets": 2}));
    assert!(!audit.text.contains(&s2), "the audit trail shows a secret");

    // Behind the API: the newest and the one before sign; the bootstrap secret is gone.
    let pid = project.parse().unwrap();
    let ring = app
        .state
        .service
        .callbacks()
        .signing_secrets(pid)
        .await
        .unwrap();
    let now = app.state.service.ports().clock.now();
    let signing: Vec<&str> = ring
        .signing_secrets(now)
        .into_iter()
        .map(|s| s.expose())
        .collect();
    assert_eq!(signing, [s2.as_str(), s1.as_str()]);

    let project_view = app
        .op("GET", &format!("/operator/v1/projects/{project}"), None)
        .await;
    assert!(!project_view.text.contains(&s2));
    let unknown = app
        .op(
            "POST",
            "/operator/v1/projects/00000000-0000-4000-8000-000000000000/callback-secret",
            None,
        )
        .await;
    assert_eq!(unknown.status, 404);
    let with_body = app.op("POST", &path, Some(json!({"secret": "mine"}))).await;
    assert_eq!(with_body.status, 400);
}
