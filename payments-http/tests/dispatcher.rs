//! Callback delivery against in-process HTTPS receivers on 127.0.0.1, with a certificate made
//! here by a test CA and trusted through `extra_roots`. Receivers push what they got into a
//! channel; the schedule runs on a manual clock and is shortened through configuration.
//!
//! The last tests run the whole server (`TestServer`) with a plain-HTTP receiver: the
//! `callback_dispatch` setting, over real sockets and a restart on the same data dir.

use std::collections::HashMap;
use std::net::{IpAddr, Ipv4Addr, SocketAddr};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

use payments_core::amount::Amount;
use payments_core::auth::Environment;
use payments_core::bank::{BankCatalog, CountryCode};
use payments_core::callback::{
    AddressPolicy, CallbackSecret, CallbackUrl, CallbackVerifier, RetrySchedule, ATTEMPT_TIMEOUT,
    RESPONSE_READ_LIMIT,
};
use payments_core::event::{CallbackEvent, DeliveryState, EventKind, EventRecord, OutboxEvent};
use payments_core::payment::{
    Currency, Flow, MerchantPaymentId, Payment, PaymentMethod, PaymentStatus,
};
use payments_core::service::{
    Actor, AuthConfig, PaymentService, Ports, ProjectPatch, ServiceConfig,
};
use payments_core::store::{DirectoryStore, OutboxStore, PaymentChange, PaymentStore, Store};
use payments_core::testing::{ManualClock, MemoryStore, SeededRandom};
use payments_core::{Clock, EventId, PaymentId, ProjectId, Timestamp};
use payments_http::config::Settings;
use payments_http::dispatcher::{Dispatcher, DispatcherConfig};
use payments_http::metrics::Metrics;
use payments_http::resolver::StaticLookup;
use payments_http::sandbox::{FixedRates, SandboxProvider};
use payments_http::testing::TestServer;
use rustls::pki_types::{CertificateDer, PrivateKeyDer, PrivatePkcs8KeyDer};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpSocket};
use tokio::sync::{mpsc, oneshot};
use tokio_rustls::TlsAcceptor;

const T0: i64 = 1_700_000_000;
const HOST: &str = "receiver.test";

// ---------------------------------------------------------------------------------------------
// Certificates

struct Pki {
    ca: CertificateDer<'static>,
    acceptor: TlsAcceptor,
}

/// A CA and a server certificate for `receiver.test` and `other.test` signed by it.
fn pki() -> Pki {
    use rcgen::{BasicConstraints, CertificateParams, DnType, IsCa, KeyPair};
    let ca_key = KeyPair::generate().expect("key generation works");
    let mut ca_params = CertificateParams::new(Vec::<String>::new()).expect("no names is valid");
    ca_params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
    ca_params
        .distinguished_name
        .push(DnType::CommonName, "dispatcher test CA");
    let ca = ca_params.self_signed(&ca_key).expect("CA self-signs");
    let leaf_key = KeyPair::generate().expect("key generation works");
    let leaf_params = CertificateParams::new(vec![HOST.to_string(), "other.test".to_string()])
        .expect("valid names");
    let leaf = leaf_params
        .signed_by(&leaf_key, &ca, &ca_key)
        .expect("CA signs the leaf");
    let key = PrivateKeyDer::Pkcs8(PrivatePkcs8KeyDer::from(leaf_key.serialize_der()));
    let config = rustls::ServerConfig::builder_with_provider(Arc::new(
        rustls::crypto::ring::default_provider(),
    ))
    .with_safe_default_protocol_versions()
    .expect("ring supports the default versions")
    .with_no_client_auth()
    .with_single_cert(vec![leaf.der().clone()], key)
    .expect("the leaf and its key match");
    Pki {
        ca: ca.der().clone(),
        acceptor: TlsAcceptor::from(Arc::new(config)),
    }
}

// ---------------------------------------------------------------------------------------------
// The receiver

/// What a receiver got.
#[derive(Debug, Clone)]
struct Received {
    headers: HashMap<String, String>,
    body: Vec<u8>,
}

impl Received {
    fn header(&self, name: &str) -> &str {
        self.headers
            .get(&name.to_ascii_lowercase())
            .map(String::as_str)
            .unwrap_or_else(|| panic!("no {name} header in {:?}", self.headers))
    }
}

/// How a receiver answers a request.
#[derive(Debug, Clone)]
enum Reply {
    Status(u16),
    Redirect(String),
    /// Waits, then answers 200.
    Delay(Duration),
    /// Sends the head of a 200 with a body that never comes.
    StallBody,
    /// A 200 whose body has this many bytes; reports (bytes written, write failed) when it ends.
    Stream(usize),
}

struct Receiver {
    port: u16,
    got: mpsc::UnboundedReceiver<Received>,
    connections: Arc<AtomicUsize>,
    streamed: Option<oneshot::Receiver<(usize, bool)>>,
}

impl Receiver {
    /// Every request received so far.
    fn drain(&mut self) -> Vec<Received> {
        let mut all = Vec::new();
        while let Ok(r) = self.got.try_recv() {
            all.push(r);
        }
        all
    }

    fn url(&self, host: &str) -> String {
        format!("https://{host}:{}/callbacks", self.port)
    }
}

