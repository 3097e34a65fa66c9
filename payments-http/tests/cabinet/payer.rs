//! The hosted payer page's status over real HTTP (`GET /pay/{token}/status`): what the page
//! shows in two words, never cached, the page's own `404` for every wrong link; the page itself
//! names the shop, never refreshes itself, and reads differently after an expiry and after a
//! cancellation.

use std::time::Duration;

use payments_core::payer::PageLanguage;
use payments_directory::ProjectPatch;
use serde_json::{json, Value};

use crate::support::Cabinet;

/// The demo project with the payer page on, in English.
async fn page_on(c: &Cabinet) {
    c.server
        .patch_project(ProjectPatch {
            payer_page: Some(true),
            payer_language: Some(PageLanguage::En),
            ..ProjectPatch::default()
        })
        .await;
}

/// A payment of the demo project: its id and its page's path (`/pay/<token>`).
async fn create(c: &Cabinet, order: &str) -> (String, String) {
    let created = c
        .server
        .client()
        .create_payment(&json!({
            "merchant_payment_id": order, "amount": "1500", "payment_method": "card_transfer"
        }))
        .await
        .expect("a create");
    assert_eq!(created.status.as_u16(), 201, "{}", created.json);
    let url = created.json["payment_page_url"]
        .as_str()
        .expect("payment_page_url")
        .to_string();
    let path = url
        .strip_prefix(c.url().trim_end_matches('/'))
        .expect("under the cabinet's URL")
        .to_string();
    (created.json["id"].as_str().expect("id").to_string(), path)
}

/// `POST` to the operator API; its status.
async fn operator(c: &Cabinet, path: &str) -> u16 {
    reqwest::Client::new()
        .post(format!("{}{path}", c.server.operator_url))
        .bearer_auth(c.server.operator_token.expose())
        .json(&json!({}))
        .send()
        .await
        .expect("the operator API answers")
        .status()
        .as_u16()
}

struct Answer {
    status: u16,
    headers: reqwest::header::HeaderMap,
    body: String,
}

async fn get(c: &Cabinet, path: &str) -> Answer {
    let r = reqwest::Client::new()
        .get(format!("{}{path}", c.url()))
        .send()
        .await
        .expect("an answer");
    Answer {
        status: r.status().as_u16(),
        headers: r.headers().clone(),
        body: r.text().await.expect("a body"),
    }
}

