//! Sample data of the suite. Ids are fixed numbers so orderings are predictable.

use super::*;
use crate::testing::fixtures;

/// A project id from a small number.
pub fn project_id(n: u128) -> ProjectId {
    ProjectId::from_uuid(Uuid::from_u128(0x1000_0000 + n))
}

/// A payment id from a small number.
pub fn payment_id(n: u128) -> PaymentId {
    PaymentId::from_uuid(Uuid::from_u128(0x2000_0000 + n))
}

/// An event id from a small number.
pub fn event_id(n: u128) -> EventId {
    EventId::from_uuid(Uuid::from_u128(0x3000_0000 + n))
}

/// A merchant id from a small number.
pub fn merchant_id(n: u128) -> MerchantId {
    MerchantId::from_uuid(Uuid::from_u128(0x4000_0000 + n))
}

/// A token id from a small number.
pub fn token_id(n: u128) -> TokenId {
    TokenId::from_uuid(Uuid::from_u128(0x5000_0000 + n))
}

pub(super) fn url(s: &str) -> CallbackUrl {
    CallbackUrl::parse(s, AddressPolicy { allow_local: true })
        .expect("the suite's URLs are valid https URLs")
}

pub(super) fn amount(s: &str) -> Amount {
    Amount::parse(s).expect("the suite's amounts are valid")
}

pub(super) fn dec(s: &str) -> Decimal {
    Decimal::from_str(s).expect("the suite's decimals are valid")
}

/// `n` milliseconds (`n` at least 0): offsets from [`T0`].
pub fn ms(n: i64) -> Duration {
    Duration::from_millis(u64::try_from(n).expect("the suite's offsets are positive"))
}

/// A `created` payment of `project` with no optional field set: 1500.50 RUB by `sbp`, created
/// at [`T0`] with a 15-minute lifetime.
pub fn sample_payment(id: PaymentId, project: ProjectId, merchant_payment_id: &str) -> Payment {
    let request = fixtures::request(merchant_payment_id, "1500.50", PaymentMethod::Sbp);
    fixtures::payment(
        id,
        project,
        &request,
        Flow::RuntimeLive,
        T0,
        Duration::from_secs(15 * 60),
    )
}

/// A payment with every optional field set and non-default values everywhere.
pub fn full_payment(id: PaymentId, project: ProjectId, merchant_payment_id: &str) -> Payment {
    let mut p = sample_payment(id, project, merchant_payment_id);
    p.flow = Flow::ProjectTest;
    p.status = PaymentStatus::Appeal;
    p.amount = amount("0.000001");
    p.initial_amount = amount("999999999999999999.100000");
    p.currency = Currency::parse("USD").expect("USD is three upper-case letters");
    p.geo_code = CountryCode::parse("kz").expect("kz is two letters");
    p.payment_method = PaymentMethod::CardTransfer;
    p.is_intrabank = true;
    p.bank_code = Some("Сбербанк".to_string());
    p.callback_url = Some(url("https://merchant.example/callbacks?order=1&x=%20y"));
    p.requisites = Some(Requisites {
        requisite: "2200123456789010".to_string(),
        holder_name: "Иван И.".to_string(),
        bank: Some("Т-Банк".to_string()),
        qrcode_link: Some("https://qr.example/abc".to_string()),
        deeplink_url: Some("bank://pay?x=1".to_string()),
    });
    p.pricing = Some(Pricing {
        course: Course::new(dec("92.87654321")).expect("a valid course"),
        fee_percent: FeePercent::new(dec("2.5")).expect("a valid fee"),
    });
    p.failure = Some(PaymentFailure {
        code: PaymentErrorCode::ProviderResultAmbiguous,
        comment: "provider timed out; \"quoted\" and 'single'".to_string(),
    });
    p.appeal_from = Some(PaymentStatus::Canceled);
    p.created_at = Timestamp::from_unix_millis(1_790_812_800_123);
    p.updated_at = Timestamp::from_unix_millis(1_790_812_900_456);
    p.expires_at = Timestamp::from_unix_millis(1_790_813_700_789);
    p.version = 42;
    p.fingerprint = "{\"amount\":\"0.000001\",\"n\":[1,2]}".to_string();
    p.route = Some(crate::payment::ProviderRoute {
        provider: crate::provider::ProviderName::parse("upstream-2").expect("a valid name"),
        reason: "failover after upstream-1: no requisites".to_string(),
    });
    p
}

/// The payment after one more change to `status` at `at`.
pub fn changed(p: &Payment, status: PaymentStatus, at: Timestamp) -> Payment {
    let mut next = p.clone();
    next.status = status;
    next.updated_at = at;
    next.version += 1;
    next
}

/// A pending automatic outbox event for `p` in its current status, due at `due`.
pub fn sample_event(p: &Payment, id: EventId, due: Timestamp) -> OutboxEvent {
    OutboxEvent {
        event: CallbackEvent::new(p, id, EventKind::Automatic, p.updated_at),
        destination: url("https://merchant.example/cb"),
        state: DeliveryState::Pending,
        attempts: 0,
        max_attempts: 3,
        next_attempt_at: Some(due),
    }
}

/// An audit record.
pub fn sample_audit(at: Timestamp, action: &str, target: &str) -> AuditRecord {
    AuditRecord {
        at,
        actor: "operator-1".to_string(),
        action: action.to_string(),
        target: target.to_string(),
        before: Some("{\"status\":\"processing\"}".to_string()),
        after: None,
    }
}

