//! Logging with `tracing`: human-readable or JSON lines, filtered by `PAYMENTS_LOG`/the
//! `log_level` setting. Handlers log ids and outcomes, never tokens, keys, secrets or bodies.

use std::io::{IsTerminal, Write};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Condvar, Mutex, MutexGuard, OnceLock};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use tracing_subscriber::fmt::MakeWriter;
use tracing_subscriber::EnvFilter;

use crate::config::{LogFormat, LogSettings};

/// How long a per-request log line waits in memory at most before it is written.
pub const LOG_FLUSH_EVERY: Duration = Duration::from_millis(20);
/// Bytes of queued lines from which the writer thread writes at once instead of waiting.
const HIGH_WATER: usize = 64 * 1024;
/// The smallest queue (`log.queue_kib`), in bytes.
const MIN_CAPACITY: usize = 64 * 1024;

/// Lines the server's log writer dropped (see [`init_server`]).
static DROPPED: AtomicU64 = AtomicU64::new(0);
/// The server's log queue, once [`init_server`] made it.
static SERVER_LOG: OnceLock<Arc<LogBuffer>> = OnceLock::new();

/// Installs the global subscriber writing each line straight to standard error (once; later
/// calls are ignored). For the command-line tools: short-lived, every line out before exit,
/// in order with what they print.
pub fn init(format: LogFormat, level: &str) {
    install(format, level, std::io::stderr, None);
}

/// Installs the global subscriber for the long-running server (once; later calls are ignored).
/// No line is written by the code that logs it: every line is appended to a queue in memory,
/// and a thread of its own (`log-writer`) writes what is queued to standard error, all of it
/// in one write. The lines every request writes (the access line and the create's support
/// line, at INFO) wait up to [`LOG_FLUSH_EVERY`] (less past 64 KiB); any other line (startup,
/// migrations, warnings, errors) wakes the writer at once. Lines reach stderr in the order
/// they were logged. When `log.queue_kib` of lines are queued (standard error is stalled: a
/// pipe nobody reads, a stuck journald), further lines are dropped and counted
/// (`payments_log_lines_dropped_total`), and once stderr takes lines again the writer logs a
/// warning saying how many were dropped. Keep the returned guard until the server has stopped:
/// dropping it writes what is queued (lines logged after that go straight to stderr). Lines
/// queued when the process dies without dropping it (a crash, `SIGKILL`) are lost: normally
/// the last 20 ms of per-request lines, more when stderr was slow to take them; a panic's own
/// message goes straight to stderr and may come before lines queued ahead of it. A failed
/// write to stderr counts its lines as dropped.
///
/// With `[telemetry] otlp_endpoint` set (and the feature `otlp`), spans are also exported as
/// OpenTelemetry traces over OTLP/HTTP ([`traces`]); the guard flushes them when dropped.
pub fn init_server(log: &LogSettings, telemetry: &crate::config::TelemetrySettings) -> LogGuard {
    let traces = traces::start(telemetry);
    let capacity = log.queue_kib.saturating_mul(1024).max(MIN_CAPACITY);
    let mut guard = init_server_logs(log, capacity, traces.as_ref().map(|t| t.layer()));
    guard.traces = traces;
    guard
}

fn init_server_logs(log: &LogSettings, capacity: usize, traces: Option<traces::Layer>) -> LogGuard {
    let buffer = Arc::new(LogBuffer::new(capacity));
    let flusher = {
        let buffer = Arc::clone(&buffer);
        std::thread::Builder::new()
            .name("log-writer".into())
            .spawn(move || buffer.write_out(&mut std::io::stderr()))
    };
    match flusher {
        Ok(thread) => {
            let _ = SERVER_LOG.set(Arc::clone(&buffer));
            install(
                log.format,
                &log.level,
                BufferWriter(Arc::clone(&buffer)),
                traces,
            );
            LogGuard {
                flusher: Some((buffer, thread)),
                traces: None,
            }
        }
        // No thread for it: write directly, as the tools do.
        Err(_) => {
            install(log.format, &log.level, std::io::stderr, traces);
            LogGuard {
                flusher: None,
                traces: None,
            }
        }
    }
}

/// Lines the server's log writer dropped so far because standard error was stalled.
pub fn dropped_log_lines() -> u64 {
    DROPPED.load(Ordering::Relaxed)
}

/// Waits, at most `limit`, until the server's log writer has written every line logged before
/// the call (at once without [`init_server`]). Blocks the calling thread: from async code, call
/// it on a blocking thread. The server calls it after its startup line, before it serves, so
/// that a node killed once it answers has that line on stderr; a stalled stderr costs `limit`.
pub fn wait_written(limit: Duration) {
    if let Some(buffer) = SERVER_LOG.get() {
        buffer.wait_written(limit);
    }
}

