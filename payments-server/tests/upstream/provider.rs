//! The HTTP requisite provider: every answer of the upstream and what the payment becomes.

use std::time::{Duration, Instant};

use payments_server::config::{RateSourceKind, Settings};
use payments_server::testing::TestServer;
use reqwest::StatusCode;

use crate::support::{body, Mode, Upstream};

async fn server(u: &Upstream, more: impl FnOnce(&mut Settings)) -> TestServer {
    let u = u.clone();
    TestServer::start(move |s| {
        u.configure(s);
        s.callbacks.dispatch = false;
        more(s);
    })
    .await
}

#[tokio::test]
async fn issued_requisites_are_the_payments_and_a_repeat_asks_nothing() {
    let u = Upstream::start(Mode::Issue).await;
    let s = server(&u, |_| {}).await;
    let c = s.client();
    let r = c.create_payment(&body("p-1", "3400")).await.unwrap();
    assert_eq!(r.status, StatusCode::CREATED, "{}", r.json);
    assert_eq!(r.json["status"], "processing");
    let id = r.json["id"].as_str().unwrap().to_string();
    assert_eq!(
        r.json["requisite"].as_str(),
        u.seen(|s| s.issued.get(&id).cloned()).as_deref()
    );
    assert_eq!(
        r.json["merchant_information"]["course"].to_string(),
        "100.00"
    );
    // Signed, with the payment id as the idempotency key.
    u.seen(|seen| {
        assert_eq!(seen.unsigned, 0);
        assert_eq!(seen.requests, vec![(id.clone(), id.clone())]);
    });
    let again = c.create_payment(&body("p-1", "3400")).await.unwrap();
    assert_eq!(again.status, StatusCode::OK);
    assert_eq!(again.json["requisite"], r.json["requisite"]);
    assert_eq!(
        u.seen(|s| s.requests.len()),
        1,
        "the service asks once per payment"
    );
    s.stop().await;
}

#[tokio::test]
async fn no_requisites_and_not_routable() {
    let u = Upstream::start(Mode::NoRequisites).await;
    let s = server(&u, |_| {}).await;
    let c = s.client();
    let r = c.create_payment(&body("none", "100")).await.unwrap();
    assert_eq!(r.status, StatusCode::CREATED, "{}", r.json);
    assert_eq!(r.json["status"], "error");
    assert_eq!(r.json["error_code"], "provider_no_requisites");

    u.set_mode(Mode::NotRoutable);
    let r = c.create_payment(&body("nr", "100")).await.unwrap();
    assert_eq!(r.status, StatusCode::UNPROCESSABLE_ENTITY, "{}", r.json);
    assert_eq!(r.code(), Some("payment_not_routable"));
    let id = r.json["payment_id"]
        .as_str()
        .expect("the payment was saved");
    let got = c.get_payment(id).await.unwrap();
    assert_eq!(got.json["status"], "error");
    s.stop().await;
}

/// Creates one payment and asserts it ended `error` with `provider_result_ambiguous`, its
/// comment saying that the upstream may have issued requisites.
async fn ambiguous(s: &TestServer, mpid: &str) -> String {
    ambiguous_saying(s, mpid, MAY_HAVE_ISSUED).await
}

/// The start of the comment of a payment whose upstream may have issued requisites.
const MAY_HAVE_ISSUED: &str =
    "the requisite provider may have issued requisites, its answer is unknown: ";
/// The start of the comment of a payment whose upstream was not reached.
const NOT_REACHED: &str = "the requisite provider was not reached, nothing was issued: ";

/// [`ambiguous`], the comment starting with `comment`.
async fn ambiguous_saying(s: &TestServer, mpid: &str, comment: &str) -> String {
    let r = s.client().create_payment(&body(mpid, "100")).await.unwrap();
    assert_eq!(r.status, StatusCode::CREATED, "{}", r.json);
    assert_eq!(r.json["status"], "error", "{}", r.json);
    assert_eq!(
        r.json["error_code"], "provider_result_ambiguous",
        "{}",
        r.json
    );
    let said = r.json["error_comment"].as_str().unwrap_or_default();
    assert!(
        said.starts_with(comment),
        "{said:?} starts otherwise than {comment:?}"
    );
    r.json["id"].as_str().unwrap().to_string()
}