/// An HTTPS receiver on 127.0.0.1:0 answering the n-th request with `replies(n)`.
async fn receiver(pki: &Pki, replies: impl Fn(usize) -> Reply + Send + Sync + 'static) -> Receiver {
    // A small send buffer (inherited by accepted connections) keeps what the kernel absorbs
    // small, so the bytes a streaming receiver manages to write reflect what the client read.
    let socket = TcpSocket::new_v4().expect("a socket");
    socket
        .set_send_buffer_size(16 * 1024)
        .expect("SO_SNDBUF can be set");
    socket
        .bind(SocketAddr::from((Ipv4Addr::LOCALHOST, 0)))
        .expect("bind 127.0.0.1:0");
    let listener = socket.listen(64).expect("listen");
    let port = listener.local_addr().expect("bound").port();
    let (tx, got) = mpsc::unbounded_channel();
    let (streamed_tx, streamed) = oneshot::channel();
    let streamed_tx = Arc::new(std::sync::Mutex::new(Some(streamed_tx)));
    let connections = Arc::new(AtomicUsize::new(0));
    let acceptor = pki.acceptor.clone();
    let replies = Arc::new(replies);
    let counted = connections.clone();
    tokio::spawn(async move {
        let requests = Arc::new(AtomicUsize::new(0));
        loop {
            let Ok((tcp, _)) = listener.accept().await else {
                return;
            };
            counted.fetch_add(1, Ordering::SeqCst);
            let (acceptor, tx, replies, requests, streamed_tx) = (
                acceptor.clone(),
                tx.clone(),
                replies.clone(),
                requests.clone(),
                streamed_tx.clone(),
            );
            tokio::spawn(async move {
                let Ok(mut tls) = acceptor.accept(tcp).await else {
                    return;
                };
                let Some(received) = read_request(&mut tls).await else {
                    return;
                };
                let _ = tx.send(received);
                let n = requests.fetch_add(1, Ordering::SeqCst);
                match replies(n) {
                    Reply::Status(code) => {
                        let head = format!(
                            "HTTP/1.1 {code} X\r\ncontent-length: 2\r\nconnection: close\r\n\r\nok"
                        );
                        let _ = tls.write_all(head.as_bytes()).await;
                        let _ = tls.shutdown().await;
                    }
                    Reply::Redirect(location) => {
                        let head = format!(
                            "HTTP/1.1 302 Found\r\nlocation: {location}\r\ncontent-length: 0\r\nconnection: close\r\n\r\n"
                        );
                        let _ = tls.write_all(head.as_bytes()).await;
                        let _ = tls.shutdown().await;
                    }
                    Reply::Delay(d) => {
                        tokio::time::sleep(d).await;
                        let _ = tls
                            .write_all(b"HTTP/1.1 200 OK\r\ncontent-length: 0\r\n\r\n")
                            .await;
                    }
                    Reply::StallBody => {
                        let _ = tls
                            .write_all(b"HTTP/1.1 200 OK\r\ncontent-length: 100\r\n\r\nabc")
                            .await;
                        let _ = tls.flush().await;
                        tokio::time::sleep(Duration::from_secs(30)).await;
                    }
                    Reply::Stream(total) => {
                        let head = format!("HTTP/1.1 200 OK\r\ncontent-length: {total}\r\n\r\n");
                        let mut failed = tls.write_all(head.as_bytes()).await.is_err();
                        let chunk = vec![b'x'; 16 * 1024];
                        let mut written = 0;
                        while !failed && written < total {
                            let n = chunk.len().min(total - written);
                            match tls.write_all(&chunk[..n]).await {
                                Ok(()) => written += n,
                                Err(_) => failed = true,
                            }
                        }
                        if !failed {
                            failed = tls.flush().await.is_err();
                        }
                        let report = streamed_tx.lock().expect("not poisoned").take();
                        if let Some(report) = report {
                            let _ = report.send((written, failed));
                        }
                    }
                }
            });
        }
    });
    Receiver {
        port,
        got,
        connections,
        streamed: Some(streamed),
    }
}

/// Reads one HTTP/1.1 request with a `content-length` body.
async fn read_request<S: tokio::io::AsyncRead + Unpin>(stream: &mut S) -> Option<Received> {
    let mut buf = Vec::new();
    let mut chunk = [0u8; 4096];
    let head_end = loop {
        if let Some(i) = buf.windows(4).position(|w| w == b"\r\n\r\n") {
            break i;
        }
        let n = stream.read(&mut chunk).await.ok()?;
        if n == 0 {
            return None;
        }
        buf.extend_from_slice(&chunk[..n]);
    };
    let head = String::from_utf8(buf[..head_end].to_vec()).ok()?;
    let headers: HashMap<String, String> = head
        .split("\r\n")
        .skip(1)
        .filter_map(|line| line.split_once(':'))
        .map(|(k, v)| (k.trim().to_ascii_lowercase(), v.trim().to_string()))
        .collect();
    let length: usize = headers.get("content-length")?.parse().ok()?;
    let mut body = buf[head_end + 4..].to_vec();
    while body.len() < length {
        let n = stream.read(&mut chunk).await.ok()?;
        if n == 0 {
            return None;
        }
        body.extend_from_slice(&chunk[..n]);
    }
    Some(Received { headers, body })
}

// ---------------------------------------------------------------------------------------------
// The service, the store and the events

struct World {
    store: Arc<MemoryStore>,
    clock: ManualClock,
    rng: Arc<SeededRandom>,
    service: PaymentService,
    metrics: Arc<Metrics>,
    project: ProjectId,
    /// The project's callback secret as issued.
    secret: CallbackSecret,
    orders: AtomicUsize,
}

async fn world() -> World {
    let store = Arc::new(MemoryStore::new());
    let clock = ManualClock::new(Timestamp::from_unix_secs(T0));
    let rng = Arc::new(SeededRandom::new(42));
    let dyn_store: Arc<dyn Store> = store.clone();
    let service = PaymentService::new(
        Ports {
            store: dyn_store.clone(),
            provider: Arc::new(SandboxProvider::new(dyn_store)),
            rates: Arc::new(FixedRates::sandbox_defaults()),
            clock: Arc::new(clock.clone()),
            rng: rng.clone(),
            catalog: Arc::new(BankCatalog::embedded()),
        },
        // Local receivers, and no retry delays (tests that need others say so).
        ServiceConfig {
            callback_policy: AddressPolicy::LOCAL_DEVELOPMENT,
            retry: RetrySchedule::parse_delays("0,0").expect("valid delays"),
            ..ServiceConfig::default()
        },
        AuthConfig::for_environment(Environment::Sandbox),
    );
    let actor = Actor("test".into());
    let merchant = service
        .create_merchant("Merchant", None, &actor)
        .await
        .expect("merchant created");
    let project = service
        .create_project(merchant.id, "Project", ProjectPatch::default(), &actor)
        .await
        .expect("project created")
        .id;
    let secret = service
        .rotate_callback_secret(project, &actor)
        .await
        .expect("secret issued");
    World {
        store,
        clock,
        rng,
        service,
        metrics: Arc::new(Metrics::default()),
        project,
        secret: CallbackSecret::parse(secret.expose()).expect("issued secrets are valid"),
        orders: AtomicUsize::new(0),
    }
}

