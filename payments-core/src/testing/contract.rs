//! The store contract suite: the documented semantics of every [`Store`] method, as async
//! checks any adapter runs against itself. [`MemoryStore`](super::MemoryStore) is the reference;
//! `payments-store-sqlite` runs the same suite.
//!
//! Each check takes a fresh, empty store and panics (with a message) on a violation. The checks
//! are executor-agnostic: they only await the store, so `futures_executor::block_on` drives the
//! memory store and a tokio runtime drives adapters that need one.

use std::future::Future;
use std::pin::Pin;
use std::str::FromStr;
use std::time::Duration;

use futures_util::future::join_all;
use rust_decimal::Decimal;
use uuid::Uuid;

use crate::amount::Amount;
use crate::auth::Scope;
use crate::bank::CountryCode;
use crate::callback::address::AddressPolicy;
use crate::callback::destination::CallbackUrl;
use crate::clock::Timestamp;
use crate::event::{
    CallbackEvent, DeliveryAttempt, DeliveryState, EventKind, EventRecord, OutboxEvent,
};
use crate::ids::{EventId, KeyId, MerchantId, PaymentId, ProjectId, TokenId};
use crate::payment::{
    Currency, Flow, MerchantPaymentId, Payment, PaymentErrorCode, PaymentFailure, PaymentMethod,
    PaymentStatus, Requisites,
};
use crate::project::{
    AuditRecord, Contract, KeyRecord, Merchant, MethodTerms, Project, RateLimit, SecretRecord,
    TokenRecord,
};
use crate::settlement::{Course, FeePercent, Pricing};
use crate::store::{InsertOutcome, PaymentChange, Store, StoreError};

/// 2026-10-01T00:00:00Z: the fixed "now" of the suite.
pub const T0: Timestamp = Timestamp::from_unix_millis(1_790_812_800_000);

/// A boxed check future borrowing the store.
pub type CheckFuture<'a> = Pin<Box<dyn Future<Output = ()> + 'a>>;

/// A named check of the suite.
pub type Check<S> = (&'static str, for<'a> fn(&'a S) -> CheckFuture<'a>);

/// Every check of the suite with its name, in a stable order.
pub fn checks<S: Store>() -> Vec<Check<S>> {
    vec![
        ("insert_and_duplicate", |s| {
            Box::pin(insert_and_duplicate(s))
        }),
        ("payment_round_trip", |s| Box::pin(payment_round_trip(s))),
        ("concurrent_inserts", |s| Box::pin(concurrent_inserts(s))),
        ("commit_change", |s| Box::pin(commit_change(s))),
        ("conflict_writes_nothing", |s| {
            Box::pin(conflict_writes_nothing(s))
        }),
        ("due_payments", |s| Box::pin(due_payments(s))),
        ("count_by_status", |s| Box::pin(count_by_status(s))),
        ("nonces", |s| Box::pin(nonces(s))),
        ("concurrent_nonces", |s| Box::pin(concurrent_nonces(s))),
        ("outbox_claim_and_lease", |s| {
            Box::pin(outbox_claim_and_lease(s))
        }),
        ("outbox_attempts", |s| Box::pin(outbox_attempts(s))),
        ("merchants_and_projects", |s| {
            Box::pin(merchants_and_projects(s))
        }),
        ("tokens", |s| Box::pin(tokens(s))),
        ("keys", |s| Box::pin(keys(s))),
        ("callback_secrets", |s| Box::pin(callback_secrets(s))),
        ("settings", |s| Box::pin(settings(s))),
        ("audit", |s| Box::pin(audit(s))),
    ]
}

/// Runs every check, each against a fresh store from `make`.
pub async fn run_all<S: Store>(make: impl Fn() -> S) {
    for (name, check) in checks::<S>() {
        let store = make();
        // A failing check panics; the name printed first says which one.
        println!("store contract: {name}");
        check(&store).await;
    }
}

// ---------------------------------------------------------------------------------------------
// Sample data. Ids are fixed numbers so orderings are predictable.

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

fn merchant_id(n: u128) -> MerchantId {
    MerchantId::from_uuid(Uuid::from_u128(0x4000_0000 + n))
}

fn token_id(n: u128) -> TokenId {
    TokenId::from_uuid(Uuid::from_u128(0x5000_0000 + n))
}

fn url(s: &str) -> CallbackUrl {
    CallbackUrl::parse(s, AddressPolicy { allow_local: true })
        .expect("the suite's URLs are valid https URLs")
}

fn amount(s: &str) -> Amount {
    Amount::parse(s).expect("the suite's amounts are valid")
}

fn dec(s: &str) -> Decimal {
    Decimal::from_str(s).expect("the suite's decimals are valid")
}

fn ms(n: i64) -> Duration {
    Duration::from_millis(u64::try_from(n).expect("the suite's offsets are positive"))
}

/// A `created` payment of `project` with no optional field set.
pub fn sample_payment(id: PaymentId, project: ProjectId, merchant_payment_id: &str) -> Payment {
    Payment {
        id,
        project_id: project,
        merchant_payment_id: MerchantPaymentId::parse(merchant_payment_id)
            .expect("the suite's merchant payment ids are valid"),
        flow: Flow::RuntimeLive,
        status: PaymentStatus::Created,
        amount: amount("1500.50"),
        initial_amount: amount("1500.50"),
        currency: Currency::RUB,
        geo_code: CountryCode::RU,
        payment_method: PaymentMethod::Sbp,
        is_intrabank: false,
        bank_code: None,
        callback_url: None,
        requisites: None,
        pricing: None,
        failure: None,
        appeal_from: None,
        created_at: T0,
        updated_at: T0,
        expires_at: T0 + Duration::from_secs(15 * 60),
        version: 1,
        fingerprint: format!("fingerprint-{merchant_payment_id}"),
    }
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

fn sample_merchant(n: u128, name: &str) -> Merchant {
    Merchant {
        id: merchant_id(n),
        name: name.to_string(),
        paused: false,
        callback_url: None,
        created_at: T0,
    }
}

fn sample_project(n: u128, merchant: MerchantId) -> Project {
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
        rate_limit: RateLimit::default(),
        created_at: T0,
    }
}

fn token(n: u128, project: ProjectId, scopes: Vec<Scope>) -> TokenRecord {
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
    }
}

