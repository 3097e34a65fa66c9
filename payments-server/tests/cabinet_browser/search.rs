//! The payment search across a merchant's projects (issue 43, item 3) in Chromium: one box
//! finds a payment by its id, the start of its merchant payment id, its amount (by value) and
//! the last four digits of its requisite; the status and the dates narrow it. Every key finds
//! the demo merchant's payments in both of its projects and never another merchant's.

use std::time::Duration;

use payments_cabinet::store::Role;
use payments_core::amount::Amount;
use payments_core::ids::{PaymentId, ProjectId};
use payments_core::payment::{Payment, PaymentStatus};
use payments_core::testing::contract::sample_payment;
use payments_core::Clock;

use crate::browser::Browser;
use crate::first_sign_in;
use crate::support::Cabinet;

const DAY: Duration = Duration::from_secs(86_400);

/// A payment of `project` created `age` ago, as `mpid`, with `amount`, `requisite` and
/// `status`, written straight to the store (the search reads what any write stored).
async fn stored(
    c: &Cabinet,
    project: ProjectId,
    mpid: &str,
    amount: &str,
    requisite: &str,
    status: PaymentStatus,
    age: Duration,
) -> Payment {
    let mut p = sample_payment(
        PaymentId::generate(&payments_http::system::OsRandom),
        project,
        mpid,
    );
    p.amount = Amount::parse(amount).expect("an amount");
    p.initial_amount = p.amount;
    p.status = status;
    c.stored(p, requisite, age).await
}

