//! A full disk recovers by itself: on a small file system filled to the brim by expiring
//! rows, the store with a disk reserve releases it, refuses further growth at once, runs the
//! purge that frees the rows and then takes writes again; without a reserve the same purge
//! fails (`SQLITE_FULL`: SQLite needs room even to delete). Mounts two small tmpfs file
//! systems, so it needs root (`.ci/run` runs as root); ignored in a plain `cargo test`.

use std::path::{Path, PathBuf};
use std::process::Command;

use payments_cabinet::store::{CabinetSlots, SlotRecord};
use payments_core::store::{Store, StoreError, UnavailableCause};
use payments_core::Timestamp;
use payments_store_sqlite::{SqliteOptions, SqliteStore};

const NEEDS_ROOT: &str = "needs root: mounts a small tmpfs (.ci/run runs as root)";

/// A tmpfs of `mib` MiB mounted on a new temporary directory, unmounted on drop.
struct SmallDisk {
    dir: tempfile::TempDir,
}

impl SmallDisk {
    fn mount(mib: u32) -> SmallDisk {
        let dir = tempfile::tempdir().expect("a temporary directory");
        let status = Command::new("mount")
            .args(["-t", "tmpfs", "-o", &format!("size={mib}m"), "tmpfs"])
            .arg(dir.path())
            .status()
            .expect("mount runs");
        assert!(status.success(), "{NEEDS_ROOT}: mount answered {status}");
        SmallDisk { dir }
    }

    fn path(&self, name: &str) -> PathBuf {
        self.dir.path().join(name)
    }
}

impl Drop for SmallDisk {
    fn drop(&mut self) {
        let _ = Command::new("umount")
            .arg("-l")
            .arg(self.dir.path())
            .status();
    }
}

fn at(ms: i64) -> Timestamp {
    Timestamp::from_unix_millis(1_800_000_000_000 + ms)
}

fn is_disk_full<R>(result: &Result<R, StoreError>) -> bool {
    matches!(
        result,
        Err(StoreError::Unavailable {
            cause: UnavailableCause::DiskFull,
            ..
        })
    )
}

/// A one-time slot of about 60 KB that expires at `at(1000)`.
fn slot(n: u32) -> SlotRecord {
    let mut id_hash = [0u8; 32];
    id_hash[..4].copy_from_slice(&n.to_be_bytes());
    SlotRecord {
        id_hash,
        owner: None,
        payload: "x".repeat(60_000).into(),
        created_at: at(i64::from(n)),
        expires_at: at(1000),
    }
}

/// Puts slots until the disk is full; how many went in.
async fn fill(store: &SqliteStore) -> u32 {
    for n in 0..10_000 {
        let put = store.insert_slot(&slot(n), usize::MAX).await;
        if is_disk_full(&put) {
            return n;
        }
        put.expect("a slot is stored while there is room");
    }
    panic!("10,000 slots of 60 KB did not fill the small disk");
}

fn open(path: &Path, reserve_bytes: u64) -> SqliteStore {
    SqliteStore::open(
        path,
        SqliteOptions {
            reserve_bytes,
            ..SqliteOptions::default()
        },
    )
    .expect("the store opens")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs root: mounts a small tmpfs (.ci/run runs as root)"]
async fn a_full_disk_recovers_by_itself_once_the_flood_stops() {
    const RESERVE: u64 = 4 << 20;
    let disk = SmallDisk::mount(24);
    let db = disk.path("payments.db");
    let store = open(&db, RESERVE);
    assert!(
        std::fs::metadata(disk.path("payments.db-reserve")).is_ok_and(|m| m.len() == RESERVE),
        "the reserve is held"
    );
    let stored = fill(&store).await;
    assert!(
        stored > 100,
        "the disk took {stored} slots before it was full"
    );
    assert!(
        std::fs::metadata(disk.path("payments.db-reserve")).is_err(),
        "the reserve was released on the full disk"
    );
    // The flood goes on: refused at once, so it cannot take the released room; and the
    // readiness probe (a real write) says the store cannot write.
    for n in 0..100 {
        assert!(is_disk_full(
            &store.insert_slot(&slot(20_000 + n), usize::MAX).await
        ));
    }
    assert!(is_disk_full(&store.check_writable().await));
    // The flood stops; its rows expire; the purge runs in the reserve's room and frees them.
    let purged = store
        .delete_expired_slots(at(1000), 100_000)
        .await
        .expect("the purge runs on the full disk");
    assert_eq!(purged, u64::from(stored));
    // Room inside the database again: every write is admitted.
    store
        .check_writable()
        .await
        .expect("the store takes writes again");
    for n in 0..20 {
        store
            .insert_slot(&slot(30_000 + n), usize::MAX)
            .await
            .expect("a new slot fits in the freed pages");
    }
    store.close();

    // Without a reserve the same purge needs room it does not have.
    let bare_disk = SmallDisk::mount(24);
    let bare = open(&bare_disk.path("payments.db"), 0);
    let stored = fill(&bare).await;
    assert!(stored > 100);
    let purge = bare.delete_expired_slots(at(1000), 100_000).await;
    assert!(
        is_disk_full(&purge),
        "without a reserve the purge fails on the full disk: {purge:?}"
    );
    bare.close();
}
