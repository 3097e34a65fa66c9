//! The pages' templates (under `templates/`, checked at compile time) and the plain values they
//! show. Every value is text prepared here; the templates only lay it out (and escape it).

use askama::Template;
use payments_core::payment::{Currency, Payment};
use payments_core::totals::Volume;
use payments_core::Timestamp;

use super::i18n::{self, tr, Lang};
use crate::accounts::{Current, Permission};
use crate::store::TeamRole;

/// A link.
#[derive(Debug, Clone)]
pub(crate) struct Link {
    pub(crate) href: String,
    pub(crate) label: String,
}

impl Link {
    pub(crate) fn new(href: impl Into<String>, label: impl Into<String>) -> Link {
        Link {
            href: href.into(),
            label: label.into(),
        }
    }
}

/// An error of a form field: listed in the summary at the top (linking to the field) and
/// shown beside the field.
#[derive(Debug, Clone)]
pub(crate) struct FieldError {
    pub(crate) field: String,
    pub(crate) message: String,
}

/// The signed-in user in the header.
#[derive(Debug, Clone)]
pub(crate) struct UserChip {
    pub(crate) email: String,
    pub(crate) role: &'static str,
    /// A support user (the navigation has the appeals queue).
    pub(crate) support: bool,
}

/// What every page shows around its content: the base layout's values (a layout the payer
/// page can share: title, product, environment badge, notices and errors).
#[derive(Debug, Clone)]
pub(crate) struct Chrome {
    /// The page's language (`<html lang>`, every text through [`Chrome::t`]).
    pub(crate) lang: Lang,
    /// The page the language switch returns to (this one).
    pub(crate) here: String,
    pub(crate) title: String,
    pub(crate) product: String,
    pub(crate) sandbox: bool,
    pub(crate) user: Option<UserChip>,
    /// The time zone the page shows times and reads dates in ([`i18n::zone_name`]).
    pub(crate) zone: String,
    /// What the signed-in user's role allows: the links and forms a page offers.
    pub(crate) may: Grants,
    pub(crate) section: &'static str,
    pub(crate) crumbs: Vec<Link>,
    pub(crate) notice: Option<String>,
    pub(crate) errors: Vec<FieldError>,
}

/// The [`Permission`]s of the signed-in user, for the pages' links and forms (each page and
/// form checks its own on the server too); none without a signed-in user.
#[derive(Debug, Clone, Copy, Default)]
pub(crate) struct Grants {
    pub(crate) integration: bool,
    pub(crate) resend: bool,
    pub(crate) money: bool,
    pub(crate) audit: bool,
    pub(crate) team: bool,
}

impl Grants {
    fn of(current: &Current) -> Grants {
        Grants {
            integration: current.may(Permission::Integration),
            resend: current.may(Permission::Resend),
            money: current.may(Permission::Money),
            audit: current.may(Permission::Audit),
            team: current.may(Permission::Team),
        }
    }
}

/// A team role's name in the page's language.
pub(crate) fn role_text(role: TeamRole) -> &'static str {
    match role {
        TeamRole::Owner => tr("owner"),
        TeamRole::Admin => tr("admin"),
        TeamRole::Developer => tr("developer"),
        TeamRole::Finance => tr("finance"),
        TeamRole::SupportAgent => tr("support agent"),
        TeamRole::Viewer => tr("viewer"),
    }
}

impl Chrome {
    pub(crate) fn new(
        title: String,
        product: &str,
        sandbox: bool,
        current: Option<&Current>,
    ) -> Chrome {
        let user = current
            .filter(|c| c.session.stage == crate::store::SessionStage::Full)
            .map(|c| UserChip {
                email: c.user.email.clone(),
                role: if c.is_support() {
                    tr("support")
                } else {
                    role_text(c.user.team_role)
                },
                support: c.is_support(),
            });
        let may = current
            .filter(|c| c.session.stage == crate::store::SessionStage::Full)
            .map_or_else(Grants::default, Grants::of);
        Chrome {
            lang: i18n::current(),
            here: i18n::here(),
            title,
            product: product.to_string(),
            sandbox,
            user,
            zone: i18n::zone_name(),
            may,
            section: "",
            crumbs: Vec::new(),
            notice: None,
            errors: Vec::new(),
        }
    }

