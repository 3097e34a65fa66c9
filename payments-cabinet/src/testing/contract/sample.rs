//! The records the checks store: users, sessions and token hashes by number, and the TOTP
//! step check the sign-in checks share.

use payments_core::ids::{SessionId, UserId};
use payments_core::testing::contract::{ms, T0};
use payments_core::Timestamp;
use uuid::Uuid;

use crate::store::{
    CabinetStore, CabinetStoreExt, Role, SessionProof, SessionRecord, SessionStage, TeamRole,
    UserRecord,
};

pub(super) fn user_id(n: u128) -> UserId {
    UserId::from_uuid(Uuid::from_u128(0x6000_0000 + n))
}

pub(super) fn session_id(n: u128) -> SessionId {
    SessionId::from_uuid(Uuid::from_u128(0x7000_0000 + n))
}

pub(super) fn sample_user(n: u128, email: &str, role: Role) -> UserRecord {
    UserRecord {
        id: user_id(n),
        email: email.to_string(),
        role,
        password_hash: None,
        totp_secret: None,
        totp_confirmed_at: None,
        disabled: false,
        created_at: T0 + ms(i64::try_from(n).expect("small")),
        team_role: TeamRole::Owner,
        projects: None,
        time_zone: None,
    }
}

pub(super) fn hash(n: u8) -> [u8; 32] {
    let mut h = [n; 32];
    h[0] = 0xab;
    h
}

pub(super) fn sample_session(
    n: u128,
    user: UserId,
    stage: SessionStage,
    at: Timestamp,
) -> SessionRecord {
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
pub(super) async fn step_used<S: CabinetStore>(store: &S, user: UserId, step: u64, n: u128) {
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
