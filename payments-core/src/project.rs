//! Merchants, projects and their settings, contracts and credentials as the core sees them.

use std::fmt;
use std::str::FromStr;
use std::time::Duration;

use rust_decimal::Decimal;

use crate::amount::Amount;
use crate::auth::Scope;
use crate::callback::destination::CallbackUrl;
use crate::clock::Timestamp;
use crate::ids::{KeyId, MerchantId, ProjectId, TokenId};
use crate::payment::{Currency, PaymentMethod};
use crate::secret::SecretString;
use crate::settlement::FeePercent;

/// The default payment lifetime: 15 minutes from creation.
pub const DEFAULT_LIFETIME: Duration = Duration::from_secs(15 * 60);

/// A merchant: owns projects; may be paused; may have a common callback URL.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Merchant {
    /// Merchant id.
    pub id: MerchantId,
    /// Display name.
    pub name: String,
    /// A paused merchant's payments are `422 payment_not_routable`.
    pub paused: bool,
    /// The merchant's common callback URL (third in precedence).
    pub callback_url: Option<CallbackUrl>,
    /// Creation time.
    pub created_at: Timestamp,
}

/// Per-method terms of a contract.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MethodTerms {
    /// The method.
    pub method: PaymentMethod,
    /// Smallest accepted amount, inclusive.
    pub min_amount: Option<Decimal>,
    /// Largest accepted amount, inclusive.
    pub max_amount: Option<Decimal>,
    /// Project fee for this method.
    pub fee_percent: FeePercent,
}

/// What a project may accept: methods with limits and fee, and currencies.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Contract {
    /// Accepted currencies.
    pub currencies: Vec<Currency>,
    /// Accepted methods and their terms.
    pub methods: Vec<MethodTerms>,
}

/// What of a payment its project's contract does not cover: `422 payment_not_covered`, the
/// error's text as the message.
#[non_exhaustive]
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum NotCovered {
    /// The method is not in the contract.
    #[error("payment_method {0} is not in the project's contract")]
    Method(PaymentMethod),
    /// The currency is not in the contract.
    #[error("currency {0} is not in the project's contract")]
    Currency(Currency),
    /// Below the method's minimum.
    #[error("amount {amount} is below the contract's minimum {min} for {method}")]
    BelowMinimum {
        /// The payment's amount.
        amount: Decimal,
        /// The minimum.
        min: Decimal,
        /// The method.
        method: PaymentMethod,
    },
    /// Above the method's maximum.
    #[error("amount {amount} is above the contract's maximum {max} for {method}")]
    AboveMaximum {
        /// The payment's amount.
        amount: Decimal,
        /// The maximum.
        max: Decimal,
        /// The method.
        method: PaymentMethod,
    },
}

impl Contract {
    /// Checks a payment against the contract; the fee percent of its method on success, else
    /// `422 payment_not_covered` naming what is outside.
    pub fn cover(
        &self,
        method: PaymentMethod,
        currency: Currency,
        amount: &Amount,
    ) -> Result<FeePercent, NotCovered> {
        let terms = self
            .methods
            .iter()
            .find(|t| t.method == method)
            .ok_or(NotCovered::Method(method))?;
        if !self.currencies.contains(&currency) {
            return Err(NotCovered::Currency(currency));
        }
        let a = amount.as_decimal();
        if let Some(min) = terms.min_amount {
            if a < min {
                return Err(NotCovered::BelowMinimum {
                    amount: a,
                    min,
                    method,
                });
            }
        }
        if let Some(max) = terms.max_amount {
            if a > max {
                return Err(NotCovered::AboveMaximum {
                    amount: a,
                    max,
                    method,
                });
            }
        }
        Ok(terms.fee_percent)
    }
}

/// A per-project request rate limit (token bucket).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RateLimit {
    /// Sustained requests per second.
    pub per_second: u32,
    /// Bucket size.
    pub burst: u32,
}

impl Default for RateLimit {
    /// 50 requests/s, burst 100 (decisions.md).
    fn default() -> Self {
        RateLimit {
            per_second: 50,
            burst: 100,
        }
    }
}

