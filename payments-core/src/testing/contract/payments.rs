//! Checks of payments and nonces.

use super::*;

/// Insert, then the same (project, merchant_payment_id) again: `Existing` with the stored
/// payment, nothing overwritten; the same merchant id in another project is a new payment; a
/// reused payment id is `Duplicate`.
pub async fn insert_and_duplicate<S: Store>(store: &S) {
    let (a, b) = (project_id(1), project_id(2));
    let p = sample_payment(payment_id(1), a, "order-1");
    inserted(store, &p).await;

    let mut again = sample_payment(payment_id(2), a, "order-1");
    again.amount = amount("7");
    again.fingerprint = "another request".to_string();
    match store.insert_payment(&again).await.expect("insert_payment") {
        InsertOutcome::Existing(stored) => assert_eq!(stored, p, "Existing carries the stored one"),
        other => panic!("a taken merchant payment id must be Existing, got {other:?}"),
    }
    assert_eq!(store.payment(payment_id(2)).await.expect("payment"), None);
    assert_eq!(store.payment(p.id).await.expect("payment"), Some(p.clone()));

    let other_project = sample_payment(payment_id(3), b, "order-1");
    inserted(store, &other_project).await;
    let mpid = MerchantPaymentId::parse("order-1").expect("valid");
    assert_eq!(
        store
            .payment_by_merchant_id(a, &mpid)
            .await
            .expect("lookup"),
        Some(p.clone())
    );
    assert_eq!(
        store
            .payment_by_merchant_id(b, &mpid)
            .await
            .expect("lookup"),
        Some(other_project)
    );
    let unknown = MerchantPaymentId::parse("order-2").expect("valid");
    assert_eq!(
        store
            .payment_by_merchant_id(a, &unknown)
            .await
            .expect("lookup"),
        None
    );

    let same_id = sample_payment(p.id, a, "order-3");
    assert!(
        matches!(
            store.insert_payment(&same_id).await,
            Err(StoreError::Duplicate(_))
        ),
        "a reused payment id is Duplicate"
    );
    assert_eq!(store.payment(p.id).await.expect("payment"), Some(p));
}

/// Every field of a payment comes back exactly, including decimal scale and optional parts.
pub async fn payment_round_trip<S: Store>(store: &S) {
    let full = full_payment(payment_id(1), project_id(1), "full:order_1.x-y");
    let bare = sample_payment(payment_id(2), project_id(1), "bare");
    inserted(store, &full).await;
    inserted(store, &bare).await;
    for p in [&full, &bare] {
        let by_id = store.payment(p.id).await.expect("payment").expect("stored");
        assert_eq!(&by_id, p);
        // Amount equality is by value; the stored text must keep the scale too.
        assert_eq!(by_id.amount.to_string(), p.amount.to_string());
        assert_eq!(
            by_id.initial_amount.to_string(),
            p.initial_amount.to_string()
        );
        let by_mpid = store
            .payment_by_merchant_id(p.project_id, &p.merchant_payment_id)
            .await
            .expect("lookup")
            .expect("stored");
        assert_eq!(&by_mpid, p);
    }
    let stored = store
        .payment(full.id)
        .await
        .expect("payment")
        .expect("stored");
    assert_eq!(
        stored.initial_amount.to_string(),
        "999999999999999999.100000"
    );
    assert_eq!(
        stored.pricing.map(|p| p.course.as_decimal().to_string()),
        Some("92.87654321".to_string())
    );

    // A change round-trips every field as well.
    let mut next = changed(&full, PaymentStatus::Completed, full.updated_at + ms(5));
    next.amount = amount("100.50");
    next.appeal_from = None;
    next.requisites = Some(Requisites {
        requisite: "+79001234567".to_string(),
        holder_name: "A".to_string(),
        bank: None,
        qrcode_link: None,
        deeplink_url: None,
    });
    store
        .commit_change(&PaymentChange {
            history: None,
            ledger: None,
            payment: next.clone(),
            expected_version: full.version,
            event: None,
            audit: None,
        })
        .await
        .expect("commit_change");
    let stored = store
        .payment(full.id)
        .await
        .expect("payment")
        .expect("stored");
    assert_eq!(stored, next);
    assert_eq!(stored.amount.to_string(), "100.50");
}

/// Many concurrent inserts of one (project, merchant_payment_id): exactly one `Inserted`, every
/// other call `Existing` with the winner.
pub async fn concurrent_inserts<S: Store>(store: &S) {
    let candidates: Vec<Payment> = (0..16)
        .map(|i| sample_payment(payment_id(100 + i), project_id(1), "race"))
        .collect();
    let outcomes = join_all(candidates.iter().map(|p| store.insert_payment(p))).await;
    let mut winner = None;
    for (p, outcome) in candidates.iter().zip(&outcomes) {
        if outcome == &Ok(InsertOutcome::Inserted) {
            assert!(winner.is_none(), "two inserts won");
            winner = Some(p.clone());
        }
    }
    let winner = winner.expect("one insert wins");
    for outcome in outcomes {
        match outcome.expect("insert_payment") {
            InsertOutcome::Inserted => {}
            InsertOutcome::Existing(p) => assert_eq!(p, winner),
        }
    }
}

