//! Payments (a project's list, the payment card with its events and attempts, the sandbox's
//! Paid / Canceled buttons, support's operations) and callback deliveries. Every change is
//! the core's operation: the test helpers' `test_outcome` for the buttons, `operate` for
//! support.

use axum::extract::{Path, Query, State};
use axum::http::{header, HeaderMap, StatusCode};
use axum::response::Response;
use payments_core::amount::Amount;
use payments_core::event::{DeliveryState, EventRecord};
use payments_core::ids::{EventId, PaymentId};
use payments_core::payment::{MerchantPaymentId, Payment, PaymentStatus};
use payments_core::project::Project;
use payments_core::store::{EventQuery, PaymentQuery};
use payments_core::transition::{RecheckOutcome, Trigger};
use payments_core::Timestamp;

use super::export;
use super::i18n::{tr, trf};
use super::once::{self, Flash};
use super::projects::{project_view, visible_project};
use super::views::{
    status_text, when, AttemptRow, Card, CardField, CardPayment, Choice, Chrome, Confirm,
    Deliveries, EventView, Link, PaymentRow, Payments,
};
use super::{html, ok, see_other, CabinetState, FormData, PageError, PageResult, Signed};
use crate::accounts::{Change, Client, Current};
use crate::store::Role;
use askama::Template;
use payments_core::service::{PaymentCursor, PaymentListQuery, SearchTerm};
use payments_core::store::MerchantStoreExt;

/// Rows per page of the lists.
pub const PAGE_SIZE: usize = 50;

/// A date of a filter (`YYYY-MM-DD`, UTC midnight); `None` when empty or malformed.
fn date(s: &str) -> Option<Timestamp> {
    let s = s.trim();
    if s.len() != 10 {
        return None;
    }
    Timestamp::parse_rfc3339(&format!("{s}T00:00:00Z"))
}

const DAY: std::time::Duration = std::time::Duration::from_secs(86_400);

/// The filters of the payments list, as given in the query.
#[derive(Debug, Default, serde::Deserialize)]
pub(crate) struct PaymentFilters {
    #[serde(default)]
    status: String,
    #[serde(default)]
    from: String,
    #[serde(default)]
    to: String,
    #[serde(default)]
    merchant_payment_id: String,
    #[serde(default)]
    before: String,
}

impl PaymentFilters {
    /// The store query of these filters for `project` (a page of `limit` payments).
    fn query(&self, project: &Project, limit: usize) -> PaymentQuery {
        PaymentQuery {
            status: self.status.parse().ok(),
            created_from: date(&self.from),
            created_to: date(&self.to).map(|t| t + DAY),
            merchant_payment_id: MerchantPaymentId::parse(self.merchant_payment_id.trim()),
            before: cursor::<PaymentId>(&self.before),
            ..PaymentQuery::new(project.id, limit)
        }
    }

    /// The query string of the filters (the page cursor aside).
    fn query_string(&self) -> String {
        format!(
            "status={}&from={}&to={}&merchant_payment_id={}",
            encode(&self.status),
            encode(&self.from),
            encode(&self.to),
            encode(&self.merchant_payment_id),
        )
    }
}

/// A page cursor: `<unix millis>_<id>`.
pub(crate) fn cursor<T: std::str::FromStr>(s: &str) -> Option<(Timestamp, T)> {
    let (t, id) = s.split_once('_')?;
    Some((
        Timestamp::from_unix_millis(t.parse().ok()?),
        id.parse().ok()?,
    ))
}

pub(crate) fn encode(s: &str) -> String {
    url::form_urlencoded::byte_serialize(s.as_bytes()).collect()
}

pub(crate) async fn list(
    State(st): State<CabinetState>,
    signed: Signed,
    Path(id): Path<String>,
    Query(f): Query<PaymentFilters>,
) -> PageResult {
    let (project, merchant) = visible_project(&st, &signed.current, &id).await?;
    let status: Option<PaymentStatus> = f.status.parse().ok();
    let query = f.query(&project, PAGE_SIZE + 1);
    let mut found = st
        .cabinet
        .service()
        .payments()
        .payments_page(&query)
        .await
        .map_err(|e| PageError::from(e).render(&st))?;
    let more = found.len() > PAGE_SIZE;
    found.truncate(PAGE_SIZE);
    let next = more.then(|| {
        let last = found.last().expect("a full page has a last row");
        format!(
            "/projects/{}/payments?{}&before={}_{}",
            project.id,
            f.query_string(),
            last.created_at.unix_millis(),
            last.id
        )
    });
    let rows = found
        .iter()
        .map(|p| {
            let (created, created_text) = when(p.created_at);
            PaymentRow {
                id: p.id.to_string(),
                created,
                created_text,
                merchant_payment_id: p.merchant_payment_id.as_str().to_string(),
                amount: p.amount.to_string(),
                currency: p.currency.as_str().to_string(),
                method: p.payment_method.as_str().to_string(),
                status: p.status.as_str().to_string(),
                test: p.is_test(),
            }
        })
        .collect();
    Ok(ok(&Payments {
        chrome: st
            .chrome(
                trf("{project}: payments", &[("project", &project.name)]),
                Some(&signed.current),
            )
            .section("projects")
            .crumbs(vec![Link::new("/projects", tr("Projects and API"))]),
        tab: "payments",
        project: project_view(&project, &merchant),
        statuses: PaymentStatus::ALL
            .iter()
            .map(|s| Choice {
                value: s.as_str(),
                selected: Some(*s) == status,
            })
            .collect(),
        from: f.from.clone(),
        to: f.to.clone(),
        merchant_payment_id: f.merchant_payment_id.clone(),
        csv: format!("/projects/{}/payments.csv?{}", project.id, f.query_string()),
        payments: rows,
        next,
    }))
}

