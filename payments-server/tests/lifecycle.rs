//! Payment lifecycles end to end over real sockets: operator decisions and re-checks ending in
//! verified callbacks, sandbox test payments and their helper endpoints.

use payments_directory::DirectoryAccess;
use std::time::Duration;

use axum::body::Bytes;
use axum::http::HeaderMap;
use axum::routing::post;
use payments_core::callback::{CallbackSecret, CallbackVerifier, RetrySchedule};
use payments_core::service::Actor;
use payments_core::store::MerchantStoreExt;
use payments_core::Timestamp;
use payments_directory::ProjectPatch;
use payments_server::testing::TestServer;
use reqwest::StatusCode;
use serde_json::json;
use tokio::sync::mpsc;

struct Received {
    headers: HeaderMap,
    body: Bytes,
}

/// A plain-HTTP receiver on 127.0.0.1:0 (allowed by the development setting) that answers 200
/// and forwards what it got.
async fn receiver() -> (String, mpsc::UnboundedReceiver<Received>) {
    let (tx, rx) = mpsc::unbounded_channel();
    let app = axum::Router::new().route(
        "/cb",
        post(move |headers: HeaderMap, body: Bytes| {
            let tx = tx.clone();
            async move {
                let _ = tx.send(Received { headers, body });
                "ok"
            }
        }),
    );
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(async move { axum::serve(listener, app).await.unwrap() });
    (format!("http://{addr}/cb"), rx)
}

async fn start() -> TestServer {
    TestServer::start(|s| {
        s.callbacks.allow_local = true;
        s.callbacks.retry_delays = RetrySchedule::parse_delays("1,1").expect("valid delays");
    })
    .await
}

/// `POST {operator}/operator/v1/payments/{path}` with the operator token.
async fn op(
    s: &TestServer,
    path: &str,
    body: serde_json::Value,
) -> (StatusCode, serde_json::Value) {
    let r = reqwest::Client::new()
        .post(format!("{}/operator/v1/payments/{path}", s.operator_url))
        .bearer_auth(s.operator_token.expose())
        .json(&body)
        .send()
        .await
        .unwrap();
    (r.status(), r.json().await.unwrap())
}

/// Waits for the next callback and checks it the way a merchant's receiver would.
async fn next_verified(
    rx: &mut mpsc::UnboundedReceiver<Received>,
    secret: &str,
) -> serde_json::Value {
    let got = next_received(rx).await;
    assert!(
        verifies(&got, secret),
        "the callback verifies with the project's secret"
    );
    let h = |n: &str| got.headers.get(n).unwrap().to_str().unwrap().to_string();
    let body: serde_json::Value = serde_json::from_slice(&got.body).unwrap();
    assert_eq!(h("x-callback-event-id"), body["event_id"].as_str().unwrap());
    assert_eq!(h("content-type"), "application/json");
    body
}

/// The next callback, as it arrived.
async fn next_received(rx: &mut mpsc::UnboundedReceiver<Received>) -> Received {
    tokio::time::timeout(Duration::from_secs(10), rx.recv())
        .await
        .expect("a callback arrives")
        .unwrap()
}

/// Whether `got` verifies with `secret` now, as a merchant's receiver checks it.
fn verifies(got: &Received, secret: &str) -> bool {
    let verifier = CallbackVerifier::new(vec![CallbackSecret::parse(secret).unwrap()]);
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_millis() as i64;
    let h = |n: &str| got.headers.get(n).unwrap().to_str().unwrap().to_string();
    verifier
        .verify(
            &h("x-callback-timestamp"),
            &h("x-callback-signature"),
            &got.body,
            Timestamp::from_unix_millis(now),
        )
        .is_ok()
}

async fn nothing_more(rx: &mut mpsc::UnboundedReceiver<Received>) {
    assert!(
        tokio::time::timeout(Duration::from_millis(700), rx.recv())
            .await
            .is_err(),
        "no further callback"
    );
}

