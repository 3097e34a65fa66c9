//! Projects and API -> project -> External API access: tokens, signing keys, the IP
//! allow-list, the callback URL and secret, and the settings a merchant may see. Every change
//! is a call of the core's provisioning operation, recorded in both audit logs.

use crate::store::Role;
use axum::extract::{Path, Query, State};
use axum::http::StatusCode;
use axum::response::Response;
use payments_core::auth::keys::{KeyConfirmation, KeyConfirmationError};
use payments_core::auth::{IpAllowList, Scope};
use payments_core::callback::ROTATION_OVERLAP;
use payments_core::ids::{KeyId, ProjectId, TokenId};
use payments_core::project::{Merchant, Project};
use payments_core::service::{AdminError, ProjectPatch, TokenRequest};
use payments_core::Timestamp;
use std::time::Duration;

use super::i18n::{tr, trf};
use super::once::{self, Flash, Slot};
use super::views::{
    when, when_text, Access, Confirm, KeyRow, LineError, Link, MerchantGroup, ProjectRow,
    ProjectView, Projects, SecretLine, TokenRow,
};
use super::{ok, see_other, CabinetState, FormData, PageError, PageResult, Signed};
use crate::accounts::{Change, Client, Current};
use payments_core::store::CredentialStoreExt;
use payments_core::store::MerchantStoreExt;

