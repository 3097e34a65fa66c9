//! A merchant calling the service in-process: a token and a signing key stored for a project,
//! and requests signed and authenticated exactly as the HTTP adapter does it, so that tests
//! of the service take the one authenticated path ([`Gate::authenticate`](crate::service::Gate::authenticate)) instead
//! of a shortcut around it.

use base64::engine::general_purpose::STANDARD;
use base64::Engine;
use ed25519_dalek::SigningKey;

use crate::auth::signature::{sign_request, SignOptions};
use crate::auth::token::IssuedToken;
use crate::auth::{keyid, Endpoint, HttpRequestParts, Scope};
use crate::ids::{ProjectId, TokenId};
use crate::project::{KeyRecord, TokenRecord};
use crate::random::RandomSource;
use crate::service::{AuthRequest, Authenticated, PaymentService};
use crate::testing::SeededRandom;
use crate::ApiError;

/// A project's credentials (a token with every scope and an Ed25519 key), stored directly in
/// the service's store without touching the service's random source, so that seeded tests
/// keep their ids.
pub struct TestCaller {
    token: String,
    key: SigningKey,
    rng: SeededRandom,
}

impl std::fmt::Debug for TestCaller {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("TestCaller").finish_non_exhaustive()
    }
}

impl TestCaller {
    /// Stores a token and a key for `project` (seeded by `seed`) and returns the caller.
    pub async fn provision(service: &PaymentService, project: ProjectId, seed: u64) -> TestCaller {
        let rng = SeededRandom::new(seed ^ 0x5eed_ca11);
        let environment = service.auth_config().environment;
        let issued = IssuedToken::generate(environment, &rng);
        let now = service.ports().clock.now();
        let store = service.store();
        store
            .insert_token(&TokenRecord {
                id: TokenId::generate(&rng),
                project_id: project,
                hash: *issued.hash.as_bytes(),
                prefix: issued.token_prefix.clone(),
                scopes: Scope::ALL.to_vec(),
                created_at: now,
                revoked_at: None,
                name: Some("test caller".into()),
                expires_at: None,
            })
            .await
            .expect("the test token is stored");
        let mut seed_bytes = [0u8; 32];
        rng.fill(&mut seed_bytes);
        let key = SigningKey::from_bytes(&seed_bytes);
        store
            .insert_key(&KeyRecord {
                keyid: keyid(&key.verifying_key()),
                project_id: project,
                public_key: key.verifying_key().to_bytes(),
                created_at: now,
                revoked_at: None,
            })
            .await
            .expect("the test key is stored");
        TestCaller {
            token: issued.secret().to_string(),
            key,
            rng,
        }
    }

    /// The public key, raw and base64 (as a merchant registers it).
    pub fn public_key_base64(&self) -> String {
        STANDARD.encode(self.key.verifying_key().to_bytes())
    }

    /// Signs a request to `endpoint` (`method`, `path`, `body`, created at the service's
    /// clock) and authenticates it through [`Gate::authenticate`](crate::service::Gate::authenticate) from 127.0.0.1,
    /// with no rate limit.
    pub async fn authenticate(
        &self,
        service: &PaymentService,
        endpoint: Endpoint,
        method: &str,
        path: &str,
        body: &[u8],
    ) -> Result<Authenticated, ApiError> {
        let bearer = format!("Bearer {}", self.token);
        let mut base: Vec<(&str, &[u8])> = vec![
            ("authorization", bearer.as_bytes()),
            ("x-request-id", b"test-request"),
        ];
        if !body.is_empty() {
            base.push(("content-type", b"application/json"));
        }
        let parts = HttpRequestParts {
            method,
            scheme: "https",
            authority: "payments.test",
            path_and_query: path,
            headers: &base,
            body,
        };
        let created = service.ports().clock.now().unix_secs();
        let options = SignOptions::new(keyid(&self.key.verifying_key()), created, created + 300);
        let signed = sign_request(&parts, &self.key, &options, &self.rng)
            .map_err(|e| ApiError::bad_request(format!("test signature: {e}")))?;
        let mut headers = base.clone();
        for (name, value) in signed.headers() {
            headers.push((name, value.as_bytes()));
        }
        let request = AuthRequest {
            endpoint,
            parts: HttpRequestParts {
                headers: &headers,
                ..parts
            },
            peer: Some(std::net::IpAddr::from([127, 0, 0, 1])),
            payment: None,
        };
        service
            .gate()
            .authenticate(&request, &crate::testing::Unlimited)
            .await
            .map_err(ApiError::from)
    }

    /// A signed create through authentication: `POST /api/v1/payments` with `body`.
    pub async fn create(
        &self,
        service: &PaymentService,
        body: &[u8],
    ) -> Result<crate::service::CreateOutcome, ApiError> {
        let auth = self
            .authenticate(
                service,
                Endpoint::CreatePayment,
                "POST",
                "/api/v1/payments",
                body,
            )
            .await?;
        service
            .payments()
            .create_payment(auth, body)
            .await
            .map_err(ApiError::from)
    }

    /// A signed sandbox test-helper request (`complete` or `cancel`) for payment `id`.
    pub async fn test_helper(
        &self,
        service: &PaymentService,
        id: &str,
        action: &str,
    ) -> Result<Authenticated, ApiError> {
        let path = format!("/api/v1/test/payments/{id}/{action}");
        self.authenticate(service, Endpoint::TestHelper, "POST", &path, b"")
            .await
    }
}
