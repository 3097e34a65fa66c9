//! Shared helpers for benchmarks and the load generator: latency summaries, keep-alive HTTP/1.1
//! connections, and the setup steps a load run needs (raising the demo project's rate limit).
#![deny(missing_docs)]

use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::time::Duration;

use bytes::Bytes;
use hdrhistogram::Histogram;
use http_body_util::{BodyExt, Full};
use hyper::client::conn::http1::SendRequest;
use hyper_util::rt::TokioIo;
use serde::Serialize;
use tokio::net::TcpStream;

/// A new latency histogram in microseconds, 1 µs to 100 s, 3 significant digits.
pub fn histogram() -> Histogram<u64> {
    Histogram::new_with_bounds(1, 100_000_000, 3).expect("the bounds are valid")
}

/// Records `d` in microseconds (clamped to the histogram's range).
pub fn record(h: &mut Histogram<u64>, d: Duration) {
    let us = u64::try_from(d.as_micros()).unwrap_or(u64::MAX).max(1);
    h.saturating_record(us);
}

/// Percentiles of a latency histogram, in milliseconds.
#[derive(Debug, Clone, Copy, Serialize)]
pub struct Latency {
    /// Median.
    pub p50_ms: f64,
    /// 90th percentile.
    pub p90_ms: f64,
    /// 99th percentile.
    pub p99_ms: f64,
    /// 99.9th percentile.
    pub p999_ms: f64,
    /// Largest value seen.
    pub max_ms: f64,
    /// Mean.
    pub mean_ms: f64,
}

impl Latency {
    /// The summary of `h`.
    pub fn of(h: &Histogram<u64>) -> Latency {
        let ms = |us: u64| us as f64 / 1000.0;
        Latency {
            p50_ms: ms(h.value_at_quantile(0.50)),
            p90_ms: ms(h.value_at_quantile(0.90)),
            p99_ms: ms(h.value_at_quantile(0.99)),
            p999_ms: ms(h.value_at_quantile(0.999)),
            max_ms: ms(h.max()),
            mean_ms: h.mean() / 1000.0,
        }
    }
}

impl std::fmt::Display for Latency {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "p50 {:.3} ms  p90 {:.3} ms  p99 {:.3} ms  p99.9 {:.3} ms  max {:.3} ms  mean {:.3} ms",
            self.p50_ms, self.p90_ms, self.p99_ms, self.p999_ms, self.max_ms, self.mean_ms
        )
    }
}

/// Counts of responses by HTTP status, plus transport errors under `0`.
pub type StatusCounts = BTreeMap<u16, u64>;

/// One keep-alive HTTP/1.1 connection (no pool: one per worker).
#[derive(Debug)]
pub struct Connection {
    sender: SendRequest<Full<Bytes>>,
}

impl Connection {
    /// Connects to `addr` with `TCP_NODELAY`.
    pub async fn open(addr: SocketAddr) -> std::io::Result<Connection> {
        let stream = TcpStream::connect(addr).await?;
        stream.set_nodelay(true)?;
        let (sender, conn) = hyper::client::conn::http1::handshake(TokioIo::new(stream))
            .await
            .map_err(std::io::Error::other)?;
        tokio::spawn(async move {
            // The connection ends when the worker drops its sender or the server closes it.
            let _ = conn.await;
        });
        Ok(Connection { sender })
    }

    /// Sends `req` and reads the whole response body.
    pub async fn send(
        &mut self,
        req: hyper::Request<Full<Bytes>>,
    ) -> Result<(hyper::StatusCode, Bytes), hyper::Error> {
        self.sender.ready().await?;
        let resp = self.sender.send_request(req).await?;
        let status = resp.status();
        let body = resp.into_body().collect().await?.to_bytes();
        Ok((status, body))
    }
}

/// `host:port` of a base URL such as `http://127.0.0.1:8080`.
pub fn authority_of(base_url: &str) -> &str {
    base_url
        .split_once("://")
        .map_or(base_url, |(_, rest)| rest)
        .split('/')
        .next()
        .unwrap_or("")
}

/// The socket address of a base URL (IP literals only: the load generator talks to local
/// servers).
pub fn socket_addr_of(base_url: &str) -> Result<SocketAddr, BaseUrlError> {
    authority_of(base_url)
        .parse()
        .map_err(|source| BaseUrlError {
            base_url: base_url.to_owned(),
            source,
        })
}

/// A base URL that is not `http://IP:PORT`.
#[derive(Debug, thiserror::Error)]
#[error("{base_url}: expected http://IP:PORT ({source})")]
pub struct BaseUrlError {
    /// The URL.
    pub base_url: String,
    /// Why its authority is no socket address.
    pub source: std::net::AddrParseError,
}
