//! Provisioning: merchants, projects, tokens, keys and callback secrets (the cabinet's
//! functions), each with an audit record.

use std::str::FromStr;
use std::time::Duration;

use ed25519_dalek::VerifyingKey;
use rust_decimal::Decimal;

use crate::Directory;
use payments_core::auth::keys::{parse_public_key_form, KeyConfirmation};
use payments_core::auth::token::IssuedToken;
use payments_core::auth::{Environment, IpAllowList, Scope};
use payments_core::callback::destination::CallbackUrl;
use payments_core::callback::signing::CallbackSecret;
use payments_core::ids::{KeyId, MerchantId, ProjectId, TokenId};
use payments_core::payer::PageLanguage;
use payments_core::payment::{Currency, PaymentMethod};
use payments_core::project::{
    AuditRecord, Contract, KeyRecord, Merchant, MethodTerms, Project, RateLimit, SecretRecord,
    TokenRecord, DEFAULT_LIFETIME,
};
use payments_core::sealing::ResealReport;
use payments_core::service::{Actor, AdminError, ServiceState};
use payments_core::settlement::FeePercent;
use payments_core::store::CredentialStoreExt;
use payments_core::store::MerchantStoreExt;
use payments_core::store::StoreError;
use payments_core::SecretString;

/// Longest accepted payment lifetime (7 days).
pub const MAX_LIFETIME: Duration = Duration::from_secs(7 * 24 * 3600);

/// Changes to a project's settings; `None` leaves a setting as it is.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ProjectPatch {
    /// New name.
    pub name: Option<String>,
    /// Activate or deactivate.
    pub active: Option<bool>,
    /// Test mode on or off (sandbox only).
    pub test_mode: Option<bool>,
    /// Payment lifetime.
    pub lifetime: Option<Duration>,
    /// The whole contract.
    pub contract: Option<Contract>,
    /// Callback URL: `Some(None)` clears it.
    pub callback_url: Option<Option<String>>,
    /// IP allow-list rules (replaces the list).
    pub ip_allow_list: Option<Vec<String>>,
    /// Signature requirement for GET endpoints.
    pub signature_required: Option<bool>,
    /// Pause (new payments `422 payment_not_routable`) or resume.
    pub paused: Option<bool>,
    /// Rate limit.
    pub rate_limit: Option<RateLimit>,
    /// The hosted payer page on or off.
    pub payer_page: Option<bool>,
    /// The payer page's language.
    pub payer_language: Option<PageLanguage>,
    /// The payer page's return URL (`Some(None)` removes it): https only
    /// ([`ReturnUrl::parse`](payments_core::payer::ReturnUrl::parse)).
    pub return_url: Option<Option<String>>,
}

/// What a new project token is to be: its scopes, what the merchant calls it, and how long
/// it works (`None`: until revoked).
#[derive(Debug, Clone, Default)]
pub struct TokenRequest {
    /// Granted scopes (at least one).
    pub scopes: Vec<Scope>,
    /// A name, trimmed; 1 to [`TOKEN_NAME_MAX`] characters, no control characters.
    pub name: Option<String>,
    /// From issue to expiry; 1 day to [`TOKEN_LIFETIME_MAX`].
    pub lifetime: Option<Duration>,
}

/// The longest token name, in characters.
pub const TOKEN_NAME_MAX: usize = 64;

/// The longest lifetime a token may be issued with (ten years).
pub const TOKEN_LIFETIME_MAX: Duration = Duration::from_secs(3650 * 86_400);

/// The shortest lifetime a token may be issued with (a day).
pub const TOKEN_LIFETIME_MIN: Duration = Duration::from_secs(86_400);

/// A token name as stored: trimmed, refused when empty, longer than [`TOKEN_NAME_MAX`]
/// characters or holding a control character.
pub fn token_name(name: &str) -> Result<String, AdminError> {
    let name = name.trim();
    if name.is_empty() {
        return Err(AdminError::invalid(
            "name: give the token a name (such as \"shop backend\")",
        ));
    }
    if name.chars().count() > TOKEN_NAME_MAX {
        return Err(AdminError::invalid(format!(
            "name: at most {TOKEN_NAME_MAX} characters"
        )));
    }
    if name.chars().any(char::is_control) {
        return Err(AdminError::invalid(
            "name: no line breaks or control characters",
        ));
    }
    Ok(name.to_string())
}