/// `GET /projects/{id}/payments.csv` with the list's filters (`status`, `from`, `to`,
/// `merchant_payment_id`): every matching payment, newest first, streamed
/// ([`export::payments_csv`]).
pub(crate) async fn payments_csv(
    State(st): State<CabinetState>,
    signed: Signed,
    Path(id): Path<String>,
    Query(f): Query<PaymentFilters>,
) -> PageResult {
    let (project, _) = visible_project(&st, &signed.current, &id).await?;
    let query = f.query(&project, export::EXPORT_PAGE);
    // The export reads the whole filtered list: one of the project's list places, held
    // until the stream is dropped (sent or abandoned), as every list read takes one.
    let place = st
        .cabinet
        .service()
        .scan_place(project.id)
        .await
        .map_err(|e| PageError::from(e).render(&st))?;
    let stream = futures_util::StreamExt::map(
        export::payments_csv(st.cabinet.service().store().clone(), query),
        move |chunk| {
            let _held = &place;
            chunk
        },
    );
    export::download(&format!("payments-{}.csv", project.id), stream)
        .await
        .map_err(|e| {
            tracing::error!(error = %e, "cabinet: the payments export failed");
            PageError::Unavailable(
                tr("The service cannot answer now. Try again in a moment.").into(),
            )
            .render(&st)
        })
}

/// A payment the user may see (through its project), or "not found".
async fn visible_payment(
    st: &CabinetState,
    current: &Current,
    id: &str,
) -> Result<(Payment, Project), Response> {
    let not_found = || PageError::NotFound.render(st);
    let pid: PaymentId = id.parse().map_err(|_| not_found())?;
    let payment = st
        .cabinet
        .service()
        .store()
        .payment(pid)
        .await
        .map_err(|e| PageError::from(e).render(st))?
        .ok_or_else(not_found)?;
    let (project, _) = visible_project(st, current, &payment.project_id.to_string())
        .await
        .map_err(|_| not_found())?;
    Ok((payment, project))
}

/// Every field of the payment resource in the resource's order, nested objects flattened
/// (`merchant_information.rate`).
fn card_fields(p: &Payment) -> Vec<CardField> {
    let text = serde_json::to_string(&p.view()).unwrap_or_default();
    let mut flat = Vec::new();
    if let Ok(Ordered(members)) = serde_json::from_str::<Ordered>(&text) {
        flatten("", members, &mut flat);
    }
    let mut fields: Vec<CardField> = flat
        .into_iter()
        .map(|(name, value)| {
            let code = name.ends_with("id") || name.ends_with("_url") || name.ends_with("link");
            // A time of the resource reads in the cabinet's one format.
            let value = if name.ends_with("_at") {
                super::views::when_in_text(&value)
            } else {
                value
            };
            CardField {
                label: field_label(&name),
                name,
                value,
                code,
            }
        })
        .collect();
    fields.push(CardField {
        label: tr("Version (changes with every change)").into(),
        name: "version".into(),
        value: p.version.to_string(),
        code: false,
    });
    fields
}

/// A field of the payment resource as a phrase; the API name stays beside it on the card.
/// A field this table does not know yet (a later addition to the resource) is shown by its
/// API name.
fn field_label(name: &str) -> String {
    if let Some(key) = name.strip_prefix("metadata.") {
        return trf("Metadata: {key}", &[("key", &key)]);
    }
    let label = match name {
        "id" => tr("Payment id"),
        "merchant_payment_id" => tr("Your payment id"),
        "flow" => tr("Flow"),
        "status" => tr("Status"),
        "amount" => tr("Amount"),
        "initial_amount" => tr("Amount asked at creation"),
        "currency" => tr("Currency"),
        "geo_code" => tr("Country"),
        "payment_method" => tr("Payment method"),
        "is_intrabank" => tr("Same-bank transfer only"),
        "bank_code" => tr("Payer's bank asked for"),
        "requisite_bank" => tr("Bank of the requisite"),
        "callback_url" => tr("Callback URL"),
        "is_test" => tr("Test payment"),
        "requisite" => tr("Card number or phone to pay to"),
        "holder_name" => tr("Recipient's name"),
        "qrcode_link" => tr("QR code link"),
        "deeplink_url" => tr("Bank app link"),
        "error_code" => tr("Error code"),
        "error_comment" => tr("Error comment"),
        "payment_page_url" => tr("Payer page"),
        "created_at" => tr("Created"),
        "updated_at" => tr("Last changed"),
        "expires_at" => tr("Expires"),
        "merchant_information.course" => tr("Exchange rate (currency per USDT)"),
        "merchant_information.rate" => tr("Fee, percent"),
        "merchant_information.amount_usdt" => tr("Amount in USDT"),
        "merchant_information.fee" => tr("Fee in the payment currency"),
        "merchant_information.amount_rate" => tr("Amount after the fee"),
        "merchant_information.amount_usdt_rate" => tr("Credited to the balance, USDT"),
        other => other,
    };
    label.to_string()
}

/// A JSON value with object members kept in document order.
enum Member {
    Object(Vec<(String, Member)>),
    Scalar(String),
}

/// A JSON object read with its members in document order (serde_json's map sorts them).
struct Ordered(Vec<(String, Member)>);

impl<'de> serde::Deserialize<'de> for Member {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V;
        impl<'de> serde::de::Visitor<'de> for V {
            type Value = Member;
            fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                f.write_str("a JSON value")
            }
            fn visit_map<A: serde::de::MapAccess<'de>>(
                self,
                mut map: A,
            ) -> Result<Member, A::Error> {
                let mut members = Vec::new();
                while let Some((k, v)) = map.next_entry::<String, Member>()? {
                    members.push((k, v));
                }
                // serde_json's arbitrary-precision numbers arrive as a one-member map.
                if let [(k, Member::Scalar(n))] = members.as_slice() {
                    if k == "$serde_json::private::Number" {
                        return Ok(Member::Scalar(n.clone()));
                    }
                }
                Ok(Member::Object(members))
            }
            fn visit_str<E>(self, v: &str) -> Result<Member, E> {
                Ok(Member::Scalar(v.to_string()))
            }
            fn visit_bool<E>(self, v: bool) -> Result<Member, E> {
                Ok(Member::Scalar(v.to_string()))
            }
            fn visit_i64<E>(self, v: i64) -> Result<Member, E> {
                Ok(Member::Scalar(v.to_string()))
            }
            fn visit_u64<E>(self, v: u64) -> Result<Member, E> {
                Ok(Member::Scalar(v.to_string()))
            }
            fn visit_f64<E>(self, v: f64) -> Result<Member, E> {
                Ok(Member::Scalar(v.to_string()))
            }
            fn visit_unit<E>(self) -> Result<Member, E> {
                Ok(Member::Scalar("null".into()))
            }
            fn visit_seq<A: serde::de::SeqAccess<'de>>(
                self,
                mut seq: A,
            ) -> Result<Member, A::Error> {
                let mut items = Vec::new();
                while let Some(v) = seq.next_element::<serde_json::Value>()? {
                    items.push(v.to_string());
                }
                Ok(Member::Scalar(format!("[{}]", items.join(", "))))
            }
        }
        d.deserialize_any(V)
    }
}

