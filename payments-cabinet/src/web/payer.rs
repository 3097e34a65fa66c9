//! The hosted payer page (`/pay/{token}`), served beside the cabinet: what the payer of one
//! payment sees. The core decides everything shown ([`Payments::payer_page`](payments_core::service::Payments::payer_page)
//! answers a [`PayerView`]); this module only renders it, in the project's language.
//!
//! The page works without JavaScript: the deadline is a `<time datetime>` with the time and
//! the minutes left written by the server, and while the payment may still change a "Refresh
//! status" link reloads it (no `<meta http-equiv="refresh">`: a page that reloads itself under
//! a screen reader's cursor fails WCAG 2.2.1). `payer.js`, from the same origin, adds the
//! ticking countdown, the copy buttons and the live status: it asks `/pay/{token}/status` (the
//! `status` handler) every few seconds while the payment is open and, when the answer differs
//! from what the page shows, fetches the page again and puts its new content in place,
//! announced by a polite status region. The page's own Content-Security-Policy allows that one
//! script, the one stylesheet, requests to this origin and form posts to it (the "I paid" form
//! of a closed page, [`appeal`]), nothing else.
//!
//! [`Payments::payer_page`]: payments_core::service::Payments::payer_page

pub mod appeal;

use crate::accounts::Permission;
use askama::Template;
use axum::extract::{Path, State};
use axum::http::header::{self, HeaderValue};
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use payments_core::payer::{PageLanguage, PayerState, PayerView, ShownRequisite};
use payments_core::payment::PaymentMethod;
use payments_core::ratelimit::RateDecision;
use payments_core::{ApiError, ErrorCode, Timestamp};
use payments_directory::DirectoryAccess;
use serde::Serialize;

use super::extract::{FormData, Signed};
use super::i18n::{tr, trf};
use super::page::{error_page, html, ok, see_other, OrPage, PageResult};
use super::state::CabinetState;
use crate::accounts::{source_of, Client};
use appeal::{appeal_block, AppealBlock, AppealTexts, APPEAL_EN, APPEAL_RU};

/// The payer page's stylesheet, embedded.
pub const PAYER_STYLESHEET: &str = include_str!("../../assets/payer.css");
/// The payer page's script (countdown and copy buttons), embedded.
pub const PAYER_SCRIPT: &str = include_str!("../../assets/payer.js");

/// The payer page's policy: its own stylesheet and script, requests to its own origin (the
/// status the script asks for), form posts to its own origin only (the "I paid" form),
/// nothing else; no framing.
pub const PAYER_CSP: &str = "default-src 'none'; style-src 'self'; script-src 'self'; \
    img-src 'self'; connect-src 'self'; form-action 'self'; frame-ancestors 'none'; \
    base-uri 'none'";

pub use crate::links::payer_page_url;

