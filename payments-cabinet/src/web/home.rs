//! The home page (`GET /` for a merchant's user): the business at a glance. Today's, the last
//! 7 and the last 30 days' payments (created, completed, conversion, canceled and failed, the
//! completed volume by currency) from the core's
//! [`overview`](payments_core::service::Payments::overview), a chart of the 30 days' completed
//! volume drawn as SVG on the server (no script; the same figures are a table under it), the
//! newest payments, and each project's callback health: the deliveries that failed in the
//! last 7 days and those still pending, with a warning where callbacks keep failing.
//!
//! Days are days in the user's time zone (UTC until chosen on the security page). Support users see every merchant's projects, so `/` takes them to the
//! projects list instead.

use std::time::Duration;

use askama::Template;
use axum::extract::State;
use axum::response::{IntoResponse, Redirect, Response};
use payments_core::event::DeliveryState;
use payments_core::project::Project;
use payments_core::service::PaymentListQuery;
use payments_core::store::EventQuery;
use payments_core::totals::{day_start, Overview, Summary, Volume};

use super::extract::Signed;
use super::i18n::{tr, trf, zone_name, zone_offset_ms};
use super::page::{ok, OrPage, PageResult};
use super::search::searchable_projects;
use super::state::CabinetState;
use super::views::{money, percent, when, Chrome, ListTotals};

/// The newest payments the home page lists.
pub const RECENT: usize = 8;

/// The deliveries of a project the health table counts at most, per state (a count at the
/// bound reads "100+").
pub const HEALTH_COUNT: usize = 100;

/// How far back the health table counts failed deliveries.
pub const HEALTH_WINDOW: Duration = Duration::from_secs(7 * 24 * 3600);

/// One period's figures as the page shows them.
#[derive(Debug, Clone)]
pub(crate) struct PeriodCard {
    pub(crate) id: &'static str,
    pub(crate) label: String,
    pub(crate) created: u64,
    pub(crate) completed: u64,
    pub(crate) conversion: String,
    pub(crate) canceled: u64,
    pub(crate) failed: u64,
    /// The completed volume, one text per currency ("no payments completed" when none).
    pub(crate) volume: Vec<String>,
}

/// One bar of the chart, in the SVG's own units.
#[derive(Debug, Clone)]
pub(crate) struct Bar {
    pub(crate) x: u32,
    pub(crate) y: u32,
    pub(crate) height: u32,
    /// What a pointer over the bar shows (its `<title>`).
    pub(crate) title: String,
}

/// One day of the chart's table.
#[derive(Debug, Clone)]
pub(crate) struct DayRow {
    pub(crate) date: String,
    pub(crate) created: u64,
    pub(crate) completed: u64,
    pub(crate) volume: String,
}

/// The chart of the 30 days' completed volume in one currency.
#[derive(Debug, Clone)]
pub(crate) struct Chart {
    /// The chart's accessible name.
    pub(crate) title: String,
    pub(crate) currency: String,
    pub(crate) peak: String,
    pub(crate) bars: Vec<Bar>,
    pub(crate) days: Vec<DayRow>,
}

/// One of the newest payments.
#[derive(Debug, Clone)]
pub(crate) struct RecentRow {
    pub(crate) id: String,
    pub(crate) order: String,
    pub(crate) project: String,
    pub(crate) amount: String,
    pub(crate) status: String,
    pub(crate) created: String,
    pub(crate) created_text: String,
}

/// One project's callback health.
#[derive(Debug, Clone)]
pub(crate) struct ProjectHealth {
    pub(crate) id: String,
    pub(crate) name: String,
    pub(crate) test_mode: bool,
    pub(crate) failed: String,
    pub(crate) pending: String,
    /// Deliveries failed in the window: callbacks keep failing.
    pub(crate) failing: bool,
}

