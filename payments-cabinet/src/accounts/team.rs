//! A merchant's team: what each role may do ([`Permission`]), the projects each user works on,
//! and the changes an owner or admin makes to the team ([`Team`]): invitations, roles and
//! projects, removal and restoring. The last active owner cannot be removed or made anything
//! else, so a merchant never loses the cabinet.

use payments_core::ids::{ProjectId, UserId};
use payments_core::project::Project;
use payments_core::store::{MerchantStoreExt, StoreError};
use payments_core::ApiError;

use super::cabinet::Cabinet;
use super::model::{Change, Client, Current, Invite};
use crate::store::{CabinetStoreExt, Role, TeamRole, UserRecord};

/// What a page or form of the cabinet needs. A merchant user holds a permission through its
/// [`TeamRole`] ([`Permission::granted_to`]); support staff hold all but [`Permission::Team`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Permission {
    /// Home, the payments, their cards and search, callback deliveries (reading).
    Payments,
    /// The project's API access: tokens, keys, the allow-list, the callback URL and secret,
    /// the payer page, the Requests tab.
    Integration,
    /// Sending or resending callbacks, and recovering failed deliveries.
    Resend,
    /// A test payment's outcome (paid, canceled).
    TestOutcomes,
    /// Opening a payment appeal.
    Appeals,
    /// Balances, statements and exports.
    Money,
    /// The merchant's audit log.
    Audit,
    /// The team page: inviting, changing and removing users.
    Team,
}

impl Permission {
    /// Every permission.
    pub const ALL: [Permission; 8] = [
        Permission::Payments,
        Permission::Integration,
        Permission::Resend,
        Permission::TestOutcomes,
        Permission::Appeals,
        Permission::Money,
        Permission::Audit,
        Permission::Team,
    ];

    /// Whether a merchant user in `role` holds this permission.
    pub const fn granted_to(self, role: TeamRole) -> bool {
        use TeamRole::{Admin, Developer, Finance, Owner, SupportAgent};
        match self {
            Permission::Payments => true,
            Permission::Integration | Permission::TestOutcomes => {
                matches!(role, Owner | Admin | Developer)
            }
            Permission::Resend => matches!(role, Owner | Admin | Developer | SupportAgent),
            Permission::Appeals => matches!(role, Owner | Admin | SupportAgent),
            Permission::Money => matches!(role, Owner | Admin | Finance),
            Permission::Audit | Permission::Team => matches!(role, Owner | Admin),
        }
    }
}

impl Current {
    /// Whether the user holds `permission` (support: every one but the team's).
    pub fn may(&self, permission: Permission) -> bool {
        match self.user.role {
            Role::Support => permission != Permission::Team,
            Role::Merchant(_) => permission.granted_to(self.user.team_role),
        }
    }

    /// Whether the user works on `project`: support on every one, a merchant user on its
    /// merchant's projects that its team role names (all of them without a list).
    pub fn works_on(&self, project: &Project) -> bool {
        match self.user.role {
            Role::Support => true,
            Role::Merchant(m) => {
                m == project.merchant_id
                    && self
                        .user
                        .projects
                        .as_ref()
                        .is_none_or(|list| list.contains(&project.id))
            }
        }
    }
}

/// Why a change to the team was refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum TeamError {
    /// The user's role does not manage the team.
    #[error("Only the team's owners and admins change the team.")]
    NotAllowed,
    /// An admin tried to add, change or remove an owner.
    #[error("Only an owner adds, changes or removes an owner.")]
    OwnersOnly,
    /// The change would leave the merchant without an active owner.
    #[error("The team keeps at least one owner: make someone else an owner first.")]
    LastOwner,
    /// A user removing themselves.
    #[error("You cannot remove yourself; another owner or admin can.")]
    Yourself,
    /// A project that is not the merchant's.
    #[error("A chosen project is not one of the merchant's.")]
    ForeignProject,
    /// No such user in the team.
    #[error("No such member of the team.")]
    NotFound,
    /// The e-mail, the store or the invitation refused.
    #[error(transparent)]
    Api(#[from] ApiError),
}

impl From<StoreError> for TeamError {
    fn from(e: StoreError) -> Self {
        TeamError::Api(e.into())
    }
}

