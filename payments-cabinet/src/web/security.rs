//! The security page (password change, recovery codes, sessions) and the audit log.

use crate::store::{AuditQuery, CabinetAuditRecord, Role};
use axum::extract::{Path, Query, State};
use axum::http::StatusCode;
use axum::response::Response;
use payments_core::ids::SessionId;

use super::extract::{with_cookie, without_cookie, FormData, Signed};
use super::i18n::tr;
use super::once::{self, Flash, Slot};
use super::page::{allowed, error_page, ok, see_other, OrPage, PageError, PageResult};
use super::query::encode;
use super::state::CabinetState;
use super::views::{when, Audit, AuditFamily, AuditRow, Reenrol, Security, SessionRow};
use crate::accounts::Permission;
use crate::accounts::{ChangeError, Client, Current, SignInError};

/// Records of the audit log on one page (older ones on the next pages).
pub const AUDIT_PAGE: usize = 100;

/// The families of actions the audit log's filter offers: the part of an action before its
/// first `.` (`sign_in` for `sign_in.password`), with what the filter calls it.
pub const AUDIT_FAMILIES: &[(&str, &str)] = &[
    ("sign_in", "sign-in: password and codes"),
    ("two_factor", "two-factor enrolment"),
    ("sign_out", "sign-out"),
    ("password", "password changes"),
    ("recovery_codes", "recovery codes"),
    ("session", "sessions ended"),
    ("user", "users"),
    ("member", "team members"),
    ("token", "API tokens"),
    ("key", "signing keys"),
    ("project", "project settings"),
    ("callback_secret", "callback secrets"),
    ("payment", "payment actions"),
    ("test_payment", "test outcomes"),
    ("appeal", "appeals"),
];

/// A family's name in the filter, in the page's language ([`AUDIT_FAMILIES`] in English).
fn family_label(family: &str) -> &'static str {
    match family {
        "sign_in" => tr("sign-in: password and codes"),
        "two_factor" => tr("two-factor enrolment"),
        "sign_out" => tr("sign-out"),
        "password" => tr("password changes"),
        "recovery_codes" => tr("recovery codes"),
        "session" => tr("sessions ended"),
        "user" => tr("users"),
        "member" => tr("team members"),
        "token" => tr("API tokens"),
        "key" => tr("signing keys"),
        "project" => tr("project settings"),
        "callback_secret" => tr("callback secrets"),
        "payment" => tr("payment actions"),
        "test_payment" => tr("test outcomes"),
        "appeal" => tr("appeals"),
        _ => "",
    }
}

/// An audit action as a phrase that reads before "ok" or "refused" and the detail: the
/// row "Password sign-in | refused | wrong password" reads as a sentence. An action this
/// table does not know reads as its code.
pub(crate) fn action_text(action: &str) -> String {
    let known = match action {
        "sign_in.password" => tr("Password sign-in"),
        "sign_in.totp" => tr("Sign-in code"),
        "sign_in.recovery_code" => tr("Sign-in with a recovery code"),
        "two_factor.enrol" => tr("Authenticator set up"),
        "two_factor.reenrol" => tr("Authenticator moved to a new device"),
        "sign_out" => tr("Sign-out"),
        "password.change" => tr("Password change"),
        "recovery_codes.regenerate" => tr("New recovery codes"),
        "session.revoke" => tr("Session ended"),
        "user.create" => tr("User created"),
        "user.invite" => tr("User invited"),
        "user.set_password" => tr("Password set from an invitation"),
        "user.disable" => tr("User disabled"),
        "user.enable" => tr("User enabled"),
        "user.time_zone" => tr("Time zone changed"),
        "member.invite" => tr("Team member invited"),
        "member.reinvite" => tr("New invitation link for a team member"),
        "member.change" => tr("Team member's role changed"),
        "member.remove" => tr("Team member removed"),
        "member.restore" => tr("Team member restored"),
        "token.issue" => tr("API token created"),
        "token.revoke" => tr("API token revoked"),
        "key.register" => tr("Signing key registered"),
        "key.revoke" => tr("Signing key revoked"),
        "project.ip_allow_list" => tr("IP allow-list changed"),
        "project.callback_url" => tr("Callback URL changed"),
        "callback_secret.rotate" => tr("Callback secret issued"),
        "project.payer_page" => tr("Payer page settings changed"),
        "event.resend" => tr("Callback event sent again"),
        "events.recover" => tr("Undelivered callbacks sent again"),
        "appeal.open" => tr("Appeal opened"),
        "appeal.review" => tr("Appeal taken for review"),
        "appeal.accept" => tr("Appeal accepted"),
        "appeal.reject" => tr("Appeal rejected"),
        _ => "",
    };
    if !known.is_empty() {
        return known.to_string();
    }
    let phrase = match action {
        "payment.requisites_issued" => tr("Payment requisites issued"),
        "payment.requisites_refused" => tr("Payment requisites refused"),
        "payment.confirm" => tr("Payment confirmed"),
        "payment.cancel" => tr("Payment canceled"),
        "payment.expire" => tr("Payment expired"),
        "payment.recheck" => tr("Payment re-check started"),
        "payment.recheck_resolve" => tr("Payment re-check resolved"),
        "payment.resend_callback" => tr("Payment callback sent again"),
        "test_payment.requisites_issued" => tr("Test payment requisites issued"),
        "test_payment.requisites_refused" => tr("Test payment requisites refused"),
        "test_payment.confirm" => tr("Test payment confirmed"),
        "test_payment.cancel" => tr("Test payment canceled"),
        "test_payment.expire" => tr("Test payment expired"),
        "test_payment.recheck" => tr("Test payment re-check started"),
        "test_payment.recheck_resolve" => tr("Test payment re-check resolved"),
        "test_payment.resend_callback" => tr("Test payment callback sent again"),
        _ => "",
    };
    if !phrase.is_empty() {
        return phrase.to_string();
    }
    action.to_string()
}

