//! `Directory::provision` on a production service: credentials once, all or nothing
//! under a store that fails any one write, idempotent afterwards.

use payments_directory::DirectoryAccess;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use futures_channel::oneshot;
use futures_executor::block_on;
use futures_util::future::BoxFuture;
use payments_core::auth::keys::{
    generate_signing_key, keyid, parse_signing_key_pem, public_key_to_pem,
};
use payments_core::auth::Environment;
use payments_core::service::{Actor, AuthConfig, PaymentService, Ports, ServiceConfig};
use payments_core::store::{
    AuditStore, CredentialStoreExt, Layered, MerchantStoreExt, Op, OpKind, Store, StoreError,
    StoreLayer, UnavailableCause,
};
use payments_core::testing::{ManualClock, MemoryStore, SeededRandom};
use payments_core::SecretString;
use payments_directory::{Provision, ProvisionError, Provisioned};

use crate::common::{ts, TestProvider, TestRates, T_CREATED};

/// Fails the write numbered `fail_at` (from 0) with an I/O error, without making it; counts
/// every write.
struct FailingWrite {
    inner: Arc<dyn Store>,
    writes: AtomicUsize,
    fail_at: Option<usize>,
}

impl StoreLayer for FailingWrite {
    fn inner(&self) -> &Arc<dyn Store> {
        &self.inner
    }

    fn around<'a, T: Send + 'a>(
        &'a self,
        op: Op,
        call: BoxFuture<'a, Result<T, StoreError>>,
    ) -> BoxFuture<'a, Result<T, StoreError>> {
        if op.kind == OpKind::Write {
            let n = self.writes.fetch_add(1, Ordering::SeqCst);
            if Some(n) == self.fail_at {
                return Box::pin(async move {
                    Err(StoreError::Unavailable {
                        cause: UnavailableCause::Io,
                        detail: format!("write {n} ({}) failed on purpose", op.name),
                    })
                });
            }
        }
        call
    }
}

/// A production service over `store` at `seconds` after [`T_CREATED`], every write going
/// through a [`FailingWrite`]; the layer is returned too, for its count.
fn service_at(
    store: &Arc<MemoryStore>,
    fail_at: Option<usize>,
    seed: u64,
    seconds: u64,
) -> (PaymentService, Arc<Layered<FailingWrite>>) {
    let inner: Arc<dyn Store> = store.clone();
    let layered = Arc::new(Layered::new(FailingWrite {
        inner,
        writes: AtomicUsize::new(0),
        fail_at,
    }));
    let clock = ManualClock::new(ts(T_CREATED));
    clock.advance(Duration::from_secs(seconds));
    let service = PaymentService::new(
        Ports::new(
            layered.clone(),
            Arc::new(TestProvider::default()),
            Arc::new(TestRates::with(
                payments_core::payment::Currency::RUB,
                "100",
            )),
            Arc::new(clock),
            Arc::new(SeededRandom::new(seed)),
        ),
        ServiceConfig::default(),
        AuthConfig::for_environment(Environment::Production),
    );
    (service, layered)
}

/// [`service_at`] at [`T_CREATED`].
fn service(store: &Arc<MemoryStore>, fail_at: Option<usize>, seed: u64) -> PaymentService {
    service_at(store, fail_at, seed, 0).0
}

/// How many audit records the store holds.
async fn audit_len(store: &MemoryStore) -> usize {
    store.find_audit_records(10_000).await.unwrap().len()
}

fn actor() -> Actor {
    Actor("embedding".to_string())
}

fn request() -> Provision {
    Provision::new("Shop", "Main").with_operator_token("shop-ops")
}

/// What a finished provisioning left: one merchant, one project, exactly the returned token
/// and key active, the returned callback secret among the project's.
fn assert_finished(store: &Arc<MemoryStore>, done: &Provisioned) {
    let creds = done.credentials.as_ref().expect("credentials");
    block_on(async {
        assert_eq!(store.merchants().await.unwrap().len(), 1);
        assert_eq!(store.projects().await.unwrap().len(), 1);
        let active: Vec<_> = store
            .tokens(done.project.id)
            .await
            .unwrap()
            .into_iter()
            .filter(|t| t.revoked_at.is_none())
            .collect();
        assert_eq!(active.len(), 1, "one active token");
        assert!(
            creds.token.expose().starts_with("nl_live_"),
            "a production token"
        );
        assert!(creds.token.expose().starts_with(&active[0].prefix));
        let keys: Vec<_> = store
            .keys(done.project.id)
            .await
            .unwrap()
            .into_iter()
            .filter(|k| k.revoked_at.is_none())
            .collect();
        assert_eq!(keys.len(), 1, "one active key");
        assert_eq!(keys[0].keyid, creds.keyid);
        if let Some(pem) = &creds.private_key_pem {
            let key = parse_signing_key_pem(pem.expose()).expect("a private key");
            assert_eq!(keyid(&key.verifying_key()), creds.keyid);
        }
    });
}

