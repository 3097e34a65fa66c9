//! Verification in two steps: [`PreparedSignature::prepare`] parses and checks a signature and
//! builds its base; [`PreparedSignature::verify`] checks it with the key the caller looked up.

use std::fmt;

use ed25519_dalek::VerifyingKey;

use super::base::{parse_components, signature_base_of};
use super::parse::{parse_dictionary, structured_field, Params};
use super::policy::check_policy;
use super::{HttpRequestParts, SignatureError, SignatureFailure, SignaturePolicy, PREFERRED_LABEL};
use crate::auth::nonce::Nonce;
use crate::{KeyId, Timestamp};

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

/// The `created` parameter (Unix seconds) of the signature the verifier would choose in
/// `headers` (`sig1`, or the only one), without checking anything else; `None` when there is
/// none or the fields do not parse. For the request log's clock skew, read whether or not the
/// signature verified.
pub fn signature_created(headers: &[(&str, &[u8])]) -> Option<i64> {
    let parts = HttpRequestParts {
        method: "",
        scheme: "",
        authority: "",
        path_and_query: "/",
        headers,
        body: &[],
    };
    let input = structured_field(
        &parts,
        "signature-input",
        SignatureFailure::MalformedSignatureInput,
    )
    .ok()??;
    let inputs = parse_dictionary(&input, SignatureFailure::MalformedSignatureInput).ok()?;
    let entry = match inputs.get(PREFERRED_LABEL) {
        Some(entry) => entry,
        None if inputs.len() == 1 => inputs.first()?.1,
        None => return None,
    };
    let sfv::ListEntry::InnerList(covered) = entry else {
        return None;
    };
    Params::parse(&covered.params).ok()?.created
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
        let base = signature_base_of(parts, &components, covered)?;
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

    /// The Ed25519 signature sent.
    pub fn signature(&self) -> &ed25519_dalek::Signature {
        &self.signature
    }

    /// The error to answer when the signature does not verify with the key (what
    /// [`PreparedSignature::verify`] answers then), for a caller that verified it otherwise
    /// (in a batch, [`crate::auth::batch`]).
    pub fn verification_failed(&self) -> SignatureError {
        SignatureError {
            failure: SignatureFailure::VerificationFailed,
            signature_base: Some(self.base.clone()),
        }
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
