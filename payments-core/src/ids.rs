//! Identifiers: UUID newtypes for payments, projects, merchants, events, tokens and the web
//! cabinet's users and sessions, the signing key id string and the requisite provider's name.

use std::fmt;
use std::str::FromStr;

use serde::{Deserialize, Serialize};
use uuid::Uuid;

macro_rules! uuid_id {
    ($(#[$doc:meta])* $name:ident) => {
        $(#[$doc])*
        #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
        #[serde(transparent)]
        pub struct $name(Uuid);

        impl $name {
            /// Wraps a UUID.
            pub const fn from_uuid(uuid: Uuid) -> Self {
                $name(uuid)
            }

            /// The UUID inside.
            pub const fn as_uuid(&self) -> &Uuid {
                &self.0
            }

            /// A random (version 4) id from the given generator.
            pub fn generate(rng: &dyn crate::RandomSource) -> Self {
                $name(crate::random::uuid_v4(rng))
            }

            /// A time-ordered (version 7, RFC 9562) id: the millisecond of `at`, then 74
            /// random bits. Ids made later sort after (to the millisecond), so a store's index
            /// on them grows at one end instead of being written all over.
            pub fn generate_ordered(at: crate::Timestamp, rng: &dyn crate::RandomSource) -> Self {
                $name(crate::random::uuid_v7(at, rng))
            }
        }

        impl fmt::Display for $name {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                // Lower-case hyphenated form, the only form the API writes.
                fmt::Display::fmt(&self.0.hyphenated(), f)
            }
        }

        impl FromStr for $name {
            type Err = InvalidId;

            /// Parses the canonical form only, the one the API writes: 36 characters,
            /// lower-case hexadecimal, hyphenated 8-4-4-4-12. Other spellings of the same
            /// UUID (upper case, simple, braced, `urn:uuid:`) are refused, so that one id has
            /// one spelling everywhere (logs, URLs, caches, comparisons by string).
            fn from_str(s: &str) -> Result<Self, Self::Err> {
                parse_canonical(s).map($name)
            }
        }
    };
}

/// An id that is not a UUID in its canonical form (lower-case, hyphenated).
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[error("not a UUID in canonical form (36 characters, lower-case hexadecimal, hyphenated)")]
pub struct InvalidId;

/// `s` as a UUID if it is written exactly as [`Uuid::hyphenated`] writes it, lower case.
fn parse_canonical(s: &str) -> Result<Uuid, InvalidId> {
    let canonical = s.len() == 36
        && s.bytes().enumerate().all(|(i, b)| match i {
            8 | 13 | 18 | 23 => b == b'-',
            _ => matches!(b, b'0'..=b'9' | b'a'..=b'f'),
        });
    if !canonical {
        return Err(InvalidId);
    }
    Uuid::parse_str(s).map_err(|_| InvalidId)
}

uuid_id!(
    /// A payment's id, the `id` field of the Payment resource.
    PaymentId
);
uuid_id!(
    /// A project's id.
    ProjectId
);
uuid_id!(
    /// A merchant's id.
    MerchantId
);
uuid_id!(
    /// A callback event's id (`event_id`), new for every event, identical across its retries.
    EventId
);
uuid_id!(
    /// The id of an issued project token (not the token itself).
    TokenId
);
uuid_id!(
    /// A ledger entry's id ([`crate::ledger`]): a credit, reversal, adjustment or payout.
    EntryId
);
uuid_id!(
    /// A payment appeal's id ([`crate::appeal`]).
    AppealId
);
uuid_id!(
    /// A web cabinet user's id.
    UserId
);
uuid_id!(
    /// A web cabinet session's id: a public handle (the security page lists and revokes
    /// sessions by it), never the session cookie, which is stored as its SHA-256 only.
    SessionId
);

/// A signing key's id: `ed25519-` followed by the RFC 7638 thumbprint of the public key.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(transparent)]
pub struct KeyId(String);

impl KeyId {
    /// Wraps a key id string as received or computed; no format check.
    pub fn new(value: impl Into<String>) -> Self {
        KeyId(value.into())
    }

    /// The key id as a string.
    pub fn as_str(&self) -> &str {
        &self.0
    }
}

impl fmt::Display for KeyId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

/// A provider's name: 1 to 40 characters of `[a-z0-9_-]`, as configured and as recorded on
/// payments.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct ProviderName(String);

/// A provider name that breaks the rule of [`ProviderName`].
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("provider name {name:?}: 1 to 40 characters of a-z, 0-9, _ and -")]
pub struct ProviderNameError {
    /// The name refused.
    pub name: String,
}

impl ProviderName {
    /// The name of the only provider of a service that routes nowhere else.
    pub const DEFAULT: &'static str = "default";

    /// `name` if it is a valid provider name.
    pub fn parse(name: &str) -> Result<ProviderName, ProviderNameError> {
        let ok = !name.is_empty()
            && name.len() <= 40
            && name
                .bytes()
                .all(|b| matches!(b, b'a'..=b'z' | b'0'..=b'9' | b'_' | b'-'));
        if ok {
            Ok(ProviderName(name.to_string()))
        } else {
            Err(ProviderNameError {
                name: name.to_string(),
            })
        }
    }

    /// The name.
    pub fn as_str(&self) -> &str {
        &self.0
    }
}

impl fmt::Display for ProviderName {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_the_canonical_spelling_parses() {
        let canonical = "5f0c6a4e-2b1d-4c3a-9e8f-7a6b5c4d3e2f";
        let id: PaymentId = canonical.parse().expect("the canonical form");
        assert_eq!(id.to_string(), canonical);
        for other in [
            "5F0C6A4E-2B1D-4C3A-9E8F-7A6B5C4D3E2F",
            "5f0c6a4e-2b1d-4c3a-9e8f-7a6b5c4d3E2f",
            "5f0c6a4e2b1d4c3a9e8f7a6b5c4d3e2f",
            "{5f0c6a4e-2b1d-4c3a-9e8f-7a6b5c4d3e2f}",
            "urn:uuid:5f0c6a4e-2b1d-4c3a-9e8f-7a6b5c4d3e2f",
            " 5f0c6a4e-2b1d-4c3a-9e8f-7a6b5c4d3e2f",
            "5f0c6a4e-2b1d-4c3a-9e8f7-a6b5c4d3e2f",
            "5f0c6a4e-2b1d-4c3a-9e8f-7a6b5c4d3e2g",
            "",
        ] {
            assert_eq!(other.parse::<PaymentId>(), Err(InvalidId), "{other}");
            assert_eq!(other.parse::<ProjectId>(), Err(InvalidId), "{other}");
        }
    }
}