#[tokio::test]
async fn a_5xx_malformed_or_oversized_answer_is_ambiguous() {
    let u = Upstream::start(Mode::Status(500)).await;
    let s = server(&u, |_| {}).await;
    ambiguous(&s, "e500").await;
    assert_eq!(u.seen(|s| s.requests.len()), 1, "a 500 is not retried");

    // 503 is retried with the same idempotency key, then ambiguous.
    u.set_mode(Mode::Status(503));
    let id = ambiguous(&s, "e503").await;
    u.seen(|seen| {
        let tries: Vec<_> = seen.requests.iter().filter(|(p, _)| *p == id).collect();
        assert_eq!(tries.len(), 3, "{tries:?}");
        assert!(tries.iter().all(|(p, key)| p == key));
    });

    u.set_mode(Mode::Malformed);
    ambiguous(&s, "bad-json").await;
    // 1 MiB: refused after 64 KiB, never a panic.
    u.set_mode(Mode::Huge(1024 * 1024));
    ambiguous(&s, "huge").await;
    // Just under the limit is read.
    u.set_mode(Mode::Huge(60 * 1024));
    let r = s
        .client()
        .create_payment(&body("big", "100"))
        .await
        .unwrap();
    assert_eq!(r.json["error_code"], "provider_no_requisites", "{}", r.json);
    s.stop().await;
}

#[tokio::test]
async fn an_unreachable_upstream_is_ambiguous() {
    let u = Upstream::start(Mode::Issue).await;
    let s = server(&u, |s| {
        // A port nobody listens on (the one just freed by a bound-and-dropped listener).
        let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let addr = l.local_addr().unwrap();
        drop(l);
        s.upstream.url = Some(format!("http://{addr}/requisites"));
    })
    .await;
    ambiguous_saying(&s, "down", NOT_REACHED).await;
    s.stop().await;
}

#[tokio::test]
async fn an_answer_after_the_budget_is_ambiguous_and_stays_so_when_it_arrives() {
    // The budget ends the wait, not the client's own timeout: the upstream answers 0.5 s after
    // a 1 s budget, and our HTTP client would wait 30 s for it. The budget's default is the
    // spec's 15 s (config's `upstream_settings_from_the_file_and_the_environment` checks it);
    // waiting that out here cost 16 s of every test run.
    let budget = Duration::from_secs(1);
    let u = Upstream::start(Mode::IssueAfter(budget + Duration::from_millis(500))).await;
    let s = server(&u, |s| {
        s.upstream.timeout = Duration::from_secs(30);
        s.upstream.provider_budget = budget;
    })
    .await;
    let answered = u.answered();
    let started = Instant::now();
    let id = ambiguous(&s, "slow").await;
    let took = started.elapsed();
    assert!(
        took >= budget && took < budget + Duration::from_millis(500),
        "{took:?}"
    );
    // The upstream issued a requisite and answers after all.
    tokio::time::timeout(Duration::from_secs(5), answered)
        .await
        .expect("the late answer is sent");
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert!(u.seen(|seen| seen.issued.contains_key(&id)));
    let c = s.client();
    let got = c.get_payment(&id).await.unwrap();
    assert_eq!(got.json["status"], "error");
    assert_eq!(got.json["error_code"], "provider_result_ambiguous");
    assert!(got.json["requisite"].is_null(), "{}", got.json);
    // A repeat of the create gets the same payment and asks nothing.
    let again = c.create_payment(&body("slow", "100")).await.unwrap();
    assert_eq!(again.status, StatusCode::OK);
    assert_eq!(again.json["id"], id.as_str());
    assert_eq!(u.seen(|s| s.requests.len()), 1);
    s.stop().await;
}

/// A request that got no answer within `upstream.timeout` is sent again to the same provider
/// with the same payment id while the budget lasts: the second ask issues the payment (before,
/// the first timeout made it ambiguous at once).
#[tokio::test]
async fn a_provider_that_times_out_once_is_asked_again_and_issues() {
    let u = Upstream::start(Mode::IssueSlowOnce(Duration::from_secs(2))).await;
    let s = server(&u, |s| {
        s.upstream.timeout = Duration::from_millis(400);
        s.upstream.provider_budget = Duration::from_secs(5);
    })
    .await;
    let created = s
        .client()
        .create_payment(&body("slow-once", "100"))
        .await
        .unwrap();
    assert_eq!(created.status, StatusCode::CREATED, "{}", created.json);
    assert_eq!(created.json["status"], "processing", "{}", created.json);
    let id = created.json["id"].as_str().unwrap().to_string();
    u.seen(|seen| {
        assert_eq!(seen.requests.len(), 2, "{:?}", seen.requests);
        assert!(
            seen.requests
                .iter()
                .all(|(pid, key)| pid == &id && key == &id),
            "the same payment id and idempotency key: {:?}",
            seen.requests
        );
        assert_eq!(created.json["requisite"], seen.issued[&id].as_str());
    });
    s.stop().await;
}

