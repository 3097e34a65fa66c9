//! One-time slots: what a page shows once, sealed at rest, taken by the first read of their
//! owner.

use payments_core::ids::SessionId;
use payments_core::ApiError;

use super::cabinet::Cabinet;
use crate::secrets;
use crate::store::SlotRecord;

/// One-time slots ([`Cabinet::slots`](super::Cabinet::slots)).
#[derive(Debug, Clone, Copy)]
pub struct Slots<'a>(&'a Cabinet);

impl Cabinet {
    /// One-time slots.
    pub fn slots(&self) -> Slots<'_> {
        Slots(self)
    }
}

impl Slots<'_> {
    /// Keeps `payload` (what a page will show once) in a new one-time slot of `owner` for
    /// [`CabinetConfig::slot_ttl`](super::CabinetConfig::slot_ttl), sealed at rest like TOTP keys and callback secrets (when a
    /// sealing key is configured; bound to the slot and its owner), and answers the slot's id:
    /// 32 random bytes in base64url, which only the page's URL carries (the store keeps its
    /// SHA-256). `owner` is the session the page is for: a request without a session stores
    /// nothing here (the sign-in and invitation pages carry their refusals in a cookie), so
    /// what anyone can make the cabinet store is bounded by the sessions they hold, each at
    /// most [`CabinetConfig::slots_per_session`](super::CabinetConfig::slots_per_session) slots (the oldest are dropped).
    pub async fn insert(&self, owner: SessionId, payload: &str) -> Result<String, ApiError> {
        let id = secrets::random_token(self.0.rng());
        let id_hash = secrets::token_hash(&id);
        let keys = &self.0.service.config().sealing;
        let stored = if keys.is_configured() {
            keys.seal(payload, &slot_context(owner, &id_hash), self.0.rng())
                .map_err(|e| ApiError::internal(format!("sealing a one-time slot: {e}")))?
        } else {
            payload.to_string()
        };
        let now = self.0.now();
        self.0
            .store
            .insert_slot(
                &SlotRecord {
                    id_hash,
                    owner: Some(owner),
                    payload: stored.into(),
                    created_at: now,
                    expires_at: now + self.0.config.slot_ttl,
                },
                self.0.config.slots_per_session,
            )
            .await?;
        Ok(id)
    }

    /// Takes the one-time slot `id` for `owner`: its payload, once, before its expiry.
    /// `None` for a slot taken already, expired, another owner's, or an id that is none.
    pub async fn take(&self, owner: SessionId, id: &str) -> Result<Option<String>, ApiError> {
        // A slot id is 43 characters of base64url.
        if id.is_empty() || id.len() > 64 {
            return Ok(None);
        }
        let id_hash = secrets::token_hash(id);
        let Some(slot) = self
            .0
            .store
            .take_slot(&id_hash, Some(owner), self.0.now())
            .await?
        else {
            return Ok(None);
        };
        let stored = slot.payload.expose();
        if !payments_core::sealing::SealingKeys::is_sealed(stored) {
            return Ok(Some(stored.to_string()));
        }
        self.0
            .service
            .config()
            .sealing
            .open(stored, &slot_context(owner, &id_hash))
            .map(Some)
            .map_err(|e| ApiError::internal(format!("a one-time slot does not open: {e}")))
    }
}

fn slot_context(owner: SessionId, id_hash: &[u8; 32]) -> String {
    use base64::Engine as _;
    format!(
        "slot:{owner}:{}",
        base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(id_hash)
    )
}
