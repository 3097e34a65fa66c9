//! Hostile input at the authentication boundary ("Hostile input", defects 5-8): requests built
//! by hand (signed with the core's signer), authenticated through
//! `Gate::authenticate` as the HTTP adapter does it.

mod common;

use payments_directory::DirectoryAccess;
use std::net::IpAddr;
use std::sync::atomic::{AtomicU64, Ordering};

use base64::engine::general_purpose::STANDARD;
use base64::Engine;
use ed25519_dalek::SigningKey;
use futures_executor::block_on;

use common::{merchant, project, Harness};
use payments_core::auth::signature::{sign_request, SignOptions};
use payments_core::auth::{keyid, Endpoint, Environment, HttpRequestParts, Scope};
use payments_core::project::{Merchant, Project};
use payments_core::service::{Actor, AuthConfig, AuthRequest, Authenticated, PaymentService};
use payments_core::store::MerchantStore;
use payments_core::testing::SeededRandom;
use payments_core::{ApiError, ErrorCode, ProjectId};
use payments_directory::{contract_from_json, ProjectPatch};

/// Header lines as sent: names and raw values.
type Headers = Vec<(String, Vec<u8>)>;

fn lines(pairs: &[(&str, &str)]) -> Headers {
    pairs
        .iter()
        .map(|(n, v)| (n.to_string(), v.as_bytes().to_vec()))
        .collect()
}

/// A request to authenticate.
struct Req {
    endpoint: Endpoint,
    method: &'static str,
    path: String,
    headers: Headers,
    body: Vec<u8>,
    peer: Option<IpAddr>,
}

impl Req {
    /// A create of a valid body from 127.0.0.1, with `Content-Type` and `X-Request-ID`, not
    /// yet signed and without `Authorization`.
    fn create() -> Req {
        Req {
            endpoint: Endpoint::CreatePayment,
            method: "POST",
            path: "/api/v1/payments".into(),
            headers: lines(&[
                ("content-type", "application/json"),
                ("x-request-id", "req-1"),
            ]),
            body: br#"{"merchant_payment_id":"order-1","amount":"100","payment_method":"sbp"}"#
                .to_vec(),
            peer: Some(IpAddr::from([127, 0, 0, 1])),
        }
    }

    /// Adds a header line.
    fn with(mut self, name: &str, value: &str) -> Req {
        self.headers
            .push((name.to_string(), value.as_bytes().to_vec()));
        self
    }

    /// Signs the request as it is now with `key` at the service's clock, covering `components`
    /// (`None`: the required ones), and adds the signature headers.
    fn signed(mut self, h: &Harness, key: &SigningKey, components: Option<&[&str]>) -> Req {
        static NONCE_SEED: AtomicU64 = AtomicU64::new(1);
        let raw: Vec<(&str, &[u8])> = self
            .headers
            .iter()
            .map(|(n, v)| (n.as_str(), v.as_slice()))
            .collect();
        let parts = HttpRequestParts {
            method: self.method,
            scheme: "https",
            authority: "payments.test",
            path_and_query: &self.path,
            headers: &raw,
            body: &self.body,
        };
        let created = h.service.ports().clock.now().unix_secs();
        let mut options = SignOptions::new(keyid(&key.verifying_key()), created, created + 300);
        options.components = components.map(|c| c.iter().map(|s| s.to_string()).collect());
        let rng = SeededRandom::new(NONCE_SEED.fetch_add(1, Ordering::SeqCst));
        let signed = sign_request(&parts, key, &options, &rng).expect("the request signs");
        let added: Headers = signed
            .headers()
            .iter()
            .map(|(n, v)| (n.to_string(), v.as_bytes().to_vec()))
            .collect();
        self.headers.extend(added);
        self
    }

    async fn authenticate(&self, service: &PaymentService) -> Result<Authenticated, ApiError> {
        let raw: Vec<(&str, &[u8])> = self
            .headers
            .iter()
            .map(|(n, v)| (n.as_str(), v.as_slice()))
            .collect();
        let request = AuthRequest {
            endpoint: self.endpoint,
            parts: HttpRequestParts {
                method: self.method,
                scheme: "https",
                authority: "payments.test",
                path_and_query: &self.path,
                headers: &raw,
                body: &self.body,
            },
            peer: self.peer,
            payment: None,
        };
        service
            .gate()
            .authenticate(&request, &payments_core::testing::Unlimited)
            .await
            .map_err(ApiError::from)
    }
}