/// The audit log's filters and page, as given in the query.
#[derive(Debug, Default, serde::Deserialize)]
pub(crate) struct AuditFilters {
    #[serde(default)]
    action: String,
    #[serde(default)]
    result: String,
    #[serde(default)]
    email: String,
    #[serde(default)]
    before: String,
}

/// What a redirect to the security page may say.
#[derive(Debug, Default, serde::Deserialize)]
pub(crate) struct SecurityQuery {
    #[serde(default)]
    done: Option<String>,
    #[serde(default)]
    flash: Option<String>,
}

async fn security_page(
    st: &CabinetState,
    current: &Current,
    notice: Option<String>,
    errors: Vec<(&str, String)>,
) -> Result<Security, Response> {
    let render = |e| error_page(e, st);
    let sessions = st.cabinet.sessions().list(current).await.map_err(render)?;
    let codes_left = st
        .cabinet
        .two_factor()
        .recovery_codes_left(current)
        .await
        .map_err(render)?;
    let mut chrome = st
        .chrome(tr("Security"), Some(current))
        .section("security")
        .notice(notice);
    for (field, message) in errors {
        chrome = chrome.error(field, message);
    }
    Ok(Security {
        chrome,
        email: current.user.email.clone(),
        codes_left,
        zones: super::i18n::zone_names(),
        sessions: sessions
            .iter()
            .map(|s| {
                let (signed_in, signed_in_text) = when(s.signed_in_at);
                let (last_seen, last_seen_text) = when(s.last_seen_at);
                SessionRow {
                    id: s.id.to_string(),
                    signed_in,
                    signed_in_text,
                    last_seen,
                    last_seen_text,
                    address: s.address.clone().unwrap_or_else(|| "unknown".into()),
                    browser: s.user_agent.clone().unwrap_or_else(|| "unknown".into()),
                    current: s.id == current.session.id,
                }
            })
            .collect(),
    })
}

/// `POST /security/time-zone`: the user's time zone.
pub(crate) async fn set_time_zone(
    State(st): State<CabinetState>,
    signed: Signed,
    client: Client,
    form: FormData,
) -> PageResult {
    let name = form.get("time_zone").trim().to_string();
    let users = st.cabinet.users();
    match users.set_time_zone(&signed.current, &client, &name).await {
        Ok(_) => Ok(see_other("/security?done=time_zone#time-zone")),
        Err(e) if e.code == payments_core::ErrorCode::BadRequest => {
            let flash = Flash::new("security", StatusCode::UNPROCESSABLE_ENTITY)
                .error("time_zone", tr("Time zone: choose one from the list."));
            let owner = signed.current.session.id;
            Ok(once::refuse(&st, owner, "/security", "time-zone", flash).await)
        }
        Err(e) => Err(error_page(e, &st)),
    }
}

