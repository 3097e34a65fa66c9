//! Checks of what operations read and purge: status counters, the oldest due payment and
//! pending event, failed events and their resend, retention, operator tokens.

use super::*;
use crate::event::FailedEventFilter;
use crate::project::OperatorTokenRecord;
use crate::store::OperatorStoreExt;

/// The lease token of an event no dispatcher has claimed yet (these checks record attempts
/// without claiming).
const UNCLAIMED: crate::store::LeaseToken = crate::store::LeaseToken::new(0);

/// A `processing` payment `n` of `project` with an automatic event for `destination`, queued at
/// `queued` and due then.
async fn queue_for<S: Store>(
    store: &S,
    n: u128,
    project: ProjectId,
    destination: &str,
    queued: Timestamp,
) -> OutboxEvent {
    let p = sample_payment(payment_id(n), project, &format!("o{n}"));
    inserted(store, &p).await;
    let v2 = changed(&p, PaymentStatus::Canceled, queued);
    let ev = OutboxEvent {
        event: CallbackEvent::new(&v2, event_id(n), EventKind::Automatic, queued),
        destination: url(destination),
        state: DeliveryState::Pending,
        attempts: 0,
        max_attempts: 3,
        next_attempt_at: Some(queued),
    };
    store
        .commit_change(&PaymentChange {
            history: None,
            ledger: None,
            payment: v2,
            expected_version: 1,
            event: Some(ev.clone()),
            audit: None,
        })
        .await
        .expect("commit_change");
    ev
}

/// Ends `ev` as failed after one attempt with `error`.
async fn fail<S: Store>(store: &S, ev: &OutboxEvent, error: &str) -> DeliveryAttempt {
    let a = attempt(1, false, Some(503), Some(error));
    store
        .record_attempt(ev.event.event_id, UNCLAIMED, &a, None)
        .await
        .expect("record_attempt");
    a
}

/// Ends `ev` as delivered.
async fn deliver<S: Store>(store: &S, ev: &OutboxEvent) {
    store
        .record_attempt(
            ev.event.event_id,
            UNCLAIMED,
            &attempt(1, true, Some(200), None),
            None,
        )
        .await
        .expect("record_attempt");
}

/// The counts by status follow every write: inserts, status changes (back and forth) and
/// admitted creates; a change that keeps the status keeps the counts.
pub async fn status_counts_follow_changes<S: Store>(store: &S) {
    let p1 = sample_payment(payment_id(1), project_id(1), "o1");
    let p2 = sample_payment(payment_id(2), project_id(1), "o2");
    inserted(store, &p1).await;
    inserted(store, &p2).await;
    let p3 = sample_payment(payment_id(3), project_id(1), "o3");
    let admitted = store
        .admit_create(
            None,
            project_id(1),
            &p3.merchant_payment_id,
            Some(&p3),
            None,
        )
        .await
        .expect("admit_create");
    assert_eq!(admitted, AdmitOutcome::Inserted);
    assert_eq!(
        store.backlog().await.expect("backlog").by_status,
        vec![(PaymentStatus::Created, 3)]
    );
    let v2 = changed(&p1, PaymentStatus::Processing, T0 + ms(1));
    let v3 = changed(&v2, PaymentStatus::Completed, T0 + ms(2));
    for (before, after) in [(&p1, &v2), (&v2, &v3)] {
        store
            .commit_change(&PaymentChange {
                history: None,
                ledger: None,
                payment: after.clone(),
                expected_version: before.version,
                event: None,
                audit: None,
            })
            .await
            .expect("commit_change");
    }
    // Same status, new version (a re-check kept it): the counts stay.
    let mut v4 = v3.clone();
    v4.version += 1;
    store
        .commit_change(&PaymentChange {
            history: None,
            ledger: None,
            payment: v4,
            expected_version: v3.version,
            event: None,
            audit: None,
        })
        .await
        .expect("commit_change");
    // A refused change (wrong version) counts nothing.
    let stale = changed(&p2, PaymentStatus::Processing, T0 + ms(3));
    let err = store
        .commit_change(&PaymentChange {
            history: None,
            ledger: None,
            payment: stale,
            expected_version: 7,
            event: None,
            audit: None,
        })
        .await;
    assert_eq!(err, Err(StoreError::Conflict));
    assert_eq!(
        store.backlog().await.expect("backlog").by_status,
        vec![(PaymentStatus::Created, 2), (PaymentStatus::Completed, 1)],
        "a status that has no payment left is not listed"
    );
}

