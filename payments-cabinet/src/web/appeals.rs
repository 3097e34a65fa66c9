//! Appeals from the payment card: a merchant's user opens one about a closed payment with its
//! receipts (`POST /payments/{id}/appeals`, a multipart form) and downloads the receipts of
//! the project's appeals (`GET /appeals/{id}/receipts/{index}`; support too). The core decides
//! ([`Appeals::open_appeal_for`](payments_core::service::Appeals::open_appeal_for) with
//! [`AppealSource::Merchant`]); this module carries the form there and the answer back.
//!
//! The upload is bounded before the core sees it: at most [`MAX_RECEIPTS`] files of
//! [`MAX_RECEIPT_BYTES`] each, a body of at most [`MAX_APPEAL_FORM_BYTES`] (the route's
//! `DefaultBodyLimit`), read within [`UPLOAD_TIME`] times the cabinet's body timeout, and at
//! most [`UPLOAD_SLOTS`] uploads read at once by the process (another is refused at once,
//! `503`), so uploads never hold more than `UPLOAD_SLOTS` x `MAX_APPEAL_FORM_BYTES` bytes.

use crate::accounts::Permission;
use axum::extract::{FromRequest, Multipart, Path, Request, State};
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use payments_core::amount::Amount;
use payments_core::appeal::{self, Appeal, AppealSource, IDEMPOTENCY_KEY_MAX_LEN};
use payments_core::ids::AppealId;
use payments_core::payment::Payment;
use payments_core::receipt::{Receipt, ReceiptError, ReceiptKind, MAX_RECEIPTS, MAX_RECEIPT_BYTES};
use payments_core::service::{AppealError, AppealRequest};
use tokio::sync::Semaphore;

use super::appeal_view;
use super::extract::Signed;
use super::i18n::{tr, trf};
use super::once::{self, Flash};
use super::page::{error_page, see_other, PageError, PageResult};
use super::payments::{card_name, visible_payment};
use super::projects::visible_project;
use super::state::CabinetState;
use crate::accounts::Client;

/// The largest body of the "Open an appeal" form: two receipts and 64 KiB for the form's
/// fields and the parts' headers (the cabinet's other forms are limited to those 64 KiB).
pub const MAX_APPEAL_FORM_BYTES: usize = MAX_RECEIPTS * MAX_RECEIPT_BYTES + 64 * 1024;

/// How many appeal forms the process reads at once.
pub const UPLOAD_SLOTS: usize = 4;

/// An upload may take this many times the cabinet's body timeout (10 s: a minute for 4 MiB).
pub const UPLOAD_TIME: u32 = 6;

/// The longest text field of the form, in bytes (the payer's bank is 100 characters).
const MAX_TEXT_FIELD: usize = 1024;

/// The most parts the form may have (its fields and two files, with room to spare).
const MAX_PARTS: usize = 16;

static UPLOADS: Semaphore = Semaphore::const_new(UPLOAD_SLOTS);

/// Why the form's body was not read.
#[derive(Debug, thiserror::Error)]
pub(crate) enum UploadError {
    /// Not `multipart/form-data`, or malformed.
    #[error("the form is not a file upload: {0}")]
    Malformed(String),
    /// More files than an appeal takes.
    #[error("more than {MAX_RECEIPTS} receipts")]
    TooManyFiles,
    /// A file over [`MAX_RECEIPT_BYTES`] (its number, from 1), or the body over its limit.
    #[error("receipt {0} is larger than the limit")]
    TooLarge(usize),
    /// A text field over [`MAX_TEXT_FIELD`], or too many parts.
    #[error("the form has a field that is too long, or too many fields")]
    TooLong,
    /// Every upload slot is taken.
    #[error("too many uploads at once")]
    Busy,
    /// The body did not arrive in time.
    #[error("the form did not arrive in time")]
    Timeout,
}

