//! The merchant API's request log: each project's recent requests as the merchant sees them in
//! the cabinet ("Requests"), and the integration health read from them.
//!
//! The HTTP adapter notes every merchant request it could attribute to a project (a request
//! with an unknown token is nobody's) as a [`RequestLogEntry`], off the request's path; the
//! store keeps them per project under a [`RequestLogPolicy`] (at most
//! [`RequestLogPolicy::keep`] rows, none older than [`RequestLogPolicy::max_age`]).
//! Nothing secret is kept: no body, no token, no signature; the path without its query; for a
//! refused signature the [`SignatureDiagnosis`] (the reason, the covered components and the
//! signature base the server verified, with every value the diagnosis does not need shown as
//! `[redacted]`: [`logged_base`]).
//!
//! [`IntegrationHealth::of`] decides what the summary says: the share of `4xx` answers by
//! error code, creates that reuse a `merchant_payment_id`, payments read more often than the
//! spec's polling interval allows, and the clock skew seen in the signatures' `created`.

use std::collections::{BTreeMap, HashMap};
use std::time::Duration;

use serde::{Deserialize, Serialize};

use crate::auth::SignatureError;
use crate::{PaymentId, ProjectId, Timestamp};

/// The route of a create, as logged.
pub const CREATE_PATH: &str = "/api/v1/payments";
/// The prefix of a payment read's path (`/api/v1/payments/{id}`).
pub const PAYMENT_PATH_PREFIX: &str = "/api/v1/payments/";
/// The shortest interval between two reads of one payment that the spec allows (it asks for
/// polling every 5 to 10 s): reads closer than this count as polling too fast.
pub const MIN_POLL_INTERVAL: Duration = Duration::from_secs(5);
/// The longest path kept (bytes); a longer one is cut at a character boundary.
pub const MAX_PATH: usize = 256;
/// The longest signature base kept (bytes; headers may reach 16 KiB): a longer one is cut at a
/// character boundary and ends in `…`. Its covered components are read before the cut.
pub const MAX_BASE: usize = 4096;

/// One logged merchant request.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RequestLogEntry {
    /// The store's id (the order of writes); `0` for an entry not stored yet.
    pub id: u64,
    /// The project whose token made the request.
    pub project_id: ProjectId,
    /// When the request arrived.
    pub at: Timestamp,
    /// The method (`GET`, `POST`, ...).
    pub method: String,
    /// The path as sent, without the query ([`MAX_PATH`] bytes at most).
    pub path: String,
    /// The answer's status.
    pub status: u16,
    /// The answer's error code (`signature_invalid`, ...), for an error.
    pub error_code: Option<String>,
    /// The request id (`X-Request-ID`, echoed or made).
    pub request_id: String,
    /// How long the answer took, microseconds.
    pub latency_us: u64,
    /// The client's address as the allow-list sees it (`-` when unknown).
    pub source: String,
    /// A create's `merchant_payment_id`, when the create got that far.
    pub merchant_payment_id: Option<String>,
    /// The payment a read (`GET /api/v1/payments/{id}`) asked for.
    pub payment_id: Option<PaymentId>,
    /// The signature's `created` minus the server's time at arrival, milliseconds (positive:
    /// the client's clock is ahead).
    pub clock_skew_ms: Option<i64>,
    /// For a refused signature, what the server verified.
    pub diagnosis: Option<SignatureDiagnosis>,
}

impl RequestLogEntry {
    /// Whether the request is a create (`POST /api/v1/payments`, a prefix before it allowed).
    pub fn is_create(&self) -> bool {
        self.method == "POST" && self.path.ends_with(CREATE_PATH)
    }

    /// The status class: `4` for `4xx`.
    pub fn class(&self) -> u16 {
        self.status / 100
    }
}

/// Cuts `path` to [`MAX_PATH`] bytes at a character boundary.
pub fn bounded_path(path: &str) -> String {
    cut(path, MAX_PATH).to_string()
}