/// The earliest due payment and the oldest pending event; `None` when there is none.
pub async fn oldest_due_and_pending<S: Store>(store: &S) {
    assert_eq!(
        store.backlog().await.expect("backlog").oldest_due_payment,
        None
    );
    assert_eq!(
        store.backlog().await.expect("backlog").oldest_pending_event,
        None
    );
    let a = queue_for(
        store,
        1,
        project_id(1),
        "https://a.example/cb",
        T0 + ms(500),
    )
    .await;
    let b = queue_for(
        store,
        2,
        project_id(1),
        "https://a.example/cb",
        T0 + ms(200),
    )
    .await;
    let _c = queue_for(
        store,
        3,
        project_id(1),
        "https://a.example/cb",
        T0 + ms(900),
    )
    .await;
    assert_eq!(
        store.backlog().await.expect("backlog").oldest_pending_event,
        Some(T0 + ms(200))
    );
    deliver(store, &b).await;
    assert_eq!(
        store.backlog().await.expect("backlog").oldest_pending_event,
        Some(T0 + ms(500)),
        "a delivered event is no longer pending"
    );
    fail(store, &a, "timeout").await;
    assert_eq!(
        store.backlog().await.expect("backlog").oldest_pending_event,
        Some(T0 + ms(900))
    );
    // Canceled payments are not due; a created one is due 60 s after its creation.
    assert_eq!(
        store.backlog().await.expect("backlog").oldest_due_payment,
        None
    );
    let created = sample_payment(payment_id(9), project_id(1), "o9");
    inserted(store, &created).await;
    assert_eq!(
        store.backlog().await.expect("backlog").oldest_due_payment,
        created.due_at()
    );
    assert!(created.due_at().is_some());
}

