//! The project balance: an append-only ledger of every change of money a project is owed.
//!
//! The spec says of `merchant_information` that its figures are "credited to the project
//! balance". This module says what that balance is, once, for every adapter:
//!
//! - [`credited`]: what one payment contributes: its `amount_usdt_rate` while it is a live
//!   payment in `completed` (or in `appeal` from `completed`: a re-check moves the balance only
//!   when it ends), zero otherwise. Test payments never contribute.
//! - [`payment_posting`]: the entry a payment change makes: the difference between what the
//!   payment contributed before and after, as a [`EntryKind::Credit`] (nothing before),
//!   [`EntryKind::Reversal`] (nothing after) or [`EntryKind::RecheckAdjustment`] (both).
//!   The service puts it in the [`PaymentChange`](crate::store::PaymentChange) it commits, so
//!   the store writes it in the same transaction as the payment's new version (as it writes
//!   the outbox row), and the entry names that version: a version is committed once, so it is
//!   counted once, whatever node, retry or crash.
//! - [`Balance::post`]: how an entry is appended: the project's next sequence number, the
//!   balance after it, and a time that never goes back within a project (so a period of time is
//!   a contiguous run of entries, and a statement's opening balance is the balance after the
//!   last entry before it).
//! - Payouts ([`EntryKind::Payout`], recorded by the operator with a [`UsdtAddress`] and a
//!   [`TxReference`]) and operator adjustments ([`EntryKind::OperatorAdjustment`], with a
//!   reason) are written by [`post_entry`](crate::service::post_entry) in one transaction with their audit record; a payout
//!   beyond the balance is refused unless it is forced with a reason.
//!
//! Amounts are [`Usdt`]: exact, 4 decimal places, signed, the settlement's truncated figures
//! carried over unchanged.

use std::fmt;
use std::str::FromStr;

use rust_decimal::Decimal;
use serde::{Serialize, Serializer};
use sha2::{Digest, Sha256};

use crate::clock::Timestamp;
use crate::ids::{EntryId, PaymentId, ProjectId};
use crate::payment::{Payment, PaymentStatus, UnknownValue};

/// Decimal places of every ledger amount.
pub const USDT_SCALE: u32 = 4;

/// The largest single amount, in either direction: 10^12 USDT.
pub const MAX_USDT_UNITS: i64 = 1_000_000_000_000 * 10_000;

/// The largest sum (a balance, a total) in either direction: 10^14 USDT, well inside the
/// stored 64 bits.
pub const MAX_BALANCE_UNITS: i64 = MAX_USDT_UNITS * 100;

/// An exact USDT amount with 4 decimal places, signed: a count of 0.0001 USDT. Written with
/// exactly 4 decimals (`-12.3400`); stored as that count, so a database sums it exactly.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Usdt(i64);

/// Why a text is not a ledger amount.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum UsdtError {
    /// Not `[-]digits[.digits]`.
    #[error("must be a plain decimal such as 125.5 (digits, an optional dot, no exponent)")]
    Syntax,
    /// More than 4 decimal places.
    #[error("must have at most 4 decimal places")]
    TooManyDecimals,
    /// Beyond [`MAX_USDT_UNITS`].
    #[error("is too large")]
    TooLarge,
    /// Zero, or negative where only a positive amount is allowed.
    #[error("must be positive")]
    NotPositive,
    /// Zero where any other amount is allowed.
    #[error("must not be zero")]
    Zero,
}

impl Usdt {
    /// Zero.
    pub const ZERO: Usdt = Usdt(0);

    /// The amount of `units` ten-thousandths (as stored).
    pub const fn from_units(units: i64) -> Usdt {
        Usdt(units)
    }

    /// Its count of ten-thousandths (as stored).
    pub const fn units(self) -> i64 {
        self.0
    }

    /// A decimal with at most 4 places (a settlement figure) exactly; `None` with more places
    /// or beyond the range.
    pub fn from_decimal(d: Decimal) -> Option<Usdt> {
        use rust_decimal::prelude::ToPrimitive;
        let scaled = d.checked_mul(Decimal::from(10_000))?;
        if !scaled.fract().is_zero() {
            return None;
        }
        let units = scaled.to_i64()?;
        (units.abs() <= MAX_USDT_UNITS).then_some(Usdt(units))
    }

