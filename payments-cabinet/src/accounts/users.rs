//! Cabinet users: creation with a first invitation, invitations (also a password reset), the
//! password set through one, disabling, the list.

use payments_core::ids::{MerchantId, ProjectId, UserId};
use payments_core::service::Actor;
use payments_core::store::{MerchantStoreExt, StoreError};
use payments_core::{ApiError, ErrorCode};

use super::cabinet::Cabinet;
use super::model::{bad_request, invite_gone, normalise_email, user_json, Client, Current, Invite};
use crate::secrets;
use crate::store::{CabinetAuditRecord, CabinetStoreExt, InviteRecord, Role, TeamRole, UserRecord};

/// The cabinet's users ([`Cabinet::users`](super::Cabinet::users)).
#[derive(Debug, Clone, Copy)]
pub struct Users<'a>(&'a Cabinet);

impl Cabinet {
    /// The cabinet's users.
    pub fn users(&self) -> Users<'_> {
        Users(self)
    }
}

impl Users<'_> {
    /// Creates a user and its first invitation (the operator API and CLI): a merchant user of
    /// an existing merchant (an owner of its team, on every project), or support staff. The
    /// team's owners add the rest of the team ([`Team::invite`](super::Team::invite)).
    pub async fn create(&self, email: &str, role: Role, actor: &Actor) -> Result<Invite, ApiError> {
        let user = self
            .insert(email, role, TeamRole::Owner, None, actor)
            .await?;
        self.0
            .audit(CabinetAuditRecord {
                at: user.created_at,
                user_id: Some(user.id),
                email: user.email.clone(),
                address: None,
                merchant_id: role.merchant(),
                project_id: None,
                action: "user.create".into(),
                target: user.id.to_string(),
                success: true,
                detail: Some(format!("by {}", actor.0)),
            })
            .await?;
        self.0.issue_invite(user, actor).await
    }

    /// Stores a new user without a password (an invitation sets it), in the operator's audit
    /// trail as created by `actor`: a merchant user of an existing merchant in `team_role` on
    /// `projects`, or support staff. The caller writes the cabinet's audit record.
    pub(super) async fn insert(
        &self,
        email: &str,
        role: Role,
        team_role: TeamRole,
        projects: Option<Vec<ProjectId>>,
        actor: &Actor,
    ) -> Result<UserRecord, ApiError> {
        let email = normalise_email(email)?;
        if let Role::Merchant(m) = role {
            self.0
                .service
                .store()
                .merchant(m)
                .await?
                .ok_or_else(|| ApiError::new(ErrorCode::NotFound, "merchant not found"))?;
        }
        let user = UserRecord {
            id: UserId::generate(self.0.rng()),
            email: email.clone(),
            role,
            password_hash: None,
            totp_secret: None,
            totp_confirmed_at: None,
            disabled: false,
            created_at: self.0.now(),
            team_role,
            projects,
            time_zone: None,
        };
        self.0.store.insert_user(&user).await.map_err(|e| match e {
            StoreError::Duplicate(_) => bad_request(format!("email: {email} already has a user")),
            other => other.into(),
        })?;
        self.0
            .core_audit(actor, "user.create", &user, Some(user_json(&user)))
            .await?;
        Ok(user)
    }

    /// Creates a merchant user with a password already set (the sandbox bootstrap's demo
    /// user); it enrols its TOTP key at first sign-in like any other.
    pub async fn create_with_password(
        &self,
        email: &str,
        merchant: MerchantId,
        password: &str,
        actor: &Actor,
    ) -> Result<UserRecord, ApiError> {
        let invite = self.create(email, Role::Merchant(merchant), actor).await?;
        self.set_password(invite.token.expose(), password, &Client::default())
            .await
    }

    /// A new invitation link for a user (also a password reset: the current password keeps
    /// working until the link is used). Earlier links stop working.
    pub async fn invite(&self, user: UserId, actor: &Actor) -> Result<Invite, ApiError> {
        let user = self
            .0
            .store
            .user(user)
            .await?
            .ok_or_else(|| ApiError::new(ErrorCode::NotFound, "user not found"))?;
        self.0.issue_invite(user, actor).await
    }

    /// Sets a user's password through an invitation token (taken once). The user's sessions
    /// end. The TOTP key is kept: a user who has one signs in with it.
    pub async fn set_password(
        &self,
        invite_token: &str,
        password: &str,
        client: &Client,
    ) -> Result<UserRecord, ApiError> {
        let now = self.0.now();
        let hash = secrets::token_hash(invite_token);
        // Checked before taking the invitation, so that a bad password does not use it up.
        let invite_user = self.invited(invite_token).await?;
        secrets::check_new_password(password, &invite_user.email)
            .map_err(|e| bad_request(format!("password: {e}")))?;
        // Hashed before the invitation is taken, so that a busy service does not use it up.
        let hashed = self.0.hash(password).await.map_err(|e| {
            ApiError::new(ErrorCode::ServiceUnavailable, e.to_string())
                .with_retry_after(self.0.config.password_wait.as_secs().max(1))
        })?;
        let invite = self
            .0
            .store
            .take_invite(&hash, now)
            .await?
            .ok_or_else(invite_gone)?;
        let mut user = self
            .0
            .store
            .user(invite.user_id)
            .await?
            .ok_or_else(invite_gone)?;
        user.password_hash = Some(hashed);
        self.0.store.update_user(&user).await?;
        self.0.store.delete_user_sessions(user.id, None).await?;
        self.0
            .audit(self.0.record(&user, client, "user.set_password", true))
            .await?;
        Ok(user)
    }

    /// The user an invitation token is for, if it is live (the set-password page).
    pub async fn invited(&self, invite_token: &str) -> Result<UserRecord, ApiError> {
        let invite = self
            .0
            .store
            .find_invite(&secrets::token_hash(invite_token), self.0.now())
            .await?
            .ok_or_else(invite_gone)?;
        self.0
            .store
            .user(invite.user_id)
            .await?
            .ok_or_else(invite_gone)
    }

    /// Sets the time zone the user's pages show times and read dates in: an IANA name of the
    /// bundled time zone database (`Europe/Moscow`, `UTC`). Audited as `user.time_zone`.
    pub async fn set_time_zone(
        &self,
        current: &Current,
        client: &Client,
        name: &str,
    ) -> Result<UserRecord, ApiError> {
        self.store_time_zone(current, client, name, "chosen").await
    }

    async fn store_time_zone(
        &self,
        current: &Current,
        client: &Client,
        name: &str,
        how: &str,
    ) -> Result<UserRecord, ApiError> {
        if jiff::tz::db().get(name).is_err() {
            return Err(bad_request(format!("time_zone: {name:?} is no time zone")));
        }
        // Read again, not the request's copy: a sign-in step may have changed the user since
        // (an enrolment confirmed), and an update writes every field.
        let mut user = self
            .0
            .store
            .user(current.user.id)
            .await?
            .ok_or_else(|| ApiError::new(ErrorCode::NotFound, "user not found"))?;
        user.time_zone = Some(name.to_string());
        self.0.store.update_user(&user).await?;
        let mut record = self.0.record(&user, client, "user.time_zone", true);
        record.detail = Some(format!("{name}, {how}"));
        self.0.audit(record).await?;
        Ok(user)
    }

    /// The browser's time zone for a user who has none, at sign-in: as
    /// [`set_time_zone`](Users::set_time_zone), with the audit record's detail saying where
    /// it came from; a user who has a zone keeps it, and a name the database does not hold
    /// changes nothing (`400`).
    pub async fn adopt_time_zone(
        &self,
        current: &Current,
        client: &Client,
        name: &str,
    ) -> Result<UserRecord, ApiError> {
        if current.user.time_zone.is_some() {
            return Ok(current.user.clone());
        }
        self.store_time_zone(current, client, name, "from the browser")
            .await
    }

    /// Every user.
    pub async fn list(&self) -> Result<Vec<UserRecord>, ApiError> {
        Ok(self.0.store.users().await?)
    }

    /// Disables or enables a user; disabling ends its sessions.
    pub async fn set_disabled(
        &self,
        id: UserId,
        disabled: bool,
        actor: &Actor,
    ) -> Result<UserRecord, ApiError> {
        let mut user = self
            .0
            .store
            .user(id)
            .await?
            .ok_or_else(|| ApiError::new(ErrorCode::NotFound, "user not found"))?;
        user.disabled = disabled;
        self.0.store.update_user(&user).await?;
        if disabled {
            self.0.store.delete_user_sessions(id, None).await?;
        }
        let action = if disabled {
            "user.disable"
        } else {
            "user.enable"
        };
        self.0
            .core_audit(actor, action, &user, Some(user_json(&user)))
            .await?;
        Ok(user)
    }
}

impl Cabinet {
    pub(super) async fn issue_invite(
        &self,
        user: UserRecord,
        actor: &Actor,
    ) -> Result<Invite, ApiError> {
        let token = secrets::random_token(self.rng());
        let now = self.now();
        let record = InviteRecord {
            token_hash: secrets::token_hash(&token),
            user_id: user.id,
            created_at: now,
            expires_at: now + self.config.invite_ttl,
        };
        self.store.insert_invite(&record).await?;
        self.core_audit(actor, "user.invite", &user, None).await?;
        Ok(Invite {
            user,
            token: token.into(),
            expires_at: record.expires_at,
        })
    }
}
