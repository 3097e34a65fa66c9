//! The web cabinet's storage port: users, their password hashes and TOTP secrets, recovery
//! codes, sessions, invitations, one-time slots (what a page shows once), sign-in failures
//! (throttling) and the cabinet's audit log.
//! What the cabinet shows of payments, events, tokens and payer page links it reads through the
//! service's [`Store`](payments_core::store::Store).
//!
//! The cabinet's rules (which TOTP step is acceptable, how many failures lock an account, when a
//! session ends) live in Rust over this port (the `accounts` module, feature `web`); the store
//! only keeps the records and makes the few steps that must be atomic atomic: a TOTP step is
//! used at most once ([`CabinetStore::advance_session`] moves the user's last step forward
//! only), a recovery code is consumed in the same write as the sign-in it allows, an invitation
//! is taken once, and so is a one-time slot ([`CabinetStore::take_slot`]: what a page shows
//! once).
//!
//! This module is all of the crate that a store needs: with `default-features = false` the
//! crate is the port alone (no web framework, templates or password hashing), which is how the
//! bundled SQLite and PostgreSQL stores depend on it; they keep these records in the service's
//! database and implement both ports. The cabinet is given its store explicitly
//! (`Cabinet::new`; the server's `ApplicationBuilder::cabinet_store`). The contract suite for a
//! cabinet store is `testing::contract` (feature `testing`), and
//! `testing::MemoryCabinetStore` is the reference implementation.

use async_trait::async_trait;
use payments_core::ids::{MerchantId, ProjectId, SessionId, UserId};
use payments_core::store::StoreError;
use payments_core::{SecretString, Timestamp};

/// What a cabinet user may see and do.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Role {
    /// A merchant's user: that merchant's projects only.
    Merchant(MerchantId),
    /// Support staff: every merchant, and the operator's payment operations.
    Support,
}

impl Role {
    /// The stored name: `merchant` or `support`.
    pub const fn kind(self) -> &'static str {
        match self {
            Role::Merchant(_) => "merchant",
            Role::Support => "support",
        }
    }

    /// The merchant of a merchant user.
    pub const fn merchant(self) -> Option<MerchantId> {
        match self {
            Role::Merchant(m) => Some(m),
            Role::Support => None,
        }
    }
}

/// A cabinet user as stored.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct UserRecord {
    /// User id.
    pub id: UserId,
    /// The sign-in name: an e-mail address, stored lower-case; unique.
    pub email: String,
    /// Merchant user or support.
    pub role: Role,
    /// The password as an argon2id PHC string; `None` until set through an invitation.
    pub password_hash: Option<String>,
    /// The TOTP key, sealed like callback secrets; `None` until enrolment starts.
    pub totp_secret: Option<SecretString>,
    /// When the TOTP key was confirmed with a code; `None` while enrolment is pending (the
    /// next sign-in asks for enrolment).
    pub totp_confirmed_at: Option<Timestamp>,
    /// A disabled user cannot sign in; its sessions are refused.
    pub disabled: bool,
    /// Creation time.
    pub created_at: Timestamp,
}

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

/// An invitation: a one-time link to set a password.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct InviteRecord {
    /// SHA-256 of the link's token; unique.
    pub token_hash: [u8; 32],
    /// The user it lets set a password.
    pub user_id: UserId,
    /// Issue time.
    pub created_at: Timestamp,
    /// After this the link is refused.
    pub expires_at: Timestamp,
}

/// What a sign-in step proves, checked and used in the same write as the step
/// ([`CabinetStore::advance_session`]).
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

/// A cabinet event for the audit log: every change made in the cabinet and every sign-in,
/// successful or not, with the user and the client address.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CabinetAuditRecord {
    /// When.
    pub at: Timestamp,
    /// The user, when known (an unknown e-mail at sign-in has none).
    pub user_id: Option<UserId>,
    /// The e-mail the user signed in with or had.
    pub email: String,
    /// The client address.
    pub address: Option<String>,
    /// The merchant concerned (the user's, or the project's): its users see the record.
    pub merchant_id: Option<MerchantId>,
    /// The project concerned, if any.
    pub project_id: Option<ProjectId>,
    /// What (e.g. `sign_in.password`, `token.issue`).
    pub action: String,
    /// The object acted on (an id), or empty.
    pub target: String,
    /// `false` for a refused attempt.
    pub success: bool,
    /// More, as short text (never a secret).
    pub detail: Option<String>,
}

