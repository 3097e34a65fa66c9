//! The seed inputs of every target: the RFC 9421 / RFC 9530 vectors and the inputs of the unit
//! and integration tests, in each target's input format. `tests/replay.rs` runs them, and
//! writes them to `fuzz/corpus/<target>/seed-<name>` when asked (see docs/security.md).

use base64::engine::general_purpose::STANDARD;
use base64::Engine as _;
use payments_core::auth::keys::keyid;
use payments_core::auth::signature::{sign_request, SigParam, SignOptions};
use payments_core::callback::{sign_payload, CallbackSecret};
use payments_core::RandomSource;

use crate::callback_verifier::SECRET_A;
use crate::join;
use crate::signature::Request;

/// One seed: the target, a name (for the file), the input.
#[derive(Debug, Clone)]
pub struct Seed {
    /// The target's name, as in [`crate::TARGETS`].
    pub target: &'static str,
    /// A short name, unique within the target.
    pub name: String,
    /// The input.
    pub data: Vec<u8>,
}

const B26_REQUEST: &[u8] =
    include_bytes!("../../payments-core/tests/vectors/rfc9421-b26-request.http");
const B4_REQUEST: &[u8] =
    include_bytes!("../../payments-core/tests/vectors/rfc9421-b4-request.http");
const DIGESTS: &str = include_str!("../../payments-core/tests/vectors/rfc9530-content-digest.tsv");
const PUB_PEM: &str =
    include_str!("../../payments-core/tests/vectors/rfc9421-test-key-ed25519.pub.pem");
const RAW_B64: &str =
    include_str!("../../payments-core/tests/vectors/rfc9421-test-key-ed25519.raw.b64");

/// Every seed of every target.
pub fn seeds() -> Vec<Seed> {
    let mut out = Vec::new();
    let mut add = |target: &'static str, name: &str, data: Vec<u8>| {
        out.push(Seed {
            target,
            name: name.to_owned(),
            data,
        });
    };
    for (name, data) in signature() {
        add("signature", &name, data);
    }
    for (name, data) in content_digest() {
        add("content_digest", &name, data);
    }
    for (i, body) in CREATE_BODIES.iter().enumerate() {
        add(
            "create_body",
            &format!("test-{i:02}"),
            body.as_bytes().to_vec(),
        );
    }
    for (i, url) in CALLBACK_URLS.iter().enumerate() {
        add(
            "callback_url",
            &format!("test-{i:02}"),
            url.as_bytes().to_vec(),
        );
    }
    for (name, data) in public_key() {
        add("public_key", &name, data);
    }
    for (i, (endpoint, body)) in OPERATOR_BODIES.iter().enumerate() {
        let selector = crate::operator_body::ENDPOINTS
            .iter()
            .position(|(name, _, _)| name == endpoint)
            .expect("a known endpoint");
        let selector = u8::try_from(selector).expect("few endpoints");
        add(
            "operator_body",
            &format!("{endpoint}-{i:02}"),
            [&[selector][..], body.as_bytes()].concat(),
        );
    }
    for (i, (rules, probes)) in ALLOW_LISTS.iter().enumerate() {
        add(
            "allow_list",
            &format!("test-{i:02}"),
            join(&[rules.as_bytes(), probes]),
        );
    }
    for (i, parts) in FORWARDED_FOR.iter().enumerate() {
        let parts: Vec<&[u8]> = parts.iter().map(|p| p.as_bytes()).collect();
        add("forwarded_for", &format!("test-{i:02}"), join(&parts));
    }
    for (name, data) in callback_verifier() {
        add("callback_verifier", &name, data);
    }
    for (i, parts) in LEDGER_INPUTS.iter().enumerate() {
        let parts: Vec<&[u8]> = parts.iter().map(|p| p.as_bytes()).collect();
        add("ledger_input", &format!("test-{i:02}"), join(&parts));
    }
    out
}

