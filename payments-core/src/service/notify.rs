//! Provider notifications: the upstream reports that the transfer of a payment was confirmed
//! (optionally with another amount) or failed. They are the operator's confirm and cancel,
//! decided here and carried out by the same state machine, and they are applied once per
//! upstream notification id (the id is recorded in the same store write as the change).
//!
//! The order of the checks, each answered with nothing changed and nothing recorded:
//!
//! | check | answer |
//! |---|---|
//! | signature and timestamp ([`CallbackVerifier`], 300 s) | `401 signature_invalid` |
//! | the same signed request (timestamp and body) from the same provider was accepted before | `409 request_replayed` |
//! | the body | `400 bad_request` |
//! | the payment | `404 payment_not_found` |
//! | the notification id was applied before | `200`, `applied: false` |
//! | the state machine refuses the change | `409 invalid_transition` |
//! | otherwise | `200`, `applied: true` (the merchant callback is queued with it) |
//!
//! Only an accepted request (`200`) is remembered as a signed request, per provider: its
//! replay is `409 request_replayed`.

use std::time::Duration;

use serde::Deserialize;
use sha2::{Digest, Sha256};
use uuid::Uuid;

use super::Payments;
use crate::amount::Amount;
use crate::callback::{CallbackVerifier, CallbackVerifyError};
use crate::event::OutboxEvent;
use crate::history::ChangeSource;
use crate::ids::{PaymentId, ProjectId};
use crate::payment::Payment;
use crate::project::AuditRecord;
use crate::store::{NonceUse, StoreError};
use crate::transition::{self, TransitionError, Trigger};
use crate::{ApiError, ErrorCode};

/// How long an applied notification id is remembered: a repeat within it answers `200` and
/// changes nothing. Upstreams stop retrying a notification long before.
pub const NOTIFICATION_ID_RETENTION: Duration = Duration::from_secs(30 * 24 * 60 * 60);

/// The longest accepted `notification_id`, in bytes.
pub const NOTIFICATION_ID_MAX_LEN: usize = 128;

/// The longest accepted `reason`, in characters.
pub const NOTIFICATION_REASON_MAX_CHARS: usize = 500;

/// The nonce scope of the upstream's signed requests and notification ids: the nil UUID, which
/// no project has (project ids are random), so these keys never meet a merchant's nonces.
pub const UPSTREAM_NONCE_SCOPE: ProjectId = ProjectId::from_uuid(Uuid::nil());

/// What the upstream reports about a transfer.
#[non_exhaustive]
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum TransferReport {
    /// The money arrived: the payment is confirmed, with `amount` when another amount arrived.
    Confirmed {
        /// The amount that arrived, if given.
        amount: Option<Amount>,
    },
    /// The transfer failed or will not come: the payment is canceled.
    Failed {
        /// Why, for the log.
        reason: Option<String>,
    },
}

/// A provider notification, parsed from its body.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ProviderNotification {
    /// The upstream's id of this notification (1-128 visible ASCII characters); the same id
    /// is the same notification.
    pub notification_id: String,
    /// The payment it is about.
    pub payment_id: PaymentId,
    /// What happened.
    pub report: TransferReport,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct Wire {
    notification_id: String,
    payment_id: String,
    status: String,
    #[serde(default)]
    amount: Option<serde_json::Value>,
    #[serde(default)]
    reason: Option<String>,
}

fn bad(message: impl Into<String>) -> NotificationError {
    NotificationError::Invalid(message.into())
}

