//! What a listener allows a connection: a cap on the connections held open at once, a
//! deadline for a request's headers that also closes idle kept-alive connections, HTTP/1.1
//! only on plain TCP (a connection that opens with HTTP/2's preface is closed; HTTP/2 only
//! through TLS, with bounded streams).
//!
//! A hostile client can open connections and send nothing, send headers a byte at a time,
//! or trickle a body. None of it takes anything other clients need: connections over the cap
//! are answered `503` and closed at once, slow headers and idle connections are closed after
//! the header timeout, and a body's slow arrival is bounded by the body timeout of the
//! merchant API (`408`), before the request takes one of the in-flight slots.

use std::future::Future;
use std::io;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::Duration;

use axum_server::accept::Accept;
use hyper_util::rt::{TokioExecutor, TokioTimer};
use hyper_util::server::conn::auto::Builder;
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::net::TcpStream;
use tokio::sync::{watch, OwnedSemaphorePermit, Semaphore};

/// The most a connection's read buffer grows to (headers beyond it are hyper's own `431`).
pub const MAX_READ_BUFFER: usize = 64 * 1024;

/// HTTP/2 streams one TLS connection may have open at once.
pub const MAX_H2_STREAMS: u32 = 32;

/// The answer to a connection over the cap (plain TCP only: on TLS it is simply closed).
const OVER_CAP: &[u8] = b"HTTP/1.1 503 Service Unavailable\r\n\
content-type: application/json\r\n\
retry-after: 1\r\n\
connection: close\r\n\
content-length: 94\r\n\r\n\
{\"code\":\"service_unavailable\",\"message\":\"too many connections; retry shortly\",\"request_id\":\"\"}";

/// The connection settings of one listener.
#[derive(Debug, Clone)]
pub struct ConnectionLimits {
    /// Connections held open at once.
    pub max_connections: usize,
    /// Deadline for a request's headers, and for the first byte of the next request on an
    /// idle kept-alive connection.
    pub header_timeout: Duration,
    /// Whether the listener speaks TLS (HTTP/2 is offered only then, by ALPN).
    pub tls: bool,
    /// How long an HTTP/2 connection may go without a request (a `HEADERS`, `DATA`,
    /// `CONTINUATION` or `RST_STREAM` frame from the client) before it is closed, whatever
    /// pings and settings it answers; longer than any request may take.
    pub idle_timeout: Duration,
    /// Set to `true` when the server starts its graceful shutdown: a connection still waiting
    /// for its first byte is closed then. Until a connection is handed to the HTTP layer, the
    /// graceful shutdown cannot ask it to close, and the server's drain would wait for it
    /// until the header timeout.
    pub draining: Option<watch::Receiver<bool>>,
}

impl ConnectionLimits {
    /// Applies the header timeout (hyper closes a connection whose headers, or whose next
    /// request on keep-alive, do not arrive in time), HTTP/1.1 only without TLS, and a bound
    /// on HTTP/2 streams and header sizes with it.
    pub fn configure(&self, builder: &mut Builder<TokioExecutor>) {
        if !self.tls {
            let owned = std::mem::replace(builder, Builder::new(TokioExecutor::new()));
            *builder = owned.http1_only();
        }
        builder
            .http1()
            .timer(TokioTimer::new())
            .header_read_timeout(self.header_timeout)
            .max_headers(100)
            // Bounds a connection's read buffer (hyper's default grows to ~400 KiB): the
            // 8 KiB target and 16 KiB of headers the API accepts fit with room to spare.
            .max_buf_size(MAX_READ_BUFFER)
            .keep_alive(true);
        builder
            .http2()
            .timer(TokioTimer::new())
            .max_concurrent_streams(MAX_H2_STREAMS)
            .max_header_list_size(32 * 1024)
            .keep_alive_interval(self.header_timeout)
            .keep_alive_timeout(self.header_timeout);
    }
}

/// An acceptor that holds one slot of a shared connection cap per connection, around the
/// listener's own acceptor (plain or TLS).
#[derive(Debug, Clone)]
pub struct CappedAcceptor<A> {
    inner: A,
    slots: Arc<Semaphore>,
    tls: bool,
    first_byte: Duration,
    idle_timeout: Duration,
    draining: Option<watch::Receiver<bool>>,
}

