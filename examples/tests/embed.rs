//! The `embed` example (`examples/examples/embed.rs`, included as it is) proven from outside,
//! as a merchant sees it: the application's own page beside the API, a signed create through
//! `/payments` with the provisioned credentials, the application's own requisites and rate,
//! a confirmation, and the callback, its HMAC verified with the provisioned secret. Then a
//! restart over the same database provisions nothing anew.

use std::time::Duration;

use axum::body::Bytes;
use axum::http::{HeaderMap, StatusCode};
use axum::routing::post;
use axum::Router;
use payments_client::MerchantClient;
use payments_core::callback::{AddressPolicy, CallbackSecret, CallbackVerifier};
use payments_core::service::{Actor, ServiceConfig};
use payments_core::transition::Trigger;
use payments_core::Clock;
use payments_http::system::SystemClock;
use tokio::sync::mpsc;

#[path = "../examples/embed.rs"]
#[allow(dead_code)] // its `main`
mod embed;

/// A received callback: its signature headers and body.
type Received = (String, String, Bytes);

/// A merchant's callback endpoint on `127.0.0.1:0` that hands each request to the test.
async fn receiver() -> (String, mpsc::UnboundedReceiver<Received>) {
    let (tx, rx) = mpsc::unbounded_channel();
    let app = Router::new().route(
        "/callbacks",
        post(move |headers: HeaderMap, body: Bytes| {
            let tx = tx.clone();
            async move {
                let header = |n: &str| {
                    headers
                        .get(n)
                        .and_then(|v| v.to_str().ok())
                        .unwrap_or_default()
                        .to_string()
                };
                let received = (
                    header("x-callback-timestamp"),
                    header("x-callback-signature"),
                    body,
                );
                let _ = tx.send(received);
                StatusCode::NO_CONTENT
            }
        }),
    );
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
        .await
        .expect("a port");
    let addr = listener.local_addr().expect("bound");
    tokio::spawn(async move { axum::serve(listener, app).await });
    (format!("http://{addr}/callbacks"), rx)
}

#[tokio::test]
async fn the_embedding_takes_a_signed_payment_and_sends_its_callback() {
    let dir = tempfile::tempdir().expect("a temporary directory");
    // The test's callback endpoint is on loopback, which the default policy refuses.
    let config = ServiceConfig {
        callback_policy: AddressPolicy::LOCAL_DEVELOPMENT,
        ..ServiceConfig::default()
    };
    let (router, workers, state, first) = embed::application(dir.path(), config.clone())
        .await
        .expect("the application starts");
    let credentials = first.credentials.expect("the first start provisions");
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
        .await
        .expect("a port");
    let base = format!("http://{}", listener.local_addr().expect("bound"));
    let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
    let server = tokio::spawn(payments_http::serve(listener, router, stopped));

    // The application's own route beside the API.
    let page = reqwest::get(format!("{base}/")).await.expect("the page");
    assert_eq!(page.text().await.expect("a body"), "my shop");

    // A signed create through the prefix, with the provisioned token and key.
    let (callback_url, mut callbacks) = receiver().await;
    let private_key = credentials
        .private_key_pem
        .as_ref()
        .expect("a generated key");
    let client = MerchantClient::new(
        &format!("{base}/payments"),
        credentials.token.expose(),
        private_key.expose(),
    )
    .expect("a client");
    let created = client
        .create_payment(&serde_json::json!({
            "merchant_payment_id": "embed-1",
            "amount": "1910.00",
            "payment_method": "card_transfer",
            "callback_url": callback_url,
        }))
        .await
        .expect("the create answers");
    assert_eq!(created.status.as_u16(), 201, "{}", created.json);
    let p = &created.json;
    assert_eq!(
        p["requisite"], "2200700000000017",
        "the application's own pool"
    );
    // 1910.00 RUB at the application's own 95.50 RUB per USDT: trunc4(1910 / 95.5).
    assert_eq!(p["merchant_information"]["amount_usdt"], "20.0000");

    // The operator confirms the transfer through the service; the dispatcher delivers.
    let id = p["id"]
        .as_str()
        .expect("an id")
        .parse()
        .expect("a payment id");
    state
        .service
        .payments()
        .operate(id, Trigger::Confirm { amount: None }, &Actor::system())
        .await
        .expect("confirmed");
    let (timestamp, signature, body) =
        tokio::time::timeout(Duration::from_secs(10), callbacks.recv())
            .await
            .expect("a callback within 10 s")
            .expect("the receiver runs");
    let secret = CallbackSecret::parse(credentials.callback_secret.expose()).expect("a secret");
    CallbackVerifier::new(vec![secret])
        .verify(&timestamp, &signature, &body, SystemClock.now())
        .expect("signed with the provisioned callback secret");
    let callback: serde_json::Value = serde_json::from_slice(&body).expect("JSON");
    assert_eq!(callback["status"], "completed");
    let read = client
        .get_payment(p["id"].as_str().expect("an id"))
        .await
        .expect("read back");
    assert_eq!(read.json["status"], "completed");

    let _ = stop.send(());
    server.await.expect("served").expect("no I/O error");
    workers.stop().await;
    drop(state);

    // A restart over the same database: the merchant is there, nothing is provisioned anew.
    let (_, workers, _, again) = embed::application(dir.path(), config)
        .await
        .expect("the application restarts");
    assert!(again.credentials.is_none(), "credentials are given once");
    assert_eq!(again.project.id, first.project.id);
    workers.stop().await;
}

/// The example as it is counted: at most 40 lines of code after rustfmt, blank lines and
/// comments excluded, and it calls no module of the examples crate.
#[test]
fn the_example_stays_within_forty_lines() {
    let source = include_str!("../examples/embed.rs");
    let code = source
        .lines()
        .map(str::trim)
        .filter(|l| !l.is_empty() && !l.starts_with("//"))
        .count();
    assert!(code <= 40, "{code} lines of code");
    assert!(
        !source.contains("payments_examples"),
        "it calls the examples crate"
    );
}
