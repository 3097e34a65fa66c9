//! The core performs no I/O: no runtime, socket, HTTP or database crate among its normal
//! dependencies, and no direct use of the system clock or the OS random generator.

use std::path::Path;
use std::process::Command;

#[test]
fn no_io_crates_among_normal_dependencies() {
    let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".into());
    let out = Command::new(cargo)
        .args([
            "tree",
            "-p",
            "payments-core",
            "-e",
            "normal",
            "--prefix",
            "none",
            "--offline",
        ])
        .current_dir(env!("CARGO_MANIFEST_DIR"))
        .output()
        .expect("cargo tree runs");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let tree = String::from_utf8_lossy(&out.stdout);
    assert!(
        tree.contains("ed25519-dalek"),
        "the tree lists the real dependencies:\n{tree}"
    );
    for banned in ["tokio ", "hyper ", "axum ", "reqwest ", "rusqlite ", "mio "] {
        assert!(
            !tree.lines().any(|l| l.starts_with(banned)),
            "payments-core depends on {banned}:\n{tree}"
        );
    }
}

fn sources(dir: &Path, out: &mut Vec<(String, String)>) {
    for entry in std::fs::read_dir(dir).unwrap() {
        let path = entry.unwrap().path();
        if path.is_dir() {
            sources(&path, out);
        } else if path.extension().is_some_and(|e| e == "rs") {
            out.push((
                path.display().to_string(),
                std::fs::read_to_string(&path).unwrap(),
            ));
        }
    }
}

#[test]
fn no_system_clock_or_os_randomness_in_the_library() {
    let mut files = Vec::new();
    sources(
        &Path::new(env!("CARGO_MANIFEST_DIR")).join("src"),
        &mut files,
    );
    assert!(files.len() > 20);
    for (path, text) in files {
        for banned in [
            "SystemTime::now",
            "Instant::now",
            "OsRng",
            "thread_rng",
            "getrandom",
            "std::fs::",
            "std::net::TcpStream",
        ] {
            assert!(!text.contains(banned), "{path} uses {banned}");
        }
    }
}