impl<A> CappedAcceptor<A> {
    /// `inner` with at most `limits.max_connections` connections open at once.
    pub fn new(inner: A, limits: &ConnectionLimits) -> Self {
        CappedAcceptor {
            inner,
            slots: Arc::new(Semaphore::new(limits.max_connections)),
            tls: limits.tls,
            first_byte: limits.header_timeout,
            idle_timeout: limits.idle_timeout,
            draining: limits.draining.clone(),
        }
    }

    /// Connections that could be accepted now.
    pub fn free_slots(&self) -> usize {
        self.slots.available_permits()
    }
}

type Accepting<T> = Pin<Box<dyn Future<Output = io::Result<T>> + Send>>;

impl<A, S> Accept<TcpStream, S> for CappedAcceptor<A>
where
    A: Accept<TcpStream, S> + Clone + Send + Sync + 'static,
    A::Future: Send + 'static,
    A::Stream: Send + 'static,
    A::Service: Send + 'static,
    S: Send + 'static,
{
    type Stream = Capped<A::Stream>;
    type Service = A::Service;
    type Future = Accepting<(Self::Stream, Self::Service)>;

    fn accept(&self, stream: TcpStream, service: S) -> Self::Future {
        let Ok(slot) = self.slots.clone().try_acquire_owned() else {
            if !self.tls {
                // Best effort, never waiting: a client that does not read gets a reset.
                let _ = stream.try_write(OVER_CAP);
            }
            tracing::debug!("connection refused: the connection cap is reached");
            return Box::pin(std::future::ready(Err(io::Error::other(
                "connection cap reached",
            ))));
        };
        let inner = self.inner.clone();
        let first_byte = self.first_byte;
        let tls = self.tls;
        let idle_timeout = self.idle_timeout;
        let mut draining = self.draining.clone();
        Box::pin(async move {
            // The HTTP layer's header deadline starts with the first byte (its protocol
            // detection waits for one), so a connection that sends nothing is bounded here.
            // On plain TCP the first bytes are also looked at for HTTP/2's preface: hyper's
            // server detects it and would speak HTTP/2 whatever the builder says (axum-server
            // serves through `serve_connection_with_upgrades`, which ignores `http1_only`).
            let start = tokio::time::Instant::now() + first_byte;
            let drained = async {
                match draining.as_mut() {
                    Some(rx) => drop(rx.wait_for(|draining| *draining).await),
                    None => std::future::pending().await,
                }
            };
            let first = tokio::select! {
                first = tokio::time::timeout_at(start, first_bytes(&stream, tls)) => first,
                () = drained => {
                    tracing::debug!("connection closed: the server is shutting down");
                    return Err(io::Error::other("the server is shutting down"));
                }
            };
            match first {
                Ok(Ok(FirstBytes::Http1OrTls)) => {}
                Ok(Ok(FirstBytes::Http2Preface)) => {
                    tracing::debug!("connection closed: HTTP/2 in clear text is not spoken");
                    return Err(io::Error::new(
                        io::ErrorKind::InvalidData,
                        "HTTP/2 in clear text is not spoken",
                    ));
                }
                Ok(Err(e)) => return Err(e),
                Err(_) => {
                    tracing::debug!("connection closed: no request within the header timeout");
                    return Err(io::Error::new(
                        io::ErrorKind::TimedOut,
                        "no request within the header timeout",
                    ));
                }
            }
            let (stream, service) = inner.accept(stream, service).await?;
            Ok((
                Capped {
                    inner: stream,
                    _slot: slot,
                    // HTTP/2 is spoken only over TLS, so only a TLS connection is watched.
                    h2: tls.then(|| H2Watch::new(idle_timeout)),
                },
                service,
            ))
        })
    }
}

/// What a connection's first bytes say.
#[derive(Debug, PartialEq, Eq)]
enum FirstBytes {
    /// Anything but HTTP/2's preface (on TLS the first byte alone is waited for).
    Http1OrTls,
    /// `PRI * HTTP/2.0`: a client with prior knowledge of HTTP/2, on plain TCP.
    Http2Preface,
}

/// The start of HTTP/2's connection preface (RFC 9113, section 3.4); no HTTP/1.1 request
/// starts so (`PRI` is not a method any route has, and RFC 9113 reserves it).
const H2_PREFACE_START: &[u8] = b"PRI * HTTP/2.0";

