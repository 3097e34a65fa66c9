//! A merchant's offline check of its request signing, with no server: a request signed by
//! `payments-client` (the signer the guides and clients use) is checked with the core's
//! offline check, `payments_core::service::check_request_offline` (the server's own checks,
//! with the project's public key for its records), then changed after signing three ways,
//! each refused with the code the API would answer.
//!
//! ```sh
//! cargo run -p payments-examples --example offline_check
//! ```
//!
//! It prints one line per case and exits non-zero if a case is not answered as expected. The
//! same checks from any language's CI: `payments-server check request` (docs/integration/README.md,
//! "Check your integration offline").

use std::process::ExitCode;

use payments_client::reqwest::Method;
use payments_client::{MerchantClient, PreparedRequest};
use payments_core::auth::keys::generate_signing_key;
use payments_core::auth::token::IssuedToken;
use payments_core::auth::Environment;
use payments_core::service::{check_request_offline, RawRequest};
use payments_core::{Clock as _, ErrorCode};
use payments_http::system::{OsRandom, SystemClock};

fn main() -> Result<ExitCode, Box<dyn std::error::Error>> {
    let key = generate_signing_key(&OsRandom);
    let token = IssuedToken::generate(Environment::Sandbox, &OsRandom);
    let client = MerchantClient::from_key("https://pay.example.com", token.secret(), key.clone())?;
    let body = br#"{"merchant_payment_id":"order-1","amount":"100.00","payment_method":"sbp"}"#;
    let signed = client.prepare(
        Method::POST,
        "/api/v1/payments",
        body,
        Some(&Default::default()),
    )?;

    let mut changed_body = signed.clone();
    // Another amount, the way a bug between signing and sending would change the body.
    changed_body.body = String::from_utf8_lossy(body)
        .replace("\"100.00\"", "\"1000.00\"")
        .into_bytes();
    let mut changed_header = signed.clone();
    for (name, value) in &mut changed_header.headers {
        if name.eq_ignore_ascii_case("x-request-id") {
            *value = "another-request-id".into();
        }
    }
    let other_project = generate_signing_key(&OsRandom).verifying_key();

    let cases: [(&str, &PreparedRequest, _, Option<ErrorCode>); 4] = [
        ("as signed", &signed, key.verifying_key(), None),
        (
            "body changed",
            &changed_body,
            key.verifying_key(),
            Some(ErrorCode::SignatureInvalid),
        ),
        (
            "covered header changed",
            &changed_header,
            key.verifying_key(),
            Some(ErrorCode::SignatureInvalid),
        ),
        (
            "another project's key",
            &signed,
            other_project,
            Some(ErrorCode::SignatureInvalid),
        ),
    ];
    let now = SystemClock.now();
    let mut all_as_expected = true;
    for (case, request, public_key, expected) in cases {
        // The bytes the client would put on the wire, parsed as the server reads them.
        let raw = RawRequest::parse(&client.wire(request))?;
        let answer = raw.with_parts("https", |parts| {
            check_request_offline(parts, &public_key, Some(token.secret()), now)
        });
        let (code, said) = match &answer {
            Ok(check) => (None, format!("accepted (keyid {})", check.signature.keyid)),
            Err(refusal) => (
                Some(refusal.code()),
                format!("{}: {refusal}", refusal.code().as_str()),
            ),
        };
        let verdict = if code == expected {
            "as expected"
        } else {
            "UNEXPECTED"
        };
        all_as_expected &= code == expected;
        println!("{case:<24} {said}  [{verdict}]");
    }
    Ok(if all_as_expected {
        ExitCode::SUCCESS
    } else {
        ExitCode::FAILURE
    })
}
