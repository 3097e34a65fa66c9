//! The search box over real HTTP, text by text as people type it: an order number in any
//! case of its letters or its start, a value of the payment's metadata under any key, exact,
//! a card number pasted whole (that card, not another with the same last four digits). Each
//! text finds its payment and no other.

use std::time::Duration;

use serde_json::json;

use super::enrolled;
use super::support::between;

/// The merchant payment ids of the payments a search page lists, in order.
fn found(html: &str) -> Vec<String> {
    let Some(table) = between(html, "id=\"search-results\"", "</table>") else {
        return Vec::new();
    };
    table
        .split("<th data-label=\"merchant_payment_id\" scope=\"row\"><a href=\"/payments/")
        .skip(1)
        .filter_map(|row| between(row, "\">", "</a>").map(str::to_string))
        .collect()
}

/// Three payments of the owner's project, a second apart, each found by what its owner
/// would type and by nothing meant for another.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn each_typed_text_finds_its_payment_and_no_other() {
    let c = super::test_mode_with_user("owner@shop.example", None).await;
    for (order, amount, metadata) in [
        ("ORD-1001", "1500.50", json!({"customer": "Иван Петров"})),
        (
            "Shop-77",
            "990",
            json!({"email": "ivan@example.com", "contact": "ivan@example.com"}),
        ),
        (
            "ord-2002",
            "250",
            json!({"customer": "Пётр", "shop": "north"}),
        ),
    ] {
        let body = json!({
            "merchant_payment_id": order,
            "amount": amount,
            "payment_method": "sbp",
            "metadata": metadata,
        });
        let created = c.create_payment(&body).await;
        assert!(created.status.is_success(), "{order}: {}", created.json);
        c.clock.advance(Duration::from_secs(1));
    }
    // Two cards that end in the same four digits, stored as the provider issued them.
    for (order, card) in [
        ("CARD-1", "2200 1234 5678 4242"),
        ("CARD-2", "2200 9999 8888 4242"),
    ] {
        card_payment(&c, order, card).await;
        c.clock.advance(Duration::from_secs(1));
    }
    let (mut owner, _) = enrolled(&c, "owner@shop.example").await;
    for (typed, expected) in [
        ("ord-1001", &["ORD-1001"][..]),
        ("ORD-1001", &["ORD-1001"]),
        ("  Ord-10 ", &["ORD-1001"]),
        ("shop-7", &["Shop-77"]),
        ("SHOP-77", &["Shop-77"]),
        ("ORD-2", &["ord-2002"]),
        ("ord-", &["ord-2002", "ORD-1001"]),
        ("Иван Петров", &["ORD-1001"]),
        ("ivan@example.com", &["Shop-77"]),
        ("Пётр", &["ord-2002"]),
        ("north", &["ord-2002"]),
        ("иван петров", &[]),
        ("customer", &[]),
        ("ORD-1001x", &[]),
        ("2200 1234 5678 4242", &["CARD-1"]),
        ("2200123456784242", &["CARD-1"]),
        ("2200-9999-8888-4242", &["CARD-2"]),
        ("4000 0000 0000 4242", &[]),
        ("4242", &["CARD-2", "CARD-1"]),
    ] {
        let page = owner
            .get(&format!("/payments/search?q={}", urlencode(typed)))
            .await;
        assert_eq!(page.status, 200, "{typed}: {}", page.body);
        assert!(page.body.contains("id=\"search-read-as\""), "{typed}");
        assert_eq!(found(&page.body), expected, "{typed}");
    }
}

/// A card-transfer payment of the demo project paid to `card`, created now.
async fn card_payment(c: &super::support::Cabinet, order: &str, card: &str) {
    let mut p = payments_core::testing::contract::sample_payment(
        payments_core::ids::PaymentId::generate(&payments_http::system::OsRandom),
        c.server.project(),
        order,
    );
    p.payment_method = payments_core::payment::PaymentMethod::CardTransfer;
    c.stored(p, card, Duration::ZERO).await;
}

/// `text` as a query string value.
fn urlencode(text: &str) -> String {
    text.bytes()
        .map(|b| match b {
            b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'-' | b'.' | b'_' => (b as char).to_string(),
            _ => format!("%{b:02X}"),
        })
        .collect()
}
