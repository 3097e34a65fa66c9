//! An example upstream: the payment company's side of docs/providers.md, the example behind
//! `cargo run -p payments-examples --example upstream`. A real one sits in front of a bank or
//! a processor; this one keeps everything in memory.
//!
//! - `POST /requisites`: verifies the service's signature (the callback scheme, 300 s),
//!   answers the same requisite for the same `payment_id` (the idempotency rule), a new one
//!   from its pool otherwise; `not_routable` for methods it does not offer.
//! - `GET /rates`: its courses (units per 1 USDT), signed request verified too.
//! - [`ExampleUpstream::report`]: the bank saw a transfer (or its failure): a signed
//!   notification to the service's notification URL, retried with a fresh signature until the
//!   service answers `200` (or a `4xx`, which is final).
//! - `POST /demo/transfers/{payment_id}/confirm|fail`: the same from a terminal (`curl`).

use std::collections::{BTreeMap, HashMap};
use std::net::SocketAddr;
use std::sync::{Arc, Mutex};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use axum::body::Bytes;
use axum::extract::{Path, State};
use axum::http::{HeaderMap, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use axum::{Json, Router};
use payments_core::callback::{signature_header, CallbackSecret, CallbackVerifier};
use payments_core::Timestamp;
use serde_json::{json, Value};

/// The example upstream's state.
#[derive(Clone)]
pub struct ExampleUpstream {
    inner: Arc<Inner>,
}

struct Inner {
    secret: CallbackSecret,
    /// The service's notification URL (`.../upstream/v1/notifications`).
    notify_url: Mutex<Option<String>>,
    rates: BTreeMap<String, String>,
    /// Requisites issued, by payment id: the idempotency memory.
    issued: Mutex<HashMap<String, Value>>,
    http: reqwest::Client,
}

impl std::fmt::Debug for ExampleUpstream {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ExampleUpstream").finish_non_exhaustive()
    }
}

fn unix_now() -> i64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_secs() as i64)
}

/// The Luhn check digit appended.
fn luhn_complete(digits: &str) -> String {
    let sum: u32 = digits
        .bytes()
        .rev()
        .enumerate()
        .map(|(i, b)| {
            let d = u32::from(b - b'0');
            match (i % 2 == 0, d * 2) {
                (true, x) if x > 9 => x - 9,
                (true, x) => x,
                (false, _) => d,
            }
        })
        .sum();
    format!("{digits}{}", (10 - sum % 10) % 10)
}

impl ExampleUpstream {
    /// An upstream sharing `secret` with the service, quoting RUB at 95.50 and KZT at 480.
    pub fn new(secret: CallbackSecret) -> ExampleUpstream {
        let rates = [("RUB", "95.50"), ("KZT", "480")]
            .into_iter()
            .map(|(c, r)| (c.to_string(), r.to_string()))
            .collect();
        ExampleUpstream {
            inner: Arc::new(Inner {
                secret,
                notify_url: Mutex::new(None),
                rates,
                issued: Mutex::new(HashMap::new()),
                http: reqwest::Client::builder()
                    .timeout(Duration::from_secs(10))
                    .build()
                    .expect("a plain HTTP client builds"),
            }),
        }
    }

    /// Where notifications go: the service's `.../upstream/v1/notifications`.
    pub fn set_notify_url(&self, url: &str) {
        *self.inner.notify_url.lock().expect("never poisoned") = Some(url.to_string());
    }

    /// How many payments got a requisite.
    pub fn issued(&self) -> usize {
        self.inner.issued.lock().expect("never poisoned").len()
    }

    /// The router: `POST /requisites`, `GET /rates`, `POST /demo/transfers/{id}/{outcome}`.
    pub fn router(&self) -> Router {
        Router::new()
            .route("/requisites", post(requisites))
            .route("/rates", get(rates))
            .route(
                "/demo/transfers/{payment_id}/{outcome}",
                post(demo_transfer),
            )
            .with_state(self.clone())
    }

    /// Serves the router on `listener` until the task is dropped.
    pub async fn serve(self, listener: tokio::net::TcpListener) -> std::io::Result<()> {
        axum::serve(listener, self.router()).await
    }

    fn verified(&self, headers: &HeaderMap, body: &[u8]) -> bool {
        let header = |n: &str| {
            headers
                .get(n)
                .and_then(|v| v.to_str().ok())
                .unwrap_or("")
                .to_string()
        };
        CallbackVerifier::new(vec![self.inner.secret.clone()])
            .verify(
                &header("x-callback-timestamp"),
                &header("x-callback-signature"),
                body,
                Timestamp::from_unix_secs(unix_now()),
            )
            .is_ok()
    }

