//! Checks of the appeals ([`crate::store::AppealStore`], [`Store::commit_appeal`]): every field
//! and receipt kept, the insert's bounds (idempotency key, one active appeal per payment, at
//! most [`MAX_APPEALS_PER_SOURCE`] per source), pages in both orders with their filters, and a
//! decision written with its payment changes or not at all.

use super::*;
use crate::appeal::{
    Appeal, AppealInsert, AppealOrder, AppealQuery, AppealReason, AppealSource, AppealState,
    ReceiptInfo, MAX_APPEALS_PER_SOURCE,
};
use crate::ids::AppealId;
use crate::receipt::{Receipt, ReceiptKind};
use crate::store::AppealChange;

/// An appeal id from a small number.
pub fn appeal_id(n: u128) -> AppealId {
    AppealId::from_uuid(Uuid::from_u128(0x6000_0000 + n))
}

/// A receipt of `len` bytes of `kind` (stored as checked; the bytes are a pattern of `n`).
pub fn sample_receipt(kind: ReceiptKind, n: u8, len: usize) -> Receipt {
    let bytes = (0..len).map(|i| (i as u8).wrapping_mul(31) ^ n).collect();
    Receipt::from_stored(kind, bytes)
}

/// An `open` merchant appeal `n` about `payment` of `project`, opened at `at`, every optional
/// field set, with the receipt infos of `receipts`.
pub fn sample_appeal(
    n: u128,
    project: ProjectId,
    payment: PaymentId,
    at: Timestamp,
    receipts: &[Receipt],
) -> Appeal {
    Appeal {
        id: appeal_id(n),
        project_id: project,
        payment_id: payment,
        source: AppealSource::Merchant,
        idempotency_key: Some(format!("appeal-key-{n}")),
        fingerprint: format!("{n:064x}"),
        reason: AppealReason::PaidOtherAmount,
        claimed_amount: Some(amount("1490.25")),
        paid_at: Some(at.saturating_sub(ms(60_000))),
        payer_bank: Some("Т-Банк \"quoted\"".into()),
        receipts: receipts
            .iter()
            .map(|r| ReceiptInfo {
                kind: r.kind(),
                size: u32::try_from(r.len()).expect("a sample receipt is small"),
                sha256: hex::encode(r.sha256()),
            })
            .collect(),
        state: AppealState::Open,
        deadline: at + Duration::from_secs(24 * 3600),
        provider: None,
        resolved_amount: None,
        decided_by: None,
        note: None,
        created_at: at,
        updated_at: at,
        version: 1,
    }
}

async fn insert<S: Store>(store: &S, appeal: &Appeal, receipts: &[Receipt]) -> AppealInsert {
    store
        .insert_appeal(appeal, receipts)
        .await
        .expect("insert_appeal")
}