/// `s` up to `max` bytes, cut at a character boundary.
fn cut(s: &str, max: usize) -> &str {
    if s.len() <= max {
        return s;
    }
    let mut end = max;
    while !s.is_char_boundary(end) {
        end -= 1;
    }
    &s[..end]
}

/// The header fields whose values a logged signature base keeps ([`logged_base`]): those the
/// service requires a signature to cover, and the body's type. None is a credential, and the
/// entry holds `x-request-id` and the nonce (in `@signature-params`) anyway.
pub const LOGGED_FIELDS: [&str; 4] = [
    "content-digest",
    "content-type",
    "x-request-id",
    "x-request-nonce",
];

/// The derived components whose values a logged signature base keeps whole ([`logged_base`]);
/// `@query`, `@target-uri` and `@request-target` are kept without their query (the log keeps
/// no query anywhere: filter values may be personal data).
pub const LOGGED_DERIVED: [&str; 4] = ["@method", "@path", "@authority", "@scheme"];

/// The derived components that carry the query, kept up to their `?`.
const QUERY_DERIVED: [&str; 3] = ["@query", "@target-uri", "@request-target"];

/// What stands for a value the log does not keep.
const REDACTED: &str = crate::secret::REDACTED;

/// The signature base as the request log keeps it: every line stays, so the merchant sees
/// each covered component and its place, but only the values a signature failure's diagnosis
/// needs are kept: [`LOGGED_DERIVED`], [`LOGGED_FIELDS`], the `@signature-params` line, and
/// `@query`, `@target-uri`, `@request-target` up to their query (`?[redacted]`). Every other
/// value (a `cookie`, an API key header, `authorization`) reads `[redacted]`: the log is kept
/// for days and read by every user of the project and by support. Applying it twice changes
/// nothing.
pub fn logged_base(base: &str) -> String {
    base.split('\n')
        .map(logged_line)
        .collect::<Vec<_>>()
        .join("\n")
}

/// One line of [`logged_base`]. A line that is not `"name": value` (the end of a base cut at
/// [`MAX_BASE`]) holds no value and stays.
fn logged_line(line: &str) -> String {
    let Some((name, value)) = line
        .strip_prefix('"')
        .and_then(|l| l.split_once('"'))
        .and_then(|(name, rest)| Some((name, rest.strip_prefix(": ")?)))
    else {
        return line.to_owned();
    };
    if name == "@signature-params"
        || LOGGED_DERIVED.contains(&name)
        || LOGGED_FIELDS.contains(&name)
    {
        line.to_owned()
    } else if QUERY_DERIVED.contains(&name) {
        match value.split_once('?') {
            Some((before, query)) if !query.is_empty() => {
                format!("\"{name}\": {before}?{REDACTED}")
            }
            _ => line.to_owned(),
        }
    } else {
        format!("\"{name}\": {REDACTED}")
    }
}

/// What a refused signature's answer can tell the merchant: the reason, where to look next,
/// the covered components in signed order and the signature base the server built (each line
/// `"component": value`), as [`logged_base`] keeps it. A merchant diffs the base with what the
/// client signed: the first line that differs is the component that differed.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct SignatureDiagnosis {
    /// Why the signature was refused (`signature does not verify`, `covered header
    /// "content-digest" is not in the request`, ...).
    pub reason: String,
    /// Where to look next, when the server can say.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub hint: Option<String>,
    /// The covered components, in signed order (empty when no base was built).
    #[serde(default)]
    pub covered: Vec<String>,
    /// The signature base the server verified against, when it got that far.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub signature_base: Option<String>,
}

/// What the server says when the base it verified equals the one the client signed.
const KEY_HINT: &str = "the signature base is what the server verified (values shown as \
     [redacted] are not kept; compare those with your client's own record): if it equals the \
     base your client signed, the private key is not the one registered under this keyid; else \
     the first line that differs is the component that differed";

