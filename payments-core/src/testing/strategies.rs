//! proptest strategies for embedders' tests: valid create-request bodies, payments in every
//! status (internally consistent), and trigger sequences for the state machine.
//!
//! Amounts are drawn partly from a small fixed set ([`COMMON_AMOUNTS`]) so that generated
//! payments and triggers often share an amount: "confirm with the same amount" and "confirm with
//! another amount" both occur.

use std::time::Duration;

use proptest::collection::{vec, SizeRange};
use proptest::option;
use proptest::prelude::*;
use proptest::sample::select;
use rust_decimal::Decimal;
use serde_json::{Map, Value};
use uuid::Uuid;

use crate::amount::Amount;
use crate::bank::CountryCode;
use crate::callback::address::AddressPolicy;
use crate::callback::destination::CallbackUrl;
use crate::clock::Timestamp;
use crate::ids::{PaymentId, ProjectId};
use crate::ledger::credit_fits;
use crate::payment::{
    Currency, Flow, MerchantPaymentId, Payment, PaymentErrorCode, PaymentFailure, PaymentMethod,
    PaymentStatus, Requisites,
};
use crate::request::CreatePayment;
use crate::settlement::{Course, FeePercent, Pricing};
use crate::testing::fixtures;
use crate::transition::{RecheckOutcome, Trigger};

/// Amounts that generated payments and triggers share, so that equal amounts (also written
/// with another scale, `100` and `100.00`) are common.
pub const COMMON_AMOUNTS: [&str; 5] = ["100", "100.00", "250.5", "3400", "0.000001"];

/// Catalog names (and a case variant) that resolve with `geo_code` `RU` in the embedded
/// catalog.
pub const RU_BANK_NAMES: [&str; 4] = ["Сбербанк", "сбербанк", "Т-Банк", "Альфа-Банк"];

/// Public `https://` callback URLs accepted under the strict address policy.
pub const CALLBACK_URLS: [&str; 3] = [
    "https://merchant.example.com/callbacks",
    "https://hooks.example.org/pay?shop=1",
    "https://203.0.113.7.nip.io/cb",
];

/// Earliest generated timestamp (2023-11-14T22:13:20Z).
const T0: i64 = 1_700_000_000_000;

/// A valid amount: positive, at most 6 decimals, scale kept as written.
pub fn amount() -> impl Strategy<Value = Amount> {
    let common = select(COMMON_AMOUNTS.to_vec())
        .prop_map(|s| Amount::parse(s).expect("COMMON_AMOUNTS are valid amounts"));
    let any = (1i64..=1_000_000_000_000_000, 0u32..=6).prop_map(|(mantissa, scale)| {
        Amount::from_decimal(Decimal::new(mantissa, scale))
            .expect("a positive mantissa with at most 6 decimals and 12 integer digits is valid")
    });
    prop_oneof![2 => common, 3 => any]
}

/// A valid `merchant_payment_id`: 1-64 characters from `A-Za-z0-9._:-`.
pub fn merchant_payment_id() -> impl Strategy<Value = MerchantPaymentId> {
    "[A-Za-z0-9._:-]{1,64}"
        .prop_map(|s| MerchantPaymentId::parse(&s).expect("the regex generates only valid ids"))
}

/// An amount as a create request may carry it: a JSON number with the exact text, or a string.
pub fn amount_json(a: Amount) -> impl Strategy<Value = Value> {
    let text = a.to_string();
    let number = Value::Number(
        text.parse()
            .expect("an amount's text is a JSON number (serde_json arbitrary_precision)"),
    );
    prop_oneof![Just(number), Just(Value::String(text))]
}

/// An optional field of a create body: absent, `null` (the same as absent), or a value.
fn optional(value: impl Strategy<Value = Value>) -> impl Strategy<Value = Option<Value>> {
    prop_oneof![
        3 => Just(None),
        1 => Just(Some(Value::Null)),
        4 => value.prop_map(Some),
    ]
}

