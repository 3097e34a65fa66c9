//! The data dir's files: the directory and the database are owner-only (0700 and 0600; SQLite
//! gives `-wal` and `-shm` the database's mode), and the key file that seals callback secrets
//! at rest (`secrets.key`, or the `secrets_key_file` setting).
//!
//! A key file holds 32 random bytes in base64 (one line), mode 0600. The server creates the
//! configured one when it is missing (the first start of a data dir, or of an older data dir
//! whose secrets are still plaintext); previous key files (`secrets_previous_key_files`) must
//! exist. docs/operations.md describes rotation and backups.

use std::io::Write;
use std::path::{Path, PathBuf};

use base64::engine::general_purpose::STANDARD;
use base64::Engine as _;
use payments_core::sealing::{SealingKey, SealingKeys, KEY_LEN};
use payments_core::RandomSource;

use crate::config::Settings;
use crate::files::{FileError, Limit};

/// The database file in the data dir.
pub const DATABASE_FILE: &str = "payments.db";

/// The default key file in the data dir.
pub const SECRETS_KEY_FILE: &str = "secrets.key";

/// A key file is one line of base64: 64 KiB is far more than it needs.
pub const KEY_FILE_LIMIT: Limit = Limit::new(64 * 1024, "a secrets key file");

/// Why the data dir, its lock or a secrets key file could not be used.
#[non_exhaustive]
#[derive(Debug, thiserror::Error)]
pub enum DataDirError {
    /// A directory could not be created.
    #[error("cannot create {}: {source}", dir.display())]
    CreateDir {
        /// The directory.
        dir: PathBuf,
        /// Why.
        #[source]
        source: std::io::Error,
    },
    /// A key file could not be read (missing, unreadable, over its limit, not text).
    #[error("secrets key file: {0}")]
    ReadKey(#[source] FileError),
    /// A key file does not hold one line of base64.
    #[error("secrets key file {}: not base64", path.display())]
    KeyNotBase64 {
        /// The key file.
        path: PathBuf,
        /// The decoder's complaint.
        #[source]
        source: base64::DecodeError,
    },
    /// A key file holds another number of bytes than a key has.
    #[error("secrets key file {}: {len} bytes, expected {KEY_LEN}", path.display())]
    KeyLength {
        /// The key file.
        path: PathBuf,
        /// The bytes it holds.
        len: usize,
    },
    /// A new key file could not be written.
    #[error("cannot create secrets key file {}: {source}", path.display())]
    CreateKey {
        /// The key file.
        path: PathBuf,
        /// Why.
        #[source]
        source: std::io::Error,
    },
    /// The lock file could not be opened.
    #[error("cannot open the lock file {}: {source}", path.display())]
    OpenLock {
        /// The lock file.
        path: PathBuf,
        /// Why.
        #[source]
        source: std::io::Error,
    },
    /// Another process holds the lock.
    #[error(
        "the data dir {} is in use: {} holds {}; one server per data dir (stop it, or give \
         this one another --data-dir)",
        dir.display(),
        holder.as_deref().map_or_else(
            || "another process".to_string(),
            |pid| format!("another process (pid {pid})")
        ),
        path.display()
    )]
    InUse {
        /// The data dir.
        dir: PathBuf,
        /// The lock file.
        path: PathBuf,
        /// The process id the lock file names, if it names one.
        holder: Option<String>,
    },
    /// The lock could not be taken for another reason than a holder.
    #[error("cannot lock {}: {source}", path.display())]
    Lock {
        /// The lock file.
        path: PathBuf,
        /// Why.
        #[source]
        source: std::io::Error,
    },
    /// This process's id could not be written into the lock file.
    #[error("cannot write {}: {source}", path.display())]
    WriteLock {
        /// The lock file.
        path: PathBuf,
        /// Why.
        #[source]
        source: std::io::Error,
    },
}

/// Creates `dir` (and missing parents) owner-only, 0700. An existing directory is left as it
/// is, with a warning if others may read it (the files inside are owner-only anyway).
pub fn create_dir(dir: &Path) -> Result<(), DataDirError> {
    let mut builder = std::fs::DirBuilder::new();
    builder.recursive(true);
    #[cfg(unix)]
    {
        use std::os::unix::fs::{DirBuilderExt, PermissionsExt};
        if let Ok(meta) = std::fs::metadata(dir) {
            let mode = meta.permissions().mode() & 0o777;
            if meta.is_dir() && mode & 0o077 != 0 {
                tracing::warn!(
                    dir = %dir.display(),
                    mode = format!("{mode:o}"),
                    "the data dir is open to other users (chmod 700 it); its files are owner-only"
                );
            }
        }
        builder.mode(0o700);
    }
    builder
        .create(dir)
        .map_err(|source| DataDirError::CreateDir {
            dir: dir.to_path_buf(),
            source,
        })
}

/// The configured key file: `secrets_key_file`, else `<data_dir>/secrets.key`.
pub fn key_file(settings: &Settings) -> PathBuf {
    settings
        .secrets
        .key_file
        .clone()
        .unwrap_or_else(|| settings.data_dir.join(SECRETS_KEY_FILE))
}

