//! Callback events: the body built once when an event is queued, and the outbox record that
//! carries it through delivery.

use serde::ser::SerializeMap;
use serde::{Serialize, Serializer};

use crate::amount::decimal_number;
use crate::callback::destination::CallbackUrl;
use crate::clock::Timestamp;
use crate::ids::{EventId, PaymentId, ProjectId};
use crate::payment::{Payment, PaymentStatus};

/// Whether an event is delivered with retries or once.
#[non_exhaustive]
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum EventKind {
    /// Sent because the payment closed or changed: up to 3 attempts.
    Automatic,
    /// A manual resend by support: exactly one attempt.
    ManualResend,
}

impl EventKind {
    /// The stored name.
    pub const fn as_str(self) -> &'static str {
        match self {
            EventKind::Automatic => "automatic",
            EventKind::ManualResend => "manual_resend",
        }
    }

    /// Parses a stored name.
    pub fn parse(s: &str) -> Option<EventKind> {
        match s {
            "automatic" => Some(EventKind::Automatic),
            "manual_resend" => Some(EventKind::ManualResend),
            _ => None,
        }
    }
}

/// An event the state machine asks to send: its id, kind and frozen body bytes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CallbackEvent {
    /// Fresh for every event; identical in all retries.
    pub event_id: EventId,
    /// The payment it is about.
    pub payment_id: PaymentId,
    /// The payment's project.
    pub project_id: ProjectId,
    /// The status the body carries.
    pub status: PaymentStatus,
    /// Automatic or manual resend.
    pub kind: EventKind,
    /// The JSON body, byte-for-byte what every attempt sends.
    pub body: Vec<u8>,
    /// When the event was queued.
    pub created_at: Timestamp,
}

impl CallbackEvent {
    /// Builds the event for `payment` in its current status; the body is serialised here, once.
    pub fn new(payment: &Payment, event_id: EventId, kind: EventKind, now: Timestamp) -> Self {
        let body = serde_json::to_vec(&CallbackBody { payment, event_id })
            .expect("serialising to a Vec cannot fail: every field is plain data");
        CallbackEvent {
            event_id,
            payment_id: payment.id,
            project_id: payment.project_id,
            status: payment.status,
            kind,
            body,
            created_at: now,
        }
    }
}

/// The callback body of the spec's Events section. No requisites, USDT amounts, error code or
/// cancellation reason.
struct CallbackBody<'a> {
    payment: &'a Payment,
    event_id: EventId,
}

impl Serialize for CallbackBody<'_> {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        let p = self.payment;
        let info = p.merchant_information();
        let mut m = s.serialize_map(None)?;
        m.serialize_entry("id", &p.id)?;
        m.serialize_entry("event_id", &self.event_id)?;
        m.serialize_entry("status", p.status.as_str())?;
        m.serialize_entry("amount", &p.amount)?;
        m.serialize_entry("initial_amount", &p.initial_amount)?;
        m.serialize_entry("currency", &p.currency)?;
        m.serialize_entry("payment_method", p.payment_method.as_str())?;
        m.serialize_entry("bank_code", &p.bank_code)?;
        m.serialize_entry("is_intrabank", &p.is_intrabank)?;
        m.serialize_entry("merchant_payment_id", p.merchant_payment_id.as_str())?;
        m.serialize_entry("rate", &info.map(|i| decimal_number(&i.rate)))?;
        m.serialize_entry("course", &info.map(|i| decimal_number(&i.course)))?;
        m.serialize_entry("is_test", &p.is_test())?;
        m.serialize_entry("project_id", &p.project_id)?;
        // Only with metadata: a payment without it has the spec's body, byte for byte.
        if !p.metadata.is_empty() {
            m.serialize_entry("metadata", &p.metadata)?;
        }
        m.end()
    }
}

/// Where an outbox event stands.
#[non_exhaustive]
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum DeliveryState {
    /// Waiting for its next attempt at `next_attempt_at`.
    Pending,
    /// A `2xx` was received.
    Delivered,
    /// Every attempt failed; delivery stopped.
    Failed,
}

