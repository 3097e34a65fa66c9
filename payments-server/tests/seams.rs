//! The seams an embedder relies on, over real sockets: the merchant API mounted under a path
//! prefix (signatures over the path the client sent), served without connection info, every
//! error answer in the JSON error body with `X-Request-ID`, operations of any clone of the
//! service waking the dispatcher, and a production server refusing the sandbox ports.

use payments_directory::DirectoryAccess;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use axum::Router;
use payments_client::MerchantClient;
use payments_core::auth::keys::parse_signing_key_pem;
use payments_core::auth::signature::{sign_request, SignOptions};
use payments_core::auth::{keyid, Environment, HttpRequestParts};
use payments_core::service::{Actor, AuthConfig, PaymentService, Ports, ServiceConfig};
use payments_core::testing::{MemoryStore, TestCaller};
use payments_core::transition::Trigger;
use payments_core::Clock;
use payments_directory::ProjectPatch;
use payments_http::system::{OsRandom, SystemClock};
use payments_http::AppState;
use payments_providers::sandbox::{FixedRates, SandboxProvider};
use payments_server::testing::TestServer;
use serde_json::{json, Value};

/// Serves `router` on 127.0.0.1:0, with or without connection info; returns its address.
async fn serve(router: Router, connect_info: bool) -> SocketAddr {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
        .await
        .expect("a free port");
    let addr = listener.local_addr().expect("bound");
    tokio::spawn(async move {
        if connect_info {
            axum::serve(
                listener,
                router.into_make_service_with_connect_info::<SocketAddr>(),
            )
            .await
        } else {
            axum::serve(listener, router).await
        }
    });
    addr
}

/// A create signed by the core's signer, independently of `MerchantClient`, over `path`
/// (what the signature covers) and sent to `url`.
async fn foreign_create(
    ts: &TestServer,
    addr: SocketAddr,
    url: &str,
    signed_path: &str,
    mpid: &str,
) -> reqwest::Response {
    let creds = ts.creds();
    let key = parse_signing_key_pem(creds.private_key_pem.expose()).expect("the sandbox key");
    let body = serde_json::to_vec(&json!({
        "merchant_payment_id": mpid,
        "amount": "3400",
        "payment_method": "sbp",
    }))
    .expect("JSON");
    let authority = addr.to_string();
    let headers: Vec<(&str, &[u8])> = vec![("x-request-id", b"foreign-1")];
    let parts = HttpRequestParts {
        method: "POST",
        scheme: "http",
        authority: &authority,
        path_and_query: signed_path,
        headers: &headers,
        body: &body,
    };
    let created = SystemClock.now().unix_secs();
    let options = SignOptions::new(keyid(&key.verifying_key()), created, created + 300);
    let signed = sign_request(&parts, &key, &options, &OsRandom).expect("signs");
    let mut req = reqwest::Client::new()
        .post(url)
        .header("authorization", format!("Bearer {}", creds.token.expose()))
        .header("content-type", "application/json")
        .header("x-request-id", "foreign-1")
        .body(body);
    for (name, value) in signed.headers() {
        req = req.header(name, value);
    }
    req.send().await.expect("the server answers")
}

#[tokio::test]
async fn a_foreign_signed_create_under_a_prefix_answers_201() {
    let ts = TestServer::sandbox().await;
    let app = Router::new().nest("/pay", payments_http::app(ts.state.clone()));
    let addr = serve(app, true).await;
    let url = format!("http://{addr}/pay/api/v1/payments");

    let ok = foreign_create(&ts, addr, &url, "/pay/api/v1/payments", "prefix-1").await;
    assert_eq!(ok.status(), 201);
    let payment: Value = ok.json().await.expect("JSON");
    assert_eq!(payment["status"], "processing");

    // A signature over the path without the prefix is not the request that was sent.
    let stripped = foreign_create(&ts, addr, &url, "/api/v1/payments", "prefix-2").await;
    assert_eq!(stripped.status(), 401);
    let e: Value = stripped.json().await.expect("JSON");
    assert_eq!(e["code"], "signature_invalid");

    // Our own client signs the full path of its base URL.
    let client = MerchantClient::new(
        &format!("http://{addr}/pay"),
        ts.creds().token.expose(),
        ts.creds().private_key_pem.expose(),
    )
    .expect("a client");
    let read = client
        .get_payment(payment["id"].as_str().expect("an id"))
        .await
        .expect("answers");
    assert_eq!(read.status, 200);
    assert_eq!(read.json["merchant_payment_id"], "prefix-1");
    ts.stop().await;
}