/// The sealing keys of the settings: the key file (created with a key from `rng` when
/// missing) seals, the previous key files still open.
pub fn sealing_keys(
    settings: &Settings,
    rng: &dyn RandomSource,
) -> Result<SealingKeys, DataDirError> {
    let path = key_file(settings);
    let current = if path.exists() {
        read_key_file(&path)?
    } else {
        create_key_file(&path, rng)?
    };
    let previous = settings
        .secrets
        .previous_key_files
        .iter()
        .map(PathBuf::as_path)
        .map(read_key_file)
        .collect::<Result<Vec<_>, _>>()?;
    Ok(SealingKeys::new(current, previous))
}

/// Reads a key file: one line of base64 holding 32 bytes.
pub fn read_key_file(path: &Path) -> Result<SealingKey, DataDirError> {
    let text =
        crate::files::read_limited_string(path, KEY_FILE_LIMIT).map_err(DataDirError::ReadKey)?;
    let bytes = STANDARD
        .decode(text.trim())
        .map_err(|source| DataDirError::KeyNotBase64 {
            path: path.to_path_buf(),
            source,
        })?;
    let bytes: [u8; KEY_LEN] = bytes
        .try_into()
        .map_err(|b: Vec<u8>| DataDirError::KeyLength {
            path: path.to_path_buf(),
            len: b.len(),
        })?;
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        if let Ok(meta) = std::fs::metadata(path) {
            let mode = meta.permissions().mode() & 0o777;
            if mode & 0o077 != 0 {
                tracing::warn!(
                    file = %path.display(),
                    mode = format!("{mode:o}"),
                    "the secrets key file is readable by other users (chmod 600 it)"
                );
            }
        }
    }
    Ok(SealingKey::from_bytes(bytes))
}

/// Writes a new key file (mode 0600) unless one appears meanwhile: the key is written to a
/// temporary file beside it and linked into place, so a concurrent start or command either
/// creates the file or reads the complete one the other created.
pub fn create_key_file(path: &Path, rng: &dyn RandomSource) -> Result<SealingKey, DataDirError> {
    if let Some(dir) = path
        .parent()
        .filter(|d| !d.as_os_str().is_empty() && !d.exists())
    {
        create_dir(dir)?;
    }
    let bytes = SealingKey::generate_bytes(rng);
    let mut tmp = path.as_os_str().to_owned();
    tmp.push(format!(".tmp-{}", std::process::id()));
    let tmp = PathBuf::from(tmp);
    let mut opts = std::fs::OpenOptions::new();
    opts.write(true).create(true).truncate(true);
    #[cfg(unix)]
    {
        use std::os::unix::fs::OpenOptionsExt;
        opts.mode(0o600);
    }
    let written = (|| {
        let mut f = opts.open(&tmp)?;
        writeln!(f, "{}", STANDARD.encode(bytes))?;
        f.sync_all()?;
        std::fs::hard_link(&tmp, path)
    })();
    let _ = std::fs::remove_file(&tmp);
    match written {
        Ok(()) => {
            tracing::info!(file = %path.display(), "created the key that seals callback secrets at rest: back it up apart from the database");
            Ok(SealingKey::from_bytes(bytes))
        }
        Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => read_key_file(path),
        Err(source) => Err(DataDirError::CreateKey {
            path: path.to_path_buf(),
            source,
        }),
    }
}

/// The lock file in the data dir: held by a serving process for its whole life.
pub const LOCK_FILE: &str = "payments.lock";

/// The lock of a data dir, held while this value lives (the operating system releases it when
/// the process ends, also by a crash or `kill -9`, so a stale file never blocks a start). Two
/// servers over one data dir would both run the dispatcher and the sweeper and fight over the
/// same database; the second refuses to start instead.
#[derive(Debug)]
pub struct DataDirLock {
    _file: std::fs::File,
    path: PathBuf,
}

impl DataDirLock {
    /// The lock file's path.
    pub fn path(&self) -> &Path {
        &self.path
    }
}

/// Takes the data dir's lock ([`LOCK_FILE`], created 0600 when missing) and writes this
/// process's id into it; another holder is an error naming its process id.
pub fn lock(dir: &Path) -> Result<DataDirLock, DataDirError> {
    use std::io::{Read, Seek};
    let path = dir.join(LOCK_FILE);
    let mut options = std::fs::OpenOptions::new();
    options.read(true).write(true).create(true).truncate(false);
    #[cfg(unix)]
    {
        use std::os::unix::fs::OpenOptionsExt;
        options.mode(0o600);
    }
    let mut file = options
        .open(&path)
        .map_err(|source| DataDirError::OpenLock {
            path: path.clone(),
            source,
        })?;
    match file.try_lock() {
        Ok(()) => {}
        Err(std::fs::TryLockError::WouldBlock) => {
            let mut holder = String::new();
            let _ = file.read_to_string(&mut holder);
            let holder = Some(holder.trim().to_string()).filter(|h| !h.is_empty());
            return Err(DataDirError::InUse {
                dir: dir.to_path_buf(),
                path,
                holder,
            });
        }
        Err(std::fs::TryLockError::Error(source)) => {
            return Err(DataDirError::Lock { path, source });
        }
    }
    file.set_len(0)
        .and_then(|()| file.rewind())
        .and_then(|()| file.write_all(format!("{}\n", std::process::id()).as_bytes()))
        .map_err(|source| DataDirError::WriteLock {
            path: path.clone(),
            source,
        })?;
    Ok(DataDirLock { _file: file, path })
}
