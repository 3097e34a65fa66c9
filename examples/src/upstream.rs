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
//! - Several named providers in one process ([`ExampleUpstream::play`], `--provider
//!   NAME=MODE` of the example): `POST /providers/{name}/requisites` answers as the provider's
//!   [`Mode`] says (issue, refuse, or too late), and
//!   `POST /providers/{name}/demo/transfers/{payment_id}/confirm|fail` reports as that
//!   provider; [`providers_settings`] prints the `[[upstream.providers]]` entries for them.
//! - [`ExampleUpstream::answer_after`]: a slow bank, every requisite issued only after a delay.
//! - `POST /appeals` (and `POST /providers/{name}/appeals`): takes an appeal (`202`) after
//!   verifying it like a requisite request, and remembers it ([`ExampleUpstream::appeals`]);
//!   [`ExampleUpstream::answer_appeal`] sends its answer, signed like a report, to the
//!   service's `.../upstream/v1/appeals`; `POST /demo/appeals/{appeal_id}/found|not_found`
//!   does the same from a terminal.

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
    /// The named providers it plays, each with how it answers (`/providers/{name}/...`).
    providers: Mutex<BTreeMap<String, Mode>>,
    /// How long each requisite it issues takes ([`ExampleUpstream::answer_after`]).
    delay: Mutex<Duration>,
    /// The appeals it took, in order ([`ExampleUpstream::appeals`]).
    appeals: Mutex<Vec<ReceivedAppeal>>,
    http: reqwest::Client,
}

/// How a named provider of the example upstream answers its requisite requests: one upstream
/// playing several providers, so that routing and failover can be tried on a laptop.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Mode {
    /// Issues requisites (the same again for a payment id it was asked before).
    Issue,
    /// Answers `no_requisites`: a definite refusal, the next provider is asked.
    NoRequisites,
    /// Answers `not_routable`: a definite refusal, the next provider is asked.
    NotRoutable,
    /// Answers after a minute: past any time limit, so the service takes it as a timeout.
    Slow,
}

impl std::str::FromStr for Mode {
    type Err = UnknownMode;

    fn from_str(s: &str) -> Result<Mode, UnknownMode> {
        match s {
            "issue" => Ok(Mode::Issue),
            "no_requisites" => Ok(Mode::NoRequisites),
            "not_routable" => Ok(Mode::NotRoutable),
            "slow" => Ok(Mode::Slow),
            other => Err(UnknownMode(other.to_string())),
        }
    }
}

/// An appeal the example upstream took (`POST /appeals`).
#[derive(Debug, Clone, PartialEq)]
pub struct ReceivedAppeal {
    /// The named provider it was sent to (`/providers/{name}/appeals`), or `None`.
    pub provider: Option<String>,
    /// Its `appeal_id`.
    pub appeal_id: String,
    /// Its `payment_id`.
    pub payment_id: String,
    /// The `Idempotency-Key` it came with.
    pub idempotency_key: String,
    /// The whole body as sent.
    pub body: Value,
}