/// A change commits the new version with its event and audit record; an event-only change
/// (expected version = the payment's version) adds just the event; unknown payments are
/// `NotFound`.
pub async fn commit_change<S: Store>(store: &S) {
    let p = sample_payment(payment_id(1), project_id(1), "order-1");
    inserted(store, &p).await;
    let mut v2 = changed(&p, PaymentStatus::Processing, T0 + ms(100));
    v2.requisites = full_payment(p.id, p.project_id, "x").requisites;
    v2.pricing = full_payment(p.id, p.project_id, "x").pricing;
    let ev = sample_event(&v2, event_id(1), T0 + ms(100));
    let audit = sample_audit(T0 + ms(100), "payment.issue", &p.id.to_string());
    store
        .commit_change(&PaymentChange {
            history: None,
            ledger: None,
            payment: v2.clone(),
            expected_version: 1,
            event: Some(ev.clone()),
            audit: Some(audit.clone()),
        })
        .await
        .expect("commit_change");
    assert_eq!(
        store.payment(p.id).await.expect("payment"),
        Some(v2.clone())
    );
    let recorded = events(store, p.id).await;
    assert_eq!(
        recorded,
        vec![EventRecord {
            outbox: ev.clone(),
            attempts: Vec::new()
        }]
    );
    assert_eq!(recorded[0].outbox.event.body, ev.event.body, "body frozen");
    assert_eq!(
        store.find_audit_records(10).await.expect("audit"),
        vec![audit]
    );
    assert_eq!(store.backlog().await.expect("backlog").pending_events, 1);

    // Event only: the payment stays at version 2.
    let resend = OutboxEvent {
        event: CallbackEvent::new(&v2, event_id(2), EventKind::ManualResend, T0 + ms(200)),
        max_attempts: 1,
        ..sample_event(&v2, event_id(2), T0 + ms(200))
    };
    store
        .commit_change(&PaymentChange {
            history: None,
            ledger: None,
            payment: v2.clone(),
            expected_version: 2,
            event: Some(resend.clone()),
            audit: None,
        })
        .await
        .expect("event-only change");
    assert_eq!(
        store.payment(p.id).await.expect("payment"),
        Some(v2.clone())
    );
    let recorded: Vec<OutboxEvent> = events(store, p.id)
        .await
        .into_iter()
        .map(|e| e.outbox)
        .collect();
    assert_eq!(recorded, vec![ev, resend]);
    assert_eq!(store.find_audit_records(10).await.expect("audit").len(), 1);

    let ghost = sample_payment(payment_id(9), project_id(1), "ghost");
    let err = store
        .commit_change(&PaymentChange {
            history: None,
            ledger: None,
            payment: changed(&ghost, PaymentStatus::Processing, T0),
            expected_version: 1,
            event: None,
            audit: None,
        })
        .await;
    assert!(
        matches!(err, Err(StoreError::NotFound(_))),
        "unknown payment: {err:?}"
    );
    assert_eq!(store.payment(ghost.id).await.expect("payment"), None);
}

/// A stale version is `Conflict` and writes nothing: no payment change, no event, no audit. A
/// duplicate event id is `Duplicate` and writes nothing either.
pub async fn conflict_writes_nothing<S: Store>(store: &S) {
    let p = sample_payment(payment_id(1), project_id(1), "order-1");
    inserted(store, &p).await;
    let v2 = changed(&p, PaymentStatus::Processing, T0 + ms(1));
    store
        .commit_change(&PaymentChange {
            history: None,
            ledger: None,
            payment: v2.clone(),
            expected_version: 1,
            event: Some(sample_event(&v2, event_id(1), T0)),
            audit: None,
        })
        .await
        .expect("first change");

    // A second writer computed its change from version 1 too.
    let stale = changed(&p, PaymentStatus::Error, T0 + ms(2));
    let err = store
        .commit_change(&PaymentChange {
            history: None,
            ledger: None,
            payment: stale.clone(),
            expected_version: 1,
            event: Some(sample_event(&stale, event_id(2), T0)),
            audit: Some(sample_audit(T0, "payment.fail", "x")),
        })
        .await;
    assert_eq!(err, Err(StoreError::Conflict));
    assert_eq!(
        store.payment(p.id).await.expect("payment"),
        Some(v2.clone())
    );
    assert_eq!(
        events(store, p.id).await.len(),
        1,
        "no event from a conflict"
    );
    assert!(store
        .find_audit_records(10)
        .await
        .expect("audit")
        .is_empty());
    assert_eq!(store.backlog().await.expect("backlog").pending_events, 1);

    // Reusing an event id fails the whole change.
    let v3 = changed(&v2, PaymentStatus::Completed, T0 + ms(3));
    let err = store
        .commit_change(&PaymentChange {
            history: None,
            ledger: None,
            payment: v3.clone(),
            expected_version: 2,
            event: Some(sample_event(&v3, event_id(1), T0)),
            audit: Some(sample_audit(T0, "payment.confirm", "x")),
        })
        .await;
    assert!(
        matches!(err, Err(StoreError::Duplicate(_))),
        "duplicate event id: {err:?}"
    );
    assert_eq!(store.payment(p.id).await.expect("payment"), Some(v2));
    assert_eq!(events(store, p.id).await.len(), 1);
    assert!(store
        .find_audit_records(10)
        .await
        .expect("audit")
        .is_empty());
}

