//! Appeals: opened by the merchant with receipts, sent to the provider on record, decided by
//! its signed answer or by support, expired at their deadline; an accepted appeal re-checks
//! the payment to `completed` with one callback and one ledger entry, anything else moves
//! nothing. The property test runs any sequence of them against the ledger's reconciliation.

use std::sync::atomic::Ordering;
use std::time::Duration;

use futures_executor::block_on;
use payments_core::amount::Amount;
use payments_core::appeal::{Appeal, AppealState, AppealTrigger};
use payments_core::auth::Endpoint;
use payments_core::callback::{signature_header, CallbackSecret, CallbackVerifier};
use payments_core::history::ChangeSource;
use payments_core::payment::{Payment, PaymentStatus};
use payments_core::service::{Actor, AppealAnswerOutcome, AppealRequest, SignedNotification};
use payments_core::store::{AppealStore, LedgerStore};
use payments_core::transition::Trigger;
use payments_core::{ApiError, Clock, ErrorCode};
use proptest::prelude::*;

use crate::common::amount;
use crate::support::{body, setup, Setup};

const SECRET: &str = "whsec_dXBzdHJlYW0tbm90aWZpY2F0aW9uLXRlc3Qtc2VjcmV0";

/// A small PDF, as a payer's bank app exports one.
const PDF: &str = "JVBERi0xLjQKMSAwIG9iago8PD4+CmVuZG9iagp0cmFpbGVyCjw8Pj4KJSVFT0YK";

/// An HTML page named as a PNG.
const HTML: &str = "PCFkb2N0eXBlIGh0bWw+PHNjcmlwdD5hbGVydCgxKTwvc2NyaXB0Pg==";

fn appeal_body(key: &str, claimed: &str, receipt: &str, content_type: &str) -> String {
    format!(
        r#"{{"idempotency_key":"{key}","reason":"paid_other_amount","claimed_amount":"{claimed}",
            "paid_at":"2026-10-01T10:00:00Z","payer_bank":"Т-Банк",
            "receipts":[{{"content_type":"{content_type}","data":"{receipt}"}}]}}"#
    )
}

/// Opens an appeal about `payment` with `body`, signed by the project's caller.
fn open(s: &Setup, payment: &Payment, body: &str) -> Result<(Appeal, bool), ApiError> {
    let path = format!("/api/v1/payments/{}/appeals", payment.id);
    block_on(async {
        let caller = s.h.caller(s.project.id);
        let auth = caller
            .authenticate(
                &s.h.service,
                Endpoint::OpenAppeal,
                "POST",
                &path,
                body.as_bytes(),
            )
            .await?;
        let request = AppealRequest::parse(body.as_bytes())?;
        let appeals = s.h.service.appeals();
        Ok(appeals
            .open_appeal(auth, &payment.id.to_string(), request)
            .await?)
    })
}

/// The provider's answer to `appeal`, signed now.
fn answer(s: &Setup, id: &str, appeal: &Appeal, found: Option<&str>) -> AppealAnswerOutcome {
    let body = match found {
        Some(a) => format!(
            r#"{{"notification_id":"{id}","appeal_id":"{}","status":"found","amount":"{a}"}}"#,
            appeal.id
        ),
        None => format!(
            r#"{{"notification_id":"{id}","appeal_id":"{}","status":"not_found","reason":"no transfer"}}"#,
            appeal.id
        ),
    };
    let secret = CallbackSecret::parse(SECRET).unwrap();
    let at = s.h.clock.now().unix_secs();
    let signature = signature_header(&[&secret], at, body.as_bytes());
    let timestamp = at.to_string();
    let verifier = CallbackVerifier::new(vec![secret]);
    block_on(s.h.service.appeals().apply_appeal_answer(
        &verifier,
        SignedNotification {
            timestamp: &timestamp,
            signature: &signature,
            body: body.as_bytes(),
        },
        None,
    ))
    .unwrap()
}