    /// As a decimal with 4 places.
    pub fn as_decimal(self) -> Decimal {
        Decimal::new(self.0, USDT_SCALE)
    }

    /// Reads `[-]digits[.1 to 4 digits]` (a payout's or adjustment's amount); any sign is
    /// accepted here, [`Usdt::parse_positive`] and [`Usdt::parse_nonzero`] add the rule.
    pub fn parse(s: &str) -> Result<Usdt, UsdtError> {
        let (negative, digits) = match s.strip_prefix('-') {
            Some(rest) => (true, rest),
            None => (false, s),
        };
        let (int, frac) = match digits.split_once('.') {
            Some((i, f)) => (i, f),
            None => (digits, ""),
        };
        let plain = |t: &str| t.bytes().all(|b| b.is_ascii_digit());
        if int.is_empty()
            || !plain(int)
            || !plain(frac)
            || (digits.contains('.') && frac.is_empty())
        {
            return Err(UsdtError::Syntax);
        }
        if frac.len() > USDT_SCALE as usize {
            return Err(UsdtError::TooManyDecimals);
        }
        let int = int.trim_start_matches('0');
        if int.len() > 12 {
            return Err(UsdtError::TooLarge);
        }
        let whole: i64 = if int.is_empty() {
            0
        } else {
            int.parse().map_err(|_| UsdtError::Syntax)?
        };
        let mut fraction: i64 = if frac.is_empty() {
            0
        } else {
            frac.parse().map_err(|_| UsdtError::Syntax)?
        };
        for _ in frac.len()..USDT_SCALE as usize {
            fraction *= 10;
        }
        let units = whole
            .checked_mul(10_000)
            .and_then(|w| w.checked_add(fraction))
            .filter(|u| *u <= MAX_USDT_UNITS)
            .ok_or(UsdtError::TooLarge)?;
        Ok(Usdt(if negative { -units } else { units }))
    }

    /// [`Usdt::parse`], and more than zero (a payout).
    pub fn parse_positive(s: &str) -> Result<Usdt, UsdtError> {
        let u = Usdt::parse(s)?;
        if u.0 <= 0 {
            return Err(UsdtError::NotPositive);
        }
        Ok(u)
    }

    /// [`Usdt::parse`], and not zero (an adjustment, either way).
    pub fn parse_nonzero(s: &str) -> Result<Usdt, UsdtError> {
        let u = Usdt::parse(s)?;
        if u.0 == 0 {
            return Err(UsdtError::Zero);
        }
        Ok(u)
    }

    /// `self + other`, `None` beyond the range.
    pub fn checked_add(self, other: Usdt) -> Option<Usdt> {
        self.0
            .checked_add(other.0)
            .filter(|u| u.abs() <= MAX_BALANCE_UNITS)
            .map(Usdt)
    }

    /// `self - other`, `None` beyond the range.
    pub fn checked_sub(self, other: Usdt) -> Option<Usdt> {
        self.checked_add(Usdt(other.0.checked_neg()?))
    }

    /// The amount with the other sign.
    pub const fn neg(self) -> Usdt {
        Usdt(-self.0)
    }

    /// Whether it is zero.
    pub const fn is_zero(self) -> bool {
        self.0 == 0
    }
}

impl fmt::Display for Usdt {
    /// `[-]digits.dddd`: always 4 decimals.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let sign = if self.0 < 0 { "-" } else { "" };
        let abs = self.0.unsigned_abs();
        write!(f, "{sign}{}.{:04}", abs / 10_000, abs % 10_000)
    }
}

impl Serialize for Usdt {
    /// A decimal string with exactly 4 decimals, as `merchant_information` writes amounts.
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.collect_str(self)
    }
}

