//! Checks of the project ledger: entries written with the payment change that causes them,
//! once per payment version; the operator's entries under the balance's lock; pages, totals
//! and the balance row.

use super::*;
use crate::ids::EntryId;
use crate::ledger::{self, Balance, EntryKind, Posting, TxReference, Usdt, UsdtAddress};
use crate::service::Posted;
use crate::store::EntryQuery;

/// Entry id `n`.
pub fn entry_id(n: u128) -> EntryId {
    EntryId::from_uuid(Uuid::from_u128(
        0x0e00_0000_0000_4000_8000_0000_0000_0000 | n,
    ))
}

/// A `processing` payment of `project` with requisites and a pricing (course 100, fee 11 %).
pub fn priced_payment(id: PaymentId, project: ProjectId, merchant_payment_id: &str) -> Payment {
    let mut p = sample_payment(id, project, merchant_payment_id);
    p.amount = amount("3400");
    p.initial_amount = amount("3400");
    p.status = PaymentStatus::Processing;
    p.requisites = Some(Requisites {
        requisite: "+79000000001".into(),
        holder_name: "Мария К.".into(),
        bank: None,
        qrcode_link: None,
        deeplink_url: None,
    });
    p.pricing = Some(Pricing {
        course: Course::new(dec("100")).expect("a valid course"),
        fee_percent: FeePercent::new(dec("11")).expect("a valid fee"),
    });
    p
}

/// A change from `before` to `after` with the entry the core makes for it.
fn ledger_change(before: &Payment, after: &Payment, entry: u128) -> PaymentChange {
    PaymentChange {
        payment: after.clone(),
        expected_version: before.version,
        event: None,
        audit: None,
        ledger: ledger::payment_posting(before, after, || entry_id(entry)),
        history: None,
    }
}

/// An operator adjustment of `project`.
pub fn adjustment(project: ProjectId, n: u128, units: i64, at: Timestamp) -> Posting {
    Posting {
        id: entry_id(n),
        project_id: project,
        kind: EntryKind::OperatorAdjustment,
        amount: Usdt::from_units(units),
        at,
        payment: None,
        destination: None,
        reference: None,
        reason: Some(format!("adjustment {n}")),
        actor: Some("operator-1".into()),
    }
}

/// A payout of `project` with the reference `n` (64 hex digits).
pub fn payout(project: ProjectId, n: u128, units: i64, at: Timestamp) -> Posting {
    Posting {
        kind: EntryKind::Payout,
        amount: Usdt::from_units(-units),
        destination: Some(
            UsdtAddress::parse("TR7NHqjeKQxGTCi8q8ZY4pL8otSzgjLj6t").expect("a valid address"),
        ),
        reference: Some(TxReference::parse(&format!("{n:064x}")).expect("64 hex digits")),
        reason: None,
        ..adjustment(project, n, 0, at)
    }
}

