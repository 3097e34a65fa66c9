//! Post/redirect/get through one-time slots. Every form's `POST` is answered `303 See Other`
//! to a `GET` page, so that reloading what the browser shows never sends the form again:
//!
//! - a value shown once (a new API token, a rotated callback secret, new recovery codes) is
//!   kept, sealed, in a one-time slot of the session ([`Slots::insert`]) and the `POST`
//!   redirects to `GET /shown/<slot>`, which takes the slot (deletes it in the same store
//!   step) and shows it. A reload, a second tab, another session or a late visit finds the
//!   slot gone and answers `410` "already shown", doing nothing;
//! - a refused form (a wrong code, a bad allow-list line) keeps its errors and what was typed
//!   in a slot too, and redirects to the form's own page with `?flash=<slot>`, which shows it
//!   once with the refusal's status (`401`, `422`, `429` ...). Nothing the user typed travels
//!   in a URL.
//!
//! Slots live in the cabinet's store, so any node of a deployment answers the redirect. Only
//! a session has slots (at most [`CabinetConfig::slots_per_session`]): a page without one (sign-in, an
//! invitation) carries its refused form in a short-lived cookie of the browser instead
//! ([`refuse_anonymous`]), so that no request without a session makes the cabinet store
//! anything for its form: a flood of refused sign-ins cannot fill the disk.
//!
//! [`Slots::insert`]: crate::accounts::Slots::insert
//! [`CabinetConfig::slots_per_session`]: crate::accounts::CabinetConfig::slots_per_session

use axum::extract::{Path, State};
use axum::http::header::{self, HeaderMap, HeaderValue};
use axum::http::StatusCode;
use axum::response::Response;
use payments_core::ids::SessionId;
use serde::{Deserialize, Serialize};

use super::extract::{cookie, Signed};
use super::i18n::tr;
use super::page::{html, see_other, OrPage};
use super::state::CabinetState;
use super::views::{Chrome, Link, Message, RecoveryCodes, Reenrol, ShownOnce};
use crate::accounts::SignInError;

/// What a one-time slot holds.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub(crate) enum Slot {
    /// One value shown once (a token, a callback secret) and the page around it.
    Value {
        title: String,
        section: String,
        heading: String,
        label: String,
        value: String,
        notes: Vec<String>,
        back: String,
    },
    /// Recovery codes shown once.
    Codes {
        title: String,
        section: String,
        codes: Vec<String>,
        next: String,
    },
    /// A refused form, for the page that shows it again.
    Form(Flash),
    /// A new authenticator key, shown once with the form that confirms it; `pending` is the
    /// slot that keeps the key for the confirmation.
    NewAuthenticator {
        key_base32: String,
        uri: String,
        pending: String,
    },
    /// A new authenticator key waiting for its first code (taken by the confirmation).
    PendingKey { key_base32: String },
}

/// A refused form carried through the redirect: the page it is for, the status that page
/// answers with, the errors and what was typed.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub(crate) struct Flash {
    /// The page it is for (`sign-in`, `access:<project>` ...); another page ignores it.
    pub(crate) page: String,
    /// The status of the page that shows it (`422`, `401`, `429` ...).
    pub(crate) status: u16,
    /// `Retry-After` seconds, when the refusal says when to try again.
    #[serde(default)]
    pub(crate) retry_after: Option<u32>,
    /// Errors by field id (an empty field: the page's own message).
    #[serde(default)]
    pub(crate) errors: Vec<(String, String)>,
    /// Per-line errors of a text area (the IP allow-list): line number and message.
    #[serde(default)]
    pub(crate) lines: Vec<(usize, String)>,
    /// What was typed, by field name, to fill the form again.
    #[serde(default)]
    pub(crate) inputs: Vec<(String, String)>,
}

impl Flash {
    /// A refused form of `page` answered `status`.
    pub(crate) fn new(page: impl Into<String>, status: StatusCode) -> Flash {
        Flash {
            page: page.into(),
            status: status.as_u16(),
            ..Flash::default()
        }
    }

