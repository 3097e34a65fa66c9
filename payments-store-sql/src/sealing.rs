//! Requisites sealed at rest: the recipient's card or phone number, the holder's name and the
//! QR and bank-app links (which may carry the number) are written as sealed strings
//! ([`payments_core::sealing`], XChaCha20-Poly1305 under the server's secrets key) and opened
//! when a payment is read, so neither the database files nor a dump hold them in clear.
//!
//! Each value is bound to its payment and its column (the additional data is
//! `payment:<id>:<column>`): a sealed holder name copied into another row, or into the
//! requisite column of the same row, does not open.
//!
//! The keys arrive after the store is open, because whether a missing key may be created
//! depends on what the database already holds ([`RequisiteSealing::install`]). Until then,
//! and whenever sealing is off ([`SealWrites::Plain`], for a rolling upgrade from a build that
//! cannot open sealed requisites), values are written as given. Reading accepts both forms: a
//! plaintext value written before sealing is read as it is until `payments-server reseal`
//! seals it. A sealed value that does not open is [`StoreError::Corrupt`], never shown.
//!
//! An appeal's receipts are sealed the same way, as bytes
//! ([`RequisiteSealing::seal_receipt`], [`SealingKeys::seal_bytes`]), each bound to its appeal
//! and its index (`appeal:<id>:receipt:<index>`), and read in both forms. The re-seal of
//! requisites ([`StoredRequisites`]) does not re-seal them: a key that sealed receipts must stay
//! among the previous keys.

use std::fmt;
use std::sync::{Arc, OnceLock};

use payments_core::ids::{AppealId, PaymentId};
use payments_core::payment::{
    mask_audit_state, requisite_digits, Payment, RequisiteNumber, Requisites,
};
use payments_core::sealing::SealingKeys;
use payments_core::store::StoreError;
use payments_core::RandomSource;

use crate::row::Cols;
use crate::value::SqlValue;

/// The sealed requisite columns, in the order [`RequisiteSealing`] handles them.
pub const SEALED_COLUMNS: [&str; 4] = ["requisite", "holder_name", "qrcode_link", "deeplink_url"];

/// Whether new writes are sealed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SealWrites {
    /// Every requisite written is sealed under the current key (the default).
    Sealed,
    /// Requisites are written in clear while nodes of a build that cannot open them still
    /// read the database; sealed ones are still read. `payments-server reseal` seals what
    /// was written meanwhile, once every node runs this build.
    Plain,
}

struct Installed {
    keys: SealingKeys,
    rng: Arc<dyn RandomSource>,
    writes: SealWrites,
}

/// The sealing of one store's requisites: a cheap handle the store keeps and every clone
/// shares, empty until [`RequisiteSealing::install`] gives it keys. The default is empty.
#[derive(Clone, Default)]
pub struct RequisiteSealing(Arc<OnceLock<Installed>>);

impl fmt::Debug for RequisiteSealing {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.0.get() {
            None => f.write_str("RequisiteSealing(not installed)"),
            Some(i) => f
                .debug_struct("RequisiteSealing")
                .field("key", &i.keys.current_id())
                .field("writes", &i.writes)
                .finish(),
        }
    }
}

/// What [`RequisiteSealing::install`] refuses: keys were installed already.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("the store's requisite keys are installed already")]
pub struct AlreadyInstalled;

impl RequisiteSealing {
    /// An empty handle (requisites are written in clear until keys are installed).
    pub fn new() -> RequisiteSealing {
        RequisiteSealing::default()
    }

    /// Gives the store its keys, once: from now on writes are sealed under `keys`' current
    /// key (with [`SealWrites::Sealed`] and a current key) and sealed values open under any of
    /// them. `rng` draws each seal's nonce.
    pub fn install(
        &self,
        keys: SealingKeys,
        rng: Arc<dyn RandomSource>,
        writes: SealWrites,
    ) -> Result<(), AlreadyInstalled> {
        self.0
            .set(Installed { keys, rng, writes })
            .map_err(|_| AlreadyInstalled)
    }

