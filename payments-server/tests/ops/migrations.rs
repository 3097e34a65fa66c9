//! Only `migrate` and `serve` (which logs it) change the schema: every other command on an
//! older database refuses with a message naming `payments-server migrate` and changes nothing;
//! `status` reports the versions (and exits non-zero until the database is migrated);
//! `migrate` upgrades and the commands then work. On the data dir's SQLite database, and on
//! PostgreSQL when `DATABASE_URL` names one.

use std::io::Read;
use std::path::Path;

use serde_json::{json, Value};

use crate::support::{
    cli, cli_json, database_url, fresh_schema, serve, sql, wait_ready, ServerProcess,
};

/// A `payments-server` command on the store under test: its exit status, stdout and stderr.
type Run<'a> = dyn Fn(&[&str]) -> (bool, String, String) + 'a;

/// Commands that read or change records: each must refuse an older schema.
const COMMANDS: [&[&str]; 3] = [
    &["merchant", "list"],
    &["audit", "--limit", "5"],
    &["callbacks", "status"],
];

/// Runs the commands on an older database (at `old`): each refuses, naming `migrate`, and
/// `schema_version` still answers `old` afterwards. Then `status`: non-zero, the versions and
/// the advice in its text, and in its JSON.
fn refused_on_old_schema(run: &Run<'_>, schema_version: &dyn Fn() -> u32, old: u32, current: u32) {
    for args in COMMANDS {
        let (ok, _, err) = run(args);
        assert!(!ok, "{args:?} ran on an old schema");
        assert!(
            err.contains(&format!("schema version {old};"))
                && err.contains("run `payments-server migrate`"),
            "{args:?}: {err}"
        );
        assert_eq!(schema_version(), old, "{args:?} changed the schema");
    }
    let (ok, out, err) = run(&["status"]);
    assert!(!ok, "status exits non-zero when it cannot read the records");
    assert!(
        out.contains(&format!(
            "schema version         {old} (this build: {current}); run `payments-server migrate`"
        )),
        "{out}\n{err}"
    );
    let (ok, out, _) = run(&["status", "--json"]);
    assert!(!ok);
    let status: Value = serde_json::from_str(&out).expect("status --json prints JSON");
    assert_eq!(status["schema_version"], old);
    assert_eq!(status["build_schema_version"], current);
    assert_eq!(status["needs_migration"], true);
    assert!(status["callback_held"].is_null(), "{status}");
    assert!(
        status["error"]
            .as_str()
            .is_some_and(|e| e.contains("payments-server migrate")),
        "{status}"
    );
    assert_eq!(schema_version(), old, "status changed the schema");
}

/// `migrate` from `old` to `current`, then again (nothing to apply).
fn migrate_upgrades(run: &Run<'_>, schema_version: &dyn Fn() -> u32, old: u32, current: u32) {
    let (ok, out, err) = run(&["migrate"]);
    assert!(ok, "{err}");
    assert_eq!(out.trim(), format!("schema version {old} -> {current}"));
    assert_eq!(schema_version(), current);
    let (ok, out, err) = run(&["migrate"]);
    assert!(ok, "{err}");
    assert_eq!(
        out.trim(),
        format!("schema version {current}: nothing to apply")
    );
    for args in COMMANDS {
        let (ok, _, err) = run(args);
        assert!(ok, "{args:?} after migrate: {err}");
    }
}

/// `serve` over an older database: it migrates, logs `applying schema migrations` with the
/// versions, and names the schema version in its startup line.
async fn serve_migrates_and_logs(data_dir: &Path, extra: &[&str], old: u32, current: u32) {
    let mut args = vec!["--log-format", "json"];
    args.extend_from_slice(extra);
    let (mut server, base, _) = serve(data_dir, &args);
    wait_ready(&mut server, &base).await;
    let log = stop_and_read_log(&mut server);
    let lines: Vec<Value> = log
        .lines()
        .filter_map(|l| serde_json::from_str(l).ok())
        .collect();
    let applied = lines
        .iter()
        .find(|l| l["message"] == "applying schema migrations")
        .unwrap_or_else(|| panic!("serve logs the migration: {log}"));
    assert_eq!(applied["from"], old, "{applied}");
    assert_eq!(applied["to"], current, "{applied}");
    let started = lines
        .iter()
        .find(|l| l["message"] == "payments-server started")
        .unwrap_or_else(|| panic!("a startup line: {log}"));
    assert_eq!(started["schema_version"], current.to_string());
}

fn stop_and_read_log(server: &mut ServerProcess) -> String {
    server.0.kill().unwrap();
    let mut log = String::new();
    server
        .0
        .stderr
        .take()
        .unwrap()
        .read_to_string(&mut log)
        .unwrap();
    log
}

// --- SQLite --------------------------------------------------------------------------------

fn user_version(path: &Path) -> u32 {
    rusqlite::Connection::open(path)
        .unwrap()
        .query_row("PRAGMA user_version", [], |r| r.get(0))
        .unwrap()
}

/// Back to version 2, the schema of the first releases: what later migrations add is
/// dropped.
fn sqlite_back_to_version_2(db: &Path) {
    rusqlite::Connection::open(db)
        .unwrap()
        .execute_batch(payments_store_sqlite::testing::DOWNGRADE_TO_VERSION_2)
        .unwrap();
}