    /// A refused sign-in step (`otherwise`: the status of a wrong password or code): `429`
    /// when throttled, `503` with `Retry-After` when the store failed or every password check
    /// is busy; the message on `field`.
    pub(crate) fn refused(
        page: impl Into<String>,
        e: &SignInError,
        otherwise: StatusCode,
        field: &str,
    ) -> Flash {
        let status = match e {
            SignInError::Throttled { .. } => StatusCode::TOO_MANY_REQUESTS,
            SignInError::Store(_) | SignInError::Busy => StatusCode::SERVICE_UNAVAILABLE,
            _ => otherwise,
        };
        Flash {
            retry_after: (*e == SignInError::Busy).then_some(2),
            ..Flash::new(page, status)
        }
        .error(field, super::refusals::sign_in_refusal(e))
    }

    /// With an error on `field`.
    pub(crate) fn error(mut self, field: &str, message: impl Into<String>) -> Flash {
        self.errors.push((field.to_string(), message.into()));
        self
    }

    /// With what was typed into `field`.
    pub(crate) fn input(mut self, field: &str, value: impl Into<String>) -> Flash {
        self.inputs.push((field.to_string(), value.into()));
        self
    }

    /// What was typed into `field`, if it was carried.
    pub(crate) fn typed(&self, field: &str) -> Option<String> {
        self.inputs
            .iter()
            .find(|(f, _)| f == field)
            .map(|(_, v)| v.clone())
    }

    /// The status the page answers with.
    pub(crate) fn status(&self) -> StatusCode {
        StatusCode::from_u16(self.status).unwrap_or(StatusCode::UNPROCESSABLE_ENTITY)
    }

    /// `response` (the page showing the form again) with the refusal's status.
    pub(crate) fn answer(&self, mut response: Response) -> Response {
        *response.status_mut() = self.status();
        if let Some(secs) = self.retry_after {
            response
                .headers_mut()
                .insert(header::RETRY_AFTER, HeaderValue::from(secs));
        }
        response
    }
}

/// `page` answered with the status of the refused form it shows, if any.
pub(crate) fn answer(flash: Option<&Flash>, page: Response) -> Response {
    match flash {
        Some(f) => f.answer(page),
        None => page,
    }
}

/// `chrome` with a refused form's errors, if any.
pub(crate) fn with_errors(mut chrome: Chrome, flash: Option<&Flash>) -> Chrome {
    for (field, message) in flash.map(|f| f.errors.as_slice()).unwrap_or_default() {
        chrome = chrome.error(field, message.clone());
    }
    chrome
}

/// Keeps `slot` for `owner`; its id.
pub(crate) async fn put(
    st: &CabinetState,
    owner: SessionId,
    slot: &Slot,
) -> Result<String, Response> {
    let payload = serde_json::to_string(slot).expect("a slot serialises");
    st.cabinet.slots().insert(owner, &payload).await.or_page(st)
}

/// Takes slot `id` of `owner`, if there is one to take.
pub(crate) async fn take(
    st: &CabinetState,
    owner: SessionId,
    id: &str,
) -> Result<Option<Slot>, Response> {
    let Some(payload) = st.cabinet.slots().take(owner, id).await.or_page(st)? else {
        return Ok(None);
    };
    match serde_json::from_str(&payload) {
        Ok(slot) => Ok(Some(slot)),
        Err(e) => {
            tracing::error!(error = %e, "cabinet: a one-time slot does not read");
            Ok(None)
        }
    }
}

/// The answer to a `POST` that made a value to show once: the value goes into a one-time slot
/// of `owner` (the session that will show it: for a step that renews the session, the new
/// one) and the answer is `303` to `GET /shown/<slot>`.
pub(crate) async fn show_once(st: &CabinetState, owner: SessionId, slot: Slot) -> Response {
    match put(st, owner, &slot).await {
        Ok(id) => see_other(&format!("/shown/{id}")),
        Err(page) => page,
    }
}

/// The answer to a refused form: `flash` goes into a one-time slot of `owner` and the answer
/// is `303` to `path` (the form's page, without query) with `?flash=<slot>` and `#anchor`.
pub(crate) async fn refuse(
    st: &CabinetState,
    owner: SessionId,
    path: &str,
    anchor: &str,
    flash: Flash,
) -> Response {
    match put(st, owner, &Slot::Form(flash)).await {
        Ok(id) => {
            let anchor = if anchor.is_empty() {
                String::new()
            } else {
                format!("#{anchor}")
            };
            see_other(&format!("{path}?flash={id}{anchor}"))
        }
        Err(page) => page,
    }
}