/// Why a provider notification was refused, each with the stable code of its answer
/// ([`NotificationError::code`]); the message of that answer is the error's text.
#[non_exhaustive]
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum NotificationError {
    /// The body is not a notification (`400 bad_request`).
    #[error("{0}")]
    Invalid(String),
    /// The signature or its timestamp does not verify (`401 signature_invalid`).
    #[error("notification signature: {0}")]
    Signature(#[from] CallbackVerifyError),
    /// The same signed request was received before (`409 request_replayed`).
    #[error("this signed notification was received before; sign every attempt anew")]
    Replayed,
    /// No such payment (`404 payment_not_found`).
    #[error("payment not found")]
    PaymentNotFound,
    /// No such appeal, or an appeal sent to another provider (`404 appeal_not_found`).
    #[error("appeal not found")]
    AppealNotFound,
    /// The state machine refuses the report in the payment's status
    /// (`409 invalid_transition`).
    #[error(transparent)]
    Transition(#[from] TransitionError),
    /// Other writers changed the payment every time it was read (`503`, `Retry-After: 1`).
    #[error("the payment is changing too often; try again")]
    Contended,
    /// The store failed (`503`, or `500` for corrupt data).
    #[error(transparent)]
    Store(#[from] StoreError),
}

impl NotificationError {
    /// The stable code it is answered with.
    pub fn code(&self) -> ErrorCode {
        match self {
            NotificationError::Invalid(_) => ErrorCode::BadRequest,
            NotificationError::Signature(_) => ErrorCode::SignatureInvalid,
            NotificationError::Replayed => ErrorCode::RequestReplayed,
            NotificationError::PaymentNotFound => ErrorCode::PaymentNotFound,
            NotificationError::AppealNotFound => ErrorCode::AppealNotFound,
            NotificationError::Transition(e) => ApiError::from(e.clone()).code,
            NotificationError::Contended => ErrorCode::ServiceUnavailable,
            NotificationError::Store(e) => ApiError::from(e.clone()).code,
        }
    }
}

impl From<NotificationError> for ApiError {
    fn from(e: NotificationError) -> ApiError {
        match e {
            NotificationError::Transition(e) => e.into(),
            NotificationError::Store(e) => e.into(),
            NotificationError::Contended => {
                ApiError::new(e.code(), e.to_string()).with_retry_after(1)
            }
            e => ApiError::new(e.code(), e.to_string()),
        }
    }
}

impl ProviderNotification {
    /// Parses a notification body: `notification_id`, `payment_id`, `status` (`confirmed` or
    /// `failed`), optional `amount` (with `confirmed`: a JSON number or decimal string) and
    /// optional `reason`; unknown fields are refused. Anything else is `400 bad_request`.
    pub fn parse(body: &[u8]) -> Result<ProviderNotification, NotificationError> {
        let wire: Wire =
            serde_json::from_slice(body).map_err(|e| bad(format!("invalid notification: {e}")))?;
        let id = wire.notification_id;
        if id.is_empty()
            || id.len() > NOTIFICATION_ID_MAX_LEN
            || !id.bytes().all(|b| b.is_ascii_graphic())
        {
            return Err(bad(format!(
                "notification_id: 1 to {NOTIFICATION_ID_MAX_LEN} visible ASCII characters"
            )));
        }
        let payment_id = wire
            .payment_id
            .parse()
            .map_err(|_| bad("payment_id: not a payment id"))?;
        if wire
            .reason
            .as_ref()
            .is_some_and(|r| r.chars().count() > NOTIFICATION_REASON_MAX_CHARS)
        {
            return Err(bad(format!(
                "reason: at most {NOTIFICATION_REASON_MAX_CHARS} characters"
            )));
        }
        let report = match wire.status.as_str() {
            "confirmed" => TransferReport::Confirmed {
                amount: match &wire.amount {
                    None | Some(serde_json::Value::Null) => None,
                    Some(v) => Some(Amount::from_json(v).map_err(|e| bad(format!("amount: {e}")))?),
                },
            },
            "failed" => {
                if wire.amount.as_ref().is_some_and(|a| !a.is_null()) {
                    return Err(bad("amount: only a confirmed transfer has an amount"));
                }
                TransferReport::Failed {
                    reason: wire.reason,
                }
            }
            other => {
                return Err(bad(format!(
                    "status: expected confirmed or failed, got {other:?}"
                )))
            }
        };
        Ok(ProviderNotification {
            notification_id: id,
            payment_id,
            report,
        })
    }

    /// The operation it asks for: the operator's confirm or cancel.
    pub fn trigger(&self) -> Trigger {
        match &self.report {
            TransferReport::Confirmed { amount } => Trigger::Confirm { amount: *amount },
            TransferReport::Failed { .. } => Trigger::Cancel,
        }
    }
}

/// A notification as received: the signature headers' values and the raw body.
#[derive(Debug, Clone, Copy)]
pub struct SignedNotification<'a> {
    /// The `X-Callback-Timestamp` value.
    pub timestamp: &'a str,
    /// The `X-Callback-Signature` value.
    pub signature: &'a str,
    /// The body bytes as received.
    pub body: &'a [u8],
}

/// What a notification did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NotificationOutcome {
    /// The notification.
    pub notification: ProviderNotification,
    /// `true`: applied now; `false`: its id was applied before, nothing changed.
    pub applied: bool,
    /// The payment after it.
    pub payment: Payment,
    /// The merchant callback queued with it, if any.
    pub event: Option<OutboxEvent>,
}

impl Payments<'_> {
    /// Applies a signed provider notification (see the module `service::notify` for the checks and
    /// their answers). `verifier` holds the upstream's secrets; the timestamp tolerance is
    /// the verifier's (300 s, as for callbacks).
    pub async fn apply_provider_notification(
        self,
        verifier: &CallbackVerifier,
        signed: SignedNotification<'_>,
    ) -> Result<NotificationOutcome, NotificationError> {
        self.apply_provider_notification_from(verifier, signed, None)
            .await
    }

    /// [`apply_provider_notification`](Self::apply_provider_notification) from the provider
    /// `from` (verified with its secrets): a payment routed to another provider is not this
    /// provider's to report on, and is answered as not found.
    pub async fn apply_provider_notification_from(
        self,
        verifier: &CallbackVerifier,
        signed: SignedNotification<'_>,
        from: Option<&crate::provider::ProviderName>,
    ) -> Result<NotificationOutcome, NotificationError> {
        let replay = self.check_signed(verifier, signed, from).await?;
        let notification = ProviderNotification::parse(signed.body)?;
        let outcome = self.apply_notification(notification, from).await?;
        // Accepted (applied now, or its id was applied before): the same signed request from
        // this provider is a replay from now on. Two at once may both be accepted; the
        // notification id lets only one of them apply.
        self.remember_signed(replay).await?;
        Ok(outcome)
    }

    /// Verifies a signed request from the upstream (`from`: the named provider's path) and
    /// checks that it was not accepted before; answers its replay key, recorded by
    /// [`remember_signed`](Self::remember_signed) once the request is accepted (a request
    /// refused after this check records nothing).
    pub(super) async fn check_signed(
        self,
        verifier: &CallbackVerifier,
        signed: SignedNotification<'_>,
        from: Option<&crate::provider::ProviderName>,
    ) -> Result<SignedKey, NotificationError> {
        let now = self.ports.clock.now();
        verifier
            .verify(signed.timestamp, signed.signature, signed.body, now)
            .map_err(NotificationError::Signature)?;
        // A signed request is accepted while its timestamp is within the tolerance either way
        // of the clock, so its replay key must outlive twice the tolerance (and some skew).
        let key = SignedKey {
            key: replay_key(signed, from),
            keep: verifier.tolerance() * 2 + Duration::from_secs(60),
        };
        let replay = NonceUse {
            project: UPSTREAM_NONCE_SCOPE,
            nonce: &key.key,
            now,
            expires_at: now + key.keep,
        };
        if !self.ports.store.commit_change_once(replay, None).await? {
            return Err(NotificationError::Replayed);
        }
        Ok(key)
    }

    /// Records an accepted signed request: its replay is `409 request_replayed` from now on.
    pub(super) async fn remember_signed(self, key: SignedKey) -> Result<(), NotificationError> {
        let now = self.ports.clock.now();
        self.ports
            .store
            .use_nonce(UPSTREAM_NONCE_SCOPE, &key.key, now, now + key.keep)
            .await?;
        Ok(())
    }

    /// Applies a verified, parsed notification once per notification id.
    async fn apply_notification(
        self,
        notification: ProviderNotification,
        from: Option<&crate::provider::ProviderName>,
    ) -> Result<NotificationOutcome, NotificationError> {
        let id_key = format!("upstream-notification:{}", notification.notification_id);
        let actor = format!("upstream notification:{}", notification.notification_id);
        let trigger = notification.trigger();
        let action = format!("payment.{}", trigger.name());
        let repeat = |payment: Payment| NotificationOutcome {
            notification: notification.clone(),
            applied: false,
            payment,
            event: None,
        };
        for _ in 0..8 {
            let before = self
                .ports
                .store
                .payment(notification.payment_id)
                .await?
                .ok_or(NotificationError::PaymentNotFound)?;
            if let (Some(from), Some(route)) = (from, &before.route) {
                if &route.provider != from {
                    return Err(NotificationError::PaymentNotFound);
                }
            }
            let now = self.ports.clock.now();
            let key = NonceUse {
                project: UPSTREAM_NONCE_SCOPE,
                nonce: &id_key,
                now,
                expires_at: now + NOTIFICATION_ID_RETENTION,
            };
            let t = match transition::apply(&before, trigger.clone(), now, self.ports.rng.as_ref())
            {
                Ok(t) => t,
                // A refusal is final unless the id was applied before (then the refusal is
                // just the applied change seen again).
                Err(refused) => {
                    return if self.ports.store.commit_change_once(key, None).await? {
                        Err(refused.into())
                    } else {
                        Ok(repeat(before))
                    };
                }
            };
            let audit = AuditRecord {
                at: t.payment.updated_at,
                actor: actor.clone(),
                action: action.clone(),
                target: before.id.to_string(),
                before: super::operate::payment_json(&before),
                after: super::operate::payment_json(&t.payment),
            };
            match (self.commit_once(key, &before, &t, audit, ChangeSource::Provider)).await {
                Ok(Some(event)) => {
                    return Ok(NotificationOutcome {
                        notification,
                        applied: true,
                        payment: t.payment,
                        event,
                    })
                }
                Ok(None) => return Ok(repeat(before)),
                Err(StoreError::Conflict) => continue,
                Err(e) => return Err(e.into()),
            }
        }
        Err(NotificationError::Contended)
    }
}

/// The replay key of an accepted signed request and how long it is kept.
pub(super) struct SignedKey {
    key: String,
    keep: Duration,
}

/// The replay key of a signed request from `from` (`None`: the unnamed path): its provider,
/// timestamp and body, so that one provider's request never makes another's a replay.
fn replay_key(
    signed: SignedNotification<'_>,
    from: Option<&crate::provider::ProviderName>,
) -> String {
    let mut digest = Sha256::new();
    digest.update(signed.timestamp.trim_matches([' ', '\t']).as_bytes());
    digest.update(b".");
    digest.update(signed.body);
    let digest = hex::encode(digest.finalize());
    match from {
        Some(provider) => format!("upstream-request:{provider}:{digest}"),
        None => format!("upstream-request:{digest}"),
    }
}
