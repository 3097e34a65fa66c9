//! Three example upstreams behind `[[upstream.providers]]` (issue 44): `a` (sbp only,
//! priority 0) refuses payers of one bank; `b` (priority 1) is told to be slow, or to refuse
//! every request before accepting it; `c` (priority 2) is healthy. Over a real server:
//!
//! - routing by coverage: a card payment never reaches `a`;
//! - failover on a refusal within the budget: `a` refuses the bank, `b` issues;
//! - no failover after a timeout: `b` took the request and answered too late, the payment is
//!   `provider_result_ambiguous` with `b` on record, and `c` never hears of it (a create cut
//!   off during a failover is recovered from the provider it names: the core's service
//!   tests);
//! - the breaker: `b` refusing every request is out of routing after 3 failures, `c` serves
//!   meanwhile; after the 2 s cool-down, of 20 creates sent at once exactly one goes to `b`
//!   (its probe, which hangs past b's limit) and the others to `c`; after another cool-down
//!   one probe brings `b`, healthy again, back;
//! - notifications on each provider's own path verify with its own secret only, and a
//!   provider cannot report on a payment another provider issued; such a refused report
//!   records nothing, so the right provider's genuine report with the same timestamp and
//!   body is applied (replay memory is per provider and keeps accepted requests only).

#[path = "ops/support.rs"]
mod support;

use std::net::SocketAddr;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use payments_client::{MerchantClient, SandboxCredentials};
use payments_core::callback::{
    signature_header, CallbackSecret, SIGNATURE_HEADER, TIMESTAMP_HEADER,
};
use payments_examples::upstream::ExampleUpstream;
use payments_server::testing::free_port;
use serde_json::{json, Value};

use crate::support::{serve, wait_ready};

const SECRET_A: &str = "whsec_cHJvdmlkZXItYS1zZWNyZXQtMDEyMzQ1Njc4OWFiY2Q";
const SECRET_B: &str = "whsec_cHJvdmlkZXItYi1zZWNyZXQtMDEyMzQ1Njc4OWFiY2Q";
const SECRET_C: &str = "whsec_cHJvdmlkZXItYy1zZWNyZXQtMDEyMzQ1Njc4OWFiY2Q";
const REFUSED_BANK: &str = "Т-Банк";

/// How an upstream behaves now.
#[derive(Default)]
struct Behaviour {
    /// Answer each requisite request this many ms late (after issuing).
    late_ms: AtomicU64,
    /// Answer `401` to every requisite request (refused before acceptance).
    refuse_all: AtomicBool,
    /// Answer `no_requisites` to payers of [`REFUSED_BANK`].
    refuse_bank: AtomicBool,
    /// Requisite requests received.
    requests: AtomicUsize,
    /// The payment ids asked for (a request that timed out is sent again with the same id).
    payments: std::sync::Mutex<std::collections::HashSet<String>>,
}

struct Upstream {
    example: ExampleUpstream,
    behaviour: Arc<Behaviour>,
    base: String,
}

async fn upstream(secret: &str) -> Upstream {
    let example = ExampleUpstream::new(CallbackSecret::parse(secret).unwrap());
    let behaviour = Arc::new(Behaviour::default());
    let b = behaviour.clone();
    let app = example.router().layer(axum::middleware::from_fn(
        move |req: axum::extract::Request, next: axum::middleware::Next| {
            let b = b.clone();
            async move {
                use axum::response::IntoResponse;
                if req.uri().path() != "/requisites" {
                    return next.run(req).await;
                }
                b.requests.fetch_add(1, Ordering::SeqCst);
                let (parts, body) = req.into_parts();
                let bytes = axum::body::to_bytes(body, 1 << 20).await.unwrap();
                let parsed: Value = serde_json::from_slice(&bytes).unwrap_or(Value::Null);
                let id = parsed["payment_id"]
                    .as_str()
                    .unwrap_or_default()
                    .to_string();
                b.payments.lock().unwrap().insert(id);
                if b.refuse_all.load(Ordering::SeqCst) {
                    return axum::http::StatusCode::UNAUTHORIZED.into_response();
                }
                if b.refuse_bank.load(Ordering::SeqCst) && parsed["bank_code"] == REFUSED_BANK {
                    return axum::Json(json!({"payment_id": parsed["payment_id"],
                        "result": "no_requisites", "reason": "this bank's payers are not served"}))
                    .into_response();
                }
                let req = axum::extract::Request::from_parts(parts, axum::body::Body::from(bytes));
                let resp = next.run(req).await;
                let late = b.late_ms.load(Ordering::SeqCst);
                if late > 0 {
                    tokio::time::sleep(Duration::from_millis(late)).await;
                }
                resp
            }
        },
    ));
    let listener = tokio::net::TcpListener::bind(SocketAddr::from(([127, 0, 0, 1], 0)))
        .await
        .unwrap();
    let base = format!("http://{}", listener.local_addr().unwrap());
    tokio::spawn(async move { axum::serve(listener, app).await });
    Upstream {
        example,
        behaviour,
        base,
    }
}

