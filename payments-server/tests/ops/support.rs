//! A callback receiver whose answer status a test sets, the operator API, `/metrics`, the
//! `payments-server` binary and the test database's server.

#![allow(dead_code)]

use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicU16, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use axum::extract::State;
use axum::http::{HeaderMap, StatusCode};
use axum::routing::post;
use axum::Router;
use payments_server::testing::TestServer;
use serde_json::{json, Value};

/// One callback the receiver got: its event id and body.
#[derive(Debug, Clone)]
pub struct Got {
    pub event_id: String,
    pub body: Value,
}

/// A plain-HTTP receiver on 127.0.0.1 answering the status in `status` (allowed with
/// `allow_local_callbacks`).
#[derive(Clone)]
pub struct Receiver {
    pub url: String,
    pub status: Arc<AtomicU16>,
    pub got: Arc<Mutex<Vec<Got>>>,
}

#[derive(Clone)]
struct ReceiverState {
    status: Arc<AtomicU16>,
    got: Arc<Mutex<Vec<Got>>>,
}

async fn receive(State(st): State<ReceiverState>, headers: HeaderMap, body: String) -> StatusCode {
    let event_id = headers
        .get("x-callback-event-id")
        .and_then(|v| v.to_str().ok())
        .unwrap_or_default()
        .to_string();
    st.got.lock().unwrap().push(Got {
        event_id,
        body: serde_json::from_str(&body).unwrap_or(Value::Null),
    });
    StatusCode::from_u16(st.status.load(Ordering::SeqCst)).unwrap()
}

impl Receiver {
    /// A receiver answering `status`.
    pub async fn start(status: u16) -> Receiver {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let port = listener.local_addr().unwrap().port();
        let st = ReceiverState {
            status: Arc::new(AtomicU16::new(status)),
            got: Arc::default(),
        };
        let app = Router::new()
            .route("/callbacks", post(receive))
            .with_state(st.clone());
        tokio::spawn(async move {
            let _ = axum::serve(listener, app).await;
        });
        Receiver {
            url: format!("http://127.0.0.1:{port}/callbacks"),
            status: st.status,
            got: st.got,
        }
    }

    /// Every callback received so far.
    pub fn received(&self) -> Vec<Got> {
        self.got.lock().unwrap().clone()
    }
}

