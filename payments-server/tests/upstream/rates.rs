//! The live rate source: courses from the upstream, "no rate" once they are too old (and the
//! node not ready), and recovery when the endpoint answers again.

use std::sync::Arc;
use std::time::Duration;

use payments_server::testing::{ShiftedClock, TestServer};
use reqwest::StatusCode;
use serde_json::json;

use crate::support::{body, Mode, Upstream};

/// `/readyz`: its status and body.
async fn readyz(s: &TestServer) -> (u16, serde_json::Value) {
    let resp = reqwest::get(format!("{}/readyz", s.merchant_url))
        .await
        .expect("the server answers");
    let status = resp.status().as_u16();
    (status, resp.json().await.unwrap_or_default())
}

#[tokio::test]
async fn stale_rates_are_no_rate_until_the_endpoint_answers_again() {
    let u = Upstream::start(Mode::Issue).await;
    u.set_rates(Some(json!({"rates": {"RUB": "95.50", "KZT": 480}})));
    // The rates' age is measured on the service clock: the test steps it past the limit.
    let clock = ShiftedClock::new();
    let s = {
        let u = u.clone();
        TestServer::start_with_clock(Arc::new(clock.clone()), move |s| {
            u.configure(s);
            s.callbacks.dispatch = false;
            s.upstream.rates_max_age = Duration::from_millis(1000);
        })
        .await
    };
    let c = s.client();
    // Fetched at start: the first create is priced at the upstream's course.
    let r = c.create_payment(&body("r-1", "1910")).await.unwrap();
    assert_eq!(r.status, StatusCode::CREATED, "{}", r.json);
    assert_eq!(
        r.json["merchant_information"]["course"].to_string(),
        "95.50"
    );
    assert_eq!(r.json["merchant_information"]["amount_usdt"], "20.0000");

    // The endpoint fails: the last rates serve until they are 1 s old, then no rate.
    u.set_rates_and_wait(None).await;
    clock.advance(Duration::from_millis(1300));
    let stale = c.create_payment(&body("r-2", "1910")).await.unwrap();
    assert_eq!(
        stale.status,
        StatusCode::UNPROCESSABLE_ENTITY,
        "{}",
        stale.json
    );
    assert_eq!(stale.code(), Some("payment_rate_unavailable"));
    // Without a usable rate the node is not ready: a balancer sends its creates elsewhere.
    let (status, ready) = readyz(&s).await;
    assert_eq!(status, 503, "{ready}");
    assert_eq!(ready["status"], "rates unavailable", "{ready}");
    // The metric the *Rates stale* alert reads: both currencies' last good rate is as old as
    // the clock's step (at least).
    let age = |currency: &'static str| {
        let s = &s;
        async move {
            s.metric(&format!(
                "payments_rate_age_seconds{{currency=\"{currency}\"}} "
            ))
            .await
        }
    };
    assert!(age("RUB").await >= 1.3, "{}", age("RUB").await);
    assert!(age("KZT").await >= 1.3);
    // Nothing was taken: the same merchant_payment_id works once rates are back.
    u.set_rates(Some(json!({"rates": {"RUB": "100"}})));
    let mut recovered = None;
    for _ in 0..50 {
        tokio::time::sleep(Duration::from_millis(100)).await;
        let r = c.create_payment(&body("r-2", "1910")).await.unwrap();
        if r.status == StatusCode::CREATED {
            recovered = Some(r);
            break;
        }
        assert_eq!(r.code(), Some("payment_rate_unavailable"));
    }
    let r = recovered.expect("the rates recover");
    let (status, ready) = readyz(&s).await;
    assert_eq!(status, 200, "ready again by itself: {ready}");
    assert_eq!(
        r.json["merchant_information"]["course"].to_string(),
        "100.00"
    );
    // RUB is fresh again; KZT, which the upstream no longer quotes, ages on.
    assert!(age("RUB").await < 1.0, "{}", age("RUB").await);
    assert!(age("KZT").await >= 1.3);

    // A malformed answer is not used either: the previous rates age out.
    u.set_rates_and_wait(Some(json!({"rates": {"RUB": "-1"}})))
        .await;
    clock.advance(Duration::from_millis(1300));
    let bad = c.create_payment(&body("r-3", "1910")).await.unwrap();
    assert_eq!(bad.code(), Some("payment_rate_unavailable"), "{}", bad.json);
    s.stop().await;
}

#[tokio::test]
async fn a_currency_the_upstream_does_not_quote_has_no_rate() {
    let u = Upstream::start(Mode::Issue).await;
    u.set_rates(Some(json!({"rates": {"KZT": "480"}})));
    let s = {
        let u = u.clone();
        TestServer::start(move |s| u.configure(s)).await
    };
    let r = s
        .client()
        .create_payment(&body("rub", "100"))
        .await
        .unwrap();
    assert_eq!(r.code(), Some("payment_rate_unavailable"), "{}", r.json);
    s.stop().await;
}