impl<'de> serde::Deserialize<'de> for Ordered {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        match Member::deserialize(d)? {
            Member::Object(members) => Ok(Ordered(members)),
            Member::Scalar(_) => Err(serde::de::Error::custom("not an object")),
        }
    }
}

fn flatten(prefix: &str, members: Vec<(String, Member)>, out: &mut Vec<(String, String)>) {
    for (k, v) in members {
        let name = if prefix.is_empty() {
            k
        } else {
            format!("{prefix}.{k}")
        };
        match v {
            Member::Object(inner) => flatten(&name, inner, out),
            Member::Scalar(s) => out.push((name, s)),
        }
    }
}

/// An event as its page shows it: support sees each attempt's detail, a merchant's user what
/// it came to in the merchant's terms
/// ([`payments_core::event::DeliveryAttempt::result_for_merchant`]).
pub(crate) fn event_view(r: &EventRecord, support: bool) -> EventView {
    let o = &r.outbox;
    let href = format!(
        "/projects/{}/events/{}",
        o.event.project_id, o.event.event_id
    );
    let (created, created_text) = when(o.event.created_at);
    EventView {
        event_id: o.event.event_id.to_string(),
        payment_id: o.event.payment_id.to_string(),
        status: o.event.status.as_str().to_string(),
        kind: match o.event.kind.as_str() {
            "manual_resend" => "manual resend (one attempt)".to_string(),
            other => other.to_string(),
        },
        state: o.state.as_str().to_string(),
        destination: o.destination.as_str().to_string(),
        created,
        created_text,
        attempts_made: o.attempts,
        max_attempts: o.max_attempts,
        next: o.next_attempt_at.map(when),
        attempts: r
            .attempts
            .iter()
            .map(|a| {
                let (started, started_text) = when(a.started_at);
                // One text for everyone (the core's kind of failure); support also sees the
                // library's detail beside it.
                AttemptRow {
                    number: a.attempt,
                    started,
                    started_text,
                    success: a.success,
                    result: a.result_for_merchant(),
                    detail: support
                        .then(|| a.error_detail().map(str::to_string))
                        .flatten(),
                    latency: a.duration_ms,
                    excerpt: a.response_excerpt.clone().filter(|x| !x.is_empty()),
                }
            })
            .collect(),
        href,
    }
}

async fn card_page(
    st: &CabinetState,
    current: &Current,
    payment: &Payment,
    project: &Project,
    origin: &str,
    notice: Option<String>,
    error: Option<String>,
) -> Result<Card, Response> {
    // The payer page's link, as the merchant API's read gives it (made at the first read).
    let payment_page_url = st
        .cabinet
        .service()
        .payments()
        .payment_page_token(project, payment)
        .await
        .map_err(|e| PageError::from(payments_core::ApiError::from(e)).render(st))?
        .map(|token| payments_cabinet_url(origin, &token));
    let events = st
        .cabinet
        .service()
        .store()
        .events_for_payment(payment.id)
        .await
        .map_err(|e| PageError::from(e).render(st))?;
    let mut chrome = st
        .chrome(
            trf(
                "Payment {id}",
                &[("id", &payment.merchant_payment_id.as_str())],
            ),
            Some(current),
        )
        .section("projects")
        .crumbs(vec![
            Link::new("/projects", tr("Projects and API")),
            Link::new(
                format!("/projects/{}/payments", project.id),
                project.name.clone(),
            ),
        ])
        .notice(notice);
    if let Some(e) = error {
        chrome = chrome.error("payment-status", e);
    }
    let support = current.is_support();
    Ok(Card {
        chrome,
        p: CardPayment {
            id: payment.id.to_string(),
            status: payment.status.as_str().to_string(),
            test: payment.is_test(),
        },
        fields: card_fields(payment),
        test_buttons: payment.is_test() && payment.status == PaymentStatus::Processing,
        test_callback: payment.is_test() && payment.status.is_closed() && !support,
        support,
        merchant_resend: !support && !payment.is_test() && payment.status.is_closed(),
        payment_page_url,
        events: events
            .iter()
            .rev()
            .map(|e| event_view(e, support))
            .collect(),
        show_payment: false,
        resend: false,
    })
}

/// What a redirect back to the card may say.
#[derive(Debug, Default, serde::Deserialize)]
pub(crate) struct CardQuery {
    #[serde(default)]
    done: Option<String>,
    #[serde(default)]
    flash: Option<String>,
}

/// The name of a payment card in a refused operation's slot.
fn card_name(payment: &Payment) -> String {
    format!("payment:{}", payment.id)
}

/// The origin the user reached the cabinet at (its public origin when set), for absolute
/// links such as the payer page's.
fn origin(st: &CabinetState, headers: &HeaderMap) -> String {
    match &st.public_origin {
        Some(o) => o.trim_end_matches('/').to_string(),
        None => format!(
            "{}://{}",
            if st.tls { "https" } else { "http" },
            headers
                .get(header::HOST)
                .and_then(|v| v.to_str().ok())
                .unwrap_or("localhost")
        ),
    }
}

/// The payer page's absolute link under `origin`.
fn payments_cabinet_url(origin: &str, token: &payments_core::payer::PageToken) -> String {
    crate::payer_page_url(origin, token)
}