/// A live payment, canceled by support (the payer "paid, and it says canceled").
fn canceled(s: &Setup, mpid: &str) -> Payment {
    let p = s.created(&body(mpid, "100"));
    s.operate(p.id, Trigger::Cancel).unwrap()
}

fn entries(s: &Setup) -> usize {
    let q = payments_core::store::EntryQuery::new(s.project.id, 100);
    block_on(s.h.store.find_entries(&q)).unwrap().len()
}

#[test]
fn a_found_transfer_completes_the_payment_with_the_amount_found_once() {
    let s = setup();
    s.h.provider.takes_appeals.store(true, Ordering::SeqCst);
    let p = canceled(&s, "a-1");
    let (events, ledger) = (s.events(p.id).len(), entries(&s));

    let (a, created) = open(&s, &p, &appeal_body("k-1", "95.50", PDF, "application/pdf")).unwrap();
    assert!(created);
    assert_eq!(a.state, AppealState::UnderReview, "the provider took it");
    let sent = s.h.provider.appeals.lock().unwrap().clone();
    assert_eq!(sent.len(), 1);
    assert_eq!((sent[0].appeal_id, sent[0].receipts.len()), (a.id, 1));
    assert_eq!(sent[0].requisite, p.requisites.as_ref().unwrap().requisite);

    let out = answer(&s, "up-1", &a, Some("95.50"));
    assert!(out.applied);
    assert_eq!(out.appeal.state, AppealState::Accepted);
    assert_eq!(out.appeal.resolved_amount, Some(amount("95.50")));
    assert_eq!(out.payment.status, PaymentStatus::Completed);
    assert_eq!(out.payment.amount, amount("95.50"));
    assert_eq!(s.events(p.id).len(), events + 1, "one callback");
    assert_eq!(entries(&s), ledger + 1, "one credit");
    let history = block_on(s.h.service.payments().history(&s.stored(p.id))).unwrap();
    let last: Vec<_> = history.iter().rev().take(2).map(|e| e.to).collect();
    assert_eq!(last, vec![PaymentStatus::Completed, PaymentStatus::Appeal]);

    // The provider's retry: nothing more.
    s.h.advance(Duration::from_secs(1));
    let again = answer(&s, "up-1", &a, Some("95.50"));
    assert!(!again.applied);
    assert_eq!(s.events(p.id).len(), events + 1);
    assert_eq!(entries(&s), ledger + 1);
}

#[test]
fn a_transfer_not_found_rejects_the_appeal_and_moves_nothing() {
    let s = setup();
    s.h.provider.takes_appeals.store(true, Ordering::SeqCst);
    let p = canceled(&s, "a-2");
    let (events, ledger) = (s.events(p.id).len(), entries(&s));
    let (a, _) = open(&s, &p, &appeal_body("k-2", "100", PDF, "application/pdf")).unwrap();
    let out = answer(&s, "up-2", &a, None);
    assert!(out.applied);
    assert_eq!(out.appeal.state, AppealState::Rejected);
    assert_eq!(out.appeal.note.as_deref(), Some("no transfer"));
    assert_eq!(s.stored(p.id), p, "the payment is as it was");
    assert_eq!((s.events(p.id).len(), entries(&s)), (events, ledger));
}

#[test]
fn an_appeal_nobody_decides_expires_at_its_deadline() {
    let s = setup();
    let p = canceled(&s, "a-3");
    let (a, _) = open(&s, &p, &appeal_body("k-3", "100", PDF, "application/pdf")).unwrap();
    assert_eq!(a.state, AppealState::Open, "the provider takes no appeals");
    let sweep = || block_on(s.h.service.appeals().sweep_appeals(100)).unwrap();
    s.h.advance(Duration::from_secs(24 * 3600) - Duration::from_millis(1));
    assert_eq!(sweep().expired, 0);
    s.h.advance(Duration::from_millis(1));
    assert_eq!(sweep().expired, 1);
    let stored = block_on(s.h.store.appeal(a.id)).unwrap().unwrap();
    assert_eq!(stored.state, AppealState::Expired);
    assert_eq!(s.stored(p.id), p);
}