/// The words of the page in one language.
#[derive(Debug)]
pub(crate) struct Texts {
    pub(crate) lang: &'static str,
    pub(crate) title: &'static str,
    pub(crate) shop: &'static str,
    pub(crate) refresh: &'static str,
    pub(crate) order: &'static str,
    pub(crate) amount: &'static str,
    pub(crate) sum: &'static str,
    pub(crate) exact: &'static str,
    pub(crate) fee: &'static str,
    pub(crate) card: &'static str,
    pub(crate) phone: &'static str,
    pub(crate) holder: &'static str,
    pub(crate) bank: &'static str,
    pub(crate) copy: &'static str,
    pub(crate) copy_card: &'static str,
    pub(crate) copy_phone: &'static str,
    pub(crate) copy_amount: &'static str,
    pub(crate) copied: &'static str,
    pub(crate) deadline: &'static str,
    pub(crate) left: &'static str,
    pub(crate) minutes: &'static str,
    pub(crate) qr: &'static str,
    pub(crate) qr_hint: &'static str,
    pub(crate) deeplink: &'static str,
    pub(crate) test: &'static str,
    pub(crate) preparing: (&'static str, &'static str),
    pub(crate) completed: (&'static str, &'static str),
    pub(crate) canceled: (&'static str, &'static str),
    pub(crate) expired: (&'static str, &'static str),
    pub(crate) failed: (&'static str, &'static str),
    pub(crate) checking: (&'static str, &'static str),
    pub(crate) not_found: (&'static str, &'static str),
    pub(crate) months: [&'static str; 12],
    /// The return link's words before the shop's name ("Back to").
    pub(crate) back: &'static str,
    /// "I paid".
    pub(crate) appeal: &'static AppealTexts,
    /// Too many "I paid" forms from one source.
    pub(crate) too_many: (&'static str, &'static str),
}

const EN: Texts = Texts {
    lang: "en",
    back: "Back to",
    appeal: &APPEAL_EN,
    too_many: (
        "Too many appeals",
        "Too many appeals were sent from your network. Try again in an hour.",
    ),
    title: "Payment",
    shop: "Shop",
    refresh: "Refresh status",
    order: "Order",
    amount: "Amount to transfer",
    sum: "Amount",
    exact: "Transfer exactly this amount in one transfer.",
    fee: "Your bank's transfer fee, if any, is paid on top: the amount credited is what arrives.",
    card: "Recipient's card number",
    phone: "Recipient's phone number (SBP, Faster Payments System)",
    holder: "Recipient",
    bank: "Recipient's bank",
    copy: "Copy",
    copy_card: "Copy the card number",
    copy_phone: "Copy the phone number",
    copy_amount: "Copy the amount",
    copied: "Copied",
    deadline: "Pay by",
    left: "Time left",
    minutes: "min",
    qr: "QR code to pay",
    qr_hint: "Scan it in your bank's app.",
    deeplink: "Open your bank's app",
    test: "Test payment: no money moves.",
    preparing: (
        "Preparing the payment details",
        "They will appear on this page in a few seconds.",
    ),
    completed: (
        "Payment received",
        "Thank you. You can return to the shop.",
    ),
    canceled: (
        "The payment was canceled",
        "Its payment details are no longer valid: do not transfer to them. To pay, return to the shop.",
    ),
    expired: (
        "The time to pay has run out",
        "No payment arrived in time. These payment details are no longer valid: do not transfer to them. To try again, return to the shop.",
    ),
    failed: (
        "The payment could not be prepared",
        "No payment details could be issued. Return to the shop and try again.",
    ),
    checking: (
        "The payment is being checked",
        "The result will appear on this page.",
    ),
    not_found: ("Page not found", "Check the link you were given."),
    months: [
        "January", "February", "March", "April", "May", "June", "July", "August",
        "September", "October", "November", "December",
    ],
};

const RU: Texts = Texts {
    lang: "ru",
    back: "Вернуться в магазин",
    appeal: &APPEAL_RU,
    too_many: (
        "Слишком много обращений",
        "Из вашей сети отправлено слишком много обращений. Попробуйте через час.",
    ),
    title: "Оплата",
    shop: "Магазин",
    refresh: "Обновить статус",
    order: "Заказ",
    amount: "Сумма перевода",
    sum: "Сумма",
    exact: "Переведите ровно эту сумму одним переводом.",
    fee: "Комиссию вашего банка, если она есть, вы оплачиваете сверху: зачисляется та сумма, которая пришла.",
    card: "Номер карты получателя",
    phone: "Номер телефона получателя (СБП)",
    holder: "Получатель",
    bank: "Банк получателя",
    copy: "Копировать",
    copy_card: "Копировать номер карты",
    copy_phone: "Копировать номер телефона",
    copy_amount: "Копировать сумму",
    copied: "Скопировано",
    deadline: "Оплатите до",
    left: "Осталось",
    minutes: "мин",
    qr: "QR-код для оплаты",
    qr_hint: "Отсканируйте его в приложении банка.",
    deeplink: "Открыть приложение банка",
    test: "Тестовый платёж: деньги не переводятся.",
    preparing: (
        "Готовим реквизиты",
        "Они появятся на этой странице через несколько секунд.",
    ),
    completed: ("Оплата получена", "Спасибо! Можно вернуться в магазин."),
    canceled: (
        "Платёж отменён",
        "Его реквизиты больше не действуют: не переводите по ним. Чтобы оплатить, вернитесь в магазин.",
    ),
    expired: (
        "Время на оплату истекло",
        "Оплата не поступила вовремя. Реквизиты больше не действуют: не переводите по ним. Чтобы попробовать снова, вернитесь в магазин.",
    ),
    failed: (
        "Не удалось подготовить платёж",
        "Реквизиты не выданы. Вернитесь в магазин и попробуйте снова.",
    ),
    checking: (
        "Платёж проверяется",
        "Результат появится на этой странице.",
    ),
    not_found: ("Страница не найдена", "Проверьте ссылку, которую вам дали."),
    months: [
        "января", "февраля", "марта", "апреля", "мая", "июня", "июля", "августа",
        "сентября", "октября", "ноября", "декабря",
    ],
};

pub(crate) fn texts(language: PageLanguage) -> &'static Texts {
    match language {
        PageLanguage::En => &EN,
        _ => &RU,
    }
}