/// `GET /` for a merchant's user.
#[derive(Template)]
#[template(path = "home.html")]
pub(crate) struct HomePage {
    pub(crate) chrome: Chrome,
    pub(crate) cards: Vec<PeriodCard>,
    pub(crate) chart: Option<Chart>,
    pub(crate) recent: Vec<RecentRow>,
    pub(crate) projects: Vec<ProjectHealth>,
    /// Whether every payment of the 30 days was summed.
    pub(crate) complete: bool,
}

/// `GET /`: the home page for a merchant's user, the projects list for support, the sign-in
/// page for anyone else.
pub(crate) async fn home(State(st): State<CabinetState>, current: Option<Signed>) -> Response {
    match current {
        Some(signed) if !signed.current.is_support() => match page(&st, &signed).await {
            Ok(page) | Err(page) => page,
        },
        Some(_) => Redirect::to("/projects").into_response(),
        None => Redirect::to("/sign-in").into_response(),
    }
}

async fn page(st: &CabinetState, signed: &Signed) -> PageResult {
    let projects = searchable_projects(st, &signed.current).await?;
    let payments = st.cabinet.service().payments();
    let offset = zone_offset_ms(st.cabinet.service().ports().clock.now());
    let overview = payments.overview(&projects, offset).await.or_page(st)?;
    let recent = payments
        .list_payments_across(
            &projects,
            &PaymentListQuery {
                limit: RECENT,
                ..PaymentListQuery::default()
            },
            &[],
        )
        .await
        .or_page(st)?;
    let mut health = Vec::with_capacity(projects.len());
    for project in &projects {
        health.push(project_health(st, project).await?);
    }
    let name_of = |id| {
        projects
            .iter()
            .find(|p| p.id == id)
            .map_or(String::new(), |p| p.name.clone())
    };
    Ok(ok(&HomePage {
        chrome: st.chrome(tr("Home"), Some(&signed.current)).section("home"),
        cards: cards(&overview),
        chart: chart(&overview),
        recent: recent
            .payments
            .iter()
            .map(|p| {
                let (created, created_text) = when(p.created_at);
                RecentRow {
                    id: p.id.to_string(),
                    order: p.merchant_payment_id.as_str().to_string(),
                    project: name_of(p.project_id),
                    amount: money(Volume::of(&p.amount), p.currency),
                    status: p.status.as_str().to_string(),
                    created,
                    created_text,
                }
            })
            .collect(),
        projects: health,
        complete: overview.complete,
    }))
}

/// A project's failed deliveries of the last [`HEALTH_WINDOW`] and its pending ones, each
/// counted up to [`HEALTH_COUNT`].
async fn project_health(st: &CabinetState, project: &Project) -> Result<ProjectHealth, Response> {
    let callbacks = st.cabinet.service().callbacks();
    let now = st.cabinet.service().ports().clock.now();
    let count = |state, since| EventQuery {
        state: Some(state),
        created_from: since,
        ..EventQuery::new(project.id, HEALTH_COUNT)
    };
    let failed = callbacks
        .events_page(&count(DeliveryState::Failed, Some(now - HEALTH_WINDOW)))
        .await
        .or_page(st)?
        .len();
    let pending = callbacks
        .events_page(&count(DeliveryState::Pending, None))
        .await
        .or_page(st)?
        .len();
    let bounded = |n: usize| {
        if n >= HEALTH_COUNT {
            format!("{HEALTH_COUNT}+")
        } else {
            n.to_string()
        }
    };
    Ok(ProjectHealth {
        id: project.id.to_string(),
        name: project.name.clone(),
        test_mode: project.test_mode,
        failed: bounded(failed),
        pending: bounded(pending),
        failing: failed > 0,
    })
}

pub(crate) fn cards(o: &Overview) -> Vec<PeriodCard> {
    [
        ("today", tr("Today"), &o.day),
        ("week", tr("Last 7 days"), &o.week),
        ("month", tr("Last 30 days"), &o.month),
    ]
    .into_iter()
    .map(|(id, label, s)| PeriodCard {
        id,
        label: label.to_string(),
        created: s.created,
        completed: s.completed,
        conversion: s.conversion_permille().map_or("—".to_string(), percent),
        canceled: s.canceled,
        failed: s.failed,
        volume: volumes(s),
    })
    .collect()
}