#[tokio::test]
async fn recheck_path_ends_in_verified_callbacks() {
    let s = start().await;
    let (url, mut rx) = receiver().await;
    let created = s
        .client()
        .create_payment(&json!({"merchant_payment_id": "rc-1", "amount": "3400", "payment_method": "sbp", "callback_url": url}))
        .await
        .unwrap();
    assert_eq!(created.status, StatusCode::CREATED, "{}", created.json);
    let id = created.json["id"].as_str().unwrap().to_string();
    nothing_more(&mut rx).await;

    // processing -> completed: callback.
    let (st, _) = op(&s, &format!("{id}/confirm"), json!({})).await;
    assert_eq!(st, StatusCode::OK);
    let first = next_verified(&mut rx, s.creds().callback_secret.expose()).await;
    assert_eq!(
        (
            first["status"].as_str(),
            first["amount"].to_string().as_str()
        ),
        (Some("completed"), "3400")
    );
    assert_eq!(first["rate"].to_string(), "11.00");
    assert_eq!(first["course"].to_string(), "100.00");
    assert_eq!(first["is_test"], false);

    // completed -> completed with a new amount: callback with the new amount, settlement recomputed.
    let (st, body) = op(&s, &format!("{id}/confirm"), json!({"amount": "3000"})).await;
    assert_eq!(st, StatusCode::OK, "{body}");
    assert_eq!(
        body["payment"]["merchant_information"]["amount_usdt"],
        "30.0000"
    );
    assert_eq!(body["payment"]["initial_amount"].to_string(), "3400");
    let second = next_verified(&mut rx, s.creds().callback_secret.expose()).await;
    assert_eq!(second["amount"].to_string(), "3000");
    assert_eq!(second["initial_amount"].to_string(), "3400");
    assert_ne!(second["event_id"], first["event_id"]);

    // completed -> appeal: no callback while in appeal.
    let (st, body) = op(&s, &format!("{id}/recheck"), json!({})).await;
    assert_eq!(
        (st, body["payment"]["status"].as_str()),
        (StatusCode::OK, Some("appeal"))
    );
    nothing_more(&mut rx).await;
    // Illegal while in appeal: 409 invalid_transition naming the status.
    let (st, body) = op(&s, &format!("{id}/cancel"), json!({})).await;
    assert_eq!(
        (st, body["code"].as_str()),
        (StatusCode::CONFLICT, Some("invalid_transition"))
    );
    assert!(
        body["message"].as_str().unwrap().contains("appeal"),
        "{body}"
    );

    // appeal -> canceled: callback with the result.
    let (st, _) = op(
        &s,
        &format!("{id}/recheck/resolve"),
        json!({"status": "canceled"}),
    )
    .await;
    assert_eq!(st, StatusCode::OK);
    let third = next_verified(&mut rx, s.creds().callback_secret.expose()).await;
    assert_eq!(third["status"], "canceled");

    // canceled -> completed (paid after all): callback.
    let (st, _) = op(&s, &format!("{id}/confirm"), json!({})).await;
    assert_eq!(st, StatusCode::OK);
    assert_eq!(
        next_verified(&mut rx, s.creds().callback_secret.expose()).await["status"],
        "completed"
    );

    // Manual resend: the same status, a new event_id, one attempt.
    let (st, body) = op(&s, &format!("{id}/callbacks/resend"), json!({})).await;
    assert_eq!(st, StatusCode::OK);
    let resent = next_verified(&mut rx, s.creds().callback_secret.expose()).await;
    assert_eq!(resent["status"], "completed");
    assert_eq!(resent["event_id"], body["event_id"]);

    // The event log has all five with their attempts (the last one is recorded right after
    // the receiver answered, so give it a moment).
    let mut events = serde_json::Value::Null;
    for _ in 0..40 {
        events = reqwest::Client::new()
            .get(format!(
                "{}/operator/v1/payments/{id}/events",
                s.creds().operator_url
            ))
            .bearer_auth(s.operator_token.expose())
            .send()
            .await
            .unwrap()
            .json()
            .await
            .unwrap();
        if events["events"]
            .as_array()
            .unwrap()
            .iter()
            .all(|e| e["state"] == "delivered")
        {
            break;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let list = events["events"].as_array().unwrap();
    assert_eq!(list.len(), 5);
    assert!(list
        .iter()
        .all(|e| e["state"] == "delivered" && e["attempts"].as_array().unwrap().len() == 1));
    assert_eq!(list[4]["kind"], "manual_resend");
    assert_eq!(list[4]["max_attempts"], 1);
    s.stop().await;
}

#[tokio::test]
async fn expiry_sends_the_canceled_callback() {
    let s = start().await;
    let (url, mut rx) = receiver().await;
    s.patch_project(ProjectPatch {
        callback_url: Some(Some(url)),
        ..Default::default()
    })
    .await;
    let mut p = s
        .state
        .service
        .store()
        .project(s.project())
        .await
        .unwrap()
        .unwrap();
    p.lifetime = Duration::from_millis(500);
    s.state.service.store().upsert_project(&p).await.unwrap();
    let created = s.client().create_payment(&json!({"merchant_payment_id": "exp-1", "amount": "100", "payment_method": "card_transfer"})).await.unwrap();
    let cb = next_verified(&mut rx, s.creds().callback_secret.expose()).await;
    assert_eq!(cb["status"], "canceled");
    assert_eq!(cb["id"], created.json["id"]);
    assert_eq!(cb["payment_method"], "card_transfer");
    s.stop().await;
}

#[tokio::test]
async fn test_payments_and_their_helpers() {
    let s = start().await;
    let (url, mut rx) = receiver().await;
    s.state
        .service
        .directory()
        .update_project(
            s.project(),
            ProjectPatch {
                test_mode: Some(true),
                callback_url: Some(Some(url)),
                ..Default::default()
            },
            &Actor("t".into()),
        )
        .await
        .unwrap();
    let a = s
        .client()
        .create_payment(
            &json!({"merchant_payment_id": "t-1", "amount": "100", "payment_method": "sbp"}),
        )
        .await
        .unwrap();
    assert_eq!(
        (a.json["is_test"].as_bool(), a.json["flow"].as_str()),
        (Some(true), Some("project_test"))
    );
    let id = a.json["id"].as_str().unwrap().to_string();
    // The "paid" button: completed, and no automatic callback.
    let r = s
        .client()
        .post(
            &format!("/api/v1/test/payments/{id}/complete"),
            br#"{"amount": "90"}"#,
        )
        .await
        .unwrap();
    assert_eq!(r.status, StatusCode::OK, "{}", r.json);
    assert_eq!(
        (
            r.json["status"].as_str(),
            r.json["amount"].to_string().as_str()
        ),
        (Some("completed"), "90")
    );
    nothing_more(&mut rx).await;
    // Only processing test payments: a second press is 409.
    let r = s
        .client()
        .post(&format!("/api/v1/test/payments/{id}/cancel"), b"")
        .await
        .unwrap();
    assert_eq!(
        (r.status, r.code()),
        (StatusCode::CONFLICT, Some("invalid_transition"))
    );
    // The "canceled" button on another one.
    let b = s
        .client()
        .create_payment(
            &json!({"merchant_payment_id": "t-2", "amount": "100", "payment_method": "sbp"}),
        )
        .await
        .unwrap();
    let r = s
        .client()
        .post(
            &format!(
                "/api/v1/test/payments/{}/cancel",
                b.json["id"].as_str().unwrap()
            ),
            b"",
        )
        .await
        .unwrap();
    assert_eq!(r.json["status"], "canceled");
    nothing_more(&mut rx).await;
    // Support resends the closed test payment's callback: a real signed request, is_test true.
    let (st, resend) = op(&s, &format!("{id}/callbacks/resend"), json!({})).await;
    assert_eq!(st, StatusCode::OK, "{resend}");
    let cb = next_verified(&mut rx, s.creds().callback_secret.expose()).await;
    assert_eq!(
        (cb["status"].as_str(), cb["is_test"].as_bool()),
        (Some("completed"), Some(true))
    );
    // The callback is the resend's event, not an automatic one that arrived late.
    assert!(resend["event_id"].is_string(), "{resend}");
    assert_eq!(cb["event_id"], resend["event_id"]);
    // Helpers refuse live payments and need the payments:test scope.
    s.state
        .service
        .directory()
        .update_project(
            s.project(),
            ProjectPatch {
                test_mode: Some(false),
                ..Default::default()
            },
            &Actor("t".into()),
        )
        .await
        .unwrap();
    let live = s
        .client()
        .create_payment(
            &json!({"merchant_payment_id": "live-1", "amount": "100", "payment_method": "sbp"}),
        )
        .await
        .unwrap();
    let r = s
        .client()
        .post(
            &format!(
                "/api/v1/test/payments/{}/complete",
                live.json["id"].as_str().unwrap()
            ),
            b"",
        )
        .await
        .unwrap();
    assert_eq!(r.code(), Some("invalid_transition"));
    let create_only = s
        .state
        .service
        .directory()
        .issue_token(
            s.project(),
            vec![payments_core::auth::Scope::PaymentsCreate],
            &Actor("t".into()),
        )
        .await
        .unwrap();
    let r = s
        .client()
        .with_token(create_only.token.expose())
        .post(&format!("/api/v1/test/payments/{id}/cancel"), b"")
        .await
        .unwrap();
    assert_eq!(r.code(), Some("insufficient_scope"));
    s.stop().await;
}

/// Shutdown does not wait for a mass expiry: with thousands of payments due at once the sweeper
/// works in batches of 500 and checks the stop signal between them (it used to sweep until
/// nothing was due, which after a long load run kept a stopped server busy for many minutes).
///
/// The stop arrives during the first batch: the expiries queue callback events, and an outbox
/// waker turns the stop signal on at the first one. So the sweeper has already started when it
/// is told to stop, and exactly one batch is swept.
#[tokio::test]
async fn the_sweeper_stops_between_batches() {
    use payments_core::payment::PaymentStatus;
    use payments_core::service::OutboxWaker;
    use payments_core::testing::contract::{payment_id, sample_payment};
    use payments_http::sweeper::{self, SWEEP_BATCH};
    use std::sync::atomic::{AtomicUsize, Ordering};
    use std::sync::Arc;

    /// Turns the stop signal on at the first callback event committed.
    struct StopAtFirstEvent {
        stop: tokio::sync::watch::Sender<bool>,
        events: AtomicUsize,
    }
    impl OutboxWaker for StopAtFirstEvent {
        fn wake(&self) {
            self.events.fetch_add(1, Ordering::SeqCst);
            self.stop.send_replace(true);
        }
    }

    // The server's own sweeper runs once at start and then sleeps for an hour.
    let s = TestServer::start(|s| {
        s.tuning.sweep_interval = Duration::from_secs(3600);
        s.callbacks.allow_local = true;
    })
    .await;
    // The expiries' callbacks go somewhere that accepts them.
    let (url, _rx) = receiver().await;
    s.patch_project(ProjectPatch {
        callback_url: Some(Some(url)),
        ..Default::default()
    })
    .await;
    tokio::time::sleep(Duration::from_millis(200)).await;
    let store = s.state.service.store();
    let now = s.state.service.ports().clock.now();
    let due = 3 * SWEEP_BATCH;
    for i in 0..due {
        let mut p = sample_payment(payment_id(i as u128 + 1), s.project(), &format!("due-{i}"));
        p.status = PaymentStatus::Processing;
        p.created_at = now - Duration::from_secs(7200);
        p.updated_at = p.created_at;
        p.expires_at = now - Duration::from_secs(60);
        store.insert_payment(&p).await.unwrap();
    }
    assert_eq!(store.due_payments(now, due + 1).await.unwrap().len(), due);

    let (stop, stopped) = tokio::sync::watch::channel(false);
    let waker = Arc::new(StopAtFirstEvent {
        stop,
        events: AtomicUsize::new(0),
    });
    s.state.service.callbacks().add_outbox_waker(waker.clone());
    let run = sweeper::run(s.state.service.clone(), Duration::from_secs(3600), stopped);
    tokio::time::timeout(Duration::from_secs(60), run)
        .await
        .expect("the sweeper returns once told to stop");
    assert!(
        waker.events.load(Ordering::SeqCst) > 0,
        "the stop came from the first batch's expiries"
    );
    assert_eq!(
        store.due_payments(now, due + 1).await.unwrap().len(),
        due - SWEEP_BATCH,
        "exactly one batch was swept: the stop, turned on during the first batch, was \
         checked before the second"
    );
    s.stop().await;
}

#[tokio::test]
async fn the_bootstrapped_test_project_completes_a_payment_without_operator_calls() {
    let s = TestServer::sandbox().await;
    // The file on disk carries the test project beside the demo project.
    let file = s.dir.path().join("sandbox-credentials.json");
    let on_disk: serde_json::Value =
        serde_json::from_slice(&std::fs::read(&file).unwrap()).unwrap();
    for member in ["project_id", "token", "keyid", "private_key_pem"] {
        assert!(
            on_disk["test_project"][member]
                .as_str()
                .is_some_and(|v| !v.is_empty()),
            "test_project.{member} in {file:?}"
        );
    }
    let creds = s.creds().for_test_project().expect("a test project");
    assert_ne!(creds.project_id, s.creds().project_id);
    assert!(creds.token.expose().starts_with("nl_test_"));

    // Only the test project's own credentials: create, then the sandbox's "paid" button.
    let client = payments_client::MerchantClient::from_credentials(&creds).unwrap();
    let (created, done) = create_and_complete(
        &client,
        json!({"merchant_payment_id": "boot-test-1", "amount": "1500", "payment_method": "sbp"}),
    )
    .await;
    assert_eq!(created["flow"].as_str(), Some("project_test"));
    assert_eq!(done["status"].as_str(), Some("completed"));
    let id = created["id"].as_str().unwrap().to_string();
    let read = client.get_payment(&id).await.unwrap();
    assert_eq!(read.json["status"].as_str(), Some("completed"));

    // The demo project's payments stay live ones: the helpers refuse them.
    let demo = payments_client::MerchantClient::from_credentials(s.creds()).unwrap();
    let live = demo
        .create_payment(
            &json!({"merchant_payment_id": "boot-live-1", "amount": "1500", "payment_method": "sbp"}),
        )
        .await
        .unwrap();
    assert_eq!(live.json["is_test"].as_bool(), Some(false), "{}", live.json);
    s.stop().await;
}

/// A test payment of the test project (`creds`) with `callback_url`, closed with the sandbox
/// test helper, then "send callback": the callback a guide's receiver gets.
async fn send_test_callback(
    creds: &payments_client::SandboxCredentials,
    order: &str,
    callback_url: &str,
) -> String {
    let client = payments_client::MerchantClient::from_credentials(creds).unwrap();
    let (created, _) = create_and_complete(
        &client,
        json!({"merchant_payment_id": order, "amount": "1500", "payment_method": "sbp",
            "callback_url": callback_url}),
    )
    .await;
    let id = created["id"].as_str().unwrap().to_string();
    let sent = client.resend_payment_callback(&id).await.unwrap();
    assert_eq!(sent.status, StatusCode::ACCEPTED, "{}", sent.json);
    id
}

/// Creates a test payment with `body` and closes it with the sandbox test helper
/// (`POST /api/v1/test/payments/{id}/complete`): the create's answer and the helper's.
async fn create_and_complete(
    client: &payments_client::MerchantClient,
    body: serde_json::Value,
) -> (serde_json::Value, serde_json::Value) {
    let created = client.create_payment(&body).await.unwrap();
    assert_eq!(created.status, StatusCode::CREATED, "{}", created.json);
    assert_eq!(created.json["is_test"].as_bool(), Some(true));
    let id = created.json["id"].as_str().unwrap();
    let done = client
        .post(&format!("/api/v1/test/payments/{id}/complete"), b"")
        .await
        .unwrap();
    assert_eq!(done.status, StatusCode::OK, "{}", done.json);
    (created.json, done.json)
}

/// The credentials file of `s`'s data dir, as a newcomer reads it.
fn credentials_file(s: &TestServer) -> payments_client::SandboxCredentials {
    let file = s.dir.path().join("sandbox-credentials.json");
    payments_client::SandboxCredentials::from_file(&file).unwrap()
}

#[tokio::test]
async fn a_test_payments_callback_verifies_with_the_test_projects_secret_from_the_file() {
    let s = start().await;
    let (url, mut rx) = receiver().await;
    let file = credentials_file(&s);
    let test = file.test_project.clone().expect("a test project");
    let secret = test
        .callback_secret
        .clone()
        .expect("test_project.callback_secret in the credentials file");
    assert!(secret.expose().starts_with("whsec_"));
    let creds = file
        .clone()
        .at(&s.merchant_url, &s.operator_url, None)
        .for_test_project()
        .expect("a test project");
    assert_eq!(creds.callback_secret, secret);

    // The sandbox's own delivery to the receiver: no automatic callback, then "send callback".
    let id = send_test_callback(&creds, "testsecret-1", &url).await;
    let got = next_received(&mut rx).await;
    let body: serde_json::Value = serde_json::from_slice(&got.body).unwrap();
    assert_eq!(body["id"].as_str(), Some(id.as_str()), "{body}");
    assert_eq!(body["is_test"].as_bool(), Some(true), "{body}");
    assert!(
        verifies(&got, secret.expose()),
        "test_project.callback_secret"
    );
    assert!(
        !verifies(&got, file.callback_secret.expose()),
        "the demo project's callback_secret does not verify a test payment's callback"
    );
    nothing_more(&mut rx).await;
    s.stop().await;
}

#[tokio::test]
async fn a_sandbox_bootstrapped_before_the_test_secret_gets_it_at_the_next_start() {
    let s = start().await;
    let path = s.dir.path().join("sandbox-credentials.json");
    // The file as an older server wrote it: a test project without a callback secret.
    let mut json: serde_json::Value =
        serde_json::from_slice(&std::fs::read(&path).unwrap()).unwrap();
    json["test_project"]
        .as_object_mut()
        .unwrap()
        .remove("callback_secret");
    std::fs::write(&path, serde_json::to_vec_pretty(&json).unwrap()).unwrap();
    let test_project = json["test_project"]["project_id"]
        .as_str()
        .unwrap()
        .to_string();
    let dir = s.stop_keeping_dir().await;
    // ... and a store in which the test project has no callback secret.
    let db = dir.path().join(payments_server::data_dir::DATABASE_FILE);
    let deleted = rusqlite::Connection::open(db)
        .unwrap()
        .execute(
            "DELETE FROM callback_secrets WHERE project_id = ?1",
            [&test_project],
        )
        .unwrap();
    assert_eq!(
        deleted, 1,
        "the bootstrap issued the test project one secret"
    );
    let s = TestServer::start_over(dir, |s| s.callbacks.allow_local = true).await;

    let file = credentials_file(&s);
    let secret = file
        .test_project
        .clone()
        .and_then(|t| t.callback_secret)
        .expect("the next start wrote test_project.callback_secret");
    assert_eq!(
        file.project_id,
        json["project_id"].as_str().unwrap(),
        "the rest kept"
    );
    let creds = file
        .at(&s.merchant_url, &s.operator_url, None)
        .for_test_project()
        .unwrap();
    let (url, mut rx) = receiver().await;
    send_test_callback(&creds, "testsecret-old-1", &url).await;
    let got = next_received(&mut rx).await;
    assert!(
        verifies(&got, secret.expose()),
        "the secret the file got signs"
    );

    // A third start leaves the secret as it is.
    let s = s.restart(|s| s.callbacks.allow_local = true).await;
    let again = credentials_file(&s)
        .test_project
        .and_then(|t| t.callback_secret);
    assert_eq!(again, Some(secret));
    s.stop().await;
}
