//! Checks of the reads the web cabinet shows, which are the core port's: the last use of
//! tokens, the payments and events listings, and the payer page's links.

use super::*;
use crate::store::{EventQuery, PayerPageStoreExt, PaymentQuery};

/// The lease token of an event no dispatcher has claimed yet (these checks record attempts
/// without claiming).
const UNCLAIMED: crate::store::LeaseToken = crate::store::LeaseToken::new(0);

/// A token hash from a small number.
fn hash(n: u8) -> [u8; 32] {
    let mut h = [n; 32];
    h[0] = 0xab;
    h
}

/// The latest use of a token is kept; unused tokens are not answered.
pub async fn token_use<S: Store>(store: &S) {
    store
        .update_token_use(token_id(1), T0 + ms(50))
        .await
        .expect("record");
    store
        .update_token_use(token_id(1), T0 + ms(20))
        .await
        .expect("record");
    store
        .update_token_use(token_id(2), T0 + ms(5))
        .await
        .expect("record");
    let mut used = store
        .token_last_used(&[token_id(1), token_id(2), token_id(3)])
        .await
        .expect("last used");
    used.sort();
    assert_eq!(
        used,
        vec![(token_id(1), T0 + ms(50)), (token_id(2), T0 + ms(5))]
    );
    assert!(store
        .token_last_used(&[])
        .await
        .expect("last used")
        .is_empty());
}