pub(crate) async fn card(
    State(st): State<CabinetState>,
    signed: Signed,
    headers: HeaderMap,
    Path(id): Path<String>,
    Query(q): Query<CardQuery>,
) -> PageResult {
    let (payment, project) = visible_payment(&st, &signed.current, &id).await?;
    let notice = match q.done.as_deref() {
        Some("operated") => Some(trf(
            "Done: the payment is {status}.",
            &[("status", &status_text(payment.status.as_str()))],
        )),
        Some("resent") => {
            Some(tr("A callback was queued: it appears under Callback events.").into())
        }
        _ => None,
    };
    // A refused operation, once: its reason and status.
    let flash = once::flash(
        &st,
        signed.current.session.id,
        q.flash.as_deref(),
        &card_name(&payment),
    )
    .await?;
    let error = flash
        .as_ref()
        .and_then(|f| f.errors.first())
        .map(|(_, m)| m.clone());
    let origin = origin(&st, &headers);
    let page = ok(&card_page(
        &st,
        &signed.current,
        &payment,
        &project,
        &origin,
        notice,
        error,
    )
    .await?);
    Ok(once::answer(flash.as_ref(), page))
}

/// Runs a payment operation for the signed-in user and shows the card again through a
/// redirect: after a refusal the card shows the reason once, with its status (`409`/`400`).
async fn run_operation(
    st: &CabinetState,
    signed: &Signed,
    client: &Client,
    id: &str,
    trigger: Result<Trigger, String>,
    test: bool,
) -> PageResult {
    let (payment, project) = visible_payment(st, &signed.current, id).await?;
    let service = st.cabinet.service();
    let actor = signed.current.actor();
    let result = match trigger {
        Err(m) => Err((StatusCode::BAD_REQUEST, m)),
        // The sandbox buttons: the test helpers' operation, allowed to the project's users.
        Ok(t) if test => service
            .payments()
            .test_outcome(&project, &payment.id.to_string(), t.clone(), &actor)
            .await
            .map(|_| t)
            .map_err(|e| {
                let e = payments_core::ApiError::from(e);
                (status(&e), e.message)
            }),
        // The merchant's "send callback" of a closed payment, test or live (the spec's manual
        // resend): the merchant API's operation (`POST /api/v1/payments/{id}/resend`).
        Ok(Trigger::ResendCallback) if !signed.current.is_support() => service
            .callbacks()
            .resend_payment_callback(&project, payment.id, &actor)
            .await
            .map(|_| Trigger::ResendCallback)
            .map_err(|e| (status(&e), e.message)),
        // Support's operations: the operator's.
        Ok(t) if signed.current.is_support() => service
            .payments()
            .operate(payment.id, t.clone(), &actor)
            .await
            .map(|_| t)
            .map_err(|e| {
                let e = payments_core::ApiError::from(e);
                (status(&e), e.message)
            }),
        Ok(_) => return Err(PageError::NotFound.render(st)),
    };
    match result {
        Ok(trigger) => {
            let name = if test || (payment.is_test() && !signed.current.is_support()) {
                format!("test_payment.{}", trigger.name())
            } else {
                format!("payment.{}", trigger.name())
            };
            st.cabinet
                .audit_change(
                    &signed.current,
                    client,
                    Change {
                        merchant: project.merchant_id,
                        project: Some(project.id),
                        action: &name,
                        target: &payment.id.to_string(),
                        detail: None,
                    },
                )
                .await
                .map_err(|e| PageError::from(e).render(st))?;
            let done = if matches!(trigger, Trigger::ResendCallback) {
                "resent"
            } else {
                "operated"
            };
            Ok(see_other(&format!("/payments/{}?done={done}", payment.id)))
        }
        Err((code, message)) => {
            let flash = Flash::new(card_name(&payment), code).error("payment-status", message);
            Ok(once::refuse(
                st,
                signed.current.session.id,
                &format!("/payments/{}", payment.id),
                "",
                flash,
            )
            .await)
        }
    }
}

fn status(e: &payments_core::ApiError) -> StatusCode {
    match e.code {
        payments_core::ErrorCode::BadRequest => StatusCode::BAD_REQUEST,
        payments_core::ErrorCode::InvalidTransition => StatusCode::CONFLICT,
        payments_core::ErrorCode::PaymentNotFound | payments_core::ErrorCode::NotFound => {
            StatusCode::NOT_FOUND
        }
        _ => StatusCode::SERVICE_UNAVAILABLE,
    }
}

fn amount(s: &str) -> Result<Option<Amount>, String> {
    let s = s.trim();
    if s.is_empty() {
        return Ok(None);
    }
    Amount::parse(s)
        .map(Some)
        .map_err(|e| format!("amount: {e}"))
}

pub(crate) async fn test_paid(
    State(st): State<CabinetState>,
    signed: Signed,
    client: Client,
    Path(id): Path<String>,
) -> PageResult {
    run_operation(
        &st,
        &signed,
        &client,
        &id,
        Ok(Trigger::Confirm { amount: None }),
        true,
    )
    .await
}

pub(crate) async fn test_canceled(
    State(st): State<CabinetState>,
    signed: Signed,
    client: Client,
    Path(id): Path<String>,
) -> PageResult {
    run_operation(&st, &signed, &client, &id, Ok(Trigger::Cancel), true).await
}

pub(crate) async fn confirm(
    State(st): State<CabinetState>,
    signed: Signed,
    client: Client,
    Path(id): Path<String>,
    form: FormData,
) -> PageResult {
    let trigger = amount(form.get("amount")).map(|amount| Trigger::Confirm { amount });
    run_operation(&st, &signed, &client, &id, trigger, false).await
}

pub(crate) async fn cancel(
    State(st): State<CabinetState>,
    signed: Signed,
    client: Client,
    Path(id): Path<String>,
) -> PageResult {
    run_operation(&st, &signed, &client, &id, Ok(Trigger::Cancel), false).await
}

