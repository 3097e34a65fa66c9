use proptest::prelude::*;

use super::*;
use crate::testing::contract::{payment_id, project_id, sample_appeal, T0};

fn open() -> Appeal {
    sample_appeal(1, project_id(1), payment_id(1), T0, &[])
}

fn accept(amount: &str) -> AppealTrigger {
    AppealTrigger::Accept {
        amount: Amount::parse(amount).expect("valid"),
        by: "support".into(),
        note: None,
    }
}

fn reject() -> AppealTrigger {
    AppealTrigger::Reject {
        by: "provider:upstream".into(),
        note: Some("no such transfer".into()),
    }
}

const H: Duration = Duration::from_secs(3600);

#[test]
fn review_moves_the_deadline_and_names_the_provider() {
    let d = AppealDeadlines::default();
    let provider = ProviderName::parse("upstream").expect("valid");
    let now = T0.saturating_add(H);
    let next = apply(
        &open(),
        AppealTrigger::Review {
            provider: Some(provider.clone()),
        },
        now,
        d,
    )
    .expect("open -> under_review");
    assert_eq!(next.state, AppealState::UnderReview);
    assert_eq!(next.deadline, now.saturating_add(d.under_review));
    assert_eq!((next.provider.clone(), next.version), (Some(provider), 2));
    let again = apply(&next, AppealTrigger::Review { provider: None }, now, d);
    assert_eq!(
        again.map_err(|e| e.reason),
        Err("the appeal is already under review")
    );
}

#[test]
fn an_appeal_expires_at_its_deadline_and_not_before() {
    let a = open();
    let d = AppealDeadlines::default();
    let early = apply(
        &a,
        AppealTrigger::Expire,
        a.deadline.saturating_sub(Duration::from_millis(1)),
        d,
    );
    assert_eq!(
        early.map_err(|e| e.reason),
        Err("its deadline has not passed")
    );
    let expired = apply(&a, AppealTrigger::Expire, a.deadline, d).expect("at the deadline");
    assert_eq!(expired.state, AppealState::Expired);
    assert_eq!(expired.resolved_amount, None);
}

#[test]
fn a_decided_appeal_takes_no_other_decision() {
    let d = AppealDeadlines::default();
    let accepted = apply(&open(), accept("10"), T0, d).expect("accept");
    assert_eq!(
        accepted.resolved_amount,
        Some(Amount::parse("10").expect("valid"))
    );
    for t in [
        reject(),
        accept("11"),
        AppealTrigger::Expire,
        AppealTrigger::Review { provider: None },
    ] {
        let refused = apply(&accepted, t, accepted.deadline, d);
        assert_eq!(refused.map_err(|e| e.reason), Err("the appeal is decided"));
    }
}

#[test]
fn only_a_closed_payment_with_requisites_is_appealable() {
    let mut p = crate::testing::contract::sample_payment(payment_id(1), project_id(1), "o-1");
    assert!(appealable(&p).is_err(), "created");
    p.status = PaymentStatus::Canceled;
    assert_eq!(appealable(&p), Err("the payment never had requisites"));
    p.pricing = crate::testing::contract::full_payment(payment_id(2), project_id(1), "o-2").pricing;
    assert_eq!(appealable(&p), Ok(()));
    p.status = PaymentStatus::Processing;
    assert!(appealable(&p).is_err());
}

fn trigger() -> impl Strategy<Value = (AppealTrigger, u64)> {
    let t = prop_oneof![
        Just(AppealTrigger::Review { provider: None }),
        (1u32..100_000).prop_map(|n| accept(&n.to_string())),
        Just(reject()),
        Just(AppealTrigger::Expire),
    ];
    (t, 0u64..200)
}

proptest! {
    /// Any sequence of triggers at any times: versions step by one, a decided appeal never
    /// changes again, only `accepted` carries an amount, and an expiry happens only at or after
    /// the deadline the appeal had.
    #[test]
    fn the_appeal_machine_keeps_its_rules(steps in proptest::collection::vec(trigger(), 1..12)) {
        let d = AppealDeadlines::default();
        let mut a = open();
        let mut now = T0;
        for (t, hours) in steps {
            now = now.saturating_add(H * hours as u32);
            let before = a.clone();
            match apply(&a, t.clone(), now, d) {
                Ok(next) => {
                    prop_assert!(before.state.is_active());
                    prop_assert_eq!(next.version, before.version + 1);
                    prop_assert_eq!(next.resolved_amount.is_some(), next.state == AppealState::Accepted);
                    if next.state == AppealState::Expired {
                        prop_assert!(now >= before.deadline);
                    }
                    prop_assert_eq!((next.id, next.payment_id, next.created_at), (a.id, a.payment_id, a.created_at));
                    a = next;
                }
                Err(e) => {
                    prop_assert!(
                        !before.state.is_active()
                            || matches!(t, AppealTrigger::Expire) && now < before.deadline
                            || matches!(t, AppealTrigger::Review { .. }) && before.state == AppealState::UnderReview,
                        "{e}"
                    );
                }
            }
        }
    }
}
