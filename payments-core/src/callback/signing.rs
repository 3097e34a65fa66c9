//! Callback secrets, their rotation, and the `X-Callback-Signature` header.
//!
//! ```text
//! signed_payload = X-Callback-Timestamp + "." + raw_request_body
//! signature = lowercase_hex( HMAC-SHA256( key = entire secret string as UTF-8, message = signed_payload ) )
//! ```
//!
//! After a rotation the previous secret also signs for [`ROTATION_OVERLAP`], so the header
//! carries two `v1=` values; at most two secrets are valid at a time.

use std::fmt;
use std::time::Duration;

use base64::Engine as _;
use hmac::{Hmac, Mac};
use serde::{Deserialize, Deserializer, Serialize, Serializer};
use sha2::Sha256;

use crate::{RandomSource, Timestamp};

/// The header carrying the event's `event_id`.
pub const EVENT_ID_HEADER: &str = "X-Callback-Event-Id";
/// The header carrying the Unix time of the attempt, in seconds.
pub const TIMESTAMP_HEADER: &str = "X-Callback-Timestamp";
/// The header carrying `v1=<hex>` (or `v1=<hex>,v1=<hex>` after a rotation).
pub const SIGNATURE_HEADER: &str = "X-Callback-Signature";

/// How long the previous secret keeps signing after a rotation.
pub const ROTATION_OVERLAP: Duration = Duration::from_secs(24 * 60 * 60);

/// The prefix of every callback secret.
pub const SECRET_PREFIX: &str = "whsec_";

/// Random bytes in a generated secret.
const GENERATED_SECRET_BYTES: usize = 32;

/// The least number of characters after the prefix of a secret accepted by
/// [`CallbackSecret::parse`]; a generated secret has 44.
pub const MIN_SECRET_CHARS: usize = 32;

type HmacSha256 = Hmac<Sha256>;

/// Why a string is not a callback secret.
#[non_exhaustive]
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum CallbackSecretError {
    /// The string does not start with `whsec_`.
    #[error("a callback secret starts with \"whsec_\"")]
    MissingPrefix,
    /// Too few characters after the prefix.
    #[error("a callback secret has at least {MIN_SECRET_CHARS} characters after \"whsec_\"")]
    TooShort,
    /// A character other than printable ASCII without space.
    #[error("a callback secret consists of printable ASCII characters without spaces")]
    InvalidCharacter,
}

/// A callback secret: `whsec_` followed by random bytes in base64. The HMAC key is the whole
/// string, prefix included, nothing decoded.
///
/// `Debug` prints `whsec_***`; the value is only reachable through [`CallbackSecret::expose`]
/// and through serialisation (which exists for the store).
#[derive(Clone, PartialEq, Eq)]
pub struct CallbackSecret(String);

impl CallbackSecret {
    /// A new secret: `whsec_` and 32 bytes from `rng` in standard base64 (with padding).
    pub fn generate(rng: &dyn RandomSource) -> CallbackSecret {
        let mut bytes = [0u8; GENERATED_SECRET_BYTES];
        rng.fill(&mut bytes);
        let encoded = base64::engine::general_purpose::STANDARD.encode(bytes);
        CallbackSecret(format!("{SECRET_PREFIX}{encoded}"))
    }

    /// Accepts a secret as issued: the `whsec_` prefix, then at least [`MIN_SECRET_CHARS`]
    /// printable ASCII characters without spaces. The rest is not decoded.
    pub fn parse(s: &str) -> Result<CallbackSecret, CallbackSecretError> {
        let rest = s
            .strip_prefix(SECRET_PREFIX)
            .ok_or(CallbackSecretError::MissingPrefix)?;
        if !rest.bytes().all(|b| b.is_ascii_graphic()) {
            return Err(CallbackSecretError::InvalidCharacter);
        }
        if rest.len() < MIN_SECRET_CHARS {
            return Err(CallbackSecretError::TooShort);
        }
        Ok(CallbackSecret(s.to_owned()))
    }

    /// [`CallbackSecret::parse`] for an owned string.
    pub fn from_string(s: String) -> Result<CallbackSecret, CallbackSecretError> {
        Self::parse(&s)?;
        Ok(CallbackSecret(s))
    }

