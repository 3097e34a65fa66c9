//! The first deploy of several nodes as `docs/operations.md` gives it ("First deploy, step by
//! step"), run from its own shell blocks on a clean machine: the test takes the section's
//! `sh` blocks out of the document and runs them with bash, in order, changing nothing in
//! them. Only the values of step 0 are the test's own (the test checks that the document
//! sets exactly the names the test gives): a role and a database made by step 1 on the
//! test's PostgreSQL (dropped at the end), three nodes on 127.0.0.1 with free ports and
//! directories of their own, and the example upstream (`payments_examples::upstream`) as the
//! payment company, in this process, reporting to the second node.
//!
//! The "clean machine" is an empty directory and an empty environment: every block runs with
//! only `PATH` (the built `payments-server` first), `HOME` (an empty directory), `LANG`, the
//! values of step 0 and, for psql, `PGPASSWORD` when `DATABASE_URL` has a password. A block's
//! first line says where it runs: `# once` blocks run one after the other in one shell (on
//! the first node: they pass on variables), `# on each node` blocks once per node, each in a
//! fresh shell with that node's values, a block that runs `payments-server serve` in the
//! background (its log kept). `# the values ...` is step 0 itself, which the test replaces.
//!
//! Afterwards the test reads the payment the procedure made through every node's merchant
//! and operator APIs itself (the same completed payment on each), and counts the payments in
//! the new database.
//!
//! Seen failing with step 2 (the key) deleted from the document (step 3's `install` finds no
//! `secrets.key`), and with `key_file` deleted from step 3's settings (each node makes a key
//! of its own in its data dir: the first to serve records its key, the other two refuse the
//! database and their readiness checks give up). Deleting step 4 (`migrate`) alone does not
//! fail it: the first `serve` applies the migrations itself, as documented.
//!
//! Needs `DATABASE_URL` naming a role that may create roles and databases, and `psql`,
//! `curl`, `jq`, `openssl` 3 on `PATH` (ignored in a plain `cargo test`).

use std::collections::BTreeSet;
use std::fmt::Write as _;
use std::os::unix::process::CommandExt as _;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use payments_core::callback::CallbackSecret;
use payments_examples::upstream::{self, ExampleUpstream};
use payments_server::testing::free_port;
use payments_store_postgres::testing::database_url;
use serde_json::Value;

const SECRET: &str = "whsec_ZXhhbXBsZS11cHN0cmVhbS1zZWNyZXQtZm9yLXRlc3Rz";
const SECTION: &str = "### First deploy, step by step";
const NODES: usize = 3;
/// The whole procedure, once built, takes about 3 s; a node that never gets ready costs its
/// readiness check's 30 s.
const PROCEDURE_LIMIT: Duration = Duration::from_secs(120);

/// The repository root.
fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .expect("the workspace root")
        .to_path_buf()
}

/// Where a block runs, from its first line.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Where {
    /// Step 0: the values, replaced by the test's.
    Values,
    /// One shell, block after block, on the first node.
    Once,
    /// Every node, each in a fresh shell.
    EachNode,
    /// Every node, in the background: it starts the server.
    EachNodeServer,
}

/// The `sh` blocks of the section, each with where it runs. Every fenced block of the section
/// is an `sh` block with a where-it-runs comment, or the test fails: nothing is left out
/// silently.
fn blocks(doc: &str) -> Vec<(Where, String)> {
    let start = doc
        .find(&format!("\n{SECTION}\n"))
        .unwrap_or_else(|| panic!("docs/operations.md has no section `{SECTION}`"));
    let body = &doc[start + SECTION.len() + 2..];
    let end = body
        .find("\n## ")
        .into_iter()
        .chain(body.find("\n### "))
        .min()
        .unwrap_or(body.len());
    let mut out = Vec::new();
    let mut lines = body[..end].lines();
    while let Some(line) = lines.next() {
        let Some(info) = line.strip_prefix("```") else {
            continue;
        };
        assert_eq!(
            info, "sh",
            "a block of `{SECTION}` that is not `sh`: {line}"
        );
        let mut text = String::new();
        for l in lines.by_ref() {
            if l == "```" {
                break;
            }
            text.push_str(l);
            text.push('\n');
        }
        let first = text.lines().next().unwrap_or_default();
        let place = if first.starts_with("# the values") {
            Where::Values
        } else if first.starts_with("# once") {
            Where::Once
        } else if first.starts_with("# on each node") {
            if text
                .lines()
                .any(|l| l.trim_start().starts_with("payments-server serve"))
            {
                Where::EachNodeServer
            } else {
                Where::EachNode
            }
        } else {
            panic!("a block of `{SECTION}` without a where-it-runs comment:\n{text}")
        };
        out.push((place, text));
    }
    out
}

