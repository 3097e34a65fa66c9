//! `check-receiver` over real sockets: a correct receiver passes every case; receivers broken
//! in one way (accepts anything, no deduplication, no timestamp check, a large answer) fail
//! exactly the cases that show it; the callback policy refuses local destinations unless the
//! development setting allows them; and the real binary prints the table and exits non-zero on
//! a failure.

use std::collections::{BTreeSet, HashSet};
use std::net::SocketAddr;
use std::process::Command;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use axum::body::Bytes;
use axum::extract::State;
use axum::http::{HeaderMap, StatusCode};
use axum::routing::post;
use axum::Router;
use payments_core::callback::{
    AddressPolicy, CallbackSecret, CallbackVerifier, SIGNATURE_HEADER, TIMESTAMP_HEADER,
};
use payments_core::Clock;
use payments_http::system::{OsRandom, SystemClock};
use payments_server::receiver_check::{check_receiver, Case, CheckError, CheckOptions};

/// How a test receiver is broken.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Flaw {
    /// None: verifies, deduplicates, answers briefly.
    None,
    /// Answers 200 to anything.
    AcceptsAnything,
    /// Processes every delivery; a repeated event_id fails its unique key (409).
    NoDedup,
    /// Verifies the signature but not the timestamp's age.
    NoTimestampCheck,
    /// Answers 200 with an 8 KiB body.
    LargeAnswer,
}

struct TestReceiver {
    flaw: Flaw,
    verifier: CallbackVerifier,
    seen: Mutex<HashSet<String>>,
}

async fn callback(
    State(r): State<Arc<TestReceiver>>,
    headers: HeaderMap,
    body: Bytes,
) -> (StatusCode, String) {
    if r.flaw == Flaw::AcceptsAnything {
        return (StatusCode::OK, "ok".into());
    }
    let header = |name: &str| {
        headers
            .get(name)
            .and_then(|v| v.to_str().ok())
            .unwrap_or("")
            .to_owned()
    };
    if let Err(e) = r.verifier.verify(
        &header(TIMESTAMP_HEADER),
        &header(SIGNATURE_HEADER),
        &body,
        SystemClock.now(),
    ) {
        return (StatusCode::UNAUTHORIZED, e.to_string());
    }
    let event: serde_json::Value = match serde_json::from_slice(&body) {
        Ok(v) => v,
        Err(e) => return (StatusCode::BAD_REQUEST, e.to_string()),
    };
    let event_id = event["event_id"].as_str().unwrap_or("").to_owned();
    let first = r.seen.lock().expect("lock").insert(event_id);
    match (first, r.flaw) {
        (false, Flaw::NoDedup) => (StatusCode::CONFLICT, "UNIQUE constraint failed".into()),
        (_, Flaw::LargeAnswer) => (StatusCode::OK, "x".repeat(8192)),
        _ => (StatusCode::OK, "ok".into()),
    }
}

/// A receiver with `flaw` on 127.0.0.1; its callback URL.
async fn receiver(flaw: Flaw, secret: &CallbackSecret) -> String {
    let mut verifier = CallbackVerifier::new(vec![secret.clone()]);
    if flaw == Flaw::NoTimestampCheck {
        verifier = verifier.with_tolerance(Duration::from_secs(u64::from(u32::MAX)));
    }
    let state = Arc::new(TestReceiver {
        flaw,
        verifier,
        seen: Mutex::new(HashSet::new()),
    });
    let app = Router::new()
        .route("/callbacks", post(callback))
        .with_state(state);
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
        .await
        .expect("bind");
    let addr: SocketAddr = listener.local_addr().expect("addr");
    tokio::spawn(async move {
        axum::serve(listener, app).await.expect("serves");
    });
    format!("http://{addr}/callbacks")
}

fn secret() -> CallbackSecret {
    CallbackSecret::generate(&OsRandom)
}

async fn failed(flaw: Flaw) -> BTreeSet<&'static str> {
    let secret = secret();
    let url = receiver(flaw, &secret).await;
    let report = check_receiver(&CheckOptions::new(
        url,
        secret,
        AddressPolicy::LOCAL_DEVELOPMENT,
    ))
    .await
    .expect("the checker runs");
    assert_eq!(report.results.len(), Case::ALL.len());
    report.failed().into_iter().map(Case::name).collect()
}

