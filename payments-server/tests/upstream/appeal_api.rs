//! Appeals as a merchant opens them, over real sockets end to end: the signed
//! `POST /api/v1/payments/{id}/appeals` with a receipt, the upstream taking it, its signed
//! answer, and what the merchant then reads (the appeal, the receipt, the payment, the ledger);
//! receipts that are not what they claim; an appeal nobody decides, expired at its deadline on
//! a stepped clock.

use std::sync::Arc;
use std::time::Duration;

use base64::engine::general_purpose::STANDARD;
use base64::Engine as _;
use payments_core::{Clock, PaymentId};
use payments_directory::ProjectPatch;
use payments_server::testing::{ShiftedClock, TestServer};
use reqwest::StatusCode;
use serde_json::{json, Value};

use crate::notify::with_payment;
use crate::support::{body, notify, Mode, Upstream};

/// A PDF as a bank app exports a receipt (structure only).
const PDF: &[u8] = b"%PDF-1.4\n1 0 obj\n<<>>\nendobj\ntrailer\n<<>>\n%%EOF\n";

fn appeal_body(key: &str, claimed: &str, content_type: &str, file: &[u8]) -> Value {
    json!({"idempotency_key": key, "reason": "paid_other_amount", "claimed_amount": claimed,
        "paid_at": "2026-12-03T10:04:00Z", "payer_bank": "T-Bank",
        "receipts": [{"content_type": content_type, "data": STANDARD.encode(file)}]})
}

/// The standard CRC-32 of PNG chunks (bit by bit: a test needs no table).
fn crc32(bytes: &[u8]) -> u32 {
    let mut crc = !0u32;
    for b in bytes {
        crc ^= u32::from(*b);
        for _ in 0..8 {
            crc = if crc & 1 == 1 {
                (crc >> 1) ^ 0xedb8_8320
            } else {
                crc >> 1
            };
        }
    }
    !crc
}

/// A well-formed PNG of a few hundred bytes that declares `width` x `height` pixels: what a
/// decompression bomb looks like before anyone decodes it.
fn png(width: u32, height: u32) -> Vec<u8> {
    let chunk = |kind: &[u8], data: &[u8]| {
        let mut c = (data.len() as u32).to_be_bytes().to_vec();
        c.extend_from_slice(kind);
        c.extend_from_slice(data);
        let mut crc_input = kind.to_vec();
        crc_input.extend_from_slice(data);
        c.extend_from_slice(&crc32(&crc_input).to_be_bytes());
        c
    };
    let mut ihdr = width.to_be_bytes().to_vec();
    ihdr.extend_from_slice(&height.to_be_bytes());
    ihdr.extend_from_slice(&[8, 2, 0, 0, 0]);
    let mut out = b"\x89PNG\r\n\x1a\n".to_vec();
    out.extend(chunk(b"IHDR", &ihdr));
    out.extend(chunk(
        b"IDAT",
        &[0x78, 0x9c, 0x03, 0x00, 0x00, 0x00, 0x00, 0x01],
    ));
    out.extend(chunk(b"IEND", &[]));
    out
}

/// A canceled payment of the upstream-backed server (its transfer reported failed).
async fn canceled() -> (Upstream, TestServer, String, String) {
    let (u, s, id, notifications) = with_payment().await;
    let failed = json!({"notification_id": "f-1", "payment_id": id, "status": "failed"});
    let (code, answer) = notify(&notifications, &failed).await;
    assert_eq!(
        (code, &answer["status"]),
        (StatusCode::OK, &json!("canceled"))
    );
    let appeals = notifications.replace("/notifications", "/appeals");
    (u, s, id, appeals)
}

/// The project's ledger entries, newest first.
async fn entries(s: &TestServer) -> Vec<Value> {
    let page = s.client().get("/api/v1/balance/entries").await.unwrap();
    assert_eq!(page.status, StatusCode::OK, "{}", page.json);
    page.json["data"].as_array().unwrap().clone()
}

/// The payment's callback events (dispatch is off: they stay in the outbox).
async fn events(s: &TestServer, id: &str) -> usize {
    let pid: PaymentId = id.parse().unwrap();
    s.state
        .service
        .store()
        .events_for_payment(pid)
        .await
        .unwrap()
        .len()
}

