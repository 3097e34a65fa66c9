//! What a merchant integration does with each answer of `POST /api/v1/payments`: one match
//! over every status and error code of the spec (section "Errors") and of the service's
//! decisions (`insufficient_scope`, `payment_not_found`, `body_too_large`, `rate_limited`,
//! `service_unavailable`, ...), and the waiting rules for retries (`Retry-After`, exponential
//! backoff with jitter).

use std::time::Duration;

use payments_client::ApiResponse;
use payments_core::RandomSource;
use payments_http::system::OsRandom;

/// The longest `Retry-After` honoured; a longer one is treated as "try much later".
pub const MAX_RETRY_AFTER: Duration = Duration::from_secs(120);

/// What to do next after an answer to a create request.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum NextStep {
    /// `201` (new) or `200` (the same request was already accepted): the payment exists.
    /// Its `status` may still be `error` (no requisites; the id is taken).
    Accepted {
        /// `true` for `201 Created`.
        created: bool,
    },
    /// The request itself is wrong (`400`, `413`). Nothing was taken: fix it, then send it
    /// again with the same `merchant_payment_id`.
    FixRequest(String),
    /// The token, its scopes or the source address are wrong (`401 token_invalid`, `403`).
    /// Retrying cannot help; fix the configuration in the cabinet.
    FixCredentials(String),
    /// `401 signature_invalid`: a signing bug, a wrong key or a wrong clock. In the sandbox
    /// the body carries `signature_base`, the exact bytes the server verified.
    FixSignature {
        /// The server's reason.
        reason: String,
        /// The sandbox's `signature_base`, to diff with what the client signed.
        signature_base: Option<String>,
    },
    /// `409 request_replayed`: the nonce was used already (this exact signed request was sent
    /// twice). Sign again (fresh nonce) and send at once.
    Resign,
    /// The `merchant_payment_id` is taken by another request (`409
    /// payment_idempotency_conflict`) or by a payment saved in `error` (`422` with
    /// `payment_id`). A new attempt needs a new `merchant_payment_id`.
    NewMerchantPaymentId {
        /// The code.
        code: String,
        /// The saved payment, when the answer names it.
        payment_id: Option<String>,
    },
    /// `422` without `payment_id`: nothing was created and the id is still free, but the
    /// payment cannot be accepted as asked (method, amount, currency, bank).
    NotAccepted {
        /// The code.
        code: String,
        /// What the merchant can change.
        hint: &'static str,
    },
    /// `404`: the path or the payment does not exist for this project.
    NotFound(String),
    /// `429`, `503` or another `5xx`: nothing was taken (or the create may have happened, for
    /// a `5xx`); repeat the same request, freshly signed, after `after` when the server said.
    RetryLater {
        /// The code, or the status when the body has none.
        code: String,
        /// The server's `Retry-After`, when present.
        after: Option<Duration>,
    },
    /// An answer the spec does not describe: log it with the `request_id` for support.
    Unexpected(String),
}

/// The `code` and `message` of an error body, with the `request_id` to quote to support.
pub fn describe(resp: &ApiResponse) -> String {
    let field = |name: &str| resp.json.get(name).and_then(|v| v.as_str()).unwrap_or("");
    let code = field("code");
    let code = if code.is_empty() {
        resp.status.as_str()
    } else {
        code
    };
    format!(
        "{} {code}: {} (request_id {})",
        resp.status.as_u16(),
        field("message"),
        field("request_id")
    )
}

/// `Retry-After` in seconds (the service sends whole seconds), capped at [`MAX_RETRY_AFTER`].
pub fn retry_after(resp: &ApiResponse) -> Option<Duration> {
    let secs: u64 = resp
        .headers
        .get("retry-after")?
        .to_str()
        .ok()?
        .trim()
        .parse()
        .ok()?;
    Some(Duration::from_secs(secs).min(MAX_RETRY_AFTER))
}