/// A project's payments, newest first, by status, creation time, merchant payment id and
/// page.
pub async fn payment_listing<S: Store>(store: &S) {
    let mut all = Vec::new();
    for n in 1..=6u128 {
        let project = if n == 6 { project_id(2) } else { project_id(1) };
        let mut p = sample_payment(payment_id(n), project, &format!("order-{n}"));
        p.created_at = T0 + ms(i64::try_from(n).expect("small") * 1000);
        if n % 2 == 0 {
            p.status = PaymentStatus::Completed;
        }
        if n == 5 {
            p.flow = Flow::ProjectTest;
        }
        if n == 3 {
            p.payment_method = PaymentMethod::CardTransfer;
            p.merchant_payment_id = MerchantPaymentId::parse("order_3").expect("valid");
        }
        // Metadata: the shop of payments 1, 2 and 4 (and of the other project's 6).
        let shop = match n {
            1 | 4 | 6 => Some("north"),
            2 => Some("south"),
            _ => None,
        };
        // The amount, written at several scales, and the requisite, written several ways
        // (the other project's 6 matches both and must not be found).
        p.amount = amount(match n {
            1 => "100.5",
            4 => "100.500000",
            6 => "100.50",
            2 => "1005",
            _ => "7",
        });
        let requisite = match n {
            1 | 6 => Some("2200000000004242"),
            2 => Some("+7 (900) 111-42-42"),
            3 => Some("79001114243"),
            _ => None,
        };
        p.requisites = requisite.map(|r| Requisites {
            requisite: r.to_string(),
            holder_name: "IVAN I.".to_string(),
            bank: None,
            qrcode_link: None,
            deeplink_url: None,
        });
        if let Some(shop) = shop {
            p.metadata = crate::payment::Metadata::from_json(&serde_json::json!({
                "shop": shop,
                "shop.name": format!("Магазин \"{shop}\""),
            }))
            .expect("valid");
        }
        inserted(store, &p).await;
        all.push(p);
    }
    let query = |f: &dyn Fn(&mut PaymentQuery)| {
        let mut q = PaymentQuery::new(project_id(1), 100);
        f(&mut q);
        q
    };
    let ids = |v: Vec<Payment>| v.into_iter().map(|p| p.id).collect::<Vec<_>>();
    let found = store
        .find_payments(&query(&|_| {}))
        .await
        .expect("find_payments");
    assert_eq!(found[0], all[4], "whole payments");
    assert_eq!(
        ids(found),
        [5, 4, 3, 2, 1].map(payment_id).to_vec(),
        "one project's, newest first"
    );
    assert_eq!(
        ids(store
            .find_payments(&query(&|q| q.status = Some(PaymentStatus::Completed)))
            .await
            .expect("find")),
        vec![payment_id(4), payment_id(2)]
    );
    assert_eq!(
        ids(store
            .find_payments(&query(&|q| {
                q.created_from = Some(T0 + ms(2000));
                q.created_to = Some(T0 + ms(4000));
            }))
            .await
            .expect("find")),
        vec![payment_id(3), payment_id(2)],
        "from inclusive, to exclusive"
    );
    assert_eq!(
        ids(store
            .find_payments(&query(&|q| {
                q.merchant_payment_id = Some(MerchantPaymentId::parse("order_3").expect("valid"));
            }))
            .await
            .expect("find")),
        vec![payment_id(3)]
    );
    // A prefix, byte for byte: `_` and `%` are no wildcards, case counts.
    let prefixed = |prefix: &'static str| {
        query(&move |q| q.merchant_payment_id_prefix = Some(prefix.to_string()))
    };
    for (prefix, expected) in [
        ("order-", vec![5, 4, 2, 1]),
        ("order", vec![5, 4, 3, 2, 1]),
        ("order_", vec![3]),
        ("order-4", vec![4]),
        ("Order", vec![]),
        ("order%", vec![]),
        ("orde_-", vec![]),
        ("order-44", vec![]),
    ] {
        assert_eq!(
            ids(store.find_payments(&prefixed(prefix)).await.expect("find")),
            expected.into_iter().map(payment_id).collect::<Vec<_>>(),
            "prefix {prefix}"
        );
    }
    assert_eq!(
        ids(store
            .find_payments(&query(
                &|q| q.payment_method = Some(PaymentMethod::CardTransfer)
            ))
            .await
            .expect("find")),
        vec![payment_id(3)]
    );
    assert_eq!(
        ids(store
            .find_payments(&query(&|q| {
                q.payment_method = Some(PaymentMethod::Sbp);
                q.status = Some(PaymentStatus::Completed);
                q.merchant_payment_id_prefix = Some("order-".into());
            }))
            .await
            .expect("find")),
        vec![payment_id(4), payment_id(2)],
        "filters together"
    );
    // One metadata key with its value, exact; a key with `.` is one key, not a path.
    let tagged = |key: &'static str, value: &'static str| {
        query(&move |q| q.metadata = Some((key.to_string(), value.to_string())))
    };
    for (key, value, expected) in [
        ("shop", "north", vec![4, 1]),
        ("shop", "south", vec![2]),
        ("shop", "North", vec![]),
        ("shop", "nort", vec![]),
        ("shop.name", "Магазин \"north\"", vec![4, 1]),
        ("name", "Магазин \"north\"", vec![]),
        ("order", "north", vec![]),
    ] {
        assert_eq!(
            ids(store
                .find_payments(&tagged(key, value))
                .await
                .expect("find")),
            expected.into_iter().map(payment_id).collect::<Vec<_>>(),
            "metadata[{key}]={value}"
        );
    }
    assert_eq!(
        store
            .find_payments(&tagged("shop", "south"))
            .await
            .expect("find")[0]
            .metadata
            .get("shop.name"),
        Some("Магазин \"south\""),
        "read back whole"
    );
    // Through the metadata's own index: with the other filters, the time bounds, the cursor
    // and the page size, as without it.
    let north = |f: &dyn Fn(&mut PaymentQuery)| {
        query(&|q| {
            q.metadata = Some(("shop".into(), "north".into()));
            f(q);
        })
    };
    for (what, q, expected) in [
        (
            "from",
            north(&|q| q.created_from = Some(T0 + ms(2000))),
            vec![4],
        ),
        (
            "to",
            north(&|q| q.created_to = Some(T0 + ms(4000))),
            vec![1],
        ),
        (
            "status",
            north(&|q| q.status = Some(PaymentStatus::Completed)),
            vec![4],
        ),
        (
            "prefix",
            north(&|q| q.merchant_payment_id_prefix = Some("order-1".into())),
            vec![1],
        ),
        (
            "cursor",
            north(&|q| q.before = Some((T0 + ms(4000), payment_id(4)))),
            vec![1],
        ),
        ("limit", north(&|q| q.limit = 1), vec![4]),
    ] {
        assert_eq!(
            ids(store.find_payments(&q).await.expect("find")),
            expected.into_iter().map(payment_id).collect::<Vec<_>>(),
            "metadata[shop]=north and {what}"
        );
    }
    assert_eq!(
        ids(store
            .find_payments(&query(&|q| q.flow = Some(Flow::ProjectTest)))
            .await
            .expect("find")),
        vec![payment_id(5)]
    );
    // The amount by value, whatever the scale it was written with; the last four digits of
    // the requisite's digits.
    for (text, expected) in [
        ("100.5", vec![4, 1]),
        ("100.50", vec![4, 1]),
        ("100.5000", vec![4, 1]),
        ("1005", vec![2]),
        ("1005.000000", vec![2]),
        ("10.05", vec![]),
        ("100", vec![]),
    ] {
        assert_eq!(
            ids(store
                .find_payments(&query(&|q| q.amount = Some(amount(text))))
                .await
                .expect("find")),
            expected.into_iter().map(payment_id).collect::<Vec<_>>(),
            "amount {text}"
        );
    }
    for (last4, expected) in [
        ("4242", vec![2, 1]),
        ("4243", vec![3]),
        ("0424", vec![]),
        ("2200", vec![]),
    ] {
        assert_eq!(
            ids(store
                .find_payments(&query(&|q| q.requisite_last4 = Some(last4.to_string())))
                .await
                .expect("find")),
            expected.into_iter().map(payment_id).collect::<Vec<_>>(),
            "requisite_last4 {last4}"
        );
    }
    assert_eq!(
        ids(store
            .find_payments(&query(&|q| {
                q.requisite_last4 = Some("4242".into());
                q.amount = Some(amount("100.5"));
            }))
            .await
            .expect("find")),
        vec![payment_id(1)],
        "amount and last four together"
    );
    let first = store
        .find_payments(&query(&|q| q.limit = 2))
        .await
        .expect("find");
    assert_eq!(ids(first.clone()), vec![payment_id(5), payment_id(4)]);
    let last = &first[1];
    assert_eq!(
        ids(store
            .find_payments(&query(&|q| {
                q.limit = 2;
                q.before = Some((last.created_at, last.id));
            }))
            .await
            .expect("find")),
        vec![payment_id(3), payment_id(2)],
        "the next page"
    );
}