/// Everything the web cabinet keeps, and the listings it reads.
///
/// Users are unique by e-mail; sessions and invitations by the hash of their token. The writes
/// that decide something are atomic: [`advance_session`](Self::advance_session) (a TOTP step
/// used once, a recovery code consumed once, an enrolment confirmed once, together with the
/// session change), [`find_invite`](Self::find_invite) with [`InviteUse::Take`] and
/// [`take_slot`](Self::take_slot).
#[async_trait]
pub trait CabinetStore: Send + Sync {
    /// Stores a new user; [`StoreError::Duplicate`] if the e-mail (or id) is taken.
    async fn insert_user(&self, user: &UserRecord) -> Result<(), StoreError>;
    /// Replaces a user's fields (the last TOTP step is not one of them: only
    /// [`advance_session`](Self::advance_session) moves it); [`StoreError::NotFound`] for an
    /// unknown user, [`StoreError::Duplicate`] if the new e-mail is another user's.
    async fn update_user(&self, user: &UserRecord) -> Result<(), StoreError>;
    /// The users `key` names: one by id or by e-mail (none or one), or every user in e-mail
    /// order.
    async fn find_users(&self, key: UserKey<'_>) -> Result<Vec<UserRecord>, StoreError>;

    /// Replaces the user's recovery codes (SHA-256 each) with `codes`.
    async fn replace_recovery_codes(
        &self,
        user: UserId,
        codes: &[[u8; 32]],
    ) -> Result<(), StoreError>;
    /// How many unused recovery codes the user holds.
    async fn recovery_codes_left(&self, user: UserId) -> Result<u32, StoreError>;

    /// Stores a new session; [`StoreError::Duplicate`] if its token hash or id exists.
    async fn insert_session(&self, session: &SessionRecord) -> Result<(), StoreError>;
    /// The sessions `key` names: one by the SHA-256 of its cookie (none or one), or a user's,
    /// oldest first.
    async fn find_sessions(&self, key: SessionKey<'_>) -> Result<Vec<SessionRecord>, StoreError>;
    /// Moves a session's `last_seen_at` to `at` (never backwards); `false` if it is gone.
    async fn touch_session(&self, id: SessionId, at: Timestamp) -> Result<bool, StoreError>;
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

    /// Stores an invitation, deleting the user's earlier ones.
    async fn put_invite(&self, invite: &InviteRecord) -> Result<(), StoreError>;
    /// The invitation with this token hash if it is live at `now` (not taken, not expired).
    /// With [`InviteUse::Take`] it is taken (deleted) in the same step, expired or not, and
    /// exactly one of concurrent takers gets it.
    async fn find_invite(
        &self,
        hash: &[u8; 32],
        now: Timestamp,
        then: InviteUse,
    ) -> Result<Option<InviteRecord>, StoreError>;

    /// Records a failed sign-in attempt under `key` (an account or an address).
    async fn record_failure(&self, key: &str, at: Timestamp) -> Result<(), StoreError>;
    /// The times of `key`'s failures at or after `since`, oldest first, at most `limit`
    /// (the oldest ones when there are more).
    async fn failures_since(
        &self,
        key: &str,
        since: Timestamp,
        limit: usize,
    ) -> Result<Vec<Timestamp>, StoreError>;
    /// Forgets the failures `which` names; returns how many.
    async fn forget_failures(&self, which: FailureScope<'_>) -> Result<u64, StoreError>;

    /// Stores a one-time slot; [`StoreError::Duplicate`] if its id hash exists. Then keeps
    /// at most `keep` slots of its owner, the newest by `created_at`: the owner's older ones
    /// are deleted in the same call, so whatever a session does, it holds a bounded number.
    async fn put_slot(&self, slot: &SlotRecord, keep: usize) -> Result<(), StoreError>;
    /// Takes the slot with id hash `hash` if `owner` owns it and it is live at `now` (its
    /// `expires_at` later than `now`): deletes it and answers it in one step, so that exactly
    /// one of concurrent takers gets it. A slot of another owner is neither answered nor
    /// deleted; an expired one is not answered.
    async fn take_slot(
        &self,
        hash: &[u8; 32],
        owner: Option<SessionId>,
        now: Timestamp,
    ) -> Result<Option<SlotRecord>, StoreError>;
    /// Deletes the slots expired at `now` (`expires_at` at or before it), then those beyond
    /// the `keep` that expire last (the oldest go first); returns how many. Deleting needs no
    /// room of its own worth the name: it runs on a full disk too.
    async fn purge_slots(&self, now: Timestamp, keep: u64) -> Result<u64, StoreError>;

    /// Appends a record to the cabinet's audit log.
    async fn append_cabinet_audit(&self, record: &CabinetAuditRecord) -> Result<(), StoreError>;
    /// A page of the records `query` asks for, newest first (in the order they were
    /// appended), with the cursor of the next page when there are more.
    async fn cabinet_audit(&self, query: &AuditQuery) -> Result<AuditPage, StoreError>;
    /// Retention: deletes records among the oldest `limit` that were made before `before` or
    /// that fall outside the newest `keep` (when set); returns how many. The age rule reads
    /// the oldest records only, so a record made earlier than an older neighbour waits for
    /// it (records are appended in time order, give or take the nodes' clock skew).
    async fn purge_cabinet_audit(
        &self,
        before: Timestamp,
        keep: Option<u64>,
        limit: usize,
    ) -> Result<u64, StoreError>;
}

/// A one-time slot: a value the cabinet shows once (a new API token, a rotated callback
/// secret, new recovery codes), or what a refused form carries to the page that shows it
/// again, kept for the one `GET` that the `303` answering the `POST` leads to. The first read
/// by its owner before its expiry takes it ([`CabinetStore::take_slot`]); a reload finds
/// nothing, so it neither shows the value again nor repeats the action.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SlotRecord {
    /// SHA-256 of the slot's id; unique. The id itself travels only in the page's URL.
    pub id_hash: [u8; 32],
    /// The session it was made for: only that session takes it. `None` for the pages of
    /// sign-in and invitations, which have no session yet (their slots hold no secret).
    pub owner: Option<SessionId>,
    /// What the page shows, sealed like callback secrets (the cabinet seals and opens it).
    pub payload: SecretString,
    /// When it was made.
    pub created_at: Timestamp,
    /// From this time on it is not answered (and is purged).
    pub expires_at: Timestamp,
}

/// Which cabinet audit records [`CabinetStore::cabinet_audit`] lists: every filter that is set
/// must hold.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct AuditQuery {
    /// Only this merchant's records (what its users see).
    pub merchant: Option<MerchantId>,
    /// Only this action (`sign_in.password`) or family of actions (`sign_in`: every
    /// `sign_in.*`, and `sign_in` itself).
    pub action: Option<String>,
    /// Only successes (`true`) or only refusals (`false`).
    pub success: Option<bool>,
    /// Only records with this e-mail (as stored: lower-case).
    pub email: Option<String>,
    /// Only records older than this cursor (a previous page's [`AuditPage::next`]).
    pub before: Option<AuditCursor>,
    /// At most this many.
    pub limit: usize,
}

impl AuditQuery {
    /// Whether `record` passes the filters (the cursor and the limit aside).
    pub fn matches(&self, record: &CabinetAuditRecord) -> bool {
        self.merchant.is_none_or(|m| record.merchant_id == Some(m))
            && self.success.is_none_or(|s| record.success == s)
            && self.email.as_deref().is_none_or(|e| record.email == e)
            && self.action.as_deref().is_none_or(|a| {
                record.action == a
                    || record
                        .action
                        .strip_prefix(a)
                        .is_some_and(|rest| rest.starts_with('.'))
            })
    }
}

/// A page of the cabinet audit log.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct AuditPage {
    /// The records, newest first.
    pub records: Vec<CabinetAuditRecord>,
    /// Where the next (older) page starts, when there are more records.
    pub next: Option<AuditCursor>,
}