/// An issued token: the record stored and the secret, shown once.
#[derive(Debug)]
pub struct NewToken {
    /// What is stored.
    pub record: TokenRecord,
    /// The token itself; never stored, never shown again.
    pub token: SecretString,
}

fn audit(
    actor: &Actor,
    action: &str,
    target: String,
    before: Option<String>,
    after: Option<String>,
    at: payments_core::Timestamp,
) -> AuditRecord {
    AuditRecord {
        at,
        actor: actor.0.clone(),
        action: action.to_string(),
        target,
        before,
        after,
    }
}

/// A contract a project may have: at least one method and one currency, none listed twice (whose
/// terms would apply?), no method whose minimum is above its maximum.
fn check_contract(c: &Contract) -> Result<(), AdminError> {
    let bad = AdminError::Invalid;
    if c.methods.is_empty() || c.currencies.is_empty() {
        return Err(bad(
            "contract needs at least one method and one currency".into()
        ));
    }
    for (i, t) in c.methods.iter().enumerate() {
        if c.methods[..i].iter().any(|o| o.method == t.method) {
            return Err(bad(format!(
                "contract: method {} is listed twice",
                t.method
            )));
        }
    }
    for (i, cur) in c.currencies.iter().enumerate() {
        if c.currencies[..i].contains(cur) {
            return Err(bad(format!("contract: currency {cur} is listed twice")));
        }
    }
    for t in &c.methods {
        if let (Some(min), Some(max)) = (t.min_amount, t.max_amount) {
            if min > max {
                return Err(bad(format!(
                    "contract: min_amount above max_amount for {}",
                    t.method
                )));
            }
        }
    }
    Ok(())
}

/// An allow-list a project may have: at most [`IpAllowList::MAX_RULES`] entries, each one
/// that parses.
fn check_allow_list(rules: &[String]) -> Result<(), AdminError> {
    let bad = AdminError::Invalid;
    if rules.len() > IpAllowList::MAX_RULES {
        return Err(bad(format!(
            "ip_allow_list: at most {} entries (got {}); use CIDR networks",
            IpAllowList::MAX_RULES,
            rules.len()
        )));
    }
    IpAllowList::parse(rules.iter().map(String::as_str))
        .map_err(|e| bad(format!("ip_allow_list: {e}")))?;
    Ok(())
}

fn not_found(what: &str) -> AdminError {
    AdminError::NotFound(format!("{what} not found"))
}

fn parse_url(url: Option<String>, svc: &ServiceState) -> Result<Option<CallbackUrl>, AdminError> {
    url.filter(|u| !u.trim().is_empty())
        .map(|u| {
            CallbackUrl::parse(u.trim(), svc.config().callback_policy).map_err(AdminError::from)
        })
        .transpose()
}