/// A request that timed out may have issued: when the upstream refuses the next attempt
/// (`429`, before accepting it), the payment is ambiguous, not "nothing was issued" (which
/// would send it to the next provider: a second requisite for one payment). The history
/// checker found it so: a slow provider turning busy mid-create.
#[tokio::test]
async fn a_refusal_after_a_timed_out_request_is_ambiguous() {
    let u = Upstream::start(Mode::IssueSlowOnceThen(Duration::from_secs(2), 429)).await;
    let s = server(&u, |s| {
        s.upstream.timeout = Duration::from_millis(400);
        s.upstream.provider_budget = Duration::from_secs(5);
    })
    .await;
    let id = ambiguous(&s, "slow-then-busy").await;
    u.seen(|seen| {
        assert_eq!(seen.requests.len(), 2, "{:?}", seen.requests);
        assert!(seen.issued.contains_key(&id), "the first request issued");
    });
    s.stop().await;
}

#[tokio::test]
async fn a_budget_from_the_settings_ends_the_wait() {
    let u = Upstream::start(Mode::IssueAfter(Duration::from_secs(3))).await;
    let s = server(&u, |s| {
        s.upstream.provider_budget = Duration::from_millis(500)
    })
    .await;
    let started = Instant::now();
    ambiguous(&s, "budget").await;
    assert!(started.elapsed() < Duration::from_secs(2));
    s.stop().await;
}

#[tokio::test]
async fn a_create_retried_after_a_client_timeout_issues_one_requisite() {
    let u = Upstream::start(Mode::IssueAfter(Duration::from_secs(2))).await;
    let s = server(&u, |_| {}).await;
    let impatient = s.client().with_http_client(
        reqwest::Client::builder()
            .timeout(Duration::from_millis(500))
            .build()
            .unwrap(),
    );
    let first = impatient.create_payment(&body("retry-1", "100")).await;
    assert!(
        first.is_err(),
        "the client gave up: {:?}",
        first.map(|r| r.status)
    );
    // The merchant retries the same create (a new signature, the same merchant_payment_id).
    let again = s
        .client()
        .create_payment(&body("retry-1", "100"))
        .await
        .unwrap();
    assert_eq!(again.status, StatusCode::OK, "{}", again.json);
    assert_eq!(again.json["status"], "processing", "{}", again.json);
    let id = again.json["id"].as_str().unwrap().to_string();
    u.seen(|seen| {
        assert_eq!(seen.requests.len(), 1, "{:?}", seen.requests);
        assert_eq!(seen.issued.len(), 1);
        assert_eq!(
            again.json["requisite"].as_str(),
            seen.issued.get(&id).map(String::as_str)
        );
    });
    s.stop().await;
}

#[tokio::test]
async fn over_https_the_upstream_certificate_is_checked_against_the_configured_ca() {
    let cert = rcgen::generate_simple_self_signed(vec!["localhost".to_string()]).unwrap();
    let (cert_pem, key_pem) = (cert.cert.pem(), cert.key_pair.serialize_pem());
    let u = Upstream::start_tls(Mode::Issue, &cert_pem, &key_pem).await;
    assert!(u.url.starts_with("https://localhost:"));
    let dir = tempfile::tempdir().unwrap();
    let ca = dir.path().join("upstream-ca.pem");
    std::fs::write(&ca, &cert_pem).unwrap();

    // The upstream's own CA configured (and only it trusted): requisites over TLS.
    let s = server(&u, |s| {
        s.upstream.ca_file = Some(ca.clone());
        s.upstream.ca_only = true;
    })
    .await;
    let r = s
        .client()
        .create_payment(&body("tls-1", "100"))
        .await
        .unwrap();
    assert_eq!(r.json["status"], "processing", "{}", r.json);
    s.stop().await;

    // Without it the certificate is refused: nothing was issued, the payment is ambiguous
    // (the fixed rates here: the rates endpoint is refused the same way).
    let s = server(&u, |s| s.upstream.rate_source = RateSourceKind::Fixed).await;
    ambiguous_saying(&s, "tls-2", NOT_REACHED).await;
    assert_eq!(u.seen(|s| s.requests.len()), 1);
    s.stop().await;
}