/// Every field and receipt comes back as written; the insert refuses a second appeal under
/// one key, a second active appeal of one payment, and the fourth appeal of one source.
pub async fn appeals_insert_and_bounds<S: Store>(store: &S) {
    let (p, pay) = (project_id(1), payment_id(1));
    let receipts = [
        sample_receipt(ReceiptKind::Png, 1, 70_000),
        sample_receipt(ReceiptKind::Pdf, 2, 3),
    ];
    let first = sample_appeal(1, p, pay, T0, &receipts);
    assert_eq!(
        insert(store, &first, &receipts).await,
        AppealInsert::Inserted
    );
    assert_eq!(
        store.appeal(first.id).await.expect("appeal"),
        Some(first.clone())
    );
    for (i, r) in receipts.iter().enumerate() {
        let back = store
            .appeal_receipt(first.id, i as u8)
            .await
            .expect("receipt");
        assert_eq!(
            back.as_ref(),
            Some(r),
            "receipt {i} comes back byte for byte"
        );
    }
    assert_eq!(
        store.appeal_receipt(first.id, 2).await.expect("receipt"),
        None
    );
    assert_eq!(store.appeal(appeal_id(99)).await.expect("appeal"), None);

    // The same key again, whatever else differs: the stored one.
    let mut again = sample_appeal(2, p, payment_id(2), T0 + ms(5), &[]);
    again.idempotency_key = first.idempotency_key.clone();
    assert_eq!(
        insert(store, &again, &[]).await,
        AppealInsert::Existing(first.clone())
    );
    // Another project may use the key.
    again.project_id = project_id(2);
    assert_eq!(insert(store, &again, &[]).await, AppealInsert::Inserted);

    // One active appeal per payment.
    let second = sample_appeal(3, p, pay, T0 + ms(10), &[]);
    assert_eq!(
        insert(store, &second, &[]).await,
        AppealInsert::Active(first.clone())
    );
    assert_eq!(
        store.appeal(second.id).await.expect("appeal"),
        None,
        "nothing written"
    );

    // Decided appeals leave room, up to the bound per source.
    let mut decided = first.clone();
    for n in 0..u128::from(MAX_APPEALS_PER_SOURCE) {
        decide(store, &decided, AppealState::Rejected).await;
        if n + 1 == u128::from(MAX_APPEALS_PER_SOURCE) {
            break;
        }
        decided = sample_appeal(10 + n, p, pay, T0 + ms(20 + n as i64), &[]);
        assert_eq!(insert(store, &decided, &[]).await, AppealInsert::Inserted);
    }
    let over = sample_appeal(20, p, pay, T0 + ms(50), &[]);
    assert_eq!(insert(store, &over, &[]).await, AppealInsert::Full);
    // The payer is another source, with a bound of its own.
    let mut payer = sample_appeal(21, p, pay, T0 + ms(60), &[]);
    payer.source = AppealSource::Payer;
    payer.idempotency_key = None;
    assert_eq!(insert(store, &payer, &[]).await, AppealInsert::Inserted);
    let mut payer2 = sample_appeal(22, p, payment_id(3), T0 + ms(61), &[]);
    payer2.source = AppealSource::Payer;
    payer2.idempotency_key = None;
    assert_eq!(
        insert(store, &payer2, &[]).await,
        AppealInsert::Inserted,
        "appeals without a key never meet on it"
    );
}

/// Moves `appeal` to `state` through [`Store::commit_appeal`].
async fn decide<S: Store>(store: &S, appeal: &Appeal, state: AppealState) -> Appeal {
    let mut next = appeal.clone();
    next.state = state;
    next.version += 1;
    next.updated_at = appeal.updated_at + ms(1);
    next.decided_by = Some("operator-1".into());
    let change = AppealChange {
        appeal: next.clone(),
        expected_version: appeal.version,
        payments: Vec::new(),
        audit: None,
    };
    store.commit_appeal(&change).await.expect("commit_appeal");
    next
}

/// Pages in both orders by `(created_at, id)`, each filter and the cursor, as
/// [`AppealQuery::matches`] says.
pub async fn appeal_pages<S: Store>(store: &S) {
    let mut all = Vec::new();
    for n in 0..12u128 {
        let project = project_id(1 + n % 2);
        // Two appeals at one millisecond: the id decides.
        let at = T0 + ms(10 * (n / 2) as i64);
        let mut a = sample_appeal(n, project, payment_id(n), at, &[]);
        a.deadline = T0 + ms(1_000 * n as i64);
        assert_eq!(insert(store, &a, &[]).await, AppealInsert::Inserted);
        if n % 3 == 0 {
            a = decide(store, &a, AppealState::Accepted).await;
        } else if n % 3 == 1 {
            a = decide(store, &a, AppealState::UnderReview).await;
        }
        all.push(a);
    }
    let queries = [
        AppealQuery::newest(5),
        AppealQuery {
            order: AppealOrder::OldestFirst,
            ..AppealQuery::newest(100)
        },
        AppealQuery {
            project: Some(project_id(2)),
            states: vec![AppealState::Open, AppealState::UnderReview],
            order: AppealOrder::OldestFirst,
            ..AppealQuery::newest(3)
        },
        AppealQuery {
            payment: Some(payment_id(4)),
            ..AppealQuery::newest(10)
        },
        AppealQuery {
            deadline_by: Some(T0 + ms(5_000)),
            order: AppealOrder::OldestFirst,
            ..AppealQuery::newest(10)
        },
        AppealQuery {
            after: Some((all[5].created_at, all[5].id)),
            ..AppealQuery::newest(4)
        },
        AppealQuery {
            after: Some((all[5].created_at, all[5].id)),
            order: AppealOrder::OldestFirst,
            ..AppealQuery::newest(4)
        },
    ];
    for q in queries {
        let mut expected: Vec<Appeal> = all.iter().filter(|a| q.matches(a)).cloned().collect();
        expected.sort_by_key(|a| (a.created_at, a.id));
        if q.order == AppealOrder::NewestFirst {
            expected.reverse();
        }
        expected.truncate(q.limit);
        let page = store.find_appeals(&q).await.expect("find_appeals");
        assert_eq!(page, expected, "{q:?}");
    }
}

