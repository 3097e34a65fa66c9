//! The cabinet's language in Chromium: the switch on the sign-in page turns the cabinet
//! Russian before sign-in, the choice is kept (an `HttpOnly` cookie: no script reads it)
//! through sign-in and enrolment, the projects page's navigation is Russian and
//! `<html lang>` says `ru`; the switch returns to the page it was on, query included, and
//! turns the cabinet English again.

use payments_cabinet::store::Role;

use crate::browser::Browser;
use crate::first_sign_in;
use crate::support::Cabinet;

/// The page's `<html lang>`.
async fn lang(b: &Browser) -> String {
    b.client
        .execute("return document.documentElement.lang;", vec![])
        .await
        .expect("a script runs")
        .as_str()
        .unwrap_or_default()
        .to_string()
}

/// The main navigation's link texts.
async fn navigation(b: &Browser) -> Vec<String> {
    let mut texts = Vec::new();
    for link in b.all("header nav a").await {
        texts.push(link.text().await.expect("text"));
    }
    texts
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs Chromium: chromium and chromedriver"]
async fn the_switch_turns_the_cabinet_russian_before_sign_in_and_back() {
    let c = Cabinet::start().await;
    let demo = c.demo_merchant().await;
    c.user("lang@shop.example", Role::Merchant(demo)).await;
    let project = c.server.project();
    let b = Browser::start(c.url()).await;

    // Headless Chromium asks for English: the cabinet is English, and offers Russian.
    b.open("/sign-in").await;
    assert_eq!(lang(&b).await, "en");
    assert_eq!(b.heading().await, "Sign in");
    assert_eq!(b.text("#language-switch").await, "Русский");

    // The switch, before sign-in: the same page, in Russian.
    b.click("#language-switch").await;
    assert_eq!(b.path().await, "/sign-in");
    assert_eq!(lang(&b).await, "ru");
    assert_eq!(b.heading().await, "Войти");
    assert_eq!(b.text("label[for=email]").await, "Электронная почта");
    assert_eq!(b.text("#language-switch").await, "English");
    let cookies = b
        .client
        .execute("return document.cookie;", vec![])
        .await
        .expect("a script runs");
    assert!(
        !cookies
            .as_str()
            .unwrap_or_default()
            .contains("cabinet-lang"),
        "the language cookie is HttpOnly: {cookies}"
    );

    // Sign-in and enrolment keep it; the home page and the projects page's navigation are
    // Russian.
    first_sign_in(&c, &b, "lang@shop.example").await;
    assert_eq!(lang(&b).await, "ru", "the recovery codes page");
    assert_eq!(b.heading().await, "Двухфакторный вход настроен");
    b.click("a.button.primary").await;
    assert_eq!(b.path().await, "/");
    assert_eq!(lang(&b).await, "ru");
    assert_eq!(b.heading().await, "Главная");
    b.open("/projects").await;
    assert_eq!(b.heading().await, "Проекты и API");
    let russian = navigation(&b).await;
    for section in ["Проекты", "Безопасность", "Журнал аудита"] {
        assert!(
            russian.iter().any(|t| t == section),
            "{section}: {russian:?}"
        );
    }
    assert!(
        russian
            .iter()
            .all(|t| !t.chars().any(|c| c.is_ascii_alphabetic())),
        "every section is named in Russian: {russian:?}"
    );
    assert_eq!(b.text("form[action='/sign-out'] button").await, "Выйти");

    // From a page with a query, the switch returns to it, query and all, in English.
    let balance = format!("/projects/{project}/balance?from=2026-01-01&to=2026-01-31");
    b.open(&balance).await;
    assert_eq!(lang(&b).await, "ru");
    b.click("#language-switch").await;
    assert_eq!(b.path().await, balance);
    assert_eq!(lang(&b).await, "en");
    let english = navigation(&b).await;
    for section in ["Projects", "Security", "Audit log"] {
        assert!(
            english.iter().any(|t| t == section),
            "{section}: {english:?}"
        );
    }
    assert_eq!(b.text("#language-switch").await, "Русский");
    b.open("/projects").await;
    assert_eq!(b.heading().await, "Projects and API");

    b.close().await;
    c.server.stop().await;
}
