//! A payment's status history: every change of its status or amount, with its time, its
//! cause and who caused it, whether a callback followed or not.
//!
//! The state machine names the cause of each change ([`Transition::cause`]); the service
//! names its source when it commits the change, and the store writes the record in the
//! change's own transaction ([`PaymentChange::history`]). The creation is not a record: it is
//! read from the payment itself ([`history`]), so the history of a payment that never changed
//! is its creation alone.
//!
//! [`Transition::cause`]: crate::transition::Transition::cause
//! [`PaymentChange::history`]: crate::store::PaymentChange::history

use std::fmt;
use std::str::FromStr;

use crate::amount::{Amount, DecimalFormat};
use crate::clock::Timestamp;
use crate::ids::PaymentId;
use crate::payment::{Payment, PaymentStatus, UnknownValue};

/// One entry of a payment's history.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StatusChange {
    /// The payment.
    pub payment_id: PaymentId,
    /// The payment's version after the change (1 for the creation).
    pub version: u64,
    /// The status before; `None` for the creation and for a change not recorded.
    pub from: Option<PaymentStatus>,
    /// The status after.
    pub to: PaymentStatus,
    /// The payment's amount after the change.
    pub amount: Amount,
    /// When.
    pub at: Timestamp,
    /// What changed it.
    pub cause: ChangeCause,
    /// Who caused it; `None` for a change not recorded.
    pub source: Option<ChangeSource>,
}

