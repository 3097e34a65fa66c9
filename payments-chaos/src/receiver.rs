//! The callback receiver: verifies each delivery's signature with the projects' callback
//! secrets and records it (event id, body bytes, whether it verified), answering `200` to most
//! and `500` to some (drawn from the seed and the attempt), so that retries happen.

use std::sync::{Arc, Mutex};

use axum::body::Bytes;
use axum::extract::State;
use axum::http::{HeaderMap, StatusCode};
use axum::routing::post;
use axum::Router;
use payments_core::callback::{CallbackSecret, CallbackVerifier};
use payments_core::Timestamp;

/// One delivery.
#[derive(Debug, Clone)]
pub struct Delivery {
    /// `X-Callback-Event-Id`.
    pub event_id: String,
    /// The body, as received.
    pub body: Vec<u8>,
    /// Whether the signature verified with a project's secret.
    pub signed: bool,
    /// What the receiver answered.
    pub answered: u16,
}

/// The receiver's state.
#[derive(Clone)]
pub struct Receiver {
    deliveries: Arc<Mutex<Vec<Delivery>>>,
    secrets: Arc<Mutex<Vec<CallbackSecret>>>,
    seed: u64,
}

impl std::fmt::Debug for Receiver {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Receiver").finish_non_exhaustive()
    }
}

impl Receiver {
    /// A receiver whose `500`s are drawn from `seed`.
    pub fn new(seed: u64) -> Receiver {
        Receiver {
            deliveries: Arc::default(),
            secrets: Arc::default(),
            seed,
        }
    }

    /// Verifies with `secret` too.
    pub fn add_secret(&self, secret: CallbackSecret) {
        self.secrets.lock().expect("secrets lock").push(secret);
    }

    /// Every delivery so far.
    pub fn deliveries(&self) -> Vec<Delivery> {
        self.deliveries.lock().expect("deliveries lock").clone()
    }

    /// Serves `POST /cb` on `listener`.
    pub fn serve(&self, listener: tokio::net::TcpListener) {
        let app = Router::new()
            .route("/cb", post(receive))
            .with_state(self.clone());
        tokio::spawn(async move { axum::serve(listener, app).await });
    }
}

async fn receive(State(r): State<Receiver>, headers: HeaderMap, body: Bytes) -> StatusCode {
    let header = |n: &str| {
        headers
            .get(n)
            .and_then(|v| v.to_str().ok())
            .unwrap_or("")
            .to_string()
    };
    let event_id = header("x-callback-event-id");
    let secrets = r.secrets.lock().expect("secrets lock").clone();
    let signed = signature_verifies(secrets, &headers, &body);
    let mut deliveries = r.deliveries.lock().expect("deliveries lock");
    let attempt = deliveries.iter().filter(|d| d.event_id == event_id).count() as u64;
    let h = event_id
        .bytes()
        .fold(r.seed ^ attempt.wrapping_mul(0x9e37_79b9), |h, b| {
            (h ^ u64::from(b)).wrapping_mul(0x100_0000_01b3)
        });
    let answered = if h % 100 < 15 { 500 } else { 200 };
    deliveries.push(Delivery {
        event_id,
        body: body.to_vec(),
        signed,
        answered,
    });
    StatusCode::from_u16(answered).unwrap_or(StatusCode::OK)
}

/// Whether `X-Callback-Signature` over `body` verifies with one of `secrets` (the scheme both
/// the callbacks and the providers' requests use). A node's clock may be jumped, so its
/// `X-Callback-Timestamp` is taken as given: the signature is checked, not its freshness.
pub(crate) fn signature_verifies(
    secrets: Vec<CallbackSecret>,
    headers: &HeaderMap,
    body: &[u8],
) -> bool {
    let header = |n: &str| headers.get(n).and_then(|v| v.to_str().ok()).unwrap_or("");
    let timestamp = header("x-callback-timestamp");
    timestamp.parse::<i64>().is_ok_and(|at| {
        CallbackVerifier::new(secrets)
            .verify(
                timestamp,
                header("x-callback-signature"),
                body,
                Timestamp::from_unix_secs(at),
            )
            .is_ok()
    })
}