/// What a ledger entry records.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum EntryKind {
    /// A live payment reached `completed`: its `amount_usdt_rate`, positive.
    Credit,
    /// A completed payment became `canceled`: what it had credited, negative.
    Reversal,
    /// A re-check changed a completed payment's amount (same course and fee): the difference.
    RecheckAdjustment,
    /// The operator paid the project out: negative.
    Payout,
    /// The operator corrected the balance, with a reason: either sign.
    OperatorAdjustment,
}

impl EntryKind {
    /// Every kind, in a stable order (a statement's lines).
    pub const ALL: [EntryKind; 5] = [
        EntryKind::Credit,
        EntryKind::Reversal,
        EntryKind::RecheckAdjustment,
        EntryKind::Payout,
        EntryKind::OperatorAdjustment,
    ];

    /// The kind of the entry that takes a payment's contribution from `was` to `is` (not
    /// equal): a credit from nothing, a reversal to nothing, a re-check adjustment between
    /// two amounts.
    pub fn of_change(was: Usdt, is: Usdt) -> EntryKind {
        match (was.is_zero(), is.is_zero()) {
            (true, _) => EntryKind::Credit,
            (_, true) => EntryKind::Reversal,
            _ => EntryKind::RecheckAdjustment,
        }
    }

    /// The wire and stored name.
    pub const fn as_str(self) -> &'static str {
        match self {
            EntryKind::Credit => "credit",
            EntryKind::Reversal => "reversal",
            EntryKind::RecheckAdjustment => "recheck_adjustment",
            EntryKind::Payout => "payout",
            EntryKind::OperatorAdjustment => "operator_adjustment",
        }
    }
}

impl fmt::Display for EntryKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

impl FromStr for EntryKind {
    type Err = UnknownValue;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        EntryKind::ALL
            .into_iter()
            .find(|k| k.as_str() == s)
            .ok_or_else(|| UnknownValue(s.to_string()))
    }
}

impl Serialize for EntryKind {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(self.as_str())
    }
}

/// A USDT address a payout is sent to: TRON (TRC-20: `T` and 33 base58 characters, its
/// checksum verified) or Ethereum (ERC-20: `0x` and 40 hexadecimal digits, kept in lower
/// case: the mixed case of EIP-55 is a checksum of the same address, so one address has one
/// spelling here and a retry written in another case is the same payout).
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct UsdtAddress(String);

/// The network of a [`UsdtAddress`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum UsdtNetwork {
    /// TRON (TRC-20).
    Tron,
    /// Ethereum (ERC-20).
    Ethereum,
}

/// Why a text is not a [`UsdtAddress`].
#[non_exhaustive]
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum AddressError {
    /// `0x` not followed by 40 hexadecimal digits.
    #[error("an Ethereum (ERC-20) address is 0x and 40 hexadecimal digits")]
    EthereumForm,
    /// `T...` that is not base58.
    #[error("a TRON (TRC-20) address is written in base58")]
    TronBase58,
    /// `T...` of another length or version byte.
    #[error("a TRON (TRC-20) address is T and 33 base58 characters")]
    TronForm,
    /// A TRON address whose checksum does not match.
    #[error("the TRON address's checksum does not match (a typo?)")]
    TronChecksum,
    /// Neither network's form.
    #[error("expected a TRON (T...) or Ethereum (0x...) USDT address")]
    Network,
}

impl UsdtAddress {
    /// Reads an address; the error says what is wrong.
    pub fn parse(s: &str) -> Result<UsdtAddress, AddressError> {
        if let Some(hex) = s.strip_prefix("0x") {
            if hex.len() == 40 && hex.bytes().all(|b| b.is_ascii_hexdigit()) {
                return Ok(UsdtAddress(format!("0x{}", hex.to_ascii_lowercase())));
            }
            return Err(AddressError::EthereumForm);
        }
        if s.starts_with('T') {
            let bytes = bs58::decode(s)
                .into_vec()
                .map_err(|_| AddressError::TronBase58)?;
            // 0x41, 20 bytes of address, 4 bytes of double-SHA-256 checksum.
            if s.len() != 34 || bytes.len() != 25 || bytes[0] != 0x41 {
                return Err(AddressError::TronForm);
            }
            let digest = Sha256::digest(Sha256::digest(&bytes[..21]));
            if digest[..4] != bytes[21..] {
                return Err(AddressError::TronChecksum);
            }
            return Ok(UsdtAddress(s.to_string()));
        }
        Err(AddressError::Network)
    }

