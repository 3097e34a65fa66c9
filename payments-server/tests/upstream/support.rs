//! A real local upstream on 127.0.0.1:0 that speaks docs/providers.md: it verifies our
//! signatures, issues one requisite per payment id (the same one again for a repeated id),
//! serves rates, takes appeals, and answers in whatever way a test sets; plus signed
//! notifications to the server.

use std::collections::HashMap;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use axum::body::Bytes;
use axum::extract::State;
use axum::http::{HeaderMap, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use axum::Router;
use payments_core::callback::{signature_header, CallbackSecret, CallbackVerifier};
use payments_core::Timestamp;
use payments_server::config::{ProviderKind, RateSourceKind, Settings};
use serde_json::{json, Value};
use tokio::sync::Notify;

pub(crate) const SECRET: &str = "whsec_dGVzdC11cHN0cmVhbS1zaGFyZWQtc2VjcmV0LTAwMQ==";

pub(crate) fn secret() -> CallbackSecret {
    CallbackSecret::parse(SECRET).unwrap()
}

/// How the upstream answers requisite requests.
#[derive(Debug, Clone)]
pub(crate) enum Mode {
    /// `issued` with a new requisite (the same for a repeated payment id).
    Issue,
    /// `issued`, after a pause.
    IssueAfter(Duration),
    /// `issued`, after a pause for the first request of a payment id, at once for the next.
    IssueSlowOnce(Duration),
    /// `issued`, after a pause, for the first request of a payment id; this status (a refusal,
    /// nothing issued) for the next.
    IssueSlowOnceThen(Duration, u16),
    NoRequisites,
    NotRoutable,
    /// This status with a JSON body.
    Status(u16),
    /// `200` with a body that is not the answer's JSON.
    Malformed,
    /// `200` with this many bytes of (valid-looking) JSON.
    Huge(usize),
}

/// How the upstream answers appeals (`POST /appeals`).
#[derive(Debug, Clone)]
pub(crate) enum AppealMode {
    /// This status with a small JSON body (`202` at start).
    Status(u16),
    /// `200` with this many bytes of body.
    Huge(usize),
    /// `202`, after a pause.
    After(Duration),
}

#[derive(Debug, Default)]
pub(crate) struct Seen {
    /// Appeals received with a valid signature, in order: (body, Idempotency-Key).
    pub(crate) appeals: Vec<(Value, String)>,
    /// Requisite requests, in order: (payment id, Idempotency-Key).
    pub(crate) requests: Vec<(String, String)>,
    /// Requisites issued, by payment id.
    pub(crate) issued: HashMap<String, String>,
    /// Requests whose signature did not verify.
    pub(crate) unsigned: usize,
}

struct Inner {
    mode: Mutex<Mode>,
    appeal_mode: Mutex<AppealMode>,
    rates: Mutex<Option<Value>>,
    /// Rates answers served so far.
    rates_served: AtomicUsize,
    seen: Mutex<Seen>,
    serial: AtomicUsize,
    /// Woken when a delayed answer has been sent.
    answered: Notify,
}

#[derive(Clone)]
pub(crate) struct Upstream {
    inner: Arc<Inner>,
    pub(crate) url: String,
}

fn now() -> i64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap()
        .as_secs() as i64
}

/// A request header's value, empty when missing.
fn header(headers: &HeaderMap, name: &str) -> String {
    headers
        .get(name)
        .and_then(|v| v.to_str().ok())
        .unwrap_or("")
        .to_string()
}

/// Whether the request is signed with the shared secret now; counts it in `unsigned` if not.
fn verified(u: &Upstream, headers: &HeaderMap, body: &[u8]) -> bool {
    let verifier = CallbackVerifier::new(vec![secret()]);
    let ok = verifier
        .verify(
            &header(headers, "x-callback-timestamp"),
            &header(headers, "x-callback-signature"),
            body,
            Timestamp::from_unix_secs(now()),
        )
        .is_ok();
    if !ok {
        u.inner.seen.lock().unwrap().unsigned += 1;
    }
    ok
}

