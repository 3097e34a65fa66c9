//! The Node.js and Python guides of `docs/integration/` run against a real server: the worked
//! example signs to the published bytes; `create` creates a payment (201), repeats it (200, the
//! same payment) and reads it back with the exact amount text; the guide's receiver gets the
//! payment's callback once it is confirmed, verifies it and keeps the amount exact;
//! `check-receiver` scores the guide's receiver on every case; `reconcile` finds the order in
//! the list, prints the payment's history, reads its events and resends the newest; and
//! `appeal`, refused a cut PDF (`422 receipt_invalid` printed, exit status 1), opens an appeal
//! about the payment with another amount and a PDF receipt (201), repeats it (200, the same
//! appeal), and once support accepts it the receiver gets the `completed` callback with the
//! new amount.
//!
//! Each test needs another language's toolchain and packages, so each is ignored in a plain
//! `cargo test` (the summary counts it, and its `#[ignore]` says what it needs);
//! `-- --include-ignored` runs them, and a missing interpreter or package then fails the test
//! with the reason. `.ci/run` installs everything: the Node.js and Python packages (`npm ci`,
//! `pip install -r requirements.txt`), and Debian's Go, PHP and Jackson for the Java guide.

use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::mpsc;
use std::time::Duration;

use payments_core::callback::signing::signature_header;
use payments_core::callback::{AddressPolicy, CallbackSecret};
use payments_server::receiver_check::{check_receiver, CheckOptions};
use payments_server::testing::{free_port, TestServer};
use serde_json::Value;

fn guides() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../docs/integration")
}

/// `Ok(())` when `program args` runs and exits 0; otherwise why not.
fn runs(program: &str, args: &[&str], dir: &Path) -> Result<(), String> {
    match Command::new(program).args(args).current_dir(dir).output() {
        Ok(o) if o.status.success() => Ok(()),
        Ok(o) => Err(format!(
            "`{program} {}` failed: {}",
            args.join(" "),
            String::from_utf8_lossy(&o.stderr).trim()
        )),
        Err(e) => Err(format!("`{program}` cannot run: {e}")),
    }
}

/// Fails the test, saying what to install, when the language cannot run.
fn require(language: &str, check: Result<(), String>) {
    if let Err(why) = check {
        panic!(
            "the {language} guide cannot run: {why}. Install what docs/integration/README.md \
             says (.ci/run does), or leave out --include-ignored and it is reported as ignored."
        );
    }
}

/// A receiver process whose processed events (stdout JSON lines with `accepted`) arrive on a
/// channel.
struct Receiver {
    child: Child,
    lines: mpsc::Receiver<Value>,
    url: String,
}

impl Receiver {
    /// Starts `command` (`{port}` in an argument is replaced; `PORT` is set too) and waits
    /// until the port accepts connections.
    fn start(command: &[&str], dir: &Path, secret: &str) -> Receiver {
        let port = free_port();
        let args: Vec<String> = command[1..]
            .iter()
            .map(|a| a.replace("{port}", &port.to_string()))
            .collect();
        let mut child = Command::new(command[0])
            .args(&args)
            .current_dir(dir)
            .env("CALLBACK_SECRETS", secret)
            .env("PORT", port.to_string())
            .stdout(Stdio::piped())
            .spawn()
            .unwrap_or_else(|e| panic!("{command:?}: {e}"));
        let stdout = child.stdout.take().expect("piped stdout");
        let (tx, lines) = mpsc::channel();
        std::thread::spawn(move || {
            for line in BufReader::new(stdout).lines() {
                let Ok(line) = line else { break };
                let Ok(value) = serde_json::from_str::<Value>(&line) else {
                    continue;
                };
                if value.get("accepted").is_some() && tx.send(value).is_err() {
                    break;
                }
            }
        });
        let deadline = std::time::Instant::now() + Duration::from_secs(60);
        while std::net::TcpStream::connect(("127.0.0.1", port)).is_err() {
            assert!(
                std::time::Instant::now() < deadline,
                "{command:?} does not listen on {port}"
            );
            if let Ok(Some(status)) = child.try_wait() {
                panic!("{command:?} exited: {status}");
            }
            std::thread::sleep(Duration::from_millis(50));
        }
        Receiver {
            child,
            lines,
            url: format!("http://127.0.0.1:{port}/callbacks"),
        }
    }

