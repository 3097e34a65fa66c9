//! Moving the authenticator to a new phone, in Chromium: from Security, the password and a
//! current code (or a recovery code) show a new key once; a wrong code from the new device
//! changes nothing; its right code replaces the old key, ends the user's other sessions and
//! is audited. The old app's codes no longer sign in; the new app's do.

use payments_cabinet::accounts::Client;
use payments_cabinet::store::{AuditQuery, Role};

use crate::browser::Browser;
use crate::support::{Cabinet, PASSWORD};
use crate::{first_sign_in, page};

/// The key the new-device page shows.
async fn shown_key(b: &Browser) -> Vec<u8> {
    let text = b.text("#totp-key").await;
    payments_cabinet::secrets::totp_key_from_base32(&text.replace(' ', ""))
        .expect("the key is base32")
}

/// Starts the move from Security with the password and `code`.
async fn begin(b: &Browser, code: &str) {
    b.open("/security").await;
    b.fill("#au-password", PASSWORD).await;
    b.fill("#au-code", code).await;
    b.click("form[action='/security/authenticator'] button")
        .await;
}

/// Sends `code` in the new device's form.
async fn confirm(b: &Browser, code: &str) {
    b.fill("#new-code", code).await;
    b.click("form[action='/security/authenticator/confirm'] button")
        .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs Chromium: chromium and chromedriver"]
async fn the_authenticator_moves_to_a_new_device_and_the_old_one_stops_working() {
    let c = Cabinet::start().await;
    let demo = c.demo_merchant().await;
    let email = "owner@shop.example";
    c.user(email, Role::Merchant(demo)).await;
    let b = Browser::start(c.url()).await;
    let (old, codes) = first_sign_in(&c, &b, email).await;
    b.click_text("I have saved the codes, continue").await;

    // A second session of the same user (another device), signed in with the old key.
    let client = Client::default();
    c.next_step();
    let (half, _) = c
        .cabinet()
        .sign_in()
        .password(email, PASSWORD, &client, None)
        .await
        .expect("the password");
    let current = c
        .cabinet()
        .sessions()
        .current(half.cookie.expose())
        .await
        .expect("store")
        .expect("a half session");
    let other = c
        .cabinet()
        .sign_in()
        .code(&current, half.cookie.expose(), &c.code(&old), &client)
        .await
        .expect("the old key signs in");

    // A wrong password, then a wrong code: refused, nothing shown.
    c.next_step();
    b.open("/security").await;
    b.fill("#au-password", "not the password").await;
    b.fill("#au-code", &c.code(&old)).await;
    b.click("form[action='/security/authenticator'] button")
        .await;
    assert_eq!(page(&b).await, "/security");
    assert!(
        b.errors().await.contains("not right"),
        "{}",
        b.errors().await
    );
    begin(&b, "000000").await;
    assert_eq!(page(&b).await, "/security");
    assert!(
        b.all("#totp-key").await.is_empty(),
        "no key for a wrong code"
    );

    // The password and a current code: the new key, once, with the QR code.
    c.next_step();
    begin(&b, &c.code(&old)).await;
    assert!(b.path().await.starts_with("/shown/"), "{}", b.path().await);
    assert!(b.el(".qr svg").await.is_displayed().await.expect("shown"));
    let new = shown_key(&b).await;
    assert_ne!(new, old);

    // A wrong code from the new device changes nothing; the key is not shown again.
    confirm(&b, "000000").await;
    assert_eq!(page(&b).await, "/security/authenticator/confirm");
    assert!(
        b.errors().await.contains("not right"),
        "{}",
        b.errors().await
    );
    assert!(b.all("#totp-key").await.is_empty(), "the key is shown once");
    assert!(
        c.cabinet()
            .sessions()
            .current(other.cookie.expose())
            .await
            .expect("store")
            .is_some(),
        "nothing changed yet"
    );

    // Its right code: the new key replaces the old one; the other session ends.
    c.next_step();
    confirm(&b, &c.code(&new)).await;
    assert_eq!(page(&b).await, "/security");
    assert!(
        b.text(".notice").await.contains("new device is set up"),
        "{}",
        b.source().await
    );
    assert!(
        c.cabinet()
            .sessions()
            .current(other.cookie.expose())
            .await
            .expect("store")
            .is_none(),
        "the other session ended"
    );
    let audit = c
        .cabinet()
        .store()
        .find_cabinet_audit(&AuditQuery {
            limit: 100,
            ..AuditQuery::default()
        })
        .await
        .expect("the audit log")
        .records;
    assert!(
        audit
            .iter()
            .any(|r| r.action == "two_factor.reenrol" && r.success),
        "{audit:#?}"
    );
    assert!(
        audit
            .iter()
            .any(|r| r.action == "two_factor.reenrol" && !r.success),
        "the refusals are audited too: {audit:#?}"
    );

    // The old app's code no longer signs in; the new app's does.
    b.sign_out().await;
    c.next_step();
    b.password_step(email, PASSWORD).await;
    b.fill("#code", &c.code(&old)).await;
    b.click("form[action='/sign-in/code'] button").await;
    assert_eq!(page(&b).await, "/sign-in/code", "the old key is refused");
    b.fill("#code", &c.code(&new)).await;
    b.click("form[action='/sign-in/code'] button").await;
    assert_eq!(b.heading().await, "Home", "the new key signs in");

    // A recovery code (the phone is gone) starts a move too.
    begin(&b, &codes[0]).await;
    assert!(b.path().await.starts_with("/shown/"), "{}", b.path().await);
    assert_ne!(shown_key(&b).await, new);
    b.close().await;
    c.server.stop().await;
}
