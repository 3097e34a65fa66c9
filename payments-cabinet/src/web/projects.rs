//! Projects and API: the list of projects, and a project's External API access page (tokens,
//! signing keys, the IP allow-list, the callback URL and secret, the settings a merchant may
//! see). The access page's forms are in `credentials` (tokens, keys) and `settings` (allow-list,
//! callback URL and secret); every change is a call of the core's provisioning operation,
//! recorded in both audit logs.

use crate::accounts::Permission;
use crate::store::Role;
use axum::extract::{Path, Query, State};
use axum::http::StatusCode;
use axum::response::Response;
use payments_core::auth::Scope;
use payments_core::callback::ROTATION_OVERLAP;
use payments_core::ids::{KeyId, ProjectId, TokenId};
use payments_core::project::{KeyRecord, Merchant, Project, TokenRecord};
use payments_core::Timestamp;
use std::time::Duration;

use super::extract::Signed;
use super::i18n::{tr, trf};
use super::once::{self, Flash};
use super::page::{allowed, error_page, ok, OrPage, PageError, PageResult};
use super::state::CabinetState;
use super::views::{
    when, when_text, Access, Chrome, Confirm, KeyRow, LineError, Link, MerchantGroup, ProjectRow,
    ProjectView, Projects, SecretLine, TokenRow,
};
use crate::accounts::Current;
use payments_core::store::CredentialStoreExt;
use payments_core::store::MerchantStoreExt;

/// A project the user works on ([`Current::works_on`]: a merchant user's own merchant's that
/// its team role names, any for support), for a page or form that needs `need`. Anything
/// else, and an id that does not parse, is "not found", whatever exists; a project the user
/// works on without `need` is "not allowed" ([`PageError::Forbidden`]).
pub(crate) async fn visible_project(
    st: &CabinetState,
    current: &Current,
    id: &str,
    need: Permission,
) -> Result<(Project, Merchant), Response> {
    let not_found = || PageError::NotFound.render(st);
    let id: ProjectId = id.parse().map_err(|_| not_found())?;
    let store = st.cabinet.service().store();
    let project = store.project(id).await.or_page(st)?.ok_or_else(not_found)?;
    if !current.works_on(&project) {
        return Err(not_found());
    }
    allowed(st, current, need)?;
    let merchant = store
        .merchant(project.merchant_id)
        .await
        .or_page(st)?
        .ok_or_else(not_found)?;
    Ok((project, merchant))
}

fn state_text(p: &Project, m: &Merchant) -> String {
    let mut parts = Vec::new();
    parts.push(if p.active {
        tr("active")
    } else {
        tr("inactive (tokens refused)")
    });
    if p.paused {
        parts.push(tr("paused (new payments refused)"));
    }
    if m.paused {
        parts.push(tr("merchant paused"));
    }
    parts.join(", ")
}

fn duration_text(d: Duration) -> String {
    let s = d.as_secs();
    match (s / 3600, (s % 3600) / 60, s % 60) {
        (0, m, 0) => trf("{m} min", &[("m", &m)]),
        (h, 0, 0) => trf("{h} h", &[("h", &h)]),
        (h, m, 0) => trf("{h} h {m} min", &[("h", &h), ("m", &m)]),
        _ => trf("{s} s", &[("s", &s)]),
    }
}

pub(crate) fn project_view(p: &Project, m: &Merchant) -> ProjectView {
    ProjectView {
        id: p.id.to_string(),
        merchant_name: m.name.clone(),
        test_mode: p.test_mode,
        state: state_text(p, m),
        lifetime: duration_text(p.lifetime),
        signature_required: p.signature_required,
        payer_page: p.payer_page.then_some(match p.payer_language {
            payments_core::payer::PageLanguage::En => tr("on, in English"),
            _ => tr("on, in Russian"),
        }),
        rate_limit: trf(
            "{rate} requests per second, bursts of {burst}",
            &[
                ("rate", &p.rate_limit.per_second),
                ("burst", &p.rate_limit.burst),
            ],
        ),
        contract: p
            .contract
            .methods
            .iter()
            .map(|t| {
                let bound = |d: Option<String>| d.unwrap_or_else(|| "-".to_string());
                let currencies = p
                    .contract
                    .currencies
                    .iter()
                    .map(|c| c.as_str())
                    .collect::<Vec<_>>()
                    .join("/");
                trf(
                    "{method}: {min} to {max} {currencies}, fee {fee} %",
                    &[
                        ("method", &t.method),
                        ("min", &bound(t.min_amount.map(|d| d.to_string()))),
                        ("max", &bound(t.max_amount.map(|d| d.to_string()))),
                        ("currencies", &currencies),
                        ("fee", &t.fee_percent.display()),
                    ],
                )
            })
            .collect(),
    }
}