/// Classifies an answer to `POST /api/v1/payments`.
pub fn next_step(resp: &ApiResponse) -> NextStep {
    let status = resp.status.as_u16();
    let code = resp.code().unwrap_or("").to_owned();
    let payment_id = resp
        .json
        .get("payment_id")
        .and_then(|v| v.as_str())
        .map(str::to_owned);
    let why = describe(resp);
    match (status, code.as_str()) {
        (201, _) => NextStep::Accepted { created: true },
        (200, _) => NextStep::Accepted { created: false },
        // 400: an unknown field, a malformed amount, a bad merchant_payment_id... The message
        // names the field. (invalid_geo_code belongs to GET /api/v1/banks.)
        (400, "bad_request" | "invalid_geo_code") => NextStep::FixRequest(why),
        (401, "token_invalid") => NextStep::FixCredentials(format!(
            "{why}; the token is truncated, revoked, from the other environment, or the project is inactive"
        )),
        (401, "signature_invalid") => NextStep::FixSignature {
            reason: why,
            signature_base: resp
                .json
                .get("signature_base")
                .and_then(|v| v.as_str())
                .map(str::to_owned),
        },
        (403, "ip_not_allowed") => NextStep::FixCredentials(format!(
            "{why}; add this server's address to the project's IP allow-list"
        )),
        (403, "insufficient_scope") => NextStep::FixCredentials(format!(
            "{why}; issue a token with the payments:create and payments:read scopes"
        )),
        (404, "payment_not_found" | "not_found") => NextStep::NotFound(why),
        (409, "payment_idempotency_conflict") => NextStep::NewMerchantPaymentId { code, payment_id },
        (409, "request_replayed") => NextStep::Resign,
        (413, "body_too_large") | (415, "unsupported_media_type") => NextStep::FixRequest(why),
        // A 422 that saved the payment (in `error`): the id is taken.
        (422, _) if payment_id.is_some() => NextStep::NewMerchantPaymentId { code, payment_id },
        (422, "payment_not_covered") => NextStep::NotAccepted {
            code,
            hint: "the method, currency or amount is outside the project's contract",
        },
        (422, "payment_rate_unavailable") => NextStep::NotAccepted {
            code,
            hint: "no exchange rate for this currency now; try later or another currency",
        },
        (422, "payment_not_routable") => NextStep::NotAccepted {
            code,
            hint: "not payable with this method (or bank filter) now; offer another method or try later",
        },
        (422, "bank_not_found") => NextStep::NotAccepted {
            code,
            hint: "unknown or ambiguous bank_code: take a name from GET /api/v1/banks, or leave it out",
        },
        (429, _) | (503, _) => NextStep::RetryLater {
            code: if code.is_empty() { status.to_string() } else { code },
            after: retry_after(resp),
        },
        // internal_error and any other 5xx (a proxy's 502, ...): the create may or may not
        // have happened; repeating with the same merchant_payment_id is safe.
        (500..=599, _) => NextStep::RetryLater {
            code: if code.is_empty() { status.to_string() } else { code },
            after: retry_after(resp),
        },
        _ => NextStep::Unexpected(why),
    }
}

/// The wait before retry number `attempt` (1 for the first retry): exponential from `base`,
/// capped at `cap`, with "equal jitter" (a random point in the upper half), so that many
/// clients that failed together do not retry together.
pub fn backoff(attempt: u32, base: Duration, cap: Duration) -> Duration {
    let exp = base
        .saturating_mul(2u32.saturating_pow(attempt.saturating_sub(1)))
        .min(cap);
    let half = exp / 2;
    half + jitter(half)
}

/// A random duration in `[0, max]`, from the OS generator.
pub fn jitter(max: Duration) -> Duration {
    let mut bytes = [0u8; 8];
    OsRandom.fill(&mut bytes);
    let millis = u64::try_from(max.as_millis()).unwrap_or(u64::MAX);
    Duration::from_millis(u64::from_le_bytes(bytes) % millis.saturating_add(1))
}

#[cfg(test)]
mod tests {
    use reqwest::header::{HeaderMap, HeaderValue};
    use reqwest::StatusCode;
    use serde_json::json;

    use super::*;

    fn resp(status: u16, body: serde_json::Value, retry: Option<&str>) -> ApiResponse {
        let mut headers = HeaderMap::new();
        if let Some(r) = retry {
            headers.insert("retry-after", HeaderValue::from_str(r).unwrap());
        }
        ApiResponse {
            status: StatusCode::from_u16(status).unwrap(),
            headers,
            body: serde_json::to_vec(&body).unwrap(),
            json: body,
        }
    }