impl DeliveryState {
    /// The stored name.
    pub const fn as_str(self) -> &'static str {
        match self {
            DeliveryState::Pending => "pending",
            DeliveryState::Delivered => "delivered",
            DeliveryState::Failed => "failed",
        }
    }

    /// Parses a stored name.
    pub fn parse(s: &str) -> Option<DeliveryState> {
        match s {
            "pending" => Some(DeliveryState::Pending),
            "delivered" => Some(DeliveryState::Delivered),
            "failed" => Some(DeliveryState::Failed),
            _ => None,
        }
    }
}

/// A queued event with its destination and delivery progress: one outbox row.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct OutboxEvent {
    /// The event and its frozen body.
    pub event: CallbackEvent,
    /// The destination chosen when the event was queued.
    pub destination: CallbackUrl,
    /// Pending, delivered or failed.
    pub state: DeliveryState,
    /// Attempts made so far.
    pub attempts: u32,
    /// Attempts allowed (3 automatic, 1 manual).
    pub max_attempts: u32,
    /// When the next attempt is due (pending events only).
    pub next_attempt_at: Option<Timestamp>,
}

/// The result of one delivery attempt.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DeliveryAttempt {
    /// 1 for the first attempt.
    pub attempt: u32,
    /// When the attempt started.
    pub started_at: Timestamp,
    /// How long it took, in milliseconds.
    pub duration_ms: u64,
    /// The response status, if a response arrived.
    pub http_status: Option<u16>,
    /// The failure, if any (`timeout`, `connect: ...`, `redirect not followed`, ...).
    pub error: Option<String>,
    /// `true` for a `2xx`.
    pub success: bool,
    /// The start of the response body as text (at most [`RESPONSE_EXCERPT_MAX`] bytes,
    /// invalid UTF-8 replaced), when a response arrived: what the receiver said, for the
    /// deliveries page.
    pub response_excerpt: Option<String>,
}

/// Why a delivery attempt failed, from a small fixed set: what the dispatcher records at the
/// start of [`DeliveryAttempt::error`] ([`record`](Self::record): the kind's prefix, then the
/// technical detail), what [`DeliveryAttempt::error_kind`] reads back and what people are
/// shown ([`text`](Self::text)).
#[non_exhaustive]
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum DeliveryErrorKind {
    /// No answer (or no whole answer) within the attempt's time.
    Timeout,
    /// The receiver's host refused the TCP connection (nothing listens on the port).
    ConnectionRefused,
    /// The callback URL's host name did not resolve.
    DnsFailure,
    /// The TLS handshake failed: an untrusted or mismatched certificate, or a receiver that
    /// does not speak TLS on an `https` URL.
    TlsError,
    /// Another failure to connect (unreachable network, reset during the connection).
    ConnectFailed,
    /// The callback URL's host resolved to an address the policy refuses (private, loopback).
    RefusedAddress,
    /// The callback URL is not one the service sends to (its scheme, or a setting).
    RefusedDestination,
    /// A redirect: not followed, the attempt failed.
    Redirect,
    /// The receiver answered with a status outside 2xx.
    HttpStatus,
    /// The answer's body broke off.
    ResponseBroken,
    /// The request failed before any answer, for another reason.
    RequestFailed,
}

impl DeliveryErrorKind {
    /// Every kind.
    pub const ALL: [DeliveryErrorKind; 11] = [
        DeliveryErrorKind::Timeout,
        DeliveryErrorKind::ConnectionRefused,
        DeliveryErrorKind::DnsFailure,
        DeliveryErrorKind::TlsError,
        DeliveryErrorKind::ConnectFailed,
        DeliveryErrorKind::RefusedAddress,
        DeliveryErrorKind::RefusedDestination,
        DeliveryErrorKind::Redirect,
        DeliveryErrorKind::HttpStatus,
        DeliveryErrorKind::ResponseBroken,
        DeliveryErrorKind::RequestFailed,
    ];

