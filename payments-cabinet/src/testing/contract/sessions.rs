//! The checks of [`CabinetSessions`](crate::store::CabinetSessions): sessions and the sign-in
//! step (a TOTP step used once, also under concurrency; enrolment).

use futures_util::future::join_all;
use payments_core::store::StoreError;
use payments_core::testing::contract::{ms, T0};

use super::sample::{hash, sample_session, sample_user, session_id, step_used, user_id};
use crate::store::{
    CabinetStore, CabinetStoreExt, Role, SessionProof, SessionRecord, SessionStage,
};

/// Sessions are found by token hash, touched forward only, listed per user oldest first,
/// deleted one by one or per user (keeping one) and purged by idle and absolute time.
pub async fn cabinet_sessions<S: CabinetStore>(store: &S) {
    let u = user_id(1);
    let s1 = sample_session(1, u, SessionStage::Full, T0);
    let mut s2 = sample_session(2, u, SessionStage::Password, T0 + ms(10));
    s2.address = None;
    s2.user_agent = None;
    let s3 = sample_session(3, user_id(2), SessionStage::Full, T0 + ms(20));
    for s in [&s1, &s2, &s3] {
        store.insert_session(s).await.expect("insert_session");
    }
    assert!(matches!(
        store.insert_session(&s1).await,
        Err(StoreError::Duplicate(_))
    ));
    assert_eq!(
        store
            .session_by_token(&s2.token_hash)
            .await
            .expect("by token"),
        Some(s2.clone())
    );
    assert_eq!(
        store.session_by_token(&hash(99)).await.expect("by token"),
        None
    );
    assert!(store
        .update_session_seen(s1.id, T0 + ms(500))
        .await
        .expect("touch"));
    assert!(store
        .update_session_seen(s1.id, T0 + ms(100))
        .await
        .expect("touch"));
    let seen = store
        .session_by_token(&s1.token_hash)
        .await
        .expect("by token")
        .expect("there");
    assert_eq!(seen.last_seen_at, T0 + ms(500), "never backwards");
    assert!(!store
        .update_session_seen(session_id(99), T0)
        .await
        .expect("touch"));
    let ids = |v: Vec<SessionRecord>| v.into_iter().map(|s| s.id).collect::<Vec<_>>();
    assert_eq!(
        ids(store.user_sessions(u).await.expect("sessions")),
        vec![s1.id, s2.id]
    );
    assert_eq!(
        store
            .delete_user_sessions(u, Some(s2.id))
            .await
            .expect("delete"),
        1
    );
    assert_eq!(
        ids(store.user_sessions(u).await.expect("sessions")),
        vec![s2.id]
    );
    assert!(store.delete_session(s2.id).await.expect("delete"));
    assert!(!store.delete_session(s2.id).await.expect("delete"));
    assert!(store.user_sessions(u).await.expect("sessions").is_empty());

    // Purge: idle since before T0+30 or signed in before T0+15.
    let mut idle = sample_session(4, u, SessionStage::Full, T0 + ms(20));
    idle.last_seen_at = T0 + ms(25);
    let mut old = sample_session(5, u, SessionStage::Full, T0 + ms(40));
    old.signed_in_at = T0 + ms(10);
    let fresh = sample_session(6, u, SessionStage::Full, T0 + ms(40));
    for s in [&idle, &old, &fresh] {
        store.insert_session(s).await.expect("insert_session");
    }
    // s3 (seen at T0+20) is idle too.
    assert_eq!(
        store
            .purge_sessions(T0 + ms(30), T0 + ms(15))
            .await
            .expect("purge"),
        3
    );
    assert_eq!(
        ids(store.user_sessions(u).await.expect("sessions")),
        vec![fresh.id]
    );
}

