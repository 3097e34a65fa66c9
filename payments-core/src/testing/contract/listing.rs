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
        p.requisites = requisite.map(paid_to);
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

/// The ids of `found`, in order.
fn found_ids(found: &[Payment]) -> Vec<PaymentId> {
    found.iter().map(|p| p.id).collect()
}

/// Every payment `q` finds, read page after page of `q.limit` from the newest, each page
/// starting after the last payment of the one before.
async fn every_page<S: Store>(store: &S, mut q: PaymentQuery) -> Vec<PaymentId> {
    let mut all = Vec::new();
    loop {
        let page = store.find_payments(&q).await.expect("find_payments");
        all.extend(found_ids(&page));
        match page.last() {
            Some(last) if page.len() == q.limit => q.before = Some((last.created_at, last.id)),
            _ => return all,
        }
    }
}

/// The `amount` filter by value across pages: a common amount written at four scales, among
/// other amounts, several payments created at the same time (ordered by id), read two at a
/// time: each payment once, in the list's order, whatever the scale asked for. A change of a
/// payment's amount moves it: found by the new value, no longer by the old.
pub async fn amount_pages<S: Store>(store: &S) {
    let scales = ["100.5", "100.50", "100.500000", "100.5000"];
    let mut common = Vec::new();
    for n in 1..=13u128 {
        let mut p = sample_payment(payment_id(n), project_id(1), &format!("a-{n}"));
        // Pairs share a creation time: the order within a pair is by id.
        p.created_at = T0 + ms(i64::try_from(n / 2).expect("small") * 1000);
        p.amount = if n % 4 == 0 {
            amount("7")
        } else {
            common.push((p.created_at, p.id));
            amount(scales[usize::try_from(n).expect("small") % scales.len()])
        };
        inserted(store, &p).await;
    }
    let mut other = sample_payment(payment_id(99), project_id(2), "a-99");
    other.amount = amount("100.50");
    inserted(store, &other).await;
    common.sort_by_key(|k| std::cmp::Reverse(*k));
    let expected: Vec<PaymentId> = common.iter().map(|(_, id)| *id).collect();
    for text in ["100.5", "100.50", "100.500000"] {
        let mut q = PaymentQuery::new(project_id(1), 2);
        q.amount = Some(amount(text));
        assert_eq!(
            every_page(store, q).await,
            expected,
            "amount {text}, 2 a page"
        );
    }
    // A change of amount: payment 4 (7) to 100.50, payment 5 (100.50) to 8.
    for (n, to) in [(4u128, "100.50"), (5, "8")] {
        let p = store
            .payment(payment_id(n))
            .await
            .expect("read")
            .expect("inserted");
        let mut next = changed(&p, PaymentStatus::Processing, T0 + ms(60_000));
        next.amount = amount(to);
        store
            .commit_change(&PaymentChange {
                payment: next,
                expected_version: p.version,
                event: None,
                audit: None,
                ledger: None,
                history: None,
            })
            .await
            .expect("commit_change");
    }
    let mut q = PaymentQuery::new(project_id(1), 3);
    q.amount = Some(amount("100.5"));
    let moved = every_page(store, q.clone()).await;
    assert!(moved.contains(&payment_id(4)), "the new amount: {moved:?}");
    assert!(!moved.contains(&payment_id(5)), "not the old: {moved:?}");
    assert_eq!(moved.len(), expected.len(), "{moved:?}");
    q.amount = Some(amount("8.000"));
    assert_eq!(every_page(store, q).await, vec![payment_id(5)]);
}

