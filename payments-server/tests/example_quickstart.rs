//! The examples against a real server: `payments-server`'s `Application` on 127.0.0.1:0 with a
//! fresh data dir per test, and the quickstart and the callback receiver running the same
//! library code as their binaries.

use std::net::SocketAddr;
use std::sync::{Arc, Mutex};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use payments_client::MerchantClient;
use payments_core::callback::{
    signature_header, CallbackSecret, CallbackVerifier, EVENT_ID_HEADER, SIGNATURE_HEADER,
    TIMESTAMP_HEADER,
};
use payments_core::random::uuid_v4;
use payments_examples::create::{create_with_retries, RetryPolicy};
use payments_examples::receiver::CALLBACK_PATH;
use payments_examples::{quickstart, receiver_router, Receiver, ReceiverDb};
use payments_http::system::{OsRandom, SystemClock};
use payments_server::testing::TestServer;
use reqwest::StatusCode;
use serde_json::{json, Value};

/// `POST {operator_url}/operator/v1/payments/{id}/{action}`.
async fn operate(server: &TestServer, id: &str, action: &str) -> Value {
    let resp = reqwest::Client::new()
        .post(format!(
            "{}/operator/v1/payments/{id}/{action}",
            server.operator_url
        ))
        .bearer_auth(server.operator_token.expose())
        .send()
        .await
        .expect("the operator API answers");
    assert_eq!(resp.status(), StatusCode::OK, "{action}");
    resp.json().await.expect("JSON")
}

#[tokio::test]
async fn the_quickstart_completes_a_payment() {
    let server = TestServer::sandbox().await;
    let report = quickstart(server.creds())
        .await
        .expect("the quickstart succeeds");
    assert_eq!(report.final_status, "completed");
    assert_eq!(report.amount, "3400");
    assert!(report.merchant_payment_id.starts_with("quickstart-"));
    // The spec's worked example: 3400 at course 100 and fee 11 % -> 34 and 30.26 USDT.
    let mi = &report.payment["merchant_information"];
    assert_eq!(mi["amount_usdt"], "34.0000");
    assert_eq!(mi["amount_usdt_rate"], "30.2600");
    assert!(report.settlement.starts_with("30.2600 USDT credited"));
    // The card is shown in groups of four, and its digits for copying.
    let card = report.payment["requisite"].as_str().expect("a card number");
    let card_line = report
        .payer_instructions
        .lines()
        .find(|l| l.starts_with("to card"))
        .expect("a card line");
    let grouped: Vec<&str> = card_line
        .trim_start_matches("to card")
        .split("(copy")
        .next()
        .expect("the grouped number")
        .split_whitespace()
        .collect();
    assert_eq!(grouped.concat(), card);
    assert!(grouped[..grouped.len() - 1].iter().all(|g| g.len() == 4));
    assert!(card_line.ends_with(&format!("(copy: {card})")));
    assert!(report
        .payer_instructions
        .starts_with("Pay exactly 3400 RUB"));

    // The merchant API agrees.
    let client = MerchantClient::from_credentials(server.creds()).expect("client");
    let read = client.get_payment(&report.payment_id).await.expect("GET");
    assert_eq!(read.json["status"], "completed");
    server.stop().await;
}

#[tokio::test]
async fn the_quickstart_fails_on_an_unexpected_answer() {
    let server = TestServer::sandbox().await;
    let mut wrong = server.creds().clone();
    wrong.operator_token = "op_wrong".into();
    let err = quickstart(&wrong)
        .await
        .expect_err("a wrong operator token fails")
        .to_string();
    assert!(err.starts_with("confirm: 401 token_invalid"), "{err}");

    let mut wrong = server.creds().clone();
    wrong.token = format!("{}x", server.creds().token.expose()).into();
    let err = quickstart(&wrong)
        .await
        .expect_err("a wrong token fails")
        .to_string();
    assert!(err.starts_with("create: FixCredentials"), "{err}");
    server.stop().await;
}

