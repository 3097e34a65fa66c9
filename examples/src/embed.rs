//! Embedding the payment service in an application of your own: the example behind
//! `cargo run -p payments-examples --example embed`.
//!
//! The application has its own axum router. It mounts the merchant API under `/pay` and the
//! operator API on a private listener, runs the callback dispatcher and the lifecycle sweeper,
//! and brings its own requisite provider ([`OwnCardPool`]) and exchange rates
//! ([`OwnRates`]) over the embedded SQLite store. Then it plays the merchant (a signed create
//! through `/pay`), the operator (the transfer arrived: confirm) and the merchant's callback
//! receiver (an HMAC-verified callback), and reads the payment back.

use std::net::SocketAddr;
use std::path::Path;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use axum::body::Bytes;
use axum::extract::State;
use axum::http::{HeaderMap, StatusCode};
use axum::routing::{get, post};
use axum::Router;
use payments_client::MerchantClient;
use payments_core::auth::keys::{generate_signing_key, public_key_to_pem, signing_key_to_pem};
use payments_core::auth::{Environment, Scope};
use payments_core::callback::{AddressPolicy, CallbackSecret, CallbackVerifier};
use payments_core::payment::{Currency, PaymentMethod};
use payments_core::provider::{
    IssuedRequisites, ProviderOutcome, RateSource, RequisiteProvider, RequisiteRequest,
};
use payments_core::service::{
    Actor, AuthConfig, PaymentService, Ports, ProjectPatch, ServiceConfig,
};
use payments_core::transition::Trigger;
use payments_core::{async_trait, Clock, Decimal};
use payments_http::dispatcher::{Dispatcher, DispatcherConfig};
use payments_http::system::{OsRandom, SystemClock};
use payments_http::workers::Workers;
use payments_http::AppState;
use payments_store_sqlite::{SqliteOptions, SqliteStore};
use tokio::sync::{watch, Notify};

/// The application's own requisite provider: cards from its own pool for `card_transfer`,
/// its own phone number for `sbp`. A real one would call a bank or a processor here, within
/// the service's 15 s budget.
#[derive(Debug, Default)]
pub struct OwnCardPool {
    issued: Mutex<u64>,
}

#[async_trait]
impl RequisiteProvider for OwnCardPool {
    async fn issue(&self, request: &RequisiteRequest) -> ProviderOutcome {
        let n = {
            let mut issued = self.issued.lock().expect("never poisoned");
            *issued += 1;
            *issued
        };
        let requisite = match request.payment_method {
            PaymentMethod::CardTransfer => luhn_complete(&format!("220070{n:09}")),
            PaymentMethod::Sbp => format!("7900{n:07}"),
            _ => return ProviderOutcome::NotRoutable("method not offered".into()),
        };
        ProviderOutcome::Issued(
            IssuedRequisites::new(requisite, "EMBEDDER LLC").with_bank_name("Сбербанк"),
        )
    }
}

/// Appends the Luhn check digit (the sandbox provider's function: card numbers that pass a
/// payer's banking app's check).
fn luhn_complete(digits: &str) -> String {
    format!(
        "{digits}{}",
        payments_http::sandbox::luhn_check_digit(digits)
    )
}

/// The application's own exchange rates: RUB at 95.5 per USDT. A real one would ask a rate
/// API; the service gives it 3 s.
#[derive(Debug)]
pub struct OwnRates;

#[async_trait]
impl RateSource for OwnRates {
    async fn course(&self, currency: Currency) -> Option<Decimal> {
        (currency == Currency::RUB).then(|| Decimal::new(955, 1))
    }
}

/// What the example did, for its test and its output.
#[derive(Debug, Clone)]
pub struct EmbedReport {
    /// The application's base URL (the merchant API is under `/pay`).
    pub base_url: String,
    /// The create's HTTP status (`201`).
    pub create_status: u16,
    /// The payment id.
    pub payment_id: String,
    /// The requisite issued by [`OwnCardPool`].
    pub requisite: String,
    /// The settlement amount in USDT at [`OwnRates`]' course.
    pub amount_usdt: String,
    /// The status read back after the confirmation (`completed`).
    pub final_status: String,
    /// The callback body's status, as verified by the receiver.
    pub callback_status: String,
    /// From the confirmation to the verified callback.
    pub callback_after: Duration,
}

