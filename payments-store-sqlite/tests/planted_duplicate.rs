//! The planted bug `duplicate-merchant-payment-id` (feature `planted-bugs`; one bug per test
//! binary, since the switch is process-wide): the store drops its unique index at open, so a
//! second payment with a taken merchant payment id is inserted instead of answered as the
//! existing one.

use payments_core::planted::{activate, Bug};
use payments_core::store::{AdmitOutcome, NonceUse, PaymentStore, Store};
use payments_core::testing::contract::{ms, payment_id, project_id, sample_payment, T0};
use payments_store_sqlite::{SqliteOptions, SqliteStore};

#[tokio::test]
async fn two_creates_of_one_merchant_payment_id_make_two_payments() {
    activate(Bug::DuplicateMerchantPaymentId).expect("the only bug of this binary");
    let dir = tempfile::tempdir().expect("a temporary directory");
    let file = dir.path().join("payments.db");
    let store =
        tokio::task::spawn_blocking(move || SqliteStore::open(file, SqliteOptions::default()))
            .await
            .expect("opening does not panic")
            .expect("open the database");
    let first = sample_payment(payment_id(1), project_id(1), "order-1");
    let second = sample_payment(payment_id(2), project_id(1), "order-1");
    for (p, nonce) in [(&first, "n-1"), (&second, "n-2")] {
        let admitted = store
            .admit_create(
                Some(NonceUse {
                    project: project_id(1),
                    nonce,
                    now: T0,
                    expires_at: T0 + ms(60_000),
                }),
                project_id(1),
                &p.merchant_payment_id,
                Some(p),
                None,
            )
            .await
            .expect("admit_create");
        assert_eq!(admitted, AdmitOutcome::Inserted, "{}", p.id);
    }
    for p in [&first, &second] {
        assert_eq!(store.payment(p.id).await.expect("read"), Some(p.clone()));
    }
    store.close();
}