fn key(project: ProjectId, keyid: &str, byte: u8) -> KeyRecord {
    KeyRecord {
        keyid: KeyId::new(keyid),
        project_id: project,
        public_key: [byte; 32],
        created_at: T0,
        revoked_at: None,
    }
}

fn secret(n: i64, revealed: bool) -> SecretRecord {
    SecretRecord {
        secret: format!("whsec_{n:032}"),
        created_at: T0 + ms(n),
        revealed,
    }
}

fn attempt(n: u32, success: bool, status: Option<u16>, error: Option<&str>) -> DeliveryAttempt {
    DeliveryAttempt {
        attempt: n,
        started_at: T0 + ms(i64::from(n) * 1000),
        duration_ms: u64::from(n) * 10 + 7,
        http_status: status,
        error: error.map(str::to_string),
        success,
    }
}

async fn inserted<S: Store>(store: &S, p: &Payment) {
    let outcome = store.insert_payment(p).await.expect("insert_payment");
    assert_eq!(outcome, InsertOutcome::Inserted, "payment {} is new", p.id);
}

async fn events<S: Store>(store: &S, p: PaymentId) -> Vec<EventRecord> {
    store
        .events_for_payment(p)
        .await
        .expect("events_for_payment")
}

// ---------------------------------------------------------------------------------------------
// Payments.

/// Insert, then the same (project, merchant_payment_id) again: `Existing` with the stored
/// payment, nothing overwritten; the same merchant id in another project is a new payment; a
/// reused payment id is `Duplicate`.
pub async fn insert_and_duplicate<S: Store>(store: &S) {
    let (a, b) = (project_id(1), project_id(2));
    let p = sample_payment(payment_id(1), a, "order-1");
    inserted(store, &p).await;

    let mut again = sample_payment(payment_id(2), a, "order-1");
    again.amount = amount("7");
    again.fingerprint = "another request".to_string();
    match store.insert_payment(&again).await.expect("insert_payment") {
        InsertOutcome::Existing(stored) => assert_eq!(stored, p, "Existing carries the stored one"),
        other => panic!("a taken merchant payment id must be Existing, got {other:?}"),
    }
    assert_eq!(store.payment(payment_id(2)).await.expect("payment"), None);
    assert_eq!(store.payment(p.id).await.expect("payment"), Some(p.clone()));

    let other_project = sample_payment(payment_id(3), b, "order-1");
    inserted(store, &other_project).await;
    let mpid = MerchantPaymentId::parse("order-1").expect("valid");
    assert_eq!(
        store
            .payment_by_merchant_id(a, &mpid)
            .await
            .expect("lookup"),
        Some(p.clone())
    );
    assert_eq!(
        store
            .payment_by_merchant_id(b, &mpid)
            .await
            .expect("lookup"),
        Some(other_project)
    );
    let unknown = MerchantPaymentId::parse("order-2").expect("valid");
    assert_eq!(
        store
            .payment_by_merchant_id(a, &unknown)
            .await
            .expect("lookup"),
        None
    );

    let same_id = sample_payment(p.id, a, "order-3");
    assert!(
        matches!(
            store.insert_payment(&same_id).await,
            Err(StoreError::Duplicate(_))
        ),
        "a reused payment id is Duplicate"
    );
    assert_eq!(store.payment(p.id).await.expect("payment"), Some(p));
}

