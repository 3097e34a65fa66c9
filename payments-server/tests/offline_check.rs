//! `payments-server check request` and `check callback`, the real binary with no server and
//! no database: a request signed by `payments-client` is accepted (exit 0) and copies changed
//! after signing are refused (exit 1) with the code and the reason the API answers; a callback
//! it writes is verified by the example receiver's verifier, and `--verify` refuses a changed
//! one.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use clap::Parser as _;
use payments_client::reqwest::Method;
use payments_client::{MerchantClient, PreparedRequest, SignSpec};
use payments_core::auth::keys::{generate_signing_key, public_key_to_base64, public_key_to_pem};
use payments_core::auth::token::IssuedToken;
use payments_core::auth::Environment;
use payments_core::callback::{CallbackSecret, SIGNATURE_HEADER, TIMESTAMP_HEADER};
use payments_core::service::RawRequest;
use payments_core::Timestamp;
use payments_examples::receiver::ReceiverArgs;
use payments_http::system::OsRandom;
use serde_json::Value;

/// `created` of the signed requests: the checks run `--at` a time near it.
const CREATED: i64 = 1_790_856_000;
const BODY: &[u8] =
    br#"{"merchant_payment_id":"order-1","amount":"100.00","payment_method":"sbp"}"#;

fn at(secs: i64) -> String {
    Timestamp::from_unix_secs(secs).to_rfc3339()
}

fn run(args: &[&str]) -> (Output, Value) {
    let out = Command::new(env!("CARGO_BIN_EXE_payments-server"))
        .args(args)
        .env_remove("PAYMENTS_CHECK_TOKEN")
        .env_remove("PAYMENTS_CHECK_SECRET")
        .output()
        .expect("the binary runs");
    let json = serde_json::from_slice(&out.stdout).unwrap_or(Value::Null);
    (out, json)
}

fn write(dir: &Path, name: &str, bytes: &[u8]) -> PathBuf {
    let path = dir.join(name);
    std::fs::write(&path, bytes).unwrap();
    path
}

struct Signed {
    dir: tempfile::TempDir,
    client: MerchantClient,
    request: PreparedRequest,
    token: String,
    public_pem: PathBuf,
}

fn signed() -> Signed {
    let key = generate_signing_key(&OsRandom);
    let token = IssuedToken::generate(Environment::Sandbox, &OsRandom)
        .secret()
        .to_owned();
    let client = MerchantClient::from_key("https://pay.example.com", &token, key.clone()).unwrap();
    let spec = SignSpec {
        created: Some(CREATED),
        ..SignSpec::default()
    };
    let request = client
        .prepare(Method::POST, "/api/v1/payments", BODY, Some(&spec))
        .unwrap();
    let dir = tempfile::tempdir().unwrap();
    let public_pem = write(
        dir.path(),
        "key.pub.pem",
        public_key_to_pem(&key.verifying_key()).as_bytes(),
    );
    Signed {
        dir,
        client,
        request,
        token,
        public_pem,
    }
}

impl Signed {
    /// `check request --json` on `request` written as the client sends it, with `extra` flags
    /// (`--at` 10 s after `created` unless they name one).
    fn check(&self, request: &PreparedRequest, extra: &[&str]) -> (Output, Value) {
        let file = write(self.dir.path(), "request.http", &self.client.wire(request));
        let pem = self.public_pem.to_str().unwrap();
        let file = file.to_str().unwrap();
        let at = at(CREATED + 10);
        let mut args = vec!["check", "request", "--json", "--public-key", pem];
        if !extra.contains(&"--at") {
            args.extend(["--at", &at]);
        }
        args.extend(extra);
        args.push(file);
        run(&args)
    }
}

fn assert_refused(out: &Output, json: &Value, code: &str, message: &str) {
    assert_eq!(out.status.code(), Some(1), "{json}");
    assert_eq!(json["accepted"], false, "{json}");
    assert_eq!(json["code"], code, "{json}");
    assert_eq!(json["message"], message, "{json}");
}