    /// The start of the recorded error text of this kind (stable: stored rows are read by it).
    pub fn prefix(self) -> &'static str {
        match self {
            DeliveryErrorKind::Timeout => "timeout",
            DeliveryErrorKind::ConnectionRefused => "connection refused",
            DeliveryErrorKind::DnsFailure => "dns failure",
            DeliveryErrorKind::TlsError => "tls error",
            DeliveryErrorKind::ConnectFailed => "connect failed",
            DeliveryErrorKind::RefusedAddress => "forbidden address",
            DeliveryErrorKind::RefusedDestination => "destination refused",
            DeliveryErrorKind::Redirect => "redirect",
            DeliveryErrorKind::HttpStatus => "http status",
            DeliveryErrorKind::ResponseBroken => "reading the response",
            DeliveryErrorKind::RequestFailed => "request",
        }
    }

    /// The text to record: the kind's prefix and the technical detail (`connection refused:
    /// tcp connect error: ...`).
    pub fn record(self, detail: &str) -> String {
        if detail.is_empty() {
            self.prefix().to_string()
        } else {
            format!("{}: {detail}", self.prefix())
        }
    }

    /// What it means, for people (the cabinet, the events API): no address, resolver or TLS
    /// library message, nothing of a network the reader has no business seeing.
    pub fn text(self) -> &'static str {
        match self {
            DeliveryErrorKind::Timeout => "timeout: no answer in time",
            DeliveryErrorKind::ConnectionRefused => "connection refused",
            DeliveryErrorKind::DnsFailure => {
                "DNS failure: the callback URL's host name did not resolve"
            }
            DeliveryErrorKind::TlsError => {
                "TLS failure: the receiver's certificate or TLS handshake was not accepted"
            }
            DeliveryErrorKind::ConnectFailed => "could not connect to the receiver",
            DeliveryErrorKind::RefusedAddress => {
                "refused by the address policy: the callback URL's host is not a public address"
            }
            DeliveryErrorKind::RefusedDestination => {
                "refused: the callback URL is not one the service sends to"
            }
            DeliveryErrorKind::Redirect => "redirect not followed",
            DeliveryErrorKind::HttpStatus => "an answer outside 2xx",
            DeliveryErrorKind::ResponseBroken => "the answer broke off",
            DeliveryErrorKind::RequestFailed => "the request failed before an answer",
        }
    }
}

impl DeliveryAttempt {
    /// The kind of failure, read from the start of [`error`](Self::error) (texts recorded
    /// with [`DeliveryErrorKind::record`]; an older `connect: ...` text is told apart by its
    /// detail: DNS, TLS, connection refused); `None` for a success. A status outside 2xx
    /// without an error text is [`DeliveryErrorKind::HttpStatus`].
    pub fn error_kind(&self) -> Option<DeliveryErrorKind> {
        use DeliveryErrorKind as K;
        if self.success {
            return None;
        }
        let error = self.error.as_deref().unwrap_or("");
        let starts_with = |prefix: &str| {
            error.starts_with(prefix)
                && error[prefix.len()..]
                    .chars()
                    .next()
                    .is_none_or(|c| !c.is_ascii_alphabetic())
        };
        let starts = |k: K| starts_with(k.prefix());
        let kind = [
            K::ConnectFailed,
            K::ConnectionRefused,
            K::DnsFailure,
            K::TlsError,
            K::RefusedAddress,
            K::RefusedDestination,
            K::Redirect,
            K::HttpStatus,
            K::ResponseBroken,
            K::Timeout,
            K::RequestFailed,
        ]
        .into_iter()
        .find(|k| starts(*k));
        if let Some(k) = kind {
            return Some(k);
        }
        if starts_with("connect") {
            // `connect: ...`, recorded before the kinds were told apart at the source.
            let lower = error.to_ascii_lowercase();
            let mentions = |words: &[&str]| words.iter().any(|w| lower.contains(w));
            return Some(
                if mentions(&["dns", "lookup", "resolve", "name or service not known"]) {
                    K::DnsFailure
                } else if mentions(&["certificate", "tls", "handshake", "ssl"]) {
                    K::TlsError
                } else if mentions(&["connection refused"]) {
                    K::ConnectionRefused
                } else {
                    K::ConnectFailed
                },
            );
        }
        Some(match self.http_status {
            Some(s) if (300..400).contains(&s) => K::Redirect,
            Some(_) => K::HttpStatus,
            None => K::RequestFailed,
        })
    }

