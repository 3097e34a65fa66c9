//! A merchant's callback receiver, following the spec's receiver rules (section "Events"):
//!
//! 1. verify `X-Callback-Signature` over the raw body with [`CallbackVerifier`] (any of the
//!    configured secrets, for rotation; timestamp within 300 s); on failure answer `401` and
//!    change nothing;
//! 2. deduplicate `event_id` in SQLite (kept at least a day, older ones purged): a repeated
//!    `event_id` is answered `200` and not processed again;
//! 3. on a new event, read the payment with a signed `GET /api/v1/payments/{id}` (the source
//!    of truth: events may arrive out of order) and store its status and amount as the order's
//!    state, in the same transaction that records the `event_id`.
//!
//! If the `GET` fails, nothing is recorded and the answer is `503`, so the service retries.

use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

use axum::body::Bytes;
use axum::extract::State;
use axum::http::{HeaderMap, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::routing::post;
use axum::{Json, Router};
use payments_client::{ClientError, MerchantClient};
use payments_core::callback::{
    CallbackVerifier, EVENT_ID_HEADER, EVENT_ID_RETENTION, SIGNATURE_HEADER, TIMESTAMP_HEADER,
};
use payments_core::{Clock, Timestamp};
use rusqlite::{params, Connection, OptionalExtension};
use serde_json::{json, Value};

use crate::display::exact;

/// The path callbacks are posted to.
pub const CALLBACK_PATH: &str = "/callbacks";

/// `callback_receiver`'s command line (the `callback_receiver` example parses it).
#[derive(Debug, clap::Parser)]
#[command(name = "callback_receiver", about = "Receives payment callbacks.")]
pub struct ReceiverArgs {
    /// Where the API is, how to authenticate (for the signed GET), which project
    /// (`--project test`).
    #[command(flatten)]
    pub api: crate::cli::ApiArgs,
    /// The address to listen on.
    #[arg(long, default_value = "127.0.0.1:9090")]
    pub listen: std::net::SocketAddr,
    /// The SQLite file for processed event ids and order states.
    #[arg(long, default_value = "./receiver.db")]
    pub db: PathBuf,
    /// A callback secret (`whsec_...`); repeat for rotation.
    #[arg(
        long = "secret",
        env = "CALLBACK_SECRETS",
        value_delimiter = ',',
        hide_env_values = true
    )]
    pub secrets: Vec<payments_core::SecretString>,
}

/// Why [`ReceiverArgs`] give no verifier.
#[derive(Debug, thiserror::Error)]
pub enum ReceiverArgsError {
    /// The credentials file (for its `callback_secret`) could not be read.
    #[error(transparent)]
    Credentials(#[from] crate::LoadCredentialsError),
    /// A secret is no callback secret.
    #[error("--secret: {0}")]
    Secret(#[source] payments_core::callback::CallbackSecretError),
    /// `--project test` without `--secret`, and the file's test project has no callback
    /// secret.
    #[error(
        "--project test: {} has no test_project.callback_secret (written by an older \
         server: start the sandbox again and it fills it in, or pass --secret)",
        path.display()
    )]
    NoTestProjectSecret {
        /// The credentials file.
        path: PathBuf,
    },
}

impl ReceiverArgs {
    /// The verifier of `--secret` (each of them), or, when none is given, of the credentials
    /// file's callback secret of the project `--project` picks: `callback_secret` (demo) or
    /// `test_project.callback_secret` (test: the test project's callbacks are signed with
    /// its own secret, which the demo project's does not verify).
    pub fn verifier(&self) -> Result<CallbackVerifier, ReceiverArgsError> {
        let from_file;
        let secrets = if self.secrets.is_empty() {
            from_file = [self.file_secret()?];
            &from_file[..]
        } else {
            &self.secrets[..]
        };
        let secrets = secrets
            .iter()
            .map(|s| {
                payments_core::callback::CallbackSecret::parse(s.expose().trim())
                    .map_err(ReceiverArgsError::Secret)
            })
            .collect::<Result<Vec<_>, _>>()?;
        Ok(CallbackVerifier::new(secrets))
    }

