//! Reloading each shown-once page in Chromium (WebDriver `refresh`, the browser's own reload)
//! repeats nothing: the page of the recovery codes made at enrolment, of a new API token, of a
//! rotated callback secret and of new recovery codes says "already shown" on reload, and the
//! store has exactly one new token, one rotation (the secret from before is still the
//! previous one) and the codes first shown (one of them signs in afterwards).

use payments_cabinet::store::{AuditQuery, CabinetStoreExt, Role};
use payments_core::store::CredentialStoreExt;

use crate::browser::Browser;
use crate::support::{Cabinet, PASSWORD};
use crate::{first_sign_in, page};

/// Reloads the page the browser shows (the browser's own reload, as the reload button; a
/// page that answered a POST would send the form again); the page's path before.
async fn reload(b: &Browser) -> String {
    let shown = b.path().await;
    b.client.refresh().await.expect("the page reloads");
    shown
}

/// The reloaded page (`shown` before the reload) is the one-time page, and says "already
/// shown".
async fn says_already_shown(b: &Browser, shown: &str) {
    assert!(shown.starts_with("/shown/"), "{shown}");
    assert_eq!(b.path().await, shown, "the same page, reloaded");
    assert_eq!(b.heading().await, "Already shown", "{}", b.source().await);
    assert!(b.all("#secret-value").await.is_empty(), "no value again");
    assert!(b.all("#recovery-codes").await.is_empty(), "no codes again");
}

/// How many cabinet audit records of `action` the demo merchant's log holds.
async fn audited(c: &Cabinet, action: &str) -> usize {
    c.cabinet()
        .store()
        .find_cabinet_audit(&AuditQuery {
            action: Some(action.into()),
            limit: 100,
            ..AuditQuery::default()
        })
        .await
        .expect("the audit log")
        .records
        .iter()
        .filter(|r| r.action == action && r.success)
        .count()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs Chromium: chromium and chromedriver"]
async fn reloading_a_shown_once_page_repeats_nothing() {
    let c = Cabinet::start().await;
    let demo = c.demo_merchant().await;
    c.user("owner@shop.example", Role::Merchant(demo)).await;
    let project = c.server.project();
    let store = c.server.state.service.store().clone();
    let b = Browser::start(c.url()).await;

    // The recovery codes of the enrolment.
    let (key, _) = first_sign_in(&c, &b, "owner@shop.example").await;
    let shown = reload(&b).await;
    let user = c
        .cabinet()
        .store()
        .user_by_email("owner@shop.example")
        .await
        .expect("store")
        .expect("the user");
    assert_eq!(
        c.cabinet()
            .store()
            .count_recovery_codes(user.id)
            .await
            .expect("store"),
        10
    );
    assert_eq!(audited(&c, "two_factor.enrol").await, 1);
    says_already_shown(&b, &shown).await;

    // A new token: shown, reloaded, still exactly one more token.
    let before = store.tokens(project).await.expect("tokens");
    b.open(&format!("/projects/{project}")).await;
    b.fill("#token-name", "shop backend").await;
    b.click("form[action$='/tokens'] button").await;
    let token = b
        .el("#secret-value")
        .await
        .prop("value")
        .await
        .expect("a property")
        .expect("the token");
    let shown = reload(&b).await;
    let after = store.tokens(project).await.expect("tokens");
    assert_eq!(after.len(), before.len() + 1, "exactly one token issued");
    let new: Vec<_> = after
        .iter()
        .filter(|t| !before.iter().any(|o| o.id == t.id))
        .collect();
    assert!(token.starts_with(&new[0].prefix), "the one shown: {token}");
    assert_eq!(audited(&c, "token.issue").await, 1);
    says_already_shown(&b, &shown).await;

    // A new callback secret: rotated once; the secret from before is the previous one.
    let old = store.callback_secrets(project).await.expect("secrets");
    assert_eq!(old.len(), 1, "the sandbox's secret");
    b.open(&format!("/projects/{project}/callback-secret"))
        .await;
    b.click("form button.primary").await;
    let secret = b
        .el("#secret-value")
        .await
        .prop("value")
        .await
        .expect("a property")
        .expect("the secret");
    assert!(secret.starts_with("whsec_"), "{secret}");
    let shown = reload(&b).await;
    let now = store.callback_secrets(project).await.expect("secrets");
    assert_eq!(now.len(), 2, "one rotation: current and previous");
    assert_eq!(
        now[1].secret.expose(),
        old[0].secret.expose(),
        "the previous secret is still the one from before"
    );
    assert_eq!(audited(&c, "callback_secret.rotate").await, 1);
    says_already_shown(&b, &shown).await;

    // New recovery codes from the security page: reloaded, the codes shown stay the valid ones.
    c.next_step();
    b.open("/security").await;
    b.fill("#rc-code", &c.code(&key)).await;
    b.click("form[action='/security/recovery-codes'] button")
        .await;
    let mut codes = Vec::new();
    for e in b.all("#recovery-codes code").await {
        codes.push(e.text().await.expect("text"));
    }
    assert_eq!(codes.len(), 10, "{}", b.source().await);
    let shown = reload(&b).await;
    assert_eq!(audited(&c, "recovery_codes.regenerate").await, 1);
    says_already_shown(&b, &shown).await;
    b.open("/projects").await;
    b.sign_out().await;
    b.password_step("owner@shop.example", PASSWORD).await;
    b.open("/sign-in/recovery").await;
    b.fill("#recovery_code", &codes[3]).await;
    b.click("form[action='/sign-in/recovery'] button").await;
    assert_eq!(
        page(&b).await,
        "/security",
        "a code shown before the reload signs in: {}",
        b.errors().await
    );
    b.close().await;
    c.server.stop().await;
}
