//! The receiver checker behind `payments-server check-receiver`: sends a merchant's callback
//! endpoint a scored series of callbacks, signed the way the dispatcher signs them
//! ([`CallbackSecrets::sign_attempt`]) and sent through the dispatcher's address-checking client
//! ([`callback_client`]), and judges each answer the way the service would.
//!
//! The series (docs/callbacks.md, "Checking a receiver"):
//!
//! | case | sent | expected |
//! |---|---|---|
//! | valid | a new event, signed now | `2xx` |
//! | replay | the same event again, signed anew | `2xx` (already processed, still acknowledged) |
//! | tampered body | a new event whose body changed after signing | `4xx` |
//! | wrong secret | a new event signed with another secret | `4xx` |
//! | stale timestamp | a new event signed 330 s ago | `4xx` |
//! | non-numeric timestamp | a new event, `X-Callback-Timestamp` not a number | `4xx` |
//! | unknown scheme | `v2=…` beside a valid `v1=…` | `2xx` |
//! | rotation | two `v1` values, the other secret's first | `2xx` |
//! | slow read | a new event; the whole answer within the attempt deadline | `2xx` in time |
//! | large response | a new event; the answer body | `2xx`, at most 4096 bytes |
//!
//! Only the answers are observed: a receiver that processes a repeated event twice but answers
//! `2xx` passes the replay case; one that answers an error to a repeat (a unique-key failure,
//! `409`) fails it.

use std::fmt::{self, Write as _};
use std::sync::Arc;
use std::time::{Duration, Instant};

use payments_core::callback::{
    check_ip, AddressPolicy, AttemptSignature, CallbackHost, CallbackSecret, CallbackSecrets,
    CallbackUrl, ATTEMPT_TIMEOUT, EVENT_ID_HEADER, RESPONSE_READ_LIMIT, SIGNATURE_HEADER,
    TIMESTAMP_HEADER,
};
use payments_core::random::uuid_v4;
use payments_core::{Clock, Timestamp};
use rustls::pki_types::CertificateDer;

use payments_http::resolver::{callback_client, ClientSettings, HostLookup, ResolveError};
use payments_http::system::{OsRandom, SystemClock};

fn now() -> Timestamp {
    SystemClock.now()
}

/// How old the stale case's timestamp is: beyond the 300 s tolerance with room for clock skew.
pub const STALE_BY: Duration = Duration::from_secs(330);

/// One case of the series.
#[non_exhaustive]
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Case {
    /// A correctly signed new event.
    Valid,
    /// The valid case's event again, with a new timestamp and signature.
    Replay,
    /// A body changed after it was signed.
    TamperedBody,
    /// Signed with a secret that is not the project's.
    WrongSecret,
    /// A correct signature over a timestamp [`STALE_BY`] old.
    StaleTimestamp,
    /// `X-Callback-Timestamp` that is not a number.
    NonNumericTimestamp,
    /// An unknown scheme (`v2=`) beside a valid `v1=`.
    UnknownScheme,
    /// Two `v1=` values, as during a rotation: another secret's first, then the valid one.
    Rotation,
    /// A new event whose whole answer must arrive within the attempt deadline.
    SlowRead,
    /// A new event whose answer body must fit in what the service reads.
    LargeResponse,
}

impl Case {
    /// Every case, in the order sent.
    pub const ALL: [Case; 10] = [
        Case::Valid,
        Case::Replay,
        Case::TamperedBody,
        Case::WrongSecret,
        Case::StaleTimestamp,
        Case::NonNumericTimestamp,
        Case::UnknownScheme,
        Case::Rotation,
        Case::SlowRead,
        Case::LargeResponse,
    ];