/// Every field of a payment comes back exactly, including decimal scale and optional parts.
pub async fn payment_round_trip<S: Store>(store: &S) {
    let full = full_payment(payment_id(1), project_id(1), "full:order_1.x-y");
    let bare = sample_payment(payment_id(2), project_id(1), "bare");
    inserted(store, &full).await;
    inserted(store, &bare).await;
    for p in [&full, &bare] {
        let by_id = store.payment(p.id).await.expect("payment").expect("stored");
        assert_eq!(&by_id, p);
        // Amount equality is by value; the stored text must keep the scale too.
        assert_eq!(by_id.amount.to_string(), p.amount.to_string());
        assert_eq!(
            by_id.initial_amount.to_string(),
            p.initial_amount.to_string()
        );
        let by_mpid = store
            .payment_by_merchant_id(p.project_id, &p.merchant_payment_id)
            .await
            .expect("lookup")
            .expect("stored");
        assert_eq!(&by_mpid, p);
    }
    let stored = store
        .payment(full.id)
        .await
        .expect("payment")
        .expect("stored");
    assert_eq!(
        stored.initial_amount.to_string(),
        "999999999999999999.100000"
    );
    assert_eq!(
        stored.pricing.map(|p| p.course.as_decimal().to_string()),
        Some("92.87654321".to_string())
    );

    // A change round-trips every field as well.
    let mut next = changed(&full, PaymentStatus::Completed, full.updated_at + ms(5));
    next.amount = amount("100.50");
    next.appeal_from = None;
    next.requisites = Some(Requisites {
        requisite: "+79001234567".to_string(),
        holder_name: "A".to_string(),
        bank: None,
        qrcode_link: None,
        deeplink_url: None,
    });
    store
        .commit_change(&PaymentChange {
            payment: next.clone(),
            expected_version: full.version,
            event: None,
            audit: None,
        })
        .await
        .expect("commit_change");
    let stored = store
        .payment(full.id)
        .await
        .expect("payment")
        .expect("stored");
    assert_eq!(stored, next);
    assert_eq!(stored.amount.to_string(), "100.50");
}

/// Many concurrent inserts of one (project, merchant_payment_id): exactly one `Inserted`, every
/// other call `Existing` with the winner.
pub async fn concurrent_inserts<S: Store>(store: &S) {
    let candidates: Vec<Payment> = (0..16)
        .map(|i| sample_payment(payment_id(100 + i), project_id(1), "race"))
        .collect();
    let outcomes = join_all(candidates.iter().map(|p| store.insert_payment(p))).await;
    let mut winner = None;
    for (p, outcome) in candidates.iter().zip(&outcomes) {
        if outcome == &Ok(InsertOutcome::Inserted) {
            assert!(winner.is_none(), "two inserts won");
            winner = Some(p.clone());
        }
    }
    let winner = winner.expect("one insert wins");
    for outcome in outcomes {
        match outcome.expect("insert_payment") {
            InsertOutcome::Inserted => {}
            InsertOutcome::Existing(p) => assert_eq!(p, winner),
        }
    }
}

/// A change commits the new version with its event and audit record; an event-only change
/// (expected version = the payment's version) adds just the event; unknown payments are
/// `NotFound`.
pub async fn commit_change<S: Store>(store: &S) {
    let p = sample_payment(payment_id(1), project_id(1), "order-1");
    inserted(store, &p).await;
    let mut v2 = changed(&p, PaymentStatus::Processing, T0 + ms(100));
    v2.requisites = full_payment(p.id, p.project_id, "x").requisites;
    v2.pricing = full_payment(p.id, p.project_id, "x").pricing;
    let ev = sample_event(&v2, event_id(1), T0 + ms(100));
    let audit = sample_audit(T0 + ms(100), "payment.issue", &p.id.to_string());
    store
        .commit_change(&PaymentChange {
            payment: v2.clone(),
            expected_version: 1,
            event: Some(ev.clone()),
            audit: Some(audit.clone()),
        })
        .await
        .expect("commit_change");
    assert_eq!(
        store.payment(p.id).await.expect("payment"),
        Some(v2.clone())
    );
    let recorded = events(store, p.id).await;
    assert_eq!(
        recorded,
        vec![EventRecord {
            outbox: ev.clone(),
            attempts: Vec::new()
        }]
    );
    assert_eq!(recorded[0].outbox.event.body, ev.event.body, "body frozen");
    assert_eq!(store.audit_records(10).await.expect("audit"), vec![audit]);
    assert_eq!(store.pending_events().await.expect("pending"), 1);

    // Event only: the payment stays at version 2.
    let resend = OutboxEvent {
        event: CallbackEvent::new(&v2, event_id(2), EventKind::ManualResend, T0 + ms(200)),
        max_attempts: 1,
        ..sample_event(&v2, event_id(2), T0 + ms(200))
    };
    store
        .commit_change(&PaymentChange {
            payment: v2.clone(),
            expected_version: 2,
            event: Some(resend.clone()),
            audit: None,
        })
        .await
        .expect("event-only change");
    assert_eq!(
        store.payment(p.id).await.expect("payment"),
        Some(v2.clone())
    );
    let recorded: Vec<OutboxEvent> = events(store, p.id)
        .await
        .into_iter()
        .map(|e| e.outbox)
        .collect();
    assert_eq!(recorded, vec![ev, resend]);
    assert_eq!(store.audit_records(10).await.expect("audit").len(), 1);

    let ghost = sample_payment(payment_id(9), project_id(1), "ghost");
    let err = store
        .commit_change(&PaymentChange {
            payment: changed(&ghost, PaymentStatus::Processing, T0),
            expected_version: 1,
            event: None,
            audit: None,
        })
        .await;
    assert!(
        matches!(err, Err(StoreError::NotFound(_))),
        "unknown payment: {err:?}"
    );
    assert_eq!(store.payment(ghost.id).await.expect("payment"), None);
}

