//! First start of a sandbox: a demo merchant and project with a token, a key pair, a callback
//! secret and an operator token, beside the demo project a test-mode project with its own
//! token, key pair and callback secret (its payments are test payments, which the sandbox test
//! helpers close without operator calls), and a web cabinet user of the demo merchant with a
//! password (it sets up its two-factor code at first sign-in), written to
//! `<data-dir>/sandbox-credentials.json` (mode 0600). Secrets go to that file only, never to
//! the log. The provisioning is payments-http's ([`payments_http::sandbox`]); the file is this
//! crate's.

use std::path::{Path, PathBuf};

use payments_client::SandboxCredentials;
use payments_core::auth::Environment;
use payments_core::service::PaymentService;
use payments_core::ApiError;
use payments_directory::DirectoryAccess;

pub use payments_http::sandbox::{DemoCabinet, DEMO_CABINET_EMAIL};

/// The credentials file's name inside the data dir.
pub const CREDENTIALS_FILE: &str = "sandbox-credentials.json";

/// Bootstraps an empty sandbox ([`payments_http::sandbox::bootstrap`]) and writes its
/// credentials file; `None` when the store already has merchants or the file exists. With
/// `cabinet` (the cabinet and its URL), the demo merchant gets a cabinet user. An existing
/// file whose test project has no callback secret (written before the bootstrap issued one)
/// gets one ([`fill_test_project_secret`]; a failure there is logged, the start goes on).
///
/// A service that is not the sandbox's is refused before anything is written.
pub async fn bootstrap_sandbox(
    service: &PaymentService,
    data_dir: &Path,
    base_url: &str,
    operator_url: &str,
    cabinet: Option<DemoCabinet<'_>>,
) -> Result<Option<PathBuf>, ApiError> {
    let path = data_dir.join(CREDENTIALS_FILE);
    if path.exists() && service.auth_config().environment == Environment::Sandbox {
        match fill_test_project_secret(service, data_dir).await {
            Ok(Some(project)) => tracing::info!(
                file = %path.display(),
                %project,
                "sandbox credentials: the test project's callback secret written \
                 (test_project.callback_secret)"
            ),
            Ok(None) => {}
            Err(e) => tracing::warn!(
                error = %e,
                "sandbox credentials: test_project.callback_secret not written"
            ),
        }
        return Ok(None);
    }
    let Some(creds) =
        payments_http::sandbox::bootstrap(service, base_url, operator_url, cabinet).await?
    else {
        return Ok(None);
    };
    write_private(
        &path,
        &serde_json::to_vec_pretty(&creds).expect("plain strings serialise"),
    )
    .map_err(|e| ApiError::internal(format!("cannot write {}: {e}", path.display())))?;
    Ok(Some(path))
}

/// Why the credentials file could not be brought to this start's listeners, or given the
/// test project's callback secret.
#[non_exhaustive]
#[derive(Debug, thiserror::Error)]
pub enum RefreshError {
    /// The file could not be read or is not a credentials file.
    #[error(transparent)]
    Read(#[from] payments_client::CredentialsError),
    /// The test project's callback secret could not be looked up or issued.
    #[error("the test project {project}: {source}")]
    Secret {
        /// The file's `test_project.project_id`.
        project: String,
        /// Why.
        #[source]
        source: ApiError,
    },
    /// The test project has a callback secret that was shown when it was issued (the
    /// operator API, the cabinet, `payments-server callback-secret rotate`) and is not in the
    /// file: it is left signing rather than rotated away under whoever holds it.
    #[error(
        "the test project {project} has a callback secret issued before, not in the file: give \
         that one to the receiver, or issue a new one with \
         `payments-server callback-secret rotate {project}`"
    )]
    IssuedElsewhere {
        /// The file's `test_project.project_id`.
        project: String,
    },
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
    replace_file(data_dir, &current)
}

