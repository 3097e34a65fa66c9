//! Checking one signed request offline, with no server and no store: the checks
//! [`Gate::authenticate`](super::Gate::authenticate) makes of a signed request that need only
//! the request, the project's public key and, optionally, its token ([`check_request_offline`]),
//! and the raw HTTP/1.1 text such a request is captured in ([`RawRequest`]).
//!
//! What needs the server's records is not checked: whether the nonce was used before (`409
//! request_replayed`), whether the token is issued, unrevoked and has the endpoint's scope, the
//! project's IP allow-list and rate limit.

use ed25519_dalek::VerifyingKey;

use super::auth::{bearer_of, check_form_of};
use super::AuthError;
use crate::auth::{
    keyid, Environment, HttpRequestParts, PreparedSignature, SignaturePolicy, TokenHash,
    TokenRefusal, VerifiedSignature,
};
use crate::Timestamp;

/// What the server checks only with its records, which an offline check cannot.
pub const NOT_CHECKED_OFFLINE: [&str; 4] = [
    "nonce reuse (409 request_replayed): the server records each X-Request-Nonce",
    "the token's record: issued, not revoked or expired, its project active, its scopes",
    "the project's IP allow-list",
    "the project's rate limit",
];

/// One HTTP/1.1 request as its sender wrote it: the request line (`POST /api/v1/payments
/// HTTP/1.1`, origin form), header lines, a blank line and the body. Lines may end in CRLF or
/// LF. With a `Content-Length`, line breaks after that many bytes of body (an editor's final
/// newline) are ignored; a chunked body is refused (write it decoded, with its length).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RawRequest {
    method: String,
    target: String,
    headers: Vec<(String, Vec<u8>)>,
    body: Vec<u8>,
}

/// Why bytes are not one HTTP/1.1 request.
#[non_exhaustive]
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum RawRequestError {
    /// No blank line ends the header section.
    #[error(
        "no blank line after the headers (a request is: request line, headers, blank line, body)"
    )]
    NoHeaderEnd,
    /// The request line is not `METHOD /target HTTP/1.x`.
    #[error("request line {0:?} is not `METHOD /path HTTP/1.1`")]
    RequestLine(String),
    /// A header line without `:` or with a name that is not a token.
    #[error("header line {0:?} is not `Name: value`")]
    HeaderLine(String),
    /// `Content-Length` is not a number, or the body is shorter, or longer by more than line
    /// breaks.
    #[error("Content-Length {declared:?} does not match the body's {actual} bytes")]
    ContentLength {
        /// The header's value.
        declared: String,
        /// The bytes after the blank line.
        actual: usize,
    },
    /// `Transfer-Encoding: chunked`.
    #[error("a chunked body: write the request with its body decoded and a Content-Length")]
    Chunked,
}

impl RawRequest {
    /// Parses one request; see [`RawRequest`] for the form.
    pub fn parse(bytes: &[u8]) -> Result<RawRequest, RawRequestError> {
        let (head, rest) = split_head(bytes).ok_or(RawRequestError::NoHeaderEnd)?;
        let head = String::from_utf8_lossy(head);
        let mut lines = head.split('\n').map(|l| l.strip_suffix('\r').unwrap_or(l));
        let line = lines.next().unwrap_or_default();
        let (method, target) = parse_request_line(line)
            .ok_or_else(|| RawRequestError::RequestLine(line.to_owned()))?;
        let mut headers = Vec::new();
        for line in lines {
            let (name, value) = line
                .split_once(':')
                .filter(|(n, _)| !n.is_empty() && n.bytes().all(is_token_byte))
                .ok_or_else(|| RawRequestError::HeaderLine(line.to_owned()))?;
            headers.push((
                name.to_owned(),
                value.trim_matches([' ', '\t']).as_bytes().to_vec(),
            ));
        }
        let request = RawRequest {
            method: method.to_owned(),
            target: target.to_owned(),
            body: Vec::new(),
            headers,
        };
        if request
            .header("transfer-encoding")
            .is_some_and(|v| v.to_ascii_lowercase().windows(7).any(|w| w == b"chunked"))
        {
            return Err(RawRequestError::Chunked);
        }
        let body = request.body_of(rest)?;
        Ok(RawRequest { body, ..request })
    }

