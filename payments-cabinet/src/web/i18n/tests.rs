use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

use super::*;

/// The crate's own directory (templates/, src/).
fn crate_dir() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

/// The files of `dir` (and its subdirectories) whose name ends in `ext`.
fn files(dir: &Path, ext: &str) -> Vec<PathBuf> {
    let mut found = Vec::new();
    let mut dirs = vec![dir.to_path_buf()];
    while let Some(d) = dirs.pop() {
        for entry in std::fs::read_dir(&d).expect("a source directory reads") {
            let path = entry.expect("an entry").path();
            if path.is_dir() {
                dirs.push(path);
            } else if path.to_string_lossy().ends_with(ext) {
                found.push(path);
            }
        }
    }
    found.sort();
    found
}

/// The string literal at the start of `s` (after blanks), read as Rust (and askama) read it:
/// escapes, and a backslash at a line's end that skips the next line's indentation. `Err`
/// when there is no literal there.
fn literal(s: &str) -> Result<String, String> {
    let s = s.trim_start();
    let mut chars = s.chars().peekable();
    if chars.next() != Some('"') {
        return Err(s.chars().take(40).collect());
    }
    let mut out = String::new();
    while let Some(c) = chars.next() {
        match c {
            '"' => return Ok(out),
            '\\' => match chars.next() {
                Some('n') => out.push('\n'),
                Some('t') => out.push('\t'),
                Some('\n') => {
                    while chars.peek().is_some_and(|c| c.is_whitespace()) {
                        chars.next();
                    }
                }
                Some(other) => out.push(other),
                None => break,
            },
            c => out.push(c),
        }
    }
    Err("an unterminated string".into())
}

/// Every catalog call in `text` (a template or a Rust file): the keys of `chrome.t(…)`,
/// `chrome.f1(…)`, `chrome.f2(…)`, `tr(…)` and `trf(…)`. A call whose key is not a literal
/// is a problem (nothing could check its text), except a method `.t(` on something else.
fn calls(text: &str) -> (Vec<String>, Vec<String>) {
    let mut keys = Vec::new();
    let mut problems = Vec::new();
    for (name, method) in [
        ("chrome.t(", false),
        ("chrome.f1(", false),
        ("chrome.f2(", false),
        ("tr(", true),
        ("trf(", true),
    ] {
        for (at, _) in text.match_indices(name) {
            let before = text[..at].chars().next_back();
            // `tr(` and `trf(` as functions of their own, not the end of another name, a
            // method, or their definitions.
            if method
                && (before.is_some_and(|c| c.is_alphanumeric() || c == '_' || c == '.')
                    || text[..at].ends_with("fn "))
            {
                continue;
            }
            match literal(&text[at + name.len()..]) {
                Ok(key) => keys.push(key),
                Err(what) => problems.push(format!("{name}{what}")),
            }
        }
    }
    (keys, problems)
}

/// Every key the cabinet uses, with the files that use it; and every call that is not
/// checkable. The payer page itself has its own texts (`web/payer.rs`, `Texts`), this catalog
/// none of them; the payer page's settings in the cabinet are the cabinet's.
fn used() -> (BTreeMap<String, BTreeSet<String>>, Vec<String>) {
    let root = crate_dir();
    let mut sources = files(&root.join("templates"), ".html");
    sources.extend(files(&root.join("src"), ".rs"));
    let mut keys: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
    let mut problems = Vec::new();
    for path in sources {
        let name = path
            .strip_prefix(&root)
            .expect("under the crate")
            .display()
            .to_string();
        // The catalog itself and its machinery.
        if name.contains("i18n")
            || name.ends_with("payer.html")
            || name.ends_with("payer_missing.html")
        {
            continue;
        }
        let text = std::fs::read_to_string(&path).expect("a source reads");
        let (found, bad) = calls(&text);
        for key in found {
            keys.entry(key).or_default().insert(name.clone());
        }
        problems.extend(bad.into_iter().map(|b| format!("{name}: {b}")));
    }
    (keys, problems)
}

/// The `{name}` placeholders of a text.
fn placeholders(text: &str) -> BTreeSet<&str> {
    text.split('{')
        .skip(1)
        .filter_map(|rest| rest.split_once('}').map(|(name, _)| name))
        .collect()
}

