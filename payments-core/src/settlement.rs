//! Settlement in USDT (`merchant_information`): exact integer arithmetic with truncation, never
//! rounding up.
//!
//! The course (units of payment currency per 1 USDT) and the fee percent are fixed on the payment
//! when requisites are issued. From them and the payment's current amount:
//!
//! - `amount_usdt = trunc4(amount / course)`
//! - `fee = floor4(amount * rate / 100)` (payment currency)
//! - `amount_rate = amount - fee`
//! - `amount_usdt_rate = trunc4(amount_rate / course)`
//!
//! All quantities are non-negative, so truncation and floor coincide. The computation runs on
//! scaled `i128` integers (amounts in millionths, the course in 10^-8, the fee percent in
//! hundredths), so no intermediate result is ever rounded.

use rust_decimal::Decimal;
use serde::ser::SerializeStruct;
use serde::{Serialize, Serializer};

use crate::amount::{Amount, DecimalFormat};

/// Decimal places a course is fixed with; a rate source's extra digits are truncated.
pub const COURSE_SCALE: u32 = 8;
/// The largest accepted course.
pub const MAX_COURSE: i64 = 1_000_000_000_000;
/// Decimal places of the fee percent.
pub const FEE_SCALE: u32 = 2;

/// Units of payment currency per 1 USDT, positive, at most 8 decimals, at most 10^12.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Course(Decimal);

/// Why a course or fee was refused.
#[non_exhaustive]
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum PricingError {
    /// The course is zero or negative.
    #[error("course must be positive")]
    CourseNotPositive,
    /// The course is above [`MAX_COURSE`].
    #[error("course must be at most 1000000000000")]
    CourseTooLarge,
    /// The course truncated to 8 decimals is zero.
    #[error("course must be at least 0.00000001")]
    CourseTooSmall,
    /// The fee percent is outside `0..100` or has more than 2 decimals.
    #[error("fee percent must be at least 0 and below 100, with at most 2 decimals")]
    FeeOutOfRange,
}

impl Course {
    /// Fixes a course from a rate source: truncated to 8 decimals.
    pub fn new(value: Decimal) -> Result<Course, PricingError> {
        if value.is_sign_negative() || value.is_zero() {
            return Err(PricingError::CourseNotPositive);
        }
        if value > Decimal::from(MAX_COURSE) {
            return Err(PricingError::CourseTooLarge);
        }
        let fixed = value.trunc_with_scale(COURSE_SCALE);
        if fixed.is_zero() {
            return Err(PricingError::CourseTooSmall);
        }
        Ok(Course(fixed.normalize()))
    }

    /// The course at full (fixed) precision.
    pub fn as_decimal(&self) -> Decimal {
        self.0
    }

    /// The course in units of 10^-8.
    fn scaled(&self) -> i128 {
        self.0.mantissa() * 10i128.pow(COURSE_SCALE - self.0.scale())
    }

    /// The course as shown: truncated to exactly 2 decimals.
    pub fn display(&self) -> Decimal {
        with_scale(self.0.trunc_with_scale(2), 2)
    }
}

/// The project fee in percent, `0 <= fee < 100`, at most 2 decimals.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct FeePercent(Decimal);

impl FeePercent {
    /// Validates a fee percent.
    pub fn new(value: Decimal) -> Result<FeePercent, PricingError> {
        if value.is_sign_negative()
            || value >= Decimal::ONE_HUNDRED
            || value.normalize().scale() > FEE_SCALE
        {
            return Err(PricingError::FeeOutOfRange);
        }
        Ok(FeePercent(value.normalize()))
    }

    /// The fee percent.
    pub fn as_decimal(&self) -> Decimal {
        self.0
    }

    /// The fee as shown: exactly 2 decimals.
    pub fn display(&self) -> Decimal {
        with_scale(self.0, 2)
    }