/// Keeps the server's log writer thread running; dropping it writes the queued lines and stops
/// the thread.
#[must_use = "dropping the guard stops the log writer"]
#[derive(Debug)]
pub struct LogGuard {
    flusher: Option<(Arc<LogBuffer>, JoinHandle<()>)>,
    traces: Option<traces::Traces>,
}

impl Drop for LogGuard {
    fn drop(&mut self) {
        // The traces first: their exporter may log a failure.
        if let Some(traces) = self.traces.take() {
            traces.shutdown();
        }
        if let Some((buffer, thread)) = self.flusher.take() {
            buffer.lock().closed = true;
            buffer.wake.notify_one();
            let _ = thread.join();
        }
    }
}

/// The server's queued log lines.
#[derive(Debug)]
struct LogBuffer {
    queued: Mutex<Queued>,
    /// Wakes the writer thread.
    wake: Condvar,
    /// Told each time the writer thread has written what it took.
    written: Condvar,
    /// Bytes of queued lines beyond which further lines are dropped (and counted) until the
    /// writer thread has taken them: standard error is stalled.
    capacity: usize,
}

#[derive(Debug, Default)]
struct Queued {
    bytes: Vec<u8>,
    /// A line that must not wait for the flush interval is queued.
    urgent: bool,
    closed: bool,
    /// How many times the writer thread took the queue, and how many of those it has written.
    taken: u64,
    written: u64,
}

impl LogBuffer {
    fn new(capacity: usize) -> LogBuffer {
        LogBuffer {
            queued: Mutex::default(),
            wake: Condvar::new(),
            written: Condvar::new(),
            capacity,
        }
    }

    fn lock(&self) -> MutexGuard<'_, Queued> {
        self.queued
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// Appends one formatted line (the subscriber writes each event with one `write_all`), or
    /// drops it when the capacity is reached. An `urgent` line wakes the writer thread at once.
    fn append(&self, line: &[u8], urgent: bool) {
        let mut q = self.lock();
        if q.closed {
            // The writer thread is gone (the server is stopping): straight to stderr.
            drop(q);
            let _ = std::io::stderr().write_all(line);
            return;
        }
        if q.bytes.len() + line.len() > self.capacity {
            drop(q);
            DROPPED.fetch_add(1, Ordering::Relaxed);
            return;
        }
        q.bytes.extend_from_slice(line);
        let crossed = q.bytes.len() >= HIGH_WATER && q.bytes.len() - line.len() < HIGH_WATER;
        let wake = (urgent && !q.urgent) || crossed;
        q.urgent |= urgent;
        drop(q);
        if wake {
            self.wake.notify_one();
        }
    }

    /// The writer thread: takes what is queued (at once for an urgent line or past
    /// [`HIGH_WATER`], else every [`LOG_FLUSH_EVERY`]) and writes it outside the lock; ends once
    /// closed and written out. After a write that succeeded, says how many lines were dropped
    /// since it last said so, if any.
    fn write_out(&self, out: &mut dyn Write) {
        let mut spare = Vec::new();
        let mut reported = DROPPED.load(Ordering::Relaxed);
        loop {
            let (mut taken, closed) = {
                let mut q = self.lock();
                if !q.closed && !q.urgent && q.bytes.len() < HIGH_WATER {
                    q = self
                        .wake
                        .wait_timeout(q, LOG_FLUSH_EVERY)
                        .unwrap_or_else(std::sync::PoisonError::into_inner)
                        .0;
                }
                q.urgent = false;
                q.taken += 1;
                (std::mem::replace(&mut q.bytes, spare), q.closed)
            };
            let ok = taken.is_empty() || out.write_all(&taken).and_then(|()| out.flush()).is_ok();
            if !ok {
                // Nowhere to report a failed write of the log itself but the counter.
                let lines = taken.iter().filter(|b| **b == b'\n').count();
                DROPPED.fetch_add(u64::try_from(lines).unwrap_or(u64::MAX), Ordering::Relaxed);
            }
            taken.clear();
            spare = taken;
            {
                let mut q = self.lock();
                q.written = q.taken;
            }
            self.written.notify_all();
            if ok {
                reported = report_dropped(reported);
            }
            if closed && self.lock().bytes.is_empty() {
                return;
            }
        }
    }