/// A configuration for local receivers: loopback allowed, `receiver.test` and `other.test`
/// resolving to 127.0.0.1, the test CA trusted, no retry delays.
fn local_config(pki: &Pki) -> DispatcherConfig {
    let localhost = IpAddr::V4(Ipv4Addr::LOCALHOST);
    DispatcherConfig {
        extra_roots: vec![pki.ca.clone()],
        lookup: Arc::new(
            StaticLookup::new()
                .with(HOST, [localhost])
                .with("other.test", [localhost]),
        ),
        poll_interval: Duration::from_millis(50),
        ..DispatcherConfig::default()
    }
}

impl World {
    fn dispatcher(&self, config: DispatcherConfig) -> Dispatcher {
        Dispatcher::new(self.service.clone(), config, self.metrics.clone())
            .expect("the dispatcher builds")
    }

    /// A dispatcher over this world's store and clock with other service settings (retry
    /// schedule, callback policy): the settings a dispatcher follows are the service's.
    fn dispatcher_with(
        &self,
        settings: impl FnOnce(&mut ServiceConfig),
        config: DispatcherConfig,
    ) -> Dispatcher {
        let mut service_config = self.service.config().clone();
        settings(&mut service_config);
        let service = PaymentService::new(
            self.service.ports().clone(),
            service_config,
            self.service.auth_config().clone(),
        );
        Dispatcher::new(service, config, self.metrics.clone()).expect("the dispatcher builds")
    }

    fn now(&self) -> Timestamp {
        self.clock.now()
    }

    /// A completed payment with one pending event to `url`, committed as the service does.
    async fn event(&self, url: &str, kind: EventKind, max_attempts: u32) -> (PaymentId, EventId) {
        let now = self.now();
        let order = self.orders.fetch_add(1, Ordering::SeqCst);
        let amount = Amount::parse("1500.00").expect("valid amount");
        let payment = Payment {
            id: PaymentId::generate(self.rng.as_ref()),
            project_id: self.project,
            merchant_payment_id: MerchantPaymentId::parse(&format!("order-{order}"))
                .expect("valid order id"),
            flow: Flow::RuntimeLive,
            status: PaymentStatus::Completed,
            amount,
            initial_amount: amount,
            currency: Currency::RUB,
            geo_code: CountryCode::RU,
            payment_method: PaymentMethod::Sbp,
            is_intrabank: false,
            bank_code: None,
            callback_url: None,
            requisites: None,
            pricing: None,
            failure: None,
            appeal_from: None,
            created_at: now,
            updated_at: now,
            expires_at: now + Duration::from_secs(3600),
            version: 1,
            fingerprint: String::new(),
        };
        self.store
            .insert_payment(&payment)
            .await
            .expect("payment stored");
        let event = CallbackEvent::new(&payment, EventId::generate(self.rng.as_ref()), kind, now);
        let event_id = event.event_id;
        let outbox = OutboxEvent {
            event,
            destination: CallbackUrl::parse(url, AddressPolicy::LOCAL_DEVELOPMENT)
                .expect("a valid development URL"),
            state: DeliveryState::Pending,
            attempts: 0,
            max_attempts,
            next_attempt_at: Some(now),
        };
        self.store
            .commit_change(&PaymentChange {
                payment: payment.clone(),
                expected_version: 1,
                event: Some(outbox),
                audit: None,
            })
            .await
            .expect("event committed");
        (payment.id, event_id)
    }

    async fn record(&self, payment: PaymentId) -> EventRecord {
        let mut events = self
            .store
            .events_for_payment(payment)
            .await
            .expect("store answers");
        assert_eq!(events.len(), 1);
        events.remove(0)
    }

    fn verifier(&self) -> CallbackVerifier {
        CallbackVerifier::new(vec![self.secret.clone()])
    }
}

fn advance(world: &World, secs: u64) {
    world.clock.advance(Duration::from_secs(secs));
}

/// Whether nobody connects to `listener` for a while.
async fn no_connection(listener: &TcpListener) -> bool {
    tokio::time::timeout(Duration::from_millis(100), listener.accept())
        .await
        .is_err()
}

// ---------------------------------------------------------------------------------------------
// Tests

#[tokio::test]
async fn first_attempt_succeeds_with_the_spec_headers_and_a_verifiable_signature() {
    let pki = pki();
    let w = world().await;
    let mut rx = receiver(&pki, |_| Reply::Status(200)).await;
    let (payment, event_id) = w.event(&rx.url(HOST), EventKind::Automatic, 3).await;
    let d = w.dispatcher(local_config(&pki));

    assert_eq!(d.deliver_due_once().await, 1);

    let got = rx.drain();
    assert_eq!(got.len(), 1);
    let r = &got[0];
    let record = w.record(payment).await;
    assert_eq!(
        r.body, record.outbox.event.body,
        "the frozen body bytes are sent"
    );
    assert_eq!(r.header("content-type"), "application/json");
    assert_eq!(r.header("x-callback-event-id"), event_id.to_string());
    assert_eq!(r.header("x-callback-timestamp"), T0.to_string());
    assert!(r.header("x-callback-signature").starts_with("v1="));
    assert_eq!(
        w.verifier().verify(
            r.header("x-callback-timestamp"),
            r.header("x-callback-signature"),
            &r.body,
            w.now()
        ),
        Ok(())
    );
    let body: serde_json::Value = serde_json::from_slice(&r.body).expect("JSON body");
    assert_eq!(body["event_id"], event_id.to_string());

    assert_eq!(record.outbox.state, DeliveryState::Delivered);
    assert_eq!(record.outbox.next_attempt_at, None);
    assert_eq!(record.attempts.len(), 1);
    let a = &record.attempts[0];
    assert_eq!(
        (
            a.attempt,
            a.started_at,
            a.http_status,
            a.success,
            a.error.as_deref()
        ),
        (1, w.now(), Some(200), true, None)
    );
    // Nothing more is due.
    advance(&w, 3600);
    assert_eq!(d.deliver_due_once().await, 0);
    assert!(rx.drain().is_empty());
}

