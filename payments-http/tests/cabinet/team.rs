//! A merchant's team over real HTTP: every role against every page and form of a project
//! (the server refuses with `403` what the role does not allow, whatever the page offers),
//! the owner's invitations with a role and projects, a member who sees only its projects,
//! and the rules that keep an owner.

use payments_cabinet::store::{CabinetStoreExt, TeamRole};
use payments_core::ids::ProjectId;
use payments_core::service::Actor;
use payments_directory::DirectoryAccess;
use serde_json::json;

use super::enrolled;
use super::roles::{holds, Need, ROUTES};
use super::support::{between, Cabinet, PASSWORD};
use super::visitor::Visitor;

/// Each role against every route: `403` exactly where the role lacks what the route needs
/// (an allowed route may still answer `404` for an id nothing has, `303` for a refused form,
/// `409` for a closed payment: never `403`), and each page a role may open offers only the
/// links its role may follow.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_role_against_every_page_and_form() {
    let c = super::test_mode_with_user(
        "owner@shop.example",
        Some("https://shop.example.com/callbacks"),
    )
    .await;
    let body = json!({"merchant_payment_id": "team-1", "amount": "1500", "payment_method": "sbp"});
    let created = c.create_payment(&body).await;
    let pay = created.json["id"].as_str().expect("id").to_string();
    let project = c.server.project().to_string();
    let x = "0b0e0f00-0000-4000-8000-000000000007";
    for role in TeamRole::ALL {
        let email = format!("{}-role@shop.example", role.name());
        c.team_member(&email, role, None).await;
        let (mut v, _) = enrolled(&c, &email).await;
        let owner = c
            .cabinet()
            .store()
            .user_by_email("owner@shop.example")
            .await
            .expect("store")
            .expect("the owner");
        for (method, path, need) in ROUTES {
            let path = path
                .replace("{p}", &project)
                .replace("{pay}", &pay)
                .replace("{m}", &owner.id.to_string())
                .replace("{x}", x);
            let page = match *method {
                "GET" => v.get(&path).await,
                _ => v.post(&path, &[]).await,
            };
            let allowed = holds(role, *need);
            assert_eq!(
                page.status == 403,
                !allowed,
                "{role:?} {method} {path}: {} {}",
                page.status,
                page.body
            );
            if !allowed {
                assert!(page
                    .body
                    .contains("Your role in the team does not allow this."));
            }
        }
        let home = v.get(&format!("/projects/{project}/payments")).await;
        assert_eq!(home.status, 200);
        for (link, need) in [
            (format!("href=\"/projects/{project}\""), Need::Integration),
            (format!("href=\"/projects/{project}/balance\""), Need::Money),
            (
                format!("href=\"/projects/{project}/requests\""),
                Need::Integration,
            ),
            ("id=\"payments-csv\"".to_string(), Need::Money),
            ("href=\"/team\"".to_string(), Need::Team),
            ("href=\"/audit\"".to_string(), Need::Audit),
        ] {
            assert_eq!(
                home.body.contains(&link),
                holds(role, need),
                "{role:?}: {link}"
            );
        }
    }
}

/// A second project of the demo merchant.
async fn second_project(c: &Cabinet) -> ProjectId {
    let demo = c.demo_merchant().await;
    c.server
        .state
        .service
        .directory()
        .create_project(
            demo,
            "Second shop",
            Default::default(),
            &Actor("test".into()),
        )
        .await
        .expect("a project")
        .id
}

