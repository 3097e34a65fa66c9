//! Callbacks to a laptop: follows the project's callback events through the events API
//! (`GET /api/v1/events` with a long poll, signed with the project's token and key) and
//! delivers each new one to a local receiver, signed as the service signs callbacks but with
//! a secret of the developer's own, printing each delivery and its answer. The service never
//! has to reach the laptop: the laptop asks.
//!
//! The body forwarded is the event's frozen body, byte for byte; the headers are the
//! service's (`X-Callback-Event-Id`, `X-Callback-Timestamp`, `X-Callback-Signature`), so a
//! receiver verifies a forwarded callback exactly as a real one (with the local secret).

use std::collections::HashMap;
use std::time::Duration;

use payments_client::MerchantClient;
use payments_core::callback::signing::{
    signature_header, CallbackSecret, EVENT_ID_HEADER, SIGNATURE_HEADER, TIMESTAMP_HEADER,
};
use payments_core::Timestamp;
use serde::Deserialize;
use serde_json::value::RawValue;

use crate::advice::describe;
use crate::cli::{ApiArgs, ApiArgsError};

/// How long one poll may wait on the server for a new event (the server allows 30 s).
pub const LONG_POLL: Duration = Duration::from_secs(25);

/// How far back each poll looks again, so that an event committed a moment late (by another
/// node, with a slightly earlier time) is not missed; events already forwarded are skipped.
const OVERLAP: Duration = Duration::from_secs(5);

/// `listen`'s command line (the `listen` example parses it).
#[derive(Debug, clap::Parser)]
#[command(
    name = "listen",
    about = "Forwards the project's callback events to a local receiver."
)]
pub struct ListenArgs {
    /// Where the API is, how to authenticate, which project to follow (`--project test`).
    #[command(flatten)]
    pub api: ApiArgs,
    /// The local receiver's URL.
    #[arg(long)]
    pub forward_to: String,
    /// The secret the forwarded callbacks are signed with (`whsec_` and at least 32
    /// characters); the local receiver verifies with it.
    #[arg(long, env = "PAYMENTS_LISTEN_SECRET", hide_env_values = true)]
    pub secret: String,
    /// Also forward the events queued since this RFC 3339 time (default: from now on).
    #[arg(long)]
    pub since: Option<String>,
}