#[tokio::test]
async fn failures_are_retried_on_the_configured_schedule_with_new_signatures() {
    let pki = pki();
    let w = world().await;
    let mut rx = receiver(&pki, |n| Reply::Status(if n < 2 { 500 } else { 200 })).await;
    let (payment, event_id) = w.event(&rx.url(HOST), EventKind::Automatic, 3).await;
    let d = w.dispatcher_with(
        |c| c.retry = RetrySchedule::parse_delays("1,2").expect("valid delays"),
        local_config(&pki),
    );

    assert_eq!(d.deliver_due_once().await, 1);
    let rec = w.record(payment).await;
    assert_eq!(rec.outbox.state, DeliveryState::Pending);
    assert_eq!(
        rec.outbox.next_attempt_at,
        Some(Timestamp::from_unix_secs(T0 + 1))
    );
    // Not due yet.
    assert_eq!(d.deliver_due_once().await, 0);
    advance(&w, 1);
    assert_eq!(d.deliver_due_once().await, 1);
    assert_eq!(
        w.record(payment).await.outbox.next_attempt_at,
        Some(Timestamp::from_unix_secs(T0 + 3))
    );
    advance(&w, 1);
    assert_eq!(d.deliver_due_once().await, 0, "the second delay is 2 s");
    advance(&w, 1);
    assert_eq!(d.deliver_due_once().await, 1);

    let got = rx.drain();
    assert_eq!(got.len(), 3);
    let stamps: Vec<&str> = got
        .iter()
        .map(|r| r.header("x-callback-timestamp"))
        .collect();
    assert_eq!(
        stamps,
        [T0, T0 + 1, T0 + 3].map(|t| t.to_string()),
        "a new timestamp for every attempt"
    );
    let signatures: Vec<&str> = got
        .iter()
        .map(|r| r.header("x-callback-signature"))
        .collect();
    assert_ne!(signatures[0], signatures[1]);
    assert_ne!(signatures[1], signatures[2]);
    for r in &got {
        assert_eq!(r.header("x-callback-event-id"), event_id.to_string());
        assert_eq!(r.body, got[0].body, "the same body bytes in every retry");
        assert_eq!(
            w.verifier().verify(
                r.header("x-callback-timestamp"),
                r.header("x-callback-signature"),
                &r.body,
                w.now()
            ),
            Ok(())
        );
    }
    let rec = w.record(payment).await;
    assert_eq!(rec.outbox.state, DeliveryState::Delivered);
    let summary: Vec<_> = rec
        .attempts
        .iter()
        .map(|a| (a.attempt, a.http_status, a.success, a.error.clone()))
        .collect();
    assert_eq!(
        summary,
        vec![
            (1, Some(500), false, Some("http status 500".to_string())),
            (2, Some(500), false, Some("http status 500".to_string())),
            (3, Some(200), true, None),
        ]
    );
}

#[tokio::test]
async fn three_failures_end_the_event_as_failed() {
    let pki = pki();
    let w = world().await;
    let mut rx = receiver(&pki, |_| Reply::Status(503)).await;
    let (payment, _) = w.event(&rx.url(HOST), EventKind::Automatic, 3).await;
    let d = w.dispatcher(local_config(&pki));
    for _ in 0..3 {
        assert_eq!(d.deliver_due_once().await, 1);
    }
    let rec = w.record(payment).await;
    assert_eq!(rec.outbox.state, DeliveryState::Failed);
    assert_eq!(rec.outbox.next_attempt_at, None);
    assert_eq!(rec.attempts.len(), 3);
    advance(&w, 24 * 3600);
    assert_eq!(d.deliver_due_once().await, 0, "no fourth attempt");
    assert_eq!(rx.drain().len(), 3);
    assert!(w
        .metrics
        .render(&[], 0)
        .contains("payments_callback_attempts_total{outcome=\"failure\"} 3"));
}

#[tokio::test]
async fn a_redirect_is_a_failure_and_is_not_followed() {
    let pki = pki();
    let w = world().await;
    let mut target = receiver(&pki, |_| Reply::Status(200)).await;
    let location = target.url("other.test");
    let mut rx = receiver(&pki, move |_| Reply::Redirect(location.clone())).await;
    let (payment, _) = w.event(&rx.url(HOST), EventKind::Automatic, 3).await;
    let d = w.dispatcher(local_config(&pki));

    assert_eq!(d.deliver_due_once().await, 1);
    assert_eq!(rx.drain().len(), 1);
    let rec = w.record(payment).await;
    let a = &rec.attempts[0];
    assert_eq!(a.http_status, Some(302));
    assert!(!a.success);
    assert_eq!(a.error.as_deref(), Some("redirect (302) not followed"));
    assert_eq!(rec.outbox.state, DeliveryState::Pending);
    tokio::time::sleep(Duration::from_millis(200)).await;
    assert!(target.drain().is_empty());
    assert_eq!(target.connections.load(Ordering::SeqCst), 0);
}

#[tokio::test]
async fn a_slow_answer_and_a_stalled_body_time_out() {
    assert_eq!(DispatcherConfig::default().attempt_timeout, ATTEMPT_TIMEOUT);
    assert_eq!(ATTEMPT_TIMEOUT, Duration::from_secs(10));
    let pki = pki();
    let w = world().await;
    let slow = receiver(&pki, |_| Reply::Delay(Duration::from_secs(11))).await;
    let stalled = receiver(&pki, |_| Reply::StallBody).await;
    let (slow_payment, _) = w.event(&slow.url(HOST), EventKind::Automatic, 3).await;
    let (stalled_payment, _) = w.event(&stalled.url(HOST), EventKind::Automatic, 3).await;
    let d = w.dispatcher(DispatcherConfig {
        attempt_timeout: Duration::from_secs(1),
        lease: Duration::from_secs(5),
        ..local_config(&pki)
    });

    let started = std::time::Instant::now();
    assert_eq!(d.deliver_due_once().await, 2);
    assert!(
        started.elapsed() < Duration::from_secs(3),
        "both ran at once"
    );

    let slow = w.record(slow_payment).await.attempts.remove(0);
    assert_eq!(slow.http_status, None);
    assert!(!slow.success);
    assert_eq!(slow.error.as_deref(), Some("timeout after 1s"));
    assert!(
        (1000..3000).contains(&slow.duration_ms),
        "{}",
        slow.duration_ms
    );

    let stalled = w.record(stalled_payment).await.attempts.remove(0);
    assert_eq!(
        stalled.http_status,
        Some(200),
        "headers came, the body did not"
    );
    assert!(!stalled.success);
    assert_eq!(stalled.error.as_deref(), Some("timeout after 1s"));
}