#[test]
fn support_decides_from_the_queue_and_the_refusals_name_their_codes() {
    let s = setup();
    let p = canceled(&s, "a-4");
    let first = appeal_body("k-4", "100", PDF, "application/pdf");
    let (a, _) = open(&s, &p, &first).unwrap();
    // The same key and request: the same appeal; another request under it: a conflict.
    assert_eq!(open(&s, &p, &first).unwrap(), (a.clone(), false));
    let other = appeal_body("k-4", "90", PDF, "application/pdf");
    assert_eq!(
        open(&s, &p, &other).unwrap_err().code,
        ErrorCode::AppealIdempotencyConflict
    );
    let second = appeal_body("k-5", "90", PDF, "application/pdf");
    assert_eq!(
        open(&s, &p, &second).unwrap_err().code,
        ErrorCode::AppealLimitReached
    );
    // A receipt that is not what it claims: refused, nothing stored.
    let fake = appeal_body("k-6", "90", HTML, "image/png");
    let q = payments_core::appeal::AppealQuery::newest(100);
    let before = block_on(s.h.store.find_appeals(&q)).unwrap().len();
    assert_eq!(
        open(&s, &p, &fake).unwrap_err().code,
        ErrorCode::ReceiptInvalid
    );
    assert_eq!(block_on(s.h.store.find_appeals(&q)).unwrap().len(), before);
    // A payment still open cannot be appealed.
    let live = s.created(&body("a-5", "100"));
    let early = appeal_body("k-7", "100", PDF, "application/pdf");
    assert_eq!(
        open(&s, &live, &early).unwrap_err().code,
        ErrorCode::InvalidTransition
    );

    let accept = AppealTrigger::Accept {
        amount: amount("100"),
        by: "operator:alice".into(),
        note: None,
    };
    let appeals = s.h.service.appeals();
    let (a, paid) =
        block_on(appeals.decide_appeal(a.id, accept, "operator:alice", ChangeSource::Support))
            .unwrap();
    assert_eq!(
        (a.state, paid.status),
        (AppealState::Accepted, PaymentStatus::Completed)
    );
    let report = block_on(
        s.h.service
            .balances()
            .reconcile_ledger(false, &Actor::system()),
    )
    .unwrap();
    assert!(report.differences.is_empty(), "{:?}", report.differences);
}

/// One step of the property test.
#[derive(Debug, Clone)]
enum Step {
    Open { payment: usize, claimed: u32 },
    Found { payment: usize, amount: u32 },
    NotFound { payment: usize },
    SupportAccept { payment: usize, amount: u32 },
    SupportReject { payment: usize },
    Advance { hours: u32 },
    Sweep,
}

fn step() -> impl Strategy<Value = Step> {
    prop_oneof![
        (0..2usize, 1..500u32).prop_map(|(payment, claimed)| Step::Open { payment, claimed }),
        (0..2usize, 1..500u32).prop_map(|(payment, amount)| Step::Found { payment, amount }),
        (0..2usize).prop_map(|payment| Step::NotFound { payment }),
        (0..2usize, 1..500u32)
            .prop_map(|(payment, amount)| Step::SupportAccept { payment, amount }),
        (0..2usize).prop_map(|payment| Step::SupportReject { payment }),
        (1..40u32).prop_map(|hours| Step::Advance { hours }),
        Just(Step::Sweep),
    ]
}

/// The newest appeal of `payment`, if any.
fn newest(s: &Setup, payment: &Payment) -> Option<Appeal> {
    let q = payments_core::appeal::AppealQuery {
        payment: Some(payment.id),
        ..payments_core::appeal::AppealQuery::newest(1)
    };
    block_on(s.h.store.find_appeals(&q)).unwrap().pop()
}