    /// Whether values written now are sealed.
    pub fn seals_writes(&self) -> bool {
        self.0
            .get()
            .is_some_and(|i| i.writes == SealWrites::Sealed && i.keys.is_configured())
    }

    /// Whether a stored value would change on a re-seal: plaintext, or sealed under a key
    /// that is not the current one. `false` while no current key is installed.
    pub fn needs_reseal(&self, stored: &str) -> bool {
        self.0.get().is_some_and(|i| i.keys.needs_reseal(stored))
    }

    /// `value` of `column` as the database keeps it: sealed when writes are sealed.
    pub fn seal(&self, id: PaymentId, column: &str, value: &str) -> Result<String, StoreError> {
        match self.0.get() {
            Some(i) if i.writes == SealWrites::Sealed && i.keys.is_configured() => i
                .keys
                .seal(value, &context(id, column), i.rng.as_ref())
                .map_err(|e| StoreError::Corrupt(format!("cannot seal {column}: {e}"))),
            _ => Ok(value.to_string()),
        }
    }

    /// `value` of `column` always sealed under the current key (what a re-seal writes).
    pub fn reseal(&self, id: PaymentId, column: &str, value: &str) -> Result<String, StoreError> {
        let i = self
            .0
            .get()
            .filter(|i| i.keys.is_configured())
            .ok_or_else(|| StoreError::Corrupt("no sealing key is installed".into()))?;
        i.keys
            .seal(value, &context(id, column), i.rng.as_ref())
            .map_err(|e| StoreError::Corrupt(format!("cannot seal {column}: {e}")))
    }

    /// The plaintext of `stored` for `column` of payment `id`: a sealed value opened, a
    /// plaintext one (written before sealing, or with [`SealWrites::Plain`]) as it is.
    pub fn open(&self, id: PaymentId, column: &str, stored: String) -> Result<String, StoreError> {
        if !SealingKeys::is_sealed(&stored) {
            return Ok(stored);
        }
        let keys = self.0.get().map(|i| &i.keys);
        let none = SealingKeys::none();
        keys.unwrap_or(&none)
            .open(&stored, &context(id, column))
            .map_err(|e| StoreError::Corrupt(format!("payment {id} {column}: {e}")))
    }

    /// The bytes of receipt `index` of `appeal` as the database keeps them: sealed (bound to
    /// the appeal and the index, `appeal:<id>:receipt:<index>`) when writes are sealed, as
    /// given otherwise.
    pub fn seal_receipt(
        &self,
        appeal: AppealId,
        index: u8,
        bytes: &[u8],
    ) -> Result<Vec<u8>, StoreError> {
        match self.0.get() {
            Some(i) if i.writes == SealWrites::Sealed && i.keys.is_configured() => i
                .keys
                .seal_bytes(bytes, &receipt_context(appeal, index), i.rng.as_ref())
                .map_err(|e| StoreError::Corrupt(format!("cannot seal a receipt: {e}"))),
            _ => Ok(bytes.to_vec()),
        }
    }

    /// The bytes of receipt `index` of `appeal` from `stored`: sealed ones opened, plain ones
    /// (written with [`SealWrites::Plain`] or before keys were installed) as they are. A
    /// sealed receipt that does not open is [`StoreError::Corrupt`].
    pub fn open_receipt(
        &self,
        appeal: AppealId,
        index: u8,
        stored: Vec<u8>,
    ) -> Result<Vec<u8>, StoreError> {
        if !SealingKeys::is_sealed_bytes(&stored) {
            return Ok(stored);
        }
        let keys = self.0.get().map(|i| &i.keys);
        let none = SealingKeys::none();
        keys.unwrap_or(&none)
            .open_bytes(&stored, &receipt_context(appeal, index))
            .map_err(|e| StoreError::Corrupt(format!("appeal {appeal} receipt {index}: {e}")))
    }

