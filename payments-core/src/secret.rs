//! [`Secret`]: a value (a token, a key, a callback secret) that `Debug` never prints.
//!
//! Everything that holds a secret holds it in a `Secret`, so a `{:?}` of the holder, a
//! `tracing` field or a panic message shows `[redacted]`. The value is reached only through
//! [`Secret::expose`], which makes each place that shows or uses it visible in the code.
//! Serialisation is transparent (the credentials file and the store need the value itself).
//!
//! `Secret` deliberately has no `Display`: with one, `format!("Bearer {}", token)` or a
//! `bearer_auth(&token)` would compile and send `[redacted]`; without it such a line does not
//! compile until it says `expose()`.

use std::fmt;

use serde::{Deserialize, Deserializer, Serialize, Serializer};

/// What `Debug` prints instead of the value.
pub const REDACTED: &str = "[redacted]";

/// A secret value; `Debug` prints `[redacted]`.
#[derive(Clone, Default, PartialEq, Eq)]
pub struct Secret<T>(T);

/// The common case: a secret string.
pub type SecretString = Secret<String>;

impl<T> Secret<T> {
    /// Wraps `value`.
    pub const fn new(value: T) -> Secret<T> {
        Secret(value)
    }

    /// The value, to use or to show where showing it is the point (shown once when issued).
    pub fn expose(&self) -> &T {
        &self.0
    }

    /// The value, unwrapped.
    pub fn into_exposed(self) -> T {
        self.0
    }
}

impl<T> From<T> for Secret<T> {
    fn from(value: T) -> Secret<T> {
        Secret(value)
    }
}

impl From<&str> for SecretString {
    fn from(value: &str) -> SecretString {
        Secret(value.to_owned())
    }
}

impl<T> fmt::Debug for Secret<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(REDACTED)
    }
}

impl<T: Serialize> Serialize for Secret<T> {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        self.0.serialize(s)
    }
}

impl<'de, T: Deserialize<'de>> Deserialize<'de> for Secret<T> {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        T::deserialize(d).map(Secret)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn debug_redacts_and_serde_is_transparent() {
        let s = SecretString::from("whsec_do-not-print");
        assert_eq!(format!("{s:?}"), "[redacted]");
        assert_eq!(format!("{:?}", Some(&s)), "Some([redacted])");
        assert_eq!(s.expose(), "whsec_do-not-print");
        let json = serde_json::to_string(&s).unwrap();
        assert_eq!(json, "\"whsec_do-not-print\"");
        let back: SecretString = serde_json::from_str(&json).unwrap();
        assert_eq!(back, s);
        assert_eq!(back.into_exposed(), "whsec_do-not-print");
    }

    #[test]
    fn the_records_that_hold_secrets_do_not_print_them() {
        use crate::project::SecretRecord;
        use crate::Timestamp;

        let at = Timestamp::from_unix_secs(1_700_000_000);
        let record = SecretRecord {
            secret: "whsec_c2VjcmV0LXZhbHVlLW5vdC10by1wcmludA==".into(),
            created_at: at,
            revealed: true,
        };
        let debug = format!("{record:?}");
        assert!(!debug.contains("c2VjcmV0"), "{debug}");
        assert!(debug.contains("[redacted]"), "{debug}");
    }
}
