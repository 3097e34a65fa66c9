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
use crate::files::Limit;

/// The database file in the data dir.
pub const DATABASE_FILE: &str = "payments.db";

/// The default key file in the data dir.
pub const SECRETS_KEY_FILE: &str = "secrets.key";

/// A key file is one line of base64: 64 KiB is far more than it needs.
pub const KEY_FILE_LIMIT: Limit = Limit::new(64 * 1024, "a secrets key file");

/// Creates `dir` (and missing parents) owner-only, 0700. An existing directory is left as it
/// is, with a warning if others may read it (the files inside are owner-only anyway).
pub fn create_dir(dir: &Path) -> Result<(), String> {
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
        .map_err(|e| format!("cannot create {}: {e}", dir.display()))
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
pub fn sealing_keys(settings: &Settings, rng: &dyn RandomSource) -> Result<SealingKeys, String> {
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
pub fn read_key_file(path: &Path) -> Result<SealingKey, String> {
    let what = |m: &dyn std::fmt::Display| format!("secrets key file {}: {m}", path.display());
    let text = crate::files::read_limited_string(path, KEY_FILE_LIMIT)
        .map_err(|e| format!("secrets key file: {e}"))?;
    let bytes = STANDARD
        .decode(text.trim())
        .map_err(|_| what(&"not base64"))?;
    let bytes: [u8; KEY_LEN] = bytes
        .try_into()
        .map_err(|b: Vec<u8>| what(&format!("{} bytes, expected {KEY_LEN}", b.len())))?;
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
pub fn create_key_file(path: &Path, rng: &dyn RandomSource) -> Result<SealingKey, String> {
    let err = |e: std::io::Error| format!("cannot create secrets key file {}: {e}", path.display());
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
        Err(e) => Err(err(e)),
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
pub fn lock(dir: &Path) -> Result<DataDirLock, String> {
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
        .map_err(|e| format!("cannot open the lock file {}: {e}", path.display()))?;
    match file.try_lock() {
        Ok(()) => {}
        Err(std::fs::TryLockError::WouldBlock) => {
            let mut holder = String::new();
            let _ = file.read_to_string(&mut holder);
            let holder = holder.trim();
            let who = if holder.is_empty() {
                "another process".to_string()
            } else {
                format!("another process (pid {holder})")
            };
            return Err(format!(
                "the data dir {} is in use: {who} holds {}; one server per data dir (stop it, \
                 or give this one another --data-dir)",
                dir.display(),
                path.display()
            ));
        }
        Err(std::fs::TryLockError::Error(e)) => {
            return Err(format!("cannot lock {}: {e}", path.display()));
        }
    }
    file.set_len(0)
        .and_then(|()| file.rewind())
        .and_then(|()| file.write_all(format!("{}\n", std::process::id()).as_bytes()))
        .map_err(|e| format!("cannot write {}: {e}", path.display()))?;
    Ok(DataDirLock { _file: file, path })
}