/// `1 October 2026, 12:15 UTC` / `1 октября 2026, 12:15 UTC`.
fn format_deadline(t: &Texts, at: Timestamp) -> String {
    let secs = at.unix_millis().div_euclid(1000);
    let Ok(dt) = time::OffsetDateTime::from_unix_timestamp(secs) else {
        return at.to_rfc3339();
    };
    format!(
        "{} {} {}, {:02}:{:02} UTC",
        dt.day(),
        t.months[usize::from(u8::from(dt.month())) - 1],
        dt.year(),
        dt.hour(),
        dt.minute()
    )
}

/// What the template shows of a requisite.
#[derive(Debug)]
pub(crate) struct RequisiteBlock {
    pub(crate) label: &'static str,
    pub(crate) copy_label: &'static str,
    pub(crate) display: String,
    pub(crate) copy: String,
    pub(crate) holder_name: String,
    pub(crate) bank: Option<String>,
    pub(crate) qr_svg: Option<String>,
    pub(crate) deeplink: Option<String>,
}

/// The payer page.
#[derive(Template)]
#[template(path = "payer.html")]
pub(crate) struct PayerPage {
    pub(crate) t: &'static Texts,
    pub(crate) shop: String,
    pub(crate) heading: &'static str,
    pub(crate) message: &'static str,
    pub(crate) state: &'static str,
    pub(crate) phase: &'static str,
    /// The page's own path (`/pay/<token>`): the "Refresh status" link.
    pub(crate) path: String,
    pub(crate) amount: String,
    pub(crate) currency: String,
    pub(crate) order: String,
    pub(crate) requisite: Option<RequisiteBlock>,
    pub(crate) deadline_iso: String,
    pub(crate) deadline_text: String,
    pub(crate) minutes_left: u64,
    pub(crate) is_test: bool,
    /// The project's return URL: the "Back to <shop>" link.
    pub(crate) return_url: Option<String>,
    /// "I paid": the form, or what the payer's appeal is at.
    pub(crate) appeal: Option<AppealBlock>,
    /// Before the title when a form was just refused ("Not sent").
    pub(crate) title_prefix: Option<&'static str>,
}

/// A page of the payer page's own in both languages (which one a link would have is not
/// known): "not found", the same for every wrong link, and "too many appeals".
#[derive(Template)]
#[template(path = "payer_missing.html")]
pub(crate) struct PayerNotice {
    /// The heading and the text in Russian.
    pub(crate) ru: (&'static str, &'static str),
    /// The heading and the text in English.
    pub(crate) en: (&'static str, &'static str),
}

fn requisite_block(t: &Texts, r: &ShownRequisite) -> RequisiteBlock {
    let (label, copy_label) = match r.method {
        PaymentMethod::CardTransfer => (t.card, t.copy_card),
        _ => (t.phone, t.copy_phone),
    };
    RequisiteBlock {
        label,
        copy_label,
        display: r.display.clone(),
        copy: r.copy.clone(),
        holder_name: r.holder_name.clone(),
        bank: r.bank.clone(),
        qr_svg: r
            .qr_payload
            .as_deref()
            .and_then(|p| super::qr::qr_svg_named(p, t.qr)),
        deeplink: r.deeplink.clone(),
    }
}

/// How the page's state may go on: `open` (the payer pays, or details are being prepared:
/// it changes within seconds or minutes), `waiting` (a re-check: it changes within hours or
/// days), `closed` (a final outcome: only an operator's re-check changes it). The script asks
/// for the status often while `open`, seldom while `waiting`, and stops once `closed`.
pub(crate) fn phase(state: &PayerState) -> &'static str {
    match state {
        _ if state.is_final() => "closed",
        PayerState::Checking => "waiting",
        _ => "open",
    }
}

/// `GET /pay/{token}/status`: what the page shows, in two words.
#[derive(Debug, Serialize, PartialEq, Eq)]
pub(crate) struct PayerStatus {
    /// The page's state, as its `<main data-state>` says: `pay`, `preparing`, `completed`,
    /// `canceled`, `expired`, `failed`, `checking`.
    pub(crate) status: &'static str,
    /// [`phase`]: `open`, `waiting`, `closed`.
    pub(crate) phase: &'static str,
}

