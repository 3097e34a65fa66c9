//! The receiver's side: what a merchant's code runs on each callback it receives.
//!
//! [`CallbackVerifier::verify`] applies the spec's receiver rules (section "Signature"): the
//! timestamp must be a whole number of seconds within [`TIMESTAMP_TOLERANCE`] of the receiver's
//! clock, and at least one `v1=` value must match one of the accepted secrets, compared in
//! constant time; values of other schemes are skipped. A receiver that fails verification
//! answers `401` and changes nothing. A verified event is then passed through
//! [`ProcessedEvents::first_time`], and a repeated `event_id` is answered `2xx` without being
//! processed again.

use std::collections::{HashSet, VecDeque};
use std::time::Duration;

use subtle::ConstantTimeEq;

use super::signing::CallbackSecret;
use crate::Timestamp;

/// The largest accepted difference between `X-Callback-Timestamp` and the receiver's clock,
/// in either direction.
pub const TIMESTAMP_TOLERANCE: Duration = Duration::from_secs(300);

/// How long a receiver remembers a processed `event_id`, at least.
pub const EVENT_ID_RETENTION: Duration = Duration::from_secs(24 * 60 * 60);

/// The only signature scheme of v1.
const SCHEME_V1: &str = "v1";

/// Why a received callback is not authentic. The receiver answers `401` to each of them.
#[non_exhaustive]
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum CallbackVerifyError {
    /// The verifier was built without any secret, so nothing can be authentic.
    #[error("no callback secret is configured")]
    NoSecrets,
    /// `X-Callback-Timestamp` is not a whole non-negative number of seconds.
    #[error("X-Callback-Timestamp is not a number of seconds")]
    TimestampNotNumeric,
    /// `X-Callback-Timestamp` is further from the receiver's clock than the tolerance.
    #[error(
        "X-Callback-Timestamp {timestamp} differs from the receiver's clock ({now}) by more than \
         {tolerance_secs} s"
    )]
    TimestampOutOfTolerance {
        /// The timestamp received, Unix seconds.
        timestamp: i64,
        /// The receiver's clock, Unix seconds.
        now: i64,
        /// The tolerance applied, seconds.
        tolerance_secs: u64,
    },
    /// `X-Callback-Signature` has no `v1=` value.
    #[error("X-Callback-Signature has no v1 value")]
    NoV1Signature,
    /// No `v1=` value matches any accepted secret.
    #[error("no v1 signature matches")]
    SignatureMismatch,
}

/// Checks received callbacks against the receiver's accepted secrets.
#[derive(Debug, Clone)]
pub struct CallbackVerifier {
    secrets: Vec<CallbackSecret>,
    tolerance: Duration,
}

impl CallbackVerifier {
    /// A verifier accepting a signature by any of `secrets` (several, for the receiver's own
    /// rotation), with the spec's tolerance of 300 s.
    pub fn new(secrets: Vec<CallbackSecret>) -> CallbackVerifier {
        CallbackVerifier {
            secrets,
            tolerance: TIMESTAMP_TOLERANCE,
        }
    }

    /// The timestamp tolerance applied.
    pub fn tolerance(&self) -> Duration {
        self.tolerance
    }

    /// Replaces the timestamp tolerance.
    #[must_use]
    pub fn with_tolerance(mut self, tolerance: Duration) -> CallbackVerifier {
        self.tolerance = tolerance;
        self
    }