    fn err(status: u16, code: &str) -> ApiResponse {
        resp(
            status,
            json!({"code": code, "message": "m", "request_id": "r"}),
            None,
        )
    }

    #[test]
    fn every_code_has_its_step() {
        assert_eq!(
            next_step(&resp(201, json!({}), None)),
            NextStep::Accepted { created: true }
        );
        assert_eq!(
            next_step(&resp(200, json!({}), None)),
            NextStep::Accepted { created: false }
        );
        assert!(matches!(
            next_step(&err(400, "bad_request")),
            NextStep::FixRequest(_)
        ));
        assert!(matches!(
            next_step(&err(413, "body_too_large")),
            NextStep::FixRequest(_)
        ));
        assert!(matches!(
            next_step(&err(415, "unsupported_media_type")),
            NextStep::FixRequest(_)
        ));
        assert!(matches!(
            next_step(&err(401, "token_invalid")),
            NextStep::FixCredentials(_)
        ));
        assert!(matches!(
            next_step(&err(403, "ip_not_allowed")),
            NextStep::FixCredentials(_)
        ));
        assert!(matches!(
            next_step(&err(403, "insufficient_scope")),
            NextStep::FixCredentials(_)
        ));
        assert_eq!(next_step(&err(409, "request_replayed")), NextStep::Resign);
        assert_eq!(
            next_step(&err(409, "payment_idempotency_conflict")),
            NextStep::NewMerchantPaymentId {
                code: "payment_idempotency_conflict".into(),
                payment_id: None
            }
        );
        assert!(matches!(
            next_step(&err(404, "payment_not_found")),
            NextStep::NotFound(_)
        ));
        assert!(matches!(
            next_step(&err(500, "internal_error")),
            NextStep::RetryLater { after: None, .. }
        ));
        assert!(matches!(
            next_step(&resp(502, serde_json::Value::Null, None)),
            NextStep::RetryLater { .. }
        ));
        assert!(matches!(
            next_step(&err(418, "teapot")),
            NextStep::Unexpected(_)
        ));
    }

    #[test]
    fn signature_invalid_carries_the_sandbox_base() {
        let r = resp(
            401,
            json!({"code": "signature_invalid", "message": "signature expired", "signature_base": "\"@method\": POST"}),
            None,
        );
        match next_step(&r) {
            NextStep::FixSignature { signature_base, .. } => {
                assert_eq!(signature_base.as_deref(), Some("\"@method\": POST"));
            }
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn a_422_with_payment_id_takes_the_id_and_without_leaves_it_free() {
        let saved = resp(
            422,
            json!({"code": "payment_not_routable", "payment_id": "p-1"}),
            None,
        );
        assert_eq!(
            next_step(&saved),
            NextStep::NewMerchantPaymentId {
                code: "payment_not_routable".into(),
                payment_id: Some("p-1".into())
            }
        );
        for code in [
            "payment_not_covered",
            "payment_rate_unavailable",
            "payment_not_routable",
            "bank_not_found",
        ] {
            assert!(
                matches!(next_step(&err(422, code)), NextStep::NotAccepted { .. }),
                "{code}"
            );
        }
    }

    #[test]
    fn retry_after_is_honoured_and_capped() {
        let limited = resp(429, json!({"code": "rate_limited"}), Some("3"));
        assert_eq!(
            next_step(&limited),
            NextStep::RetryLater {
                code: "rate_limited".into(),
                after: Some(Duration::from_secs(3))
            }
        );
        let busy = resp(503, json!({"code": "service_unavailable"}), Some("9999"));
        assert_eq!(retry_after(&busy), Some(MAX_RETRY_AFTER));
        let date = resp(503, json!({}), Some("Wed, 21 Oct 2015 07:28:00 GMT"));
        assert_eq!(retry_after(&date), None);
    }

    #[test]
    fn backoff_grows_is_capped_and_jittered_within_the_upper_half() {
        let base = Duration::from_secs(1);
        let cap = Duration::from_secs(30);
        for attempt in 1..=10u32 {
            let full = (base * 2u32.pow(attempt - 1)).min(cap);
            for _ in 0..50 {
                let d = backoff(attempt, base, cap);
                assert!(d >= full / 2 && d <= full, "attempt {attempt}: {d:?}");
            }
        }
    }
}
