//! The Payment resource: its fields, statuses and the JSON the API writes.

use std::fmt;
use std::str::FromStr;

use serde::ser::SerializeMap;
use serde::{Serialize, Serializer};

use crate::amount::{Amount, DecimalFormat};
use crate::bank::CountryCode;
use crate::callback::destination::CallbackUrl;
use crate::clock::Timestamp;
use crate::ids::{PaymentId, ProjectId};
use crate::settlement::{Pricing, Settlement};

/// A payment's status.
#[non_exhaustive]
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum PaymentStatus {
    /// Accepted; requisites not issued yet.
    Created,
    /// Requisites issued; waiting for the transfer.
    Processing,
    /// The transfer was confirmed.
    Completed,
    /// Canceled: lifetime ran out, canceled, or not confirmed.
    Canceled,
    /// No requisites were issued (`error_code` says why).
    Error,
    /// A closed payment under re-check.
    Appeal,
}

impl PaymentStatus {
    /// Every status.
    pub const ALL: [PaymentStatus; 6] = [
        PaymentStatus::Created,
        PaymentStatus::Processing,
        PaymentStatus::Completed,
        PaymentStatus::Canceled,
        PaymentStatus::Error,
        PaymentStatus::Appeal,
    ];

    /// The wire name.
    pub const fn as_str(self) -> &'static str {
        match self {
            PaymentStatus::Created => "created",
            PaymentStatus::Processing => "processing",
            PaymentStatus::Completed => "completed",
            PaymentStatus::Canceled => "canceled",
            PaymentStatus::Error => "error",
            PaymentStatus::Appeal => "appeal",
        }
    }

    /// `completed`, `canceled` or `error`: final except for a re-check or support decision.
    pub const fn is_closed(self) -> bool {
        matches!(
            self,
            PaymentStatus::Completed | PaymentStatus::Canceled | PaymentStatus::Error
        )
    }
}

impl FromStr for PaymentStatus {
    type Err = UnknownValue;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        PaymentStatus::ALL
            .into_iter()
            .find(|st| st.as_str() == s)
            .ok_or_else(|| UnknownValue(s.to_string()))
    }
}

impl fmt::Display for PaymentStatus {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// A string that is not one of an enumeration's wire names.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("unknown value {0:?}")]
pub struct UnknownValue(pub String);

/// Whether a payment is a regular one or a project test payment.
#[non_exhaustive]
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Flow {
    /// A regular payment.
    RuntimeLive,
    /// A payment of a project in test mode (sandbox).
    ProjectTest,
}

impl Flow {
    /// The wire name.
    pub const fn as_str(self) -> &'static str {
        match self {
            Flow::RuntimeLive => "runtime_live",
            Flow::ProjectTest => "project_test",
        }
    }
}

impl FromStr for Flow {
    type Err = UnknownValue;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        match s {
            "runtime_live" => Ok(Flow::RuntimeLive),
            "project_test" => Ok(Flow::ProjectTest),
            _ => Err(UnknownValue(s.to_string())),
        }
    }
}

/// How the payer transfers the money.
#[non_exhaustive]
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum PaymentMethod {
    /// Transfer by phone number (the requisite is a phone number).
    Sbp,
    /// Transfer by card number (the requisite is a card number).
    CardTransfer,
}

impl PaymentMethod {
    /// Every method.
    pub const ALL: [PaymentMethod; 2] = [PaymentMethod::Sbp, PaymentMethod::CardTransfer];

    /// The wire name.
    pub const fn as_str(self) -> &'static str {
        match self {
            PaymentMethod::Sbp => "sbp",
            PaymentMethod::CardTransfer => "card_transfer",
        }
    }
}

impl FromStr for PaymentMethod {
    type Err = UnknownValue;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        match s {
            "sbp" => Ok(PaymentMethod::Sbp),
            "card_transfer" => Ok(PaymentMethod::CardTransfer),
            _ => Err(UnknownValue(s.to_string())),
        }
    }
}

impl fmt::Display for PaymentMethod {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// A currency code: three upper-case ASCII letters (ISO 4217 form).
///
/// `Debug` shows the letters: `Currency(RUB)`.
#[derive(Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Currency([u8; 3]);

impl Currency {
    /// The default currency.
    pub const RUB: Currency = Currency(*b"RUB");

