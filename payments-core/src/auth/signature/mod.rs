//! RFC 9421 HTTP Message Signatures with Ed25519, and the service's signature policy.
//!
//! The verifier is general: it builds the signature base for the derived components
//! `@method`, `@target-uri`, `@authority`, `@scheme`, `@request-target`, `@path`, `@query` and for
//! any header field, and verifies the RFC's own Ed25519 examples. The policy of `decisions.md`
//! (required components, `created`/`expires` window, `Content-Digest`, nonce) sits on top, in
//! [`SignaturePolicy`].
//!
//! Key lookup is asynchronous in the caller, so verification is split in two:
//!
//! 1. [`PreparedSignature::prepare`] parses `Signature-Input` and `Signature`, picks the label,
//!    checks the parameters, the time window, the covered components, the nonce parameter and the
//!    `Content-Digest`, and builds the signature base;
//! 2. the caller looks up [`PreparedSignature::keyid`] and calls [`PreparedSignature::verify`]
//!    (or answers [`PreparedSignature::unknown_keyid`]).
//!
//! <https://www.rfc-editor.org/rfc/rfc9421>

mod base;
mod signer;

#[cfg(test)]
mod tests;

use std::fmt;
use std::time::Duration;

use ed25519_dalek::VerifyingKey;

use self::base::{parse_components, serialize_signature_params, signature_base, Component};
use crate::auth::digest::{verify_content_digest, DigestError};
use crate::auth::nonce::{Nonce, NonceError};
use crate::auth::token::Environment;
use crate::{ApiError, ErrorCode, KeyId, Timestamp};

pub use self::signer::{sign_request, SigParam, SignError, SignOptions, SignedHeaders};

/// The label the service prefers when a request carries several signatures.
pub const PREFERRED_LABEL: &str = "sig1";

/// The parts of an HTTP request that signatures cover, borrowed from the adapter's request.
///
/// `headers` are the header lines in wire order (names in any case, values as raw bytes); lines
/// with the same name are combined by the verifier. An axum adapter fills it with
/// `headers.iter().map(|(n, v)| (n.as_str(), v.as_bytes()))` (the `http` crate keeps the order
/// of lines with the same name).
#[derive(Debug, Clone, Copy)]
pub struct HttpRequestParts<'a> {
    /// The request method, e.g. `POST`, as sent (case-sensitive).
    pub method: &'a str,
    /// The scheme of the configured public base URL (`https`), not of the hop to the server.
    pub scheme: &'a str,
    /// The `Host` header (or HTTP/2 `:authority`) as received.
    pub authority: &'a str,
    /// The raw request target in origin form, percent-encoding as received: `/path?query`.
    pub path_and_query: &'a str,
    /// Header lines in wire order.
    pub headers: &'a [(&'a str, &'a [u8])],
    /// The request body, exactly as received.
    pub body: &'a [u8],
}

impl<'a> HttpRequestParts<'a> {
    /// The raw path: the request target up to `?`; `/` if empty (RFC 9421 section 2.2.6).
    pub fn path(&self) -> &'a str {
        let path = self
            .path_and_query
            .split_once('?')
            .map_or(self.path_and_query, |(p, _)| p);
        if path.is_empty() {
            "/"
        } else {
            path
        }
    }

    /// The raw query after `?`, if the target has a `?`.
    pub fn query(&self) -> Option<&'a str> {
        self.path_and_query.split_once('?').map(|(_, q)| q)
    }

    /// Whether the request has a non-empty query string (then `@query` must be covered).
    pub fn has_query(&self) -> bool {
        self.query().is_some_and(|q| !q.is_empty())
    }

    /// The request target (`@request-target`), `/` if empty.
    pub fn request_target(&self) -> &'a str {
        if self.path_and_query.is_empty() {
            "/"
        } else {
            self.path_and_query
        }
    }

    /// `@authority`: lower-cased, the scheme's default port removed (RFC 9421 section 2.2.3).
    pub fn normalized_authority(&self) -> String {
        let authority = self.authority.trim().to_ascii_lowercase();
        let default_port = match self.scheme.to_ascii_lowercase().as_str() {
            "https" => Some(":443"),
            "http" => Some(":80"),
            _ => None,
        };
        match default_port.and_then(|p| authority.strip_suffix(p)) {
            Some(stripped) => stripped.to_owned(),
            None => authority,
        }
    }

    /// The combined value of a header field: every line with that name (case-insensitive) in
    /// wire order, each trimmed of leading and trailing spaces and tabs, joined with `", "`.
    /// `None` if no line has that name. A value with bytes other than visible ASCII, space or
    /// tab is an error: it cannot be put in the signature base unambiguously.
    ///
    /// <https://www.rfc-editor.org/rfc/rfc9421#section-2.1>
    pub fn field_value(&self, name: &str) -> Result<Option<String>, SignatureFailure> {
        let mut combined: Option<String> = None;
        for (_, value) in self
            .headers
            .iter()
            .filter(|(n, _)| n.eq_ignore_ascii_case(name))
        {
            if !value
                .iter()
                .all(|&b| b == b'\t' || (0x20..0x7f).contains(&b))
            {
                return Err(SignatureFailure::InvalidComponentValue(name.to_owned()));
            }
            let value = std::str::from_utf8(value)
                .expect("bytes were checked to be ASCII")
                .trim_matches([' ', '\t']);
            match &mut combined {
                Some(c) => {
                    c.push_str(", ");
                    c.push_str(value);
                }
                None => combined = Some(value.to_owned()),
            }
        }
        Ok(combined)
    }
}

