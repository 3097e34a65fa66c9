//! The requisite-provider and rate-source ports.

use async_trait::async_trait;
use rust_decimal::Decimal;

use crate::amount::Amount;
use crate::bank::CountryCode;
use crate::ids::PaymentId;
use crate::payment::{Currency, PaymentMethod};

/// What the provider is asked for.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RequisiteRequest {
    /// The payment (providers must never reuse a requisite across payments).
    pub payment_id: PaymentId,
    /// Amount to pay.
    pub amount: Amount,
    /// Currency.
    pub currency: Currency,
    /// Method: a phone number for `sbp`, a card number for `card_transfer`.
    pub payment_method: PaymentMethod,
    /// Country of the payer.
    pub geo_code: CountryCode,
    /// The payer's bank (catalog name), if chosen.
    pub bank_code: Option<String>,
    /// Recipient account in the payer's bank.
    pub is_intrabank: bool,
    /// Whether this is a project test payment.
    pub is_test: bool,
}

/// Requisites as a provider issues them.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct IssuedRequisites {
    /// Phone number or card number (digits only).
    pub requisite: String,
    /// Recipient name.
    pub holder_name: String,
    /// The recipient's bank as the provider names it.
    pub bank_name: Option<String>,
    /// QR code link, if any.
    pub qrcode_link: Option<String>,
    /// Open-bank-app link, if any.
    pub deeplink_url: Option<String>,
}

/// A provider's answer.
#[non_exhaustive]
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ProviderOutcome {
    /// Requisites issued.
    Issued(IssuedRequisites),
    /// No requisites for this payment: the payment goes to `error` (`provider_no_requisites`).
    NoRequisites(String),
    /// The payment cannot be accepted with this method now: `422 payment_not_routable`.
    NotRoutable(String),
    /// The result is unknown: the payment goes to `error` (`provider_result_ambiguous`).
    Ambiguous(String),
}

/// Issues transfer requisites. Called at most once per payment, within a 15 s budget.
#[async_trait]
pub trait RequisiteProvider: Send + Sync {
    /// Asks for requisites.
    async fn issue(&self, request: &RequisiteRequest) -> ProviderOutcome;
}

/// Exchange rates: units of a currency per 1 USDT.
#[async_trait]
pub trait RateSource: Send + Sync {
    /// The course for `currency`, or `None` when there is no rate.
    async fn course(&self, currency: Currency) -> Option<Decimal>;
}
