//! Registered public keys through [`parse_public_key`] (PEM `PUBLIC KEY` or raw base64), and
//! PEM private keys through [`parse_signing_key_pem`].
//!
//! Properties:
//! - an accepted key is not weak, and its PEM, its base64 (with and without padding) and the
//!   input with whitespace around all parse to the same key; its `keyid` has the documented form;
//! - the first 32 bytes of the input, taken as a raw key, are accepted in base64 exactly when
//!   `ed25519-dalek` takes them for a non-weak point, and an SPKI PEM built around them (RFC
//!   8410) gives the same answer as the base64;
//! - an accepted private key round-trips through its PEM, and the same text is never accepted
//!   as a public key (it is refused as a private key);
//! - the answers are deterministic.

use base64::engine::general_purpose::{STANDARD, STANDARD_NO_PAD};
use base64::Engine as _;
use ed25519_dalek::VerifyingKey;
use payments_core::auth::keys::{
    keyid, parse_public_key, parse_signing_key_pem, public_key_to_base64, public_key_to_pem,
    signing_key_to_pem, KeyError,
};

/// The DER prefix of an Ed25519 SubjectPublicKeyInfo (RFC 8410 section 10.1).
const SPKI_PREFIX: [u8; 12] = [
    0x30, 0x2a, 0x30, 0x05, 0x06, 0x03, 0x2b, 0x65, 0x70, 0x03, 0x21, 0x00,
];

/// Runs the target on the fuzzer's bytes `data`; panics when a property of this module's
/// parser does not hold (see the module's documentation for the input format and the
/// properties).
pub fn check(data: &[u8]) {
    if let Some(raw) = data.first_chunk::<32>() {
        raw_key(raw);
    }
    let Ok(input) = std::str::from_utf8(data) else {
        return;
    };
    let result = parse_public_key(input);
    assert_eq!(result, parse_public_key(input), "deterministic");
    if let Ok(key) = &result {
        accepted(key);
        assert_eq!(
            parse_public_key(&format!(" \n\t{input}\r\n ")).as_ref(),
            Ok(key),
            "whitespace around the key matters"
        );
    }
    if let Ok(private) = parse_signing_key_pem(input) {
        let again = parse_signing_key_pem(&signing_key_to_pem(&private))
            .expect("an exported private key imports");
        assert_eq!(again.to_bytes(), private.to_bytes());
        assert_eq!(
            result,
            Err(KeyError::PrivateKeyGiven),
            "a private key PEM is not refused as a private key"
        );
    }
}

fn accepted(key: &VerifyingKey) {
    assert!(!key.is_weak(), "a weak key was accepted");
    for form in [
        public_key_to_pem(key),
        public_key_to_base64(key),
        STANDARD_NO_PAD.encode(key.as_bytes()),
    ] {
        assert_eq!(
            parse_public_key(&form).as_ref(),
            Ok(key),
            "an exported form does not parse back: {form}"
        );
    }
    let id = keyid(key);
    let thumbprint = id
        .as_str()
        .strip_prefix("ed25519-")
        .expect("keyid starts with ed25519-");
    assert_eq!(thumbprint.len(), 43, "{id:?}");
    assert!(
        thumbprint
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_'),
        "{id:?}"
    );
}

fn raw_key(raw: &[u8; 32]) {
    let expected = VerifyingKey::from_bytes(raw).ok().filter(|k| !k.is_weak());
    let from_base64 = parse_public_key(&STANDARD.encode(raw));
    assert_eq!(
        from_base64.as_ref().ok(),
        expected.as_ref(),
        "raw key {raw:02x?}: {from_base64:?}"
    );
    let der = [&SPKI_PREFIX[..], raw].concat();
    let pem = format!(
        "-----BEGIN PUBLIC KEY-----\n{}\n-----END PUBLIC KEY-----\n",
        STANDARD.encode(der)
    );
    assert_eq!(
        parse_public_key(&pem),
        from_base64,
        "PEM and base64 disagree on {raw:02x?}"
    );
    if let Some(key) = expected {
        accepted(&key);
    }
}
