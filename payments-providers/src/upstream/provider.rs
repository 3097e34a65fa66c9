//! The HTTP requisite provider (`provider = "http"`): one signed `POST` per payment to the
//! upstream's requisite endpoint, idempotent by payment id (docs/providers.md, "Requisites").
//!
//! The answer maps to a [`ProviderOutcome`] and nothing else: `200` with `result` `issued`,
//! `no_requisites`, `not_routable` or `ambiguous`. A connection that could not be made and a
//! `4xx` other than `408` (refused before acceptance) are [`ProviderOutcome::Unavailable`]:
//! nothing was issued. Everything else (another status, a body that is not that JSON, an
//! answer over [`MAX_ANSWER_BYTES`], a broken connection, the request timeout) is
//! [`ProviderOutcome::Ambiguous`]: the upstream may have issued a requisite, so the payment
//! must not get another. What each outcome does to the payment is the core's decision.
//!
//! A connection that could not be made (nothing was sent) and `502`/`503`/`504` are tried
//! again, with the same body and idempotency key and a fresh signature, while the request
//! time limit lasts: the upstream answers the same requisite for the same payment id. A request
//! that got no answer within the time limit is sent again the same way, each time with the
//! whole time limit, while the service's budget for the create lasts and the service still
//! waits; only when that ends is the payment ambiguous. Another provider is never asked.
//!
//! Only an exchange none of whose requests may have been taken is
//! [`ProviderOutcome::Unavailable`] (the core may then ask the next provider): no connection,
//! or a refusal before acceptance (`4xx` but `408`). Once a request timed out or got a
//! `502`/`503`/`504`, a later attempt's refusal or lost connection makes the exchange
//! ambiguous: the earlier request may have issued.
//!
//! The exchange runs on a task of its own. When the service's budget ends first, the service
//! has already recorded the payment as ambiguous; the task still reads the late answer and
//! logs it (an operator reconciles a requisite issued after all), changing nothing.
//!
//! Appeals go to the upstream's appeals endpoint beside the requisite endpoint (docs/providers.md,
//! "Appeals").

use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use payments_core::provider::{
    AppealInquiry, AppealSubmission, IssuedRequisites, ProviderName, ProviderOutcome,
    RequisiteProvider, RequisiteRequest,
};
use payments_core::Clock;
use serde::{Deserialize, Serialize};
use tokio::sync::oneshot;
use tokio::time::Instant;

use crate::upstream::client::{client, read_limited, UpstreamSigner};
use crate::upstream::client::{IDEMPOTENCY_KEY_HEADER, MAX_ANSWER_BYTES};
use crate::upstream::config::{check_url, ProviderConfig, UpstreamConfig, UpstreamError};

mod appeal;

/// Attempts of one request at most (the first and two more).
const MAX_ATTEMPTS: u32 = 3;
/// The pause before the second attempt; doubled before each further one.
const FIRST_RETRY_DELAY: Duration = Duration::from_millis(200);
/// The most requests of one create that may time out: a time limit set far below the budget
/// does not make dozens of requests of one payment.
const MAX_TIMED_OUT: u32 = 4;

/// The requisite request's body.
#[derive(Debug, Serialize)]
struct WireRequest<'a> {
    payment_id: String,
    payment_method: &'static str,
    amount: &'a payments_core::amount::Amount,
    currency: &'a str,
    geo_code: &'a str,
    bank_code: Option<&'a str>,
    is_intrabank: bool,
    is_test: bool,
}

/// The upstream's answer.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct WireAnswer {
    payment_id: String,
    result: String,
    #[serde(default)]
    requisite: Option<WireRequisite>,
    #[serde(default)]
    reason: Option<String>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct WireRequisite {
    requisite: String,
    holder_name: String,
    #[serde(default)]
    bank_name: Option<String>,
    #[serde(default)]
    qrcode_link: Option<String>,
    #[serde(default)]
    deeplink_url: Option<String>,
}

/// The provider of `provider = "http"`: one upstream requisite endpoint.
#[derive(Clone)]
pub struct HttpProvider {
    inner: Arc<Inner>,
}

