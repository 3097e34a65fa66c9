//! Room kept for a full disk, so that the store can free space on it.
//!
//! SQLite needs free space even to delete: a deletion's pages go to the WAL first, and a
//! checkpoint copies pages into the database file, which may have to grow to take them (on a
//! file system filled to the brim, `DELETE` and `PRAGMA wal_checkpoint` both fail with
//! `SQLITE_FULL`). So the purges that would free room could not run, and a full disk stayed
//! full after whatever filled it had stopped.
//!
//! The store therefore holds a reserve: a file of zeros beside the database
//! (`<database>-reserve`, [`SqliteOptions::reserve_bytes`](crate::SqliteOptions::reserve_bytes)).
//! When a write finds the disk full, the store deletes the reserve and turns to *freeing
//! only*: the writes that only delete (the purges and retention of expired rows, sessions,
//! sign-in failures, one-time slots, the request log) run in the room the reserve made; every
//! other write is refused at once as `disk full`, so that what filled the disk cannot take
//! that room too, and readiness (which takes a real write) says the node is not ready. The
//! store turns back when the database has room inside it again (free pages, made by the
//! purges, of at least the reserve's size) or the file system has twice the reserve free. The
//! reserve is made again once the file system has room for it twice over.
//!
//! Readiness does not trust a small write to show a full disk: SQLite may rewrite a page in a
//! WAL that still has room while every insert fails. [`probe_room`] allocates
//! [`PROBE_BYTES`] of new space in a file beside the database (and removes it) before the
//! readiness write, so a node on a full file system leaves the balancer's rotation whatever
//! the WAL still holds, and comes back by itself once there is room.

use std::io::Write as _;
use std::path::{Path, PathBuf};
use std::sync::{Mutex, MutexGuard};
use std::time::{Duration, Instant};

use payments_core::store::{StoreError, UnavailableCause};

/// How often the free space of the file system is looked at while the reserve is missing.
const LOOK_EVERY: Duration = Duration::from_secs(5);

/// The new space [`probe_room`] allocates: room for a few hundred payments.
pub const PROBE_BYTES: u64 = 256 << 10;

/// Whether the file system of `database` has [`PROBE_BYTES`] of new space: allocates them
/// (`fallocate`, no data written) in `<database>-probe` and removes it. `Err(disk full)` when
/// the file system has no such room. Blocking.
pub(crate) fn probe_room(database: &Path) -> Result<(), StoreError> {
    let mut name = database.as_os_str().to_owned();
    name.push("-probe");
    let path = PathBuf::from(name);
    let allocated = (|| -> std::io::Result<()> {
        use std::os::unix::fs::OpenOptionsExt as _;
        let file = std::fs::OpenOptions::new()
            .write(true)
            .create(true)
            .truncate(true)
            .mode(0o600)
            .open(&path)?;
        rustix::fs::fallocate(&file, rustix::fs::FallocateFlags::empty(), 0, PROBE_BYTES)?;
        Ok(())
    })();
    let _ = std::fs::remove_file(&path);
    match allocated {
        Ok(()) => Ok(()),
        Err(e) if e.raw_os_error() == Some(rustix::io::Errno::NOSPC.raw_os_error()) => {
            Err(UnavailableCause::DiskFull.error(format_args!(
                "the file system has no room for {} KiB of new data",
                PROBE_BYTES >> 10
            )))
        }
        // A file system without fallocate (or another refusal) proves nothing either way:
        // the readiness write decides.
        Err(_) => Ok(()),
    }
}

/// The reserve of one store.
#[derive(Debug)]
pub(crate) struct Reserve {
    /// The reserve file; `None` when the store keeps none (read-only, or a size of 0).
    path: Option<PathBuf>,
    bytes: u64,
    state: Mutex<State>,
}

#[derive(Debug)]
struct State {
    /// The file is there, whole.
    held: bool,
    /// Only freeing writes are admitted.
    freeing_only: bool,
    /// When the file system's free space was last looked at.
    looked: Option<Instant>,
    /// A [`Reserve::make`] was asked for and has not ended.
    making: bool,
}

/// What a write does to the disk, for [`Reserve::admit`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Writes {
    /// It may need room (inserts, updates).
    Grows,
    /// It only deletes: it runs on a full disk, in the room the reserve made.
    Frees,
}

impl Reserve {
    /// No reserve: every write is admitted, and a full disk is only reported.
    pub(crate) fn none() -> Reserve {
        Reserve {
            path: None,
            bytes: 0,
            state: Mutex::new(State {
                held: false,
                freeing_only: false,
                looked: None,
                making: false,
            }),
        }
    }

    /// The reserve of the database at `database`, made now (`bytes` of zeros; 0 keeps none).
    /// A disk without room for it is no reason to refuse to start: the store runs without a
    /// reserve until there is room, and says so in the log.
    pub(crate) fn hold(database: &Path, bytes: u64) -> Reserve {
        if bytes == 0 {
            return Reserve::none();
        }
        let mut name = database.as_os_str().to_owned();
        name.push("-reserve");
        let reserve = Reserve {
            path: Some(PathBuf::from(name)),
            bytes,
            ..Reserve::none()
        };
        reserve.make();
        reserve
    }

