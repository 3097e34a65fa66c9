//! The balance tab in headless Chromium: every kind of entry (credits, a reversal and a
//! re-check adjustment from the operator's payment operations, then a payout and two
//! adjustments a day later), the balance and the statement as the operator API reads them,
//! negative amounts drawn in red, and a period chosen in the form. With
//! `CABINET_SCREENSHOTS=<dir>` it writes `27-balance.png` (the current month) and
//! `28-balance-statement.png` (one day's statement) for docs/cabinet.md, each also at 390 px
//! (`-390.png`).

use std::time::Duration;

use payments_cabinet::store::Role;
use payments_core::amount::Amount;
use payments_core::service::Actor;
use payments_core::transition::{RecheckOutcome, Trigger};
use serde_json::{json, Value};

use crate::browser::Browser;
use crate::support::Cabinet;

/// A call to the operator API.
async fn operator(c: &Cabinet, method: reqwest::Method, path: &str, body: Value) -> Value {
    let r = reqwest::Client::new()
        .request(method, format!("{}{path}", c.server.operator_url))
        .bearer_auth(c.server.operator_token.expose())
        .json(&body)
        .send()
        .await
        .expect("the operator API answers");
    assert!(r.status().is_success(), "{path}: {}", r.status());
    r.json().await.expect("JSON")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs Chromium: chromium and chromedriver"]
async fn the_balance_tab_shows_every_kind_of_entry_and_a_chosen_period() {
    let c = Cabinet::start().await;
    let demo = c.demo_merchant().await;
    c.user("anna@shop.example", Role::Merchant(demo)).await;
    let project = c.server.project();
    let svc = &c.server.state.service;
    let actor = Actor("operator".into());
    let mut ids = Vec::new();
    for (n, amount) in ["12000", "3400", "7800", "2500", "990"]
        .into_iter()
        .enumerate()
    {
        let r = c
            .server
            .client()
            .create_payment(&json!({"merchant_payment_id": format!("order-30{n}"), "amount": amount, "payment_method": "sbp"}))
            .await
            .expect("a create");
        assert_eq!(r.status.as_u16(), 201, "{}", r.json);
        let id: payments_core::PaymentId =
            r.json["id"].as_str().expect("id").parse().expect("an id");
        ids.push(id);
    }
    // Four credits; a re-check cancels one (a reversal) and lowers another (a re-check
    // adjustment); the fifth payment stays open.
    for id in &ids[..4] {
        svc.payments()
            .operate(*id, Trigger::Confirm { amount: None }, &actor)
            .await
            .expect("confirmed");
    }
    for (id, outcome) in [
        (ids[1], RecheckOutcome::Canceled),
        (
            ids[2],
            RecheckOutcome::Completed {
                amount: Some(Amount::parse("7000").expect("an amount")),
            },
        ),
    ] {
        svc.payments()
            .operate(id, Trigger::StartRecheck, &actor)
            .await
            .expect("a re-check");
        svc.payments()
            .operate(id, Trigger::ResolveRecheck(outcome), &actor)
            .await
            .expect("resolved");
    }
    // A day later: a payout and two adjustments.
    c.clock.advance(Duration::from_secs(86_400));
    let path = format!("/operator/v1/projects/{project}");
    operator(
        &c,
        reqwest::Method::POST,
        &format!("{path}/payouts"),
        json!({"amount": "100", "destination": "TR7NHqjeKQxGTCi8q8ZY4pL8otSzgjLj6t",
               "reference": "9f2c4e6a8b0d1f3e5a7c9b1d3f5e7a9c0b2d4f6e8a1c3e5b7d9f1a3c5e7b9d1f"}),
    )
    .await;
    operator(
        &c,
        reqwest::Method::POST,
        &format!("{path}/adjustments"),
        json!({"amount": "-1.25", "reason": "Bank fee of the returned transfer"}),
    )
    .await;
    operator(
        &c,
        reqwest::Method::POST,
        &format!("{path}/adjustments"),
        json!({"amount": "0.5", "reason": "Goodwill credit, ticket 4411"}),
    )
    .await;
    let balance = operator(
        &c,
        reqwest::Method::GET,
        &format!("{path}/balance"),
        Value::Null,
    )
    .await;
    let entries = operator(
        &c,
        reqwest::Method::GET,
        &format!("{path}/balance/entries?limit=100"),
        Value::Null,
    )
    .await;
    let entries = entries["data"].as_array().expect("entries").clone();
    assert_eq!(entries.len(), 9, "{entries:?}");
    let payout_day = entries[0]["created_at"].as_str().expect("a time")[..10].to_string();

    let b = Browser::start(c.url()).await;
    crate::first_sign_in(&c, &b, "anna@shop.example").await;
    b.click_text("I have saved the codes, continue").await;
    b.click_text("Demo project").await;
    b.click_text("Balance").await;
    assert_eq!(b.heading().await, "Demo project: balance");
    assert_eq!(
        b.text("#balance").await,
        balance["balance"].as_str().expect("the balance")
    );
    assert_eq!(
        b.text("#total-payout").await,
        balance["payouts"].as_str().expect("payouts")
    );
    assert_eq!(b.text("#total-payout").await, "-100.0000");
    // A negative amount is drawn in the danger colour (#a4161a), a positive one is not.
    let red = |css: String| css.replace(' ', "").contains("164,22,26");
    let payout = b.el("#total-payout").await;
    assert!(red(payout.css_value("color").await.expect("a colour")));
    let credits = b.el("#total-credit").await;
    assert!(!red(credits.css_value("color").await.expect("a colour")));
    // The current month so far: its closing is the balance now.
    assert_eq!(b.text("#closing").await, b.text("#balance").await);
    b.screenshot("27-balance").await;
    b.screenshot_at("27-balance-390", 390).await;

    // The payout's day alone, chosen in the form: the opening is the balance after the
    // payments' entries, the lines are the payout and the adjustments.
    for field in ["from", "to"] {
        b.client
            .execute(
                &format!("document.getElementById('{field}').value = arguments[0];"),
                vec![json!(payout_day)],
            )
            .await
            .expect("a date set");
    }
    b.click_text("Show the statement").await;
    assert_eq!(
        b.path().await,
        format!("/projects/{project}/balance?from={payout_day}&to={payout_day}")
    );
    assert_eq!(
        b.text("#opening").await,
        entries[3]["balance_after"]
            .as_str()
            .expect("the last payment entry's balance")
    );
    assert_eq!(b.text("#count-payout").await, "1");
    assert_eq!(b.text("#count-operator_adjustment").await, "2");
    assert_eq!(b.text("#sum-operator_adjustment").await, "-0.7500");
    assert_eq!(b.text("#count-credit").await, "0");
    assert_eq!(b.text("#closing").await, b.text("#balance").await);
    let csv = b
        .el("#entries-csv")
        .await
        .attr("href")
        .await
        .expect("attr")
        .expect("a link");
    assert_eq!(
        csv,
        format!("/projects/{project}/balance/entries.csv?from={payout_day}&to={payout_day}")
    );
    let payout_row = b.row("TR7NHqjeKQxGTCi8q8ZY4pL8otSzgjLj6t").await;
    assert!(
        payout_row.contains("Payout") && payout_row.contains("-100.0000"),
        "{payout_row}"
    );
    assert!(b
        .row("Bank fee")
        .await
        .contains("Reason: Bank fee of the returned transfer"));
    b.screenshot("28-balance-statement").await;
    b.screenshot_at("28-balance-statement-390", 390).await;

    // A bad period says so on the page.
    b.open(&format!("/projects/{project}/balance?from=2026-02-30"))
        .await;
    assert!(
        b.errors().await.contains("is not a date"),
        "{}",
        b.errors().await
    );
    b.close().await;
    c.server.stop().await;
}
