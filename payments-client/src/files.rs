//! Reading a file with a size limit: every file the workspace's programs read (keys,
//! certificates, settings, the bank catalog, the credentials file, contracts) goes through
//! [`read_limited`], so a wrong path (`/dev/zero`, a FIFO, a multi-gigabyte log) is refused
//! after `limit + 1` bytes instead of being read into memory whole.
//!
//! It lives in this crate because this is the lowest crate of the workspace that reads files
//! (the credentials file); `payments-http` re-exports it with the server's limits.

use std::fmt;
use std::io::{self, Read};
use std::path::{Path, PathBuf};

/// The most a file of one kind may hold, and what the kind is called in the error message.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Limit {
    /// The largest accepted size in bytes.
    pub bytes: u64,
    /// What the file is, for the message (`"a PEM key or certificate"`).
    pub what: &'static str,
}

impl Limit {
    /// A limit of `bytes` for files that are `what`.
    pub const fn new(bytes: u64, what: &'static str) -> Limit {
        Limit { bytes, what }
    }
}

impl fmt::Display for Limit {
    /// `64 KiB`, `8 MiB`, or bytes when neither divides.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        const KIB: u64 = 1024;
        const MIB: u64 = 1024 * 1024;
        match self.bytes {
            b if b >= MIB && b % MIB == 0 => write!(f, "{} MiB", b / MIB),
            b if b >= KIB && b % KIB == 0 => write!(f, "{} KiB", b / KIB),
            b => write!(f, "{b} bytes"),
        }
    }
}

/// The sandbox credentials file (`sandbox-credentials.json`): 64 KiB.
pub const CREDENTIALS: Limit = Limit::new(64 * 1024, "a credentials file");

/// One PEM key or certificate chain: a private key, a public key given to `key register
/// --file`, the TLS certificate chain and key. 64 KiB.
pub const PEM: Limit = Limit::new(64 * 1024, "a PEM key or certificate");

/// Why a file could not be read.
#[derive(Debug, thiserror::Error)]
pub enum FileError {
    /// Opening or reading failed.
    #[error("cannot read {}: {source}", path.display())]
    Read {
        /// The file.
        path: PathBuf,
        /// The I/O error.
        #[source]
        source: io::Error,
    },
    /// The file holds more than the limit (nothing past `limit + 1` bytes was read).
    #[error("{} is larger than {limit}, the limit for {}", path.display(), limit.what)]
    TooLarge {
        /// The file.
        path: PathBuf,
        /// The limit it exceeds.
        limit: Limit,
    },
    /// The file is not UTF-8 text (from [`read_limited_string`]).
    #[error("{} is not UTF-8 text", path.display())]
    NotText {
        /// The file.
        path: PathBuf,
    },
}

/// The contents of `path`, at most `limit.bytes` of them: a longer file (or an endless one,
/// `/dev/zero`, a FIFO whose writer does not stop) is refused with [`FileError::TooLarge`]
/// after reading `limit.bytes + 1` bytes. The size is what is read, not what the metadata
/// says, so special files are limited too.
pub fn read_limited(path: &Path, limit: Limit) -> Result<Vec<u8>, FileError> {
    let read_err = |source| FileError::Read {
        path: path.to_path_buf(),
        source,
    };
    let file = std::fs::File::open(path).map_err(read_err)?;
    let mut bytes = Vec::new();
    file.take(limit.bytes.saturating_add(1))
        .read_to_end(&mut bytes)
        .map_err(read_err)?;
    if bytes.len() as u64 > limit.bytes {
        return Err(FileError::TooLarge {
            path: path.to_path_buf(),
            limit,
        });
    }
    Ok(bytes)
}

/// [`read_limited`] for a text file: UTF-8 or [`FileError::NotText`].
pub fn read_limited_string(path: &Path, limit: Limit) -> Result<String, FileError> {
    String::from_utf8(read_limited(path, limit)?).map_err(|_| FileError::NotText {
        path: path.to_path_buf(),
    })
}

