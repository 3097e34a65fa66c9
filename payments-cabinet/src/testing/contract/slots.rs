//! The checks of [`CabinetSlots`](crate::store::CabinetSlots): one-time slots, their bounds and
//! concurrent takes.

use futures_util::future::join_all;
use payments_core::ids::SessionId;
use payments_core::store::StoreError;
use payments_core::testing::contract::{ms, T0};
use payments_core::Timestamp;

use super::sample::{hash, session_id};
use crate::store::{CabinetStore, SlotRecord};

fn sample_slot(n: u8, owner: Option<SessionId>, expires: Timestamp) -> SlotRecord {
    SlotRecord {
        id_hash: hash(n),
        owner,
        payload: format!("v1.k.sealed-payload-{n}").into(),
        created_at: T0 + ms(i64::from(n)),
        expires_at: expires,
    }
}

/// A one-time slot is taken once, by its owner only (another session, or none, neither gets
/// it nor spoils it), only before its expiry; an anonymous slot (no owner) is taken only
/// without a session; expired slots are purged and live ones kept. Every field round-trips.
pub async fn cabinet_slots<S: CabinetStore>(store: &S) {
    let (a, b) = (Some(session_id(1)), Some(session_id(2)));
    let s1 = sample_slot(1, a, T0 + ms(1000));
    let s2 = sample_slot(2, None, T0 + ms(1000));
    let s3 = sample_slot(3, a, T0 + ms(100));
    for s in [&s1, &s2, &s3] {
        store.insert_slot(s, 16).await.expect("insert_slot");
    }
    assert!(
        matches!(
            store.insert_slot(&s1, 16).await,
            Err(StoreError::Duplicate(_))
        ),
        "an id is one slot's"
    );
    assert_eq!(
        store.take_slot(&s1.id_hash, b, T0).await.expect("take"),
        None,
        "another session's slot is refused"
    );
    assert_eq!(
        store.take_slot(&s1.id_hash, None, T0).await.expect("take"),
        None,
        "a session's slot is refused without a session"
    );
    assert_eq!(
        store.take_slot(&s1.id_hash, a, T0).await.expect("take"),
        Some(s1.clone()),
        "the owner takes it, untouched by the refused takes"
    );
    assert_eq!(
        store.take_slot(&s1.id_hash, a, T0).await.expect("take"),
        None,
        "taken once"
    );
    assert_eq!(
        store.take_slot(&s2.id_hash, a, T0).await.expect("take"),
        None,
        "an anonymous slot is not a session's"
    );
    assert_eq!(
        store.take_slot(&s2.id_hash, None, T0).await.expect("take"),
        Some(s2.clone())
    );
    assert_eq!(
        store.take_slot(&hash(99), a, T0).await.expect("take"),
        None,
        "no such slot"
    );
    assert_eq!(
        store
            .take_slot(&s3.id_hash, a, T0 + ms(100))
            .await
            .expect("take"),
        None,
        "expired at its expiry"
    );
    let s4 = sample_slot(4, b, T0 + ms(101));
    store.insert_slot(&s4, 16).await.expect("insert_slot");
    assert_eq!(
        store
            .delete_expired_slots(T0 + ms(100), 1000)
            .await
            .expect("purge"),
        1,
        "the expired slot only"
    );
    assert_eq!(
        store.take_slot(&s3.id_hash, a, T0).await.expect("take"),
        None,
        "purged"
    );
    assert_eq!(
        store
            .take_slot(&s4.id_hash, b, T0 + ms(100))
            .await
            .expect("take"),
        Some(s4),
        "a live slot outlives the purge"
    );
    assert_eq!(
        store
            .delete_expired_slots(T0 + ms(5000), 1000)
            .await
            .expect("purge"),
        0
    );
}

/// An owner keeps its newest `keep` slots (a new one deletes its oldest beyond them, never
/// another owner's), and the purge keeps at most `keep` slots in all, those that expire last.
pub async fn cabinet_slot_bounds<S: CabinetStore>(store: &S) {
    let (a, b) = (Some(session_id(1)), Some(session_id(2)));
    let theirs = sample_slot(50, b, T0 + ms(10_000));
    store.insert_slot(&theirs, 3).await.expect("insert_slot");
    let mine: Vec<SlotRecord> = (1..=5)
        .map(|n| sample_slot(n, a, T0 + ms(1000 + i64::from(n))))
        .collect();
    for s in &mine {
        store.insert_slot(s, 3).await.expect("insert_slot");
    }
    for s in &mine[..2] {
        assert_eq!(
            store.take_slot(&s.id_hash, a, T0).await.expect("take"),
            None,
            "an owner's oldest beyond 3 are gone"
        );
    }
    assert_eq!(
        store
            .take_slot(&mine[2].id_hash, a, T0)
            .await
            .expect("take"),
        Some(mine[2].clone()),
        "its newest 3 are kept"
    );
    // Left: mine[3], mine[4] and theirs (which expires last). Keep 2: mine[3] goes.
    assert_eq!(store.delete_expired_slots(T0, 2).await.expect("purge"), 1);
    assert_eq!(
        store
            .take_slot(&mine[3].id_hash, a, T0)
            .await
            .expect("take"),
        None,
        "the first to expire goes first"
    );
    assert_eq!(
        store.take_slot(&theirs.id_hash, b, T0).await.expect("take"),
        Some(theirs),
        "another owner's slot outlives both bounds"
    );
    assert_eq!(
        store
            .take_slot(&mine[4].id_hash, a, T0)
            .await
            .expect("take"),
        Some(mine[4].clone())
    );
}

/// Of many concurrent takes of one slot by its owner, exactly one gets it.
pub async fn cabinet_concurrent_slot_takes<S: CabinetStore>(store: &S) {
    let owner = Some(session_id(1));
    let slot = sample_slot(1, owner, T0 + ms(1000));
    store.insert_slot(&slot, 16).await.expect("insert_slot");
    let results = join_all((0..16).map(|_| store.take_slot(&slot.id_hash, owner, T0))).await;
    let taken: Vec<SlotRecord> = results
        .into_iter()
        .filter_map(|r| r.expect("take"))
        .collect();
    assert_eq!(taken, vec![slot], "one slot, one reader");
}