/// The names step 0 exports: `export A=1 B="x y"   # comment` gives `A`, `B`.
fn exported_names(values: &str) -> BTreeSet<String> {
    let mut names = BTreeSet::new();
    for line in values.lines() {
        let Some(rest) = line.trim().strip_prefix("export ") else {
            assert!(
                line.trim().is_empty() || line.trim().starts_with('#'),
                "step 0 has a line that is not `export ...`: {line}"
            );
            continue;
        };
        // Words outside quotes, up to a comment.
        let mut word = String::new();
        let mut quote = None;
        let mut words = Vec::new();
        for c in rest.chars() {
            match (quote, c) {
                (None, '#') if word.is_empty() => break,
                (None, '"' | '\'') => quote = Some(c),
                (Some(q), c) if c == q => quote = None,
                (None, c) if c.is_whitespace() => {
                    if !word.is_empty() {
                        words.push(std::mem::take(&mut word));
                    }
                }
                (_, c) => word.push(c),
            }
        }
        if !word.is_empty() {
            words.push(word);
        }
        for w in words {
            let name = w.split('=').next().unwrap_or_default();
            names.insert(name.to_string());
        }
    }
    names
}

/// `export NAME='value'` lines (single quotes, so a value is taken as it is).
fn exports(values: &[(&str, String)]) -> String {
    let mut out = String::new();
    for (name, value) in values {
        assert!(!value.contains('\''), "{name}: {value}");
        let _ = writeln!(out, "export {name}='{value}'");
    }
    out
}

struct NodePorts {
    merchant: u16,
    operator: u16,
    cabinet: u16,
    upstream: u16,
}

/// What to undo whatever happens: the processes the procedure started (its process group)
/// and the role and database step 1 made.
struct Cleanup {
    group: Option<u32>,
    psql_env: Vec<(String, String)>,
    db: String,
    role: String,
}

impl Cleanup {
    fn stop_processes(&mut self) {
        let Some(group) = self.group.take() else {
            return;
        };
        let signal = |sig: &str| {
            Command::new("kill")
                .args([sig, "--", &format!("-{group}")])
                .stderr(Stdio::null())
                .status()
                .is_ok_and(|s| s.success())
        };
        if !signal("-TERM") {
            return;
        }
        let deadline = Instant::now() + Duration::from_secs(10);
        while Instant::now() < deadline {
            if !signal("-0") {
                return;
            }
            std::thread::sleep(Duration::from_millis(100));
        }
        signal("-KILL");
    }
}

impl Drop for Cleanup {
    fn drop(&mut self) {
        self.stop_processes();
        let status = Command::new("psql")
            .env_clear()
            .envs(self.psql_env.iter().map(|(k, v)| (k.as_str(), v.as_str())))
            .env("PATH", std::env::var("PATH").unwrap_or_default())
            .args(["-v", "ON_ERROR_STOP=1", "-q", "-d", "postgres"])
            .arg("-c")
            .arg(format!(
                "DROP DATABASE IF EXISTS \"{}\" WITH (FORCE)",
                self.db
            ))
            .arg("-c")
            .arg(format!("DROP ROLE IF EXISTS \"{}\"", self.role))
            .status();
        if !status.is_ok_and(|s| s.success()) {
            eprintln!(
                "first_deploy: could not drop the database {} and the role {}",
                self.db, self.role
            );
        }
    }
}

