//! TLS certificates are reloaded when their files change (and on SIGHUP), without a restart;
//! `operator_tls` serves the operator listener with the same certificate.

use std::time::Duration;

use payments_server::testing::TestServer;

use crate::support::eventually;

fn client_trusting(pem: &str, port: u16) -> reqwest::Client {
    reqwest::Client::builder()
        .tls_built_in_root_certs(false)
        .add_root_certificate(reqwest::Certificate::from_pem(pem.as_bytes()).unwrap())
        .resolve("localhost", format!("127.0.0.1:{port}").parse().unwrap())
        .pool_max_idle_per_host(0)
        .build()
        .unwrap()
}

#[tokio::test]
async fn a_new_certificate_is_served_after_its_files_change() {
    let dir = tempfile::tempdir().unwrap();
    let first = rcgen::generate_simple_self_signed(vec!["localhost".to_string()]).unwrap();
    let second = rcgen::generate_simple_self_signed(vec!["localhost".to_string()]).unwrap();
    let (cert, key) = (dir.path().join("cert.pem"), dir.path().join("key.pem"));
    std::fs::write(&cert, first.cert.pem()).unwrap();
    std::fs::write(&key, first.key_pair.serialize_pem()).unwrap();
    let (c, k) = (cert.clone(), key.clone());
    let s = TestServer::start(move |s| {
        s.tls.cert = Some(c);
        s.tls.key = Some(k);
        s.tls.operator = true;
        s.tls.watch_interval = Duration::from_millis(100);
    })
    .await;
    let port: u16 = s.merchant_url.rsplit(':').next().unwrap().parse().unwrap();
    let url = format!("https://localhost:{port}/healthz");
    let old_trust = client_trusting(&first.cert.pem(), port);
    let new_trust = client_trusting(&second.cert.pem(), port);
    assert_eq!(old_trust.get(&url).send().await.unwrap().status(), 200);
    assert!(
        new_trust.get(&url).send().await.is_err(),
        "not yet the new one"
    );

    // The operator listener answers over TLS with the same certificate.
    assert!(s.operator_url.starts_with("https://"));
    let op_port: u16 = s.operator_url.rsplit(':').next().unwrap().parse().unwrap();
    let op = client_trusting(&first.cert.pem(), op_port);
    let metrics = op
        .get(format!("https://localhost:{op_port}/metrics"))
        .send()
        .await
        .unwrap();
    assert_eq!(metrics.status(), 200);

    // A half-written pair (the key of another certificate) is refused; the old one stays.
    std::fs::write(&cert, second.cert.pem()).unwrap();
    tokio::time::sleep(Duration::from_millis(500)).await;
    assert_eq!(old_trust.get(&url).send().await.unwrap().status(), 200);
    // The matching key arrives: the next check loads the new pair.
    std::fs::write(&key, second.key_pair.serialize_pem()).unwrap();
    eventually(10, "the new certificate to be served", || async {
        new_trust.get(&url).send().await.is_ok()
    })
    .await;
    assert!(
        old_trust.get(&url).send().await.is_err(),
        "the old one is gone"
    );
    s.stop().await;
}