    /// `key` (an English text of the catalog) in the page's language.
    pub(crate) fn t<'a>(&self, key: &'a str) -> &'a str {
        self.lang.t(key)
    }

    /// `key` in the page's language with its placeholder `{name}` filled by `value`.
    pub(crate) fn f1<V: std::fmt::Display + ?Sized>(
        &self,
        key: &str,
        name: &str,
        value: &V,
    ) -> String {
        self.lang.f(key, &[(name, &value)])
    }

    /// `key` in the page's language with two placeholders filled.
    pub(crate) fn f2<V: std::fmt::Display + ?Sized, W: std::fmt::Display + ?Sized>(
        &self,
        key: &str,
        name: &str,
        value: &V,
        name2: &str,
        value2: &W,
    ) -> String {
        self.lang.f(key, &[(name, &value), (name2, &value2)])
    }

    /// A payment status's name on the page ([`status_text`]).
    pub(crate) fn status<'a>(&self, code: &'a str) -> &'a str {
        status_text(code)
    }

    /// A status history cause's name on the page ([`cause_text`]).
    pub(crate) fn cause<'a>(&self, code: &'a str) -> &'a str {
        cause_text(code)
    }

    /// A status history source's name on the page ([`source_text`]).
    pub(crate) fn source<'a>(&self, code: &'a str) -> &'a str {
        source_text(code)
    }

    /// A callback delivery state's name on the page ([`delivery_text`]).
    pub(crate) fn delivery<'a>(&self, code: &'a str) -> &'a str {
        delivery_text(code)
    }

    /// The error of a field, if any (the templates call it).
    pub(crate) fn error_for(&self, field: &str) -> Option<&str> {
        self.errors
            .iter()
            .find(|e| e.field == field)
            .map(|e| e.message.as_str())
    }

    pub(crate) fn error(mut self, field: &str, message: impl Into<String>) -> Chrome {
        self.errors.push(FieldError {
            field: field.to_string(),
            message: message.into(),
        });
        self
    }

    pub(crate) fn notice(mut self, notice: Option<String>) -> Chrome {
        self.notice = notice;
        self
    }

    pub(crate) fn section(mut self, section: &'static str) -> Chrome {
        self.section = section;
        self
    }

    pub(crate) fn crumbs(mut self, crumbs: Vec<Link>) -> Chrome {
        self.crumbs = crumbs;
        self
    }
}

/// A payment status's name on the pages: in English the API's own word (`completed`), in
/// Russian its name; an unknown code as it is.
pub(crate) fn status_text(code: &str) -> &str {
    match code {
        "created" => tr("status|created"),
        "processing" => tr("status|processing"),
        "completed" => tr("status|completed"),
        "canceled" => tr("status|canceled"),
        "error" => tr("status|error"),
        "appeal" => tr("status|appeal"),
        _ => code,
    }
}

/// What changed a payment, on the card's status history (English: the API's word,
/// `requisites_issued`).
pub(crate) fn cause_text(code: &str) -> &str {
    match code {
        "created" => tr("cause|created"),
        "requisites_issued" => tr("cause|requisites_issued"),
        "requisites_refused" => tr("cause|requisites_refused"),
        "confirmed" => tr("cause|confirmed"),
        "canceled" => tr("cause|canceled"),
        "expired" => tr("cause|expired"),
        "recheck_started" => tr("cause|recheck_started"),
        "recheck_resolved" => tr("cause|recheck_resolved"),
        "unrecorded" => tr("cause|unrecorded"),
        _ => code,
    }
}

/// Who changed a payment, on the card's status history (English: the API's word).
pub(crate) fn source_text(code: &str) -> &str {
    match code {
        "merchant" => tr("source|merchant"),
        "provider" => tr("source|provider"),
        "support" => tr("source|support"),
        "lifetime" => tr("source|lifetime"),
        _ => code,
    }
}

/// A callback delivery state's name on the pages (English: its code, `delivered`).
pub(crate) fn delivery_text(code: &str) -> &str {
    match code {
        "pending" => tr("delivery|pending"),
        "delivered" => tr("delivery|delivered"),
        "failed" => tr("delivery|failed"),
        _ => code,
    }
}

/// A time for `<time datetime>` (RFC 3339, to the millisecond, UTC) and as text in the
/// cabinet's one date format ([`when_text`]): every page that shows a time shows it so.
pub(crate) fn when(t: Timestamp) -> (String, String) {
    let iso = t.to_rfc3339();
    (iso, when_text(t))
}

/// `t` to the minute in the request's time zone ([`i18n::zone`]), with the zone's abbreviation
/// or offset: `2026-11-27 14:03 UTC`, `2026-11-27 17:03 MSK`, `2026-11-27 19:03 UTC+05`.
pub(crate) fn when_text(t: Timestamp) -> String {
    let Ok(at) = jiff::Timestamp::from_millisecond(t.unix_millis()) else {
        return crate::accounts::when_text(t);
    };
    let zoned = at.to_zoned_datetime(i18n::zone());
    let abbreviation = zoned.strftime("%Z").to_string();
    let abbreviation = if abbreviation.starts_with(['+', '-']) {
        format!("UTC{abbreviation}")
    } else {
        abbreviation
    };
    format!("{} {abbreviation}", zoned.strftime("%Y-%m-%d %H:%M"))
}