/// Totals of a project's payments by day, status and currency: exact sums however large
/// (never a float's), days in the asked time zone, every filter of the page applied (a
/// prefix, metadata, a union of projects), and the newest `limit` only, marked incomplete.
pub async fn payment_totals<S: Store>(store: &S) {
    use crate::totals::{day_of, PaymentTotals, Volume};
    let hour = 3_600_000;
    // (n, project, hours after T0 (a UTC midnight), status, amount, currency)
    let rows: [(u128, u128, i64, PaymentStatus, &str, &str); 7] = [
        (1, 1, 1, PaymentStatus::Completed, "100.50", "RUB"),
        (2, 1, 2, PaymentStatus::Completed, "0.5", "RUB"),
        (3, 1, 22, PaymentStatus::Canceled, "7", "RUB"),
        (
            4,
            1,
            23,
            PaymentStatus::Completed,
            "999999999999999999.999999",
            "USD",
        ),
        (5, 1, 25, PaymentStatus::Error, "3", "RUB"),
        (
            6,
            1,
            26,
            PaymentStatus::Completed,
            "999999999999999999.999999",
            "USD",
        ),
        (7, 2, 3, PaymentStatus::Completed, "5", "RUB"),
    ];
    for (n, project, hours, status, sum, currency) in rows {
        let mut p = sample_payment(payment_id(n), project_id(project), &format!("sum-{n}"));
        p.created_at = T0 + ms(hours * hour);
        p.status = status;
        p.amount = amount(sum);
        p.currency = Currency::parse(currency).expect("a currency");
        if n % 2 == 0 {
            p.metadata = crate::payment::Metadata::from_json(&serde_json::json!({"shop": "north"}))
                .expect("valid");
        }
        inserted(store, &p).await;
    }
    let day0 = day_of(T0, 0);
    let totals = |q: PaymentQuery, offset: i64| async move {
        let answer = store.payment_totals(&q, offset).await.expect("totals");
        let found = store.find_payments(&q).await.expect("find");
        let reference = PaymentTotals::of(&found, offset, found.len() < q.limit);
        assert_eq!(answer, reference, "the sums of what find_payments finds");
        answer
    };
    let all = totals(PaymentQuery::new(project_id(1), 100), 0).await;
    assert!(all.complete);
    assert_eq!(all.count(), 6, "the project's own");
    let first = all.summary(day0, day0);
    assert_eq!((first.created, first.completed, first.canceled), (4, 3, 1));
    let rub = Currency::RUB;
    assert_eq!(
        first.volume[&rub].to_string(),
        "101.00",
        "100.50 + 0.5, exactly"
    );
    let usd = Currency::parse("USD").expect("a currency");
    let both = all.all().volume[&usd];
    assert_eq!(both.to_string(), "1999999999999999999.999998");
    assert_eq!(both, Volume::from_micros(1_999_999_999_999_999_999_999_998));
    assert_eq!(all.summary(day0 + 1, day0 + 1).failed, 1);
    // In Moscow (UTC+3) 22:00 and 23:00 UTC are the next day.
    let msk = totals(PaymentQuery::new(project_id(1), 100), 3 * hour).await;
    let next = msk.summary(day0 + 1, day0 + 1);
    assert_eq!((next.created, next.canceled, next.failed), (4, 1, 1));
    // The newest 2 only: incomplete.
    let newest = totals(PaymentQuery::new(project_id(1), 2), 0).await;
    assert!(!newest.complete);
    assert_eq!(newest.count(), 2);
    assert_eq!(newest.all().failed, 1);
    // Filters, as the page's: a status, a prefix, metadata, two projects in a union.
    let completed = totals(
        PaymentQuery {
            status: Some(PaymentStatus::Completed),
            ..PaymentQuery::new(project_id(1), 100)
        },
        0,
    )
    .await;
    assert_eq!(completed.count(), 4);
    let prefixed = totals(
        PaymentQuery {
            merchant_payment_id_prefix: Some("sum-".into()),
            ..PaymentQuery::new(project_id(1), 100)
        },
        0,
    )
    .await;
    assert_eq!(prefixed.count(), 6);
    let north = totals(
        PaymentQuery {
            metadata: Some(("shop".into(), "north".into())),
            ..PaymentQuery::new(project_id(1), 100)
        },
        0,
    )
    .await;
    assert_eq!(north.count(), 3);
    let across = totals(
        PaymentQuery {
            union: vec![PaymentQuery::new(project_id(2), 100)],
            ..PaymentQuery::new(project_id(1), 100)
        },
        0,
    )
    .await;
    assert_eq!(across.all().volume[&rub].to_string(), "106.00");
}

