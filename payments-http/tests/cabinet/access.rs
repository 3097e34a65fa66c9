//! External API access over real HTTP: a private key pasted where the public key belongs is
//! refused as exposed and never comes back in the page; tokens carry a name and an optional
//! expiry, and the list says when each expires.

use payments_cabinet::store::Role;
use payments_core::auth::keys::{generate_signing_key, signing_key_to_pem};
use payments_core::store::CredentialStoreExt;
use payments_http::system::OsRandom;

use std::time::Duration;

use crate::enrolled;
use crate::support::{between, Cabinet};

/// Every private key form: the refusal says it must be treated as exposed, and neither the
/// page after the redirect nor anything of it holds a line of what was pasted.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_pasted_private_key_is_refused_and_never_shown_back() {
    let c = Cabinet::start().await;
    let demo = c.demo_merchant().await;
    c.user("owner@shop.example", Role::Merchant(demo)).await;
    let project = c.server.project();
    let (mut owner, _) = enrolled(&c, "owner@shop.example").await;
    let before = c
        .server
        .state
        .service
        .store()
        .keys(project)
        .await
        .expect("keys")
        .len();
    let key = generate_signing_key(&OsRandom);
    let pem = signing_key_to_pem(&key);
    let body: String = pem.lines().filter(|l| !l.starts_with("-----")).collect();
    let mut pair = key.to_bytes().to_vec();
    pair.extend_from_slice(key.verifying_key().as_bytes());
    use base64::Engine as _;
    let pair = base64::engine::general_purpose::STANDARD.encode(pair);
    for pasted in [pem.clone(), body.clone(), pair.clone()] {
        let p = owner
            .post(
                &format!("/projects/{project}/keys"),
                &[("public_key", pasted.as_str())],
            )
            .await;
        assert_eq!(p.status, 303, "{}", p.body);
        let to = p.location.clone().expect("a Location");
        let page = owner.follow(&p).await;
        assert_eq!(page.status, 422, "{}", page.body);
        assert!(
            page.body.contains("must never leave your machine")
                && page.body.contains("treat it as exposed"),
            "{}",
            page.body
        );
        for part in [&body[..16], &body[body.len() - 16..], &pair[..16]] {
            assert!(
                !page.body.contains(part) && !to.contains(part),
                "a part of the private key ({part}) is in the page: {}",
                page.body
            );
        }
    }
    let keys = c.server.state.service.store().keys(project).await;
    assert_eq!(keys.expect("keys").len(), before, "nothing registered");
    c.server.stop().await;
}

/// A raw 32-byte key could be a private key's seed: the form registers it only with the keyid
/// its generator printed. Without one, or with another, the page shows the keyid of what was
/// pasted (never what was pasted) and nothing is saved; with the right one it is saved. A
/// private seed that is a curve point, pasted with the key pair's keyid, is refused.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_raw_key_is_registered_only_with_the_keyid_its_generator_printed() {
    use base64::Engine as _;
    use payments_core::auth::keys::{keyid, parse_public_key, public_key_to_base64};
    let c = Cabinet::start().await;
    let demo = c.demo_merchant().await;
    c.user("owner@shop.example", Role::Merchant(demo)).await;
    let project = c.server.project();
    let (mut owner, _) = enrolled(&c, "owner@shop.example").await;
    let keys = || async {
        let store = c.server.state.service.store();
        let keys = store.keys(project).await.expect("keys");
        keys.into_iter().map(|k| k.keyid).collect::<Vec<_>>()
    };
    let before = keys().await;
    // A key pair whose seed is also a point: pasted, the seed parses as a public key.
    let pair = std::iter::repeat_with(|| generate_signing_key(&OsRandom))
        .take(64)
        .find(|k| {
            let seed = base64::engine::general_purpose::STANDARD.encode(k.to_bytes());
            parse_public_key(&seed).is_ok()
        })
        .expect("about half of all seeds are points");
    let printed = keyid(&pair.verifying_key());
    let raw = public_key_to_base64(&pair.verifying_key());
    let seed = base64::engine::general_purpose::STANDARD.encode(pair.to_bytes());
    let seed_keyid = keyid(&parse_public_key(&seed).unwrap());
    for (pasted, expected, shown) in [
        (&raw, "", &printed),
        (&raw, "ed25519-not-this-one", &printed),
        (&seed, printed.as_str(), &seed_keyid),
        (&seed, "", &seed_keyid),
    ] {
        let p = owner
            .post(
                &format!("/projects/{project}/keys"),
                &[
                    ("public_key", pasted.as_str()),
                    ("expected_keyid", expected),
                ],
            )
            .await;
        assert_eq!(p.status, 303, "{}", p.body);
        let page = owner.follow(&p).await;
        assert_eq!(page.status, 422, "{expected:?}: {}", page.body);
        assert!(
            page.body.contains(shown.as_str()) && page.body.contains("nothing was registered"),
            "{expected:?}: {}",
            page.body
        );
        assert!(
            !page.body.contains(&pasted[..20]),
            "what was pasted is not in the page"
        );
        assert_eq!(keys().await, before, "nothing saved for {expected:?}");
    }
    // The right keyid: saved, and the page says so.
    let p = owner
        .post(
            &format!("/projects/{project}/keys"),
            &[
                ("public_key", raw.as_str()),
                ("expected_keyid", printed.as_str()),
            ],
        )
        .await;
    assert_eq!(p.status, 303, "{}", p.body);
    let page = owner.follow(&p).await;
    assert_eq!(page.status, 200, "{}", page.body);
    assert!(page.body.contains(&format!("Key {printed} is registered")));
    let after = keys().await;
    assert_eq!(after.len(), before.len() + 1);
    assert!(after.contains(&printed));
    c.server.stop().await;
}

