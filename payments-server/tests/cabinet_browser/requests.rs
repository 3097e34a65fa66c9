//! The Requests tab in headless Chromium: a merchant's client signs a create against the real
//! server with one byte of its signature changed; the tab shows the `401` row with its
//! request id and the diagnosis (the reason, the covered components, the signature base the
//! server verified), the integration health counts it, and the status filter keeps it. The
//! support role sees the tab too. (Its pictures, `29-requests.png` and `-390.png`, come from
//! the layout walk, `layout.rs`.)

use payments_cabinet::store::Role;
use reqwest::Method;
use serde_json::json;

use crate::browser::Browser;
use crate::support::Cabinet;

/// A create signed with the project's key whose signature then had one byte changed: the
/// request id the server answered (also the layout walk's refused request).
pub(crate) async fn refused_create(c: &Cabinet, mpid: &str) -> String {
    let client = c.server.client();
    let body = serde_json::to_vec(
        &json!({"merchant_payment_id": mpid, "amount": "100", "payment_method": "sbp"}),
    )
    .expect("JSON");
    let mut forged = client
        .prepare(
            Method::POST,
            "/api/v1/payments",
            &body,
            Some(&payments_client::SignSpec::default()),
        )
        .expect("prepared");
    let sig = forged
        .headers
        .iter_mut()
        .find(|(n, _)| n.eq_ignore_ascii_case("signature"))
        .expect("a Signature header");
    let at = sig.1.find(':').expect("a byte sequence") + 1;
    let flipped = if &sig.1[at..=at] == "A" { "B" } else { "A" };
    sig.1.replace_range(at..=at, flipped);
    let r = client.send(&forged).await.expect("answered");
    assert_eq!(r.code(), Some("signature_invalid"), "{}", r.json);
    r.headers["x-request-id"]
        .to_str()
        .expect("ASCII")
        .to_string()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs Chromium: chromium and chromedriver"]
async fn the_requests_tab_shows_a_refused_signature_with_its_diagnosis() {
    let c = Cabinet::start().await;
    let demo = c.demo_merchant().await;
    c.user("anna@shop.example", Role::Merchant(demo)).await;
    c.user("help@support.example", Role::Support).await;
    let created = c
        .server
        .client()
        .create_payment(
            &json!({"merchant_payment_id": "req-1", "amount": "100", "payment_method": "sbp"}),
        )
        .await
        .expect("a create");
    assert_eq!(created.status.as_u16(), 201, "{}", created.json);
    let rid = refused_create(&c, "req-2").await;
    c.logged(&rid).await;

    let b = Browser::start(c.url()).await;
    crate::first_sign_in(&c, &b, "anna@shop.example").await;
    b.click_text("I have saved the codes, continue").await;
    b.click_text("Demo project").await;
    b.click_text("Requests").await;
    assert_eq!(b.heading().await, "Demo project: requests");
    assert_eq!(b.all("#requests tr.request").await.len(), 2);
    // Newest first: the refused create, with its request id, status and code.
    let first = b.text("#requests tr.request").await;
    assert!(first.contains("POST /api/v1/payments"), "{first}");
    assert!(first.contains("401"), "{first}");
    assert!(first.contains("signature_invalid"), "{first}");
    assert!(first.contains(&rid), "{first}");
    assert!(first.contains("127.0.0.1"), "{first}");
    assert!(
        first.contains("The API answered: signature does not verify"),
        "the API's message under the code: {first}"
    );
    let diagnosis = b.text("#requests tr.diagnosis").await;
    assert!(
        diagnosis.contains("signature does not verify"),
        "{diagnosis}"
    );
    assert!(diagnosis.contains("@method"), "{diagnosis}");
    let base = b.text("#requests pre.signature-base").await;
    assert!(base.contains("\"@method\": POST"), "{base}");
    assert!(base.contains("\"@signature-params\":"), "{base}");
    assert!(
        !b.source().await.contains(c.server.creds().token.expose()),
        "the token is never shown"
    );
    let codes = b.text("#health-codes").await;
    assert!(codes.contains("signature_invalid"), "{codes}");
    assert!(codes.contains("50.0 %"), "one of two requests: {codes}");
    // The status filter: 2xx leaves only the create; an unreadable status is a field error.
    b.fill("#status", "2xx").await;
    b.click("form.filters button").await;
    assert_eq!(b.all("#requests tr.request").await.len(), 1);
    assert!(b.text("#requests tr.request").await.contains("201"));
    assert!(b.all("#requests tr.diagnosis").await.is_empty());
    b.fill("#status", "4xx").await;
    b.fill("#code", "signature_invalid").await;
    b.click("form.filters button").await;
    assert_eq!(b.all("#requests tr.request").await.len(), 1);
    assert!(b.text("#requests tr.request").await.contains(&rid));
    b.fill("#status", "9xx").await;
    b.fill("#code", "").await;
    b.click("form.filters button").await;
    assert!(b.errors().await.contains("status"), "{}", b.errors().await);
    b.sign_out().await;

    // Support sees the same log.
    crate::first_sign_in(&c, &b, "help@support.example").await;
    b.click_text("I have saved the codes, continue").await;
    b.open(&format!("/projects/{}/requests", c.server.project()))
        .await;
    assert!(b.text("#requests").await.contains(&rid));
    b.close().await;
}
