//! The files the server and its commands read, each read with [`read_limited`] and the limit of
//! its kind (docs/operations.md lists them): a path that names something endless or huge
//! (`/dev/zero`, a FIFO, a log) is refused with a message naming the file and the limit, after
//! reading one byte past the limit.

pub use payments_client::files::{
    read_limited, read_limited_string, FileError, Limit, CREDENTIALS,
};

/// One PEM key or certificate chain: a public key given to `key register --file`, the TLS
/// certificate chain and key, a private key. 64 KiB.
pub const PEM: Limit = Limit::new(64 * 1024, "a PEM key or certificate");

/// The callback client's extra CA certificates (`callback_ca_file`): room for a whole CA
/// bundle. 1 MiB.
pub const CA_BUNDLE: Limit = Limit::new(1024 * 1024, "a CA certificate bundle");

/// A project contract (`--contract-file`). 64 KiB.
pub const CONTRACT: Limit = Limit::new(64 * 1024, "a contract (JSON)");

/// The settings file (`--config`). 1 MiB.
pub const CONFIG: Limit = Limit::new(1024 * 1024, "a settings file (TOML)");

/// A bank catalog replacing the embedded one (`bank_catalog`). 8 MiB.
pub const BANK_CATALOG: Limit = Limit::new(8 * 1024 * 1024, "a bank catalog (JSON)");
