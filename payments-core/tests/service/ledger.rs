//! The project ledger through the service: for any sequence of operator transitions, payouts
//! and adjustments, the ledger is what the payments and the operator's entries say.

use std::collections::{HashMap, HashSet};
use std::time::Duration;

use futures_executor::block_on;
use payments_core::ledger::{EntryKind, LedgerEntry, Usdt};
use payments_core::payment::{Payment, PaymentStatus};
use payments_core::service::{Actor, LedgerError, PayoutRequest};
use payments_core::store::{EntryQuery, LedgerStore, PaymentQuery, PaymentStore, Store};
use payments_core::testing::strategies;
use payments_core::transition::Trigger;
use payments_core::{PaymentId, ProjectId};
use proptest::prelude::*;

use crate::common::{merchant, project};
use crate::support::{body, setup, Setup};

/// One step of a random history.
#[derive(Debug, Clone)]
enum Step {
    /// An operator trigger (legal or not) on payment `n` after a pause.
    Operate(usize, Duration, Trigger),
    /// A payout of `units` ten-thousandths, forced or not.
    Payout(i64, bool),
    /// An operator adjustment.
    Adjust(i64),
}

fn step(payments: usize) -> impl Strategy<Value = Step> {
    let operator_trigger = strategies::trigger().prop_filter("an operator's trigger", |t| {
        !matches!(
            t,
            Trigger::RequisitesIssued { .. } | Trigger::RequisitesRefused { .. }
        )
    });
    prop_oneof![
        6 => (0..payments, 0..400_000u64, operator_trigger)
            .prop_map(|(n, ms, t)| Step::Operate(n, Duration::from_millis(ms * 3), t)),
        1 => (1..400_000i64, any::<bool>()).prop_map(|(u, f)| Step::Payout(u, f)),
        1 => (-50_000..50_000i64).prop_filter("not zero", |u| *u != 0).prop_map(Step::Adjust),
    ]
}

fn entries(s: &Setup, project: ProjectId) -> Vec<LedgerEntry> {
    block_on(s.h.store.find_entries(&EntryQuery {
        oldest_first: true,
        ..EntryQuery::new(project, 10_000)
    }))
    .unwrap()
}

fn payments(s: &Setup, project: ProjectId) -> Vec<Payment> {
    block_on(s.h.store.find_payments(&PaymentQuery::new(project, 1_000))).unwrap()
}

/// What a payment is owed for, written from the words and not from the code: the
/// `amount_usdt_rate` of a live payment that is completed (a re-check of a completed payment
/// keeps it until it ends).
fn completed_credit(p: &Payment) -> Usdt {
    let completed = p.status == PaymentStatus::Completed
        || (p.status == PaymentStatus::Appeal && p.appeal_from == Some(PaymentStatus::Completed));
    if p.is_test() || !completed {
        return Usdt::ZERO;
    }
    let rate = p
        .merchant_information()
        .expect("completed with a pricing")
        .amount_usdt_rate;
    Usdt::parse(&rate.to_string()).expect("4 decimals")
}

