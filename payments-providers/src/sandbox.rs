//! The sandbox requisite provider and the fixed-rate source.
//!
//! The sandbox provider issues fake requisites: `+7 9xx` phone numbers for `sbp` and Luhn-valid
//! test card numbers (prefix `220000`) for `card_transfer`, never the same requisite for two
//! payments (numbers come from a sequence persisted in the store in blocks). Magic amounts let
//! merchants test every outcome — the fractional part decides:
//!
//! | amount ends in | outcome |
//! |---|---|
//! | `.13` | `201` with `status: error`, `error_code: provider_no_requisites` |
//! | `.14` | `201` with `status: error`, `error_code: provider_result_ambiguous` |
//! | `.15` | `422 payment_not_routable` with `payment_id` (the payment is saved in `error`) |
//! | anything else | requisites issued, `status: processing` |

use std::collections::BTreeMap;
use std::sync::Arc;

use async_trait::async_trait;
use payments_core::payment::{Currency, PaymentMethod};
use payments_core::provider::{
    IssuedRequisites, ProviderOutcome, RateSource, RequisiteProvider, RequisiteRequest,
};
use payments_core::settings::Setting;
use payments_core::store::{Store, StoreError};
use rust_decimal::Decimal;
use tokio::sync::Mutex;

/// Numbers reserved per store round trip.
const BLOCK: u64 = 1000;
/// The setting holding the next free block.
const SEQUENCE: Setting<u64> = Setting::new("sandbox.requisite_sequence");

const HOLDERS: [&str; 8] = [
    "Иван Петрович С.",
    "Мария Алексеевна К.",
    "Алексей Игоревич В.",
    "Ольга Сергеевна Н.",
    "Дмитрий Олегович Р.",
    "Анна Викторовна Л.",
    "Сергей Николаевич П.",
    "Екатерина Андреевна М.",
];
const BANKS: [&str; 6] = [
    "Сбербанк",
    "Т-Банк",
    "ВТБ",
    "Альфа-Банк",
    "Газпромбанк",
    "Райффайзенбанк",
];

/// The magic-amount sandbox provider.
pub struct SandboxProvider {
    store: Arc<dyn Store>,
    next: Mutex<(u64, u64)>,
}

impl std::fmt::Debug for SandboxProvider {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SandboxProvider").finish_non_exhaustive()
    }
}

impl SandboxProvider {
    /// A provider whose requisite sequence lives in `store`.
    pub fn new(store: Arc<dyn Store>) -> Self {
        SandboxProvider {
            store,
            next: Mutex::new((0, 0)),
        }
    }

    /// The next unused sequence number; reserves a block in the store when the current one is
    /// used up, so numbers are never reused, also across restarts.
    async fn sequence(&self) -> Result<u64, StoreError> {
        let mut next = self.next.lock().await;
        if next.0 >= next.1 {
            let start = SEQUENCE.get(&*self.store).await?.unwrap_or(1);
            SEQUENCE.set(&*self.store, &(start + BLOCK)).await?;
            *next = (start, start + BLOCK);
        }
        let n = next.0;
        next.0 += 1;
        Ok(n)
    }
}

/// The fractional part of an amount in hundredths, if it has exactly the digits `.NN`
/// (trailing zeros ignored: `100.130` counts as `.13`).
fn magic_cents(amount: &payments_core::amount::Amount) -> Option<u32> {
    let d = amount.as_decimal().normalize();
    (d.scale() == 2).then(|| (d.fract() * Decimal::ONE_HUNDRED).trunc().try_into().ok())?
}

/// The Luhn check digit for `digits`.
pub fn luhn_check_digit(digits: &str) -> u32 {
    let sum: u32 = digits
        .bytes()
        .rev()
        .enumerate()
        .map(|(i, b)| {
            let d = u32::from(b - b'0');
            if i % 2 == 0 {
                let x = d * 2;
                if x > 9 {
                    x - 9
                } else {
                    x
                }
            } else {
                d
            }
        })
        .sum();
    (10 - sum % 10) % 10
}