/// A [`PaymentQuery::union`]: the payments of several projects and several filters (an
/// amount or a merchant payment id prefix, as the cabinet's search reads digits), each once
/// (a payment both branches of its project find too), newest first across projects, paged
/// without skipping or repeating; a branch's own `before` and `limit` are the query's.
pub async fn payment_union<S: Store>(store: &S) {
    let mut all = Vec::new();
    for n in 1..=12u128 {
        let project = project_id(1 + n % 3);
        // Ids `15...` in every project; amount 15 in some (payment 3's both), 7 elsewhere.
        let mpid = if n % 2 == 1 {
            format!("15-{n}")
        } else {
            format!("x-{n}")
        };
        let mut p = sample_payment(payment_id(n), project, &mpid);
        p.created_at = T0 + ms(i64::try_from(n % 5).expect("small") * 1000);
        p.amount = amount(if n % 3 == 0 || n == 4 { "15.00" } else { "7" });
        inserted(store, &p).await;
        all.push(p);
    }
    let branch = |project: u128, by_amount: bool| {
        let mut q = PaymentQuery::new(project_id(project), 1);
        q.before = Some((T0, payment_id(0)));
        if by_amount {
            q.amount = Some(amount("15"));
        } else {
            q.merchant_payment_id_prefix = Some("15".into());
        }
        q
    };
    let mut q = branch(1, true);
    q.before = None;
    q.union = vec![branch(1, false), branch(2, true), branch(2, false)];
    let mut expected: Vec<&Payment> = all
        .iter()
        .filter(|p| {
            (p.project_id == project_id(1) || p.project_id == project_id(2))
                && (p.amount == amount("15") || p.merchant_payment_id.as_str().starts_with("15"))
        })
        .collect();
    expected.sort_by_key(|p| std::cmp::Reverse((p.created_at, p.id)));
    let expected: Vec<PaymentId> = expected.iter().map(|p| p.id).collect();
    assert!(expected.len() > 4, "the check pages: {expected:?}");
    for limit in [2, 3, 100] {
        q.limit = limit;
        assert_eq!(
            every_page(store, q.clone()).await,
            expected,
            "{limit} a page"
        );
    }
}

/// The cabinet search's keys: a merchant payment id prefix in any case of its letters
/// (`ord-100` finds `ORD-1001`, `Ord-1002` and `ord-1003`, not `ORDX-1` nor another
/// project's `ORD-1005`), and a metadata value under any key, exact (each payment once, also
/// one with the value under two keys; not a value in another case, another project's, nor a
/// key's name), each read page by page, newest first, alone and as branches of one union.
pub async fn search_keys<S: Store>(store: &S) {
    let ivan = "ivan@example.com";
    // (n, project, seconds after T0, merchant payment id, metadata)
    let rows: [(u128, u128, i64, &str, serde_json::Value); 8] = [
        (1, 1, 1, "ORD-1001", serde_json::json!({"customer": ivan})),
        (
            2,
            1,
            2,
            "Ord-1002",
            serde_json::json!({"customer": ivan, "email": ivan}),
        ),
        (3, 1, 3, "ord-1003", serde_json::json!({})),
        (
            4,
            1,
            4,
            "ORDX-1",
            serde_json::json!({"note": "Ivan@example.com"}),
        ),
        (5, 2, 5, "ORD-1005", serde_json::json!({"customer": ivan})),
        (6, 1, 6, "a-6", serde_json::json!({"a": ivan, "z": ivan})),
        (7, 1, 6, "a-7", serde_json::json!({"customer": ivan})),
        (8, 1, 7, "a-8", serde_json::json!({"ivan": "customer"})),
    ];
    for (n, project, seconds, mpid, metadata) in rows {
        let mut p = sample_payment(payment_id(n), project_id(project), mpid);
        p.created_at = T0 + ms(seconds * 1000);
        p.metadata = crate::payment::Metadata::from_json(&metadata).expect("valid");
        inserted(store, &p).await;
    }
    let ids = |ns: &[u128]| ns.iter().map(|n| payment_id(*n)).collect::<Vec<_>>();
    let by_prefix = |project: u128, text: &str| {
        let mut q = PaymentQuery::new(project_id(project), 2);
        q.merchant_payment_id_prefix_any_case = Some(text.into());
        q
    };
    let by_value = |project: u128, text: &str| {
        let mut q = PaymentQuery::new(project_id(project), 2);
        q.metadata_value = Some(text.into());
        q
    };
    for text in ["ord-100", "ORD-100", "oRd-10"] {
        assert_eq!(
            every_page(store, by_prefix(1, text)).await,
            ids(&[3, 2, 1]),
            "{text}"
        );
    }
    assert_eq!(every_page(store, by_prefix(1, "ord-1002")).await, ids(&[2]));
    assert_eq!(every_page(store, by_prefix(2, "ord")).await, ids(&[5]));
    // Case-sensitive as before where asked so.
    let mut exact_case = by_prefix(1, "ord");
    exact_case.merchant_payment_id_prefix = Some("ORD".into());
    assert_eq!(every_page(store, exact_case).await, ids(&[4, 1]));
    assert_eq!(
        every_page(store, by_value(1, ivan)).await,
        ids(&[7, 6, 2, 1])
    );
    assert_eq!(every_page(store, by_value(2, ivan)).await, ids(&[5]));
    assert!(every_page(store, by_value(1, "IVAN@example.com"))
        .await
        .is_empty());
    assert!(
        every_page(store, by_value(1, "customer")).await == ids(&[8]),
        "a value, not a key's name"
    );
    let mut with_key = by_value(1, ivan);
    with_key.metadata = Some(("email".into(), ivan.into()));
    assert_eq!(every_page(store, with_key).await, ids(&[2]));
    // As the cabinet's search reads a text: both readings, both projects, one union.
    let mut q = by_prefix(1, "ORD-1");
    q.union = vec![by_value(1, ivan), by_prefix(2, "ORD-1"), by_value(2, ivan)];
    for limit in [1, 2, 3, 100] {
        q.limit = limit;
        assert_eq!(
            every_page(store, q.clone()).await,
            ids(&[7, 6, 5, 3, 2, 1]),
            "{limit} a page"
        );
    }
}

