//! The cabinet's two languages, English and Russian, and its catalog of texts.
//!
//! The catalog is gettext-style: the English text is the key and the Russian text stands
//! beside it ([`ru::CATALOG`]); English needs no table. A value inside a message (a name, an
//! amount, an id) is a named placeholder (`{project}`) formatted into the translated text
//! ([`trf`]), never a word glued to a translated fragment. Templates call the catalog through
//! their page's [`Chrome`](super::views::Chrome) (`{{ chrome.t("Projects") }}`), Rust code
//! through [`tr`] and [`trf`]; a test reads every template and every cabinet source file and
//! fails when a text used there has no Russian, or when the catalog has a text nothing uses.
//!
//! Why a small catalog here rather than a crate: the crates that fit a Rust web page
//! (`rust-i18n`, `fluent-templates`) key their messages by identifiers in locale files, load
//! them through a proc macro or a process-wide loader, and integrate with other template
//! engines; the cabinet needs a lookup by English text that askama can call, named
//! placeholders and a list of keys for the completeness test, which a sorted table and
//! two functions give without a second source of English text.
//!
//! Which language a request is answered in is decided once, by [`guard`](super::guard): the
//! `cabinet-lang` cookie (set by the switch, `POST /language`), else the browser's
//! `Accept-Language` (Russian when it prefers `ru` over `en`), else English. The guard runs
//! the request's handler inside [`scope`], so everything that request renders, error pages
//! included, reads the same language through [`current`].

mod ru;

use std::collections::HashMap;
use std::fmt::Display;
use std::sync::LazyLock;

use axum::http::header::{self, HeaderMap};

/// A language of the cabinet.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Lang {
    /// English, the default.
    #[default]
    En,
    /// Russian.
    Ru,
}

impl Lang {
    /// The BCP 47 tag (`<html lang>`, the cookie's value).
    pub fn code(self) -> &'static str {
        match self {
            Lang::En => "en",
            Lang::Ru => "ru",
        }
    }

    /// The language's own name, as its switch shows it.
    pub fn name(self) -> &'static str {
        match self {
            Lang::En => "English",
            Lang::Ru => "Русский",
        }
    }

    /// The language a tag names (`en`, `ru`), if the cabinet has it.
    pub fn from_code(code: &str) -> Option<Lang> {
        match code {
            "en" => Some(Lang::En),
            "ru" => Some(Lang::Ru),
            _ => None,
        }
    }

    /// The other language (the one the switch offers).
    pub fn other(self) -> Lang {
        match self {
            Lang::En => Lang::Ru,
            Lang::Ru => Lang::En,
        }
    }

    /// `key` (an English text of the catalog) in this language; a text the catalog lacks
    /// stays English (the completeness test keeps that from happening). A key may start with
    /// a context, `session|Sign out`, where the same English says different things in
    /// Russian: English shows the text after the bar.
    pub fn t(self, key: &str) -> &str {
        let english = match key.split_once('|') {
            Some((context, text)) if context.chars().all(|c| c.is_ascii_lowercase()) => text,
            _ => key,
        };
        match self {
            Lang::En => english,
            Lang::Ru => RUSSIAN.get(key).copied().unwrap_or(english),
        }
    }

    /// `key` in this language with its `{name}` placeholders replaced by `args`.
    pub fn f(self, key: &str, args: &[(&str, &dyn Display)]) -> String {
        fill(self.t(key), args)
    }
}

/// The Russian catalog by English text.
static RUSSIAN: LazyLock<HashMap<&'static str, &'static str>> =
    LazyLock::new(|| ru::CATALOG.iter().copied().collect());

