//! First start of a sandbox: a demo merchant and project with a token, a key pair, a callback
//! secret and an operator token, beside the demo project a test-mode project with its own
//! token and key pair (its payments are test payments, which the sandbox test helpers close
//! without operator calls), and a web cabinet user of the demo merchant with a password (it
//! sets up its two-factor code at first sign-in), written to
//! `<data-dir>/sandbox-credentials.json` (mode 0600). Secrets go to that file only, never to
//! the log.

use payments_directory::DirectoryAccess;
use std::path::{Path, PathBuf};

use payments_client::{SandboxCredentials, TestProjectCredentials};
use payments_core::auth::keys::{generate_signing_key, public_key_to_pem, signing_key_to_pem};
use payments_core::auth::{Environment, Scope};
use payments_core::service::{Actor, PaymentService};
use payments_core::store::MerchantStoreExt;
use payments_core::ApiError;
use payments_directory::{ProjectPatch, Provision};

/// The credentials file's name inside the data dir.
pub const CREDENTIALS_FILE: &str = "sandbox-credentials.json";

/// The demo merchant's cabinet user.
pub const DEMO_CABINET_EMAIL: &str = "demo@merchant.example";

/// Bootstraps an empty sandbox; `None` when the store already has merchants or the file exists.
/// How long the node that bootstraps a shared database holds the turn: the others skip the
/// bootstrap meanwhile (and afterwards find the merchant it created).
const BOOTSTRAP_TURN: std::time::Duration = std::time::Duration::from_secs(600);

/// The web cabinet and its URL, in which the demo merchant gets a user (feature `cabinet`).
#[cfg(feature = "cabinet")]
pub type DemoCabinet<'a> = (&'a payments_cabinet::Cabinet, &'a str);
/// Without feature `cabinet` there is no cabinet to give a demo user.
#[cfg(not(feature = "cabinet"))]
pub type DemoCabinet<'a> = (std::convert::Infallible, &'a str);

