//! `/readyz` answers 503 when the store cannot write: a read-only database, and a database
//! whose write lock another process holds; `/healthz` stays 200.

use std::sync::Arc;
use std::time::Duration;

use payments_server::server::Application;
use payments_server::testing::{test_settings, TestServer};
use payments_store_sqlite::{SqliteOptions, SqliteStore};

async fn get(url: String) -> (u16, serde_json::Value) {
    let resp = reqwest::get(url).await.expect("the server answers");
    let status = resp.status().as_u16();
    (status, resp.json().await.unwrap_or_default())
}

#[tokio::test]
async fn readyz_is_503_on_a_read_only_store() {
    // A data dir made by a normal start, then served over the same database opened read-only.
    let s = TestServer::sandbox().await;
    let dir = s.stop_keeping_dir().await;
    let data = dir.path().to_path_buf();
    let ro = SqliteStore::open(
        data.join("payments.db"),
        SqliteOptions {
            read_only: true,
            ..SqliteOptions::default()
        },
    )
    .expect("opens read-only");
    let settings = test_settings(&data);
    let app = Application::builder(settings)
        .store(Arc::new(ro))
        .build()
        .await
        .expect("a read-only store still starts");
    let base = app.base_url();
    let (tx, rx) = tokio::sync::oneshot::channel::<()>();
    let task = tokio::spawn(app.run_until_stopped(async {
        let _ = rx.await;
    }));
    let (status, _) = get(format!("{base}/healthz")).await;
    assert_eq!(status, 200, "alive");
    let (status, body) = get(format!("{base}/readyz")).await;
    assert_eq!(status, 503, "{body}");
    assert_eq!(body["status"], "store unavailable");
    let reason = body["reason"].as_str().unwrap();
    assert!(reason.contains("cannot write (io)"), "{reason}");
    let _ = tx.send(());
    task.await.unwrap().unwrap();
    drop(dir);
}