/// What the service requires of a signature beyond RFC 9421 itself.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SignaturePolicy {
    required_components: Vec<&'static str>,
    require_query_component: bool,
    require_created: bool,
    require_expires: bool,
    require_content_digest: bool,
    skew: Duration,
    max_age: Duration,
    max_validity: Duration,
}

impl SignaturePolicy {
    /// The policy of `decisions.md`: covered `@method`, `@path`, `content-digest`,
    /// `x-request-id`, `x-request-nonce` (and `@query` with a query string); `created`,
    /// `expires`, `keyid` required; `created <= now + 60 s`, `now - created <= 300 s`,
    /// `created < expires <= created + 300 s`, `now <= expires + 60 s`; a correct `sha-256`
    /// `Content-Digest`.
    pub fn strict() -> Self {
        SignaturePolicy {
            required_components: vec![
                "@method",
                "@path",
                "content-digest",
                "x-request-id",
                "x-request-nonce",
            ],
            require_query_component: true,
            require_created: true,
            require_expires: true,
            require_content_digest: true,
            skew: Duration::from_secs(60),
            max_age: Duration::from_secs(300),
            max_validity: Duration::from_secs(300),
        }
    }

    /// A relaxed policy for the RFC 9421 appendix B examples: no required components, no
    /// `expires`, no `Content-Digest` unless covered. `created` and `keyid` are still required
    /// and the time checks still apply to the parameters present, so pass a `now` near the
    /// example's `created`. Never use it for API requests.
    pub fn rfc_vectors() -> Self {
        SignaturePolicy {
            required_components: Vec::new(),
            require_query_component: false,
            require_expires: false,
            require_content_digest: false,
            ..SignaturePolicy::strict()
        }
    }

    /// The allowed clock skew (60 s in the strict policy).
    pub fn skew(&self) -> Duration {
        self.skew
    }

    /// The longest `expires - created` accepted (300 s in the strict policy).
    pub fn max_validity(&self) -> Duration {
        self.max_validity
    }
}

impl Default for SignaturePolicy {
    /// [`SignaturePolicy::strict`].
    fn default() -> Self {
        SignaturePolicy::strict()
    }
}