/// A payment that completes gets a credit of its `amount_usdt_rate` in the change's
/// transaction, numbered 1 with the balance after it; a re-check to another amount adds the
/// difference; a cancel reverses the rest. Every entry names its payment version, the
/// balance row follows, and an entry for a version already counted is refused with nothing of
/// its change written.
pub async fn ledger_follows_payment_changes<S: Store>(store: &S) {
    let project = project_id(1);
    let p = priced_payment(payment_id(1), project, "order-1");
    inserted(store, &p).await;
    assert_eq!(
        store.balance(project).await.expect("balance"),
        Balance::empty(project)
    );
    let mut done = changed(&p, PaymentStatus::Completed, T0 + ms(1_000));
    store
        .commit_change(&ledger_change(&p, &done, 1))
        .await
        .expect("completion");
    let b = store.balance(project).await.expect("balance");
    // 3400 at course 100 and 11 %: amount_usdt_rate 30.2600 (the spec's worked example).
    assert_eq!(b.balance.to_string(), "30.2600");
    assert_eq!((b.entries, b.totals.credits), (1, b.balance));
    assert_eq!(b.updated_at, Some(T0 + ms(1_000)));

    // The same version's entry again (another node's retry of the same change): refused,
    // and the payment keeps its version.
    let again = PaymentChange {
        expected_version: done.version,
        ..ledger_change(&p, &done, 2)
    };
    let refused = store.commit_change(&again).await;
    assert!(
        matches!(refused, Err(StoreError::Duplicate(_))),
        "a second entry for one payment version: {refused:?}"
    );
    assert_eq!(
        store.payment(p.id).await.expect("payment"),
        Some(done.clone())
    );
    assert_eq!(store.balance(project).await.expect("balance"), b);
    // A change that moves the payment on, with its history, but whose entry is one already
    // written: refused, and nothing of it is written, the payment's new version included.
    let moved = changed(&done, PaymentStatus::Completed, T0 + ms(1_500));
    let mut twice = ledger_change(&done, &moved, 5);
    twice.ledger = ledger_change(&p, &done, 5).ledger;
    twice.history = Some(crate::history::StatusChange {
        payment_id: p.id,
        version: moved.version,
        from: Some(done.status),
        to: moved.status,
        amount: moved.amount,
        at: moved.updated_at,
        cause: crate::history::ChangeCause::RecheckResolved,
        source: Some(crate::history::ChangeSource::Support),
    });
    let refused = store.commit_change(&twice).await;
    assert!(
        matches!(refused, Err(StoreError::Duplicate(_))),
        "an entry for a version already counted: {refused:?}"
    );
    assert_eq!(
        store.payment(p.id).await.expect("payment"),
        Some(done.clone())
    );
    assert_eq!(store.balance(project).await.expect("balance"), b);

    // A re-check found 1700: the difference, at the same course and fee.
    let mut rechecked = changed(&done, PaymentStatus::Completed, T0 + ms(2_000));
    rechecked.amount = amount("1700");
    store
        .commit_change(&ledger_change(&done, &rechecked, 3))
        .await
        .expect("re-check");
    done = rechecked;
    let canceled = changed(&done, PaymentStatus::Canceled, T0 + ms(3_000));
    store
        .commit_change(&ledger_change(&done, &canceled, 4))
        .await
        .expect("cancel");

    let entries = store
        .find_entries(&EntryQuery {
            oldest_first: true,
            ..EntryQuery::new(project, 10)
        })
        .await
        .expect("entries");
    type Seen = (u64, EntryKind, String, String, Option<(PaymentId, u64)>);
    let seen: Vec<Seen> = entries
        .iter()
        .map(|e| {
            (
                e.seq,
                e.posting.kind,
                e.posting.amount.to_string(),
                e.balance_after.to_string(),
                e.posting.payment,
            )
        })
        .collect();
    assert_eq!(
        seen,
        vec![
            (
                1,
                EntryKind::Credit,
                "30.2600".into(),
                "30.2600".into(),
                Some((p.id, 2))
            ),
            (
                2,
                EntryKind::RecheckAdjustment,
                "-15.1300".into(),
                "15.1300".into(),
                Some((p.id, 3))
            ),
            (
                3,
                EntryKind::Reversal,
                "-15.1300".into(),
                "0.0000".into(),
                Some((p.id, 4))
            ),
        ]
    );
    let b = store.balance(project).await.expect("balance");
    assert_eq!((b.entries, b.balance), (3, Usdt::ZERO));
    assert_eq!(b.totals.recheck_adjustments.to_string(), "-15.1300");
    assert_eq!(b.totals.reversals.to_string(), "-15.1300");
    // Another project's ledger is untouched.
    assert_eq!(
        store.balance(project_id(2)).await.expect("balance"),
        Balance::empty(project_id(2))
    );
}

