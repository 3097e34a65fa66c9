//! The team page of a merchant's owners and admins: the merchant's users with their roles and
//! projects, the invitation form (the link is shown once), and each member's page to change
//! the role or projects, send a new link, remove or restore. The rules are the accounts'
//! ([`Team`](crate::accounts::Team)); these pages read forms and show what it answers.

use askama::Template;
use axum::extract::{Path, Query, State};
use axum::http::{HeaderMap, StatusCode};
use axum::response::Response;
use payments_core::ids::{ProjectId, UserId};
use payments_core::project::Project;
use serde::Deserialize;

use super::extract::{FormData, Signed};
use super::i18n::{tr, trf};
use super::once::{self, Flash, Slot};
use super::page::{allowed, ok, see_other, PageError, PageResult};
use super::payments::origin;
use super::state::CabinetState;
use super::views::{role_text, when_text, Chrome, Confirm};
use crate::accounts::{Client, Current, Invite, Membership, Permission, TeamError};
use crate::store::{TeamRole, UserRecord};

/// One member in the team's table.
#[derive(Debug, Clone)]
pub(crate) struct MemberRow {
    pub(crate) id: String,
    pub(crate) email: String,
    pub(crate) role: &'static str,
    pub(crate) projects: String,
    pub(crate) state: &'static str,
    pub(crate) you: bool,
}

/// A role of the role form: its stored name, its label, whether it is chosen.
#[derive(Debug, Clone)]
pub(crate) struct RoleChoice {
    pub(crate) value: &'static str,
    pub(crate) label: &'static str,
    pub(crate) hint: &'static str,
    pub(crate) checked: bool,
}

/// A project of the projects form.
#[derive(Debug, Clone)]
pub(crate) struct ProjectChoice {
    pub(crate) id: String,
    pub(crate) name: String,
    pub(crate) checked: bool,
}

/// The role and projects fields, as the invitation form and a member's page show them.
#[derive(Debug, Clone)]
pub(crate) struct MembershipForm {
    pub(crate) roles: Vec<RoleChoice>,
    pub(crate) every_project: bool,
    pub(crate) projects: Vec<ProjectChoice>,
}

#[derive(Template)]
#[template(path = "team.html")]
pub(crate) struct TeamPage {
    pub(crate) chrome: Chrome,
    pub(crate) members: Vec<MemberRow>,
    pub(crate) email: String,
    pub(crate) form: MembershipForm,
}

#[derive(Template)]
#[template(path = "team_member.html")]
pub(crate) struct MemberPage {
    pub(crate) chrome: Chrome,
    pub(crate) member: MemberRow,
    pub(crate) form: MembershipForm,
    pub(crate) removed: bool,
}

#[derive(Debug, Deserialize, Default)]
pub(crate) struct TeamQuery {
    flash: Option<String>,
    done: Option<String>,
}

const TEAM_PAGE: &str = "team";

/// `GET /team`.
pub(crate) async fn team(
    State(st): State<CabinetState>,
    signed: Signed,
    Query(q): Query<TeamQuery>,
) -> PageResult {
    allowed(&st, &signed.current, Permission::Team)?;
    let current = &signed.current;
    let flash = once::flash(&st, current.session.id, q.flash.as_deref(), TEAM_PAGE).await?;
    let team = st.cabinet.team();
    let members = team
        .members(current)
        .await
        .map_err(|e| team_page_error(&st, e))?;
    let projects = team
        .projects(current)
        .await
        .map_err(|e| team_page_error(&st, e))?;
    let typed = |f: &str| flash.as_ref().and_then(|x| x.typed(f));
    let chosen = typed("projects").map(|list| parse_ids(&list));
    let membership = Membership {
        role: typed("role")
            .and_then(|r| TeamRole::parse(&r))
            .unwrap_or(TeamRole::Viewer),
        projects: chosen.filter(|_| typed("every_project").is_none()),
    };
    let chrome = st.chrome(tr("Team"), Some(current)).section("team");
    let page = TeamPage {
        chrome: once::with_errors(chrome.notice(notice(q.done.as_deref())), flash.as_ref()),
        members: members.iter().map(|m| row(m, &projects, current)).collect(),
        email: typed("email").unwrap_or_default(),
        form: membership_form(current, &membership, &projects),
    };
    Ok(once::answer(flash.as_ref(), ok(&page)))
}

