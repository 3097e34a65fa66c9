//! Planted bugs (feature `planted-bugs`, never in a production build): known defects that a
//! test harness switches on, one per process, to check that its invariants catch each. The
//! server sets the switch once at start (`testing.planted_bug`); without it every check here
//! answers `false` and the code behaves as the product does.

use std::fmt;
use std::str::FromStr;
use std::sync::OnceLock;

use crate::ids::PaymentId;
use crate::ledger::{EntryKind, Posting};

/// One planted bug.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Bug {
    /// `duplicate-merchant-payment-id`: the `(project, merchant_payment_id)` uniqueness is
    /// gone (the stores drop their unique index at open and insert without it), so two
    /// creates of one merchant payment id make two payments.
    DuplicateMerchantPaymentId,
    /// `skip-ledger-posting`: the credit of a completion whose payment id ends in a hex digit
    /// `0`-`7` (about half) is not posted to the ledger; the status change commits.
    SkipLedgerPosting,
    /// `skip-nonce-record`: an accepted signed request's nonce is not recorded, so the same
    /// signed request is accepted again instead of `409 request_replayed`.
    SkipNonceRecord,
    /// `recovery-asks-next-provider`: the recovery of a create stuck in `created` asks
    /// another provider of the payment's routing plan than the one recorded on it.
    RecoveryAsksNextProvider,
    /// `unchecked-status-version`: a payment's update is written without its version check,
    /// so two concurrent transitions of one payment both commit.
    UncheckedStatusVersion,
}

impl Bug {
    /// Every bug, in the order of their names in [`Bug::NAMES`].
    pub const ALL: [Bug; 5] = [
        Bug::DuplicateMerchantPaymentId,
        Bug::SkipLedgerPosting,
        Bug::SkipNonceRecord,
        Bug::RecoveryAsksNextProvider,
        Bug::UncheckedStatusVersion,
    ];

    /// The names, comma-separated, for messages.
    pub const NAMES: &'static str = "duplicate-merchant-payment-id, skip-ledger-posting, \
                                     skip-nonce-record, recovery-asks-next-provider, \
                                     unchecked-status-version";

    /// The bug's name (`testing.planted_bug`).
    pub const fn name(self) -> &'static str {
        match self {
            Bug::DuplicateMerchantPaymentId => "duplicate-merchant-payment-id",
            Bug::SkipLedgerPosting => "skip-ledger-posting",
            Bug::SkipNonceRecord => "skip-nonce-record",
            Bug::RecoveryAsksNextProvider => "recovery-asks-next-provider",
            Bug::UncheckedStatusVersion => "unchecked-status-version",
        }
    }
}

impl fmt::Display for Bug {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// A name that is not one of [`Bug::NAMES`].
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{0:?} is not a planted bug (one of {names})", names = Bug::NAMES)]
pub struct UnknownBug(pub String);

impl FromStr for Bug {
    type Err = UnknownBug;

    fn from_str(s: &str) -> Result<Bug, UnknownBug> {
        Bug::ALL
            .into_iter()
            .find(|b| b.name() == s.trim())
            .ok_or_else(|| UnknownBug(s.to_string()))
    }
}

/// Another bug was switched on in this process already.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[error("the planted bug {0} is on in this process already")]
pub struct AlreadyActive(pub Bug);

static ACTIVE: OnceLock<Bug> = OnceLock::new();

/// Switches `bug` on for the rest of the process. Switching the bug that is on again is
/// fine; another one is refused.
pub fn activate(bug: Bug) -> Result<(), AlreadyActive> {
    match *ACTIVE.get_or_init(|| bug) {
        on if on == bug => Ok(()),
        on => Err(AlreadyActive(on)),
    }
}

/// Whether `bug` is on in this process.
pub fn active(bug: Bug) -> bool {
    ACTIVE.get() == Some(&bug)
}

/// [`Bug::SkipLedgerPosting`]: whether `posting` is left out: a credit of a payment whose id's
/// last hex digit is `0`-`7`.
pub(crate) fn skips_posting(posting: &Posting) -> bool {
    active(Bug::SkipLedgerPosting)
        && posting.kind == EntryKind::Credit
        && posting.payment.is_some_and(|(id, _)| skipped_id(id))
}

/// The half of the payment ids whose credit [`Bug::SkipLedgerPosting`] leaves out.
pub fn skipped_id(id: PaymentId) -> bool {
    id.as_uuid().as_bytes()[15] & 0x0f < 8
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_parse_back() {
        for bug in Bug::ALL {
            assert_eq!(bug.name().parse::<Bug>(), Ok(bug));
            assert!(Bug::NAMES.contains(bug.name()));
        }
        assert!("skip-everything".parse::<Bug>().is_err());
    }

    #[test]
    fn half_of_the_ids_are_skipped() {
        let id = |last: &str| {
            format!("0190a000-0000-7000-8000-00000000000{last}")
                .parse::<PaymentId>()
                .expect("an id")
        };
        assert!(skipped_id(id("0")) && skipped_id(id("7")));
        assert!(!skipped_id(id("8")) && !skipped_id(id("f")));
    }
}
