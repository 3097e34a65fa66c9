//! A merchant-side client for the API, for Rust merchants, the examples, the tests and the load
//! generator: it signs every request with the core's RFC 9421 signer (fresh nonce, digest,
//! `X-Request-ID`) and sends it with `reqwest`.

use std::time::{SystemTime, UNIX_EPOCH};

use ed25519_dalek::SigningKey;
use payments_core::auth::keys::{keyid, parse_signing_key_pem};
use payments_core::auth::signature::{sign_request, SignOptions};
use payments_core::auth::HttpRequestParts;
use payments_core::random::uuid_v4;
use payments_core::KeyId;
use reqwest::{Method, StatusCode};

use crate::bootstrap::SandboxCredentials;
use crate::system::OsRandom;

/// A response as received.
#[derive(Debug, Clone)]
pub struct ApiResponse {
    /// HTTP status.
    pub status: StatusCode,
    /// Response headers.
    pub headers: reqwest::header::HeaderMap,
    /// The body, parsed as JSON (`Null` when empty or not JSON).
    pub json: serde_json::Value,
    /// The raw body.
    pub body: Vec<u8>,
}

impl ApiResponse {
    /// The error `code` of an error body, if any.
    pub fn code(&self) -> Option<&str> {
        self.json.get("code").and_then(|c| c.as_str())
    }
}

/// How to sign one request; tests use the knobs to produce every kind of bad signature.
#[derive(Debug, Clone, Default)]
pub struct SignSpec {
    /// `created` (default: now).
    pub created: Option<i64>,
    /// `expires` (default: created + 300).
    pub expires: Option<i64>,
    /// Covered components (default: the service's required ones).
    pub components: Option<Vec<String>>,
    /// A fixed nonce (default: a fresh one).
    pub nonce: Option<String>,
}

/// A prepared request: everything needed to send it (and to send it again, for replay tests).
#[derive(Debug, Clone)]
pub struct PreparedRequest {
    /// Method.
    pub method: Method,
    /// Path and query.
    pub path_and_query: String,
    /// Headers to send, in order.
    pub headers: Vec<(String, String)>,
    /// Body bytes.
    pub body: Vec<u8>,
}

/// A signing API client for one project. Its `Debug` output never shows the token or key.
#[derive(Clone)]
pub struct MerchantClient {
    http: reqwest::Client,
    base_url: String,
    token: String,
    key: SigningKey,
    keyid: KeyId,
}

/// Why a client could not be built or a request not sent.
#[derive(Debug, thiserror::Error)]
pub enum ClientError {
    /// The private key is not a PKCS#8 Ed25519 PEM.
    #[error("private key: {0}")]
    Key(String),
    /// The request could not be signed.
    #[error("signing: {0}")]
    Sign(String),
    /// Transport failure (connect, timeout, ...).
    #[error("http: {0}")]
    Http(#[from] reqwest::Error),
}

impl std::fmt::Debug for MerchantClient {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("MerchantClient")
            .field("base_url", &self.base_url)
            .field(
                "token",
                &payments_core::auth::token::token_prefix(&self.token),
            )
            .field("keyid", &self.keyid)
            .finish_non_exhaustive()
    }
}

fn now_secs() -> i64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| i64::try_from(d.as_secs()).unwrap_or(i64::MAX))
}

impl MerchantClient {
    /// A client for `base_url` (e.g. `http://127.0.0.1:8080`) with a token and a private key
    /// in PKCS#8 PEM.
    pub fn new(base_url: &str, token: &str, private_key_pem: &str) -> Result<Self, ClientError> {
        let key =
            parse_signing_key_pem(private_key_pem).map_err(|e| ClientError::Key(e.to_string()))?;
        Self::from_key(base_url, token, key)
    }

    /// A client with a token and an Ed25519 signing key.
    pub fn from_key(base_url: &str, token: &str, key: SigningKey) -> Result<Self, ClientError> {
        let http = reqwest::Client::builder()
            .timeout(std::time::Duration::from_secs(30))
            .build()?;
        Ok(MerchantClient {
            http,
            base_url: base_url.trim_end_matches('/').to_string(),
            token: token.to_string(),
            keyid: keyid(&key.verifying_key()),
            key,
        })
    }

    /// A client from a sandbox credentials file's contents.
    pub fn from_credentials(c: &SandboxCredentials) -> Result<Self, ClientError> {
        Self::new(&c.base_url, c.token.expose(), c.private_key_pem.expose())
    }

    /// The same client over another `reqwest` client (e.g. one trusting a private CA).
    pub fn with_http_client(&self, http: reqwest::Client) -> Self {
        MerchantClient {
            http,
            ..self.clone()
        }
    }

    /// The same client with another token (tests).
    pub fn with_token(&self, token: &str) -> Self {
        MerchantClient {
            token: token.to_string(),
            ..self.clone()
        }
    }