/// The ledger's inputs of the unit and integration tests: `[query, amount, address,
/// reference]`.
const LEDGER_INPUTS: &[[&str; 4]] = &[
    [
        "kind=payout&limit=5",
        "125.5",
        "TR7NHqjeKQxGTCi8q8ZY4pL8otSzgjLj6t",
        "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa",
    ],
    [
        "from=2026-10-01T00:00:00Z&to=2026-11-01T00:00:00Z",
        "-3.25",
        "0xdAC17F958D2ee523a2206206994597C13D831ec7",
        "0xABABABABABABABABABABABABABABABABABABABABABABABABABABABABABABABAB",
    ],
    [
        "cursor=djE6MTc5MDg1NjAwMDAwMDo0Mg&created_from=2026-10-01T00:00:00Z",
        "999999999999.9999",
        "TR7NHqjeKQxGTCi8q8ZY4pL8otSzgjLj6u",
        "abc",
    ],
    [
        "kind=refund&kind=credit",
        "1.00001",
        "bc1qxy2kgdygjrsqtzq2n0yrf2493p83kkfjhx0wlh",
        "",
    ],
    [
        "from=2025-01-01T00:00:00Z&to=2026-11-01T00:00:00Z",
        "0",
        "0x",
        "g",
    ],
    ["limit=0&limit=+5", "-0", "T", "0x"],
];

/// A counter as randomness, for reproducible nonces.
struct Counter;

impl RandomSource for Counter {
    fn fill(&self, buf: &mut [u8]) {
        for (i, b) in buf.iter_mut().enumerate() {
            *b = u8::try_from(i).unwrap_or(0);
        }
    }
}

fn signed(
    method: &str,
    target: &str,
    body: &[u8],
    components: Option<Vec<String>>,
    params: Option<Vec<SigParam>>,
) -> Vec<u8> {
    let key = ed25519_dalek::SigningKey::from_bytes(&[7; 32]);
    let headers: Vec<(String, Vec<u8>)> = vec![
        ("Host".to_owned(), b"api.example.com".to_vec()),
        ("Content-Type".to_owned(), b"application/json".to_vec()),
        ("X-Request-ID".to_owned(), b"req-42".to_vec()),
    ];
    let mut request = Request {
        method: method.to_owned(),
        target: target.to_owned(),
        authority: "api.example.com".to_owned(),
        headers,
        body: body.to_vec(),
    };
    let created = 1_790_856_000;
    let mut options = SignOptions::new(keyid(&key.verifying_key()), created, created + 300);
    options.components = components;
    if let Some(params) = params {
        options.params = params;
    }
    let signed = request
        .with_parts(|parts| sign_request(parts, &key, &options, &Counter))
        .expect("a signable request");
    for (name, value) in signed.headers() {
        request
            .headers
            .push((name.to_owned(), value.as_bytes().to_vec()));
    }
    request.to_bytes()
}

fn signature() -> Vec<(String, Vec<u8>)> {
    let mut out = vec![
        ("rfc9421-b26".to_owned(), B26_REQUEST.to_vec()),
        ("rfc9421-b4".to_owned(), B4_REQUEST.to_vec()),
    ];
    out.extend(signed_requests());
    out.extend(b26_edits());
    out
}

/// Requests signed here with the test key: the strict defaults, every derived component, a
/// nonce and an extra parameter.
fn signed_requests() -> Vec<(String, Vec<u8>)> {
    let body = br#"{"merchant_payment_id":"o-1","amount":"100","payment_method":"sbp"}"#;
    let names = |n: &[&str]| Some(n.iter().map(|s| (*s).to_owned()).collect::<Vec<_>>());
    vec![
        (
            "strict-post".to_owned(),
            signed("POST", "/api/v1/payments", body, None, None),
        ),
        (
            "strict-get-query".to_owned(),
            signed(
                "GET",
                "/api/v1/payments?merchant_payment_id=o-1",
                b"",
                None,
                None,
            ),
        ),
        (
            "all-derived".to_owned(),
            signed(
                "PUT",
                "/a/b?c=d&e",
                body,
                names(&[
                    "@method",
                    "@target-uri",
                    "@authority",
                    "@scheme",
                    "@request-target",
                    "@path",
                    "@query",
                    "content-digest",
                    "content-type",
                    "x-request-id",
                    "x-request-nonce",
                ]),
                None,
            ),
        ),
        (
            "nonce-and-tag".to_owned(),
            signed(
                "POST",
                "/api/v1/payments",
                body,
                None,
                Some(vec![
                    SigParam::Created,
                    SigParam::Expires,
                    SigParam::Keyid,
                    SigParam::Alg,
                    SigParam::Nonce,
                    SigParam::Other {
                        name: "tag".to_owned(),
                        value: "fuzz".to_owned(),
                    },
                ]),
            ),
        ),
    ]
}

