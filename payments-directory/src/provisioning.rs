//! A merchant, its first project and the project's credentials in one call:
//! [`Directory::provision`].
//!
//! The directory has no transaction over several records, so "all or nothing" is kept by the
//! order of the writes and a marker per merchant (`provision.<merchant id>`: `pending`, then
//! `complete`): credentials are returned only by the call that sets `complete`, and a call that
//! finds `pending` (an earlier call stopped midway: a store error, a crash) revokes whatever
//! that call issued, which nobody ever received, and issues the credentials anew. So a failed
//! call leaves nothing anyone can use, the next call finishes it, and a call after the one
//! that finished changes nothing and answers the records without credentials.

use std::collections::HashSet;
use std::fmt;
use std::str::FromStr;
use std::sync::{Mutex, PoisonError};
use std::time::Duration;

use crate::provision::{checked_name, ProjectPatch};
use crate::Directory;
use payments_core::auth::keys::{
    generate_signing_key, keyid, parse_public_key, public_key_to_pem, signing_key_to_pem,
};
use payments_core::auth::Scope;
use payments_core::ids::{KeyId, ProjectId};
use payments_core::project::{Merchant, Project};
use payments_core::service::{Actor, AdminError};
use payments_core::settings::SettingFamily;
use payments_core::store::{CredentialStoreExt, MerchantStoreExt};
use payments_core::{ApiError, ErrorCode, SecretString};

/// How long one call holds a merchant's provisioning: a second call meanwhile is
/// [`ProvisionError::Busy`]; a call that died holding it blocks the next one this long.
pub const PROVISION_TURN: Duration = Duration::from_secs(60);

/// Where the state of each merchant's provisioning is kept.
const STATE: SettingFamily<State> = SettingFamily::new("provision");

/// The state of a merchant's provisioning.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum State {
    /// Started, not finished: whatever is issued is not handed out.
    Pending,
    /// Finished: the credentials were handed out.
    Complete,
}

impl fmt::Display for State {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            State::Pending => "pending",
            State::Complete => "complete",
        })
    }
}

impl FromStr for State {
    type Err = ();

    fn from_str(s: &str) -> Result<State, ()> {
        match s {
            "pending" => Ok(State::Pending),
            "complete" => Ok(State::Complete),
            _ => Err(()),
        }
    }
}

/// A merchant name this process is provisioning, released when dropped.
struct Held<'a> {
    names: &'a Mutex<HashSet<String>>,
    name: String,
}

impl<'a> Held<'a> {
    /// `name`, unless this process is provisioning it already.
    fn take(names: &'a Mutex<HashSet<String>>, name: &str) -> Option<Held<'a>> {
        let mut held = names.lock().unwrap_or_else(PoisonError::into_inner);
        held.insert(name.to_string()).then(|| Held {
            names,
            name: name.to_string(),
        })
    }
}

impl Drop for Held<'_> {
    fn drop(&mut self) {
        self.names
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .remove(&self.name);
    }
}

/// The project's signing key.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum KeySource {
    /// A new Ed25519 key pair; its private key is among the credentials.
    Generate,
    /// The merchant's own public key (PEM SPKI or raw base64); only its keyid is returned.
    Register(String),
}

/// What [`Directory::provision`] sets up: a merchant, one project of it and the project's
/// credentials. The merchant's and the project's names identify the provisioning: a second
/// call with the same names is the same provisioning.
#[derive(Debug, Clone)]
#[non_exhaustive]
pub struct Provision {
    /// The merchant's name.
    pub merchant: String,
    /// The project's name.
    pub project: String,
    /// The project's settings (callback URL, allow-list, ...) besides the defaults.
    pub settings: ProjectPatch,
    /// The signing key.
    pub key: KeySource,
    /// The token's scopes.
    pub scopes: Vec<Scope>,
    /// The name of an operator token to issue with the rest (`None`: none).
    pub operator_token: Option<String>,
}