    /// The secret string, to display once when issued or to sign with.
    pub fn expose(&self) -> &str {
        &self.0
    }

    /// The HMAC over `"{timestamp}." + body` keyed with this secret.
    fn mac(&self, timestamp: i64, body: &[u8]) -> HmacSha256 {
        let mut mac =
            HmacSha256::new_from_slice(self.0.as_bytes()).expect("HMAC accepts keys of any length");
        mac.update(timestamp.to_string().as_bytes());
        mac.update(b".");
        mac.update(body);
        mac
    }

    /// The 32-byte HMAC-SHA256 tag of `"{timestamp}." + body`.
    pub(crate) fn tag(&self, timestamp: i64, body: &[u8]) -> [u8; 32] {
        self.mac(timestamp, body).finalize().into_bytes().into()
    }
}

impl fmt::Debug for CallbackSecret {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("whsec_***")
    }
}

impl Serialize for CallbackSecret {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(&self.0)
    }
}

impl<'de> Deserialize<'de> for CallbackSecret {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        CallbackSecret::from_string(String::deserialize(d)?).map_err(serde::de::Error::custom)
    }
}

/// `lowercase_hex(HMAC-SHA256(key = secret string, message = "{timestamp}." + body))`, 64
/// characters.
pub fn sign_payload(secret: &CallbackSecret, timestamp: i64, body: &[u8]) -> String {
    hex::encode(secret.tag(timestamp, body))
}

/// The `X-Callback-Signature` value: `v1=<hex>` for each secret, in the order given, joined by
/// commas. With no secrets it is empty, which every receiver rejects;
/// [`CallbackSecrets::signing_secrets`] always yields at least one.
pub fn signature_header(secrets: &[&CallbackSecret], timestamp: i64, body: &[u8]) -> String {
    secrets
        .iter()
        .map(|secret| format!("v1={}", sign_payload(secret, timestamp, body)))
        .collect::<Vec<_>>()
        .join(",")
}

/// A secret with the time it was issued.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct DatedSecret {
    /// The secret.
    pub secret: CallbackSecret,
    /// When it was issued (for the current secret: when the rotation took place).
    pub created_at: Timestamp,
}

/// A project's callback secrets: the current one and, for [`ROTATION_OVERLAP`] after a
/// rotation, the previous one. Serialisable so that a store can persist it as it is.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct CallbackSecrets {
    current: DatedSecret,
    previous: Option<DatedSecret>,
}

impl CallbackSecrets {
    /// The first secret of a project, issued at `created_at`.
    pub fn new(secret: CallbackSecret, created_at: Timestamp) -> CallbackSecrets {
        CallbackSecrets {
            current: DatedSecret { secret, created_at },
            previous: None,
        }
    }

    /// Issues `new` at `now`: the current secret becomes the previous one and keeps signing
    /// until `now + ROTATION_OVERLAP`; the secret before it, if any, is dropped (so a second
    /// rotation within 24 hours drops the oldest and at most two secrets are valid).
    pub fn rotate(&mut self, new: CallbackSecret, now: Timestamp) {
        let previous = std::mem::replace(
            &mut self.current,
            DatedSecret {
                secret: new,
                created_at: now,
            },
        );
        self.previous = Some(previous);
    }

    /// The current secret and when it was issued.
    pub fn current(&self) -> &DatedSecret {
        &self.current
    }

    /// The previous secret, if it has not been dropped; it signs only while
    /// [`CallbackSecrets::previous_valid_until`] is in the future.
    pub fn previous(&self) -> Option<&DatedSecret> {
        self.previous.as_ref()
    }

    /// The end of the overlap: the previous secret signs while `now` is before this instant.
    pub fn previous_valid_until(&self) -> Option<Timestamp> {
        self.previous
            .as_ref()
            .map(|_| self.current.created_at + ROTATION_OVERLAP)
    }

    /// The secrets that sign at `now`, newest first: the current one, and the previous one
    /// while `now < rotated_at + ROTATION_OVERLAP`.
    pub fn signing_secrets(&self, now: Timestamp) -> Vec<&CallbackSecret> {
        let mut secrets = vec![&self.current.secret];
        if let (Some(previous), Some(until)) = (&self.previous, self.previous_valid_until()) {
            if now < until {
                secrets.push(&previous.secret);
            }
        }
        secrets
    }

