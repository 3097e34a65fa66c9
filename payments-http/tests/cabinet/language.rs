//! The cabinet's language over real HTTP: `Accept-Language` picks it without a cookie, the
//! switch (`POST /language`) sets a strict `HttpOnly` cookie and returns only to a page of
//! the cabinet, a cross-site switch changes nothing, and the cookie wins over the browser's
//! preference on every page, error pages included.

use crate::support::Cabinet;
use crate::visitor::{Site, Visitor};

/// `GET path` with these request headers; status and page.
async fn get(c: &Cabinet, path: &str, headers: &[(&str, &str)]) -> (u16, String) {
    let mut req = reqwest::Client::new().get(format!("{}{path}", c.url()));
    for (name, value) in headers {
        req = req.header(*name, *value);
    }
    let resp = req.send().await.expect("the cabinet answers");
    let status = resp.status().as_u16();
    (status, resp.text().await.expect("a page"))
}

#[tokio::test]
async fn accept_language_then_the_switch_cookie_decide_the_language() {
    let c = Cabinet::start().await;

    // Without a cookie: the browser's preference.
    for (accept, lang, heading) in [
        (
            "ru-RU,ru;q=0.9,en-US;q=0.8,en;q=0.7",
            "ru",
            "<h1>Войти</h1>",
        ),
        ("en-US,en;q=0.9,ru;q=0.8", "en", "<h1>Sign in</h1>"),
        ("de-DE", "en", "<h1>Sign in</h1>"),
    ] {
        let (status, page) = get(&c, "/sign-in", &[("accept-language", accept)]).await;
        assert_eq!(status, 200);
        assert!(
            page.contains(&format!("<html lang=\"{lang}\">")),
            "{accept}: {page}"
        );
        assert!(page.contains(heading), "{accept}: {page}");
    }

    // The switch from another site changes nothing.
    let mut v = Visitor::new(c.url());
    for site in [Site::Cross, Site::ForeignOrigin, Site::Bare] {
        let refused = v
            .post_as(site, "/language", &[("lang", "ru"), ("back", "/sign-in")])
            .await;
        assert_eq!(refused.status, 403, "{site:?}");
        assert!(refused.set_cookies.is_empty(), "{site:?}");
    }

    // From the cabinet's own page: a strict, HttpOnly cookie and back to that page.
    let switched = v
        .post(
            "/language",
            &[("lang", "ru"), ("back", "/sign-in?done=signed_out")],
        )
        .await;
    assert_eq!(switched.status, 303);
    assert_eq!(
        switched.location.as_deref(),
        Some("/sign-in?done=signed_out")
    );
    assert_eq!(switched.set_cookies.len(), 1, "{:?}", switched.set_cookies);
    let cookie = &switched.set_cookies[0];
    for part in [
        "cabinet-lang=ru;",
        "Path=/;",
        "HttpOnly",
        "SameSite=Strict",
        "Max-Age=",
    ] {
        assert!(cookie.contains(part), "{part} in {cookie}");
    }

    // The cookie wins over an English browser, on pages and on error pages.
    let russian = [
        ("cookie", "cabinet-lang=ru"),
        ("accept-language", "en-US,en;q=0.9"),
    ];
    let (_, page) = get(&c, "/sign-in?done=signed_out", &russian).await;
    assert!(page.contains("<html lang=\"ru\">"), "{page}");
    assert!(page.contains("Вы вышли из кабинета."), "{page}");
    let (status, page) = get(&c, "/no-such-page", &russian).await;
    assert_eq!(status, 404);
    assert!(page.contains("Страница не найдена"), "{page}");
    assert!(!page.contains("Not found"), "{page}");
    let (_, page) = get(
        &c,
        "/sign-in",
        &[("cookie", "cabinet-lang=en"), ("accept-language", "ru")],
    )
    .await;
    assert!(page.contains("<html lang=\"en\">"), "{page}");

    // Only a page of the cabinet is a place to return to; an unknown language sets nothing.
    for back in [
        "//evil.example/",
        "https://evil.example/",
        "/\\evil.example",
        "javascript:alert(1)",
        "",
    ] {
        let switched = v.post("/language", &[("lang", "en"), ("back", back)]).await;
        assert_eq!(switched.status, 303, "{back}");
        assert_eq!(switched.location.as_deref(), Some("/"), "{back}");
    }
    let unknown = v
        .post("/language", &[("lang", "de"), ("back", "/sign-in")])
        .await;
    assert_eq!(unknown.status, 303);
    assert_eq!(unknown.location.as_deref(), Some("/sign-in"));
    assert!(unknown.set_cookies.is_empty());

    c.server.stop().await;
}

/// English words of the cabinet's layout and pages that a Russian page must not show.
const ENGLISH: &[&str] = &[
    "Projects",
    "Security",
    "Audit log",
    "Sign out",
    "Skip to content",
    "There is a problem",
    "cabinet",
    "Payments",
    "Balance",
    "Callback",
    "callback",
    "Status",
    "Created",
    "Amount",
    "Filter",
    "Search",
    "Settings",
    "Tokens",
    "Signing keys",
    "Revoke",
    "Resend",
    "Save",
    "Cancel",
    "Confirm",
    "Older",
    "Download",
    "Action",
    "Result",
    "Password",
    "password",
    "Recovery",
    "recovery",
    "session",
    "never",
    "active",
    "issued",
    "revoked",
    "Requests",
    "requests",
    "payments",
    "Payer page",
    "the",
    "and",
];

