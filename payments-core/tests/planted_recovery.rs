//! The planted bug `recovery-asks-next-provider` (features `testing` and `planted-bugs`; a
//! binary of its own, since the switch is process-wide): the recovery of a create left in
//! `created` asks another provider of the payment's plan than the one recorded on it, so a
//! second upstream issues requisites for one payment.

mod common;

use std::future::Future;
use std::pin::pin;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll, Waker};

use async_trait::async_trait;
use futures_executor::block_on;
use payments_core::auth::Environment;
use payments_core::payment::{MerchantPaymentId, PaymentStatus};
use payments_core::planted::{activate, Bug};
use payments_core::provider::{
    IssuedRequisites, ProviderName, ProviderOutcome, RequisiteProvider, RequisiteRequest,
};
use payments_core::service::AuthConfig;
use payments_core::store::PaymentStore;
use payments_providers::{Coverage, Route, Router};

use common::{merchant, project, Harness};

/// Answers what it is told (or never, while `hang`), counting its calls.
#[derive(Default)]
struct Told {
    answer: Mutex<Option<ProviderOutcome>>,
    hang: AtomicBool,
    calls: AtomicUsize,
}

#[async_trait]
impl RequisiteProvider for Told {
    async fn issue(&self, _: &RequisiteRequest) -> ProviderOutcome {
        self.calls.fetch_add(1, Ordering::SeqCst);
        if self.hang.load(Ordering::SeqCst) {
            std::future::pending::<()>().await;
        }
        self.answer
            .lock()
            .unwrap()
            .clone()
            .unwrap_or(ProviderOutcome::NoRequisites("told nothing".into()))
    }
}

#[test]
fn the_recovery_asks_another_provider_than_the_one_recorded() {
    activate(Bug::RecoveryAsksNextProvider).expect("the only bug of this binary");
    let first = Arc::new(Told::default());
    let second = Arc::new(Told::default());
    let (f, s) = (first.clone(), second.clone());
    let h = Harness::with_ports(
        11,
        AuthConfig::for_environment(Environment::Sandbox),
        move |clock, healthy| {
            let route = |name: &str, provider: Arc<dyn RequisiteProvider>, priority| Route {
                name: ProviderName::parse(name).unwrap(),
                provider,
                coverage: Coverage::default(),
                priority,
                weight: 1,
            };
            Arc::new(
                Router::new(
                    vec![
                        route("first", f, 0),
                        route("second", s, 1),
                        route("healthy", healthy, 2),
                    ],
                    Arc::new(clock.clone()),
                )
                .unwrap(),
            )
        },
    );
    let m = merchant(1, Some("https://merchant.example.com/all"));
    let p = project(1, &m, false, None);
    h.add(&m, &p);
    // First takes the request and never answers: the node dies there.
    first.hang.store(true, Ordering::SeqCst);
    {
        let body = r#"{"merchant_payment_id":"cut1","amount":1500.00,"payment_method":"sbp"}"#;
        let mut create = pin!(h.create(p.id, body.as_bytes()));
        let poll = create
            .as_mut()
            .poll(&mut Context::from_waker(Waker::noop()));
        assert!(matches!(poll, Poll::Pending));
    }
    let mpid = MerchantPaymentId::parse("cut1").unwrap();
    let stuck = block_on(h.store.payment_by_merchant_id(p.id, &mpid))
        .unwrap()
        .unwrap();
    assert_eq!(stuck.status, PaymentStatus::Created);
    assert_eq!(stuck.route.as_ref().unwrap().provider.as_str(), "first");

    h.advance(std::time::Duration::from_secs(17));
    first.hang.store(false, Ordering::SeqCst);
    *second.answer.lock().unwrap() = Some(ProviderOutcome::Issued(IssuedRequisites::new(
        "79000000042",
        "I. I.",
    )));
    block_on(h.service.payments().recover_create(&stuck)).unwrap();
    assert_eq!(first.calls.load(Ordering::SeqCst), 1, "only by the create");
    assert_eq!(
        second.calls.load(Ordering::SeqCst),
        1,
        "the recovery asked the next provider of the plan"
    );
    let recovered = block_on(h.store.payment(stuck.id)).unwrap().unwrap();
    assert_eq!(recovered.status, PaymentStatus::Processing);
    assert_eq!(recovered.route.unwrap().provider.as_str(), "second");
}
