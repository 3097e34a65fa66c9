//! Merchants and projects: create, list, show, patch, pause, and test mode on a production
//! server.

use serde_json::{json, Value};

use crate::common::TestApp;
use crate::support::provision;

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
    // The payer page: off and Russian by default.
    assert_eq!(patched.body["payer_page"], false);
    assert_eq!(patched.body["payer_language"], "ru");
    let patched = app
        .op(
            "PATCH",
            &path,
            Some(json!({"payer_page": true, "payer_language": "en"})),
        )
        .await;
    assert_eq!(patched.status, 200, "{}", patched.text);
    assert_eq!(patched.body["payer_page"], true);
    assert_eq!(patched.body["payer_language"], "en");
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
        (json!({"payer_language": "de"}), "payer_language"),
        (json!({"payer_page": "on"}), "payer_page"),
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
