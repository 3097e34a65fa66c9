//! Exact money amounts: parsed from a JSON number or string without ever passing through a
//! binary float.

use std::fmt;

use rust_decimal::Decimal;
use serde::{Serialize, Serializer};

/// Most decimal places an amount may have.
pub const MAX_SCALE: u32 = 6;
/// Most integer digits an amount may have.
pub const MAX_INTEGER_DIGITS: usize = 18;

/// A positive amount in major currency units with at most 6 decimals and at most 18 integer
/// digits. The scale is kept as received (`100.50` stays `100.50`); equality is by value.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Amount(Decimal);

/// Why an amount was rejected.
#[non_exhaustive]
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum AmountError {
    /// Neither a JSON number nor a string.
    #[error("must be a number or a decimal string")]
    WrongType,
    /// Not `digits[.digits]`: an exponent, a sign, spaces, an empty string or other characters.
    #[error("must be a plain decimal: digits with an optional dot, no exponent, sign or spaces")]
    Syntax,
    /// More than 6 decimal places.
    #[error("must have at most 6 decimal places")]
    TooManyDecimals,
    /// More than 18 integer digits.
    #[error("must have at most 18 integer digits")]
    TooLarge,
    /// Zero.
    #[error("must be positive")]
    NotPositive,
}

impl Amount {
    /// Parses `digits[.digits]`: at most 18 integer digits, 1 to 6 decimals after a dot, > 0.
    ///
    /// ```
    /// use payments_core::amount::{Amount, AmountError};
    ///
    /// let a = Amount::parse("100.50").unwrap();
    /// assert_eq!(a.to_string(), "100.50"); // the scale is kept as received
    /// assert_eq!(a, Amount::parse("100.5").unwrap()); // equality is by value
    /// assert_eq!(Amount::parse("1e3"), Err(AmountError::Syntax));
    /// assert_eq!(Amount::parse("0.0000001"), Err(AmountError::TooManyDecimals));
    /// assert_eq!(Amount::parse("0"), Err(AmountError::NotPositive));
    /// ```
    pub fn parse(s: &str) -> Result<Amount, AmountError> {
        let (int, frac) = match s.split_once('.') {
            Some((int, frac)) => (int, Some(frac)),
            None => (s, None),
        };
        if int.is_empty() || !int.bytes().all(|b| b.is_ascii_digit()) {
            return Err(AmountError::Syntax);
        }
        if let Some(frac) = frac {
            if frac.is_empty() || !frac.bytes().all(|b| b.is_ascii_digit()) {
                return Err(AmountError::Syntax);
            }
            if frac.len() > MAX_SCALE as usize {
                return Err(AmountError::TooManyDecimals);
            }
        }
        if int.trim_start_matches('0').len() > MAX_INTEGER_DIGITS {
            return Err(AmountError::TooLarge);
        }
        let frac = frac.unwrap_or("");
        // At most 18 + 6 significant digits: fits an i128 and a Decimal mantissa exactly.
        let digits = format!("{int}{frac}");
        let mantissa: i128 = digits.parse().map_err(|_| AmountError::Syntax)?;
        if mantissa == 0 {
            return Err(AmountError::NotPositive);
        }
        let scale = u32::try_from(frac.len()).expect("at most 6 decimals were checked above");
        Ok(Amount(Decimal::from_i128_with_scale(mantissa, scale)))
    }

    /// Parses a JSON value: a number (its exact text, never a float) or a string.
    pub fn from_json(value: &serde_json::Value) -> Result<Amount, AmountError> {
        match value {
            // With serde_json's `arbitrary_precision`, the number's text is kept verbatim.
            serde_json::Value::Number(n) => Amount::parse(&n.to_string()),
            serde_json::Value::String(s) => Amount::parse(s),
            _ => Err(AmountError::WrongType),
        }
    }

    /// Wraps a decimal that satisfies the amount rules.
    pub fn from_decimal(d: Decimal) -> Result<Amount, AmountError> {
        if d.is_sign_negative() || d.is_zero() {
            return Err(AmountError::NotPositive);
        }
        Amount::parse(&d.to_string())
    }

    /// The value as a decimal, with the scale it was given.
    pub fn as_decimal(&self) -> Decimal {
        self.0
    }

    /// The value in millionths (the smallest unit an amount can express).
    pub fn micros(&self) -> i128 {
        let m = self.0.mantissa();
        m * 10i128.pow(MAX_SCALE - self.0.scale())
    }

