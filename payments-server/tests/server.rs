//! The server as run: no secret in the test server's `Debug`, the sandbox's credentials file
//! names the demo cabinet user, the built binary as a new user runs it, and TLS on the
//! merchant listener.

use std::time::Duration;

use payments_client::{MerchantClient, SandboxCredentials};
use payments_server::bootstrap::CREDENTIALS_FILE;
use payments_server::testing::TestServer;
use reqwest::StatusCode;
use serde_json::json;

fn body(mpid: &str, amount: &str) -> serde_json::Value {
    json!({"merchant_payment_id": mpid, "amount": amount, "payment_method": "sbp"})
}

#[tokio::test]
async fn debug_of_the_test_server_shows_no_secret() {
    let s = TestServer::sandbox().await;
    let debug = format!("{s:?}");
    let c = s.creds();
    for secret in [
        &s.operator_token,
        &c.token,
        &c.callback_secret,
        &c.private_key_pem,
    ] {
        assert!(!debug.contains(secret.expose().as_str()), "{debug}");
    }
    s.stop().await;
}

/// The sandbox's credentials file names the demo merchant's cabinet user (its sign-in is
/// tested with the cabinet, in payments-http).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_credentials_file_names_the_demo_cabinet_user() {
    let s = TestServer::sandbox().await;
    let file: serde_json::Value = serde_json::from_slice(
        &std::fs::read(s.dir.path().join(CREDENTIALS_FILE)).expect("the file"),
    )
    .expect("JSON");
    for member in ["cabinet_url", "cabinet_email", "cabinet_password"] {
        assert!(
            file[member].as_str().is_some_and(|s| !s.is_empty()),
            "{member}"
        );
    }
    assert_eq!(file["cabinet_url"].as_str(), s.cabinet_url.as_deref());
    s.stop().await;
}

/// Kills the child on drop, so a failing assertion leaves no server behind.
struct ChildGuard(std::process::Child);

impl Drop for ChildGuard {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

#[tokio::test]
async fn the_built_binary_as_a_new_user_runs_it() {
    let dir = tempfile::tempdir().unwrap();
    let child = std::process::Command::new(env!("CARGO_BIN_EXE_payments-server"))
        .args([
            "serve",
            "--listen",
            "127.0.0.1:0",
            "--operator-listen",
            "127.0.0.1:0",
            "--cabinet-listen",
            "127.0.0.1:0",
            "--data-dir",
        ])
        .arg(dir.path())
        .env_remove("PAYMENTS_ENVIRONMENT")
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let mut guard = ChildGuard(child);
    let file = dir.path().join(CREDENTIALS_FILE);
    let mut text = String::new();
    for _ in 0..200 {
        if let Ok(t) = std::fs::read_to_string(&file) {
            if t.ends_with('}') {
                text = t;
                break;
            }
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let creds: SandboxCredentials = serde_json::from_str(&text).expect("credentials file written");
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        assert_eq!(
            std::fs::metadata(&file).unwrap().permissions().mode() & 0o777,
            0o600
        );
    }
    assert!(creds.token.expose().starts_with("nl_test_"));
    assert!(creds.keyid.starts_with("ed25519-"));
    assert!(creds.callback_secret.expose().starts_with("whsec_"));
    // The file holds the secrets; `Debug` of what was read from it shows none of them.
    let debug = format!("{creds:?}");
    for secret in [
        &creds.token,
        &creds.callback_secret,
        &creds.operator_token,
        &creds.private_key_pem,
    ] {
        assert!(!debug.contains(secret.expose().as_str()), "{debug}");
    }
    assert!(!debug.contains("PRIVATE KEY"), "{debug}");
    let client = MerchantClient::from_credentials(&creds).unwrap();
    let mut created = None;
    for _ in 0..100 {
        match client.create_payment(&body("first-order", "1500.50")).await {
            Ok(r) => {
                created = Some(r);
                break;
            }
            Err(_) => tokio::time::sleep(Duration::from_millis(50)).await,
        }
    }
    let created = created.expect("server answers");
    assert_eq!(created.status, StatusCode::CREATED, "{}", created.json);
    let id = created.json["id"].as_str().unwrap();
    let read = client.get_payment(id).await.unwrap();
    assert_eq!(read.json["amount"].to_string(), "1500.50");
    assert_eq!(read.json["status"], "processing");
    // SIGTERM: graceful shutdown, exit status 0, and the secrets never reached the log.
    let pid = guard.0.id().to_string();
    assert!(std::process::Command::new("kill")
        .args(["-TERM", &pid])
        .status()
        .unwrap()
        .success());
    let out = std::mem::replace(
        &mut guard.0,
        std::process::Command::new("true").spawn().unwrap(),
    )
    .wait_with_output()
    .unwrap();
    assert!(out.status.success(), "exit {:?}", out.status);
    let log = String::from_utf8_lossy(&out.stderr);
    assert!(log.contains("sandbox-credentials.json"), "{log}");
    for secret in [
        creds.token.expose(),
        creds.callback_secret.expose(),
        creds.operator_token.expose(),
    ] {
        assert!(!log.contains(secret.as_str()), "a secret reached the log");
    }
    assert!(!log.contains("PRIVATE KEY"));
    let requisite = created.json["requisite"].as_str().unwrap();
    assert!(!log.contains(requisite), "the requisite is masked in logs");
    assert!(
        log.contains(&payments_http::merchant::mask_requisite(requisite)),
        "{log}"
    );
}

#[tokio::test]
async fn tls_on_the_merchant_listener() {
    let dir = tempfile::tempdir().unwrap();
    let cert = rcgen::generate_simple_self_signed(vec!["localhost".to_string()]).unwrap();
    let cert_path = dir.path().join("cert.pem");
    let key_path = dir.path().join("key.pem");
    std::fs::write(&cert_path, cert.cert.pem()).unwrap();
    std::fs::write(&key_path, cert.key_pair.serialize_pem()).unwrap();
    let s = TestServer::start(|s| {
        s.tls.cert = Some(cert_path);
        s.tls.key = Some(key_path);
    })
    .await;
    assert!(s.creds().base_url.starts_with("https://127.0.0.1:"));
    let port = s.creds().base_url.rsplit(':').next().unwrap().to_string();
    let http = reqwest::Client::builder()
        .add_root_certificate(reqwest::Certificate::from_pem(cert.cert.pem().as_bytes()).unwrap())
        .resolve("localhost", format!("127.0.0.1:{port}").parse().unwrap())
        .build()
        .unwrap();
    let client = MerchantClient::new(
        &format!("https://localhost:{port}"),
        s.creds().token.expose(),
        s.creds().private_key_pem.expose(),
    )
    .unwrap()
    .with_http_client(http);
    let r = client.create_payment(&body("tls-1", "100")).await.unwrap();
    assert_eq!(r.status, StatusCode::CREATED, "{}", r.json);
    s.stop().await;
}