    /// The address: a TRON address as given, an Ethereum one in lower case.
    pub fn as_str(&self) -> &str {
        &self.0
    }

    /// Its network.
    pub fn network(&self) -> UsdtNetwork {
        if self.0.starts_with("0x") {
            UsdtNetwork::Ethereum
        } else {
            UsdtNetwork::Tron
        }
    }
}

impl fmt::Display for UsdtAddress {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl FromStr for UsdtAddress {
    type Err = AddressError;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        UsdtAddress::parse(s)
    }
}

/// A payout's external reference: the transfer's transaction hash, 64 hexadecimal digits
/// (an optional `0x` is taken off), kept in lower case. A project's payouts have distinct
/// references, so recording one payout twice is seen.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct TxReference(String);

impl TxReference {
    /// Reads a transaction hash.
    pub fn parse(s: &str) -> Result<TxReference, TxReferenceError> {
        let hex = s.strip_prefix("0x").unwrap_or(s);
        if hex.len() == 64 && hex.bytes().all(|b| b.is_ascii_hexdigit()) {
            Ok(TxReference(hex.to_ascii_lowercase()))
        } else {
            Err(TxReferenceError)
        }
    }

    /// The hash, lower case, without `0x`.
    pub fn as_str(&self) -> &str {
        &self.0
    }
}

impl fmt::Display for TxReference {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl FromStr for TxReference {
    type Err = TxReferenceError;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        TxReference::parse(s)
    }
}

/// The most characters of an operator's reason (an adjustment, a forced payout).
pub const MAX_REASON_CHARS: usize = 500;

/// Checks an operator's reason: 1 to [`MAX_REASON_CHARS`] characters, not blank, no control
/// characters.
pub fn check_reason(reason: &str) -> Result<(), ReasonError> {
    if reason.trim().is_empty() {
        return Err(ReasonError::Empty);
    }
    if reason.chars().count() > MAX_REASON_CHARS || reason.chars().any(char::is_control) {
        return Err(ReasonError::Form);
    }
    Ok(())
}

/// Why an operator's reason is refused.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum ReasonError {
    /// Blank.
    #[error("must not be empty")]
    Empty,
    /// Too long, or with control characters.
    #[error("at most {MAX_REASON_CHARS} characters, no control characters")]
    Form,
}

/// A transaction hash that is not 64 hexadecimal digits.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[error("a transaction hash is 64 hexadecimal digits (0x optional)")]
pub struct TxReferenceError;

/// An entry to append to a project's ledger: what changed and why. The store gives it its
/// place ([`Balance::post`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Posting {
    /// The entry's id.
    pub id: EntryId,
    /// The project whose balance changes.
    pub project_id: ProjectId,
    /// What it records.
    pub kind: EntryKind,
    /// The change of the balance, signed.
    pub amount: Usdt,
    /// When it happened (the payment change's `updated_at`, the operator's request).
    pub at: Timestamp,
    /// The payment whose change caused it, with the version that change wrote.
    pub payment: Option<(PaymentId, u64)>,
    /// A payout's destination.
    pub destination: Option<UsdtAddress>,
    /// A payout's transaction hash.
    pub reference: Option<TxReference>,
    /// Why (an operator adjustment; a payout forced beyond the balance).
    pub reason: Option<String>,
    /// Who recorded it (an operator's name); `None` for a payment's entry.
    pub actor: Option<String>,
}

/// A stored ledger entry: a [`Posting`] at its place in the project's ledger.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LedgerEntry {
    /// Its number in the project's ledger: 1, 2, 3... without gaps.
    pub seq: u64,
    /// The project's balance after it.
    pub balance_after: Usdt,
    /// What it records; `posting.at` is the entry's time, never before the previous entry's.
    pub posting: Posting,
}