    /// Why the attempt failed, as a label from a small fixed set (`redirect`, `http_4xx`,
    /// `http_5xx`, `timeout`, `response`, `connect`, `forbidden_address`,
    /// `destination_refused`, `request`); `None` for a success. Reads the texts the bundled
    /// dispatcher records in [`error`](Self::error): `forbidden address: ...`,
    /// `destination refused: ...`, `timeout...`, `connect: ...`, `request: ...`,
    /// `reading the response: ...`. The metrics count by it.
    pub fn failure_reason(&self) -> Option<&'static str> {
        if self.success {
            return None;
        }
        use DeliveryErrorKind as K;
        let kind = self.error_kind()?;
        Some(match self.http_status {
            Some(s) if (300..400).contains(&s) => "redirect",
            Some(s) if (400..500).contains(&s) => "http_4xx",
            Some(s) if s >= 500 => "http_5xx",
            Some(_) if kind == K::Timeout => "timeout",
            Some(_) => "response",
            None => match kind {
                K::Timeout => "timeout",
                K::ConnectionRefused | K::DnsFailure | K::TlsError | K::ConnectFailed => "connect",
                K::RefusedAddress => "forbidden_address",
                K::RefusedDestination => "destination_refused",
                _ => "request",
            },
        })
    }

    /// What this attempt came to, in the merchant's terms: the status, or what kept an answer
    /// from arriving (refused by the address policy, DNS failure, TLS failure, connection
    /// refused, timeout, ...), without the detail an operator sees in [`error`](Self::error)
    /// (resolved internal addresses, resolver and TLS library messages), which could map a
    /// network the merchant has no business seeing. Built on
    /// [`failure_reason`](Self::failure_reason).
    pub fn result_for_merchant(&self) -> String {
        use DeliveryErrorKind as K;
        let Some(kind) = self.error_kind() else {
            return self
                .http_status
                .map_or_else(|| "delivered".into(), |s| format!("HTTP {s}"));
        };
        match (self.http_status, kind) {
            (Some(s), K::Redirect) => format!("HTTP {s}: redirect not followed"),
            (Some(s), K::Timeout) => format!("HTTP {s}: the answer did not finish in time"),
            (Some(s), K::ResponseBroken) => format!("HTTP {s}: the answer broke off"),
            (Some(s), _) => format!("HTTP {s}"),
            (None, K::RequestFailed) if self.error.as_deref().unwrap_or("").is_empty() => {
                "no answer".into()
            }
            (None, kind) => kind.text().into(),
        }
    }

    /// The technical detail of the failure (the library's message after the kind's prefix),
    /// for the operator and support; `None` when there is none beyond the kind.
    pub fn error_detail(&self) -> Option<&str> {
        let error = self.error.as_deref()?;
        let detail = match self.error_kind() {
            Some(k) => error
                .strip_prefix(k.prefix())
                .map_or(error, |rest| rest.trim_start_matches(':').trim_start()),
            None => error,
        };
        (!detail.is_empty()).then_some(detail)
    }

    /// The event's state and schedule after this attempt, when the dispatcher asks for the
    /// next one at `next_attempt_at`: delivered on success, failed without a next attempt,
    /// else pending until then. Only a pending event keeps a schedule. Every store applies
    /// this one rule in `record_attempt`.
    pub fn next_step(
        &self,
        next_attempt_at: Option<Timestamp>,
    ) -> (DeliveryState, Option<Timestamp>) {
        match (self.success, next_attempt_at) {
            (true, _) => (DeliveryState::Delivered, None),
            (false, Some(at)) => (DeliveryState::Pending, Some(at)),
            (false, None) => (DeliveryState::Failed, None),
        }
    }
}

/// The most bytes of a receiver's response kept with an attempt.
pub const RESPONSE_EXCERPT_MAX: usize = 512;

