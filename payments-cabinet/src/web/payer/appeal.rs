//! The payer page's "I paid" (`POST /pay/{token}/appeal`): the form a closed page offers and
//! its handler. The core decides whether the page takes the form and with which reasons
//! ([`PayerPageDetail`]), what the payer sees of their appeal, and opens the appeal
//! ([`Appeals::open_payer_appeal`](payments_core::service::Appeals::open_payer_appeal));
//! this module renders the form, reads the multipart body and shows the answer in the page's
//! language.
//!
//! The order of the handler is the order of what it costs: the per-source limit first
//! (nothing looked up), then the link (a link of no payment is the page's `404`, and its body
//! is never read), then whether the page takes the form (an open payment, an appeal under
//! way, every appeal spent: the page with the reason), and only then the body, bounded (at
//! most [`MAX_RECEIPTS`] files of at most [`MAX_RECEIPT_BYTES`] each, [`APPEAL_BODY_MAX`] in
//! all, [`upload_timeout`]). Each receipt is checked by its content ([`Receipt::check`])
//! before anything is stored; a refused form answers the page again with the reason and what
//! was typed (never the files). A stored appeal answers `303` to the page, which then says
//! that it was received and where it is.

use std::time::Duration;

use axum::extract::multipart::{Field, Multipart, MultipartRejection};
use axum::extract::{Path, State};
use axum::http::header::{self, HeaderValue};
use axum::http::StatusCode;
use axum::response::Response;
use payments_core::amount::Amount;
use payments_core::appeal::{AppealReason, AppealState};
use payments_core::payer::{PageLanguage, PayerState};
use payments_core::ratelimit::RateDecision;
use payments_core::receipt::{Receipt, ReceiptError, ReceiptKind, MAX_RECEIPTS, MAX_RECEIPT_BYTES};
use payments_core::service::{AppealError, AppealOffer, AppealRequest, PayerPageDetail};
use payments_core::{ErrorCode, Timestamp};

use super::{missing, page, texts, with_policy, PayerNotice};
use crate::accounts::{source_of, Client};
use crate::web::page::{html, see_other};
use crate::web::state::CabinetState;

/// The largest "I paid" body (4.5 MiB): two receipts of [`MAX_RECEIPT_BYTES`] and the form's
/// few fields with room to spare; a larger one is refused (`413`) as it arrives. The route's
/// own limit: every other form of the cabinet stays at [`MAX_FORM_BYTES`](crate::web::MAX_FORM_BYTES).
pub const APPEAL_BODY_MAX: usize = 4 * 1024 * 1024 + 512 * 1024;

/// The most parts a form may have (its six fields, and room for a browser's extras).
const MAX_PARTS: usize = 16;
/// The longest text field, in bytes (the bank's name is at most 100 characters).
const MAX_TEXT_BYTES: usize = 1024;

/// How long the body may take to arrive: six times the cabinet's form timeout (60 s by
/// default), room for two receipts over a slow mobile connection.
pub fn upload_timeout(st: &CabinetState) -> Duration {
    st.body_timeout.saturating_mul(6)
}

