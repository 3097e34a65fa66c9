//! The operator API and CLI over real sockets: each provisioning function and payment
//! operation, immediate revocation of tokens and keys, the allow-list on the next request, a
//! token shown once, `invalid_transition`, operator authentication, and a second project
//! provisioned from scratch with the `payments-server` commands.

mod common;

use std::net::TcpListener;
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use base64::engine::general_purpose::STANDARD;
use base64::Engine as _;
use payments_client::SandboxCredentials;
use payments_core::auth::keys::public_key_to_pem;
use payments_http::bootstrap::CREDENTIALS_FILE;
use serde_json::{json, Value};

use common::{create_payment, Signer, TestApp};

/// A merchant with a project, a token with every scope and a registered key, made through the
/// operator API.
struct Provisioned {
    merchant_id: String,
    project_id: String,
    token: String,
    token_id: String,
    signer: Signer,
}

async fn provision(app: &TestApp) -> Provisioned {
    let m = app
        .op(
            "POST",
            "/operator/v1/merchants",
            Some(json!({"name": "Shop"})),
        )
        .await;
    assert_eq!(m.status, 201, "{}", m.text);
    let merchant_id = m.body["id"].as_str().unwrap().to_string();
    let p = app
        .op(
            "POST",
            "/operator/v1/projects",
            Some(json!({"merchant_id": merchant_id, "name": "Shop site"})),
        )
        .await;
    assert_eq!(p.status, 201, "{}", p.text);
    let project_id = p.body["id"].as_str().unwrap().to_string();
    let t = app
        .op(
            "POST",
            &format!("/operator/v1/projects/{project_id}/tokens"),
            Some(json!({"scopes": ["payments:create", "payments:read"]})),
        )
        .await;
    assert_eq!(t.status, 201, "{}", t.text);
    let signer = Signer::generate();
    let k = app
        .op(
            "POST",
            &format!("/operator/v1/projects/{project_id}/keys"),
            Some(json!({"public_key": public_key_to_pem(&signer.key.verifying_key())})),
        )
        .await;
    assert_eq!(k.status, 201, "{}", k.text);
    assert_eq!(k.body["keyid"], signer.keyid.as_str());
    Provisioned {
        merchant_id,
        project_id,
        token: t.body["token"].as_str().unwrap().to_string(),
        token_id: t.body["id"].as_str().unwrap().to_string(),
        signer,
    }
}

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
async fn merchant_create_list_show_and_pause_refuses_payments() {
    let app = TestApp::sandbox().await;
    let p = provision(&app).await;
    let path = format!("/operator/v1/merchants/{}", p.merchant_id);

    let shown = app.op("GET", &path, None).await;
    assert_eq!(shown.status, 200);
    assert_eq!(shown.body["name"], "Shop");
    assert_eq!(shown.body["paused"], false);
    let list = app.op("GET", "/operator/v1/merchants", None).await;
    let ids: Vec<&str> = list.body["merchants"]
        .as_array()
        .unwrap()
        .iter()
        .map(|m| m["id"].as_str().unwrap())
        .collect();
    assert_eq!(ids.len(), 2);
    assert!(ids.contains(&p.merchant_id.as_str()));

    assert_eq!(
        app.create_payment(&p.token, &p.signer, "500").await.status,
        201
    );
    let paused = app.op("PATCH", &path, Some(json!({"paused": true}))).await;
    assert_eq!(paused.status, 200, "{}", paused.text);
    assert_eq!(paused.body["paused"], true);
    let refused = app.create_payment(&p.token, &p.signer, "500").await;
    assert_eq!(refused.status, 422, "{}", refused.text);
    assert_eq!(refused.code(), "payment_not_routable");
    assert!(refused.body.get("payment_id").is_none());

    let resumed = app.op("PATCH", &path, Some(json!({"paused": false}))).await;
    assert_eq!(resumed.body["paused"], false);
    assert_eq!(
        app.create_payment(&p.token, &p.signer, "500").await.status,
        201
    );

    // Common callback URL: set, then cleared with null.
    let set = app
        .op(
            "PATCH",
            &path,
            Some(json!({"callback_url": "https://shop.example.com/cb"})),
        )
        .await;
    assert_eq!(set.body["callback_url"], "https://shop.example.com/cb");
    let cleared = app
        .op("PATCH", &path, Some(json!({"callback_url": null})))
        .await;
    assert_eq!(cleared.status, 200);
    assert_eq!(cleared.body["callback_url"], Value::Null);
    assert_eq!(cleared.body["paused"], false);

    // Refused inputs name the field; unknown ids are 404.
    let unknown = app
        .op(
            "PATCH",
            &path,
            Some(json!({"paused": true, "colour": "red"})),
        )
        .await;
    assert_eq!(unknown.status, 400);
    assert_eq!(unknown.code(), "bad_request");
    assert!(unknown.message().contains("colour"), "{}", unknown.text);
    assert_eq!(app.op("GET", &path, None).await.body["paused"], false);
    let local = app
        .op(
            "POST",
            "/operator/v1/merchants",
            Some(json!({"name": "L", "callback_url": "http://127.0.0.1/cb"})),
        )
        .await;
    assert_eq!(local.status, 400, "{}", local.text);
    let no_name = app
        .op("POST", "/operator/v1/merchants", Some(json!({})))
        .await;
    assert_eq!(no_name.status, 400);
    assert!(no_name.message().contains("name"));
    let missing = app
        .op(
            "GET",
            "/operator/v1/merchants/00000000-0000-4000-8000-000000000000",
            None,
        )
        .await;
    assert_eq!(missing.status, 404);
    assert_eq!(missing.code(), "not_found");
    let malformed = app
        .op("GET", "/operator/v1/merchants/not-an-id", None)
        .await;
    assert_eq!(malformed.status, 404);
    assert_eq!(malformed.code(), "not_found");
}