impl Directory<'_> {
    /// Creates a merchant.
    pub async fn create_merchant(
        self,
        name: &str,
        callback_url: Option<String>,
        actor: &Actor,
    ) -> Result<Merchant, AdminError> {
        let name = checked_name(name)?;
        let merchant = Merchant {
            id: MerchantId::generate(self.ports().rng.as_ref()),
            name,
            paused: false,
            callback_url: parse_url(callback_url, &self)?,
            created_at: self.ports().clock.now(),
        };
        self.ports().store.upsert_merchant(&merchant).await?;
        self.audit(audit(
            actor,
            "merchant.create",
            merchant.id.to_string(),
            None,
            Some(merchant_json(&merchant)),
            merchant.created_at,
        ))
        .await?;
        Ok(merchant)
    }

    /// Pauses or resumes a merchant and/or sets its common callback URL.
    pub async fn update_merchant(
        self,
        id: MerchantId,
        paused: Option<bool>,
        callback_url: Option<Option<String>>,
        actor: &Actor,
    ) -> Result<Merchant, AdminError> {
        let store = &self.ports().store;
        let before = store
            .merchant(id)
            .await?
            .ok_or_else(|| not_found("merchant"))?;
        let mut m = before.clone();
        if let Some(p) = paused {
            m.paused = p;
        }
        if let Some(url) = callback_url {
            m.callback_url = parse_url(url, &self)?;
        }
        store.upsert_merchant(&m).await?;
        self.audit(audit(
            actor,
            "merchant.update",
            id.to_string(),
            Some(merchant_json(&before)),
            Some(merchant_json(&m)),
            self.ports().clock.now(),
        ))
        .await?;
        Ok(m)
    }

    /// Creates a project of a merchant with the standard contract and default settings, then
    /// applies `patch`.
    pub async fn create_project(
        self,
        merchant: MerchantId,
        name: &str,
        patch: ProjectPatch,
        actor: &Actor,
    ) -> Result<Project, AdminError> {
        self.ports()
            .store
            .merchant(merchant)
            .await?
            .ok_or_else(|| not_found("merchant"))?;
        let project = self.blank_project(merchant, checked_name(name)?);
        let project = self.patched(project, patch)?;
        self.ports().store.upsert_project(&project).await?;
        self.audit(audit(
            actor,
            "project.create",
            project.id.to_string(),
            None,
            Some(project_json(&project)),
            project.created_at,
        ))
        .await?;
        Ok(project)
    }

    /// A project of `merchant` named `name` with the standard contract and default settings.
    fn blank_project(self, merchant: MerchantId, name: String) -> Project {
        Project {
            id: ProjectId::generate(self.ports().rng.as_ref()),
            merchant_id: merchant,
            name,
            active: true,
            test_mode: false,
            lifetime: DEFAULT_LIFETIME,
            contract: Contract::standard(),
            callback_url: None,
            ip_allow_list: Vec::new(),
            signature_required: false,
            paused: false,
            rate_limit: RateLimit::default(),
            payer_page: false,
            payer_language: PageLanguage::default(),
            return_url: None,
            created_at: self.ports().clock.now(),
        }
    }

    /// Checks `patch` as [`Directory::create_project`] would apply it, writing nothing.
    pub(super) fn check_patch(self, patch: &ProjectPatch) -> Result<(), AdminError> {
        let template = self.blank_project(MerchantId::from_uuid(uuid::Uuid::nil()), "-".into());
        self.patched(template, patch.clone()).map(|_| ())
    }

    /// Changes a project's settings; they take effect with the next request.
    pub async fn update_project(
        self,
        id: ProjectId,
        patch: ProjectPatch,
        actor: &Actor,
    ) -> Result<Project, AdminError> {
        let before = self
            .ports()
            .store
            .project(id)
            .await?
            .ok_or_else(|| not_found("project"))?;
        let after = self.patched(before.clone(), patch)?;
        self.ports().store.upsert_project(&after).await?;
        self.audit(audit(
            actor,
            "project.update",
            id.to_string(),
            Some(project_json(&before)),
            Some(project_json(&after)),
            self.ports().clock.now(),
        ))
        .await?;
        Ok(after)
    }

    fn patched(self, mut p: Project, patch: ProjectPatch) -> Result<Project, AdminError> {
        let bad = AdminError::Invalid;
        if let Some(name) = patch.name {
            p.name = checked_name(&name)?;
        }
        if let Some(a) = patch.active {
            p.active = a;
        }
        if let Some(t) = patch.test_mode {
            if t && self.auth_config().environment != Environment::Sandbox {
                return Err(bad("test mode exists only in the sandbox".into()));
            }
            p.test_mode = t;
        }
        if let Some(l) = patch.lifetime {
            if l < Duration::from_secs(60) || l > MAX_LIFETIME {
                return Err(bad("lifetime must be between 60 seconds and 7 days".into()));
            }
            p.lifetime = l;
        }
        if let Some(c) = patch.contract {
            check_contract(&c)?;
            p.contract = c;
        }
        if let Some(url) = patch.callback_url {
            p.callback_url = parse_url(url, &self)?;
        }
        if let Some(rules) = patch.ip_allow_list {
            check_allow_list(&rules)?;
            p.ip_allow_list = rules;
        }
        if let Some(paused) = patch.paused {
            p.paused = paused;
        }
        if let Some(s) = patch.signature_required {
            p.signature_required = s;
        }
        if let Some(r) = patch.rate_limit {
            if r.per_second == 0 || r.burst == 0 {
                return Err(bad(
                    "rate_limit: per_second and burst must be positive".into()
                ));
            }
            p.rate_limit = r;
        }
        if let Some(on) = patch.payer_page {
            p.payer_page = on;
        }
        if let Some(language) = patch.payer_language {
            p.payer_language = language;
        }
        if let Some(url) = patch.return_url {
            p.return_url = match url.as_deref().map(str::trim) {
                None | Some("") => None,
                Some(text) => Some(
                    payments_core::payer::ReturnUrl::parse(text)
                        .map_err(|e| bad(format!("return_url: {e}")))?,
                ),
            };
        }
        Ok(p)
    }

    /// Issues a token with `scopes`, no name and no expiry; the token is in the answer once
    /// and never again.
    pub async fn issue_token(
        self,
        project: ProjectId,
        scopes: Vec<Scope>,
        actor: &Actor,
    ) -> Result<NewToken, AdminError> {
        let request = TokenRequest {
            scopes,
            ..TokenRequest::default()
        };
        self.issue_token_as(project, request, actor).await
    }

    /// Issues a token as `request` says (scopes, a name, a lifetime); the token is in the
    /// answer once and never again. From its expiry on, it is refused as a revoked token is.
    pub async fn issue_token_as(
        self,
        project: ProjectId,
        request: TokenRequest,
        actor: &Actor,
    ) -> Result<NewToken, AdminError> {
        self.ports()
            .store
            .project(project)
            .await?
            .ok_or_else(|| not_found("project"))?;
        if request.scopes.is_empty() {
            return Err(AdminError::invalid("a token needs at least one scope"));
        }
        let name = request.name.as_deref().map(token_name).transpose()?;
        if let Some(l) = request.lifetime {
            if !(TOKEN_LIFETIME_MIN..=TOKEN_LIFETIME_MAX).contains(&l) {
                return Err(AdminError::invalid(
                    "expires: a token lives from 1 day to 3650 days, or until revoked",
                ));
            }
        }
        let now = self.ports().clock.now();
        let issued =
            IssuedToken::generate(self.auth_config().environment, self.ports().rng.as_ref());
        let record = TokenRecord {
            id: TokenId::generate(self.ports().rng.as_ref()),
            project_id: project,
            hash: *issued.hash.as_bytes(),
            prefix: issued.token_prefix.clone(),
            scopes: request.scopes,
            created_at: now,
            revoked_at: None,
            name,
            expires_at: request.lifetime.map(|l| now + l),
        };
        self.ports().store.insert_token(&record).await?;
        let scopes: Vec<&str> = record.scopes.iter().map(|s| s.as_str()).collect();
        self.audit(audit(actor, "token.issue", record.id.to_string(), None, Some(serde_json::json!({"project_id": project, "prefix": record.prefix, "scopes": scopes, "name": record.name, "expires_at": record.expires_at}).to_string()), record.created_at)).await?;
        Ok(NewToken {
            record,
            token: SecretString::from(issued.secret()),
        })
    }

    /// Revokes a token: the next request with it fails.
    pub async fn revoke_token(
        self,
        project: ProjectId,
        id: TokenId,
        actor: &Actor,
    ) -> Result<(), AdminError> {
        let now = self.ports().clock.now();
        let state = |revoked_at: Option<payments_core::Timestamp>| {
            Some(serde_json::json!({"project_id": project, "revoked_at": revoked_at}).to_string())
        };
        let before = self
            .ports()
            .store
            .tokens(project)
            .await?
            .into_iter()
            .find(|t| t.id == id)
            .ok_or_else(|| not_found("token"))?
            .revoked_at;
        if !self.ports().store.revoke_token(project, id, now).await? {
            return Err(not_found("token"));
        }
        self.audit(audit(
            actor,
            "token.revoke",
            id.to_string(),
            state(before),
            state(before.or(Some(now))),
            now,
        ))
        .await
    }

    /// Registers a public key (PEM SPKI or raw base64); answers its record with the keyid.
    ///
    /// A key active (registered, not revoked) on another project is refused: a signature names
    /// its key but not the project, and nonces are remembered per project, so a request signed
    /// for one project could otherwise be replayed against every other project holding the key.
    /// One key, one project: the `keyid` of a signature then names the only project it can be
    /// used with.
    ///
    /// Nothing is checked besides the key: a raw 32-byte key is registered as it is (API v1's
    /// answer); [`Directory::register_key_confirmed`] checks a keyid too.
    pub async fn register_key(
        self,
        project: ProjectId,
        input: &str,
        actor: &Actor,
    ) -> Result<KeyRecord, AdminError> {
        self.register_key_confirmed(project, input, KeyConfirmation::default(), actor)
            .await
    }

    /// [`Directory::register_key`] once `confirmation` holds
    /// ([`KeyConfirmation::check`]): a raw 32-byte key may be a private key's seed, which only
    /// the keyid the merchant's generator printed tells apart. A key that is not confirmed is
    /// [`AdminError::KeyUnconfirmed`] and nothing is stored.
    pub async fn register_key_confirmed(
        self,
        project: ProjectId,
        input: &str,
        confirmation: KeyConfirmation<'_>,
        actor: &Actor,
    ) -> Result<KeyRecord, AdminError> {
        self.ports()
            .store
            .project(project)
            .await?
            .ok_or_else(|| not_found("project"))?;
        let (key, form): (VerifyingKey, _) = parse_public_key_form(input)
            .map_err(|e| AdminError::invalid(format!("public_key: {e}")))?;
        let id = confirmation
            .check(&key, form)
            .map_err(AdminError::KeyUnconfirmed)?;
        let elsewhere = self.ports().store.find_active_key_projects(&id).await?;
        if elsewhere.iter().any(|p| *p != project) {
            return Err(AdminError::invalid(format!(
                "key {id} is active on another project; a key signs for one project only \
                 (generate a key pair per project)"
            )));
        }
        let record = KeyRecord {
            keyid: id,
            project_id: project,
            public_key: key.to_bytes(),
            created_at: self.ports().clock.now(),
            revoked_at: None,
        };
        self.ports()
            .store
            .insert_key(&record)
            .await
            .map_err(|e| match e {
                StoreError::Duplicate(_) => {
                    AdminError::invalid(format!("key {} is already registered", record.keyid))
                }
                other => other.into(),
            })?;
        self.audit(audit(
            actor,
            "key.register",
            record.keyid.to_string(),
            None,
            Some(serde_json::json!({"project_id": project}).to_string()),
            record.created_at,
        ))
        .await?;
        Ok(record)
    }

    /// Revokes a key: it stops verifying with the next request.
    pub async fn revoke_key(
        self,
        project: ProjectId,
        id: &KeyId,
        actor: &Actor,
    ) -> Result<(), AdminError> {
        let now = self.ports().clock.now();
        let state = |revoked_at: Option<payments_core::Timestamp>| {
            Some(serde_json::json!({"project_id": project, "revoked_at": revoked_at}).to_string())
        };
        let before = self
            .ports()
            .store
            .key(project, id)
            .await?
            .ok_or_else(|| not_found("key"))?
            .revoked_at;
        if !self.ports().store.revoke_key(project, id, now).await? {
            return Err(not_found("key"));
        }
        self.audit(audit(
            actor,
            "key.revoke",
            id.to_string(),
            state(before),
            state(before.or(Some(now))),
            now,
        ))
        .await
    }

    /// Issues a new callback secret (shown once). The previous one keeps signing for 24 h; at
    /// most two are valid.
    pub async fn rotate_callback_secret(
        self,
        project: ProjectId,
        actor: &Actor,
    ) -> Result<SecretString, AdminError> {
        self.ports()
            .store
            .project(project)
            .await?
            .ok_or_else(|| not_found("project"))?;
        let secret = CallbackSecret::generate(self.ports().rng.as_ref());
        let now = self.ports().clock.now();
        let record = SecretRecord {
            secret: self.callbacks().seal_secret(project, secret.expose())?,
            created_at: now,
            revealed: true,
        };
        // The trail records how many secrets are stored (at most two), never the secrets.
        let held = self.ports().store.callback_secrets(project).await?.len();
        self.ports()
            .store
            .insert_callback_secret(project, &record)
            .await?;
        let state = |n: usize| Some(serde_json::json!({ "stored_secrets": n }).to_string());
        self.audit(audit(
            actor,
            "callback_secret.rotate",
            project.to_string(),
            state(held),
            state((held + 1).min(2)),
            now,
        ))
        .await?;
        Ok(SecretString::from(secret.expose()))
    }

    /// Re-seals every stored callback secret that is not sealed under the current key
    /// (plaintext from before sealing, or a previous key) with the current key: the step of a
    /// key rotation after which the previous key can be dropped. The secrets' values do not
    /// change. Refused without a configured key.
    pub async fn reseal_callback_secrets(self, actor: &Actor) -> Result<ResealReport, AdminError> {
        let keys = &self.config().sealing;
        let key_id = keys
            .current_id()
            .ok_or_else(|| AdminError::invalid("no sealing key is configured"))?
            .to_string();
        let store = &self.ports().store;
        let mut report = ResealReport {
            key_id,
            resealed: 0,
            current: 0,
        };
        for project in store.projects().await? {
            for record in store.callback_secrets(project.id).await? {
                if !keys.needs_reseal(record.secret.expose()) {
                    report.current += 1;
                    continue;
                }
                let value = self.callbacks().open_secret(project.id, &record.secret)?;
                let sealed = self.callbacks().seal_secret(project.id, value.expose())?;
                // `false`: rotated meanwhile, and the new secret was sealed with this key.
                if store
                    .replace_callback_secret(project.id, &record.secret, &sealed)
                    .await?
                {
                    report.resealed += 1;
                }
            }
        }
        let now = self.ports().clock.now();
        self.audit(audit(
            actor,
            "callback_secret.reseal",
            report.key_id.clone(),
            None,
            Some(
                serde_json::json!({ "resealed": report.resealed, "current": report.current })
                    .to_string(),
            ),
            now,
        ))
        .await?;
        Ok(report)
    }

    async fn audit(self, record: AuditRecord) -> Result<(), AdminError> {
        self.ports()
            .store
            .insert_audit(&record)
            .await
            .map_err(AdminError::from)
    }
}

