//! A merchant with a project, a token and a key, provisioned through the operator API.

use payments_core::auth::keys::public_key_to_pem;
use serde_json::json;

use crate::common::{Signer, TestApp};

/// A merchant with a project, a token with every scope and a registered key, made through the
/// operator API.
pub(crate) struct Provisioned {
    pub(crate) merchant_id: String,
    pub(crate) project_id: String,
    pub(crate) token: String,
    pub(crate) token_id: String,
    pub(crate) signer: Signer,
}

pub(crate) async fn provision(app: &TestApp) -> Provisioned {
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