    fn hundredths(&self) -> i128 {
        self.0.mantissa() * 10i128.pow(FEE_SCALE - self.0.scale())
    }
}

/// The course and fee fixed on a payment when its requisites were issued.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Pricing {
    /// Units of payment currency per 1 USDT at full fixed precision.
    pub course: Course,
    /// Project fee percent.
    pub fee_percent: FeePercent,
}

/// The settlement of one amount at a fixed pricing: what `merchant_information` shows.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Settlement {
    /// The course, truncated to 2 decimals.
    pub course: Decimal,
    /// The fee percent with 2 decimals.
    pub rate: Decimal,
    /// `trunc4(amount / course)`.
    pub amount_usdt: Decimal,
    /// `floor4(amount * rate / 100)`, in payment currency.
    pub fee: Decimal,
    /// `amount - fee`, exact (up to 6 decimals); shown truncated to 4.
    pub amount_rate: Decimal,
    /// `trunc4(amount_rate / course)`: credited to the project balance.
    pub amount_usdt_rate: Decimal,
}

impl Settlement {
    /// Settles `amount` at `pricing`.
    ///
    /// The spec's worked example: amount 3400 at course 100 and rate 11.
    ///
    /// ```
    /// use payments_core::amount::Amount;
    /// use payments_core::settlement::{Course, FeePercent, Pricing, Settlement};
    /// use rust_decimal::Decimal;
    ///
    /// let pricing = Pricing {
    ///     course: Course::new(Decimal::from(100)).unwrap(),
    ///     fee_percent: FeePercent::new(Decimal::from(11)).unwrap(),
    /// };
    /// let s = Settlement::compute(&Amount::parse("3400").unwrap(), &pricing);
    /// assert_eq!(s.amount_usdt.to_string(), "34.0000");
    /// assert_eq!(s.fee.to_string(), "374.0000");
    /// assert_eq!(s.amount_usdt_rate.to_string(), "30.2600");
    /// assert_eq!(
    ///     serde_json::to_string(&s).unwrap(),
    ///     r#"{"course":100.00,"rate":11.00,"amount_usdt":"34.0000","amount_rate":"3026.0000","amount_usdt_rate":"30.2600"}"#
    /// );
    /// ```
    pub fn compute(amount: &Amount, pricing: &Pricing) -> Settlement {
        // amount in 10^-6 (<= 10^24), course in 10^-8 (1..=10^20), fee in 10^-2 (< 10^4):
        // every product below stays under 10^31, far inside i128.
        let a = amount.micros();
        let c = pricing.course.scaled();
        let r = pricing.fee_percent.hundredths();
        // fee in 10^-4 = floor(a/10^6 * r/10^2 / 100 * 10^4) = floor(a*r / 10^6)
        let fee4 = a * r / 1_000_000;
        // amount_usdt in 10^-4 = floor(a/10^6 / (c/10^8) * 10^4) = floor(a * 10^6 / c)
        let usdt4 = a * 1_000_000 / c;
        let rate_micros = a - fee4 * 100;
        let usdt_rate4 = rate_micros * 1_000_000 / c;
        Settlement {
            course: pricing.course.display(),
            rate: pricing.fee_percent.display(),
            amount_usdt: Decimal::from_i128_with_scale(usdt4, 4),
            fee: Decimal::from_i128_with_scale(fee4, 4),
            amount_rate: Decimal::from_i128_with_scale(rate_micros, 6).normalize(),
            amount_usdt_rate: Decimal::from_i128_with_scale(usdt_rate4, 4),
        }
    }
}

impl Settlement {
    /// `merchant_information` as the API writes it, with `course` and `rate` in `format`.
    pub fn view(&self, format: DecimalFormat) -> SettlementView<'_> {
        SettlementView {
            settlement: self,
            format,
        }
    }
}

impl Serialize for Settlement {
    /// `course` and `rate` as JSON numbers with exactly 2 decimals; the amounts as decimal
    /// strings with exactly 4 decimals.
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        self.view(DecimalFormat::Number).serialize(s)
    }
}

