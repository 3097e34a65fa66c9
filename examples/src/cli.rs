//! Command-line arguments shared by the examples that call the merchant API.

use std::path::PathBuf;

use payments_client::files::FileError;
use payments_client::{ClientError, MerchantClient, SandboxCredentials};
use payments_core::SecretString;

use crate::LoadCredentialsError;

/// The largest `--ca-file` read (a CA bundle).
const CA_FILE: payments_client::files::Limit =
    payments_client::files::Limit::new(1024 * 1024, "a CA file");

/// Where the API is and how to authenticate: explicit flags win over the credentials file.
#[derive(Debug, Clone, clap::Args)]
pub struct ApiArgs {
    /// The sandbox credentials file written by the server's first start.
    #[arg(
        long,
        env = "PAYMENTS_CREDENTIALS",
        default_value = "./data/sandbox-credentials.json"
    )]
    pub credentials: PathBuf,
    /// The merchant API's base URL (default: `base_url` of the credentials file).
    #[arg(long, env = "PAYMENTS_BASE_URL")]
    pub base_url: Option<String>,
    /// The project token (default: `token` of the credentials file).
    #[arg(long, env = "PAYMENTS_TOKEN", hide_env_values = true)]
    pub token: Option<SecretString>,
    /// A PKCS#8 PEM file with the Ed25519 private key (default: `private_key_pem` of the
    /// credentials file).
    #[arg(long, env = "PAYMENTS_PRIVATE_KEY")]
    pub private_key: Option<PathBuf>,
    /// A PEM file of CA certificates to trust besides the system's, for a server whose TLS
    /// certificate a private CA signed (or a self-signed one).
    #[arg(long, env = "PAYMENTS_CA_FILE")]
    pub ca_file: Option<PathBuf>,
    /// Which project of the credentials file to act as: `demo` (`project_id`, `token`,
    /// `private_key_pem`) or `test` (the sandbox's test-mode project, `test_project`).
    #[arg(long, env = "PAYMENTS_PROJECT", value_enum, default_value_t = Project::Demo)]
    pub project: Project,
}

/// A project of the sandbox credentials file.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum Project {
    /// The demo project (the file's `project_id`, `token` and `private_key_pem`).
    Demo,
    /// The sandbox's test-mode project (the file's `test_project`).
    Test,
}

/// Why the flags and the credentials file give no client.
#[derive(Debug, thiserror::Error)]
pub enum ApiArgsError {
    /// `--ca-file` or `--private-key` could not be read.
    #[error(transparent)]
    File(#[from] FileError),
    /// `--ca-file` is not a PEM bundle.
    #[error("{}: {source}", path.display())]
    CaFile {
        /// The file.
        path: PathBuf,
        /// What reqwest found wrong.
        source: reqwest::Error,
    },
    /// `--ca-file` holds no certificate.
    #[error("{}: no PEM certificate in it", path.display())]
    NoCertificate {
        /// The file.
        path: PathBuf,
    },
    /// The HTTP client could not be built.
    #[error(transparent)]
    Http(#[from] reqwest::Error),
    /// The credentials file could not be read.
    #[error(transparent)]
    Credentials(#[from] LoadCredentialsError),
    /// The token, key or base URL was refused.
    #[error(transparent)]
    Client(#[from] ClientError),
    /// `--project test` with a credentials file that has no `test_project`.
    #[error(
        "--project test: {} has no test_project (written by an older server; start the \
         sandbox with a fresh data dir)",
        path.display()
    )]
    NoTestProject {
        /// The credentials file.
        path: PathBuf,
    },
}

impl ApiArgs {
    /// `builder` finished, trusting the certificates of `--ca-file` too.
    pub fn http_client(
        &self,
        builder: reqwest::ClientBuilder,
    ) -> Result<reqwest::Client, ApiArgsError> {
        let mut builder = builder;
        if let Some(path) = &self.ca_file {
            let pem = payments_client::files::read_limited(path, CA_FILE)?;
            let certs = reqwest::Certificate::from_pem_bundle(&pem).map_err(|source| {
                ApiArgsError::CaFile {
                    path: path.clone(),
                    source,
                }
            })?;
            if certs.is_empty() {
                return Err(ApiArgsError::NoCertificate { path: path.clone() });
            }
            for cert in certs {
                builder = builder.add_root_certificate(cert);
            }
        }
        Ok(builder.build()?)
    }

    /// The credentials file as `--project` picks it: `None` when the flags name the base URL,
    /// the token and the key (the file is not read then).
    pub fn credentials(&self) -> Result<Option<SandboxCredentials>, ApiArgsError> {
        if self.base_url.is_some() && self.token.is_some() && self.private_key.is_some() {
            return Ok(None);
        }
        let file = crate::load_credentials(&self.credentials)?;
        match self.project {
            Project::Demo => Ok(Some(file)),
            Project::Test => match file.for_test_project() {
                Some(test) => Ok(Some(test)),
                None => Err(ApiArgsError::NoTestProject {
                    path: self.credentials.clone(),
                }),
            },
        }
    }

    /// Which project the client acts as, in words: "the test project 6f1c... of
    /// ./data/sandbox-credentials.json", or "the project of --token" when the flags name it.
    pub fn project_line(&self) -> Result<String, ApiArgsError> {
        let file = match self.credentials()? {
            Some(file) if self.token.is_none() => file,
            _ => return Ok("the project of --token".to_string()),
        };
        let which = match self.project {
            Project::Demo => "demo",
            Project::Test => "test",
        };
        Ok(format!(
            "the {which} project {} of {}",
            file.project_id,
            self.credentials.display()
        ))
    }

    /// A signing client from the flags and the credentials file (trusting `--ca-file`).
    pub fn client(&self) -> Result<MerchantClient, ApiArgsError> {
        let file = self.credentials()?;
        let from_file = |pick: fn(&SandboxCredentials) -> &str| {
            file.as_ref()
                .map(|c| pick(c).to_string())
                .unwrap_or_default()
        };
        let base_url = self
            .base_url
            .clone()
            .unwrap_or_else(|| from_file(|c| &c.base_url));
        let token = match &self.token {
            Some(t) => t.expose().clone(),
            None => from_file(|c| c.token.expose()),
        };
        let pem = match &self.private_key {
            Some(path) => {
                payments_client::files::read_limited_string(path, payments_client::files::PEM)?
            }
            None => from_file(|c| c.private_key_pem.expose()),
        };
        let client = MerchantClient::new(&base_url, &token, &pem)?;
        Ok(match &self.ca_file {
            // The client's own settings (a 30 s timeout), trusting the CA file too.
            Some(_) => client.with_http_client(self.http_client(
                reqwest::Client::builder().timeout(std::time::Duration::from_secs(30)),
            )?),
            None => client,
        })
    }
}
