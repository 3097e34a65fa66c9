//! External API access over real HTTP: a private key pasted where the public key belongs is
//! refused as exposed and never comes back in the page; tokens carry a name and an optional
//! expiry, and the list says when each expires.

use payments_cabinet::store::Role;
use payments_core::auth::keys::{generate_signing_key, signing_key_to_pem};
use payments_core::store::CredentialStoreExt;
use payments_http::system::OsRandom;

use crate::enrolled;
use crate::support::Cabinet;

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