/// The status of the page at `path`, checked to be uncached JSON.
async fn status(c: &Cabinet, path: &str) -> Value {
    let a = get(c, &format!("{path}/status")).await;
    assert_eq!(a.status, 200, "{}", a.body);
    assert_eq!(a.headers["cache-control"], "no-store");
    assert_eq!(a.headers["content-type"], "application/json");
    serde_json::from_str(&a.body).expect("JSON")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_payer_pages_status_follows_the_payment_and_tells_nothing_else() {
    let c = Cabinet::start().await;
    page_on(&c).await;
    let (paid, paid_path) = create(&c, "order-status-1").await;
    let (canceled, canceled_path) = create(&c, "order-status-2").await;
    let (_, expiring_path) = create(&c, "order-status-3").await;

    // Open: the two words and nothing else (no amount, requisite, order or shop).
    let s = status(&c, &paid_path).await;
    assert_eq!(s, json!({"status": "pay", "phase": "open"}));
    // The page: its shop, no self-refresh, a refresh link, the status address it polls.
    let page = get(&c, &paid_path).await;
    assert_eq!(page.status, 200);
    assert!(
        page.body
            .contains("<strong id=\"shop\">Demo project</strong>"),
        "{}",
        page.body
    );
    assert!(!page.body.contains("http-equiv"), "no meta refresh");
    assert!(page
        .body
        .contains(&format!("data-status=\"{paid_path}/status\"")));
    assert!(page
        .body
        .contains(&format!("href=\"{paid_path}\">Refresh status</a>")));
    let csp = page.headers["content-security-policy"]
        .to_str()
        .expect("text");
    assert!(
        csp.contains("script-src 'self'") && csp.contains("connect-src 'self'"),
        "{csp}"
    );
    assert!(!csp.contains("unsafe-inline"), "{csp}");

    // Confirmed through the operator API: completed, closed.
    assert_eq!(
        operator(&c, &format!("/operator/v1/payments/{paid}/confirm")).await,
        200
    );
    assert_eq!(
        status(&c, &paid_path).await,
        json!({"status": "completed", "phase": "closed"})
    );
    let page = get(&c, &paid_path).await;
    assert!(
        page.body.contains("<h1>Payment received</h1>"),
        "{}",
        page.body
    );
    assert!(
        !page.body.contains("Refresh status"),
        "a closed page has no refresh link"
    );

    // Canceled before the deadline: a cancellation.
    assert_eq!(
        operator(&c, &format!("/operator/v1/payments/{canceled}/cancel")).await,
        200
    );
    assert_eq!(
        status(&c, &canceled_path).await,
        json!({"status": "canceled", "phase": "closed"})
    );

    // Past the deadline, before and after the sweeper closes it: the time ran out, not a
    // cancellation; the one canceled before the deadline stays a cancellation.
    c.clock.advance(Duration::from_secs(16 * 60));
    let expired = json!({"status": "expired", "phase": "closed"});
    assert_eq!(status(&c, &expiring_path).await, expired);
    c.server
        .state
        .service
        .payments()
        .sweep(100)
        .await
        .expect("a sweep");
    assert_eq!(status(&c, &expiring_path).await, expired);
    let page = get(&c, &expiring_path).await;
    assert!(
        page.body.contains("<h1>The time to pay has run out</h1>"),
        "{}",
        page.body
    );
    let page = get(&c, &canceled_path).await;
    assert!(
        page.body.contains("<h1>The payment was canceled</h1>"),
        "{}",
        page.body
    );
    assert_eq!(
        status(&c, &canceled_path).await,
        json!({"status": "canceled", "phase": "closed"})
    );

    // Every wrong link: the page's own 404, byte for byte, never cached.
    let missing = get(&c, "/pay/AAAAAAAAAAAAAAAAAAAAAA").await;
    assert_eq!(missing.status, 404);
    for wrong in [
        "/pay/AAAAAAAAAAAAAAAAAAAAAA/status".to_string(),
        format!("/pay/{paid}/status"),
        format!("{}x/status", &paid_path[..paid_path.len() - 1]),
        "/pay/short/status".to_string(),
    ] {
        let a = get(&c, &wrong).await;
        assert_eq!(a.status, 404, "{wrong}");
        assert_eq!(a.body, missing.body, "{wrong}");
        assert_eq!(a.headers["cache-control"], "no-store", "{wrong}");
    }
    // A project that turned its page off: the same 404.
    c.server
        .patch_project(ProjectPatch {
            payer_page: Some(false),
            ..ProjectPatch::default()
        })
        .await;
    let a = get(&c, &format!("{paid_path}/status")).await;
    assert_eq!((a.status, a.body), (404, missing.body));
    c.server.stop().await;
}

/// The status poll is limited per link and per source, before any lookup: the page's own
/// rhythm (every 2 s, the clock stepped) never meets the limit; a burst on one link does,
/// with `429` and `Retry-After`; a scan of made-up links from one address is stopped after
/// its source's burst, real links from it included, until the source has rested.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_status_poll_is_limited_per_link_and_per_source() {
    use payments_core::payer::{STATUS_PER_LINK, STATUS_PER_SOURCE};
    let c = Cabinet::start().await;
    page_on(&c).await;
    let (_, path) = create(&c, "order-poll-1").await;
    let status_of = format!("{path}/status");
    // The script's rhythm while the payment is open: never faster than every 2 s.
    for _ in 0..60 {
        assert_eq!(get(&c, &status_of).await.status, 200);
        c.clock.advance(Duration::from_secs(2));
    }
    // A burst on one link: its allowance, then 429 with a wait.
    c.clock.advance(Duration::from_secs(60));
    let mut answers = Vec::new();
    for _ in 0..3 * STATUS_PER_LINK.burst {
        answers.push(get(&c, &status_of).await);
    }
    let passed = answers.iter().take_while(|a| a.status == 200).count();
    assert!(
        passed >= STATUS_PER_LINK.burst as usize && passed < answers.len(),
        "{passed} passed of {}",
        answers.len()
    );
    // The clock also runs for real: under load a second may pass during the burst and let one
    // more through, so the first refusal is the one looked at.
    let limited = answers.iter().find(|a| a.status == 429).expect("a refusal");
    assert_eq!(limited.status, 429, "{}", limited.body);
    assert_eq!(limited.headers["cache-control"], "no-store");
    let wait: u64 = limited.headers["retry-after"]
        .to_str()
        .expect("Retry-After")
        .parse()
        .expect("seconds");
    assert!((1..=2).contains(&wait), "Retry-After: {wait}");
    c.clock.advance(Duration::from_secs(wait));
    assert_eq!(get(&c, &status_of).await.status, 200, "after the wait");

    // A scan of made-up links from one address (one connection, as a scanner would): stopped
    // after the source's burst; the clock runs meanwhile, so the sustained rate adds some.
    c.clock.advance(Duration::from_secs(60));
    let http = reqwest::Client::new();
    let ask = |path: String| {
        let http = http.clone();
        let url = format!("{}{path}", c.url());
        async move {
            http.get(url)
                .send()
                .await
                .expect("an answer")
                .status()
                .as_u16()
        }
    };
    let burst = STATUS_PER_SOURCE.burst as usize;
    let started = std::time::Instant::now();
    let (mut found, mut refused) = (0, 0);
    for i in 0..3 * burst {
        match ask(format!("/pay/{i:0>22}/status")).await {
            404 => found += 1,
            429 => refused += 1,
            other => panic!("{other}"),
        }
    }
    let refilled = STATUS_PER_SOURCE.per_second as f64 * started.elapsed().as_secs_f64();
    assert!(
        found >= burst && (found as f64) <= burst as f64 + refilled + 1.0 && refused > 0,
        "{found} looked up, {refused} refused in {:?}",
        started.elapsed()
    );
    // Its real links too, for as long as it has not rested.
    let mut real = Vec::new();
    for _ in 0..20 {
        real.push(ask(status_of.clone()).await);
    }
    assert!(
        real.contains(&429),
        "the source is limited for every link: {real:?}"
    );
    c.clock.advance(Duration::from_secs(60));
    assert_eq!(get(&c, &status_of).await.status, 200, "rested");
    c.server.stop().await;
}