/// Why a signature was refused. Every variant has its own message; all map to
/// `401 signature_invalid`.
#[non_exhaustive]
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum SignatureFailure {
    /// No `Signature-Input` header (or an empty one).
    #[error("missing Signature-Input header")]
    MissingSignatureInput,
    /// No `Signature` header.
    #[error("missing Signature header")]
    MissingSignature,
    /// `Signature-Input` is not a valid Dictionary of inner lists.
    #[error("malformed Signature-Input: {0}")]
    MalformedSignatureInput(String),
    /// `Signature` is not a valid Dictionary of byte sequences.
    #[error("malformed Signature: {0}")]
    MalformedSignature(String),
    /// A label appears twice in `Signature-Input` or `Signature`.
    #[error("duplicate signature label \"{0}\"")]
    DuplicateLabel(String),
    /// Several signatures and none labelled `sig1`.
    #[error("several signatures and none labelled \"sig1\"")]
    AmbiguousLabel,
    /// The chosen label has no member in `Signature`.
    #[error("no Signature for label \"{0}\"")]
    MissingSignatureForLabel(String),
    /// The signature is not 64 bytes.
    #[error("Ed25519 signature must be 64 bytes, got {0}")]
    InvalidSignatureLength(usize),
    /// A covered component that is not a string, or a malformed field name.
    #[error("invalid component identifier {0}")]
    InvalidComponentIdentifier(String),
    /// A component parameter such as `;sf`, `;key`, `;bs`, `;req`, `;tr` or `;name`.
    #[error("unsupported parameter \";{parameter}\" on component \"{component}\"")]
    UnsupportedComponentParameter {
        /// The component name.
        component: String,
        /// The parameter name.
        parameter: String,
    },
    /// A derived component this verifier does not compute (`@query-param`, `@status`, ...).
    #[error("unsupported derived component \"{0}\"")]
    UnsupportedDerivedComponent(String),
    /// The same component is covered twice.
    #[error("component \"{0}\" is covered twice")]
    DuplicateComponent(String),
    /// A covered header field is absent from the request.
    #[error("covered header \"{0}\" is not in the request")]
    MissingHeader(String),
    /// A covered value holds bytes other than visible ASCII, space and tab.
    #[error("value of \"{0}\" contains characters other than visible ASCII")]
    InvalidComponentValue(String),
    /// A signature parameter of the wrong type (`created` not an integer, ...).
    #[error("signature parameter \"{0}\" has the wrong type")]
    InvalidParameter(&'static str),
    /// No `created` parameter.
    #[error("missing signature parameter \"created\"")]
    MissingCreated,
    /// No `expires` parameter.
    #[error("missing signature parameter \"expires\"")]
    MissingExpires,
    /// No `keyid` parameter.
    #[error("missing signature parameter \"keyid\"")]
    MissingKeyid,
    /// `alg` is present and not `ed25519`.
    #[error("alg must be \"ed25519\"")]
    UnsupportedAlg(String),
    /// `created` is more than the skew ahead of the server clock.
    #[error("created in the future")]
    CreatedInFuture,
    /// `expires` is not after `created`.
    #[error("expires must be after created")]
    ExpiresNotAfterCreated,
    /// `expires - created` exceeds the policy's maximum.
    #[error("expires is more than 300 s after created")]
    ValidityTooLong,
    /// `expires` plus skew is in the past.
    #[error("signature expired")]
    Expired,
    /// `created` is older than the policy allows.
    #[error("signature too old: created more than 300 s ago")]
    TooOld,
    /// A component the policy requires is not covered.
    #[error("missing covered component \"{0}\"")]
    MissingCoveredComponent(&'static str),
    /// `X-Request-Nonce` does not have the required form.
    #[error("{0}")]
    InvalidNonce(NonceError),
    /// The `nonce` signature parameter differs from `X-Request-Nonce`.
    #[error("nonce parameter does not match X-Request-Nonce")]
    NonceMismatch,
    /// The `Content-Digest` is malformed, lacks `sha-256`, or does not match the body.
    #[error(transparent)]
    ContentDigest(DigestError),
    /// The key registered under `keyid` is unknown or revoked.
    #[error("unknown keyid")]
    UnknownKeyid,
    /// The Ed25519 signature does not verify over the signature base with the registered key.
    #[error("signature does not verify")]
    VerificationFailed,
}

/// A refused signature: the reason and, once it was built, the signature base (the sandbox
/// returns it to help merchants compare with what they signed).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{failure}")]
pub struct SignatureError {
    /// Why.
    pub failure: SignatureFailure,
    /// The signature base the server built, when it got that far.
    pub signature_base: Option<String>,
}

impl From<SignatureFailure> for SignatureError {
    fn from(failure: SignatureFailure) -> Self {
        SignatureError {
            failure,
            signature_base: None,
        }
    }
}

impl SignatureError {
    /// `401 signature_invalid` with the reason as message, plus the signature base in the
    /// sandbox only (`decisions.md`: a debugging aid, never in production).
    pub fn into_api_error(self, env: Environment) -> ApiError {
        let mut api = ApiError::new(ErrorCode::SignatureInvalid, self.failure.to_string());
        if env == Environment::Sandbox {
            api.signature_base = self.signature_base.clone();
        }
        api.with_cause(crate::error::ErrorCause::Signature(self))
    }
}

impl From<SignatureError> for ApiError {
    /// `401 signature_invalid` with the reason as message and without the signature base
    /// (the safe default); use [`SignatureError::into_api_error`] to include it in the sandbox.
    fn from(e: SignatureError) -> Self {
        e.into_api_error(Environment::Production)
    }
}

/// A signature parsed and checked against the policy, waiting for its key.
#[must_use = "a prepared signature is not verified until `verify` is called"]
#[derive(Clone)]
pub struct PreparedSignature {
    label: String,
    keyid: KeyId,
    created: Option<i64>,
    expires: Option<i64>,
    nonce: Option<Nonce>,
    covered: Vec<String>,
    base: String,
    signature: ed25519_dalek::Signature,
}

impl fmt::Debug for PreparedSignature {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("PreparedSignature")
            .field("label", &self.label)
            .field("keyid", &self.keyid)
            .field("created", &self.created)
            .field("expires", &self.expires)
            .field("nonce", &self.nonce)
            .field("covered", &self.covered)
            .finish_non_exhaustive()
    }
}

/// A verified signature: what the caller needs next (nonce recording, logging).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct VerifiedSignature {
    /// The label used (`sig1` or the only one).
    pub label: String,
    /// The key that verified.
    pub keyid: KeyId,
    /// `created`, Unix seconds.
    pub created: Option<i64>,
    /// `expires`, Unix seconds.
    pub expires: Option<i64>,
    /// The `X-Request-Nonce`, to be recorded as used.
    pub nonce: Option<Nonce>,
    /// The covered component names in signed order.
    pub covered: Vec<String>,
}