/// The words of "I paid" in one language.
#[derive(Debug)]
pub(crate) struct AppealTexts {
    pub(crate) heading: &'static str,
    /// Above the form of a canceled or expired page.
    pub(crate) intro: &'static str,
    /// Above the form of a completed page.
    pub(crate) intro_completed: &'static str,
    pub(crate) reason: &'static str,
    pub(crate) paid_but_canceled: &'static str,
    pub(crate) paid_other_amount: &'static str,
    pub(crate) paid_twice: &'static str,
    pub(crate) amount: &'static str,
    pub(crate) amount_hint: &'static str,
    pub(crate) paid_at: &'static str,
    pub(crate) paid_at_hint: &'static str,
    pub(crate) bank: &'static str,
    pub(crate) receipt: &'static str,
    pub(crate) receipt_hint: &'static str,
    pub(crate) receipt2: &'static str,
    pub(crate) send: &'static str,
    pub(crate) received: &'static str,
    /// `open`, `under_review`, `accepted`, `rejected`, `expired`.
    pub(crate) states: [&'static str; 5],
    pub(crate) waiting: &'static str,
    pub(crate) full: &'static str,
    pub(crate) errors: &'static AppealErrors,
}

/// Why a form was refused, in one language.
#[derive(Debug)]
pub(crate) struct AppealErrors {
    pub(crate) heading: &'static str,
    pub(crate) still_open: &'static str,
    pub(crate) never_payable: &'static str,
    pub(crate) being_checked: &'static str,
    pub(crate) not_now: &'static str,
    pub(crate) active: &'static str,
    pub(crate) full: &'static str,
    pub(crate) reason: &'static str,
    pub(crate) amount: &'static str,
    pub(crate) paid_at: &'static str,
    pub(crate) bank: &'static str,
    pub(crate) receipt_needed: &'static str,
    pub(crate) too_many_files: &'static str,
    pub(crate) too_large: &'static str,
    pub(crate) malformed: &'static str,
    pub(crate) slow: &'static str,
    pub(crate) unavailable: &'static str,
    /// "Receipt" before its number.
    pub(crate) receipt: &'static str,
    pub(crate) receipt_empty: &'static str,
    pub(crate) receipt_too_large: &'static str,
    pub(crate) receipt_unknown: &'static str,
    pub(crate) receipt_mismatch: &'static str,
    pub(crate) receipt_malformed: &'static str,
    pub(crate) receipt_pixels: &'static str,
    pub(crate) receipt_other: &'static str,
}

pub(crate) const APPEAL_EN: AppealTexts = AppealTexts {
    heading: "I paid",
    intro: "Transferred the money, but the page does not show it? Send your bank's receipt: the transfer will be looked for, and the answer will appear on this page.",
    intro_completed: "Paid twice, or a different amount from the one counted? Send your bank's receipt: the transfer will be looked for, and the answer will appear on this page.",
    reason: "What happened",
    paid_but_canceled: "I paid, but the page says the payment is canceled or its time ran out",
    paid_other_amount: "I transferred a different amount",
    paid_twice: "I paid twice",
    amount: "Amount you transferred",
    amount_hint: "Required if you transferred a different amount. As on your receipt, for example 1500.50.",
    paid_at: "When you paid, in UTC (optional)",
    paid_at_hint: "UTC is Moscow time minus 3 hours: 15:05 in Moscow is 12:05 UTC.",
    bank: "Your bank (optional)",
    receipt: "Your bank's receipt",
    receipt_hint: "A PDF, PNG or JPEG file of at most 2 MiB.",
    receipt2: "A second receipt (optional)",
    send: "Send",
    received: "Your appeal was received",
    states: [
        "waiting to be checked",
        "being checked",
        "accepted: the transfer was found",
        "rejected: the transfer was not found",
        "not decided in time",
    ],
    waiting: "The answer will appear on this page.",
    full: "No more appeals about this payment can be sent from this page.",
    errors: &AppealErrors {
        heading: "Not sent",
        still_open: "This payment is still open: an appeal can be sent once it is closed.",
        never_payable: "No payment details were issued for this payment: there is nothing to appeal.",
        being_checked: "This payment is being checked already. The result will appear on this page.",
        not_now: "This payment cannot be appealed right now. Reload the page to see where it is.",
        active: "An appeal about this payment is being checked already. Wait for its answer.",
        full: "This payment takes no more appeals from this page.",
        reason: "Choose what happened.",
        amount: "Amount: write the amount you transferred as a number, for example 1500.50. It is required if you transferred a different amount.",
        paid_at: "When you paid: give a date and time, or leave it empty.",
        bank: "Your bank: at most 100 letters, digits and signs.",
        receipt_needed: "Attach your bank's receipt: a PDF, PNG or JPEG file.",
        too_many_files: "Attach at most 2 files.",
        too_large: "The files are too large: at most 2 MiB each.",
        malformed: "The form did not arrive whole. Send it again.",
        slow: "The files took too long to arrive. Send the form again, or smaller files.",
        unavailable: "The appeal cannot be received right now. Try again in a few minutes.",
        receipt: "Receipt",
        receipt_empty: "the file is empty.",
        receipt_too_large: "the file is larger than 2 MiB.",
        receipt_unknown: "the file is not a PDF, PNG or JPEG, whatever its name says.",
        receipt_mismatch: "the file's content is not of the type its name says.",
        receipt_malformed: "the file is damaged or cut short.",
        receipt_pixels: "the image is too large: at most 40 million pixels, 20,000 on a side.",
        receipt_other: "the file is not accepted as a receipt.",
    },
};

pub(crate) const APPEAL_RU: AppealTexts = AppealTexts {
    heading: "Я оплатил",
    intro: "Перевели деньги, а страница этого не показывает? Пришлите квитанцию вашего банка: перевод поищут, и ответ появится на этой странице.",
    intro_completed: "Оплатили дважды или не ту сумму, что засчитана? Пришлите квитанцию вашего банка: перевод поищут, и ответ появится на этой странице.",
    reason: "Что случилось",
    paid_but_canceled: "Я оплатил, а на странице платёж отменён или время истекло",
    paid_other_amount: "Я перевёл другую сумму",
    paid_twice: "Я оплатил дважды",
    amount: "Сумма, которую вы перевели",
    amount_hint: "Обязательно, если вы перевели другую сумму. Как в квитанции, например 1500.50.",
    paid_at: "Когда вы оплатили, по UTC (необязательно)",
    paid_at_hint: "UTC — это московское время минус 3 часа: 15:05 по Москве — это 12:05 UTC.",
    bank: "Ваш банк (необязательно)",
    receipt: "Квитанция вашего банка",
    receipt_hint: "Файл PDF, PNG или JPEG не больше 2 МиБ.",
    receipt2: "Вторая квитанция (необязательно)",
    send: "Отправить",
    received: "Ваше обращение получено",
    states: [
        "ждёт проверки",
        "проверяется",
        "принято: перевод найден",
        "отклонено: перевод не найден",
        "не рассмотрено вовремя",
    ],
    waiting: "Ответ появится на этой странице.",
    full: "Больше обращений по этому платежу с этой страницы отправить нельзя.",
    errors: &AppealErrors {
        heading: "Не отправлено",
        still_open: "Платёж ещё открыт: обращение можно отправить, когда он закроется.",
        never_payable: "По этому платежу не выдавались реквизиты: обжаловать нечего.",
        being_checked: "Этот платёж уже проверяется. Результат появится на этой странице.",
        not_now: "Сейчас этот платёж нельзя обжаловать. Обновите страницу, чтобы увидеть его состояние.",
        active: "Обращение по этому платежу уже проверяется. Дождитесь ответа.",
        full: "По этому платежу больше нельзя отправить обращение с этой страницы.",
        reason: "Выберите, что случилось.",
        amount: "Сумма: напишите переведённую сумму числом, например 1500.50. Она обязательна, если вы перевели другую сумму.",
        paid_at: "Когда вы оплатили: укажите дату и время или оставьте поле пустым.",
        bank: "Ваш банк: не больше 100 букв, цифр и знаков.",
        receipt_needed: "Приложите квитанцию банка: файл PDF, PNG или JPEG.",
        too_many_files: "Приложите не больше 2 файлов.",
        too_large: "Файлы слишком большие: не больше 2 МиБ каждый.",
        malformed: "Форма пришла не целиком. Отправьте её ещё раз.",
        slow: "Файлы шли слишком долго. Отправьте форму ещё раз или файлы поменьше.",
        unavailable: "Сейчас обращение не может быть принято. Попробуйте через несколько минут.",
        receipt: "Квитанция",
        receipt_empty: "файл пустой.",
        receipt_too_large: "файл больше 2 МиБ.",
        receipt_unknown: "это не PDF, PNG или JPEG, что бы ни говорило его имя.",
        receipt_mismatch: "содержимое файла не того типа, что указан в его имени.",
        receipt_malformed: "файл повреждён или обрезан.",
        receipt_pixels: "изображение слишком большое: не больше 40 миллионов точек и 20 000 по стороне.",
        receipt_other: "файл не принимается как квитанция.",
    },
};

/// One reason of the form.
#[derive(Debug)]
pub(crate) struct ReasonChoice {
    pub(crate) value: &'static str,
    pub(crate) label: &'static str,
    pub(crate) checked: bool,
}

/// What the payer typed (never the files), to show again with a refusal.
#[derive(Debug, Default, Clone)]
pub(crate) struct Typed {
    pub(crate) reason: String,
    pub(crate) claimed_amount: String,
    pub(crate) paid_at: String,
    pub(crate) payer_bank: String,
}

/// The form, when the page offers it.
#[derive(Debug)]
pub(crate) struct AppealForm {
    /// What the form is for, as fits the page.
    pub(crate) intro: &'static str,
    pub(crate) action: String,
    pub(crate) reasons: Vec<ReasonChoice>,
    pub(crate) typed: Typed,
    /// The field the refusal is about (its input gets `aria-invalid`), or empty.
    pub(crate) invalid: &'static str,
}

/// The page's "I paid" section.
#[derive(Debug)]
pub(crate) struct AppealBlock {
    /// "Your appeal was received: <state>", when the payer has sent one.
    pub(crate) received: Option<&'static str>,
    /// A note under it (the answer will appear here; no more appeals).
    pub(crate) note: Option<&'static str>,
    /// Why the form just sent was refused.
    pub(crate) error: Option<String>,
    pub(crate) form: Option<AppealForm>,
}

fn reason_label(t: &AppealTexts, reason: AppealReason) -> &'static str {
    match reason {
        AppealReason::PaidButCanceled => t.paid_but_canceled,
        AppealReason::PaidOtherAmount => t.paid_other_amount,
        _ => t.paid_twice,
    }
}

