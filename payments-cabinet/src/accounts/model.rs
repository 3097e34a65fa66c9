//! What the cabinet's operations take and answer: who is asking ([`Client`]), the signed-in
//! user ([`Current`]), new sessions, invitations and enrolment keys, and why a step was refused
//! ([`SignInError`], [`ChangeError`]); the e-mail rules; a user as JSON.

use std::net::IpAddr;

use payments_core::ids::{MerchantId, ProjectId};
use payments_core::service::Actor;
use payments_core::store::StoreError;
use payments_core::{ApiError, ErrorCode, SecretString, Timestamp};

use crate::store::{Role, SessionRecord, UserRecord};

/// What one [`Cabinet::purge`](super::Cabinet::purge) deleted.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Purged {
    /// Sessions past their timeouts.
    pub sessions: u64,
    /// Sign-in failures older than the longest throttling window.
    pub failures: u64,
    /// Audit records past their retention or beyond the most kept.
    pub audit: u64,
    /// One-time slots past their expiry (never taken) or beyond
    /// [`CabinetConfig::slots_max`](super::CabinetConfig::slots_max).
    pub slots: u64,
}

/// Who is asking: the client address and browser, for sessions, throttling and the audit log.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Client {
    /// The client address (through trusted proxies), when known.
    pub address: Option<IpAddr>,
    /// The `User-Agent`, shortened.
    pub user_agent: Option<String>,
}

impl Client {
    pub(crate) fn address_text(&self) -> Option<String> {
        self.address.map(|a| a.to_string())
    }
}

/// The source an address is throttled as: an IPv4 address itself (also when IPv4-mapped), an
/// IPv6 address by its /64, which one host usually holds whole and can pick addresses from.
pub fn source_of(address: IpAddr) -> String {
    match address {
        IpAddr::V4(v4) => v4.to_string(),
        IpAddr::V6(v6) => match v6.to_ipv4_mapped() {
            Some(v4) => v4.to_string(),
            None => {
                let s = v6.segments();
                let prefix = std::net::Ipv6Addr::new(s[0], s[1], s[2], s[3], 0, 0, 0, 0);
                format!("{prefix}/64")
            }
        },
    }
}

/// Why a sign-in step was refused. The message does not say which part was wrong.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum SignInError {
    /// Wrong e-mail or password (or a disabled account, or one without a password).
    #[error("The e-mail address or the password is not right.")]
    BadPassword,
    /// A wrong, malformed or already used code.
    #[error("The code is not right, or it was already used. Wait for the next code.")]
    BadCode,
    /// A wrong or used recovery code.
    #[error("The recovery code is not right, or it was already used.")]
    BadRecoveryCode,
    /// Too many failures: nothing is checked until `until`.
    #[error("Too many failed attempts. Try again after {}.", when_text(*until))]
    Throttled {
        /// When attempts are checked again.
        until: Timestamp,
    },
    /// Every password check is taken and none came free within
    /// [`CabinetConfig::password_wait`](super::CabinetConfig::password_wait): nothing was checked or counted (`503`,
    /// `Retry-After`).
    #[error("The service is busy checking other sign-ins. Try again in a few seconds.")]
    Busy,
    /// The session ended (timeout, sign-out, revoked): sign in again.
    #[error("The session has ended. Sign in again.")]
    SessionEnded,
    /// The store failed.
    #[error("{0}")]
    Store(String),
}

impl From<StoreError> for SignInError {
    fn from(e: StoreError) -> Self {
        SignInError::Store(e.to_string())
    }
}

impl From<ApiError> for SignInError {
    fn from(e: ApiError) -> Self {
        SignInError::Store(e.message)
    }
}

/// A session as the web layer holds it: the cookie value (shown to the browser only) and the
/// record.
#[derive(Debug, Clone)]
pub struct NewSession {
    /// The cookie value.
    pub cookie: SecretString,
    /// The stored session.
    pub record: SessionRecord,
}

/// A request's signed-in (or half signed-in) user.
#[derive(Debug, Clone)]
pub struct Current {
    /// The session.
    pub session: SessionRecord,
    /// Its user.
    pub user: UserRecord,
}

impl Current {
    /// The audit actor of the user's actions through the core: `cabinet:<e-mail>`.
    pub fn actor(&self) -> Actor {
        Actor(format!("cabinet:{}", self.user.email))
    }

    /// Whether the user is support staff.
    pub fn is_support(&self) -> bool {
        self.user.role == Role::Support
    }
}