async fn requisites(State(u): State<Upstream>, headers: HeaderMap, body: Bytes) -> Response {
    if !verified(&u, &headers, &body) {
        return StatusCode::UNAUTHORIZED.into_response();
    }
    let req: Value = serde_json::from_slice(&body).unwrap();
    let pid = req["payment_id"].as_str().unwrap().to_string();
    u.inner
        .seen
        .lock()
        .unwrap()
        .requests
        .push((pid.clone(), header(&headers, "idempotency-key")));
    let mode = u.inner.mode.lock().unwrap().clone();
    let issue = |u: &Upstream| {
        let mut seen = u.inner.seen.lock().unwrap();
        let n = u.inner.serial.fetch_add(1, Ordering::SeqCst) + 1;
        let requisite = seen
            .issued
            .entry(pid.clone())
            .or_insert_with(|| format!("7900{n:07}"))
            .clone();
        json!({"payment_id": pid, "result": "issued", "requisite": {
            "requisite": requisite, "holder_name": "UPSTREAM LLC", "bank_name": "Сбербанк",
            "qrcode_link": format!("https://qr.upstream.test/{pid}")
        }})
    };
    let answer = match mode {
        Mode::Issue => issue(&u),
        Mode::IssueAfter(pause) => {
            // The upstream issues at once and answers late.
            let answer = issue(&u);
            tokio::time::sleep(pause).await;
            u.inner.answered.notify_waiters();
            answer
        }
        Mode::IssueSlowOnce(pause) => {
            let first = u.seen(|seen| seen.requests.iter().filter(|r| r.0 == pid).count()) == 1;
            let answer = issue(&u);
            if first {
                tokio::time::sleep(pause).await;
            }
            answer
        }
        Mode::IssueSlowOnceThen(pause, status) => {
            if u.seen(|seen| seen.requests.iter().filter(|r| r.0 == pid).count()) > 1 {
                return (
                    StatusCode::from_u16(status).unwrap(),
                    axum::Json(json!({"error": "busy"})),
                )
                    .into_response();
            }
            let answer = issue(&u);
            tokio::time::sleep(pause).await;
            answer
        }
        Mode::NoRequisites => {
            json!({"payment_id": pid, "result": "no_requisites", "reason": "pool empty"})
        }
        Mode::NotRoutable => {
            json!({"payment_id": pid, "result": "not_routable", "reason": "bank offline"})
        }
        Mode::Status(s) => {
            return (
                StatusCode::from_u16(s).unwrap(),
                axum::Json(json!({"error": "upstream trouble"})),
            )
                .into_response()
        }
        Mode::Malformed => return (StatusCode::OK, "{\"payment_id\": ").into_response(),
        Mode::Huge(n) => {
            let filler = "x".repeat(n);
            json!({"payment_id": pid, "result": "no_requisites", "reason": filler})
        }
    };
    axum::Json(answer).into_response()
}

async fn appeals(State(u): State<Upstream>, headers: HeaderMap, body: Bytes) -> Response {
    if !verified(&u, &headers, &body) {
        return StatusCode::UNAUTHORIZED.into_response();
    }
    let appeal: Value = serde_json::from_slice(&body).unwrap();
    let key = header(&headers, "idempotency-key");
    u.inner.seen.lock().unwrap().appeals.push((appeal, key));
    let mode = u.inner.appeal_mode.lock().unwrap().clone();
    let status = match mode {
        AppealMode::Status(s) => s,
        AppealMode::Huge(n) => return (StatusCode::OK, "x".repeat(n)).into_response(),
        AppealMode::After(pause) => {
            tokio::time::sleep(pause).await;
            202
        }
    };
    (
        StatusCode::from_u16(status).unwrap(),
        axum::Json(json!({"note": "the upstream's words"})),
    )
        .into_response()
}

async fn rates(State(u): State<Upstream>) -> Response {
    let answer = u.inner.rates.lock().unwrap().clone();
    u.inner.rates_served.fetch_add(1, Ordering::SeqCst);
    match answer {
        Some(r) => axum::Json(r).into_response(),
        None => StatusCode::SERVICE_UNAVAILABLE.into_response(),
    }
}

impl Upstream {
    pub(crate) async fn start(mode: Mode) -> Upstream {
        Upstream::start_with(mode, None).await
    }

    /// Over HTTPS with this certificate and key (PEM), at `https://localhost:<port>`.
    pub(crate) async fn start_tls(mode: Mode, cert_pem: &str, key_pem: &str) -> Upstream {
        let _ = rustls::crypto::ring::default_provider().install_default();
        let tls = axum_server::tls_rustls::RustlsConfig::from_pem(
            cert_pem.as_bytes().to_vec(),
            key_pem.as_bytes().to_vec(),
        )
        .await
        .unwrap();
        Upstream::start_with(mode, Some(tls)).await
    }