    /// The next processed event, within `wait`.
    fn next_event(&self, wait: Duration) -> Option<Value> {
        self.lines.recv_timeout(wait).ok()
    }

    /// The next processed event that `wanted` accepts, within `wait`; the others are skipped.
    fn next_event_where(&self, wait: Duration, wanted: impl Fn(&Value) -> bool) -> Option<Value> {
        let deadline = std::time::Instant::now() + wait;
        while let Some(left) = deadline.checked_duration_since(std::time::Instant::now()) {
            match self.next_event(left) {
                Some(e) if wanted(&e) => return Some(e),
                Some(_) => continue,
                None => return None,
            }
        }
        None
    }
}

impl Drop for Receiver {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// One guide's five programs, each as program and arguments.
struct Guide<'a> {
    dir: PathBuf,
    worked_example: &'a [&'a str],
    create: &'a [&'a str],
    receiver: &'a [&'a str],
    /// Finds the order by metadata in the list, prints the payment's history, reads its events
    /// and resends the newest.
    reconcile: &'a [&'a str],
    /// Finds the order as `reconcile` does and opens an appeal (`paid_other_amount`, with a
    /// receipt), then sends it again: `201`, then `200` with the same appeal.
    appeal: &'a [&'a str],
}

/// Runs one guide against `server`: worked example, create/repeat/GET, a verified callback,
/// every case of the receiver checker, reconciliation (list, history, events, resend), and an
/// appeal (opened, repeated, accepted by support: a `completed` callback with the new amount).
async fn run_guide(server: &TestServer, guide: &Guide<'_>, order: &str) {
    let dir = &guide.dir;
    let out = Command::new(guide.worked_example[0])
        .args(&guide.worked_example[1..])
        .current_dir(dir)
        .output()
        .expect("the worked example runs");
    assert!(
        out.status.success(),
        "{:?}: {}{}",
        guide.worked_example,
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );

    let creds = server.creds();
    let secret = creds.callback_secret.expose().to_string();
    let rx = Receiver::start(guide.receiver, dir, &secret);

    let credentials_file = server.dir.path().join("guide-credentials.json");
    std::fs::write(
        &credentials_file,
        serde_json::to_vec(&creds_json(server)).unwrap(),
    )
    .unwrap();
    let mut create = Command::new(guide.create[0]);
    create
        .args(&guide.create[1..])
        .arg("--credentials")
        .arg(&credentials_file)
        .args([
            "--order",
            order,
            "--amount",
            "3400.50",
            "--callback-url",
            &rx.url,
        ])
        .current_dir(dir);
    let out = tokio::task::spawn_blocking(move || create.output())
        .await
        .unwrap()
        .expect("create runs");
    assert!(
        out.status.success(),
        "{:?}: {}",
        guide.create,
        String::from_utf8_lossy(&out.stderr)
    );
    let summary: Value = serde_json::from_slice(&out.stdout).expect("one JSON summary line");
    // The order number, which `reconcile --order` takes, is printed.
    assert_eq!(summary["order"], order, "{summary}");
    assert_eq!(summary["create"], 201, "{summary}");
    assert_eq!(summary["repeat"], 200, "{summary}");
    assert_eq!(summary["same_payment"], true, "{summary}");
    assert_eq!(summary["get"], 200, "{summary}");
    assert_eq!(summary["status"], "processing", "{summary}");
    assert_eq!(
        summary["amount"], "3400.50",
        "the exact text, not 3400.5: {summary}"
    );
    assert_eq!(summary["amount_usdt"], "34.0050", "{summary}");
    let id = summary["id"].as_str().expect("id").to_string();
    // What the guide promises `create` prints for the payer: the exact amount and the
    // requisite the service issued.
    let read = server.client().get_payment(&id).await.expect("a read");
    let requisite = read.json["requisite"].as_str().expect("a requisite");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains(&format!("pay 3400.50 RUB to {requisite} (")),
        "{:?} prints the requisite: {stderr}",
        guide.create
    );

    // The payer pays: the operator confirms; the callback reaches the guide's receiver.
    let confirmed = reqwest::Client::new()
        .post(format!(
            "{}/operator/v1/payments/{id}/confirm",
            server.operator_url
        ))
        .bearer_auth(server.operator_token.expose())
        .send()
        .await
        .unwrap();
    assert_eq!(confirmed.status(), 200);
    let (rx, event) = tokio::task::spawn_blocking(move || {
        let event = rx.next_event(Duration::from_secs(20));
        (rx, event)
    })
    .await
    .unwrap();
    let event = event.expect("the receiver verified and processed the callback");
    assert_eq!(event["payment"], id.as_str(), "{event}");
    assert_eq!(event["order"], order, "{event}");
    assert_eq!(event["status"], "completed", "{event}");
    assert_eq!(event["amount"], "3400.50", "{event}");

    // Every case of the checker: signature, replay, tampering, timestamps, rotation, slow read.
    let options = CheckOptions::new(
        rx.url.clone(),
        CallbackSecret::parse(&secret).expect("whsec_"),
        AddressPolicy::LOCAL_DEVELOPMENT,
    );
    let report = check_receiver(&options).await.expect("the checker runs");
    assert!(
        report.passed(),
        "{:?}:\n{}",
        guide.receiver,
        report.render()
    );

    // Reconciliation: the order found by its metadata in the list, its events read, the
    // newest resent (a new event id) and verified by the same receiver.
    let mut reconcile = Command::new(guide.reconcile[0]);
    reconcile
        .args(&guide.reconcile[1..])
        .arg("--credentials")
        .arg(&credentials_file)
        .args(["--order", order])
        .current_dir(dir);
    let out = tokio::task::spawn_blocking(move || reconcile.output())
        .await
        .unwrap()
        .expect("reconcile runs");
    assert!(
        out.status.success(),
        "{:?}: {}",
        guide.reconcile,
        String::from_utf8_lossy(&out.stderr)
    );
    let summary: Value = serde_json::from_slice(&out.stdout).expect("one JSON summary line");
    assert_eq!(summary["listed"], serde_json::json!([id]), "{summary}");
    // The payment's history, read and printed oldest first: what happened to it, whether a
    // callback followed or not.
    assert_eq!(
        summary["history"],
        serde_json::json!(["created", "requisites_issued", "confirmed"]),
        "{summary}"
    );
    assert_eq!(summary["events"], 1, "{summary}");
    assert_eq!(summary["resent"], 202, "{summary}");
    let new_event = summary["new_event"]
        .as_str()
        .expect("an event id")
        .to_string();
    assert_ne!(
        new_event,
        event["accepted"].as_str().unwrap_or_default(),
        "{summary}"
    );
    let stderr = String::from_utf8_lossy(&out.stderr);
    let history: Vec<&str> = stderr
        .lines()
        .filter_map(|l| l.strip_prefix("history "))
        .collect();
    let printed: Vec<Vec<&str>> = history
        .iter()
        .map(|l| l.split(' ').skip(1).collect())
        .collect();
    assert_eq!(
        printed,
        [
            ["created", "created", "merchant", "3400.50"],
            ["processing", "requisites_issued", "provider", "3400.50"],
            ["completed", "confirmed", "support", "3400.50"],
        ],
        "{:?} prints the history as `at status cause source amount`: {stderr}",
        guide.reconcile
    );
    assert!(
        history
            .iter()
            .all(|l| l.split(' ').next().is_some_and(|at| at.ends_with('Z'))),
        "each history line starts with its time: {stderr}"
    );
    assert!(
        stderr.contains("automatic completed: delivered (HTTP 200)"),
        "{:?} prints the event and its attempts: {stderr}",
        guide.reconcile
    );
    // The checker's own events were printed first: skip to the resent one.
    let wanted = new_event.clone();
    let (rx, resent) = tokio::task::spawn_blocking(move || {
        let resent = rx.next_event_where(Duration::from_secs(20), |e| {
            e["accepted"] == wanted.as_str()
        });
        (rx, resent)
    })
    .await
    .unwrap();
    let resent = resent.expect("the receiver verified and processed the resent callback");
    assert_eq!(resent["payment"], id.as_str(), "{resent}");
    assert_eq!(resent["status"], "completed", "{resent}");

    // An appeal with a cut receipt: its first bytes say PDF, so the guide sends it, and the
    // service refuses it by its content (no `%%EOF`); the guide says why and exits 1.
    let cut = server.dir.path().join("guide-receipt-cut.pdf");
    std::fs::write(&cut, b"%PDF-1.4\n1 0 obj\n<<>>\n").unwrap();
    let out = run_appeal(guide, &credentials_file, order, &cut).await;
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(
        out.status.code(),
        Some(1),
        "{:?} exits 1 on an error answer: {stderr}",
        guide.appeal
    );
    assert!(
        stderr.contains("422 receipt_invalid: "),
        "{:?} prints the code and the message: {stderr}",
        guide.appeal
    );

    // An appeal: the payer says they sent 3390.50, with a receipt (a small valid PDF). The
    // guide finds the order as `reconcile` does, opens the appeal (201) and sends it again
    // with the same idempotency key (200, the same appeal).
    let receipt = server.dir.path().join("guide-receipt.pdf");
    std::fs::write(
        &receipt,
        b"%PDF-1.4\n1 0 obj\n<<>>\nendobj\ntrailer\n<<>>\n%%EOF\n",
    )
    .unwrap();
    let out = run_appeal(guide, &credentials_file, order, &receipt).await;
    assert!(
        out.status.success(),
        "{:?}: {}",
        guide.appeal,
        String::from_utf8_lossy(&out.stderr)
    );
    let summary: Value = serde_json::from_slice(&out.stdout).expect("one JSON summary line");
    assert_eq!(summary["order"], order, "{summary}");
    assert_eq!(summary["appeal"], 201, "{summary}");
    assert_eq!(summary["repeat"], 200, "{summary}");
    assert_eq!(summary["same_appeal"], true, "{summary}");
    assert!(
        matches!(summary["state"].as_str(), Some("open" | "under_review")),
        "{summary}"
    );
    assert_eq!(
        summary["claimed_amount"], "3390.50",
        "the exact text, not 3390.5: {summary}"
    );
    let appeal_id = summary["id"].as_str().expect("an appeal id").to_string();
    // What the service stored: one appeal of the payment, from the merchant, with the receipt.
    let stored = reqwest::Client::new()
        .get(format!(
            "{}/operator/v1/appeals/{appeal_id}",
            server.operator_url
        ))
        .bearer_auth(server.operator_token.expose())
        .send()
        .await
        .unwrap();
    assert_eq!(stored.status(), 200);
    let stored: Value = stored.json().await.unwrap();
    assert_eq!(stored["payment_id"], id.as_str(), "{stored}");
    assert_eq!(stored["source"], "merchant", "{stored}");
    assert_eq!(stored["reason"], "paid_other_amount", "{stored}");
    assert_eq!(
        stored["receipts"][0]["content_type"], "application/pdf",
        "{stored}"
    );

    // Support finds the transfer: the payment is completed again with 3390.50, and the
    // receiver gets that callback (after the checker's and the resent ones).
    let accepted = reqwest::Client::new()
        .post(format!(
            "{}/operator/v1/appeals/{appeal_id}/accept",
            server.operator_url
        ))
        .bearer_auth(server.operator_token.expose())
        .json(&serde_json::json!({"amount": "3390.50"}))
        .send()
        .await
        .unwrap();
    assert_eq!(accepted.status(), 200);
    // The payment's events seen so far (the confirmation's and the resent one) are skipped.
    let wanted = id.clone();
    let seen = [event["accepted"].clone(), Value::from(new_event.clone())];
    let recheck = tokio::task::spawn_blocking(move || {
        rx.next_event_where(Duration::from_secs(20), |e| {
            e["payment"] == wanted.as_str() && !seen.contains(&e["accepted"])
        })
    })
    .await
    .unwrap()
    .expect("the receiver verified and processed the accepted appeal's callback");
    assert_eq!(recheck["order"], order, "{recheck}");
    assert_eq!(recheck["status"], "completed", "{recheck}");
    assert_eq!(
        recheck["amount"], "3390.50",
        "the amount support found: {recheck}"
    );
}