/// Posts `body` to the notification path of `provider`, signed with `secret` at `at` (unix
/// seconds); the answer's status and JSON body.
async fn notify_signed(
    notify: &SocketAddr,
    provider: &str,
    secret: &str,
    at: i64,
    body: &str,
) -> (u16, Value) {
    let secret = CallbackSecret::parse(secret).unwrap();
    let r = reqwest::Client::new()
        .post(format!(
            "http://{notify}/upstream/v1/notifications/{provider}"
        ))
        .header("content-type", "application/json")
        .header(TIMESTAMP_HEADER, at.to_string())
        .header(
            SIGNATURE_HEADER,
            signature_header(&[&secret], at, body.as_bytes()),
        )
        .body(body.to_string())
        .send()
        .await
        .unwrap();
    (r.status().as_u16(), r.json().await.unwrap())
}

/// How many payments `u` was asked for (distinct payment ids).
fn requests(u: &Upstream) -> usize {
    u.behaviour.payments.lock().unwrap().len()
}

/// How many requisite requests `u` received (a payment asked again counts again).
fn asks(u: &Upstream) -> usize {
    u.behaviour.requests.load(Ordering::SeqCst)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn three_upstreams_route_fail_over_recover_and_break() {
    let (a, b, c) = (
        upstream(SECRET_A).await,
        upstream(SECRET_B).await,
        upstream(SECRET_C).await,
    );
    a.behaviour.refuse_bank.store(true, Ordering::SeqCst);
    let notify = SocketAddr::from(([127, 0, 0, 1], free_port()));
    for (u, name) in [(&a, "a"), (&b, "b"), (&c, "c")] {
        u.example
            .set_notify_url(&format!("http://{notify}/upstream/v1/notifications/{name}"));
    }
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("data");
    let config = dir.path().join("payments.toml");
    std::fs::write(
        &config,
        format!(
            r#"
[upstream]
provider = "http"
listen = "{notify}"
provider_budget = "3s"
breaker_failures = 3
breaker_open = "2s"

[[upstream.providers]]
name = "a"
url = "{a}/requisites"
secrets = ["{SECRET_A}"]
priority = 0
methods = ["sbp"]

[[upstream.providers]]
name = "b"
url = "{b}/requisites"
secrets = ["{SECRET_B}"]
priority = 1
timeout = "1s"

[[upstream.providers]]
name = "c"
url = "{c}/requisites"
secrets = ["{SECRET_C}"]
priority = 2
"#,
            a = a.base,
            b = b.base,
            c = c.base
        ),
    )
    .unwrap();
    let config = config.display().to_string();
    let (mut server, base, operator) = serve(&data, &["--config", &config]);
    wait_ready(&mut server, &base).await;
    let creds = SandboxCredentials::from_file(data.join("sandbox-credentials.json")).unwrap();
    let merchant = MerchantClient::from_credentials(&creds).unwrap();
    let create = |mpid: &str, method: &str, bank: Option<&str>| {
        let mut body = json!({"merchant_payment_id": mpid, "amount": "1500.00",
                              "payment_method": method});
        if let Some(bank) = bank {
            body["bank_code"] = json!(bank);
        }
        let merchant = merchant.clone();
        async move {
            loop {
                let r = merchant.create_payment(&body).await.unwrap();
                if r.status.as_u16() != 429 {
                    return r;
                }
                tokio::time::sleep(Duration::from_millis(200)).await;
            }
        }
    };
    let counts = || (requests(&a), requests(&b), requests(&c));

    // Routing by coverage: a card payment skips `a` (sbp only); `b` issues.
    let r = create("card-1", "card_transfer", None).await;
    assert_eq!(r.json["status"], "processing", "{}", r.json);
    assert_eq!(counts(), (0, 1, 0));
    let card_1 = r.json["id"].as_str().unwrap().to_string();

    // Failover on a refusal: `a` refuses the bank's payer, `b` issues, within the budget.
    let r = create("bank-1", "sbp", Some(REFUSED_BANK)).await;
    assert_eq!(r.status.as_u16(), 201, "{}", r.json);
    assert_eq!(r.json["status"], "processing", "{}", r.json);
    let bank_1 = r.json["id"].as_str().unwrap().to_string();
    assert_eq!(counts(), (1, 2, 0));
    // Another payer of `a`'s: `a` issues.
    let r = create("sbp-1", "sbp", None).await;
    assert_eq!(r.json["status"], "processing", "{}", r.json);
    assert_eq!(counts(), (2, 2, 0));

    // No failover after a timeout: `b` takes the request, answers after its 1 s limit, and
    // is asked again (the same payment) until the 3 s budget ends; no other provider is.
    b.behaviour.late_ms.store(1_500, Ordering::SeqCst);
    let asked_before = asks(&b);
    let r = create("late-1", "card_transfer", None).await;
    assert_eq!(r.status.as_u16(), 201, "{}", r.json);
    assert_eq!(
        r.json["error_code"], "provider_result_ambiguous",
        "{}",
        r.json
    );
    let late_id = r.json["id"].as_str().unwrap().to_string();
    assert_eq!(
        counts(),
        (2, 3, 0),
        "never a second provider after the timeout"
    );
    assert!(
        asks(&b) - asked_before >= 2,
        "b asked again after its timeout"
    );
    b.behaviour.late_ms.store(0, Ordering::SeqCst);
    // The payment went to `error` at once (the answer timed out): it is not recovered on a
    // repeat; the create's answer was final. The provider that may have issued is `b`, and
    // an operator reconciles with it: `c` never heard of the payment.
    let again = create("late-1", "card_transfer", None).await;
    assert_eq!(again.status.as_u16(), 200);
    assert_eq!(again.json["id"], late_id.as_str());
    assert_eq!(requests(&c), 0);

    // The breaker: `b` refuses every request before accepting it (nothing issued), so each
    // card payment fails over to `c`. The timeout above was `b`'s first failure in a row:
    // two refusals make three, and `b` is out of routing for the third payment.
    b.behaviour.refuse_all.store(true, Ordering::SeqCst);
    for n in 0..3 {
        let r = create(&format!("brk-{n}"), "card_transfer", None).await;
        assert_eq!(r.json["status"], "processing", "{}", r.json);
    }
    assert_eq!(counts(), (2, 5, 3));
    let metrics = || {
        let url = format!("{operator}/metrics");
        async move { reqwest::get(url).await.unwrap().text().await.unwrap() }
    };
    let text = metrics().await;
    assert!(
        text.contains("payments_provider_breaker{provider=\"b\",state=\"open\"} 1"),
        "{text}"
    );
    assert!(
        text.contains("payments_provider_attempts_total{provider=\"b\",outcome=\"unavailable\"} 2")
    );
    // The operator API shows it: b out of routing until its probe.
    let operator_token = serde_json::from_str::<Value>(
        &std::fs::read_to_string(data.join("sandbox-credentials.json")).unwrap(),
    )
    .unwrap()["operator_token"]
        .as_str()
        .unwrap()
        .to_string();
    let operator_get = |path: String| {
        let request = reqwest::Client::new()
            .get(format!("{operator}{path}"))
            .bearer_auth(&operator_token);
        async move { request.send().await.unwrap().json::<Value>().await.unwrap() }
    };
    let view = operator_get("/operator/v1/providers".into()).await;
    let names: Vec<&str> = view["providers"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| p["name"].as_str().unwrap())
        .collect();
    assert_eq!(names, ["a", "b", "c"], "{view}");
    let pb = &view["providers"][1];
    assert_eq!(pb["breaker"], "open", "{view}");
    assert!(pb["open_until"].is_string(), "{view}");
    assert_eq!(pb["failures_in_a_row"], 3, "{view}");
    assert_eq!(view["providers"][0]["coverage"]["methods"], json!(["sbp"]));
    let r = create("brk-3", "card_transfer", None).await;
    assert_eq!(r.json["status"], "processing", "{}", r.json);
    assert_eq!(
        counts(),
        (2, 5, 4),
        "b is not asked while its breaker is open"
    );
    // After the cool-down `b` is due one probe, and hangs past its 1 s limit: of 20 creates
    // sent at once, exactly one is its probe (ambiguous), and the others go to `c`.
    b.behaviour.refuse_all.store(false, Ordering::SeqCst);
    b.behaviour.late_ms.store(1_500, Ordering::SeqCst);
    tokio::time::sleep(Duration::from_millis(2_100)).await;
    let rush: Vec<_> = (0..20)
        .map(|n| tokio::spawn(create(&format!("rush-{n}"), "card_transfer", None)))
        .collect();
    let mut ambiguous = 0;
    for r in rush {
        let r = r.await.unwrap();
        assert_eq!(r.status.as_u16(), 201, "{}", r.json);
        if r.json["error_code"] == "provider_result_ambiguous" {
            ambiguous += 1;
        } else {
            assert_eq!(r.json["status"], "processing", "{}", r.json);
        }
    }
    assert_eq!(
        counts(),
        (2, 6, 23),
        "one probe to b at a time, the others to c"
    );
    assert_eq!(ambiguous, 1, "only the probe hung");
    // The probe failed: after another cool-down one probe goes to `b`, healthy again, and the
    // breaker closes.
    b.behaviour.late_ms.store(0, Ordering::SeqCst);
    tokio::time::sleep(Duration::from_millis(2_100)).await;
    let r = create("probe-1", "card_transfer", None).await;
    assert_eq!(r.json["status"], "processing", "{}", r.json);
    assert_eq!(counts(), (2, 7, 23), "the probe went to b");
    let text = metrics().await;
    assert!(
        text.contains("payments_provider_breaker{provider=\"b\",state=\"closed\"} 1"),
        "{text}"
    );

    // Notifications: `b` reports on its own payment (card-1) on its own path.
    let refused = a.example.report("n-a-1", &card_1, true, None).await;
    // `a` signs with its own secret on its own path: verified, but card-1 is not `a`'s.
    assert!(
        refused.as_ref().is_err_and(
            |e| e.to_string().starts_with("404") && e.to_string().contains("payment_not_found")
        ),
        "{refused:?}"
    );
    // An impostor with `a`'s secret on `b`'s path: the signature does not verify.
    let impostor = ExampleUpstream::new(CallbackSecret::parse(SECRET_A).unwrap());
    impostor.set_notify_url(&format!("http://{notify}/upstream/v1/notifications/b"));
    let forged = impostor.report("n-forged", &card_1, true, None).await;
    assert!(
        forged.as_ref().is_err_and(
            |e| e.to_string().starts_with("401") && e.to_string().contains("signature_invalid")
        ),
        "{forged:?}"
    );
    // The operator sees where each payment went, and why: the CLI and the operator API alike.
    let shown = support::cli_json(&data, &["payment", "show", &card_1]);
    assert_eq!(shown["route"]["provider"], "b", "{shown}");
    let api = operator_get(format!("/operator/v1/payments/{card_1}")).await;
    assert_eq!(api["route"], shown["route"], "{api}");
    assert!(
        shown["route"]["reason"]
            .as_str()
            .unwrap()
            .contains("not eligible: a: method"),
        "{shown}"
    );
    let bank_1 = support::cli_json(&data, &["payment", "show", &bank_1]);
    assert!(
        bank_1["route"]["reason"]
            .as_str()
            .unwrap()
            .starts_with("failover after a: no requisites"),
        "{bank_1}"
    );
    // `a` signs `b`'s report on card-1 and posts it on its own path: refused (404), and it
    // records nothing. `b`'s genuine report, the same timestamp and body signed with its own
    // secret, is then applied; only that accepted request is a replay when sent again.
    let at = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_secs() as i64;
    let body = json!({"notification_id": "n-b-1", "payment_id": card_1, "status": "confirmed"})
        .to_string();
    let from_a = notify_signed(&notify, "a", SECRET_A, at, &body).await;
    assert_eq!(from_a.0, 404, "{}", from_a.1);
    let applied = notify_signed(&notify, "b", SECRET_B, at, &body).await;
    assert_eq!(applied.0, 200, "{}", applied.1);
    let applied = applied.1;
    assert_eq!(applied["applied"], true, "{applied}");
    assert_eq!(applied["status"], "completed", "{applied}");
    let again = notify_signed(&notify, "b", SECRET_B, at, &body).await;
    assert_eq!(again.0, 409, "{}", again.1);
    assert_eq!(again.1["code"], "request_replayed", "{}", again.1);
    let from_a = notify_signed(&notify, "a", SECRET_A, at, &body).await;
    assert_eq!(from_a.0, 404, "still not a's, and no replay: {}", from_a.1);
    let deadline = Instant::now() + Duration::from_secs(5);
    loop {
        let got = merchant.get_payment(&card_1).await.unwrap();
        if got.json["status"] == "completed" {
            break;
        }
        assert!(Instant::now() < deadline, "{}", got.json);
        tokio::time::sleep(Duration::from_millis(50)).await;
    }

    // A create whose client gives up before the answer (`b` is slow again) still ends, and
    // still writes its line for support.
    b.behaviour.late_ms.store(1_500, Ordering::SeqCst);
    let impatient = merchant.clone().with_http_client(
        reqwest::Client::builder()
            .timeout(Duration::from_millis(300))
            .build()
            .unwrap(),
    );
    let body = json!({"merchant_payment_id": "gone-1", "amount": "1500.00",
                      "payment_method": "card_transfer"});
    assert!(impatient.create_payment(&body).await.is_err(), "gave up");
    let deadline = Instant::now() + Duration::from_secs(10);
    let gone = loop {
        let page = merchant
            .list_payments("merchant_payment_id=gone-1")
            .await
            .unwrap();
        let first = &page.json["data"][0];
        if first["status"] == "error" {
            break first["id"].as_str().unwrap().to_string();
        }
        assert!(Instant::now() < deadline, "{}", page.json);
        tokio::time::sleep(Duration::from_millis(100)).await;
    };
    let (log, _) = support::stop_and_read_log(server).await;
    assert!(
        log.lines()
            .any(|l| l.contains("payment create answered") && l.contains(&gone)),
        "no create line for {gone}:\n{log}"
    );
}

/// The operator API's answer of `operator` for `/operator/v1/providers` (with the sandbox
/// operator token of `data`).
async fn providers_view(operator: &str, token: &str) -> Value {
    let r = reqwest::Client::new()
        .get(format!("{operator}/operator/v1/providers"))
        .bearer_auth(token)
        .send()
        .await
        .unwrap();
    assert_eq!(r.status().as_u16(), 200);
    r.json().await.unwrap()
}

/// Provider `name`'s entry of node `node` in a providers view (under `nodes`).
fn node_entry<'a>(view: &'a Value, name: &str, node: &str) -> Option<&'a Value> {
    view["providers"]
        .as_array()?
        .iter()
        .find(|p| p["name"] == name)?["nodes"]
        .as_array()?
        .iter()
        .find(|n| n["node"] == node)
}

