//! A live project over the common harness, and the requests the modules send.

use std::future::Future;
use std::pin::Pin;
use std::task::{Context, Poll, Waker};
use std::time::Duration;

use futures_executor::block_on;
use payments_core::event::EventRecord;
use payments_core::payment::Payment;
use payments_core::project::{Merchant, Project};
use payments_core::service::{Actor, CreateOutcome, CreateStatus};
use payments_core::store::{OutboxStore, PaymentStore};
use payments_core::transition::Trigger;
use payments_core::{ApiError, PaymentId};

use crate::common::{merchant, project, Harness};

pub(crate) const LIFETIME: Duration = Duration::from_secs(15 * 60);

/// Polls `f` once, with a waker that does nothing (the test steps the clock between polls).
pub(crate) fn poll<F: Future>(f: Pin<&mut F>) -> Poll<F::Output> {
    f.poll(&mut Context::from_waker(Waker::noop()))
}

pub(crate) struct Setup {
    pub(crate) h: Harness,
    pub(crate) merchant: Merchant,
    pub(crate) project: Project,
}

/// A live project whose merchant has a common callback URL.
pub(crate) fn setup() -> Setup {
    setup_with(false, Some("https://merchant.example.com/all"), None)
}

pub(crate) fn setup_with(
    test_mode: bool,
    merchant_url: Option<&str>,
    project_url: Option<&str>,
) -> Setup {
    let h = Harness::new(11);
    let m = merchant(1, merchant_url);
    let p = project(1, &m, test_mode, project_url);
    h.add(&m, &p);
    Setup {
        h,
        merchant: m,
        project: p,
    }
}

impl Setup {
    pub(crate) fn create(&self, body: &str) -> Result<CreateOutcome, ApiError> {
        block_on(self.h.create(self.project.id, body.as_bytes()))
    }

    pub(crate) fn created(&self, body: &str) -> Payment {
        let out = self.create(body).expect("create succeeds");
        assert_eq!(out.status, CreateStatus::Created);
        out.payment
    }

    pub(crate) fn stored(&self, id: PaymentId) -> Payment {
        block_on(self.h.store.payment(id)).unwrap().unwrap()
    }

    pub(crate) fn by_mpid(&self, mpid: &str) -> Option<Payment> {
        let mpid = payments_core::payment::MerchantPaymentId::parse(mpid).unwrap();
        block_on(self.h.store.payment_by_merchant_id(self.project.id, &mpid)).unwrap()
    }

    pub(crate) fn events(&self, id: PaymentId) -> Vec<EventRecord> {
        block_on(self.h.store.events_for_payment(id)).unwrap()
    }

    pub(crate) fn operate(&self, id: PaymentId, trigger: Trigger) -> Result<Payment, ApiError> {
        block_on(
            self.h
                .service
                .payments()
                .operate(id, trigger, &Actor("operator:alice".into())),
        )
        .map(|r| r.payment)
        .map_err(ApiError::from)
    }

    pub(crate) fn sweep(&self) -> payments_core::service::SweepReport {
        block_on(self.h.service.payments().sweep(1_000)).unwrap()
    }
}

pub(crate) fn body(mpid: &str, amount: &str) -> String {
    format!(r#"{{"merchant_payment_id":"{mpid}","amount":{amount},"payment_method":"sbp"}}"#)
}

pub(crate) fn code(r: Result<CreateOutcome, ApiError>) -> ApiError {
    match r {
        Ok(o) => panic!("expected an error, got {:?} {}", o.status, o.payment.status),
        Err(e) => e,
    }
}