/// Runs the guide's `appeal` for `order`: the payer sent 3390.50, `receipt` is their receipt.
async fn run_appeal(
    guide: &Guide<'_>,
    credentials: &Path,
    order: &str,
    receipt: &Path,
) -> std::process::Output {
    let mut appeal = Command::new(guide.appeal[0]);
    appeal
        .args(&guide.appeal[1..])
        .arg("--credentials")
        .arg(credentials)
        .args(["--order", order, "--amount", "3390.50", "--receipt"])
        .arg(receipt)
        .current_dir(&guide.dir);
    tokio::task::spawn_blocking(move || appeal.output())
        .await
        .unwrap()
        .expect("appeal runs")
}

/// The credentials file as the sandbox writes it, with this server's URLs.
fn creds_json(server: &TestServer) -> Value {
    let path = server.dir.path().join("sandbox-credentials.json");
    let mut v: Value =
        serde_json::from_slice(&std::fs::read(path).expect("the credentials file")).unwrap();
    v["base_url"] = server.merchant_url.clone().into();
    v["operator_url"] = server.operator_url.clone().into();
    v
}

async fn local_callback_server() -> TestServer {
    TestServer::start(|s| s.callbacks.allow_local = true).await
}

#[tokio::test]
#[ignore = "needs Node.js with docs/integration/node's packages (npm ci)"]
async fn the_node_guide_runs_against_a_live_server() {
    let dir = guides().join("node");
    require(
        "Node.js",
        runs("node", &["--version"], &dir).and_then(|()| {
            runs(
                "node",
                &[
                    "-e",
                    "import('http-message-signatures').then(() => import('lossless-json'))",
                ],
                &dir,
            )
        }),
    );
    let server = local_callback_server().await;
    let guide = Guide {
        dir,
        worked_example: &["node", "worked-example.mjs"],
        create: &["node", "create.mjs"],
        receiver: &["node", "receiver.mjs"],
        reconcile: &["node", "reconcile.mjs"],
        appeal: &["node", "appeal.mjs"],
    };
    run_guide(&server, &guide, "guide-node-1").await;
    server.stop().await;
}

