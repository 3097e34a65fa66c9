//! The harness's own upstream: two named providers (`bank-a`, `bank-b`) that honour the
//! provider contract (the same `payment_id` always gets the same answer from one provider) and
//! record every requisite they issue, so that the checker can see a requisite issued twice or a
//! payment asked of two providers. Its faults: slow answers, refusals before acceptance (a
//! `429`: nothing issued) and ambiguous answers (issued, then a `500`). It also sends the
//! providers' signed notifications (a transfer confirmed, maybe with another amount, or failed).

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use axum::body::Bytes;
use axum::extract::{Path, State};
use axum::http::{HeaderMap, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::routing::post;
use axum::{Json, Router};
use payments_core::callback::{signature_header, CallbackSecret};
use payments_providers::sandbox::luhn_check_digit;
use serde_json::{json, Value};

/// The providers' names, in their routing priority (the first is asked first).
pub const PROVIDERS: [&str; 2] = ["bank-a", "bank-b"];

/// Each provider's shared secret (the signatures of both directions).
pub const SECRETS: [&str; 2] = [
    "whsec_Y2hhb3MtYmFuay1hLXVwc3RyZWFtLXNlY3JldC0wMTIz",
    "whsec_Y2hhb3MtYmFuay1iLXVwc3RyZWFtLXNlY3JldC0wMTIz",
];

/// How a provider answers now.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Mode {
    /// At once.
    Normal,
    /// After issuing, holds the answer for 0.5-4 s.
    Slow,
    /// `429` before accepting: nothing issued (the service may ask the next provider).
    Failing,
    /// Issues, then answers `500`: the service cannot know whether it issued.
    Ambiguous,
}

/// One requisite a provider issued.
#[derive(Debug, Clone)]
pub struct Issued {
    /// The provider.
    pub provider: &'static str,
    /// The service's payment id it was issued for.
    pub payment_id: String,
    /// The card or phone number.
    pub requisite: String,
}

/// One report of a provider about a transfer.
#[derive(Debug, Clone)]
pub struct Notification {
    /// The provider's index.
    pub provider: usize,
    /// `notification_id`: a retry of one report keeps it.
    pub id: String,
    /// The service's payment id.
    pub payment_id: String,
    /// `confirmed` (or `failed`).
    pub confirmed: bool,
    /// Another amount that arrived.
    pub amount: Option<String>,
}

/// The upstream's state.
#[derive(Clone)]
pub struct Upstream {
    inner: Arc<Inner>,
}

struct Inner {
    modes: Mutex<[Mode; 2]>,
    /// (provider index, payment id) -> requisite: the idempotency memory.
    memory: Mutex<HashMap<(usize, String), String>>,
    /// Every issue, in order.
    issued: Mutex<Vec<Issued>>,
    /// Requests whose signature did not verify.
    unsigned: Mutex<Vec<String>>,
    counter: std::sync::atomic::AtomicU64,
    seed: u64,
    http: reqwest::Client,
}

impl std::fmt::Debug for Upstream {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Upstream").finish_non_exhaustive()
    }
}

fn secret(i: usize) -> CallbackSecret {
    CallbackSecret::parse(SECRETS[i]).expect("the providers' secrets parse")
}

/// `digits` with their Luhn check digit appended (the sandbox provider's digit).
fn luhn_complete(digits: &str) -> String {
    format!("{digits}{}", luhn_check_digit(digits))
}

fn unix_now() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| i64::try_from(d.as_secs()).unwrap_or(i64::MAX))
}

impl Upstream {
    /// An upstream whose slow answers' delays are drawn from `seed`.
    pub fn new(seed: u64) -> Upstream {
        Upstream {
            inner: Arc::new(Inner {
                modes: Mutex::new([Mode::Normal; 2]),
                memory: Mutex::default(),
                issued: Mutex::default(),
                unsigned: Mutex::default(),
                counter: std::sync::atomic::AtomicU64::new(1),
                seed,
                http: reqwest::Client::builder()
                    .timeout(Duration::from_secs(10))
                    .build()
                    .expect("a plain HTTP client builds"),
            }),
        }
    }

    /// Sets provider `i`'s mode.
    pub fn set_mode(&self, i: usize, mode: Mode) {
        self.inner.modes.lock().expect("modes lock")[i] = mode;
    }

    /// Every requisite issued so far, in order.
    pub fn issued(&self) -> Vec<Issued> {
        self.inner.issued.lock().expect("issued lock").clone()
    }

    /// The provider that issued for `payment_id` first, if any.
    pub fn provider_of(&self, payment_id: &str) -> Option<usize> {
        let issued = self.inner.issued.lock().expect("issued lock");
        let first = issued.iter().find(|i| i.payment_id == payment_id)?;
        PROVIDERS.iter().position(|p| *p == first.provider)
    }

