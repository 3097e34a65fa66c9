//! The clock of `testing.clock_offset_file`: the system time plus an offset that a test
//! harness writes to a file while the server runs (to move a node's clock forward or back
//! without touching the machine's). Test-only: the settings refuse it in production.

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicI64, Ordering};
use std::sync::{Arc, Weak};
use std::time::Duration;

use payments_core::clock::Sleep;
use payments_core::{Clock, Timestamp};
use payments_http::system::SystemClock;

/// How often a running server reads the offset file again.
pub const REREAD_EVERY: Duration = Duration::from_millis(100);

/// The largest offset file read; a longer one is not a number of milliseconds.
const MAX_FILE: u64 = 64;

/// The system clock plus the offset in milliseconds last read from a file
/// ([`OffsetClock::reread`]): `now` reads an atomic, never the file.
#[derive(Debug, Clone)]
pub struct OffsetClock {
    inner: Arc<Inner>,
}

#[derive(Debug)]
struct Inner {
    file: PathBuf,
    offset_ms: AtomicI64,
    /// A warning about the file's value was logged since it last held a good one.
    warned: AtomicBool,
}

/// Why the offset file's value is not used.
#[derive(Debug, thiserror::Error)]
enum BadOffset {
    #[error("cannot read it: {0}")]
    Read(#[source] std::io::Error),
    #[error("larger than {MAX_FILE} bytes")]
    TooLarge,
    #[error("not a signed whole number of milliseconds: {0:?}")]
    NotANumber(String),
}

impl OffsetClock {
    /// The clock of `file`, read once now.
    pub fn new(file: impl Into<PathBuf>) -> OffsetClock {
        let clock = OffsetClock {
            inner: Arc::new(Inner {
                file: file.into(),
                offset_ms: AtomicI64::new(0),
                warned: AtomicBool::new(false),
            }),
        };
        clock.reread();
        clock
    }

    /// Reads the file again and keeps its offset: 0 when the file is missing, and 0 with a
    /// warning (once, until the file holds a good value again) when it cannot be read or
    /// holds something else than a signed whole number of milliseconds (whitespace around it
    /// is allowed).
    pub fn reread(&self) {
        let inner = &self.inner;
        let offset = match read_offset(&inner.file) {
            Ok(offset) => {
                inner.warned.store(false, Ordering::Relaxed);
                offset
            }
            Err(e) => {
                if !inner.warned.swap(true, Ordering::Relaxed) {
                    tracing::warn!(
                        file = %inner.file.display(),
                        "testing.clock_offset_file: {e}; the clock offset is 0"
                    );
                }
                0
            }
        };
        inner.offset_ms.store(offset, Ordering::Relaxed);
    }

    /// The offset in use, in milliseconds.
    pub fn offset_ms(&self) -> i64 {
        self.inner.offset_ms.load(Ordering::Relaxed)
    }

    /// Reads the file again every `every` on the current tokio runtime, until the last clone
    /// of this clock is dropped.
    pub fn spawn_rereads(&self, every: Duration) -> tokio::task::JoinHandle<()> {
        let weak: Weak<Inner> = Arc::downgrade(&self.inner);
        tokio::spawn(async move {
            let mut tick = tokio::time::interval(every);
            tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
            loop {
                tick.tick().await;
                let Some(inner) = weak.upgrade() else { return };
                OffsetClock { inner }.reread();
            }
        })
    }
}

/// The offset the file holds; a missing file is 0.
fn read_offset(file: &Path) -> Result<i64, BadOffset> {
    use std::io::Read as _;
    let f = match std::fs::File::open(file) {
        Ok(f) => f,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(0),
        Err(e) => return Err(BadOffset::Read(e)),
    };
    let mut text = String::new();
    f.take(MAX_FILE + 1)
        .read_to_string(&mut text)
        .map_err(BadOffset::Read)?;
    if text.len() as u64 > MAX_FILE {
        return Err(BadOffset::TooLarge);
    }
    let trimmed = text.trim();
    trimmed
        .parse::<i64>()
        .map_err(|_| BadOffset::NotANumber(trimmed.to_string()))
}

impl Clock for OffsetClock {
    fn now(&self) -> Timestamp {
        let now = SystemClock.now().unix_millis();
        Timestamp::from_unix_millis(now.saturating_add(self.offset_ms()))
    }

    fn sleep(&self, duration: Duration) -> Sleep {
        SystemClock.sleep(duration)
    }
}

/// The clock `testing.clock_offset_file` asks for, reading its file again every
/// [`REREAD_EVERY`] on the current tokio runtime; `None` when it is not set.
pub fn from_settings(settings: &crate::config::Settings) -> Option<Arc<dyn Clock>> {
    let file = settings.testing.clock_offset_file.as_ref()?;
    let clock = OffsetClock::new(file.clone());
    tracing::warn!(
        file = %file.display(),
        offset_ms = clock.offset_ms(),
        "testing.clock_offset_file is set: the service's clock is the system time plus the \
         file's offset (tests only)"
    );
    clock.spawn_rereads(REREAD_EVERY);
    Some(Arc::new(clock))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_clock_follows_the_file() {
        let dir = tempfile::tempdir().expect("a temporary directory");
        let file = dir.path().join("offset");
        let clock = OffsetClock::new(&file);
        assert_eq!(clock.offset_ms(), 0, "a missing file is no offset");

        let close = |clock: &OffsetClock, offset: i64| {
            let expected = SystemClock.now().unix_millis() + offset;
            let got = clock.now().unix_millis();
            assert!(
                (got - expected).abs() < 5_000,
                "now {got}, expected about {expected}"
            );
        };
        std::fs::write(&file, " -90000\n").expect("written");
        clock.reread();
        assert_eq!(clock.offset_ms(), -90_000);
        close(&clock, -90_000);

        std::fs::write(&file, "45000").expect("written");
        clock.reread();
        assert_eq!(clock.offset_ms(), 45_000);
        close(&clock, 45_000);

        std::fs::write(&file, "soon").expect("written");
        clock.reread();
        assert_eq!(clock.offset_ms(), 0, "an unparsable file is no offset");
        std::fs::write(&file, "1.5").expect("written");
        clock.reread();
        assert_eq!(clock.offset_ms(), 0, "milliseconds are whole");

        std::fs::write(&file, "-1000").expect("written");
        clock.reread();
        assert_eq!(clock.offset_ms(), -1_000);
        std::fs::remove_file(&file).expect("removed");
        clock.reread();
        assert_eq!(clock.offset_ms(), 0, "a removed file is no offset");
    }

    #[tokio::test]
    async fn the_rereads_end_with_the_clock() {
        let dir = tempfile::tempdir().expect("a temporary directory");
        let clock = OffsetClock::new(dir.path().join("offset"));
        let task = clock.spawn_rereads(Duration::from_millis(1));
        drop(clock);
        tokio::time::timeout(Duration::from_secs(10), task)
            .await
            .expect("the task ends once the clock is gone")
            .expect("it did not panic");
    }
}
