//! Operator access: named operator tokens, each issued to one person or system, stored as its
//! SHA-256 only, listed, revoked, and rotated with an overlap during which the old and the new
//! token both work. The audit names the token that acted (`operator:<name>`). The HTTP adapter
//! and the CLI ask here; they decide nothing about tokens themselves.
//!
//! The single unnamed token of earlier versions (the setting [`OPERATOR_TOKEN_SETTING`]) keeps
//! working, as actor `operator`, until [`Directory::issue_operator_token`] replaces it.

use std::time::Duration;

use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use base64::Engine;
use serde_json::json;
use sha2::{Digest, Sha256};
use subtle::ConstantTimeEq;

use crate::Directory;
use payments_core::ids::TokenId;
use payments_core::project::{AuditRecord, OperatorTokenRecord};
use payments_core::secret::SecretString;
use payments_core::service::Actor;
use payments_core::service::AdminError;
use payments_core::store::OperatorStoreExt;

/// The setting holding the SHA-256 (hex) of the unnamed operator token of earlier versions.
pub const OPERATOR_TOKEN_SETTING: &str =
    payments_core::settings::LEGACY_OPERATOR_TOKEN_SHA256.name();

/// The name of the token [`Directory::issue_operator_token`] issues (the sandbox
/// bootstrap's, and `payments-server operator-token` without a subcommand).
pub const DEFAULT_OPERATOR_TOKEN_NAME: &str = "default";

/// The longest overlap of a rotation: 30 days.
pub const MAX_ROTATION_OVERLAP: Duration = Duration::from_secs(30 * 86_400);

/// A token just issued: the record and the token itself, shown once.
#[derive(Debug, Clone)]
pub struct NewOperatorToken {
    /// What is stored.
    pub record: OperatorTokenRecord,
    /// The token (`op_` and 32 random bytes in base64url); kept nowhere.
    pub token: SecretString,
}

fn sha256(token: &str) -> [u8; 32] {
    Sha256::digest(token.as_bytes()).into()
}

fn token_sha256_hex(token: &str) -> String {
    hex::encode(sha256(token))
}

fn invalid() -> AdminError {
    AdminError::OperatorTokenInvalid
}

/// A token name: 1 to 64 characters from `A-Za-z0-9._@:-` (a person's login, a system's name).
pub fn check_token_name(name: &str) -> Result<&str, AdminError> {
    let name = name.trim();
    let ok = !name.is_empty()
        && name.len() <= 64
        && name
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || "._@:-".contains(c));
    if ok {
        Ok(name)
    } else {
        Err(AdminError::invalid(format!(
            "name: {name:?} is not 1 to 64 characters from A-Za-z0-9._@:-"
        )))
    }
}

fn record_json(r: &OperatorTokenRecord) -> String {
    json!({
        "id": r.id,
        "name": r.name,
        "token_prefix": r.prefix,
        "created_at": r.created_at,
        "expires_at": r.expires_at,
    })
    .to_string()
}

