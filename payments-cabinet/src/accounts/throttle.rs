//! Throttling: every attempt is counted under its keys (the account, the user's codes, the
//! client address) before it is checked, so that at most a limit's attempts are checked per
//! window, on any number of nodes.

use std::time::Duration;

use payments_core::ids::UserId;
use payments_core::store::StoreError;
use payments_core::Timestamp;

use super::cabinet::Cabinet;
use super::config::Limit;
use super::model::{source_of, Client, SignInError};
use crate::secrets;
use crate::store::CabinetStoreExt;

/// The throttle's key of an account: `account:<e-mail>`, or, for an input longer than any
/// e-mail address (up to the 64 KiB of a form), the hex SHA-256 of it, so that junk does
/// not grow the failures table by its own size.
pub(super) fn account_key(email: &str) -> String {
    if email.len() <= 254 {
        format!("account:{email}")
    } else {
        let digest: String = secrets::token_hash(email)
            .iter()
            .map(|b| format!("{b:02x}"))
            .collect();
        format!("account-sha256:{digest}")
    }
}

impl Cabinet {
    /// Counts an attempt under each of `keys` before it is checked: records it as a failure at
    /// the returned time, then counts what each window holds. An attempt that finds
    /// `limit.attempts` others in a window is forgotten again (it is not checked, so it is no
    /// failure) and refused. Each attempt counts those recorded before it, so of any number
    /// of simultaneous attempts, on any number of nodes, at most `limit.attempts` are checked
    /// per window.
    pub(super) async fn begin_attempt(
        &self,
        keys: &[(String, Limit)],
    ) -> Result<Timestamp, SignInError> {
        let now = self.now();
        for (key, _) in keys {
            self.store.insert_failure(key, now).await?;
        }
        let mut until: Option<Timestamp> = None;
        for (key, limit) in keys {
            if let Some(t) = self.over_limit(key, *limit, now).await? {
                until = Some(until.map_or(t, |u| u.max(t)));
            }
        }
        match until {
            Some(until) => {
                self.forget_attempt(keys, now).await?;
                Err(SignInError::Throttled { until })
            }
            None => Ok(now),
        }
    }

    /// `Some(until)` when `key` holds `limit.attempts` failures or attempts besides the one
    /// recorded at `now` within the window.
    pub(super) async fn over_limit(
        &self,
        key: &str,
        limit: Limit,
        now: Timestamp,
    ) -> Result<Option<Timestamp>, StoreError> {
        let mut times = self
            .store
            // A failure counts for `window` after it: at `failure + window` it no longer does.
            .find_failures(
                key,
                now.saturating_sub(limit.window) + Duration::from_millis(1),
                10_000,
            )
            .await?;
        if let Some(own) = times.iter().rposition(|t| *t == now) {
            times.remove(own);
        }
        if limit.attempts == 0 || times.len() < limit.attempts {
            return Ok(None);
        }
        Ok(Some(times[times.len() - limit.attempts] + limit.window))
    }

    /// Forgets the attempt recorded at `at` under each of `keys`: it was not a failure.
    pub(super) async fn forget_attempt(
        &self,
        keys: &[(String, Limit)],
        at: Timestamp,
    ) -> Result<(), StoreError> {
        for (key, _) in keys {
            self.store.forget_attempt(key, at).await?;
        }
        Ok(())
    }

    /// A successful attempt: the first key's (the account's, the user's codes') failures are
    /// all forgotten, the others (the address's) lose this attempt only.
    pub(super) async fn attempt_succeeded(
        &self,
        keys: &[(String, Limit)],
        at: Timestamp,
    ) -> Result<(), StoreError> {
        if let Some(((first, _), rest)) = keys.split_first() {
            self.store.clear_failures(first).await?;
            self.forget_attempt(rest, at).await?;
        }
        Ok(())
    }

    pub(super) fn address_key(&self, client: &Client) -> Option<(String, Limit)> {
        client.address.map(|a| {
            (
                format!("address:{}", source_of(a)),
                self.config.address_limit,
            )
        })
    }

    pub(super) fn code_keys(&self, user: UserId, client: &Client) -> Vec<(String, Limit)> {
        let mut keys = vec![(format!("code:{user}"), self.config.code_limit)];
        keys.extend(self.address_key(client));
        keys
    }
}
