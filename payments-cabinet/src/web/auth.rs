//! Sign-in: password, then a TOTP code (or a recovery code); enrolment at the first sign-in;
//! sign-out; the invitation's set-password page.

use axum::extract::{Path, Query, State};
use axum::http::{HeaderMap, StatusCode};
use axum::response::Response;

use super::extract::{
    second_step_path, session_cookie, with_cookie, without_cookie, FormData, Half,
};
use super::i18n::tr;
use super::once::{self, answer, with_errors, Flash, Slot};
use super::page::{error_page, html, ok, see_other, OrPage, PageResult};
use super::qr::{grouped, qr_svg};
use super::query::encode;
use super::refusals::password_refusal;
use super::state::CabinetState;
use super::views::{Code, Enrol, InvitePage, Link, Message, Recovery, SignIn};
use crate::accounts::{refill_email, Client, SignInError};

/// What the sign-in page may say after a redirect.
#[derive(Debug, serde::Deserialize)]
pub(crate) struct Done {
    #[serde(default)]
    done: Option<String>,
    #[serde(default)]
    flash: Option<String>,
}

/// A refused form shown again after its redirect (`?flash=<slot>`).
#[derive(Debug, Default, serde::Deserialize)]
pub(crate) struct Again {
    #[serde(default)]
    flash: Option<String>,
}

fn done_notice(done: &Done) -> Option<String> {
    match done.done.as_deref() {
        Some("password") => Some(tr("Your password is set. Sign in with it.").into()),
        Some("signed_out") => Some(tr("You are signed out.").into()),
        Some("ended") => Some(tr("The session has ended. Sign in again.").into()),
        _ => None,
    }
}

pub(crate) async fn sign_in_page(
    State(st): State<CabinetState>,
    headers: HeaderMap,
    Query(done): Query<Done>,
) -> Response {
    // A refused sign-in's message and e-mail: no session yet, so they came in a cookie.
    let flash = once::anonymous_flash(&st, &headers, done.flash.as_deref(), "sign-in");
    let chrome = st.chrome(tr("Sign in"), None).notice(done_notice(&done));
    let page = ok(&SignIn {
        chrome: with_errors(chrome, flash.as_ref()),
        email: flash
            .as_ref()
            .and_then(|f| f.typed("email"))
            .unwrap_or_default(),
    });
    once::forget_anonymous(&st, &headers, answer(flash.as_ref(), page))
}

pub(crate) async fn sign_in(
    State(st): State<CabinetState>,
    client: Client,
    headers: HeaderMap,
    form: FormData,
) -> Response {
    let email = form.get("email").trim().to_string();
    let old = session_cookie(&st, &headers);
    match st
        .cabinet
        .sign_in()
        .password(&email, form.get("password"), &client, old.as_deref())
        .await
    {
        Ok((session, user)) => {
            let next = if user.totp_confirmed_at.is_some() {
                "/sign-in/code"
            } else {
                "/sign-in/enrol"
            };
            with_cookie(&st, see_other(next), session.cookie.expose())
        }
        Err(e) => {
            let mut flash = Flash::refused("sign-in", &e, StatusCode::UNAUTHORIZED, "email");
            if let Some(email) = refill_email(&email, &e) {
                flash = flash.input("email", email);
            }
            once::refuse_anonymous(&st, "/sign-in", flash)
        }
    }
}

pub(crate) async fn code_page(
    State(st): State<CabinetState>,
    half: Half,
    Query(q): Query<Again>,
) -> Response {
    if half.current.user.totp_confirmed_at.is_none() {
        return see_other("/sign-in/enrol");
    }
    let owner = half.current.session.id;
    let flash = match once::flash(&st, owner, q.flash.as_deref(), "code").await {
        Ok(f) => f,
        Err(page) => return page,
    };
    let chrome = st.chrome(tr("Two-factor code"), Some(&half.current));
    let page = ok(&Code {
        chrome: with_errors(chrome, flash.as_ref()),
        email: half.current.user.email,
    });
    answer(flash.as_ref(), page)
}