#[tokio::test]
async fn a_receipt_appeal_found_with_another_amount_completes_and_credits_the_payment_once() {
    let (u, s, id, answers) = canceled().await;
    let client = s.client();
    let (ledger, callbacks) = (entries(&s).await.len(), events(&s, &id).await);

    let body = appeal_body("appeal-1", "3390.00", "application/pdf", PDF);
    let opened = client.open_appeal(&id, &body).await.unwrap();
    assert_eq!(opened.status, StatusCode::CREATED, "{}", opened.json);
    assert_eq!(opened.json["state"], "under_review", "the upstream took it");
    let appeal = opened.json["id"].as_str().unwrap().to_string();
    let again = client.open_appeal(&id, &body).await.unwrap();
    assert_eq!(
        (again.status, &again.json["id"]),
        (StatusCode::OK, &json!(appeal))
    );
    u.seen(|seen| {
        assert_eq!(seen.appeals.len(), 1, "sent once");
        let sent = &seen.appeals[0].0;
        assert_eq!(sent["receipts"][0]["data"], STANDARD.encode(PDF));
        assert_eq!(sent["claimed_amount"].to_string(), "3390.00");
    });
    // The receipt comes back to the project byte for byte, as an attachment.
    let receipt = client
        .get(&format!("/api/v1/appeals/{appeal}/receipts/0"))
        .await
        .unwrap();
    assert_eq!(receipt.status, StatusCode::OK);
    assert_eq!(receipt.body, PDF);

    let found = json!({"notification_id": "ap-1", "appeal_id": appeal, "status": "found",
        "amount": "3390.00"});
    let (code, answer) = notify(&answers, &found).await;
    assert_eq!(
        (code, &answer["state"]),
        (StatusCode::OK, &json!("accepted")),
        "{answer}"
    );

    let read = client.get_appeal(&appeal).await.unwrap();
    assert_eq!(read.json["state"], "accepted");
    assert_eq!(read.json["resolved_amount"].to_string(), "3390.00");
    let payment = client.get_payment(&id).await.unwrap();
    assert_eq!(payment.json["status"], "completed");
    assert_eq!(payment.json["amount"].to_string(), "3390.00");
    assert_eq!(events(&s, &id).await, callbacks + 1, "one callback");
    let after = entries(&s).await;
    assert_eq!(after.len(), ledger + 1, "one ledger entry");
    assert_eq!(after[0]["payment_id"], id.as_str(), "{}", after[0]);
    assert_eq!(after[0]["kind"], "credit", "{}", after[0]);
    s.stop().await;
}

#[tokio::test]
async fn a_receipt_appeal_not_found_is_rejected_and_moves_nothing() {
    let (_u, s, id, answers) = canceled().await;
    let client = s.client();
    let before = (
        client.get_payment(&id).await.unwrap().json,
        entries(&s).await,
    );
    let callbacks = events(&s, &id).await;
    let body = appeal_body("appeal-2", "3400", "application/pdf", PDF);
    let opened = client.open_appeal(&id, &body).await.unwrap();
    assert_eq!(opened.status, StatusCode::CREATED, "{}", opened.json);
    let appeal = opened.json["id"].as_str().unwrap().to_string();
    let not_found = json!({"notification_id": "ap-2", "appeal_id": appeal, "status": "not_found"});
    let (code, answer) = notify(&answers, &not_found).await;
    assert_eq!(
        (code, &answer["state"]),
        (StatusCode::OK, &json!("rejected")),
        "{answer}"
    );
    assert_eq!(
        client.get_appeal(&appeal).await.unwrap().json["state"],
        "rejected"
    );
    let after = (
        client.get_payment(&id).await.unwrap().json,
        entries(&s).await,
    );
    assert_eq!(after, before, "the payment and the ledger are as they were");
    assert_eq!(events(&s, &id).await, callbacks, "no callback");
    s.stop().await;
}