impl SignatureDiagnosis {
    /// The diagnosis of a refused signature.
    pub fn of_signature(e: &SignatureError) -> SignatureDiagnosis {
        let base = e.signature_base.as_deref().map(logged_base);
        let covered = base.as_deref().map(covered_of).unwrap_or_default();
        let hint = (e.failure == crate::auth::SignatureFailure::VerificationFailed
            && base.is_some())
        .then(|| KEY_HINT.to_string());
        let base = base.map(|b| {
            if b.len() > MAX_BASE {
                format!("{}…", cut(&b, MAX_BASE))
            } else {
                b
            }
        });
        SignatureDiagnosis {
            reason: e.failure.to_string(),
            hint,
            covered,
            signature_base: base,
        }
    }

    /// The stored form (JSON).
    pub fn to_json(&self) -> String {
        serde_json::to_string(self).expect("a diagnosis is plain strings")
    }

    /// Reads the stored form; `None` when it is not one. The base is read through
    /// [`logged_base`], so an entry written before it kept fewer values shows no more.
    pub fn from_json(text: &str) -> Option<SignatureDiagnosis> {
        let mut d: SignatureDiagnosis = serde_json::from_str(text).ok()?;
        d.signature_base = d.signature_base.as_deref().map(logged_base);
        Some(d)
    }
}

/// The component names of a signature base, in order (each line but `@signature-params`).
fn covered_of(base: &str) -> Vec<String> {
    base.lines()
        .filter_map(|line| line.strip_prefix('"')?.split_once("\":").map(|(n, _)| n))
        .filter(|name| *name != "@signature-params")
        .map(str::to_string)
        .collect()
}

/// Which statuses a page of the log shows.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum StatusFilter {
    /// A class: `2` for `2xx`, `4` for `4xx`, `5` for `5xx`.
    Class(u16),
    /// One status.
    Exactly(u16),
}

/// A `status` filter that is neither a status class nor a status.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("status: {0:?} is neither a status class (2xx, 4xx, 5xx) nor a status (100-599)")]
pub struct StatusFilterError(String);

impl StatusFilter {
    /// Reads `2xx`/`4xx`/`5xx` (any class 1-5) or a status `100`-`599`.
    pub fn parse(text: &str) -> Result<StatusFilter, StatusFilterError> {
        let t = text.trim().to_ascii_lowercase();
        if let Some(c) = t.strip_suffix("xx") {
            if let Ok(c @ 1..=5) = c.parse::<u16>() {
                return Ok(StatusFilter::Class(c));
            }
        } else if let Ok(s @ 100..=599) = t.parse::<u16>() {
            return Ok(StatusFilter::Exactly(s));
        }
        Err(StatusFilterError(text.to_string()))
    }

    /// Whether `status` passes.
    pub fn admits(self, status: u16) -> bool {
        match self {
            StatusFilter::Class(c) => status / 100 == c,
            StatusFilter::Exactly(s) => status == s,
        }
    }

    /// The statuses `[low, high]` it admits.
    pub fn range(self) -> (u16, u16) {
        match self {
            StatusFilter::Class(c) => (c * 100, c * 100 + 99),
            StatusFilter::Exactly(s) => (s, s),
        }
    }
}

/// A page of a project's logged requests, newest first by `(at, id)`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RequestLogQuery {
    /// The project.
    pub project: ProjectId,
    /// Only these statuses.
    pub status: Option<StatusFilter>,
    /// Only this error code.
    pub error_code: Option<String>,
    /// Only requests at or after this time (the retention window).
    pub since: Option<Timestamp>,
    /// Only requests before this `(at, id)` (the next page).
    pub before: Option<(Timestamp, u64)>,
    /// At most this many.
    pub limit: usize,
}

impl RequestLogQuery {
    /// The newest `limit` requests of `project`, no filter.
    pub fn new(project: ProjectId, limit: usize) -> RequestLogQuery {
        RequestLogQuery {
            project,
            status: None,
            error_code: None,
            since: None,
            before: None,
            limit,
        }
    }