/// A merchant or project name: 1 to 200 characters after trimming, none of them a control
/// character (NUL, ESC, DEL, C1...) or a character that reorders or hides text (bidirectional
/// controls such as U+202E, line and paragraph separators): names are shown in the operator
/// API, the CLI, logs and the merchant's `GET /api/v1/project`, where such characters spoof
/// or break what is shown.
pub(crate) fn checked_name(name: &str) -> Result<String, AdminError> {
    let name = name.trim();
    if name.is_empty() || name.chars().count() > 200 {
        return Err(AdminError::invalid("name must be 1 to 200 characters"));
    }
    if let Some(c) = name
        .chars()
        .find(|&c| c.is_control() || is_format_control(c))
    {
        return Err(AdminError::invalid(format!(
            "name must not contain control or bidirectional formatting characters (found U+{:04X})",
            u32::from(c)
        )));
    }
    Ok(name.to_string())
}

/// Bidirectional controls ([`payments_core::text::is_bidi_control`]) and the line and paragraph
/// separators (U+2028, U+2029).
fn is_format_control(c: char) -> bool {
    payments_core::text::is_bidi_control(c) || payments_core::text::is_line_separator(c)
}

fn merchant_json(m: &Merchant) -> String {
    serde_json::json!({
        "id": m.id, "name": m.name, "paused": m.paused,
        "callback_url": m.callback_url.as_ref().map(|u| u.as_str()),
    })
    .to_string()
}