/// A valid create body as a JSON object: the required fields, and each optional field absent,
/// `null` or set to a valid value. `bank_code` names resolve in `RU` (the default `geo_code`);
/// `currency` is well-formed but may lie outside a project's contract.
pub fn create_request_json() -> impl Strategy<Value = Value> {
    let required = (
        merchant_payment_id(),
        amount().prop_flat_map(amount_json),
        select(vec!["sbp", "card_transfer"]),
    );
    let optionals = (
        optional(select(vec!["RUB", "USD", "EUR"]).prop_map(Value::from)),
        optional(Just(Value::from("RU"))),
        optional(
            prop_oneof![
                4 => select(RU_BANK_NAMES.to_vec()),
                1 => Just(""),
            ]
            .prop_map(Value::from),
        ),
        optional(any::<bool>().prop_map(Value::from)),
        optional(select(CALLBACK_URLS.to_vec()).prop_map(Value::from)),
    );
    (required, optionals).prop_map(
        |((mpid, amount, method), (currency, geo, bank, intrabank, callback))| {
            let mut m = Map::new();
            m.insert("merchant_payment_id".into(), mpid.as_str().into());
            m.insert("amount".into(), amount);
            m.insert("payment_method".into(), method.into());
            for (k, v) in [
                ("currency", currency),
                ("geo_code", geo),
                ("bank_code", bank),
                ("is_intrabank", intrabank),
                ("callback_url", callback),
            ] {
                if let Some(v) = v {
                    m.insert(k.into(), v);
                }
            }
            Value::Object(m)
        },
    )
}

/// A valid create body as bytes, ready for `Payments::create_payment` or
/// [`CreatePayment::parse`].
pub fn create_request_body() -> impl Strategy<Value = Vec<u8>> {
    create_request_json().prop_map(|v| {
        serde_json::to_vec(&v).expect("serialising a JSON value to a Vec cannot fail")
    })
}

/// A payment id.
pub fn payment_id() -> impl Strategy<Value = PaymentId> {
    any::<u128>().prop_map(|n| PaymentId::from_uuid(Uuid::from_u128(n)))
}

/// A project id.
pub fn project_id() -> impl Strategy<Value = ProjectId> {
    any::<u128>().prop_map(|n| ProjectId::from_uuid(Uuid::from_u128(n)))
}

/// A course (up to 8 decimals, 0.00000001 to 10^12) and a fee percent (0 to 99.99).
pub fn pricing() -> impl Strategy<Value = Pricing> {
    (
        prop_oneof![
            Just(Decimal::ONE_HUNDRED),
            Just(Decimal::new(92_876_543_219, 9)),
            (1i64..=1_000_000_000_000, 0u32..=8).prop_map(|(m, s)| Decimal::new(m, s)),
        ],
        prop_oneof![
            Just(Decimal::new(11, 0)),
            (0i64..10_000).prop_map(|f| Decimal::new(f, 2))
        ],
    )
        .prop_map(|(course, fee)| Pricing {
            course: Course::new(course).expect("the course is positive and at most 10^12"),
            fee_percent: FeePercent::new(fee).expect("the fee is in 0..100 with 2 decimals"),
        })
}

/// Requisites: a phone or card number, a holder name, and optionally a bank, a QR code link and
/// an open-bank-app link.
pub fn requisites() -> impl Strategy<Value = Requisites> {
    (
        prop_oneof!["79[0-9]{9}", "2200[0-9]{12}"],
        select(vec!["IVAN I.", "MARIA P.", "ANNA S."]),
        option::of(select(vec!["Сбербанк", "Т-Банк", "Some Provider Bank"])),
        option::of(Just("https://qr.example.com/q/1".to_string())),
        option::of(Just("https://bank.example.com/open/1".to_string())),
    )
        .prop_map(
            |(requisite, holder, bank, qrcode_link, deeplink_url)| Requisites {
                requisite,
                holder_name: holder.to_string(),
                bank: bank.map(str::to_string),
                qrcode_link,
                deeplink_url,
            },
        )
}

