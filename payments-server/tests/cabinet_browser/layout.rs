//! Every page state of the cabinet, as a merchant and as support, and the payer page's states,
//! at 390 px (a common phone) and 1,280 px: the page never scrolls sideways
//! (`document.documentElement.scrollWidth` at most the width, WCAG 1.4.10 reflow; also at
//! 320 px, a small phone), no UUID in a table is broken over lines at 1,280 px, and axe-core
//! finds no violation of any impact.
//!
//! axe-core comes from npm, pinned in `tests/cabinet_browser/axe/` (`npm ci --prefix
//! payments-server/tests/cabinet_browser/axe`, which `.ci/run` does); it is injected into each
//! page with WebDriver's execute script, which runs in the page's own world over the DevTools
//! protocol, so the cabinet's CSP (no inline or foreign script) does not stop it. Without it
//! the test fails in CI (`CI=true`) and elsewhere checks the widths only, saying so.
//!
//! The same walk writes the documentation's screenshots: with `CABINET_SCREENSHOTS=<dir>` each
//! page is also saved as `<name>.png` (1,280 px) and `<name>-390.png` (390 px)
//! (`CABINET_SCREENSHOTS=$PWD/docs/cabinet cargo test -p payments-server --all-features --test
//! cabinet_browser -- --include-ignored every_page`). States checked but not pictured here
//! (the balance tab's and the payer page's pictures come from their own tests with richer
//! data) have no file name.

use std::path::PathBuf;
use std::time::Duration;

use payments_cabinet::store::Role;
use payments_client::MerchantClient;
use payments_core::auth::keys::{generate_signing_key, public_key_to_pem};
use payments_core::payer::PageLanguage;
use payments_core::service::Actor;
use payments_core::transition::Trigger;
use payments_core::Clock;
use payments_directory::ProjectPatch;
use payments_http::system::OsRandom;
use serde_json::{json, Value};

use crate::browser::Browser;
use crate::support::{Cabinet, PASSWORD};
use crate::{code_step, first_sign_in, receiver};

/// The widths every page state is checked at: a common phone and a laptop.
pub const WIDTHS: [u32; 2] = [390, 1280];

/// A small phone: every page state is also checked for sideways scroll at this width (axe-core
/// runs at [`WIDTHS`] only, which keeps the walk short).
pub const SMALLEST: u32 = 320;

/// What the walk found: each page state's sideways scroll and axe-core violations.
pub struct Checks {
    /// axe-core's `axe.min.js`.
    axe: String,
    /// One line per finding.
    failures: Vec<String>,
    /// How many page states were checked.
    states: usize,
}

/// Where `npm ci` puts axe-core.
fn axe_path() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("tests/cabinet_browser/axe/node_modules/axe-core/axe.min.js")
}

impl Checks {
    /// Reads axe-core; without it the walk fails (it runs only when asked for, like every
    /// browser test: `--include-ignored`), so that no run passes with the axe checks left out.
    pub fn new() -> Checks {
        let path = axe_path();
        let axe = std::fs::read_to_string(&path).unwrap_or_else(|e| {
            panic!(
                "axe-core is not installed at {} ({e}): npm ci --prefix \
                 payments-server/tests/cabinet_browser/axe (.ci/run does)",
                path.display()
            )
        });
        Checks {
            axe,
            failures: Vec::new(),
            states: 0,
        }
    }

    /// Checks the page `b` shows ([`Checks::check`]) and, with `CABINET_SCREENSHOTS`, writes
    /// its pictures `<name>.png` (1,280 px) and `<name>-390.png`.
    pub async fn page(&mut self, b: &Browser, name: &str) {
        self.check(b, name).await;
        b.screenshot(name).await;
        b.screenshot_at(&format!("{name}-390"), 390).await;
    }