fn state_text(t: &AppealTexts, state: AppealState) -> &'static str {
    match state {
        AppealState::Open => t.states[0],
        AppealState::UnderReview => t.states[1],
        AppealState::Accepted => t.states[2],
        AppealState::Rejected => t.states[3],
        _ => t.states[4],
    }
}

/// The section of `detail`'s page (`None`: the page has nothing to say about appeals), with
/// a refusal and what was typed when a form was just refused.
pub(crate) fn appeal_block(
    detail: &PayerPageDetail,
    token: &str,
    refused: Option<(String, &'static str, Typed)>,
) -> Option<AppealBlock> {
    let t = texts(detail.view().language).appeal;
    let offer = detail.offer();
    let received = detail.appeal().map(|a| state_text(t, a.state));
    let note = match offer {
        AppealOffer::Waiting(_) => Some(t.waiting),
        AppealOffer::Full => Some(t.full),
        _ => None,
    };
    let (error, invalid, typed) = match refused {
        Some((message, field, typed)) => (Some(message), field, typed),
        None => (None, "", Typed::default()),
    };
    let reasons = offer.reasons();
    let intro = match detail.view().state {
        PayerState::Completed => t.intro_completed,
        _ => t.intro,
    };
    let form = (!reasons.is_empty()).then(|| AppealForm {
        intro,
        action: format!("/pay/{token}/appeal"),
        reasons: reasons
            .iter()
            .map(|r| ReasonChoice {
                value: r.as_str(),
                label: reason_label(t, *r),
                checked: typed.reason == r.as_str(),
            })
            .collect(),
        typed,
        invalid,
    });
    if received.is_none() && form.is_none() && error.is_none() {
        return None;
    }
    Some(AppealBlock {
        received,
        note,
        error,
        form,
    })
}

/// Why a form was refused: the core's answer, or the body's own bounds.
#[derive(Debug)]
pub(crate) enum Refusal {
    /// The core refused (or a field could not be read into the request).
    Appeal(AppealError),
    /// More than [`MAX_RECEIPTS`] files.
    TooManyFiles,
    /// The body is over [`APPEAL_BODY_MAX`].
    TooLarge,
    /// Not a whole multipart form (or a text field over its bound).
    Malformed,
    /// The body did not arrive within [`upload_timeout`].
    TooSlow,
}

impl Refusal {
    fn status(&self) -> StatusCode {
        match self {
            Refusal::Appeal(AppealError::Receipt {
                source: ReceiptError::TooLarge { .. },
                ..
            })
            | Refusal::TooManyFiles
            | Refusal::TooLarge => StatusCode::PAYLOAD_TOO_LARGE,
            Refusal::Malformed => StatusCode::BAD_REQUEST,
            Refusal::TooSlow => StatusCode::REQUEST_TIMEOUT,
            Refusal::Appeal(e) => match e.code() {
                ErrorCode::BadRequest | ErrorCode::ReceiptInvalid => {
                    StatusCode::UNPROCESSABLE_ENTITY
                }
                ErrorCode::InvalidTransition | ErrorCode::AppealLimitReached => {
                    StatusCode::CONFLICT
                }
                _ => StatusCode::SERVICE_UNAVAILABLE,
            },
        }
    }

    /// The field the refusal is about, for `aria-invalid`.
    fn field(&self) -> &'static str {
        match self {
            Refusal::Appeal(AppealError::Invalid { field, .. }) => match *field {
                "claimed_amount" | "paid_at" | "payer_bank" | "reason" => field,
                _ => "receipt",
            },
            Refusal::Appeal(AppealError::Receipt { .. }) | Refusal::TooManyFiles => "receipt",
            _ => "",
        }
    }

    /// What the payer reads, in the page's language; a payment that cannot be appealed is
    /// told why by the page's `offer`.
    fn message(&self, e: &AppealErrors, offer: AppealOffer) -> String {
        let said = match self {
            Refusal::TooManyFiles => e.too_many_files,
            Refusal::TooLarge => e.too_large,
            Refusal::Malformed => e.malformed,
            Refusal::TooSlow => e.slow,
            Refusal::Appeal(AppealError::Receipt { index, source }) => {
                return format!(
                    "{} {}: {}",
                    e.receipt,
                    index + 1,
                    receipt_message(e, source)
                );
            }
            Refusal::Appeal(a) => appeal_message(e, a, offer),
        };
        said.to_string()
    }
}