/// Gives the test project of an existing credentials file the callback secret that files
/// written before the bootstrap issued one lack: a new secret is issued
/// (`Directory::rotate_callback_secret`) and written to `test_project.callback_secret`, the
/// rest of the file kept. `Ok(None)` when there is no file, no test project, or the file has
/// the secret; `Ok(Some(project))` when the secret was written;
/// [`RefreshError::IssuedElsewhere`] when the project has a secret that was shown to someone
/// already (that one is left signing, not rotated away).
pub async fn fill_test_project_secret(
    service: &PaymentService,
    data_dir: &Path,
) -> Result<Option<String>, RefreshError> {
    let path = data_dir.join(CREDENTIALS_FILE);
    if !path.exists() {
        return Ok(None);
    }
    let mut found = SandboxCredentials::from_file(&path)?;
    let Some(test) = found.test_project.take() else {
        return Ok(None);
    };
    if test.callback_secret.is_some() {
        return Ok(None);
    }
    let project = test.project_id.clone();
    let failed = |source: ApiError| RefreshError::Secret {
        project: project.clone(),
        source,
    };
    let id: payments_core::ProjectId = project
        .parse()
        .map_err(|_| failed(ApiError::bad_request("not a project id")))?;
    let held = service
        .store()
        .callback_secrets(id)
        .await
        .map_err(|e| failed(e.into()))?;
    if held.iter().any(|r| r.revealed) {
        return Err(RefreshError::IssuedElsewhere { project });
    }
    let actor = payments_core::service::Actor("bootstrap".to_string());
    let secret = service
        .directory()
        .rotate_callback_secret(id, &actor)
        .await
        .map_err(|e| failed(e.into()))?;
    found = found.with_test_project(test.with_callback_secret(secret));
    replace_file(data_dir, &found)?;
    Ok(Some(project))
}

/// Writes `creds` over the data dir's credentials file: a new owner-only file beside it,
/// then renamed over it, so that a crash leaves the old file or the new one, never half of
/// either.
fn replace_file(
    data_dir: &Path,
    creds: &SandboxCredentials,
) -> Result<Option<PathBuf>, RefreshError> {
    let path = data_dir.join(CREDENTIALS_FILE);
    let bytes = serde_json::to_vec_pretty(creds).expect("plain strings serialise");
    let fresh = data_dir.join(format!("{CREDENTIALS_FILE}.new"));
    let _ = std::fs::remove_file(&fresh);
    write_private(&fresh, &bytes)
        .and_then(|()| std::fs::rename(&fresh, &path))
        .map_err(|source| RefreshError::Write {
            path: path.clone(),
            source,
        })?;
    Ok(Some(path))
}

pub use crate::files::write_private;

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use payments_core::service::{AuthConfig, Ports, ServiceConfig};
    use payments_core::store::MerchantStoreExt;
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

    #[tokio::test]
    async fn a_test_project_secret_shown_before_is_not_rotated_away() {
        let dir = tempfile::tempdir().expect("a temporary directory");
        let sandbox = service(Environment::Sandbox);
        let file = bootstrap_sandbox(&sandbox, dir.path(), "http://m", "http://o", None)
            .await
            .expect("bootstrapped")
            .expect("a credentials file");
        let written = SandboxCredentials::from_file(&file).expect("reads");
        let test = written.test_project.clone().expect("a test project");
        assert!(test.callback_secret.is_some(), "the bootstrap writes it");
        assert!(matches!(
            fill_test_project_secret(&sandbox, dir.path()).await,
            Ok(None)
        ));

        // A file without it, and the project's secret was shown when it was issued.
        let mut json: serde_json::Value =
            serde_json::from_slice(&std::fs::read(&file).expect("read")).expect("JSON");
        json["test_project"]
            .as_object_mut()
            .expect("an object")
            .remove("callback_secret");
        std::fs::write(&file, serde_json::to_vec(&json).expect("JSON")).expect("write");
        let refused = fill_test_project_secret(&sandbox, dir.path())
            .await
            .expect_err("not rotated away");
        assert!(
            matches!(&refused, RefreshError::IssuedElsewhere { project } if *project == test.project_id),
            "{refused}"
        );
        let id = test.project_id.parse().expect("a project id");
        let held = sandbox.store().callback_secrets(id).await.expect("read");
        assert_eq!(held.len(), 1, "no secret issued");
    }
}