    /// Whether `entry` passes the filters and comes after the cursor.
    pub fn matches(&self, entry: &RequestLogEntry) -> bool {
        entry.project_id == self.project
            && self.status.is_none_or(|s| s.admits(entry.status))
            && self
                .error_code
                .as_deref()
                .is_none_or(|c| entry.error_code.as_deref() == Some(c))
            && self.since.is_none_or(|t| entry.at >= t)
            && self.before.is_none_or(|c| (entry.at, entry.id) < c)
    }
}

/// How much of the log a store keeps.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RequestLogPolicy {
    /// At most this many requests per project, the newest.
    pub keep: usize,
    /// Nothing older than this.
    pub max_age: Duration,
}

impl Default for RequestLogPolicy {
    /// 1,000 requests per project, 7 days.
    fn default() -> Self {
        RequestLogPolicy {
            keep: 1_000,
            max_age: Duration::from_secs(7 * 86_400),
        }
    }
}

impl RequestLogPolicy {
    /// The oldest time kept at `now`.
    pub fn since(&self, now: Timestamp) -> Timestamp {
        now.saturating_sub(self.max_age)
    }
}

/// One error code's share of the answers.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CodeShare {
    /// The error code.
    pub code: String,
    /// How many answers had it.
    pub count: u64,
    /// Its share of all requests in the window, per mille.
    pub permille: u64,
}

/// The integration health of a project over its logged requests ([`IntegrationHealth::of`]).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct IntegrationHealth {
    /// The requests read.
    pub requests: u64,
    /// Of them, answered `4xx`.
    pub client_errors: u64,
    /// The `4xx` answers by error code, most frequent first (ties by code).
    pub client_errors_by_code: Vec<CodeShare>,
    /// Creates that repeated an earlier create's `merchant_payment_id` (a retry: the second
    /// and later of each id).
    pub create_retries: u64,
    /// The `merchant_payment_id`s created more than once.
    pub retried_ids: u64,
    /// Payments read twice within less than [`MIN_POLL_INTERVAL`].
    pub fast_polled_payments: u64,
    /// The shortest interval seen between two reads of one payment, when one was read twice.
    pub shortest_poll_interval: Option<Duration>,
    /// The signed requests whose `created` was read.
    pub skew_samples: u64,
    /// The largest clock skew seen (by size, with its sign), milliseconds.
    pub max_skew_ms: Option<i64>,
    /// The median clock skew, milliseconds.
    pub median_skew_ms: Option<i64>,
}