    /// The credentials file's callback secret of the project `--project` picks.
    fn file_secret(&self) -> Result<payments_core::SecretString, ReceiverArgsError> {
        let path = &self.api.credentials;
        let file = crate::load_credentials(path)?;
        match self.api.project {
            crate::cli::Project::Demo => Ok(file.callback_secret),
            crate::cli::Project::Test => file
                .test_project
                .and_then(|t| t.callback_secret)
                .ok_or_else(|| ReceiverArgsError::NoTestProjectSecret { path: path.clone() }),
        }
    }
}

/// The receiver's SQLite database: processed `event_id`s and the orders' payment state.
#[derive(Debug, Clone)]
pub struct ReceiverDb {
    conn: Arc<Mutex<Connection>>,
}

/// Why the receiver's database did not answer.
#[derive(Debug, thiserror::Error)]
pub enum ReceiverDbError {
    /// The database file could not be opened.
    #[error("{}: {source}", path.display())]
    Open {
        /// The file.
        path: PathBuf,
        /// Why.
        source: rusqlite::Error,
    },
    /// The schema could not be created.
    #[error("receiver schema: {0}")]
    Schema(#[source] rusqlite::Error),
    /// A statement failed.
    #[error(transparent)]
    Sqlite(#[from] rusqlite::Error),
    /// The blocking task running a statement failed.
    #[error("database task: {0}")]
    Task(#[from] tokio::task::JoinError),
}

/// Why a payment could not be read back from the API.
#[derive(Debug, thiserror::Error)]
pub enum ReadPaymentError {
    /// No answer.
    #[error(transparent)]
    Client(#[from] ClientError),
    /// An error answer: code, message and request id.
    #[error("{0}")]
    Refused(String),
    /// The answer is another payment.
    #[error("the API returned another payment")]
    OtherPayment,
}

/// An order's payment state as the receiver stored it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct OrderState {
    /// The payment id.
    pub payment_id: String,
    /// The merchant's order id.
    pub merchant_payment_id: String,
    /// The status read from the API.
    pub status: String,
    /// The amount read from the API, exact text.
    pub amount: String,
    /// The currency.
    pub currency: String,
    /// The event that caused the last update.
    pub last_event_id: String,
    /// How many events were applied to this order.
    pub applied_events: i64,
}

impl ReceiverDb {
    /// Opens (creating if needed) the database file.
    pub fn open(path: &Path) -> Result<ReceiverDb, ReceiverDbError> {
        let conn = Connection::open(path).map_err(|source| ReceiverDbError::Open {
            path: path.to_owned(),
            source,
        })?;
        Self::init(conn)
    }

    /// An in-memory database (tests).
    pub fn in_memory() -> Result<ReceiverDb, ReceiverDbError> {
        Self::init(Connection::open_in_memory()?)
    }

    fn init(conn: Connection) -> Result<ReceiverDb, ReceiverDbError> {
        conn.execute_batch(
            "PRAGMA journal_mode = WAL;
             PRAGMA busy_timeout = 5000;
             CREATE TABLE IF NOT EXISTS processed_events (
                 event_id    TEXT PRIMARY KEY,
                 received_at INTEGER NOT NULL -- Unix milliseconds
             );
             CREATE INDEX IF NOT EXISTS processed_events_received_at
                 ON processed_events (received_at);
             CREATE TABLE IF NOT EXISTS orders (
                 payment_id          TEXT PRIMARY KEY,
                 merchant_payment_id TEXT NOT NULL,
                 status              TEXT NOT NULL,
                 amount              TEXT NOT NULL,
                 currency            TEXT NOT NULL,
                 last_event_id       TEXT NOT NULL,
                 applied_events      INTEGER NOT NULL,
                 updated_at          INTEGER NOT NULL
             );",
        )
        .map_err(ReceiverDbError::Schema)?;
        Ok(ReceiverDb {
            conn: Arc::new(Mutex::new(conn)),
        })
    }

    fn with<T>(
        &self,
        f: impl FnOnce(&mut Connection) -> rusqlite::Result<T>,
    ) -> Result<T, ReceiverDbError> {
        // A panic while holding the lock leaves SQLite consistent (transactions roll back on
        // drop), so a poisoned lock is still usable.
        let mut conn = self
            .conn
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        Ok(f(&mut conn)?)
    }

    /// Whether `event_id` was processed (and not yet purged).
    pub fn is_processed(&self, event_id: &str) -> Result<bool, ReceiverDbError> {
        self.with(|c| {
            c.query_row(
                "SELECT 1 FROM processed_events WHERE event_id = ?1",
                [event_id],
                |_| Ok(()),
            )
            .optional()
            .map(|found| found.is_some())
        })
    }

    /// Records `event_id` and applies `order` in one transaction; `false` (and nothing changed)
    /// when the event was recorded meanwhile by a concurrent delivery. Purges event ids older
    /// than [`EVENT_ID_RETENTION`].
    pub fn record_and_apply(
        &self,
        event_id: &str,
        now: Timestamp,
        order: &OrderUpdate,
    ) -> Result<bool, ReceiverDbError> {
        let now_ms = now.unix_millis();
        let horizon = (now - EVENT_ID_RETENTION).unix_millis();
        self.with(|c| {
            let tx = c.transaction()?;
            tx.execute(
                "DELETE FROM processed_events WHERE received_at < ?1",
                [horizon],
            )?;
            let inserted = tx.execute(
                "INSERT INTO processed_events (event_id, received_at) VALUES (?1, ?2)
                 ON CONFLICT (event_id) DO NOTHING",
                params![event_id, now_ms],
            )?;
            if inserted == 0 {
                return Ok(false);
            }
            tx.execute(
                "INSERT INTO orders (payment_id, merchant_payment_id, status, amount, currency,
                                     last_event_id, applied_events, updated_at)
                 VALUES (?1, ?2, ?3, ?4, ?5, ?6, 1, ?7)
                 ON CONFLICT (payment_id) DO UPDATE SET
                     status = excluded.status,
                     amount = excluded.amount,
                     currency = excluded.currency,
                     last_event_id = excluded.last_event_id,
                     applied_events = orders.applied_events + 1,
                     updated_at = excluded.updated_at",
                params![
                    order.payment_id,
                    order.merchant_payment_id,
                    order.status,
                    order.amount,
                    order.currency,
                    event_id,
                    now_ms
                ],
            )?;
            tx.commit()?;
            Ok(true)
        })
    }

    /// The stored state of one order.
    pub fn order(&self, payment_id: &str) -> Result<Option<OrderState>, ReceiverDbError> {
        self.with(|c| {
            c.query_row(
                "SELECT payment_id, merchant_payment_id, status, amount, currency, last_event_id,
                        applied_events
                 FROM orders WHERE payment_id = ?1",
                [payment_id],
                |r| {
                    Ok(OrderState {
                        payment_id: r.get(0)?,
                        merchant_payment_id: r.get(1)?,
                        status: r.get(2)?,
                        amount: r.get(3)?,
                        currency: r.get(4)?,
                        last_event_id: r.get(5)?,
                        applied_events: r.get(6)?,
                    })
                },
            )
            .optional()
        })
    }

    /// How many event ids are remembered.
    pub fn processed_events(&self) -> Result<i64, ReceiverDbError> {
        self.with(|c| c.query_row("SELECT count(*) FROM processed_events", [], |r| r.get(0)))
    }
}

/// What a new event changes on an order: the payment as read from the API.
#[derive(Debug, Clone)]
pub struct OrderUpdate {
    /// The payment id.
    pub payment_id: String,
    /// The merchant's order id.
    pub merchant_payment_id: String,
    /// The payment's status.
    pub status: String,
    /// The payment's amount (fulfil the order by this, not by `initial_amount`).
    pub amount: String,
    /// The currency.
    pub currency: String,
}

/// The receiver: verifier, database, API client and clock.
pub struct Receiver {
    verifier: CallbackVerifier,
    db: ReceiverDb,
    client: MerchantClient,
    clock: Arc<dyn Clock>,
}

impl std::fmt::Debug for Receiver {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Receiver")
            .field("verifier", &self.verifier)
            .field("db", &self.db)
            .finish_non_exhaustive()
    }
}

impl Receiver {
    /// A receiver; `client` reads payments back, `clock` checks callback timestamps.
    pub fn new(
        verifier: CallbackVerifier,
        db: ReceiverDb,
        client: MerchantClient,
        clock: Arc<dyn Clock>,
    ) -> Receiver {
        Receiver {
            verifier,
            db,
            client,
            clock,
        }
    }