#[tokio::test]
async fn a_huge_answer_is_a_success_after_reading_at_most_4_kib() {
    assert_eq!(DispatcherConfig::default().read_limit, RESPONSE_READ_LIMIT);
    assert_eq!(RESPONSE_READ_LIMIT, 4096);
    const TEN_MB: usize = 10 * 1024 * 1024;
    let pki = pki();
    let w = world().await;
    let mut rx = receiver(&pki, |_| Reply::Stream(TEN_MB)).await;
    let (payment, _) = w.event(&rx.url(HOST), EventKind::Automatic, 3).await;
    let d = w.dispatcher(local_config(&pki));

    assert_eq!(d.deliver_due_once().await, 1);
    let a = w.record(payment).await.attempts.remove(0);
    assert_eq!((a.http_status, a.success, a.error), (Some(200), true, None));

    let streamed = rx.streamed.take().expect("one stream report");
    let (written, failed) = tokio::time::timeout(Duration::from_secs(5), streamed)
        .await
        .expect("the receiver notices the client went away")
        .expect("the receiver reports");
    assert!(
        failed,
        "the client closed the connection before the body ended"
    );
    // The client read 4 KiB; the rest is what the two kernels' socket buffers absorbed.
    assert!(
        written < TEN_MB / 10,
        "{written} bytes were written before the client went away"
    );
}

#[tokio::test]
async fn a_restart_continues_the_schedule_from_the_store() {
    let pki = pki();
    let w = world().await;
    let mut rx = receiver(&pki, |n| Reply::Status(if n == 0 { 500 } else { 204 })).await;
    let (payment, event_id) = w.event(&rx.url(HOST), EventKind::Automatic, 3).await;
    let spec_delays = |c: &mut ServiceConfig| {
        c.retry = RetrySchedule::parse_delays("30,60").expect("valid delays")
    };
    let config = || local_config(&pki);

    let first = w.dispatcher_with(spec_delays, config());
    assert_eq!(first.deliver_due_once().await, 1);
    drop(first);
    assert_eq!(
        w.record(payment).await.outbox.next_attempt_at,
        Some(Timestamp::from_unix_secs(T0 + 30))
    );

    let second = w.dispatcher_with(spec_delays, config());
    advance(&w, 29);
    assert_eq!(
        second.deliver_due_once().await,
        0,
        "not due before the stored time"
    );
    advance(&w, 1);
    assert_eq!(second.deliver_due_once().await, 1);

    let rec = w.record(payment).await;
    assert_eq!(rec.outbox.state, DeliveryState::Delivered);
    let a = &rec.attempts[1];
    assert_eq!(
        (a.attempt, a.started_at, a.http_status, a.success),
        (2, Timestamp::from_unix_secs(T0 + 30), Some(204), true)
    );
    let got = rx.drain();
    assert_eq!(got.len(), 2);
    assert_eq!(got[1].header("x-callback-event-id"), event_id.to_string());
}

#[tokio::test]
async fn forbidden_resolved_addresses_are_refused_at_connect_time() {
    // A listener where a refused loopback name would connect; it must get nothing.
    let trap = TcpListener::bind((Ipv4Addr::LOCALHOST, 0))
        .await
        .expect("bind 127.0.0.1:0");
    let port = trap.local_addr().expect("bound").port();
    let trap6 = TcpListener::bind(("::1", port)).await.ok();

    // (address, policy allows local, what the refusal says)
    let table: &[(&str, bool, &str)] = &[
        ("10.0.0.1", false, "private"),
        ("10.255.255.254", true, "private"),
        ("172.16.0.1", false, "private"),
        ("172.31.255.255", true, "private"),
        ("192.168.1.1", false, "private"),
        ("127.0.0.1", false, "loopback"),
        ("127.255.255.254", false, "loopback"),
        ("169.254.169.254", true, "link-local"),
        ("169.254.0.1", false, "link-local"),
        ("100.64.0.1", true, "carrier-grade NAT"),
        ("100.127.255.254", false, "carrier-grade NAT"),
        ("0.0.0.0", true, "unspecified"),
        ("0.1.2.3", false, "this network"),
        ("224.0.0.1", false, "multicast"),
        ("239.255.255.250", true, "multicast"),
        ("255.255.255.255", false, "broadcast"),
        ("240.0.0.1", false, "reserved"),
        ("192.0.0.8", false, "IETF protocol assignments"),
        ("192.0.2.1", false, "documentation"),
        ("198.51.100.7", false, "documentation"),
        ("203.0.113.9", false, "documentation"),
        ("198.18.0.1", false, "benchmarking"),
        ("::1", false, "loopback"),
        ("::", true, "unspecified"),
        ("fc00::1", true, "unique local"),
        ("fd12:3456::1", false, "unique local"),
        ("fe80::1", true, "link-local"),
        ("fec0::1", false, "site-local"),
        ("ff02::1", false, "multicast"),
        ("2001:db8::1", false, "documentation"),
        ("3fff::1", false, "documentation"),
        ("100::1", false, "discard-only"),
        ("2001::1", false, "Teredo"),
        ("2001:2::1", false, "benchmarking"),
        ("4000::1", false, "global unicast"),
        ("::a00:1", false, "IPv4-compatible"),
        ("::ffff:127.0.0.1", false, "loopback"),
        ("::ffff:10.0.0.1", true, "private"),
        ("::ffff:169.254.169.254", true, "link-local"),
        ("::ffff:100.64.0.1", false, "carrier-grade NAT"),
        ("64:ff9b::a00:1", false, "NAT64 form of 10.0.0.1"),
        ("64:ff9b::7f00:1", true, "NAT64 form of 127.0.0.1"),
        ("64:ff9b:1::1", false, "local-use NAT64"),
        ("2002:a00:1::1", false, "6to4 form of 10.0.0.1"),
        ("2002:7f00:1::1", true, "6to4 form of 127.0.0.1"),
    ];
    assert!(table.len() >= 30);

    let pki = pki();
    for allow_local in [false, true] {
        let w = world().await;
        let mut names = StaticLookup::new();
        let mut events = Vec::new();
        let rows: Vec<_> = table.iter().filter(|row| row.1 == allow_local).collect();
        for (i, &&(address, _, says)) in rows.iter().enumerate() {
            let name = format!("blocked-{i}.test");
            names = names.with(&name, [address.parse().expect("table addresses are valid")]);
            let url = format!("https://{name}:{port}/cb");
            let (payment, _) = w.event(&url, EventKind::Automatic, 3).await;
            events.push((payment, name, address, says));
        }
        // A name with a public and a refused address is refused as a whole.
        let mixed: [IpAddr; 2] = [
            "93.184.216.34".parse().expect("valid"),
            "10.0.0.1".parse().expect("valid"),
        ];
        names = names.with("mixed.test", mixed);
        let (mixed_payment, _) = w
            .event(
                &format!("https://mixed.test:{port}/cb"),
                EventKind::Automatic,
                3,
            )
            .await;
        let d = w.dispatcher_with(
            |c| c.callback_policy = AddressPolicy { allow_local },
            DispatcherConfig {
                lookup: Arc::new(names),
                ..local_config(&pki)
            },
        );
        assert_eq!(d.deliver_due_once().await, rows.len() + 1);

        for (payment, name, address, says) in events {
            let rec = w.record(payment).await;
            let a = &rec.attempts[0];
            let error = a.error.as_deref().unwrap_or("");
            assert!(!a.success, "{address}");
            assert_eq!(a.http_status, None, "{address}");
            assert!(
                error.starts_with("forbidden address: ")
                    && error.ends_with(&format!(", resolved from {name}"))
                    && error.contains(says),
                "{address} (allow_local {allow_local}): {error}"
            );
            assert_eq!(rec.outbox.state, DeliveryState::Pending, "a failed attempt");
        }
        let mixed = w.record(mixed_payment).await.attempts.remove(0);
        assert_eq!(
            mixed.error.as_deref(),
            Some(
                "forbidden address: 10.0.0.1 is a private address (10.0.0.0/8), resolved from \
                 mixed.test"
            )
        );
    }

    assert!(no_connection(&trap).await, "nothing connected to 127.0.0.1");
    if let Some(trap6) = &trap6 {
        assert!(no_connection(trap6).await, "nothing connected to ::1");
    }
}