#[tokio::test]
async fn project_create_with_settings_and_patch() {
    let app = TestApp::sandbox().await;
    let m = app
        .op("POST", "/operator/v1/merchants", Some(json!({"name": "M"})))
        .await;
    let merchant_id = m.body["id"].as_str().unwrap();
    let contract = json!({
        "currencies": ["RUB"],
        "methods": [{"method": "sbp", "min_amount": "100", "max_amount": "5000", "fee_percent": "7.5"}],
    });
    let created = app
        .op(
            "POST",
            "/operator/v1/projects",
            Some(json!({
                "merchant_id": merchant_id,
                "name": "Site",
                "test_mode": true,
                "lifetime_seconds": 600,
                "contract": contract,
                "callback_url": "https://shop.example.com/payments/cb",
                "ip_allow_list": ["203.0.113.0/24"],
                "signature_required": true,
                "rate_limit": {"per_second": 5, "burst": 10},
            })),
        )
        .await;
    assert_eq!(created.status, 201, "{}", created.text);
    let p = &created.body;
    assert_eq!(p["merchant_id"], merchant_id);
    assert_eq!(p["test_mode"], true);
    assert_eq!(p["lifetime_seconds"], 600);
    assert_eq!(p["contract"]["methods"][0]["method"], "sbp");
    assert_eq!(p["contract"]["methods"][0]["min_amount"], "100");
    assert_eq!(p["contract"]["methods"][0]["max_amount"], "5000");
    assert_eq!(p["contract"]["methods"].as_array().unwrap().len(), 1);
    assert_eq!(p["callback_url"], "https://shop.example.com/payments/cb");
    assert_eq!(p["ip_allow_list"], json!(["203.0.113.0/24"]));
    assert_eq!(p["signature_required"], true);
    assert_eq!(p["rate_limit"], json!({"per_second": 5, "burst": 10}));
    let id = p["id"].as_str().unwrap();
    let path = format!("/operator/v1/projects/{id}");

    let patched = app
        .op(
            "PATCH",
            &path,
            Some(json!({"lifetime_seconds": 1800, "test_mode": false, "ip_allow_list": [], "active": false})),
        )
        .await;
    assert_eq!(patched.status, 200, "{}", patched.text);
    assert_eq!(patched.body["lifetime_seconds"], 1800);
    assert_eq!(patched.body["test_mode"], false);
    assert_eq!(patched.body["active"], false);
    assert_eq!(patched.body["ip_allow_list"], json!([]));
    // Untouched settings stay.
    assert_eq!(patched.body["signature_required"], true);
    assert_eq!(patched.body["rate_limit"]["burst"], 10);
    assert_eq!(app.op("GET", &path, None).await.body, patched.body);

    let listed = app
        .op(
            "GET",
            &format!("/operator/v1/projects?merchant_id={merchant_id}"),
            None,
        )
        .await;
    assert_eq!(listed.body["projects"], json!([patched.body]));

    for (body, field) in [
        (json!({"lifetime_seconds": 5}), "lifetime"),
        (
            json!({"ip_allow_list": ["not an address"]}),
            "ip_allow_list",
        ),
        (json!({"rate_limit": {"per_second": 5}}), "rate_limit.burst"),
        (
            json!({"contract": {"currencies": ["RUB"], "methods": [{"method": "sbp"}]}}),
            "fee_percent",
        ),
        (
            json!({"contract": {"currencies": ["RUB"], "methods": [], "extra": 1}}),
            "contract.extra",
        ),
        (json!({"merchant_id": merchant_id}), "merchant_id"),
        (json!({"test_mode": "yes"}), "test_mode"),
    ] {
        let a = app.op("PATCH", &path, Some(body.clone())).await;
        assert_eq!(a.status, 400, "{body}: {}", a.text);
        assert_eq!(a.code(), "bad_request");
        assert!(a.message().contains(field), "{body}: {}", a.text);
    }
    let unknown_merchant = app
        .op(
            "POST",
            "/operator/v1/projects",
            Some(json!({"merchant_id": "00000000-0000-4000-8000-000000000000", "name": "x"})),
        )
        .await;
    assert_eq!(unknown_merchant.status, 404);
    assert_eq!(unknown_merchant.code(), "not_found");
    let bad_json = app.op_raw("PATCH", &path, "{\"name\": ").await;
    assert_eq!(bad_json.status, 400);
}

