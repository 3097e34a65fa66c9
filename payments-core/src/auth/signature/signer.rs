//! The request signer for merchants' clients, examples and tests: adds `Content-Digest`,
//! `X-Request-Nonce`, `Signature-Input` and `Signature` to a request.

use base64::engine::general_purpose::STANDARD;
use base64::Engine as _;
use ed25519_dalek::{Signer as _, SigningKey};

use super::base::{serialize_signature_params, signature_base, Component};
use super::{HttpRequestParts, SignatureFailure, PREFERRED_LABEL};
use crate::auth::digest::content_digest_header;
use crate::auth::nonce::{Nonce, NonceError};
use crate::{KeyId, RandomSource};

/// A signature parameter, in the order the signer writes them.
#[non_exhaustive]
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum SigParam {
    /// `created=<unix seconds>`.
    Created,
    /// `expires=<unix seconds>`.
    Expires,
    /// `keyid="<keyid>"`.
    Keyid,
    /// `alg="ed25519"`.
    Alg,
    /// `nonce="<the X-Request-Nonce>"`.
    Nonce,
    /// Any other parameter with a string value (e.g. `tag`); verifiers keep it in the base.
    Other {
        /// Parameter name: a structured-field key (lower case).
        name: String,
        /// Parameter value, an sf-string.
        value: String,
    },
}

/// What to sign and how.
#[derive(Debug, Clone)]
pub struct SignOptions {
    /// The key id of the signing key ([`crate::auth::keyid`]).
    pub keyid: KeyId,
    /// `created`, Unix seconds.
    pub created: i64,
    /// `expires`, Unix seconds (the service accepts at most `created + 300`).
    pub expires: i64,
    /// The nonce to send; `None` generates one (32 base64url characters).
    pub nonce: Option<Nonce>,
    /// Covered component names in order, e.g. `@method`, `content-type`; `None` gives
    /// [`SignOptions::default_components`].
    pub components: Option<Vec<String>>,
    /// Signature parameters in order.
    pub params: Vec<SigParam>,
}

impl SignOptions {
    /// Default options: the default components and the parameters `created`, `expires`,
    /// `keyid`, `alg` in that order.
    pub fn new(keyid: KeyId, created: i64, expires: i64) -> Self {
        SignOptions {
            keyid,
            created,
            expires,
            nonce: None,
            components: None,
            params: vec![
                SigParam::Created,
                SigParam::Expires,
                SigParam::Keyid,
                SigParam::Alg,
            ],
        }
    }

    /// The components the service requires: `@method`, `@path`, `@query` (only when the request
    /// has a query string), `content-digest`, `x-request-id`, `x-request-nonce`.
    pub fn default_components(has_query: bool) -> Vec<String> {
        let mut c = vec!["@method", "@path"];
        if has_query {
            c.push("@query");
        }
        c.extend(["content-digest", "x-request-id", "x-request-nonce"]);
        c.into_iter().map(str::to_owned).collect()
    }
}

/// The headers the signer adds, and the base it signed (for debugging against a server's).
#[must_use = "the headers must be added to the request"]
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SignedHeaders {
    /// `Content-Digest` value.
    pub content_digest: String,
    /// `X-Request-Nonce` value.
    pub x_request_nonce: String,
    /// `Signature-Input` value (label `sig1`).
    pub signature_input: String,
    /// `Signature` value.
    pub signature: String,
    /// The exact signed bytes.
    pub signature_base: String,
}