impl AuditPage {
    /// The page of a query with `limit` from what a store found for it: at most `limit + 1`
    /// records, newest first, each with its sequence number. The one past the limit, if
    /// found, only says that there is a next page.
    pub fn of<R: std::borrow::Borrow<CabinetAuditRecord>>(
        found: Vec<(u64, R)>,
        limit: usize,
    ) -> AuditPage {
        let more = found.len() > limit;
        let mut next = None;
        let records = found
            .into_iter()
            .take(limit)
            .map(|(seq, r)| {
                next = Some(AuditCursor(seq));
                r.borrow().clone()
            })
            .collect();
        AuditPage {
            records,
            next: next.filter(|_| more),
        }
    }
}

/// A position in the cabinet audit log: the store's sequence number of a record. Opaque to
/// clients; it travels in page links as a decimal number.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct AuditCursor(pub u64);

impl std::fmt::Display for AuditCursor {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        self.0.fmt(f)
    }
}

impl std::str::FromStr for AuditCursor {
    type Err = std::num::ParseIntError;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        s.parse().map(AuditCursor)
    }
}

/// Which users [`CabinetStore::find_users`] looks up.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum UserKey<'a> {
    /// The user with this id.
    Id(UserId),
    /// The user with this e-mail (as stored: lower-case).
    Email(&'a str),
    /// Every user.
    All,
}

