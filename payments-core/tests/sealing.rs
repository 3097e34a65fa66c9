//! Callback secrets sealed at rest through the service: what the store holds is sealed under
//! the current key, signing opens it, a key rotation re-seals without changing the secrets,
//! and a plaintext secret from before sealing still signs until it is re-sealed.

use payments_directory::DirectoryAccess;
use std::sync::Arc;

use async_trait::async_trait;
use futures_executor::block_on;
use payments_core::auth::Environment;
use payments_core::payment::Currency;
use payments_core::provider::{ProviderOutcome, RateSource, RequisiteProvider, RequisiteRequest};
use payments_core::sealing::{SealingKey, SealingKeys};
use payments_core::service::{Actor, AuthConfig, PaymentService, Ports, ServiceConfig};
use payments_core::store::CallbackSecretStore;
use payments_core::testing::{ManualClock, MemoryStore, SeededRandom};
use payments_core::{ErrorCode, ProjectId, Timestamp};
use payments_directory::ProjectPatch;
use rust_decimal::Decimal;

/// Never asked: these tests make no payment.
struct NoProvider;

#[async_trait]
impl RequisiteProvider for NoProvider {
    async fn issue(&self, _: &RequisiteRequest) -> ProviderOutcome {
        ProviderOutcome::NotRoutable("no provider in this test".into())
    }
}

struct NoRates;

#[async_trait]
impl RateSource for NoRates {
    async fn course(&self, _: Currency) -> Option<Decimal> {
        None
    }
}

const NOW: i64 = 1_790_856_000;

fn service(store: &Arc<MemoryStore>, sealing: SealingKeys) -> PaymentService {
    PaymentService::new(
        Ports::new(
            store.clone(),
            Arc::new(NoProvider),
            Arc::new(NoRates),
            Arc::new(ManualClock::new(Timestamp::from_unix_secs(NOW))),
            Arc::new(SeededRandom::new(7)),
        ),
        ServiceConfig {
            sealing,
            ..ServiceConfig::default()
        },
        AuthConfig::for_environment(Environment::Sandbox),
    )
}

fn key(n: u8) -> SealingKey {
    SealingKey::from_bytes([n; 32])
}

fn actor() -> Actor {
    Actor("test".into())
}

async fn project(service: &PaymentService) -> ProjectId {
    let merchant = service
        .directory()
        .create_merchant("Shop", None, &actor())
        .await
        .unwrap();
    service
        .directory()
        .create_project(merchant.id, "Site", ProjectPatch::default(), &actor())
        .await
        .unwrap()
        .id
}

/// The secret that signs now.
async fn signing(service: &PaymentService, project: ProjectId) -> Result<String, ErrorCode> {
    let ring = service
        .callbacks()
        .signing_secrets(project)
        .await
        .map_err(|e| e.code())?;
    Ok(ring.current().secret.expose().to_string())
}

async fn stored(store: &MemoryStore, project: ProjectId) -> Vec<String> {
    store
        .callback_secrets(project)
        .await
        .unwrap()
        .into_iter()
        .map(|r| r.secret.expose().clone())
        .collect()
}

#[test]
fn the_store_holds_sealed_secrets_and_a_rotation_reseals_them() {
    block_on(async {
        let store = Arc::new(MemoryStore::new());
        let (a, b) = (key(1), key(2));
        let with_a = service(&store, SealingKeys::new(a.clone(), Vec::new()));
        let pid = project(&with_a).await;
        let secret = with_a
            .directory()
            .rotate_callback_secret(pid, &actor())
            .await
            .unwrap()
            .into_exposed();
        assert!(secret.starts_with("whsec_"));
        let raw = stored(&store, pid).await;
        assert_eq!(raw.len(), 1);
        assert!(raw[0].starts_with(&format!("v1.{}.", a.id())), "{raw:?}");
        assert!(!raw[0].contains(&secret[6..]), "{raw:?}");
        assert_eq!(signing(&with_a, pid).await.unwrap(), secret);

        // Without the key the stored value reveals nothing and signs nothing.
        let keyless = service(&store, SealingKeys::none());
        assert_eq!(signing(&keyless, pid).await, Err(ErrorCode::Internal));
        let other = service(&store, SealingKeys::new(b.clone(), Vec::new()));
        assert_eq!(signing(&other, pid).await, Err(ErrorCode::Internal));

        // Rotation: b current, a previous: still signs; the re-seal moves every secret to b.
        let rotating = service(&store, SealingKeys::new(b.clone(), vec![a.clone()]));
        assert_eq!(signing(&rotating, pid).await.unwrap(), secret);
        let report = rotating
            .directory()
            .reseal_callback_secrets(&actor())
            .await
            .unwrap();
        assert_eq!(
            (report.key_id.as_str(), report.resealed, report.current),
            (b.id(), 1, 0)
        );
        let raw = stored(&store, pid).await;
        assert!(raw[0].starts_with(&format!("v1.{}.", b.id())), "{raw:?}");
        let again = rotating
            .directory()
            .reseal_callback_secrets(&actor())
            .await
            .unwrap();
        assert_eq!((again.resealed, again.current), (0, 1));

        // a dropped: b alone signs with the same secret.
        let with_b = service(&store, SealingKeys::new(b, Vec::new()));
        assert_eq!(signing(&with_b, pid).await.unwrap(), secret);
        assert_eq!(
            signing(&service(&store, SealingKeys::new(a, Vec::new())), pid).await,
            Err(ErrorCode::Internal)
        );
    });
}