    /// The requests refused for a bad signature.
    pub fn unsigned(&self) -> Vec<String> {
        self.inner.unsigned.lock().expect("unsigned lock").clone()
    }

    /// Serves `POST /<provider>/requisites` on `listener`.
    pub fn serve(&self, listener: tokio::net::TcpListener) {
        let app = Router::new()
            .route("/{provider}/requisites", post(requisites))
            .with_state(self.clone());
        tokio::spawn(async move { axum::serve(listener, app).await });
    }

    /// Sends a provider's signed notification to the node's notification listener
    /// `notify_base` (`http://host:port`). Returns the status and body.
    pub async fn notify(
        &self,
        notify_base: &str,
        n: &Notification,
        timeout: Duration,
    ) -> Result<(u16, Value), reqwest::Error> {
        let Notification {
            provider,
            id: notification_id,
            payment_id,
            confirmed,
            amount,
        } = n;
        let provider = *provider;
        let confirmed = *confirmed;
        let mut body = json!({
            "notification_id": notification_id,
            "payment_id": payment_id,
            "status": if confirmed { "confirmed" } else { "failed" },
        });
        if let Some(a) = amount {
            body["amount"] = json!(a);
        }
        let body = serde_json::to_vec(&body).expect("JSON encodes");
        let at = unix_now();
        let signature = signature_header(&[&secret(provider)], at, &body);
        let answer = self
            .inner
            .http
            .post(format!(
                "{notify_base}/upstream/v1/notifications/{}",
                PROVIDERS[provider]
            ))
            .timeout(timeout)
            .header("content-type", "application/json")
            .header("x-callback-timestamp", at.to_string())
            .header("x-callback-signature", signature)
            .body(body)
            .send()
            .await?;
        let status = answer.status().as_u16();
        let bytes = answer.bytes().await?;
        Ok((
            status,
            serde_json::from_slice(&bytes).unwrap_or(Value::Null),
        ))
    }

    fn verified(&self, provider: usize, headers: &HeaderMap, body: &[u8]) -> bool {
        crate::receiver::signature_verifies(vec![secret(provider)], headers, body)
    }

    /// Issues (or finds) provider `p`'s requisite for `payment_id`.
    fn issue(&self, p: usize, payment_id: &str, method: &str) -> String {
        let mut memory = self.inner.memory.lock().expect("memory lock");
        if let Some(r) = memory.get(&(p, payment_id.to_string())) {
            return r.clone();
        }
        let n = self
            .inner
            .counter
            .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        let number = match method {
            "card_transfer" => luhn_complete(&format!("22{p}0{n:011}")),
            _ => format!("79{p}{n:08}"),
        };
        memory.insert((p, payment_id.to_string()), number.clone());
        self.inner.issued.lock().expect("issued lock").push(Issued {
            provider: PROVIDERS[p],
            payment_id: payment_id.to_string(),
            requisite: number.clone(),
        });
        number
    }

    fn slow_delay(&self, payment_id: &str) -> Duration {
        let h = payment_id.bytes().fold(self.inner.seed | 1, |h, b| {
            (h ^ u64::from(b)).wrapping_mul(0x100_0000_01b3)
        });
        Duration::from_millis(500 + h % 3_500)
    }
}

async fn requisites(
    State(u): State<Upstream>,
    Path(provider): Path<String>,
    headers: HeaderMap,
    body: Bytes,
) -> Response {
    let Some(p) = PROVIDERS.iter().position(|n| *n == provider) else {
        return StatusCode::NOT_FOUND.into_response();
    };
    if !u.verified(p, &headers, &body) {
        u.inner
            .unsigned
            .lock()
            .expect("unsigned lock")
            .push(format!("{provider}: {}", String::from_utf8_lossy(&body)));
        return StatusCode::UNAUTHORIZED.into_response();
    }
    let Ok(req) = serde_json::from_slice::<Value>(&body) else {
        return StatusCode::BAD_REQUEST.into_response();
    };
    let payment_id = req["payment_id"].as_str().unwrap_or_default().to_string();
    let method = req["payment_method"]
        .as_str()
        .unwrap_or_default()
        .to_string();
    let mode = u.inner.modes.lock().expect("modes lock")[p];
    if mode == Mode::Failing {
        return (StatusCode::TOO_MANY_REQUESTS, "busy").into_response();
    }
    let requisite = u.issue(p, &payment_id, &method);
    match mode {
        Mode::Ambiguous => return (StatusCode::INTERNAL_SERVER_ERROR, "oops").into_response(),
        Mode::Slow => tokio::time::sleep(u.slow_delay(&payment_id)).await,
        Mode::Normal | Mode::Failing => {}
    }
    Json(json!({
        "payment_id": payment_id,
        "result": "issued",
        "requisite": {"requisite": requisite, "holder_name": "CHAOS UPSTREAM LLC",
            "bank_name": "Сбербанк"},
    }))
    .into_response()
}
