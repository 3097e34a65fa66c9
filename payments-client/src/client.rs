//! The signing client: every request signed with the core's RFC 9421 signer (fresh nonce,
//! digest, `X-Request-ID`) and sent with `reqwest`.

use std::time::{SystemTime, UNIX_EPOCH};

use ed25519_dalek::SigningKey;
use payments_core::auth::keys::{keyid, parse_signing_key_pem};
use payments_core::auth::signature::{sign_request, SignOptions};
use payments_core::auth::HttpRequestParts;
use payments_core::random::uuid_v4;
use payments_core::KeyId;
use reqwest::{Method, StatusCode, Url};

use crate::credentials::SandboxCredentials;
use crate::random::OsRandom;

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
    /// The request target as sent and signed (`@path`, `@query`): the base URL's path prefix,
    /// if any, followed by the path and query given to [`MerchantClient::prepare`], e.g.
    /// `/pay/api/v1/payments` for the base URL `http://host:8080/pay`.
    pub path_and_query: String,
    /// Headers to send, in order.
    pub headers: Vec<(String, String)>,
    /// Body bytes.
    pub body: Vec<u8>,
}

/// A signing API client for one project. Its `Debug` output never shows the token or key.
///
/// The base URL may carry a path prefix (`http://host:8080/pay`, a server mounted behind a
/// reverse proxy): requests go to the prefix followed by the API path, and the signature
/// covers that full path, which is the one the server sees.
#[derive(Clone)]
pub struct MerchantClient {
    http: reqwest::Client,
    /// The base URL as given, without trailing `/`.
    base_url: String,
    /// `scheme://authority` of the base URL.
    origin: String,
    scheme: String,
    authority: String,
    /// The base URL's path without trailing `/` (empty for none), as `reqwest` sends it.
    path_prefix: String,
    token: String,
    key: SigningKey,
    keyid: KeyId,
}

/// Why a client could not be built or a request not sent.
#[derive(Debug, thiserror::Error)]
pub enum ClientError {
    /// The base URL is not an `http` or `https` URL with a host and no query or fragment.
    #[error("base URL {url:?}: {reason}")]
    BaseUrl {
        /// The base URL given.
        url: String,
        /// What is wrong with it.
        reason: String,
    },
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

/// The parts of a base URL the client needs.
struct BaseUrl {
    origin: String,
    scheme: String,
    authority: String,
    path_prefix: String,
}

impl BaseUrl {
    fn parse(base_url: &str) -> Result<BaseUrl, ClientError> {
        let invalid = |reason: &str| ClientError::BaseUrl {
            url: base_url.to_string(),
            reason: reason.to_string(),
        };
        let url = Url::parse(base_url).map_err(|e| invalid(&e.to_string()))?;
        if !matches!(url.scheme(), "http" | "https") {
            return Err(invalid("the scheme is not http or https"));
        }
        if !url.username().is_empty() || url.password().is_some() {
            // The token authenticates; say so without repeating a password.
            let mut shown = url.clone();
            let _ = shown.set_password(None);
            let _ = shown.set_username("");
            return Err(ClientError::BaseUrl {
                url: shown.to_string(),
                reason: "a base URL has no user info (the token authenticates)".to_string(),
            });
        }
        let host = url.host_str().ok_or_else(|| invalid("no host"))?;
        if url.query().is_some() || url.fragment().is_some() {
            return Err(invalid("a base URL has no query or fragment"));
        }
        // The host as `reqwest` sends it in `Host` (the scheme's default port left out).
        let authority = match url.port() {
            Some(port) => format!("{host}:{port}"),
            None => host.to_string(),
        };
        Ok(BaseUrl {
            origin: format!("{}://{authority}", url.scheme()),
            scheme: url.scheme().to_string(),
            authority,
            // `Url` normalises the path (percent-encoding, dot segments) as it is sent.
            path_prefix: url.path().trim_end_matches('/').to_string(),
        })
    }
}

impl MerchantClient {
    /// A client for `base_url` (e.g. `http://127.0.0.1:8080`, or `https://host/pay` with a
    /// path prefix) with a token and a private key in PKCS#8 PEM.
    pub fn new(base_url: &str, token: &str, private_key_pem: &str) -> Result<Self, ClientError> {
        let key =
            parse_signing_key_pem(private_key_pem).map_err(|e| ClientError::Key(e.to_string()))?;
        Self::from_key(base_url, token, key)
    }

