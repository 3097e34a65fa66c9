//! One server per data dir: a second `serve` exits non-zero, naming the holder; once the
//! first stops, a new one starts.

use std::process::Command;

use crate::support::{free_port, serve, wait_ready};

fn second_serve(dir: &std::path::Path) -> std::process::Output {
    Command::new(env!("CARGO_BIN_EXE_payments-server"))
        .arg("serve")
        .arg("--data-dir")
        .arg(dir)
        .args(["--listen", &format!("127.0.0.1:{}", free_port())])
        .args(["--operator-listen", &format!("127.0.0.1:{}", free_port())])
        .args(["--cabinet-listen", &format!("127.0.0.1:{}", free_port())])
        .env_remove("PAYMENTS_CONFIG")
        .output()
        .expect("payments-server runs")
}

#[tokio::test]
async fn a_second_serve_on_one_data_dir_exits_non_zero() {
    let dir = tempfile::tempdir().unwrap();
    let (mut first, base, _) = serve(dir.path(), &[]);
    wait_ready(&mut first, &base).await;
    let pid = first.0.id();

    let path = dir.path().to_path_buf();
    let out = tokio::task::spawn_blocking(move || second_serve(&path))
        .await
        .unwrap();
    assert!(!out.status.success(), "the second serve must fail");
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("is in use"), "{err}");
    assert!(
        err.contains(&format!("pid {pid}")),
        "names the holder: {err}"
    );
    // The first one still serves.
    wait_ready(&mut first, &base).await;

    // Stopped (SIGKILL: the operating system releases the lock with the process), the data
    // dir takes a new server.
    first.0.kill().unwrap();
    first.0.wait().unwrap();
    let (mut next, base, _) = serve(dir.path(), &[]);
    wait_ready(&mut next, &base).await;
}