pub(crate) async fn page(
    State(st): State<CabinetState>,
    signed: Signed,
    Query(q): Query<SecurityQuery>,
) -> PageResult {
    let notice = match q.done.as_deref() {
        Some("password") => {
            Some(tr("Your password is changed; your other sessions have ended.").into())
        }
        Some("session_revoked") => Some(tr("That session has ended.").into()),
        Some("time_zone") => Some(tr("Your time zone is saved: times and days on your pages are in it.").into()),
        Some("authenticator") => Some(
            tr("The authenticator on your new device is set up: sign-in now asks for its codes, the old app's codes no longer work, and your other sessions have ended.")
                .into(),
        ),
        Some("recovery_used") => Some(
            tr("You signed in with a recovery code, which is now used up. Make new codes if few are left.")
                .into(),
        ),
        _ => None,
    };
    // A refused form of this page, once: its errors and status.
    let flash = once::flash(
        &st,
        signed.current.session.id,
        q.flash.as_deref(),
        "security",
    )
    .await?;
    let errors = flash
        .as_ref()
        .map(|f| {
            f.errors
                .iter()
                .map(|(field, m)| (field.as_str(), m.clone()))
                .collect()
        })
        .unwrap_or_default();
    let page = ok(&security_page(&st, &signed.current, notice, errors).await?);
    Ok(once::answer(flash.as_ref(), page))
}

/// A refused form of the security page: `303` to the page, which shows `flash` once.
async fn again(st: &CabinetState, signed: &Signed, flash: Flash) -> PageResult {
    Ok(once::refuse(st, signed.current.session.id, "/security", "", flash).await)
}

async fn refused(st: &CabinetState, signed: &Signed, e: SignInError, field: &str) -> PageResult {
    if e == SignInError::SessionEnded {
        return Ok(without_cookie(st, see_other("/sign-in?done=ended")));
    }
    let flash = Flash::refused("security", &e, StatusCode::UNPROCESSABLE_ENTITY, field);
    again(st, signed, flash).await
}

pub(crate) async fn change_password(
    State(st): State<CabinetState>,
    signed: Signed,
    client: Client,
    form: FormData,
) -> PageResult {
    match st
        .cabinet
        .sign_in()
        .change_password(
            &signed.current,
            &signed.cookie,
            form.get("current_password"),
            form.get("code"),
            form.get("new_password"),
            &client,
        )
        .await
    {
        Ok(session) => Ok(with_cookie(
            &st,
            see_other("/security?done=password"),
            session.cookie.expose(),
        )),
        Err(ChangeError::Rule(m)) => {
            let flash = Flash::new("security", StatusCode::UNPROCESSABLE_ENTITY)
                .error("new_password", super::refusals::password_refusal(&m));
            again(&st, &signed, flash).await
        }
        Err(ChangeError::Refused(e)) => {
            let field = match e {
                SignInError::BadPassword => "current_password",
                _ => "pw-code",
            };
            refused(&st, &signed, e, field).await
        }
    }
}

pub(crate) async fn regenerate_codes(
    State(st): State<CabinetState>,
    signed: Signed,
    client: Client,
    form: FormData,
) -> PageResult {
    match st
        .cabinet
        .two_factor()
        .regenerate_recovery_codes(&signed.current, &signed.cookie, form.get("code"), &client)
        .await
    {
        Ok((session, codes)) => {
            // Shown once, by the renewed session, on the page the answer leads to.
            let slot = Slot::Codes {
                title: tr("New recovery codes").into(),
                section: "security".into(),
                codes,
                next: "/security".into(),
            };
            let page = once::show_once(&st, session.record.id, slot).await;
            Ok(with_cookie(&st, page, session.cookie.expose()))
        }
        Err(e) => refused(&st, &signed, e, "rc-code").await,
    }
}

/// The name of the new-device confirmation page in a refused form's slot.
const REENROL_PAGE: &str = "reenrol";