fn notice(done: Option<&str>) -> Option<String> {
    match done {
        Some("changed") => Some(tr("The member's role and projects are saved.").into()),
        Some("removed") => Some(tr("The member is removed and signed out.").into()),
        Some("restored") => Some(tr("The member is restored.").into()),
        _ => None,
    }
}

/// `POST /team`: a new member and its invitation link, shown once.
pub(crate) async fn invite(
    State(st): State<CabinetState>,
    signed: Signed,
    client: Client,
    headers: HeaderMap,
    form: FormData,
) -> PageResult {
    allowed(&st, &signed.current, Permission::Team)?;
    let email = form.get("email").trim().to_string();
    let membership = read_membership(&form);
    let refuse = |field: &str, message: String| {
        let flash = Flash::new(TEAM_PAGE, StatusCode::UNPROCESSABLE_ENTITY)
            .error(field, message)
            .input("email", email.clone())
            .input("role", form.get("role"))
            .input("projects", form.all("project").join(" "));
        let flash = match form.get("every_project") {
            "" => flash,
            _ => flash.input("every_project", "1"),
        };
        once::refuse(&st, signed.current.session.id, "/team", "invite", flash)
    };
    let Some(membership) = membership else {
        return Ok(refuse(
            "role",
            tr("Choose a role, and at least one project or every project.").into(),
        )
        .await);
    };
    let team = st.cabinet.team();
    match team
        .invite(&signed.current, &client, &email, membership)
        .await
    {
        Ok(invite) => {
            let slot = invite_slot(&origin(&st, &headers), &invite);
            Ok(once::show_once(&st, signed.current.session.id, slot).await)
        }
        Err(TeamError::Api(e)) if e.code == payments_core::ErrorCode::BadRequest => {
            Ok(refuse("email", email_refusal(&e.message)).await)
        }
        Err(e) => Err(team_page_error(&st, e)),
    }
}

/// The invitation link on the page the answer leads to: a reload there issues nothing.
fn invite_slot(origin: &str, invite: &Invite) -> Slot {
    Slot::Value {
        title: tr("Team: invitation link").into(),
        section: "team".into(),
        heading: trf(
            "The invitation link for {email}",
            &[("email", &invite.user.email)],
        ),
        label: tr("Invitation link").into(),
        value: format!("{origin}/invite/{}", invite.token.expose()),
        notes: vec![
            trf(
                "Send it to {email} yourself. It works once, until {time}; with it they choose a password and set up a sign-in code.",
                &[("email", &invite.user.email), ("time", &when_text(invite.expires_at))],
            ),
            tr("The cabinet does not keep the link: a lost link is replaced from the member's page.").into(),
        ],
        back: format!("/team/{}", invite.user.id),
    }
}

/// The e-mail field's message of a refused invitation.
fn email_refusal(message: &str) -> String {
    if message.contains("already has a user") {
        tr("E-mail: this address already has a cabinet user.").into()
    } else {
        tr("E-mail: enter an address such as name@shop.example.").into()
    }
}

/// The role and projects a form chose: `every_project`, or the checked `project` boxes.
fn read_membership(form: &FormData) -> Option<Membership> {
    let role = TeamRole::parse(form.get("role"))?;
    if !form.get("every_project").is_empty() {
        return Some(Membership {
            role,
            projects: None,
        });
    }
    let chosen: Result<Vec<ProjectId>, _> = form.all("project").iter().map(|p| p.parse()).collect();
    match chosen {
        Ok(list) if !list.is_empty() => Some(Membership {
            role,
            projects: Some(list),
        }),
        _ => None,
    }
}

fn parse_ids(text: &str) -> Vec<ProjectId> {
    text.split(' ').filter_map(|p| p.parse().ok()).collect()
}

/// `GET /team/{id}`: a member's role, projects and state.
pub(crate) async fn member(
    State(st): State<CabinetState>,
    signed: Signed,
    Path(id): Path<String>,
    Query(q): Query<TeamQuery>,
) -> PageResult {
    let current = &signed.current;
    let user = member_of(&st, current, &id).await?;
    let page_name = format!("member:{}", user.id);
    let flash = once::flash(&st, current.session.id, q.flash.as_deref(), &page_name).await?;
    let projects = st
        .cabinet
        .team()
        .projects(current)
        .await
        .map_err(|e| team_page_error(&st, e))?;
    let membership = Membership {
        role: user.team_role,
        projects: user.projects.clone(),
    };
    let chrome = st.chrome(user.email.clone(), Some(current)).section("team");
    let page = MemberPage {
        chrome: once::with_errors(chrome.notice(notice(q.done.as_deref())), flash.as_ref()),
        member: row(&user, &projects, current),
        form: membership_form(current, &membership, &projects),
        removed: user.disabled,
    };
    Ok(once::answer(flash.as_ref(), ok(&page)))
}

