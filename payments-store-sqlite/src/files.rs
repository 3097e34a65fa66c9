//! The database's files are its owner's alone: payments, credentials' hashes, sealed secrets
//! and the cabinet's users live in them.

use std::path::Path;

use crate::OpenError;

/// Makes the database at `db` owner-only before SQLite opens it: a missing database is
/// created empty with mode 0600 (SQLite then gives its `-wal` and `-shm` files the same
/// mode); an existing database, `-wal` or `-shm` that others may read is set to 0600, with a
/// warning. Not on Unix, nothing.
pub(crate) fn owner_only(db: &Path) -> Result<(), OpenError> {
    #[cfg(unix)]
    {
        use std::os::unix::fs::OpenOptionsExt;
        if db.as_os_str().is_empty() || db == Path::new(":memory:") {
            return Ok(());
        }
        let failed = |source| OpenError::Files {
            path: db.to_path_buf(),
            source,
        };
        match std::fs::OpenOptions::new()
            .write(true)
            .create_new(true)
            .mode(0o600)
            .open(db)
        {
            Ok(_) => {}
            Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => {}
            Err(e) => return Err(failed(e)),
        }
        for suffix in ["", "-wal", "-shm"] {
            let mut name = db.as_os_str().to_owned();
            name.push(suffix);
            tighten(Path::new(&name))?;
        }
    }
    #[cfg(not(unix))]
    let _ = db;
    Ok(())
}

/// Sets an existing file that group or others may access to 0600, with a warning.
#[cfg(unix)]
fn tighten(file: &Path) -> Result<(), OpenError> {
    use std::os::unix::fs::PermissionsExt;
    let Ok(meta) = std::fs::metadata(file) else {
        return Ok(());
    };
    let mode = meta.permissions().mode() & 0o777;
    if mode & 0o077 == 0 {
        return Ok(());
    }
    std::fs::set_permissions(file, std::fs::Permissions::from_mode(0o600)).map_err(|source| {
        OpenError::Files {
            path: file.to_path_buf(),
            source,
        }
    })?;
    tracing::warn!(
        file = %file.display(),
        was = format!("{mode:o}"),
        "was readable by other users: now 0600 (owner only)"
    );
    Ok(())
}