#[tokio::test]
async fn receipts_that_are_not_what_they_claim_are_refused_and_nothing_is_stored() {
    let (_u, s, id, _) = canceled().await;
    let client = s.client();
    let html = b"<!doctype html><script>alert(1)</script>";
    let cases: [(&str, Vec<u8>, &str); 2] = [
        (
            "image/png",
            html.to_vec(),
            "neither a PDF, a PNG nor a JPEG",
        ),
        ("image/png", png(100_000, 100_000), "100000"),
    ];
    for (n, (content_type, file, says)) in cases.into_iter().enumerate() {
        let body = appeal_body(&format!("bad-{n}"), "3400", content_type, &file);
        let refused = client.open_appeal(&id, &body).await.unwrap();
        assert_eq!(
            refused.status,
            StatusCode::UNPROCESSABLE_ENTITY,
            "{}",
            refused.json
        );
        assert_eq!(refused.json["code"], "receipt_invalid");
        let message = refused.json["message"].as_str().unwrap();
        assert!(message.contains(says), "{message}");
    }
    // 50 MB: refused by its length before it is read.
    let huge = vec![b'%'; 50 * 1024 * 1024];
    let body = appeal_body("bad-huge", "3400", "application/pdf", &huge);
    let refused = client.open_appeal(&id, &body).await.unwrap();
    assert_eq!(
        refused.status,
        StatusCode::PAYLOAD_TOO_LARGE,
        "{}",
        refused.json
    );
    assert_eq!(refused.json["code"], "body_too_large");
    let listed = client
        .get(&format!("/api/v1/payments/{id}/appeals"))
        .await
        .unwrap();
    assert_eq!(listed.json["data"], json!([]), "nothing stored");
    s.stop().await;
}

#[tokio::test]
async fn an_appeal_nobody_decides_expires_at_its_deadline_on_a_stepped_clock() {
    let u = Upstream::start(Mode::Issue).await;
    let clock = ShiftedClock::new();
    let s = {
        let u = u.clone();
        TestServer::start_with_clock(Arc::new(clock.clone()), move |s| {
            u.configure(s);
            s.callbacks.dispatch = false;
        })
        .await
    };
    s.patch_project(ProjectPatch {
        callback_url: Some(Some("https://merchant.example.com/callbacks".into())),
        ..ProjectPatch::default()
    })
    .await;
    let client = s.client();
    let created = client.create_payment(&body("exp-1", "3400")).await.unwrap();
    let id = created.json["id"].as_str().unwrap().to_string();
    let notifications = s.notifications_url.clone().expect("the listener is on");
    let failed = json!({"notification_id": "f-1", "payment_id": id, "status": "failed"});
    assert_eq!(notify(&notifications, &failed).await.0, StatusCode::OK);
    let operator = |path: String| {
        let (url, token) = (
            s.operator_url.clone(),
            s.operator_token.expose().to_string(),
        );
        async move {
            let r = reqwest::Client::new()
                .get(format!("{url}{path}"))
                .bearer_auth(token);
            r.send().await.unwrap().json::<Value>().await.unwrap()
        }
    };
    let status = || operator(format!("/operator/v1/payments/{id}"));
    let payment_before = status().await;
    assert_eq!(payment_before["status"], "canceled");
    let body = appeal_body("late-1", "3400", "application/pdf", PDF);
    let opened = client.open_appeal(&id, &body).await.unwrap();
    assert_eq!(opened.status, StatusCode::CREATED, "{}", opened.json);
    assert_eq!(opened.json["state"], "under_review", "the upstream took it");
    let appeal = opened.json["id"].as_str().unwrap().to_string();
    let deadline = opened.json["deadline"].as_str().unwrap().to_string();
    let read = || operator(format!("/operator/v1/appeals/{appeal}"));

    // A minute before its deadline it still waits; past it, the next appeals pass (once a
    // minute of the service's clock) expires it.
    clock.advance(Duration::from_secs(72 * 3600 - 61));
    let now = clock.now();
    assert!(
        now.to_rfc3339() < deadline,
        "{} < {deadline}",
        now.to_rfc3339()
    );
    assert_eq!(read().await["state"], "under_review");
    clock.advance(Duration::from_secs(62));
    wait_for(|| async { read().await["state"] == "expired" }).await;
    assert_eq!(read().await["decided_by"], "system");
    assert_eq!(status().await, payment_before, "nothing moves");
    s.stop().await;
}

/// Waits (at most 10 s of the machine's time, checking every 20 ms) until `done` answers true:
/// the server's sweeper acts on its own tick.
async fn wait_for<F, Fut>(done: F)
where
    F: Fn() -> Fut,
    Fut: std::future::Future<Output = bool>,
{
    let deadline = std::time::Instant::now() + Duration::from_secs(10);
    while !done().await {
        assert!(std::time::Instant::now() < deadline, "not within 10 s");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}