struct Inner {
    client: reqwest::Client,
    url: reqwest::Url,
    signer: UpstreamSigner,
    timeout: Duration,
    /// [`UpstreamConfig::provider_budget`].
    budget: Duration,
    trace_headers: fn() -> Vec<(String, String)>,
}

impl std::fmt::Debug for HttpProvider {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("HttpProvider")
            .field("url", &self.inner.url.as_str())
            .finish_non_exhaustive()
    }
}

impl HttpProvider {
    /// The provider of `config.url` and `config.secrets` (at least one), with the client of
    /// `config`, signing with `clock`'s time.
    pub fn new(
        config: &UpstreamConfig,
        clock: Arc<dyn Clock>,
    ) -> Result<HttpProvider, UpstreamError> {
        const ADAPTER: &str = "provider = \"http\"";
        let url = config.url.as_deref().ok_or(UpstreamError::Missing {
            adapter: ADAPTER,
            needs: "upstream_url",
        })?;
        let url = check_url(url)?;
        if config.secrets.is_empty() {
            return Err(UpstreamError::Missing {
                adapter: ADAPTER,
                needs: "upstream_secrets",
            });
        }
        Ok(HttpProvider {
            inner: Arc::new(Inner {
                client: client(config)?,
                url,
                signer: UpstreamSigner::new(config.secrets.clone(), clock),
                timeout: config.timeout,
                budget: config.provider_budget,
                trace_headers: config.trace_headers,
            }),
        })
    }

    /// The routed provider `p`: its URL, secrets and time limit, with the client of `config`
    /// (trust roots, pool).
    pub fn for_provider(
        config: &UpstreamConfig,
        p: &ProviderConfig,
        clock: Arc<dyn Clock>,
    ) -> Result<HttpProvider, UpstreamError> {
        let url = check_url(&p.url).map_err(|source| UpstreamError::ProviderUrl {
            name: p.name.clone(),
            source,
        })?;
        Ok(HttpProvider {
            inner: Arc::new(Inner {
                client: client(config)?,
                url,
                signer: UpstreamSigner::new(p.secrets.clone(), clock),
                timeout: p.timeout.unwrap_or(config.timeout),
                budget: config.provider_budget,
                trace_headers: config.trace_headers,
            }),
        })
    }
}

#[async_trait]
impl RequisiteProvider for HttpProvider {
    async fn issue(&self, request: &RequisiteRequest) -> ProviderOutcome {
        let (tx, rx) = oneshot::channel();
        let inner = self.inner.clone();
        let request = request.clone();
        // The task carries the caller's span: its trace goes on to the upstream.
        let span = tracing::Span::current();
        tokio::spawn(tracing::Instrument::instrument(
            async move {
                let outcome = inner.exchange(&request, &tx).await;
                if let Err(late) = tx.send(outcome) {
                    // The service's budget ended first: the payment is already ambiguous.
                    tracing::warn!(
                        payment_id = %request.payment_id,
                        outcome = late.as_str(),
                        "requisite provider: an answer after the budget; the payment stays \
                         provider_result_ambiguous (reconcile with the upstream)"
                    );
                }
            },
            span,
        ));
        rx.await.unwrap_or_else(|_| {
            ProviderOutcome::Ambiguous("the requisite request ended abnormally".into())
        })
    }

    /// One signed `POST` of the appeal to the upstream's appeals endpoint, beside the
    /// requisite endpoint (docs/providers.md, "Appeals"): `2xx` taken, `404`/`405`/`501` not
    /// supported, anything else failed (sent again later by the service).
    async fn submit_appeal(
        &self,
        name: &ProviderName,
        inquiry: &AppealInquiry,
    ) -> AppealSubmission {
        let _ = name;
        appeal::submit(&self.inner, inquiry).await
    }
}