pub(crate) async fn list(State(st): State<CabinetState>, signed: Signed) -> PageResult {
    let store = st.cabinet.service().store();
    let render = |e| error_page(e, &st);
    let merchants = match signed.current.user.role {
        Role::Merchant(m) => store
            .merchant(m)
            .await
            .map_err(render)?
            .into_iter()
            .collect(),
        Role::Support => store.merchants().await.map_err(render)?,
    };
    let projects = store.projects().await.map_err(render)?;
    let groups = merchants
        .iter()
        .map(|m| MerchantGroup {
            merchant_id: m.id.to_string(),
            merchant_name: m.name.clone(),
            paused: m.paused,
            projects: projects
                .iter()
                .filter(|p| p.merchant_id == m.id && signed.current.works_on(p))
                .map(|p| ProjectRow {
                    id: p.id.to_string(),
                    name: p.name.clone(),
                    test_mode: p.test_mode,
                    state: state_text(p, m),
                })
                .collect(),
        })
        .collect();
    Ok(ok(&Projects {
        chrome: st
            .chrome(tr("Projects and API"), Some(&signed.current))
            .section("projects"),
        groups,
    }))
}

/// What a redirect back to the access page may say.
#[derive(Debug, Default, serde::Deserialize)]
pub(crate) struct AccessQuery {
    #[serde(default)]
    done: Option<String>,
    #[serde(default)]
    key: Option<String>,
    #[serde(default)]
    flash: Option<String>,
}

/// Values the access page shows besides the stored state (a refused form's input and errors).
#[derive(Debug, Default)]
struct Draft {
    notice: Option<String>,
    errors: Vec<(String, String)>,
    token_name: String,
    token_lifetime: String,
    allow_list: Option<String>,
    allow_errors: Vec<LineError>,
    callback_url: Option<String>,
    highlight_key: Option<String>,
}

async fn access_page(
    st: &CabinetState,
    current: &Current,
    project: &Project,
    merchant: &Merchant,
    draft: Draft,
) -> Result<Access, Response> {
    let service = st.cabinet.service();
    let store = service.store();
    let render = |e| error_page(e, st);
    let tokens = store.tokens(project.id).await.map_err(render)?;
    let ids: Vec<TokenId> = tokens.iter().map(|t| t.id).collect();
    let used = st
        .cabinet
        .service()
        .store()
        .token_last_used(&ids)
        .await
        .map_err(render)?;
    let now = service.ports().clock.now();
    let tokens = token_rows(&tokens, &used, now);
    let keys = store.keys(project.id).await.map_err(render)?;
    let keys = key_rows(&keys, draft.highlight_key.as_deref());
    let secrets = store.callback_secrets(project.id).await.map_err(render)?;
    let secret_lines = secret_status(&secrets, now);
    let chrome = access_chrome(st, current, project, &draft);
    Ok(Access {
        chrome,
        tab: "access",
        project: project_view(project, merchant),
        tokens,
        scopes: Scope::ALL
            .iter()
            .map(|s| (s.as_str(), Scope::SUGGESTED.contains(s)))
            .collect(),
        keys,
        token_name: draft.token_name,
        lifetimes: TOKEN_LIFETIMES
            .iter()
            .map(|days| (*days, lifetime_label(days)))
            .collect(),
        token_lifetime: draft.token_lifetime,
        allow_list: draft
            .allow_list
            .unwrap_or_else(|| project.ip_allow_list.join("\n")),
        allow_errors: draft.allow_errors,
        callback_url: draft.callback_url.unwrap_or_else(|| {
            project
                .callback_url
                .as_ref()
                .map(|u| u.as_str().to_string())
                .unwrap_or_default()
        }),
        secrets: secret_lines,
    })
}

