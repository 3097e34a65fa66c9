//! The sandbox's first merchant: a demo merchant and project with a token, a key pair, a
//! callback secret and an operator token, beside the demo project a test-mode project with its
//! own token, key pair and callback secret (its payments are test payments, which the sandbox
//! test helpers close without operator calls), and (feature `cabinet`) a web cabinet user of the demo merchant
//! with a password (it sets up its two-factor code at first sign-in).
//!
//! [`bootstrap`] provisions them once, over an empty store, and hands back the credentials;
//! where they go is the caller's: `payments-server` writes them to its data dir's
//! `sandbox-credentials.json`, the test server (`testing::TestServer`, feature `testing`) keeps
//! them in memory.

use payments_client::{SandboxCredentials, TestProjectCredentials};
use payments_core::auth::keys::{generate_signing_key, public_key_to_pem, signing_key_to_pem};
use payments_core::auth::{Environment, Scope};
use payments_core::service::{Actor, PaymentService};
use payments_core::store::MerchantStoreExt;
use payments_core::ApiError;
use payments_directory::{DirectoryAccess, ProjectPatch, Provision};

/// The demo merchant's cabinet user.
pub const DEMO_CABINET_EMAIL: &str = "demo@merchant.example";

/// How long the node that bootstraps a shared database holds the turn: the others skip the
/// bootstrap meanwhile (and afterwards find the merchant it created).
const BOOTSTRAP_TURN: std::time::Duration = std::time::Duration::from_secs(600);

/// The web cabinet and its URL, in which the demo merchant gets a user (feature `cabinet`).
#[cfg(feature = "cabinet")]
pub type DemoCabinet<'a> = (&'a payments_cabinet::Cabinet, &'a str);
/// Without feature `cabinet` there is no cabinet to give a demo user.
#[cfg(not(feature = "cabinet"))]
pub type DemoCabinet<'a> = (std::convert::Infallible, &'a str);

/// Provisions the sandbox's demo merchant over an empty store and returns its credentials,
/// with the URLs `base_url` and `operator_url`; `None` when the store already has merchants or
/// another node (one shared database) bootstraps it. With `cabinet` (the cabinet and its URL),
/// the demo merchant gets a cabinet user.
///
/// A service that is not the sandbox's is refused before anything is written (the test-mode
/// project and the sandbox's credentials exist only there): it used to write the demo
/// merchant, project, token, key and callback secret, then fail at the test project, and
/// every later call answered `Ok(None)` with those credentials lost.
pub async fn bootstrap(
    service: &PaymentService,
    base_url: &str,
    operator_url: &str,
    cabinet: Option<DemoCabinet<'_>>,
) -> Result<Option<SandboxCredentials>, ApiError> {
    let environment = service.auth_config().environment;
    if environment != Environment::Sandbox {
        return Err(ApiError::bad_request(format!(
            "the sandbox bootstrap runs only in the sandbox, and this service is {environment}: \
             provision a production merchant with Directory::provision \
             (docs/embedding.md, \"The first merchant\")"
        )));
    }
    if !service.store().merchants().await?.is_empty() {
        return Ok(None);
    }
    // Nodes starting together on one empty shared database: one of them bootstraps.
    if !service
        .payments()
        .take_turn("sandbox-bootstrap", BOOTSTRAP_TURN)
        .await?
    {
        return Ok(None);
    }
    let actor = Actor("bootstrap".to_string());
    let provisioned = service
        .directory()
        .provision(&Provision::new("Demo merchant", "Demo project"), &actor)
        .await
        .map_err(|e| ApiError::internal(format!("the sandbox's demo merchant: {e}")))?;
    let (merchant, project) = (provisioned.merchant, provisioned.project);
    let Some(credentials) = provisioned.credentials else {
        // Another node provisioned it meanwhile: its credentials are in its file.
        return Ok(None);
    };
    let test_project = bootstrap_test_project(service, merchant.id, &actor).await?;
    let operator_token = service.directory().issue_operator_token().await?;
    let demo = TestProjectCredentials::new(
        &project.id.to_string(),
        credentials.token,
        credentials.keyid.as_str(),
        credentials
            .private_key_pem
            .expect("a generated key's private key is returned"),
    );
    #[cfg_attr(not(feature = "cabinet"), allow(unused_mut))]
    let mut creds = SandboxCredentials::new(
        base_url,
        operator_url,
        demo,
        credentials.callback_secret,
        operator_token.into(),
    )
    .with_test_project(test_project);
    #[cfg(feature = "cabinet")]
    if let Some((cabinet, url)) = cabinet {
        let password = payments_cabinet::secrets::random_token(service.ports().rng.as_ref());
        cabinet
            .users()
            .create_with_password(DEMO_CABINET_EMAIL, merchant.id, &password, &actor)
            .await?;
        creds = creds.with_cabinet_user(url, DEMO_CABINET_EMAIL, password.into());
    }
    #[cfg(not(feature = "cabinet"))]
    if let Some((never, _)) = cabinet {
        match never {}
    }
    Ok(Some(creds))
}

/// The test-mode project of the demo merchant: a token with every scope, a key pair and a
/// callback secret. Test payments send no callbacks on their own; "send callback" of a closed
/// one (`POST /api/v1/payments/{id}/resend_callback`, the cabinet's button) signs with this
/// secret, which the credentials file hands to the merchant's receiver.
async fn bootstrap_test_project(
    service: &PaymentService,
    merchant: payments_core::MerchantId,
    actor: &Actor,
) -> Result<TestProjectCredentials, ApiError> {
    let patch = ProjectPatch {
        test_mode: Some(true),
        ..ProjectPatch::default()
    };
    let project = service
        .directory()
        .create_project(merchant, "Demo test project", patch, actor)
        .await?;
    let token = service
        .directory()
        .issue_token(project.id, Scope::ALL.to_vec(), actor)
        .await?;
    let key = generate_signing_key(service.ports().rng.as_ref());
    let record = service
        .directory()
        .register_key(project.id, &public_key_to_pem(&key.verifying_key()), actor)
        .await?;
    let callback_secret = service
        .directory()
        .rotate_callback_secret(project.id, actor)
        .await?;
    Ok(TestProjectCredentials::new(
        &project.id.to_string(),
        token.token,
        record.keyid.as_str(),
        signing_key_to_pem(&key).into(),
    )
    .with_callback_secret(callback_secret))
}