/// Why [`ListenArgs`] give no listener.
#[derive(Debug, thiserror::Error)]
pub enum ListenArgsError {
    /// `--secret` is no callback secret.
    #[error("--secret: {0}")]
    Secret(#[source] payments_core::callback::CallbackSecretError),
    /// `--since` is no RFC 3339 time.
    #[error("--since: expected an RFC 3339 time such as 2026-10-01T12:00:00Z")]
    Since,
    /// The credentials, key, CA file or project could not be used.
    #[error(transparent)]
    Api(#[from] ApiArgsError),
    /// The listener could not be built.
    #[error(transparent)]
    Listen(#[from] ListenError),
}

impl ListenArgs {
    /// The listener these arguments describe, and the line that says what it follows and
    /// where it forwards ("following the test project ... since ...; forwarding to ...").
    pub fn listener(&self) -> Result<(Listener, String), ListenArgsError> {
        let secret = CallbackSecret::parse(&self.secret).map_err(ListenArgsError::Secret)?;
        let since = match self.since.as_deref() {
            None => now(),
            Some(s) => Timestamp::parse_rfc3339(s).ok_or(ListenArgsError::Since)?,
        };
        // Longer than the server's long poll.
        let http = self
            .api
            .http_client(reqwest::Client::builder().timeout(Duration::from_secs(40)))?;
        let client = self.api.client()?.with_http_client(http);
        let line = format!(
            "following {} for events since {}; forwarding to {} (Ctrl-C stops)",
            self.api.project_line()?,
            since.to_rfc3339(),
            self.forward_to
        );
        let config = ListenConfig {
            forward_to: self.forward_to.clone(),
            secret,
            since,
            forward_timeout: Duration::from_secs(10),
        };
        Ok((Listener::new(client, config)?, line))
    }
}

/// One event as the events API lists it: the parts `listen` needs.
#[derive(Debug, Deserialize)]
struct Event {
    id: String,
    payment_id: String,
    status: String,
    #[serde(rename = "type")]
    kind: String,
    created_at: String,
    body: Box<RawValue>,
}

#[derive(Debug, Deserialize)]
struct Page {
    data: Vec<Event>,
    next_cursor: Option<String>,
}

/// What [`Listener`] forwards, and to where.
#[derive(Debug, Clone)]
pub struct ListenConfig {
    /// The local receiver's URL (`http://127.0.0.1:9090/cb`).
    pub forward_to: String,
    /// The secret the forwarded callbacks are signed with (the receiver verifies with it).
    pub secret: CallbackSecret,
    /// Forward events queued at or after this time (default: when listening starts, so old
    /// events are not replayed).
    pub since: Timestamp,
    /// The HTTP timeout of one forward to the receiver.
    pub forward_timeout: Duration,
}

/// One forward to the local receiver, as printed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Forwarded {
    /// The event's id.
    pub event_id: String,
    /// The receiver's HTTP status, or `None` when no answer arrived.
    pub status: Option<u16>,
    /// The line printed for it.
    pub line: String,
}

/// Why a round of [`Listener::poll`] forwarded nothing (the next round tries again).
#[derive(Debug, thiserror::Error)]
pub enum ListenError {
    /// The forwarding HTTP client could not be built.
    #[error(transparent)]
    Http(#[from] reqwest::Error),
    /// The events API could not be asked.
    #[error("events: {0}")]
    Events(#[source] payments_client::ClientError),
    /// The events API refused (token, scope, signature, rate limit): code, message, request id.
    #[error("events: {0}")]
    Refused(String),
    /// The answer is no event page.
    #[error("events: an answer that is no event page: {0}")]
    NotAPage(#[source] serde_json::Error),
}

/// Follows the events of a project and forwards the new ones ([`Listener::poll`]).
#[derive(Debug)]
pub struct Listener {
    client: MerchantClient,
    http: reqwest::Client,
    config: ListenConfig,
    /// Where the next poll starts.
    from: Timestamp,
    /// Events forwarded, by id, with their time (forgotten once out of the overlap).
    seen: HashMap<String, Timestamp>,
}

impl Listener {
    /// A listener over `client` (the project's token and key).
    pub fn new(client: MerchantClient, config: ListenConfig) -> Result<Listener, ListenError> {
        let http = reqwest::Client::builder()
            .timeout(config.forward_timeout)
            .redirect(reqwest::redirect::Policy::none())
            .build()?;
        Ok(Listener {
            client,
            http,
            from: config.since,
            config,
            seen: HashMap::new(),
        })
    }

    /// One round: asks for the events since the last round (waiting up to `wait` on the
    /// server when there is none), forwards each new one oldest first and returns what was
    /// forwarded. An error of the events API (token, scope, signature, rate limit) is
    /// returned for the caller to print; the next round tries again.
    pub async fn poll(&mut self, wait: Duration) -> Result<Vec<Forwarded>, ListenError> {
        let mut events = Vec::new();
        let mut cursor: Option<String> = None;
        loop {
            let mut query = format!(
                "created_from={}&limit=100",
                url_encode(&self.from.to_rfc3339())
            );
            match &cursor {
                Some(c) => query.push_str(&format!("&cursor={c}")),
                None if wait > Duration::ZERO => {
                    query.push_str(&format!("&wait={}", wait.as_secs()))
                }
                None => {}
            }
            let resp = self
                .client
                .list_events(&query)
                .await
                .map_err(ListenError::Events)?;
            if resp.status != reqwest::StatusCode::OK {
                return Err(ListenError::Refused(describe(&resp)));
            }
            let page: Page = serde_json::from_slice(&resp.body).map_err(ListenError::NotAPage)?;
            events.extend(page.data);
            match page.next_cursor {
                Some(c) => cursor = Some(c),
                None => break,
            }
        }
        // The list is newest first; the receiver gets them in the order they happened.
        events.reverse();
        let mut forwarded = Vec::new();
        let mut newest = None;
        for event in events {
            let Some(at) = Timestamp::parse_rfc3339(&event.created_at) else {
                continue;
            };
            newest = newest.max(Some(at));
            if self.seen.contains_key(&event.id) {
                continue;
            }
            forwarded.push(self.forward(&event).await);
            self.seen.insert(event.id, at);
        }
        if let Some(newest) = newest {
            let from = newest - OVERLAP;
            if from > self.from {
                self.from = from;
            }
        }
        let from = self.from;
        self.seen.retain(|_, at| *at >= from);
        Ok(forwarded)
    }

    /// Runs rounds until `stop` resolves, printing each line with `print`.
    pub async fn run(
        &mut self,
        mut print: impl FnMut(&str),
        stop: impl std::future::Future<Output = ()>,
    ) {
        tokio::pin!(stop);
        loop {
            let round = self.poll(LONG_POLL);
            let result = tokio::select! {
                r = round => r,
                () = &mut stop => return,
            };
            match result {
                // A round that only saw forwarded events (inside the overlap) did not wait on
                // the server; pause before the next one.
                Ok(lines) if lines.is_empty() => {
                    tokio::select! {
                        () = tokio::time::sleep(Duration::from_secs(1)) => {}
                        () = &mut stop => return,
                    }
                }
                Ok(lines) => lines.iter().for_each(|f| print(&f.line)),
                Err(e) => {
                    print(&format!("{e}; trying again in 5 s"));
                    tokio::select! {
                        () = tokio::time::sleep(Duration::from_secs(5)) => {}
                        () = &mut stop => return,
                    }
                }
            }
        }
    }

    /// Delivers one event to the local receiver, signed with the local secret at this moment.
    async fn forward(&self, event: &Event) -> Forwarded {
        let body = event.body.get().as_bytes().to_vec();
        let timestamp = now().unix_secs();
        let signature = signature_header(&[&self.config.secret], timestamp, &body);
        let started = std::time::Instant::now();
        let sent = self
            .http
            .post(&self.config.forward_to)
            .header(reqwest::header::CONTENT_TYPE, "application/json")
            .header(EVENT_ID_HEADER, &event.id)
            .header(TIMESTAMP_HEADER, timestamp.to_string())
            .header(SIGNATURE_HEADER, signature)
            .body(body)
            .send()
            .await;
        let took = started.elapsed().as_millis();
        let what = format!(
            "{} event {} ({}, payment {} {})",
            event.created_at, event.id, event.kind, event.payment_id, event.status
        );
        match sent {
            Ok(resp) => {
                let status = resp.status();
                let text = resp.text().await.unwrap_or_default();
                let excerpt: String = text.chars().take(200).collect();
                Forwarded {
                    event_id: event.id.clone(),
                    status: Some(status.as_u16()),
                    line: format!(
                        "{what} -> {} [{status}] in {took} ms{}",
                        self.config.forward_to,
                        if excerpt.is_empty() {
                            String::new()
                        } else {
                            format!(": {excerpt}")
                        }
                    ),
                }
            }
            Err(e) => Forwarded {
                event_id: event.id.clone(),
                status: None,
                line: format!(
                    "{what} -> {} failed: {}",
                    self.config.forward_to,
                    crate::create::no_answer(&e)
                ),
            },
        }
    }
}

/// The time now, from the system clock.
pub fn now() -> Timestamp {
    let millis = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| i64::try_from(d.as_millis()).unwrap_or(i64::MAX));
    Timestamp::from_unix_millis(millis)
}

/// Percent-encodes a query value (an RFC 3339 time has `:` and `+`).
fn url_encode(value: &str) -> String {
    url::form_urlencoded::byte_serialize(value.as_bytes()).collect()
}