    /// Parses exactly three upper-case ASCII letters.
    pub fn parse(s: &str) -> Option<Currency> {
        match s.as_bytes() {
            [a, b, c] if [a, b, c].iter().all(|x| x.is_ascii_uppercase()) => {
                Some(Currency([*a, *b, *c]))
            }
            _ => None,
        }
    }

    /// The code.
    pub fn as_str(&self) -> &str {
        std::str::from_utf8(&self.0).expect("constructed only from ASCII letters")
    }
}

impl fmt::Debug for Currency {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "Currency({})", self.as_str())
    }
}

impl fmt::Display for Currency {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

impl Serialize for Currency {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(self.as_str())
    }
}

/// The merchant's order id: 1-64 characters from `A-Za-z0-9._:-`; the idempotency key.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct MerchantPaymentId(String);

impl MerchantPaymentId {
    /// Longest accepted id.
    pub const MAX_LEN: usize = 64;

    /// Parses an id; `None` if empty, longer than 64 or with another character.
    pub fn parse(s: &str) -> Option<MerchantPaymentId> {
        let ok = !s.is_empty()
            && s.len() <= Self::MAX_LEN
            && s.bytes()
                .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'.' | b'_' | b':' | b'-'));
        ok.then(|| MerchantPaymentId(s.to_string()))
    }

    /// The id.
    pub fn as_str(&self) -> &str {
        &self.0
    }

    /// The id's search key: its letters in lower case ([`merchant_payment_id_key`]).
    pub fn key(&self) -> String {
        merchant_payment_id_key(&self.0)
    }
}

/// What a merchant payment id, or the start of one, is found by whatever the case of its
/// letters (`ORD-1001` and `ord-1001` both `ord-1001`): its ASCII letters in lower case (an id
/// holds no other letters). Stores keep it beside the id and index it.
pub fn merchant_payment_id_key(text: &str) -> String {
    text.to_ascii_lowercase()
}

impl fmt::Display for MerchantPaymentId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

/// Why a payment ended in `error`.
#[non_exhaustive]
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum PaymentErrorCode {
    /// The provider has no requisites for this payment.
    ProviderNoRequisites,
    /// The provider's answer is unknown (timeout, crash during the call).
    ProviderResultAmbiguous,
}

impl PaymentErrorCode {
    /// The wire name.
    pub const fn as_str(self) -> &'static str {
        match self {
            PaymentErrorCode::ProviderNoRequisites => "provider_no_requisites",
            PaymentErrorCode::ProviderResultAmbiguous => "provider_result_ambiguous",
        }
    }
}

impl FromStr for PaymentErrorCode {
    type Err = UnknownValue;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        match s {
            "provider_no_requisites" => Ok(PaymentErrorCode::ProviderNoRequisites),
            "provider_result_ambiguous" => Ok(PaymentErrorCode::ProviderResultAmbiguous),
            _ => Err(UnknownValue(s.to_string())),
        }
    }
}

/// The `error_code` and `error_comment` of a payment in `error`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PaymentFailure {
    /// Why no requisites were issued.
    pub code: PaymentErrorCode,
    /// A human-readable explanation.
    pub comment: String,
}

/// Transfer requisites issued for one payment.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Requisites {
    /// Recipient phone number (`sbp`) or card number (`card_transfer`, digits only).
    pub requisite: String,
    /// Recipient name as the payer's bank shows it.
    pub holder_name: String,
    /// The requisite's bank: a catalog name if recognised, else the provider's name.
    pub bank: Option<String>,
    /// QR code link, when the requisites have one.
    pub qrcode_link: Option<String>,
    /// Open-bank-app link, when the requisites have one.
    pub deeplink_url: Option<String>,
}