/// What to show the user for enrolment.
#[derive(Debug, Clone)]
pub struct Enrolment {
    /// The key as base32 text (typed into an authenticator).
    pub key_base32: String,
    /// The `otpauth://` URI.
    pub uri: String,
}

/// A new invitation link's token, shown once.
#[derive(Debug, Clone)]
pub struct Invite {
    /// The user.
    pub user: UserRecord,
    /// The token of the link (`/invite/<token>`).
    pub token: SecretString,
    /// When the link stops working.
    pub expires_at: Timestamp,
}

/// A change made in the cabinet, for [`AuditLog::change`](super::AuditLog::change).
#[derive(Debug, Clone)]
pub struct Change<'a> {
    /// The merchant whose users see the record.
    pub merchant: MerchantId,
    /// The project changed, if any.
    pub project: Option<ProjectId>,
    /// What (e.g. `token.issue`).
    pub action: &'a str,
    /// The object acted on (an id).
    pub target: &'a str,
    /// More, as short text (never a secret).
    pub detail: Option<String>,
}

/// A refused security change: a rule of the new password, or a refused step.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ChangeError {
    /// The new password breaks a rule.
    #[error("{0}")]
    Rule(String),
    /// The password, the code or the session was refused.
    #[error(transparent)]
    Refused(#[from] SignInError),
}

impl From<StoreError> for ChangeError {
    fn from(e: StoreError) -> Self {
        ChangeError::Refused(e.into())
    }
}

impl From<ApiError> for ChangeError {
    fn from(e: ApiError) -> Self {
        ChangeError::Refused(e.into())
    }
}

/// A time as text only, in the cabinet's one format (`2026-11-27 14:03 UTC`).
pub(crate) fn when_text(t: Timestamp) -> String {
    let iso = t.to_rfc3339();
    format!("{} {} UTC", &iso[..10], &iso[11..16])
}

pub(super) fn bad_request(m: impl Into<String>) -> ApiError {
    ApiError::bad_request(m)
}

/// What a refused sign-in may carry back to fill its form again: the e-mail field as typed
/// (trimmed) when it is an e-mail address of at most 254 characters, and nothing for a
/// throttled attempt, so a flood of guesses gets its message and no echo of what it sent.
pub fn refill_email(typed: &str, refusal: &SignInError) -> Option<String> {
    if matches!(refusal, SignInError::Throttled { .. }) {
        return None;
    }
    normalise_email(typed)
        .ok()
        .map(|_| typed.trim().to_string())
}

/// An e-mail address as stored: trimmed, lower-case; refused unless it looks like
/// `local@domain` (one `@`, no spaces or control characters, 3 to 254 characters).
pub fn normalise_email(email: &str) -> Result<String, ApiError> {
    let e = email.trim().to_lowercase();
    let ok = (3..=254).contains(&e.len())
        && e.matches('@').count() == 1
        && !e.starts_with('@')
        && !e.ends_with('@')
        && !e.chars().any(|c| c.is_whitespace() || c.is_control());
    if ok {
        Ok(e)
    } else {
        Err(bad_request(format!(
            "email: {:?} is not an e-mail address",
            email.trim()
        )))
    }
}

/// What the audit log keeps of a typed e-mail: the address, normalised, or, when the input is
/// no e-mail address (a password typed into the wrong field, junk), only its length.
pub(super) fn shown_email(input: &str) -> String {
    match normalise_email(input) {
        Ok(email) if email.len() <= 254 => email,
        _ => format!(
            "(not an e-mail address, {} characters)",
            input.chars().count()
        ),
    }
}

pub(super) fn invite_gone() -> ApiError {
    ApiError::new(
        ErrorCode::NotFound,
        "this invitation link is not valid: it was used, replaced or has expired; ask for a new one",
    )
}

/// A user as JSON (the operator API's view; no hash, no key).
pub fn user_json(u: &UserRecord) -> String {
    user_value(u).to_string()
}

/// A user as a JSON value.
pub fn user_value(u: &UserRecord) -> serde_json::Value {
    serde_json::json!({
        "id": u.id,
        "email": u.email,
        "role": u.role.kind(),
        "merchant_id": u.role.merchant(),
        "team_role": u.role.merchant().map(|_| u.team_role.name()),
        "projects": u.role.merchant().and(u.projects.as_ref()),
        "password_set": u.password_hash.is_some(),
        "two_factor": u.totp_confirmed_at.is_some(),
        "disabled": u.disabled,
        "created_at": u.created_at,
    })
}
