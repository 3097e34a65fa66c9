//! `Signature-Input` and `Signature` (RFC 9421) through [`PreparedSignature::prepare`], under
//! the RFC-vector policy and the strict API policy.
//!
//! Input: a request in the text form of `payments-core/tests/vectors/*.http`: a request line
//! `METHOD TARGET ...`, header lines `Name: value` (values are raw bytes), a blank line, the
//! body. `@authority` is the `Host` header, the scheme `https`; `now` is the `created` of the
//! chosen `Signature-Input` member, so the time window passes and the parsers behind it run.
//!
//! Properties, for each policy:
//! - `prepare` is deterministic;
//! - a prepared signature base has exactly one line per covered component (no value can carry
//!   a newline or a byte outside visible ASCII), each starting with its identifier, and ends
//!   with `@signature-params`, whose value is canonical (re-parses and re-serialises to itself);
//! - re-signing that base with the RFC test key and sending the canonical `Signature-Input`
//!   (`label=<@signature-params>`) prepares to the same base and verifies;
//! - then changing any covered part of the request (method, path, query, authority, each covered
//!   header: a changed, an added or a removed line) changes the base or fails, and the signature
//!   no longer verifies; changing an uncovered part leaves the base as it was; changing the body
//!   fails whenever the digest is checked (strict policy, or `content-digest` covered);
//! - under the strict policy, a prepared signature covers the required components (and `@query`
//!   with a query string), has `created` and `expires` within the window, a `Content-Digest`
//!   that verifies the body and a well-formed nonce.

use std::sync::OnceLock;

use base64::Engine as _;
use ed25519_dalek::{Signer as _, SigningKey, VerifyingKey};
use payments_core::auth::keys::parse_signing_key_pem;
use payments_core::auth::signature::{
    HttpRequestParts, PreparedSignature, SignatureError, SignaturePolicy,
};
use payments_core::auth::{verify_content_digest, Nonce};
use payments_core::Timestamp;
use sfv::FieldType as _;

use crate::at_secs;

/// The RFC 9421 appendix B.1.4 test key (PKCS#8 PEM).
pub(crate) const TEST_KEY_PEM: &str =
    include_str!("../../payments-core/tests/vectors/rfc9421-test-key-ed25519.pem");

/// `created` of the RFC 9421 examples: `now` when the input has none.
pub(crate) const RFC_CREATED: i64 = 1_618_884_473;

/// The components the strict policy requires.
const STRICT_REQUIRED: [&str; 5] = [
    "@method",
    "@path",
    "content-digest",
    "x-request-id",
    "x-request-nonce",
];

fn test_key() -> &'static SigningKey {
    static KEY: OnceLock<SigningKey> = OnceLock::new();
    KEY.get_or_init(|| parse_signing_key_pem(TEST_KEY_PEM).expect("the RFC test key parses"))
}

/// A request in the text form of the vector files.
#[derive(Debug, Clone)]
pub(crate) struct Request {
    pub(crate) method: String,
    pub(crate) target: String,
    pub(crate) authority: String,
    pub(crate) headers: Vec<(String, Vec<u8>)>,
    pub(crate) body: Vec<u8>,
}

impl Request {
    /// Reads the text form; `None` if the request line or a header name is not UTF-8. Header
    /// lines without `:` are skipped.
    pub(crate) fn parse(data: &[u8]) -> Option<Request> {
        let (head, body) = match data.windows(2).position(|w| w == b"\n\n") {
            Some(at) => (&data[..at], &data[at + 2..]),
            None => (data, &[][..]),
        };
        let mut lines = head.split(|&b| b == b'\n');
        let request_line = std::str::from_utf8(lines.next()?).ok()?;
        let mut words = request_line.split(' ');
        let method = words.next()?.to_owned();
        let target = words.next().unwrap_or("").to_owned();
        let mut headers = Vec::new();
        for line in lines {
            let Some(colon) = line.iter().position(|&b| b == b':') else {
                continue;
            };
            let name = std::str::from_utf8(&line[..colon]).ok()?;
            headers.push((name.to_owned(), line[colon + 1..].to_vec()));
        }
        let authority = headers
            .iter()
            .find(|(n, _)| n.eq_ignore_ascii_case("host"))
            .and_then(|(_, v)| std::str::from_utf8(v).ok())
            .map_or("example.com", str::trim)
            .to_owned();
        Some(Request {
            method,
            target,
            authority,
            headers,
            body: body.to_vec(),
        })
    }

    /// The text form (what [`Request::parse`] reads).
    pub(crate) fn to_bytes(&self) -> Vec<u8> {
        let mut out = format!("{} {} HTTP/1.1\n", self.method, self.target).into_bytes();
        for (name, value) in &self.headers {
            out.extend_from_slice(name.as_bytes());
            out.push(b':');
            out.extend_from_slice(value);
            out.push(b'\n');
        }
        out.push(b'\n');
        out.extend_from_slice(&self.body);
        out
    }

