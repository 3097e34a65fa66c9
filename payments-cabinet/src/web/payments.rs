//! Payments: a project's list and its CSV export, and the payment card with its fields, events
//! and attempts. The card's buttons are in `operations`, the callback deliveries in
//! `deliveries`, the search across projects in `search`.

use crate::accounts::Permission;
use axum::extract::{Path, Query, State};
use axum::http::{header, HeaderMap};
use axum::response::Response;
use payments_core::event::EventRecord;
use payments_core::ids::PaymentId;
use payments_core::payment::{MerchantPaymentId, Payment, PaymentStatus};
use payments_core::project::Project;
use payments_core::store::PaymentQuery;

use super::appeal_view;
use super::card;
use super::export;
use super::extract::Signed;
use super::home;
use super::i18n::{tr, trf};
use super::once::{self};
use super::page::{ok, OrPage, PageError, PageResult};
use super::projects::{project_view, visible_project};
use super::query::{cursor, date, date_end, encode, PAGE_SIZE};
use super::state::CabinetState;
use super::views::{
    status_text, when, AttemptRow, Card, CardField, CardPayment, Choice, Chrome, EventView,
    HistoryRow, Link, Payments,
};
use crate::accounts::Current;

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
    /// `1`: the page also shows the totals of every payment the filters match.
    #[serde(default)]
    totals: String,
}

impl PaymentFilters {
    /// The store query of these filters for `project` (a page of `limit` payments).
    fn query(&self, project: &Project, limit: usize) -> PaymentQuery {
        PaymentQuery {
            status: self.status.parse().ok(),
            created_from: date(&self.from),
            created_to: date_end(&self.to),
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

pub(crate) async fn list(
    State(st): State<CabinetState>,
    signed: Signed,
    Path(id): Path<String>,
    Query(f): Query<PaymentFilters>,
) -> PageResult {
    let (project, merchant) =
        visible_project(&st, &signed.current, &id, Permission::Payments).await?;
    let status: Option<PaymentStatus> = f.status.parse().ok();
    let query = f.query(&project, PAGE_SIZE + 1);
    let mut found = st
        .cabinet
        .service()
        .payments()
        .payments_page(&query)
        .await
        .or_page(&st)?;
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
    let rows = found.iter().map(super::views::payment_row).collect();
    let csv = format!("/projects/{}/payments.csv?{}", project.id, f.query_string());
    let totals = match f.totals.as_str() {
        "1" => Some(home::list_totals(&st, &query).await?),
        _ => None,
    };
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
        excel: export::excel_links("payments", &csv),
        totals_link: format!(
            "/projects/{}/payments?{}&totals=1#list-totals",
            project.id,
            f.query_string()
        ),
        totals,
        csv,
        payments: rows,
        next,
    }))
}

