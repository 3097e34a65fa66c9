//! Logging with `tracing`: human-readable or JSON lines, filtered by `PAYMENTS_LOG`/the
//! `log_level` setting. Handlers log ids and outcomes, never tokens, keys, secrets or bodies.

use std::io::{IsTerminal, Write};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Condvar, Mutex, MutexGuard};
use std::thread::JoinHandle;
use std::time::Duration;

use tracing_subscriber::fmt::MakeWriter;
use tracing_subscriber::EnvFilter;

use crate::config::LogFormat;

/// How long a server log line waits in memory at most before it is written.
pub const LOG_FLUSH_EVERY: Duration = Duration::from_millis(20);
/// Bytes of queued lines from which the writer thread writes at once instead of waiting.
const HIGH_WATER: usize = 64 * 1024;
/// Bytes of queued lines beyond which further lines are dropped (and counted) until the writer
/// thread has written: standard error is stalled.
const CAPACITY: usize = 8 * 1024 * 1024;

/// Lines the server's log writer dropped (see [`init_server`]).
static DROPPED: AtomicU64 = AtomicU64::new(0);

/// Installs the global subscriber writing each line straight to standard error (once; later
/// calls are ignored). For the command-line tools: short-lived, every line out before exit.
pub fn init(format: LogFormat, level: &str) {
    install(format, level, std::io::stderr);
}

/// Installs the global subscriber for the long-running server (once; later calls are ignored).
/// The lines every request writes (the access line and the create's support line, at INFO)
/// are appended to a buffer in memory; a thread of its own writes the buffer to standard error
/// every [`LOG_FLUSH_EVERY`] (at once past 64 KiB), all queued lines in one write; every other
/// line (startup, migrations, warnings, errors) is written at once, so it may come before
/// per-request lines logged up to 20 ms earlier. A request never makes a system call for its
/// per-request lines, and never waits for standard error for them: when 8 MiB of lines are queued (standard error is stalled), further
/// lines are dropped and counted (`payments_log_lines_dropped_total`). Keep the returned guard
/// until the server has stopped: dropping it writes what is queued (lines logged after that go
/// straight to stderr). Lines queued when the process dies without dropping it (a crash,
/// `SIGKILL`) are lost: the last 20 ms or so, more when stderr was slow to take them; a panic's
/// own message goes straight to stderr and may come before the lines queued ahead of it. A
/// failed write to stderr counts its lines as dropped.
pub fn init_server(format: LogFormat, level: &str) -> LogGuard {
    let buffer = Arc::new(LogBuffer::default());
    let flusher = {
        let buffer = Arc::clone(&buffer);
        std::thread::Builder::new()
            .name("log-writer".into())
            .spawn(move || buffer.write_out(&mut std::io::stderr()))
    };
    match flusher {
        Ok(thread) => {
            install(format, level, BufferWriter(Arc::clone(&buffer)));
            LogGuard {
                flusher: Some((buffer, thread)),
            }
        }
        // No thread for it: write directly, as the tools do.
        Err(_) => {
            init(format, level);
            LogGuard { flusher: None }
        }
    }
}

/// Lines the server's log writer dropped so far because standard error was stalled.
pub fn dropped_log_lines() -> u64 {
    DROPPED.load(Ordering::Relaxed)
}

/// Keeps the server's log writer thread running; dropping it writes the queued lines and stops
/// the thread.
#[must_use = "dropping the guard stops the log writer"]
#[derive(Debug)]
pub struct LogGuard {
    flusher: Option<(Arc<LogBuffer>, JoinHandle<()>)>,
}

impl Drop for LogGuard {
    fn drop(&mut self) {
        if let Some((buffer, thread)) = self.flusher.take() {
            buffer.lock().closed = true;
            buffer.wake.notify_one();
            let _ = thread.join();
        }
    }
}

/// The server's queued log lines.
#[derive(Debug, Default)]
struct LogBuffer {
    queued: Mutex<Queued>,
    wake: Condvar,
}

#[derive(Debug, Default)]
struct Queued {
    bytes: Vec<u8>,
    closed: bool,
}