/// Failed events are listed (oldest first, filtered by project, host and queueing time, each
/// with its last attempt) and counted until a resend answers them; a resend answers every
/// failed event of its payment once, writing its change with it; a second resend of the same
/// failures writes nothing.
pub async fn failed_events_and_resend<S: Store>(store: &S) {
    let (p1, p2) = (project_id(1), project_id(2));
    let e1 = queue_for(store, 1, p1, "https://a.example/cb", T0 + ms(100)).await;
    let e2 = queue_for(store, 2, p2, "https://B.example:8443/x", T0 + ms(200)).await;
    let e3 = queue_for(store, 3, p1, "https://b.example/y", T0 + ms(300)).await;
    let e4 = queue_for(store, 4, p1, "https://a.example/cb", T0 + ms(400)).await;
    let a1 = fail(store, &e1, "timeout").await;
    fail(store, &e2, "http status 500").await;
    fail(store, &e3, "connect: refused").await;
    deliver(store, &e4).await;
    assert_eq!(store.backlog().await.expect("backlog").failed_events, 3);

    let list = |f: FailedEventFilter, limit: usize| async move {
        store
            .failed_events(&f, limit)
            .await
            .expect("failed_events")
            .into_iter()
            .map(|e| e.outbox.event.event_id)
            .collect::<Vec<_>>()
    };
    let all = store
        .failed_events(&FailedEventFilter::default(), 10)
        .await
        .expect("failed_events");
    assert_eq!(
        all.iter()
            .map(|e| e.outbox.event.event_id)
            .collect::<Vec<_>>(),
        vec![event_id(1), event_id(2), event_id(3)],
        "delivered events are not failed; oldest first"
    );
    assert_eq!(all[0].last_attempt.as_ref(), Some(&a1));
    assert_eq!(all[0].outbox.state, DeliveryState::Failed);
    assert_eq!(list(FailedEventFilter::default(), 2).await.len(), 2);
    let by_project = FailedEventFilter {
        project: Some(p1),
        ..FailedEventFilter::default()
    };
    assert_eq!(list(by_project, 10).await, vec![event_id(1), event_id(3)]);
    let by_host = FailedEventFilter {
        host: Some("b.EXAMPLE".into()),
        ..FailedEventFilter::default()
    };
    assert_eq!(
        list(by_host, 10).await,
        vec![event_id(2), event_id(3)],
        "the host whatever its port and path, without regard to case"
    );
    let by_host = FailedEventFilter {
        host: Some("example".into()),
        ..FailedEventFilter::default()
    };
    assert!(
        list(by_host, 10).await.is_empty(),
        "a host is matched whole"
    );
    let by_time = FailedEventFilter {
        since: Some(T0 + ms(200)),
        until: Some(T0 + ms(300)),
        ..FailedEventFilter::default()
    };
    assert_eq!(list(by_time, 10).await, vec![event_id(2)]);

    // The resend of payment 1: a manual event, the payment unchanged.
    let p = store
        .payment(payment_id(1))
        .await
        .expect("read")
        .expect("stored");
    let mut resend = sample_event(&p, event_id(11), T0 + ms(1000));
    resend.event.kind = EventKind::ManualResend;
    resend.max_attempts = 1;
    let change = PaymentChange {
        history: None,
        ledger: None,
        payment: p.clone(),
        expected_version: p.version,
        event: Some(resend.clone()),
        audit: Some(sample_audit(T0 + ms(1000), "payment.resend_callback", "p1")),
    };
    assert_eq!(
        store.commit_resend(&change).await.expect("commit_resend"),
        vec![event_id(1)]
    );
    let recorded = events(store, payment_id(1)).await;
    assert_eq!(recorded.len(), 2, "the resend is stored");
    assert_eq!(recorded[1].outbox, resend);
    assert_eq!(store.backlog().await.expect("backlog").failed_events, 2);
    assert_eq!(
        list(FailedEventFilter::default(), 10).await,
        vec![event_id(2), event_id(3)]
    );
    let audits = store.find_audit_records(10).await.expect("audit").len();

    // Resent again (a second operator): nothing is written.
    let mut again = change.clone();
    let mut second = resend.clone();
    second.event.event_id = event_id(12);
    again.event = Some(second);
    assert_eq!(
        store.commit_resend(&again).await.expect("commit_resend"),
        Vec::new()
    );
    assert_eq!(events(store, payment_id(1)).await.len(), 2);
    assert_eq!(
        store.find_audit_records(10).await.expect("audit").len(),
        audits
    );

    // A resend whose change conflicts writes nothing, the failures stay unanswered.
    let p3 = store
        .payment(payment_id(3))
        .await
        .expect("read")
        .expect("stored");
    let mut stale = sample_event(&p3, event_id(13), T0);
    stale.event.kind = EventKind::ManualResend;
    let err = store
        .commit_resend(&PaymentChange {
            history: None,
            ledger: None,
            payment: p3.clone(),
            expected_version: p3.version + 5,
            event: Some(stale),
            audit: None,
        })
        .await;
    assert_eq!(err, Err(StoreError::Conflict));
    assert_eq!(store.backlog().await.expect("backlog").failed_events, 2);
    assert_eq!(events(store, payment_id(3)).await.len(), 1);
}