fn now_secs() -> i64 {
    let secs = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .expect("the clock is after 1970")
        .as_secs();
    i64::try_from(secs).expect("seconds fit i64")
}

/// A callback as the service sends it.
struct Callback {
    event_id: String,
    body: Vec<u8>,
}

impl Callback {
    fn new(payment: &Value, status: &str) -> Callback {
        let event_id = uuid_v4(&OsRandom).to_string();
        let body = json!({
            "id": payment["id"],
            "event_id": event_id,
            "status": status,
            "amount": payment["amount"],
            "initial_amount": payment["initial_amount"],
            "currency": payment["currency"],
            "payment_method": payment["payment_method"],
            "bank_code": payment["bank_code"],
            "is_intrabank": payment["is_intrabank"],
            "merchant_payment_id": payment["merchant_payment_id"],
            "rate": payment["merchant_information"]["rate"],
            "course": payment["merchant_information"]["course"],
            "is_test": payment["is_test"],
            "project_id": "00000000-0000-4000-8000-000000000000",
        });
        Callback {
            event_id,
            body: serde_json::to_vec(&body).expect("JSON"),
        }
    }

    /// Posts it, signed by `secrets` at `timestamp`; the answer's status and `outcome`.
    async fn post(
        &self,
        url: &str,
        secrets: &[&CallbackSecret],
        timestamp: i64,
    ) -> (StatusCode, String) {
        let resp = reqwest::Client::new()
            .post(url)
            .header("content-type", "application/json")
            .header(EVENT_ID_HEADER, &self.event_id)
            .header(TIMESTAMP_HEADER, timestamp.to_string())
            .header(
                SIGNATURE_HEADER,
                signature_header(secrets, timestamp, &self.body),
            )
            .body(self.body.clone())
            .send()
            .await
            .expect("the receiver answers");
        let status = resp.status();
        let json: Value = resp.json().await.expect("JSON answer");
        (status, json["outcome"].as_str().unwrap_or("").to_owned())
    }
}

