//! A merchant's control of its callbacks in Chromium (issue 43, item 5): the card's "Resend
//! callback" of a closed live payment, an event's page with the exact body and headers sent
//! and its own resend, and "resend what was not delivered since" on the deliveries page. Each
//! resend reaches a real receiver on a real socket, signed with the project's secret.

use std::sync::Arc;

use payments_cabinet::store::{AuditQuery, Role};
use payments_core::callback::CallbackVerifier;
use payments_core::service::Actor;
use payments_core::transition::Trigger;
use payments_core::Clock;
use payments_directory::ProjectPatch;
use serde_json::json;

use crate::browser::Browser;
use crate::support::Cabinet;
use crate::{first_sign_in, receiver, wait_until};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs Chromium: chromium and chromedriver"]
async fn a_merchant_resends_callbacks_and_reads_what_was_sent() {
    let c = Cabinet::start_with(|s| s.callbacks.allow_local = true).await;
    let demo = c.demo_merchant().await;
    c.user("owner@shop.example", Role::Merchant(demo)).await;
    let project = c.server.project();
    let svc = c.server.state.service.clone();
    let (url, got) = receiver().await;
    c.server
        .patch_project(ProjectPatch {
            callback_url: Some(Some(url)),
            ..Default::default()
        })
        .await;
    let created = c
        .server
        .client()
        .create_payment(
            &json!({"merchant_payment_id": "ctl-1", "amount": "2500", "payment_method": "sbp"}),
        )
        .await
        .expect("a create");
    assert_eq!(created.status.as_u16(), 201, "{}", created.json);
    let id: payments_core::ids::PaymentId = created.json["id"]
        .as_str()
        .expect("id")
        .parse()
        .expect("an id");
    svc.payments()
        .operate(id, Trigger::Confirm { amount: None }, &Actor("test".into()))
        .await
        .expect("confirmed");
    wait_until("the completion's callback", || {
        got.lock().unwrap().len() == 1
    })
    .await;
    let secret = svc
        .callbacks()
        .signing_secrets(project)
        .await
        .expect("the secrets")
        .current()
        .secret
        .clone();
    let verifier = CallbackVerifier::new(vec![secret]);
    let verified = |n: usize| {
        let (headers, body) = got.lock().unwrap()[n].clone();
        verifier
            .verify(
                headers["x-callback-timestamp"].to_str().expect("text"),
                headers["x-callback-signature"].to_str().expect("text"),
                &body,
                c.clock.now(),
            )
            .expect("signed with the project's secret");
        let json: serde_json::Value = serde_json::from_slice(&body).expect("JSON");
        (headers, body, json)
    };
    let (_, _, first) = verified(0);

    // The card of the closed live payment: the merchant's resend, behind a confirmation.
    let b = Browser::start(c.url()).await;
    // Each new page state at 320, 390 and 1,280 px, with axe-core.
    let mut layout = crate::layout::Checks::new();
    first_sign_in(&c, &b, "owner@shop.example").await;
    b.click_text("I have saved the codes, continue").await;
    b.open(&format!("/payments/{id}")).await;
    assert!(
        b.all("#resend-link").await.is_empty(),
        "support's operations are not shown"
    );
    layout.check(&b, "card with a merchant's resend").await;
    b.click("#merchant-resend-link").await;
    assert!(
        b.heading().await.starts_with("Resend the callback"),
        "{}",
        b.heading().await
    );
    b.click_text("Resend the callback").await;
    assert_eq!(b.path().await, format!("/payments/{id}?done=resent"));
    assert!(b.text(".notice").await.contains("callback was queued"));
    wait_until("the resent callback", || got.lock().unwrap().len() == 2).await;
    let (headers, body, resent) = verified(1);
    assert_eq!(resent["id"], first["id"]);
    assert_eq!(resent["status"], "completed");
    let event_id = headers["x-callback-event-id"]
        .to_str()
        .expect("text")
        .to_string();
    assert_ne!(
        Some(event_id.as_str()),
        got.lock().unwrap()[0].0["x-callback-event-id"]
            .to_str()
            .ok(),
        "a new event"
    );

    // The event's page: the exact body, and the headers with the signature that was sent.
    let event_page = format!("/projects/{project}/events/{event_id}");
    for _ in 0..100 {
        b.open(&event_page).await;
        if b.source().await.contains("HTTP 200") {
            break;
        }
        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
    }
    assert_eq!(
        b.text("#event-body").await,
        String::from_utf8(body.clone()).expect("UTF-8"),
        "the body, byte for byte"
    );
    let shown = |name: &'static str| {
        let b = &b;
        async move {
            b.text(&format!("code.header-value[data-header='{name}']"))
                .await
        }
    };
    for name in [
        "X-Callback-Signature",
        "X-Callback-Timestamp",
        "X-Callback-Event-Id",
    ] {
        assert_eq!(
            shown(name).await,
            headers[name].to_str().expect("text"),
            "{name} as sent"
        );
    }
    assert!(!b.source().await.contains("whsec_"), "never the secret");
    layout.check(&b, "event page").await;

    // The event's own resend: a third request, and the new event's page.
    b.click("#event-resend-link").await;
    b.click_text("Resend the callback").await;
    assert!(
        b.path().await.ends_with("?done=resent"),
        "{}",
        b.path().await
    );
    assert!(b.text(".notice").await.contains("new callback event"));
    wait_until("the event's resend", || got.lock().unwrap().len() == 3).await;
    let (_, _, third) = verified(2);
    assert_eq!(third["id"], first["id"]);

    // The deliveries page links each event's request and resend, and resends what was not
    // delivered since a date (nothing failed here: none resent, said so).
    b.open(&format!("/projects/{project}/deliveries")).await;
    assert!(!b.all(".event-resend").await.is_empty());
    layout.check(&b, "deliveries with the recovery form").await;
    b.click("#recover-submit").await;
    assert!(b
        .heading()
        .await
        .starts_with("Resend what was not delivered since"));
    b.click_text("Resend undelivered callbacks").await;
    assert!(
        b.text(".notice")
            .await
            .contains("Resent the callbacks of 0 payments"),
        "{}",
        b.text(".notice").await
    );
    assert_eq!(
        got.lock().unwrap().len(),
        3,
        "nothing failed, nothing resent"
    );

    // Each resend is in the merchant's audit log.
    let audit = c
        .cabinet()
        .store()
        .find_cabinet_audit(&AuditQuery {
            limit: 100,
            ..AuditQuery::default()
        })
        .await
        .expect("the audit log");
    for action in ["payment.resend_callback", "event.resend", "events.recover"] {
        assert!(
            audit
                .records
                .iter()
                .any(|r| r.action == action && r.success),
            "{action} audited"
        );
    }
    layout.assert_clean();
    let _ = Arc::strong_count(&got);
    b.close().await;
    c.server.stop().await;
}

