//! A user's time zone over real HTTP: chosen on the security page (an unknown name refused
//! beside the field), then the pages show times in it and read the payments list's dates as
//! its days.

use std::time::Duration;

use payments_core::testing::TestCaller;
use payments_core::Clock;
use serde_json::json;

use super::enrolled;
use super::support::PASSWORD;
use super::support::{between, totp_key};
use super::visitor::Visitor;

/// At 20:00 UTC it is already the next day in Vladivostok (UTC+10): after the user chooses
/// that zone, the payment's time reads 06:xx UTC+10 and the list's day filter finds it on the
/// next day's date, not on the UTC date.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_users_time_zone_shows_times_and_reads_days() {
    let c = super::test_mode_with_user("owner@shop.example", None).await;
    // Move the server's clock to the next 20:00 UTC.
    let secs = c.clock.now().unix_secs().rem_euclid(86_400);
    c.clock.advance(Duration::from_secs(
        u64::try_from((20 * 3600 - secs).rem_euclid(86_400)).expect("positive"),
    ));
    let (mut owner, _) = enrolled(&c, "owner@shop.example").await;
    let body = json!({"merchant_payment_id": "zone-1", "amount": "700", "payment_method": "sbp"});
    let caller = TestCaller::provision(&c.server.state.service, c.server.project(), 7).await;
    let created = caller
        .create(&c.server.state.service, body.to_string().as_bytes())
        .await
        .expect("a create");
    let id = created.payment.id;
    let utc_day = c.clock.now().to_rfc3339()[..10].to_string();
    let local_day = (c.clock.now() + Duration::from_secs(10 * 3600)).to_rfc3339()[..10].to_string();
    assert_ne!(utc_day, local_day);

    let refused = owner
        .post("/security/time-zone", &[("time_zone", "Mars/Olympus")])
        .await;
    let page = owner.follow(&refused).await;
    assert_eq!(page.status, 422, "{}", page.body);
    assert!(page.body.contains("Time zone: choose one from the list."));
    let set = owner
        .post("/security/time-zone", &[("time_zone", "Asia/Vladivostok")])
        .await;
    assert_eq!(set.status, 303, "{}", set.body);
    let security = owner.follow(&set).await;
    assert!(security
        .body
        .contains("<option selected>Asia/Vladivostok</option>"));

    let card = owner.get(&format!("/payments/{id}")).await;
    assert!(
        card.body.contains(&format!("{local_day} 06:")),
        "{}",
        card.body
    );
    assert!(card.body.contains("UTC+10"));
    let project = c.server.project();
    let list = |day: &str| format!("/projects/{project}/payments?from={day}&to={day}");
    let on_local = owner.get(&list(&local_day)).await;
    assert!(between(&on_local.body, "<table", "</table>").is_some_and(|t| t.contains("zone-1")));
    let on_utc = owner.get(&list(&utc_day)).await;
    assert!(
        !on_utc.body.contains("zone-1"),
        "the UTC day is the day before, there"
    );
}

/// The sign-in's last step carries the browser's zone (the cabinet's script fills it): a user
/// without a zone gets it, one with a zone keeps theirs, and a name that is no zone changes
/// nothing.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_browsers_zone_is_adopted_once_at_sign_in() {
    let c = super::test_mode_with_user("owner@shop.example", None).await;
    let (_, key) = enrolled(&c, "owner@shop.example").await;
    let zone = || async {
        let store = c.cabinet().store();
        let user =
            payments_cabinet::store::CabinetStoreExt::user_by_email(&**store, "owner@shop.example");
        user.await.expect("store").expect("the user").time_zone
    };
    assert_eq!(zone().await, None);
    for (sent, kept) in [
        ("Mars/Olympus", None),
        ("Europe/Moscow", Some("Europe/Moscow")),
        ("Asia/Tokyo", Some("Europe/Moscow")),
    ] {
        let mut v = Visitor::new(c.url());
        let p = v
            .sign_in_with_password("owner@shop.example", PASSWORD)
            .await;
        assert_eq!(p.location.as_deref(), Some("/sign-in/code"));
        c.next_step();
        let done = v
            .post(
                "/sign-in/code",
                &[("code", &c.code(&key)), ("time_zone", sent)],
            )
            .await;
        assert_eq!(done.location.as_deref(), Some("/"), "{}", done.body);
        assert_eq!(zone().await.as_deref(), kept, "{sent}");
    }
    // The script that sends it is the cabinet's own, the one script its policy lets run.
    let mut v = Visitor::new(c.url());
    let script = v.get("/assets/zone.js").await;
    assert_eq!(script.status, 200);
    assert!(script.body.contains("resolvedOptions().timeZone"));
    let csp = script.headers["content-security-policy"]
        .to_str()
        .expect("ASCII");
    assert!(csp.contains("script-src 'self'") && csp.contains("default-src 'none'"));
}

/// The enrolment's form carries the browser's zone too: the zone is kept and the enrolment
/// with it (the update reads the user again, after the confirmation).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_enrolment_keeps_its_key_when_it_brings_a_zone() {
    let c = super::test_mode_with_user("owner@shop.example", None).await;
    let mut v = Visitor::new(c.url());
    let p = v
        .sign_in_with_password("owner@shop.example", PASSWORD)
        .await;
    assert_eq!(p.location.as_deref(), Some("/sign-in/enrol"));
    let key = totp_key(&v.get("/sign-in/enrol").await.body);
    let done = v
        .post(
            "/sign-in/enrol",
            &[("code", &c.code(&key)), ("time_zone", "Europe/Moscow")],
        )
        .await;
    assert_eq!(done.status, 303, "{}", done.body);
    let mut again = Visitor::new(c.url());
    let p = again
        .sign_in_with_password("owner@shop.example", PASSWORD)
        .await;
    assert_eq!(
        p.location.as_deref(),
        Some("/sign-in/code"),
        "still enrolled"
    );
    let store = c.cabinet().store();
    let user =
        payments_cabinet::store::CabinetStoreExt::user_by_email(&**store, "owner@shop.example");
    let user = user.await.expect("store").expect("the user");
    assert_eq!(user.time_zone.as_deref(), Some("Europe/Moscow"));
}