/// Waits for the first byte of `stream` and, on plain TCP, for as many more as tell an
/// HTTP/1.1 request from HTTP/2's preface; nothing is consumed. A request line arrives in one
/// segment from every real client; bytes that trickle in are re-read every 5 ms, within the
/// caller's header deadline.
async fn first_bytes(stream: &TcpStream, tls: bool) -> io::Result<FirstBytes> {
    let mut probe = [0u8; H2_PREFACE_START.len()];
    loop {
        let n = stream.peek(&mut probe).await?;
        if n == 0 || tls {
            return Ok(FirstBytes::Http1OrTls);
        }
        let seen = &probe[..n];
        if !H2_PREFACE_START.starts_with(seen) {
            return Ok(FirstBytes::Http1OrTls);
        }
        if n == H2_PREFACE_START.len() {
            return Ok(FirstBytes::Http2Preface);
        }
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
}

/// A connection holding its slot of the cap until it is dropped, and on TLS watching for an
/// HTTP/2 connection kept alive without requests.
#[derive(Debug)]
pub struct Capped<S> {
    inner: S,
    _slot: OwnedSemaphorePermit,
    h2: Option<H2Watch>,
}

/// The whole client connection preface of HTTP/2 (RFC 9113, section 3.4).
const H2_PREFACE: &[u8] = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n";

/// Where the frame reader of [`H2Watch`] is in the client's bytes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum FrameReader {
    /// `n` bytes of the preface seen so far.
    Preface(usize),
    /// `n` bytes of a frame header (9 in all) seen so far.
    Header([u8; 9], usize),
    /// This many payload bytes of the current frame still to pass.
    Payload(usize),
    /// Not an HTTP/2 connection (HTTP/1.1 over TLS): nothing to watch.
    NotH2,
}

/// Reads the frame headers of an HTTP/2 connection as the client's bytes pass (after TLS),
/// to tell requests from the pings, settings and window updates that keep a connection open
/// without using it. hyper closes a connection whose client stops answering pings, but not
/// one that answers them: without this, such connections would hold their slots of the cap
/// for ever.
#[derive(Debug)]
struct H2Watch {
    reader: FrameReader,
    idle_timeout: Duration,
    last_request: tokio::time::Instant,
    timer: Pin<Box<tokio::time::Sleep>>,
}

impl H2Watch {
    fn new(idle_timeout: Duration) -> H2Watch {
        let now = tokio::time::Instant::now();
        H2Watch {
            reader: FrameReader::Preface(0),
            idle_timeout,
            last_request: now,
            timer: Box::pin(tokio::time::sleep_until(now + idle_timeout)),
        }
    }

    /// Passes the client's next bytes through the frame reader.
    fn feed(&mut self, mut bytes: &[u8]) {
        while !bytes.is_empty() {
            match &mut self.reader {
                FrameReader::NotH2 => return,
                FrameReader::Preface(seen) => {
                    if bytes[0] != H2_PREFACE[*seen] {
                        self.reader = FrameReader::NotH2;
                        return;
                    }
                    *seen += 1;
                    bytes = &bytes[1..];
                    if *seen == H2_PREFACE.len() {
                        self.reader = FrameReader::Header([0; 9], 0);
                    }
                }
                FrameReader::Header(header, seen) => {
                    let take = (9 - *seen).min(bytes.len());
                    header[*seen..*seen + take].copy_from_slice(&bytes[..take]);
                    *seen += take;
                    bytes = &bytes[take..];
                    if *seen == 9 {
                        let length = usize::from(header[0]) << 16
                            | usize::from(header[1]) << 8
                            | usize::from(header[2]);
                        // DATA, HEADERS, RST_STREAM, CONTINUATION: a request's own frames.
                        if matches!(header[3], 0x0 | 0x1 | 0x3 | 0x9) {
                            self.last_request = tokio::time::Instant::now();
                        }
                        self.reader = if length == 0 {
                            FrameReader::Header([0; 9], 0)
                        } else {
                            FrameReader::Payload(length)
                        };
                    }
                }
                FrameReader::Payload(left) => {
                    let take = (*left).min(bytes.len());
                    *left -= take;
                    bytes = &bytes[take..];
                    if *left == 0 {
                        self.reader = FrameReader::Header([0; 9], 0);
                    }
                }
            }
        }
    }

    /// `Ready(Err)` once an HTTP/2 connection has gone `idle_timeout` without a request;
    /// otherwise pending, with the timer set to wake the connection at that time.
    fn poll_idle(&mut self, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        if matches!(self.reader, FrameReader::NotH2 | FrameReader::Preface(_)) {
            return Poll::Pending;
        }
        let deadline = self.last_request + self.idle_timeout;
        if self.timer.deadline() != deadline {
            self.timer.as_mut().reset(deadline);
        }
        match self.timer.as_mut().poll(cx) {
            Poll::Ready(()) => {
                tracing::debug!("connection closed: HTTP/2 without a request for the idle timeout");
                Poll::Ready(Err(io::Error::new(
                    io::ErrorKind::TimedOut,
                    "HTTP/2 connection idle",
                )))
            }
            Poll::Pending => Poll::Pending,
        }
    }
}