/// What the form sent: its text fields and its receipts (declared kind, bytes).
#[derive(Debug, Default)]
struct Upload {
    fields: Vec<(String, String)>,
    receipts: Vec<(Option<ReceiptKind>, Vec<u8>)>,
}

impl Upload {
    /// The first value of `name`, or empty.
    fn get(&self, name: &str) -> &str {
        self.fields
            .iter()
            .find(|(n, _)| n == name)
            .map_or("", |(_, v)| v.as_str())
    }
}

/// Reads the form within its bounds.
async fn receive(st: &CabinetState, request: Request) -> Result<Upload, UploadError> {
    let _slot = UPLOADS.try_acquire().map_err(|_| UploadError::Busy)?;
    let form = Multipart::from_request(request, st)
        .await
        .map_err(|e| UploadError::Malformed(e.body_text()))?;
    let limit = st.body_timeout * UPLOAD_TIME;
    tokio::time::timeout(limit, read_parts(form))
        .await
        .map_err(|_| UploadError::Timeout)?
}

async fn read_parts(mut form: Multipart) -> Result<Upload, UploadError> {
    let mut upload = Upload::default();
    let mut parts = 0;
    while let Some(mut field) = form.next_field().await.map_err(multipart_error)? {
        parts += 1;
        if parts > MAX_PARTS {
            return Err(UploadError::TooLong);
        }
        let name = field.name().unwrap_or_default().to_string();
        if name == "receipt" {
            let number = upload.receipts.len() + 1;
            let declared = field
                .content_type()
                .and_then(ReceiptKind::from_content_type);
            let bytes = read_field(&mut field, MAX_RECEIPT_BYTES)
                .await?
                .ok_or(UploadError::TooLarge(number))?;
            // A file input left empty sends an empty part.
            if bytes.is_empty() {
                continue;
            }
            if upload.receipts.len() == MAX_RECEIPTS {
                return Err(UploadError::TooManyFiles);
            }
            upload.receipts.push((declared, bytes));
        } else {
            let bytes = read_field(&mut field, MAX_TEXT_FIELD)
                .await?
                .ok_or(UploadError::TooLong)?;
            let text = String::from_utf8_lossy(&bytes).into_owned();
            upload.fields.push((name, text));
        }
    }
    Ok(upload)
}

/// A part's bytes, `None` once over `limit` (the rest is not read).
async fn read_field(
    field: &mut axum::extract::multipart::Field<'_>,
    limit: usize,
) -> Result<Option<Vec<u8>>, UploadError> {
    let mut bytes = Vec::new();
    while let Some(chunk) = field.chunk().await.map_err(multipart_error)? {
        if bytes.len() + chunk.len() > limit {
            return Ok(None);
        }
        bytes.extend_from_slice(&chunk);
    }
    Ok(Some(bytes))
}

fn multipart_error(e: axum::extract::multipart::MultipartError) -> UploadError {
    if e.status() == StatusCode::PAYLOAD_TOO_LARGE {
        UploadError::TooLarge(MAX_RECEIPTS)
    } else {
        UploadError::Malformed(e.body_text())
    }
}