/// An amount of money as the page's language writes it: the whole units grouped by
/// thousands, the language's decimal mark, the currency's sign after (`1 990,00 ₽` in Russian,
/// `1,990.00 ₽` in English; a currency without a sign by its code).
pub(crate) fn money(v: Volume, currency: Currency) -> String {
    let (units, _) = v.parts();
    let (group, point) = match i18n::current() {
        Lang::En => (",", "."),
        Lang::Ru => ("\u{a0}", ","),
    };
    let digits = units.to_string();
    let mut grouped = String::with_capacity(digits.len() + digits.len() / 3);
    for (i, d) in digits.chars().enumerate() {
        if i > 0 && (digits.len() - i) % 3 == 0 && d.is_ascii_digit() {
            grouped.push_str(group);
        }
        grouped.push(d);
    }
    let sign = match currency.as_str() {
        "RUB" => "₽",
        "USD" => "$",
        "EUR" => "€",
        other => other,
    };
    format!("{grouped}{point}{}\u{a0}{sign}", v.fraction_digits())
}

/// A share in thousandths as a percentage with one decimal in the page's language
/// (`45.6 %`, `45,6 %`).
pub(crate) fn percent(permille: u64) -> String {
    let point = match i18n::current() {
        Lang::En => ".",
        Lang::Ru => ",",
    };
    format!("{}{point}{}\u{a0}%", permille / 10, permille % 10)
}

/// An RFC 3339 time found in a text (a field of the payment resource) in the cabinet's
/// format; any other text as it is.
pub(crate) fn when_in_text(value: &str) -> String {
    match Timestamp::parse_rfc3339(value) {
        Some(t) if value.len() >= 20 && value.as_bytes()[10] == b'T' => when_text(t),
        _ => value.to_string(),
    }
}

#[derive(Template)]
#[template(path = "message.html")]
pub(crate) struct Message {
    pub(crate) chrome: Chrome,
    pub(crate) text: String,
    pub(crate) link: Option<Link>,
}

#[derive(Template)]
#[template(path = "confirm.html")]
pub(crate) struct Confirm {
    pub(crate) chrome: Chrome,
    pub(crate) paragraphs: Vec<String>,
    pub(crate) action: String,
    pub(crate) button: String,
    pub(crate) danger: bool,
    pub(crate) cancel: String,
}

#[derive(Template)]
#[template(path = "sign_in.html")]
pub(crate) struct SignIn {
    pub(crate) chrome: Chrome,
    pub(crate) email: String,
}

#[derive(Template)]
#[template(path = "code.html")]
pub(crate) struct Code {
    pub(crate) chrome: Chrome,
    pub(crate) email: String,
}

#[derive(Template)]
#[template(path = "recovery.html")]
pub(crate) struct Recovery {
    pub(crate) chrome: Chrome,
    pub(crate) email: String,
}

#[derive(Template)]
#[template(path = "enrol.html")]
pub(crate) struct Enrol {
    pub(crate) chrome: Chrome,
    pub(crate) email: String,
    pub(crate) qr_svg: String,
    pub(crate) uri: String,
    pub(crate) key_grouped: String,
}

/// Moving the authenticator to a new device: the new key (once, right after the password and
/// a current code) and the form for the new device's first code.
#[derive(Template)]
#[template(path = "reenrol.html")]
pub(crate) struct Reenrol {
    pub(crate) chrome: Chrome,
    /// The new key as a QR code, its link and its text; `None` on a second look (a wrong
    /// code: the key is not shown again).
    pub(crate) qr_svg: Option<String>,
    pub(crate) uri: Option<String>,
    pub(crate) key_grouped: Option<String>,
    /// The one-time slot that keeps the new key until its first code.
    pub(crate) pending: String,
}

#[derive(Template)]
#[template(path = "recovery_codes.html")]
pub(crate) struct RecoveryCodes {
    pub(crate) chrome: Chrome,
    pub(crate) codes: Vec<String>,
    pub(crate) next: String,
}

#[derive(Template)]
#[template(path = "invite.html")]
pub(crate) struct InvitePage {
    pub(crate) chrome: Chrome,
    pub(crate) email: String,
    pub(crate) token: String,
}