    /// The database.
    pub fn db(&self) -> &ReceiverDb {
        &self.db
    }
}

/// The receiver's routes: `POST /callbacks`.
pub fn receiver_router(receiver: Arc<Receiver>) -> Router {
    Router::new()
        .route(CALLBACK_PATH, post(callback))
        .with_state(receiver)
}

fn answer(status: StatusCode, outcome: &str, detail: impl Into<String>) -> Response {
    (
        status,
        Json(json!({"outcome": outcome, "detail": detail.into()})),
    )
        .into_response()
}

async fn callback(State(r): State<Arc<Receiver>>, headers: HeaderMap, body: Bytes) -> Response {
    let header = |name: &str| {
        headers
            .get(name)
            .and_then(|v| v.to_str().ok())
            .unwrap_or("")
    };
    // 1. Authenticity, over the raw bytes, before any parsing.
    if let Err(e) = r.verifier.verify(
        header(TIMESTAMP_HEADER),
        header(SIGNATURE_HEADER),
        &body,
        r.clock.now(),
    ) {
        tracing::warn!(error = %e, "callback rejected");
        return answer(StatusCode::UNAUTHORIZED, "rejected", e.to_string());
    }
    let event: Value = match serde_json::from_slice(&body) {
        Ok(v) => v,
        Err(e) => return answer(StatusCode::BAD_REQUEST, "malformed", e.to_string()),
    };
    let (Some(event_id), Some(payment_id)) = (
        event.get("event_id").and_then(Value::as_str),
        event.get("id").and_then(Value::as_str),
    ) else {
        return answer(StatusCode::BAD_REQUEST, "malformed", "no event_id or id");
    };
    // The body is what the signature covers; the header must agree with it.
    let header_id = header(EVENT_ID_HEADER);
    if !header_id.is_empty() && header_id != event_id {
        return answer(
            StatusCode::BAD_REQUEST,
            "malformed",
            "X-Callback-Event-Id differs from the body's event_id",
        );
    }

    // 2. Deduplication.
    let db = r.db.clone();
    let id = event_id.to_owned();
    match blocking(move || db.is_processed(&id)).await {
        Ok(true) => return answer(StatusCode::OK, "duplicate", event_id),
        Ok(false) => {}
        Err(e) => return answer(StatusCode::SERVICE_UNAVAILABLE, "retry", e.to_string()),
    }

    // 3. The payment as the API has it now.
    let update = match read_payment(&r.client, payment_id).await {
        Ok(u) => u,
        Err(e) => {
            tracing::warn!(payment_id, error = %e, "cannot read the payment; the service will retry");
            return answer(StatusCode::SERVICE_UNAVAILABLE, "retry", e.to_string());
        }
    };
    let told = event.get("status").map(exact).unwrap_or_default();
    if told != update.status {
        tracing::info!(payment_id, callback = %told, api = %update.status, "the callback's status is older than the payment's; applying the API's");
    }
    let db = r.db.clone();
    let id = event_id.to_owned();
    let now = r.clock.now();
    let applied = update.clone();
    match blocking(move || db.record_and_apply(&id, now, &applied)).await {
        Ok(true) => {
            tracing::info!(payment_id, event_id, status = %update.status, amount = %update.amount, "order updated");
            answer(StatusCode::OK, "applied", update.status)
        }
        Ok(false) => answer(StatusCode::OK, "duplicate", event_id),
        Err(e) => answer(StatusCode::SERVICE_UNAVAILABLE, "retry", e.to_string()),
    }
}

async fn read_payment(
    client: &MerchantClient,
    payment_id: &str,
) -> Result<OrderUpdate, ReadPaymentError> {
    let resp = client.get_payment(payment_id).await?;
    if resp.status != StatusCode::OK {
        return Err(ReadPaymentError::Refused(crate::advice::describe(&resp)));
    }
    let p = &resp.json;
    if p.get("id").and_then(Value::as_str) != Some(payment_id) {
        return Err(ReadPaymentError::OtherPayment);
    }
    Ok(OrderUpdate {
        payment_id: payment_id.to_owned(),
        merchant_payment_id: exact(&p["merchant_payment_id"]),
        status: exact(&p["status"]),
        amount: exact(&p["amount"]),
        currency: exact(&p["currency"]),
    })
}

async fn blocking<T: Send + 'static>(
    f: impl FnOnce() -> Result<T, ReceiverDbError> + Send + 'static,
) -> Result<T, ReceiverDbError> {
    tokio::task::spawn_blocking(f).await?
}

