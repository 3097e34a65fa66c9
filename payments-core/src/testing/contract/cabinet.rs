//! Checks of the web cabinet's store ([`CabinetStore`]): users, sessions and the sign-in step
//! that uses a TOTP step or a recovery code once, invitations, failures, the cabinet audit
//! log, token use and the listings.

use super::*;
use crate::cabinet::CabinetStoreExt;
use crate::cabinet::{
    CabinetAuditRecord, CabinetStore, EventQuery, InviteRecord, PaymentQuery, Role, SessionProof,
    SessionRecord, SessionStage, UserRecord,
};
use crate::ids::{SessionId, UserId};
use crate::store::PayerPageStoreExt;

/// The lease token of an event no dispatcher has claimed yet (these checks record attempts
/// without claiming).
const UNCLAIMED: crate::store::LeaseToken = crate::store::LeaseToken::new(0);

/// Every check of the cabinet part of the suite with its name, in a stable order.
pub fn cabinet_checks<S: Store + CabinetStore>() -> Vec<Check<S>> {
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
        ("cabinet_failures", |s| Box::pin(cabinet_failures(s))),
        ("cabinet_audit_log", |s| Box::pin(cabinet_audit_log(s))),
        ("cabinet_token_use", |s| Box::pin(cabinet_token_use(s))),
        ("cabinet_find_payments", |s| {
            Box::pin(cabinet_find_payments(s))
        }),
        ("cabinet_find_events", |s| Box::pin(cabinet_find_events(s))),
        ("cabinet_payment_pages", |s| {
            Box::pin(cabinet_payment_pages(s))
        }),
        ("cabinet_concurrent_payment_pages", |s| {
            Box::pin(cabinet_concurrent_payment_pages(s))
        }),
    ]
}

/// Runs every cabinet check, each against a fresh store from `make`.
pub async fn run_cabinet<S: Store + CabinetStore + 'static>(make: impl Fn() -> S) {
    run_cabinet_async(|| std::future::ready(make())).await;
}