    /// The canonical text used for idempotency comparison: no trailing zeros (`100.0` -> `100`).
    pub fn normalized(&self) -> String {
        self.0.normalize().to_string()
    }

    /// Every text an equal amount may be stored as: the value at each scale from its
    /// shortest to [`MAX_SCALE`] (`100.5` -> `100.5`, `100.50`, ... `100.500000`). A store
    /// keeps an amount's text with the scale it was received with, so an exact match by value
    /// is a match on one of these.
    ///
    /// ```
    /// use payments_core::amount::Amount;
    ///
    /// let s = Amount::parse("100.50").unwrap().spellings();
    /// assert_eq!(s.first().map(String::as_str), Some("100.5"));
    /// assert_eq!(s.last().map(String::as_str), Some("100.500000"));
    /// assert_eq!(s.len(), 6);
    /// ```
    pub fn spellings(&self) -> Vec<String> {
        let shortest = self.0.normalize();
        (shortest.scale()..=MAX_SCALE)
            .map(|scale| {
                let mut d = shortest;
                d.rescale(scale);
                d.to_string()
            })
            .collect()
    }
}

impl fmt::Display for Amount {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Display::fmt(&self.0, f)
    }
}

impl Serialize for Amount {
    /// A JSON number written from the decimal text, never from a float.
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        decimal_number(&self.0).serialize(s)
    }
}

/// How decimal numbers of the Payment resource (`amount`, `initial_amount`,
/// `merchant_information.course` and `.rate`) are written.
///
/// The default is a JSON number with exactly the decimal's text (`3400.50`), as API v1
/// specifies. A client whose JSON parser turns numbers into binary floats (JavaScript's
/// `JSON.parse`, many others by default) loses digits: `3400.50` becomes `3400.5` and an
/// 18-digit integer part does not fit a double. Such a client opts in to [`String`], which
/// writes the same text as a JSON string (`"3400.50"`). The value never changes, only its
/// JSON type.
///
/// [`String`]: DecimalFormat::String
///
/// ```
/// use payments_core::amount::{Amount, DecimalFormat};
///
/// let a = Amount::parse("3400.50").unwrap();
/// assert_eq!(serde_json::to_string(&DecimalFormat::Number.write(&a.as_decimal())).unwrap(), "3400.50");
/// assert_eq!(serde_json::to_string(&DecimalFormat::String.write(&a.as_decimal())).unwrap(), r#""3400.50""#);
/// assert_eq!(DecimalFormat::parse("string"), Some(DecimalFormat::String));
/// assert_eq!(DecimalFormat::parse("float"), None);
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum DecimalFormat {
    /// JSON numbers with the exact decimal text (API v1's default).
    #[default]
    Number,
    /// JSON strings with the exact decimal text.
    String,
}

impl DecimalFormat {
    /// Parses the wire name: `number` or `string` (ASCII case-insensitive).
    pub fn parse(s: &str) -> Option<DecimalFormat> {
        if s.eq_ignore_ascii_case("number") {
            Some(DecimalFormat::Number)
        } else if s.eq_ignore_ascii_case("string") {
            Some(DecimalFormat::String)
        } else {
            None
        }
    }

    /// The wire name.
    pub fn as_str(self) -> &'static str {
        match self {
            DecimalFormat::Number => "number",
            DecimalFormat::String => "string",
        }
    }

    /// The decimal as a JSON value of this format, with exactly the decimal's text.
    pub fn write(self, d: &Decimal) -> serde_json::Value {
        match self {
            DecimalFormat::Number => serde_json::Value::Number(decimal_number(d)),
            DecimalFormat::String => serde_json::Value::String(d.to_string()),
        }
    }
}