/// `POST /security/authenticator`: the password and a current code (or a recovery code)
/// start moving the authenticator to a new device. The new key waits in a one-time slot of
/// the renewed session; the answer leads to the page that shows it once, with the form for
/// the new device's first code.
pub(crate) async fn begin_reenrolment(
    State(st): State<CabinetState>,
    signed: Signed,
    client: Client,
    form: FormData,
) -> PageResult {
    match st
        .cabinet
        .two_factor()
        .begin_reenrolment(
            &signed.current,
            &signed.cookie,
            form.get("current_password"),
            form.get("code"),
            &client,
        )
        .await
    {
        Ok((session, enrolment)) => {
            let owner = session.record.id;
            let pending = Slot::PendingKey {
                key_base32: enrolment.key_base32.clone(),
            };
            let page = match once::put(&st, owner, &pending).await {
                Ok(pending) => {
                    let slot = Slot::NewAuthenticator {
                        key_base32: enrolment.key_base32,
                        uri: enrolment.uri,
                        pending,
                    };
                    once::show_once(&st, session.record.id, slot).await
                }
                Err(page) => page,
            };
            Ok(with_cookie(&st, page, session.cookie.expose()))
        }
        Err(e) => {
            let field = match e {
                SignInError::BadPassword => "au-password",
                _ => "au-code",
            };
            refused(&st, &signed, e, field).await
        }
    }
}

/// `GET /security/authenticator/confirm`: the confirmation form again after a refused code
/// (the key is not shown again); without a refusal to show, the security page.
pub(crate) async fn reenrolment_page(
    State(st): State<CabinetState>,
    signed: Signed,
    Query(q): Query<SecurityQuery>,
) -> PageResult {
    let flash = once::flash(
        &st,
        signed.current.session.id,
        q.flash.as_deref(),
        REENROL_PAGE,
    )
    .await?;
    let Some(flash) = flash else {
        return Ok(see_other("/security"));
    };
    let chrome = st
        .chrome(
            tr("Move the authenticator to a new device"),
            Some(&signed.current),
        )
        .section("security");
    let page = ok(&Reenrol {
        chrome: once::with_errors(chrome, Some(&flash)),
        qr_svg: None,
        uri: None,
        key_grouped: None,
        pending: flash.typed("pending").unwrap_or_default(),
    });
    Ok(flash.answer(page))
}

/// `POST /security/authenticator/confirm`: the new device's first code. Right, the new key
/// replaces the old one and the other sessions end; wrong, nothing changes and the form
/// comes back (the key kept in a new slot); a key no longer kept (used, or its slot's five
/// minutes past) sends the user back to start again.
pub(crate) async fn confirm_reenrolment(
    State(st): State<CabinetState>,
    signed: Signed,
    client: Client,
    form: FormData,
) -> PageResult {
    let owner = signed.current.session.id;
    let key_base32 = match once::take(&st, owner, form.get("pending")).await? {
        Some(Slot::PendingKey { key_base32 }) => key_base32,
        _ => {
            let flash = Flash::new("security", StatusCode::GONE).error(
                "au-code",
                tr("The new key is no longer kept (it was confirmed, or five minutes passed): start again."),
            );
            return again(&st, &signed, flash).await;
        }
    };
    match st
        .cabinet
        .two_factor()
        .confirm_reenrolment(
            &signed.current,
            &signed.cookie,
            &key_base32,
            form.get("code"),
            &client,
        )
        .await
    {
        Ok(session) => Ok(with_cookie(
            &st,
            see_other("/security?done=authenticator"),
            session.cookie.expose(),
        )),
        Err(SignInError::SessionEnded) => Ok(without_cookie(&st, see_other("/sign-in?done=ended"))),
        Err(e) => {
            let pending = once::put(&st, owner, &Slot::PendingKey { key_base32 }).await?;
            let flash = Flash::refused(
                REENROL_PAGE,
                &e,
                StatusCode::UNPROCESSABLE_ENTITY,
                "new-code",
            )
            .input("pending", pending);
            Ok(once::refuse(&st, owner, "/security/authenticator/confirm", "", flash).await)
        }
    }
}

pub(crate) async fn revoke_session(
    State(st): State<CabinetState>,
    signed: Signed,
    client: Client,
    Path(id): Path<String>,
) -> PageResult {
    let Ok(id) = id.parse::<SessionId>() else {
        return Err(PageError::NotFound.render(&st));
    };
    match st
        .cabinet
        .sessions()
        .revoke(&signed.current, id, &client)
        .await
    {
        Ok(true) => Ok(see_other("/security?done=session_revoked")),
        Ok(false) => Err(PageError::NotFound.render(&st)),
        Err(e) => Err(error_page(e, &st)),
    }
}

