//! Only `migrate` (and `serve`, which logs it) changes the schema: every other command on an
//! older database refuses with a message naming `payments-server migrate` and changes nothing;
//! `status` reports the versions; `migrate` upgrades and the command then works.

use payments_http::testing::TestServer;

use crate::support::{cli, cli_json};

fn user_version(path: &std::path::Path) -> u32 {
    rusqlite::Connection::open(path)
        .unwrap()
        .query_row("PRAGMA user_version", [], |r| r.get(0))
        .unwrap()
}

#[tokio::test]
async fn a_command_on_an_older_schema_refuses_and_migrate_upgrades_it() {
    let s = TestServer::sandbox().await;
    let dir = s.dir.path().to_path_buf();
    s.stop().await;
    let db = dir.join("payments.db");
    let current = payments_store_sqlite::SCHEMA_VERSION;
    // Back to version 2, the schema of the first releases: what later migrations add is
    // dropped (as in payments-store-sqlite's upgrade test).
    rusqlite::Connection::open(&db)
        .unwrap()
        .execute_batch(
            "ALTER TABLE outbox_events DROP COLUMN lease_token;
             DROP TABLE cabinet_users; DROP TABLE cabinet_recovery_codes;
             DROP TABLE cabinet_sessions; DROP TABLE cabinet_invites;
             DROP TABLE cabinet_failures; DROP TABLE cabinet_audit; DROP TABLE token_use;
             DROP INDEX payments_project_created; DROP INDEX outbox_events_project_created;
             ALTER TABLE delivery_attempts DROP COLUMN response_excerpt;
             DROP TRIGGER payments_count_insert; DROP TRIGGER payments_count_update;
             DROP TRIGGER payments_count_delete; DROP TABLE payment_status_counts;
             DROP TABLE operator_tokens; DROP INDEX outbox_events_failed;
             DROP INDEX outbox_events_pending_age; DROP INDEX outbox_events_finished;
             DROP INDEX audit_at; ALTER TABLE outbox_events DROP COLUMN resent_by;
             PRAGMA user_version = 2;",
        )
        .unwrap();

    for args in [
        &["merchant", "list"][..],
        &["audit", "--limit", "5"][..],
        &["callbacks", "status"][..],
    ] {
        let (ok, _, err) = cli(&dir, args);
        assert!(!ok, "{args:?} ran on an old schema");
        assert!(
            err.contains("schema version 2") && err.contains("payments-server migrate"),
            "{args:?}: {err}"
        );
        assert_eq!(user_version(&db), 2, "{args:?} changed the schema");
    }
    let (ok, out, err) = cli(&dir, &["status"]);
    assert!(!ok, "status exits non-zero when it cannot read the database");
    assert!(
        out.contains(&format!("schema version         2 (this build: {current}); run `payments-server migrate`")),
        "{out}\n{err}"
    );

    let (ok, out, err) = cli(&dir, &["migrate"]);
    assert!(ok, "{err}");
    assert_eq!(out.trim(), format!("schema version 2 -> {current}"));
    assert_eq!(user_version(&db), current);
    let (ok, out, err) = cli(&dir, &["migrate"]);
    assert!(ok, "{err}");
    assert_eq!(out.trim(), format!("schema version {current}: nothing to apply"));

    let (ok, _, err) = cli(&dir, &["merchant", "list"]);
    assert!(ok, "after migrate: {err}");
    let status = cli_json(&dir, &["status"]);
    assert_eq!(status["schema_version"], current);
    assert_eq!(status["build_schema_version"], current);
    assert_eq!(status["needs_migration"], false);
    assert_eq!(status["store"], "sqlite");
    assert_eq!(status["pending_events"], 0);
    assert_eq!(status["failed_events"], 0);
    assert!(status["database_bytes"].as_u64().unwrap() > 0, "{status}");
    assert!(status["error"].is_null(), "{status}");
}