/// A card number pasted whole: the payments paid to that card, however its number was
/// written, and none paid to another card or phone with the same last four digits, nor
/// another project's; alone and as a branch of a union.
pub async fn card_numbers<S: Store>(store: &S) {
    use crate::payment::RequisiteNumber;
    // (n, project, seconds after T0, requisite)
    let rows: [(u128, u128, i64, &str); 6] = [
        (1, 1, 1, "2200 1234 5678 4242"),
        (2, 1, 2, "2200 9999 8888 4242"),
        (3, 1, 3, "+7 900 111-42-42"),
        (4, 1, 4, "2200123456784242"),
        (5, 2, 5, "2200 1234 5678 4242"),
        (6, 1, 6, "2200 1234 5678 4243"),
    ];
    for (n, project, seconds, requisite) in rows {
        let mut p = sample_payment(payment_id(n), project_id(project), &format!("card-{n}"));
        p.created_at = T0 + ms(seconds * 1000);
        p.requisites = Some(paid_to(requisite));
        inserted(store, &p).await;
    }
    let ids = |ns: &[u128]| ns.iter().map(|n| payment_id(*n)).collect::<Vec<_>>();
    let by_card = |project: u128, text: &str| {
        let mut q = PaymentQuery::new(project_id(project), 1);
        q.requisite_number = Some(RequisiteNumber::of(text).expect("a card number"));
        q
    };
    for text in [
        "2200 1234 5678 4242",
        "2200-1234-5678-4242",
        "2200123456784242",
    ] {
        assert_eq!(
            every_page(store, by_card(1, text)).await,
            ids(&[4, 1]),
            "{text}"
        );
    }
    assert_eq!(
        every_page(store, by_card(1, "2200 9999 8888 4242")).await,
        ids(&[2])
    );
    assert!(every_page(store, by_card(1, "4000 0000 0000 4242"))
        .await
        .is_empty());
    let mut q = by_card(1, "2200 1234 5678 4242");
    q.union = vec![by_card(2, "2200 1234 5678 4242"), {
        let mut last4 = PaymentQuery::new(project_id(1), 1);
        last4.requisite_last4 = Some("4243".into());
        last4
    }];
    assert_eq!(every_page(store, q).await, ids(&[6, 5, 4, 1]));
}
