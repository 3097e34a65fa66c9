//! The requisite-provider and rate-source ports: what an embedder implements to connect the
//! service to its upstream (a bank, a processor, a rate API). The service calls them within
//! time budgets ([`ServiceConfig::provider_budget`], 15 s; [`ServiceConfig::rate_budget`],
//! 3 s), so a slow upstream costs a create at most that long.
//!
//! [`ServiceConfig::provider_budget`]: crate::service::ServiceConfig::provider_budget
//! [`ServiceConfig::rate_budget`]: crate::service::ServiceConfig::rate_budget

use async_trait::async_trait;
use rust_decimal::Decimal;

use crate::amount::Amount;
use crate::bank::CountryCode;
use crate::ids::PaymentId;
pub use crate::ids::{ProviderName, ProviderNameError};
use crate::payment::{Currency, PaymentMethod};

/// The providers to ask for one payment, in order, and why
/// ([`RequisiteProvider::plan`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Plan {
    /// The providers, first asked first.
    pub providers: Vec<ProviderName>,
    /// Why this order, and why the others were left out (for operators).
    pub reason: String,
}

/// What the service does after a provider's answer.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Failover {
    /// The answer decides the payment.
    Decide,
    /// A definite refusal: the next provider of the plan may be asked, if any and in time.
    Next,
}

impl Failover {
    /// The rule: issued, or an answer that may have issued (ambiguous), decides; a definite
    /// refusal (no requisites, not routable, not reached) lets the next provider be asked.
    /// Never another provider after an ambiguous answer: the payment's recovery asks that
    /// same provider again.
    pub fn after(outcome: &ProviderOutcome) -> Failover {
        match outcome {
            ProviderOutcome::NoRequisites(_)
            | ProviderOutcome::NotRoutable(_)
            | ProviderOutcome::Unavailable(_) => Failover::Next,
            _ => Failover::Decide,
        }
    }
}

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

/// Requisites as a provider issues them: [`IssuedRequisites::new`] with the requisite and the
/// holder, and the `with_*` methods for what else the provider gives (a field added later gets
/// a `with_*` method, so a provider's code keeps compiling).
///
/// ```
/// use payments_core::provider::IssuedRequisites;
/// let issued = IssuedRequisites::new("79001234567", "IVAN I.").with_bank_name("Сбербанк");
/// assert_eq!((issued.bank_name.as_deref(), issued.qrcode_link), (Some("Сбербанк"), None));
/// ```
///
/// ```compile_fail,E0639
/// // Outside this crate a struct literal is refused: a later field must not break it.
/// let _ = payments_core::provider::IssuedRequisites {
///     requisite: "79001234567".into(),
///     holder_name: "IVAN I.".into(),
///     bank_name: None,
///     qrcode_link: None,
///     deeplink_url: None,
/// };
/// ```
#[non_exhaustive]
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

impl IssuedRequisites {
    /// A phone or card number (`requisite`, digits only) and its holder's name, nothing else.
    pub fn new(requisite: impl Into<String>, holder_name: impl Into<String>) -> IssuedRequisites {
        IssuedRequisites {
            requisite: requisite.into(),
            holder_name: holder_name.into(),
            bank_name: None,
            qrcode_link: None,
            deeplink_url: None,
        }
    }

    /// The recipient's bank as the provider names it.
    pub fn with_bank_name(mut self, bank_name: impl Into<String>) -> IssuedRequisites {
        self.bank_name = Some(bank_name.into());
        self
    }

    /// A QR code link.
    pub fn with_qrcode_link(mut self, link: impl Into<String>) -> IssuedRequisites {
        self.qrcode_link = Some(link.into());
        self
    }

