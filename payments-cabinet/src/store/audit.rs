//! The cabinet's audit log: every change made in the cabinet and every sign-in, successful or
//! not.

use async_trait::async_trait;
use payments_core::ids::{MerchantId, ProjectId, UserId};
use payments_core::store::StoreError;
use payments_core::Timestamp;

/// A cabinet event for the audit log: every change made in the cabinet and every sign-in,
/// successful or not, with the user and the client address.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CabinetAuditRecord {
    /// When.
    pub at: Timestamp,
    /// The user, when known (an unknown e-mail at sign-in has none).
    pub user_id: Option<UserId>,
    /// The e-mail the user signed in with or had.
    pub email: String,
    /// The client address.
    pub address: Option<String>,
    /// The merchant concerned (the user's, or the project's): its users see the record.
    pub merchant_id: Option<MerchantId>,
    /// The project concerned, if any.
    pub project_id: Option<ProjectId>,
    /// What (e.g. `sign_in.password`, `token.issue`).
    pub action: String,
    /// The object acted on (an id), or empty.
    pub target: String,
    /// `false` for a refused attempt.
    pub success: bool,
    /// More, as short text (never a secret).
    pub detail: Option<String>,
}

/// Which cabinet audit records [`CabinetAuditLog::find_cabinet_audit`] lists: every filter that is set
/// must hold.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct AuditQuery {
    /// Only this merchant's records (what its users see).
    pub merchant: Option<MerchantId>,
    /// Only this action (`sign_in.password`) or family of actions (`sign_in`: every
    /// `sign_in.*`, and `sign_in` itself).
    pub action: Option<String>,
    /// Only successes (`true`) or only refusals (`false`).
    pub success: Option<bool>,
    /// Only records with this e-mail (as stored: lower-case).
    pub email: Option<String>,
    /// Only records older than this cursor (a previous page's [`AuditPage::next`]).
    pub before: Option<AuditCursor>,
    /// At most this many.
    pub limit: usize,
}

impl AuditQuery {
    /// Whether `record` passes the filters (the cursor and the limit aside).
    pub fn matches(&self, record: &CabinetAuditRecord) -> bool {
        self.merchant.is_none_or(|m| record.merchant_id == Some(m))
            && self.success.is_none_or(|s| record.success == s)
            && self.email.as_deref().is_none_or(|e| record.email == e)
            && self.action.as_deref().is_none_or(|a| {
                record.action == a
                    || record
                        .action
                        .strip_prefix(a)
                        .is_some_and(|rest| rest.starts_with('.'))
            })
    }
}

/// A page of the cabinet audit log.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct AuditPage {
    /// The records, newest first.
    pub records: Vec<CabinetAuditRecord>,
    /// Where the next (older) page starts, when there are more records.
    pub next: Option<AuditCursor>,
}

impl AuditPage {
    /// The page of a query with `limit` from what a store found for it: at most `limit + 1`
    /// records, newest first, each with its sequence number. The one past the limit, if
    /// found, only says that there is a next page.
    pub fn of<R: std::borrow::Borrow<CabinetAuditRecord>>(
        found: Vec<(u64, R)>,
        limit: usize,
    ) -> AuditPage {
        let more = found.len() > limit;
        let mut next = None;
        let records = found
            .into_iter()
            .take(limit)
            .map(|(seq, r)| {
                next = Some(AuditCursor(seq));
                r.borrow().clone()
            })
            .collect();
        AuditPage {
            records,
            next: next.filter(|_| more),
        }
    }
}

/// A position in the cabinet audit log: the store's sequence number of a record. Opaque to
/// clients; it travels in page links as a decimal number.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct AuditCursor(pub u64);

impl std::fmt::Display for AuditCursor {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        self.0.fmt(f)
    }
}

impl std::str::FromStr for AuditCursor {
    type Err = std::num::ParseIntError;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        s.parse().map(AuditCursor)
    }
}

/// The cabinet's audit log, in the order records were inserted.
#[async_trait]
pub trait CabinetAuditLog: Send + Sync {
    /// Appends a record to the cabinet's audit log.
    async fn insert_cabinet_audit(&self, record: &CabinetAuditRecord) -> Result<(), StoreError>;
    /// A page of the records `query` asks for, newest first (in the order they were
    /// appended), with the cursor of the next page when there are more.
    async fn find_cabinet_audit(&self, query: &AuditQuery) -> Result<AuditPage, StoreError>;
    /// Retention: deletes records among the oldest `limit` that were made before `before` or
    /// that fall outside the newest `keep` (when set); returns how many. The age rule reads
    /// the oldest records only, so a record made earlier than an older neighbour waits for
    /// it (records are appended in time order, give or take the nodes' clock skew).
    async fn delete_cabinet_audit(
        &self,
        before: Timestamp,
        keep: Option<u64>,
        limit: usize,
    ) -> Result<u64, StoreError>;
}