/// A project the user may see: a merchant user's own merchant's, any for support. Anything
/// else, and an id that does not parse, is "not found", whatever exists.
pub(crate) async fn visible_project(
    st: &CabinetState,
    current: &Current,
    id: &str,
) -> Result<(Project, Merchant), Response> {
    let not_found = || PageError::NotFound.render(st);
    let id: ProjectId = id.parse().map_err(|_| not_found())?;
    let store = st.cabinet.service().store();
    let project = store
        .project(id)
        .await
        .map_err(|e| PageError::from(e).render(st))?
        .ok_or_else(not_found)?;
    if let Role::Merchant(m) = current.user.role {
        if m != project.merchant_id {
            return Err(not_found());
        }
    }
    let merchant = store
        .merchant(project.merchant_id)
        .await
        .map_err(|e| PageError::from(e).render(st))?
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
    let render = |e| PageError::from(e).render(&st);
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
                .filter(|p| p.merchant_id == m.id)
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
    let render = |e| PageError::from(e).render(st);
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
    let mut tokens: Vec<TokenRow> = tokens
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
    tokens.sort_by(|a, b| b.active.cmp(&a.active).then(b.created.cmp(&a.created)));
    let mut keys: Vec<KeyRow> = store
        .keys(project.id)
        .await
        .map_err(render)?
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
                highlight: draft.highlight_key.as_deref() == Some(k.keyid.as_str()),
            }
        })
        .collect();
    keys.sort_by(|a, b| b.active.cmp(&a.active).then(b.created.cmp(&a.created)));
    let secrets = store.callback_secrets(project.id).await.map_err(render)?;
    let secret_lines = secret_status(&secrets, now);
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
        .notice(draft.notice);
    for (field, message) in draft.errors {
        chrome = chrome.error(&field, message);
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
    Ok(Access {
        chrome,
        tab: "access",
        project: project_view(project, merchant),
        tokens,
        scopes: Scope::ALL.iter().map(|s| s.as_str()).collect(),
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
    let (project, merchant) = visible_project(&st, &signed.current, &id).await?;
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
            .map_err(|e| PageError::from(e).render(&st))?;
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
async fn refused(
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
fn refusal(project: &Project) -> Flash {
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
fn token_lifetime(value: &str) -> Option<Option<Duration>> {
    let days = TOKEN_LIFETIMES.iter().find(|v| **v == value)?;
    Some(
        days.parse::<u64>()
            .ok()
            .map(|d| Duration::from_secs(d * 86_400)),
    )
}

fn access_path(project: &Project, query: &str, anchor: &str) -> String {
    format!("/projects/{}{query}#{anchor}", project.id)
}

pub(crate) async fn create_token(
    State(st): State<CabinetState>,
    signed: Signed,
    client: Client,
    Path(id): Path<String>,
    form: FormData,
) -> PageResult {
    let (project, merchant) = visible_project(&st, &signed.current, &id).await?;
    let name = form.get("name").to_string();
    let expires = form.get("expires").trim().to_string();
    let refuse = |field: &str, message: String| {
        let flash = refusal(&project)
            .error(field, message)
            .input("name", name.clone())
            .input("expires", expires.clone());
        refused(&st, &signed, &project, "tokens", flash)
    };
    let scopes: Result<Vec<Scope>, _> = form.all("scopes").iter().map(|s| s.parse()).collect();
    let scopes = match scopes {
        Ok(s) if !s.is_empty() => s,
        _ => return refuse("scopes", tr("Choose at least one scope.").into()).await,
    };
    let Some(lifetime) = token_lifetime(&expires) else {
        return refuse(
            "expires",
            tr("Expires: choose one of the offered periods.").into(),
        )
        .await;
    };
    let request = TokenRequest {
        scopes,
        name: Some(name.clone()),
        lifetime,
    };
    let issued = match st
        .cabinet
        .service()
        .directory()
        .issue_token_as(project.id, request, &signed.current.actor())
        .await
    {
        Ok(issued) => issued,
        Err(e) if e.code() == payments_core::ErrorCode::BadRequest => {
            let text = e.to_string();
            let (field, label) = if text.starts_with("name: ") {
                ("name", tr("Name"))
            } else if text.starts_with("expires: ") {
                ("expires", tr("Expires"))
            } else {
                ("scopes", tr("Scopes"))
            };
            let message = text.split_once(": ").map_or(text.as_str(), |(_, m)| m);
            // The field's name in the page's language, the core's message as it is.
            return refuse(field, format!("{label}: {message}")).await;
        }
        Err(e) => return Err(PageError::from(e).render(&st)),
    };
    st.cabinet
        .audit_change(
            &signed.current,
            &client,
            Change {
                merchant: merchant.id,
                project: Some(project.id),
                action: "token.issue",
                target: &issued.record.id.to_string(),
                detail: Some(match issued.record.expires_at {
                    Some(at) => format!(
                        "\"{}\", prefix {}, expires {}",
                        issued.record.name.as_deref().unwrap_or_default(),
                        issued.record.prefix,
                        when_text(at)
                    ),
                    None => format!(
                        "\"{}\", prefix {}, no expiry",
                        issued.record.name.as_deref().unwrap_or_default(),
                        issued.record.prefix
                    ),
                }),
            },
        )
        .await
        .map_err(|e| PageError::from(e).render(&st))?;
    let scopes: Vec<&str> = issued.record.scopes.iter().map(|s| s.as_str()).collect();
    // Shown once, on the page this answer leads to: a reload there issues nothing.
    let until = issued
        .record
        .expires_at
        .map_or(tr("works until revoked").to_string(), |at| {
            trf("expires {time}", &[("time", &when_text(at))])
        });
    let slot = Slot::Value {
        title: trf("{project}: new token", &[("project", &project.name)]),
        section: "projects".into(),
        heading: tr("Your new API token").into(),
        label: tr("Token").into(),
        value: issued.token.expose().to_string(),
        notes: vec![
            trf(
                "{name}: scopes {scopes}; {until}.",
                &[
                    ("name", &issued.record.name.as_deref().unwrap_or_default()),
                    ("scopes", &scopes.join(", ")),
                    ("until", &until),
                ],
            ),
            tr("Send it as Authorization: Bearer <token>. The list shows only its prefix from now on.")
                .into(),
        ],
        back: access_path(&project, "", "tokens"),
    };
    Ok(once::show_once(&st, signed.current.session.id, slot).await)
}

fn confirm_page(
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

pub(crate) async fn revoke_token_page(
    State(st): State<CabinetState>,
    signed: Signed,
    Path((id, token)): Path<(String, String)>,
) -> PageResult {
    let (project, _) = visible_project(&st, &signed.current, &id).await?;
    let record = own_token(&st, &project, &token).await?;
    Ok(confirm_page(
        &st,
        &signed.current,
        match &record.name {
            Some(name) => trf(
                "Revoke token “{name}” ({prefix}…)?",
                &[("name", name), ("prefix", &record.prefix)],
            ),
            None => trf("Revoke token {prefix}…?", &[("prefix", &record.prefix)]),
        },
        vec![
            trf(
                "Requests with the token {prefix}… of project {project} will fail with 401 token_invalid from the moment you confirm. This cannot be undone; issue a new token first if something still uses it.",
                &[("prefix", &record.prefix), ("project", &project.name)],
            ),
        ],
        format!("/projects/{}/tokens/{}/revoke", project.id, record.id),
        tr("Revoke the token"),
        access_path(&project, "", "tokens"),
    ))
}

async fn own_token(
    st: &CabinetState,
    project: &Project,
    token: &str,
) -> Result<payments_core::project::TokenRecord, Response> {
    let not_found = || PageError::NotFound.render(st);
    let id: TokenId = token.parse().map_err(|_| not_found())?;
    st.cabinet
        .service()
        .store()
        .tokens(project.id)
        .await
        .map_err(|e| PageError::from(e).render(st))?
        .into_iter()
        .find(|t| t.id == id)
        .ok_or_else(not_found)
}

pub(crate) async fn revoke_token(
    State(st): State<CabinetState>,
    signed: Signed,
    client: Client,
    Path((id, token)): Path<(String, String)>,
) -> PageResult {
    let (project, merchant) = visible_project(&st, &signed.current, &id).await?;
    let record = own_token(&st, &project, &token).await?;
    st.cabinet
        .service()
        .directory()
        .revoke_token(project.id, record.id, &signed.current.actor())
        .await
        .map_err(|e| PageError::from(e).render(&st))?;
    st.cabinet
        .audit_change(
            &signed.current,
            &client,
            Change {
                merchant: merchant.id,
                project: Some(project.id),
                action: "token.revoke",
                target: &record.id.to_string(),
                detail: Some(format!("prefix {}", record.prefix)),
            },
        )
        .await
        .map_err(|e| PageError::from(e).render(&st))?;
    Ok(see_other(&access_path(
        &project,
        "?done=token_revoked",
        "tokens",
    )))
}

pub(crate) async fn register_key(
    State(st): State<CabinetState>,
    signed: Signed,
    client: Client,
    Path(id): Path<String>,
    form: FormData,
) -> PageResult {
    let (project, merchant) = visible_project(&st, &signed.current, &id).await?;
    let input = form.get("public_key");
    // A raw 32-byte key is saved only with the keyid the merchant's generator printed: it may
    // be a private seed, whose keyid is another (the core's rule, `KeyConfirmation::pasted`).
    let confirmation = KeyConfirmation::pasted(Some(form.get("expected_keyid")));
    match st
        .cabinet
        .service()
        .directory()
        .register_key_confirmed(project.id, input, confirmation, &signed.current.actor())
        .await
    {
        Ok(record) => {
            st.cabinet
                .audit_change(
                    &signed.current,
                    &client,
                    Change {
                        merchant: merchant.id,
                        project: Some(project.id),
                        action: "key.register",
                        target: record.keyid.as_str(),
                        detail: None,
                    },
                )
                .await
                .map_err(|e| PageError::from(e).render(&st))?;
            Ok(see_other(&access_path(
                &project,
                &format!("?key={}", record.keyid),
                "keys",
            )))
        }
        Err(AdminError::KeyUnconfirmed(e)) => {
            // Nothing pasted comes back; the keyid of it does, for the merchant to compare.
            let flash = refusal(&project).error("expected_keyid", unconfirmed(&e));
            refused(&st, &signed, &project, "keys", flash).await
        }
        Err(e) if e.code() == payments_core::ErrorCode::BadRequest => {
            let text = e.to_string();
            let message = text
                .strip_prefix("public_key: ")
                .unwrap_or(&text)
                .to_string();
            // What was pasted is never carried back into the page (nor kept in the slot):
            // it may be a private key, and a public key is pasted again in a moment.
            let flash = refusal(&project).error(
                "public_key",
                trf("Public key: {message}", &[("message", &message)]),
            );
            refused(&st, &signed, &project, "keys", flash).await
        }
        Err(e) => Err(PageError::from(e).render(&st)),
    }
}

/// What the key form says when the keyid of a pasted key was not confirmed.
fn unconfirmed(e: &KeyConfirmationError) -> String {
    let keyid = e.derived().as_str();
    match e {
        KeyConfirmationError::Mismatch { .. } => trf(
            "What you pasted has keyid {keyid}, not the keyid you gave: it is not the public key your key generator printed that keyid for, and nothing was registered. If you pasted your private key, treat it as exposed and generate a new key pair.",
            &[("keyid", &keyid)],
        ),
        _ => trf(
            "What you pasted is a raw 32-byte key with keyid {keyid}, and nothing was registered: a raw key cannot be told from a private key's seed. If {keyid} is the keyid your key generator printed, paste the key again with it below; or paste the PEM public key.",
            &[("keyid", &keyid)],
        ),
    }
}

async fn own_key(
    st: &CabinetState,
    project: &Project,
    keyid: &str,
) -> Result<payments_core::project::KeyRecord, Response> {
    st.cabinet
        .service()
        .store()
        .key(project.id, &KeyId::new(keyid))
        .await
        .map_err(|e| PageError::from(e).render(st))?
        .ok_or_else(|| PageError::NotFound.render(st))
}

pub(crate) async fn revoke_key_page(
    State(st): State<CabinetState>,
    signed: Signed,
    Path((id, keyid)): Path<(String, String)>,
) -> PageResult {
    let (project, _) = visible_project(&st, &signed.current, &id).await?;
    let key = own_key(&st, &project, &keyid).await?;
    Ok(confirm_page(
        &st,
        &signed.current,
        tr("Revoke signing key?").into(),
        vec![trf(
            "Requests signed with {keyid} will fail with 401 signature_invalid from the moment you confirm. This cannot be undone.",
            &[("keyid", &key.keyid)],
        )],
        format!("/projects/{}/keys/{}/revoke", project.id, key.keyid),
        tr("Revoke the key"),
        access_path(&project, "", "keys"),
    ))
}

pub(crate) async fn revoke_key(
    State(st): State<CabinetState>,
    signed: Signed,
    client: Client,
    Path((id, keyid)): Path<(String, String)>,
) -> PageResult {
    let (project, merchant) = visible_project(&st, &signed.current, &id).await?;
    let key = own_key(&st, &project, &keyid).await?;
    st.cabinet
        .service()
        .directory()
        .revoke_key(project.id, &key.keyid, &signed.current.actor())
        .await
        .map_err(|e| PageError::from(e).render(&st))?;
    st.cabinet
        .audit_change(
            &signed.current,
            &client,
            Change {
                merchant: merchant.id,
                project: Some(project.id),
                action: "key.revoke",
                target: key.keyid.as_str(),
                detail: None,
            },
        )
        .await
        .map_err(|e| PageError::from(e).render(&st))?;
    Ok(see_other(&access_path(
        &project,
        "?done=key_revoked",
        "keys",
    )))
}

/// The allow-list's lines: blank lines dropped, each other line checked by the core's parser
/// on its own so that every bad line gets its own error (line numbers as typed).
fn allow_list_lines(text: &str) -> (Vec<String>, Vec<LineError>) {
    let mut rules = Vec::new();
    let mut errors = Vec::new();
    for (i, line) in text.lines().enumerate() {
        let rule = line.trim();
        if rule.is_empty() {
            continue;
        }
        match IpAllowList::parse([rule]) {
            Ok(_) => rules.push(rule.to_string()),
            Err(e) => errors.push(LineError {
                line: i + 1,
                message: e.to_string(),
            }),
        }
    }
    (rules, errors)
}

pub(crate) async fn allow_list(
    State(st): State<CabinetState>,
    signed: Signed,
    client: Client,
    Path(id): Path<String>,
    form: FormData,
) -> PageResult {
    let (project, merchant) = visible_project(&st, &signed.current, &id).await?;
    let text = form.get("ip_allow_list").to_string();
    let (rules, allow_errors) = allow_list_lines(&text);
    let refuse = |flash: Flash| {
        refused(
            &st,
            &signed,
            &project,
            "allow-list",
            flash.input("ip_allow_list", text.clone()),
        )
    };
    if !allow_errors.is_empty() {
        let mut flash = refusal(&project);
        flash.lines = allow_errors
            .into_iter()
            .map(|e| (e.line, e.message))
            .collect();
        return refuse(flash).await;
    }
    let before = project.ip_allow_list.join(", ");
    let patch = ProjectPatch {
        ip_allow_list: Some(rules.clone()),
        ..ProjectPatch::default()
    };
    match st
        .cabinet
        .service()
        .directory()
        .update_project(project.id, patch, &signed.current.actor())
        .await
    {
        Ok(_) => {
            st.cabinet
                .audit_change(
                    &signed.current,
                    &client,
                    Change {
                        merchant: merchant.id,
                        project: Some(project.id),
                        action: "project.ip_allow_list",
                        target: &project.id.to_string(),
                        detail: Some(format!("[{before}] -> [{}]", rules.join(", "))),
                    },
                )
                .await
                .map_err(|e| PageError::from(e).render(&st))?;
            Ok(see_other(&access_path(
                &project,
                "?done=allow_list",
                "allow-list",
            )))
        }
        Err(e) if e.code() == payments_core::ErrorCode::BadRequest => {
            refuse(refusal(&project).error("ip_allow_list", e.to_string())).await
        }
        Err(e) => Err(PageError::from(e).render(&st)),
    }
}

pub(crate) async fn callback_url(
    State(st): State<CabinetState>,
    signed: Signed,
    client: Client,
    Path(id): Path<String>,
    form: FormData,
) -> PageResult {
    let (project, merchant) = visible_project(&st, &signed.current, &id).await?;
    let url = form.get("callback_url").trim().to_string();
    let patch = ProjectPatch {
        callback_url: Some((!url.is_empty()).then(|| url.clone())),
        ..ProjectPatch::default()
    };
    match st
        .cabinet
        .service()
        .directory()
        .update_project(project.id, patch, &signed.current.actor())
        .await
    {
        Ok(after) => {
            let shown = after
                .callback_url
                .as_ref()
                .map_or("none".to_string(), |u| u.as_str().to_string());
            st.cabinet
                .audit_change(
                    &signed.current,
                    &client,
                    Change {
                        merchant: merchant.id,
                        project: Some(project.id),
                        action: "project.callback_url",
                        target: &project.id.to_string(),
                        detail: Some(shown),
                    },
                )
                .await
                .map_err(|e| PageError::from(e).render(&st))?;
            Ok(see_other(&access_path(
                &project,
                "?done=callback_url",
                "callback",
            )))
        }
        Err(e) if e.code() == payments_core::ErrorCode::BadRequest => {
            let flash = refusal(&project)
                .error(
                    "callback_url",
                    trf("Callback URL: {message}", &[("message", &e)]),
                )
                .input("callback_url", url);
            refused(&st, &signed, &project, "callback", flash).await
        }
        Err(e) => Err(PageError::from(e).render(&st)),
    }
}

fn overlap_hours() -> u64 {
    ROTATION_OVERLAP.as_secs() / 3600
}

pub(crate) async fn roll_secret_page(
    State(st): State<CabinetState>,
    signed: Signed,
    Path(id): Path<String>,
) -> PageResult {
    let (project, _) = visible_project(&st, &signed.current, &id).await?;
    let held = st
        .cabinet
        .service()
        .store()
        .callback_secrets(project.id)
        .await
        .map_err(|e| PageError::from(e).render(&st))?
        .len();
    let hours = overlap_hours();
    let mut paragraphs = vec![
        tr("A new callback secret is shown once, right after it is made.").to_string(),
        trf(
            "For {hours} hours after it, callbacks are signed with both the new and the current secret (two v1 values in X-Callback-Signature), so your receiver can switch without losing a callback.",
            &[("hours", &hours)],
        ),
        trf(
            "At most two secrets are valid at a time: issuing another within those {hours} hours drops the oldest at once.",
            &[("hours", &hours)],
        ),
    ];
    if held == 2 {
        paragraphs.push(
            tr("This project has two secrets now: the older of them stops signing when you confirm.")
                .into(),
        );
    }
    Ok(ok(&Confirm {
        chrome: st
            .chrome(
                trf(
                    "{project}: issue a callback secret",
                    &[("project", &project.name)],
                ),
                Some(&signed.current),
            )
            .section("projects"),
        paragraphs,
        action: format!("/projects/{}/callback-secret", project.id),
        button: tr("Issue a new secret").into(),
        danger: false,
        cancel: access_path(&project, "", "callback"),
    }))
}

pub(crate) async fn roll_secret(
    State(st): State<CabinetState>,
    signed: Signed,
    client: Client,
    Path(id): Path<String>,
) -> PageResult {
    let (project, merchant) = visible_project(&st, &signed.current, &id).await?;
    let secret = st
        .cabinet
        .service()
        .directory()
        .rotate_callback_secret(project.id, &signed.current.actor())
        .await
        .map_err(|e| PageError::from(e).render(&st))?;
    st.cabinet
        .audit_change(
            &signed.current,
            &client,
            Change {
                merchant: merchant.id,
                project: Some(project.id),
                action: "callback_secret.rotate",
                target: &project.id.to_string(),
                detail: None,
            },
        )
        .await
        .map_err(|e| PageError::from(e).render(&st))?;
    let hours = overlap_hours();
    // Shown once, on the page this answer leads to: a reload there rotates nothing.
    let slot = Slot::Value {
        title: trf("{project}: new callback secret", &[("project", &project.name)]),
        section: "projects".into(),
        heading: tr("Your new callback secret").into(),
        label: tr("Callback secret").into(),
        value: secret.expose().to_string(),
        notes: vec![
            trf(
                "Callbacks are signed with this secret from now on, and for {hours} hours also with the previous one.",
                &[("hours", &hours)],
            ),
            tr("Verify X-Callback-Signature with HMAC-SHA256 over the timestamp, a dot and the body (docs/callbacks.md).").into(),
        ],
        back: access_path(&project, "", "callback"),
    };
    Ok(once::show_once(&st, signed.current.session.id, slot).await)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_bad_line_of_an_allow_list_is_named() {
        let (rules, errors) =
            allow_list_lines("203.0.113.7\n\n  10.0.0.0/8 \nnot-an-ip\n10.0.0.1/8\n2001:db8::/32");
        assert_eq!(rules, vec!["203.0.113.7", "10.0.0.0/8", "2001:db8::/32"]);
        let lines: Vec<usize> = errors.iter().map(|e| e.line).collect();
        assert_eq!(lines, vec![4, 5]);
        assert!(
            errors[0].message.contains("not-an-ip"),
            "{}",
            errors[0].message
        );
        assert!(
            errors[1].message.contains("10.0.0.0/8"),
            "{}",
            errors[1].message
        );
    }

    #[test]
    fn durations_read_as_people_write_them() {
        use std::time::Duration;
        assert_eq!(duration_text(Duration::from_secs(900)), "15 min");
        assert_eq!(duration_text(Duration::from_secs(7200)), "2 h");
        assert_eq!(duration_text(Duration::from_secs(5400)), "1 h 30 min");
        assert_eq!(duration_text(Duration::from_secs(61)), "61 s");
    }
}
