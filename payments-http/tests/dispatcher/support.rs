//! Fixtures shared by the modules: a test CA and certificates, the HTTPS receiver, and
//! the world (service, in-memory store, manual clock) that commits events to deliver.

use payments_directory::DirectoryAccess;
use std::collections::HashMap;
use std::net::{IpAddr, Ipv4Addr, SocketAddr};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

use payments_core::amount::Amount;
use payments_core::auth::Environment;
use payments_core::bank::CountryCode;
use payments_core::callback::{
    AddressPolicy, CallbackSecret, CallbackUrl, CallbackVerifier, RetrySchedule,
};
use payments_core::event::{CallbackEvent, DeliveryState, EventKind, EventRecord, OutboxEvent};
use payments_core::payment::{
    Currency, Flow, MerchantPaymentId, Payment, PaymentMethod, PaymentStatus,
};
use payments_core::service::{Actor, AuthConfig, PaymentService, Ports, ServiceConfig};
use payments_core::store::{OutboxStore, PaymentChange, Store};
use payments_core::testing::{ManualClock, MemoryStore, SeededRandom};
use payments_core::{Clock, EventId, PaymentId, ProjectId, Timestamp};
use payments_directory::ProjectPatch;
use payments_http::dispatcher::{Dispatcher, DispatcherConfig};
use payments_http::metrics::Metrics;
use payments_http::resolver::StaticLookup;
use payments_providers::sandbox::{FixedRates, SandboxProvider};
use rustls::pki_types::{CertificateDer, PrivateKeyDer, PrivatePkcs8KeyDer};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpSocket;
use tokio::sync::{mpsc, oneshot};
use tokio_rustls::TlsAcceptor;

pub(crate) const T0: i64 = 1_700_000_000;
pub(crate) const HOST: &str = "receiver.test";

// ---------------------------------------------------------------------------------------------
// Certificates

pub(crate) struct Pki {
    pub(crate) ca: CertificateDer<'static>,
    pub(crate) acceptor: TlsAcceptor,
}

/// A CA and a server certificate for `receiver.test` and `other.test` signed by it.
pub(crate) fn pki() -> Pki {
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
pub(crate) struct Received {
    pub(crate) headers: HashMap<String, String>,
    pub(crate) body: Vec<u8>,
}

impl Received {
    pub(crate) fn header(&self, name: &str) -> &str {
        self.headers
            .get(&name.to_ascii_lowercase())
            .map(String::as_str)
            .unwrap_or_else(|| panic!("no {name} header in {:?}", self.headers))
    }
}

/// How a receiver answers a request.
#[derive(Debug, Clone)]
pub(crate) enum Reply {
    Status(u16),
    Redirect(String),
    /// Waits, then answers 200.
    Delay(Duration),
    /// Sends the head of a 200 with a body that never comes.
    StallBody,
    /// A 200 whose body has this many bytes; reports (bytes written, write failed) when it ends.
    Stream(usize),
}

pub(crate) struct Receiver {
    pub(crate) port: u16,
    pub(crate) got: mpsc::UnboundedReceiver<Received>,
    pub(crate) connections: Arc<AtomicUsize>,
    pub(crate) streamed: Option<oneshot::Receiver<(usize, bool)>>,
}

impl Receiver {
    /// Every request received so far.
    pub(crate) fn drain(&mut self) -> Vec<Received> {
        let mut all = Vec::new();
        while let Ok(r) = self.got.try_recv() {
            all.push(r);
        }
        all
    }

    pub(crate) fn url(&self, host: &str) -> String {
        format!("https://{host}:{}/callbacks", self.port)
    }
}

/// An HTTPS receiver on 127.0.0.1:0 answering the n-th request with `replies(n)`.
pub(crate) async fn receiver(
    pki: &Pki,
    replies: impl Fn(usize) -> Reply + Send + Sync + 'static,
) -> Receiver {
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
pub(crate) async fn read_request<S: tokio::io::AsyncRead + Unpin>(
    stream: &mut S,
) -> Option<Received> {
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

pub(crate) struct World {
    pub(crate) store: Arc<MemoryStore>,
    pub(crate) clock: ManualClock,
    pub(crate) rng: Arc<SeededRandom>,
    pub(crate) service: PaymentService,
    pub(crate) metrics: Arc<Metrics>,
    pub(crate) project: ProjectId,
    /// The project's callback secret as issued.
    pub(crate) secret: CallbackSecret,
    pub(crate) orders: AtomicUsize,
}

pub(crate) async fn world() -> World {
    let store = Arc::new(MemoryStore::new());
    let clock = ManualClock::new(Timestamp::from_unix_secs(T0));
    let rng = Arc::new(SeededRandom::new(42));
    let dyn_store: Arc<dyn Store> = store.clone();
    let service = PaymentService::new(
        Ports::new(
            dyn_store.clone(),
            Arc::new(SandboxProvider::new(dyn_store)),
            Arc::new(FixedRates::sandbox_defaults()),
            Arc::new(clock.clone()),
            rng.clone(),
        ),
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
        .directory()
        .create_merchant("Merchant", None, &actor)
        .await
        .expect("merchant created");
    let project = service
        .directory()
        .create_project(merchant.id, "Project", ProjectPatch::default(), &actor)
        .await
        .expect("project created")
        .id;
    let secret = service
        .directory()
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
pub(crate) fn local_config(pki: &Pki) -> DispatcherConfig {
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
    pub(crate) fn dispatcher(&self, config: DispatcherConfig) -> Dispatcher {
        Dispatcher::new(self.service.clone(), config, self.metrics.clone())
            .expect("the dispatcher builds")
    }

    /// A dispatcher over this world's store and clock with other service settings (retry
    /// schedule, callback policy): the settings a dispatcher follows are the service's.
    pub(crate) fn dispatcher_with(
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

    pub(crate) fn now(&self) -> Timestamp {
        self.clock.now()
    }

    /// A completed payment with one pending event to `url`, committed as the service does.
    pub(crate) async fn event(
        &self,
        url: &str,
        kind: EventKind,
        max_attempts: u32,
    ) -> (PaymentId, EventId) {
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
            metadata: Default::default(),
            route: None,
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
                history: None,
                ledger: None,
                payment: payment.clone(),
                expected_version: 1,
                event: Some(outbox),
                audit: None,
            })
            .await
            .expect("event committed");
        (payment.id, event_id)
    }

    pub(crate) async fn record(&self, payment: PaymentId) -> EventRecord {
        let mut events = self
            .store
            .events_for_payment(payment)
            .await
            .expect("store answers");
        assert_eq!(events.len(), 1);
        events.remove(0)
    }

    pub(crate) fn verifier(&self) -> CallbackVerifier {
        CallbackVerifier::new(vec![self.secret.clone()])
    }
}

pub(crate) fn advance(world: &World, secs: u64) {
    world.clock.advance(Duration::from_secs(secs));
}
