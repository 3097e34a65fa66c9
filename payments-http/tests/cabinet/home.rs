//! The home page over real HTTP: today's, 7 and 30 days' figures summed from the payments as
//! the store holds them (exact decimals, grouped and written in the page's language), the
//! newest payments by order number, each project's callback health; support and visitors
//! are sent elsewhere.

use std::time::Duration;

use payments_cabinet::store::Role;
use serde_json::json;

use super::enrolled;
use super::support::{between, Cabinet};
use super::visitor::Visitor;
use payments_core::testing::TestCaller;

/// Creates a payment of `amount` in the demo project, signed at the server's clock (which
/// the test moves), and closes it through the card's test buttons (`paid` or `canceled`).
async fn closed_payment(
    c: &Cabinet,
    caller: &TestCaller,
    owner: &mut Visitor,
    order: &str,
    amount: &str,
) {
    let outcome = if order.ends_with('x') {
        "canceled"
    } else {
        "paid"
    };
    let body = json!({"merchant_payment_id": order, "amount": amount, "payment_method": "sbp"});
    let created = caller
        .create(&c.server.state.service, body.to_string().as_bytes())
        .await
        .expect("a create");
    let id = created.payment.id;
    let closed = owner
        .post(&format!("/payments/{id}/test/{outcome}"), &[])
        .await;
    assert_eq!(closed.status, 303, "{}", closed.body);
}

/// The figure `name` of the period card `period` (`today`, `week`, `month`).
fn figure<'a>(html: &'a str, period: &str, name: &str) -> &'a str {
    let card = between(html, &format!("id=\"{period}\""), "</section>").expect("the card");
    between(card, &format!("data-figure=\"{name}\">"), "</dd>").expect("the figure")
}

/// Two days of test payments: the cards count and sum each period exactly, the newest
/// payments are listed by order number, the project's callback health has its row, and the
/// project's list sums every payment of its filter when asked.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_home_page_sums_today_the_week_and_the_month() {
    let c = super::test_mode_with_user(
        "owner@shop.example",
        Some("https://shop.example.com/callbacks"),
    )
    .await;
    let (mut owner, key) = enrolled(&c, "owner@shop.example").await;
    let caller = TestCaller::provision(&c.server.state.service, c.server.project(), 7).await;
    closed_payment(&c, &caller, &mut owner, "order-1", "1500").await;
    closed_payment(&c, &caller, &mut owner, "order-2", "1500.50").await;
    closed_payment(&c, &caller, &mut owner, "order-3x", "990").await;
    closed_payment(&c, &caller, &mut owner, "order-4x", "100").await;
    c.clock.advance(Duration::from_secs(2 * 24 * 3600));
    let mut owner = signed_in_again(&c, &key).await;
    closed_payment(&c, &caller, &mut owner, "order-5", "10").await;

    let home = owner.get("/").await;
    assert_eq!(home.status, 200, "{}", home.body);
    assert!(
        home.body.contains("aria-current=\"page\""),
        "the nav marks home"
    );
    for (period, created, completed, canceled, conversion) in [
        ("today", "1", "1", "0", "100.0\u{a0}%"),
        ("week", "5", "3", "2", "60.0\u{a0}%"),
        ("month", "5", "3", "2", "60.0\u{a0}%"),
    ] {
        assert_eq!(figure(&home.body, period, "created"), created, "{period}");
        assert_eq!(
            figure(&home.body, period, "completed"),
            completed,
            "{period}"
        );
        assert_eq!(figure(&home.body, period, "canceled"), canceled, "{period}");
        assert_eq!(
            figure(&home.body, period, "conversion"),
            conversion,
            "{period}"
        );
    }
    let week = between(&home.body, "id=\"week\"", "</section>").expect("the week");
    assert!(
        week.contains("3,010.50\u{a0}₽"),
        "1500 + 1500.50 + 10: {week}"
    );
    assert!(home.body.contains("<svg"), "the chart");
    let recent = between(&home.body, "id=\"recent\"", "</table>").expect("recent payments");
    let newest = recent.find("order-5").expect("the newest");
    assert!(newest < recent.find("order-1").expect("the oldest"));
    let health = between(&home.body, "id=\"callback-health\"", "</table>").expect("health");
    assert!(health.contains(&c.server.project().to_string()), "{health}");

    // The project's list: its totals on demand, of every page of the filter.
    let list = format!("/projects/{}/payments", c.server.project());
    let plain = owner.get(&list).await;
    assert!(plain.body.contains("id=\"show-totals\""), "a link, no sums");
    assert!(
        plain.body.contains(">1,500.50\u{a0}₽</td>"),
        "amounts as money: {}",
        plain.body
    );
    assert!(!plain.body.contains("data-figure=\"created\""));
    let totals = owner.get(&format!("{list}?totals=1")).await;
    let section = between(&totals.body, "id=\"list-totals\"", "</section>").expect("totals");
    for (name, value) in [("created", "5"), ("completed", "3"), ("canceled", "2")] {
        let figure = between(section, &format!("data-figure=\"{name}\">"), "</dd>");
        assert_eq!(figure, Some(value), "{name}: {section}");
    }
    assert!(section.contains("3,010.50\u{a0}₽"), "{section}");
    let canceled = owner.get(&format!("{list}?status=canceled&totals=1")).await;
    let section = between(&canceled.body, "id=\"list-totals\"", "</section>").expect("totals");
    assert_eq!(
        between(section, "data-figure=\"created\">", "</dd>"),
        Some("2"),
        "the filter's own: {section}"
    );
    assert!(section.contains("nothing completed"), "{section}");
}

/// The owner's session after the clock moved two days (sessions time out): signed in again
/// with the password and a code of `key`.
async fn signed_in_again(c: &Cabinet, key: &[u8]) -> Visitor {
    let mut v = Visitor::new(c.url());
    let p = v
        .sign_in_with_password("owner@shop.example", super::PASSWORD)
        .await;
    assert_eq!(p.location.as_deref(), Some("/sign-in/code"), "{}", p.body);
    let done = v.post("/sign-in/code", &[("code", &c.code(key))]).await;
    assert_eq!(done.status, 303, "{}", done.body);
    v
}

/// Support sees every merchant: `/` is the projects list for it; a visitor signs in first.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn support_and_visitors_are_sent_on_from_home() {
    let c = Cabinet::start().await;
    c.user("help@psp.example", Role::Support).await;
    let (mut support, _) = enrolled(&c, "help@psp.example").await;
    let home = support.get("/").await;
    assert_eq!(home.location.as_deref(), Some("/projects"));
    let mut visitor = Visitor::new(c.url());
    assert_eq!(visitor.get("/").await.location.as_deref(), Some("/sign-in"));
}