    /// The first value of header `name` (any case).
    fn header(&self, name: &str) -> Option<&[u8]> {
        self.headers
            .iter()
            .find(|(n, _)| n.eq_ignore_ascii_case(name))
            .map(|(_, v)| v.as_slice())
    }

    /// The body: `rest`, cut to `Content-Length` when there is one.
    fn body_of(&self, rest: &[u8]) -> Result<Vec<u8>, RawRequestError> {
        let Some(declared) = self.header("content-length") else {
            return Ok(rest.to_vec());
        };
        let mismatch = || RawRequestError::ContentLength {
            declared: String::from_utf8_lossy(declared).into_owned(),
            actual: rest.len(),
        };
        let length: usize = std::str::from_utf8(declared)
            .ok()
            .and_then(|d| d.parse().ok())
            .ok_or_else(mismatch)?;
        match rest.split_at_checked(length) {
            Some((body, tail)) if tail.iter().all(|b| matches!(b, b'\r' | b'\n')) => {
                Ok(body.to_vec())
            }
            _ => Err(mismatch()),
        }
    }

    /// The method, as written.
    pub fn method(&self) -> &str {
        &self.method
    }

    /// The request target, as written (`/api/v1/payments?x=1`).
    pub fn target(&self) -> &str {
        &self.target
    }

    /// The body.
    pub fn body(&self) -> &[u8] {
        &self.body
    }

    /// The header lines in order, each value without the spaces around it.
    pub fn headers(&self) -> impl Iterator<Item = (&str, &[u8])> {
        self.headers.iter().map(|(n, v)| (n.as_str(), v.as_slice()))
    }

    /// Runs `f` on the request as signatures see it, received over `scheme` (the scheme of the
    /// server's public base URL, `https` in production), its authority the `Host` header.
    pub fn with_parts<T>(&self, scheme: &str, f: impl FnOnce(&HttpRequestParts<'_>) -> T) -> T {
        let headers: Vec<(&str, &[u8])> = self.headers().collect();
        let authority = self
            .header("host")
            .and_then(|h| std::str::from_utf8(h).ok())
            .unwrap_or_default();
        f(&HttpRequestParts {
            method: &self.method,
            scheme,
            authority,
            path_and_query: &self.target,
            headers: &headers,
            body: &self.body,
        })
    }
}

/// The header section (without the blank line) and the rest.
fn split_head(bytes: &[u8]) -> Option<(&[u8], &[u8])> {
    let mut start = 0;
    while let Some(offset) = bytes[start..].iter().position(|&b| b == b'\n') {
        let end = start + offset;
        let line = &bytes[start..end];
        if line.is_empty() || line == b"\r" {
            return Some((&bytes[..start.saturating_sub(1)], &bytes[end + 1..]));
        }
        start = end + 1;
    }
    None
}

/// `METHOD /target HTTP/1.x`: the method and the target.
fn parse_request_line(line: &str) -> Option<(&str, &str)> {
    let mut words = line.split(' ');
    let (method, target, version) = (words.next()?, words.next()?, words.next()?);
    let well_formed = words.next().is_none()
        && !method.is_empty()
        && method.bytes().all(is_token_byte)
        && target.starts_with('/')
        && version.starts_with("HTTP/1.");
    well_formed.then_some((method, target))
}

/// A byte of an RFC 9110 token (method, field name).
fn is_token_byte(b: u8) -> bool {
    b.is_ascii_alphanumeric() || b"!#$%&'*+-.^_`|~".contains(&b)
}

/// A request the server would accept as signed, as far as can be told offline.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct OfflineCheck {
    /// The signature that verified.
    pub signature: VerifiedSignature,
    /// Whether the bearer token was compared with an expected one (otherwise only its form
    /// was checked).
    pub token_compared: bool,
}