/// A project in a list.
#[derive(Debug, Clone)]
pub(crate) struct ProjectRow {
    pub(crate) id: String,
    pub(crate) name: String,
    pub(crate) test_mode: bool,
    pub(crate) state: String,
}

/// A merchant's projects.
#[derive(Debug, Clone)]
pub(crate) struct MerchantGroup {
    pub(crate) merchant_id: String,
    pub(crate) merchant_name: String,
    pub(crate) paused: bool,
    pub(crate) projects: Vec<ProjectRow>,
}

#[derive(Template)]
#[template(path = "projects.html")]
pub(crate) struct Projects {
    pub(crate) chrome: Chrome,
    pub(crate) groups: Vec<MerchantGroup>,
}

/// A project's settings as shown.
#[derive(Debug, Clone)]
pub(crate) struct ProjectView {
    pub(crate) id: String,
    pub(crate) merchant_name: String,
    pub(crate) test_mode: bool,
    pub(crate) state: String,
    pub(crate) lifetime: String,
    pub(crate) signature_required: bool,
    /// The payer page's setting, `None` when it is off.
    pub(crate) payer_page: Option<&'static str>,
    pub(crate) rate_limit: String,
    pub(crate) contract: Vec<String>,
}

#[derive(Debug, Clone)]
pub(crate) struct TokenRow {
    pub(crate) id: String,
    /// Its name; a token issued without one reads "unnamed".
    pub(crate) name: String,
    pub(crate) prefix: String,
    pub(crate) scopes: String,
    pub(crate) created: String,
    pub(crate) created_text: String,
    /// When it expires (`datetime`, text); `None`: until revoked.
    pub(crate) expires: Option<(String, String)>,
    /// When a request last used it, if one has (`datetime`, text).
    pub(crate) last_used: Option<(String, String)>,
    /// Active, expired or revoked (with when).
    pub(crate) state: String,
    /// Neither revoked nor expired: it can be revoked.
    pub(crate) active: bool,
}

#[derive(Debug, Clone)]
pub(crate) struct KeyRow {
    pub(crate) keyid: String,
    pub(crate) created: String,
    pub(crate) created_text: String,
    pub(crate) state: String,
    pub(crate) active: bool,
    pub(crate) highlight: bool,
}

/// A line of the allow-list that does not parse.
#[derive(Debug, Clone)]
pub(crate) struct LineError {
    pub(crate) line: usize,
    pub(crate) message: String,
}

/// A callback secret's status line.
#[derive(Debug, Clone)]
pub(crate) struct SecretLine {
    pub(crate) label: String,
    pub(crate) text: String,
}

