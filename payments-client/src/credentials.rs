//! The sandbox credentials file, `<data-dir>/sandbox-credentials.json`, written by the server's
//! first start of a sandbox and read by merchants, the examples and the tests.

use std::path::{Path, PathBuf};

use payments_core::SecretString;
use serde::{Deserialize, Serialize};

/// The contents of `sandbox-credentials.json`. The secrets are [`SecretString`]s: the file
/// holds their values, `Debug` shows none of them. Read it with [`SandboxCredentials::from_file`];
/// new fields come as the server learns to write them, so it is `#[non_exhaustive]` (build one
/// with [`SandboxCredentials::new`]).
#[derive(Debug, Clone, Serialize, Deserialize)]
#[non_exhaustive]
pub struct SandboxCredentials {
    /// The merchant API's base URL.
    pub base_url: String,
    /// The operator API's base URL.
    pub operator_url: String,
    /// The demo project's id.
    pub project_id: String,
    /// A project token with every scope.
    pub token: SecretString,
    /// The registered key's id.
    pub keyid: String,
    /// The Ed25519 private key (PKCS#8 PEM) matching the registered public key.
    pub private_key_pem: SecretString,
    /// The project's callback secret.
    pub callback_secret: SecretString,
    /// The operator API token.
    pub operator_token: SecretString,
    /// The test-mode project bootstrapped beside the demo project: its payments are test
    /// payments, which the sandbox test helpers (`POST /api/v1/test/payments/{id}/complete`,
    /// `.../cancel`) close without operator calls. Absent from files written before it existed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub test_project: Option<TestProjectCredentials>,
    /// The web cabinet's URL. This and the two below are absent from files written before
    /// the cabinet existed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cabinet_url: Option<String>,
    /// The demo merchant's cabinet user (it sets up its two-factor code at first sign-in).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cabinet_email: Option<String>,
    /// That user's password.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cabinet_password: Option<SecretString>,
}

/// The credentials of one project: the sandbox's test-mode project (the demo merchant's
/// second project) in the file, and the demo project's own in [`SandboxCredentials::new`].
#[derive(Debug, Clone, Serialize, Deserialize)]
#[non_exhaustive]
pub struct TestProjectCredentials {
    /// The test project's id.
    pub project_id: String,
    /// A token of the test project with every scope (`payments:test` included).
    pub token: SecretString,
    /// The test project's registered key id.
    pub keyid: String,
    /// The Ed25519 private key (PKCS#8 PEM) matching that key.
    pub private_key_pem: SecretString,
    /// The test project's callback secret: it signs the callbacks of the test project's
    /// payments ("send callback" of a closed test payment), which the demo project's
    /// `callback_secret` does not verify. Absent from files written before it existed (a
    /// sandbox's next start fills it in); `None` in [`SandboxCredentials::new`]'s project.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub callback_secret: Option<SecretString>,
}

/// Why a credentials file could not be loaded.
#[derive(Debug, thiserror::Error)]
pub enum CredentialsError {
    /// The file could not be read.
    #[error("cannot read {}: {source}", path.display())]
    Read {
        /// The file.
        path: PathBuf,
        /// The I/O error.
        #[source]
        source: std::io::Error,
    },
    /// The file is not a credentials file.
    #[error("{} is not a credentials file: {source}", path.display())]
    Parse {
        /// The file.
        path: PathBuf,
        /// The JSON error.
        #[source]
        source: serde_json::Error,
    },
    /// The file is larger than [`crate::files::CREDENTIALS`] (64 KiB): not a credentials file.
    #[error(transparent)]
    TooLarge(crate::files::FileError),
}

impl TestProjectCredentials {
    /// A project's id, token, key id and private key (PKCS#8 PEM).
    pub fn new(
        project_id: &str,
        token: SecretString,
        keyid: &str,
        private_key_pem: SecretString,
    ) -> TestProjectCredentials {
        TestProjectCredentials {
            project_id: project_id.to_string(),
            token,
            keyid: keyid.to_string(),
            private_key_pem,
            callback_secret: None,
        }
    }

    /// With the project's callback secret.
    #[must_use]
    pub fn with_callback_secret(mut self, callback_secret: SecretString) -> Self {
        self.callback_secret = Some(callback_secret);
        self
    }
}

