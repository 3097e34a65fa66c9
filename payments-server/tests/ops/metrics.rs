//! `/metrics` for on-call: behind a token when one is set, on a listener of its own, with the
//! gauges read from the store and the build information.

use payments_core::SecretString;
use payments_server::testing::TestServer;

use crate::support::sample;

#[tokio::test]
async fn metrics_behind_a_token_and_on_their_own_listener() {
    let token = "scrape-token-0123456789abcdef";
    let s = TestServer::start(|s| {
        s.metrics.token = Some(SecretString::from(token));
        s.metrics.listen = Some("127.0.0.1:0".parse().unwrap());
    })
    .await;
    let client = reqwest::Client::new();
    let url = format!("{}/metrics", s.operator_url);
    let open = client.get(&url).send().await.unwrap();
    assert_eq!(open.status().as_u16(), 401);
    let wrong = client
        .get(&url)
        .bearer_auth("scrape-token-0123456789abcdeX")
        .send()
        .await
        .unwrap();
    assert_eq!(wrong.status().as_u16(), 401);
    let body: serde_json::Value = wrong.json().await.unwrap();
    assert_eq!(body["code"], "token_invalid");
    let ok = client.get(&url).bearer_auth(token).send().await.unwrap();
    assert_eq!(ok.status().as_u16(), 200);
    let text = ok.text().await.unwrap();
    assert_eq!(
        sample(
            &text,
            &format!(
                "payments_build_info{{version=\"{}\",schema_version=\"-\"}}",
                env!("CARGO_PKG_VERSION")
            )
        ),
        Some(1.0),
        "{text}"
    );
    for gauge in [
        "payments_outbox_pending",
        "payments_outbox_failed",
        "payments_outbox_oldest_pending_age_seconds",
        "payments_sweeper_lag_seconds",
        "payments_callback_dispatch_held",
    ] {
        assert!(sample(&text, gauge).is_some(), "{gauge}: {text}");
    }
    // The store's reads and writes are timed (the bootstrap wrote).
    assert!(text.contains("payments_store_operation_duration_seconds_count{kind=\"write\"}"));

    let own = s.metrics_url.clone().expect("metrics_listen is bound");
    let resp = client
        .get(format!("{own}/metrics"))
        .bearer_auth(token)
        .send()
        .await
        .unwrap();
    assert_eq!(resp.status().as_u16(), 200);
    let resp = client
        .get(format!("{own}/operator/v1/audit"))
        .send()
        .await
        .unwrap();
    assert_eq!(resp.status().as_u16(), 404, "only /metrics there");
    s.stop().await;
}

/// A payment left in `created` (its create's process died before the provider's answer was
/// recorded) is resolved by the sweeper 60 s later, by asking the provider again (the
/// sandbox's issues a requisite), and counted in `payments_stuck_creates_total{outcome}`.
#[tokio::test]
async fn a_stuck_create_is_recovered_and_counted() {
    use std::sync::Arc;
    use std::time::Duration;

    use payments_core::payment::{Flow, PaymentMethod};
    use payments_core::testing::fixtures;
    use payments_core::Clock;
    use payments_server::testing::ShiftedClock;

    let clock = ShiftedClock::new();
    let s = TestServer::start_with_clock(Arc::new(clock.clone()), |_| {}).await;
    let count = |outcome: &'static str| {
        let s = &s;
        async move {
            s.metric(&format!(
                "payments_stuck_creates_total{{outcome=\"{outcome}\"}} "
            ))
            .await
        }
    };
    assert_eq!(
        (
            count("recovered").await,
            count("ambiguous").await,
            count("deferred").await
        ),
        (0.0, 0.0, 0.0),
        "every outcome is exposed from the start"
    );
    let request = fixtures::request("stuck-1", "1500", PaymentMethod::Sbp);
    let payment = fixtures::payment(
        "0192f3a4-5b6c-7d8e-9f00-112233445566".parse().unwrap(),
        s.project(),
        &request,
        Flow::RuntimeLive,
        clock.now(),
        Duration::from_secs(900),
    );
    s.state
        .service
        .store()
        .insert_payment(&payment)
        .await
        .expect("inserted");
    // Not yet: a create may take its provider's 15 s budget.
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert_eq!(count("recovered").await, 0.0);
    clock.advance(Duration::from_secs(61));
    let mut closed = false;
    for _ in 0..100 {
        tokio::time::sleep(Duration::from_millis(50)).await;
        let p = s
            .state
            .service
            .store()
            .payment(payment.id)
            .await
            .expect("read")
            .expect("the payment");
        if p.status.as_str() == "processing" {
            assert!(
                p.requisites.is_some(),
                "with the requisite the provider issued"
            );
            closed = true;
            break;
        }
    }
    assert!(closed, "the sweeper resolves it");
    assert_eq!(
        (count("recovered").await, count("ambiguous").await),
        (1.0, 0.0)
    );
    s.stop().await;
}

/// The server reconciles the project balances on its own schedule
/// (`tuning.ledger_reconcile_interval`) and says so on `/metrics`.
#[tokio::test]
async fn the_server_reconciles_the_ledger_on_its_schedule() {
    let s = TestServer::start(|s| {
        s.tuning.ledger_reconcile_interval = std::time::Duration::from_millis(200);
    })
    .await;
    let client = reqwest::Client::new();
    let url = format!("{}/metrics", s.operator_url);
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(20);
    loop {
        let text = client.get(&url).send().await.unwrap().text().await.unwrap();
        let runs = sample(&text, "payments_ledger_reconciliations_total").unwrap_or(0.0);
        if runs >= 2.0 {
            assert_eq!(
                sample(&text, "payments_ledger_differences"),
                Some(0.0),
                "{text}"
            );
            break;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "no scheduled reconciliation in 20 s: {text}"
        );
        tokio::time::sleep(std::time::Duration::from_millis(100)).await;
    }
}