/// A payout is refused beyond the balance unless forced, checked and appended under the
/// balance's lock with its audit record; its reference is unique in the project (not across
/// projects); entry times never go back.
pub async fn payouts_and_adjustments<S: Store>(store: &S) {
    let (a, b) = (project_id(1), project_id(2));
    let audit = |n: &str| sample_audit(T0, "ledger.payout", n);
    let post = |posting: Posting, forced: bool, target: &'static str| async move {
        crate::service::post_entry(store, posting, forced, audit(target)).await
    };
    assert_eq!(
        post(payout(a, 1, 10_000, T0), false, "p1").await,
        Ok(Posted::BeyondBalance(Usdt::ZERO)),
        "nothing to pay out"
    );
    let credit = post(adjustment(a, 2, 25_000, T0 + ms(10)), true, "a2")
        .await
        .expect("adjustment");
    assert!(matches!(credit, Posted::Appended(ref e) if e.seq == 1));
    let Posted::Appended(paid) = post(payout(a, 1, 20_000, T0 + ms(20)), false, "p1")
        .await
        .expect("payout")
    else {
        panic!("a payout within the balance is appended");
    };
    assert_eq!((paid.seq, paid.balance_after.units()), (2, 5_000));
    // The same reference again in the project: refused; in another project: its own.
    let twice = post(payout(a, 1, 1_000, T0 + ms(30)), true, "p1").await;
    assert!(matches!(twice, Err(StoreError::Duplicate(_))), "{twice:?}");
    let in_b = Posting {
        id: entry_id(101),
        ..payout(b, 1, 1_000, T0 + ms(30))
    };
    let other = post(in_b, true, "b1").await.expect("another project");
    assert!(matches!(other, Posted::Appended(ref e) if e.balance_after.units() == -1_000));
    // Forced beyond the balance; a clock behind the last entry keeps the order.
    let Posted::Appended(forced) = post(payout(a, 3, 9_000, T0), true, "p3")
        .await
        .expect("forced")
    else {
        panic!("a forced payout is appended");
    };
    assert_eq!(forced.balance_after.units(), -4_000);
    assert_eq!(
        forced.posting.at,
        T0 + ms(20),
        "an entry's time never goes back"
    );
    let balance = store.balance(a).await.expect("balance");
    assert_eq!(
        (
            balance.entries,
            balance.balance.units(),
            balance.totals.payouts.units()
        ),
        (3, -4_000, -29_000)
    );
    let audited = store.find_audit_records(10).await.expect("audit");
    assert_eq!(
        audited.len(),
        4,
        "one audit record per appended entry: {audited:?}"
    );
    let found = store
        .find_entries(&EntryQuery {
            reference: paid.posting.reference.clone(),
            ..EntryQuery::new(a, 5)
        })
        .await
        .expect("by reference");
    assert_eq!(found, vec![paid]);
}

/// Pages newest first and oldest first from a cursor, filters by kind, time and payment, and
/// the totals of a period by kind, summed by the store.
pub async fn entry_pages_and_totals<S: Store>(store: &S) {
    let project = project_id(1);
    for n in 1..=7u128 {
        let at = T0 + ms(i64::try_from(n).expect("small") * 1_000);
        let posting = if n % 3 == 0 {
            payout(project, n, 100, at)
        } else {
            adjustment(project, n, 1_000, at)
        };
        crate::service::post_entry(store, posting, true, sample_audit(at, "ledger", "x"))
            .await
            .expect("post");
    }
    let seqs = |es: &[ledger::LedgerEntry]| es.iter().map(|e| e.seq).collect::<Vec<_>>();
    let first = store
        .find_entries(&EntryQuery::new(project, 3))
        .await
        .expect("page");
    assert_eq!(seqs(&first), vec![7, 6, 5]);
    let last = first.last().expect("a full page");
    let second = store
        .find_entries(&EntryQuery {
            after: Some((last.posting.at, last.seq)),
            ..EntryQuery::new(project, 3)
        })
        .await
        .expect("page");
    assert_eq!(seqs(&second), vec![4, 3, 2]);
    let up = store
        .find_entries(&EntryQuery {
            after: Some((second[0].posting.at, second[0].seq)),
            oldest_first: true,
            ..EntryQuery::new(project, 10)
        })
        .await
        .expect("page");
    assert_eq!(seqs(&up), vec![5, 6, 7]);
    // A period and a cursor together: the cursor inside the period, and the period's end
    // before the cursor.
    let window = |oldest_first, after: (i64, u64)| EntryQuery {
        created_from: Some(T0 + ms(2_000)),
        created_to: Some(T0 + ms(7_000)),
        after: Some((T0 + ms(after.0), after.1)),
        oldest_first,
        ..EntryQuery::new(project, 10)
    };
    for (q, want) in [
        (window(false, (4_000, 4)), vec![3, 2]),
        (window(true, (3_000, 3)), vec![4, 5, 6]),
        (window(false, (7_000, 7)), vec![6, 5, 4, 3, 2]),
        (window(true, (1_000, 1)), vec![2, 3, 4, 5, 6]),
    ] {
        let found = store.find_entries(&q).await.expect("a page");
        assert_eq!(seqs(&found), want, "{q:?}");
    }
    let payouts = store
        .find_entries(&EntryQuery {
            kind: Some(EntryKind::Payout),
            created_from: Some(T0 + ms(3_000)),
            created_to: Some(T0 + ms(6_000)),
            ..EntryQuery::new(project, 10)
        })
        .await
        .expect("filtered");
    assert_eq!(seqs(&payouts), vec![3]);
    let none = store
        .find_entries(&EntryQuery {
            payment: Some(payment_id(9)),
            ..EntryQuery::new(project, 10)
        })
        .await
        .expect("by payment");
    assert!(none.is_empty());
    let totals = store
        .entry_totals(project, T0 + ms(2_000), T0 + ms(7_000))
        .await
        .expect("totals");
    // Entries 2..=6: payouts 3 and 6 (-100 each), adjustments 2, 4, 5 (+1000 each).
    assert_eq!(
        totals
            .iter()
            .map(|(k, t)| (*k, t.count, t.sum.units()))
            .collect::<Vec<_>>(),
        vec![
            (EntryKind::Payout, 2, -200),
            (EntryKind::OperatorAdjustment, 3, 3_000)
        ]
    );
}

