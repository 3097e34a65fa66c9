//! The events API over real sockets: the list and one event (frozen body, destination,
//! attempts in the merchant's terms), paging, scopes, the merchant's resend of one event and
//! recovery of every undelivered event since a time (new event ids, one attempt, audited with
//! the token), the long poll, "send callback" for a closed test payment, and `listen`
//! forwarding that callback to a local receiver that verifies it.

use payments_directory::DirectoryAccess;
use std::collections::HashSet;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use axum::body::Bytes;
use axum::http::{HeaderMap, StatusCode as AxumStatus};
use payments_client::MerchantClient;
use payments_core::auth::Scope;
use payments_core::callback::{CallbackSecret, CallbackVerifier, RetrySchedule};
use payments_core::project::RateLimit;
use payments_core::service::Actor;
use payments_core::Timestamp;
use payments_directory::ProjectPatch;
use payments_examples::listen::{ListenConfig, Listener};
use payments_examples::receiver::CALLBACK_PATH;
use payments_examples::{receiver_router, Receiver, ReceiverDb};
use payments_http::system::SystemClock;
use payments_http::testing::TestServer;
use reqwest::StatusCode;
use serde_json::{json, Value};
use tokio::sync::mpsc;

use crate::support::{body, confirm};

/// A receiver on 127.0.0.1:0 that answers `500` until `ok` is set, then `200`; it passes on
/// every request's headers and body.
struct Switch {
    url: String,
    ok: Arc<AtomicBool>,
    got: mpsc::UnboundedReceiver<(HeaderMap, Bytes)>,
}

async fn switch_receiver() -> Switch {
    let ok = Arc::new(AtomicBool::new(false));
    let (tx, got) = mpsc::unbounded_channel();
    let answer = ok.clone();
    let app = axum::Router::new().route(
        "/cb",
        axum::routing::post(move |headers: HeaderMap, body: Bytes| {
            let answer = answer.clone();
            let tx = tx.clone();
            async move {
                let _ = tx.send((headers, body));
                if answer.load(Ordering::SeqCst) {
                    (AxumStatus::OK, "thanks")
                } else {
                    (AxumStatus::INTERNAL_SERVER_ERROR, "down for maintenance")
                }
            }
        }),
    );
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
        .await
        .expect("bind 127.0.0.1:0");
    let addr = listener.local_addr().expect("bound");
    tokio::spawn(async move { axum::serve(listener, app).await });
    Switch {
        url: format!("http://{addr}/cb"),
        ok,
        got,
    }
}

