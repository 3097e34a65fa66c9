//! Creating a payment the way the spec asks a client to: a timeout of at least 15 s (the
//! requisite is picked during the request), and after a timeout or a dropped connection the
//! SAME request again, freshly signed, so no duplicate is possible; every answer acted on
//! through [`next_step`].

use std::time::Duration;

use payments_client::{ApiResponse, ClientError, MerchantClient};
use serde_json::Value;

use crate::advice::{backoff, jitter, next_step, NextStep};

/// How often and how patiently to repeat a create.
#[derive(Debug, Clone, Copy)]
pub struct RetryPolicy {
    /// Sends at most, the first included.
    pub max_attempts: u32,
    /// The first backoff (doubled per retry).
    pub base: Duration,
    /// The largest backoff.
    pub cap: Duration,
}

impl Default for RetryPolicy {
    fn default() -> Self {
        RetryPolicy {
            max_attempts: 6,
            base: Duration::from_secs(1),
            cap: Duration::from_secs(30),
        }
    }
}

/// Why a create stopped without an accepted payment; each text says what to do next.
#[derive(Debug, thiserror::Error)]
pub enum CreateError {
    /// Every send went unanswered (timeout, TLS, connection).
    #[error(
        "no answer after {attempts} attempts (last: {}: {source}); the same merchant_payment_id is safe to send again later",
        no_answer(.source)
    )]
    NoAnswer {
        /// Sends made.
        attempts: u32,
        /// The last send's failure.
        source: reqwest::Error,
    },
    /// The request could not be made (a body or signing error).
    #[error("create: {0}")]
    Client(#[source] ClientError),
    /// `400`: the request is invalid.
    #[error("the request is invalid, nothing was created; fix it and send again: {0}")]
    FixRequest(String),
    /// `401`/`403`: the token or the project's settings.
    #[error("check the token and project settings: {0}")]
    FixCredentials(String),
    /// The signature was refused.
    #[error("signature rejected: {reason}\ncheck the private key, the keyid and this machine's clock{}",
        .signature_base.as_ref().map(|base| format!("\nthe server verified this signature base (sandbox only):\n{base}")).unwrap_or_default()
    )]
    FixSignature {
        /// The server's reason.
        reason: String,
        /// The signature base the sandbox verified, when it says.
        signature_base: Option<String>,
    },
    /// The id holds a payment saved in error.
    #[error("{code}: payment {payment_id} was saved in error and holds this merchant_payment_id; a new attempt needs a new id")]
    SavedInError {
        /// The error code.
        code: String,
        /// The payment holding the id.
        payment_id: String,
    },
    /// The id belongs to another request.
    #[error("{code}: this merchant_payment_id belongs to a different request; use a new id for a new payment")]
    IdTaken {
        /// The error code.
        code: String,
    },
    /// Refused, nothing created.
    #[error("{code}: nothing was created and the id is still free; {hint}")]
    NotAccepted {
        /// The error code.
        code: String,
        /// What to do.
        hint: &'static str,
    },
    /// `404`.
    #[error("not found (is the base URL right?): {0}")]
    NotFound(String),
    /// Still busy after every attempt.
    #[error("{code} after {attempts} attempts; send the same request later")]
    RetryLater {
        /// The code or status.
        code: String,
        /// Sends made.
        attempts: u32,
    },
    /// An answer the spec does not describe.
    #[error("unexpected answer: {0}")]
    Unexpected(String),
    /// No attempt was allowed (`max_attempts` of 0) or none answered.
    #[error("no answer after {attempts} attempts; the same merchant_payment_id is safe to send again later")]
    Exhausted {
        /// Sends allowed.
        attempts: u32,
    },
}

/// Why a request got no answer, in words for the log: a timeout, a TLS handshake the client
/// refused (an untrusted certificate: a private CA needs `--ca-file`), no connection at all,
/// or a connection lost.
pub fn no_answer(e: &reqwest::Error) -> &'static str {
    if e.is_timeout() {
        return "timed out";
    }
    let mut cause = std::error::Error::source(e);
    while let Some(c) = cause {
        let text = c.to_string().to_ascii_lowercase();
        if text.contains("certificate") || text.contains("tls") || text.contains("handshake") {
            return "the TLS handshake failed (is the server's certificate trusted? a private CA needs --ca-file)";
        }
        cause = c.source();
    }
    if e.is_connect() {
        "could not connect"
    } else {
        "connection failed"
    }
}