/// A transaction that appends and then fails leaves neither the entry nor the balance.
pub async fn ledger_append_is_all_or_nothing<S: Store>(store: &S) {
    let project = project_id(1);
    let posting = std::sync::Arc::new(adjustment(project, 1, 5_000, T0));
    let failed = crate::store::transact(store, move |tx| {
        let posting = std::sync::Arc::clone(&posting);
        Box::pin(async move {
            tx.insert_posting(&posting).await?;
            Err::<(), _>(StoreError::Conflict)
        })
    })
    .await;
    assert_eq!(failed, Err(StoreError::Conflict));
    assert_eq!(
        store.balance(project).await.expect("balance"),
        Balance::empty(project)
    );
    assert!(store
        .find_entries(&EntryQuery::new(project, 5))
        .await
        .expect("entries")
        .is_empty());
}

/// Payouts raced from every handle against one balance: the check and the append see the
/// same balance (the store locks it), so exactly as many are appended as the balance covers
/// and the balance never goes below zero; the entries are numbered without gaps.
pub async fn concurrent_payouts<S: Store>(handles: &[&S]) {
    let project = project_id(1);
    let first = handles[0];
    crate::service::post_entry(
        first,
        adjustment(project, 1, 25_000, T0),
        true,
        sample_audit(T0, "ledger.adjust", "x"),
    )
    .await
    .expect("the balance to pay out from");
    let tries = handles.iter().cycle().take(6).enumerate().map(|(i, h)| {
        let n = 10 + u128::try_from(i).expect("small");
        async move {
            crate::service::post_entry(
                *h,
                payout(project, n, 10_000, T0 + ms(1)),
                false,
                sample_audit(T0, "ledger.payout", "x"),
            )
            .await
        }
    });
    let results = join_all(tries).await;
    let appended = results
        .iter()
        .filter(|r| matches!(r, Ok(Posted::Appended(_))))
        .count();
    let refused = results
        .iter()
        .filter(|r| matches!(r, Ok(Posted::BeyondBalance(_))))
        .count();
    assert_eq!((appended, refused), (2, 4), "{results:?}");
    let b = first.balance(project).await.expect("balance");
    assert_eq!((b.entries, b.balance.units()), (3, 5_000));
    let seqs: Vec<u64> = first
        .find_entries(&EntryQuery {
            oldest_first: true,
            ..EntryQuery::new(project, 10)
        })
        .await
        .expect("entries")
        .iter()
        .map(|e| e.seq)
        .collect();
    assert_eq!(seqs, vec![1, 2, 3]);
}

