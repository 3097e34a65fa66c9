//! The `payments-server` commands: a second project provisioned from scratch while a server
//! runs over the same data dir.

use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use payments_client::{MerchantClient, SandboxCredentials};
use payments_core::auth::keys::{generate_signing_key, keyid, public_key_to_pem};
use payments_http::system::OsRandom;
use payments_server::bootstrap::CREDENTIALS_FILE;
use payments_server::testing::{free_port, test_settings};
use serde_json::{json, Value};

/// A `payments-server serve` child process, killed on drop (also when a test panics).
struct ServerProcess(Child);

impl Drop for ServerProcess {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

fn cli(data_dir: &Path, args: &[&str]) -> Value {
    let out = Command::new(env!("CARGO_BIN_EXE_payments-server"))
        .args(args)
        .arg("--data-dir")
        .arg(data_dir)
        .arg("--json")
        .env_remove("PAYMENTS_CONFIG")
        .env("USER", "tester")
        .output()
        .expect("payments-server runs");
    assert!(
        out.status.success(),
        "{args:?} failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_slice(&out.stdout).unwrap_or_else(|e| {
        panic!(
            "{args:?} printed no JSON ({e}): {}",
            String::from_utf8_lossy(&out.stdout)
        )
    })
}

#[tokio::test]
async fn cli_provisions_a_second_project_that_makes_a_signed_create() {
    let dir = tempfile::tempdir().unwrap();
    let merchant_port = free_port();
    let operator_port = free_port();
    let child = Command::new(env!("CARGO_BIN_EXE_payments-server"))
        .arg("serve")
        .arg("--data-dir")
        .arg(dir.path())
        .args(["--listen", &format!("127.0.0.1:{merchant_port}")])
        .args(["--operator-listen", &format!("127.0.0.1:{operator_port}")])
        .args(["--cabinet-listen", "127.0.0.1:0"])
        .env_remove("PAYMENTS_CONFIG")
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .expect("the server starts");
    let _server = ServerProcess(child);
    let base = format!("http://127.0.0.1:{merchant_port}");
    let client = reqwest::Client::new();
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let up = client.get(format!("{base}/readyz")).send().await;
        if up.is_ok_and(|r| r.status().is_success()) && dir.path().join(CREDENTIALS_FILE).exists() {
            break;
        }
        assert!(Instant::now() < deadline, "the server did not come up");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let creds: SandboxCredentials =
        serde_json::from_str(&std::fs::read_to_string(dir.path().join(CREDENTIALS_FILE)).unwrap())
            .unwrap();

    let d = dir.path();
    let merchant = cli(d, &["merchant", "create", "--name", "Second shop"]);
    let merchant_id = merchant["id"].as_str().unwrap();
    let project = cli(
        d,
        &[
            "project",
            "create",
            "--merchant",
            merchant_id,
            "--name",
            "Second site",
            "--lifetime",
            "1200",
            "--rate-limit",
            "20/40",
        ],
    );
    let project_id = project["id"].as_str().unwrap();
    assert_ne!(project_id, creds.project_id);
    assert_eq!(project["lifetime_seconds"], 1200);
    assert_eq!(
        project["rate_limit"],
        json!({"per_second": 20, "burst": 40})
    );
    let token = cli(
        d,
        &[
            "token",
            "issue",
            project_id,
            "--scope",
            "payments:create,payments:read",
        ],
    );
    let token_value = token["token"].as_str().unwrap();
    assert!(token_value.starts_with("nl_test_"));
    let signing_key = generate_signing_key(&OsRandom);
    let pem_path = d.join("second.pub.pem");
    std::fs::write(&pem_path, public_key_to_pem(&signing_key.verifying_key())).unwrap();
    let key = cli(
        d,
        &[
            "key",
            "register",
            project_id,
            "--file",
            pem_path.to_str().unwrap(),
        ],
    );
    assert_eq!(key["keyid"], keyid(&signing_key.verifying_key()).as_str());
    let secret = cli(d, &["callback-secret", "rotate", project_id]);
    assert!(secret["callback_secret"]
        .as_str()
        .unwrap()
        .starts_with("whsec_"));

    // The running server serves the project provisioned beside it.
    let second = MerchantClient::from_key(&base, token_value, signing_key).unwrap();
    let order =
        |id: &str| json!({"merchant_payment_id": id, "amount": "777", "payment_method": "sbp"});
    let created = second.create_payment(&order("cli-order-1")).await.unwrap();
    assert_eq!(created.status, 201, "{}", created.json);
    assert_eq!(created.json["status"], "processing");
    let payment_id = created.json["id"].as_str().unwrap();

    // Payment operations and listings through the CLI, acting on the server's payment.
    let confirmed = cli(d, &["payment", "confirm", payment_id, "--amount", "770"]);
    assert_eq!(confirmed["payment"]["status"], "completed");
    let again = Command::new(env!("CARGO_BIN_EXE_payments-server"))
        .args([
            "payment",
            "resolve",
            payment_id,
            "--status",
            "unchanged",
            "--data-dir",
        ])
        .arg(d)
        .output()
        .unwrap();
    assert!(!again.status.success());
    let stderr = String::from_utf8_lossy(&again.stderr);
    assert!(
        stderr.contains("invalid_transition") && stderr.contains("completed"),
        "{stderr}"
    );
    let tokens = cli(d, &["token", "list", project_id]);
    assert_eq!(tokens["tokens"].as_array().unwrap().len(), 1);
    assert!(!tokens.to_string().contains(token_value));
    let audit = cli(d, &["audit", "--limit", "1"]);
    assert_eq!(audit["records"][0]["action"], "payment.confirm");
    assert_eq!(audit["records"][0]["actor"], "cli:tester");

    // Revoking through the CLI takes effect in the running server at once.
    let token_id = token["id"].as_str().unwrap();
    cli(d, &["token", "revoke", project_id, token_id]);
    let refused = second.create_payment(&order("cli-order-2")).await.unwrap();
    assert_eq!(refused.status, 401);
    assert_eq!(refused.json["code"], "token_invalid");
}