/// A stale version is `Conflict` and writes nothing: no payment change, no event, no audit. A
/// duplicate event id is `Duplicate` and writes nothing either.
pub async fn conflict_writes_nothing<S: Store>(store: &S) {
    let p = sample_payment(payment_id(1), project_id(1), "order-1");
    inserted(store, &p).await;
    let v2 = changed(&p, PaymentStatus::Processing, T0 + ms(1));
    store
        .commit_change(&PaymentChange {
            payment: v2.clone(),
            expected_version: 1,
            event: Some(sample_event(&v2, event_id(1), T0)),
            audit: None,
        })
        .await
        .expect("first change");

    // A second writer computed its change from version 1 too.
    let stale = changed(&p, PaymentStatus::Error, T0 + ms(2));
    let err = store
        .commit_change(&PaymentChange {
            payment: stale.clone(),
            expected_version: 1,
            event: Some(sample_event(&stale, event_id(2), T0)),
            audit: Some(sample_audit(T0, "payment.fail", "x")),
        })
        .await;
    assert_eq!(err, Err(StoreError::Conflict));
    assert_eq!(
        store.payment(p.id).await.expect("payment"),
        Some(v2.clone())
    );
    assert_eq!(
        events(store, p.id).await.len(),
        1,
        "no event from a conflict"
    );
    assert!(store.audit_records(10).await.expect("audit").is_empty());
    assert_eq!(store.pending_events().await.expect("pending"), 1);

    // Reusing an event id fails the whole change.
    let v3 = changed(&v2, PaymentStatus::Completed, T0 + ms(3));
    let err = store
        .commit_change(&PaymentChange {
            payment: v3.clone(),
            expected_version: 2,
            event: Some(sample_event(&v3, event_id(1), T0)),
            audit: Some(sample_audit(T0, "payment.confirm", "x")),
        })
        .await;
    assert!(
        matches!(err, Err(StoreError::Duplicate(_))),
        "duplicate event id: {err:?}"
    );
    assert_eq!(store.payment(p.id).await.expect("payment"), Some(v2));
    assert_eq!(events(store, p.id).await.len(), 1);
    assert!(store.audit_records(10).await.expect("audit").is_empty());
}

/// Only `created` and `processing` payments are due, at their [`Payment::due_at`], earliest
/// first, at most `limit`; a change that closes a payment makes it no longer due.
pub async fn due_payments<S: Store>(store: &S) {
    let project = project_id(1);
    let at = |n: u128, status: PaymentStatus, created: i64, expires: i64| {
        let mut p = sample_payment(payment_id(n), project, &format!("o{n}"));
        p.status = status;
        p.created_at = T0 + ms(created);
        p.updated_at = p.created_at;
        p.expires_at = T0 + ms(expires);
        p
    };
    // due_at: created -> created_at + 60 s; processing -> expires_at.
    let payments = vec![
        at(1, PaymentStatus::Processing, 0, 30_000), // due T0+30s
        at(2, PaymentStatus::Created, 0, 900_000),   // due T0+60s
        at(3, PaymentStatus::Processing, 0, 10_000), // due T0+10s
        at(4, PaymentStatus::Completed, 0, 1),       // never
        at(5, PaymentStatus::Canceled, 0, 1),        // never
        at(6, PaymentStatus::Error, 0, 1),           // never
        at(7, PaymentStatus::Appeal, 0, 1),          // never
        at(8, PaymentStatus::Processing, 0, 500_000), // due later
        at(9, PaymentStatus::Processing, 0, 10_000), // ties with 3, larger id
    ];
    for p in &payments {
        inserted(store, p).await;
    }
    let ids = |v: Vec<Payment>| v.into_iter().map(|p| p.id).collect::<Vec<_>>();
    let now = T0 + ms(60_000);
    assert_eq!(
        ids(store.due_payments(now, 100).await.expect("due")),
        vec![payment_id(3), payment_id(9), payment_id(1), payment_id(2)]
    );
    assert_eq!(
        ids(store.due_payments(now, 2).await.expect("due")),
        vec![payment_id(3), payment_id(9)]
    );
    assert_eq!(
        ids(store.due_payments(T0 + ms(9_999), 100).await.expect("due")),
        Vec::<PaymentId>::new()
    );
    assert_eq!(
        ids(store.due_payments(T0 + ms(10_000), 100).await.expect("due")),
        vec![payment_id(3), payment_id(9)],
        "due at exactly due_at"
    );
    let returned = store.due_payments(now, 100).await.expect("due");
    assert_eq!(returned[0], payments[2], "whole payments are returned");

    // Closing payment 3 takes it off the schedule; payment 2 moving to processing moves its
    // due time to its expires_at.
    let p3 = changed(&payments[2], PaymentStatus::Canceled, T0 + ms(10_001));
    let p2 = changed(&payments[1], PaymentStatus::Processing, T0 + ms(1));
    for (p, v) in [(p3, 1), (p2, 1)] {
        store
            .commit_change(&PaymentChange {
                payment: p,
                expected_version: v,
                event: None,
                audit: None,
            })
            .await
            .expect("commit_change");
    }
    assert_eq!(
        ids(store.due_payments(now, 100).await.expect("due")),
        vec![payment_id(9), payment_id(1)]
    );
    assert_eq!(
        ids(store
            .due_payments(T0 + ms(900_000), 100)
            .await
            .expect("due")),
        vec![payment_id(9), payment_id(1), payment_id(8), payment_id(2)]
    );
}

