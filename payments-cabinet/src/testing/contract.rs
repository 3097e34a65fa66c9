//! The cabinet store's contract: the documented meaning of every method of [`CabinetStore`],
//! as async checks any store runs against itself (users, sessions and the sign-in step that
//! uses a TOTP step or a recovery code once, enrolment, invitations, one-time slots, sign-in
//! failures, the cabinet's audit log). [`MemoryCabinetStore`](super::MemoryCabinetStore) is the reference;
//! the SQLite and PostgreSQL stores run the same checks. What the cabinet reads through the
//! core's port (token use, the listings, payer page links) is checked by the core's suite
//! (`payments_core::testing::contract`).
//!
//! [`every_statement`] is the cabinet's part of an upgrade test: beside
//! `payments_core::testing::contract::every_statement`, on the same store.

use std::future::Future;

use futures_util::future::join_all;
use payments_core::ids::{MerchantId, ProjectId, SessionId, UserId};
use payments_core::store::StoreError;
use payments_core::testing::contract::{merchant_id, ms, project_id, Check, T0};
use payments_core::Timestamp;
use uuid::Uuid;

use crate::store::{
    AuditQuery, CabinetAuditRecord, CabinetStore, CabinetStoreExt, InviteRecord, Role,
    SessionProof, SessionRecord, SessionStage, SlotRecord, UserRecord,
};

/// Every check of the suite with its name, in a stable order.
pub fn cabinet_checks<S: CabinetStore>() -> Vec<Check<S>> {
    vec![
        ("cabinet_users", |s| Box::pin(cabinet_users(s))),
        ("cabinet_sessions", |s| Box::pin(cabinet_sessions(s))),
        ("cabinet_totp_steps", |s| Box::pin(cabinet_totp_steps(s))),
        ("cabinet_concurrent_steps", |s| {
            Box::pin(cabinet_concurrent_steps(s))
        }),
        ("cabinet_recovery_codes", |s| {
            Box::pin(cabinet_recovery_codes(s))
        }),
        ("cabinet_enrolment", |s| Box::pin(cabinet_enrolment(s))),
        ("cabinet_invites", |s| Box::pin(cabinet_invites(s))),
        ("cabinet_slots", |s| Box::pin(cabinet_slots(s))),
        ("cabinet_slot_bounds", |s| Box::pin(cabinet_slot_bounds(s))),
        ("cabinet_concurrent_slot_takes", |s| {
            Box::pin(cabinet_concurrent_slot_takes(s))
        }),
        ("cabinet_failures", |s| Box::pin(cabinet_failures(s))),
        ("cabinet_audit_log", |s| Box::pin(cabinet_audit_log(s))),
    ]
}

/// Runs every check, each against a fresh store from `make`.
pub async fn run_cabinet<S: CabinetStore + 'static>(make: impl Fn() -> S) {
    run_cabinet_async(|| std::future::ready(make())).await;
}

/// [`run_cabinet`] for stores whose setup awaits.
pub async fn run_cabinet_async<S, F, Fut>(make: F)
where
    S: CabinetStore + 'static,
    F: Fn() -> Fut,
    Fut: Future<Output = S>,
{
    for (name, check) in cabinet_checks::<S>() {
        let store = make().await;
        println!("cabinet store contract: {name}");
        check(&store).await;
    }
}

fn user_id(n: u128) -> UserId {
    UserId::from_uuid(Uuid::from_u128(0x6000_0000 + n))
}

fn session_id(n: u128) -> SessionId {
    SessionId::from_uuid(Uuid::from_u128(0x7000_0000 + n))
}

fn sample_user(n: u128, email: &str, role: Role) -> UserRecord {
    UserRecord {
        id: user_id(n),
        email: email.to_string(),
        role,
        password_hash: None,
        totp_secret: None,
        totp_confirmed_at: None,
        disabled: false,
        created_at: T0 + ms(i64::try_from(n).expect("small")),
    }
}

fn hash(n: u8) -> [u8; 32] {
    let mut h = [n; 32];
    h[0] = 0xab;
    h
}

fn sample_session(n: u128, user: UserId, stage: SessionStage, at: Timestamp) -> SessionRecord {
    SessionRecord {
        id: session_id(n),
        token_hash: hash(u8::try_from(n).expect("small")),
        user_id: user,
        stage,
        created_at: at,
        signed_in_at: at,
        last_seen_at: at,
        address: Some("203.0.113.7".to_string()),
        user_agent: Some("Mozilla/5.0 (X11; Linux x86_64) \"quoted\"".to_string()),
    }
}