    /// The case's name in the table.
    pub fn name(self) -> &'static str {
        match self {
            Case::Valid => "valid",
            Case::Replay => "replay",
            Case::TamperedBody => "tampered body",
            Case::WrongSecret => "wrong secret",
            Case::StaleTimestamp => "stale timestamp",
            Case::NonNumericTimestamp => "non-numeric timestamp",
            Case::UnknownScheme => "unknown scheme",
            Case::Rotation => "rotation",
            Case::SlowRead => "slow read",
            Case::LargeResponse => "large response",
        }
    }

    /// Whether the receiver must accept (`2xx`) or reject (`4xx`).
    fn accepts(self) -> bool {
        !matches!(
            self,
            Case::TamperedBody
                | Case::WrongSecret
                | Case::StaleTimestamp
                | Case::NonNumericTimestamp
        )
    }

    fn expected(self) -> &'static str {
        match self {
            Case::SlowRead => "2xx within the attempt deadline",
            Case::LargeResponse => "2xx, body <= 4096 bytes",
            c if c.accepts() => "2xx",
            _ => "4xx",
        }
    }

    /// What to change in the receiver when the case fails.
    fn fix(self) -> &'static str {
        match self {
            Case::Valid => {
                "verify X-Callback-Signature as HMAC-SHA256(key = the whole whsec_ secret string, \
                 message = X-Callback-Timestamp + \".\" + the raw body bytes), lowercase hex, and \
                 answer 2xx once the event is stored; check that the secret is the project's \
                 current one and that the endpoint answers POST"
            }
            Case::Replay => {
                "remember processed event_ids (at least a day) and answer 2xx to a repeat without \
                 processing it again; any other answer makes the service retry the event"
            }
            Case::TamperedBody => {
                "compute the HMAC over the exact bytes received, before any JSON parsing or \
                 re-serialising, compare in constant time and answer 401 when it differs"
            }
            Case::WrongSecret => {
                "answer 401 to a signature no secret of yours produces; a receiver that accepts \
                 this accepts anybody's callbacks"
            }
            Case::StaleTimestamp => {
                "reject X-Callback-Timestamp more than 300 s away from your clock with 401, so a \
                 captured request cannot be replayed later"
            }
            Case::NonNumericTimestamp => {
                "parse X-Callback-Timestamp as an integer number of seconds and answer 401 (not \
                 2xx, not 5xx) to anything else"
            }
            Case::UnknownScheme => {
                "split X-Callback-Signature on commas, skip values whose scheme is not v1 and \
                 accept when any v1 value matches"
            }
            Case::Rotation => {
                "accept when any v1 value matches: for 24 h after a rotation the header carries a \
                 signature by the new and by the previous secret, in either order for you"
            }
            Case::SlowRead => {
                "answer within 10 s (the service's deadline for connect, headers and body): store \
                 the event, answer 2xx, do slow work afterwards"
            }
            Case::LargeResponse => {
                "answer with a short body: the service reads at most 4096 bytes of it and then \
                 closes the connection"
            }
        }
    }
}

