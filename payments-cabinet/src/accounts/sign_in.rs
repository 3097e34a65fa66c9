//! Sign-in: the password step, the code step (a TOTP code or a recovery code), sign-out, and
//! the password change.

use payments_core::ApiError;

use super::audit::{RecordExt, THROTTLED};
use super::cabinet::Cabinet;
use super::model::{ChangeError, Client, Current, NewSession, SignInError};
use super::throttle::account_key;
use crate::secrets;
use crate::store::{CabinetStoreExt, SessionProof, SessionStage, UserRecord};

/// Sign-in and sign-out ([`Cabinet::sign_in`](super::Cabinet::sign_in)).
#[derive(Debug, Clone, Copy)]
pub struct SignIn<'a>(&'a Cabinet);

impl Cabinet {
    /// Sign-in and sign-out.
    pub fn sign_in(&self) -> SignIn<'_> {
        SignIn(self)
    }
}

impl SignIn<'_> {
    /// The password step: a new half session (stage [`SessionStage::Password`]) whose next
    /// page is the code or, for a user without a confirmed key, enrolment. `old_cookie` (a
    /// session the browser still had) is ended.
    pub async fn password(
        &self,
        email: &str,
        password: &str,
        client: &Client,
        old_cookie: Option<&str>,
    ) -> Result<(NewSession, UserRecord), SignInError> {
        let email = email.trim().to_lowercase();
        let mut keys = vec![(account_key(&email), self.0.config.account_limit)];
        keys.extend(self.0.address_key(client));
        let user = self.0.store.user_by_email(&email).await?;
        let at = match self.0.begin_attempt(&keys).await {
            Ok(at) => at,
            Err(e) => {
                let merchant = user.as_ref().and_then(|u| u.role.merchant());
                let user_id = user.as_ref().map(|u| u.id);
                self.0
                    .audit_attempt(
                        &email,
                        user_id,
                        merchant,
                        client,
                        "sign_in.password",
                        THROTTLED,
                    )
                    .await?;
                return Err(e);
            }
        };
        let stored = user.as_ref().and_then(|u| u.password_hash.as_deref());
        let ok = match self.0.verify(password, stored).await {
            Ok(ok) => ok,
            Err(busy) => {
                self.0.forget_attempt(&keys, at).await?;
                return Err(busy);
            }
        };
        let user = match user {
            Some(u) if ok && !u.disabled => u,
            other => {
                let merchant = other.as_ref().and_then(|u| u.role.merchant());
                let user_id = other.as_ref().map(|u| u.id);
                // The result column says "refused"; the detail says why, as a reason.
                let why = match &other {
                    None => "no account with this e-mail",
                    Some(u) if u.disabled => "the account is disabled",
                    Some(_) => "wrong password",
                };
                self.0
                    .audit_attempt(&email, user_id, merchant, client, "sign_in.password", why)
                    .await?;
                return Err(SignInError::BadPassword);
            }
        };
        self.0.attempt_succeeded(&keys, at).await?;
        if let Some(old) = old_cookie {
            if let Some(s) = self
                .0
                .store
                .session_by_token(&secrets::token_hash(old))
                .await?
            {
                self.0.store.delete_session(s.id).await?;
            }
        }
        let session = self
            .0
            .session_record(user.id, SessionStage::Password, self.0.now(), client);
        self.0.store.insert_session(&session.record).await?;
        self.0
            .audit(self.0.record(&user, client, "sign_in.password", true))
            .await?;
        Ok((session, user))
    }

    /// The TOTP step of sign-in: the code's time step must be later than the last one used.
    pub async fn code(
        &self,
        current: &Current,
        cookie: &str,
        code: &str,
        client: &Client,
    ) -> Result<NewSession, SignInError> {
        let key = self.0.totp_key(&current.user)?;
        let proof = match (&key, current.user.totp_confirmed_at) {
            (Some(key), Some(_)) => secrets::matching_step(key, code, self.0.now().unix_secs())
                .map(SessionProof::TotpStep)
                .ok_or(SignInError::BadCode),
            _ => Err(SignInError::BadCode),
        };
        self.0
            .second_step(current, cookie, client, "sign_in.totp", proof)
            .await
    }

    /// Sign-in with a recovery code instead of a TOTP code; the code is consumed.
    pub async fn recovery_code(
        &self,
        current: &Current,
        cookie: &str,
        code: &str,
        client: &Client,
    ) -> Result<NewSession, SignInError> {
        let proof = if current.user.totp_confirmed_at.is_some() && !code.trim().is_empty() {
            Ok(SessionProof::RecoveryCode(secrets::recovery_code_hash(
                code,
            )))
        } else {
            Err(SignInError::BadRecoveryCode)
        };
        let new = self
            .0
            .second_step(current, cookie, client, "sign_in.recovery_code", proof)
            .await?;
        let left = self.0.store.count_recovery_codes(current.user.id).await?;
        tracing::info!(user = %current.user.id, left, "signed in with a recovery code");
        Ok(new)
    }

    /// Signs out: the session is deleted.
    pub async fn sign_out(&self, current: &Current, client: &Client) -> Result<(), ApiError> {
        self.0.store.delete_session(current.session.id).await?;
        self.0
            .audit(self.0.record(&current.user, client, "sign_out", true))
            .await
    }

    /// Changes the password: the current password and a fresh TOTP code. The user's other
    /// sessions end; this one gets a new id.
    pub async fn change_password(
        &self,
        current: &Current,
        cookie: &str,
        current_password: &str,
        code: &str,
        new_password: &str,
        client: &Client,
    ) -> Result<NewSession, ChangeError> {
        secrets::check_new_password(new_password, &current.user.email)
            .map_err(|e| ChangeError::Rule(e.to_string()))?;
        let mut keys = vec![(
            account_key(&current.user.email),
            self.0.config.account_limit,
        )];
        keys.extend(self.0.address_key(client));
        let at = self.0.begin_attempt(&keys).await?;
        let checked = self
            .0
            .verify(current_password, current.user.password_hash.as_deref())
            .await;
        if !matches!(checked, Ok(true)) {
            if let Err(busy) = checked {
                self.0
                    .forget_attempt(&keys, at)
                    .await
                    .map_err(SignInError::from)?;
                return Err(busy.into());
            }
            self.0
                .audit(
                    self.0
                        .record(&current.user, client, "password.change", false)
                        .detail("wrong current password"),
                )
                .await?;
            return Err(SignInError::BadPassword.into());
        }
        self.0
            .forget_attempt(&keys, at)
            .await
            .map_err(SignInError::from)?;
        // Hashed before the code renews the session: a busy pool then changes nothing.
        let hashed = self.0.hash(new_password).await?;
        let new = self
            .0
            .reauthenticate(current, cookie, code, client, "password.change")
            .await?;
        let mut user = self
            .0
            .store
            .user(current.user.id)
            .await
            .map_err(SignInError::from)?
            .ok_or(SignInError::SessionEnded)?;
        user.password_hash = Some(hashed);
        self.0
            .store
            .update_user(&user)
            .await
            .map_err(SignInError::from)?;
        self.0
            .store
            .delete_user_sessions(user.id, Some(new.record.id))
            .await
            .map_err(SignInError::from)?;
        self.0
            .audit(self.0.record(&user, client, "password.change", true))
            .await?;
        Ok(new)
    }
}
