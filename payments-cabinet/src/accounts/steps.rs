//! The steps sign-in and the security changes share: a new session record, the code step of a
//! half session, and a fresh code before a sensitive change. Each uses its proof in the same
//! store write as the session it makes ([`advance_session`](crate::store::CabinetSessions::advance_session)).

use payments_core::ids::{SessionId, UserId};
use payments_core::Timestamp;

use super::audit::{RecordExt, THROTTLED};
use super::cabinet::Cabinet;
use super::model::{Client, Current, NewSession, SignInError};
use crate::secrets;
use crate::store::{SessionProof, SessionRecord, SessionStage};

impl Cabinet {
    pub(super) fn session_record(
        &self,
        user: UserId,
        stage: SessionStage,
        signed_in_at: Timestamp,
        client: &Client,
    ) -> NewSession {
        let cookie = secrets::random_token(self.rng());
        let now = self.now();
        NewSession {
            record: SessionRecord {
                id: SessionId::generate(self.rng()),
                token_hash: secrets::token_hash(&cookie),
                user_id: user,
                stage,
                created_at: now,
                signed_in_at,
                last_seen_at: now,
                address: client.address_text(),
                user_agent: client.user_agent.clone(),
            },
            cookie: cookie.into(),
        }
    }

    /// A half session's code step: a TOTP code (`Some(step)`) or a recovery code, checked
    /// and used by the store together with the new session.
    pub(super) async fn second_step(
        &self,
        current: &Current,
        cookie: &str,
        client: &Client,
        action: &str,
        proof: Result<SessionProof, SignInError>,
    ) -> Result<NewSession, SignInError> {
        if current.session.stage != SessionStage::Password {
            return Err(SignInError::SessionEnded);
        }
        let keys = self.code_keys(current.user.id, client);
        let at = match self.begin_attempt(&keys).await {
            Ok(at) => at,
            Err(e) => {
                self.audit(
                    self.record(&current.user, client, action, false)
                        .detail(THROTTLED),
                )
                .await?;
                return Err(e);
            }
        };
        let refused = match &proof {
            Err(e) => Some(e.clone()),
            Ok(_) => None,
        };
        let new = self.session_record(current.user.id, SessionStage::Full, self.now(), client);
        let accepted = match proof {
            Ok(p) => {
                self.store
                    .advance_session(&secrets::token_hash(cookie), &new.record, &p)
                    .await?
            }
            Err(_) => false,
        };
        if !accepted {
            self.audit(self.record(&current.user, client, action, false))
                .await?;
            return Err(refused.unwrap_or(match action {
                "sign_in.recovery_code" => SignInError::BadRecoveryCode,
                _ => SignInError::BadCode,
            }));
        }
        self.attempt_succeeded(&keys, at).await?;
        self.audit(self.record(&current.user, client, action, true))
            .await?;
        Ok(new)
    }

    /// A fresh TOTP code for a sensitive change by a signed-in user, used like a sign-in code
    /// (never twice); the session gets a new id. Throttled like sign-in codes.
    pub(super) async fn reauthenticate(
        &self,
        current: &Current,
        cookie: &str,
        code: &str,
        client: &Client,
        action: &str,
    ) -> Result<NewSession, SignInError> {
        self.reauthenticate_with(current, cookie, code, client, action, false)
            .await
    }

    /// [`reauthenticate`](Self::reauthenticate), also with one of the user's recovery codes
    /// (consumed) when `recovery` allows it: a code with a letter in it is taken for one.
    pub(super) async fn reauthenticate_with(
        &self,
        current: &Current,
        cookie: &str,
        code: &str,
        client: &Client,
        action: &str,
        recovery: bool,
    ) -> Result<NewSession, SignInError> {
        let keys = self.code_keys(current.user.id, client);
        let at = self.begin_attempt(&keys).await?;
        let key = self.totp_key(&current.user)?;
        let proof = if recovery && code.chars().any(|c| c.is_ascii_alphabetic()) {
            Some(SessionProof::RecoveryCode(secrets::recovery_code_hash(
                code,
            )))
        } else {
            key.as_deref()
                .and_then(|k| secrets::matching_step(k, code, self.now().unix_secs()))
                .map(SessionProof::TotpStep)
        };
        let new = self.session_record(
            current.user.id,
            SessionStage::Full,
            current.session.signed_in_at,
            client,
        );
        let accepted = match proof {
            Some(proof) => {
                self.store
                    .advance_session(&secrets::token_hash(cookie), &new.record, &proof)
                    .await?
            }
            None => false,
        };
        if !accepted {
            self.audit(
                self.record(&current.user, client, action, false)
                    .detail("wrong code"),
            )
            .await?;
            return Err(SignInError::BadCode);
        }
        self.attempt_succeeded(&keys, at).await?;
        Ok(new)
    }
}