#[derive(Template)]
#[template(path = "project.html")]
pub(crate) struct Access {
    pub(crate) chrome: Chrome,
    pub(crate) tab: &'static str,
    pub(crate) project: ProjectView,
    pub(crate) tokens: Vec<TokenRow>,
    /// Every scope, and whether a new token starts with it (`Scope::SUGGESTED`).
    pub(crate) scopes: Vec<(&'static str, bool)>,
    pub(crate) keys: Vec<KeyRow>,
    /// The token name typed into a refused form.
    pub(crate) token_name: String,
    /// The lifetimes offered for a new token: value (days, empty: never) and label.
    pub(crate) lifetimes: Vec<(&'static str, &'static str)>,
    /// The lifetime chosen in a refused form.
    pub(crate) token_lifetime: String,
    pub(crate) allow_list: String,
    pub(crate) allow_errors: Vec<LineError>,
    pub(crate) callback_url: String,
    pub(crate) secrets: Vec<SecretLine>,
}

#[derive(Template)]
#[template(path = "shown_once.html")]
pub(crate) struct ShownOnce {
    pub(crate) chrome: Chrome,
    pub(crate) heading: String,
    pub(crate) label: String,
    pub(crate) value: String,
    pub(crate) notes: Vec<String>,
    pub(crate) back: String,
}

/// A choice of a filter.
#[derive(Debug, Clone)]
pub(crate) struct Choice {
    pub(crate) value: &'static str,
    pub(crate) selected: bool,
}

#[derive(Debug, Clone)]
pub(crate) struct PaymentRow {
    pub(crate) id: String,
    pub(crate) created: String,
    pub(crate) created_text: String,
    pub(crate) merchant_payment_id: String,
    /// The amount as money in the page's language (`1 500,50 ₽`).
    pub(crate) amount: String,
    pub(crate) method: String,
    pub(crate) status: String,
    pub(crate) test: bool,
}

/// An export's download button for Excel, as a page shows it.
#[derive(Debug, Clone)]
pub(crate) struct ExportLink {
    /// The element's id: the page's `prefix` and the format (`payments-excel-ru`).
    pub(crate) id: String,
    /// The export's address with the format.
    pub(crate) href: String,
    /// The button's text, in the page's language.
    pub(crate) label: &'static str,
    /// Whether this is the highlighted button: the format of the page's language.
    pub(crate) primary: bool,
}

#[derive(Template)]
#[template(path = "payments.html")]
pub(crate) struct Payments {
    pub(crate) chrome: Chrome,
    pub(crate) tab: &'static str,
    pub(crate) project: ProjectView,
    pub(crate) statuses: Vec<Choice>,
    pub(crate) from: String,
    pub(crate) to: String,
    pub(crate) merchant_payment_id: String,
    /// The export of every payment the filters match (the plain CSV).
    pub(crate) csv: String,
    /// The same export for Excel, the page's language's first.
    pub(crate) excel: Vec<ExportLink>,
    /// The totals of every payment the filters match, when asked for (`totals=1`).
    pub(crate) totals: Option<ListTotals>,
    /// The same page with its totals.
    pub(crate) totals_link: String,
    pub(crate) payments: Vec<PaymentRow>,
    pub(crate) next: Option<String>,
}

/// A field of the payment card.
#[derive(Debug, Clone)]
pub(crate) struct CardField {
    /// The field as a phrase ("USDT rate").
    pub(crate) label: String,
    /// The API's name of it (`merchant_information.amount_usdt_rate`), shown small beside.
    pub(crate) name: String,
    pub(crate) value: String,
    pub(crate) code: bool,
}

/// The card's payment.
#[derive(Debug, Clone)]
pub(crate) struct CardPayment {
    pub(crate) id: String,
    pub(crate) status: String,
    pub(crate) test: bool,
}

#[derive(Debug, Clone)]
pub(crate) struct AttemptRow {
    pub(crate) number: u32,
    pub(crate) started: String,
    pub(crate) started_text: String,
    pub(crate) success: bool,
    /// What the attempt came to, in words (`connection refused`, `HTTP 500`).
    pub(crate) result: String,
    /// The failure's technical detail (the library's message), for support only.
    pub(crate) detail: Option<String>,
    pub(crate) latency: u64,
    pub(crate) excerpt: Option<String>,
}

#[derive(Debug, Clone)]
pub(crate) struct EventView {
    pub(crate) event_id: String,
    pub(crate) payment_id: String,
    /// The payment's order number (`merchant_payment_id`), as the callback names it.
    pub(crate) order: String,
    pub(crate) status: String,
    pub(crate) kind: String,
    pub(crate) state: String,
    pub(crate) destination: String,
    pub(crate) created: String,
    pub(crate) created_text: String,
    pub(crate) attempts_made: u32,
    pub(crate) max_attempts: u32,
    /// When the next attempt is due (`datetime`, text).
    pub(crate) next: Option<(String, String)>,
    pub(crate) attempts: Vec<AttemptRow>,
    /// The event's page (its body and headers, its resend).
    pub(crate) href: String,
}

#[derive(Template)]
#[template(path = "payment.html")]
pub(crate) struct Card {
    pub(crate) chrome: Chrome,
    pub(crate) p: CardPayment,
    pub(crate) fields: Vec<CardField>,
    pub(crate) test_buttons: bool,
    /// The "Send callback" button of a closed test payment (a merchant's user).
    pub(crate) test_callback: bool,
    pub(crate) support: bool,
    /// A merchant's "Resend callback" of a closed live payment (behind a confirmation).
    pub(crate) merchant_resend: bool,
    /// No callback URL for the payment, its project or its merchant: the callback sections
    /// say how to set one instead of offering a send that would be refused.
    pub(crate) no_callback_url: bool,
    /// The payment's project (the link to its callback settings).
    pub(crate) project_id: String,
    /// The payer page's link, when the payment has one.
    pub(crate) payment_page_url: Option<String>,
    /// What the owner reads first: order, amount, status, method, to whom, when.
    pub(crate) summary: Vec<SummaryLine>,
    /// Everything that happened to the payment, oldest first.
    pub(crate) timeline: Vec<Moment>,
    /// The payment's status history, oldest first.
    pub(crate) history: Vec<HistoryRow>,
    pub(crate) events: Vec<EventView>,
    pub(crate) show_payment: bool,
    pub(crate) resend: bool,
    /// The payment's appeals and the form that opens one (`None`: an open payment without
    /// appeals, nothing to show).
    pub(crate) appeals: Option<CardAppeals>,
}

/// A receipt of an appeal: the link that downloads it and what it is ("PDF, 12 KiB").
#[derive(Debug, Clone)]
pub(crate) struct ReceiptLink {
    pub(crate) href: String,
    pub(crate) label: String,
}

/// An appeal as the payment card and the support queue show it: every value as text.
#[derive(Debug, Clone)]
pub(crate) struct AppealRow {
    pub(crate) id: String,
    /// Its state's code (`open`, `accepted` ...), for the class and the tests.
    pub(crate) state: &'static str,
    /// Its state in words.
    pub(crate) state_text: &'static str,
    pub(crate) reason: &'static str,
    /// Who opened it, in words.
    pub(crate) source: &'static str,
    /// The amount the payer says was sent, with the currency.
    pub(crate) claimed: Option<String>,
    /// When the payer says they paid (`datetime`, text).
    pub(crate) paid_at: Option<(String, String)>,
    pub(crate) payer_bank: Option<String>,
    pub(crate) receipts: Vec<ReceiptLink>,
    /// When it was opened (`datetime`, text).
    pub(crate) created: (String, String),
    /// When its current state ends (`datetime`, text).
    pub(crate) deadline: (String, String),
    /// Active and past its deadline (the sweep has not expired it yet).
    pub(crate) overdue: bool,
    /// Still waiting for a decision.
    pub(crate) active: bool,
    /// What the decision was, in words (accepted with an amount, rejected, expired).
    pub(crate) outcome: Option<String>,
    /// The decider's note.
    pub(crate) note: Option<String>,
}

/// The payment card's appeals section.
#[derive(Debug, Clone)]
pub(crate) struct CardAppeals {
    /// Newest first.
    pub(crate) rows: Vec<AppealRow>,
    /// The "Open an appeal" form (a merchant's user, a payment that can be appealed).
    pub(crate) form: Option<AppealForm>,
    /// A link to the support queue (support).
    pub(crate) queue: bool,
}

/// The "Open an appeal" form as shown: a new idempotency key per render, and what was typed
/// into a refused form.
#[derive(Debug, Clone)]
pub(crate) struct AppealForm {
    /// The idempotency key of this render (a hidden field): a second submit of the same
    /// form opens no second appeal.
    pub(crate) key: String,
    /// The reasons offered: value, words, chosen.
    pub(crate) reasons: Vec<(&'static str, &'static str, bool)>,
    pub(crate) claimed: String,
    pub(crate) paid_at: String,
    pub(crate) payer_bank: String,
}

/// One change of the card's status history, as the page writes it.
#[derive(Debug, Clone)]
pub(crate) struct HistoryRow {
    /// The time for `<time datetime>`, and as text.
    pub(crate) at: (String, String),
    /// The status after (its code).
    pub(crate) status: String,
    /// The amount after, as the API writes it.
    pub(crate) amount: String,
    /// The cause's code ([`cause_text`] names it).
    pub(crate) cause: String,
    /// Who caused it ([`source_text`]); empty for a change not recorded.
    pub(crate) source: String,
}

#[derive(Template)]
#[template(path = "deliveries.html")]
pub(crate) struct Deliveries {
    pub(crate) chrome: Chrome,
    pub(crate) tab: &'static str,
    pub(crate) project: ProjectView,
    pub(crate) states: Vec<Choice>,
    pub(crate) payment: String,
    pub(crate) from: String,
    pub(crate) to: String,
    pub(crate) events: Vec<EventView>,
    pub(crate) show_payment: bool,
    pub(crate) resend: bool,
    pub(crate) next: Option<String>,
    /// The "Resend what was not delivered since" form's date (`YYYY-MM-DD`).
    pub(crate) since: String,
}

#[derive(Debug, Clone)]
pub(crate) struct SessionRow {
    pub(crate) id: String,
    pub(crate) signed_in: String,
    pub(crate) signed_in_text: String,
    pub(crate) last_seen: String,
    pub(crate) last_seen_text: String,
    pub(crate) address: String,
    pub(crate) browser: String,
    pub(crate) current: bool,
}

#[derive(Template)]
#[template(path = "security.html")]
pub(crate) struct Security {
    pub(crate) chrome: Chrome,
    pub(crate) email: String,
    pub(crate) codes_left: u32,
    pub(crate) sessions: Vec<SessionRow>,
    /// Every time zone offered, and the user's.
    pub(crate) zones: Vec<String>,
}

#[derive(Debug, Clone)]
pub(crate) struct AuditRow {
    pub(crate) at: String,
    pub(crate) at_text: String,
    pub(crate) email: String,
    pub(crate) address: String,
    /// The action's code (`sign_in.password`), for filters and scripts.
    pub(crate) action: String,
    /// The action as a phrase (`Password sign-in`).
    pub(crate) action_text: String,
    pub(crate) success: bool,
    /// What it acted on, in words, and the page that shows it.
    pub(crate) object: (String, Option<String>),
    pub(crate) target: String,
    pub(crate) detail: String,
}

#[derive(Template)]
#[template(path = "audit.html")]
pub(crate) struct Audit {
    pub(crate) chrome: Chrome,
    pub(crate) scope: String,
    pub(crate) families: Vec<AuditFamily>,
    /// The result filter as given: `ok`, `refused` or empty.
    pub(crate) result: String,
    pub(crate) email: String,
    /// Whether any filter is set ("nothing matches" rather than "nothing recorded").
    pub(crate) filtered: bool,
    pub(crate) records: Vec<AuditRow>,
    /// The link to the next (older) page.
    pub(crate) next: Option<String>,
}

/// A family of actions in the audit log's filter.
pub(crate) struct AuditFamily {
    pub(crate) value: &'static str,
    pub(crate) label: &'static str,
    pub(crate) selected: bool,
}

/// A USDT amount as shown: 4 decimals, a negative one marked (`class="neg"`).
#[derive(Debug, Clone)]
pub(crate) struct Money {
    pub(crate) text: String,
    pub(crate) negative: bool,
}

/// A kind of ledger entry with its sum (and, in a statement, its count).
#[derive(Debug, Clone)]
pub(crate) struct KindLine {
    pub(crate) kind: &'static str,
    pub(crate) label: &'static str,
    pub(crate) count: Option<u64>,
    pub(crate) sum: Money,
}

/// A statement of a period as shown.
#[derive(Debug, Clone)]
pub(crate) struct StatementView {
    pub(crate) from: String,
    pub(crate) to: String,
    pub(crate) opening: Money,
    pub(crate) lines: Vec<KindLine>,
    pub(crate) count: u64,
    pub(crate) closing: Money,
}

/// A ledger entry in the balance tab's list.
#[derive(Debug, Clone)]
pub(crate) struct EntryRow {
    pub(crate) seq: u64,
    pub(crate) at: String,
    pub(crate) at_text: String,
    pub(crate) kind: &'static str,
    pub(crate) label: &'static str,
    pub(crate) amount: Money,
    pub(crate) balance_after: Money,
    pub(crate) payment: Option<String>,
    /// The payment's order number (`merchant_payment_id`), as the link's text.
    pub(crate) order: Option<String>,
    pub(crate) payment_version: u64,
    pub(crate) destination: Option<String>,
    pub(crate) reference: Option<String>,
    pub(crate) reason: Option<String>,
}

#[derive(Template)]
#[template(path = "balance.html")]
pub(crate) struct BalancePage {
    pub(crate) chrome: Chrome,
    pub(crate) tab: &'static str,
    pub(crate) project: ProjectView,
    pub(crate) balance: Money,
    pub(crate) entries_total: u64,
    /// The last entry's time (`<time datetime>`, text).
    pub(crate) updated: Option<(String, String)>,
    pub(crate) totals: Vec<KindLine>,
    /// The period's dates as given (or as read, once valid).
    pub(crate) from: String,
    pub(crate) to: String,
    /// The entries export of the period (a valid period only; the plain CSV).
    pub(crate) csv: Option<String>,
    /// The same export for Excel, the page's language's first (a valid period only).
    pub(crate) excel: Vec<ExportLink>,
    pub(crate) statement: Option<StatementView>,
    pub(crate) entries: Vec<EntryRow>,
    /// The link to the next (older) page of entries.
    pub(crate) next: Option<String>,
}

#[cfg(test)]
mod date_format_tests {
    use super::*;