pub(crate) async fn recheck(
    State(st): State<CabinetState>,
    signed: Signed,
    client: Client,
    Path(id): Path<String>,
) -> PageResult {
    run_operation(&st, &signed, &client, &id, Ok(Trigger::StartRecheck), false).await
}

pub(crate) async fn resolve(
    State(st): State<CabinetState>,
    signed: Signed,
    client: Client,
    Path(id): Path<String>,
    form: FormData,
) -> PageResult {
    let trigger = amount(form.get("amount")).and_then(|amount| {
        let outcome = match (form.get("status"), amount) {
            ("completed", amount) => RecheckOutcome::Completed { amount },
            ("canceled", None) => RecheckOutcome::Canceled,
            ("unchanged", None) => RecheckOutcome::Unchanged,
            ("canceled" | "unchanged", Some(_)) => {
                return Err("amount: only with status completed".to_string())
            }
            _ => return Err("status: must be completed, canceled or unchanged".to_string()),
        };
        Ok(Trigger::ResolveRecheck(outcome))
    });
    run_operation(&st, &signed, &client, &id, trigger, false).await
}

pub(crate) async fn resend_page(
    State(st): State<CabinetState>,
    signed: Signed,
    Path(id): Path<String>,
) -> PageResult {
    let (payment, _) = visible_payment(&st, &signed.current, &id).await?;
    Ok(ok(&Confirm {
        chrome: st
            .chrome(
                trf(
                    "Resend the callback of {payment}?",
                    &[("payment", &payment.merchant_payment_id.as_str())],
                ),
                Some(&signed.current),
            )
            .section("projects"),
        paragraphs: vec![
            trf(
                "A new callback event with a new event_id and the payment's current status ({status}) is sent once, signed like any callback, to the payment's callback destination. No automatic retries follow.",
                &[("status", &status_text(payment.status.as_str()))],
            ),
            tr("Only a closed payment can be resent; for another the service refuses and says why.")
                .into(),
        ],
        action: format!("/payments/{}/resend", payment.id),
        button: tr("Resend the callback").into(),
        danger: false,
        cancel: format!("/payments/{}", payment.id),
    }))
}

pub(crate) async fn resend(
    State(st): State<CabinetState>,
    signed: Signed,
    client: Client,
    Path(id): Path<String>,
) -> PageResult {
    run_operation(
        &st,
        &signed,
        &client,
        &id,
        Ok(Trigger::ResendCallback),
        false,
    )
    .await
}

/// The filters of the deliveries list.
#[derive(Debug, Default, serde::Deserialize)]
pub(crate) struct DeliveryFilters {
    #[serde(default)]
    state: String,
    #[serde(default)]
    payment: String,
    #[serde(default)]
    from: String,
    #[serde(default)]
    to: String,
    #[serde(default)]
    before: String,
    /// After a recovery: how many payments were resent and skipped, and whether more remain.
    #[serde(default)]
    recovered: Option<usize>,
    #[serde(default)]
    skipped: Option<usize>,
    #[serde(default)]
    more: Option<bool>,
    #[serde(default)]
    flash: Option<String>,
}

pub(crate) async fn deliveries(
    State(st): State<CabinetState>,
    signed: Signed,
    Path(id): Path<String>,
    Query(f): Query<DeliveryFilters>,
) -> PageResult {
    let (project, merchant) = visible_project(&st, &signed.current, &id).await?;
    let state = DeliveryState::parse(f.state.trim());
    let query = EventQuery {
        project: project.id,
        state,
        payment: f.payment.trim().parse().ok(),
        event: None,
        created_from: date(&f.from),
        created_to: date(&f.to).map(|t| t + DAY),
        before: cursor::<EventId>(&f.before),
        limit: PAGE_SIZE + 1,
    };
    let mut found = st
        .cabinet
        .service()
        .callbacks()
        .events_page(&query)
        .await
        .map_err(|e| PageError::from(e).render(&st))?;
    let more = found.len() > PAGE_SIZE;
    found.truncate(PAGE_SIZE);
    let next = more.then(|| {
        let last = &found
            .last()
            .expect("a full page has a last row")
            .outbox
            .event;
        format!(
            "/projects/{}/deliveries?state={}&payment={}&from={}&to={}&before={}_{}",
            project.id,
            encode(&f.state),
            encode(&f.payment),
            encode(&f.from),
            encode(&f.to),
            last.created_at.unix_millis(),
            last.event_id
        )
    });
    let notice = f.recovered.map(|n| {
        let text = trf(
            "Resent the callbacks of {count} payments; {skipped} skipped.",
            &[("count", &n), ("skipped", &f.skipped.unwrap_or(0))],
        );
        if f.more == Some(true) {
            format!(
                "{text} {}",
                tr("More undelivered events remain: resend again.")
            )
        } else {
            text
        }
    });
    let flash = once::flash(
        &st,
        signed.current.session.id,
        f.flash.as_deref(),
        &deliveries_name(&project),
    )
    .await?;
    let chrome = st
        .chrome(
            trf(
                "{project}: callback deliveries",
                &[("project", &project.name)],
            ),
            Some(&signed.current),
        )
        .section("projects")
        .crumbs(vec![Link::new("/projects", tr("Projects and API"))])
        .notice(notice);
    let chrome = once::with_errors(chrome, flash.as_ref());
    let since = if f.from.trim().is_empty() {
        (st.cabinet.service().ports().clock.now() - DAY)
            .to_rfc3339()
            .chars()
            .take(10)
            .collect()
    } else {
        f.from.trim().to_string()
    };
    let page = ok(&Deliveries {
        chrome,
        tab: "deliveries",
        project: project_view(&project, &merchant),
        states: ["pending", "delivered", "failed"]
            .into_iter()
            .map(|s| Choice {
                value: s,
                selected: state.map(DeliveryState::as_str) == Some(s),
            })
            .collect(),
        payment: f.payment.clone(),
        from: f.from.clone(),
        to: f.to.clone(),
        events: found
            .iter()
            .map(|e| event_view(e, signed.current.is_support()))
            .collect(),
        show_payment: true,
        resend: true,
        next,
        since,
    });
    Ok(once::answer(flash.as_ref(), page))
}