    /// A copy of `payment` whose requisites are as the database keeps them.
    pub fn seal_payment(&self, payment: &Payment) -> Result<Option<Requisites>, StoreError> {
        let Some(r) = payment.requisites.as_ref() else {
            return Ok(None);
        };
        let id = payment.id;
        let opt = |column: &str, v: &Option<String>| {
            v.as_deref().map(|v| self.seal(id, column, v)).transpose()
        };
        Ok(Some(Requisites {
            requisite: self.seal(id, SEALED_COLUMNS[0], &r.requisite)?,
            holder_name: self.seal(id, SEALED_COLUMNS[1], &r.holder_name)?,
            bank: r.bank.clone(),
            qrcode_link: opt(SEALED_COLUMNS[2], &r.qrcode_link)?,
            deeplink_url: opt(SEALED_COLUMNS[3], &r.deeplink_url)?,
        }))
    }

    /// The keyed digest of `payment`'s requisite number (its digits, [`requisite_digits`])
    /// under the current key, what the database keeps beside the sealed requisite so that a
    /// search by the full number finds it ([`SealingKeys::digest`]); `None` without a
    /// requisite or while no key is installed.
    pub fn digest_requisite(&self, payment: &Payment) -> Option<String> {
        self.digest_of(&payment.requisites.as_ref()?.requisite)
    }

    /// The keyed digest of a requisite's digits under the current key, if one is installed.
    fn digest_of(&self, requisite: &str) -> Option<String> {
        self.0.get()?.keys.digest(&requisite_digits(requisite))
    }

    /// The digests of `number` under every installed key and those keys' ids, the current
    /// one first ([`SealingKeys::digests`]); empty while no key is installed.
    pub fn digests(&self, number: &RequisiteNumber) -> Vec<(String, String)> {
        self.0
            .get()
            .map(|i| i.keys.digests(number.digits()))
            .unwrap_or_default()
    }

    /// Opens, in place, the requisites of a payment read from the database.
    pub fn open_payment(&self, payment: &mut Payment) -> Result<(), StoreError> {
        let id = payment.id;
        let Some(r) = payment.requisites.as_mut() else {
            return Ok(());
        };
        r.requisite = self.open(id, SEALED_COLUMNS[0], std::mem::take(&mut r.requisite))?;
        r.holder_name = self.open(id, SEALED_COLUMNS[1], std::mem::take(&mut r.holder_name))?;
        for (column, v) in [
            (SEALED_COLUMNS[2], &mut r.qrcode_link),
            (SEALED_COLUMNS[3], &mut r.deeplink_url),
        ] {
            if let Some(stored) = v.take() {
                *v = Some(self.open(id, column, stored)?);
            }
        }
        Ok(())
    }
}

/// The additional data of one sealed receipt of one appeal.
fn receipt_context(appeal: AppealId, index: u8) -> String {
    format!("appeal:{appeal}:receipt:{index}")
}

/// The additional data of one sealed column of one payment.
fn context(id: PaymentId, column: &str) -> String {
    format!("payment:{id}:{column}")
}

/// One payment's stored requisite columns, as a re-seal reads and rewrites them.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StoredRequisites {
    /// The payment.
    pub id: PaymentId,
    /// [`SEALED_COLUMNS`]' values as stored (`None`: NULL).
    pub values: [Option<String>; 4],
}

impl StoredRequisites {
    /// Whether any value would change on a re-seal.
    pub fn needs_reseal(&self, sealing: &RequisiteSealing) -> bool {
        self.values
            .iter()
            .flatten()
            .any(|v| sealing.needs_reseal(v))
    }

    /// The values re-sealed under the current key (each opened first, so that a value that
    /// does not open stops the re-seal instead of being sealed as garbage).
    pub fn resealed(&self, sealing: &RequisiteSealing) -> Result<[Option<String>; 4], StoreError> {
        let mut out: [Option<String>; 4] = Default::default();
        for (i, v) in self.values.iter().enumerate() {
            if let Some(stored) = v {
                let column = SEALED_COLUMNS[i];
                let plain = sealing.open(self.id, column, stored.clone())?;
                out[i] = Some(sealing.reseal(self.id, column, &plain)?);
            }
        }
        Ok(out)
    }
}

