//! The request log over a real socket: the requests a merchant's client sends reach its
//! project's log off the request path, a refused signature with its diagnosis, and the
//! integration health reads them.

use std::time::Duration;

use payments_client::SignSpec;
use payments_core::request_log::{RequestLogEntry, RequestLogQuery};
use payments_http::testing::TestServer;
use reqwest::{Method, StatusCode};

use crate::support::body;

/// The project's log once it holds a request with `request_id` (the writer is a task of its
/// own: an answer comes before its entry is written).
async fn logged(s: &TestServer, request_id: &str) -> Vec<RequestLogEntry> {
    for _ in 0..500 {
        let page = s
            .state
            .service
            .requests()
            .request_log(&RequestLogQuery::new(s.project(), 100))
            .await
            .expect("the log reads");
        if page.requests.iter().any(|e| e.request_id == request_id) {
            return page.requests;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    panic!("request {request_id} never reached the log");
}

#[tokio::test]
async fn a_refused_signature_is_logged_with_its_diagnosis() {
    let s = TestServer::sandbox().await;
    let c = &s.client();
    // A create, and its retry with the same merchant_payment_id.
    let created = c.create_payment(&body("rl-1", "100")).await.unwrap();
    assert_eq!(created.status, StatusCode::CREATED);
    let again = c.create_payment(&body("rl-1", "100")).await.unwrap();
    assert_eq!(again.status, StatusCode::OK);
    // Two reads of it at once: polling faster than every 5 s.
    let id = created.json["id"].as_str().unwrap().to_string();
    for _ in 0..2 {
        assert_eq!(c.get_payment(&id).await.unwrap().status, StatusCode::OK);
    }
    // A request of an unknown token is nobody's: not logged.
    let stranger = c
        .with_token("nl_test_AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA")
        .create_payment(&body("rl-2", "100"))
        .await
        .unwrap();
    assert_eq!(stranger.status, StatusCode::UNAUTHORIZED);
    // Signed 30 s in the past with the project's key, then one byte of the signature
    // changed: it does not verify.
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_secs() as i64;
    let spec = SignSpec {
        created: Some(now - 30),
        ..Default::default()
    };
    let b = serde_json::to_vec(&body("rl-3", "100")).unwrap();
    let mut forged = c
        .prepare(Method::POST, "/api/v1/payments", &b, Some(&spec))
        .unwrap();
    let signature = forged
        .headers
        .iter_mut()
        .find(|(n, _)| n.eq_ignore_ascii_case("signature"))
        .expect("a Signature header");
    let at = signature.1.find(":").unwrap() + 1;
    let flipped = if &signature.1[at..=at] == "A" {
        "B"
    } else {
        "A"
    };
    signature.1.replace_range(at..=at, flipped);
    // It also covers a cookie, an API key header and the body's type: the log keeps the
    // type, and of the other two only that they were covered.
    let input = forged
        .headers
        .iter_mut()
        .find(|(n, _)| n.eq_ignore_ascii_case("signature-input"))
        .expect("a Signature-Input header");
    assert!(input.1.contains("\"x-request-nonce\")"), "{}", input.1);
    input.1 = input.1.replace(
        "\"x-request-nonce\")",
        "\"x-request-nonce\" \"content-type\" \"cookie\" \"x-api-key\")",
    );
    forged
        .headers
        .push(("Cookie".into(), "session=s3cret-cookie-value".into()));
    forged
        .headers
        .push(("X-Api-Key".into(), "k3y-secret-value".into()));
    let refused = c.send(&forged).await.unwrap();
    assert_eq!(refused.code(), Some("signature_invalid"));
    let rid = refused.headers["x-request-id"]
        .to_str()
        .unwrap()
        .to_string();

    let log = logged(&s, &rid).await;
    let row = log.iter().find(|e| e.request_id == rid).unwrap();
    assert_eq!(
        (row.method.as_str(), row.path.as_str(), row.status),
        ("POST", "/api/v1/payments", 401)
    );
    assert_eq!(row.error_code.as_deref(), Some("signature_invalid"));
    assert_eq!(row.source, "127.0.0.1");
    let skew = row.clock_skew_ms.expect("the signature's created was read");
    assert!((-40_000..=-25_000).contains(&skew), "skew {skew} ms");
    let d = row.diagnosis.as_ref().expect("a diagnosis");
    assert_eq!(d.reason, "signature does not verify");
    let base = d.signature_base.as_deref().expect("the base verified");
    assert!(base.contains("\"@method\": POST"), "{base}");
    assert!(d.covered.iter().any(|c| c == "content-digest"), "{d:?}");
    assert!(
        !base.contains(s.creds().token.expose()),
        "the token never reaches the log"
    );
    for kept in [
        "\"cookie\": [redacted]\n",
        "\"x-api-key\": [redacted]\n",
        "\"content-type\": application/json\n",
        "\"@path\": /api/v1/payments\n",
        "\"content-digest\": sha-256=:",
        "\"@signature-params\": (\"@method\"",
    ] {
        assert!(base.contains(kept), "{kept:?} not in {base}");
    }
    assert!(
        !base.contains("s3cret") && !base.contains("k3y-secret"),
        "a covered cookie or key never reaches the log: {base}"
    );
    assert!(d.covered.iter().any(|c| c == "cookie"), "{d:?}");
    // The creates carry their merchant payment id, the reads their payment.
    let creates: Vec<_> = log
        .iter()
        .filter(|e| e.merchant_payment_id.as_deref() == Some("rl-1"))
        .map(|e| e.status)
        .collect();
    assert_eq!(creates, [200, 201]);
    assert!(log
        .iter()
        .all(|e| e.merchant_payment_id.as_deref() != Some("rl-2")));
    assert_eq!(log.len(), 5, "{log:#?}");
    assert!(log.iter().all(|e| e.latency_us > 0));
    // The verified ones, signed just now, have their skew too.
    assert!(
        log.iter()
            .filter(|e| e.status < 300)
            .all(|e| e.clock_skew_ms.is_some_and(|s| s.abs() < 5_000)),
        "{log:#?}"
    );

    let health = payments_cabinet::web::health::integration_health(&s.state.service, s.project())
        .await
        .unwrap();
    assert_eq!(health.requests, 5);
    assert_eq!((health.create_retries, health.retried_ids), (1, 1));
    assert_eq!(health.fast_polled_payments, 1);
    assert_eq!(health.client_errors, 1);
    assert_eq!(health.client_errors_by_code[0].code, "signature_invalid");
    s.stop().await;
}

#[tokio::test]
async fn the_log_is_off_when_the_settings_say_so() {
    let s = TestServer::start(|settings| settings.request_log = false).await;
    let c = &s.client();
    assert_eq!(
        c.create_payment(&body("off-1", "100"))
            .await
            .unwrap()
            .status,
        StatusCode::CREATED
    );
    assert!(s.state.request_log.is_none(), "no log, no queue, no writer");
    let page = s
        .state
        .service
        .requests()
        .request_log(&RequestLogQuery::new(s.project(), 10))
        .await
        .unwrap();
    assert!(page.requests.is_empty(), "{:?}", page.requests);
    s.stop().await;
}

/// The request of `client`'s `create` with its answer's request id and `message`.
async fn refused_create(
    c: &payments_client::MerchantClient,
    id: &str,
) -> (StatusCode, Option<String>, String, String) {
    let r = c.create_payment(&body(id, "100")).await.unwrap();
    let rid = r.headers["x-request-id"].to_str().unwrap().to_string();
    let message = r.json["message"].as_str().unwrap_or_default().to_string();
    (r.status, r.code().map(str::to_string), rid, message)
}

/// Every request a project's token made is logged, also one refused before the signature:
/// a token without the scope (`403 insufficient_scope`), a revoked or an expired one (`401
/// token_invalid`), an address off the allow-list (`403 ip_not_allowed`), each with the API's
/// message. A token whose hash matches no stored token is nobody's: never logged.
#[tokio::test]
async fn refusals_of_a_projects_token_are_logged_with_the_apis_message() {
    use payments_core::auth::Scope;
    use payments_core::service::Actor;
    use payments_directory::{DirectoryAccess, ProjectPatch, TokenRequest};

    let clock = payments_http::testing::ShiftedClock::new();
    let s = TestServer::start_with_clock(std::sync::Arc::new(clock.clone()), |_| {}).await;
    let c = &s.client();
    let directory = s.state.service.directory();
    let actor = Actor("t".into());
    let issue = |scopes: Vec<Scope>, lifetime| TokenRequest {
        scopes,
        name: None,
        lifetime,
    };
    let read_only = directory
        .issue_token_as(s.project(), issue(vec![Scope::PaymentsRead], None), &actor)
        .await
        .unwrap();
    let revoked = directory
        .issue_token_as(
            s.project(),
            issue(vec![Scope::PaymentsCreate], None),
            &actor,
        )
        .await
        .unwrap();
    directory
        .revoke_token(s.project(), revoked.record.id, &actor)
        .await
        .unwrap();
    let day = Duration::from_secs(86_400);
    let expiring = directory
        .issue_token_as(
            s.project(),
            issue(vec![Scope::PaymentsCreate], Some(day)),
            &actor,
        )
        .await
        .unwrap();

    let mut expected = Vec::new();
    let scope = refused_create(&c.with_token(read_only.token.expose()), "rf-1").await;
    expected.push((403, "insufficient_scope", scope));
    let gone = refused_create(&c.with_token(revoked.token.expose()), "rf-2").await;
    expected.push((401, "token_invalid", gone));
    // A token of the right form that matches nothing.
    let stranger = refused_create(
        &c.with_token("nl_test_AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA"),
        "rf-3",
    )
    .await;
    assert_eq!(stranger.1.as_deref(), Some("token_invalid"));
    s.patch_project(ProjectPatch {
        ip_allow_list: Some(vec!["10.0.0.0/8".into()]),
        ..Default::default()
    })
    .await;
    expected.push((403, "ip_not_allowed", refused_create(c, "rf-4").await));
    clock.advance(day);
    let expired = refused_create(&c.with_token(expiring.token.expose()), "rf-5").await;
    expected.push((401, "token_invalid", expired));

    let last = &expected.last().unwrap().2 .2;
    let log = logged(&s, last).await;
    for (status, code, (answered, answered_code, rid, message)) in &expected {
        assert_eq!(
            (answered.as_u16(), answered_code.as_deref()),
            (*status, Some(*code)),
            "{message}"
        );
        let row = log
            .iter()
            .find(|e| &e.request_id == rid)
            .unwrap_or_else(|| panic!("{status} {code} ({message}) is not in the log: {log:#?}"));
        assert_eq!(
            (row.status, row.error_code.as_deref()),
            (*status, Some(*code))
        );
        assert!(!message.is_empty());
        assert_eq!(row.message.as_deref(), Some(message.as_str()), "{code}");
    }
    let messages: Vec<_> = expected.iter().map(|e| e.2 .3.as_str()).collect();
    assert!(messages.contains(&"the token was revoked"), "{messages:?}");
    assert!(messages.contains(&"the token has expired"), "{messages:?}");
    assert!(
        log.iter().all(|e| e.request_id != stranger.2),
        "a stranger's token is nobody's: {log:#?}"
    );
    assert_eq!(log.len(), expected.len(), "{log:#?}");
    s.stop().await;
}