/// A project's events with their attempts, newest first, by state, payment, time and page.
pub async fn event_listing<S: Store>(store: &S) {
    let e1 = queue_event(store, 1, T0).await;
    let e2 = queue_event(store, 2, T0).await;
    let e3 = queue_event(store, 3, T0).await;
    // All three are queued at the payments' update time (T0): equal times order by event id.
    let a = attempt(1, true, Some(200), None);
    store
        .record_attempt(e2.event.event_id, UNCLAIMED, &a, None)
        .await
        .expect("record");
    let query = |f: &dyn Fn(&mut EventQuery)| {
        let mut q = EventQuery::new(project_id(1), 100);
        f(&mut q);
        q
    };
    let ids = |v: Vec<EventRecord>| {
        v.into_iter()
            .map(|r| r.outbox.event.event_id)
            .collect::<Vec<_>>()
    };
    let found = store
        .find_events(&query(&|_| {}))
        .await
        .expect("find_events");
    assert_eq!(
        ids(found.clone()),
        vec![e3.event.event_id, e2.event.event_id, e1.event.event_id]
    );
    assert_eq!(found[1].attempts, vec![a.clone()], "with the attempts");
    assert_eq!(found[1].outbox.state, DeliveryState::Delivered);
    assert_eq!(
        ids(store
            .find_events(&query(&|q| q.state = Some(DeliveryState::Pending)))
            .await
            .expect("find")),
        vec![e3.event.event_id, e1.event.event_id]
    );
    assert_eq!(
        ids(store
            .find_events(&query(&|q| q.payment = Some(payment_id(1))))
            .await
            .expect("find")),
        vec![e1.event.event_id]
    );
    let one = |id: EventId| query(&move |q: &mut EventQuery| q.event = Some(id));
    assert_eq!(
        store
            .find_events(&one(e2.event.event_id))
            .await
            .expect("find"),
        vec![found[1].clone()],
        "one event by its id, with its attempts"
    );
    assert!(
        store
            .find_events(&EventQuery {
                project: project_id(2),
                ..one(e2.event.event_id)
            })
            .await
            .expect("find")
            .is_empty(),
        "another project's event is not found by its id"
    );
    assert!(store
        .find_events(&query(&|q| q.project = project_id(2)))
        .await
        .expect("find")
        .is_empty());
    assert!(store
        .find_events(&query(&|q| q.created_from = Some(T0 + ms(1))))
        .await
        .expect("find")
        .is_empty());
    assert_eq!(
        ids(store
            .find_events(&query(&|q| {
                q.limit = 1;
                q.before = Some((T0, e2.event.event_id));
            }))
            .await
            .expect("find")),
        vec![e1.event.event_id],
        "the next page"
    );
}

