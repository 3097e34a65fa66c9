//! The payer page's rules over any payment, and the service's page links over the memory
//! store: which projects have links, that a link is stable and random, and that every link
//! that is not a live page is the same `404`.

mod common;

use payments_directory::DirectoryAccess;
use std::time::Duration;

use common::*;
use payments_core::appeal::{
    Appeal, AppealReason, AppealSource, AppealState, MAX_APPEALS_PER_SOURCE,
};
use payments_core::ids::AppealId;
use payments_core::payer::{payer_state, PageLanguage, PageToken, PayerState, PayerView};
use payments_core::payment::{PaymentMethod, PaymentStatus};
use payments_core::service::Actor;
use payments_core::service::{appeal_offer, appeal_reasons, newest_payer_appeal, AppealOffer};
use payments_core::testing::strategies;
use payments_core::transition::Trigger;
use payments_core::ErrorCode;
use payments_directory::ProjectPatch;
use proptest::prelude::*;

fn any_status() -> impl Strategy<Value = PaymentStatus> {
    prop::sample::select(vec![
        PaymentStatus::Created,
        PaymentStatus::Processing,
        PaymentStatus::Completed,
        PaymentStatus::Canceled,
        PaymentStatus::Error,
        PaymentStatus::Appeal,
    ])
}

proptest! {
    /// A requisite is shown exactly while the payment is `processing`, has one, and its
    /// deadline has not come; the amount is the stored text; the copy value of a card is its
    /// digits.
    #[test]
    fn requisites_only_while_processing_and_in_time(
        p in any_status().prop_flat_map(strategies::payment_in),
        offset in 0u64..3_600_000,
        before in any::<bool>(),
    ) {
        let now = if before {
            p.expires_at.saturating_sub(Duration::from_millis(offset + 1))
        } else {
            p.expires_at + Duration::from_millis(offset)
        };
        let state = payer_state(&p, now);
        let shows = state.requisite().is_some();
        prop_assert_eq!(
            shows,
            p.status == PaymentStatus::Processing && p.requisites.is_some() && now < p.expires_at,
            "{:?} at {:?}", state, now
        );
        if let Some(r) = state.requisite() {
            let stored = p.requisites.as_ref().unwrap();
            prop_assert_eq!(&r.holder_name, &stored.holder_name);
            prop_assert_eq!(&r.bank, &stored.bank);
            if p.payment_method == PaymentMethod::CardTransfer {
                let digits: String = stored.requisite.chars().filter(char::is_ascii_digit).collect();
                prop_assert_eq!(&r.copy, &digits);
            }
        }
        match p.status {
            PaymentStatus::Completed => prop_assert_eq!(&state, &PayerState::Completed),
            // Canceled at or after the deadline: the time ran out; before it: canceled.
            PaymentStatus::Canceled if p.updated_at >= p.expires_at => {
                prop_assert_eq!(&state, &PayerState::Expired)
            }
            PaymentStatus::Canceled => prop_assert_eq!(&state, &PayerState::Canceled),
            PaymentStatus::Error => prop_assert_eq!(&state, &PayerState::Failed),
            PaymentStatus::Appeal => prop_assert_eq!(&state, &PayerState::Checking),
            PaymentStatus::Processing if now >= p.expires_at => {
                prop_assert_eq!(&state, &PayerState::Expired)
            }
            _ => {}
        }
        prop_assert_eq!(
            state.is_final(),
            matches!(p.status, PaymentStatus::Completed | PaymentStatus::Canceled | PaymentStatus::Error)
                || (p.status == PaymentStatus::Processing && now >= p.expires_at),
            "{:?}", state
        );
        let m = merchant(1, None);
        let view = PayerView::of(&p, &project(1, &m, false, None), now);
        prop_assert_eq!(view.amount, p.amount.as_decimal().to_string());
        prop_assert_eq!(view.deadline, p.expires_at);
        prop_assert_eq!(view.shop, "project 1");
    }
}

#[test]
fn amounts_are_shown_as_stored() {
    let mut p = fixture();
    p.amount = amount("3400.50");
    let m = merchant(1, None);
    let view = PayerView::of(&p, &project(1, &m, false, None), p.created_at);
    assert_eq!(view.amount, "3400.50", "never re-rounded or normalised");
}

#[test]
fn links_follow_the_project_setting_and_stay_the_same() {
    let h = Harness::new(7);
    let m = merchant(1, None);
    let p = project(1, &m, false, None);
    h.add(&m, &p);
    h.caller(p.id);
    futures_executor::block_on(links(&h, p));
}

