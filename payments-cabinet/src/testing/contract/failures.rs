//! The checks of [`SignInFailures`](crate::store::SignInFailures).

use payments_core::testing::contract::{ms, T0};

use crate::store::{CabinetStore, CabinetStoreExt};

/// Failures are counted per key since a time, oldest first up to a limit, cleared per key and
/// purged by age.
pub async fn cabinet_failures<S: CabinetStore>(store: &S) {
    for n in [5, 1, 3, 2, 4] {
        store
            .insert_failure("account:a@shop.example", T0 + ms(n))
            .await
            .expect("record");
    }
    store
        .insert_failure("address:203.0.113.7", T0 + ms(2))
        .await
        .expect("record");
    assert_eq!(
        store
            .find_failures("account:a@shop.example", T0 + ms(2), 10)
            .await
            .expect("since"),
        vec![T0 + ms(2), T0 + ms(3), T0 + ms(4), T0 + ms(5)]
    );
    assert_eq!(
        store
            .find_failures("account:a@shop.example", T0, 2)
            .await
            .expect("since"),
        vec![T0 + ms(1), T0 + ms(2)]
    );
    store
        .clear_failures("account:a@shop.example")
        .await
        .expect("clear");
    assert!(store
        .find_failures("account:a@shop.example", T0, 10)
        .await
        .expect("since")
        .is_empty());
    assert_eq!(
        store
            .find_failures("address:203.0.113.7", T0, 10)
            .await
            .expect("since"),
        vec![T0 + ms(2)]
    );
    // One attempt is forgotten, the newest of its key and time; others stay.
    for at in [T0 + ms(7), T0 + ms(7), T0 + ms(8)] {
        store
            .insert_failure("address:203.0.113.7", at)
            .await
            .expect("record");
    }
    store
        .forget_attempt("address:203.0.113.7", T0 + ms(7))
        .await
        .expect("forget one");
    store
        .forget_attempt("address:203.0.113.7", T0 + ms(9))
        .await
        .expect("forget none");
    assert_eq!(
        store
            .find_failures("address:203.0.113.7", T0, 10)
            .await
            .expect("since"),
        vec![T0 + ms(2), T0 + ms(7), T0 + ms(8)]
    );
    assert_eq!(store.purge_failures(T0 + ms(3)).await.expect("purge"), 1);
    store
        .clear_failures("address:203.0.113.7")
        .await
        .expect("clear");
    assert!(store
        .find_failures("address:203.0.113.7", T0, 10)
        .await
        .expect("since")
        .is_empty());
}