    pub(crate) fn with_parts<T>(&self, f: impl FnOnce(&HttpRequestParts<'_>) -> T) -> T {
        let headers: Vec<(&str, &[u8])> = self
            .headers
            .iter()
            .map(|(n, v)| (n.as_str(), v.as_slice()))
            .collect();
        f(&HttpRequestParts {
            method: &self.method,
            scheme: "https",
            authority: &self.authority,
            path_and_query: &self.target,
            headers: &headers,
            body: &self.body,
        })
    }

    fn prepare(
        &self,
        policy: &SignaturePolicy,
        now: Timestamp,
    ) -> Result<PreparedSignature, SignatureError> {
        self.with_parts(|parts| PreparedSignature::prepare(parts, policy, now))
    }

    fn field(&self, name: &str) -> Option<String> {
        self.with_parts(|parts| parts.field_value(name))
            .ok()
            .flatten()
    }

    fn without(&self, name: &str) -> Request {
        let mut r = self.clone();
        r.headers.retain(|(n, _)| !n.eq_ignore_ascii_case(name));
        r
    }

    fn has_query(&self) -> bool {
        self.with_parts(|parts| parts.has_query())
    }
}

/// `created` (else `expires`) of the member `prepare` would choose, if it parses.
fn now_for(request: &Request) -> Timestamp {
    let secs = request.field("signature-input").and_then(|input| {
        let dict: sfv::Dictionary = sfv::Parser::new(&input).parse().ok()?;
        let entry = match dict.get("sig1") {
            Some(entry) => entry,
            None => dict.first()?.1,
        };
        let sfv::ListEntry::InnerList(list) = entry else {
            return None;
        };
        ["created", "expires"]
            .iter()
            .find_map(|k| list.params.get(*k).and_then(sfv::BareItem::as_integer))
            .map(i64::from)
    });
    at_secs(secs.unwrap_or(RFC_CREATED))
}

/// Runs the target on the fuzzer's bytes `data`; panics when a property of this module's
/// parser does not hold (see the module's documentation for the input format and the
/// properties).
pub fn check(data: &[u8]) {
    let Some(request) = Request::parse(data) else {
        return;
    };
    let now = now_for(&request);
    check_under(&request, &SignaturePolicy::rfc_vectors(), now, false);
    check_under(&request, &SignaturePolicy::strict(), now, true);
}

fn summary(result: &Result<PreparedSignature, SignatureError>) -> String {
    match result {
        Ok(p) => format!("{p:?} {}", p.signature_base()),
        Err(e) => format!("{e:?}"),
    }
}

fn check_under(request: &Request, policy: &SignaturePolicy, now: Timestamp, strict: bool) {
    let first = request.prepare(policy, now);
    assert_eq!(
        summary(&first),
        summary(&request.prepare(policy, now)),
        "prepare is deterministic"
    );
    let Ok(prepared) = first else {
        return;
    };
    let base = prepared.signature_base().to_owned();
    let (covered, params) = base_shape(&base);
    if strict {
        strict_invariants(request, &prepared, &covered, now);
    }
    // A signature covering a `Signature` or `Signature-Input` header cannot be re-signed by
    // replacing those headers; the round trip does not apply.
    if covered
        .iter()
        .any(|c| c == "signature" || c == "signature-input")
    {
        return;
    }
    let resigned = resign(request, &prepared, &base, &params);
    let key = test_key().verifying_key();
    check_round_trip(&resigned, policy, now, &prepared, &covered, &key);

    let checks_digest = strict || covered.iter().any(|c| c == "content-digest");
    let signed = Signed {
        policy,
        now,
        base: &base,
        covered: &covered,
        key: &key,
    };
    check_mutations(&resigned, &signed, checks_digest);
}

/// The request without its signature headers, signed again over `base` with the RFC test key
/// and the canonical `Signature-Input` (`label=<params>`).
fn resign(request: &Request, prepared: &PreparedSignature, base: &str, params: &str) -> Request {
    let label = prepared.label();
    let signature = test_key().sign(base.as_bytes());
    let mut resigned = request.without("signature").without("signature-input");
    resigned.headers.push((
        "Signature-Input".to_owned(),
        format!("{label}={params}").into_bytes(),
    ));
    resigned.headers.push((
        "Signature".to_owned(),
        format!(
            "{label}=:{}:",
            base64::engine::general_purpose::STANDARD.encode(signature.to_bytes())
        )
        .into_bytes(),
    ));
    resigned
}

/// The re-signed request prepares to the same base and parameters, and verifies.
fn check_round_trip(
    resigned: &Request,
    policy: &SignaturePolicy,
    now: Timestamp,
    prepared: &PreparedSignature,
    covered: &[String],
    key: &VerifyingKey,
) {
    let base = prepared.signature_base();
    let label = prepared.label().to_owned();
    let again = match resigned.prepare(policy, now) {
        Ok(p) => p,
        Err(e) => panic!("the canonical re-signed request does not prepare: {e:?}"),
    };
    assert_eq!(
        again.signature_base(),
        base,
        "the canonical Signature-Input gives the same base"
    );
    assert_eq!(
        (
            again.label(),
            again.keyid(),
            again.created(),
            again.expires()
        ),
        (
            prepared.label(),
            prepared.keyid(),
            prepared.created(),
            prepared.expires()
        )
    );
    assert_eq!(again.nonce(), prepared.nonce());
    let verified = match again.verify(key) {
        Ok(v) => v,
        Err(e) => panic!("the re-signed base does not verify: {e:?}"),
    };
    assert_eq!(verified.covered, covered);
    assert_eq!(verified.label, label);
}

/// What a re-signed request was prepared and signed with.
struct Signed<'a> {
    policy: &'a SignaturePolicy,
    now: Timestamp,
    base: &'a str,
    covered: &'a [String],
    key: &'a VerifyingKey,
}