/// The owner invites a developer for one project: the link is shown once, sets a password,
/// and the developer sees that project and not the other; the owner changes the role and
/// removes the member, whose session ends; every change is in the merchant's audit log.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_owner_invites_a_colleague_for_one_project() {
    let c = super::test_mode_with_user("owner@shop.example", None).await;
    let second = second_project(&c).await;
    let first = c.server.project();
    let (mut owner, _) = enrolled(&c, "owner@shop.example").await;
    let form = [
        ("email", "Dev@Shop.example"),
        ("role", "developer"),
        ("project", &second.to_string()),
    ];
    let sent = owner.post("/team", &form).await;
    assert_eq!(sent.status, 303, "{}", sent.body);
    let shown = owner.follow(&sent).await;
    let link = between(&shown.body, "/invite/", "\"")
        .expect("the link")
        .to_string();
    assert!(
        owner.follow(&sent).await.body.find(&link).is_none(),
        "shown once"
    );
    let mut dev = Visitor::new(c.url());
    let set = dev
        .post(
            &format!("/invite/{link}"),
            &[("password", PASSWORD), ("password_again", PASSWORD)],
        )
        .await;
    assert_eq!(set.status, 303, "{}", set.body);
    assert_eq!(set.location.as_deref(), Some("/sign-in?done=password"));
    let (mut dev, _) = enrolled(&c, "dev@shop.example").await;
    let list = dev.get("/projects").await;
    assert!(list.body.contains(&second.to_string()));
    assert!(!list.body.contains(&first.to_string()), "only its project");
    assert_eq!(dev.get(&format!("/projects/{second}")).await.status, 200);
    assert_eq!(dev.get(&format!("/projects/{first}")).await.status, 404);
    assert_eq!(dev.get("/team").await.status, 403);

    let dev_id = c
        .cabinet()
        .store()
        .user_by_email("dev@shop.example")
        .await
        .expect("store")
        .expect("the developer")
        .id;
    let changed = owner
        .post(
            &format!("/team/{dev_id}"),
            &[("role", "finance"), ("every_project", "1")],
        )
        .await;
    assert_eq!(changed.status, 303, "{}", changed.body);
    assert_eq!(dev.get(&format!("/projects/{second}")).await.status, 403);
    assert_eq!(
        dev.get(&format!("/projects/{first}/balance")).await.status,
        200
    );

    let removed = owner.post(&format!("/team/{dev_id}/remove"), &[]).await;
    assert_eq!(removed.status, 303, "{}", removed.body);
    let after = dev.get("/projects").await;
    assert_eq!(after.status, 303, "the removed member's session ended");

    let restored = owner.post(&format!("/team/{dev_id}/restore"), &[]).await;
    assert_eq!(restored.status, 303, "{}", restored.body);
    let store = c.cabinet().store();
    let dev = store
        .user(dev_id)
        .await
        .expect("store")
        .expect("the member");
    assert!(!dev.disabled, "restored");
    assert_eq!(dev.team_role, TeamRole::Finance, "with its role");

    let audit = owner.get("/audit?action=member").await;
    for action in [
        "member.invite",
        "member.change",
        "member.remove",
        "member.restore",
    ] {
        assert!(audit.body.contains(action), "{action}: {}", audit.body);
    }
}

/// The rules that keep a merchant's cabinet: the last owner is neither demoted nor removed,
/// nobody removes themselves, and an admin neither makes an owner nor changes one.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_team_keeps_an_owner_and_admins_leave_owners_alone() {
    let c = super::test_mode_with_user("owner@shop.example", None).await;
    // The sandbox's demo user is an owner too: here it is a viewer, so that the owner is the
    // last one.
    let store = c.cabinet().store();
    for mut user in store.users().await.expect("users") {
        if user.email != "owner@shop.example" {
            user.team_role = TeamRole::Viewer;
            store.update_user(&user).await.expect("stored");
        }
    }
    c.team_member("admin@shop.example", TeamRole::Admin, None)
        .await;
    c.team_member("viewer@shop.example", TeamRole::Viewer, None)
        .await;
    let id = |email: &'static str| {
        let store = c.cabinet().store().clone();
        async move {
            store
                .user_by_email(email)
                .await
                .expect("store")
                .expect("a user")
                .id
        }
    };
    let (owner_id, viewer_id) = (
        id("owner@shop.example").await,
        id("viewer@shop.example").await,
    );
    let (mut owner, _) = enrolled(&c, "owner@shop.example").await;
    let (mut admin, _) = enrolled(&c, "admin@shop.example").await;
    let every = ("every_project", "1");

    let demote = owner
        .post(&format!("/team/{owner_id}"), &[("role", "admin"), every])
        .await;
    assert_eq!(demote.status, 303, "{}", demote.body);
    let shown = owner.follow(&demote).await;
    assert_eq!(shown.status, 409, "{}", shown.body);
    assert!(shown.body.contains("The team keeps at least one owner"));

    let promote = admin
        .post(&format!("/team/{viewer_id}"), &[("role", "owner"), every])
        .await;
    let shown = admin.follow(&promote).await;
    assert_eq!(shown.status, 409, "{}", shown.body);
    assert!(shown
        .body
        .contains("Only an owner adds, changes or removes an owner."));
    let touch = admin.post(&format!("/team/{owner_id}/remove"), &[]).await;
    let shown = admin.follow(&touch).await;
    assert_eq!(shown.status, 409, "{}", shown.body);

    let own = admin
        .post(
            &format!("/team/{}/remove", id("admin@shop.example").await),
            &[],
        )
        .await;
    let shown = admin.follow(&own).await;
    assert!(
        shown.body.contains("You cannot remove yourself"),
        "{}",
        shown.body
    );

    // With a second owner, the first may step down.
    let promoted = owner
        .post(&format!("/team/{viewer_id}"), &[("role", "owner"), every])
        .await;
    assert_eq!(owner.follow(&promoted).await.status, 200);
    let stepped = owner
        .post(&format!("/team/{owner_id}"), &[("role", "admin"), every])
        .await;
    assert_eq!(owner.follow(&stepped).await.status, 200);
    let store = c.cabinet().store();
    let owner = store
        .user(owner_id)
        .await
        .expect("store")
        .expect("the user");
    assert_eq!(owner.team_role, TeamRole::Admin);
}
