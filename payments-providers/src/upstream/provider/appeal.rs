//! Appeals to the HTTP provider (docs/providers.md, "Appeals"): the appeal and its receipts in
//! one signed `POST` to the upstream's appeals endpoint, the sibling `appeals` of the
//! requisite endpoint (`https://bank.example/v1/requisites` →
//! `https://bank.example/v1/appeals`), idempotent by appeal id (`Idempotency-Key`).
//!
//! The upstream answers the appeal itself later, with a signed request to the service's
//! `POST /upstream/v1/appeals`; this request only hands it over. Its answer maps to an
//! [`AppealSubmission`]: a `2xx` whose body was read (at most [`MAX_ANSWER_BYTES`]) is
//! [`AppealSubmission::Taken`]; `404`, `405` and `501` say that the upstream takes no appeals
//! ([`AppealSubmission::NotSupported`]); anything else (another status, an answer over the
//! limit, no connection, the time limit) is [`AppealSubmission::Failed`], and the service
//! sends the appeal again later. One attempt per call: the service's sweep is the retry.

use base64::engine::general_purpose::STANDARD;
use base64::Engine as _;
use payments_core::amount::Amount;
use payments_core::provider::{AppealInquiry, AppealSubmission};
use payments_core::Timestamp;
use serde::Serialize;

use super::{error_text, Inner};
use crate::upstream::client::{read_limited, ReadError};
use crate::upstream::client::{IDEMPOTENCY_KEY_HEADER, MAX_ANSWER_BYTES};

/// The most characters of a refusing answer's body kept in the failure's reason.
const EXCERPT_CHARS: usize = 200;

/// The appeal request's body.
#[derive(Debug, Serialize)]
struct WireAppeal<'a> {
    appeal_id: String,
    payment_id: String,
    amount: &'a Amount,
    currency: &'a str,
    requisite: &'a str,
    reason: &'static str,
    claimed_amount: Option<&'a Amount>,
    paid_at: Option<Timestamp>,
    payer_bank: Option<&'a str>,
    receipts: Vec<WireReceipt>,
}

/// One receipt: its media type and its bytes in standard base64.
#[derive(Debug, Serialize)]
struct WireReceipt {
    content_type: &'static str,
    data: String,
}

/// The body sent for `inquiry`.
fn body(inquiry: &AppealInquiry) -> Result<Vec<u8>, serde_json::Error> {
    serde_json::to_vec(&WireAppeal {
        appeal_id: inquiry.appeal_id.to_string(),
        payment_id: inquiry.payment_id.to_string(),
        amount: &inquiry.amount,
        currency: inquiry.currency.as_str(),
        requisite: &inquiry.requisite,
        reason: inquiry.reason.as_str(),
        claimed_amount: inquiry.claimed_amount.as_ref(),
        paid_at: inquiry.paid_at,
        payer_bank: inquiry.payer_bank.as_deref(),
        receipts: inquiry
            .receipts
            .iter()
            .map(|r| WireReceipt {
                content_type: r.kind().content_type(),
                data: STANDARD.encode(r.bytes()),
            })
            .collect(),
    })
}

/// Sends `inquiry` to the upstream of `inner` and says what it answered.
pub(super) async fn submit(inner: &Inner, inquiry: &AppealInquiry) -> AppealSubmission {
    let submission = send(inner, inquiry).await;
    match &submission {
        AppealSubmission::Failed(reason) => tracing::warn!(
            appeal_id = %inquiry.appeal_id,
            payment_id = %inquiry.payment_id,
            reason = %reason,
            "appeal provider: not taken; the appeal stays open and is sent again"
        ),
        other => tracing::info!(
            appeal_id = %inquiry.appeal_id,
            payment_id = %inquiry.payment_id,
            taken = matches!(other, AppealSubmission::Taken),
            "appeal provider: answered"
        ),
    }
    submission
}

async fn send(inner: &Inner, inquiry: &AppealInquiry) -> AppealSubmission {
    let failed = |what: String| AppealSubmission::Failed(format!("appeal provider: {what}"));
    let url = match inner.url.join("appeals") {
        Ok(url) => url,
        Err(e) => return failed(format!("the appeals URL: {e}")),
    };
    let body = match body(inquiry) {
        Ok(body) => body,
        Err(e) => return failed(format!("request body: {e}")),
    };
    let mut builder = inner
        .client
        .post(url)
        .header(reqwest::header::CONTENT_TYPE, "application/json")
        .header(IDEMPOTENCY_KEY_HEADER, inquiry.appeal_id.to_string())
        .timeout(inner.timeout);
    for (name, value) in (inner.trace_headers)() {
        builder = builder.header(name, value);
    }
    let signed = inner.signer.sign(builder, &body).body(body);
    let response = match signed.send().await {
        Ok(r) => r,
        Err(e) => return failed(error_text(&e)),
    };
    let status = response.status().as_u16();
    let read = read_limited(response, MAX_ANSWER_BYTES).await;
    submission(status, read)
}

