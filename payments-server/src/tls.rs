//! TLS certificates reloaded without a restart: on SIGHUP, and when the certificate or key
//! file changes (checked every `tls_watch_interval`). A pair that does not load (half
//! written, key not matching) is refused with an error in the log and the certificate in use
//! stays; new connections get the new certificate, open ones keep theirs.

use std::path::{Path, PathBuf};
use std::time::{Duration, SystemTime};

use axum_server::tls_rustls::RustlsConfig;
use tokio::sync::watch;

/// What identifies a version of a file: its modification time and length.
fn stamp(path: &Path) -> Option<(SystemTime, u64)> {
    let meta = std::fs::metadata(path).ok()?;
    Some((meta.modified().ok()?, meta.len()))
}

/// Why a certificate and key were not loaded.
#[non_exhaustive]
#[derive(Debug, thiserror::Error)]
pub enum ReloadError {
    /// A file could not be read (it names the file).
    #[error(transparent)]
    File(#[from] crate::files::FileError),
    /// The files do not make a certificate and its key.
    #[error("TLS certificate or key: {0}")]
    Pair(#[source] std::io::Error),
}

/// Loads `cert` and `key` (read with the PEM size limit) into `config`.
pub async fn reload(config: &RustlsConfig, cert: &Path, key: &Path) -> Result<(), ReloadError> {
    let read = |path: &Path| crate::files::read_limited(path, crate::files::PEM);
    let (cert_pem, key_pem) = (read(cert)?, read(key)?);
    config
        .reload_from_pem(cert_pem, key_pem)
        .await
        .map_err(ReloadError::Pair)
}

/// Reloads `config` on SIGHUP and whenever `cert` or `key` changes, until `stop` turns true.
pub async fn watch(
    config: RustlsConfig,
    cert: PathBuf,
    key: PathBuf,
    interval: Duration,
    mut stop: watch::Receiver<bool>,
) {
    #[cfg(unix)]
    let mut hangup = tokio::signal::unix::signal(tokio::signal::unix::SignalKind::hangup()).ok();
    let mut seen = (stamp(&cert), stamp(&key));
    loop {
        #[cfg(unix)]
        let sighup = async {
            match hangup.as_mut() {
                Some(s) => {
                    s.recv().await;
                }
                None => std::future::pending::<()>().await,
            }
        };
        #[cfg(not(unix))]
        let sighup = std::future::pending::<()>();
        let why = tokio::select! {
            _ = stop.changed() => return,
            () = sighup => "SIGHUP",
            () = tokio::time::sleep(interval) => {
                let now = (stamp(&cert), stamp(&key));
                if now == seen {
                    continue;
                }
                "the files changed"
            }
        };
        seen = (stamp(&cert), stamp(&key));
        match reload(&config, &cert, &key).await {
            Ok(()) => tracing::info!(
                reason = why,
                cert = %cert.display(),
                "TLS certificate reloaded"
            ),
            Err(e) => tracing::error!(
                reason = why,
                cert = %cert.display(),
                error = %e,
                "TLS certificate not reloaded: the one in use stays"
            ),
        }
    }
}