impl SandboxCredentials {
    /// The credentials of a sandbox at `base_url` (operator API at `operator_url`): its demo
    /// `project` with that project's `callback_secret`, and the `operator_token`; no test
    /// project and no cabinet user until [`SandboxCredentials::with_test_project`] and
    /// [`SandboxCredentials::with_cabinet_user`].
    pub fn new(
        base_url: &str,
        operator_url: &str,
        project: TestProjectCredentials,
        callback_secret: SecretString,
        operator_token: SecretString,
    ) -> SandboxCredentials {
        SandboxCredentials {
            base_url: base_url.to_string(),
            operator_url: operator_url.to_string(),
            project_id: project.project_id,
            token: project.token,
            keyid: project.keyid,
            private_key_pem: project.private_key_pem,
            callback_secret,
            operator_token,
            test_project: None,
            cabinet_url: None,
            cabinet_email: None,
            cabinet_password: None,
        }
    }

    /// With the sandbox's test-mode project.
    #[must_use]
    pub fn with_test_project(mut self, test_project: TestProjectCredentials) -> Self {
        self.test_project = Some(test_project);
        self
    }

    /// With the web cabinet at `url` and the demo merchant's user there.
    #[must_use]
    pub fn with_cabinet_user(mut self, url: &str, email: &str, password: SecretString) -> Self {
        self.cabinet_url = Some(url.to_string());
        self.cabinet_email = Some(email.to_string());
        self.cabinet_password = Some(password);
        self
    }

    /// The same credentials for a server that moved: the merchant API at `base_url`, the
    /// operator API at `operator_url`, the cabinet (if the file names one) at `cabinet_url`.
    #[must_use]
    pub fn at(mut self, base_url: &str, operator_url: &str, cabinet_url: Option<&str>) -> Self {
        self.base_url = base_url.to_string();
        self.operator_url = operator_url.to_string();
        if self.cabinet_url.is_some() {
            self.cabinet_url = cabinet_url.map(str::to_string);
        }
        self
    }

    /// These credentials with the test project's id, token, key and callback secret in place
    /// of the demo project's (URLs and operator token unchanged), for a
    /// [`crate::MerchantClient`] whose payments the test helpers can close and a receiver of
    /// their callbacks; `None` when the file has no test project (written by an older server).
    /// A test project without its callback secret (a file written before the test project
    /// had one, until the sandbox's next start fills it in) keeps the demo project's
    /// `callback_secret`, which does not verify the test project's callbacks: a receiver
    /// checks [`TestProjectCredentials::callback_secret`] itself.
    pub fn for_test_project(&self) -> Option<SandboxCredentials> {
        let t = self.test_project.as_ref()?;
        Some(SandboxCredentials {
            project_id: t.project_id.clone(),
            token: t.token.clone(),
            keyid: t.keyid.clone(),
            private_key_pem: t.private_key_pem.clone(),
            callback_secret: t
                .callback_secret
                .clone()
                .unwrap_or_else(|| self.callback_secret.clone()),
            test_project: None,
            ..self.clone()
        })
    }

