//! A project's callback secrets at rest: sealed under the configured keys, opened to sign a
//! delivery ([`Callbacks::signing_secrets`]); the directory rotates and re-seals them through
//! [`Callbacks::seal_secret`] and [`Callbacks::open_secret`].

use super::{AdminError, Callbacks};
use crate::callback::signing::{CallbackSecret, CallbackSecrets};
use crate::ids::ProjectId;
use crate::project::SecretRecord;
use crate::sealing::SealingKeys;
use crate::SecretString;

impl Callbacks<'_> {
    /// The secrets that sign a delivery now. If the project has none, one is created and
    /// revealed to nobody (the merchant must issue a new one to verify callbacks).
    pub async fn signing_secrets(self, project: ProjectId) -> Result<CallbackSecrets, AdminError> {
        let store = &self.ports.store;
        let mut records = store.callback_secrets(project).await?;
        if records.is_empty() {
            let secret = CallbackSecret::generate(self.ports.rng.as_ref());
            let record = SecretRecord {
                secret: self.seal_secret(project, secret.expose())?,
                created_at: self.ports.clock.now(),
                revealed: false,
            };
            records = store
                .insert_callback_secret_if_none(project, &record)
                .await?;
        }
        for record in &mut records {
            record.secret = self.open_secret(project, &record.secret)?;
        }
        secrets_from_records(&records)
    }

    /// A callback secret as the store keeps it: sealed for its project when keys are
    /// configured, as it is otherwise.
    pub fn seal_secret(self, project: ProjectId, secret: &str) -> Result<SecretString, AdminError> {
        let keys = &self.config.sealing;
        if !keys.is_configured() {
            return Ok(SecretString::from(secret));
        }
        keys.seal(secret, &secret_context(project), self.ports.rng.as_ref())
            .map(SecretString::from)
            .map_err(|e| AdminError::Secret(format!("cannot seal a callback secret: {e}")))
    }

    /// A stored callback secret's value. A plaintext one (stored before sealing existed)
    /// is taken as it is, until the next rotation or re-seal seals it.
    pub fn open_secret(
        self,
        project: ProjectId,
        stored: &SecretString,
    ) -> Result<SecretString, AdminError> {
        if !SealingKeys::is_sealed(stored.expose()) {
            return Ok(stored.clone());
        }
        self.config
            .sealing
            .open(stored.expose(), &secret_context(project))
            .map(SecretString::from)
            .map_err(|e| {
                AdminError::Secret(format!(
                    "stored callback secret of project {project} cannot be opened: {e}"
                ))
            })
    }
}

/// What the sealing of a callback secret is bound to: its project, so that a sealed value
/// copied to another project's row does not open.
fn secret_context(project: ProjectId) -> String {
    format!("callback_secret:{project}")
}

/// Rebuilds the rotation state from records holding the secrets' values (newest first).
pub fn secrets_from_records(records: &[SecretRecord]) -> Result<CallbackSecrets, AdminError> {
    let parse = |r: &SecretRecord| {
        CallbackSecret::parse(r.secret.expose())
            .map_err(|e| AdminError::Secret(format!("stored callback secret is invalid: {e}")))
    };
    let (newest, older) = records
        .split_first()
        .ok_or_else(|| AdminError::Secret("no callback secret".into()))?;
    let ring = match older.first() {
        Some(prev) => {
            let mut ring = CallbackSecrets::new(parse(prev)?, prev.created_at);
            ring.rotate(parse(newest)?, newest.created_at);
            ring
        }
        None => CallbackSecrets::new(parse(newest)?, newest.created_at),
    };
    Ok(ring)
}