/// A payment left in `created` by a create that never recorded the upstream's answer (here:
/// written as the create's insert would be, and no more) is resolved by asking the upstream
/// again for the same payment id: by the merchant's repeat of the create once the provider
/// budget and 1 s have passed (the repeat answers the final payment at once), by the sweeper
/// 60 s after the create, and as `provider_result_ambiguous` only when the upstream cannot
/// say.
#[tokio::test]
async fn a_create_cut_off_before_its_answer_was_recorded_is_recovered_from_the_upstream() {
    use std::sync::Arc;

    use payments_core::payment::{Flow, PaymentMethod};
    use payments_core::testing::fixtures;
    use payments_core::Clock;
    use payments_server::testing::ShiftedClock;

    let u = Upstream::start(Mode::Issue).await;
    let clock = ShiftedClock::new();
    let s = {
        let u = u.clone();
        TestServer::start_with_clock(Arc::new(clock.clone()), move |s| {
            u.configure(s);
            s.callbacks.dispatch = false;
        })
        .await
    };
    // What a create leaves when its process dies during the provider call.
    let cut_off = |mpid: &str, n: u128| {
        let request = fixtures::request(mpid, "100", PaymentMethod::Sbp);
        fixtures::payment(
            payments_core::PaymentId::from_uuid(uuid_of(n)),
            s.project(),
            &request,
            Flow::RuntimeLive,
            clock.now(),
            Duration::from_secs(900),
        )
    };
    let store = s.state.service.store().clone();
    let read = |id: payments_core::PaymentId| {
        let store = store.clone();
        async move { store.payment(id).await.unwrap().unwrap() }
    };

    // 1. The merchant repeats the create 21 s later: the repeat asks the upstream and answers
    //    the payment with the requisite the upstream issued for it.
    let first = cut_off("cut-1", 1);
    store.insert_payment(&first).await.unwrap();
    clock.advance(Duration::from_secs(21));
    let started = Instant::now();
    let again = s
        .client()
        .create_payment(&body("cut-1", "100"))
        .await
        .unwrap();
    assert_eq!(again.status, StatusCode::OK, "{}", again.json);
    assert_eq!(again.json["status"], "processing", "{}", again.json);
    assert!(
        started.elapsed() < Duration::from_secs(5),
        "answered without waiting"
    );
    let issued = u.seen(|seen| seen.issued.get(&first.id.to_string()).cloned());
    assert_eq!(again.json["requisite"].as_str(), issued.as_deref());
    assert!(again.json["merchant_information"]["course"].is_number());

    // 2. Nobody repeats: the sweeper asks 60 s after the create.
    let second = cut_off("cut-2", 2);
    store.insert_payment(&second).await.unwrap();
    clock.advance(Duration::from_secs(61));
    let mut recovered = read(second.id).await;
    for _ in 0..100 {
        if recovered.status.as_str() != "created" {
            break;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
        recovered = read(second.id).await;
    }
    assert_eq!(recovered.status.as_str(), "processing");
    assert_eq!(
        recovered.requisites.map(|r| r.requisite),
        u.seen(|seen| seen.issued.get(&second.id.to_string()).cloned())
    );
    assert_eq!(
        s.metric("payments_stuck_creates_total{outcome=\"recovered\"} ")
            .await,
        1.0
    );

    // 3. The upstream cannot say (a 500): the payment stays `created` and is asked again
    //    later (deferred); still unable to say once the recovery window (1 h) has passed, it
    //    is provider_result_ambiguous, counted as such.
    u.set_mode(Mode::Status(500));
    let third = cut_off("cut-3", 3);
    store.insert_payment(&third).await.unwrap();
    clock.advance(Duration::from_secs(61));
    for _ in 0..200 {
        if s.metric("payments_stuck_creates_total{outcome=\"deferred\"} ")
            .await
            == 1.0
        {
            break;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let deferred = read(third.id).await;
    assert_eq!(deferred.status.as_str(), "created");
    assert!(
        deferred.updated_at > third.updated_at,
        "the ask is recorded"
    );
    clock.advance(Duration::from_secs(3600));
    let mut closed = read(third.id).await;
    for _ in 0..200 {
        if closed.status.as_str() != "created" {
            break;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
        closed = read(third.id).await;
    }
    assert_eq!(closed.status.as_str(), "error");
    assert_eq!(
        closed.failure.map(|f| f.code.as_str()),
        Some("provider_result_ambiguous")
    );
    assert_eq!(
        s.metric("payments_stuck_creates_total{outcome=\"ambiguous\"} ")
            .await,
        1.0
    );
    // Each payment was asked about once per attempt, with its id as the idempotency key.
    u.seen(|seen| {
        assert!(seen.requests.iter().all(|(pid, key)| pid == key
            && [first.id, second.id, third.id]
                .iter()
                .any(|id| id.to_string() == *pid)));
    });
    s.stop().await;
}

/// A time-ordered-looking payment id from a small number.
fn uuid_of(n: u128) -> uuid::Uuid {
    uuid::Uuid::from_u128(0x0192_f3a4_5b6c_7d8e_9f00_0000_0000_0000 | n)
}
