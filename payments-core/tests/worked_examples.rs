//! The worked examples of `docs/signatures.md` and `docs/callbacks.md`, computed by the core's
//! own signer and callback signing with fixed inputs. The expected values are pasted in the
//! docs; if the signer changes, this test fails before the docs go stale. Run with
//! `--nocapture` to print them.

use payments_core::auth::keys::{keyid, parse_public_key, parse_signing_key_pem};
use payments_core::auth::signature::{sign_request, SignOptions};
use payments_core::auth::{HttpRequestParts, Nonce, PreparedSignature, SignaturePolicy};
use payments_core::callback::{sign_payload, signature_header, CallbackSecret, CallbackVerifier};
use payments_core::{RandomSource, Timestamp};

const PRIVATE_PEM: &str = include_str!("vectors/rfc9421-test-key-ed25519.pem");
const PUBLIC_PEM: &str = include_str!("vectors/rfc9421-test-key-ed25519.pub.pem");

/// Never called: every example gives its nonce.
struct NoRandom;
impl RandomSource for NoRandom {
    fn fill(&self, _: &mut [u8]) {
        unreachable!("the worked examples use fixed nonces")
    }
}

const CREATED: i64 = 1_790_856_000; // 2026-10-01T12:00:00Z
const BODY: &str = r#"{"merchant_payment_id":"order-1001","amount":"3400","payment_method":"sbp"}"#;
const REQUEST_ID: &str = "6f1c0a47-3a0e-4d7e-9a55-2b8e0f6d9c11";
const NONCE: &str = "kQ7vN2xR9pL4sT8wZ1yB3c";

#[test]
fn request_signature_worked_example() {
    let key = parse_signing_key_pem(PRIVATE_PEM).unwrap();
    let kid = keyid(&key.verifying_key());
    assert_eq!(
        kid.as_str(),
        "ed25519-poqkLGiymh_W0uP6PZFw-dvez3QJT5SolqXBCW38r0U"
    );
    let headers: Vec<(&str, &[u8])> = vec![
        ("Host", b"127.0.0.1:8080"),
        ("Content-Type", b"application/json"),
        ("X-Request-ID", REQUEST_ID.as_bytes()),
    ];
    let parts = HttpRequestParts {
        method: "POST",
        scheme: "http",
        authority: "127.0.0.1:8080",
        path_and_query: "/api/v1/payments",
        headers: &headers,
        body: BODY.as_bytes(),
    };
    let mut options = SignOptions::new(kid.clone(), CREATED, CREATED + 300);
    options.nonce = Some(Nonce::parse(NONCE.as_bytes()).unwrap());
    let signed = sign_request(&parts, &key, &options, &NoRandom).unwrap();
    println!("Content-Digest: {}", signed.content_digest);
    println!("X-Request-Nonce: {}", signed.x_request_nonce);
    println!("Signature-Input: {}", signed.signature_input);
    println!("Signature: {}", signed.signature);
    println!("--- signature base ---\n{}\n---", signed.signature_base);

    assert_eq!(
        signed.content_digest,
        "sha-256=:FXC5JFyOCZOi17NTXG++ifGmgVphQtG1JbIfBEG5p3E=:"
    );
    assert_eq!(
        signed.signature_input,
        "sig1=(\"@method\" \"@path\" \"content-digest\" \"x-request-id\" \"x-request-nonce\");created=1790856000;expires=1790856300;keyid=\"ed25519-poqkLGiymh_W0uP6PZFw-dvez3QJT5SolqXBCW38r0U\";alg=\"ed25519\""
    );
    assert_eq!(
        signed.signature_base,
        "\"@method\": POST\n\"@path\": /api/v1/payments\n\"content-digest\": sha-256=:FXC5JFyOCZOi17NTXG++ifGmgVphQtG1JbIfBEG5p3E=:\n\"x-request-id\": 6f1c0a47-3a0e-4d7e-9a55-2b8e0f6d9c11\n\"x-request-nonce\": kQ7vN2xR9pL4sT8wZ1yB3c\n\"@signature-params\": (\"@method\" \"@path\" \"content-digest\" \"x-request-id\" \"x-request-nonce\");created=1790856000;expires=1790856300;keyid=\"ed25519-poqkLGiymh_W0uP6PZFw-dvez3QJT5SolqXBCW38r0U\";alg=\"ed25519\""
    );
    assert_eq!(signed.signature, EXPECTED_SIGNATURE);

    // The server's verifier accepts it at a time inside the window.
    let mut all = headers.clone();
    for (n, v) in signed.headers() {
        all.push((n, v.as_bytes()));
    }
    let received = HttpRequestParts {
        headers: &all,
        ..parts
    };
    let prepared = PreparedSignature::prepare(
        &received,
        &SignaturePolicy::strict(),
        Timestamp::from_unix_secs(CREATED + 10),
    )
    .unwrap();
    assert_eq!(prepared.signature_base(), signed.signature_base);
    prepared
        .verify(&parse_public_key(PUBLIC_PEM).unwrap())
        .unwrap();
}