/// Checks one signed request (`parts`) the way the server does before it looks at the body,
/// with the project's public `key` instead of its records, at `now`: the request's form
/// (single-valued headers, a JSON `Content-Type` for a body, an echoable `X-Request-ID`), the
/// bearer token's form for its environment (and, with `expected_token`, that it is that
/// token), then the signature under the service's strict policy (covered components,
/// parameters, the `created`/`expires` window, the nonce parameter, `Content-Digest`), its
/// `keyid` (that of `key`, else `unknown keyid`, as for a key the project does not have), the
/// Ed25519 verification and the presence of `X-Request-Nonce`. The request is taken as one
/// that must be signed, whatever its endpoint.
///
/// The environment is that of `expected_token`'s prefix, else of the sent token's, else the
/// sandbox. A refusal is the error the server answers, with its code ([`AuthError::code`]);
/// signature refusals carry the signature base, as the sandbox's answer does. What needs the
/// server's records is not checked ([`NOT_CHECKED_OFFLINE`]).
///
/// ```
/// use ed25519_dalek::SigningKey;
/// use payments_core::auth::signature::{sign_request, SignOptions};
/// use payments_core::auth::{keyid, HttpRequestParts};
/// use payments_core::service::{check_request_offline, RawRequest};
/// use payments_core::{ErrorCode, RandomSource, Timestamp};
///
/// struct Fixed;
/// impl RandomSource for Fixed {
///     fn fill(&self, buf: &mut [u8]) { buf.fill(7) }
/// }
///
/// let key = SigningKey::from_bytes(&[1u8; 32]);
/// let token = format!("nl_test_{}", "A".repeat(43));
/// let bearer = format!("Bearer {token}");
/// let body = br#"{"merchant_payment_id":"o-1","amount":"100","payment_method":"sbp"}"#;
/// let mut headers: Vec<(&str, &[u8])> = vec![
///     ("Host", b"api.example.com"),
///     ("Authorization", bearer.as_bytes()),
///     ("Content-Type", b"application/json"),
///     ("X-Request-ID", b"req-1"),
/// ];
/// let parts = HttpRequestParts {
///     method: "POST",
///     scheme: "https",
///     authority: "api.example.com",
///     path_and_query: "/api/v1/payments",
///     headers: &headers,
///     body,
/// };
/// let created = 1_790_856_000;
/// let options = SignOptions::new(keyid(&key.verifying_key()), created, created + 300);
/// let signed = sign_request(&parts, &key, &options, &Fixed).unwrap();
/// headers.extend(signed.headers().map(|(n, v)| (n, v.as_bytes())));
///
/// // The request as the merchant's code wrote it on the wire.
/// let mut wire = String::from("POST /api/v1/payments HTTP/1.1\r\n");
/// for (name, value) in &headers {
///     wire += &format!("{name}: {}\r\n", std::str::from_utf8(value).unwrap());
/// }
/// let wire = [wire.as_bytes(), b"\r\n", body].concat();
///
/// let request = RawRequest::parse(&wire).unwrap();
/// let now = Timestamp::from_unix_secs(created + 5);
/// let check = |r: &RawRequest, t: Option<&str>| {
///     r.with_parts("https", |parts| check_request_offline(parts, &key.verifying_key(), t, now))
/// };
/// assert!(check(&request, Some(&token)).is_ok());
///
/// // A body changed after signing: `401 signature_invalid`, the digest named.
/// let tampered = RawRequest::parse(&[&wire[..wire.len() - 2], b"7}"].concat()).unwrap();
/// let refused = check(&tampered, None).unwrap_err();
/// assert_eq!(refused.code(), ErrorCode::SignatureInvalid);
/// assert!(refused.to_string().contains("content-digest does not match body"), "{refused}");
/// // Another project's token: `401 token_invalid`.
/// let other = format!("nl_test_{}A", "B".repeat(42));
/// assert_eq!(check(&request, Some(&other)).unwrap_err().code(), ErrorCode::TokenInvalid);
/// ```
pub fn check_request_offline(
    parts: &HttpRequestParts<'_>,
    key: &VerifyingKey,
    expected_token: Option<&str>,
    now: Timestamp,
) -> Result<OfflineCheck, AuthError> {
    // 0. The form, of a request that must be signed.
    check_form_of(parts, true)?;
    // 1. The token: its form for the environment, and that it is the one expected.
    let sent = parts
        .field_value("authorization")
        .ok()
        .flatten()
        .unwrap_or_default();
    let environment = expected_token
        .and_then(environment_of)
        .or_else(|| {
            sent.split_once(' ')
                .and_then(|(_, t)| environment_of(t.trim()))
        })
        .unwrap_or(Environment::Sandbox);
    let hash = bearer_of(parts.headers, environment)?;
    if let Some(expected) = expected_token {
        if !TokenHash::of(expected.trim()).ct_eq(&hash) {
            return Err(TokenRefusal::Unknown.into());
        }
    }
    // 4. Signature and digest, with the key given for the project's; 5. the nonce's presence.
    let refused = |error| AuthError::Signature { error, debug: true };
    let prepared =
        PreparedSignature::prepare(parts, &SignaturePolicy::strict(), now).map_err(refused)?;
    if *prepared.keyid() != keyid(key) {
        return Err(refused(prepared.unknown_keyid()));
    }
    let signature = prepared.verify(key).map_err(refused)?;
    if signature.nonce.is_none() {
        return Err(AuthError::MissingNonce);
    }
    Ok(OfflineCheck {
        signature,
        token_compared: expected_token.is_some(),
    })
}