pub(crate) async fn audit(
    State(st): State<CabinetState>,
    signed: Signed,
    Query(f): Query<AuditFilters>,
) -> PageResult {
    allowed(&st, &signed.current, Permission::Audit)?;
    let action = AUDIT_FAMILIES
        .iter()
        .find(|(value, _)| *value == f.action)
        .map(|(value, _)| value.to_string());
    let success = match f.result.as_str() {
        "ok" => Some(true),
        "refused" => Some(false),
        _ => None,
    };
    let email = f.email.trim().to_lowercase();
    let query = AuditQuery {
        merchant: signed.current.user.role.merchant(),
        action,
        success,
        email: (!email.is_empty()).then(|| email.clone()),
        before: f.before.parse().ok(),
        limit: AUDIT_PAGE,
    };
    let page = st
        .cabinet
        .store()
        .find_cabinet_audit(&query)
        .await
        .or_page(&st)?;
    let next = page.next.map(|cursor| {
        format!(
            "/audit?action={}&result={}&email={}&before={cursor}",
            encode(query.action.as_deref().unwrap_or_default()),
            encode(&f.result),
            encode(&email),
        )
    });
    let scope = match signed.current.user.role {
        Role::Merchant(_) => {
            tr("Sign-ins and changes made in the cabinet by your merchant's users and by support on your projects, newest first.")
        }
        Role::Support => tr("Every merchant's sign-ins and changes, newest first."),
    };
    Ok(ok(&Audit {
        chrome: st
            .chrome(tr("Audit log"), Some(&signed.current))
            .section("audit"),
        scope: scope.to_string(),
        families: AUDIT_FAMILIES
            .iter()
            .map(|(value, _)| AuditFamily {
                value,
                label: family_label(value),
                selected: query.action.as_deref() == Some(*value),
            })
            .collect(),
        result: f.result.clone(),
        email,
        filtered: query.action.is_some() || query.success.is_some() || query.email.is_some(),
        records: page.records.iter().map(audit_row).collect(),
        next,
    }))
}

/// One record of the audit log as the page lists it.
fn audit_row(r: &CabinetAuditRecord) -> AuditRow {
    let (at, at_text) = when(r.at);
    AuditRow {
        at,
        at_text,
        email: r.email.clone(),
        address: r.address.clone().unwrap_or_default(),
        action: r.action.clone(),
        action_text: action_text(&r.action),
        success: r.success,
        object: audit_object(r),
        target: r.target.clone(),
        detail: r.detail.clone().unwrap_or_default(),
    }
}

/// What an audit record acted on, by its action's family, and the page that shows it: a
/// payment's card, a callback event's page, the project's deliveries or its API access page
/// (tokens, keys, allow-list, callback URL and secret, payer page); accounts and sessions
/// have no page.
fn audit_object(r: &CabinetAuditRecord) -> (String, Option<String>) {
    let family = r.action.split('.').next().unwrap_or_default();
    let project = r.project_id.map(|p| p.to_string());
    let at = |path: &str| project.as_ref().map(|p| format!("/projects/{p}{path}"));
    let (kind, href) = match family {
        "payment" | "test_payment" => (tr("payment"), Some(format!("/payments/{}", r.target))),
        "event" => (tr("callback event"), at(&format!("/events/{}", r.target))),
        "events" => (tr("callback deliveries"), at("/deliveries")),
        "token" => (tr("API token"), at("")),
        "key" => (tr("signing key"), at("")),
        "callback_secret" => (tr("callback secret"), at("")),
        "project" => (tr("project"), at("")),
        "appeal" => (tr("appeal"), None),
        "member" => (tr("team member"), Some(format!("/team/{}", r.target))),
        _ => (tr("account"), None),
    };
    (kind.to_string(), href)
}

#[cfg(test)]
mod tests {
    use super::action_text;

    /// Each audit action reads as a phrase; an unknown one as its code.
    #[test]
    fn audit_actions_read_as_phrases() {
        assert_eq!(action_text("sign_in.password"), "Password sign-in");
        assert_eq!(action_text("token.issue"), "API token created");
        assert_eq!(
            action_text("test_payment.confirm"),
            "Test payment confirmed"
        );
        assert_eq!(action_text("payment.cancel"), "Payment canceled");
        assert_eq!(action_text("payment.unheard_of"), "payment.unheard_of");
        for (family, label) in super::AUDIT_FAMILIES {
            assert_eq!(super::family_label(family), *label, "{family}");
            assert!(!action_text(family).is_empty());
        }
    }
}