impl Directory<'_> {
    /// Issues the [`DEFAULT_OPERATOR_TOKEN_NAME`] token, ending at once every earlier token of
    /// that name and the unnamed token of earlier versions: the previous "one operator token"
    /// stops working. Audited as `operator_token.issue` by `system`. Returns the token, shown
    /// once.
    pub async fn issue_operator_token(self) -> Result<String, AdminError> {
        let now = self.ports().clock.now();
        for t in self.ports().store.operator_tokens().await? {
            if t.name == DEFAULT_OPERATOR_TOKEN_NAME && t.is_valid_at(now) {
                self.ports().store.expire_operator_token(t.id, now).await?;
            }
        }
        payments_core::settings::LEGACY_OPERATOR_TOKEN_SHA256
            .set(&*self.ports().store, &String::new())
            .await?;
        let issued = self
            .mint_operator_token(DEFAULT_OPERATOR_TOKEN_NAME, None, &Actor::system())
            .await?;
        Ok(issued.token.expose().clone())
    }

    /// Issues a token named `name` (see `check_token_name`), valid for `lifetime` (`None`:
    /// until revoked). A name that has a valid token already is refused: rotate it instead.
    /// Audited as `operator_token.issue` by `actor`.
    pub async fn issue_named_operator_token(
        self,
        name: &str,
        lifetime: Option<Duration>,
        actor: &Actor,
    ) -> Result<NewOperatorToken, AdminError> {
        let name = check_token_name(name)?;
        let now = self.ports().clock.now();
        if self
            .ports()
            .store
            .operator_tokens()
            .await?
            .iter()
            .any(|t| t.name == name && t.is_valid_at(now))
        {
            return Err(AdminError::invalid(format!(
                "name: {name} has a valid operator token; rotate it (operator-token rotate) or \
                 revoke it first"
            )));
        }
        self.mint_operator_token(name, lifetime, actor).await
    }

    async fn mint_operator_token(
        self,
        name: &str,
        lifetime: Option<Duration>,
        actor: &Actor,
    ) -> Result<NewOperatorToken, AdminError> {
        let mut bytes = [0u8; 32];
        self.ports().rng.fill(&mut bytes);
        let token = format!("op_{}", URL_SAFE_NO_PAD.encode(bytes));
        let now = self.ports().clock.now();
        let record = OperatorTokenRecord {
            id: TokenId::generate(self.ports().rng.as_ref()),
            name: name.to_string(),
            hash: sha256(&token),
            prefix: token.chars().take(9).collect(),
            created_at: now,
            expires_at: lifetime.map(|l| now.saturating_add(l)),
        };
        self.ports().store.insert_operator_token(&record).await?;
        self.audit_token("operator_token.issue", &record, None, actor)
            .await?;
        Ok(NewOperatorToken {
            record,
            token: token.into(),
        })
    }

    async fn audit_token(
        self,
        action: &str,
        after: &OperatorTokenRecord,
        before: Option<&OperatorTokenRecord>,
        actor: &Actor,
    ) -> Result<(), AdminError> {
        self.ports()
            .store
            .insert_audit(&AuditRecord {
                at: self.ports().clock.now(),
                actor: actor.0.clone(),
                action: action.into(),
                target: after.name.clone(),
                before: before.map(record_json),
                after: Some(record_json(after)),
            })
            .await?;
        Ok(())
    }

    /// Every operator token ever issued (expired ones included), in issue order; never the
    /// tokens themselves.
    pub async fn operator_tokens(self) -> Result<Vec<OperatorTokenRecord>, AdminError> {
        Ok(self.ports().store.operator_tokens().await?)
    }

    /// The tokens `which` names that are valid now: the tokens of that name, or the one token
    /// with that id. None is `404 not_found`.
    async fn valid_tokens(self, which: &str) -> Result<Vec<OperatorTokenRecord>, AdminError> {
        let now = self.ports().clock.now();
        let which = which.trim();
        let id: Option<TokenId> = which.parse().ok();
        let found: Vec<OperatorTokenRecord> = self
            .ports()
            .store
            .operator_tokens()
            .await?
            .into_iter()
            .filter(|t| t.is_valid_at(now) && (t.name == which || Some(t.id) == id))
            .collect();
        if found.is_empty() {
            return Err(AdminError::NotFound(format!(
                "no valid operator token named {which:?} (nor with that id)"
            )));
        }
        Ok(found)
    }

    /// Revokes, at once, the valid tokens named `which` (or the token with that id): the next
    /// request with one is `401 token_invalid`. Audited as `operator_token.revoke`. Returns
    /// the revoked records.
    pub async fn revoke_operator_token(
        self,
        which: &str,
        actor: &Actor,
    ) -> Result<Vec<OperatorTokenRecord>, AdminError> {
        let now = self.ports().clock.now();
        let mut revoked = Vec::new();
        for t in self.valid_tokens(which).await? {
            self.ports().store.expire_operator_token(t.id, now).await?;
            let mut after = t.clone();
            after.expires_at = Some(now);
            self.audit_token("operator_token.revoke", &after, Some(&t), actor)
                .await?;
            revoked.push(after);
        }
        Ok(revoked)
    }

    /// Rotates the token named `name`: a new token of that name, while the old ones keep
    /// working for `overlap` (at most `MAX_ROTATION_OVERLAP`; zero ends them at once), so
    /// the holder can switch without a gap. The new token inherits no end of the old ones.
    /// Audited as `operator_token.rotate`.
    pub async fn rotate_operator_token(
        self,
        name: &str,
        overlap: Duration,
        actor: &Actor,
    ) -> Result<NewOperatorToken, AdminError> {
        let name = check_token_name(name)?;
        if overlap > MAX_ROTATION_OVERLAP {
            return Err(AdminError::invalid(
                "overlap: at most 30 days; the old token should not outlive its rotation long",
            ));
        }
        let old = self.valid_tokens(name).await?;
        let until = self.ports().clock.now().saturating_add(overlap);
        for t in &old {
            self.ports()
                .store
                .expire_operator_token(t.id, until)
                .await?;
        }
        let issued = self.mint_operator_token(name, None, actor).await?;
        for t in &old {
            let mut after = t.clone();
            after.expires_at = Some(t.expires_at.map_or(until, |end| end.min(until)));
            self.audit_token("operator_token.rotate", &after, Some(t), actor)
                .await?;
        }
        Ok(issued)
    }

    /// Checks the value of an operator request's `Authorization` header (`Bearer <token>`, the
    /// scheme in any case as RFC 9110 says and as the merchant API reads it): a named token
    /// valid now (actor `operator:<name>`), else the unnamed token of earlier versions
    /// (actor `operator`, compared in constant time). A missing, malformed, expired or wrong
    /// token is `401 token_invalid`. No part of the token goes to the audit trail.
    pub async fn check_operator_token(
        self,
        authorization: Option<&str>,
    ) -> Result<Actor, AdminError> {
        let presented = authorization
            .and_then(|v| v.split_once(' '))
            .filter(|(scheme, _)| scheme.eq_ignore_ascii_case("bearer"))
            .map(|(_, token)| token.trim_matches(' '))
            .filter(|t| !t.is_empty())
            .ok_or_else(invalid)?;
        // Looked up by its hash, like project tokens: the lookup reveals nothing of a token
        // that is not known.
        if let Some(t) = self
            .ports()
            .store
            .operator_token_by_hash(&sha256(presented))
            .await?
        {
            return if t.is_valid_at(self.ports().clock.now()) {
                Ok(Actor(format!("operator:{}", t.name)))
            } else {
                Err(invalid())
            };
        }
        let expected = payments_core::settings::LEGACY_OPERATOR_TOKEN_SHA256
            .get(&*self.ports().store)
            .await?
            .filter(|h| !h.is_empty())
            .ok_or_else(invalid)?;
        let presented = token_sha256_hex(presented);
        let same = presented.len() == expected.len()
            && bool::from(presented.as_bytes().ct_eq(expected.as_bytes()));
        if same {
            Ok(Actor("operator".to_string()))
        } else {
            Err(invalid())
        }
    }
}

#[cfg(test)]
mod tests {
    use super::{check_token_name, token_sha256_hex};

    #[test]
    fn the_stored_form_is_the_hex_sha256() {
        // SHA-256("abc"), FIPS 180-2 appendix B.1.
        assert_eq!(
            token_sha256_hex("abc"),
            "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad"
        );
    }

    #[test]
    fn names_are_short_printable_identifiers() {
        for ok in [
            "alice",
            "prometheus",
            "ci-deploy.2",
            "a@b.example",
            "svc:cabinet",
        ] {
            assert_eq!(check_token_name(ok).expect(ok), ok);
        }
        let long = "x".repeat(65);
        for bad in ["", " ", "al ice", "ali\u{202e}ce", "a/b", long.as_str()] {
            assert!(check_token_name(bad).is_err(), "{bad:?}");
        }
    }
}
