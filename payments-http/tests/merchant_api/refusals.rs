//! Refused requests take nothing: token and signature rejections, size, rate and address
//! limits, and `X-Forwarded-For` honoured only from trusted proxies.

use payments_directory::DirectoryAccess;
use std::sync::Arc;
use std::time::Duration;

use payments_client::SignSpec;
use payments_core::auth::keys::generate_signing_key;
use payments_core::auth::Scope;
use payments_core::project::RateLimit;
use payments_core::service::Actor;
use payments_directory::{ProjectPatch, TokenRequest};
use payments_http::system::OsRandom;
use payments_http::testing::{ShiftedClock, TestServer};
use reqwest::{Method, StatusCode};
use serde_json::json;

use crate::support::body;

#[tokio::test]
async fn token_and_signature_rejections_take_nothing() {
    let s = TestServer::sandbox().await;
    let c = &s.client();
    let b = serde_json::to_vec(&body("auth-1", "100")).unwrap();
    // Token of the other environment.
    let live = c.with_token("nl_live_AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA");
    let r = live.create_payment(&body("auth-1", "100")).await.unwrap();
    assert_eq!(
        (r.status, r.code()),
        (StatusCode::UNAUTHORIZED, Some("token_invalid"))
    );
    // Truncated token.
    let r = c
        .with_token(&s.creds().token.expose()[..20])
        .create_payment(&body("auth-1", "100"))
        .await
        .unwrap();
    assert_eq!(r.code(), Some("token_invalid"));
    // Missing scope.
    let actor = Actor("t".into());
    let read_only = s
        .state
        .service
        .directory()
        .issue_token(s.project(), vec![Scope::PaymentsRead], &actor)
        .await
        .unwrap();
    let r = c
        .with_token(read_only.token.expose())
        .create_payment(&body("auth-1", "100"))
        .await
        .unwrap();
    assert_eq!(
        (r.status, r.code()),
        (StatusCode::FORBIDDEN, Some("insufficient_scope"))
    );
    // Revoked token.
    let extra = s
        .state
        .service
        .directory()
        .issue_token(s.project(), vec![Scope::PaymentsCreate], &actor)
        .await
        .unwrap();
    assert_eq!(
        c.with_token(extra.token.expose())
            .create_payment(&body("auth-0", "100"))
            .await
            .unwrap()
            .status,
        StatusCode::CREATED
    );
    s.state
        .service
        .directory()
        .revoke_token(s.project(), extra.record.id, &actor)
        .await
        .unwrap();
    let r = c
        .with_token(extra.token.expose())
        .create_payment(&body("auth-1", "100"))
        .await
        .unwrap();
    assert_eq!(r.code(), Some("token_invalid"));
    // Wrong key.
    let stranger = c.with_key(generate_signing_key(&OsRandom));
    let r = stranger
        .create_payment(&body("auth-1", "100"))
        .await
        .unwrap();
    assert_eq!(
        (r.status, r.json["message"].as_str()),
        (StatusCode::UNAUTHORIZED, Some("unknown keyid"))
    );
    // Expired signature.
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_secs() as i64;
    let old = SignSpec {
        created: Some(now - 400),
        expires: Some(now - 200),
        ..Default::default()
    };
    let r = c
        .send(
            &c.prepare(Method::POST, "/api/v1/payments", &b, Some(&old))
                .unwrap(),
        )
        .await
        .unwrap();
    assert_eq!(r.code(), Some("signature_invalid"));
    assert!(
        r.json["message"].as_str().unwrap().contains("expired")
            || r.json["message"].as_str().unwrap().contains("too old"),
        "{}",
        r.json
    );
    // Created in the future.
    let future = SignSpec {
        created: Some(now + 120),
        expires: Some(now + 300),
        ..Default::default()
    };
    let r = c
        .send(
            &c.prepare(Method::POST, "/api/v1/payments", &b, Some(&future))
                .unwrap(),
        )
        .await
        .unwrap();
    assert_eq!(r.json["message"], "created in the future");
    // Missing covered component.
    let partial = SignSpec {
        components: Some(vec![
            "@method".into(),
            "@path".into(),
            "content-digest".into(),
            "x-request-id".into(),
        ]),
        ..Default::default()
    };
    let r = c
        .send(
            &c.prepare(Method::POST, "/api/v1/payments", &b, Some(&partial))
                .unwrap(),
        )
        .await
        .unwrap();
    assert_eq!(
        r.json["message"],
        "missing covered component \"x-request-nonce\""
    );
    assert!(
        r.json["signature_base"].is_string(),
        "sandbox returns the base: {}",
        r.json
    );
    // Unsigned create.
    let r = c
        .send(
            &c.prepare(Method::POST, "/api/v1/payments", &b, None)
                .unwrap(),
        )
        .await
        .unwrap();
    assert_eq!(r.code(), Some("signature_invalid"));
    // Nothing above took the merchant_payment_id.
    assert_eq!(
        c.create_payment(&body("auth-1", "100"))
            .await
            .unwrap()
            .status,
        StatusCode::CREATED
    );
    s.stop().await;
}

