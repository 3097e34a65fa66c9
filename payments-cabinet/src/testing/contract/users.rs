//! The checks of [`CabinetUsers`](crate::store::CabinetUsers) and
//! [`CabinetInvites`](crate::store::CabinetInvites): users, recovery codes, invitations.

use payments_core::ids::UserId;
use payments_core::store::StoreError;
use payments_core::testing::contract::{merchant_id, ms, project_id, T0};
use payments_core::Timestamp;

use super::sample::{hash, sample_session, sample_user, user_id};
use crate::store::{
    CabinetStore, CabinetStoreExt, InviteRecord, Role, SessionProof, SessionStage, TeamRole,
};

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
    // A team role and the projects it works on read back as written, in their order.
    a2.team_role = TeamRole::SupportAgent;
    a2.projects = Some(vec![project_id(2), project_id(1)]);
    a2.time_zone = Some("Asia/Yekaterinburg".into());
    store.update_user(&a2).await.expect("update_user");
    assert_eq!(store.user(a.id).await.expect("user"), Some(a2.clone()));
    a2.team_role = TeamRole::Viewer;
    a2.projects = Some(Vec::new());
    store.update_user(&a2).await.expect("update_user");
    assert_eq!(store.user(a.id).await.expect("user"), Some(a2));
    assert!(matches!(
        store
            .update_user(&sample_user(9, "x@y.example", Role::Support))
            .await,
        Err(StoreError::NotFound(_))
    ));
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
