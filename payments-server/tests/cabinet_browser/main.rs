//! The web cabinet in a real browser: headless Chromium driven over WebDriver against the
//! whole server on 127.0.0.1:0. The server runs on a shifted clock so a test steps past a TOTP
//! time step instead of sleeping; codes are computed from the key the enrolment page shows.
//!
//! Every test here needs Debian's `chromium` and `chromium-driver` and is ignored in a plain
//! `cargo test` (the summary counts it); `-- --include-ignored` runs them (`.ci/run` does).
//! `CABINET_SCREENSHOTS=<dir>` writes a PNG of each page the layout walk visits, at 1,280 and
//! 390 px ([`layout`]: `CABINET_SCREENSHOTS=$PWD/docs/cabinet cargo test -p payments-server
//! --all-features --test cabinet_browser -- --include-ignored every_page`).

/// The cabinet tests' helpers (payments-http's), over this crate's test server.
#[path = "../../../payments-http/tests/cabinet/support.rs"]
mod support;

/// The pages and forms of a project and what each team role may use (payments-http's).
#[path = "../../../payments-http/tests/cabinet/roles.rs"]
mod roles;

mod appeals;
mod balance;
mod browser;
mod language;
mod layout;
mod merchant_control;
mod payer;
mod reenrol;
mod reload;
mod requests;
mod search;
mod team;

use std::net::SocketAddr;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use axum::http::HeaderMap;
use browser::Browser;
use payments_cabinet::store::{AuditQuery, Role};
use payments_client::MerchantClient;
use payments_core::auth::keys::{generate_signing_key, keyid, public_key_to_pem};
use payments_core::callback::{CallbackSecret, CallbackVerifier};
use payments_core::service::Actor;
use payments_core::store::MerchantStoreExt;
use payments_core::transition::Trigger;
use payments_core::Clock;
use payments_http::system::OsRandom;
use payments_server::config::Settings as ServerSettings;
use payments_server::testing::TestServer;
use serde_json::json;
use support::{Cabinet, PASSWORD};

/// Starts a browser for `c` (the test fails when there is none).
macro_rules! browser {
    ($c:expr) => {
        Browser::start($c.url()).await
    };
}

/// The first sign-in of `email` in `b`: password, enrolment with the key the page shows, the
/// recovery codes page. Returns the key and the codes.
async fn first_sign_in(c: &Cabinet, b: &Browser, email: &str) -> (Vec<u8>, Vec<String>) {
    b.password_step(email, PASSWORD).await;
    assert_eq!(b.path().await, "/sign-in/enrol");
    let key_text = b.text("#totp-key").await;
    let key = payments_cabinet::secrets::totp_key_from_base32(&key_text.replace(' ', ""))
        .expect("the key is base32");
    b.fill("#code", &c.code(&key)).await;
    b.click("form[action='/sign-in/enrol'] button").await;
    let mut codes = Vec::new();
    for e in b.all("#recovery-codes code").await {
        codes.push(e.text().await.expect("text"));
    }
    assert_eq!(
        codes.len(),
        10,
        "ten recovery codes are shown: {}",
        b.source().await
    );
    (key, codes)
}

/// The page the browser shows, without the query (a refused form's page carries
/// `?flash=<slot>`).
async fn page(b: &Browser) -> String {
    let path = b.path().await;
    path.split('?').next().unwrap_or_default().to_string()
}