/// Hand-made edits of B.2.6: a duplicate label, a component parameter, an unknown derived
/// component, a non-ASCII covered value (refused); another `Signature` member (ignored); two
/// labels without `sig1` (refused).
fn b26_edits() -> Vec<(String, Vec<u8>)> {
    let b26 = String::from_utf8_lossy(B26_REQUEST).into_owned();
    let edits: [(&str, &str, &str); 6] = [
        (
            "duplicate-label",
            "Signature-Input: sig-b26=",
            "Signature-Input: sig-b26=(\"@method\");created=1, sig-b26=",
        ),
        ("component-parameter", "(\"date\" ", "(\"date\";sf "),
        ("unknown-derived", "(\"date\" ", "(\"@status\" "),
        (
            "non-ascii-value",
            "Content-Type: application/json",
            "Content-Type: appl\u{e9}",
        ),
        (
            "extra-signature-member",
            "Signature: sig-b26=",
            "Signature: other=:AAAA:, sig-b26=",
        ),
        (
            "two-labels",
            "Signature-Input: sig-b26=",
            "Signature-Input: other=(\"@method\");created=1618884473;keyid=\"k\", sig-b26=",
        ),
    ];
    edits
        .into_iter()
        .map(|(name, from, to)| (name.to_owned(), b26.replacen(from, to, 1).into_bytes()))
        .collect()
}

fn content_digest() -> Vec<(String, Vec<u8>)> {
    let mut out = Vec::new();
    for (i, line) in DIGESTS
        .lines()
        .filter(|l| !l.starts_with('#') && !l.is_empty())
        .enumerate()
    {
        let mut fields = line.split('\t');
        let body: String = serde_json::from_str(fields.next().expect("a body"))
            .expect("the body is a JSON string");
        let sha256 = fields.next().expect("a sha-256 digest");
        let sha512 = fields.next().unwrap_or("");
        out.push((
            format!("rfc9530-{i}-sha256"),
            join(&[sha256.as_bytes(), body.as_bytes()]),
        ));
        if !sha512.is_empty() {
            out.push((
                format!("rfc9530-{i}-sha512"),
                join(&[sha512.as_bytes(), body.as_bytes()]),
            ));
            out.push((
                format!("rfc9530-{i}-both"),
                join(&[format!("{sha512}, {sha256}").as_bytes(), body.as_bytes()]),
            ));
        }
    }
    for (i, header) in [
        "sha-256=abc",
        "sha-256=:AAAA:",
        "sha-256=(:AAAA:)",
        "sha-256=:not base64",
        "sha-512=:AAAA:",
        "sha-256=:47DEQpj8HBSa+/TImW+5JCeuQeRkm5NMpJWZG3hSuFU=:;p=1, md5=?0",
    ]
    .iter()
    .enumerate()
    {
        out.push((format!("test-{i}"), join(&[header.as_bytes(), b""])));
    }
    out
}