impl Inner {
    /// The request, its retries and the mapping of the answer; `waiting` is the service's
    /// end of the answer (a request that timed out is sent again only while it is open).
    async fn exchange(
        &self,
        request: &RequisiteRequest,
        waiting: &oneshot::Sender<ProviderOutcome>,
    ) -> ProviderOutcome {
        let body = match serde_json::to_vec(&WireRequest {
            payment_id: request.payment_id.to_string(),
            payment_method: request.payment_method.as_str(),
            amount: &request.amount,
            currency: request.currency.as_str(),
            geo_code: request.geo_code.as_str(),
            bank_code: request.bank_code.as_deref(),
            is_intrabank: request.is_intrabank,
            is_test: request.is_test,
        }) {
            Ok(body) => body,
            Err(e) => return ProviderOutcome::Ambiguous(format!("request body: {e}")),
        };
        let budget_ends = Instant::now() + self.budget;
        let mut deadline = Instant::now() + self.timeout;
        let mut delay = FIRST_RETRY_DELAY;
        let mut attempt = 1;
        let mut timed_out = 0;
        // The first attempt that may have reached the upstream: it may have issued, so no
        // later attempt's refusal makes the payment's outcome "nothing was issued".
        let mut reached: Option<String> = None;
        loop {
            let result = self.attempt(request, &body).await;
            timed_out += u32::from(matches!(result, Attempt::TimedOut(_)));
            if matches!(result, Attempt::TimedOut(_))
                && timed_out < MAX_TIMED_OUT
                && Instant::now() < budget_ends
                && !waiting.is_closed()
            {
                // No answer in time: the same provider, the same payment id, asked again.
                tracing::info!(
                    payment_id = %request.payment_id,
                    error = %result.describe(),
                    "requisite provider: no answer in time; asking again"
                );
                deadline = Instant::now() + self.timeout;
                reached.get_or_insert_with(|| result.describe());
                continue;
            }
            let retry = match &result {
                Attempt::NotSent(_) => true,
                Attempt::Status(s) => matches!(s, 502..=504),
                Attempt::Answer(_) | Attempt::Failed(_) | Attempt::TimedOut(_) => false,
            };
            if !retry || attempt >= MAX_ATTEMPTS || Instant::now() + delay >= deadline {
                return result.outcome_after(reached, request);
            }
            tracing::info!(
                payment_id = %request.payment_id,
                attempt,
                error = %result.describe(),
                "requisite provider: trying again"
            );
            if result.may_have_reached() {
                reached.get_or_insert_with(|| result.describe());
            }
            tokio::time::sleep(delay).await;
            delay *= 2;
            attempt += 1;
        }
    }

    async fn attempt(&self, request: &RequisiteRequest, body: &[u8]) -> Attempt {
        let mut builder = self
            .client
            .post(self.url.clone())
            .header(reqwest::header::CONTENT_TYPE, "application/json")
            .header(IDEMPOTENCY_KEY_HEADER, request.payment_id.to_string())
            // This provider's own limit (`[[upstream.providers]] timeout`).
            .timeout(self.timeout)
            .body(body.to_vec());
        // The trace goes on to the upstream (`traceparent`) when traces are exported.
        for (name, value) in (self.trace_headers)() {
            builder = builder.header(name, value);
        }
        let response = match self.signer.sign(builder, body).send().await {
            Ok(r) => r,
            Err(e) if e.is_connect() => return Attempt::NotSent(error_text(&e)),
            Err(e) if e.is_timeout() => return Attempt::TimedOut(error_text(&e)),
            Err(e) => return Attempt::Failed(error_text(&e)),
        };
        let status = response.status().as_u16();
        if status != 200 {
            return Attempt::Status(status);
        }
        match read_limited(response, MAX_ANSWER_BYTES).await {
            Ok(bytes) => Attempt::Answer(bytes),
            Err(e) => Attempt::Failed(e.to_string()),
        }
    }
}

/// One attempt's result.
enum Attempt {
    /// No connection: nothing was sent.
    NotSent(String),
    /// Sent, but the exchange broke (reset, oversized answer).
    Failed(String),
    /// Sent, and no answer within the time limit.
    TimedOut(String),
    /// An answer with another status than `200`.
    Status(u16),
    /// A `200` answer's body.
    Answer(Vec<u8>),
}

impl Attempt {
    fn describe(&self) -> String {
        match self {
            Attempt::NotSent(e) => format!("not sent: {e}"),
            Attempt::Failed(e) | Attempt::TimedOut(e) => e.clone(),
            Attempt::Status(s) => format!("the upstream answered {s}"),
            Attempt::Answer(_) => "an answer".into(),
        }
    }