    /// Forgets the previous secret once its overlap is over at `now`, so the store no longer
    /// keeps it. Signing never uses an expired secret whether or not this is called.
    pub fn prune(&mut self, now: Timestamp) {
        if self
            .previous_valid_until()
            .is_some_and(|until| now >= until)
        {
            self.previous = None;
        }
    }

    /// The `X-Callback-Timestamp` and `X-Callback-Signature` values of an attempt made at `now`.
    #[must_use]
    pub fn sign_attempt(&self, now: Timestamp, body: &[u8]) -> AttemptSignature {
        let timestamp = now.unix_secs();
        AttemptSignature {
            timestamp,
            signature: signature_header(&self.signing_secrets(now), timestamp, body),
        }
    }
}

impl CallbackSecrets {
    /// The `X-Callback-Timestamp` and `X-Callback-Signature` an attempt made at `at` was sent
    /// with, recomputed from the secrets held now (what the cabinet shows of a delivered
    /// request; the secrets themselves are never shown): exact for an attempt made since the
    /// current secret was issued (with the previous one during its overlap), and for one made
    /// while the previous secret signed alone; `None` for an attempt signed by a secret no
    /// longer held (before the previous one, or during its own overlap, whose older secret a
    /// rotation dropped).
    pub fn signature_at(&self, at: Timestamp, body: &[u8]) -> Option<AttemptSignature> {
        if at >= self.current.created_at {
            return Some(self.sign_attempt(at, body));
        }
        let previous = self.previous.as_ref()?;
        if at >= previous.created_at + ROTATION_OVERLAP {
            let timestamp = at.unix_secs();
            return Some(AttemptSignature {
                timestamp,
                signature: signature_header(&[&previous.secret], timestamp, body),
            });
        }
        None
    }
}

/// The signature headers of one delivery attempt.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AttemptSignature {
    /// `X-Callback-Timestamp`: Unix time of the attempt, seconds.
    pub timestamp: i64,
    /// `X-Callback-Signature`: `v1=<hex>` or `v1=<hex>,v1=<hex>`.
    pub signature: String,
}