/// Counts per status, in [`PaymentStatus::ALL`] order, statuses with no payment left out.
pub async fn count_by_status<S: Store>(store: &S) {
    assert_eq!(store.count_by_status().await.expect("count"), Vec::new());
    let statuses = [
        PaymentStatus::Completed,
        PaymentStatus::Created,
        PaymentStatus::Completed,
        PaymentStatus::Appeal,
        PaymentStatus::Completed,
    ];
    for (i, status) in statuses.into_iter().enumerate() {
        let n = u128::try_from(i).expect("small");
        let mut p = sample_payment(payment_id(n), project_id(1), &format!("o{i}"));
        p.status = status;
        inserted(store, &p).await;
    }
    assert_eq!(
        store.count_by_status().await.expect("count"),
        vec![
            (PaymentStatus::Created, 1),
            (PaymentStatus::Completed, 3),
            (PaymentStatus::Appeal, 1),
        ]
    );
}

// ---------------------------------------------------------------------------------------------
// Nonces.

/// A nonce is accepted once per project until it expires; at `expires_at` it is free again;
/// purging removes exactly the expired ones.
pub async fn nonces<S: Store>(store: &S) {
    let (a, b) = (project_id(1), project_id(2));
    let exp = T0 + ms(300_000);
    assert!(store.use_nonce(a, "n-1", T0, exp).await.expect("use"));
    assert!(!store.use_nonce(a, "n-1", T0, exp).await.expect("use"));
    assert!(
        !store
            .use_nonce(a, "n-1", exp - ms(1), exp + ms(9))
            .await
            .expect("use"),
        "a replay just before expiry"
    );
    assert!(
        store.use_nonce(b, "n-1", T0, exp).await.expect("use"),
        "nonces are per project"
    );
    assert!(store
        .use_nonce(a, "n-2", T0, T0 + ms(10))
        .await
        .expect("use"));
    assert!(
        store
            .use_nonce(a, "n-1", exp, exp + ms(1000))
            .await
            .expect("use"),
        "free again at its expiry"
    );
    assert!(
        !store
            .use_nonce(a, "n-1", exp, exp + ms(1000))
            .await
            .expect("use"),
        "the re-use recorded the new expiry"
    );

    // Now: a/n-1 until exp+1000, b/n-1 until exp, a/n-2 until T0+10.
    assert_eq!(store.purge_nonces(T0 + ms(9)).await.expect("purge"), 0);
    assert_eq!(store.purge_nonces(exp).await.expect("purge"), 2);
    assert_eq!(store.purge_nonces(exp).await.expect("purge"), 0);
    assert!(
        !store
            .use_nonce(a, "n-1", exp, exp + ms(5))
            .await
            .expect("use"),
        "a live nonce survives the purge"
    );
    assert!(store
        .use_nonce(b, "n-1", exp, exp + ms(5))
        .await
        .expect("use"));
}

/// Many concurrent uses of one nonce: exactly one `true`.
pub async fn concurrent_nonces<S: Store>(store: &S) {
    let results =
        join_all((0..16).map(|_| store.use_nonce(project_id(1), "same", T0, T0 + ms(60_000))))
            .await;
    let accepted = results
        .into_iter()
        .map(|r| r.expect("use_nonce"))
        .filter(|ok| *ok)
        .count();
    assert_eq!(accepted, 1);
}

// ---------------------------------------------------------------------------------------------
// Outbox.

async fn queue_event<S: Store>(store: &S, n: u128, due: Timestamp) -> OutboxEvent {
    let p = sample_payment(payment_id(n), project_id(1), &format!("o{n}"));
    inserted(store, &p).await;
    let v2 = changed(&p, PaymentStatus::Processing, T0);
    let ev = sample_event(&v2, event_id(n), due);
    store
        .commit_change(&PaymentChange {
            payment: v2,
            expected_version: 1,
            event: Some(ev.clone()),
            audit: None,
        })
        .await
        .expect("commit_change");
    ev
}