#[test]
fn a_plaintext_secret_from_before_sealing_signs_until_resealed() {
    block_on(async {
        let store = Arc::new(MemoryStore::new());
        let old = service(&store, SealingKeys::none());
        let pid = project(&old).await;
        let secret = old
            .directory()
            .rotate_callback_secret(pid, &actor())
            .await
            .unwrap()
            .into_exposed();
        assert_eq!(stored(&store, pid).await, vec![secret.clone()]);

        let a = key(1);
        let sealed = service(&store, SealingKeys::new(a.clone(), Vec::new()));
        assert_eq!(signing(&sealed, pid).await.unwrap(), secret);
        let report = sealed
            .directory()
            .reseal_callback_secrets(&actor())
            .await
            .unwrap();
        assert_eq!((report.resealed, report.current), (1, 0));
        let raw = stored(&store, pid).await;
        assert!(raw[0].starts_with(&format!("v1.{}.", a.id())), "{raw:?}");
        assert_eq!(signing(&sealed, pid).await.unwrap(), secret);

        // The next rotation seals the new secret and keeps the (re-sealed) previous one.
        let next = sealed
            .directory()
            .rotate_callback_secret(pid, &actor())
            .await
            .unwrap()
            .into_exposed();
        let raw = stored(&store, pid).await;
        assert_eq!(raw.len(), 2);
        assert!(raw.iter().all(|r| r.starts_with("v1.")), "{raw:?}");
        let ring = sealed.callbacks().signing_secrets(pid).await.unwrap();
        assert_eq!(ring.current().secret.expose(), next);
        assert_eq!(ring.previous().unwrap().secret.expose(), secret);
    });
}

#[test]
fn a_secret_created_at_first_delivery_is_sealed_too_and_reseal_needs_a_key() {
    block_on(async {
        let store = Arc::new(MemoryStore::new());
        let sealed = service(&store, SealingKeys::new(key(3), Vec::new()));
        let pid = project(&sealed).await;
        let secret = signing(&sealed, pid).await.unwrap();
        let raw = stored(&store, pid).await;
        assert!(raw[0].starts_with("v1.") && !raw[0].contains(&secret[6..]));
        assert_eq!(signing(&sealed, pid).await.unwrap(), secret);

        let err = service(&store, SealingKeys::none())
            .directory()
            .reseal_callback_secrets(&actor())
            .await
            .unwrap_err();
        assert_eq!(err.code(), ErrorCode::BadRequest);
    });
}

#[test]
fn a_sealed_secret_moved_to_another_project_does_not_open() {
    block_on(async {
        let store = Arc::new(MemoryStore::new());
        let sealed = service(&store, SealingKeys::new(key(1), Vec::new()));
        let (p1, p2) = (project(&sealed).await, project(&sealed).await);
        sealed
            .directory()
            .rotate_callback_secret(p1, &actor())
            .await
            .unwrap();
        let record = store.callback_secrets(p1).await.unwrap().remove(0);
        store.insert_callback_secret(p2, &record).await.unwrap();
        assert_eq!(signing(&sealed, p2).await, Err(ErrorCode::Internal));
    });
}