#[tokio::test]
async fn the_receiver_verifies_deduplicates_and_applies_the_api_state() {
    let server = TestServer::sandbox().await;
    let creds = &server.creds();
    let client = MerchantClient::from_credentials(creds).expect("client");
    let created = client
        .create_payment(&json!({"merchant_payment_id": "order-cb-1", "amount": "1500.50", "payment_method": "sbp"}))
        .await
        .expect("create");
    assert_eq!(created.status, StatusCode::CREATED, "{}", created.json);
    let id = created.json["id"].as_str().expect("id").to_owned();
    operate(&server, &id, "confirm").await;

    // The project's secret and an older one still accepted during a rotation.
    let secret = CallbackSecret::parse(creds.callback_secret.expose()).expect("a whsec_ secret");
    let previous = CallbackSecret::generate(&OsRandom);
    let db = ReceiverDb::in_memory().expect("db");
    let receiver = Receiver::new(
        CallbackVerifier::new(vec![previous.clone(), secret.clone()]),
        db.clone(),
        client.clone(),
        Arc::new(SystemClock),
    );
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
        .await
        .expect("bind");
    let addr: SocketAddr = listener.local_addr().expect("addr");
    let serving = tokio::spawn(async move {
        axum::serve(listener, receiver_router(Arc::new(receiver)))
            .await
            .expect("serves");
    });
    let url = format!("http://{addr}{CALLBACK_PATH}");

    // A correctly signed callback: applied with the GET's status and amount.
    let first = Callback::new(&created.json, "completed");
    assert_eq!(
        first.post(&url, &[&secret], now_secs()).await,
        (StatusCode::OK, "applied".to_owned())
    );
    let order = db.order(&id).expect("db").expect("the order is stored");
    assert_eq!(order.status, "completed");
    assert_eq!(order.amount, "1500.50");
    assert_eq!(order.merchant_payment_id, "order-cb-1");
    assert_eq!(order.last_event_id, first.event_id);
    assert_eq!(order.applied_events, 1);
    assert_eq!(db.processed_events().expect("db"), 1);

    // The payment changes on the server (a re-check starts: `appeal`, no callback).
    operate(&server, &id, "recheck").await;

    // The same event again (a retry: new timestamp, new signature, same body): 2xx, and not
    // processed again, or the order would now say `appeal`.
    assert_eq!(
        first.post(&url, &[&secret], now_secs() + 1).await,
        (StatusCode::OK, "duplicate".to_owned())
    );
    let unchanged = db.order(&id).expect("db").expect("order");
    assert_eq!(unchanged, order);

    // A bad signature: 401 and nothing changed.
    let forged = Callback::new(&created.json, "canceled");
    let stranger = CallbackSecret::generate(&OsRandom);
    assert_eq!(
        forged.post(&url, &[&stranger], now_secs()).await,
        (StatusCode::UNAUTHORIZED, "rejected".to_owned())
    );
    // A good signature over other bytes (body changed after signing): 401 as well.
    let mut tampered = Callback::new(&created.json, "completed");
    let signed_ts = now_secs();
    let good_sig = signature_header(&[&secret], signed_ts, &tampered.body);
    tampered.body = String::from_utf8(tampered.body)
        .expect("utf8")
        .replace("1500.50", "15000.50")
        .into_bytes();
    let resp = reqwest::Client::new()
        .post(&url)
        .header(TIMESTAMP_HEADER, signed_ts.to_string())
        .header(SIGNATURE_HEADER, good_sig)
        .body(tampered.body.clone())
        .send()
        .await
        .expect("answer");
    assert_eq!(resp.status(), StatusCode::UNAUTHORIZED);

    // A correct signature with a stale timestamp (301 s old): 401, nothing changed.
    let stale = Callback::new(&created.json, "completed");
    assert_eq!(
        stale.post(&url, &[&secret], now_secs() - 301).await,
        (StatusCode::UNAUTHORIZED, "rejected".to_owned())
    );
    assert_eq!(db.order(&id).expect("db").expect("order"), order);
    assert_eq!(db.processed_events().expect("db"), 1);

    // A new event, signed with the previous secret (rotation), whose body says `completed`
    // while the payment is in `appeal`: the API's state wins.
    let second = Callback::new(&created.json, "completed");
    assert_eq!(
        second.post(&url, &[&previous], now_secs()).await,
        (StatusCode::OK, "applied".to_owned())
    );
    let order = db.order(&id).expect("db").expect("order");
    assert_eq!(order.status, "appeal");
    assert_eq!(order.last_event_id, second.event_id);
    assert_eq!(order.applied_events, 2);
    assert_eq!(db.processed_events().expect("db"), 2);

    serving.abort();
    server.stop().await;
}

/// What the stalling proxy saw: each request's nonce and the upstream's status.
type Seen = Arc<Mutex<Vec<(String, u16)>>>;

/// Forwards to the server; holds the first answer back for 3 s, past the client's timeout,
/// as a slow network would after the server had already created the payment.
async fn stalling_proxy(
    axum::extract::State((upstream, seen)): axum::extract::State<(String, Seen)>,
    req: axum::extract::Request,
) -> (StatusCode, Vec<u8>) {
    let (parts, body) = req.into_parts();
    let body = axum::body::to_bytes(body, 1 << 20)
        .await
        .expect("a small body");
    let path = parts.uri.path_and_query().map_or("/", |p| p.as_str());
    let mut forward = reqwest::Client::new().request(parts.method, format!("{upstream}{path}"));
    for (name, value) in &parts.headers {
        if name != "host" && name != "content-length" {
            forward = forward.header(name, value);
        }
    }
    let resp = forward.body(body).send().await.expect("the server answers");
    let status = resp.status();
    let bytes = resp.bytes().await.expect("a body").to_vec();
    let nonce = parts
        .headers
        .get("x-request-nonce")
        .and_then(|v| v.to_str().ok())
        .unwrap_or("")
        .to_owned();
    let first = {
        let mut seen = seen.lock().expect("not poisoned");
        seen.push((nonce, status.as_u16()));
        seen.len() == 1
    };
    if first {
        tokio::time::sleep(Duration::from_secs(3)).await;
    }
    (status, bytes)
}