async fn links(h: &Harness, p: payments_core::project::Project) {
    let body =
        br#"{"merchant_payment_id":"o-1","amount":"3400.50","payment_method":"card_transfer"}"#;
    let payment = h.create(p.id, body).await.expect("a create").payment;

    // Off: no link, and the page is not there.
    assert_eq!(
        h.service
            .payments()
            .payment_page_token(&p, &payment)
            .await
            .unwrap(),
        None
    );

    let actor = Actor("test".into());
    let on = h
        .service
        .directory()
        .update_project(
            p.id,
            ProjectPatch {
                payer_page: Some(true),
                payer_language: Some(PageLanguage::En),
                ..ProjectPatch::default()
            },
            &actor,
        )
        .await
        .expect("turned on");
    let token = h
        .service
        .payments()
        .payment_page_token(&on, &payment)
        .await
        .unwrap()
        .expect("a link");
    let again = h
        .service
        .payments()
        .payment_page_token(&on, &payment)
        .await
        .unwrap();
    assert_eq!(again, Some(token.clone()), "one link per payment");
    assert!(!token.as_str().contains(&payment.id.to_string()[..8]));
    // Another payment's link is another random token.
    let second = h
        .create(
            p.id,
            br#"{"merchant_payment_id":"o-2","amount":"10","payment_method":"sbp"}"#,
        )
        .await
        .expect("a create")
        .payment;
    let other = h
        .service
        .payments()
        .payment_page_token(&on, &second)
        .await
        .unwrap()
        .unwrap();
    assert_ne!(other, token);
    // Another project's settings do not make links for this payment.
    let mut foreign = on.clone();
    foreign.id = project_id(9);
    assert_eq!(
        h.service
            .payments()
            .payment_page_token(&foreign, &payment)
            .await
            .unwrap(),
        None
    );

    let view = h
        .service
        .payments()
        .payer_page(token.as_str())
        .await
        .expect("the page");
    assert_eq!(view.language, PageLanguage::En);
    assert_eq!(view.amount, "3400.50");
    let shown = view.state.requisite().expect("requisites while processing");
    assert_eq!(
        shown.display.split(' ').count(),
        shown.copy.len().div_ceil(4)
    );

    // Closed: the outcome.
    h.service
        .payments()
        .operate(payment.id, Trigger::Confirm { amount: None }, &actor)
        .await
        .expect("confirmed");
    let view = h
        .service
        .payments()
        .payer_page(token.as_str())
        .await
        .expect("the page");
    assert_eq!(view.state, PayerState::Completed);

    // Canceled before the deadline: "canceled", and it stays so after the deadline.
    let third = h
        .create(
            p.id,
            br#"{"merchant_payment_id":"o-3","amount":"10","payment_method":"sbp"}"#,
        )
        .await
        .expect("a create")
        .payment;
    let canceled = h
        .service
        .payments()
        .payment_page_token(&on, &third)
        .await
        .unwrap()
        .expect("a link");
    h.service
        .payments()
        .operate(third.id, Trigger::Cancel, &actor)
        .await
        .expect("canceled");
    let state = |token: PageToken| async move {
        h.service
            .payments()
            .payer_page(token.as_str())
            .await
            .expect("the page")
            .state
    };
    assert_eq!(state(canceled.clone()).await, PayerState::Canceled);

    // Expired before the sweeper ran: the outcome, no requisite; after the sweeper closed
    // it, the same outcome (the time ran out), not a cancellation.
    h.advance(Duration::from_secs(16 * 60));
    let view = h
        .service
        .payments()
        .payer_page(other.as_str())
        .await
        .expect("the page");
    assert_eq!(view.state, PayerState::Expired);
    assert_eq!(view.shop, on.name);
    let swept = h.service.payments().sweep(100).await.expect("a sweep");
    assert!(swept.expired >= 1, "{swept:?}");
    assert_eq!(
        h.service
            .store()
            .payment(second.id)
            .await
            .expect("read")
            .expect("stored")
            .status,
        PaymentStatus::Canceled
    );
    assert_eq!(state(other.clone()).await, PayerState::Expired);
    assert_eq!(state(canceled).await, PayerState::Canceled);

    // Every wrong link is the same 404: malformed, unknown, a payment id, a project turned off.
    let unknown = PageToken::parse("AAAAAAAAAAAAAAAAAAAAAA").unwrap();
    for wrong in [
        "x".to_string(),
        unknown.as_str().to_string(),
        payment.id.to_string(),
        format!("{}=", token.as_str()),
    ] {
        let e = h
            .service
            .payments()
            .payer_page(&wrong)
            .await
            .expect_err("not a page");
        assert_eq!(e.code(), ErrorCode::PaymentNotFound, "{wrong}");
    }
    h.service
        .directory()
        .update_project(
            p.id,
            ProjectPatch {
                payer_page: Some(false),
                ..ProjectPatch::default()
            },
            &actor,
        )
        .await
        .expect("turned off");
    let e = h
        .service
        .payments()
        .payer_page(token.as_str())
        .await
        .expect_err("off");
    assert_eq!(e.code(), ErrorCode::PaymentNotFound);
}