    /// The one date format of the cabinet: minutes, `UTC`, and the exact time in `datetime`.
    #[test]
    fn times_read_as_one_format() {
        let t = Timestamp::parse_rfc3339("2026-11-27T14:03:59.123Z").expect("a time");
        let (iso, text) = when(t);
        assert_eq!(text, "2026-11-27 14:03 UTC");
        assert_eq!(Timestamp::parse_rfc3339(&iso).expect("RFC 3339"), t);
        assert_eq!(when_text(t), text);
        assert_eq!(when_in_text("2026-11-27T14:03:59.123Z"), text);
        assert_eq!(when_in_text("completed"), "completed");
        assert_eq!(when_in_text("2026-11-27"), "2026-11-27");
    }

    /// In a user's time zone: the zone's abbreviation, or its offset where the zone has no
    /// letters; a filter's day starts at the zone's midnight and ends at the next one.
    #[test]
    fn times_and_days_read_in_the_users_zone() {
        use crate::web::i18n::{scope, set_zone, Lang, Scope};
        use crate::web::query::{date, date_end};
        let t = Timestamp::parse_rfc3339("2026-11-27T20:03:00Z").expect("a time");
        let read = |zone: &'static str| {
            futures_executor::block_on(scope(Scope::new(Lang::En, "/".into()), async move {
                set_zone(Some(zone));
                let day = (date("2026-11-28"), date_end("2026-11-28"));
                (
                    when_text(t),
                    day.0.map(Timestamp::to_rfc3339),
                    day.1.map(Timestamp::to_rfc3339),
                )
            }))
        };
        let (text, from, to) = read("Europe/Moscow");
        assert_eq!(text, "2026-11-27 23:03 MSK");
        assert_eq!(from.as_deref(), Some("2026-11-27T21:00:00.000Z"));
        assert_eq!(to.as_deref(), Some("2026-11-28T21:00:00.000Z"));
        let (text, _, _) = read("Asia/Vladivostok");
        assert_eq!(text, "2026-11-28 06:03 UTC+10");
        // An unknown zone reads as UTC, as a user without one.
        let (text, from, _) = read("Mars/Olympus");
        assert_eq!(text, "2026-11-27 20:03 UTC");
        assert_eq!(from.as_deref(), Some("2026-11-28T00:00:00.000Z"));
    }
}

