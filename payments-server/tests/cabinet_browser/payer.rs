//! The hosted payer page in headless Chromium: a card number in groups of four whose copy
//! button puts the digits only on the clipboard, an `sbp` phone shown formatted and copied in
//! E.164, the outcome and no requisite after a confirmation and after expiry, the same bare
//! 404 for every wrong link, no horizontal scroll at 320 px, the project's language, and the
//! live status: an open page turning to "paid" within 10 s of a confirmation, in place, without
//! a reload and without a `meta refresh`.

use std::time::{Duration, Instant};

use payments_core::payer::PageLanguage;
use payments_core::service::Actor;
use payments_core::transition::Trigger;
use payments_directory::ProjectPatch;
use serde_json::json;

use crate::browser::Browser;
use crate::support::Cabinet;

/// The demo project with the payer page on, in `language`.
async fn page_on(c: &Cabinet, language: PageLanguage) {
    c.server
        .patch_project(ProjectPatch {
            payer_page: Some(true),
            payer_language: Some(language),
            ..ProjectPatch::default()
        })
        .await;
}

/// A payment of the demo project; its JSON.
async fn create(c: &Cabinet, order: &str, amount: &str, method: &str) -> serde_json::Value {
    let created = c
        .server
        .client()
        .create_payment(
            &json!({"merchant_payment_id": order, "amount": amount, "payment_method": method}),
        )
        .await
        .expect("a create");
    assert_eq!(created.status.as_u16(), 201, "{}", created.json);
    created.json
}

/// The path of a payment's page (`/pay/<token>`) from its `payment_page_url`.
fn page_path(c: &Cabinet, payment: &serde_json::Value) -> String {
    let url = payment["payment_page_url"]
        .as_str()
        .unwrap_or_else(|| panic!("payment_page_url is answered: {payment}"));
    let path = url
        .strip_prefix(c.url().trim_end_matches('/'))
        .unwrap_or_else(|| panic!("{url} is under the cabinet's URL {}", c.url()));
    assert!(path.starts_with("/pay/"), "{path}");
    path.to_string()
}

/// What the clipboard holds: pasted (Ctrl+V) into a field added to the page for the test.
async fn clipboard(b: &Browser) -> String {
    b.client
        .execute(
            "const t = document.createElement('textarea'); t.id = 'paste-here'; \
             document.body.appendChild(t); t.focus();",
            vec![],
        )
        .await
        .expect("a field to paste into");
    let field = b.el("#paste-here").await;
    field
        .send_keys(&format!("{}v", fantoccini::key::Key::Control))
        .await
        .expect("pasted");
    let text = field
        .prop("value")
        .await
        .expect("value")
        .unwrap_or_default();
    b.client
        .execute("document.getElementById('paste-here').remove();", vec![])
        .await
        .expect("removed");
    text
}