/// Retention removes only finished events queued before the cut-off (their attempts with
/// them), at most `limit` per call, oldest first; pending events stay whatever their age.
/// Audit records likewise by their time.
pub async fn retention_purges<S: Store>(store: &S) {
    let old_done = queue_for(store, 1, project_id(1), "https://a.example/cb", T0).await;
    let old_failed = queue_for(store, 2, project_id(1), "https://a.example/cb", T0 + ms(1)).await;
    let _old_pending = queue_for(store, 3, project_id(1), "https://a.example/cb", T0 + ms(2)).await;
    let new_done = queue_for(
        store,
        4,
        project_id(1),
        "https://a.example/cb",
        T0 + ms(100),
    )
    .await;
    deliver(store, &old_done).await;
    fail(store, &old_failed, "timeout").await;
    deliver(store, &new_done).await;
    let cut = T0 + ms(100);
    assert_eq!(
        store
            .purge(Retained::FinishedEvents, cut, 1)
            .await
            .expect("purge")
            .deleted,
        1
    );
    assert!(
        events(store, payment_id(1)).await.is_empty(),
        "oldest first"
    );
    assert_eq!(events(store, payment_id(2)).await.len(), 1);
    assert_eq!(
        store
            .purge(Retained::FinishedEvents, cut, 10)
            .await
            .expect("purge")
            .deleted,
        1
    );
    assert!(events(store, payment_id(2)).await.is_empty());
    assert_eq!(store.backlog().await.expect("backlog").failed_events, 0);
    assert_eq!(
        store
            .purge(Retained::FinishedEvents, cut, 10)
            .await
            .expect("purge")
            .deleted,
        0
    );
    assert_eq!(events(store, payment_id(3)).await.len(), 1, "pending stays");
    let kept = events(store, payment_id(4)).await;
    assert_eq!(kept.len(), 1, "queued at the cut-off: kept");
    assert_eq!(kept[0].attempts.len(), 1);
    assert_eq!(store.backlog().await.expect("backlog").pending_events, 1);

    for (i, at) in [0, 10, 20, 30].into_iter().enumerate() {
        store
            .insert_audit(&sample_audit(T0 + ms(at), "a", &format!("t{i}")))
            .await
            .expect("insert_audit");
    }
    assert_eq!(
        store
            .purge(Retained::Audit, T0 + ms(20), 1)
            .await
            .expect("purge")
            .deleted,
        1
    );
    assert_eq!(
        store
            .purge(Retained::Audit, T0 + ms(20), 10)
            .await
            .expect("purge")
            .deleted,
        1
    );
    let left: Vec<String> = store
        .find_audit_records(10)
        .await
        .expect("audit")
        .into_iter()
        .map(|r| r.target)
        .collect();
    assert_eq!(left, vec!["t3".to_string(), "t2".to_string()]);
}

fn operator_token(n: u128, name: &str, at: Timestamp) -> OperatorTokenRecord {
    let mut hash = [0u8; 32];
    hash[0] = u8::try_from(n).expect("small");
    OperatorTokenRecord {
        id: token_id(100 + n),
        name: name.to_string(),
        hash,
        prefix: format!("op_{n:06}"),
        created_at: at,
        expires_at: None,
    }
}

