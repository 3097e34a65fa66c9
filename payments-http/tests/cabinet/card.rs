//! The payment card over real HTTP: a summary in the shop owner's words (the order, the
//! amount as money, the method, the card number grouped), a timeline of what happened in
//! order, and the API's fields folded away with every value in words.

use super::enrolled;
use super::support::between;
use serde_json::json;

/// A card-transfer test payment, paid by the owner: the summary, the timeline's three
/// moments in order, and no raw `null` or `false` among the values.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_card_summarises_and_tells_the_payments_story() {
    let c = super::test_mode_with_user("owner@shop.example", None).await;
    let body = json!({"merchant_payment_id": "card-1", "amount": "2500.5", "payment_method": "card_transfer"});
    let created = c.create_payment(&body).await;
    let id = created.json["id"].as_str().expect("id").to_string();
    let requisite = created.json["requisite"]
        .as_str()
        .expect("a card")
        .to_string();
    let (mut owner, _) = enrolled(&c, "owner@shop.example").await;
    let paid = owner.post(&format!("/payments/{id}/test/paid"), &[]).await;
    assert_eq!(paid.status, 303, "{}", paid.body);
    let card = owner.get(&format!("/payments/{id}")).await;
    assert_eq!(card.status, 200);

    let summary = between(&card.body, "id=\"payment-summary\"", "</dl>").expect("a summary");
    for (line, value) in [
        ("order", "card-1".to_string()),
        ("amount", "2,500.50\u{a0}₽".to_string()),
        ("method", "Card transfer".to_string()),
        (
            "pay-to",
            format!("{} {}", &requisite[..4], &requisite[4..8]),
        ),
    ] {
        let dd = between(summary, &format!("id=\"summary-{line}\""), "</div>")
            .unwrap_or_else(|| panic!("{line}: {summary}"));
        assert!(dd.contains(&value), "{line}: {value} in {dd}");
    }

    let timeline = between(&card.body, "id=\"payment-timeline\"", "</ol>").expect("a timeline");
    let at = |what: &str| {
        timeline
            .find(what)
            .unwrap_or_else(|| panic!("{what}: {timeline}"))
    };
    assert!(at("Payment created") < at("Requisites issued to the payer"));
    assert!(at("Requisites issued to the payer") < at("Paid and confirmed"));

    let fields = between(&card.body, "id=\"payment-fields\"", "</dl>").expect("the fields");
    assert!(between(&card.body, "<details id=\"technical\"", "</details>").is_some());
    for raw in [
        "<dd>null</dd>",
        "<dd>false</dd>",
        "<dd>true</dd>",
        "runtime_live",
    ] {
        assert!(!fields.contains(raw), "{raw} in {fields}");
    }
}