#[tokio::test]
async fn test_mode_is_refused_on_a_production_server() {
    let app = TestApp::production().await;
    let m = app
        .op("POST", "/operator/v1/merchants", Some(json!({"name": "M"})))
        .await;
    assert_eq!(m.status, 201);
    let body = json!({"merchant_id": m.body["id"], "name": "P", "test_mode": true});
    let a = app.op("POST", "/operator/v1/projects", Some(body)).await;
    assert_eq!(a.status, 400, "{}", a.text);
    assert_eq!(a.code(), "bad_request");
    assert!(a.message().contains("sandbox"), "{}", a.text);
    let p = app
        .op(
            "POST",
            "/operator/v1/projects",
            Some(json!({"merchant_id": m.body["id"], "name": "P"})),
        )
        .await;
    assert_eq!(p.status, 201);
    let t = app
        .op(
            "POST",
            &format!(
                "/operator/v1/projects/{}/tokens",
                p.body["id"].as_str().unwrap()
            ),
            Some(json!({"scopes": ["payments:read"]})),
        )
        .await;
    assert!(t.body["token"].as_str().unwrap().starts_with("nl_live_"));
}

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

    // A second key as raw base64.
    let second = Signer::generate();
    let raw = STANDARD.encode(second.key.verifying_key().to_bytes());
    let reg = app
        .op("POST", &keys, Some(json!({"public_key": raw})))
        .await;
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
    let ring = app.state.service.signing_secrets(pid).await.unwrap();
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

