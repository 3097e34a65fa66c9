//! A store keeps answering beside a later schema: [`every_statement`] writes one of each
//! record and reads each back through every read of the port, so that a store which caches
//! prepared statements has all of them prepared; an adapter's upgrade test runs it, then
//! changes the schema the way a later build's migration would (a column added to every table),
//! then runs it again on the same, still open store. A statement that selects `*` fails the
//! second round on PostgreSQL (`0A000: cached plan must not change result type`): the old
//! node would answer 503 until restarted.

use super::*;
use crate::appeal::{Appeal, AppealInsert, AppealOrder, AppealQuery, AppealSource, AppealState};
use crate::event::FailedEventFilter;
use crate::payer::PaymentPageRecord;
use crate::project::OperatorTokenRecord;
use crate::receipt::{Receipt, ReceiptKind};
use crate::store::AppealChange;
use crate::store::CredentialStoreExt;
use crate::store::MerchantStoreExt;
use crate::store::OperatorStoreExt;
use crate::store::PayerPageStoreExt;
use crate::store::{EventQuery, PaymentQuery};

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

/// One round of writes and reads through every statement of the port, with records of their
/// own (`round`, 1 to 25, keeps the ids of different rounds apart), each read checked against
/// what was written. Rounds run one after the other on one store. Answers the merchant and
/// project the round wrote, for the cabinet's round on the same store
/// (`payments_cabinet::testing::contract::every_statement`).
///
/// # Panics
/// On a store error or a read that differs from the write, naming the operation.
pub async fn every_statement<S: Store>(store: &S, round: u128) -> (MerchantId, ProjectId) {
    let ctx = |what: &str| format!("round {round}: {what}");
    let at = T0 + ms(i64::try_from(round).expect("small"));

    // The directory.
    let merchant = sample_merchant(id(round, 1), "Upgrade Ltd");
    store
        .upsert_merchant(&merchant)
        .await
        .unwrap_or_else(|e| fail(round, "upsert_merchant", e));
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
        .upsert_project(&project)
        .await
        .unwrap_or_else(|e| fail(round, "upsert_project", e));
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
            .find_active_key_projects(&k.keyid)
            .await
            .unwrap_or_else(|e| fail(round, "find_active_key_projects", e)),
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
        .insert_callback_secret(project.id, &s)
        .await
        .unwrap_or_else(|e| fail(round, "insert_callback_secret", e));
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
        .upsert_setting(&name, "on")
        .await
        .unwrap_or_else(|e| fail(round, "upsert_setting", e));
    assert_eq!(
        store
            .setting(&name)
            .await
            .unwrap_or_else(|e| fail(round, "setting", e)),
        Some("on".to_string())
    );
    let audit = sample_audit(at, "upgrade", &format!("round {round}"));
    store
        .insert_audit(&audit)
        .await
        .unwrap_or_else(|e| fail(round, "insert_audit", e));
    assert_eq!(
        store
            .find_audit_records(1)
            .await
            .unwrap_or_else(|e| fail(round, "find_audit_records", e)),
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
            None,
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
            history: None,
            ledger: None,
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

    // What the cabinet shows.
    store
        .update_token_use(tok.id, at)
        .await
        .unwrap_or_else(|e| fail(round, "update_token_use", e));
    assert_eq!(
        store
            .token_last_used(&[tok.id])
            .await
            .unwrap_or_else(|e| fail(round, "token_last_used", e)),
        vec![(tok.id, at)]
    );
    let listed = store
        .find_payments(&PaymentQuery {
            payment_method: Some(next.payment_method),
            merchant_payment_id_prefix: Some(next.merchant_payment_id.as_str()[..1].to_string()),
            ..PaymentQuery::new(project.id, 10)
        })
        .await
        .unwrap_or_else(|e| fail(round, "find_payments", e));
    assert_eq!(listed, vec![next.clone()], "{}", ctx("find_payments"));
    let events = store
        .find_events(&EventQuery::new(project.id, 10))
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
            .insert_payment_page_if_none(&page)
            .await
            .unwrap_or_else(|e| fail(round, "insert_payment_page_if_none", e)),
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

    // The ledger: an operator's entry under the balance's lock, the balance, a page, totals.
    let posting = adjustment(project.id, id(round, 1), 12_345, at);
    let posted =
        crate::service::post_entry(store, posting, true, sample_audit(at, "ledger.adjust", "u"))
            .await
            .unwrap_or_else(|e| fail(round, "ledger post", e));
    assert!(
        matches!(posted, crate::service::Posted::Appended(ref e) if e.seq == 1),
        "{}: {posted:?}",
        ctx("ledger post")
    );
    let balance = store
        .balance(project.id)
        .await
        .unwrap_or_else(|e| fail(round, "balance", e));
    assert_eq!(balance.balance.units(), 12_345, "{}", ctx("balance"));
    let entries = store
        .find_entries(&crate::store::EntryQuery::new(project.id, 5))
        .await
        .unwrap_or_else(|e| fail(round, "find_entries", e));
    assert_eq!(entries.len(), 1, "{}", ctx("find_entries"));
    let totals = store
        .entry_totals(project.id, at, at + ms(1))
        .await
        .unwrap_or_else(|e| fail(round, "entry_totals", e));
    assert_eq!(totals.len(), 1, "{}", ctx("entry_totals"));
    appeal_statements(store, round).await;
    (merchant.id, project.id)
}

/// The appeals' statements (schema 22), the last part of [`every_statement`]: an insert with
/// its receipt, the reads of a refused insert (the key, the payment's active appeal, the count
/// per source), every read of the port and a decision (`commit_appeal`, the transaction's
/// `update_appeal`). Rounds keep their records apart.
async fn appeal_statements<S: Store>(store: &S, round: u128) {
    let (project, payment) = (project_id(round), payment_id(round * 10));
    let at = T0 + ms(i64::try_from(round).expect("small"));
    let receipt = sample_receipt(ReceiptKind::Png, 1, 100);
    let appeal = sample_appeal(
        round * 10,
        project,
        payment,
        at,
        std::slice::from_ref(&receipt),
    );
    let insert = |a: Appeal, receipts: Vec<Receipt>| async move {
        store
            .insert_appeal(&a, &receipts)
            .await
            .unwrap_or_else(|e| panic!("round {round}: insert_appeal: {e:?}"))
    };
    assert_eq!(
        insert(appeal.clone(), vec![receipt.clone()]).await,
        AppealInsert::Inserted
    );
    assert_eq!(
        insert(appeal.clone(), Vec::new()).await,
        AppealInsert::Existing(appeal.clone())
    );
    let mut payer = sample_appeal(round * 10 + 1, project, payment, at, &[]);
    (payer.source, payer.idempotency_key) = (AppealSource::Payer, None);
    assert_eq!(
        insert(payer.clone(), Vec::new()).await,
        AppealInsert::Active(appeal.clone())
    );
    assert_eq!(
        store.appeal(appeal.id).await.ok(),
        Some(Some(appeal.clone()))
    );
    assert_eq!(
        store.appeal_receipt(appeal.id, 0).await.ok(),
        Some(Some(receipt))
    );
    let queries = [
        AppealQuery {
            project: Some(project),
            states: vec![AppealState::Open],
            ..AppealQuery::newest(10)
        },
        AppealQuery {
            payment: Some(payment),
            deadline_by: Some(appeal.deadline),
            order: AppealOrder::OldestFirst,
            after: Some((at - ms(1), appeal.id)),
            ..AppealQuery::newest(10)
        },
    ];
    for q in queries {
        let page = store.find_appeals(&q).await.ok();
        assert_eq!(page, Some(vec![appeal.clone()]), "round {round}: {q:?}");
    }
    let mut decided = appeal.clone();
    (decided.state, decided.version) = (AppealState::Rejected, appeal.version + 1);
    let change = AppealChange {
        appeal: decided.clone(),
        expected_version: appeal.version,
        payments: Vec::new(),
        audit: None,
    };
    assert_eq!(store.commit_appeal(&change).await, Ok(()), "round {round}");
    assert_eq!(store.appeal(appeal.id).await.ok(), Some(Some(decided)));
    assert_eq!(insert(payer, Vec::new()).await, AppealInsert::Inserted);
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