#[test]
fn every_text_the_cabinet_shows_has_its_russian_and_the_catalog_has_nothing_unused() {
    let (used, problems) = used();
    assert!(
        problems.is_empty(),
        "catalog calls whose text is not a literal: {problems:#?}"
    );
    assert!(used.len() > 100, "the scan finds the calls: {}", used.len());
    let missing: Vec<String> = used
        .iter()
        .filter(|(key, _)| !RUSSIAN.contains_key(key.as_str()))
        .map(|(key, files)| format!("{key:?} (in {files:?})"))
        .collect();
    assert!(
        missing.is_empty(),
        "texts without Russian in web/i18n/ru.rs: {missing:#?}"
    );
    let unused: Vec<&str> = ru::CATALOG
        .iter()
        .map(|(key, _)| *key)
        .filter(|key| !used.contains_key(*key))
        .collect();
    assert!(
        unused.is_empty(),
        "catalog texts nothing uses (remove them): {unused:#?}"
    );
}

#[test]
fn the_catalog_has_each_text_once_with_the_same_placeholders() {
    let mut seen = BTreeSet::new();
    for (en, ru) in ru::CATALOG {
        assert!(seen.insert(*en), "{en:?} is in the catalog twice");
        assert!(!ru.trim().is_empty(), "{en:?} has an empty Russian text");
        assert_eq!(
            placeholders(en),
            placeholders(ru),
            "{en:?} and {ru:?} name different placeholders"
        );
        assert!(
            ru.chars()
                .any(|c| ('а'..='я').contains(&c.to_lowercase().next().unwrap_or(c))),
            "{en:?}: {ru:?} has no Russian letter"
        );
    }
}

#[test]
fn the_scan_reads_literals_as_rust_does_and_flags_a_key_that_is_not_one() {
    let (keys, problems) = calls(
        "tr(\"a \\\"b\\\"\") x.tr(\"no\") fn tr(key) trf(\"one \\\n        two\", &[]) \
         attr(\"no\") {{ chrome.t(\"Projects\") }} tr(name)",
    );
    assert_eq!(keys, vec!["Projects", "a \"b\"", "one two"]);
    assert_eq!(problems.len(), 1, "{problems:?}");
}

#[test]
fn placeholders_are_filled_by_name_in_either_language() {
    let name: &dyn Display = &"Shop <1>";
    assert_eq!(
        Lang::En.f("{project}: balance", &[("project", name)]),
        "Shop <1>: balance"
    );
    assert_eq!(
        Lang::Ru.f("{project}: balance", &[("project", name)]),
        "Shop <1>: баланс"
    );
    assert_eq!(fill("{a} and {b", &[("a", &1)]), "1 and {b");
    assert_eq!(fill("{x}", &[]), "{x}");
    assert_eq!(Lang::Ru.t("not in the catalog"), "not in the catalog");
    assert_eq!(Lang::En.t("session|Sign out"), "Sign out");
    assert_eq!(Lang::Ru.t("session|Sign out"), "Завершить");
    assert_eq!(Lang::Ru.t("nocontext|Sign out"), "Sign out");
    assert_eq!(Lang::En.t("a|b c|d"), "b c|d");
}

#[test]
fn accept_language_picks_russian_only_when_the_browser_prefers_it() {
    for (header, lang) in [
        ("ru", Lang::Ru),
        ("ru-RU,ru;q=0.9,en-US;q=0.8,en;q=0.7", Lang::Ru),
        ("en-US,en;q=0.9,ru;q=0.8", Lang::En),
        ("en;q=0.5, ru;q=0.8", Lang::Ru),
        ("ru, en", Lang::Ru),
        ("en, ru", Lang::En),
        ("de-DE, ru;q=0.5", Lang::Ru),
        ("de-DE", Lang::En),
        ("ru;q=0", Lang::En),
        ("RU-ru;q=1.0", Lang::Ru),
        ("*", Lang::En),
        ("", Lang::En),
        ("ru;q=abc, en;q=0.9", Lang::Ru),
    ] {
        assert_eq!(negotiate(header), lang, "{header:?}");
    }
}

#[test]
fn the_cookie_wins_over_accept_language() {
    let mut headers = HeaderMap::new();
    headers.insert(header::ACCEPT_LANGUAGE, "ru".parse().unwrap());
    assert_eq!(of_request(&headers), Lang::Ru);
    headers.insert(
        header::COOKIE,
        "cabinet=abc; cabinet-lang=en".parse().unwrap(),
    );
    assert_eq!(of_request(&headers), Lang::En);
    headers.insert(header::COOKIE, "cabinet-lang=xx".parse().unwrap());
    assert_eq!(
        of_request(&headers),
        Lang::Ru,
        "an unknown value is ignored"
    );
    assert_eq!(of_request(&HeaderMap::new()), Lang::En);
}

