//! The web cabinet's storage ports, one per aggregate: users and their recovery codes
//! ([`CabinetUsers`]), sessions and the sign-in step ([`CabinetSessions`]), invitations
//! ([`CabinetInvites`]), sign-in failures for throttling ([`SignInFailures`]), one-time slots
//! (what a page shows once, [`CabinetSlots`]) and the cabinet's audit log
//! ([`CabinetAuditLog`]). [`CabinetStore`] is all of them: what the cabinet is given, and what
//! a store implements by implementing each.
//! What the cabinet shows of payments, events, tokens and payer page links it reads through the
//! service's [`Store`](payments_core::store::Store).
//!
//! The cabinet's rules (which TOTP step is acceptable, how many failures lock an account, when a
//! session ends) live in Rust over these ports (the `accounts` module, feature `web`); the store
//! only keeps the records and makes the few steps that must be atomic atomic: a TOTP step is
//! used at most once ([`CabinetSessions::advance_session`] moves the user's last step forward
//! only), a recovery code is consumed in the same write as the sign-in it allows, an invitation
//! is taken once ([`CabinetInvites::take_invite`]), and so is a one-time slot
//! ([`CabinetSlots::take_slot`]).
//!
//! # One verb set
//! Every port method starts with one of:
//! - `insert_`: stores a new record (`Duplicate` when its key exists);
//! - `find_`: reads the records a key or a query names (a `count_` is a find that answers how
//!   many);
//! - `update_`: changes a stored record;
//! - `delete_`: deletes the records a scope names (retention included) and answers how many;
//! - `take_`: an atomic find and delete, so that exactly one of concurrent takers gets the
//!   record;
//! - `advance_session`: the one compound step, the sign-in step (see its documentation).
//!
//! [`CabinetStoreExt`] names the common lookups and deletions over the finds and scopes.
//!
//! This module is all of the crate that a store needs: with `default-features = false` the
//! crate is the ports alone (no web framework, templates or password hashing), which is how the
//! bundled SQLite and PostgreSQL stores depend on it; they keep these records in the service's
//! database and implement the cabinet's ports and the core's. The cabinet is given its store
//! explicitly (`Cabinet::new`; the server's `ApplicationBuilder::cabinet_store`). The contract
//! suite for a cabinet store is `testing::contract` (feature `testing`), and
//! `testing::MemoryCabinetStore` is the reference implementation.

mod audit;
mod failures;
mod invites;
mod sessions;
mod slots;
mod users;

use async_trait::async_trait;
use payments_core::ids::{SessionId, UserId};
use payments_core::store::StoreError;
use payments_core::Timestamp;

pub use audit::{AuditCursor, AuditPage, AuditQuery, CabinetAuditLog, CabinetAuditRecord};
pub use failures::{FailureScope, SignInFailures};
pub use invites::{CabinetInvites, InviteRecord};
pub use sessions::{
    CabinetSessions, SessionKey, SessionProof, SessionRecord, SessionScope, SessionStage,
};
pub use slots::{CabinetSlots, SlotRecord};
pub use users::{CabinetUsers, Role, TeamRole, UserKey, UserRecord};

/// Everything the web cabinet keeps: every cabinet port. A store implements each port and is
/// a `CabinetStore` by that.
///
/// The writes that decide something are atomic:
/// [`advance_session`](CabinetSessions::advance_session) (a TOTP step used once, a recovery
/// code consumed once, an enrolment confirmed once, together with the session change),
/// [`take_invite`](CabinetInvites::take_invite) and [`take_slot`](CabinetSlots::take_slot).
pub trait CabinetStore:
    CabinetUsers + CabinetSessions + CabinetInvites + SignInFailures + CabinetSlots + CabinetAuditLog
{
}

impl<S> CabinetStore for S where
    S: CabinetUsers
        + CabinetSessions
        + CabinetInvites
        + SignInFailures
        + CabinetSlots
        + CabinetAuditLog
        + ?Sized
{
}

/// The lookups and deletions by name over the cabinet ports' finds and scopes, for every
/// cabinet store (not part of the port: a backend writes the finds, a wrapper forwards them).
#[async_trait]
pub trait CabinetStoreExt: CabinetStore {
    /// A user by id.
    async fn user(&self, id: UserId) -> Result<Option<UserRecord>, StoreError> {
        Ok(self.find_users(UserKey::Id(id)).await?.pop())
    }
    /// A user by e-mail (as stored: lower-case).
    async fn user_by_email(&self, email: &str) -> Result<Option<UserRecord>, StoreError> {
        Ok(self.find_users(UserKey::Email(email)).await?.pop())
    }
    /// Every user, in e-mail order.
    async fn users(&self) -> Result<Vec<UserRecord>, StoreError> {
        self.find_users(UserKey::All).await
    }
    /// A session by the SHA-256 of its cookie.
    async fn session_by_token(&self, hash: &[u8; 32]) -> Result<Option<SessionRecord>, StoreError> {
        Ok(self.find_sessions(SessionKey::TokenHash(hash)).await?.pop())
    }
    /// A user's sessions, oldest first.
    async fn user_sessions(&self, user: UserId) -> Result<Vec<SessionRecord>, StoreError> {
        self.find_sessions(SessionKey::User(user)).await
    }
    /// Deletes a session; `false` if it was not there.
    async fn delete_session(&self, id: SessionId) -> Result<bool, StoreError> {
        Ok(self.delete_sessions(SessionScope::One(id)).await? > 0)
    }
    /// Deletes a user's sessions but `keep`; returns how many.
    async fn delete_user_sessions(
        &self,
        user: UserId,
        keep: Option<SessionId>,
    ) -> Result<u64, StoreError> {
        self.delete_sessions(SessionScope::User { user, keep })
            .await
    }
    /// Deletes sessions last seen before `idle_before` or signed in before `signed_in_before`;
    /// returns how many.
    async fn purge_sessions(
        &self,
        idle_before: Timestamp,
        signed_in_before: Timestamp,
    ) -> Result<u64, StoreError> {
        self.delete_sessions(SessionScope::Stale {
            idle_before,
            signed_in_before,
        })
        .await
    }
    /// Forgets `key`'s failures (after a successful sign-in).
    async fn clear_failures(&self, key: &str) -> Result<(), StoreError> {
        self.delete_failures(FailureScope::Key(key)).await.map(drop)
    }
    /// Forgets one attempt of `key` recorded at `at` (see [`FailureScope::One`]).
    async fn forget_attempt(&self, key: &str, at: Timestamp) -> Result<(), StoreError> {
        self.delete_failures(FailureScope::One { key, at })
            .await
            .map(drop)
    }
    /// Deletes failures before `before`; returns how many.
    async fn purge_failures(&self, before: Timestamp) -> Result<u64, StoreError> {
        self.delete_failures(FailureScope::Before(before)).await
    }
}

impl<S: CabinetStore + ?Sized> CabinetStoreExt for S {}
