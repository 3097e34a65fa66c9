//! The request log's operations ([`crate::request_log`]): the writer's batches, the
//! cabinet's pages and integration health, and the purge by age, each under the service's
//! [`RequestLogPolicy`](crate::request_log::RequestLogPolicy).

use std::collections::BTreeMap;

use super::RequestLog;
use crate::project::Project;
use crate::request_log::{RequestLogEntry, RequestLogQuery};
use crate::store::{CredentialStoreExt, MerchantStoreExt, StoreError};
use crate::Timestamp;

/// The batch the purge by age deletes in: one writer job or one statement each.
pub const REQUEST_LOG_PURGE_BATCH: usize = 5_000;

/// A page of a project's request log, newest first.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RequestLogPage {
    /// The requests of the page.
    pub requests: Vec<RequestLogEntry>,
    /// Where the next page starts (`(at, id)` of the last request shown), when there is one.
    pub next: Option<(Timestamp, u64)>,
}

impl RequestLog<'_> {
    /// Writes a batch of logged requests, keeping each project's newest
    /// [`RequestLogPolicy::keep`](crate::request_log::RequestLogPolicy::keep).
    pub async fn record_requests(self, entries: &[RequestLogEntry]) -> Result<(), StoreError> {
        if entries.is_empty() {
            return Ok(());
        }
        let keep = self.config().request_log.keep;
        self.ports.store.insert_requests(entries, keep).await
    }

    /// A page of `query.project`'s request log as `query` asks, within the retention window
    /// (requests older than [`RequestLogPolicy::max_age`] are never shown, purged or not).
    ///
    /// [`RequestLogPolicy::max_age`]: crate::request_log::RequestLogPolicy::max_age
    pub async fn request_log(self, query: &RequestLogQuery) -> Result<RequestLogPage, StoreError> {
        let now = self.ports.clock.now();
        let since = self.config().request_log.since(now);
        let limit = query.limit.max(1);
        let mut q = query.clone();
        q.since = Some(q.since.map_or(since, |s| s.max(since)));
        q.limit = limit + 1;
        let mut requests = self.ports.store.find_requests(&q).await?;
        let more = requests.len() > limit;
        requests.truncate(limit);
        let next = more
            .then(|| requests.last().map(|e| (e.at, e.id)))
            .flatten();
        Ok(RequestLogPage { requests, next })
    }

    /// The other projects of `project`'s merchant that hold, not revoked, a key of each of
    /// `keyids` (those a page's `unknown keyid` diagnoses name,
    /// [`SignatureDiagnosis::keyid`](crate::request_log::SignatureDiagnosis::keyid)): a
    /// client that signs with the key of its merchant's other project is told which. Never a
    /// project of another merchant. Nothing is read for no keyid; else the projects and the
    /// keys of each of the merchant's other projects, once for the page.
    pub async fn key_owners(
        self,
        project: &Project,
        keyids: &[String],
    ) -> Result<BTreeMap<String, Project>, StoreError> {
        let mut owners = BTreeMap::new();
        if keyids.is_empty() {
            return Ok(owners);
        }
        let store = &self.ports.store;
        let siblings = store
            .projects()
            .await?
            .into_iter()
            .filter(|p| p.merchant_id == project.merchant_id && p.id != project.id);
        for sibling in siblings {
            let keys = store.keys(sibling.id).await?;
            for keyid in keyids {
                let held = keys
                    .iter()
                    .any(|k| k.revoked_at.is_none() && k.keyid.as_str() == keyid.as_str());
                if held {
                    owners
                        .entry(keyid.clone())
                        .or_insert_with(|| sibling.clone());
                }
            }
        }
        Ok(owners)
    }

    /// Deletes every logged request older than the retention, in batches of
    /// [`REQUEST_LOG_PURGE_BATCH`]; returns how many.
    pub async fn purge_request_log(self) -> Result<u64, StoreError> {
        let before = self.config().request_log.since(self.ports.clock.now());
        let mut deleted = 0;
        loop {
            let batch = self
                .ports
                .store
                .purge_requests(before, REQUEST_LOG_PURGE_BATCH)
                .await?;
            deleted += batch.deleted;
            if !batch.more {
                return Ok(deleted);
            }
        }
    }
}
