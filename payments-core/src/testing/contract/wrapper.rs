//! The check of a store wrapper (a decorator that measures, logs or traces): it must keep every
//! behaviour of the store it wraps.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};

use async_trait::async_trait;

use super::*;
use crate::appeal::{Appeal, AppealInsert, AppealQuery};
use crate::event::{FailedEvent, FailedEventFilter};
use crate::history::StatusChange;
use crate::ids::AppealId;
use crate::ledger::{Balance, EntryKind, KindTotal, LedgerEntry};
use crate::payer::PaymentPageRecord;
use crate::project::OperatorTokenRecord;
use crate::receipt::Receipt;
use crate::request_log::{RequestLogEntry, RequestLogQuery};
use crate::store::OutboxRelay;
use crate::store::{AppealChange, AppealStore, RequestLogStore};
use crate::store::{
    AuditStore, Backlog, CallbackSecretStore, CredentialStore, EntryQuery, EventQuery, LeaseToken,
    LedgerStore, MerchantStore, OperatorStore, OutboxStore, PageKey, PayerPageStore, PaymentQuery,
    PaymentStore, Purged, Retained, SettingStore, TokenKey, TxOutput, TxWork, UnavailableCause,
};
use crate::testing::MemoryStore;
use crate::totals::PaymentTotals;
use crate::SecretString;

/// Checks that a store wrapper keeps every behaviour of the store it wraps: `wrap` gets a
/// probe store and returns the wrapper around it. Panics, listing everything lost, when:
///
/// - a method of the port, required or provided, does not reach the probe as itself, exactly
///   once (a provided method such as `admit_create`, `auth_lookup`, `auth_lookup_with_payment`,
///   `find_active_key_projects`, `check_writable` or `take_turn` left at the port's default reaches
///   it as the required calls its default is made of, and so loses the store's override: one
///   write becomes several round trips, a turn decided in the database becomes `true` on every
///   node);
/// - an answer through the wrapper differs from the probe's own (the probe is the reference
///   [`MemoryStore`] with a few answers of its own), an error included;
/// - [`Store::is_ready`] through the wrapper does not follow the probe (it says ready when the
///   probe is not).
///
/// It is for wrappers that forward each call ([`Layered`](crate::store::Layered) ones and
/// hand-written ones alike); a wrapper that answers from a cache or retries does not pass.
///
/// ```
/// use std::sync::Arc;
///
/// use payments_core::store::{Layered, Store, StoreLayer};
/// use payments_core::testing::contract;
///
/// struct Plain(Arc<dyn Store>);
///
/// impl StoreLayer for Plain {
///     fn inner(&self) -> &Arc<dyn Store> {
///         &self.0
///     }
/// }
///
/// futures_executor::block_on(contract::check_wrapper(|inner| {
///     Arc::new(Layered::new(Plain(inner)))
/// }));
/// ```
pub async fn check_wrapper(wrap: impl FnOnce(Arc<dyn Store>) -> Arc<dyn Store>) {
    let probe = Arc::new(Probe::new());
    let wrapped = wrap(probe.clone());
    let walk = methods_through(&probe, wrapped.as_ref()).await;
    let mut lost = walk.lost;

    // Readiness follows the probe's, both ways.
    if !wrapped.is_ready() {
        lost.push("`is_ready` is false through the wrapper while the store is ready".into());
    }
    probe.ready.store(false, Ordering::SeqCst);
    if wrapped.is_ready() {
        lost.push(
            "`is_ready` stays true through the wrapper after the store stopped being ready \
             (the port's default is always true: forward `is_ready`)"
                .into(),
        );
    }
    // An error comes back as the store gave it.
    probe.take_calls();
    let writable = wrapped.check_writable().await;
    let seen = probe.take_calls();
    if writable != Err(Probe::closed()) || seen != ["check_writable"] {
        lost.push(format!(
            "`check_writable` of a closed store answered {writable:?} through the wrapper \
             (the store saw {seen:?}), not the store's own {:?}",
            Err::<(), _>(Probe::closed())
        ));
    }
    probe.ready.store(true, Ordering::SeqCst);
    if !wrapped.is_ready() {
        lost.push("`is_ready` stays false through the wrapper after the store is ready".into());
    }

    // Another node's turn: the store says `false`, and so must the wrapper.
    probe.turn.store(false, Ordering::SeqCst);
    probe.take_calls();
    let turn = wrapped.take_turn("sweep", T0, T0 + ms(1000)).await;
    let seen = probe.take_calls();
    if turn != Ok(false) || seen != ["take_turn"] {
        lost.push(format!(
            "`take_turn` answered {turn:?} through the wrapper (the store saw {seen:?}) when \
             the store answers Ok(false): the port's default (always true) would run the \
             sweeps on every node"
        ));
    }
    probe.turn.store(true, Ordering::SeqCst);

    let mut once = std::collections::HashSet::new();
    lost.retain(|l| once.insert(l.clone()));
    if walk.decomposed {
        lost.push(
            "forward every method, provided ones included, to the same method of the wrapped \
             store: one left at the port's default runs as the calls its default is made of, \
             and the store's override (one write, one query, a turn decided in the database) \
             is lost"
                .into(),
        );
    }
    assert!(
        lost.is_empty(),
        "the store wrapper loses behaviour of the store it wraps:\n  - {}",
        lost.join("\n  - ")
    );
}