#[cfg(test)]
mod tests {
    use clap::Parser;
    use payments_core::callback::{signature_header, CallbackSecret};
    use serde_json::json;

    use super::{ReceiverArgs, ReceiverArgsError};

    const DEMO: &str = "whsec_demo_project_secret_of_32_characters_";
    const TEST: &str = "whsec_test_project_secret_of_32_characters_";

    /// A credentials file with a test project, its `callback_secret` left out when `None`.
    fn file(dir: &std::path::Path, test_secret: Option<&str>) -> String {
        let mut test = json!({"project_id": "prj_test", "token": "nl_test_t", "keyid": "k",
            "private_key_pem": "pem"});
        if let Some(secret) = test_secret {
            test["callback_secret"] = json!(secret);
        }
        let creds = json!({"base_url": "http://127.0.0.1:1", "operator_url": "http://127.0.0.1:2",
            "project_id": "prj_demo", "token": "nl_test_d", "keyid": "k", "private_key_pem": "pem",
            "callback_secret": DEMO, "operator_token": "op", "test_project": test});
        let path = dir.join("sandbox-credentials.json");
        std::fs::write(&path, serde_json::to_vec(&creds).unwrap()).unwrap();
        path.display().to_string()
    }

    fn args(path: &str, project: &str) -> ReceiverArgs {
        ReceiverArgs::try_parse_from([
            "callback_receiver",
            "--credentials",
            path,
            "--project",
            project,
        ])
        .unwrap()
    }