async fn member_of(st: &CabinetState, current: &Current, id: &str) -> Result<UserRecord, Response> {
    allowed(st, current, Permission::Team)?;
    let not_found = || PageError::NotFound.render(st);
    let id: UserId = id.parse().map_err(|_| not_found())?;
    let members = st
        .cabinet
        .team()
        .members(current)
        .await
        .map_err(|e| team_page_error(st, e))?;
    members
        .into_iter()
        .find(|m| m.id == id)
        .ok_or_else(not_found)
}

/// `POST /team/{id}`: another role or other projects.
pub(crate) async fn change(
    State(st): State<CabinetState>,
    signed: Signed,
    client: Client,
    Path(id): Path<String>,
    form: FormData,
) -> PageResult {
    let user = member_of(&st, &signed.current, &id).await?;
    let Some(membership) = read_membership(&form) else {
        let message = tr("Choose a role, and at least one project or every project.");
        return Ok(refuse_member(&st, &signed, &user, "role", message.into()).await);
    };
    let team = st.cabinet.team();
    match team
        .change(&signed.current, &client, user.id, membership)
        .await
    {
        Ok(_) => Ok(see_other(&format!("/team/{}?done=changed", user.id))),
        Err(e) => refused_change(&st, &signed, &user, e).await,
    }
}

/// A refused change of a member, on the member's page (`409` for a rule of the team).
async fn refused_change(
    st: &CabinetState,
    signed: &Signed,
    user: &UserRecord,
    e: TeamError,
) -> PageResult {
    match e {
        TeamError::OwnersOnly | TeamError::LastOwner | TeamError::Yourself => {
            Ok(refuse_member(st, signed, user, "role", team_error_text(&e).into()).await)
        }
        other => Err(team_page_error(st, other)),
    }
}

async fn refuse_member(
    st: &CabinetState,
    signed: &Signed,
    user: &UserRecord,
    field: &str,
    message: String,
) -> Response {
    let flash =
        Flash::new(format!("member:{}", user.id), StatusCode::CONFLICT).error(field, message);
    let path = format!("/team/{}", user.id);
    once::refuse(st, signed.current.session.id, &path, "membership", flash).await
}

/// `POST /team/{id}/invite`: a new invitation link, shown once.
pub(crate) async fn reinvite(
    State(st): State<CabinetState>,
    signed: Signed,
    client: Client,
    headers: HeaderMap,
    Path(id): Path<String>,
) -> PageResult {
    let user = member_of(&st, &signed.current, &id).await?;
    let team = st.cabinet.team();
    match team.reinvite(&signed.current, &client, user.id).await {
        Ok(invite) => {
            let slot = invite_slot(&origin(&st, &headers), &invite);
            Ok(once::show_once(&st, signed.current.session.id, slot).await)
        }
        Err(e) => refused_change(&st, &signed, &user, e).await,
    }
}

/// `GET /team/{id}/remove`: what removing does, and the button.
pub(crate) async fn remove_page(
    State(st): State<CabinetState>,
    signed: Signed,
    Path(id): Path<String>,
) -> PageResult {
    let user = member_of(&st, &signed.current, &id).await?;
    Ok(ok(&Confirm {
        chrome: st
            .chrome(trf("Remove {email}?", &[("email", &user.email)]), Some(&signed.current))
            .section("team"),
        paragraphs: vec![trf(
            "{email} can no longer sign in, and is signed out now. What they did stays in the audit log. You can restore them later with the same role and projects.",
            &[("email", &user.email)],
        )],
        action: format!("/team/{}/remove", user.id),
        button: tr("Remove from the team").into(),
        danger: true,
        cancel: format!("/team/{}", user.id),
    }))
}

/// `POST /team/{id}/remove`.
pub(crate) async fn remove(
    State(st): State<CabinetState>,
    signed: Signed,
    client: Client,
    Path(id): Path<String>,
) -> PageResult {
    removal(&st, &signed, &client, &id, true).await
}

/// `POST /team/{id}/restore`.
pub(crate) async fn restore(
    State(st): State<CabinetState>,
    signed: Signed,
    client: Client,
    Path(id): Path<String>,
) -> PageResult {
    removal(&st, &signed, &client, &id, false).await
}