/// Signature parameters of RFC 9421 section 2.3 that the service interprets.
#[derive(Default)]
struct Params {
    created: Option<i64>,
    expires: Option<i64>,
    keyid: Option<String>,
    alg: Option<String>,
    nonce: Option<String>,
}

impl Params {
    fn parse(params: &sfv::Parameters) -> Result<Params, SignatureFailure> {
        let integer = |key: &'static str| -> Result<Option<i64>, SignatureFailure> {
            params
                .get(key)
                .map(|v| {
                    v.as_integer()
                        .map(i64::from)
                        .ok_or(SignatureFailure::InvalidParameter(key))
                })
                .transpose()
        };
        let string = |key: &'static str| -> Result<Option<String>, SignatureFailure> {
            params
                .get(key)
                .map(|v| {
                    v.as_string()
                        .map(|s| s.as_str().to_owned())
                        .ok_or(SignatureFailure::InvalidParameter(key))
                })
                .transpose()
        };
        // `tag` and unknown parameters stay in the base but carry no meaning here.
        Ok(Params {
            created: integer("created")?,
            expires: integer("expires")?,
            keyid: string("keyid")?,
            alg: string("alg")?,
            nonce: string("nonce")?,
        })
    }
}

/// Counts Dictionary member names to find duplicates, which `sfv::Dictionary` would merge
/// silently (RFC 9651 keeps the last).
struct LabelCollector(Vec<String>);

impl<'de> sfv::visitor::DictionaryVisitor<'de> for LabelCollector {
    type Out = Vec<String>;
    type Error = std::convert::Infallible;

    fn entry(
        &mut self,
        key: &'de sfv::KeyRef,
    ) -> Result<impl sfv::visitor::EntryVisitor<'de>, Self::Error> {
        self.0.push(key.as_str().to_owned());
        Ok(sfv::visitor::Ignored)
    }

    fn finish(self) -> Result<Self::Out, Self::Error> {
        Ok(self.0)
    }
}

/// Parses a Dictionary header, refusing duplicate member names.
fn parse_dictionary(
    value: &str,
    malformed: fn(String) -> SignatureFailure,
) -> Result<sfv::Dictionary, SignatureFailure> {
    let labels = sfv::Parser::new(value)
        .parse_dictionary_with_visitor(LabelCollector(Vec::new()))
        .map_err(|e| malformed(e.to_string()))?;
    for (i, label) in labels.iter().enumerate() {
        if labels[..i].contains(label) {
            return Err(SignatureFailure::DuplicateLabel(label.clone()));
        }
    }
    sfv::Parser::new(value)
        .parse()
        .map_err(|e: sfv::Error| malformed(e.to_string()))
}

/// A header that must be structured: non-ASCII content is reported as malformed.
fn structured_field(
    parts: &HttpRequestParts<'_>,
    name: &str,
    malformed: fn(String) -> SignatureFailure,
) -> Result<Option<String>, SignatureFailure> {
    parts
        .field_value(name)
        .map_err(|_| malformed("contains characters other than visible ASCII".to_owned()))
}