/// The callback receiver of the application's merchant side.
#[derive(Clone)]
struct Receiver {
    verifier: Arc<CallbackVerifier>,
    clock: Arc<dyn Clock>,
    got: Arc<Mutex<Option<serde_json::Value>>>,
    arrived: Arc<Notify>,
}

async fn receive(State(r): State<Receiver>, headers: HeaderMap, body: Bytes) -> StatusCode {
    let header = |name: &str| {
        headers
            .get(name)
            .and_then(|v| v.to_str().ok())
            .unwrap_or("")
            .to_string()
    };
    let verified = r.verifier.verify(
        &header("x-callback-timestamp"),
        &header("x-callback-signature"),
        &body,
        r.clock.now(),
    );
    if verified.is_err() {
        return StatusCode::UNAUTHORIZED;
    }
    *r.got.lock().expect("never poisoned") = serde_json::from_slice(&body).ok();
    r.arrived.notify_one();
    StatusCode::NO_CONTENT
}

/// Runs the embedding over a database in `data_dir` and completes one payment; every step is
/// checked and a failure is an `Err` naming it.
pub async fn run(data_dir: &Path) -> Result<EmbedReport, String> {
    let step = |what: &'static str| move |e: String| format!("{what}: {e}");

    // 1. The service over the application's ports. The callback policy allows the local
    //    receiver of this example; a deployment keeps the default (public HTTPS only).
    let store = Arc::new(
        SqliteStore::open(data_dir.join("payments.db"), SqliteOptions::default())
            .map_err(|e| format!("store: {e}"))?,
    );
    let clock: Arc<dyn Clock> = Arc::new(SystemClock);
    let service = PaymentService::new(
        Ports::new(
            store.clone(),
            Arc::new(OwnCardPool::default()),
            Arc::new(OwnRates),
            clock.clone(),
            Arc::new(OsRandom),
        ),
        ServiceConfig {
            callback_policy: AddressPolicy::LOCAL_DEVELOPMENT,
            ..ServiceConfig::default()
        },
        AuthConfig::for_environment(Environment::Production),
    );
    // The database is this environment's from now on: the operator's commands and a server
    // over it see production, and a sandbox service over it is refused.
    service
        .record_environment()
        .await
        .map_err(|e| format!("environment: {e}"))?;

    // 2. Listeners first: the project's callback URL points at this application.
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
        .await
        .map_err(|e| format!("bind: {e}"))?;
    let addr = listener.local_addr().map_err(|e| e.to_string())?;
    let operator_listener = tokio::net::TcpListener::bind("127.0.0.1:0")
        .await
        .map_err(|e| format!("bind: {e}"))?;
    let base_url = format!("http://{addr}");

    // 3. A merchant and a project, set up through the core (what a cabinet would call).
    let actor = Actor("embed-example".into());
    let merchant = service
        .create_merchant("Embedded merchant", None, &actor)
        .await
        .map_err(|e| format!("merchant: {e}"))?;
    let project = service
        .create_project(
            merchant.id,
            "Shop",
            ProjectPatch {
                callback_url: Some(Some(format!("{base_url}/merchant/callbacks"))),
                ..ProjectPatch::default()
            },
            &actor,
        )
        .await
        .map_err(|e| format!("project: {e}"))?;
    let token = service
        .issue_token(project.id, Scope::ALL.to_vec(), &actor)
        .await
        .map_err(|e| format!("token: {e}"))?;
    let key = generate_signing_key(&OsRandom);
    service
        .register_key(project.id, &public_key_to_pem(&key.verifying_key()), &actor)
        .await
        .map_err(|e| format!("key: {e}"))?;
    let secret = service
        .rotate_callback_secret(project.id, &actor)
        .await
        .map_err(|e| format!("callback secret: {e}"))?;
    let secret = CallbackSecret::parse(secret.expose()).map_err(|e| e.to_string())?;

    // 4. The application's router: its own routes, the merchant API under /pay, the
    //    operator API on its own (private) listener. The state wires the dispatcher's wake-up
    //    into the service.
    let state = AppState::new(service.clone(), "http");
    let receiver = Receiver {
        verifier: Arc::new(CallbackVerifier::new(vec![secret])),
        clock: clock.clone(),
        got: Arc::default(),
        arrived: Arc::default(),
    };
    let app = Router::new()
        .route("/", get(|| async { "my shop" }))
        .route("/merchant/callbacks", post(receive))
        .with_state(receiver.clone())
        .nest("/pay", payments_http::app(state.clone()));
    let (stop_tx, stop_rx) = watch::channel(false);
    let serve = |listener: tokio::net::TcpListener, router: Router| {
        let mut stop = stop_rx.clone();
        tokio::spawn(async move {
            axum::serve(
                listener,
                router.into_make_service_with_connect_info::<SocketAddr>(),
            )
            .with_graceful_shutdown(async move {
                let _ = stop.wait_for(|s| *s).await;
            })
            .await
        })
    };
    let api = serve(listener, app);
    let ops = serve(
        operator_listener,
        payments_http::operator_app(state.clone()),
    );

    // 5. The background tasks. A long poll interval: the callback below can only be quick
    //    if the confirmation wakes the dispatcher.
    let dispatcher = Dispatcher::for_state(
        &state,
        DispatcherConfig {
            poll_interval: Duration::from_secs(60),
            ..DispatcherConfig::default()
        },
    )
    .map_err(|e| format!("dispatcher: {e}"))?;
    let workers = Workers::start(&service, Some(dispatcher), Duration::from_secs(1));

    let result = async {
        // 6. The merchant: a signed create through the /pay prefix (the client signs the
        //    full path, /pay/api/v1/payments).
        let client = MerchantClient::new(
            &format!("{base_url}/pay"),
            token.token.expose(),
            &signing_key_to_pem(&key),
        )
        .map_err(|e| format!("client: {e}"))?;
        let created = client
            .create_payment(&serde_json::json!({
                "merchant_payment_id": "embed-1",
                "amount": "1910.00",
                "payment_method": "card_transfer",
            }))
            .await
            .map_err(|e| format!("create: {e}"))?;
        if created.status.as_u16() != 201 {
            return Err(format!(
                "create answered {}: {}",
                created.status, created.json
            ));
        }
        let p = &created.json;
        let text = |v: &serde_json::Value| v.as_str().unwrap_or_default().to_string();
        let payment_id = text(&p["id"]);
        let requisite = text(&p["requisite"]);
        let amount_usdt = text(&p["merchant_information"]["amount_usdt"]);

        // 7. The operator: the transfer arrived. An embedder calls the core directly; the
        //    service wakes the dispatcher itself.
        let arrived = receiver.arrived.notified();
        let confirmed_at = Instant::now();
        service
            .operate(
                payment_id.parse().map_err(|_| "payment id".to_string())?,
                Trigger::Confirm { amount: None },
                &actor,
            )
            .await
            .map_err(|e| format!("confirm: {e}"))?;
        tokio::time::timeout(Duration::from_secs(10), arrived)
            .await
            .map_err(|_| "no verified callback within 10 s".to_string())?;
        let callback_after = confirmed_at.elapsed();
        let callback_status = receiver
            .got
            .lock()
            .expect("never poisoned")
            .as_ref()
            .map(|b| text(&b["status"]))
            .unwrap_or_default();

        // 8. The merchant reads the payment back.
        let read = client
            .get_payment(&payment_id)
            .await
            .map_err(|e| format!("get: {e}"))?;
        Ok(EmbedReport {
            base_url: base_url.clone(),
            create_status: created.status.as_u16(),
            payment_id,
            requisite,
            amount_usdt,
            final_status: text(&read.json["status"]),
            callback_status,
            callback_after,
        })
    }
    .await;

    let _ = stop_tx.send(true);
    let _ = api.await;
    let _ = ops.await;
    workers.stop().await;
    store.close();
    result.map_err(step("embed"))
}

#[cfg(test)]
mod tests {
    use super::luhn_complete;

    #[test]
    fn luhn_digit_matches_a_known_card_number() {
        // 4539 1488 0343 6467 is a well-known Luhn-valid test number.
        assert_eq!(luhn_complete("453914880343646"), "4539148803436467");
    }
}