impl fmt::Display for Case {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// What the checker needs.
#[derive(Debug, Clone)]
pub struct CheckOptions {
    /// The receiver's URL.
    pub url: String,
    /// The project's callback secret.
    pub secret: CallbackSecret,
    /// The callback policy (the server's `allow_local_callbacks`).
    pub policy: AddressPolicy,
    /// How names are looked up before their addresses are checked.
    pub lookup: Arc<dyn HostLookup>,
    /// CA certificates trusted besides the public roots (`callback_ca_file`).
    pub extra_roots: Vec<CertificateDer<'static>>,
    /// The payment the events are about; a receiver that reads the payment back (as it should)
    /// needs a real one. Default: a random id.
    pub payment_id: Option<String>,
    /// The deadline of one exchange (the dispatcher's, 10 s).
    pub attempt_timeout: Duration,
}

impl CheckOptions {
    /// Options with the system resolver, no extra roots, a random payment id and the
    /// dispatcher's deadline.
    pub fn new(url: impl Into<String>, secret: CallbackSecret, policy: AddressPolicy) -> Self {
        CheckOptions {
            url: url.into(),
            secret,
            policy,
            lookup: Arc::new(payments_http::resolver::SystemLookup),
            extra_roots: Vec::new(),
            payment_id: None,
            attempt_timeout: ATTEMPT_TIMEOUT,
        }
    }
}

/// Why no case could be sent.
#[non_exhaustive]
#[derive(Debug, thiserror::Error)]
pub enum CheckError {
    /// The callback policy refuses the destination.
    #[error("destination refused by the callback policy: {0} (a local receiver needs callbacks.allow_local / PAYMENTS_CALLBACKS__ALLOW_LOCAL=1, development only)")]
    Refused(#[source] RefusedDestination),
    /// The HTTP client could not be built.
    #[error(transparent)]
    Client(#[from] payments_http::resolver::ClientBuildError),
}

/// What the callback policy refuses in a destination.
#[non_exhaustive]
#[derive(Debug, thiserror::Error)]
pub enum RefusedDestination {
    /// The URL (scheme, host, length, ...).
    #[error(transparent)]
    Url(#[from] payments_core::callback::CallbackUrlError),
    /// The IP address the URL names.
    #[error(transparent)]
    Address(#[from] payments_core::callback::ForbiddenAddress),
}

/// The result of one case.
#[derive(Debug, Clone)]
pub struct CaseResult {
    /// The case.
    pub case: Case,
    /// What was expected, as shown.
    pub expected: &'static str,
    /// What the receiver answered, as shown (`200 in 12 ms`, `timeout after 10s`, ...).
    pub got: String,
    /// The HTTP status, if any answer came.
    pub status: Option<u16>,
    /// Whether the answer is the expected one.
    pub passed: bool,
}

impl CaseResult {
    /// What to change in the receiver (shown for failed cases); with no answer at all, first
    /// that the receiver be reachable.
    pub fn fix(&self) -> String {
        match self.status {
            Some(_) => self.case.fix().to_owned(),
            None => format!(
                "no answer: make sure the receiver runs at this URL, is reachable from the server \
                 and answers within 10 s; then {}",
                self.case.fix()
            ),
        }
    }
}

/// The results of the whole series.
#[derive(Debug, Clone)]
pub struct Report {
    /// The receiver's URL.
    pub url: String,
    /// One result per case, in the order sent.
    pub results: Vec<CaseResult>,
}

impl Report {
    /// Whether every case passed.
    pub fn passed(&self) -> bool {
        self.results.iter().all(|r| r.passed)
    }

    /// The cases that failed.
    pub fn failed(&self) -> Vec<Case> {
        self.results
            .iter()
            .filter(|r| !r.passed)
            .map(|r| r.case)
            .collect()
    }

    /// The table (case, expected, got, pass/fail), then an explanation with the fix for each
    /// failure, then the summary line.
    pub fn render(&self) -> String {
        let rows: Vec<[&str; 4]> = self
            .results
            .iter()
            .map(|r| {
                [
                    r.case.name(),
                    r.expected,
                    r.got.as_str(),
                    if r.passed { "pass" } else { "FAIL" },
                ]
            })
            .collect();
        let header = ["case", "expected", "got", "result"];
        let mut widths = header.map(str::len);
        for row in &rows {
            for (w, cell) in widths.iter_mut().zip(row) {
                *w = (*w).max(cell.chars().count());
            }
        }
        let mut out = format!("check-receiver {}\n\n", self.url);
        for row in std::iter::once(&header).chain(&rows) {
            let line = row
                .iter()
                .zip(widths)
                .map(|(cell, w)| format!("{cell:<w$}"))
                .collect::<Vec<_>>()
                .join("  ");
            let _ = writeln!(out, "{}", line.trim_end());
        }
        let failed: Vec<&CaseResult> = self.results.iter().filter(|r| !r.passed).collect();
        if !failed.is_empty() {
            out.push('\n');
            for r in &failed {
                let _ = writeln!(
                    out,
                    "FAIL {}: expected {}, got {}.\n  fix: {}",
                    r.case,
                    r.expected,
                    r.got,
                    r.fix()
                );
            }
        }
        let _ = writeln!(
            out,
            "\n{} of {} cases passed",
            self.results.len() - failed.len(),
            self.results.len()
        );
        out
    }
}

/// Checks that the callback policy allows `url`, as the dispatcher does before each attempt
/// (the resolver checks the addresses of a name at connect time).
pub fn check_destination(url: &str, policy: AddressPolicy) -> Result<CallbackUrl, CheckError> {
    let url = CallbackUrl::parse(url, policy).map_err(|e| CheckError::Refused(e.into()))?;
    if let CallbackHost::Ip(ip) = url.host() {
        check_ip(ip.to_canonical(), policy).map_err(|f| CheckError::Refused(f.into()))?;
    }
    Ok(url)
}

/// Sends the series to the receiver and scores every answer. An error only when nothing could
/// be sent (a refused destination); a refused address at connect time fails the cases.
pub async fn check_receiver(options: &CheckOptions) -> Result<Report, CheckError> {
    let url = check_destination(&options.url, options.policy)?;
    let client = callback_client(&ClientSettings {
        policy: options.policy,
        lookup: options.lookup.clone(),
        extra_roots: options.extra_roots.clone(),
        connect_timeout: options.attempt_timeout,
    })?;
    let checker = Checker {
        client,
        url: url.as_str().to_owned(),
        secret: options.secret.clone(),
        other: CallbackSecret::generate(&OsRandom),
        payment_id: options
            .payment_id
            .clone()
            .unwrap_or_else(|| uuid_v4(&OsRandom).to_string()),
        timeout: options.attempt_timeout,
    };
    let mut results = Vec::with_capacity(Case::ALL.len());
    let valid = checker.event();
    for case in Case::ALL {
        let (body, timestamp, signature) = match case {
            Case::Valid | Case::Replay => {
                let s = checker.sign(&checker.secrets(), &valid.1, 0);
                (valid.1.clone(), s.timestamp.to_string(), s.signature)
            }
            _ => {
                let (_, body) = checker.event();
                checker.prepare(case, body)
            }
        };
        let event_id = if matches!(case, Case::Valid | Case::Replay) {
            valid.0.clone()
        } else {
            event_id_of(&body)
        };
        let answer = checker.send(&event_id, &timestamp, &signature, body).await;
        results.push(score(case, answer, checker.timeout));
    }
    Ok(Report {
        url: url.as_str().to_owned(),
        results,
    })
}

struct Checker {
    client: reqwest::Client,
    url: String,
    secret: CallbackSecret,
    other: CallbackSecret,
    payment_id: String,
    timeout: Duration,
}

/// What came back from one exchange.
enum Answer {
    /// A status and the body read (at most one byte past the read limit).
    Status {
        status: u16,
        body_bytes: usize,
        elapsed: Duration,
    },
    /// No answer in time.
    Timeout,
    /// No answer (connect, refused address, reading the body).
    Error(String),
}

impl Checker {
    /// A new event about the payment: its `event_id` and body, shaped as the service's.
    fn event(&self) -> (String, Vec<u8>) {
        sample_event(&self.payment_id)
    }

    /// The project's secret alone.
    fn secrets(&self) -> CallbackSecrets {
        CallbackSecrets::new(self.secret.clone(), now())
    }

    /// The signature headers of an attempt `age` ago.
    fn sign(&self, secrets: &CallbackSecrets, body: &[u8], age_secs: u64) -> AttemptSignature {
        secrets.sign_attempt(now() - Duration::from_secs(age_secs), body)
    }

    /// The body and the timestamp and signature header values of a case other than the valid
    /// one and its replay.
    fn prepare(&self, case: Case, body: Vec<u8>) -> (Vec<u8>, String, String) {
        match case {
            Case::TamperedBody => {
                let s = self.sign(&self.secrets(), &body, 0);
                let text = String::from_utf8(body).expect("the body is ASCII");
                let tampered = text.replacen("\"amount\":1500.00", "\"amount\":15000.00", 1);
                (tampered.into_bytes(), s.timestamp.to_string(), s.signature)
            }
            Case::WrongSecret => {
                let stranger = CallbackSecrets::new(self.other.clone(), now());
                let s = self.sign(&stranger, &body, 0);
                (body, s.timestamp.to_string(), s.signature)
            }
            Case::StaleTimestamp => {
                let s = self.sign(&self.secrets(), &body, STALE_BY.as_secs());
                (body, s.timestamp.to_string(), s.signature)
            }
            Case::NonNumericTimestamp => {
                let s = self.sign(&self.secrets(), &body, 0);
                (body, format!("{}s", s.timestamp), s.signature)
            }
            Case::UnknownScheme => {
                let s = self.sign(&self.secrets(), &body, 0);
                let unknown = hex::encode(uuid_v4(&OsRandom).as_bytes().repeat(2));
                (
                    body,
                    s.timestamp.to_string(),
                    format!("v2={unknown},{}", s.signature),
                )
            }
            Case::Rotation => {
                // The project's secret was rotated to another one the receiver does not know
                // yet: the header carries the new secret's signature first, then the valid one.
                let mut rotated = self.secrets();
                rotated.rotate(self.other.clone(), now());
                let s = self.sign(&rotated, &body, 0);
                (body, s.timestamp.to_string(), s.signature)
            }
            _ => {
                let s = self.sign(&self.secrets(), &body, 0);
                (body, s.timestamp.to_string(), s.signature)
            }
        }
    }

    /// One exchange as the dispatcher makes it: one deadline over connect, headers and body
    /// read; at most one byte more than [`RESPONSE_READ_LIMIT`] read.
    async fn send(
        &self,
        event_id: &str,
        timestamp: &str,
        signature: &str,
        body: Vec<u8>,
    ) -> Answer {
        let started = Instant::now();
        let request = self
            .client
            .post(&self.url)
            .header(reqwest::header::CONTENT_TYPE, "application/json")
            .header(EVENT_ID_HEADER, event_id)
            .header(TIMESTAMP_HEADER, timestamp)
            .header(SIGNATURE_HEADER, signature)
            .body(body);
        let exchange = async {
            let mut response = request.send().await.map_err(describe)?;
            let status = response.status().as_u16();
            let mut read = 0usize;
            while read <= RESPONSE_READ_LIMIT {
                match response.chunk().await {
                    Ok(Some(chunk)) => read = read.saturating_add(chunk.len()),
                    Ok(None) => break,
                    Err(e) => return Err(format!("reading the answer: {}", describe(e))),
                }
            }
            Ok((status, read))
        };
        match tokio::time::timeout(self.timeout, exchange).await {
            Ok(Ok((status, body_bytes))) => Answer::Status {
                status,
                body_bytes,
                elapsed: started.elapsed(),
            },
            Ok(Err(e)) => Answer::Error(e),
            Err(_) => Answer::Timeout,
        }
    }
}

/// A new `completed` event about `payment_id`: a fresh `event_id` and the body, shaped as the
/// service's.
pub fn sample_event(payment_id: &str) -> (String, Vec<u8>) {
    let event_id = uuid_v4(&OsRandom).to_string();
    let id = serde_json::to_string(payment_id).expect("strings serialise");
    let body = format!(
        "{{\"id\":{id},\"event_id\":\"{event_id}\",\"status\":\"completed\",\
         \"amount\":1500.00,\"initial_amount\":1500.00,\"currency\":\"RUB\",\
         \"payment_method\":\"sbp\",\"bank_code\":null,\"is_intrabank\":null,\
         \"merchant_payment_id\":\"check-receiver-{}\",\"rate\":null,\"course\":null,\
         \"is_test\":true,\"project_id\":null}}",
        &event_id[..8]
    );
    (event_id, body.into_bytes())
}

/// The `event_id` of an event body (empty when it has none).
pub fn event_id_of(body: &[u8]) -> String {
    serde_json::from_slice::<serde_json::Value>(body)
        .ok()
        .and_then(|v| v["event_id"].as_str().map(str::to_owned))
        .unwrap_or_default()
}

fn describe(e: reqwest::Error) -> String {
    let mut source: Option<&(dyn std::error::Error + 'static)> = Some(&e);
    let mut last = e.to_string();
    while let Some(err) = source {
        if let Some(ResolveError::Forbidden(f)) = err.downcast_ref::<ResolveError>() {
            return format!("forbidden address: {f}");
        }
        last = err.to_string();
        source = err.source();
    }
    if e.is_connect() {
        format!("connect: {last}")
    } else {
        last
    }
}

fn score(case: Case, answer: Answer, timeout: Duration) -> CaseResult {
    let (got, status, passed) = match answer {
        Answer::Timeout => (format!("no answer in {timeout:?}"), None, false),
        Answer::Error(e) => (e, None, false),
        Answer::Status {
            status,
            body_bytes,
            elapsed,
        } => {
            let ok = if case.accepts() {
                (200..300).contains(&status)
            } else {
                (400..500).contains(&status)
            };
            let mut got = format!("{status} in {} ms", elapsed.as_millis());
            let passed = match case {
                Case::LargeResponse => {
                    if body_bytes > RESPONSE_READ_LIMIT {
                        got = format!("{status}, body > {RESPONSE_READ_LIMIT} bytes");
                    } else {
                        got = format!("{status}, body {body_bytes} bytes");
                    }
                    ok && body_bytes <= RESPONSE_READ_LIMIT
                }
                _ => ok,
            };
            (got, Some(status), passed)
        }
    };
    CaseResult {
        case,
        expected: case.expected(),
        got,
        status,
        passed,
    }
}
