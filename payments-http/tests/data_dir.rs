//! The data dir at rest: the directory and the database files are owner-only.

#![cfg(unix)]

use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};

use payments_http::bootstrap::CREDENTIALS_FILE;
use payments_http::config::{Durability, Settings};
use payments_http::data_dir::DATABASE_FILE;
use payments_http::server::open_store;
use payments_http::testing::TestServer;

fn mode(path: &Path) -> u32 {
    std::fs::metadata(path)
        .unwrap_or_else(|e| panic!("{}: {e}", path.display()))
        .permissions()
        .mode()
        & 0o777
}

fn settings(data_dir: &Path) -> Settings {
    Settings {
        data_dir: data_dir.to_path_buf(),
        durability: Durability::Normal,
        ..Settings::default()
    }
}

fn sibling(db: &Path, suffix: &str) -> PathBuf {
    let mut name = db.as_os_str().to_owned();
    name.push(suffix);
    PathBuf::from(name)
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