    /// Waits, at most `limit`, until what is queued now has been written.
    fn wait_written(&self, limit: Duration) {
        let deadline = Instant::now() + limit;
        let mut q = self.lock();
        let target = q.taken + u64::from(!q.bytes.is_empty());
        q.urgent = true;
        self.wake.notify_one();
        while q.written < target {
            let left = deadline.saturating_duration_since(Instant::now());
            if left.is_zero() {
                return;
            }
            q = self
                .written
                .wait_timeout(q, left)
                .unwrap_or_else(std::sync::PoisonError::into_inner)
                .0;
        }
    }
}

/// Logs a warning when lines were dropped since `reported` (the count last reported); answers
/// the count now. The warning is queued like any line (and may itself be dropped, and counted).
fn report_dropped(reported: u64) -> u64 {
    let now = DROPPED.load(Ordering::Relaxed);
    if now > reported {
        tracing::warn!(
            dropped = now - reported,
            dropped_total = now,
            "log lines dropped: standard error did not take them"
        );
    }
    now
}

/// The targets of the lines every request writes (the access line, the create's support line):
/// the ones that may wait for the flush interval. Every other line wakes the writer at once.
const PER_REQUEST_TARGETS: [&str; 2] = ["payments_http::access", "payments_http::merchant"];

/// Whether an event is one of the per-request lines that may wait: at INFO or below (a warning
/// or an error is urgent), from [`PER_REQUEST_TARGETS`].
fn may_wait(meta: &tracing::Metadata<'_>) -> bool {
    *meta.level() >= tracing::Level::INFO && PER_REQUEST_TARGETS.contains(&meta.target())
}

/// The subscriber's writer: every line into the [`LogBuffer`].
struct BufferWriter(Arc<LogBuffer>);

/// One line on its way into the queue.
struct LineWriter<'a> {
    buffer: &'a LogBuffer,
    urgent: bool,
}

impl Write for LineWriter<'_> {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        self.buffer.append(buf, self.urgent);
        Ok(buf.len())
    }

    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

impl<'a> MakeWriter<'a> for BufferWriter {
    type Writer = LineWriter<'a>;

    fn make_writer(&'a self) -> LineWriter<'a> {
        LineWriter {
            buffer: &self.0,
            urgent: true,
        }
    }

    fn make_writer_for(&'a self, meta: &tracing::Metadata<'_>) -> LineWriter<'a> {
        LineWriter {
            buffer: &self.0,
            urgent: !may_wait(meta),
        }
    }
}

/// The target of the spans made for traces only (the request, store calls, the provider call,
/// callback deliveries): the log never shows them, whatever its filter.
pub const TRACE_TARGET: &str = payments_http::trace::TARGET;

fn install<W>(format: LogFormat, level: &str, writer: W, traces: Option<traces::Layer>)
where
    W: for<'a> MakeWriter<'a> + Send + Sync + 'static,
{
    use tracing_subscriber::layer::SubscriberExt;
    use tracing_subscriber::util::SubscriberInitExt;
    use tracing_subscriber::Layer;
    let filter = |level: &str| {
        EnvFilter::try_new(format!("{level},{TRACE_TARGET}=off"))
            .unwrap_or_else(|_| EnvFilter::new(format!("info,{TRACE_TARGET}=off")))
    };
    // Colours only for a person at a terminal, not in files or journald.
    let fmt = tracing_subscriber::fmt::layer()
        .with_ansi(std::io::stderr().is_terminal())
        .with_writer(writer);
    let fmt = match format {
        LogFormat::Json => fmt.json().flatten_event(true).boxed(),
        LogFormat::Text => fmt.boxed(),
    };
    let _ = tracing_subscriber::registry()
        .with(traces)
        .with(fmt.with_filter(filter(level)))
        .try_init();
}

/// OpenTelemetry traces (feature `otlp`): the spans of [`TRACE_TARGET`] and the handlers',
/// exported over OTLP/HTTP in batches, with W3C trace context (`traceparent`) taken from
/// requests and passed to the upstream.
#[cfg(feature = "otlp")]
pub mod traces {
    use opentelemetry::trace::TracerProvider as _;
    use opentelemetry_otlp::WithExportConfig as _;
    use opentelemetry_sdk::trace::{Sampler, SdkTracerProvider, SpanExporter};
    use tracing_subscriber::Layer as _;

    use crate::config::TelemetrySettings;