/// Operator tokens: stored and found by hash, listed in issue order, an id or hash is unique,
/// an expiry only moves earlier.
pub async fn operator_tokens<S: Store>(store: &S) {
    assert!(store.operator_tokens().await.expect("list").is_empty());
    let alice = operator_token(1, "alice", T0);
    let bob = operator_token(2, "bob", T0 + ms(5));
    store.insert_operator_token(&alice).await.expect("insert");
    store.insert_operator_token(&bob).await.expect("insert");
    let mut same_hash = operator_token(3, "carol", T0);
    same_hash.hash = alice.hash;
    assert!(matches!(
        store.insert_operator_token(&same_hash).await,
        Err(StoreError::Duplicate(_))
    ));
    let mut same_id = operator_token(4, "dave", T0);
    same_id.id = bob.id;
    assert!(matches!(
        store.insert_operator_token(&same_id).await,
        Err(StoreError::Duplicate(_))
    ));
    assert_eq!(
        store.operator_token_by_hash(&bob.hash).await.expect("read"),
        Some(bob.clone())
    );
    assert_eq!(
        store.operator_token_by_hash(&[9; 32]).await.expect("read"),
        None
    );
    assert!(store
        .expire_operator_token(alice.id, T0 + ms(1000))
        .await
        .expect("expire"));
    assert!(store
        .expire_operator_token(alice.id, T0 + ms(5000))
        .await
        .expect("expire"));
    assert!(store
        .expire_operator_token(bob.id, T0 + ms(7))
        .await
        .expect("expire"));
    assert!(!store
        .expire_operator_token(token_id(999), T0)
        .await
        .expect("expire"));
    let listed = store.operator_tokens().await.expect("list");
    assert_eq!(
        listed.iter().map(|t| t.name.as_str()).collect::<Vec<_>>(),
        vec!["alice", "bob"]
    );
    assert_eq!(
        listed[0].expires_at,
        Some(T0 + ms(1000)),
        "a later end never extends"
    );
    assert_eq!(listed[1].expires_at, Some(T0 + ms(7)));
    assert!(listed[0].is_valid_at(T0 + ms(999)));
    assert!(!listed[0].is_valid_at(T0 + ms(1000)));
}

/// A fresh store can write.
pub async fn writable<S: Store>(store: &S) {
    store.check_writable().await.expect("a fresh store writes");
}

/// Bulk resends of one payment's failed events from every handle at once (two operators, or
/// two nodes): exactly one commits a resend and answers both failures; the others write
/// nothing and answer an empty list.
pub async fn concurrent_resends<S: Store>(handles: &[&S]) {
    let store = handles[0];
    let e1 = queue_for(
        store,
        1,
        project_id(1),
        "https://a.example/cb",
        T0 + ms(100),
    )
    .await;
    fail(store, &e1, "timeout").await;
    let p = store
        .payment(payment_id(1))
        .await
        .expect("read")
        .expect("stored");
    let mut e2 = sample_event(&p, event_id(2), T0 + ms(200));
    e2.event.kind = EventKind::ManualResend;
    store
        .commit_change(&PaymentChange {
            history: None,
            ledger: None,
            payment: p.clone(),
            expected_version: p.version,
            event: Some(e2.clone()),
            audit: None,
        })
        .await
        .expect("commit_change");
    fail(store, &e2, "http status 500").await;
    assert_eq!(store.backlog().await.expect("backlog").failed_events, 2);

    let changes: Vec<PaymentChange> = (0..handles.len() as u128 * 4)
        .map(|i| {
            let mut resend = sample_event(&p, event_id(100 + i), T0 + ms(1000));
            resend.event.kind = EventKind::ManualResend;
            resend.max_attempts = 1;
            PaymentChange {
                history: None,
                ledger: None,
                payment: p.clone(),
                expected_version: p.version,
                event: Some(resend),
                audit: Some(sample_audit(T0 + ms(1000), "payment.resend_callback", "p1")),
            }
        })
        .collect();
    let answers = join_all(
        changes
            .iter()
            .zip(handles.iter().cycle())
            .map(|(c, h)| h.commit_resend(c)),
    )
    .await;
    let mut winners = 0;
    for answer in answers {
        let answered = answer.expect("commit_resend");
        if !answered.is_empty() {
            winners += 1;
            assert_eq!(
                answered,
                vec![event_id(1), event_id(2)],
                "both failures, in order"
            );
        }
    }
    assert_eq!(
        winners, 1,
        "one resend answers the failures; the others write nothing"
    );
    assert_eq!(store.backlog().await.expect("backlog").failed_events, 0);
    let events = store
        .events_for_payment(payment_id(1))
        .await
        .expect("events");
    assert_eq!(
        events.len(),
        3,
        "the two failures and one resend: {events:?}"
    );
    assert_eq!(
        store.find_audit_records(100).await.expect("audit").len(),
        1,
        "one resend's audit record"
    );
}
