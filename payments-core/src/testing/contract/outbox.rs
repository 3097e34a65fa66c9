//! Checks of the callback outbox.

use super::*;

pub(super) async fn queue_event<S: Store>(store: &S, n: u128, due: Timestamp) -> OutboxEvent {
    let p = sample_payment(payment_id(n), project_id(1), &format!("o{n}"));
    inserted(store, &p).await;
    let v2 = changed(&p, PaymentStatus::Processing, T0);
    let ev = sample_event(&v2, event_id(n), due);
    store
        .commit_change(&PaymentChange {
            payment: v2,
            expected_version: 1,
            event: Some(ev.clone()),
            audit: None,
        })
        .await
        .expect("commit_change");
    ev
}

/// Claims take due pending events earliest first, up to `limit`, and lease them: a claimed
/// event is not claimed again until `now + lease`.
pub async fn outbox_claim_and_lease<S: Store>(store: &S) {
    let lease = Duration::from_secs(30);
    let e3 = queue_event(store, 3, T0 + ms(300)).await;
    let e1 = queue_event(store, 1, T0 + ms(100)).await;
    let e2 = queue_event(store, 2, T0 + ms(200)).await;
    let _later = queue_event(store, 4, T0 + ms(100_000)).await;
    let ids = |v: &[OutboxEvent]| v.iter().map(|e| e.event.event_id).collect::<Vec<_>>();

    assert!(store
        .claim_due_events(T0, 10, lease)
        .await
        .expect("claim")
        .is_empty());
    let now = T0 + ms(1000);
    let first = store.claim_due_events(now, 2, lease).await.expect("claim");
    assert_eq!(ids(&first), vec![event_id(1), event_id(2)]);
    assert_eq!(first[0], e1, "the claimed event is returned as it was");
    assert_eq!(first[1], e2);

    let second = store.claim_due_events(now, 10, lease).await.expect("claim");
    assert_eq!(ids(&second), vec![event_id(3)], "leased events are skipped");
    assert_eq!(second[0], e3);
    assert!(store
        .claim_due_events(now + lease - ms(1), 10, lease)
        .await
        .expect("claim")
        .is_empty());

    // The lease moved next_attempt_at; it is visible in the event records.
    let rec = events(store, payment_id(1)).await;
    assert_eq!(rec[0].outbox.next_attempt_at, Some(now + lease));
    assert_eq!(rec[0].outbox.state, DeliveryState::Pending);

    let after = store
        .claim_due_events(now + lease, 10, lease)
        .await
        .expect("claim");
    assert_eq!(
        ids(&after),
        vec![event_id(3), event_id(1), event_id(2)],
        "claimable again when the lease ends; equal times go in queueing order"
    );
    assert_eq!(after[0].next_attempt_at, Some(now + lease));
    assert_eq!(store.pending_events().await.expect("pending"), 4);
}

/// `record_attempt` keeps an event pending (rescheduled), or ends it delivered or failed;
/// attempts are listed in order; finished events are never claimed.
pub async fn outbox_attempts<S: Store>(store: &S) {
    let lease = Duration::from_secs(30);
    let delivered = queue_event(store, 1, T0).await;
    let failed = queue_event(store, 2, T0).await;
    assert_eq!(store.pending_events().await.expect("pending"), 2);
    let claimed = store.claim_due_events(T0, 10, lease).await.expect("claim");
    assert_eq!(claimed.len(), 2);

    let a1 = attempt(1, false, Some(500), Some("status 500"));
    let retry_at = T0 + ms(30_000);
    store
        .record_attempt(delivered.event.event_id, &a1, Some(retry_at))
        .await
        .expect("record_attempt");
    let rec = events(store, payment_id(1)).await;
    assert_eq!(rec.len(), 1);
    assert_eq!(rec[0].outbox.state, DeliveryState::Pending);
    assert_eq!(rec[0].outbox.attempts, 1);
    assert_eq!(rec[0].outbox.next_attempt_at, Some(retry_at));
    assert_eq!(rec[0].attempts, vec![a1.clone()]);
    assert_eq!(
        rec[0].outbox.event, delivered.event,
        "the body never changes"
    );

    let a2 = attempt(2, true, Some(204), None);
    store
        .record_attempt(delivered.event.event_id, &a2, None)
        .await
        .expect("record_attempt");
    let rec = events(store, payment_id(1)).await;
    assert_eq!(rec[0].outbox.state, DeliveryState::Delivered);
    assert_eq!(rec[0].outbox.attempts, 2);
    assert_eq!(rec[0].outbox.next_attempt_at, None);
    assert_eq!(rec[0].attempts, vec![a1, a2]);

    let b1 = attempt(1, false, None, Some("timeout"));
    let b2 = attempt(3, false, Some(302), Some("redirect not followed"));
    store
        .record_attempt(failed.event.event_id, &b1, Some(T0 + ms(1)))
        .await
        .expect("record_attempt");
    store
        .record_attempt(failed.event.event_id, &b2, None)
        .await
        .expect("record_attempt");
    let rec = events(store, payment_id(2)).await;
    assert_eq!(rec[0].outbox.state, DeliveryState::Failed);
    assert_eq!(rec[0].outbox.attempts, 3);
    assert_eq!(rec[0].outbox.next_attempt_at, None);
    assert_eq!(rec[0].attempts, vec![b1, b2]);

    assert_eq!(store.pending_events().await.expect("pending"), 0);
    assert!(store
        .claim_due_events(T0 + ms(10_000_000), 10, lease)
        .await
        .expect("claim")
        .is_empty());
    let err = store
        .record_attempt(event_id(99), &attempt(1, true, Some(200), None), None)
        .await;
    assert!(
        matches!(err, Err(StoreError::NotFound(_))),
        "unknown event: {err:?}"
    );
    assert!(events(store, payment_id(99)).await.is_empty());
}