/// A merchant and a project stored, with a token of every scope issued through the service.
fn provisioned(h: &Harness, n: u128) -> (Merchant, Project, String) {
    provisioned_with(h, n, |_| {})
}

/// [`provisioned`] with the project changed by `edit` before it is stored.
fn provisioned_with(
    h: &Harness,
    n: u128,
    edit: impl FnOnce(&mut Project),
) -> (Merchant, Project, String) {
    let m = merchant(n, None);
    let mut p = project(n, &m, false, None);
    edit(&mut p);
    block_on(async {
        h.store.upsert_merchant(&m).await.unwrap();
        h.store.upsert_project(&p).await.unwrap();
    });
    let token = block_on(
        h.service
            .directory()
            .issue_token(p.id, Scope::ALL.to_vec(), &actor()),
    )
    .expect("a token is issued");
    (m, p, format!("Bearer {}", token.token.expose()))
}

fn actor() -> Actor {
    Actor("operator".into())
}

fn register(h: &Harness, project: ProjectId, key: &SigningKey) -> Result<(), ApiError> {
    let public = STANDARD.encode(key.verifying_key().to_bytes());
    block_on(
        h.service
            .directory()
            .register_key(project, &public, &actor()),
    )
    .map(|_| ())
    .map_err(ApiError::from)
}

fn refused(r: Result<Authenticated, ApiError>) -> ApiError {
    match r {
        Ok(a) => panic!("accepted: {:?}", a.context().project.id),
        Err(e) => e,
    }
}

// --- 5. A signature binds its project ----------------------------------------------------------

#[test]
fn a_key_active_on_one_project_is_refused_on_another_so_its_requests_cannot_be_replayed_there() {
    let h = Harness::new(5);
    let (_, a, token_a) = provisioned(&h, 1);
    let (_, b, token_b) = provisioned(&h, 2);
    let key = SigningKey::from_bytes(&[7; 32]);
    register(&h, a.id, &key).expect("the key is registered on the first project");

    let e = register(&h, b.id, &key).expect_err("the same key on another project is refused");
    assert_eq!(e.code, ErrorCode::BadRequest);
    assert!(e.message.contains("active on another project"), "{e}");

    // A request signed for project A, used there once...
    let signed = Req::create().signed(&h, &key, None);
    let first = signed.clone_with("authorization", &token_a);
    let auth = block_on(first.authenticate(&h.service)).expect("project A accepts its request");
    block_on(h.service.gate().accept(auth)).expect("the nonce is recorded");
    // ... and replayed with project B's token: B has no such key.
    let replay = signed.clone_with("authorization", &token_b);
    let e = refused(block_on(replay.authenticate(&h.service)));
    assert_eq!(e.code, ErrorCode::SignatureInvalid);
    assert_eq!(e.message, "unknown keyid");

    // Once revoked on A, the key may move to B.
    block_on(
        h.service
            .directory()
            .revoke_key(a.id, &keyid(&key.verifying_key()), &actor()),
    )
    .unwrap();
    register(&h, b.id, &key).expect("a revoked key is free again");
}

// --- 7. A malformed X-Forwarded-For entry makes the client unknown ----------------------------

#[test]
fn a_malformed_forwarded_entry_behind_a_trusted_proxy_is_refused_by_an_allow_list() {
    let mut auth = AuthConfig::for_environment(Environment::Sandbox);
    auth.trusted_proxies = vec!["10.0.0.0/8".parse().unwrap()];
    let h = Harness::with_auth(7, auth);
    // The allow-list holds the proxy's network (a common mistake) and one client network.
    let (_, _, token) = provisioned_with(&h, 1, |p| {
        p.ip_allow_list = vec!["10.0.0.0/8".into(), "203.0.113.0/24".into()];
    });
    let get = |xff: Option<&str>| {
        let mut r = Req::get("/api/v1/project").with("authorization", &token);
        r.peer = Some(IpAddr::from([10, 0, 0, 1]));
        if let Some(xff) = xff {
            r = r.with("x-forwarded-for", xff);
        }
        block_on(r.authenticate(&h.service))
    };
    let ctx = get(Some("203.0.113.9")).expect("a listed client behind the proxy");
    assert_eq!(
        ctx.context().client_ip,
        Some(IpAddr::from([203, 0, 113, 9]))
    );
    assert_eq!(refused(get(Some("6.6.6.6"))).code, ErrorCode::IpNotAllowed);
    for xff in ["6.6.6.6:1234", "unknown", "", "203.0.113.9, "] {
        let e = refused(get(Some(xff)));
        assert_eq!(e.code, ErrorCode::IpNotAllowed, "{xff:?}");
        assert!(e.message.contains("X-Forwarded-For"), "{xff:?}: {e}");
    }
    // Without the header, the request comes from the proxy itself (a health check, say).
    assert!(get(None).is_ok());
}

