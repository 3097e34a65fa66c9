//! The data dir at rest: the directory and the database files are owner-only, and callback
//! secrets are sealed with a key kept beside or outside it, so that neither another user of
//! the machine nor a copy of the database alone reveals them.

#![cfg(unix)]

use payments_directory::DirectoryAccess;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::Command;

use payments_core::ProjectId;
use payments_server::bootstrap::CREDENTIALS_FILE;
use payments_server::config::{Durability, Settings};
use payments_server::data_dir::{DATABASE_FILE, SECRETS_KEY_FILE};
use payments_server::server::{open_service, open_store, Setup};
use payments_server::testing::TestServer;

fn mode(path: &Path) -> u32 {
    std::fs::metadata(path)
        .unwrap_or_else(|e| panic!("{}: {e}", path.display()))
        .permissions()
        .mode()
        & 0o777
}

fn settings(data_dir: &Path) -> Settings {
    let mut settings = payments_server::testing::test_settings(data_dir);
    settings.store.synchronous = Durability::Normal;
    settings
}

fn sibling(db: &Path, suffix: &str) -> PathBuf {
    let mut name = db.as_os_str().to_owned();
    name.push(suffix);
    PathBuf::from(name)
}

/// A sandbox server over `data_dir` (not yet existing): stopped after its bootstrap, so the
/// database holds the demo project's callback secret. Returns the project and the secret.
async fn bootstrapped(data_dir: &Path) -> (ProjectId, String) {
    let path = data_dir.to_path_buf();
    let server = TestServer::start(|s| s.data_dir = path).await;
    let project = server.project();
    let secret = server.creds().callback_secret.expose().clone();
    server.stop().await;
    (project, secret)
}

/// Every byte of the data dir's files, for "the secret is nowhere in them".
fn all_bytes(dir: &Path) -> Vec<u8> {
    let mut out = Vec::new();
    for entry in std::fs::read_dir(dir).unwrap() {
        let path = entry.unwrap().path();
        if path.is_file() && path.file_name().unwrap() != CREDENTIALS_FILE {
            out.extend(std::fs::read(&path).unwrap());
        }
    }
    out
}

fn contains(haystack: &[u8], needle: &str) -> bool {
    haystack
        .windows(needle.len())
        .any(|w| w == needle.as_bytes())
}

async fn signing_secret(settings: &Settings, project: ProjectId) -> Result<String, String> {
    let opened = open_service(settings, Setup::CommandCreatingKey)
        .await
        .map_err(|e| e.to_string())?;
    let result = opened.service.callbacks().signing_secrets(project).await;
    opened.store.close();
    result
        .map(|ring| ring.current().secret.expose().to_string())
        .map_err(|e| e.to_string())
}

#[tokio::test]
async fn a_fresh_data_dir_is_owner_only() {
    let root = tempfile::tempdir().unwrap();
    let data = root.path().join("data");
    let server = TestServer::start(|s| s.data_dir = data.clone()).await;
    let db = data.join(DATABASE_FILE);
    // While the server runs, WAL mode keeps both -wal and -shm; SQLite gives them the
    // database's mode.
    assert_eq!(mode(&data), 0o700);
    assert_eq!(mode(&db), 0o600);
    assert_eq!(mode(&sibling(&db, "-wal")), 0o600);
    assert_eq!(mode(&sibling(&db, "-shm")), 0o600);
    assert_eq!(mode(&data.join(SECRETS_KEY_FILE)), 0o600);
    assert_eq!(mode(&data.join(CREDENTIALS_FILE)), 0o600);
    server.stop().await;
}

#[tokio::test]
async fn an_existing_world_readable_database_is_tightened_at_open() {
    let dir = tempfile::tempdir().unwrap();
    let settings = settings(dir.path());
    open_store(&settings, true).unwrap().close();
    let db = dir.path().join(DATABASE_FILE);
    // A database written by an older version: 0644, with a 0644 WAL beside it.
    std::fs::set_permissions(&db, std::fs::Permissions::from_mode(0o644)).unwrap();
    std::fs::write(sibling(&db, "-wal"), b"").unwrap();
    std::fs::set_permissions(sibling(&db, "-wal"), std::fs::Permissions::from_mode(0o644)).unwrap();
    let store = open_store(&settings, false).unwrap();
    assert_eq!(mode(&db), 0o600);
    assert_eq!(mode(&sibling(&db, "-wal")), 0o600);
    assert_eq!(mode(&sibling(&db, "-shm")), 0o600);
    store.close();
}