/// What a user does in the team: a role and the projects it works on (`None`: every one).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Membership {
    /// The role.
    pub role: TeamRole,
    /// The projects; `None` for every project of the merchant, those created later too.
    pub projects: Option<Vec<ProjectId>>,
}

/// A merchant's team, changed by its owners and admins ([`Cabinet::team`]).
#[derive(Debug, Clone, Copy)]
pub struct Team<'a>(&'a Cabinet);

impl Cabinet {
    /// The merchant teams.
    pub fn team(&self) -> Team<'_> {
        Team(self)
    }
}

impl Team<'_> {
    /// The team of the user's merchant, in e-mail order (removed users too).
    pub async fn members(&self, current: &Current) -> Result<Vec<UserRecord>, TeamError> {
        let merchant = current.user.role.merchant().ok_or(TeamError::NotAllowed)?;
        let users = self.0.store.users().await?;
        Ok(users
            .into_iter()
            .filter(|u| u.role == Role::Merchant(merchant))
            .collect())
    }

    /// The merchant's projects the team's forms offer.
    pub async fn projects(&self, current: &Current) -> Result<Vec<Project>, TeamError> {
        let merchant = current.user.role.merchant().ok_or(TeamError::NotAllowed)?;
        let projects = self.0.service.store().projects().await?;
        Ok(projects
            .into_iter()
            .filter(|p| p.merchant_id == merchant)
            .collect())
    }

    /// Adds a user to the team and issues its invitation link (shown once, valid as the
    /// operator's invitations are).
    pub async fn invite(
        &self,
        current: &Current,
        client: &Client,
        email: &str,
        membership: Membership,
    ) -> Result<Invite, TeamError> {
        let merchant = self.check(current, None, membership.role).await?;
        self.check_projects(current, &membership).await?;
        let user = self
            .0
            .users()
            .insert(
                email,
                Role::Merchant(merchant),
                membership.role,
                membership.projects,
                &current.actor(),
            )
            .await?;
        let detail = membership_text(&user);
        self.audit(current, client, "member.invite", &user, detail)
            .await?;
        Ok(self.0.issue_invite(user, &current.actor()).await?)
    }

    /// A new invitation link for a member (who lost the first, or forgot the password).
    pub async fn reinvite(
        &self,
        current: &Current,
        client: &Client,
        member: UserId,
    ) -> Result<Invite, TeamError> {
        let user = self.member(current, member).await?;
        self.check(current, Some(&user), user.team_role).await?;
        self.audit(current, client, "member.reinvite", &user, String::new())
            .await?;
        Ok(self.0.issue_invite(user, &current.actor()).await?)
    }

    /// Gives a member another role or other projects. The member's next request has them.
    pub async fn change(
        &self,
        current: &Current,
        client: &Client,
        member: UserId,
        membership: Membership,
    ) -> Result<UserRecord, TeamError> {
        let mut user = self.member(current, member).await?;
        self.check(current, Some(&user), membership.role).await?;
        self.check_projects(current, &membership).await?;
        if membership.role != TeamRole::Owner {
            self.keep_an_owner(&user).await?;
        }
        user.team_role = membership.role;
        user.projects = membership.projects;
        self.0.store.update_user(&user).await?;
        self.audit(
            current,
            client,
            "member.change",
            &user,
            membership_text(&user),
        )
        .await?;
        Ok(user)
    }

    /// Removes a member: it can no longer sign in, and its sessions end. Restoring undoes it.
    pub async fn remove(
        &self,
        current: &Current,
        client: &Client,
        member: UserId,
    ) -> Result<UserRecord, TeamError> {
        self.set_removed(current, client, member, true).await
    }

    /// Restores a removed member with its role and projects.
    pub async fn restore(
        &self,
        current: &Current,
        client: &Client,
        member: UserId,
    ) -> Result<UserRecord, TeamError> {
        self.set_removed(current, client, member, false).await
    }

    async fn set_removed(
        &self,
        current: &Current,
        client: &Client,
        member: UserId,
        removed: bool,
    ) -> Result<UserRecord, TeamError> {
        let mut user = self.member(current, member).await?;
        self.check(current, Some(&user), user.team_role).await?;
        if removed {
            if user.id == current.user.id {
                return Err(TeamError::Yourself);
            }
            self.keep_an_owner(&user).await?;
        }
        user.disabled = removed;
        self.0.store.update_user(&user).await?;
        if removed {
            self.0.store.delete_user_sessions(user.id, None).await?;
        }
        let action = if removed {
            "member.remove"
        } else {
            "member.restore"
        };
        self.audit(current, client, action, &user, membership_text(&user))
            .await?;
        Ok(user)
    }

    /// The team's rules for `current` acting on `member` (none: a new one) to give `role`:
    /// owners and admins only, owners only where an owner is involved. The merchant.
    async fn check(
        &self,
        current: &Current,
        member: Option<&UserRecord>,
        role: TeamRole,
    ) -> Result<payments_core::ids::MerchantId, TeamError> {
        let merchant = current.user.role.merchant().ok_or(TeamError::NotAllowed)?;
        if !current.may(Permission::Team) {
            return Err(TeamError::NotAllowed);
        }
        let owner_involved =
            role == TeamRole::Owner || member.is_some_and(|m| m.team_role == TeamRole::Owner);
        if owner_involved && current.user.team_role != TeamRole::Owner {
            return Err(TeamError::OwnersOnly);
        }
        Ok(merchant)
    }

    /// Refuses a change that leaves `member`'s merchant without an active owner.
    async fn keep_an_owner(&self, member: &UserRecord) -> Result<(), TeamError> {
        if member.team_role != TeamRole::Owner || member.disabled {
            return Ok(());
        }
        let users = self.0.store.users().await?;
        let others = users.iter().any(|u| {
            u.id != member.id
                && u.role == member.role
                && u.team_role == TeamRole::Owner
                && !u.disabled
        });
        if others {
            Ok(())
        } else {
            Err(TeamError::LastOwner)
        }
    }

    async fn check_projects(
        &self,
        current: &Current,
        membership: &Membership,
    ) -> Result<(), TeamError> {
        let Some(chosen) = &membership.projects else {
            return Ok(());
        };
        let own = self.projects(current).await?;
        if chosen.iter().all(|id| own.iter().any(|p| p.id == *id)) {
            Ok(())
        } else {
            Err(TeamError::ForeignProject)
        }
    }

    async fn member(&self, current: &Current, id: UserId) -> Result<UserRecord, TeamError> {
        let user = self.0.store.user(id).await?;
        match (user, current.user.role.merchant()) {
            (Some(u), Some(m)) if u.role == Role::Merchant(m) => Ok(u),
            _ => Err(TeamError::NotFound),
        }
    }

    async fn audit(
        &self,
        current: &Current,
        client: &Client,
        action: &str,
        member: &UserRecord,
        detail: String,
    ) -> Result<(), TeamError> {
        let merchant = current.user.role.merchant().ok_or(TeamError::NotAllowed)?;
        let detail = match detail.as_str() {
            "" => member.email.clone(),
            _ => format!("{}: {detail}", member.email),
        };
        let change = Change {
            merchant,
            project: None,
            action,
            target: &member.id.to_string(),
            detail: Some(detail),
        };
        Ok(self.0.audit_log().change(current, client, change).await?)
    }
}