pub(crate) fn status_of(view: &PayerView) -> PayerStatus {
    PayerStatus {
        status: view.state.as_str(),
        phase: phase(&view.state),
    }
}

/// The page of `view` (without its "I paid" part: [`show`] adds it).
pub(crate) fn page(view: &PayerView, token: &str) -> PayerPage {
    let t = texts(view.language);
    let (heading, message) = match &view.state {
        PayerState::Pay(_) => (t.title, ""),
        PayerState::Preparing => t.preparing,
        PayerState::Completed => t.completed,
        PayerState::Canceled => t.canceled,
        PayerState::Expired => t.expired,
        PayerState::Failed => t.failed,
        PayerState::Checking => t.checking,
    };
    PayerPage {
        t,
        shop: view.shop.clone(),
        heading,
        message,
        state: view.state.as_str(),
        phase: phase(&view.state),
        path: format!("/pay/{token}"),
        amount: view.amount.clone(),
        currency: view.currency.clone(),
        order: view.merchant_payment_id.clone(),
        requisite: view.state.requisite().map(|r| requisite_block(t, r)),
        deadline_iso: view.deadline.to_rfc3339(),
        deadline_text: format_deadline(t, view.deadline),
        minutes_left: view.seconds_left().div_ceil(60),
        is_test: view.is_test,
        return_url: view.return_url.clone(),
        appeal: None,
        title_prefix: None,
    }
}

pub(crate) fn with_policy(mut response: Response) -> Response {
    let h = response.headers_mut();
    h.insert(
        "content-security-policy",
        HeaderValue::from_static(PAYER_CSP),
    );
    h.insert(
        "x-robots-tag",
        HeaderValue::from_static("noindex, nofollow"),
    );
    response
}

/// `GET /pay/{token}`: the page with its "I paid" part, or the same `404` for every link that
/// is not a live page.
pub(crate) async fn show(State(st): State<CabinetState>, Path(token): Path<String>) -> Response {
    match st
        .cabinet
        .service()
        .payments()
        .payer_page_detail(&token)
        .await
    {
        // The view exists only for a well-formed token: it is safe in the page's links.
        Ok(detail) => {
            let mut shown = page(detail.view(), &token);
            shown.appeal = appeal_block(&detail, &token, None);
            with_policy(ok(&shown))
        }
        Err(e) => with_policy(missing(e.into())),
    }
}

/// `GET /pay/{token}/status`: `{"status": "pay", "phase": "open"}` ([`PayerStatus`]), never
/// cached; for every link that is not a live page, the page's own `404`, byte for byte. Asked
/// too often from one source or for one link ([`StatusPollLimits`](super::poll_limits::StatusPollLimits)), `429` with `Retry-After`
/// before anything is looked up: the page's script then waits longer.
pub(crate) async fn status(
    State(st): State<CabinetState>,
    client: Client,
    Path(token): Path<String>,
) -> Response {
    let now = st.cabinet.service().ports().clock.now();
    let source = client.address.map(source_of);
    let limits = &st.payer_status_limits;
    if let RateDecision::Limited { retry_after } = limits.acquire(source.as_deref(), &token, now) {
        return with_policy(too_many(retry_after));
    }
    match st.cabinet.service().payments().payer_page(&token).await {
        Ok(view) => with_policy(status_response(&status_of(&view))),
        Err(e) => with_policy(missing(e.into())),
    }
}

/// `429` with `Retry-After` (whole seconds, at least 1), never cached.
fn too_many(retry_after: std::time::Duration) -> Response {
    let secs = payments_core::ratelimit::retry_after_secs(retry_after);
    (
        StatusCode::TOO_MANY_REQUESTS,
        [
            (
                header::CONTENT_TYPE,
                HeaderValue::from_static("application/json"),
            ),
            (header::CACHE_CONTROL, HeaderValue::from_static("no-store")),
            (header::RETRY_AFTER, HeaderValue::from(secs)),
        ],
        r#"{"code":"rate_limited"}"#,
    )
        .into_response()
}

fn status_response(status: &PayerStatus) -> Response {
    let body = serde_json::to_string(status).unwrap_or_default();
    (
        [
            (header::CONTENT_TYPE, "application/json"),
            (header::CACHE_CONTROL, "no-store"),
        ],
        body,
    )
        .into_response()
}

