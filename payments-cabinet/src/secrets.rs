//! The cabinet's secrets: argon2id password hashes, RFC 6238 TOTP codes, recovery codes and the
//! random tokens of sessions and invitations. Randomness comes from the core's port.

use argon2::password_hash::{PasswordHash, PasswordHasher, PasswordVerifier, SaltString};
use argon2::{Algorithm, Argon2, Params, Version};
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use base64::Engine;
use payments_core::RandomSource;
use sha2::{Digest, Sha256};
use subtle::ConstantTimeEq;
use totp_rs::TOTP;

/// The argon2id cost: 19 MiB, 2 passes, 1 lane (the OWASP password storage recommendation).
pub const ARGON2_MEMORY_KIB: u32 = 19 * 1024;
/// argon2id passes.
pub const ARGON2_PASSES: u32 = 2;

/// Shortest accepted password.
pub const PASSWORD_MIN_CHARS: usize = 12;
/// Longest accepted password (argon2 takes any length; this bounds the work per request).
pub const PASSWORD_MAX_CHARS: usize = 256;

/// TOTP: 30-second steps.
pub const TOTP_STEP_SECS: u64 = 30;
/// TOTP: 6 digits.
pub const TOTP_DIGITS: usize = 6;
/// The TOTP key length (160 bits, RFC 4226's recommendation).
pub const TOTP_KEY_BYTES: usize = 20;

/// Recovery codes issued at a time.
pub const RECOVERY_CODES: usize = 10;

fn argon2() -> Argon2<'static> {
    let params = Params::new(ARGON2_MEMORY_KIB, ARGON2_PASSES, 1, None)
        .expect("the fixed argon2 parameters are valid");
    Argon2::new(Algorithm::Argon2id, Version::V0x13, params)
}

/// Why a new password is refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum PasswordRule {
    /// Too short.
    #[error("the password must have at least {PASSWORD_MIN_CHARS} characters")]
    TooShort,
    /// Too long.
    #[error("the password must have at most {PASSWORD_MAX_CHARS} characters")]
    TooLong,
    /// The same as the e-mail address.
    #[error("the password must not be the e-mail address")]
    IsEmail,
}

/// Checks a new password: 12 to 256 characters, not the e-mail address.
pub fn check_new_password(password: &str, email: &str) -> Result<(), PasswordRule> {
    let n = password.chars().count();
    if n < PASSWORD_MIN_CHARS {
        return Err(PasswordRule::TooShort);
    }
    if n > PASSWORD_MAX_CHARS {
        return Err(PasswordRule::TooLong);
    }
    if password.trim().eq_ignore_ascii_case(email.trim()) {
        return Err(PasswordRule::IsEmail);
    }
    Ok(())
}

/// The argon2id PHC string of `password` with a 16-byte salt from `rng`. CPU-heavy (tens of
/// milliseconds): call it off the async threads.
pub fn hash_password(password: &str, rng: &dyn RandomSource) -> String {
    let salt: [u8; 16] = payments_core::random::bytes(rng);
    let salt = SaltString::encode_b64(&salt).expect("16 bytes encode as a salt");
    argon2()
        .hash_password(password.as_bytes(), &salt)
        .expect("argon2id hashes any password up to 4 GiB")
        .to_string()
}

/// A PHC string of the same cost for a password nobody has: verified against when the e-mail
/// is unknown, so that an unknown e-mail takes as long as a wrong password.
pub fn decoy_hash() -> &'static str {
    static DECOY: std::sync::OnceLock<String> = std::sync::OnceLock::new();
    DECOY.get_or_init(|| {
        struct Zero;
        impl RandomSource for Zero {
            fn fill(&self, buf: &mut [u8]) {
                buf.fill(0x5a);
            }
        }
        hash_password("no password matches this decoy", &Zero)
    })
}

/// Whether `password` matches the PHC string `stored` (its own parameters are used). A
/// malformed stored string matches nothing. CPU-heavy like [`hash_password`].
pub fn verify_password(password: &str, stored: &str) -> bool {
    match PasswordHash::new(stored) {
        Ok(parsed) => argon2()
            .verify_password(password.as_bytes(), &parsed)
            .is_ok(),
        Err(_) => false,
    }
}

/// A random token for a cookie or a link: 32 bytes, base64url.
pub fn random_token(rng: &dyn RandomSource) -> String {
    let bytes: [u8; 32] = payments_core::random::bytes(rng);
    URL_SAFE_NO_PAD.encode(bytes)
}

/// The SHA-256 of a token as stored (a copy of the database gives no usable token).
pub fn token_hash(token: &str) -> [u8; 32] {
    Sha256::digest(token.as_bytes()).into()
}

