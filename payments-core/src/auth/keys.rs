//! Ed25519 keys: parsing registered public keys, the `keyid` thumbprint, key generation and PEM
//! import/export for merchants' tools.

use base64::engine::general_purpose::{GeneralPurpose, GeneralPurposeConfig, URL_SAFE_NO_PAD};
use base64::engine::DecodePaddingMode;
use base64::Engine as _;
use ed25519_dalek::pkcs8::spki::der::pem;
use ed25519_dalek::pkcs8::spki::der::pem::LineEnding;
use ed25519_dalek::pkcs8::spki::SubjectPublicKeyInfoRef;
use ed25519_dalek::pkcs8::ObjectIdentifier;
use ed25519_dalek::pkcs8::{DecodePrivateKey as _, EncodePrivateKey as _, EncodePublicKey as _};
use ed25519_dalek::{SigningKey, VerifyingKey, PUBLIC_KEY_LENGTH};
use sha2::{Digest as _, Sha256};

use crate::{KeyId, RandomSource};

/// The Ed25519 algorithm identifier of RFC 8410 (`id-Ed25519`).
///
/// <https://www.rfc-editor.org/rfc/rfc8410#section-3>
const ED25519_OID: ObjectIdentifier = ObjectIdentifier::new_unwrap("1.3.101.112");

/// Standard base64, padding optional: merchants paste keys with and without the `=`.
const STANDARD_PAD_OPTIONAL: GeneralPurpose = GeneralPurpose::new(
    &base64::alphabet::STANDARD,
    GeneralPurposeConfig::new().with_decode_padding_mode(DecodePaddingMode::Indifferent),
);

/// Why a key was not accepted.
#[non_exhaustive]
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum KeyError {
    /// PEM armour that cannot be decoded (bad lines, bad base64, mismatched labels).
    #[error("malformed PEM: {0}")]
    MalformedPem(String),
    /// A PEM private key was given where the public key belongs.
    #[error("this is a private key; register the PEM \"PUBLIC KEY\" (or the raw 32-byte public key in base64), and keep the private key secret")]
    PrivateKeyGiven,
    /// A PEM block with another label (`CERTIFICATE`, `RSA PUBLIC KEY`, ...).
    #[error("unsupported PEM label \"{0}\": expected \"PUBLIC KEY\"")]
    UnexpectedPemLabel(String),
    /// The SubjectPublicKeyInfo (or PKCS#8) structure does not decode.
    #[error("malformed key structure: {0}")]
    MalformedDer(String),
    /// A well-formed key of another algorithm (RSA, P-256, X25519, ...).
    #[error("not an Ed25519 key (algorithm {0})")]
    NotEd25519(String),
    /// Neither PEM nor standard base64.
    #[error("expected a PEM \"PUBLIC KEY\" or a 32-byte raw key in standard base64")]
    NotPemOrBase64,
    /// The raw key has another length than 32 bytes.
    #[error("an Ed25519 public key is 32 bytes, got {0}")]
    WrongLength(usize),
    /// The 32 bytes are not the encoding of a curve point.
    #[error("not a valid Ed25519 public key (not a curve point)")]
    InvalidPoint,
    /// A small-order point: signatures under it prove nothing.
    #[error("weak Ed25519 public key (small-order point)")]
    WeakKey,
}

/// Parses a registered public key: a PEM `PUBLIC KEY` (SPKI, RFC 8410) or the 32-byte raw key
/// in standard base64. Surrounding whitespace is ignored.
///
/// <https://www.rfc-editor.org/rfc/rfc8410#section-4>
pub fn parse_public_key(input: &str) -> Result<VerifyingKey, KeyError> {
    let input = input.trim();
    if input.starts_with("-----BEGIN") {
        let (label, der) =
            pem::decode_vec(input.as_bytes()).map_err(|e| KeyError::MalformedPem(e.to_string()))?;
        return match label {
            "PUBLIC KEY" => public_key_from_spki(&der),
            "PRIVATE KEY"
            | "ENCRYPTED PRIVATE KEY"
            | "OPENSSH PRIVATE KEY"
            | "EC PRIVATE KEY"
            | "RSA PRIVATE KEY" => Err(KeyError::PrivateKeyGiven),
            other => Err(KeyError::UnexpectedPemLabel(other.to_owned())),
        };
    }
    let raw = STANDARD_PAD_OPTIONAL
        .decode(input)
        .map_err(|_| KeyError::NotPemOrBase64)?;
    let raw: [u8; PUBLIC_KEY_LENGTH] = raw
        .as_slice()
        .try_into()
        .map_err(|_| KeyError::WrongLength(raw.len()))?;
    public_key_from_raw(&raw)
}