#[test]
fn provisioning_answers_credentials_once_then_changes_nothing() {
    let store = Arc::new(MemoryStore::new());
    let svc = service(&store, None, 1);
    let done = block_on(svc.directory().provision(&request(), &actor())).expect("provisioned");
    assert_finished(&store, &done);
    let creds = done.credentials.as_ref().unwrap();
    assert!(creds.operator_token.is_some());
    let secrets = block_on(svc.callbacks().signing_secrets(done.project.id)).unwrap();
    assert_eq!(
        secrets.current().secret.expose(),
        creds.callback_secret.expose().as_str(),
        "the returned callback secret signs the project's callbacks"
    );
    let op = creds.operator_token.as_ref().unwrap().expose().clone();
    let who = block_on(
        svc.directory()
            .check_operator_token(Some(&format!("Bearer {op}"))),
    )
    .expect("valid");
    assert_eq!(who.0, "operator:shop-ops");

    let trail = block_on(audit_len(&store));
    let again = block_on(svc.directory().provision(&request(), &actor())).expect("idempotent");
    assert!(again.credentials.is_none(), "credentials are answered once");
    assert_eq!(
        (again.merchant.id, again.project.id),
        (done.merchant.id, done.project.id)
    );
    assert_eq!(
        block_on(audit_len(&store)),
        trail,
        "a second call writes nothing"
    );
    assert_finished(&store, &done);
}

#[test]
fn a_call_that_fails_at_any_write_is_finished_by_the_next() {
    let writes = {
        let store = Arc::new(MemoryStore::new());
        let (svc, layer) = service_at(&store, None, 1, 0);
        block_on(svc.directory().provision(&request(), &actor())).expect("provisioned");
        layer.layer().writes.load(Ordering::SeqCst)
    };
    assert!(writes > 10, "a provisioning is many writes ({writes})");
    for fail_at in 0..writes {
        let store = Arc::new(MemoryStore::new());
        let failing = service(&store, Some(fail_at), 7);
        let err = block_on(failing.directory().provision(&request(), &actor())).unwrap_err();
        assert!(
            matches!(err, ProvisionError::Failed(_) | ProvisionError::Busy(_)),
            "write {fail_at}: {err}"
        );
        // The turn of the stopped call runs out before the next call may take it.
        let later = service_at(&store, None, 8, 61).0;
        let done = block_on(later.directory().provision(&request(), &actor()))
            .unwrap_or_else(|e| panic!("after a failure at write {fail_at}: {e}"));
        assert_finished(&store, &done);
        let again =
            block_on(later.directory().provision(&request(), &actor())).expect("idempotent");
        assert!(again.credentials.is_none(), "write {fail_at}");
    }
}

#[test]
fn a_registered_key_is_kept_across_a_stopped_call() {
    let key = generate_signing_key(&SeededRandom::new(3));
    let pem = public_key_to_pem(&key.verifying_key());
    let request = Provision::new("Shop", "Main").with_public_key(&pem);
    let store = Arc::new(MemoryStore::new());
    // Stop after the key's registration (merchant, audit, marker, project, audit, key, ...).
    let failing = service(&store, Some(7), 5);
    assert!(block_on(failing.directory().provision(&request, &actor())).is_err());
    let later = service_at(&store, None, 6, 61).0;
    let done = block_on(later.directory().provision(&request, &actor())).expect("finished");
    let creds = done.credentials.as_ref().unwrap();
    assert!(creds.private_key_pem.is_none());
    assert_eq!(creds.keyid, keyid(&key.verifying_key()));
    assert_finished(&store, &done);
}

#[test]
fn refusals_write_nothing() {
    let store = Arc::new(MemoryStore::new());
    let svc = service(&store, None, 1);
    let bad_key = Provision::new("Shop", "Main").with_public_key("not a key");
    let bad_name = Provision::new(" ", "Main");
    let no_scopes = Provision::new("Shop", "Main").with_scopes(Vec::new());
    let bad_token_name = Provision::new("Shop", "Main").with_operator_token("no spaces allowed");
    for r in [bad_key, bad_name, no_scopes, bad_token_name] {
        let e = block_on(svc.directory().provision(&r, &actor())).unwrap_err();
        assert!(matches!(e, ProvisionError::Invalid(_)), "{e}");
    }
    assert_eq!(block_on(audit_len(&store)), 0);
    assert!(block_on(store.merchants()).unwrap().is_empty());
}

