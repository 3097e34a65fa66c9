//! Cabinet sessions, and the one write that moves sign-in forward: a session is replaced by a
//! new one together with the use of what proved the step (a TOTP step, a recovery code, an
//! enrolment's first code).

use async_trait::async_trait;
use payments_core::ids::{SessionId, UserId};
use payments_core::store::StoreError;
use payments_core::Timestamp;

/// How far a session has come.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum SessionStage {
    /// The password was right; the second factor (or enrolment) is next. Opens no page but the
    /// second-factor and enrolment pages.
    Password,
    /// Signed in with both factors.
    Full,
}

impl SessionStage {
    /// The stored name.
    pub const fn as_str(self) -> &'static str {
        match self {
            SessionStage::Password => "password",
            SessionStage::Full => "full",
        }
    }

    /// Parses a stored name.
    pub fn parse(s: &str) -> Option<SessionStage> {
        match s {
            "password" => Some(SessionStage::Password),
            "full" => Some(SessionStage::Full),
            _ => None,
        }
    }
}

/// A cabinet session as stored: the cookie itself is never stored, only its SHA-256.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SessionRecord {
    /// The public handle (listed and revoked by it).
    pub id: SessionId,
    /// SHA-256 of the cookie value; unique.
    pub token_hash: [u8; 32],
    /// Whose session.
    pub user_id: UserId,
    /// How far sign-in has come.
    pub stage: SessionStage,
    /// When the session (this id) was made.
    pub created_at: Timestamp,
    /// When the user first signed in: the absolute timeout counts from here, across the new
    /// ids each sign-in step makes.
    pub signed_in_at: Timestamp,
    /// The last request seen (the idle timeout counts from here).
    pub last_seen_at: Timestamp,
    /// The client address at sign-in.
    pub address: Option<String>,
    /// The client's `User-Agent` at sign-in (shortened).
    pub user_agent: Option<String>,
}

/// What a sign-in step proves, checked and used in the same write as the step
/// ([`CabinetSessions::advance_session`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum SessionProof {
    /// No second factor (e.g. a session renewed after a password change).
    None,
    /// A TOTP code of this time step: accepted only if the step is later than the last step
    /// the user used, which then becomes this one.
    TotpStep(u64),
    /// A recovery code, by its SHA-256: accepted only if the user holds it unused; it is
    /// consumed.
    RecoveryCode([u8; 32]),
    /// The first TOTP code of an enrolment: accepted only while the user's key is unconfirmed;
    /// confirms it at `at`, records `step` as the last step used and replaces the user's
    /// recovery codes with `recovery_codes` (SHA-256 each).
    Enrolment {
        /// The time step of the confirming code.
        step: u64,
        /// The new recovery codes' hashes.
        recovery_codes: Vec<[u8; 32]>,
        /// The confirmation time.
        at: Timestamp,
    },
}

/// Which sessions [`CabinetSessions::find_sessions`] looks up.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SessionKey<'a> {
    /// The session whose cookie has this SHA-256.
    TokenHash(&'a [u8; 32]),
    /// A user's sessions.
    User(UserId),
}

/// Which sessions [`CabinetSessions::delete_sessions`] deletes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SessionScope {
    /// This session (a sign-out).
    One(SessionId),
    /// A user's sessions, except `keep` (signing out elsewhere, or a disabled user).
    User {
        /// The user.
        user: UserId,
        /// A session to keep, the one that asked.
        keep: Option<SessionId>,
    },
    /// Sessions last seen before `idle_before` or signed in before `signed_in_before`.
    Stale {
        /// Idle since before this.
        idle_before: Timestamp,
        /// Signed in before this.
        signed_in_before: Timestamp,
    },
}

/// The cabinet's sessions. Sessions are unique by the hash of their cookie.
#[async_trait]
pub trait CabinetSessions: Send + Sync {
    /// Stores a new session; [`StoreError::Duplicate`] if its token hash or id exists.
    async fn insert_session(&self, session: &SessionRecord) -> Result<(), StoreError>;
    /// The sessions `key` names: one by the SHA-256 of its cookie (none or one), or a user's,
    /// oldest first.
    async fn find_sessions(&self, key: SessionKey<'_>) -> Result<Vec<SessionRecord>, StoreError>;
    /// Moves a session's `last_seen_at` to `at` (never backwards); `false` if it is gone.
    async fn update_session_seen(&self, id: SessionId, at: Timestamp) -> Result<bool, StoreError>;
    /// Deletes the sessions `which` names; returns how many.
    async fn delete_sessions(&self, which: SessionScope) -> Result<u64, StoreError>;
    /// One sign-in step, in one write: if the session with token hash `old` exists and
    /// `proof` holds for `new.user_id` (see [`SessionProof`]), uses the proof, deletes the old
    /// session and stores `new` (a new id and token) and answers `true`; otherwise writes
    /// nothing and answers `false`.
    async fn advance_session(
        &self,
        old: &[u8; 32],
        new: &SessionRecord,
        proof: &SessionProof,
    ) -> Result<bool, StoreError>;
}