/// The user's last TOTP step is at least `step`: a sign-in with it is refused and writes
/// nothing (sessions `n` and `n + 1` are used for the try and removed after).
async fn step_used<S: CabinetStore>(store: &S, user: UserId, step: u64, n: u128) {
    let half = sample_session(n, user, SessionStage::Password, T0);
    store.insert_session(&half).await.expect("insert");
    let next = sample_session(n + 1, user, SessionStage::Full, T0);
    assert!(
        !store
            .advance_session(&half.token_hash, &next, &SessionProof::TotpStep(step))
            .await
            .expect("advance"),
        "step {step} was used already"
    );
    assert_eq!(
        store
            .session_by_token(&next.token_hash)
            .await
            .expect("by token"),
        None
    );
    assert!(store.delete_session(half.id).await.expect("delete"));
}

/// Users round-trip every field, are unique by e-mail (on insert and on update), are listed
/// in e-mail order; an unknown user's update is `NotFound`.
pub async fn cabinet_users<S: CabinetStore>(store: &S) {
    let mut a = sample_user(1, "zed@shop.example", Role::Merchant(merchant_id(1)));
    a.password_hash = Some("$argon2id$v=19$m=19456,t=2,p=1$c2FsdA$aGFzaA".to_string());
    a.totp_secret = Some("sealed:v1:k:abc".into());
    a.totp_confirmed_at = Some(T0 + ms(5));
    a.disabled = true;
    let b = sample_user(2, "amy@support.example", Role::Support);
    store.insert_user(&a).await.expect("insert_user");
    store.insert_user(&b).await.expect("insert_user");
    assert_eq!(store.user(a.id).await.expect("user"), Some(a.clone()));
    assert_eq!(
        store
            .user_by_email("amy@support.example")
            .await
            .expect("by email"),
        Some(b.clone())
    );
    assert_eq!(
        store
            .user_by_email("nobody@x.example")
            .await
            .expect("by email"),
        None
    );
    assert_eq!(
        store.users().await.expect("users"),
        vec![b.clone(), a.clone()]
    );
    let twin = sample_user(3, "zed@shop.example", Role::Support);
    assert!(
        matches!(
            store.insert_user(&twin).await,
            Err(StoreError::Duplicate(_))
        ),
        "an e-mail is one user's"
    );
    let mut b2 = b.clone();
    b2.email = "zed@shop.example".to_string();
    assert!(matches!(
        store.update_user(&b2).await,
        Err(StoreError::Duplicate(_))
    ));
    let mut a2 = a.clone();
    a2.password_hash = None;
    a2.totp_secret = None;
    a2.totp_confirmed_at = None;
    a2.disabled = false;
    a2.role = Role::Merchant(merchant_id(2));
    store.update_user(&a2).await.expect("update_user");
    assert_eq!(store.user(a.id).await.expect("user"), Some(a2));
    assert!(matches!(
        store
            .update_user(&sample_user(9, "x@y.example", Role::Support))
            .await,
        Err(StoreError::NotFound(_))
    ));
}

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

