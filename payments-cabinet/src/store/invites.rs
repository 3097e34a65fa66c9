//! Invitations: one-time links that let a user set a password.

use async_trait::async_trait;
use payments_core::ids::UserId;
use payments_core::store::StoreError;
use payments_core::Timestamp;

/// An invitation: a one-time link to set a password.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct InviteRecord {
    /// SHA-256 of the link's token; unique.
    pub token_hash: [u8; 32],
    /// The user it lets set a password.
    pub user_id: UserId,
    /// Issue time.
    pub created_at: Timestamp,
    /// After this the link is refused.
    pub expires_at: Timestamp,
}

/// The cabinet's invitations, unique by the hash of their token; a user holds one at most.
#[async_trait]
pub trait CabinetInvites: Send + Sync {
    /// Stores an invitation, deleting the user's earlier ones.
    async fn insert_invite(&self, invite: &InviteRecord) -> Result<(), StoreError>;
    /// The invitation with this token hash if it is live at `now` (not taken, not expired)
    /// (the page that asks for a password).
    async fn find_invite(
        &self,
        hash: &[u8; 32],
        now: Timestamp,
    ) -> Result<Option<InviteRecord>, StoreError>;
    /// Takes the invitation with this token hash: deletes it, expired or not, and answers it
    /// if it is live at `now`, in one step, so that exactly one of concurrent takers gets it.
    async fn take_invite(
        &self,
        hash: &[u8; 32],
        now: Timestamp,
    ) -> Result<Option<InviteRecord>, StoreError>;
}
