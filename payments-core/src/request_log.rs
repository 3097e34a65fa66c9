//! The merchant API's request log: each project's recent requests as the merchant sees them in
//! the cabinet ("Requests").
//!
//! The HTTP adapter notes every merchant request the core attributed to a project (an
//! authenticated one, or a refusal once its token's hash matched a stored token:
//! [`Refused::project`](crate::service::Refused::project); a request whose token matches none
//! is nobody's) as a [`RequestLogEntry`], with the API's message of an error
//! ([`bounded_message`]), off the request's path; the
//! store keeps them per project under a [`RequestLogPolicy`] (at most
//! [`RequestLogPolicy::keep`] requests, and the rest of the oldest write where a store
//! deletes whole writes; none older than [`RequestLogPolicy::max_age`]).
//! Nothing secret is kept: no body, no token, no signature; the path without its query; for a
//! refused signature the [`SignatureDiagnosis`] (the reason, the covered components and the
//! signature base the server verified, with every value the diagnosis does not need shown as
//! `[redacted]`: [`logged_base`]).
//!
//! The cabinet reads the integration's health from the entries (`payments_cabinet::web::health`).

use std::time::Duration;

use serde::{Deserialize, Serialize};

use crate::auth::SignatureError;
use crate::{PaymentId, ProjectId, Timestamp};

/// The longest path kept (bytes); a longer one is cut at a character boundary.
pub const MAX_PATH: usize = 256;
/// The longest API message kept (bytes): a longer one is cut at a character boundary and
/// ends in `…`.
pub const MAX_MESSAGE: usize = 256;
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
    /// The `message` of the answer's error body, as the API wrote it ([`bounded_message`]),
    /// for an error.
    pub message: Option<String>,
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

/// Cuts `path` to [`MAX_PATH`] bytes at a character boundary.
pub fn bounded_path(path: &str) -> String {
    cut(path, MAX_PATH).to_string()
}

/// An error body's `message` as the log keeps it: up to [`MAX_MESSAGE`] bytes, cut at a
/// character boundary and ended with `…` when longer.
pub fn bounded_message(message: &str) -> String {
    if message.len() <= MAX_MESSAGE {
        return message.to_string();
    }
    format!("{}…", cut(message, MAX_MESSAGE))
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
    /// For `unknown keyid`, the keyid the signature named (its `@signature-params`): the
    /// cabinet tells whether it is a key of another project of the merchant
    /// ([`RequestLog::key_owners`](crate::service::RequestLog::key_owners)).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub keyid: Option<String>,
    /// The failure's stable name and values ([`SignatureFailure::code`]), for a page that
    /// words `reason` in its own language; absent in entries written before it was kept.
    ///
    /// [`SignatureFailure::code`]: crate::auth::SignatureFailure::code
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub code: Option<(String, Vec<String>)>,
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
        let keyid = (e.failure == crate::auth::SignatureFailure::UnknownKeyid)
            .then(|| e.signature_base.as_deref().and_then(keyid_of))
            .flatten();
        let (code, values) = e.failure.code();
        SignatureDiagnosis {
            reason: e.failure.to_string(),
            hint,
            covered,
            signature_base: base,
            keyid,
            code: Some((code.to_string(), values)),
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

/// The `keyid` parameter of a signature base's `@signature-params` line (a structured-field
/// string, its `\\` and `\"` escapes read), when it has one.
fn keyid_of(base: &str) -> Option<String> {
    let params = base
        .lines()
        .find_map(|line| line.strip_prefix("\"@signature-params\": "))?;
    let (_, rest) = params.split_once(";keyid=\"")?;
    let mut keyid = String::new();
    let mut chars = rest.chars();
    while let Some(c) = chars.next() {
        match c {
            '"' => return Some(keyid),
            '\\' => keyid.push(chars.next()?),
            c => keyid.push(c),
        }
    }
    None
}

/// Which statuses a page of the log shows.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum StatusFilter {
    /// A class: `2` for `2xx`, `4` for `4xx`, `5` for `5xx`.
    Class(u16),
    /// One status.
    Exactly(u16),
}

impl StatusFilter {
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

    /// Whether `entry` passes the filters and comes after the cursor (the page's size aside).
    pub fn admits(&self, entry: &RequestLogEntry) -> bool {
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ApiError;

    #[test]
    fn status_filters_admit_their_class_or_status() {
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
    fn a_long_message_is_cut_at_a_character_and_says_so() {
        assert_eq!(
            bounded_message("the token was revoked"),
            "the token was revoked"
        );
        let exact = "a".repeat(MAX_MESSAGE);
        assert_eq!(bounded_message(&exact), exact);
        let long = format!("a{}", "я".repeat(MAX_MESSAGE));
        let cut = bounded_message(&long);
        let kept = cut.strip_suffix('…').expect("a cut message ends in …");
        assert!(kept.len() <= MAX_MESSAGE && long.starts_with(kept), "{cut}");
        assert!(
            kept.len() > MAX_MESSAGE - 2,
            "cut at the last character that fits"
        );
    }

    /// An `unknown keyid` diagnosis names the keyid the signature gave (the cabinet looks it up
    /// among the merchant's other projects); another failure names none.
    #[test]
    fn an_unknown_keyid_diagnosis_names_the_keyid() {
        let base = "\"@method\": POST\n\
                    \"@signature-params\": (\"@method\");created=1;keyid=\"ed25519-k\\\"x\";alg=\"ed25519\"";
        let failed = |failure| SignatureError {
            failure,
            signature_base: Some(base.into()),
        };
        let d =
            SignatureDiagnosis::of_signature(&failed(crate::auth::SignatureFailure::UnknownKeyid));
        assert_eq!(d.keyid.as_deref(), Some("ed25519-k\"x"));
        assert_eq!(SignatureDiagnosis::from_json(&d.to_json()), Some(d));
        let d = SignatureDiagnosis::of_signature(&failed(
            crate::auth::SignatureFailure::VerificationFailed,
        ));
        assert_eq!(d.keyid, None);
        assert_eq!(
            keyid_of("\"@signature-params\": (\"@method\");created=1"),
            None
        );
        assert_eq!(keyid_of("\"@signature-params\": ();keyid=\"cut"), None);
    }

    #[test]
    fn a_long_path_is_cut_at_a_character() {
        let long = "é".repeat(200);
        let cut = bounded_path(&long);
        assert!(cut.len() <= MAX_PATH && long.starts_with(&cut));
    }
}