impl Requisites {
    /// The last four digits of the requisite (a card number's or a phone's), what a receipt
    /// prints and what the cabinet's search and the list API's `requisite_last4` find a
    /// payment by: the requisite's digits only (spaces, `+` and dashes dropped), the last
    /// four of them; `None` when it holds fewer than four digits.
    ///
    /// ```
    /// use payments_core::payment::Requisites;
    ///
    /// let r = |s: &str| Requisites {
    ///     requisite: s.into(),
    ///     holder_name: "IVAN I.".into(),
    ///     bank: None,
    ///     qrcode_link: None,
    ///     deeplink_url: None,
    /// };
    /// assert_eq!(r("2200123456789010").last4().as_deref(), Some("9010"));
    /// assert_eq!(r("+7 (900) 123-45-67").last4().as_deref(), Some("4567"));
    /// assert_eq!(r("12-3").last4(), None);
    /// ```
    pub fn last4(&self) -> Option<String> {
        last4_of(&self.requisite)
    }
}

/// The last four digits of `text`'s digits ([`Requisites::last4`]).
pub fn last4_of(text: &str) -> Option<String> {
    let digits: Vec<char> = text.chars().filter(char::is_ascii_digit).collect();
    (digits.len() >= 4).then(|| digits[digits.len() - 4..].iter().collect())
}

/// The digits of a requisite's number, all of them (`+7 900 555-90-10` is `79005559010`):
/// what a requisite's [keyed digest](crate::sealing::SealingKey::digest) is taken of, so a
/// number is found however it was written.
pub fn requisite_digits(text: &str) -> String {
    text.chars().filter(char::is_ascii_digit).collect()
}

/// A card number as a search asks for it: 13 to 19 digits, kept as digits only. `Debug` shows
/// its last four digits only, so a query that holds one may be logged.
#[derive(Clone, PartialEq, Eq)]
pub struct RequisiteNumber(String);

impl RequisiteNumber {
    /// The card number `text` holds (its digits, ignoring what people write between them),
    /// when it has 13 to 19 digits.
    pub fn of(text: &str) -> Option<RequisiteNumber> {
        let digits = requisite_digits(text);
        (13..=19)
            .contains(&digits.len())
            .then_some(RequisiteNumber(digits))
    }

    /// The digits.
    pub fn digits(&self) -> &str {
        &self.0
    }

    /// The last four digits (what [`Requisites::last4`] stores).
    pub fn last4(&self) -> String {
        self.0[self.0.len() - 4..].to_string()
    }

    /// Whether `requisite` is this number, digit for digit.
    pub fn is(&self, requisite: &str) -> bool {
        requisite_digits(requisite) == self.0
    }
}

impl fmt::Debug for RequisiteNumber {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "RequisiteNumber(…{})", self.last4())
    }
}

/// Whether `s` is what a search by the last four digits of a requisite takes: exactly four
/// ASCII digits.
pub fn is_last4(s: &str) -> bool {
    s.len() == 4 && s.bytes().all(|b| b.is_ascii_digit())
}

/// A payment, as stored and as the state machine sees it.
///
/// Deliberately not `#[non_exhaustive]`: a store rebuilds every stored payment from its row
/// with a struct expression, so a field added here fails to compile in every store that does
/// not keep it yet, instead of being silently dropped by one. Code that only reads payments is
/// not affected by new fields.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Payment {
    /// Payment id.
    pub id: PaymentId,
    /// The project that created it.
    pub project_id: ProjectId,
    /// The merchant's order id.
    pub merchant_payment_id: MerchantPaymentId,
    /// Regular or project test payment.
    pub flow: Flow,
    /// Current status.
    pub status: PaymentStatus,
    /// Amount to pay; may change after a re-check.
    pub amount: Amount,
    /// Amount from the request; never changes.
    pub initial_amount: Amount,
    /// Currency.
    pub currency: Currency,
    /// Country of the payer's bank lookup.
    pub geo_code: CountryCode,
    /// Payment method.
    pub payment_method: PaymentMethod,
    /// Transfer within the payer's bank.
    pub is_intrabank: bool,
    /// Payer's bank (resolved catalog name), or `None` for any bank.
    pub bank_code: Option<String>,
    /// Per-payment callback URL.
    pub callback_url: Option<CallbackUrl>,
    /// Requisites, once issued.
    pub requisites: Option<Requisites>,
    /// Course and fee fixed when requisites were issued.
    pub pricing: Option<Pricing>,
    /// Why no requisites were issued, for a payment that went to `error`.
    pub failure: Option<PaymentFailure>,
    /// While in `appeal`: the status the re-check started from.
    pub appeal_from: Option<PaymentStatus>,
    /// Creation time.
    pub created_at: Timestamp,
    /// Time of the last change.
    pub updated_at: Timestamp,
    /// `created_at` + the project's lifetime: an unpaid payment is canceled then.
    pub expires_at: Timestamp,
    /// Incremented by every change; stores use it for optimistic concurrency.
    pub version: u64,
    /// The normalised create request, compared for idempotency.
    pub fingerprint: String,
    /// The merchant's own keys from the create request (empty without them); never changes.
    pub metadata: Metadata,
    /// The provider the payment was routed to (the one asked last, recorded before it was
    /// asked) and why: for operators and the payment's recovery, never shown to merchants
    /// or payers. `None` for payments from before routing.
    pub route: Option<ProviderRoute>,
}