impl PreparedSignature {
    /// Parses and checks the signature of `parts` under `policy` at `now`, and builds the
    /// signature base. Errors after the base was built carry it.
    ///
    /// <https://www.rfc-editor.org/rfc/rfc9421#section-3.2>
    pub fn prepare(
        parts: &HttpRequestParts<'_>,
        policy: &SignaturePolicy,
        now: Timestamp,
    ) -> Result<PreparedSignature, SignatureError> {
        let input = structured_field(
            parts,
            "signature-input",
            SignatureFailure::MalformedSignatureInput,
        )?
        .ok_or(SignatureFailure::MissingSignatureInput)?;
        let signature = structured_field(parts, "signature", SignatureFailure::MalformedSignature)?
            .ok_or(SignatureFailure::MissingSignature)?;
        let inputs = parse_dictionary(&input, SignatureFailure::MalformedSignatureInput)?;
        let signatures = parse_dictionary(&signature, SignatureFailure::MalformedSignature)?;

        // RFC 9421 section 3.2 step 1: the verifier chooses which signature to check.
        let (label, entry) = match inputs.get(PREFERRED_LABEL) {
            Some(entry) => (PREFERRED_LABEL, entry),
            None => match inputs.len() {
                0 => return Err(SignatureFailure::MissingSignatureInput.into()),
                1 => {
                    let (label, entry) = inputs.first().expect("the dictionary has one member");
                    (label.as_str(), entry)
                }
                _ => return Err(SignatureFailure::AmbiguousLabel.into()),
            },
        };
        let sfv::ListEntry::InnerList(covered) = entry else {
            return Err(SignatureFailure::MalformedSignatureInput(format!(
                "member \"{label}\" is not an inner list"
            ))
            .into());
        };
        let signature = match signatures.get(label) {
            None => return Err(SignatureFailure::MissingSignatureForLabel(label.to_owned()).into()),
            Some(sfv::ListEntry::Item(item)) => {
                item.bare_item.as_byte_sequence().ok_or_else(|| {
                    SignatureFailure::MalformedSignature(format!(
                        "member \"{label}\" is not a byte sequence"
                    ))
                })?
            }
            Some(sfv::ListEntry::InnerList(_)) => {
                return Err(SignatureFailure::MalformedSignature(format!(
                    "member \"{label}\" is not a byte sequence"
                ))
                .into())
            }
        };
        let signature = <&[u8; 64]>::try_from(signature)
            .map(ed25519_dalek::Signature::from_bytes)
            .map_err(|_| SignatureFailure::InvalidSignatureLength(signature.len()))?;

        let components = parse_components(covered)?;
        let base = signature_base(parts, &components, &serialize_signature_params(covered))?;
        let with_base = |failure: SignatureFailure| SignatureError {
            failure,
            signature_base: Some(base.clone()),
        };

        let params = Params::parse(&covered.params).map_err(with_base)?;
        let nonce = check_policy(parts, policy, now, &components, &params).map_err(with_base)?;
        let keyid = params
            .keyid
            .map(KeyId::new)
            .expect("check_policy rejects a signature without keyid");
        Ok(PreparedSignature {
            label: label.to_owned(),
            keyid,
            created: params.created,
            expires: params.expires,
            nonce,
            covered: components.into_iter().map(|c| c.name).collect(),
            base,
            signature,
        })
    }

    /// The `keyid` to look up.
    pub fn keyid(&self) -> &KeyId {
        &self.keyid
    }

    /// The label of the signature being verified.
    pub fn label(&self) -> &str {
        &self.label
    }

    /// The well-formed `X-Request-Nonce`, when the request has one (always under the strict
    /// policy).
    pub fn nonce(&self) -> Option<&Nonce> {
        self.nonce.as_ref()
    }

    /// `created`, Unix seconds.
    pub fn created(&self) -> Option<i64> {
        self.created
    }

    /// `expires`, Unix seconds.
    pub fn expires(&self) -> Option<i64> {
        self.expires
    }

    /// The exact signature base that is verified.
    pub fn signature_base(&self) -> &str {
        &self.base
    }

    /// The error to answer when no active key has this `keyid` (unknown or revoked).
    pub fn unknown_keyid(&self) -> SignatureError {
        SignatureError {
            failure: SignatureFailure::UnknownKeyid,
            signature_base: Some(self.base.clone()),
        }
    }