impl Provision {
    /// Merchant `merchant` with project `project`: default settings, a generated key pair, a
    /// token with every scope, no operator token.
    pub fn new(merchant: &str, project: &str) -> Provision {
        Provision {
            merchant: merchant.to_string(),
            project: project.to_string(),
            settings: ProjectPatch::default(),
            key: KeySource::Generate,
            scopes: Scope::ALL.to_vec(),
            operator_token: None,
        }
    }

    /// With the project's settings `settings` (its `active` is ignored: the project is active).
    #[must_use]
    pub fn with_settings(mut self, settings: ProjectPatch) -> Provision {
        self.settings = settings;
        self
    }

    /// With the merchant's own public key instead of a generated key pair.
    #[must_use]
    pub fn with_public_key(mut self, pem: &str) -> Provision {
        self.key = KeySource::Register(pem.to_string());
        self
    }

    /// With a token of `scopes` instead of every scope.
    #[must_use]
    pub fn with_scopes(mut self, scopes: Vec<Scope>) -> Provision {
        self.scopes = scopes;
        self
    }

    /// Issuing also an operator token named `name`.
    #[must_use]
    pub fn with_operator_token(mut self, name: &str) -> Provision {
        self.operator_token = Some(name.to_string());
        self
    }
}

/// The credentials of a provisioned project, returned once.
#[derive(Debug, Clone)]
#[non_exhaustive]
pub struct Credentials {
    /// The project token (`Authorization: Bearer`).
    pub token: SecretString,
    /// The signing key's id.
    pub keyid: KeyId,
    /// The private key (PKCS#8 PEM) when it was generated; `None` for a registered key.
    pub private_key_pem: Option<SecretString>,
    /// The callback secret the merchant verifies callbacks with.
    pub callback_secret: SecretString,
    /// The operator token, when one was asked for.
    pub operator_token: Option<SecretString>,
}

impl Credentials {
    /// The credentials as JSON, secrets in the clear (`token`, `keyid`, `private_key_pem`,
    /// `callback_secret`, `operator_token`; a missing one is left out): for handing them to
    /// the merchant once, over a channel only the merchant reads. Never log it.
    pub fn to_json(&self) -> serde_json::Value {
        let mut json = serde_json::json!({
            "token": self.token.expose(),
            "keyid": self.keyid.as_str(),
            "callback_secret": self.callback_secret.expose(),
        });
        if let Some(pem) = &self.private_key_pem {
            json["private_key_pem"] = pem.expose().as_str().into();
        }
        if let Some(token) = &self.operator_token {
            json["operator_token"] = token.expose().as_str().into();
        }
        json
    }
}

/// What [`Directory::provision`] answers.
#[derive(Debug, Clone)]
#[non_exhaustive]
pub struct Provisioned {
    /// The merchant.
    pub merchant: Merchant,
    /// The project.
    pub project: Project,
    /// The credentials, from the call that finished the provisioning; `None` from every later
    /// call (issue new ones with `issue_token`, `rotate_callback_secret`, ...).
    pub credentials: Option<Credentials>,
}

/// Why a provisioning did not finish.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ProvisionError {
    /// A name, setting, key or scope list the service refuses. Nothing was written.
    #[error("{0}")]
    Invalid(String),
    /// The names do not identify one provisioning: several merchants have the name, or the
    /// merchant has several projects of the name, or it was set up otherwise than by
    /// provisioning. Nothing was written.
    #[error("{0}")]
    Ambiguous(String),
    /// Another call is provisioning this merchant now (in this process, or on another node
    /// over a shared store), or one on another node stopped holding it less than
    /// [`PROVISION_TURN`] ago: try again after that.
    #[error("merchant {0:?} is being provisioned by another call; try again in a minute")]
    Busy(String),
    /// The service failed midway (the store, most often). Nothing usable was written; the
    /// next call finishes the provisioning.
    #[error("provisioning stopped: {0}")]
    Failed(#[source] ApiError),
}

