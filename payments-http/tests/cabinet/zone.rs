//! A user's time zone over real HTTP: chosen on the security page (an unknown name refused
//! beside the field), then the pages show times in it and read the payments list's dates as
//! its days.

use std::time::Duration;

use payments_core::testing::TestCaller;
use payments_core::Clock;
use serde_json::json;

use super::enrolled;
use super::support::between;

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