    /// Whether the upstream may have taken this attempt's request (and issued): anything but a
    /// connection never made and a refusal before acceptance.
    fn may_have_reached(&self) -> bool {
        !matches!(
            self,
            Attempt::NotSent(_) | Attempt::Status(400..=407 | 409..=499)
        )
    }

    /// The outcome of the last attempt of an exchange in which `reached` describes an earlier
    /// attempt that may have reached the upstream: a refusal of the last one (or no connection)
    /// says nothing of the earlier request, which may have issued, so it is ambiguous then.
    fn outcome_after(self, reached: Option<String>, request: &RequisiteRequest) -> ProviderOutcome {
        match reached {
            Some(earlier) if !self.may_have_reached() => ProviderOutcome::Ambiguous(format!(
                "requisite provider: {earlier}; then {}",
                self.describe()
            )),
            _ => self.outcome(request),
        }
    }

    fn outcome(self, request: &RequisiteRequest) -> ProviderOutcome {
        let body = match self {
            Attempt::Answer(body) => body,
            // Nothing reached the upstream, or it refused the request before accepting it:
            // nothing was issued (another provider may be asked).
            refused if !refused.may_have_reached() => {
                return ProviderOutcome::Unavailable(format!(
                    "requisite provider: {}",
                    refused.describe()
                ))
            }
            other => {
                return ProviderOutcome::Ambiguous(format!(
                    "requisite provider: {}",
                    other.describe()
                ))
            }
        };
        parse_answer(&body, request).unwrap_or_else(|e| {
            ProviderOutcome::Ambiguous(format!("requisite provider: malformed answer: {e}"))
        })
    }
}

/// Why a `200` answer is malformed.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum AnswerError {
    /// Not the answer's JSON.
    #[error("{0}")]
    Json(#[from] serde_json::Error),
    /// The answer of another payment.
    #[error("payment_id {0:?} is not the payment asked for")]
    OtherPayment(String),
    /// `issued` without the requisite.
    #[error("result issued without a requisite")]
    NoRequisite,
    /// A requisite field out of its rule.
    #[error("{field}: {rule}")]
    Field {
        /// The field (`requisite.holder_name`, ...).
        field: &'static str,
        /// Its rule.
        rule: String,
    },
    /// A result this version does not know.
    #[error("unknown result {0:?}")]
    UnknownResult(String),
}

/// The outcome a `200` answer states, or why it is malformed.
fn parse_answer(body: &[u8], request: &RequisiteRequest) -> Result<ProviderOutcome, AnswerError> {
    let answer: WireAnswer = serde_json::from_slice(body)?;
    if answer.payment_id != request.payment_id.to_string() {
        return Err(AnswerError::OtherPayment(answer.payment_id));
    }
    let reason = |default: &str| {
        let r = answer.reason.clone().unwrap_or_else(|| default.to_string());
        r.chars().take(500).collect::<String>()
    };
    Ok(match answer.result.as_str() {
        "issued" => {
            let r = answer.requisite.ok_or(AnswerError::NoRequisite)?;
            let mut issued = IssuedRequisites::new(
                text("requisite.requisite", r.requisite, 64)?,
                text("requisite.holder_name", r.holder_name, 128)?,
            );
            issued.bank_name = r
                .bank_name
                .map(|b| text("requisite.bank_name", b, 128))
                .transpose()?;
            issued.qrcode_link = r
                .qrcode_link
                .map(|l| link("requisite.qrcode_link", l))
                .transpose()?;
            issued.deeplink_url = r
                .deeplink_url
                .map(|l| link("requisite.deeplink_url", l))
                .transpose()?;
            ProviderOutcome::Issued(issued)
        }
        "no_requisites" => ProviderOutcome::NoRequisites(reason("no requisites available")),
        "not_routable" => ProviderOutcome::NotRoutable(reason("the payment cannot be routed")),
        "ambiguous" => ProviderOutcome::Ambiguous(reason("the upstream's result is unknown")),
        other => return Err(AnswerError::UnknownResult(other.to_string())),
    })
}

