//! A store keeps answering beside a later schema: [`every_statement`] writes one of each
//! record and reads each back through every read of the port, so that a store which caches
//! prepared statements has all of them prepared; an adapter's upgrade test runs it, then
//! changes the schema the way a later build's migration would (a column added to every table),
//! then runs it again on the same, still open store. A statement that selects `*` fails the
//! second round on PostgreSQL (`0A000: cached plan must not change result type`): the old
//! node would answer 503 until restarted.

use uuid::Uuid;

use super::*;
use crate::cabinet::CabinetStoreExt;
use crate::cabinet::{
    CabinetAuditRecord, CabinetStore, EventQuery, InviteRecord, PaymentQuery, Role, SessionRecord,
    SessionStage, UserRecord,
};
use crate::event::FailedEventFilter;
use crate::ids::{SessionId, UserId};
use crate::payer::PaymentPageRecord;
use crate::project::OperatorTokenRecord;
use crate::store::CredentialStoreExt;
use crate::store::MerchantStoreExt;
use crate::store::OperatorStoreExt;
use crate::store::PayerPageStoreExt;

fn id(round: u128, n: u128) -> u128 {
    round * 10 + n
}

fn fail(round: u128, what: &str, e: StoreError) -> ! {
    panic!("round {round}: {what}: {e:?}")
}

fn hash_of(round: u128, n: u8) -> [u8; 32] {
    let mut h = [n; 32];
    h[0] = 0xcd;
    h[1] = u8::try_from(round % 256).expect("below 256");
    h
}