/// What a person reads on a page: its text and the labels assistive technology reads
/// (`aria-label`, `title`, `data-label`), without `<code>` and `<pre>` (API names and
/// values, shown as they are) and without the language switch's own name.
fn readable(html: &str) -> String {
    // The product's name (the sandbox's "Payments") is a name: in the title, the brand and the
    // footer it stays as it is.
    let mut html = html
        .replace(">English</button>", "></button>")
        .replace("· Payments</title>", "</title>")
        .replace(">Payments</a>", "></a>")
        .replace("Личный кабинет Payments", "");
    for (open, close) in [("<code", "</code>"), ("<pre", "</pre>"), ("<svg", "</svg>")] {
        while let Some(start) = html.find(open) {
            let Some(end) = html[start..].find(close) else {
                break;
            };
            html.replace_range(start..start + end + close.len(), " ");
        }
    }
    let mut text = String::new();
    let mut rest = html.as_str();
    while let Some(open) = rest.find('<') {
        text.push_str(&rest[..open]);
        text.push(' ');
        let Some(close) = rest[open..].find('>') else {
            break;
        };
        let tag = &rest[open..open + close];
        for attribute in ["aria-label=\"", "title=\"", "data-label=\""] {
            if let Some(at) = tag.find(attribute) {
                let value = &tag[at + attribute.len()..];
                text.push_str(value.split('"').next().unwrap_or_default());
                text.push(' ');
            }
        }
        rest = &rest[open + close + 1..];
    }
    text.push_str(rest);
    text
}

/// The words of [`ENGLISH`] that `text` has, as whole words (not part of an API name such
/// as `callback_url` or `payments:create`).
fn english_in(text: &str) -> Vec<&'static str> {
    let part = |c: char| c.is_alphanumeric() || c == '_' || c == '/' || c == '-';
    ENGLISH
        .iter()
        .copied()
        .filter(|word| {
            text.match_indices(word).any(|(at, _)| {
                let before = text[..at].chars().next_back();
                let rest = &text[at + word.len()..];
                let mut after = rest.chars();
                let next = after.next();
                let scope =
                    next == Some(':') && after.next().is_some_and(|c| c.is_ascii_lowercase());
                !before.is_some_and(part) && !next.is_some_and(part) && !scope
            })
        })
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_page_in_russian_shows_no_english_words_of_the_cabinet() {
    let c = super::test_mode_with_user(
        "ru@shop.example",
        Some("https://shop.example.com/callbacks"),
    )
    .await;
    let project = c.server.project();
    let created = c
        .server
        .client()
        .create_payment(
            &serde_json::json!({"merchant_payment_id": "ru-1", "amount": "1500", "payment_method": "sbp"}),
        )
        .await
        .expect("a create");
    let id = created.json["id"].as_str().expect("id").to_string();

    let (mut v, _) = crate::enrolled(&c, "ru@shop.example").await;
    let session = v.cookie.clone().expect("a session");
    v.cookie = Some(format!("{session}; cabinet-lang=ru"));
    // A closed test payment with a callback sent by hand: its card, its event, the deliveries.
    assert_eq!(
        v.post(&format!("/payments/{id}/test/paid"), &[])
            .await
            .status,
        303
    );
    assert_eq!(
        v.post(&format!("/payments/{id}/resend"), &[]).await.status,
        303
    );
    let events = c
        .server
        .state
        .service
        .store()
        .events_for_payment(id.parse().expect("an id"))
        .await
        .expect("events");
    let event = events[0].outbox.event.event_id.to_string();
    // Another member of the team (the sandbox's demo user) for the team's pages.
    let users = payments_cabinet::store::CabinetStoreExt::users(&**c.cabinet().store()).await;
    let colleague = users
        .expect("users")
        .into_iter()
        .find(|u| u.email != "ru@shop.example")
        .expect("the demo user")
        .id;

    for path in [
        "/".to_string(),
        "/projects".to_string(),
        format!("/projects/{project}"),
        format!("/projects/{project}/payments"),
        format!("/projects/{project}/payments?totals=1"),
        format!("/projects/{project}/balance"),
        format!("/projects/{project}/deliveries"),
        format!("/projects/{project}/requests"),
        format!("/projects/{project}/payer-page"),
        format!("/projects/{project}/callback-secret"),
        format!("/projects/{project}/events/{event}"),
        format!("/projects/{project}/events/{event}/resend"),
        format!("/payments/{id}"),
        format!("/payments/{id}/resend"),
        "/payments/search".to_string(),
        "/payments/search?q=ru-".to_string(),
        "/security".to_string(),
        "/audit".to_string(),
        "/team".to_string(),
        format!("/team/{colleague}"),
        format!("/team/{colleague}/remove"),
        "/no-such-page".to_string(),
    ] {
        let page = v.get(&path).await;
        assert!(
            page.status == 200 || path == "/no-such-page",
            "{path}: {}",
            page.status
        );
        assert!(page.body.contains("<html lang=\"ru\">"), "{path}");
        let text = readable(&page.body);
        let english = english_in(&text);
        assert!(english.is_empty(), "{path} shows {english:?}: {text}");
    }
    c.server.stop().await;
}