    /// Reports a transfer to the service: `confirmed` (with `amount` if another amount
    /// arrived) or `failed`. `notification_id` identifies the report: a retry uses the same id
    /// and a fresh signature. Returns the service's answer.
    pub async fn report(
        &self,
        notification_id: &str,
        payment_id: &str,
        confirmed: bool,
        amount: Option<&str>,
    ) -> Result<Value, ReportError> {
        let url = self
            .inner
            .notify_url
            .lock()
            .expect("never poisoned")
            .clone()
            .ok_or(ReportError::NoNotifyUrl)?;
        let mut body = json!({
            "notification_id": notification_id,
            "payment_id": payment_id,
            "status": if confirmed { "confirmed" } else { "failed" },
        });
        if let Some(a) = amount {
            body["amount"] = json!(a);
        }
        let body = serde_json::to_vec(&body)?;
        let mut attempt = 0u32;
        loop {
            if attempt > 0 {
                // At least a second apart: the same second would be the same signed request
                // (a replay, 409).
                tokio::time::sleep(Duration::from_secs(1 << attempt)).await;
            }
            let at = unix_now();
            let signature = signature_header(&[&self.inner.secret], at, &body);
            let sent = self
                .inner
                .http
                .post(&url)
                .header("content-type", "application/json")
                .header("x-callback-timestamp", at.to_string())
                .header("x-callback-signature", signature)
                .body(body.clone())
                .send()
                .await;
            let failure = match sent {
                Ok(r) if r.status().is_success() => return Ok(r.json().await?),
                // A 4xx is the service's final word on this notification.
                Ok(r) if r.status().is_client_error() => {
                    let status = r.status();
                    return Err(ReportError::Refused {
                        status,
                        body: r.text().await.unwrap_or_default(),
                    });
                }
                Ok(r) => Unanswered::Status(r.status()),
                Err(e) => Unanswered::Send(e),
            };
            attempt += 1;
            if attempt == REPORT_ATTEMPTS {
                return Err(ReportError::NotTaken(failure));
            }
        }
    }
}

/// Sends of one notification at most.
const REPORT_ATTEMPTS: u32 = 5;

/// Why [`ExampleUpstream::report`] did not get the service's answer.
#[derive(Debug, thiserror::Error)]
pub enum ReportError {
    /// [`ExampleUpstream::set_notify_url`] was not called.
    #[error("no notification URL set")]
    NoNotifyUrl,
    /// The notification could not be encoded.
    #[error(transparent)]
    Encode(#[from] serde_json::Error),
    /// The service's answer could not be read.
    #[error(transparent)]
    Answer(#[from] reqwest::Error),
    /// The service refused the notification (a `4xx`, its final word).
    #[error("{status}: {body}")]
    Refused {
        /// The status.
        status: StatusCode,
        /// The answer's body.
        body: String,
    },
    /// Every attempt failed; the last one's failure.
    #[error("the service did not take the notification: {0}")]
    NotTaken(#[source] Unanswered),
}

/// How the last attempt of a notification failed.
#[derive(Debug, thiserror::Error)]
pub enum Unanswered {
    /// A status that is neither success nor `4xx`.
    #[error("{0}")]
    Status(StatusCode),
    /// No answer.
    #[error(transparent)]
    Send(reqwest::Error),
}

async fn requisites(State(u): State<ExampleUpstream>, headers: HeaderMap, body: Bytes) -> Response {
    if !u.verified(&headers, &body) {
        return StatusCode::UNAUTHORIZED.into_response();
    }
    let Ok(req) = serde_json::from_slice::<Value>(&body) else {
        return StatusCode::BAD_REQUEST.into_response();
    };
    let payment_id = req["payment_id"].as_str().unwrap_or_default().to_string();
    let method = req["payment_method"].as_str().unwrap_or_default();
    if method != "card_transfer" && method != "sbp" {
        return Json(json!({"payment_id": payment_id, "result": "not_routable",
            "reason": format!("method {method} is not offered")}))
        .into_response();
    }
    let mut issued = u.inner.issued.lock().expect("never poisoned");
    let n = issued.len() + 1;
    // The same payment id gets the same requisite: a retry never issues a second one.
    let requisite = issued
        .entry(payment_id.clone())
        .or_insert_with(|| {
            let number = match method {
                "card_transfer" => luhn_complete(&format!("220099{n:09}")),
                _ => format!("7901{n:07}"),
            };
            json!({"requisite": number, "holder_name": "EXAMPLE UPSTREAM LLC", "bank_name": "Сбербанк"})
        })
        .clone();
    Json(json!({"payment_id": payment_id, "result": "issued", "requisite": requisite}))
        .into_response()
}

async fn rates(State(u): State<ExampleUpstream>, headers: HeaderMap) -> Response {
    if !u.verified(&headers, b"") {
        return StatusCode::UNAUTHORIZED.into_response();
    }
    Json(json!({"rates": u.inner.rates})).into_response()
}

async fn demo_transfer(
    State(u): State<ExampleUpstream>,
    Path((payment_id, outcome)): Path<(String, String)>,
) -> Response {
    let confirmed = match outcome.as_str() {
        "confirm" => true,
        "fail" => false,
        _ => return StatusCode::NOT_FOUND.into_response(),
    };
    let id = format!("demo-{payment_id}-{outcome}");
    match u.report(&id, &payment_id, confirmed, None).await {
        Ok(answer) => Json(answer).into_response(),
        Err(e) => (StatusCode::BAD_GATEWAY, e.to_string()).into_response(),
    }
}

/// Binds `addr` and serves the example upstream there; returns its base URL.
pub async fn start(upstream: ExampleUpstream, addr: SocketAddr) -> std::io::Result<String> {
    let listener = tokio::net::TcpListener::bind(addr).await?;
    let url = format!("http://{}", listener.local_addr()?);
    tokio::spawn(upstream.serve(listener));
    Ok(url)
}

/// The settings file lines that connect `payments-server` to an upstream at `base_url` with
/// `secret`, notifications on `notify_listen`.
pub fn server_settings(base_url: &str, secret: &str, notify_listen: &str) -> String {
    format!(
        "provider = \"http\"\nrate_source = \"http\"\nupstream_url = \"{base_url}/requisites\"\n\
         upstream_rates_url = \"{base_url}/rates\"\nupstream_secrets = [\"{secret}\"]\n\
         upstream_listen = \"{notify_listen}\"\n"
    )
}