pub(crate) fn missing(e: ApiError) -> Response {
    let status = match e.code {
        ErrorCode::PaymentNotFound | ErrorCode::NotFound => StatusCode::NOT_FOUND,
        _ => {
            tracing::error!(code = %e.code, message = %e.message, "payer page: request failed");
            StatusCode::SERVICE_UNAVAILABLE
        }
    };
    // Which language a wrong link's page would have is not known: Russian and English both.
    let page = PayerNotice {
        ru: RU.not_found,
        en: EN.not_found,
    };
    html(status, &page)
}

/// `GET /pay/assets/payer.css`.
pub(crate) async fn stylesheet() -> Response {
    asset("text/css; charset=utf-8", PAYER_STYLESHEET)
}

/// `GET /pay/assets/payer.js`.
pub(crate) async fn script() -> Response {
    asset("text/javascript; charset=utf-8", PAYER_SCRIPT)
}

fn asset(content_type: &'static str, body: &'static str) -> Response {
    (
        [
            (header::CONTENT_TYPE, content_type),
            (header::CACHE_CONTROL, "public, max-age=3600"),
        ],
        body,
    )
        .into_response()
}

// --- the project's payer page settings (the merchant's) --------------------------------------

/// `GET /projects/{id}/payer-page`: the payer page's switch, language and return URL.
#[derive(Template)]
#[template(path = "payer_settings.html")]
pub(crate) struct PayerSettings {
    pub(crate) chrome: super::views::Chrome,
    pub(crate) project_id: String,
    pub(crate) on: bool,
    pub(crate) languages: Vec<(&'static str, &'static str, bool)>,
    pub(crate) return_url: String,
}

/// What a redirect back to the settings may say.
#[derive(Debug, Default, serde::Deserialize)]
pub(crate) struct SettingsQuery {
    #[serde(default)]
    done: Option<String>,
    #[serde(default)]
    flash: Option<String>,
}

/// The settings page's name in a refused form's slot.
fn settings_name(project: &payments_core::project::Project) -> String {
    format!("payer-settings:{}", project.id)
}

pub(crate) async fn settings_page(
    State(st): State<CabinetState>,
    signed: Signed,
    Path(id): Path<String>,
    axum::extract::Query(q): axum::extract::Query<SettingsQuery>,
) -> PageResult {
    let (project, _) =
        super::projects::visible_project(&st, &signed.current, &id, Permission::Integration)
            .await?;
    let flash = super::once::flash(
        &st,
        signed.current.session.id,
        q.flash.as_deref(),
        &settings_name(&project),
    )
    .await?;
    let notice = (q.done.as_deref() == Some("saved"))
        .then(|| tr("The payer page settings are saved.").to_string());
    let chrome = st
        .chrome(
            trf("{project}: payer page", &[("project", &project.name)]),
            Some(&signed.current),
        )
        .section("projects")
        .crumbs(vec![
            super::views::Link::new("/projects", tr("Projects and API")),
            super::views::Link::new(format!("/projects/{}", project.id), project.name.clone()),
        ])
        .notice(notice);
    let chrome = super::once::with_errors(chrome, flash.as_ref());
    let typed = |f: &str| flash.as_ref().and_then(|x| x.typed(f));
    let language = typed("payer_language")
        .and_then(|l| l.parse().ok())
        .unwrap_or(project.payer_language);
    let page = PayerSettings {
        chrome,
        project_id: project.id.to_string(),
        on: typed("payer_page").map_or(project.payer_page, |v| v == "on"),
        languages: PageLanguage::ALL
            .iter()
            .map(|l| {
                let name = match l {
                    PageLanguage::En => tr("English"),
                    _ => tr("Russian"),
                };
                (l.as_str(), name, *l == language)
            })
            .collect(),
        return_url: typed("return_url").unwrap_or_else(|| {
            project
                .return_url
                .as_ref()
                .map(|u| u.as_str().to_string())
                .unwrap_or_default()
        }),
    };
    Ok(super::once::answer(flash.as_ref(), ok(&page)))
}