    /// `Err(disk full)` for a write that may need room while only freeing writes run.
    pub(crate) fn admit(&self, writes: Writes) -> Result<(), StoreError> {
        let mut state = self.lock();
        if !state.freeing_only || writes == Writes::Frees {
            return Ok(());
        }
        if self.look(&mut state) >= self.bytes.saturating_mul(2) {
            tracing::warn!("the disk has room again: every write is admitted");
            state.freeing_only = false;
            return Ok(());
        }
        Err(UnavailableCause::DiskFull.error(
            "the disk is full: only purges run (in the room of the released reserve) until \
             they free room in the database or the file system has room again",
        ))
    }

    /// Notes a write's outcome: a full disk releases the reserve and admits freeing writes
    /// only. `true` when the reserve should be made again ([`Reserve::make`], off the async
    /// workers): it is missing, every write is admitted and the file system has room for it
    /// twice over (looked at every few seconds).
    #[must_use]
    pub(crate) fn after<R>(&self, result: &Result<R, StoreError>) -> bool {
        let Some(path) = &self.path else {
            return false;
        };
        let full = matches!(
            result,
            Err(StoreError::Unavailable {
                cause: UnavailableCause::DiskFull,
                ..
            })
        );
        let mut state = self.lock();
        if full {
            if state.held {
                // Removing a file needs no room: this is what lets the purges run.
                if let Err(e) = std::fs::remove_file(path) {
                    tracing::error!(path = %path.display(), error = %e, "cannot release the disk reserve");
                }
                state.held = false;
            }
            if !state.freeing_only {
                tracing::error!(
                    reserve_mib = self.bytes >> 20,
                    "the disk is full: the reserve was released; only purges run until room \
                     returns (free disk space, or wait for retention to free the database)"
                );
                state.freeing_only = true;
            }
            return false;
        }
        let remake = !state.held
            && !state.making
            && !state.freeing_only
            && self.look(&mut state) >= self.bytes.saturating_mul(2);
        state.making |= remake;
        remake
    }

    /// Turns back to admitting every write when the database has `free` bytes of free pages
    /// of its own (what the purges freed), at least the reserve's size.
    pub(crate) fn database_has_room(&self, free: u64) {
        let mut state = self.lock();
        if state.freeing_only && free >= self.bytes {
            tracing::warn!(
                free_mib = free >> 20,
                "the purges freed room in the database: every write is admitted"
            );
            state.freeing_only = false;
        }
    }

    /// Whether only freeing writes are admitted.
    pub(crate) fn freeing_only(&self) -> bool {
        self.lock().freeing_only
    }

    /// The file system's free bytes, at most every [`LOOK_EVERY`]; 0 in between.
    fn look(&self, state: &mut State) -> u64 {
        let Some(path) = &self.path else {
            return 0;
        };
        if state.looked.is_some_and(|at| at.elapsed() < LOOK_EVERY) {
            return 0;
        }
        state.looked = Some(Instant::now());
        let dir = path.parent().filter(|d| !d.as_os_str().is_empty());
        match rustix::fs::statvfs(dir.unwrap_or(Path::new("."))) {
            Ok(fs) => fs.f_bavail.saturating_mul(fs.f_frsize),
            Err(_) => 0,
        }
    }

    /// Writes the reserve file (through a temporary name, so a half-written one is never
    /// taken for whole; one left whole by an earlier start is kept as it is); on a disk
    /// without room, keeps none and says so. Blocking.
    pub(crate) fn make(&self) {
        let Some(path) = &self.path else {
            return;
        };
        if std::fs::metadata(path).is_ok_and(|m| m.len() == self.bytes) {
            let mut state = self.lock();
            state.held = true;
            state.making = false;
            return;
        }
        let mut tmp = path.as_os_str().to_owned();
        tmp.push(".tmp");
        let tmp = PathBuf::from(tmp);
        let written = (|| -> std::io::Result<()> {
            use std::os::unix::fs::OpenOptionsExt as _;
            let mut file = std::fs::OpenOptions::new()
                .write(true)
                .create(true)
                .truncate(true)
                .mode(0o600)
                .open(&tmp)?;
            let zeros = vec![0u8; 1 << 20];
            let mut left = self.bytes;
            while left > 0 {
                let n = usize::try_from(left.min(zeros.len() as u64)).unwrap_or(zeros.len());
                file.write_all(&zeros[..n])?;
                left -= n as u64;
            }
            file.sync_all()?;
            std::fs::rename(&tmp, path)
        })();
        let mut state = self.lock();
        state.making = false;
        match written {
            Ok(()) => state.held = true,
            Err(e) => {
                let _ = std::fs::remove_file(&tmp);
                tracing::warn!(
                    path = %path.display(),
                    error = %e,
                    "no room for the disk reserve: running without it for now"
                );
            }
        }
    }

    fn lock(&self) -> MutexGuard<'_, State> {
        self.state
            .lock()
            .expect("the reserve's lock is never held across a panic")
    }
}