/// A change's status history entry is written with it and read back oldest first, each field
/// as written (a change without one records nothing); a change that conflicts or fails
/// records nothing; an unknown payment has no changes.
pub async fn status_history<S: Store>(store: &S) {
    use crate::history::{ChangeCause, ChangeSource, StatusChange};
    let p = sample_payment(payment_id(1), project_id(1), "order-1");
    inserted(store, &p).await;
    let entry = |before: &Payment, after: &Payment, cause, source| StatusChange {
        payment_id: after.id,
        version: after.version,
        from: Some(before.status),
        to: after.status,
        amount: after.amount,
        at: after.updated_at,
        cause,
        source,
    };
    let change = |before: &Payment, after: &Payment, history| PaymentChange {
        payment: after.clone(),
        expected_version: before.version,
        event: None,
        audit: None,
        ledger: None,
        history,
    };
    let mut v2 = changed(&p, PaymentStatus::Processing, T0 + ms(1));
    let full = full_payment(p.id, p.project_id, "x");
    (v2.requisites, v2.pricing) = (full.requisites, full.pricing);
    let issued = entry(
        &p,
        &v2,
        ChangeCause::RequisitesIssued,
        Some(ChangeSource::Provider),
    );
    let first = change(&p, &v2, Some(issued.clone()));
    store.commit_change(&first).await.expect("first change");
    // A route switch: a new version, no entry.
    let mut v3 = v2.clone();
    v3.version = 3;
    store
        .commit_change(&change(&v2, &v3, None))
        .await
        .expect("no entry");

    // A stale writer's change and its entry are refused together.
    let stale = changed(&v2, PaymentStatus::Canceled, T0 + ms(2));
    let lost = entry(
        &v2,
        &stale,
        ChangeCause::Canceled,
        Some(ChangeSource::Support),
    );
    let err = store.commit_change(&change(&v2, &stale, Some(lost))).await;
    assert_eq!(err, Err(StoreError::Conflict));

    let mut v4 = changed(&v3, PaymentStatus::Completed, T0 + ms(3));
    v4.amount = Amount::parse("3399.5").expect("an amount");
    let done = entry(&v3, &v4, ChangeCause::Confirmed, None);
    store
        .commit_change(&change(&v3, &v4, Some(done.clone())))
        .await
        .expect("completed");
    let read = store.status_changes(p.id).await.expect("status changes");
    assert_eq!(
        read,
        vec![issued, done],
        "the entries as written, oldest first"
    );
    let none = store.status_changes(payment_id(9)).await.expect("unknown");
    assert!(none.is_empty(), "an unknown payment has no changes");

    // A create's one write stores its entry with the payment; a replay stores neither.
    let q = sample_payment(payment_id(2), project_id(1), "order-2");
    let mut q2 = changed(&q, PaymentStatus::Processing, T0);
    (q2.requisites, q2.pricing) = (v2.requisites.clone(), v2.pricing);
    let first = entry(
        &q,
        &q2,
        ChangeCause::RequisitesIssued,
        Some(ChangeSource::Provider),
    );
    let nonce = |nonce| NonceUse {
        project: project_id(1),
        nonce,
        now: T0,
        expires_at: T0 + ms(60_000),
    };
    let mpid = q.merchant_payment_id.clone();
    let admitted = store
        .admit_create(
            Some(nonce("n-1")),
            project_id(1),
            &mpid,
            Some(&q2),
            Some(&first),
        )
        .await;
    assert_eq!(admitted, Ok(AdmitOutcome::Inserted));
    let r = sample_payment(payment_id(3), project_id(1), "order-3");
    let lost = entry(&q, &r, ChangeCause::RequisitesRefused, None);
    let mpid = r.merchant_payment_id.clone();
    let replayed = store
        .admit_create(
            Some(nonce("n-1")),
            project_id(1),
            &mpid,
            Some(&r),
            Some(&lost),
        )
        .await;
    assert_eq!(replayed, Ok(AdmitOutcome::Replayed));
    let read = store.status_changes(q.id).await.expect("status changes");
    assert_eq!(
        read,
        vec![first],
        "the one write's entry, and nothing of the replay"
    );
    let none = store.status_changes(r.id).await.expect("status changes");
    assert!(none.is_empty(), "a replay writes no entry");
}

