//! What authentication reads found, kept while the directory does not change.
//!
//! Every request reads its token, project, merchant and key. Reading them is cheap; decoding
//! them (a project's contract, allow-list and callback address, the ids) cost about a tenth of
//! a create's instructions. The cache keeps the decoded rows of known tokens, tagged with the
//! directory version they were read at (`directory_version`, moved by triggers in the
//! transaction of every change to merchants, projects, tokens or keys, whoever writes it). A
//! request still opens its read transaction and reads the version, in the same snapshot as the
//! rows it would read: the kept rows are served only when the version is the one they were read
//! at, so a revoked token or key, a paused project or a changed allow-list applies to the next
//! request, as it did without the cache. Unknown tokens and unknown key ids are not kept (a flood
//! of made-up ones would only push out the real lookups); the cache is emptied when it reaches
//! its capacity.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, MutexGuard};

use payments_core::store::{AuthLookup, StoreError};
use payments_core::KeyId;
use rusqlite::Connection;

use crate::directory;

/// Kept lookups at most; the cache starts over when full.
const CAPACITY: usize = 1024;

/// Authentication lookups of one store, valid at one directory version.
#[derive(Debug, Default)]
pub(crate) struct AuthCache {
    kept: Mutex<Kept>,
}

/// The lookups of one token, with the key id each asked for.
type TokenLookups = Vec<(Option<KeyId>, Arc<AuthLookup>)>;

#[derive(Debug, Default)]
struct Kept {
    /// The directory version every entry was read at.
    version: i64,
    /// By token hash: the lookups with each key id asked for (usually one). Shared, so that a
    /// hit holds the lock only to take a reference: the copy handed out is made outside it.
    entries: HashMap<[u8; 32], TokenLookups>,
    len: usize,
}

impl AuthCache {
    /// [`directory::auth_lookup`] at the snapshot's directory version: kept rows when they were
    /// read at that version, else read (and kept when the token exists). Call inside
    /// [`directory::snapshot`], so that the version and the rows are of one snapshot.
    pub(crate) fn lookup(
        &self,
        conn: &Connection,
        hash: &[u8; 32],
        keyid: Option<&KeyId>,
    ) -> Result<AuthLookup, StoreError> {
        let version = directory::directory_version(conn)?;
        let hit = {
            let kept = self.lock();
            if kept.version == version {
                kept.entries
                    .get(hash)
                    .and_then(|list| list.iter().find(|(k, _)| k.as_ref() == keyid))
                    .map(|(_, found)| Arc::clone(found))
            } else {
                None
            }
        };
        if let Some(found) = hit {
            return Ok(AuthLookup::clone(&found));
        }
        let found = directory::auth_lookup(conn, hash, keyid)?;
        // Known tokens only, and only with the key asked for: made-up key ids sent with a
        // real token must not push the real lookups out.
        if found.token.is_some() && (keyid.is_none() || found.key.is_some()) {
            let mut kept = self.lock();
            // Versions only grow: a read of an older snapshot never replaces newer entries.
            if version > kept.version {
                kept.entries.clear();
                kept.len = 0;
                kept.version = version;
            }
            if version == kept.version {
                if kept.len >= CAPACITY {
                    kept.entries.clear();
                    kept.len = 0;
                }
                let list = kept.entries.entry(*hash).or_default();
                if !list.iter().any(|(k, _)| k.as_ref() == keyid) {
                    list.push((keyid.cloned(), Arc::new(found.clone())));
                    kept.len += 1;
                }
            }
        }
        Ok(found)
    }

    fn lock(&self) -> MutexGuard<'_, Kept> {
        self.kept
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }
}