    /// A client with a token and an Ed25519 signing key.
    pub fn from_key(base_url: &str, token: &str, key: SigningKey) -> Result<Self, ClientError> {
        let BaseUrl {
            origin,
            scheme,
            authority,
            path_prefix,
        } = BaseUrl::parse(base_url)?;
        let http = reqwest::Client::builder()
            .timeout(std::time::Duration::from_secs(30))
            .build()?;
        Ok(MerchantClient {
            http,
            base_url: base_url.trim_end_matches('/').to_string(),
            origin,
            scheme,
            authority,
            path_prefix,
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

    /// Builds a request to `path_and_query` (an API path in origin form, e.g.
    /// `/api/v1/payments?x=1`, appended to the base URL's path prefix), signed with `sign`
    /// (`None` leaves the signature headers out). The signature covers the full target sent.
    pub fn prepare(
        &self,
        method: Method,
        path_and_query: &str,
        body: &[u8],
        sign: Option<&SignSpec>,
    ) -> Result<PreparedRequest, ClientError> {
        let target = format!("{}{path_and_query}", self.path_prefix);
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
                scheme: &self.scheme,
                authority: &self.authority,
                path_and_query: &target,
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
            path_and_query: target,
            headers,
            body: body.to_vec(),
        })
    }

    /// A prepared request as HTTP/1.1 bytes, as [`send`](Self::send) puts it on the wire
    /// (request line, `Host`, its headers, `Content-Length`, blank line, body; without the
    /// headers the transport adds, which no signature covers): the file `payments-server
    /// check request` reads, and what [`payments_core::service::RawRequest`] parses.
    pub fn wire(&self, req: &PreparedRequest) -> Vec<u8> {
        let mut head = format!(
            "{} {} HTTP/1.1\r\nHost: {}\r\n",
            req.method, req.path_and_query, self.authority
        );
        for (name, value) in &req.headers {
            head.push_str(&format!("{name}: {value}\r\n"));
        }
        head.push_str(&format!("Content-Length: {}\r\n\r\n", req.body.len()));
        [head.as_bytes(), &req.body].concat()
    }

    /// The URL a prepared request is sent to.
    fn url_of(&self, req: &PreparedRequest) -> String {
        format!("{}{}", self.origin, req.path_and_query)
    }

    /// Sends a prepared request.
    pub async fn send(&self, req: &PreparedRequest) -> Result<ApiResponse, ClientError> {
        let mut builder = self.http.request(req.method.clone(), self.url_of(req));
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

    /// `GET /api/v1/payments?<query>`, signed (the query string is part of what is signed):
    /// a page of the project's payments. `query` is the query string without `?`, its values
    /// already form-encoded (`status=completed&limit=50`); empty for the first page of all.
    pub async fn list_payments(&self, query: &str) -> Result<ApiResponse, ClientError> {
        let path = if query.is_empty() {
            "/api/v1/payments".to_string()
        } else {
            format!("/api/v1/payments?{query}")
        };
        let req = self.prepare(Method::GET, &path, b"", Some(&SignSpec::default()))?;
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

    /// `GET /api/v1/payments/{id}/history`, signed: the payment's status history, oldest
    /// first (every change of its status or amount with its time, cause and source).
    pub async fn payment_history(&self, id: &str) -> Result<ApiResponse, ClientError> {
        self.get(&format!("/api/v1/payments/{id}/history")).await
    }

    /// A signed GET of any path and query (`/api/v1/events?delivery_state=failed`).
    pub async fn get(&self, path_and_query: &str) -> Result<ApiResponse, ClientError> {
        let req = self.prepare(Method::GET, path_and_query, b"", Some(&SignSpec::default()))?;
        self.send(&req).await
    }

    /// `GET /api/v1/events?<query>`, signed: a page of the project's callback events, newest
    /// first, each with its attempts and frozen body. `query` is form-encoded like
    /// [`list_payments`](Self::list_payments)' (`delivery_state=failed&limit=50`, `wait=25`
    /// for a long poll).
    pub async fn list_events(&self, query: &str) -> Result<ApiResponse, ClientError> {
        if query.is_empty() {
            self.get("/api/v1/events").await
        } else {
            self.get(&format!("/api/v1/events?{query}")).await
        }
    }

    /// `GET /api/v1/events/{id}`, signed.
    pub async fn get_event(&self, id: &str) -> Result<ApiResponse, ClientError> {
        self.get(&format!("/api/v1/events/{id}")).await
    }

    /// `POST /api/v1/events/{id}/resend`, signed, empty body: a manual resend of the event's
    /// payment (`202` with the new event).
    pub async fn resend_event(&self, id: &str) -> Result<ApiResponse, ClientError> {
        self.post(&format!("/api/v1/events/{id}/resend"), b"").await
    }

    /// `POST /api/v1/events/recover`, signed: resends every undelivered event queued at or
    /// after `since` (and before `until`), both RFC 3339 times.
    pub async fn recover_events(
        &self,
        since: &str,
        until: Option<&str>,
    ) -> Result<ApiResponse, ClientError> {
        let mut body = serde_json::json!({ "since": since });
        if let Some(until) = until {
            body["until"] = serde_json::json!(until);
        }
        let bytes = serde_json::to_vec(&body).expect("a JSON value serialises");
        self.post("/api/v1/events/recover", &bytes).await
    }

    /// `POST /api/v1/payments/{id}/resend_callback`, signed, empty body: "send callback" for a
    /// closed payment, test payments included (`202` with the new event).
    pub async fn resend_payment_callback(&self, id: &str) -> Result<ApiResponse, ClientError> {
        self.post(&format!("/api/v1/payments/{id}/resend_callback"), b"")
            .await
    }

    /// `POST /api/v1/payments/{id}/appeals`, signed: opens an appeal about a closed payment
    /// (`201` with the appeal; `200` with the one stored before under the body's
    /// `idempotency_key`, for the same request). `body` is the appeal as docs/api.md's
    /// "Appeals" gives it, receipts in base64.
    pub async fn open_appeal(
        &self,
        payment_id: &str,
        body: &serde_json::Value,
    ) -> Result<ApiResponse, ClientError> {
        let bytes = serde_json::to_vec(body).expect("a JSON value serialises");
        self.post(&format!("/api/v1/payments/{payment_id}/appeals"), &bytes)
            .await
    }

    /// `GET /api/v1/appeals/{id}`, signed.
    pub async fn get_appeal(&self, id: &str) -> Result<ApiResponse, ClientError> {
        self.get(&format!("/api/v1/appeals/{id}")).await
    }
}

#[cfg(test)]
mod tests {
    use payments_core::auth::{HttpRequestParts, PreparedSignature, SignaturePolicy};
    use payments_core::Timestamp;

    use super::*;

    const CREATED: i64 = 1_790_856_000;
    const BODY: &[u8] = br#"{"merchant_payment_id":"o-1","amount":"100","payment_method":"sbp"}"#;

    fn key() -> SigningKey {
        SigningKey::from_bytes(&[7u8; 32])
    }

    fn client(base_url: &str) -> MerchantClient {
        MerchantClient::from_key(base_url, "nl_test_abcdefSECRET", key()).unwrap()
    }

    fn spec() -> SignSpec {
        SignSpec {
            created: Some(CREATED),
            ..SignSpec::default()
        }
    }

    /// Verifies `req` as the server does, as if it arrived with request target `target`.
    fn verify_as_received(
        req: &PreparedRequest,
        target: &str,
    ) -> (String, Result<(), payments_core::auth::SignatureError>) {
        let headers: Vec<(&str, &[u8])> = req
            .headers
            .iter()
            .map(|(n, v)| (n.as_str(), v.as_bytes()))
            .collect();
        let parts = HttpRequestParts {
            method: req.method.as_str(),
            scheme: "http",
            authority: "127.0.0.1:1",
            path_and_query: target,
            headers: &headers,
            body: &req.body,
        };
        let now = Timestamp::from_unix_secs(CREATED + 5);
        let prepared = PreparedSignature::prepare(&parts, &SignaturePolicy::strict(), now)
            .expect("the signature parses and meets the policy");
        let base = prepared.signature_base().to_string();
        (base, prepared.verify(&key().verifying_key()).map(|_| ()))
    }

    #[test]
    fn a_path_prefix_is_sent_and_signed() {
        for base_url in ["http://127.0.0.1:1/pay", "http://127.0.0.1:1/pay/"] {
            let c = client(base_url);
            let req = c
                .prepare(Method::POST, "/api/v1/payments", BODY, Some(&spec()))
                .unwrap();
            assert_eq!(req.path_and_query, "/pay/api/v1/payments", "{base_url}");
            assert_eq!(
                c.url_of(&req),
                "http://127.0.0.1:1/pay/api/v1/payments",
                "{base_url}"
            );

            let (base, verified) = verify_as_received(&req, "/pay/api/v1/payments");
            assert!(
                base.lines().any(|l| l == "\"@path\": /pay/api/v1/payments"),
                "{base}"
            );
            assert!(verified.is_ok(), "{base_url}: {verified:?}\n{base}");

            // The signature does not hold for the path without the prefix.
            let (_, unprefixed) = verify_as_received(&req, "/api/v1/payments");
            assert!(unprefixed.is_err(), "{base_url}");
        }
    }

    #[test]
    fn a_prefixed_query_is_signed_as_sent() {
        let c = client("http://127.0.0.1:1/pay");
        let req = c
            .prepare(Method::GET, "/api/v1/payments/p-1?x=1", b"", Some(&spec()))
            .unwrap();
        assert_eq!(req.path_and_query, "/pay/api/v1/payments/p-1?x=1");
        let (base, verified) = verify_as_received(&req, "/pay/api/v1/payments/p-1?x=1");
        assert!(
            base.lines()
                .any(|l| l == "\"@path\": /pay/api/v1/payments/p-1"),
            "{base}"
        );
        assert!(base.lines().any(|l| l == "\"@query\": ?x=1"), "{base}");
        assert!(verified.is_ok(), "{verified:?}");
    }

    #[test]
    fn a_plain_base_url_signs_the_api_path() {
        for base_url in ["http://127.0.0.1:1", "http://127.0.0.1:1/"] {
            let c = client(base_url);
            let req = c
                .prepare(Method::POST, "/api/v1/payments", BODY, Some(&spec()))
                .unwrap();
            assert_eq!(req.path_and_query, "/api/v1/payments", "{base_url}");
            assert_eq!(c.url_of(&req), "http://127.0.0.1:1/api/v1/payments");
            let (base, verified) = verify_as_received(&req, "/api/v1/payments");
            assert!(
                base.lines().any(|l| l == "\"@path\": /api/v1/payments"),
                "{base}"
            );
            assert!(verified.is_ok(), "{base_url}: {verified:?}");
        }
    }

    #[test]
    fn unusable_base_urls_are_refused() {
        for bad in [
            "127.0.0.1:8080",
            "ftp://127.0.0.1/pay",
            "http://127.0.0.1:1/pay?x=1",
            "http://127.0.0.1:1/pay#f",
            "http://user:hunter2@127.0.0.1:1",
        ] {
            let err = MerchantClient::from_key(bad, "nl_test_abcdef", key()).unwrap_err();
            assert!(matches!(err, ClientError::BaseUrl { .. }), "{bad}: {err}");
            assert!(!err.to_string().contains("hunter2"), "{err}");
        }
    }

    #[test]
    fn debug_shows_neither_token_nor_key() {
        let shown = format!("{:?}", client("http://127.0.0.1:1/pay"));
        assert!(!shown.contains("SECRET"), "{shown}");
        assert!(shown.contains("nl_test_abcdef"), "{shown}");
        assert!(shown.contains("/pay"), "{shown}");
    }
}
