//! The receiver's `X-Callback-Timestamp` and `X-Callback-Signature` through
//! [`CallbackVerifier::verify`].
//!
//! Input: `timestamp 0xFF signature 0xFF body` (headers UTF-8), verified with the secret
//! [`SECRET_A`] at the timestamp itself (else at 1 700 000 000).
//!
//! Properties:
//! - a callback the sender signs (`signature_header`) verifies, and not with another body, at
//!   another timestamp, outside the tolerance or with another secret;
//! - an accepted header has a `v1=` value equal (in either case) to the HMAC of
//!   `timestamp.body`, and an all-digit timestamp within the tolerance;
//! - an accepted header is refused with another body, outside the tolerance, and by a receiver
//!   with another secret unless it also carries that secret's value;
//! - the order of the header's values does not matter;
//! - the answer is deterministic.

use std::time::Duration;

use crate::at_secs;
use payments_core::callback::{
    sign_payload, signature_header, CallbackSecret, CallbackVerifier, CallbackVerifyError,
};
use payments_core::Timestamp;

/// The test secrets of `verifier.rs`.
pub(crate) const SECRET_A: &str = "whsec_AAECAwQFBgcICQoLDA0ODxAREhMUFRYXGBkaGxwdHh8=";
const SECRET_B: &str = "whsec_ICEiIyQlJicoKSorLC0uLzAxMjM0NTY3ODk6Ozw9Pj8=";
const DEFAULT_NOW: i64 = 1_700_000_000;
const TOLERANCE: i64 = 300;

fn secret(s: &str) -> CallbackSecret {
    CallbackSecret::parse(s).expect("the test secrets are well-formed")
}

/// Runs the target on the fuzzer's bytes `data`; panics when a property of this module's
/// parser does not hold (see the module's documentation for the input format and the
/// properties).
pub fn check(data: &[u8]) {
    let [timestamp, signature, body] = crate::split::<3>(data);
    let ts = sender_timestamp(timestamp);
    let case = Case::new(ts, body);
    check_sent(&case);

    let (Ok(timestamp), Ok(signature)) = (
        std::str::from_utf8(timestamp),
        std::str::from_utf8(signature),
    ) else {
        return;
    };
    let (verifier, now) = (&case.verifier, case.now);
    let result = verifier.verify(timestamp, signature, body, now);
    assert_eq!(
        result,
        verifier.verify(timestamp, signature, body, now),
        "deterministic"
    );
    let reversed = signature.split(',').rev().collect::<Vec<_>>().join(",");
    assert_eq!(
        verifier.verify(timestamp, &reversed, body, now),
        result,
        "the order of the values matters: {signature:?}"
    );
    if result.is_err() {
        return;
    }
    check_accepted(&case, timestamp, signature);
}

/// The timestamp the sender signs at: the input's when it is a number in range, else
/// [`DEFAULT_NOW`].
fn sender_timestamp(timestamp: &[u8]) -> i64 {
    match std::str::from_utf8(timestamp)
        .ok()
        .and_then(|t| t.trim_matches([' ', '\t']).parse::<i64>().ok())
    {
        Some(t) if (0..=i64::MAX / 1000 - TOLERANCE - 1).contains(&t) => t,
        _ => DEFAULT_NOW,
    }
}

/// The secrets, the receivers and the bodies one input is checked with.
struct Case<'a> {
    a: CallbackSecret,
    b: CallbackSecret,
    verifier: CallbackVerifier,
    other_verifier: CallbackVerifier,
    body: &'a [u8],
    other_body: Vec<u8>,
    ts: i64,
    now: Timestamp,
}

impl<'a> Case<'a> {
    fn new(ts: i64, body: &'a [u8]) -> Self {
        let (a, b) = (secret(SECRET_A), secret(SECRET_B));
        let verifier = CallbackVerifier::new(vec![a.clone()]);
        let other_verifier = CallbackVerifier::new(vec![b.clone()]);
        let other_body = [body, b"x"].concat();
        Case {
            a,
            b,
            verifier,
            other_verifier,
            body,
            other_body,
            ts,
            now: at_secs(ts),
        }
    }
}

/// The sender's header, at the case's timestamp, verifies, and not with another body, at another
/// timestamp, too late or with another secret.
fn check_sent(case: &Case<'_>) {
    let Case {
        a,
        verifier,
        other_verifier,
        body,
        other_body,
        ts,
        now,
        ..
    } = case;
    let (ts, now, body) = (*ts, *now, *body);
    let sent = signature_header(&[a], ts, body);
    let (ts_text, next_text) = (ts.to_string(), (ts + 1).to_string());
    assert_eq!(verifier.verify(&ts_text, &sent, body, now), Ok(()));
    let late = at_secs(ts + TOLERANCE + 1);
    for (what, t, bd, n, v) in [
        ("another body", &ts_text, &other_body[..], now, verifier),
        ("another timestamp", &next_text, body, now, verifier),
        ("too late", &ts_text, body, late, verifier),
        ("another secret", &ts_text, body, now, other_verifier),
    ] {
        assert!(
            v.verify(t, &sent, bd, n).is_err(),
            "a signed callback verifies with {what}"
        );
    }
}

/// An accepted header: an all-digit timestamp, the HMAC of the body among its `v1=` values, and
/// refused with another body, outside the tolerance and (unless it carries its value) with
/// another secret.
fn check_accepted(case: &Case<'_>, timestamp: &str, signature: &str) {
    let Case {
        a,
        b,
        verifier,
        other_verifier,
        body,
        other_body,
        ts,
        now,
    } = case;
    let (ts, now, body) = (*ts, *now, *body);
    let digits = timestamp.trim_matches([' ', '\t']);
    assert!(
        !digits.is_empty() && digits.bytes().all(|c| c.is_ascii_digit()),
        "timestamp {timestamp:?} accepted"
    );
    assert_eq!(digits.parse::<i64>().ok(), Some(ts), "{timestamp:?}");
    let values: Vec<String> = signature
        .split(',')
        .filter_map(|item| item.trim_matches([' ', '\t']).split_once('='))
        .filter(|(scheme, _)| scheme.trim_matches([' ', '\t']) == "v1")
        .map(|(_, v)| v.trim_matches([' ', '\t']).to_ascii_lowercase())
        .collect();
    assert!(
        values.contains(&sign_payload(a, ts, body)),
        "accepted without the HMAC of the body: {signature:?}"
    );
    assert_eq!(
        verifier.verify(timestamp, signature, other_body, now),
        Err(CallbackVerifyError::SignatureMismatch),
        "a signature verifies another body"
    );
    for late in [ts + TOLERANCE + 1, ts - TOLERANCE - 1] {
        assert!(
            matches!(
                verifier.verify(timestamp, signature, body, at_secs(late)),
                Err(CallbackVerifyError::TimestampOutOfTolerance { .. })
            ),
            "accepted outside the tolerance"
        );
    }
    let narrow = CallbackVerifier::new(vec![a.clone()]).with_tolerance(Duration::ZERO);
    assert_eq!(narrow.verify(timestamp, signature, body, now), Ok(()));
    if !values.contains(&sign_payload(b, ts, body)) {
        assert_eq!(
            other_verifier.verify(timestamp, signature, body, now),
            Err(CallbackVerifyError::SignatureMismatch),
            "another secret verifies"
        );
    }
}