fn receipt_message(e: &AppealErrors, r: &ReceiptError) -> &'static str {
    match r {
        ReceiptError::Empty => e.receipt_empty,
        ReceiptError::TooLarge { .. } => e.receipt_too_large,
        ReceiptError::UnknownContent => e.receipt_unknown,
        ReceiptError::Mismatch { .. } => e.receipt_mismatch,
        ReceiptError::Malformed { .. } => e.receipt_malformed,
        ReceiptError::TooManyPixels { .. } => e.receipt_pixels,
        _ => e.receipt_other,
    }
}

fn appeal_message(e: &AppealErrors, a: &AppealError, offer: AppealOffer) -> &'static str {
    match a {
        AppealError::NotAppealable(_) => match offer {
            AppealOffer::StillOpen => e.still_open,
            AppealOffer::NeverPayable => e.never_payable,
            AppealOffer::BeingChecked => e.being_checked,
            // The payment changed since the page was read.
            _ => e.not_now,
        },
        AppealError::Active(_) => e.active,
        AppealError::Full(_) => e.full,
        AppealError::Invalid { field, .. } => match *field {
            "reason" => e.reason,
            "claimed_amount" => e.amount,
            "paid_at" => e.paid_at,
            "payer_bank" => e.bank,
            _ => e.receipt_needed,
        },
        other => {
            tracing::error!(error = %other, "payer page: an appeal could not be stored");
            e.unavailable
        }
    }
}