/// Only `created` and `processing` payments are due, at their [`Payment::due_at`], earliest
/// first, at most `limit`; a change that closes a payment makes it no longer due.
pub async fn due_payments<S: Store>(store: &S) {
    let project = project_id(1);
    let at = |n: u128, status: PaymentStatus, created: i64, expires: i64| {
        let mut p = sample_payment(payment_id(n), project, &format!("o{n}"));
        p.status = status;
        p.created_at = T0 + ms(created);
        p.updated_at = p.created_at;
        p.expires_at = T0 + ms(expires);
        p
    };
    // due_at: created -> created_at + 60 s; processing -> expires_at.
    let payments = vec![
        at(1, PaymentStatus::Processing, 0, 30_000), // due T0+30s
        at(2, PaymentStatus::Created, 0, 900_000),   // due T0+60s
        at(3, PaymentStatus::Processing, 0, 10_000), // due T0+10s
        at(4, PaymentStatus::Completed, 0, 1),       // never
        at(5, PaymentStatus::Canceled, 0, 1),        // never
        at(6, PaymentStatus::Error, 0, 1),           // never
        at(7, PaymentStatus::Appeal, 0, 1),          // never
        at(8, PaymentStatus::Processing, 0, 500_000), // due later
        at(9, PaymentStatus::Processing, 0, 10_000), // ties with 3, larger id
    ];
    for p in &payments {
        inserted(store, p).await;
    }
    let ids = |v: Vec<Payment>| v.into_iter().map(|p| p.id).collect::<Vec<_>>();
    let now = T0 + ms(60_000);
    assert_eq!(
        ids(store.due_payments(now, 100).await.expect("due")),
        vec![payment_id(3), payment_id(9), payment_id(1), payment_id(2)]
    );
    assert_eq!(
        ids(store.due_payments(now, 2).await.expect("due")),
        vec![payment_id(3), payment_id(9)]
    );
    assert_eq!(
        ids(store.due_payments(T0 + ms(9_999), 100).await.expect("due")),
        Vec::<PaymentId>::new()
    );
    assert_eq!(
        ids(store.due_payments(T0 + ms(10_000), 100).await.expect("due")),
        vec![payment_id(3), payment_id(9)],
        "due at exactly due_at"
    );
    let returned = store.due_payments(now, 100).await.expect("due");
    assert_eq!(returned[0], payments[2], "whole payments are returned");

    // Closing payment 3 takes it off the schedule; payment 2 moving to processing moves its
    // due time to its expires_at.
    let p3 = changed(&payments[2], PaymentStatus::Canceled, T0 + ms(10_001));
    let p2 = changed(&payments[1], PaymentStatus::Processing, T0 + ms(1));
    for (p, v) in [(p3, 1), (p2, 1)] {
        store
            .commit_change(&PaymentChange {
                history: None,
                ledger: None,
                payment: p,
                expected_version: v,
                event: None,
                audit: None,
            })
            .await
            .expect("commit_change");
    }
    assert_eq!(
        ids(store.due_payments(now, 100).await.expect("due")),
        vec![payment_id(9), payment_id(1)]
    );
    assert_eq!(
        ids(store
            .due_payments(T0 + ms(900_000), 100)
            .await
            .expect("due")),
        vec![payment_id(9), payment_id(1), payment_id(8), payment_id(2)]
    );
}

/// The backlog's counts per status, in [`PaymentStatus::ALL`] order, statuses with no payment
/// left out.
pub async fn backlog_by_status<S: Store>(store: &S) {
    assert_eq!(
        store.backlog().await.expect("backlog").by_status,
        Vec::new()
    );
    let statuses = [
        PaymentStatus::Completed,
        PaymentStatus::Created,
        PaymentStatus::Completed,
        PaymentStatus::Appeal,
        PaymentStatus::Completed,
    ];
    for (i, status) in statuses.into_iter().enumerate() {
        let n = u128::try_from(i).expect("small");
        let mut p = sample_payment(payment_id(n), project_id(1), &format!("o{i}"));
        p.status = status;
        inserted(store, &p).await;
    }
    assert_eq!(
        store.backlog().await.expect("backlog").by_status,
        vec![
            (PaymentStatus::Created, 1),
            (PaymentStatus::Completed, 3),
            (PaymentStatus::Appeal, 1),
        ]
    );
    // A status change moves one payment from one count to the other; a change that keeps the
    // status (another field, a new version) moves nothing.
    let created = store
        .payment(payment_id(1))
        .await
        .expect("read")
        .expect("stored");
    let processing = changed(&created, PaymentStatus::Processing, T0 + ms(10));
    let same_status = changed(&processing, PaymentStatus::Processing, T0 + ms(20));
    for (next, from) in [(&processing, &created), (&same_status, &processing)] {
        store
            .commit_change(&PaymentChange {
                history: None,
                ledger: None,
                payment: next.clone(),
                expected_version: from.version,
                event: None,
                audit: None,
            })
            .await
            .expect("commit");
    }
    assert_eq!(
        store.backlog().await.expect("backlog").by_status,
        vec![
            (PaymentStatus::Processing, 1),
            (PaymentStatus::Completed, 3),
            (PaymentStatus::Appeal, 1),
        ]
    );
}

// ---------------------------------------------------------------------------------------------
// Nonces.