/// A provider mode that is none of `issue`, `no_requisites`, `not_routable`, `slow`.
#[derive(Debug, thiserror::Error)]
#[error("{0:?} is not a mode: issue, no_requisites, not_routable or slow")]
pub struct UnknownMode(String);

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
                providers: Mutex::new(BTreeMap::new()),
                delay: Mutex::new(Duration::ZERO),
                appeals: Mutex::new(Vec::new()),
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

    /// The requisites it issued, by payment id: what it answered each payment it was asked
    /// about (the same again for every later request about it).
    pub fn issued_requisites(&self) -> BTreeMap<String, String> {
        let issued = self.inner.issued.lock().expect("never poisoned");
        issued
            .iter()
            .map(|(id, r)| {
                (
                    id.clone(),
                    r["requisite"].as_str().unwrap_or("").to_string(),
                )
            })
            .collect()
    }

    /// Answers every requisite it issues only after `delay` (zero at first): a slow bank,
    /// still within the service's provider budget when `delay` is shorter than it, so that
    /// creates are in flight for a while.
    pub fn answer_after(&self, delay: Duration) {
        *self.inner.delay.lock().expect("never poisoned") = delay;
    }

    /// The appeals it took, in the order they came (a re-sent appeal again each time).
    pub fn appeals(&self) -> Vec<ReceivedAppeal> {
        self.inner.appeals.lock().expect("never poisoned").clone()
    }

    /// Plays the provider `name` too, answering as `mode` at `/providers/{name}/requisites`
    /// (a `[[upstream.providers]]` entry of [`providers_settings`]); a second call changes its
    /// mode.
    pub fn play(&self, name: &str, mode: Mode) {
        let mut providers = self.inner.providers.lock().expect("never poisoned");
        providers.insert(name.to_string(), mode);
    }

    /// The router: `POST /requisites`, `POST /appeals`, `GET /rates`,
    /// `POST /demo/transfers/{id}/{outcome}`, `POST /demo/appeals/{appeal_id}/{outcome}`, and
    /// for each provider it plays ([`ExampleUpstream::play`])
    /// `POST /providers/{name}/requisites`, `POST /providers/{name}/appeals` and
    /// `POST /providers/{name}/demo/transfers/{id}/{outcome}` (reported as that provider).
    pub fn router(&self) -> Router {
        Router::new()
            .route("/requisites", post(requisites))
            .route("/providers/{name}/requisites", post(provider_requisites))
            .route("/appeals", post(appeals))
            .route("/providers/{name}/appeals", post(provider_appeals))
            .route(
                "/demo/appeals/{appeal_id}/{outcome}",
                post(demo_appeal_answer),
            )
            .route("/rates", get(rates))
            .route(
                "/demo/transfers/{payment_id}/{outcome}",
                post(demo_transfer),
            )
            .route(
                "/providers/{name}/demo/transfers/{payment_id}/{outcome}",
                post(provider_demo_transfer),
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
        self.report_as(None, notification_id, payment_id, confirmed, amount)
            .await
    }

    /// [`ExampleUpstream::report`] as the named provider `provider`, to the service's
    /// `.../upstream/v1/notifications/<provider>`.
    pub async fn report_as(
        &self,
        provider: Option<&str>,
        notification_id: &str,
        payment_id: &str,
        confirmed: bool,
        amount: Option<&str>,
    ) -> Result<Value, ReportError> {
        let url = self.notify_url(provider)?;
        let mut body = json!({
            "notification_id": notification_id,
            "payment_id": payment_id,
            "status": if confirmed { "confirmed" } else { "failed" },
        });
        if let Some(a) = amount {
            body["amount"] = json!(a);
        }
        self.send_signed(&url, &body).await
    }

    /// Answers an appeal the service sent ([`ExampleUpstream::appeals`]): `found` with the
    /// amount that arrived, or not found (`None`) with an optional `reason`, to the service's
    /// `.../upstream/v1/appeals` (beside the notification URL). Signed and retried like
    /// [`ExampleUpstream::report`]; `notification_id` identifies the answer.
    pub async fn answer_appeal(
        &self,
        notification_id: &str,
        appeal_id: &str,
        found: Option<&str>,
        reason: Option<&str>,
    ) -> Result<Value, ReportError> {
        self.answer_appeal_as(None, notification_id, appeal_id, found, reason)
            .await
    }

    /// [`ExampleUpstream::answer_appeal`] as the named provider `provider`, to the service's
    /// `.../upstream/v1/appeals/<provider>`.
    pub async fn answer_appeal_as(
        &self,
        provider: Option<&str>,
        notification_id: &str,
        appeal_id: &str,
        found: Option<&str>,
        reason: Option<&str>,
    ) -> Result<Value, ReportError> {
        let notify_url = self.notify_url(None)?;
        let base = notify_url
            .trim_end_matches('/')
            .strip_suffix("/notifications")
            .ok_or_else(|| ReportError::NoAppealsUrl(notify_url.clone()))?;
        let mut url = format!("{base}/appeals");
        if let Some(name) = provider {
            url = format!("{url}/{name}");
        }
        let mut body = json!({
            "notification_id": notification_id,
            "appeal_id": appeal_id,
            "status": if found.is_some() { "found" } else { "not_found" },
        });
        if let Some(a) = found {
            body["amount"] = json!(a);
        }
        if let Some(r) = reason {
            body["reason"] = json!(r);
        }
        self.send_signed(&url, &body).await
    }

    /// The notification URL, for `provider` if named (`.../notifications/<provider>`).
    fn notify_url(&self, provider: Option<&str>) -> Result<String, ReportError> {
        let url = self
            .inner
            .notify_url
            .lock()
            .expect("never poisoned")
            .clone()
            .ok_or(ReportError::NoNotifyUrl)?;
        Ok(match provider {
            Some(name) => format!("{}/{name}", url.trim_end_matches('/')),
            None => url,
        })
    }

    /// Sends `body` to `url` signed, again with a fresh signature until the service answers
    /// `200` (or a `4xx`, which is final); the service's answer.
    async fn send_signed(&self, url: &str, body: &Value) -> Result<Value, ReportError> {
        let body = serde_json::to_vec(body)?;
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
                .post(url)
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
    /// The notification URL does not end in `/notifications`: the appeals URL beside it is
    /// unknown.
    #[error("{0:?} does not end in /notifications: no appeals URL beside it")]
    NoAppealsUrl(String),
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
    answer(&u, Mode::Issue, "the example upstream", &headers, &body).await
}

/// `POST /providers/{name}/requisites`: the named provider's answer, as its mode says.
async fn provider_requisites(
    State(u): State<ExampleUpstream>,
    Path(name): Path<String>,
    headers: HeaderMap,
    body: Bytes,
) -> Response {
    let mode = u
        .inner
        .providers
        .lock()
        .expect("never poisoned")
        .get(&name)
        .copied();
    match mode {
        Some(mode) => answer(&u, mode, &name, &headers, &body).await,
        None => StatusCode::NOT_FOUND.into_response(),
    }
}

/// A requisite request answered as `mode` by the provider `who`.
async fn answer(
    u: &ExampleUpstream,
    mode: Mode,
    who: &str,
    headers: &HeaderMap,
    body: &[u8],
) -> Response {
    if !u.verified(headers, body) {
        return StatusCode::UNAUTHORIZED.into_response();
    }
    let Ok(req) = serde_json::from_slice::<Value>(body) else {
        return StatusCode::BAD_REQUEST.into_response();
    };
    let payment_id = req["payment_id"].as_str().unwrap_or_default().to_string();
    let refusal = |result: &str| {
        Json(json!({"payment_id": payment_id, "result": result,
            "reason": format!("{who} answers {result} (its mode)")}))
        .into_response()
    };
    match mode {
        Mode::NoRequisites => return refusal("no_requisites"),
        Mode::NotRoutable => return refusal("not_routable"),
        Mode::Slow => tokio::time::sleep(Duration::from_secs(60)).await,
        Mode::Issue => {}
    }
    let delay = *u.inner.delay.lock().expect("never poisoned");
    if !delay.is_zero() {
        tokio::time::sleep(delay).await;
    }
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

/// `POST /appeals`: the example upstream takes the appeal.
async fn appeals(State(u): State<ExampleUpstream>, headers: HeaderMap, body: Bytes) -> Response {
    take_appeal(&u, None, &headers, &body)
}

/// `POST /providers/{name}/appeals`: the named provider takes the appeal (`404` for a provider
/// it does not play).
async fn provider_appeals(
    State(u): State<ExampleUpstream>,
    Path(name): Path<String>,
    headers: HeaderMap,
    body: Bytes,
) -> Response {
    let plays = u
        .inner
        .providers
        .lock()
        .expect("never poisoned")
        .contains_key(&name);
    if !plays {
        return StatusCode::NOT_FOUND.into_response();
    }
    take_appeal(&u, Some(name), &headers, &body)
}

/// Verifies an appeal like a requisite request, remembers it and answers `202`: its answer
/// comes later ([`ExampleUpstream::answer_appeal`]).
fn take_appeal(
    u: &ExampleUpstream,
    provider: Option<String>,
    headers: &HeaderMap,
    body: &[u8],
) -> Response {
    if !u.verified(headers, body) {
        return StatusCode::UNAUTHORIZED.into_response();
    }
    let Ok(body) = serde_json::from_slice::<Value>(body) else {
        return StatusCode::BAD_REQUEST.into_response();
    };
    let (Some(appeal_id), Some(payment_id)) =
        (body["appeal_id"].as_str(), body["payment_id"].as_str())
    else {
        return StatusCode::BAD_REQUEST.into_response();
    };
    let received = ReceivedAppeal {
        provider,
        appeal_id: appeal_id.to_string(),
        payment_id: payment_id.to_string(),
        idempotency_key: headers
            .get("idempotency-key")
            .and_then(|v| v.to_str().ok())
            .unwrap_or_default()
            .to_string(),
        body: body.clone(),
    };
    let answer = json!({"appeal_id": received.appeal_id, "taken": true});
    u.inner
        .appeals
        .lock()
        .expect("never poisoned")
        .push(received);
    (StatusCode::ACCEPTED, Json(answer)).into_response()
}

/// `POST /demo/appeals/{appeal_id}/found|not_found`: answers an appeal it took, as the
/// provider it was sent to; `found` with the amount the payer claimed (else the payment's).
async fn demo_appeal_answer(
    State(u): State<ExampleUpstream>,
    Path((appeal_id, outcome)): Path<(String, String)>,
) -> Response {
    let taken = u
        .appeals()
        .into_iter()
        .rev()
        .find(|a| a.appeal_id == appeal_id);
    let Some(appeal) = taken else {
        return StatusCode::NOT_FOUND.into_response();
    };
    let amount = |field: &str| match &appeal.body[field] {
        Value::Null => None,
        Value::String(s) => Some(s.clone()),
        other => Some(other.to_string()),
    };
    let found = match outcome.as_str() {
        "found" => Some(
            amount("claimed_amount")
                .or_else(|| amount("amount"))
                .unwrap_or_default(),
        ),
        "not_found" => None,
        _ => return StatusCode::NOT_FOUND.into_response(),
    };
    let id = format!("demo-appeal-{appeal_id}-{outcome}");
    let reason = found.is_none().then_some("no such transfer (demo)");
    let answered = u
        .answer_appeal_as(
            appeal.provider.as_deref(),
            &id,
            &appeal_id,
            found.as_deref(),
            reason,
        )
        .await;
    match answered {
        Ok(answer) => Json(answer).into_response(),
        Err(e) => (StatusCode::BAD_GATEWAY, e.to_string()).into_response(),
    }
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
    transfer(&u, None, &payment_id, &outcome).await
}

async fn provider_demo_transfer(
    State(u): State<ExampleUpstream>,
    Path((name, payment_id, outcome)): Path<(String, String, String)>,
) -> Response {
    transfer(&u, Some(&name), &payment_id, &outcome).await
}

/// Reports the demo transfer of `payment_id` (`confirm` or `fail`), as `provider` if named.
async fn transfer(
    u: &ExampleUpstream,
    provider: Option<&str>,
    payment_id: &str,
    outcome: &str,
) -> Response {
    let confirmed = match outcome {
        "confirm" => true,
        "fail" => false,
        _ => return StatusCode::NOT_FOUND.into_response(),
    };
    let id = format!("demo-{payment_id}-{outcome}");
    match u
        .report_as(provider, &id, payment_id, confirmed, None)
        .await
    {
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

/// The settings file's `[upstream]` table that connects `payments-server` to an upstream at
/// `base_url` with `secret`, notifications on `notify_listen`. A table: put it after the
/// file's top-level keys.
pub fn server_settings(base_url: &str, secret: &str, notify_listen: &str) -> String {
    format!(
        "[upstream]\nprovider = \"http\"\nrate_source = \"http\"\nurl = \"{base_url}/requisites\"\n\
         rates_url = \"{base_url}/rates\"\nsecrets = [\"{secret}\"]\nlisten = \"{notify_listen}\"\n"
    )
}

/// [`server_settings`] with the providers the upstream plays ([`ExampleUpstream::play`]),
/// in the order given (priority 0, 1, ...), instead of one requisite URL: each a
/// `[[upstream.providers]]` entry at `base_url/providers/{name}/requisites`.
pub fn providers_settings(
    base_url: &str,
    secret: &str,
    notify_listen: &str,
    names: &[&str],
) -> String {
    let mut out = format!(
        "[upstream]\nprovider = \"http\"\nrate_source = \"http\"\n\
         rates_url = \"{base_url}/rates\"\nsecrets = [\"{secret}\"]\nlisten = \"{notify_listen}\"\n"
    );
    for (priority, name) in names.iter().enumerate() {
        out.push_str(&format!(
            "\n[[upstream.providers]]\nname = \"{name}\"\n\
             url = \"{base_url}/providers/{name}/requisites\"\nsecrets = [\"{secret}\"]\n\
             priority = {priority}\n"
        ));
    }
    out
}