#[test]
fn a_request_signed_by_the_client_is_accepted_and_each_change_refused() {
    let s = signed();
    let (out, json) = s.check(&s.request, &["--token", &s.token]);
    assert_eq!(
        out.status.code(),
        Some(0),
        "{json} {}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert_eq!(json["accepted"], true, "{json}");
    assert_eq!(json["token"], "the expected one", "{json}");
    let not_checked = json["not_checked"].to_string();
    assert!(not_checked.contains("nonce reuse"), "{json}");

    // The body changed after signing.
    let mut changed = s.request.clone();
    changed.body = String::from_utf8_lossy(BODY)
        .replace("100.00", "1000.00")
        .into_bytes();
    let (out, json) = s.check(&changed, &[]);
    assert_refused(
        &out,
        &json,
        "signature_invalid",
        "content-digest does not match body",
    );

    // A covered header changed: the base the server built is shown, without the token.
    let mut changed = s.request.clone();
    for (name, value) in &mut changed.headers {
        if name == "X-Request-ID" {
            *value = "another-id".into();
        }
    }
    let (out, json) = s.check(&changed, &[]);
    assert!(json["message"]
        .as_str()
        .unwrap_or_default()
        .starts_with("signature does not verify: signature_base is the base the server verified"));
    assert_eq!(out.status.code(), Some(1), "{json}");
    let base = json["signature_base"].as_str().unwrap_or_default();
    assert!(base.contains("\"x-request-id\": another-id"), "{json}");

    // Another project's key (base64), another token, and a check long after `created`.
    let other = public_key_to_base64(&generate_signing_key(&OsRandom).verifying_key());
    let file = write(s.dir.path(), "request.http", &s.client.wire(&s.request));
    let (out, json) = run(&[
        "check",
        "request",
        "--json",
        "--public-key",
        &other,
        "--at",
        &at(CREATED + 10),
        file.to_str().unwrap(),
    ]);
    assert_refused(&out, &json, "signature_invalid", "unknown keyid");
    let stranger = IssuedToken::generate(Environment::Sandbox, &OsRandom);
    let (out, json) = s.check(&s.request, &["--token", stranger.secret()]);
    assert_refused(&out, &json, "token_invalid", "unknown token");
    let late = at(CREATED + 400);
    let (out, json) = s.check(&s.request, &["--at", &late]);
    assert_refused(&out, &json, "signature_invalid", "signature expired");
}

#[test]
fn the_text_answer_names_the_code_and_what_is_not_checked() {
    let s = signed();
    let mut changed = s.request.clone();
    changed.body = b"{}".to_vec();
    let file = write(s.dir.path(), "request.http", &s.client.wire(&changed));
    let (out, _) = run(&[
        "check",
        "request",
        "--public-key",
        s.public_pem.to_str().unwrap(),
        "--at",
        &at(CREATED + 10),
        file.to_str().unwrap(),
    ]);
    let text = String::from_utf8_lossy(&out.stdout);
    assert_eq!(out.status.code(), Some(1), "{text}");
    assert!(
        text.starts_with("refused: signature_invalid: content-digest does not match body\n"),
        "{text}"
    );
    assert!(text.contains("not checked offline"), "{text}");
}

#[test]
fn a_callback_it_writes_is_verified_by_the_example_receiver() {
    let secret = CallbackSecret::generate(&OsRandom);
    let signed_at = CREATED;
    let (out, _) = run(&[
        "check",
        "callback",
        "--secret",
        secret.expose(),
        "--at",
        &at(signed_at),
        "--url",
        "http://shop.example:8080/hooks/payments",
    ]);
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let raw = RawRequest::parse(&out.stdout).expect("one HTTP/1.1 request");
    assert_eq!((raw.method(), raw.target()), ("POST", "/hooks/payments"));
    let names: Vec<&str> = raw.headers().map(|(n, _)| n).collect();
    assert_eq!(
        names,
        [
            "Host",
            "Content-Type",
            "X-Callback-Event-Id",
            "X-Callback-Timestamp",
            "X-Callback-Signature",
            "Content-Length"
        ]
    );
    let header = |name: &str| {
        let (_, v) = raw.headers().find(|(n, _)| *n == name).unwrap();
        String::from_utf8(v.to_vec()).unwrap()
    };
    let event: Value = serde_json::from_slice(raw.body()).unwrap();
    assert_eq!(
        event["event_id"].as_str().unwrap(),
        header("X-Callback-Event-Id")
    );

    // The example receiver's verifier, from its own command line.
    let receiver = ReceiverArgs::try_parse_from(["callback_receiver", "--secret", secret.expose()])
        .unwrap()
        .verifier()
        .unwrap();
    let now = Timestamp::from_unix_secs(signed_at + 30);
    let verify = |body: &[u8]| {
        receiver.verify(
            &header(TIMESTAMP_HEADER),
            &header(SIGNATURE_HEADER),
            body,
            now,
        )
    };
    verify(raw.body()).expect("the receiver accepts it");
    assert!(verify(b"{}").is_err());

    // `--verify`: the file as written is accepted, a changed body refused.
    let dir = tempfile::tempdir().unwrap();
    let file = write(dir.path(), "callback.http", &out.stdout);
    let check_at = at(signed_at + 30);
    let verify_file = |file: &Path| {
        run(&[
            "check",
            "callback",
            "--json",
            "--secret",
            secret.expose(),
            "--at",
            &check_at,
            "--verify",
            file.to_str().unwrap(),
        ])
    };
    let (out_ok, json) = verify_file(&file);
    assert_eq!(out_ok.status.code(), Some(0), "{json}");
    assert_eq!(json["accepted"], true, "{json}");
    let tampered = String::from_utf8_lossy(&out.stdout).replace("1500.00", "9500.00");
    let file = write(dir.path(), "tampered.http", tampered.as_bytes());
    let (out_bad, json) = verify_file(&file);
    assert_eq!(out_bad.status.code(), Some(1), "{json}");
    assert_eq!(json["accepted"], false, "{json}");
}