/// A nonce is accepted once per project until it expires; at `expires_at` it is free again;
/// purging removes exactly the expired ones.
pub async fn nonces<S: Store>(store: &S) {
    let (a, b) = (project_id(1), project_id(2));
    let exp = T0 + ms(300_000);
    assert!(store.use_nonce(a, "n-1", T0, exp).await.expect("use"));
    assert!(!store.use_nonce(a, "n-1", T0, exp).await.expect("use"));
    assert!(
        !store
            .use_nonce(a, "n-1", exp - ms(1), exp + ms(9))
            .await
            .expect("use"),
        "a replay just before expiry"
    );
    assert!(
        store.use_nonce(b, "n-1", T0, exp).await.expect("use"),
        "nonces are per project"
    );
    assert!(store
        .use_nonce(a, "n-2", T0, T0 + ms(10))
        .await
        .expect("use"));
    assert!(
        store
            .use_nonce(a, "n-1", exp, exp + ms(1000))
            .await
            .expect("use"),
        "free again at its expiry"
    );
    assert!(
        !store
            .use_nonce(a, "n-1", exp, exp + ms(1000))
            .await
            .expect("use"),
        "the re-use recorded the new expiry"
    );

    // Now: a/n-1 until exp+1000, b/n-1 until exp, a/n-2 until T0+10.
    assert_eq!(
        purge_all(store, Retained::Nonces, T0 + ms(9), NONCE_PURGE_BATCH)
            .await
            .expect("purge"),
        0
    );
    // A batch of one stops early and says so; the rest follows in the next batches.
    let first = store.purge(Retained::Nonces, exp, 1).await.expect("purge");
    assert!(first.deleted >= 1 && first.more, "{first:?}");
    assert_eq!(
        first.deleted
            + purge_all(store, Retained::Nonces, exp, NONCE_PURGE_BATCH)
                .await
                .expect("purge"),
        2
    );
    assert_eq!(
        purge_all(store, Retained::Nonces, exp, NONCE_PURGE_BATCH)
            .await
            .expect("purge"),
        0
    );
    assert!(
        !store
            .use_nonce(a, "n-1", exp, exp + ms(5))
            .await
            .expect("use"),
        "a live nonce survives the purge"
    );
    assert!(store
        .use_nonce(b, "n-1", exp, exp + ms(5))
        .await
        .expect("use"));
}

/// [`Store::commit_change_once`]: the key and the change are written together or not at all;
/// a live key writes nothing; a conflict leaves the key free; without a change the key is only
/// looked at; keys are per scope and free again at their expiry.
pub async fn commit_change_once<S: Store>(store: &S) {
    let scope = project_id(7);
    let p = sample_payment(payment_id(1), project_id(1), "order-1");
    inserted(store, &p).await;
    let key = |nonce, now: Timestamp| NonceUse {
        project: scope,
        nonce,
        now,
        expires_at: T0 + ms(60_000),
    };
    let v2 = changed(&p, PaymentStatus::Processing, T0 + ms(1));
    let change = |payment: &Payment, expected_version, event: u128, action: &str| PaymentChange {
        history: None,
        ledger: None,
        payment: payment.clone(),
        expected_version,
        event: Some(sample_event(payment, event_id(event), T0)),
        audit: Some(sample_audit(T0, action, &p.id.to_string())),
    };
    let once = |k, c: Option<PaymentChange>| async move {
        store
            .commit_change_once(k, c.as_ref())
            .await
            .expect("commit_change_once")
    };

    assert!(once(key("n-1", T0), None).await, "a free key, looked at");
    assert!(once(key("n-1", T0), None).await, "looking records nothing");
    // A conflict writes neither the change nor the key.
    let stale = changed(&p, PaymentStatus::Error, T0 + ms(1));
    assert_eq!(
        store
            .commit_change_once(key("n-1", T0), Some(&change(&stale, 5, 1, "stale")))
            .await,
        Err(StoreError::Conflict)
    );
    assert!(once(key("n-1", T0), None).await, "the key stays free");
    assert_eq!(store.payment(p.id).await.expect("payment"), Some(p.clone()));

    assert!(once(key("n-1", T0), Some(change(&v2, 1, 1, "first"))).await);
    assert_eq!(
        store.payment(p.id).await.expect("payment"),
        Some(v2.clone())
    );
    assert_eq!(events(store, p.id).await.len(), 1);
    assert!(!once(key("n-1", T0), None).await, "the key is recorded");

    // The same key again: nothing is written, even a change that would apply.
    let v3 = changed(&v2, PaymentStatus::Completed, T0 + ms(2));
    assert!(!once(key("n-1", T0 + ms(5)), Some(change(&v3, 2, 2, "again"))).await);
    assert_eq!(
        store.payment(p.id).await.expect("payment"),
        Some(v2.clone())
    );
    assert_eq!(events(store, p.id).await.len(), 1);
    assert_eq!(store.find_audit_records(10).await.expect("audit").len(), 1);

    // Keys are per scope: the same text under another scope is free.
    let other = NonceUse {
        project: project_id(8),
        ..key("n-1", T0)
    };
    assert!(once(other, None).await);
    // And free again at their expiry.
    assert!(once(key("n-1", T0 + ms(60_000)), None).await);
    assert!(
        once(
            NonceUse {
                expires_at: T0 + ms(120_000),
                ..key("n-1", T0 + ms(60_000))
            },
            Some(change(&v3, 2, 2, "later"))
        )
        .await
    );
    assert_eq!(store.payment(p.id).await.expect("payment"), Some(v3));
    // The key is an ordinary nonce of its scope.
    assert!(!store
        .use_nonce(scope, "n-1", T0 + ms(60_000), T0 + ms(70_000))
        .await
        .expect("use"));
}

/// Many concurrent uses of one nonce: exactly one `true`.
pub async fn concurrent_nonces<S: Store>(store: &S) {
    let results =
        join_all((0..16).map(|_| store.use_nonce(project_id(1), "same", T0, T0 + ms(60_000))))
            .await;
    let accepted = results
        .into_iter()
        .map(|r| r.expect("use_nonce"))
        .filter(|ok| *ok)
        .count();
    assert_eq!(accepted, 1);
}