/// Why a payment is in `error`.
pub fn failure() -> impl Strategy<Value = PaymentFailure> {
    (
        select(vec![
            PaymentErrorCode::ProviderNoRequisites,
            PaymentErrorCode::ProviderResultAmbiguous,
        ]),
        "[a-z ]{0,30}",
    )
        .prop_map(|(code, comment)| PaymentFailure { code, comment })
}

/// A payment just accepted: status `created`, version 1, no requisites, `updated_at ==
/// created_at`, `expires_at = created_at + lifetime` (1 s to 24 h), a fingerprint of its own
/// request.
pub fn created_payment() -> impl Strategy<Value = Payment> {
    (
        (payment_id(), project_id(), merchant_payment_id()),
        (
            select(vec![Flow::RuntimeLive, Flow::ProjectTest]),
            amount(),
            select(PaymentMethod::ALL.to_vec()),
            any::<bool>(),
            option::of(select(vec!["Сбербанк", "Т-Банк"])),
            option::of(select(CALLBACK_URLS.to_vec())),
        ),
        (
            T0..T0 + 100_000_000_000,
            1_000u64..=86_400_000,
            option::of("[a-z]{1,8}"),
        ),
    )
        .prop_map(
            |(
                (id, project_id, merchant_payment_id),
                (flow, amount, payment_method, is_intrabank, bank, url),
                (created, lifetime_ms, order),
            )| {
                let callback_url = url.map(|u| {
                    CallbackUrl::parse(u, AddressPolicy::default())
                        .expect("CALLBACK_URLS are valid public https URLs")
                });
                let request = CreatePayment {
                    merchant_payment_id,
                    amount,
                    payment_method,
                    currency: Currency::RUB,
                    geo_code: CountryCode::RU,
                    bank_code: bank.map(str::to_string),
                    is_intrabank,
                    callback_url,
                    // Some payments carry metadata (with a value that is not ASCII), so that
                    // every store's round trip keeps it.
                    metadata: order
                        .map(|o| {
                            crate::payment::Metadata::from_json(&serde_json::json!({
                                "order": o,
                                "note": "заказ №1",
                            }))
                            .expect("valid metadata")
                        })
                        .unwrap_or_default(),
                };
                let mut p = fixtures::payment(
                    id,
                    project_id,
                    &request,
                    flow,
                    Timestamp::from_unix_millis(created),
                    Duration::from_millis(lifetime_ms),
                );
                // Intrabank payments were routed (any field would do): both forms round-trip.
                if p.is_intrabank {
                    p.route = Some(crate::payment::ProviderRoute {
                        provider: crate::provider::ProviderName::parse("bank-b_2")
                            .expect("a valid name"),
                        reason: "priority, then weight x health (bank-b_2:0.97); \
                                 not eligible: bank-a: bank"
                            .into(),
                    });
                }
                p
            },
        )
}

/// A consistent payment in `status`: `processing`, `completed` and `canceled` have requisites
/// and pricing (a `completed` one possibly with another amount than `initial_amount`); `error`
/// has a failure and no requisites; `appeal` has `appeal_from` (a closed status) and requisites
/// exactly when that status is not `error`.
pub fn payment_in(status: PaymentStatus) -> BoxedStrategy<Payment> {
    let appeal_from = select(vec![
        PaymentStatus::Completed,
        PaymentStatus::Canceled,
        PaymentStatus::Error,
    ]);
    (
        created_payment(),
        requisites(),
        pricing(),
        failure(),
        option::of(amount()),
        appeal_from,
        (0u64..=172_800_000, 1u64..20),
    )
        .prop_map(
            move |(mut p, req, pricing, failure, new_amount, appeal_from, (later, changes))| {
                if status == PaymentStatus::Created {
                    return p;
                }
                // The status the payment had before an appeal, or the status itself.
                let base = if status == PaymentStatus::Appeal {
                    appeal_from
                } else {
                    status
                };
                if base == PaymentStatus::Error {
                    p.failure = Some(failure);
                } else {
                    p.requisites = Some(req);
                    p.pricing = Some(pricing);
                    if base == PaymentStatus::Completed {
                        if let Some(a) = new_amount {
                            p.amount = a;
                        }
                    }
                }
                if status == PaymentStatus::Appeal {
                    p.appeal_from = Some(appeal_from);
                }
                p.status = status;
                p.updated_at = p.created_at + Duration::from_millis(later);
                p.version = 1 + changes;
                within_credit_limit(p)
            },
        )
        .boxed()
}