    /// The same client with another key (tests).
    pub fn with_key(&self, key: SigningKey) -> Self {
        MerchantClient {
            keyid: keyid(&key.verifying_key()),
            key,
            ..self.clone()
        }
    }

    /// The key id the client signs with.
    pub fn keyid(&self) -> &KeyId {
        &self.keyid
    }

    /// The base URL.
    pub fn base_url(&self) -> &str {
        &self.base_url
    }

    /// Builds a signed request (`sign = false` leaves the signature headers out).
    pub fn prepare(
        &self,
        method: Method,
        path_and_query: &str,
        body: &[u8],
        sign: Option<&SignSpec>,
    ) -> Result<PreparedRequest, ClientError> {
        let authority = self
            .base_url
            .split_once("://")
            .map_or(self.base_url.as_str(), |(_, rest)| rest)
            .split('/')
            .next()
            .unwrap_or("")
            .to_string();
        let scheme = self.base_url.split_once("://").map_or("http", |(s, _)| s);
        let mut headers = vec![
            (
                "Authorization".to_string(),
                format!("Bearer {}", self.token),
            ),
            ("X-Request-ID".to_string(), uuid_v4(&OsRandom).to_string()),
        ];
        if !body.is_empty() {
            headers.push(("Content-Type".to_string(), "application/json".to_string()));
        }
        if let Some(spec) = sign {
            let created = spec.created.unwrap_or_else(now_secs);
            let expires = spec.expires.unwrap_or(created + 300);
            let mut options = SignOptions::new(self.keyid.clone(), created, expires);
            options.components = spec.components.clone();
            if let Some(n) = &spec.nonce {
                options.nonce = Some(
                    payments_core::auth::Nonce::parse(n.as_bytes())
                        .map_err(|e| ClientError::Sign(e.to_string()))?,
                );
            }
            let raw: Vec<(&str, &[u8])> = headers
                .iter()
                .map(|(n, v)| (n.as_str(), v.as_bytes()))
                .collect();
            let parts = HttpRequestParts {
                method: method.as_str(),
                scheme,
                authority: &authority,
                path_and_query,
                headers: &raw,
                body,
            };
            let signed = sign_request(&parts, &self.key, &options, &OsRandom)
                .map_err(|e| ClientError::Sign(e.to_string()))?;
            for (n, v) in signed.headers() {
                headers.push((n.to_string(), v.to_string()));
            }
        }
        Ok(PreparedRequest {
            method,
            path_and_query: path_and_query.to_string(),
            headers,
            body: body.to_vec(),
        })
    }

    /// Sends a prepared request.
    pub async fn send(&self, req: &PreparedRequest) -> Result<ApiResponse, ClientError> {
        let url = format!("{}{}", self.base_url, req.path_and_query);
        let mut builder = self.http.request(req.method.clone(), url);
        for (n, v) in &req.headers {
            builder = builder.header(n, v);
        }
        let resp = builder.body(req.body.clone()).send().await?;
        let status = resp.status();
        let headers = resp.headers().clone();
        let body = resp.bytes().await?.to_vec();
        let json = serde_json::from_slice(&body).unwrap_or(serde_json::Value::Null);
        Ok(ApiResponse {
            status,
            headers,
            json,
            body,
        })
    }

    /// `POST /api/v1/payments` with a signed JSON body.
    pub async fn create_payment(
        &self,
        body: &serde_json::Value,
    ) -> Result<ApiResponse, ClientError> {
        let bytes = serde_json::to_vec(body).expect("a JSON value serialises");
        let req = self.prepare(
            Method::POST,
            "/api/v1/payments",
            &bytes,
            Some(&SignSpec::default()),
        )?;
        self.send(&req).await
    }

    /// `GET /api/v1/payments/{id}`, signed (an empty body is signed too) so it works whatever
    /// the project's signature policy.
    pub async fn get_payment(&self, id: &str) -> Result<ApiResponse, ClientError> {
        let req = self.prepare(
            Method::GET,
            &format!("/api/v1/payments/{id}"),
            b"",
            Some(&SignSpec::default()),
        )?;
        self.send(&req).await
    }

    /// `GET /api/v1/project`, signed.
    pub async fn project(&self) -> Result<ApiResponse, ClientError> {
        let req = self.prepare(
            Method::GET,
            "/api/v1/project",
            b"",
            Some(&SignSpec::default()),
        )?;
        self.send(&req).await
    }

    /// A signed POST of `body` to any path (test helpers).
    pub async fn post(&self, path: &str, body: &[u8]) -> Result<ApiResponse, ClientError> {
        let req = self.prepare(Method::POST, path, body, Some(&SignSpec::default()))?;
        self.send(&req).await
    }
}