#[tokio::test]
async fn literals_and_local_urls_are_refused_once_the_setting_is_off() {
    let pki = pki();
    let w = world().await;
    let rx = receiver(&pki, |_| Reply::Status(200)).await;
    let (literal, _) = w
        .event(
            &format!("https://127.0.0.1:{}/cb", rx.port),
            EventKind::Automatic,
            3,
        )
        .await;
    let (mapped, _) = w
        .event(
            &format!("https://[::ffff:127.0.0.1]:{}/cb", rx.port),
            EventKind::Automatic,
            3,
        )
        .await;
    let (plain, _) = w
        .event(
            &format!("http://{HOST}:{}/cb", rx.port),
            EventKind::Automatic,
            3,
        )
        .await;
    let d = w.dispatcher_with(
        |c| c.callback_policy = AddressPolicy::STRICT,
        local_config(&pki),
    );
    assert_eq!(d.deliver_due_once().await, 3);
    let error = |rec: EventRecord| rec.attempts[0].error.clone().unwrap_or_default();
    assert_eq!(
        error(w.record(literal).await),
        "forbidden address: 127.0.0.1 is a loopback address (127.0.0.0/8)"
    );
    assert_eq!(
        error(w.record(mapped).await),
        "forbidden address: ::ffff:127.0.0.1 is an IPv4-mapped form of 127.0.0.1, a loopback \
         address (127.0.0.0/8)"
    );
    assert_eq!(
        error(w.record(plain).await),
        "destination refused: callback_url must use https (got http://)"
    );
    assert_eq!(rx.connections.load(Ordering::SeqCst), 0);
}

#[tokio::test]
async fn both_secrets_sign_during_the_rotation_overlap_then_only_the_new_one() {
    let pki = pki();
    let w = world().await;
    let mut rx = receiver(&pki, |_| Reply::Status(200)).await;
    let old = w.secret.clone();
    let new = w
        .service
        .rotate_callback_secret(w.project, &Actor("test".into()))
        .await
        .expect("rotated");
    let new = CallbackSecret::parse(new.expose()).expect("valid");
    let d = w.dispatcher(local_config(&pki));

    w.event(&rx.url(HOST), EventKind::Automatic, 3).await;
    assert_eq!(d.deliver_due_once().await, 1);
    let during = rx.drain().remove(0);
    let values: Vec<&str> = during.header("x-callback-signature").split(',').collect();
    assert_eq!(values.len(), 2, "{values:?}");
    let ts = during.header("x-callback-timestamp");
    let only = |secret: &CallbackSecret| CallbackVerifier::new(vec![secret.clone()]);
    assert_eq!(
        only(&new).verify(ts, values[0], &during.body, w.now()),
        Ok(())
    );
    assert_eq!(
        only(&old).verify(ts, values[1], &during.body, w.now()),
        Ok(())
    );
    assert!(only(&old)
        .verify(ts, values[0], &during.body, w.now())
        .is_err());

    advance(&w, 24 * 3600);
    w.event(&rx.url(HOST), EventKind::Automatic, 3).await;
    assert_eq!(d.deliver_due_once().await, 1);
    let after = rx.drain().remove(0);
    let header = after.header("x-callback-signature");
    assert_eq!(header.matches("v1=").count(), 1, "{header}");
    let ts = after.header("x-callback-timestamp");
    assert_eq!(only(&new).verify(ts, header, &after.body, w.now()), Ok(()));
    assert!(only(&old).verify(ts, header, &after.body, w.now()).is_err());
}

#[tokio::test]
async fn a_project_without_a_secret_gets_an_unrevealed_one_at_first_delivery() {
    let pki = pki();
    let w = world().await;
    let mut rx = receiver(&pki, |_| Reply::Status(200)).await;
    let other = w
        .service
        .create_project(
            w.store
                .project(w.project)
                .await
                .expect("store answers")
                .expect("project exists")
                .merchant_id,
            "Second",
            ProjectPatch::default(),
            &Actor("test".into()),
        )
        .await
        .expect("project created");
    let w = World {
        project: other.id,
        ..w
    };
    w.event(&rx.url(HOST), EventKind::Automatic, 3).await;
    let d = w.dispatcher(local_config(&pki));
    assert_eq!(d.deliver_due_once().await, 1);
    let secrets = w
        .store
        .callback_secrets(other.id)
        .await
        .expect("store answers");
    assert_eq!(secrets.len(), 1);
    assert!(!secrets[0].revealed);
    let r = rx.drain().remove(0);
    let created = CallbackSecret::parse(secrets[0].secret.expose()).expect("valid");
    assert_eq!(
        CallbackVerifier::new(vec![created]).verify(
            r.header("x-callback-timestamp"),
            r.header("x-callback-signature"),
            &r.body,
            w.now()
        ),
        Ok(())
    );
}