/// `text` with each `{name}` replaced by the value of `name` in `args` (a placeholder without
/// a value stays as it is).
fn fill(text: &str, args: &[(&str, &dyn Display)]) -> String {
    let mut out = String::with_capacity(text.len() + 16);
    let mut rest = text;
    while let Some(open) = rest.find('{') {
        out.push_str(&rest[..open]);
        let after = &rest[open + 1..];
        match after.find('}') {
            Some(close) => {
                let name = &after[..close];
                match args.iter().find(|(n, _)| *n == name) {
                    Some((_, value)) => out.push_str(&value.to_string()),
                    None => {
                        out.push('{');
                        out.push_str(name);
                        out.push('}');
                    }
                }
                rest = &after[close + 1..];
            }
            None => {
                out.push_str(&rest[open..]);
                rest = "";
            }
        }
    }
    out.push_str(rest);
    out
}

/// The name of the cookie that keeps the chosen language.
pub const LANG_COOKIE: &str = "cabinet-lang";

/// What the current request's pages need to know: its language, the page a language switch
/// returns to, and the signed-in user's time zone (set once the session is read).
#[derive(Debug, Clone)]
pub(crate) struct Scope {
    pub(crate) lang: Lang,
    /// The page's own path and query (without a one-time `flash`), for `GET` and `HEAD`;
    /// `/` for a state change (its path answers no `GET`).
    pub(crate) here: String,
    /// The time zone times are shown and dates read in: UTC until a signed-in user's is set
    /// ([`set_zone`]).
    pub(crate) zone: std::cell::RefCell<jiff::tz::TimeZone>,
}

impl Scope {
    /// A request's scope in `lang` for the page `here`, in UTC.
    pub(crate) fn new(lang: Lang, here: String) -> Scope {
        Scope {
            lang,
            here,
            zone: std::cell::RefCell::new(jiff::tz::TimeZone::UTC),
        }
    }
}

/// The time zone `name` names in the bundled time zone database (IANA names, `UTC`).
pub(crate) fn zone_named(name: &str) -> Option<jiff::tz::TimeZone> {
    jiff::tz::db().get(name).ok()
}

/// Every time zone name the cabinet offers, sorted.
pub(crate) fn zone_names() -> Vec<String> {
    let mut names: Vec<String> = jiff::tz::db()
        .available()
        .map(|n| n.as_str().to_string())
        .filter(|n| n.contains('/') || n == "UTC")
        .collect();
    names.sort();
    names
}

/// Makes `name` (a user's stored zone; UTC for none or an unknown one) the current request's
/// time zone.
pub(crate) fn set_zone(name: Option<&str>) {
    let zone = name.and_then(zone_named).unwrap_or(jiff::tz::TimeZone::UTC);
    let _ = SCOPE.try_with(|s| *s.zone.borrow_mut() = zone);
}

/// The current request's time zone's name (`UTC`, `Europe/Moscow`).
pub(crate) fn zone_name() -> String {
    zone().iana_name().unwrap_or("UTC").to_string()
}

/// The current request's time zone's offset from UTC at `at`, in milliseconds (what the core's
/// day arithmetic takes, [`payments_core::totals::day_of`]).
pub(crate) fn zone_offset_ms(at: payments_core::Timestamp) -> i64 {
    jiff::Timestamp::from_millisecond(at.unix_millis())
        .map_or(0, |t| i64::from(zone().to_offset(t).seconds()) * 1000)
}

/// The current request's time zone (UTC outside a request).
pub(crate) fn zone() -> jiff::tz::TimeZone {
    SCOPE
        .try_with(|s| s.zone.borrow().clone())
        .unwrap_or(jiff::tz::TimeZone::UTC)
}

tokio::task_local! {
    static SCOPE: Scope;
}

/// Runs `f` (a request's handler) with `scope` as the request's language and page.
pub(crate) async fn scope<F: std::future::Future>(scope: Scope, f: F) -> F::Output {
    SCOPE.scope(scope, f).await
}

/// The current request's language (English outside a request).
pub(crate) fn current() -> Lang {
    SCOPE.try_with(|s| s.lang).unwrap_or_default()
}

/// The current request's page, for the language switch (`/` outside a request).
pub(crate) fn here() -> String {
    SCOPE
        .try_with(|s| s.here.clone())
        .unwrap_or_else(|_| "/".to_string())
}

