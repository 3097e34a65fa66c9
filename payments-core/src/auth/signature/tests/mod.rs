//! One test per rejection reason, each asserting the reason and its message: the structure of
//! `Signature-Input` / `Signature` here, the service policy in [`policy`]; the signature base
//! and the signer in [`signing`].

mod policy;
mod signing;

use ed25519_dalek::SigningKey;

use super::base::{signature_base, Component};
use super::*;
use crate::auth::keys::keyid;
use crate::auth::token::Environment;
use crate::{ApiError, ErrorCode, KeyId, RandomSource, Timestamp};

pub(super) const T: i64 = 1_790_640_000;

pub(super) struct Zero;
impl RandomSource for Zero {
    fn fill(&self, buf: &mut [u8]) {
        buf.fill(0x5a);
    }
}

pub(super) fn key() -> SigningKey {
    SigningKey::from_bytes(&[1; 32])
}

#[derive(Clone)]
pub(super) struct Req {
    /// The raw request target.
    pub(super) target: String,
    pub(super) headers: Vec<(String, Vec<u8>)>,
    pub(super) body: Vec<u8>,
}

impl Req {
    pub(super) fn prepare(
        &self,
        policy: &SignaturePolicy,
        now: i64,
    ) -> Result<PreparedSignature, SignatureError> {
        self.prepare_at(policy, Timestamp::from_unix_secs(now))
    }

    pub(super) fn prepare_at(
        &self,
        policy: &SignaturePolicy,
        now: Timestamp,
    ) -> Result<PreparedSignature, SignatureError> {
        let headers: Vec<(&str, &[u8])> = self
            .headers
            .iter()
            .map(|(n, v)| (n.as_str(), v.as_slice()))
            .collect();
        let parts = HttpRequestParts {
            method: "POST",
            scheme: "https",
            authority: "api.example.com",
            path_and_query: &self.target,
            headers: &headers,
            body: &self.body,
        };
        PreparedSignature::prepare(&parts, policy, now)
    }

    /// The failure under the strict policy at `now`, with prepare and verify.
    pub(super) fn failure_at(&self, now: i64) -> SignatureError {
        match self.prepare(&SignaturePolicy::strict(), now) {
            Err(e) => e,
            Ok(p) => p
                .verify(&key().verifying_key())
                .expect_err("expected a failure"),
        }
    }

    pub(super) fn failure(&self) -> SignatureFailure {
        self.failure_at(T).failure
    }

    pub(super) fn set(&mut self, name: &str, value: &str) -> &mut Self {
        self.headers.retain(|(n, _)| !n.eq_ignore_ascii_case(name));
        self.headers
            .push((name.to_owned(), value.as_bytes().to_vec()));
        self
    }

    pub(super) fn add(&mut self, name: &str, value: &str) -> &mut Self {
        self.headers
            .push((name.to_owned(), value.as_bytes().to_vec()));
        self
    }

    pub(super) fn remove(&mut self, name: &str) -> &mut Self {
        self.headers.retain(|(n, _)| !n.eq_ignore_ascii_case(name));
        self
    }

    pub(super) fn get(&self, name: &str) -> String {
        let v = &self
            .headers
            .iter()
            .find(|(n, _)| n.eq_ignore_ascii_case(name))
            .expect("header")
            .1;
        String::from_utf8(v.clone()).expect("ascii")
    }
}

pub(super) fn signed_with(target: &str, edit: impl FnOnce(&mut SignOptions)) -> Req {
    let key = key();
    let mut headers = vec![
        ("Host".to_owned(), b"api.example.com".to_vec()),
        ("X-Request-ID".to_owned(), b"req-1".to_vec()),
    ];
    let body = br#"{"amount":"10.00"}"#.to_vec();
    let mut options = SignOptions::new(keyid(&key.verifying_key()), T, T + 300);
    edit(&mut options);
    let signed = {
        let borrowed: Vec<(&str, &[u8])> = headers
            .iter()
            .map(|(n, v)| (n.as_str(), v.as_slice()))
            .collect();
        let parts = HttpRequestParts {
            method: "POST",
            scheme: "https",
            authority: "api.example.com",
            path_and_query: target,
            headers: &borrowed,
            body: &body,
        };
        sign_request(&parts, &key, &options, &Zero).expect("signable")
    };
    for (n, v) in signed.headers() {
        headers.push((n.to_owned(), v.as_bytes().to_vec()));
    }
    Req {
        target: target.to_owned(),
        headers,
        body,
    }
}