#[test]
fn the_switch_returns_only_to_a_page_of_this_site() {
    for (back, to) in [
        (
            "/projects/p1/payments?status=paid",
            "/projects/p1/payments?status=paid",
        ),
        ("/", "/"),
        ("https://evil.example/", "/"),
        ("//evil.example/", "/"),
        ("/\\evil.example", "/"),
        ("/a\\b", "/"),
        ("javascript:alert(1)", "/"),
        ("", "/"),
        ("/x\r\nSet-Cookie: a=b", "/"),
        ("projects", "/"),
    ] {
        assert_eq!(safe_back(back), to, "{back:?}");
    }
    assert_eq!(page_of("/sign-in?flash=abc"), "/sign-in");
    assert_eq!(
        page_of("/projects/p/balance?from=2026-10-01&flash=x&to=2026-10-02"),
        "/projects/p/balance?from=2026-10-01&to=2026-10-02"
    );
    assert_eq!(page_of("/audit"), "/audit");
    // A page shown once has no switch (it could not be shown again after it).
    assert_eq!(page_of("/shown/abc"), "");
    assert_eq!(page_of("/shown/abc?flash=x"), "");
}

/// Rendering: each page that renders from values alone, in Russian, has the Russian texts and
/// none of the English words of the layout; in English, the other way round.
mod pages {
    use askama::Template;

    use super::super::{scope, Lang, Scope};
    use crate::web::views::*;

    /// English words of the layout and the pages that a Russian page must not show.
    const ENGLISH: &[&str] = &[
        "Projects",
        "Security",
        "Audit log",
        "Sign out",
        "Sign in",
        "Skip to content",
        "There is a problem",
        "Sandbox",
        "cabinet",
        "Payments",
        "Balance",
        "Callback",
        "API access",
        "Cancel",
        "Done",
        "Continue",
        "Password",
        "password",
        "Code",
        "code",
        "Entries",
        "Statement",
        "Kind",
        "Amount",
        "Details",
        "Time",
        "Error",
        "Project",
        "Mode",
        "State",
        "Pages",
        "test",
        "live",
        "status",
        "support",
        "merchant",
        "Back",
        "Credits",
        "Payout",
        "recovery",
        "Recovery",
        "the",
    ];