impl LedgerEntry {
    /// The entry as the API writes it.
    pub fn view(&self) -> serde_json::Value {
        let p = &self.posting;
        let mut v = serde_json::json!({
            "id": p.id,
            "seq": self.seq,
            "kind": p.kind,
            "amount": p.amount,
            "balance_after": self.balance_after,
            "currency": "USDT",
            "payment_id": p.payment.map(|(id, _)| id),
            "payment_version": p.payment.map(|(_, v)| v),
            "created_at": p.at,
        });
        if let Some(d) = &p.destination {
            v["destination"] = d.as_str().into();
        }
        if let Some(r) = &p.reference {
            v["reference"] = r.as_str().into();
        }
        if let Some(r) = &p.reason {
            v["reason"] = r.as_str().into();
        }
        v
    }
}

/// The sums of a project's entries by kind.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Totals {
    /// Credits.
    pub credits: Usdt,
    /// Reversals (negative or zero).
    pub reversals: Usdt,
    /// Re-check adjustments.
    pub recheck_adjustments: Usdt,
    /// Operator adjustments.
    pub operator_adjustments: Usdt,
    /// Payouts (negative or zero).
    pub payouts: Usdt,
}

impl Totals {
    /// The total of `kind`.
    pub fn of(&self, kind: EntryKind) -> Usdt {
        match kind {
            EntryKind::Credit => self.credits,
            EntryKind::Reversal => self.reversals,
            EntryKind::RecheckAdjustment => self.recheck_adjustments,
            EntryKind::Payout => self.payouts,
            EntryKind::OperatorAdjustment => self.operator_adjustments,
        }
    }

    fn slot(&mut self, kind: EntryKind) -> &mut Usdt {
        match kind {
            EntryKind::Credit => &mut self.credits,
            EntryKind::Reversal => &mut self.reversals,
            EntryKind::RecheckAdjustment => &mut self.recheck_adjustments,
            EntryKind::Payout => &mut self.payouts,
            EntryKind::OperatorAdjustment => &mut self.operator_adjustments,
        }
    }
}

/// A project's balance: where its ledger stands. A store keeps it beside the entries, written
/// in the transaction of each entry, so reading it is one row.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Balance {
    /// The project.
    pub project_id: ProjectId,
    /// How many entries the ledger has (the last entry's `seq`).
    pub entries: u64,
    /// The sum of every entry.
    pub balance: Usdt,
    /// The sums by kind.
    pub totals: Totals,
    /// The last entry's time; `None` without entries.
    pub updated_at: Option<Timestamp>,
}

/// Why an entry cannot be appended.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum PostError {
    /// The posting is for another project than the balance.
    #[error("a posting of project {0} offered to another project's ledger")]
    WrongProject(ProjectId),
    /// A sum would leave the range.
    #[error("the balance would leave the range of the ledger")]
    Overflow,
}

impl Balance {
    /// The balance of a project without entries.
    pub fn empty(project_id: ProjectId) -> Balance {
        Balance {
            project_id,
            entries: 0,
            balance: Usdt::ZERO,
            totals: Totals::default(),
            updated_at: None,
        }
    }

    /// Appends `posting`: the entry (the next `seq`, the balance after it, a time not before
    /// the last entry's) and the balance after it.
    pub fn post(&self, posting: &Posting) -> Result<(LedgerEntry, Balance), PostError> {
        if posting.project_id != self.project_id {
            return Err(PostError::WrongProject(posting.project_id));
        }
        let balance = self
            .balance
            .checked_add(posting.amount)
            .ok_or(PostError::Overflow)?;
        let mut totals = self.totals;
        let slot = totals.slot(posting.kind);
        *slot = slot
            .checked_add(posting.amount)
            .ok_or(PostError::Overflow)?;
        let at = self
            .updated_at
            .map_or(posting.at, |last| last.max(posting.at));
        let entry = LedgerEntry {
            seq: self.entries + 1,
            balance_after: balance,
            posting: Posting {
                at,
                ..posting.clone()
            },
        };
        let after = Balance {
            project_id: self.project_id,
            entries: entry.seq,
            balance,
            totals,
            updated_at: Some(at),
        };
        Ok((entry, after))
    }