#[tokio::test]
#[ignore = "needs Python 3 with docs/integration/python/requirements.txt"]
async fn the_python_guide_runs_against_a_live_server() {
    let dir = guides().join("python");
    require(
        "Python",
        runs(
            "python3",
            &["-c", "import http_message_signatures, requests"],
            &dir,
        ),
    );
    let server = local_callback_server().await;
    let guide = Guide {
        dir,
        worked_example: &["python3", "worked_example.py"],
        create: &["python3", "create.py"],
        receiver: &["python3", "receiver.py"],
        reconcile: &["python3", "reconcile.py"],
        appeal: &["python3", "appeal.py"],
    };
    run_guide(&server, &guide, "guide-python-1").await;
    server.stop().await;
}

/// docs/callbacks.md's claim: Stripe's library verifies our callbacks when its header is
/// assembled as `t=<X-Callback-Timestamp>,<X-Callback-Signature>`, a rotation's two `v1=`
/// values included; and it refuses a tampered body, a wrong secret and a stale timestamp.
#[test]
#[ignore = "needs Python 3 with docs/integration/python/requirements.txt (stripe)"]
fn stripe_verifies_our_callbacks() {
    let dir = guides().join("python");
    require(
        "Python (stripe)",
        runs("python3", &["-c", "import stripe"], &dir),
    );
    let current =
        CallbackSecret::parse("whsec_c2VjcmV0LWN1cnJlbnQtMDEyMzQ1Njc4OWFiY2RlZg==").unwrap();
    let previous =
        CallbackSecret::parse("whsec_cHJldmlvdXMtc2VjcmV0LTAxMjM0NTY3ODlhYmNkZWY=").unwrap();
    let body = r#"{"id":"0b9d3a52-6f0e-4c1b-8f7d-2a4e5c6b7d8e","event_id":"5d2f7c1e-9a3b-4e6d-8c0f-1b2a3c4d5e6f","status":"completed","amount":3400.50}"#;
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_secs() as i64;
    let verify = |body: &str, timestamp: i64, signature: String, secret: &CallbackSecret| {
        let input = serde_json::json!({
            "body": body, "timestamp": timestamp.to_string(),
            "signature": signature, "secret": secret.expose(),
        });
        let mut child = Command::new("python3")
            .arg("stripe_compat.py")
            .current_dir(&dir)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .spawn()
            .expect("python3 runs");
        use std::io::Write;
        child
            .stdin
            .take()
            .unwrap()
            .write_all(input.to_string().as_bytes())
            .unwrap();
        let out = child.wait_with_output().unwrap();
        (
            out.status.success(),
            String::from_utf8_lossy(&out.stdout).trim().to_string(),
        )
    };
    let one = signature_header(&[&current], now, body.as_bytes());
    let rotation = signature_header(&[&current, &previous], now, body.as_bytes());
    assert_eq!(
        verify(body, now, one.clone(), &current),
        (true, "verified".into())
    );
    assert!(
        verify(body, now, rotation.clone(), &current).0,
        "{rotation}"
    );
    assert!(
        verify(body, now, rotation, &previous).0,
        "the old secret during a rotation"
    );
    let tampered = body.replace("3400.50", "3400.51");
    assert!(!verify(&tampered, now, one.clone(), &current).0);
    assert!(!verify(body, now, one, &previous).0, "another secret");
    let stale = now - 330;
    let old = signature_header(&[&current], stale, body.as_bytes());
    assert!(!verify(body, stale, old, &current).0, "older than 300 s");

    // A real callback body of a payment with metadata (text that is not ASCII, quotes),
    // serialised by the service: Stripe's library verifies it as it came.
    let mut request = payments_core::testing::fixtures::request(
        "order-md-1",
        "3400.50",
        payments_core::payment::PaymentMethod::Sbp,
    );
    request.metadata = payments_core::payment::Metadata::from_json(&serde_json::json!({
        "order": "A-1001", "note": "Заказ «срочно», \"VIP\""
    }))
    .expect("valid metadata");
    let payment = payments_core::testing::fixtures::payment(
        "0b9d3a52-6f0e-4c1b-8f7d-2a4e5c6b7d8e".parse().unwrap(),
        "7a1e2b3c-4d5e-4f60-8a9b-0c1d2e3f4a5b".parse().unwrap(),
        &request,
        payments_core::payment::Flow::RuntimeLive,
        payments_core::Timestamp::from_unix_millis(now * 1000),
        Duration::from_secs(900),
    );
    let event = payments_core::event::CallbackEvent::new(
        &payment,
        "5d2f7c1e-9a3b-4e6d-8c0f-1b2a3c4d5e6f".parse().unwrap(),
        payments_core::event::EventKind::Automatic,
        payments_core::Timestamp::from_unix_millis(now * 1000),
    );
    let with_metadata = String::from_utf8(event.body.clone()).unwrap();
    assert!(
        with_metadata.contains(r#""metadata":{"note":"Заказ «срочно», \"VIP\"","order":"A-1001"}"#),
        "{with_metadata}"
    );
    let signed = signature_header(&[&current], now, event.body.as_slice());
    assert_eq!(
        verify(&with_metadata, now, signed.clone(), &current),
        (true, "verified".into()),
        "{with_metadata}"
    );
    let altered = with_metadata.replace("A-1001", "A-1002");
    assert!(
        !verify(&altered, now, signed, &current).0,
        "metadata is signed"
    );
}

/// The Go, PHP and Java guides need their toolchains (Go 1.19+, PHP 8.1+ with sodium, a JDK
/// 17+ with Jackson under /usr/share/java as Debian's libjackson2-databind-java installs it;
/// `.ci/run` installs Debian's `golang-go`, `php-cli` and `libjackson2-databind-java`):
/// `cargo test -p payments-examples --test integration_guides -- --ignored`.
async fn run_with_toolchain(language: &str, probe: (&str, &[&str]), guide: Guide<'_>, order: &str) {
    require(language, runs(probe.0, probe.1, &guide.dir));
    let server = local_callback_server().await;
    run_guide(&server, &guide, order).await;
    server.stop().await;
}

#[tokio::test]
#[ignore = "needs Go 1.19+ (Debian golang-go)"]
async fn the_go_guide_runs_against_a_live_server() {
    let guide = Guide {
        dir: guides().join("go"),
        worked_example: &["go", "run", ".", "worked-example"],
        create: &["go", "run", ".", "create"],
        // Not `go run`: killing it would leave the program it built running.
        receiver: &[
            "sh",
            "-c",
            "go build -o \"${TMPDIR:-/tmp}/payments-go-guide\" . && exec \"${TMPDIR:-/tmp}/payments-go-guide\" receiver",
        ],
        reconcile: &["go", "run", ".", "reconcile"],
        appeal: &["go", "run", ".", "appeal"],
    };
    run_with_toolchain("Go", ("go", &["version"]), guide, "guide-go-1").await;
}

#[tokio::test]
#[ignore = "needs PHP 8.1+ with sodium (Debian php-cli)"]
async fn the_php_guide_runs_against_a_live_server() {
    let guide = Guide {
        dir: guides().join("php"),
        worked_example: &["php", "payments.php", "worked-example"],
        create: &["php", "payments.php", "create"],
        receiver: &["php", "-S", "127.0.0.1:{port}", "receiver.php"],
        reconcile: &["php", "payments.php", "reconcile"],
        appeal: &["php", "payments.php", "appeal"],
    };
    run_with_toolchain(
        "PHP",
        ("php", &["-r", "sodium_crypto_sign_keypair();"]),
        guide,
        "guide-php-1",
    )
    .await;
}

const JACKSON: &str =
    "/usr/share/java/jackson-databind.jar:/usr/share/java/jackson-core.jar:/usr/share/java/jackson-annotations.jar";

#[tokio::test]
#[ignore = "needs a JDK 17+ and Jackson (Debian libjackson2-databind-java)"]
async fn the_java_guide_runs_against_a_live_server() {
    let guide = Guide {
        dir: guides().join("java"),
        worked_example: &["java", "-cp", JACKSON, "Payments.java", "worked-example"],
        create: &["java", "-cp", JACKSON, "Payments.java", "create"],
        receiver: &["java", "-cp", JACKSON, "Payments.java", "receiver"],
        reconcile: &["java", "-cp", JACKSON, "Payments.java", "reconcile"],
        appeal: &["java", "-cp", JACKSON, "Payments.java", "appeal"],
    };
    let jackson = match JACKSON.split(':').find(|jar| !Path::new(jar).is_file()) {
        Some(missing) => Err(format!(
            "{missing} is missing (Debian libjackson2-databind-java)"
        )),
        None => Ok(()),
    };
    require("Java", jackson);
    run_with_toolchain("Java", ("java", &["-version"]), guide, "guide-java-1").await;
}
