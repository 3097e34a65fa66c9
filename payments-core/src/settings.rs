//! The named settings kept in the store, typed.
//!
//! The store keeps settings as text under a name ([`SettingStore::setting`] and
//! [`SettingStore::upsert_setting`]: one primitive for every backend). Code does not use those
//! directly: each setting is a [`Setting`] constant with its name and value type, so a name is
//! written once, a value is parsed in one place, and a value that does not parse is
//! [`StoreError::Corrupt`] instead of a silent default. The core's settings are here; an
//! adapter declares its own the same way (the server's environment, the sandbox's requisite
//! sequence).
//!
//! ```
//! use payments_core::settings::Setting;
//!
//! /// How many widgets were made.
//! const WIDGETS: Setting<u64> = Setting::new("example.widgets");
//!
//! # #[cfg(feature = "testing")]
//! futures_executor::block_on(async {
//!     let store = payments_core::testing::MemoryStore::new();
//!     assert_eq!(WIDGETS.get(&store).await.unwrap(), None);
//!     WIDGETS.set(&store, &41).await.unwrap();
//!     assert_eq!(WIDGETS.get(&store).await.unwrap(), Some(41));
//! });
//! ```

use std::fmt::Display;
use std::marker::PhantomData;
use std::str::FromStr;

use crate::store::{SettingStore, StoreError};

/// A setting named `name` whose value is a `T`, stored as its `Display` text and read back with
/// its `FromStr`.
pub struct Setting<T> {
    name: &'static str,
    value: PhantomData<fn() -> T>,
}

impl<T> std::fmt::Debug for Setting<T> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_tuple("Setting").field(&self.name).finish()
    }
}

impl<T> Clone for Setting<T> {
    fn clone(&self) -> Self {
        *self
    }
}

impl<T> Copy for Setting<T> {}

impl<T: FromStr + Display> Setting<T> {
    /// The setting stored under `name`.
    pub const fn new(name: &'static str) -> Setting<T> {
        Setting {
            name,
            value: PhantomData,
        }
    }

    /// The name it is stored under.
    pub const fn name(&self) -> &'static str {
        self.name
    }

    /// The stored value; `None` when it was never set. A stored text that does not parse as a
    /// `T` is [`StoreError::Corrupt`].
    pub async fn get<S: SettingStore + ?Sized>(&self, store: &S) -> Result<Option<T>, StoreError> {
        match store.setting(self.name).await? {
            None => Ok(None),
            Some(text) => text.parse().map(Some).map_err(|_| {
                StoreError::Corrupt(format!("the setting {} holds {text:?}", self.name))
            }),
        }
    }

    /// Stores `value`.
    pub async fn set<S: SettingStore + ?Sized>(
        &self,
        store: &S,
        value: &T,
    ) -> Result<(), StoreError> {
        store.upsert_setting(self.name, &value.to_string()).await
    }

    /// Stores `value` unless a value is stored; `true` when this call stored it (of several
    /// nodes at once, exactly one).
    pub async fn insert<S: SettingStore + ?Sized>(
        &self,
        store: &S,
        value: &T,
    ) -> Result<bool, StoreError> {
        store.insert_setting(self.name, &value.to_string()).await
    }
}

/// A family of settings of one type, one per key: `prefix.key` (the state of each
/// provisioning, for example, keyed by merchant).
pub struct SettingFamily<T> {
    prefix: &'static str,
    value: PhantomData<fn() -> T>,
}

impl<T> std::fmt::Debug for SettingFamily<T> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_tuple("SettingFamily").field(&self.prefix).finish()
    }
}

impl<T: FromStr + Display> SettingFamily<T> {
    /// The settings stored under `prefix.<key>`.
    pub const fn new(prefix: &'static str) -> SettingFamily<T> {
        SettingFamily {
            prefix,
            value: PhantomData,
        }
    }

    fn name(&self, key: &dyn Display) -> String {
        format!("{}.{key}", self.prefix)
    }

    /// The value stored for `key`; `None` when it was never set. A stored text that does not
    /// parse as a `T` is [`StoreError::Corrupt`].
    pub async fn get<S: SettingStore + ?Sized>(
        &self,
        store: &S,
        key: &(dyn Display + Sync),
    ) -> Result<Option<T>, StoreError> {
        let name = self.name(key);
        match store.setting(&name).await? {
            None => Ok(None),
            Some(text) => text
                .parse()
                .map(Some)
                .map_err(|_| StoreError::Corrupt(format!("the setting {name} holds {text:?}"))),
        }
    }

    /// Stores `value` for `key`.
    pub async fn set<S: SettingStore + ?Sized>(
        &self,
        store: &S,
        key: &(dyn Display + Sync),
        value: &T,
    ) -> Result<(), StoreError> {
        store
            .upsert_setting(&self.name(key), &value.to_string())
            .await
    }