/// What [`methods_through`] found.
struct Walk {
    /// Every method called, in order (some more than once).
    methods: Vec<&'static str>,
    /// What went wrong, in words.
    lost: Vec<String>,
    /// Whether a call reached the store as other calls (or none).
    decomposed: bool,
}

/// Calls every async method of the port through `wrapped` (which wraps `probe`) and on a
/// second probe of its own, on identical data: each call must reach `probe` as itself, once,
/// and answer as the second probe does.
async fn methods_through(probe: &Probe, wrapped: &dyn Store) -> Walk {
    let direct = Probe::new();
    let mut walk = Walk {
        methods: Vec::new(),
        lost: Vec::new(),
        decomposed: false,
    };

    // The same call on the plain probe and through the wrapper; the plain probe's answer.
    macro_rules! same {
        ($method:literal, |$s:ident| $call:expr) => {{
            walk.methods.push($method);
            direct.take_calls();
            let expected = {
                let $s: &dyn Store = &direct;
                $call.await
            };
            assert_eq!(
                direct.take_calls(),
                [$method],
                "the probe records its calls"
            );
            probe.take_calls();
            let answer = {
                let $s: &dyn Store = wrapped;
                $call.await
            };
            let seen = probe.take_calls();
            if seen != [$method] {
                walk.lost.push(format!(
                    "`{}` through the wrapper reached the store as {seen:?}, not as itself once",
                    $method
                ));
                walk.decomposed = true;
            }
            if answer != expected {
                walk.lost.push(format!(
                    "`{}` answered {answer:?} through the wrapper, {expected:?} without it",
                    $method
                ));
            }
            expected
        }};
    }

    let m = sample_merchant(1, "Wrapped");
    let p = sample_project(1, m.id);
    let t = token(1, p.id, vec![Scope::PaymentsCreate, Scope::PaymentsRead]);
    let k = key(p.id, "ed25519-wrapped", 7);
    let pay = sample_payment(payment_id(1), p.id, "w1");
    let pay2 = sample_payment(payment_id(2), p.id, "w2");
    let pay3 = sample_payment(payment_id(3), p.id, "w3");

    // The directory, and the lookups made of it.
    let _ = same!("upsert_merchant", |s| s.upsert_merchant(&m));
    let _ = same!("find_merchants", |s| s.find_merchants(Some(m.id)));
    let _ = same!("find_merchants", |s| s.find_merchants(None));
    let _ = same!("upsert_project", |s| s.upsert_project(&p));
    let _ = same!("find_projects", |s| s.find_projects(Some(p.id)));
    let _ = same!("find_projects", |s| s.find_projects(None));
    let _ = same!("insert_token", |s| s.insert_token(&t));
    let _ = same!("find_tokens", |s| s.find_tokens(TokenKey::Hash(&t.hash)));
    let _ = same!("find_tokens", |s| s.find_tokens(TokenKey::Project(p.id)));
    let _ = same!("insert_key", |s| s.insert_key(&k));
    let _ = same!("find_keys", |s| s.find_keys(p.id, Some(&k.keyid)));
    let _ = same!("find_keys", |s| s.find_keys(p.id, None));
    let _ = same!("find_active_key_projects", |s| s
        .find_active_key_projects(&k.keyid));
    let _ = same!("auth_lookup", |s| s.auth_lookup(&t.hash, Some(&k.keyid)));

    // Payments and the create path.
    let _ = same!("insert_payment", |s| s.insert_payment(&pay));
    let _ = same!("payment", |s| s.payment(pay.id));
    let _ = same!("payment_by_merchant_id", |s| s
        .payment_by_merchant_id(p.id, &pay.merchant_payment_id));
    let _ = same!("auth_lookup_with_payment", |s| s.auth_lookup_with_payment(
        &t.hash,
        Some(&k.keyid),
        pay.id
    ));
    let nonce = NonceUse {
        project: p.id,
        nonce: "wrapped-1",
        now: T0,
        expires_at: T0 + ms(60_000),
    };
    let second = NonceUse {
        nonce: "wrapped-2",
        ..nonce
    };
    // Taken, stored, replayed.
    let _ = same!("admit_create", |s| s.admit_create(
        Some(nonce),
        p.id,
        &pay.merchant_payment_id,
        None,
        None
    ));
    let _ = same!("admit_create", |s| s.admit_create(
        Some(second),
        p.id,
        &pay2.merchant_payment_id,
        Some(&pay2),
        None
    ));
    let _ = same!("admit_create", |s| s.admit_create(
        Some(nonce),
        p.id,
        &pay3.merchant_payment_id,
        Some(&pay3),
        None
    ));
    let _ = same!("use_nonce", |s| s.use_nonce(
        p.id,
        "wrapped-3",
        T0,
        T0 + ms(10)
    ));
    let _ = same!("purge", |s| s.purge(Retained::Nonces, T0 + ms(20), 10));

    // A change with its event and audit record; the outbox.
    let canceled = changed(&pay, PaymentStatus::Canceled, T0 + ms(100));
    let change = PaymentChange {
        history: None,
        ledger: None,
        payment: canceled.clone(),
        expected_version: pay.version,
        event: Some(sample_event(&canceled, event_id(1), T0 + ms(100))),
        audit: Some(sample_audit(T0 + ms(100), "payment.cancel", "w1")),
    };
    let _ = same!("commit_change", |s| s.commit_change(&change));
    let _ = same!("due_payments", |s| s.due_payments(T0 + ms(3_600_000), 10));
    let _ = same!("backlog", |s| s.backlog());
    let claimed = same!("claim_due_events", |s| s.claim_due_events(
        T0 + ms(200),
        10,
        Duration::from_secs(30)
    ));
    let _ = same!("claim_due_events_except", |s| s.claim_due_events_except(
        T0 + ms(200),
        10,
        Duration::from_secs(30),
        &[project_id(2)]
    ));
    let lease = claimed
        .ok()
        .and_then(|c| c.first().map(|c| c.lease))
        .unwrap_or(LeaseToken::new(0));
    let failure = attempt(1, false, Some(503), Some("timeout"));
    let _ = same!("record_attempt", |s| s.record_attempt(
        event_id(1),
        lease,
        &failure,
        None
    ));
    let _ = same!("events_for_payment", |s| s.events_for_payment(pay.id));
    let _ = same!("failed_events", |s| s
        .failed_events(&FailedEventFilter::default(), 10));
    let _ = same!("find_payments", |s| s
        .find_payments(&PaymentQuery::new(p.id, 10)));
    let _ = same!("payment_totals", |s| s
        .payment_totals(&PaymentQuery::new(p.id, 10), 0));
    let _ = same!("find_events", |s| s.find_events(&EventQuery {
        payment: Some(pay.id),
        ..EventQuery::new(p.id, 10)
    }));
    let _ = same!("balance", |s| s.balance(p.id));
    let _ = same!("find_entries", |s| s.find_entries(&EntryQuery {
        oldest_first: true,
        ..EntryQuery::new(p.id, 10)
    }));
    let _ = same!("entry_totals", |s| s.entry_totals(p.id, T0, T0 + ms(1_000)));

    // The payer page's link, and a token's last use.
    let page_token = crate::payer::PageToken::generate(&crate::testing::SeededRandom::new(37));
    let page = PaymentPageRecord::new(pay.id, &page_token, T0 + ms(150));
    let _ = same!("insert_payment_page_if_none", |s| s
        .insert_payment_page_if_none(&page));
    let _ = same!("find_payment_page", |s| s
        .find_payment_page(PageKey::Payment(pay.id)));
    let _ = same!("find_payment_page", |s| s
        .find_payment_page(PageKey::TokenHash(&page_token.hash())));
    let _ = same!("update_token_use", |s| s
        .update_token_use(t.id, T0 + ms(160)));
    let _ = same!("token_last_used", |s| s.token_last_used(&[t.id]));
    let mut resend = sample_event(&canceled, event_id(2), T0 + ms(300));
    resend.event.kind = EventKind::ManualResend;
    resend.max_attempts = 1;
    let resend = PaymentChange {
        history: None,
        ledger: None,
        payment: canceled.clone(),
        expected_version: canceled.version,
        event: Some(resend),
        audit: Some(sample_audit(T0 + ms(300), "payment.resend_callback", "w1")),
    };
    let _ = same!("commit_resend", |s| s.commit_resend(&resend));
    // A transaction of the caller's own: a step that reads, and its answer typed back.
    let used = NonceUse {
        project: p.id,
        nonce: "wrapped-1",
        now: T0,
        expires_at: T0 + ms(60_000),
    };
    let _ = same!("transact", |s| crate::store::transact(s, move |tx| {
        Box::pin(async move { tx.nonce_live(used).await })
    }));
    let notification = NonceUse {
        project: p.id,
        nonce: "notification-1",
        now: T0 + ms(400),
        expires_at: T0 + ms(60_000),
    };
    let completed = changed(&pay2, PaymentStatus::Completed, T0 + ms(400));
    let once = PaymentChange {
        history: None,
        ledger: None,
        payment: completed,
        expected_version: pay2.version,
        event: None,
        audit: None,
    };
    // Applied, then already applied.
    let _ = same!("commit_change_once", |s| s
        .commit_change_once(notification, Some(&once)));
    let _ = same!("commit_change_once", |s| s
        .commit_change_once(notification, Some(&once)));
    let _ = same!("purge", |s| s.purge(
        Retained::FinishedEvents,
        T0 + ms(3_600_000),
        1
    ));

    // Secrets, operator tokens, settings, the audit trail, turns, revocations.
    let (s1, s2, s3) = (secret(1, false), secret(2, true), secret(3, false));
    let _ = same!("insert_callback_secret", |s| s
        .insert_callback_secret(p.id, &s1));
    let _ = same!("insert_callback_secret_if_none", |s| s
        .insert_callback_secret_if_none(p.id, &s2));
    let _ = same!("replace_callback_secret", |s| s
        .replace_callback_secret(p.id, &s1.secret, &s3.secret));
    let _ = same!("callback_secrets", |s| s.callback_secrets(p.id));
    let operator = OperatorTokenRecord {
        id: token_id(9),
        name: "alice".to_string(),
        hash: [9; 32],
        prefix: "op_wrapd".to_string(),
        created_at: T0,
        expires_at: None,
    };
    let _ = same!("insert_operator_token", |s| s
        .insert_operator_token(&operator));
    let _ = same!("find_operator_tokens", |s| s
        .find_operator_tokens(Some(&operator.hash)));
    let _ = same!("expire_operator_token", |s| s
        .expire_operator_token(operator.id, T0 + ms(500)));
    let _ = same!("find_operator_tokens", |s| s.find_operator_tokens(None));
    let _ = same!("upsert_setting", |s| s
        .upsert_setting("wrapper.check", "on"));
    let _ = same!("setting", |s| s.setting("wrapper.check"));
    let _ = same!("check_writable", |s| s.check_writable());
    let _ = same!("insert_audit", |s| s.insert_audit(&sample_audit(
        T0 + ms(600),
        "key.revoke",
        "w1"
    )));
    let _ = same!("find_audit_records", |s| s.find_audit_records(10));
    let _ = same!("purge", |s| s.purge(Retained::Audit, T0 + ms(200), 1));
    let _ = same!("take_turn", |s| s.take_turn("sweep", T0, T0 + ms(1000)));
    let _ = same!("revoke_key", |s| s.revoke_key(p.id, &k.keyid, T0 + ms(700)));
    let _ = same!("revoke_token", |s| s.revoke_token(p.id, t.id, T0 + ms(700)));
    let _ = same!("auth_lookup", |s| s.auth_lookup(&t.hash, Some(&k.keyid)));
    let _ = same!("find_active_key_projects", |s| s
        .find_active_key_projects(&k.keyid));
    let logged = sample_request(p.id, T0 + ms(800), 401);
    let _ = same!("insert_requests", |s| s
        .insert_requests(std::slice::from_ref(&logged), 10));
    let _ = same!("find_requests", |s| s
        .find_requests(&RequestLogQuery::new(p.id, 10)));
    let _ = same!("purge_requests", |s| s.purge_requests(T0 + ms(900), 10));
    let receipt = sample_receipt(crate::receipt::ReceiptKind::Png, 1, 10);
    let appeal = sample_appeal(
        1,
        p.id,
        pay.id,
        T0 + ms(1_000),
        std::slice::from_ref(&receipt),
    );
    let _ = same!("insert_appeal", |s| s
        .insert_appeal(&appeal, std::slice::from_ref(&receipt)));
    let _ = same!("appeal", |s| s.appeal(appeal.id));
    let _ = same!("appeal_receipt", |s| s.appeal_receipt(appeal.id, 0));
    let _ = same!("find_appeals", |s| s.find_appeals(&AppealQuery::newest(10)));
    let mut rejected = appeal.clone();
    rejected.state = crate::appeal::AppealState::Rejected;
    rejected.version += 1;
    let decision = AppealChange {
        appeal: rejected,
        expected_version: appeal.version,
        payments: Vec::new(),
        audit: Some(sample_audit(T0 + ms(1_001), "appeal.reject", "w1")),
    };
    let _ = same!("commit_appeal", |s| s.commit_appeal(&decision));

    walk
}