/// Completions of one project's payments raced from every handle, each with its credit, and
/// each tried twice (a retry of the same change, as another node would): every payment is
/// credited once, the entries are numbered 1..n without gaps with each balance the previous
/// one plus the entry, the balance row equals the entries, and entry times never go back.
pub async fn concurrent_credits<S: Store>(handles: &[&S]) {
    let project = project_id(1);
    let n: u128 = 24;
    let mut changes = Vec::new();
    for i in 1..=n {
        let p = priced_payment(payment_id(i), project, &format!("order-{i}"));
        inserted(handles[0], &p).await;
        // Times out of order: the entries' never go back all the same.
        let at = T0 + ms(1_000 + i64::try_from((i * 7) % 11).expect("small"));
        let done = changed(&p, PaymentStatus::Completed, at);
        changes.push(ledger_change(&p, &done, i));
    }
    let tries = changes
        .iter()
        .chain(changes.iter())
        .zip(handles.iter().cycle())
        .map(|(change, h)| async move { h.commit_change(change).await });
    let results = join_all(tries).await;
    let ok = results.iter().filter(|r| r.is_ok()).count();
    let refused = results
        .iter()
        .filter(|r| matches!(r, Err(StoreError::Conflict | StoreError::Duplicate(_))))
        .count();
    assert_eq!((ok, refused), (24, 24), "{results:?}");
    let entries = handles[0]
        .find_entries(&EntryQuery {
            oldest_first: true,
            ..EntryQuery::new(project, 100)
        })
        .await
        .expect("entries");
    let mut by_seq = entries.clone();
    by_seq.sort_by_key(|e| e.seq);
    let seqs: Vec<u64> = by_seq.iter().map(|e| e.seq).collect();
    let mut balance = Usdt::ZERO;
    for (i, e) in by_seq.iter().enumerate() {
        balance = balance.checked_add(e.posting.amount).expect("no overflow");
        assert_eq!(
            e.seq,
            u64::try_from(i + 1).expect("small"),
            "numbers {seqs:?}"
        );
        assert_eq!(e.balance_after, balance, "entry {}", e.seq);
        assert_eq!(e.posting.kind, EntryKind::Credit);
        if i > 0 {
            assert!(e.posting.at >= by_seq[i - 1].posting.at, "entry {}", e.seq);
        }
    }
    let credited: std::collections::BTreeSet<_> =
        entries.iter().filter_map(|e| e.posting.payment).collect();
    assert_eq!(credited.len(), 24);
    let b = handles[0].balance(project).await.expect("balance");
    assert_eq!(
        (b.entries, b.balance, b.totals.credits),
        (24, balance, balance)
    );
    assert_eq!(b.updated_at, by_seq.last().map(|e| e.posting.at));
}

/// A credit that would take the balance beyond [`ledger::MAX_BALANCE_UNITS`] is refused, and
/// nothing of its change is written: the payment keeps its status and version, the balance
/// and the entries stay as they were.
pub async fn a_credit_beyond_the_bound_is_refused<S: Store>(store: &S) {
    let project = project_id(1);
    crate::service::post_entry(
        store,
        adjustment(project, 1, ledger::MAX_BALANCE_UNITS, T0),
        true,
        sample_audit(T0, "ledger.adjust", "x"),
    )
    .await
    .expect("an adjustment up to the bound");
    let before = store.balance(project).await.expect("balance");
    let p = priced_payment(payment_id(1), project, "order-1");
    inserted(store, &p).await;
    let done = changed(&p, PaymentStatus::Completed, T0 + ms(1_000));
    let refused = store.commit_change(&ledger_change(&p, &done, 2)).await;
    assert!(
        matches!(refused, Err(StoreError::Corrupt(_))),
        "a balance beyond the bound: {refused:?}"
    );
    assert_eq!(store.payment(p.id).await.expect("payment"), Some(p));
    assert_eq!(store.balance(project).await.expect("balance"), before);
    let entries = store
        .find_entries(&EntryQuery::new(project, 5))
        .await
        .expect("entries");
    assert_eq!(entries.len(), 1);
}