    /// Removes the value of `key`; `false` when there was none.
    pub async fn delete<S: SettingStore + ?Sized>(
        &self,
        store: &S,
        key: &(dyn Display + Sync),
    ) -> Result<bool, StoreError> {
        store.delete_setting(&self.name(key)).await
    }

    /// Every key of the family with its value, in bytewise order of the keys. A stored text
    /// that does not parse is that key's [`StoreError::Corrupt`], beside the others' values.
    pub async fn list<S: SettingStore + ?Sized>(
        &self,
        store: &S,
    ) -> Result<Vec<(String, Result<T, StoreError>)>, StoreError> {
        let prefix = format!("{}.", self.prefix);
        let found = store.settings_with_prefix(&prefix).await?;
        Ok(found
            .into_iter()
            .map(|(name, text)| {
                let value = text
                    .parse()
                    .map_err(|_| StoreError::Corrupt(format!("the setting {name} holds {text:?}")));
                (name[prefix.len()..].to_string(), value)
            })
            .collect())
    }
}

/// Why callback dispatch is held (who held it, when, why); empty when it is not held. Every
/// dispatcher over the store checks it before claiming.
pub const CALLBACK_HOLD: Setting<String> = Setting::new("callbacks.hold");

/// The SHA-256 (hex) of the single unnamed operator token of early versions; empty once it is
/// replaced by named tokens.
pub const LEGACY_OPERATOR_TOKEN_SHA256: Setting<String> = Setting::new("operator.token_sha256");

/// What a readiness check writes to prove the store takes writes.
pub const WRITE_PROBE: Setting<String> = Setting::new(crate::store::WRITE_PROBE_SETTING);

/// The environment the database belongs to (`sandbox` or `production`), recorded once by
/// [`ServiceState::record_environment`](crate::service::ServiceState::record_environment):
/// tokens issued in one environment carry its prefix and fail in the other.
pub const ENVIRONMENT: Setting<crate::auth::Environment> = Setting::new("server.environment");

/// The id of the key the database's secrets and requisites are sealed with
/// ([`SealingKeys::current_id`](crate::sealing::SealingKeys::current_id)), recorded by the first
/// node that serves it and replaced when a re-seal completes under a new key
/// ([`ServiceState::check_sealing_key`](crate::service::ServiceState::check_sealing_key)).
pub const SEALING_KEY: Setting<String> = Setting::new("secrets.key_id");

/// What a readiness check reads to prove the store answers reads (never written).
pub const READ_PROBE: Setting<String> = Setting::new("readyz.probe");

#[cfg(all(test, feature = "testing"))]
mod tests {
    use super::*;
    use crate::testing::MemoryStore;

    #[test]
    fn a_value_round_trips_and_a_bad_one_is_corrupt_not_a_default() {
        futures_executor::block_on(async {
            const N: Setting<u64> = Setting::new("test.n");
            let store = MemoryStore::new();
            assert_eq!(N.get(&store).await, Ok(None));
            N.set(&store, &7).await.expect("set");
            assert_eq!(N.get(&store).await, Ok(Some(7)));
            assert_eq!(store.setting("test.n").await, Ok(Some("7".to_string())));
            store.upsert_setting("test.n", "seven").await.expect("put");
            assert!(
                matches!(N.get(&store).await, Err(StoreError::Corrupt(m)) if m.contains("test.n")),
                "a stored text that does not parse is corrupt"
            );
        });
    }

    #[test]
    fn a_family_lists_its_own_keys_only_each_parsed_and_deletes_one() {
        futures_executor::block_on(async {
            const F: SettingFamily<u64> = SettingFamily::new("test.f");
            let store = MemoryStore::new();
            assert_eq!(F.list(&store).await, Ok(Vec::new()));
            F.set(&store, &"b.x", &2).await.expect("set");
            F.set(&store, &"a", &1).await.expect("set");
            store
                .upsert_setting("test.f.c", "three")
                .await
                .expect("put");
            // Not members: another family whose name starts the same, and the bare prefix.
            store.upsert_setting("test.fg.d", "4").await.expect("put");
            store.upsert_setting("test.f", "5").await.expect("put");
            let listed = F.list(&store).await.expect("list");
            let keys: Vec<&str> = listed.iter().map(|(k, _)| k.as_str()).collect();
            assert_eq!(keys, ["a", "b.x", "c"]);
            assert_eq!(listed[0].1, Ok(1));
            assert_eq!(listed[1].1, Ok(2));
            assert!(
                matches!(&listed[2].1, Err(StoreError::Corrupt(m)) if m.contains("test.f.c")),
                "{listed:?}"
            );
            assert_eq!(F.delete(&store, &"a").await, Ok(true));
            assert_eq!(F.delete(&store, &"a").await, Ok(false));
            assert_eq!(F.get(&store, &"a").await, Ok(None));
            assert_eq!(F.list(&store).await.expect("list").len(), 2);
        });
    }
}