    /// Reads a credentials file (`<data-dir>/sandbox-credentials.json`), at most
    /// [`crate::files::CREDENTIALS`] (64 KiB) of it.
    pub fn from_file(path: impl AsRef<Path>) -> Result<Self, CredentialsError> {
        use crate::files::{read_limited, FileError, CREDENTIALS};

        let path = path.as_ref();
        let bytes = read_limited(path, CREDENTIALS).map_err(|e| match e {
            FileError::Read { path, source } => CredentialsError::Read { path, source },
            e => CredentialsError::TooLarge(e),
        })?;
        serde_json::from_slice(&bytes).map_err(|source| CredentialsError::Parse {
            path: path.to_path_buf(),
            source,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn creds() -> SandboxCredentials {
        SandboxCredentials {
            base_url: "http://127.0.0.1:8080".into(),
            operator_url: "http://127.0.0.1:8081".into(),
            project_id: "prj_1".into(),
            token: "nl_test_abcdefTOKEN-SECRET-PART".into(),
            keyid: "ed25519-KEYID".into(),
            private_key_pem: "-----BEGIN PRIVATE KEY-----PEM-SECRET".into(),
            callback_secret: "whsec_CALLBACK-SECRET".into(),
            operator_token: "op_OPERATOR-SECRET".into(),
            test_project: Some(TestProjectCredentials {
                project_id: "prj_test".into(),
                token: "nl_test_TEST-PROJECT-TOKEN".into(),
                keyid: "ed25519-TESTKEY".into(),
                private_key_pem: "-----BEGIN PRIVATE KEY-----TEST-PEM-SECRET".into(),
                callback_secret: Some("whsec_TEST-CALLBACK-SECRET".into()),
            }),
            cabinet_url: Some("http://127.0.0.1:8082".into()),
            cabinet_email: Some("demo@merchant.example".into()),
            cabinet_password: Some("CABINET-PASSWORD-SECRET".into()),
        }
    }

    #[test]
    fn older_files_without_a_test_project_still_read() {
        let mut v = serde_json::to_value(creds()).unwrap();
        for field in [
            "test_project",
            "cabinet_url",
            "cabinet_email",
            "cabinet_password",
        ] {
            v.as_object_mut().unwrap().remove(field);
        }
        let old: SandboxCredentials = serde_json::from_value(v).unwrap();
        assert!(old.test_project.is_none());
        assert!(old.cabinet_url.is_none() && old.cabinet_password.is_none());
        assert!(old.for_test_project().is_none());
        let json = serde_json::to_value(&old).unwrap();
        assert!(json.get("test_project").is_none());
    }

    #[test]
    fn for_test_project_swaps_the_project_credentials() {
        let c = creds();
        let t = c.for_test_project().unwrap();
        assert_eq!(t.project_id, "prj_test");
        assert_eq!(t.token.expose(), "nl_test_TEST-PROJECT-TOKEN");
        assert_eq!(t.keyid, "ed25519-TESTKEY");
        assert_eq!(t.base_url, c.base_url);
        assert_eq!(t.callback_secret.expose(), "whsec_TEST-CALLBACK-SECRET");
        assert!(t.test_project.is_none());
    }

    #[test]
    fn an_older_test_project_without_a_callback_secret_still_reads() {
        let mut v = serde_json::to_value(creds()).unwrap();
        let test = v["test_project"].as_object_mut().unwrap();
        assert!(
            test.remove("callback_secret").is_some(),
            "written when present"
        );
        let old: SandboxCredentials = serde_json::from_value(v).unwrap();
        let test = old.test_project.as_ref().unwrap();
        assert!(test.callback_secret.is_none());
        assert_eq!(test.project_id, "prj_test");
        // Written back as it was read: no empty member.
        let json = serde_json::to_value(&old).unwrap();
        assert!(
            json["test_project"].get("callback_secret").is_none(),
            "{json}"
        );
        // The test project's client still comes, with the demo project's secret.
        let t = old.for_test_project().unwrap();
        assert_eq!(t.token.expose(), "nl_test_TEST-PROJECT-TOKEN");
        assert_eq!(t.callback_secret, old.callback_secret);
    }

    #[test]
    fn debug_shows_no_secret() {
        let shown = format!("{:?}", creds());
        for secret in [
            "TOKEN-SECRET-PART",
            "PEM-SECRET",
            "CALLBACK-SECRET",
            "OPERATOR-SECRET",
            "TEST-PROJECT-TOKEN",
            "TEST-PEM-SECRET",
            "TEST-CALLBACK-SECRET",
            "CABINET-PASSWORD-SECRET",
        ] {
            assert!(!shown.contains(secret), "{secret} in {shown}");
        }
        for public in ["http://127.0.0.1:8080", "prj_1", "ed25519-KEYID"] {
            assert!(shown.contains(public), "{public} missing from {shown}");
        }
    }

    #[test]
    fn from_file_reads_and_reports() {
        let dir = std::env::temp_dir().join(format!(
            "payments-client-creds-{}-{:?}",
            std::process::id(),
            std::thread::current().id()
        ));
        std::fs::create_dir_all(&dir).unwrap();
        let file = dir.join("sandbox-credentials.json");
        std::fs::write(&file, serde_json::to_vec(&creds()).unwrap()).unwrap();
        let read = SandboxCredentials::from_file(&file).unwrap();
        assert_eq!(read.token, creds().token);
        assert_eq!(read.private_key_pem, creds().private_key_pem);

        std::fs::write(&file, b"{}").unwrap();
        let err = SandboxCredentials::from_file(&file).unwrap_err();
        assert!(matches!(err, CredentialsError::Parse { .. }), "{err}");
        std::fs::remove_file(&file).unwrap();
        let err = SandboxCredentials::from_file(&file).unwrap_err();
        assert!(matches!(err, CredentialsError::Read { .. }), "{err}");
        std::fs::write(&file, vec![b' '; 64 * 1024 + 1]).unwrap();
        let err = SandboxCredentials::from_file(&file).unwrap_err();
        assert!(matches!(err, CredentialsError::TooLarge(..)), "{err}");
        assert!(err.to_string().contains("64 KiB"), "{err}");
        std::fs::remove_file(&file).unwrap();
        std::fs::remove_dir(&dir).unwrap();
    }
}