impl ProvisionError {
    /// The stable code it is answered with where it is answered over an API: `bad_request`
    /// for input refused before any write, `service_unavailable` while another call holds the
    /// merchant, the failure's own code otherwise.
    pub fn code(&self) -> ErrorCode {
        match self {
            ProvisionError::Invalid(_) | ProvisionError::Ambiguous(_) => ErrorCode::BadRequest,
            ProvisionError::Busy(_) => ErrorCode::ServiceUnavailable,
            ProvisionError::Failed(e) => e.code,
        }
    }
}

impl From<ProvisionError> for ApiError {
    fn from(e: ProvisionError) -> ApiError {
        match e {
            ProvisionError::Failed(e) => e,
            ProvisionError::Busy(_) => {
                ApiError::new(e.code(), e.to_string()).with_retry_after(PROVISION_TURN.as_secs())
            }
            e => ApiError::new(e.code(), e.to_string()),
        }
    }
}

impl From<ApiError> for ProvisionError {
    fn from(e: ApiError) -> ProvisionError {
        ProvisionError::Failed(e)
    }
}

impl From<AdminError> for ProvisionError {
    fn from(e: AdminError) -> ProvisionError {
        ProvisionError::Failed(e.into())
    }
}

impl From<payments_core::store::StoreError> for ProvisionError {
    fn from(e: payments_core::store::StoreError) -> ProvisionError {
        ProvisionError::Failed(e.into())
    }
}

/// A provisioning request's values, checked ([`Directory::check_request`]).
struct Checked {
    merchant: String,
    project: String,
    /// The keyid of the merchant's own key, if it gave one.
    kept: Option<KeyId>,
    settings: ProjectPatch,
}