/// Lists `query` until `done` holds for the page (at most 15 s).
async fn until(c: &MerchantClient, query: &str, done: impl Fn(&Value) -> bool) -> Value {
    let started = Instant::now();
    loop {
        let r = c.list_events(query).await.expect("a page");
        assert_eq!(r.status, StatusCode::OK, "{}", r.json);
        if done(&r.json) {
            return r.json;
        }
        assert!(
            started.elapsed() < Duration::from_secs(15),
            "{query}: still {}",
            r.json
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

fn len(page: &Value) -> usize {
    page["data"].as_array().map_or(0, Vec::len)
}

fn str_of(v: &Value) -> String {
    v.as_str()
        .unwrap_or_else(|| panic!("not a string: {v}"))
        .to_string()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn events_are_listed_read_resent_and_recovered_by_the_merchant() {
    let mut rx = switch_receiver().await;
    let s = TestServer::start(|s| {
        s.service.callback_policy.allow_local = true;
        s.service.retry = RetrySchedule::single();
    })
    .await;
    let c = s.client();
    let t0 = c.list_events("").await.expect("a page");
    assert_eq!(
        (t0.status, len(&t0.json)),
        (StatusCode::OK, 0),
        "{}",
        t0.json
    );

    // Three live payments closed by the operator; each callback fails once (500) and stops.
    let mut payments = Vec::new();
    for i in 0..3 {
        let mut b = body(&format!("ev-{i}"), "100");
        b["callback_url"] = json!(rx.url);
        let r = c.create_payment(&b).await.expect("a create");
        assert_eq!(r.status, StatusCode::CREATED, "{}", r.json);
        let id = str_of(&r.json["id"]);
        confirm(&s, &id).await;
        payments.push(id);
    }
    let failed = until(&c, "delivery_state=failed", |p| len(p) == 3).await;
    let newest = &failed["data"][0];
    assert_eq!(newest["payment_id"], json!(payments[2]), "newest first");
    assert_eq!(newest["type"], "automatic");
    assert_eq!(newest["status"], "completed");
    assert_eq!(newest["destination"], json!(rx.url));
    assert_eq!(newest["delivery_state"], "failed");
    assert_eq!(
        (
            newest["attempts_made"].clone(),
            newest["max_attempts"].clone()
        ),
        (json!(1), json!(1))
    );
    let attempt = &newest["attempts"][0];
    assert_eq!(attempt["http_status"], 500);
    assert_eq!(attempt["success"], false);
    assert_eq!(attempt["result"], "HTTP 500");
    assert_eq!(attempt["response_excerpt"], "down for maintenance");
    // The frozen body is the callback as it was sent, byte for byte.
    let mut sent = Vec::new();
    while let Ok((_, b)) = rx.got.try_recv() {
        sent.push(b);
    }
    assert_eq!(sent.len(), 3, "one attempt each");
    let one = c.get_event(&str_of(&newest["id"])).await.expect("an event");
    assert_eq!(one.status, StatusCode::OK);
    assert_eq!(&one.json, newest, "GET of one event is the list's item");
    let raw: Value = serde_json::from_slice(&one.body).expect("JSON");
    let embedded = serde_json::to_vec(&raw["body"]).expect("JSON");
    assert!(
        sent.iter()
            .any(|b| serde_json::from_slice::<Value>(b).expect("JSON") == raw["body"]),
        "the body is one that was sent: {}",
        String::from_utf8_lossy(&embedded)
    );
    let text = String::from_utf8(one.body.clone()).expect("UTF-8");
    assert!(
        sent.iter()
            .any(|b| text.contains(std::str::from_utf8(b).expect("UTF-8"))),
        "the sent bytes appear verbatim in the event: {text}"
    );
    assert_eq!(newest["body"]["event_id"], newest["id"]);

    // Pages of 2 neither skip nor repeat.
    let first = c.list_events("limit=2").await.expect("a page");
    assert_eq!(
        (len(&first.json), first.json["has_more"].clone()),
        (2, json!(true))
    );
    let next = c
        .list_events(&format!(
            "limit=2&cursor={}",
            str_of(&first.json["next_cursor"])
        ))
        .await
        .expect("a page");
    assert_eq!(
        (len(&next.json), next.json["has_more"].clone()),
        (1, json!(false))
    );
    let ids: HashSet<String> = first.json["data"]
        .as_array()
        .into_iter()
        .chain(next.json["data"].as_array())
        .flatten()
        .map(|e| str_of(&e["id"]))
        .collect();
    assert_eq!(ids.len(), 3);
    let only = c
        .list_events(&format!("payment_id={}", payments[0]))
        .await
        .expect("a page");
    assert_eq!(len(&only.json), 1);
    assert_eq!(only.json["data"][0]["payment_id"], json!(payments[0]));
    let none = c
        .list_events("delivery_state=delivered")
        .await
        .expect("a page");
    assert_eq!(len(&none.json), 0);

    // Refusals.
    let unknown = c
        .get_event("0192f3a4-5b6c-7d8e-9f00-112233445566")
        .await
        .expect("an answer");
    assert_eq!(
        (unknown.status, unknown.code()),
        (StatusCode::NOT_FOUND, Some("not_found"))
    );
    let junk = c
        .list_events("delivery_state=lost")
        .await
        .expect("an answer");
    assert_eq!(
        (junk.status, junk.code()),
        (StatusCode::BAD_REQUEST, Some("bad_request"))
    );
    let actor = Actor("t".into());
    for (scopes, read, resend) in [
        (
            vec![Scope::PaymentsRead],
            StatusCode::FORBIDDEN,
            StatusCode::FORBIDDEN,
        ),
        (
            vec![Scope::EventsRead],
            StatusCode::OK,
            StatusCode::FORBIDDEN,
        ),
    ] {
        let t = s
            .state
            .service
            .directory()
            .issue_token(s.project(), scopes, &actor)
            .await
            .expect("a token");
        let limited = c.with_token(t.token.expose());
        let r = limited.list_events("").await.expect("an answer");
        assert_eq!(r.status, read, "{}", r.json);
        let r = limited
            .resend_event(&str_of(&newest["id"]))
            .await
            .expect("an answer");
        assert_eq!(r.status, resend, "{}", r.json);
        assert_eq!(r.code(), Some("insufficient_scope"));
    }
    // A resend is always signed (like a create), whatever the project's policy; a read only
    // when the policy says so.
    let unsigned = c
        .prepare(
            reqwest::Method::POST,
            &format!("/api/v1/events/{}/resend", str_of(&newest["id"])),
            b"",
            None,
        )
        .expect("a request");
    let r = c.send(&unsigned).await.expect("an answer");
    assert_eq!(r.code(), Some("signature_invalid"), "{}", r.json);
    let unsigned = c
        .prepare(reqwest::Method::GET, "/api/v1/events?limit=1", b"", None)
        .expect("a request");
    assert_eq!(
        c.send(&unsigned).await.expect("an answer").status,
        StatusCode::OK
    );
    // An open payment cannot be resent.
    let open = c
        .create_payment(&body("ev-open", "100"))
        .await
        .expect("a create");
    let r = c
        .resend_payment_callback(&str_of(&open.json["id"]))
        .await
        .expect("an answer");
    assert_eq!(
        (r.status, r.code()),
        (StatusCode::CONFLICT, Some("invalid_transition")),
        "{}",
        r.json
    );

    // The receiver is back. Resending the oldest event: a new event, one attempt, delivered.
    rx.ok.store(true, Ordering::SeqCst);
    let oldest = &failed["data"][2];
    let r = c
        .resend_event(&str_of(&oldest["id"]))
        .await
        .expect("an answer");
    assert_eq!(r.status, StatusCode::ACCEPTED, "{}", r.json);
    assert_ne!(r.json["id"], oldest["id"], "a new event id");
    assert_eq!(r.json["type"], "manual_resend");
    assert_eq!(r.json["max_attempts"], 1);
    assert_eq!(r.json["payment_id"], oldest["payment_id"]);
    let resent_id = str_of(&r.json["id"]);
    let (headers, got) = tokio::time::timeout(Duration::from_secs(10), rx.got.recv())
        .await
        .expect("the resend arrives")
        .expect("a request");
    let secret = CallbackSecret::parse(s.creds().callback_secret.expose()).expect("a secret");
    let header = |n: &str| headers.get(n).and_then(|v| v.to_str().ok()).unwrap_or("");
    CallbackVerifier::new(vec![secret])
        .verify(
            header("x-callback-timestamp"),
            header("x-callback-signature"),
            &got,
            crate::support::now(),
        )
        .expect("signed with the project's secret");
    assert_eq!(header("x-callback-event-id"), resent_id);
    until(
        &c,
        &format!("payment_id={}&delivery_state=delivered", payments[0]),
        |p| len(p) == 1 && p["data"][0]["id"] == json!(resent_id),
    )
    .await;

    // Recovery of everything undelivered since before the first payment: the two payments
    // whose failures nobody answered, once; a second call finds nothing.
    let since = str_of(&oldest["created_at"]);
    let r = c.recover_events(&since, None).await.expect("an answer");
    assert_eq!(r.status, StatusCode::OK, "{}", r.json);
    let resent: HashSet<String> = r.json["resent"]
        .as_array()
        .expect("resent")
        .iter()
        .map(|e| str_of(&e["payment_id"]))
        .collect();
    assert_eq!(
        resent,
        HashSet::from([payments[1].clone(), payments[2].clone()])
    );
    assert_eq!(r.json["has_more"], false);
    let again = c.recover_events(&since, None).await.expect("an answer");
    assert_eq!(again.json["resent"], json!([]), "{}", again.json);
    let bad = c
        .recover_events("yesterday", None)
        .await
        .expect("an answer");
    assert_eq!(
        (bad.status, bad.code()),
        (StatusCode::BAD_REQUEST, Some("bad_request"))
    );
    until(&c, "delivery_state=delivered", |p| len(p) == 3).await;

    // Every resend is audited with the token that asked.
    let audit = s
        .state
        .service
        .store()
        .find_audit_records(100)
        .await
        .expect("the audit log");
    let token_actor = format!("api-token:{}", &s.creds().token.expose()[..14]);
    let resends = audit
        .iter()
        .filter(|a| a.action == "payment.resend_callback" && a.actor == token_actor)
        .count();
    assert_eq!(resends, 3, "{audit:?}");
    assert!(audit
        .iter()
        .any(|a| a.action == "callbacks.resend_failed" && a.actor == token_actor));

    // The long poll: an empty page is held until an event arrives...
    let now = crate::support::now_rfc3339();
    let poll = {
        let c = c.clone();
        let q = format!("created_from={}&wait=10", now.replace('+', "%2B"));
        tokio::spawn(async move {
            let started = Instant::now();
            let r = c.list_events(&q).await.expect("a page");
            (started.elapsed(), r)
        })
    };
    tokio::time::sleep(Duration::from_millis(700)).await;
    let r = c
        .resend_payment_callback(&payments[1])
        .await
        .expect("an answer");
    assert_eq!(r.status, StatusCode::ACCEPTED, "{}", r.json);
    let (took, page) = poll.await.expect("the poll");
    assert_eq!(len(&page.json), 1, "{}", page.json);
    assert_eq!(page.json["data"][0]["id"], r.json["id"]);
    assert!(
        took >= Duration::from_millis(600) && took < Duration::from_secs(5),
        "{took:?}"
    );
    // ... and answered empty when none does.
    let started = Instant::now();
    let q = format!(
        "created_from={}&wait=1",
        crate::support::now_rfc3339().replace('+', "%2B")
    );
    let empty = c.list_events(&q).await.expect("a page");
    assert_eq!(len(&empty.json), 0);
    assert!(started.elapsed() >= Duration::from_millis(900));
    s.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn listen_forwards_a_test_payments_callback_to_a_local_receiver_that_verifies_it() {
    // The sandbox project in test mode, its callback URL a local port nobody listens on: the
    // service's own attempt fails, and `listen` brings the event to the laptop anyway.
    let closed = tokio::net::TcpListener::bind("127.0.0.1:0")
        .await
        .expect("bind");
    let dead = format!("http://{}/cb", closed.local_addr().expect("bound"));
    drop(closed);
    let s = TestServer::start(|s| s.service.callback_policy.allow_local = true).await;
    s.patch_project(ProjectPatch {
        test_mode: Some(true),
        callback_url: Some(Some(dead)),
        ..Default::default()
    })
    .await;
    let c = s.client();

    // The developer's receiver (the bundled example), verifying with a secret of their own.
    let local = CallbackSecret::parse("whsec_local-development-secret-0123456789").expect("ok");
    let db = ReceiverDb::in_memory().expect("db");
    let receiver = Receiver::new(
        CallbackVerifier::new(vec![local.clone()]),
        db.clone(),
        c.clone(),
        Arc::new(SystemClock),
    );
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
        .await
        .expect("bind");
    let addr: SocketAddr = listener.local_addr().expect("addr");
    tokio::spawn(async move { axum::serve(listener, receiver_router(Arc::new(receiver))).await });

    let mut listen = Listener::new(
        c.clone(),
        ListenConfig {
            forward_to: format!("http://{addr}{CALLBACK_PATH}"),
            secret: local,
            since: crate::support::now(),
            forward_timeout: Duration::from_secs(10),
        },
    )
    .expect("a listener");

    // A test payment, paid with the test helper: no automatic callback, so nothing to forward.
    let r = c
        .create_payment(&body("lap-1", "100"))
        .await
        .expect("a create");
    assert_eq!(r.status, StatusCode::CREATED, "{}", r.json);
    assert_eq!(r.json["is_test"], true);
    let id = str_of(&r.json["id"]);
    let done = c
        .post(&format!("/api/v1/test/payments/{id}/complete"), b"")
        .await
        .expect("complete");
    assert_eq!(done.status, StatusCode::OK, "{}", done.json);
    assert!(listen
        .poll(Duration::ZERO)
        .await
        .expect("a round")
        .is_empty());

    // "Send callback": a real signed event with is_test true; listen forwards it once.
    let sent = c.resend_payment_callback(&id).await.expect("an answer");
    assert_eq!(sent.status, StatusCode::ACCEPTED, "{}", sent.json);
    assert_eq!(sent.json["body"]["is_test"], true);
    let forwarded = listen.poll(Duration::from_secs(5)).await.expect("a round");
    assert_eq!(forwarded.len(), 1, "{forwarded:?}");
    assert_eq!(forwarded[0].event_id, str_of(&sent.json["id"]));
    assert_eq!(forwarded[0].status, Some(200), "{}", forwarded[0].line);
    assert!(
        forwarded[0].line.contains("manual_resend"),
        "{}",
        forwarded[0].line
    );
    let order = db
        .order(&id)
        .expect("db")
        .expect("the receiver applied the callback");
    assert_eq!(order.status, "completed");
    assert!(db.is_processed(&forwarded[0].event_id).expect("db"));
    // Not forwarded twice.
    assert!(listen
        .poll(Duration::ZERO)
        .await
        .expect("a round")
        .is_empty());

    // A listener whose secret the receiver does not know is refused by it: the receiver does
    // verify what it is sent.
    let other =
        CallbackSecret::parse("whsec_another-secret-the-receiver-does-not-know").expect("ok");
    let mut wrong = Listener::new(
        c.clone(),
        ListenConfig {
            forward_to: format!("http://{addr}{CALLBACK_PATH}"),
            secret: other,
            since: Timestamp::from_unix_millis(0),
            forward_timeout: Duration::from_secs(10),
        },
    )
    .expect("a listener");
    let refused = wrong.poll(Duration::ZERO).await.expect("a round");
    assert_eq!(refused.len(), 1);
    assert_eq!(refused[0].status, Some(401), "{}", refused[0].line);
    s.stop().await;
}

/// A server that does not dispatch, its client, and a completed payment of its project
/// (whose callback event is queued, undelivered).
async fn completed_without_dispatch(order: &str) -> (TestServer, MerchantClient, String) {
    let s = TestServer::start(|s| s.dispatch = false).await;
    s.patch_project(ProjectPatch {
        callback_url: Some(Some("https://shop.example.com/callbacks".into())),
        ..Default::default()
    })
    .await;
    let c = s.client();
    let r = c
        .create_payment(&body(order, "100"))
        .await
        .expect("a create");
    let id = str_of(&r.json["id"]);
    confirm(&s, &id).await;
    (s, c, id)
}

/// A project's long polls beyond four are answered at once: a client that opens many costs no
/// more than polling. The four that wait all see the event that ends their wait.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn at_most_four_long_polls_of_a_project_wait_at_once() {
    let (s, c, id) = completed_without_dispatch("lp-1").await;
    let since = crate::support::now_rfc3339().replace('+', "%2B");
    let q = format!("created_from={since}&wait=10");
    let mut waiting = Vec::new();
    for _ in 0..4 {
        let (c, q) = (c.clone(), q.clone());
        waiting.push(tokio::spawn(async move {
            c.list_events(&q).await.expect("a page")
        }));
    }
    let started = Instant::now();
    while s.state.long_polls.waiting(s.project()) < 4 {
        assert!(started.elapsed() < Duration::from_secs(10), "four wait");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let fifth = Instant::now();
    let r = c.list_events(&q).await.expect("a page");
    assert_eq!((r.status, len(&r.json)), (StatusCode::OK, 0), "{}", r.json);
    assert!(
        fifth.elapsed() < Duration::from_secs(2),
        "the fifth is answered at once"
    );
    let sent = c.resend_payment_callback(&id).await.expect("an answer");
    assert_eq!(sent.status, StatusCode::ACCEPTED, "{}", sent.json);
    for w in waiting {
        let page = w.await.expect("a poll");
        assert_eq!(page.json["data"][0]["id"], sent.json["id"], "{}", page.json);
    }
    assert_eq!(
        s.state.long_polls.waiting(s.project()),
        0,
        "every place given back"
    );
    s.stop().await;
}

/// A waiting long poll reads the store again only when its project has news: quiet, it reads
/// once in its whole wait; an event committed for the project wakes it at once (not at a
/// poll's turn), and it reads once more.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_long_poll_reads_the_store_again_only_when_an_event_wakes_it() {
    let (s, c, id) = completed_without_dispatch("lp-quiet").await;
    let since = crate::support::now_rfc3339().replace('+', "%2B");
    let quiet = c
        .list_events(&format!("created_from={since}&wait=2"))
        .await
        .expect("a page");
    assert_eq!(len(&quiet.json), 0, "{}", quiet.json);
    assert_eq!(s.state.long_polls.rereads(), 0, "a quiet wait reads once");

    let poll = {
        let (c, q) = (c.clone(), format!("created_from={since}&wait=30"));
        tokio::spawn(async move { c.list_events(&q).await.expect("a page") })
    };
    let started = Instant::now();
    while s.state.long_polls.waiting(s.project()) < 1 {
        assert!(
            started.elapsed() < Duration::from_secs(10),
            "the poll waits"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let woken = Instant::now();
    let sent = c.resend_payment_callback(&id).await.expect("an answer");
    assert_eq!(sent.status, StatusCode::ACCEPTED, "{}", sent.json);
    let page = poll.await.expect("the poll");
    assert_eq!(page.json["data"][0]["id"], sent.json["id"], "{}", page.json);
    assert!(
        woken.elapsed() < Duration::from_secs(4),
        "woken by the event, not by the 5 s safety net: {:?}",
        woken.elapsed()
    );
    assert_eq!(s.state.long_polls.rereads(), 1, "one read after the wake");
    s.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn resends_beyond_the_projects_budget_are_refused_and_recovery_says_what_it_skipped() {
    let rx = switch_receiver().await;
    // A budget of 3 resends at once, then 1 a second (the default is 1,000, then 5 a second).
    let s = TestServer::start(|s| {
        s.service.callback_policy.allow_local = true;
        s.service.retry = RetrySchedule::single();
        s.service.resend_budget = RateLimit {
            burst: 3,
            per_second: 1,
        };
    })
    .await;
    let c = s.client();
    // Five live payments whose one callback fails (500).
    let mut payments = Vec::new();
    for i in 0..5 {
        let mut b = body(&format!("budget-{i}"), "100");
        b["callback_url"] = json!(rx.url);
        let r = c.create_payment(&b).await.expect("a create");
        assert_eq!(r.status, StatusCode::CREATED, "{}", r.json);
        let id = str_of(&r.json["id"]);
        confirm(&s, &id).await;
        payments.push(id);
    }
    let failed = until(&c, "delivery_state=failed", |p| len(p) == 5).await;
    let oldest = &failed["data"][4];

    // The recovery resends what the budget allows and names the rest, with the reason; a
    // single resend right after it (the budget refills one a second) is refused: 429
    // rate_limited with Retry-After.
    let r = c
        .recover_events(&str_of(&oldest["created_at"]), None)
        .await
        .expect("an answer");
    let refused = c
        .resend_payment_callback(&payments[0])
        .await
        .expect("an answer");
    assert_eq!(r.status, StatusCode::OK, "{}", r.json);
    assert_eq!(
        r.json["resent"].as_array().map(Vec::len),
        Some(3),
        "{}",
        r.json
    );
    let skipped = r.json["skipped"].as_array().expect("skipped");
    assert_eq!(skipped.len(), 2, "{}", r.json);
    for s in skipped {
        let reason = str_of(&s["reason"]);
        assert!(
            reason.starts_with("rate_limited: the project's callback resends are used up (3 at once, then 1 a second); retry after "),
            "{reason}"
        );
        assert_eq!(s["failed"].as_array().map(Vec::len), Some(1));
    }
    let skipped_ids: HashSet<String> = skipped.iter().map(|s| str_of(&s["payment_id"])).collect();
    let resent_ids: HashSet<String> = r.json["resent"]
        .as_array()
        .expect("resent")
        .iter()
        .map(|e| str_of(&e["payment_id"]))
        .collect();
    assert!(skipped_ids.is_disjoint(&resent_ids));
    assert_eq!(skipped_ids.len() + resent_ids.len(), 5);

    assert_eq!(
        refused.status,
        StatusCode::TOO_MANY_REQUESTS,
        "{}",
        refused.json
    );
    assert_eq!(refused.code(), Some("rate_limited"));
    let retry_after: u64 = refused
        .headers
        .get("retry-after")
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.parse().ok())
        .expect("a Retry-After in seconds");
    assert!((1..=2).contains(&retry_after), "{retry_after}");
    s.stop().await;
}

/// `recover` twice over the same window: a resend that failed is a failed event of the window
/// that nobody answered, so the second call resends that payment again; once a resend is
/// delivered, a further call resends nothing.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_second_recover_resends_what_still_fails_and_nothing_delivered() {
    let rx = switch_receiver().await;
    let s = TestServer::start(|s| {
        s.service.callback_policy.allow_local = true;
        s.service.retry = RetrySchedule::single();
    })
    .await;
    let c = s.client();
    let mut b = body("rec-1", "100");
    b["callback_url"] = json!(rx.url);
    let r = c.create_payment(&b).await.expect("a create");
    assert_eq!(r.status, StatusCode::CREATED, "{}", r.json);
    let id = str_of(&r.json["id"]);
    confirm(&s, &id).await;
    let failed = until(&c, "delivery_state=failed", |p| len(p) == 1).await;
    let since = str_of(&failed["data"][0]["created_at"]);
    let resent = |r: &Value| -> Vec<String> {
        r["resent"]
            .as_array()
            .expect("resent")
            .iter()
            .map(|e| str_of(&e["payment_id"]))
            .collect()
    };

    // The receiver still fails: the resend fails too, and the next call resends it again.
    let first = c.recover_events(&since, None).await.expect("an answer");
    assert_eq!(resent(&first.json), vec![id.clone()], "{}", first.json);
    until(&c, "delivery_state=failed", |p| len(p) == 2).await;
    let second = c.recover_events(&since, None).await.expect("an answer");
    assert_eq!(resent(&second.json), vec![id.clone()], "{}", second.json);
    let new_event = str_of(&second.json["resent"][0]["event_id"]);
    until(&c, "delivery_state=failed", |p| len(p) == 3).await;

    // The receiver is back: one more call delivers, and after that nothing is resent.
    rx.ok.store(true, Ordering::SeqCst);
    let third = c.recover_events(&since, None).await.expect("an answer");
    assert_eq!(resent(&third.json), vec![id.clone()], "{}", third.json);
    assert_ne!(str_of(&third.json["resent"][0]["event_id"]), new_event);
    until(&c, "delivery_state=delivered", |p| len(p) == 1).await;
    let fourth = c.recover_events(&since, None).await.expect("an answer");
    assert_eq!(fourth.json["resent"], json!([]), "{}", fourth.json);
    assert_eq!(fourth.json["skipped"], json!([]), "{}", fourth.json);
    s.stop().await;
}