/// `GET /projects/{id}/payments.csv` with the list's filters (`status`, `from`, `to`,
/// `merchant_payment_id`) and the file's `format` ([`export::Format`]): every matching
/// payment, newest first, streamed ([`export::payments_csv`]).
pub(crate) async fn payments_csv(
    State(st): State<CabinetState>,
    signed: Signed,
    Path(id): Path<String>,
    Query(f): Query<PaymentFilters>,
    Query(fq): Query<export::FormatQuery>,
) -> PageResult {
    let (project, _) = visible_project(&st, &signed.current, &id, Permission::Money).await?;
    let format = fq.format().map_err(|e| e.render(&st))?;
    let query = f.query(&project, export::EXPORT_PAGE);
    // The export reads the whole filtered list: one of the project's list places, held
    // until the stream is dropped (sent or abandoned), as every list read takes one.
    let place = st
        .cabinet
        .service()
        .scan_place(project.id)
        .await
        .or_page(&st)?;
    let stream = futures_util::StreamExt::map(
        export::payments_csv(st.cabinet.service().store().clone(), query, format),
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

/// A payment the user may see (through its project, [`visible_project`]) for a page or form
/// that needs `need`, or "not found" (or "not allowed").
pub(crate) async fn visible_payment(
    st: &CabinetState,
    current: &Current,
    id: &str,
    need: Permission,
) -> Result<(Payment, Project), Response> {
    let not_found = || PageError::NotFound.render(st);
    let pid: PaymentId = id.parse().map_err(|_| not_found())?;
    let payment = st
        .cabinet
        .service()
        .store()
        .payment(pid)
        .await
        .or_page(st)?
        .ok_or_else(not_found)?;
    let (project, _) = visible_project(st, current, &payment.project_id.to_string(), need).await?;
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
                card::field_value(&name, value)
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
        order: order_of(&o.event.body).unwrap_or_else(|| o.event.payment_id.to_string()),
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
                    result: card::attempt_result(a),
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

/// The merchant's order number (`merchant_payment_id`) a callback body names, as sent.
fn order_of(body: &[u8]) -> Option<String> {
    #[derive(serde::Deserialize)]
    struct Named {
        merchant_payment_id: String,
    }
    serde_json::from_slice::<Named>(body)
        .ok()
        .map(|n| n.merchant_payment_id)
}

/// Whether a callback of `payment` has somewhere to go: its own URL, its project's or its
/// merchant's (the core's precedence, [`resolve_destination`]).
///
/// [`resolve_destination`]: payments_core::callback::resolve_destination
async fn has_callback_url(
    st: &CabinetState,
    payment: &Payment,
    project: &Project,
) -> Result<bool, Response> {
    if payment.callback_url.is_some() || project.callback_url.is_some() {
        return Ok(true);
    }
    use payments_core::store::MerchantStoreExt;
    let merchant = st
        .cabinet
        .service()
        .store()
        .merchant(project.merchant_id)
        .await
        .or_page(st)?;
    Ok(payments_core::callback::resolve_destination(
        payment.callback_url.as_ref(),
        project.callback_url.as_ref(),
        merchant.as_ref().and_then(|m| m.callback_url.as_ref()),
    )
    .is_some())
}

async fn card_page(
    st: &CabinetState,
    current: &Current,
    payment: &Payment,
    project: &Project,
    origin: &str,
    notice: Option<String>,
    flash: Option<&once::Flash>,
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
        .or_page(st)?;
    let changes = st.cabinet.service().payments().history(payment).await;
    let changes = changes.or_page(st)?;
    let history: Vec<_> = changes.iter().map(history_row).collect();
    let chrome = card_chrome(st, current, payment, project, notice, flash);
    let appeals = appeal_view::card_appeals(st, current, payment, flash).await?;
    let support = current.is_support();
    let no_callback_url = !has_callback_url(st, payment, project).await?;
    Ok(Card {
        chrome,
        p: CardPayment {
            id: payment.id.to_string(),
            status: payment.status.as_str().to_string(),
            test: payment.is_test(),
        },
        fields: card_fields(payment),
        test_buttons: payment.is_test()
            && payment.status == PaymentStatus::Processing
            && current.may(Permission::TestOutcomes),
        test_callback: payment.is_test()
            && payment.status.is_closed()
            && !support
            && current.may(Permission::Resend),
        support,
        merchant_resend: !support
            && !payment.is_test()
            && payment.status.is_closed()
            && current.may(Permission::Resend),
        no_callback_url,
        project_id: project.id.to_string(),
        payment_page_url,
        summary: card::summary(payment, project),
        timeline: card::timeline(payment, &changes, &events),
        history,
        events: events
            .iter()
            .rev()
            .map(|e| event_view(e, support))
            .collect(),
        show_payment: false,
        resend: false,
        appeals,
    })
}

/// The card's title, crumbs and notice, and a refused form's errors: an appeal form's beside
/// its fields, an operation's under the payment's status.
fn card_chrome(
    st: &CabinetState,
    current: &Current,
    payment: &Payment,
    project: &Project,
    notice: Option<String>,
    flash: Option<&once::Flash>,
) -> Chrome {
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
    for (field, message) in flash.map(|f| f.errors.as_slice()).unwrap_or_default() {
        let field = if field.starts_with("appeal") {
            field.as_str()
        } else {
            "payment-status"
        };
        chrome = chrome.error(field, message.clone());
    }
    chrome
}

/// A change of the payment's status history as the card shows it.
fn history_row(c: &payments_core::history::StatusChange) -> HistoryRow {
    HistoryRow {
        at: when(c.at),
        status: c.to.as_str().to_string(),
        amount: c.amount.to_string(),
        cause: c.cause.as_str().to_string(),
        source: c.source.map_or("", |s| s.as_str()).to_string(),
    }
}

/// What a redirect back to the card may say.
#[derive(Debug, Default, serde::Deserialize)]
pub(crate) struct CardQuery {
    #[serde(default)]
    pub(crate) done: Option<String>,
    #[serde(default)]
    pub(crate) flash: Option<String>,
}

/// The name of a payment card in a refused operation's slot.
pub(crate) fn card_name(payment: &Payment) -> String {
    format!("payment:{}", payment.id)
}

/// The origin the user reached the cabinet at (its public origin when set), for absolute
/// links such as the payer page's.
pub(crate) fn origin(st: &CabinetState, headers: &HeaderMap) -> String {
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
    crate::links::payer_page_url(origin, token)
}

pub(crate) async fn card(
    State(st): State<CabinetState>,
    signed: Signed,
    headers: HeaderMap,
    Path(id): Path<String>,
    Query(q): Query<CardQuery>,
) -> PageResult {
    let (payment, project) =
        visible_payment(&st, &signed.current, &id, Permission::Payments).await?;
    let notice = match q.done.as_deref() {
        Some("operated") => Some(trf(
            "Done: the payment is {status}.",
            &[("status", &status_text(payment.status.as_str()))],
        )),
        Some("resent") => {
            Some(tr("A callback was queued: it appears under Callback events.").into())
        }
        Some("appealed") => Some(tr("The appeal was received: it is listed under Appeals.").into()),
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
    let origin = origin(&st, &headers);
    let page = ok(&card_page(
        &st,
        &signed.current,
        &payment,
        &project,
        &origin,
        notice,
        flash.as_ref(),
    )
    .await?);
    Ok(once::answer(flash.as_ref(), page))
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