    /// Batches of spans the exporter could not deliver since the start.
    static EXPORT_FAILURES: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);

    /// Batches of spans the exporter could not deliver since the start (the collector refused
    /// them, did not answer within 5 s, or could not be reached):
    /// `payments_trace_export_failures_total`.
    pub fn export_failures() -> u64 {
        EXPORT_FAILURES.load(std::sync::atomic::Ordering::Relaxed)
    }

    /// An exporter that counts the batches `E` could not deliver and logs a warning at the
    /// 1st, 2nd, 4th, 8th, ... failure (an unreachable collector costs a few lines, not one
    /// per batch).
    #[derive(Debug)]
    struct Counted<E>(E);

    impl<E: SpanExporter> SpanExporter for Counted<E> {
        fn export(
            &self,
            batch: Vec<opentelemetry_sdk::trace::SpanData>,
        ) -> impl std::future::Future<Output = opentelemetry_sdk::error::OTelSdkResult> + Send
        {
            let spans = batch.len();
            let export = self.0.export(batch);
            async move {
                let result = export.await;
                if let Err(e) = &result {
                    let n = EXPORT_FAILURES.fetch_add(1, std::sync::atomic::Ordering::Relaxed) + 1;
                    if n.is_power_of_two() {
                        tracing::warn!(
                            failures = n,
                            spans,
                            error = %e,
                            "traces could not be exported to telemetry.otlp_endpoint: this batch \
                             is lost (payments_trace_export_failures_total counts them)"
                        );
                    }
                }
                result
            }
        }

        fn shutdown_with_timeout(
            &mut self,
            timeout: std::time::Duration,
        ) -> opentelemetry_sdk::error::OTelSdkResult {
            self.0.shutdown_with_timeout(timeout)
        }

        fn force_flush(&mut self) -> opentelemetry_sdk::error::OTelSdkResult {
            self.0.force_flush()
        }

        fn set_resource(&mut self, resource: &opentelemetry_sdk::Resource) {
            self.0.set_resource(resource);
        }
    }

    /// The layer that turns spans into OpenTelemetry spans.
    pub type Layer = Box<dyn tracing_subscriber::Layer<tracing_subscriber::Registry> + Send + Sync>;

    /// The running exporter.
    #[derive(Debug)]
    pub struct Traces {
        provider: SdkTracerProvider,
    }

    /// Starts the exporter when `settings` name an endpoint (`None` otherwise, or when it
    /// cannot be built: that is logged and the server runs without traces).
    pub fn start(settings: &TelemetrySettings) -> Option<Traces> {
        let endpoint = settings.otlp_endpoint.clone()?;
        let (name, ratio) = (settings.service_name.clone(), settings.sample_ratio);
        // The blocking HTTP client may be neither made nor dropped on an async runtime's
        // thread: the exporter is built on a thread of its own.
        let built = std::thread::spawn(move || {
            let exporter = opentelemetry_otlp::SpanExporter::builder()
                .with_http()
                .with_endpoint(endpoint)
                .with_timeout(std::time::Duration::from_secs(5))
                .build()?;
            Ok::<_, opentelemetry_otlp::ExporterBuildError>(
                SdkTracerProvider::builder()
                    .with_batch_exporter(Counted(exporter))
                    .with_sampler(Sampler::ParentBased(Box::new(Sampler::TraceIdRatioBased(
                        ratio,
                    ))))
                    .with_resource(
                        opentelemetry_sdk::Resource::builder()
                            .with_service_name(name)
                            .build(),
                    )
                    .build(),
            )
        })
        .join();
        match built {
            Ok(Ok(provider)) => {
                opentelemetry::global::set_text_map_propagator(
                    opentelemetry_sdk::propagation::TraceContextPropagator::new(),
                );
                payments_http::trace::set_remote_parent(remote_parent);
                Some(Traces { provider })
            }
            Ok(Err(e)) => {
                eprintln!("telemetry.otlp_endpoint: cannot export traces: {e}");
                None
            }
            Err(_) => None,
        }
    }

    impl Traces {
        /// The tracing layer exporting to this provider: the trace-only spans and the
        /// handlers' spans, at INFO and above.
        pub fn layer(&self) -> Layer {
            let filter = tracing_subscriber::filter::Targets::new()
                .with_target(super::TRACE_TARGET, tracing::Level::INFO)
                .with_target("payments_http", tracing::Level::INFO)
                .with_target("payments_core", tracing::Level::INFO)
                .with_target("payments_server", tracing::Level::INFO);
            tracing_opentelemetry::layer()
                .with_tracer(self.provider.tracer("payments-server"))
                .with_filter(filter)
                .boxed()
        }

        /// Exports what is queued and stops (on a thread of its own, see [`start`]).
        pub fn shutdown(self) {
            let _ = std::thread::spawn(move || {
                let _ = self.provider.shutdown();
            })
            .join();
        }
    }

    /// Makes `span` a child of the trace named by the request's `traceparent`, if any.
    fn remote_parent(headers: &axum::http::HeaderMap, span: &tracing::Span) {
        use tracing_opentelemetry::OpenTelemetrySpanExt;
        let context = opentelemetry::global::get_text_map_propagator(|p| {
            p.extract(&opentelemetry_http::HeaderExtractor(headers))
        });
        let _ = span.set_parent(context);
    }

    /// The headers that carry the current span's trace to an upstream (`traceparent`).
    pub fn current_context_headers() -> Vec<(String, String)> {
        use tracing_opentelemetry::OpenTelemetrySpanExt;
        let context = tracing::Span::current().context();
        let mut out = std::collections::HashMap::new();
        opentelemetry::global::get_text_map_propagator(|p| p.inject_context(&context, &mut out));
        out.into_iter().collect()
    }
}