/// A non-empty text field of at most `max` characters without control characters.
fn text(field: &'static str, value: String, max: usize) -> Result<String, AnswerError> {
    let trimmed = value.trim();
    if trimmed.is_empty() || trimmed.chars().count() > max || trimmed.chars().any(char::is_control)
    {
        return Err(AnswerError::Field {
            field,
            rule: format!("1 to {max} characters without control characters"),
        });
    }
    Ok(trimmed.to_string())
}

/// A link shown to the payer: `https://`, at most 2048 characters.
fn link(field: &'static str, value: String) -> Result<String, AnswerError> {
    if value.len() > 2048 || !value.starts_with("https://") || value.chars().any(char::is_control) {
        return Err(AnswerError::Field {
            field,
            rule: "an https:// URL of at most 2048 characters".into(),
        });
    }
    Ok(value)
}

/// A client error with its causes, without the URL's repetition.
fn error_text(e: &reqwest::Error) -> String {
    let mut parts = vec![if e.is_timeout() {
        "timeout".to_string()
    } else if e.is_connect() {
        "connect".to_string()
    } else {
        "request".to_string()
    }];
    let mut source = std::error::Error::source(e);
    while let Some(err) = source {
        let t = err.to_string();
        if !parts.contains(&t) {
            parts.push(t);
        }
        source = err.source();
    }
    parts.join(": ")
}

#[cfg(test)]
mod tests {
    use super::*;
    use payments_core::amount::Amount;
    use payments_core::bank::CountryCode;
    use payments_core::payment::{Currency, PaymentMethod};
    use payments_core::PaymentId;

    fn request() -> RequisiteRequest {
        RequisiteRequest {
            payment_id: "0191f2a4-1c1f-7a3e-9b1e-3c2d1e0f9a8b"
                .parse::<PaymentId>()
                .unwrap(),
            amount: Amount::parse("3400.00").unwrap(),
            currency: Currency::RUB,
            payment_method: PaymentMethod::Sbp,
            geo_code: CountryCode::parse("RU").unwrap(),
            bank_code: None,
            is_intrabank: false,
            is_test: false,
        }
    }

    fn parse(json: serde_json::Value) -> Result<ProviderOutcome, AnswerError> {
        parse_answer(&serde_json::to_vec(&json).unwrap(), &request())
    }

    #[test]
    fn answers_map_to_outcomes() {
        let id = request().payment_id.to_string();
        let issued = parse(serde_json::json!({
            "payment_id": id, "result": "issued",
            "requisite": {"requisite": "79001234567", "holder_name": "IVAN I.", "bank_name": "Сбербанк"}
        }))
        .unwrap();
        assert!(matches!(issued, ProviderOutcome::Issued(r) if r.requisite == "79001234567"));
        assert_eq!(
            parse(
                serde_json::json!({"payment_id": id, "result": "no_requisites", "reason": "pool empty"})
            )
            .ok(),
            Some(ProviderOutcome::NoRequisites("pool empty".into()))
        );
        assert!(matches!(
            parse(serde_json::json!({"payment_id": id, "result": "not_routable"})),
            Ok(ProviderOutcome::NotRoutable(_))
        ));
        assert!(matches!(
            parse(serde_json::json!({"payment_id": id, "result": "ambiguous"})),
            Ok(ProviderOutcome::Ambiguous(_))
        ));
    }

    #[test]
    fn malformed_answers_are_refused() {
        let id = request().payment_id.to_string();
        for bad in [
            serde_json::json!({"payment_id": id, "result": "issued"}),
            serde_json::json!({"payment_id": id, "result": "maybe"}),
            serde_json::json!({"payment_id": "another", "result": "no_requisites"}),
            serde_json::json!({"payment_id": id, "result": "issued",
                "requisite": {"requisite": "", "holder_name": "X"}}),
            serde_json::json!({"payment_id": id, "result": "issued",
                "requisite": {"requisite": "1", "holder_name": "X", "qrcode_link": "http://x"}}),
            serde_json::json!({"payment_id": id, "result": "no_requisites", "extra": 1}),
        ] {
            assert!(parse(bad.clone()).is_err(), "{bad}");
        }
        assert!(parse_answer(b"not json", &request()).is_err());
    }
}