// --- a callback event's page, the merchant's resend and recovery -----------------------------

/// One attempt's headers as the event page shows them.
#[derive(Debug, Clone)]
pub(crate) struct HeaderBlock {
    pub(crate) attempt: u32,
    /// `(name, value)`; a value the cabinet cannot reproduce reads as such.
    pub(crate) headers: Vec<(String, String)>,
}

/// `GET /projects/{id}/events/{event}`: the event with its attempts, the exact body sent and
/// each attempt's headers, and its resend.
#[derive(Template)]
#[template(path = "event.html")]
pub(crate) struct EventPage {
    pub(crate) chrome: Chrome,
    pub(crate) project_id: String,
    pub(crate) events: Vec<EventView>,
    pub(crate) show_payment: bool,
    pub(crate) resend: bool,
    pub(crate) body: String,
    pub(crate) sent: Vec<HeaderBlock>,
}

/// The name of an event page in a refused operation's slot.
fn event_name(event: EventId) -> String {
    format!("event:{event}")
}

/// A project's event the user may see, or "not found".
async fn visible_event(
    st: &CabinetState,
    current: &Current,
    project: &str,
    event: &str,
) -> Result<(Project, EventRecord), Response> {
    let (project, _) = visible_project(st, current, project).await?;
    let not_found = || PageError::NotFound.render(st);
    let id: EventId = event.parse().map_err(|_| not_found())?;
    let record = st
        .cabinet
        .service()
        .callbacks()
        .project_event(&project, id)
        .await
        .map_err(|e| PageError::from(e).render(st))?
        .ok_or_else(not_found)?;
    Ok((project, record))
}

pub(crate) async fn event_page(
    State(st): State<CabinetState>,
    signed: Signed,
    Path((project, event)): Path<(String, String)>,
    Query(q): Query<CardQuery>,
) -> PageResult {
    let (project, record) = visible_event(&st, &signed.current, &project, &event).await?;
    let event_id = record.outbox.event.event_id;
    let sent = st
        .cabinet
        .service()
        .callbacks()
        .sent_request(&project, &record)
        .await
        .map_err(|e| PageError::from(e).render(&st))?;
    let flash = once::flash(
        &st,
        signed.current.session.id,
        q.flash.as_deref(),
        &event_name(event_id),
    )
    .await?;
    let notice = match q.done.as_deref() {
        Some("resent") => Some(
            tr("A new callback event was queued: this is it. Its one attempt appears here.").into(),
        ),
        _ => None,
    };
    let mut chrome = st
        .chrome(
            trf("Callback event {event}", &[("event", &event_id)]),
            Some(&signed.current),
        )
        .section("projects")
        .crumbs(vec![
            Link::new("/projects", tr("Projects and API")),
            Link::new(
                format!("/projects/{}/deliveries", project.id),
                trf(
                    "{project}: callback deliveries",
                    &[("project", &project.name)],
                ),
            ),
        ])
        .notice(notice);
    chrome = once::with_errors(chrome, flash.as_ref());
    let page = EventPage {
        chrome,
        project_id: project.id.to_string(),
        events: vec![event_view(&record, signed.current.is_support())],
        show_payment: true,
        resend: false,
        body: sent.body,
        sent: sent
            .attempts
            .into_iter()
            .map(|a| HeaderBlock {
                attempt: a.attempt,
                headers: a
                    .headers
                    .into_iter()
                    .map(|(name, value)| {
                        (
                            name.to_string(),
                            value.unwrap_or_else(|| {
                                "(signed with a secret since replaced: not shown)".into()
                            }),
                        )
                    })
                    .collect(),
            })
            .collect(),
    };
    Ok(once::answer(flash.as_ref(), ok(&page)))
}

pub(crate) async fn event_resend_page(
    State(st): State<CabinetState>,
    signed: Signed,
    Path((project, event)): Path<(String, String)>,
) -> PageResult {
    let (project, record) = visible_event(&st, &signed.current, &project, &event).await?;
    let e = &record.outbox.event;
    let back = format!("/projects/{}/events/{}", project.id, e.event_id);
    Ok(ok(&Confirm {
        chrome: st
            .chrome(tr("Resend this callback?"), Some(&signed.current))
            .section("projects"),
        paragraphs: vec![
            trf(
                "A new callback event with a new event_id and payment {payment}'s current status is sent once, signed like any callback, to the payment's callback destination. No automatic retries follow.",
                &[("payment", &e.payment_id)],
            ),
            tr("Only a closed payment's callback can be resent; for another the service refuses and says why.").into(),
        ],
        action: format!("{back}/resend"),
        button: tr("Resend the callback").into(),
        danger: false,
        cancel: back,
    }))
}

/// `POST /projects/{id}/events/{event}/resend`: the merchant API's resend of an event
/// (`POST /api/v1/events/{id}/resend`), audited; the new event's page after it, the reason
/// on this event's page after a refusal.
pub(crate) async fn event_resend(
    State(st): State<CabinetState>,
    signed: Signed,
    client: Client,
    Path((project, event)): Path<(String, String)>,
) -> PageResult {
    let (project, record) = visible_event(&st, &signed.current, &project, &event).await?;
    let id = record.outbox.event.event_id;
    let actor = signed.current.actor();
    match st
        .cabinet
        .service()
        .callbacks()
        .resend_event(&project, id, &actor)
        .await
    {
        Ok(new) => {
            st.cabinet
                .audit_change(
                    &signed.current,
                    &client,
                    Change {
                        merchant: project.merchant_id,
                        project: Some(project.id),
                        action: "event.resend",
                        target: &id.to_string(),
                        detail: Some(format!("new event {}", new.outbox.event.event_id)),
                    },
                )
                .await
                .map_err(|e| PageError::from(e).render(&st))?;
            Ok(see_other(&format!(
                "/projects/{}/events/{}?done=resent",
                project.id, new.outbox.event.event_id
            )))
        }
        Err(e) => {
            let flash = Flash::new(event_name(id), status(&e)).error("resend", e.message);
            Ok(once::refuse(
                &st,
                signed.current.session.id,
                &format!("/projects/{}/events/{id}", project.id),
                "",
                flash,
            )
            .await)
        }
    }
}

