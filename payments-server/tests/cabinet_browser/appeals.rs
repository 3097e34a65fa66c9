//! Appeals in headless Chromium, over the whole server: a merchant's user opens an appeal about
//! a canceled payment from its card, choosing a PDF receipt in the form's file input; support
//! finds it in the queue (`Appeals` in its navigation), accepts it with the amount found after
//! the confirmation page, and the merchant API reads the payment `completed` with that amount.
//! Each page is checked like the layout walk's (no sideways scroll at 320, 390 and 1,280 px,
//! axe-core clean at 390 and 1,280 px). With `CABINET_SCREENSHOTS=<dir>` it writes
//! `34-payment-appeal.png` (the card with its appeal and the form), `35-appeals-queue.png`,
//! `36-appeal-accept-confirm.png` and `37-appeal-accepted.png` for docs/cabinet.md, each also
//! at 390 px (`-390.png`).

use payments_cabinet::store::Role;
use payments_core::service::Actor;
use payments_core::transition::Trigger;
use serde_json::json;

use crate::browser::Browser;
use crate::layout::Checks;
use crate::support::Cabinet;

/// A small PDF, as a payer's bank app exports one.
const PDF: &[u8] = b"%PDF-1.4\n1 0 obj\n<<>>\nendobj\ntrailer\n<<>>\n%%EOF\n";

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs Chromium: chromium and chromedriver"]
async fn a_merchant_appeals_with_a_receipt_and_support_accepts_it_from_the_queue() {
    let c = Cabinet::start().await;
    let demo = c.demo_merchant().await;
    c.user("anna@shop.example", Role::Merchant(demo)).await;
    c.user("sam@support.example", Role::Support).await;
    // The payer paid; the payment says canceled.
    let created = c
        .server
        .client()
        .create_payment(&json!({"merchant_payment_id": "order-4102", "amount": "1500", "payment_method": "sbp"}))
        .await
        .expect("a create");
    assert_eq!(created.status.as_u16(), 201, "{}", created.json);
    let id = created.json["id"].as_str().expect("id").to_string();
    c.server
        .state
        .service
        .payments()
        .operate(
            id.parse().expect("an id"),
            Trigger::Cancel,
            &Actor("operator".into()),
        )
        .await
        .expect("canceled");
    let files = tempfile::tempdir().expect("a directory");
    let receipt = files.path().join("receipt-4102.pdf");
    std::fs::write(&receipt, PDF).expect("the receipt is written");

    let mut checks = Checks::new();
    let b = Browser::start(c.url()).await;
    crate::first_sign_in(&c, &b, "anna@shop.example").await;
    b.click_text("I have saved the codes, continue").await;
    b.open(&format!("/payments/{id}")).await;
    b.toggle("#appeal-reason option[value='paid_other_amount']")
        .await;
    b.fill("#appeal-claimed", "1450").await;
    b.fill("#appeal-bank", "Т-Банк").await;
    b.el("#appeal-receipt-1")
        .await
        .send_keys(&receipt.display().to_string())
        .await
        .expect("the receipt is chosen");
    b.click("#appeal-submit").await;
    assert_eq!(b.path().await, format!("/payments/{id}?done=appealed"));
    let row = b.text("#payment-appeals tbody tr").await;
    for shown in ["open", "Paid another amount", "1450 RUB", "Receipt 1: PDF"] {
        assert!(
            row.contains(shown),
            "the card's appeal lacks {shown:?}: {row}"
        );
    }
    checks.page(&b, "34-payment-appeal").await;
    b.sign_out().await;

    crate::first_sign_in(&c, &b, "sam@support.example").await;
    b.click_text("I have saved the codes, continue").await;
    b.click("#nav-appeals").await;
    assert_eq!(b.heading().await, "Appeals");
    let appeal = b
        .el("article.appeal")
        .await
        .attr("data-appeal")
        .await
        .expect("an attribute")
        .expect("the appeal's id");
    let offered = b.el(&format!("#accept-{appeal}")).await;
    assert_eq!(
        offered.prop("value").await.expect("a value").as_deref(),
        Some("1450"),
        "Accept offers the claimed amount"
    );
    checks.page(&b, "35-appeals-queue").await;
    b.click(&format!("form[action='/appeals/{appeal}/accept'] button"))
        .await;
    assert_eq!(b.heading().await, "Accept the appeal about order-4102?");
    checks.page(&b, "36-appeal-accept-confirm").await;
    b.fill("#decide-note", "Found in the bank statement of 1 October")
        .await;
    b.click("#decide-submit").await;
    let notice = b.text(".notice").await;
    assert_eq!(
        notice,
        "Appeal accepted: payment order-4102 is completed with 1450 RUB."
    );
    assert!(
        b.all("article.appeal").await.is_empty(),
        "the queue is empty"
    );
    checks.page(&b, "37-appeal-accepted").await;

    let read = c.server.client().get_payment(&id).await.expect("a read");
    assert_eq!(read.json["status"], "completed", "{}", read.json);
    assert_eq!(read.json["amount"].to_string(), "1450", "{}", read.json);
    checks.assert_clean();
    b.close().await;
}