impl AttemptSignature {
    /// The header lines of the callback `POST` of the event `event_id` signed so, in the order
    /// the dispatcher sends them: `Content-Type: application/json`, [`EVENT_ID_HEADER`],
    /// [`TIMESTAMP_HEADER`], [`SIGNATURE_HEADER`].
    pub fn headers(&self, event_id: &str) -> [(&'static str, String); 4] {
        [
            ("Content-Type", "application/json".to_owned()),
            (EVENT_ID_HEADER, event_id.to_owned()),
            (TIMESTAMP_HEADER, self.timestamp.to_string()),
            (SIGNATURE_HEADER, self.signature.clone()),
        ]
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Fills buffers with `start, start+1, ...`.
    struct CountingRandom(u8);

    impl RandomSource for CountingRandom {
        fn fill(&self, buf: &mut [u8]) {
            for (i, b) in buf.iter_mut().enumerate() {
                *b = self.0.wrapping_add(i as u8);
            }
        }
    }

    // Computed independently with Python's hmac module (see the test below).
    const SECRET_A: &str = "whsec_AAECAwQFBgcICQoLDA0ODxAREhMUFRYXGBkaGxwdHh8=";
    const SECRET_B: &str = "whsec_ICEiIyQlJicoKSorLC0uLzAxMjM0NTY3ODk6Ozw9Pj8=";
    const BODY: &[u8] =
        br#"{"id":"7d9f0c1e-2b3a-4c5d-8e6f-7a8b9c0d1e2f","status":"completed","amount":1500.00}"#;
    const SIG_A: &str = "72334a493f88df92aca73ec4752987512c9fffac9d726362fb6dc8e0a004373d";
    const SIG_B: &str = "4b5af83c2811fc2daf0d6cdac4220321403909f6d99301831d52c77860c751c2";

    fn secret(s: &str) -> CallbackSecret {
        CallbackSecret::parse(s).expect("test secrets are well-formed")
    }

    #[test]
    fn a_past_attempt_is_signed_again_only_with_the_secrets_it_was_signed_with() {
        let t0 = Timestamp::from_unix_millis(1_790_000_000_000);
        let day = ROTATION_OVERLAP;
        let mut ring = CallbackSecrets::new(secret(SECRET_A), t0);
        let at = t0 + Duration::from_secs(60);
        assert_eq!(
            ring.signature_at(at, BODY),
            Some(ring.sign_attempt(at, BODY))
        );
        assert_eq!(
            ring.signature_at(t0 - Duration::from_secs(1), BODY),
            None,
            "before any secret"
        );
        // A rotation three days later: A alone signed on day 2, both during the overlap.
        let rotated = t0 + day * 3;
        ring.rotate(secret(SECRET_B), rotated);
        let day2 = t0 + day * 2;
        let alone = ring.signature_at(day2, BODY).expect("A signed alone");
        assert_eq!(
            alone.signature,
            format!(
                "v1={}",
                sign_payload(&secret(SECRET_A), day2.unix_secs(), BODY)
            )
        );
        let both = ring
            .signature_at(rotated + Duration::from_secs(5), BODY)
            .expect("the overlap");
        assert_eq!(both.signature.matches("v1=").count(), 2);
        // During A's own first day an older secret (dropped by the rotation) may have signed
        // beside it: not shown rather than shown wrong.
        let mut again = CallbackSecrets::new(secret(SECRET_A), t0 + day);
        again.rotate(secret(SECRET_B), t0 + day + Duration::from_secs(3600));
        assert_eq!(
            again.signature_at(t0 + day + Duration::from_secs(60), BODY),
            None
        );
    }

    #[test]
    fn generates_prefix_and_base64_of_32_bytes() {
        let a = CallbackSecret::generate(&CountingRandom(0));
        assert_eq!(a.expose(), SECRET_A);
        let b = CallbackSecret::generate(&CountingRandom(32));
        assert_eq!(b.expose(), SECRET_B);
        assert_eq!(CallbackSecret::parse(a.expose()), Ok(a));
    }

    #[test]
    fn debug_never_shows_the_secret() {
        let s = secret(SECRET_A);
        assert_eq!(format!("{s:?}"), "whsec_***");
        let secrets = CallbackSecrets::new(s, Timestamp::from_unix_secs(0));
        assert!(!format!("{secrets:?}").contains("AAEC"));
    }

    #[test]
    fn parse_requires_the_prefix_and_enough_printable_characters() {
        assert_eq!(
            CallbackSecret::parse("AAECAwQFBgcICQoLDA0ODxAREhMUFRYXGBkaGxwdHh8="),
            Err(CallbackSecretError::MissingPrefix)
        );
        assert_eq!(
            CallbackSecret::parse("WHSEC_AAECAwQFBgcICQoLDA0ODxAREhMUFRYXGBkaGxwdHh8="),
            Err(CallbackSecretError::MissingPrefix)
        );
        assert_eq!(
            CallbackSecret::parse("whsec_short"),
            Err(CallbackSecretError::TooShort)
        );
        assert_eq!(
            CallbackSecret::parse("whsec_AAECAwQFBgcICQoLDA0ODxAREhMUFRYXGBkaGxwdHh8= "),
            Err(CallbackSecretError::InvalidCharacter)
        );
        assert_eq!(
            CallbackSecret::from_string(format!("whsec_{}", "x".repeat(32)))
                .map(|s| s.expose().len()),
            Ok(38)
        );
        assert_eq!(
            CallbackSecret::from_string(format!("whsec_{}", "x".repeat(31))),
            Err(CallbackSecretError::TooShort)
        );
    }

    #[test]
    fn signs_with_the_whole_secret_string_as_key() {
        // python3 -c 'import hmac,hashlib; print(hmac.new(
        //   b"whsec_AAECAwQFBgcICQoLDA0ODxAREhMUFRYXGBkaGxwdHh8=",
        //   b"1700000000." + BODY, hashlib.sha256).hexdigest())'
        assert_eq!(sign_payload(&secret(SECRET_A), 1_700_000_000, BODY), SIG_A);
        assert_eq!(sign_payload(&secret(SECRET_B), 1_700_000_000, BODY), SIG_B);
        // The timestamp is part of the message.
        assert_ne!(sign_payload(&secret(SECRET_A), 1_700_000_001, BODY), SIG_A);
    }

    #[test]
    fn header_lists_one_v1_value_per_secret_in_order() {
        let (a, b) = (secret(SECRET_A), secret(SECRET_B));
        assert_eq!(
            signature_header(&[&a], 1_700_000_000, BODY),
            format!("v1={SIG_A}")
        );
        assert_eq!(
            signature_header(&[&b, &a], 1_700_000_000, BODY),
            format!("v1={SIG_B},v1={SIG_A}")
        );
    }

    #[test]
    fn rotation_signs_twice_for_24_hours_then_once() {
        let t0 = Timestamp::from_unix_secs(1_700_000_000);
        let (a, b) = (secret(SECRET_A), secret(SECRET_B));
        let mut secrets = CallbackSecrets::new(a.clone(), t0);
        assert_eq!(secrets.signing_secrets(t0), vec![&a]);

        let rotated = t0 + Duration::from_secs(3600);
        secrets.rotate(b.clone(), rotated);
        assert_eq!(
            secrets.previous_valid_until(),
            Some(rotated + ROTATION_OVERLAP)
        );
        assert_eq!(secrets.signing_secrets(rotated), vec![&b, &a]);
        let last_ms = rotated + ROTATION_OVERLAP - Duration::from_millis(1);
        assert_eq!(secrets.signing_secrets(last_ms), vec![&b, &a]);
        assert_eq!(
            secrets.sign_attempt(rotated, BODY),
            AttemptSignature {
                timestamp: 1_700_003_600,
                signature: signature_header(&[&b, &a], 1_700_003_600, BODY),
            }
        );
        let over = rotated + ROTATION_OVERLAP;
        assert_eq!(secrets.signing_secrets(over), vec![&b]);
        assert_eq!(
            secrets.sign_attempt(over, BODY).signature,
            format!("v1={}", sign_payload(&b, over.unix_secs(), BODY))
        );

        secrets.prune(last_ms);
        assert!(secrets.previous().is_some());
        secrets.prune(over);
        assert_eq!(secrets.previous(), None);
        assert_eq!(secrets.signing_secrets(over), vec![&b]);
    }

    #[test]
    fn second_rotation_within_24_hours_drops_the_oldest() {
        let t0 = Timestamp::from_unix_secs(1_700_000_000);
        let (a, b) = (secret(SECRET_A), secret(SECRET_B));
        let c = CallbackSecret::generate(&CountingRandom(64));
        let mut secrets = CallbackSecrets::new(a.clone(), t0);
        secrets.rotate(b.clone(), t0 + Duration::from_secs(60));
        let second = t0 + Duration::from_secs(2 * 3600);
        secrets.rotate(c.clone(), second);
        assert_eq!(secrets.signing_secrets(second), vec![&c, &b]);
        assert!(!secrets.signing_secrets(second).contains(&&a));
        // The overlap of `b` runs from the second rotation.
        assert_eq!(
            secrets.signing_secrets(second + ROTATION_OVERLAP - Duration::from_secs(1)),
            vec![&c, &b]
        );
        assert_eq!(secrets.signing_secrets(second + ROTATION_OVERLAP), vec![&c]);
    }

    #[test]
    fn persists_through_serde() {
        let t0 = Timestamp::from_unix_secs(1_700_000_000);
        let mut secrets = CallbackSecrets::new(secret(SECRET_A), t0);
        secrets.rotate(secret(SECRET_B), t0 + Duration::from_secs(60));
        let json = serde_json::to_string(&secrets).expect("serialisable");
        assert_eq!(
            json,
            format!(
                "{{\"current\":{{\"secret\":\"{SECRET_B}\",\"created_at\":\"2023-11-14T22:14:20.000Z\"}},\
                 \"previous\":{{\"secret\":\"{SECRET_A}\",\"created_at\":\"2023-11-14T22:13:20.000Z\"}}}}"
            )
        );
        let back: CallbackSecrets = serde_json::from_str(&json).expect("round trip");
        assert_eq!(back, secrets);
        let bad = json.replace(SECRET_A, "not-a-secret");
        assert!(serde_json::from_str::<CallbackSecrets>(&bad).is_err());
    }
}