/// The page again with the refusal and what was typed; `unread` when the body was left
/// unread from where it was refused (its connection then goes).
fn refused(
    detail: &PayerPageDetail,
    token: &str,
    refusal: Refusal,
    typed: Typed,
    unread: bool,
) -> Response {
    let t = texts(detail.view().language);
    let message = refusal.message(t.appeal.errors, detail.offer());
    let mut page = page(detail.view(), token);
    page.appeal = appeal_block(detail, token, Some((message, refusal.field(), typed)));
    page.title_prefix = Some(t.appeal.errors.heading);
    let mut response = html(refusal.status(), &page);
    if unread {
        response
            .headers_mut()
            .insert(header::CONNECTION, HeaderValue::from_static("close"));
    }
    with_policy(response)
}

/// `POST /pay/{token}/appeal`: "I paid" (see the module's order of checks).
pub(crate) async fn appeal(
    State(st): State<CabinetState>,
    client: Client,
    Path(token): Path<String>,
    form: Result<Multipart, MultipartRejection>,
) -> Response {
    let now = st.cabinet.service().ports().clock.now();
    if let Some(source) = client.address.map(source_of) {
        if let RateDecision::Limited { retry_after } = st.payer_appeal_limits.acquire(&source, now)
        {
            return with_policy(too_many(retry_after));
        }
    }
    let payments = st.cabinet.service().payments();
    let detail = match payments.payer_page_detail(&token).await {
        Ok(detail) => detail,
        Err(e) => return with_policy(missing(e.into())),
    };
    if let Err(e) = detail.accepts() {
        if let Ok(form) = form {
            // Read to its end (bounded) so that the browser, still sending, shows the answer.
            let _ = tokio::time::timeout(upload_timeout(&st), drain(form)).await;
        }
        return refused(&detail, &token, Refusal::Appeal(e), Typed::default(), false);
    }
    let mut sent = Submitted::default();
    let read = match form {
        Ok(form) => tokio::time::timeout(upload_timeout(&st), sent.read(form))
            .await
            .unwrap_or(Err(Refusal::TooSlow)),
        Err(_) => Err(Refusal::Malformed),
    };
    if let Err(refusal) = read {
        return refused(&detail, &token, refusal, sent.typed, true);
    }
    let request = match sent.request() {
        Ok(request) => request,
        Err(e) => return refused(&detail, &token, Refusal::Appeal(e), sent.typed, false),
    };
    let appeals = st.cabinet.service().appeals();
    match appeals.open_payer_appeal(&detail, request).await {
        Ok(_) => with_policy(see_other(&format!("/pay/{token}#appeal"))),
        Err(e) => refused(&detail, &token, Refusal::Appeal(e), sent.typed, false),
    }
}

