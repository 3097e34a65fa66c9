//! Payments (a project's list, the payment card with its events and attempts, the sandbox's
//! Paid / Canceled buttons, support's operations) and callback deliveries. Every change is
//! the core's operation: the test helpers' `test_outcome` for the buttons, `operate` for
//! support.

use axum::extract::{Path, Query, State};
use axum::http::StatusCode;
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
use super::once::{self, Flash};
use super::projects::{project_view, visible_project};
use super::views::{
    when, AttemptRow, Card, CardField, CardPayment, Choice, Confirm, Deliveries, EventView, Link,
    PaymentRow, Payments,
};
use super::{ok, see_other, CabinetState, FormData, PageError, PageResult, Signed};
use crate::accounts::{Change, Client, Current};

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
        .store()
        .find_payments(&query)
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
            .chrome(format!("{}: payments", project.name), Some(&signed.current))
            .section("projects")
            .crumbs(vec![Link::new("/projects", "Projects and API")]),
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
    let stream = export::payments_csv(st.cabinet.service().store().clone(), query);
    export::download(&format!("payments-{}.csv", project.id), stream)
        .await
        .map_err(|e| {
            tracing::error!(error = %e, "cabinet: the payments export failed");
            PageError::Unavailable("The service cannot answer now. Try again in a moment.".into())
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
            CardField { name, value, code }
        })
        .collect();
    fields.push(CardField {
        name: "version".into(),
        value: p.version.to_string(),
        code: false,
    });
    fields
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
        next: o.next_attempt_at.map(|t| t.to_rfc3339()),
        attempts: r
            .attempts
            .iter()
            .map(|a| {
                let (started, started_text) = when(a.started_at);
                let result = match (a.http_status, &a.error) {
                    _ if !support => a.result_for_merchant(),
                    (Some(s), None) => format!("HTTP {s}"),
                    (Some(s), Some(e)) => format!("HTTP {s}: {e}"),
                    (None, Some(e)) => e.clone(),
                    (None, None) => "no answer".into(),
                };
                AttemptRow {
                    number: a.attempt,
                    started,
                    started_text,
                    success: a.success,
                    result,
                    latency: a.duration_ms,
                    excerpt: a.response_excerpt.clone().filter(|x| !x.is_empty()),
                }
            })
            .collect(),
    }
}

async fn card_page(
    st: &CabinetState,
    current: &Current,
    payment: &Payment,
    project: &Project,
    notice: Option<String>,
    error: Option<String>,
) -> Result<Card, Response> {
    let events = st
        .cabinet
        .service()
        .store()
        .events_for_payment(payment.id)
        .await
        .map_err(|e| PageError::from(e).render(st))?;
    let mut chrome = st
        .chrome(
            format!("Payment {}", payment.merchant_payment_id.as_str()),
            Some(current),
        )
        .section("projects")
        .crumbs(vec![
            Link::new("/projects", "Projects and API"),
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

pub(crate) async fn card(
    State(st): State<CabinetState>,
    signed: Signed,
    Path(id): Path<String>,
    Query(q): Query<CardQuery>,
) -> PageResult {
    let (payment, project) = visible_payment(&st, &signed.current, &id).await?;
    let notice = match q.done.as_deref() {
        Some("operated") => Some(format!("Done: the payment is {}.", payment.status)),
        Some("resent") => Some("A callback was queued: it appears under Callback events.".into()),
        _ => None,
    };
    // A refused operation, once: its reason and status.
    let flash = once::flash(
        &st,
        Some(signed.current.session.id),
        q.flash.as_deref(),
        &card_name(&payment),
    )
    .await?;
    let error = flash
        .as_ref()
        .and_then(|f| f.errors.first())
        .map(|(_, m)| m.clone());
    let page = ok(&card_page(&st, &signed.current, &payment, &project, notice, error).await?);
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
            .test_outcome(&project, &payment.id.to_string(), t.clone(), &actor)
            .await
            .map(|_| t)
            .map_err(|e| {
                let e = payments_core::ApiError::from(e);
                (status(&e), e.message)
            }),
        // The merchant's "send callback" of a closed test payment (the spec's resend, which
        // the merchant may ask for a test payment): the merchant API's operation.
        Ok(Trigger::ResendCallback) if payment.is_test() && !signed.current.is_support() => service
            .resend_payment_callback(&project, payment.id, &actor)
            .await
            .map(|_| Trigger::ResendCallback)
            .map_err(|e| (status(&e), e.message)),
        // Support's operations: the operator's.
        Ok(t) if signed.current.is_support() => service
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
            let name = if test || !signed.current.is_support() {
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
                Some(signed.current.session.id),
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
    // Support resends any payment's callback; a merchant's user a test payment's.
    if !signed.current.is_support() && !payment.is_test() {
        return Err(PageError::NotFound.render(&st));
    }
    Ok(ok(&Confirm {
        chrome: st
            .chrome(
                format!("Resend the callback of {}?", payment.merchant_payment_id.as_str()),
                Some(&signed.current),
            )
            .section("projects"),
        paragraphs: vec![
            format!(
                "A new callback event with a new event_id and the payment's current status ({}) is sent once, signed like any callback, to the payment's callback destination. No automatic retries follow.",
                payment.status
            ),
            "Only a closed payment can be resent; for another the service refuses and says why."
                .into(),
        ],
        action: format!("/payments/{}/resend", payment.id),
        button: "Resend the callback".into(),
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
        .store()
        .find_events(&query)
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
    Ok(ok(&Deliveries {
        chrome: st
            .chrome(
                format!("{}: callback deliveries", project.name),
                Some(&signed.current),
            )
            .section("projects")
            .crumbs(vec![Link::new("/projects", "Projects and API")]),
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
        resend: signed.current.is_support(),
        next,
    }))
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