/// A new TOTP key.
pub fn new_totp_key(rng: &dyn RandomSource) -> Vec<u8> {
    let key: [u8; TOTP_KEY_BYTES] = payments_core::random::bytes(rng);
    key.to_vec()
}

/// A TOTP key from its base32 text (as stored, before sealing).
pub fn totp_key_from_base32(text: &str) -> Option<Vec<u8>> {
    totp_rs::Secret::Encoded(text.to_string()).to_bytes().ok()
}

/// The base32 text of a TOTP key (what an authenticator accepts typed in).
pub fn totp_key_base32(key: &[u8]) -> String {
    totp_rs::Secret::Raw(key.to_vec()).to_encoded().to_string()
}

fn totp(key: &[u8], issuer: &str, account: &str) -> Option<TOTP> {
    TOTP::new(
        totp_rs::Algorithm::SHA1,
        TOTP_DIGITS,
        1,
        TOTP_STEP_SECS,
        key.to_vec(),
        Some(issuer.replace(':', " ")),
        account.replace(':', " "),
    )
    .ok()
}

/// The `otpauth://totp/...` URI of a key (RFC 6238 parameters: SHA-1, 6 digits, 30 s).
pub fn otpauth_uri(key: &[u8], issuer: &str, account: &str) -> String {
    totp(key, issuer, account)
        .map(|t| t.get_url())
        .unwrap_or_default()
}

/// The code of `key` at time step `step`.
pub fn totp_code(key: &[u8], step: u64) -> String {
    totp(key, "x", "x")
        .map(|t| t.generate(step.saturating_mul(TOTP_STEP_SECS)))
        .unwrap_or_default()
}

/// The time step of a unix time.
pub fn totp_step(unix_secs: i64) -> u64 {
    u64::try_from(unix_secs).unwrap_or(0) / TOTP_STEP_SECS
}

/// `code` as typed (spaces and hyphens ignored) if it is six digits.
pub fn normalise_code(code: &str) -> Option<String> {
    let digits: String = code
        .chars()
        .filter(|c| !c.is_whitespace() && *c != '-')
        .collect();
    (digits.len() == TOTP_DIGITS && digits.bytes().all(|b| b.is_ascii_digit())).then_some(digits)
}

/// The time step, of the current one and one on either side (RFC 6238 section 5.2's
/// tolerance), whose code is `code`; `None` if none is. Compared in constant time.
pub fn matching_step(key: &[u8], code: &str, now_unix_secs: i64) -> Option<u64> {
    let code = normalise_code(code)?;
    let now = totp_step(now_unix_secs);
    let mut found = None;
    for step in [now.saturating_sub(1), now, now + 1] {
        let expected = totp_code(key, step);
        if bool::from(expected.as_bytes().ct_eq(code.as_bytes())) && found.is_none() {
            found = Some(step);
        }
    }
    found
}

/// The alphabet of recovery codes: lower-case letters and digits without look-alikes.
const RECOVERY_ALPHABET: &[u8] = b"abcdefghjkmnpqrstuvwxyz23456789";

/// [`RECOVERY_CODES`] new recovery codes, `xxxx-xxxx-xxxx` (about 59 bits each).
pub fn new_recovery_codes(rng: &dyn RandomSource) -> Vec<String> {
    (0..RECOVERY_CODES)
        .map(|_| {
            let bytes: [u8; 12] = payments_core::random::bytes(rng);
            let chars: Vec<char> = bytes
                .iter()
                // 256 = 8 * 31 + 8: a small bias, irrelevant at 59 bits.
                .map(|b| char::from(RECOVERY_ALPHABET[usize::from(*b) % RECOVERY_ALPHABET.len()]))
                .collect();
            chars
                .chunks(4)
                .map(|c| c.iter().collect::<String>())
                .collect::<Vec<_>>()
                .join("-")
        })
        .collect()
}

/// The SHA-256 of a recovery code as typed: case, spaces and hyphens ignored. Recovery codes
/// are random (about 59 bits), so a fast hash is enough; sign-in attempts are throttled.
pub fn recovery_code_hash(code: &str) -> [u8; 32] {
    let normal: String = code
        .chars()
        .filter(|c| c.is_ascii_alphanumeric())
        .map(|c| c.to_ascii_lowercase())
        .collect();
    Sha256::digest(normal.as_bytes()).into()
}

#[cfg(test)]
mod tests {
    use super::*;

    /// RFC 6238 appendix B: the SHA-1 seed "12345678901234567890", 8-digit codes; the 6-digit
    /// codes are their last six digits (RFC 4226's truncation is modulo 10^digits).
    #[test]
    fn totp_codes_are_those_of_rfc_6238() {
        let key = b"12345678901234567890";
        for (time, eight) in [
            (59u64, "94287082"),
            (1_111_111_109, "07081804"),
            (1_111_111_111, "14050471"),
            (1_234_567_890, "89005924"),
            (2_000_000_000, "69279037"),
            (20_000_000_000, "65353130"),
        ] {
            assert_eq!(totp_code(key, time / 30), eight[2..], "T = {time}");
        }
    }