impl StoredRequisites {
    /// A row of [`REQUISITES_PAGE`](crate::statements::REQUISITES_PAGE).
    pub fn from_row(c: &Cols<'_>) -> Result<StoredRequisites, StoreError> {
        Ok(StoredRequisites {
            id: c.parsed("id")?,
            values: [
                c.opt_text(SEALED_COLUMNS[0])?,
                c.opt_text(SEALED_COLUMNS[1])?,
                c.opt_text(SEALED_COLUMNS[2])?,
                c.opt_text(SEALED_COLUMNS[3])?,
            ],
        })
    }

    /// The parameters of [`REQUISITES_RESEAL`](crate::statements::REQUISITES_RESEAL): the id,
    /// `new`, then the values read.
    pub fn reseal_values(&self, new: [Option<String>; 4]) -> Vec<SqlValue> {
        let mut values = vec![SqlValue::display(self.id)];
        values.extend(new.into_iter().map(|v| SqlValue::opt_text(v.as_deref())));
        values.extend(self.values.iter().map(|v| SqlValue::opt_text(v.as_deref())));
        values
    }
}

/// One audit record's states as the masking of old records reads them
/// ([`AUDIT_STATES_PAGE`](crate::statements::AUDIT_STATES_PAGE)): earlier builds copied a
/// payment's requisites into the records of operator actions in clear.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StoredAuditStates {
    /// The record's sequence number.
    pub seq: i64,
    /// Its `before_state`.
    pub before: Option<String>,
    /// Its `after_state`.
    pub after: Option<String>,
}

impl StoredAuditStates {
    /// A row of [`AUDIT_STATES_PAGE`](crate::statements::AUDIT_STATES_PAGE).
    pub fn from_row(c: &Cols<'_>) -> Result<StoredAuditStates, StoreError> {
        Ok(StoredAuditStates {
            seq: c.num("seq")?,
            before: c.opt_text("before_state")?,
            after: c.opt_text("after_state")?,
        })
    }

    /// The parameters of [`AUDIT_STATES_MASK`](crate::statements::AUDIT_STATES_MASK) when
    /// either state holds requisites in clear ([`payments_core::payment::mask_audit_state`]);
    /// `None` when the record needs no change.
    pub fn masked_values(&self) -> Option<Vec<SqlValue>> {
        let mask = |s: &Option<String>| s.as_deref().and_then(mask_audit_state);
        let (before, after) = (mask(&self.before), mask(&self.after));
        if before.is_none() && after.is_none() {
            return None;
        }
        Some(vec![
            SqlValue::Int(self.seq),
            SqlValue::opt_text(before.or_else(|| self.before.clone())),
            SqlValue::opt_text(after.or_else(|| self.after.clone())),
        ])
    }
}

/// What a store's re-seal of requisites did.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct RequisiteReseal {
    /// Payments whose requisites were re-sealed under the current key (plaintext or a
    /// previous key before).
    pub resealed: usize,
    /// Payments already sealed under the current key.
    pub current: usize,
    /// Payments rewritten between the re-seal's read and its write, left for the next run.
    pub changed_meanwhile: usize,
    /// Audit records whose copy of a payment held its requisites in clear, now masked
    /// ([`StoredAuditStates`]).
    pub audit_records_masked: usize,
}

/// What a store's backfill of `requisite_last4` and `requisite_digest` did (payments written
/// before schema 16 have no last four digits, before schema 25 no digest, until it runs or
/// they are written again).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Last4Backfill {
    /// Payments given their last four digits, or the digest of their requisite under the
    /// current key, or both.
    pub filled: usize,
    /// Payments whose requisite holds fewer than four digits (nothing to find them by).
    pub too_short: usize,
    /// Payments written between the backfill's read and its write (they wrote their own).
    pub changed_meanwhile: usize,
}