    /// Verifies one received callback: the `X-Callback-Timestamp` and `X-Callback-Signature`
    /// header values, the raw body bytes (before any JSON parsing) and the receiver's clock.
    ///
    /// The timestamp is compared in whole seconds: `|timestamp - now.unix_secs()| <= tolerance`
    /// passes. Signature values are comma separated, with optional spaces around each; values
    /// of schemes other than `v1` are skipped; a `v1` value that is not 64 hex digits (either
    /// case) matches nothing.
    ///
    /// ```
    /// use payments_core::callback::{signature_header, CallbackSecret, CallbackVerifier};
    /// use payments_core::Timestamp;
    ///
    /// let secret = CallbackSecret::parse("whsec_c2FuZGJveC1leGFtcGxlLXNlY3JldC1kby1ub3QtdXNl").unwrap();
    /// let body = br#"{"id":"...","event_id":"...","status":"completed"}"#;
    /// let header = signature_header(&[&secret], 1_790_857_000, body);
    /// let verifier = CallbackVerifier::new(vec![secret]);
    /// let now = Timestamp::from_unix_secs(1_790_857_030);
    /// assert!(verifier.verify("1790857000", &header, body, now).is_ok());
    /// // A changed body, a stale timestamp or a foreign signature are refused.
    /// assert!(verifier.verify("1790857000", &header, b"{}", now).is_err());
    /// assert!(verifier.verify("1790856000", &header, body, now).is_err());
    /// assert!(verifier.verify("1790857000", &format!("v1={}", "0".repeat(64)), body, now).is_err());
    /// ```
    pub fn verify(
        &self,
        timestamp_header: &str,
        signature_header: &str,
        body: &[u8],
        now: Timestamp,
    ) -> Result<(), CallbackVerifyError> {
        if self.secrets.is_empty() {
            return Err(CallbackVerifyError::NoSecrets);
        }
        let timestamp = parse_timestamp(timestamp_header)?;
        let now_secs = now.unix_secs();
        let difference = (i128::from(now_secs) - i128::from(timestamp)).unsigned_abs();
        if difference > u128::from(self.tolerance.as_secs()) {
            return Err(CallbackVerifyError::TimestampOutOfTolerance {
                timestamp,
                now: now_secs,
                tolerance_secs: self.tolerance.as_secs(),
            });
        }

        let received: Vec<&str> = signature_header
            .split(',')
            .filter_map(|item| item.trim_matches([' ', '\t']).split_once('='))
            .filter(|(scheme, _)| scheme.trim_matches([' ', '\t']) == SCHEME_V1)
            .map(|(_, value)| value.trim_matches([' ', '\t']))
            .collect();
        if received.is_empty() {
            return Err(CallbackVerifyError::NoV1Signature);
        }
        let expected: Vec<[u8; 32]> = self
            .secrets
            .iter()
            .map(|secret| secret.tag(timestamp, body))
            .collect();
        // Each received value is compared with every expected tag, without stopping early.
        let mut matched = subtle::Choice::from(0);
        for value in received {
            // The service writes lower-case hex; another spelling of the same tag is no
            // signature it made.
            if !value
                .bytes()
                .all(|b| matches!(b, b'0'..=b'9' | b'a'..=b'f'))
            {
                continue;
            }
            let mut tag = [0u8; 32];
            if hex::decode_to_slice(value, &mut tag).is_err() {
                continue;
            }
            for candidate in &expected {
                matched |= candidate.ct_eq(&tag);
            }
        }
        if bool::from(matched) {
            Ok(())
        } else {
            Err(CallbackVerifyError::SignatureMismatch)
        }
    }
}

/// Parses `X-Callback-Timestamp`: ASCII digits only (surrounding spaces allowed), fitting an
/// `i64`.
fn parse_timestamp(header: &str) -> Result<i64, CallbackVerifyError> {
    let digits = header.trim_matches([' ', '\t']);
    if digits.is_empty() || !digits.bytes().all(|b| b.is_ascii_digit()) {
        return Err(CallbackVerifyError::TimestampNotNumeric);
    }
    digits
        .parse()
        .map_err(|_| CallbackVerifyError::TimestampNotNumeric)
}

/// The receiver's memory of processed `event_id` values.
///
/// Call [`ProcessedEvents::first_time`] only after [`CallbackVerifier::verify`] succeeded. If
/// processing then fails and the receiver answers with an error so that the service retries,
/// call [`ProcessedEvents::forget`], or the retry would be taken for a duplicate.
pub trait ProcessedEvents {
    /// Records `event_id` as seen at `now`. `true`: first time, process it; `false`: a
    /// duplicate, answer `2xx` without processing it again.
    fn first_time(&mut self, event_id: &str, now: Timestamp) -> bool;

    /// Forgets `event_id`, so that its next delivery is processed.
    fn forget(&mut self, event_id: &str);
}

/// An in-memory [`ProcessedEvents`] that keeps each id for [`EVENT_ID_RETENTION`] after it was
/// first seen and purges older ones as time passes.
#[derive(Debug, Clone, Default)]
pub struct MemoryProcessedEvents {
    /// The ids remembered.
    ids: HashSet<String>,
    /// The ids in the order first seen, with the time, to purge from the front.
    seen: VecDeque<(Timestamp, String)>,
}

impl MemoryProcessedEvents {
    /// An empty memory.
    pub fn new() -> MemoryProcessedEvents {
        MemoryProcessedEvents::default()
    }

    /// How many ids are remembered.
    pub fn len(&self) -> usize {
        self.ids.len()
    }

    /// Whether no id is remembered.
    pub fn is_empty(&self) -> bool {
        self.ids.is_empty()
    }

    /// Drops the ids first seen [`EVENT_ID_RETENTION`] or longer before `now`.
    pub fn purge(&mut self, now: Timestamp) {
        while let Some((seen_at, _)) = self.seen.front() {
            if *seen_at + EVENT_ID_RETENTION > now {
                break;
            }
            if let Some((_, id)) = self.seen.pop_front() {
                self.ids.remove(&id);
            }
        }
    }
}