/// The last `lines` lines of a file, for a failure's message.
fn tail(path: &Path, lines: usize) -> String {
    let text = std::fs::read_to_string(path).unwrap_or_default();
    let all: Vec<&str> = text.lines().collect();
    all[all.len().saturating_sub(lines)..].join("\n")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs PostgreSQL (DATABASE_URL as a role that may create roles and databases), psql, curl, jq and openssl"]
async fn the_documented_first_deploy_serves_a_paid_payment_through_every_node() {
    let doc = std::fs::read_to_string(root().join("docs/operations.md")).expect("the doc reads");
    let blocks = blocks(&doc);
    let values_blocks: Vec<&String> = blocks
        .iter()
        .filter(|(w, _)| *w == Where::Values)
        .map(|(_, t)| t)
        .collect();
    assert_eq!(values_blocks.len(), 1, "one block of values (step 0)");
    for needed in [Where::Once, Where::EachNode, Where::EachNodeServer] {
        assert!(
            blocks.iter().any(|(w, _)| *w == needed),
            "no {needed:?} block in `{SECTION}`"
        );
    }

    // The superuser's connection, for psql's own variables.
    let admin = url::Url::parse(&database_url()).expect("DATABASE_URL is a URL");
    let mut psql_env = vec![
        (
            "PGHOST".to_string(),
            admin.host_str().unwrap_or("127.0.0.1").to_string(),
        ),
        (
            "PGPORT".to_string(),
            admin.port().unwrap_or(5432).to_string(),
        ),
        ("PGUSER".to_string(), admin.username().to_string()),
    ];
    if let Some(password) = admin.password() {
        psql_env.push(("PGPASSWORD".to_string(), password.to_string()));
    }

    // The clean machine: an empty directory and home; the harness's files beside it. Made
    // before the cleanup below, so dropped after it has stopped the nodes.
    let top = tempfile::tempdir().expect("a temporary directory");
    let machine = top.path().join("machine");
    let home = top.path().join("home");
    let harness = top.path().join("harness");
    for dir in [&machine, &home, &harness] {
        std::fs::create_dir(dir).expect("a directory");
    }

    let unique = format!(
        "fd_{}_{}",
        std::process::id(),
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .expect("after 1970")
            .as_millis()
    );
    let mut cleanup = Cleanup {
        group: None,
        psql_env: psql_env.clone(),
        db: unique.clone(),
        role: unique.clone(),
    };
    let mut seed = [0u8; 18];
    getrandom::getrandom(&mut seed).expect("the OS gives random bytes");
    // Letters and digits, as step 0 asks (it goes into a URL).
    let password = hex::encode(seed);

    // The payment company: the example upstream, reporting to the second node.
    let ports: Vec<NodePorts> = (0..NODES)
        .map(|_| NodePorts {
            merchant: free_port(),
            operator: free_port(),
            cabinet: free_port(),
            upstream: free_port(),
        })
        .collect();
    let up = ExampleUpstream::new(CallbackSecret::parse(SECRET).expect("the secret parses"));
    up.set_notify_url(&format!(
        "http://127.0.0.1:{}/upstream/v1/notifications",
        ports[1].upstream
    ));
    let upstream_base = upstream::start(up.clone(), ([127, 0, 0, 1], 0).into())
        .await
        .expect("the example upstream listens");

    let node_url = |i: usize| format!("http://127.0.0.1:{}", ports[i].merchant);
    let mut common: Vec<(&str, String)> = psql_env
        .iter()
        .map(|(k, v)| (k.as_str(), v.clone()))
        .collect();
    common.extend([
        ("DB_NAME", unique.clone()),
        ("DB_USER", unique.clone()),
        ("DB_PASSWORD", password.clone()),
        ("UPSTREAM_URL", format!("{upstream_base}/requisites")),
        ("UPSTREAM_RATES_URL", format!("{upstream_base}/rates")),
        ("UPSTREAM_SECRET", SECRET.to_string()),
        ("PUBLIC_URL", node_url(0)),
        (
            "NODES",
            (0..NODES).map(node_url).collect::<Vec<_>>().join(" "),
        ),
        ("REPO", root().display().to_string()),
    ]);
    let node_values = |i: usize| -> Vec<(&str, String)> {
        let dir = machine.join(format!("node{}", i + 1));
        vec![
            ("CONF", dir.join("etc").display().to_string()),
            ("DATA", dir.join("data").display().to_string()),
            (
                "MERCHANT_LISTEN",
                format!("127.0.0.1:{}", ports[i].merchant),
            ),
            (
                "OPERATOR_LISTEN",
                format!("127.0.0.1:{}", ports[i].operator),
            ),
            ("CABINET_LISTEN", format!("127.0.0.1:{}", ports[i].cabinet)),
            (
                "UPSTREAM_LISTEN",
                format!("127.0.0.1:{}", ports[i].upstream),
            ),
        ]
    };

    // Step 0 names what the test gives, no more and no less (PGPASSWORD is psql's own).
    let documented = exported_names(values_blocks[0]);
    let given: BTreeSet<String> = common
        .iter()
        .chain(node_values(0).iter())
        .map(|(k, _)| k.to_string())
        .filter(|k| k != "PGPASSWORD")
        .collect();
    assert_eq!(
        documented, given,
        "step 0 of `{SECTION}` sets other names than the test gives"
    );

    // The shell of each node: the values, then the block.
    let bin = Path::new(env!("CARGO_BIN_EXE_payments-server"))
        .parent()
        .expect("the binary's directory")
        .to_path_buf();
    let path = format!(
        "{}:{}",
        bin.display(),
        std::env::var("PATH").unwrap_or_default()
    );
    for i in 0..NODES {
        let mut values = common.clone();
        values.extend(node_values(i));
        std::fs::write(harness.join(format!("node{}.env", i + 1)), exports(&values))
            .expect("the node's values");
    }
    let fresh_shell = |n: usize, block: &Path| {
        format!(
            "env -i PATH=\"$PATH\" HOME=\"$HOME\" LANG=C.UTF-8 bash --noprofile --norc -c \
             '. \"{h}/node{n}.env\"; set -euo pipefail; . \"{b}\"'",
            h = harness.display(),
            b = block.display(),
        )
    };
    let mut script = format!(
        "set -euo pipefail\ncd \"{}\"\n. \"{}/node1.env\"\n",
        machine.display(),
        harness.display()
    );
    for (k, (place, text)) in blocks.iter().enumerate() {
        let file = harness.join(format!("block{k}.sh"));
        std::fs::write(&file, text).expect("the block's file");
        let _ = writeln!(script, "echo '== block {k} ({place:?})'");
        match place {
            Where::Values => {}
            Where::Once => {
                let _ = writeln!(script, ". \"{}\"", file.display());
            }
            Where::EachNode => {
                for n in 1..=NODES {
                    let _ = writeln!(script, "{}", fresh_shell(n, &file));
                }
            }
            Where::EachNodeServer => {
                for n in 1..=NODES {
                    let _ = writeln!(
                        script,
                        "{} >\"{}/node{n}.log\" 2>&1 &",
                        fresh_shell(n, &file),
                        harness.display()
                    );
                }
            }
        }
    }
    // What the test reads back itself.
    let _ = writeln!(
        script,
        "printf '%s\\n' \"$PAYMENT_ID\" \"$MERCHANT_TOKEN\" \"$OPERATOR_TOKEN\" >\"{}/result\"",
        harness.display()
    );
    let script_file = harness.join("procedure.sh");
    std::fs::write(&script_file, &script).expect("the script");

    // Run it: its own process group, so that the nodes it leaves running stop with it.
    let log = harness.join("procedure.log");
    let started = Instant::now();
    let mut child: Child = Command::new("bash")
        .arg("--noprofile")
        .arg("--norc")
        .arg(&script_file)
        .env_clear()
        .env("PATH", &path)
        .env("HOME", &home)
        .env("LANG", "C.UTF-8")
        .current_dir(&machine)
        .stdin(Stdio::null())
        .stdout(std::fs::File::create(&log).expect("the log"))
        .stderr(std::fs::File::create(harness.join("procedure.err")).expect("the log"))
        .process_group(0)
        .spawn()
        .expect("bash starts");
    cleanup.group = Some(child.id());
    let status = loop {
        if let Some(status) = child.try_wait().expect("the procedure's status") {
            break Some(status);
        }
        if started.elapsed() > PROCEDURE_LIMIT {
            let _ = child.kill();
            let _ = child.wait();
            break None;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    };
    let report = || {
        let mut out = format!(
            "the procedure's output:\n{}\n\nits errors:\n{}\n",
            tail(&log, 80),
            tail(&harness.join("procedure.err"), 80)
        );
        for n in 1..=NODES {
            let _ = write!(
                out,
                "\nnode {n}'s log:\n{}\n",
                tail(&harness.join(format!("node{n}.log")), 30)
            );
        }
        out
    };
    match status {
        Some(s) if s.success() => {}
        Some(s) => panic!("the documented procedure failed ({s}):\n{}", report()),
        None => panic!(
            "the documented procedure ran past {PROCEDURE_LIMIT:?}:\n{}",
            report()
        ),
    }
    eprintln!(
        "first_deploy: the procedure ran in {:.1} s; {}",
        started.elapsed().as_secs_f64(),
        report()
    );

    // The test's own reading: the same completed payment through every node.
    let result = std::fs::read_to_string(harness.join("result")).expect("the result");
    let mut result = result.lines();
    let payment_id = result.next().expect("PAYMENT_ID").to_string();
    let merchant_token = result.next().expect("MERCHANT_TOKEN").to_string();
    let operator_token = result.next().expect("OPERATOR_TOKEN").to_string();
    assert!(
        merchant_token.starts_with("nl_live_"),
        "a production token: {merchant_token}"
    );
    let http = reqwest::Client::new();
    let mut seen: Vec<Value> = Vec::new();
    for (i, p) in ports.iter().enumerate() {
        let merchant: Value = http
            .get(format!(
                "http://127.0.0.1:{}/api/v1/payments/{payment_id}",
                p.merchant
            ))
            .bearer_auth(&merchant_token)
            .send()
            .await
            .and_then(|r| r.error_for_status())
            .unwrap_or_else(|e| panic!("node {}: {e}\n{}", i + 1, report()))
            .json()
            .await
            .expect("a JSON payment");
        assert_eq!(merchant["id"], payment_id.as_str(), "node {}", i + 1);
        assert_eq!(
            merchant["status"],
            "completed",
            "node {}: {merchant}",
            i + 1
        );
        assert_eq!(merchant["is_test"], false, "node {}: {merchant}", i + 1);
        let operator: Value = http
            .get(format!(
                "http://127.0.0.1:{}/operator/v1/payments/{payment_id}",
                p.operator
            ))
            .bearer_auth(&operator_token)
            .send()
            .await
            .and_then(|r| r.error_for_status())
            .unwrap_or_else(|e| panic!("node {}'s operator API: {e}", i + 1))
            .json()
            .await
            .expect("a JSON payment");
        assert_eq!(
            operator["status"],
            "completed",
            "node {}: {operator}",
            i + 1
        );
        seen.push(merchant);
    }
    for (i, other) in seen.iter().enumerate().skip(1) {
        assert_eq!(
            other,
            &seen[0],
            "node {} answers another payment than node 1",
            i + 1
        );
    }
    assert_eq!(up.issued(), 1, "the upstream issued one requisite");

    // In the database step 1 made, as the role it made: the one payment.
    let mut own = admin.clone();
    own.set_path(&format!("/{unique}"));
    own.set_username(&unique).expect("a user name");
    own.set_password(Some(&password)).expect("a password");
    let (client, connection) = tokio_postgres::connect(own.as_str(), tokio_postgres::NoTls)
        .await
        .expect("the deployed database takes its role's connection");
    let connection = tokio::spawn(connection);
    let row = client
        .query_one("SELECT count(*) FROM payments", &[])
        .await
        .expect("the payments table");
    assert_eq!(
        row.get::<_, i64>(0),
        1,
        "one payment in the deployed database"
    );
    drop(client);
    let _ = connection.await;
    cleanup.stop_processes();
}