/// Sends the create until it is accepted, or a step says stop. Every send is signed anew by
/// `create_payment` (fresh nonce, `X-Request-ID` and signature) over the same body, so a
/// repeat after a timeout returns the payment the first send created (`200`), never a second.
pub async fn create_with_retries(
    client: &MerchantClient,
    body: &Value,
    policy: &RetryPolicy,
    log: impl Fn(&str),
) -> Result<Value, CreateError> {
    let RetryPolicy {
        max_attempts,
        base,
        cap,
    } = *policy;
    for attempt in 1..=max_attempts {
        let last = attempt == max_attempts;
        let Some(resp) = send(client, body, attempt, policy, &log).await? else {
            continue;
        };
        match act(next_step(&resp), last, max_attempts)? {
            Act::Accept { created } => {
                if !created {
                    log("(the payment already existed: an earlier attempt had created it)");
                }
                return Ok(resp.json);
            }
            Act::Resign => {
                // The same signed bytes arrived twice; sign again and send at once.
                log(&format!(
                    "attempt {attempt}: nonce already used; signing again"
                ));
            }
            Act::Wait { code, after } => {
                let wait = after.unwrap_or_else(|| backoff(attempt, base, cap))
                    + jitter(Duration::from_millis(500));
                log(&format!(
                    "attempt {attempt}: {code}; retrying in {wait:.1?}"
                ));
                tokio::time::sleep(wait).await;
            }
        }
    }
    Err(CreateError::Exhausted {
        attempts: max_attempts,
    })
}

/// One send: the answer, or `None` after an unanswered send that is not the last (logged,
/// and waited out with a backoff).
async fn send(
    client: &MerchantClient,
    body: &Value,
    attempt: u32,
    policy: &RetryPolicy,
    log: &impl Fn(&str),
) -> Result<Option<ApiResponse>, CreateError> {
    let last = attempt == policy.max_attempts;
    match client.create_payment(body).await {
        Ok(resp) => Ok(Some(resp)),
        Err(ClientError::Http(e)) if !last => {
            // Timeout, refused or dropped connection: the create may or may not have
            // happened; the same merchant_payment_id makes the repeat safe.
            let kind = no_answer(&e);
            let wait = backoff(attempt, policy.base, policy.cap);
            log(&format!(
                "attempt {attempt}: {kind} ({e}); retrying in {wait:.1?}"
            ));
            tokio::time::sleep(wait).await;
            Ok(None)
        }
        Err(ClientError::Http(source)) => Err(CreateError::NoAnswer {
            attempts: policy.max_attempts,
            source,
        }),
        Err(e) => Err(CreateError::Client(e)),
    }
}

/// What the retry loop does after an answer, when it goes on.
enum Act {
    /// Return the payment (`created`: this send created it).
    Accept { created: bool },
    /// Sign again and send at once.
    Resign,
    /// Wait (`after`, else the backoff) and send again.
    Wait {
        code: String,
        after: Option<Duration>,
    },
}

/// The step's error when it says stop (a busy answer on the `last` send included), else what
/// to do next.
fn act(step: NextStep, last: bool, attempts: u32) -> Result<Act, CreateError> {
    match step {
        NextStep::Accepted { created } => Ok(Act::Accept { created }),
        NextStep::FixRequest(why) => Err(CreateError::FixRequest(why)),
        NextStep::FixCredentials(why) => Err(CreateError::FixCredentials(why)),
        NextStep::FixSignature {
            reason,
            signature_base,
        } => Err(CreateError::FixSignature {
            reason,
            signature_base,
        }),
        NextStep::Resign => Ok(Act::Resign),
        NextStep::NewMerchantPaymentId { code, payment_id } => Err(match payment_id {
            Some(payment_id) => CreateError::SavedInError { code, payment_id },
            None => CreateError::IdTaken { code },
        }),
        NextStep::NotAccepted { code, hint } => Err(CreateError::NotAccepted { code, hint }),
        NextStep::NotFound(why) => Err(CreateError::NotFound(why)),
        NextStep::RetryLater { code, after } if !last => Ok(Act::Wait { code, after }),
        NextStep::RetryLater { code, .. } => Err(CreateError::RetryLater { code, attempts }),
        NextStep::Unexpected(why) => Err(CreateError::Unexpected(why)),
    }
}
