//! Post/redirect/get over the real server: every form's `POST` is answered `303`; a value shown
//! once (a new token, a rotated callback secret, recovery codes) is shown by the first `GET`
//! of its one-time page only (a second `GET`, another session's, or one after the slot's five
//! minutes says "already shown" and does nothing); a refused form's errors and input reach its
//! page through the redirect once, never in the URL.

use std::time::Duration;

use payments_cabinet::store::Role;

use crate::support::{between, recovery_codes, Cabinet};
use crate::visitor::{Page, Visitor};
use crate::{enrolled, tokens_of};

/// The stored callback secrets of the demo project, newest first (sealed strings).
async fn secrets_of(c: &Cabinet) -> Vec<String> {
    c.server
        .state
        .service
        .store()
        .callback_secrets(c.server.project())
        .await
        .expect("secrets")
        .iter()
        .map(|s| s.secret.expose().to_string())
        .collect()
}

/// A `303` to the one-time page (`/shown/<slot>`); the page's path.
fn to_shown(p: &Page) -> String {
    assert_eq!(p.status, 303, "{}", p.body);
    let to = p.location.clone().expect("a Location");
    assert!(to.starts_with("/shown/"), "{to}");
    to
}

/// The one-time page, shown: `200`, `no-store`, the value.
fn assert_shown(p: &Page) {
    assert_eq!(p.status, 200, "{}", p.body);
    assert_eq!(p.headers["cache-control"], "no-store");
}

/// A second look: `410` and "already shown".
fn assert_already_shown(p: &Page) {
    assert_eq!(p.status, 410, "{}", p.body);
    assert!(p.body.contains("Already shown"), "{}", p.body);
    assert_eq!(p.headers["cache-control"], "no-store");
}