/// The store [`check_wrapper`] wraps: the [`MemoryStore`], recording the name of every port
/// method called on it (the memory store's own defaults run inside, unrecorded). Readiness and
/// the answer of `take_turn` are switches; a closed probe's `check_writable` fails.
struct Probe {
    memory: Arc<MemoryStore>,
    calls: Mutex<Vec<&'static str>>,
    ready: AtomicBool,
    turn: AtomicBool,
}

impl Probe {
    fn new() -> Probe {
        Probe {
            memory: Arc::new(MemoryStore::new()),
            calls: Mutex::new(Vec::new()),
            ready: AtomicBool::new(true),
            turn: AtomicBool::new(true),
        }
    }

    /// The error of `check_writable` while not ready.
    fn closed() -> StoreError {
        UnavailableCause::Closed.error("the probe store is closed")
    }

    fn saw(&self, method: &'static str) {
        self.calls
            .lock()
            .expect("the probe's lock is never held across a panic")
            .push(method);
    }

    /// The methods called since the last time, in order.
    fn take_calls(&self) -> Vec<&'static str> {
        std::mem::take(
            &mut *self
                .calls
                .lock()
                .expect("the probe's lock is never held across a panic"),
        )
    }
}

/// What the probe answers to a call, after recording it: the memory store's answer, except
/// where a switch of the probe decides.
macro_rules! probe_answer {
    ($probe:ident, check_writable()) => {{
        if !$probe.is_ready() {
            return Err(Probe::closed());
        }
        $probe.memory.check_writable().await
    }};
    ($probe:ident, take_turn($($arg:ident),*)) => {{
        if !$probe.turn.load(Ordering::SeqCst) {
            return Ok(false);
        }
        $probe.memory.take_turn($($arg),*).await
    }};
    ($probe:ident, $name:ident($($arg:ident),*)) => {
        $probe.memory.$name($($arg),*).await
    };
}