/// The access page's tokens, the usable ones first, newest first.
fn token_rows(
    tokens: &[TokenRecord],
    used: &[(TokenId, Timestamp)],
    now: Timestamp,
) -> Vec<TokenRow> {
    let mut rows: Vec<TokenRow> = tokens
        .iter()
        .map(|t| {
            let (created, created_text) = when(t.created_at);
            TokenRow {
                id: t.id.to_string(),
                name: t.name.clone().unwrap_or_else(|| tr("unnamed").into()),
                prefix: t.prefix.clone(),
                scopes: t
                    .scopes
                    .iter()
                    .map(|s| s.as_str())
                    .collect::<Vec<_>>()
                    .join(", "),
                created,
                created_text,
                expires: t.expires_at.map(when),
                last_used: used
                    .iter()
                    .find(|(id, _)| *id == t.id)
                    .map(|(_, at)| when(*at)),
                state: match (t.revoked_at, t.expires_at) {
                    (Some(at), _) => trf("revoked {time}", &[("time", &when_text(at))]),
                    (None, Some(at)) if t.expired_at(now) => trf(
                        "expired {time} (refused as revoked)",
                        &[("time", &when_text(at))],
                    ),
                    _ => tr("active").into(),
                },
                active: t.usable_at(now),
            }
        })
        .collect();
    rows.sort_by(|a, b| b.active.cmp(&a.active).then(b.created.cmp(&a.created)));
    rows
}

/// The access page's signing keys, the active ones first, newest first; `highlight` is the
/// key just added.
fn key_rows(keys: &[KeyRecord], highlight: Option<&str>) -> Vec<KeyRow> {
    let mut rows: Vec<KeyRow> = keys
        .iter()
        .map(|k| {
            let (created, created_text) = when(k.created_at);
            KeyRow {
                keyid: k.keyid.to_string(),
                created,
                created_text,
                state: match k.revoked_at {
                    Some(at) => trf("revoked {time}", &[("time", &when_text(at))]),
                    None => tr("active").into(),
                },
                active: k.revoked_at.is_none(),
                highlight: highlight == Some(k.keyid.as_str()),
            }
        })
        .collect();
    rows.sort_by(|a, b| b.active.cmp(&a.active).then(b.created.cmp(&a.created)));
    rows
}

/// The access page's chrome, with the draft's notice and the refused form's errors.
fn access_chrome(st: &CabinetState, current: &Current, project: &Project, draft: &Draft) -> Chrome {
    let mut chrome = st
        .chrome(
            trf(
                "{project}: External API access",
                &[("project", &project.name)],
            ),
            Some(current),
        )
        .section("projects")
        .crumbs(vec![Link::new("/projects", tr("Projects and API"))])
        .notice(draft.notice.clone());
    for (field, message) in &draft.errors {
        chrome = chrome.error(field, message.clone());
    }
    for e in &draft.allow_errors {
        chrome = chrome.error(
            "ip_allow_list",
            trf(
                "IP allow-list line {line}: {message}",
                &[("line", &e.line), ("message", &e.message)],
            ),
        );
    }
    chrome
}

/// The status of a project's callback secrets (newest first, at most two): when the current
/// one was issued and until when the previous one still signs.
fn secret_status(
    secrets: &[payments_core::project::SecretRecord],
    now: Timestamp,
) -> Vec<SecretLine> {
    let mut lines = Vec::new();
    if let Some(current) = secrets.first() {
        let time = when_text(current.created_at);
        let origin = if current.revealed {
            trf("issued {time}", &[("time", &time)])
        } else {
            trf(
                "created at the first delivery, {time}, and shown to nobody (issue a new one to verify callbacks)",
                &[("time", &time)],
            )
        };
        lines.push(SecretLine {
            label: tr("Current").into(),
            text: origin,
        });
        if let Some(previous) = secrets.get(1) {
            let until = current.created_at + ROTATION_OVERLAP;
            lines.push(SecretLine {
                label: tr("Previous").into(),
                text: if now < until {
                    trf(
                        "issued {issued}, still signs (as a second v1 value) until {until}",
                        &[
                            ("issued", &when_text(previous.created_at)),
                            ("until", &when_text(until)),
                        ],
                    )
                } else {
                    trf(
                        "issued {issued}, stopped signing {until}",
                        &[
                            ("issued", &when_text(previous.created_at)),
                            ("until", &when_text(until)),
                        ],
                    )
                },
            });
        }
    }
    lines
}

fn access_notice(q: &AccessQuery) -> Option<String> {
    match q.done.as_deref() {
        Some("token_revoked") => {
            Some(tr("The token is revoked: requests with it now fail.").into())
        }
        Some("key_revoked") => Some(tr("The key is revoked: it no longer verifies.").into()),
        Some("allow_list") => Some(tr("The IP allow-list is saved.").into()),
        Some("callback_url") => Some(tr("The callback URL is saved.").into()),
        _ => None,
    }
}