    async fn start_with(
        mode: Mode,
        tls: Option<axum_server::tls_rustls::RustlsConfig>,
    ) -> Upstream {
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        listener.set_nonblocking(true).unwrap();
        let addr: SocketAddr = listener.local_addr().unwrap();
        let url = match tls {
            Some(_) => format!("https://localhost:{}", addr.port()),
            None => format!("http://{addr}"),
        };
        let u = Upstream {
            inner: Arc::new(Inner {
                mode: Mutex::new(mode),
                appeal_mode: Mutex::new(AppealMode::Status(202)),
                rates: Mutex::new(Some(json!({"rates": {"RUB": "100"}}))),
                rates_served: AtomicUsize::new(0),
                seen: Mutex::default(),
                serial: AtomicUsize::new(0),
                answered: Notify::new(),
            }),
            url,
        };
        let app = Router::new()
            .route("/requisites", post(requisites))
            .route("/appeals", post(appeals))
            .route("/rates", get(rates))
            .with_state(u.clone());
        match tls {
            Some(tls) => {
                tokio::spawn(async move {
                    axum_server::from_tcp_rustls(listener, tls)
                        .serve(app.into_make_service())
                        .await
                });
            }
            None => {
                let listener = tokio::net::TcpListener::from_std(listener).unwrap();
                tokio::spawn(async move { axum::serve(listener, app).await });
            }
        }
        u
    }

    pub(crate) fn set_mode(&self, mode: Mode) {
        *self.inner.mode.lock().unwrap() = mode;
    }

    pub(crate) fn set_appeal_mode(&self, mode: AppealMode) {
        *self.inner.appeal_mode.lock().unwrap() = mode;
    }

    pub(crate) fn set_rates(&self, rates: Option<Value>) {
        *self.inner.rates.lock().unwrap() = rates;
    }

    /// [`Upstream::set_rates`], then waits until the server's refresher has fetched twice
    /// more: the first of those may have read the previous answer, the second (fetches are one
    /// at a time) was asked after the change. So no fetch of the previous rates is still in
    /// flight when this returns: a test may then step the service clock past their age.
    pub(crate) async fn set_rates_and_wait(&self, rates: Option<Value>) {
        let before = self.inner.rates_served.load(Ordering::SeqCst);
        self.set_rates(rates);
        let deadline = std::time::Instant::now() + Duration::from_secs(10);
        while self.inner.rates_served.load(Ordering::SeqCst) < before + 2 {
            assert!(
                std::time::Instant::now() < deadline,
                "the server's rates refresher did not fetch within 10 s"
            );
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
    }

    pub(crate) fn seen<R>(&self, f: impl FnOnce(&Seen) -> R) -> R {
        f(&self.inner.seen.lock().unwrap())
    }

    pub(crate) fn answered(&self) -> tokio::sync::futures::Notified<'_> {
        self.inner.answered.notified()
    }

    /// The server settings for this upstream: HTTP provider and rates, notifications on.
    pub(crate) fn configure(&self, s: &mut Settings) {
        s.upstream.provider = ProviderKind::Http;
        s.upstream.rate_source = RateSourceKind::Http;
        s.upstream.url = Some(format!("{}/requisites", self.url));
        s.upstream.rates_url = Some(format!("{}/rates", self.url));
        s.upstream.secrets = vec![secret()];
        s.upstream.listen = Some(SocketAddr::from(([127, 0, 0, 1], 0)));
        s.upstream.rates_refresh = Duration::from_millis(100);
    }
}

/// A notification body.
pub(crate) fn notification(id: &str, payment: &str, status: &str) -> Value {
    json!({"notification_id": id, "payment_id": payment, "status": status})
}

/// Sends `body` to the server's notification URL, signed at `at` (Unix seconds) with
/// `signing` (the shared secret unless a test says otherwise); answers status and JSON.
pub(crate) async fn notify_signed(
    url: &str,
    body: &[u8],
    at: i64,
    signed_body: &[u8],
) -> (StatusCode, Value) {
    let signature = signature_header(&[&secret()], at, signed_body);
    let r = reqwest::Client::new()
        .post(url)
        .header("content-type", "application/json")
        .header("x-callback-timestamp", at.to_string())
        .header("x-callback-signature", signature)
        .body(body.to_vec())
        .send()
        .await
        .unwrap();
    let status = r.status();
    (status, r.json().await.unwrap_or(Value::Null))
}

/// Sends `body` signed now.
pub(crate) async fn notify(url: &str, body: &Value) -> (StatusCode, Value) {
    notify_at(url, body, now()).await
}

/// Sends `body` signed at `at`.
pub(crate) async fn notify_at(url: &str, body: &Value, at: i64) -> (StatusCode, Value) {
    let bytes = serde_json::to_vec(body).unwrap();
    notify_signed(url, &bytes, at, &bytes).await
}

pub(crate) fn unix_now() -> i64 {
    now()
}

/// A create body.
pub(crate) fn body(mpid: &str, amount: &str) -> Value {
    json!({"merchant_payment_id": mpid, "amount": amount, "payment_method": "sbp"})
}