/// A token is created with a name (trimmed, required, at most 64 characters) and one of the
/// offered lifetimes; the list shows its name, creation, expiry and, once it has passed,
/// "expired" with no revoke link. A refused form keeps the name typed and says why.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn tokens_have_names_and_expiry_in_the_cabinet() {
    let c = Cabinet::start().await;
    let demo = c.demo_merchant().await;
    c.user("owner@shop.example", Role::Merchant(demo)).await;
    c.user("later@shop.example", Role::Merchant(demo)).await;
    let project = c.server.project();
    let (mut owner, _) = enrolled(&c, "owner@shop.example").await;
    let path = format!("/projects/{project}/tokens");

    // Refusals: no name, a name too long, a lifetime not offered; each keeps the name.
    for (name, expires, error) in [
        ("   ", "30", "Name: give the token a name"),
        (&"x".repeat(65)[..], "", "Name: at most 64 characters"),
        (
            "shop backend",
            "7",
            "Expires: choose one of the offered periods",
        ),
    ] {
        let p = owner
            .post(
                &path,
                &[
                    ("name", name),
                    ("expires", expires),
                    ("scopes", "payments:read"),
                ],
            )
            .await;
        assert_eq!(p.status, 303, "{}", p.body);
        let page = owner.follow(&p).await;
        assert_eq!(page.status, 422, "{}", page.body);
        assert!(page.body.contains(error), "{error}: {}", page.body);
        if !name.trim().is_empty() {
            assert!(
                page.body.contains(&format!("value=\"{name}\"")),
                "{}",
                page.body
            );
        }
    }
    let before = c.server.state.service.store().tokens(project).await;
    let before = before.expect("tokens").len();

    // A named token for 30 days, and one without expiry.
    for (name, expires) in [("  shop backend  ", "30"), ("reports", "")] {
        let p = owner
            .post(
                &path,
                &[
                    ("name", name),
                    ("expires", expires),
                    ("scopes", "payments:read"),
                ],
            )
            .await;
        assert_eq!(p.status, 303, "{}", p.body);
        let shown = owner.follow(&p).await;
        assert_eq!(shown.status, 200, "{}", shown.body);
        assert!(shown.body.contains(name.trim()), "{}", shown.body);
    }
    let tokens = c.server.state.service.store().tokens(project).await;
    let tokens = tokens.expect("tokens");
    assert_eq!(tokens.len(), before + 2);
    let backend = tokens
        .iter()
        .find(|t| t.name.as_deref() == Some("shop backend"))
        .expect("trimmed and stored");
    let expires = backend.expires_at.expect("an expiry");
    assert_eq!(
        expires,
        backend.created_at + Duration::from_secs(30 * 86_400)
    );
    assert!(tokens
        .iter()
        .any(|t| t.name.as_deref() == Some("reports") && t.expires_at.is_none()));
    let page = owner.get(&format!("/projects/{project}")).await;
    let list = between(&page.body, "id=\"tokens\"", "</table>").expect("the list");
    assert!(
        list.contains("shop backend") && list.contains("reports"),
        "{list}"
    );
    assert!(
        list.contains(&format!("datetime=\"{}\"", expires.to_rfc3339())),
        "{list}"
    );
    assert!(list.contains(">never<"), "{list}");

    // 31 days on: the token is listed as expired, without a revoke link.
    c.clock.advance(Duration::from_secs(31 * 86_400));
    let (mut later, _) = enrolled(&c, "later@shop.example").await;
    let page = later.get(&format!("/projects/{project}")).await;
    let list = between(&page.body, "id=\"tokens\"", "</table>").expect("the list");
    let row = between(list, "shop backend", "</tr>").expect("the row");
    assert!(row.contains("expired"), "{row}");
    assert!(!row.contains("/revoke"), "{row}");
    c.server.stop().await;
}

