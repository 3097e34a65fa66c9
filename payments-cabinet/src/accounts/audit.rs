//! The cabinet's audit log: a record of each change and sign-in ([`AuditLog`]), the
//! aggregation of anonymous refusals, and the core's audit log for user administration.

use payments_core::ids::{MerchantId, UserId};
use payments_core::project::AuditRecord;
use payments_core::service::Actor;
use payments_core::store::StoreError;
use payments_core::ApiError;

use super::cabinet::Cabinet;
use super::model::{shown_email, source_of, Change, Client, Current};
use crate::store::{CabinetAuditRecord, UserRecord};

/// The cabinet's audit log ([`Cabinet::audit_log`](super::Cabinet::audit_log)).
#[derive(Debug, Clone, Copy)]
pub struct AuditLog<'a>(&'a Cabinet);

impl Cabinet {
    /// The cabinet's audit log.
    pub fn audit_log(&self) -> AuditLog<'_> {
        AuditLog(self)
    }
}

impl AuditLog<'_> {
    /// A cabinet audit record of `user`'s action from `client`.
    pub fn record(
        &self,
        user: &UserRecord,
        client: &Client,
        action: &str,
        success: bool,
    ) -> CabinetAuditRecord {
        self.0.record(user, client, action, success)
    }

    /// Appends a record to the cabinet's audit log.
    pub async fn append(&self, record: CabinetAuditRecord) -> Result<(), ApiError> {
        self.0.audit(record).await
    }

    /// A change to a project made in the cabinet, in the audit log of the project's merchant.
    pub async fn change(
        &self,
        current: &Current,
        client: &Client,
        change: Change<'_>,
    ) -> Result<(), ApiError> {
        let mut r = self.0.record(&current.user, client, change.action, true);
        r.merchant_id = Some(change.merchant);
        r.project_id = change.project;
        r.target = change.target.to_string();
        r.detail = change.detail;
        self.0.audit(r).await
    }
}

impl Cabinet {
    /// A cabinet audit record of `user`'s action from `client`.
    pub(super) fn record(
        &self,
        user: &UserRecord,
        client: &Client,
        action: &str,
        success: bool,
    ) -> CabinetAuditRecord {
        CabinetAuditRecord {
            at: self.now(),
            user_id: Some(user.id),
            email: user.email.clone(),
            address: client.address_text(),
            merchant_id: user.role.merchant(),
            project_id: None,
            action: action.to_string(),
            target: String::new(),
            success,
            detail: None,
        }
    }

    /// A refused password step in the audit log. A refusal that names no account, and every
    /// throttled one, is aggregated per source and window ([`Refusals`]): the row carries
    /// the count so far, and most such refusals write none. The e-mail is kept only when it
    /// is one.
    pub(super) async fn audit_attempt(
        &self,
        email: &str,
        user: Option<UserId>,
        merchant: Option<MerchantId>,
        client: &Client,
        action: &str,
        detail: &str,
    ) -> Result<(), StoreError> {
        let now = self.now();
        let mut detail = detail.to_string();
        if user.is_none() || detail == THROTTLED {
            let source = client.address.map_or_else(|| "unknown".into(), source_of);
            let key = format!("{source} {action} {detail}");
            let window = self.config.address_limit.window;
            let counted = self
                .refusals
                .lock()
                .unwrap_or_else(std::sync::PoisonError::into_inner)
                .count(key, now, window);
            let Some(count) = counted else {
                return Ok(());
            };
            detail = format!(
                "{detail}; attempt {count} from {source} in this {}-minute window (the log \
                 keeps the 1st, 2nd, 4th, 8th ...)",
                window.as_secs() / 60
            );
        }
        self.store
            .insert_cabinet_audit(&CabinetAuditRecord {
                at: now,
                user_id: user,
                email: shown_email(email),
                address: client.address_text(),
                merchant_id: merchant,
                project_id: None,
                action: action.to_string(),
                target: String::new(),
                success: false,
                detail: Some(detail),
            })
            .await
    }

    /// Appends a record to the cabinet's audit log.
    pub(super) async fn audit(&self, record: CabinetAuditRecord) -> Result<(), ApiError> {
        Ok(self.store.insert_cabinet_audit(&record).await?)
    }

    pub(super) async fn core_audit(
        &self,
        actor: &Actor,
        action: &str,
        user: &UserRecord,
        after: Option<String>,
    ) -> Result<(), ApiError> {
        Ok(self
            .service
            .store()
            .insert_audit(&AuditRecord {
                at: self.now(),
                actor: actor.0.clone(),
                action: action.to_string(),
                target: user.id.to_string(),
                before: None,
                after,
            })
            .await?)
    }
}

/// The audit detail of a refused step that was throttled: the result column already says
/// "refused", so the detail names the reason only.
pub(super) const THROTTLED: &str = "throttled: too many attempts";

pub(super) trait RecordExt {
    fn detail(self, d: &str) -> Self;
    fn target(self, t: String) -> Self;
}

impl RecordExt for CabinetAuditRecord {
    fn detail(mut self, d: &str) -> Self {
        self.detail = Some(d.to_string());
        self
    }
    fn target(mut self, t: String) -> Self {
        self.target = t;
        self
    }
}