fn page(payment: u128, token: u8) -> crate::payer::PaymentPageRecord {
    let text = format!("{token:02x}{}", "A".repeat(20));
    crate::payer::PaymentPageRecord {
        payment_id: payment_id(payment),
        token_hash: hash(token),
        token: text.as_str().into(),
        created_at: T0 + ms(i64::from(token)),
    }
}

/// Payer page links: one per payment, kept as first stored (a second link for the payment
/// answers the first one and changes nothing); found by the token hash; another payment's
/// token hash is `Duplicate`.
pub async fn payment_pages<S: Store>(store: &S) {
    assert_eq!(store.payment_page(payment_id(1)).await.expect("read"), None);
    assert_eq!(
        store.payment_page_by_hash(&hash(1)).await.expect("read"),
        None
    );
    let first = page(1, 1);
    assert_eq!(
        store
            .insert_payment_page_if_none(&first)
            .await
            .expect("store"),
        first,
        "the first link is stored and answered, every field as given"
    );
    let again = store
        .insert_payment_page_if_none(&page(1, 2))
        .await
        .expect("again");
    assert_eq!(again, first, "a payment's link never changes");
    assert_eq!(
        store.payment_page_by_hash(&hash(2)).await.expect("read"),
        None,
        "the second token was not stored"
    );
    assert_eq!(
        store.payment_page(payment_id(1)).await.expect("read"),
        Some(first.clone())
    );
    assert_eq!(
        store.payment_page_by_hash(&hash(1)).await.expect("read"),
        Some(first.clone())
    );
    let other = page(2, 3);
    store
        .insert_payment_page_if_none(&other)
        .await
        .expect("another");
    assert_eq!(
        store.payment_page_by_hash(&hash(3)).await.expect("read"),
        Some(other)
    );
    let clash = page(3, 1);
    assert!(
        matches!(
            store.insert_payment_page_if_none(&clash).await,
            Err(StoreError::Duplicate(_))
        ),
        "a token hash belongs to one payment"
    );
    assert_eq!(store.payment_page(payment_id(3)).await.expect("read"), None);
}

/// Concurrent first links for one payment: every call answers the same stored link.
pub async fn concurrent_payment_pages<S: Store>(store: &S) {
    let candidates: Vec<_> = (10..18u8).map(|t| page(7, t)).collect();
    let answers = join_all(
        candidates
            .iter()
            .map(|p| store.insert_payment_page_if_none(p)),
    )
    .await;
    let answers: Vec<_> = answers.into_iter().map(|a| a.expect("ensure")).collect();
    assert!(answers.iter().all(|a| a == &answers[0]), "{answers:?}");
    assert!(candidates.contains(&answers[0]));
    assert_eq!(
        store.payment_page(payment_id(7)).await.expect("read"),
        Some(answers[0].clone())
    );
}
