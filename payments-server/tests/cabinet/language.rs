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