/// A delivery that fails before any answer reads in words on the deliveries page, for the
/// merchant's user without the resolver's message, for support with it as the technical
/// detail (the dispatcher of the running server makes the attempt).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_failed_delivery_reads_in_words_and_support_sees_the_detail() {
    let c = Cabinet::start().await;
    let demo = c.demo_merchant().await;
    c.user("owner@shop.example", Role::Merchant(demo)).await;
    c.user("help@support.example", Role::Support).await;
    let created = c
        .server
        .client()
        .create_payment(&serde_json::json!({
            "merchant_payment_id": "dns-1",
            "amount": "1500",
            "payment_method": "sbp",
            "callback_url": "https://nowhere.invalid/cb"
        }))
        .await
        .expect("a create");
    assert_eq!(created.status.as_u16(), 201, "{}", created.json);
    let confirmed = reqwest::Client::new()
        .post(format!(
            "{}/operator/v1/payments/{}/confirm",
            c.server.operator_url,
            created.json["id"].as_str().expect("id")
        ))
        .bearer_auth(c.server.operator_token.expose())
        .json(&serde_json::json!({}))
        .send()
        .await
        .expect("the operator API answers");
    assert_eq!(confirmed.status().as_u16(), 200);
    let project = c.server.project();
    let path = format!("/projects/{project}/deliveries");
    let (mut owner, _) = enrolled(&c, "owner@shop.example").await;
    let mut page = owner.get(&path).await;
    for _ in 0..100 {
        if page.body.contains("DNS failure") {
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
        page = owner.get(&path).await;
    }
    assert!(
        page.body
            .contains("DNS failure: the callback URL&#x27;s host name did not resolve")
            || page
                .body
                .contains("DNS failure: the callback URL's host name did not resolve")
            || page
                .body
                .contains("DNS failure: the callback URL&#39;s host name did not resolve"),
        "{}",
        page.body
    );
    assert!(!page.body.contains("Technical detail"), "{}", page.body);
    assert!(!page.body.contains("dns failure: "), "{}", page.body);
    // The event names its payment by the order number, linking to its card.
    let id = created.json["id"].as_str().expect("id");
    assert!(
        page.body.contains(&format!(
            "<a href=\"/payments/{id}\" title=\"{id}\">dns-1</a>"
        )),
        "{}",
        page.body
    );
    let (mut support, _) = enrolled(&c, "help@support.example").await;
    let page = support.get(&path).await;
    assert!(page.body.contains("DNS failure"), "{}", page.body);
    assert!(page.body.contains("Technical detail"), "{}", page.body);
    c.server.stop().await;
}

/// A new token starts with the least a shop's backend needs: `payments:create` and
/// `payments:read` ticked, every other scope left for the merchant to choose.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_new_token_starts_with_the_least_scopes() {
    let c = Cabinet::start().await;
    let demo = c.demo_merchant().await;
    c.user("owner@shop.example", Role::Merchant(demo)).await;
    let (mut owner, _) = enrolled(&c, "owner@shop.example").await;
    let page = owner
        .get(&format!("/projects/{}", c.server.project()))
        .await;
    for scope in payments_core::auth::Scope::ALL {
        let name = scope.as_str();
        let input = between(&page.body, &format!("value=\"{name}\""), ">")
            .unwrap_or_else(|| panic!("{name}: {}", page.body));
        let suggested = matches!(name, "payments:create" | "payments:read");
        assert_eq!(input.contains("checked"), suggested, "{name}: {input}");
    }
}