#[tokio::test]
async fn a_manual_resend_gets_exactly_one_attempt() {
    let pki = pki();
    let w = world().await;
    let mut rx = receiver(&pki, |_| Reply::Status(500)).await;
    let (resend, _) = w.event(&rx.url(HOST), EventKind::ManualResend, 1).await;
    // Even a row that claims more attempts is sent once when it is a manual resend.
    let (odd, _) = w.event(&rx.url(HOST), EventKind::ManualResend, 3).await;
    let d = w.dispatcher(local_config(&pki));
    assert_eq!(d.deliver_due_once().await, 2);
    advance(&w, 3600);
    assert_eq!(d.deliver_due_once().await, 0);
    assert_eq!(rx.drain().len(), 2);
    for payment in [resend, odd] {
        let rec = w.record(payment).await;
        assert_eq!(rec.outbox.state, DeliveryState::Failed);
        assert_eq!(rec.attempts.len(), 1);
        assert_eq!(rec.attempts[0].http_status, Some(500));
    }
}

#[tokio::test]
async fn run_wakes_on_notify_and_stops_on_shutdown() {
    let pki = pki();
    let w = world().await;
    let mut rx = receiver(&pki, |_| Reply::Status(200)).await;
    let d = w.dispatcher(DispatcherConfig {
        // Only the notifier can make it look before the test ends.
        poll_interval: Duration::from_secs(600),
        ..local_config(&pki)
    });
    let notify = d.notifier();
    let (stop, stopped) = oneshot::channel::<()>();
    let running = tokio::spawn(d.run(async move {
        let _ = stopped.await;
    }));
    // Let the loop make its first (empty) claim and go to sleep.
    tokio::time::sleep(Duration::from_millis(100)).await;
    let (payment, event_id) = w.event(&rx.url(HOST), EventKind::Automatic, 3).await;
    notify.notify_one();
    let got = tokio::time::timeout(Duration::from_secs(5), rx.got.recv())
        .await
        .expect("delivered after the notification")
        .expect("receiver alive");
    assert_eq!(got.header("x-callback-event-id"), event_id.to_string());

    let _ = stop.send(());
    tokio::time::timeout(Duration::from_secs(5), running)
        .await
        .expect("run returns after shutdown")
        .expect("run does not panic");
    assert_eq!(
        w.record(payment).await.outbox.state,
        DeliveryState::Delivered
    );
}

#[tokio::test]
async fn a_closed_port_is_a_connect_failure() {
    let pki = pki();
    let w = world().await;
    let port = {
        let l = TcpListener::bind((Ipv4Addr::LOCALHOST, 0))
            .await
            .expect("bind 127.0.0.1:0");
        l.local_addr().expect("bound").port()
    };
    let (payment, _) = w
        .event(
            &format!("https://{HOST}:{port}/cb"),
            EventKind::Automatic,
            3,
        )
        .await;
    let d = w.dispatcher(local_config(&pki));
    assert_eq!(d.deliver_due_once().await, 1);
    let a = w.record(payment).await.attempts.remove(0);
    let error = a.error.unwrap_or_default();
    assert!(error.starts_with("connect: "), "{error}");
    assert_eq!(a.http_status, None);
}

#[tokio::test]
async fn deliveries_to_one_host_are_bounded() {
    let pki = pki();
    let delay = Duration::from_millis(300);
    for (per_host, at_least, below) in [(2, 2 * delay, None), (4, delay, Some(2 * delay))] {
        let w = world().await;
        let mut rx = receiver(&pki, move |_| Reply::Delay(delay)).await;
        for _ in 0..4 {
            w.event(&rx.url(HOST), EventKind::Automatic, 3).await;
        }
        let d = w.dispatcher(DispatcherConfig {
            per_host,
            ..local_config(&pki)
        });
        let started = std::time::Instant::now();
        assert_eq!(d.deliver_due_once().await, 4);
        let took = started.elapsed();
        assert_eq!(rx.drain().len(), 4);
        assert!(took >= at_least, "per_host {per_host}: {took:?}");
        if let Some(below) = below {
            assert!(took < below, "per_host {per_host}: {took:?}");
        }
    }
}

#[tokio::test]
async fn the_receiver_certificate_is_verified() {
    let pki = pki();
    let w = world().await;
    let mut rx = receiver(&pki, |_| Reply::Status(200)).await;
    let (untrusted, _) = w.event(&rx.url(HOST), EventKind::Automatic, 3).await;
    let (wrong_name, _) = w
        .event(&rx.url("third.test"), EventKind::Automatic, 3)
        .await;
    let localhost = IpAddr::V4(Ipv4Addr::LOCALHOST);
    let lookup = Arc::new(
        StaticLookup::new()
            .with(HOST, [localhost])
            .with("third.test", [localhost]),
    );
    // Without the test CA only the public roots are trusted.
    let public_roots_only = w.dispatcher(DispatcherConfig {
        extra_roots: Vec::new(),
        lookup: lookup.clone(),
        ..local_config(&pki)
    });
    assert_eq!(public_roots_only.deliver_due_once().await, 2);
    // With the test CA, a name the certificate does not carry still fails.
    let with_ca = w.dispatcher(DispatcherConfig {
        lookup,
        ..local_config(&pki)
    });
    assert_eq!(with_ca.deliver_due_once().await, 2);

    let errors = |rec: EventRecord| -> Vec<String> {
        rec.attempts
            .into_iter()
            .map(|a| a.error.unwrap_or_else(|| "success".into()))
            .collect()
    };
    let untrusted = errors(w.record(untrusted).await);
    assert!(untrusted[0].contains("UnknownIssuer"), "{untrusted:?}");
    assert_eq!(untrusted[1], "success");
    let wrong_name = errors(w.record(wrong_name).await);
    assert!(
        wrong_name.iter().all(|e| e.starts_with("connect: ")),
        "{wrong_name:?}"
    );
    assert!(
        wrong_name[1].contains("not valid for name"),
        "{wrong_name:?}"
    );
    assert_eq!(
        rx.drain().len(),
        1,
        "only the verified connection sent the callback"
    );
}

// ---------------------------------------------------------------------------------------------
// The whole server: holding callbacks with `callback_dispatch = false`