#[test]
fn names_that_are_not_one_provisioning_are_refused() {
    let store = Arc::new(MemoryStore::new());
    let svc = service(&store, None, 1);
    let m = block_on(svc.directory().create_merchant("Shop", None, &actor())).unwrap();
    block_on(
        svc.directory()
            .create_project(m.id, "Main", Default::default(), &actor()),
    )
    .unwrap();
    let e = block_on(svc.directory().provision(&request(), &actor())).unwrap_err();
    assert!(matches!(e, ProvisionError::Ambiguous(_)), "{e}");
    block_on(svc.directory().create_merchant("Twice", None, &actor())).unwrap();
    block_on(svc.directory().create_merchant("Twice", None, &actor())).unwrap();
    let e = block_on(
        svc.directory()
            .provision(&Provision::new("Twice", "Main"), &actor()),
    )
    .unwrap_err();
    assert!(matches!(e, ProvisionError::Ambiguous(_)), "{e}");
}

/// Holds the first `upsert_merchant` until `gate` opens.
struct Gated {
    inner: Arc<dyn Store>,
    gate: Mutex<Option<oneshot::Receiver<()>>>,
}

impl StoreLayer for Gated {
    fn inner(&self) -> &Arc<dyn Store> {
        &self.inner
    }

    fn around<'a, T: Send + 'a>(
        &'a self,
        op: Op,
        call: BoxFuture<'a, Result<T, StoreError>>,
    ) -> BoxFuture<'a, Result<T, StoreError>> {
        let gate = (op.name == "upsert_merchant")
            .then(|| self.gate.lock().unwrap().take())
            .flatten();
        Box::pin(async move {
            if let Some(gate) = gate {
                gate.await.expect("the gate opens");
            }
            call.await
        })
    }
}

#[test]
fn a_second_call_while_one_is_under_way_is_busy() {
    let store = Arc::new(MemoryStore::new());
    let (open, gate) = oneshot::channel();
    let gated: Arc<dyn Store> = Arc::new(Layered::new(Gated {
        inner: store.clone(),
        gate: Mutex::new(Some(gate)),
    }));
    let svc = PaymentService::new(
        Ports::new(
            gated,
            Arc::new(TestProvider::default()),
            Arc::new(TestRates::with(
                payments_core::payment::Currency::RUB,
                "100",
            )),
            Arc::new(ManualClock::new(ts(T_CREATED))),
            Arc::new(SeededRandom::new(1)),
        ),
        ServiceConfig::default(),
        AuthConfig::for_environment(Environment::Production),
    );
    let (request, actor) = (request(), actor());
    let first = svc.directory().provision(&request, &actor);
    let second = async {
        // The first call waits at its merchant's write: this one finds it under way.
        let answer = svc.clone().directory().provision(&request, &actor).await;
        open.send(()).expect("the first call waits");
        answer
    };
    let (first, second) = block_on(futures_util::future::join(first, second));
    let e = second.unwrap_err();
    assert!(matches!(e, ProvisionError::Busy(_)), "{e}");
    assert!(first.expect("the first finishes").credentials.is_some());
    assert_eq!(block_on(store.merchants()).unwrap().len(), 1);
}

#[test]
fn the_secret_type_hides_the_credentials_in_debug_output() {
    let store = Arc::new(MemoryStore::new());
    let done = block_on(
        service(&store, None, 1)
            .directory()
            .provision(&request(), &actor()),
    )
    .unwrap();
    let shown = format!("{done:?}");
    let token: &SecretString = &done.credentials.as_ref().unwrap().token;
    assert!(!shown.contains(token.expose().as_str()), "{shown}");
}

#[test]
fn provisioning_records_the_environment_and_refuses_the_other_ones_store() {
    let store = Arc::new(MemoryStore::new());
    let svc = service(&store, None, 1);
    block_on(svc.directory().provision(&request(), &actor())).expect("provisioned");
    assert_eq!(
        block_on(svc.recorded_environment()).unwrap(),
        Some(Environment::Production)
    );
    let sandbox = PaymentService::new(
        Ports::new(
            store.clone(),
            Arc::new(TestProvider::default()),
            Arc::new(TestRates::with(
                payments_core::payment::Currency::RUB,
                "100",
            )),
            Arc::new(ManualClock::new(ts(T_CREATED))),
            Arc::new(SeededRandom::new(2)),
        ),
        ServiceConfig::default(),
        Environment::Sandbox.into(),
    );
    let e = block_on(
        sandbox
            .directory()
            .provision(&Provision::new("Other", "Main"), &actor()),
    )
    .unwrap_err();
    assert!(matches!(e, ProvisionError::Invalid(_)), "{e}");
    assert_eq!(block_on(store.merchants()).unwrap().len(), 1);
}
