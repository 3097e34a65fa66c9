//! `check-receiver` against the bundled callback receiver (`receiver_router`, the library code
//! of the `callback_receiver` example) backed by a real server: every case passes.

use std::net::SocketAddr;
use std::sync::Arc;

use payments_client::MerchantClient;
use payments_core::callback::{AddressPolicy, CallbackSecret, CallbackVerifier};
use payments_examples::receiver::CALLBACK_PATH;
use payments_examples::{receiver_router, Receiver, ReceiverDb};
use payments_http::system::SystemClock;
use payments_server::receiver_check::{check_receiver, CheckOptions};
use payments_server::testing::TestServer;
use reqwest::StatusCode;
use serde_json::json;

#[tokio::test]
async fn the_bundled_receiver_passes_every_case() {
    let server = TestServer::sandbox().await;
    let creds = &server.creds();
    let client = MerchantClient::from_credentials(creds).expect("client");
    let created = client
        .create_payment(&json!({"merchant_payment_id": "order-check-1", "amount": "1500.00", "payment_method": "sbp"}))
        .await
        .expect("create");
    assert_eq!(created.status, StatusCode::CREATED, "{}", created.json);
    let id = created.json["id"].as_str().expect("id").to_owned();

    let secret = CallbackSecret::parse(creds.callback_secret.expose()).expect("a whsec_ secret");
    let db = ReceiverDb::in_memory().expect("db");
    let receiver = Receiver::new(
        CallbackVerifier::new(vec![secret.clone()]),
        db.clone(),
        client,
        Arc::new(SystemClock),
    );
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
        .await
        .expect("bind");
    let addr: SocketAddr = listener.local_addr().expect("addr");
    tokio::spawn(async move {
        axum::serve(listener, receiver_router(Arc::new(receiver)))
            .await
            .expect("serves");
    });

    let mut options = CheckOptions::new(
        format!("http://{addr}{CALLBACK_PATH}"),
        secret,
        AddressPolicy::LOCAL_DEVELOPMENT,
    );
    options.payment_id = Some(id.clone());
    let report = check_receiver(&options).await.expect("the checker runs");
    assert!(report.passed(), "{}", report.render());
    assert!(report.render().contains("10 of 10 cases passed"));
    // The valid, unknown-scheme, rotation, slow-read and large-response events were applied
    // once each; the replay and the rejected ones were not.
    let order = db.order(&id).expect("db").expect("the order is stored");
    assert_eq!(order.applied_events, 5);
    assert_eq!(db.processed_events().expect("db"), 5);
}