const CREATE_BODIES: &[&str] = &[
    r#"{"merchant_payment_id":"order-1","amount":"3400","payment_method":"sbp"}"#,
    r#"{"merchant_payment_id":"order-1","amount":3400.0,"payment_method":"sbp","currency":"RUB","geo_code":"RU","bank_code":"  ","is_intrabank":false}"#,
    r#"{"merchant_payment_id":"o.1_a:b-c","amount":"1","payment_method":"sbp","deadline":1}"#,
    r#"{"merchant_payment_id":"o.1_a:b-c","amount":"1","payment_method":"sbp","amount":"2"}"#,
    r#"{"amount":"1","payment_method":"sbp"}"#,
    r#"{"merchant_payment_id":"a b","amount":"1","payment_method":"sbp"}"#,
    r#"{"merchant_payment_id":"a","amount":1e3,"payment_method":"sbp"}"#,
    r#"{"merchant_payment_id":"a","amount":"1.1234567","payment_method":"sbp"}"#,
    r#"{"merchant_payment_id":"a","amount":-1,"payment_method":"sbp"}"#,
    r#"{"merchant_payment_id":"a","amount":"1","payment_method":"cash"}"#,
    r#"{"merchant_payment_id":"a","amount":"1","payment_method":"card_transfer","currency":"rub","geo_code":"kz"}"#,
    r#"{"merchant_payment_id":"a","amount":"100.000","payment_method":"sbp","bank_code":"sber","is_intrabank":true}"#,
    r#"{"merchant_payment_id":"a","amount":"100.01","payment_method":"sbp","bank_code":"Сбербанк"}"#,
    r#"{"merchant_payment_id":"a","amount":"1","payment_method":"sbp","callback_url":"http://example.com/cb"}"#,
    r#"{"merchant_payment_id":"a","amount":"1","payment_method":"sbp","callback_url":"https://shop.example.com/payments/cb?x=1"}"#,
    r#"{"merchant_payment_id":"a","amount":"1","payment_method":"sbp","callback_url":"http://127.0.0.1:9000/cb"}"#,
    r#"{"merchant_payment_id":"a","amount":"999999999999999999.999999","payment_method":"sbp","callback_url":null,"bank_code":null}"#,
    "[1,2]",
    "{",
    "",
];

const CALLBACK_URLS: &[&str] = &[
    "https://merchant.example.com/cb",
    "https://8.8.8.8/hook",
    "https://[2606:4700::1111]/x",
    "HTTPS://Merchant.Example.COM:8443/a?b=c",
    "https://[::ffff:8.8.8.8]/",
    "https://127.0.0.1.nip.io/",
    "https://bücher.example/cb",
    "http://127.0.0.1:9000/cb",
    "http://localhost/cb",
    "http://[::1]:8080/",
    "https://10.0.0.1/",
    "https://192.168.0.10:8443/",
    "https://127.0.0.1./",
    "https://169.254.169.254/latest/meta-data",
    "https://100.64.0.1/",
    "https://0.0.0.0/",
    "https://255.255.255.255/",
    "https://198.18.0.1/",
    "https://[fd00::1]/",
    "https://[fe80::1]/",
    "https://[fec0::1]/",
    "https://[ff02::1]/",
    "https://[2001:db8::1]/",
    "https://[::ffff:7f00:1]/",
    "https://[64:ff9b::a00:1]/",
    "https://[2002:a00:1::1]/",
    "https://[2001::1]/",
    "https://2130706433/",
    "https://0x7f.1/",
    "https://0177.0.0.1/",
    "https://%31%32%37.0.0.1/",
    "https://user:pw@example.com/",
    "ftp://example.com/cb",
    "https://LOCALHOST./",
    "https://api.localhost:8443/cb",
    "/callbacks/payments",
    "https://example.com/cb#frag",
    "https://example.com:0/cb",
    "https://exa\tmple.com/",
    "https://[::1/",
    "https://256.0.0.1/",
];