impl IntegrationHealth {
    /// The summary of `entries` (one project's requests, any order).
    pub fn of(entries: &[RequestLogEntry]) -> IntegrationHealth {
        let requests = entries.len() as u64;
        let mut by_code: BTreeMap<&str, u64> = BTreeMap::new();
        let mut client_errors = 0;
        let mut creates: HashMap<&str, u64> = HashMap::new();
        let mut reads: HashMap<PaymentId, Vec<Timestamp>> = HashMap::new();
        let mut skews = Vec::new();
        for e in entries {
            if e.class() == 4 {
                client_errors += 1;
                *by_code
                    .entry(e.error_code.as_deref().unwrap_or("-"))
                    .or_default() += 1;
            }
            if e.is_create() {
                if let Some(m) = e.merchant_payment_id.as_deref() {
                    *creates.entry(m).or_default() += 1;
                }
            }
            if e.method == "GET" {
                if let Some(p) = e.payment_id {
                    reads.entry(p).or_default().push(e.at);
                }
            }
            skews.extend(e.clock_skew_ms);
        }
        let mut client_errors_by_code: Vec<CodeShare> = by_code
            .into_iter()
            .map(|(code, count)| CodeShare {
                code: code.to_string(),
                count,
                permille: (count * 1000 + requests / 2) / requests.max(1),
            })
            .collect();
        client_errors_by_code.sort_by(|a, b| b.count.cmp(&a.count).then(a.code.cmp(&b.code)));
        let create_retries = creates.values().map(|n| n - 1).sum();
        let retried_ids = creates.values().filter(|n| **n > 1).count() as u64;
        let mut fast_polled_payments = 0;
        let mut shortest_poll_interval: Option<Duration> = None;
        for times in reads.values_mut() {
            times.sort();
            let shortest = times.windows(2).map(|w| w[1].duration_since(w[0])).min();
            if let Some(d) = shortest {
                if d < MIN_POLL_INTERVAL {
                    fast_polled_payments += 1;
                }
                shortest_poll_interval = Some(shortest_poll_interval.map_or(d, |s| s.min(d)));
            }
        }
        skews.sort();
        let median_skew_ms = (!skews.is_empty()).then(|| skews[(skews.len() - 1) / 2]);
        let max_skew_ms = skews.iter().copied().max_by_key(|s| s.unsigned_abs());
        IntegrationHealth {
            requests,
            client_errors,
            client_errors_by_code,
            create_retries,
            retried_ids,
            fast_polled_payments,
            shortest_poll_interval,
            skew_samples: skews.len() as u64,
            max_skew_ms,
            median_skew_ms,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ApiError;

    fn project() -> ProjectId {
        "00000000-0000-4000-8000-000000000001".parse().unwrap()
    }

    fn payment(n: u8) -> PaymentId {
        format!("00000000-0000-4000-8000-0000000000{n:02}")
            .parse()
            .unwrap()
    }

    fn entry(
        at_ms: i64,
        method: &str,
        path: &str,
        status: u16,
        code: Option<&str>,
    ) -> RequestLogEntry {
        RequestLogEntry {
            id: 0,
            project_id: project(),
            at: Timestamp::from_unix_millis(at_ms),
            method: method.into(),
            path: path.into(),
            status,
            error_code: code.map(str::to_string),
            request_id: "r".into(),
            latency_us: 1,
            source: "-".into(),
            merchant_payment_id: None,
            payment_id: None,
            clock_skew_ms: None,
            diagnosis: None,
        }
    }

    fn create(at_ms: i64, mpid: &str) -> RequestLogEntry {
        RequestLogEntry {
            merchant_payment_id: Some(mpid.into()),
            ..entry(at_ms, "POST", "/api/v1/payments", 201, None)
        }
    }

    fn read(at_ms: i64, p: u8) -> RequestLogEntry {
        RequestLogEntry {
            payment_id: Some(payment(p)),
            ..entry(
                at_ms,
                "GET",
                &format!("/api/v1/payments/{}", payment(p)),
                200,
                None,
            )
        }
    }

    #[test]
    fn an_empty_log_is_healthy() {
        assert_eq!(IntegrationHealth::of(&[]), IntegrationHealth::default());
    }

    #[test]
    fn client_errors_are_shared_by_code_over_every_request() {
        let mut log = vec![entry(1, "GET", "/api/v1/project", 200, None); 5];
        log.extend(vec![
            entry(
                2,
                "POST",
                "/api/v1/payments",
                401,
                Some("signature_invalid")
            );
            3
        ]);
        log.push(entry(
            3,
            "POST",
            "/api/v1/payments",
            409,
            Some("request_replayed"),
        ));
        log.push(entry(
            4,
            "GET",
            "/api/v1/payments",
            503,
            Some("service_unavailable"),
        ));
        let h = IntegrationHealth::of(&log);
        assert_eq!((h.requests, h.client_errors), (10, 4));
        let shares: Vec<_> = h
            .client_errors_by_code
            .iter()
            .map(|c| (c.code.as_str(), c.count, c.permille))
            .collect();
        // 5xx is not a client error; most frequent first.
        assert_eq!(
            shares,
            [("signature_invalid", 3, 300), ("request_replayed", 1, 100)]
        );
    }

    #[test]
    fn a_create_that_reuses_a_merchant_payment_id_is_a_retry() {
        let log = [
            create(1, "a"),
            create(2, "a"),
            create(3, "a"),
            create(4, "b"),
            create(5, "c"),
            create(6, "c"),
            // A read or a list with the id is no create.
            RequestLogEntry {
                merchant_payment_id: Some("b".into()),
                ..entry(7, "GET", "/api/v1/payments", 200, None)
            },
        ];
        let h = IntegrationHealth::of(&log);
        assert_eq!((h.create_retries, h.retried_ids), (3, 2));
    }

    #[test]
    fn reads_closer_than_five_seconds_are_polling_too_fast() {
        let table: &[(&[i64], u64, Option<u64>)] = &[
            // (read times of one payment in ms, fast-polled payments, shortest interval ms)
            (&[0], 0, None),
            (&[0, 5_000, 10_000], 0, Some(5_000)),
            (&[0, 4_999], 1, Some(4_999)),
            (&[10_000, 0, 6_000, 7_000], 1, Some(1_000)),
        ];
        for (times, fast, shortest) in table {
            let log: Vec<_> = times.iter().map(|t| read(*t, 1)).collect();
            let h = IntegrationHealth::of(&log);
            assert_eq!(h.fast_polled_payments, *fast, "{times:?}");
            assert_eq!(
                h.shortest_poll_interval,
                shortest.map(Duration::from_millis),
                "{times:?}"
            );
        }
        // Each payment on its own: two payments read 1 s apart are not one polled fast.
        let h = IntegrationHealth::of(&[read(0, 1), read(1_000, 2), read(9_000, 1)]);
        assert_eq!(h.fast_polled_payments, 0);
    }

    #[test]
    fn the_skew_is_the_median_and_the_largest_by_size() {
        let skewed = |ms: i64| RequestLogEntry {
            clock_skew_ms: Some(ms),
            ..entry(1, "GET", "/api/v1/project", 200, None)
        };
        let h = IntegrationHealth::of(&[skewed(100), skewed(-90_000), skewed(2_000), skewed(50)]);
        assert_eq!(h.skew_samples, 4);
        assert_eq!(h.max_skew_ms, Some(-90_000));
        assert_eq!(h.median_skew_ms, Some(50));
    }

    #[test]
    fn status_filters_read_classes_and_statuses() {
        assert_eq!(StatusFilter::parse("4xx"), Ok(StatusFilter::Class(4)));
        assert_eq!(StatusFilter::parse(" 401 "), Ok(StatusFilter::Exactly(401)));
        for bad in ["", "6xx", "xx", "99", "600", "four"] {
            assert!(StatusFilter::parse(bad).is_err(), "{bad}");
        }
        assert!(StatusFilter::Class(4).admits(422));
        assert!(!StatusFilter::Class(4).admits(500));
        assert_eq!(StatusFilter::Class(2).range(), (200, 299));
    }

    #[test]
    fn a_diagnosis_names_the_covered_components_and_redacts_the_token() {
        let base = "\"@method\": POST\n\"@path\": /api/v1/payments\n\"authorization\": Bearer sk\n\
                    \"@signature-params\": (\"@method\" \"@path\" \"authorization\");created=1";
        let e = SignatureError {
            failure: crate::auth::SignatureFailure::VerificationFailed,
            signature_base: Some(base.into()),
        };
        let d = SignatureDiagnosis::of_signature(&e);
        assert_eq!(d.covered, ["@method", "@path", "authorization"]);
        assert_eq!(d.reason, "signature does not verify");
        assert!(d.hint.is_some());
        let kept = d.signature_base.as_deref().unwrap();
        assert!(!kept.contains("Bearer sk"), "{kept}");
        assert_eq!(SignatureDiagnosis::from_json(&d.to_json()), Some(d));
        let api = ApiError::new(crate::ErrorCode::NotFound, "x");
        assert_eq!(api.signature_diagnosis(), None);
    }

    /// Every covered value the diagnosis does not need reads `[redacted]`, its line kept; the
    /// query is cut from every component that holds it; a stored entry of before reads so too.
    #[test]
    fn the_log_keeps_only_the_values_a_diagnosis_needs() {
        let base = "\"@method\": POST\n\"@authority\": api.example\n\"@scheme\": https\n\
                    \"@path\": /api/v1/payments\n\"@query\": ?email=a%40b.example\n\
                    \"@target-uri\": https://api.example/api/v1/payments?email=a%40b.example\n\
                    \"@request-target\": /api/v1/payments?\n\
                    \"content-type\": application/json\n\"content-digest\": sha-256=:AAA=:\n\
                    \"x-request-id\": rid-1\n\"x-request-nonce\": nonce-0123456789abcdef\n\
                    \"cookie\": session=s3cret\n\"x-api-key\": k3y\n\"authorization\": Bearer sk\n\
                    \"proxy-authorization\": Basic cHc=\n\"x-empty\": \n\
                    \"@signature-params\": (\"@method\" \"cookie\");created=1;keyid=\"k\"";
        let e = SignatureError {
            failure: crate::auth::SignatureFailure::VerificationFailed,
            signature_base: Some(base.into()),
        };
        let d = SignatureDiagnosis::of_signature(&e);
        let kept = d.signature_base.as_deref().expect("a base");
        let expected = "\"@method\": POST\n\"@authority\": api.example\n\"@scheme\": https\n\
                        \"@path\": /api/v1/payments\n\"@query\": ?[redacted]\n\
                        \"@target-uri\": https://api.example/api/v1/payments?[redacted]\n\
                        \"@request-target\": /api/v1/payments?\n\
                        \"content-type\": application/json\n\"content-digest\": sha-256=:AAA=:\n\
                        \"x-request-id\": rid-1\n\"x-request-nonce\": nonce-0123456789abcdef\n\
                        \"cookie\": [redacted]\n\"x-api-key\": [redacted]\n\
                        \"authorization\": [redacted]\n\"proxy-authorization\": [redacted]\n\
                        \"x-empty\": [redacted]\n\
                        \"@signature-params\": (\"@method\" \"cookie\");created=1;keyid=\"k\"";
        assert_eq!(kept, expected);
        assert_eq!(d.covered.len(), 16, "{:?}", d.covered);
        assert_eq!(logged_base(kept), kept, "twice changes nothing");
        // An entry stored before the rule: read back with no more than the rule keeps.
        let old = SignatureDiagnosis {
            signature_base: Some(base.into()),
            ..d.clone()
        };
        assert_eq!(SignatureDiagnosis::from_json(&old.to_json()), Some(d));
        // The end of a cut base holds no value and stays.
        assert_eq!(
            logged_base("\"@method\": GET\n\"cook…"),
            "\"@method\": GET\n\"cook…"
        );
    }

    #[test]
    fn a_long_signature_base_is_cut_after_its_components_are_read() {
        let long = "я".repeat(5_000);
        let base = format!(
            "\"@method\": POST\n\"@path\": /{long}\n\"@signature-params\": (\"@method\" \"@path\")"
        );
        let e = SignatureError {
            failure: crate::auth::SignatureFailure::VerificationFailed,
            signature_base: Some(base),
        };
        let d = SignatureDiagnosis::of_signature(&e);
        assert_eq!(d.covered, ["@method", "@path"]);
        let kept = d.signature_base.expect("a base");
        assert!(kept.len() <= MAX_BASE + '…'.len_utf8(), "{}", kept.len());
        assert!(kept.ends_with('…') && kept.starts_with("\"@method\": POST"));
    }

    #[test]
    fn a_long_path_is_cut_at_a_character() {
        let long = "é".repeat(200);
        let cut = bounded_path(&long);
        assert!(cut.len() <= MAX_PATH && long.starts_with(&cut));
    }
}