pub(super) fn sample_merchant(n: u128, name: &str) -> Merchant {
    Merchant {
        id: merchant_id(n),
        name: name.to_string(),
        paused: false,
        callback_url: None,
        created_at: T0,
    }
}

pub(super) fn sample_project(n: u128, merchant: MerchantId) -> Project {
    Project {
        id: project_id(n),
        merchant_id: merchant,
        name: format!("project {n}"),
        active: true,
        test_mode: false,
        lifetime: Duration::from_secs(15 * 60),
        contract: Contract {
            currencies: vec![Currency::RUB],
            methods: vec![MethodTerms {
                method: PaymentMethod::Sbp,
                min_amount: None,
                max_amount: None,
                fee_percent: FeePercent::new(Decimal::ZERO).expect("zero is a valid fee"),
            }],
        },
        callback_url: None,
        ip_allow_list: Vec::new(),
        signature_required: false,
        paused: false,
        rate_limit: RateLimit::default(),
        // Not the defaults, so that a store that drops them fails the round trip.
        payer_page: true,
        payer_language: crate::payer::PageLanguage::En,
        return_url: None,
        created_at: T0,
    }
}

pub(super) fn token(n: u128, project: ProjectId, scopes: Vec<Scope>) -> TokenRecord {
    let mut hash = [0u8; 32];
    hash[0] = u8::try_from(n).expect("the suite's token numbers are small");
    hash[31] = 0xff;
    TokenRecord {
        id: token_id(n),
        project_id: project,
        hash,
        prefix: format!("nl_test_{n:06}"),
        scopes,
        created_at: T0 + ms(i64::try_from(n).expect("small")),
        revoked_at: None,
        name: Some(format!("token {n}")),
        expires_at: None,
    }
}

pub(super) fn key(project: ProjectId, keyid: &str, byte: u8) -> KeyRecord {
    KeyRecord {
        keyid: KeyId::new(keyid),
        project_id: project,
        public_key: [byte; 32],
        created_at: T0,
        revoked_at: None,
    }
}

pub(super) fn secret(n: i64, revealed: bool) -> SecretRecord {
    SecretRecord {
        secret: format!("whsec_{n:032}").into(),
        created_at: T0 + ms(n),
        revealed,
    }
}

pub(super) fn attempt(
    n: u32,
    success: bool,
    status: Option<u16>,
    error: Option<&str>,
) -> DeliveryAttempt {
    DeliveryAttempt {
        attempt: n,
        started_at: T0 + ms(i64::from(n) * 1000),
        duration_ms: u64::from(n) * 10 + 7,
        http_status: status,
        error: error.map(str::to_string),
        success,
        response_excerpt: status.map(|s| format!("{{\"answer\": {s}, \"text\": \"ünïcode\"}}")),
    }
}

pub(super) async fn inserted<S: Store>(store: &S, p: &Payment) {
    let outcome = store.insert_payment(p).await.expect("insert_payment");
    assert_eq!(outcome, InsertOutcome::Inserted, "payment {} is new", p.id);
}

pub(super) async fn events<S: Store>(store: &S, p: PaymentId) -> Vec<EventRecord> {
    store
        .events_for_payment(p)
        .await
        .expect("events_for_payment")
}

/// Amounts at every scale a payment may be written with, the smallest and the largest among
/// them: what a store's amount key must agree on with [`Amount::normalized`].
pub const AMOUNT_SCALES: [&str; 10] = [
    "100",
    "100.0",
    "100.50",
    "100.500000",
    "0.000001",
    "0.10",
    "1000",
    "10.05",
    "999999999999999999.999999",
    "999999999999999999.990000",
];

/// A payment of project 1 for each of [`AMOUNT_SCALES`] (payment `n` of the `n`-th amount,
/// merchant payment id `old-<n>`), and the amounts' [`Amount::normalized`] keys in the same
/// order.
pub fn payments_of_every_scale() -> (Vec<Payment>, Vec<String>) {
    AMOUNT_SCALES
        .iter()
        .zip(0u128..)
        .map(|(text, n)| {
            let mut p = sample_payment(payment_id(n), project_id(1), &format!("old-{n}"));
            p.amount = amount(text);
            (p, amount(text).normalized())
        })
        .unzip()
}

/// A payment of project 1 for each way of writing the letters of a merchant payment id
/// (upper, mixed, lower, and every other character an id may hold), and their keys
/// ([`merchant_payment_id_key`](crate::payment::merchant_payment_id_key)) in the same order.
pub fn payments_of_every_case() -> (Vec<Payment>, Vec<String>) {
    [
        ("ORD-1001", "ord-1001"),
        ("Ord-1002", "ord-1002"),
        ("ord-1003", "ord-1003"),
        ("X.Y_z:9", "x.y_z:9"),
    ]
    .into_iter()
    .zip(1u128..)
    .map(|((mpid, key), n)| {
        (
            sample_payment(payment_id(n), project_id(1), mpid),
            key.to_string(),
        )
    })
    .unzip()
}

/// The requisites of a payment paid to `requisite` (a card number or phone as the provider
/// wrote it), held by `IVAN I.`, without a bank or links.
pub fn paid_to(requisite: &str) -> Requisites {
    Requisites {
        requisite: requisite.to_string(),
        holder_name: "IVAN I.".to_string(),
        bank: None,
        qrcode_link: None,
        deeplink_url: None,
    }
}