/// A covered change changes the base or fails and no longer verifies; an uncovered change
/// leaves the base as it was; a changed body fails when the digest is checked.
fn check_mutations(resigned: &Request, signed: &Signed<'_>, checks_digest: bool) {
    let Signed {
        policy,
        now,
        base,
        covered,
        key,
    } = *signed;
    for (mutated, affected, what) in mutations(resigned, covered) {
        let touches = affected.iter().any(|a| covered.contains(a));
        match mutated.prepare(policy, now) {
            Ok(p) if touches => {
                assert_ne!(
                    p.signature_base(),
                    base,
                    "{what}: a covered change leaves the base unchanged"
                );
                assert!(
                    p.verify(key).is_err(),
                    "{what}: the signature verifies for another request"
                );
            }
            Ok(p) => {
                assert_eq!(
                    p.signature_base(),
                    base,
                    "{what}: an uncovered change changes the base"
                );
                assert!(
                    !(what == "body" && checks_digest),
                    "a digest that verifies one body verifies another"
                );
            }
            Err(_) => {}
        }
    }
}

/// Checks the base's shape; returns the covered component names and the serialised
/// `@signature-params` value.
fn base_shape(base: &str) -> (Vec<String>, String) {
    assert!(
        base.bytes()
            .all(|b| b == b'\n' || b == b'\t' || (0x20..0x7f).contains(&b)),
        "the base holds only visible ASCII, spaces, tabs and line feeds: {base:?}"
    );
    let lines: Vec<&str> = base.split('\n').collect();
    let params = lines
        .last()
        .and_then(|l| l.strip_prefix("\"@signature-params\": "))
        .unwrap_or_else(|| panic!("the base ends with @signature-params: {base:?}"));
    let list: sfv::List = match sfv::Parser::new(params).parse() {
        Ok(list) => list,
        Err(e) => panic!("@signature-params does not re-parse ({e}): {params:?}"),
    };
    assert_eq!(
        list.serialize().as_deref(),
        Some(params),
        "@signature-params is canonical"
    );
    let [sfv::ListEntry::InnerList(inner)] = list.as_slice() else {
        panic!("@signature-params is one inner list: {params:?}");
    };
    let covered: Vec<String> = inner
        .items
        .iter()
        .map(|item| match item.bare_item.as_string() {
            Some(s) => s.as_str().to_owned(),
            None => panic!("a covered component is not a string: {params:?}"),
        })
        .collect();
    assert_eq!(
        lines.len(),
        covered.len() + 1,
        "one base line per covered component: {base:?}"
    );
    for (i, (line, name)) in lines.iter().zip(&covered).enumerate() {
        assert!(
            line.starts_with(&format!("\"{name}\": ")),
            "line {i} is not {name}: {base:?}"
        );
        assert!(!covered[..i].contains(name), "{name} covered twice");
    }
    (covered, params.to_owned())
}