/// The invariants of a project's ledger against its payments.
fn check(s: &Setup, project: ProjectId) -> Result<(), TestCaseError> {
    let entries = entries(s, project);
    let mut running = Usdt::ZERO;
    let mut versions = HashSet::new();
    let mut by_payment: HashMap<PaymentId, Usdt> = HashMap::new();
    let mut operator = Usdt::ZERO;
    for (i, e) in entries.iter().enumerate() {
        running = running.checked_add(e.posting.amount).unwrap();
        prop_assert_eq!(e.seq, i as u64 + 1, "numbered without gaps");
        prop_assert_eq!(e.balance_after, running, "balance_after is the running sum");
        match e.posting.payment {
            Some(v) => {
                prop_assert!(versions.insert(v), "one entry per payment version: {:?}", v);
                let part = by_payment.entry(v.0).or_default();
                *part = part.checked_add(e.posting.amount).unwrap();
            }
            None => {
                prop_assert!(matches!(
                    e.posting.kind,
                    EntryKind::Payout | EntryKind::OperatorAdjustment
                ));
                operator = operator.checked_add(e.posting.amount).unwrap();
            }
        }
        if i > 0 {
            prop_assert!(
                e.posting.at >= entries[i - 1].posting.at,
                "time never goes back"
            );
        }
    }
    let mut credited = Usdt::ZERO;
    for p in payments(s, project) {
        let c = completed_credit(&p);
        prop_assert_eq!(
            by_payment.remove(&p.id).unwrap_or_default(),
            c,
            "payment {} in {} contributes its credit",
            p.id,
            p.status.as_str()
        );
        credited = credited.checked_add(c).unwrap();
    }
    prop_assert!(by_payment.is_empty(), "entries of unknown payments");
    let balance = block_on(s.h.service.balances().balance(project)).unwrap();
    prop_assert_eq!(balance.balance, running);
    prop_assert_eq!(balance.entries, entries.len() as u64);
    // The statement of it: completed live payments' amount_usdt_rate, minus payouts,
    // plus adjustments.
    prop_assert_eq!(balance.balance, credited.checked_add(operator).unwrap());
    let t = balance.totals;
    let sum = [
        t.credits,
        t.reversals,
        t.recheck_adjustments,
        t.payouts,
        t.operator_adjustments,
    ]
    .into_iter()
    .try_fold(Usdt::ZERO, Usdt::checked_add)
    .unwrap();
    prop_assert_eq!(sum, balance.balance, "the totals add up to the balance");
    Ok(())
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 48, ..ProptestConfig::default() })]

    /// Any history of operator transitions (the state machine's strategies), payouts and
    /// adjustments on three live payments and one test payment: the ledger is the payments'
    /// credits plus the operator's entries, each payment version counted at most once, and
    /// the reconciliation finds nothing; the test project's balance never moves.
    #[test]
    fn the_ledger_is_the_payments_and_the_operators_entries(
        steps in proptest::collection::vec(step(4), 1..40)
    ) {
        let s = setup();
        let test_merchant = merchant(2, Some("https://merchant.example.com/t"));
        let test_project = project(2, &test_merchant, true, None);
        s.h.add(&test_merchant, &test_project);
        let mut ids: Vec<PaymentId> = (0..3)
            .map(|i| s.created(&body(&format!("order-{i}"), "3400.55")).id)
            .collect();
        let test = block_on(s.h.create(test_project.id, body("t-1", "1500").as_bytes()))
            .expect("a test payment");
        ids.push(test.payment.id);
        let actor = Actor("operator:alice".into());
        let mut reference = 0u64;
        for step in steps {
            match step {
                Step::Operate(n, pause, trigger) => {
                    s.h.advance(pause);
                    let _ = block_on(s.h.service.payments().operate(ids[n], trigger, &actor));
                }
                Step::Payout(units, forced) => {
                    reference += 1;
                    let request = PayoutRequest {
                        amount: Usdt::from_units(units),
                        destination: "TR7NHqjeKQxGTCi8q8ZY4pL8otSzgjLj6t".parse().unwrap(),
                        reference: format!("{reference:064x}").parse().unwrap(),
                        force_reason: forced.then(|| "paid by hand".to_string()),
                    };
                    let before = block_on(s.h.service.balances().balance(s.project.id)).unwrap();
                    match block_on(s.h.service.balances().record_payout(s.project.id, &request, &actor)) {
                        Ok((e, new)) => {
                            prop_assert!(new);
                            prop_assert!(forced || before.balance.units() >= units);
                            prop_assert_eq!(e.posting.amount.units(), -units);
                        }
                        Err(LedgerError::BeyondBalance { balance, .. }) => {
                            prop_assert!(!forced && balance.units() < units);
                        }
                        Err(e) => return Err(TestCaseError::fail(format!("payout: {e}"))),
                    }
                }
                Step::Adjust(units) => {
                    block_on(s.h.service.balances().record_adjustment(
                        s.project.id,
                        Usdt::from_units(units),
                        "correction",
                        &actor,
                    ))
                    .unwrap();
                }
            }
            check(&s, s.project.id)?;
        }
        prop_assert!(entries(&s, test_project.id).is_empty(), "test payments never touch a balance");
        let report = block_on(s.h.service.balances().reconcile_ledger(false, &actor)).unwrap();
        prop_assert!(report.differences.is_empty(), "{:?}", report.differences);
        prop_assert_eq!(report.payments, 4);
    }
}