/// The stored value is sealed: neither the row nor any file of the data dir (but the
/// credentials file, which exists to hand the secret over) holds the secret; a copy of the
/// database without the key file cannot sign with it, and with the key file it can.
#[tokio::test]
async fn the_database_holds_callback_secrets_sealed() {
    let root = tempfile::tempdir().unwrap();
    let data = root.path().join("data");
    let (project, secret) = bootstrapped(&data).await;
    let body = secret.trim_start_matches("whsec_");

    let conn = rusqlite::Connection::open(data.join(DATABASE_FILE)).unwrap();
    let rows: Vec<String> = conn
        .prepare("SELECT secret FROM callback_secrets")
        .unwrap()
        .query_map([], |r| r.get(0))
        .unwrap()
        .collect::<Result<_, _>>()
        .unwrap();
    drop(conn);
    // The demo project's and the test project's.
    assert_eq!(rows.len(), 2);
    assert!(rows.iter().all(|r| r.starts_with("v1.")), "{rows:?}");
    assert!(!rows.iter().any(|r| r.contains(body)), "{rows:?}");
    assert!(!contains(&all_bytes(&data), body));
    assert_eq!(
        signing_secret(&settings(&data), project).await.unwrap(),
        secret
    );

    // The database copied alone: opening the copy is refused, even where a key may be created
    // (a new key would open nothing sealed with the original one); no key is made.
    let copy = root.path().join("copy");
    std::fs::create_dir(&copy).unwrap();
    std::fs::copy(data.join(DATABASE_FILE), copy.join(DATABASE_FILE)).unwrap();
    let refused = signing_secret(&settings(&copy), project).await.unwrap_err();
    assert!(
        refused.contains("holds 2 sealed secret(s)") && refused.contains("restore that key"),
        "{refused}"
    );
    assert!(!copy.join(SECRETS_KEY_FILE).exists());
    // A server start over the copy (a node without the shared key file) is refused the same.
    let serve = open_service(&settings(&copy), Setup::Serve)
        .await
        .unwrap_err()
        .to_string();
    assert!(serve.contains("holds 2 sealed secret(s)"), "{serve}");
    assert!(!copy.join(SECRETS_KEY_FILE).exists());
    assert!(!contains(&all_bytes(&copy), body));
    // With the original key file (secrets_key_file) the copy is a working backup.
    let mut restored = settings(&copy);
    restored.secrets.key_file = Some(data.join(SECRETS_KEY_FILE));
    assert_eq!(signing_secret(&restored, project).await.unwrap(), secret);
}

/// The message of a start (or command) over `settings` that is refused.
async fn refused(settings: &Settings, setup: Setup) -> String {
    match open_service(settings, setup).await {
        Ok(opened) => {
            opened.store.close();
            panic!("{} opened with another key", settings.data_dir.display())
        }
        Err(e) => e.to_string(),
    }
}

/// A node whose key file is not the one the database's values are sealed with (a second node
/// that created its own key, a replaced file) is refused at start and by commands, naming both
/// key ids and the fix; nothing is recorded by the refused start.
#[tokio::test]
async fn a_node_with_another_key_is_refused() {
    let root = tempfile::tempdir().unwrap();
    let data = root.path().join("data");
    let (project, secret) = bootstrapped(&data).await;
    let key_a = payments_server::data_dir::read_key_file(&data.join(SECRETS_KEY_FILE)).unwrap();
    let key_b = root.path().join("other.key");
    let b = payments_server::data_dir::create_key_file(&key_b, &payments_http::system::OsRandom)
        .unwrap();

    let mut other = settings(&data);
    other.secrets.key_file = Some(key_b.clone());
    for setup in [Setup::Serve, Setup::Command] {
        let message = refused(&other, setup).await;
        assert!(
            message.contains(&format!("this node's sealing key is {}", b.id()))
                && message.contains(&format!("sealed with key {}", key_a.id()))
                && message.contains("Copy the key file of a node that serves this database"),
            "{message}"
        );
    }
    // The database's own key still opens it.
    assert_eq!(
        signing_secret(&settings(&data), project).await.unwrap(),
        secret
    );
}

