//! The example upstream with the server as `payments-server serve --environment production`
//! builds it from a settings file (provider, rates and notifications over HTTP): a payment
//! from create to completed.

use payments_directory::DirectoryAccess;
use std::net::SocketAddr;

use payments_client::MerchantClient;
use payments_core::auth::keys::{generate_signing_key, public_key_to_pem, signing_key_to_pem};
use payments_core::auth::Scope;
use payments_core::callback::CallbackSecret;
use payments_core::service::Actor;
use payments_directory::ProjectPatch;
use payments_examples::upstream::{self, server_settings, ExampleUpstream};
use payments_http::system::OsRandom;
use payments_server::config::Settings;
use payments_server::server::Application;

const SECRET: &str = "whsec_ZXhhbXBsZS11cHN0cmVhbS1zZWNyZXQtZm9yLXRlc3Rz";

#[tokio::test]
async fn a_production_server_completes_a_payment_with_the_example_upstream() {
    let up = ExampleUpstream::new(CallbackSecret::parse(SECRET).unwrap());
    let base = upstream::start(up.clone(), SocketAddr::from(([127, 0, 0, 1], 0)))
        .await
        .unwrap();

    // The settings as `serve --environment production --config payments.toml` loads them.
    let dir = tempfile::tempdir().unwrap();
    let config = dir.path().join("payments.toml");
    std::fs::write(
        &config,
        format!(
            "data_dir = \"{}\"\nlisten = \"127.0.0.1:0\"\noperator_listen = \"127.0.0.1:0\"\ncabinet_listen = \"127.0.0.1:0\"\n{}",
            dir.path().join("data").display(),
            server_settings(&base, SECRET, "127.0.0.1:0")
        ),
    )
    .unwrap();
    let settings = Settings::load(
        Some(&config),
        serde_json::json!({"environment": "production"}),
    )
    .unwrap();
    let app = Application::build(settings)
        .await
        .expect("production starts with the upstream's ports");
    up.set_notify_url(&app.notifications_url().expect("notifications are on"));
    let base_url = app.base_url();

    // A merchant, as an operator provisions one.
    let svc = app.state().service.clone();
    let actor = Actor("test".into());
    let m = svc
        .directory()
        .create_merchant("Shop", None, &actor)
        .await
        .unwrap();
    let p = svc
        .directory()
        .create_project(m.id, "Web", ProjectPatch::default(), &actor)
        .await
        .unwrap();
    let token = svc
        .directory()
        .issue_token(p.id, Scope::ALL.to_vec(), &actor)
        .await
        .unwrap();
    let key = generate_signing_key(&OsRandom);
    svc.directory()
        .register_key(p.id, &public_key_to_pem(&key.verifying_key()), &actor)
        .await
        .unwrap();
    let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
    let server = tokio::spawn(app.run_until_stopped(async {
        let _ = stopped.await;
    }));

    let client =
        MerchantClient::new(&base_url, token.token.expose(), &signing_key_to_pem(&key)).unwrap();
    let body = serde_json::json!({"merchant_payment_id": "order-1", "amount": "1910.00", "payment_method": "card_transfer"});
    let created = client.create_payment(&body).await.unwrap();
    assert_eq!(created.status.as_u16(), 201, "{}", created.json);
    assert_eq!(created.json["status"], "processing");
    assert!(created.json["requisite"]
        .as_str()
        .unwrap()
        .starts_with("220099"));
    // The upstream's course: 1910 RUB at 95.50 per USDT.
    assert_eq!(
        created.json["merchant_information"]["amount_usdt"],
        "20.0000"
    );
    let id = created.json["id"].as_str().unwrap().to_string();

    // The bank saw the transfer: the upstream reports it.
    let answer = up.report("bank-tx-1", &id, true, None).await.unwrap();
    assert_eq!(answer["applied"], true, "{answer}");
    let read = client.get_payment(&id).await.unwrap();
    assert_eq!(read.json["status"], "completed");
    // Its retry changes nothing.
    tokio::time::sleep(std::time::Duration::from_millis(1100)).await;
    let again = up.report("bank-tx-1", &id, true, None).await.unwrap();
    assert_eq!(again["applied"], false, "{again}");
    assert_eq!(up.issued(), 1);

    let _ = stop.send(());
    server.await.unwrap().unwrap();
}