pub(crate) async fn access(
    State(st): State<CabinetState>,
    signed: Signed,
    Path(id): Path<String>,
    Query(q): Query<AccessQuery>,
) -> PageResult {
    let (project, merchant) =
        visible_project(&st, &signed.current, &id, Permission::Integration).await?;
    let mut draft = Draft {
        notice: access_notice(&q),
        ..Draft::default()
    };
    // A refused form of this page, once: its errors and what was typed.
    let flash = once::flash(
        &st,
        signed.current.session.id,
        q.flash.as_deref(),
        &access_page_name(&project),
    )
    .await?;
    if let Some(f) = &flash {
        draft.errors.clone_from(&f.errors);
        draft.token_name = f.typed("name").unwrap_or_default();
        draft.token_lifetime = f.typed("expires").unwrap_or_default();
        draft.allow_list = f.typed("ip_allow_list");
        draft.callback_url = f.typed("callback_url");
        draft.allow_errors = f
            .lines
            .iter()
            .map(|(line, message)| LineError {
                line: *line,
                message: message.clone(),
            })
            .collect();
    }
    if let Some(k) = &q.key {
        let registered = st
            .cabinet
            .service()
            .store()
            .key(project.id, &KeyId::new(k.clone()))
            .await
            .or_page(&st)?;
        if let Some(k) = registered {
            draft.notice = Some(trf("Key {keyid} is registered.", &[("keyid", &k.keyid)]));
            draft.highlight_key = Some(k.keyid.to_string());
        }
    }
    let page = ok(&access_page(&st, &signed.current, &project, &merchant, draft).await?);
    Ok(once::answer(flash.as_ref(), page))
}

/// The name of a project's access page in a refused form's slot.
fn access_page_name(project: &Project) -> String {
    format!("access:{}", project.id)
}

/// A refused form of the access page: `303` to the page, which shows `flash` (its errors and
/// input) once with `422`; `anchor` is the form's section.
pub(crate) async fn refused(
    st: &CabinetState,
    signed: &Signed,
    project: &Project,
    anchor: &str,
    flash: Flash,
) -> PageResult {
    Ok(once::refuse(
        st,
        signed.current.session.id,
        &format!("/projects/{}", project.id),
        anchor,
        flash,
    )
    .await)
}

/// A refused form of `project`'s access page, answered `422`.
pub(crate) fn refusal(project: &Project) -> Flash {
    Flash::new(access_page_name(project), StatusCode::UNPROCESSABLE_ENTITY)
}

/// The lifetimes a new token may be given in the cabinet, in days (empty: until revoked).
/// The core takes any lifetime of 1 to 3650 days.
const TOKEN_LIFETIMES: &[&str] = &["", "30", "90", "365"];

/// A lifetime's label in the form, in the page's language.
fn lifetime_label(days: &str) -> &'static str {
    match days {
        "30" => tr("30 days"),
        "90" => tr("90 days"),
        "365" => tr("365 days"),
        _ => tr("Never (until revoked)"),
    }
}

/// The lifetime chosen in the form: `Some(None)` for never, `None` for a value not offered.
pub(crate) fn token_lifetime(value: &str) -> Option<Option<Duration>> {
    let days = TOKEN_LIFETIMES.iter().find(|v| **v == value)?;
    Some(
        days.parse::<u64>()
            .ok()
            .map(|d| Duration::from_secs(d * 86_400)),
    )
}

pub(crate) fn access_path(project: &Project, query: &str, anchor: &str) -> String {
    format!("/projects/{}{query}#{anchor}", project.id)
}

pub(crate) fn confirm_page(
    st: &CabinetState,
    current: &Current,
    title: String,
    paragraphs: Vec<String>,
    action: String,
    button: &str,
    cancel: String,
) -> Response {
    ok(&Confirm {
        chrome: st.chrome(title, Some(current)).section("projects"),
        paragraphs,
        action,
        button: button.to_string(),
        danger: true,
        cancel,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn durations_read_as_people_write_them() {
        use std::time::Duration;
        assert_eq!(duration_text(Duration::from_secs(900)), "15 min");
        assert_eq!(duration_text(Duration::from_secs(7200)), "2 h");
        assert_eq!(duration_text(Duration::from_secs(5400)), "1 h 30 min");
        assert_eq!(duration_text(Duration::from_secs(61)), "61 s");
    }
}