impl ProcessedEvents for MemoryProcessedEvents {
    fn first_time(&mut self, event_id: &str, now: Timestamp) -> bool {
        self.purge(now);
        if self.ids.contains(event_id) {
            return false;
        }
        self.ids.insert(event_id.to_owned());
        self.seen.push_back((now, event_id.to_owned()));
        true
    }

    fn forget(&mut self, event_id: &str) {
        if self.ids.remove(event_id) {
            self.seen.retain(|(_, id)| id != event_id);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::super::signing::{sign_payload, signature_header};
    use super::*;

    const SECRET_A: &str = "whsec_AAECAwQFBgcICQoLDA0ODxAREhMUFRYXGBkaGxwdHh8=";
    const SECRET_B: &str = "whsec_ICEiIyQlJicoKSorLC0uLzAxMjM0NTY3ODk6Ozw9Pj8=";
    const BODY: &[u8] =
        br#"{"id":"7d9f0c1e-2b3a-4c5d-8e6f-7a8b9c0d1e2f","status":"completed","amount":1500.00}"#;
    // HMAC-SHA256 of "1700000000." + BODY, computed with Python's hmac module.
    const SIG_A: &str = "72334a493f88df92aca73ec4752987512c9fffac9d726362fb6dc8e0a004373d";
    const SIG_B: &str = "4b5af83c2811fc2daf0d6cdac4220321403909f6d99301831d52c77860c751c2";
    const TS: &str = "1700000000";

    fn secret(s: &str) -> CallbackSecret {
        CallbackSecret::parse(s).expect("test secrets are well-formed")
    }

    fn now() -> Timestamp {
        Timestamp::from_unix_secs(1_700_000_000)
    }

    fn verifier() -> CallbackVerifier {
        CallbackVerifier::new(vec![secret(SECRET_A)])
    }

    #[test]
    fn accepts_a_valid_signature() {
        assert_eq!(
            verifier().verify(TS, &format!("v1={SIG_A}"), BODY, now()),
            Ok(())
        );
        // What the sender produces verifies.
        let header = signature_header(&[&secret(SECRET_A)], 1_700_000_123, BODY);
        let at = Timestamp::from_unix_secs(1_700_000_100);
        assert_eq!(verifier().verify("1700000123", &header, BODY, at), Ok(()));
    }

    #[test]
    fn an_upper_case_spelling_of_the_right_tag_is_refused() {
        let upper = SIG_A.to_ascii_uppercase();
        assert_ne!(upper, SIG_A, "the tag has letters");
        assert_eq!(
            verifier().verify(TS, &format!("v1={upper}"), BODY, now()),
            Err(CallbackVerifyError::SignatureMismatch)
        );
    }

    #[test]
    fn accepts_when_only_the_second_v1_value_matches() {
        let header = format!("v1={SIG_B}, v1={SIG_A}");
        assert_eq!(verifier().verify(TS, &header, BODY, now()), Ok(()));
        let header = format!("v1={SIG_B},v1={}", "0".repeat(64));
        assert_eq!(
            verifier().verify(TS, &header, BODY, now()),
            Err(CallbackVerifyError::SignatureMismatch)
        );
    }

    #[test]
    fn any_accepted_secret_verifies() {
        let both = CallbackVerifier::new(vec![secret(SECRET_A), secret(SECRET_B)]);
        assert_eq!(both.verify(TS, &format!("v1={SIG_B}"), BODY, now()), Ok(()));
        assert_eq!(both.verify(TS, &format!("v1={SIG_A}"), BODY, now()), Ok(()));
        assert_eq!(
            CallbackVerifier::new(vec![secret(SECRET_B)]).verify(
                TS,
                &format!("v1={SIG_A}"),
                BODY,
                now()
            ),
            Err(CallbackVerifyError::SignatureMismatch)
        );
    }

    #[test]
    fn skips_other_schemes() {
        // A v0 value equal to the correct tag is not accepted as v1; the v1 value decides.
        let header = format!("v0={SIG_A},v1={SIG_A}");
        assert_eq!(verifier().verify(TS, &header, BODY, now()), Ok(()));
        let header = format!("v0={SIG_A},v1={SIG_B}");
        assert_eq!(
            verifier().verify(TS, &header, BODY, now()),
            Err(CallbackVerifyError::SignatureMismatch)
        );
        let header = format!("v2={SIG_A}");
        assert_eq!(
            verifier().verify(TS, &header, BODY, now()),
            Err(CallbackVerifyError::NoV1Signature)
        );
    }

    #[test]
    fn rejects_a_tampered_body() {
        let tampered = String::from_utf8_lossy(BODY).replace("1500.00", "15000.00");
        assert_eq!(
            verifier().verify(TS, &format!("v1={SIG_A}"), tampered.as_bytes(), now()),
            Err(CallbackVerifyError::SignatureMismatch)
        );
        // Also a signature over another timestamp.
        let other = sign_payload(&secret(SECRET_A), 1_700_000_001, BODY);
        assert_eq!(
            verifier().verify(TS, &format!("v1={other}"), BODY, now()),
            Err(CallbackVerifyError::SignatureMismatch)
        );
    }

    #[test]
    fn timestamp_tolerance_is_300_seconds_either_way() {
        let header = format!("v1={SIG_A}");
        let v = verifier();
        let at = |offset: i64| Timestamp::from_unix_secs(1_700_000_000 + offset);
        assert_eq!(v.verify(TS, &header, BODY, at(300)), Ok(()));
        assert_eq!(v.verify(TS, &header, BODY, at(-300)), Ok(()));
        assert_eq!(
            v.verify(TS, &header, BODY, at(301)),
            Err(CallbackVerifyError::TimestampOutOfTolerance {
                timestamp: 1_700_000_000,
                now: 1_700_000_301,
                tolerance_secs: 300,
            })
        );
        assert_eq!(
            v.verify(TS, &header, BODY, at(-301)),
            Err(CallbackVerifyError::TimestampOutOfTolerance {
                timestamp: 1_700_000_000,
                now: 1_699_999_699,
                tolerance_secs: 300,
            })
        );
        // A narrower tolerance applies.
        let narrow = verifier().with_tolerance(Duration::from_secs(10));
        assert_eq!(narrow.verify(TS, &header, BODY, at(10)), Ok(()));
        assert!(matches!(
            narrow.verify(TS, &header, BODY, at(11)),
            Err(CallbackVerifyError::TimestampOutOfTolerance { .. })
        ));
    }

    #[test]
    fn rejects_non_numeric_timestamps() {
        let header = format!("v1={SIG_A}");
        for ts in [
            "",
            "abc",
            "1700000000.5",
            "-1700000000",
            "+1700000000",
            "1.7e9",
            "0x6553f100",
            "99999999999999999999",
        ] {
            assert_eq!(
                verifier().verify(ts, &header, BODY, now()),
                Err(CallbackVerifyError::TimestampNotNumeric),
                "{ts:?}"
            );
        }
        assert_eq!(
            verifier().verify(" 1700000000 ", &header, BODY, now()),
            Ok(())
        );
    }

    #[test]
    fn rejects_headers_without_v1_values() {
        for header in ["", " ", "v1", "v1:abc", "sha256=abcd", ",,"] {
            assert_eq!(
                verifier().verify(TS, header, BODY, now()),
                Err(CallbackVerifyError::NoV1Signature),
                "{header:?}"
            );
        }
        for header in ["v1=", "v1=zz", &format!("v1={}", &SIG_A[..62])] {
            assert_eq!(
                verifier().verify(TS, header, BODY, now()),
                Err(CallbackVerifyError::SignatureMismatch),
                "{header:?}"
            );
        }
    }

    #[test]
    fn a_verifier_without_secrets_accepts_nothing() {
        assert_eq!(
            CallbackVerifier::new(Vec::new()).verify(TS, &format!("v1={SIG_A}"), BODY, now()),
            Err(CallbackVerifyError::NoSecrets)
        );
    }

    #[test]
    fn processed_events_are_deduplicated_and_purged_after_a_day() {
        let t0 = now();
        let mut events = MemoryProcessedEvents::new();
        let a = "0b8c3c4e-4a8f-4f8e-9d55-3f0f2b6b8a11";
        let b = "5e1d1a8e-7c0b-4b59-8f1e-2a7d9c3e4f22";
        assert!(events.first_time(a, t0));
        assert!(!events.first_time(a, t0 + Duration::from_secs(30)));
        assert!(events.first_time(b, t0 + Duration::from_secs(3600)));
        assert_eq!(events.len(), 2);
        // Still a duplicate one millisecond before a day has passed.
        let almost = t0 + EVENT_ID_RETENTION - Duration::from_millis(1);
        assert!(!events.first_time(a, almost));
        // After a day `a` is purged (`b`, seen an hour later, stays).
        events.purge(t0 + EVENT_ID_RETENTION);
        assert_eq!(events.len(), 1);
        assert!(!events.first_time(b, t0 + EVENT_ID_RETENTION));
        assert!(events.first_time(a, t0 + EVENT_ID_RETENTION));
        events.purge(t0 + EVENT_ID_RETENTION + Duration::from_secs(3600));
        assert_eq!(events.len(), 1);
    }

    #[test]
    fn forgotten_events_are_processed_again() {
        let mut events = MemoryProcessedEvents::new();
        assert!(events.first_time("e1", now()));
        events.forget("e1");
        assert!(events.is_empty());
        assert!(events.first_time("e1", now() + Duration::from_secs(30)));
        assert!(!events.first_time("e1", now() + Duration::from_secs(90)));
    }
}
