//! `metadata` on create over real sockets: echoed in the create answer, GET, the list (and
//! filtered there by one key) and the callback body; part of the idempotency fingerprint;
//! refused with the field named when it breaks a limit; absent from every answer of a payment
//! created without it.

use payments_core::callback::RetrySchedule;
use payments_directory::ProjectPatch;
use payments_http::testing::TestServer;
use reqwest::StatusCode;
use serde_json::{json, Value};

use crate::support::{body, confirm};

fn with_metadata(mpid: &str, metadata: Value) -> Value {
    let mut b = body(mpid, "100");
    b["metadata"] = metadata;
    b
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn metadata_is_kept_echoed_filtered_and_part_of_the_fingerprint() {
    let s = TestServer::start(|s| {
        s.dispatch = false;
        s.service.retry = RetrySchedule::single();
    })
    .await;
    // Dispatch is off: the events are only queued (their bodies are what is checked).
    s.patch_project(ProjectPatch {
        callback_url: Some(Some("https://shop.example.com/callbacks".into())),
        ..Default::default()
    })
    .await;
    let c = s.client();
    let tags = json!({"order": "A-1001", "shop": "north", "note": "Заказ №7, «срочно»"});
    let r = c
        .create_payment(&with_metadata("md-1", tags.clone()))
        .await
        .expect("a create");
    assert_eq!(r.status, StatusCode::CREATED, "{}", r.json);
    assert_eq!(r.json["metadata"], tags);
    let id = r.json["id"].as_str().expect("an id").to_string();
    let read = c.get_payment(&id).await.expect("a read");
    assert_eq!(read.json["metadata"], tags);

    // The same request again (keys in another order) is the same payment; other metadata is
    // another request under a taken id.
    let reordered = json!({"shop": "north", "note": "Заказ №7, «срочно»", "order": "A-1001"});
    let r = c
        .create_payment(&with_metadata("md-1", reordered))
        .await
        .expect("a repeat");
    assert_eq!(
        (r.status, r.json["id"].clone()),
        (StatusCode::OK, json!(id))
    );
    let r = c
        .create_payment(&with_metadata("md-1", json!({"order": "A-1002"})))
        .await
        .expect("a conflict");
    assert_eq!(
        (r.status, r.code()),
        (StatusCode::CONFLICT, Some("payment_idempotency_conflict")),
        "{}",
        r.json
    );
    let r = c
        .create_payment(&body("md-1", "100"))
        .await
        .expect("a conflict");
    assert_eq!(
        r.status,
        StatusCode::CONFLICT,
        "without the metadata: another request"
    );

    // Without metadata nothing changes: no member, and `{}` or `null` mean the same.
    let r = c
        .create_payment(&body("md-2", "100"))
        .await
        .expect("a create");
    assert_eq!(r.status, StatusCode::CREATED);
    assert!(r.json.get("metadata").is_none(), "{}", r.json);
    for same in [json!({}), Value::Null] {
        let r = c
            .create_payment(&with_metadata("md-2", same))
            .await
            .expect("a repeat");
        assert_eq!(r.status, StatusCode::OK, "{}", r.json);
    }
    let r = c
        .create_payment(&with_metadata("md-3", json!({"shop": "south"})))
        .await
        .expect("a create");
    assert_eq!(r.status, StatusCode::CREATED);

    // The list: echoed, and one key filters.
    let list = c
        .list_payments("metadata[shop]=north")
        .await
        .expect("a page");
    assert_eq!(list.status, StatusCode::OK, "{}", list.json);
    assert_eq!(list.json["data"].as_array().map(Vec::len), Some(1));
    assert_eq!(list.json["data"][0]["metadata"], tags);
    let list = c
        .list_payments("metadata%5Bshop%5D=south")
        .await
        .expect("a page");
    assert_eq!(list.json["data"][0]["merchant_payment_id"], "md-3");
    let list = c
        .list_payments("metadata[shop]=north&metadata[order]=A-1001")
        .await
        .expect("an answer");
    assert_eq!(list.code(), Some("bad_request"), "one key per query");
    // The filter applies the create's rule: a value no create may have is refused alike.
    let list = c
        .list_payments("metadata[note]=paid%E2%80%AEdiap")
        .await
        .expect("an answer");
    assert_eq!(list.code(), Some("bad_request"), "{}", list.json);
    let message = list.json["message"].as_str().unwrap_or_default();
    assert!(message.contains("metadata[note]: U+202E"), "{message}");

    // Refusals name the field and take nothing.
    let many: serde_json::Map<String, Value> =
        (0..21).map(|i| (format!("k{i}"), json!("v"))).collect();
    for (bad, word) in [
        (Value::Object(many), "at most 20 keys"),
        (json!({"k": 1}), "must be a string"),
        (json!({"a b": "v"}), "key"),
        (json!({"k".repeat(41): "v"}), "key"),
        (json!({"k": "v".repeat(501)}), "at most 500"),
        (json!({"k": "line\nbreak"}), "control"),
        // Characters that make a value read differently: named with the key.
        (json!({"note": "paid\u{202E}diap"}), "note: U+202E"),
        (json!({"note": "a\u{2067}b"}), "note: U+2067"),
        (json!({"note": "pay\u{200B}pal"}), "note: U+200B"),
        (json!({"note": "\u{FEFF}x"}), "note: U+FEFF"),
        (json!(["order"]), "object"),
    ] {
        let r = c
            .create_payment(&with_metadata("md-bad", bad.clone()))
            .await
            .expect("an answer");
        assert_eq!(r.status, StatusCode::BAD_REQUEST, "{bad}: {}", r.json);
        let message = r.json["message"].as_str().unwrap_or_default();
        assert!(
            message.starts_with("metadata") && message.contains(word),
            "{bad}: {message}"
        );
    }
    let r = c
        .create_payment(&with_metadata("md-bad", json!({"k": "v"})))
        .await
        .expect("a create");
    assert_eq!(r.status, StatusCode::CREATED, "the refusals took nothing");

    // The callback body carries the metadata (and a payment without it, none).
    for (mpid, expected) in [("md-1", Some(tags.clone())), ("md-2", None)] {
        let list = c
            .list_payments(&format!("merchant_payment_id={mpid}"))
            .await
            .expect("a page");
        let id = list.json["data"][0]["id"]
            .as_str()
            .expect("an id")
            .to_string();
        confirm(&s, &id).await;
        let sent = c.resend_payment_callback(&id).await.expect("an answer");
        assert_eq!(sent.status, StatusCode::ACCEPTED, "{}", sent.json);
        assert_eq!(
            sent.json["body"].get("metadata").cloned(),
            expected,
            "{mpid}"
        );
    }
    s.stop().await;
}
