//! Cabinet users: who may sign in, with what role, their password hash and TOTP key, and their
//! recovery codes.

use async_trait::async_trait;
use payments_core::ids::{MerchantId, ProjectId, UserId};
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

/// What a merchant's user does in the merchant's team: the pages and forms it may use
/// ([`Permission`](crate::accounts::Permission) says which). Support staff have none: they
/// are no merchant's team.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum TeamRole {
    /// Everything, the team included; the merchant keeps at least one.
    Owner,
    /// Everything but the owners: may not add, change or remove an owner.
    Admin,
    /// The API access: tokens, keys, the allow-list, callbacks, the payer page, requests.
    Developer,
    /// Money: balances, statements and exports.
    Finance,
    /// Payers' questions: payments, callback resends and appeals.
    SupportAgent,
    /// Reads payments and deliveries; changes nothing.
    Viewer,
}

impl TeamRole {
    /// Every role, the widest first.
    pub const ALL: [TeamRole; 6] = [
        TeamRole::Owner,
        TeamRole::Admin,
        TeamRole::Developer,
        TeamRole::Finance,
        TeamRole::SupportAgent,
        TeamRole::Viewer,
    ];

    /// The stored name (`owner`, `admin`, `developer`, `finance`, `support_agent`, `viewer`).
    pub const fn name(self) -> &'static str {
        match self {
            TeamRole::Owner => "owner",
            TeamRole::Admin => "admin",
            TeamRole::Developer => "developer",
            TeamRole::Finance => "finance",
            TeamRole::SupportAgent => "support_agent",
            TeamRole::Viewer => "viewer",
        }
    }

    /// The role a stored name names.
    pub fn parse(name: &str) -> Option<TeamRole> {
        TeamRole::ALL.into_iter().find(|r| r.name() == name)
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
    /// A merchant user's role in the merchant's team ([`TeamRole::Owner`] for support, where
    /// it means nothing).
    pub team_role: TeamRole,
    /// The merchant's projects a merchant user works on; `None`: every project, those created
    /// later too.
    pub projects: Option<Vec<ProjectId>>,
    /// The IANA time zone the user's pages show times and read dates in (`Europe/Moscow`);
    /// `None`: UTC, until the user (or the browser at sign-in) chooses one.
    pub time_zone: Option<String>,
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

/// Which users [`CabinetUsers::find_users`] looks up.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum UserKey<'a> {
    /// The user with this id.
    Id(UserId),
    /// The user with this e-mail (as stored: lower-case).
    Email(&'a str),
    /// Every user.
    All,
}

/// The cabinet's users and their recovery codes. Users are unique by e-mail.
#[async_trait]
pub trait CabinetUsers: Send + Sync {
    /// Stores a new user; [`StoreError::Duplicate`] if the e-mail (or id) is taken.
    async fn insert_user(&self, user: &UserRecord) -> Result<(), StoreError>;
    /// Replaces a user's fields (the last TOTP step is not one of them: only
    /// [`advance_session`](super::CabinetSessions::advance_session) moves it);
    /// [`StoreError::NotFound`] for an unknown user, [`StoreError::Duplicate`] if the new
    /// e-mail is another user's.
    async fn update_user(&self, user: &UserRecord) -> Result<(), StoreError>;
    /// The users `key` names: one by id or by e-mail (none or one), or every user in e-mail
    /// order.
    async fn find_users(&self, key: UserKey<'_>) -> Result<Vec<UserRecord>, StoreError>;
    /// Replaces the user's recovery codes (SHA-256 each) with `codes`.
    async fn update_recovery_codes(
        &self,
        user: UserId,
        codes: &[[u8; 32]],
    ) -> Result<(), StoreError>;
    /// How many unused recovery codes the user holds.
    async fn count_recovery_codes(&self, user: UserId) -> Result<u32, StoreError>;
}