/// A JSON number with exactly the decimal's text (`100.00` stays `100.00`).
pub fn decimal_number(d: &Decimal) -> serde_json::Number {
    d.to_string()
        .parse()
        .expect("a Decimal's text is a valid JSON number (no exponent, optional sign)")
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn accepts_plain_decimals() {
        assert_eq!(Amount::parse("3400").unwrap().to_string(), "3400");
        assert_eq!(Amount::parse("100.50").unwrap().to_string(), "100.50");
        assert_eq!(Amount::parse("0.000001").unwrap().micros(), 1);
        assert_eq!(
            Amount::parse("999999999999999999.999999").unwrap().micros(),
            999_999_999_999_999_999_999_999
        );
        assert_eq!(
            Amount::parse("100").unwrap(),
            Amount::parse("100.000").unwrap()
        );
        assert_eq!(Amount::parse("100.0").unwrap().normalized(), "100");
    }

    #[test]
    fn rejects_everything_else() {
        for (s, e) in [
            ("", AmountError::Syntax),
            ("1e5", AmountError::Syntax),
            ("1E5", AmountError::Syntax),
            ("-1", AmountError::Syntax),
            ("+1", AmountError::Syntax),
            (" 1", AmountError::Syntax),
            ("1 ", AmountError::Syntax),
            (".5", AmountError::Syntax),
            ("5.", AmountError::Syntax),
            ("1,5", AmountError::Syntax),
            ("NaN", AmountError::Syntax),
            ("Infinity", AmountError::Syntax),
            ("0x10", AmountError::Syntax),
            ("1.2.3", AmountError::Syntax),
            ("0", AmountError::NotPositive),
            ("0.000000", AmountError::NotPositive),
            ("1.0000001", AmountError::TooManyDecimals),
            ("1000000000000000000", AmountError::TooLarge),
        ] {
            assert_eq!(Amount::parse(s), Err(e), "{s:?}");
        }
    }

    #[test]
    fn json_numbers_are_read_exactly() {
        let v: serde_json::Value =
            serde_json::from_str(r#"[0.1, 123456789012345678.123456, 1e2, -3, true, "7.25"]"#)
                .unwrap();
        let a = v.as_array().unwrap();
        assert_eq!(Amount::from_json(&a[0]).unwrap().to_string(), "0.1");
        assert_eq!(
            Amount::from_json(&a[1]).unwrap().to_string(),
            "123456789012345678.123456"
        );
        assert_eq!(Amount::from_json(&a[2]), Err(AmountError::Syntax));
        assert_eq!(Amount::from_json(&a[3]), Err(AmountError::Syntax));
        assert_eq!(Amount::from_json(&a[4]), Err(AmountError::WrongType));
        assert_eq!(Amount::from_json(&a[5]).unwrap().to_string(), "7.25");
        assert_eq!(
            serde_json::to_string(&Amount::parse("100.50").unwrap()).unwrap(),
            "100.50"
        );
    }

    proptest! {
        #[test]
        fn every_decimal_with_at_most_6_places_round_trips(int in 0u64..=999_999_999_999_999_999u64, frac in 0u32..1_000_000, places in 0usize..=6) {
            let frac_text = format!("{frac:06}")[..places].to_string();
            let text = if places == 0 { int.to_string() } else { format!("{int}.{frac_text}") };
            let is_zero = int == 0 && frac_text.bytes().all(|b| b == b'0');
            match Amount::parse(&text) {
                Ok(a) => {
                    prop_assert!(!is_zero);
                    prop_assert_eq!(a.to_string(), text.clone());
                    let json: serde_json::Value = serde_json::from_str(&text).unwrap();
                    prop_assert_eq!(Amount::from_json(&json).unwrap(), a);
                    prop_assert_eq!(serde_json::to_string(&a).unwrap(), text);
                }
                Err(e) => { prop_assert!(is_zero); prop_assert_eq!(e, AmountError::NotPositive); }
            }
        }

        #[test]
        fn seven_places_are_rejected(int in 0u64..1_000_000, frac in 0u64..10_000_000) {
            let text = format!("{int}.{frac:07}");
            prop_assert_eq!(Amount::parse(&text), Err(AmountError::TooManyDecimals));
        }

        #[test]
        fn exponents_and_signs_are_rejected(m in 1u32..100_000, e in -10i32..10, sign in prop::sample::select(vec!["-", "+", ""])) {
            prop_assert_eq!(Amount::parse(&format!("{sign}{m}e{e}")), Err(AmountError::Syntax));
            prop_assert_eq!(Amount::parse(&format!("{sign}{m}E{e}")), Err(AmountError::Syntax));
            if !sign.is_empty() {
                prop_assert_eq!(Amount::parse(&format!("{sign}{m}")), Err(AmountError::Syntax));
            }
        }

        #[test]
        fn arbitrary_strings_never_panic(s in ".{0,40}") {
            let _ = Amount::parse(&s);
        }
    }
}