/// `body` cut to at most [`RESPONSE_EXCERPT_MAX`] bytes on a character boundary, invalid UTF-8
/// replaced.
pub fn response_excerpt(body: &[u8]) -> String {
    let text = String::from_utf8_lossy(&body[..body.len().min(RESPONSE_EXCERPT_MAX)]);
    let mut end = text.len().min(RESPONSE_EXCERPT_MAX);
    while !text.is_char_boundary(end) {
        end -= 1;
    }
    text[..end].to_string()
}

/// An event with every attempt made to deliver it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct EventRecord {
    /// The outbox row.
    pub outbox: OutboxEvent,
    /// Attempts in order.
    pub attempts: Vec<DeliveryAttempt>,
}

/// Which failed events to list or resend: every condition given must hold.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct FailedEventFilter {
    /// Only events of this project.
    pub project: Option<ProjectId>,
    /// Only events whose destination host is this one (a name compared without regard to
    /// case, or an IP address as written in the URL).
    pub host: Option<String>,
    /// Only events queued at or after this time.
    pub since: Option<Timestamp>,
    /// Only events queued before this time.
    pub until: Option<Timestamp>,
}

impl FailedEventFilter {
    /// Whether `event` passes the filter.
    pub fn matches(&self, event: &OutboxEvent) -> bool {
        self.project.is_none_or(|p| event.event.project_id == p)
            && self.since.is_none_or(|t| event.event.created_at >= t)
            && self.until.is_none_or(|t| event.event.created_at < t)
            && self
                .host
                .as_deref()
                .is_none_or(|h| destination_host(&event.destination).eq_ignore_ascii_case(h))
    }
}

/// The host of a destination as the filters and logs name it: the domain name, or the IP
/// address without brackets.
pub fn destination_host(url: &CallbackUrl) -> String {
    use crate::callback::destination::CallbackHost;
    match url.host() {
        CallbackHost::Domain(name) => name.to_ascii_lowercase(),
        CallbackHost::Ip(ip) => ip.to_string(),
    }
}

/// A failed event nobody has resent yet, with its last attempt: what the operator's failed
/// list shows.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FailedEvent {
    /// The outbox row (state [`DeliveryState::Failed`]).
    pub outbox: OutboxEvent,
    /// The last attempt made, if the store has it.
    pub last_attempt: Option<DeliveryAttempt>,
}

#[cfg(test)]
mod merchant_terms {
    use super::DeliveryAttempt;
    use crate::Timestamp;

    fn failed(http_status: Option<u16>, error: &str) -> String {
        DeliveryAttempt {
            attempt: 1,
            started_at: Timestamp::from_unix_secs(0),
            duration_ms: 5,
            http_status,
            error: Some(error.to_string()),
            success: false,
            response_excerpt: None,
        }
        .result_for_merchant()
    }

    /// Every kind reads back from the text recorded for it, whatever the detail says (a TLS
    /// message that mentions "connection refused" stays a TLS failure), and the detail is what
    /// follows the prefix.
    #[test]
    fn every_kind_reads_back_from_what_is_recorded() {
        use super::DeliveryErrorKind as K;
        for kind in K::ALL {
            let status = match kind {
                K::Redirect => Some(302),
                K::HttpStatus => Some(500),
                K::ResponseBroken => Some(200),
                _ => None,
            };
            let recorded = kind.record("tcp: connection refused by dns over tls");
            let attempt = DeliveryAttempt {
                attempt: 1,
                started_at: Timestamp::from_unix_secs(0),
                duration_ms: 5,
                http_status: status,
                error: Some(recorded.clone()),
                success: false,
                response_excerpt: None,
            };
            assert_eq!(attempt.error_kind(), Some(kind), "{recorded}");
            assert_eq!(
                attempt.error_detail(),
                Some("tcp: connection refused by dns over tls"),
                "{recorded}"
            );
            if status.is_none() {
                assert_eq!(attempt.result_for_merchant(), kind.text(), "{recorded}");
            }
        }
    }