impl LogBuffer {
    fn lock(&self) -> MutexGuard<'_, Queued> {
        self.queued
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// Appends one formatted line (the subscriber writes each event with one `write_all`), or
    /// drops it when [`CAPACITY`] is reached.
    fn append(&self, line: &[u8]) {
        let mut q = self.lock();
        if q.closed {
            // The writer thread is gone (the server is stopping): straight to stderr.
            drop(q);
            let _ = std::io::stderr().write_all(line);
            return;
        }
        if q.bytes.len() + line.len() > CAPACITY {
            drop(q);
            DROPPED.fetch_add(1, Ordering::Relaxed);
            return;
        }
        q.bytes.extend_from_slice(line);
        if q.bytes.len() >= HIGH_WATER && q.bytes.len() - line.len() < HIGH_WATER {
            drop(q);
            self.wake.notify_one();
        }
    }

    /// The writer thread: every [`LOG_FLUSH_EVERY`], or at once past [`HIGH_WATER`], takes
    /// what is queued and writes it outside the lock; ends once closed and written out.
    fn write_out(&self, out: &mut dyn Write) {
        let mut spare = Vec::new();
        loop {
            let (mut taken, closed) = {
                let mut q = self.lock();
                if !q.closed && q.bytes.len() < HIGH_WATER {
                    q = self
                        .wake
                        .wait_timeout(q, LOG_FLUSH_EVERY)
                        .unwrap_or_else(std::sync::PoisonError::into_inner)
                        .0;
                }
                (std::mem::replace(&mut q.bytes, spare), q.closed)
            };
            if !taken.is_empty() && out.write_all(&taken).and_then(|()| out.flush()).is_err() {
                // Nowhere to report a failed write of the log itself but the counter.
                let lines = taken.iter().filter(|b| **b == b'\n').count();
                DROPPED.fetch_add(u64::try_from(lines).unwrap_or(u64::MAX), Ordering::Relaxed);
            }
            taken.clear();
            spare = taken;
            if closed && self.lock().bytes.is_empty() {
                return;
            }
        }
    }
}

/// The targets of the lines every request writes (the access line, the create's support line):
/// the ones the server queues. Everything else (startup, migrations, warnings, errors,
/// callbacks) is written at once.
const PER_REQUEST_TARGETS: [&str; 2] = ["payments_http::access", "payments_http::merchant"];

/// Whether an event is one of the per-request lines the server queues: at INFO or below (a
/// warning or an error is written at once), from [`PER_REQUEST_TARGETS`].
fn queued(meta: &tracing::Metadata<'_>) -> bool {
    *meta.level() >= tracing::Level::INFO && PER_REQUEST_TARGETS.contains(&meta.target())
}

/// The subscriber's writer: per-request lines into the [`LogBuffer`], the rest to stderr.
struct BufferWriter(Arc<LogBuffer>);

/// Where one line goes.
enum LineWriter<'a> {
    Queued(&'a LogBuffer),
    Direct(std::io::Stderr),
}

impl Write for LineWriter<'_> {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        match self {
            LineWriter::Queued(b) => b.write(buf),
            LineWriter::Direct(e) => e.write(buf),
        }
    }

    fn write_all(&mut self, buf: &[u8]) -> std::io::Result<()> {
        match self {
            LineWriter::Queued(b) => b.write_all(buf),
            LineWriter::Direct(e) => e.write_all(buf),
        }
    }

    fn flush(&mut self) -> std::io::Result<()> {
        match self {
            LineWriter::Queued(b) => b.flush(),
            LineWriter::Direct(e) => e.flush(),
        }
    }
}

impl<'a> MakeWriter<'a> for BufferWriter {
    type Writer = LineWriter<'a>;

    fn make_writer(&'a self) -> LineWriter<'a> {
        LineWriter::Direct(std::io::stderr())
    }

    fn make_writer_for(&'a self, meta: &tracing::Metadata<'_>) -> LineWriter<'a> {
        if queued(meta) {
            LineWriter::Queued(&self.0)
        } else {
            LineWriter::Direct(std::io::stderr())
        }
    }
}