pub(super) fn signed() -> Req {
    signed_with("/api/v1/payments", |_| {})
}

/// Replaces the Signature-Input value and leaves the Signature as is: enough for every failure
/// found before the cryptographic check.
pub(super) fn with_input(input: &str) -> Req {
    let mut r = signed();
    r.set("Signature-Input", input);
    r
}

pub(super) const COMPONENTS: &str =
    r#"("@method" "@path" "content-digest" "x-request-id" "x-request-nonce")"#;

pub(super) fn params(extra: &str) -> String {
    format!(
        r#"sig1={COMPONENTS};created={T};expires={};keyid="k"{extra}"#,
        T + 300
    )
}

#[test]
fn a_good_request_verifies() {
    let r = signed();
    let prepared = r.prepare(&SignaturePolicy::strict(), T).unwrap();
    assert_eq!(prepared.keyid(), &keyid(&key().verifying_key()));
    assert_eq!(
        prepared.nonce().unwrap().as_str(),
        "WlpaWlpaWlpaWlpaWlpaWlpaWlpaWlpa"
    );
    assert_eq!(prepared.label(), "sig1");
    assert_eq!(
        (prepared.created(), prepared.expires()),
        (Some(T), Some(T + 300))
    );
    let verified = prepared.verify(&key().verifying_key()).unwrap();
    assert_eq!(
        verified.covered,
        [
            "@method",
            "@path",
            "content-digest",
            "x-request-id",
            "x-request-nonce"
        ]
    );
    assert_eq!(
        prepared.signature_base(),
        format!(
            "\"@method\": POST\n\"@path\": /api/v1/payments\n\"content-digest\": {}\n\"x-request-id\": req-1\n\"x-request-nonce\": WlpaWlpaWlpaWlpaWlpaWlpaWlpaWlpa\n\"@signature-params\": {}",
            r.get("content-digest"),
            &r.get("signature-input")["sig1=".len()..]
        )
    );
}

#[test]
fn missing_headers() {
    let e = signed().remove("Signature-Input").failure_at(T);
    assert_eq!(e.failure, SignatureFailure::MissingSignatureInput);
    assert_eq!(e.to_string(), "missing Signature-Input header");
    assert_eq!(e.signature_base, None);
    assert_eq!(
        with_input("").failure(),
        SignatureFailure::MissingSignatureInput
    );
    let f = signed().remove("Signature").failure();
    assert_eq!(f, SignatureFailure::MissingSignature);
    assert_eq!(f.to_string(), "missing Signature header");
}