    /// The balance as the API writes it.
    pub fn view(&self) -> serde_json::Value {
        serde_json::json!({
            "currency": "USDT",
            "balance": self.balance,
            "credits": self.totals.credits,
            "reversals": self.totals.reversals,
            "recheck_adjustments": self.totals.recheck_adjustments,
            "operator_adjustments": self.totals.operator_adjustments,
            "payouts": self.totals.payouts,
            "entries": self.entries,
            "updated_at": self.updated_at,
        })
    }
}

/// What a payment contributes to its project's balance: its `amount_usdt_rate` while it is a
/// live payment in `completed`, or in `appeal` from `completed` (a re-check moves the balance
/// when it ends, not when it starts); zero otherwise, and always for a test payment.
pub fn credited(p: &Payment) -> Usdt {
    let completed = p.status == PaymentStatus::Completed
        || (p.status == PaymentStatus::Appeal && p.appeal_from == Some(PaymentStatus::Completed));
    if p.is_test() || !completed {
        return Usdt::ZERO;
    }
    p.merchant_information()
        .and_then(|s| Usdt::from_decimal(s.amount_usdt_rate))
        .unwrap_or(Usdt::ZERO)
}

/// Whether a payment's credit, were it a completed live payment, is within the ledger's range
/// ([`MAX_USDT_UNITS`]); always for a test payment or one without a pricing. The state
/// machine refuses a completion that is not ([`crate::transition::apply`]), so every credit
/// a payment can have is one [`credited`] gives.
pub fn credit_fits(p: &Payment) -> bool {
    if p.is_test() {
        return true;
    }
    p.merchant_information()
        .is_none_or(|s| Usdt::from_decimal(s.amount_usdt_rate).is_some())
}

/// The entry a payment change makes, if the change moves money: `after` contributes
/// ([`credited`]) something else than `before` did. The entry names `after`'s version and
/// happens at `after.updated_at`; `id` makes its id, called only when there is an entry (so a
/// change that moves no money draws no randomness).
pub fn payment_posting(
    before: &Payment,
    after: &Payment,
    id: impl FnOnce() -> EntryId,
) -> Option<Posting> {
    let (was, is) = (credited(before), credited(after));
    if was == is {
        return None;
    }
    Some(Posting {
        kind: EntryKind::of_change(was, is),
        id: id(),
        project_id: after.project_id,
        amount: is.checked_sub(was)?,
        at: after.updated_at,
        payment: Some((after.id, after.version)),
        destination: None,
        reference: None,
        reason: None,
        actor: None,
    })
}

/// A period's lines of a statement: the count and sum of each kind.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct KindTotal {
    /// How many entries.
    pub count: u64,
    /// Their sum.
    pub sum: Usdt,
}

/// A project's statement for a period `[from, to)`: the balance at its start, what each kind
/// of entry added in it, and the balance at its end.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Statement {
    /// The project.
    pub project_id: ProjectId,
    /// The period's start (included).
    pub from: Timestamp,
    /// Its end (excluded).
    pub to: Timestamp,
    /// The balance after the last entry before `from`.
    pub opening: Usdt,
    /// Each kind's count and sum in the period, in [`EntryKind::ALL`] order.
    pub lines: Vec<(EntryKind, KindTotal)>,
    /// `opening` plus every line.
    pub closing: Usdt,
}

impl Statement {
    /// The line of `kind`.
    pub fn line(&self, kind: EntryKind) -> KindTotal {
        self.lines
            .iter()
            .find(|(k, _)| *k == kind)
            .map(|(_, t)| *t)
            .unwrap_or_default()
    }