/// A TOTP step moves the user's last step forward only: the same or an earlier step is
/// refused and writes nothing (the old session stays, the new one is not stored).
pub async fn cabinet_totp_steps<S: CabinetStore>(store: &S) {
    let u = sample_user(1, "a@shop.example", Role::Support);
    store.insert_user(&u).await.expect("insert_user");
    let half = sample_session(1, u.id, SessionStage::Password, T0);
    store.insert_session(&half).await.expect("insert");
    let full = sample_session(2, u.id, SessionStage::Full, T0 + ms(1));
    assert!(store
        .advance_session(&half.token_hash, &full, &SessionProof::TotpStep(1000))
        .await
        .expect("advance"));
    step_used(store, u.id, 1000, 40).await;
    assert_eq!(
        store
            .session_by_token(&half.token_hash)
            .await
            .expect("by token"),
        None,
        "the old id is gone"
    );
    assert_eq!(
        store
            .session_by_token(&full.token_hash)
            .await
            .expect("by token"),
        Some(full.clone())
    );

    for (n, step) in [(3u128, 1000u64), (4, 999)] {
        let half = sample_session(n, u.id, SessionStage::Password, T0);
        store.insert_session(&half).await.expect("insert");
        let next = sample_session(n + 10, u.id, SessionStage::Full, T0);
        assert!(
            !store
                .advance_session(&half.token_hash, &next, &SessionProof::TotpStep(step))
                .await
                .expect("advance"),
            "step {step} after 1000 is refused"
        );
        assert_eq!(
            store
                .session_by_token(&half.token_hash)
                .await
                .expect("by token"),
            Some(half.clone()),
            "a refused step writes nothing"
        );
        assert_eq!(
            store
                .session_by_token(&next.token_hash)
                .await
                .expect("by token"),
            None
        );
    }
    step_used(store, u.id, 1000, 42).await;
    let half = sample_session(5, u.id, SessionStage::Password, T0);
    store.insert_session(&half).await.expect("insert");
    assert!(store
        .advance_session(
            &half.token_hash,
            &sample_session(6, u.id, SessionStage::Full, T0),
            &SessionProof::TotpStep(1001)
        )
        .await
        .expect("advance"));
    step_used(store, u.id, 1001, 44).await;

    // No such old session; another user's session.
    assert!(!store
        .advance_session(
            &hash(77),
            &sample_session(7, u.id, SessionStage::Full, T0),
            &SessionProof::None
        )
        .await
        .expect("advance"));
    let other = sample_session(8, user_id(2), SessionStage::Password, T0);
    store.insert_session(&other).await.expect("insert");
    assert!(!store
        .advance_session(
            &other.token_hash,
            &sample_session(9, u.id, SessionStage::Full, T0),
            &SessionProof::None
        )
        .await
        .expect("advance"));
    // Without a proof the session is renewed.
    let renewed = sample_session(20, user_id(2), SessionStage::Full, T0);
    assert!(store
        .advance_session(&other.token_hash, &renewed, &SessionProof::None)
        .await
        .expect("advance"));
}

/// Of many concurrent sign-in steps with the same TOTP step (each from its own half session),
/// exactly one is accepted.
pub async fn cabinet_concurrent_steps<S: CabinetStore>(store: &S) {
    let u = sample_user(1, "a@shop.example", Role::Support);
    store.insert_user(&u).await.expect("insert_user");
    let halves: Vec<SessionRecord> = (1..=16)
        .map(|n| sample_session(n, u.id, SessionStage::Password, T0))
        .collect();
    for h in &halves {
        store.insert_session(h).await.expect("insert");
    }
    let fulls: Vec<SessionRecord> = (1..=16)
        .map(|n| sample_session(n + 100, u.id, SessionStage::Full, T0))
        .collect();
    let proof = SessionProof::TotpStep(5);
    let results = join_all(
        halves
            .iter()
            .zip(&fulls)
            .map(|(h, f)| store.advance_session(&h.token_hash, f, &proof)),
    )
    .await;
    let accepted = results
        .into_iter()
        .map(|r| r.expect("advance"))
        .filter(|ok| *ok)
        .count();
    assert_eq!(accepted, 1, "one code, one sign-in");
}

/// An enrolment confirms the user's key once, with its step and recovery codes; it is
/// refused for a user without a key or with a confirmed one.
pub async fn cabinet_enrolment<S: CabinetStore>(store: &S) {
    let mut u = sample_user(1, "a@shop.example", Role::Support);
    store.insert_user(&u).await.expect("insert_user");
    let h1 = sample_session(1, u.id, SessionStage::Password, T0);
    store.insert_session(&h1).await.expect("insert");
    let proof = SessionProof::Enrolment {
        step: 77,
        recovery_codes: vec![hash(1), hash(2), hash(3)],
        at: T0 + ms(9),
    };
    assert!(
        !store
            .advance_session(
                &h1.token_hash,
                &sample_session(2, u.id, SessionStage::Full, T0),
                &proof
            )
            .await
            .expect("advance"),
        "no key to confirm"
    );
    u.totp_secret = Some("sealed-key".into());
    store.update_user(&u).await.expect("update");
    assert!(store
        .advance_session(
            &h1.token_hash,
            &sample_session(2, u.id, SessionStage::Full, T0),
            &proof
        )
        .await
        .expect("advance"));
    let after = store.user(u.id).await.expect("user").expect("there");
    assert_eq!(after.totp_confirmed_at, Some(T0 + ms(9)));
    assert_eq!(after.totp_secret, u.totp_secret);
    step_used(store, u.id, 77, 90).await;
    assert_eq!(store.count_recovery_codes(u.id).await.expect("left"), 3);
    let h3 = sample_session(3, u.id, SessionStage::Password, T0);
    store.insert_session(&h3).await.expect("insert");
    assert!(
        !store
            .advance_session(
                &h3.token_hash,
                &sample_session(4, u.id, SessionStage::Full, T0),
                &proof
            )
            .await
            .expect("advance"),
        "confirmed once"
    );
}
