//! One-time slots: what a page shows once.

use async_trait::async_trait;
use payments_core::ids::SessionId;
use payments_core::store::StoreError;
use payments_core::{SecretString, Timestamp};

/// A one-time slot: a value the cabinet shows once (a new API token, a rotated callback
/// secret, new recovery codes), or what a refused form carries to the page that shows it
/// again, kept for the one `GET` that the `303` answering the `POST` leads to. The first read
/// by its owner before its expiry takes it ([`CabinetSlots::take_slot`]); a reload finds
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

/// The one-time slots, unique by the hash of their id.
#[async_trait]
pub trait CabinetSlots: Send + Sync {
    /// Stores a one-time slot; [`StoreError::Duplicate`] if its id hash exists. Then keeps
    /// at most `keep` slots of its owner, the newest by `created_at`: the owner's older ones
    /// are deleted in the same call, so whatever a session does, it holds a bounded number.
    async fn insert_slot(&self, slot: &SlotRecord, keep: usize) -> Result<(), StoreError>;
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
    async fn delete_expired_slots(&self, now: Timestamp, keep: u64) -> Result<u64, StoreError>;
}