/// Which sessions [`CabinetStore::find_sessions`] looks up.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SessionKey<'a> {
    /// The session whose cookie has this SHA-256.
    TokenHash(&'a [u8; 32]),
    /// A user's sessions.
    User(UserId),
}

/// Which sessions [`CabinetStore::delete_sessions`] deletes.
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

/// What [`CabinetStore::find_invite`] does with a live invitation it finds.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum InviteUse {
    /// Reads it only (the page that asks for a password).
    Peek,
    /// Takes it: deletes it and answers it, once.
    Take,
}

/// Which sign-in failures [`CabinetStore::forget_failures`] forgets.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FailureScope<'a> {
    /// Every failure under this key (after a successful sign-in).
    Key(&'a str),
    /// Every failure before this time (retention).
    Before(Timestamp),
    /// One failure under `key` recorded at `at` (the newest such, if several): an attempt that
    /// was counted before it was checked and turned out not to be a failure (it was refused
    /// by the throttle unchecked, or it succeeded).
    One {
        /// The key.
        key: &'a str,
        /// The time it was recorded at.
        at: Timestamp,
    },
}

/// The lookups and deletions by name over [`CabinetStore`]'s finds and scopes, for every
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
    /// The invitation with this token hash if it is live at `now` (not taken, not expired).
    async fn invite(
        &self,
        hash: &[u8; 32],
        now: Timestamp,
    ) -> Result<Option<InviteRecord>, StoreError> {
        self.find_invite(hash, now, InviteUse::Peek).await
    }
    /// Takes (deletes) the invitation with this token hash and answers it if it had not
    /// expired at `now`; exactly one of concurrent calls gets it.
    async fn take_invite(
        &self,
        hash: &[u8; 32],
        now: Timestamp,
    ) -> Result<Option<InviteRecord>, StoreError> {
        self.find_invite(hash, now, InviteUse::Take).await
    }
    /// Forgets `key`'s failures (after a successful sign-in).
    async fn clear_failures(&self, key: &str) -> Result<(), StoreError> {
        self.forget_failures(FailureScope::Key(key)).await.map(drop)
    }
    /// Forgets one attempt of `key` recorded at `at` (see [`FailureScope::One`]).
    async fn forget_attempt(&self, key: &str, at: Timestamp) -> Result<(), StoreError> {
        self.forget_failures(FailureScope::One { key, at })
            .await
            .map(drop)
    }
    /// Deletes failures before `before`; returns how many.
    async fn purge_failures(&self, before: Timestamp) -> Result<u64, StoreError> {
        self.forget_failures(FailureScope::Before(before)).await
    }
}

impl<S: CabinetStore + ?Sized> CabinetStoreExt for S {}
