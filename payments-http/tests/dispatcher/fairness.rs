//! One project's slow receivers do not delay another project's callbacks (issue 58, item 3):
//! the test server (`TestServer`) with its real dispatcher, merchant A's resends sent over the
//! merchant API to five host names whose receivers hold every request open, and merchant B's
//! callbacks to a receiver that answers at once. B's delay is compared to a baseline measured
//! in the same run before A's flood. The dispatcher is made small through its settings
//! (16 slots, 8 per host, so the five slow hosts could take 40), so that a few dozen resends
//! are a flood and the test takes a few seconds.

use payments_directory::DirectoryAccess;
use std::net::{IpAddr, Ipv4Addr};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use payments_core::service::{Actor, PaymentService};
use payments_core::testing::TestCaller;
use payments_core::transition::Trigger;
use payments_core::PaymentId;
use payments_directory::ProjectPatch;
use payments_http::resolver::StaticLookup;
use payments_http::testing::TestServer;
use tokio::io::AsyncWriteExt;
use tokio::net::TcpListener;
use tokio::sync::{mpsc, watch};

use crate::support::read_request;

const SLOW_HOSTS: [&str; 5] = [
    "slow-1.test",
    "slow-2.test",
    "slow-3.test",
    "slow-4.test",
    "slow-5.test",
];
const B_HOST: &str = "b-receiver.test";
/// How many of B's callbacks are timed, before and during A's flood.
const SAMPLES: usize = 5;
/// A's resends over the merchant API (within its rate limit's burst of 100).
const RESENDS: usize = 60;

/// A plain-HTTP receiver on 127.0.0.1:0 that reads each request and holds it open, unanswered,
/// until `release` turns true (then answers `200`); it counts the requests it holds.
async fn holding_receiver(release: watch::Receiver<bool>, holding: Arc<AtomicUsize>) -> u16 {
    let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind");
    let port = listener.local_addr().expect("bound").port();
    tokio::spawn(async move {
        while let Ok((mut tcp, _)) = listener.accept().await {
            let (mut release, holding) = (release.clone(), holding.clone());
            tokio::spawn(async move {
                if read_request(&mut tcp).await.is_none() {
                    return;
                }
                holding.fetch_add(1, Ordering::SeqCst);
                let _ = release.wait_for(|r| *r).await;
                holding.fetch_sub(1, Ordering::SeqCst);
                let _ = tcp
                    .write_all(b"HTTP/1.1 200 OK\r\ncontent-length: 0\r\nconnection: close\r\n\r\n")
                    .await;
            });
        }
    });
    port
}

/// B's receiver on 127.0.0.1:0: answers `200` at once and reports each event id with the
/// moment it arrived.
async fn prompt_receiver() -> (u16, mpsc::UnboundedReceiver<(String, Instant)>) {
    let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind");
    let port = listener.local_addr().expect("bound").port();
    let (tx, rx) = mpsc::unbounded_channel();
    tokio::spawn(async move {
        while let Ok((mut tcp, _)) = listener.accept().await {
            let tx = tx.clone();
            tokio::spawn(async move {
                let Some(got) = read_request(&mut tcp).await else {
                    return;
                };
                let id = got.header("x-callback-event-id").to_string();
                let _ = tx.send((id, Instant::now()));
                let _ = tcp
                    .write_all(b"HTTP/1.1 200 OK\r\ncontent-length: 0\r\nconnection: close\r\n\r\n")
                    .await;
            });
        }
    });
    (port, rx)
}

/// Merchant B: its own merchant and project, calling the service as the API does.
struct MerchantB {
    caller: TestCaller,
    url: String,
    orders: usize,
}

impl MerchantB {
    async fn new(service: &PaymentService, port: u16) -> MerchantB {
        let actor = Actor("test".into());
        let merchant = service
            .directory()
            .create_merchant("Merchant B", None, &actor)
            .await
            .expect("merchant B");
        let project = service
            .directory()
            .create_project(merchant.id, "B", ProjectPatch::default(), &actor)
            .await
            .expect("project B");
        MerchantB {
            caller: TestCaller::provision(service, project.id, 58).await,
            url: format!("http://{B_HOST}:{port}/callbacks"),
            orders: 0,
        }
    }

    /// The time from a payment's confirmation (its callback queued) to its callback's arrival.
    async fn callback_delay(
        &mut self,
        service: &PaymentService,
        got: &mut mpsc::UnboundedReceiver<(String, Instant)>,
    ) -> Duration {
        self.orders += 1;
        let body = serde_json::json!({
            "merchant_payment_id": format!("b-{}", self.orders),
            "amount": "1500",
            "payment_method": "sbp",
            "callback_url": self.url,
        });
        let created = self
            .caller
            .create(service, body.to_string().as_bytes())
            .await
            .expect("B's payment is created");
        let queued = Instant::now();
        let done = service
            .payments()
            .operate(
                created.payment.id,
                Trigger::Confirm { amount: None },
                &Actor("test".into()),
            )
            .await
            .expect("B's payment is confirmed");
        let event_id = done.event.expect("a callback is queued").event.event_id;
        let (id, at) = tokio::time::timeout(Duration::from_secs(30), got.recv())
            .await
            .unwrap_or_else(|_| panic!("B's callback did not arrive within 30 s"))
            .expect("B's receiver runs");
        assert_eq!(id, event_id.to_string(), "B's callbacks arrive one by one");
        at - queued
    }

    async fn max_delay(
        &mut self,
        service: &PaymentService,
        got: &mut mpsc::UnboundedReceiver<(String, Instant)>,
    ) -> Duration {
        let mut worst = Duration::ZERO;
        for _ in 0..SAMPLES {
            worst = worst.max(self.callback_delay(service, got).await);
        }
        worst
    }
}