impl SignedHeaders {
    /// The four headers as (name, value) pairs, to append to the request.
    pub fn headers(&self) -> [(&'static str, &str); 4] {
        [
            ("Content-Digest", &self.content_digest),
            ("X-Request-Nonce", &self.x_request_nonce),
            ("Signature-Input", &self.signature_input),
            ("Signature", &self.signature),
        ]
    }
}

/// Why the signer could not sign.
#[non_exhaustive]
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum SignError {
    /// The request already has a header the signer writes.
    #[error("the request already has a {0} header; the signer sets it")]
    HeaderAlreadyPresent(&'static str),
    /// A component cannot be signed (unknown derived component, bad name, header absent, e.g.
    /// `x-request-id`: the signer does not invent request ids, the caller sets `X-Request-ID`).
    #[error(transparent)]
    Component(SignatureFailure),
    /// A parameter name or value cannot be written as a structured field.
    #[error("signature parameter cannot be serialised: {0}")]
    InvalidParameter(String),
    /// The given nonce does not have the required form.
    #[error(transparent)]
    Nonce(NonceError),
}

/// Signs `parts` (whose headers must not yet contain `Content-Digest`, `X-Request-Nonce`,
/// `Signature-Input` or `Signature`) with `key`. `rng` is used only when no nonce is given.
///
/// A round trip through the server's verifier:
///
/// ```
/// use ed25519_dalek::SigningKey;
/// use payments_core::auth::signature::{sign_request, SignOptions};
/// use payments_core::auth::{keyid, HttpRequestParts, PreparedSignature, SignaturePolicy};
/// use payments_core::{RandomSource, Timestamp};
///
/// struct Fixed;
/// impl RandomSource for Fixed {
///     fn fill(&self, buf: &mut [u8]) { buf.fill(7) }
/// }
///
/// let key = SigningKey::from_bytes(&[1u8; 32]);
/// let body = br#"{"merchant_payment_id":"o-1","amount":"100","payment_method":"sbp"}"#;
/// let headers: Vec<(&str, &[u8])> = vec![("X-Request-ID", b"req-1")];
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
///
/// let mut received = headers.clone();
/// for (name, value) in signed.headers() {
///     received.push((name, value.as_bytes()));
/// }
/// let parts = HttpRequestParts { headers: &received, ..parts };
/// let now = Timestamp::from_unix_secs(created + 5);
/// let prepared = PreparedSignature::prepare(&parts, &SignaturePolicy::strict(), now).unwrap();
/// assert_eq!(prepared.signature_base(), signed.signature_base);
/// assert!(prepared.verify(&key.verifying_key()).is_ok());
/// ```
///
/// <https://www.rfc-editor.org/rfc/rfc9421#section-3.1>
pub fn sign_request(
    parts: &HttpRequestParts<'_>,
    key: &SigningKey,
    options: &SignOptions,
    rng: &dyn RandomSource,
) -> Result<SignedHeaders, SignError> {
    for (name, lower) in [
        ("Content-Digest", "content-digest"),
        ("X-Request-Nonce", "x-request-nonce"),
        ("Signature-Input", "signature-input"),
        ("Signature", "signature"),
    ] {
        if parts
            .headers
            .iter()
            .any(|(n, _)| n.eq_ignore_ascii_case(lower))
        {
            return Err(SignError::HeaderAlreadyPresent(name));
        }
    }
    let nonce = match &options.nonce {
        Some(n) => n.clone(),
        None => Nonce::generate(rng),
    };
    let content_digest = content_digest_header(parts.body);
    let mut headers: Vec<(&str, &[u8])> = parts.headers.to_vec();
    headers.push(("content-digest", content_digest.as_bytes()));
    headers.push(("x-request-nonce", nonce.as_str().as_bytes()));
    let signed_parts = HttpRequestParts {
        headers: &headers,
        ..*parts
    };

    let names = options
        .components
        .clone()
        .unwrap_or_else(|| SignOptions::default_components(parts.has_query()));
    let components = names
        .iter()
        .map(|n| Component::from_name(n))
        .collect::<Result<Vec<_>, _>>()
        .map_err(SignError::Component)?;

    let inner_list = inner_list(&names, options, &nonce)?;
    let serialized = serialize_signature_params(&inner_list);
    let base =
        signature_base(&signed_parts, &components, &serialized).map_err(SignError::Component)?;
    let signature = key.sign(base.as_bytes());
    Ok(SignedHeaders {
        content_digest,
        x_request_nonce: nonce.as_str().to_owned(),
        signature_input: format!("{PREFERRED_LABEL}={serialized}"),
        signature: format!(
            "{PREFERRED_LABEL}=:{}:",
            STANDARD.encode(signature.to_bytes())
        ),
        signature_base: base,
    })
}

fn sf_string(value: &str) -> Result<sfv::BareItem, SignError> {
    sfv::String::from_string(value.to_owned())
        .map(sfv::BareItem::String)
        .map_err(|(e, _)| SignError::InvalidParameter(format!("{value:?}: {e}")))
}

fn sf_key(name: &str) -> Result<sfv::Key, SignError> {
    sfv::Key::from_string(name.to_owned())
        .map_err(|(e, _)| SignError::InvalidParameter(format!("{name:?}: {e}")))
}

fn inner_list(
    names: &[String],
    options: &SignOptions,
    nonce: &Nonce,
) -> Result<sfv::InnerList, SignError> {
    let items = names
        .iter()
        .map(|n| sf_string(n).map(sfv::Item::new))
        .collect::<Result<Vec<_>, _>>()?;
    let mut params = sfv::Parameters::new();
    for param in &options.params {
        let (key, value) = match param {
            SigParam::Created => (
                sf_key("created")?,
                sfv::BareItem::Integer(integer(options.created)?),
            ),
            SigParam::Expires => (
                sf_key("expires")?,
                sfv::BareItem::Integer(integer(options.expires)?),
            ),
            SigParam::Keyid => (sf_key("keyid")?, sf_string(options.keyid.as_str())?),
            SigParam::Alg => (sf_key("alg")?, sf_string("ed25519")?),
            SigParam::Nonce => (sf_key("nonce")?, sf_string(nonce.as_str())?),
            SigParam::Other { name, value } => (sf_key(name)?, sf_string(value)?),
        };
        if params.insert(key.clone(), value).is_some() {
            return Err(SignError::InvalidParameter(format!(
                "\"{}\" given twice",
                key.as_str()
            )));
        }
    }
    Ok(sfv::InnerList { items, params })
}

fn integer(value: i64) -> Result<sfv::Integer, SignError> {
    sfv::Integer::try_from(value).map_err(|e| SignError::InvalidParameter(format!("{value}: {e}")))
}