/// `merchant_information`'s JSON: `course` and `rate` with exactly 2 decimals in the chosen
/// [`DecimalFormat`]; the USDT and payment-currency amounts always as decimal strings with
/// exactly 4 decimals.
#[derive(Debug, Clone, Copy)]
pub struct SettlementView<'a> {
    settlement: &'a Settlement,
    format: DecimalFormat,
}

impl Serialize for SettlementView<'_> {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        let v = self.settlement;
        let mut st = s.serialize_struct("merchant_information", 5)?;
        st.serialize_field("course", &self.format.write(&v.course))?;
        st.serialize_field("rate", &self.format.write(&v.rate))?;
        st.serialize_field("amount_usdt", &four(v.amount_usdt))?;
        st.serialize_field("amount_rate", &four(v.amount_rate))?;
        st.serialize_field("amount_usdt_rate", &four(v.amount_usdt_rate))?;
        st.end()
    }
}

/// Truncates to 4 decimals and writes exactly 4.
fn four(d: Decimal) -> String {
    with_scale(d.trunc_with_scale(4), 4).to_string()
}

/// Sets the scale to `scale` (only ever widening or equal here), keeping the value.
fn with_scale(mut d: Decimal, scale: u32) -> Decimal {
    d.rescale(scale);
    d
}

#[cfg(test)]
mod tests {
    use std::str::FromStr;

    use proptest::prelude::*;

    use super::*;

    fn dec(s: &str) -> Decimal {
        Decimal::from_str(s).unwrap()
    }

    fn pricing(course: &str, fee: &str) -> Pricing {
        Pricing {
            course: Course::new(dec(course)).unwrap(),
            fee_percent: FeePercent::new(dec(fee)).unwrap(),
        }
    }

    #[test]
    fn the_spec_worked_example() {
        // amount 3400 at course 100 and rate 11: amount_usdt 34, fee 374 (3.74 USDT),
        // amount_usdt_rate 30.26.
        let s = Settlement::compute(&Amount::parse("3400").unwrap(), &pricing("100", "11"));
        assert_eq!(s.amount_usdt.to_string(), "34.0000");
        assert_eq!(s.fee.to_string(), "374.0000");
        assert_eq!(s.amount_rate, dec("3026"));
        assert_eq!(s.amount_usdt_rate.to_string(), "30.2600");
        assert_eq!(
            serde_json::to_string(&s).unwrap(),
            r#"{"course":100.00,"rate":11.00,"amount_usdt":"34.0000","amount_rate":"3026.0000","amount_usdt_rate":"30.2600"}"#
        );
    }

    #[test]
    fn truncates_never_rounds() {
        // 1000 / 92.87654321 = 10.76698..., 975 / 92.87654321 = 10.49780... (Python decimal, 50 digits).
        let s = Settlement::compute(
            &Amount::parse("1000").unwrap(),
            &pricing("92.876543219", "2.5"),
        );
        assert_eq!(s.course.to_string(), "92.87");
        assert_eq!(s.rate.to_string(), "2.50");
        assert_eq!(s.amount_usdt.to_string(), "10.7669");
        assert_eq!(s.fee.to_string(), "25.0000");
        assert_eq!(s.amount_usdt_rate.to_string(), "10.4978");
        // 0.999999 * 1.99% = 0.0198999801 -> fee floored to 0.0198.
        let s = Settlement::compute(&Amount::parse("0.999999").unwrap(), &pricing("1", "1.99"));
        assert_eq!(s.fee.to_string(), "0.0198");
        assert_eq!(s.amount_rate.to_string(), "0.980199");
        assert_eq!(serde_json::to_value(s).unwrap()["amount_rate"], "0.9801");
        assert_eq!(s.amount_usdt.to_string(), "0.9999");
    }