/// The refused form `id` of `owner` for `page`, taken; `None` when there is none (a reload),
/// or it is another page's.
pub(crate) async fn flash(
    st: &CabinetState,
    owner: SessionId,
    id: Option<&str>,
    page: &str,
) -> Result<Option<Flash>, Response> {
    let Some(id) = id else {
        return Ok(None);
    };
    Ok(match take(st, owner, id).await? {
        Some(Slot::Form(f)) if f.page == page => Some(f),
        _ => None,
    })
}

/// The cookie that carries a refused form of a page without a session over TLS: `__Host-`
/// pins it to this host, so no other site or subdomain can set it.
pub const SECURE_FLASH_COOKIE: &str = "__Host-cabinet-flash";
/// The same over plain HTTP (local development).
pub const PLAIN_FLASH_COOKIE: &str = "cabinet-flash";
/// The most bytes of a refusal carried in the cookie (its messages and an e-mail address of
/// at most 254 characters take far less; browsers keep 4 KiB a cookie).
const MAX_FLASH_COOKIE: usize = 2048;

fn flash_cookie_name(st: &CabinetState) -> &'static str {
    if st.tls {
        SECURE_FLASH_COOKIE
    } else {
        PLAIN_FLASH_COOKIE
    }
}

/// What `?flash=` names for a refusal carried in the cookie: the start of its SHA-256, so
/// that the page shows the refusal it was redirected for and no older one.
fn flash_tag(value: &str) -> String {
    use base64::Engine as _;
    let digest = crate::secrets::token_hash(value);
    base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(&digest[..12])
}

/// The answer to a refused form of a page without a session (sign-in, an invitation): the
/// refusal goes into a short-lived cookie of the browser (never into the store) and the
/// answer is `303` to `path` with `?flash=<tag>`. What the cookie carries is what the form
/// may show again: the messages and what the caller chose to keep (the sign-in keeps a valid
/// e-mail address at most, [`crate::accounts::refill_email`]).
pub(crate) fn refuse_anonymous(st: &CabinetState, path: &str, mut flash: Flash) -> Response {
    use base64::Engine as _;
    let encode = |f: &Flash| {
        let json = serde_json::to_vec(f).expect("a refusal serialises");
        base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(json)
    };
    let mut value = encode(&flash);
    if value.len() > MAX_FLASH_COOKIE {
        // Never expected (the caller keeps inputs short): the messages alone, then nothing.
        flash.inputs.clear();
        value = encode(&flash);
    }
    if value.len() > MAX_FLASH_COOKIE {
        flash.errors.clear();
        value = encode(&flash);
    }
    debug_assert!(value.len() <= MAX_FLASH_COOKIE, "a refusal cookie is small");
    let secure = if st.tls { "; Secure" } else { "" };
    let cookie = format!(
        "{}={value}; Path=/; Max-Age=300; HttpOnly; SameSite=Strict{secure}",
        flash_cookie_name(st)
    );
    let mut response = see_other(&format!("{path}?flash={}", flash_tag(&value)));
    response.headers_mut().append(
        header::SET_COOKIE,
        HeaderValue::from_str(&cookie).expect("base64url and fixed attributes"),
    );
    response
}

/// The refused form of `page` that a page without a session was redirected with
/// (`?flash=<tag>` naming the browser's refusal cookie); `None` without one, for another
/// page, or after it was shown (the page clears the cookie: [`forget_anonymous`]).
pub(crate) fn anonymous_flash(
    st: &CabinetState,
    headers: &HeaderMap,
    tag: Option<&str>,
    page: &str,
) -> Option<Flash> {
    use base64::Engine as _;
    let tag = tag?;
    let value = cookie(headers, flash_cookie_name(st))?;
    if value.len() > MAX_FLASH_COOKIE || flash_tag(&value) != tag {
        return None;
    }
    let json = base64::engine::general_purpose::URL_SAFE_NO_PAD
        .decode(value)
        .ok()?;
    serde_json::from_slice::<Flash>(&json)
        .ok()
        .filter(|f| f.page == page)
}