/// Two nodes started at once on one fresh PostgreSQL database, each with a data dir of its
/// own and no key file: each creates a key, one records its key first, and the other is
/// refused (before, both served and each answered 500 for the other's payments).
#[tokio::test]
#[ignore = "needs PostgreSQL: DATABASE_URL"]
async fn two_nodes_that_each_create_a_key_cannot_both_serve_one_database() {
    let base = payments_store_postgres::testing::database_url();
    let url = payments_store_postgres::testing::fresh_schema(&base).await;
    let root = tempfile::tempdir().unwrap();
    let node = |name: &str| {
        let mut s = settings(&root.path().join(name));
        s.store.database_url = Some(url.clone().into());
        s
    };
    let (one, two) = (node("one"), node("two"));
    let (a, b) = tokio::join!(
        open_service(&one, Setup::Serve),
        open_service(&two, Setup::Serve)
    );
    let (served, message) = match (a, b) {
        (Ok(s), Err(e)) | (Err(e), Ok(s)) => (s, e.to_string()),
        (Ok(_), Ok(_)) => panic!("both nodes serve with keys of their own"),
        (Err(a), Err(b)) => panic!("neither node serves: {a}; {b}"),
    };
    served.store.close();
    assert!(message.contains("is not this database's"), "{message}");
    let id = |s: &Settings| {
        payments_server::data_dir::read_key_file(&s.data_dir.join(SECRETS_KEY_FILE))
            .unwrap()
            .id()
            .to_string()
    };
    assert_ne!(id(&one), id(&two), "each node created a key of its own");
    // The refused node serves once it has the first node's key file.
    let (first, second) = if message.contains(&format!("sealed with key {}", id(&one))) {
        (&one, &two)
    } else {
        (&two, &one)
    };
    std::fs::copy(
        first.data_dir.join(SECRETS_KEY_FILE),
        second.data_dir.join(SECRETS_KEY_FILE),
    )
    .unwrap();
    open_service(second, Setup::Serve)
        .await
        .unwrap()
        .store
        .close();
}

/// Rotation as docs/operations.md describes it: a new key file as `secrets_key_file`, the old
/// one in `secrets_previous_key_files`, `payments-server callback-secret reseal`, then the old
/// key removed; the secret signs throughout.
#[tokio::test]
async fn a_key_rotation_with_reseal_keeps_the_secrets() {
    let root = tempfile::tempdir().unwrap();
    let data = root.path().join("data");
    let (project, secret) = bootstrapped(&data).await;
    let key_a = data.join(SECRETS_KEY_FILE);
    let key_b = root.path().join("keys").join("secrets-b.key");

    let mut rotating = settings(&data);
    rotating.secrets.key_file = Some(key_b.clone());
    rotating.secrets.previous_key_files = vec![key_a.clone()];
    // Created at first use, owner-only.
    assert_eq!(signing_secret(&rotating, project).await.unwrap(), secret);
    assert_eq!(mode(&key_b), 0o600);

    let out = Command::new(env!("CARGO_BIN_EXE_payments-server"))
        .args(["callback-secret", "reseal", "--json", "--data-dir"])
        .arg(&data)
        .env_remove("PAYMENTS_CONFIG")
        .env("PAYMENTS_SECRETS__KEY_FILE", &key_b)
        .env("PAYMENTS_SECRETS__PREVIOUS_KEY_FILES", &key_a)
        .env("USER", "tester")
        .output()
        .expect("payments-server runs");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let report: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    // The demo project's secret and the test project's.
    assert_eq!(report["resealed"], 2, "{report}");
    assert_eq!(report["already_current"], 0, "{report}");

    // The re-seal left nothing under the old key: a node with only the old key is refused.
    let mut old_only = settings(&data);
    old_only.secrets.key_file = Some(key_a.clone());
    let message = refused(&old_only, Setup::Serve).await;
    assert!(message.contains("is not this database's"), "{message}");

    std::fs::remove_file(&key_a).unwrap();
    let mut after = settings(&data);
    after.secrets.key_file = Some(key_b);
    assert_eq!(signing_secret(&after, project).await.unwrap(), secret);
}