/// With `cabinet` (the cabinet and its URL), the demo merchant gets a cabinet user.
///
/// A service that is not the sandbox's is refused before anything is written (the test-mode
/// project and the sandbox's credentials file exist only there): it used to write the demo
/// merchant, project, token, key and callback secret, then fail at the test project, and
/// every later call answered `Ok(None)` with those credentials lost.
pub async fn bootstrap_sandbox(
    service: &PaymentService,
    data_dir: &Path,
    base_url: &str,
    operator_url: &str,
    cabinet: Option<DemoCabinet<'_>>,
) -> Result<Option<PathBuf>, ApiError> {
    let environment = service.auth_config().environment;
    if environment != Environment::Sandbox {
        return Err(ApiError::bad_request(format!(
            "the sandbox bootstrap runs only in the sandbox, and this service is {environment}: \
             provision a production merchant with Directory::provision \
             (docs/embedding.md, \"The first merchant\")"
        )));
    }
    let path = data_dir.join(CREDENTIALS_FILE);
    if path.exists() || !service.store().merchants().await?.is_empty() {
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
    write_private(
        &path,
        &serde_json::to_vec_pretty(&creds).expect("plain strings serialise"),
    )
    .map_err(|e| ApiError::internal(format!("cannot write {}: {e}", path.display())))?;
    Ok(Some(path))
}

/// Why the credentials file could not be brought to this start's listeners.
#[non_exhaustive]
#[derive(Debug, thiserror::Error)]
pub enum RefreshError {
    /// The file could not be read or is not a credentials file.
    #[error(transparent)]
    Read(#[from] payments_client::CredentialsError),
    /// The new file could not be written.
    #[error("cannot write {}: {source}", path.display())]
    Write {
        /// The credentials file.
        path: PathBuf,
        /// Why.
        #[source]
        source: std::io::Error,
    },
}

/// Brings an existing credentials file to this start's listeners. The file is written once,
/// by the first start, with that start's URLs; a server restarted on other ports (or with
/// another `listen.public_url`) would leave every client that reads it (the quickstart, the
/// guides, `MerchantClient::from_credentials`) knocking at the old ones. The URLs are
/// rewritten, everything else (tokens, keys, secrets) kept as it is, mode 0600 again.
/// `Ok(None)` when there is no file or its URLs are current; `Ok(Some(path))` when it was
/// rewritten; `Err` (the server only warns) when it cannot be read or written.
pub fn refresh_credentials(
    data_dir: &Path,
    base_url: &str,
    operator_url: &str,
    cabinet_url: Option<&str>,
) -> Result<Option<PathBuf>, RefreshError> {
    let path = data_dir.join(CREDENTIALS_FILE);
    if !path.exists() {
        return Ok(None);
    }
    let found = SandboxCredentials::from_file(&path)?;
    let before = serde_json::to_vec_pretty(&found).expect("plain strings serialise");
    let current = found.at(base_url, operator_url, cabinet_url);
    let after = serde_json::to_vec_pretty(&current).expect("plain strings serialise");
    if before == after {
        return Ok(None);
    }
    // A new owner-only file beside it, then renamed over it: a crash leaves the old file or
    // the new one, never half of either.
    let fresh = data_dir.join(format!("{CREDENTIALS_FILE}.new"));
    let _ = std::fs::remove_file(&fresh);
    write_private(&fresh, &after)
        .and_then(|()| std::fs::rename(&fresh, &path))
        .map_err(|source| RefreshError::Write {
            path: path.clone(),
            source,
        })?;
    Ok(Some(path))
}

/// The test-mode project of the demo merchant: a token with every scope and a key pair. No
/// callback secret: test payments send no callbacks on their own; a manual resend needs one
/// issued first (`payments-server callback-secret rotate <project>`).
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
    Ok(TestProjectCredentials::new(
        &project.id.to_string(),
        token.token,
        record.keyid.as_str(),
        signing_key_to_pem(&key).into(),
    ))
}

pub use crate::files::write_private;

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use payments_core::service::{AuthConfig, Ports, ServiceConfig};
    use payments_core::testing::{ManualClock, MemoryStore, SeededRandom};
    use payments_core::Timestamp;

    use super::*;
    use payments_providers::sandbox::{FixedRates, SandboxProvider};

    fn service(environment: Environment) -> PaymentService {
        let store: Arc<dyn payments_core::store::Store> = Arc::new(MemoryStore::new());
        PaymentService::new(
            Ports::new(
                store.clone(),
                Arc::new(SandboxProvider::new(store)),
                Arc::new(FixedRates::sandbox_defaults()),
                Arc::new(ManualClock::new(Timestamp::from_unix_secs(1_790_856_000))),
                Arc::new(SeededRandom::new(3)),
            ),
            ServiceConfig::default(),
            AuthConfig::for_environment(environment),
        )
    }

    #[tokio::test]
    async fn a_production_service_is_refused_before_anything_is_written() {
        let dir = tempfile::tempdir().expect("a temporary directory");
        let production = service(Environment::Production);
        let refused = bootstrap_sandbox(&production, dir.path(), "http://m", "http://o", None)
            .await
            .expect_err("production has no sandbox bootstrap");
        assert!(
            refused
                .message
                .contains("the sandbox bootstrap runs only in the sandbox"),
            "{refused}"
        );
        assert!(production
            .store()
            .merchants()
            .await
            .expect("read")
            .is_empty());
        assert!(!dir.path().join(CREDENTIALS_FILE).exists());
    }

    #[tokio::test]
    async fn the_sandbox_is_bootstrapped_once() {
        let dir = tempfile::tempdir().expect("a temporary directory");
        let sandbox = service(Environment::Sandbox);
        let file = bootstrap_sandbox(&sandbox, dir.path(), "http://m", "http://o", None)
            .await
            .expect("bootstrapped")
            .expect("a credentials file");
        assert_eq!(file, dir.path().join(CREDENTIALS_FILE));
        assert_eq!(sandbox.store().merchants().await.expect("read").len(), 1);
        let again = bootstrap_sandbox(&sandbox, dir.path(), "http://m", "http://o", None).await;
        assert_eq!(again, Ok(None));
    }
}