/// A recovery code is consumed once; replacing the codes drops the old ones.
pub async fn cabinet_recovery_codes<S: CabinetStore>(store: &S) {
    let u = sample_user(1, "a@shop.example", Role::Support);
    store.insert_user(&u).await.expect("insert_user");
    assert_eq!(store.count_recovery_codes(u.id).await.expect("left"), 0);
    let codes: Vec<[u8; 32]> = (1..=10).map(hash).collect();
    store
        .update_recovery_codes(u.id, &codes)
        .await
        .expect("replace");
    assert_eq!(store.count_recovery_codes(u.id).await.expect("left"), 10);
    let h1 = sample_session(1, u.id, SessionStage::Password, T0);
    let h2 = sample_session(2, u.id, SessionStage::Password, T0);
    store.insert_session(&h1).await.expect("insert");
    store.insert_session(&h2).await.expect("insert");
    let proof = SessionProof::RecoveryCode(hash(3));
    assert!(store
        .advance_session(
            &h1.token_hash,
            &sample_session(11, u.id, SessionStage::Full, T0),
            &proof
        )
        .await
        .expect("advance"));
    assert_eq!(store.count_recovery_codes(u.id).await.expect("left"), 9);
    assert!(
        !store
            .advance_session(
                &h2.token_hash,
                &sample_session(12, u.id, SessionStage::Full, T0),
                &proof
            )
            .await
            .expect("advance"),
        "a used recovery code is refused"
    );
    assert!(!store
        .advance_session(
            &h2.token_hash,
            &sample_session(12, u.id, SessionStage::Full, T0),
            &SessionProof::RecoveryCode(hash(42))
        )
        .await
        .expect("advance"));
    assert_eq!(store.count_recovery_codes(u.id).await.expect("left"), 9);
    store
        .update_recovery_codes(u.id, &[hash(50), hash(51)])
        .await
        .expect("replace");
    assert_eq!(store.count_recovery_codes(u.id).await.expect("left"), 2);
    assert!(
        !store
            .advance_session(
                &h2.token_hash,
                &sample_session(12, u.id, SessionStage::Full, T0),
                &SessionProof::RecoveryCode(hash(4))
            )
            .await
            .expect("advance"),
        "replaced codes are gone"
    );
    assert!(store
        .advance_session(
            &h2.token_hash,
            &sample_session(12, u.id, SessionStage::Full, T0),
            &SessionProof::RecoveryCode(hash(51))
        )
        .await
        .expect("advance"));
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

/// An invitation is taken once; a new one replaces the user's earlier ones; an expired one is
/// not answered (and is gone).
pub async fn cabinet_invites<S: CabinetStore>(store: &S) {
    let invite = |n: u8, user: UserId, expires: Timestamp| InviteRecord {
        token_hash: hash(n),
        user_id: user,
        created_at: T0,
        expires_at: expires,
    };
    let i1 = invite(1, user_id(1), T0 + ms(1000));
    let i2 = invite(2, user_id(1), T0 + ms(1000));
    let i3 = invite(3, user_id(2), T0 + ms(1000));
    for i in [&i1, &i2, &i3] {
        store.insert_invite(i).await.expect("insert_invite");
    }
    assert_eq!(
        store
            .find_invite(&i1.token_hash, T0)
            .await
            .expect("find_invite"),
        None,
        "replaced by the user's newer invitation"
    );
    assert_eq!(
        store.take_invite(&i1.token_hash, T0).await.expect("take"),
        None,
        "replaced by the user's newer invitation"
    );
    assert_eq!(
        store
            .find_invite(&i2.token_hash, T0)
            .await
            .expect("find_invite"),
        Some(i2.clone()),
        "looking does not take"
    );
    assert_eq!(
        store
            .find_invite(&i3.token_hash, T0 + ms(1000))
            .await
            .expect("find_invite"),
        None,
        "not live at its expiry"
    );
    assert_eq!(
        store.take_invite(&i2.token_hash, T0).await.expect("take"),
        Some(i2.clone())
    );
    assert_eq!(
        store.take_invite(&i2.token_hash, T0).await.expect("take"),
        None,
        "taken once"
    );
    assert_eq!(
        store
            .take_invite(&i3.token_hash, T0 + ms(1000))
            .await
            .expect("take"),
        None,
        "expired at its expiry"
    );
    assert_eq!(
        store.take_invite(&i3.token_hash, T0).await.expect("take"),
        None,
        "an expired invitation taken is gone"
    );
}

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

/// Failures are counted per key since a time, oldest first up to a limit, cleared per key and
/// purged by age.
pub async fn cabinet_failures<S: CabinetStore>(store: &S) {
    for n in [5, 1, 3, 2, 4] {
        store
            .insert_failure("account:a@shop.example", T0 + ms(n))
            .await
            .expect("record");
    }
    store
        .insert_failure("address:203.0.113.7", T0 + ms(2))
        .await
        .expect("record");
    assert_eq!(
        store
            .find_failures("account:a@shop.example", T0 + ms(2), 10)
            .await
            .expect("since"),
        vec![T0 + ms(2), T0 + ms(3), T0 + ms(4), T0 + ms(5)]
    );
    assert_eq!(
        store
            .find_failures("account:a@shop.example", T0, 2)
            .await
            .expect("since"),
        vec![T0 + ms(1), T0 + ms(2)]
    );
    store
        .clear_failures("account:a@shop.example")
        .await
        .expect("clear");
    assert!(store
        .find_failures("account:a@shop.example", T0, 10)
        .await
        .expect("since")
        .is_empty());
    assert_eq!(
        store
            .find_failures("address:203.0.113.7", T0, 10)
            .await
            .expect("since"),
        vec![T0 + ms(2)]
    );
    // One attempt is forgotten, the newest of its key and time; others stay.
    for at in [T0 + ms(7), T0 + ms(7), T0 + ms(8)] {
        store
            .insert_failure("address:203.0.113.7", at)
            .await
            .expect("record");
    }
    store
        .forget_attempt("address:203.0.113.7", T0 + ms(7))
        .await
        .expect("forget one");
    store
        .forget_attempt("address:203.0.113.7", T0 + ms(9))
        .await
        .expect("forget none");
    assert_eq!(
        store
            .find_failures("address:203.0.113.7", T0, 10)
            .await
            .expect("since"),
        vec![T0 + ms(2), T0 + ms(7), T0 + ms(8)]
    );
    assert_eq!(store.purge_failures(T0 + ms(3)).await.expect("purge"), 1);
    store
        .clear_failures("address:203.0.113.7")
        .await
        .expect("clear");
    assert!(store
        .find_failures("address:203.0.113.7", T0, 10)
        .await
        .expect("since")
        .is_empty());
}

/// The cabinet audit log answers newest first, page by page with a cursor, filtered by
/// merchant, action or family of actions, outcome and e-mail; retention deletes what is older
/// than its period or outside the newest records it keeps, and nothing else.
pub async fn cabinet_audit_log<S: CabinetStore>(store: &S) {
    let record = |n: i64, merchant: Option<MerchantId>, success: bool| CabinetAuditRecord {
        at: T0 + ms(n),
        user_id: (n % 2 == 0).then(|| user_id(1)),
        email: format!("user{}@shop.example", n % 2),
        address: (n != 3).then(|| "2001:db8::1".to_string()),
        merchant_id: merchant,
        project_id: (n == 2).then(|| project_id(1)),
        action: ["sign_in.password", "sign_in", "token.issue", "sign_inx.y"][(n % 4) as usize]
            .to_string(),
        target: format!("target-{n}"),
        success,
        detail: (n == 1).then(|| "a \"detail\" ü".to_string()),
    };
    let r1 = record(1, Some(merchant_id(1)), false);
    let r2 = record(2, Some(merchant_id(1)), true);
    let r3 = record(3, Some(merchant_id(2)), true);
    let r4 = record(4, None, true);
    let r5 = record(5, Some(merchant_id(1)), false);
    for r in [&r1, &r2, &r3, &r4, &r5] {
        store.insert_cabinet_audit(r).await.expect("append");
    }
    let page = |q: AuditQuery| async move { store.find_cabinet_audit(&q).await.expect("audit") };
    let all = AuditQuery {
        limit: 10,
        ..AuditQuery::default()
    };
    let everything = page(all.clone()).await;
    assert_eq!(
        everything.records,
        vec![r5.clone(), r4.clone(), r3.clone(), r2.clone(), r1.clone()]
    );
    assert_eq!(everything.next, None, "no page after the last");

    // Two by two, each page after the previous one's cursor, the last without a cursor.
    let by_two = |before| AuditQuery {
        before,
        limit: 2,
        ..AuditQuery::default()
    };
    let first = page(by_two(None)).await;
    assert_eq!(first.records, vec![r5.clone(), r4.clone()]);
    let second = page(by_two(first.next)).await;
    assert_eq!(second.records, vec![r3.clone(), r2.clone()]);
    let third = page(by_two(second.next)).await;
    assert_eq!((third.records, third.next), (vec![r1.clone()], None));
    assert!(first.next.is_some() && second.next.is_some());

    let mine = AuditQuery {
        merchant: Some(merchant_id(1)),
        ..all.clone()
    };
    assert_eq!(
        page(mine.clone()).await.records,
        vec![r5.clone(), r2.clone(), r1.clone()]
    );
    let first = page(AuditQuery {
        limit: 1,
        ..mine.clone()
    })
    .await;
    assert_eq!(first.records, vec![r5.clone()]);
    let rest = page(AuditQuery {
        before: first.next,
        ..mine.clone()
    })
    .await;
    assert_eq!(rest.records, vec![r2.clone(), r1.clone()]);
    assert_eq!(
        page(AuditQuery {
            success: Some(false),
            ..mine.clone()
        })
        .await
        .records,
        vec![r5.clone(), r1.clone()]
    );
    // A family: `sign_in` and every `sign_in.*`, not `sign_inx.*`; `_` is no wildcard.
    assert_eq!(
        page(AuditQuery {
            action: Some("sign_in".into()),
            ..all.clone()
        })
        .await
        .records,
        vec![r5.clone(), r4.clone(), r1.clone()]
    );
    assert_eq!(
        page(AuditQuery {
            action: Some("sign_in.password".into()),
            ..all.clone()
        })
        .await
        .records,
        vec![r4.clone()]
    );
    assert!(page(AuditQuery {
        action: Some("sign%".into()),
        ..all.clone()
    })
    .await
    .records
    .is_empty());
    assert_eq!(
        page(AuditQuery {
            action: Some("sign_inx".into()),
            ..all.clone()
        })
        .await
        .records,
        vec![r3.clone()]
    );
    assert_eq!(
        page(AuditQuery {
            email: Some("user0@shop.example".into()),
            ..all.clone()
        })
        .await
        .records,
        vec![r4.clone(), r2.clone()]
    );

    // Retention: by age among the oldest `limit`, then by size.
    assert_eq!(
        store
            .delete_cabinet_audit(T0 + ms(3), None, 1)
            .await
            .expect("purge"),
        1,
        "one batch of one: r1"
    );
    assert_eq!(
        store
            .delete_cabinet_audit(T0 + ms(3), None, 10)
            .await
            .expect("purge"),
        1,
        "r2; r3 is not older than the cut-off"
    );
    assert_eq!(
        store
            .delete_cabinet_audit(T0, Some(2), 10)
            .await
            .expect("purge"),
        1,
        "r3: the newest two are kept"
    );
    assert_eq!(
        store
            .delete_cabinet_audit(T0, Some(2), 10)
            .await
            .expect("purge"),
        0
    );
    assert_eq!(
        page(all.clone()).await.records,
        vec![r5.clone(), r4.clone()]
    );
    // Appending after a purge continues the order.
    let r6 = record(6, None, true);
    store.insert_cabinet_audit(&r6).await.expect("append");
    assert_eq!(page(all).await.records, vec![r6, r5, r4]);
}

fn fail(round: u128, what: &str, e: StoreError) -> ! {
    panic!("round {round}: {what}: {e:?}")
}

fn hash_of(round: u128, n: u8) -> [u8; 32] {
    let mut h = [n; 32];
    h[0] = 0xce;
    h[1] = u8::try_from(round % 256).expect("below 256");
    h
}

/// One round of writes and reads through every statement of the cabinet's port, with records
/// of their own (`round`, 1 to 25, keeps the ids of different rounds apart), each read checked
/// against what was written; `merchant` and `project` exist in the store (the core's
/// `every_statement` of the same round answers them). An adapter's upgrade test runs it before
/// and after a later build's migration changes the schema under the open store.
///
/// # Panics
/// On a store error or a read that differs from the write, naming the operation.
pub async fn every_statement<S: CabinetStore + ?Sized>(
    store: &S,
    round: u128,
    merchant: MerchantId,
    project: ProjectId,
) {
    let at = T0 + ms(i64::try_from(round).expect("small"));
    let user = UserRecord {
        id: UserId::from_uuid(Uuid::from_u128(0x6100_0000 + round)),
        email: format!("upgrade-{round}@merchant.example"),
        role: Role::Merchant(merchant),
        password_hash: Some("$argon2id$v=19$m=19456,t=2,p=1$c2FsdA$aGFzaA".to_string()),
        totp_secret: Some("JBSWY3DPEHPK3PXP".into()),
        totp_confirmed_at: Some(at),
        disabled: false,
        created_at: at,
    };
    store
        .insert_user(&user)
        .await
        .unwrap_or_else(|e| fail(round, "insert_user", e));
    store
        .update_user(&user)
        .await
        .unwrap_or_else(|e| fail(round, "update_user", e));
    assert_eq!(
        store
            .user(user.id)
            .await
            .unwrap_or_else(|e| fail(round, "user", e)),
        Some(user.clone())
    );
    assert_eq!(
        store
            .user_by_email(&user.email)
            .await
            .unwrap_or_else(|e| fail(round, "user_by_email", e)),
        Some(user.clone())
    );
    assert!(store
        .users()
        .await
        .unwrap_or_else(|e| fail(round, "users", e))
        .contains(&user));
    store
        .update_recovery_codes(user.id, &[hash_of(round, 3)])
        .await
        .unwrap_or_else(|e| fail(round, "update_recovery_codes", e));
    assert_eq!(
        store
            .count_recovery_codes(user.id)
            .await
            .unwrap_or_else(|e| fail(round, "count_recovery_codes", e)),
        1
    );
    let session = SessionRecord {
        id: SessionId::from_uuid(Uuid::from_u128(0x7100_0000 + round)),
        token_hash: hash_of(round, 4),
        user_id: user.id,
        stage: SessionStage::Full,
        created_at: at,
        signed_in_at: at,
        last_seen_at: at,
        address: Some("203.0.113.9".to_string()),
        user_agent: None,
    };
    store
        .insert_session(&session)
        .await
        .unwrap_or_else(|e| fail(round, "insert_session", e));
    assert_eq!(
        store
            .session_by_token(&session.token_hash)
            .await
            .unwrap_or_else(|e| fail(round, "session_by_token", e)),
        Some(session.clone())
    );
    assert_eq!(
        store
            .user_sessions(user.id)
            .await
            .unwrap_or_else(|e| fail(round, "user_sessions", e)),
        vec![session.clone()]
    );
    let invite = InviteRecord {
        token_hash: hash_of(round, 5),
        user_id: user.id,
        created_at: at,
        expires_at: at + ms(60_000),
    };
    store
        .insert_invite(&invite)
        .await
        .unwrap_or_else(|e| fail(round, "insert_invite", e));
    assert_eq!(
        store
            .find_invite(&invite.token_hash, at)
            .await
            .unwrap_or_else(|e| fail(round, "find_invite", e)),
        Some(invite.clone())
    );
    assert_eq!(
        store
            .take_invite(&invite.token_hash, at)
            .await
            .unwrap_or_else(|e| fail(round, "take_invite", e)),
        Some(invite)
    );
    let slot = SlotRecord {
        id_hash: hash_of(round, 6),
        owner: Some(session.id),
        payload: format!("v1.k.round-{round}").into(),
        created_at: at,
        expires_at: at + ms(60_000),
    };
    store
        .insert_slot(&slot, 16)
        .await
        .unwrap_or_else(|e| fail(round, "insert_slot", e));
    assert_eq!(
        store
            .take_slot(&slot.id_hash, slot.owner, at)
            .await
            .unwrap_or_else(|e| fail(round, "take_slot", e)),
        Some(slot)
    );
    store
        .delete_expired_slots(T0, 100_000)
        .await
        .unwrap_or_else(|e| fail(round, "delete_expired_slots", e));
    let key_name = format!("upgrade:{round}");
    store
        .insert_failure(&key_name, at)
        .await
        .unwrap_or_else(|e| fail(round, "insert_failure", e));
    assert_eq!(
        store
            .find_failures(&key_name, at, 10)
            .await
            .unwrap_or_else(|e| fail(round, "find_failures", e)),
        vec![at]
    );
    let cabinet_audit = CabinetAuditRecord {
        at,
        user_id: Some(user.id),
        email: user.email.clone(),
        address: None,
        merchant_id: Some(merchant),
        project_id: Some(project),
        action: "upgrade".to_string(),
        target: format!("round {round}"),
        success: true,
        detail: None,
    };
    store
        .insert_cabinet_audit(&cabinet_audit)
        .await
        .unwrap_or_else(|e| fail(round, "insert_cabinet_audit", e));
    let query = AuditQuery {
        merchant: Some(merchant),
        action: Some("upgrade".into()),
        success: Some(true),
        email: Some(user.email.clone()),
        before: None,
        limit: 10,
    };
    assert_eq!(
        store
            .find_cabinet_audit(&query)
            .await
            .unwrap_or_else(|e| fail(round, "find_cabinet_audit", e))
            .records,
        vec![cabinet_audit]
    );
    store
        .delete_cabinet_audit(T0, Some(u64::MAX), 1)
        .await
        .unwrap_or_else(|e| fail(round, "delete_cabinet_audit", e));
}
