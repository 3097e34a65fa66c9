//! A node whose standard error nobody reads (a pipe never drained, a stuck journald) keeps
//! answering: its log lines queue in memory, and once the queue is full they are dropped and
//! counted (`payments_log_lines_dropped_total`) instead of blocking the runtime on a write.
//!
//! The flood: at `PAYMENTS_LOG=debug` every connection that opens with the HTTP/2 preface
//! (cleartext HTTP/2 is not spoken) is closed with a DEBUG line of the listener's, a line that
//! is not one of the queued per-request lines before issue 61. A pipe takes 64 KiB; after that
//! a node writing its lines itself stops.
//!
//! A test binary of its own: it loads the machine, which would slow the tests beside it.

use std::io::{Read, Write};
use std::net::TcpStream;
use std::time::{Duration, Instant};

#[path = "ops/support.rs"]
mod support;

use crate::support::{sample, serve_with, wait_ready};

/// Connections that each cost the node one log line.
const CONNECTIONS: usize = 3000;
/// How long `/healthz` may take to answer, at most, while the flood lasts.
const HEALTHZ_WITHIN: Duration = Duration::from_secs(2);
/// The cleartext HTTP/2 preface.
const PREFACE: &[u8] = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n";

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn healthz_answers_while_stderr_is_never_read_and_the_dropped_lines_are_counted() {
    let dir = tempfile::tempdir().unwrap();
    let env = [("PAYMENTS_LOG", "debug"), ("PAYMENTS_LOG__QUEUE_KIB", "64")];
    let (mut server, base, operator) = serve_with(&dir.path().join("data"), "127.0.0.1", &[], &env);
    wait_ready(&mut server, &base).await;
    // Nobody reads it until the end.
    let stderr = server.0.stderr.take().expect("stderr is piped");

    let addr = base.strip_prefix("http://").unwrap().to_string();
    let flood = std::thread::spawn(move || (0..CONNECTIONS).filter(|_| h2c(&addr)).count());
    let client = reqwest::Client::builder()
        .timeout(HEALTHZ_WITHIN)
        .build()
        .unwrap();
    let (mut checks, mut slowest) = (0_u32, Duration::ZERO);
    while !flood.is_finished() {
        let started = Instant::now();
        let answer = client.get(format!("{base}/healthz")).send().await;
        let status = answer.as_ref().map(|r| r.status().as_u16());
        assert!(
            status.as_ref().is_ok_and(|s| *s == 200),
            "/healthz did not answer 200 within {HEALTHZ_WITHIN:?} (check {checks}): {status:?}"
        );
        slowest = slowest.max(started.elapsed());
        checks += 1;
    }
    let closed = flood.join().unwrap();
    assert_eq!(
        closed, CONNECTIONS,
        "every flood connection was closed by the node"
    );

    let metrics = client
        .get(format!("{operator}/metrics"))
        .send()
        .await
        .expect("/metrics answers")
        .text()
        .await
        .unwrap();
    let dropped = sample(&metrics, "payments_log_lines_dropped_total").expect("the counter");
    eprintln!(
        "{CONNECTIONS} connections, {checks} /healthz checks, slowest {slowest:?}, \
         {dropped} lines dropped"
    );
    assert!(dropped > 0.0, "a stalled stderr drops lines: {dropped}");

    // Once stderr moves again, the node says how many lines it dropped.
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || read_lines(stderr, &tx));
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        let left = deadline.saturating_duration_since(Instant::now());
        match rx.recv_timeout(left) {
            Ok(line) if line.contains("log lines dropped") => break,
            Ok(_) => {}
            Err(e) => panic!("no line about the dropped lines within 10 s: {e}"),
        }
    }
}

/// Opens a connection with the HTTP/2 preface and waits for the node to close it; whether it
/// did (within 10 s).
fn h2c(addr: &str) -> bool {
    let Ok(mut stream) = TcpStream::connect(addr) else {
        return false;
    };
    let _ = stream.set_read_timeout(Some(Duration::from_secs(10)));
    if stream.write_all(PREFACE).is_err() {
        return false;
    }
    let mut rest = Vec::new();
    // A reset counts as closed too.
    match stream.read_to_end(&mut rest) {
        Ok(_) => true,
        Err(e) => {
            e.kind() != std::io::ErrorKind::WouldBlock && e.kind() != std::io::ErrorKind::TimedOut
        }
    }
}

/// Sends each line of `stderr` to `tx` until it ends.
fn read_lines(stderr: std::process::ChildStderr, tx: &std::sync::mpsc::Sender<String>) {
    use std::io::BufRead;
    for line in std::io::BufReader::new(stderr).lines() {
        let Ok(line) = line else { return };
        if tx.send(line).is_err() {
            return;
        }
    }
}
