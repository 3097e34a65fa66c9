//! `payments-server serve --environment production` with the HTTP provider, live rates and
//! notifications configured: it starts (production refuses only the sandbox ports) and
//! completes a payment end to end, the merchant's callback included.

use payments_directory::DirectoryAccess;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use axum::body::Bytes;
use axum::extract::State;
use axum::http::{HeaderMap, StatusCode};
use axum::routing::post;
use axum::Router;
use payments_client::MerchantClient;
use payments_core::auth::keys::{generate_signing_key, public_key_to_pem, signing_key_to_pem};
use payments_core::auth::Scope;
use payments_core::callback::{CallbackSecret, CallbackVerifier};
use payments_core::service::Actor;
use payments_core::Timestamp;
use payments_directory::ProjectPatch;
use payments_http::system::OsRandom;
use payments_server::config::Settings;
use payments_server::server::{open_service, Setup};
use payments_server::testing::free_addr;
use serde_json::Value;

use crate::support::{body, notification, notify, unix_now, Mode, Upstream, SECRET};

/// Kills the child on drop.
struct ChildGuard(std::process::Child);

impl Drop for ChildGuard {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

type Received = Arc<Mutex<Vec<Value>>>;

async fn receive(
    State((verifier, got)): State<(Arc<CallbackVerifier>, Received)>,
    headers: HeaderMap,
    body: Bytes,
) -> StatusCode {
    let h = |n: &str| {
        headers
            .get(n)
            .and_then(|v| v.to_str().ok())
            .unwrap_or("")
            .to_string()
    };
    let now = Timestamp::from_unix_secs(unix_now());
    if verifier
        .verify(
            &h("x-callback-timestamp"),
            &h("x-callback-signature"),
            &body,
            now,
        )
        .is_err()
    {
        return StatusCode::UNAUTHORIZED;
    }
    got.lock()
        .unwrap()
        .push(serde_json::from_slice(&body).unwrap());
    StatusCode::NO_CONTENT
}

#[tokio::test]
async fn serve_in_production_completes_a_payment_with_the_upstream() {
    let u = Upstream::start(Mode::Issue).await;
    let dir = tempfile::tempdir().unwrap();
    let (merchant, operator, notifications) = (free_addr(), free_addr(), free_addr());
    let config = dir.path().join("payments.toml");
    std::fs::write(
        &config,
        format!(
            r#"environment = "production"
data_dir = "{data}"
listen = "{merchant}"
operator_listen = "{operator}"
cabinet_listen = "127.0.0.1:0"
allow_local_callbacks = true
provider = "http"
rate_source = "http"
upstream_url = "{up}/requisites"
upstream_rates_url = "{up}/rates"
upstream_secrets = ["{SECRET}"]
upstream_listen = "{notifications}"
"#,
            data = dir.path().join("data").display(),
            up = u.url,
        ),
    )
    .unwrap();

    // The merchant's receiver.
    let receiver = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let receiver_url = format!("http://{}/callbacks", receiver.local_addr().unwrap());
    let got: Received = Arc::default();

    // Provisioning as an operator does before the first start: merchant, project, token, key.
    let settings = Settings::load(Some(&config), serde_json::json!({})).unwrap();
    let opened = open_service(&settings, Setup::Serve).await.unwrap();
    let svc = &opened.service;
    let actor = Actor("test".into());
    let m = svc
        .directory()
        .create_merchant("Shop", None, &actor)
        .await
        .unwrap();
    let project = svc
        .directory()
        .create_project(
            m.id,
            "Web",
            ProjectPatch {
                callback_url: Some(Some(receiver_url)),
                ..ProjectPatch::default()
            },
            &actor,
        )
        .await
        .unwrap();
    let token = svc
        .directory()
        .issue_token(project.id, Scope::ALL.to_vec(), &actor)
        .await
        .unwrap();
    let key = generate_signing_key(&OsRandom);
    svc.directory()
        .register_key(project.id, &public_key_to_pem(&key.verifying_key()), &actor)
        .await
        .unwrap();
    let secret = svc
        .directory()
        .rotate_callback_secret(project.id, &actor)
        .await
        .unwrap();
    opened.store.close();
    let verifier = Arc::new(CallbackVerifier::new(vec![CallbackSecret::parse(
        secret.expose(),
    )
    .unwrap()]));
    tokio::spawn({
        let got = got.clone();
        async move {
            let app = Router::new()
                .route("/callbacks", post(receive))
                .with_state((verifier, got));
            axum::serve(receiver, app).await
        }
    });

    let _server = ChildGuard(
        std::process::Command::new(env!("CARGO_BIN_EXE_payments-server"))
            .args(["serve", "--environment", "production", "--config"])
            .arg(&config)
            .env_remove("PAYMENTS_ENVIRONMENT")
            .stderr(std::process::Stdio::null())
            .spawn()
            .unwrap(),
    );
    assert!(token.token.expose().starts_with("nl_live_"));
    let client = MerchantClient::new(
        &format!("http://{merchant}"),
        token.token.expose(),
        &signing_key_to_pem(&key),
    )
    .unwrap();
    let mut created = None;
    for _ in 0..200 {
        match client.create_payment(&body("prod-1", "1500")).await {
            Ok(r) => {
                created = Some(r);
                break;
            }
            Err(_) => tokio::time::sleep(Duration::from_millis(50)).await,
        }
    }
    let created = created.expect("the production server answers");
    assert_eq!(created.status, StatusCode::CREATED, "{}", created.json);
    assert_eq!(created.json["status"], "processing");
    let id = created.json["id"].as_str().unwrap().to_string();
    assert_eq!(
        created.json["requisite"].as_str(),
        u.seen(|s| s.issued.get(&id).cloned()).as_deref()
    );

    // The upstream: the transfer arrived.
    let url = format!("http://{notifications}/upstream/v1/notifications");
    let (code, answer) = notify(&url, &notification("bank-tx-1", &id, "confirmed")).await;
    assert_eq!(code, StatusCode::OK, "{answer}");
    assert_eq!(answer["applied"], true);
    let read = client.get_payment(&id).await.unwrap();
    assert_eq!(read.json["status"], "completed");
    // The merchant's callback arrives, signed.
    let mut callback = None;
    for _ in 0..100 {
        if let Some(c) = got.lock().unwrap().first().cloned() {
            callback = Some(c);
            break;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let callback = callback.expect("the merchant's callback");
    assert_eq!(callback["id"], id.as_str());
    assert_eq!(callback["status"], "completed");
}

#[tokio::test]
async fn production_still_refuses_the_sandbox_ports() {
    let dir = tempfile::tempdir().unwrap();
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_payments-server"))
        .args([
            "serve",
            "--environment",
            "production",
            "--listen",
            "127.0.0.1:0",
        ])
        .args(["--operator-listen", "127.0.0.1:0"])
        .args(["--cabinet-listen", "127.0.0.1:0", "--data-dir"])
        .arg(dir.path())
        .env_remove("PAYMENTS_ENVIRONMENT")
        .output()
        .unwrap();
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("provider = \"http\""), "{err}");
}
