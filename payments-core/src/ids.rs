//! Identifiers: UUID newtypes for payments, projects, merchants, events and tokens, and the
//! signing key id string.

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
            type Err = uuid::Error;

            /// Parses any form `uuid` accepts (hyphenated, simple, braced, urn).
            fn from_str(s: &str) -> Result<Self, Self::Err> {
                Uuid::parse_str(s).map($name)
            }
        }
    };
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
