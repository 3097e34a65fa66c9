//! Test helpers: a real server on 127.0.0.1:0 over a fresh data dir, an operator API client,
//! and merchant requests signed with the core's signer.

#![allow(dead_code)]

use std::net::SocketAddr;
use std::path::Path;

use ed25519_dalek::SigningKey;
use payments_core::auth::keys::{keyid, parse_signing_key_pem};
use payments_core::auth::signature::{sign_request, HttpRequestParts, SignOptions};
use payments_core::KeyId;
use payments_http::bootstrap::{SandboxCredentials, CREDENTIALS_FILE};
use payments_http::config::PartialSettings;
use payments_http::server::Application;
use payments_http::system::OsRandom;
use payments_http::AppState;
use serde_json::Value;
use tempfile::TempDir;
use tokio::sync::oneshot;

/// A running server and what a test needs to talk to it.
pub struct TestApp {
    /// The data dir (deleted on drop).
    pub dir: TempDir,
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
    stop: Option<oneshot::Sender<()>>,
    server: Option<tokio::task::JoinHandle<()>>,
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

fn settings(dir: &Path, environment: &str) -> payments_http::config::Settings {
    PartialSettings {
        data_dir: Some(dir.to_path_buf()),
        environment: Some(environment.into()),
        listen: Some("127.0.0.1:0".into()),
        operator_listen: Some("127.0.0.1:0".into()),
        synchronous: Some("normal".into()),
        ..PartialSettings::default()
    }
    .finish()
    .expect("test settings are valid")
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
        if std::env::var_os("TEST_LOG").is_some() {
            payments_http::telemetry::init(Default::default(), "info");
        }
        let dir = tempfile::tempdir().expect("a temp dir");
        let app = Application::build(settings(dir.path(), environment))
            .await
            .expect("the server starts");
        let merchant_url = format!("http://{}", app.merchant_addr());
        let operator_url = format!("http://{}", app.operator_addr());
        let state = app.state().clone();
        let (credentials, operator_token) = if environment == "sandbox" {
            let text = std::fs::read_to_string(dir.path().join(CREDENTIALS_FILE))
                .expect("the sandbox wrote its credentials");
            let creds: SandboxCredentials = serde_json::from_str(&text).expect("credentials JSON");
            let op = creds.operator_token.clone();
            (Some(creds), op)
        } else {
            let op = payments_http::bootstrap::issue_operator_token(&state.service)
                .await
                .expect("an operator token");
            (None, op)
        };
        let (tx, rx) = oneshot::channel::<()>();
        let server = tokio::spawn(async move {
            app.run_until_stopped(async {
                let _ = rx.await;
            })
            .await
            .expect("the server runs");
        });
        TestApp {
            dir,
            merchant_url,
            operator_url,
            operator_token,
            credentials,
            state,
            client: reqwest::Client::new(),
            stop: Some(tx),
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
        let key = parse_signing_key_pem(&c.private_key_pem).expect("the bootstrap key parses");
        (c.token.clone(), Signer::new(key))
    }
}

impl Drop for TestApp {
    fn drop(&mut self) {
        if let Some(tx) = self.stop.take() {
            let _ = tx.send(());
        }
        if let Some(h) = self.server.take() {
            h.abort();
        }
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

/// A merchant API request to `base` (signed when `key` is given).
pub async fn merchant_request(
    client: &reqwest::Client,
    base: &str,
    method: &str,
    path: &str,
    token: &str,
    key: Option<&Signer>,
    body: &[u8],
) -> Answer {
    let addr: SocketAddr = base
        .trim_start_matches("http://")
        .parse()
        .expect("base is http://ip:port");
    let authority = addr.to_string();
    let mut headers: Vec<(String, String)> = vec![
        ("Authorization".into(), format!("Bearer {token}")),
        ("Content-Type".into(), "application/json".into()),
        ("X-Request-ID".into(), unique("test")),
    ];
    if let Some(signer) = key {
        let now = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .expect("the clock is after 1970")
            .as_secs() as i64;
        let borrowed: Vec<(&str, &[u8])> = headers
            .iter()
            .map(|(n, v)| (n.as_str(), v.as_bytes()))
            .collect();
        let parts = HttpRequestParts {
            method,
            scheme: "http",
            authority: &authority,
            path_and_query: path,
            headers: &borrowed,
            body,
        };
        let options = SignOptions::new(signer.keyid.clone(), now, now + 60);
        let signed =
            sign_request(&parts, &signer.key, &options, &OsRandom).expect("the request signs");
        let extra: Vec<(String, String)> = signed
            .headers()
            .iter()
            .map(|(n, v)| (n.to_string(), v.to_string()))
            .collect();
        headers.extend(extra);
    }
    let method = reqwest::Method::from_bytes(method.as_bytes()).expect("a method");
    let mut req = client.request(method, format!("{base}{path}"));
    for (n, v) in &headers {
        req = req.header(n, v);
    }
    let resp = req
        .body(body.to_vec())
        .send()
        .await
        .expect("the merchant API answers");
    Answer::read(resp).await
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
