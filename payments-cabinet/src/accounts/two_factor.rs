//! Two-factor authentication: enrolment of a TOTP key and its confirmation, recovery codes,
//! moving the authenticator to a new device (re-enrolment), re-sealing the stored keys.

use payments_core::{ApiError, ErrorCode};

use super::audit::RecordExt;
use super::cabinet::Cabinet;
use super::model::{bad_request, Client, Current, Enrolment, NewSession, SignInError};
use super::throttle::account_key;
use crate::secrets;
use crate::store::{CabinetStoreExt, SessionProof, SessionStage};

/// Two-factor enrolment and recovery codes ([`Cabinet::two_factor`](super::Cabinet::two_factor)).
#[derive(Debug, Clone, Copy)]
pub struct TwoFactor<'a>(&'a Cabinet);

impl Cabinet {
    /// Two-factor enrolment and recovery codes.
    pub fn two_factor(&self) -> TwoFactor<'_> {
        TwoFactor(self)
    }
}

impl TwoFactor<'_> {
    /// Enrolment of a half-signed-in user without a confirmed key: the key (made and stored,
    /// sealed, at the first call; the same key until it is confirmed).
    pub async fn enrolment(&self, current: &Current) -> Result<Enrolment, ApiError> {
        if current.user.totp_confirmed_at.is_some() {
            return Err(bad_request("the two-factor key is already set up"));
        }
        let key = match self.0.totp_key(&current.user)? {
            Some(k) => k,
            None => {
                let key = secrets::new_totp_key(self.0.rng());
                let stored = self.0.seal_totp_key(current.user.id, &key)?;
                // Re-read so that a concurrent enrolment page keeps the first key.
                let mut user = self
                    .0
                    .store
                    .user(current.user.id)
                    .await?
                    .ok_or_else(|| ApiError::new(ErrorCode::NotFound, "user not found"))?;
                if user.totp_secret.is_none() {
                    user.totp_secret = Some(stored.into());
                    self.0.store.update_user(&user).await?;
                }
                self.0
                    .totp_key(&user)?
                    .ok_or_else(|| ApiError::internal("the TOTP key was not stored"))?
            }
        };
        Ok(Enrolment {
            key_base32: secrets::totp_key_base32(&key),
            uri: secrets::otpauth_uri(&key, &self.0.config.issuer, &current.user.email),
        })
    }

    /// Confirms enrolment with the first code: the key counts from now, and 10 recovery codes
    /// are issued (returned once, stored hashed).
    pub async fn confirm_enrolment(
        &self,
        current: &Current,
        cookie: &str,
        code: &str,
        client: &Client,
    ) -> Result<(NewSession, Vec<String>), SignInError> {
        // The key as stored now: the enrolment page made it after `current` was read.
        let user = self
            .0
            .store
            .user(current.user.id)
            .await?
            .ok_or(SignInError::SessionEnded)?;
        let key = self.0.totp_key(&user)?;
        let codes = secrets::new_recovery_codes(self.0.rng());
        let proof = match (&key, user.totp_confirmed_at) {
            (Some(key), None) => secrets::matching_step(key, code, self.0.now().unix_secs())
                .map(|step| SessionProof::Enrolment {
                    step,
                    recovery_codes: codes
                        .iter()
                        .map(|c| secrets::recovery_code_hash(c))
                        .collect(),
                    at: self.0.now(),
                })
                .ok_or(SignInError::BadCode),
            _ => Err(SignInError::BadCode),
        };
        let new = self
            .0
            .second_step(current, cookie, client, "two_factor.enrol", proof)
            .await?;
        Ok((new, codes))
    }

    /// New recovery codes (the old ones stop working), after a fresh TOTP code.
    pub async fn regenerate_recovery_codes(
        &self,
        current: &Current,
        cookie: &str,
        code: &str,
        client: &Client,
    ) -> Result<(NewSession, Vec<String>), SignInError> {
        let new = self
            .0
            .reauthenticate(current, cookie, code, client, "recovery_codes.regenerate")
            .await?;
        let codes = secrets::new_recovery_codes(self.0.rng());
        let hashes: Vec<[u8; 32]> = codes
            .iter()
            .map(|c| secrets::recovery_code_hash(c))
            .collect();
        self.0
            .store
            .update_recovery_codes(current.user.id, &hashes)
            .await?;
        self.0
            .audit(
                self.0
                    .record(&current.user, client, "recovery_codes.regenerate", true),
            )
            .await?;
        Ok((new, codes))
    }

    /// Starts moving the authenticator to a new device: the current password and a current
    /// code (from the app in use, or one of the recovery codes, which is consumed) make a new
    /// key, answered once to be shown and kept (sealed, in a one-time slot of the session) by
    /// the caller until [`confirm_reenrolment`](Self::confirm_reenrolment). Nothing changes
    /// yet: the old key keeps working until a code of the new one confirms it. The session
    /// gets a new id, as after every code.
    pub async fn begin_reenrolment(
        &self,
        current: &Current,
        cookie: &str,
        current_password: &str,
        code: &str,
        client: &Client,
    ) -> Result<(NewSession, Enrolment), SignInError> {
        const ACTION: &str = "two_factor.reenrol";
        if current.user.totp_confirmed_at.is_none() {
            return Err(SignInError::SessionEnded);
        }
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
                // A busy pool checked nothing: not counted.
                self.0.forget_attempt(&keys, at).await?;
                return Err(busy);
            }
            // A wrong password counts towards the account's throttle, as at sign-in.
            self.0
                .audit(
                    self.0
                        .record(&current.user, client, ACTION, false)
                        .detail("wrong current password"),
                )
                .await?;
            return Err(SignInError::BadPassword);
        }
        self.0.forget_attempt(&keys, at).await?;
        let new = self
            .0
            .reauthenticate_with(current, cookie, code, client, ACTION, true)
            .await?;
        let key = secrets::new_totp_key(self.0.rng());
        Ok((
            new,
            Enrolment {
                key_base32: secrets::totp_key_base32(&key),
                uri: secrets::otpauth_uri(&key, &self.0.config.issuer, &current.user.email),
            },
        ))
    }

    /// Confirms the new key of [`begin_reenrolment`](Self::begin_reenrolment) with a code
    /// from the new device: only then does it replace the old key (which stops working at
    /// once), the code's time step counts as used, the user's other sessions end and the
    /// change is audited. A wrong code changes nothing (throttled like sign-in codes); a code
    /// of a time step already used asks for the app's next one. This session gets a new id.
    pub async fn confirm_reenrolment(
        &self,
        current: &Current,
        cookie: &str,
        key_base32: &str,
        code: &str,
        client: &Client,
    ) -> Result<NewSession, SignInError> {
        const ACTION: &str = "two_factor.reenrol";
        let key = secrets::totp_key_from_base32(key_base32)
            .ok_or_else(|| SignInError::from(ApiError::internal("a pending key is not base32")))?;
        let keys = self.0.code_keys(current.user.id, client);
        let at = self.0.begin_attempt(&keys).await?;
        let Some(step) = secrets::matching_step(&key, code, self.0.now().unix_secs()) else {
            self.0
                .audit(
                    self.0
                        .record(&current.user, client, ACTION, false)
                        .detail("wrong code from the new authenticator"),
                )
                .await?;
            return Err(SignInError::BadCode);
        };
        let new = self.0.session_record(
            current.user.id,
            SessionStage::Full,
            current.session.signed_in_at,
            client,
        );
        if !self
            .0
            .store
            .advance_session(
                &secrets::token_hash(cookie),
                &new.record,
                &SessionProof::TotpStep(step),
            )
            .await?
        {
            // The new key's code of a time step already used (the old key's code a moment
            // ago): the app's next code will do.
            return Err(SignInError::BadCode);
        }
        self.0.attempt_succeeded(&keys, at).await?;
        let stored = self.0.seal_totp_key(current.user.id, &key)?;
        let mut user = self
            .0
            .store
            .user(current.user.id)
            .await?
            .ok_or(SignInError::SessionEnded)?;
        user.totp_secret = Some(stored.into());
        user.totp_confirmed_at = Some(self.0.now());
        self.0.store.update_user(&user).await?;
        let ended = self
            .0
            .store
            .delete_user_sessions(user.id, Some(new.record.id))
            .await?;
        self.0
            .audit(self.0.record(&user, client, ACTION, true).detail(&format!(
                "the new authenticator replaces the old one; {ended} other session(s) ended"
            )))
            .await?;
        Ok(new)
    }

    /// Recovery codes the user has left.
    pub async fn recovery_codes_left(&self, current: &Current) -> Result<u32, ApiError> {
        Ok(self.0.store.count_recovery_codes(current.user.id).await?)
    }

    /// Re-seals every stored TOTP key that is not sealed under the current sealing key
    /// (plaintext, or a previous key) with the current key, like
    /// [`Directory::reseal_callback_secrets`](payments_directory::Directory::reseal_callback_secrets) for callback secrets; answers (re-sealed,
    /// already current). Refused without a configured key.
    pub async fn reseal_totp_keys(&self) -> Result<(u64, u64), ApiError> {
        let keys = &self.0.service.config().sealing;
        if !keys.is_configured() {
            return Err(bad_request("no sealing key is configured"));
        }
        let (mut resealed, mut current) = (0, 0);
        for mut user in self.0.store.users().await? {
            let Some(stored) = &user.totp_secret else {
                continue;
            };
            if !keys.needs_reseal(stored.expose()) {
                current += 1;
                continue;
            }
            let key = self
                .0
                .totp_key(&user)?
                .ok_or_else(|| ApiError::internal("a TOTP key vanished"))?;
            // A configured key (checked above) seals it.
            let sealed = self.0.seal_totp_key(user.id, &key)?;
            user.totp_secret = Some(sealed.into());
            self.0.store.update_user(&user).await?;
            resealed += 1;
        }
        Ok((resealed, current))
    }
}