macro_rules! wire_enum {
    ($(#[$meta:meta])* $name:ident { $($(#[$vmeta:meta])* $variant:ident => $wire:literal,)+ }) => {
        $(#[$meta])*
        #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
        pub enum $name {
            $($(#[$vmeta])* $variant,)+
        }

        impl $name {
            /// Every value, in a stable order.
            pub const ALL: &'static [$name] = &[$($name::$variant,)+];

            /// The wire name.
            pub const fn as_str(self) -> &'static str {
                match self {
                    $($name::$variant => $wire,)+
                }
            }
        }

        impl FromStr for $name {
            type Err = UnknownValue;
            fn from_str(s: &str) -> Result<Self, Self::Err> {
                $name::ALL
                    .iter()
                    .copied()
                    .find(|v| v.as_str() == s)
                    .ok_or_else(|| UnknownValue(s.to_string()))
            }
        }

        impl fmt::Display for $name {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str(self.as_str())
            }
        }
    };
}

wire_enum! {
    /// What changed a payment: one per trigger of the state machine that changes it, plus the
    /// creation and a change that was not recorded.
    ChangeCause {
        /// The merchant's create request (the first entry).
        Created => "created",
        /// The provider issued requisites.
        RequisitesIssued => "requisites_issued",
        /// No requisites were issued.
        RequisitesRefused => "requisites_refused",
        /// The transfer was confirmed (optionally with another amount).
        Confirmed => "confirmed",
        /// The payment was canceled.
        Canceled => "canceled",
        /// The payment's lifetime ran out.
        Expired => "expired",
        /// A re-check of the closed payment started.
        RecheckStarted => "recheck_started",
        /// The re-check ended.
        RecheckResolved => "recheck_resolved",
        /// The payment changed where no record was written: before the node kept a history
        /// (schema 21), or on a node of an earlier build during a rolling upgrade.
        Unrecorded => "unrecorded",
    }
}

wire_enum! {
    /// Who caused a change.
    ChangeSource {
        /// The merchant: the create request, or a test payment's paid or canceled action.
        Merchant => "merchant",
        /// The requisite provider: its answer to the create (or to the recovery that asked it
        /// again), or its notification.
        Provider => "provider",
        /// The payment company's support, through the operator API or the CLI.
        Support => "support",
        /// The payment's lifetime, run out.
        Lifetime => "lifetime",
    }
}

/// The history of `payment` from its `recorded` changes (oldest first, as the store reads
/// them; those of versions after the payment's, committed since it was read, are left out):
/// the creation first, then every recorded change; when the payment's status or amount
/// differs from the last entry's (changes not recorded), a last entry of cause
/// [`ChangeCause::Unrecorded`] with the payment's current state at its last update.
pub fn history(payment: &Payment, recorded: Vec<StatusChange>) -> Vec<StatusChange> {
    debug_assert!(
        recorded.iter().all(|c| c.payment_id == payment.id),
        "a payment's history holds only its own changes"
    );
    debug_assert!(
        recorded.windows(2).all(|w| w[0].version < w[1].version),
        "the recorded changes come oldest first"
    );
    let mut entries = Vec::with_capacity(recorded.len() + 2);
    // Changes committed after the payment was read belong to a later history.
    let recorded = recorded
        .into_iter()
        .filter(|c| c.version <= payment.version);
    entries.push(StatusChange {
        payment_id: payment.id,
        version: 1,
        from: None,
        to: PaymentStatus::Created,
        amount: payment.initial_amount,
        at: payment.created_at,
        cause: ChangeCause::Created,
        source: Some(ChangeSource::Merchant),
    });
    entries.extend(recorded);
    let last = entries.last().expect("the creation is an entry");
    if (last.to, last.amount) != (payment.status, payment.amount) {
        entries.push(StatusChange {
            payment_id: payment.id,
            version: payment.version,
            from: None,
            to: payment.status,
            amount: payment.amount,
            at: payment.updated_at,
            cause: ChangeCause::Unrecorded,
            source: None,
        });
    }
    entries
}

/// The body of `GET /api/v1/payments/{id}/history`: the payment's id, merchant payment id and
/// current status, and its `history` oldest first, each entry with `status`,
/// `previous_status` (`null` for the creation and an unrecorded change), `amount` (written as
/// `format` says, like the payment's), `at`, `cause` and `source` (`null` for an unrecorded
/// change).
pub fn history_json(
    payment: &Payment,
    entries: &[StatusChange],
    format: DecimalFormat,
) -> serde_json::Value {
    let entries: Vec<_> = entries
        .iter()
        .map(|e| {
            serde_json::json!({
                "status": e.to.as_str(),
                "previous_status": e.from.map(PaymentStatus::as_str),
                "amount": format.write(&e.amount.as_decimal()),
                "at": e.at.to_rfc3339(),
                "cause": e.cause.as_str(),
                "source": e.source.map(ChangeSource::as_str),
            })
        })
        .collect();
    serde_json::json!({
        "payment_id": payment.id.to_string(),
        "merchant_payment_id": payment.merchant_payment_id.as_str(),
        "status": payment.status.as_str(),
        "history": entries,
    })
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;
    use crate::payment::{Flow, PaymentMethod};
    use crate::testing::fixtures;

    fn created() -> Payment {
        let request = fixtures::request("order-1", "3400", PaymentMethod::Sbp);
        let at = Timestamp::from_unix_secs(1_790_856_000);
        let id = PaymentId::from_uuid(uuid::Uuid::from_u128(1));
        let project = crate::ids::ProjectId::from_uuid(uuid::Uuid::from_u128(2));
        let lifetime = Duration::from_secs(900);
        fixtures::payment(id, project, &request, Flow::RuntimeLive, at, lifetime)
    }

    fn change(p: &Payment, version: u64, to: PaymentStatus, cause: ChangeCause) -> StatusChange {
        StatusChange {
            payment_id: p.id,
            version,
            from: None,
            to,
            amount: p.amount,
            at: p.updated_at,
            cause,
            source: Some(ChangeSource::Provider),
        }
    }

    #[test]
    fn the_wire_names_read_back() {
        for c in ChangeCause::ALL {
            assert_eq!(c.as_str().parse::<ChangeCause>().unwrap(), *c);
        }
        for s in ChangeSource::ALL {
            assert_eq!(s.as_str().parse::<ChangeSource>().unwrap(), *s);
        }
        assert!("paid".parse::<ChangeCause>().is_err());
    }

    #[test]
    fn a_payment_that_never_changed_has_its_creation_alone() {
        let p = created();
        let h = history(&p, Vec::new());
        assert_eq!(h.len(), 1);
        assert_eq!(
            (h[0].to, h[0].cause),
            (PaymentStatus::Created, ChangeCause::Created)
        );
    }

    #[test]
    fn changes_not_recorded_end_in_the_current_state() {
        let mut p = created();
        p.status = PaymentStatus::Completed;
        p.version = 3;
        // Only the first change was recorded.
        let recorded = vec![change(
            &p,
            2,
            PaymentStatus::Processing,
            ChangeCause::RequisitesIssued,
        )];
        let h = history(&p, recorded.clone());
        let causes: Vec<_> = h.iter().map(|c| c.cause).collect();
        assert_eq!(
            causes,
            [
                ChangeCause::Created,
                ChangeCause::RequisitesIssued,
                ChangeCause::Unrecorded
            ]
        );
        assert_eq!((h[2].to, h[2].source), (PaymentStatus::Completed, None));

        // Every change recorded: nothing is added.
        let mut all = recorded;
        all.push(change(
            &p,
            3,
            PaymentStatus::Completed,
            ChangeCause::Confirmed,
        ));
        assert_eq!(history(&p, all).len(), 3);
    }
}