#[tokio::test]
async fn a_command_on_an_older_schema_refuses_and_migrate_upgrades_it() {
    let s = payments_server::testing::TestServer::sandbox().await;
    let created = s
        .client()
        .create_payment(&json!({
            "merchant_payment_id": "before-the-upgrade",
            "amount": "3400",
            "payment_method": "sbp",
        }))
        .await
        .expect("the create is answered");
    assert_eq!(created.status.as_u16(), 201, "{}", created.json);
    let dir = s.stop_keeping_dir().await;
    let dir = dir.path();
    let db = dir.join("payments.db");
    let current = payments_store_sqlite::SCHEMA_VERSION;
    sqlite_back_to_version_2(&db);
    let run = |args: &[&str]| cli(dir, args);
    let version = || user_version(&db);

    refused_on_old_schema(&run, &version, 2, current);
    migrate_upgrades(&run, &version, 2, current);
    let status = cli_json(dir, &["status"]);
    assert_eq!(status["store"], "sqlite");
    assert_eq!(status["database"], db.display().to_string());
    assert_eq!(status["schema_version"], current);
    assert_eq!(status["build_schema_version"], current);
    assert_eq!(status["needs_migration"], false);
    assert_eq!(status["payments"], json!({"processing": 1}), "{status}");
    assert_eq!(status["pending_events"], 0);
    assert_eq!(status["failed_events"], 0);
    assert_eq!(status["callback_held"], false);
    assert!(status["database_bytes"].as_u64().unwrap() > 0, "{status}");
    assert!(status["error"].is_null(), "{status}");

    // `serve` is the other command that migrates, and it says so.
    sqlite_back_to_version_2(&db);
    serve_migrates_and_logs(dir, &[], 2, current).await;
    assert_eq!(user_version(&db), current);
}

// --- PostgreSQL ----------------------------------------------------------------------------

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs PostgreSQL: DATABASE_URL"]
async fn on_postgresql_a_command_on_an_older_schema_refuses_and_migrate_upgrades_it() {
    let base = database_url();
    let url = fresh_schema(&base).await;
    let data_dir = tempfile::tempdir().unwrap();
    let dir = data_dir.path();
    let current = payments_store_postgres::SCHEMA_VERSION;
    let run = |args: &[&str]| {
        let mut all = args.to_vec();
        all.extend(["--database-url", url.as_str()]);
        cli(dir, &all)
    };
    // The schema version as the database records it, read on a thread of its own (the
    // checks run between blocking CLI calls).
    let version = || {
        let url = url.clone();
        std::thread::spawn(move || {
            tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()
                .unwrap()
                .block_on(async {
                    let row = sql(&url)
                        .await
                        .query_one(
                            "SELECT coalesce(max(version), 0) FROM schema_migrations",
                            &[],
                        )
                        .await
                        .expect("read the schema version");
                    u32::try_from(row.get::<_, i32>(0)).unwrap()
                })
        })
        .join()
        .unwrap()
    };

    // An empty database is created by `migrate` (or `serve`), not by any other command.
    let (ok, _, err) = run(&["merchant", "list"]);
    assert!(!ok);
    assert!(
        err.contains("schema version 0;") && err.contains("run `payments-server migrate`"),
        "{err}"
    );
    let (ok, out, err) = run(&["migrate"]);
    assert!(ok, "{err}");
    assert_eq!(out.trim(), format!("schema version 0 -> {current}"));
    // Before any server: the operator asks for the secrets key (a command makes none unasked).
    let (ok, _, err) = run(&[
        "merchant",
        "create",
        "--name",
        "Before the upgrade",
        "--create-key",
    ]);
    assert!(ok, "{err}");

    sql(&url)
        .await
        .batch_execute(payments_store_postgres::testing::DOWNGRADE_TO_VERSION_1)
        .await
        .expect("back to version 1");
    refused_on_old_schema(&run, &version, 1, current);
    migrate_upgrades(&run, &version, 1, current);
    let (ok, out, err) = run(&["merchant", "list"]);
    assert!(ok && out.contains("Before the upgrade"), "{out}\n{err}");

    let args = ["status", "--database-url", url.as_str()];
    let status = cli_json(dir, &args);
    assert_eq!(status["store"], "postgresql");
    assert!(
        status["database"]
            .as_str()
            .is_some_and(|d| d.starts_with("postgres") && !d.contains("search_path")),
        "{status}"
    );
    assert_eq!(status["schema_version"], current);
    assert_eq!(status["build_schema_version"], current);
    assert_eq!(status["needs_migration"], false);
    assert_eq!(status["payments"], json!({}), "{status}");
    assert_eq!(status["pending_events"], 0);
    assert_eq!(status["failed_events"], 0);
    assert_eq!(status["callback_held"], false);
    assert!(status["database_bytes"].as_u64().unwrap() > 0, "{status}");
    assert!(status["wal_bytes"].is_null(), "{status}");
    assert!(status["error"].is_null(), "{status}");
    let (ok, out, err) = cli(dir, &args);
    assert!(ok, "{err}");
    assert!(out.contains("store                  postgresql"), "{out}");

    // `serve` is the other command that migrates, and it says so.
    sql(&url)
        .await
        .batch_execute(payments_store_postgres::testing::DOWNGRADE_TO_VERSION_1)
        .await
        .expect("back to version 1");
    serve_migrates_and_logs(dir, &["--database-url", url.as_str()], 1, current).await;
    assert_eq!(version(), current);
}