/// A data dir from before sealing: its plaintext secret still signs, and `reseal` seals it.
#[tokio::test]
async fn a_plaintext_secret_from_an_older_data_dir_signs_and_is_resealed() {
    let root = tempfile::tempdir().unwrap();
    let data = root.path().join("data");
    let (project, _) = bootstrapped(&data).await;
    let old = "whsec_b2xkZXItZGF0YS1kaXItcGxhaW50ZXh0LXNlY3JldA==";
    let conn = rusqlite::Connection::open(data.join(DATABASE_FILE)).unwrap();
    conn.execute("UPDATE callback_secrets SET secret = ?1", [old])
        .unwrap();
    // Nor did such a data dir record a key id.
    conn.execute("DELETE FROM settings WHERE name = 'secrets.key_id'", [])
        .unwrap();
    drop(conn);
    std::fs::remove_file(data.join(SECRETS_KEY_FILE)).unwrap();

    let settings = settings(&data);
    assert_eq!(signing_secret(&settings, project).await.unwrap(), old);
    let opened = open_service(&settings, Setup::Command).await.unwrap();
    let report = opened
        .service
        .directory()
        .reseal_callback_secrets(&payments_core::service::Actor("test".into()))
        .await
        .unwrap();
    // Closing checkpoints the WAL into the database file.
    opened.store.close();
    // The demo project's and the test project's.
    assert_eq!(report.resealed, 2);
    assert!(!contains(
        &all_bytes(&data),
        old.trim_start_matches("whsec_")
    ));
    assert_eq!(signing_secret(&settings, project).await.unwrap(), old);
}

/// A sandbox restarted on other ports rewrites its credentials file's URLs (and nothing else),
/// so a client reading the file reaches the running server; the file stays owner-only.
#[tokio::test]
async fn a_restart_on_other_ports_brings_the_credentials_file_along() {
    let root = tempfile::tempdir().unwrap();
    let data = root.path().join("data");
    let file = data.join(CREDENTIALS_FILE);
    let read = || -> serde_json::Value {
        serde_json::from_slice(&std::fs::read(&file).expect("the file")).expect("JSON")
    };
    let first = TestServer::start(|s| s.data_dir = data.clone()).await;
    assert_eq!(read()["base_url"], first.merchant_url.as_str());
    first.stop().await;
    // The URLs of a start on other ports (port 0 could give the same port twice): port 1.
    let mut written = read();
    for (name, url) in [
        ("base_url", "http://127.0.0.1:1"),
        ("operator_url", "http://127.0.0.1:1"),
        ("cabinet_url", "http://127.0.0.1:1"),
    ] {
        written[name] = url.into();
    }
    std::fs::remove_file(&file).expect("remove");
    payments_server::bootstrap::write_private(&file, &serde_json::to_vec(&written).expect("JSON"))
        .expect("write");
    let second = TestServer::start(|s| s.data_dir = data.clone()).await;
    let now = read();
    assert_eq!(now["base_url"], second.merchant_url.as_str());
    assert_eq!(now["operator_url"], second.operator_url.as_str());
    assert_eq!(
        now["cabinet_url"],
        second
            .cabinet_url
            .as_deref()
            .expect("the sandbox runs the cabinet")
    );
    for kept in [
        "token",
        "private_key_pem",
        "callback_secret",
        "operator_token",
        "test_project",
    ] {
        assert_eq!(now[kept], written[kept], "{kept} is kept");
    }
    assert_eq!(mode(&file), 0o600);
    // The file's client reaches the running server.
    let client = payments_client::MerchantClient::from_credentials(
        &payments_client::SandboxCredentials::from_file(&file).expect("the file reads"),
    )
    .expect("a client");
    assert_eq!(client.project().await.expect("an answer").status, 200);
    drop(client);
    second.stop().await;
}
