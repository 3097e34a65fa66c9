//! Appeals over real sockets: the HTTP provider's `POST /appeals` to the local upstream (every
//! answer and what the service takes it as), and the upstream's signed answer to the server's
//! `POST /upstream/v1/appeals` (docs/providers.md, "Appeals").

use std::sync::Arc;
use std::time::Duration;

use base64::engine::general_purpose::STANDARD;
use base64::Engine as _;
use payments_core::amount::Amount;
use payments_core::appeal::{AppealReason, AppealSource, AppealState};
use payments_core::ids::AppealId;
use payments_core::payment::Currency;
use payments_core::provider::{AppealInquiry, AppealSubmission, ProviderName, RequisiteProvider};
use payments_core::receipt::{Receipt, ReceiptKind};
use payments_core::service::AppealRequest;
use payments_core::{PaymentId, Timestamp};
use payments_http::system::SystemClock;
use payments_providers::upstream::{HttpProvider, UpstreamConfig};
use payments_server::testing::TestServer;
use reqwest::StatusCode;
use serde_json::{json, Value};

use crate::notify::with_payment;
use crate::support::{
    notify, notify_at, notify_signed, secret, unix_now, AppealMode, Mode, Upstream,
};

/// A receipt's bytes (as a store gives them back: checked at opening, not here) whose standard
/// base64 has `/` and padding.
const PNG: &[u8] = b"\x89PNG\r\n\x1a\n\xfb\xff\xbe\xfb\xef";

/// The HTTP provider of `requisites_url` with the shared secret and a 1 s time limit.
fn provider(requisites_url: String) -> HttpProvider {
    let config = UpstreamConfig {
        url: Some(requisites_url),
        secrets: vec![secret()],
        timeout: Duration::from_secs(1),
        ..UpstreamConfig::default()
    };
    HttpProvider::new(&config, Arc::new(SystemClock)).unwrap()
}

fn inquiry(seed: u128) -> AppealInquiry {
    AppealInquiry {
        appeal_id: AppealId::from_uuid(uuid::Uuid::from_u128(seed)),
        payment_id: PaymentId::from_uuid(uuid::Uuid::from_u128(seed + 1000)),
        amount: Amount::parse("3400.00").unwrap(),
        currency: Currency::RUB,
        requisite: "79001234567".into(),
        reason: AppealReason::PaidOtherAmount,
        claimed_amount: Some(Amount::parse("3390.50").unwrap()),
        paid_at: Some(Timestamp::from_unix_secs(1_790_812_800)),
        payer_bank: Some("Сбербанк".into()),
        receipts: vec![Receipt::from_stored(ReceiptKind::Png, PNG.to_vec())],
    }
}

fn default_name() -> ProviderName {
    ProviderName::parse(ProviderName::DEFAULT).unwrap()
}

#[tokio::test]
async fn an_appeal_is_posted_signed_beside_the_requisite_endpoint_and_taken() {
    let u = Upstream::start(Mode::Issue).await;
    let p = provider(format!("{}/requisites", u.url));
    let sent = inquiry(1);
    assert_eq!(
        p.submit_appeal(&default_name(), &sent).await,
        AppealSubmission::Taken
    );
    let (got, key) = u.seen(|s| {
        assert_eq!(s.unsigned, 0, "signed like the requisite requests");
        assert_eq!(s.appeals.len(), 1);
        s.appeals[0].clone()
    });
    assert_eq!(key, sent.appeal_id.to_string(), "the appeal id is the key");
    // Parsed from text: the amounts are the decimals' own text (`3400.00`), not floats.
    let expected = format!(
        r#"{{"appeal_id": "{}", "payment_id": "{}", "amount": 3400.00, "currency": "RUB",
            "requisite": "79001234567", "reason": "paid_other_amount", "claimed_amount": 3390.50,
            "paid_at": "2026-10-01T00:00:00.000Z", "payer_bank": "Сбербанк",
            "receipts": [{{"content_type": "image/png", "data": "iVBORw0KGgr7/7777w=="}}]}}"#,
        sent.appeal_id, sent.payment_id
    );
    assert_eq!(got, serde_json::from_str::<Value>(&expected).unwrap());
    let data = got["receipts"][0]["data"].as_str().unwrap();
    assert_eq!(STANDARD.decode(data).unwrap(), PNG);
    // Every other status is taken too when it is a 2xx.
    u.set_appeal_mode(AppealMode::Status(200));
    assert_eq!(
        p.submit_appeal(&default_name(), &inquiry(2)).await,
        AppealSubmission::Taken
    );
}