#[tokio::test]
async fn payment_operations_and_invalid_transition() {
    let app = TestApp::sandbox().await;
    let (token, signer) = app.demo();
    // A destination, so closing a payment queues a callback event.
    app.op(
        "PATCH",
        &format!("/operator/v1/projects/{}", app.creds().project_id),
        Some(json!({"callback_url": "https://shop.example.com/cb"})),
    )
    .await;
    let pay = |p: &str, op: &str| format!("/operator/v1/payments/{p}/{op}");

    // confirm with another amount -> completed
    let created = app.create_payment(&token, &signer, "1000").await;
    assert_eq!(created.status, 201, "{}", created.text);
    assert_eq!(created.body["status"], "processing");
    let id = created.body["id"].as_str().unwrap().to_string();
    let confirmed = app
        .op("POST", &pay(&id, "confirm"), Some(json!({"amount": "990"})))
        .await;
    assert_eq!(confirmed.status, 200, "{}", confirmed.text);
    assert_eq!(confirmed.body["payment"]["status"], "completed");
    assert!(confirmed.body["payment"]["amount"]
        .to_string()
        .contains("990"));
    assert!(confirmed.body["event_id"].is_string());

    // recheck -> appeal; resolve unchanged -> completed again
    let appeal = app.op("POST", &pay(&id, "recheck"), None).await;
    assert_eq!(appeal.status, 200, "{}", appeal.text);
    assert_eq!(appeal.body["payment"]["status"], "appeal");
    assert_eq!(appeal.body["event_id"], Value::Null);
    let bad_status = app
        .op(
            "POST",
            &pay(&id, "recheck/resolve"),
            Some(json!({"status": "paid"})),
        )
        .await;
    assert_eq!(bad_status.status, 400);
    assert!(bad_status.message().contains("status"));
    let resolved = app
        .op(
            "POST",
            &pay(&id, "recheck/resolve"),
            Some(json!({"status": "canceled"})),
        )
        .await;
    assert_eq!(resolved.status, 200, "{}", resolved.text);
    assert_eq!(resolved.body["payment"]["status"], "canceled");

    // cancel a canceled payment -> 409 naming the status
    let again = app.op("POST", &pay(&id, "cancel"), None).await;
    assert_eq!(again.status, 409, "{}", again.text);
    assert_eq!(again.code(), "invalid_transition");
    assert!(again.message().contains("canceled"), "{}", again.text);

    // resend: one more event
    let resent = app.op("POST", &pay(&id, "callbacks/resend"), None).await;
    assert_eq!(resent.status, 200, "{}", resent.text);
    assert!(resent.body["event_id"].is_string());

    let events = app
        .op("GET", &format!("/operator/v1/payments/{id}/events"), None)
        .await;
    assert_eq!(events.status, 200);
    let list = events.body["events"].as_array().unwrap();
    let kinds: Vec<(&str, &str)> = list
        .iter()
        .map(|e| {
            (
                e["status"].as_str().unwrap(),
                e["destination"].as_str().unwrap(),
            )
        })
        .collect();
    assert_eq!(list.len(), 3, "{}", events.text);
    assert_eq!(kinds[0], ("completed", "https://shop.example.com/cb"));
    assert_eq!(kinds[1].0, "canceled");
    assert_eq!(kinds[2].0, "canceled");
    assert_eq!(list[2]["event_id"], resent.body["event_id"]);
    assert!(list.iter().all(|e| e["attempts"].is_array()));

    // cancel a processing payment; a re-check result without a re-check is refused; a
    // late confirmation (paid after the lifetime) completes it
    let second = app.create_payment(&token, &signer, "1000").await;
    let id2 = second.body["id"].as_str().unwrap().to_string();
    let canceled = app.op("POST", &pay(&id2, "cancel"), None).await;
    assert_eq!(canceled.body["payment"]["status"], "canceled");
    let resolve = app
        .op(
            "POST",
            &pay(&id2, "recheck/resolve"),
            Some(json!({"status": "completed"})),
        )
        .await;
    assert_eq!(resolve.status, 409, "{}", resolve.text);
    assert_eq!(resolve.code(), "invalid_transition");
    assert!(resolve.message().contains("canceled"), "{}", resolve.text);
    let late = app.op("POST", &pay(&id2, "confirm"), None).await;
    assert_eq!(late.status, 200, "{}", late.text);
    let shown = app
        .op("GET", &format!("/operator/v1/payments/{id2}"), None)
        .await;
    assert_eq!(shown.body["status"], "completed");

    let unknown = app
        .op(
            "POST",
            &pay("00000000-0000-4000-8000-000000000000", "cancel"),
            None,
        )
        .await;
    assert_eq!(unknown.status, 404);
    assert_eq!(unknown.code(), "payment_not_found");
    let extra = app
        .op(
            "POST",
            &pay(&id2, "confirm"),
            Some(json!({"amount": "1", "note": "x"})),
        )
        .await;
    assert_eq!(extra.status, 400);
    assert!(extra.message().contains("note"));
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
    assert!(records.iter().all(|r| r["actor"] == "operator"));
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

// ---- The CLI ----

/// A `payments-server serve` child process, killed on drop (also when a test panics).
struct ServerProcess(Child);

impl Drop for ServerProcess {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .expect("a free port")
        .port()
}

fn cli(data_dir: &Path, args: &[&str]) -> Value {
    let out = Command::new(env!("CARGO_BIN_EXE_payments-server"))
        .args(args)
        .arg("--data-dir")
        .arg(data_dir)
        .arg("--json")
        .env_remove("PAYMENTS_CONFIG")
        .env("USER", "tester")
        .output()
        .expect("payments-server runs");
    assert!(
        out.status.success(),
        "{args:?} failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_slice(&out.stdout).unwrap_or_else(|e| {
        panic!(
            "{args:?} printed no JSON ({e}): {}",
            String::from_utf8_lossy(&out.stdout)
        )
    })
}