/// The merchant turns its payer page on, in English, with a return URL (an `http://` one is
/// refused, saying why, and nothing is saved); the card shows the payment's
/// `payment_page_url`, and the payer page it leads to has the "Back to <shop>" link.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs Chromium: chromium and chromedriver"]
async fn a_merchant_sets_the_payer_page_and_its_return_link() {
    let c = Cabinet::start().await;
    let demo = c.demo_merchant().await;
    c.user("owner@shop.example", Role::Merchant(demo)).await;
    let project = c.server.project();
    let created = c
        .server
        .client()
        .create_payment(
            &json!({"merchant_payment_id": "page-1", "amount": "2500", "payment_method": "card_transfer"}),
        )
        .await
        .expect("a create");
    assert_eq!(created.status.as_u16(), 201, "{}", created.json);
    assert!(
        created.json.get("payment_page_url").is_none(),
        "off at first"
    );
    let id = created.json["id"].as_str().expect("id").to_string();

    let b = Browser::start(c.url()).await;
    // Each new page state at 320, 390 and 1,280 px, with axe-core.
    let mut layout = crate::layout::Checks::new();
    first_sign_in(&c, &b, "owner@shop.example").await;
    b.click_text("I have saved the codes, continue").await;
    b.open(&format!("/payments/{id}")).await;
    assert!(
        b.all("#payment-page-url").await.is_empty(),
        "no link while the page is off"
    );
    b.open(&format!("/projects/{project}")).await;
    b.click("#payer-settings-link").await;
    assert_eq!(b.path().await, format!("/projects/{project}/payer-page"));
    b.toggle("#payer_page").await;
    b.toggle("#payer_language option[value='en']").await;
    b.fill("#return_url", "http://shop.example/orders").await;
    b.click("#payer-settings-save").await;
    assert!(
        b.errors().await.contains("https://"),
        "{}",
        b.errors().await
    );
    layout.check(&b, "payer page settings refused").await;
    let store = c.server.state.service.store().clone();
    let unchanged = payments_core::store::MerchantStoreExt::project(&*store, project)
        .await
        .expect("store")
        .expect("the project");
    assert!(!unchanged.payer_page, "nothing saved");
    assert_eq!(
        b.el("#return_url")
            .await
            .prop("value")
            .await
            .expect("a property")
            .as_deref(),
        Some("http://shop.example/orders"),
        "what was typed is kept"
    );
    b.fill("#return_url", "https://shop.example/orders").await;
    b.click("#payer-settings-save").await;
    assert!(
        b.text(".notice").await.contains("saved"),
        "{}",
        b.source().await
    );
    let saved = payments_core::store::MerchantStoreExt::project(&*store, project)
        .await
        .expect("store")
        .expect("the project");
    assert!(saved.payer_page);
    assert_eq!(
        saved.return_url.as_ref().map(|u| u.as_str()),
        Some("https://shop.example/orders")
    );

    // The card shows the link the API now answers; the page has the way back.
    b.open(&format!("/payments/{id}")).await;
    let link = b.text("#payment-page-url").await;
    let read = c.server.client().get_payment(&id).await.expect("a read");
    assert_eq!(read.json["payment_page_url"].as_str(), Some(link.as_str()));
    assert!(link.contains("/pay/"), "{link}");
    b.click("#payment-page-url").await;
    let back = b.el("#return-url").await;
    assert_eq!(
        back.attr("href").await.expect("an attribute").as_deref(),
        Some("https://shop.example/orders")
    );
    assert!(b.text("#return-url").await.starts_with("Back to"));
    b.open(&format!("/payments/{id}")).await;
    layout.check(&b, "card with payment_page_url").await;
    layout.assert_clean();
    b.close().await;
    c.server.stop().await;
}