/// The environment whose prefix `token` has.
fn environment_of(token: &str) -> Option<Environment> {
    [Environment::Sandbox, Environment::Production]
        .into_iter()
        .find(|e| token.starts_with(e.token_prefix()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_request_parses_with_crlf_or_lf_and_an_editors_final_newline() {
        for wire in [
            &b"POST /api/v1/payments?x=1 HTTP/1.1\r\nHost: h\r\nX-A:  v \r\nContent-Length: 2\r\n\r\n{}"[..],
            b"POST /api/v1/payments?x=1 HTTP/1.1\nHost: h\nX-A: v\nContent-Length: 2\n\n{}\n",
        ] {
            let r = RawRequest::parse(wire).unwrap();
            assert_eq!((r.method(), r.target(), r.body()), ("POST", "/api/v1/payments?x=1", &b"{}"[..]));
            let headers: Vec<_> = r.headers().collect();
            assert_eq!(headers[1], ("X-A", &b"v"[..]));
            r.with_parts("https", |p| assert_eq!((p.authority, p.query()), ("h", Some("x=1"))));
        }
    }

    #[test]
    fn what_is_not_one_request_is_refused_with_its_reason() {
        let refused = |wire: &[u8]| RawRequest::parse(wire).unwrap_err();
        assert_eq!(
            refused(b"GET / HTTP/1.1\r\nHost: h\r\n"),
            RawRequestError::NoHeaderEnd
        );
        assert!(matches!(
            refused(b"GET https://h/ HTTP/1.1\n\n"),
            RawRequestError::RequestLine(_)
        ));
        assert!(matches!(
            refused(b"GET / HTTP/1.1\nHost h\n\n"),
            RawRequestError::HeaderLine(_)
        ));
        assert!(matches!(
            refused(b"POST / HTTP/1.1\nContent-Length: 5\n\n{}"),
            RawRequestError::ContentLength { actual: 2, .. }
        ));
        assert!(matches!(
            refused(b"POST / HTTP/1.1\nContent-Length: 2\n\n{}x"),
            RawRequestError::ContentLength { .. }
        ));
        assert_eq!(
            refused(b"POST / HTTP/1.1\nTransfer-Encoding: chunked\n\n2\r\n{}\r\n0\r\n\r\n"),
            RawRequestError::Chunked
        );
    }
}