fn public_key() -> Vec<(String, Vec<u8>)> {
    let b64 = |bytes: &[u8]| STANDARD.encode(bytes);
    let mut not_a_point = [0u8; 32];
    not_a_point[0] = 2;
    let mut identity = [0u8; 32];
    identity[0] = 1;
    let raw = STANDARD
        .decode(RAW_B64.trim())
        .expect("the raw key vector is base64");
    let mut out: Vec<(String, Vec<u8>)> = vec![
        ("rfc9421-pem".to_owned(), PUB_PEM.into()),
        ("rfc9421-raw-b64".to_owned(), RAW_B64.into()),
        (
            "rfc9421-raw-b64-no-padding".to_owned(),
            RAW_B64.trim().trim_end_matches('=').into(),
        ),
        ("rfc9421-raw-bytes".to_owned(), raw),
        (
            "rfc9421-private-pem".to_owned(),
            crate::signature::TEST_KEY_PEM.into(),
        ),
        (
            "certificate-label".to_owned(),
            "-----BEGIN CERTIFICATE-----\nMAA=\n-----END CERTIFICATE-----\n".into(),
        ),
        (
            "mismatched-labels".to_owned(),
            "-----BEGIN PUBLIC KEY-----\nMCowBQ\n-----END PRIVATE KEY-----\n".into(),
        ),
        (
            "empty-spki".to_owned(),
            "-----BEGIN PUBLIC KEY-----\nMAA=\n-----END PUBLIC KEY-----\n".into(),
        ),
        (
            "x25519-spki".to_owned(),
            "-----BEGIN PUBLIC KEY-----\nMCowBQYDK2VuAyEAGb9ECWmEzf6FQbrBZ9w7lshQhqowtrbLDFw4rXAxZuE=\n-----END PUBLIC KEY-----\n".into(),
        ),
        ("not-a-key".to_owned(), "not a key!".into()),
        ("31-bytes".to_owned(), b64(&[1; 31]).into()),
        ("33-bytes".to_owned(), b64(&[1; 33]).into()),
        ("not-a-point".to_owned(), b64(&not_a_point).into()),
        ("identity".to_owned(), b64(&identity).into()),
    ];
    out.push(("identity-bytes".to_owned(), identity.to_vec()));
    out
}

