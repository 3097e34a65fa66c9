//! `/metrics` stays bounded whatever clients send: invented HTTP methods and unknown paths on
//! the (unauthenticated) merchant listener share one label value each instead of adding
//! series.

use std::collections::BTreeSet;

use futures_util::future::join_all;
use payments_server::testing::TestServer;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

/// Sends `METHOD path HTTP/1.1` over a new connection; the response's status code.
async fn raw(addr: &str, method: &str, path: &str) -> u16 {
    let mut stream = TcpStream::connect(addr)
        .await
        .expect("the listener accepts");
    let request = format!("{method} {path} HTTP/1.1\r\nHost: {addr}\r\nConnection: close\r\n\r\n");
    stream
        .write_all(request.as_bytes())
        .await
        .expect("request sent");
    let mut answer = Vec::new();
    stream
        .read_to_end(&mut answer)
        .await
        .expect("response read");
    let answer = String::from_utf8_lossy(&answer);
    let status = answer.split(' ').nth(1).unwrap_or_default();
    status
        .parse()
        .unwrap_or_else(|_| panic!("a status line: {answer}"))
}

/// Method names no client library would send: `M` and 1 to 16 hex digits, all different.
fn invented_methods(n: usize, seed: u64) -> Vec<String> {
    let mut x = seed | 1;
    (0..n)
        .map(|i| {
            // xorshift64: spread the names; the index keeps them distinct.
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            format!("M{:X}{i}", x >> (x % 48))
        })
        .collect()
}

/// Sends each method to `path`, 50 connections at a time; the statuses seen.
async fn send_all(addr: &str, methods: &[String], path: &str) -> BTreeSet<u16> {
    let mut statuses = BTreeSet::new();
    for chunk in methods.chunks(50) {
        let answers = join_all(chunk.iter().map(|m| raw(addr, m, path))).await;
        statuses.extend(answers);
    }
    statuses
}

async fn scrape(s: &TestServer) -> String {
    let resp = reqwest::get(format!("{}/metrics", s.operator_url))
        .await
        .expect("the operator listener answers");
    assert_eq!(resp.status(), 200);
    resp.text().await.expect("metrics text")
}

/// The series of an exposition: each sample line without its value.
fn series(text: &str) -> BTreeSet<&str> {
    text.lines()
        .filter(|l| !l.starts_with('#'))
        .filter_map(|l| l.rsplit_once(' ').map(|(name, _)| name))
        .collect()
}

/// The sum of the samples whose line starts with `prefix`.
fn total(text: &str, prefix: &str) -> u64 {
    text.lines()
        .filter(|l| l.starts_with(prefix))
        .map(|l| {
            let (_, v) = l.rsplit_once(' ').expect("a sample");
            v.parse::<u64>().expect("a count")
        })
        .sum()
}

#[tokio::test]
async fn invented_methods_do_not_grow_metrics() {
    let s = TestServer::sandbox().await;
    let addr = s
        .merchant_url
        .strip_prefix("http://")
        .expect("a plain HTTP test server")
        .to_string();
    let methods = invented_methods(3_000, 0x9e37_79b9_7f4a_7c15);
    assert_eq!(methods.iter().collect::<BTreeSet<_>>().len(), 3_000);
    // A first scrape, so that /metrics itself is among the series of the two compared.
    scrape(&s).await;

    let statuses = send_all(&addr, &methods[..100], "/healthz").await;
    assert!(statuses.iter().all(|s| *s >= 400), "{statuses:?}");
    send_all(&addr, &methods[..10], "/no/such/path").await;
    let after_100 = scrape(&s).await;

    send_all(&addr, &methods[100..], "/healthz").await;
    send_all(&addr, &methods[10..], "/no/such/path").await;
    let after_3000 = scrape(&s).await;

    // The same label sets after 100 and after 3,000 distinct methods: only counts moved.
    assert_eq!(series(&after_100), series(&after_3000));
    assert!(
        after_3000.len() < 16 * 1024,
        "{} bytes:\n{after_3000}",
        after_3000.len()
    );
    assert!(after_3000.len() < after_100.len() + 512);
    for m in &methods {
        assert!(!after_3000.contains(m.as_str()), "{m} is a label value");
    }

    // Every request is counted, under `other`.
    let healthz = "payments_http_requests_total{route=\"/healthz\",method=\"other\",";
    assert_eq!(total(&after_100, healthz), 100);
    assert_eq!(total(&after_3000, healthz), 3_000);
    let unmatched = "payments_http_requests_total{route=\"unmatched\",method=\"other\",";
    assert_eq!(total(&after_3000, unmatched), 3_000);

    // (payments_callback_attempts and payments_payments have no series yet: no delivery, no
    // payment; a family without series is not written.)
    for line in [
        "# TYPE payments_http_requests counter",
        "# TYPE payments_http_request_duration_seconds histogram",
        "# TYPE payments_outbox_pending gauge",
        "payments_outbox_pending 0",
    ] {
        assert!(
            after_3000.lines().any(|l| l == line),
            "{line}:\n{after_3000}"
        );
    }
    for prefix in [
        "payments_http_requests_total{route=\"/metrics\",method=\"GET\",status=\"200\"} ",
        "payments_http_request_duration_seconds_bucket{le=\"+Inf\",route=\"/healthz\",method=\"other\",",
        "payments_http_request_duration_seconds_count{route=\"unmatched\",method=\"other\",status=\"404\"} 3000",
    ] {
        assert!(
            after_3000.lines().any(|l| l.starts_with(prefix)),
            "{prefix}:\n{after_3000}"
        );
    }
    s.stop().await;
}