/// The body of a `@sync` method of [`Probe`]: `is_ready` follows the switch, any other
/// keeps the port's default.
macro_rules! probe_sync {
    (is_ready $s:ident $body:block) => {
        $s.ready.load(Ordering::SeqCst)
    };
    ($other:ident $s:ident $body:block) => {
        $body
    };
}

/// Implements a trait of the port for [`Probe`] from its listing (`store/port.rs`): every
/// `async` method records its name and answers as [`probe_answer!`] says; `is_ready` follows
/// the switch.
macro_rules! probe_port {
    (
        {}
        $(#[$tattr:meta])*
        pub trait $trait:ident : $sup:ident $(+ $more:ident)* {
            $(
                $(#[$mattr:meta])*
                $kind:ident fn $name:ident (
                    &$s:ident $(, $arg:ident : $aty:ty)* $(,)?
                ) -> Result<$ok:ty, StoreError> $end:tt
            )*
            $(@sync {
                $(
                    $(#[$sattr:meta])*
                    fn $sname:ident (&$ss:ident) -> $sret:ty $sbody:block
                )*
            })?
        }
    ) => {
        #[async_trait]
        impl $trait for Probe {
            $($(
                fn $sname(&$ss) -> $sret {
                    probe_sync!($sname $ss $sbody)
                }
            )*)?
            $(
                async fn $name(&self $(, $arg: $aty)*) -> Result<$ok, StoreError> {
                    self.saw(stringify!($name));
                    probe_answer!(self, $name($($arg),*))
                }
            )*
        }
    };
}

crate::__storage_port!(all probe_port! {});

/// Collects the name of every `async` method of a trait of the port into `$names`, and of
/// every provided one (a default body) into `$provided`.
#[cfg(test)]
macro_rules! method_names {
    (
        {$names:ident $provided:ident}
        $(#[$tattr:meta])*
        pub trait $trait:ident : $sup:ident $(+ $more:ident)* {
            $(
                $(#[$mattr:meta])*
                $kind:ident fn $name:ident (
                    &$s:ident $(, $arg:ident : $aty:ty)* $(,)?
                ) -> Result<$ok:ty, StoreError> $end:tt
            )*
            $(@sync $sync:tt)?
        }
    ) => {
        $(
            $names.insert(stringify!($name));
            method_names!(@provided $provided $name $end);
        )*
    };
    (@provided $provided:ident $name:ident ;) => {};
    (@provided $provided:ident $name:ident { $($default:tt)* }) => {
        $provided.insert(stringify!($name));
    };
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeSet;

    use futures_util::future::BoxFuture;

    use super::*;
    use crate::store::{Layered, Op, OpKind, StoreLayer};

    /// A layer that adds nothing.
    struct Plain(Arc<dyn Store>);

    impl StoreLayer for Plain {
        fn inner(&self) -> &Arc<dyn Store> {
            &self.0
        }
    }

    /// A layer that records every operation its hook sees.
    struct Recording {
        inner: Arc<dyn Store>,
        ops: Mutex<Vec<Op>>,
    }

    impl StoreLayer for Recording {
        fn inner(&self) -> &Arc<dyn Store> {
            &self.inner
        }

        fn around<'a, T: Send + 'a>(
            &'a self,
            op: Op,
            call: BoxFuture<'a, Result<T, StoreError>>,
        ) -> BoxFuture<'a, Result<T, StoreError>> {
            self.ops.lock().expect("not poisoned").push(op);
            call
        }
    }

    /// The panic message of `check_wrapper` over `wrap`, or `None` if it passed.
    fn failure(wrap: impl FnOnce(Arc<dyn Store>) -> Arc<dyn Store>) -> Option<String> {
        let outcome = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
            futures_executor::block_on(check_wrapper(wrap))
        }));
        let payload = outcome.err()?;
        Some(
            payload
                .downcast_ref::<String>()
                .cloned()
                .or_else(|| payload.downcast_ref::<&str>().map(|s| s.to_string()))
                .unwrap_or_default(),
        )
    }

    #[test]
    fn a_wrapper_that_forwards_only_the_required_methods_fails_the_check() {
        let message = failure(|inner| Arc::new(Naive(inner)))
            .expect("a wrapper that leaves the provided methods at their defaults fails");
        println!("{message}");
        for lost in [
            "`admit_create` through the wrapper reached the store as [\"transact\"]",
            "`commit_resend` through the wrapper reached the store as [\"transact\"]",
            "`commit_change_once` through the wrapper reached the store as [\"transact\"]",
            "`auth_lookup` through the wrapper reached the store as [\"find_tokens\", \"find_projects\", \"find_merchants\", \"find_keys\"]",
            "`auth_lookup_with_payment` through",
            "`find_active_key_projects` through",
            "`check_writable` through the wrapper reached the store as [\"upsert_setting\"]",
            "`take_turn` through the wrapper reached the store as []",
            "`check_writable` of a closed store answered Ok(())",
            "`is_ready` stays true",
            "`take_turn` answered Ok(true)",
        ] {
            assert!(message.contains(lost), "the message names {lost:?}:\n{message}");
        }
        for kept in ["`transact`", "`payment`"] {
            assert!(
                !message.contains(kept),
                "{kept} is forwarded by the naive wrapper:\n{message}"
            );
        }
    }

    #[test]
    fn a_layered_store_passes_the_wrapper_check() {
        assert_eq!(failure(|inner| Arc::new(Layered::new(Plain(inner)))), None);
    }

    #[test]
    fn a_layered_store_meets_the_whole_contract() {
        futures_executor::block_on(run_all(|| {
            Layered::new(Plain(Arc::new(MemoryStore::new())))
        }));
    }

    /// Each call goes through the hook once, named after its method, with the kind the
    /// server's metrics have always used.
    #[test]
    fn a_layer_sees_every_call_once_with_its_name_and_kind() {
        let probe = Probe::new();
        let probe = Arc::new(probe);
        let layered = Layered::new(Recording {
            inner: probe.clone(),
            ops: Mutex::new(Vec::new()),
        });
        let walk = futures_executor::block_on(methods_through(&probe, &layered));
        assert!(walk.lost.is_empty(), "{:?}", walk.lost);
        let ops = layered.into_layer().ops.into_inner().expect("not poisoned");
        assert_eq!(
            ops.iter().map(|op| op.name).collect::<Vec<_>>(),
            walk.methods
        );
        let writes: BTreeSet<&str> = ops
            .iter()
            .filter(|op| op.kind == OpKind::Write)
            .map(|op| op.name)
            .collect();
        let expected: BTreeSet<&str> = [
            "insert_payment",
            "insert_payment_page_if_none",
            "update_token_use",
            "commit_change",
            "use_nonce",
            "purge",
            "claim_due_events",
            "claim_due_events_except",
            "record_attempt",
            "upsert_merchant",
            "upsert_project",
            "insert_token",
            "revoke_token",
            "insert_key",
            "revoke_key",
            "insert_callback_secret",
            "insert_callback_secret_if_none",
            "replace_callback_secret",
            "insert_operator_token",
            "expire_operator_token",
            "upsert_setting",
            "insert_audit",
            "check_writable",
            "commit_resend",
            "transact",
            "take_turn",
            "commit_change_once",
            "admit_create",
            "insert_requests",
            "purge_requests",
            "insert_appeal",
            "commit_appeal",
        ]
        .into_iter()
        .collect();
        assert_eq!(writes, expected, "the writes; every other call reads");
    }

    /// `Layered`, the probe and `Naive` are made from the port's listing, so they have every
    /// method of it. The walk of `check_wrapper` is written by hand (it needs data that each
    /// call can use); it must call every provided method, whose loss in a hand-written wrapper
    /// compiles and runs silently (a required one a wrapper cannot leave out), and only
    /// methods of the port.
    #[test]
    fn every_provided_method_of_the_port_is_walked_by_check_wrapper() {
        let (mut port, mut provided) = (BTreeSet::new(), BTreeSet::new());
        crate::__storage_port!(all method_names! {port provided});
        assert!(
            port.len() > 40
                && provided.contains("admit_create")
                && provided.contains("auth_lookup")
                && !provided.contains("transact"),
            "the port's methods come from its listing: {provided:?} of {port:?}"
        );
        let probe = Arc::new(Probe::new());
        let layered = Layered::new(Plain(probe.clone()));
        let walk = futures_executor::block_on(methods_through(&probe, &layered));
        let walked: BTreeSet<&str> = walk.methods.iter().copied().collect();
        let missing: Vec<_> = provided.difference(&walked).collect();
        let extra: Vec<_> = walked.difference(&port).collect();
        assert!(
            missing.is_empty() && extra.is_empty(),
            "check_wrapper walks every provided method of the port, but not {missing:?}; and \
             {extra:?} are not methods of the port"
        );
    }

    /// A wrapper as one writes it by hand: every required method forwarded, the provided
    /// ones left at their defaults.
    struct Naive(Arc<dyn Store>);

    /// Implements a trait of the port for [`Naive`] from its listing: the required methods
    /// forwarded, the provided ones (and `@sync` ones) left at the port's defaults. It walks
    /// the listing one method at a time, gathering the forwarded ones, then writes the impl.
    macro_rules! naive_port {
        ({} $(#[$tattr:meta])* pub trait $trait:ident : $sup:ident $(+ $more:ident)* {
            $($body:tt)*
        }) => {
            naive_port!(@walk $trait [] $($body)*);
        };
        (@walk $trait:ident [$($done:tt)*]
            $(#[$mattr:meta])*
            $kind:ident fn $name:ident (&$s:ident $(, $arg:ident : $aty:ty)* $(,)?)
                -> Result<$ok:ty, StoreError>;
            $($rest:tt)*
        ) => {
            naive_port!(@walk $trait [
                $($done)*
                async fn $name(&self $(, $arg: $aty)*) -> Result<$ok, StoreError> {
                    self.0.$name($($arg),*).await
                }
            ] $($rest)*);
        };
        (@walk $trait:ident [$($done:tt)*]
            $(#[$mattr:meta])*
            $kind:ident fn $name:ident (&$s:ident $(, $arg:ident : $aty:ty)* $(,)?)
                -> Result<$ok:ty, StoreError> $default:block
            $($rest:tt)*
        ) => {
            naive_port!(@walk $trait [$($done)*] $($rest)*);
        };
        (@walk $trait:ident [$($done:tt)*] @sync $sync:tt) => {
            naive_port!(@walk $trait [$($done)*]);
        };
        (@walk $trait:ident [$($done:tt)*]) => {
            #[async_trait]
            impl $trait for Naive {
                $($done)*
            }
        };
    }

    crate::__storage_port!(all naive_port! {});
}