/// `admit_create`: a replayed nonce writes nothing; a taken merchant payment id answers the
/// stored payment and keeps the nonce; a candidate is stored with its nonce; without a
/// candidate only the nonce is recorded; without a nonce nothing is recorded.
pub async fn admit_create<S: Store>(store: &S) {
    let a = project_id(1);
    let use_of = |nonce: &'static str| NonceUse {
        project: a,
        nonce,
        now: T0,
        expires_at: T0 + ms(60_000),
    };
    let mpid = |s: &str| MerchantPaymentId::parse(s).expect("valid");
    let p1 = sample_payment(payment_id(1), a, "order-1");
    async fn admit_in<S: Store>(
        store: &S,
        nonce: Option<NonceUse<'_>>,
        id: &str,
        candidate: Option<&Payment>,
    ) -> AdmitOutcome {
        let id = MerchantPaymentId::parse(id).expect("valid");
        store
            .admit_create(nonce, project_id(1), &id, candidate, None)
            .await
            .expect("admit_create")
    }

    assert_eq!(
        admit_in(store, Some(use_of("n-1")), "order-1", Some(&p1)).await,
        AdmitOutcome::Inserted
    );
    assert_eq!(
        store.payment(p1.id).await.expect("payment"),
        Some(p1.clone())
    );
    assert!(
        !store
            .use_nonce(a, "n-1", T0, T0 + ms(1))
            .await
            .expect("use"),
        "the nonce was recorded with the payment"
    );

    // The same nonce again: nothing written, even for a new merchant payment id.
    let p2 = sample_payment(payment_id(2), a, "order-2");
    assert_eq!(
        admit_in(store, Some(use_of("n-1")), "order-2", Some(&p2)).await,
        AdmitOutcome::Replayed
    );
    assert_eq!(store.payment(p2.id).await.expect("payment"), None);

    // A taken merchant payment id: the stored payment, the candidate not stored, the nonce kept.
    let mut again = sample_payment(payment_id(3), a, "order-1");
    again.fingerprint = "another request".to_string();
    assert_eq!(
        admit_in(store, Some(use_of("n-2")), "order-1", Some(&again)).await,
        AdmitOutcome::Existing(p1.clone())
    );
    assert_eq!(store.payment(again.id).await.expect("payment"), None);
    assert!(!store
        .use_nonce(a, "n-2", T0, T0 + ms(1))
        .await
        .expect("use"));
    // Taken, without a candidate (the repeat broke a rule that changed since): still Existing.
    assert_eq!(
        admit_in(store, Some(use_of("n-3")), "order-1", None).await,
        AdmitOutcome::Existing(p1.clone())
    );

    // Free, without a candidate: only the nonce.
    assert_eq!(
        admit_in(store, Some(use_of("n-4")), "order-9", None).await,
        AdmitOutcome::Free
    );
    assert_eq!(
        store
            .payment_by_merchant_id(a, &mpid("order-9"))
            .await
            .expect("lookup"),
        None
    );
    assert!(!store
        .use_nonce(a, "n-4", T0, T0 + ms(1))
        .await
        .expect("use"));

    // No nonce (an unsigned create path): a plain insert or lookup.
    assert_eq!(
        admit_in(store, None, "order-1", None).await,
        AdmitOutcome::Existing(p1)
    );
    assert_eq!(
        admit_in(store, None, "order-9", None).await,
        AdmitOutcome::Free
    );
    assert_eq!(
        admit_in(store, None, "order-2", Some(&p2)).await,
        AdmitOutcome::Inserted
    );
    assert_eq!(store.payment(p2.id).await.expect("payment"), Some(p2));
}

/// Fifty concurrent creates of one merchant payment id, each with its own nonce and candidate,
/// spread over the handles, store exactly one payment: every other create gets it back. One
/// nonce sent through every handle at once is accepted once.
pub async fn concurrent_identical_creates<S: Store>(handles: &[&S]) {
    let a = project_id(1);
    let mpid = MerchantPaymentId::parse("same-order").expect("valid");
    let nonces: Vec<String> = (0..50).map(|i| format!("nonce-{i}")).collect();
    let candidates: Vec<Payment> = (0..50)
        .map(|i| sample_payment(payment_id(1000 + i), a, "same-order"))
        .collect();
    let outcomes = join_all((0..50).map(|i| {
        let store = handles[i % handles.len()];
        store.admit_create(
            Some(NonceUse {
                project: a,
                nonce: &nonces[i],
                now: T0,
                expires_at: T0 + ms(60_000),
            }),
            a,
            &mpid,
            Some(&candidates[i]),
            None,
        )
    }))
    .await;
    let mut winner = None;
    for (i, outcome) in outcomes.iter().enumerate() {
        if outcome == &Ok(AdmitOutcome::Inserted) {
            assert!(winner.is_none(), "two creates stored a payment");
            winner = Some(candidates[i].clone());
        }
    }
    let winner = winner.expect("one create stores the payment");
    for outcome in outcomes {
        match outcome.expect("admit_create") {
            AdmitOutcome::Inserted => {}
            AdmitOutcome::Existing(p) => assert_eq!(p, winner),
            other => panic!("a fresh nonce and a taken id must be Existing, got {other:?}"),
        }
    }
    for h in handles {
        assert_eq!(
            h.payment_by_merchant_id(a, &mpid).await.expect("lookup"),
            Some(winner.clone())
        );
    }

    let other = MerchantPaymentId::parse("one-nonce").expect("valid");
    let same_nonce: Vec<Payment> = (0..12)
        .map(|i| sample_payment(payment_id(2000 + i), a, "one-nonce"))
        .collect();
    let outcomes = join_all((0..12).map(|i| {
        handles[i % handles.len()].admit_create(
            Some(NonceUse {
                project: a,
                nonce: "shared-nonce",
                now: T0,
                expires_at: T0 + ms(60_000),
            }),
            a,
            &other,
            Some(&same_nonce[i]),
            None,
        )
    }))
    .await;
    let admitted = outcomes
        .into_iter()
        .map(|o| o.expect("admit_create"))
        .filter(|o| *o != AdmitOutcome::Replayed)
        .count();
    assert_eq!(admitted, 1, "one nonce is accepted once across handles");
    assert_eq!(
        handles[0].backlog().await.expect("backlog").by_status,
        vec![(PaymentStatus::Created, 2)]
    );
}