/// A member's role and projects as the audit log's detail: `role developer, every project`.
fn membership_text(user: &UserRecord) -> String {
    let projects = match &user.projects {
        None => "every project".to_string(),
        Some(list) => {
            let ids: Vec<String> = list.iter().map(ToString::to_string).collect();
            format!("projects {}", ids.join(" "))
        }
    };
    format!("role {}, {projects}", user.team_role.name())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_role_holds_what_its_job_needs() {
        use Permission::*;
        use TeamRole::*;
        // The table the cabinet guide shows: a role's row, the permissions in ALL's order.
        let table = [
            (Owner, [true, true, true, true, true, true, true, true]),
            (Admin, [true, true, true, true, true, true, true, true]),
            (
                Developer,
                [true, true, true, true, false, false, false, false],
            ),
            (
                Finance,
                [true, false, false, false, false, true, false, false],
            ),
            (
                SupportAgent,
                [true, false, true, false, true, false, false, false],
            ),
            (
                Viewer,
                [true, false, false, false, false, false, false, false],
            ),
        ];
        for (role, row) in table {
            for (p, want) in Permission::ALL.into_iter().zip(row) {
                assert_eq!(p.granted_to(role), want, "{role:?} {p:?}");
            }
        }
        assert!(Payments.granted_to(Viewer) && !Team.granted_to(Developer));
    }
}
