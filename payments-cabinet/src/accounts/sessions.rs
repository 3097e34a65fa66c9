//! Sessions: the live session of a cookie (idle, absolute and second-factor timeouts), the
//! user's sessions and their revocation.

use payments_core::ids::SessionId;
use payments_core::ApiError;

use super::audit::RecordExt;
use super::cabinet::Cabinet;
use super::model::{Client, Current};
use crate::secrets;
use crate::store::{CabinetStoreExt, SessionRecord, SessionStage};

/// The users' sessions ([`Cabinet::sessions`](super::Cabinet::sessions)).
#[derive(Debug, Clone, Copy)]
pub struct Sessions<'a>(&'a Cabinet);

impl Cabinet {
    /// The users' sessions.
    pub fn sessions(&self) -> Sessions<'_> {
        Sessions(self)
    }
}

impl Sessions<'_> {
    /// The session of a cookie, if it is live: a signed-in one idle for less than the idle
    /// timeout and younger than the absolute one, a half one younger than the second-factor
    /// timeout, of an enabled user. A session past a limit is deleted. Touches
    /// `last_seen_at` at most once per [`CabinetConfig::touch_interval`](super::CabinetConfig::touch_interval).
    pub async fn current(&self, cookie: &str) -> Result<Option<Current>, ApiError> {
        let Some(session) = self
            .0
            .store
            .session_by_token(&secrets::token_hash(cookie))
            .await?
        else {
            return Ok(None);
        };
        let now = self.0.now();
        let expired = match session.stage {
            SessionStage::Full => {
                now >= session.last_seen_at + self.0.config.idle_timeout
                    || now >= session.signed_in_at + self.0.config.absolute_timeout
            }
            SessionStage::Password => {
                now >= session.created_at + self.0.config.second_factor_timeout
            }
        };
        let user = self.0.store.user(session.user_id).await?;
        let user = match user {
            Some(u) if !expired && !u.disabled => u,
            _ => {
                self.0.store.delete_session(session.id).await?;
                return Ok(None);
            }
        };
        let mut session = session;
        if now >= session.last_seen_at + self.0.config.touch_interval {
            self.0.store.update_session_seen(session.id, now).await?;
            session.last_seen_at = now;
        }
        Ok(Some(Current { session, user }))
    }

    /// The user's sessions, oldest first.
    pub async fn list(&self, current: &Current) -> Result<Vec<SessionRecord>, ApiError> {
        Ok(self.0.store.user_sessions(current.user.id).await?)
    }

    /// Ends one of the user's own sessions; `false` if it is not one of theirs.
    pub async fn revoke(
        &self,
        current: &Current,
        id: SessionId,
        client: &Client,
    ) -> Result<bool, ApiError> {
        let own = self
            .0
            .store
            .user_sessions(current.user.id)
            .await?
            .iter()
            .any(|s| s.id == id);
        if !own {
            return Ok(false);
        }
        self.0.store.delete_session(id).await?;
        self.0
            .audit(
                self.0
                    .record(&current.user, client, "session.revoke", true)
                    .target(id.to_string()),
            )
            .await?;
        Ok(true)
    }
}