    /// Verifies the Ed25519 signature over the base with `key` (strict verification: no
    /// small-order keys or non-canonical signatures).
    ///
    /// <https://www.rfc-editor.org/rfc/rfc9421#section-3.3.6>
    pub fn verify(&self, key: &VerifyingKey) -> Result<VerifiedSignature, SignatureError> {
        key.verify_strict(self.base.as_bytes(), &self.signature)
            .map_err(|_| SignatureError {
                failure: SignatureFailure::VerificationFailed,
                signature_base: Some(self.base.clone()),
            })?;
        Ok(VerifiedSignature {
            label: self.label.clone(),
            keyid: self.keyid.clone(),
            created: self.created,
            expires: self.expires,
            nonce: self.nonce.clone(),
            covered: self.covered.clone(),
        })
    }
}

/// The service's rules on top of RFC 9421; returns the parsed `X-Request-Nonce`, if any.
fn check_policy(
    parts: &HttpRequestParts<'_>,
    policy: &SignaturePolicy,
    now: Timestamp,
    components: &[Component],
    params: &Params,
) -> Result<Option<Nonce>, SignatureFailure> {
    if let Some(alg) = &params.alg {
        if alg != "ed25519" {
            return Err(SignatureFailure::UnsupportedAlg(alg.clone()));
        }
    }
    if params.keyid.is_none() {
        return Err(SignatureFailure::MissingKeyid);
    }
    if params.created.is_none() && policy.require_created {
        return Err(SignatureFailure::MissingCreated);
    }
    if params.expires.is_none() && policy.require_expires {
        return Err(SignatureFailure::MissingExpires);
    }
    check_window(policy, now, params.created, params.expires)?;

    let covers = |name: &str| components.iter().any(|c| c.name == name);
    for &required in &policy.required_components {
        if !covers(required) {
            return Err(SignatureFailure::MissingCoveredComponent(required));
        }
    }
    if policy.require_query_component && parts.has_query() && !covers("@query") {
        return Err(SignatureFailure::MissingCoveredComponent("@query"));
    }

    let nonce = parts
        .field_value("x-request-nonce")?
        .map(|v| Nonce::parse(v.as_bytes()))
        .transpose()
        .map_err(SignatureFailure::InvalidNonce)?;
    if let Some(param) = &params.nonce {
        if nonce.as_ref().map(Nonce::as_str) != Some(param.as_str()) {
            return Err(SignatureFailure::NonceMismatch);
        }
    }

    if policy.require_content_digest || covers("content-digest") {
        let digest = structured_field(parts, "content-digest", |e| {
            SignatureFailure::ContentDigest(DigestError::Malformed(e))
        })?
        .ok_or_else(|| SignatureFailure::MissingHeader("content-digest".to_owned()))?;
        verify_content_digest(&digest, parts.body).map_err(SignatureFailure::ContentDigest)?;
    }
    Ok(nonce)
}

/// The `created` / `expires` window, in milliseconds against `now`.
///
/// <https://www.rfc-editor.org/rfc/rfc9421#section-3.2.1>
fn check_window(
    policy: &SignaturePolicy,
    now: Timestamp,
    created: Option<i64>,
    expires: Option<i64>,
) -> Result<(), SignatureFailure> {
    let ms = |d: Duration| i64::try_from(d.as_millis()).unwrap_or(i64::MAX);
    let secs_to_ms = |s: i64| s.saturating_mul(1000);
    let now = now.unix_millis();
    if let Some(created) = created.map(secs_to_ms) {
        if created > now.saturating_add(ms(policy.skew)) {
            return Err(SignatureFailure::CreatedInFuture);
        }
        if let Some(expires) = expires.map(secs_to_ms) {
            if expires <= created {
                return Err(SignatureFailure::ExpiresNotAfterCreated);
            }
            if expires > created.saturating_add(ms(policy.max_validity)) {
                return Err(SignatureFailure::ValidityTooLong);
            }
        }
    }
    if let Some(expires) = expires.map(secs_to_ms) {
        if now > expires.saturating_add(ms(policy.skew)) {
            return Err(SignatureFailure::Expired);
        }
    }
    if let Some(created) = created.map(secs_to_ms) {
        if now.saturating_sub(created) > ms(policy.max_age) {
            return Err(SignatureFailure::TooOld);
        }
    }
    Ok(())
}