/// The spec's worked example through the service: a confirm credits 30.2600; a payout is
/// refused beyond the balance, recorded within it, answered again for the same transaction
/// and refused for the same transaction with another amount.
#[test]
fn a_completion_credits_and_a_payout_debits_once() {
    let s = setup();
    let p = s.created(&body("order-1", "3400"));
    s.operate(p.id, Trigger::Confirm { amount: None }).unwrap();
    let b = block_on(s.h.service.balances().balance(s.project.id)).unwrap();
    assert_eq!(b.balance.to_string(), "30.2600");
    let actor = Actor("operator:alice".into());
    let payout = |amount: &str| PayoutRequest {
        amount: Usdt::parse_positive(amount).unwrap(),
        destination: "TR7NHqjeKQxGTCi8q8ZY4pL8otSzgjLj6t".parse().unwrap(),
        reference: "ab".repeat(32).parse().unwrap(),
        force_reason: None,
    };
    let refused = block_on(s.h.service.balances().record_payout(
        s.project.id,
        &payout("30.2601"),
        &actor,
    ));
    assert_eq!(
        refused.unwrap_err(),
        LedgerError::BeyondBalance {
            amount: Usdt::parse("30.2601").unwrap(),
            balance: Usdt::parse("30.26").unwrap()
        }
    );
    let (first, new) = block_on(s.h.service.balances().record_payout(
        s.project.id,
        &payout("30"),
        &actor,
    ))
    .unwrap();
    assert!(new);
    assert_eq!(first.balance_after.to_string(), "0.2600");
    let (again, new) = block_on(s.h.service.balances().record_payout(
        s.project.id,
        &payout("30"),
        &actor,
    ))
    .unwrap();
    assert_eq!(
        (again, new),
        (first.clone(), false),
        "a retry answers the first record"
    );
    let other = block_on(s.h.service.balances().record_payout(
        s.project.id,
        &payout("0.1"),
        &actor,
    ));
    assert_eq!(
        other.unwrap_err(),
        LedgerError::ReferenceConflict(first.posting.id)
    );
    let b = block_on(s.h.service.balances().balance(s.project.id)).unwrap();
    assert_eq!(
        (b.entries, b.balance.to_string()),
        (2, "0.2600".to_string())
    );
}

/// A payment completed without its entry (before the ledger existed, or by an older build) is
/// found by the reconciliation and repaired with a new version of the payment; a second run
/// finds nothing.
#[test]
fn the_reconciliation_finds_and_repairs_a_missing_credit() {
    let s = setup();
    let p = s.created(&body("order-1", "3400"));
    // The completion as an older build writes it: the change without its entry.
    let done = payments_core::transition::apply(
        &p,
        Trigger::Confirm { amount: None },
        p.updated_at + Duration::from_secs(5),
        &payments_core::testing::SeededRandom::new(1),
    )
    .unwrap()
    .payment;
    block_on(
        s.h.store
            .commit_change(&payments_core::store::PaymentChange {
                payment: done.clone(),
                expected_version: p.version,
                event: None,
                audit: None,
                ledger: None,
                history: None,
            }),
    )
    .unwrap();
    let actor = Actor("operator:alice".into());
    let report = block_on(s.h.service.balances().reconcile_ledger(false, &actor)).unwrap();
    assert_eq!(report.differences.len(), 1, "{:?}", report.differences);
    let d = &report.differences[0];
    assert_eq!(
        (d.payment_id, d.expected.to_string(), d.recorded.to_string()),
        (Some(p.id), "30.2600".to_string(), "0.0000".to_string())
    );
    let repaired = block_on(s.h.service.balances().reconcile_ledger(true, &actor)).unwrap();
    assert_eq!(repaired.repaired, 1);
    let after = block_on(s.h.service.balances().reconcile_ledger(false, &actor)).unwrap();
    assert!(after.differences.is_empty(), "{:?}", after.differences);
    assert_eq!(
        s.stored(p.id).version,
        done.version + 1,
        "the repair is a version"
    );
    assert_eq!(
        block_on(s.h.service.balances().balance(s.project.id))
            .unwrap()
            .balance
            .to_string(),
        "30.2600"
    );
}