/// A second factor with the current code (after moving to the next time step).
async fn code_step(c: &Cabinet, b: &Browser, key: &[u8]) {
    c.next_step();
    b.fill("#code", &c.code(key)).await;
    b.click("form[action='/sign-in/code'] button").await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs Chromium: chromium and chromedriver"]
async fn first_sign_in_enrols_and_codes_are_used_once_and_failures_throttled() {
    let c = Cabinet::start().await;
    let demo = c.demo_merchant().await;
    c.user("owner@shop.example", Role::Merchant(demo)).await;
    c.user("second@shop.example", Role::Merchant(demo)).await;
    let b = browser!(c);

    // First sign-in: enrolment is forced; the QR code, the otpauth link and the key are shown.
    b.password_step("owner@shop.example", PASSWORD).await;
    assert_eq!(b.path().await, "/sign-in/enrol");
    assert!(b.el(".qr svg").await.is_displayed().await.expect("shown"));
    let link = b
        .el("#otpauth-link")
        .await
        .attr("href")
        .await
        .expect("an attribute")
        .expect("a link");
    assert!(link.starts_with("otpauth://totp/"), "{link}");
    assert!(link.contains("owner%40shop.example"), "{link}");
    b.open("/projects").await;
    assert_eq!(b.path().await, "/sign-in/enrol", "no page before enrolment");
    b.sign_out().await;
    let (key, codes) = first_sign_in(&c, &b, "owner@shop.example").await;
    b.click_text("I have saved the codes, continue").await;
    assert_eq!(b.heading().await, "Home");
    b.sign_out().await;

    // Sign-in with TOTP; the same code (its time step) again is refused.
    c.next_step();
    let code = c.code(&key);
    b.password_step("owner@shop.example", PASSWORD).await;
    assert_eq!(b.path().await, "/sign-in/code");
    b.fill("#code", &code).await;
    b.click("form[action='/sign-in/code'] button").await;
    assert_eq!(b.heading().await, "Home");
    b.sign_out().await;
    b.password_step("owner@shop.example", PASSWORD).await;
    b.fill("#code", &code).await;
    b.click("form[action='/sign-in/code'] button").await;
    assert_eq!(
        page(&b).await,
        "/sign-in/code",
        "a replayed code is refused"
    );
    assert!(
        b.errors().await.contains("already used"),
        "{}",
        b.errors().await
    );
    code_step(&c, &b, &key).await;
    assert_eq!(b.heading().await, "Home", "the next code works");
    b.sign_out().await;

    // A recovery code works once.
    b.password_step("owner@shop.example", PASSWORD).await;
    b.click_text("Use a recovery code instead").await;
    b.fill("#recovery_code", &codes[0]).await;
    b.click("form[action='/sign-in/recovery'] button").await;
    assert_eq!(b.heading().await, "Security");
    assert_eq!(b.text("#codes-left").await, "9");
    b.sign_out().await;
    b.password_step("owner@shop.example", PASSWORD).await;
    b.open("/sign-in/recovery").await;
    b.fill("#recovery_code", &codes[0].to_uppercase()).await;
    b.click("form[action='/sign-in/recovery'] button").await;
    assert_eq!(page(&b).await, "/sign-in/recovery");
    assert!(
        b.errors().await.contains("already used"),
        "a used recovery code is refused: {}",
        b.errors().await
    );
    b.fill("#recovery_code", &codes[1]).await;
    b.click("form[action='/sign-in/recovery'] button").await;
    assert_eq!(b.heading().await, "Security");
    assert_eq!(b.text("#codes-left").await, "8");
    b.sign_out().await;

    // Wrong passwords: five are refused alike, then even the right one is throttled.
    for _ in 0..5 {
        b.password_step("owner@shop.example", "not the password")
            .await;
        assert_eq!(page(&b).await, "/sign-in");
        assert!(
            b.errors().await.contains("not right"),
            "{}",
            b.errors().await
        );
    }
    b.password_step("owner@shop.example", PASSWORD).await;
    assert_eq!(page(&b).await, "/sign-in");
    assert!(
        b.errors().await.contains("Too many failed attempts"),
        "{}",
        b.errors().await
    );
    // An unknown account gets the same answer as a wrong password.
    b.password_step("nobody@shop.example", PASSWORD).await;
    assert!(b.errors().await.contains("not right"));

    // Wrong codes: five, then the right code is throttled too.
    let (key2, _) = first_sign_in(&c, &b, "second@shop.example").await;
    b.click_text("I have saved the codes, continue").await;
    b.sign_out().await;
    b.password_step("second@shop.example", PASSWORD).await;
    assert_eq!(b.path().await, "/sign-in/code");
    for wrong in ["000000", "111111", "222222", "333333", "444444"] {
        let wrong = if wrong == c.code(&key2) {
            "555555"
        } else {
            wrong
        };
        b.fill("#code", wrong).await;
        b.click("form[action='/sign-in/code'] button").await;
        assert!(
            b.errors().await.contains("not right"),
            "{}",
            b.errors().await
        );
    }
    code_step(&c, &b, &key2).await;
    assert_eq!(page(&b).await, "/sign-in/code");
    assert!(
        b.errors().await.contains("Too many failed attempts"),
        "{}",
        b.errors().await
    );

    // Every one of these is in the audit log with the address.
    let audit = c
        .cabinet()
        .store()
        .find_cabinet_audit(&AuditQuery {
            merchant: Some(demo),
            limit: 200,
            ..AuditQuery::default()
        })
        .await
        .expect("audit")
        .records;
    let refused_passwords = audit
        .iter()
        .filter(|r| r.action == "sign_in.password" && !r.success)
        .count();
    assert_eq!(
        refused_passwords, 6,
        "five wrong passwords and one throttled attempt"
    );
    assert!(audit
        .iter()
        .filter(|r| r.action.starts_with("sign_in"))
        .all(|r| r.address.as_deref() == Some("127.0.0.1")));
    b.close().await;
    c.server.stop().await;
}

/// The requests a receiver got: headers and body of each.
type Received = Arc<Mutex<Vec<(HeaderMap, Vec<u8>)>>>;

/// A callback receiver on 127.0.0.1:0 keeping every request's headers and body.
async fn receiver() -> (String, Received) {
    let got: Received = Arc::default();
    let keep = got.clone();
    let app = axum::Router::new().route(
        "/callbacks",
        axum::routing::post(move |headers: HeaderMap, body: axum::body::Bytes| {
            let keep = keep.clone();
            async move {
                keep.lock().unwrap().push((headers, body.to_vec()));
                "{\"received\": true}"
            }
        }),
    );
    let listener = tokio::net::TcpListener::bind(SocketAddr::from(([127, 0, 0, 1], 0)))
        .await
        .expect("bind");
    let url = format!(
        "http://127.0.0.1:{}/callbacks",
        listener.local_addr().expect("bound").port()
    );
    tokio::spawn(async move { axum::serve(listener, app).await });
    (url, got)
}

async fn wait_until(what: &str, mut done: impl FnMut() -> bool) {
    for _ in 0..200 {
        if done() {
            return;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    panic!("timed out waiting for {what}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs Chromium: chromium and chromedriver"]
async fn external_api_access_tokens_keys_allow_list_and_secret_rotation() {
    let c = Cabinet::start_with(|s| s.callbacks.allow_local = true).await;
    let demo = c.demo_merchant().await;
    c.user("owner@shop.example", Role::Merchant(demo)).await;
    let b = browser!(c);
    let project = c.server.project();
    let creds = c.server.creds().clone();
    first_sign_in(&c, &b, "owner@shop.example").await;
    b.click_text("I have saved the codes, continue").await;
    b.open("/projects").await;
    b.click_text("Demo project").await;
    assert_eq!(b.path().await, format!("/projects/{project}"));
    assert!(b.heading().await.contains("External API access"));

    // A token with two scopes, shown once, used for a signed create.
    b.toggle("#scope-3").await; // payments:test off
    b.fill("#token-name", "shop backend").await;
    b.click("form[action$='/tokens'] button").await;
    let token = b
        .el("#secret-value")
        .await
        .prop("value")
        .await
        .expect("a property")
        .expect("the token");
    assert!(token.starts_with("nl_test_"), "{token}");
    let client = MerchantClient::new(&creds.base_url, &token, creds.private_key_pem.expose())
        .expect("a client");
    let created = client
        .create_payment(
            &json!({"merchant_payment_id": "cab-1", "amount": "1500", "payment_method": "sbp"}),
        )
        .await
        .expect("a create");
    assert_eq!(created.status.as_u16(), 201, "{}", created.json);
    b.click_text("Done").await;
    let row = b.row(&token[..14]).await;
    assert!(row.contains(&token[..14]), "the prefix is listed: {row}");
    assert!(row.contains("payments:create, payments:read"), "{row}");
    assert!(row.contains("UTC"), "created and last used: {row}");
    assert!(row.contains("shop backend"), "its name: {row}");
    assert!(row.contains("never"), "no expiry: {row}");
    assert!(!row.contains("not yet"), "the token was used: {row}");
    assert!(
        !b.source().await.contains(&token),
        "the token is not shown again"
    );

    // A key pasted as PEM gets its keyid; requests signed with it pass.
    let key = generate_signing_key(&OsRandom);
    let expected = keyid(&key.verifying_key());
    b.fill("#public_key", &public_key_to_pem(&key.verifying_key()))
        .await;
    b.click("form[action$='/keys'] button").await;
    assert!(
        b.text(".notice").await.contains(expected.as_str()),
        "the keyid is shown"
    );
    assert!(b.text("#keys tbody").await.contains(expected.as_str()));
    let signed = client
        .with_key(key)
        .create_payment(
            &json!({"merchant_payment_id": "cab-2", "amount": "1500", "payment_method": "sbp"}),
        )
        .await
        .expect("a create");
    assert_eq!(signed.status.as_u16(), 201, "{}", signed.json);
    // A private key pasted by mistake is refused with the reason.
    b.fill("#public_key", "not a key").await;
    b.click("form[action$='/keys'] button").await;
    assert!(
        b.errors().await.contains("Public key"),
        "{}",
        b.errors().await
    );

    // An allow-list with a bad line: each bad line named, nothing saved.
    b.fill(
        "#ip_allow_list",
        "127.0.0.1\nnot-an-address\n10.0.0.1/8\n2001:db8::/32",
    )
    .await;
    b.click("form[action$='/allow-list'] button").await;
    let errors = b.errors().await;
    assert!(
        errors.contains("line 2") && errors.contains("not-an-address"),
        "{errors}"
    );
    assert!(
        errors.contains("line 3") && errors.contains("10.0.0.0/8"),
        "{errors}"
    );
    assert!(b.text("#ip_allow_list-error").await.contains("Line 2"));
    let stored = c
        .server
        .state
        .service
        .store()
        .project(project)
        .await
        .expect("store")
        .expect("project");
    assert!(stored.ip_allow_list.is_empty(), "nothing saved");
    b.fill("#ip_allow_list", "127.0.0.1\n\n2001:db8::/32").await;
    b.click("form[action$='/allow-list'] button").await;
    assert!(b.text(".notice").await.contains("allow-list is saved"));
    let stored = c
        .server
        .state
        .service
        .store()
        .project(project)
        .await
        .expect("store")
        .expect("project");
    assert_eq!(stored.ip_allow_list, vec!["127.0.0.1", "2001:db8::/32"]);

    // Callback URL, then a new secret: a confirmation page, the secret shown once, and the
    // next callback signed with both the new and the previous secret.
    let (url, got) = receiver().await;
    b.fill("#callback_url", &url).await;
    b.click("form[action$='/callback-url'] button").await;
    assert!(b.text(".notice").await.contains("callback URL is saved"));
    b.click_text("Issue a new secret").await;
    assert!(
        b.source().await.contains("24 hours"),
        "the overlap is explained"
    );
    assert!(b.source().await.contains("At most two secrets"));
    b.click("form button.primary").await;
    let new_secret = b
        .el("#secret-value")
        .await
        .prop("value")
        .await
        .expect("a property")
        .expect("the secret");
    b.click_text("Done").await;
    let status = b.text("#secret-status").await;
    assert!(status.contains("still signs"), "{status}");
    let payment = created.json["id"]
        .as_str()
        .expect("id")
        .parse()
        .expect("an id");
    c.server
        .state
        .service
        .payments()
        .operate(
            payment,
            Trigger::Confirm { amount: None },
            &Actor("test".into()),
        )
        .await
        .expect("confirmed");
    wait_until("the callback", || !got.lock().unwrap().is_empty()).await;
    let (headers, body) = got.lock().unwrap()[0].clone();
    let timestamp = headers["x-callback-timestamp"].to_str().expect("text");
    let signature = headers["x-callback-signature"].to_str().expect("text");
    assert_eq!(signature.matches("v1=").count(), 2, "{signature}");
    let now = c.clock.now();
    for secret in [new_secret.as_str(), creds.callback_secret.expose()] {
        let verifier =
            CallbackVerifier::new(vec![CallbackSecret::parse(secret).expect("a secret")]);
        verifier
            .verify(timestamp, signature, &body, now)
            .expect("each secret verifies the callback");
    }
    // The delivery with the receiver's answer is on the deliveries page.
    b.open(&format!("/projects/{project}/deliveries")).await;
    for _ in 0..100 {
        if b.source().await.contains("HTTP 200") {
            break;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
        b.open(&format!("/projects/{project}/deliveries")).await;
    }
    let page = b.source().await;
    assert!(
        page.contains("HTTP 200") && page.contains("received"),
        "{page}"
    );
    b.close().await;
    c.server.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs Chromium: chromium and chromedriver"]
async fn paid_in_a_test_project_and_a_support_resend() {
    let c = Cabinet::start_with(|s| s.callbacks.allow_local = true).await;
    let demo = c.demo_merchant().await;
    c.user("owner@shop.example", Role::Merchant(demo)).await;
    c.user("help@support.example", Role::Support).await;
    let test_creds = c.server.creds().for_test_project().expect("a test project");
    let test_project = test_creds.project_id.clone();
    let client = MerchantClient::from_credentials(&test_creds).expect("a client");
    let created = client
        .create_payment(&json!({"merchant_payment_id": "test-1", "amount": "2500", "payment_method": "card_transfer"}))
        .await
        .expect("a create");
    assert_eq!(created.status.as_u16(), 201, "{}", created.json);
    let id = created.json["id"].as_str().expect("id").to_string();
    let b = browser!(c);
    first_sign_in(&c, &b, "owner@shop.example").await;
    b.click_text("I have saved the codes, continue").await;
    b.click_text("Demo test project").await;
    b.click("nav.tabs a[href$='/payments']").await;
    let listed = b.source().await;
    assert!(listed.contains("test-1"), "the payment is listed: {listed}");
    b.click_text("test-1").await;
    assert_eq!(b.path().await, format!("/payments/{id}"));
    assert!(b.text(".test-banner").await.contains("TEST PAYMENT"));
    assert_eq!(b.text("#payment-status").await, "processing");
    // The API's fields and the status history are folded away under the timeline.
    b.toggle("#technical summary").await;
    let fields = b.text("#payment-fields").await;
    assert!(fields.contains("holder_name"), "{fields}");
    assert!(
        fields.contains("merchant_information.amount_usdt"),
        "{fields}"
    );
    b.click("#test-paid").await;
    assert_eq!(b.text("#payment-status").await, "completed");
    assert!(
        b.all("#test-paid").await.is_empty(),
        "no buttons once closed"
    );
    let read = client.get_payment(&id).await.expect("a read");
    assert_eq!(read.json["status"], "completed", "{}", read.json);
    // No automatic callback for a test payment, and yet its status history shows every change:
    // the create, the requisites, the owner's Paid.
    assert!(b.source().await.contains("No callback events"));
    b.toggle("#technical summary").await;
    let history = b.text("#payment-history tbody").await;
    let rows: Vec<&str> = history.lines().filter(|l| !l.trim().is_empty()).collect();
    assert_eq!(rows.len(), 3, "{history}");
    for (row, words) in rows.iter().zip([
        ["created", "created", "merchant"],
        ["processing", "requisites_issued", "provider"],
        ["completed", "confirmed", "merchant"],
    ]) {
        assert!(
            words.iter().all(|w| row.contains(w)),
            "{row} lacks {words:?}"
        );
    }
    // The owner points the test project at a receiver.
    let (url, got) = receiver().await;
    b.open(&format!("/projects/{test_project}")).await;
    b.fill("#callback_url", &url).await;
    b.click("form[action$='/callback-url'] button").await;
    // The owner sends the closed test payment's callback ("Send callback": a real signed
    // request with is_test true, no support needed).
    b.open(&format!("/payments/{id}")).await;
    b.click("#test-send-callback").await;
    assert!(b.text(".notice").await.contains("callback was queued"));
    wait_until("the owner's callback", || !got.lock().unwrap().is_empty()).await;
    let body: serde_json::Value = serde_json::from_slice(&got.lock().unwrap()[0].1).expect("JSON");
    assert_eq!(
        (body["is_test"].clone(), body["status"].clone()),
        (json!(true), json!("completed"))
    );
    assert!(
        b.all("#resend-link").await.is_empty(),
        "support's resend is not shown"
    );
    let live = c
        .server
        .client()
        .create_payment(
            &json!({"merchant_payment_id": "live-1", "amount": "2500", "payment_method": "sbp"}),
        )
        .await
        .expect("a create");
    // A live payment still open: the merchant's resend is refused by the service, saying why.
    let live_id = live.json["id"].as_str().expect("id");
    b.open(&format!("/payments/{live_id}")).await;
    assert!(
        b.all("#merchant-resend-link").await.is_empty(),
        "only when closed"
    );
    b.open(&format!("/payments/{live_id}/resend")).await;
    b.click_text("Resend the callback").await;
    assert!(b.errors().await.contains("closed"), "{}", b.errors().await);
    b.open("/projects").await;
    b.sign_out().await;

    // Support resends from the card, behind a confirmation page.
    first_sign_in(&c, &b, "help@support.example").await;
    b.click_text("I have saved the codes, continue").await;
    b.open(&format!("/payments/{id}")).await;
    b.click("#resend-link").await;
    assert!(b.heading().await.starts_with("Resend the callback"));
    b.click_text("Resend the callback").await;
    assert!(b.text(".notice").await.contains("callback was queued"));
    wait_until("the resent callback", || got.lock().unwrap().len() == 2).await;
    let body: serde_json::Value = serde_json::from_slice(&got.lock().unwrap()[1].1).expect("JSON");
    assert_eq!(body["is_test"], true);
    assert_eq!(body["status"], "completed");
    b.open(&format!("/projects/{test_project}/deliveries"))
        .await;
    // Both events (the owner's and support's) delivered.
    for _ in 0..100 {
        if b.source().await.matches("HTTP 200").count() >= 2 {
            break;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
        b.open(&format!("/projects/{test_project}/deliveries"))
            .await;
    }
    let list = b.text(".event").await;
    assert!(list.contains("manual resend"), "{list}");
    assert!(
        list.contains("delivered") && list.contains("HTTP 200"),
        "{list}"
    );
    b.close().await;
    c.server.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs Chromium: chromium and chromedriver"]
async fn a_merchant_user_cannot_open_another_merchants_project_or_payment() {
    let c = Cabinet::start().await;
    let (other, _) = c.other_merchant("Other").await;
    c.user("other@other.example", Role::Merchant(other)).await;
    let created = c
        .server
        .client()
        .create_payment(
            &json!({"merchant_payment_id": "mine-1", "amount": "1500", "payment_method": "sbp"}),
        )
        .await
        .expect("a create");
    let payment = created.json["id"].as_str().expect("id").to_string();
    let project = c.server.project();
    let b = browser!(c);
    first_sign_in(&c, &b, "other@other.example").await;
    b.click_text("I have saved the codes, continue").await;
    // Home first; the project list shows the user's own project and leaves out the demo one.
    assert_eq!(b.heading().await, "Home");
    b.open("/projects").await;
    assert_eq!(b.heading().await, "Projects and API");
    let list = b.source().await;
    assert!(list.contains("Other site"));
    assert!(!list.contains("Demo project"));
    for path in [
        format!("/projects/{project}"),
        format!("/projects/{project}/payments"),
        format!("/projects/{project}/deliveries"),
        format!("/payments/{payment}"),
    ] {
        b.open(&path).await;
        assert_eq!(b.heading().await, "Not found", "{path}");
        assert!(!b.source().await.contains("mine-1"), "{path}");
    }
    b.close().await;
    c.server.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs Chromium: chromium and chromedriver"]
async fn over_tls_the_session_cookie_is_host_prefixed_secure_httponly_and_strict() {
    let dir = tempfile::tempdir().expect("a directory");
    let cert = rcgen::generate_simple_self_signed(vec!["127.0.0.1".to_string()]).expect("a cert");
    let (cert_path, key_path) = (dir.path().join("cert.pem"), dir.path().join("key.pem"));
    std::fs::write(&cert_path, cert.cert.pem()).expect("written");
    std::fs::write(&key_path, cert.key_pair.serialize_pem()).expect("written");
    let c = Cabinet::start_with(|s| {
        s.tls.cert = Some(cert_path);
        s.tls.key = Some(key_path);
    })
    .await;
    assert!(c.url().starts_with("https://"), "{}", c.url());
    let demo = c.demo_merchant().await;
    c.user("owner@shop.example", Role::Merchant(demo)).await;
    let b = Browser::start_with(c.url(), true).await;
    first_sign_in(&c, &b, "owner@shop.example").await;
    let cookies = b.client.get_all_cookies().await.expect("cookies");
    assert_eq!(cookies.len(), 1, "{cookies:?}");
    let cookie = &cookies[0];
    assert_eq!(cookie.name(), "__Host-cabinet");
    assert_eq!(cookie.secure(), Some(true));
    assert_eq!(cookie.http_only(), Some(true));
    assert_eq!(cookie.path(), Some("/"));
    assert_eq!(format!("{:?}", cookie.same_site()), "Some(Strict)");
    b.click_text("I have saved the codes, continue").await;
    assert_eq!(b.heading().await, "Home");
    b.close().await;
    c.server.stop().await;
}