/// Searches with `query` (the form's query string) and answers the results table's text
/// ("" when there is none).
async fn search(b: &Browser, query: &str) -> String {
    b.open(&format!("/payments/search?{query}")).await;
    if b.all("#search-results").await.is_empty() {
        String::new()
    } else {
        b.text("#search-results").await
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs Chromium: chromium and chromedriver"]
async fn the_search_finds_by_each_key_across_the_merchants_projects_only() {
    let c = Cabinet::start().await;
    let demo = c.demo_merchant().await;
    c.user("owner@shop.example", Role::Merchant(demo)).await;
    let live = c.server.project();
    let test: ProjectId = c
        .server
        .creds()
        .for_test_project()
        .expect("a test project")
        .project_id
        .parse()
        .expect("a UUID");
    let (_, foreign) = c.other_merchant("Other shop").await;
    // Two projects of the demo merchant, and another merchant's payment that matches every
    // key: it must never be found.
    let a = stored(
        &c,
        live,
        "srch-alpha-1",
        "150.50",
        "2200 1234 5678 4242",
        PaymentStatus::Canceled,
        DAY * 3,
    )
    .await;
    let b2 = stored(
        &c,
        test,
        "srch-alpha-2",
        "150.5",
        "+7 (900) 111-77-77",
        PaymentStatus::Completed,
        DAY,
    )
    .await;
    let old = stored(
        &c,
        live,
        "zz-older",
        "99",
        "2200000000009999",
        PaymentStatus::Canceled,
        DAY * 10,
    )
    .await;
    stored(
        &c,
        test,
        "zz-thousand",
        "1000.00",
        "2200000000001111",
        PaymentStatus::Completed,
        DAY * 2,
    )
    .await;
    let x = stored(
        &c,
        foreign,
        "srch-alpha-3",
        "150.500",
        "4111111111114242",
        PaymentStatus::Completed,
        DAY,
    )
    .await;

    let b = Browser::start(c.url()).await;
    // Each page state of the search at 320, 390 and 1,280 px, with axe-core.
    let mut layout = crate::layout::Checks::new();
    first_sign_in(&c, &b, "owner@shop.example").await;
    b.click_text("I have saved the codes, continue").await;

    // The box, from the main navigation.
    b.click("#nav-search").await;
    assert_eq!(b.path().await, "/payments/search");
    b.fill("#q", "srch-alpha").await;
    b.click("#search-submit").await;
    let found = b.text("#search-results").await;
    assert!(
        found.contains("srch-alpha-1") && found.contains("srch-alpha-2"),
        "{found}"
    );
    assert!(
        !found.contains("srch-alpha-3"),
        "another merchant's: {found}"
    );
    assert!(b
        .text("#search-read-as")
        .await
        .contains("merchant_payment_id"));
    // Newest first, across projects: the test project's payment (a day old) before the
    // live project's (three days).
    assert!(
        found.find("srch-alpha-2") < found.find("srch-alpha-1"),
        "{found}"
    );
    assert!(
        found.contains("Demo test project"),
        "the project is named: {found}"
    );
    layout.check(&b, "search results").await;

    // The payment id opens that payment's card; another merchant's id finds nothing.
    b.open(&format!("/payments/search?q={}", a.id)).await;
    assert_eq!(b.path().await, format!("/payments/{}", a.id));
    assert_eq!(search(&b, &format!("q={}", x.id)).await, "");
    assert!(b.source().await.contains("No payments match"));

    // The amount by value, whatever its scale.
    for q in ["150.5", "150.50", "150.500000"] {
        let found = search(&b, &format!("q={q}")).await;
        assert!(
            found.contains("srch-alpha-1") && found.contains("srch-alpha-2"),
            "{q}: {found}"
        );
        assert!(
            !found.contains("srch-alpha-3") && !found.contains("zz-older"),
            "{q}: {found}"
        );
    }
    assert!(b.text("#search-read-as").await.contains("an amount"));

    // The last four digits of the card number or phone.
    let found = search(&b, "q=4242").await;
    assert!(found.contains("srch-alpha-1"), "{found}");
    assert!(
        !found.contains("srch-alpha-3") && !found.contains("srch-alpha-2"),
        "{found}"
    );
    // Four digits are an amount too: `1000` finds one thousand written `1000.00`.
    let found = search(&b, "q=1000").await;
    assert!(found.contains("zz-thousand"), "{found}");
    assert!(b.text("#search-read-as").await.contains("an amount"));
    // Money as people write it, and a card number pasted whole.
    for q in ["1%20000%2C00", "1%2C000.00", "2200%200000%200000%201111"] {
        let found = search(&b, &format!("q={q}")).await;
        assert!(found.contains("zz-thousand"), "{q}: {found}");
    }
    let found = search(&b, "q=7777").await;
    assert!(
        found.contains("srch-alpha-2") && !found.contains("srch-alpha-1"),
        "{found}"
    );

    // The status alone, and with the box.
    let found = search(&b, "status=completed").await;
    assert!(found.contains("srch-alpha-2"), "{found}");
    assert!(
        !found.contains("srch-alpha-1") && !found.contains("srch-alpha-3"),
        "{found}"
    );
    let found = search(&b, "q=zz&status=canceled").await;
    assert!(
        found.contains("zz-older") && !found.contains("srch-alpha"),
        "{found}"
    );

    // The time: created within the last two days (the dates are inclusive UTC days).
    let day = |t: payments_core::Timestamp| t.to_rfc3339()[..10].to_string();
    let now = c.clock.now();
    let found = search(&b, &format!("from={}&to={}", day(now - DAY * 2), day(now))).await;
    assert!(found.contains("srch-alpha-2"), "{found}");
    assert!(
        !found.contains("srch-alpha-1")
            && !found.contains("zz-older")
            && !found.contains("srch-alpha-3"),
        "{found}"
    );
    let found = search(
        &b,
        &format!(
            "q=srch&from={}&to={}",
            day(old.created_at),
            day(a.created_at)
        ),
    )
    .await;
    assert!(
        found.contains("srch-alpha-1") && !found.contains("srch-alpha-2"),
        "{found}"
    );

    // What the box cannot take (no metadata value holds a control character) is refused,
    // saying what it takes.
    search(&b, "q=order%071").await;
    assert!(b.errors().await.contains("search:"), "{}", b.errors().await);
    let _ = b2;
    layout.check(&b, "search refused").await;
    layout.assert_clean();
    b.close().await;
    c.server.stop().await;
}