    /// A link that opens the payer's bank app.
    pub fn with_deeplink_url(mut self, url: impl Into<String>) -> IssuedRequisites {
        self.deeplink_url = Some(url.into());
        self
    }
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
    /// The provider was not reached, or refused the request before accepting it (no
    /// connection, a `4xx`): nothing was issued. With several providers the next one may be
    /// asked ([`Failover`]); the last one's is taken as
    /// [`ProviderOutcome::Ambiguous`] (the payment goes to `error`,
    /// `provider_result_ambiguous`, as before this variant existed).
    Unavailable(String),
}

impl ProviderOutcome {
    /// The outcome's name, for logs and metrics: `issued`, `no_requisites`, `not_routable`,
    /// `ambiguous` or `unavailable`.
    pub fn as_str(&self) -> &'static str {
        match self {
            ProviderOutcome::Issued(_) => "issued",
            ProviderOutcome::NoRequisites(_) => "no_requisites",
            ProviderOutcome::NotRoutable(_) => "not_routable",
            ProviderOutcome::Ambiguous(_) => "ambiguous",
            ProviderOutcome::Unavailable(_) => "unavailable",
        }
    }
}

/// Issues transfer requisites. Called at most once per payment, within a 15 s budget; no
/// answer in time makes the payment `error` with `provider_result_ambiguous`.
///
/// The answer decides the payment: [`ProviderOutcome::Issued`] makes it `processing` with the
/// requisite, [`ProviderOutcome::NoRequisites`] and [`ProviderOutcome::Ambiguous`] make it
/// `error`, [`ProviderOutcome::NotRoutable`] makes it `error` and answers the create with
/// `422 payment_not_routable`. A provider must never issue one requisite to two payments.
///
/// ```
/// use async_trait::async_trait;
/// use payments_core::payment::PaymentMethod;
/// use payments_core::provider::{
///     IssuedRequisites, ProviderOutcome, RequisiteProvider, RequisiteRequest,
/// };
///
/// /// Phone numbers for `sbp` from the embedder's own pool; no cards.
/// struct PhonePool;
///
/// #[async_trait]
/// impl RequisiteProvider for PhonePool {
///     async fn issue(&self, request: &RequisiteRequest) -> ProviderOutcome {
///         if request.payment_method != PaymentMethod::Sbp {
///             return ProviderOutcome::NotRoutable("cards are not offered".into());
///         }
///         // A real provider asks its upstream here, keyed by request.payment_id.
///         ProviderOutcome::Issued(
///             IssuedRequisites::new("79001234567", "IVAN I.").with_bank_name("Сбербанк"),
///         )
///     }
/// }
/// # let _ = PhonePool;
/// ```
#[async_trait]
pub trait RequisiteProvider: Send + Sync {
    /// Asks for requisites.
    async fn issue(&self, request: &RequisiteRequest) -> ProviderOutcome;

    /// Whether [`issue`](Self::issue) answers from this process's own state: it asks no
    /// upstream and leaves nothing anywhere that needs the payment to exist (the sandbox
    /// provider, which numbers its requisites from a local sequence). Default `false`.
    ///
    /// It decides how many store writes a create costs:
    /// - `false`: the payment is stored in status `created` first, then the provider is asked,
    ///   then the answer is stored (two writes). The payment is durable before anything
    ///   outside the process hears of it, and a crash during the call leaves a `created`
    ///   payment that the sweeper turns into `error` (`provider_result_ambiguous`) after 60 s.
    /// - `true`: the provider is asked before the payment is stored, and a payment that gets
    ///   requisites is stored with them in one write (an answer that refuses requisites is
    ///   stored as before: the payment, then its `error`). The provider may then be asked for
    ///   a payment that is never stored (a replayed request, a repeat of an accepted
    ///   `merchant_payment_id`, a failed store write), so its answer must cost nothing when it
    ///   is thrown away; a requisite issued that way is simply never used. A pool that hands
    ///   out a limited resource does not qualify: what it gave to a payment never stored would
    ///   be lost.
    fn issues_locally(&self) -> bool {
        false
    }

