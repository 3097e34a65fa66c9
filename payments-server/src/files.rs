//! The files the server and its commands read, each read with [`read_limited`] and the limit of
//! its kind (docs/operations.md lists them): a path that names something endless or huge
//! (`/dev/zero`, a FIFO, a log) is refused with a message naming the file and the limit, after
//! reading one byte past the limit.

use std::path::Path;

pub use payments_client::files::{
    read_limited, read_limited_string, write_private, FileError, Limit, CREDENTIALS, PEM,
};
use payments_http::dispatcher::{pem_roots, DispatcherError};

/// The callback client's extra CA certificates (`callback_ca_file`): room for a whole CA
/// bundle. 1 MiB.
pub const CA_BUNDLE: Limit = Limit::new(1024 * 1024, "a CA certificate bundle");

/// A project contract (`--contract-file`). 64 KiB.
pub const CONTRACT: Limit = Limit::new(64 * 1024, "a contract (JSON)");

/// The settings file (`--config`). 1 MiB.
pub const CONFIG: Limit = Limit::new(1024 * 1024, "a settings file (TOML)");

/// A bank catalog replacing the embedded one (`bank_catalog`). 8 MiB.
pub const BANK_CATALOG: Limit = Limit::new(8 * 1024 * 1024, "a bank catalog (JSON)");

/// The certificates of a PEM file (`callback_ca_file`, `upstream_ca_file`), read with the
/// [`CA_BUNDLE`] limit; at least one is required.
///
/// # Errors
/// [`DispatcherError::CaFile`], naming the file: unreadable, over the limit, or without a
/// certificate.
pub fn read_pem_roots(
    path: &Path,
) -> Result<Vec<rustls::pki_types::CertificateDer<'static>>, DispatcherError> {
    let ca_error = |reason: String| DispatcherError::CaFile {
        path: path.display().to_string(),
        reason,
    };
    let pem = read_limited(path, CA_BUNDLE).map_err(|e| match e {
        FileError::Read { source, .. } => ca_error(source.to_string()),
        FileError::TooLarge { limit, .. } => {
            ca_error(format!("larger than {limit}, the limit for {}", limit.what))
        }
        e => ca_error(e.to_string()),
    })?;
    pem_roots(&pem).map_err(|e| ca_error(e.to_string()))
}