/// `response` clearing the refusal cookie when the request had one: a refusal is shown once.
pub(crate) fn forget_anonymous(
    st: &CabinetState,
    headers: &HeaderMap,
    mut response: Response,
) -> Response {
    if cookie(headers, flash_cookie_name(st)).is_some() {
        let secure = if st.tls { "; Secure" } else { "" };
        let cookie = format!(
            "{}=; Path=/; Max-Age=0; HttpOnly; SameSite=Strict{secure}",
            flash_cookie_name(st)
        );
        response.headers_mut().append(
            header::SET_COOKIE,
            HeaderValue::from_str(&cookie).expect("fixed text"),
        );
    }
    response
}

/// `GET /shown/{slot}`: the value kept in the slot, once, to the session it was made for;
/// anything else (a reload, another session, a late visit) is "already shown" (`410`), and
/// nothing is done.
pub(crate) async fn shown(
    State(st): State<CabinetState>,
    signed: Signed,
    Path(id): Path<String>,
) -> Response {
    let current = &signed.current;
    let slot = match take(&st, current.session.id, &id).await {
        Ok(slot) => slot,
        Err(page) => return page,
    };
    let mut response = match slot {
        Some(Slot::Value {
            title,
            section,
            heading,
            label,
            value,
            notes,
            back,
        }) => html(
            StatusCode::OK,
            &ShownOnce {
                chrome: st
                    .chrome(title, Some(current))
                    .section(section_of(&section)),
                heading,
                label,
                value,
                notes,
                back,
            },
        ),
        Some(Slot::Codes {
            title,
            section,
            codes,
            next,
        }) => html(
            StatusCode::OK,
            &RecoveryCodes {
                chrome: st
                    .chrome(title, Some(current))
                    .section(section_of(&section)),
                codes,
                next,
            },
        ),
        Some(Slot::NewAuthenticator {
            key_base32,
            uri,
            pending,
        }) => html(
            StatusCode::OK,
            &Reenrol {
                chrome: st
                    .chrome(tr("Move the authenticator to a new device"), Some(current))
                    .section("security"),
                qr_svg: Some(super::qr::qr_svg(&uri)),
                uri: Some(uri),
                key_grouped: Some(super::qr::grouped(&key_base32)),
                pending,
            },
        ),
        Some(Slot::Form(_) | Slot::PendingKey { .. }) | None => html(
            StatusCode::GONE,
            &Message {
                chrome: st.chrome(tr("Already shown"), Some(current)),
                text: already_shown().to_string(),
                link: Some(Link::new("/projects", tr("Back to the cabinet"))),
            },
        ),
    };
    response
        .headers_mut()
        .insert(header::CACHE_CONTROL, HeaderValue::from_static("no-store"));
    response
}

/// The navigation section a slot names (`projects`, `security`), as the layout takes it.
fn section_of(name: &str) -> &'static str {
    match name {
        "projects" => "projects",
        "security" => "security",
        _ => "",
    }
}

/// What a second look at a shown-once page says.
fn already_shown() -> &'static str {
    tr("Already shown: this value was displayed once and is not kept to be shown again (reloading the page does not repeat what made it). If you lost it, issue a new one.")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_slot_reads_back_as_written() {
        let slot = Slot::Form(
            Flash::new("access:p", StatusCode::UNPROCESSABLE_ENTITY)
                .error("ip_allow_list", "line 2 is not an address")
                .input("ip_allow_list", "10.0.0.1\n<x>"),
        );
        let text = serde_json::to_string(&slot).expect("serialises");
        match serde_json::from_str::<Slot>(&text).expect("reads") {
            Slot::Form(f) => {
                assert_eq!(f.status(), StatusCode::UNPROCESSABLE_ENTITY);
                assert_eq!(f.typed("ip_allow_list").as_deref(), Some("10.0.0.1\n<x>"));
                assert_eq!(f.errors.len(), 1);
            }
            other => panic!("{other:?}"),
        }
    }
}