/// Which provider a payment was routed to, and why ([`crate::provider::Plan`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ProviderRoute {
    /// The provider asked (last).
    pub provider: crate::ids::ProviderName,
    /// The routing decision, for operators.
    pub reason: String,
}

/// The most keys a payment's [`Metadata`] holds.
pub const METADATA_MAX_KEYS: usize = 20;
/// The most characters of a metadata key.
pub const METADATA_MAX_KEY_CHARS: usize = 40;
/// The most characters of a metadata value.
pub const METADATA_MAX_VALUE_CHARS: usize = 500;

/// The merchant's keys on a payment (order, customer, shop...): at most
/// [`METADATA_MAX_KEYS`] keys of 1 to [`METADATA_MAX_KEY_CHARS`] characters from
/// `A-Z a-z 0-9 _ . : -`, each with a string value of at most [`METADATA_MAX_VALUE_CHARS`]
/// characters without control characters nor characters that make it read differently from
/// what it is ([`crate::text::misleading`]: bidirectional controls, zero-width and invisible
/// characters, line separators), since values are shown in the cabinet and in the merchant's
/// own pages. Set on create, part of the idempotency fingerprint, echoed in the Payment
/// resource and in callback bodies, never interpreted. Keys are kept in byte order.
#[derive(Debug, Clone, Default, PartialEq, Eq, Hash, Serialize)]
#[serde(transparent)]
pub struct Metadata(std::collections::BTreeMap<String, String>);

