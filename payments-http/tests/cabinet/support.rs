//! Helpers of the cabinet tests: a sandbox server on a shifted clock (to step past TOTP time
//! steps and timeouts without sleeping), users with passwords, and reading what the pages
//! show (the TOTP key of the enrolment page, recovery codes).
//!
//! Shared with payments-server's browser tests (`payments-server/tests/cabinet_browser/`),
//! which include this file: the test server is the including crate's `crate::TestServer`
//! (here payments-http's, there the whole server) with its settings `crate::ServerSettings`.
//! Both test servers have the same `start_with_clock`, `cabinet` and, by dereference,
//! `payments_http::testing::Endpoints`.

#![allow(dead_code)]

use payments_directory::DirectoryAccess;
use std::sync::Arc;
use std::time::Duration;

use payments_cabinet::secrets;
use payments_cabinet::store::{CabinetStoreExt, Role, TeamRole};
use payments_core::service::Actor;
use payments_core::store::MerchantStoreExt;
use payments_core::{Clock, MerchantId};
use payments_http::testing::ShiftedClock;

use crate::{ServerSettings, TestServer};

/// A password the tests give their users.
pub const PASSWORD: &str = "correct horse battery staple";

/// A sandbox with the cabinet, on a clock the test moves.
pub struct Cabinet {
    pub server: TestServer,
    pub clock: ShiftedClock,
}

impl Cabinet {
    /// A bootstrapped sandbox.
    pub async fn start() -> Cabinet {
        Cabinet::start_with(|_| {}).await
    }

    /// A bootstrapped sandbox with settings changed by `configure`.
    pub async fn start_with(configure: impl FnOnce(&mut ServerSettings)) -> Cabinet {
        let clock = ShiftedClock::new();
        let server = TestServer::start_with_clock(Arc::new(clock.clone()), configure).await;
        Cabinet { server, clock }
    }

    /// A create of the project over the merchant API, as its client sends it.
    pub async fn create_payment(&self, body: &serde_json::Value) -> payments_client::ApiResponse {
        self.server
            .client()
            .create_payment(body)
            .await
            .expect("a create")
    }

    /// The cabinet's base URL.
    pub fn url(&self) -> &str {
        self.server
            .cabinet_url
            .as_deref()
            .expect("the cabinet runs")
    }

    /// The cabinet (accounts).
    pub fn cabinet(&self) -> &payments_cabinet::Cabinet {
        self.server.cabinet.as_ref().expect("the cabinet runs")
    }

    /// The demo merchant's id.
    pub async fn demo_merchant(&self) -> MerchantId {
        let project = self
            .server
            .state
            .service
            .store()
            .project(self.server.project())
            .await
            .expect("store")
            .expect("the demo project");
        project.merchant_id
    }

    /// A new merchant with one project (not in test mode); returns both ids.
    pub async fn other_merchant(&self, name: &str) -> (MerchantId, payments_core::ProjectId) {
        let svc = &self.server.state.service;
        let actor = Actor("test".into());
        let m = svc
            .directory()
            .create_merchant(name, None, &actor)
            .await
            .expect("merchant");
        let p = svc
            .directory()
            .create_project(m.id, &format!("{name} site"), Default::default(), &actor)
            .await
            .expect("project");
        (m.id, p.id)
    }

    /// Waits until the demo project's request log holds `rid` (the log is written off the
    /// request path).
    pub async fn logged(&self, rid: &str) {
        let query = payments_core::request_log::RequestLogQuery::new(self.server.project(), 100);
        for _ in 0..500 {
            let page = self
                .server
                .state
                .service
                .requests()
                .request_log(&query)
                .await
                .expect("the log reads");
            if page.requests.iter().any(|e| e.request_id == rid) {
                return;
            }
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
        panic!("the request {rid} did not reach the log");
    }

    /// A user with [`PASSWORD`] (no TOTP key yet).
    pub async fn user(&self, email: &str, role: Role) {
        let invite = self
            .cabinet()
            .users()
            .create(email, role, &Actor("test".into()))
            .await
            .expect("a new user");
        self.cabinet()
            .users()
            .set_password(invite.token.expose(), PASSWORD, &Default::default())
            .await
            .expect("the password is set");
    }

    /// A user of the demo merchant with [`PASSWORD`] in team role `role` on `projects` (every
    /// one: `None`).
    pub async fn team_member(
        &self,
        email: &str,
        role: TeamRole,
        projects: Option<Vec<payments_core::ProjectId>>,
    ) {
        let demo = self.demo_merchant().await;
        self.user(email, Role::Merchant(demo)).await;
        let store = self.cabinet().store();
        let mut user = store
            .user_by_email(email)
            .await
            .expect("store")
            .expect("the user");
        user.team_role = role;
        user.projects = projects;
        store.update_user(&user).await.expect("the role is stored");
    }

    /// Writes `p` straight to the store, created `age` ago on the server's clock and paid to
    /// `requisite` (the search reads what any write stored); answers it as stored.
    pub async fn stored(
        &self,
        mut p: payments_core::payment::Payment,
        requisite: &str,
        age: Duration,
    ) -> payments_core::payment::Payment {
        p.created_at = self.clock.now() - age;
        p.updated_at = p.created_at;
        p.expires_at = p.created_at + Duration::from_secs(900);
        p.requisites = Some(payments_core::testing::contract::paid_to(requisite));
        self.server
            .state
            .service
            .store()
            .insert_payment(&p)
            .await
            .expect("stored");
        p
    }

    /// Moves the server's clock to the next TOTP time step.
    pub fn next_step(&self) {
        self.clock
            .advance(Duration::from_secs(secrets::TOTP_STEP_SECS));
    }

    /// The TOTP code of `key` now (server time).
    pub fn code(&self, key: &[u8]) -> String {
        let now = self.clock.now().unix_secs();
        secrets::totp_code(key, secrets::totp_step(now))
    }
}

/// The text between `start` (after its first `>` when it ends inside a tag) and `end`.
pub fn between<'a>(html: &'a str, start: &str, end: &str) -> Option<&'a str> {
    let from = html.find(start)? + start.len();
    let rest = &html[from..];
    let to = rest.find(end)?;
    Some(&rest[..to])
}

/// The TOTP key the enrolment page shows (`<code id="totp-key">ABCD EFGH ...</code>`).
pub fn totp_key(html: &str) -> Vec<u8> {
    let grouped = between(html, "id=\"totp-key\" class=\"key\">", "</code>")
        .expect("the enrolment page shows the key");
    secrets::totp_key_from_base32(&grouped.replace(' ', "")).expect("the key is base32")
}

/// The recovery codes a page shows.
pub fn recovery_codes(html: &str) -> Vec<String> {
    let list = between(html, "id=\"recovery-codes\"", "</ol>").expect("the codes are shown");
    list.split("<code>")
        .skip(1)
        .map(|c| c.split("</code>").next().unwrap_or("").to_string())
        .collect()
}