/// Merchant A (the sandbox's demo project, over the merchant API): one closed payment per slow
/// host, whose callbacks the slow receivers hold; returns the payments.
async fn a_payments(s: &TestServer, ports: &[u16]) -> Vec<PaymentId> {
    let client = s.client();
    let mut payments = Vec::new();
    for (i, (host, port)) in SLOW_HOSTS.iter().zip(ports).enumerate() {
        let created = client
            .create_payment(&serde_json::json!({
                "merchant_payment_id": format!("a-{i}"),
                "amount": "1500",
                "payment_method": "sbp",
                "callback_url": format!("http://{host}:{port}/callbacks"),
            }))
            .await
            .expect("A's create is answered");
        assert_eq!(created.status.as_u16(), 201, "{}", created.json);
        let id: PaymentId = created.json["id"]
            .as_str()
            .expect("an id")
            .parse()
            .expect("a payment id");
        s.state
            .service
            .payments()
            .operate(id, Trigger::Confirm { amount: None }, &Actor("test".into()))
            .await
            .expect("A's payment is confirmed");
        payments.push(id);
    }
    payments
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_merchants_slow_receivers_do_not_delay_another_merchants_callbacks() {
    let localhost = IpAddr::V4(Ipv4Addr::LOCALHOST);
    let lookup = SLOW_HOSTS
        .iter()
        .chain([&B_HOST])
        .fold(StaticLookup::new(), |l, host| l.with(host, [localhost]));
    let s = TestServer::start(|s| {
        s.dispatcher.lookup = Arc::new(lookup);
        s.service.callback_policy.allow_local = true;
        s.dispatcher.concurrency = 16;
        s.dispatcher.per_host = 8;
        s.dispatcher.per_project = 8;
    })
    .await;
    let service = s.state.service.clone();
    let (release, released) = watch::channel(false);
    let holding = Arc::new(AtomicUsize::new(0));
    let mut ports = Vec::new();
    for _ in SLOW_HOSTS {
        ports.push(holding_receiver(released.clone(), holding.clone()).await);
    }
    let (b_port, mut b_got) = prompt_receiver().await;
    let mut b = MerchantB::new(&service, b_port).await;

    // The baseline: B's callbacks with nothing else in flight.
    let baseline = b.max_delay(&service, &mut b_got).await;

    // A's flood: its payments' callbacks, then resends of them over the merchant API, all to
    // the five hosts that hold every request.
    let payments = a_payments(&s, &ports).await;
    let client = s.client();
    for i in 0..RESENDS {
        let id = payments[i % payments.len()].to_string();
        let answer = client
            .resend_payment_callback(&id)
            .await
            .expect("the resend is answered");
        assert_eq!(answer.status.as_u16(), 202, "resend {i}: {}", answer.json);
    }
    // A's deliveries fill at least what the dispatcher lets one project hold (half of the
    // 16 slots).
    let deadline = Instant::now() + Duration::from_secs(10);
    while holding.load(Ordering::SeqCst) < 8 && Instant::now() < deadline {
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let held_before = holding.load(Ordering::SeqCst);

    // B's callbacks during the flood.
    let during = b.max_delay(&service, &mut b_got).await;
    let held = holding.load(Ordering::SeqCst);
    eprintln!(
        "B's callback delay, worst of {SAMPLES}: {baseline:?} alone, {during:?} while A's \
         receivers held {held_before} requests open ({held} at the end; {} of A's callbacks \
         queued)",
        RESENDS + payments.len()
    );
    // docs/security.md: B's callbacks go out within their normal delay, whatever A's
    // receivers do: within 10 times the baseline (plus 250 ms for a busy machine), and
    // never 3 s or more (waiting for one of A's attempts to time out takes 10 s).
    let bound = (baseline * 10 + Duration::from_millis(250)).min(Duration::from_secs(3));
    assert!(
        during < bound,
        "B's callbacks were delayed by A's slow receivers: {during:?} (alone {baseline:?})"
    );
    // A's flood was real all along: its receivers held as many requests as one project may
    // have in flight (8 of the 16 slots), no more.
    assert_eq!((held_before, held), (8, 8), "A holds its share, no more");

    let _ = release.send(true);
    s.stop().await;
}

/// A project's own backlog to a fast receiver is not held back by the bound on what one
/// project may hold: with 16 slots and 8 per project, 300 due events of one project go out
/// in one run, each claim taking what the project has room for while the rest stays due
/// (never leased and left for a lease: the store's clock does not move here, so an event left
/// to its lease would never come back).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn one_projects_backlog_to_a_fast_receiver_goes_out_at_once() {
    use crate::support::{local_config, pki, receiver, world, Reply, HOST};
    use payments_core::event::EventKind;
    use payments_http::dispatcher::DispatcherConfig;

    let pki = pki();
    let w = world().await;
    let mut rx = receiver(&pki, |_| Reply::Status(200)).await;
    for _ in 0..300 {
        w.event(&rx.url(HOST), EventKind::Automatic, 3).await;
    }
    let d = w.dispatcher(DispatcherConfig {
        concurrency: 16,
        per_host: 8,
        per_project: 8,
        ..local_config(&pki)
    });
    let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
    let running = tokio::spawn(d.run(async move {
        let _ = stopped.await;
    }));
    let started = Instant::now();
    let mut got = 0;
    while got < 300 {
        tokio::time::timeout(Duration::from_secs(20), rx.got.recv())
            .await
            .unwrap_or_else(|_| panic!("{got} of 300 delivered, then nothing for 20 s"))
            .expect("the receiver runs");
        got += 1;
    }
    eprintln!(
        "300 events of one project delivered in {:?}",
        started.elapsed()
    );
    let _ = stop.send(());
    running.await.expect("run ends");
}