fn public_key_from_spki(der: &[u8]) -> Result<VerifyingKey, KeyError> {
    let spki = SubjectPublicKeyInfoRef::try_from(der)
        .map_err(|e| KeyError::MalformedDer(e.to_string()))?;
    if spki.algorithm.oid != ED25519_OID {
        return Err(KeyError::NotEd25519(spki.algorithm.oid.to_string()));
    }
    if spki.algorithm.parameters.is_some() {
        // RFC 8410 section 3: the parameters MUST be absent.
        return Err(KeyError::MalformedDer(
            "Ed25519 algorithm identifier must have no parameters".to_owned(),
        ));
    }
    let raw = spki.subject_public_key.as_bytes().ok_or_else(|| {
        KeyError::MalformedDer("public key bit string has unused bits".to_owned())
    })?;
    let raw: [u8; PUBLIC_KEY_LENGTH] = raw
        .try_into()
        .map_err(|_| KeyError::WrongLength(raw.len()))?;
    public_key_from_raw(&raw)
}

fn public_key_from_raw(raw: &[u8; PUBLIC_KEY_LENGTH]) -> Result<VerifyingKey, KeyError> {
    let key = VerifyingKey::from_bytes(raw).map_err(|_| KeyError::InvalidPoint)?;
    if key.is_weak() {
        return Err(KeyError::WeakKey);
    }
    Ok(key)
}

/// The key id shown in the cabinet: `ed25519-` followed by the RFC 7638 JWK thumbprint,
/// SHA-256 over `{"crv":"Ed25519","kty":"OKP","x":"<base64url key>"}`, base64url without padding.
///
/// <https://www.rfc-editor.org/rfc/rfc7638#section-3>, <https://www.rfc-editor.org/rfc/rfc8037#appendix-A.3>
pub fn keyid(key: &VerifyingKey) -> KeyId {
    // Members in lexicographic order, no whitespace: RFC 7638 section 3.2.
    let jwk = format!(
        r#"{{"crv":"Ed25519","kty":"OKP","x":"{}"}}"#,
        URL_SAFE_NO_PAD.encode(key.as_bytes())
    );
    KeyId::new(format!(
        "ed25519-{}",
        URL_SAFE_NO_PAD.encode(Sha256::digest(jwk.as_bytes()))
    ))
}

/// A new signing key from 32 bytes of `rng`.
pub fn generate_signing_key(rng: &dyn RandomSource) -> SigningKey {
    let mut seed = [0u8; 32];
    rng.fill(&mut seed);
    SigningKey::from_bytes(&seed)
}

/// The private key as PEM `PRIVATE KEY` (PKCS#8 v1, RFC 8410), LF line endings.
///
/// <https://www.rfc-editor.org/rfc/rfc8410#section-7>
pub fn signing_key_to_pem(key: &SigningKey) -> String {
    key.to_pkcs8_pem(LineEnding::LF)
        .expect("encoding a 32-byte Ed25519 seed as PKCS#8 cannot fail")
        .to_string()
}

/// The public key as PEM `PUBLIC KEY` (SPKI, RFC 8410), LF line endings.
///
/// <https://www.rfc-editor.org/rfc/rfc8410#section-4>
pub fn public_key_to_pem(key: &VerifyingKey) -> String {
    key.to_public_key_pem(LineEnding::LF)
        .expect("encoding a 32-byte Ed25519 public key as SPKI cannot fail")
}

/// The raw public key in standard base64 (the other registration form).
pub fn public_key_to_base64(key: &VerifyingKey) -> String {
    base64::engine::general_purpose::STANDARD.encode(key.as_bytes())
}

/// Parses a PEM `PRIVATE KEY` (unencrypted PKCS#8, RFC 8410) into a signing key.
pub fn parse_signing_key_pem(input: &str) -> Result<SigningKey, KeyError> {
    let input = input.trim();
    let label =
        pem::decode_label(input.as_bytes()).map_err(|e| KeyError::MalformedPem(e.to_string()))?;
    if label != "PRIVATE KEY" {
        return Err(KeyError::UnexpectedPemLabel(label.to_owned()));
    }
    SigningKey::from_pkcs8_pem(input).map_err(|e| match e {
        ed25519_dalek::pkcs8::Error::KeyMalformed
        | ed25519_dalek::pkcs8::Error::Asn1(_)
        | ed25519_dalek::pkcs8::Error::ParametersMalformed => KeyError::MalformedDer(e.to_string()),
        other => KeyError::NotEd25519(other.to_string()),
    })
}