/// A file part: the type the browser declared (by the file's name) and its bytes.
#[derive(Debug)]
struct File {
    declared: Option<ReceiptKind>,
    bytes: Vec<u8>,
}

/// What a form sent.
#[derive(Debug, Default)]
struct Submitted {
    typed: Typed,
    files: Vec<File>,
}

impl Submitted {
    /// Reads the form's parts: the text fields (each at most [`MAX_TEXT_BYTES`]) and at most
    /// [`MAX_RECEIPTS`] files of at most [`MAX_RECEIPT_BYTES`] (`receipt`); an empty file
    /// input (no name, no bytes) is no file. A third file is refused before it is read, a
    /// file over the bound as soon as it passes it.
    async fn read(&mut self, mut form: Multipart) -> Result<(), Refusal> {
        let mut parts = 0;
        while let Some(mut field) = form.next_field().await.map_err(body_refusal)? {
            parts += 1;
            if parts > MAX_PARTS {
                return Err(Refusal::Malformed);
            }
            let name = field.name().unwrap_or_default().to_string();
            if name == "receipt" {
                let named = field.file_name().is_some_and(|n| !n.is_empty());
                if named && self.files.len() == MAX_RECEIPTS {
                    return Err(Refusal::TooManyFiles);
                }
                let declared = field
                    .content_type()
                    .and_then(ReceiptKind::from_content_type);
                let index = self.files.len();
                let bytes = read_at_most(&mut field, MAX_RECEIPT_BYTES)
                    .await?
                    .map_err(|size| receipt_too_large(index, size))?;
                if named || !bytes.is_empty() {
                    self.files.push(File { declared, bytes });
                }
                continue;
            }
            let bytes = read_at_most(&mut field, MAX_TEXT_BYTES)
                .await?
                .map_err(|_| Refusal::Malformed)?;
            let text = String::from_utf8(bytes).map_err(|_| Refusal::Malformed)?;
            match name.as_str() {
                "reason" => self.typed.reason = text,
                "claimed_amount" => self.typed.claimed_amount = text,
                "paid_at" => self.typed.paid_at = text,
                "payer_bank" => self.typed.payer_bank = text,
                _ => {}
            }
        }
        Ok(())
    }

    /// The core's request of what was sent: each receipt checked by its content, the amount
    /// and the time read from the form's text.
    fn request(&mut self) -> Result<AppealRequest, AppealError> {
        let mut receipts = Vec::with_capacity(self.files.len());
        for (index, file) in std::mem::take(&mut self.files).into_iter().enumerate() {
            let receipt = Receipt::check(file.declared, file.bytes)
                .map_err(|source| AppealError::Receipt { index, source })?;
            receipts.push(receipt);
        }
        let typed = &self.typed;
        let reason = if typed.reason.is_empty() {
            return Err(invalid("reason", "choose one"));
        } else {
            typed.reason.as_str()
        };
        let paid_at = form_time(&typed.paid_at);
        AppealRequest::new(
            None,
            reason,
            form_amount(&typed.claimed_amount)?,
            paid_at.as_deref(),
            Some(typed.payer_bank.trim().to_string()),
            receipts,
        )
    }
}

fn invalid(field: &'static str, why: &str) -> AppealError {
    AppealError::Invalid {
        field,
        why: why.to_string(),
    }
}

