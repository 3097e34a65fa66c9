//! The web cabinet over real HTTP, without a browser: what a request without a session, with
//! another user's session or from another site can change (nothing), who sees what, session
//! cookies and timeouts, invitation links, the sandbox's demo user, and the pages' form
//! markup. The browser tests (`payments-server/tests/cabinet_browser/`) drive the same pages
//! in Chromium.

mod access;
mod balance;
mod card;
mod home;
mod language;
mod once;
mod payer;
mod requests;
mod roles;
mod search;
mod support;
mod team;
mod visitor;
mod zone;

use std::time::Duration;

use payments_cabinet::store::{CabinetAuditRecord, Role};
use payments_core::store::CredentialStoreExt;
use payments_core::store::MerchantStoreExt;
use payments_http::testing::{TestConfig as ServerSettings, TestServer};
use serde_json::json;
use support::{between, recovery_codes, totp_key, Cabinet, PASSWORD};
use visitor::{Site, Visitor};

/// Signs `email` in with [`PASSWORD`], enrolling its TOTP key; the visitor holds a full
/// session.
async fn enrolled(c: &Cabinet, email: &str) -> (Visitor, Vec<u8>) {
    let mut v = Visitor::new(c.url());
    let p = v.sign_in_with_password(email, PASSWORD).await;
    assert_eq!(p.status, 303, "{}", p.body);
    assert_eq!(p.location.as_deref(), Some("/sign-in/enrol"));
    let page = v.get("/sign-in/enrol").await;
    assert_eq!(page.status, 200, "{}", page.body);
    let key = totp_key(&page.body);
    let done = v.post("/sign-in/enrol", &[("code", &c.code(&key))]).await;
    assert_eq!(done.status, 303, "{}", done.body);
    let codes = v.follow(&done).await;
    assert_eq!(codes.status, 200, "{}", codes.body);
    assert_eq!(recovery_codes(&codes.body).len(), 10);
    (v, key)
}

/// A cabinet that does not dispatch, with the user `email` of the demo merchant, whose
/// project is in test mode with `callback_url`. (Not in `support`, which the browser tests
/// share with their own server settings.)
async fn test_mode_with_user(email: &str, callback_url: Option<&str>) -> Cabinet {
    let c = Cabinet::start_with(|s| s.dispatch = false).await;
    let demo = c.demo_merchant().await;
    c.user(email, Role::Merchant(demo)).await;
    c.server
        .patch_project(payments_directory::ProjectPatch {
            test_mode: Some(true),
            callback_url: Some(callback_url.map(str::to_string)),
            ..Default::default()
        })
        .await;
    c
}

async fn tokens_of(c: &Cabinet, project: payments_core::ProjectId) -> usize {
    c.server
        .state
        .service
        .store()
        .tokens(project)
        .await
        .expect("tokens")
        .len()
}