#[tokio::test]
async fn a_create_that_timed_out_is_repeated_with_the_same_id_and_makes_one_payment() {
    let server = TestServer::sandbox().await;
    let seen: Seen = Arc::default();
    let proxy = axum::Router::new()
        .fallback(stalling_proxy)
        .with_state((server.creds().base_url.clone(), seen.clone()));
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
        .await
        .expect("bind");
    let proxy_url = format!("http://{}", listener.local_addr().expect("addr"));
    let serving = tokio::spawn(async move {
        axum::serve(listener, proxy).await.expect("serves");
    });

    // A 1 s timeout stands in for the example's 15 s or more, so the test stays short.
    let http = reqwest::Client::builder()
        .timeout(Duration::from_secs(1))
        .build()
        .expect("client");
    let client = MerchantClient::new(
        &proxy_url,
        server.creds().token.expose(),
        server.creds().private_key_pem.expose(),
    )
    .expect("client")
    .with_http_client(http);
    let policy = RetryPolicy {
        max_attempts: 4,
        base: Duration::from_millis(50),
        cap: Duration::from_millis(200),
    };
    let body =
        json!({"merchant_payment_id": "order-slow-1", "amount": "700", "payment_method": "sbp"});
    let log = Mutex::new(Vec::<String>::new());
    let payment = create_with_retries(&client, &body, &policy, |line| {
        log.lock().expect("not poisoned").push(line.to_owned());
    })
    .await
    .expect("the create succeeds on the repeat");
    assert_eq!(payment["merchant_payment_id"], "order-slow-1");
    assert_eq!(payment["status"], "processing");

    // The first send created the payment (201, answer lost); the repeat, with a fresh nonce,
    // got the same payment back (200).
    let seen = seen.lock().expect("not poisoned").clone();
    assert_eq!(seen.len(), 2, "{seen:?}");
    assert_eq!((seen[0].1, seen[1].1), (201, 200));
    assert_ne!(seen[0].0, seen[1].0);
    assert!(seen[0].0.len() >= 16);
    let log = log.into_inner().expect("not poisoned");
    assert!(log[0].starts_with("attempt 1: timed out"), "{log:?}");
    assert!(log.iter().any(|l| l.contains("already existed")), "{log:?}");

    // One payment: the server answers the same request directly with that payment.
    let direct = MerchantClient::from_credentials(server.creds())
        .expect("client")
        .create_payment(&body)
        .await
        .expect("create");
    assert_eq!(direct.status, StatusCode::OK);
    assert_eq!(direct.json["id"], payment["id"]);

    serving.abort();
    server.stop().await;
}