/// The value of the shown-once page's field.
fn value_of(p: &Page) -> String {
    between(&p.body, "id=\"secret-value\"", ">")
        .and_then(|tag| between(tag, "value=\"", "\""))
        .expect("the value is shown")
        .to_string()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_value_shown_once_is_shown_by_one_get_of_its_own_session() {
    let c = Cabinet::start().await;
    let demo = c.demo_merchant().await;
    c.user("owner@shop.example", Role::Merchant(demo)).await;
    c.user("colleague@shop.example", Role::Merchant(demo)).await;
    let project = c.server.project();
    let (mut owner, key) = enrolled(&c, "owner@shop.example").await;
    let (mut colleague, _) = enrolled(&c, "colleague@shop.example").await;

    // A token: the POST issues one and answers 303; its page shows it once.
    let before = tokens_of(&c, project).await;
    let p = owner
        .post(
            &format!("/projects/{project}/tokens"),
            &[("name", "shop backend"), ("scopes", "payments:read")],
        )
        .await;
    let shown = to_shown(&p);
    assert!(
        !p.body.contains("nl_test_"),
        "the POST's answer shows nothing"
    );
    // Another session (the same merchant's colleague) gets nothing and spoils nothing.
    assert_already_shown(&colleague.get(&shown).await);
    let first = owner.get(&shown).await;
    assert_shown(&first);
    // No language switch on it: switching would load the page again and find it gone.
    let switch = "id=\"language-switch\"";
    assert!(!first.body.contains(switch), "{}", first.body);
    assert!(
        owner.get("/projects").await.body.contains(switch),
        "the switch elsewhere"
    );
    let token = value_of(&first);
    assert!(token.starts_with("nl_test_"), "{token}");
    let again = owner.get(&shown).await;
    assert_already_shown(&again);
    assert!(!again.body.contains(&token), "not shown twice");
    assert_eq!(tokens_of(&c, project).await, before + 1, "one token");

    // A callback secret: rotated once; reading its page again rotates nothing.
    let old = secrets_of(&c).await;
    let p = owner
        .post(&format!("/projects/{project}/callback-secret"), &[])
        .await;
    let shown = to_shown(&p);
    let rotated = secrets_of(&c).await;
    assert_eq!(rotated.len(), old.len() + 1, "one rotation");
    assert_eq!(
        rotated[1..],
        old[..],
        "the earlier secret is still the previous one"
    );
    let first = owner.get(&shown).await;
    assert_shown(&first);
    assert!(value_of(&first).starts_with("whsec_"), "{}", first.body);
    assert_already_shown(&owner.get(&shown).await);
    assert_eq!(secrets_of(&c).await, rotated, "no second rotation");

    // New recovery codes: the session is renewed with them, and the new session shows them.
    c.next_step();
    let p = owner
        .post("/security/recovery-codes", &[("code", &c.code(&key))])
        .await;
    let shown = to_shown(&p);
    let first = owner.get(&shown).await;
    assert_shown(&first);
    assert_eq!(recovery_codes(&first.body).len(), 10);
    let again = owner.get(&shown).await;
    assert_already_shown(&again);
    assert!(!again.body.contains("recovery-codes"));

    // Too late: a slot waits five minutes for its page.
    let p = owner
        .post(
            &format!("/projects/{project}/tokens"),
            &[("name", "shop backend"), ("scopes", "payments:read")],
        )
        .await;
    let shown = to_shown(&p);
    c.clock.advance(Duration::from_secs(5 * 60 + 1));
    assert_already_shown(&owner.get(&shown).await);
    // Without a session: to sign-in, as every page.
    let p = Visitor::new(c.url()).get(&shown).await;
    assert_eq!(p.location.as_deref(), Some("/sign-in"));
    // The purge deletes what expired unread.
    let purged = c.cabinet().purge().await.expect("purge");
    assert!(purged.slots >= 1, "{purged:?}");
    c.server.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn enrolment_codes_are_shown_once_by_the_new_session() {
    let c = Cabinet::start().await;
    let demo = c.demo_merchant().await;
    c.user("owner@shop.example", Role::Merchant(demo)).await;
    let mut v = Visitor::new(c.url());
    v.sign_in_with_password("owner@shop.example", crate::support::PASSWORD)
        .await;
    let half = v.cookie.clone();
    let key = crate::support::totp_key(&v.get("/sign-in/enrol").await.body);
    let p = v.post("/sign-in/enrol", &[("code", &c.code(&key))]).await;
    let shown = to_shown(&p);
    assert_ne!(v.cookie, half, "the session is renewed by the same answer");
    let first = v.get(&shown).await;
    assert_shown(&first);
    assert_eq!(recovery_codes(&first.body).len(), 10);
    assert_already_shown(&v.get(&shown).await);
    c.server.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_refused_form_comes_back_once_through_the_redirect() {
    let c = Cabinet::start().await;
    let demo = c.demo_merchant().await;
    c.user("owner@shop.example", Role::Merchant(demo)).await;
    let project = c.server.project();

    // Sign-in: the message and the e-mail come back once with the refusal's status.
    let mut v = Visitor::new(c.url());
    let p = v
        .sign_in_with_password("owner@shop.example", "not it")
        .await;
    assert_eq!(p.status, 303, "{}", p.body);
    let to = p.location.clone().expect("a Location");
    assert!(to.starts_with("/sign-in?flash="), "{to}");
    assert!(!to.contains("owner"), "nothing typed in the URL: {to}");
    // Without a session nothing is stored: the refusal travels in the browser's cookie, so
    // another browser following the same URL sees the plain form.
    let cookie = p
        .set_cookies
        .iter()
        .find(|c| c.starts_with("cabinet-flash="))
        .expect("the refusal's cookie");
    for attribute in ["HttpOnly", "SameSite=Strict", "Path=/", "Max-Age=300"] {
        assert!(cookie.contains(attribute), "{cookie}");
    }
    let stranger = Visitor::new(c.url()).get(&to).await;
    assert_eq!(stranger.status, 200, "not this browser's refusal");
    assert!(!stranger.body.contains("not right"));
    let again = v.get(&to).await;
    assert_eq!(again.status, 401, "{}", again.body);
    assert!(again.body.contains("not right"), "{}", again.body);
    assert!(again.body.contains("value=\"owner@shop.example\""));
    assert_eq!(v.flash, None, "shown once: the page clears the cookie");
    let reload = v.get(&to).await;
    assert_eq!(reload.status, 200, "a reload shows the plain form");
    assert!(!reload.body.contains("not right"));
    // What is not an e-mail address is not carried back (a password typed into the wrong
    // field, junk): the message alone.
    let p = v.sign_in_with_password("hunter2 not@ mail", "x").await;
    let again = v.follow(&p).await;
    assert_eq!(again.status, 401, "{}", again.body);
    assert!(again.body.contains("not right"), "{}", again.body);
    assert!(!again.body.contains("hunter2"), "{}", again.body);

    // The allow-list: each bad line named, what was typed kept, nothing saved.
    let (mut owner, _) = enrolled(&c, "owner@shop.example").await;
    let typed = "10.0.0.1\n<b>not-an-address</b>";
    let p = owner
        .post(
            &format!("/projects/{project}/allow-list"),
            &[("ip_allow_list", typed)],
        )
        .await;
    assert_eq!(p.status, 303, "{}", p.body);
    let to = p.location.clone().expect("a Location");
    assert!(
        to.starts_with(&format!("/projects/{project}?flash=")) && to.ends_with("#allow-list"),
        "{to}"
    );
    assert!(!to.contains("not-an-address"), "{to}");
    let again = owner.follow(&p).await;
    assert_eq!(again.status, 422, "{}", again.body);
    assert!(again.body.contains("line 2"), "{}", again.body);
    assert!(
        again.body.contains("&lt;b&gt;not-an-address&lt;/b&gt;")
            || again.body.contains("&#60;b&#62;not-an-address&#60;/b&#62;"),
        "typed text is escaped: {}",
        again.body
    );
    // The flash is the session's own: another page or a second look shows nothing of it.
    let reload = owner.follow(&p).await;
    assert_eq!(reload.status, 200);
    assert!(!reload.body.contains("not-an-address"));
    c.server.stop().await;
}