/// A project's settings as JSON (for audit records and the operator API).
pub fn project_json(p: &Project) -> String {
    project_value(p).to_string()
}

/// A project's settings as a JSON value.
pub fn project_value(p: &Project) -> serde_json::Value {
    let methods: Vec<serde_json::Value> = p
        .contract
        .methods
        .iter()
        .map(|t| {
            serde_json::json!({
                "method": t.method.as_str(),
                "min_amount": t.min_amount.map(|d| d.to_string()),
                "max_amount": t.max_amount.map(|d| d.to_string()),
                "fee_percent": t.fee_percent.display().to_string(),
            })
        })
        .collect();
    serde_json::json!({
        "id": p.id, "merchant_id": p.merchant_id, "name": p.name, "active": p.active,
        "test_mode": p.test_mode, "lifetime_seconds": p.lifetime.as_secs(),
        "contract": {
            "currencies": p.contract.currencies.iter().map(|c| c.as_str()).collect::<Vec<_>>(),
            "methods": methods,
        },
        "callback_url": p.callback_url.as_ref().map(|u| u.as_str()),
        "ip_allow_list": p.ip_allow_list,
        "signature_required": p.signature_required,
        "paused": p.paused,
        "rate_limit": {"per_second": p.rate_limit.per_second, "burst": p.rate_limit.burst},
        "payer_page": p.payer_page,
        "payer_language": p.payer_language.as_str(),
        "return_url": p.return_url.as_ref().map(|u| u.as_str()),
        "created_at": p.created_at,
    })
}