/// Why the cabinet refuses the form before asking the core.
#[derive(Debug, thiserror::Error)]
pub(crate) enum AppealFormError {
    /// The claimed amount does not read as an amount.
    #[error("claimed_amount: not an amount")]
    Amount,
    /// No receipt attached.
    #[error("no receipt")]
    NoReceipt,
    /// The idempotency key of the form is not one the cabinet wrote.
    #[error("idempotency_key: not the form's")]
    Key,
    /// The core refused it.
    #[error(transparent)]
    Appeal(#[from] AppealError),
}

/// `2026-10-01T10:00` (an `<input type="datetime-local">`, read as UTC) as RFC 3339; any
/// other text as it is (for the core to check).
fn utc(local: &str) -> String {
    let s = local.trim();
    match s.len() {
        16 if s.as_bytes()[10] == b'T' => format!("{s}:00Z"),
        19 if s.as_bytes()[10] == b'T' => format!("{s}Z"),
        _ => s.to_string(),
    }
}

/// The core's appeal request of the form, its receipts checked by their content.
fn appeal_request(upload: Upload) -> Result<AppealRequest, AppealFormError> {
    let key = upload.get("idempotency_key").to_string();
    if key.is_empty()
        || key.len() > IDEMPOTENCY_KEY_MAX_LEN
        || !key.bytes().all(|b| b.is_ascii_graphic())
    {
        return Err(AppealFormError::Key);
    }
    let claimed = match upload.get("claimed_amount").trim() {
        "" => None,
        s => Some(Amount::parse(s).map_err(|_| AppealFormError::Amount)?),
    };
    let paid_at = Some(utc(upload.get("paid_at"))).filter(|s| !s.is_empty());
    let bank = Some(upload.get("payer_bank").trim().to_string()).filter(|b| !b.is_empty());
    let reason = upload.get("reason").to_string();
    if upload.receipts.is_empty() {
        return Err(AppealFormError::NoReceipt);
    }
    let mut receipts = Vec::with_capacity(upload.receipts.len());
    for (index, (declared, bytes)) in upload.receipts.into_iter().enumerate() {
        let checked = Receipt::check(declared, bytes)
            .map_err(|source| AppealError::Receipt { index, source })?;
        receipts.push(checked);
    }
    let request = AppealRequest::new(
        Some(key),
        &reason,
        claimed,
        paid_at.as_deref(),
        bank,
        receipts,
    )?;
    Ok(request)
}

/// A receipt's refusal in words.
fn receipt_refusal(e: &ReceiptError) -> String {
    match e {
        ReceiptError::Empty => tr("The file is empty.").into(),
        ReceiptError::TooLarge { .. } => tr("The file is larger than 2 MiB.").into(),
        ReceiptError::UnknownContent => {
            tr("The file is not a PDF, PNG or JPEG file (its content was checked, not its name).")
                .into()
        }
        ReceiptError::Mismatch { declared, found } => trf(
            "The file's content is {found}, not the {declared} its name says.",
            &[
                ("found", &found.as_str().to_ascii_uppercase()),
                ("declared", &declared.as_str().to_ascii_uppercase()),
            ],
        ),
        ReceiptError::Malformed { kind, why } => trf(
            "The file is not a well-formed {kind}: {why}.",
            &[("kind", &kind.as_str().to_ascii_uppercase()), ("why", why)],
        ),
        ReceiptError::TooManyPixels { width, height } => trf(
            "The image is {width} x {height} pixels: at most 40 million pixels are accepted.",
            &[("width", width), ("height", height)],
        ),
        other => other.to_string(),
    }
}

/// The form field an error of the core's is about, and its name on the form.
fn field_of(field: &str) -> (&'static str, &'static str) {
    match field {
        "claimed_amount" => ("appeal-claimed", tr("Claimed amount")),
        "paid_at" => ("appeal-paid-at", tr("Paid at")),
        "payer_bank" => ("appeal-bank", tr("Payer's bank")),
        _ => ("appeal-reason", tr("Reason")),
    }
}

/// A refused form: the field its error is shown beside, the status and the message.
fn refusal(e: &AppealFormError) -> (String, StatusCode, String) {
    let unprocessable = StatusCode::UNPROCESSABLE_ENTITY;
    let whole = |status, message: String| ("appeals".to_string(), status, message);
    match e {
        AppealFormError::Amount => (
            "appeal-claimed".into(),
            unprocessable,
            tr("Write the amount as a number, such as 1500 or 1500.50.").into(),
        ),
        AppealFormError::NoReceipt => (
            "appeal-receipt-1".into(),
            unprocessable,
            tr("Attach the receipt of the transfer (PDF, PNG or JPEG).").into(),
        ),
        AppealFormError::Key => whole(
            StatusCode::BAD_REQUEST,
            tr("The form is out of date. Reload the page and send it again.").into(),
        ),
        AppealFormError::Appeal(e) => appeal_refusal(e),
    }
}

/// A refusal of the core's, in words where the cabinet has them (else the core's English).
fn appeal_refusal(e: &AppealError) -> (String, StatusCode, String) {
    let conflict = |m: String| ("appeals".to_string(), StatusCode::CONFLICT, m);
    match e {
        AppealError::Receipt { index, source } => (
            format!("appeal-receipt-{}", index + 1),
            StatusCode::UNPROCESSABLE_ENTITY,
            receipt_refusal(source),
        ),
        AppealError::Invalid { field, why } => {
            let (id, name) = field_of(field);
            // The core's reason stays English, after the field's name.
            let message = format!("{name}: {why}");
            (id.into(), StatusCode::UNPROCESSABLE_ENTITY, message)
        }
        AppealError::NotAppealable(why) => conflict(trf(
            "This payment cannot be appealed: {why}.",
            &[("why", why)],
        )),
        AppealError::Active(_) => conflict(
            tr("The payment has an appeal under way; a new one can be opened once it is decided.")
                .into(),
        ),
        AppealError::Full(n) => conflict(trf(
            "The payment has taken {count} appeals from the merchant; no more are accepted.",
            &[("count", n)],
        )),
        AppealError::IdempotencyConflict { .. } => conflict(
            tr("This form was already sent with other values. Reload the page and send it again.")
                .into(),
        ),
        AppealError::Contended | AppealError::Store(_) => (
            "appeals".into(),
            StatusCode::SERVICE_UNAVAILABLE,
            tr("The service cannot answer now. Try again in a moment.").into(),
        ),
        other => conflict(other.to_string()),
    }
}

/// An upload that was not read, in words.
fn upload_refusal(e: &UploadError) -> (String, StatusCode, String) {
    match e {
        UploadError::TooLarge(n) => (
            format!("appeal-receipt-{n}"),
            StatusCode::PAYLOAD_TOO_LARGE,
            tr("The file is larger than 2 MiB.").into(),
        ),
        UploadError::TooManyFiles => (
            "appeal-receipt-1".into(),
            StatusCode::UNPROCESSABLE_ENTITY,
            tr("Attach at most two receipts.").into(),
        ),
        UploadError::Busy => (
            "appeals".into(),
            StatusCode::SERVICE_UNAVAILABLE,
            tr("Too many receipts are being uploaded at once. Try again in a moment.").into(),
        ),
        UploadError::Timeout => (
            "appeals".into(),
            StatusCode::REQUEST_TIMEOUT,
            tr("The form did not arrive in time.").into(),
        ),
        UploadError::Malformed(_) | UploadError::TooLong => (
            "appeals".into(),
            StatusCode::BAD_REQUEST,
            tr("The form could not be read. Reload the page and send it again.").into(),
        ),
    }
}

/// `POST /payments/{id}/appeals`: a merchant's user opens an appeal about the payment (the
/// form's idempotency key makes a second submit answer the first appeal), then back to the
/// card; a refusal is shown on the card once, beside its field, with what was typed.
pub(crate) async fn open(
    State(st): State<CabinetState>,
    signed: Signed,
    client: Client,
    Path(id): Path<String>,
    request: Request,
) -> PageResult {
    let (payment, project) =
        visible_payment(&st, &signed.current, &id, Permission::Appeals).await?;
    // Support decides appeals; it does not open them for the merchant.
    if signed.current.is_support() {
        return Err(PageError::NotFound.render(&st));
    }
    let upload = match receive(&st, request).await {
        Ok(upload) => upload,
        Err(e) => return Ok(refuse(&st, &signed, &payment, upload_refusal(&e), None).await),
    };
    let typed: Vec<(String, String)> = ["reason", "claimed_amount", "paid_at", "payer_bank"]
        .iter()
        .map(|f| (f.to_string(), upload.get(f).to_string()))
        .collect();
    let opened = match appeal_request(upload) {
        Ok(request) => st
            .cabinet
            .service()
            .appeals()
            .open_appeal_for(&payment, AppealSource::Merchant, request)
            .await
            .map_err(AppealFormError::from),
        Err(e) => Err(e),
    };
    match opened {
        Ok((appeal, created)) => {
            if created {
                let (current, action) = (&signed.current, "appeal.open");
                appeal_view::audit(&st, current, &client, &project, action, &appeal).await?;
            }
            Ok(see_other(&format!(
                "/payments/{}?done=appealed#appeals",
                payment.id
            )))
        }
        Err(e) => Ok(refuse(&st, &signed, &payment, refusal(&e), Some(typed)).await),
    }
}

/// Back to the card with the refusal, once, and what was typed (never the files).
async fn refuse(
    st: &CabinetState,
    signed: &Signed,
    payment: &Payment,
    (field, status, message): (String, StatusCode, String),
    typed: Option<Vec<(String, String)>>,
) -> Response {
    let mut flash = Flash::new(card_name(payment), status).error(&field, message);
    for (name, value) in typed.unwrap_or_default() {
        flash = flash.input(&name, value);
    }
    once::refuse(
        st,
        signed.current.session.id,
        &format!("/payments/{}", payment.id),
        "appeals",
        flash,
    )
    .await
}

/// `GET /appeals/{id}/receipts/{index}`: a receipt of an appeal of a project the user may
/// see, as a download ([`receipt_response`]); anything else is "not found".
pub(crate) async fn receipt(
    State(st): State<CabinetState>,
    signed: Signed,
    Path((id, index)): Path<(String, String)>,
) -> PageResult {
    let not_found = || PageError::NotFound.render(&st);
    let id: AppealId = id.parse().map_err(|_| not_found())?;
    let index = index
        .parse::<u8>()
        .ok()
        .filter(|i| usize::from(*i) < MAX_RECEIPTS)
        .ok_or_else(not_found)?;
    let appeals = st.cabinet.service().appeals();
    let appeal = appeals
        .appeal_any(id)
        .await
        .map_err(|e| error_page(e, &st))?;
    visible_project(
        &st,
        &signed.current,
        &appeal.project_id.to_string(),
        Permission::Payments,
    )
    .await
    .map_err(|_| not_found())?;
    let r = appeals
        .appeal_receipt(&appeal, index)
        .await
        .map_err(|e| error_page(e, &st))?;
    Ok(receipt_response(&appeal, r))
}

/// A receipt's bytes with the headers of every receipt download, the merchant API's too
/// ([`appeal::receipt_download_headers`]): an attachment, not sniffed, sandboxed, not cached.
pub(crate) fn receipt_response(a: &Appeal, r: Receipt) -> Response {
    let headers = appeal::receipt_download_headers(a.id, r.kind());
    let download = headers
        .into_iter()
        .fold(Response::builder(), |b, (name, value)| {
            b.header(name, value)
        });
    match download.body(axum::body::Body::from(r.into_bytes())) {
        Ok(response) => response,
        Err(e) => {
            tracing::error!(error = %e, "cabinet: a receipt's headers do not read");
            StatusCode::INTERNAL_SERVER_ERROR.into_response()
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_local_time_reads_as_utc() {
        assert_eq!(utc("2026-10-01T10:00"), "2026-10-01T10:00:00Z");
        assert_eq!(utc(" 2026-10-01T10:00:30 "), "2026-10-01T10:00:30Z");
        assert_eq!(
            utc("2026-10-01T10:00:00+03:00"),
            "2026-10-01T10:00:00+03:00"
        );
        assert_eq!(utc(""), "");
    }
}