/// Without the feature `otlp`: no traces (a configured endpoint is refused at start).
#[cfg(not(feature = "otlp"))]
pub mod traces {
    use crate::config::TelemetrySettings;

    /// No layer.
    pub type Layer = Box<dyn tracing_subscriber::Layer<tracing_subscriber::Registry> + Send + Sync>;

    /// Nothing runs.
    #[derive(Debug)]
    pub enum Traces {}

    /// Warns when an endpoint is set: this build cannot export.
    pub fn start(settings: &TelemetrySettings) -> Option<Traces> {
        if settings.otlp_endpoint.is_some() {
            eprintln!(
                "telemetry.otlp_endpoint is set, but this build of payments-server has no \
                 OpenTelemetry export (build it with the feature otlp, on by default)"
            );
        }
        None
    }

    impl Traces {
        /// The layer (never made: there is no `Traces`).
        pub fn layer(&self) -> Layer {
            match *self {}
        }

        /// Nothing to stop.
        pub fn shutdown(self) {}
    }

    /// No headers.
    pub fn current_context_headers() -> Vec<(String, String)> {
        Vec::new()
    }
}

#[cfg(test)]
mod tests {
    use std::sync::mpsc;
    use std::time::Instant;

    use super::*;

    /// The queue's capacity in these tests: the default `log.queue_kib`.
    const CAPACITY: usize = 8 * 1024 * 1024;

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
        let buffer = Arc::new(LogBuffer::new(CAPACITY));
        let out = Arc::new(Mutex::new(Vec::new()));
        let mut sink = Sink {
            out: Arc::clone(&out),
            hold,
        };
        let b = Arc::clone(&buffer);
        let thread = std::thread::spawn(move || b.write_out(&mut sink));
        let guard = LogGuard {
            flusher: Some((Arc::clone(&buffer), thread)),
            traces: None,
        };
        (buffer, out, guard)
    }

    #[test]
    fn queued_lines_are_written_in_order_within_the_flush_interval_and_at_close() {
        let (buffer, out, guard) = start(None);
        buffer.append(b"one\n", false);
        buffer.append(b"two\n", false);
        let deadline = Instant::now() + Duration::from_secs(5);
        while out.lock().unwrap().as_slice() != b"one\ntwo\n" {
            assert!(Instant::now() < deadline, "not written within 5 s");
            std::thread::sleep(Duration::from_millis(5));
        }
        buffer.append(b"three\n", false);
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
        buffer.append(&first, false);
        let deadline = Instant::now() + Duration::from_secs(5);
        while !buffer.lock().bytes.is_empty() {
            assert!(Instant::now() < deadline, "the first part was not taken");
            std::thread::sleep(Duration::from_millis(1));
        }
        let dropped_before = dropped_log_lines();
        let lines = CAPACITY / 1024 + 100;
        for _ in 0..lines {
            buffer.append(&line, false);
        }
        assert_eq!(dropped_log_lines() - dropped_before, 100);
        release.send(()).unwrap();
        drop(guard);
        let written = out.lock().unwrap().len();
        assert_eq!(written, (HIGH_WATER / 1024 + 1 + CAPACITY / 1024) * 1024);
    }

    /// A line that must not wait (a warning, the startup line) is written on its own, and
    /// `wait_written` returns once it is.
    #[test]
    fn wait_written_returns_once_the_lines_logged_before_are_written() {
        let (buffer, out, guard) = start(None);
        buffer.append(b"request\n", false);
        buffer.append(b"started\n", true);
        buffer.wait_written(Duration::from_secs(60));
        assert_eq!(out.lock().unwrap().as_slice(), b"request\nstarted\n");
        drop(guard);
    }
}