#[tokio::test]
async fn a_correct_receiver_passes_every_case() {
    let secret = secret();
    let url = receiver(Flaw::None, &secret).await;
    let report = check_receiver(&CheckOptions::new(
        url,
        secret,
        AddressPolicy::LOCAL_DEVELOPMENT,
    ))
    .await
    .expect("the checker runs");
    assert!(report.passed(), "{}", report.render());
    let text = report.render();
    assert!(text.contains("10 of 10 cases passed"), "{text}");
    assert!(!text.contains("FAIL"), "{text}");
}

#[tokio::test]
async fn a_receiver_that_accepts_anything_fails_every_rejection_case() {
    assert_eq!(
        failed(Flaw::AcceptsAnything).await,
        BTreeSet::from([
            "tampered body",
            "wrong secret",
            "stale timestamp",
            "non-numeric timestamp"
        ])
    );
}

#[tokio::test]
async fn a_receiver_without_dedup_fails_the_replay() {
    assert_eq!(failed(Flaw::NoDedup).await, BTreeSet::from(["replay"]));
}

#[tokio::test]
async fn a_receiver_without_a_timestamp_check_fails_the_stale_case() {
    assert_eq!(
        failed(Flaw::NoTimestampCheck).await,
        BTreeSet::from(["stale timestamp"])
    );
}

#[tokio::test]
async fn a_large_answer_fails_the_large_response_case() {
    assert_eq!(
        failed(Flaw::LargeAnswer).await,
        BTreeSet::from(["large response"])
    );
}

#[tokio::test]
async fn the_callback_policy_refuses_local_destinations() {
    let secret = secret();
    let url = receiver(Flaw::None, &secret).await;
    for refused in [url.as_str(), "http://example.com/cb", "https://10.0.0.1/cb"] {
        let result = check_receiver(&CheckOptions::new(
            refused,
            secret.clone(),
            AddressPolicy::STRICT,
        ))
        .await;
        assert!(
            matches!(result, Err(CheckError::Refused(_))),
            "{refused}: {result:?}"
        );
    }
    // A name resolving to a refused address is refused at connect time: every case fails.
    let lookup = payments_http::resolver::StaticLookup::new()
        .with("receiver.test", ["127.0.0.1".parse().expect("ip")]);
    let mut options = CheckOptions::new("https://receiver.test/cb", secret, AddressPolicy::STRICT);
    options.lookup = Arc::new(lookup);
    let report = check_receiver(&options).await.expect("sent");
    assert_eq!(report.failed().len(), Case::ALL.len());
    assert!(
        report.results[0].got.contains("forbidden address"),
        "{}",
        report.render()
    );
}

/// Runs `payments-server check-receiver` in an empty directory.
async fn run_binary(
    url: String,
    secret: &CallbackSecret,
    allow_local: bool,
) -> std::process::Output {
    let dir = tempfile::tempdir().expect("tempdir");
    let secret = secret.expose().to_owned();
    tokio::task::spawn_blocking(move || {
        let mut cmd = Command::new(env!("CARGO_BIN_EXE_payments-server"));
        cmd.args(["check-receiver", "--url", &url, "--secret", &secret])
            .current_dir(dir.path())
            .env_remove("PAYMENTS_CONFIG")
            .env_remove("PAYMENTS_CALLBACKS__ALLOW_LOCAL");
        if allow_local {
            cmd.env("PAYMENTS_CALLBACKS__ALLOW_LOCAL", "1");
        }
        cmd.output().expect("the binary runs")
    })
    .await
    .expect("joined")
}

#[tokio::test]
async fn the_binary_prints_the_table_and_exits_non_zero_on_a_failure() {
    let secret = secret();
    let good = receiver(Flaw::None, &secret).await;
    let out = run_binary(good.clone(), &secret, true).await;
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{stdout}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(stdout.contains("10 of 10 cases passed"), "{stdout}");

    let broken = receiver(Flaw::AcceptsAnything, &secret).await;
    let out = run_binary(broken, &secret, true).await;
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(!out.status.success(), "{stdout}");
    let row = stdout
        .lines()
        .find(|l| l.starts_with("wrong secret"))
        .expect("a row per case");
    assert!(
        row.contains("4xx") && row.contains("200") && row.ends_with("FAIL"),
        "{row}"
    );
    assert!(
        stdout.contains("FAIL wrong secret: expected 4xx, got 200"),
        "{stdout}"
    );
    assert!(stdout.contains("fix: answer 401"), "{stdout}");
    assert!(stdout.contains("6 of 10 cases passed"), "{stdout}");

    // Without the development setting a loopback receiver is refused before anything is sent.
    let out = run_binary(good, &secret, false).await;
    assert!(!out.status.success());
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains("refused by the callback policy"),
        "{stderr}"
    );
    assert!(out.stdout.is_empty());
}