    /// The providers to ask for `request`, in order, and why (a router, such as the one of
    /// `payments-providers`, routes across several). Default: this provider alone, named
    /// [`ProviderName::DEFAULT`].
    fn plan(&self, request: &RequisiteRequest) -> Plan {
        let _ = request;
        Plan {
            providers: vec![
                ProviderName::parse(ProviderName::DEFAULT).expect("the default name is valid")
            ],
            reason: "one provider".into(),
        }
    }

    /// Asks the provider `name` of this provider's [`plan`](Self::plan)s. Default:
    /// [`issue`](Self::issue) (a provider that does not route is its only provider).
    async fn issue_with(&self, name: &ProviderName, request: &RequisiteRequest) -> ProviderOutcome {
        let _ = name;
        self.issue(request).await
    }

    /// Sends an appeal with its evidence to the provider `name`, the one on record for the
    /// payment ([`crate::appeal`]). The provider answers later, by a signed notification
    /// (`found` with the amount that arrived, or not found). Default: the provider takes no
    /// appeals ([`AppealSubmission::NotSupported`]), and support decides.
    async fn submit_appeal(
        &self,
        name: &ProviderName,
        inquiry: &AppealInquiry,
    ) -> AppealSubmission {
        let _ = (name, inquiry);
        AppealSubmission::NotSupported
    }
}

/// An appeal as the provider on record is asked about it: what the payer says, the payment's
/// requisites and the receipts.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AppealInquiry {
    /// The appeal (the provider's answer names it).
    pub appeal_id: crate::ids::AppealId,
    /// The payment.
    pub payment_id: PaymentId,
    /// The payment's amount and currency.
    pub amount: Amount,
    /// The payment's currency.
    pub currency: Currency,
    /// The requisite the payer was given (phone or card number).
    pub requisite: String,
    /// Why the payer appeals.
    pub reason: crate::appeal::AppealReason,
    /// The amount the payer says was sent.
    pub claimed_amount: Option<Amount>,
    /// When the payer says they paid.
    pub paid_at: Option<crate::clock::Timestamp>,
    /// The bank the payer paid from.
    pub payer_bank: Option<String>,
    /// The receipts, in the order sent.
    pub receipts: Vec<crate::receipt::Receipt>,
}

/// What a provider said to an appeal sent to it.
#[non_exhaustive]
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum AppealSubmission {
    /// Taken: its answer comes as a notification. The appeal is `under_review`.
    Taken,
    /// The provider takes no appeals: support decides.
    NotSupported,
    /// Not reached, or refused: the appeal stays `open` and is sent again later.
    Failed(String),
}

/// Exchange rates: units of a currency per 1 USDT. Asked once per create, within a 3 s budget;
/// `None` (or no answer in time) is `422 payment_rate_unavailable` and takes nothing.
///
/// ```
/// use async_trait::async_trait;
/// use payments_core::payment::Currency;
/// use payments_core::provider::RateSource;
/// use rust_decimal::Decimal;
///
/// /// RUB at a fixed 95.50 per USDT; nothing else.
/// struct Fixed;
///
/// #[async_trait]
/// impl RateSource for Fixed {
///     async fn course(&self, currency: Currency) -> Option<Decimal> {
///         (currency == Currency::RUB).then(|| Decimal::new(9550, 2))
///     }
/// }
///
/// let rub = futures_executor::block_on(Fixed.course(Currency::RUB));
/// assert_eq!(rub, Some(Decimal::new(9550, 2)));
/// let usd = Currency::parse("USD").unwrap();
/// assert_eq!(futures_executor::block_on(Fixed.course(usd)), None);
/// ```
#[async_trait]
pub trait RateSource: Send + Sync {
    /// The course for `currency`, or `None` when there is no rate.
    async fn course(&self, currency: Currency) -> Option<Decimal>;

    /// Whether it holds any rate that may be used now. A node without one answers every create
    /// `422 payment_rate_unavailable`, so its `/readyz` says it is not ready. The default:
    /// always (a fixed table).
    fn has_rates(&self) -> bool {
        true
    }
}
