//! What a provider serves ([`Coverage`]): methods, currencies, countries, banks, amounts and
//! the hours of the day, checked against a request before the provider may be planned.

use payments_core::bank::CountryCode;
use payments_core::clock::Timestamp;
use payments_core::payment::{Currency, PaymentMethod};
use payments_core::provider::RequisiteRequest;
use rust_decimal::Decimal;

/// An hour range that is not `HH:MM-HH:MM` of two different times.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum HoursError {
    /// Not two `HH:MM` times joined by `-`.
    #[error("hours {0:?}: HH:MM-HH:MM (UTC)")]
    Form(String),
    /// A time out of range, or the same time twice.
    #[error("hours {0:?}: HH:MM-HH:MM (UTC), two different times")]
    Times(String),
}

/// An hour range of the day, UTC, `from` inclusive, `to` exclusive, in minutes since
/// midnight; `from > to` wraps past midnight (22:00-06:00).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Hours {
    /// First minute of the day served.
    pub from: u16,
    /// First minute of the day no longer served.
    pub to: u16,
}

impl Hours {
    /// `HH:MM-HH:MM` (UTC).
    pub fn parse(text: &str) -> Result<Hours, HoursError> {
        let minute = |t: &str| -> Option<u16> {
            let (h, m) = t.trim().split_once(':')?;
            let (h, m): (u16, u16) = (h.parse().ok()?, m.parse().ok()?);
            (h <= 24 && m < 60 && h * 60 + m <= 24 * 60).then_some(h * 60 + m)
        };
        let (a, b) = text
            .split_once('-')
            .ok_or_else(|| HoursError::Form(text.to_string()))?;
        match (minute(a), minute(b)) {
            (Some(from), Some(to)) if from != to => Ok(Hours { from, to }),
            _ => Err(HoursError::Times(text.to_string())),
        }
    }

    /// Whether `at` falls in the range.
    pub fn contains(&self, at: Timestamp) -> bool {
        let minute = u16::try_from((at.unix_millis().rem_euclid(86_400_000)) / 60_000)
            .expect("minutes of a day fit");
        if self.from < self.to {
            (self.from..self.to).contains(&minute)
        } else {
            minute >= self.from || minute < self.to
        }
    }
}

impl std::fmt::Display for Hours {
    /// `HH:MM-HH:MM`, as parsed.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let (from, to) = (self.from, self.to);
        write!(
            f,
            "{:02}:{:02}-{:02}:{:02}",
            from / 60,
            from % 60,
            to / 60,
            to % 60
        )
    }
}

/// What a provider serves. Every field left `None` (or empty) serves everything.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Coverage {
    /// Payment methods.
    pub methods: Vec<PaymentMethod>,
    /// Currencies.
    pub currencies: Vec<Currency>,
    /// Payers' countries.
    pub geo_codes: Vec<CountryCode>,
    /// The payer's banks (catalog names); a payment without a bank is served.
    pub banks: Vec<String>,
    /// Banks (catalog names) this provider does not serve.
    pub not_banks: Vec<String>,
    /// `Some(false)`: no intrabank payments; `Some(true)`: only intrabank ones.
    pub intrabank: Option<bool>,
    /// Smallest amount served (inclusive).
    pub min_amount: Option<Decimal>,
    /// Largest amount served (inclusive).
    pub max_amount: Option<Decimal>,
    /// The hours served (UTC).
    pub hours: Option<Hours>,
}

impl Coverage {
    /// `Ok` if this coverage serves `request` at `now`, else why not (for the record).
    pub fn covers(&self, request: &RequisiteRequest, now: Timestamp) -> Result<(), &'static str> {
        if !self.methods.is_empty() && !self.methods.contains(&request.payment_method) {
            return Err("method");
        }
        if !self.currencies.is_empty() && !self.currencies.contains(&request.currency) {
            return Err("currency");
        }
        if !self.geo_codes.is_empty() && !self.geo_codes.contains(&request.geo_code) {
            return Err("geo_code");
        }
        if let Some(bank) = &request.bank_code {
            let is = |list: &[String]| list.iter().any(|b| b.eq_ignore_ascii_case(bank));
            if (!self.banks.is_empty() && !is(&self.banks)) || is(&self.not_banks) {
                return Err("bank");
            }
        }
        if self.intrabank.is_some_and(|i| i != request.is_intrabank) {
            return Err("intrabank");
        }
        let amount = request.amount.as_decimal();
        if self.min_amount.is_some_and(|m| amount < m)
            || self.max_amount.is_some_and(|m| amount > m)
        {
            return Err("amount");
        }
        if self.hours.is_some_and(|h| !h.contains(now)) {
            return Err("hours");
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hours_print_as_they_parse() {
        for text in ["22:00-06:00", "09:30-18:05", "00:00-24:00"] {
            assert_eq!(Hours::parse(text).unwrap().to_string(), text);
        }
        assert_eq!(
            Hours::parse("9-18").unwrap_err().to_string(),
            "hours \"9-18\": HH:MM-HH:MM (UTC), two different times"
        );
        assert_eq!(
            Hours::parse("0900").unwrap_err(),
            HoursError::Form("0900".into())
        );
    }
}