#[tokio::test]
async fn without_connection_info_the_api_works_and_an_allow_list_fails_closed() {
    let ts = TestServer::sandbox().await;
    let addr = serve(payments_http::app(ts.state.clone()), false).await;
    let client = MerchantClient::new(
        &format!("http://{addr}"),
        ts.creds().token.expose(),
        ts.creds().private_key_pem.expose(),
    )
    .expect("a client");
    let body = |mpid: &str| json!({"merchant_payment_id": mpid, "amount": "3400", "payment_method": "sbp"});
    let created = client
        .create_payment(&body("plain-1"))
        .await
        .expect("answers");
    assert_eq!(created.status, 201, "{}", created.json);

    // The client address is unknown here: a project with an allow-list is refused, even for
    // the address the client really has.
    ts.patch_project(ProjectPatch {
        ip_allow_list: Some(vec!["127.0.0.1".into()]),
        ..ProjectPatch::default()
    })
    .await;
    let refused = client
        .create_payment(&body("plain-2"))
        .await
        .expect("answers");
    assert_eq!(refused.status, 403);
    assert_eq!(refused.code(), Some("ip_not_allowed"));
    assert!(refused.json["request_id"].is_string());
    ts.stop().await;
}

/// Checks an error answer: the status, the JSON error body with `code`, and the request id
/// echoed in the header and the body.
async fn assert_error(resp: reqwest::Response, status: u16, code: &str, rid: &str) -> Value {
    assert_eq!(resp.status(), status, "{code}");
    assert_eq!(resp.headers()["content-type"], "application/json", "{code}");
    assert_eq!(resp.headers()["x-request-id"], rid, "{code}");
    let body: Value = resp.json().await.expect("a JSON error body");
    assert_eq!(body["code"], code);
    assert_eq!(body["request_id"], rid);
    assert!(
        !body["message"].as_str().unwrap_or("").is_empty(),
        "{code}: a message"
    );
    body
}

#[tokio::test]
async fn every_error_answer_is_the_json_error_body_with_the_request_id() {
    let ts = TestServer::sandbox().await;
    let base = &ts.merchant_url;
    let http = reqwest::Client::new();

    // 404: no such route.
    let r = http
        .get(format!("{base}/api/v1/nothing-here"))
        .header("x-request-id", "rid-404")
        .send()
        .await
        .unwrap();
    assert_error(r, 404, "not_found", "rid-404").await;

    // 405: a listed path with another method; Allow names the ones it takes (the list and
    // the create share the path).
    let r = http
        .delete(format!("{base}/api/v1/payments"))
        .header("x-request-id", "rid-405")
        .send()
        .await
        .unwrap();
    let allow = r.headers().get("allow").cloned();
    assert_error(r, 405, "method_not_allowed", "rid-405").await;
    assert_eq!(allow.expect("an Allow header"), "POST,GET,HEAD");

    // 413: a declared body over 16 KiB, refused before it is read or authenticated.
    let r = http
        .post(format!("{base}/api/v1/payments"))
        .header("x-request-id", "rid-413")
        .body(vec![b'x'; 16 * 1024 + 1])
        .send()
        .await
        .unwrap();
    assert_error(r, 413, "body_too_large", "rid-413").await;

    // 414: a request target over 8 KiB.
    let r = http
        .get(format!("{base}/api/v1/banks?geo_code={}", "R".repeat(9000)))
        .header("x-request-id", "rid-414")
        .send()
        .await
        .unwrap();
    assert_error(r, 414, "uri_too_long", "rid-414").await;

    // 431: more than 64 header fields, and one header section over 16 KiB.
    let mut many = http
        .get(format!("{base}/api/v1/banks"))
        .header("x-request-id", "rid-431");
    for i in 0..70 {
        many = many.header(format!("x-filler-{i}"), "1");
    }
    assert_error(
        many.send().await.unwrap(),
        431,
        "headers_too_large",
        "rid-431",
    )
    .await;
    let r = http
        .get(format!("{base}/api/v1/banks"))
        .header("x-request-id", "rid-431b")
        .header("x-filler", "a".repeat(17 * 1024))
        .send()
        .await
        .unwrap();
    assert_error(r, 431, "headers_too_large", "rid-431b").await;

    // 400: a query string the extractor rejects (a repeated field).
    let r = http
        .get(format!("{base}/api/v1/banks?geo_code=RU&geo_code=KZ"))
        .header("x-request-id", "rid-400")
        .send()
        .await
        .unwrap();
    assert_error(r, 400, "bad_request", "rid-400").await;

    // 401 from the core, for comparison: the same body, written by the same code.
    let r = http
        .get(format!("{base}/api/v1/project"))
        .header("x-request-id", "rid-401")
        .send()
        .await
        .unwrap();
    assert_error(r, 401, "token_invalid", "rid-401").await;

    // Without an X-Request-ID, one is made and the body carries the same one.
    let r = http
        .get(format!("{base}/api/v1/nothing-here"))
        .send()
        .await
        .unwrap();
    let rid = r.headers()["x-request-id"]
        .to_str()
        .expect("ASCII")
        .to_string();
    assert_eq!(rid.len(), 36, "a UUID: {rid}");
    assert_error(r, 404, "not_found", &rid).await;
    ts.stop().await;
}