/// `POST /projects/{id}/payer-page`: the operator API's project patch (`payer_page`,
/// `payer_language`, `return_url`; the core checks the URL), audited; the reason on the form
/// after a refusal (`422`).
pub(crate) async fn save_settings(
    State(st): State<CabinetState>,
    signed: Signed,
    client: Client,
    Path(id): Path<String>,
    form: FormData,
) -> PageResult {
    let (project, merchant) =
        super::projects::visible_project(&st, &signed.current, &id, Permission::Integration)
            .await?;
    let on = form.get("payer_page") == "on";
    let language = form.get("payer_language").to_string();
    let url = form.get("return_url").trim().to_string();
    let back = format!("/projects/{}/payer-page", project.id);
    let refuse = |field: &str, message: String| {
        super::once::Flash::new(settings_name(&project), StatusCode::UNPROCESSABLE_ENTITY)
            .error(field, message)
            .input("payer_page", if on { "on" } else { "off" })
            .input("payer_language", language.clone())
            .input("return_url", url.clone())
    };
    let Ok(parsed) = language.parse::<PageLanguage>() else {
        let flash = refuse(
            "payer_language",
            tr("Language: choose English or Russian.").into(),
        );
        return Ok(super::once::refuse(&st, signed.current.session.id, &back, "", flash).await);
    };
    let patch = payments_directory::ProjectPatch {
        payer_page: Some(on),
        payer_language: Some(parsed),
        return_url: Some((!url.is_empty()).then(|| url.clone())),
        ..Default::default()
    };
    match st
        .cabinet
        .service()
        .directory()
        .update_project(project.id, patch, &signed.current.actor())
        .await
    {
        Ok(after) => {
            st.cabinet
                .audit_log()
                .change(
                    &signed.current,
                    &client,
                    crate::accounts::Change {
                        merchant: merchant.id,
                        project: Some(project.id),
                        action: "project.payer_page",
                        target: &project.id.to_string(),
                        detail: Some(format!(
                            "{}, {}, return URL {}",
                            if after.payer_page { "on" } else { "off" },
                            after.payer_language.as_str(),
                            after.return_url.as_ref().map_or("none", |u| u.as_str())
                        )),
                    },
                )
                .await
                .or_page(&st)?;
            Ok(see_other(&format!("{back}?done=saved")))
        }
        Err(e) if e.code() == ErrorCode::BadRequest => {
            let message = e.to_string();
            let field = if message.contains("return_url") {
                "return_url"
            } else {
                "payer_page"
            };
            let flash = refuse(field, message.replacen("return_url: ", "Return URL: ", 1));
            Ok(super::once::refuse(&st, signed.current.session.id, &back, "", flash).await)
        }
        Err(e) => Err(error_page(e, &st)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use payments_core::payer::PageToken;

    #[test]
    fn deadlines_read_in_both_languages() {
        // 2026-10-01T12:15:00Z
        let at = Timestamp::from_unix_secs(1_790_856_900);
        assert_eq!(format_deadline(&EN, at), "1 October 2026, 12:15 UTC");
        assert_eq!(format_deadline(&RU, at), "1 октября 2026, 12:15 UTC");
    }

    fn view(state: PayerState, language: PageLanguage) -> PayerView {
        PayerView {
            language,
            shop: "Tea & <Coffee> \"Shop\"".into(),
            state,
            amount: "3400.50".into(),
            currency: "RUB".into(),
            merchant_payment_id: "order-1".into(),
            deadline: Timestamp::from_unix_secs(1_790_856_900),
            now: Timestamp::from_unix_secs(1_790_856_000),
            is_test: false,
            return_url: None,
        }
    }

    #[test]
    fn the_return_link_names_the_shop_only_when_set() {
        let mut v = view(PayerState::Completed, PageLanguage::En);
        let html = page(&v, TOKEN).render().unwrap();
        assert!(!html.contains("return-url"), "no link without a return URL");
        v.return_url = Some("https://shop.example/orders?id=1&x=\"y\"".into());
        for (language, words) in [
            (PageLanguage::En, "Back to"),
            (PageLanguage::Ru, "Вернуться в магазин"),
        ] {
            v.language = language;
            let html = page(&v, TOKEN).render().unwrap();
            assert!(
                html.contains(
                    "<a id=\"return-url\" class=\"button secondary\" href=\"https://shop.example/orders?id=1&#38;x=&#34;y&#34;\" rel=\"noopener\">"
                ),
                "{html}"
            );
            assert!(
                html.contains(&format!(
                    "{words} Tea &#38; &#60;Coffee&#62; &#34;Shop&#34;</a>"
                )),
                "{html}"
            );
        }
    }

    fn card() -> PayerState {
        PayerState::Pay(ShownRequisite {
            method: PaymentMethod::CardTransfer,
            display: "2200 0000 0000 0011".into(),
            copy: "2200000000000011".into(),
            holder_name: "IVAN I.".into(),
            bank: Some("Bank".into()),
            qr_payload: None,
            deeplink: None,
        })
    }

    const TOKEN: &str = "AAAAAAAAAAAAAAAAAAAAAA";

    #[test]
    fn the_status_says_the_pages_state_and_whether_it_may_still_change() {
        let cases = [
            (card(), r#"{"status":"pay","phase":"open"}"#),
            (
                PayerState::Preparing,
                r#"{"status":"preparing","phase":"open"}"#,
            ),
            (
                PayerState::Checking,
                r#"{"status":"checking","phase":"waiting"}"#,
            ),
            (
                PayerState::Completed,
                r#"{"status":"completed","phase":"closed"}"#,
            ),
            (
                PayerState::Canceled,
                r#"{"status":"canceled","phase":"closed"}"#,
            ),
            (
                PayerState::Expired,
                r#"{"status":"expired","phase":"closed"}"#,
            ),
            (
                PayerState::Failed,
                r#"{"status":"failed","phase":"closed"}"#,
            ),
        ];
        for (state, json) in cases {
            let v = view(state, PageLanguage::En);
            let status = status_of(&v);
            assert_eq!(serde_json::to_string(&status).unwrap(), json);
            // The status is what the page shows: its <main data-state> and data-phase.
            let html = page(&v, TOKEN).render().unwrap();
            assert!(
                html.contains(&format!(
                    "data-state=\"{}\" data-phase=\"{}\" data-status=\"/pay/{TOKEN}/status\"",
                    status.status, status.phase
                )),
                "{html}"
            );
        }
        let r = status_response(&status_of(&view(PayerState::Completed, PageLanguage::En)));
        assert_eq!(r.headers()[header::CACHE_CONTROL], "no-store");
        assert_eq!(r.headers()[header::CONTENT_TYPE], "application/json");
    }

    #[test]
    fn no_page_refreshes_itself_and_an_open_one_has_a_refresh_link() {
        for language in PageLanguage::ALL {
            let t = texts(language);
            for state in [
                card(),
                PayerState::Preparing,
                PayerState::Checking,
                PayerState::Completed,
                PayerState::Canceled,
                PayerState::Expired,
                PayerState::Failed,
            ] {
                let open = !state.is_final();
                let html = page(&view(state, language), TOKEN).render().unwrap();
                assert!(!html.contains("http-equiv"), "{html}");
                let link = format!("href=\"/pay/{TOKEN}\">{}</a>", t.refresh);
                assert_eq!(html.contains(&link), open, "{html}");
                assert!(html.contains(r#"role="status" aria-live="polite""#));
                assert!(!html.contains("<script>"), "no inline script");
            }
        }
    }

    #[test]
    fn the_shop_is_named_as_text() {
        let html = page(&view(card(), PageLanguage::Ru), TOKEN)
            .render()
            .unwrap();
        assert!(
            html.contains("<strong id=\"shop\">Tea &#38; &#60;Coffee&#62; &#34;Shop&#34;</strong>"),
            "{html}"
        );
        assert!(!html.contains("<Coffee>"));
    }

    #[test]
    fn expiry_and_cancellation_read_differently() {
        for language in PageLanguage::ALL {
            let t = texts(language);
            assert_ne!(t.expired.0, t.canceled.0);
            assert_ne!(t.expired.1, t.canceled.1);
            let expired = page(&view(PayerState::Expired, language), TOKEN);
            let canceled = page(&view(PayerState::Canceled, language), TOKEN);
            assert_eq!(expired.heading, t.expired.0);
            assert_eq!(canceled.heading, t.canceled.0);
        }
        assert_eq!(EN.expired.0, "The time to pay has run out");
        assert_eq!(EN.canceled.0, "The payment was canceled");
    }

    #[test]
    fn links_are_under_pay() {
        let token = PageToken::parse("AAAAAAAAAAAAAAAAAAAAAA").expect("a token");
        assert_eq!(
            payer_page_url("https://pay.example/", &token),
            "https://pay.example/pay/AAAAAAAAAAAAAAAAAAAAAA"
        );
    }
}
