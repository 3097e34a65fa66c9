//! Why a signature was refused ([`SignatureFailure`], [`SignatureError`]) and its answer:
//! every refusal is `401 signature_invalid`.

use crate::auth::digest::DigestError;
use crate::auth::nonce::NonceError;

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
    /// A parameter named twice in one scope of a `Signature-Input` or `Signature` member
    /// (`created` twice, ...): the parser would keep the last silently.
    #[error("duplicate parameter \"{parameter}\" in signature \"{label}\"")]
    DuplicateParameter {
        /// The label of the member.
        label: String,
        /// The parameter name.
        parameter: String,
    },
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

impl SignatureFailure {
    /// A stable name of the failure and the values its message names (a header's, a
    /// component's or a parameter's name, a count, a parser's detail), so that a reader in
    /// another language words it from its own catalog: `("missing_header",
    /// ["content-digest"])`. The names never change; a new failure gets a new one.
    pub fn code(&self) -> (&'static str, Vec<String>) {
        use SignatureFailure as F;
        let one = |v: &str| vec![v.to_string()];
        match self {
            F::MissingSignatureInput => ("missing_signature_input", Vec::new()),
            F::MissingSignature => ("missing_signature", Vec::new()),
            F::MalformedSignatureInput(d) => ("malformed_signature_input", one(d)),
            F::MalformedSignature(d) => ("malformed_signature", one(d)),
            F::DuplicateLabel(l) => ("duplicate_label", one(l)),
            F::DuplicateParameter { label, parameter } => (
                "duplicate_parameter",
                vec![parameter.clone(), label.clone()],
            ),
            F::AmbiguousLabel => ("ambiguous_label", Vec::new()),
            F::MissingSignatureForLabel(l) => ("missing_signature_for_label", one(l)),
            F::InvalidSignatureLength(n) => ("invalid_signature_length", one(&n.to_string())),
            F::InvalidComponentIdentifier(c) => ("invalid_component_identifier", one(c)),
            F::UnsupportedComponentParameter {
                component,
                parameter,
            } => (
                "unsupported_component_parameter",
                vec![parameter.clone(), component.clone()],
            ),
            F::UnsupportedDerivedComponent(c) => ("unsupported_derived_component", one(c)),
            F::DuplicateComponent(c) => ("duplicate_component", one(c)),
            F::MissingHeader(h) => ("missing_header", one(h)),
            F::InvalidComponentValue(c) => ("invalid_component_value", one(c)),
            F::InvalidParameter(p) => ("invalid_parameter", one(p)),
            F::MissingCreated => ("missing_created", Vec::new()),
            F::MissingExpires => ("missing_expires", Vec::new()),
            F::MissingKeyid => ("missing_keyid", Vec::new()),
            F::UnsupportedAlg(a) => ("unsupported_alg", one(a)),
            F::CreatedInFuture => ("created_in_future", Vec::new()),
            F::ExpiresNotAfterCreated => ("expires_not_after_created", Vec::new()),
            F::ValidityTooLong => ("validity_too_long", Vec::new()),
            F::Expired => ("expired", Vec::new()),
            F::TooOld => ("too_old", Vec::new()),
            F::MissingCoveredComponent(c) => ("missing_covered_component", one(c)),
            F::InvalidNonce(e) => ("invalid_nonce", one(&e.to_string())),
            F::NonceMismatch => ("nonce_mismatch", Vec::new()),
            F::ContentDigest(DigestError::Mismatch) => ("digest_mismatch", Vec::new()),
            F::ContentDigest(e) => ("invalid_digest", one(&e.to_string())),
            F::UnknownKeyid => ("unknown_keyid", Vec::new()),
            F::VerificationFailed => ("verification_failed", Vec::new()),
        }
    }
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

/// Covered components whose values are credentials: never repeated in an answer or a log.
const CREDENTIAL_COMPONENTS: [&str; 2] = ["authorization", "proxy-authorization"];

/// The signature base with the value of every credential component (a covered
/// `authorization`, whose value is the bearer token) replaced by `[redacted]`.
pub(super) fn redact_signature_base(base: &str) -> String {
    base.split('\n')
        .map(|line| {
            CREDENTIAL_COMPONENTS
                .iter()
                .find(|name| {
                    line.strip_prefix('"')
                        .and_then(|l| l.strip_prefix(**name))
                        .is_some_and(|l| l.starts_with("\":"))
                })
                .map_or_else(|| line.to_owned(), |name| format!("\"{name}\": [redacted]"))
        })
        .collect::<Vec<_>>()
        .join("\n")
}

/// What the sandbox adds to `signature does not verify`.
pub const SANDBOX_KEY_HINT: &str = ": signature_base is the base the server verified; if it \
     equals the base you signed, the private key you signed with is not the one registered \
     under this keyid (another project's key, or a replaced one)";

impl SignatureError {
    /// Redacts the value of a covered `authorization` component (the bearer token) from the
    /// signature base it carries, before it is shown or kept.
    pub(crate) fn redact_base(&mut self) {
        self.signature_base = self.signature_base.as_deref().map(redact_signature_base);
    }
}
