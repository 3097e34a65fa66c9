//! Creates cut off while they wait for the HTTP provider: the upstream issued a requisite for
//! each, the node never recorded one. Either the node is killed (SIGKILL) and restarted on the
//! same data dir, or, on PostgreSQL, the database restarts under the node. The merchant
//! repeats each create (as it must after a lost answer) and gets its payment in `processing`
//! with the requisite the upstream issued: the repeat asks the upstream again for the same
//! payment id, which answers its first answer. Nothing is issued twice.
//!
//! A test binary of its own: the database restart would cut the PostgreSQL tests running
//! beside it in one binary.

use std::net::SocketAddr;
use std::time::{Duration, Instant};

use payments_client::{MerchantClient, SandboxCredentials};
use payments_core::callback::CallbackSecret;
use payments_examples::upstream::{server_settings, ExampleUpstream};
use serde_json::json;

#[path = "ops/support.rs"]
mod support;

use crate::support::{serve, wait_ready, Database};

const SECRET: &str = "whsec_Y3Jhc2gtdGVzdC11cHN0cmVhbS1zZWNyZXQtMDEyMzQ1";

/// How long the upstream holds each answer after issuing: the creates are in flight then.
const LATE: Duration = Duration::from_secs(3);

/// What cuts the creates off.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Disruption {
    /// SIGKILL the node, start it again.
    KillTheNode,
    /// Stop PostgreSQL under the node until the upstream has answered, then start it.
    RestartTheDatabase,
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn creates_cut_off_by_a_sigkill_get_the_requisites_the_upstream_issued() {
    cut_off(Disruption::KillTheNode).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs PostgreSQL: DATABASE_URL (and PAYMENTS_TEST_PG_CTL, PAYMENTS_TEST_PG_DATA)"]
async fn creates_cut_off_by_a_database_restart_get_the_requisites_the_upstream_issued() {
    let _only = THE_DATABASE.lock().await;
    cut_off(Disruption::RestartTheDatabase).await;
}

/// The tests of this binary that stop the test database take turns: run together (the test
/// harness runs a binary's tests in parallel) each would cut the other off.
static THE_DATABASE: tokio::sync::Mutex<()> = tokio::sync::Mutex::const_new(());

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn completions_cut_off_by_a_sigkill_leave_a_balance_that_reconciles() {
    completions_cut_off(Disruption::KillTheNode).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs PostgreSQL: DATABASE_URL (and PAYMENTS_TEST_PG_CTL, PAYMENTS_TEST_PG_DATA)"]
async fn completions_cut_off_by_a_database_restart_leave_a_balance_that_reconciles() {
    let _only = THE_DATABASE.lock().await;
    completions_cut_off(Disruption::RestartTheDatabase).await;
}

async fn cut_off(disruption: Disruption) {
    let up = ExampleUpstream::new(CallbackSecret::parse(SECRET).unwrap());
    // Requisites are issued at once and answered LATE.
    let app = up.router().layer(axum::middleware::from_fn(
        |req: axum::extract::Request, next: axum::middleware::Next| async move {
            let late = req.uri().path() == "/requisites";
            let resp = next.run(req).await;
            if late {
                tokio::time::sleep(LATE).await;
            }
            resp
        },
    ));
    let listener = tokio::net::TcpListener::bind(SocketAddr::from(([127, 0, 0, 1], 0)))
        .await
        .unwrap();
    let upstream = format!("http://{}", listener.local_addr().unwrap());
    tokio::spawn(async move { axum::serve(listener, app).await });

    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("data");
    let config = dir.path().join("payments.toml");
    std::fs::write(&config, server_settings(&upstream, SECRET, "127.0.0.1:0")).unwrap();
    let config = config.display().to_string();
    let mut args = vec!["--config".to_string(), config];
    if disruption == Disruption::RestartTheDatabase {
        let url = support::fresh_schema(&support::database_url()).await;
        args.extend(["--database-url".to_string(), url]);
    }
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    let (mut server, base, _) = serve(&data, &args);
    drain_stderr(&mut server);
    wait_ready(&mut server, &base).await;
    let creds = || SandboxCredentials::from_file(data.join("sandbox-credentials.json")).unwrap();
    let body = |n: usize| {
        json!({"merchant_payment_id": format!("crash-{n}"), "amount": "1910.00",
               "payment_method": "card_transfer"})
    };

    // Five creates, each waiting for the upstream's late answer, when the node dies.
    let impatient = MerchantClient::from_credentials(&creds())
        .unwrap()
        .with_http_client(
            reqwest::Client::builder()
                .timeout(Duration::from_secs(30))
                .build()
                .unwrap(),
        );
    let in_flight: Vec<_> = (0..5)
        .map(|n| {
            let (c, b) = (impatient.clone(), body(n));
            tokio::spawn(async move { c.create_payment(&b).await })
        })
        .collect();
    let started = Instant::now();
    while up.issued() < 5 {
        assert!(
            started.elapsed() < Duration::from_secs(10),
            "the upstream issues"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let server = match disruption {
        Disruption::KillTheNode => {
            server.0.kill().unwrap();
            server.0.wait().unwrap();
            for create in in_flight {
                assert!(
                    create.await.unwrap().is_err(),
                    "the node died before it answered"
                );
            }
            // The node comes back on the same data dir.
            let (mut server, base, _) = serve(&data, &args);
            drain_stderr(&mut server);
            wait_ready(&mut server, &base).await;
            server
        }
        Disruption::RestartTheDatabase => {
            // Down while the upstream's answers arrive: the node cannot record them.
            let database = Database::from_env();
            database.stop();
            for create in in_flight {
                if let Ok(r) = create.await.unwrap() {
                    assert_ne!(r.json["status"], "processing", "{}", r.json);
                }
            }
            database.start();
            wait_ready(&mut server, &base).await;
            server
        }
    };

    // The merchant repeats each create.
    let merchant = MerchantClient::from_credentials(&creds())
        .unwrap()
        .with_http_client(
            reqwest::Client::builder()
                .timeout(Duration::from_secs(60))
                .build()
                .unwrap(),
        );
    let repeats: Vec<_> = (0..5)
        .map(|n| {
            let (c, b) = (merchant.clone(), body(n));
            tokio::spawn(async move { c.create_payment(&b).await })
        })
        .collect();
    let mut requisites = Vec::new();
    for repeat in repeats {
        let r = repeat.await.unwrap().expect("the repeat is answered");
        assert_eq!(r.status.as_u16(), 200, "{}", r.json);
        assert_eq!(r.json["status"], "processing", "{}", r.json);
        requisites.push(r.json["requisite"].as_str().unwrap().to_string());
    }
    requisites.sort();
    requisites.dedup();
    assert_eq!(requisites.len(), 5, "one requisite each");
    assert_eq!(
        up.issued(),
        5,
        "no payment got a second requisite: each is the one issued before the crash"
    );
    // The operator's reconciliation list has the five recoveries, none left unresolved.
    let mut reconcile = vec!["payment", "reconcile"];
    if let Some(i) = args.iter().position(|a| *a == "--database-url") {
        reconcile.extend(["--database-url", args[i + 1]]);
    }
    let list = support::cli_json(&data, &reconcile);
    assert_eq!(list["recovered"], 5, "{list}");
    assert_eq!(list["unresolved"], 0, "{list}");
    let kinds: Vec<&str> = list["payments"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| p["kind"].as_str().unwrap())
        .collect();
    assert_eq!(kinds, ["recovered (resolved)"; 5], "{list}");
    drop(server);
}

/// Operator confirms of live payments in flight when the node is killed (or PostgreSQL
/// restarts under it): each completion and its ledger credit are written together or not at
/// all. After the operator confirms what is left, the reconciliation (`payments-server ledger
/// reconcile`, exit status 0) finds no difference, and the balance is exactly the sum of the
/// completed payments' `amount_usdt_rate`, one credit each.
async fn completions_cut_off(disruption: Disruption) {
    const N: usize = 40;
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("data");
    let mut args: Vec<String> = Vec::new();
    if disruption == Disruption::RestartTheDatabase {
        let url = support::fresh_schema(&support::database_url()).await;
        args.extend(["--database-url".to_string(), url]);
    }
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    let with_db = |cmd: &[&str]| -> Vec<String> {
        cmd.iter()
            .chain(args.iter())
            .map(|s| s.to_string())
            .collect()
    };
    let (mut server, base, operator) = serve(&data, &args);
    drain_stderr(&mut server);
    wait_ready(&mut server, &base).await;
    let creds = SandboxCredentials::from_file(data.join("sandbox-credentials.json")).unwrap();
    // The sandbox project leaves test mode: its payments are live and credit the balance.
    let project = creds.project_id.to_string();
    let set = with_db(&["project", "set", &project, "--test-mode", "off"]);
    support::cli_json(&data, &set.iter().map(String::as_str).collect::<Vec<_>>());
    let merchant = MerchantClient::from_credentials(&creds).unwrap();
    let mut ids = Vec::new();
    for n in 0..N {
        let r = merchant
            .create_payment(&json!({"merchant_payment_id": format!("paid-{n}"),
                                   "amount": format!("{}.55", 1000 + n * 37),
                                   "payment_method": "sbp"}))
            .await
            .expect("created");
        assert_eq!(r.json["status"], "processing", "{}", r.json);
        assert_eq!(r.json["is_test"], false, "{}", r.json);
        ids.push(r.json["id"].as_str().unwrap().to_string());
    }
    let client = reqwest::Client::builder()
        .timeout(Duration::from_secs(30))
        .build()
        .unwrap();
    let token = creds.operator_token.expose().clone();
    let confirm = |id: String, base: String| {
        let (client, token) = (client.clone(), token.clone());
        async move {
            client
                .post(format!("{base}/operator/v1/payments/{id}/confirm"))
                .bearer_auth(token)
                .send()
                .await
                .map(|r| r.status().as_u16())
        }
    };
    // Every confirm at once; the disruption lands once a quarter of them are answered, while
    // the others are being written.
    let answered = std::sync::Arc::new(std::sync::atomic::AtomicUsize::new(0));
    let in_flight: Vec<_> = ids
        .iter()
        .map(|id| {
            let (c, answered) = (confirm(id.clone(), operator.clone()), answered.clone());
            tokio::spawn(async move {
                let r = c.await;
                answered.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
                r
            })
        })
        .collect();
    let started = Instant::now();
    while answered.load(std::sync::atomic::Ordering::SeqCst) < N / 4 {
        assert!(
            started.elapsed() < Duration::from_secs(20),
            "confirms are answered"
        );
        tokio::time::sleep(Duration::from_millis(1)).await;
    }
    let (server, operator) = match disruption {
        Disruption::KillTheNode => {
            server.0.kill().unwrap();
            server.0.wait().unwrap();
            let cut = count_cut(in_flight).await;
            println!("{cut} of {N} confirms were cut off by the SIGKILL");
            let (mut server, base, operator) = serve(&data, &args);
            drain_stderr(&mut server);
            wait_ready(&mut server, &base).await;
            (server, operator)
        }
        Disruption::RestartTheDatabase => {
            let database = Database::from_env();
            database.stop();
            let cut = count_cut(in_flight).await;
            println!("{cut} of {N} confirms failed while PostgreSQL was down");
            database.start();
            wait_ready(&mut server, &base).await;
            (server, operator)
        }
    };
    // The operator confirms what is left: a payment completed before the disruption is
    // refused (already completed), every other one completes now.
    let mut credits = payments_core::ledger::Usdt::ZERO;
    for id in &ids {
        let status = confirm(id.clone(), operator.clone())
            .await
            .expect("answered");
        assert!(status == 200 || status == 409, "{id}: {status}");
        let shown: serde_json::Value = client
            .get(format!("{operator}/operator/v1/payments/{id}"))
            .bearer_auth(&token)
            .send()
            .await
            .unwrap()
            .json()
            .await
            .unwrap();
        assert_eq!(shown["status"], "completed", "{shown}");
        let rate = shown["merchant_information"]["amount_usdt_rate"]
            .as_str()
            .unwrap();
        credits = credits
            .checked_add(payments_core::ledger::Usdt::parse(rate).unwrap())
            .unwrap();
    }
    let reconcile = with_db(&["ledger", "reconcile"]);
    let report = support::cli_json(
        &data,
        &reconcile.iter().map(String::as_str).collect::<Vec<_>>(),
    );
    assert_eq!(report["differences"], json!([]), "{report}");
    assert_eq!(report["entries"], N, "{report}");
    let balance = with_db(&["ledger", "balance", &project]);
    let balance = support::cli_json(
        &data,
        &balance.iter().map(String::as_str).collect::<Vec<_>>(),
    );
    assert_eq!(balance["balance"], credits.to_string(), "{balance}");
    assert_eq!(balance["entries"], N, "{balance}");
    drop(server);
}

/// How many of the confirms got no `200`.
async fn count_cut(in_flight: Vec<tokio::task::JoinHandle<Result<u16, reqwest::Error>>>) -> usize {
    let mut cut = 0;
    for c in in_flight {
        if c.await.unwrap().map_or(true, |s| s != 200) {
            cut += 1;
        }
    }
    cut
}

/// Reads the node's standard error as it comes (and throws it away): a database outage makes
/// the node log an error per failed request, and a pipe nobody reads fills at 64 KiB, after
/// which the node's error lines (written at once, not queued) block its runtime.
fn drain_stderr(server: &mut support::ServerProcess) {
    if let Some(mut stderr) = server.0.stderr.take() {
        std::thread::spawn(move || {
            let _ = std::io::copy(&mut stderr, &mut std::io::sink());
        });
    }
}