/// The answer to a refused second step: `303` to the step's page, which shows the error
/// once, or to sign-in when the session ended.
async fn refused(
    st: &CabinetState,
    half: &Half,
    e: SignInError,
    page: &str,
    path: &str,
    field: &str,
) -> Response {
    match e {
        SignInError::SessionEnded => without_cookie(st, see_other("/sign-in?done=ended")),
        other => {
            let flash = Flash::refused(page, &other, StatusCode::UNAUTHORIZED, field);
            once::refuse(st, half.current.session.id, path, "", flash).await
        }
    }
}

pub(crate) async fn code(
    State(st): State<CabinetState>,
    half: Half,
    client: Client,
    form: FormData,
) -> Response {
    match st
        .cabinet
        .sign_in()
        .code(&half.current, &half.cookie, form.get("code"), &client)
        .await
    {
        Ok(session) => {
            adopt_zone(&st, &half, &client, &form).await;
            with_cookie(&st, see_other("/"), session.cookie.expose())
        }
        Err(e) => refused(&st, &half, e, "code", "/sign-in/code", "code").await,
    }
}

pub(crate) async fn recovery_page(
    State(st): State<CabinetState>,
    half: Half,
    Query(q): Query<Again>,
) -> Response {
    let owner = half.current.session.id;
    let flash = match once::flash(&st, owner, q.flash.as_deref(), "recovery").await {
        Ok(f) => f,
        Err(page) => return page,
    };
    let chrome = st.chrome(tr("Sign in with a recovery code"), Some(&half.current));
    let page = ok(&Recovery {
        chrome: with_errors(chrome, flash.as_ref()),
        email: half.current.user.email,
    });
    answer(flash.as_ref(), page)
}

pub(crate) async fn recovery(
    State(st): State<CabinetState>,
    half: Half,
    client: Client,
    form: FormData,
) -> Response {
    match st
        .cabinet
        .sign_in()
        .recovery_code(
            &half.current,
            &half.cookie,
            form.get("recovery_code"),
            &client,
        )
        .await
    {
        Ok(session) => with_cookie(
            &st,
            see_other("/security?done=recovery_used"),
            session.cookie.expose(),
        ),
        Err(e) => {
            refused(
                &st,
                &half,
                e,
                "recovery",
                "/sign-in/recovery",
                "recovery_code",
            )
            .await
        }
    }
}

async fn enrol_view(st: &CabinetState, half: &Half, flash: Option<&str>) -> PageResult {
    if half.current.user.totp_confirmed_at.is_some() {
        return Err(see_other(second_step_path(&half.current)));
    }
    let flash = once::flash(st, half.current.session.id, flash, "enrol").await?;
    let enrolment = st
        .cabinet
        .two_factor()
        .enrolment(&half.current)
        .await
        .or_page(st)?;
    let chrome = st.chrome(tr("Set up two-factor sign-in"), Some(&half.current));
    let page = ok(&Enrol {
        chrome: with_errors(chrome, flash.as_ref()),
        email: half.current.user.email.clone(),
        qr_svg: qr_svg(&enrolment.uri),
        uri: enrolment.uri,
        key_grouped: grouped(&enrolment.key_base32),
    });
    Ok(answer(flash.as_ref(), page))
}

pub(crate) async fn enrol_page(
    State(st): State<CabinetState>,
    half: Half,
    Query(q): Query<Again>,
) -> Response {
    enrol_view(&st, &half, q.flash.as_deref())
        .await
        .unwrap_or_else(|e| e)
}

/// After a full sign-in: the browser's time zone (sent by `assets/zone.js`) for a user who has
/// none. A failure only leaves the user in UTC, so it is logged, not shown.
async fn adopt_zone(st: &CabinetState, half: &Half, client: &Client, form: &FormData) {
    let name = form.get("time_zone").trim();
    if name.is_empty() || half.current.user.time_zone.is_some() {
        return;
    }
    let users = st.cabinet.users();
    let adopted = users.adopt_time_zone(&half.current, client, name);
    if let Err(e) = adopted.await {
        tracing::warn!(error = %e, "cabinet: the browser's time zone was not stored");
    }
}