const OPERATOR_BODIES: &[(&str, &str)] = &[
    ("create_merchant", r#"{"name": "M"}"#),
    (
        "create_merchant",
        r#"{"name": "M", "callback_url": "https://shop.example.com/cb"}"#,
    ),
    (
        "update_merchant",
        r#"{"paused": true, "callback_url": null}"#,
    ),
    (
        "create_project",
        r#"{"merchant_id": "00000000-0000-4000-8000-000000000000", "name": "Site", "test_mode": true, "lifetime_seconds": 600, "contract": {"currencies": ["RUB"], "methods": [{"method": "sbp", "min_amount": "100", "max_amount": "5000", "fee_percent": "7.5"}]}, "callback_url": "https://shop.example.com/payments/cb", "ip_allow_list": ["203.0.113.0/24"], "signature_required": true, "rate_limit": {"per_second": 5, "burst": 10}}"#,
    ),
    (
        "update_project",
        r#"{"lifetime_seconds": 1800, "test_mode": false, "ip_allow_list": [], "active": false}"#,
    ),
    ("update_project", r#"{"rate_limit": {"per_second": 5}}"#),
    (
        "update_project",
        r#"{"contract": {"currencies": ["RUB"], "methods": [{"method": "sbp"}]}}"#,
    ),
    (
        "update_project",
        r#"{"contract": {"currencies": ["RUB"], "methods": [], "extra": 1}}"#,
    ),
    ("update_project", r#"{"test_mode": "yes"}"#),
    (
        "update_project",
        r#"{"contract": {"currencies": ["RUB", "USD"], "methods": [{"method": "card_transfer", "min_amount": 1.50, "max_amount": null, "fee_percent": 0}]}}"#,
    ),
    (
        "issue_token",
        r#"{"scopes": ["payments:create", "payments:read"]}"#,
    ),
    ("issue_token", r#"{"scopes": ["payments:delete"]}"#),
    ("issue_token", r#"{"scopes": []}"#),
    (
        "register_key",
        r#"{"public_key": "JrQLj5P/89iXES9+vFgrIy29clF9CC/oPPsw3c5D0bs="}"#,
    ),
    ("register_key", r#"{"public_key": "bm90IGEga2V5"}"#),
    ("confirm", r#"{"amount": "1500.00"}"#),
    ("confirm", ""),
    ("confirm", r#"{"amount": "1", "amount": "1000"}"#),
    (
        "update_project",
        r#"{"contract": {"currencies": ["RUB"], "methods": [{"method": "sbp", "fee_percent": "5", "fee_percent": "0"}]}}"#,
    ),
    ("resolve", r#"{"status": "completed", "amount": 1500.5}"#),
    ("resolve", r#"{"status": "canceled"}"#),
    ("resolve", r#"{"status": "paid"}"#),
    ("empty", "{}"),
    ("empty", "  \n"),
    ("empty", r#"{"x": 1}"#),
];

const ALLOW_LISTS: &[(&str, &[u8])] = &[
    ("", b"\xc0\x00\x02\x01"),
    (
        " 203.0.113.7 \n198.51.100.0/24\n2001:db8:1::/48\n::1",
        b"\xcb\x00\x71\x07\xcb\x00\x71\x08",
    ),
    ("198.51.100.0/24\n::ffff:203.0.113.7", b"\xc6\x33\x64\x14"),
    ("10.0.0.1\nnot-an-ip", b""),
    ("10.0.0.0/33", b""),
    ("300.1.1.1", b""),
    ("10.1.2.3/8", b""),
    ("::ffff:10.0.0.0/104\n0.0.0.0/0", b"\x0a\x00\x00\x01"),
];

const FORWARDED_FOR: &[&[&str]] = &[
    &["10.0.0.0/8", "192.0.2.1", "203.0.113.9"],
    &["", "192.0.2.1", "203.0.113.9"],
    &["10.0.0.0/8", "::ffff:192.0.2.1", ""],
    &[
        "10.0.0.0/8\n2001:db8:ffff::/48",
        "10.0.0.1",
        "1.1.1.1, 203.0.113.9\n10.0.0.5",
        "9.9.9.9",
    ],
    &[
        "10.0.0.0/8\n2001:db8:ffff::/48",
        "2001:db8:ffff::1",
        "2001:db8::42, 2001:db8:ffff::2",
    ],
    &["10.0.0.0/8", "::ffff:10.0.0.1", "[2001:db8::7]"],
    // A trusted network written IPv4-mapped trusts the IPv4 peer (a regression seed).
    &[
        "::ffff:10.0.0.0/104",
        "10.0.0.1",
        "203.0.113.9",
        "198.51.100.7",
    ],
    &["10.0.0.0/8", "10.0.0.1", "::ffff:203.0.113.9"],
    &["10.0.0.0/8", "10.0.0.1", ""],
    &["10.0.0.0/8", "10.0.0.1", "10.0.0.3, 10.0.0.2", "10.9.9.9"],
    &["10.0.0.0/8", "10.0.0.1", "unknown"],
    &["10.0.0.0/8", "10.0.0.1", "203.0.113.9, garbage, 10.0.0.7"],
    &["10.0.0.0/8", "10.0.0.1", "203.0.113.9:443"],
    &["10.0.0.0/8", "10.0.0.1", "203.0.113.9,"],
];

fn callback_verifier() -> Vec<(String, Vec<u8>)> {
    let body =
        br#"{"id":"7d9f0c1e-2b3a-4c5d-8e6f-7a8b9c0d1e2f","status":"completed","amount":1500.00}"#;
    let a = CallbackSecret::parse(SECRET_A).expect("a test secret");
    let sig = sign_payload(&a, 1_700_000_000, body);
    let upper = sig.to_ascii_uppercase();
    let headers: [(&str, &str, String); 9] = [
        ("valid", "1700000000", format!("v1={sig}")),
        (
            "second-value",
            "1700000000",
            format!("v1={}, v1={sig}", "0".repeat(64)),
        ),
        ("other-scheme", "1700000000", format!("v0={sig},v1={sig}")),
        ("only-v2", "1700000000", format!("v2={sig}")),
        ("upper-case", " 1700000000 ", format!(" v1 = {upper} ")),
        ("short", "1700000000", format!("v1={}", &sig[..62])),
        ("fraction", "1700000000.5", format!("v1={sig}")),
        ("huge", "99999999999999999999", format!("v1={sig}")),
        ("empty", "", ",,".to_owned()),
    ];
    headers
        .iter()
        .map(|(name, ts, header)| {
            (
                (*name).to_owned(),
                join(&[ts.as_bytes(), header.as_bytes(), body]),
            )
        })
        .collect()
}