/// Waits up to `secs` for `check` to hold.
pub async fn eventually<F, Fut>(secs: u64, what: &str, mut check: F)
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = bool>,
{
    let deadline = Instant::now() + Duration::from_secs(secs);
    while !check().await {
        assert!(Instant::now() < deadline, "timed out waiting for {what}");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// An operator API call with the server's token; status and JSON.
pub async fn op(s: &TestServer, method: &str, path: &str, body: Option<Value>) -> (u16, Value) {
    op_with(s, s.operator_token.expose(), method, path, body).await
}

/// An operator API call with `token`.
pub async fn op_with(
    s: &TestServer,
    token: &str,
    method: &str,
    path: &str,
    body: Option<Value>,
) -> (u16, Value) {
    let client = reqwest::Client::new();
    let url = format!("{}{path}", s.operator_url);
    let mut req = client
        .request(method.parse().unwrap(), url)
        .bearer_auth(token);
    if let Some(b) = body {
        req = req.json(&b);
    }
    let resp = req.send().await.expect("the operator API answers");
    let status = resp.status().as_u16();
    let text = resp.text().await.unwrap();
    (status, serde_json::from_str(&text).unwrap_or(Value::Null))
}

/// A signed create of the demo project with `callback_url`; the payment id.
pub async fn create_with_callback(s: &TestServer, order: &str, callback_url: &str) -> String {
    let created = s
        .client()
        .create_payment(&json!({
            "merchant_payment_id": order,
            "amount": "3400",
            "payment_method": "sbp",
            "callback_url": callback_url,
        }))
        .await
        .expect("the create is answered");
    assert_eq!(created.status.as_u16(), 201, "{}", created.json);
    created.json["id"].as_str().unwrap().to_string()
}

/// `/metrics` text of the operator listener (no token).
pub async fn scrape(s: &TestServer) -> String {
    reqwest::get(format!("{}/metrics", s.operator_url))
        .await
        .expect("metrics answer")
        .text()
        .await
        .unwrap()
}

/// The value of the sample `name` (a full series name, labels included) in `text`.
pub fn sample(text: &str, name: &str) -> Option<f64> {
    text.lines()
        .find_map(|l| l.strip_prefix(name).and_then(|r| r.strip_prefix(' ')))
        .map(|v| v.trim().parse().expect("a number"))
}

pub use payments_server::testing::free_port;

/// A `payments-server` child process, killed on drop.
pub struct ServerProcess(pub Child);

impl Drop for ServerProcess {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// `payments-server serve` on `data_dir` with free ports for all three listeners (merchant,
/// operator, cabinet: none on the sandbox's defaults); stderr piped. Returns the process,
/// the merchant base URL and the operator base URL.
pub fn serve(data_dir: &Path, extra: &[&str]) -> (ServerProcess, String, String) {
    serve_with(data_dir, "127.0.0.1", extra, &[])
}

/// [`serve`] with the operator listener on `operator_ip` (the URL returned still names
/// 127.0.0.1, which reaches an unspecified address too) and extra environment variables.
pub fn serve_with(
    data_dir: &Path,
    operator_ip: &str,
    extra: &[&str],
    env: &[(&str, &str)],
) -> (ServerProcess, String, String) {
    let (merchant, operator) = (free_port(), free_port());
    let mut command = Command::new(env!("CARGO_BIN_EXE_payments-server"));
    command
        .arg("serve")
        .arg("--data-dir")
        .arg(data_dir)
        .args(["--listen", &format!("127.0.0.1:{merchant}")])
        .args(["--operator-listen", &format!("{operator_ip}:{operator}")]);
    if !extra.contains(&"--cabinet-listen") {
        command.args(["--cabinet-listen", &format!("127.0.0.1:{}", free_port())]);
    }
    let child = command
        .args(extra)
        .env_remove("PAYMENTS_CONFIG")
        .env_remove("PAYMENTS_LOG")
        .env("PAYMENTS_CALLBACKS__ALLOW_LOCAL", "1")
        .envs(env.iter().copied())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .expect("payments-server starts");
    (
        ServerProcess(child),
        format!("http://127.0.0.1:{merchant}"),
        format!("http://127.0.0.1:{operator}"),
    )
}

/// Waits until `base/readyz` answers 200. A server that exits first (a port taken meanwhile, a
/// refused start) fails the test at once with its stderr, instead of after the minute's wait.
pub async fn wait_ready(server: &mut ServerProcess, base: &str) {
    use std::io::Read;
    let client = reqwest::Client::new();
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        let ready = client
            .get(format!("{base}/readyz"))
            .send()
            .await
            .is_ok_and(|r| r.status().is_success());
        if ready {
            return;
        }
        if let Some(status) = server.0.try_wait().expect("the server's status") {
            let mut err = String::new();
            if let Some(mut stderr) = server.0.stderr.take() {
                let _ = stderr.read_to_string(&mut err);
            }
            panic!("the server exited ({status}) before it was ready: {err}");
        }
        assert!(
            Instant::now() < deadline,
            "timed out waiting for the server to be ready"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// Runs a `payments-server` command on `data_dir`; its exit status, stdout and stderr.
pub fn cli(data_dir: &Path, args: &[&str]) -> (bool, String, String) {
    let out = Command::new(env!("CARGO_BIN_EXE_payments-server"))
        .args(args)
        .arg("--data-dir")
        .arg(data_dir)
        .env_remove("PAYMENTS_CONFIG")
        .env("USER", "oncall")
        .output()
        .expect("payments-server runs");
    (
        out.status.success(),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

/// [`cli`] with `--json`, which must succeed; its JSON.
pub fn cli_json(data_dir: &Path, args: &[&str]) -> Value {
    let mut all = args.to_vec();
    all.push("--json");
    let (ok, out, err) = cli(data_dir, &all);
    assert!(ok, "{args:?} failed: {err}");
    serde_json::from_str(&out).unwrap_or_else(|e| panic!("{args:?}: no JSON ({e}): {out}"))
}

/// Kills the server (after a moment for its last lines to reach stderr) and answers its log:
/// the text and the JSON lines in it.
pub async fn stop_and_read_log(mut server: ServerProcess) -> (String, Vec<Value>) {
    use std::io::Read;
    tokio::time::sleep(Duration::from_millis(300)).await;
    server.0.kill().unwrap();
    let mut log = String::new();
    server
        .0
        .stderr
        .take()
        .unwrap()
        .read_to_string(&mut log)
        .unwrap();
    let lines = log
        .lines()
        .filter_map(|l| serde_json::from_str(l).ok())
        .collect();
    (log, lines)
}

#[allow(unused_imports)]
pub use payments_store_postgres::testing::{database_url, fresh_schema};

/// A client of the database at `url`.
pub async fn sql(url: &str) -> tokio_postgres::Client {
    let (client, connection) = tokio_postgres::connect(url, tokio_postgres::NoTls)
        .await
        .expect("connect to the database");
    tokio::spawn(connection);
    client
}

/// The test database's server (`PAYMENTS_TEST_PG_CTL`, `PAYMENTS_TEST_PG_DATA`; `.ci/run`
/// sets both): stopped and started again with its `pg_ctl` (as the user `postgres`) with the
/// options it was started with (`postmaster.opts`), or frozen with SIGSTOP.
pub struct Database {
    pg_ctl: String,
    data: String,
    options: String,
}

impl Database {
    pub fn from_env() -> Database {
        let var = |name: &str| {
            std::env::var(name).unwrap_or_else(|_| {
                panic!(
                    "{name} is not set: the database restart needs the test server's pg_ctl \
                     and data dir (.ci/run sets both)"
                )
            })
        };
        let (pg_ctl, data) = (var("PAYMENTS_TEST_PG_CTL"), var("PAYMENTS_TEST_PG_DATA"));
        // `<postgres binary> "-D" "<data>" "-p" "<port>" ...`: what follows the data dir.
        let opts = std::fs::read_to_string(format!("{data}/postmaster.opts"))
            .expect("the server's postmaster.opts");
        let options = opts
            .split_once(&format!("\"{data}\""))
            .map(|(_, rest)| rest.trim().to_string())
            .expect("postmaster.opts names the data dir");
        Database {
            pg_ctl,
            data,
            options,
        }
    }

    fn pg_ctl(&self, args: &[&str]) {
        let status = Command::new("runuser")
            .args(["-u", "postgres", "--", &self.pg_ctl, "-D", &self.data])
            .args(["-w", "-t", "60"])
            .args(args)
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .status()
            .expect("runuser pg_ctl");
        assert!(status.success(), "pg_ctl {args:?} failed");
    }

    /// Fast shutdown: every session cut.
    pub fn stop(&self) {
        self.pg_ctl(&["-m", "fast", "stop"]);
    }

    pub fn start(&self) {
        self.pg_ctl(&["-l", "/dev/null", "-o", &self.options, "start"]);
    }

    /// SIGSTOPs the postmaster and every process it started (a hung server: it answers
    /// nothing, not even an error); SIGCONT when the guard is dropped.
    pub fn freeze(&self) -> Frozen {
        let pid_file = std::fs::read_to_string(format!("{}/postmaster.pid", self.data))
            .expect("the server's postmaster.pid");
        let postmaster = pid_file.lines().next().expect("a pid").trim().to_string();
        let children = Command::new("pgrep")
            .args(["-P", &postmaster])
            .output()
            .expect("pgrep");
        let mut pids: Vec<String> = String::from_utf8_lossy(&children.stdout)
            .split_whitespace()
            .map(str::to_string)
            .collect();
        pids.insert(0, postmaster);
        assert!(
            pids.len() > 1,
            "the server has processes besides the postmaster"
        );
        signal("-STOP", &pids);
        Frozen(pids)
    }
}

/// A frozen database's processes, sent SIGCONT when dropped.
pub struct Frozen(Vec<String>);

impl Drop for Frozen {
    fn drop(&mut self) {
        signal("-CONT", &self.0);
    }
}

fn signal(which: &str, pids: &[String]) {
    let status = Command::new("kill")
        .arg(which)
        .args(pids)
        .status()
        .expect("kill");
    assert!(status.success(), "kill {which} {pids:?}");
}
