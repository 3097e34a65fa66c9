//! `payments-server backup` copies a live database (0600); a server started on the restored
//! copy as docs/runbooks/restore.md says sends nothing until an operator releases callbacks.

use std::time::Duration;

use payments_core::event::DeliveryState;
use payments_core::PaymentId;
use payments_server::testing::TestServer;
use serde_json::json;

use crate::support::{
    cli, cli_json, create_with_callback, eventually, op, sample, scrape, Receiver,
};

#[tokio::test]
async fn a_restored_backup_started_as_documented_sends_nothing() {
    let receiver = Receiver::start(200).await;
    // The original: its event is still pending when the backup is taken (dispatch off here
    // stands for a receiver that had not answered yet).
    let original = TestServer::start(|s| {
        s.callbacks.allow_local = true;
        s.callbacks.dispatch = false;
    })
    .await;
    let id = create_with_callback(&original, "backup-1", &receiver.url).await;
    let (status, _) = op(
        &original,
        "POST",
        &format!("/operator/v1/payments/{id}/confirm"),
        Some(json!({})),
    )
    .await;
    assert_eq!(status, 200);

    // Online: the original keeps running.
    let backups = tempfile::tempdir().unwrap();
    let file = backups.path().join("payments-backup.db");
    let (ok, out, err) = cli(original.dir.path(), &["backup", file.to_str().unwrap()]);
    assert!(ok, "backup failed: {err}");
    assert!(out.contains("Backup written"), "{out}");
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        let mode = std::fs::metadata(&file).unwrap().permissions().mode() & 0o777;
        assert_eq!(mode, 0o600, "owner-only");
    }
    let (ok, _, err) = cli(original.dir.path(), &["backup", file.to_str().unwrap()]);
    assert!(!ok, "an existing file is never overwritten");
    assert!(err.contains("exists"), "{err}");
    let key = std::fs::read(original.dir.path().join("secrets.key")).unwrap();
    original.stop().await;

    // Restore as documented: the copy as payments.db, the key file beside it, then start.
    let restored = tempfile::tempdir().unwrap();
    let data = restored.path().join("data");
    std::fs::create_dir(&data).unwrap();
    std::fs::copy(&file, data.join("payments.db")).unwrap();
    std::fs::write(data.join("secrets.key"), key).unwrap();
    let server_dir = data.clone();
    let s = TestServer::start(move |s| {
        s.data_dir = server_dir;
        s.callbacks.allow_local = true;
    })
    .await;

    // Past the dispatcher's wake-up and several polls: nothing is sent.
    tokio::time::sleep(Duration::from_millis(2500)).await;
    assert!(
        receiver.received().is_empty(),
        "a restored copy sends nothing"
    );
    let payment: PaymentId = id.parse().unwrap();
    let events = s
        .state
        .service
        .store()
        .events_for_payment(payment)
        .await
        .unwrap();
    assert_eq!(events.len(), 1);
    assert_eq!(events[0].outbox.state, DeliveryState::Pending);
    assert!(events[0].attempts.is_empty());
    let (_, hold) = op(&s, "GET", "/operator/v1/callbacks/hold", None).await;
    assert_eq!(hold["held"], true);
    assert!(
        hold["reason"]
            .as_str()
            .unwrap()
            .starts_with("restored from a backup taken at "),
        "{hold}"
    );
    let text = scrape(&s).await;
    assert_eq!(sample(&text, "payments_callback_dispatch_held"), Some(1.0));
    assert_eq!(sample(&text, "payments_outbox_pending"), Some(1.0));

    // The operator decides: released from a terminal, the running server sends it.
    let released = cli_json(&data, &["callbacks", "release"]);
    assert_eq!(released, json!({"held": false, "reason": null}));
    eventually(30, "the held event to be sent", || async {
        receiver.received().len() == 1
    })
    .await;
    assert_eq!(
        receiver.received()[0].event_id,
        events[0].outbox.event.event_id.to_string()
    );
    let (_, audit) = op(&s, "GET", "/operator/v1/audit?limit=5", None).await;
    let release = audit["records"]
        .as_array()
        .unwrap()
        .iter()
        .find(|r| r["action"] == "callbacks.release")
        .expect("the release is audited")
        .clone();
    assert_eq!(release["actor"], "cli:oncall");
    s.stop().await;
}

/// `backup` over settings that name PostgreSQL refuses and names `pg_dump`, even with a stale
/// SQLite database in the data dir (which it backed up before, exiting 0); nothing is written.
#[tokio::test]
async fn a_backup_of_a_postgresql_node_is_refused_and_names_pg_dump() {
    let data = tempfile::tempdir().unwrap();
    std::fs::write(data.path().join("payments.db"), b"a stale database file").unwrap();
    let file = data.path().join("backup.db");
    let url = "postgres://payments@127.0.0.1:9/payments";
    let (ok, out, err) = cli(
        data.path(),
        &["backup", file.to_str().unwrap(), "--database-url", url],
    );
    assert!(!ok, "refused: {out}");
    assert!(
        err.contains("these settings use PostgreSQL") && err.contains("pg_dump"),
        "{err}"
    );
    assert!(!file.exists(), "nothing is written");
}

/// `secrets-key generate FILE` writes a new owner-only key and prints its id, never over an
/// existing file.
#[tokio::test]
async fn a_generated_key_is_written_once_and_owner_only() {
    let dir = tempfile::tempdir().unwrap();
    let key = dir.path().join("keys").join("secrets.key");
    let (ok, out, err) = cli(
        dir.path(),
        &["secrets-key", "generate", key.to_str().unwrap()],
    );
    assert!(ok, "{err}");
    let id = payments_server::data_dir::read_key_file(&key)
        .unwrap()
        .id()
        .to_string();
    assert!(out.contains(&format!("Key {id} written to")), "{out}");
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        let mode = std::fs::metadata(&key).unwrap().permissions().mode() & 0o777;
        assert_eq!(mode, 0o600, "owner-only");
    }
    let before = std::fs::read(&key).unwrap();
    let (ok, _, err) = cli(
        dir.path(),
        &["secrets-key", "generate", key.to_str().unwrap()],
    );
    assert!(!ok && err.contains("a key file is there already"), "{err}");
    assert_eq!(std::fs::read(&key).unwrap(), before, "the key is unchanged");
}