fn volumes(s: &Summary) -> Vec<String> {
    if s.volume.is_empty() {
        return vec![tr("nothing completed").to_string()];
    }
    s.volume.iter().map(|(c, v)| money(*v, *c)).collect()
}

/// The chart's width and height, in the SVG's units; each day is a slot of `SLOT` with a bar
/// of `SLOT - 2`.
const WIDTH: u32 = 600;
const HEIGHT: u32 = 120;
const SLOT: u32 = 20;

/// The 30 days' completed volume in the currency with the most of it; `None` when nothing
/// was completed.
pub(crate) fn chart(o: &Overview) -> Option<Chart> {
    let (&currency, _) = o.month.volume.iter().max_by_key(|(_, v)| **v)?;
    let of = |s: &Summary| s.volume.get(&currency).copied().unwrap_or_default();
    let peak = o.daily.iter().map(|(_, s)| of(s)).max()?.micros().max(1);
    let height = |v: Volume| {
        u32::try_from(v.micros() * i128::from(HEIGHT) / peak).expect("at most the chart")
    };
    let mut bars = Vec::with_capacity(o.daily.len());
    let mut days = Vec::with_capacity(o.daily.len());
    for (i, (day, s)) in o.daily.iter().enumerate() {
        let date = day_start(*day, 0).to_rfc3339()[..10].to_string();
        let h = height(of(s));
        let slot = u32::try_from(i).expect("30 days") * SLOT;
        bars.push(Bar {
            x: slot + 1,
            y: HEIGHT - h,
            height: h,
            title: format!("{date}: {}", money(of(s), currency)),
        });
        days.push(DayRow {
            date,
            created: s.created,
            completed: s.completed,
            volume: money(of(s), currency),
        });
    }
    debug_assert!(bars.iter().all(|b| b.y + b.height == HEIGHT));
    let peak = money(Volume::from_micros(peak), currency);
    Some(Chart {
        title: trf(
            "Completed volume per day in {currency}; the highest day is {peak}",
            &[("currency", &currency.as_str()), ("peak", &peak)],
        ),
        currency: currency.as_str().to_string(),
        peak,
        bars,
        days,
    })
}

/// The totals of every payment of a project's list filter `query` (every page of it): the
/// core's [`totals`](payments_core::service::Payments::totals).
pub(crate) async fn list_totals(
    st: &CabinetState,
    query: &payments_core::store::PaymentQuery,
) -> Result<ListTotals, Response> {
    let totals = st
        .cabinet
        .service()
        .payments()
        .totals(
            query,
            zone_offset_ms(st.cabinet.service().ports().clock.now()),
        )
        .await
        .or_page(st)?;
    let all = totals.all();
    Ok(ListTotals {
        created: all.created,
        completed: all.completed,
        canceled: all.canceled,
        failed: all.failed,
        open: all.open,
        volume: volumes(&all),
        complete: totals.complete,
    })
}

/// The figures' caption: which payments they count.
pub(crate) fn coverage(complete: bool) -> String {
    if complete {
        trf("Days are days in {zone}.", &[("zone", &zone_name())])
    } else {
        trf(
            "Days are days in {zone}. The figures count the newest {n} payments of the period only.",
            &[
                ("zone", &zone_name()),
                ("n", &payments_core::totals::TOTALS_SCAN),
            ],
        )
    }
}

impl HomePage {
    /// The caption under the figures.
    pub(crate) fn coverage(&self) -> String {
        coverage(self.complete)
    }

    /// The chart's size, for the template.
    pub(crate) fn size(&self) -> (u32, u32) {
        (WIDTH, HEIGHT)
    }
}