/// The "since" of a recovery: a date (`YYYY-MM-DD`, from its UTC midnight).
#[derive(Debug, Default, serde::Deserialize)]
pub(crate) struct RecoverForm {
    #[serde(default)]
    since: String,
}

/// The page name of the deliveries list in a refused operation's slot.
fn deliveries_name(project: &Project) -> String {
    format!("deliveries:{}", project.id)
}

pub(crate) async fn recover_page(
    State(st): State<CabinetState>,
    signed: Signed,
    Path(id): Path<String>,
    Query(f): Query<RecoverForm>,
) -> PageResult {
    let (project, _) = visible_project(&st, &signed.current, &id).await?;
    let back = format!("/projects/{}/deliveries", project.id);
    let Some(since) = date(&f.since) else {
        let flash = Flash::new(deliveries_name(&project), StatusCode::BAD_REQUEST)
            .error("since", tr("Since: a date as YYYY-MM-DD."));
        return Ok(once::refuse(&st, signed.current.session.id, &back, "", flash).await);
    };
    Ok(ok(&Confirm {
        chrome: st
            .chrome(
                trf(
                    "Resend what was not delivered since {date}?",
                    &[("date", &f.since.trim())],
                ),
                Some(&signed.current),
            )
            .section("projects"),
        paragraphs: vec![
            trf(
                "Every callback event of {project} queued since {time} whose delivery failed (every attempt failed, not answered since) is answered by one new event per payment: the payment's current status, a new event_id, one attempt.",
                &[
                    ("project", &project.name),
                    ("time", &super::views::when_text(since)),
                ],
            ),
            tr("Payments that are not closed any more, or have no callback URL, are skipped and listed.").into(),
        ],
        action: format!("{back}/recover?since={}", encode(f.since.trim())),
        button: tr("Resend undelivered callbacks").into(),
        danger: false,
        cancel: back,
    }))
}

/// `POST /projects/{id}/deliveries/recover?since=`: the merchant API's recovery
/// (`POST /api/v1/events/recover`), audited by the core as a bulk resend.
pub(crate) async fn recover(
    State(st): State<CabinetState>,
    signed: Signed,
    client: Client,
    Path(id): Path<String>,
    Query(f): Query<RecoverForm>,
) -> PageResult {
    let (project, _) = visible_project(&st, &signed.current, &id).await?;
    let back = format!("/projects/{}/deliveries", project.id);
    let Some(since) = date(&f.since) else {
        let flash = Flash::new(deliveries_name(&project), StatusCode::BAD_REQUEST)
            .error("since", tr("Since: a date as YYYY-MM-DD."));
        return Ok(once::refuse(&st, signed.current.session.id, &back, "", flash).await);
    };
    let report = st
        .cabinet
        .service()
        .callbacks()
        .recover_events(&project, since, None, &signed.current.actor())
        .await
        .map_err(|e| PageError::from(e).render(&st))?;
    st.cabinet
        .audit_change(
            &signed.current,
            &client,
            Change {
                merchant: project.merchant_id,
                project: Some(project.id),
                action: "events.recover",
                target: &project.id.to_string(),
                detail: Some(format!(
                    "since {}: {} resent, {} skipped",
                    super::views::when_text(since),
                    report.resent.len(),
                    report.skipped.len()
                )),
            },
        )
        .await
        .map_err(|e| PageError::from(e).render(&st))?;
    Ok(see_other(&format!(
        "{back}?recovered={}&skipped={}&more={}",
        report.resent.len(),
        report.skipped.len(),
        report.more
    )))
}

// --- the search across projects --------------------------------------------------------------

/// One payment found by the search, with its project.
#[derive(Debug, Clone)]
pub(crate) struct SearchRow {
    pub(crate) row: PaymentRow,
    pub(crate) project_id: String,
    pub(crate) project_name: String,
}

/// `GET /payments/search`: one box over every project the user may see.
#[derive(Template)]
#[template(path = "search.html")]
pub(crate) struct SearchPage {
    pub(crate) chrome: Chrome,
    pub(crate) q: String,
    pub(crate) statuses: Vec<Choice>,
    pub(crate) from: String,
    pub(crate) to: String,
    /// What the box was read as ("an amount: 100.50"); `None` without a search.
    pub(crate) read_as: Option<String>,
    /// How many projects were searched.
    pub(crate) projects: usize,
    pub(crate) payments: Vec<SearchRow>,
    pub(crate) next: Option<String>,
}

/// The search's query string.
#[derive(Debug, Default, serde::Deserialize)]
pub(crate) struct SearchForm {
    #[serde(default)]
    q: String,
    #[serde(default)]
    status: String,
    #[serde(default)]
    from: String,
    #[serde(default)]
    to: String,
    #[serde(default)]
    cursor: String,
}

impl SearchForm {
    /// The query string of the search (the cursor aside).
    fn query_string(&self) -> String {
        format!(
            "q={}&status={}&from={}&to={}",
            encode(self.q.trim()),
            encode(&self.status),
            encode(&self.from),
            encode(&self.to),
        )
    }

    /// The list query of the filters besides the box, or the fields in error.
    fn list_query(&self) -> Result<PaymentListQuery, Vec<(&'static str, String)>> {
        let mut errors = Vec::new();
        let mut q = PaymentListQuery {
            limit: PAGE_SIZE,
            ..PaymentListQuery::default()
        };
        if !self.status.is_empty() {
            match self.status.parse() {
                Ok(s) => q.status = Some(s),
                Err(_) => errors.push(("status", tr("Status: choose one from the list.").into())),
            }
        }
        for (field, value) in [("from", &self.from), ("to", &self.to)] {
            if value.trim().is_empty() {
                continue;
            }
            match date(value) {
                Some(t) if field == "from" => q.created_from = Some(t),
                Some(t) => q.created_to = Some(t + DAY),
                None => errors.push((
                    field,
                    trf("{value}: a date as YYYY-MM-DD", &[("value", value)]),
                )),
            }
        }
        if let (Some(from), Some(to)) = (q.created_from, q.created_to) {
            if from >= to {
                errors.push(("to", tr("Created to: on or after Created from.").into()));
            }
        }
        if !self.cursor.is_empty() {
            match PaymentCursor::parse(&self.cursor) {
                Some(c) => q.cursor = Some(c),
                None => errors.push(("q", tr("The page link is broken: search again.").into())),
            }
        }
        if errors.is_empty() {
            Ok(q)
        } else {
            Err(errors)
        }
    }
}