/// `key register --file /dev/zero` reads at most 64 KiB + 1 byte and names the file and the
/// limit (it used to read until memory ran out: 18.9 GB RSS). The command runs under a 2 GiB
/// address-space limit so that an unlimited read fails the test quickly instead of taking the
/// machine's memory.
#[cfg(unix)]
#[tokio::test]
async fn key_register_refuses_an_endless_file_at_the_limit() {
    let dir = tempfile::tempdir().unwrap();
    let settings = payments_http::config::Settings {
        data_dir: dir.path().to_path_buf(),
        ..Default::default()
    };
    payments_http::server::open_store(&settings, true)
        .expect("a fresh database")
        .close();
    let started = Instant::now();
    let out = Command::new("sh")
        .arg("-c")
        .arg("ulimit -v 2097152 && exec \"$0\" \"$@\"")
        .arg(env!("CARGO_BIN_EXE_payments-server"))
        .args([
            "key",
            "register",
            "00000000-0000-4000-8000-000000000001",
            "--file",
            "/dev/zero",
            "--data-dir",
        ])
        .arg(dir.path())
        .env_remove("PAYMENTS_CONFIG")
        .output()
        .expect("payments-server runs");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success(), "{stderr}");
    assert!(
        stderr.contains("/dev/zero is larger than 64 KiB, the limit for a PEM key or certificate"),
        "{stderr}"
    );
    assert!(started.elapsed() < Duration::from_secs(30));
}

