//! Creating a payment the way the spec asks a client to: a timeout of at least 15 s (the
//! requisite is picked during the request), and after a timeout or a dropped connection the
//! SAME request again, freshly signed, so no duplicate is possible; every answer acted on
//! through [`next_step`].

use std::time::Duration;

use payments_client::{ClientError, MerchantClient};
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
) -> Result<Value, String> {
    let RetryPolicy {
        max_attempts,
        base,
        cap,
    } = *policy;
    for attempt in 1..=max_attempts {
        let last = attempt == max_attempts;
        let resp = match client.create_payment(body).await {
            Ok(resp) => resp,
            Err(ClientError::Http(e)) if !last => {
                // Timeout, refused or dropped connection: the create may or may not have
                // happened; the same merchant_payment_id makes the repeat safe.
                let kind = no_answer(&e);
                let wait = backoff(attempt, base, cap);
                log(&format!("attempt {attempt}: {kind} ({e}); retrying in {wait:.1?}"));
                tokio::time::sleep(wait).await;
                continue;
            }
            Err(ClientError::Http(e)) => {
                return Err(format!(
                    "no answer after {max_attempts} attempts (last: {}: {e}); the same merchant_payment_id is safe to send again later",
                    no_answer(&e)
                ))
            }
            Err(e) => return Err(format!("create: {e}")),
        };
        match next_step(&resp) {
            NextStep::Accepted { created } => {
                if !created {
                    log("(the payment already existed: an earlier attempt had created it)");
                }
                return Ok(resp.json);
            }
            NextStep::FixRequest(why) => {
                return Err(format!(
                    "the request is invalid, nothing was created; fix it and send again: {why}"
                ))
            }
            NextStep::FixCredentials(why) => {
                return Err(format!("check the token and project settings: {why}"))
            }
            NextStep::FixSignature {
                reason,
                signature_base,
            } => {
                let mut msg = format!(
                    "signature rejected: {reason}\ncheck the private key, the keyid and this machine's clock"
                );
                if let Some(base) = signature_base {
                    msg.push_str("\nthe server verified this signature base (sandbox only):\n");
                    msg.push_str(&base);
                }
                return Err(msg);
            }
            NextStep::Resign => {
                // The same signed bytes arrived twice; sign again and send at once.
                log(&format!("attempt {attempt}: nonce already used; signing again"));
                continue;
            }
            NextStep::NewMerchantPaymentId { code, payment_id } => {
                return Err(match payment_id {
                    Some(p) => format!(
                        "{code}: payment {p} was saved in error and holds this merchant_payment_id; a new attempt needs a new id"
                    ),
                    None => format!(
                        "{code}: this merchant_payment_id belongs to a different request; use a new id for a new payment"
                    ),
                })
            }
            NextStep::NotAccepted { code, hint } => {
                return Err(format!(
                    "{code}: nothing was created and the id is still free; {hint}"
                ))
            }
            NextStep::NotFound(why) => {
                return Err(format!("not found (is the base URL right?): {why}"))
            }
            NextStep::RetryLater { code, after } if !last => {
                let wait = after.unwrap_or_else(|| backoff(attempt, base, cap))
                    + jitter(Duration::from_millis(500));
                log(&format!("attempt {attempt}: {code}; retrying in {wait:.1?}"));
                tokio::time::sleep(wait).await;
            }
            NextStep::RetryLater { code, .. } => {
                return Err(format!(
                    "{code} after {max_attempts} attempts; send the same request later"
                ))
            }
            NextStep::Unexpected(why) => return Err(format!("unexpected answer: {why}")),
        }
    }
    Err(format!(
        "no answer after {max_attempts} attempts; the same merchant_payment_id is safe to send again later"
    ))
}