/// Issue 60 item 4: two `serve` processes on one PostgreSQL database, `x` (priority 0) refusing
/// every request (401: not reached, a failure) and `y` healthy. Node 1's creates open `x`'s
/// breaker there; node 2's operator view shows it open as node 1 reported it, while node 2's
/// own breaker (its routing decides from its own memory) is closed and still asks `x`. The
/// report interval is an hour, so node 1's report can only have come from the write a
/// breaker's change makes at once; the wait for it polls with a deadline. The CLI shows both
/// nodes' reports; a node stopped cleanly takes its report away.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs PostgreSQL: DATABASE_URL"]
async fn a_breaker_opened_on_one_node_shows_in_the_other_nodes_view() {
    let base = support::database_url();
    let database_url = support::fresh_schema(&base).await;
    let (x, y) = (upstream(SECRET_A).await, upstream(SECRET_B).await);
    x.behaviour.refuse_all.store(true, Ordering::SeqCst);
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("data");
    let config = dir.path().join("payments.toml");
    std::fs::write(
        &config,
        format!(
            r#"
[upstream]
provider = "http"
provider_budget = "3s"
breaker_failures = 2
breaker_open = "10m"
health_report_interval = "1h"

[[upstream.providers]]
name = "x"
url = "{x}/requisites"
secrets = ["{SECRET_A}"]
priority = 0

[[upstream.providers]]
name = "y"
url = "{y}/requisites"
secrets = ["{SECRET_B}"]
priority = 1
"#,
            x = x.base,
            y = y.base,
        ),
    )
    .unwrap();
    let config = config.display().to_string();
    let node = |name: &'static str| {
        let env = [
            ("PAYMENTS_STORE__DATABASE_URL", database_url.as_str()),
            ("PAYMENTS_NODE_NAME", name),
            ("PAYMENTS_LOG", "warn"),
        ];
        support::serve_with(&data, "127.0.0.1", &["--config", &config], &env)
    };
    // Node 1 bootstraps the sandbox; node 2 joins.
    let (mut node1, base1, operator1) = node("node-1");
    wait_ready(&mut node1, &base1).await;
    let (mut node2, base2, operator2) = node("node-2");
    wait_ready(&mut node2, &base2).await;
    let creds = SandboxCredentials::from_file(data.join("sandbox-credentials.json")).unwrap();
    let token = creds.operator_token.expose().to_string();
    let on = |base: &str| {
        MerchantClient::new(base, creds.token.expose(), creds.private_key_pem.expose()).unwrap()
    };
    let create = |client: MerchantClient, mpid: &'static str| async move {
        let body = json!({"merchant_payment_id": mpid, "amount": "1500.00",
                          "payment_method": "sbp"});
        let r = client.create_payment(&body).await.unwrap();
        assert_eq!(r.json["status"], "processing", "{}", r.json);
    };

    // Two creates on node 1: x refuses both (each fails over to y), and x's breaker opens there.
    create(on(&base1), "n1-1").await;
    create(on(&base1), "n1-2").await;
    assert_eq!((requests(&x), requests(&y)), (2, 2));
    let own = providers_view(&operator1, &token).await;
    assert_eq!(own["node"], "node-1", "{own}");
    assert_eq!(own["providers"][0]["breaker"], "open", "{own}");

    // Node 2's view shows it as node 1 reported it.
    let deadline = Instant::now() + Duration::from_secs(15);
    let view = loop {
        let view = providers_view(&operator2, &token).await;
        if node_entry(&view, "x", "node-1").is_some_and(|n| n["breaker"] == "open") {
            break view;
        }
        assert!(
            Instant::now() < deadline,
            "node 2 never showed x open on node 1: {view}"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    };
    assert_eq!(view["node"], "node-2", "{view}");
    assert_eq!(view["reports_error"], Value::Null, "{view}");
    let x_on_1 = node_entry(&view, "x", "node-1").unwrap();
    assert_eq!(x_on_1["failures_in_a_row"], 2, "{view}");
    assert_eq!(x_on_1["stale"], false, "{view}");
    assert!(x_on_1["open_until"].is_string(), "{view}");
    assert!(
        x_on_1["last_failure"]["cause"]
            .as_str()
            .is_some_and(|c| c.starts_with("unavailable")),
        "{view}"
    );
    // Node 2's own breaker for x is its own: closed, and its routing still asks x.
    assert_eq!(view["providers"][0]["breaker"], "closed", "{view}");
    assert_eq!(
        node_entry(&view, "x", "node-2").map(|n| &n["breaker"]),
        Some(&json!("closed")),
        "{view}"
    );
    let y_on_1 = node_entry(&view, "y", "node-1").expect("y on node 1");
    assert_eq!(y_on_1["breaker"], "closed", "{view}");
    create(on(&base2), "n2-1").await;
    assert_eq!(requests(&x), 3, "node 2 asked x: its breaker decides alone");

    // The CLI reads every node's report from the database.
    let shown = support::cli_json(&data, &["providers", "--database-url", &database_url]);
    let x_shown = &shown["providers"][0];
    assert_eq!(x_shown["name"], "x", "{shown}");
    let breakers: Vec<(&str, &str)> = x_shown["nodes"]
        .as_array()
        .unwrap()
        .iter()
        .map(|n| (n["node"].as_str().unwrap(), n["breaker"].as_str().unwrap()))
        .collect();
    assert_eq!(
        breakers,
        [("node-1", "open"), ("node-2", "closed")],
        "{shown}"
    );

    // Node 1 stops cleanly: its report goes with it.
    let pid = node1.0.id().to_string();
    let killed = std::process::Command::new("kill")
        .args(["-TERM", &pid])
        .status()
        .unwrap();
    assert!(killed.success());
    let deadline = Instant::now() + Duration::from_secs(30);
    while node1.0.try_wait().unwrap().is_none() {
        assert!(Instant::now() < deadline, "node 1 did not stop on SIGTERM");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let view = providers_view(&operator2, &token).await;
    assert!(node_entry(&view, "x", "node-2").is_some(), "{view}");
    assert!(node_entry(&view, "x", "node-1").is_none(), "{view}");
    drop(node2);
}