impl Write for &LogBuffer {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        self.append(buf);
        Ok(buf.len())
    }

    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

fn install<W>(format: LogFormat, level: &str, writer: W)
where
    W: for<'a> MakeWriter<'a> + Send + Sync + 'static,
{
    let filter = EnvFilter::try_new(level).unwrap_or_else(|_| EnvFilter::new("info"));
    // Colours only for a person at a terminal, not in files or journald.
    let builder = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_ansi(std::io::stderr().is_terminal())
        .with_writer(writer);
    let _ = match format {
        LogFormat::Json => builder.json().flatten_event(true).try_init(),
        LogFormat::Text => builder.try_init(),
    };
}

#[cfg(test)]
mod tests {
    use std::sync::mpsc;
    use std::time::Instant;

    use super::*;

    /// A sink that records what it is given, optionally held until released.
    struct Sink {
        out: Arc<Mutex<Vec<u8>>>,
        hold: Option<mpsc::Receiver<()>>,
    }

    impl Write for Sink {
        fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
            if let Some(hold) = self.hold.take() {
                let _ = hold.recv();
            }
            self.out.lock().unwrap().extend_from_slice(buf);
            Ok(buf.len())
        }
        fn flush(&mut self) -> std::io::Result<()> {
            Ok(())
        }
    }

    fn start(hold: Option<mpsc::Receiver<()>>) -> (Arc<LogBuffer>, Arc<Mutex<Vec<u8>>>, LogGuard) {
        let buffer = Arc::new(LogBuffer::default());
        let out = Arc::new(Mutex::new(Vec::new()));
        let mut sink = Sink {
            out: Arc::clone(&out),
            hold,
        };
        let b = Arc::clone(&buffer);
        let thread = std::thread::spawn(move || b.write_out(&mut sink));
        let guard = LogGuard {
            flusher: Some((Arc::clone(&buffer), thread)),
        };
        (buffer, out, guard)
    }

    #[test]
    fn queued_lines_are_written_in_order_within_the_flush_interval_and_at_close() {
        let (buffer, out, guard) = start(None);
        (&*buffer).write_all(b"one\n").unwrap();
        (&*buffer).write_all(b"two\n").unwrap();
        let deadline = Instant::now() + Duration::from_secs(5);
        while out.lock().unwrap().as_slice() != b"one\ntwo\n" {
            assert!(Instant::now() < deadline, "not written within 5 s");
            std::thread::sleep(Duration::from_millis(5));
        }
        (&*buffer).write_all(b"three\n").unwrap();
        drop(guard);
        assert_eq!(out.lock().unwrap().as_slice(), b"one\ntwo\nthree\n");
    }

    /// Standard error stalled: requests go on appending without waiting, lines beyond the
    /// capacity are dropped and counted, and once it moves again every kept line is written.
    #[test]
    fn a_stalled_writer_drops_lines_beyond_the_capacity_instead_of_blocking() {
        let (release, hold) = mpsc::channel();
        let (buffer, out, guard) = start(Some(hold));
        let line = [b'x'; 1023]
            .iter()
            .copied()
            .chain(std::iter::once(b'\n'))
            .collect::<Vec<u8>>();
        // Past the high-water mark in one append, so that the writer thread takes all of it at
        // once and stalls writing it.
        let first: Vec<u8> = line.repeat(HIGH_WATER / 1024 + 1);
        (&*buffer).write_all(&first).unwrap();
        let deadline = Instant::now() + Duration::from_secs(5);
        while !buffer.lock().bytes.is_empty() {
            assert!(Instant::now() < deadline, "the first part was not taken");
            std::thread::sleep(Duration::from_millis(1));
        }
        let dropped_before = dropped_log_lines();
        let lines = CAPACITY / 1024 + 100;
        for _ in 0..lines {
            (&*buffer).write_all(&line).unwrap();
        }
        assert_eq!(dropped_log_lines() - dropped_before, 100);
        release.send(()).unwrap();
        drop(guard);
        let written = out.lock().unwrap().len();
        assert_eq!(written, (HIGH_WATER / 1024 + 1 + CAPACITY / 1024) * 1024);
    }
}
