//! Every team role in Chromium: each signs in and opens every page of the roles table
//! (`payments-http/tests/cabinet/roles.rs`); a page the role may not use shows "Not allowed",
//! any other its own page; the navigation and the project tabs offer exactly what the role
//! may follow. The forms' refusals are checked by direct requests in the HTTP tests
//! (`payments-http/tests/cabinet/team.rs`), which send every form of the same table.

use payments_cabinet::store::TeamRole;
use serde_json::json;

use crate::roles::{holds, Need, ROUTES};
use crate::support::Cabinet;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs Chromium: chromium and chromedriver"]
async fn every_role_sees_its_pages_and_is_refused_the_others() {
    let c = Cabinet::start().await;
    let created = c
        .server
        .client()
        .create_payment(
            &json!({"merchant_payment_id": "team-1", "amount": "1500", "payment_method": "sbp"}),
        )
        .await
        .expect("a create");
    let pay = created.json["id"].as_str().expect("id").to_string();
    let project = c.server.project().to_string();
    let x = "0b0e0f00-0000-4000-8000-000000000007";
    let b = crate::browser::Browser::start(c.url()).await;
    for role in TeamRole::ALL {
        let email = format!("{}-role@shop.example", role.name());
        c.team_member(&email, role, None).await;
        crate::first_sign_in(&c, &b, &email).await;
        b.click_text("I have saved the codes, continue").await;
        let me = format!("/team/{}", member_id(&c, &email).await);
        for (method, path, need) in ROUTES.iter().filter(|(m, _, _)| *m == "GET") {
            let path = path
                .replace("{p}", &project)
                .replace("{pay}", &pay)
                .replace("{m}", me.trim_start_matches("/team/"))
                .replace("{x}", x);
            if path.ends_with(".csv") {
                continue; // a download, not a page: the HTTP test checks it
            }
            b.open(&path).await;
            let heading = b.heading().await;
            assert_eq!(
                heading == "Not allowed",
                !holds(role, *need),
                "{role:?} {method} {path}: {heading}"
            );
        }
        b.open(&format!("/projects/{project}/payments")).await;
        for (css, need) in [
            ("#nav-team", Need::Team),
            ("#nav-audit", Need::Audit),
            ("#payments-csv", Need::Money),
            (".tabs a[href$='/balance']", Need::Money),
            (".tabs a[href$='/requests']", Need::Integration),
        ] {
            assert_eq!(
                !b.all(css).await.is_empty(),
                holds(role, need),
                "{role:?}: {css}"
            );
        }
        b.sign_out().await;
    }
    b.close().await;
    c.server.stop().await;
}

async fn member_id(c: &Cabinet, email: &str) -> String {
    use payments_cabinet::store::CabinetStoreExt;
    let store = c.cabinet().store();
    let user = store.user_by_email(email).await.expect("store");
    user.expect("the user").id.to_string()
}
