//! [`Cabinet`]: the handle the cabinet's jobs hang on (users, sign-in, two-factor, sessions,
//! slots, the audit log, each in a module of its own), with the service, the store and the
//! settings they share, and the retention sweep.

use std::sync::Arc;

use payments_core::service::PaymentService;
use payments_core::{ApiError, Timestamp};

use super::config::{CabinetConfig, AUDIT_PURGE_BATCH, AUDIT_PURGE_BATCHES};
use super::model::{Purged, SignInError};
use super::passwords::PasswordPool;
use super::refusals::Refusals;
use crate::store::{CabinetStore, CabinetStoreExt};

/// The web cabinet over the service and its store.
#[derive(Clone)]
pub struct Cabinet {
    pub(super) service: PaymentService,
    pub(super) store: Arc<dyn CabinetStore>,
    pub(super) config: CabinetConfig,
    /// The threads that run password checks ([`CabinetConfig::password_checks`](super::CabinetConfig::password_checks)).
    pub(super) checks: Arc<PasswordPool>,
    /// Anonymous refusals (unknown accounts, throttled attempts) per source, for the audit
    /// log's aggregation (`audit_attempt`).
    pub(super) refusals: Arc<std::sync::Mutex<Refusals>>,
}

impl std::fmt::Debug for Cabinet {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Cabinet")
            .field("config", &self.config)
            .finish_non_exhaustive()
    }
}

impl Cabinet {
    /// The cabinet over `service` and `store`, the store of the cabinet's own records (the
    /// bundled SQLite and PostgreSQL stores keep them in the service's database: pass the same
    /// store twice).
    pub fn new(
        service: PaymentService,
        store: Arc<dyn CabinetStore>,
        config: CabinetConfig,
    ) -> Cabinet {
        let checks = Arc::new(PasswordPool::new(config.password_checks));
        Cabinet {
            service,
            store,
            config,
            checks,
            refusals: Arc::default(),
        }
    }

    /// The payment service.
    pub fn service(&self) -> &PaymentService {
        &self.service
    }

    /// The cabinet's store.
    pub fn store(&self) -> &Arc<dyn CabinetStore> {
        &self.store
    }

    /// The settings.
    pub fn config(&self) -> &CabinetConfig {
        &self.config
    }

    pub(super) fn now(&self) -> Timestamp {
        self.service.ports().clock.now()
    }

    pub(super) fn rng(&self) -> &dyn payments_core::RandomSource {
        self.service.ports().rng.as_ref()
    }

    /// Hashes a new password on the password pool (waiting at most
    /// [`CabinetConfig::password_wait`](super::CabinetConfig::password_wait) for a turn).
    pub(super) async fn hash(&self, password: &str) -> Result<String, SignInError> {
        let rng = self.service.ports().rng.clone();
        self.checks
            .hash(self.config.password_wait, password, rng)
            .await
    }

    /// Whether `password` matches `stored` (a decoy hash is checked when there is none, so
    /// that an unknown account takes as long). Waits for a check's turn first.
    pub(super) async fn verify(
        &self,
        password: &str,
        stored: Option<&str>,
    ) -> Result<bool, SignInError> {
        self.checks
            .verify(self.config.password_wait, password, stored)
            .await
    }

    /// Deletes sessions past their timeouts, failures older than the longest throttling
    /// window, one-time slots past their expiry and audit records past [`CabinetConfig::audit_retention`](super::CabinetConfig::audit_retention) or beyond
    /// [`CabinetConfig::audit_max_records`](super::CabinetConfig::audit_max_records) (in batches of [`AUDIT_PURGE_BATCH`], at most
    /// [`AUDIT_PURGE_BATCHES`] a call); the server runs it on a timer.
    pub async fn purge(&self) -> Result<Purged, ApiError> {
        let now = self.now();
        let sessions = self
            .store
            .purge_sessions(
                now.saturating_sub(self.config.idle_timeout),
                now.saturating_sub(self.config.absolute_timeout),
            )
            .await?;
        let window = self
            .config
            .account_limit
            .window
            .max(self.config.code_limit.window)
            .max(self.config.address_limit.window);
        let failures = self
            .store
            .purge_failures(now.saturating_sub(window))
            .await?;
        let before = self
            .config
            .audit_retention
            .map_or(Timestamp::from_unix_millis(i64::MIN), |keep| {
                now.saturating_sub(keep)
            });
        let mut audit = 0;
        for _ in 0..AUDIT_PURGE_BATCHES {
            let n = self
                .store
                .delete_cabinet_audit(before, self.config.audit_max_records, AUDIT_PURGE_BATCH)
                .await?;
            audit += n;
            if n < AUDIT_PURGE_BATCH as u64 {
                break;
            }
        }
        let slots = self
            .store
            .delete_expired_slots(now, self.config.slots_max)
            .await?;
        Ok(Purged {
            sessions,
            failures,
            audit,
            slots,
        })
    }
}