impl Req {
    /// An unsigned `GET` from 127.0.0.1 with an `X-Request-ID` and no `Authorization`.
    fn get(path: &str) -> Req {
        Req {
            endpoint: if path.starts_with("/api/v1/payments/") {
                Endpoint::GetPayment
            } else {
                Endpoint::GetProject
            },
            method: "GET",
            path: path.into(),
            headers: lines(&[("x-request-id", "req-1")]),
            body: Vec::new(),
            peer: Some(IpAddr::from([127, 0, 0, 1])),
        }
    }

    /// A copy with one more header line.
    fn clone_with(&self, name: &str, value: &str) -> Req {
        Req {
            endpoint: self.endpoint,
            method: self.method,
            path: self.path.clone(),
            headers: self.headers.clone(),
            body: self.body.clone(),
            peer: self.peer,
        }
        .with(name, value)
    }
}

// --- 8. Consistency ----------------------------------------------------------------------------

fn patch_project(
    h: &Harness,
    project: ProjectId,
    patch: ProjectPatch,
) -> Result<Project, ApiError> {
    block_on(
        h.service
            .directory()
            .update_project(project, patch, &actor()),
    )
    .map_err(ApiError::from)
}

#[test]
fn an_allow_list_holds_at_most_100_entries() {
    let h = Harness::new(81);
    let (_, p, _) = provisioned(&h, 1);
    let rules = |n: usize| -> Vec<String> { (0..n).map(|i| format!("10.0.{i}.0/24")).collect() };
    let set = |n| {
        patch_project(
            &h,
            p.id,
            ProjectPatch {
                ip_allow_list: Some(rules(n)),
                ..ProjectPatch::default()
            },
        )
    };
    assert_eq!(set(100).expect("100 entries").ip_allow_list.len(), 100);
    let e = set(101).expect_err("101 entries");
    assert_eq!(e.code, ErrorCode::BadRequest);
    assert_eq!(
        e.message,
        "ip_allow_list: at most 100 entries (got 101); use CIDR networks"
    );
}

#[test]
fn a_contract_with_a_method_or_currency_twice_is_refused() {
    let h = Harness::new(82);
    let (_, p, _) = provisioned(&h, 1);
    let set = |v: serde_json::Value| {
        let contract = contract_from_json(&v)?;
        patch_project(
            &h,
            p.id,
            ProjectPatch {
                contract: Some(contract),
                ..ProjectPatch::default()
            },
        )
    };
    let sbp = serde_json::json!({"method": "sbp", "min_amount": "10", "max_amount": "100", "fee_percent": "11"});
    let card = serde_json::json!({"method": "card_transfer", "fee_percent": "2"});
    set(serde_json::json!({"currencies": ["RUB", "USD"], "methods": [sbp, card]}))
        .expect("a contract without repeats");
    let e = set(serde_json::json!({"currencies": ["RUB"], "methods": [sbp, card, sbp]}))
        .expect_err("sbp twice");
    assert_eq!(
        (e.code, e.message.as_str()),
        (
            ErrorCode::BadRequest,
            "contract: method sbp is listed twice"
        )
    );
    let e = set(serde_json::json!({"currencies": ["RUB", "USD", "RUB"], "methods": [sbp]}))
        .expect_err("RUB twice");
    assert_eq!(e.message, "contract: currency RUB is listed twice");
}