/// A store's `admit_create` answers as the generic one written over `transact`
/// ([`generic::admit_create`](crate::store::generic::admit_create)) does: the same steps (a
/// create, a replay, a taken id with and without a candidate, a free id, without a nonce too)
/// on two projects, one through each, give the same outcomes and store the same payments. A
/// store that overrides it for speed is held to the written-once rule this way.
pub async fn admit_create_matches_the_generic_path<S: Store>(store: &S) {
    async fn steps<S: Store>(store: &S, n: u128, generic: bool) -> Vec<String> {
        let project = project_id(n);
        let nonce = |s: &'static str| NonceUse {
            project,
            nonce: s,
            now: T0,
            expires_at: T0 + ms(60_000),
        };
        let candidate =
            |i: u128, mpid: &str| sample_payment(payment_id(n * 100 + i), project, mpid);
        let script: Vec<(Option<NonceUse<'static>>, &str, Option<Payment>)> = vec![
            (Some(nonce("a")), "o-1", Some(candidate(1, "o-1"))),
            (Some(nonce("a")), "o-2", Some(candidate(2, "o-2"))),
            (Some(nonce("b")), "o-1", Some(candidate(3, "o-1"))),
            (Some(nonce("c")), "o-9", None),
            (Some(nonce("d")), "o-1", None),
            // The nonces of the steps without a candidate were recorded too.
            (Some(nonce("c")), "o-8", Some(candidate(5, "o-8"))),
            (None, "o-4", Some(candidate(4, "o-4"))),
            (None, "o-4", None),
            (None, "o-5", None),
        ];
        let mut seen = Vec::new();
        for (nonce, id, cand) in script {
            let id = MerchantPaymentId::parse(id).expect("valid");
            let outcome = if generic {
                crate::store::generic::admit_create(store, nonce, project, &id, cand.as_ref(), None)
                    .await
            } else {
                store
                    .admit_create(nonce, project, &id, cand.as_ref(), None)
                    .await
            }
            .expect("admit_create");
            let stored = match &cand {
                Some(c) => store.payment(c.id).await.expect("payment").is_some(),
                None => false,
            };
            seen.push(match outcome {
                AdmitOutcome::Existing(p) => format!(
                    "existing {} (payment {}), candidate stored: {stored}",
                    p.merchant_payment_id.as_str(),
                    p.id.as_uuid().as_u128() - n * 100 - 0x2000_0000
                ),
                other => format!("{other:?}, candidate stored: {stored}"),
            });
        }
        seen
    }
    let own = steps(store, 1, false).await;
    let generic = steps(store, 2, true).await;
    assert_eq!(
        own, generic,
        "admit_create answers as the generic path does, step by step"
    );
}

