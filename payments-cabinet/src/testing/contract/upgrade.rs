//! [`every_statement`]: one round through every statement of the cabinet's ports, for an
//! adapter's upgrade test.

use payments_core::ids::{MerchantId, ProjectId, SessionId, UserId};
use payments_core::store::StoreError;
use payments_core::testing::contract::{ms, T0};
use uuid::Uuid;

use crate::store::{
    AuditQuery, CabinetAuditRecord, CabinetStore, CabinetStoreExt, InviteRecord, Role,
    SessionRecord, SessionStage, SlotRecord, TeamRole, UserRecord,
};

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
        team_role: TeamRole::Finance,
        projects: Some(vec![project]),
        time_zone: Some("Europe/Moscow".into()),
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