const EXPECTED_SIGNATURE: &str = "sig1=:o5B6yIu06SyHi7glptcrj5H9GTXLohUtbgJUVfQGtvAB2Nsj6zZfUBua4inQIMYNpk9clodQw6TtHybIVhwGCA==:";

#[test]
fn empty_body_digest() {
    assert_eq!(
        payments_core::auth::content_digest_header(b""),
        "sha-256=:47DEQpj8HBSa+/TImW+5JCeuQeRkm5NMpJWZG3hSuFU=:"
    );
}

const CALLBACK_SECRET: &str = "whsec_c2FuZGJveC1leGFtcGxlLXNlY3JldC1kby1ub3QtdXNl";
const PREVIOUS_SECRET: &str = "whsec_b2xkZXItc2FuZGJveC1zZWNyZXQtcm90YXRlZC1hd2F5";
const CALLBACK_TIMESTAMP: i64 = 1_790_857_000;
const CALLBACK_BODY: &str = r#"{"id":"0b9d3a52-6f0e-4c1b-8f7d-2a4e5c6b7d8e","event_id":"5d2f7c1e-9a3b-4e6d-8c0f-1b2a3c4d5e6f","status":"completed","amount":3400,"initial_amount":3400,"currency":"RUB","payment_method":"sbp","bank_code":null,"is_intrabank":false,"merchant_payment_id":"order-1001","rate":11.00,"course":100.00,"is_test":false,"project_id":"7a1e2b3c-4d5e-4f60-8a9b-0c1d2e3f4a5b"}"#;

#[test]
fn callback_signature_worked_example() {
    let secret = CallbackSecret::parse(CALLBACK_SECRET).unwrap();
    let previous = CallbackSecret::parse(PREVIOUS_SECRET).unwrap();
    let hex = sign_payload(&secret, CALLBACK_TIMESTAMP, CALLBACK_BODY.as_bytes());
    let both = signature_header(
        &[&secret, &previous],
        CALLBACK_TIMESTAMP,
        CALLBACK_BODY.as_bytes(),
    );
    println!("X-Callback-Signature: v1={hex}");
    println!("during rotation: {both}");
    assert_eq!(hex, EXPECTED_HMAC);
    assert_eq!(both, EXPECTED_ROTATION_HEADER);

    let now = Timestamp::from_unix_secs(CALLBACK_TIMESTAMP + 2);
    let verifier = CallbackVerifier::new(vec![secret]);
    verifier
        .verify(
            &CALLBACK_TIMESTAMP.to_string(),
            &both,
            CALLBACK_BODY.as_bytes(),
            now,
        )
        .unwrap();
    assert!(verifier
        .verify(
            &CALLBACK_TIMESTAMP.to_string(),
            &both,
            CALLBACK_BODY.replace("3400", "3401").as_bytes(),
            now,
        )
        .is_err());
}

const EXPECTED_HMAC: &str = "597adbb7f1be35e9c0a505414b8e69759a9fe1e85dbeb584c31c7f2a2ac629cc";
const EXPECTED_ROTATION_HEADER: &str = "v1=597adbb7f1be35e9c0a505414b8e69759a9fe1e85dbeb584c31c7f2a2ac629cc,v1=814ce80e73fdaf2f32b954485c10fc088435963d09955dc2f9ffcaa5a710af3b";