    /// Whether a callback signed with `secret` passes `args`' verifier.
    fn accepts(args: &ReceiverArgs, secret: &str) -> bool {
        let now = payments_core::Timestamp::from_unix_secs(1_790_856_000);
        let body = br#"{"event_id":"e1"}"#;
        let signed = signature_header(
            &[&CallbackSecret::parse(secret).unwrap()],
            now.unix_secs(),
            body,
        );
        args.verifier()
            .unwrap()
            .verify(&now.unix_secs().to_string(), &signed, body, now)
            .is_ok()
    }

    #[test]
    fn the_test_project_is_verified_with_its_own_secret_from_the_file() {
        let dir = tempfile::tempdir().unwrap();
        let path = file(dir.path(), Some(TEST));
        let test = args(&path, "test");
        assert!(accepts(&test, TEST), "test_project.callback_secret");
        assert!(!accepts(&test, DEMO), "not the demo project's");
        let demo = args(&path, "demo");
        assert!(accepts(&demo, DEMO) && !accepts(&demo, TEST));
    }

    #[test]
    fn an_older_file_without_the_test_projects_secret_is_refused_by_name() {
        let dir = tempfile::tempdir().unwrap();
        let path = file(dir.path(), None);
        let err = args(&path, "test").verifier().unwrap_err();
        assert!(
            matches!(err, ReceiverArgsError::NoTestProjectSecret { .. }),
            "{err}"
        );
        assert!(
            err.to_string().contains("test_project.callback_secret"),
            "{err}"
        );
    }
}
