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
    /// Private key material was given where the public key belongs: a PEM or OpenSSH private
    /// key, a PKCS#8 structure in base64, or a 64-byte secret key (seed and public key).
    #[error("this is a private key, and a private key must never leave your machine; it was not stored, but treat it as exposed: generate a new key pair, register its public key (the PEM \"PUBLIC KEY\" or the raw 32-byte public key in base64) and stop using this one")]
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
    #[error("these 32 bytes are not an Ed25519 public key (not a curve point); if they are your private key (the 32-byte seed), treat it as exposed and generate a new key pair")]
    InvalidPoint,
    /// A small-order point: signatures under it prove nothing.
    #[error("weak Ed25519 public key (small-order point)")]
    WeakKey,
}

/// The form a public key was registered in.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum KeyForm {
    /// A PEM `PUBLIC KEY` (SPKI): its label says it is a public key.
    Pem,
    /// 32 raw bytes in base64: a public key, or a private key's 32-byte seed that happens to
    /// be a curve point (about half of all seeds are), which no check of the bytes can tell.
    Raw,
}

/// Why a key was not confirmed as the one the merchant meant ([`KeyConfirmation::check`]).
#[non_exhaustive]
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum KeyConfirmationError {
    /// A raw 32-byte key given without the keyid that confirms it.
    #[error("a raw 32-byte key cannot be told from a private key's 32-byte seed: what was given has keyid {derived}; give the keyid your key generator printed to confirm it is your public key, or register the PEM public key")]
    Unconfirmed {
        /// The keyid of what was given.
        derived: KeyId,
    },
    /// The keyid of what was given is not the one expected.
    #[error("what was given has keyid {derived}, not the keyid expected: it is not the public key your key generator printed that keyid for (if it is your private key, treat it as exposed and generate a new key pair)")]
    Mismatch {
        /// The keyid of what was given.
        derived: KeyId,
    },
}

impl KeyConfirmationError {
    /// The keyid of what was given.
    pub fn derived(&self) -> &KeyId {
        match self {
            KeyConfirmationError::Unconfirmed { derived }
            | KeyConfirmationError::Mismatch { derived } => derived,
        }
    }
}

/// What confirms that a key being registered is the merchant's public key: the keyid the
/// merchant's own key generator printed (`examples/keygen` prints it), compared with the
/// keyid of what was given. A PEM `PUBLIC KEY` is unambiguous and needs no confirmation; a raw
/// 32-byte key may be a pasted private seed, and only the keyid tells: the seed's keyid is not
/// the one the generator printed for the key pair.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct KeyConfirmation<'a> {
    /// The keyid the merchant expects; when given, the key's keyid must equal it (whatever
    /// the form).
    pub expected_keyid: Option<&'a str>,
    /// Whether a raw 32-byte key needs `expected_keyid`.
    pub raw_needs_keyid: bool,
}

impl<'a> KeyConfirmation<'a> {
    /// A key pasted by a person into a form (the cabinet): a raw key needs its keyid. The
    /// mistake it catches, a private seed pasted as the public key, is a person's.
    pub fn pasted(expected_keyid: Option<&'a str>) -> Self {
        KeyConfirmation {
            expected_keyid,
            raw_needs_keyid: true,
        }
    }

    /// A key sent by a program (the operator API, the CLI): the keyid is checked when given;
    /// a raw key without one is registered as API v1 always did.
    pub fn given(expected_keyid: Option<&'a str>) -> Self {
        KeyConfirmation {
            expected_keyid,
            raw_needs_keyid: false,
        }
    }

    /// The key's keyid when the confirmation holds. An empty `expected_keyid` counts as none;
    /// surrounding whitespace is ignored.
    pub fn check(&self, key: &VerifyingKey, form: KeyForm) -> Result<KeyId, KeyConfirmationError> {
        let derived = keyid(key);
        match self.expected_keyid.map(str::trim).filter(|e| !e.is_empty()) {
            Some(expected) if expected == derived.as_str() => Ok(derived),
            Some(_) => Err(KeyConfirmationError::Mismatch { derived }),
            None if form == KeyForm::Raw && self.raw_needs_keyid => {
                Err(KeyConfirmationError::Unconfirmed { derived })
            }
            None => Ok(derived),
        }
    }
}