/// A plain-HTTP receiver on 127.0.0.1:0 (allowed by `allow_local_callbacks`) answering `200`
/// and closing; it counts connections and forwards every request it read.
async fn plain_receiver() -> Receiver {
    let listener = TcpListener::bind("127.0.0.1:0")
        .await
        .expect("bind 127.0.0.1:0");
    let port = listener.local_addr().expect("bound").port();
    let (tx, got) = mpsc::unbounded_channel();
    let connections = Arc::new(AtomicUsize::new(0));
    let counted = connections.clone();
    tokio::spawn(async move {
        loop {
            let Ok((mut tcp, _)) = listener.accept().await else {
                return;
            };
            counted.fetch_add(1, Ordering::SeqCst);
            let tx = tx.clone();
            tokio::spawn(async move {
                let Some(received) = read_request(&mut tcp).await else {
                    return;
                };
                let _ = tx.send(received);
                let _ = tcp
                    .write_all(
                        b"HTTP/1.1 200 OK\r\ncontent-length: 2\r\nconnection: close\r\n\r\nok",
                    )
                    .await;
                let _ = tcp.shutdown().await;
            });
        }
    });
    Receiver {
        port,
        got,
        connections,
        streamed: None,
    }
}

/// Test settings with local callbacks allowed and dispatch on or off.
fn dispatch(on: bool) -> impl FnOnce(&mut Settings) {
    move |s| {
        s.allow_local_callbacks = true;
        s.callback_dispatch = on;
    }
}

/// The operator API's `/metrics` value of `payments_outbox_pending`.
async fn outbox_pending(s: &TestServer) -> u64 {
    let text = reqwest::get(format!("{}/metrics", s.operator_url))
        .await
        .expect("metrics answer")
        .text()
        .await
        .expect("metrics text");
    text.lines()
        .find_map(|l| l.strip_prefix("payments_outbox_pending "))
        .unwrap_or_else(|| panic!("no payments_outbox_pending in {text}"))
        .trim()
        .parse()
        .expect("a count")
}

async fn the_event(s: &TestServer, payment: PaymentId) -> EventRecord {
    let mut events = s
        .state
        .service
        .store()
        .events_for_payment(payment)
        .await
        .expect("store answers");
    assert_eq!(events.len(), 1, "one event for the payment");
    events.remove(0)
}

#[tokio::test]
async fn with_dispatch_off_the_event_waits_in_the_outbox_until_a_server_with_dispatch_on() {
    let mut rx = plain_receiver().await;
    let url = format!("http://127.0.0.1:{}/callbacks", rx.port);
    let s = TestServer::start(dispatch(false)).await;

    // A payment with the receiver as its callback URL, closed by the operator: the event is
    // committed with the status change.
    let created = s
        .client()
        .create_payment(&serde_json::json!({
            "merchant_payment_id": "held-1",
            "amount": "3400",
            "payment_method": "sbp",
            "callback_url": url,
        }))
        .await
        .expect("the create is answered");
    assert_eq!(created.status.as_u16(), 201, "{}", created.json);
    let id = created.json["id"].as_str().expect("an id").to_string();
    let payment: PaymentId = id.parse().expect("a payment id");
    let confirmed = reqwest::Client::new()
        .post(format!(
            "{}/operator/v1/payments/{id}/confirm",
            s.operator_url
        ))
        .bearer_auth(s.operator_token.expose())
        .json(&serde_json::json!({}))
        .send()
        .await
        .expect("the confirm is answered");
    assert_eq!(confirmed.status().as_u16(), 200);
    let confirmed: serde_json::Value = confirmed.json().await.expect("JSON");
    assert_eq!(confirmed["payment"]["status"], "completed");
    let event_id = confirmed["event_id"]
        .as_str()
        .expect("the confirm made an event")
        .to_string();

    // Well past the wake-up a running dispatcher gets at once, its 1 s poll and many 50 ms
    // sweeps: the receiver, listening all along, gets nothing.
    tokio::time::sleep(Duration::from_millis(1500)).await;
    assert_eq!(rx.connections.load(Ordering::SeqCst), 0, "no connection");
    assert!(rx.drain().is_empty(), "no request");
    let held = the_event(&s, payment).await;
    assert_eq!(held.outbox.event.event_id.to_string(), event_id);
    assert_eq!(held.outbox.state, DeliveryState::Pending);
    assert!(held.attempts.is_empty(), "{:?}", held.attempts);
    assert_eq!(outbox_pending(&s).await, 1);
    let ready = reqwest::get(format!("{}/readyz", s.merchant_url))
        .await
        .expect("readyz answers");
    assert_eq!(ready.status().as_u16(), 200, "ready with dispatch off");

    // A server with dispatch on over the same data dir sends it, signed with the secret.
    let s = s.restart(dispatch(true)).await;
    let got = tokio::time::timeout(Duration::from_secs(10), rx.got.recv())
        .await
        .expect("delivered after the restart")
        .expect("the receiver is alive");
    assert_eq!(got.header("x-callback-event-id"), event_id);
    let verifier = CallbackVerifier::new(vec![CallbackSecret::parse(
        s.creds().callback_secret.expose(),
    )
    .expect("the secret parses")]);
    let now_ms = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .expect("after 1970")
        .as_millis();
    verifier
        .verify(
            got.header("x-callback-timestamp"),
            got.header("x-callback-signature"),
            &got.body,
            Timestamp::from_unix_millis(i64::try_from(now_ms).expect("fits")),
        )
        .expect("the callback verifies");
    let body: serde_json::Value = serde_json::from_slice(&got.body).expect("a JSON body");
    assert_eq!(body["event_id"], event_id.as_str());
    assert_eq!(body["status"], "completed");

    // The attempt is recorded just after the answer.
    let deadline = std::time::Instant::now() + Duration::from_secs(5);
    let delivered = loop {
        let rec = the_event(&s, payment).await;
        if rec.outbox.state != DeliveryState::Pending || std::time::Instant::now() > deadline {
            break rec;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    };
    assert_eq!(delivered.outbox.state, DeliveryState::Delivered);
    assert_eq!(delivered.attempts.len(), 1);
    assert_eq!(delivered.attempts[0].http_status, Some(200));
    assert_eq!(outbox_pending(&s).await, 0);
    assert_eq!(rx.drain().len(), 0, "delivered once");
    s.stop().await;
}