#[test]
fn malformed_signature_input() {
    let f = with_input(r#"sig1=("@method""#).failure();
    assert!(
        matches!(f, SignatureFailure::MalformedSignatureInput(_)),
        "{f:?}"
    );
    assert!(f.to_string().starts_with("malformed Signature-Input: "));
    assert_eq!(
        with_input("sig1=:AAAA:").failure(),
        SignatureFailure::MalformedSignatureInput(
            "member \"sig1\" is not an inner list".to_owned()
        )
    );
    let mut r = signed();
    r.headers.retain(|(n, _)| n != "Signature-Input");
    r.headers.push((
        "Signature-Input".to_owned(),
        b"sig1=(\"\xc3\xa9\")".to_vec(),
    ));
    assert!(matches!(
        r.failure(),
        SignatureFailure::MalformedSignatureInput(_)
    ));
}

#[test]
fn malformed_signature() {
    let mut r = signed();
    r.set("Signature", "sig1=(:AAAA:)");
    assert_eq!(
        r.failure(),
        SignatureFailure::MalformedSignature("member \"sig1\" is not a byte sequence".to_owned())
    );
    r.set("Signature", "sig1=abc");
    assert_eq!(
        r.failure(),
        SignatureFailure::MalformedSignature("member \"sig1\" is not a byte sequence".to_owned())
    );
    r.set("Signature", "sig1=:not base64");
    assert!(matches!(
        r.failure(),
        SignatureFailure::MalformedSignature(_)
    ));
    r.set("Signature", "sig1=:AAAA:");
    let f = r.failure();
    assert_eq!(f, SignatureFailure::InvalidSignatureLength(3));
    assert_eq!(f.to_string(), "Ed25519 signature must be 64 bytes, got 3");
}

#[test]
fn duplicate_labels_are_rejected_in_either_header() {
    let mut r = signed();
    let input = r.get("Signature-Input");
    r.add("Signature-Input", &input);
    let f = r.failure();
    assert_eq!(f, SignatureFailure::DuplicateLabel("sig1".to_owned()));
    assert_eq!(f.to_string(), "duplicate signature label \"sig1\"");

    let mut r = signed();
    let sig = r.get("Signature");
    r.set("Signature", &format!("{sig}, other=:AAAA:, {sig}"));
    assert_eq!(
        r.failure(),
        SignatureFailure::DuplicateLabel("sig1".to_owned())
    );
}

#[test]
fn duplicate_parameters_are_rejected() {
    // sfv would keep the last `keyid`: a signature could name one key to a check that reads
    // the first and another to the verifier.
    let mut r = signed();
    let input = r.get("Signature-Input");
    r.set("Signature-Input", &format!("{input};keyid=\"other\""));
    let f = r.failure();
    assert_eq!(
        f,
        SignatureFailure::DuplicateParameter {
            label: "sig1".to_owned(),
            parameter: "keyid".to_owned()
        }
    );
    assert_eq!(
        f.to_string(),
        "duplicate parameter \"keyid\" in signature \"sig1\""
    );

    let mut r = signed();
    let sig = r.get("Signature");
    r.set("Signature", &format!("{sig};a=1;a=2"));
    assert!(matches!(
        r.failure(),
        SignatureFailure::DuplicateParameter { .. }
    ));
}

#[test]
fn label_choice() {
    // sig1 is chosen among several; another label alone is used.
    let mut r = signed();
    let input = r.get("Signature-Input");
    r.set(
        "Signature-Input",
        &format!("{}, {input}", input.replacen("sig1", "zzz", 1)),
    );
    assert_eq!(
        r.prepare(&SignaturePolicy::strict(), T).unwrap().label(),
        "sig1"
    );

    let mut r = signed();
    let input = r.get("Signature-Input").replacen("sig1", "mine", 1);
    let sig = r.get("Signature").replacen("sig1", "mine", 1);
    r.set("Signature-Input", &input).set("Signature", &sig);
    let verified = r.prepare(&SignaturePolicy::strict(), T).unwrap();
    assert_eq!(
        verified.verify(&key().verifying_key()).unwrap().label,
        "mine"
    );

    let f = r
        .set(
            "Signature-Input",
            &format!("{input}, {}", input.replacen("mine", "other", 1)),
        )
        .failure();
    assert_eq!(f, SignatureFailure::AmbiguousLabel);
    assert_eq!(
        f.to_string(),
        "several signatures and none labelled \"sig1\""
    );

    let mut r = signed();
    let sig = r.get("Signature").replacen("sig1", "sig2", 1);
    let f = r.set("Signature", &sig).failure();
    assert_eq!(
        f,
        SignatureFailure::MissingSignatureForLabel("sig1".to_owned())
    );
    assert_eq!(f.to_string(), "no Signature for label \"sig1\"");
}

#[test]
fn component_identifiers() {
    let f = with_input(r#"sig1=(method "@path");created=1;keyid="k""#).failure();
    assert_eq!(
        f,
        SignatureFailure::InvalidComponentIdentifier("method".to_owned())
    );
    let f = with_input(r#"sig1=("@path" 12);created=1;keyid="k""#).failure();
    assert_eq!(
        f,
        SignatureFailure::InvalidComponentIdentifier("12".to_owned())
    );
    let f = with_input(r#"sig1=("Content-Type");created=1;keyid="k""#).failure();
    assert_eq!(
        f,
        SignatureFailure::InvalidComponentIdentifier("\"Content-Type\"".to_owned())
    );
    assert_eq!(
        f.to_string(),
        "invalid component identifier \"Content-Type\""
    );
    let f = with_input(r#"sig1=("");created=1;keyid="k""#).failure();
    assert_eq!(
        f,
        SignatureFailure::InvalidComponentIdentifier("\"\"".to_owned())
    );
}

#[test]
fn component_parameters_are_rejected_not_ignored() {
    for (component, parameter) in [
        (r#""content-digest";sf"#, "sf"),
        (r#""example-dict";key="a""#, "key"),
        (r#""x-request-id";bs"#, "bs"),
        (r#""@method";req"#, "req"),
        (r#""x-request-id";tr"#, "tr"),
        (r#""@query-param";name="id""#, "name"),
        (r#""x-request-id";foo=1"#, "foo"),
    ] {
        let f = with_input(&format!(
            r#"sig1=("@path" {component});created=1;keyid="k""#
        ))
        .failure();
        let name = component.split('"').nth(1).unwrap();
        assert_eq!(
            f,
            SignatureFailure::UnsupportedComponentParameter {
                component: name.to_owned(),
                parameter: parameter.to_owned()
            }
        );
        assert_eq!(
            f.to_string(),
            format!("unsupported parameter \";{parameter}\" on component \"{name}\"")
        );
    }
}

#[test]
fn unknown_derived_components() {
    for name in ["@status", "@query-param", "@foo", "@Method"] {
        let f = with_input(&format!(r#"sig1=("{name}");created=1;keyid="k""#)).failure();
        assert_eq!(
            f,
            SignatureFailure::UnsupportedDerivedComponent(name.to_owned())
        );
        assert_eq!(
            f.to_string(),
            format!("unsupported derived component \"{name}\"")
        );
    }
}

#[test]
fn duplicate_component() {
    let f = with_input(r#"sig1=("@method" "@path" "@method");created=1;keyid="k""#).failure();
    assert_eq!(
        f,
        SignatureFailure::DuplicateComponent("@method".to_owned())
    );
    assert_eq!(f.to_string(), "component \"@method\" is covered twice");
}

#[test]
fn covered_header_absent() {
    let e = signed().remove("X-Request-ID").failure_at(T);
    assert_eq!(
        e.failure,
        SignatureFailure::MissingHeader("x-request-id".to_owned())
    );
    assert_eq!(
        e.to_string(),
        "covered header \"x-request-id\" is not in the request"
    );
    assert_eq!(e.signature_base, None, "no base without all its components");
    let mut r = signed();
    r.remove("Content-Digest");
    assert_eq!(
        r.failure(),
        SignatureFailure::MissingHeader("content-digest".to_owned())
    );
}

#[test]
fn covered_value_with_control_or_non_ascii_bytes() {
    for bad in [&b"req\n1"[..], b"r\xc3\xa9q", b"a\x00b"] {
        let mut r = signed();
        r.remove("X-Request-ID");
        r.headers.push(("X-Request-ID".to_owned(), bad.to_vec()));
        let f = r.failure();
        assert_eq!(
            f,
            SignatureFailure::InvalidComponentValue("x-request-id".to_owned())
        );
        assert_eq!(
            f.to_string(),
            "value of \"x-request-id\" contains characters other than visible ASCII"
        );
    }
}

#[test]
fn unknown_keyid_and_wrong_key() {
    let prepared = signed().prepare(&SignaturePolicy::strict(), T).unwrap();
    let e = prepared.unknown_keyid();
    assert_eq!(e.failure, SignatureFailure::UnknownKeyid);
    assert_eq!(e.to_string(), "unknown keyid");
    assert_eq!(e.signature_base.as_deref(), Some(prepared.signature_base()));

    let other = SigningKey::from_bytes(&[2; 32]).verifying_key();
    let e = prepared.verify(&other).unwrap_err();
    assert_eq!(e.failure, SignatureFailure::VerificationFailed);
    assert_eq!(e.to_string(), "signature does not verify");

    let api: ApiError = e.clone().into();
    assert_eq!(api.code, ErrorCode::SignatureInvalid);
    assert_eq!(api.message, "signature does not verify");
    assert_eq!(
        api.signature_base, None,
        "the plain conversion never leaks the base"
    );
    let api = e.clone().into_api_error(Environment::Production);
    assert_eq!(
        (api.code, api.signature_base),
        (ErrorCode::SignatureInvalid, None)
    );
    let api = e.clone().into_api_error(Environment::Sandbox);
    assert_eq!(
        api.message,
        format!("signature does not verify{SANDBOX_KEY_HINT}")
    );
    assert!(api
        .message
        .contains("not the one registered under this keyid"));
    assert_eq!(
        api.signature_base.as_deref(),
        Some(prepared.signature_base())
    );
}