fn receipt_too_large(index: usize, size: usize) -> Refusal {
    Refusal::Appeal(AppealError::Receipt {
        index,
        source: ReceiptError::TooLarge { size },
    })
}

/// An amount as a payer writes it: spaces between thousands and a decimal comma are taken
/// (`1 500,50` is `1500.50`); empty is none.
fn form_amount(text: &str) -> Result<Option<Amount>, AppealError> {
    let cleaned: String = text
        .chars()
        .filter(|c| !c.is_whitespace() && *c != '\u{202f}')
        .map(|c| if c == ',' { '.' } else { c })
        .collect();
    if cleaned.is_empty() {
        return Ok(None);
    }
    Amount::parse(&cleaned)
        .map(Some)
        .map_err(|e| invalid("claimed_amount", &e.to_string()))
}

/// A `datetime-local` value (`2026-10-01T12:05`, seconds optional) read as UTC, as the form
/// says, in RFC 3339; a value that is RFC 3339 already is kept; empty is none.
fn form_time(text: &str) -> Option<String> {
    let text = text.trim().replacen(' ', "T", 1);
    if text.is_empty() {
        return None;
    }
    if Timestamp::parse_rfc3339(&text).is_some() {
        return Some(text);
    }
    Some(match text.len() {
        16 => format!("{text}:00Z"),
        _ => format!("{text}Z"),
    })
}

/// A field's bytes, at most `most`: `Ok(Err(size))` once it passes them (what was read so
/// far, more than `most`), without reading the rest.
async fn read_at_most(
    field: &mut Field<'_>,
    most: usize,
) -> Result<Result<Vec<u8>, usize>, Refusal> {
    let mut bytes = Vec::new();
    while let Some(chunk) = field.chunk().await.map_err(body_refusal)? {
        if bytes.len() + chunk.len() > most {
            return Ok(Err(bytes.len() + chunk.len()));
        }
        bytes.extend_from_slice(&chunk);
    }
    Ok(Ok(bytes))
}

/// Reads a form to its end, keeping nothing.
async fn drain(mut form: Multipart) {
    while let Ok(Some(mut field)) = form.next_field().await {
        while let Ok(Some(_)) = field.chunk().await {}
    }
}

fn body_refusal(e: axum::extract::multipart::MultipartError) -> Refusal {
    if e.status() == StatusCode::PAYLOAD_TOO_LARGE {
        Refusal::TooLarge
    } else {
        Refusal::Malformed
    }
}

/// `429` in both languages (the link is not looked up, so its language is not known), with
/// `Retry-After`.
fn too_many(retry_after: Duration) -> Response {
    let secs = payments_core::ratelimit::retry_after_secs(retry_after);
    let ru = texts(PageLanguage::Ru);
    let en = texts(PageLanguage::En);
    let page = PayerNotice {
        ru: ru.too_many,
        en: en.too_many,
    };
    let mut response = html(StatusCode::TOO_MANY_REQUESTS, &page);
    response
        .headers_mut()
        .insert(header::RETRY_AFTER, HeaderValue::from(secs));
    response
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn amounts_and_times_are_read_as_a_payer_writes_them() {
        assert_eq!(form_amount("").unwrap(), None);
        assert_eq!(
            form_amount(" 1 500,50 ").unwrap(),
            Some(Amount::parse("1500.50").unwrap())
        );
        assert!(form_amount("15OO").is_err());
        assert_eq!(form_time(""), None);
        assert_eq!(
            form_time("2026-10-01T12:05").as_deref(),
            Some("2026-10-01T12:05:00Z")
        );
        assert_eq!(
            form_time("2026-10-01T12:05:30").as_deref(),
            Some("2026-10-01T12:05:30Z")
        );
        assert_eq!(
            form_time("2026-10-01T15:05:00+03:00").as_deref(),
            Some("2026-10-01T15:05:00+03:00")
        );
    }

    #[test]
    fn every_language_has_every_state_and_reason() {
        for t in [&APPEAL_EN, &APPEAL_RU] {
            for s in AppealState::ALL {
                assert!(!state_text(t, *s).is_empty());
            }
            for r in AppealReason::ALL {
                assert!(!reason_label(t, *r).is_empty());
            }
        }
        assert_ne!(APPEAL_EN.states, APPEAL_RU.states);
    }
}
