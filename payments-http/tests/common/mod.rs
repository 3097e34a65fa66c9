//! Test helpers: the test server (`payments_http::testing::TestServer`) on 127.0.0.1:0 over a
//! fresh database, an operator API client, and merchant requests signed with the core's signer.

#![allow(dead_code)]

use ed25519_dalek::SigningKey;
use payments_client::{MerchantClient, SandboxCredentials, SignSpec};
use payments_core::auth::keys::{keyid, parse_signing_key_pem};
use payments_core::KeyId;
use payments_http::system::OsRandom;
use payments_http::testing::TestServer;
use payments_http::AppState;
use serde_json::Value;

/// A running server and what a test needs to talk to it.
pub struct TestApp {
    /// `http://127.0.0.1:<port>` of the merchant API.
    pub merchant_url: String,
    /// `http://127.0.0.1:<port>` of the operator API.
    pub operator_url: String,
    /// The operator token.
    pub operator_token: String,
    /// The sandbox credentials (absent in production).
    pub credentials: Option<SandboxCredentials>,
    /// The server's state (its service), for looking behind the API.
    pub state: AppState,
    /// HTTP client.
    pub client: reqwest::Client,
    /// The running server; its database goes when it is dropped.
    server: Option<TestServer>,
}

/// An answer: status and JSON body (`Null` when empty or not JSON).
#[derive(Debug)]
pub struct Answer {
    pub status: u16,
    pub body: Value,
    pub text: String,
}

impl Answer {
    async fn read(resp: reqwest::Response) -> Answer {
        let status = resp.status().as_u16();
        let text = resp.text().await.expect("the body is readable");
        let body = serde_json::from_str(&text).unwrap_or(Value::Null);
        Answer { status, body, text }
    }

    /// The error code of an error body.
    pub fn code(&self) -> &str {
        self.body["code"].as_str().unwrap_or("")
    }

    /// The message of an error body.
    pub fn message(&self) -> &str {
        self.body["message"].as_str().unwrap_or("")
    }
}

impl TestApp {
    /// A bootstrapped sandbox.
    pub async fn sandbox() -> TestApp {
        TestApp::start("sandbox").await
    }

    /// A production server (no bootstrap; an operator token is issued directly).
    pub async fn production() -> TestApp {
        TestApp::start("production").await
    }

    async fn start(environment: &str) -> TestApp {
        let environment = environment.parse().expect("sandbox or production");
        let server = TestServer::start(|s| {
            s.auth = payments_core::service::AuthConfig::for_environment(environment);
        })
        .await;
        TestApp {
            merchant_url: server.merchant_url.clone(),
            operator_url: server.operator_url.clone(),
            operator_token: server.operator_token.expose().clone(),
            credentials: server.credentials.clone(),
            state: server.state.clone(),
            client: reqwest::Client::new(),
            server: Some(server),
        }
    }

    /// The sandbox credentials.
    pub fn creds(&self) -> &SandboxCredentials {
        self.credentials.as_ref().expect("a sandbox server")
    }

    /// An operator API request with the operator token.
    pub async fn op(&self, method: &str, path: &str, body: Option<Value>) -> Answer {
        self.op_as(Some(&self.operator_token.clone()), method, path, body)
            .await
    }

    /// An operator API request with the given operator token (or none).
    pub async fn op_as(
        &self,
        token: Option<&str>,
        method: &str,
        path: &str,
        body: Option<Value>,
    ) -> Answer {
        let method = reqwest::Method::from_bytes(method.as_bytes()).expect("a method");
        let mut req = self
            .client
            .request(method, format!("{}{path}", self.operator_url));
        if let Some(t) = token {
            req = req.bearer_auth(t);
        }
        if let Some(b) = body {
            req = req.json(&b);
        }
        Answer::read(req.send().await.expect("the operator API answers")).await
    }

    /// An operator API request with a raw body.
    pub async fn op_raw(&self, method: &str, path: &str, body: &str) -> Answer {
        let method = reqwest::Method::from_bytes(method.as_bytes()).expect("a method");
        let req = self
            .client
            .request(method, format!("{}{path}", self.operator_url))
            .bearer_auth(&self.operator_token)
            .header("content-type", "application/json")
            .body(body.to_string());
        Answer::read(req.send().await.expect("the operator API answers")).await
    }

    /// A merchant API request (signed when `key` is given).
    pub async fn merchant(
        &self,
        method: &str,
        path: &str,
        token: &str,
        key: Option<&Signer>,
        body: &[u8],
    ) -> Answer {
        merchant_request(
            &self.client,
            &self.merchant_url,
            method,
            path,
            token,
            key,
            body,
        )
        .await
    }

    /// A signed `POST /api/v1/payments` of `amount` by `sbp` with a fresh merchant payment id.
    pub async fn create_payment(&self, token: &str, key: &Signer, amount: &str) -> Answer {
        create_payment(&self.client, &self.merchant_url, token, key, amount).await
    }

    /// The sandbox project's token and key.
    pub fn demo(&self) -> (String, Signer) {
        let c = self.creds();
        let key =
            parse_signing_key_pem(c.private_key_pem.expose()).expect("the bootstrap key parses");
        (c.token.expose().clone(), Signer::new(key))
    }
}

/// A signing key with its keyid.
#[derive(Debug, Clone)]
pub struct Signer {
    pub key: SigningKey,
    pub keyid: KeyId,
}

impl Signer {
    pub fn new(key: SigningKey) -> Signer {
        let keyid = keyid(&key.verifying_key());
        Signer { key, keyid }
    }

    /// A fresh key.
    pub fn generate() -> Signer {
        Signer::new(payments_core::auth::keys::generate_signing_key(&OsRandom))
    }
}

fn unique(prefix: &str) -> String {
    format!("{prefix}-{}", payments_core::random::uuid_v4(&OsRandom))
}

/// A merchant API request to `base` (signed when `key` is given), built and signed by the
/// crate's `MerchantClient`.
pub async fn merchant_request(
    client: &reqwest::Client,
    base: &str,
    method: &str,
    path: &str,
    token: &str,
    key: Option<&Signer>,
    body: &[u8],
) -> Answer {
    let signing_key = key.map_or_else(
        || payments_core::auth::keys::generate_signing_key(&OsRandom),
        |s| s.key.clone(),
    );
    let merchant = MerchantClient::from_key(base, token, signing_key)
        .expect("a client")
        .with_http_client(client.clone());
    let method = reqwest::Method::from_bytes(method.as_bytes()).expect("a method");
    let sign = SignSpec::default();
    let req = merchant
        .prepare(method, path, body, key.map(|_| &sign))
        .expect("the request signs");
    let resp = merchant.send(&req).await.expect("the merchant API answers");
    Answer {
        status: resp.status.as_u16(),
        text: String::from_utf8_lossy(&resp.body).into_owned(),
        body: resp.json,
    }
}

/// A signed create of `amount` by `sbp` with a fresh merchant payment id.
pub async fn create_payment(
    client: &reqwest::Client,
    base: &str,
    token: &str,
    key: &Signer,
    amount: &str,
) -> Answer {
    let body = serde_json::json!({
        "merchant_payment_id": unique("order"),
        "amount": amount,
        "payment_method": "sbp",
    })
    .to_string();
    merchant_request(
        client,
        base,
        "POST",
        "/api/v1/payments",
        token,
        Some(key),
        body.as_bytes(),
    )
    .await
}
