//! RFC 9421 / RFC 9530 vectors and signer/verifier round trips through the public API.

use std::sync::atomic::{AtomicU64, Ordering};

use base64::Engine as _;
use ed25519_dalek::Signer as _;
use payments_core::auth::digest::{content_digest_header, verify_content_digest, DigestError};
use payments_core::auth::keys::{
    generate_signing_key, keyid, parse_public_key, parse_signing_key_pem, public_key_to_base64,
    public_key_to_pem, signing_key_to_pem,
};
use payments_core::auth::signature::{
    sign_request, HttpRequestParts, PreparedSignature, SigParam, SignOptions, SignatureFailure,
    SignaturePolicy,
};
use payments_core::auth::Nonce;
use payments_core::{ErrorCode, KeyId, RandomSource, Timestamp};
use proptest::prelude::*;
use sha2::{Digest as _, Sha256};

const TEST_KEY_PUB_PEM: &str = include_str!("vectors/rfc9421-test-key-ed25519.pub.pem");
const TEST_KEY_PEM: &str = include_str!("vectors/rfc9421-test-key-ed25519.pem");
const TEST_KEY_RAW_B64: &str = include_str!("vectors/rfc9421-test-key-ed25519.raw.b64");
const TEST_KEY_KEYID: &str = include_str!("vectors/rfc9421-test-key-ed25519.keyid");
const B26_REQUEST: &str = include_str!("vectors/rfc9421-b26-request.http");
const B26_BASE: &str = include_str!("vectors/rfc9421-b26-signature-base.txt");
const B4_REQUEST: &str = include_str!("vectors/rfc9421-b4-request.http");
const B4_BASE: &str = include_str!("vectors/rfc9421-b4-signature-base.txt");
const DIGESTS: &str = include_str!("vectors/rfc9530-content-digest.tsv");
const RFC_CREATED: i64 = 1_618_884_473;

/// A request parsed from the `.http` vector files (LF line endings, body after the blank line).
#[derive(Clone)]
struct Request {
    method: String,
    target: String,
    headers: Vec<(String, Vec<u8>)>,
    body: Vec<u8>,
}

impl Request {
    fn parse(text: &str) -> Request {
        let (head, body) = text.split_once("\n\n").expect("vector has a blank line");
        let mut lines = head.lines();
        let mut request_line = lines.next().expect("request line").split(' ');
        let method = request_line.next().expect("method").to_owned();
        let target = request_line.next().expect("target").to_owned();
        let headers = lines
            .map(|l| {
                let (n, v) = l.split_once(':').expect("header line");
                (n.to_owned(), v.as_bytes().to_vec())
            })
            .collect();
        Request {
            method,
            target,
            headers,
            body: body.as_bytes().to_vec(),
        }
    }

    fn header_mut(&mut self, name: &str) -> &mut Vec<u8> {
        &mut self
            .headers
            .iter_mut()
            .find(|(n, _)| n.eq_ignore_ascii_case(name))
            .expect("header present")
            .1
    }

    fn host(&self) -> String {
        let v = &self
            .headers
            .iter()
            .find(|(n, _)| n.eq_ignore_ascii_case("host"))
            .expect("host")
            .1;
        String::from_utf8(v.clone()).unwrap().trim().to_owned()
    }