/// Writes `bytes` to a new file at `path` that only its owner can read (mode 0600 on Unix),
/// and syncs it: for private keys and credentials. An existing file is never overwritten
/// (`ErrorKind::AlreadyExists`).
///
/// # Errors
/// The file system's error.
pub fn write_private(path: &Path, bytes: &[u8]) -> io::Result<()> {
    use std::io::Write as _;
    let mut opts = std::fs::OpenOptions::new();
    opts.write(true).create_new(true);
    #[cfg(unix)]
    {
        use std::os::unix::fs::OpenOptionsExt;
        opts.mode(0o600);
    }
    let mut f = opts.open(path)?;
    f.write_all(bytes)?;
    f.sync_all()
}

#[cfg(test)]
mod tests {
    use super::*;

    const SMALL: Limit = Limit::new(16, "a test file");

    #[test]
    fn a_file_up_to_the_limit_is_read_and_one_byte_more_is_refused() {
        let dir =
            std::env::temp_dir().join(format!("payments-client-files-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let file = dir.join("f");
        std::fs::write(&file, [b'a'; 16]).unwrap();
        assert_eq!(read_limited(&file, SMALL).unwrap(), [b'a'; 16]);
        assert_eq!(read_limited_string(&file, SMALL).unwrap(), "a".repeat(16));
        std::fs::write(&file, [b'a'; 17]).unwrap();
        let e = read_limited(&file, SMALL).unwrap_err();
        assert!(matches!(e, FileError::TooLarge { .. }), "{e}");
        assert_eq!(
            e.to_string(),
            format!(
                "{} is larger than 16 bytes, the limit for a test file",
                file.display()
            )
        );
        std::fs::write(&file, [0xff; 4]).unwrap();
        let e = read_limited_string(&file, SMALL).unwrap_err();
        assert!(matches!(e, FileError::NotText { .. }), "{e}");
        std::fs::remove_dir_all(&dir).unwrap();
        let e = read_limited(&file, SMALL).unwrap_err();
        assert!(matches!(e, FileError::Read { .. }), "{e}");
        assert!(e.to_string().contains(&file.display().to_string()), "{e}");
    }

    #[cfg(unix)]
    #[test]
    fn an_endless_file_is_refused_at_the_limit() {
        let e = read_limited(Path::new("/dev/zero"), CREDENTIALS).unwrap_err();
        assert_eq!(
            e.to_string(),
            "/dev/zero is larger than 64 KiB, the limit for a credentials file"
        );
    }

    /// A FIFO whose writer never stops: refused once the limit is passed, not read forever.
    #[cfg(unix)]
    #[test]
    fn an_endless_fifo_is_refused_at_the_limit() {
        let dir = std::env::temp_dir().join(format!("payments-client-fifo-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let fifo = dir.join("fifo");
        let made = std::process::Command::new("mkfifo").arg(&fifo).status();
        assert!(
            made.as_ref().is_ok_and(|s| s.success()),
            "mkfifo (coreutils) makes the FIFO: {made:?}"
        );
        let writer_path = fifo.clone();
        let writer = std::thread::spawn(move || {
            use std::io::Write;
            let mut w = std::fs::OpenOptions::new()
                .write(true)
                .open(&writer_path)
                .unwrap();
            // Ends when the reader closes its end (EPIPE).
            while w.write_all(&[b'x'; 4096]).is_ok() {}
        });
        let e = read_limited(&fifo, Limit::new(100_000, "a test file")).unwrap_err();
        assert!(matches!(e, FileError::TooLarge { .. }), "{e}");
        writer.join().unwrap();
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn limits_display_in_binary_units() {
        assert_eq!(CREDENTIALS.to_string(), "64 KiB");
        assert_eq!(Limit::new(8 * 1024 * 1024, "x").to_string(), "8 MiB");
        assert_eq!(Limit::new(1500, "x").to_string(), "1500 bytes");
    }

    #[cfg(unix)]
    #[test]
    fn a_private_file_is_the_owners_alone_and_never_overwritten() {
        use std::os::unix::fs::PermissionsExt;
        let dir =
            std::env::temp_dir().join(format!("payments-client-private-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let file = dir.join("key.pem");
        write_private(&file, b"secret").unwrap();
        let mode = std::fs::metadata(&file).unwrap().permissions().mode() & 0o777;
        assert_eq!(mode, 0o600, "{mode:o}");
        let again = write_private(&file, b"other").unwrap_err();
        assert_eq!(again.kind(), io::ErrorKind::AlreadyExists);
        assert_eq!(std::fs::read(&file).unwrap(), b"secret");
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
