//! A merchant builds the client without the server's stack: none of its crates is among the
//! client's normal dependencies.

use std::process::Command;

#[test]
fn no_server_crates_among_normal_dependencies() {
    let out = Command::new(env!("CARGO"))
        .args([
            "tree",
            "-p",
            "payments-client",
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
    for expected in ["payments-core ", "reqwest "] {
        assert!(
            tree.lines().any(|l| l.starts_with(expected)),
            "the tree lists the real dependencies ({expected}missing):\n{tree}"
        );
    }
    for banned in [
        "axum ",
        "axum-core ",
        "axum-server ",
        "rusqlite ",
        "libsqlite3-sys ",
        "clap ",
        "governor ",
        "payments-http ",
        "payments-server ",
        "payments-store-sqlite ",
    ] {
        assert!(
            !tree.lines().any(|l| l.starts_with(banned)),
            "payments-client depends on {banned}:\n{tree}"
        );
    }
}