#[test]
fn names_with_control_or_bidi_characters_are_refused() {
    let h = Harness::new(83);
    let (m, p, _) = provisioned(&h, 1);
    let rename = |name: &str| {
        patch_project(
            &h,
            p.id,
            ProjectPatch {
                name: Some(name.into()),
                ..ProjectPatch::default()
            },
        )
    };
    assert_eq!(
        rename("Shop – Main site").expect("plain text").name,
        "Shop – Main site"
    );
    for (name, found) in [
        ("Shop\0", "U+0000"),
        ("Shop\u{1b}[31m", "U+001B"),
        ("Shop \u{202e}etis", "U+202E"),
        ("Shop\u{2066}x", "U+2066"),
        ("a\u{7f}b", "U+007F"),
        ("a\u{85}b", "U+0085"),
    ] {
        let e = rename(name).expect_err(name);
        assert_eq!(e.code, ErrorCode::BadRequest, "{name:?}");
        assert!(e.message.contains(found), "{name:?}: {e}");
        let e =
            block_on(h.service.directory().create_merchant(name, None, &actor())).expect_err(name);
        assert_eq!(e.code(), ErrorCode::BadRequest, "{name:?}");
        let e = block_on(h.service.directory().create_project(
            m.id,
            name,
            ProjectPatch::default(),
            &actor(),
        ))
        .expect_err(name);
        assert_eq!(e.code(), ErrorCode::BadRequest, "{name:?}");
    }
}

#[test]
fn single_valued_headers_sent_twice_are_refused_before_the_token() {
    let h = Harness::new(84);
    let (_, _, token) = provisioned(&h, 1);
    let ok = Req::get("/api/v1/project").with("authorization", &token);
    assert!(block_on(ok.authenticate(&h.service)).is_ok());
    let cases = [
        // The first token is valid: it used to be taken, the second ignored.
        ("Authorization", "Bearer nl_test_other"),
        ("Host", "evil.example"),
        ("X-Request-ID", "req-2"),
        ("Content-Type", "text/plain"),
        ("X-Request-Nonce", "abcdefghijklmnopqrstuvwxyz"),
    ];
    for (name, second) in cases {
        // `ok` has one Authorization and one X-Request-ID line; add one of the others.
        let mut r = ok.clone_with("host", "payments.test");
        if matches!(name, "Content-Type" | "X-Request-Nonce") {
            r = r.with(name, "first-value");
        }
        let r = r.with(&name.to_ascii_lowercase(), second);
        let e = refused(block_on(r.authenticate(&h.service)));
        assert_eq!(e.code, ErrorCode::BadRequest, "{name}");
        assert_eq!(
            e.message,
            format!("the {name} header must be sent once (got 2)")
        );
    }
}

#[test]
fn the_operator_token_scheme_is_read_in_any_case_like_the_merchant_one() {
    let h = Harness::new(85);
    let token = block_on(h.service.directory().issue_operator_token()).expect("an operator token");
    for scheme in ["Bearer", "bearer", "BEARER", "bEaReR"] {
        let header = format!("{scheme} {token}");
        assert!(
            block_on(h.service.directory().check_operator_token(Some(&header))).is_ok(),
            "{scheme}"
        );
    }
    for header in [
        format!("Basic {token}"),
        format!("Bearer{token}"),
        token.clone(),
        "Bearer op_wrong".to_string(),
    ] {
        let e =
            block_on(h.service.directory().check_operator_token(Some(&header))).expect_err(&header);
        assert_eq!(e.code(), ErrorCode::TokenInvalid);
    }
    // The merchant side reads any case too.
    let (_, _, merchant) = provisioned(&h, 1);
    let upper = merchant.replacen("Bearer", "BEARER", 1);
    let r = Req::get("/api/v1/project").with("authorization", &upper);
    assert!(block_on(r.authenticate(&h.service)).is_ok());
}

#[test]
fn a_signed_request_id_the_server_cannot_echo_is_refused() {
    let h = Harness::new(86);
    let (_, p, token) = provisioned(&h, 1);
    let key = SigningKey::from_bytes(&[8; 32]);
    register(&h, p.id, &key).unwrap();
    let create = |id: &str| {
        Req::create()
            .replace("x-request-id", id)
            .signed(&h, &key, None)
            .with("authorization", &token)
    };
    let longest = "r".repeat(128);
    assert!(block_on(create(&longest).authenticate(&h.service)).is_ok());
    // (The signer refuses non-ASCII values itself.)
    for id in ["r".repeat(129), "has space".to_string()] {
        let e = refused(block_on(create(&id).authenticate(&h.service)));
        assert_eq!(e.code, ErrorCode::BadRequest, "{id}");
        assert!(
            e.message.starts_with("X-Request-ID must be 1 to 128"),
            "{e}"
        );
    }
}