impl Metadata {
    /// Whether `key` is a valid metadata key.
    pub fn is_valid_key(key: &str) -> bool {
        (1..=METADATA_MAX_KEY_CHARS).contains(&key.len())
            && key
                .bytes()
                .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'_' | b'.' | b':' | b'-'))
    }

    /// Whether `value` is a valid metadata value ([`Metadata::check_value`]).
    pub fn is_valid_value(value: &str) -> bool {
        Metadata::check_value(value).is_ok()
    }

    /// Why `value` is not a valid metadata value, if it is not: the same rule for a create and
    /// for the list's `metadata[key]=value` filter.
    pub fn check_value(value: &str) -> Result<(), MetadataValueError> {
        if value.chars().count() > METADATA_MAX_VALUE_CHARS {
            return Err(MetadataValueError::TooLong);
        }
        for c in value.chars() {
            if c.is_control() {
                return Err(MetadataValueError::Control(c));
            }
            if let Some(kind) = crate::text::misleading(c) {
                return Err(MetadataValueError::Misleading { found: c, kind });
            }
        }
        Ok(())
    }

    /// Reads the `metadata` member of a create request: a JSON object of string values (an
    /// empty object is no metadata). The error says what is wrong, naming the key.
    pub fn from_json(value: &serde_json::Value) -> Result<Metadata, MetadataError> {
        Metadata::read(value, true)
    }

    /// [`Metadata::from_json`]; `new` false for a stored value, which is read whatever later
    /// rules refuse (values stored before the rule on misleading characters stay readable).
    fn read(value: &serde_json::Value, new: bool) -> Result<Metadata, MetadataError> {
        let object = value.as_object().ok_or(MetadataError::NotAnObject)?;
        if object.len() > METADATA_MAX_KEYS {
            return Err(MetadataError::TooManyKeys);
        }
        let mut keys = std::collections::BTreeMap::new();
        for (k, v) in object {
            if !Metadata::is_valid_key(k) {
                return Err(MetadataError::Key(k.clone()));
            }
            let v = v
                .as_str()
                .ok_or_else(|| MetadataError::NotAString(k.clone()))?;
            match Metadata::check_value(v) {
                Ok(()) => {}
                Err(MetadataValueError::Misleading { .. }) if !new => {}
                Err(source @ MetadataValueError::Misleading { .. }) => {
                    return Err(MetadataError::Misleading {
                        key: k.clone(),
                        source,
                    })
                }
                Err(_) => return Err(MetadataError::Value(k.clone())),
            }
            keys.insert(k.clone(), v.to_string());
        }
        Ok(Metadata(keys))
    }

    /// Whether there is no key.
    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    /// The value of `key`.
    pub fn get(&self, key: &str) -> Option<&str> {
        self.0.get(key).map(String::as_str)
    }

    /// The keys and values in byte order of the keys.
    pub fn iter(&self) -> impl Iterator<Item = (&str, &str)> {
        self.0.iter().map(|(k, v)| (k.as_str(), v.as_str()))
    }

    /// The stored form: a JSON object in key order, or `None` when empty.
    pub fn to_json_text(&self) -> Option<String> {
        (!self.is_empty())
            .then(|| serde_json::to_string(&self.0).expect("a map of strings serialises"))
    }

    /// Reads the stored form back.
    pub fn from_json_text(text: &str) -> Result<Metadata, MetadataError> {
        let value: serde_json::Value =
            serde_json::from_str(text).map_err(|e| MetadataError::Json(e.to_string()))?;
        Metadata::read(&value, false)
    }
}

/// Why a `metadata` object is refused ([`Metadata::from_json`]); it says what is wrong,
/// naming the key.
#[non_exhaustive]
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum MetadataError {
    /// Not a JSON object.
    #[error("must be an object of string values")]
    NotAnObject,
    /// More than [`METADATA_MAX_KEYS`] keys.
    #[error("at most {METADATA_MAX_KEYS} keys")]
    TooManyKeys,
    /// A key that is not 1 to [`METADATA_MAX_KEY_CHARS`] characters of `A-Z a-z 0-9 _ . : -`.
    #[error("key {0:?}: 1-{METADATA_MAX_KEY_CHARS} characters from A-Za-z0-9._:-")]
    Key(String),
    /// A value that is no string.
    #[error("{0}: the value must be a string")]
    NotAString(String),
    /// A value that is too long or holds a control character.
    #[error("{0}: at most {METADATA_MAX_VALUE_CHARS} characters, no control characters")]
    Value(String),
    /// A value with a character that makes it read differently from what it is.
    #[error("{key}: {source}")]
    Misleading {
        /// The key.
        key: String,
        /// The character and what it is.
        #[source]
        source: MetadataValueError,
    },
    /// The stored form is no JSON (the parser's words).
    #[error("not JSON: {0}")]
    Json(String),
}

/// Why a metadata value is refused ([`Metadata::check_value`]).
#[non_exhaustive]
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum MetadataValueError {
    /// More than [`METADATA_MAX_VALUE_CHARS`] characters.
    #[error("a value is at most {METADATA_MAX_VALUE_CHARS} characters")]
    TooLong,
    /// A control character (NUL, a line break, ESC, DEL, C1...).
    #[error("a value has no control characters (found {})", crate::text::code_point(*.0))]
    Control(char),
    /// A character that makes the value read differently from what it is.
    #[error("{} ({kind}) is not allowed: a value must read as it is, without bidirectional controls, zero-width or invisible characters", crate::text::code_point(*found))]
    Misleading {
        /// The character.
        found: char,
        /// What it is ([`crate::text::misleading`]).
        kind: &'static str,
    },
}

/// How long a payment may stay in `created` before it is taken as a crashed provider call.
pub const STUCK_CREATE_AFTER: std::time::Duration = std::time::Duration::from_secs(60);

