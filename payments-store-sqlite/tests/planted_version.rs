//! The planted bug `unchecked-status-version` (feature `planted-bugs`; one bug per test
//! binary, since the switch is process-wide): a change written at a stale version commits
//! instead of answering `Conflict`, so two transitions from one version both commit.

use payments_core::payment::PaymentStatus;
use payments_core::planted::{activate, Bug};
use payments_core::store::{PaymentChange, PaymentStore, Store};
use payments_core::testing::contract::{changed, ms, payment_id, project_id, sample_payment, T0};
use payments_store_sqlite::{SqliteOptions, SqliteStore};

#[tokio::test]
async fn two_transitions_from_one_version_both_commit() {
    activate(Bug::UncheckedStatusVersion).expect("the only bug of this binary");
    let dir = tempfile::tempdir().expect("a temporary directory");
    let file = dir.path().join("payments.db");
    let store =
        tokio::task::spawn_blocking(move || SqliteStore::open(file, SqliteOptions::default()))
            .await
            .expect("opening does not panic")
            .expect("open the database");
    let p = sample_payment(payment_id(1), project_id(1), "order-1");
    store.insert_payment(&p).await.expect("inserted");
    let change = |status, at| PaymentChange {
        payment: changed(&p, status, at),
        expected_version: p.version,
        event: None,
        audit: None,
        ledger: None,
        history: None,
    };
    let canceled = change(PaymentStatus::Canceled, T0 + ms(100));
    let failed = change(PaymentStatus::Error, T0 + ms(200));
    store
        .commit_change(&canceled)
        .await
        .expect("the first commits");
    store
        .commit_change(&failed)
        .await
        .expect("the second commits too: its version is not checked");
    let stored = store.payment(p.id).await.expect("read").expect("stored");
    assert_eq!(
        stored.status,
        PaymentStatus::Error,
        "the first one's update is lost"
    );
    store.close();
}