/// `key register --file /dev/zero` reads at most 64 KiB + 1 byte and names the file and the
/// limit (it used to read until memory ran out: 18.9 GB RSS). The command runs under a 2 GiB
/// address-space limit so that an unlimited read fails the test quickly instead of taking the
/// machine's memory.
#[cfg(unix)]
#[tokio::test]
async fn key_register_refuses_an_endless_file_at_the_limit() {
    let dir = tempfile::tempdir().unwrap();
    let settings = test_settings(dir.path());
    payments_server::server::open_store(&settings, true)
        .expect("a fresh database")
        .close();
    let started = Instant::now();
    let out = Command::new("sh")
        .arg("-c")
        .arg("ulimit -v 2097152 && exec \"$0\" \"$@\"")
        .arg(env!("CARGO_BIN_EXE_payments-server"))
        .args([
            "key",
            "register",
            "00000000-0000-4000-8000-000000000001",
            "--file",
            "/dev/zero",
            "--create-key",
            "--data-dir",
        ])
        .arg(dir.path())
        .env_remove("PAYMENTS_CONFIG")
        .output()
        .expect("payments-server runs");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success(), "{stderr}");
    assert!(
        stderr.contains("/dev/zero is larger than 64 KiB, the limit for a PEM key or certificate"),
        "{stderr}"
    );
    assert!(started.elapsed() < Duration::from_secs(30));
}