/// One line of the card's summary.
#[derive(Debug, Clone)]
pub(crate) struct SummaryLine {
    /// Its id, for the tests and the page's anchors (`summary-amount`).
    pub(crate) id: &'static str,
    pub(crate) label: String,
    pub(crate) value: String,
}

/// One moment of the payment's timeline.
#[derive(Debug, Clone)]
pub(crate) struct Moment {
    /// RFC 3339 and the cabinet's text.
    pub(crate) at: (String, String),
    /// When, for the order.
    pub(crate) at_ms: i64,
    /// What happened, in words.
    pub(crate) what: String,
    /// The details (the status, the amount, who; the answer of a callback).
    pub(crate) detail: String,
    /// `ok`, `bad` or `info`: how the line is marked.
    pub(crate) tone: &'static str,
}

/// The totals of a filtered list, as the list shows them under its page.
#[derive(Debug, Clone)]
pub(crate) struct ListTotals {
    pub(crate) created: u64,
    pub(crate) completed: u64,
    pub(crate) canceled: u64,
    pub(crate) failed: u64,
    pub(crate) open: u64,
    /// The completed volume, one text per currency.
    pub(crate) volume: Vec<String>,
    /// Whether every payment the filter finds was counted.
    pub(crate) complete: bool,
}

/// A payment as a row of a list (a project's, the search's): its amount as money.
pub(crate) fn payment_row(p: &Payment) -> PaymentRow {
    let (created, created_text) = when(p.created_at);
    PaymentRow {
        id: p.id.to_string(),
        created,
        created_text,
        merchant_payment_id: p.merchant_payment_id.as_str().to_string(),
        amount: money(Volume::of(&p.amount), p.currency),
        method: p.payment_method.as_str().to_string(),
        status: p.status.as_str().to_string(),
        test: p.is_test(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::web::i18n::{scope, Scope};

    fn rub(micros: i128) -> String {
        money(Volume::from_micros(micros), Currency::RUB)
    }

    #[tokio::test]
    async fn money_and_shares_are_written_as_the_language_writes_them() {
        assert_eq!(rub(1_990_000_000), "1,990.00\u{a0}₽");
        assert_eq!(rub(1_000_000_000_000), "1,000,000.00\u{a0}₽");
        assert_eq!(rub(150_500_000), "150.50\u{a0}₽");
        assert_eq!(rub(125_000), "0.125\u{a0}₽");
        assert_eq!(percent(456), "45.6\u{a0}%");
        let usd = Currency::parse("USD").expect("a code");
        let ru = Scope::new(Lang::Ru, "/".into());
        scope(ru, async {
            assert_eq!(rub(1_990_000_000), "1\u{a0}990,00\u{a0}₽");
            assert_eq!(rub(1_000_000_000_000), "1\u{a0}000\u{a0}000,00\u{a0}₽");
            assert_eq!(rub(999_000_000), "999,00\u{a0}₽");
            assert_eq!(money(Volume::from_micros(5), usd), "0,000005\u{a0}$");
            assert_eq!(percent(1000), "100,0\u{a0}%");
        })
        .await;
    }
}