#[tokio::test]
async fn an_upstream_without_appeals_says_so_and_every_failure_is_failed() {
    let u = Upstream::start(Mode::Issue).await;
    let p = provider(format!("{}/requisites", u.url));
    let submit = || async { p.submit_appeal(&default_name(), &inquiry(3)).await };
    for status in [404, 405, 501] {
        u.set_appeal_mode(AppealMode::Status(status));
        assert_eq!(submit().await, AppealSubmission::NotSupported, "{status}");
    }
    // An upstream that has no appeals endpoint at all (its router's own 404).
    let elsewhere = provider(format!("{}/other/requisites", u.url));
    assert_eq!(
        elsewhere.submit_appeal(&default_name(), &inquiry(3)).await,
        AppealSubmission::NotSupported
    );
    let failed = |s: AppealSubmission| match s {
        AppealSubmission::Failed(reason) => reason,
        other => panic!("{other:?} is not a failure"),
    };
    for status in [400, 409, 500, 503] {
        u.set_appeal_mode(AppealMode::Status(status));
        let reason = failed(submit().await);
        assert!(
            reason.contains(&format!("answered {status}: {{\"note\"")),
            "{reason}"
        );
    }
    // A 2xx over the answer limit (64 KiB) is not taken; one under it is.
    u.set_appeal_mode(AppealMode::Huge(1024 * 1024));
    assert!(failed(submit().await).contains("exceeds 65536 bytes"));
    u.set_appeal_mode(AppealMode::Huge(60 * 1024));
    assert_eq!(submit().await, AppealSubmission::Taken);
    // No answer within the 1 s time limit.
    u.set_appeal_mode(AppealMode::After(Duration::from_secs(3)));
    assert!(failed(submit().await).contains("timeout"));
    // Nobody listening.
    let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let down = format!("http://{}/requisites", l.local_addr().unwrap());
    drop(l);
    let reason = failed(
        provider(down)
            .submit_appeal(&default_name(), &inquiry(4))
            .await,
    );
    assert!(reason.contains("connect"), "{reason}");
    assert_eq!(u.seen(|s| s.unsigned), 0);
}

/// A server over the upstream with a canceled payment (its transfer reported failed) whose
/// project has a callback URL (dispatch off: events stay in the outbox; `with_payment`), and
/// an appeal about it that the upstream took. Answers the upstream, the server, the payment's and the appeal's
/// ids and the appeals URL.
async fn with_appeal() -> (Upstream, TestServer, String, String, String) {
    let (u, s, id, notifications) = with_payment().await;
    let failed = json!({"notification_id": "f-1", "payment_id": id, "status": "failed"});
    let (code, answer) = notify(&notifications, &failed).await;
    assert_eq!(
        (code, &answer["status"]),
        (StatusCode::OK, &json!("canceled"))
    );

    let appeals = s.state.service.appeals();
    let payment = s.state.service.store().payment(id.parse().unwrap()).await;
    let request = AppealRequest {
        idempotency_key: None,
        reason: AppealReason::PaidButCanceled,
        claimed_amount: Some(Amount::parse("3390.00").unwrap()),
        paid_at: None,
        payer_bank: None,
        receipts: vec![Receipt::from_stored(ReceiptKind::Png, PNG.to_vec())],
    };
    let payment = payment.unwrap().unwrap();
    let (appeal, stored) = appeals
        .open_appeal_for(&payment, AppealSource::Payer, request)
        .await
        .unwrap();
    assert!(stored);
    assert_eq!(
        appeal.state,
        AppealState::UnderReview,
        "the upstream took it"
    );
    u.seen(|seen| {
        assert_eq!(seen.appeals.len(), 1);
        assert_eq!(seen.appeals[0].0["payment_id"], id.as_str());
        assert_eq!(seen.appeals[0].0["reason"], "paid_but_canceled");
    });
    let appeals = notifications.replace("/notifications", "/appeals");
    (u, s, id, appeal.id.to_string(), appeals)
}