/// The single writes a store may override for speed ([`Store::use_nonce`],
/// [`Store::insert_payment`], [`Store::commit_change`]) agree with their generic paths over
/// [`Store::transact`] ([`crate::store::generic`]): each path sees what the other wrote and
/// refuses what the other refuses (a replayed nonce, a taken merchant payment id, a stale
/// version), and a change's event and audit record are written by both.
pub async fn single_writes_match_the_generic_path<S: Store>(store: &S) {
    use crate::store::generic;
    let a = project_id(1);
    let nonce = |nonce: &'static str, now: Timestamp| NonceUse {
        project: a,
        nonce,
        now,
        expires_at: T0 + ms(100),
    };
    // Nonces, each path after the other.
    assert!(generic::use_nonce(store, nonce("g", T0))
        .await
        .expect("use"));
    assert!(!store
        .use_nonce(a, "g", T0, T0 + ms(100))
        .await
        .expect("use"));
    assert!(store
        .use_nonce(a, "s", T0, T0 + ms(100))
        .await
        .expect("use"));
    assert!(!generic::use_nonce(store, nonce("s", T0))
        .await
        .expect("use"));
    assert!(
        generic::use_nonce(store, nonce("s", T0 + ms(100)))
            .await
            .expect("use"),
        "free again at its expiry, on the generic path too"
    );

    // Inserts: a merchant payment id taken on one path is taken on the other.
    let g = sample_payment(payment_id(1), a, "by-generic");
    let s = sample_payment(payment_id(2), a, "by-store");
    let twin =
        |n: u128, p: &Payment| sample_payment(payment_id(n), a, p.merchant_payment_id.as_str());
    assert_eq!(
        generic::insert_payment(store, &g).await.expect("insert"),
        InsertOutcome::Inserted
    );
    assert_eq!(
        store.insert_payment(&s).await.expect("insert"),
        InsertOutcome::Inserted
    );
    assert_eq!(
        store.insert_payment(&twin(3, &g)).await.expect("insert"),
        InsertOutcome::Existing(g.clone())
    );
    assert_eq!(
        generic::insert_payment(store, &twin(4, &s))
            .await
            .expect("insert"),
        InsertOutcome::Existing(s.clone())
    );
    assert_eq!(store.payment(payment_id(3)).await.expect("read"), None);
    assert_eq!(store.payment(payment_id(4)).await.expect("read"), None);

    // Changes: each path refuses a version the other moved past, and writes the event and the
    // audit record with the payment.
    let change = |p: &Payment, n: u128, at: i64| {
        let next = changed(p, PaymentStatus::Processing, T0 + ms(at));
        PaymentChange {
            history: None,
            ledger: None,
            event: Some(sample_event(&next, event_id(n), T0 + ms(at))),
            audit: Some(sample_audit(
                T0 + ms(at),
                "check",
                next.merchant_payment_id.as_str(),
            )),
            expected_version: p.version,
            payment: next,
        }
    };
    let (g1, s1) = (change(&g, 1, 10), change(&s, 2, 10));
    generic::commit_change(store, &g1).await.expect("commit");
    store.commit_change(&s1).await.expect("commit");
    assert_eq!(
        store.commit_change(&change(&g, 3, 20)).await,
        Err(StoreError::Conflict)
    );
    assert_eq!(
        generic::commit_change(store, &change(&s, 4, 20)).await,
        Err(StoreError::Conflict)
    );
    for (c, by) in [(&g1, "generic"), (&s1, "store")] {
        assert_eq!(
            store.payment(c.payment.id).await.expect("read").as_ref(),
            Some(&c.payment),
            "{by}"
        );
        let events = store
            .events_for_payment(c.payment.id)
            .await
            .expect("events");
        assert_eq!(events.len(), 1, "{by}: the event of the change only");
        assert_eq!(events[0].outbox, *c.event.as_ref().expect("an event"));
    }
    let audit = store.find_audit_records(10).await.expect("audit");
    assert_eq!(audit.len(), 2, "both changes' audit records: {audit:?}");
}

/// `transact` is all or nothing: a work that recorded a nonce, stored a payment and changed
/// another, then failed, leaves none of it; the same work answering `Ok` leaves all of it and
/// its answer comes back typed.
pub async fn transact_is_all_or_nothing<S: Store>(store: &S) {
    let a = project_id(1);
    let first = sample_payment(payment_id(1), a, "tx-1");
    inserted(store, &first).await;
    let second = sample_payment(payment_id(2), a, "tx-2");
    let change = PaymentChange {
        history: None,
        ledger: None,
        payment: changed(&first, PaymentStatus::Processing, T0 + ms(5)),
        expected_version: first.version,
        event: None,
        audit: Some(sample_audit(T0 + ms(5), "tx.check", "tx-1")),
    };
    for fail in [true, false] {
        let (work_second, work_change) = (second.clone(), change.clone());
        let answer = crate::store::transact(store, move |tx| {
            let (second, change) = (work_second.clone(), work_change.clone());
            Box::pin(async move {
                let nonce = NonceUse {
                    project: a,
                    nonce: "tx-nonce",
                    now: T0,
                    expires_at: T0 + ms(60_000),
                };
                assert!(tx.use_nonce(nonce).await?, "the nonce is free");
                assert!(tx.nonce_live(nonce).await?, "a step sees the earlier steps");
                assert_eq!(tx.insert_payment(&second).await?, InsertOutcome::Inserted);
                tx.commit_change(&change).await?;
                if fail {
                    Err(StoreError::Conflict)
                } else {
                    Ok(7_u32)
                }
            })
        })
        .await;
        let stored = store.payment(second.id).await.expect("payment");
        let current = store.payment(first.id).await.expect("payment");
        let audit = store.find_audit_records(10).await.expect("audit");
        if fail {
            assert_eq!(answer, Err(StoreError::Conflict));
            assert_eq!(stored, None, "the failed work's insert is rolled back");
            assert_eq!(current, Some(first.clone()), "and its change");
            assert!(audit.is_empty(), "and its audit record");
        } else {
            assert_eq!(answer, Ok(7));
            assert_eq!(stored, Some(second.clone()));
            assert_eq!(current, Some(change.payment.clone()));
            assert_eq!(audit.len(), 1);
        }
    }
    assert!(
        !store
            .use_nonce(a, "tx-nonce", T0, T0 + ms(1))
            .await
            .expect("use"),
        "the committed work's nonce is recorded"
    );
}