#[tokio::test]
async fn cli_provisions_a_second_project_that_makes_a_signed_create() {
    let dir = tempfile::tempdir().unwrap();
    let merchant_port = free_port();
    let operator_port = free_port();
    let child = Command::new(env!("CARGO_BIN_EXE_payments-server"))
        .arg("serve")
        .arg("--data-dir")
        .arg(dir.path())
        .args(["--listen", &format!("127.0.0.1:{merchant_port}")])
        .args(["--operator-listen", &format!("127.0.0.1:{operator_port}")])
        .env_remove("PAYMENTS_CONFIG")
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .expect("the server starts");
    let _server = ServerProcess(child);
    let base = format!("http://127.0.0.1:{merchant_port}");
    let client = reqwest::Client::new();
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let up = client.get(format!("{base}/readyz")).send().await;
        if up.is_ok_and(|r| r.status().is_success()) && dir.path().join(CREDENTIALS_FILE).exists() {
            break;
        }
        assert!(Instant::now() < deadline, "the server did not come up");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let creds: SandboxCredentials =
        serde_json::from_str(&std::fs::read_to_string(dir.path().join(CREDENTIALS_FILE)).unwrap())
            .unwrap();

    let d = dir.path();
    let merchant = cli(d, &["merchant", "create", "--name", "Second shop"]);
    let merchant_id = merchant["id"].as_str().unwrap();
    let project = cli(
        d,
        &[
            "project",
            "create",
            "--merchant",
            merchant_id,
            "--name",
            "Second site",
            "--lifetime",
            "1200",
            "--rate-limit",
            "20/40",
        ],
    );
    let project_id = project["id"].as_str().unwrap();
    assert_ne!(project_id, creds.project_id);
    assert_eq!(project["lifetime_seconds"], 1200);
    assert_eq!(
        project["rate_limit"],
        json!({"per_second": 20, "burst": 40})
    );
    let token = cli(
        d,
        &[
            "token",
            "issue",
            project_id,
            "--scope",
            "payments:create,payments:read",
        ],
    );
    let token_value = token["token"].as_str().unwrap();
    assert!(token_value.starts_with("nl_test_"));
    let signer = Signer::generate();
    let pem_path = d.join("second.pub.pem");
    std::fs::write(&pem_path, public_key_to_pem(&signer.key.verifying_key())).unwrap();
    let key = cli(
        d,
        &[
            "key",
            "register",
            project_id,
            "--file",
            pem_path.to_str().unwrap(),
        ],
    );
    assert_eq!(key["keyid"], signer.keyid.as_str());
    let secret = cli(d, &["callback-secret", "rotate", project_id]);
    assert!(secret["callback_secret"]
        .as_str()
        .unwrap()
        .starts_with("whsec_"));

    // The running server serves the project provisioned beside it.
    let created = create_payment(&client, &base, token_value, &signer, "777").await;
    assert_eq!(created.status, 201, "{}", created.text);
    assert_eq!(created.body["status"], "processing");
    let payment_id = created.body["id"].as_str().unwrap();

    // Payment operations and listings through the CLI, acting on the server's payment.
    let confirmed = cli(d, &["payment", "confirm", payment_id, "--amount", "770"]);
    assert_eq!(confirmed["payment"]["status"], "completed");
    let again = Command::new(env!("CARGO_BIN_EXE_payments-server"))
        .args([
            "payment",
            "resolve",
            payment_id,
            "--status",
            "unchanged",
            "--data-dir",
        ])
        .arg(d)
        .output()
        .unwrap();
    assert!(!again.status.success());
    let stderr = String::from_utf8_lossy(&again.stderr);
    assert!(
        stderr.contains("invalid_transition") && stderr.contains("completed"),
        "{stderr}"
    );
    let tokens = cli(d, &["token", "list", project_id]);
    assert_eq!(tokens["tokens"].as_array().unwrap().len(), 1);
    assert!(!tokens.to_string().contains(token_value));
    let audit = cli(d, &["audit", "--limit", "1"]);
    assert_eq!(audit["records"][0]["action"], "payment.confirm");
    assert_eq!(audit["records"][0]["actor"], "cli:tester");

    // Revoking through the CLI takes effect in the running server at once.
    let token_id = token["id"].as_str().unwrap();
    cli(d, &["token", "revoke", project_id, token_id]);
    let refused = create_payment(&client, &base, token_value, &signer, "777").await;
    assert_eq!(refused.status, 401);
    assert_eq!(refused.code(), "token_invalid");
}

/// A project reads only its own payments: another project's payment id is `404
/// payment_not_found`, exactly like an unknown one (the payment is read in the same store round
/// trip as the credentials, so the owner check is the only thing between them).
#[tokio::test]
async fn a_project_cannot_read_another_projects_payment() {
    let app = TestApp::sandbox().await;
    let (demo_token, demo_key) = app.demo();
    let created = app.create_payment(&demo_token, &demo_key, "500").await;
    assert_eq!(created.status, 201, "{}", created.text);
    let path = format!("/api/v1/payments/{}", created.body["id"].as_str().unwrap());
    let own = app.merchant("GET", &path, &demo_token, None, b"").await;
    assert_eq!(own.status, 200, "{}", own.text);
    assert_eq!(own.body["id"], created.body["id"]);

    let other = provision(&app).await;
    for key in [None, Some(&other.signer)] {
        let foreign = app.merchant("GET", &path, &other.token, key, b"").await;
        assert_eq!(foreign.status, 404, "{}", foreign.text);
        assert_eq!(foreign.code(), "payment_not_found");
        assert!(!foreign.text.contains(created.body["id"].as_str().unwrap()));
    }
    // An unknown token learns nothing either: 401 before any payment is considered.
    let unknown = app
        .merchant("GET", &path, "sk_sandbox_unknown", None, b"")
        .await;
    assert_eq!(unknown.status, 401, "{}", unknown.text);
}