impl Last4Backfill {
    /// The parameters of [`LAST4_SET`](crate::statements::LAST4_SET) for a row of
    /// [`LAST4_MISSING_PAGE`](crate::statements::LAST4_MISSING_PAGE), its requisite opened
    /// by `sealing`, cut by the core's rule
    /// ([`Requisites::last4`](payments_core::payment::Requisites::last4)) and digested under
    /// the current key; `None` when it has fewer than four digits (counted as too short) or
    /// when it lacks only a digest and no key is installed (nothing to write).
    pub fn values(
        &mut self,
        c: &Cols<'_>,
        sealing: &RequisiteSealing,
    ) -> Result<Option<Vec<SqlValue>>, StoreError> {
        let id: PaymentId = c.parsed("id")?;
        let stored = c.text("requisite")?;
        let plain = sealing.open(id, SEALED_COLUMNS[0], stored.clone())?;
        let Some(last4) = payments_core::payment::last4_of(&plain) else {
            self.too_short += 1;
            return Ok(None);
        };
        let digest = sealing.digest_of(&plain);
        if digest.is_none() && c.opt_text("requisite_last4")?.is_some() {
            return Ok(None);
        }
        Ok(Some(vec![
            SqlValue::display(id),
            SqlValue::Text(last4),
            SqlValue::Text(stored),
            SqlValue::opt_text(digest.as_deref()),
        ]))
    }

    /// Counts the outcome of one [`LAST4_SET`](crate::statements::LAST4_SET).
    pub fn count(&mut self, changed: u64) {
        if changed == 1 {
            self.filled += 1;
        } else {
            self.changed_meanwhile += 1;
        }
    }
}

/// Payments read per page of a re-seal.
pub const RESEAL_PAGE: usize = 500;

#[cfg(test)]
mod tests {
    use std::sync::atomic::{AtomicU8, Ordering};

    use payments_core::sealing::SealingKey;

    use super::*;

    /// Nonces that differ on every seal.
    #[derive(Default)]
    struct Counter(AtomicU8);

    impl RandomSource for Counter {
        fn fill(&self, buf: &mut [u8]) {
            buf.fill(self.0.fetch_add(1, Ordering::Relaxed));
        }
    }

    fn installed(key: u8, previous: Vec<u8>, writes: SealWrites) -> RequisiteSealing {
        let s = RequisiteSealing::new();
        let keys = SealingKeys::new(
            SealingKey::from_bytes([key; 32]),
            previous
                .into_iter()
                .map(|k| SealingKey::from_bytes([k; 32]))
                .collect(),
        );
        s.install(keys, Arc::new(Counter::default()), writes)
            .unwrap();
        s
    }

    #[test]
    fn sealed_values_are_bound_to_their_payment_and_column() {
        let s = installed(1, vec![], SealWrites::Sealed);
        let (a, b) = (
            PaymentId::from_uuid(uuid::Uuid::from_u128(1)),
            PaymentId::from_uuid(uuid::Uuid::from_u128(2)),
        );
        let sealed = s.seal(a, "requisite", "4111111111111111").unwrap();
        assert!(!sealed.contains("4111"), "{sealed}");
        assert_eq!(
            s.open(a, "requisite", sealed.clone()).unwrap(),
            "4111111111111111"
        );
        assert!(matches!(
            s.open(b, "requisite", sealed.clone()),
            Err(StoreError::Corrupt(_))
        ));
        assert!(matches!(
            s.open(a, "holder_name", sealed),
            Err(StoreError::Corrupt(_))
        ));
        assert_eq!(
            s.open(a, "requisite", "79001234567".into()).unwrap(),
            "79001234567"
        );
        assert_eq!(
            s.install(
                SealingKeys::none(),
                Arc::new(Counter::default()),
                SealWrites::Sealed
            ),
            Err(AlreadyInstalled)
        );
    }