/// The longest wait between two recoveries of a payment left in `created` whose provider could
/// not say ([`Payment::due_at`]).
pub const RECOVERY_BACKOFF_MAX: std::time::Duration = std::time::Duration::from_secs(15 * 60);

impl Payment {
    /// `true` for a project test payment.
    pub fn is_test(&self) -> bool {
        self.flow == Flow::ProjectTest
    }

    /// The last four digits of the payment's requisite ([`Requisites::last4`]); `None`
    /// before requisites are issued.
    pub fn requisite_last4(&self) -> Option<String> {
        self.requisites.as_ref().and_then(Requisites::last4)
    }

    /// The settlement at the current amount; `None` until requisites are issued.
    pub fn merchant_information(&self) -> Option<Settlement> {
        self.pricing
            .as_ref()
            .map(|p| Settlement::compute(&self.amount, p))
    }

    /// When the lifecycle sweeper must look at this payment next: the lifetime's end for a
    /// `processing` payment, the next recovery of a `created` one, never otherwise.
    pub fn due_at(&self) -> Option<Timestamp> {
        match self.status {
            PaymentStatus::Processing => Some(self.expires_at),
            PaymentStatus::Created => Some(self.recovery_due()),
            _ => None,
        }
    }

    /// When a payment left in `created` is next asked about: [`STUCK_CREATE_AFTER`] after its
    /// create; after a deferred recovery (its provider could not say, and the payment's
    /// `updated_at` records when) twice the payment's age at that recovery later, at least
    /// [`STUCK_CREATE_AFTER`] and at most [`RECOVERY_BACKOFF_MAX`]: at the ages of 60 s, 3 min,
    /// 9 min, 24 min, then every 15 minutes. Nothing else moves a `created` payment's
    /// `updated_at`.
    fn recovery_due(&self) -> Timestamp {
        if self.updated_at <= self.created_at {
            return self.created_at + STUCK_CREATE_AFTER;
        }
        let age = self.updated_at.duration_since(self.created_at);
        let due = self.updated_at + (age * 2).clamp(STUCK_CREATE_AFTER, RECOVERY_BACKOFF_MAX);
        debug_assert!(due > self.updated_at);
        due
    }

    /// The Payment resource as the API writes it by default (decimals as JSON numbers).
    pub fn view(&self) -> PaymentView<'_> {
        self.view_with(DecimalFormat::Number)
    }

    /// The Payment resource with its decimals (`amount`, `initial_amount`,
    /// `merchant_information.course` and `.rate`) in `format`; every other field as
    /// [`view`](Payment::view) writes it.
    pub fn view_with(&self, format: DecimalFormat) -> PaymentView<'_> {
        PaymentView {
            payment: self,
            format,
            page_url: None,
            masked: false,
        }
    }

    /// The payment as an audit record keeps it (before and after an operator's action):
    /// [`view`](Payment::view) with the requisite reduced to its last four digits
    /// ([`masked_requisite`]), the holder's name to initials ([`masked_holder_name`]) and no QR
    /// or bank-app link (they may carry the number). The requisites are sealed at rest in the
    /// payment's row; an audit record kept for 400 days must not hold them in clear.
    pub fn audit_view(&self) -> PaymentView<'_> {
        PaymentView {
            masked: true,
            ..self.view()
        }
    }
}

/// A requisite as an audit record writes it: `****` and its last four digits (`****` alone
/// when it has fewer than four). Masking a masked value changes nothing.
///
/// ```
/// use payments_core::payment::masked_requisite;
///
/// assert_eq!(masked_requisite("2200000000000012"), "****0012");
/// assert_eq!(masked_requisite("+7 (900) 123-45-67"), "****4567");
/// assert_eq!(masked_requisite("****4567"), "****4567");
/// assert_eq!(masked_requisite("12"), "****");
/// ```
pub fn masked_requisite(requisite: &str) -> String {
    format!("****{}", last4_of(requisite).unwrap_or_default())
}