/// `key` in the current request's language.
pub(crate) fn tr(key: &'static str) -> &'static str {
    current().t(key)
}

/// `key` in the current request's language with its placeholders filled.
pub(crate) fn trf(key: &'static str, args: &[(&str, &dyn Display)]) -> String {
    current().f(key, args)
}

/// The language of a request: the cookie's, else the one `Accept-Language` prefers.
pub(crate) fn of_request(headers: &HeaderMap) -> Lang {
    cookie(headers).unwrap_or_else(|| {
        headers
            .get_all(header::ACCEPT_LANGUAGE)
            .iter()
            .filter_map(|v| v.to_str().ok())
            .map(negotiate)
            .next()
            .unwrap_or_default()
    })
}

/// The language the `cabinet-lang` cookie names, if it names one.
fn cookie(headers: &HeaderMap) -> Option<Lang> {
    headers
        .get_all(header::COOKIE)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .flat_map(|v| v.split(';'))
        .filter_map(|pair| pair.trim().split_once('='))
        .find(|(n, _)| *n == LANG_COOKIE)
        .and_then(|(_, v)| Lang::from_code(v.trim()))
}

/// The language an `Accept-Language` value prefers: Russian when `ru` (or `ru-RU` ...) has a
/// higher weight than `en`, or the same weight and comes first; English otherwise.
pub(crate) fn negotiate(accept: &str) -> Lang {
    // The best weight of each language and where it first appeared.
    let mut best: [(f32, usize); 2] = [(0.0, usize::MAX); 2];
    for (position, item) in accept.split(',').enumerate() {
        let mut parts = item.split(';');
        let tag = parts.next().unwrap_or_default().trim().to_ascii_lowercase();
        let primary = tag.split('-').next().unwrap_or_default();
        let index = match primary {
            "en" => 0,
            "ru" => 1,
            _ => continue,
        };
        let weight = parts
            .filter_map(|p| p.trim().strip_prefix("q="))
            .filter_map(|q| q.trim().parse::<f32>().ok())
            .find(|q| (0.0..=1.0).contains(q))
            .unwrap_or(1.0);
        let (w, first) = &mut best[index];
        if weight > *w {
            *w = weight;
        }
        if *first == usize::MAX {
            *first = position;
        }
    }
    let [(en, en_at), (ru, ru_at)] = best;
    if ru > 0.0 && (ru > en || (ru == en && ru_at < en_at)) {
        Lang::Ru
    } else {
        Lang::En
    }
}

/// The page a switch may return to: a path on this site (`/…`, not `//…` nor `/\…`), without
/// control characters; anything else is `/`.
pub(crate) fn safe_back(back: &str) -> &str {
    let same_site = back.starts_with('/')
        && !back.starts_with("//")
        && !back.starts_with("/\\")
        && !back.contains('\\')
        && !back.chars().any(char::is_control)
        && back.len() <= 2048;
    if same_site {
        back
    } else {
        "/"
    }
}

/// The page a switch on the current page returns to: `path_and_query` without its one-time
/// `flash` parameter (shown once, gone after). Empty for a page shown once (`/shown/…`: a new
/// token, a rotated secret, recovery codes, a new authenticator key): switching there would
/// load the page again and find it gone, so that page has no switch.
pub(crate) fn page_of(path_and_query: &str) -> String {
    let (path, query) = match path_and_query.split_once('?') {
        Some((p, q)) => (p, q),
        None => (path_and_query, ""),
    };
    if path.starts_with("/shown/") {
        return String::new();
    }
    let kept: Vec<&str> = query
        .split('&')
        .filter(|p| !p.is_empty() && !p.starts_with("flash="))
        .collect();
    if kept.is_empty() {
        path.to_string()
    } else {
        format!("{path}?{}", kept.join("&"))
    }
}

#[cfg(test)]
mod tests;