impl Directory<'_> {
    /// Sets up a merchant, its project and the project's credentials (token, signing key,
    /// callback secret and, when asked, an operator token) in any environment, all or nothing
    /// and idempotently (see the module's documentation). Records the service's environment
    /// in the store ([`ServiceState::record_environment`](super::ServiceState::record_environment)); a store of the other
    /// environment is refused.
    /// - the first call that finishes answers the credentials;
    /// - a call after it writes nothing and answers the records without credentials;
    /// - a call after one that stopped midway finishes the provisioning, revoking whatever the
    ///   stopped call issued.
    ///
    /// Audited as the single operations it is made of, by `actor`.
    ///
    /// # Errors
    /// [`ProvisionError`]: invalid input and ambiguous names before anything is written;
    /// [`ProvisionError::Failed`] when a write fails.
    pub async fn provision(
        self,
        request: &Provision,
        actor: &Actor,
    ) -> Result<Provisioned, ProvisionError> {
        let checked = self.check_request(request)?;
        // The credentials are this environment's (`nl_live_` or `nl_test_` tokens): the store
        // is recorded as its, and a store of the other environment is refused.
        self.record_environment().await.map_err(|e| match e {
            AdminError::Invalid(m) => ProvisionError::Invalid(m),
            e => ProvisionError::Failed(e.into()),
        })?;
        let (merchant_name, project_name) = (&checked.merchant, &checked.project);
        if let Some(done) = self.provisioned(merchant_name, project_name).await? {
            return Ok(done);
        }
        let Some(_held) = Held::take(self.provisioning_turns(), merchant_name) else {
            return Err(ProvisionError::Busy(merchant_name.clone()));
        };
        let turn = format!("provision:{merchant_name}");
        if !self.payments().take_turn(&turn, PROVISION_TURN).await? {
            return Err(ProvisionError::Busy(merchant_name.clone()));
        }
        // Again under the turn: another call may have finished in between.
        if let Some(done) = self.provisioned(merchant_name, project_name).await? {
            return Ok(done);
        }
        let store = &self.ports().store;
        let (merchant, project) = self.records(request, &checked, actor).await?;
        let registered = self
            .revoke_unhanded(project.id, checked.kept.as_ref(), actor)
            .await?;
        let (keyid, private_key_pem) = self
            .issue_key(&request.key, registered, project.id, actor)
            .await?;
        let callback_secret = self.rotate_callback_secret(project.id, actor).await?;
        let operator_token = match &request.operator_token {
            Some(name) => Some(self.operator_token_anew(name, actor).await?),
            None => None,
        };
        // The token last: a project is usable from the first request with it.
        let token = self
            .issue_token(project.id, request.scopes.clone(), actor)
            .await?
            .token;
        STATE.set(&**store, &merchant.id, &State::Complete).await?;
        Ok(Provisioned {
            merchant,
            project,
            credentials: Some(Credentials {
                token,
                keyid,
                private_key_pem,
                callback_secret,
                operator_token,
            }),
        })
    }

    /// The request's values checked before anything is written: the names, the scopes, the
    /// merchant's own key (read once: its keyid is the one to keep on a resume), the operator
    /// token's name and the project's settings.
    fn check_request(self, request: &Provision) -> Result<Checked, ProvisionError> {
        let invalid = |e: AdminError| ProvisionError::Invalid(e.to_string());
        let merchant = checked_name(&request.merchant).map_err(invalid)?;
        let project = checked_name(&request.project).map_err(invalid)?;
        if request.scopes.is_empty() {
            return Err(ProvisionError::Invalid(
                "a token needs at least one scope".into(),
            ));
        }
        let kept = match &request.key {
            KeySource::Register(pem) => {
                Some(keyid(&parse_public_key(pem).map_err(|e| {
                    ProvisionError::Invalid(format!("public_key: {e}"))
                })?))
            }
            KeySource::Generate => None,
        };
        if let Some(name) = &request.operator_token {
            super::operator::check_token_name(name).map_err(invalid)?;
        }
        let settings = ProjectPatch {
            active: None,
            ..request.settings.clone()
        };
        self.check_patch(&settings).map_err(invalid)?;
        Ok(Checked {
            merchant,
            project,
            kept,
            settings,
        })
    }

    /// The merchant (marked pending) and its project, found by name or created.
    async fn records(
        self,
        request: &Provision,
        checked: &Checked,
        actor: &Actor,
    ) -> Result<(Merchant, Project), ProvisionError> {
        let store = &self.ports().store;
        let merchant = match self.merchant_named(&checked.merchant).await? {
            Some(m) => m,
            None => {
                if let Some(name) = &request.operator_token {
                    if self.has_operator_token(name).await? {
                        return Err(ProvisionError::Invalid(format!(
                            "operator token name {name} has a valid token already"
                        )));
                    }
                }
                self.create_merchant(&checked.merchant, None, actor).await?
            }
        };
        if STATE.get(&**store, &merchant.id).await? != Some(State::Pending) {
            STATE.set(&**store, &merchant.id, &State::Pending).await?;
        }
        let project = match self.project_named(&merchant, &checked.project).await?.0 {
            Some(p) => p,
            None => {
                self.create_project(
                    merchant.id,
                    &checked.project,
                    checked.settings.clone(),
                    actor,
                )
                .await?
            }
        };
        Ok((merchant, project))
    }

    /// Whatever a stopped call issued was never handed out: revokes it before issuing anew,
    /// except the merchant's own key (`kept`), which is answered when it is registered.
    async fn revoke_unhanded(
        self,
        project: ProjectId,
        kept: Option<&KeyId>,
        actor: &Actor,
    ) -> Result<Option<KeyId>, ProvisionError> {
        let store = &self.ports().store;
        for t in store.tokens(project).await? {
            if t.revoked_at.is_none() {
                self.revoke_token(project, t.id, actor).await?;
            }
        }
        let mut registered = None;
        for k in store.keys(project).await? {
            if k.revoked_at.is_some() {
                continue;
            }
            if kept == Some(&k.keyid) {
                registered = Some(k.keyid);
            } else {
                self.revoke_key(project, &k.keyid, actor).await?;
            }
        }
        Ok(registered)
    }

    /// The project's signing key: the merchant's own (registered now, or `registered`
    /// before), or one generated here whose private half is answered once.
    async fn issue_key(
        self,
        source: &KeySource,
        registered: Option<KeyId>,
        project: ProjectId,
        actor: &Actor,
    ) -> Result<(KeyId, Option<SecretString>), ProvisionError> {
        Ok(match (source, registered) {
            (KeySource::Register(_), Some(id)) => (id, None),
            (KeySource::Register(pem), None) => {
                (self.register_key(project, pem, actor).await?.keyid, None)
            }
            (KeySource::Generate, _) => {
                let key = generate_signing_key(self.ports().rng.as_ref());
                let pem = public_key_to_pem(&key.verifying_key());
                let record = self.register_key(project, &pem, actor).await?;
                (
                    record.keyid,
                    Some(SecretString::from(signing_key_to_pem(&key))),
                )
            }
        })
    }

    /// An operator token of `name`, issued now: a token of the name is one a stopped call
    /// issued, replaced at once.
    async fn operator_token_anew(
        self,
        name: &str,
        actor: &Actor,
    ) -> Result<SecretString, ProvisionError> {
        Ok(if self.has_operator_token(name).await? {
            self.rotate_operator_token(name, Duration::ZERO, actor)
                .await?
                .token
        } else {
            self.issue_named_operator_token(name, None, actor)
                .await?
                .token
        })
    }

    /// The finished provisioning of these names, if there is one; an error when the names do
    /// not identify one provisioning.
    async fn provisioned(
        self,
        merchant_name: &str,
        project_name: &str,
    ) -> Result<Option<Provisioned>, ProvisionError> {
        let Some(merchant) = self.merchant_named(merchant_name).await? else {
            return Ok(None);
        };
        let state = STATE.get(&*self.ports().store, &merchant.id).await?;
        let (project, any_project) = self.project_named(&merchant, project_name).await?;
        match (state, project) {
            (Some(State::Complete), Some(project)) => Ok(Some(Provisioned {
                merchant,
                project,
                credentials: None,
            })),
            (Some(State::Pending), _) => Ok(None),
            // A merchant with nothing yet: the one a call created before it stopped, before it
            // could set the marker (or an empty one an operator made): provisioning adopts it.
            (None, None) if !any_project => Ok(None),
            (Some(State::Complete), None) => Err(ProvisionError::Ambiguous(format!(
                "merchant {merchant_name:?} was provisioned with another project; add project \
                 {project_name:?} with create_project"
            ))),
            (None, _) => Err(ProvisionError::Ambiguous(format!(
                "merchant {merchant_name:?} exists and was not set up by provisioning; give \
                 another name, or add to it with create_project and issue_token"
            ))),
        }
    }

    /// Whether a valid operator token is named `name`.
    async fn has_operator_token(self, name: &str) -> Result<bool, ProvisionError> {
        let now = self.ports().clock.now();
        Ok(self
            .operator_tokens()
            .await?
            .iter()
            .any(|t| t.name == name.trim() && t.is_valid_at(now)))
    }

    async fn merchant_named(self, name: &str) -> Result<Option<Merchant>, ProvisionError> {
        let mut found: Vec<Merchant> = self
            .ports()
            .store
            .merchants()
            .await?
            .into_iter()
            .filter(|m| m.name == name)
            .collect();
        if found.len() > 1 {
            return Err(ProvisionError::Ambiguous(format!(
                "several merchants are named {name:?}"
            )));
        }
        Ok(found.pop())
    }

    /// The merchant's project named `name`, and whether the merchant has any project.
    async fn project_named(
        self,
        merchant: &Merchant,
        name: &str,
    ) -> Result<(Option<Project>, bool), ProvisionError> {
        let projects: Vec<Project> = self
            .ports()
            .store
            .projects()
            .await?
            .into_iter()
            .filter(|p| p.merchant_id == merchant.id)
            .collect();
        let any = !projects.is_empty();
        let mut named: Vec<Project> = projects.into_iter().filter(|p| p.name == name).collect();
        if named.len() > 1 {
            return Err(ProvisionError::Ambiguous(format!(
                "merchant {:?} has several projects named {name:?}",
                merchant.name
            )));
        }
        Ok((named.pop(), any))
    }
}
