//! The `embed` example, run as CI runs it: an application of its own with the merchant API
//! under `/pay`, its own provider and rates, completing one payment.

use std::time::Duration;

#[tokio::test]
async fn the_embedding_completes_a_payment_with_its_own_provider() {
    let dir = tempfile::tempdir().expect("a temporary directory");
    let r = payments_examples::embed::run(dir.path())
        .await
        .expect("the embedding completes a payment");
    assert_eq!(r.create_status, 201);
    // The example's own pool: 220070 + 9 digits + the Luhn digit, the first one issued.
    assert_eq!(r.requisite, "2200700000000017");
    // 1910.00 RUB at the example's own 95.5 RUB per USDT: trunc4(1910 / 95.5).
    assert_eq!(r.amount_usdt, "20.0000");
    assert_eq!(r.final_status, "completed");
    assert_eq!(r.callback_status, "completed");
    // The dispatcher polls once a minute in the example: only the wake-up from the
    // confirmation can deliver this quickly.
    assert!(
        r.callback_after < Duration::from_secs(5),
        "{:?}",
        r.callback_after
    );
}