/// `p` with a credit the ledger can hold: a course so low that the amount's credit would pass
/// the 10^12 USDT limit (a payment the rules never complete, whose `credited` would read 0)
/// becomes one that credits at most 10^10 USDT (100, or the amount / 10^10 rounded up).
fn within_credit_limit(mut p: Payment) -> Payment {
    if !credit_fits(&p) {
        let course = (p.amount.as_decimal() / Decimal::from(10_000_000_000u64))
            .ceil()
            .max(Decimal::ONE_HUNDRED);
        if let Some(pricing) = p.pricing.as_mut() {
            pricing.course = Course::new(course).expect("at most 10^5 for an amount below 10^15");
        }
    }
    debug_assert!(credit_fits(&p), "{:?} {:?}", p.amount, p.pricing);
    p
}

/// A consistent payment in any status.
pub fn payment() -> impl Strategy<Value = Payment> {
    select(PaymentStatus::ALL.to_vec()).prop_flat_map(payment_in)
}

/// How a re-check ends.
pub fn recheck_outcome() -> impl Strategy<Value = RecheckOutcome> {
    prop_oneof![
        option::of(amount()).prop_map(|amount| RecheckOutcome::Completed { amount }),
        Just(RecheckOutcome::Canceled),
        Just(RecheckOutcome::Unchanged),
    ]
}

/// Any trigger, legal or not for a given payment.
pub fn trigger() -> impl Strategy<Value = Trigger> {
    prop_oneof![
        1 => (requisites(), pricing()).prop_map(|(requisites, pricing)| {
            Trigger::RequisitesIssued { requisites, pricing }
        }),
        1 => failure().prop_map(|f| Trigger::RequisitesRefused {
            code: f.code,
            comment: f.comment
        }),
        2 => option::of(amount()).prop_map(|amount| Trigger::Confirm { amount }),
        1 => Just(Trigger::Cancel),
        1 => Just(Trigger::Expire),
        1 => Just(Trigger::StartRecheck),
        2 => recheck_outcome().prop_map(Trigger::ResolveRecheck),
        1 => Just(Trigger::ResendCallback),
    ]
}

/// A sequence of triggers.
pub fn triggers(len: impl Into<SizeRange>) -> impl Strategy<Value = Vec<Trigger>> {
    vec(trigger(), len)
}

/// A sequence of triggers, each after a pause of 0 ms to `max_step`: the time matters for
/// [`Trigger::Expire`]. Zero pauses and pauses of exactly `max_step` are common.
pub fn timed_triggers(
    len: impl Into<SizeRange>,
    max_step: Duration,
) -> impl Strategy<Value = Vec<(Duration, Trigger)>> {
    let max = u64::try_from(max_step.as_millis()).unwrap_or(u64::MAX);
    let step = prop_oneof![
        Just(Duration::ZERO),
        Just(max_step),
        (0..=max).prop_map(Duration::from_millis),
    ];
    vec((step, trigger()), len)
}

#[cfg(test)]
mod tests {
    use proptest::prelude::*;

    use super::{credit_fits, payment};

    proptest! {
        /// A payment the strategies make is one the rules allow: its credit fits the ledger's
        /// limit (10^12 USDT), so `credited` never has to turn it into 0.
        #[test]
        fn every_payment_made_has_a_credit_within_the_limit(p in payment()) {
            prop_assert!(credit_fits(&p), "{:?} {:?}", p.amount, p.pricing);
        }
    }
}