/// A holder's name as an audit record writes it: the first letter of each word, each with a
/// dot. Masking a masked value changes nothing.
///
/// ```
/// use payments_core::payment::masked_holder_name;
///
/// assert_eq!(masked_holder_name("Ivan Petrov"), "I. P.");
/// assert_eq!(masked_holder_name("IVAN I."), "I. I.");
/// assert_eq!(masked_holder_name("I. I."), "I. I.");
/// ```
pub fn masked_holder_name(name: &str) -> String {
    let initials: Vec<String> = name
        .split_whitespace()
        .filter_map(|w| w.chars().next())
        .map(|c| format!("{c}."))
        .collect();
    initials.join(" ")
}

/// The fields of a payment's JSON that [`Payment::audit_view`] masks or leaves out.
const MASKED_FIELDS: [&str; 4] = ["requisite", "holder_name", "qrcode_link", "deeplink_url"];

/// An audit record's state (`before` or `after`, JSON text) with a payment's requisites masked
/// as [`Payment::audit_view`] masks them, or `None` when it needs no change (no payment in it,
/// or masked already). What `callback-secret reseal` applies to the audit records written by
/// builds that copied the whole payment into them.
///
/// ```
/// use payments_core::payment::mask_audit_state;
///
/// let old = r#"{"id":"p1","requisite":"2200000000000012","holder_name":"Ivan Petrov","qrcode_link":"q"}"#;
/// let new = mask_audit_state(old).unwrap();
/// let read: serde_json::Value = serde_json::from_str(&new).unwrap();
/// assert_eq!(read, serde_json::json!({"id": "p1", "requisite": "****0012", "holder_name": "I. P."}));
/// assert_eq!(mask_audit_state(&new), None, "masked already");
/// assert_eq!(mask_audit_state(r#"{"held":null}"#), None, "no payment in it");
/// assert_eq!(mask_audit_state("not json"), None);
/// ```
pub fn mask_audit_state(text: &str) -> Option<String> {
    let serde_json::Value::Object(mut state) = serde_json::from_str(text).ok()? else {
        return None;
    };
    let mut changed = false;
    for field in MASKED_FIELDS {
        let Some(serde_json::Value::String(value)) = state.get(field) else {
            continue;
        };
        let masked = match field {
            "requisite" => Some(masked_requisite(value)),
            "holder_name" => Some(masked_holder_name(value)),
            _ => None,
        };
        if masked.as_deref() == Some(value.as_str()) {
            continue;
        }
        changed = true;
        match masked {
            Some(m) => state.insert(field.into(), m.into()),
            None => state.remove(field),
        };
    }
    changed.then(|| serde_json::Value::Object(state).to_string())
}

/// The Payment resource's JSON: every always-present field (null when empty), `qrcode_link` and
/// `deeplink_url` only when the requisites have them, `error_code` and `error_comment` only in
/// `error`, `payment_page_url` only when the project has the payer page. Decimals are written from their exact text, as numbers or strings
/// ([`DecimalFormat`]).
#[derive(Debug, Clone, Copy)]
pub struct PaymentView<'a> {
    payment: &'a Payment,
    format: DecimalFormat,
    page_url: Option<&'a str>,
    /// Requisites masked ([`Payment::audit_view`]).
    masked: bool,
}

impl<'a> PaymentView<'a> {
    /// The view with `payment_page_url` (the hosted payer page's link), written when `Some`.
    pub fn with_page_url(self, url: Option<&'a str>) -> Self {
        PaymentView {
            page_url: url,
            ..self
        }
    }
}