    #[test]
    fn plain_writes_and_no_keys_write_in_clear_but_still_open() {
        let sealed = installed(1, vec![], SealWrites::Sealed);
        let a = PaymentId::from_uuid(uuid::Uuid::from_u128(7));
        let value = sealed.seal(a, "holder_name", "IVAN I.").unwrap();
        let plain = installed(1, vec![], SealWrites::Plain);
        assert!(!plain.seals_writes());
        assert_eq!(plain.seal(a, "holder_name", "IVAN I.").unwrap(), "IVAN I.");
        assert_eq!(
            plain.open(a, "holder_name", value.clone()).unwrap(),
            "IVAN I."
        );
        assert!(plain.needs_reseal("IVAN I."));
        let empty = RequisiteSealing::new();
        assert_eq!(empty.seal(a, "holder_name", "IVAN I.").unwrap(), "IVAN I.");
        assert!(!empty.needs_reseal("IVAN I."));
        assert!(matches!(
            empty.open(a, "holder_name", value),
            Err(StoreError::Corrupt(_))
        ));
    }

    #[test]
    fn receipts_are_sealed_to_their_appeal_and_index_and_plain_ones_still_read() {
        let s = installed(1, vec![], SealWrites::Sealed);
        let (a, b) = (
            AppealId::from_uuid(uuid::Uuid::from_u128(1)),
            AppealId::from_uuid(uuid::Uuid::from_u128(2)),
        );
        let bytes = b"\x89PNG\r\n\x1a\n....".to_vec();
        let sealed = s.seal_receipt(a, 0, &bytes).unwrap();
        assert_ne!(sealed, bytes);
        assert_eq!(s.open_receipt(a, 0, sealed.clone()).unwrap(), bytes);
        for (appeal, index) in [(a, 1), (b, 0)] {
            assert!(matches!(
                s.open_receipt(appeal, index, sealed.clone()),
                Err(StoreError::Corrupt(_))
            ));
        }
        let plain = installed(1, vec![], SealWrites::Plain);
        assert_eq!(plain.seal_receipt(a, 0, &bytes).unwrap(), bytes);
        assert_eq!(plain.open_receipt(a, 0, sealed.clone()).unwrap(), bytes);
        assert_eq!(s.open_receipt(a, 0, bytes.clone()).unwrap(), bytes);
        assert!(matches!(
            RequisiteSealing::new().open_receipt(a, 0, sealed),
            Err(StoreError::Corrupt(_))
        ));
    }

    #[test]
    fn a_reseal_moves_values_to_the_current_key() {
        let old = installed(1, vec![], SealWrites::Sealed);
        let a = PaymentId::from_uuid(uuid::Uuid::from_u128(9));
        let stored = StoredRequisites {
            id: a,
            values: [
                Some(old.seal(a, "requisite", "79001234567").unwrap()),
                Some("IVAN I.".into()),
                None,
                Some(
                    old.seal(a, "deeplink_url", "bank://pay?to=79001234567")
                        .unwrap(),
                ),
            ],
        };
        assert!(stored.needs_reseal(&old), "the holder name is in clear");
        let rotated = installed(2, vec![1], SealWrites::Sealed);
        assert!(stored.needs_reseal(&rotated));
        let values = stored.resealed(&rotated).unwrap();
        let again = StoredRequisites {
            id: a,
            values: values.clone(),
        };
        assert!(!again.needs_reseal(&rotated));
        assert_eq!(values[2], None);
        assert_eq!(
            rotated
                .open(a, "holder_name", values[1].clone().unwrap())
                .unwrap(),
            "IVAN I."
        );
        assert_eq!(
            rotated
                .open(a, "deeplink_url", values[3].clone().unwrap())
                .unwrap(),
            "bank://pay?to=79001234567"
        );
        // Without the old key, the re-seal stops at the value it cannot open.
        let lost = installed(3, vec![], SealWrites::Sealed);
        assert!(matches!(
            stored.resealed(&lost),
            Err(StoreError::Corrupt(_))
        ));
    }
}