/// A decision is written with its payment changes and audit record, or, on any conflict,
/// nothing of it is.
pub async fn commit_appeal_is_all_or_nothing<S: Store>(store: &S) {
    let (p, pay) = (project_id(1), payment_id(1));
    let mut payment = sample_payment(pay, p, "order-appeal");
    payment.status = PaymentStatus::Canceled;
    assert_eq!(
        store.insert_payment(&payment).await.expect("insert"),
        InsertOutcome::Inserted
    );
    let appeal = sample_appeal(1, p, pay, T0, &[]);
    assert_eq!(insert(store, &appeal, &[]).await, AppealInsert::Inserted);
    let mut accepted = appeal.clone();
    accepted.state = AppealState::Accepted;
    accepted.resolved_amount = Some(amount("1490.25"));
    accepted.version = 2;
    let in_appeal = changed(&payment, PaymentStatus::Appeal, T0 + ms(1));
    let completed = changed(&in_appeal, PaymentStatus::Completed, T0 + ms(1));
    let step = |before: &Payment, after: &Payment| PaymentChange {
        payment: after.clone(),
        expected_version: before.version,
        event: None,
        audit: None,
        ledger: None,
        history: None,
    };
    let mut change = AppealChange {
        appeal: accepted.clone(),
        expected_version: appeal.version,
        payments: vec![step(&payment, &in_appeal), step(&payment, &completed)],
        audit: Some(sample_audit(T0 + ms(1), "appeal.accept", "a1")),
    };
    // The second payment change expects a version the first moved on: a conflict.
    let stale = store.commit_appeal(&change).await;
    assert_eq!(stale, Err(StoreError::Conflict));
    assert_eq!(
        store.appeal(appeal.id).await.expect("appeal"),
        Some(appeal.clone())
    );
    assert_eq!(
        store.payment(pay).await.expect("payment"),
        Some(payment.clone())
    );
    let audits = store.find_audit_records(10).await.expect("audit");
    assert!(
        audits.is_empty(),
        "nothing of a refused decision: {audits:?}"
    );

    // An appeal at another version: a conflict, nothing written.
    change.payments[1] = step(&in_appeal, &completed);
    change.expected_version = 7;
    assert_eq!(
        store.commit_appeal(&change).await,
        Err(StoreError::Conflict)
    );
    assert_eq!(
        store.payment(pay).await.expect("payment"),
        Some(payment.clone())
    );

    change.expected_version = appeal.version;
    store.commit_appeal(&change).await.expect("commit_appeal");
    assert_eq!(
        store.appeal(appeal.id).await.expect("appeal"),
        Some(accepted)
    );
    assert_eq!(store.payment(pay).await.expect("payment"), Some(completed));
    let audits = store.find_audit_records(10).await.expect("audit");
    assert_eq!(audits.len(), 1);
    // Decided twice: the second finds another version.
    assert_eq!(
        store.commit_appeal(&change).await,
        Err(StoreError::Conflict)
    );
}

/// Concurrent appeals of one payment from several handles: exactly one is stored, every other
/// is told of it.
pub async fn concurrent_appeals<S: Store>(handles: &[&S]) {
    let (p, pay) = (project_id(1), payment_id(1));
    let tries = (0..8u128).map(|n| {
        let store = handles[n as usize % handles.len()];
        let appeal = sample_appeal(n, p, pay, T0 + ms(n as i64), &[]);
        async move { (appeal.id, store.insert_appeal(&appeal, &[]).await) }
    });
    let answers = join_all(tries).await;
    let stored: Vec<AppealId> = answers
        .iter()
        .filter(|(_, a)| a == &Ok(AppealInsert::Inserted))
        .map(|(id, _)| *id)
        .collect();
    assert_eq!(stored.len(), 1, "{answers:?}");
    for (_, answer) in &answers {
        match answer {
            Ok(AppealInsert::Inserted) => {}
            Ok(AppealInsert::Active(a)) => assert_eq!(a.id, stored[0]),
            other => panic!("a concurrent appeal answered {other:?}"),
        }
    }
    let page = handles[0]
        .find_appeals(&AppealQuery {
            payment: Some(pay),
            ..AppealQuery::newest(10)
        })
        .await
        .expect("find_appeals");
    assert_eq!(page.len(), 1);
}