/// A token issued with a lifetime works until its expiry and from then on is refused as a
/// revoked token is (`401 token_invalid`), the second request too (whatever the server
/// keeps of the first lookup); a token without one keeps working.
#[tokio::test]
async fn an_expired_token_is_refused_like_a_revoked_one() {
    let clock = ShiftedClock::new();
    let s = TestServer::start_with_clock(Arc::new(clock.clone()), |_| {}).await;
    let c = &s.client();
    let actor = Actor("t".into());
    let request = |lifetime| TokenRequest {
        scopes: vec![Scope::PaymentsCreate, Scope::PaymentsRead],
        name: Some("shop backend".into()),
        lifetime,
    };
    let service = &s.state.service;
    let month = Duration::from_secs(30 * 86_400);
    let expiring = service
        .directory()
        .issue_token_as(s.project(), request(Some(month)), &actor)
        .await
        .unwrap();
    let lasting = service
        .directory()
        .issue_token_as(s.project(), request(None), &actor)
        .await
        .unwrap();
    let expiring = c.with_token(expiring.token.expose());
    let lasting_token = lasting.token;
    let r = expiring
        .create_payment(&body("exp-1", "100"))
        .await
        .unwrap();
    assert_eq!(r.status, StatusCode::CREATED, "{}", r.json);
    let id = r.json["id"].as_str().expect("an id").to_string();
    clock.advance(month - Duration::from_secs(1));
    let r = expiring.get_payment(&id).await.unwrap();
    assert_eq!(
        r.status,
        StatusCode::OK,
        "a second before expiry: {}",
        r.json
    );
    clock.advance(Duration::from_secs(1));
    for _ in 0..2 {
        let r = expiring
            .create_payment(&body("exp-2", "100"))
            .await
            .unwrap();
        assert_eq!(
            (r.status, r.code()),
            (StatusCode::UNAUTHORIZED, Some("token_invalid")),
            "{}",
            r.json
        );
        assert_eq!(r.json["message"], "the token has expired", "{}", r.json);
    }
    // The token without a lifetime still reads (an unsigned GET: the client signs with the
    // real clock, which is a month behind the server's now).
    let r = reqwest::Client::new()
        .get(format!("{}/api/v1/payments/{id}", c.base_url()))
        .bearer_auth(lasting_token.expose())
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), StatusCode::OK);
    s.stop().await;
}

#[tokio::test]
async fn size_rate_and_address_limits() {
    // The rate limit refills on the service clock: the test steps it instead of sleeping.
    let clock = ShiftedClock::new();
    let s = TestServer::start_with_clock(Arc::new(clock.clone()), |_| {}).await;
    let c = &s.client();
    // 17 KiB body -> 413 body_too_large; the id stays free.
    let mut big = body("lim-1", "100");
    big["callback_url"] = json!(format!("https://example.com/{}", "x".repeat(17 * 1024)));
    let r = c.create_payment(&big).await.unwrap();
    assert_eq!(
        (r.status, r.code()),
        (StatusCode::PAYLOAD_TOO_LARGE, Some("body_too_large"))
    );
    // IP allow-list: 127.0.0.1 is not in 10.0.0.0/8.
    s.patch_project(ProjectPatch {
        ip_allow_list: Some(vec!["10.0.0.0/8".into()]),
        ..Default::default()
    })
    .await;
    let r = c.create_payment(&body("lim-1", "100")).await.unwrap();
    assert_eq!(
        (r.status, r.code()),
        (StatusCode::FORBIDDEN, Some("ip_not_allowed"))
    );
    // X-Forwarded-For from an untrusted peer is ignored.
    let mut req = c
        .prepare(
            Method::POST,
            "/api/v1/payments",
            &serde_json::to_vec(&body("lim-1", "100")).unwrap(),
            Some(&SignSpec::default()),
        )
        .unwrap();
    req.headers
        .push(("X-Forwarded-For".into(), "10.1.2.3".into()));
    assert_eq!(c.send(&req).await.unwrap().code(), Some("ip_not_allowed"));
    s.patch_project(ProjectPatch {
        ip_allow_list: Some(vec!["127.0.0.1".into(), "::1".into()]),
        ..Default::default()
    })
    .await;
    // Rate limit: 1/s with a burst of 2 -> the third request at once is 429 with Retry-After.
    s.patch_project(ProjectPatch {
        rate_limit: Some(RateLimit {
            per_second: 1,
            burst: 2,
        }),
        ..Default::default()
    })
    .await;
    let mut statuses = Vec::new();
    let mut retry_after = None;
    for i in 0..3 {
        let r = c
            .create_payment(&body(&format!("rl-{i}"), "100"))
            .await
            .unwrap();
        if r.status == StatusCode::TOO_MANY_REQUESTS {
            assert_eq!(r.code(), Some("rate_limited"));
            retry_after = r
                .headers
                .get("retry-after")
                .map(|v| v.to_str().unwrap().to_string());
        }
        statuses.push(r.status);
    }
    assert_eq!(
        statuses,
        vec![
            StatusCode::CREATED,
            StatusCode::CREATED,
            StatusCode::TOO_MANY_REQUESTS
        ]
    );
    assert_eq!(retry_after.as_deref(), Some("1"));
    // The limited id is free once the bucket refills; so is the one refused for size.
    clock.advance(Duration::from_millis(1100));
    assert_eq!(
        c.create_payment(&body("rl-2", "100")).await.unwrap().status,
        StatusCode::CREATED
    );
    clock.advance(Duration::from_millis(1100));
    assert_eq!(
        c.create_payment(&body("lim-1", "100"))
            .await
            .unwrap()
            .status,
        StatusCode::CREATED
    );
    s.stop().await;
}

