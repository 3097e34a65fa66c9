//! The cabinet's own rules over the core's ports: users and invitations, sign-in with a password
//! and a TOTP code (or a recovery code), forced enrolment, throttling, sessions with idle and
//! absolute timeouts, one-time slots and the cabinet's audit log. Payments, projects and
//! credentials are the core's: the web pages call [`PaymentService`](payments_core::service::PaymentService)
//! for them.
//!
//! [`Cabinet`] is the handle; each job is a type of its own, reached from it:
//! [`Cabinet::users`] ([`Users`]), [`Cabinet::sign_in`] ([`SignIn`]), [`Cabinet::two_factor`]
//! ([`TwoFactor`]), [`Cabinet::sessions`] ([`Sessions`]), [`Cabinet::slots`] ([`Slots`]),
//! [`Cabinet::audit_log`] ([`AuditLog`]) and [`Cabinet::team`] ([`Team`]: a merchant's users,
//! their roles and [`Permission`]s).
//!
//! The modules are layers: the settings (`config`), what operations take and answer (`model`),
//! the password pool and the refusal counter below the handle (`cabinet`); the audit log,
//! throttling and the TOTP keys at rest over it; the steps sign-in shares (`steps`); the jobs on
//! top. No module imports one above it.

mod audit;
mod cabinet;
mod config;
mod keys;
mod model;
mod passwords;
mod refusals;
mod sessions;
mod sign_in;
mod slots;
mod steps;
mod team;
mod throttle;
mod two_factor;
mod users;

pub use audit::AuditLog;
pub use cabinet::Cabinet;
pub use config::{CabinetConfig, Limit, AUDIT_PURGE_BATCH, AUDIT_PURGE_BATCHES};
pub(crate) use model::when_text;
pub use model::{
    normalise_email, refill_email, source_of, user_json, user_value, Change, ChangeError, Client,
    Current, Enrolment, Invite, NewSession, Purged, SignInError,
};
pub use sessions::Sessions;
pub use sign_in::SignIn;
pub use slots::Slots;
pub use team::{Membership, Permission, Team, TeamError};
pub use two_factor::TwoFactor;
pub use users::Users;