#[async_trait]
impl RequisiteProvider for SandboxProvider {
    async fn issue(&self, request: &RequisiteRequest) -> ProviderOutcome {
        match magic_cents(&request.amount) {
            Some(13) => {
                return ProviderOutcome::NoRequisites(
                    "sandbox: amounts ending in .13 get no requisites".into(),
                )
            }
            Some(14) => {
                return ProviderOutcome::Ambiguous(
                    "sandbox: amounts ending in .14 get an ambiguous provider result".into(),
                )
            }
            Some(15) => {
                return ProviderOutcome::NotRoutable(
                    "sandbox: amounts ending in .15 are not routable".into(),
                )
            }
            _ => {}
        }
        let n = match self.sequence().await {
            Ok(n) => n,
            Err(e) => {
                return ProviderOutcome::Ambiguous(format!("sandbox sequence unavailable: {e}"))
            }
        };
        let serial = n % 1_000_000_000;
        let requisite = match request.payment_method {
            PaymentMethod::CardTransfer => {
                let body = format!("220000{serial:09}");
                format!("{body}{}", luhn_check_digit(&body))
            }
            _ => format!("+79{serial:09}"),
        };
        let bank = match (&request.bank_code, request.is_intrabank) {
            (Some(b), true) => b.clone(),
            _ => BANKS[(n % BANKS.len() as u64) as usize].to_string(),
        };
        let qrcode_link = (request.payment_method == PaymentMethod::Sbp)
            .then(|| format!("https://qr.sandbox.invalid/pay/{}", request.payment_id));
        let mut issued =
            IssuedRequisites::new(requisite, HOLDERS[(n % HOLDERS.len() as u64) as usize])
                .with_bank_name(bank);
        issued.qrcode_link = qrcode_link;
        ProviderOutcome::Issued(issued)
    }

    /// The sandbox asks no upstream: its requisites come from a sequence of this store, and a
    /// number drawn for a payment that is never stored is simply never used.
    fn issues_locally(&self) -> bool {
        true
    }
}

/// Exchange rates fixed in configuration: units of currency per 1 USDT.
#[derive(Debug, Clone, Default)]
pub struct FixedRates(pub BTreeMap<String, Decimal>);

impl FixedRates {
    /// The sandbox's defaults: `RUB = 100` (so the spec's worked example holds), `KZT = 480`,
    /// `UZS = 12600`, `AZN = 1.7`.
    pub fn sandbox_defaults() -> Self {
        let mut m = BTreeMap::new();
        m.insert("RUB".to_string(), Decimal::from(100));
        m.insert("KZT".to_string(), Decimal::from(480));
        m.insert("UZS".to_string(), Decimal::from(12600));
        m.insert("AZN".to_string(), Decimal::new(17, 1));
        FixedRates(m)
    }
}

#[async_trait]
impl RateSource for FixedRates {
    async fn course(&self, currency: Currency) -> Option<Decimal> {
        self.0.get(currency.as_str()).copied()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use payments_core::amount::Amount;

    #[test]
    fn luhn_digits_match_known_numbers() {
        // 4111 1111 1111 1111 and 5555 5555 5555 4444 are the classic valid test numbers.
        assert_eq!(luhn_check_digit("411111111111111"), 1);
        assert_eq!(luhn_check_digit("555555555555444"), 4);
        assert_eq!(luhn_check_digit("7992739871"), 3);
    }

    #[test]
    fn magic_amounts() {
        let a = |s| Amount::parse(s).unwrap();
        assert_eq!(magic_cents(&a("100.13")), Some(13));
        assert_eq!(magic_cents(&a("100.130")), Some(13));
        assert_eq!(magic_cents(&a("7.15")), Some(15));
        assert_eq!(magic_cents(&a("100.1")), None);
        assert_eq!(magic_cents(&a("100.131")), None);
        assert_eq!(magic_cents(&a("100")), None);
    }
}