    /// What a person reads on a page: its text without tags, and the names and titles
    /// that assistive technology reads (`aria-label`, `title`), with the language switch's
    /// own name left out (it names the other language in that language).
    fn readable(html: &str) -> String {
        let html = html.replace(">English<", "><").replace(">Русский<", "><");
        let mut text = String::new();
        let mut rest = html.as_str();
        while let Some(open) = rest.find('<') {
            text.push_str(&rest[..open]);
            text.push(' ');
            let Some(close) = rest[open..].find('>') else {
                break;
            };
            let tag = &rest[open..open + close];
            for attribute in ["aria-label=\"", "title=\""] {
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

    /// The English words of [`ENGLISH`] that `text` has, as words.
    fn english_in(text: &str) -> Vec<&'static str> {
        ENGLISH
            .iter()
            .copied()
            .filter(|word| {
                text.match_indices(word).any(|(at, _)| {
                    let before = text[..at].chars().next_back();
                    let after = text[at + word.len()..].chars().next();
                    !before.is_some_and(char::is_alphanumeric)
                        && !after.is_some_and(char::is_alphanumeric)
                })
            })
            .collect()
    }

    fn chrome(title: &str, signed_in: bool) -> Chrome {
        let mut chrome = Chrome::new(title.to_string(), "Acme", true, None);
        if signed_in {
            chrome.user = Some(UserChip {
                email: "ann@shop.example".into(),
                role: super::super::tr("owner"),
                support: false,
            });
            chrome.may = Grants {
                integration: true,
                resend: true,
                money: true,
                audit: true,
                team: true,
            };
            chrome.section = "projects";
            chrome.crumbs = vec![Link::new("/projects", "Проекты и API")];
        }
        chrome
    }

    fn project() -> ProjectView {
        ProjectView {
            id: "prj_1".into(),
            merchant_name: "ООО Ромашка".into(),
            test_mode: true,
            state: super::super::tr("active").into(),
            lifetime: "30 min".into(),
            signature_required: false,
            payer_page: None,
            rate_limit: String::new(),
            contract: Vec::new(),
        }
    }

    fn money(text: &str) -> Money {
        Money {
            text: text.into(),
            negative: text.starts_with('-'),
        }
    }

    /// The home page of a day with two payments, one completed.
    fn home_page() -> String {
        use crate::web::home::{cards, chart, HomePage, ProjectHealth, RecentRow};
        use payments_core::payment::{Currency, PaymentStatus};
        use payments_core::totals::{Overview, PaymentTotals, TotalsRow, Volume};
        let now = payments_core::Timestamp::from_unix_millis(1_796_337_000_000);
        let day = payments_core::totals::day_of(now, 0);
        let row = |status, count, micros| TotalsRow {
            day,
            status,
            currency: Currency::RUB,
            count,
            amount: Volume::from_micros(micros),
        };
        let totals = PaymentTotals {
            rows: vec![
                row(PaymentStatus::Completed, 1, 1_990_500_000),
                row(PaymentStatus::Canceled, 1, 10_000_000),
            ],
            offset_ms: 0,
            complete: false,
        };
        let overview = Overview::of(&totals, now);
        HomePage {
            chrome: chrome(super::super::tr("Home"), true),
            cards: cards(&overview),
            chart: chart(&overview),
            recent: vec![RecentRow {
                id: "p1".into(),
                order: "order-1".into(),
                project: "Магазин".into(),
                amount: "1 990,50 ₽".into(),
                status: "completed".into(),
                created: "2026-12-03T22:30:00Z".into(),
                created_text: "2026-12-03 22:30".into(),
            }],
            projects: vec![ProjectHealth {
                id: "prj_1".into(),
                name: "Магазин".into(),
                test_mode: true,
                failed: "2".into(),
                pending: "0".into(),
                failing: true,
            }],
            complete: false,
        }
        .render()
        .unwrap()
    }

    /// Every page that renders from values alone, in the current language, with the Russian
    /// texts each must show.
    fn render_all() -> Vec<(&'static str, String, Vec<&'static str>)> {
        let t = super::super::tr;
        let with_errors =
            chrome(t("Sign in"), false).error("email", t("The two passwords differ."));
        vec![
            (
                "sign_in",
                SignIn {
                    chrome: with_errors,
                    email: "ann@shop.example".into(),
                }
                .render()
                .unwrap(),
                vec![
                    "Войти",
                    "Электронная почта",
                    "Пароль",
                    "Есть ошибки",
                    "Ошибка:",
                ],
            ),
            (
                "code",
                Code {
                    chrome: chrome(t("Two-factor code"), false),
                    email: "ann@shop.example".into(),
                }
                .render()
                .unwrap(),
                vec![
                    "Код подтверждения",
                    "Войти с резервным кодом",
                    "Отменить и выйти",
                ],
            ),
            (
                "recovery",
                Recovery {
                    chrome: chrome(t("Sign in with a recovery code"), false),
                    email: "ann@shop.example".into(),
                }
                .render()
                .unwrap(),
                vec!["Резервный код", "Войти с кодом из приложения"],
            ),
            (
                "invite",
                InvitePage {
                    chrome: chrome(t("Set your password"), false),
                    email: "ann@shop.example".into(),
                    token: "tok".into(),
                }
                .render()
                .unwrap(),
                vec!["Задайте пароль", "Новый пароль ещё раз", "Задать пароль"],
            ),
            (
                "message",
                Message {
                    chrome: chrome(t("Not found"), true),
                    text: t("There is no such page, or it is not yours to see.").into(),
                    link: Some(Link::new("/", t("Back to the cabinet"))),
                }
                .render()
                .unwrap(),
                vec![
                    "Страница не найдена",
                    "Вернуться в кабинет",
                    "Проекты",
                    "Выйти",
                ],
            ),
            (
                "confirm",
                Confirm {
                    chrome: chrome(t("Already shown"), true),
                    paragraphs: vec!["Абзац".into()],
                    action: "/x".into(),
                    button: "Отозвать".into(),
                    danger: true,
                    cancel: "/projects".into(),
                }
                .render()
                .unwrap(),
                vec!["Отмена", "Безопасность", "Журнал аудита"],
            ),
            (
                "shown_once",
                ShownOnce {
                    chrome: chrome(t("Already shown"), true),
                    heading: "Заголовок".into(),
                    label: "Токен".into(),
                    value: "secret".into(),
                    notes: Vec::new(),
                    back: "/projects".into(),
                }
                .render()
                .unwrap(),
                vec!["Скопируйте сейчас", "Готово"],
            ),
            (
                "recovery_codes",
                RecoveryCodes {
                    chrome: chrome(t("Two-factor sign-in is set up"), true),
                    codes: vec!["abcd-efgh".into()],
                    next: "/projects".into(),
                }
                .render()
                .unwrap(),
                vec!["Ваши резервные коды", "Я сохранил коды, продолжить"],
            ),
            (
                "projects",
                Projects {
                    chrome: chrome(t("Projects and API"), true),
                    groups: vec![MerchantGroup {
                        merchant_id: "m1".into(),
                        merchant_name: "ООО Ромашка".into(),
                        paused: true,
                        projects: vec![ProjectRow {
                            id: "prj_1".into(),
                            name: "Магазин".into(),
                            test_mode: true,
                            state: t("active").into(),
                        }],
                    }],
                }
                .render()
                .unwrap(),
                vec![
                    "Проекты и API",
                    "Доступ к API",
                    "Платежи",
                    "Доставка колбэков",
                    "тестовый",
                    "активен",
                    "приостановлен",
                ],
            ),
            (
                "home",
                home_page(),
                vec!["Главная", "Сегодня", "Конверсия", "Заказ"],
            ),
            (
                "balance",
                BalancePage {
                    chrome: chrome("Магазин: баланс", true),
                    tab: "balance",
                    project: project(),
                    balance: money("-1.5000"),
                    entries_total: 3,
                    updated: Some((
                        "2026-10-01T00:00:00Z".into(),
                        "2026-10-01 00:00:00 UTC".into(),
                    )),
                    totals: vec![KindLine {
                        kind: "credit",
                        label: t("Credits"),
                        count: None,
                        sum: money("2.0000"),
                    }],
                    from: "2026-10-01".into(),
                    to: "2026-10-02".into(),
                    csv: Some("/x.csv".into()),
                    excel: crate::web::export::excel_links("entries", "/x.csv?a="),
                    statement: Some(StatementView {
                        from: "2026-10-01".into(),
                        to: "2026-10-02".into(),
                        opening: money("0.0000"),
                        lines: vec![KindLine {
                            kind: "payout",
                            label: t("Payouts"),
                            count: Some(1),
                            sum: money("-3.5000"),
                        }],
                        count: 1,
                        closing: money("-1.5000"),
                    }),
                    entries: vec![EntryRow {
                        seq: 1,
                        at: "2026-10-01T00:00:00Z".into(),
                        at_text: "2026-10-01 00:00:00 UTC".into(),
                        kind: "payout",
                        label: t("Payout"),
                        amount: money("-3.5000"),
                        balance_after: money("-1.5000"),
                        payment: Some("pay_1".into()),
                        order: Some("order-1".into()),
                        payment_version: 2,
                        destination: Some("TXyz".into()),
                        reference: Some("0xabc".into()),
                        reason: Some("причина".into()),
                    }],
                    next: Some("/next".into()),
                }
                .render()
                .unwrap(),
                vec![
                    "Текущий баланс",
                    "Записей: 3. Последняя:",
                    "Выписка с 2026-10-01 по 2026-10-02",
                    "Входящий остаток",
                    "Исходящий остаток",
                    "Выплаты",
                    "Выплата",
                    "версия 2",
                    "Более ранние записи",
                    "Баланс",
                    "Скачать для Excel (русский)",
                ],
            ),
        ]
    }

    #[tokio::test]
    async fn russian_pages_show_russian_and_no_english_chrome() {
        let here = "/projects?x=1".to_string();
        let pages = scope(Scope::new(Lang::Ru, here.clone()), async { render_all() }).await;
        for (name, html, russian) in pages {
            assert!(html.contains("<html lang=\"ru\">"), "{name}: {html}");
            assert!(
                html.contains("value=\"en\" lang=\"en\" id=\"language-switch\">English</button>"),
                "{name}: the switch offers English"
            );
            assert!(
                html.contains("name=\"back\" value=\"/projects?x=1\""),
                "{name}"
            );
            for text in russian {
                assert!(html.contains(text), "{name} lacks {text:?}: {html}");
            }
            let english = english_in(&readable(&html));
            assert!(
                english.is_empty(),
                "{name} shows English {english:?}: {}",
                readable(&html)
            );
        }
    }

    #[tokio::test]
    async fn english_pages_stay_english_with_a_switch_to_russian() {
        let pages = scope(Scope::new(Lang::En, "/".into()), async { render_all() }).await;
        for (name, html, _) in pages {
            assert!(html.contains("<html lang=\"en\">"), "{name}");
            assert!(
                html.contains("lang=\"ru\" id=\"language-switch\">Русский</button>"),
                "{name}: the switch offers Russian"
            );
            assert!(html.contains("Skip to content"), "{name}");
        }
    }
}