/// The README's first five minutes: a server allowing local callbacks, the bundled receiver
/// on a local port, the quickstart with `--callback-url`: the payment completes and the
/// receiver verifies the callback and records the order as `completed` with the amount.
#[tokio::test]
async fn the_first_five_minutes_end_with_a_verified_callback() {
    let server = TestServer::start(|s| s.callbacks.allow_local = true).await;
    let creds = server.creds();
    let secret = CallbackSecret::parse(creds.callback_secret.expose()).expect("whsec_");
    let db = ReceiverDb::in_memory().expect("db");
    let receiver = Receiver::new(
        CallbackVerifier::new(vec![secret]),
        db.clone(),
        MerchantClient::from_credentials(creds).expect("client"),
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
    let url = format!("http://{addr}{CALLBACK_PATH}");
    let report = payments_examples::quickstart_with_callback(creds, Some(&url))
        .await
        .expect("the quickstart succeeds");
    assert!(report
        .to_string()
        .contains(&format!("6. The `completed` callback was queued for {url}")));
    let deadline = std::time::Instant::now() + Duration::from_secs(20);
    let order = loop {
        if let Some(order) = db.order(&report.payment_id).expect("db") {
            break order;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "no verified callback reached the receiver"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    };
    assert_eq!(order.status, "completed");
    assert_eq!(order.amount, "3400");
    assert_eq!(order.merchant_payment_id, report.merchant_payment_id);
    assert_eq!(order.applied_events, 1);
    server.stop().await;
}

/// The merchant client against a server whose certificate the system does not trust: the
/// failure is named as TLS (it was "could not connect"), and `--ca-file` with that
/// certificate makes the same create go through.
#[tokio::test]
async fn a_private_ca_is_named_and_trusted_with_ca_file() {
    let dir = tempfile::tempdir().expect("a temporary directory");
    let cert = rcgen::generate_simple_self_signed(vec!["127.0.0.1".to_string()]).expect("a cert");
    let (cert_path, key_path) = (dir.path().join("cert.pem"), dir.path().join("key.pem"));
    std::fs::write(&cert_path, cert.cert.pem()).expect("write");
    std::fs::write(&key_path, cert.key_pair.serialize_pem()).expect("write");
    let server = TestServer::start(|s| {
        s.tls.cert = Some(cert_path.clone());
        s.tls.key = Some(key_path);
    })
    .await;
    let file = dir.path().join("creds.json");
    std::fs::write(&file, serde_json::to_vec(server.creds()).expect("JSON")).expect("write");
    let mut args = payments_examples::cli::ApiArgs {
        credentials: file,
        base_url: None,
        token: None,
        private_key: None,
        ca_file: None,
        project: payments_examples::cli::Project::Demo,
    };
    let body =
        json!({"merchant_payment_id": "order-ca-1", "amount": "700", "payment_method": "sbp"});
    let once = RetryPolicy {
        max_attempts: 1,
        ..RetryPolicy::default()
    };
    let untrusting = args
        .client()
        .expect("a client")
        .with_http_client(args.http_client(reqwest::Client::builder()).expect("http"));
    let e = create_with_retries(&untrusting, &body, &once, |_| {})
        .await
        .expect_err("an untrusted certificate is refused")
        .to_string();
    assert!(e.contains("the TLS handshake failed"), "{e}");
    assert!(e.contains("--ca-file"), "{e}");

    args.ca_file = Some(cert_path);
    let trusting = args
        .client()
        .expect("a client")
        .with_http_client(args.http_client(reqwest::Client::builder()).expect("http"));
    let payment = create_with_retries(&trusting, &body, &once, |_| {})
        .await
        .expect("the create goes through");
    assert_eq!(payment["merchant_payment_id"], "order-ca-1");
    server.stop().await;
}

/// The README's command for `--example {example}` in the code block that has the laptop
/// example (`--example listen`): its arguments after `--`, continuation lines joined.
fn readme_laptop_command(example: &str) -> Vec<String> {
    let readme = include_str!("../../README.md");
    let block = readme
        .split("```")
        .find(|b| b.contains("--example listen"))
        .expect("the README has the laptop example");
    let joined = block.replace("\\\n", " ");
    let line = joined
        .lines()
        .rfind(|l| l.contains(&format!("--example {example} ")))
        .unwrap_or_else(|| panic!("the laptop example starts {example}"));
    let args = line.split(" -- ").nth(1).expect("arguments after --");
    args.split_whitespace()
        .map(|a| a.trim_end_matches('&').to_string())
        .filter(|a| !a.is_empty())
        .collect()
}

/// The README's "callbacks to a laptop", as written: its `callback_receiver` and `listen`
/// commands (parsed by the examples' own command lines; only the port is the test's and the
/// credentials file the test server's), a test payment of the sandbox's test project with a
/// callback URL the sandbox cannot reach, paid and then "send callback": `listen` says it
/// follows the test project, forwards the callback, and the receiver verifies it (200) and
/// records the order.
#[tokio::test]
async fn the_readmes_laptop_example_verifies_a_forwarded_callback() {
    use clap::Parser;
    use payments_examples::listen::ListenArgs;
    use payments_examples::receiver::ReceiverArgs;

    let server = TestServer::start(|s| s.callbacks.allow_local = true).await;
    let dir = tempfile::tempdir().expect("a temporary directory");
    let creds_file = dir.path().join("sandbox-credentials.json");
    std::fs::write(
        &creds_file,
        serde_json::to_vec(server.creds()).expect("JSON"),
    )
    .expect("write");
    let creds_arg = creds_file.to_str().expect("UTF-8").to_string();
    let test_creds = server.creds().for_test_project().expect("a test project");

    // Terminal 1: the receiver, on a port of the test's choosing.
    let mut argv = vec!["callback_receiver".to_string()];
    argv.extend(readme_laptop_command("callback_receiver"));
    argv.extend(["--credentials".into(), creds_arg.clone()]);
    argv.extend([
        "--db".into(),
        dir.path().join("receiver.db").display().to_string(),
    ]);
    let args = ReceiverArgs::try_parse_from(&argv).expect("the README's receiver command parses");
    let db = ReceiverDb::open(&args.db).expect("db");
    let receiver = Receiver::new(
        args.verifier().expect("the receiver's secrets"),
        db.clone(),
        args.api.client().expect("the receiver's client"),
        Arc::new(SystemClock),
    );
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
        .await
        .expect("bind");
    let addr: SocketAddr = listener.local_addr().expect("addr");
    tokio::spawn(async move { axum::serve(listener, receiver_router(Arc::new(receiver))).await });

    // Terminal 2: `listen`, forwarding to that port.
    let mut argv = vec!["listen".to_string()];
    argv.extend(
        readme_laptop_command("listen")
            .into_iter()
            .map(|a| a.replace("127.0.0.1:9090", &addr.to_string())),
    );
    argv.extend(["--credentials".into(), creds_arg]);
    let args = ListenArgs::try_parse_from(&argv).expect("the README's listen command parses");
    let (mut listen, line) = args.listener().expect("a listener");
    assert!(
        line.contains(&format!("the test project {}", test_creds.project_id)),
        "{line}"
    );

    // A test payment with a callback URL nobody listens on, paid, then "send callback".
    let closed = tokio::net::TcpListener::bind("127.0.0.1:0")
        .await
        .expect("bind");
    let dead = format!("http://{}/cb", closed.local_addr().expect("bound"));
    drop(closed);
    let client = MerchantClient::from_credentials(&test_creds).expect("client");
    let body = json!({"merchant_payment_id": "order-laptop-1", "amount": "700",
        "payment_method": "sbp", "callback_url": dead});
    let created = client.create_payment(&body).await.expect("create");
    assert_eq!(created.status, StatusCode::CREATED, "{}", created.json);
    let id = created.json["id"].as_str().expect("an id").to_string();
    let done = client
        .post(&format!("/api/v1/test/payments/{id}/complete"), b"")
        .await
        .expect("complete");
    assert_eq!(done.status, StatusCode::OK, "{}", done.json);
    let sent = client.resend_payment_callback(&id).await.expect("send");
    assert_eq!(sent.status, StatusCode::ACCEPTED, "{}", sent.json);

    let forwarded = listen.poll(Duration::ZERO).await.expect("a round");
    assert_eq!(forwarded.len(), 1, "{forwarded:?}");
    assert_eq!(forwarded[0].status, Some(200), "{}", forwarded[0].line);
    let order = db
        .order(&id)
        .expect("db")
        .expect("the receiver recorded it");
    assert_eq!(order.status, "completed");
    assert_eq!(order.merchant_payment_id, "order-laptop-1");
    server.stop().await;
}