    #[test]
    fn pricing_limits() {
        assert_eq!(Course::new(dec("0")), Err(PricingError::CourseNotPositive));
        assert_eq!(Course::new(dec("-1")), Err(PricingError::CourseNotPositive));
        assert_eq!(
            Course::new(dec("0.000000001")),
            Err(PricingError::CourseTooSmall)
        );
        assert_eq!(
            Course::new(dec("1000000000001")),
            Err(PricingError::CourseTooLarge)
        );
        assert_eq!(
            Course::new(dec("91.123456789")).unwrap().as_decimal(),
            dec("91.12345678")
        );
        assert_eq!(
            FeePercent::new(dec("100")),
            Err(PricingError::FeeOutOfRange)
        );
        assert_eq!(
            FeePercent::new(dec("-0.01")),
            Err(PricingError::FeeOutOfRange)
        );
        assert_eq!(
            FeePercent::new(dec("1.005")),
            Err(PricingError::FeeOutOfRange)
        );
        assert!(FeePercent::new(dec("0")).is_ok());
        assert!(FeePercent::new(dec("99.99")).is_ok());
    }

    fn amounts() -> impl Strategy<Value = Amount> {
        (1i128..=999_999_999_999_999_999_999_999i128, 0u32..=6).prop_map(|(m, scale)| {
            let d = Decimal::from_i128_with_scale(m / 10i128.pow(6 - scale), scale);
            Amount::from_decimal(if d.is_zero() { Decimal::ONE } else { d }).unwrap()
        })
    }

    fn pricings() -> impl Strategy<Value = Pricing> {
        (
            1i128..=100_000_000_000_000_000_000i128,
            0u32..=8,
            0i64..10_000,
        )
            .prop_map(|(c, cs, f)| {
                let course = Decimal::from_i128_with_scale(c / 10i128.pow(8 - cs), cs);
                let course = if course.is_zero() {
                    Decimal::ONE
                } else {
                    course
                };
                Pricing {
                    course: Course::new(course).unwrap(),
                    fee_percent: FeePercent::new(Decimal::new(f, 2)).unwrap(),
                }
            })
    }

    proptest! {
        #[test]
        fn nothing_is_ever_rounded_up(amount in amounts(), p in pricings()) {
            let s = Settlement::compute(&amount, &p);
            let a = amount.as_decimal();
            let course = p.course.as_decimal();
            let unit = Decimal::new(1, 4);
            // amount_usdt is the largest 4-decimal value whose USDT worth fits in amount.
            prop_assert!(s.amount_usdt * course <= a);
            prop_assert!((s.amount_usdt + unit) * course > a);
            prop_assert!(s.amount_usdt_rate <= s.amount_usdt);
            prop_assert!(s.amount_usdt_rate * course <= s.amount_rate);
            prop_assert!((s.amount_usdt_rate + unit) * course > s.amount_rate);
            // the fee is floored: exact fee minus one unit < fee <= exact fee
            let exact_fee = a * p.fee_percent.as_decimal() / Decimal::ONE_HUNDRED;
            prop_assert!(s.fee <= exact_fee);
            prop_assert!(s.fee + unit > exact_fee);
            prop_assert_eq!(s.amount_rate + s.fee, a);
            prop_assert!(s.course <= course);
            prop_assert!(s.course + Decimal::new(1, 2) > course);
            prop_assert_eq!(s.amount_usdt.scale(), 4);
            prop_assert_eq!(s.amount_usdt_rate.scale(), 4);
            prop_assert_eq!(s.fee.scale(), 4);
            prop_assert_eq!(s.course.scale(), 2);
            prop_assert_eq!(s.rate.scale(), 2);
            let json = serde_json::to_value(s).unwrap();
            for k in ["amount_usdt", "amount_rate", "amount_usdt_rate"] {
                let text = json[k].as_str().unwrap();
                prop_assert_eq!(text.split_once('.').unwrap().1.len(), 4, "{} {}", k, text);
            }
        }
    }
}