/// An appeal of `p` from `source` in `state`, the `n`-th received.
fn appeal_of(
    p: &payments_core::payment::Payment,
    n: u64,
    source: AppealSource,
    state: AppealState,
) -> Appeal {
    let at = p.created_at + Duration::from_secs(60 * n);
    Appeal {
        id: AppealId::from_uuid(uuid::Uuid::from_u128(u128::from(n) + 1)),
        project_id: p.project_id,
        payment_id: p.id,
        source,
        idempotency_key: (source == AppealSource::Merchant).then(|| format!("key-{n}")),
        fingerprint: String::new(),
        reason: AppealReason::PaidOtherAmount,
        claimed_amount: None,
        paid_at: None,
        payer_bank: Some("a bank".into()),
        receipts: Vec::new(),
        state,
        deadline: at + Duration::from_secs(86_400),
        provider: None,
        resolved_amount: (state == AppealState::Accepted).then_some(p.amount),
        decided_by: None,
        note: None,
        created_at: at,
        updated_at: at,
        version: 1,
    }
}

fn any_appeal_state() -> impl Strategy<Value = AppealState> {
    prop::sample::select(AppealState::ALL.to_vec())
}

fn any_source() -> impl Strategy<Value = AppealSource> {
    prop::sample::select(AppealSource::ALL.to_vec())
}

proptest! {
    /// "I paid" is offered exactly on a closed page of a payment that had requisites, with
    /// the reasons of what the page says, while no appeal of the payer waits and the payer has
    /// sent fewer than three; the merchant's appeals change nothing of it, and the payer sees
    /// only their own newest appeal.
    #[test]
    fn i_paid_is_offered_by_the_payer_pages_rules(
        p in any_status().prop_flat_map(strategies::payment_in),
        appeals in prop::collection::vec((any_source(), any_appeal_state()), 0..7),
        offset in 0u64..3_600_000,
    ) {
        let now = p.expires_at + Duration::from_millis(offset);
        let appeals: Vec<Appeal> = appeals
            .iter()
            .enumerate()
            .map(|(n, (source, state))| appeal_of(&p, n as u64, *source, *state))
            .collect();
        let state = payer_state(&p, now);
        let offer = appeal_offer(&p, &state, &appeals);
        let payer: Vec<&Appeal> = appeals.iter().filter(|a| a.source == AppealSource::Payer).collect();
        let closed = matches!(p.status, PaymentStatus::Completed | PaymentStatus::Canceled)
            && p.pricing.is_some();
        let waiting = payer.iter().any(|a| a.state.is_active());
        let spent = payer.len() >= MAX_APPEALS_PER_SOURCE as usize;
        prop_assert_eq!(
            matches!(offer, AppealOffer::Form(_)),
            closed && !waiting && !spent,
            "{:?} {:?} with {:?}", p.status, offer, appeals
        );
        let reasons = offer.reasons();
        if !reasons.is_empty() {
            prop_assert_eq!(reasons, appeal_reasons(&state));
        }
        match state {
            PayerState::Completed => prop_assert!(!reasons.contains(&AppealReason::PaidButCanceled)),
            _ => prop_assert!(!reasons.contains(&AppealReason::PaidTwice)),
        }
        if matches!(p.status, PaymentStatus::Created | PaymentStatus::Processing) {
            prop_assert_eq!(offer, AppealOffer::StillOpen);
        }
        // The merchant's appeals alone never change the offer.
        let mine: Vec<Appeal> = payer.iter().map(|a| (*a).clone()).collect();
        prop_assert_eq!(appeal_offer(&p, &state, &mine), offer);
        // The payer sees their own newest appeal, never the merchant's.
        let newest = newest_payer_appeal(&p, &appeals);
        let expected = payer.iter().max_by_key(|a| a.created_at);
        prop_assert_eq!(newest.as_ref().map(|a| a.received_at), expected.map(|a| a.created_at));
        prop_assert_eq!(newest.map(|a| a.state), expected.map(|a| a.state));
    }
}