/// One round of writes and reads through every statement of the port and of the cabinet's
/// port, with records of their own (`round`, 1 to 25, keeps the ids of different rounds apart),
/// each read checked against what was written. Rounds run one after the other on one store.
///
/// # Panics
/// On a store error or a read that differs from the write, naming the operation.
pub async fn every_statement<S: Store + CabinetStore>(store: &S, round: u128) {
    let ctx = |what: &str| format!("round {round}: {what}");
    let at = T0 + ms(i64::try_from(round).expect("small"));

    // The directory.
    let merchant = sample_merchant(id(round, 1), "Upgrade Ltd");
    store
        .put_merchant(&merchant)
        .await
        .unwrap_or_else(|e| fail(round, "put_merchant", e));
    assert_eq!(
        store
            .merchant(merchant.id)
            .await
            .unwrap_or_else(|e| fail(round, "merchant", e)),
        Some(merchant.clone())
    );
    assert!(store
        .merchants()
        .await
        .unwrap_or_else(|e| fail(round, "merchants", e))
        .contains(&merchant));
    let project = sample_project(id(round, 1), merchant.id);
    store
        .put_project(&project)
        .await
        .unwrap_or_else(|e| fail(round, "put_project", e));
    assert_eq!(
        store
            .project(project.id)
            .await
            .unwrap_or_else(|e| fail(round, "project", e)),
        Some(project.clone())
    );
    assert!(store
        .projects()
        .await
        .unwrap_or_else(|e| fail(round, "projects", e))
        .contains(&project));
    let mut tok = token(
        id(round, 1),
        project.id,
        vec![Scope::PaymentsCreate, Scope::PaymentsRead],
    );
    tok.hash = hash_of(round, 1);
    store
        .insert_token(&tok)
        .await
        .unwrap_or_else(|e| fail(round, "insert_token", e));
    assert_eq!(
        store
            .token_by_hash(&tok.hash)
            .await
            .unwrap_or_else(|e| fail(round, "token_by_hash", e)),
        Some(tok.clone())
    );
    assert_eq!(
        store
            .tokens(project.id)
            .await
            .unwrap_or_else(|e| fail(round, "tokens", e)),
        vec![tok.clone()]
    );
    let keyid = format!("upgrade-key-{round}");
    let k = key(project.id, &keyid, 7);
    store
        .insert_key(&k)
        .await
        .unwrap_or_else(|e| fail(round, "insert_key", e));
    assert_eq!(
        store
            .key(project.id, &k.keyid)
            .await
            .unwrap_or_else(|e| fail(round, "key", e)),
        Some(k.clone())
    );
    assert_eq!(
        store
            .keys(project.id)
            .await
            .unwrap_or_else(|e| fail(round, "keys", e)),
        vec![k.clone()]
    );
    assert_eq!(
        store
            .active_key_projects(&k.keyid)
            .await
            .unwrap_or_else(|e| fail(round, "active_key_projects", e)),
        vec![project.id]
    );
    let found = store
        .auth_lookup(&tok.hash, Some(&k.keyid))
        .await
        .unwrap_or_else(|e| fail(round, "auth_lookup", e));
    assert_eq!(
        (found.token, found.project, found.merchant, found.key),
        (
            Some(tok.clone()),
            Some(project.clone()),
            Some(merchant.clone()),
            Some(k.clone())
        ),
        "{}",
        ctx("auth_lookup")
    );
    let s = secret(1, false);
    store
        .add_callback_secret(project.id, &s)
        .await
        .unwrap_or_else(|e| fail(round, "add_callback_secret", e));
    assert_eq!(
        store
            .callback_secrets(project.id)
            .await
            .unwrap_or_else(|e| fail(round, "callback_secrets", e)),
        vec![s.clone()]
    );
    let op = OperatorTokenRecord {
        id: token_id(200 + round),
        name: format!("upgrade {round}"),
        hash: hash_of(round, 2),
        prefix: format!("op_up{round}"),
        created_at: at,
        expires_at: None,
    };
    store
        .insert_operator_token(&op)
        .await
        .unwrap_or_else(|e| fail(round, "insert_operator_token", e));
    assert_eq!(
        store
            .operator_token_by_hash(&op.hash)
            .await
            .unwrap_or_else(|e| fail(round, "operator_token_by_hash", e)),
        Some(op.clone())
    );
    assert!(store
        .operator_tokens()
        .await
        .unwrap_or_else(|e| fail(round, "operator_tokens", e))
        .contains(&op));
    let name = format!("upgrade.round.{round}");
    store
        .put_setting(&name, "on")
        .await
        .unwrap_or_else(|e| fail(round, "put_setting", e));
    assert_eq!(
        store
            .setting(&name)
            .await
            .unwrap_or_else(|e| fail(round, "setting", e)),
        Some("on".to_string())
    );
    let audit = sample_audit(at, "upgrade", &format!("round {round}"));
    store
        .append_audit(&audit)
        .await
        .unwrap_or_else(|e| fail(round, "append_audit", e));
    assert_eq!(
        store
            .audit_records(1)
            .await
            .unwrap_or_else(|e| fail(round, "audit_records", e)),
        vec![audit]
    );

    // Payments and the outbox.
    let p = full_payment(
        payment_id(id(round, 1)),
        project.id,
        &format!("upgrade-{round}"),
    );
    let nonce = format!("upgrade-nonce-{round}");
    let admitted = store
        .admit_create(
            Some(NonceUse {
                project: project.id,
                nonce: &nonce,
                now: at,
                expires_at: at + ms(60_000),
            }),
            project.id,
            &p.merchant_payment_id,
            Some(&p),
        )
        .await
        .unwrap_or_else(|e| fail(round, "admit_create", e));
    assert_eq!(admitted, AdmitOutcome::Inserted, "{}", ctx("admit_create"));
    assert_eq!(
        store
            .payment(p.id)
            .await
            .unwrap_or_else(|e| fail(round, "payment", e)),
        Some(p.clone())
    );
    assert_eq!(
        store
            .payment_by_merchant_id(project.id, &p.merchant_payment_id)
            .await
            .unwrap_or_else(|e| fail(round, "payment_by_merchant_id", e)),
        Some(p.clone())
    );
    let (found, read) = store
        .auth_lookup_with_payment(&tok.hash, None, p.id)
        .await
        .unwrap_or_else(|e| fail(round, "auth_lookup_with_payment", e));
    assert_eq!(
        (found.token, read),
        (Some(tok.clone()), Some(p.clone())),
        "{}",
        ctx("auth_lookup_with_payment")
    );
    let next = changed(&p, PaymentStatus::Completed, at + ms(1));
    let event = sample_event(&next, event_id(id(round, 1)), at);
    store
        .commit_change(&PaymentChange {
            payment: next.clone(),
            expected_version: p.version,
            event: Some(event.clone()),
            audit: None,
        })
        .await
        .unwrap_or_else(|e| fail(round, "commit_change", e));
    assert_eq!(
        store
            .payment(p.id)
            .await
            .unwrap_or_else(|e| fail(round, "payment after change", e)),
        Some(next.clone())
    );
    store
        .due_payments(at, 10)
        .await
        .unwrap_or_else(|e| fail(round, "due_payments", e));
    store
        .backlog()
        .await
        .unwrap_or_else(|e| fail(round, "backlog", e));
    let claimed = store
        .claim_due_events(at + ms(1), 100, Duration::from_secs(30))
        .await
        .unwrap_or_else(|e| fail(round, "claim_due_events", e));
    let lease = claimed
        .iter()
        .find(|c| c.event.event.event_id == event.event.event_id)
        .unwrap_or_else(|| panic!("{}: the event was not claimed", ctx("claim_due_events")))
        .lease;
    let tried = attempt(1, false, Some(500), Some("HTTP 500"));
    store
        .record_attempt(event.event.event_id, lease, &tried, None)
        .await
        .unwrap_or_else(|e| fail(round, "record_attempt", e));
    let records = store
        .events_for_payment(p.id)
        .await
        .unwrap_or_else(|e| fail(round, "events_for_payment", e));
    assert_eq!(records.len(), 1, "{}", ctx("events_for_payment"));
    assert_eq!(records[0].attempts, vec![tried.clone()]);
    let failed = store
        .failed_events(&FailedEventFilter::default(), 1_000)
        .await
        .unwrap_or_else(|e| fail(round, "failed_events", e));
    assert!(
        failed
            .iter()
            .any(|f| f.outbox.event.event_id == event.event.event_id
                && f.last_attempt.as_ref() == Some(&tried)),
        "{}",
        ctx("failed_events")
    );
    let backlog = store
        .backlog()
        .await
        .unwrap_or_else(|e| fail(round, "backlog", e));
    assert!(backlog.failed_events >= 1, "{}", ctx("backlog"));

    // The cabinet.
    let user = UserRecord {
        id: UserId::from_uuid(Uuid::from_u128(0x6100_0000 + round)),
        email: format!("upgrade-{round}@merchant.example"),
        role: Role::Merchant(merchant.id),
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
        .replace_recovery_codes(user.id, &[hash_of(round, 3)])
        .await
        .unwrap_or_else(|e| fail(round, "replace_recovery_codes", e));
    assert_eq!(
        store
            .recovery_codes_left(user.id)
            .await
            .unwrap_or_else(|e| fail(round, "recovery_codes_left", e)),
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
        .put_invite(&invite)
        .await
        .unwrap_or_else(|e| fail(round, "put_invite", e));
    assert_eq!(
        store
            .invite(&invite.token_hash, at)
            .await
            .unwrap_or_else(|e| fail(round, "invite", e)),
        Some(invite.clone())
    );
    assert_eq!(
        store
            .take_invite(&invite.token_hash, at)
            .await
            .unwrap_or_else(|e| fail(round, "take_invite", e)),
        Some(invite)
    );
    let key_name = format!("upgrade:{round}");
    store
        .record_failure(&key_name, at)
        .await
        .unwrap_or_else(|e| fail(round, "record_failure", e));
    assert_eq!(
        store
            .failures_since(&key_name, at, 10)
            .await
            .unwrap_or_else(|e| fail(round, "failures_since", e)),
        vec![at]
    );
    let cabinet_audit = CabinetAuditRecord {
        at,
        user_id: Some(user.id),
        email: user.email.clone(),
        address: None,
        merchant_id: Some(merchant.id),
        project_id: Some(project.id),
        action: "upgrade".to_string(),
        target: format!("round {round}"),
        success: true,
        detail: None,
    };
    store
        .append_cabinet_audit(&cabinet_audit)
        .await
        .unwrap_or_else(|e| fail(round, "append_cabinet_audit", e));
    assert_eq!(
        store
            .cabinet_audit(Some(merchant.id), 10)
            .await
            .unwrap_or_else(|e| fail(round, "cabinet_audit", e)),
        vec![cabinet_audit]
    );
    store
        .record_token_use(tok.id, at)
        .await
        .unwrap_or_else(|e| fail(round, "record_token_use", e));
    assert_eq!(
        store
            .token_last_used(&[tok.id])
            .await
            .unwrap_or_else(|e| fail(round, "token_last_used", e)),
        vec![(tok.id, at)]
    );
    let listed = store
        .find_payments(&PaymentQuery {
            project: project.id,
            status: None,
            created_from: None,
            created_to: None,
            merchant_payment_id: None,
            before: None,
            limit: 10,
        })
        .await
        .unwrap_or_else(|e| fail(round, "find_payments", e));
    assert_eq!(listed, vec![next.clone()], "{}", ctx("find_payments"));
    let events = store
        .find_events(&EventQuery {
            project: project.id,
            state: None,
            payment: None,
            created_from: None,
            created_to: None,
            before: None,
            limit: 10,
        })
        .await
        .unwrap_or_else(|e| fail(round, "find_events", e));
    assert_eq!(events.len(), 1, "{}", ctx("find_events"));
    let page = PaymentPageRecord {
        payment_id: p.id,
        token_hash: hash_of(round, 6),
        token: format!("upgrade{round}{}", "B".repeat(16)).as_str().into(),
        created_at: at,
    };
    assert_eq!(
        store
            .ensure_payment_page(&page)
            .await
            .unwrap_or_else(|e| fail(round, "ensure_payment_page", e)),
        page
    );
    assert_eq!(
        store
            .payment_page(p.id)
            .await
            .unwrap_or_else(|e| fail(round, "payment_page", e)),
        Some(page.clone())
    );
    assert_eq!(
        store
            .payment_page_by_hash(&page.token_hash)
            .await
            .unwrap_or_else(|e| fail(round, "payment_page_by_hash", e)),
        Some(page)
    );
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testing::MemoryStore;

    #[test]
    fn rounds_run_one_after_the_other_on_the_reference_store() {
        futures_executor::block_on(async {
            let store = MemoryStore::new();
            for round in 1..=3 {
                every_statement(&store, round).await;
            }
        });
    }
}