/// A merchant's project: a shop with its own credentials, settings and contract.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Project {
    /// Project id.
    pub id: ProjectId,
    /// The owning merchant.
    pub merchant_id: MerchantId,
    /// Display name.
    pub name: String,
    /// An inactive project's tokens are `401 token_invalid`.
    pub active: bool,
    /// A paused project authenticates but its new payments are `422 payment_not_routable`.
    pub paused: bool,
    /// Test mode (sandbox only): payments get `is_test: true`, `flow: project_test`.
    pub test_mode: bool,
    /// Payment lifetime.
    pub lifetime: Duration,
    /// What the project may accept.
    pub contract: Contract,
    /// The project callback URL (second in precedence).
    pub callback_url: Option<CallbackUrl>,
    /// IP allow-list rules (addresses or CIDR networks); empty means no check.
    pub ip_allow_list: Vec<String>,
    /// Whether GET endpoints require a signature.
    pub signature_required: bool,
    /// Request rate limit.
    pub rate_limit: RateLimit,
    /// Whether its payments have a hosted payer page (and `payment_page_url`).
    pub payer_page: bool,
    /// The payer page's language.
    pub payer_language: PageLanguage,
    /// Where the payer page's "Back to the shop" link leads; none by default.
    pub return_url: Option<ReturnUrl>,
    /// Creation time.
    pub created_at: Timestamp,
}

/// An issued project token, as stored: only its hash and display prefix.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TokenRecord {
    /// Token id.
    pub id: TokenId,
    /// The project it belongs to.
    pub project_id: ProjectId,
    /// SHA-256 of the whole token.
    pub hash: [u8; 32],
    /// The leading part shown for identification (`nl_test_` + 6 characters).
    pub prefix: String,
    /// Granted scopes.
    pub scopes: Vec<Scope>,
    /// Issue time.
    pub created_at: Timestamp,
    /// Revocation time; a revoked token fails at once.
    pub revoked_at: Option<Timestamp>,
    /// What the merchant calls it (`shop backend`); `None` for a token issued without one.
    pub name: Option<String>,
    /// When it stops working, if it was issued with a lifetime: from that moment it is
    /// refused as a revoked one is.
    pub expires_at: Option<Timestamp>,
}

impl TokenRecord {
    /// Whether the token has expired at `now` (its expiry is the first moment it is refused).
    pub fn expired_at(&self, now: Timestamp) -> bool {
        self.expires_at.is_some_and(|at| now >= at)
    }

    /// Whether a request made at `now` may use the token: neither revoked nor expired.
    pub fn usable_at(&self, now: Timestamp) -> bool {
        self.revoked_at.is_none() && !self.expired_at(now)
    }
}

/// An operator token, as stored: its name, hash and display prefix, never the token.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct OperatorTokenRecord {
    /// Token id.
    pub id: TokenId,
    /// Who or what holds it (`alice`, `prometheus`, `cabinet`): the audit names it.
    pub name: String,
    /// SHA-256 of the whole token.
    pub hash: [u8; 32],
    /// The leading part shown for identification (`op_` + 6 characters).
    pub prefix: String,
    /// Issue time.
    pub created_at: Timestamp,
    /// From this time on the token is refused: set by a revocation (now) or a rotation (the
    /// end of the overlap), or at issue for a token with a limited life; `None`: no end.
    pub expires_at: Option<Timestamp>,
}

impl OperatorTokenRecord {
    /// Whether the token is accepted at `now`.
    pub fn is_valid_at(&self, now: Timestamp) -> bool {
        self.expires_at.is_none_or(|end| now < end)
    }
}

/// A registered Ed25519 public key.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct KeyRecord {
    /// `ed25519-` + RFC 7638 thumbprint.
    pub keyid: KeyId,
    /// The project it belongs to.
    pub project_id: ProjectId,
    /// The raw 32-byte public key.
    pub public_key: [u8; 32],
    /// Registration time.
    pub created_at: Timestamp,
    /// Revocation time; a revoked key stops verifying at once.
    pub revoked_at: Option<Timestamp>,
}

/// A stored callback secret.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SecretRecord {
    /// The whole secret string (`whsec_...`).
    pub secret: SecretString,
    /// When it was issued (or auto-created).
    pub created_at: Timestamp,
    /// `false` for a secret the service created at first delivery and revealed to nobody.
    pub revealed: bool,
}