fn strict_invariants(
    request: &Request,
    prepared: &PreparedSignature,
    covered: &[String],
    now: Timestamp,
) {
    for required in STRICT_REQUIRED {
        assert!(
            covered.iter().any(|c| c == required),
            "strict: {required} not covered"
        );
    }
    if request.has_query() {
        assert!(
            covered.iter().any(|c| c == "@query"),
            "strict: query not covered"
        );
    }
    let (Some(created), Some(expires)) = (prepared.created(), prepared.expires()) else {
        panic!("strict: created and expires are required");
    };
    let now = now.unix_millis();
    let (created, expires) = (created.saturating_mul(1000), expires.saturating_mul(1000));
    assert!(
        created < expires && expires - created <= 300_000,
        "strict: validity"
    );
    assert!(
        created <= now.saturating_add(60_000),
        "strict: created in the future"
    );
    assert!(now <= expires.saturating_add(60_000), "strict: expired");
    assert!(now.saturating_sub(created) <= 300_000, "strict: too old");
    let digest = request
        .field("content-digest")
        .expect("strict: a Content-Digest header");
    assert_eq!(
        verify_content_digest(&digest, &request.body),
        Ok(()),
        "strict: the digest verifies the body"
    );
    let nonce = request
        .field("x-request-nonce")
        .map(|n| Nonce::parse(n.as_bytes()));
    assert_eq!(
        nonce,
        Some(Ok(prepared.nonce().expect("strict: a nonce").clone())),
        "strict: the nonce is X-Request-Nonce"
    );
}

/// Changed requests, each with the component names whose value it changes.
fn mutations(request: &Request, covered: &[String]) -> Vec<(Request, Vec<String>, String)> {
    let names = |n: &[&str]| n.iter().map(|s| (*s).to_owned()).collect::<Vec<_>>();
    let mut out = Vec::new();

    let mut r = request.clone();
    r.method.push('X');
    out.push((r, names(&["@method"]), "method".to_owned()));

    let mut r = request.clone();
    let path_end = r.target.find('?').unwrap_or(r.target.len());
    r.target.insert(path_end, 'x');
    out.push((
        r,
        names(&["@path", "@target-uri", "@request-target"]),
        "path".to_owned(),
    ));

    let mut r = request.clone();
    r.target
        .push_str(if r.target.contains('?') { "&x" } else { "?x" });
    out.push((
        r,
        names(&["@query", "@target-uri", "@request-target"]),
        "query".to_owned(),
    ));

    let mut r = request.clone();
    r.authority.insert(0, 'x');
    out.push((
        r,
        names(&["@authority", "@target-uri"]),
        "authority".to_owned(),
    ));

    let mut r = request.clone();
    r.body.push(b'x');
    out.push((r, Vec::new(), "body".to_owned()));

    let mut r = request.clone();
    r.headers.push(("X-Fuzz-Extra".to_owned(), b"1".to_vec()));
    out.push((r, names(&["x-fuzz-extra"]), "new header".to_owned()));

    for name in covered.iter().filter(|c| !c.starts_with('@')) {
        if let Some(last) = request
            .headers
            .iter()
            .rposition(|(n, _)| n.eq_ignore_ascii_case(name))
        {
            let mut r = request.clone();
            r.headers[last].1.push(b'x');
            out.push((r, vec![name.clone()], format!("{name} changed")));
        }
        let mut r = request.clone();
        r.headers.push((name.clone(), b"x".to_vec()));
        out.push((r, vec![name.clone()], format!("{name} line added")));
        out.push((
            request.without(name),
            vec![name.clone()],
            format!("{name} removed"),
        ));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The seeds reach the round trip and the mutations, not only the refusals.
    #[test]
    fn seeds_prepare() {
        const NAMED: [&str; 7] = [
            "rfc9421-b26",
            "rfc9421-b4",
            "extra-signature-member",
            "strict-post",
            "strict-get-query",
            "all-derived",
            "nonce-and-tag",
        ];
        let mut seen = std::collections::BTreeSet::new();
        for seed in crate::seeds::seeds() {
            if seed.target != "signature" {
                continue;
            }
            let request = Request::parse(&seed.data).expect("a seed parses");
            let now = now_for(&request);
            let rfc = request.prepare(&SignaturePolicy::rfc_vectors(), now);
            let strict = request.prepare(&SignaturePolicy::strict(), now);
            if NAMED.contains(&seed.name.as_str()) {
                seen.insert(seed.name.clone());
            }
            match seed.name.as_str() {
                "rfc9421-b26" | "rfc9421-b4" | "extra-signature-member" => {
                    assert!(rfc.is_ok(), "{}: {rfc:?}", seed.name);
                    let key = test_key().verifying_key();
                    assert!(rfc.expect("prepared").verify(&key).is_ok());
                }
                "strict-post" | "strict-get-query" | "all-derived" | "nonce-and-tag" => {
                    assert!(strict.is_ok(), "{}: {strict:?}", seed.name);
                }
                _ => assert!(rfc.is_err(), "{}", seed.name),
            }
        }
        // The positive branches above name their seeds: a renamed or dropped seed would
        // otherwise leave a branch silently unexercised.
        let missing: Vec<&str> = NAMED
            .iter()
            .copied()
            .filter(|n| !seen.contains(*n))
            .collect();
        assert!(missing.is_empty(), "signature seeds not found: {missing:?}");
    }
}