/// Removes or restores a member, then the team (removed) or the member's page (restored).
async fn removal(
    st: &CabinetState,
    signed: &Signed,
    client: &Client,
    id: &str,
    removed: bool,
) -> PageResult {
    let user = member_of(st, &signed.current, id).await?;
    let team = st.cabinet.team();
    let (result, next) = if removed {
        let r = team.remove(&signed.current, client, user.id).await;
        (r, "/team?done=removed".to_string())
    } else {
        let r = team.restore(&signed.current, client, user.id).await;
        (r, format!("/team/{}?done=restored", user.id))
    };
    match result {
        Ok(_) => Ok(see_other(&next)),
        Err(e) => refused_change(st, signed, &user, e).await,
    }
}

/// A refusal that is no rule of the form: "not allowed" for a role without the team, else
/// the service's error page.
fn team_page_error(st: &CabinetState, e: TeamError) -> Response {
    match e {
        TeamError::NotAllowed => PageError::Forbidden.render(st),
        TeamError::NotFound => PageError::NotFound.render(st),
        TeamError::Api(e) => PageError::from(e).render(st),
        other => PageError::Conflict(team_error_text(&other).into()).render(st),
    }
}

/// A rule of the team in the page's language.
fn team_error_text(e: &TeamError) -> &'static str {
    match e {
        TeamError::OwnersOnly => tr("Only an owner adds, changes or removes an owner."),
        TeamError::LastOwner => {
            tr("The team keeps at least one owner: make someone else an owner first.")
        }
        TeamError::Yourself => tr("You cannot remove yourself; another owner or admin can."),
        TeamError::ForeignProject => tr("A chosen project is not one of the merchant's."),
        _ => tr("The service cannot answer now. Try again in a moment."),
    }
}

fn row(user: &UserRecord, projects: &[Project], current: &Current) -> MemberRow {
    let state = if user.disabled {
        tr("removed")
    } else if user.password_hash.is_none() {
        tr("invited")
    } else if user.totp_confirmed_at.is_none() {
        tr("sign-in code not set up")
    } else {
        tr("active")
    };
    MemberRow {
        id: user.id.to_string(),
        email: user.email.clone(),
        role: role_text(user.team_role),
        projects: projects_text(user.projects.as_deref(), projects),
        state,
        you: user.id == current.user.id,
    }
}

/// What a role does, for the role form.
fn role_hint(role: TeamRole) -> &'static str {
    match role {
        TeamRole::Owner => tr("Everything, the team and its owners included."),
        TeamRole::Admin => tr("Everything but the owners: adds, changes and removes everyone else."),
        TeamRole::Developer => tr("API access (tokens, keys, allow-list, callbacks, payer page, requests), test outcomes and resends; reads payments."),
        TeamRole::Finance => tr("Balances, statements and exports; reads payments."),
        TeamRole::SupportAgent => tr("Payments, callback resends and appeals."),
        TeamRole::Viewer => tr("Reads payments and callback deliveries; changes nothing."),
    }
}

/// A member's projects by name (`every project` without a list).
fn projects_text(chosen: Option<&[ProjectId]>, projects: &[Project]) -> String {
    let Some(chosen) = chosen else {
        return tr("every project").into();
    };
    let names: Vec<&str> = projects
        .iter()
        .filter(|p| chosen.contains(&p.id))
        .map(|p| p.name.as_str())
        .collect();
    names.join(", ")
}

/// The role and projects fields for `membership`: an admin is not offered the owner role.
fn membership_form(
    current: &Current,
    membership: &Membership,
    projects: &[Project],
) -> MembershipForm {
    let owner = current.user.team_role == TeamRole::Owner;
    MembershipForm {
        roles: TeamRole::ALL
            .into_iter()
            .filter(|r| owner || *r != TeamRole::Owner || membership.role == TeamRole::Owner)
            .map(|r| RoleChoice {
                value: r.name(),
                label: role_text(r),
                hint: role_hint(r),
                checked: r == membership.role,
            })
            .collect(),
        every_project: membership.projects.is_none(),
        projects: projects
            .iter()
            .map(|p| ProjectChoice {
                id: p.id.to_string(),
                name: p.name.clone(),
                checked: membership
                    .projects
                    .as_ref()
                    .is_some_and(|l| l.contains(&p.id)),
            })
            .collect(),
    }
}