    /// Checks the page `b` shows at [`SMALLEST`] (sideways scroll) and at [`WIDTHS`] (sideways
    /// scroll, ids at 1,280 px, axe-core); `label` names it in a failure.
    pub async fn check(&mut self, b: &Browser, label: &str) {
        self.states += 1;
        let path = b.path().await;
        for width in std::iter::once(SMALLEST).chain(WIDTHS) {
            let inner = resize(b, width).await;
            if inner != u64::from(width) {
                self.failures.push(format!(
                    "{label} ({path}) at {width} px: the viewport is {inner} px wide"
                ));
                continue;
            }
            let (scroll, over) = overflow(b).await;
            if scroll > u64::from(width) {
                self.failures.push(format!(
                    "{label} ({path}) at {width} px: scrollWidth {scroll} > {width}; past the \
                     edge: {over}"
                ));
            }
            if width >= 1280 {
                for broken in broken_ids(b).await {
                    self.failures.push(format!(
                        "{label} ({path}) at {width} px: an id in a table is broken over \
                         lines: {broken}"
                    ));
                }
            }
            if width != SMALLEST {
                for v in run_axe(b, &self.axe).await {
                    self.failures
                        .push(format!("{label} ({path}) at {width} px: axe {v}"));
                }
            }
        }
        resize(b, 1280).await;
    }

    /// Fails with every finding, one a line.
    pub fn assert_clean(&self) {
        assert!(self.states > 0, "no page was checked");
        assert!(
            self.failures.is_empty(),
            "{} finding(s) in {} page states:\n{}",
            self.failures.len(),
            self.states,
            self.failures.join("\n")
        );
        eprintln!(
            "{} page states at {SMALLEST} and {WIDTHS:?} px: no sideways scroll, no axe-core \
             violation",
            self.states
        );
    }
}