    #[test]
    fn a_code_matches_its_step_and_one_either_side() {
        let key = b"12345678901234567890";
        let code = totp_code(key, 1000);
        assert_eq!(matching_step(key, &code, 1000 * 30 + 7), Some(1000));
        assert_eq!(matching_step(key, &code, 1001 * 30), Some(1000));
        assert_eq!(matching_step(key, &code, 999 * 30), Some(1000));
        assert_eq!(matching_step(key, &code, 1002 * 30), None);
        assert_eq!(matching_step(key, &code, 998 * 30), None);
        let spaced = format!("{} {}", &code[..3], &code[3..]);
        assert_eq!(matching_step(key, &spaced, 1000 * 30), Some(1000));
        assert_eq!(matching_step(key, "12345", 1000 * 30), None);
        assert_eq!(matching_step(key, "abcdef", 1000 * 30), None);
    }

    #[test]
    fn the_otpauth_uri_names_issuer_account_and_parameters() {
        let uri = otpauth_uri(b"12345678901234567890", "Payments", "amy@shop.example");
        assert!(
            uri.starts_with("otpauth://totp/Payments:amy%40shop.example?"),
            "{uri}"
        );
        assert!(
            uri.contains("secret=GEZDGNBVGY3TQOJQGEZDGNBVGY3TQOJQ"),
            "{uri}"
        );
        assert!(uri.contains("issuer=Payments"), "{uri}");
        assert_eq!(
            totp_key_base32(b"12345678901234567890"),
            "GEZDGNBVGY3TQOJQGEZDGNBVGY3TQOJQ"
        );
        assert_eq!(
            totp_key_from_base32("GEZDGNBVGY3TQOJQGEZDGNBVGY3TQOJQ").as_deref(),
            Some(&b"12345678901234567890"[..])
        );
    }

    #[test]
    fn passwords_hash_as_argon2id_and_verify() {
        struct Counter(std::sync::atomic::AtomicU8);
        impl RandomSource for Counter {
            fn fill(&self, buf: &mut [u8]) {
                for b in buf {
                    *b = self.0.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                }
            }
        }
        let rng = Counter(Default::default());
        let stored = hash_password("correct horse battery", &rng);
        assert!(
            stored.starts_with("$argon2id$v=19$m=19456,t=2,p=1$"),
            "{stored}"
        );
        assert!(verify_password("correct horse battery", &stored));
        assert!(!verify_password("correct horse batterY", &stored));
        assert!(!verify_password("correct horse battery", "not a hash"));
        assert_ne!(
            hash_password("correct horse battery", &rng),
            stored,
            "salted"
        );
        assert!(!verify_password("anything", decoy_hash()));
    }

    #[test]
    fn password_rules() {
        assert_eq!(
            check_new_password("short", "a@b.c"),
            Err(PasswordRule::TooShort)
        );
        assert_eq!(
            check_new_password("amy@shop.example", "amy@shop.example"),
            Err(PasswordRule::IsEmail)
        );
        assert_eq!(
            check_new_password(&"x".repeat(257), "a@b.c"),
            Err(PasswordRule::TooLong)
        );
        assert_eq!(check_new_password("twelve chars", "a@b.c"), Ok(()));
        assert_eq!(
            check_new_password("ёжикёжикёжик", "a@b.c"),
            Ok(()),
            "characters, not bytes"
        );
    }

    #[test]
    fn recovery_codes_are_ten_distinct_and_hash_as_typed() {
        struct Counter(std::sync::atomic::AtomicU8);
        impl RandomSource for Counter {
            fn fill(&self, buf: &mut [u8]) {
                for b in buf {
                    *b = self.0.fetch_add(7, std::sync::atomic::Ordering::Relaxed);
                }
            }
        }
        let codes = new_recovery_codes(&Counter(Default::default()));
        assert_eq!(codes.len(), 10);
        let unique: std::collections::BTreeSet<_> = codes.iter().collect();
        assert_eq!(unique.len(), 10);
        for c in &codes {
            assert_eq!(c.len(), 14, "{c}");
            assert_eq!(c.matches('-').count(), 2, "{c}");
        }
        let code = &codes[0];
        assert_eq!(
            recovery_code_hash(&code.to_uppercase().replace('-', " ")),
            recovery_code_hash(code)
        );
        assert_ne!(recovery_code_hash(&codes[1]), recovery_code_hash(code));
    }
}