#[tokio::test]
async fn forwarded_for_is_used_only_from_trusted_proxies() {
    let s = TestServer::start(|s| {
        s.auth.trusted_proxies = vec!["127.0.0.0/8".parse().expect("a network")];
    })
    .await;
    s.patch_project(ProjectPatch {
        ip_allow_list: Some(vec!["203.0.113.7".into()]),
        ..Default::default()
    })
    .await;
    let c = &s.client();
    let mut req = c
        .prepare(
            Method::POST,
            "/api/v1/payments",
            &serde_json::to_vec(&body("xff-1", "100")).unwrap(),
            Some(&SignSpec::default()),
        )
        .unwrap();
    req.headers
        .push(("X-Forwarded-For".into(), "198.51.100.1, 203.0.113.7".into()));
    let r = c.send(&req).await.unwrap();
    assert_eq!(r.status, StatusCode::CREATED, "{}", r.json);
    let mut req = c
        .prepare(
            Method::POST,
            "/api/v1/payments",
            &serde_json::to_vec(&body("xff-2", "100")).unwrap(),
            Some(&SignSpec::default()),
        )
        .unwrap();
    req.headers
        .push(("X-Forwarded-For".into(), "203.0.113.7, 198.51.100.1".into()));
    assert_eq!(c.send(&req).await.unwrap().code(), Some("ip_not_allowed"));
    s.stop().await;
}

/// Concurrent signed creates are verified in batches; a batch that holds one forged signature
/// (well-formed and by the project's key, but over another request) must refuse that request
/// alone: the others of its batch are created. Rounds of concurrent requests are sent until a
/// batch held the forged one (the verifier counts the batches whose equation failed), and every
/// round must answer exactly: the forged request `401 signature_invalid`, all others `201`.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_batch_with_one_forged_signature_refuses_only_that_request() {
    const PER_ROUND: usize = 24;
    let s = TestServer::sandbox().await;
    s.patch_project(ProjectPatch {
        rate_limit: Some(RateLimit {
            per_second: 10_000,
            burst: 10_000,
        }),
        ..Default::default()
    })
    .await;
    let c = s.client();
    let before = s.state.service.gate().signature_batches();
    let mut rounds = 0;
    while s.state.service.gate().signature_batches().fallbacks == before.fallbacks {
        rounds += 1;
        assert!(
            rounds <= 40,
            "no batch held the forged signature in 40 rounds"
        );
        let forged = rounds % PER_ROUND;
        let mut reqs: Vec<_> = (0..=PER_ROUND)
            .map(|i| {
                let b = serde_json::to_vec(&body(&format!("batch-{rounds}-{i}"), "100")).unwrap();
                c.prepare(
                    Method::POST,
                    "/api/v1/payments",
                    &b,
                    Some(&SignSpec::default()),
                )
                .unwrap()
            })
            .collect();
        // The extra request's signature, valid for its own base, goes on request `forged`.
        let extra = reqs.pop().unwrap();
        let signature = |r: &payments_client::PreparedRequest| {
            r.headers
                .iter()
                .find(|(n, _)| n.eq_ignore_ascii_case("signature"))
                .map(|(_, v)| v.clone())
                .expect("a signed request has a Signature header")
        };
        let stolen = signature(&extra);
        assert_ne!(stolen, signature(&reqs[forged]));
        for (n, v) in &mut reqs[forged].headers {
            if n.eq_ignore_ascii_case("signature") {
                *v = stolen.clone();
            }
        }
        let answers = futures_util::future::join_all(reqs.iter().map(|r| c.send(r))).await;
        for (i, r) in answers.into_iter().enumerate() {
            let r = r.unwrap();
            if i == forged {
                assert_eq!(
                    (r.status, r.code()),
                    (StatusCode::UNAUTHORIZED, Some("signature_invalid")),
                    "round {rounds}: the forged request {i}: {}",
                    r.json
                );
            } else {
                assert_eq!(
                    r.status,
                    StatusCode::CREATED,
                    "round {rounds}: request {i} was not created: {}",
                    r.json
                );
            }
        }
    }
    let after = s.state.service.gate().signature_batches();
    assert!(
        after.signatures - before.signatures > after.batches - before.batches,
        "some batch held more than one signature: {after:?}"
    );
}