/// The payment's status and amount, and how many callback events it has.
async fn payment(s: &TestServer, id: &str) -> (String, String, usize) {
    let pid: PaymentId = id.parse().unwrap();
    let store = s.state.service.store();
    let p = store.payment(pid).await.unwrap().unwrap();
    let events = store.events_for_payment(pid).await.unwrap().len();
    (p.status.to_string(), p.amount.to_string(), events)
}

#[tokio::test]
async fn a_found_answer_accepts_the_appeal_and_completes_the_payment_once() {
    let (_u, s, id, appeal, url) = with_appeal().await;
    let (_, _, events) = payment(&s, &id).await;
    let found = json!({"notification_id": "ap-1", "appeal_id": appeal, "status": "found",
        "amount": "3390.00"});
    let (code, answer) = notify(&url, &found).await;
    assert_eq!(code, StatusCode::OK, "{answer}");
    let expected = format!(
        r#"{{"notification_id": "ap-1", "applied": true, "appeal_id": "{appeal}",
            "state": "accepted", "payment_id": "{id}", "status": "completed", "amount": 3390.00}}"#
    );
    assert_eq!(answer, serde_json::from_str::<Value>(&expected).unwrap());
    assert_eq!(
        payment(&s, &id).await,
        ("completed".into(), "3390.00".into(), events + 1),
        "completed with the amount found, one callback"
    );
    // The upstream's repeat (signed anew): decided before, nothing moves.
    let (code, again) = notify_at(&url, &found, unix_now() + 1).await;
    assert_eq!(code, StatusCode::OK, "{again}");
    assert_eq!(
        (&again["applied"], &again["state"]),
        (&json!(false), &json!("accepted"))
    );
    assert_eq!(payment(&s, &id).await.2, events + 1);
    s.stop().await;
}

#[tokio::test]
async fn a_not_found_answer_rejects_and_refusals_change_nothing() {
    let (_u, s, id, appeal, url) = with_appeal().await;
    let before = payment(&s, &id).await;
    // Unknown appeal, a named provider nobody configured, a bad body: refused.
    let other = json!({"notification_id": "x-1", "appeal_id": AppealId::from_uuid(uuid::Uuid::from_u128(5)).to_string(),
        "status": "not_found"});
    let (code, answer) = notify(&url, &other).await;
    assert_eq!(
        (code, answer["code"].as_str()),
        (StatusCode::NOT_FOUND, Some("appeal_not_found"))
    );
    let not_found = json!({"notification_id": "ap-2", "appeal_id": appeal, "status": "not_found",
        "reason": "no such transfer"});
    let (code, _) = notify(&format!("{url}/bank-x"), &not_found).await;
    assert_eq!(code, StatusCode::NOT_FOUND);
    let bytes = serde_json::to_vec(&not_found).unwrap();
    let (code, answer) = notify_signed(&url, &bytes, unix_now(), b"another body").await;
    assert_eq!(
        (code, answer["code"].as_str()),
        (StatusCode::UNAUTHORIZED, Some("signature_invalid"))
    );
    let bad = json!({"notification_id": "ap-2", "appeal_id": appeal, "status": "found"});
    let (code, answer) = notify(&url, &bad).await;
    assert_eq!(
        (code, answer["code"].as_str()),
        (StatusCode::BAD_REQUEST, Some("bad_request"))
    );
    assert_eq!(payment(&s, &id).await, before);

    let (code, answer) = notify(&url, &not_found).await;
    assert_eq!(code, StatusCode::OK, "{answer}");
    assert_eq!(
        (&answer["applied"], &answer["state"]),
        (&json!(true), &json!("rejected"))
    );
    assert_eq!(answer["status"], "canceled");
    assert_eq!(payment(&s, &id).await, before, "nothing moves");
    s.stop().await;
}