#[tokio::test]
async fn readyz_is_503_while_another_process_holds_the_write_lock() {
    let s = TestServer::sandbox().await;
    let (status, _) = get(format!("{}/readyz", s.merchant_url)).await;
    assert_eq!(status, 200);
    // Another connection (as a stuck sqlite3 shell would) takes the write lock, and holds it
    // until the test lets go.
    let db = s.dir.path().join("payments.db");
    let (taken_tx, taken_rx) = std::sync::mpsc::channel();
    let (release_tx, release_rx) = std::sync::mpsc::channel::<()>();
    let holder = std::thread::spawn(move || {
        let conn = rusqlite::Connection::open(db).unwrap();
        conn.execute_batch("BEGIN IMMEDIATE").unwrap();
        taken_tx.send(()).unwrap();
        release_rx
            .recv_timeout(Duration::from_secs(60))
            .expect("the test releases the lock");
        conn.execute_batch("COMMIT").unwrap();
    });
    tokio::task::spawn_blocking(move || taken_rx.recv().expect("the lock is taken"))
        .await
        .unwrap();
    // Once the reuse window of the last good probe has passed, the probe fails.
    let deadline = std::time::Instant::now() + Duration::from_secs(15);
    let (status, body) = loop {
        let answer = get(format!("{}/readyz", s.merchant_url)).await;
        if answer.0 != 200 {
            break answer;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "still ready 15 s after another process took the write lock"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    };
    assert_eq!(status, 503, "{body}");
    assert!(
        body["reason"]
            .as_str()
            .unwrap()
            .contains("did not take a write"),
        "{body}"
    );
    release_tx.send(()).expect("the holder waits");
    tokio::task::spawn_blocking(move || holder.join().unwrap())
        .await
        .unwrap();
    crate::support::eventually(15, "ready again", || async {
        get(format!("{}/readyz", s.merchant_url)).await.0 == 200
    })
    .await;
    s.stop().await;
}

/// A node that could not authenticate a merchant's request (here: the tokens' table is gone
/// from under it, as a schema changed by a build it cannot read would be) is not ready, though
/// it still reads and writes its settings.
#[tokio::test]
async fn readyz_is_503_when_requests_cannot_be_authenticated() {
    let s = TestServer::sandbox().await;
    let ready = get(format!("{}/readyz", s.merchant_url)).await;
    assert_eq!(ready.0, 200, "{}", ready.1);
    let db = rusqlite::Connection::open(s.dir.path().join("payments.db")).expect("open");
    db.execute_batch("ALTER TABLE tokens RENAME TO tokens_elsewhere")
        .expect("rename");
    let (status, body) = get(format!("{}/readyz", s.merchant_url)).await;
    assert_eq!(status, 503, "{body}");
    assert!(
        body["reason"]
            .as_str()
            .is_some_and(|r| r.contains("cannot authenticate requests")),
        "{body}"
    );
    db.execute_batch("ALTER TABLE tokens_elsewhere RENAME TO tokens")
        .expect("rename back");
    let (status, body) = get(format!("{}/readyz", s.merchant_url)).await;
    assert_eq!(status, 200, "ready again: {body}");
    s.stop().await;
}

/// A tmpfs of `mib` MiB mounted on a new temporary directory, unmounted on drop.
struct SmallDisk(tempfile::TempDir);

impl SmallDisk {
    fn mount(mib: u32) -> SmallDisk {
        let dir = tempfile::tempdir().expect("a temporary directory");
        let status = std::process::Command::new("mount")
            .args(["-t", "tmpfs", "-o", &format!("size={mib}m"), "tmpfs"])
            .arg(dir.path())
            .status()
            .expect("mount runs");
        assert!(
            status.success(),
            "needs root: mounts a small tmpfs (.ci/run runs as root): mount answered {status}"
        );
        SmallDisk(dir)
    }
}

impl Drop for SmallDisk {
    fn drop(&mut self) {
        let _ = std::process::Command::new("umount")
            .arg("-l")
            .arg(self.0.path())
            .status();
    }
}

/// Writes zeros to `path` until the file system is full.
fn fill(path: &std::path::Path) {
    use std::io::Write as _;
    let mut file = std::fs::File::create(path).expect("the filler file");
    let chunk = vec![0u8; 64 << 10];
    while file
        .write_all(&chunk)
        .and_then(|()| file.sync_data())
        .is_ok()
    {}
}

/// Polls `/readyz` until it answers `want` (15 s at most); its last answer.
async fn readyz_becomes(base: &str, want: u16) -> (u16, serde_json::Value) {
    let deadline = std::time::Instant::now() + Duration::from_secs(15);
    loop {
        let answer = get(format!("{base}/readyz")).await;
        if answer.0 == want || std::time::Instant::now() > deadline {
            return answer;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// A SQLite node on a small file system filled to the brim (as `dd` would fill it) leaves the
/// balancer's rotation whatever its WAL still holds: the readiness probe allocates new space
/// before its write. Creates then answer `503` too; once the filler is gone the node is ready
/// again by itself. (Before, `/readyz` could answer 200 while every create answered "disk
/// full": its small write fit in the WAL.)
#[tokio::test]
#[ignore = "needs root: mounts a small tmpfs (.ci/run runs as root)"]
async fn readyz_follows_the_room_on_a_small_file_system() {
    let disk = SmallDisk::mount(24);
    let data = disk.0.path().join("data");
    let s = TestServer::start(|st| st.data_dir = data).await;
    let (status, body) = readyz_becomes(&s.merchant_url, 200).await;
    assert_eq!(status, 200, "{body}");

    let filler = disk.0.path().join("filler");
    fill(&filler);
    let (status, body) = readyz_becomes(&s.merchant_url, 503).await;
    assert_eq!(status, 503, "still ready on a full disk: {body}");
    let reason = body["reason"].as_str().unwrap_or_default();
    assert!(reason.contains("disk full"), "{body}");
    let create = |order: &'static str| {
        let client = s.client();
        async move {
            let body = serde_json::json!({
                "merchant_payment_id": order, "amount": "3400", "payment_method": "sbp",
            });
            let created = client.create_payment(&body).await.expect("answered");
            (created.status.as_u16(), created.json)
        }
    };
    let (status, body) = create("full-disk-1").await;
    assert_eq!(status, 503, "{body}");

    std::fs::remove_file(&filler).expect("the filler goes");
    let (status, body) = readyz_becomes(&s.merchant_url, 200).await;
    assert_eq!(status, 200, "not ready again with room: {body}");
    let (status, body) = create("full-disk-2").await;
    assert_eq!(status, 201, "{body}");
    s.stop().await;
}