/// Claims take due pending events earliest first, up to `limit`, and lease them: a claimed
/// event is not claimed again until `now + lease`.
pub async fn outbox_claim_and_lease<S: Store>(store: &S) {
    let lease = Duration::from_secs(30);
    let e3 = queue_event(store, 3, T0 + ms(300)).await;
    let e1 = queue_event(store, 1, T0 + ms(100)).await;
    let e2 = queue_event(store, 2, T0 + ms(200)).await;
    let _later = queue_event(store, 4, T0 + ms(100_000)).await;
    let ids = |v: &[OutboxEvent]| v.iter().map(|e| e.event.event_id).collect::<Vec<_>>();

    assert!(store
        .claim_due_events(T0, 10, lease)
        .await
        .expect("claim")
        .is_empty());
    let now = T0 + ms(1000);
    let first = store.claim_due_events(now, 2, lease).await.expect("claim");
    assert_eq!(ids(&first), vec![event_id(1), event_id(2)]);
    assert_eq!(first[0], e1, "the claimed event is returned as it was");
    assert_eq!(first[1], e2);

    let second = store.claim_due_events(now, 10, lease).await.expect("claim");
    assert_eq!(ids(&second), vec![event_id(3)], "leased events are skipped");
    assert_eq!(second[0], e3);
    assert!(store
        .claim_due_events(now + lease - ms(1), 10, lease)
        .await
        .expect("claim")
        .is_empty());

    // The lease moved next_attempt_at; it is visible in the event records.
    let rec = events(store, payment_id(1)).await;
    assert_eq!(rec[0].outbox.next_attempt_at, Some(now + lease));
    assert_eq!(rec[0].outbox.state, DeliveryState::Pending);

    let after = store
        .claim_due_events(now + lease, 10, lease)
        .await
        .expect("claim");
    assert_eq!(
        ids(&after),
        vec![event_id(3), event_id(1), event_id(2)],
        "claimable again when the lease ends; equal times go in queueing order"
    );
    assert_eq!(after[0].next_attempt_at, Some(now + lease));
    assert_eq!(store.pending_events().await.expect("pending"), 4);
}

/// `record_attempt` keeps an event pending (rescheduled), or ends it delivered or failed;
/// attempts are listed in order; finished events are never claimed.
pub async fn outbox_attempts<S: Store>(store: &S) {
    let lease = Duration::from_secs(30);
    let delivered = queue_event(store, 1, T0).await;
    let failed = queue_event(store, 2, T0).await;
    assert_eq!(store.pending_events().await.expect("pending"), 2);
    let claimed = store.claim_due_events(T0, 10, lease).await.expect("claim");
    assert_eq!(claimed.len(), 2);

    let a1 = attempt(1, false, Some(500), Some("status 500"));
    let retry_at = T0 + ms(30_000);
    store
        .record_attempt(delivered.event.event_id, &a1, Some(retry_at))
        .await
        .expect("record_attempt");
    let rec = events(store, payment_id(1)).await;
    assert_eq!(rec.len(), 1);
    assert_eq!(rec[0].outbox.state, DeliveryState::Pending);
    assert_eq!(rec[0].outbox.attempts, 1);
    assert_eq!(rec[0].outbox.next_attempt_at, Some(retry_at));
    assert_eq!(rec[0].attempts, vec![a1.clone()]);
    assert_eq!(
        rec[0].outbox.event, delivered.event,
        "the body never changes"
    );

    let a2 = attempt(2, true, Some(204), None);
    store
        .record_attempt(delivered.event.event_id, &a2, None)
        .await
        .expect("record_attempt");
    let rec = events(store, payment_id(1)).await;
    assert_eq!(rec[0].outbox.state, DeliveryState::Delivered);
    assert_eq!(rec[0].outbox.attempts, 2);
    assert_eq!(rec[0].outbox.next_attempt_at, None);
    assert_eq!(rec[0].attempts, vec![a1, a2]);

    let b1 = attempt(1, false, None, Some("timeout"));
    let b2 = attempt(3, false, Some(302), Some("redirect not followed"));
    store
        .record_attempt(failed.event.event_id, &b1, Some(T0 + ms(1)))
        .await
        .expect("record_attempt");
    store
        .record_attempt(failed.event.event_id, &b2, None)
        .await
        .expect("record_attempt");
    let rec = events(store, payment_id(2)).await;
    assert_eq!(rec[0].outbox.state, DeliveryState::Failed);
    assert_eq!(rec[0].outbox.attempts, 3);
    assert_eq!(rec[0].outbox.next_attempt_at, None);
    assert_eq!(rec[0].attempts, vec![b1, b2]);

    assert_eq!(store.pending_events().await.expect("pending"), 0);
    assert!(store
        .claim_due_events(T0 + ms(10_000_000), 10, lease)
        .await
        .expect("claim")
        .is_empty());
    let err = store
        .record_attempt(event_id(99), &attempt(1, true, Some(200), None), None)
        .await;
    assert!(
        matches!(err, Err(StoreError::NotFound(_))),
        "unknown event: {err:?}"
    );
    assert!(events(store, payment_id(99)).await.is_empty());
}

// ---------------------------------------------------------------------------------------------
// Directory.