/// The audit log pages: 100 records a page, an "Older records" link to the next page (no
/// record shown twice, none skipped), and filters by family of actions, result and e-mail
/// that a merchant's user cannot widen to another merchant.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_audit_log_pages_and_filters() {
    let c = Cabinet::start().await;
    let demo = c.demo_merchant().await;
    c.user("owner@shop.example", Role::Merchant(demo)).await;
    let (other, _) = c.other_merchant("Other").await;
    let store = c.cabinet().store().clone();
    let at = payments_core::Timestamp::from_unix_secs(1_790_000_000);
    for n in 0..150 {
        store
            .insert_cabinet_audit(&CabinetAuditRecord {
                at,
                user_id: None,
                email: format!("clerk{}@shop.example", n % 3),
                address: Some("203.0.113.5".into()),
                merchant_id: Some(if n % 10 == 9 { other } else { demo }),
                project_id: None,
                action: if n % 2 == 0 {
                    "token.issue"
                } else {
                    "key.revoke"
                }
                .into(),
                target: format!("audit-rec-{n:03}"),
                success: n % 5 != 0,
                detail: None,
            })
            .await
            .expect("append");
    }
    let (mut owner, _) = enrolled(&c, "owner@shop.example").await;
    let shown = |body: &str| -> Vec<String> {
        body.split("audit-rec-")
            .skip(1)
            .map(|rest| rest[..3].to_string())
            .collect()
    };
    // The demo merchant's 135 records and its own sign-in: two pages.
    let first = owner.get("/audit").await;
    assert_eq!(first.status, 200, "{}", first.body);
    let first_ids = shown(&first.body);
    // One `data-action` per row (the row's heading cell carries the recorded action).
    let rows = |body: &str| body.matches(" data-action=\"").count();
    assert_eq!(rows(&first.body), 100, "100 a page");
    assert!(
        first_ids.len() < 100,
        "the owner's sign-in records are the newest"
    );
    let next = between(
        &first.body,
        "<p><a href=\"",
        "\" rel=\"next\">Older records",
    )
    .expect("a link to the older records")
    .replace("&#38;", "&")
    .replace("&amp;", "&");
    let second = owner.get(&next).await;
    assert_eq!(second.status, 200, "{}", second.body);
    let second_ids = shown(&second.body);
    assert_eq!(first_ids.len() + second_ids.len(), 135);
    assert!(!second.body.contains("Older records"), "the last page");
    let first_len = first_ids.len();
    let all: Vec<String> = first_ids.into_iter().chain(second_ids).collect();
    let expected: Vec<String> = (0..150)
        .rev()
        .filter(|n| n % 10 != 9)
        .map(|n| format!("{n:03}"))
        .collect();
    assert_eq!(all, expected, "newest first, none twice, none skipped");

    // Filters: a family, the refusals, an e-mail; together with the merchant's own scope.
    let tokens = owner.get("/audit?action=token").await;
    let ids = shown(&tokens.body);
    assert_eq!(ids.len(), 75, "{}", tokens.body);
    assert!(!tokens.body.contains("key.revoke") && !tokens.body.contains("sign_in.password"));
    let refused = owner.get("/audit?result=refused").await;
    let ids = shown(&refused.body);
    assert_eq!(ids.len(), 30, "every fifth, none of the other merchant's");
    assert!(ids
        .iter()
        .all(|n| n.parse::<u32>().expect("a number") % 5 == 0));
    let clerk = owner
        .get("/audit?email=CLERK1%40shop.example&action=key")
        .await;
    let ids = shown(&clerk.body);
    assert!(!ids.is_empty());
    assert!(ids.iter().all(|n| {
        let n: u32 = n.parse().expect("a number");
        n % 3 == 1 && n % 2 == 1 && n % 10 != 9
    }));
    let none = owner.get("/audit?email=nobody%40shop.example").await;
    assert!(none.body.contains("No records match."), "{}", none.body);
    // A made-up family or cursor is ignored, not an error.
    let odd = owner.get("/audit?action=%25&before=x").await;
    assert_eq!(odd.status, 200, "{}", odd.body);
    assert_eq!(shown(&odd.body).len(), first_len);
    c.server.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn state_changes_need_the_cabinets_own_pages_and_a_session_of_the_owner() {
    let c = Cabinet::start().await;
    let demo = c.demo_merchant().await;
    c.user("owner@shop.example", Role::Merchant(demo)).await;
    let (other_merchant, _) = c.other_merchant("Other").await;
    c.user("stranger@other.example", Role::Merchant(other_merchant))
        .await;
    let project = c.server.project();
    let path = format!("/projects/{project}/tokens");
    let form = [("name", "shop backend"), ("scopes", "payments:read")];
    let before = tokens_of(&c, project).await;

    let (mut owner, _) = enrolled(&c, "owner@shop.example").await;
    for site in [Site::Cross, Site::ForeignOrigin, Site::Bare] {
        let p = owner.post_as(site, &path, &form).await;
        assert_eq!(p.status, 403, "{site:?}: {}", p.body);
        assert!(p.body.contains("nothing was changed"), "{}", p.body);
    }
    // Logout is a state change too: a cross-site one does not end the session.
    let p = owner.post_as(Site::Cross, "/sign-out", &[]).await;
    assert_eq!(p.status, 403);
    assert_eq!(owner.get("/projects").await.status, 200, "still signed in");

    // No session: to sign-in, nothing done.
    let mut nobody = Visitor::new(c.url());
    let p = nobody.post(&path, &form).await;
    assert_eq!(p.status, 303);
    assert_eq!(p.location.as_deref(), Some("/sign-in"));
    // A forged cookie is no session either.
    nobody.cookie = Some("cabinet=AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA".into());
    assert_eq!(nobody.post(&path, &form).await.status, 303);

    // Another merchant's user: as if the project did not exist.
    let (mut stranger, _) = enrolled(&c, "stranger@other.example").await;
    let p = stranger.post(&path, &form).await;
    assert_eq!(p.status, 404, "{}", p.body);
    let p = stranger
        .post(
            &format!("/projects/{project}/allow-list"),
            &[("ip_allow_list", "10.0.0.0/8")],
        )
        .await;
    assert_eq!(p.status, 404);
    assert_eq!(tokens_of(&c, project).await, before, "nothing was issued");
    let stored = c
        .server
        .state
        .service
        .store()
        .project(project)
        .await
        .expect("store")
        .expect("project");
    assert!(stored.ip_allow_list.is_empty(), "nothing was saved");

    // The owner, from the cabinet's own page: issued, and shown on the page it leads to.
    let p = owner.post(&path, &form).await;
    assert_eq!(p.status, 303, "{}", p.body);
    let shown = owner.follow(&p).await;
    assert!(shown.body.contains("nl_test_"), "the token is shown once");
    assert_eq!(tokens_of(&c, project).await, before + 1);
    c.server.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_merchant_user_sees_only_its_merchant_and_support_sees_all() {
    let c = Cabinet::start().await;
    let demo = c.demo_merchant().await;
    let (other, other_project) = c.other_merchant("Other").await;
    c.user("owner@shop.example", Role::Merchant(demo)).await;
    c.user("other@other.example", Role::Merchant(other)).await;
    c.user("help@support.example", Role::Support).await;
    let created = c
        .server
        .client()
        .create_payment(
            &json!({"merchant_payment_id": "iso-1", "amount": "1500", "payment_method": "sbp"}),
        )
        .await
        .expect("a create");
    assert_eq!(created.status.as_u16(), 201, "{}", created.json);
    let payment = created.json["id"].as_str().expect("id").to_string();
    // A second payment, completed by the operator (for the status filter below).
    let done = c
        .server
        .client()
        .create_payment(
            &json!({"merchant_payment_id": "iso-2", "amount": "1500", "payment_method": "sbp"}),
        )
        .await
        .expect("a create");
    assert_eq!(done.status.as_u16(), 201, "{}", done.json);
    let confirmed = reqwest::Client::new()
        .post(format!(
            "{}/operator/v1/payments/{}/confirm",
            c.server.operator_url,
            done.json["id"].as_str().expect("id")
        ))
        .bearer_auth(c.server.operator_token.expose())
        .json(&json!({}))
        .send()
        .await
        .expect("the operator API answers");
    assert_eq!(confirmed.status().as_u16(), 200);
    let project = c.server.project();

    let (mut other_user, _) = enrolled(&c, "other@other.example").await;
    for path in [
        format!("/projects/{project}"),
        format!("/projects/{project}/payments"),
        format!("/projects/{project}/deliveries"),
        format!("/projects/{project}/callback-secret"),
        format!("/payments/{payment}"),
        "/projects/not-a-uuid".to_string(),
        format!("/payments/{}", "00000000-0000-4000-8000-000000000000"),
    ] {
        let p = other_user.get(&path).await;
        assert_eq!(p.status, 404, "{path}");
        assert!(!p.body.contains("iso-1"), "{path} shows the payment");
    }
    let list = other_user.get("/projects").await;
    assert!(list.body.contains("Other site"));
    assert!(!list.body.contains("Demo project"), "{}", list.body);
    assert_eq!(
        other_user
            .get(&format!("/projects/{other_project}"))
            .await
            .status,
        200
    );

    let (mut owner, _) = enrolled(&c, "owner@shop.example").await;
    let card = owner.get(&format!("/payments/{payment}")).await;
    assert_eq!(card.status, 200);
    assert!(card.body.contains("iso-1"));
    assert!(!card.body.contains("Operator actions"), "support only");
    let p = owner
        .post(&format!("/payments/{payment}/cancel"), &[])
        .await;
    assert_eq!(p.status, 404, "operator actions are support's");
    // The merchant's resend (a confirmation page; the service refuses an open payment's).
    assert_eq!(
        owner
            .get(&format!("/payments/{payment}/resend"))
            .await
            .status,
        200
    );
    let listed = owner.get(&format!("/projects/{project}/payments")).await;
    assert_eq!(listed.status, 200);
    assert!(listed.body.contains("iso-1") && listed.body.contains("iso-2"));
    let filtered = owner
        .get(&format!("/projects/{project}/payments?status=completed"))
        .await;
    assert_eq!(filtered.status, 200, "{}", filtered.body);
    assert!(
        filtered.body.contains("iso-2"),
        "the completed payment is listed: {}",
        filtered.body
    );
    assert!(
        !filtered.body.contains("iso-1"),
        "a processing payment is filtered out"
    );
    let filtered = owner
        .get(&format!("/projects/{project}/payments?status=processing"))
        .await;
    assert_eq!(filtered.status, 200, "{}", filtered.body);
    assert!(
        filtered.body.contains("iso-1"),
        "the processing payment is listed: {}",
        filtered.body
    );
    assert!(
        !filtered.body.contains("iso-2"),
        "a completed payment is filtered out"
    );

    let (mut support, _) = enrolled(&c, "help@support.example").await;
    let list = support.get("/projects").await;
    assert!(list.body.contains("Other site") && list.body.contains("Demo project"));
    let card = support.get(&format!("/payments/{payment}")).await;
    assert!(card.body.contains("Operator actions"));
    let p = support
        .post(&format!("/payments/{payment}/cancel"), &[])
        .await;
    assert_eq!(p.status, 303, "{}", p.body);
    let read = c
        .server
        .client()
        .get_payment(&payment)
        .await
        .expect("a read");
    assert_eq!(read.json["status"], "canceled");
    // The merchant's audit log shows support's change on its project; the other merchant's
    // does not.
    let audit = owner.get("/audit").await;
    assert!(audit.body.contains("payment.cancel"), "{}", audit.body);
    assert!(audit.body.contains("help@support.example"));
    let audit = other_user.get("/audit").await;
    assert_eq!(audit.status, 200, "{}", audit.body);
    // Its own audit log, listing its own user's sign-in, without the demo merchant's records.
    assert!(
        audit.body.contains("<title>Audit log")
            && audit.body.contains("id=\"audit\"")
            && audit.body.contains("sign_in.password"),
        "{}",
        audit.body
    );
    assert!(!audit.body.contains("payment.cancel"));
    assert!(!audit.body.contains("owner@shop.example"));
    c.server.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn session_cookies_are_strict_renewed_at_each_step_and_end_on_timeouts() {
    let c = Cabinet::start().await;
    let demo = c.demo_merchant().await;
    c.user("owner@shop.example", Role::Merchant(demo)).await;
    let mut v = Visitor::new(c.url());
    let p = v
        .sign_in_with_password("owner@shop.example", PASSWORD)
        .await;
    let cookie = &p.set_cookies[0];
    for attribute in ["HttpOnly", "SameSite=Strict", "Path=/"] {
        assert!(cookie.contains(attribute), "{cookie}");
    }
    assert!(!cookie.contains("Secure"), "plain HTTP: {cookie}");
    let half = v.cookie.clone().expect("a session");
    // A half session opens no page.
    let p = v.get("/projects").await;
    assert_eq!(p.location.as_deref(), Some("/sign-in/enrol"));
    let key = totp_key(&v.get("/sign-in/enrol").await.body);
    v.post("/sign-in/enrol", &[("code", &c.code(&key))]).await;
    let full = v.cookie.clone().expect("a session");
    assert_ne!(half, full, "a new id after the second step");
    let mut stale = Visitor::new(c.url());
    stale.cookie = Some(half);
    assert_eq!(
        stale.get("/projects").await.status,
        303,
        "the old id is gone"
    );

    // GET does not sign out.
    assert_eq!(v.get("/sign-out").await.status, 405);
    assert_eq!(v.get("/projects").await.status, 200);

    // Idle for 29 minutes: still signed in (and seen now); 31 more: gone.
    c.clock.advance(Duration::from_secs(29 * 60));
    assert_eq!(v.get("/projects").await.status, 200);
    c.clock.advance(Duration::from_secs(31 * 60));
    let p = v.get("/projects").await;
    assert_eq!(p.location.as_deref(), Some("/sign-in"), "idle timeout");

    // Absolute timeout: active every 20 minutes, ended 12 hours after sign-in.
    c.next_step();
    let mut v = Visitor::new(c.url());
    v.sign_in_with_password("owner@shop.example", PASSWORD)
        .await;
    let p = v.post("/sign-in/code", &[("code", &c.code(&key))]).await;
    assert_eq!(p.status, 303, "{}", p.body);
    for _ in 0..35 {
        c.clock.advance(Duration::from_secs(20 * 60));
        assert_eq!(v.get("/projects").await.status, 200);
    }
    c.clock.advance(Duration::from_secs(20 * 60));
    assert_eq!(v.get("/projects").await.status, 303, "absolute timeout");

    // POST sign-out ends the session and clears the cookie.
    c.next_step();
    let mut v = Visitor::new(c.url());
    v.sign_in_with_password("owner@shop.example", PASSWORD)
        .await;
    v.post("/sign-in/code", &[("code", &c.code(&key))]).await;
    let session = v.cookie.clone();
    let p = v.post("/sign-out", &[]).await;
    assert_eq!(p.location.as_deref(), Some("/sign-in?done=signed_out"));
    assert!(p.set_cookies[0].contains("Max-Age=0"));
    let mut replay = Visitor::new(c.url());
    replay.cookie = session;
    assert_eq!(
        replay.get("/projects").await.status,
        303,
        "the session is gone"
    );
    c.server.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_invitation_link_sets_the_password_once() {
    let c = Cabinet::start().await;
    let demo = c.demo_merchant().await;
    let invite = c
        .cabinet()
        .users()
        .create(
            "New.User@Shop.example",
            Role::Merchant(demo),
            &payments_core::service::Actor("test".into()),
        )
        .await
        .expect("a user");
    let path = format!("/invite/{}", invite.token.expose());
    let mut v = Visitor::new(c.url());
    let page = v.get(&path).await;
    assert_eq!(page.status, 200);
    assert!(page.body.contains("new.user@shop.example"));
    let p = v
        .post(&path, &[("password", "short"), ("password_again", "short")])
        .await;
    assert_eq!(p.status, 303, "{}", p.body);
    let again = v.follow(&p).await;
    assert_eq!(again.status, 422);
    assert!(
        again.body.contains("at least 12 characters"),
        "{}",
        again.body
    );
    let p = v
        .post(
            &path,
            &[
                ("password", PASSWORD),
                ("password_again", "something else!"),
            ],
        )
        .await;
    let again = v.follow(&p).await;
    assert_eq!(again.status, 422);
    assert!(again.body.contains("differ"), "{}", again.body);
    assert!(
        !p.location
            .as_deref()
            .unwrap_or_default()
            .contains("something"),
        "nothing typed travels in the URL"
    );
    let p = v
        .post(
            &path,
            &[("password", PASSWORD), ("password_again", PASSWORD)],
        )
        .await;
    assert_eq!(p.location.as_deref(), Some("/sign-in?done=password"));
    assert_eq!(v.get(&path).await.status, 404, "used once");
    let p = v
        .post(
            &path,
            &[("password", PASSWORD), ("password_again", PASSWORD)],
        )
        .await;
    assert_eq!(v.follow(&p).await.status, 404);
    let p = v
        .sign_in_with_password("NEW.USER@shop.example", PASSWORD)
        .await;
    assert_eq!(p.location.as_deref(), Some("/sign-in/enrol"), "{}", p.body);
    c.server.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_sandbox_demo_user_signs_in_with_its_credentials() {
    let c = Cabinet::start().await;
    let creds = c.server.creds();
    assert_eq!(creds.cabinet_url.as_deref(), Some(c.url()));
    let email = creds.cabinet_email.clone().expect("cabinet_email");
    let password = creds.cabinet_password.clone().expect("cabinet_password");
    let mut v = Visitor::new(c.url());
    let p = v.sign_in_with_password(&email, password.expose()).await;
    assert_eq!(p.location.as_deref(), Some("/sign-in/enrol"), "{}", p.body);
    c.server.stop().await;
}

/// Every visible form control of the pages has a `<label for>`, and the sign-in forms use the
/// standard `autocomplete` tokens.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_control_has_a_label_and_security_headers_are_sent() {
    let c = Cabinet::start().await;
    let demo = c.demo_merchant().await;
    c.user("owner@shop.example", Role::Merchant(demo)).await;
    let mut anonymous = Visitor::new(c.url());
    let sign_in = anonymous.get("/sign-in").await;
    assert!(sign_in.body.contains("autocomplete=\"username\""));
    assert!(sign_in.body.contains("autocomplete=\"current-password\""));
    let headers = &sign_in.headers;
    assert!(headers["content-security-policy"]
        .to_str()
        .unwrap()
        .contains("frame-ancestors 'none'"));
    assert_eq!(headers["x-content-type-options"], "nosniff");
    assert_eq!(headers["cache-control"], "no-store");

    let mut v = Visitor::new(c.url());
    v.sign_in_with_password("owner@shop.example", PASSWORD)
        .await;
    let enrol = v.get("/sign-in/enrol").await.body;
    assert!(enrol.contains("autocomplete=\"one-time-code\""));
    assert!(enrol.contains("<svg"), "an inline SVG QR code");
    assert!(
        enrol.contains("href=\"otpauth://totp/"),
        "the URI as a link"
    );
    let key = totp_key(&enrol);
    v.post("/sign-in/enrol", &[("code", &c.code(&key))]).await;
    let project = c.server.project();
    let mut pages = vec![sign_in.body, enrol];
    for path in [
        "/".to_string(),
        "/projects".to_string(),
        format!("/projects/{project}"),
        format!("/projects/{project}/payments"),
        format!("/projects/{project}/balance"),
        format!("/projects/{project}/deliveries"),
        "/security".to_string(),
        "/audit".to_string(),
    ] {
        let p = v.get(&path).await;
        assert_eq!(p.status, 200, "{path}");
        pages.push(p.body);
    }
    assert!(pages
        .iter()
        .any(|p| p.contains("autocomplete=\"new-password\"")));
    for page in &pages {
        for tag in ["<input ", "<textarea ", "<select "] {
            for control in page.split(tag).skip(1) {
                let control = control.split('>').next().unwrap_or("");
                if control.contains("type=\"hidden\"") {
                    continue;
                }
                let id = between(control, "id=\"", "\"")
                    .unwrap_or_else(|| panic!("a control without an id: {tag}{control}"));
                assert!(
                    page.contains(&format!("<label for=\"{id}\"")),
                    "no label for #{id}"
                );
            }
        }
        // No script but the cabinet's own time zone one, on the sign-in's last step.
        let own = "<script src=\"/assets/zone.js\" defer></script>";
        assert_eq!(
            page.matches("<script").count(),
            page.matches(own).count(),
            "no other script"
        );
    }
    let css = anonymous.get("/assets/cabinet.css").await;
    assert_eq!(css.status, 200);
    assert!(css.headers["content-type"]
        .to_str()
        .unwrap()
        .starts_with("text/css"));
    c.server.stop().await;
}

/// Over real sockets: after 2 wrong passwords, 30 wrong and the right one sent at once are
/// checked at most 3 times (the limit is 5 per account per 15 minutes); the others are
/// answered `429` unchecked (on the sign-in page their `303` leads to). (When all 31 are
/// counted before any is checked, each sees 30 others and none is checked: the limit errs on
/// the side of checking less.)
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn simultaneous_sign_ins_check_at_most_the_accounts_limit() {
    let c = Cabinet::start().await;
    c.user("target@support.example", Role::Support).await;
    for _ in 0..2 {
        let mut v = Visitor::new(c.url());
        let p = v
            .sign_in_with_password("target@support.example", "wrong!")
            .await;
        let again = v.follow(&p).await;
        assert_eq!(again.status, 401, "{}", again.body);
    }
    let burst = (0..31).map(|n| {
        let mut v = Visitor::new(c.url());
        async move {
            let password = if n == 20 { PASSWORD } else { "wrong!" };
            let p = v
                .sign_in_with_password("target@support.example", password)
                .await;
            // A refusal leads back to the sign-in page, which answers with its status.
            match p.location.as_deref() {
                Some(to) if to.starts_with("/sign-in?flash=") => v.follow(&p).await.status,
                _ => p.status,
            }
        }
    });
    let statuses = futures_util::future::join_all(burst).await;
    let checked = statuses.iter().filter(|s| matches!(s, 303 | 401)).count();
    let throttled = statuses.iter().filter(|s| **s == 429).count();
    assert!(
        checked <= 3 && checked + throttled == 31,
        "checked {checked}, throttled {throttled}: {statuses:?}"
    );
}

/// A cabinet that does not dispatch, with the user `owner@shop.example` of the demo merchant
/// whose project is in test mode with `callback_url`, and a test payment created in it.
async fn test_payment_of_owner(
    callback_url: Option<&str>,
    merchant_payment_id: &str,
) -> (Cabinet, payments_client::ApiResponse) {
    let c = test_mode_with_user("owner@shop.example", callback_url).await;
    let body = json!({"merchant_payment_id": merchant_payment_id, "amount": "1500", "payment_method": "sbp"});
    let created = c.create_payment(&body).await;
    (c, created)
}

/// "Send callback" on the card of a closed test payment: a merchant's user sends the test
/// payment's callback (a manual resend with `is_test: true`), which is audited; the button is
/// not there while the payment is open, and a live payment's resend stays support's.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_merchant_user_sends_a_closed_test_payments_callback() {
    let (c, created) =
        test_payment_of_owner(Some("https://shop.example.com/callbacks"), "tcb-1").await;
    assert_eq!(created.json["is_test"], true, "{}", created.json);
    let id = created.json["id"].as_str().expect("id").to_string();

    let (mut owner, _) = enrolled(&c, "owner@shop.example").await;
    let card = owner.get(&format!("/payments/{id}")).await;
    assert!(card.body.contains("test-paid"), "the outcome buttons first");
    assert!(!card.body.contains("test-send-callback"), "not while open");
    let refused = owner.post(&format!("/payments/{id}/resend"), &[]).await;
    let card = owner.follow(&refused).await;
    assert_eq!(card.status, 409, "an open payment is not resent");
    assert!(card.body.contains("error-summary"), "{}", card.body);
    assert_eq!(
        owner.get(&format!("/payments/{id}")).await.status,
        200,
        "the refusal is shown once"
    );

    let paid = owner.post(&format!("/payments/{id}/test/paid"), &[]).await;
    assert_eq!(paid.status, 303, "{}", paid.body);
    let card = owner.get(&format!("/payments/{id}")).await;
    assert!(card.body.contains("test-send-callback"), "{}", card.body);
    let sent = owner.post(&format!("/payments/{id}/resend"), &[]).await;
    assert_eq!(sent.status, 303, "{}", sent.body);
    assert_eq!(
        sent.location.as_deref(),
        Some(format!("/payments/{id}?done=resent").as_str())
    );
    let events = c
        .server
        .state
        .service
        .store()
        .events_for_payment(id.parse().expect("an id"))
        .await
        .expect("events");
    assert_eq!(events.len(), 1, "one event: the one sent by hand");
    let body: serde_json::Value =
        serde_json::from_slice(&events[0].outbox.event.body).expect("JSON");
    assert_eq!(
        (body["is_test"].clone(), body["status"].clone()),
        (json!(true), json!("completed"))
    );
    assert_eq!(events[0].outbox.max_attempts, 1);
    let audit = c
        .cabinet()
        .store()
        .find_cabinet_audit(&payments_cabinet::store::AuditQuery {
            limit: 100,
            ..Default::default()
        })
        .await
        .expect("the audit log");
    assert!(
        audit
            .records
            .iter()
            .any(|r| r.action == "test_payment.resend_callback" && r.success),
        "{:?}",
        audit.records
    );
    // The audit log names the object and links to its card.
    let log = owner.get("/audit").await;
    assert!(
        log.body
            .contains(&format!("<a href=\"/payments/{id}\">payment</a>")),
        "{}",
        log.body
    );
}

/// The card of a closed payment whose callback has nowhere to go (no URL on the payment, its
/// project or its merchant) says so and links to the project's callback setting instead of
/// offering a send the service would refuse; once the project has a URL, the send is offered.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_card_without_a_callback_url_says_where_to_set_one() {
    let (c, created) = test_payment_of_owner(None, "nourl-1").await;
    let id = created.json["id"].as_str().expect("id").to_string();
    let (mut owner, _) = enrolled(&c, "owner@shop.example").await;
    let paid = owner.post(&format!("/payments/{id}/test/paid"), &[]).await;
    assert_eq!(paid.status, 303, "{}", paid.body);
    let card = owner.get(&format!("/payments/{id}")).await;
    assert!(
        card.body.contains("id=\"no-callback-url\""),
        "{}",
        card.body
    );
    assert!(
        card.body.contains(&format!(
            "href=\"/projects/{}#callback\"",
            c.server.project()
        )),
        "{}",
        card.body
    );
    assert!(!card.body.contains("test-send-callback"), "{}", card.body);

    c.server
        .patch_project(payments_directory::ProjectPatch {
            callback_url: Some(Some("https://shop.example.com/callbacks".into())),
            ..Default::default()
        })
        .await;
    let card = owner.get(&format!("/payments/{id}")).await;
    assert!(card.body.contains("test-send-callback"), "{}", card.body);
    assert!(!card.body.contains("no-callback-url"), "{}", card.body);
}
