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