#[tokio::test]
async fn an_operation_by_any_clone_of_the_service_wakes_the_dispatcher() {
    let store = Arc::new(MemoryStore::new());
    let service = PaymentService::new(
        Ports::new(
            store.clone(),
            Arc::new(SandboxProvider::new(store.clone())),
            Arc::new(FixedRates::sandbox_defaults()),
            Arc::new(SystemClock),
            Arc::new(OsRandom),
        ),
        ServiceConfig::default(),
        AuthConfig::for_environment(Environment::Sandbox),
    );
    let actor = Actor("embedder".into());
    let merchant = service
        .directory()
        .create_merchant("M", Some("https://merchant.example.com/cb".into()), &actor)
        .await
        .expect("a merchant");
    let project = service
        .directory()
        .create_project(merchant.id, "P", ProjectPatch::default(), &actor)
        .await
        .expect("a project");
    let caller = TestCaller::provision(&service, project.id, 7).await;
    let body = br#"{"merchant_payment_id":"wake-1","amount":"3400","payment_method":"sbp"}"#;
    let payment = caller
        .create(&service, body)
        .await
        .expect("created")
        .payment;

    // The embedder's clone is taken before the state adds the dispatcher's wake-up call.
    let embedders_clone = service.clone();
    let state = AppState::new(service, "http");
    let woken = state.outbox_notify.notified();
    let result = embedders_clone
        .payments()
        .operate(payment.id, Trigger::Confirm { amount: None }, &actor)
        .await
        .expect("confirmed");
    assert!(
        result.event.is_some(),
        "a completed payment queues its callback"
    );
    tokio::time::timeout(Duration::from_secs(1), woken)
        .await
        .expect("the dispatcher was woken");
}

#[test]
fn production_with_the_sandbox_provider_refuses_to_start() {
    let dir = tempfile::tempdir().expect("a temporary directory");
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_payments-server"))
        .args(["serve", "--environment", "production", "--data-dir"])
        .arg(dir.path())
        .args([
            "--listen",
            "127.0.0.1:0",
            "--operator-listen",
            "127.0.0.1:0",
            "--cabinet-listen",
            "127.0.0.1:0",
        ])
        .env_remove("PAYMENTS_ENVIRONMENT")
        .output()
        .expect("the binary runs");
    assert!(!out.status.success(), "a production server started");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains("environment = production")
            && stderr.contains("--environment sandbox")
            && stderr.contains("requisite provider"),
        "{stderr}"
    );
    // Nothing was served or written: no credentials, no sandbox bootstrap.
    assert!(!dir.path().join("sandbox-credentials.json").exists());
}