/// An operator action, for the audit trail.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AuditRecord {
    /// When.
    pub at: Timestamp,
    /// Who (operator name or `system`).
    pub actor: String,
    /// What (e.g. `payment.confirm`, `token.revoke`).
    pub action: String,
    /// The object acted on (an id).
    pub target: String,
    /// State before, as JSON text.
    pub before: Option<String>,
    /// State after, as JSON text.
    pub after: Option<String>,
}
/// The payer page's language, a project setting.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub enum PageLanguage {
    /// Russian (the default: the service's default geography is RU).
    #[default]
    Ru,
    /// English.
    En,
}

impl PageLanguage {
    /// Every language, in a stable order.
    pub const ALL: [PageLanguage; 2] = [PageLanguage::Ru, PageLanguage::En];

    /// The BCP 47 tag (`ru`, `en`): the setting's value and the page's `lang`.
    pub const fn as_str(self) -> &'static str {
        match self {
            PageLanguage::Ru => "ru",
            PageLanguage::En => "en",
        }
    }
}

impl FromStr for PageLanguage {
    type Err = UnknownLanguage;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        match s {
            "ru" => Ok(PageLanguage::Ru),
            "en" => Ok(PageLanguage::En),
            other => Err(UnknownLanguage(other.to_string())),
        }
    }
}

/// A `payer_language` that is not one of the page's languages (`400 bad_request`).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("payer_language: {0:?} is not one of \"ru\", \"en\"")]
pub struct UnknownLanguage(String);

impl fmt::Display for PageLanguage {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// The most characters a project's return URL may have.
pub const RETURN_URL_MAX: usize = 2000;

/// A project's return URL: where the payer page's "Back to the shop" link leads. An absolute
/// `https` URL with a host and no user name or password in it, at most [`RETURN_URL_MAX`]
/// characters ([`ReturnUrl::parse`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ReturnUrl(String);

impl ReturnUrl {
    /// Reads a return URL (trimmed), or says what is wrong with it.
    ///
    /// ```
    /// use payments_core::payer::ReturnUrl;
    ///
    /// assert!(ReturnUrl::parse("https://shop.example/orders").is_ok());
    /// assert!(ReturnUrl::parse("http://shop.example/").is_err());
    /// assert!(ReturnUrl::parse("javascript:alert(1)").is_err());
    /// ```
    pub fn parse(text: &str) -> Result<ReturnUrl, ReturnUrlError> {
        let text = text.trim();
        if text.chars().count() > RETURN_URL_MAX {
            return Err(ReturnUrlError::TooLong);
        }
        let url = url::Url::parse(text).map_err(ReturnUrlError::NotAbsolute)?;
        if url.scheme() != "https" {
            return Err(ReturnUrlError::NotHttps);
        }
        if url.host_str().is_none_or(str::is_empty) {
            return Err(ReturnUrlError::NoHost);
        }
        if !url.username().is_empty() || url.password().is_some() {
            return Err(ReturnUrlError::Credentials);
        }
        Ok(ReturnUrl(url.to_string()))
    }

    /// The URL's text.
    pub fn as_str(&self) -> &str {
        &self.0
    }
}

impl fmt::Display for ReturnUrl {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

/// Why a text is not a [`ReturnUrl`].
#[non_exhaustive]
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ReturnUrlError {
    /// Longer than [`RETURN_URL_MAX`].
    #[error("at most {RETURN_URL_MAX} characters")]
    TooLong,
    /// Not an absolute URL.
    #[error("not an absolute URL ({0}): write it as https://shop.example/")]
    NotAbsolute(#[source] url::ParseError),
    /// Another scheme than `https`.
    #[error("must start with https:// (the payer leaves a secure page)")]
    NotHttps,
    /// No host.
    #[error("must name a host (https://shop.example/)")]
    NoHost,
    /// A user name or password in it.
    #[error("must not hold a user name or password")]
    Credentials,
}

impl Contract {
    /// The contract a new project gets unless told otherwise: both methods, RUB, amounts
    /// 10 to 1,000,000, fee 11 %.
    pub fn standard() -> Contract {
        let terms = |method| MethodTerms {
            method,
            min_amount: Some(Decimal::from(10)),
            max_amount: Some(Decimal::from(1_000_000)),
            fee_percent: FeePercent::new(Decimal::from(11)).expect("11 is a valid fee percent"),
        };
        Contract {
            currencies: vec![Currency::RUB],
            methods: PaymentMethod::ALL.into_iter().map(terms).collect(),
        }
    }
}
