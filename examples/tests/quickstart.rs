//! The examples against a real server: `payments-server`'s `Application` on 127.0.0.1:0 with a
//! fresh data dir per test, and the quickstart and the callback receiver running the same
//! library code as their binaries.

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::{SystemTime, UNIX_EPOCH};

use payments_core::callback::{
    signature_header, CallbackSecret, CallbackVerifier, EVENT_ID_HEADER, SIGNATURE_HEADER,
    TIMESTAMP_HEADER,
};
use payments_core::random::uuid_v4;
use payments_examples::receiver::CALLBACK_PATH;
use payments_examples::{quickstart, receiver_router, Receiver, ReceiverDb};
use payments_http::bootstrap::{SandboxCredentials, CREDENTIALS_FILE};
use payments_http::client::MerchantClient;
use payments_http::config::PartialSettings;
use payments_http::server::Application;
use payments_http::system::{OsRandom, SystemClock};
use reqwest::StatusCode;
use serde_json::{json, Value};

struct TestServer {
    creds: SandboxCredentials,
    stop: Option<tokio::sync::oneshot::Sender<()>>,
    task: Option<tokio::task::JoinHandle<()>>,
    _dir: tempfile::TempDir,
}

impl TestServer {
    async fn start() -> TestServer {
        let dir = tempfile::tempdir().expect("a temp dir");
        let settings = PartialSettings {
            data_dir: Some(dir.path().to_path_buf()),
            listen: Some("127.0.0.1:0".into()),
            operator_listen: Some("127.0.0.1:0".into()),
            sweep_interval_ms: Some(50),
            ..PartialSettings::default()
        }
        .finish()
        .expect("valid settings");
        let app = Application::build(settings)
            .await
            .expect("the server starts");
        let text = std::fs::read_to_string(dir.path().join(CREDENTIALS_FILE))
            .expect("the sandbox wrote its credentials");
        let creds: SandboxCredentials = serde_json::from_str(&text).expect("credentials JSON");
        let (tx, rx) = tokio::sync::oneshot::channel::<()>();
        let task = tokio::spawn(async move {
            app.run_until_stopped(async {
                let _ = rx.await;
            })
            .await
            .expect("the server stops cleanly");
        });
        TestServer {
            creds,
            stop: Some(tx),
            task: Some(task),
            _dir: dir,
        }
    }

    /// `POST {operator_url}/operator/v1/payments/{id}/{action}`.
    async fn operate(&self, id: &str, action: &str) -> Value {
        let resp = reqwest::Client::new()
            .post(format!(
                "{}/operator/v1/payments/{id}/{action}",
                self.creds.operator_url
            ))
            .bearer_auth(&self.creds.operator_token)
            .send()
            .await
            .expect("the operator API answers");
        assert_eq!(resp.status(), StatusCode::OK, "{action}");
        resp.json().await.expect("JSON")
    }

    async fn stop(mut self) {
        let _ = self.stop.take().expect("started").send(());
        self.task.take().expect("started").await.expect("joined");
    }
}

#[tokio::test]
async fn the_quickstart_completes_a_payment() {
    let server = TestServer::start().await;
    let report = quickstart(&server.creds)
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
    let client = MerchantClient::from_credentials(&server.creds).expect("client");
    let read = client.get_payment(&report.payment_id).await.expect("GET");
    assert_eq!(read.json["status"], "completed");
    server.stop().await;
}

#[tokio::test]
async fn the_quickstart_fails_on_an_unexpected_answer() {
    let server = TestServer::start().await;
    let mut wrong = server.creds.clone();
    wrong.operator_token = "op_wrong".into();
    let err = quickstart(&wrong)
        .await
        .expect_err("a wrong operator token fails");
    assert!(err.starts_with("confirm: 401 token_invalid"), "{err}");

    let mut wrong = server.creds.clone();
    wrong.token = format!("{}x", server.creds.token);
    let err = quickstart(&wrong).await.expect_err("a wrong token fails");
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
    let server = TestServer::start().await;
    let creds = &server.creds;
    let client = MerchantClient::from_credentials(creds).expect("client");
    let created = client
        .create_payment(&json!({"merchant_payment_id": "order-cb-1", "amount": "1500.50", "payment_method": "sbp"}))
        .await
        .expect("create");
    assert_eq!(created.status, StatusCode::CREATED, "{}", created.json);
    let id = created.json["id"].as_str().expect("id").to_owned();
    server.operate(&id, "confirm").await;

    // The project's secret and an older one still accepted during a rotation.
    let secret = CallbackSecret::parse(&creds.callback_secret).expect("a whsec_ secret");
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
    server.operate(&id, "recheck").await;

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