impl Req {
    /// Replaces every line of header `name` with one line of `value`.
    fn replace(mut self, name: &str, value: &str) -> Req {
        self.headers.retain(|(n, _)| !n.eq_ignore_ascii_case(name));
        self.with(name, value)
    }
}

#[test]
fn the_sandbox_signature_base_never_repeats_the_bearer_token() {
    let h = Harness::new(87);
    let (_, p, token) = provisioned(&h, 1);
    let key = SigningKey::from_bytes(&[9; 32]);
    register(&h, p.id, &key).unwrap();
    let components = [
        "@method",
        "@path",
        "content-digest",
        "x-request-id",
        "x-request-nonce",
        "authorization",
    ];
    // Signed with the token covered, then the body changed: the digest no longer matches and
    // the sandbox answers with the base it built.
    let mut r = Req::create()
        .with("authorization", &token)
        .signed(&h, &key, Some(&components));
    r.body = br#"{"merchant_payment_id":"order-2","amount":"100","payment_method":"sbp"}"#.to_vec();
    let e = refused(block_on(r.authenticate(&h.service)));
    assert_eq!(e.code, ErrorCode::SignatureInvalid);
    let secret = token.trim_start_matches("Bearer ");
    let base = e
        .signature_base
        .as_deref()
        .expect("the sandbox returns the base");
    assert!(!base.contains(secret), "{base}");
    assert!(base.contains("\n\"authorization\": [redacted]\n"), "{base}");
    let cause = format!("{:?}", e.cause);
    assert!(
        !cause.contains(secret),
        "the cause (for logs) is redacted too"
    );

    // A verification failure (base complete, signature wrong) is redacted the same way.
    let mut r = Req::create()
        .with("authorization", &token)
        .signed(&h, &key, Some(&components));
    let other = SigningKey::from_bytes(&[10; 32]);
    let forged = Req::create()
        .with("authorization", &token)
        .signed(&h, &other, Some(&components));
    r.headers.retain(|(n, _)| n != "Signature");
    r.headers
        .extend(forged.headers.into_iter().filter(|(n, _)| n == "Signature"));
    let e = refused(block_on(r.authenticate(&h.service)));
    assert_eq!(
        e.message,
        format!(
            "signature does not verify{}",
            payments_core::auth::signature::SANDBOX_KEY_HINT
        ),
        "the sandbox points at the key"
    );
    assert!(!e.signature_base.unwrap().contains(secret));
}

#[test]
fn a_body_must_be_declared_as_json() {
    let h = Harness::new(88);
    let (_, p, token) = provisioned(&h, 1);
    let key = SigningKey::from_bytes(&[11; 32]);
    register(&h, p.id, &key).unwrap();
    let create = |content_type: Option<&str>| {
        let mut r = Req::create();
        r.headers.retain(|(n, _)| n != "content-type");
        if let Some(ct) = content_type {
            r = r.with("content-type", ct);
        }
        r.signed(&h, &key, None).with("authorization", &token)
    };
    for ct in [
        "application/json",
        "Application/JSON",
        "application/json; charset=utf-8",
        "application/json;charset=\"UTF-8\"",
    ] {
        assert!(
            block_on(create(Some(ct)).authenticate(&h.service)).is_ok(),
            "{ct}"
        );
    }
    for ct in [
        None,
        Some("text/plain"),
        Some("application/x-www-form-urlencoded"),
        Some("application/json; charset=latin1"),
        Some("application/json; boundary=x"),
        Some("application/jsonp"),
    ] {
        let e = refused(block_on(create(ct).authenticate(&h.service)));
        assert_eq!(e.code, ErrorCode::UnsupportedMediaType, "{ct:?}");
    }
    // Without a body (a test helper), no Content-Type is needed.
    let mut helper = Req::create();
    helper.endpoint = Endpoint::TestHelper;
    helper.path = "/api/v1/test/payments/x/cancel".into();
    helper.body.clear();
    helper.headers.retain(|(n, _)| n != "content-type");
    let helper = helper.signed(&h, &key, None).with("authorization", &token);
    assert!(block_on(helper.authenticate(&h.service)).is_ok());
}
