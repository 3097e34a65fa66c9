//! Checks of the callback outbox.

use super::*;

pub(super) async fn queue_event<S: Store>(store: &S, n: u128, due: Timestamp) -> OutboxEvent {
    let p = sample_payment(payment_id(n), project_id(1), &format!("o{n}"));
    inserted(store, &p).await;
    let v2 = changed(&p, PaymentStatus::Processing, T0);
    let ev = sample_event(&v2, event_id(n), due);
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

/// Claims take due pending events earliest first, up to `limit`, and lease them: a claimed
/// event is not claimed again until `now + lease`.
pub async fn outbox_claim_and_lease<S: Store>(store: &S) {
    let lease = Duration::from_secs(30);
    let e3 = queue_event(store, 3, T0 + ms(300)).await;
    let e1 = queue_event(store, 1, T0 + ms(100)).await;
    let e2 = queue_event(store, 2, T0 + ms(200)).await;
    let _later = queue_event(store, 4, T0 + ms(100_000)).await;
    let ids = |v: &[ClaimedEvent]| v.iter().map(|e| e.event.event.event_id).collect::<Vec<_>>();

    assert!(store
        .claim_due_events(T0, 10, lease)
        .await
        .expect("claim")
        .is_empty());
    let now = T0 + ms(1000);
    let first = store.claim_due_events(now, 2, lease).await.expect("claim");
    assert_eq!(ids(&first), vec![event_id(1), event_id(2)]);
    assert_eq!(
        first[0].event, e1,
        "the claimed event is returned as it was"
    );
    assert_eq!(first[1].event, e2);

    let second = store.claim_due_events(now, 10, lease).await.expect("claim");
    assert_eq!(ids(&second), vec![event_id(3)], "leased events are skipped");
    assert_eq!(second[0].event, e3);
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
    assert_eq!(after[0].event.next_attempt_at, Some(now + lease));
    assert!(
        after[1].lease > first[0].lease && after[2].lease > first[1].lease,
        "a new claim has a larger lease token"
    );
    assert_eq!(store.backlog().await.expect("backlog").pending_events, 4);
}

/// A claim that skips projects neither returns nor leases their events: they stay due, in
/// their place, for the next claim that does not skip them.
pub async fn outbox_claim_skipping_projects<S: Store>(store: &S) {
    let lease = Duration::from_secs(30);
    // Project 1's events are due first; project 2's after them.
    queue_event(store, 1, T0 + ms(100)).await;
    queue_event(store, 2, T0 + ms(200)).await;
    let p = sample_payment(payment_id(3), project_id(2), "o3");
    inserted(store, &p).await;
    let v2 = changed(&p, PaymentStatus::Processing, T0);
    store
        .commit_change(&PaymentChange {
            history: None,
            ledger: None,
            payment: v2.clone(),
            expected_version: 1,
            event: Some(sample_event(&v2, event_id(3), T0 + ms(300))),
            audit: None,
        })
        .await
        .expect("commit_change");
    let ids = |v: &[ClaimedEvent]| v.iter().map(|e| e.event.event.event_id).collect::<Vec<_>>();
    let now = T0 + ms(1000);

    let others = store
        .claim_due_events_except(now, 10, lease, &[project_id(1)])
        .await
        .expect("claim");
    assert_eq!(
        ids(&others),
        vec![event_id(3)],
        "project 1's events are skipped"
    );
    let none = store
        .claim_due_events_except(now, 10, lease, &[project_id(1), project_id(2)])
        .await
        .expect("claim");
    assert!(none.is_empty(), "{:?}", ids(&none));
    // Project 1's events were not leased: the next claim takes them, still first.
    let rest = store.claim_due_events(now, 10, lease).await.expect("claim");
    assert_eq!(ids(&rest), vec![event_id(1), event_id(2)]);
    assert_eq!(
        rest[0].event.next_attempt_at,
        Some(T0 + ms(100)),
        "still due when it was"
    );
}

/// `record_attempt` keeps an event pending (rescheduled), or ends it delivered or failed;
/// attempts are listed in order; finished events are never claimed.
pub async fn outbox_attempts<S: Store>(store: &S) {
    let lease = Duration::from_secs(30);
    let delivered = queue_event(store, 1, T0).await;
    let failed = queue_event(store, 2, T0).await;
    assert_eq!(store.backlog().await.expect("backlog").pending_events, 2);
    let claimed = store.claim_due_events(T0, 10, lease).await.expect("claim");
    assert_eq!(claimed.len(), 2);
    let lease_of = |id: EventId| {
        claimed
            .iter()
            .find(|c| c.event.event.event_id == id)
            .expect("both events are claimed")
            .lease
    };
    let (d_lease, f_lease) = (
        lease_of(delivered.event.event_id),
        lease_of(failed.event.event_id),
    );
    let applied = Ok(AttemptRecorded::Applied);

    let a1 = attempt(1, false, Some(500), Some("status 500"));
    let retry_at = T0 + ms(30_000);
    assert_eq!(
        store
            .record_attempt(delivered.event.event_id, d_lease, &a1, Some(retry_at))
            .await,
        applied
    );
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
    assert_eq!(
        store
            .record_attempt(delivered.event.event_id, d_lease, &a2, None)
            .await,
        applied
    );
    let rec = events(store, payment_id(1)).await;
    assert_eq!(rec[0].outbox.state, DeliveryState::Delivered);
    assert_eq!(rec[0].outbox.attempts, 2);
    assert_eq!(rec[0].outbox.next_attempt_at, None);
    assert_eq!(rec[0].attempts, vec![a1, a2]);

    let b1 = attempt(1, false, None, Some("timeout"));
    let b2 = attempt(3, false, Some(302), Some("redirect not followed"));
    assert_eq!(
        store
            .record_attempt(failed.event.event_id, f_lease, &b1, Some(T0 + ms(1)))
            .await,
        applied
    );
    assert_eq!(
        store
            .record_attempt(failed.event.event_id, f_lease, &b2, None)
            .await,
        applied
    );
    let rec = events(store, payment_id(2)).await;
    assert_eq!(rec[0].outbox.state, DeliveryState::Failed);
    assert_eq!(rec[0].outbox.attempts, 3);
    assert_eq!(rec[0].outbox.next_attempt_at, None);
    assert_eq!(rec[0].attempts, vec![b1, b2]);

    assert_eq!(store.backlog().await.expect("backlog").pending_events, 0);
    assert!(store
        .claim_due_events(T0 + ms(10_000_000), 10, lease)
        .await
        .expect("claim")
        .is_empty());
    let err = store
        .record_attempt(
            event_id(99),
            d_lease,
            &attempt(1, true, Some(200), None),
            None,
        )
        .await;
    assert!(
        matches!(err, Err(StoreError::NotFound(_))),
        "unknown event: {err:?}"
    );
    assert!(events(store, payment_id(99)).await.is_empty());
}

/// Claims from several handles at once never hand one event to two of them: every due event
/// is claimed exactly once while its lease runs.
pub async fn concurrent_claims<S: Store>(handles: &[&S]) {
    let lease = Duration::from_secs(30);
    let total: u128 = 60;
    for n in 1..=total {
        queue_event(handles[0], n, T0).await;
    }
    let now = T0 + ms(1000);
    let mut seen = std::collections::HashSet::new();
    loop {
        // Four claimers per handle, all in flight together, each taking a few events.
        let rounds = join_all(
            handles
                .iter()
                .cycle()
                .take(handles.len() * 4)
                .map(|h| h.claim_due_events(now, 5, lease)),
        )
        .await;
        let mut claimed = 0;
        for round in rounds {
            for c in round.expect("claim_due_events") {
                claimed += 1;
                assert!(
                    seen.insert(c.event.event.event_id),
                    "event {} was handed to two claimers",
                    c.event.event.event_id
                );
            }
        }
        if claimed == 0 {
            break;
        }
    }
    assert_eq!(seen.len() as u128, total, "every due event is claimed once");
    for h in handles {
        assert!(h
            .claim_due_events(now + lease - ms(1), 100, lease)
            .await
            .expect("claim")
            .is_empty());
    }
}

/// A holder whose lease ran out and whose event was claimed again records its attempt, but
/// changes neither the event's state, nor its schedule, nor its attempt count: those are the
/// newer holder's.
pub async fn stale_lease_token<S: Store>(handles: &[&S]) {
    let lease = Duration::from_secs(30);
    let (first, second, third) = (
        handles[0],
        handles[1 % handles.len()],
        handles[2 % handles.len()],
    );
    let ev = queue_event(first, 1, T0).await;
    let id = ev.event.event_id;
    let old = first.claim_due_events(T0, 10, lease).await.expect("claim");
    assert_eq!(old.len(), 1);
    // The lease ends with the attempt still in flight; another handle claims the event.
    let new = second
        .claim_due_events(T0 + lease, 10, lease)
        .await
        .expect("claim");
    assert_eq!(new.len(), 1, "the event is claimable once its lease ended");
    assert!(new[0].lease > old[0].lease);

    let late_success = attempt(1, true, Some(200), None);
    assert_eq!(
        first
            .record_attempt(id, old[0].lease, &late_success, None)
            .await,
        Ok(AttemptRecorded::Stale)
    );
    let rec = events(third, payment_id(1)).await;
    assert_eq!(
        rec[0].attempts,
        vec![late_success.clone()],
        "the attempt is kept"
    );
    assert_eq!(
        rec[0].outbox.state,
        DeliveryState::Pending,
        "a stale record ends nothing"
    );
    assert_eq!(rec[0].outbox.attempts, 0);
    assert_eq!(rec[0].outbox.next_attempt_at, Some(T0 + lease + lease));
    assert!(
        third
            .claim_due_events(T0 + lease + lease - ms(1), 10, lease)
            .await
            .expect("claim")
            .is_empty(),
        "the newer lease still holds"
    );

    let failure = attempt(1, false, Some(500), Some("http status 500"));
    let retry_at = T0 + ms(200_000);
    assert_eq!(
        second
            .record_attempt(id, new[0].lease, &failure, Some(retry_at))
            .await,
        Ok(AttemptRecorded::Applied)
    );
    // The old holder again (a second late record) still changes nothing.
    let late_failure = attempt(1, false, None, Some("timeout"));
    assert_eq!(
        third
            .record_attempt(id, old[0].lease, &late_failure, None)
            .await,
        Ok(AttemptRecorded::Stale)
    );
    let rec = events(first, payment_id(1)).await;
    assert_eq!(rec[0].outbox.state, DeliveryState::Pending);
    assert_eq!(rec[0].outbox.attempts, 1);
    assert_eq!(rec[0].outbox.next_attempt_at, Some(retry_at));
    assert_eq!(rec[0].attempts, vec![late_success, failure, late_failure]);
    assert_eq!(first.backlog().await.expect("backlog").pending_events, 1);
}