    /// Runs `f` on the request as [`HttpRequestParts`], as an adapter would build it.
    fn with_parts<T>(&self, f: impl FnOnce(&HttpRequestParts<'_>) -> T) -> T {
        let headers: Vec<(&str, &[u8])> = self
            .headers
            .iter()
            .map(|(n, v)| (n.as_str(), v.as_slice()))
            .collect();
        let host = self.host();
        let parts = HttpRequestParts {
            method: &self.method,
            scheme: "https",
            authority: &host,
            path_and_query: &self.target,
            headers: &headers,
            body: &self.body,
        };
        f(&parts)
    }

    fn verify_rfc(&self) -> Result<String, SignatureFailure> {
        let key = parse_public_key(TEST_KEY_PUB_PEM).unwrap();
        self.with_parts(|parts| {
            let now = Timestamp::from_unix_secs(RFC_CREATED + 10);
            let prepared = PreparedSignature::prepare(parts, &SignaturePolicy::rfc_vectors(), now)
                .map_err(|e| e.failure)?;
            assert_eq!(prepared.keyid().as_str(), "test-key-ed25519");
            prepared.verify(&key).map_err(|e| e.failure)?;
            Ok(prepared.signature_base().to_owned())
        })
    }
}

struct CountingRng(AtomicU64);

impl RandomSource for CountingRng {
    fn fill(&self, buf: &mut [u8]) {
        for b in buf {
            *b = self.0.fetch_add(1, Ordering::Relaxed) as u8;
        }
    }
}

#[test]
fn b26_signature_base_is_exact_and_verifies() {
    assert_eq!(B26_BASE.len(), 284);
    assert_eq!(
        hex::encode(Sha256::digest(B26_BASE.as_bytes())),
        "e6402577f54303accfda63dfbde1a7b8c5e5e6f3f7898637b7d78dc07ee1896a"
    );
    let request = Request::parse(B26_REQUEST);
    assert_eq!(request.body, br#"{"hello": "world"}"#);
    assert_eq!(request.verify_rfc(), Ok(B26_BASE.to_owned()));
}

#[test]
fn b26_resigning_the_base_reproduces_the_signature() {
    let key = parse_signing_key_pem(TEST_KEY_PEM).unwrap();
    let signature = key.sign(B26_BASE.as_bytes());
    assert_eq!(
        base64::engine::general_purpose::STANDARD.encode(signature.to_bytes()),
        "wqcAqbmYJ2ji2glfAMaRy4gruYYnx2nEFN2HN6jrnDnQCK1u02Gb04v9EDgwUPiu4A0w6vuQv5lIp5WPpBKRCw=="
    );
}

#[test]
fn b26_one_changed_byte_in_any_covered_field_fails() {
    let original = Request::parse(B26_REQUEST);
    type Mutation = (&'static str, fn(&mut Request));
    let mutations: [Mutation; 8] = [
        ("date", |r| r.header_mut("date")[5] = b'W'),
        ("@method", |r| r.method = "PUT".to_owned()),
        ("@path", |r| {
            r.target = "/fop?param=Value&Pet=dog".to_owned()
        }),
        ("@authority", |r| {
            *r.header_mut("host") = b" example.con".to_vec()
        }),
        ("content-type", |r| r.header_mut("content-type")[3] = b'X'),
        ("content-length", |r| {
            *r.header_mut("content-length") = b" 19".to_vec()
        }),
        ("created", |r| {
            let si = r.header_mut("signature-input");
            let at = si.windows(10).position(|w| w == b"1618884473").unwrap();
            si[at + 9] = b'4';
        }),
        ("signature", |r| {
            let sig = r.header_mut("signature");
            sig[12] = if sig[12] == b'A' { b'B' } else { b'A' };
        }),
    ];
    for (what, mutate) in mutations {
        let mut r = original.clone();
        mutate(&mut r);
        assert_eq!(
            r.verify_rfc(),
            Err(SignatureFailure::VerificationFailed),
            "changing {what} must fail"
        );
    }
    // The query is not covered by B.2.6, nor is the body: changing them keeps it valid.
    let mut r = original.clone();
    r.target = "/foo?param=Other".to_owned();
    assert_eq!(r.verify_rfc(), Ok(B26_BASE.to_owned()));
    // Upper-case host and the default port are normalised away in @authority.
    let mut r = original;
    *r.header_mut("host") = b" EXAMPLE.com:443".to_vec();
    assert_eq!(r.verify_rfc(), Ok(B26_BASE.to_owned()));
}

#[test]
fn b4_repeated_fields_are_joined_in_wire_order() {
    let request = Request::parse(B4_REQUEST);
    assert_eq!(request.verify_rfc(), Ok(B4_BASE.to_owned()));

    let mut swapped = request.clone();
    let first = swapped
        .headers
        .iter()
        .position(|(n, _)| n == "Accept")
        .unwrap();
    swapped.headers.swap(first, first + 1);
    assert_eq!(
        swapped.verify_rfc(),
        Err(SignatureFailure::VerificationFailed)
    );

    let mut folded = request.clone();
    folded.headers.remove(first + 1);
    folded.headers[first].1 = b" application/json, */*".to_vec();
    assert_eq!(folded.verify_rfc(), Ok(B4_BASE.to_owned()));

    // A line moved elsewhere among other headers keeps the relative order: still valid.
    let mut moved = request;
    let accept = moved.headers.remove(first + 1);
    moved.headers.push(accept);
    assert_eq!(moved.verify_rfc(), Ok(B4_BASE.to_owned()));
}

#[test]
fn rfc9530_digests_compute_and_verify() {
    let mut rows = 0;
    for line in DIGESTS.lines().filter(|l| !l.starts_with('#')) {
        let mut cols = line.split('\t');
        let body: String = serde_json::from_str(cols.next().unwrap()).unwrap();
        let sha256 = cols.next().unwrap();
        let sha512 = cols.next().unwrap();
        assert_eq!(content_digest_header(body.as_bytes()), sha256);
        assert_eq!(verify_content_digest(sha256, body.as_bytes()), Ok(()));
        if !sha512.is_empty() {
            // Other algorithms beside sha-256 are ignored, in either order.
            let both = format!("{sha512}, {sha256}");
            assert_eq!(verify_content_digest(&both, body.as_bytes()), Ok(()));
            assert_eq!(
                verify_content_digest(sha512, body.as_bytes()),
                Err(DigestError::MissingSha256)
            );
        }
        assert_eq!(
            verify_content_digest(sha256, format!("{body} ").as_bytes()),
            Err(DigestError::Mismatch)
        );
        rows += 1;
    }
    assert_eq!(rows, 3);
    assert_eq!(
        content_digest_header(br#"{"hello": "world"}"#),
        "sha-256=:X48E9qOokqqrvdts8nOJRJN3OWDUoyWxBf7kbu9DBPE=:"
    );
}

#[test]
fn keyid_of_the_rfc_test_key_matches_an_independent_computation() {
    let from_pem = parse_public_key(TEST_KEY_PUB_PEM).unwrap();
    let from_raw = parse_public_key(TEST_KEY_RAW_B64).unwrap();
    assert_eq!(from_pem, from_raw);
    assert_eq!(keyid(&from_pem).as_str(), TEST_KEY_KEYID.trim());
    assert_eq!(
        keyid(&from_raw).as_str(),
        "ed25519-poqkLGiymh_W0uP6PZFw-dvez3QJT5SolqXBCW38r0U"
    );
    let private = parse_signing_key_pem(TEST_KEY_PEM).unwrap();
    assert_eq!(private.verifying_key(), from_pem);
    assert_eq!(
        hex::encode(private.to_bytes()),
        "9f8362f87a484a954e6e740c5b4c0e84229139a20aa8ab56ff66586f6a7d29c5"
    );
    assert_eq!(public_key_to_pem(&from_pem), TEST_KEY_PUB_PEM);
    assert_eq!(signing_key_to_pem(&private), TEST_KEY_PEM);
    assert_eq!(public_key_to_base64(&from_pem), TEST_KEY_RAW_B64.trim());
}

#[test]
fn generated_keys_round_trip_through_pem() {
    let rng = CountingRng(AtomicU64::new(0));
    let key = generate_signing_key(&rng);
    assert_eq!(
        hex::encode(key.to_bytes()),
        "000102030405060708090a0b0c0d0e0f101112131415161718191a1b1c1d1e1f"
    );
    let pem = signing_key_to_pem(&key);
    assert!(pem.starts_with("-----BEGIN PRIVATE KEY-----\n"));
    assert_eq!(
        parse_signing_key_pem(&pem).unwrap().to_bytes(),
        key.to_bytes()
    );
    let public = parse_public_key(&public_key_to_pem(&key.verifying_key())).unwrap();
    assert_eq!(public, key.verifying_key());
}

/// A signed API request: what a merchant's client would send.
struct Signed {
    method: String,
    target: String,
    headers: Vec<(String, Vec<u8>)>,
    body: Vec<u8>,
}

impl Signed {
    fn prepare_and_verify(
        &self,
        key: &ed25519_dalek::VerifyingKey,
        now: Timestamp,
    ) -> Result<String, SignatureFailure> {
        let headers: Vec<(&str, &[u8])> = self
            .headers
            .iter()
            .map(|(n, v)| (n.as_str(), v.as_slice()))
            .collect();
        let parts = HttpRequestParts {
            method: &self.method,
            scheme: "https",
            authority: "api.example.com",
            path_and_query: &self.target,
            headers: &headers,
            body: &self.body,
        };
        let prepared = PreparedSignature::prepare(&parts, &SignaturePolicy::strict(), now)
            .map_err(|e| e.failure)?;
        if prepared.keyid() != &keyid(key) {
            return Err(prepared.unknown_keyid().failure);
        }
        let verified = prepared.verify(key).map_err(|e| e.failure)?;
        Ok(verified
            .nonce
            .expect("strict policy has a nonce")
            .to_string())
    }
}

#[allow(clippy::too_many_arguments)]
fn sign(
    seed: [u8; 32],
    method: &str,
    target: &str,
    extra_headers: &[(String, String)],
    body: &[u8],
    components: Option<Vec<String>>,
    params: Vec<SigParam>,
    created: i64,
) -> Signed {
    let key = ed25519_dalek::SigningKey::from_bytes(&seed);
    let mut headers: Vec<(String, Vec<u8>)> = vec![
        ("Host".to_owned(), b"api.example.com".to_vec()),
        ("Content-Type".to_owned(), b"application/json".to_vec()),
        ("X-Request-ID".to_owned(), b"req-42".to_vec()),
    ];
    headers.extend(
        extra_headers
            .iter()
            .map(|(n, v)| (n.clone(), v.as_bytes().to_vec())),
    );
    let borrowed: Vec<(&str, &[u8])> = headers
        .iter()
        .map(|(n, v)| (n.as_str(), v.as_slice()))
        .collect();
    let parts = HttpRequestParts {
        method,
        scheme: "https",
        authority: "api.example.com",
        path_and_query: target,
        headers: &borrowed,
        body,
    };
    let mut options = SignOptions::new(keyid(&key.verifying_key()), created, created + 300);
    options.components = components;
    options.params = params;
    let rng = CountingRng(AtomicU64::new(seed[0].into()));
    let signed = sign_request(&parts, &key, &options, &rng).expect("signable request");
    drop(borrowed);
    for (n, v) in signed.headers() {
        headers.push((n.to_owned(), v.as_bytes().to_vec()));
    }
    Signed {
        method: method.to_owned(),
        target: target.to_owned(),
        headers,
        body: body.to_vec(),
    }
}

#[test]
fn signer_output_has_the_documented_shape() {
    let seed = [9u8; 32];
    let key = ed25519_dalek::SigningKey::from_bytes(&seed);
    let s = sign(
        seed,
        "POST",
        "/api/v1/payments",
        &[],
        b"{}",
        None,
        SignOptions::new(KeyId::new("k"), 0, 0).params,
        1_790_640_000,
    );
    let header = |name: &str| {
        let v = &s.headers.iter().find(|(n, _)| n == name).unwrap().1;
        String::from_utf8(v.clone()).unwrap()
    };
    assert_eq!(
        header("Signature-Input"),
        format!(
            "sig1=(\"@method\" \"@path\" \"content-digest\" \"x-request-id\" \"x-request-nonce\");created=1790640000;expires=1790640300;keyid=\"{}\";alg=\"ed25519\"",
            keyid(&key.verifying_key())
        )
    );
    assert_eq!(
        header("Content-Digest"),
        "sha-256=:RBNvo1WzZ4oRRq0W9+hknpT7T8If536DEMBg9hyq/4o=:"
    );
    assert_eq!(
        header("X-Request-Nonce"),
        "CQoLDA0ODxAREhMUFRYXGBkaGxwdHh8g"
    );
    assert!(Nonce::parse(header("X-Request-Nonce").as_bytes()).is_ok());
    let now = Timestamp::from_unix_secs(1_790_640_001);
    assert_eq!(
        s.prepare_and_verify(&key.verifying_key(), now),
        Ok("CQoLDA0ODxAREhMUFRYXGBkaGxwdHh8g".to_owned())
    );
    // The whole answer an adapter gives for a tampered body.
    let mut tampered = s;
    tampered.body = b"{ }".to_vec();
    let headers: Vec<(&str, &[u8])> = tampered
        .headers
        .iter()
        .map(|(n, v)| (n.as_str(), v.as_slice()))
        .collect();
    let parts = HttpRequestParts {
        method: "POST",
        scheme: "https",
        authority: "api.example.com",
        path_and_query: "/api/v1/payments",
        headers: &headers,
        body: &tampered.body,
    };
    let err = PreparedSignature::prepare(&parts, &SignaturePolicy::default(), now).unwrap_err();
    let api = err.into_api_error(payments_core::auth::Environment::Sandbox);
    assert_eq!(api.code, ErrorCode::SignatureInvalid);
    assert_eq!(api.message, "content-digest does not match body");
    assert!(api
        .signature_base
        .unwrap()
        .starts_with("\"@method\": POST\n\"@path\": /api/v1/payments\n"));
}

const MUTABLE: &[&str] = &[
    "body",
    "x-request-id",
    "content-type",
    "method",
    "path",
    "query",
];

fn arb_components() -> impl Strategy<Value = Vec<String>> {
    let base: Vec<String> = [
        "@method",
        "@path",
        "@query",
        "content-digest",
        "x-request-id",
        "x-request-nonce",
    ]
    .iter()
    .map(|s| s.to_string())
    .collect();
    let optional = proptest::sample::subsequence(
        vec![
            "@authority".to_string(),
            "@target-uri".to_string(),
            "@scheme".to_string(),
            "@request-target".to_string(),
            "content-type".to_string(),
            "x-extra".to_string(),
        ],
        0..=6,
    );
    (Just(base), optional)
        .prop_map(|(mut b, o)| {
            b.extend(o);
            b
        })
        .prop_shuffle()
}

fn arb_params() -> impl Strategy<Value = Vec<SigParam>> {
    (any::<bool>(), any::<bool>(), any::<bool>())
        .prop_map(|(alg, nonce, tag)| {
            let mut p = vec![SigParam::Created, SigParam::Expires, SigParam::Keyid];
            if alg {
                p.push(SigParam::Alg);
            }
            if nonce {
                p.push(SigParam::Nonce);
            }
            if tag {
                p.push(SigParam::Other {
                    name: "tag".to_owned(),
                    value: "payments".to_owned(),
                });
            }
            p
        })
        .prop_shuffle()
}

fn header_value() -> impl Strategy<Value = String> {
    // Visible ASCII and inner spaces; the ends are trimmed by both sides anyway.
    "[!-~][ -~]{0,30}[!-~]"
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(64))]

    #[test]
    fn signed_requests_verify(
        seed in any::<[u8; 32]>(),
        body in proptest::collection::vec(any::<u8>(), 0..256),
        extra in header_value(),
        components in arb_components(),
        params in arb_params(),
        query in "[a-z0-9=&%]{1,20}",
        now_offset in -60i64..=300,
    ) {
        let created = 1_790_640_000;
        let target = format!("/api/v1/payments?{query}");
        let s = sign(
            seed, "POST", &target,
            &[("X-Extra".to_owned(), extra)],
            &body, Some(components), params, created,
        );
        let key = ed25519_dalek::SigningKey::from_bytes(&seed).verifying_key();
        let now = Timestamp::from_unix_secs(created + now_offset);
        prop_assert!(s.prepare_and_verify(&key, now).is_ok());
    }

    #[test]
    fn any_single_byte_mutation_fails(
        seed in any::<[u8; 32]>(),
        body in proptest::collection::vec(any::<u8>(), 1..256),
        components in arb_components(),
        which in proptest::sample::select(MUTABLE),
        position in any::<proptest::sample::Index>(),
        xor in 1u8..=255,
    ) {
        let created = 1_790_640_000;
        let mut s = sign(
            seed, "POST", "/api/v1/payments?mode=x",
            &[("X-Extra".to_owned(), "extra".to_owned())],
            &body, Some(components), SignOptions::new(KeyId::new("k"), 0, 0).params, created,
        );
        let flip = |bytes: &mut Vec<u8>| {
            let i = position.index(bytes.len());
            bytes[i] ^= xor;
        };
        match which {
            "body" => flip(&mut s.body),
            "method" => {
                let mut m = s.method.clone().into_bytes();
                flip(&mut m);
                s.method = String::from_utf8_lossy(&m).into_owned();
            }
            "path" | "query" => {
                let (path, query) = s.target.split_once('?').unwrap();
                let (mut p, mut q) = (path.as_bytes().to_vec(), query.as_bytes().to_vec());
                if which == "path" { flip(&mut p) } else { flip(&mut q) }
                s.target = format!("{}?{}", String::from_utf8_lossy(&p), String::from_utf8_lossy(&q));
            }
            header => {
                let v = &mut s.headers.iter_mut().find(|(n, _)| n.eq_ignore_ascii_case(header)).unwrap().1;
                flip(v);
            }
        }
        let key = ed25519_dalek::SigningKey::from_bytes(&seed).verifying_key();
        let now = Timestamp::from_unix_secs(created);
        let result = s.prepare_and_verify(&key, now);
        let covered = which != "content-type" || s.headers.iter().any(|(n, v)| n == "Signature-Input" && v.windows(14).any(|w| w == b"\"content-type\""));
        if covered {
            prop_assert!(result.is_err(), "mutating {} still verified", which);
        }
    }
}
