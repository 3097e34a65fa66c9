//! The users' TOTP keys at rest: sealed under the service's sealing key when one is configured,
//! bound to their user.

use payments_core::ids::UserId;
use payments_core::ApiError;

use super::cabinet::Cabinet;
use crate::secrets;
use crate::store::UserRecord;

impl Cabinet {
    pub(super) fn key_context(user: UserId) -> String {
        format!("totp:{user}")
    }

    pub(super) fn totp_key(&self, user: &UserRecord) -> Result<Option<Vec<u8>>, ApiError> {
        let Some(stored) = &user.totp_secret else {
            return Ok(None);
        };
        let keys = &self.service.config().sealing;
        let text = if payments_core::sealing::SealingKeys::is_sealed(stored.expose()) {
            keys.open(stored.expose(), &Self::key_context(user.id))
                .map_err(|e| ApiError::internal(format!("TOTP key of {}: {e}", user.id)))?
        } else {
            stored.expose().to_string()
        };
        secrets::totp_key_from_base32(&text)
            .map(Some)
            .ok_or_else(|| ApiError::internal(format!("TOTP key of {} is not base32", user.id)))
    }

    /// A TOTP key as stored: sealed for `user` when a sealing key is configured, else as
    /// base32 text.
    pub(super) fn seal_totp_key(&self, user: UserId, key: &[u8]) -> Result<String, ApiError> {
        let text = secrets::totp_key_base32(key);
        let keys = &self.service.config().sealing;
        if !keys.is_configured() {
            return Ok(text);
        }
        keys.seal(&text, &Self::key_context(user), self.rng())
            .map_err(|e| ApiError::internal(format!("sealing a TOTP key: {e}")))
    }
}