impl<S: AsyncRead + Unpin> AsyncRead for Capped<S> {
    fn poll_read(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        let this = &mut *self;
        if let Some(watch) = &mut this.h2 {
            if let Poll::Ready(Err(e)) = watch.poll_idle(cx) {
                return Poll::Ready(Err(e));
            }
        }
        let before = buf.filled().len();
        let read = Pin::new(&mut this.inner).poll_read(cx, buf);
        if let (Poll::Ready(Ok(())), Some(watch)) = (&read, &mut this.h2) {
            watch.feed(&buf.filled()[before..]);
        }
        read
    }
}

impl<S: AsyncWrite + Unpin> AsyncWrite for Capped<S> {
    fn poll_write(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        Pin::new(&mut self.inner).poll_write(cx, buf)
    }

    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.inner).poll_flush(cx)
    }

    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.inner).poll_shutdown(cx)
    }

    fn poll_write_vectored(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[io::IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        Pin::new(&mut self.inner).poll_write_vectored(cx, bufs)
    }

    fn is_write_vectored(&self) -> bool {
        self.inner.is_write_vectored()
    }
}

#[cfg(test)]
mod tests {
    use super::{first_bytes, FirstBytes, OVER_CAP};
    use tokio::io::AsyncWriteExt;
    use tokio::net::{TcpListener, TcpStream};

    /// The server's end of a loopback connection whose client sent `parts`, one write each
    /// with a pause between, and what `first_bytes` made of it.
    async fn first_bytes_of(parts: &[&[u8]], tls: bool) -> FirstBytes {
        let listener = TcpListener::bind("127.0.0.1:0").await.expect("a port");
        let addr = listener.local_addr().expect("bound");
        let mut client = TcpStream::connect(addr).await.expect("connects");
        let (server, _) = listener.accept().await.expect("accepted");
        client.set_nodelay(true).expect("nodelay");
        let parts: Vec<Vec<u8>> = parts.iter().map(|p| p.to_vec()).collect();
        let writer = tokio::spawn(async move {
            for part in parts {
                client.write_all(&part).await.expect("writes");
                tokio::time::sleep(std::time::Duration::from_millis(20)).await;
            }
            client
        });
        let seen = first_bytes(&server, tls).await.expect("peeks");
        drop(writer.await);
        // Nothing was consumed: the HTTP layer reads the request from its first byte.
        let mut first = [0u8; 1];
        assert_eq!(server.peek(&mut first).await.expect("peeks"), 1);
        seen
    }

    #[tokio::test]
    async fn the_http2_preface_is_told_from_http1_requests() {
        let preface: &[u8] = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n";
        assert_eq!(
            first_bytes_of(&[preface], false).await,
            FirstBytes::Http2Preface
        );
        // Trickled a few bytes at a time, it is still found.
        assert_eq!(
            first_bytes_of(&[b"P", b"RI * HT", b"TP/2.0\r\n"], false).await,
            FirstBytes::Http2Preface
        );
        for request in [
            &b"POST /api/v1/payments HTTP/1.1\r\n"[..],
            b"PUT / HTTP/1.1\r\n",
            b"PATCH / HTTP/1.1\r\n",
            b"GET /healthz HTTP/1.1\r\n",
            b"PRIX",
        ] {
            assert_eq!(
                first_bytes_of(&[request], false).await,
                FirstBytes::Http1OrTls,
                "{}",
                String::from_utf8_lossy(request)
            );
        }
        // On TLS the bytes are a ClientHello, never looked into.
        assert_eq!(
            first_bytes_of(&[preface], true).await,
            FirstBytes::Http1OrTls
        );
    }

    #[test]
    fn the_over_cap_answer_declares_its_body_length() {
        let text = std::str::from_utf8(OVER_CAP).expect("ASCII");
        let (head, body) = text.split_once("\r\n\r\n").expect("a head and a body");
        assert!(
            head.contains(&format!("content-length: {}", body.len())),
            "{head}"
        );
        let json: serde_json::Value = serde_json::from_str(body).expect("JSON");
        assert_eq!(json["code"], "service_unavailable");
    }
}