/// Runs `payments-server` with `args` on `data_dir` and answers its exit status and stderr.
fn run(data_dir: &Path, args: &[&str]) -> (bool, String) {
    let out = Command::new(env!("CARGO_BIN_EXE_payments-server"))
        .args(args)
        .arg("--data-dir")
        .arg(data_dir)
        .env_remove("PAYMENTS_CONFIG")
        .env_remove("PAYMENTS_ENVIRONMENT")
        .env("USER", "tester")
        .output()
        .expect("payments-server runs");
    (
        out.status.success(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

/// The database file and its WAL, as bytes; a missing WAL reads as an empty one (both hold no
/// commit). The `-shm` index is left out: every reader writes its read marks there.
fn database_bytes(data_dir: &Path) -> (Vec<u8>, Vec<u8>) {
    let db = data_dir.join(payments_server::data_dir::DATABASE_FILE);
    let wal = data_dir.join(format!("{}-wal", payments_server::data_dir::DATABASE_FILE));
    (
        std::fs::read(db).unwrap(),
        std::fs::read(wal).unwrap_or_default(),
    )
}

/// An embedder's database: made by the store, with no environment recorded and no secrets key
/// (no server has started on it). A command that reads leaves it as it was, byte for byte:
/// it records no environment (which used to lock the database to the sandbox, so a production
/// server was then refused) and creates no secrets key unless given `--create-key`.
#[tokio::test]
async fn reading_commands_leave_an_embedders_database_as_it_was() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let settings = test_settings(d);
    payments_server::server::open_store(&settings, true)
        .expect("a fresh database")
        .close();
    let key = d.join(payments_server::data_dir::SECRETS_KEY_FILE);
    let before = database_bytes(d);

    // Without a key, a command refuses and says how to go on; it creates nothing.
    let (ok, stderr) = run(d, &["project", "list"]);
    assert!(!ok, "{stderr}");
    assert!(stderr.contains("no secrets key at"), "{stderr}");
    assert!(stderr.contains("--create-key"), "{stderr}");
    assert!(!key.exists(), "a command created the secrets key unasked");
    assert_eq!(database_bytes(d), before);

    // Asked, it creates the key (owner-only) and still records no environment.
    let (ok, stderr) = run(d, &["project", "list", "--create-key"]);
    assert!(ok, "{stderr}");
    assert!(key.exists());
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        let mode = std::fs::metadata(&key).unwrap().permissions().mode() & 0o777;
        assert_eq!(mode, 0o600);
    }
    assert_eq!(
        database_bytes(d),
        before,
        "`project list` wrote to the database"
    );

    let (ok, stderr) = run(d, &["status"]);
    assert!(ok, "{stderr}");
    assert_eq!(database_bytes(d), before, "`status` wrote to the database");

    // The environment is still the embedder's to record: production starts on it.
    let (ok, stderr) = run(d, &["project", "list", "--environment", "production"]);
    assert!(ok, "{stderr}");
    assert_eq!(database_bytes(d), before);
}

/// A database that holds sealed secrets refuses to run without the key that sealed them, even
/// with `--create-key`: a new key could not open them, and the fix is to restore the old one.
#[tokio::test]
async fn sealed_secrets_without_their_key_are_refused_with_the_fix() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let settings = test_settings(d);
    payments_server::server::open_store(&settings, true)
        .expect("a fresh database")
        .close();
    let merchant = cli(d, &["merchant", "create", "--name", "Shop", "--create-key"]);
    let merchant_id = merchant["id"].as_str().unwrap();
    let project = cli(
        d,
        &[
            "project",
            "create",
            "--merchant",
            merchant_id,
            "--name",
            "Site",
        ],
    );
    let project_id = project["id"].as_str().unwrap();
    cli(d, &["callback-secret", "rotate", project_id]);
    let key = d.join(payments_server::data_dir::SECRETS_KEY_FILE);
    let saved = std::fs::read(&key).unwrap();
    std::fs::remove_file(&key).unwrap();

    for args in [
        &["project", "list"][..],
        &["project", "list", "--create-key"][..],
    ] {
        let (ok, stderr) = run(d, args);
        assert!(!ok, "{args:?}: {stderr}");
        assert!(stderr.contains("sealed secret(s)"), "{args:?}: {stderr}");
        assert!(stderr.contains("restore that key"), "{args:?}: {stderr}");
        assert!(
            !key.exists(),
            "{args:?} created a key that cannot open the secrets"
        );
    }
    std::fs::write(&key, saved).unwrap();
    let (ok, stderr) = run(d, &["project", "list"]);
    assert!(ok, "the restored key opens them again: {stderr}");
}