/// Makes the viewport `width` px wide; answers the width it got. The window manager may apply
/// the size a frame later: asked again for up to 2 s.
async fn resize(b: &Browser, width: u32) -> u64 {
    let _ = b.client.set_window_size(width, 900).await;
    let mut inner = 0;
    for _ in 0..40 {
        inner = b
            .client
            .execute("return window.innerWidth;", vec![])
            .await
            .expect("measured")
            .as_u64()
            .expect("a width");
        if inner == u64::from(width) {
            break;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    inner
}

/// `document.documentElement.scrollWidth`, and the elements reaching past the viewport's right
/// edge (for the failure message).
async fn overflow(b: &Browser) -> (u64, String) {
    let v = b
        .client
        .execute(
            "const w = document.documentElement.clientWidth; \
             const over = [...document.querySelectorAll('body *')] \
               .filter(e => e.getBoundingClientRect().right > w + 0.5) \
               .map(e => { const r = e.getBoundingClientRect(); \
                 return e.tagName.toLowerCase() + (e.id ? '#' + e.id : '') \
                   + (typeof e.className === 'string' && e.className ? '.' + e.className.split(' ').join('.') : '') \
                   + ' (' + Math.round(r.width) + ' px)'; }) \
               .slice(0, 12).join(', '); \
             return [document.documentElement.scrollWidth, over];",
            vec![],
        )
        .await
        .expect("measured");
    (
        v[0].as_u64().expect("a width"),
        v[1].as_str().unwrap_or_default().to_string(),
    )
}

/// The ids of up to 36 characters (a UUID) in tables (`.id`) that the page breaks over more
/// than one line (the text's boxes at more than one height): at 1,280 px each
/// stays whole (the issue saw a UUID over 7 lines in the audit log).
async fn broken_ids(b: &Browser) -> Vec<String> {
    let v = b
        .client
        .execute(
            "return [...document.querySelectorAll('table .id')] \
               .filter(e => e.textContent.trim().length <= 36) \
               .map(e => { const r = document.createRange(); r.selectNodeContents(e); \
                 return [e.textContent.trim(), new Set([...r.getClientRects()].map(b => Math.round(b.top))).size]; }) \
               .filter(([, lines]) => lines > 1) \
               .map(([text, lines]) => text + ' (' + lines + ' lines)');",
            vec![],
        )
        .await
        .expect("measured");
    v.as_array()
        .map(|a| {
            a.iter()
                .filter_map(Value::as_str)
                .map(String::from)
                .collect()
        })
        .unwrap_or_default()
}

/// axe-core's violations on the page, one line each: rule, impact, help, the elements.
async fn run_axe(b: &Browser, axe: &str) -> Vec<String> {
    let loaded = b
        .client
        .execute("return typeof window.axe;", vec![])
        .await
        .expect("asked");
    if loaded != "object" {
        b.client
            .execute(axe, vec![])
            .await
            .expect("axe-core is injected");
    }
    let result = b
        .client
        .execute_async(
            "const done = arguments[arguments.length - 1]; \
             axe.run(document, {resultTypes: ['violations'], rules: {'target-size': {enabled: true}}}) \
               .then(r => done(r.violations.map(v => ({id: v.id, impact: v.impact, help: v.help, \
                 nodes: v.nodes.map(n => n.target.join(' '))})))) \
               .catch(e => done({error: String(e)}));",
            vec![],
        )
        .await
        .expect("axe-core ran");
    if let Some(error) = result.get("error") {
        return vec![format!("did not run: {error}")];
    }
    result
        .as_array()
        .expect("a list of violations")
        .iter()
        .map(|v| {
            let nodes: Vec<&str> = v["nodes"]
                .as_array()
                .map(|n| n.iter().filter_map(Value::as_str).collect())
                .unwrap_or_default();
            format!(
                "{} ({}): {} at {}",
                v["id"].as_str().unwrap_or("?"),
                v["impact"].as_str().unwrap_or("?"),
                v["help"].as_str().unwrap_or("?"),
                nodes.join(" | ")
            )
        })
        .collect()
}

/// A payment of the demo project through the merchant API: its JSON.
async fn create(client: &MerchantClient, body: Value) -> Value {
    let r = client.create_payment(&body).await.expect("a create");
    assert_eq!(r.status.as_u16(), 201, "{}", r.json);
    r.json
}

/// The path of a payment's payer page (`/pay/<token>`).
fn payer_path(c: &Cabinet, payment: &Value) -> String {
    let url = payment["payment_page_url"]
        .as_str()
        .unwrap_or_else(|| panic!("payment_page_url is answered: {payment}"));
    url.strip_prefix(c.url().trim_end_matches('/'))
        .unwrap_or_else(|| panic!("{url} is under {}", c.url()))
        .to_string()
}

/// Walks every page state with demo data, handing each to `v`: the merchant's sign-in, every
/// tab and form state (refusals, shown-once values, confirmations), support's views, an
/// invitation, then the payer page's states.
pub async fn walk(v: &mut Checks) {
    let c = Cabinet::start_with(|s| {
        s.callbacks.allow_local = true;
        s.callbacks.retry_delays =
            payments_core::callback::RetrySchedule::parse_delays("1,1").expect("delays");
    })
    .await;
    let demo = c.demo_merchant().await;
    c.user("anna@shop.example", Role::Merchant(demo)).await;
    c.user("sam@support.example", Role::Support).await;
    let (url, _) = receiver().await;
    let creds = c.server.creds().clone();
    let project = c.server.project();
    let test_creds = creds.for_test_project().expect("test");
    let test_project = test_creds.project_id.clone();
    let live = c.server.client();
    let test = MerchantClient::from_credentials(&test_creds).expect("a client");
    let svc = &c.server.state.service;
    let actor = Actor("operator".into());
    c.server
        .patch_project(ProjectPatch {
            callback_url: Some(Some(url.clone())),
            payer_page: Some(true),
            payer_language: Some(PageLanguage::En),
            ..ProjectPatch::default()
        })
        .await;
    let mut ids = Vec::new();
    for (n, (amount, method)) in [
        ("1500", "sbp"),
        ("3400", "card_transfer"),
        ("12000", "sbp"),
        ("780.50", "card_transfer"),
        ("2500", "sbp"),
    ]
    .into_iter()
    .enumerate()
    {
        let r = create(&live, json!({"merchant_payment_id": format!("order-10{n}"), "amount": amount, "payment_method": method})).await;
        ids.push(r["id"].as_str().expect("id").parse().expect("an id"));
    }
    svc.payments()
        .operate(ids[0], Trigger::Confirm { amount: None }, &actor)
        .await
        .expect("confirmed");
    svc.payments()
        .operate(ids[1], Trigger::Cancel, &actor)
        .await
        .expect("canceled");
    // One callback that fails: a closed port.
    let r = create(&live, json!({"merchant_payment_id": "order-200", "amount": "990", "payment_method": "sbp", "callback_url": "http://127.0.0.1:9/callbacks"})).await;
    let failing = r["id"].as_str().expect("id").parse().expect("an id");
    svc.payments()
        .operate(failing, Trigger::Confirm { amount: None }, &actor)
        .await
        .expect("confirmed");
    let t = create(&test, json!({"merchant_payment_id": "test-order-1", "amount": "2500", "payment_method": "card_transfer", "callback_url": url})).await;
    let test_payment = t["id"].as_str().expect("id").to_string();
    tokio::time::sleep(Duration::from_secs(3)).await;

    let b = Browser::start(c.url()).await;
    // Sign-in, enrolment, the codes, a refusal, recovery.
    b.open("/sign-in").await;
    v.page(&b, "01-sign-in").await;
    b.password_step("anna@shop.example", "not the password")
        .await;
    v.check(&b, "sign-in refused").await;
    b.password_step("anna@shop.example", PASSWORD).await;
    assert_eq!(b.path().await, "/sign-in/enrol", "{}", b.text("main").await);
    v.page(&b, "02-enrol").await;
    b.fill("#code", "000000").await;
    b.click("form[action='/sign-in/enrol'] button").await;
    v.check(&b, "enrol refused").await;
    let key_text = b.text("#totp-key").await;
    let key = payments_cabinet::secrets::totp_key_from_base32(&key_text.replace(' ', ""))
        .expect("base32");
    b.fill("#code", &c.code(&key)).await;
    b.click("form[action='/sign-in/enrol'] button").await;
    v.page(&b, "03-recovery-codes").await;
    b.click_text("I have saved the codes, continue").await;
    b.sign_out().await;
    v.check(&b, "signed out").await;
    b.password_step("anna@shop.example", PASSWORD).await;
    v.page(&b, "04-code").await;
    b.fill("#code", "123 456").await;
    b.click("form[action='/sign-in/code'] button").await;
    v.page(&b, "05-code-refused").await;
    b.click_text("Use a recovery code instead").await;
    v.page(&b, "06-recovery-sign-in").await;
    b.fill("#recovery_code", "not-a-code").await;
    b.click("form[action='/sign-in/recovery'] button").await;
    v.check(&b, "recovery refused").await;
    b.open("/sign-in/code").await;
    code_step(&c, &b, &key).await;
    assert_eq!(b.path().await, "/", "signed in, home");
    v.page(&b, "38-home").await;

    // The team: the members and the invitation form, the link shown once, a member's page.
    b.open("/team").await;
    v.page(&b, "39-team").await;
    b.fill("#email", "sam@shop.example").await;
    b.toggle("#role-finance").await;
    b.click("#invite-submit").await;
    v.check(&b, "invitation link shown once").await;
    b.click_text("Done").await;
    v.page(&b, "40-team-member").await;

    // Projects and External API access: a token shown once, a key, refusals, confirmations.
    b.open("/projects").await;
    v.page(&b, "07-projects").await;
    b.click_text("Demo project").await;
    if !b.all("#token-name").await.is_empty() {
        b.fill("#token-name", "shop backend").await;
    }
    b.click("form[action$='/tokens'] button").await;
    v.page(&b, "09-token-shown-once").await;
    b.click_text("Done").await;
    let pem = public_key_to_pem(&generate_signing_key(&OsRandom).verifying_key());
    b.fill("#public_key", &pem).await;
    b.click("form[action$='/keys'] button").await;
    v.page(&b, "08-external-api-access").await;
    b.fill("#public_key", "not a key").await;
    b.click("form[action$='/keys'] button").await;
    v.check(&b, "key refused").await;
    b.fill(
        "#ip_allow_list",
        "203.0.113.0/24\n198.51.100.7/24\nlocalhost",
    )
    .await;
    b.click("form[action$='/allow-list'] button").await;
    v.page(&b, "10-allow-list-errors").await;
    b.open(&format!("/projects/{project}")).await;
    b.fill("#callback_url", "ftp://example.com/callbacks").await;
    b.click("form[action$='/callback-url'] button").await;
    v.check(&b, "callback URL refused").await;
    b.open(&format!("/projects/{project}")).await;
    let revoke = b
        .el("#tokens tbody a")
        .await
        .attr("href")
        .await
        .expect("attr")
        .expect("a link");
    b.open(&revoke).await;
    v.page(&b, "11-revoke-token-confirm").await;
    b.open(&format!("/projects/{project}/callback-secret"))
        .await;
    v.page(&b, "12-callback-secret-confirm").await;
    b.click("form button.primary").await;
    v.page(&b, "13-callback-secret-shown-once").await;
    b.open(&format!("/projects/{test_project}")).await;
    v.check(&b, "test project's access").await;

    // Payments, the cards, deliveries, the balance.
    b.open(&format!("/projects/{project}/payments")).await;
    v.page(&b, "14-payments").await;
    b.open(&format!("/projects/{project}/payments?status=completed"))
        .await;
    v.check(&b, "payments filtered").await;
    b.open(&format!("/projects/{project}/payments?totals=1"))
        .await;
    v.check(&b, "payments with their totals").await;
    b.open(&format!(
        "/projects/{project}/payments?merchant_payment_id=none"
    ))
    .await;
    v.check(&b, "payments: none found").await;
    b.open(&format!("/payments/{}", ids[0])).await;
    v.page(&b, "15-payment-card").await;
    b.open(&format!("/payments/{}", ids[1])).await;
    v.check(&b, "canceled payment card").await;
    b.open(&format!("/payments/{failing}")).await;
    v.check(&b, "payment card with a failed delivery").await;
    b.open(&format!("/payments/{test_payment}")).await;
    v.page(&b, "16-test-payment-card").await;
    // The outcome "paid", then "Send callback" on the closed test payment.
    b.click("#test-paid").await;
    v.page(&b, "25-test-payment-closed").await;
    b.click("#test-send-callback").await;
    assert_eq!(b.text("#payment-status").await, "completed");
    assert!(
        b.text("body").await.contains("A callback was queued"),
        "the callback was sent"
    );
    // Its delivery to the receiver shows under the card's events.
    tokio::time::sleep(Duration::from_secs(2)).await;
    b.open(&format!("/payments/{test_payment}?done=resent"))
        .await;
    v.page(&b, "26-test-callback-sent").await;
    b.open(&format!("/projects/{project}/deliveries")).await;
    v.page(&b, "17-deliveries").await;
    // An event's own page (the exact request), its resend and a recovery, confirmed first.
    b.click("a.event-link").await;
    v.page(&b, "31-event").await;
    b.click("#event-resend-link").await;
    v.check(&b, "event resend confirm").await;
    let today = &c.clock.now().to_rfc3339()[..10];
    b.open(&format!(
        "/projects/{project}/deliveries/recover?since={today}"
    ))
    .await;
    v.check(&b, "deliveries recovery confirm").await;
    b.open(&format!(
        "/projects/{project}/deliveries/recover?since=soon"
    ))
    .await;
    v.check(&b, "deliveries recovery refused").await;
    b.open(&format!("/payments/{}", ids[0])).await;
    b.click("#merchant-resend-link").await;
    v.check(&b, "merchant's resend confirm").await;
    // Payment search across the merchant's projects.
    b.click("#nav-search").await;
    v.check(&b, "payment search").await;
    b.fill("#q", "order-10").await;
    b.click("#search-submit").await;
    v.page(&b, "30-payment-search").await;
    b.fill("#q", "nothing-like-this").await;
    b.click("#search-submit").await;
    v.check(&b, "payment search: none").await;
    // The payer page's settings, and a return URL refused.
    b.open(&format!("/projects/{project}/payer-page")).await;
    v.page(&b, "32-payer-page-settings").await;
    b.fill("#return_url", "http://shop.example/orders").await;
    b.click("#payer-settings-save").await;
    v.check(&b, "payer page settings refused").await;
    b.open(&format!("/projects/{test_project}/payments")).await;
    v.check(&b, "test project's payments").await;
    // The request log: a create whose signature was changed, with its diagnosis (the
    // signature base the server verified), the health counts, a filter and a refused one.
    let forged = crate::requests::refused_create(&c, "order-forged").await;
    // A create signed with the test project's key: its diagnosis names that project.
    let crossed = MerchantClient::new(
        live.base_url(),
        creds.token.expose(),
        test_creds.private_key_pem.expose(),
    )
    .expect("a client");
    let r = crossed
        .create_payment(&json!({"merchant_payment_id": "order-crossed", "amount": "100", "payment_method": "sbp"}))
        .await
        .expect("answered");
    assert_eq!(r.code(), Some("signature_invalid"), "{}", r.json);
    c.logged(&forged).await;
    c.logged(r.headers["x-request-id"].to_str().expect("ASCII"))
        .await;
    b.open(&format!("/projects/{project}/requests")).await;
    v.page(&b, "29-requests").await;
    b.fill("#status", "4xx").await;
    b.click("form.filters button").await;
    v.check(&b, "requests: 4xx").await;
    b.fill("#status", "9xx").await;
    b.click("form.filters button").await;
    v.check(&b, "requests: a refused filter").await;
    b.open(&format!("/projects/{project}/balance")).await;
    v.check(&b, "balance").await;
    b.click("form.filters button").await;
    v.check(&b, "balance statement").await;

    // Security and audit, refusals included; a page that does not exist.
    b.open("/security").await;
    v.page(&b, "18-security").await;
    b.fill("#current_password", "not the password").await;
    b.fill("#new_password", "a new password, long enough").await;
    b.fill("#pw-code", "123456").await;
    b.click("form[action='/security/password'] button").await;
    v.check(&b, "password change refused").await;
    // New recovery codes, shown once.
    b.open("/security").await;
    c.next_step();
    b.fill("#rc-code", &c.code(&key)).await;
    b.click("form[action='/security/recovery-codes'] button")
        .await;
    assert_eq!(
        b.all("#recovery-codes code").await.len(),
        10,
        "new codes shown"
    );
    v.check(&b, "new recovery codes").await;
    // The authenticator on a new device: the new key shown once, a wrong code refused.
    b.open("/security").await;
    c.next_step();
    b.fill("#au-password", PASSWORD).await;
    b.fill("#au-code", &c.code(&key)).await;
    b.click("form[action='/security/authenticator'] button")
        .await;
    assert!(!b.all("#totp-key").await.is_empty(), "a new key shown");
    v.page(&b, "33-new-authenticator").await;
    b.fill("#new-code", "000000").await;
    b.click("form[action='/security/authenticator/confirm'] button")
        .await;
    v.check(&b, "new authenticator refused").await;
    b.open("/audit").await;
    v.page(&b, "19-audit").await;
    b.open(&format!("/projects/{}", uuid_like())).await;
    v.page(&b, "20-not-found").await;
    // The same pages in Russian (longer words, other labels).
    b.open("/projects").await;
    b.click("#language-switch").await;
    for (label, path) in [
        ("home", "/".to_string()),
        ("projects", "/projects".to_string()),
        ("External API access", format!("/projects/{project}")),
        ("payments", format!("/projects/{project}/payments")),
        ("payment card", format!("/payments/{}", ids[0])),
        ("test payment card", format!("/payments/{test_payment}")),
        ("deliveries", format!("/projects/{project}/deliveries")),
        ("balance", format!("/projects/{project}/balance")),
        ("requests", format!("/projects/{project}/requests")),
        ("payment search", "/payments/search?q=order-10".to_string()),
        (
            "payer page settings",
            format!("/projects/{project}/payer-page"),
        ),
        ("security", "/security".to_string()),
        ("audit", "/audit".to_string()),
    ] {
        b.open(&path).await;
        v.check(&b, &format!("{label}, in Russian")).await;
    }
    b.open("/projects").await;
    b.click("#language-switch").await;
    b.open("/projects").await;
    b.sign_out().await;

    // Support: every merchant's projects, a live card with the operations, a resend.
    first_sign_in(&c, &b, "sam@support.example").await;
    b.click_text("I have saved the codes, continue").await;
    v.page(&b, "21-projects-support").await;
    b.open(&format!("/payments/{}", ids[2])).await;
    v.page(&b, "22-payment-card-support").await;
    b.click("#resend-link").await;
    v.page(&b, "23-resend-confirm").await;
    b.click("form button.primary").await;
    v.check(&b, "resent").await;
    b.open("/audit").await;
    v.check(&b, "audit as support").await;
    b.open(&format!("/projects/{project}/deliveries")).await;
    v.check(&b, "deliveries as support").await;
    b.open(&format!("/projects/{project}/requests")).await;
    v.check(&b, "requests as support").await;
    b.open("/payments/search?q=order-10").await;
    v.check(&b, "payment search as support").await;
    b.open("/projects").await;
    b.sign_out().await;

    // An invitation: the page, a refusal.
    let invite = c
        .cabinet()
        .users()
        .create("new.colleague@shop.example", Role::Merchant(demo), &actor)
        .await
        .expect("a user");
    b.open(&format!("/invite/{}", invite.token.expose())).await;
    v.page(&b, "24-invitation").await;
    b.fill("#password", "a password, long enough").await;
    b.fill("#password_again", "another password, as long").await;
    b.click("form[action^='/invite/'] button[type=submit]")
        .await;
    v.check(&b, "invitation refused").await;

    // The payer page: paying by card and by sbp (English and Russian), paid, canceled, out of
    // time, a wrong link.
    let card = create(&live, json!({"merchant_payment_id": "order-300", "amount": "3400.50", "payment_method": "card_transfer"})).await;
    let sbp = create(
        &live,
        json!({"merchant_payment_id": "order-301", "amount": "1500", "payment_method": "sbp"}),
    )
    .await;
    let done = create(&live, json!({"merchant_payment_id": "order-302", "amount": "990", "payment_method": "card_transfer"})).await;
    let canceled = create(
        &live,
        json!({"merchant_payment_id": "order-303", "amount": "990", "payment_method": "sbp"}),
    )
    .await;
    for (p, trigger) in [
        (&done, Trigger::Confirm { amount: None }),
        (&canceled, Trigger::Cancel),
    ] {
        svc.payments()
            .operate(
                p["id"].as_str().expect("id").parse().expect("an id"),
                trigger,
                &actor,
            )
            .await
            .expect("operated");
    }
    for language in [PageLanguage::En, PageLanguage::Ru] {
        c.server
            .patch_project(ProjectPatch {
                payer_language: Some(language),
                ..ProjectPatch::default()
            })
            .await;
        for (name, p) in [
            ("card", &card),
            ("sbp", &sbp),
            ("paid", &done),
            ("canceled", &canceled),
        ] {
            b.open(&payer_path(&c, p)).await;
            v.check(&b, &format!("payer page: {name}, {}", language.as_str()))
                .await;
        }
    }
    b.open("/pay/not-a-token").await;
    v.check(&b, "payer page: a wrong link").await;
    c.clock.advance(Duration::from_secs(16 * 60));
    svc.payments().sweep(100).await.expect("a sweep");
    b.open(&payer_path(&c, &card)).await;
    v.check(&b, "payer page: out of time").await;
    b.close().await;
    c.server.stop().await;
}

fn uuid_like() -> &'static str {
    "00000000-0000-4000-8000-000000000000"
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs Chromium: chromium and chromedriver, and axe-core from npm"]
async fn every_page_fits_390_and_1280_px_and_axe_finds_no_violation() {
    let mut checks = Checks::new();
    walk(&mut checks).await;
    checks.assert_clean();
}