/// What an answer of `status` whose body read as `read` says.
fn submission(status: u16, read: Result<Vec<u8>, ReadError>) -> AppealSubmission {
    let failed = |what: String| AppealSubmission::Failed(format!("appeal provider: {what}"));
    match (status, read) {
        (200..=299, Ok(_)) => AppealSubmission::Taken,
        (404 | 405 | 501, _) => AppealSubmission::NotSupported,
        (_, Err(e)) => failed(format!("the upstream answered {status}: {e}")),
        (_, Ok(body)) => {
            let excerpt: String = String::from_utf8_lossy(&body)
                .chars()
                .filter(|c| !c.is_control())
                .take(EXCERPT_CHARS)
                .collect();
            if excerpt.is_empty() {
                failed(format!("the upstream answered {status}"))
            } else {
                failed(format!("the upstream answered {status}: {excerpt}"))
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use payments_core::appeal::AppealReason;
    use payments_core::ids::AppealId;
    use payments_core::payment::Currency;
    use payments_core::receipt::{Receipt, ReceiptKind};
    use payments_core::PaymentId;

    use super::*;

    #[test]
    fn the_body_carries_the_appeal_and_its_receipts_in_base64() {
        // Bytes whose standard base64 has `/` and padding (the URL-safe alphabet would differ);
        // the adapter sends a receipt's bytes as stored (checked when the appeal was opened).
        let png = b"\x89PNG\r\n\x1a\n\xfb\xff\xbe\xfb\xef".to_vec();
        let inquiry = AppealInquiry {
            appeal_id: AppealId::from_uuid(uuid::Uuid::from_u128(7)),
            payment_id: PaymentId::from_uuid(uuid::Uuid::from_u128(9)),
            amount: Amount::parse("1490.25").unwrap(),
            currency: Currency::RUB,
            requisite: "79001234567".into(),
            reason: AppealReason::PaidOtherAmount,
            claimed_amount: Some(Amount::parse("1500").unwrap()),
            paid_at: Some(Timestamp::from_unix_secs(1_790_812_800)),
            payer_bank: Some("Сбербанк".into()),
            receipts: vec![Receipt::from_stored(ReceiptKind::Png, png)],
        };
        let sent: serde_json::Value = serde_json::from_slice(&body(&inquiry).unwrap()).unwrap();
        assert_eq!(
            sent,
            serde_json::json!({
                "appeal_id": "00000000-0000-0000-0000-000000000007",
                "payment_id": "00000000-0000-0000-0000-000000000009",
                "amount": 1490.25,
                "currency": "RUB",
                "requisite": "79001234567",
                "reason": "paid_other_amount",
                "claimed_amount": 1500,
                "paid_at": "2026-10-01T00:00:00.000Z",
                "payer_bank": "Сбербанк",
                "receipts": [{"content_type": "image/png", "data": "iVBORw0KGgr7/7777w=="}],
            })
        );
        assert_eq!(sent["amount"].to_string(), "1490.25", "the decimal's text");
    }

    #[test]
    fn statuses_map_to_submissions() {
        let ok = |s| submission(s, Ok(b"{}".to_vec()));
        assert_eq!(ok(200), AppealSubmission::Taken);
        assert_eq!(ok(202), AppealSubmission::Taken);
        for s in [404, 405, 501] {
            assert_eq!(ok(s), AppealSubmission::NotSupported, "{s}");
        }
        assert_eq!(
            submission(500, Ok(b"{\"error\":\n\"down\"}".to_vec())),
            AppealSubmission::Failed(
                "appeal provider: the upstream answered 500: {\"error\":\"down\"}".into()
            )
        );
        for s in [400, 401, 409, 429, 502, 503] {
            assert!(matches!(ok(s), AppealSubmission::Failed(_)), "{s}");
        }
        // A 2xx over the answer limit is not taken: the appeal is sent again.
        assert_eq!(
            submission(200, Err(ReadError::TooLarge(MAX_ANSWER_BYTES))),
            AppealSubmission::Failed(
                "appeal provider: the upstream answered 200: the answer exceeds 65536 bytes".into()
            )
        );
    }
}