/// Merchants and projects round-trip every field, are replaced by a second put and listed in
/// id order; a project of an unknown merchant is `NotFound`.
pub async fn merchants_and_projects<S: Store>(store: &S) {
    let m2 = sample_merchant(2, "Second");
    let mut m1 = sample_merchant(1, "First");
    store.put_merchant(&m2).await.expect("put_merchant");
    store.put_merchant(&m1).await.expect("put_merchant");
    assert_eq!(
        store.merchant(m1.id).await.expect("merchant"),
        Some(m1.clone())
    );
    m1.paused = true;
    m1.name = "First, renamed".to_string();
    m1.callback_url = Some(url("https://first.example/hook"));
    store.put_merchant(&m1).await.expect("put_merchant");
    assert_eq!(
        store.merchants().await.expect("merchants"),
        vec![m1.clone(), m2.clone()]
    );
    assert_eq!(
        store.merchant(merchant_id(9)).await.expect("merchant"),
        None
    );

    let orphan = sample_project(1, merchant_id(9));
    assert!(
        matches!(
            store.put_project(&orphan).await,
            Err(StoreError::NotFound(_))
        ),
        "a project needs its merchant"
    );
    assert_eq!(store.project(orphan.id).await.expect("project"), None);

    let mut full = sample_project(2, m1.id);
    full.active = false;
    full.test_mode = true;
    full.lifetime = Duration::new(3_600, 123_000_000);
    full.contract = Contract {
        currencies: vec![Currency::RUB, Currency::parse("KZT").expect("valid")],
        methods: vec![
            MethodTerms {
                method: PaymentMethod::CardTransfer,
                min_amount: Some(dec("100.50")),
                max_amount: Some(dec("300000")),
                fee_percent: FeePercent::new(dec("3.75")).expect("valid"),
            },
            MethodTerms {
                method: PaymentMethod::Sbp,
                min_amount: None,
                max_amount: Some(dec("0.000001")),
                fee_percent: FeePercent::new(dec("0")).expect("valid"),
            },
        ],
    };
    full.callback_url = Some(url("https://shop.example/payments/callback"));
    full.ip_allow_list = vec!["203.0.113.7".to_string(), "2001:db8::/32".to_string()];
    full.signature_required = true;
    full.rate_limit = RateLimit {
        per_second: 7,
        burst: 9,
    };
    full.created_at = T0 + ms(77);
    let bare = sample_project(1, m2.id);
    store.put_project(&full).await.expect("put_project");
    store.put_project(&bare).await.expect("put_project");
    let stored = store.project(full.id).await.expect("project");
    assert_eq!(stored.as_ref(), Some(&full));
    let terms = &stored.expect("stored").contract.methods[0];
    assert_eq!(
        terms.min_amount.map(|d| d.to_string()),
        Some("100.50".into())
    );
    assert_eq!(
        store.projects().await.expect("projects"),
        vec![bare.clone(), full.clone()]
    );

    let mut renamed = full.clone();
    renamed.name = "renamed".to_string();
    renamed.contract.methods.truncate(1);
    renamed.ip_allow_list.clear();
    renamed.callback_url = None;
    store.put_project(&renamed).await.expect("put_project");
    assert_eq!(
        store.project(full.id).await.expect("project"),
        Some(renamed)
    );
    assert_eq!(store.projects().await.expect("projects").len(), 2);
}

/// Tokens are found by hash (revoked or not), listed per project, unique by hash and id;
/// revocation keeps the first revocation time and is scoped to the project.
pub async fn tokens<S: Store>(store: &S) {
    let (a, b) = (project_id(1), project_id(2));
    let t1 = token(1, a, vec![Scope::PaymentsCreate, Scope::PaymentsRead]);
    let t2 = token(2, a, vec![Scope::PaymentsTest]);
    let t3 = token(3, b, Vec::new());
    for t in [&t1, &t2, &t3] {
        store.insert_token(t).await.expect("insert_token");
    }
    assert_eq!(
        store.token_by_hash(&t2.hash).await.expect("token"),
        Some(t2.clone())
    );
    assert_eq!(store.token_by_hash(&[7; 32]).await.expect("token"), None);
    assert_eq!(
        store.tokens(a).await.expect("tokens"),
        vec![t1.clone(), t2.clone()]
    );
    assert_eq!(store.tokens(b).await.expect("tokens"), vec![t3.clone()]);

    let same_hash = TokenRecord {
        id: token_id(9),
        ..t1.clone()
    };
    assert!(matches!(
        store.insert_token(&same_hash).await,
        Err(StoreError::Duplicate(_))
    ));
    let same_id = TokenRecord {
        hash: [9; 32],
        ..t1.clone()
    };
    assert!(matches!(
        store.insert_token(&same_id).await,
        Err(StoreError::Duplicate(_))
    ));

    assert!(!store
        .revoke_token(b, t1.id, T0)
        .await
        .expect("revoke_token"));
    assert!(!store
        .revoke_token(a, token_id(9), T0)
        .await
        .expect("revoke_token"));
    let at = T0 + ms(5_000);
    assert!(store
        .revoke_token(a, t1.id, at)
        .await
        .expect("revoke_token"));
    assert!(store
        .revoke_token(a, t1.id, at + ms(1))
        .await
        .expect("revoke_token"));
    let revoked = store
        .token_by_hash(&t1.hash)
        .await
        .expect("token")
        .expect("revoked tokens are still found");
    assert_eq!(
        revoked.revoked_at,
        Some(at),
        "the first revocation time stays"
    );
    assert_eq!(
        store.tokens(a).await.expect("tokens"),
        vec![revoked, t2.clone()]
    );
}