    /// The texts the dispatcher records, as the deliveries page of a merchant shows them: what
    /// failed, never the internal address or the resolver's message.
    #[test]
    fn failures_read_in_the_merchants_terms_without_internal_detail() {
        let cases = [
            (
                None,
                "forbidden address: 127.0.0.1 is a loopback address, resolved from vm",
                "refused by the address policy: the callback URL's host is not a public address",
            ),
            (
                None,
                "connect: dns error: failed to lookup address information: Name or service not \
                 known",
                "DNS failure: the callback URL's host name did not resolve",
            ),
            (
                None,
                "connect: invalid peer certificate: UnknownIssuer",
                "TLS failure: the receiver's certificate or TLS handshake was not accepted",
            ),
            (
                None,
                "connect: tcp connect error: Connection refused (os error 111)",
                "connection refused",
            ),
            (None, "timeout after 10s", "timeout: no answer in time"),
            (Some(500), "http status 500", "HTTP 500"),
            (
                Some(302),
                "redirect (302) not followed",
                "HTTP 302: redirect not followed",
            ),
            (
                Some(200),
                "reading the response: connection reset",
                "HTTP 200: the answer broke off",
            ),
            (
                None,
                "request: error sending request for url (https://10.1.2.3/cb)",
                "the request failed before an answer",
            ),
        ];
        for (status, recorded, shown) in cases {
            let got = failed(status, recorded);
            assert_eq!(got, shown, "{recorded}");
            for internal in ["127.0.0.1", "vm", "10.1.2.3", "os error"] {
                assert!(!got.contains(internal), "{got:?} shows {internal}");
            }
        }
    }
}

impl EventRecord {
    /// The Event resource of the merchant's events API (`GET /api/v1/events/{id}`): the event
    /// with its frozen body (the exact bytes every attempt sends, embedded as JSON), its
    /// destination, delivery state and attempts, each attempt's outcome in the merchant's
    /// terms ([`DeliveryAttempt::result_for_merchant`]).
    pub fn view(&self) -> EventView<'_> {
        EventView(self)
    }
}

/// The merchant's view of an [`EventRecord`] (see [`EventRecord::view`]).
#[derive(Debug, Clone, Copy)]
pub struct EventView<'a>(&'a EventRecord);

impl Serialize for EventView<'_> {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        let o = &self.0.outbox;
        let e = &o.event;
        // The body was serialised by this service as JSON: embedded verbatim, so a client
        // reads the very bytes that were (or will be) signed and sent.
        let body = std::str::from_utf8(&e.body)
            .ok()
            .and_then(|text| serde_json::value::RawValue::from_string(text.to_string()).ok());
        let attempts: Vec<AttemptView<'_>> = self.0.attempts.iter().map(AttemptView).collect();
        let mut m = s.serialize_map(None)?;
        m.serialize_entry("id", &e.event_id)?;
        m.serialize_entry("payment_id", &e.payment_id)?;
        m.serialize_entry("type", e.kind.as_str())?;
        m.serialize_entry("status", e.status.as_str())?;
        m.serialize_entry("created_at", &e.created_at)?;
        m.serialize_entry("destination", o.destination.as_str())?;
        m.serialize_entry("delivery_state", o.state.as_str())?;
        m.serialize_entry("attempts_made", &o.attempts)?;
        m.serialize_entry("max_attempts", &o.max_attempts)?;
        m.serialize_entry("next_attempt_at", &o.next_attempt_at)?;
        m.serialize_entry("attempts", &attempts)?;
        m.serialize_entry("body", &body)?;
        m.end()
    }
}

/// One attempt as the merchant sees it.
struct AttemptView<'a>(&'a DeliveryAttempt);

impl Serialize for AttemptView<'_> {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        let a = self.0;
        let mut m = s.serialize_map(None)?;
        m.serialize_entry("attempt", &a.attempt)?;
        m.serialize_entry("started_at", &a.started_at)?;
        m.serialize_entry("duration_ms", &a.duration_ms)?;
        m.serialize_entry("http_status", &a.http_status)?;
        m.serialize_entry("success", &a.success)?;
        m.serialize_entry("result", &a.result_for_merchant())?;
        m.serialize_entry("response_excerpt", &a.response_excerpt)?;
        m.end()
    }
}