/// Whether the page scrolls sideways at the current window size, its width, and the elements
/// that reach past the right edge (for the failure message).
async fn scrolls_sideways(b: &Browser) -> (bool, u64, String) {
    let v = b
        .client
        .execute(
            "const w = document.documentElement.clientWidth; \
             const over = [...document.querySelectorAll('body *')] \
               .filter(e => e.getBoundingClientRect().right > w + 0.5) \
               .map(e => e.tagName + '#' + e.id + '.' + e.className).join(' '); \
             return [document.documentElement.scrollWidth > w, window.innerWidth, over];",
            vec![],
        )
        .await
        .expect("measured");
    (
        v[0].as_bool().expect("a boolean"),
        v[1].as_u64().expect("a width"),
        v[2].as_str().unwrap_or_default().to_string(),
    )
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs Chromium: chromium and chromedriver"]
async fn payer_page_shows_the_rules_in_a_real_browser() {
    let c = Cabinet::start().await;
    page_on(&c, PageLanguage::En).await;
    let card = create(&c, "order-card-1", "1234.50", "card_transfer").await;
    let card_path = page_path(&c, &card);
    let digits = card["requisite"]
        .as_str()
        .expect("a card number")
        .to_string();
    assert_eq!(digits.len(), 16);
    // The link is the same in every answer about the payment.
    let read = c
        .server
        .client()
        .get_payment(card["id"].as_str().expect("id"))
        .await
        .expect("a read");
    assert_eq!(read.json["payment_page_url"], card["payment_page_url"]);
    // Not derivable from the payment id.
    assert!(!card_path.contains(card["id"].as_str().expect("id")));

    let b = Browser::start(c.url()).await;
    b.open(&card_path).await;
    assert_eq!(
        b.el("html")
            .await
            .attr("lang")
            .await
            .expect("lang")
            .as_deref(),
        Some("en")
    );
    // The card number in groups of four; the amount exactly as stored.
    let shown = b.text("#requisite").await;
    let groups: Vec<&str> = shown.split(' ').collect();
    assert_eq!(groups.len(), 4, "{shown}");
    assert!(groups.iter().all(|g| g.len() == 4), "{shown}");
    assert_eq!(shown.replace(' ', ""), digits);
    assert_eq!(b.text("#amount").await, "1234.50");
    assert_eq!(
        b.text("#holder").await,
        card["holder_name"].as_str().expect("holder")
    );
    assert_eq!(
        b.text("#bank").await,
        card["requisite_bank"].as_str().expect("bank")
    );
    assert!(b.source().await.contains("fee"), "the payer-bank fee note");
    // The deadline: created_at + lifetime in <time datetime>.
    let deadline = b.el("#deadline").await;
    assert_eq!(
        deadline
            .attr("datetime")
            .await
            .expect("datetime")
            .as_deref(),
        card["expires_at"].as_str()
    );
    // The copy button (shown by the script) copies the digits only.
    b.el("#copy-requisite")
        .await
        .click()
        .await
        .expect("clicked");
    assert_eq!(clipboard(&b).await, digits);
    // The status region says so once the clipboard's promise settled and 50 ms passed (the
    // script empties it first so that a screen reader announces every click).
    let mut status = String::new();
    for _ in 0..100 {
        status = b.text("#copy-status").await;
        if status == "Copied" {
            break;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    assert_eq!(status, "Copied");
    // The countdown ticks (mm:ss) with the script.
    let left = b.text("#left").await;
    assert!(left.contains(':'), "{left}");

    // 320 px wide: no horizontal scroll.
    b.client.set_window_size(320, 800).await.expect("resized");
    let (sideways, width, over) = scrolls_sideways(&b).await;
    assert!(width <= 340, "the viewport is {width} px wide");
    assert!(!sideways, "the page scrolls sideways at {width} px: {over}");
    b.client.set_window_size(1280, 900).await.expect("resized");

    // An sbp payment: the phone formatted, copied in E.164, and its QR code inline.
    let sbp = create(&c, "order-sbp-1", "500", "sbp").await;
    let sbp_path = page_path(&c, &sbp);
    b.open(&sbp_path).await;
    let phone = sbp["requisite"].as_str().expect("a phone");
    let e164 = format!("+{}", phone.trim_start_matches('+'));
    let shown = b.text("#requisite").await;
    assert!(shown.starts_with("+7 9"), "{shown}");
    assert_eq!(
        shown
            .chars()
            .filter(char::is_ascii_digit)
            .collect::<String>(),
        e164[1..]
    );
    b.el("#copy-requisite")
        .await
        .click()
        .await
        .expect("clicked");
    assert_eq!(clipboard(&b).await, e164);
    assert!(
        b.all("#qr svg").await.len() == 1,
        "the QR code is inline SVG"
    );

    // The project's language.
    page_on(&c, PageLanguage::Ru).await;
    b.open(&sbp_path).await;
    assert_eq!(
        b.el("html")
            .await
            .attr("lang")
            .await
            .expect("lang")
            .as_deref(),
        Some("ru")
    );
    assert_eq!(b.heading().await, "Оплата");

    // After a confirmation: the outcome, no requisite.
    c.server
        .state
        .service
        .payments()
        .operate(
            card["id"].as_str().expect("id").parse().expect("an id"),
            Trigger::Confirm { amount: None },
            &Actor("test".into()),
        )
        .await
        .expect("confirmed");
    page_on(&c, PageLanguage::En).await;
    b.open(&card_path).await;
    assert_eq!(b.heading().await, "Payment received");
    assert!(b.all("#requisite").await.is_empty());
    assert!(!b.source().await.contains(&digits), "no stale requisite");
    assert!(!b.source().await.contains(&shown_card(&digits)));

    // After expiry (the sweeper has not run yet): the outcome, no requisite.
    c.clock.advance(Duration::from_secs(16 * 60));
    b.open(&sbp_path).await;
    // Before the sweeper and after it (it may run first on a loaded machine): the time ran
    // out, never the requisite.
    assert_eq!(b.heading().await, "The time to pay has run out");
    c.server
        .state
        .service
        .payments()
        .sweep(100)
        .await
        .expect("a sweep");
    b.open(&sbp_path).await;
    assert_eq!(b.heading().await, "The time to pay has run out");
    assert!(b.all("#requisite, #qr, #copy-requisite").await.is_empty());
    assert!(!b.source().await.contains(&phone[2..]), "no stale phone");
    b.close().await;

    // A wrong link is 404 and says nothing of any payment; a malformed one is the same page.
    let http = reqwest::Client::new();
    let real = http
        .get(format!("{}{card_path}", c.url()))
        .send()
        .await
        .expect("an answer");
    let csp = real
        .headers()
        .get("content-security-policy")
        .expect("a CSP")
        .to_str()
        .expect("text")
        .to_string();
    assert!(
        csp.contains("default-src 'none'") && csp.contains("script-src 'self'"),
        "{csp}"
    );
    assert!(!csp.contains("unsafe-inline"), "{csp}");
    let mut bodies = Vec::new();
    for wrong in [
        "/pay/AAAAAAAAAAAAAAAAAAAAAA".to_string(),
        format!("/pay/{}", card["id"].as_str().expect("id")),
        format!("{}x", &card_path[..card_path.len() - 1]),
        "/pay/short".to_string(),
    ] {
        let r = http
            .get(format!("{}{wrong}", c.url()))
            .send()
            .await
            .expect("an answer");
        assert_eq!(r.status().as_u16(), 404, "{wrong}");
        let body = r.text().await.expect("a body");
        assert!(!body.contains("order-"), "{wrong}: {body}");
        bodies.push(body);
    }
    assert!(
        bodies.windows(2).all(|w| w[0] == w[1]),
        "one page for every wrong link"
    );
    c.server.stop().await;
}

/// `POST` to the operator API (an empty body); its status.
async fn operator(c: &Cabinet, path: &str) -> u16 {
    reqwest::Client::new()
        .post(format!("{}{path}", c.server.operator_url))
        .bearer_auth(c.server.operator_token.expose())
        .json(&json!({}))
        .send()
        .await
        .expect("the operator API answers")
        .status()
        .as_u16()
}

/// Whether the document is still the one marked by [`mark`]: no reload, no navigation, the
/// same `<main>` element.
async fn same_document(b: &Browser) -> bool {
    b.client
        .execute(
            "return window.__firstLoad === 'marked' \
               && window.__main === document.getElementById('main') \
               && performance.getEntriesByType('navigation').length === 1 \
               && performance.getEntriesByType('navigation')[0].type === 'navigate';",
            vec![],
        )
        .await
        .expect("asked")
        .as_bool()
        .expect("a boolean")
}

/// Marks the loaded document, so that a reload (which starts a new one) shows.
async fn mark(b: &Browser) {
    b.client
        .execute(
            "window.__firstLoad = 'marked'; window.__main = document.getElementById('main');",
            vec![],
        )
        .await
        .expect("marked");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs Chromium: chromium and chromedriver"]
async fn payer_page_turns_paid_in_place_within_10_s_of_a_confirmation() {
    let c = Cabinet::start().await;
    page_on(&c, PageLanguage::En).await;
    let card = create(&c, "order-live-1", "700", "card_transfer").await;
    let id = card["id"].as_str().expect("id").to_string();
    let path = page_path(&c, &card);
    let b = Browser::start(c.url()).await;
    b.open(&path).await;
    assert_eq!(b.heading().await, "Payment");
    assert_eq!(b.text("#shop").await, "Demo project");
    assert_eq!(
        b.el("#main")
            .await
            .attr("data-state")
            .await
            .expect("attr")
            .as_deref(),
        Some("pay")
    );
    // No self-refresh: the page changes only through its script.
    assert!(
        b.all("meta[http-equiv]").await.is_empty(),
        "no meta refresh"
    );
    // The script keeps the page up to date: the no-script "Refresh status" link is hidden.
    assert!(!b
        .el("#refresh")
        .await
        .is_displayed()
        .await
        .expect("displayed?"));
    mark(&b).await;
    // Let it ask a few times before the payment changes (its backoff grows meanwhile).
    tokio::time::sleep(Duration::from_secs(4)).await;
    assert_eq!(b.heading().await, "Payment");
    assert!(same_document(&b).await);

    // Paid, through the operator API: the page says so within 10 s, in place.
    assert_eq!(
        operator(&c, &format!("/operator/v1/payments/{id}/confirm")).await,
        200
    );
    let confirmed = Instant::now();
    let mut heading = String::new();
    while confirmed.elapsed() < Duration::from_secs(10) {
        heading = b.heading().await;
        if heading == "Payment received" {
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    assert_eq!(
        heading,
        "Payment received",
        "not shown within 10 s of the confirmation ({:?})",
        confirmed.elapsed()
    );
    assert!(same_document(&b).await, "the page was not reloaded");
    assert_eq!(
        b.el("#main")
            .await
            .attr("data-state")
            .await
            .expect("attr")
            .as_deref(),
        Some("completed")
    );
    // Announced by the polite status region; no requisite left, no refresh link.
    let live = b.el("#live").await;
    assert_eq!(
        live.attr("aria-live").await.expect("attr").as_deref(),
        Some("polite")
    );
    let mut said = String::new();
    for _ in 0..50 {
        said = b
            .client
            .execute(
                "return document.getElementById('live').textContent;",
                vec![],
            )
            .await
            .expect("asked")
            .as_str()
            .unwrap_or_default()
            .to_string();
        if !said.is_empty() {
            break;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    assert_eq!(said, "Payment received");
    assert!(b
        .all("#requisite, #copy-requisite, #left, #refresh")
        .await
        .is_empty());
    assert!(b
        .client
        .title()
        .await
        .expect("a title")
        .starts_with("Payment received"));
    b.close().await;
    c.server.stop().await;
}

fn shown_card(digits: &str) -> String {
    payments_core::payer::card_display(digits).0
}

/// The page at desktop width, 390 px (a common phone) and 320 px (a small one).
async fn shots(b: &Browser, name: &str) {
    b.screenshot(&format!("{name}-desktop")).await;
    b.screenshot_at(&format!("{name}-390"), 390).await;
    b.screenshot_at(&format!("{name}-320"), 320).await;
}

/// The payer page's screenshots (desktop, 390 px and 320 px, Russian and English: paying by
/// card and by `sbp`, paid, canceled, out of time) into `CABINET_SCREENSHOTS` (run with
/// `--ignored`).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "writes the documentation's screenshots"]
async fn payer_page_screenshots() {
    let c = Cabinet::start().await;
    page_on(&c, PageLanguage::Ru).await;
    let card = create(&c, "order-1042", "3400.50", "card_transfer").await;
    let sbp = create(&c, "order-1043", "1500", "sbp").await;
    let done = create(&c, "order-1044", "990", "card_transfer").await;
    c.server
        .state
        .service
        .payments()
        .operate(
            done["id"].as_str().expect("id").parse().expect("an id"),
            Trigger::Confirm { amount: None },
            &Actor("test".into()),
        )
        .await
        .expect("confirmed");
    let canceled = create(&c, "order-1045", "990", "card_transfer").await;
    assert_eq!(
        operator(
            &c,
            &format!(
                "/operator/v1/payments/{}/cancel",
                canceled["id"].as_str().expect("id")
            )
        )
        .await,
        200
    );
    let expired = create(&c, "order-1046", "990", "card_transfer").await;
    let b = Browser::start(c.url()).await;
    for language in [PageLanguage::Ru, PageLanguage::En] {
        page_on(&c, language).await;
        let l = language.as_str();
        for (name, payment) in [
            ("card", &card),
            ("sbp", &sbp),
            ("completed", &done),
            ("canceled", &canceled),
        ] {
            b.open(&page_path(&c, payment)).await;
            shots(&b, &format!("payer-{name}-{l}")).await;
        }
    }
    // Past the deadline (the other pages are taken already).
    c.clock.advance(Duration::from_secs(16 * 60));
    c.server
        .state
        .service
        .payments()
        .sweep(100)
        .await
        .expect("a sweep");
    for language in [PageLanguage::Ru, PageLanguage::En] {
        page_on(&c, language).await;
        b.open(&page_path(&c, &expired)).await;
        shots(&b, &format!("payer-expired-{}", language.as_str())).await;
    }
    b.close().await;
    c.server.stop().await;
}

/// "I paid" from a phone: a payer opens a canceled payment's page 390 px wide, chooses what
/// happened, types the amount and the bank, attaches a PDF receipt and sends the form (no
/// script involved in sending: a plain multipart post); the page comes back saying the appeal
/// was received, and the service holds one appeal of source `payer` with the PDF. axe-core
/// finds nothing at 390 and 1,280 px, on the filled form and on the confirmation. With
/// `CABINET_SCREENSHOTS`, both pages at 390 px (`payer-appeal-en-390`,
/// `payer-appeal-received-en-390`).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs Chromium: chromium and chromedriver, and axe-core from npm"]
async fn a_payer_says_i_paid_from_a_phone() {
    let c = Cabinet::start().await;
    page_on(&c, PageLanguage::En).await;
    let payment = create(&c, "order-i-paid-1", "1500", "card_transfer").await;
    let id = payment["id"].as_str().expect("id").to_string();
    assert_eq!(
        operator(&c, &format!("/operator/v1/payments/{id}/cancel")).await,
        200
    );
    let path = page_path(&c, &payment);
    let dir = tempfile::tempdir().expect("a directory");
    let pdf = dir.path().join("receipt.pdf");
    std::fs::write(
        &pdf,
        b"%PDF-1.7\n1 0 obj\n<< /Type /Catalog >>\nendobj\ntrailer\n<< /Root 1 0 R >>\n%%EOF\n",
    )
    .expect("the receipt is written");
    let mut checks = crate::layout::Checks::new();

    let b = Browser::start(c.url()).await;
    b.client.set_window_size(390, 900).await.expect("resized");
    b.open(&path).await;
    let (sideways, width, over) = scrolls_sideways(&b).await;
    assert!(
        (380..=390).contains(&width),
        "the viewport is {width} px wide"
    );
    assert!(!sideways, "the page scrolls sideways at {width} px: {over}");
    assert_eq!(b.heading().await, "The payment was canceled");
    assert_eq!(b.text("#appeal-heading").await, "I paid");
    b.toggle("input[name='reason'][value='paid_but_canceled']")
        .await;
    b.fill("#claimed_amount", "1500").await;
    b.fill("#payer_bank", "T-Bank").await;
    b.el("#receipt")
        .await
        .send_keys(pdf.to_str().expect("a UTF-8 path"))
        .await
        .expect("the file is chosen");
    checks.check(&b, "payer page: I paid, filled in").await;
    b.client.set_window_size(390, 900).await.expect("resized");
    b.screenshot_at("payer-appeal-en-390", 390).await;
    b.client.set_window_size(390, 900).await.expect("resized");

    b.click("#appeal-send").await;
    assert_eq!(b.path().await, path, "back on the page after a 303");
    assert_eq!(b.heading().await, "The payment was canceled");
    let received = b.text("#appeal-received").await;
    assert!(
        received == "Your appeal was received: waiting to be checked"
            || received == "Your appeal was received: being checked",
        "{received}"
    );
    assert!(b.all("#appeal-form, #appeal-error").await.is_empty());
    checks.check(&b, "payer page: I paid, received").await;
    b.screenshot_at("payer-appeal-received-en-390", 390).await;
    checks.assert_clean();
    b.close().await;

    let page = c
        .server
        .state
        .service
        .appeals()
        .find_appeals(&payments_core::appeal::AppealQuery {
            payment: Some(id.parse().expect("an id")),
            ..payments_core::appeal::AppealQuery::newest(10)
        })
        .await
        .expect("the appeals");
    assert_eq!(page.appeals.len(), 1, "{:?}", page.appeals);
    let appeal = &page.appeals[0];
    assert_eq!(appeal.source, payments_core::appeal::AppealSource::Payer);
    assert_eq!(appeal.payer_bank.as_deref(), Some("T-Bank"));
    assert_eq!(appeal.receipts.len(), 1);
    assert_eq!(
        appeal.receipts[0].kind,
        payments_core::receipt::ReceiptKind::Pdf
    );
    c.server.stop().await;
}
