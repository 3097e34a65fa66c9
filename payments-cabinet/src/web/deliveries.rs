//! Callback deliveries: a project's list, an event's page with its attempts, resending one
//! event and recovering the failed ones.

use crate::accounts::Permission;
use axum::extract::{Path, Query, State};
use axum::http::StatusCode;
use axum::response::Response;
use payments_core::event::{DeliveryState, EventRecord};
use payments_core::ids::EventId;
use payments_core::project::Project;
use payments_core::store::EventQuery;

use super::extract::Signed;
use super::i18n::{tr, trf};
use super::once::{self, Flash};
use super::operations::status;
use super::page::{ok, see_other, OrPage, PageError, PageResult};
use super::payments::{event_view, CardQuery};
use super::projects::{project_view, visible_project};
use super::query::{cursor, date, date_end, encode, DAY, PAGE_SIZE};
use super::state::CabinetState;
use super::views::{Choice, Chrome, Confirm, Deliveries, EventView, Link};
use crate::accounts::{Change, Client, Current};
use askama::Template;

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

impl DeliveryFilters {
    /// The list query of the filters: one row more than a page, to know whether more follow.
    fn query(&self, project: &Project) -> EventQuery {
        EventQuery {
            project: project.id,
            state: DeliveryState::parse(self.state.trim()),
            payment: self.payment.trim().parse().ok(),
            event: None,
            created_from: date(&self.from),
            created_to: date_end(&self.to),
            before: cursor::<EventId>(&self.before),
            limit: PAGE_SIZE + 1,
        }
    }

    /// The link to the next page, after the last of the (full) page `found`.
    fn next_link(&self, project: &Project, found: &[EventRecord]) -> String {
        let last = &found
            .last()
            .expect("a full page has a last row")
            .outbox
            .event;
        format!(
            "/projects/{}/deliveries?state={}&payment={}&from={}&to={}&before={}_{}",
            project.id,
            encode(&self.state),
            encode(&self.payment),
            encode(&self.from),
            encode(&self.to),
            last.created_at.unix_millis(),
            last.event_id
        )
    }

    /// After a recovery: how many payments were resent and skipped, and whether more remain.
    fn recovery_notice(&self) -> Option<String> {
        self.recovered.map(|n| {
            let text = trf(
                "Resent the callbacks of {count} payments; {skipped} skipped.",
                &[("count", &n), ("skipped", &self.skipped.unwrap_or(0))],
            );
            if self.more == Some(true) {
                format!(
                    "{text} {}",
                    tr("More undelivered events remain: resend again.")
                )
            } else {
                text
            }
        })
    }

    /// The date the recovery form starts from: the filter's, else a day ago.
    fn since(&self, st: &CabinetState) -> String {
        if self.from.trim().is_empty() {
            (st.cabinet.service().ports().clock.now() - DAY)
                .to_rfc3339()
                .chars()
                .take(10)
                .collect()
        } else {
            self.from.trim().to_string()
        }
    }
}

pub(crate) async fn deliveries(
    State(st): State<CabinetState>,
    signed: Signed,
    Path(id): Path<String>,
    Query(f): Query<DeliveryFilters>,
) -> PageResult {
    let (project, merchant) =
        visible_project(&st, &signed.current, &id, Permission::Payments).await?;
    let state = DeliveryState::parse(f.state.trim());
    let mut found = st
        .cabinet
        .service()
        .callbacks()
        .events_page(&f.query(&project))
        .await
        .or_page(&st)?;
    let more = found.len() > PAGE_SIZE;
    found.truncate(PAGE_SIZE);
    let next = more.then(|| f.next_link(&project, &found));
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
        .notice(f.recovery_notice());
    let chrome = once::with_errors(chrome, flash.as_ref());
    let since = f.since(&st);
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

/// A project's event the user may see, or "not found" (or "not allowed" without `need`).
async fn visible_event(
    st: &CabinetState,
    current: &Current,
    project: &str,
    event: &str,
    need: Permission,
) -> Result<(Project, EventRecord), Response> {
    let (project, _) = visible_project(st, current, project, need).await?;
    let not_found = || PageError::NotFound.render(st);
    let id: EventId = event.parse().map_err(|_| not_found())?;
    let record = st
        .cabinet
        .service()
        .callbacks()
        .project_event(&project, id)
        .await
        .or_page(st)?
        .ok_or_else(not_found)?;
    Ok((project, record))
}

pub(crate) async fn event_page(
    State(st): State<CabinetState>,
    signed: Signed,
    Path((project, event)): Path<(String, String)>,
    Query(q): Query<CardQuery>,
) -> PageResult {
    let (project, record) =
        visible_event(&st, &signed.current, &project, &event, Permission::Payments).await?;
    let event_id = record.outbox.event.event_id;
    let sent = st
        .cabinet
        .service()
        .callbacks()
        .sent_request(&project, &record)
        .await
        .or_page(&st)?;
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
    let (project, record) =
        visible_event(&st, &signed.current, &project, &event, Permission::Resend).await?;
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
    let (project, record) =
        visible_event(&st, &signed.current, &project, &event, Permission::Resend).await?;
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
                .audit_log()
                .change(
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
                .or_page(&st)?;
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
    let (project, _) = visible_project(&st, &signed.current, &id, Permission::Resend).await?;
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
    let (project, _) = visible_project(&st, &signed.current, &id, Permission::Resend).await?;
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
        .or_page(&st)?;
    st.cabinet
        .audit_log()
        .change(
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
        .or_page(&st)?;
    Ok(see_other(&format!(
        "{back}?recovered={}&skipped={}&more={}",
        report.resent.len(),
        report.skipped.len(),
        report.more
    )))
}

// --- the search across projects --------------------------------------------------------------
