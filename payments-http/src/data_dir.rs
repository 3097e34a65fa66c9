//! The data dir's files: the directory and the database are owner-only (0700 and 0600; SQLite
//! gives `-wal` and `-shm` the database's mode).

use std::path::Path;

/// The database file in the data dir.
pub const DATABASE_FILE: &str = "payments.db";

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

/// Makes `db` owner-only before SQLite opens it: a missing database is created empty with mode
/// 0600 (SQLite then creates `-wal` and `-shm` with the same mode); an existing database,
/// `-wal` or `-shm` that others may read is tightened to 0600, with a warning.
pub fn prepare_database(db: &Path) -> Result<(), String> {
    #[cfg(unix)]
    {
        use std::os::unix::fs::OpenOptionsExt;
        match std::fs::OpenOptions::new()
            .write(true)
            .create_new(true)
            .mode(0o600)
            .open(db)
        {
            Ok(_) => {}
            Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => {}
            Err(e) => return Err(format!("cannot create {}: {e}", db.display())),
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
fn tighten(file: &Path) -> Result<(), String> {
    use std::os::unix::fs::PermissionsExt;
    let Ok(meta) = std::fs::metadata(file) else {
        return Ok(());
    };
    let mode = meta.permissions().mode() & 0o777;
    if mode & 0o077 == 0 {
        return Ok(());
    }
    std::fs::set_permissions(file, std::fs::Permissions::from_mode(0o600))
        .map_err(|e| format!("cannot make {} owner-only: {e}", file.display()))?;
    tracing::warn!(
        file = %file.display(),
        was = format!("{mode:o}"),
        "was readable by other users: now 0600 (owner only)"
    );
    Ok(())
}