/// Parses a contract from the operator API's JSON form:
/// `{"currencies": ["RUB"], "methods": [{"method": "sbp", "min_amount": "10", "max_amount": "100000", "fee_percent": "11"}]}`.
pub fn contract_from_json(v: &serde_json::Value) -> Result<Contract, AdminError> {
    let bad = |m: &str| AdminError::invalid(format!("contract: {m}"));
    let dec = |v: &serde_json::Value, field: &str| -> Result<Option<Decimal>, AdminError> {
        match v {
            serde_json::Value::Null => Ok(None),
            serde_json::Value::String(s) => Decimal::from_str(s)
                .map(Some)
                .map_err(|_| bad(&format!("{field} must be a decimal"))),
            serde_json::Value::Number(n) => Decimal::from_str(&n.to_string())
                .map(Some)
                .map_err(|_| bad(&format!("{field} must be a decimal"))),
            _ => Err(bad(&format!("{field} must be a decimal"))),
        }
    };
    let currencies = v["currencies"]
        .as_array()
        .ok_or_else(|| bad("currencies must be an array"))?
        .iter()
        .map(|c| {
            c.as_str()
                .and_then(Currency::parse)
                .ok_or_else(|| bad("currency must be three upper-case letters"))
        })
        .collect::<Result<Vec<_>, _>>()?;
    let methods = v["methods"]
        .as_array()
        .ok_or_else(|| bad("methods must be an array"))?
        .iter()
        .map(|m| {
            let method: PaymentMethod = m["method"]
                .as_str()
                .and_then(|s| s.parse().ok())
                .ok_or_else(|| bad("method must be sbp or card_transfer"))?;
            let fee = dec(&m["fee_percent"], "fee_percent")?.unwrap_or(Decimal::ZERO);
            Ok(MethodTerms {
                method,
                min_amount: dec(&m["min_amount"], "min_amount")?,
                max_amount: dec(&m["max_amount"], "max_amount")?,
                fee_percent: FeePercent::new(fee).map_err(|e| bad(&e.to_string()))?,
            })
        })
        .collect::<Result<Vec<_>, AdminError>>()?;
    Ok(Contract {
        currencies,
        methods,
    })
}

#[cfg(test)]
mod tests {
    use payments_core::project::TokenRecord;
    use payments_core::Timestamp;

    use super::NewToken;

    #[test]
    fn an_issued_token_does_not_print_its_secret() {
        let at = Timestamp::from_unix_secs(1_700_000_000);
        let token = NewToken {
            record: TokenRecord {
                id: "00000000-0000-4000-8000-000000000001".parse().unwrap(),
                project_id: "00000000-0000-4000-8000-000000000002".parse().unwrap(),
                hash: [7; 32],
                prefix: "nl_test_abcdef".into(),
                scopes: Vec::new(),
                created_at: at,
                revoked_at: None,
                name: None,
                expires_at: None,
            },
            token: "nl_test_abcdefSECRETREST".into(),
        };
        let debug = format!("{token:?}");
        assert!(!debug.contains("SECRETREST"), "{debug}");
        assert!(
            debug.contains("nl_test_abcdef"),
            "the prefix stays visible: {debug}"
        );
    }
}