/// Parses a registered public key: a PEM `PUBLIC KEY` (SPKI, RFC 8410) or the 32-byte raw key
/// in standard base64. Surrounding whitespace is ignored, and so is text before a PEM block
/// (RFC 7468 section 2), as [`parse_signing_key_pem`] ignores it: a private key PEM after a
/// line of text is refused as a private key, not as something unreadable.
///
/// <https://www.rfc-editor.org/rfc/rfc8410#section-4>
pub fn parse_public_key(input: &str) -> Result<VerifyingKey, KeyError> {
    parse_public_key_form(input).map(|(key, _)| key)
}

/// [`parse_public_key`], and the form the key was given in.
pub fn parse_public_key_form(input: &str) -> Result<(VerifyingKey, KeyForm), KeyError> {
    let input = input.trim();
    if looks_like_private_key(input) {
        return Err(KeyError::PrivateKeyGiven);
    }
    if input.contains("-----BEGIN") {
        let (label, der) =
            pem::decode_vec(input.as_bytes()).map_err(|e| KeyError::MalformedPem(e.to_string()))?;
        return match label {
            "PUBLIC KEY" => public_key_from_spki(&der).map(|key| (key, KeyForm::Pem)),
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
    public_key_from_raw(&raw).map(|key| (key, KeyForm::Raw))
}

/// Whether `input` holds private key material rather than a public key: any armour naming a
/// private key (PEM `PRIVATE KEY` of every kind, OpenSSH, PuTTY), readable or not; a PKCS#8
/// private key structure in bare base64 (the body of a PEM `PRIVATE KEY`); or 64 bytes in
/// base64 whose second half is the public key of the first (the NaCl/libsodium secret key).
/// A raw 32-byte seed cannot be told from a public key by its bytes; it is refused only when
/// it is not a curve point ([`KeyError::InvalidPoint`]).
pub fn looks_like_private_key(input: &str) -> bool {
    if input.contains("PRIVATE KEY") || input.contains("PuTTY-User-Key-File") {
        return true;
    }
    let compact: String = input.split_whitespace().collect();
    let Ok(raw) = STANDARD_PAD_OPTIONAL.decode(compact.as_bytes()) else {
        return false;
    };
    if raw.len() == 64 {
        let seed: [u8; 32] = raw[..32].try_into().expect("32 bytes");
        return SigningKey::from_bytes(&seed).verifying_key().as_bytes()[..] == raw[32..];
    }
    raw.first() == Some(&0x30) && SigningKey::from_pkcs8_der(&raw).is_ok()
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

/// The private key as PEM `PRIVATE KEY`, PKCS#8 v1 without the optional public key (the form
/// of RFC 8410 section 10.3, read by every tool), LF line endings.
///
/// <https://www.rfc-editor.org/rfc/rfc8410#section-7>
pub fn signing_key_to_pem(key: &SigningKey) -> String {
    let keypair = ed25519_dalek::pkcs8::KeypairBytes {
        secret_key: key.to_bytes(),
        public_key: None,
    };
    keypair
        .to_pkcs8_pem(LineEnding::LF)
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

#[cfg(test)]
mod tests {
    use super::*;

    const RFC_PUBLIC_PEM: &str = "-----BEGIN PUBLIC KEY-----\nMCowBQYDK2VwAyEAJrQLj5P/89iXES9+vFgrIy29clF9CC/oPPsw3c5D0bs=\n-----END PUBLIC KEY-----\n";
    const RFC_PRIVATE_PEM: &str = "-----BEGIN PRIVATE KEY-----\nMC4CAQAwBQYDK2VwBCIEIJ+DYvh6SEqVTm50DFtMDoQikTmiCqirVv9mWG9qfSnF\n-----END PRIVATE KEY-----\n";

    fn b64(bytes: &[u8]) -> String {
        base64::engine::general_purpose::STANDARD.encode(bytes)
    }

    #[test]
    fn raw_key_with_or_without_padding_and_whitespace() {
        let pem = parse_public_key(RFC_PUBLIC_PEM).unwrap();
        let raw = "  JrQLj5P/89iXES9+vFgrIy29clF9CC/oPPsw3c5D0bs=\n";
        assert_eq!(parse_public_key(raw).unwrap(), pem);
        assert_eq!(
            parse_public_key(raw.trim().trim_end_matches('=')).unwrap(),
            pem
        );
        assert_eq!(
            parse_public_key(&format!("\n\n{RFC_PUBLIC_PEM}\n")).unwrap(),
            pem
        );
        assert_eq!(keyid(&pem), keyid(&parse_public_key(raw).unwrap()));
    }

    /// A raw key pasted into a form needs the keyid its generator printed; a private seed
    /// pasted as the public key has another keyid and is refused; a PEM key needs none, and a
    /// keyid given for it must be its own.
    #[test]
    fn a_raw_key_is_confirmed_by_the_keyid_its_generator_printed() {
        // A key pair whose seed is also a curve point: pasted, it parses as a public key.
        let pair = (1..=u8::MAX)
            .map(|n| SigningKey::from_bytes(&[n; 32]))
            .find(|k| parse_public_key(&b64(&k.to_bytes())).is_ok())
            .expect("about half of all seeds are points");
        let printed = keyid(&pair.verifying_key());
        let raw = public_key_to_base64(&pair.verifying_key());
        let (key, form) = parse_public_key_form(&raw).unwrap();
        assert_eq!(form, KeyForm::Raw);
        assert_eq!(
            KeyConfirmation::pasted(None).check(&key, form),
            Err(KeyConfirmationError::Unconfirmed {
                derived: printed.clone()
            })
        );
        assert_eq!(
            KeyConfirmation::pasted(Some(" ")).check(&key, form),
            Err(KeyConfirmationError::Unconfirmed {
                derived: printed.clone()
            })
        );
        let with_printed = format!(" {printed}\n");
        assert_eq!(
            KeyConfirmation::pasted(Some(&with_printed)).check(&key, form),
            Ok(printed.clone())
        );
        // The seed itself, a curve point here, pasted as the public key.
        let seed = b64(&pair.to_bytes());
        let (as_point, form) = parse_public_key_form(&seed).expect("this seed is a point");
        let err = KeyConfirmation::pasted(Some(printed.as_str()))
            .check(&as_point, form)
            .unwrap_err();
        assert!(
            matches!(err, KeyConfirmationError::Mismatch { .. }),
            "{err}"
        );
        assert_ne!(err.derived(), &printed);
        assert!(err.to_string().contains("treat it as exposed"), "{err}");
        // A program's raw key without a keyid passes as before; with one, it must match.
        assert_eq!(
            KeyConfirmation::given(None).check(&key, KeyForm::Raw),
            Ok(printed.clone())
        );
        assert!(KeyConfirmation::given(Some("ed25519-x"))
            .check(&key, KeyForm::Raw)
            .is_err());
        // A PEM key is unambiguous.
        let (pem_key, pem_form) =
            parse_public_key_form(&public_key_to_pem(&pair.verifying_key())).unwrap();
        assert_eq!(pem_form, KeyForm::Pem);
        assert_eq!(
            KeyConfirmation::pasted(None).check(&pem_key, pem_form),
            Ok(printed.clone())
        );
        assert!(KeyConfirmation::pasted(Some("ed25519-x"))
            .check(&pem_key, pem_form)
            .is_err());
    }

    #[test]
    fn bad_inputs_have_their_own_errors() {
        assert_eq!(
            parse_public_key(RFC_PRIVATE_PEM),
            Err(KeyError::PrivateKeyGiven)
        );
        assert_eq!(
            parse_public_key("-----BEGIN CERTIFICATE-----\nMAA=\n-----END CERTIFICATE-----\n"),
            Err(KeyError::UnexpectedPemLabel("CERTIFICATE".to_owned()))
        );
        assert!(matches!(
            parse_public_key("-----BEGIN PUBLIC KEY-----\nMCowBQ\n-----END CERTIFICATE-----\n"),
            Err(KeyError::MalformedPem(_))
        ));
        assert!(matches!(
            parse_public_key("-----BEGIN PUBLIC KEY-----\nMAA=\n-----END PUBLIC KEY-----\n"),
            Err(KeyError::MalformedDer(_))
        ));
        // An X25519 SPKI (OID 1.3.101.110) of RFC 8410 section 10.1.
        let x25519 = "-----BEGIN PUBLIC KEY-----\nMCowBQYDK2VuAyEAGb9ECWmEzf6FQbrBZ9w7lshQhqowtrbLDFw4rXAxZuE=\n-----END PUBLIC KEY-----\n";
        assert_eq!(
            parse_public_key(x25519),
            Err(KeyError::NotEd25519("1.3.101.110".to_owned()))
        );
        assert_eq!(
            parse_public_key("not a key!"),
            Err(KeyError::NotPemOrBase64)
        );
        assert_eq!(
            parse_public_key(&b64(&[1; 31])),
            Err(KeyError::WrongLength(31))
        );
        assert_eq!(
            parse_public_key(&b64(&[1; 33])),
            Err(KeyError::WrongLength(33))
        );
        assert_eq!(
            parse_public_key(&b64(&[1; 64])),
            Err(KeyError::WrongLength(64))
        );
        // y = 2 is not the y-coordinate of a point on edwards25519.
        let mut not_a_point = [0u8; 32];
        not_a_point[0] = 2;
        assert_eq!(
            parse_public_key(&b64(&not_a_point)),
            Err(KeyError::InvalidPoint)
        );
        // The identity (y = 1) is a small-order point.
        let mut identity = [0u8; 32];
        identity[0] = 1;
        assert_eq!(parse_public_key(&b64(&identity)), Err(KeyError::WeakKey));
        assert!(KeyError::PrivateKeyGiven
            .to_string()
            .contains("must never leave your machine"));
    }

    /// Every form of private key a merchant may paste is refused as a private key, whether
    /// or not it decodes: PEM, OpenSSH, PuTTY, the PKCS#8 body without armour, the 64-byte
    /// secret key; a 64-byte value that is not a key pair stays a wrong length.
    #[test]
    fn private_key_material_in_every_form_is_refused_as_such() {
        let key = SigningKey::from_bytes(&[7; 32]);
        let mut keypair = key.to_bytes().to_vec();
        keypair.extend_from_slice(key.verifying_key().as_bytes());
        let body: String = signing_key_to_pem(&key)
            .lines()
            .filter(|l| !l.starts_with("-----"))
            .collect();
        let openssh = "-----BEGIN OPENSSH PRIVATE KEY-----\nb3BlbnNzaC1rZXktdjEAAAAABG5vbmUAAAAEbm9uZQAAAAAAAAABAAAAMwAAAAtzc2gtZW\nQyNTUxOQAAACBvdGhlciBieXRlcyBvZiBhIGtleSBwYWlyIGZvciB0ZXN0cw==\n-----END OPENSSH PRIVATE KEY-----\n";
        let putty = "PuTTY-User-Key-File-3: ssh-ed25519\nEncryption: none\nPublic-Lines: 2\n";
        let broken = "-----BEGIN PRIVATE KEY-----\nnot base64 at all\n";
        for input in [
            signing_key_to_pem(&key),
            openssh.to_string(),
            putty.to_string(),
            broken.to_string(),
            body,
            b64(&keypair),
        ] {
            assert!(looks_like_private_key(&input), "{input}");
            assert_eq!(
                parse_public_key(&input),
                Err(KeyError::PrivateKeyGiven),
                "{input}"
            );
        }
        let public = key.verifying_key();
        assert!(!looks_like_private_key(&public_key_to_pem(&public)));
        assert!(!looks_like_private_key(&public_key_to_base64(&public)));
        assert_eq!(
            parse_public_key(&b64(&[1; 64])),
            Err(KeyError::WrongLength(64))
        );
    }

    #[test]
    fn text_before_a_pem_block_is_ignored() {
        let pem = parse_public_key(RFC_PUBLIC_PEM).unwrap();
        assert_eq!(
            parse_public_key(&format!("Public key:\n{RFC_PUBLIC_PEM}")),
            Ok(pem)
        );
        // Found by the public_key fuzz target: the private key importer reads this, so the
        // public key parser must recognise it as a private key.
        let private = format!("*---BEGIN\n\n{RFC_PRIVATE_PEM}");
        assert!(parse_signing_key_pem(&private).is_ok());
        assert_eq!(parse_public_key(&private), Err(KeyError::PrivateKeyGiven));
    }

    #[test]
    fn private_key_import_errors() {
        assert_eq!(
            parse_signing_key_pem(RFC_PUBLIC_PEM).unwrap_err(),
            KeyError::UnexpectedPemLabel("PUBLIC KEY".to_owned())
        );
        assert!(matches!(
            parse_signing_key_pem("garbage"),
            Err(KeyError::MalformedPem(_))
        ));
        let key = parse_signing_key_pem(RFC_PRIVATE_PEM).unwrap();
        assert_eq!(
            keyid(&key.verifying_key()).as_str(),
            "ed25519-poqkLGiymh_W0uP6PZFw-dvez3QJT5SolqXBCW38r0U"
        );
    }
}