    /// The statement as the API writes it.
    pub fn view(&self) -> serde_json::Value {
        let mut lines = serde_json::Map::new();
        for (kind, t) in &self.lines {
            lines.insert(
                kind.as_str().into(),
                serde_json::json!({"count": t.count, "sum": t.sum}),
            );
        }
        serde_json::json!({
            "currency": "USDT",
            "from": self.from,
            "to": self.to,
            "opening": self.opening,
            "lines": lines,
            "closing": self.closing,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn amounts_read_and_write_with_four_decimals() {
        let cases = [
            ("125.5", 1_255_000, "125.5000"),
            ("0.0001", 1, "0.0001"),
            ("-3.25", -32_500, "-3.2500"),
            ("007", 70_000, "7.0000"),
            ("0", 0, "0.0000"),
        ];
        for (text, units, shown) in cases {
            let u = Usdt::parse(text).unwrap();
            assert_eq!(u.units(), units, "{text}");
            assert_eq!(u.to_string(), shown, "{text}");
            assert_eq!(Usdt::parse(shown), Ok(u));
        }
        for bad in [
            "", "1.", ".5", "1e3", "+1", "1,5", "--1", " 1", "1.2.3", "-",
        ] {
            assert_eq!(Usdt::parse(bad), Err(UsdtError::Syntax), "{bad:?}");
        }
        assert_eq!(Usdt::parse("1.00001"), Err(UsdtError::TooManyDecimals));
        assert_eq!(Usdt::parse("1000000000000"), Err(UsdtError::TooLarge));
        assert_eq!(
            Usdt::parse("999999999999.9999").map(Usdt::units),
            Ok(MAX_USDT_UNITS - 1)
        );
        assert_eq!(Usdt::parse_positive("0.0000"), Err(UsdtError::NotPositive));
        assert_eq!(Usdt::parse_positive("-1"), Err(UsdtError::NotPositive));
        assert_eq!(Usdt::parse_nonzero("-0"), Err(UsdtError::Zero));
        assert_eq!(Usdt::parse_nonzero("-1").map(Usdt::units), Ok(-10_000));
    }

    #[test]
    fn a_settlement_figure_converts_exactly_or_not_at_all() {
        let d = |s: &str| s.parse::<Decimal>().unwrap();
        assert_eq!(Usdt::from_decimal(d("30.2600")), Some(Usdt(302_600)));
        assert_eq!(Usdt::from_decimal(d("10.4978")), Some(Usdt(104_978)));
        assert_eq!(Usdt::from_decimal(d("0.00001")), None);
        assert_eq!(Usdt::from_decimal(d("-2.5")), Some(Usdt(-25_000)));
    }

    #[test]
    fn tron_addresses_are_checked_by_their_checksum() {
        // The USDT contract's address on TRON: a well-known valid TRC-20 address.
        let good = "TR7NHqjeKQxGTCi8q8ZY4pL8otSzgjLj6t";
        assert_eq!(
            UsdtAddress::parse(good).unwrap().network(),
            UsdtNetwork::Tron
        );
        // One character changed: the checksum no longer matches.
        let typo = "TR7NHqjeKQxGTCi8q8ZY4pL8otSzgjLj6u";
        assert!(UsdtAddress::parse(typo)
            .unwrap_err()
            .to_string()
            .contains("checksum"));
        assert!(UsdtAddress::parse("TR7NHqjeKQxGTCi8q8ZY4pL8otSzgjLj6").is_err());
        assert!(UsdtAddress::parse("T0000000000000000000000000000000O").is_err());
        let eth = "0xdAC17F958D2ee523a2206206994597C13D831ec7";
        assert_eq!(
            UsdtAddress::parse(eth).unwrap(),
            UsdtAddress::parse(&eth.to_ascii_lowercase()).unwrap(),
            "one address, one spelling"
        );
        assert_eq!(
            UsdtAddress::parse(eth).unwrap().as_str(),
            "0xdac17f958d2ee523a2206206994597c13d831ec7"
        );
        assert_eq!(
            UsdtAddress::parse(eth).unwrap().network(),
            UsdtNetwork::Ethereum
        );
        assert!(UsdtAddress::parse("0xdAC17F958D2ee523a2206206994597C13D831ec").is_err());
        assert!(UsdtAddress::parse("bc1qxy2kgdygjrsqtzq2n0yrf2493p83kkfjhx0wlh").is_err());
    }

    #[test]
    fn references_are_transaction_hashes_in_lower_case() {
        let h = "A".repeat(64);
        assert_eq!(TxReference::parse(&h).unwrap().as_str(), "a".repeat(64));
        assert_eq!(
            TxReference::parse(&format!("0x{h}")).unwrap(),
            TxReference::parse(&h).unwrap()
        );
        assert!(TxReference::parse(&"g".repeat(64)).is_err());
        assert!(TxReference::parse(&"a".repeat(63)).is_err());
    }

    #[test]
    fn an_entry_time_never_goes_back_and_seq_has_no_gaps() {
        let project = ProjectId::from_uuid(uuid::Uuid::from_u128(1));
        let posting = |at: i64, amount: i64| Posting {
            id: EntryId::from_uuid(uuid::Uuid::from_u128(at.unsigned_abs().into())),
            project_id: project,
            kind: EntryKind::OperatorAdjustment,
            amount: Usdt(amount),
            at: Timestamp::from_unix_secs(at),
            payment: None,
            destination: None,
            reference: None,
            reason: Some("test".into()),
            actor: Some("ops".into()),
        };
        let b0 = Balance::empty(project);
        let (e1, b1) = b0.post(&posting(100, 5)).unwrap();
        let (e2, b2) = b1.post(&posting(90, -2)).unwrap();
        assert_eq!((e1.seq, e2.seq), (1, 2));
        assert_eq!(
            e2.posting.at,
            Timestamp::from_unix_secs(100),
            "a clock behind"
        );
        assert_eq!((e2.balance_after, b2.balance), (Usdt(3), Usdt(3)));
        assert_eq!(b2.totals.operator_adjustments, Usdt(3));
        let other = Posting {
            project_id: ProjectId::from_uuid(uuid::Uuid::from_u128(2)),
            ..posting(1, 1)
        };
        assert!(matches!(b2.post(&other), Err(PostError::WrongProject(_))));
        let huge = Balance {
            balance: Usdt(MAX_BALANCE_UNITS),
            ..b2
        };
        assert_eq!(huge.post(&posting(1, 1)), Err(PostError::Overflow));
    }

    /// What PostgreSQL's one-statement append relies on: posting on any balance adds the
    /// figures of the same posting on an empty balance (numbers and sums add, the time is the
    /// later of the two), whatever the kind, the sign and the clock.
    #[test]
    fn a_posting_adds_its_figures_on_an_empty_balance() {
        let project = ProjectId::from_uuid(uuid::Uuid::from_u128(1));
        let mut b = Balance::empty(project);
        for i in 0..200i64 {
            let kind = EntryKind::ALL[usize::try_from(i).unwrap() % EntryKind::ALL.len()];
            let posting = Posting {
                id: EntryId::from_uuid(uuid::Uuid::from_u128(u128::try_from(i).unwrap())),
                project_id: project,
                kind,
                amount: Usdt((i * 7_919) % 100_003 - 50_000),
                at: Timestamp::from_unix_secs(1_000 + (i * 37) % 101),
                payment: None,
                destination: None,
                reference: None,
                reason: None,
                actor: None,
            };
            let (_, figures) = Balance::empty(project).post(&posting).unwrap();
            let (entry, after) = b.post(&posting).unwrap();
            let add = |x: Usdt, y: Usdt| x.checked_add(y).unwrap();
            let t = (b.totals, figures.totals);
            let sum = Balance {
                project_id: project,
                entries: b.entries + figures.entries,
                balance: add(b.balance, figures.balance),
                totals: Totals {
                    credits: add(t.0.credits, t.1.credits),
                    reversals: add(t.0.reversals, t.1.reversals),
                    recheck_adjustments: add(t.0.recheck_adjustments, t.1.recheck_adjustments),
                    operator_adjustments: add(t.0.operator_adjustments, t.1.operator_adjustments),
                    payouts: add(t.0.payouts, t.1.payouts),
                },
                updated_at: b.updated_at.max(figures.updated_at),
            };
            assert_eq!(after, sum, "posting {i}");
            assert_eq!(
                (entry.seq, entry.balance_after, Some(entry.posting.at)),
                (after.entries, after.balance, after.updated_at)
            );
            b = after;
        }
    }
}