impl Serialize for PaymentView<'_> {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        let p = self.payment;
        let f = self.format;
        let req = p.requisites.as_ref();
        let mut m = s.serialize_map(None)?;
        m.serialize_entry("id", &p.id)?;
        m.serialize_entry("merchant_payment_id", p.merchant_payment_id.as_str())?;
        m.serialize_entry("flow", p.flow.as_str())?;
        m.serialize_entry("status", p.status.as_str())?;
        m.serialize_entry("amount", &f.write(&p.amount.as_decimal()))?;
        m.serialize_entry("initial_amount", &f.write(&p.initial_amount.as_decimal()))?;
        m.serialize_entry("currency", &p.currency)?;
        m.serialize_entry("geo_code", p.geo_code.as_str())?;
        m.serialize_entry("payment_method", p.payment_method.as_str())?;
        m.serialize_entry("is_intrabank", &p.is_intrabank)?;
        m.serialize_entry("bank_code", &p.bank_code)?;
        m.serialize_entry("requisite_bank", &req.and_then(|r| r.bank.as_deref()))?;
        m.serialize_entry("callback_url", &p.callback_url.as_ref().map(|u| u.as_str()))?;
        m.serialize_entry("is_test", &p.is_test())?;
        let settlement = p.merchant_information();
        m.serialize_entry(
            "merchant_information",
            &settlement.as_ref().map(|s| s.view(f)),
        )?;
        if self.masked {
            m.serialize_entry("requisite", &req.map(|r| masked_requisite(&r.requisite)))?;
            m.serialize_entry(
                "holder_name",
                &req.map(|r| masked_holder_name(&r.holder_name)),
            )?;
        } else {
            m.serialize_entry("requisite", &req.map(|r| r.requisite.as_str()))?;
            m.serialize_entry("holder_name", &req.map(|r| r.holder_name.as_str()))?;
            if let Some(link) = req.and_then(|r| r.qrcode_link.as_deref()) {
                m.serialize_entry("qrcode_link", link)?;
            }
            if let Some(link) = req.and_then(|r| r.deeplink_url.as_deref()) {
                m.serialize_entry("deeplink_url", link)?;
            }
        }
        if p.status == PaymentStatus::Error {
            if let Some(f) = &p.failure {
                m.serialize_entry("error_code", f.code.as_str())?;
                m.serialize_entry("error_comment", &f.comment)?;
            }
        }
        if let Some(url) = self.page_url {
            m.serialize_entry("payment_page_url", url)?;
        }
        if !p.metadata.is_empty() {
            m.serialize_entry("metadata", &p.metadata)?;
        }
        m.serialize_entry("created_at", &p.created_at)?;
        m.serialize_entry("updated_at", &p.updated_at)?;
        m.serialize_entry("expires_at", &p.expires_at)?;
        m.end()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A value that reads differently from what it is (a bidirectional override, a zero-width
    /// space) is refused on create, naming the key and the character; one stored before the
    /// rule is still read back.
    #[test]
    fn metadata_values_refuse_characters_that_reorder_or_hide_text() {
        for (c, kind) in [
            ('\u{202E}', "bidirectional"),
            ('\u{2066}', "bidirectional"),
            ('\u{200F}', "bidirectional"),
            ('\u{061C}', "bidirectional"),
            ('\u{200B}', "invisible"),
            ('\u{200D}', "invisible"),
            ('\u{2060}', "invisible"),
            ('\u{FEFF}', "invisible"),
            ('\u{2028}', "separator"),
        ] {
            let value = format!("paid{c}diap");
            let e = Metadata::from_json(&serde_json::json!({ "note": value }))
                .unwrap_err()
                .to_string();
            let code = format!("U+{:04X}", u32::from(c));
            assert!(
                e.starts_with("note: ") && e.contains(&code) && e.contains(kind),
                "{e}"
            );
            assert!(!Metadata::is_valid_value(&value));
            let stored = serde_json::json!({ "note": value }).to_string();
            assert_eq!(
                Metadata::from_json_text(&stored).unwrap().get("note"),
                Some(value.as_str()),
                "a stored value is read back"
            );
        }
        let fine = serde_json::json!({"note": "Заказ №7, «срочно» 😀 e\u{0301}"});
        assert!(Metadata::from_json(&fine).is_ok());
        // The old rules keep their words.
        let e = Metadata::from_json(&serde_json::json!({"k": "a\nb"})).unwrap_err();
        assert_eq!(e, MetadataError::Value("k".into()));
        assert!(e.to_string().contains("control"), "{e}");
    }

    #[test]
    fn currency_debug_shows_the_code() {
        assert_eq!(format!("{:?}", Currency::RUB), "Currency(RUB)");
        let usd = Currency::parse("USD").expect("three upper-case letters");
        assert_eq!(format!("{usd:?}"), "Currency(USD)");
        assert_eq!(format!("{:?}", Some(usd)), "Some(Currency(USD))");
    }
}