/// [`run_cabinet`] for stores whose setup awaits.
pub async fn run_cabinet_async<S, F, Fut>(make: F)
where
    S: Store + CabinetStore + 'static,
    F: Fn() -> Fut,
    Fut: Future<Output = S>,
{
    for (name, check) in cabinet_checks::<S>() {
        let store = make().await;
        println!("store contract: {name}");
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
pub async fn cabinet_users<S: Store + CabinetStore>(store: &S) {
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
pub async fn cabinet_sessions<S: Store + CabinetStore>(store: &S) {
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
        .touch_session(s1.id, T0 + ms(500))
        .await
        .expect("touch"));
    assert!(store
        .touch_session(s1.id, T0 + ms(100))
        .await
        .expect("touch"));
    let seen = store
        .session_by_token(&s1.token_hash)
        .await
        .expect("by token")
        .expect("there");
    assert_eq!(seen.last_seen_at, T0 + ms(500), "never backwards");
    assert!(!store
        .touch_session(session_id(99), T0)
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
pub async fn cabinet_totp_steps<S: Store + CabinetStore>(store: &S) {
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
pub async fn cabinet_concurrent_steps<S: Store + CabinetStore>(store: &S) {
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
pub async fn cabinet_recovery_codes<S: Store + CabinetStore>(store: &S) {
    let u = sample_user(1, "a@shop.example", Role::Support);
    store.insert_user(&u).await.expect("insert_user");
    assert_eq!(store.recovery_codes_left(u.id).await.expect("left"), 0);
    let codes: Vec<[u8; 32]> = (1..=10).map(hash).collect();
    store
        .replace_recovery_codes(u.id, &codes)
        .await
        .expect("replace");
    assert_eq!(store.recovery_codes_left(u.id).await.expect("left"), 10);
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
    assert_eq!(store.recovery_codes_left(u.id).await.expect("left"), 9);
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
    assert_eq!(store.recovery_codes_left(u.id).await.expect("left"), 9);
    store
        .replace_recovery_codes(u.id, &[hash(50), hash(51)])
        .await
        .expect("replace");
    assert_eq!(store.recovery_codes_left(u.id).await.expect("left"), 2);
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
pub async fn cabinet_enrolment<S: Store + CabinetStore>(store: &S) {
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
    assert_eq!(store.recovery_codes_left(u.id).await.expect("left"), 3);
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
pub async fn cabinet_invites<S: Store + CabinetStore>(store: &S) {
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
        store.put_invite(i).await.expect("put_invite");
    }
    assert_eq!(
        store.invite(&i1.token_hash, T0).await.expect("invite"),
        None,
        "replaced by the user's newer invitation"
    );
    assert_eq!(
        store.take_invite(&i1.token_hash, T0).await.expect("take"),
        None,
        "replaced by the user's newer invitation"
    );
    assert_eq!(
        store.invite(&i2.token_hash, T0).await.expect("invite"),
        Some(i2.clone()),
        "looking does not take"
    );
    assert_eq!(
        store
            .invite(&i3.token_hash, T0 + ms(1000))
            .await
            .expect("invite"),
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

/// Failures are counted per key since a time, oldest first up to a limit, cleared per key and
/// purged by age.
pub async fn cabinet_failures<S: Store + CabinetStore>(store: &S) {
    for n in [5, 1, 3, 2, 4] {
        store
            .record_failure("account:a@shop.example", T0 + ms(n))
            .await
            .expect("record");
    }
    store
        .record_failure("address:203.0.113.7", T0 + ms(2))
        .await
        .expect("record");
    assert_eq!(
        store
            .failures_since("account:a@shop.example", T0 + ms(2), 10)
            .await
            .expect("since"),
        vec![T0 + ms(2), T0 + ms(3), T0 + ms(4), T0 + ms(5)]
    );
    assert_eq!(
        store
            .failures_since("account:a@shop.example", T0, 2)
            .await
            .expect("since"),
        vec![T0 + ms(1), T0 + ms(2)]
    );
    store
        .clear_failures("account:a@shop.example")
        .await
        .expect("clear");
    assert!(store
        .failures_since("account:a@shop.example", T0, 10)
        .await
        .expect("since")
        .is_empty());
    assert_eq!(
        store
            .failures_since("address:203.0.113.7", T0, 10)
            .await
            .expect("since"),
        vec![T0 + ms(2)]
    );
    assert_eq!(store.purge_failures(T0 + ms(3)).await.expect("purge"), 1);
    assert!(store
        .failures_since("address:203.0.113.7", T0, 10)
        .await
        .expect("since")
        .is_empty());
}

/// The cabinet audit log answers newest first, all or one merchant's.
pub async fn cabinet_audit_log<S: Store + CabinetStore>(store: &S) {
    let record = |n: i64, merchant: Option<MerchantId>, success: bool| CabinetAuditRecord {
        at: T0 + ms(n),
        user_id: (n % 2 == 0).then(|| user_id(1)),
        email: format!("user{n}@shop.example"),
        address: (n != 3).then(|| "2001:db8::1".to_string()),
        merchant_id: merchant,
        project_id: (n == 2).then(|| project_id(1)),
        action: format!("action.{n}"),
        target: format!("target-{n}"),
        success,
        detail: (n == 1).then(|| "a \"detail\" ü".to_string()),
    };
    let r1 = record(1, Some(merchant_id(1)), false);
    let r2 = record(2, Some(merchant_id(1)), true);
    let r3 = record(3, Some(merchant_id(2)), true);
    let r4 = record(4, None, true);
    for r in [&r1, &r2, &r3, &r4] {
        store.append_cabinet_audit(r).await.expect("append");
    }
    assert_eq!(
        store.cabinet_audit(None, 10).await.expect("audit"),
        vec![r4.clone(), r3.clone(), r2.clone(), r1.clone()]
    );
    assert_eq!(
        store.cabinet_audit(None, 2).await.expect("audit"),
        vec![r4, r3]
    );
    assert_eq!(
        store
            .cabinet_audit(Some(merchant_id(1)), 10)
            .await
            .expect("audit"),
        vec![r2.clone(), r1]
    );
    assert_eq!(
        store
            .cabinet_audit(Some(merchant_id(1)), 1)
            .await
            .expect("audit"),
        vec![r2]
    );
}

/// The latest use of a token is kept; unused tokens are not answered.
pub async fn cabinet_token_use<S: Store + CabinetStore>(store: &S) {
    store
        .record_token_use(token_id(1), T0 + ms(50))
        .await
        .expect("record");
    store
        .record_token_use(token_id(1), T0 + ms(20))
        .await
        .expect("record");
    store
        .record_token_use(token_id(2), T0 + ms(5))
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
pub async fn cabinet_find_payments<S: Store + CabinetStore>(store: &S) {
    let mut all = Vec::new();
    for n in 1..=6u128 {
        let project = if n == 6 { project_id(2) } else { project_id(1) };
        let mut p = sample_payment(payment_id(n), project, &format!("order-{n}"));
        p.created_at = T0 + ms(i64::try_from(n).expect("small") * 1000);
        if n % 2 == 0 {
            p.status = PaymentStatus::Completed;
        }
        inserted(store, &p).await;
        all.push(p);
    }
    let query = |f: &dyn Fn(&mut PaymentQuery)| {
        let mut q = PaymentQuery {
            project: project_id(1),
            status: None,
            created_from: None,
            created_to: None,
            merchant_payment_id: None,
            before: None,
            limit: 100,
        };
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
                q.merchant_payment_id = Some(MerchantPaymentId::parse("order-3").expect("valid"));
            }))
            .await
            .expect("find")),
        vec![payment_id(3)]
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
pub async fn cabinet_find_events<S: Store + CabinetStore>(store: &S) {
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
        let mut q = EventQuery {
            project: project_id(1),
            state: None,
            payment: None,
            created_from: None,
            created_to: None,
            before: None,
            limit: 100,
        };
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
pub async fn cabinet_payment_pages<S: Store + CabinetStore>(store: &S) {
    assert_eq!(store.payment_page(payment_id(1)).await.expect("read"), None);
    assert_eq!(
        store.payment_page_by_hash(&hash(1)).await.expect("read"),
        None
    );
    let first = page(1, 1);
    assert_eq!(
        store.ensure_payment_page(&first).await.expect("store"),
        first,
        "the first link is stored and answered, every field as given"
    );
    let again = store.ensure_payment_page(&page(1, 2)).await.expect("again");
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
    store.ensure_payment_page(&other).await.expect("another");
    assert_eq!(
        store.payment_page_by_hash(&hash(3)).await.expect("read"),
        Some(other)
    );
    let clash = page(3, 1);
    assert!(
        matches!(
            store.ensure_payment_page(&clash).await,
            Err(StoreError::Duplicate(_))
        ),
        "a token hash belongs to one payment"
    );
    assert_eq!(store.payment_page(payment_id(3)).await.expect("read"), None);
}

/// Concurrent first links for one payment: every call answers the same stored link.
pub async fn cabinet_concurrent_payment_pages<S: Store + CabinetStore>(store: &S) {
    let candidates: Vec<_> = (10..18u8).map(|t| page(7, t)).collect();
    let answers = join_all(candidates.iter().map(|p| store.ensure_payment_page(p))).await;
    let answers: Vec<_> = answers.into_iter().map(|a| a.expect("ensure")).collect();
    assert!(answers.iter().all(|a| a == &answers[0]), "{answers:?}");
    assert!(candidates.contains(&answers[0]));
    assert_eq!(
        store.payment_page(payment_id(7)).await.expect("read"),
        Some(answers[0].clone())
    );
}