/// Keys are unique per (project, keyid), found revoked or not, listed per project.
pub async fn keys<S: Store>(store: &S) {
    let (a, b) = (project_id(1), project_id(2));
    let k1 = key(a, "ed25519-AAAA", 1);
    let k2 = key(a, "ed25519-BBBB", 2);
    let k1b = key(b, "ed25519-AAAA", 3);
    for k in [&k1, &k2, &k1b] {
        store.insert_key(k).await.expect("insert_key");
    }
    assert!(matches!(
        store.insert_key(&key(a, "ed25519-AAAA", 4)).await,
        Err(StoreError::Duplicate(_))
    ));
    assert_eq!(
        store.key(a, &k1.keyid).await.expect("key"),
        Some(k1.clone())
    );
    assert_eq!(
        store.key(b, &k1.keyid).await.expect("key"),
        Some(k1b.clone())
    );
    assert_eq!(
        store
            .key(a, &KeyId::new("ed25519-CCCC"))
            .await
            .expect("key"),
        None
    );
    assert_eq!(
        store.keys(a).await.expect("keys"),
        vec![k1.clone(), k2.clone()]
    );

    let at = T0 + ms(1);
    assert!(!store
        .revoke_key(b, &k2.keyid, at)
        .await
        .expect("revoke_key"));
    assert!(store
        .revoke_key(a, &k1.keyid, at)
        .await
        .expect("revoke_key"));
    assert!(store
        .revoke_key(a, &k1.keyid, at + ms(1))
        .await
        .expect("revoke_key"));
    let revoked = store.key(a, &k1.keyid).await.expect("key").expect("found");
    assert_eq!(revoked.revoked_at, Some(at));
    assert_eq!(revoked.public_key, [1; 32]);
    assert_eq!(
        store.key(b, &k1.keyid).await.expect("key"),
        Some(k1b),
        "revocation is per project"
    );
}

/// Secrets are kept two at most, newest first; `add_if_none` adds only to an empty project.
pub async fn callback_secrets<S: Store>(store: &S) {
    let (a, b) = (project_id(1), project_id(2));
    assert!(store.callback_secrets(a).await.expect("secrets").is_empty());
    let (s1, s2, s3) = (secret(1, false), secret(2, true), secret(3, true));
    store.add_callback_secret(a, &s1).await.expect("add");
    assert_eq!(
        store.callback_secrets(a).await.expect("secrets"),
        vec![s1.clone()]
    );
    store.add_callback_secret(a, &s2).await.expect("add");
    store.add_callback_secret(a, &s3).await.expect("add");
    assert_eq!(
        store.callback_secrets(a).await.expect("secrets"),
        vec![s3.clone(), s2.clone()]
    );

    let auto = secret(4, false);
    assert_eq!(
        store
            .add_callback_secret_if_none(a, &auto)
            .await
            .expect("add_if_none"),
        vec![s3.clone(), s2.clone()],
        "a project with secrets keeps them"
    );
    assert_eq!(
        store
            .add_callback_secret_if_none(b, &auto)
            .await
            .expect("add_if_none"),
        vec![auto.clone()]
    );
    assert_eq!(
        store
            .add_callback_secret_if_none(b, &s1)
            .await
            .expect("add_if_none"),
        vec![auto.clone()]
    );
    assert_eq!(
        store.callback_secrets(b).await.expect("secrets"),
        vec![auto]
    );
    assert_eq!(
        store.callback_secrets(a).await.expect("secrets"),
        vec![s3, s2]
    );
}

/// Settings are absent until set and overwritten by a second set.
pub async fn settings<S: Store>(store: &S) {
    assert_eq!(
        store.setting("operator_token").await.expect("setting"),
        None
    );
    store
        .put_setting("operator_token", "abc")
        .await
        .expect("put_setting");
    store.put_setting("other", "").await.expect("put_setting");
    store
        .put_setting("operator_token", "def ü")
        .await
        .expect("put_setting");
    assert_eq!(
        store.setting("operator_token").await.expect("setting"),
        Some("def ü".to_string())
    );
    assert_eq!(
        store.setting("other").await.expect("setting"),
        Some(String::new())
    );
}

/// The audit trail lists the newest `limit` records newest first, including those written by
/// `commit_change`.
pub async fn audit<S: Store>(store: &S) {
    assert!(store.audit_records(10).await.expect("audit").is_empty());
    let r1 = sample_audit(T0, "token.issue", "t1");
    let mut r2 = sample_audit(T0, "token.revoke", "t1");
    r2.before = None;
    r2.after = Some("{}".to_string());
    r2.actor = "system".to_string();
    store.append_audit(&r1).await.expect("append");
    store.append_audit(&r2).await.expect("append");
    let p = sample_payment(payment_id(1), project_id(1), "o1");
    inserted(store, &p).await;
    let r3 = sample_audit(T0 + ms(1), "payment.cancel", &p.id.to_string());
    store
        .commit_change(&PaymentChange {
            payment: changed(&p, PaymentStatus::Processing, T0),
            expected_version: 1,
            event: None,
            audit: Some(r3.clone()),
        })
        .await
        .expect("commit_change");
    let r4 = sample_audit(T0, "key.register", "k");
    store.append_audit(&r4).await.expect("append");
    assert_eq!(
        store.audit_records(3).await.expect("audit"),
        vec![r4.clone(), r3.clone(), r2.clone()]
    );
    assert_eq!(
        store.audit_records(100).await.expect("audit"),
        vec![r4, r3, r2, r1]
    );
    assert!(store.audit_records(0).await.expect("audit").is_empty());
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testing::MemoryStore;

    #[test]
    fn the_memory_store_meets_the_contract() {
        futures_executor::block_on(run_all(MemoryStore::new));
    }
}