pub(crate) async fn enrol(
    State(st): State<CabinetState>,
    half: Half,
    client: Client,
    form: FormData,
) -> Response {
    let current = half.current.clone();
    match st
        .cabinet
        .two_factor()
        .confirm_enrolment(&current, &half.cookie, form.get("code"), &client)
        .await
    {
        Ok((session, codes)) => {
            adopt_zone(&st, &half, &client, &form).await;
            // The codes are shown once, by the new session, on the page the answer leads to.
            let slot = Slot::Codes {
                title: tr("Two-factor sign-in is set up").into(),
                section: String::new(),
                codes,
                next: "/".into(),
            };
            let page = once::show_once(&st, session.record.id, slot).await;
            with_cookie(&st, page, session.cookie.expose())
        }
        Err(e) => refused(&st, &half, e, "enrol", "/sign-in/enrol", "code").await,
    }
}

pub(crate) async fn sign_out(
    State(st): State<CabinetState>,
    client: Client,
    headers: HeaderMap,
) -> Response {
    if let Some(cookie) = session_cookie(&st, &headers) {
        match st.cabinet.sessions().current(&cookie).await {
            Ok(Some(current)) => {
                if let Err(e) = st.cabinet.sign_in().sign_out(&current, &client).await {
                    return error_page(e, &st);
                }
            }
            Ok(None) => {}
            Err(e) => return error_page(e, &st),
        }
    }
    without_cookie(&st, see_other("/sign-in?done=signed_out"))
}

pub(crate) async fn invite_page(
    State(st): State<CabinetState>,
    headers: HeaderMap,
    Path(token): Path<String>,
    Query(q): Query<Again>,
) -> Response {
    match st.cabinet.users().invited(&token).await {
        Ok(user) => {
            let flash = once::anonymous_flash(&st, &headers, q.flash.as_deref(), "invite");
            let chrome = st.chrome(tr("Set your password"), None);
            let page = ok(&InvitePage {
                chrome: with_errors(chrome, flash.as_ref()),
                email: user.email,
                token,
            });
            once::forget_anonymous(&st, &headers, answer(flash.as_ref(), page))
        }
        Err(e) if e.code == payments_core::ErrorCode::NotFound => invite_gone(&st),
        Err(e) => error_page(e, &st),
    }
}

fn invite_gone(st: &CabinetState) -> Response {
    html(
        StatusCode::NOT_FOUND,
        &Message {
            chrome: st.chrome(tr("Invitation link not valid"), None),
            text: tr("This invitation link is not valid: it was used, replaced or has expired. Ask whoever invited you (an owner or admin of your team, or the operator) for a new one.").into(),
            link: Some(Link::new("/sign-in", tr("Sign in"))),
        },
    )
}

pub(crate) async fn invite(
    State(st): State<CabinetState>,
    Path(token): Path<String>,
    client: Client,
    form: FormData,
) -> Response {
    // A link that is not (or no longer) valid: its page says so.
    let page = format!("/invite/{}", encode(&token));
    if st.cabinet.users().invited(&token).await.is_err() {
        return see_other(&page);
    }
    let again = |field: &str, message: String| {
        // No session yet: the browser's cookie carries the message only (never a password).
        let flash = Flash::new("invite", StatusCode::UNPROCESSABLE_ENTITY).error(field, message);
        once::refuse_anonymous(&st, &page, flash)
    };
    let password = form.get("password");
    if password != form.get("password_again") {
        return again("password_again", tr("The two passwords differ.").into());
    }
    match st
        .cabinet
        .users()
        .set_password(&token, password, &client)
        .await
    {
        Ok(_) => without_cookie(&st, see_other("/sign-in?done=password")),
        Err(e) if e.code == payments_core::ErrorCode::BadRequest => {
            again("password", password_refusal(&e.message))
        }
        Err(_) => see_other(&page),
    }
}
