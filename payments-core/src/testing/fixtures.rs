//! Test payments built one way: [`payment`] is the payment a create request makes, as the
//! service stores it. The store contract suite, the proptest strategies, the integration tests
//! and the benchmarks all start from it, so a new [`Payment`] field is filled in one place.

use std::time::Duration;

use crate::amount::Amount;
use crate::bank::CountryCode;
use crate::clock::Timestamp;
use crate::ids::{PaymentId, ProjectId};
use crate::payment::{Currency, Flow, MerchantPaymentId, Payment, PaymentMethod, PaymentStatus};
use crate::request::CreatePayment;

/// A create request with the defaults (`RUB`, `RU`, any bank, not intrabank, no callback URL).
///
/// # Panics
///
/// If `merchant_payment_id` or `amount` is not valid: fixtures are written by hand.
pub fn request(merchant_payment_id: &str, amount: &str, method: PaymentMethod) -> CreatePayment {
    CreatePayment {
        merchant_payment_id: MerchantPaymentId::parse(merchant_payment_id)
            .expect("a fixture's merchant payment id is 1-64 characters of A-Za-z0-9._:-"),
        amount: Amount::parse(amount).expect("a fixture's amount is a valid amount"),
        payment_method: method,
        currency: Currency::RUB,
        geo_code: CountryCode::RU,
        bank_code: None,
        is_intrabank: false,
        callback_url: None,
        metadata: Default::default(),
    }
}

/// The payment `request` makes when a project with `lifetime` accepts it at `created_at`:
/// status `created`, version 1, no requisites, pricing or failure, `amount` and
/// `initial_amount` the requested amount, `expires_at = created_at + lifetime`, and the
/// request's fingerprint. The request's `bank_code` is taken as already resolved (the service
/// stores the catalog's spelling).
///
/// ```
/// use std::time::Duration;
///
/// use payments_core::payment::{Flow, PaymentMethod, PaymentStatus};
/// use payments_core::testing::fixtures;
/// use payments_core::{PaymentId, ProjectId, Timestamp};
///
/// let request = fixtures::request("order-1001", "3400", PaymentMethod::Sbp);
/// let at = Timestamp::from_unix_secs(1_790_856_000);
/// let p = fixtures::payment(
///     PaymentId::from_uuid(uuid::Uuid::from_u128(1)),
///     ProjectId::from_uuid(uuid::Uuid::from_u128(2)),
///     &request,
///     Flow::RuntimeLive,
///     at,
///     Duration::from_secs(15 * 60),
/// );
/// assert_eq!((p.status, p.version), (PaymentStatus::Created, 1));
/// assert_eq!(p.expires_at.to_rfc3339(), "2026-10-01T12:15:00.000Z");
/// assert_eq!(p.fingerprint, request.fingerprint(None));
/// ```
pub fn payment(
    id: PaymentId,
    project_id: ProjectId,
    request: &CreatePayment,
    flow: Flow,
    created_at: Timestamp,
    lifetime: Duration,
) -> Payment {
    Payment {
        id,
        project_id,
        merchant_payment_id: request.merchant_payment_id.clone(),
        flow,
        status: PaymentStatus::Created,
        amount: request.amount,
        initial_amount: request.amount,
        currency: request.currency,
        geo_code: request.geo_code,
        payment_method: request.payment_method,
        is_intrabank: request.is_intrabank,
        bank_code: request.bank_code.clone(),
        callback_url: request.callback_url.clone(),
        requisites: None,
        pricing: None,
        failure: None,
        appeal_from: None,
        created_at,
        updated_at: created_at,
        expires_at: created_at + lifetime,
        version: 1,
        fingerprint: request.fingerprint(request.bank_code.as_deref()),
        metadata: request.metadata.clone(),
        route: None,
    }
}

/// Sealing keys made of repeated bytes: `current` seals, each of `previous` only opens (tests
/// of sealed values and key rotations).
pub fn sealing_keys(current: u8, previous: &[u8]) -> crate::sealing::SealingKeys {
    use crate::sealing::{SealingKey, SealingKeys};
    SealingKeys::new(
        SealingKey::from_bytes([current; 32]),
        previous
            .iter()
            .map(|k| SealingKey::from_bytes([*k; 32]))
            .collect(),
    )
}