/// The projects a user may search: a merchant's user its merchant's, support every one.
async fn searchable_projects(
    st: &CabinetState,
    current: &Current,
) -> Result<Vec<Project>, Response> {
    let projects = st
        .cabinet
        .service()
        .store()
        .projects()
        .await
        .map_err(|e| PageError::from(e).render(st))?;
    Ok(match current.user.role {
        Role::Merchant(m) => projects
            .into_iter()
            .filter(|p| p.merchant_id == m)
            .collect(),
        Role::Support => projects,
    })
}

/// `GET /payments/search`: the box is read by the core ([`SearchTerm::parse`]): a payment id
/// opens that payment's card, anything else lists the matching payments of every project the
/// user may see, newest first, through the list API's operation
/// ([`Payments::list_payments_across`](payments_core::service::Payments::list_payments_across)).
pub(crate) async fn search(
    State(st): State<CabinetState>,
    signed: Signed,
    Query(f): Query<SearchForm>,
) -> PageResult {
    let projects = searchable_projects(&st, &signed.current).await?;
    let status: Option<PaymentStatus> = f.status.parse().ok();
    let mut chrome = st
        .chrome(tr("Search payments"), Some(&signed.current))
        .section("search");
    let mut page = SearchPage {
        chrome: chrome.clone(),
        q: f.q.clone(),
        statuses: PaymentStatus::ALL
            .iter()
            .map(|s| Choice {
                value: s.as_str(),
                selected: Some(*s) == status,
            })
            .collect(),
        from: f.from.clone(),
        to: f.to.clone(),
        read_as: None,
        projects: projects.len(),
        payments: Vec::new(),
        next: None,
    };
    let searched =
        !(f.q.trim().is_empty() && f.status.is_empty() && f.from.is_empty() && f.to.is_empty());
    if !searched {
        return Ok(ok(&page));
    }
    let term = if f.q.trim().is_empty() {
        None
    } else {
        match SearchTerm::parse(&f.q) {
            Ok(t) => Some(t),
            Err(e) => {
                page.chrome = chrome.error("q", e.0);
                return Ok(html(StatusCode::BAD_REQUEST, &page));
            }
        }
    };
    let query = match f.list_query() {
        Ok(q) => q,
        Err(errors) => {
            for (field, message) in errors {
                chrome = chrome.error(field, message);
            }
            page.chrome = chrome;
            return Ok(html(StatusCode::BAD_REQUEST, &page));
        }
    };
    let names = |id| {
        projects
            .iter()
            .find(|p| p.id == id)
            .map(|p| p.name.clone())
            .unwrap_or_default()
    };
    let row = |p: &Payment| {
        let (created, created_text) = when(p.created_at);
        SearchRow {
            row: PaymentRow {
                id: p.id.to_string(),
                created,
                created_text,
                merchant_payment_id: p.merchant_payment_id.as_str().to_string(),
                amount: p.amount.to_string(),
                currency: p.currency.as_str().to_string(),
                method: p.payment_method.as_str().to_string(),
                status: p.status.as_str().to_string(),
                test: p.is_test(),
            },
            project_id: p.project_id.to_string(),
            project_name: names(p.project_id),
        }
    };
    let found = match &term {
        Some(SearchTerm::PaymentId(id)) => {
            page.read_as = Some(trf("a payment id: {id}", &[("id", id)]));
            let payment = st
                .cabinet
                .service()
                .store()
                .payment(*id)
                .await
                .map_err(|e| PageError::from(e).render(&st))?
                .filter(|p| projects.iter().any(|x| x.id == p.project_id));
            if let Some(p) = payment {
                return Ok(see_other(&format!("/payments/{}", p.id)));
            }
            Vec::new()
        }
        term => {
            let query = match term {
                Some(t) => {
                    page.read_as = Some(match t {
                        SearchTerm::RequisiteLast4(l) => trf(
                            "the last 4 digits of a card or phone: {digits}",
                            &[("digits", l)],
                        ),
                        SearchTerm::Amount(a) => trf("an amount: {amount}", &[("amount", a)]),
                        SearchTerm::MerchantPaymentIdPrefix(p) => trf(
                            "the start of merchant_payment_id: {prefix}",
                            &[("prefix", p)],
                        ),
                        SearchTerm::PaymentId(_) => unreachable!("looked up above"),
                    });
                    t.narrow(query)
                }
                None => query,
            };
            let found = st
                .cabinet
                .service()
                .payments()
                .list_payments_across(&projects, &query)
                .await
                .map_err(|e| PageError::from(e).render(&st))?;
            page.next = found
                .next_cursor
                .map(|c| format!("/payments/search?{}&cursor={}", f.query_string(), c));
            found.payments
        }
    };
    page.payments = found.iter().map(row).collect();
    Ok(ok(&page))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn card_fields_keep_the_resource_order_and_flatten_objects() {
        let text = r#"{"id":"p1","status":"completed","merchant_information":{"rate":30.26,"course":"100"},"is_test":true,"x":null}"#;
        let Ordered(members) = serde_json::from_str(text).expect("an object");
        let mut flat = Vec::new();
        flatten("", members, &mut flat);
        assert_eq!(
            flat,
            vec![
                ("id".to_string(), "p1".to_string()),
                ("status".into(), "completed".into()),
                ("merchant_information.rate".into(), "30.26".into()),
                ("merchant_information.course".into(), "100".into()),
                ("is_test".into(), "true".into()),
                ("x".into(), "null".into()),
            ]
        );
    }
}