fn run(s: &Setup, payments: &[Payment], step: &Step, n: usize) {
    let decide = |payment: usize, trigger: AppealTrigger| {
        if let Some(a) = newest(s, &payments[payment]) {
            let decided = s.h.service.appeals().decide_appeal(
                a.id,
                trigger,
                "operator:p",
                ChangeSource::Support,
            );
            let _ = block_on(decided);
        }
    };
    match step {
        Step::Open { payment, claimed } => {
            let body = appeal_body(
                &format!("k{n}"),
                &claimed.to_string(),
                PDF,
                "application/pdf",
            );
            let _ = open(s, &payments[*payment], &body);
        }
        Step::Found { payment, amount } => {
            if let Some(a) = newest(s, &payments[*payment]) {
                answer(s, &format!("n{n}"), &a, Some(&amount.to_string()));
            }
        }
        Step::NotFound { payment } => {
            if let Some(a) = newest(s, &payments[*payment]) {
                answer(s, &format!("n{n}"), &a, None);
            }
        }
        Step::SupportAccept { payment, amount: n } => decide(
            *payment,
            AppealTrigger::Accept {
                amount: amount(&n.to_string()),
                by: "operator:p".into(),
                note: None,
            },
        ),
        Step::SupportReject { payment } => decide(
            *payment,
            AppealTrigger::Reject {
                by: "operator:p".into(),
                note: None,
            },
        ),
        Step::Advance { hours } => s.h.advance(Duration::from_secs(u64::from(*hours) * 3600)),
        Step::Sweep => {
            block_on(s.h.service.appeals().sweep_appeals(100)).unwrap();
        }
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(48))]

    /// Any sequence of appeals, provider answers, support decisions, time and sweeps: every
    /// appeal follows its machine (at most one active per payment, a decided one never
    /// changes, expired only at its deadline), a payment moves only with an accepted appeal
    /// (to `completed` with the amount found), and the ledger always equals the payments'
    /// credits.
    #[test]
    fn appeals_keep_their_rules_and_the_ledger_its_credits(steps in proptest::collection::vec(step(), 1..24)) {
        let s = setup();
        s.h.provider.takes_appeals.store(true, Ordering::SeqCst);
        let payments = [canceled(&s, "p-0"), canceled(&s, "p-1")];
        let mut decided: std::collections::HashMap<_, Appeal> = Default::default();
        // The amount of each payment's last accepted appeal. Found by which appeal became
        // accepted in this step, not by timestamps: two appeals decided without the clock
        // moving share their `updated_at`.
        let mut found: std::collections::HashMap<_, Option<Amount>> = Default::default();
        for (n, step) in steps.iter().enumerate() {
            run(&s, &payments, step, n);
            let all = block_on(s.h.store.find_appeals(&payments_core::appeal::AppealQuery::newest(1_000))).unwrap();
            let newly: Vec<_> = all.iter().filter(|a| a.state == AppealState::Accepted && !decided.contains_key(&a.id)).collect();
            prop_assert!(newly.len() <= 1, "one step accepts at most one appeal");
            for a in newly {
                found.insert(a.payment_id, a.resolved_amount);
            }
            for p in &payments {
                let active = all.iter().filter(|a| a.payment_id == p.id && a.state.is_active()).count();
                prop_assert!(active <= 1);
                let now = s.stored(p.id);
                match found.get(&p.id) {
                    Some(amount) => prop_assert_eq!((now.status, Some(now.amount)), (PaymentStatus::Completed, *amount)),
                    None => prop_assert_eq!(&now, p),
                }
            }
            for a in &all {
                if let Some(before) = decided.get(&a.id) {
                    prop_assert_eq!(before, a, "a decided appeal never changes");
                }
                if !a.state.is_active() {
                    decided.insert(a.id, a.clone());
                }
                if a.state == AppealState::Expired {
                    prop_assert!(a.updated_at >= a.deadline);
                }
            }
            let report = block_on(s.h.service.balances().reconcile_ledger(false, &Actor::system())).unwrap();
            prop_assert!(report.differences.is_empty(), "{:?}", report.differences);
        }
    }
}
