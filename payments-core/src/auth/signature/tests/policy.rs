//! Rejections by the service policy: parameters, time window, required components, nonce,
//! `Content-Digest`.

use super::*;
use crate::auth::digest::DigestError;
use crate::auth::nonce::{Nonce, NonceError};

#[test]
fn parameter_types() {
    for (params, name) in [
        (format!(r#";created="{T}";expires=1;keyid="k""#), "created"),
        (format!(r#";created={T};expires=1.5;keyid="k""#), "expires"),
        (
            format!(r#";created={T};expires={};keyid=k"#, T + 300),
            "keyid",
        ),
        (
            format!(r#";created={T};expires={};keyid="k";alg=ed25519"#, T + 300),
            "alg",
        ),
        (
            format!(r#";created={T};expires={};keyid="k";nonce=?1"#, T + 300),
            "nonce",
        ),
    ] {
        let e = with_input(&format!("sig1={COMPONENTS}{params}")).failure_at(T);
        assert_eq!(e.failure, SignatureFailure::InvalidParameter(name));
        assert_eq!(
            e.to_string(),
            format!("signature parameter \"{name}\" has the wrong type")
        );
        assert!(
            e.signature_base.is_some(),
            "the base is built before parameters are read"
        );
    }
}

#[test]
fn required_parameters() {
    let r = signed_with("/api/v1/payments", |o| {
        o.params = vec![SigParam::Expires, SigParam::Keyid]
    });
    let e = r.failure_at(T);
    assert_eq!(e.failure, SignatureFailure::MissingCreated);
    assert_eq!(e.to_string(), "missing signature parameter \"created\"");
    let r = signed_with("/api/v1/payments", |o| {
        o.params = vec![SigParam::Created, SigParam::Keyid]
    });
    assert_eq!(
        r.failure().to_string(),
        "missing signature parameter \"expires\""
    );
    assert_eq!(r.failure(), SignatureFailure::MissingExpires);
    let r = signed_with("/api/v1/payments", |o| {
        o.params = vec![SigParam::Created, SigParam::Expires]
    });
    assert_eq!(r.failure(), SignatureFailure::MissingKeyid);
    assert_eq!(
        r.failure().to_string(),
        "missing signature parameter \"keyid\""
    );
}

#[test]
fn alg_must_be_ed25519() {
    let e = with_input(&params(r#";alg="rsa-pss-sha512""#)).failure_at(T);
    assert_eq!(
        e.failure,
        SignatureFailure::UnsupportedAlg("rsa-pss-sha512".to_owned())
    );
    assert_eq!(e.to_string(), "alg must be \"ed25519\"");
    // Present and right, or absent: both fine.
    let r = signed_with("/api/v1/payments", |o| {
        o.params.retain(|p| *p != SigParam::Alg)
    });
    assert!(r
        .prepare(&SignaturePolicy::strict(), T)
        .unwrap()
        .verify(&key().verifying_key())
        .is_ok());
}

#[test]
fn time_window_edges() {
    let rejected = |created: i64, expires: i64, now: i64| {
        let r = signed_with("/api/v1/payments", |o| {
            o.created = created;
            o.expires = expires;
        });
        r.failure_at(now).failure
    };
    let accepted = |created: i64, expires: i64, now: i64| {
        let r = signed_with("/api/v1/payments", |o| {
            o.created = created;
            o.expires = expires;
        });
        r.prepare(&SignaturePolicy::strict(), now)
            .map(|_| ())
            .map_err(|e| e.failure)
    };
    // created up to 60 s in the future.
    assert_eq!(accepted(T + 60, T + 360, T), Ok(()));
    assert_eq!(
        rejected(T + 61, T + 361, T),
        SignatureFailure::CreatedInFuture
    );
    assert_eq!(
        rejected(T + 61, T + 361, T).to_string(),
        "created in the future"
    );
    // expires strictly after created, at most 300 s.
    assert_eq!(rejected(T, T, T), SignatureFailure::ExpiresNotAfterCreated);
    assert_eq!(
        rejected(T, T - 1, T).to_string(),
        "expires must be after created"
    );
    assert_eq!(accepted(T, T + 1, T), Ok(()));
    assert_eq!(accepted(T, T + 300, T), Ok(()));
    assert_eq!(rejected(T, T + 301, T), SignatureFailure::ValidityTooLong);
    assert_eq!(
        rejected(T, T + 301, T).to_string(),
        "expires is more than 300 s after created"
    );
    // now <= expires + 60 s.
    assert_eq!(accepted(T, T + 10, T + 70), Ok(()));
    assert_eq!(rejected(T, T + 10, T + 71), SignatureFailure::Expired);
    assert_eq!(rejected(T, T + 10, T + 71).to_string(), "signature expired");
    // now - created <= 300 s.
    assert_eq!(accepted(T, T + 300, T + 300), Ok(()));
    assert_eq!(rejected(T, T + 300, T + 301), SignatureFailure::TooOld);
    assert_eq!(
        rejected(T, T + 300, T + 301).to_string(),
        "signature too old: created more than 300 s ago"
    );
}

#[test]
fn millisecond_precision_of_now() {
    let r = signed_with("/api/v1/payments", |o| {
        o.created = T;
        o.expires = T + 10;
    });
    let at = |ms: i64| {
        r.prepare_at(&SignaturePolicy::strict(), Timestamp::from_unix_millis(ms))
            .map(|_| ())
            .map_err(|e| e.failure)
    };
    assert_eq!(at((T + 70) * 1000), Ok(()));
    assert_eq!(at((T + 70) * 1000 + 1), Err(SignatureFailure::Expired));
    assert_eq!(at((T - 60) * 1000), Ok(()));
    assert_eq!(
        at((T - 60) * 1000 - 1),
        Err(SignatureFailure::CreatedInFuture)
    );
}

#[test]
fn every_required_component() {
    for required in [
        "@method",
        "@path",
        "content-digest",
        "x-request-id",
        "x-request-nonce",
    ] {
        let r = signed_with("/api/v1/payments", |o| {
            let mut c = SignOptions::default_components(false);
            c.retain(|n| n != required);
            o.components = Some(c);
        });
        let e = r.failure_at(T);
        assert_eq!(
            e.failure,
            SignatureFailure::MissingCoveredComponent(required)
        );
        assert_eq!(
            e.to_string(),
            format!("missing covered component \"{required}\"")
        );
    }
    let r = signed_with("/api/v1/payments?x=1", |o| {
        o.components = Some(SignOptions::default_components(false))
    });
    assert_eq!(
        r.failure(),
        SignatureFailure::MissingCoveredComponent("@query")
    );
    // With the query covered, and without a query at all, it verifies.
    let r = signed_with("/api/v1/payments?x=1", |_| {});
    assert!(r
        .prepare(&SignaturePolicy::strict(), T)
        .unwrap()
        .signature_base()
        .contains("\"@query\": ?x=1\n"));
    let r = signed_with("/api/v1/payments?", |o| {
        o.components = Some(SignOptions::default_components(false))
    });
    assert!(
        r.prepare(&SignaturePolicy::strict(), T).is_ok(),
        "an empty query needs no @query"
    );
}

#[test]
fn nonce_format_and_parameter() {
    let r = signed_with("/api/v1/payments", |o| {
        o.nonce = Some(Nonce::parse(b"0123456789abcdef").unwrap())
    });
    assert_eq!(
        r.prepare(&SignaturePolicy::strict(), T)
            .unwrap()
            .nonce()
            .unwrap()
            .as_str(),
        "0123456789abcdef"
    );

    let mut r = signed();
    r.set("X-Request-Nonce", "short");
    let f = r.failure();
    assert_eq!(f, SignatureFailure::InvalidNonce(NonceError::Length(5)));
    assert_eq!(
        f.to_string(),
        "X-Request-Nonce must be 16 to 128 characters, got 5"
    );
    r.set("X-Request-Nonce", "0123456789abcdef!");
    assert_eq!(
        r.failure(),
        SignatureFailure::InvalidNonce(NonceError::Character)
    );
    let mut r = signed();
    let n = r.get("X-Request-Nonce");
    r.add("X-Request-Nonce", &n);
    assert_eq!(
        r.failure(),
        SignatureFailure::InvalidNonce(NonceError::Character),
        "two lines join with \", \""
    );

    let r = signed_with("/api/v1/payments", |o| o.params.push(SigParam::Nonce));
    assert!(r
        .prepare(&SignaturePolicy::strict(), T)
        .unwrap()
        .verify(&key().verifying_key())
        .is_ok());
    let e = with_input(&params(r#";nonce="0000000000000000000""#)).failure_at(T);
    assert_eq!(e.failure, SignatureFailure::NonceMismatch);
    assert_eq!(
        e.to_string(),
        "nonce parameter does not match X-Request-Nonce"
    );
}

#[test]
fn content_digest_failures() {
    let mut r = signed();
    r.body.push(b' ');
    let e = r.failure_at(T);
    assert_eq!(
        e.failure,
        SignatureFailure::ContentDigest(DigestError::Mismatch)
    );
    assert_eq!(e.to_string(), "content-digest does not match body");
    assert!(e.signature_base.is_some());

    // A wrong digest that the signature covers: the digest check names the real problem.
    let mut r = signed();
    r.set(
        "Content-Digest",
        "sha-256=:47DEQpj8HBSa+/TImW+5JCeuQeRkm5NMpJWZG3hSuFU=:",
    );
    assert_eq!(
        r.failure(),
        SignatureFailure::ContentDigest(DigestError::Mismatch)
    );
    r.set("Content-Digest", "sha-512=:AAAA:");
    assert_eq!(
        r.failure(),
        SignatureFailure::ContentDigest(DigestError::MissingSha256)
    );
    assert_eq!(
        r.failure().to_string(),
        "Content-Digest has no sha-256 member"
    );
    r.set("Content-Digest", "sha-256=:AAAA:");
    assert_eq!(
        r.failure(),
        SignatureFailure::ContentDigest(DigestError::InvalidSha256)
    );
    r.set("Content-Digest", "sha-256=:AAAA");
    assert!(matches!(
        r.failure(),
        SignatureFailure::ContentDigest(DigestError::Malformed(_))
    ));
    assert!(r
        .failure()
        .to_string()
        .starts_with("malformed Content-Digest: "));
}
